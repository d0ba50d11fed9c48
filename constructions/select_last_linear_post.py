r"""The select task read at the last position, linear attention with post-LayerNorm (``eps = 0``).

Inputs ``(s, x_1..x_m)``, ``x_i`` in {a, b}, ``m <= L``, read at the last position: the query is
``e_q``, ``q = x_m`` (``s`` when ``m = 0``; post-norm: ``h = e``), the residual ``e_q + A`` with
``A = sum_j tau <e_q, e_j> e_j``.  An input is ``(n_a, n_b, q)`` (:mod:`verify.inputs`: the sum
over the attended positions does not see their order):

    query a:  r = e_a + tau <e_a, e_s> e_s + n_a tau |e_a|^2 e_a + n_b tau <e_a, e_b> e_b,
    query b:  r = e_b + tau <e_b, e_s> e_s + n_a tau <e_b, e_a> e_a + n_b tau |e_b|^2 e_b,
    (s):      r = (1 + tau |e_s|^2) e_s,

``n_a = 1..L`` at query a, ``n_a = 0..L-1`` at query b (``n_b >= 1``, ``n_a + n_b <= L``).

**Why b must lie along one.**  Linear scores are symmetric: the weight query ``a`` gives a ``b``
is the weight query ``b`` gives an ``a``, ``tau <e_a, e_b>``.  Query ``b`` counts only through it
(``tau <e_b, e_a> != 0``), so at query ``a`` the term ``n_b tau <e_a, e_b> e_b`` is present and
leaves the output alone for every ``n_b`` only if LayerNorm removes it: with ``eps = 0`` the
output depends on the centred part of ``r`` up to a positive factor, and adding multiples of a
centred ``c_b != 0`` to a centred residual that is not parallel to it changes its direction.
So ``e_b = m_b one`` (``one`` the unit vector LayerNorm removes, :mod:`constructions.basis`),
and then query ``b``'s own term ``(1 + n_b tau |e_b|^2) e_b`` is removed too: **query b sees
neither the b tokens nor itself**, only ``s`` and the ``a`` tokens.

**The geometry.**  Write ``e_x = c_x + m_x one`` (``c_x`` centred).  The count task's last-read
arc (:class:`constructions.last_post.LinearLastArcDesign`): the residual line ``V + p top``,
``V = lam across - c top`` (:func:`constructions.regression.axes`, both centred), and

    c_a = alpha top,   c_s = beta (V - u top),   c_b = 0,
    m_a = eta,         m_s = nu,                  m_b = nu,      nu = B/2,

with ``|e_a|^2 = alpha^2 + eta^2 = E^2 = sqrt(d)/u`` (so ``tau |e_a|^2 = 1/u``), ``beta =
theta nu/|V - u top|`` (``|c_s| = theta nu``, ``theta = 1/(L+1)``), ``M = E^2/beta + beta (c +
u)``, ``alpha = nu E/sqrt(M^2 + nu^2)``, ``eta = E M/sqrt(M^2 + nu^2)``: then ``eta nu = alpha
M`` and ``<e_a, e_s> = -alpha beta (c + u) + eta nu = alpha E^2/beta``, so ``gam = tau <e_a,
e_s> = alpha/(u beta) > 0``.  The centred residuals (``<top, V> = -c``, ``|top| = 1``, every
centred part orthogonal to ``one``):

    query a:  (1 + n_a/u) alpha top + gam beta (V - u top) = (alpha/u) (V + n_a top),
    query b:  tau nu (nu beta (V - u top) + n_a eta alpha top) = tau nu^2 beta (V + (sigma n_a - u) top),
    (s):      (1 + tau |e_s|^2) beta (V - u top),

with ``sigma = eta alpha/(nu beta)``; every factor in front is positive.  So every output is
the arc point ``N(V + p top)``: query ``a`` at ``p = n_a``, query ``b`` at ``p = sigma n_a - u``,
``(s)`` at ``p = -u``.  *The rate of query b* (:func:`query_b_rate`): with ``X = beta M = E^2 +
beta^2 (c + u)``, ``sigma = E^2 X/(X^2 + beta^2 nu^2)``, so

    1 - sigma = beta^2 (X (c + u) + nu^2)/(X^2 + beta^2 nu^2) > 0:

query ``b`` runs slower than query ``a`` whatever the parameters of this family (``sigma = 1``
would need ``alpha^2 + beta^2 (c + u) = 0``: solve ``|e_a| = E``, ``gam beta = alpha/u`` and
``sigma = 1`` together), but ``1 - sigma ~ beta^2 (c + u + nu^2/E^2)/E^2`` is as small as the
centred part of ``e_s`` is made: ``beta = theta nu/|V - u top|`` with ``theta = 1/(L+1)`` puts
``(1 - sigma) L`` at about ``theta^2 L^2/(8 lam^2) < 1/(8 lam^2)`` at ``E`` near ``B``, far below
the offset ``u`` (of order ``d^{3/2}/lam^2`` bare, ``sqrt(d)/B^2`` with ``B ~ L^{3/4}`` with a
gain).  *The offset of query b*: query ``b`` misses the term ``e_a`` of its
own residual that puts query ``a``'s count ``n`` at ``p = n``: its count ``n`` sits at ``n - u
- (1 - sigma) n``, ``u = sqrt(d)/|e_a|^2 >= sqrt(d)/B^2``, the place of the count 0 (which is
``(s)``, and every query-``b`` input with ``n_a = 0``).

**The conditions.**  The read-out of the arc (:func:`constructions.steps.arc_readout_steps`) with
``w0 = L/2`` and the arc centred on ``c = (L - u)/2``: ``y(p) = L/2 + A f(p - c)``, ``f(x) =
x/sqrt(lam^2 + x^2)``, increasing, odd.  The count ``n`` is at the points ``n - u - (1 - sigma) n``
(``n <= L - 1``, query b) and ``n`` (``n >= 1``, query a), ``-u`` for ``n = 0``: it is read right
iff ``y`` at the lowest point is above ``n - 1/2`` and at the highest below ``n + 1/2``, each
condition linear in ``A`` (:func:`amplitude_interval`).  At ``sigma = 1`` the point set and the
targets are symmetric under ``p -> L - u - p``, ``y -> L - y`` (the query-``b`` point of ``n``
maps to the query-``a`` point of ``L - n``), so each lower condition is an upper one: the choice
of ``c`` and ``w0``.  ``u`` is the budget's least, ``sqrt(d)/B^2 (1 + 2^-30)`` (``|e_a| < B``):
every query-``b`` point moves up as ``u`` falls, the count 0 moves towards 0.  The shape ``lam``
is the BOS arc's best at ``L`` (the counts ``0..L``, :mod:`constructions.arc`), the amplitude the
middle of the interval within the capacity; the bisection steps up where the shifted conditions
fail at the BOS optimum (:meth:`LinearSelectLastArcDesign.estimate`), and the judge certifies every
row.

**What b costs.**  Scores: none (query ``a`` weighs each ``b`` by ``tau nu eta > 0``, which only
adds along ``one``; no gap is needed).  Values: none (``c_b = 0``).  The price is the
offset: the counts ``1..L-1`` each occupy an interval ``[n - u - (1 - sigma) n, n]`` of the arc
instead of a point, and the arc counts ``0..L`` (the count task read last needs only ``1..L``,
the count 0 placed freely: :func:`bounds.lower.last_post_lower`, the bound of the BOS read at
``L - 1``, is valid here, the count task being the sub-task ``n_b = 0``).  Against the count task
read last this is one more count on the arc and the offset ``u ~ sqrt(d)/B^2``, small against the
arc's tolerance once ``B`` grows: the rate and the leading constant are the count task's
(``L^{3/2}`` bare, ``L^{3/4}`` with a gain).  Budget: ``|e_a| = E < B``, ``|e_s| = nu sqrt(1 +
theta^2) < B``, ``|e_b| = nu``.

**L = 1.**  The points are ``-u`` (count 0) and ``1`` (count 1), symmetric about ``c = (1 -
u)/2``: ``y(1) - 1/2 = 1/2 - y(-u) = A f((1 + u)/2)`` with ``0 < f < 1``, so every amplitude in
``(0, 1]`` counts, at every budget: ``B_min(1) = 0``, not attained (the sweep certifies a witness).

**Precision.**  The centred parts are about ``theta`` times the parts along ``one``, so the
outputs lose about ``log2(L + 1)`` bits to LayerNorm's centring: the judge's balls carry them.

Built: LayerNorm (every affine), ``d >= 3`` (the centred subspace holds the plane of ``top,
across``), ``eps = 0``, regression.  Not built here: RMSNorm (nothing is removed: an exact
suppression of ``b`` at query ``a`` needs ``<e_a, e_b> = 0``, which leaves query ``b`` blind to
the ``a`` tokens), ``eps > 0``, classification.
"""

