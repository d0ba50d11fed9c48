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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import flint
import mpmath
import numpy as np
import sympy

from constructions.cell import Cell


@dataclass(frozen=True)
class Ops:
    """The operations a law needs, for one number type."""

    sqrt: object
    log: object
    min: object


SYMPY = Ops(sympy.sqrt, sympy.log, sympy.Min)
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


def value_reach(cell: Cell, ops: Ops = SYMPY):
    """``(H, V)`` per unit budget: ``|h| <= H B`` and ``|v_x| <= V B`` (module docstring).

    None for rigid values (bare pre-norm) and post-norm cells.
    """
    if cell.post or rigid(cell):
        return None
    if not cell.pre:
        return 1, 1
    M = cell.kind.max_coordinate(cell.d, ops.sqrt)
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


def capacity(cell: Cell, t, B, ops: Ops = SYMPY):
    """``cap(t, B)``: the largest amplitude at shape ``t`` and budget ``B`` (module docstring).

    Segment: ``t = rho``, ``B X(B, sqrt(d) log rho)``; line: ``tau H^3 B``; arc: ``sqrt(d) B``
    or ``sqrt(d) a B^2``.
    """
    d = cell.d
    fam = family(cell)
    if fam == "arc":
        sd = ops.sqrt(d)
        return sd * B if not cell.affine.gain else sd * cell.kind.axis_reach(d, ops.sqrt) * B**2
    if fam == "line":
        if rigid(cell):
            return d * B
        H, _ = value_reach(cell, ops)
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


def foot_distance(cell: Cell, B, ops: Ops = SYMPY):
    """``F(B) = sqrt(d)/B^2``: at budget ``B`` the foot of the residual line lies at a count
    ``n0 < -F(B)`` (linear attention with post-RMSNorm, module docstring); None where the foot is
    free (every other post-norm cell) or there is no arc."""
    if not (cell.post and cell.attention == "linear" and not cell.kind.centred):
        return None
    return ops.sqrt(cell.d) / B**2


def smallest_d(cell: Cell) -> int:
    """The smallest width at which the cell counts beyond ``L = 1``."""
    return 3 if cell.post and cell.kind.centred else 2


def theory_exponent(cell: Cell):
    """The growth exponent of regression ``B_min(L)`` (None: finite ``L*``).

    Segment ``1`` (``rho ~ L^2``, ``D ~ L^2``, ``cap ~ B^2``); line ``0``; arc ``3/2`` (bare,
    ``cap ~ B``) and ``3/4`` (gain, ``cap ~ B^2``) since the arc needs ``R ~ L^{3/2}``.
    """
    fam = family(cell)
    if fam == "line":
        return 0.0
    if fam == "arc":
        return 0.75 if cell.affine.gain else 1.5
    return None if rigid(cell) else 1.0
