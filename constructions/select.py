r"""The select task read at ``s`` with softmax attention without post-norm: a distractor that costs.

Inputs ``(s, x_1..x_m)`` with ``n_a`` tokens ``a`` and ``n_b`` tokens ``b`` (``n_a + n_b <= L``)
are read at ``s``; the target is ``n_a``.  Softmax weights never vanish, so ``b`` always takes
part in the attention (after post-norm it can be cancelled, :mod:`constructions.tasks`).

**The read-out.**  With ``y_x = <w, h_x>``, ``rho = exp(tau <h_s, h_s - h_a>)`` and
``beta = exp(tau <h_s, h_b - h_a>)`` (the weight of ``b`` over that of ``a``),

    y(n_a, n_b) = K + (rho y_s + n_a y_a + n_b beta y_b) / (rho + n_a + beta n_b).

If ``y_b = y_s`` the distractor acts as extra weight on the side of ``s``:
``y = C + D phi(n_a, n_b)``, ``phi = n_a/(rho + beta n_b + n_a)``, ``D = y_a - y_s``, so the count
``n_a`` is read on the count task's Mobius segment (:mod:`constructions.segment`) at the
effective ratio ``rho + beta n_b``, which ranges over ``[rho, rho + beta (L - n_a)]``.

**Which inputs bind.**  Let ``g(n_a, n_b) = D phi(n_a, n_b) - n_a`` (``D > 0``).  A parameter
set with ``y_b = y_s`` solves select to ``L`` iff ``C + max g < 1/2`` and ``C + min g > -1/2``,
the extremes over the triangle ``n_a + n_b <= L``.  ``g`` decreases in ``n_b``, so the maximum
lies on the edge ``n_b = 0`` (the count task's inputs) and the minimum on the hypotenuse
``n_b = L - n_a``, where ``g = h(n_a) = D n_a / (rho + beta L + (1 - beta) n_a) - n_a``.  For
``beta <= 1``, ``h`` is concave (its second derivative is ``-2 (1 - beta)(rho + beta L) D /
(rho + beta L + (1 - beta) n_a)^3 <= 0``), so its minimum over ``0..L`` is at an end:
``h(0) = 0 = g(0, 0)`` and ``h(L) = g(L, 0)``, the two ends where the count task's concave
``g(., 0)`` has its minimum.  Hence:

    *for y_b = y_s and beta <= 1, a parameter set solves select to L iff it counts to L*

(:func:`binding_inputs`).  For ``beta > 1`` the hypotenuse is convex and an interior input can
bind (the tests exhibit one).  The constructions below have ``y_b = y_s`` and ``beta <= 1``,
so the reduced problem is the count task's segment with the construction's capacity, the shape
``rho`` of largest slack and the middle amplitude (:class:`SelectDesign`, the machinery of
:class:`~constructions.regression.RegressionDesign`), and the bisection screens the ``L + 1``
count inputs (:meth:`SelectDesign.screen`); every reported parameter set is certified on all
``(L+1)(L+2)/2`` select inputs.

**No norm** (``h = e``).  The count construction has ``e_a = B c_1``, ``e_s = -r c_1`` and ``w``
along ``c_1``: there ``<w, e_b> = <w, e_s>`` forces ``<e_s, e_b> = |e_s|^2``, i.e.
``beta = rho``, and the effective ratio spreads over ``[rho, rho (1 + L)]``.  The fix is a
component of ``e_s`` orthogonal to ``w``:

    e_a = B c_1,   e_s = -r c_1 + q one,   e_b = -r c_1 - sqrt(B^2 - r^2) one,   w = (D/X) c_1,

with ``X = B + r``.  Then ``<w, e_b> = <w, e_s>`` and ``|e_b| = B``; ``<e_s, e_b> = r^2 -
q sqrt(B^2 - r^2)`` equals ``<e_s, e_a> = -r B`` (``beta = 1``) for ``q = r sqrt((B + r)/(B - r))``;
the score gap is ``sigma = |e_s|^2 - <e_s, e_a> = r B (B + r)/(B - r)``, which fixes ``r``
(:func:`constructions.laws.select_value_gap`), and ``D = <w, e_a - e_s> <= B X``: the capacity
``B X`` (:func:`constructions.laws.select_capacity`).  ``|e_s|^2 = 2 r^2 B/(B - r) <= B^2``
iff ``r <= B/2``, i.e. ``sigma <= 3 B^2/2`` (:meth:`SelectDesign.domain`).  *The cost is score
range:* the same ``sigma`` buys ``r`` with ``r B (B+r)/(B-r) = sigma`` where the count task has
``r (B + r) = sigma``.  At the corner of the segment (``rho* = floor((L-1)^2/4)``, ``D* =
floor((L+1)^2/4)``, :mod:`constructions.closed_forms`) the budget is ``B^2 = D (D + sigma)/(D +
2 sigma)`` (:func:`constructions.laws.select_budget`) against the count task's ``D^2/(D +
sigma)``: ``(B/B_count)^2 = 1 + sigma^2/(D (D + 2 sigma))``, a relative price of order
``32 d log^2(L/2)/L^4`` in ``B``.

**Bare pre-norm** (``|h| = sqrt(d)``).  The values are the count task's, ``h_s = sqrt(d) top``
and ``h_a = sqrt(d)(cos gamma top + sin gamma across)`` with ``cos gamma = 1 - sigma/d``.  A
read-out of unit direction ``u`` at angle ``theta`` from ``h_s`` (in their plane) and ``h_b`` the
mirror image of ``h_s`` in the axis of ``u``, ``h_b = 2 <h_s, u> u - h_s`` (on the sphere), give
``<u, h_b> = <u, h_s>`` (``y_b = y_s``) and ``<h_s, h_b> = d cos 2 theta``, so ``beta <= 1`` iff
``cos 2 theta <= cos gamma``, i.e. ``theta`` in ``[gamma/2, pi - gamma/2]`` (and no ``h_b`` with
``<u, h_b> = <u, h_s>`` on the sphere scores less against ``h_s``: their least score is
``<h_s, u>^2 - |h_s - <h_s, u> u| sqrt(d - <h_s, u>^2) = d cos 2 theta``).  The amplitude
``D = |w| <u, h_a - h_s>`` is largest along ``h_a - h_s``, at ``theta = pi/2 + gamma/2``, which
is allowed iff ``gamma <= pi/2`` (``sigma <= d``: the distractor is free, ``h_b = -h_a``);
beyond, the nearest allowed direction is ``theta = pi - gamma/2``, turned by ``phi = gamma -
pi/2`` towards ``h_s + h_a`` (``h_b`` is then the mirror image of ``h_a`` in ``top``, ``beta =
1``).  So ``D <= B sqrt(2 sigma) cos phi`` with ``sin phi = max(0, sigma/d - 1)``.  *The cost is
amplitude:* nothing while the count task's optimum has ``sigma <= d``, then the factor
``1/cos phi`` on ``B``, which grows without bound as ``sigma -> 2 d``.

*Bare pre-norm keeps the count task's* ``L*`` (:func:`bounds.lstar.cell_l_star`): ``L*(select)
<= L*(count)`` (the count task is a sub-task), and at every ``L <= L*(count)`` the count
task's interval opens at some ``rho < rho_max = exp(2 sqrt(d))`` (it is open at ``rho_max`` and
the inequalities are strict, so it stays open a little below), where ``cos phi > 0``: the
construction counts there at a finite budget, which grows as ``L -> L*``.  Near ``L*`` the shapes
that count fill a narrow window below ``rho_max`` (:meth:`SelectDesign._opening`).  (Bare
pre-LayerNorm at ``d = 2``, not built, has no plane for ``h_b``: there select stops at ``L = 2``
with ``eps = 0``, below the count task's ``L*(2) = 9``; :func:`bounds.lstar.cell_l_star`.)

*Closed form* (:func:`closed_form`): the budget of the corner, ``B_min(L) = sqrt(max(D* (D* +
sigma*)/(D* + 2 sigma*), 2 sigma*/3))`` without a norm and ``D*/(sqrt(2 sigma*) cos phi*)`` with
bare pre-norm (``sigma* = sqrt(d) log rho*``), in the count task's ranges (``L >= 6``;
``7 <= L <= L*(d)``): the corner is this construction's optimum there (checked against the float
optimum of the reduced problem at every ``L <= 300`` without a norm, every ``L <= min(L*, 400)``
with bare pre-norm, for ``d`` in ``{2, 3, 8, 17, 64}`` and ``{2 (RMSNorm), 3, 4, 8, 17, 64}``;
the tests compare it with the certified sweep).  It is the ``B_min`` of this construction, an
upper bound on the cell's.

*Lower bound.*  The count task is a sub-task (``n_b = 0``), so its proven bound holds
(:func:`bounds.lower.b_lower`); it lies below this ``B_min`` by the price above.  Whether
another geometry (``y_b != y_s``, or ``beta > 1`` with the hypotenuse binding) suppresses the
distractor for less is not settled here.

**Pre-norm with a gain.**  The count construction has ``g = B e_1``: every value on one
axis, where ``y_b = y_s`` forces ``h_b = h_s`` and ``beta = rho > 1``.  A second coordinate of the
gain, along ``q`` (:mod:`constructions.basis`: zero first coordinate, the rest equal), gives the
values a second axis: ``g = g_1 e_1 + kappa sqrt(d-1) q``, ``N(e_a) = -sqrt(d) e_1``, ``N(e_s) = n
e_1 + m q`` and ``N(e_b) = n e_1 - m q`` (``n^2 + m^2 = d``, every ``d >= 2``), so ``h_a = -g_1
sqrt(d) e_1`` and ``h_s, h_b = g_1 n e_1 -+ kappa m q``: ``b`` is ``s`` mirrored in ``e_1``, read as
``s`` by ``w`` along ``e_1``, and ``<h_s, h_b - h_a> = sigma - 2 kappa^2 m^2 <= 0`` (``beta <= 1``)
once ``kappa^2 m^2 >= sigma/2``.  :func:`constructions.laws.select_gain_parts` takes ``kappa^2 = 2
sigma/(3d)``, the rest of the budget ``g_1^2 = B^2 - (d-1) kappa^2`` on ``e_1``, and ``n`` from the
score gap (a quadratic): on ``sigma <= 3 B^2/2`` it has ``n <= sqrt(d)/2``, hence ``beta <= 1``,
and the capacity is ``B g_1 (n + sqrt(d))`` (:func:`constructions.laws.select_value_gap`).  *The
cost is budget:* ``(d-1) kappa^2 = O(sigma)`` of ``B^2`` goes to ``q`` and the part of the score
gap along ``e_1`` is about a third of ``sigma`` (the count task: all of it), a relative price of
order ``sigma/B^2 = O(log L / L^2)``: the leading term is the count task's.  Pre-RMSNorm with
a bias is simpler: ``beta = -g_1 e_1`` takes ``h_s = -sqrt(sigma) q`` and ``h_b = sqrt(sigma) q``
off ``e_1`` entirely, ``h_a = -g_1 (1 + sqrt(d)) e_1``, ``g = g_1 e_1 + sqrt(sigma) q`` with
``g_1^2 = B^2 - sigma`` (:func:`constructions.laws.select_value_gap`): the count task's capacity
at the budget ``sqrt(B^2 - sigma)``, and ``b`` weighs ``1/rho`` of ``a``.  Pre-LayerNorm with a
bias uses the construction without one (``beta = 0``): an upper bound that leaves the bias
unused (the count task's construction uses it, so the price is then of order one).  No closed
form is derived.  Pre-LayerNorm (``d >= 3``): the same gain, ``e_a = -nu c_1`` and ``e_s, e_b =
nu (alpha c_1 +- beta p)``; the centring gives ``h_a = -g_1 sqrt(d-1) e_1 + kappa q`` a part along
``q`` too, which ``w`` along ``e_1`` does not read, and ``b`` is ``s`` mirrored across the plane of
``e_1, q`` (:func:`constructions.laws.select_gain_parts`, the same domain).  At ``d = 2`` its two
values leave ``b`` no place (refused).

*Classification.*  The distractor moves ``z`` off the count task's segment, towards the point
``e_s + h_b``; the level head of :mod:`constructions.pencil` separates the rays from that
point, on placements of its own (a head needs no ``y_b = y_s``), so that every select input
keeps a margin.

Not built: pre-LayerNorm at ``d = 2``, bare or learned (two values: ``b`` is a copy of ``s`` or
of ``a``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import sympy

from constructions import closed_forms, laws, registry, segment
from constructions.cell import Cell, Params
from constructions.regression import RegressionDesign, Step, _embedding_scale, _score_gap, _vec, axes
from constructions.symbols import (BETA, C1, E1, E_A, E_S, G, H_A, H_S, ONE, P, Q, W, W0, A, B, C, X,
                                   gamma, inner, nu, r, sigma, t)
from constructions.tasks import E_B

#: no norm: the part of ``e_s`` along ``one``, which makes ``b`` weigh what ``a`` weighs
q_s = sympy.Symbol("q_s", positive=True)
#: bare pre-norm: the turn ``phi`` of the read-out from ``h_a - h_s``, its unit direction, the
#: value of ``b``
phi = sympy.Symbol("phi", nonnegative=True)
U_W, H_B = sympy.symbols("u_w h_b")
#: pre-norm with a gain: the gain's parts along q (over sqrt(d-1)) and e_1, the coordinates
#: of N(e_s) along e_1 and q
kappa, g_1, n_s, m_s = sympy.symbols("kappa g_1 n_s m_s", positive=True)


def suppresses(cell: Cell) -> bool:
    """Whether ``cell`` (regression) is built here: the cells of
    :func:`constructions.registry.suppressed_select`."""
    return registry.builds("select", cell)


def _gain(cell: Cell) -> bool:
    """Pre-norm with a gain (with or without a bias; LayerNorm needs ``p``, ``d >= 3``)."""
    return cell.pre and cell.affine.gain and (not cell.kind.centred or cell.d >= 3)


def binding_inputs(L: int) -> list[tuple[int, int]]:
    """The inputs ``(n_a, n_b)`` that decide the select task for a parameter set with
    ``y_b = y_s`` and ``beta <= 1`` (module docstring): the count task's ``(n, 0)``, ``n = 0..L``.
    The maximum of ``g`` is on them, and so is the minimum, which the hypotenuse
    ``(n, L - n)`` shares at its ends ``(0, L)`` (where ``g = 0 = g(0, 0)``) and ``(L, 0)``."""
    return [(n, 0) for n in range(L + 1)]


def _rigid_steps(cell: Cell) -> list[Step]:
    """Bare pre-norm (module docstring): the count task's values, the read-out turned by ``phi``
    towards ``h_s + h_a``, and ``h_b`` the mirror image of ``h_s`` in the read-out's axis."""
    d = cell.d
    sd = sympy.sqrt(d)
    top, across = axes(cell)
    cos_g, sin_g = sympy.cos(gamma), sympy.sin(gamma)
    cos_p, sin_p = sympy.cos(phi), sympy.sin(phi)
    cos_h, sin_h = sympy.cos(gamma / 2), sympy.sin(gamma / 2)
    return [
        _score_gap(cell),
        _embedding_scale(cell),
        Step(cos_g, 1 - sigma / d, "the cosine of the angle between h_s and h_a"),
        Step(sin_g, sympy.sqrt(sympy.Max(0, 1 - cos_g**2)), "its sine"),
        Step(sin_p, sympy.Max(0, -cos_g), "the sine of the turn of the read-out, 0 for sigma <= d"),
        Step(cos_p, sympy.sqrt(1 - sin_p**2), "its cosine: the share of the value gap the read-out keeps"),
        _vec(E_S, nu * top, "the embedding of s", "e_s"),
        _vec(E_A, nu * (cos_g * top + sin_g * across), "the embedding of a", "e_a"),
        _vec(H_S, sd * top, f"the value of s, its {cell.kind.name}", "_h_s"),
        _vec(H_A, sd * (cos_g * top + sin_g * across), f"the value of a, its {cell.kind.name}", "_h_a"),
        Step(cos_h, sympy.sqrt(sympy.Max(0, 1 - sigma / (2 * d))), "the cosine of gamma/2"),
        Step(sin_h, sympy.sqrt(sigma / (2 * d)), "the sine of gamma/2"),
        # (h_a - h_s)/|h_a - h_s| = -sin top + cos across, (h_s + h_a)/|h_s + h_a| = cos top + sin across
        _vec(U_W, cos_p * (cos_h * across - sin_h * top) + sin_p * (cos_h * top + sin_h * across),
             "the direction of the read-out: h_a - h_s turned by phi towards h_s + h_a"),
        _vec(H_B, 2 * inner(H_S, U_W) * U_W - H_S,
             "the value of b: h_s mirrored in the read-out's axis (read as s, scored at most as a)", "_h_b"),
        _vec(E_B, (nu / sd) * H_B, "the embedding of b", "e_b"),
        _vec(W, (A / (sympy.sqrt(2 * sigma) * cos_p)) * U_W, "the read-out", "w"),
        Step(W0, C - inner(W, E_S) - inner(W, H_S), "the read-out bias, so that y(0) = C", "w0"),
    ]


