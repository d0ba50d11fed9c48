r"""The select task read at the last position after post-LayerNorm, softmax attention (``eps = 0``).

Inputs ``(s, x_1..x_m)``, ``x_i`` in {a, b}, ``m <= L``, read at the last position: the query is
``e_q``, ``q = x_m`` (``s`` when ``m = 0``; post-norm: ``h = e``), the residual ``e_q + A``.  An
input is ``(n_a, n_b, q)`` (:mod:`verify.inputs`: attention is a sum over the attended positions,
each term a function of its token and of the query alone, so the order of ``x_1..x_m`` does not
matter).  With the weights ``w_qx = exp(tau <e_q, e_x>)`` and ``Z = w_qs + n_a w_qa + n_b w_qb``:

    query a:  Z r = w_as (e_s + e_a) + 2 n_a w_aa e_a + n_b w_ab (e_a + e_b),
    query b:  Z r = w_bs (e_s + e_b) + n_a w_ba (e_a + e_b) + 2 n_b w_bb e_b,
    (s):      r = 2 e_s.

**The geometry.**  Every embedding is a centred part plus a part along ``one`` (which LayerNorm
removes): ``e_x = c_x + m_x one``.  The centred parts are those of the count task's last-read arc
(:mod:`constructions.last_post`), ``c_a = kappa u top``, ``c_s = kappa (V - u top)``, ``V = lam
across - c top``, and **b has the centred part of a**, ``c_b = c_a``; the parts along ``one`` are
``m_s = m_a = M`` and ``m_b = M/2``.  Then ``P = c_s + c_a = kappa V`` and ``Q = 2 rho c_a =
kappa top`` with ``rho = w_aa/w_as = exp(tau kappa^2 u (2u + c)) = 1/(2u)`` (``m_a = m_s``: the
parts along ``one`` cancel in ``<e_a, e_a - e_s>``), and the centred residuals are

    query a:  w_as (P + (n_a + eps_a n_b) Q),   eps_a = w_ab/w_aa = exp(-tau M^2/2),
    query b:  w_bs (P + (n_a + eps_b n_b) Q),   eps_b = w_bb/w_ba = exp(-tau M^2/4),
    (s):      2 kappa (V - u top) = 2 (P - u Q),

because ``c_b = c_a`` puts every ``b`` term along ``c_a``, ``w_ba/w_bs = exp(tau <e_b, e_a - e_s>)
= rho`` (again ``m_a = m_s``), and ``<e_a, e_b> - |e_a|^2 = M (M/2 - M)``, ``|e_b|^2 - <e_b, e_a>
= (M/2)(M/2 - M)``.  With ``eps = 0`` LayerNorm ignores the positive factors ``w_as, w_bs`` and
the parts along ``one``: every output is the arc point ``N(P + p Q)`` of the line ``V + p top``,
at ``p = n_a + eps n_b`` (``0 < eps_a < eps_b < 1``) or, for ``(s)``, at ``p = -u``.  *How the
query of b yields n_a*: ``b`` scores ``a`` against ``s`` exactly as ``a`` does (the ratio
``rho``), and its own value ``e_b`` equals ``e_a`` up to ``one``, so the query-``b`` residual
runs along the same line at the same rate; ``b`` tokens are suppressed by the score gap
``tau M^2/4`` (seen from ``b``; ``tau M^2/2`` from ``a``), which moves a point by at most
``eps_b (L - n_a)`` along the arc.

**The conditions.**  The read-out is the BOS arc's (:func:`constructions.steps.arc_readout_steps`)
with ``w0 = c``: ``y(p) = c + A (p - c)/sqrt(lam^2 + (p - c)^2)``, increasing in ``p``.  Since the
query-``b`` inputs reach ``n_a = 0`` at ``p`` in ``(0, eps_b L]``, the arc must count the counts
``0..L`` at ``p = n..n + eps_b (L - n)``: with ``c = L/2`` (the centre of ``0..L``), ``y(n) > n -
1/2`` and ``y(n + eps (L - n)) < n + 1/2`` for ``n = 0..L``, each linear in ``A``
(:func:`select_interval`; at ``eps = 0`` the BOS arc interval of ``L``,
:func:`constructions.arc.interval`), and ``(s)`` needs ``|y(-u)| < 1/2`` for some ``u`` in
``(0, 1/2)``, which holds near ``u = 0`` once ``y(0) > -1/2`` (:func:`constructions.last_post.
offset_window`).  So the counting arc is that of ``L`` (``0..L``), where the count task read last
needs that of ``L - 1`` (``1..L``; :func:`bounds.lower.last_post_lower` is its bound, valid here:
the count task is the sub-task ``n_b = 0``).

**What b costs.**  Scores: the gap ``tau M^2/4``.  Values: none (``c_b = c_a``).  Budget: the
parts along ``one`` share the embeddings' budget with the centred parts: ``u`` is chosen with
``|c_s| <= B/sqrt(2)`` (:func:`constructions.last_post.choose_u` at ``B/sqrt 2``, ``c = L/2``)
and ``M = (1 - 2^-20) sqrt(B^2 - |c_s|^2) >= (1 - 2^-20) B/sqrt 2``, so ``|e_s| < B`` (``|e_a|,
|e_b| <= |e_s|``) and ``eps_b <= eps(B) = exp(-tau (1 - 2^-20)^2 B^2/8)``, which the amplitude
interval uses (:meth:`SelectLastArcDesign._point`).  Against the count task read last the price
is one more count on the arc (``B^BOS(L)/B^BOS(L-1) -> (L/(L-1))^p``, ``p`` the exponent: about
``p/L`` relative) and, at small ``L`` where ``B`` is of order 1, the suppression (``eps(B)`` is
not small): the bisection steps up to where the shifted conditions hold.  The rate and the
leading constant are the count task's (``L^{3/2}`` bare, ``L^{3/4}`` with a gain).

**L = 1.**  The same construction (``c = 1/2``) counts once ``eps(B) < 1/2``, a budget of
order ``d^{1/4}``; the infimum ``B_min(1) = 0`` (``e_b = e_s`` puts ``(s, b)`` on ``(s)``) is not
witnessed by this geometry, so its ``L = 1`` row is not certified.

Not built here: RMSNorm (no direction the norm removes: a ``b`` term is an exact shift along
the arc only if ``e_b`` is parallel to ``e_a``, ``e_b = beta e_a``, and then the query ``b``
runs along the arc at the rate ``(1 + beta) rho^(beta - 1)/2``, equal to 1 only at ``beta = 1``,
``b = a``; with linear attention ``e_b = beta e_a`` does work, :mod:`constructions.select_last_linear_post`),
LayerNorm at ``d = 2`` beyond ``L = 1`` (no arc: every output is one of two points, so nothing
solves it there, :func:`bounds.lstar.cell_l_star`; at ``L = 1`` this geometry is built, ``p`` the
zero vector), ``eps > 0``, classification.
"""

