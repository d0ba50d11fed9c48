r"""The select task read at the last position, linear attention: a distractor whose query counts.

Inputs ``(s, x_1..x_m)``, ``x_i`` in {a, b}, ``m <= L``, are read at the last position: the
query is ``h_q`` with ``q = x_m`` (``s`` when ``m = 0``), the residual ``e_q + A``.  With
linear attention ``A = sum_j tau <h_q, h_j> h_j``, so an input with ``n_a`` tokens ``a`` and
``n_b`` tokens ``b`` read at query ``q`` gives

    y_q(n_a, n_b) = K_q + k_q n_a + p_q n_b,   k_q = tau <h_q, h_a> <w, h_a>,
    p_q = tau <h_q, h_b> <w, h_b>,   K_q = <w, e_q> + tau <h_q, h_s> <w, h_s> + w0,

and the input ``(s)`` gives ``y_s = <w, e_s> + tau |h_s|^2 <w, h_s> + w0``.  The inputs are
``(s)``; query ``a`` at ``n_a = 1..L``, ``n_b = 0..L - n_a``; query ``b`` at ``n_b = 1..L``,
``n_a = 0..L - n_b`` (:mod:`verify.inputs`).  A query-``b`` input must produce ``n_a`` from a
query that is not ``a``: the *query* of ``b`` must score ``a`` as ``a`` does (under bare pre-norm
only nearly), while the *value* of ``b`` adds nothing to the read-out.  Every construction below
has ``<w, h_b> = 0``, so
``p_a = p_b = 0`` exactly: no input depends on ``n_b``, and

* query ``a``: ``y = K_a + k_a n``, ``n = 1..L`` (the count task's line at the last read);
* query ``b``: ``y = K_b + k_b n``, ``n = 0..L-1``;
* ``(s)``: ``y = K_s``.

So the select task at the last read reduces to ``2L + 1`` numbers on two lines and a point.

**No norm** (:class:`FreeSelectDesign`, ``d >= 3``; ``e = h``).  On the orthonormal frame
``c_1, p, one`` (:mod:`constructions.basis`):

    e_a = lam c_1,   e_b = lam c_1 + gam p,   e_s = s_2 p + s_3 one,
    w = om c_1 - (om lam/gam) p + w_3 one,       lam = B sqrt(1 - t^2),  gam = t B,

``t`` in ``(0, 1)`` the shape.  Then ``<w, e_b> = om lam - om lam = 0`` (the value of ``b`` is
unread), ``<e_b, e_a> = lam^2 = |e_a|^2`` (``b`` scores ``a`` as ``a`` does), so ``k_b = k_a =
k = tau om lam^3`` (``om = k/(tau lam^3)``).  The constants, with ``<e_a, e_s> = 0`` and ``P =
<w, e_s> = -(om lam/gam) s_2 + w_3 s_3``: ``K_a = om lam + w0``, ``K_b = tau gam s_2 P + w0``,
``K_s = P (1 + tau |e_s|^2) + w0``.  The construction sets ``K_b = K_a + k - 1``: then the
query-``b`` line at ``n`` is the query-``a`` line at ``n + 1`` minus one, ``y_b(n) - n = y_a(n+1)
- (n+1)``, and the select task's inputs decide exactly what the count task's at the last read
decide: ``(L-1)|k - 1| < 1`` and ``K_a`` within the line's interval
(:func:`constructions.tasks.last_line_interval`); ``K_a`` is its middle ``-(k-1)(L+1)/2`` and
``K_s = 0``.  Solving: ``P = (om lam + k - 1)/(tau gam s_2)`` (positive: ``om lam > 1 - k`` on
the construction's domain), ``|e_s|^2 = ((om lam - K_a)/P - 1)/tau`` (``K_s - K_a = -K_a``),
``s_2 = gam/2`` (the choice that leaves ``s_3^2 = |e_s|^2 - s_2^2`` largest), ``s_3 =
sqrt(|e_s|^2 - s_2^2)`` and ``w_3 = (P + om lam s_2/gam)/s_3``.  *What suppressing b costs:*
budget.  ``|e_b| = B`` takes the whole budget, and ``s_3^2 > 0`` needs ``gam^2 (2r - 1)/4 >
sqrt(d)`` with ``r = (om lam - K_a)/(om lam + k - 1)``, i.e. ``B > gam > 2 d^{1/4}/sqrt(2r - 1)``
(``r`` is near 1 but for the offset ``-K_a = (k - 1)(L+1)/2``, below 1/2), where the count task
needs about ``d^{1/8}``; ``|w|^2 = om^2 (1 + lam^2/gam^2) + w_3^2`` and ``|e_s|`` must also stay
within ``B``.  (Where they do not, the vectors are shrunk to the budget: the parameters stay within
``B`` and the judge decides whether they count.)  Scores: none (``b`` scores exactly as ``a``).  At budget ``B`` the construction takes
the ``(t, k)`` of largest relative slack on a grid (:meth:`FreeSelectDesign.plan`); it counts
where that slack is positive, which holds from a budget bounded in ``L`` on (rate 0).  The proven lower bound
is the count task's at the last read (:func:`bounds.lower.last_free_line_lower`: the count task
is the sub-task ``n_b = 0``).

**Bare pre-LayerNorm** (:class:`BareSelectDesign`, ``d >= 3``, ``eps = 0``).  Under bare
pre-norm every value has ``|h| = sqrt(d)``, so ``b`` cannot score ``a`` as ``a`` does without being ``a``: with ``h_a =
sqrt(d) c_1``, ``h_b = sqrt(d)(c c_1 + s p)`` (``s = sqrt(1 - c^2)``) and ``w`` with ``<w, h_b> =
0``, ``k_b = c k_a`` with ``c < 1``.  Both slopes must lie in ``(1 - 1/(L-1), 1 + 1/(L-1))``,
so ``c > (L-2)/L`` and ``w``, orthogonal to ``h_b`` yet reading ``h_a``, is long: the least
``|w|`` with ``<w, h_a> = x/sqrt(d)`` and ``<w, h_b> = 0`` is ``x/(d s)``
(:func:`bounds.lower.last_select_line_lower` proves ``B >= (1 - 2/(L-1))(1 + 1/(L-1))
sqrt(L-1)/(2d)`` for every parameter set).  *What suppressing b costs:* the read-out's norm,
``B_min ~ sqrt(L)/(2d)``: the distractor turns the count task's bounded cost into a growth of
rate ``1/2``.  Construction: ``x = k_a = 1 + a/(L-1)`` and ``k_b = c x = 1 - a/(L-1)`` (the
spread ``a`` in ``(0, 1)``, symmetric about 1), ``w = (x/d)(c_1 - (c/s) p) + om one``,
``h_s = h_a``.  The constants are set through what LayerNorm removes: ``e_a = nu c_1``,
``e_a = nu c_1 + mu_a one``, ``e_s = nu c_1 + mu_s one``, ``e_b = nu (c c_1 + s p) + mu_b one``
(``nu = 2^-10 B``, ``|mu| <= m = sqrt(B^2 - nu^2)``): ``K_a = nu x/d + mu_a om + x + w0``,
``K_b = mu_b om + c x + w0``, ``K_s = nu x/d + mu_s om + x + w0``.  The targets are the middles of
the two lines, ``K_a = -a(L+1)/(2(L-1))`` (``n = 1..L``) and ``K_b = a/2`` (``n = 0..L-1``), and
``K_s = 0``: ``(mu_s - mu_a) om = -K_a`` and ``(mu_b - mu_a) om = K_b - K_a + (1 - c) x + nu
x/d``, both positive; with ``mu_a = -m`` and ``om`` the larger over ``2m`` every ``|mu| <= m``.  Every input is then within ``(1 - a)/2`` of its target, and the budget is
``|w|^2 = x^2/(d^2 s^2) + om^2 <= B^2`` (beyond it ``w`` is shrunk to ``B``, and the judge decides); at budget ``B`` the spread ``a`` is the middle of the
spreads that fit (a grid over ``(0, 1)``, :meth:`BareSelectDesign.plan`).  At the ``L`` where the
one-constant geometry of bare pre-RMSNorm (below, on the axes ``c_1, p``) has the smaller
``B_min`` (small ``L``: it needs no offsets) that geometry is built instead.  As ``a -> 1``
``x^2/(d^2 s^2) -> (L-1)(1 + 1/(L-1))^4/(4 d^2)`` and ``om = O(1/B)``, so the construction's
``B_min`` meets the lower bound's leading term ``sqrt(L-1)/(2d)``.

**Bare pre-RMSNorm** (:class:`ScaleSelectDesign`, every ``d >= 2``, ``eps = 0``).  RMSNorm
removes only the embeddings' scales, so every ``<w, e_x>`` is a scale times ``<w, u_x>``
(``u_x = h_x/sqrt(d)``) and ``K_b`` cannot be raised above ``K_a`` as the two symmetric lines
want.  One constant serves instead: ``h_s = h_a = sqrt(d) e_1``, ``h_b = sqrt(d)(c e_1 + s q)``,
``w = (1/d)(e_1 - (c/s) q)`` (``<w, h_b> = 0``, slope of query ``a`` exactly 1), ``e_a = e_s =
nu e_1``, ``e_b = nu (c e_1 + s q)`` (``nu = 2^-10 min(B, 1)``).  Then ``y_a(n) - n = y_s = K_a`` and
``y_b(n) - n = K_a - nu/d - (1 - c)(n + 1)``, with ``c = 1 - a/(L-1)``: every error lies in
``[K_a - nu/d - a L/(L-1), K_a]``, centred by ``K_a = (a L/(L-1) + nu/d)/2``, so it counts iff
``a < (1 - nu/d)(L-1)/L``, and the budget is ``|w| = 1/(d s) <= B``, i.e. ``a >= (L-1)(1 -
sqrt(1 - 1/(d B)^2))``; ``a`` is the middle of the two (:meth:`ScaleSelectDesign.plan`).  So
``B_min`` solves ``1 - sqrt(1 - 1/(d B)^2) = (1 - nu/d)/L``: ``B_min ~ sqrt(L/2)/d``, the rate
``1/2`` of the lower bound, a factor ``sqrt(2)`` above its leading term (the one constant gives
the two lines one spread, ``a < 1``, where LayerNorm's offsets allow ``2``).

**Pre-norm with a gain** (:class:`GainSelectDesign`; LayerNorm ``d >= 3``, RMSNorm every
``d``, ``eps = 0``; with ``gain_bias`` the bias is left at 0, an upper bound).  A gain lets the
values leave the sphere, and then ``b`` *can* score ``a`` exactly as ``a`` does without being
``a``.  With ``g = G_1 e_1 + G_2 (0, 1, .., 1)`` (``G_1 = B cos phi``, ``G_2 = B sin phi/sqrt(d-1)``,
``|g| = B``) the embeddings ``e = lam (cos th top + sin th across)`` (the kind's axes, ``(c_1, p)``
or ``(e_1, q)``) give the values ``h(th) = A_1 cos th u_1 + A_2 sin th u_2``, an ellipse: RMSNorm
``u = (e_1, q)``, ``A = sqrt(d) (G_1, G_2)``; LayerNorm ``u_1 = g * c_1/|g * c_1|``, ``u_2 = p``,
``A_1 = sqrt(G_1^2 (d-1) + G_2^2)``, ``A_2 = sqrt(d) G_2``.  For ``h_a = h(t)`` off the axes the
line through ``h_a`` orthogonal to ``h_a`` meets the ellipse again at ``h_b = h_a + tau_v
h_a^perp`` (``tau_v = 2 X Y (1/A_1^2 - 1/A_2^2)/(Y^2/A_1^2 + X^2/A_2^2)``, ``(X, Y)`` the
coordinates of ``h_a``), so ``<h_b, h_a> = |h_a|^2``: ``k_b = k_a = k``.  The read-out is the
vector of the plane orthogonal to ``h_b`` with ``<w, h_a> = k sqrt(d)/|h_a|^2``; ``h_s = h_a``.
The constants: ``K_q = <w, e_q> + k + w0`` for ``q = a, b, s``, and the construction sets, as
without a norm, ``K_b = K_a + k - 1`` and ``K_s = 0`` (``K_a`` the middle of the line), i.e.
``<w, e_b - e_a> = k - 1`` and ``<w, e_s - e_a> = -K_a``: through the parts ``mu`` along ``one``
(LayerNorm, ``<w, one> != 0`` since ``u_1`` has a part along ``one``; the three parts centred
on 0 within ``sqrt(B^2 - nu^2)``) or the scales ``lam`` in ``(0, B]`` (RMSNorm, where ``<w, t_a>``
and ``<w, t_b>`` are positive on the grid's choice).  Then the select task's inputs decide what
the count task's at the last read decide, and the price of ``b`` is budget: ``k <= B |h_a|^3
|h_b - h_a|/(sqrt(d) |h_b|)`` against the count task's ``tau |h|^3 B`` with ``|h|`` up to ``M B``
(the second axis of the gain and the chord's length cost a bounded factor, rate 0).  The split
``phi`` maximises ``max_th |h_a|^3 |h_b - h_a|/|h_b|`` at unit budget (:meth:`GainSelectDesign.
_gain_split`), ``(t, k)`` is the grid point of largest slack at budget ``B``
(:meth:`GainSelectDesign.plan`).  LayerNorm at ``d = 2`` has its values on one line (not built).

**L = 1** (every cell): ``B_min(1) = 0``, not attained; the witness at budget ``B`` puts the three
outputs just around 1/2 (:meth:`FreeSelectDesign.build`, :meth:`BareSelectDesign.build`).

Not built (:func:`constructions.refusals.refusal`): ``d = 2`` without a norm (no third direction of the frame) and
with pre-LayerNorm (values on one line), pre-RMSNorm with ``eps > 0`` (not scale-free), post-norm,
softmax attention, classification.  Pre-LayerNorm with ``eps > 0`` (``d >= 3``) carries these
constructions exactly: :class:`constructions.last_eps.EpsSelectDesign`.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import sympy

from constructions import registry, zoom
from constructions.refusals import refusal
from constructions.cell import Cell, Params
from constructions.regression import RegressionDesign, Step, _check_budget, _check_count, _temperature, _vec, axes
from constructions.symbols import (BETA, C1, E1, E_A, E_S, G, H_A, H_S, ONE, P, Q, W, W0, A, B, C, L, inner,
                                   t, tau)
from constructions.tasks import E_B, last_line_interval

# no norm: the shape's parts, the slope's factor, the parts of e_s and w off the plane of e_a, e_b
lam_e, gam_e, om_e = sympy.symbols("lambda_e gamma_e omega_e", positive=True)
P_s, E_s2, w_3 = sympy.symbols("P_s |e_s|^2 w_3", real=True)
s_2, s_3, f_s, f_w = sympy.symbols("s_2 s_3 f_s f_w", positive=True)
#: where the budget does not suffice the vectors are shrunk to it (the judge then decides)
FLOOR = sympy.Rational(1, 2**20)
# bare pre-LayerNorm: the slopes, the cosine between h_a and h_b, its sine, the targets and
# the parts along one
x_a, c_b, s_b = sympy.symbols("x_a c_b s_b", positive=True)
nu_e, m_e, om_1, mu_s, mu_b = sympy.symbols("nu_e m_e omega_1 mu_s mu_b", positive=True)
K_a, K_b = sympy.symbols("K_a K_b", real=True)
U_B = sympy.Symbol("u_b")

#: the shape grid (no norm: ``t = gam/B``) and the slope grid of the float plan
T_GRID = np.linspace(0.02, 0.98, 193)
K_POINTS = 65
#: the spread grid of the bare plan
A_GRID = np.linspace(1e-4, 1 - 1e-4, 4097)
#: the scale of the bare embeddings' centred parts, relative to the budget
BARE_NU = sympy.Rational(1, 2**10)


def built(cell: Cell) -> bool:
    """Whether ``cell`` (regression) is built here: the cells of the four entries of
    :mod:`constructions.registry` in this module (``*_select_last``)."""
    return registry.builds("select_last", cell)


def _params(cell: Cell, out: dict) -> Params:
    vectors = {n: v for n, v in out.items() if n != "w0" and not n.startswith("_")}
    return Params(cell, vectors, {"w0": out["w0"]})


class _SelectLastDesign(RegressionDesign):
    """The shared interface: a float plan at budget ``B`` whose slack decides, the exact
    construction evaluated from the steps, the ``L = 1`` witness."""

    def __init__(self, cell: Cell):
        if not built(cell):
            raise ValueError(f"{cell.describe()}: {refusal(cell)}")
        super().__init__(cell)

    def best_shape(self, L_value: int, B_value: float):
        """``(None, slack)``: the plan's slack (the line family reports no shape)."""
        return None, self.plan(L_value, float(B_value))[-1]

    def estimate(self, L_value: int, hi_B: float = 1e6, rtol: float = 1e-7):
        """The smallest budget at which the plan has positive slack (``1e-12`` at ``L = 1``,
        where every budget counts; None if none up to ``hi_B``)."""
        if L_value == 1:
            return 1e-12
        feasible = lambda b: self.plan(L_value, b)[-1] > 0
        if not feasible(hi_B):
            return None
        return zoom.bisect_up(feasible, 1e-6, hi_B, rtol)[1]

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            if L_value == 1:
                return self._witness(Bv)
            tv, Av, Cv = self.arguments(L_value, Bv)
            return _params(self.cell, self.evaluate(L_value, Bv, tv, Av, Cv))


