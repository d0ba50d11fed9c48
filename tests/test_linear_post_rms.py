"""Linear attention with post-RMSNorm: the foot of the residual line, the one-sided arc and the
restricted arc bound.

* the foot law (:func:`constructions.laws.foot_distance`) against the residuals of the model
  computed by hand from random embeddings: the foot is ``-(1 + tau|e_s|^2)/(tau|e_a|^2)``, before
  ``-sqrt(d)/B^2``;
* the construction (bare, gain, gain and bias) counts in ball arithmetic slightly above its
  estimate and not slightly below, stays within its budget, and at the law's capacity reads out
  exactly ``C + cap f(n)`` (:data:`constructions.one_sided.SHAPE`) in an independent reference
  forward pass (``tests/test_new_cells.py``), its foot at the budget's limit;
* its classification head (the one-sided arc at unit budget) counts, checked by hand; its sweep row is certified with ``B_lower`` within 1e-4;
* :func:`bounds.arc_lower.arc_lower` with ``foot``: never above the smallest amplitude of any
  restricted shape (an independent LP + SLSQP reference), tight against the reference optimum
  at the foot (with the counts that bind there), and above the symmetric optimum, which the
  restriction excludes; bad arguments are refused.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog, minimize, minimize_scalar

import mpmath
from test_new_cells import _norm, _reference_readout

from bounds import search
from bounds.arc_lower import arc_lower
from constructions import classification, laws, one_sided, regression
from constructions.cell import Cell
from constructions.closed_forms import arc_closed_form
from verify import counts_to

CELLS = [Cell("linear", v, "regression", d=8, norm="rmsnorm", affine=a)
         for v, a in (("post_bare", None), ("post_learned", "gain"), ("post_learned", "gain_bias"))]
IDS = ["bare", "gain", "gain_bias"]
#: relative step above and below the estimate of B_min
STEP = 1e-3


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=16, max_size=16), st.sampled_from([2, 3, 8]))
def test_foot_of_the_residual_line(coords, d):
    e_s, e_a = np.array(coords[:d]), np.array(coords[8:8 + d])
    tau = 1 / math.sqrt(d)
    dot = float(e_s @ e_a)
    if abs(dot) < 1e-3 or np.linalg.norm(e_a) < 1e-3:
        return
    # the model by hand: r(n) = e_s + score_s e_s + n score_a e_a (linear attention, h = e)
    r = [e_s + tau * float(e_s @ e_s) * e_s + k * tau * dot * e_a for k in range(3)]
    step = r[1] - r[0]
    assert np.allclose(r[2] - r[1], step)
    foot = -float(r[0] @ step) / float(step @ step)
    assert foot == pytest.approx(-(1 + tau * float(e_s @ e_s)) / (tau * float(e_a @ e_a)), rel=1e-9)
    B = float(max(np.linalg.norm(e_s), np.linalg.norm(e_a)))
    cell = Cell("linear", "post_bare", "regression", d=d, norm="rmsnorm")
    assert foot < -laws.foot_distance(cell, B, laws.FLOAT)


def test_the_foot_is_free_elsewhere():
    for att, kind in (("softmax", "rmsnorm"), ("linear", "layernorm"), ("softmax", "layernorm")):
        assert laws.foot_distance(Cell(att, "post_bare", "regression", norm=kind), 1.0) is None
    assert laws.foot_distance(Cell("linear", "none", "regression", norm="rmsnorm"), 1.0) is None


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_construction_counts_above_the_estimate_and_not_below(cell):
    des = regression.design(cell)
    L = 8
    est = des.estimate(L)
    above = des.build(L, est * (1 + STEP))
    res = counts_to(above, L, backend="arb256")
    assert res.verdict == "counts" and res.certified, res
    assert above.bound() <= mpmath.mpf(est * (1 + STEP)) * (1 + mpmath.mpf("1e-9"))
    below = des.build(L, est * (1 - STEP))
    assert below.bound() <= mpmath.mpf(est * (1 - STEP)) * (1 + mpmath.mpf("1e-9"))
    assert counts_to(below, L, backend="mp30").verdict != "counts"


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_construction_attains_the_capacity_at_the_foot(cell):
    """With amplitude cap(B) the read-out is C + cap f(n) with the foot F(B) (reference forward
    pass), and every vector is within B."""
    des = regression.design(cell)
    L, B_value, lam, angle = 8, 2.5, 7.0, 2.2
    with mpmath.workdps(40):
        Bv = mpmath.mpf(B_value)
        cap = laws.capacity(cell, None, Bv, laws.MPMATH)
        out = des.evaluate(L, Bv, lam, cap, 3, angle)
        vec = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
        for name, v in vec.items():
            assert mpmath.sqrt(mpmath.fsum(x * x for x in v)) <= Bv * (1 + mpmath.mpf("1e-30")), name
        ys = _reference_readout(cell, vec, out["w0"], L)
        foot = mpmath.sqrt(cell.d) / Bv**2 + mpmath.mpf(regression.FOOT_SLACK.p) / regression.FOOT_SLACK.q
        f = lambda k: ((lam * mpmath.cos(angle) + (k + foot) * mpmath.sin(angle))
                       / mpmath.sqrt(lam**2 + (k + foot) ** 2))
        for k, y in enumerate(ys):
            assert abs(y - (3 + cap * f(k))) <= mpmath.mpf("1e-25") * cap, (k, y)


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
@pytest.mark.parametrize("L", [5, 16])
def test_classification_head_reads_the_one_sided_arc(cell, L):
    """The head is certified; by hand, its residual line has its foot before ``-sqrt(d)`` (the
    budget-1 limit: every vector has norm <= 1), every logit gap is at least the row's certified
    margin, and that margin is below the proven ``margin_upper``."""
    ccell = cell.replace(readout="classification")
    params = classification.design(ccell).build(L)
    assert counts_to(params, L, "arb256").certified
    vec = {k: [mpmath.mpf(x) for x in np.ravel(v)] for k, v in params.vectors.items() if k != "u"}
    dot = lambda a, b: mpmath.fsum(x * y for x, y in zip(a, b))
    assert all(dot(vec[k], vec[k]) <= 1 for k in vec)
    tau = 1 / mpmath.sqrt(cell.d)
    e_s, e_a = vec["e_s"], vec["e_a"]
    P = [x + tau * dot(e_s, e_s) * x for x in e_s]  # r(n) = P + n Q (linear attention)
    Q = [tau * dot(e_s, e_a) * x for x in e_a]
    assert -dot(P, Q) / dot(Q, Q) < -mpmath.sqrt(cell.d)
    U = [[mpmath.mpf(x) for x in row] for row in params.vectors["u"]]
    b = [mpmath.mpf(x) for x in params.scalars["b"]]
    row = search.classification_row(ccell, L)
    assert row["certified"] and row["margin"] <= row["margin_upper"]
    for n in range(L + 1):
        z = _norm(cell, [p + n * q for p, q in zip(P, Q)], vec)
        logits = [dot(u, z) + bc for u, bc in zip(U, b)]
        gap = logits[n] - max(l for c, l in enumerate(logits) if c != n)
        assert gap >= row["margin"] * (1 - 1e-9), (n, gap)


def test_sweep_row_is_certified_with_its_lower_bound():
    row = search.regression_row(CELLS[0], 6)
    assert row["certified"] and row["B_lower"] <= row["B_min"]
    assert row["B_min"] / row["B_lower"] - 1 <= 1e-4 + 1e-6
    assert row["closed_form"] is None


def _inner_min(L: int, lam: float, n0: float):
    """``(min |u|, errors)`` over ``C, u`` with ``|C + <u, v_n> - n| <= 1/2`` (``inf`` if none):
    an LP for a feasible start, then SLSQP on ``|u|^2``."""
    n = np.arange(L + 1, dtype=float)
    th = np.arctan((n - n0) / lam)
    A = np.column_stack([np.ones_like(n), np.cos(th), np.sin(th)])
    A_ub = np.vstack([np.column_stack([A, np.zeros(L + 1)]), np.column_stack([-A, np.zeros(L + 1)]),
                      [[0, 1, 0, -1], [0, -1, 0, -1], [0, 0, 1, -1], [0, 0, -1, -1]]])
    b_ub = np.concatenate([n + 0.5, 0.5 - n, np.zeros(4)])
    lp = linprog([0, 0, 0, 1], A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * 4, method="highs")
    if lp.status != 0:
        return math.inf, None
    cons = [{"type": "ineq", "fun": lambda z: A @ z - (n - 0.5), "jac": lambda z: A},
            {"type": "ineq", "fun": lambda z: (n + 0.5) - A @ z, "jac": lambda z: -A}]
    res = minimize(lambda z: z[1] ** 2 + z[2] ** 2, lp.x[:3], jac=lambda z: np.array([0, 2 * z[1], 2 * z[2]]),
                   constraints=cons, method="SLSQP", options={"ftol": 1e-15, "maxiter": 500})
    z = res.x if np.all(np.abs(A @ res.x - n) <= 0.5 + 1e-9) else lp.x[:3]
    return float(np.hypot(z[1], z[2])), A @ z - n


def _optimum_at(L: int, n0: float):
    """The reference optimum over ``lam`` at the foot ``n0`` and its binding counts."""
    f = lambda ll: _inner_min(L, math.exp(ll), n0)[0]
    grid = np.linspace(math.log(0.1), math.log(10 * (L + 2) ** 1.5), 60)
    j = int(np.argmin([f(g) for g in grid]))
    res = minimize_scalar(f, bounds=(grid[max(j - 1, 0)], grid[min(j + 1, 59)]), method="bounded",
                          options={"xatol": 1e-10})
    R, err = _inner_min(L, math.exp(res.x), n0)
    return R, [k for k in range(L + 1) if abs(err[k]) > 0.5 - 1e-6]


def _counts(L: int, binding) -> tuple:
    """Four counts holding the binding ones, 0 and L (filled in with spread-out counts)."""
    out = set(binding) | {0, L}
    for k in (L // 4, L // 2, (3 * L) // 4, 1):
        if len(out) >= 4:
            break
        out.add(k)
    return tuple(sorted(out)[:4])


@pytest.mark.parametrize("L", [8, 16])
def test_restricted_bound_is_tight_and_valid(L):
    foot = 0.25
    R_ref, binding = _optimum_at(L, -foot)
    counts = _counts(L, binding)
    low = arc_lower(L, R_ref * (1 + 1e-9), foot=foot, counts=counts)
    assert R_ref / low - 1 < 1.2e-4, (R_ref, low, counts)
    # valid: below the reference at every restricted shape (any foot n0 <= -F)
    rng = np.random.default_rng(L)
    for lam, n0 in zip(np.exp(rng.uniform(math.log(0.5), math.log(4 * L ** 1.5), 12)),
                       -foot - rng.exponential(L / 4, 12)):
        R, _ = _inner_min(L, float(lam), float(n0))
        assert low <= R * (1 + 1e-9), (lam, n0)


def test_restriction_excludes_the_symmetric_arc():
    """At L = 8 no arc with its foot before the first count reaches twice the symmetric optimum
    (the bound certifies the target itself with rtol = 0); the unrestricted bound cannot."""
    L = 8
    r_sym = arc_closed_form(Cell("softmax", "post_bare", "regression"), L)["b"]
    target = 2 * r_sym
    assert arc_lower(L, target, rtol=0.0, foot=0.0, counts=(0, 2, 4, 8)) == target
    assert arc_lower(L, target) <= r_sym


@pytest.mark.parametrize("kwargs", [dict(foot=-1.0), dict(foot=float("nan")), dict(counts=(0, 2, 4, 8)),
                                    dict(foot=0.0, counts=(0, 2, 4)), dict(foot=0.0, counts=(0, 7, 8, 9)),
                                    dict(foot=0.0, counts=(5, 6, 7, 8)), dict(foot=0.0, counts=(0, 4, 4, 8))])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        arc_lower(8, 5.0, **kwargs)



@pytest.mark.parametrize("F", [0.0, 0.01, 0.65, 2.2, 40.0])
def test_two_count_bound_with_a_foot_is_the_smallest_amplitude(F):
    """At ``L = 2`` the smallest amplitude of a shape is ``1/|v_2 - v_0|`` (the read-out along the
    chord counts): a dense scan of the chord over feet ``s >= F`` and distances ``lam`` never
    beats the bound's chord, and comes within 1e-6 of it."""
    got = arc_lower(2, 1e9, foot=F)
    s = F + np.concatenate([[0.0], np.geomspace(1e-6, 1e3, 50)])
    lam = np.geomspace(1e-4, 1e4, 40001)
    S, LAM = np.meshgrid(s, lam)
    delta = np.arctan((2 + S) / LAM) - np.arctan(S / LAM)
    best = 1 / (2 * np.sin(delta.max() / 2))
    assert got <= best * (1 + 1e-12)
    assert best / got - 1 < (1e-6 if F > 0 else 1e-4)  # F = 0: approached only as lam -> 0


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_rows_at_one_and_two_counts(cell):
    """L = 1: a certified witness (the infimum 0 is not attained); L = 2: B_lower meets B_min to
    the bisection tolerance (the two-count bound is exact)."""
    one = search.regression_row(cell, 1)
    assert one["certified"] and one["B_min"] == 0 and "witness certified" in one["note"]
    two = search.regression_row(cell, 2)
    assert two["certified"] and two["B_lower"] <= two["B_min"] <= two["B_lower"] * (1 + 1e-5)


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_margin_upper_on_the_one_sided_arc(cell):
    """The certificate over the feet ``p <= -sqrt(d)``: above the certified margin, and bare
    within 0.5% of it (the head is max-min there)."""
    row = search.classification_row(cell.replace(readout="classification"), 16)
    assert row["certified"] and row["margin"] <= row["margin_upper"]
    if not cell.affine.gain:
        assert row["margin_ratio"] <= 1.005


