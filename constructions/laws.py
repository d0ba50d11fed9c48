"""Capacity laws: what a parameter budget ``B`` buys each architecture, stated once.

Every regression cell reduces to a read-out ``y(n) = C + A f_t(n)`` of one family (segment,
arc or line, :mod:`constructions.regression`), with an amplitude ``A`` that a budget ``B``
(the largest norm of the trainable vectors) can push up to a *capacity* ``cap(t, B)``.  This
module is the one place where the capacity of each combination of attention, placement, norm
kind and affine is written; constructions, closed forms, lower bounds, the derivation, the
fit and the limits read it.  The formulas are plain arithmetic on an :class:`Ops` namespace,
so one statement runs on sympy, mpmath, Arb balls, Fractions and numpy alike.

**Values (no norm, pre-norm).**  Write each token value as ``h_x = v_x + f`` with a part
``v_x`` that depends on the token and a shared part ``f``:

=============  ======================  ==============  =====================================
placement      ``h_x``                 ``|h| <= H``    ``|v_x| <= V``
=============  ======================  ==============  =====================================
none           ``e_x``                 ``B``           ``B``
pre, gain      ``g * N(e_x)``          ``M B``         ``M B``
pre, gain_bias ``g * N(e_x) + beta``   ``(1 + M) B``   ``M B``
pre, bare      ``N(e_x)``              ``|h| = sqrt(d)`` exactly (rigid)
=============  ======================  ==============  =====================================

with ``M = max |N(v)_i|`` (:meth:`constructions.cell.NormKind.max_coordinate`: ``sqrt(d-1)``
for LayerNorm, ``sqrt(d)`` for RMSNorm), since ``|g * N(e)| <= |g| max_i |N(e)_i|``.

*Segment (softmax).*  With ``sigma = <h_s, h_s - h_a> = sqrt(d) log rho``, ``X = |h_s - h_a|``
and ``u = (h_s - h_a)/X``: ``<h_s, u> = sigma/X``, so ``X = <h_s, u> - <h_a, u> <= sigma/X + H``,
i.e. ``X^2 - H X - sigma <= 0``; and ``X = |v_s - v_a| <= 2V``; and ``sigma <= |h_s| X <= 2 H V``.
The read-out amplitude is ``D = <w, h_a - h_s> <= B X``, so

    cap(rho, B) = B min((H + sqrt(H^2 + 4 sigma))/2, 2V),    sigma <= 2 H V.

Attained with every vector on one axis (``h_a = -H e``, ``h_s = (sigma/X - ...)``; the
constructions of :mod:`constructions.regression`).  Bare pre-norm is rigid: ``|h| = sqrt(d)``
gives ``X^2 = 2 sigma`` exactly and ``sigma <= 2d``, so ``cap = B sqrt(2 sigma)`` and ``rho``
is bounded whatever ``B``: a finite ``L*(d)`` (:mod:`bounds.lstar`).  LayerNorm at ``d = 2``
maps onto a line (``N(e) = +-sqrt(2) c_1``): then ``h_a = -h_s`` or ``h_a = h_s`` and
``X^2 = 2 sigma`` as well, with ``|h| <= H`` (gain: ``sigma <= 2 H^2``).

*Line (linear attention).*  ``y(n) = C + K n`` with ``K = tau <h_s, h_a> <w, h_a> <= tau H^3 B``
(Cauchy-Schwarz), attained by aligned vectors: ``cap = tau H^3 B`` (bare pre-norm:
``tau d^{3/2} B = d B``).

**Post-norm (the arc).**  ``z = sqrt(d) unit(P + n Q)`` in the plane of the normalised residuals
(LayerNorm: its centred part).  The read-out sees ``w`` (bare) or ``w * g`` (gain, gain_bias;
a bias only shifts ``y``) projected on that plane, so ``R = sqrt(d) |w projected| <= sqrt(d) B``
(bare) and ``R <= sqrt(d) |P (w * g)| <= sqrt(d) a |w * g|_1 <= sqrt(d) a B^2`` with ``a`` the
norm of a basis vector's part in the image (:meth:`~constructions.cell.NormKind.axis_reach`:
``sqrt((d-1)/d)`` for LayerNorm, 1 for RMSNorm), attained by ``w = g`` on one axis whose image
lies in the plane.  The embeddings are free (scale invariance).  The plane needs an image of
dimension 2: LayerNorm needs ``d >= 3``, RMSNorm ``d >= 2``.

*The foot: linear attention with post-RMSNorm.*  There ``r(n) = P + n Q`` with
``P = (1 + tau|e_s|^2) e_s`` and ``Q = tau <e_s, e_a> e_a``.  The foot of the residual line, the
count ``n0 = -<P, Q>/|Q|^2`` at which ``|r(n)|`` is least, is (where ``<e_s, e_a> != 0``; else
``r`` is constant and nothing counts beyond ``L = 0``)

    n0 = -(1 + tau |e_s|^2) / (tau |e_a|^2),

whatever the angle between the embeddings, which sets only the distance ``lam = |n0| tan phi``
of the line from the origin in counts (``phi`` the angle between ``e_s`` and ``e_a``, free in
``(0, pi/2)``).  So at budget ``B`` the foot lies before the first count, ``n0 <
-sqrt(d)/B^2`` (:func:`foot_distance`; the bound is approached with ``|e_a| = B`` and
``e_s -> 0`` and not attained), and every ``n0`` below it is reachable.  LayerNorm escapes this
by centring away a common component of ``e_s`` and ``e_a``; RMSNorm does not centre.  The arc
read-out is then one-sided: the symmetric arc (``n0 = L/2``) that attains the capacity above is
out of reach.  The capacity is still attained (``w`` and ``g`` as for the other arcs), but the
shapes it applies to are only those with ``n0 <= -F``, ``F = sqrt(d)/B^2``: the reduced problem
is the arc problem with the foot so restricted, and the foot trades against the budget
(:mod:`constructions.one_sided`, the construction; :func:`bounds.arc_lower.arc_lower` with
``foot``, the proven lower bound).  The rates stay ``3/2`` and ``3/4``.

*The distance: the same cells read at the last position.*  There the query is ``e_a`` and
``r(n) = e_a + tau <e_a, e_s> e_s + n tau |e_a|^2 e_a`` for ``n >= 1``: with ``a = |e_a|^2``,
``b = |e_s|^2`` and ``e_s = sqrt(b) (c along + s perp)`` (``along = e_a/|e_a|``, ``c^2 + s^2 =
1``) the line is ``tau a^{3/2} ((n + F) along + lam perp')`` with the foot at ``-F``, ``F = (sqrt(d)
+ b c^2)/a >= sqrt(d)/B^2``, and the distance ``lam = b |c s|/a`` (:mod:`constructions.last_foot`):
the angle between the embeddings sets the foot too, and ``lam/F`` is bounded
(:func:`last_distance_ratio`).

**Leading terms.**  The capacity's leading power and the extremal amplitude's
(:data:`EXTREMAL_AMPLITUDE`) give the exact ``c(d)`` of ``B_min(L) = c(d) L^p (1 + o(1))``
(:func:`leading_term`, with the proofs).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import flint
import mpmath
import numpy as np

from constructions.cell import Cell


@dataclass(frozen=True)
class Ops:
    """The operations a law needs, for one number type."""

    sqrt: object
    log: object
    min: object


def _sympy(name: str):
    """``sympy.<name>``, imported on its first call (a verdict that needs no symbols never
    loads sympy)."""
    def call(*args):
        import sympy

        return getattr(sympy, name)(*args)

    call.__name__ = name
    return call


SYMPY = Ops(_sympy("sqrt"), _sympy("log"), _sympy("Min"))
MPMATH = Ops(mpmath.sqrt, mpmath.log, min)
NUMPY = Ops(np.sqrt, np.log, np.minimum)
FLOAT = Ops(math.sqrt, math.log, min)
ARB = Ops(lambda v: flint.arb(v).sqrt(), lambda v: flint.arb(v).log(),
          lambda a, b: flint.arb(a).min(flint.arb(b)))


def family(cell: Cell) -> str:
    """``segment`` (softmax, values), ``arc`` (post-norm) or ``line`` (linear attention, values)."""
    if cell.post:
        return "arc"
    return "segment" if cell.attention == "softmax" else "line"


def rigid(cell: Cell) -> bool:
    """Whether the values have a fixed norm ``sqrt(d)`` (bare pre-norm)."""
    return cell.pre and not cell.affine.gain


def on_a_line(cell: Cell) -> bool:
    """Whether pre-norm maps every value onto one line through 0 (LayerNorm at ``d = 2`` without
    a bias: ``h = +-v``)."""
    return cell.pre and not cell.affine.bias and cell.kind.image_dim(cell.d) == 1


def two_values(cell: Cell) -> bool:
    """Whether bare pre-norm realises only two values ``h = +-sqrt(2) c_1`` (LayerNorm at
    ``d = 2``): the score gap is then 0 or ``2 d``, nothing in between."""
    return rigid(cell) and cell.kind.image_dim(cell.d) == 1


def value_reach(cell: Cell, ops: Ops = SYMPY, d=None):
    """``(H, V)`` per unit budget: ``|h| <= H B`` and ``|v_x| <= V B`` (module docstring).

    None for rigid values (bare pre-norm) and post-norm cells.  ``d``: the width to state it at
    (default the cell's; a sympy symbol gives the law as a function of the width).
    """
    if cell.post or rigid(cell):
        return None
    if not cell.pre:
        return 1, 1
    M = cell.kind.max_coordinate(cell.d if d is None else d, ops.sqrt)
    return (1 + M if cell.affine.bias else M), M


def score_gap_max(cell: Cell, B, ops: Ops = SYMPY):
    """The largest score gap ``sigma = <h_s, h_s - h_a>`` at budget ``B``: ``2 H V B^2``, or
    ``2 d`` for rigid values (``2 H^2 B^2`` when pre-norm maps onto a line)."""
    if rigid(cell):
        return 2 * cell.d
    H, V = value_reach(cell, ops)
    return 2 * H * (H if on_a_line(cell) else V) * B**2


def value_gap(cell: Cell, B, sigma, ops: Ops = SYMPY):
    """The largest ``X = |h_s - h_a|`` at budget ``B`` and score gap ``sigma`` (segment)."""
    if rigid(cell) or on_a_line(cell):
        return ops.sqrt(2 * sigma)
    H, V = value_reach(cell, ops)
    root = (H * B + ops.sqrt(H**2 * B**2 + 4 * sigma)) / 2
    # the root reaches 2 V B only at the end of the domain unless the bias makes H > V
    return root if H == V else ops.min(root, 2 * V * B)


def segment_budgets(cell: Cell, A, sigma, ops: Ops = SYMPY) -> dict:
    """The smallest budget of each branch of the segment's capacity (:func:`value_gap`) at
    amplitude ``A > 0`` and score gap ``sigma > 0``; the capacity reaches ``A`` at ``B`` iff
    ``B`` is at least every one of them (each branch increases in ``B``).

    * ``value``: ``B X >= A`` on the root ``X^2 - H B X - sigma = 0``: ``X = A/B`` gives
      ``A^2/B^2 - H A - sigma = 0``, ``B = A/sqrt(H A + sigma)`` (the ``+`` root, since
      ``X >= H B/2`` iff ``H A + 2 sigma >= 0``; at ``sigma < 0`` the branch starts at
      ``B = 2 sqrt(-sigma)/H``, where :func:`bounds.lower.segment_lower` uses it); values at the
      distance ``sqrt(2 sigma)`` (rigid, or on a line): ``A/sqrt(2 sigma)``.
    * ``reach``: ``X <= 2 V B``: ``sqrt(A/(2V))``.  Where ``H = V`` it is implied by the two
      others (``sigma <= 2 H V B^2`` puts the root below ``2 V B``), and :func:`segment_budget_branches`
      leaves it out.
    * ``score``: the score gap's reach ``sigma <= score_gap_max(B)``: ``sqrt(sigma /
      score_gap_max(1))`` (None for rigid values, whose domain is ``sigma <= 2d`` at every ``B``).
    """
    if rigid(cell):
        return {"value": A / ops.sqrt(2 * sigma), "reach": None, "score": None}
    score = ops.sqrt(sigma / score_gap_max(cell, 1, ops))
    if on_a_line(cell):
        return {"value": A / ops.sqrt(2 * sigma), "reach": None, "score": score}
    H, V = value_reach(cell, ops)
    return {"value": A / ops.sqrt(H * A + sigma), "reach": ops.sqrt(A / (2 * V)), "score": score}


def segment_budget_branches(cell: Cell, A, sigma, ops: Ops = SYMPY) -> list:
    """The branches of :func:`segment_budgets` whose maximum is the smallest budget reaching
    ``A`` at ``sigma > 0`` (``reach`` only where ``H != V``)."""
    b = segment_budgets(cell, A, sigma, ops)
    reach = value_reach(cell, ops)
    keep = [b["value"], b["score"]] + ([b["reach"]] if reach and reach[0] != reach[1] else [])
    return [v for v in keep if v is not None]


def capacity(cell: Cell, t, B, ops: Ops = SYMPY, d=None):
    """``cap(t, B)``: the largest amplitude at shape ``t`` and budget ``B`` (module docstring).

    Segment: ``t = rho``, ``B X(B, sqrt(d) log rho)``; line: ``tau H^3 B``; arc: ``sqrt(d) B``
    or ``sqrt(d) a B^2``.  ``d`` as for :func:`value_reach` (arc and line).
    """
    d = cell.d if d is None else d
    fam = family(cell)
    if fam == "arc":
        sd = ops.sqrt(d)
        return sd * B if not cell.affine.gain else sd * cell.kind.axis_reach(d, ops.sqrt) * B**2
    if fam == "line":
        if rigid(cell):
            return d * B
        H, _ = value_reach(cell, ops, d)
        return (H * B) ** 3 * B / ops.sqrt(d)
    return B * value_gap(cell, B, ops.sqrt(d) * ops.log(t), ops)


def degree(cell: Cell) -> int | None:
    """``p`` with ``cap(B) = cap(1) B^p`` where the capacity is a power of ``B`` (arc and line:
    1 for rigid values or a bare arc, 2 for an arc with a gain, 4 for a line); None (segment)."""
    fam = family(cell)
    if fam == "segment":
        return None
    if fam == "arc":
        return 2 if cell.affine.gain else 1
    return 1 if rigid(cell) else 4


def budget(cell: Cell, amplitude, ops: Ops = SYMPY):
    """The smallest ``B`` whose capacity reaches ``amplitude`` (arc and line): the inverse
    ``(amplitude / cap(1))^{1/p}`` of the power law (:func:`degree`).  ``ops.sqrt`` must be
    exact enough for the number type: for ``p = 4`` it is applied twice."""
    p = degree(cell)
    ratio = amplitude / capacity(cell, 1, 1, ops)
    return {1: ratio, 2: ops.sqrt(ratio), 4: ops.sqrt(ops.sqrt(ratio))}[p]


def arc_crossing_sq(L, x):
    """``lam_x^2``: the square of the smallest ``lam`` from which the count at offset ``x`` allows
    the symmetric arc's amplitude ``b_lo(lam)`` (:func:`constructions.arc.b_lo`,
    :func:`constructions.arc.b_hi_x`), the root of ``b_lo^2 = b_hi_x^2`` in ``lam^2`` (plain
    arithmetic: a symbol, a Fraction, an mpf ``L`` and ``x``)

        lam_x^2 = L^2 x^2 (L - 2x - 2) / (4 L x + L - 2x).

    With ``u = lam^2``, ``a = (1 - 1/L)^2`` and ``c = (1 + 1/(2x))^2`` the equation
    ``(u + L^2/4) a = (u + x^2) c`` is affine in ``u``: ``u = (c x^2 - a L^2/4)/(a - c)``, where
    ``c x^2 - a L^2/4 = ((2x + 1)^2 - (L - 1)^2)/4 = (2x + 2 - L)(2x + L)/4`` and
    ``a - c = (4 x^2 (L-1)^2 - L^2 (2x+1)^2)/(4 x^2 L^2) = -(2x + L)(4 L x + L - 2x)/(4 x^2 L^2)``;
    the common factor ``2x + L > 0`` cancels.  The denominator ``4 L x + L - 2x = 2x (2L - 1) + L``
    is positive for ``x >= 0``, ``L >= 1``.
    """
    return L**2 * x**2 * (L - 2 * x - 2) / (4 * L * x + L - 2 * x)


def foot_distance(cell: Cell, B, ops: Ops = SYMPY):
    """``F(B) = sqrt(d)/B^2``: at budget ``B`` the foot of the residual line lies at a count
    ``n0 < -F(B)`` (linear attention with post-RMSNorm, module docstring); None where the foot is
    free (every other post-norm cell) or there is no arc."""
    if not (cell.post and cell.attention == "linear" and not cell.kind.centred):
        return None
    return ops.sqrt(cell.d) / B**2


def last_distance_ratio(cell: Cell, B, ops: Ops = SYMPY):
    """``kappa(B) = 1/(2 sqrt(sigma (1 + sigma)))``, ``sigma = sqrt(d)/B^2``: at budget ``B`` the
    last read's residual line of the counts ``n >= 1`` (linear attention with post-RMSNorm) has
    its distance ``lam <= kappa F`` from the origin, ``-F`` its foot (module docstring); None
    where the foot is free.

    *Proof.*  ``lam/F = b |c s|/(sqrt(d) + b c^2)`` with ``b = |e_s|^2 <= B^2``; for fixed ``c``
    it increases in ``b`` (its derivative is ``sqrt(d) |c s|/(sqrt(d) + b c^2)^2 >= 0``), so
    ``lam/F <= |c s|/(sigma + c^2)``.  With ``t = c^2`` in ``[0, 1]`` the square of the right side
    is ``g(t) = t (1 - t)/(sigma + t)^2``, and ``g'(t) (sigma + t)^3 = (1 - 2t)(sigma + t) - 2t (1 -
    t) = sigma - t (1 + 2 sigma)``: ``g`` rises up to ``t* = sigma/(1 + 2 sigma)`` and falls beyond,
    and ``g(t*) = 1/(4 sigma (1 + sigma))`` (``1 - t* = (1 + sigma)/(1 + 2 sigma)``, ``sigma + t* =
    2 sigma (1 + sigma)/(1 + 2 sigma)``).  Attained at ``|e_s| = B``, ``c^2 = t*``, for every
    ``|e_a| <= B`` (it sets the scale ``F``)."""
    if foot_distance(cell, B, ops) is None:
        return None
    sigma = ops.sqrt(cell.d) / B**2
    return 1 / (2 * ops.sqrt(sigma * (1 + sigma)))


def smallest_d(cell: Cell) -> int:
    """The smallest width at which the cell counts beyond ``L = 1``."""
    return 3 if cell.post and cell.kind.centred else 2


def theory_exponent(cell: Cell):
    """The growth exponent of regression ``B_min(L)`` (None: finite ``L*``).

    Segment ``1`` (``rho ~ L^2``, ``D ~ L^2``, ``cap ~ B^2``); line ``0``; arc ``3/2`` (bare,
    ``cap ~ B``) and ``3/4`` (gain, ``cap ~ B^2``) since the arc needs ``R ~ L^{3/2}``.  Values
    on a line (:func:`on_a_line`): ``2``, the power of ``B_min ~ L^2/sqrt(log L)``
    (:func:`leading_term`; the log factor makes a fit over finite ``L`` read a little less).
    """
    fam = family(cell)
    if fam == "line":
        # the select task read last with bare pre-norm: B_min ~ sqrt(L)/(2d)
        # (constructions.select_last, bounds.lower.last_select_line_lower)
        return 0.5 if cell.distractor and cell.read.last and rigid(cell) else 0.0
    if fam == "arc":
        return 0.75 if cell.affine.gain else 1.5
    if rigid(cell) or (cell.read.last and not cell.pre):
        return None  # a finite L* (bare pre-norm; softmax without a norm at the last read)
    if cell.distractor and cell.pre and cell.kind.image_dim(cell.d) == 1 and cell.eps == 0:
        return None  # L* = 2: the select task with two values (constructions.two_value_select)
    return 2.0 if on_a_line(cell) else 1.0


def __getattr__(name: str):
    """:data:`EXTREMAL_AMPLITUDE`, built on first use (sympy numbers)."""
    if name == "EXTREMAL_AMPLITUDE":
        return _extremal_amplitude()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _extremal_amplitude() -> dict:
    """``EXTREMAL_AMPLITUDE``: the extremal amplitude of each family as ``L -> oo``:
    ``A*(L) = a L^q (1 + O(1/L))``, as ``(a, q)`` (segment ``D* = floor((L+1)^2/4)``; arc
    ``b* ~ L^{3/2}/(4 sqrt 2)``, the symmetric arc; line ``K* = 1 - 1/L``;
    :mod:`constructions.closed_forms`)."""
    import sympy

    return {"segment": (sympy.Rational(1, 4), 2),
            "arc": (1 / (4 * sympy.sqrt(2)), sympy.Rational(3, 2)),
            "line": (sympy.Integer(1), 0)}


@dataclass(frozen=True)
class LeadingTerm:
    """``B_min(L) = c L^p (1 + o(1))`` as ``L -> oo`` (:func:`leading_term`).

    ``general`` is ``c(d)``, a sympy expression in the width ``d`` of
    :mod:`constructions.symbols`, valid for every ``d >= d_min``; ``constant`` is ``c`` at the
    cell's width (exact); ``exponent`` is ``p`` (a sympy Rational).  ``proven`` says what the
    constant is proven to be: ``"B_min"`` for every derived constant (the construction and a
    lower bound share the leading term, :func:`leading_term`).
    """

    general: sympy.Expr
    constant: sympy.Expr
    exponent: sympy.Rational
    d_min: int
    proven: str

    @property
    def statement(self) -> str:
        p = self.exponent
        return f"B_min(L) = c(d) L^{p if p.is_integer else f'({p})'} (1 + o(1))"


def leading_term(cell: Cell) -> LeadingTerm | None:
    """The leading term ``c(d) L^p`` of regression ``B_min(L)`` (None where ``B_min`` has no
    power rate, or where the constant is not derived).

    With ``A*(L) ~ a L^q`` the family's extremal amplitude (:data:`EXTREMAL_AMPLITUDE`) and
    ``cap(B) ~ k B^m`` the capacity's leading term as ``B -> oo``, ``B_min ~ (A*/k)^{1/m}``:

        c = (a / k)^{1/m},    p = q / m.

    *Line* (linear attention without post-norm).  ``cap = k B^m`` exactly (:func:`capacity`,
    ``m = 1`` for bare pre-norm, 4 otherwise) and ``B_min = cap^{-1}(1 - 1/L)`` exactly: the
    construction attains it and :func:`bounds.lower.line_lower` proves it.  So ``c = k^{-1/m}``,
    ``p = 0`` and ``B_min / c = (1 - 1/L)^{1/m} = 1 - 1/(m L) + O(L^-2)``; proven for ``B_min``.

    *Segment* (softmax, no norm or pre-norm with a gain).  ``k = H`` (:func:`value_reach`),
    ``m = 2``: ``c = 1/(2 sqrt(H))``, ``p = 1``; proven for ``B_min``, with
    ``B_min / (c L) = 1 + 1/L + O(log L / L^2)``.  Write ``k = ceil(L/2)``, ``k' = floor(L/2)``,
    ``rho* = floor((L-1)^2/4)``, ``D* = floor((L+1)^2/4)`` (:mod:`constructions.closed_forms`;
    there ``lo_k(rho*) = hi_k'(rho*) = D*`` identically).

    * Lower bound (``L >= 5``).  Counting parameters have ``D_lo(rho) < D < D_hi(rho)``
      (:mod:`constructions.segment`), and ``lo_k <= D_lo``, ``D_hi <= hi_k'``.  The numerator
      of ``lo_k - hi_k'`` (over ``rho k k' > 0``) is a quadratic in ``rho`` with leading
      coefficient ``(k-1)k' - k(k'+1) = -L < 0`` and value ``(k-1) L (L-k) k' >= 0`` at 0, so
      ``lo_k < hi_k'`` holds for ``rho > 0`` iff ``rho`` exceeds its positive root ``rho*``.
      ``lo_k = (k-1)/k (rho + 2L - k + L(L-k)/rho)`` increases for ``rho >= sqrt(L(L-k))``, which
      ``rho*`` exceeds for ``L >= 5``; so ``D > lo_k(rho) >= lo_k(rho*) = D*``.  Also
      ``D > lo_L(rho) = (L-1)(rho+L)/L > rho/2``, so the score gap is
      ``sigma = sqrt(d) log rho < sqrt(d) log(2D)``.  The capacity law (``B X >= D``,
      ``X^2 - H B X - sigma <= 0``) gives ``B >= D/sqrt(H D + sigma) > f(D)`` with
      ``f(D) = D/sqrt(H D + sqrt(d) log(2D))``, and ``f`` increases for ``D >= 1``
      (``(f^2)' = D (H D + sqrt(d)(2 log(2D) - 1)) / (H D + sqrt(d) log(2D))^2 > 0``).  Hence
      ``B_min >= f(D*) = sqrt(D*/H) (1 - O(log L / L^2))``.
    * Upper bound (``L >= 4``).  For ``rho`` just above ``rho*`` the integer extremisers of
      ``D_lo`` (a concave function of the gap, largest at ``floor`` or ``ceil`` of
      ``sqrt(rho + L)``) and of ``D_hi`` (convex, ``sqrt(rho)``) are ``k in {m, m+1}``,
      ``k' in {m-1, m}`` for ``L = 2m`` and ``k in {m+1, m+2}``, ``k' in {m, m+1}`` for
      ``L = 2m+1``; for each of these pairs the numerator of ``lo_k - hi_k'`` is ``<= 0`` at
      ``rho*`` with a negative derivative (polynomials in ``m``, checked by sympy in the tests).
      So ``D_lo < D_hi`` on some ``(rho*, rho* + delta)`` and ``D_lo -> D*``: the corner is a
      limit of counting shapes, and as the construction attains the capacity,
      ``B_min <= max(D*/sqrt(H D* + sigma*), sqrt(D*/(2V)), sqrt(sigma*/(2 H V)))`` (the closed
      form, ``sigma* = sqrt(d) log rho*``) ``= sqrt(D*/H) (1 + O(log L / L^2))``, because
      ``H <= 2V`` (``1 + M <= 2M`` with a bias: ``M >= 1`` for ``d >= 2``).
    * Both: ``B_min = sqrt(D*/H) (1 + O(log L / L^2))`` with ``sqrt(D*) = (L+1)/2 + O(1/L)``.

    Bare pre-norm has a finite ``L*`` (no rate).  Values on a line (LayerNorm with a gain and no
    bias at ``d = 2``, :func:`on_a_line`) have the value gap ``sqrt(2 sigma)``, which does not
    grow with ``B``: there ``B_min ~ D*/sqrt(2 sigma*)``, of order ``L^2 / sqrt(log L)``, not a
    power (None; ``d_min = 3`` for that cell).

    *Arc* (post-norm).  ``cap = k B^m`` exactly (``k = sqrt(d)``, ``m = 1`` bare;
    ``k = sqrt(d) a``, ``m = 2`` with a gain) and the symmetric arc needs
    ``b* ~ L^{3/2}/(4 sqrt 2)``: ``c = (1/(4 sqrt(2) k))^{1/m}``, ``p = 3/(2m)``.  Every counting
    parameter set gives an arc ``(lam > 0, n0, C, u)`` that counts to ``L`` with
    ``|u| <= cap(B)`` (the reduction of :func:`bounds.lower.post_lower`; a residual line through
    0 leaves at most two points, and nothing counts to ``L >= 2``), so with ``R*(L)`` the least
    ``|u|`` of such arcs, ``(R*(L)/k)^{1/m} <= B_min(L)``, and ``R*(L) = L^{3/2}/(4 sqrt 2)
    (1 + o(1))`` (below) makes ``c`` the constant of ``B_min``: proven for ``B_min``.

    * Upper bound.  With ``x`` an offset ``n - L/2 > 0``, the crossing
      ``lam_x^2 = Num/Den`` (:func:`arc_crossing_sq` before its cancellation) has
      ``Num = (L-1)^2/4 - (x + 1/2)^2 <= L^2/4 - x^2`` and
      ``Den = (1 + 1/(2x))^2 - (1 - 1/L)^2 >= 1/x + 2/L - 1/L^2 >= (L + 2x)(L - 1/2)/(x L^2) > 0``,
      so ``lam_x^2 <= x (L/2 - x) L^2 / (2L - 1) <= Lam = L^4 / (16 (2L - 1))`` (AM-GM).  Every
      ``lam^2 > Lam`` therefore allows ``b_lo(lam) < b_hi(lam)``, the construction realises every
      arc, and ``B_min <= budget(b_lo(sqrt(Lam)))`` with
      ``b_lo(sqrt(Lam)) = (L-1) sqrt(L^2 + 8L - 4) / (4 sqrt(2L - 1)) = L^{3/2}/(4 sqrt 2) (1 + O(1/L))``;
      the closed form (``L`` a multiple of 4: ``b* = (L-1)(L+2)/(4 sqrt(2L+1))``) has the same
      leading term, and ``B_min / (c L^p) = 1 + 3/(4 m L) + O(L^-2)`` there.
    * Lemma (four counts).  Let ``l >= 4`` be a multiple of 4, ``n_i = n_a + l (1 + xi_i)/2``
      with ``xi = (-1, -1/2, 1/2, 1)`` four counts, and an arc with ``tan theta_{n_i} = T_i =
      c + sigma xi_i`` (``c = (n_a + l/2 - n0)/lam``, ``sigma = l/(2 lam)``), ``r_i = (1 +
      T_i^2)^{-1/2}``, ``v_i = r_i (1, T_i)``, ``s(T) = sqrt(1 + T^2)``, ``s[..]`` its divided
      differences at the ``T_i`` (``s[013]`` at ``T_0, T_1, T_3``), ``r_c = (1 + c^2)^{-1/2} =
      1/s_c``, ``V_i`` the Vandermonde product ``prod (T_k - T_j)`` (``j < k``) of the nodes
      other than ``T_i`` and ``V`` that of all four.  If ``|C + <u, v_i> - n_i| < 1/2`` for the
      four and ``omega = sigma r_c <= 1/10``, then
      ``|u| > (l - 1) sqrt(l (1 + 2c^2) / (32 psi(omega)))`` with
      ``psi(w) = (1 + w)/((1 - w)^7 kappa(w))``, ``kappa(w) = (1 + w)^-6 - 2w (1 + w)(1 - w)^-6``,
      which is positive on ``[0, 1/10]`` (the polynomial ``(1 - w)^6 - 2w (1 + w)^7`` has no root
      there), so ``psi`` increases there (``kappa`` decreases), ``psi >= 1`` and
      ``psi(w) = 1 + O(w)``.
      *Proof.*  (a) Let ``D_i`` be the determinant of the rows ``(1, v_j)``, ``j != i`` in order,
      and ``z_i = (-1)^i D_i``: by Laplace expansion ``sum z_i (1, v_i) = 0``, so adding the four
      conditions times ``z_i`` cancels ``C`` and ``u``: ``|sum z_i n_i| < sum |z_i| / 2``; as
      ``sum z_i = 0``, ``sum z_i n_i = (l/2) sum z_i xi_i = (l/(2 sigma)) sum z_i T_i``, so
      ``l |sum z_i T_i| < sigma sum |z_i|``.  (b) Scaling row ``j`` by ``s_j = 1/r_j``:
      ``D_i = (prod_{j != i} r_j) V_i s[the other three] > 0`` (``s'' = r^3 > 0``) and
      ``sum z_i T_i = -(prod r_i) V beta``, ``beta = s[012] s[123] - s[0123] s[12]`` (the
      determinant of the rows ``(1, T, s, T s)``); ``V_0 = 3 sigma^3/4``, ``V_2 = 3 sigma^3/2``,
      ``V = 9 sigma^6/8`` and ``sum |z_i| = 2 (D_0 + D_2)`` (``sum z_i = 0``), so (a) reads
      ``l < G = 4 (s_0 s[123] + 2 s_2 s[013]) / (3 sigma^2 |beta|)``.  (c) For
      ``|tau - c| <= sigma``: ``|s(tau) - s_c| <= |tau - c|`` (``(1 + tau^2)(1 + c^2) - (1 +
      tau c)^2 = (tau - c)^2``), so ``s(tau)/s_c`` lies in ``[1 - omega, 1 + omega]`` and
      ``r(tau)/r_c`` in ``[1/(1 + omega), 1/(1 - omega)]``.  A divided difference is a derivative
      at a point of the nodes' hull (mean value theorem): ``s[abc] = r(zeta)^3/2``,
      ``s[0123] = s'''(zeta_1)/6 = -zeta_1 r(zeta_1)^5/2``, ``s[12] = s'(zeta_2) = zeta_2
      r(zeta_2)``.  (d) So ``s[012] s[123] >= r_c^6 (1 + omega)^-6/4``, and ``-s[0123] s[12] =
      zeta_1 zeta_2 r(zeta_1)^5 r(zeta_2)/2`` with ``zeta_1 zeta_2 >= c^2 - 2 sigma |c| -
      sigma^2``: bounding ``r^6`` by ``r_c^6 (1 + omega)^-6`` where the product is ``>= 0`` and by
      ``r_c^6 (1 - omega)^-6`` where it is negative, ``-s[0123] s[12] >= (r_c^6/2)(c^2 (1 +
      omega)^-6 - (2 sigma |c| + sigma^2)(1 - omega)^-6)``; and ``2 sigma |c| + sigma^2 =
      omega 2|c| sqrt(1 + c^2) + omega^2 (1 + c^2) <= (omega + omega^2)(1 + 2c^2)``
      (``(1 + 2c^2)^2 - 4 c^2 (1 + c^2) = 1``).  Hence ``beta >= r_c^6 (1 + 2c^2) kappa(omega)/4
      > 0``.  (e) With ``s_0, s_2 <= s_c (1 + omega)`` and ``s[abc] <= r_c^3 (1 - omega)^-3/2``,
      ``G <= 8 (1 + omega) / (sigma^2 r_c^4 (1 + 2c^2)(1 - omega)^3 kappa(omega))``.  The chord
      ``W = |v_3 - v_0|`` is at most the angle ``theta_3 - theta_0``, the integral of ``r(tau)^2``
      over ``[c - sigma, c + sigma]``, so ``W <= 2 sigma r_c^2 (1 - omega)^-2`` and
      ``W^2 G <= 32 psi(omega)/(1 + 2c^2)``: by (b), ``W^2 < 32 psi(omega)/((1 + 2c^2) l)``.  The
      pair ``n_0, n_3`` gives ``<u, v_3 - v_0> > l - 1``, so ``|u| > (l - 1)/W``.
    * Non-degeneracy.  ``sum z_i T_i`` is, up to sign, the determinant of the rows ``(1,
      cos theta_i, sin theta_i, tan theta_i)``; if it vanished, some ``f = a + b cos + b' sin +
      e tan`` not identically 0 would vanish at the four angles, which lie in ``(-pi/2, pi/2)``.
      With ``w = cos > 0`` there, ``f'' + f = (w^2 (f/w)')'/w``, so by Rolle ``(f/w)'`` has three
      zeros, ``(w^2 (f/w)')'`` two and ``f''' + f' = 3 e (1 + tan^2)(1 + 2 tan^2)`` one: ``e = 0``,
      and ``a + b cos + b' sin`` with four zeros on an interval shorter than ``pi`` is 0.  So
      ``G`` of (b) is finite and continuous in ``(c, sigma)`` on ``sigma > 0``.
    * Lower bound: ``lim inf R*(L) / (L^{3/2}/(4 sqrt 2)) >= 1``.  Let ``L' = 4 floor(L/4)``
      (its counts are among ``0..L``), and ``omega, c, sigma`` those of the counts ``0, L'/4,
      3L'/4, L'``; then ``omega = L'/(2 rho)`` with ``rho = lam sqrt(1 + c^2)`` the distance of
      the count ``L'/2`` on the residual line from 0.  Fix ``eps`` in ``(0, 1/10]``, put
      ``eta = 1/20`` and ``kappa_0 = eta^{3/2} / (8 sqrt(2 psi(1/10)))``, and let ``L' >= 200``.
      (1) ``omega <= eps``: the lemma with ``l = L'`` gives ``|u| > (L' - 1) sqrt(L'/(32
      psi(eps)))``.  (2) ``omega > eps`` and ``lam <= kappa_0 L'``: take the lemma's counts in
      ``[L' - l, L']`` if ``n0 <= L'/2`` and in ``[0, l]`` otherwise, ``l = 4 floor(eta L'/4)``
      (``l >= eta L' - 4 >= 6``).  Their middle count lies at least ``(L' - l)/2 >= L'/4`` counts
      from the foot ``n0``, so ``|c| >= L'/(4 lam) >= 1/(4 kappa_0)`` and ``omega <= (l/2)/(L'/4)
      <= 1/10``, and ``|u| > (l - 1) sqrt(l) |c| / (4 sqrt(psi(1/10))) >= (eta L' - 5)^{3/2} /
      (16 kappa_0 sqrt(psi(1/10))) = (1 - 100/L')^{3/2} L'^{3/2}/sqrt(2) >= L'^{3/2}/(4 sqrt 2)``.
      (3) ``omega > eps`` and ``lam > kappa_0 L'``: then ``eps < omega <= sigma < 1/(2 kappa_0)``
      and ``|c| < rho/lam < 1/(2 eps kappa_0)``: ``(c, sigma)`` lies in ``K_eps = [-1/(2 eps
      kappa_0), 1/(2 eps kappa_0)] x [eps, 1/(2 kappa_0)]``, a compact set that does not depend
      on ``L``.  ``G`` of (b) is a function of ``(c, sigma)`` alone (through ``T_i = c + sigma
      xi_i``; ``L`` and ``lam`` do not enter it otherwise) and continuous on ``sigma > 0``
      (non-degeneracy), so ``G_eps = max G`` over ``K_eps`` is finite and the same for every
      ``L``; and (a)-(b), which need no bound on ``omega``, give ``L' < G(c, sigma) <= G_eps``:
      for ``L' >= G_eps`` no such arc counts.  So for ``L' >= max(200, G_eps)`` case (1) is the least,
      ``R*(L) >= (L' - 1) sqrt(L'/(32 psi(eps)))``, and ``lim inf R*(L)/(L^{3/2}/(4 sqrt 2)) >=
      psi(eps)^{-1/2}`` for every ``eps``: ``>= 1``.  With the upper bound, ``B_min / (c L^p) ->
      1``.  (The bound ``G_eps`` of case (3), where ``lam`` is of the order of ``L``, comes from
      compactness and is not explicit, so the ``o(1)`` of the lower side has no stated rate; at
      each ``L`` of the sweep's grid :func:`bounds.arc_lower.arc_lower` meets the construction
      within ``1e-4``.)

    *One-sided arc* (linear attention with post-RMSNorm, :func:`foot_distance`).  Its arcs are
    among all arcs and its capacity is the arc's law, so the lower side above holds verbatim:
    ``lim inf B_min / (c L^p) >= 1`` with the same ``c``.  Upper side: at a budget ``B`` with
    ``F(B) = sqrt(d)/B^2 < 1`` the construction (:mod:`constructions.one_sided`) realises the foot
    ``n0 = -1``, every ``lam > 0`` and every read-out ``(C, u)`` with ``|u| <= cap(B)``; there
    ``v_n = (cos theta, sin theta)`` in the basis ``(perp, along)`` with ``tan theta = t =
    (n + 1)/lam``, and ``u = (-b, a)`` reads ``y = C + (a t - b)/sqrt(1 + t^2)``.  Put
    ``X = L + 1``, ``lam^2 = X^3 (1 + 2000/X)/32``, ``tau = X/lam`` (so ``tau^2 < 32/X``; every
    count has ``t`` in ``[0, tau]``), ``h = tau/2``, ``a = lam/(1 + 9h^2/8)``, ``b = 3 a h`` and
    ``C = b - 1 + a h^3/8``.  Then the cubic ``C - b + a t + (b/2) t^2 - (a/2) t^3``
    (``(1 + t^2)^{-1/2}`` to second order) is off the target ``n = lam t - 1`` by ``-(a/2)(h^3/4) T_3((t - h)/h)``, at
    most ``a tau^3/64`` on ``[0, tau]`` (``T_3`` the Chebyshev cubic); and as ``0 <= (1 +
    t^2)^{-1/2} - 1 + t^2/2 <= 3 t^4/8`` for ``0 <= t <= 1`` and ``|a t - b| <= 5 a tau/2``,
    ``y`` is off the cubic by at most ``15 a tau^5/16``.  With ``a < lam`` and ``lam tau^3 =
    X^3/lam^2`` the error is below ``X^3 (1 + 60 tau^2)/(64 lam^2) < (1 + 1920/X)/(2 (1 + 2000/X))
    < 1/2`` (``X >= 32``): the arc counts to ``L`` with ``|u| = sqrt(a^2 + b^2) = lam sqrt(1 +
    9 tau^2/4)/(1 + 9 tau^2/32) <= lam sqrt(1 + 72/X)``, which is ``L^{3/2}/(4 sqrt 2) (1 +
    O(1/L))``.  So ``B_min <= cap^{-1}(|u|)`` once ``cap^{-1}(|u|) > d^{1/4}``, and
    ``B_min / (c L^p) -> 1``: proven for ``B_min``.  (The optimum, the least amplitude over
    ``lam`` with the foot at ``-F(B) -> 0``, is ``L^{3/2}/(4 sqrt 2) (1 + q/L)`` with ``q``
    about 24.8 on the float screen up to ``L = 65536``; the certified rows (bare, ``L = 64 ..
    4096``) have ``B_min / (c L^p) = 1 + q(L)/L`` with ``q(L)`` rising from 23.2 to 24.7.)

    *eps > 0.*  No norm: nothing changes.  Pre-norm with a gain, segment: the constant is
    unchanged.  The lower bound holds for every ``eps`` (:func:`bounds.lower.b_lower`), and
    ``N_eps(e) = s N_0(e)`` with ``s = |e_c| / sqrt(|e_c|^2 + d eps)`` (``e_c`` the centred
    embedding, ``e`` itself for RMSNorm), so the ``eps = 0`` construction at budget ``B0`` with
    embeddings of norm ``B1`` and the gain ``g / s`` counts at ``eps`` with bound ``B1`` once
    ``B1^2 >= B0 sqrt(B1^2 + d eps)``: ``B_min(eps)^2 <= (B0^2 + sqrt(B0^4 + 4 d eps B0^2))/2 =
    B0^2 (1 + O(1/B0^2))``.  The line with a gain keeps a bounded ``B``, so ``eps`` changes its
    constant (between ``c`` and the bound above at ``B0 = c``): not derived (None), nor for bare
    pre-norm or post-norm, where the norm is not scale-invariant and no lower bound is proven.

    *The select task read at s* has the count task's term.  Where the distractor is free
    (:mod:`constructions.tasks`) ``B_min`` is the count task's.  Without a norm
    (:mod:`constructions.select`): ``B_min(count) <= B_min(select)`` (a sub-task), and the
    corner is a limit of counting shapes of the select construction as of the count
    construction (the same interval, a capacity continuous in ``rho``), so ``B_min(select) <=
    sqrt(max(D* (D* + sigma*)/(D* + 2 sigma*), 2 sigma*/3)) <= sqrt(D*) <= (L + 1)/2`` once
    ``2 sigma* <= 3 D*``: the count task's ``c = 1/2``, ``p = 1``, proven for ``B_min``.  Bare
    pre-norm has no rate; a cell without a select construction has no term (None).  Pre-norm
    with a gain: the capacity ``B g_1 (n + sqrt(d)) >= B sqrt(d) sqrt(B^2 - 2 (d-1) sigma/(3d))``
    (RMSNorm; LayerNorm ``B g_1 sqrt(d-1) (alpha + 1)``, :func:`select_gain_parts`) is the count
    task's ``H B^2`` up to a relative
    ``O(sigma/B^2)``, so at the corner (``sigma* = O(log L)``, ``B = Theta(L)``) the budget is
    the count task's upper bound times ``1 + O(log L / L^2)``: the same ``c``, ``p``; with
    RMSNorm and a bias the capacity ``(1 + sqrt(d)) B sqrt(B^2 - sigma)`` (:func:`select_value_gap`)
    has the count task's ``H = 1 + M`` the same way.  Pre-LayerNorm with a bias: the construction
    leaves the bias at 0 and ``H = 1 + M`` is not reached: no term (None).

    Only the read at ``bos`` (None otherwise).
    """
    if cell.readout != "regression" or cell.read.name != "bos":
        return None
    if cell.task.name != "count":
        from constructions.refusals import refusal  # it builds on this module

        if refusal(cell) or (cell.pre and cell.affine.bias and cell.kind.centred
                             and cell.attention == "softmax"):
            return None  # a bias the select construction leaves at 0 (docstring)
        return leading_term(cell.replace(task="count"))
    fam = family(cell)
    if fam == "segment" and (rigid(cell) or on_a_line(cell)):
        return None
    if cell.post and cell.d < smallest_d(cell):
        return None
    if cell.eps > 0 and cell.normed and not (fam == "segment" and cell.pre):
        return None
    import sympy

    from constructions.symbols import d as d_symbol

    def constant(d):
        a, q = _extremal_amplitude()[fam]
        if fam == "segment":
            k, m = value_reach(cell, SYMPY, d)[0], 2
        else:
            k, m = capacity(cell, 1, 1, SYMPY, d), degree(cell)
        return sympy.simplify((a / k) ** sympy.Rational(1, m)), sympy.Rational(q, m)

    general, p = constant(d_symbol)
    value, _ = constant(sympy.Integer(cell.d))
    d_min = next(w for w in (2, 3) if w >= smallest_d(cell)
                 and not (fam == "segment" and on_a_line(cell.replace(d=w))))
    return LeadingTerm(general, value, p, d_min, "B_min")


def leading_term_fields(cell: Cell) -> dict | None:
    """:func:`leading_term` as plain values (None where it is None), without sympy where they are
    generated (:func:`constructions.codegen.cached`): ``exact`` and ``general`` (``str`` of ``c``
    and ``c(d)``) with their ``srepr`` (``srepr``, ``general_srepr``: they evaluate back in
    sympy), ``value`` (``float(c)``), ``exponent`` (``str(p)``) and ``exponent_value``,
    ``d_min``, ``statement``, ``proven``, and ``c`` and ``p`` rounded to 30 digits exactly as
    ``sympy.N(., 30)`` gives them, as binary ``[mantissa, exponent]`` pairs (``constant_30``,
    ``exponent_30``: the number ``mantissa * 2^exponent``)."""
    from constructions import codegen

    return codegen.cached(f"leading_term:{codegen.cell_key(cell)}", lambda: _leading_fields(cell))


def _leading_fields(cell: Cell) -> dict | None:
    term = leading_term(cell)
    if term is None:
        return None
    import sympy

    def binary(v):  # the mpf of sympy.N(v, 30), whose binary value mpmath keeps whole
        sign, man, exp, _ = mpmath.mpf(sympy.N(v, 30))._mpf_
        return [-int(man) if sign else int(man), int(exp)]

    c, p = term.constant, term.exponent
    return {"value": float(c), "exact": str(c), "srepr": sympy.srepr(c), "general": str(term.general),
            "general_srepr": sympy.srepr(term.general), "d_min": term.d_min, "exponent": str(p),
            "exponent_value": float(p), "statement": term.statement, "proven": term.proven,
            "constant_30": binary(c), "exponent_30": binary(p)}


# ---------------------------------------------------------------- the last read (count task)
# Linear attention with pre-norm read at the last position (constructions.tasks): the line
# y(n) = K + k n holds for n >= 1 and y(0) = K + delta is off it by the offset
# delta = <w, e_s - e_a> (values equal, embeddings along one axis with free scales <= B).


def last_offset_reach(cell: Cell, B, k, ops: Ops = SYMPY):
    """``Delta``: the construction's offsets ``delta`` fill ``(-Delta, Delta)`` at budget ``B``
    and slope ``k``.  ``delta = (lam_s - lam_a) <w, top>`` with ``lam_s, lam_a`` in ``(0, B]``:
    with a gain ``w = B e_1`` and ``<e_1, top> = a`` (the kind's axis reach), ``Delta = a B^2``;
    bare, ``w = (k/d) top`` and ``Delta = B k/d``."""
    if rigid(cell):
        return B * k / cell.d
    return cell.kind.axis_reach(cell.d, ops.sqrt) * B**2


def last_slope_floor(cell: Cell, B, L, ops: Ops = SYMPY):
    """The smallest slope ``k <= 1`` for which some ``K`` counts ``n = 1..L`` and some offset of
    reach ``Delta(B, k)`` puts ``y(0)`` within 1/2 of 0: ``L (1 - k) < 1 + Delta``, i.e.
    ``1 - (1 + a B^2)/L`` with a gain and ``(1 - 1/L)/(1 + B/(d L))`` bare (plain arithmetic)."""
    if rigid(cell):
        return (1 - 1 / L) / (1 + B / (cell.d * L))
    return 1 - (1 + cell.kind.axis_reach(cell.d, ops.sqrt) * B**2) / L


def last_offset_budget(cell: Cell, L, ops: Ops = SYMPY):
    """``B_delta``: the budget where the capacity meets :func:`last_slope_floor`,
    ``cap(B) = k_delta(B)``.  With a gain ``c B^4 + (a/L) B^2 = 1 - 1/L`` (``c = cap(1)``), a
    quadratic in ``B^2``; bare ``d B + B^2/L = 1 - 1/L``."""
    d = cell.d
    if rigid(cell):
        return L * (ops.sqrt(d**2 + 4 * (1 - 1 / L) / L) - d) / 2
    c = capacity(cell, None, 1, ops)
    a = cell.kind.axis_reach(d, ops.sqrt)
    return ops.sqrt((ops.sqrt((a / L) ** 2 + 4 * c * (1 - 1 / L)) - a / L) / (2 * c))


def last_gap_weight(cell: Cell) -> int:
    """``k`` of :func:`last_value_gap`: 2 where the values are the two points ``beta +- v``
    (pre-LayerNorm at ``d = 2`` with a bias and ``eps = 0``, where ``N(e) = +-(1, -1)``), else 1."""
    return 2 if cell.pre and cell.affine.bias and cell.kind.image_dim(cell.d) == 1 and cell.eps == 0 else 1


def last_value_gap(cell: Cell, B, sigma, ops: Ops = SYMPY):
    """Softmax attention with pre-norm and a gain read at the last position: the largest
    ``X = |h_s - h_a|`` at budget ``B`` and score gap ``sigma = <h_a, h_s - h_a> = sqrt(d) log rho``
    (the query is ``h_a``), ``(H B + sqrt(H^2 B^2 - 4 k sigma))/2`` with ``k`` of
    :func:`last_gap_weight`.

    *Proof* (``k = 1``).  With ``u = (h_s - h_a)/X``, ``sigma = X <h_a, u> = X (<h_s, u> - X) <=
    X (H B - X)``, so ``X^2 - H B X + sigma <= 0``: ``X <= (H B + sqrt(H^2 B^2 - 4 sigma))/2``
    and ``sigma <= H^2 B^2/4``.  The score gap now *costs* value gap (at the BOS read it buys
    it).  ``X <= 2 V B`` never binds for ``sigma >= 0`` (``H <= 2 V``).

    *Proof* (``k = 2``: LayerNorm at ``d = 2``, where ``N(e) = +-(1, -1)``, ``H = 2``).  The values
    are ``beta +- v`` with ``v = g * (1, -1)``, so ``|v| = |g| <= B``; counting needs ``h_a != h_s``,
    so ``h_a = beta + v'``, ``h_s = beta - v'`` with ``v' = +-v``, ``X = 2 |v|`` and ``sigma = <beta
    + v', -2 v'> = -2 <beta, v'> - 2 |v|^2 <= 2 B |v| - 2 |v|^2 = B X - X^2/2``: ``X^2 - 2 B X + 2
    sigma <= 0``, i.e. ``X <= B + sqrt(B^2 - 2 sigma)`` and ``sigma <= B^2/2``.  Attained by
    ``beta = B e``, ``g = (X/2) e`` for a unit ``e`` (``h_a = (B - X/2) e``, ``h_s = (B + X/2) e``)."""
    H, _ = value_reach(cell, ops)
    return (H * B + ops.sqrt(H**2 * B**2 - 4 * last_gap_weight(cell) * sigma)) / 2


def last_score_gap_max(cell: Cell, B, ops: Ops = SYMPY):
    """The largest score gap ``sigma = <h_a, h_s - h_a>`` seen from ``a`` at budget ``B`` (softmax,
    pre-norm with a gain, the last read): ``H^2 B^2/(4 k)``, where :func:`last_value_gap` has a
    real root (at the BOS read :func:`score_gap_max`, ``2 H V B^2``, is far larger).  Bare pre-norm
    (rigid values, ``eps = 0``): 0, since ``<h_a, h_s> <= |h_a| |h_s| = d = |h_a|^2``."""
    if rigid(cell) and cell.eps == 0:
        return 0 * B
    H, _ = value_reach(cell, ops)
    return (H * B) ** 2 / (4 * last_gap_weight(cell))


def last_pair_reach(cell: Cell, B):
    """Softmax attention without a norm read at the last position (``e = h``): at budget ``B``
    the amplitude ``D = <w, e_a - e_s>`` and minus the score gap ``sigma = <e_a, e_s - e_a>``
    seen from ``a`` are both at most ``2 B^2`` (``D <= |w| |e_a - e_s| <= B 2B``, ``sigma >=
    -|e_a| |e_s - e_a| >= -2 B^2``), both attained by ``e_s = -e_a = B v``, ``w = -B v``
    (plain arithmetic)."""
    return 2 * B**2


def last_capacity(cell: Cell, t, B, ops: Ops = SYMPY):
    """``B X`` at shape ``t = rho >= 1`` (:func:`last_value_gap`): the largest Mobius amplitude
    ``D = <w, h_a - h_s>`` at the last read."""
    return B * last_value_gap(cell, B, ops.sqrt(cell.d) * ops.log(t), ops)


def margin_exponent(cell: Cell) -> float:
    """The exponent ``p`` of the max-min classification margin at unit norm, ``m ~ L^p``
    (:mod:`constructions.classification`, proven upper bounds in :mod:`bounds.margin`).

    * line ``-1``: the margin is exactly ``cap(1, 1)/L``;
    * segment ``-3``: ``m = sup_rho X rho/(L rho^2 + L^2 rho + (L^3 - L)/3)`` with ``rho`` at
      most ``rho_max = exp(score_gap_max/sqrt(d))`` at unit norm, so ``m <= X_max rho_max/(L^3/3)``
      and the construction at ``rho_max`` keeps ``X rho_max/(L rho_max^2 + L^2 rho_max + L^3/3)``:
      both ``~ L^-3`` once ``L >> rho_max``.  Below that (``L`` up to about ``rho_max``) the
      best ``rho`` is near ``L/sqrt(3)`` and the margin falls like ``L^-2``: the asymptotic
      exponent is reached only for ``L`` well beyond the largest attention ratio (``rho_max`` is
      2.03 with no norm at ``d = 8``, but 286 with bare pre-LayerNorm and 917 with a
      learned one);
    * the last read (:mod:`constructions.last_read`, bounds in :mod:`bounds.last_margin`): the
      same, line ``-1`` (``kappa/(L-1)``) and segment ``-3`` (``rho <= 1`` with bare pre-norm,
      ``rho <= exp(H^2/(4 sqrt d))`` otherwise, so ``S(rho) ~ L^3/3``);
    * arc ``-2``: the bound ``R (1 + atan(L/(2 lam)))/(L lam + (L^3/12 - L/3)/lam)`` is at most
      ``(1 + pi/2) R sqrt(3)/L^2 (1 + O(L^-2))`` for every ``lam``, and the symmetric arc with
      ``lam = L/4`` and its head on the circle keeps ``c R/L^2`` (``c`` about 3.5 bare).
    """
    return {"line": -1.0, "segment": -3.0, "arc": -2.0}[family(cell)]


# ---------------------------------------------------------------- the select task, softmax
# Softmax attention without post-norm, the select task read at s (constructions.select): the
# distractor is read as s and weighs what a weighs; without a norm a component of e_s off the
# read-out pays for it in score gap, with bare pre-norm a turn of the read-out in amplitude.


def _select_factor(cell: Cell, sigma, ops: Ops):
    """Bare pre-norm: ``cos phi = sqrt(1 - max(0, sigma/d - 1)^2)``, the share of the value gap
    the turned read-out keeps (``phi = max(0, gamma - pi/2)``, ``cos gamma = 1 - sigma/d``)."""
    m = ops.min(0, 1 - sigma / cell.d)  # -max(0, sigma/d - 1)
    return ops.sqrt(1 - m**2)


def select_value_gap(cell: Cell, B, sigma, ops: Ops = SYMPY):
    """The select construction's value gap along the read-out at budget ``B`` and score gap
    ``sigma`` (softmax attention without post-norm, :mod:`constructions.select`).

    No norm: ``X = <c_1, e_a - e_s> = B + r`` with ``r`` the positive root of
    ``B r^2 + (B^2 + sigma) r - sigma B = 0``, i.e. of ``sigma = r B (B + r)/(B - r)``, written
    without cancellation as ``r = 2 sigma B / (B^2 + sigma + sqrt((B^2 + sigma)^2 + 4 sigma B^2))``.
    The count task's gap solves ``sigma = r (B + r)`` (:func:`value_gap`); the factor
    ``B/(B - r) > 1`` is the price of the component of ``e_s`` that makes the distractor weigh
    what ``a`` weighs: the same ``sigma`` buys a smaller ``r``.  ``r`` increases with ``sigma``
    from 0 and reaches ``B/2`` at ``sigma = 3 B^2/2`` (:func:`select_score_gap_max`).

    Bare pre-norm: ``sqrt(2 sigma) cos phi`` (:func:`_select_factor`), the count task's
    ``|h_a - h_s| = sqrt(2 sigma)`` seen by a read-out turned by ``phi`` (free for ``sigma <= d``).

    Pre-norm with a gain: ``g_1 (n + sqrt(d))`` (RMSNorm), ``g_1 sqrt(d-1) (alpha + 1)``
    (LayerNorm; :func:`select_gain_parts`).  Pre-RMSNorm with a gain and a bias: ``(1 + sqrt(d))
    sqrt(B^2 - sigma)``.  *Proof.*  ``g = g_1 e_1 + sqrt(sigma) q``, ``beta = -g_1 e_1``
    (``g_1^2 = B^2 - sigma``, ``|beta| <= B``), ``N(e_a) = -sqrt(d) e_1``, ``N(e_s), N(e_b) = e_1
    +- sqrt(d-1) q`` give ``h_a = -g_1 (1 + sqrt(d)) e_1`` and ``h_s = -h_b = -sqrt(sigma) q``: the
    score gap is ``sigma``, ``<h_s, h_b - h_a> = -sigma`` (``b`` weighs ``1/rho`` of what ``a``
    weighs) and ``w`` along ``e_1`` reads ``b`` as ``s``, with amplitude up to ``B g_1 (1 +
    sqrt(d))``: the count task's ``H = 1 + sqrt(d)`` at the budget ``sqrt(B^2 - sigma)``."""
    if rigid(cell):
        return ops.sqrt(2 * sigma) * _select_factor(cell, sigma, ops)
    if cell.pre and cell.affine.bias and not cell.kind.centred:
        return (1 + ops.sqrt(cell.d)) * ops.sqrt(B**2 - sigma)
    if cell.pre and cell.affine.gain:
        g1_sq, _, n = select_gain_parts(cell, B, sigma, ops)
        if cell.kind.centred:
            return ops.sqrt(g1_sq) * ops.sqrt(cell.d - 1) * (n + 1)
        return ops.sqrt(g1_sq) * (n + ops.sqrt(cell.d))
    if cell.normed:
        raise ValueError("the select construction of softmax attention is built without a norm "
                         "or with pre-norm")
    s = B**2 + sigma
    return B + 2 * sigma * B / (s + ops.sqrt(s**2 + 4 * sigma * B**2))


def select_gain_parts(cell: Cell, B, sigma, ops: Ops = SYMPY):
    """Pre-norm with a gain (:mod:`constructions.select`): ``(g_1^2, kappa^2, n)``.

    The gain ``g = g_1 e_1 + kappa sqrt(d-1) q`` and ``N(e_s) = n e_1 + m q``, ``N(e_b) = n e_1 -
    m q`` (``m^2 = d - n^2``), ``N(e_a) = -sqrt(d) e_1`` give ``h_s = g_1 n e_1 - kappa m q``,
    ``h_b = g_1 n e_1 + kappa m q``, ``h_a = -g_1 sqrt(d) e_1`` (``q`` has every coordinate
    beyond the first equal to ``-1/sqrt(d-1)``, so ``g * N`` has ``kappa m`` along ``-q``).  So
    ``sigma = g_1^2 n (n + sqrt(d)) + kappa^2 m^2`` and ``<h_s, h_b - h_a> = sigma - 2 kappa^2 m^2``.
    With ``kappa^2 = 2 sigma/(3 d)``, ``g_1^2 = B^2 - (d-1) kappa^2`` (``|g| = B``) and ``n`` the
    positive root of ``(g_1^2 - kappa^2) n^2 + g_1^2 sqrt(d) n - sigma/3 = 0`` (written without
    cancellation), ``n <= sqrt(d)/2`` iff ``sigma <= 3 B^2/2`` (at the end ``g_1^2 = kappa^2 = B^2/d``
    and ``n = sqrt(d)/2``; ``g_1^2 >= B^2/d >= kappa^2`` on the way), and then ``kappa^2 m^2 >=
    (2 sigma/(3d)) (3d/4) = sigma/2``: ``b`` weighs at most what ``a`` weighs.

    Pre-LayerNorm (``d >= 3``): the same gain, ``e_a = -nu c_1`` and ``e_s, e_b = nu (alpha c_1 +-
    beta p)`` (``beta^2 = 1 - alpha^2``); ``c_1`` beyond its first coordinate is ``q/sqrt(d)``, so
    with ``G = g_1 sqrt(d-1)``: ``h_a = -G e_1 + kappa q``, ``h_s, h_b = G alpha e_1 - kappa (alpha
    q +- sqrt(d) beta p)``.  Then ``sigma = K alpha (alpha + 1) + kappa^2 d beta^2`` and ``<h_s,
    h_b - h_a> = K alpha (alpha + 1) - kappa^2 d beta^2`` with ``K = G^2 + kappa^2``; with
    ``kappa^2 = 2 sigma/(3d)``, ``alpha`` (returned as ``n``) is the positive root of ``(K - 2
    sigma/3) alpha^2 + K alpha - sigma/3 = 0``; ``alpha <= 1/2`` iff ``K >= 2 sigma/3`` iff
    ``sigma <= 3 B^2/2``, and then ``kappa^2 d beta^2 >= sigma/2``."""
    d = cell.d
    kappa_sq = 2 * sigma / (3 * d)
    g1_sq = B**2 - (d - 1) * kappa_sq
    if cell.kind.centred:  # n is the cosine alpha of e_s to c_1 (LayerNorm, below)
        K = (d - 1) * g1_sq + kappa_sq
        return g1_sq, kappa_sq, (2 * sigma / 3) / (K + ops.sqrt(K**2 + 4 * (K - 2 * sigma / 3) * sigma / 3))
    n = (2 * sigma / 3) / (g1_sq * ops.sqrt(d) + ops.sqrt(g1_sq**2 * d + 4 * (g1_sq - kappa_sq) * sigma / 3))
    return g1_sq, kappa_sq, n


def select_score_gap_max(cell: Cell, B):
    """The largest score gap of the select construction at budget ``B``: ``3 B^2/2`` without a
    norm (where ``r = B/2`` and ``|e_s| = B``) and with pre-norm and a gain (where ``n =
    sqrt(d)/2``, or ``alpha = 1/2`` for LayerNorm, :func:`select_gain_parts`; ``3 B^2/4`` with
    pre-RMSNorm and a bias, where ``g_1 >= B/2``), ``2 d`` with bare pre-norm (plain arithmetic)."""
    if cell.pre and cell.affine.bias and not cell.kind.centred:
        return 3 * B**2 / 4  # g_1^2 = B^2 - sigma >= B^2/4 (select_value_gap)
    return 2 * cell.d if rigid(cell) else 3 * B**2 / 2


def select_capacity(cell: Cell, t, B, ops: Ops = SYMPY):
    """``B`` times :func:`select_value_gap` at shape ``t = rho``: the largest Mobius amplitude
    ``D = <w, h_a - h_s>`` of the select construction."""
    return B * select_value_gap(cell, B, ops.sqrt(cell.d) * ops.log(t), ops)


def select_budget(cell: Cell, D, sigma, ops: Ops = SYMPY):
    """The smallest ``B`` at which the select construction reaches amplitude ``D`` at score gap
    ``0 < sigma`` (in its domain).

    Bare pre-norm: ``D / (sqrt(2 sigma) cos phi)`` (the capacity is linear in ``B``).  No norm:
    ``B^2 = max(D (D + sigma)/(D + 2 sigma), 2 sigma/3)``.  *Proof.*  The capacity ``B (B + r)``
    increases in ``B`` at fixed ``sigma``, although the root ``r`` need not (it falls like
    ``sigma/B`` as ``B -> oo``): with ``F = B r^2 + (B^2 + sigma) r - sigma B``, ``F_r = 2 B r +
    B^2 + sigma > 0`` and ``F_B = r^2 + 2 B r - sigma``, so ``r' = -F_B/F_r`` and ``F_r (B (B +
    r))' = (2 B + r) F_r - B F_B = 2 B^3 + 3 B^2 r + B r^2 + (3 B + r) sigma > 0``.  At
    ``B (B + r) = D``, ``r = D/B - B``; with ``u = B^2`` the root's equation times
    ``B`` is ``(D - u)^2 + (u + sigma)(D - u) - sigma u = 0``, i.e. ``(D - u)(D + sigma) =
    sigma u``: ``u = D (D + sigma)/(D + 2 sigma)``.  The domain ``sigma <= 3 B^2/2`` adds
    ``u >= 2 sigma/3``."""
    if rigid(cell):
        return D / select_value_gap(cell, None, sigma, ops)
    main = D * (D + sigma) / (D + 2 * sigma)
    return ops.sqrt(-ops.min(-main, -2 * sigma / 3))  # the larger of the two
