"""The end-by-end forms of the arc bound's interval steps give the floats of the plain
:class:`verify.intervals.Iv` formulas of its proof (so the bounds they lead to are unchanged),
on boxes from tiny to wide, near the optimum and far from it."""

from __future__ import annotations

import numpy as np
import pytest

from bounds.arc_lower import _OTHERS, _Boxes, _exact_alpha
from constructions.cell import Cell
from constructions.closed_forms import arc_closed_form
from verify.intervals import Iv, norm_upper


def _sum4(x: Iv) -> Iv:
    return x[:, 0] + x[:, 1] + x[:, 2] + x[:, 3]


def _stack(*xs: Iv) -> Iv:
    return Iv(np.stack([x.lo for x in xs], -1), np.stack([x.hi for x in xs], -1))


def _plain_norm(x: Iv, y: Iv) -> np.ndarray:
    return (abs(x).square() + abs(y).square()).sqrt().hi


def _plain_N(boxes, A) -> Iv:
    return _sum4(Iv(A) * boxes.ns - abs(A) * 0.5)


def _plain_ratio(N: Iv, w_hi):
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (N / Iv(w_hi)).lo
    return np.where((N.lo > 0) & (w_hi > 0) & (q > 0), q, 0.0)


def _plain_tangents(boxes, Sa, Sb, ca, cb):
    up = boxes.ds >= 0
    S_lo, S_hi = np.where(up, Sa[:, None], Sb[:, None]), np.where(up, Sb[:, None], Sa[:, None])
    return (Iv(ca[:, None]) + Iv(S_lo) * boxes.ds).lo, (Iv(cb[:, None]) + Iv(S_hi) * boxes.ds).hi


def _plain_taylor(boxes, alpha, Sa, Sb, ca, cb, Sm, cm):
    """Step 3's Taylor model written with :class:`Iv` operations only."""
    ds = boxes.ds
    dca, dcb, dSa, dSb = (Iv(x) - m for x, m in ((ca, cm), (cb, cm), (Sa, Sm), (Sb, Sm)))
    dc, dS = _stack(dca, dca, dcb, dcb), _stack(dSa, dSb, dSa, dSb)
    mdc, mdS = Iv(abs(dc).hi.max(1)), Iv(abs(dS).hi.max(1))
    A = _exact_alpha(alpha)
    T = Iv(cm[:, None]) + Iv(Sm[:, None]) * ds
    r = 1 / (1 + T.square()).sqrt()
    r3 = r ** 3
    r5 = r3 * r * r
    g, g1 = _stack(r, T * r), _stack(-(T * r3), r3)
    g2 = _stack((2 * T.square() - 1) * r5, -3 * T * r5)
    A3, d3 = A[:, :, None], ds[None, :, None]
    Ag1, Ag2 = A3 * g1, A3 * g2
    Ag2d = Ag2 * d3
    w, a, b = _sum4(A3 * g), _sum4(Ag1), _sum4(Ag1 * d3)
    qcc, qcS, qSS = _sum4(Ag2 * 0.5), _sum4(Ag2d), _sum4(Ag2d * d3 * 0.5)
    mT = Iv(abs(dc[:, :, None] + dS[:, :, None] * ds).hi.max(1))
    t2 = Iv(np.maximum((abs(T) - mT).lo, 0.0)).square()
    E = _sum4(abs(A) * mT ** 3 * (4 * t2.square() + 1).sqrt() / (2 * (1 + t2) ** 3))
    u = w[:, None] + a[:, None] * dc[:, :, None] + b[:, None] * dS[:, :, None]
    lin = _plain_norm(u[..., 0], u[..., 1]).max(1)
    n = [Iv(_plain_norm(q[:, 0], q[:, 1])) for q in (qcc, qcS, qSS)]
    quad = n[0] * mdc.square() + n[1] * mdc * mdS + n[2] * mdS.square()
    return _plain_ratio(_plain_N(boxes, A), (Iv(lin) + quad + E).hi)


def _plain_interval(boxes, alpha, tangents):
    A = _exact_alpha(alpha)
    lo, hi = tangents
    t_lo, t_hi = Iv(lo), Iv(hi)
    sin = Iv((t_lo / (1 + t_lo.square()).sqrt()).lo, (t_hi / (1 + t_hi.square()).sqrt()).hi)
    cos = 1 / (1 + Iv(lo, hi).square()).sqrt()
    return _plain_ratio(_plain_N(boxes, A), _plain_norm(_sum4(A * cos), _sum4(A * sin)))


def _plain_one_plus_t(T):
    x = Iv(T)
    s = (1 + x.square()).sqrt()
    pos, neg = 1 + x / (1 + s), (1 + 1 / (s - x)) / (1 + s)
    return Iv(np.where(T >= 0, pos.lo, neg.lo), np.where(T >= 0, pos.hi, neg.hi))


