r"""The select task read at the last position, linear attention with post-norm (``eps = 0``).

Inputs ``(s, x_1..x_m)``, ``x_i`` in {a, b}, ``m <= L``, read at the last position: the query is
``e_q``, ``q = x_m`` (``s`` when ``m = 0``; post-norm: ``h = e``), the residual ``e_q + A`` with
``A = sum_j tau <e_q, e_j> e_j``.  An input is ``(n_a, n_b, q)`` (:mod:`verify.inputs`: the sum
over the attended positions does not see their order):

    query a:  r = e_a + tau <e_a, e_s> e_s + n_a tau |e_a|^2 e_a + n_b tau <e_a, e_b> e_b,
    query b:  r = e_b + tau <e_b, e_s> e_s + n_a tau <e_b, e_a> e_a + n_b tau |e_b|^2 e_b,
    (s):      r = (1 + tau |e_s|^2) e_s,

``n_a = 1..L`` at query a, ``n_a = 0..L-1`` at query b (``n_b >= 1``, ``n_a + n_b <= L``).

**b is a scaled a.**  With ``e_b = beta e_a``, ``beta > 0``, and ``k = tau |e_a|^2``, ``gam =
tau <e_a, e_s>``:

    query a:  r = (1 + (n_a + beta^2 n_b) k) e_a + gam e_s,
    query b:  r = beta ((1 + (n_a + beta^2 n_b) k) e_a + gam e_s),

since ``tau <e_a, e_b> e_b = beta^2 k e_a``, ``tau <e_b, e_s> = beta gam``, ``tau <e_b, e_a> e_a
= beta k e_a`` and ``tau |e_b|^2 e_b = beta^3 k e_a``.  With ``eps = 0`` the norm (LayerNorm or
RMSNorm, every affine) is invariant under the positive factor ``beta``, so **the query b reads
what the query a reads at the same (n_a, n_b)**, and both read the count task's last-read residual
line ``P + p Q`` (``P = e_a + gam e_s``, ``Q = k e_a``) at ``p = n_a + beta^2 n_b``.  The input
``(s)`` is that line at ``p = -u``, ``u = 1/k = sqrt(d)/|e_a|^2`` (``P - Q/k = gam e_s``, a
positive multiple of ``e_s`` for ``gam > 0``: :mod:`constructions.last_post`,
:mod:`constructions.last_foot`).  So the count ``n`` is read at

    n = 0:       p = -u  (s)   and   p = beta^2 n_b,  n_b = 1..L  (query b, no a),
    n = 1..L:    p = n + beta^2 n_b,  n_b = 0..L - n,

and the select task read last is the count task's arc problem of the counts ``0..L`` (one count
more than the count task read last, whose counts ``1..L`` are the arc of ``L - 1``), each count
spread over ``beta^2 (L - n)``, with the count 0 also at ``-u``.  ``beta = sqrt(SHIFT/(L + 1))``
keeps every spread below ``SHIFT = 2^-40`` counts.

**What b costs.**  Scores: none (no gap suppresses ``b``: its weight is ``beta^2`` of an ``a``'s
at query ``a``, and its query scales every weight by ``beta``).  Values: none beyond ``|e_b| =
beta |e_a|``.  The price is the count ``0`` on the counting arc: where the count task read last
places ``(s)`` freely before its first count (``u`` anywhere in its window), here the query ``b``
with no ``a`` reads ``0`` at ``p ~ 0``, so the arc counts ``0..L`` and the count 0 covers ``[-u,
beta^2 L]``, ``u >= sqrt(d)/B^2`` (``|e_a| <= B``).
:func:`bounds.lower.last_post_lower` and :func:`bounds.lower.last_foot_lower` (the count task's
bounds at the last read) are valid here, the count task being the sub-task ``n_b = 0``.

**Post-LayerNorm** (:class:`LinearSelectLastArcDesign`, ``d >= 3``; at ``d = 2``, where every
output is one of two points, ``L = 1`` only: :func:`bounds.lstar.cell_l_star`).  The arc and embeddings of
:class:`constructions.last_post.LinearLastArcDesign` (``e_a = alpha top + eta one``, ``e_s = beta_s
(V - u top) + nu one``: every residual a positive multiple of ``V + p top`` after centring), on
the symmetric arc of ``0..L``: ``V = lam across - c top``, ``c = L/2``, the read-out of the BOS
arc (:func:`constructions.steps.arc_readout_steps`) with ``w0 = c``, ``y(p) = c + A f(p - c)``,
``f(x) = x/sqrt(lam^2 + x^2)`` increasing.  The count ``n`` is read right iff ``y`` at its lowest
point is above ``n - 1/2`` and at its highest below ``n + 1/2`` (:func:`points`), each condition
linear in ``A`` (:func:`amplitude_interval`); the shape is the BOS arc's best at ``L``, the
amplitude the middle of the interval within the capacity, ``u`` the budget's least (``sqrt(d)/B^2
(1 + 2^-30)``: the count 0's interval is then shortest), and the bisection steps up where the
count 0 at ``-u`` does not fit at the BOS optimum (:meth:`LinearSelectLastArcDesign.estimate`).
As ``B`` grows ``u -> 0`` and the conditions become the BOS arc's of ``L``: the rate and the
constant of the BOS read at ``L`` (``L^{3/2}`` bare, ``L^{3/4}`` with a gain), against the count
task read last's BOS read at ``L - 1``.  ``L = 1``: the points ``-u``, ``beta^2`` (count 0) and
``1`` (count 1) count for every small enough amplitude, at every budget (``B_min = 0``, not
attained; the sweep certifies a witness).

**Post-RMSNorm** (:class:`SelectFootDesign`, every ``d``).  RMSNorm does not centre, so the foot
of the residual line is tied to the budget: the one-sided arc of :mod:`constructions.last_foot`
(``e_a = sqrt(sqrt(d)/u) along``, ``e_s`` with the foot at ``-F`` and the distance ``lam``, ``0 <
u < F``, the budget ``(*)`` there), read on the counts ``0..L`` with the foot at ``F`` (the count
task's counts ``1..L`` are those of ``L - 1`` with the foot at ``F + 1``) and the count 0 also at
``-u``, placed by :func:`constructions.last_foot.place_zero` (the largest margin among the ``u``
the budget admits); the geometry ``(F, lam)`` is the better of :meth:`constructions.last_foot.
LastFootDesign.geometry`'s search on these counts and a search from the count task's geometry at
``L + 1`` (:meth:`SelectFootDesign.geometry`).  Bare, the rows follow the count task's
construction (one count more); with a gain the budget's tie binds at the read-out's order, as
there, and the float search is not shown optimal (at large ``L`` the rows lie above the count
task's construction: the README's table).  ``L = 1``:
:meth:`constructions.last_foot.LastFootDesign._one` with its chord from ``v_(beta^2)`` to ``v_1``
(:meth:`SelectFootDesign._one_below`).

Every plan is a screen (floats, or mpmath at working precision); the judge certifies every row in
ball arithmetic on all ``1 + L(L+1)`` inputs.  Not built here: ``eps > 0`` (the factor ``beta``
and the arc use the norm's exact scale invariance), LayerNorm at ``d = 2`` beyond ``L = 1`` (no arc
in the centred subspace: nothing counts there), classification.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import sympy

from constructions import arc, registry, zoom
from constructions.cell import Cell
from constructions.last_foot import LastFootDesign
from constructions.last_post import LinearLastArcDesign
from constructions.regression import FootDesign, RegressionDesign, Step, _vec
from constructions.select_last_post import window_interval
from constructions.symbols import E_A, W0, C, L
from constructions.tasks import E_B

#: ``beta^2 (L + 1)``: the b tokens move a point by at most ``SHIFT`` counts (exact)
SHIFT = sympy.Rational(1, 2**40)

_bt = sympy.Symbol("beta_b", positive=True)


def built(cell: Cell) -> bool:
    """Whether ``cell`` is built here (:func:`constructions.registry.linear_select_last_arc`,
    :func:`constructions.registry.linear_select_last_foot`)."""
    return registry.builds("select_last_linear_post", cell)


def shift(L_value: int):
    """``beta^2 = SHIFT/(L + 1)``: each b token moves its input's point by ``beta^2`` counts
    (module docstring; mpmath)."""
    return mpmath.mpf(SHIFT.p) / SHIFT.q / (L_value + 1)


def b_step() -> list[Step]:
    """``e_b = beta e_a``, ``beta = sqrt(SHIFT/(L + 1))`` (module docstring)."""
    return [Step(_bt, sympy.sqrt(SHIFT / (L + 1)), "the scale of e_b against e_a: beta^2 L < 2^-40"),
            _vec(E_B, _bt * E_A, "the embedding of b: a scaled a, so the query b reads as the query a "
                 "and each b token moves a point by beta^2 counts", "e_b")]


def points(L_value: int, u_value, shift_value):
    """``[(p_lo, p_hi)]`` for the counts ``n = 0..L``: the lowest and the highest arc parameter at
    which the construction reads ``n``, ``(-u, beta^2 L)`` for ``n = 0`` and ``(n, n + beta^2 (L -
    n))`` for ``n >= 1`` (module docstring; mpmath)."""
    u, b2 = mpmath.mpf(u_value), mpmath.mpf(shift_value)
    return [(-u if n == 0 else mpmath.mpf(n), n + b2 * (L_value - n)) for n in range(L_value + 1)]


def amplitude_interval(lam_value, L_value: int, u_value, shift_value):
    """``(A_lo, A_hi)``: the amplitudes with ``y(p_lo(n)) > n - 1/2`` and ``y(p_hi(n)) < n + 1/2``
    for ``n = 0..L`` (:func:`points`; :func:`constructions.select_last_post.window_interval`)."""
    return window_interval(lam_value, L_value, points(L_value, u_value, shift_value))


class LinearSelectLastArcDesign(LinearLastArcDesign):
    """Linear attention with post-LayerNorm, the select task read last (module docstring): the
    count task's last-read arc (:class:`constructions.last_post.LinearLastArcDesign`) on the counts
    ``0..L`` centred on ``L/2``, the count 0 also at ``-u``, ``e_b = beta e_a``."""

    attention = "linear"

    def __init__(self, cell: Cell):
        if not (built(cell) and cell.readout == "regression" and cell.kind.centred):
            raise ValueError("LinearSelectLastArcDesign is for linear attention with post-LayerNorm "
                             "(eps = 0, d >= 3), the select task read last")
        RegressionDesign.__init__(self, cell)

    def _embedding_steps(self) -> list[Step]:
        return super()._embedding_steps() + b_step()

    def steps(self) -> list[Step]:
        out = super().steps()
        out[-1] = Step(W0, C, "the read-out bias, the centre of the counts 0..L", "w0")
        return out

    def interval(self, t_value, L_value: int):
        """The BOS arc interval of ``L`` (the shape's screen; the count 0 at ``-u`` and the b
        tokens' shifts enter in :meth:`_point`)."""
        return arc.interval(t_value, L_value)

    def interval_float(self, t_value, L_value: int):
        return arc.interval_float(t_value, L_value)

    def _point(self, L_value: int, Bv):
        """``(lam, A, c, u)`` at budget ``B`` (mpmath): the best shape of the BOS arc of ``L``,
        ``c = L/2``, ``u`` the budget's least and the middle of :func:`amplitude_interval` within
        the capacity (``u`` None where that is empty)."""
        lam = mpmath.mpf(self.best_shape(L_value, float(Bv))[0])
        u = self.fallback_u(Bv)
        c = mpmath.mpf(L_value) / 2
        cap = self.capacity_mp(lam, Bv)
        lo, hi = amplitude_interval(lam, L_value, u, shift(L_value))
        hi = min(hi, cap)
        if not lo < hi:
            return lam, (lo + cap) / 2 if lo < cap else cap / 2, c, None
        return lam, (lo + hi) / 2, c, u

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """The BOS problem of ``L`` (:meth:`RegressionDesign.estimate` on :meth:`interval`), then up
        to where the count 0 at ``-u`` and the shifts fit as well (:meth:`_fits`)."""
        est = RegressionDesign.estimate(self, L_value, hi_B, rtol)
        if est is None or self._fits(L_value, est):
            return est
        return zoom.threshold(lambda b: self._fits(L_value, b), est, est * 2, hi_B, rtol)


class SelectFootDesign(LastFootDesign):
    """Linear attention with post-RMSNorm, the select task read last (module docstring): the
    one-sided arc of :class:`constructions.last_foot.LastFootDesign` on the counts ``0..L`` with
    its foot at ``F`` (``first = 0``), the count 0 also at ``-u``, ``e_b = beta e_a``."""

    first = 0
    smallest_L = 2
    #: the bisection's screen judges all ``1 + L(L+1)`` inputs, which mp30 (the count task's, for
    #: ``L + 1`` inputs) takes minutes for at ``L = 1024``: float64 instead, which at ``d = 8`` agrees
    #: with the balls to ``1e-11`` of the worst error there; where a float screen misleads, the
    #: certification at the plan's estimate decides (:func:`bounds.search.regression_row`)
    screen_backend = "float64"

    def __init__(self, cell: Cell):
        if not (built(cell) and cell.readout == "regression" and not cell.kind.centred):
            raise ValueError("SelectFootDesign is for linear attention with post-RMSNorm (eps = 0), "
                             "the select task read last")
        FootDesign.__init__(self, cell)
        self._geometries = {}

    def steps(self) -> list[Step]:
        return super().steps() + b_step()

    def geometry(self, L_value: int):
        """``(F, lam)``: :meth:`LastFootDesign.geometry`'s search on the counts ``0..L``, and a
        Nelder-Mead search from the count task's geometry at ``L + 1`` (its counts ``1..L+1`` with
        the foot at ``F + 1`` are this problem's shape); the one of the smaller :meth:`_need`
        (cached; a float search: the judge certifies every row)."""
        if L_value not in self._geometries:
            from scipy.optimize import minimize

            from constructions.regression import design

            found = [g for g in (super().geometry(L_value),) if g is not None]
            self._geometries.pop(L_value, None)
            seed = design(self.cell.replace(task="count")).geometry(L_value + 1)
            if seed is not None:
                need = lambda z: self._need(L_value, z[0], z[1])  # noqa: E731
                start = np.array([math.log(seed[0] + 1.0), math.log(seed[1])])
                res = minimize(need, start, method="Nelder-Mead",
                               options={"xatol": 1e-7, "fatol": 1e-9 * max(1.0, need(start))})
                z = res.x if res.fun <= need(start) else start
                if np.isfinite(need(z)):
                    found.append((math.exp(z[0]), math.exp(z[1])))
            self._geometries[L_value] = min(found, key=lambda g: self._need(L_value, math.log(g[0]),
                                                                              math.log(g[1])), default=None)
        return self._geometries[L_value]

    def _one_below(self, u):
        """``L = 1``: the count 0 of the query b, at ``beta^2`` (:meth:`LastFootDesign._one` then
        reads ``beta^2`` and ``1`` at ``1/2 -+ A |v_1 - v_(beta^2)|/2``, and ``-u``, further along
        the chord's direction below, within ``A |v_1 - v_(-u)| <= 1/2`` of them)."""
        return shift(1)
