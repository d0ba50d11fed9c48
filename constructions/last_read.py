"""Classification at the last read: the unit-norm heads (on the last-read regression geometry,
the plane head, the pair head) and the regression designs without a norm or with bare pre-norm.

The count task read at the last position (:mod:`constructions.tasks`) gives, for ``n >= 1``,
outputs on a line (the query is ``h_a`` for every ``n >= 1``) and for ``n = 0`` the output of
``s`` read at ``s``, placed by the offset of the embeddings:

* linear attention with pre-norm: ``z_n = e_a + tau <h_a, h_s> h_s + n tau |h_a|^2 h_a``
  (``n >= 1``) and ``z_0 = e_s + tau |h_s|^2 h_s``; the construction has ``h_s = h_a = h`` and
  the embeddings along ``top`` with scales ``lam_s, lam_a``, so along ``u = h/|h|`` the outputs
  sit at ``x_n = lam_a <u, top> + (n + 1) kappa`` and ``x_0 = lam_s <u, top> + kappa``,
  ``kappa = tau |h|^3``: every gap is ``kappa`` except the first, ``kappa + (lam_a - lam_s)
  <u, top>``;
* softmax attention with pre-norm and a gain: ``z_n = e_a + h_s + phi(n) (h_a - h_s)``
  (``phi(n) = n/(rho+n)``, ``n >= 1``) and ``z_0 = e_s + h_s``; along ``u = (h_a - h_s)/X`` the
  gaps are ``X rho/((rho+c)(rho+c+1))`` (``c = 1..L-1``) and the first is ``O + X/(rho+1)``
  with ``O = <u, e_a - e_s>``, the offset of the regression construction in units of ``X/D``
  (:func:`constructions.tasks.last_offsets`: ``delta = <w, e_s - e_a> = -(D/X) O``).

The geometry is the regression construction of :class:`constructions.tasks.TaskDesign` at
budget 1 with the values at their largest (linear: the slope at the capacity, so the gain has
norm 1; softmax: ``X`` the law's at the shape) and the offset at the end of its reach that
widens the first gap (``lam_s = 2^-20`` for the line; ``delta = delta_c - SHRINK r`` for the
segment).  The outputs are read along ``u`` by the 1-D head of
:func:`constructions.classification.collinear_head`, whose margin is ``1/sum_c 1/gap_c``
(:mod:`constructions.classification`); the softmax shape ``rho`` maximises it.  The proven
upper bound over every parameter set is :mod:`bounds.last_margin`.

**Classification where ``z_0`` leaves the line: the plane head** (:func:`plane_cell`,
:func:`plane_head`).  Linear attention without a norm or with bare pre-norm (values in a plane:
RMSNorm, LayerNorm at ``d >= 3``) and softmax with bare pre-norm (either kind, ``eps = 0``)
need no offset at all: the bound of the counts ``1..L`` alone (:mod:`bounds.last_margin`) is met
by putting ``z_0`` *beside* the line, where class 0 reads it along the perpendicular and the chain
of the counts ``1..L`` keeps all its slopes from -1 to 1 (:func:`plane_vectors`):

* linear attention, ``e_a = top``, ``e_s = across`` (orthogonal unit vectors whose values are
  ``|h| top`` and ``|h| across``): ``<h_a, h_s> = 0``, so ``z_n = (1 + n kappa) top`` with
  ``kappa = tau |h|^3`` the capacity at unit budget (``tau`` without a norm, ``d`` bare) and
  ``z_0 = (1 + tau |h|^2) across``, at distance ``1 + tau |h|^2`` from the line;
* softmax with bare pre-LayerNorm, ``e_s = nu top + mu one``, ``e_a = nu (cos g top + sin g
  across) - mu one`` (``nu = PLANE_NU``, ``mu = sqrt(1 - nu^2)``): LayerNorm removes ``one``, so
  ``h_s = sqrt(d) top``, ``h_a = sqrt(d)(cos g top + sin g across)``, ``sigma = <h_a, h_s - h_a>
  = d (cos g - 1) = sqrt(d) log rho`` and ``X = |h_a - h_s| = sqrt(-2 sigma)``, the only value gap
  at that score gap; ``z_0 - z_1`` has the part ``2 mu one`` off the line.  ``rho`` maximises
  ``X rho/S(rho)`` (:func:`plane_shape`).  At ``d = 2`` LayerNorm has only ``h = +-sqrt(2) c_1``:
  ``cos g = -1``, ``h_a = -h_s``, ``rho = exp(-2 sqrt 2)``, the one shape with ``X > 0``;
* softmax with bare pre-RMSNorm, ``e_s = top``, ``e_a = nu (cos g top + sin g across)``: the same
  values (RMSNorm keeps only the direction), and ``z_0 - z_1 = e_s - e_a`` leaves the line by
  about ``cos(g/2)``.

The margin is then ``kappa/(L-1)`` (line) or ``X rho/S(rho)`` (segment), the bound's value at the
shape: max-min over every parameter set to the bound's tolerance, at ``L = 1`` (:func:`build_more`)
and from ``L = 3`` (linear, no norm), ``6`` (bare linear, ``d = 8``), ``2`` (softmax, bare
pre-LayerNorm) and ``3`` (softmax, bare pre-RMSNorm) on.  Below, class 0 binds and the chain gives up
part of its range (:func:`plane_head`).

**Linear attention with a gain: the opposed embeddings** (:func:`opposed_cell`,
:func:`opposed_vectors`).  The largest gap ``kappa = tau H^3`` needs ``g = e_1`` (and ``beta = e_1``),
so every value is a multiple of ``e_1`` and ``z_0`` can leave the line only through the embeddings.
``e_s = -e_a`` puts it as far before ``z_1`` as the values allow: with ``h_s = c h_a``, ``z_n = e_a
+ (c^2 + n) kappa e_1`` and ``z_0 = e_s + c^3 kappa e_1``, so ``D = z_1 - z_0 = e_a - e_s + kappa (1 +
c^2 - c^3) e_1`` (:func:`opposed_points`), largest along ``e_1`` at the smallest ``c = (b - M)/(b +
M)`` (``-1`` without a bias).  LayerNorm removes ``one``, so ``e_a = cos(theta) top - sin(theta)
one/sqrt(d)`` keeps the values and moves ``z_0`` off the line by up to 2, at the cost of ``2 <e_a,
e_1>`` of the first gap; RMSNorm turns ``e_s`` towards ``across`` instead, trading some of ``c``
(``h_s = (b - M cos(theta)) e_1``) for the distance ``sin(theta)``; ``theta`` maximises the margin
(:func:`opposed_shape`).  :func:`offline_head` reads these outputs: for its
points it meets the bound of the chain ``1..L`` and the pair ``0, 1`` weighted by ``w``
(:func:`offline_value`), so it is max-min for them (the collinear head where ``z_0`` is on the
line, RMSNorm).  The proven ``margin_upper`` (:func:`bounds.last_margin._offline`) is the same
weighted bound maximised over every parameter set: at ``d = 8`` ``margin_upper/margin`` is
1.0009 (LayerNorm, gain), 1.0044 (with a bias), 1.0025 and 1.0086 (RMSNorm) at ``L = 16``, and
falls with ``L`` (README).

**Softmax attention without a norm: the pair head** (:func:`pair_cell`, :func:`pair_head`).  Here
``z_0 = 2 e_s = (e_a + e_s) - (e_a - e_s)`` lies on the line of the counts, at ``phi = -1``, for
every parameter set: the outputs are collinear at ``x_0 = -X``, ``x_n = X n/(rho+n)``, and the
collinear head's margin ``X/(S(rho)/rho + (rho+1)/(rho+2))`` (:func:`pair_margin`) is the
max-min for them.  The geometry ``e_s = top``, ``e_a = (1 - X) top`` (:func:`pair_vectors`)
realises the law's largest ``X`` at every score gap, so at the ``rho`` maximising the margin
(:func:`pair_shape`) the construction attains the proven supremum of
:func:`bounds.last_margin.last_margin_upper`.  Counting needs only distinct points, so it
does not stop at the regression ``L* = 2``; nor does bare pre-norm at its ``L* = 4``.

*Rates* (:func:`constructions.laws.margin_exponent`): ``-1`` on the line (``kappa/(L-1)``), and
``-3`` for softmax, where ``rho`` is bounded at unit norm (``rho <= 1`` bare, ``rho <= exp(1/(4
sqrt d))`` without a norm) so that ``S(rho) ~ L^3/3``.

**Softmax attention without a norm: counting stops at L = 2** (:class:`PairDesign`).  With
``e = h`` the count ``n = 0`` is read at ``s`` with ``r = 2 e_s``, so ``y(0) = K - D`` and
``y(n) = K + D phi(n)`` (``n >= 1``), ``K = <w, e_a + e_s> + w0``, ``D = <w, e_a - e_s>``,
``phi(n) = n/(rho+n)``, ``rho = exp(tau <e_a, e_s - e_a>)``: one amplitude for every count,
``y(n) = K + D psi(n)`` with ``psi(0) = -1``, ``psi(n) = phi(n)``.  A constant ``K`` counts iff
the intervals ``(n - D psi(n) - 1/2, n - D psi(n) + 1/2)`` meet, i.e. (Helly, in one dimension)
iff every pair ``i > j`` has ``(i - j) - 1 < D (psi(i) - psi(j)) < (i - j) + 1``
(:func:`pair_interval`).  Nothing counts beyond ``L = 2`` (:mod:`constructions.tasks`: the
pairs ``(1, 0)`` and ``(L, 1)`` need ``(L - 2)(1 + phi(1)) < 2 (phi(L) - phi(1))``, false for
``L >= 4`` since ``phi(L) - phi(1) < 1 - phi(1)``, and for ``L = 3`` since ``2 rho/((rho+2)
(rho+3)) < 1/2``).  At ``L = 2``

    D_lo(rho) = (rho + 2)/(rho + 4)   (the pair (2, 0)),
    D_hi(rho) = min(2 (rho+1)/(rho+2), 3 (rho+2)/(rho+4), 2 (rho+1)(rho+2)/rho) > D_lo(rho)

(``2(rho+1)(rho+4) - (rho+2)^2 = rho^2 + 6 rho + 4 > 0``), and ``L = 1`` needs only
``0 < D < 2 (rho+1)/(rho+2)``.  At budget ``B``, ``D <= 2 B^2`` and ``rho >= exp(-2 B^2/sqrt(d))``
(:func:`constructions.laws.last_pair_reach`), and ``D_lo`` increases in ``rho``, so counting
to 2 needs ``2 B^2 > D_lo(exp(-2 B^2/sqrt(d)))``; the left side increases in ``B`` and the right
decreases, so ``B_min(2) = B*`` is the root of ``2 B^2 = D_lo(exp(-2 B^2/sqrt(d)))``, not
attained (:func:`pair_budget`; proven as :func:`bounds.lower.last_pair_lower`).  The
construction is that extremal geometry: ``e_s = B c_1 = -e_a`` (so ``rho = exp(-2 B^2/sqrt(d))``
and ``e_a + e_s = 0``), ``w = -(D/(2B)) c_1`` with ``D`` the middle of ``(D_lo, min(D_hi,
2 B^2))``, ``w0 = K`` the middle constant: it counts at every ``B > B*``.

**Bare pre-norm softmax: the rows up to L* = 4** (:class:`BareDesign`; ``L*`` is
:func:`bounds.lstar.last_l_star`).  For ``n >= 1`` ``y(n) = K + D phi(n)`` with ``rho =
exp(tau <h_a, h_s - h_a>) <= 1`` and ``X = |h_a - h_s| = sqrt(-2 sigma)`` (``|h| = sqrt(d)``),
and ``y(0) = K + delta``, ``delta = <w, e_s - e_a>``.  *Geometry*, LayerNorm (``d >= 3``): ``h_s = sqrt(d)
top``, ``h_a = sqrt(d)(cos g top + sin g across)`` with ``cos g = 1 + sigma/d``; ``e_s = nu top +
mu one``, ``e_a = nu (cos g top + sin g across) - mu one`` (``nu = 2^-10 B``, ``mu = sqrt(B^2 -
nu^2)``: LayerNorm removes ``one``); ``w = (D/X^2)(h_a - h_s) + om one``, of norm at most ``B`` for
``|om| <= W = sqrt(B^2 - D^2/X^2)``.  Then ``<w, e_s - e_a> = -D nu/sqrt(d) + 2 om mu``: the
offsets fill ``delta_c +- r`` with ``delta_c = -D nu/sqrt(d)``, ``r = 2 mu W``.  At budget ``B``
the shape ``rho`` and the amplitude ``D`` (within ``D_lo, D_hi`` of the shifted segment and
``D < B X``) are those of the widest interval of constants ``K`` counting ``1..L`` with
``y(0)`` within reach (a search over a grid of ``(rho, D)``, refined: a screen; the judge
certifies), ``K`` its middle.  LayerNorm at ``d = 2`` has only ``h_a = -h_s``: ``cos g = -1``,
one shape ``rho = exp(-2 sqrt(d))``, the same offsets.

*Bare pre-RMSNorm* (any ``d >= 2``): RMSNorm ignores the embeddings' scales only, so ``e_s = B
top``, ``e_a = nu (cos g top + sin g across)`` (values as above, ``v_s, v_a`` their unit
directions) and ``w = (D/X^2)(h_a - h_s) + om p`` with ``p = (v_s + v_a)/(2 cos(g/2))``, the unit
bisector (orthogonal to ``h_a - h_s``; ``cos(g/2) = sqrt((1 + cos g)/2)``), ``|om| <= W``.  Since
``<v_a - v_s, v_s> = cos g - 1 = -X^2/(2d)``, ``<w, v_s> = -D/(2 sqrt(d)) + om cos(g/2)`` and
``<w, v_a> = D/(2 sqrt(d)) + om cos(g/2)``, so ``delta = B <w, v_s> - nu <w, v_a> = -(B + nu)
D/(2 sqrt(d)) + om (B - nu) cos(g/2)``: the offsets fill ``delta_c +- r`` with ``delta_c = -(B +
nu) D/(2 sqrt(d))``, ``r = (B - nu) W cos(g/2)`` (:func:`bare_offsets`; ``cos(g/2) -> 0`` at
``h_a = -h_s``, so the search keeps ``log rho`` just above ``-2 sqrt(d)``).  ``B_lower`` is
:func:`bounds.lower.last_bare_lower` (either kind).

**Linear attention without a norm** (:class:`LineDesign`).  With ``e = h`` and the query ``e_a``,
``y(n) = K + k n`` for ``n >= 1`` with ``k = tau |e_a|^2 <w, e_a> <= tau B^4`` (the line capacity
of :func:`constructions.laws.capacity`), and ``y(0) = K + delta`` with ``delta = <w, e_s>(1 + tau
|e_s|^2) - <w, e_a> - tau <e_a, e_s> <w, e_s>`` (the query of ``n = 0`` is ``e_s``): a cubic in
``e_s``, ``|delta| <= 2 B^2 (1 + tau B^2)``.  Construction: ``w = B c_1``, ``e_a = lam c_1`` with
``tau B lam^3 = k``, ``e_s = s c_1`` with ``s`` in ``[0, B]``, so ``delta(s) = B s + tau B s^3 - B lam -
tau B lam s^2`` runs from ``-B lam`` to ``delta(B)`` and takes every value between (a root found
by bisection); the slope ``k`` (a grid over its counting interval, :func:`constructions.tasks.
last_line_interval`, below the capacity) and the constant ``K`` are those of the widest interval
of constants with ``y(0)`` within reach.  The lower bound is :func:`bounds.lower.last_free_line_lower`.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import sympy

from constructions import laws, zoom
from constructions.cell import Cell, Params
from constructions.classification import ClassificationDesign, check_size, collinear_head
from constructions import segment
from constructions.regression import (RegressionDesign, Step, _check_budget, _check_count, _temperature,
                                      _vec, axes)
from constructions.symbols import C1, E_A, E_S, H_A, H_S, ONE, W, W0, A, B, C, X, gamma, inner, nu, t, tau
from constructions.tasks import (SHRINK, delta, delta_c, last_cosine, last_line_interval, last_offsets, lam_a,
                                 offset_steps)

#: the scale of ``e_s`` in the line geometry: the offset ``delta = -Delta (1 - LINE_SLACK)``
#: just inside its reach ``(-Delta, Delta)`` (``e_s`` must stay non-zero under pre-norm)
LINE_SLACK = mpmath.mpf(2) ** -20
#: the read-out constant passed to the segment geometry: beyond every reachable offset, so that
#: the construction clips ``delta`` to the low end ``delta_c - SHRINK r`` of its reach
FAR = mpmath.mpf(10) ** 9


class LastReadHead(ClassificationDesign):
    """The unit-norm head of a classification cell read at the last position (module
    docstring); the interface of :class:`~constructions.classification.ClassificationDesign`."""

    def __init__(self, cell: Cell):
        if not cell.read.last or cell.distractor:
            raise ValueError("LastReadHead is for the count task read at the last position")
        if plane_cell(cell) or pair_cell(cell) or opposed_cell(cell):  # :func:`build_more`
            self.cell, self.family, self.geometry = cell, laws.family(cell), None
            self.foot, self.pencil, self._pencil_shapes = None, False, {}
            return
        super().__init__(cell)
        if self.family not in ("line", "segment"):
            raise ValueError(f"{cell.describe()}: no last-read head without pre-norm")

    # ------------------------------------------------------------------ the float screen
    def _segment_parts(self, rho):
        """``(X, O)`` of the segment geometry at unit budget and shape(s) ``rho`` (float64)."""
        cell = self.cell
        rho = np.asarray(rho, dtype=np.float64)
        X = laws.last_value_gap(cell, 1.0, np.sqrt(cell.d) * np.log(rho), laws.NUMPY)
        alpha = last_cosine(cell, 1.0, X, np.sqrt)
        dc, r = last_offsets(cell, 1.0, X, X, alpha, laws.NUMPY)  # D/X = 1: O per unit
        return X, float(SHRINK) * r - dc

    def margin(self, t_value, L_value: int):
        """Float64 margin ``1/sum_c 1/gap_c`` of the last-read outputs at shape(s) ``t``
        (module docstring; -inf where degenerate)."""
        tv = np.atleast_1d(np.asarray(t_value, dtype=np.float64))
        Lp = L_value - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.family == "line":
                kappa = float(self.geometry.capacity(1.0, 1.0))
                first = kappa + float(self._line_reach()) * (1 - float(LINE_SLACK))
                inv = Lp / kappa + 1 / first
                m = np.full(tv.shape, 1 / inv)
            else:
                X, O = self._segment_parts(tv)
                rp = tv + 1
                S = Lp * rp**2 + Lp**2 * rp + (Lp**3 - Lp) / 3
                m = 1 / (S / (X * tv) + 1 / (O + X / rp))
        m[~np.isfinite(m) | (m <= 0)] = -np.inf
        return m if np.ndim(t_value) else float(m[0])

    def _line_reach(self):
        """``<u, top>`` per unit scale of the embeddings: the first gap's extra length at
        ``lam_a - lam_s = 1`` (the axis reach with a gain, 1 bare)."""
        return 1 if laws.rigid(self.cell) else self.cell.kind.axis_reach(self.cell.d, mpmath.sqrt)

    def best_shape(self, L_value: int):
        """``rho`` maximising :meth:`margin` over the last-read domain at unit budget (segment);
        None (line)."""
        if pair_cell(self.cell):
            return pair_shape(self.cell, L_value)
        if plane_cell(self.cell):
            return plane_shape(self.cell, L_value)
        if self.family == "line":
            return None
        dom = self.geometry.domain(L_value, 1.0)
        return zoom.maximize(lambda tt: self.margin(tt, L_value), dom[0], dom[1], points=33)[0]

    # ------------------------------------------------------------------ the head
    def geometry_at(self, L_value: int, t_value) -> dict:
        """The regression geometry at budget 1 (module docstring), evaluated in mpmath at the
        current precision."""
        one = mpmath.mpf(1)
        if self.family == "line":
            A = self.geometry.capacity_mp(one, one) * (1 - mpmath.mpf(2) ** -40)
            reach = laws.last_offset_reach(self.cell, one, A, laws.MPMATH)
            C = mpmath.mpf(1) / 2 + reach * (1 - 2 * LINE_SLACK)
            return self.geometry.evaluate(L_value, one, one, A, C)
        return self.geometry.evaluate(L_value, one, mpmath.mpf(t_value), one, FAR)

    def outputs(self, geo: dict, L_value: int, t_value):
        """``(u, x)``: the read direction and the positions ``x_n = <u, z_n>`` of the exact
        outputs (module docstring), mpf."""
        d = self.cell.d
        tau = 1 / mpmath.sqrt(d)
        e_s, e_a, h_s, h_a = geo["e_s"], geo["e_a"], geo["_h_s"], geo["_h_a"]
        dot = lambda p, q: mpmath.fsum(p * q)
        if self.family == "line":
            u = h_a / mpmath.sqrt(dot(h_a, h_a))
            base = dot(u, e_a) + tau * dot(h_a, h_s) * dot(u, h_s)
            step = tau * dot(h_a, h_a) * dot(u, h_a)
            x0 = dot(u, e_s) + tau * dot(h_s, h_s) * dot(u, h_s)
            return u, [x0] + [base + n * step for n in range(1, L_value + 1)]
        diff = h_a - h_s
        X = mpmath.sqrt(dot(diff, diff))
        u = diff / X
        rho = mpmath.mpf(t_value)
        base = dot(u, e_a) + dot(u, h_s)
        return u, [dot(u, e_s) + dot(u, h_s)] + [base + X * n / (rho + n) for n in range(1, L_value + 1)]

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The unit-norm head: the geometry at budget 1 and the 1-D head on the positions
        (refused beyond the limits of :func:`constructions.classification.check_size`)."""
        check_size(self.cell, L_value)
        if pair_cell(self.cell) or plane_cell(self.cell) or opposed_cell(self.cell):
            return build_more(self.cell, L_value, dps)
        t_value = self.best_shape(L_value)
        with mpmath.workdps(dps):
            geo = self.geometry_at(L_value, t_value)
            vec = {k: v for k, v in geo.items() if k not in ("w", "w0") and not k.startswith("_")}
            u, x = self.outputs(geo, L_value, t_value)
            if not all(b > a for a, b in zip(x, x[1:])):
                raise ValueError(f"{self.cell.describe()}: the last-read outputs are not in order at L = {L_value}")
            vec["u"], b = collinear_head(x, u)
            return Params(self.cell, vec, {"b": b})