class FreeSelectDesign(_SelectLastDesign):
    """Linear attention without a norm, the select task read last (module docstring)."""

    def steps(self) -> list[Step]:
        return [
            _temperature(self.cell),
            Step(gam_e, t * B, "the part of e_b off e_a, gam = t B"),
            Step(lam_e, B * sympy.sqrt(1 - t**2), "the norm of e_a, so that |e_b| = B"),
            Step(om_e, A / (tau * lam_e**3), "the read-out along c_1: the slope k = tau om lam^3"),
            Step(s_2, gam_e / 2, "the part of e_s along p"),
            Step(P_s, (om_e * lam_e + A - 1) / (tau * gam_e * s_2),
                 "<w, e_s>: it sets K_b = K_a + k - 1 (query b reads as query a with one more a)"),
            Step(E_s2, ((om_e * lam_e - C) / P_s - 1) / tau, "|e_s|^2: it sets K_s = 0"),
            Step(s_3, sympy.sqrt(sympy.Max(E_s2 - s_2**2, (FLOOR * B)**2)),
                 "the part of e_s along one (kept real where the budget does not suffice)"),
            Step(w_3, (P_s + om_e * lam_e * s_2 / gam_e) / s_3, "the part of w along one"),
            Step(f_s, sympy.Min(1, B / sympy.sqrt(s_2**2 + s_3**2)), "1, or the shrink of e_s to the budget"),
            Step(f_w, sympy.Min(1, B / sympy.sqrt(om_e**2 * (1 + lam_e**2 / gam_e**2) + w_3**2)),
                 "1, or the shrink of w to the budget"),
            _vec(E_A, lam_e * C1, "the embedding of a", "e_a"),
            _vec(E_B, lam_e * C1 + gam_e * P, "the embedding of b: it scores a as a does", "e_b"),
            _vec(E_S, f_s * (s_2 * P + s_3 * ONE), "the embedding of s, orthogonal to e_a", "e_s"),
            _vec(W, f_w * (om_e * C1 - (om_e * lam_e / gam_e) * P + w_3 * ONE),
                 "the read-out, orthogonal to e_b: the value of b is unread", "w"),
            _vec(H_S, E_S, "the value of s (no norm: the embedding)", "_h_s"),
            _vec(H_A, E_A, "the value of a", "_h_a"),
            # y_a(n) = <w, e_a> + tau <e_a, e_s> <w, e_s> + k n + w0, with <e_a, e_s> = 0
            Step(W0, C - inner(W, E_A), "the read-out bias: y_a(n) = K_a + k n", "w0"),
        ]

    def _parts(self, L_value: int, B_value: float, tt, kk):
        """``(|e_s|^2, s_3^2, |w|^2, P)`` on the grid ``tt x kk`` (float64; module docstring)."""
        d = self.cell.d
        ta = 1 / math.sqrt(d)
        tt, kk = np.asarray(tt, dtype=float)[:, None], np.asarray(kk, dtype=float)[None, :]
        gam, lam = tt * B_value, B_value * np.sqrt(1 - tt**2)
        om = kk / (ta * lam**3)
        Ka = -(kk - 1) * (L_value + 1) / 2
        s2 = gam / 2
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            Pv = (om * lam + kk - 1) / (ta * gam * s2)
            E2 = ((om * lam - Ka) / Pv - 1) / ta
            s3sq = E2 - s2**2
            w3 = (Pv + om * lam * s2 / gam) / np.sqrt(s3sq)
            w2 = om**2 * (1 + lam**2 / gam**2) + w3**2
        return E2, s3sq, w2, Pv

    def plan(self, L_value: int, B_value: float):
        """``(t, k, slack)``: the grid point of largest relative slack ``min(1 - |e_s|^2/B^2,
        1 - |w|^2/B^2, s_3^2/B^2, 1 - (L-1)|k - 1|)`` (``-inf`` where ``P <= 0``; the last term
        is positive on the grid, so it keeps the line's margin without moving ``B_min``), the
        slopes ``k`` spread over the counting interval (below 2)."""
        lo, hi = last_line_interval(L_value)
        top = min(hi, 2.0)
        kk = lo + (top - lo) * np.linspace(0.005, 0.995, K_POINTS)
        E2, s3sq, w2, Pv = self._parts(L_value, B_value, T_GRID, kk)
        B2 = B_value**2
        count = 1 - max(L_value - 1, 1) * np.abs(kk - 1)  # the line's own margin, > 0 on the grid
        slack = np.minimum(np.minimum(np.minimum(1 - E2 / B2, 1 - w2 / B2), s3sq / B2), count)
        slack = np.where((Pv > 0) & np.isfinite(slack), slack, -np.inf)
        i, j = np.unravel_index(int(np.argmax(slack)), slack.shape)
        return float(T_GRID[i]), float(kk[j]), float(slack[i, j])

    def arguments(self, L_value: int, Bv):
        t_f, k_f, _ = self.plan(L_value, float(Bv))
        kv = mpmath.mpf(k_f)
        return mpmath.mpf(t_f), kv, -(kv - 1) * (L_value + 1) / 2

    def _witness(self, Bv) -> Params:
        """``L = 1``: ``e_a = B c_1``, ``e_s = e_b = 0``, ``w = v c_1`` with ``R = v B (1 + tau
        B^2) <= 1/2``: ``y_s = y_b = w0`` and ``y_a = w0 + R``, with ``w0 = 1/2 - R/2``."""
        d = self.cell.d
        taum = 1 / mpmath.sqrt(d)
        v = min(Bv, 1 / (2 * Bv * (1 + taum * Bv**2)))
        R = v * Bv * (1 + taum * Bv**2)
        c1, _ = _axes(self.cell.replace(norm="layernorm"))
        zero = np.array([mpmath.mpf(0)] * d, dtype=object)
        return Params(self.cell, {"e_s": zero, "e_a": Bv * c1, "e_b": zero.copy(), "w": v * c1},
                      {"w0": mpmath.mpf(1) / 2 - R / 2})


