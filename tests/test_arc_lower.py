"""The proven arc lower bound: never above the symmetric optimum, tight, and below brute force."""

import functools
import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy.optimize import linprog, minimize

from hypothesis import given, settings
from hypothesis import strategies as st

from bounds.arc_lower import _Boxes, _exact_alpha, arc_lower
from verify.intervals import Iv
from constructions.cell import Cell
from constructions.closed_forms import arc_closed_form

CELL = Cell("softmax", "post_bare", "regression")
LS = list(range(2, 13)) + [16, 33, 64, 100, 256]


@functools.lru_cache(maxsize=None)
def r_sym(L: int) -> float:
    return arc_closed_form(CELL, L)["b"]


@functools.lru_cache(maxsize=None)
def bound(L: int) -> float:
    return arc_lower(L, r_sym(L))


@pytest.mark.parametrize("L", LS)
def test_bound_never_exceeds_symmetric_optimum(L):
    b = bound(L)
    assert isinstance(b, float)
    assert 0 <= b <= r_sym(L)
    if L <= 5:
        assert b == (L - 1) / 2


@pytest.mark.parametrize("L", [L for L in LS if L >= 6])
def test_bound_is_tight(L):
    # the branch and bound stops at rtol = 1e-4; assert a little slack above that
    assert r_sym(L) / bound(L) - 1 < 1.2e-4


@pytest.mark.parametrize("L", [8, 33])
def test_small_target_is_returned(L):
    target = 0.9 * r_sym(L)
    # the search stops once every box is within rtol of the target ...
    assert target / (1 + 1e-4) <= arc_lower(L, target) <= target
    # ... and with rtol = 0 it certifies the (unreachable) target itself: the cap
    assert arc_lower(L, target, rtol=0.0) == target


def test_box_budget_gives_a_weaker_valid_bound():
    L = 64
    weak = arc_lower(L, r_sym(L), max_boxes=50)
    assert 0 <= weak < bound(L)


def _inner_min(L: int, lam: float, n0: float) -> float:
    """``min |u|`` over ``C, u`` with ``|C + <u, v_n> - n| <= 1/2`` (``inf`` if infeasible).

    A feasible start from an LP (minimise ``max |u_k|``), then SLSQP on ``|u|^2``; the closed
    constraints give the infimum over the open ones whenever those are feasible.
    """
    n = np.arange(L + 1, dtype=float)
    th = np.arctan((n - n0) / lam)
    A = np.column_stack([np.ones_like(n), np.cos(th), np.sin(th)])
    # LP in (C, u1, u2, t): min t, -1/2 <= A z - n <= 1/2, |u_k| <= t
    A_ub = np.vstack([np.column_stack([A, np.zeros(L + 1)]),
                      np.column_stack([-A, np.zeros(L + 1)]),
                      [[0, 1, 0, -1], [0, -1, 0, -1], [0, 0, 1, -1], [0, 0, -1, -1]]])
    b_ub = np.concatenate([n + 0.5, 0.5 - n, np.zeros(4)])
    lp = linprog([0, 0, 0, 1], A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * 4, method="highs")
    if lp.status != 0:
        return math.inf
    cons = [{"type": "ineq", "fun": lambda z: A @ z - (n - 0.5), "jac": lambda z: A},
            {"type": "ineq", "fun": lambda z: (n + 0.5) - A @ z, "jac": lambda z: -A}]
    res = minimize(lambda z: z[1] ** 2 + z[2] ** 2, lp.x[:3],
                   jac=lambda z: np.array([0.0, 2 * z[1], 2 * z[2]]),
                   constraints=cons, method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000})
    z = res.x
    slack = np.concatenate([A @ z - (n - 0.5), (n + 0.5) - A @ z])
    assert slack.min() > -1e-7, "SLSQP left the feasible set"
    return math.hypot(z[1], z[2])


