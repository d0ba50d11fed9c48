r"""The max-min margin of the select task read at ``s`` without a norm, over *every* placement of
the values: the direction certificate taken over the plane of the three values by branch and
bound.

:mod:`bounds.select_margin` bounds every head on every placement but only along the count line:
its supremum sits where ``H`` lies on that line, where no head separates at all.
:mod:`bounds.select_direction` bounds every head on one placement, the radius of the head's rows
included, and meets the level head there.  Here the second is bounded over every placement.

**Every placement is planar.**  Without a norm the values are the embeddings (``h = e``, every
``|h| <= 1`` at unit budget), and the outputs are ``z = h_s + (rho h_s + n_a h_a + n_b beta
h_b)/(rho + n_a + beta n_b)`` (:mod:`constructions.pencil`).  Let ``V`` be the span of ``h_a -
h_s`` and ``h_b - h_s`` (dimension at most 2) and ``w`` the part of ``h_s`` orthogonal to ``V``;
it is the part of ``h_a`` and ``h_b`` orthogonal to ``V`` as well (they differ from ``h_s`` by
vectors of ``V``).  The values ``h' = h - w`` lie in ``V``; they have the differences of ``h``,
the scores ``<h'_s, h'_s - h'_a> = <h_s, h_s - h_a>`` and ``<h'_s, h'_b - h'_a> = <h_s, h_b -
h_a>`` (``w`` is orthogonal to the differences), hence ``rho`` and ``beta``, and norms ``|h'|^2
= |h|^2 - |w|^2 <= 1``; every output moves by the one vector ``-2w`` (``e_s = h_s``), which
moves the logit of class ``c`` by the constant ``-2<u_c, w>`` that ``b_c`` absorbs.  So every margin of a placement
is one of a placement in a plane, in the unit disk.  Rotated, ``h_s = (s, 0)``, ``0 <= s <= 1``.

**The charts.**  ``h_x = r_x sigma_x ((1 - t_x^2), 2 t_x)/(1 + t_x^2)`` for ``x = a, b``, with
``r_x`` in ``[0, 1]``, ``t_x`` in ``[-1, 1]`` and a sign ``sigma_x = +-1``: the angle ``2
atan(t)`` covers ``[-pi/2, pi/2]``, turned by ``pi`` the rest of the circle, so the four pairs of
charts cover every placement, with rational functions of the box variables only.  The
reflection ``(x, y) -> (x, -y)`` keeps ``h_s`` and every margin, maps each chart to itself (``t
-> -t``) and flips the sign of ``cr = (a_1 - s) b_2 - a_2 (b_1 - s)``, twice the signed area of
the triangle ``h_s, h_a, h_b``.  The max-min margin is a supremum over heads of margins that are
continuous in the placement, so it is lower semicontinuous, and ``X^2 cr (1 + t_a^2)(1 +
t_b^2)`` is a polynomial in the box variables, not identically 0, so ``X cr`` vanishes on no
open set: every placement with ``X cr = 0`` is a limit of placements with ``X cr
!= 0`` and has at most their limit inferior, and those with ``cr < 0`` are mirror images of ones
with ``cr > 0``.  So the supremum over every placement is that over the placements with ``cr >
0`` and ``X > 0``, a box needs to bound those alone, and a box whose ``cr`` is surely negative is
dropped.

**The bound of one placement** (``cr > 0``, ``X > 0``).  In the pencil's frame ``X = |h_a -
h_s|``, ``a = dt/X`` with ``dt = <h_b - h_s, h_a - h_s>``, ``delta = cr/X``, ``x_n = X n/(rho +
n)``, ``g_n = X rho/((rho + n)(rho + n + 1))`` and ``log rho = tau s (s - a_1)``, ``log beta = tau
s (b_1 - a_1)``.  The margin of every head with every ``|u_c| <= 1`` is at most

* the level bound of the placement, ``F = X rho/S(rho, beta)`` (:func:`bounds.select_margin.level_sum`,
  which needs no assumption), and
* for a unit ``theta = (cos phi, sin phi)`` and a run ``i..j-1`` of consecutive pairs at each of
  which the assumptions of :mod:`bounds.select_direction` hold (``c_n, c_{n+1} > 0``, ``c_n >=
  T_{n+1} c_{n+1}``, ``c_{n+1} >= T_n c_n``), ``1/Sigma`` with ``Sigma = sum_{n=i}^{j-1}
  min(c_{n+1}/T_n, c_n/T_{n+1})/(delta g_n)``: that module's (D), whose telescoping sum over the
  run is ``<u_j - u_i, theta> <= 2`` as over every pair.  With ``C_n = X c_n = cr cos(phi) -
  sin(phi) (X^2 n/(rho + n) - dt)`` (same signs as ``c_n``) and ``delta g_n = cr rho/((rho +
  n)(rho + n + 1))``

      Sigma = sum_n min(C_{n+1}/T_n, C_n/T_{n+1}) (rho + n)(rho + n + 1) / (X cr rho).

  ``cos(phi), sin(phi) = (1 - w^2, 2 w)/(1 + w^2)`` for a float ``w``, enclosed in intervals: an
  exact unit vector.  A run, rather than every pair, lets the certificate close where the
  distractor's window of one pair (``T_n`` near 1) shuts while the others' stay open, as near the
  level bound's corner ``h_b = h_a = -h_s``.

**The bound of a box** (a fixed ``w`` and run, chosen in float64 at its centre and from the
plain enclosures: only the choice).  Everything is enclosed in outward-rounded interval
arithmetic (:mod:`verify.intervals`; the exponentials by Arb balls at each end, ``exp``
increasing), and the run's assumptions must hold surely (their lower ends positive, plainly or
by the mean-value form).  Only the placements with ``cr > 0`` are bounded, so ``cr``'s enclosure
is cut at 0.  Then ``min(F, 1/Sigma)`` is bounded

* plainly, ``X`` and ``cr`` entering only through ``1/(X cr) >= 1/(X_hi cr_hi)``: the lower
  ends of the other factors are summed and the bound kept only where that sum is positive, so
  that dividing it by ``X_hi cr_hi`` (rounded up) bounds ``Sigma`` from below; boxes reaching
  ``cr = 0`` close as they shrink;
* by the mean-value forms of :mod:`bounds.jets` (second order in the box's size) where ``X``
  and ``cr`` are surely positive: ``1/inf Sigma``, in which a pair whose branch of the ``min`` is
  decided on the box (plain intervals apart) enters with it, any other as ``min(P, Q) = (P +
  Q)/2 - |P - Q|/2``, with ``(P + Q)/2`` in the smooth sum and ``|P - Q| <= |P - Q|(c) + sum_i
  |d_i (P - Q)| h_i`` (the absolute value is 1-Lipschitz) subtracted; and ``F`` by its
  mean-value upper end.

The box's bound is the smallest of these; a ``nan`` (an unknown enclosure) counts as ``inf``.

**The branch and bound** splits the boxes of the largest bound (each along the variable of the
largest relative mean-value term, else its widest) until that bound is within :data:`TOLERANCE`
of the largest float value of ``min(F, 1/Sigma)`` at a centre, or :data:`MAX_BOXES` boxes were
split; the largest bound of the remaining boxes bounds every placement: it is a proven upper
bound on the max-min margin of the cell.
"""