class _RigidDesign(_SelectLastDesign):
    """Bare pre-norm: the plan's spread ``a`` is the amplitude argument; the ``L = 1`` witness."""

    def arguments(self, L_value: int, Bv):
        _, a, _ = self.plan(L_value, float(Bv))
        return mpmath.mpf(1), mpmath.mpf(a), mpmath.mpf(0)

    def _witness(self, Bv) -> Params:
        """``L = 1``: ``h_s = h_a = sqrt(d) top``, ``h_b = sqrt(d) across`` (``c = 0``; the
        kind's axes, :func:`constructions.regression.axes`) and ``w = (x/d) top`` with ``x =
        min(d B, 1/2)/2``: ``y_a = w0 + nu x/d + 2x``, ``y_s = w0 + nu x/d + x``, ``y_b = w0``;
        ``w0 = 1/2 - nu x/d - 3x/2`` puts them at ``1/2 + x/2``, ``1/2 - x/2``, ``1/2 - 3x/2 -
        nu x/d``, each within 1/2 of its target (1, 0, 0)."""
        d = self.cell.d
        x = min(d * Bv, mpmath.mpf(1) / 2) / 2
        nu = mpmath.mpf(BARE_NU) * Bv
        top, across = _axes(self.cell)
        return Params(self.cell, {"e_s": nu * top, "e_a": nu * top, "e_b": nu * across, "w": (x / d) * top},
                      {"w0": mpmath.mpf(1) / 2 - nu * x / d - 3 * x / 2})