# ---------------------------------------------------------------------- softmax without a norm
#: the largest count softmax attention without a norm reaches at the last read (module docstring)
PAIR_L_STAR = 2


def _psi(n, rho):
    """``psi(0) = -1``, ``psi(n) = n/(rho+n)``: ``y(n) = K + D psi(n)`` (plain arithmetic)."""
    return -1 + 0 * rho if n == 0 else n / (rho + n)


def pair_interval(rho, L: int):
    """``(D_lo, D_hi)``: the amplitudes ``D`` for which some ``K`` counts ``n = 0..L`` with
    ``y(n) = K + D psi(n)`` (module docstring; every pair ``i > j``, plain arithmetic on any
    number type with ``max``/``min``).  Empty (``D_lo >= D_hi``) for every ``rho`` once
    ``L >= 3``."""
    lo, hi = 0 * rho, None
    for i in range(1, L + 1):
        for j in range(i):
            step = _psi(i, rho) - _psi(j, rho)  # > 0: psi increases
            lo = max(lo, (i - j - 1) / step)
            hi = (i - j + 1) / step if hi is None else min(hi, (i - j + 1) / step)
    return lo, hi


def _pair_feasible(cell: Cell, B_value: float) -> bool:
    """Whether the extremal geometry at budget ``B`` leaves an amplitude for ``L = 2`` (floats)."""
    cap = laws.last_pair_reach(cell, B_value)
    lo, hi = pair_interval(math.exp(-cap / math.sqrt(cell.d)), PAIR_L_STAR)
    return lo < min(hi, cap)