def _gain_steps(cell: Cell) -> list[Step]:
    """Pre-norm with a gain (module docstring; :func:`constructions.laws.select_gain_parts`):
    the values of ``s`` and ``b`` mirrored off ``e_1``, the read-out along ``e_1``."""
    d = cell.d
    sd = sympy.sqrt(d)
    name = cell.kind.name
    if cell.affine.bias and not cell.kind.centred:  # constructions.laws.select_value_gap
        return [_score_gap(cell), _embedding_scale(cell),
                Step(g_1, sympy.sqrt(B**2 - sigma), "the gain along e_1, and minus the bias"),
                _vec(G, g_1 * E1 + sympy.sqrt(sigma) * Q, "the RMSNorm gain", "g"),
                _vec(BETA, -g_1 * E1, "the RMSNorm bias: it takes s and b off e_1", "beta"),
                _vec(E_A, -nu * E1, "the embedding of a", "e_a"),
                _vec(E_S, (nu / sd) * (E1 + sympy.sqrt(d - 1) * Q), "the embedding of s", "e_s"),
                _vec(E_B, (nu / sd) * (E1 - sympy.sqrt(d - 1) * Q), "the embedding of b: s mirrored in e_1", "e_b"),
                _vec(H_S, -sympy.sqrt(sigma) * Q, "the value of s, g N(e_s) + beta", "_h_s"),
                _vec(H_A, -g_1 * (1 + sd) * E1, "the value of a, g N(e_a) + beta", "_h_a"),
                _vec(H_B, sympy.sqrt(sigma) * Q, "the value of b: read as s, weighing 1/rho of a", "_h_b"),
                _vec(W, -(A / (g_1 * (1 + sd))) * E1, "the read-out, along e_1", "w"),
                Step(W0, C - inner(W, E_S) - inner(W, H_S), "the read-out bias, so that y(0) = C", "w0")]
    g1_sq, kappa_sq, n = laws.select_gain_parts(cell, B, sigma)
    out = [_score_gap(cell), _embedding_scale(cell),
           Step(kappa, sympy.sqrt(kappa_sq), "the gain along q, over sqrt(d - 1): it sets the part "
                "of h_s and h_b off e_1"),
           Step(g_1, sympy.sqrt(g1_sq), "the gain along e_1: the rest of the budget")]
    if cell.kind.centred:
        out.append(Step(n_s, n, "the cosine of e_s and of e_b to c_1"))
    else:
        out.append(Step(n_s, n, "the first coordinate of N(e_s) and of N(e_b)"))
    out += [Step(m_s, sympy.sqrt((1 if cell.kind.centred else d) - n_s**2),
                 "their parts along " + ("p" if cell.kind.centred else "q") + ", of opposite signs"),
            _vec(G, g_1 * E1 + kappa * sympy.sqrt(d - 1) * Q, f"the {name} gain", "g")]
    if cell.affine.bias:
        out.append(_vec(BETA, sympy.Integer(0), f"the {name} bias, unused", "beta"))
    if cell.kind.centred:  # LayerNorm (constructions.laws.select_gain_parts)
        big = g_1 * sympy.sqrt(d - 1)
        return out + [
            _vec(E_A, -nu * C1, "the embedding of a", "e_a"),
            _vec(E_S, nu * (n_s * C1 + m_s * P), "the embedding of s", "e_s"),
            _vec(E_B, nu * (n_s * C1 - m_s * P), "the embedding of b: s mirrored in c_1", "e_b"),
            _vec(H_S, big * n_s * E1 - kappa * (n_s * Q + sd * m_s * P), "the value of s, g N(e_s)", "_h_s"),
            _vec(H_A, -big * E1 + kappa * Q, "the value of a, g N(e_a)", "_h_a"),
            _vec(H_B, big * n_s * E1 - kappa * (n_s * Q - sd * m_s * P),
                 "the value of b: read as s, scored at most as a", "_h_b"),
            _vec(W, -(A / (big * (n_s + 1))) * E1, "the read-out, along e_1", "w"),
            Step(W0, C - inner(W, E_S) - inner(W, H_S), "the read-out bias, so that y(0) = C", "w0"),
        ]
    return out + [
        _vec(E_A, -nu * E1, "the embedding of a", "e_a"),
        _vec(E_S, (nu / sd) * (n_s * E1 + m_s * Q), "the embedding of s", "e_s"),
        _vec(E_B, (nu / sd) * (n_s * E1 - m_s * Q), "the embedding of b: s mirrored in e_1", "e_b"),
        _vec(H_S, g_1 * n_s * E1 - kappa * m_s * Q, "the value of s, g N(e_s)", "_h_s"),
        _vec(H_A, -g_1 * sd * E1, "the value of a, g N(e_a)", "_h_a"),
        _vec(H_B, g_1 * n_s * E1 + kappa * m_s * Q,
             "the value of b: read as s, scored at most as a", "_h_b"),
        _vec(W, -(A / (g_1 * (n_s + sd))) * E1, "the read-out, along e_1", "w"),
        Step(W0, C - inner(W, E_S) - inner(W, H_S), "the read-out bias, so that y(0) = C", "w0"),
    ]