from __future__ import annotations

import functools
import math

import flint
import numpy as np

from bounds import select_margin
from bounds.jets import Jet, where
from bounds.select_margin import level_sum
from constructions.cell import Cell
from constructions.pencil import weights
from verify.backends import arb_ceil, arb_floor
from verify.intervals import Iv

#: the branch and bound stops once its largest box bound is within this of its best centre
TOLERANCE = 2e-3
#: the most boxes it splits (a cap on the cost; any partition is a proof)
MAX_BOXES = 60000
#: boxes split per round (the ones of the largest bounds)
BATCH = 512
#: the float grid of ``w = tan(phi/2)`` searched at each centre (``w = 0``: the level bound; only
#: the choice of a direction, any is valid)
W_GRID = np.linspace(-0.75, 0.75, 41)
#: the finer steps (in units of the grid's) searched around the grid's best ``w``
W_FINE = np.linspace(-1, 1, 9)
#: the box variables ``s, r_a, t_a, r_b, t_b``: their ranges (module docstring) and the first
#: partition of each chart
RANGES = ((0.0, 1.0), (0.0, 1.0), (-1.0, 1.0), (0.0, 1.0), (-1.0, 1.0))
PARTS = (2, 2, 4, 2, 4)
WIDTHS = np.array([b - a for a, b in RANGES])
#: the largest L bounded (its cost; beyond, the level bound is within 1% of the head at d = 8:
#: 1.0062 at L = 128)
MAX_L = 64