def _plain_farkas(boxes, lo, hi, Sa, Sb):
    T2 = Iv(lo, hi).square()
    s = (1 + T2).sqrt()
    ends = _plain_one_plus_t(np.stack([lo, hi, -hi, -lo]))
    p, m = Iv(ends.lo[0], ends.hi[1]), Iv(ends.lo[2], ends.hi[3])
    E = (p[:, 0] * p[:, 1] * p[:, 2] * p[:, 3] + m[:, 0] * m[:, 1] * m[:, 2] * m[:, 3]) * 0.5
    q = p[:, _OTHERS[0]] * p[:, _OTHERS[1]] + m[:, _OTHERS[0]] * m[:, _OTHERS[1]]
    rhs = _sum4((1 + T2 + s) * (q[..., 0] * q[..., 1] * q[..., 2]) * boxes.inv_gaps)
    return 16 * Iv(Sa, Sb).square() * E, rhs


def _boxes(L, n=120, seed=0):
    """Boxes around the optimal shape and far from it, relative widths 1e-9 to 1."""
    rng = np.random.default_rng(seed)
    S_star = 1 / arc_closed_form(Cell("softmax", "post_bare", "regression"), L)["lambda"]
    Sa = S_star * np.exp(rng.uniform(-1.0, 2.0, n))
    Sb = Sa * (1 + 10.0 ** rng.uniform(-9, 0, n))
    ca = S_star * L / 2 * np.where(rng.random(n) < 0.3, 0.0, 10.0 ** rng.uniform(-6, 1, n))
    cb = ca + S_star * L / 2 * 10.0 ** rng.uniform(-9, 0, n)
    return Sa, Sb, ca, cb, 0.5 * (Sa + Sb), 0.5 * (ca + cb)


def _same(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and np.array_equal(x, y, equal_nan=True)


@pytest.mark.parametrize("L,counts", [(8, None), (1000, None), (65536, None), (50, (2, 7, 30, 44))])
def test_interval_steps_are_the_plain_formulas(L, counts):
    boxes = _Boxes(L, counts)
    Sa, Sb, ca, cb, Sm, cm = box = _boxes(L)
    tangents = boxes._tangent_range(Sa, Sb, ca, cb)
    assert all(_same(x, y) for x, y in zip(tangents, _plain_tangents(boxes, Sa, Sb, ca, cb)))
    with np.errstate(invalid="ignore", over="ignore"):
        lhs, rhs = boxes.farkas(*tangents, Sa, Sb)
        plhs, prhs = _plain_farkas(boxes, *tangents, Sa, Sb)
        assert all(_same(x, y) for x, y in ((lhs.lo, plhs.lo), (lhs.hi, plhs.hi), (rhs.lo, prhs.lo), (rhs.hi, prhs.hi)))
        assert _same(boxes.infeasible(Sa, Sb, ca, cb, tangents), plhs.lo > prhs.hi)
    # multipliers as the search meets them: the chosen candidates, and random ones
    rng = np.random.default_rng(1)
    alpha_t, alpha_i, _ = boxes.choose(*box, tangents)
    random = rng.normal(size=alpha_t.shape)
    random[::7, 0] = 0.0  # zero multipliers (the pairs have them)
    for alpha in (alpha_t, alpha_i, random):
        assert _same(boxes.taylor(alpha, *box), _plain_taylor(boxes, alpha, *box))
        assert _same(boxes.interval(alpha, tangents), _plain_interval(boxes, alpha, tangents))
    # the steps bound something: not every box is zero (else the test would be vacuous)
    assert np.any(boxes.taylor(alpha_t, *box) > 0) and np.any(boxes.interval(alpha_i, tangents) > 0)


def test_norm_upper_is_the_plain_formula():
    rng = np.random.default_rng(2)
    lo = rng.normal(size=(4, 300)) * 10.0 ** rng.uniform(-300, 300, (4, 300))
    lo[:, :5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    x, y = Iv(lo[0], np.maximum(lo[0], lo[1])), Iv(lo[2], np.maximum(lo[2], lo[3]))
    with np.errstate(over="ignore", invalid="ignore"):
        assert _same(norm_upper(x, y), _plain_norm(x, y))


def test_candidate_N_in_one_product_is_the_batched_form():
    from bounds.arc_lower import _HALVES, _N_float

    rng = np.random.default_rng(3)
    ns = np.array([0.0, 256.0, 768.0, 1024.0])
    for nb, K in ((1, 22), (37, 32), (500, 22)):
        A = rng.normal(size=(nb, K, 4))
        assert _same(_N_float(A, ns), A @ ns - abs(A) @ _HALVES)