def pair_budget(cell: Cell, rtol: float = 1e-12) -> float:
    """``B*``, the root of ``2 B^2 = D_lo(exp(-2 B^2/sqrt(d)))`` (module docstring), by
    bisection in floats: a screen (the bound is :func:`bounds.lower.last_pair_lower`)."""
    lo_B, hi_B = 1e-6, 2.0  # 2 B^2 = 8 > 1 > D_lo at the top; nothing counts at the bottom
    return zoom.bisect_up(lambda b: _pair_feasible(cell, b), lo_B, hi_B, rtol)[1]


def pair_rho(cell: Cell, B_value):
    """``rho = exp(-2 B^2/sqrt(d))``: the shape the budget fixes on the extremal pair ``e_s = -e_a =
    B c_1`` (the score gap ``<e_a, e_s - e_a> = -2 B^2``; mpmath or float)."""
    exp, sqrt = (math.exp, math.sqrt) if isinstance(B_value, float) else (mpmath.exp, mpmath.sqrt)
    return exp(-laws.last_pair_reach(cell, B_value) / sqrt(cell.d))


def pair_amplitude(lo, hi, cap):
    """The amplitude the pair constructions take: the middle of ``(D_lo, min(D_hi, cap))``, at most
    the reach ``cap = 2 B^2`` (so ``|w| <= B``); where the interval is empty it does not count."""
    return min((lo + min(hi, cap)) / 2, cap)


class PairDesign(RegressionDesign):
    """Softmax attention without a norm read at the last position (module docstring): the
    extremal geometry ``e_s = -e_a = B c_1``, whose shape ``rho = exp(-2 B^2/sqrt(d))`` the budget
    fixes; counts up to ``L = 2``."""

    def __init__(self, cell: Cell):
        if not (cell.read.last and cell.attention == "softmax" and not cell.normed
                and cell.readout == "regression" and not cell.distractor):
            raise ValueError("PairDesign is for softmax attention without a norm, the count task read last")
        super().__init__(cell)
        self.capacity_expr = laws.last_pair_reach(cell, B)
        self._cap = lambda t_value, B_value: laws.last_pair_reach(cell, np.asarray(B_value, dtype=float))
        self.capacity_mp = lambda t_value, B_value: laws.last_pair_reach(cell, mpmath.mpf(B_value))

    def steps(self) -> list[Step]:
        return [_temperature(self.cell),
                _vec(E_S, B * C1, "the embedding of s", "e_s"),
                _vec(E_A, -B * C1, "the embedding of a, opposite: rho = exp(-2 B^2/sqrt(d))", "e_a"),
                _vec(H_S, E_S, "the value of s (no norm: the embedding)", "_h_s"),
                _vec(H_A, E_A, "the value of a", "_h_a"),
                _vec(W, -(A / (2 * B)) * C1, "the read-out, along h_a - h_s: D = <w, h_a - h_s>", "w"),
                Step(W0, C - inner(W, E_A + E_S), "the read-out bias: y(n) = K + D psi(n)", "w0")]

    def shape(self, B_value):
        """``rho = exp(-2 B^2/sqrt(d))``, the shape the budget fixes (:func:`pair_rho`)."""
        return pair_rho(self.cell, B_value)

    def domain(self, L_value: int, B_value: float):
        rho = self.shape(float(B_value))
        return (rho, rho)

    def interval(self, t_value, L_value: int):
        return pair_interval(mpmath.mpf(t_value), L_value)

    def interval_float(self, t_value, L_value: int):
        lo, hi = pair_interval(float(np.asarray(t_value, dtype=float).ravel()[0]), L_value)
        return np.full(np.shape(t_value), lo), np.full(np.shape(t_value), hi)

    def best_shape(self, L_value: int, B_value: float):
        rho = self.shape(float(B_value))
        return rho, float(self.slack(np.array(rho), L_value, B_value))

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """``B*`` at ``L = 2``, ``1e-12`` at ``L = 1`` (every budget counts), None beyond."""
        if L_value > PAIR_L_STAR:
            return None
        return pair_budget(self.cell) if L_value == PAIR_L_STAR else 1e-12

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The extremal geometry at budget ``B``: the middle amplitude of ``(D_lo, min(D_hi,
        2 B^2))`` (at most ``2 B^2``, so ``|w| <= B``; below ``B*`` it does not count) and the
        middle constant."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            rho = self.shape(Bv)
            cap = laws.last_pair_reach(self.cell, Bv)
            lo, hi = pair_interval(rho, L_value)
            Dv = pair_amplitude(lo, hi, cap)
            ends = [n - Dv * _psi(n, rho) for n in range(L_value + 1)]
            Kv = (max(ends) + min(ends)) / 2
            out = self.evaluate(L_value, Bv, rho, Dv, Kv)
            vectors = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})


