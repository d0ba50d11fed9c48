"""The select task read at ``s`` with softmax attention and pre-LayerNorm at ``d = 2``: two values.

At ``d = 2`` (``eps = 0``) LayerNorm maps every non-constant vector to ``+-sqrt(2) c_1``
(``c_1 = (1, -1)/sqrt(2)``), so the values ``h = g * N(e) + beta`` (bare: ``N(e)``) are two
points ``beta +- u``, ``u = g * (1, -1)`` (``|u| = |g|``; bare ``u = sqrt(2) c_1``, ``beta = 0``).

*Nothing solves the task beyond L = 2.*  Counting ``n = 0, 1`` needs ``h_a != h_s`` (else the
attention is ``h_s`` on every input and ``y`` is constant).  Then ``h_b`` is ``h_a`` or ``h_s``:
``h_b = h_a`` gives ``(s, a)`` and ``(s, b)`` (targets 1 and 0) the same scores and values, one
output; ``h_b = h_s`` gives ``b`` the score and value of ``s``, and the inputs ``(n_a, n_b) =
(2, 1)`` and ``(1, 0)`` (targets 2 and 1, lengths 3 and 1) mix ``h_s`` and ``h_a`` in the same
proportion ``2 w_s : 2 w_a`` and ``w_s : w_a``: one output.  So ``L* = 2``
(:func:`bounds.lstar.cell_l_star`), for every affine option.

*The task at L <= 2.*  With ``h_b = h_s`` (``e_b = e_s``) and ``rho = exp(tau <h_s, h_s - h_a>)``
the attention is ``h_s + f (h_a - h_s)``, ``f(n_a, n_b) = n_a/((1 + n_b) rho + n_a)``, so
``y = K + D f`` with ``D = <w, h_a - h_s>`` and ``K`` free (``w0``).  Some ``K`` puts every input
within ``1/2`` of its target iff every pair of inputs ``i, j`` with ``f_i > f_j`` has
``n_i - n_j - 1 < D (f_i - f_j) < n_i - n_j + 1`` (the intervals for ``K`` pairwise meet: Helly
in one dimension; equal ``f`` need equal targets) (:func:`amplitude_interval`).  At ``L = 2`` the
only lower end is the pair ``(2, 0), (0, 0)``: ``D > 1/f(2, 0) = (rho + 2)/2``, and every upper
end exceeds it (``2 (rho + 1)``, ``3 (rho + 2)/2``, ``(rho+1)(2 rho+1)/rho``, ``2 (rho+2)(rho+1)/rho``,
``2 (rho+2)(2 rho+1)/(3 rho)`` against ``(rho+2)/2``), so it counts iff ``D > (rho + 2)/2``; at
``L = 1`` every ``D > 0`` small enough counts.

*What a budget B reaches* (:func:`shape_and_reach`).  ``D <= |w| |h_a - h_s| = 2 |w| |u|``.  Bare:
``|u| = sqrt(2)``, ``rho = exp(2 sqrt(2))``: ``D <= 2 sqrt(2) B``.  A gain: ``t = |u| = |g| <= B``,
``rho = exp(2 tau t^2)``; with a bias ``<h_s, h_s - h_a> = 2 <beta, u> + 2 t^2 >= 2 t^2 - 2 B t``,
the least at ``beta = -B u/t``; ``D <= 2 B t``.  So at ``L = 2`` the cell counts at budget ``B``
iff ``F(t) = 4 B t - rho(t) - 2 > 0`` for some ``t`` in ``(0, B]`` (bare: ``t = sqrt(2)``
fixed); ``rho(t)`` is the exponential of a convex quadratic, so ``F`` is concave.  ``B_min(2)``
is the least such ``B`` (not attained; :func:`closed_form`), ``B_min(1) = 0``:

* bare: ``(exp(2 sqrt(2)) + 2)/(4 sqrt(2))``;
* a gain: ``B > (exp(2 tau t^2) + 2)/(4 t) = phi(t)`` with ``t <= B``; ``phi`` is least where
  ``x = 2 tau t^2`` has ``(2x - 1) e^x = 2``, i.e. ``x = 1/2 + W(e^{-1/2})`` (Lambert ``W``), so
  ``B_min = (e^x + 2)/(4 t)`` at ``t = sqrt(x/(2 tau))`` (there ``B/t = (e^x + 2) tau/(2x) > 1``);
* a gain and a bias: ``F'(B) = 4B - 2 tau B rho(B) = (4 - sqrt(2)) B > 0`` (``rho(B) = 1``), so
  the concave ``F`` is largest at ``t = B``: ``4 B^2 > 3``, ``B_min = sqrt(3)/2``.

The count task is a sub-task (``n_b = 0``), so the count task's proven ``B_lower``
(:func:`bounds.lower.b_lower`) bounds these from below.

*Construction* (:class:`TwoValueSelectDesign`): ``e_s = e_b = B c_1``, ``e_a = -B c_1``; a gain
``g = t (1, 1)/sqrt(2)`` (so ``g * N(e_s) = t c_1``), a bias ``beta = -B c_1``; ``w = -(D/(2 t))
c_1`` (bare ``t = sqrt(2)``), ``|w| = D/(2t) <= B``; ``t`` maximises ``F`` (a float search), ``D``
the middle of ``(D_lo, min(D_hi, 2 B t))``, ``K`` the middle of its constants.
"""