from __future__ import annotations

import mpmath
import sympy

from constructions import arc, registry, zoom
from constructions.cell import Cell
from constructions.last_post import LinearLastArcDesign, u_0
from constructions.regression import RegressionDesign, Step, _vec, axes
from constructions.symbols import E_A, E_S, ONE, V, W0, B, C, L, t
from constructions.tasks import E_B

_Vu, _bs, _E, _M, _al, _ea, _th = sympy.symbols("V_u beta_s E_a M_s alpha_a eta_a theta_s", positive=True)


def built(cell: Cell) -> bool:
    """Whether ``cell`` is built here (:func:`constructions.registry.linear_select_last_arc`)."""
    return registry.builds("select_last_linear_post", cell)


def theta(L_value: int):
    """``theta = 1/(L+1)``: ``|c_s| = theta nu`` (module docstring), mpmath."""
    return 1 / mpmath.mpf(L_value + 1)


def query_b_rate(cell: Cell, L_value: int, B_value, lam_value, c_value, u_value):
    """``sigma = E^2 X/(X^2 + beta^2 nu^2)``, ``X = E^2 + beta^2 (c + u)``: query ``b``'s count
    ``n`` is at ``sigma n - u`` on the arc (module docstring; mpmath).  ``E^2 = sqrt(d)/u``,
    ``nu = B/2``, ``beta = theta nu/sqrt(lam^2 + (c + u)^2)``."""
    B_v, lam, c, u = (mpmath.mpf(v) for v in (B_value, lam_value, c_value, u_value))
    nu = B_v / 2
    E2 = mpmath.sqrt(cell.d) / u
    beta = theta(L_value) * nu / mpmath.sqrt(lam**2 + (c + u) ** 2)
    X = E2 + beta**2 * (c + u)
    return E2 * X / (X**2 + beta**2 * nu**2)