def _steps(cell: Cell) -> list[Step]:
    """The construction (module docstring) as named quantities."""
    if laws.rigid(cell):
        return _rigid_steps(cell)
    if _gain(cell):
        return _gain_steps(cell)
    return [
        _score_gap(cell),
        Step(r, laws.select_value_gap(cell, B, sigma) - B,
             "the part of -e_s along c_1: sigma = r B (B + r)/(B - r)"),
        Step(X, B + r, "the gap <c_1, e_a - e_s> between the values of a and s"),
        Step(q_s, r * sympy.sqrt((B + r) / (B - r)),
             "the part of e_s along one: it makes b weigh exactly what a weighs"),
        _vec(E_A, B * C1, "the embedding of a", "e_a"),
        _vec(E_S, -r * C1 + q_s * ONE, "the embedding of s", "e_s"),
        _vec(E_B, -r * C1 - sympy.sqrt(B**2 - r**2) * ONE,
             "the embedding of b: read as s, scored as a", "e_b"),
        _vec(H_S, E_S, "the value of s (no norm: the embedding)", "_h_s"),
        _vec(H_A, E_A, "the value of a", "_h_a"),
        _vec(W, (A / X) * C1, "the read-out, along c_1", "w"),
        Step(W0, C - 2 * inner(W, E_S), "the read-out bias, so that y(0) = C", "w0"),
    ]


