r"""The select task read at the last position, softmax attention without a norm: ``b`` a copy of
``s`` on the count task's extremal pair (``L* = 2``).

Without a norm ``h = e``.  The count task read last (:class:`constructions.last_read.PairDesign`)
has ``e_s = B c_1 = -e_a``, ``w = -(D/(2B)) c_1``, ``rho = exp(-2 B^2/sqrt(d))``, ``y(n) = K + D
psi(n)``, and stops at ``L* = 2``.  Here ``e_b = e_s``: a ``b`` token *is* an ``s`` token, so an
input with ``n_a`` tokens ``a`` and ``n_b`` tokens ``b`` holds ``c = 1 + n_b`` copies of ``s``.
The scores are ``tau <e_x, e_y> = +-tau B^2`` (``+`` for equal tokens), so from either query
an unequal token weighs ``rho`` relative to an equal one, and with ``v_a = <w, e_a> = D/2 =
-v_s`` (``K = w0``, since ``v_a + v_s = 0``):

* query ``a`` (``n_a >= 1``): ``y = w0 + v_a + (c rho v_s + n_a v_a)/(c rho + n_a) = K + D
  psi``, ``psi = n_a/(c rho + n_a)``;
* query ``b``, or ``s`` at ``m = 0`` (the query ``e_s`` in both): ``y = w0 + v_s + (c v_s + n_a
  rho v_a)/(c + n_a rho) = K + D psi``, ``psi = -c/(c + n_a rho)``.

So every input is ``y = K + D psi`` with one ``K`` and one ``D`` (:func:`psi`; the count task's
inputs are ``c = 1``).  By Helly in one dimension some ``K`` puts every output within ``1/2`` of
its target ``t = n_a`` iff every pair ``i, j`` has ``|t_i - t_j - D (psi_i - psi_j)| < 1``: the
amplitudes form an open interval ``(D_lo, D_hi)`` (:func:`select_interval`; pairs of equal
``psi`` need ``|t_i - t_j| < 1``, and here they have equal targets: the inputs with ``n_a = 0``
read at ``s`` or ``b`` all have ``psi = -1``).

*At L = 2 the distractor costs nothing.*  The seven inputs have ``psi = -1`` (``(s)``, ``(s,
b)``, ``(s, b, b)``, target 0), ``1/(rho+1)`` (``(s, a)``), ``2/(rho+2)`` (``(s, a, a)``),
``1/(2 rho + 1)`` (``(s, b, a)``, target 1) and ``-2/(rho+2)`` (``(s, a, b)``, target 1).  The
largest lower end is the count task's ``D_lo = (rho+2)/(rho+4)`` (the pair ``(s, a, a), (s)``;
the other pairs with ``t_i - t_j > 1`` are ``(s, a, a)`` against ``(s, b)`` and ``(s, b, b)``,
the same ``psi``), and every upper end exceeds it: the new ones, minus ``D_lo``, are
``rho (rho+2)^2/((rho+4)(3 rho+4))`` (the pair ``(s, a), (s, a, b)``: upper end ``(rho+1)(rho+2)/
(3 rho+4)``), ``2 rho (rho+2)^2/((rho+4)(5 rho+4))`` (``(s, b, a), (s, a, b)``: ``(rho+2)(2 rho+1)/
(5 rho+4)``), ``(rho+2)^2/(2 (rho+4))`` (``(s, a, a), (s, a, b)``: ``(rho+2)/2``), ``(rho^2 + 6 rho
+ 2)/((rho+1)(rho+4))`` (``(s, b, a), (s)``: ``(2 rho+1)/(rho+1)``) and ratios of polynomials with
positive coefficients for the rest (``tests/test_select_last_pair.py`` checks every pair in
sympy): positive for every ``rho > 0``.  So at budget ``B`` the construction solves select to 2
iff ``D_lo(rho) < 2 B^2`` (``D <= |w| |e_a - e_s| = 2 B^2``, :func:`constructions.laws.
last_pair_reach`), the count task's condition at the same ``rho``: its least budget is the
count task's ``B*``, the root of ``2 B^2 = D_lo(exp(-2 B^2/sqrt(d)))``, not attained
(:func:`constructions.last_read.pair_budget`).  The count task is the sub-task ``n_b = 0``, so
``B*`` is also a lower bound (:func:`bounds.lower.last_pair_lower`): ``B_min(2) = B*`` for the
select task, at every ``d >= 2`` (the geometry uses one direction).  At ``L = 1`` (``(s)``, ``(s,
b)`` at ``psi = -1``, ``(s, a)`` at ``1/(rho+1)``) every budget solves it (``0 < D < 2 (rho+1)/
(rho+2)``), and nothing solves select beyond 2 (the count task stops there): ``L* = 2``
(:func:`bounds.lstar.last_select_free_l_star`).

*Build* (:meth:`SelectPairDesign.build`): ``D`` the middle of ``(D_lo, min(D_hi, 2 B^2))``
(clipped to ``2 B^2``, so ``|w| <= B``; below ``B*`` it does not solve select) and ``K`` the
middle of the constants that put every output within ``1/2``.
"""