class BareSelectDesign(_RigidDesign):
    """Linear attention with bare pre-LayerNorm, the select task read last (module docstring):
    the symmetric slopes, or the one-constant geometry of :class:`ScaleSelectDesign` at the
    ``L`` where that is cheaper."""

    def __init__(self, cell: Cell):
        super().__init__(cell)
        self.one = ScaleSelectDesign(cell)
        self._choice = {}

    def _use_one(self, L_value: int) -> bool:
        """Whether the one-constant geometry has the smaller float ``B_min`` at ``L``."""
        if L_value not in self._choice:
            one, sym = self.one.estimate(L_value), super().estimate(L_value)
            self._choice[L_value] = one is not None and (sym is None or one < sym)
        return self._choice[L_value]

    def estimate(self, L_value: int, hi_B: float = 1e6, rtol: float = 1e-7):
        if L_value > 1 and self._use_one(L_value):
            return self.one.estimate(L_value, hi_B, rtol)
        return super().estimate(L_value, hi_B, rtol)

    def best_shape(self, L_value: int, B_value: float):
        if L_value > 1 and self._use_one(L_value):
            return self.one.best_shape(L_value, B_value)
        return super().best_shape(L_value, B_value)

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        if _check_count(L_value) > 1 and self._use_one(L_value):
            return self.one.build(L_value, B_value, dps)
        return super().build(L_value, B_value, dps)

    def steps(self) -> list[Step]:
        d = self.cell.d
        sd = sympy.sqrt(d)
        eps_L = 1 / (L - 1)
        return [
            _temperature(self.cell),
            Step(x_a, 1 + A * eps_L, "the slope of query a, 1 + a/(L-1)"),
            Step(c_b, (1 - A * eps_L) / x_a, "the cosine between h_a and h_b: the slope of query b is c x = 1 - a/(L-1)"),
            Step(s_b, sympy.sqrt(1 - c_b**2), "its sine"),
            Step(nu_e, BARE_NU * B, "the centred part of the embeddings, which LayerNorm scales away"),
            Step(m_e, sympy.sqrt(B**2 - nu_e**2), "the reach of their part along one"),
            Step(K_a, -A * (L + 1) * eps_L / 2, "the constant of query a: the middle of its line, n = 1..L"),
            Step(K_b, A / 2, "the constant of query b: the middle of its line, n = 0..L-1"),
            Step(om_1, sympy.Max(-K_a, K_b - K_a + (1 - c_b) * x_a + nu_e * x_a / d) / (2 * m_e),
                 "the read-out along one: the offsets' scale"),
            Step(mu_s, -K_a / om_1 - m_e, "the part of e_s along one: K_s = 0"),
            Step(mu_b, (K_b - K_a + (1 - c_b) * x_a + nu_e * x_a / d) / om_1 - m_e, "the part of e_b along one"),
            _vec(U_B, c_b * C1 + s_b * P, "the direction of h_b"),
            _vec(E_A, nu_e * C1 - m_e * ONE, "the embedding of a", "e_a"),
            _vec(E_S, nu_e * C1 + mu_s * ONE, "the embedding of s: h_s = h_a", "e_s"),
            _vec(E_B, nu_e * U_B + mu_b * ONE, "the embedding of b", "e_b"),
            Step(f_w, sympy.Min(1, B / sympy.sqrt(x_a**2 / (d**2 * s_b**2) + om_1**2)),
                 "1, or the shrink of w to the budget"),
            _vec(W, f_w * ((x_a / d) * (C1 - (c_b / s_b) * P) + om_1 * ONE),
                 "the read-out: orthogonal to h_b, <w, h_a> = x/sqrt(d)", "w"),
            _vec(H_S, sd * C1, "the value of s, its layernorm", "_h_s"),
            _vec(H_A, sd * C1, "the value of a, its layernorm", "_h_a"),
            Step(W0, K_a - nu_e * x_a / d + m_e * om_1 - x_a, "the read-out bias: y_a(n) = K_a + x n", "w0"),
        ]

    def _norm2(self, L_value: int, B_value: float, a):
        """``|w|^2`` at the spreads ``a`` (float64; module docstring)."""
        d = self.cell.d
        e = 1 / (L_value - 1)
        a = np.asarray(a, dtype=float)
        x = 1 + a * e
        c = (1 - a * e) / x
        s2 = 1 - c**2
        nu = float(BARE_NU) * B_value
        m = math.sqrt(B_value**2 - nu**2)
        Ka, Kb = -a * (L_value + 1) * e / 2, a / 2
        om = np.maximum(-Ka, Kb - Ka + (1 - c) * x + nu * x / d) / (2 * m)
        with np.errstate(divide="ignore"):
            return x**2 / (d**2 * s2) + om**2

    def plan(self, L_value: int, B_value: float):
        """``(None, a, slack)``: the middle of the grid's spreads with ``|w| <= B`` and the
        relative slack ``1 - |w|^2/B^2`` there (the largest on the grid if none fits)."""
        w2 = self._norm2(L_value, B_value, A_GRID)
        fit = np.flatnonzero(w2 < B_value**2)
        if fit.size == 0:
            j = int(np.argmin(w2))
            return None, float(A_GRID[j]), float(1 - w2[j] / B_value**2)
        a = float((A_GRID[fit[0]] + A_GRID[fit[-1]]) / 2)
        return None, a, float(1 - self._norm2(L_value, B_value, a) / B_value**2)