class SelectDesign(RegressionDesign):
    """The select construction of softmax attention without a norm, with bare pre-norm or with
    pre-norm and a gain (module docstring): the segment of :class:`~constructions.regression.RegressionDesign` with the
    capacity :func:`constructions.laws.select_capacity`."""

    def __init__(self, cell: Cell):
        if not suppresses(cell):
            raise ValueError(f"{cell.describe()}: SelectDesign builds the select task read at s, "
                             "softmax attention without a norm, with bare pre-norm or with "
                             "pre-norm and a gain, regression")
        super().__init__(cell)
        self.capacity_expr = laws.select_capacity(cell, t, B)
        self._cap = sympy.lambdify((t, B), self.capacity_expr, "numpy")
        self.capacity_mp = sympy.lambdify((t, B), self.capacity_expr, "mpmath")

    def steps(self) -> list[Step]:
        return _steps(self.cell)

    def domain(self, L_value: int, B_value: float):
        """``rho >= 1`` with ``sigma = sqrt(d) log rho`` at most
        :func:`constructions.laws.select_score_gap_max` (no norm: ``|e_s| <= B``), and not
        beyond ``1e4 (L+2)^2`` (as the count task's segment)."""
        log_hi = laws.select_score_gap_max(self.cell, B_value) / math.sqrt(self.cell.d)
        hi = math.exp(min(log_hi, math.log(1e4 * (L_value + 2) ** 2)))
        return (self._opening(L_value, hi) if laws.rigid(self.cell) else 1.0, hi)

    @functools.lru_cache(maxsize=None)
    def _opening(self, L_value: int, hi: float) -> float:
        """Bare pre-norm: about the smallest ``rho <= hi`` at which the count task's interval
        ``(D_lo, D_hi)`` opens (a float bisection, ``hi`` where it is shut there).  Feasibility
        is an up-set in ``rho`` (:mod:`bounds.lstar`), so the shapes that count lie in
        ``[opening, hi]``; near ``L*`` that window is narrow, and the read-out's turn makes the
        capacity vanish at its right end, so the shape grid is spread over the window only."""
        def opens(rho):
            lo_D, hi_D = segment.interval_float(np.array(rho), L_value)
            return bool(lo_D < hi_D)

        if not opens(hi):
            return hi
        a, b = 1.0, hi
        if opens(a):
            return a
        for _ in range(200):
            mid = (a + b) / 2
            if mid in (a, b):
                break
            a, b = (a, mid) if opens(mid) else (mid, b)
        return a

    def screen(self, L_value: int, B_value) -> Params:
        """The construction without ``e_b``, on the count task: it has ``y_b = y_s`` and
        ``beta <= 1``, so it solves select to ``L`` iff it counts to ``L`` (module docstring; with
        ``eps > 0`` a pre-norm scales the three values alike, their embeddings having one norm,
        which keeps both)."""
        params = self.build(L_value, B_value)
        vectors = {k: v for k, v in params.vectors.items() if k != "e_b"}
        return Params(self.cell.replace(task="count"), vectors, params.scalars)


def closed_form(cell: Cell, L_value: int) -> dict | None:
    """``B_min(L)`` of the construction at the corner (module docstring), in the count task's
    range (:func:`constructions.closed_forms.ranges`); the keys of
    :func:`constructions.closed_forms.closed_form` for the segment (``k, k_prime`` omitted)."""
    if not suppresses(cell) or cell.eps != 0 or _gain(cell):
        return None  # pre-norm with a gain: not derived
    (span,) = closed_forms.ranges(cell.replace(task="count"))
    if not closed_forms._holds(span, L_value):
        return None
    Lq = sympy.Integer(L_value)
    rho, D = closed_forms.rho_star(Lq, sympy.floor), closed_forms.d_star(Lq, sympy.floor)
    B_exact = laws.select_budget(cell, D, sympy.sqrt(cell.d) * sympy.log(rho))
    return {"B": float(B_exact), "B_exact": str(B_exact), "valid_for": closed_forms._valid_for(span),
            "rho": float(rho), "D": float(D), "rho_exact": str(rho), "D_exact": str(D)}