# ---------------------------------------------------------------------- bare pre-norm softmax
_om, _W, _mu = sympy.symbols("omega_1 W_perp mu_e", real=True)
#: the score gap seen from a, <h_a, h_s - h_a> <= 0 (not the positive BOS symbol)
_sig = sympy.Symbol("sigma_a", nonpositive=True)
#: the cosine of half the angle between h_s and h_a (RMSNorm)
_half = sympy.Symbol("c_half", nonnegative=True)
_cos, _sin = sympy.cos(gamma), sympy.sin(gamma)
#: the scale of the embeddings' directions is the budget over this (module docstring)
BARE_NU_INV = 2**10
BARE_NU = sympy.Rational(1, BARE_NU_INV)


def bare_value_gap(cell: Cell, rho, ops=laws.SYMPY):
    """``X = |h_a - h_s| = sqrt(-2 sigma)``, ``sigma = sqrt(d) log rho`` (``|h| = sqrt(d)``: ``|h_a -
    h_s|^2 = 2 d - 2 <h_a, h_s> = -2 <h_a, h_s - h_a>``); plain arithmetic on ``ops``."""
    return ops.sqrt(-2 * ops.sqrt(cell.d) * ops.log(rho))


def bare_offsets(cell: Cell, B, D, rho, ops=laws.SYMPY):
    """``(delta_c, r)``: the offsets ``delta = <w, e_s - e_a>`` of :class:`BareDesign` fill
    ``delta_c +- r`` at budget ``B``, amplitude ``D`` and shape ``rho`` (module docstring), with
    ``nu = BARE_NU B`` and ``W = sqrt(max(0, B^2 - D^2/X^2))``, the read-out's reach off
    ``h_a - h_s``: LayerNorm ``(-D nu/sqrt(d), 2 sqrt(B^2 - nu^2) W)``; RMSNorm ``(-(B + nu)
    D/(2 sqrt(d)), (B - nu) W cos(g/2))`` with ``cos(g/2) = sqrt(1 + sigma/(2 d))``."""
    d = cell.d
    nu_v = B / BARE_NU_INV
    X_v = bare_value_gap(cell, rho, ops)
    W_v = ops.sqrt(-ops.min(0, (D / X_v) ** 2 - B**2))
    if cell.kind.centred:
        return -D * nu_v / ops.sqrt(d), 2 * ops.sqrt(B**2 - nu_v**2) * W_v
    c_v = ops.sqrt(-ops.min(0, -1 - ops.sqrt(d) * ops.log(rho) / (2 * d)))
    return -(B + nu_v) * D / (2 * ops.sqrt(d)), (B - nu_v) * W_v * c_v