from __future__ import annotations

import mpmath
import sympy

from constructions import arc, last_post, registry
from constructions.cell import Cell
from constructions.last_post import LastArcDesign, u_0
from constructions.regression import RegressionDesign, Step, _vec, axes
from constructions.symbols import E_A, E_S, ONE, V, B, C, kappa, t
from constructions.tasks import E_B

#: the part of e_s and e_a along one
M_one = sympy.Symbol("M_one", positive=True)
#: the centred part of e_s is kept within EMB * B, and M within SHARE of the rest
EMB = 1 / mpmath.sqrt(2)
SHARE = 1 - sympy.Rational(1, 2**20)


def built(cell: Cell) -> bool:
    """Whether ``cell`` is built here (:func:`constructions.registry.select_last_arc`)."""
    return registry.builds("select_last_post", cell)


def eps_bound(cell: Cell, B_value):
    """``eps(B) = exp(-tau (1 - 2^-20)^2 B^2/8)``: ``eps_a < eps_b <= eps(B)`` wherever ``|c_s|
    <= B/sqrt 2`` (module docstring; mpmath)."""
    share = mpmath.mpf(1) - mpmath.mpf(2) ** -20
    return mpmath.exp(-share**2 * mpmath.mpf(B_value) ** 2 / (8 * mpmath.sqrt(cell.d)))