class ScaleSelectDesign(_RigidDesign):
    """Linear attention with bare pre-norm, the select task read last, one constant for every
    input and the slope of query ``a`` exactly 1 (module docstring): the construction of
    pre-RMSNorm, and of pre-LayerNorm where it is cheaper."""

    def steps(self) -> list[Step]:
        d = self.cell.d
        sd = sympy.sqrt(d)
        eps_L = 1 / (L - 1)
        top, across = axes(self.cell)
        name = self.cell.kind.name
        return [
            _temperature(self.cell),
            Step(c_b, 1 - A * eps_L, "the cosine between h_a and h_b: the slope of query b, 1 - a/(L-1)"),
            Step(s_b, sympy.sqrt(1 - c_b**2), "its sine"),
            Step(nu_e, BARE_NU * sympy.Min(B, 1), f"the norm of the embeddings, which {name} scales away"),
            Step(K_a, (A * L * eps_L + nu_e / d) / 2, "the one constant: the middle of every output's error"),
            _vec(U_B, c_b * top + s_b * across, "the direction of h_b"),
            _vec(E_A, nu_e * top, "the embedding of a", "e_a"),
            _vec(E_S, nu_e * top, "the embedding of s: h_s = h_a", "e_s"),
            _vec(E_B, nu_e * U_B, "the embedding of b", "e_b"),
            Step(f_w, sympy.Min(1, B * d * s_b), "1, or the shrink of w to the budget"),
            _vec(W, (f_w / d) * (top - (c_b / s_b) * across),
                 "the read-out: orthogonal to h_b, <w, h_a> = 1/sqrt(d) (slope 1)", "w"),
            _vec(H_S, sd * top, f"the value of s, its {name}", "_h_s"),
            _vec(H_A, sd * top, f"the value of a, its {name}", "_h_a"),
            Step(W0, K_a - nu_e / d - 1, "the read-out bias: y_a(n) = K_a + n", "w0"),
        ]

    def plan(self, L_value: int, B_value: float):
        """``(None, a, slack)``: ``a`` the middle of ``(a_min, a_max)``, ``a_max = (1 - nu/d)(L-1)/L``
        (every error within 1/2) and ``a_min = (L-1)(1 - sqrt(1 - 1/(d B)^2))`` (``|w| = 1/(d s)
        <= B``); the slack is ``(a_max - a_min)/a_max``."""
        d = self.cell.d
        a_max = (1 - float(BARE_NU) * min(B_value, 1.0) / d) * (L_value - 1) / L_value
        dB = d * B_value
        if dB <= 1 or a_max <= 0:
            return None, a_max / 2, -math.inf
        a_min = (L_value - 1) * (1 / dB**2) / (1 + math.sqrt(1 - 1 / dB**2))  # 1 - sqrt(1 - u), stably
        return None, (a_min + a_max) / 2, (a_max - a_min) / a_max