def points(L_value: int, u_value, sigma_value):
    """``[(p_lo, p_hi)]`` for the counts ``n = 0..L``: the lowest and the highest arc parameter at
    which the construction reads ``n`` (module docstring; mpmath)."""
    u, sigma = mpmath.mpf(u_value), mpmath.mpf(sigma_value)
    out = []
    for n in range(L_value + 1):
        lo = sigma * n - u if n <= L_value - 1 else mpmath.mpf(n)
        hi = mpmath.mpf(n) if n >= 1 else -u
        out.append((lo, hi))
    return out


def amplitude_interval(lam_value, L_value: int, c_value, u_value, sigma_value):
    """``(A_lo, A_hi)``: the amplitudes with ``y(p_lo(n)) > n - 1/2`` and ``y(p_hi(n)) < n + 1/2``
    for ``n = 0..L`` (:func:`points`), ``y(p) = L/2 + A f(p - c)`` (mpmath).  Each condition is
    ``A f > g`` or ``A f < g``: a bound on ``A`` by the sign of ``f`` (where ``f = 0`` it holds or
    fails whatever ``A``: then the empty interval ``(1, 0)``)."""
    lam, c = mpmath.mpf(lam_value), mpmath.mpf(c_value)
    w0, half = mpmath.mpf(L_value) / 2, mpmath.mpf(1) / 2
    lo, hi = mpmath.mpf(0), mpmath.inf
    f = lambda p: (p - c) / mpmath.sqrt(lam**2 + (p - c) ** 2)
    for n, (p_lo, p_hi) in enumerate(points(L_value, u_value, sigma_value)):
        for p, g, above in ((p_lo, n - half - w0, True), (p_hi, n + half - w0, False)):
            fv = f(p)
            if fv == 0:
                if (0 > g) != above:
                    return mpmath.mpf(1), mpmath.mpf(0)
                continue
            # A f > g: A > g/f for f > 0, A < g/f for f < 0; A f < g the other way round
            if (fv > 0) == above:
                lo = max(lo, g / fv)
            else:
                hi = min(hi, g / fv)
    return lo, hi