from __future__ import annotations

import math

import mpmath
import sympy

from constructions import registry, zoom
from constructions.cell import Cell, Params
from constructions.regression import RegressionDesign, Step, _check_budget, _check_count, _vec
from constructions.symbols import BETA, C1, E_A, E_S, G, H_A, H_S, ONE, W, W0, A, B, C, inner, t
from constructions.tasks import E_B

#: the largest L of the select task with two values (module docstring)
TWO_VALUE_L_STAR = 2


def applies(cell: Cell) -> bool:
    """Whether ``cell`` (regression) is built here: the cells of
    :func:`constructions.registry.two_value_select`."""
    return registry.builds("two_value_select", cell)


def inputs(L: int) -> list[tuple[int, int]]:
    """The select inputs as ``(n_a, n_b)``, ``n_a + n_b <= L`` (order is irrelevant at the BOS read)."""
    return [(na, nb) for na in range(L + 1) for nb in range(L + 1 - na)]


def mix(na: int, nb: int, rho):
    """``f = n_a/((1 + n_b) rho + n_a)``: the weight of ``h_a`` in the attention (plain arithmetic)."""
    return na / ((1 + nb) * rho + na)


def amplitude_interval(rho, L: int):
    """``(D_lo, D_hi)``: the amplitudes for which some ``K`` solves every input of length at most
    ``L`` (module docstring: every pair ``f_i > f_j``; ``D_hi <= D_lo`` where none, also where two
    inputs of different targets share ``f``; plain arithmetic on floats, mpf or arb)."""
    pts = [(mix(na, nb, rho), na) for na, nb in inputs(L)]
    lo, hi = 0 * rho, None
    for fi, ni in pts:
        for fj, nj in pts:
            if ni == nj:
                if fi > fj:  # same target: the spread must stay below 1
                    hi = 1 / (fi - fj) if hi is None else min(hi, 1 / (fi - fj))
                continue
            if ni > nj:
                if not fi > fj:
                    return 0 * rho + 1, 0 * rho  # a larger target that does not mix more a
                lo = max(lo, (ni - nj - 1) / (fi - fj))
                hi = (ni - nj + 1) / (fi - fj) if hi is None else min(hi, (ni - nj + 1) / (fi - fj))
    return lo, (math.inf if hi is None else hi)


def shape_and_reach(cell: Cell, B, t_value, exp=math.exp, sqrt=math.sqrt):
    """``(rho, D_max)`` at budget ``B`` and gain norm ``t`` (module docstring; bare: ``t`` is
    ignored, ``|u| = sqrt(2)``); plain arithmetic, ``exp``/``sqrt`` of the number type."""
    tau = 1 / sqrt(cell.d)
    if not cell.affine.gain:
        u = sqrt(cell.d)  # |h| = sqrt(d) and h_a = -h_s
        return exp(2 * tau * u * u), 2 * u * B
    score = 2 * t_value * t_value - (2 * B * t_value if cell.affine.bias else 0)
    return exp(tau * score), 2 * B * t_value


def slack(cell: Cell, L: int, B: float, t_value: float) -> float:
    """``min(D_hi, D_max) - D_lo`` at ``t`` (float): positive iff the construction solves ``L``."""
    rho, top = shape_and_reach(cell, B, t_value)
    lo, hi = amplitude_interval(rho, L)
    return min(hi, top) - lo