@settings(max_examples=40, deadline=None)
@given(L=st.integers(3, 300), log_foot=st.floats(-5, 1), log_lam=st.floats(-2, 0.5))
def test_centre_point_is_the_linear_programme_s_optimum(L, log_foot, log_lam):
    """The Remez exchange of :func:`constructions.one_sided.centre_point` against the linear
    programme ``max delta`` s.t. ``|C + <u, v_n> - n| <= 1/2 - delta`` solved by HiGHS on the points
    ``v_n`` computed here; the best fit is unique (a Haar system), so the read-outs agree too."""
    from constructions import one_sided
    foot, lam = 10.0 ** log_foot, (L + 2) ** 1.5 * 10.0 ** log_lam
    s = np.arange(L + 1) + foot
    V = np.stack([lam / np.hypot(lam, s), s / np.hypot(lam, s)], axis=1)
    M = np.hstack([np.ones((L + 1, 1)), V, np.ones((L + 1, 1))])
    ns = np.arange(L + 1, dtype=float)
    res = linprog([0, 0, 0, -1], A_ub=np.vstack([M, M * [-1, -1, -1, 1]]), b_ub=np.concatenate([ns + 0.5, 0.5 - ns]),
                  bounds=[(None, None)] * 4, method="highs")
    assert res.status == 0
    delta, x = one_sided.centre_point.__wrapped__(L, foot, lam)
    assert delta == pytest.approx(res.x[3], abs=1e-7)
    err = np.abs(x[0] + V @ x[1:] - ns)
    assert err.max() == pytest.approx(0.5 - delta, rel=1e-9, abs=1e-12)  # its margin is delta


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_estimate_from_the_last_l_is_the_cold_one(cell):
    """The fixed point started from ``L - 1``'s (the precision scan's order) is the one started
    from ``T(oo)`` (a fresh design), to the estimate's tolerance."""
    warm = regression.FootDesign(cell)
    for L in (40, 41, 42):
        got = warm.estimate(L)
    assert got == pytest.approx(regression.FootDesign(cell).estimate(42), rel=2e-8)


def test_a_shape_whose_counts_do_not_separate_in_float64_is_no_candidate():
    """Far from the foot with a short read-out axis (the one-sided arc's search at large d, e.g.
    d = 4096) the rows of the counts agree to float64 and the exchange's system is singular:
    such a shape has no margin (``-inf``, no read-out), while a shape whose counts separate is
    fitted as before (an error below 1/2, so a margin above 0)."""
    assert one_sided.centre_point(4, -1e6, 1.0) == (-np.inf, None)
    delta, x = one_sided.centre_point(4, -1e3, 1.0)
    assert 0 < delta <= 0.5 and x is not None