class BareDesign(RegressionDesign):
    """Softmax attention with bare pre-norm (``eps = 0``) read at the last position, ``L <= 4``
    (module docstring): LayerNorm (the offset through ``one``, values in a plane at ``d >= 3``,
    ``h_a = -h_s`` at ``d = 2``) and RMSNorm (the offset through the embeddings' scales)."""

    def __init__(self, cell: Cell):
        if not (cell.read.last and cell.attention == "softmax" and laws.rigid(cell) and cell.eps == 0
                and cell.readout == "regression" and not cell.distractor):
            raise ValueError("BareDesign is for softmax with bare pre-norm (eps = 0), the count task read last")
        super().__init__(cell)
        from bounds.lstar import last_l_star  # the exact L*, proven there

        self.l_star = last_l_star(cell.d, cell.kind.centred)
        #: LayerNorm at d = 2: the values are +-h_s, the shape is fixed at rho = exp(-2 sqrt(d))
        self.fixed = laws.two_values(cell)
        self._best_cache = {}

    def steps(self) -> list[Step]:
        d = self.cell.d
        sd = sympy.sqrt(d)
        top, across = axes(self.cell)
        dc, rr = bare_offsets(self.cell, B, A, t, laws.SYMPY)
        if self.fixed:
            head = [Step(X, 2 * sd, "|h_a - h_s| = 2 sqrt(d): h_a = -h_s, the only other value"),
                    _vec(H_S, sd * top, "the value of s, its layernorm", "_h_s"),
                    _vec(H_A, -sd * top, "the value of a, -h_s", "_h_a")]
            h_a_dir = -top
        else:
            head = [Step(_sig, sd * sympy.log(t), "the score gap seen from a, <h_a, h_s - h_a> = sqrt(d) log rho <= 0"),
                    Step(_cos, 1 + _sig / d, "the cosine between h_s and h_a"),
                    Step(_sin, sympy.sqrt(sympy.Max(0, 1 - _cos**2)), "its sine"),
                    Step(X, sympy.sqrt(-2 * _sig), "|h_a - h_s|, fixed by the score gap"),
                    _vec(H_S, sd * top, f"the value of s, its {self.cell.kind.name}", "_h_s"),
                    _vec(H_A, sd * (_cos * top + _sin * across), f"the value of a, its {self.cell.kind.name}", "_h_a")]
            h_a_dir = _cos * top + _sin * across
        out = [Step(nu, BARE_NU * B, "the scale of the embeddings' directions"), *head,
               Step(_W, sympy.sqrt(sympy.Max(0, B**2 - A**2 / X**2)), "the read-out's reach off h_a - h_s"),
               *offset_steps(dc, rr)]
        if self.cell.kind.centred:
            out += [Step(_mu, sympy.sqrt(B**2 - nu**2), "the part of the embeddings along one, which LayerNorm removes"),
                    Step(_om, (delta - delta_c) / (2 * _mu), "the read-out along one: it sets the offset"),
                    _vec(E_S, nu * top + _mu * ONE, "the embedding of s", "e_s"),
                    _vec(E_A, nu * h_a_dir - _mu * ONE, "the embedding of a", "e_a"),
                    _vec(W, (A / X**2) * (H_A - H_S) + _om * ONE,
                         "the read-out: D along h_a - h_s, the offset along one", "w")]
        else:
            out += [Step(_half, sympy.sqrt(sympy.Max(0, (1 + _cos) / 2)), "the cosine of half the angle between h_s and h_a"),
                    Step(_om, (delta - delta_c) / ((B - nu) * _half),
                         "the read-out along the bisector of h_s and h_a: it sets the offset"),
                    _vec(E_S, B * top, "the embedding of s, the largest", "e_s"),
                    _vec(E_A, nu * h_a_dir, "the embedding of a, the smallest scale", "e_a"),
                    _vec(W, (A / X**2) * (H_A - H_S) + (_om / (2 * _half)) * (top + h_a_dir),
                         "the read-out: D along h_a - h_s, the offset along the bisector", "w")]
        out.append(Step(W0, C - inner(W, E_A) - inner(W, H_S),
                        "the read-out bias: y(n) = K + D n/(rho+n) for n >= 1", "w0"))
        return out

    # the float screen: the widest interval of constants K over a grid of (rho, D)
    def _slack(self, L_value: int, B_value: float, rho, frac):
        """``(D, K_lo, K_hi)`` on the grid ``rho x frac`` (``frac`` in ``(0, 1)`` places ``D``
        in ``(D_lo, min(D_hi, B X))``), float64."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # non-finite points are marked bad
            return self._slack_grid(L_value, B_value, rho, frac)

    def _slack_grid(self, L_value: int, B_value: float, rho, frac):
        rho = np.asarray(rho, dtype=float)[:, None]
        X = bare_value_gap(self.cell, rho, laws.NUMPY)
        rp = rho + 1
        lo, hi = segment.interval_float(rp[:, 0], L_value - 1)
        lo, hi = (lo * (rp[:, 0] / rho[:, 0]))[:, None], (hi * (rp[:, 0] / rho[:, 0]))[:, None]
        top = np.minimum(hi, B_value * X)
        D = lo + (top - lo) * np.asarray(frac, dtype=float)[None, :]
        n = np.arange(1, L_value + 1, dtype=float)
        g = n[None, None, :] - D[:, :, None] * (n / (rho[:, :, None] + n))
        dc, r = bare_offsets(self.cell, B_value, D, rho, laws.NUMPY)
        r = r * float(SHRINK)
        K_lo = np.maximum(g.max(axis=2) - 0.5, -0.5 - dc - r)
        K_hi = np.minimum(g.min(axis=2) + 0.5, 0.5 - dc + r)
        bad = ~(top > lo) | ~np.isfinite(K_hi - K_lo)
        return D, np.where(bad, np.inf, K_lo), np.where(bad, -np.inf, K_hi)

    def _log_range(self):
        """The searched ``log rho``: ``[-2 sqrt(d), 0)`` (just inside for RMSNorm, whose offset
        vanishes with ``cos(g/2)`` at ``h_a = -h_s``)."""
        low = -2 * math.sqrt(self.cell.d)
        return (low if self.cell.kind.centred else low * (1 - 1e-6)), -1e-9

    def _best(self, L_value: int, B_value: float):
        """``(rho, D, slack)``: the grid point (refined three times) of the widest ``K`` interval."""
        key = (L_value, float(B_value))
        if key not in self._best_cache:
            bounds_r = self._log_range()
            lr = (bounds_r[0], bounds_r[0]) if self.fixed else bounds_r
            lf = (1e-6, 1 - 1e-6)
            best = (0.5, 0.5, -np.inf)
            for _ in range(4):
                rho = np.exp(np.linspace(*lr, 1 if self.fixed else 97))
                frac = np.linspace(*lf, 65)
                D, K_lo, K_hi = self._slack(L_value, B_value, rho, frac)
                width = K_hi - K_lo
                i, j = np.unravel_index(int(np.argmax(width)), width.shape)
                if width[i, j] > best[2]:
                    best = (float(rho[i]), float(frac[j]), float(width[i, j]))
                sl, sf = (lr[1] - lr[0]) / 96, (lf[1] - lf[0]) / 64
                c = math.log(best[0])
                if not self.fixed:
                    lr = (max(bounds_r[0], c - 2 * sl), min(-1e-12, c + 2 * sl))
                lf = (max(1e-9, best[1] - 2 * sf), min(1 - 1e-9, best[1] + 2 * sf))
            D, _, _ = self._slack(L_value, B_value, [best[0]], [best[1]])
            self._best_cache[key] = (best[0], float(D[0, 0]), best[2])
        return self._best_cache[key]

    def domain(self, L_value: int, B_value: float):
        low = math.exp(self._log_range()[0])
        return (low, low if self.fixed else 1.0)

    def best_shape(self, L_value: int, B_value: float):
        rho, _, width = self._best(L_value, B_value)
        return rho, width

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """The smallest budget with a positive ``K`` interval on the search (None beyond
        ``L*``; ``1e-12`` at ``L = 1``)."""
        if L_value > self.l_star:
            return None
        if L_value == 1:
            return 1e-12
        return zoom.threshold(lambda b: self._best(L_value, b)[2] > 0, 1e-6, 1.0, hi_B, max(rtol, 1e-9))

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The geometry at budget ``B`` with the searched ``(rho, D)`` and the middle ``K``
        (LayerNorm at ``d = 2``: ``rho = exp(-2 sqrt(d))`` exactly)."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            if self.fixed:
                rho = mpmath.exp(-2 * mpmath.sqrt(self.cell.d))
            elif L_value == 1:
                rho = mpmath.mpf(1) / 2
            else:
                rho = mpmath.mpf(self._best(L_value, float(Bv))[0])
            cap = Bv * bare_value_gap(self.cell, rho, laws.MPMATH)
            if L_value == 1:  # any amplitude in (0, B X) counts 0, 1: half of it
                Dv = cap / 2
            else:  # within the budget even where nothing counts (|w| >= D/X)
                Dv = min(mpmath.mpf(self._best(L_value, float(Bv))[1]), cap * (1 - mpmath.mpf(2) ** -30))
            Kv = self._middle_constant(L_value, Bv, rho, Dv)
            out = self.evaluate(L_value, Bv, rho, Dv, Kv)
            vectors = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})

    def _middle_constant(self, L_value: int, Bv, rho, Dv):
        """The middle of the constants ``K`` counting ``1..L`` with ``y(0)`` within reach (mpmath)."""
        half = mpmath.mpf(1) / 2
        g = [n - Dv * n / (rho + n) for n in range(1, L_value + 1)]
        dc, r = bare_offsets(self.cell, Bv, Dv, rho, laws.MPMATH)
        r = r * mpmath.mpf(SHRINK)
        return (max(max(g) - half, -half - dc - r) + min(min(g) + half, half - dc + r)) / 2


# ---------------------------------------------------------------------- linear attention, no norm
def free_line_offset(cell: Cell, B_value, k, s_value):
    """``delta(s) = B s + tau B s^3 - B lam - tau B lam s^2`` with ``lam = (k/(tau B))^{1/3}``
    (module docstring; plain arithmetic on floats or mpf, ``cbrt`` by a power)."""
    tau_v = 1 / cell.d ** 0.5 if isinstance(B_value, float) else 1 / mpmath.sqrt(cell.d)
    lam = (k / (tau_v * B_value)) ** (1 / 3 if isinstance(B_value, float) else mpmath.mpf(1) / 3)
    return B_value * s_value + tau_v * B_value * s_value**3 - B_value * lam - tau_v * B_value * lam * s_value**2


class LineDesign(RegressionDesign):
    """Linear attention without a norm read at the last position (module docstring)."""

    def __init__(self, cell: Cell):
        if not (cell.read.last and cell.attention == "linear" and not cell.normed
                and cell.readout == "regression" and not cell.distractor):
            raise ValueError("LineDesign is for linear attention without a norm, the count task read last")
        super().__init__(cell)

    def steps(self) -> list[Step]:
        return [_temperature(self.cell),
                Step(lam_a, (A / (tau * B)) ** sympy.Rational(1, 3), "the norm of e_a: the slope tau B lam^3"),
                _vec(W, B * C1, "the read-out, the whole budget", "w"),
                _vec(E_A, lam_a * C1, "the embedding of a", "e_a"),
                _vec(E_S, t * C1, "the embedding of s: its scale sets the offset y(0) - K", "e_s"),
                _vec(H_S, E_S, "the value of s (no norm: the embedding)", "_h_s"),
                _vec(H_A, E_A, "the value of a", "_h_a"),
                Step(W0, C - inner(W, E_A) - tau * inner(E_A, E_S) * inner(W, E_S),
                     "the read-out bias, so that y(n) = K + k n for n >= 1", "w0")]

    def _plan(self, L_value: int, B_value: float):
        """``(k, K_lo, K_hi)``: the slope of the widest interval of constants (float64 grid)."""
        lo, hi = last_line_interval(L_value)
        cap = float(self.capacity(1.0, B_value))
        top = min(hi, cap, 2.0)  # no count needs a slope beyond 2 (L = 1: any k in (0, 2) counts n = 1)
        if not top > lo:
            return cap * (1 - 2.0**-30), math.inf, -math.inf
        ks = lo + (top - lo) * np.linspace(1e-6, 1 - 1e-6, 513)
        ends = np.stack([1 - ks, L_value * (1 - ks)])
        d0 = free_line_offset(self.cell, float(B_value), ks, 0.0)
        d1 = free_line_offset(self.cell, float(B_value), ks, float(B_value))
        K_lo = np.maximum(ends.max(axis=0) - 0.5, -0.5 - np.maximum(d0, d1))
        K_hi = np.minimum(ends.min(axis=0) + 0.5, 0.5 - np.minimum(d0, d1))
        j = int(np.argmax(K_hi - K_lo))
        return float(ks[j]), float(K_lo[j]), float(K_hi[j])

    def best_shape(self, L_value: int, B_value: float):
        _, K_lo, K_hi = self._plan(L_value, B_value)
        return None, K_hi - K_lo

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        feasible = lambda b: self.best_shape(L_value, b)[1] > 0
        if not feasible(hi_B):
            return None
        return zoom.bisect_up(feasible, 1e-9, hi_B, rtol)[1]

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The slope and constant of :meth:`_plan` and ``s`` in ``[0, B]`` solving ``delta(s) =``
        the middle of the offsets that put ``y(0)`` within 1/2 of 0 (the nearer end of the reach
        where none does)."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            k_f, K_lo, K_hi = self._plan(L_value, float(Bv))
            kv = mpmath.mpf(k_f)
            Kv = mpmath.mpf((K_lo + K_hi) / 2) if K_hi > K_lo else mpmath.mpf(0)
            ends = [free_line_offset(self.cell, Bv, kv, x) for x in (mpmath.mpf(0), Bv)]
            target = min(max(-Kv, min(ends)), max(ends))
            a, b = mpmath.mpf(0), Bv
            ga = ends[0] - target
            if ga == 0 or ends[1] == target:
                a = b = a if ga == 0 else b
            for _ in range(dps * 4 if a != b else 0):  # bisection on the sign change
                m = (a + b) / 2
                gm = free_line_offset(self.cell, Bv, kv, m) - target
                a, b, ga = (m, b, gm) if (gm > 0) == (ga > 0) else (a, m, ga)
            out = self.evaluate(L_value, Bv, (a + b) / 2, kv, Kv)
            vectors = {n: v for n, v in out.items() if n != "w0" and not n.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})


# ---------------------------------------------------------------------- classification: more cells
# The heads of the last-read classification cells whose output z_0 (read at s) leaves the line of
# z_1..z_L (the plane head, on the plane or the opposed embeddings) or lies on it as the image of
# the count 0 (the pair head): the module docstring; the proofs in plane_head and pair_head.

#: the centred part of the embeddings of bare pre-LayerNorm softmax (their ``one`` part carries
#: ``z_0`` off the line; LayerNorm removes it)
PLANE_NU = mpmath.mpf(2) ** -10
#: every embedding is scaled by ``1 - SHRINK_UNIT`` so that its rounded norm stays below 1
SHRINK_UNIT = mpmath.mpf(2) ** -40


def mobius_sum(rho, L: int):
    """``S(rho) = sum_{c=1}^{L-1} (rho+c)(rho+c+1) = L' rho'^2 + L'^2 rho' + (L'^3 - L')/3`` with
    ``L' = L - 1``, ``rho' = rho + 1`` (plain arithmetic): ``X rho/S(rho)`` is ``1/sum 1/gap`` of the
    segment points ``X n/(rho+n)``, ``n = 1..L`` (their gaps are ``X rho/((rho+c)(rho+c+1))``).
    *Proof of the closed form.*  With ``j = c - 1`` running over ``0..L'-1``, ``(rho'+j)(rho'+j+1)
    = rho'^2 + rho'(2j+1) + j(j+1)``, and ``sum (2j+1) = L'^2``, ``sum j(j+1) = (L'^3 - L')/3``."""
    Lp = L - 1
    rp = rho + 1
    return Lp * rp * rp + Lp * Lp * rp + (Lp - 1) * Lp * (Lp + 1) // 3  # an integer: three consecutive


def pair_margin(X, rho, L: int):
    """``1/sum 1/gap`` of the outputs of softmax attention without a norm at the last read,
    ``x_0 = -X`` and ``x_n = X n/(rho+n)`` (:func:`pair_head`): ``X/(S(rho)/rho + (rho+1)/(rho+2))``,
    the first gap being ``X (1 + 1/(rho+1))`` (plain arithmetic)."""
    return X / (mobius_sum(rho, L) / rho + (rho + 1) / (rho + 2))


def plane_cell(cell: Cell) -> bool:
    """Whether the last-read classification head of ``cell`` is :func:`plane_head` on the geometry
    of :func:`plane_vectors`: linear attention without a norm or with bare pre-norm (values in a
    plane: RMSNorm, LayerNorm at ``d >= 3``), softmax with bare pre-norm (``eps = 0``)."""
    if not cell.read.last or cell.distractor or cell.readout != "classification" or cell.post:
        return False
    if cell.attention == "linear":
        return not cell.normed or (laws.rigid(cell) and cell.kind.image_dim(cell.d) >= 2)
    return laws.rigid(cell) and cell.eps == 0


def opposed_cell(cell: Cell) -> bool:
    """Whether the head is :func:`plane_head` on :func:`opposed_vectors`: linear attention with
    pre-norm and a gain (either kind, with or without a bias)."""
    return (cell.read.last and not cell.distractor and cell.readout == "classification"
            and cell.attention == "linear" and cell.pre and cell.affine.gain)


def opposed_vectors(cell: Cell, theta=0) -> dict:
    """The opposed embeddings turned by ``theta`` (mpf), ``g = e_1`` and ``beta = e_1`` where the cell
    has a bias.  LayerNorm: ``e_a = cos(theta) top - sin(theta) o`` (``o = one/sqrt(d)``, orthogonal
    to ``top``, which LayerNorm removes) and ``e_s = -e_a``, so the first coordinate of ``N(+-e_a)``
    is ``+-M`` (:func:`constructions.regression.axes`) for every ``theta < pi/2``.  RMSNorm, which
    removes no direction: ``e_a = top = e_1`` and ``e_s = -(cos(theta) top + sin(theta) across)``,
    whose ``N`` has first coordinate ``-M cos(theta)``.  Either way ``h_a = (M + b) e_1`` has the
    largest norm ``H`` (``kappa = tau H^3 = cap(1, 1)``) and ``h_s = c h_a`` with ``c = (b - M)/(b +
    M)`` (LayerNorm) or ``(b - M cos(theta))/(b + M)`` (RMSNorm), ``b = 1`` with a bias, else 0
    (module docstring)."""
    from constructions.classification import _mp_vector
    from constructions.symbols import E1

    top, across = _unit_axes(cell)
    e1 = _mp_vector(E1, cell.d)
    keep = 1 - SHRINK_UNIT
    theta = mpmath.mpf(theta)
    if cell.kind.centred:
        e_a = mpmath.cos(theta) * top - mpmath.sin(theta) * _mp_vector(ONE, cell.d)
        e_s = -e_a
    else:
        e_a, e_s = top, -(mpmath.cos(theta) * top + mpmath.sin(theta) * across)
    vec = {"e_a": e_a * keep, "e_s": e_s * keep, "g": e1 * keep}
    if cell.affine.bias:
        vec["beta"] = e1 * keep
    return vec


def opposed_points(cell: Cell, theta: float) -> tuple:
    """``(kappa, G, |D|)`` (floats) of :func:`opposed_vectors` at ``theta``, without the shrink:
    ``z_n = e_a + (c^2 + n) kappa e_1`` (``n >= 1``), ``z_0 = e_s + c^3 kappa e_1``, so ``D = z_1 -
    z_0 = e_a - e_s + kappa (1 + c^2 - c^3) e_1`` and ``G = <D, e_1>``.  LayerNorm: ``e_a - e_s = 2
    e_a``, ``<e_a, e_1> = cos(theta) <top, e_1> - sin(theta)/sqrt(d)``, ``|D|^2 = G^2 + 4 (1 - <e_a,
    e_1>^2)``; RMSNorm: ``e_a - e_s = (1 + cos(theta)) e_1 + sin(theta) e_2``, ``|D|^2 = G^2 +
    sin(theta)^2``.

    ``M`` is the first coordinate of ``N(e_a)`` (``N(e_s) = -N(e_a)`` for LayerNorm): at ``eps = 0``
    the kind's :meth:`~constructions.cell.NormKind.max_coordinate`; at ``eps > 0`` the norm is no
    longer scale invariant and ``N`` of the unit embeddings is shorter: LayerNorm sees the centred
    part ``cos(theta) top`` of variance ``cos(theta)^2/d``, so ``M cos(theta)/sqrt(cos(theta)^2 + d
    eps)``; RMSNorm sees unit vectors of mean square ``1/d``, so ``M/sqrt(1 + d eps)``."""
    d = cell.d
    M = float(cell.kind.max_coordinate(d, math.sqrt))
    if cell.kind.centred:
        M *= math.cos(theta) / math.sqrt(math.cos(theta) ** 2 + d * cell.eps)
    else:
        M /= math.sqrt(1 + d * cell.eps)
    b = 1.0 if cell.affine.bias else 0.0
    kappa = (M + b) ** 3 / math.sqrt(d)
    if cell.kind.centred:
        c = (b - M) / (b + M)
        along = math.cos(theta) * float(cell.kind.axis_reach(d, math.sqrt)) - math.sin(theta) / math.sqrt(d)
        G = kappa * (1 + c * c - c**3) + 2 * along
        return kappa, G, math.sqrt(G * G + 4 * max(0.0, 1 - along * along))
    c = (b - M * math.cos(theta)) / (b + M)
    G = kappa * (1 + c * c - c**3) + 1 + math.cos(theta)
    return kappa, G, math.sqrt(G * G + math.sin(theta) ** 2)


def offline_value(A, G, Dn, w, sqrt):
    """``(1 + w |D| + |v - w D|)/(2 (A + w))`` with ``|v - w D| = sqrt(1 - 2 w G + w^2 |D|^2)``
    (``v`` a unit vector, ``G = <v, D>``; plain arithmetic, ``sqrt`` of the number type): the
    bound of :func:`offline_head` at the weight ``w >= 0``."""
    return (1 + w * Dn + sqrt(1 - 2 * w * G + w * w * Dn * Dn)) / (2 * (A + w))


def offline_weight(A: float, G: float, Dn: float) -> float:
    """The weight ``w`` in ``[0, 4/|D|]`` minimising :func:`offline_value` (floats, a golden-section
    search: the numerator is convex in ``w`` and the denominator positive and affine, so the
    ratio is quasi-convex and its minimum on the interval is bracketed; a screen, whatever ``w``
    it returns :func:`offline_head` is judged and the bounds evaluate that ``w`` in balls)."""
    f = lambda w: offline_value(A, G, Dn, w, lambda q: math.sqrt(max(q, 0.0)))
    ratio = (math.sqrt(5) - 1) / 2
    a, b = 0.0, 4.0 / Dn
    c, e = b - ratio * (b - a), a + ratio * (b - a)
    fc, fe = f(c), f(e)
    for _ in range(80):
        if fc <= fe:
            b, e, fe = e, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, e, fe
            e = a + ratio * (b - a)
            fe = f(e)
        if b - a <= 1e-13 * (4.0 / Dn):
            break
    w = (a + b) / 2
    return w if f(w) < f(0.0) else 0.0


def opposed_shape(cell: Cell, L: int) -> float:
    """The ``theta`` in ``[0, pi/2]`` maximising the margin of :func:`offline_head` on
    :func:`opposed_vectors` at ``L >= 2`` (0 at ``L = 1``): the largest ``min_w``
    :func:`offline_value` over ``theta`` (floats, a bounded scalar search; ``theta = 0`` where that
    is no better)."""
    if L < 2:
        return 0.0
    from scipy import optimize

    def value(theta):
        kappa, G, Dn = opposed_points(cell, theta)
        A = (L - 1) / kappa
        return offline_value(A, G, Dn, offline_weight(A, G, Dn), lambda q: math.sqrt(max(q, 0.0)))

    top = 1.5 if cell.kind.centred else math.pi / 2
    res = optimize.minimize_scalar(lambda th: -value(th), bounds=(0.0, top), method="bounded",
                                   options={"xatol": 1e-10})
    best = max((float(res.x), top), key=value)
    return best if value(best) > value(0.0) else 0.0


def pair_cell(cell: Cell) -> bool:
    """Whether the head is :func:`pair_head`: softmax attention without a norm, the count read last."""
    return (cell.read.last and not cell.distractor and cell.readout == "classification"
            and cell.attention == "softmax" and not cell.normed)


def _unit_axes(cell: Cell):
    """``top, across`` of :func:`constructions.regression.axes` as d-vectors of mpf."""
    from constructions.classification import _mp_vector

    return tuple(_mp_vector(a, cell.d) for a in axes(cell))


def plane_shape(cell: Cell, L: int):
    """Softmax: the ``rho`` in ``(exp(-2 sqrt d), 1)`` maximising ``X rho/S(rho)``, ``X =
    sqrt(-2 sqrt(d) log rho)`` (a float screen; :mod:`bounds.last_margin` bounds the supremum);
    linear attention: None (no shape)."""
    if cell.attention == "linear":
        return None
    sd = math.sqrt(cell.d)
    if laws.two_values(cell):  # h_a = -h_s, the only shape with X > 0
        return math.exp(-2 * sd)

    def value(rho):
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(-2 * sd * np.log(rho)) * rho / mobius_sum(rho, max(L, 2))

    return zoom.maximize(value, math.exp(-2 * sd) * (1 + 1e-9), 1 - 1e-9, points=65)[0]


def plane_vectors(cell: Cell, rho=None) -> dict:
    """The embeddings at unit budget (mpf, current precision), module docstring of
    :func:`plane_head`: linear attention ``e_a = top``, ``e_s = across``; softmax with bare
    pre-LayerNorm ``e_s = nu top + mu one``, ``e_a = nu (cos g top + sin g across) - mu one`` with
    ``cos g = 1 + log(rho)/sqrt(d)`` (``nu = PLANE_NU``, ``mu = sqrt(1 - nu^2)``; at ``d = 2``
    ``cos g = -1``), with bare pre-RMSNorm ``e_s = top``, ``e_a = nu (cos g top + sin g across)``."""
    top, across = _unit_axes(cell)
    keep = 1 - SHRINK_UNIT
    if cell.attention == "linear":
        return {"e_a": top * keep, "e_s": across * keep}
    from constructions.classification import _mp_vector

    cos = 1 + mpmath.log(mpmath.mpf(rho)) / mpmath.sqrt(cell.d)
    sin = mpmath.sqrt(max(mpmath.mpf(0), 1 - cos * cos))
    if not cell.kind.centred:
        return {"e_s": top * keep, "e_a": PLANE_NU * (cos * top + sin * across) * keep}
    one = _mp_vector(ONE, cell.d)
    mu = mpmath.sqrt(1 - PLANE_NU**2)
    return {"e_s": (PLANE_NU * top + mu * one) * keep,
            "e_a": (PLANE_NU * (cos * top + sin * across) - mu * one) * keep}


def pair_shape(cell: Cell, L: int) -> float:
    """The ``rho`` maximising :func:`pair_margin` with ``X`` the law's (:func:`constructions.laws.
    last_value_gap`) over ``[exp(-2/sqrt d), exp(1/(4 sqrt d))]`` (a float screen)."""
    sd = math.sqrt(cell.d)

    def value(rho):
        with np.errstate(invalid="ignore"):
            X = laws.last_value_gap(cell, 1.0, sd * np.log(rho), laws.NUMPY)
            return np.where(np.isfinite(X), pair_margin(X, rho, L), -np.inf)

    hi = math.exp(float(laws.last_score_gap_max(cell, 1.0, laws.FLOAT)) / sd) * (1 - 1e-12)
    return zoom.maximize(value, math.exp(-2 / sd), hi, points=65)[0]


def pair_vectors(cell: Cell, rho) -> dict:
    """``e_s = top``, ``e_a = (1 - X) top`` with ``X = last_value_gap(sigma)``, ``sigma = sqrt(d)
    log rho`` (mpf): then ``<e_a, e_s - e_a> = X (1 - X) = sigma`` (``X`` solves ``X^2 - X + sigma
    = 0``) and ``|e_a - e_s| = X``, the law's largest value gap at that score gap."""
    top, _ = _unit_axes(cell)
    X = laws.last_value_gap(cell, mpmath.mpf(1), mpmath.sqrt(cell.d) * mpmath.log(mpmath.mpf(rho)), laws.MPMATH)
    keep = 1 - SHRINK_UNIT
    return {"e_s": top * keep, "e_a": (1 - X) * top * keep}


def last_outputs(cell: Cell, vectors: dict, L: int, dps: int):
    """The outputs ``z_0..z_L`` (rows of mpf) of the verifier's forward pass at ``dps`` digits for
    the embeddings ``vectors`` (the head a placeholder)."""
    from verify.forward import reduced

    params = Params(cell, {**vectors, "u": np.zeros((L + 1, cell.d))}, {"b": [0] * (L + 1)})
    return reduced(params, list(range(L + 1)), backend=f"mp{dps}", readout=False)


def _dot(p, q):
    return mpmath.fsum(p * q)


def _direction(p):
    return p / mpmath.sqrt(_dot(p, p))


def pair_head(z):
    """``(u, b)``: the collinear head (:func:`constructions.classification.collinear_head`) on
    outputs ``z_0..z_L`` that lie on one line in order (softmax attention without a norm at the
    last read: ``z_0 = 2 e_s`` and ``z_n = e_a + e_s + phi(n)(e_a - e_s)``, so ``z_0`` is the
    point at ``phi = -1``); a ``ValueError`` if they are not in order along it."""
    v = _direction(z[-1] - z[0])
    x = [_dot(v, zc) for zc in z]
    if not all(b > a for a, b in zip(x, x[1:])):
        raise ValueError("the outputs are not in order along their line")
    return collinear_head(x, v)


def _best_turn(P: float, x0: float, x, F) -> tuple:
    """``(alpha, value)``: the ``alpha`` in ``[-1, 1]`` maximising ``sqrt(1 - alpha^2) P + alpha x0
    - max_c (alpha x_c - F_c)`` (concave: a concave term minus a maximum of linear ones) and that
    maximum, by four nested grids (floats)."""
    lo, hi = -1.0, 1.0
    best, value = 0.0, -np.inf
    for _ in range(4):
        a = np.linspace(lo, hi, 401)
        g = np.sqrt(np.maximum(0.0, 1 - a * a)) * P + a * x0 - np.max(np.outer(a, x) - F[None, :], axis=1)
        j = int(np.argmax(g))
        if g[j] > value:
            best, value = float(a[j]), float(g[j])
        step = (hi - lo) / 400
        lo, hi = max(-1.0, best - step), min(1.0, best + step)
    return best, value


def _class_zero(s: float, P: float, x0: float, x, k, b, m: float) -> tuple:
    """``(alpha, margin)`` of the plane head whose chain slopes start at ``s`` (floats; the
    chain's rows ``k`` and biases ``b`` are those starting at -1, ``m`` their margin)."""
    ks, bs = (1 - s) / 2 * k + (1 + s) / 2, (1 - s) / 2 * b
    F = ks * x + bs
    alpha, value = _best_turn(P, x0, x, F)
    m0 = (value - np.max(ks * x0 + bs)) / 2
    return alpha, min((1 - s) / 2 * m, m0)


def plane_head(z):
    """``(u, b)`` on outputs ``z_0..z_L`` (rows of mpf, ``L >= 2``) with ``z_1..z_L`` collinear in
    order along a unit direction ``v`` and ``z_0`` at distance ``P >= 0`` from their line, in the
    unit direction ``p`` (any unit vector orthogonal to ``v`` if ``P = 0``).

    *The chain.*  The counts ``1..L`` get :func:`~constructions.classification.collinear_head`
    along ``v`` (slopes ``k_c`` from -1 to 1, margin ``m = 1/sum_{c=1}^{L-1} 1/gap_c``), squeezed
    to start at ``s`` in ``[-1, 1)``: ``k'_c = (1-s)/2 k_c + (1+s)/2``, ``b'_c = (1-s)/2 b_c``.  The
    added ``(1+s)/2 <v, z>`` is the same for every class ``c >= 1``, so the chain's margin is
    ``(1-s) m/2``, and its logits are still a convex envelope (non-neighbours are beaten).
    *Class 0* reads ``u_0 = alpha v + sqrt(1 - alpha^2) p``.  Its conditions against every class
    ``c >= 1`` are ``l_0(z_0) - l_c(z_0) >= m'`` and ``l_c(z_c) - l_0(z_c) >= m'``, i.e. ``Lo <= b_0
    <= Hi`` with ``Lo = max_c (<u_c, z_0> + b_c) - <u_0, z_0> + m'`` and ``Hi = min_c (<u_c, z_c> +
    b_c - <u_0, z_c>) - m'``; with ``b_0 = (Lo + Hi)/2`` every pair with class 0 keeps ``m' + (Hi -
    Lo)/2``, and ``Hi - Lo + 2m' = sqrt(1 - alpha^2) P + alpha x_0 - max_c (alpha x_c - F_c) -
    F(x_0)`` (``x = <v, z>``, ``F_c`` the logit of ``c`` at ``z_c``, ``F(x_0)`` the chain's largest
    logit at ``z_0``), concave in ``alpha``.  The head's margin is the smaller of the two.
    ``s = -1`` keeps the chain's whole margin ``m`` (the bound of the counts ``1..L`` alone,
    :mod:`bounds.last_margin`) whenever ``z_0`` is far enough off the line; where it is not,
    ``s`` rises until the two margins meet (with ``P = 0`` and ``z_0`` before ``z_1`` this is the
    collinear head on all ``L + 1`` points).  ``alpha`` and ``s`` are found in floats
    (:func:`_best_turn`, a bisection on ``s``: the chain's margin falls and class 0's rises with
    ``s``), ``b_0`` exactly; the judge certifies every row."""
    L = len(z) - 1
    v = _direction(z[L] - z[1])
    x = [_dot(v, zc) for zc in z]
    if not all(b > a for a, b in zip(x[1:], x[2:])):
        raise ValueError("the outputs z_1..z_L are not in order along their line")
    rows, b = collinear_head(x[1:], v)
    m = 1 / mpmath.fsum(1 / (q - p_) for p_, q in zip(x[1:], x[2:]))
    off = z[0] - z[1] - (x[0] - x[1]) * v
    P = mpmath.sqrt(_dot(off, off))
    if P > 0:
        p = off / P
    else:  # any unit vector orthogonal to v
        e = np.array([mpmath.mpf(0)] * len(v), dtype=object)
        e[int(np.argmin([abs(float(c)) for c in v]))] = 1
        p = _direction(e - _dot(e, v) * v)
    kf = np.array([float(_dot(r, v)) for r in rows])
    xf = np.array([float(c) for c in x[1:]])
    bf = np.array([float(c) for c in b])
    args = (float(P), float(x[0]), xf, kf, bf, float(m))
    alpha, got = _class_zero(-1.0, *args)
    s = -1.0
    if got < float(m) * (1 - 1e-12):  # class 0 binds: raise s until the margins meet
        lo, hi = -1.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            a_mid, g_mid = _class_zero(mid, *args)
            if g_mid >= (1 - mid) / 2 * float(m):
                hi = mid
            else:
                lo = mid
        s = hi
        alpha = _class_zero(s, *args)[0]
    sv, alpha = mpmath.mpf(s), mpmath.mpf(alpha)
    unit = v * (1 - mpmath.mpf(2) ** -50)
    rows = np.array([(1 - sv) / 2 * r + (1 + sv) / 2 * unit for r in rows], dtype=object)
    b = [(1 - sv) / 2 * bc for bc in b]
    mp = (1 - sv) / 2 * m
    u0 = (alpha * v + mpmath.sqrt(1 - alpha * alpha) * p) * (1 - mpmath.mpf(2) ** -50)
    lo = max(_dot(r, z[0]) + bc for r, bc in zip(rows, b)) - _dot(u0, z[0]) + mp
    hi = min(_dot(r, zc) + bc - _dot(u0, zc) for r, bc, zc in zip(rows, b, z[1:])) - mp
    return np.vstack([u0[None, :], rows]), [(lo + hi) / 2] + list(b)


def offline_head(z):
    """``(u, b)`` on outputs ``z_0..z_L`` (rows of mpf, ``L >= 2``) with ``z_1..z_L`` in order along a
    unit direction ``v`` (gaps ``l_c``, ``A = sum_{c=1}^{L-1} 1/l_c``) and ``D = z_1 - z_0``: the
    max-min head of these points when ``z_0`` is off their line (``|D| > <v, D> = G > 0``), else
    the collinear head of all ``L + 1`` points (:func:`pair_head`); where the best weight is
    ``w = 0`` (the bound is the chain's ``1/A`` alone) :func:`plane_head`, which keeps the chain's
    whole range and reads ``z_0`` beside the line.

    *The bound* (for every head of unit norm on these points).  Add the pair inequalities of
    :mod:`constructions.classification` of the neighbours ``c, c+1`` (``c >= 1``) with weights
    ``1/l_c`` and of ``0, 1`` with a weight ``w >= 0``: the ``u_c`` of the middle counts cancel and

        2m (A + w) <= <u_L, v> - <u_1, v> + w <u_1 - u_0, D> = <u_L, v> + <u_1, w D - v> - w <u_0, D>
                   <= 1 + |w D - v| + w |D|,

    i.e. ``m <= f(w)`` (:func:`offline_value`) for every ``w >= 0``.
    *The head attaining it.*  At the ``w`` minimising ``f`` (:func:`offline_weight`): ``u_0 = -D/|D|``,
    ``u_L = v``, ``u_1 = n = (w D - v)/|w D - v|`` (the equality cases above) and ``u_c = n + t_c (v
    - n)`` with ``t_c = (sum_{j<c} 1/l_j)/A`` (convex combinations: ``|u_c| <= 1``).  A neighbour
    pair ``c, c+1`` keeps ``<u_{c+1} - u_c, l_c v>/2 = (1 - <n, v>)/(2A)`` (middle biases), the
    pair ``0, 1`` keeps ``(|D| + <n, D>)/2 = N'(w)/2`` where ``N(w) = 1 + w |D| + |v - w D|`` is
    the numerator of ``f``.  Since ``|v - w D| = w <n, D> - <n, v>``, ``N = 1 - <n, v> + w N'``,
    and ``f' = 0`` is ``N = N' (A + w)``: so ``1 - <n, v> = A N'`` and both margins equal ``N'/2 =
    f(w)``, the bound.  The chain's logits are those of a collinear head along ``v`` plus the
    common ``<n, z>``, so non-neighbours among ``1..L`` are beaten (the convex envelope); ``b_0`` is
    the middle of its interval (:func:`plane_head`), and that class 0 also beats the classes
    ``c >= 2`` is certified by the judge, with the rest, for every row.  ``w`` is found in floats
    (off the optimum both margins are at least ``min`` of the two, no more than ``f``)."""
    L = len(z) - 1
    v = _direction(z[L] - z[1])
    x = [_dot(v, zc) for zc in z]
    if not all(b > a for a, b in zip(x[1:], x[2:])):
        raise ValueError("the outputs z_1..z_L are not in order along their line")
    D = z[1] - z[0]
    Dn, G = mpmath.sqrt(_dot(D, D)), _dot(v, D)
    if not G > 0 or float(Dn - G) <= 1e-30 * float(Dn):  # on the line: the collinear head
        return pair_head(z)
    inv = [1 / (q - p_) for p_, q in zip(x[1:], x[2:])]
    A = mpmath.fsum(inv)
    w = offline_weight(float(A), float(G), float(Dn))
    if w == 0:  # the bound is the chain's alone: class 0 need not bind, read it beside the line
        return plane_head(z)
    head = _offline_rows(z, v, inv, A, D, Dn, mpmath.mpf(w))
    bound = offline_value(float(A), float(G), float(Dn), w, math.sqrt)
    if _screen_margin(z, *head) < bound * (1 - 1e-6):  # a pair (0, c >= 2) binds
        other = plane_head(z)
        if _screen_margin(z, *other) > _screen_margin(z, *head):
            return other
    return head


def _screen_margin(z, u, b) -> float:
    """The smallest margin of the head ``(u, b)`` on ``z_0..z_L`` over the neighbour pairs of the
    chain ``1..L`` and every pair with class 0 (floats, ``O(L d)``: a screen choosing between
    heads; the judge certifies the one built)."""
    Z = np.array([[float(c) for c in row] for row in z])
    U = np.array([[float(c) for c in row] for row in u])
    bf = np.array([float(c) for c in b])
    own = np.einsum("ij,ij->i", Z, U) + bf
    chain = min((own[c] - (Z[c] @ U[c + 1] + bf[c + 1])) for c in range(1, len(z) - 1))
    chain = min(chain, min((own[c + 1] - (Z[c + 1] @ U[c] + bf[c])) for c in range(1, len(z) - 1)))
    at0 = Z[0] @ U[1:].T + bf[1:]
    zero = min(own[0] - at0.max(), np.min(own[1:] - (Z[1:] @ U[0] + bf[0])))
    return float(min(chain, zero))


def _offline_rows(z, v, inv, A, D, Dn, w):
    """The rows and biases of :func:`offline_head` at the weight ``w`` (mpf)."""
    L = len(z) - 1
    shrink = 1 - mpmath.mpf(2) ** -50
    n = _direction(w * D - v)
    t_c = [mpmath.mpf(0)]
    for iv in inv:
        t_c.append(t_c[-1] + iv / A)
    t_c[-1] = mpmath.mpf(1)
    rows = [(n + tc * (v - n)) * shrink for tc in t_c]
    b = [mpmath.mpf(0)]
    for c in range(1, L):
        b.append(b[-1] - _dot(rows[c] - rows[c - 1], z[c] + z[c + 1]) / 2)
    u0 = -D / Dn * shrink
    m_chain = min(_dot(rows[c] - rows[c - 1], z[c + 1] - z[c]) for c in range(1, L)) / 2
    lo = max(_dot(r, z[0]) + bc for r, bc in zip(rows, b)) - _dot(u0, z[0]) + m_chain
    hi = min(_dot(r, zc) + bc - _dot(u0, zc) for r, bc, zc in zip(rows, b, z[1:])) - m_chain
    return np.vstack([u0[None, :], np.array(rows, dtype=object)]), [(lo + hi) / 2] + b


def build_more(cell: Cell, L: int, dps: int = 50) -> Params:
    """The unit-norm head of a :func:`plane_cell`, :func:`opposed_cell` or :func:`pair_cell` at ``L`` (mpmath at ``dps``
    digits; the outputs from the verifier's forward pass).  At ``L = 1`` a plane cell's two
    outputs are read along their difference, whose length is the margin: ``e_s = -e_a = top``
    makes it ``2 + 3 kappa`` (linear: ``z_1 = (1 + 2 kappa) top``, ``z_0 = -(1 + kappa) top``) or
    ``2 + 2 sqrt(d)/(1 + rho)`` at ``h_a = -h_s`` (softmax), the bounds of
    :mod:`bounds.last_margin` at ``L = 1``."""
    check_size(cell, L)
    with mpmath.workdps(dps):
        if pair_cell(cell):
            vec = pair_vectors(cell, pair_shape(cell, L))
            z = last_outputs(cell, vec, L, dps)
            u, b = pair_head(z)
        elif opposed_cell(cell):
            vec = opposed_vectors(cell, opposed_shape(cell, L))
            z = last_outputs(cell, vec, L, dps)
            u, b = pair_head(z) if L == 1 else offline_head(z)
        elif L == 1:  # two outputs: the margin is their distance, largest at e_s = -e_a
            top, _ = _unit_axes(cell)
            vec = {"e_a": top * (1 - SHRINK_UNIT), "e_s": -top * (1 - SHRINK_UNIT)}
            u, b = pair_head(last_outputs(cell, vec, L, dps))
        else:
            vec = plane_vectors(cell, plane_shape(cell, L))
            z = last_outputs(cell, vec, L, dps)
            u, b = plane_head(z)
        return Params(cell, {**vec, "u": u}, {"b": b})