def _exp(x: Iv) -> Iv:
    """``exp`` of every interval, its ends enclosed by Arb balls (``exp`` increases)."""
    lo = np.vectorize(lambda v: arb_floor(flint.arb(float(v)).exp()), otypes=[float])(x.lo)
    hi = np.vectorize(lambda v: arb_ceil(flint.arb(float(v)).exp()), otypes=[float])(x.hi)
    return Iv(lo, hi)


def _jet_exp(x: Jet) -> Jet:
    v = _exp(x.v)
    return Jet(v, tuple(v * g for g in x.g))


class _Floats:
    """float64 in the formulas' shape (the centres' search)."""

    exp = staticmethod(np.exp)


class _Intervals:
    exp = staticmethod(lambda x: _jet_exp(x) if isinstance(x, Jet) else _exp(x))


def _placement(s, ra, ta, rb, tb, signs, tau, ops):
    """``(X^2, dt, cr, rho, beta)`` of the placements (module docstring) in any number type of
    ``ops`` (floats, intervals, jets; ``tau = 1/sqrt(d)`` a float or an enclosing interval);
    ``signs`` the charts' ``(sigma_a, sigma_b)`` columns."""
    qa, qb = 1 / (1 + ta * ta), 1 / (1 + tb * tb)
    a1, a2 = ra * ((1 - ta * ta) * qa) * signs[0], ra * ((2 * ta) * qa) * signs[0]
    b1, b2 = rb * ((1 - tb * tb) * qb) * signs[1], rb * ((2 * tb) * qb) * signs[1]
    u1, v1 = a1 - s, b1 - s
    X2 = u1 * u1 + a2 * a2
    dt = v1 * u1 + b2 * a2
    cr = u1 * b2 - a2 * v1
    rho = ops.exp((s * u1) * (-tau))
    beta = ops.exp((s * (v1 - u1)) * tau)
    return X2, dt, cr, rho, beta


def _terms(X2, dt, cr, rho, beta, cos, sin, L: int):
    """``(C_{n+1}/T_n, C_n/T_{n+1}, (rho+n)(rho+n+1)/rho, C, T)`` over ``n`` (last axis)."""
    n = np.arange(L + 1, dtype=np.float64)
    T = weights(rho, beta, L, n)
    C = cr * cos - (X2 * (n / (rho + n)) - dt) * sin
    first, second = C[..., 1:] / T[..., :-1], C[..., :-1] / T[..., 1:]
    k = n[:-1]
    return first, second, (rho + k) * (rho + k + 1) / rho, C, T


def _conditions(C, T):
    """Per pair ``n`` (last axis, ``n = 0..L-1``), in any number type: ``C_n``, ``C_{n+1}``
    (positive where the pair is valid), ``C_n - T_{n+1} C_{n+1}`` and ``C_{n+1} - T_n C_n``
    (nonnegative)."""
    return (C[..., :-1], C[..., 1:], C[..., :-1] - T[..., 1:] * C[..., 1:], C[..., 1:] - T[..., :-1] * C[..., :-1])


def _holds(lows) -> np.ndarray:
    """Whether the pairs are valid, from lower ends (or float values) of :func:`_conditions`."""
    return (lows[0] > 0) & (lows[1] > 0) & (lows[2] >= 0) & (lows[3] >= 0)


def _level(X, rho, beta, L: int):
    """The level bound ``F = X rho/S(rho, beta)`` of a placement, in any number type."""
    return X * rho / level_sum(rho, beta, L)