from __future__ import annotations

import itertools

import mpmath
import numpy as np

from constructions import laws, registry
from constructions.cell import Cell, Params
from constructions.last_read import PAIR_L_STAR, pair_amplitude, pair_budget, pair_rho
from constructions.refusals import refusal
from constructions.regression import RegressionDesign, _check_budget, _check_count


def built(cell: Cell) -> bool:
    """Whether ``cell`` is served here (:func:`constructions.registry.pair_select_last`)."""
    return registry.builds("select_last_pair", cell)


def psi(n_a: int, n_b: int, query_a: bool, rho):
    """``y = K + D psi`` of the input with ``n_a`` tokens ``a`` and ``n_b`` tokens ``b``, read at a
    query ``a`` (``query_a``) or at ``s``/``b`` (module docstring; ``c = 1 + n_b`` copies of
    ``s``; plain arithmetic)."""
    c = 1 + n_b
    return n_a / (c * rho + n_a) if query_a else -c / (c + n_a * rho)


def classes(L: int):
    """``(n_a, n_b, query_a)`` of every select input up to length ``L``, once per class: the last
    token ``a`` (``n_a >= 1``), ``b`` (``n_b >= 1``) or ``s`` (``m = 0``); the order of the
    other tokens changes no output (the scores depend on the tokens only)."""
    out = [(0, 0, False)]
    for n_a, n_b in itertools.product(range(L + 1), repeat=2):
        if 1 <= n_a + n_b <= L:
            if n_a >= 1:
                out.append((n_a, n_b, True))
            if n_b >= 1:
                out.append((n_a, n_b, False))
    return out


def select_interval(rho, L: int):
    """``(D_lo, D_hi)``: the amplitudes for which some ``K`` puts every select input up to ``L``
    within ``1/2`` of ``n_a`` (module docstring, Helly: every pair; plain arithmetic on any number
    type with ``max``/``min``).  Empty for every ``rho`` once ``L >= 3``."""
    points = [(n_a, psi(n_a, n_b, q, rho)) for n_a, n_b, q in classes(L)]
    lo, hi = 0 * rho, None
    for (ti, pi), (tj, pj) in itertools.combinations(points, 2):
        if pi == pj:
            if abs(ti - tj) >= 1:
                return lo, lo
            continue
        if pi < pj:
            (ti, pi), (tj, pj) = (tj, pj), (ti, pi)
        step = pi - pj
        lo = max(lo, (ti - tj - 1) / step)
        hi = (ti - tj + 1) / step if hi is None else min(hi, (ti - tj + 1) / step)
    return lo, hi


class SelectPairDesign(RegressionDesign):
    """Softmax attention without a norm, the select task read last (module docstring): the count
    task's extremal pair ``e_s = -e_a = B c_1`` with ``e_b = e_s``; solves select up to ``L = 2``."""

    def __init__(self, cell: Cell):
        if not built(cell):
            raise ValueError(f"{cell.describe()}: {refusal(cell)}")
        super().__init__(cell)

    def compiled_parts(self) -> None:
        """Nothing to compile: the construction is evaluated in mpmath."""

    def shape(self, B_value):
        """``rho = exp(-2 B^2/sqrt(d))``, the count task's pair shape (:func:`constructions.last_read.pair_rho`)."""
        return pair_rho(self.cell, B_value)

    def best_shape(self, L_value: int, B_value: float):
        """``(rho, width)``: the shape the budget fixes and the width ``min(D_hi, 2 B^2) - D_lo``
        of its amplitudes (floats)."""
        rho = float(self.shape(float(B_value)))
        lo, hi = select_interval(rho, L_value)
        return rho, min(hi, laws.last_pair_reach(self.cell, float(B_value))) - lo

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """The count task's ``B*`` at ``L = 2`` (module docstring), ``1e-12`` at ``L = 1``, None
        beyond."""
        if L_value > PAIR_L_STAR:
            return None
        return pair_budget(self.cell.replace(task="count")) if L_value == PAIR_L_STAR else 1e-12

    def screen(self, L_value: int, B_value) -> Params:
        return self.build(L_value, B_value, dps=20)

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The construction at budget ``B`` (module docstring)."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            rho = self.shape(Bv)
            cap = laws.last_pair_reach(self.cell, Bv)
            lo, hi = select_interval(rho, L_value)
            Dv = pair_amplitude(lo, hi, cap)
            ends = [n_a - Dv * psi(n_a, n_b, q, rho) for n_a, n_b, q in classes(L_value)]
            Kv = (max(ends) + min(ends)) / 2
            zero = [mpmath.mpf(0)] * (self.cell.d - 1)
            along = lambda x: np.array([x] + zero, dtype=object)
            vectors = {"e_s": along(Bv), "e_a": along(-Bv), "e_b": along(Bv), "w": along(-Dv / (2 * Bv))}
            return Params(self.cell, vectors, {"w0": Kv})