@pytest.mark.parametrize("L", [6, 8])
def test_brute_force_never_below_bound(L):
    rng = np.random.default_rng(L)
    b, lam_star = bound(L), arc_closed_form(CELL, L)["lambda"]
    lams = np.concatenate([np.exp(rng.uniform(math.log(0.3), math.log(40.0), 150)),
                           lam_star * np.exp(rng.uniform(0.0, 0.7, 150))])
    n0s = np.concatenate([rng.uniform(-2.0, L + 2.0, 150), L / 2 + rng.normal(0, 0.3, 150)])
    vals = [_inner_min(L, lam, n0) for lam, n0 in zip(lams, n0s)]
    finite = [v for v in vals if math.isfinite(v)]
    assert len(finite) >= 50
    assert min(finite) >= b * (1 - 1e-9)
    # the symmetric optimum itself is (nearly) reached by the samples: the bound is not vacuous
    assert min(finite) < 1.1 * r_sym(L)


def _few_counts_min(ns, lam: float, n0: float) -> float:
    """``min |u|`` with ``|C + <u, v_n> - n| <= 1/2`` on a few counts, by active sets (exact).

    The optimum of this convex problem in ``(C, u)`` minimises ``|u|`` on the affine set of at
    most three active constraints (Caratheodory on the KKT multipliers): two active counts fix
    the component of ``u`` along ``v_i - v_j``, three fix ``u``.  Every such candidate that
    satisfies all constraints (to 1e-9) is feasible, and the smallest is the optimum.
    """
    th = np.arctan((np.asarray(ns, dtype=float) - n0) / lam)
    V = np.column_stack([np.cos(th), np.sin(th)])
    best = math.inf
    for k in (2, 3):
        for idx in itertools.combinations(range(len(ns)), k):
            for signs in itertools.product((-0.5, 0.5), repeat=k):
                t = np.array([ns[i] + s for i, s in zip(idx, signs)])
                D = V[list(idx[1:])] - V[idx[0]]
                rhs = t[1:] - t[0]
                if k == 2:
                    u = D[0] * rhs[0] / (D[0] @ D[0])
                else:
                    if abs(np.linalg.det(D)) < 1e-300:
                        continue
                    u = np.linalg.solve(D, rhs)
                C = t[0] - V[idx[0]] @ u
                if np.all(np.abs(C + V @ u - np.asarray(ns)) <= 0.5 + 1e-9):
                    best = min(best, float(np.hypot(*u)))
    return best