def _inverse(x: np.ndarray) -> np.ndarray:
    """``1/x`` rounded up where ``x > 0``, else ``inf``."""
    return np.where(x > 0, _column(1 / Iv(np.where(x > 0, x, 1.0)))[1], np.inf)


def _best_run(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The mask of the run of consecutive valid pairs with the largest float sum of ``values``
    (``>= 0`` where valid), per row of the last axis; only a choice."""
    v = np.where(valid, values, 0.0)
    total = np.cumsum(v, axis=-1)
    base = np.maximum.accumulate(np.where(valid, 0.0, total), axis=-1)
    run = total - base
    end = np.argmax(run, axis=-1)[..., None]
    idx = np.arange(valid.shape[-1])
    # the run ends at ``end`` and starts after the last invalid pair before it
    last_bad = np.max(np.where(~valid & (idx <= end), idx, -1), axis=-1, keepdims=True)
    return valid & (idx > last_bad) & (idx <= end)


def _float_best(centres, signs, tau: float, L: int):
    """Per centre: the float bound ``min(F, 1/Sigma)`` at the best ``w`` (the best run of valid
    pairs at each ``w``) of :data:`W_GRID`, then of :data:`W_FINE` steps of it around the best
    (``w = 0`` is the level bound), and that ``w``."""
    X2, dt, cr, rho, beta = _placement(*(centres[:, i:i + 1] for i in range(5)), signs, tau, _Floats)
    level = _level(np.sqrt(X2[:, 0]), rho[:, 0], beta[:, 0], L)
    # the mirror image of a placement (cr -> -cr) has the same margins
    X2, dt, cr, rho, beta = (v[:, :, None] for v in (X2, dt, np.abs(cr), rho, beta))

    def sums(w):  # Sigma at the directions w (rows: one per centre, or one for all)
        w = w[:, :, None]
        cos, sin = (1 - w * w) / (1 + w * w), 2 * w / (1 + w * w)
        first, second, W, C, T = _terms(X2, dt, cr, rho, beta, cos, sin, L)
        terms = np.minimum(first, second) * W / (np.sqrt(X2) * cr)
        valid = _holds(_conditions(C, T)) & np.isfinite(terms) & (cr > 0) & (X2 > 0)
        return np.where(_best_run(terms, valid), terms, 0.0).sum(-1)

    rows = np.arange(len(centres))
    with np.errstate(all="ignore"):
        coarse = sums(W_GRID[None, :])
        step = W_GRID[1] - W_GRID[0]
        w = W_GRID[np.argmax(coarse, axis=1)][:, None] + step * W_FINE[None, :]
        fine = sums(w)  # the fine steps include the coarse best (step 0)
    i = np.argmax(fine, axis=1)
    best, w = fine[rows, i], w[rows, i]
    with np.errstate(divide="ignore"):
        value = np.minimum(level, np.where(best > 0, 1 / best, np.inf))
    # where cr = 0 the frame degenerates: its level bound is no value of the certificate's
    value = np.where(np.isfinite(value) & (cr[:, 0, 0] > 0), value, 0.0)
    return value, np.where(best > 0, w, 0.0)


def _variables(lo, hi, jets: bool):
    """The box variables as column intervals (``jets``: jets with unit gradients)."""
    out = []
    for i in range(5):
        v = Iv(lo[:, i:i + 1], hi[:, i:i + 1])
        out.append(Jet(v, tuple(Iv(1.0 if j == i else 0.0) for j in range(5))) if jets else v)
    return out


def _unit(w: np.ndarray):
    """``(cos, sin)`` of ``phi = 2 atan(w)`` as intervals: ``(1 - w^2, 2 w)/(1 + w^2)``."""
    wi = Iv(w)
    q = 1 / (1 + wi * wi)
    return (1 - wi * wi) * q, (2 * wi) * q


def _column(x: Iv) -> tuple:
    """The lower and upper ends, flat."""
    return np.asarray(x.lo, dtype=np.float64).reshape(-1), np.asarray(x.hi, dtype=np.float64).reshape(-1)


def _finite(v: np.ndarray, default: float) -> np.ndarray:
    return np.where(np.isfinite(v), v, default)


def _lower(centre: Jet, box: Jet, h) -> Iv:
    """Per entry: ``f(c) - sum_i |d_i f|(X) h_i`` (its lower end bounds ``f`` on the box: the
    mean-value form of :mod:`bounds.jets`); ``h`` the half widths, one column per variable."""
    return Iv(centre.v.lo) - sum((abs(g) * Iv(h[:, i:i + 1]) for i, g in enumerate(box.g)), Iv(0.0))


def _smooth(lo, hi, signs, w, plain, low_plain, scale, tau: Iv, L: int):
    """The mean-value bounds of boxes whose ``X`` and ``cr`` are surely positive: an upper end of
    ``F``, an upper end of ``1/Sigma`` over the best run of pairs valid on the box, the mean-value
    terms of each variable relative to ``Sigma`` (for the split), and the run.

    A pair is valid where its conditions are surely positive by ``plain`` (the plain intervals'
    ``(valid, first, second)``) or by their mean-value forms.  ``Sigma`` is the sum over the run
    of ``min(P_n, Q_n)``, the two branches times ``(rho+n)(rho+n+1)/(X cr rho)``: a pair whose
    branch is decided on the box (intervals apart) enters the smooth sum with it; any other as
    ``min(P, Q) = (P + Q)/2 - |P - Q|/2``, with ``(P + Q)/2`` in the smooth sum and ``|P - Q| <=
    |P - Q|(c) + sum_i |d_i (P - Q)| h_i`` (the absolute value is 1-Lipschitz) subtracted."""
    valid, first_iv, second_iv = plain
    c = (lo + hi) / 2
    h = np.maximum((Iv(c) - Iv(lo)).hi, (Iv(hi) - Iv(c)).hi)
    cos, sin = (Iv(v.lo[:, None], v.hi[:, None]) for v in _unit(w))
    parts = []
    for jets, (a, b) in ((True, (lo, hi)), (False, (c, c))):
        X2, dt, cr, rho, beta = _placement(*(v if jets else Jet(v) for v in _variables(a, b, jets)),
                                           signs, tau, _Intervals)
        X = X2.sqrt()
        first, second, W, C, T = _terms(X2, dt, cr, rho, beta, cos, sin, L)
        parts.append((_level(X, rho, beta, L), first * W, second * W, X * cr, _conditions(C, T)))
    (level_box, P_box, Q_box, S_box, cond_box), (level_c, P_c, Q_c, S_c, cond_c) = parts
    valid = (valid | _holds([_lower(cc, cb, h).lo for cb, cc in zip(cond_box, cond_c)])) & (w != 0)[:, None]
    with np.errstate(all="ignore"):
        run = _best_run(np.where(np.isfinite(low_plain), low_plain, 0.0) / scale[:, None], valid)
    take_first = run & (first_iv.hi <= second_iv.lo)
    take_second = run & (second_iv.hi <= first_iv.lo) & ~take_first
    vague = run & ~(take_first | take_second)
    flat = lambda x: np.asarray(x, dtype=np.float64).reshape(-1)
    terms = lambda jet, hh=h: [Iv(flat(abs(g).hi)) * Iv(hh[:, i]) for i, g in enumerate(jet.g)]

    def lower_sum(P_box, Q_box, P_c, Q_c, rows=slice(None)):  # (inf of the run's sum, MV terms)
        first, second, either, hh = take_first[rows], take_second[rows], vague[rows], h[rows]

        def pick(P, Q, jets):
            zero = Jet(Iv(0.0), tuple(Iv(0.0) for _ in range(5)) if jets else ())
            smooth = where(first, P, where(second, Q, where(either, (P + Q) * 0.5, zero)))
            return smooth.sum(), where(either, P - Q, zero)

        (sum_box, diff_box), (sum_c, diff_c) = pick(P_box, Q_box, True), pick(P_c, Q_c, False)
        sum_terms = terms(sum_box, hh)
        # the differences: |P - Q|(c) + sum_i |d_i (P - Q)| h_i, summed over the pairs (last axis)
        diff_terms = [Jet(abs(g) * Iv(hh[:, i:i + 1])).sum().v for i, g in enumerate(diff_box.g)]
        penalty = (Jet(Iv(np.maximum(np.abs(diff_c.v.lo), np.abs(diff_c.v.hi)))).sum().v
                   + sum(diff_terms, Iv(0.0)))
        low = flat((Iv(flat(sum_c.v.lo)) - sum(sum_terms, Iv(0.0)) - penalty * 0.5).lo)
        low = _finite(np.where(run[rows].any(-1), low, -np.inf), -np.inf)
        spread = (np.stack([flat(t.hi) for t in sum_terms], axis=1)
                  + 0.5 * np.stack([flat(t.hi) for t in diff_terms], axis=1))
        return low, spread / np.maximum(np.abs(low), 1e-300)[:, None]

    level_up = _finite(flat((Iv(flat(level_c.v.hi)) + sum(terms(level_box), Iv(0.0))).hi), np.inf)
    low, rel = lower_sum(P_box * (1 / S_box), Q_box * (1 / S_box), P_c * (1 / S_c), Q_c * (1 / S_c))
    bound = np.minimum(level_up, _inverse(low))
    return bound, _finite(rel, np.inf), run


def box_bounds(lo: np.ndarray, hi: np.ndarray, signs, w: np.ndarray, tau: Iv, L: int):
    """``(bound, split)`` per box ``[lo, hi]`` (rows; the variables ``s, r_a, t_a, r_b, t_b``)
    of the charts ``signs`` (``(sigma_a, sigma_b)`` columns) at the directions ``w``: a float
    ``>=`` the margin of every head on every placement of the box with ``cr > 0`` (module
    docstring; ``-inf`` where ``cr`` is surely negative), and the variable to split."""
    cos, sin = (Iv(v.lo[:, None], v.hi[:, None]) for v in _unit(w))
    X2, dt, cr, rho, beta = _placement(*_variables(lo, hi, False), signs, tau, _Intervals)
    bound = _finite(_column(_level(X2.sqrt(), rho, beta, L))[1], np.inf)
    dropped, positive = _column(cr)[1] < 0, _column(cr)[0] > 0
    cr = Iv(np.maximum(cr.lo, 0.0), cr.hi)  # only the placements with cr > 0 are bounded
    first, second, W, C, T = _terms(X2, dt, cr, rho, beta, cos, sin, L)
    valid = _holds([x.lo for x in _conditions(C, T)]) & (w != 0)[:, None]
    # plainly: the lower ends of min(first, second) W, their sum over X_hi cr_hi (module docstring)
    low = (Iv(np.minimum(first.lo, second.lo)) * W).lo
    # (a larger scale only lowers the sum: kept above 1e-200, where the quotients stay finite)
    scale = np.maximum(_column(Iv(np.maximum(X2.hi, 0.0)).sqrt() * Iv(np.maximum(cr.hi, 0.0)))[1], 1e-200)
    with np.errstate(all="ignore"):
        run = _best_run(np.where(np.isfinite(low), low, 0.0) / scale[:, None], valid & np.isfinite(low))

    def over_scale(mask, rows=slice(None)):  # the lower end of sum_mask low / scale
        total = Jet(Iv(np.where(mask, low[rows], 0.0))).sum().v
        return _finite((Iv(total.lo) / Iv(scale[rows])).lo, -np.inf)

    bound = np.minimum(bound, _inverse(over_scale(run)))
    split = np.argmax((hi - lo) / WIDTHS, axis=1)
    smooth = (_column(X2)[0] > 0) & positive
    if smooth.any():
        i = np.flatnonzero(smooth)
        mv, rel, r = _smooth(lo[i], hi[i], [s[i] for s in signs], w[i], (valid[i], first[i], second[i]),
                             low[i], scale[i], tau, L)
        bound[i] = np.minimum(bound[i], mv)
        use = r.any(1) & np.isfinite(rel).all(1)
        split[i] = np.where(use, np.argmax(np.where(np.isfinite(rel), rel, 0.0), axis=1), split[i])
    bound = np.where(dropped, -np.inf, np.where(np.isnan(bound), np.inf, bound))  # nan: unknown
    return bound, split


def _charts():
    """The first partition: every chart pair, each variable cut into :data:`PARTS` parts."""
    edges = [np.linspace(a, b, n + 1) for (a, b), n in zip(RANGES, PARTS)]
    cells = np.array(np.meshgrid(*[np.arange(n) for n in PARTS], indexing="ij")).reshape(5, -1).T
    lo = np.stack([edges[j][cells[:, j]] for j in range(5)], axis=1)
    hi = np.stack([edges[j][cells[:, j] + 1] for j in range(5)], axis=1)
    signs = np.array([c for c in ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)) for _ in range(len(lo))])
    return np.tile(lo, (4, 1)), np.tile(hi, (4, 1)), signs


def root(d: int):
    """``tau = 1/sqrt(d)`` as a float (the search's) and as an enclosing interval (the boxes')."""
    ball = 1 / flint.arb(d).sqrt()
    return 1 / math.sqrt(d), Iv(arb_floor(ball), arb_ceil(ball))


def applies(cell: Cell, L: int) -> bool:
    """Whether :func:`placement_upper` bounds ``cell`` at ``L``: the level bound's cells
    (:func:`bounds.select_margin.applies`) without a norm, up to :data:`MAX_L` (its cost)."""
    return select_margin.applies(cell, L) and not cell.normed and L <= MAX_L


@functools.lru_cache(maxsize=64)
def placement_upper(cell: Cell, L: int) -> float:
    """:func:`placement_sup` of the cell's width; ``ValueError`` where it does not apply."""
    if not applies(cell, L):
        raise ValueError(f"{cell.describe()}, L = {L}: the placement bound needs the select task "
                         f"read at s, softmax attention without a norm, 3 <= L <= {MAX_L}")
    return placement_sup(cell.d, L)


def placement_sup(d: int, L: int, max_boxes: int = MAX_BOXES, log=None) -> float:
    """A float ``U >= m`` for every parameter set of the select cell read at ``s`` without a
    norm (softmax, classification, width ``d``) at ``L`` with every vector of norm at most 1:
    the branch and bound of the module docstring."""
    tau, tau_iv = root(d)
    lo, hi, signs = _charts()
    best = 0.0

    def evaluate(lo, hi, signs):
        nonlocal best
        value, w = _float_best((lo + hi) / 2, [signs[:, :1], signs[:, 1:]], tau, L)
        best = max(best, float(value.max(initial=0.0)))
        return box_bounds(lo, hi, [signs[:, :1], signs[:, 1:]], w, tau_iv, L)

    bound, split = evaluate(lo, hi, signs)
    keep = bound > -np.inf
    lo, hi, signs, bound, split = lo[keep], hi[keep], signs[keep], bound[keep], split[keep]
    done = 0
    while done < max_boxes:
        target = best * (1 + TOLERANCE)
        open_ = np.flatnonzero(bound > target)
        if not len(open_):
            break
        pick = open_[np.argsort(-bound[open_])[:BATCH]]
        done += len(pick)
        j = split[pick]
        mid = (lo[pick, j] + hi[pick, j]) / 2
        lo_a, hi_a = lo[pick].copy(), hi[pick].copy()
        hi_a[np.arange(len(pick)), j] = mid
        lo_b, hi_b = lo[pick].copy(), hi[pick].copy()
        lo_b[np.arange(len(pick)), j] = mid
        new_lo, new_hi = np.vstack([lo_a, lo_b]), np.vstack([hi_a, hi_b])
        new_signs = np.vstack([signs[pick], signs[pick]])
        nb, ns = evaluate(new_lo, new_hi, new_signs)
        rest = np.ones(len(lo), dtype=bool)
        rest[pick] = False
        live = nb > -np.inf
        lo = np.vstack([lo[rest], new_lo[live]])
        hi = np.vstack([hi[rest], new_hi[live]])
        signs = np.vstack([signs[rest], new_signs[live]])
        bound = np.concatenate([bound[rest], nb[live]])
        split = np.concatenate([split[rest], ns[live]])
        if log:
            log(f"{done} split, {len(lo)} boxes, bound {bound.max():.6g}, best {best:.6g}")
    return float(bound.max())