class LinearSelectLastArcDesign(LinearLastArcDesign):
    """Linear attention with post-LayerNorm, the select task read last (module docstring): the
    arc of ``0..L`` centred on ``(L - u)/2``, ``e_b`` along ``one``, query ``b`` at ``sigma n - u``."""

    attention = "linear"

    def __init__(self, cell: Cell):
        if not (built(cell) and cell.readout == "regression"):
            raise ValueError("LinearSelectLastArcDesign is for linear attention with post-LayerNorm "
                             "(eps = 0, d >= 3), the select task read last")
        RegressionDesign.__init__(self, cell)

    def _embedding_steps(self) -> list[Step]:
        top, _ = axes(self.cell)
        sd = sympy.sqrt(self.cell.d)
        nu = B / 2
        return [Step(_Vu, sympy.sqrt(t**2 + (C + u_0) ** 2), "the norm of V - u top"),
                Step(_E, sympy.sqrt(sd / u_0), "the norm of e_a: tau |e_a|^2 = 1/u puts the count 0 at -u"),
                Step(_th, 1 / (L + 1), "the centred part of e_s against its part along one"),
                Step(_bs, _th * nu / _Vu, "the scale of the line in e_s: |beta (V - u top)| = theta B/2"),
                Step(_M, sd / (u_0 * _bs) + _bs * (C + u_0), "the ratio of the one and top parts of e_a"),
                Step(_al, nu * _E / sympy.sqrt(_M**2 + nu**2), "the top part of e_a"),
                Step(_ea, _E * _M / sympy.sqrt(_M**2 + nu**2), "the one part of e_a"),
                _vec(E_A, _al * top + _ea * ONE, "the embedding of a", "e_a"),
                _vec(E_S, _bs * (V - u_0 * top) + nu * ONE,
                     "the embedding of s: tau <e_a, e_s> = alpha/(u beta) puts every residual on V + n top", "e_s"),
                _vec(E_B, nu * ONE, "the embedding of b: along one, which LayerNorm removes, so no b "
                     "term reaches an output, and query b counts the a tokens at sigma n - u", "e_b")]

    def steps(self) -> list[Step]:
        out = super().steps()
        out[-1] = Step(W0, L / 2, "the read-out bias, the centre of the counts 0..L", "w0")
        return out

    def interval(self, t_value, L_value: int):
        """The BOS arc interval of ``L`` (the shape's screen; the offsets enter in :meth:`_point`)."""
        return arc.interval(t_value, L_value)

    def interval_float(self, t_value, L_value: int):
        return arc.interval_float(t_value, L_value)

    def _point(self, L_value: int, Bv):
        """``(lam, A, c, u)`` at budget ``B`` (mpmath): the best shape of the BOS arc of ``L``,
        ``u`` the budget's least, ``c = (L - u)/2`` and the middle of :func:`amplitude_interval`
        within the capacity (``u`` None where that is empty)."""
        lam = mpmath.mpf(self.best_shape(L_value, float(Bv))[0])
        u = self.fallback_u(Bv)
        c = (L_value - u) / 2
        sigma = query_b_rate(self.cell, L_value, Bv, lam, c, u)
        cap = self.capacity_mp(lam, Bv)
        lo, hi = amplitude_interval(lam, L_value, c, u, sigma)
        hi = min(hi, cap)
        if not lo < hi:
            return lam, (lo + cap) / 2 if lo < cap else cap / 2, c, None
        return lam, (lo + hi) / 2, c, u

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """The BOS problem of ``L`` (:meth:`RegressionDesign.estimate` on :meth:`interval`), then up
        to where the offsets fit as well (:meth:`_fits`)."""
        est = RegressionDesign.estimate(self, L_value, hi_B, rtol)
        if est is None or self._fits(L_value, est):
            return est
        return zoom.threshold(lambda b: self._fits(L_value, b), est, est * 2, hi_B, rtol)