@settings(max_examples=60, deadline=None)
@given(L=st.sampled_from([8, 33, 64, 256, 65536]),
       S_rel=st.floats(0.5, 3.0), c=st.floats(0.0, 1.0),
       log_width=st.floats(-9.0, -1.0), aspect=st.floats(-2.0, 2.0),
       point=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_box_bound_never_exceeds_the_four_count_optimum(L, S_rel, c, log_width, aspect, point):
    """Step 3 on one box: below the relaxed problem's optimum at any shape inside the box.

    The optimum at a shape is computed independently (LP + SLSQP on the four counts); the
    boxes range from tiny to wide, near the symmetric optimum and in the region where the
    four constraints are inconsistent.
    """
    S_star = 1 / arc_closed_form(CELL, L)["lambda"]
    width = math.exp(log_width)
    Sa = np.array([S_star * S_rel])
    Sb = Sa * (1 + width * math.exp(aspect))
    ca = np.array([c])
    cb = ca + width * S_star * L / 2
    target = 1e3 * r_sym(L)  # far above the optimum: the cap of (c) does not hide the bound
    boxes = _Boxes(L)
    b = float(boxes.bound(Sa, Sb, ca, cb, L / 2, target / (L - 1) + 1 + 1e-9)[0][0])
    S = float(Sa[0] + point[0] * (Sb[0] - Sa[0]))
    cc = float(ca[0] + point[1] * (cb[0] - ca[0]))
    lam = 1 / S
    n0 = L / 2 - cc * lam
    exact = _few_counts_min(boxes.ns, lam, n0)
    # an excluded box ((c) of the proof) only claims more than the target
    assert exact >= min(b, target) * (1 - 1e-7)


@pytest.mark.parametrize("L", [8, 64, 256])
@pytest.mark.parametrize("S_rel,c", [(0.9, 0.0), (0.95, 0.2), (0.6, 0.05)])
def test_box_bound_on_a_tiny_box_is_the_four_count_optimum(L, S_rel, c):
    """Not vacuous: on a tiny box the bound meets the optimum of the relaxed problem."""
    S = S_rel / arc_closed_form(CELL, L)["lambda"]
    Sa, Sb = np.array([S]), np.array([S * (1 + 1e-7)])
    ca, cb = np.array([c]), np.array([c + 1e-7])
    boxes = _Boxes(L)
    b, point = (float(x[0]) for x in boxes.bound(Sa, Sb, ca, cb, L / 2, 1e9))
    exact = _few_counts_min(boxes.ns, 1 / S, L / 2 - c / S)
    assert exact * (1 - 1e-4) < b <= exact * (1 + 1e-9)
    # the dual candidates contain the optimum: their best point ratio is the primal value
    assert point == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("L", [8, 64])
def test_loose_target_still_gives_the_tight_bound(L):
    # a target far above the optimum cannot be certified: the search aims at the optimum
    b = arc_lower(L, 50 * r_sym(L))
    assert r_sym(L) / (1 + 1.2e-4) <= b <= r_sym(L)


def _strictly_feasible(ns, lam: float, n0: float, slack: float = 1e-7) -> bool:
    """Whether some ``(C, u)`` has ``|C + <u, v_n> - n| <= 1/2 - slack`` on the counts (an LP)."""
    th = np.arctan((np.asarray(ns, dtype=float) - n0) / lam)
    A = np.column_stack([np.ones_like(th), np.cos(th), np.sin(th)])
    n = np.asarray(ns, dtype=float)
    lp = linprog([0, 0, 0], A_ub=np.vstack([A, -A]),
                 b_ub=np.concatenate([n + 0.5 - slack, 0.5 - slack - n]),
                 bounds=[(None, None)] * 3, method="highs")
    return lp.status == 0


def _box_and_point(L, S_rel, gam, log_width, aspect, point):
    """The search's boxes at ``L``, one box of shapes ``[Sa, Sb] x [ca, cb]`` near the optimum
    (slope ``S_rel`` times the optimal ``S*``, offset ``gam`` half-lengths, relative width
    ``e^log_width`` stretched by ``e^aspect``) and the shape ``(S, c)`` at ``point`` of it."""
    S_star = 1 / arc_closed_form(CELL, L)["lambda"]
    width = math.exp(log_width)
    Sa = np.array([S_star * S_rel])
    Sb = Sa * (1 + width * math.exp(aspect))
    ca = np.array([gam * S_star * L / 2])
    cb = ca + width * S_star * L / 2
    S = float(Sa[0] + point[0] * (Sb[0] - Sa[0]))
    c = float(ca[0] + point[1] * (cb[0] - ca[0]))
    return _Boxes(L), (Sa, Sb, ca, cb), (S, c)


@settings(max_examples=80, deadline=None)
@given(L=st.sampled_from([8, 64, 1000, 4096, 65536, 1048576]), S_rel=st.floats(0.5, 50.0),
       gam=st.floats(0.0, 20.0),
       log_width=st.floats(-8.0, -1.0), aspect=st.floats(-2.0, 2.0),
       point=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_infeasible_boxes_hold_no_counting_shape(L, S_rel, gam, log_width, aspect, point):
    """Step 3b: a box called infeasible holds no shape at which the four constraints can be
    met (an LP at a shape of the box, with a little slack: open constraints)."""
    boxes, (Sa, Sb, ca, cb), (S, c) = _box_and_point(L, S_rel, gam, log_width, aspect, point)
    if not boxes.infeasible(Sa, Sb, ca, cb)[0]:
        return
    assert not _strictly_feasible(boxes.ns, 1 / S, L / 2 - c / S)


@pytest.mark.parametrize("L", [64, 4096, 65536])
def test_infeasible_boxes_are_found(L):
    """Not vacuous: small boxes of steeper arcs than the optimum are called infeasible (and are,
    by the LP), boxes of flatter arcs (which count, with a larger read-out) are not."""
    S_star = 1 / arc_closed_form(CELL, L)["lambda"]
    boxes = _Boxes(L)
    for S_rel, gam, steep in [(1.05, 0.0, True), (3.0, 2.0, True), (0.95, 0.0, False), (0.9, 1.0, False)]:
        Sa = np.array([S_star * S_rel])
        Sb, ca = Sa * (1 + 1e-4), np.array([gam * S_star * L / 2])
        cb = ca + 1e-4 * S_star * L / 2
        called = boxes.infeasible(Sa, Sb, ca, cb)[0]
        assert called == steep
        assert _strictly_feasible(boxes.ns, 1 / Sa[0], L / 2 - ca[0] / Sa[0]) != steep


def _farkas_ratio(ns, S, c, dps=60):
    """``|z.n| / (|z|_1/2)`` at a shape, ``z`` the cofactors of the rows ``(1, v_i)`` by mpmath
    determinants (an independent computation), with the checks ``sum z = 0``, ``w(z) = 0``."""
    L = ns[-1]
    with mpmath.workdps(dps):
        T = [mpmath.mpf(c) + mpmath.mpf(S) * (n - mpmath.mpf(L) / 2) for n in ns]
        V = [[1, 1 / mpmath.sqrt(1 + t * t), t / mpmath.sqrt(1 + t * t)] for t in T]
        z = [(-1) ** i * mpmath.det(mpmath.matrix([V[j] for j in range(4) if j != i]))
             for i in range(4)]
        top = max(abs(x) for x in z)
        for col in range(3):
            assert abs(sum(z[i] * V[i][col] for i in range(4))) < mpmath.mpf(10) ** (10 - dps) * top
        return float(abs(sum(z[i] * ns[i] for i in range(4))) / (sum(abs(x) for x in z) / 2))


@settings(max_examples=60, deadline=None)
@given(ns=st.lists(st.integers(0, 10**6), min_size=4, max_size=4, unique=True),
       log_S=st.floats(-16.0, 0.0), c=st.floats(-30.0, 30.0))
def test_farkas_test_is_the_ratio_of_the_certificate(ns, log_S, c):
    """The two sides of step 3b at a point have the ratio ``|z.n|/(|z|_1/2)`` (mpmath
    cofactors), for any four counts and shape; their enclosures are ordered like it."""
    ns = sorted(ns)
    L = ns[-1]
    S = math.exp(log_S)
    boxes = _Boxes(L, ns)
    # the closed form takes T_i = c + S d_i exactly: enclose the float rounding of T
    box = Iv(np.array([c])) + Iv(np.array([S])) * boxes.ds
    lhs, rhs = boxes.farkas(box.lo[None], box.hi[None], np.array([S]), np.array([S]))
    ratio = _farkas_ratio(ns, S, c)
    mid = (lhs.lo[0] + lhs.hi[0]) / (rhs.lo[0] + rhs.hi[0])
    assert mid == pytest.approx(ratio, rel=1e-6)
    if lhs.lo[0] > rhs.hi[0]:
        assert ratio > 1
    if rhs.lo[0] > lhs.hi[0]:
        assert ratio < 1


@settings(max_examples=60, deadline=None)
@given(L=st.sampled_from([8, 64, 4096, 1048576]), S_rel=st.floats(0.3, 30.0),
       gam=st.floats(0.0, 3.0), log_width=st.floats(-6.0, 0.0), aspect=st.floats(-2.0, 2.0),
       point=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_farkas_enclosure_holds_every_shape_of_the_box(L, S_rel, gam, log_width, aspect, point):
    """Over a box, the enclosures of the two sides of step 3b contain their values at any shape
    of the box (recomputed from the mpmath ratio, whose right side is enclosed at that point)."""
    boxes, (Sa, Sb, ca, cb), (S, c) = _box_and_point(L, S_rel, gam, log_width, aspect, point)
    lhs, rhs = boxes.farkas(*boxes._tangent_range(Sa, Sb, ca, cb), Sa, Sb)
    with mpmath.workdps(40):
        T = [mpmath.mpf(c) + mpmath.mpf(S) * (int(n) - mpmath.mpf(L) / 2) for n in boxes.ns]
        t = [mpmath.tan(mpmath.atan(x) / 2) for x in T]
        left = 16 * mpmath.mpf(S) ** 2 * (mpmath.fprod(1 + x for x in t) + mpmath.fprod(1 - x for x in t)) / 2
        right = 0
        for i in range(4):
            s_i = mpmath.sqrt(1 + T[i] ** 2)
            right += (s_i ** 2 + s_i) * mpmath.fprod(2 * (1 + t[i] * t[j]) / abs(int(boxes.ns[i]) - int(boxes.ns[j]))
                                                     for j in range(4) if j != i)
        assert lhs.lo[0] <= left <= lhs.hi[0]
        assert rhs.lo[0] <= right <= rhs.hi[0]
        # and these exact values have the certificate's ratio
        assert float(left / right) == pytest.approx(_farkas_ratio([int(n) for n in boxes.ns], S, c), rel=1e-9)


def test_farkas_test_discards_large_boxes_deep_in_the_infeasible_region():
    """Not vacuous: at L = 2^20 a box of slopes from 2 to 4 times the optimum's (a factor 2
    wide, every foot between the middle and far outside) holds no counting shape and is
    called infeasible whole; a box of slightly flatter arcs than the optimum is not."""
    L = 1 << 20
    S_star = 1 / arc_closed_form(CELL, L)["lambda"]
    boxes = _Boxes(L)
    wide = boxes.infeasible(np.array([2 * S_star]), np.array([4 * S_star]),
                            np.array([0.0]), np.array([4 * S_star * L]))
    assert wide[0]
    # the optimum lies on the edge of the feasible set; a slightly flatter arc counts
    flat = boxes.infeasible(np.array([0.9 * S_star]), np.array([0.9 * S_star * (1 + 1e-9)]),
                            np.array([0.0]), np.array([1e-9]))
    assert not flat[0]
    assert _strictly_feasible(boxes.ns, 1 / (0.9 * S_star), L / 2)


@pytest.mark.parametrize("L", [4096, 16384])
def test_bound_at_larger_L_is_tight_and_below_the_optimum(L):
    """From L = 4096 the strip of step 5(a) is used: still at most R_sym, and within 1e-4."""
    b = arc_lower(L, r_sym(L))
    assert b <= r_sym(L) and r_sym(L) / b - 1 < 1.2e-4


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(st.floats(-1e3, 1e3) | st.floats(-1e-30, 1e-30), min_size=3, max_size=3),
                     min_size=1, max_size=8))
def test_exact_alpha_sums_to_zero_exactly_and_stays_close(rows):
    """The multipliers of step 3 sum to exactly zero (rational arithmetic on the floats) and, for
    rows that sum to zero up to rounding (as the candidates do), move by at most ``3 * 2^-50`` of
    a row's largest entry plus the row's exact sum."""
    alpha = np.array([r + [-(r[0] + r[1] + r[2])] for r in rows], dtype=float)
    out = _exact_alpha(alpha)
    for row, new in zip(alpha, out):
        assert sum(Fraction(float(x)) for x in new) == 0
        big = max(abs(row))
        if big >= 2.0 ** -900:
            assert max(abs(new - row)) <= 3 * 2.0 ** -50 * big + abs(float(sum(Fraction(float(x)) for x in row)))
        else:
            assert not new.any()
