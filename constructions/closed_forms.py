"""Exact closed forms of the optimal constructions, derived with sympy.

**Segment (softmax without post-norm).**  Feasibility of a shape ``rho`` is an up-set
(:mod:`bounds.lstar`), and the budget a shape needs grows with ``D_lo(rho)``, which near the
optimum increases much faster than the score gap ``sigma = sqrt(d) log rho`` helps; so the
optimum sits at the *corner* ``rho*`` where the counting interval closes,
``D_lo(rho*) = D_hi(rho*)``, whenever the budget grows to the right of the corner.  That is
checked at one point to the right (local evidence), and the proven lower bound of
:mod:`bounds.lower` meets the corner's budget to within its tolerance.  There one lower gap ``k`` (the pair ``(L, L-k)``) and one upper
gap ``k'`` (the pair ``(k', 0)``) are active, and ``lo_k(rho) = hi_k'(rho)`` is the quadratic

    (k-1) k' (rho+L)(rho+L-k) = rho k (k'+1)(rho+k'),

whose positive root is ``rho*``; then ``D* = (k'+1)(rho*+k')/k'`` and ``B_min`` follows from the
cell's budget formula (none: ``D/sqrt(D + sigma)``; pre_learned:
``max(D/sqrt(sigma + (1+sqrt(d-1)) D), sqrt(D/(2 sqrt(d-1))))``; pre_bare ``D/sqrt(2 sigma)``).
For ``L >= 6`` the corner is an integer point: writing ``L = 2m + 1`` (odd) or ``L = 2m``
(even),

    odd:  rho* = m^2,      D* = (m+1)^2,   k = m + 1, k' = m,
    even: rho* = m(m-1),   D* = m(m+1),    k = m,     k' = m (tie with m-1),

that is ``rho* = floor((L-1)^2/4)`` and ``D* = floor((L+1)^2/4)``: at these points
``lo_k = hi_k'`` identically in ``m``, and ``k``, ``k'`` are the integer extremisers (``M = rho*
+ L`` is ``(m+1)^2``, resp. ``m(m+1)`` with ``f(m) = m^2 > f(m+1)``).  The tests check these
identities symbolically and the formula against the numeric corner for every ``L <= 200``.

**Arc (post-norm, symmetric construction).**  ``b_lo`` increases with ``lam``, so the optimum
is the smallest feasible ``lam``, where ``b_lo(lam) = sqrt(lam^2 + x^2)(1 + 1/(2x))`` for the
active offset ``x``; squaring,

    lam*^2 = ((L-1)^2/4 - (x+1/2)^2) / ((1 + 1/(2x))^2 - (1 - 1/L)^2),
    b* = sqrt(lam*^2 + L^2/4) (1 - 1/L),

and ``B_min = b*/sqrt(d)`` (bare) or ``sqrt(b*/sqrt(d-1))`` (learned).  The active offset is
``x* = floor(3L/4) - L/2``; for ``L`` a multiple of 4 (``x* = L/4``) this gives

    lam*^2 = L^3 (L-4) / (16 (2L+1)),    b* = (L-1)(L+2) / (4 sqrt(2L+1)),

so ``b* ~ L^{3/2}/(4 sqrt(2))``.

**Line (linear attention without post-norm).**  ``B_min = (sqrt(d)(1 - 1/L))^{1/4}`` (none),
``(1 - 1/L)/d`` (bare pre-norm), ``(sqrt(d)(1 - 1/L))^{1/4}/(1 + sqrt(d-1))^{3/4}`` (learned).

Each function picks the active integers numerically and returns the exact sympy values; the
tests compare them with the numeric optimum.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath
import numpy as np
import sympy

from constructions import arc, segment
from constructions.cell import Cell
from constructions.regression import family, segment_reach

L, k, kk, x, d = sympy.symbols("L k k' x d", positive=True)
rho = sympy.Symbol("rho", positive=True)

#: the corner equation lo_k(rho) = hi_k'(rho), as a polynomial in rho
CORNER = sympy.expand((k - 1) * kk * (rho + L) * (rho + L - k) - rho * k * (kk + 1) * (rho + kk))


@functools.cache
def rho_star():
    """The positive root of :data:`CORNER` in ``rho`` (sympy, in ``L, k, k'``).

    ``CORNER = a rho^2 + b rho + c`` with ``a = -(k + k') < 0`` and ``c = (k-1) k' L (L-k) >= 0``,
    so the roots have product ``c/a <= 0``: exactly one is non-negative,
    ``(-b - sqrt(b^2 - 4ac)) / (2a)``.
    """
    a, b, c = sympy.Poly(CORNER, rho).all_coeffs()
    return (-b - sympy.sqrt(b**2 - 4 * a * c)) / (2 * a)


def d_star():
    """The read-out gap at the corner, ``(k'+1)(rho* + k')/k'``."""
    return (kk + 1) * (rho_star() + kk) / kk


#: the corner as a function of L (L >= 6, see the module docstring)
RHO_STAR_OF_L = sympy.floor((L - 1) ** 2 / 4)
D_STAR_OF_L = sympy.floor((L + 1) ** 2 / 4)
#: the extremal arc
LAM_STAR_SQ = ((L - 1) ** 2 / 4 - (x + sympy.Rational(1, 2)) ** 2) / (
    (1 + 1 / (2 * x)) ** 2 - (1 - 1 / L) ** 2)
B_ARC_STAR = sympy.sqrt(LAM_STAR_SQ + L**2 / 4) * (1 - 1 / L)
_lam_sq_np = sympy.lambdify((L, x), LAM_STAR_SQ, "numpy")
#: the extremal arc for L a multiple of 4 (active offset x = L/4)
LAM_STAR_SQ_MULT4 = L**3 * (L - 4) / (16 * (2 * L + 1))
B_ARC_STAR_MULT4 = (L - 1) * (L + 2) / (4 * sympy.sqrt(2 * L + 1))


def budget(cell: Cell, D_value, rho_value):
    """``B`` needed for amplitude ``D`` at shape ``rho`` in a segment cell (sympy or numbers)."""
    sd = sympy.sqrt(cell.d)
    sigma = sd * sympy.log(rho_value)
    if cell.norm == "none":
        return D_value / sympy.sqrt(D_value + sigma)
    if cell.norm == "pre_bare":
        return D_value / sympy.sqrt(2 * sigma)
    c, kappa, _ = segment_reach(cell)
    return sympy.Max(D_value / sympy.sqrt(sigma + c * D_value), sympy.sqrt(D_value / kappa))


def _corner(L_value: int):
    """The corner ``rho*`` (mpmath) by bisection on the up-set of feasible shapes."""
    lo, hi = mpmath.mpf("1e-9"), mpmath.mpf(4) * (L_value + 2) ** 2
    feasible = lambda r: (lambda iv: iv[0] < iv[1])(segment.interval(r, L_value))
    if feasible(lo):
        return None
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def _exact_interval(r: Fraction, L_value: int):
    """``(D_lo, D_hi)`` at a rational ``rho`` in exact arithmetic, with the extremal gaps."""
    lo = {kv: segment.lo_term(kv, r, L_value)
          for kv in segment.candidates(math.isqrt(math.floor(r) + L_value), L_value)}
    hi = {kv: segment.hi_term(kv, r, L_value)
          for kv in segment.candidates(math.isqrt(math.floor(r)), L_value)}
    k_act, kk_act = max(lo, key=lo.get), min(hi, key=hi.get)
    return lo[k_act], hi[kk_act], k_act, kk_act


def segment_closed_form(cell: Cell, L_value: int, dps: int = 40) -> dict | None:
    """Corner ``rho*``, ``D*`` and ``B*`` with the active gaps; None if the corner is not optimal."""
    r = Fraction((L_value - 1) ** 2 // 4)
    D_lo, D_frac, k_act, kk_act = _exact_interval(r, L_value) if L_value >= 6 else (0, 1, 0, 0)
    if L_value >= 6 and D_lo == D_frac:
        rho_exact, D_exact = sympy.Rational(r.numerator, r.denominator), sympy.Rational(
            D_frac.numerator, D_frac.denominator)
    else:
        with mpmath.workdps(dps):
            corner = _corner(L_value)
            if corner is None:
                return None
            lo_k = {kv: segment.lo_term(kv, corner, L_value)
                    for kv in segment.candidates(float(mpmath.sqrt(corner + L_value)), L_value)}
            hi_k = {kv: segment.hi_term(kv, corner, L_value)
                    for kv in segment.candidates(float(mpmath.sqrt(corner)), L_value)}
        k_act, kk_act = max(lo_k, key=lo_k.get), min(hi_k, key=hi_k.get)
        subs = {L: L_value, k: k_act, kk: kk_act}
        rho_exact = sympy.radsimp(rho_star().subs(subs))
        D_exact = sympy.radsimp(d_star().subs(subs))
    rho_f = float(rho_exact)
    if cell.norm == "pre_bare" and cell.d == 2:
        return None  # N(e) = +-(1,-1): only rho = 1 or exp(2 sqrt 2) are realisable, no corner
    if cell.norm == "pre_bare" and not 1 < rho_f <= math.exp(2 * math.sqrt(cell.d)):
        return None  # bare pre-norm realises only 1 <= rho <= exp(2 sqrt(d))
    if float(D_exact) + 2 * math.sqrt(cell.d) * math.log(rho_f) <= 0:
        return None  # the budget formula needs D + 2 sigma > 0
    B_exact = budget(cell, D_exact, rho_exact)
    # optimal only if the budget grows to the right of the corner
    with mpmath.workdps(dps):
        right = mpmath.mpf(rho_f) * (1 + mpmath.mpf("1e-6"))
        D_right = segment.interval(right, L_value)[0]
        if float(budget(cell, D_right, right)) < float(B_exact):
            return None
    return {"rho": rho_f, "D": float(D_exact), "B": float(B_exact), "k": k_act, "k_prime": kk_act,
            "rho_exact": str(rho_exact), "B_exact": str(B_exact)}


def arc_closed_form(cell: Cell, L_value: int) -> dict | None:
    """Extremal arc ``lam*``, amplitude ``b*`` and ``B*`` with the active offset."""
    if cell.d < 3 or L_value < 2:
        return None
    # each offset x binds beyond its own crossing lam_x (one crossing: the squared equation is
    # linear in lam^2); all bind beyond the largest, so lam* = max_x lam_x
    xs_f = arc.offsets(L_value)
    lam_sq_f = _lam_sq_np(float(L_value), xs_f)
    j = int(np.argmax(lam_sq_f))
    if lam_sq_f[j] <= 0:  # no offset binds: the infimum is the degenerate arc lam -> 0
        xs, lam_sq = None, sympy.Integer(0)
    else:
        xs = sympy.Rational(int(round(2 * xs_f[j])), 2)  # offsets are multiples of 1/2
        lam_sq = LAM_STAR_SQ.subs({L: L_value, x: xs})
    b_exact = sympy.sqrt(lam_sq + sympy.Integer(L_value) ** 2 / 4) * (1 - sympy.Rational(1, L_value))
    B_exact = (b_exact / sympy.sqrt(cell.d) if cell.norm == "post_bare"
               else sympy.sqrt(b_exact / sympy.sqrt(cell.d - 1)))
    return {"lambda": float(sympy.sqrt(lam_sq)), "b": float(b_exact), "B": float(B_exact),
            "x": None if xs is None else float(xs), "lambda_sq_exact": str(lam_sq),
            "B_exact": str(B_exact)}


def line_closed_form(cell: Cell, L_value: int) -> dict:
    sd, need = sympy.sqrt(cell.d), 1 - sympy.Rational(1, L_value)
    if cell.norm == "none":
        B_exact = (sd * need) ** sympy.Rational(1, 4)
    elif cell.norm == "pre_bare":
        B_exact = need / cell.d
    else:
        B_exact = (sd * need) ** sympy.Rational(1, 4) / (1 + sympy.sqrt(cell.d - 1)) ** sympy.Rational(3, 4)
    return {"B": float(B_exact), "B_exact": str(B_exact)}


def closed_form(cell: Cell, L_value: int) -> dict | None:
    """The closed form of ``B_min(L)`` and its extremal shape, where one applies."""
    if cell.readout != "regression" or L_value < 2:
        return None
    fam = family(cell)
    if fam == "line":
        return line_closed_form(cell, L_value)
    if fam == "arc":
        return arc_closed_form(cell, L_value)
    return segment_closed_form(cell, L_value)