# ---------------------------------------------------------------------- pre-norm with a gain
G_1, G_2, A_1, A_2, n_1 = sympy.symbols("G_1 G_2 A_1 A_2 n_1", positive=True)
X_a, Y_a, X_b, Y_b, tau_v, kap, om_a = sympy.symbols("X_a Y_a X_b Y_b tau_v kappa_w omega_a", real=True)
u1c, u1o, W_ta, W_tb, Om, T_s, T_b = sympy.symbols("u1_c u1_o W_ta W_tb Omega T_s T_b", real=True)
D_s, D_b, mu_a, lam_lo, lam_hi, lam_a2 = sympy.symbols("Delta_s Delta_b mu_a lambda_lo lambda_hi lambda_a", real=True)
U_1, U_2, T_A, T_B = sympy.symbols("u_1 u_2 t_a t_b")
#: the grid of the angle of h_a on the ellipse, and of the slope
THETA_GRID = np.linspace(0.01, math.pi / 2 - 0.01, 157)


class GainSelectDesign(_SelectLastDesign):
    """Linear attention with pre-norm and a gain (a bias is left at 0), the select task read
    last (module docstring): the values on an ellipse, ``b`` on the chord orthogonal to ``h_a``."""

    def __init__(self, cell: Cell):
        super().__init__(cell)
        self.phi = self._gain_split()

    # the geometry at unit budget: the ellipse's semi-axes per unit budget
    def _axes_float(self, phi, B_value=1.0):
        d = self.cell.d
        G1, G2 = B_value * np.cos(phi), B_value * np.sin(phi) / math.sqrt(d - 1)
        A1 = np.sqrt(G1**2 * (d - 1) + G2**2) if self.cell.kind.centred else math.sqrt(d) * G1
        return G1, G2, A1, math.sqrt(d) * G2

    def _chord(self, A1, A2, th):
        """``(X_a, Y_a, X_b, Y_b)``: ``h_a`` at angle ``th`` and ``h_b``, the ellipse's second
        point on the line through ``h_a`` orthogonal to ``h_a`` (float64)."""
        X, Y = A1 * np.cos(th), A2 * np.sin(th)
        tv = 2 * X * Y * (1 / A1**2 - 1 / A2**2) / (Y**2 / A1**2 + X**2 / A2**2)
        return X, Y, X - tv * Y, Y + tv * X

    def _gain_split(self) -> sympy.Rational:
        """``phi``: ``g = B (cos phi e_1 + sin phi r/sqrt(d-1))``, ``r = (0, 1, .., 1)``, the split
        maximising the slope capacity ``max_theta |h_a|^3 |h_b - h_a|/|h_b|`` at unit budget (a
        float grid, rounded to a dyadic rational: any split is a valid construction)."""
        best = (-1.0, 0.5)
        th = THETA_GRID[:, None]
        for phi in np.linspace(0.02, 1.55, 154):
            _, _, A1, A2 = self._axes_float(phi)
            X, Y, Xb, Yb = self._chord(A1, A2, th)
            F = np.sqrt(X**2 + Y**2) ** 3 * np.hypot(Xb - X, Yb - Y) / np.hypot(Xb, Yb)
            if F.max() > best[0]:
                best = (float(F.max()), float(phi))
        return sympy.Rational(round(best[1] * 2**12), 2**12)

    def steps(self) -> list[Step]:
        cell = self.cell
        d = cell.d
        sd = sympy.sqrt(d)
        R = -sympy.sqrt(d - 1) * Q  # (0, 1, ..., 1)
        out = [_temperature(cell),
               Step(G_1, B * sympy.cos(self.phi), "the gain along e_1"),
               Step(G_2, B * sympy.sin(self.phi) / sympy.sqrt(d - 1), "the gain on every other coordinate"),
               _vec(G, G_1 * E1 + G_2 * R, f"the {cell.kind.name} gain, |g| = B", "g")]
        if cell.affine.bias:
            out.append(_vec(BETA, 0 * E1, f"the {cell.kind.name} bias, left at 0", "beta"))
        if cell.kind.centred:
            top, across = C1, P
            out += [Step(n_1, sympy.sqrt(G_1**2 * (d - 1) / d + G_2**2 / d), "|g * c_1|"),
                    Step(A_1, sd * n_1, "the ellipse's semi-axis along g * c_1"),
                    _vec(U_1, (G_1 * sympy.sqrt(sympy.Rational(d - 1, d)) * E1 + (G_2 / sd) * Q) / n_1,
                         "the unit vector of g * c_1"),
                    _vec(U_2, P, "g * p / G_2 = p")]
        else:
            top, across = E1, Q
            out += [Step(A_1, sd * G_1, "the ellipse's semi-axis along e_1"),
                    _vec(U_1, E1, "g * e_1 / G_1"), _vec(U_2, Q, "g * q / G_2")]
        out += [
            Step(A_2, sd * G_2, "the ellipse's semi-axis along the second direction"),
            Step(X_a, A_1 * sympy.cos(t), "h_a on the ellipse at angle t: its first coordinate"),
            Step(Y_a, A_2 * sympy.sin(t), "its second"),
            Step(tau_v, 2 * X_a * Y_a * (1 / A_1**2 - 1 / A_2**2) / (Y_a**2 / A_1**2 + X_a**2 / A_2**2),
                 "the chord through h_a orthogonal to h_a meets the ellipse again at h_a + tau_v h_a^perp"),
            Step(X_b, X_a - tau_v * Y_a, "h_b: its first coordinate"),
            Step(Y_b, Y_a + tau_v * X_a, "its second: <h_a, h_b - h_a> = 0, so b scores a as a does"),
            Step(om_a, A * sd / (X_a**2 + Y_a**2), "<w, h_a>: the slope k = tau |h_a|^2 <w, h_a>"),
            Step(kap, om_a / (X_b * Y_a - Y_b * X_a), "the read-out's scale, orthogonal to h_b"),
            Step(f_w, sympy.Min(1, B / (sympy.Abs(kap) * sympy.sqrt(X_b**2 + Y_b**2))),
                 "1, or the shrink of w to the budget"),
            _vec(W, f_w * kap * (-Y_b * U_1 + X_b * U_2),
                 "the read-out, orthogonal to h_b: the value of b is unread", "w"),
            _vec(T_A, sympy.cos(t) * top + sympy.sin(t) * across, "the embedding direction of a (and of s)"),
            _vec(T_B, (X_b / A_1) * top + (Y_b / A_2) * across, "the embedding direction of b"),
            Step(W_ta, inner(W, T_A), "<w, t_a>"), Step(W_tb, inner(W, T_B), "<w, t_b>"),
            Step(T_s, -C, "<w, e_s - e_a>: K_s = 0"),
            Step(T_b, A - 1, "<w, e_b - e_a>: K_b = K_a + k - 1 (query b reads as query a with one more a)"),
        ]
        if cell.kind.centred:
            nu_v = sympy.Min(B, 1) / 2
            m = sympy.sqrt(B**2 - nu_v**2)
            out += [
                Step(nu_e, nu_v, "the centred part of the embeddings"),
                Step(Om, inner(W, ONE), "<w, one>: what the parts along one offset"),
                Step(D_s, T_s / Om, "mu_s - mu_a"),
                Step(D_b, (T_b - nu_e * (W_tb - W_ta)) / Om, "mu_b - mu_a"),
                Step(mu_a, -(sympy.Max(0, D_s, D_b) + sympy.Min(0, D_s, D_b)) / 2,
                     "mu_a: the three parts centred on 0"),
                Step(mu_s, sympy.Max(-m, sympy.Min(m, mu_a + D_s)), "the part of e_s along one (within the budget)"),
                Step(mu_b, sympy.Max(-m, sympy.Min(m, mu_a + D_b)), "the part of e_b along one (within the budget)"),
                Step(m_e, sympy.Max(-m, sympy.Min(m, mu_a)), "the part of e_a along one (within the budget)"),
                _vec(E_A, nu_e * T_A + m_e * ONE, "the embedding of a", "e_a"),
                _vec(E_S, nu_e * T_A + mu_s * ONE, "the embedding of s: h_s = h_a", "e_s"),
                _vec(E_B, nu_e * T_B + mu_b * ONE, "the embedding of b", "e_b")]
        else:
            tiny = FLOOR * B
            out += [
                Step(lam_lo, sympy.Max(tiny, -T_s / W_ta, -T_b / W_ta), "the least scale of e_a"),
                Step(lam_hi, sympy.Min(B, B - T_s / W_ta, (B * W_tb - T_b) / W_ta), "the largest"),
                Step(lam_a2, sympy.Max(tiny, sympy.Min(B, (lam_lo + lam_hi) / 2)),
                     "the scale of e_a: the middle (within the budget)"),
                Step(lam_e, sympy.Max(tiny, sympy.Min(B, lam_a2 + T_s / W_ta)), "the scale of e_s (within the budget)"),
                Step(gam_e, sympy.Max(tiny, sympy.Min(B, (T_b + lam_a2 * W_ta) / W_tb)), "the scale of e_b (within the budget)"),
                _vec(E_A, lam_a2 * T_A, "the embedding of a", "e_a"),
                _vec(E_S, lam_e * T_A, "the embedding of s: h_s = h_a", "e_s"),
                _vec(E_B, gam_e * T_B, "the embedding of b", "e_b")]
        out += [
            _vec(H_A, X_a * U_1 + Y_a * U_2, "the value of a", "_h_a"),
            _vec(H_S, H_A, "the value of s, equal to h_a", "_h_s"),
            Step(W0, C - A - inner(W, E_A), "the read-out bias: y_a(n) = K_a + k n", "w0"),
        ]
        return out

    def plan(self, L_value: int, B_value: float):
        """``(theta, k, slack)``: the grid point ``(theta_a, k)`` of largest relative slack: the
        budget of ``w`` (``1 - |w|^2/B^2``), the reach of the offsets (LayerNorm: ``1 -
        spread(mu)/(2 m)``; RMSNorm: the width of the scales of ``e_a`` over ``B``, with
        ``<w, t_a>, <w, t_b> > 0``) and the line's margin ``1 - (L-1)|k - 1|``."""
        cell = self.cell
        d = cell.d
        phi = float(self.phi)
        G1, G2, A1, A2 = self._axes_float(phi, B_value)
        lo, hi = last_line_interval(L_value)
        kk = (lo + (min(hi, 2.0) - lo) * np.linspace(0.005, 0.995, K_POINTS))[None, :]
        th = THETA_GRID[:, None]
        X, Y, Xb, Yb = self._chord(A1, A2, th)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            om = kk * math.sqrt(d) / (X**2 + Y**2)
            kap = om / (Xb * Y - Yb * X)
            w2 = kap**2 * (Xb**2 + Yb**2)
            Ts, Tb = (kk - 1) * (L_value + 1) / 2, kk - 1
            cb, sb = Xb / A1, Yb / A2
            if cell.kind.centred:
                n1 = math.sqrt(G1**2 * (d - 1) / d + G2**2 / d)
                u1c = (G1 * (d - 1) + G2) / (d * n1)
                u1o = math.sqrt(d - 1) * (G1 - G2) / (d * n1)
                Wta = kap * (-Yb * np.cos(th) * u1c + Xb * np.sin(th))
                Wtb = kap * (-Yb * cb * u1c + Xb * sb)
                Om = -kap * Yb * u1o
                nu = min(B_value, 1.0) / 2
                m = math.sqrt(B_value**2 - nu**2)
                Ds, Db = Ts / Om, (Tb - nu * (Wtb - Wta)) / Om
                spread = np.maximum(np.maximum(0, Ds), Db) - np.minimum(np.minimum(0, Ds), Db)
                reach = 1 - spread / (2 * m)
            else:
                Wta = kap * (-Yb * np.cos(th) + Xb * np.sin(th))
                Wtb = kap * (-Yb * cb + Xb * sb)
                lam_lo = np.maximum(np.maximum(0.0, -Ts / Wta), -Tb / Wta)
                lam_hi = np.minimum(np.minimum(B_value, B_value - Ts / Wta), (B_value * Wtb - Tb) / Wta)
                reach = np.where((Wta > 0) & (Wtb > 0), (lam_hi - lam_lo) / B_value, -np.inf)
            count = 1 - max(L_value - 1, 1) * np.abs(kk - 1)
            slack = np.minimum(np.minimum(1 - w2 / B_value**2, reach), count)
        slack = np.where(np.isfinite(slack), slack, -np.inf)
        i, j = np.unravel_index(int(np.argmax(slack)), slack.shape)
        return float(THETA_GRID[i]), float(kk[0, j]), float(slack[i, j])

    def arguments(self, L_value: int, Bv):
        th, k_f, _ = self.plan(L_value, float(Bv))
        kv = mpmath.mpf(k_f)
        return mpmath.mpf(th), kv, -(kv - 1) * (L_value + 1) / 2

    def _witness(self, Bv) -> Params:
        """``L = 1``: ``g = B e_1`` (a bias 0), ``e_s = e_a = nu top``, ``e_b = nu across`` (so
        ``h_b = 0``), ``h_s = h_a = h_1 e_1``, ``w = v e_1``: ``y_b = w0``, ``y_s = w0 + R`` and
        ``y_a = w0 + R + D`` with ``R = v (nu top_1 + tau h_1^3)``, ``D = v tau h_1^3``; ``w0 = 1/2 -
        R - D/2`` and ``R + D <= 1/4`` put them at ``1/2 - R - D/2``, ``1/2 - D/2``, ``1/2 + D/2``."""
        d = self.cell.d
        top, across = _axes(self.cell)
        nu = min(Bv, 1) / 2
        e1 = np.array([mpmath.mpf(1)] + [mpmath.mpf(0)] * (d - 1), dtype=object)
        n_top = top[0] * mpmath.sqrt(d)  # N(top)_1
        h1 = Bv * n_top  # h_s = h_a = h1 e_1
        taum = 1 / mpmath.sqrt(d)
        per_v = taum * h1**3 + nu * top[0]  # R per unit v (h along e_1)
        v = min(Bv, 1 / (4 * (per_v + taum * h1**3)))
        R, D = v * per_v, v * taum * h1**3
        vectors = {"e_s": nu * top, "e_a": nu * top, "e_b": nu * across, "g": Bv * e1, "w": v * e1}
        if self.cell.affine.bias:
            vectors["beta"] = 0 * e1
        return Params(self.cell, vectors, {"w0": mpmath.mpf(1) / 2 - R - D / 2})


def _axes(cell: Cell) -> tuple:
    """The kind's axes ``(top, across)`` (:func:`constructions.regression.axes`) as mpf
    d-vectors: ``(c_1, p)`` LayerNorm, ``(e_1, q)`` RMSNorm (:mod:`constructions.basis`)."""
    d = cell.d
    zero = [mpmath.mpf(0)] * d
    top, across = list(zero), list(zero)
    if cell.kind.centred:
        top = [mpmath.sqrt(mpmath.mpf(d - 1) / d)] + [-1 / mpmath.sqrt(mpmath.mpf(d) * (d - 1))] * (d - 1)
        across[1], across[2] = 1 / mpmath.sqrt(2), -1 / mpmath.sqrt(2)
    else:
        top[0] = mpmath.mpf(1)
        across = [mpmath.mpf(0)] + [-1 / mpmath.sqrt(mpmath.mpf(d - 1))] * (d - 1)
    return np.array(top, dtype=object), np.array(across, dtype=object)
