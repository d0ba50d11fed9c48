"""The select task read at ``s`` with softmax attention and no norm: a distractor that costs.

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

**Which pairs bind.**  Let ``g(n_a, n_b) = D phi(n_a, n_b) - n_a`` (``D > 0``).  A parameter set
with ``y_b = y_s`` solves select to ``L`` iff ``C + max g < 1/2`` and ``C + min g > -1/2``, the
extremes over the triangle ``n_a + n_b <= L``.  ``g`` decreases in ``n_b``, so the maximum lies
on the edge ``n_b = 0`` (the count task's inputs) and the minimum on the hypotenuse
``n_b = L - n_a``, where ``g = h(n_a) = D n_a / (rho + beta L + (1 - beta) n_a) - n_a``.  For
``beta <= 1``, ``h`` is concave (its second derivative is ``-2 (1 - beta)(rho + beta L) D /
(rho + beta L + (1 - beta) n_a)^3 <= 0``), so its minimum over ``0..L`` is at an end:
``h(0) = 0 = g(0, 0)`` and ``h(L) = g(L, 0)``, the two ends where the count task's concave
``g(., 0)`` has its minimum.  Hence:

    *for y_b = y_s and beta <= 1, a parameter set solves select to L iff it counts to L*

(:func:`binding_inputs` names the inputs that decide it).  For ``beta > 1`` the hypotenuse is
convex and an interior input can bind (the tests exhibit one); the construction below has
``beta = 1`` exactly.

**The construction** (:class:`SelectDesign`; no norm, so ``h = e``).  The count construction
has ``e_a = B c_1``, ``e_s = -r c_1`` and ``w`` along ``c_1``: there ``<w, e_b> = <w, e_s>`` forces
``<e_s, e_b> = r^2 = |e_s|^2``, i.e. ``beta = rho``, and the distractor spreads the effective
ratio over ``[rho, rho (1 + L)]``.  The fix is a component of ``e_s`` orthogonal to ``w``:

    e_a = B c_1,   e_s = -r c_1 + q one,   e_b = -r c_1 - sqrt(B^2 - r^2) one,   w = (D/X) c_1,

with ``X = B + r``.  Then ``<w, e_b> = <w, e_s>`` and ``|e_b| = B``; ``<e_s, e_b> = r^2 -
q sqrt(B^2 - r^2)`` equals ``<e_s, e_a> = -r B`` (``beta = 1``) for ``q = r sqrt((B + r)/(B - r))``;
the score gap is ``sigma = |e_s|^2 - <e_s, e_a> = r B (B + r)/(B - r)``, which fixes ``r``
(:func:`constructions.laws.select_value_gap`), and ``D = <w, e_a - e_s> <= B X``: the capacity
``B X`` (:func:`constructions.laws.select_capacity`).  ``|e_s|^2 = 2 r^2 B/(B - r) <= B^2``
iff ``r <= B/2``, i.e. ``sigma <= 3 B^2/2`` (:meth:`SelectDesign.domain`).  So the reduced
problem is the count task's segment with this capacity, the shape ``rho`` of largest slack and
the middle amplitude (:class:`~constructions.regression.RegressionDesign`), and by the
equivalence above the bisection screens the ``L + 1`` count inputs (:meth:`SelectDesign.screen`);
every reported parameter set is certified on all ``(L+1)(L+2)/2`` select inputs.

*What it costs.*  Score range: at the same ``sigma`` the construction reaches ``r`` with
``r B (B+r)/(B-r) = sigma`` where the count task has ``r (B + r) = sigma``.  At the corner of
the segment (:mod:`constructions.closed_forms`: ``rho* = floor((L-1)^2/4)``, ``D* =
floor((L+1)^2/4)``) the budget is ``B^2 = D (D + sigma)/(D + 2 sigma)``
(:func:`constructions.laws.select_budget`) against the count task's ``D^2/(D + sigma)``: a
relative price ``(B/B_count)^2 - 1 = sigma^2/(D (D + 2 sigma))``, about ``32 d log^2 L / L^4``:
0.6% at ``L = 16``, ``1e-8`` at ``L = 1024`` (``d = 8``).  The values and the read-out are the
count task's; only ``e_s`` turns and the score gap is paid in ``r``.

*Closed form* (:func:`closed_form`): ``B_min(L) = sqrt(max(D* (D* + sigma*)/(D* + 2 sigma*),
2 sigma*/3))`` with ``sigma* = sqrt(d) log rho*``, the budget of the corner, for ``L >= 6``: the
corner is the construction's optimum there (checked against the float optimum of the reduced
problem at every ``L <= 300`` for ``d`` in ``{2, 3, 8, 17, 64}``; the tests compare it with the
certified sweep).  It is the ``B_min`` of this construction, an upper bound on the cell's.

*Lower bound.*  The count task is a sub-task (``n_b = 0``), so its proven bound holds
(:func:`bounds.lower.b_lower`); it is below this ``B_min`` by the price above.  Whether another
geometry (``y_b != y_s``, ``beta > 1``) suppresses the distractor for less is not settled here.

Not built: softmax attention with pre-norm (with a gain the count construction puts every value
on ``e_1``, and bare pre-norm bounds the scores, :mod:`constructions.tasks`), and a
classification head (the distractor moves ``z`` off the segment, along ``one``).
"""