class TwoValueSelectDesign(RegressionDesign):
    """The select task read at ``s`` with softmax and pre-LayerNorm at ``d = 2`` (module
    docstring): the construction up to ``L* = 2``."""

    def __init__(self, cell: Cell):
        if not applies(cell):
            raise ValueError("TwoValueSelectDesign is for the select task read at s with softmax and "
                             "pre-LayerNorm at d = 2 (eps = 0)")
        super().__init__(cell)

    def steps(self) -> list[Step]:
        d = self.cell.d
        if self.cell.affine.gain:
            out = [_vec(G, t * ONE, "the layernorm gain: g * N(e_s) = t c_1", "g")]
            shift = 0
            if self.cell.affine.bias:
                out.append(_vec(BETA, -B * C1, "the layernorm bias, against h_s - h_a: the least score gap", "beta"))
                shift = -B
            out += [_vec(H_S, (t + shift) * C1, "the value of s", "_h_s"),
                    _vec(H_A, (shift - t) * C1, "the value of a", "_h_a")]
            u = t
        else:
            out = [_vec(H_S, sympy.sqrt(d) * C1, "the value of s, its layernorm", "_h_s"),
                   _vec(H_A, -sympy.sqrt(d) * C1, "the value of a, -h_s (the only other value)", "_h_a")]
            u = sympy.sqrt(d)
        return out + [
            _vec(E_S, B * C1, "the embedding of s", "e_s"),
            _vec(E_A, -B * C1, "the embedding of a: the other value", "e_a"),
            _vec(E_B, B * C1, "the embedding of b, e_s: b has the score and value of s", "e_b"),
            _vec(W, -(A / (2 * u)) * C1, "the read-out: D = <w, h_a - h_s>", "w"),
            Step(W0, C - inner(W, E_S) - inner(W, H_S), "the read-out bias: y = K + D f", "w0"),
        ]

    def _best_t(self, L_value: int, B_value: float) -> tuple[float, float]:
        """``(t, slack)``: the gain norm of the largest slack in ``(0, B]`` (bare: ``sqrt(d)``)."""
        if not self.cell.affine.gain:
            return math.sqrt(self.cell.d), slack(self.cell, L_value, B_value, 0.0)
        one = lambda x: slack(self.cell, L_value, B_value, x) if x * x < 300 else -math.inf
        return zoom.maximize(lambda xs: [one(float(x)) for x in xs], B_value * 1e-9, B_value, points=65)

    def best_shape(self, L_value: int, B_value: float):
        t_value, s = self._best_t(L_value, B_value)
        return shape_and_reach(self.cell, B_value, t_value)[0], s

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """``B_min`` of the module docstring, in floats (None beyond ``L* = 2``; ``1e-12`` at 1)."""
        if L_value > TWO_VALUE_L_STAR:
            return None
        if L_value == 1:
            return 1e-12
        return zoom.threshold(lambda b: self._best_t(L_value, b)[1] > 0, 1e-6, 1.0, hi_B, max(rtol, 1e-12))

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The construction at budget ``B``: the searched ``t``, the middle amplitude and constant."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            t_value = mpmath.mpf(self._best_t(L_value, float(Bv))[0])
            rho, top = shape_and_reach(self.cell, Bv, t_value, mpmath.exp, mpmath.sqrt)
            lo, hi = amplitude_interval(rho, L_value)
            Dv = min((lo + min(hi, top)) / 2, top * (1 - mpmath.mpf(2) ** -30))
            ends = [(na - Dv * mix(na, nb, rho)) for na, nb in inputs(L_value)]
            Kv = (max(ends) + min(ends)) / 2
            out = self.evaluate(L_value, Bv, t_value, Dv, Kv)
            vectors = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})

    def screen(self, L_value: int, B_value) -> Params:
        return self.build(L_value, B_value)


def budget(cell: Cell):
    """``B_min(2)`` exactly (sympy; module docstring): bare, with a gain, with a gain and a bias."""
    sd = sympy.sqrt(cell.d)
    if not cell.affine.gain:
        return (sympy.exp(2 * sd) + 2) / (4 * sd)
    if cell.affine.bias:
        return sympy.sqrt(3) / 2
    x = sympy.Rational(1, 2) + sympy.LambertW(sympy.exp(-sympy.Rational(1, 2)))
    tv = sympy.sqrt(x * sd / 2)  # x = 2 tau t^2
    return (sympy.exp(x) + 2) / (4 * tv)


def closed_form(cell: Cell, L_value: int) -> dict | None:
    """The closed form of ``B_min(2)`` (:func:`budget`), not attained; None at ``L != 2``."""
    if not applies(cell) or L_value != TWO_VALUE_L_STAR:
        return None
    expr = budget(cell)
    return {"B": float(sympy.N(expr, 30)), "B_exact": str(expr), "valid_for": "L = 2", "attained": False}