def window_interval(lam_value, L_value: int, windows):
    """``(A_lo, A_hi)``: the amplitudes of the arc read-out ``y(p) = c + A f(p)``, ``f(p) = (p -
    c)/sqrt(lam^2 + (p - c)^2)``, ``c = L/2``, with ``y(p_lo) > n - 1/2`` and ``y(p_hi) < n + 1/2``
    for the window ``(p_lo, p_hi)`` of every count ``n = 0..L`` (``windows[n]``; mpmath).  Each
    condition is ``A f(p) > g`` or ``A f(p) < g``: a bound on ``A`` by the sign of ``f`` (where
    ``f = 0`` it holds or fails whatever ``A``: then the empty interval ``(1, 0)``)."""
    lam, c = mpmath.mpf(lam_value), mpmath.mpf(L_value) / 2
    half = mpmath.mpf(1) / 2
    lo, hi = mpmath.mpf(0), mpmath.inf
    f = lambda p: (p - c) / mpmath.sqrt(lam**2 + (p - c) ** 2)
    for n, (p_lo, p_hi) in enumerate(windows):
        for p, g, above in ((p_lo, n - half - c, True), (p_hi, n + half - c, False)):
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


def select_interval(lam_value, L_value: int, eps_value):
    """``(A_lo, A_hi)``: the amplitudes with ``y(n) > n - 1/2`` and ``y(n + eps (L - n)) < n +
    1/2`` for ``n = 0..L`` (:func:`window_interval`)."""
    eps = mpmath.mpf(eps_value)
    return window_interval(lam_value, L_value, [(mpmath.mpf(n), n + eps * (L_value - n))
                                                for n in range(L_value + 1)])


class SelectLastArcDesign(LastArcDesign):
    """Softmax attention with post-LayerNorm, the select task read last (module docstring): the
    arc of ``0..L``, ``b`` with the centred part of ``a`` and a smaller part along ``one``."""

    def __init__(self, cell: Cell):
        if not (built(cell) and cell.readout == "regression"):
            raise ValueError("SelectLastArcDesign is for softmax attention with post-LayerNorm "
                             "(eps = 0), the select task read last")
        RegressionDesign.__init__(self, cell)

    def _embedding_steps(self) -> list[Step]:
        top, _ = axes(self.cell)
        sd = sympy.sqrt(self.cell.d)
        return [Step(kappa, sympy.sqrt(sd * sympy.log(1 / (2 * u_0)) / (u_0 * (2 * u_0 + C))),
                     "the scale of the centred parts: rho = exp(tau <e_a, e_a - e_s>) = 1/(2u)"),
                Step(M_one, SHARE * sympy.sqrt(sympy.Max(0, B**2 - kappa**2 * (t**2 + (C + u_0) ** 2))),
                     "the part of e_s and e_a along one: the budget the centred part of e_s leaves"),
                _vec(E_A, kappa * u_0 * top + M_one * ONE, "the embedding of a", "e_a"),
                _vec(E_S, kappa * (V - u_0 * top) + M_one * ONE,
                     "the embedding of s: the (s) input is the arc at n = -u", "e_s"),
                _vec(E_B, kappa * u_0 * top + (M_one / 2) * ONE,
                     "the embedding of b: the centred part of a, half its part along one, so the "
                     "b tokens move a point by eps n_b along the arc, eps <= exp(-tau M^2/4)", "e_b")]

    def steps(self) -> list[Step]:
        out = super().steps()
        out[-1] = Step(out[-1].symbol, C, "the read-out bias, the centre of the counts 0..L", "w0")
        return out

    def interval(self, t_value, L_value: int):
        """The BOS arc interval of ``L`` (the suppression's shift is added in :meth:`_point`)."""
        return arc.interval(t_value, L_value)

    def interval_float(self, t_value, L_value: int):
        return arc.interval_float(t_value, L_value)

    def _point(self, L_value: int, Bv):
        """``(lam, A, c, u)`` at budget ``B`` (mpmath): the best shape of the BOS arc of ``L``,
        the middle of :func:`select_interval` at ``eps(B)`` within the capacity, ``c = L/2`` and ``u`` of :func:`constructions.last_post.choose_u`
        at ``B/sqrt 2`` (None where the interval is empty or no ``u`` fits)."""
        lam = mpmath.mpf(self.best_shape(L_value, float(Bv))[0])
        eps = eps_bound(self.cell, Bv)
        cap = self.capacity_mp(lam, Bv)
        c = mpmath.mpf(L_value) / 2
        lo, hi = select_interval(lam, L_value, eps)
        hi = min(hi, cap)
        if not lo < hi:
            return lam, (lo + cap) / 2, c, None
        Av = (lo + hi) / 2
        return lam, Av, c, last_post.choose_u(self.cell, lam, Av, L_value, Bv * EMB, c)

    def fallback_u(self, Bv):
        return mpmath.mpf(1) / 2 - mpmath.mpf(2) ** -60