from __future__ import annotations

import math

import mpmath
import sympy

from constructions import laws
from constructions.cell import Cell, Params
from constructions.closed_forms import d_star, rho_star
from constructions.regression import RegressionDesign, Step, _score_gap, _vec
from constructions.symbols import C1, E_A, E_S, H_A, H_S, ONE, W, W0, A, B, C, X, inner, r, sigma, t
from constructions.tasks import E_B

#: the part of ``e_s`` along ``one``, which makes ``b`` weigh what ``a`` weighs
q_s = sympy.Symbol("q_s", positive=True)

#: the smallest ``L`` from which the corner is the construction's optimum (module docstring)
CLOSED_FORM_L_MIN = 6


def suppresses(cell: Cell) -> bool:
    """Whether ``cell`` is built here: the select task read at ``s``, softmax attention, no norm,
    regression."""
    return (cell.distractor and not cell.read.last and cell.attention == "softmax"
            and not cell.normed and cell.readout == "regression")


def binding_inputs(L: int) -> list[tuple[int, int]]:
    """The inputs ``(n_a, n_b)`` that decide the select task for a parameter set with
    ``y_b = y_s`` and ``beta <= 1`` (module docstring): the count task's ``(n, 0)``, ``n = 0..L``.
    The maximum of ``g`` is on them, and so is the minimum, which the hypotenuse
    ``(n, L - n)`` shares at its ends ``(0, L)`` (where ``g = 0 = g(0, 0)``) and ``(L, 0)``."""
    return [(n, 0) for n in range(L + 1)]


def _steps(cell: Cell) -> list[Step]:
    """The construction (module docstring) as named quantities."""
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
    """The select construction of softmax attention without a norm (module docstring): the
    segment of :class:`~constructions.regression.RegressionDesign` with the capacity
    :func:`constructions.laws.select_capacity`."""

    def __init__(self, cell: Cell):
        if not suppresses(cell):
            raise ValueError(f"{cell.describe()}: SelectDesign builds the select task read at s, "
                             "softmax attention without a norm, regression")
        super().__init__(cell)
        self.capacity_expr = laws.select_capacity(cell, t, B)
        self._cap = sympy.lambdify((t, B), self.capacity_expr, "numpy")
        self.capacity_mp = sympy.lambdify((t, B), self.capacity_expr, "mpmath")

    def steps(self) -> list[Step]:
        return _steps(self.cell)

    def domain(self, L_value: int, B_value: float):
        """``rho >= 1`` with ``sigma = sqrt(d) log rho <= 3 B^2/2`` (``|e_s| <= B``), and not beyond
        ``1e4 (L+2)^2`` (as the count task's segment)."""
        log_hi = laws.select_score_gap_max(self.cell, B_value) / math.sqrt(self.cell.d)
        return (1.0, math.exp(min(log_hi, math.log(1e4 * (L_value + 2) ** 2))))

    def screen(self, L_value: int, B_value) -> Params:
        """The construction without ``e_b``, on the count task: it has ``y_b = y_s`` and
        ``beta = 1``, so it solves select to ``L`` iff it counts to ``L`` (module docstring)."""
        params = self.build(L_value, B_value)
        vectors = {k: v for k, v in params.vectors.items() if k != "e_b"}
        return Params(self.cell.replace(task="count"), vectors, params.scalars)


def closed_form(cell: Cell, L_value: int) -> dict | None:
    """``B_min(L)`` of the construction at the corner (module docstring), ``L >= 6``; the keys of
    :func:`constructions.closed_forms.closed_form` for the segment (``k, k_prime`` omitted)."""
    if not suppresses(cell) or L_value < CLOSED_FORM_L_MIN:
        return None
    Lq = sympy.Integer(L_value)
    rho, D = rho_star(Lq, sympy.floor), d_star(Lq, sympy.floor)
    B_exact = laws.select_budget(cell, D, sympy.sqrt(cell.d) * sympy.log(rho))
    return {"B": float(B_exact), "B_exact": str(B_exact), "valid_for": f"L >= {CLOSED_FORM_L_MIN}",
            "rho": float(rho), "D": float(D), "rho_exact": str(rho), "D_exact": str(D)}
