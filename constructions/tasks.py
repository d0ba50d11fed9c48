"""Regression constructions for the select task and the last-position read.

The count task at the BOS read is :mod:`constructions.regression`; this module adds, in one
place, what the other tasks and read positions need: which cells have a construction
(:func:`refusal`), the construction (:class:`TaskDesign`, the same interface and the same
exact frame as :class:`constructions.regression.RegressionDesign`), its closed form
(:func:`closed_form`) and the float screen the bisection uses (:meth:`TaskDesign.screen`).

**Select at the BOS read, a free distractor.**  An input ``(s, x_1..x_m)`` with ``n_a`` tokens
``a`` and ``n_b`` tokens ``b`` is read at ``s``.  Where the count construction can be given a
``b`` that changes nothing, the select task costs exactly what the count task costs.  Proof of
``y(n_a, n_b) = y(n_a, 0)`` for every ``n_b``, exactly (``eps = 0`` where a norm is used):

* linear attention without post-norm: ``A = sum_j tau <h_s, h_j> h_j``.  With
  ``<h_s, h_b> = 0`` the ``b`` terms are ``0 * h_b``.  The value of ``s`` lies along the
  construction's first axis (``c_1`` without a norm, ``e_1`` after a gain, ``top`` bare), so:
  no norm: ``e_b = (B/2) one`` (``one`` is orthogonal to ``c_1``); bare pre-norm:
  ``e_b = nu across`` (:func:`constructions.regression.axes`), ``h_b = sqrt(d) across``, orthogonal
  to ``h_s = sqrt(d) top``; a gain ``g = B e_1`` (and a bias ``beta = B e_1``): ``h_b`` is
  ``B N(e_b)_1 e_1`` (``+ B e_1``), zero when ``N(e_b)_1 = 0`` (``e_b = nu across``, first
  coordinate 0) or ``N(e_b)_1 = -1`` (with the bias: ``e_b = nu(alpha top + sqrt(1 - alpha^2)
  across)``, ``alpha = -1/M``, whose norm has first coordinate ``alpha M = -1``).  Then
  ``h_b = 0``: no score and no value.
* linear attention with post-LayerNorm: ``r = (1 + tau|e_s|^2) e_s + n_a tau <e_s,e_a> e_a +
  n_b tau <e_s,e_b> e_b``; the construction has ``e_s = xi v + eta one`` with ``v = lam across -
  (L/2) top``, so ``e_b = nu u/|v|`` with ``u = (L/2) across + lam top`` (centred, orthogonal to
  ``v`` and ``one``) has ``<e_s, e_b> = 0``.
* linear attention with post-RMSNorm (the one-sided arc, :class:`FootSelectDesign`): the
  residual has the same form, and RMSNorm does not centre, so ``e_b`` orthogonal to ``e_s``
  removes the ``b`` term exactly, ``r(n_a, n_b) = r(n_a, 0)``.  The construction has ``e_s = nu
  (F along + lam perp)/sqrt(F^2 + lam^2)`` in the plane of ``along, perp``
  (:func:`constructions.regression._foot_steps`), and ``e_b = nu (lam along - F perp)/sqrt(F^2 +
  lam^2)`` is its quarter turn in that plane (every ``d >= 2``; ``|e_b| = |e_s| <= B``).
* softmax attention with post-norm (either kind): with the weights ``w_x = exp(tau <e_s, e_x>)``
  and ``Z = w_s + n_a w_a + n_b w_b``, ``Z r = 2 w_s e_s + n_a w_a (e_s + e_a) + n_b w_b (e_s + e_b)``;
  ``e_b = -e_s`` removes the last term, and the norm is invariant under the positive factor
  ``1/Z``: ``z`` is that of the count task.  (This costs nothing: ``|e_b| = |e_s|``.)  With
  ``eps > 0`` the norm is not scale-invariant: ``r(n_a, n_b) = r(n_a, 0) Z(n_a, 0)/Z(n_a, n_b)``
  moves radially: ``N(lambda v) = lambda v_c/sqrt(lambda^2 |v_c|^2/d + eps)`` (``v_c`` the
  centred part; RMSNorm ``v`` itself), near ``N(v)`` only while ``lambda^2 |v_c|^2 >> d eps``.
  The construction is the same, but nothing makes the count inputs decide: the screen judges
  every select input (:func:`screen_cell`), the judge certifies every row, and where the
  count task's construction counts at ``eps > 0`` the select rows follow it at a price.

Conversely the count task is a sub-task of select (the inputs with ``n_b = 0``), so
``B_min(select) >= B_min(count)``: in these cells the two are equal, and so are the lower
bounds, the closed forms and the rates.  A classification head reads the same outputs ``z``,
so the head of :mod:`constructions.classification` on this geometry (its ``e_b`` included)
keeps the count task's margin on every select input (softmax attention without post-norm, where
``b`` moves ``z``: the pencil head of :mod:`constructions.pencil`).  Not free: softmax
attention without post-norm (no score can make ``exp`` vanish, so the ``b`` tokens always move
the Mobius point; suppressing them costs score range or budget, :mod:`constructions.select`).
Not built: linear attention with bare pre-LayerNorm or pre-LayerNorm with a gain and no bias
at ``d = 2``, where nothing solves the select task for ``L >= 1``: every value is ``+- v``, so each ``b`` token adds
``tau <h_s, h_b> h_b = tau |v|^2 h_s`` to the attention exactly as each ``a`` token does, and the
inputs ``(s, a)`` and ``(s, b)`` (targets 1 and 0) have one output.

**Count at the last read, linear attention with pre-norm.**  The input ``(s, a^n)`` is read at
the last ``a`` for ``n >= 1`` (query ``h_a``: scores ``tau <h_a, h_s>``, ``tau |h_a|^2``;
residual ``e_a + A``) and at ``s`` for ``n = 0`` (residual ``e_s + h_s`` scaled, ``A = tau
|h_s|^2 h_s``).  So ``y(n) = K + k n`` for ``n >= 1`` with ``k = tau |h_a|^2 <w, h_a>`` and
``y(0) = K + delta``, ``delta = <w, e_s - e_a> + tau <w, h_s> (|h_s|^2 - <h_a, h_s>)``.
``|k| <= tau |h_a|^3 |w|``: the line capacity of :mod:`constructions.laws` (the BOS read has
``<h_s, h_a>`` in place of ``|h_a|^2``, the same bound).  Counting ``n = 1..L`` needs
``(L-1)|k - 1| < 1`` and ``K`` in ``(max_n n(1-k) - 1/2, min_n n(1-k) + 1/2)`` (``n = 1..L``),
and ``n = 0`` needs ``|K + delta| < 1/2``: for ``k <= 1`` that is possible iff
``L (1 - k) < 1 + |delta|`` with ``delta < 0``.  The point ``n = 0`` is off the line, so
the line need only hold ``n = 1..L``: the slope may drop to ``1 - 1/(L-1)`` where the BOS read
needs ``1 - 1/L``, provided the offset reaches ``delta ~ -1/(L-1)``.

*Construction.*  Every value equal, ``h_s = h_a = h`` along the first axis, embeddings along
``top`` with free positive scales ``lam_s, lam_a <= B``, so ``delta = (lam_s - lam_a) <w, top>``
reaches ``(-Delta, Delta)`` with ``Delta = B <w, top>``
(:func:`constructions.laws.last_offset_reach`).  With a gain the read-out takes the whole budget,
``w = B e_1`` (``<w, top> = a B``, ``a`` the kind's axis reach), and the gain ``g = gam e_1``
(``beta = gam e_1``) sets the slope ``k = tau (gam H_1)^3 B``; bare, ``h = sqrt(d) top`` and
``w = (k/d) top``.  Then ``k`` is the middle of ``(max(lo, k_delta(B)), min(1, cap(B)))`` with
``lo = 1 - 1/(L-1)`` and ``k_delta`` the smallest slope the offset reach allows
(:func:`constructions.laws.last_slope_floor`), ``K`` the middle of its interval within
``(-1/2 - Delta, 1/2 + Delta)``, ``delta`` the middle of ``(-1/2 - K, 1/2 - K)`` within
``(-Delta, Delta)``.  So at budget ``B`` it counts iff ``min(1, cap(B)) > max(lo, k_delta(B))``;
both sides are monotone in ``B`` and its ``B_min`` is ``max(cap^{-1}(lo), B_delta)``, ``B_delta``
solving ``cap(B) = k_delta(B)`` (a quadratic in ``B^2`` with a gain, in ``B`` bare;
:func:`closed_form`).  The lower bound ``cap^{-1}(1 - 1/(L-1))`` (:func:`bounds.lower.b_lower`)
meets it wherever the offset does not bind (``a B^2 >= 1/(L-1)`` with a gain; bare
``B k/d >= 1/(L-1)``); below, the construction's ``B_min`` is an upper bound only.

**Count at the last read, softmax attention with pre-norm and a gain.**  For ``n >= 1``
``A(n) = h_s + phi(n) (h_a - h_s)``, ``phi(n) = n/(rho+n)``, ``rho = exp(tau <h_a, h_s - h_a>)``
(the query is ``h_a``), so ``y(n) = K + D phi(n)`` with ``D = <w, h_a - h_s>``, and
``y(0) = K + delta``, ``delta = <w, e_s - e_a>``.  With ``m = n - 1`` and ``rho' = rho + 1``,
``D phi(n) = D/rho' + (D rho/rho') m/(rho'+m)``: the counts ``1..L`` are the BOS segment of
``L - 1`` at ``rho'`` (:meth:`TaskDesign.interval`).  The score gap seen from ``a``,
``sigma = <h_a, h_s - h_a> = X (<h_s, u> - X)`` (``u`` the unit vector of ``h_s - h_a``), now
costs value gap: ``X <= (H B + sqrt(H^2 B^2 - 4 sigma))/2`` (:func:`constructions.laws.last_value_gap`;
at the BOS read ``+ 4 sigma``), and ``D <= B X``.  Since ``sigma ~ log L`` is small against
``H^2 B^2 ~ L^2`` the rate is the BOS read's (1), the shift to ``L - 1`` makes it cheaper by a
relative ``~1/L``, and the sign of ``sigma`` costs a relative ``O(log L/L^2)``.

*Geometry.*  ``g = B e_1`` (``beta = B e_1``), so ``h = (B N(e)_1 [+ B]) e_1``; ``e_s`` along
``top`` gives the largest value ``h_s = H B e_1``; ``e_a`` at cosine ``alpha = 1 - X/(M B)`` to
``top`` gives ``h_a = (H B - X) e_1`` (``|alpha| <= 1`` as ``X <= H B <= 2 M B``), so
``sigma = (H B - X) X`` and ``X`` is the law's; ``w = -(D/X) e_1``.  The offset uses what the
norm ignores: LayerNorm removes ``one``, so ``e_s = nu top + mu one`` with ``|mu| <= sqrt(B^2 -
nu^2)`` moves ``delta`` by ``-(D/X) mu/sqrt(d)`` (:func:`last_offsets`); RMSNorm removes the
scale, so ``e_a = B(alpha top + ...)`` and ``e_s = lam_s top``, ``lam_s`` in ``(0, B]``
(``alpha >= 0`` there without a bias).  With a bias ``alpha < 0`` near the optimum, where
``lam_s`` alone reaches only offsets far below 0: the read-out's part ``om across`` and a
common scale ``kappa`` of ``e_s, e_a`` (which RMSNorm ignores) reach the rest
(:func:`last_offsets`; ``e_s = kappa B (1 - f)/2 top``, ``om = -f W``, ``f`` in ``(-1, 1)``).  The
shape ``rho`` is the one of largest slack, ``D`` the middle amplitude, ``K`` the middle of the
constants that count ``n = 1..L`` and leave ``y(0)`` within reach.  The lower bound
(:func:`bounds.lower.last_segment_lower`) is the branch and bound of the BOS read on the
shifted problem with this capacity; it ignores ``n = 0``, so at the smallest ``L``, where the
offset binds, ``B_min`` is the construction's only.

Softmax attention without a norm at the last read counts to ``L* = 2`` only
(:class:`constructions.last_read.PairDesign`; ``e = h``, so ``y(0) = K - D`` and ``y(n) = K +
D phi(n)``, ``phi(n) = n/(rho+n)``, ``D = <w, h_a - h_s>``: counting needs ``D (1 + phi(1)) =
y(1) - y(0) < 2`` and ``D (phi(L) - phi(1)) = y(L) - y(1) > L - 2``, impossible for ``L >= 4``
since ``phi(L) - phi(1) < 1 + phi(1)``, and for ``L = 3`` since ``(phi(3) - phi(1))/(1 + phi(1))
= 2 rho/((rho+2)(rho+3)) < 1/2``: nothing counts beyond ``L = 2``).  Bare pre-norm with
softmax (``<h_a, h_s> <= d = |h_a|^2``, so ``rho <= 1``, ``rho' <= 2``, and the BOS segment of
``L - 1 = 4`` at ``rho' = 2`` has ``D_lo = D_hi = 6``: nothing counts beyond ``L = 4``, and
``L* = 4`` exactly, :func:`bounds.lstar.last_l_star`) is
:class:`constructions.last_read.BareDesign` (``eps = 0``, either kind, every ``d``; with
``eps > 0`` only its ``L*``, :func:`bounds.lstar.last_l_star_eps`), linear attention without a
norm :class:`constructions.last_read.LineDesign`.  Not built at the last read: learned
pre-LayerNorm at ``d = 2`` (no ``across``), ``eps > 0`` (the offset uses the exact invariances
of the norm), and the select task.  Post-norm at the last read (softmax, and linear attention
with LayerNorm) is :mod:`constructions.last_post` (the arc of ``L - 1``, the count 0 on it).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import sympy

from constructions import laws, segment, zoom
from constructions.cell import Cell, Params
from constructions.closed_forms import closed_form as count_closed_form
from constructions.refusals import refusal
from constructions.regression import (FootDesign, RegressionDesign, Step, _check_budget, _check_count,
                                      _vec, axes)
from constructions.regression import design as count_design
from constructions.regression import _embedding_scale
from constructions.symbols import (BETA, E1, E_A, E_S, G, H_A, H_S, ONE, W, W0, A, B, C, F, L, X,
                                   V_norm, alpha, inner, nu, psi, sigma, t, tau)

#: the embedding of the distractor, and the quantities of the last-read construction
E_B = sympy.Symbol("e_b")
delta, Delta = sympy.Symbol("delta", real=True), sympy.Symbol("Delta", positive=True)
lam_s, lam_a = sympy.symbols("lambda_s lambda_a", positive=True)
#: the read-out's part along ``across`` (pre-RMSNorm with a bias at the last read)
om_w = sympy.Symbol("omega_w", real=True)
gam = sympy.Symbol("gamma_g", positive=True)
delta_c, r_off = sympy.Symbol("delta_c", real=True), sympy.Symbol("r_delta", positive=True)
mu_one = sympy.Symbol("mu_s", real=True)
#: where no offset puts y(0) in place (a budget below B_min) the offset is kept this far inside
#: its reach, so that every embedding stays non-zero (the construction then simply fails)
SHRINK = 1 - sympy.Rational(1, 2**20)


def last_offsets(cell: Cell, B, D, X, alpha, ops=laws.SYMPY):
    """``(delta_c, r)``: the offsets ``delta = <w, e_s - e_a>`` of the softmax last-read
    construction fill ``(delta_c - r, delta_c + r)`` (module docstring), with ``w = -(D/X) e_1``.

    LayerNorm: ``e_s = nu top + mu one``, ``e_a = nu (alpha top + sqrt(1 - alpha^2) across)``,
    ``|mu| <= sqrt(B^2 - nu^2)``: ``delta = -(D/X)(nu a (1 - alpha) + mu/sqrt(d))``.  RMSNorm
    (``alpha >= 0``): ``e_a = B (alpha top + ...)``, ``e_s = lam_s top`` with ``lam_s`` in
    ``(0, B]``: ``delta = -(D/X)(lam_s - alpha B)``.  RMSNorm with a bias (``alpha`` may be
    negative, where ``lam_s`` alone reaches only ``delta < 0``): ``w = -(D/X) e_1 + om across``
    as well, ``|om| <= W = sqrt(B^2 - D^2/X^2)`` (so ``|w| <= B``; every value is along ``e_1``,
    so ``om`` leaves ``D`` alone), which adds ``-om B sqrt(1 - alpha^2)``: the half-width grows
    by ``W B sqrt(1 - alpha^2)`` (:func:`last_offset_base`).  RMSNorm ignores a common factor
    ``kappa`` in ``(0, 1]`` of ``e_s, e_a``, which multiplies ``delta``: where that reach
    ``(lo, hi)`` has ``hi < 0``, the offsets fill ``(lo, 0)``, so the reach is ``(lo, max(hi, 0))``."""
    d = cell.d
    if cell.kind.centred:
        scale = ops.min(B, 1) / 2 if cell.eps == 0 else B / 2  # nu (regression._embedding_scale)
        a = cell.kind.axis_reach(d, ops.sqrt)
        return -(D / X) * scale * a * (1 - alpha), (D / X) * ops.sqrt(B**2 - scale**2) / ops.sqrt(d)
    dc, r = last_offset_base(cell, B, D, X, alpha, ops)
    if not cell.affine.bias:
        return dc, r
    hi = -ops.min(0, -(dc + r))  # max(dc + r, 0): the common factor kappa
    return (dc - r + hi) / 2, (hi - dc + r) / 2


def last_cosine(cell: Cell, B, X, sqrt=sympy.sqrt):
    """``alpha``, the cosine between ``e_a`` and ``top`` in the softmax last-read geometry (module
    docstring) at value gap ``X``: ``1 - X/(M B)``, which puts ``h_a`` at ``(H B - X) e_1``; ``-1``
    for the two values ``beta +- g * (1, -1)`` of LayerNorm at ``d = 2`` with a bias, where the
    gain's length sets ``X`` instead (``g = (X/2) e_1``, :func:`constructions.laws.last_value_gap`)."""
    if laws.last_gap_weight(cell) == 2:
        return -1 + 0 * X
    return 1 - X / (cell.kind.max_coordinate(cell.d, sqrt) * B)


def last_offset_base(cell: Cell, B, D, X, alpha, ops=laws.SYMPY):
    """``(delta_c, r)`` of pre-RMSNorm at ``kappa = 1`` (:func:`last_offsets`): ``-(D/X)(1 -
    2 alpha) B/2`` and ``(D/X) B/2``, plus ``W B sqrt(1 - alpha^2)`` with a bias, ``W =
    sqrt(max(0, B^2 - D^2/X^2))``."""
    r = (D / X) * B / 2
    if cell.affine.bias:
        r = r + ops.sqrt(-ops.min(0, (D / X) ** 2 - B**2)) * B * ops.sqrt(-ops.min(0, alpha**2 - 1))
    return -(D / X) * (1 - 2 * alpha) * B / 2, r


def screen_cell(cell: Cell) -> Cell:
    """The cell whose inputs the float screen judges: the count task where the distractor
    provably changes nothing (module docstring), else the cell itself (the last read, and
    softmax attention after post-norm with ``eps > 0``, where ``b`` changes the scale the norm
    sees)."""
    free = cell.distractor and not cell.read.last and not (cell.post and cell.attention == "softmax"
                                                            and cell.eps > 0)
    return cell.replace(task="count") if free else cell


def _distractor_step(cell: Cell) -> Step:
    """``e_b`` of the select task at the BOS read (module docstring)."""
    if cell.post:
        if cell.attention == "softmax":
            return _vec(E_B, -E_S, "the embedding of b, -e_s: its part of the residual vanishes", "e_b")
        top, across = axes(cell)
        if laws.foot_distance(cell, 1) is not None:  # the one-sided arc (regression._foot_steps)
            along = sympy.sin(psi) * top + sympy.cos(psi) * across
            perp = sympy.cos(psi) * top - sympy.sin(psi) * across
            return _vec(E_B, nu * (t * along - F * perp) / sympy.sqrt(F**2 + t**2),
                        "the embedding of b, e_s turned by a quarter in its plane: it scores 0", "e_b")
        return _vec(E_B, (nu / V_norm) * ((L / 2) * across + t * top),
                    "the embedding of b, orthogonal to e_s: it scores 0", "e_b")
    if not cell.pre:
        return _vec(E_B, (B / 2) * ONE, "the embedding of b, orthogonal to e_s: it scores 0", "e_b")
    top, across = axes(cell)
    if cell.affine.bias:
        alpha = -1 / cell.kind.max_coordinate(cell.d)
        return _vec(E_B, nu * (alpha * top + sympy.sqrt(1 - alpha**2) * across),
                    "the embedding of b, whose norm has first coordinate -1: h_b = 0", "e_b")
    meaning = ("the embedding of b, its norm orthogonal to h_s: it scores 0" if laws.rigid(cell)
               else "the embedding of b, whose norm has first coordinate 0: h_b = 0")
    return _vec(E_B, nu * across, meaning, "e_b")


def offset_steps(dc, rr) -> list[Step]:
    """The offset ``delta = y(0) - K`` of a last-read construction whose read-out reaches the
    offsets ``dc +- rr``: the middle of those within 1/2 of 0 (``y(0)`` counts 0), kept inside
    ``dc +- SHRINK rr``."""
    half = sympy.Rational(1, 2)
    return [Step(delta_c, dc, "the middle of the reachable offsets y(0) - K"),
            Step(r_off, rr, "their half-width"),
            Step(delta, sympy.Min(sympy.Max((sympy.Max(-half - C, delta_c - r_off)
                                             + sympy.Min(half - C, delta_c + r_off)) / 2,
                                            delta_c - SHRINK * r_off), delta_c + SHRINK * r_off),
                 "the offset y(0) - K: y(0) within 1/2 of 0 (kept inside the reach)")]


def _last_segment_steps(cell: Cell) -> list[Step]:
    """The count task at the last read, softmax attention with pre-norm and a gain (module
    docstring): values on ``e_1``, ``h_s = H B e_1`` and ``h_a = (H B - X) e_1`` (the two values of
    LayerNorm at ``d = 2``: ``h_s = (B + X/2) e_1``, ``h_a = (B - X/2) e_1``)."""
    d = cell.d
    top, across = axes(cell)
    name = cell.kind.name
    H_unit, _ = laws.value_reach(cell)
    two = laws.last_gap_weight(cell) == 2  # the two values beta +- g * (1, -1): LayerNorm, d = 2
    out = [Step(sigma, sympy.sqrt(d) * sympy.log(t),
                "the score gap seen from a, <h_a, h_s - h_a> = sqrt(d) log rho"),
           _embedding_scale(cell),
           Step(X, laws.last_value_gap(cell, B, sigma), "the distance between h_s and h_a: the largest at budget B"),
           Step(alpha, last_cosine(cell, B, X), f"the cosine between e_a and {top}"),
           _vec(G, (X / 2 if two else B) * E1, f"the {name} gain", "g")]
    if cell.affine.bias:
        out.append(_vec(BETA, B * E1, f"the {name} bias", "beta"))
    dc, rr = last_offsets(cell, B, A, X, alpha, laws.SYMPY)
    off_axis = cell.affine.bias and not cell.kind.centred  # the read-out's part along across
    h_s = B + X / 2 if two else H_unit * B  # two values: beta +- g * N(e_s), N(e_s) = (1, -1)
    out += [_vec(H_S, h_s * E1, "the value of s, the largest", "_h_s"),
            _vec(H_A, (h_s - X) * E1, "the value of a", "_h_a")]
    if not off_axis:
        out.append(_vec(W, -(A / X) * E1, "the read-out, along h_a - h_s", "w"))
    out += [
            *offset_steps(dc, rr)]
    if cell.kind.centred:
        a = cell.kind.axis_reach(d)
        out += [Step(mu_one, -sympy.sqrt(d) * (delta * X / A + nu * a * (1 - alpha)),
                     "the part of e_s along one, which LayerNorm removes: it sets the offset"),
                _vec(E_S, nu * top + mu_one * ONE, "the embedding of s", "e_s"),
                _vec(E_A, nu * (alpha * top + sympy.sqrt(1 - alpha**2) * across), "the embedding of a", "e_a")]
    elif off_axis:
        frac, kappa, dc1, r1 = sympy.symbols("f_delta kappa_e delta_1 r_1", real=True)
        base_c, base_r = last_offset_base(cell, B, A, X, alpha, laws.SYMPY)
        out += [Step(dc1, base_c, "the middle of the offsets at kappa = 1"),
                Step(r1, base_r, "their half-width"),
                Step(frac, sympy.Min(SHRINK, (delta - dc1) / r1), "where the offset lies in that reach"),
                Step(kappa, sympy.Min(1, sympy.Max(delta, dc1 + SHRINK * r1) / (dc1 + SHRINK * r1)),
                     "the common scale of e_s and e_a (below 1 only past the reach at kappa = 1)"),
                Step(lam_s, kappa * B * (1 - frac) / 2, "the norm of e_s: its share of the offset"),
                Step(om_w, -frac * sympy.sqrt(sympy.Max(0, B**2 - A**2 / X**2)),
                     "the read-out along across: its share of the offset"),
                _vec(W, -(A / X) * E1 + om_w * across, "the read-out, along h_a - h_s and across", "w"),
                _vec(E_S, lam_s * top, "the embedding of s", "e_s"),
                _vec(E_A, kappa * B * (alpha * top + sympy.sqrt(1 - alpha**2) * across), "the embedding of a", "e_a")]
    else:
        out += [Step(lam_s, alpha * B - delta * X / A, "the norm of e_s: it sets the offset"),
                _vec(E_S, lam_s * top, "the embedding of s", "e_s"),
                _vec(E_A, B * (alpha * top + sympy.sqrt(1 - alpha**2) * across), "the embedding of a", "e_a")]
    # y(n) = <w, e_a> + <w, h_s> + D n/(rho+n) + w0 for n >= 1
    out.append(Step(W0, C - inner(W, E_A) - inner(W, H_S),
                    "the read-out bias, so that y(n) = K + D n/(rho+n) for n >= 1", "w0"))
    return out


def _last_line_steps(cell: Cell) -> list[Step]:
    """The count task at the last read, linear attention with pre-norm (module docstring)."""
    d = cell.d
    top, _ = axes(cell)
    a = cell.kind.axis_reach(d)
    name = cell.kind.name
    out = [Step(tau, cell.tau, "the score temperature, 1/sqrt(d)")]
    if laws.rigid(cell):
        out += [_vec(W, (A / d) * top, "the read-out", "w"),
                _vec(H_S, sympy.sqrt(d) * top, f"the value of s, its {name}", "_h_s")]
        scale = A / d  # <w, top>
    else:
        H_unit, _ = laws.value_reach(cell)
        out += [Step(gam, (A / (tau * B)) ** sympy.Rational(1, 3) / H_unit,
                     "the gain, which sets the slope tau |h|^3 B"),
                _vec(W, B * E1, "the read-out, the whole budget", "w"),
                _vec(G, gam * E1, f"the {name} gain", "g")]
        if cell.affine.bias:
            out.append(_vec(BETA, gam * E1, f"the {name} bias", "beta"))
        out.append(_vec(H_S, gam * H_unit * E1, "the value of s, g N(e_s)"
                        + (" + beta" if cell.affine.bias else ""), "_h_s"))
        scale = a * B  # <w, top>
    out += [
        Step(Delta, laws.last_offset_reach(cell, B, A), "the reach of the offset y(0) - K"),
        Step(delta, (sympy.Max(-sympy.Rational(1, 2) - C, -Delta) + sympy.Min(sympy.Rational(1, 2) - C, Delta)) / 2,
             "the offset y(0) - K: y(0) = K + delta within 1/2 of 0"),
        Step(lam_s, B + sympy.Min(delta, 0) / scale, "the norm of e_s"),
        Step(lam_a, B - sympy.Max(delta, 0) / scale, "the norm of e_a"),
        _vec(E_S, lam_s * top, "the embedding of s", "e_s"),
        _vec(E_A, lam_a * top, "the embedding of a, along e_s", "e_a"),
        _vec(H_A, H_S, "the value of a, equal to h_s", "_h_a"),
        # y(n) = <w, e_a> + tau |h|^2 <w, h> (n + 1) + w0 for n >= 1
        Step(W0, C - inner(W, E_A) - tau * inner(H_S, H_S) * inner(W, H_S),
             "the read-out bias, so that y(n) = K + k n for n >= 1", "w0"),
    ]
    return out


def last_line_interval(L_value):
    """The slopes ``k`` with ``(L-1)|k - 1| < 1`` that count ``n = 1..L`` (any ``k > 0`` at
    ``L = 1``); works on mpf, floats, Fractions."""
    if L_value <= 1:
        return 0 * L_value, math.inf
    return 1 - 1 / (L_value - 1), 1 + 1 / (L_value - 1)


def last_line_constant(L_value, k, reach):
    """``K``: the middle of ``(max_n n(1-k) - 1/2, min_n n(1-k) + 1/2)`` (``n = 1..L``) within
    ``(-1/2 - reach, 1/2 + reach)``."""
    half = mpmath.mpf(1) / 2
    ends = (1 - k, L_value * (1 - k))
    lo, hi = max(max(ends) - half, -half - reach), min(min(ends) + half, half + reach)
    return (lo + hi) / 2


class TaskDesign(RegressionDesign):
    """The regression construction of a cell with the select task or the last read (module
    docstring); the interface of :class:`~constructions.regression.RegressionDesign`."""

    def __init__(self, cell: Cell):
        if cell.readout != "regression":
            raise ValueError("TaskDesign is for regression cells")
        reason = refusal(cell)
        if reason is not None:
            raise ValueError(f"{cell.describe()}: {reason}")
        super().__init__(cell)
        self.last = cell.read.last
        if self.last and self.family == "segment":
            self.capacity_expr = laws.last_capacity(cell, t, B)
            self._cap = sympy.lambdify((t, B), self.capacity_expr, "numpy")
            self.capacity_mp = sympy.lambdify((t, B), self.capacity_expr, "mpmath")

    def steps(self) -> list[Step]:
        if self.last:
            return (_last_segment_steps if self.family == "segment" else _last_line_steps)(self.cell)
        return super().steps() + [_distractor_step(self.cell)]

    def screen(self, L_value: int, B_value):
        """The parameters the float screen judges (:func:`screen_cell`): the count construction
        where the distractor changes nothing, at ``L + 1`` inputs instead of ``(L+1)(L+2)/2``."""
        base = screen_cell(self.cell)
        if base == self.cell:
            return self.build(L_value, B_value)
        return count_design(base).build(L_value, B_value)

    # ------------------------------------------------- the last read, softmax: the shifted segment
    def domain(self, L_value: int, B_value: float):
        """The last read, softmax: ``rho >= 1`` with ``sigma = sqrt(d) log rho <= H^2 B^2/4``
        (:func:`constructions.laws.last_score_gap_max`), and not beyond ``1e4 (L+2)^2``."""
        if not (self.last and self.family == "segment"):
            return super().domain(L_value, B_value)
        sigma_max = laws.last_score_gap_max(self.cell, B_value, laws.FLOAT)
        log_hi = min(sigma_max / math.sqrt(self.cell.d), math.log(1e4 * (L_value + 2) ** 2))
        return (1.0, math.exp(log_hi))

    def interval(self, t_value, L_value: int):
        """The last read, softmax: the amplitudes ``D`` counting ``n = 1..L``.  With ``m = n - 1``
        and ``rho' = rho + 1``, ``D n/(rho+n) = D/rho' + (D rho/rho') m/(rho'+m)``: the BOS segment
        of ``L - 1`` at ``rho'`` and amplitude ``D rho/rho'``, so ``(lo, hi)`` is its interval
        times ``rho'/rho`` (``(0, inf)`` at ``L = 1``)."""
        if not (self.last and self.family == "segment"):
            return super().interval(t_value, L_value)
        if L_value == 1:
            return mpmath.mpf(0), mpmath.inf
        r = mpmath.mpf(t_value)
        lo, hi = segment.interval(r + 1, L_value - 1)
        return lo * (r + 1) / r, hi * (r + 1) / r

    def interval_float(self, t_value, L_value: int):
        if not self.last:
            return super().interval_float(t_value, L_value)
        if self.family != "segment":
            raise NotImplementedError("the last read of the line is screened by TaskDesign.estimate")
        r = np.asarray(t_value, dtype=np.float64)
        if L_value == 1:
            return np.zeros(r.shape), np.full(r.shape, np.inf)
        lo, hi = segment.interval_float(r + 1, L_value - 1)
        return lo * (r + 1) / r, hi * (r + 1) / r

    # ------------------------------------------------- the last read, linear: slope and offset
    def _last_slope(self, L_value, B_value, ops):
        """``(k, top, floor)``: the middle slope of ``(floor, top)``, ``top = min(1, cap(B))``."""
        lo, _ = last_line_interval(L_value)
        top = min(1, laws.capacity(self.cell, None, B_value, ops))
        floor = max(lo, laws.last_slope_floor(self.cell, B_value, L_value, ops))
        return (floor + top) / 2, top, floor

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        if not self.last:
            return super().estimate(L_value, hi_B, rtol)
        if self.family == "segment":
            # the reduced problem, then up to where the offset is within reach as well
            est = super().estimate(L_value, hi_B, rtol)
            if est is None or self._offset_ok(L_value, est):
                return est
            return zoom.threshold(lambda b: self._offset_ok(L_value, b), est, est * 2, hi_B, rtol)

        def feasible(b):
            _, top, floor = self._last_slope(L_value, b, laws.FLOAT)
            return top > floor

        if not feasible(hi_B):
            return None
        return zoom.bisect_up(feasible, 1e-12, hi_B, rtol)[1]

    def best_shape(self, L_value: int, B_value: float):
        if not self.last or self.family == "segment":
            return super().best_shape(L_value, B_value)
        _, top, floor = self._last_slope(L_value, B_value, laws.FLOAT)
        return None, (top - floor) / floor if floor > 0 else (math.inf if top > 0 else -math.inf)

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        if not self.last:
            return super().build(L_value, B_value, dps)
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            if self.family == "segment":
                tv, Av, Kv = self._last_segment_point(L_value, Bv)
            else:
                tv = mpmath.mpf(1)
                Av, _, _ = self._last_slope(mpmath.mpf(L_value), Bv, laws.MPMATH)
                Kv = last_line_constant(L_value, Av, laws.last_offset_reach(self.cell, Bv, Av, laws.MPMATH))
            out = self.evaluate(L_value, Bv, tv, Av, Kv)
            vectors = {n: v for n, v in out.items() if n != "w0" and not n.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})

    def _offset_ok(self, L_value: int, B_value: float) -> bool:
        """Whether the constants ``K`` of :meth:`_last_segment_point` form a non-empty interval
        (a float screen at 20 digits)."""
        with mpmath.workdps(20):
            return self._last_segment_point(L_value, mpmath.mpf(B_value), interval=True) is not None

    def _last_segment_point(self, L_value: int, Bv, interval: bool = False):
        """``(rho, D, K)`` of the softmax last-read construction at budget ``B`` (mpmath): the
        best shape, the middle amplitude, and ``K`` the middle of the constants counting
        ``n = 1..L`` (``|K + g(n)| < 1/2``, ``g(n) = D n/(rho+n) - n`` concave: its minimum at
        ``n = 1`` or ``L``, its maximum near ``sqrt(D rho) - rho``) within reach of the offset."""
        t_value, _ = self.best_shape(L_value, float(Bv))
        r = mpmath.mpf(t_value)
        lo, hi = self.interval(r, L_value)
        Dv = (lo + min(hi, self.capacity_mp(r, Bv))) / 2

        def g(n):
            return Dv * n / (r + n) - n

        peak = float(mpmath.sqrt(Dv * r) - r)
        g_max = max(g(n) for n in {1, L_value, *segment.candidates(peak, L_value)})
        g_min = min(g(1), g(L_value))
        Xv = laws.last_value_gap(self.cell, Bv, mpmath.sqrt(self.cell.d) * mpmath.log(r), laws.MPMATH)
        alpha_v = last_cosine(self.cell, Bv, Xv, mpmath.sqrt)
        dc, rr = last_offsets(self.cell, Bv, Dv, Xv, alpha_v, laws.MPMATH)
        half = mpmath.mpf(1) / 2
        K_lo = max(-half - g_min, -half - dc - rr)
        K_hi = min(half - g_max, half - dc + rr)
        if interval:
            return (K_lo, K_hi) if lo < min(hi, self.capacity_mp(r, Bv)) and K_lo < K_hi else None
        return r, Dv, (K_lo + K_hi) / 2


class FootSelectDesign(FootDesign):
    """The select task read at ``s`` with linear attention and post-RMSNorm: the one-sided arc of
    :class:`~constructions.regression.FootDesign` and the distractor that scores 0 (module
    docstring); its ``B_min``, lower bound and rates are the count task's."""

    def __init__(self, cell: Cell):
        if not (cell.distractor and not cell.read.last and laws.foot_distance(cell, 1) is not None):
            raise ValueError(f"{cell.describe()}: FootSelectDesign builds the select task read at s, "
                             "linear attention with post-RMSNorm")
        super().__init__(cell)

    def steps(self) -> list[Step]:
        return super().steps() + [_distractor_step(self.cell)]

    screen = TaskDesign.screen


def last_closed_form(cell: Cell) -> tuple:
    """``B_min(L)`` of the last-read line construction (``L >= 2``) as the two sympy expressions
    in ``L`` whose maximum it is: ``cap^{-1}(1 - 1/(L-1))`` and ``B_delta`` (module docstring)."""
    if cell not in _FORMS:
        from constructions.closed_forms import budget

        _FORMS[cell] = (budget(cell, 1 - 1 / (L - 1)), laws.last_offset_budget(cell, L))
    return _FORMS[cell]


_FORMS: dict = {}


def closed_form(cell: Cell, L_value: int) -> dict | None:
    """The closed form of ``B_min(L)`` for any task and read position (None where none holds):
    the count task's where the distractor is free, :func:`constructions.select.closed_form` where
    it is suppressed, :func:`last_closed_form` at the last read
    (``branch``: ``slope`` where ``cap^{-1}(1 - 1/(L-1))`` is the larger, ``offset`` where
    ``B_delta`` is)."""
    if refusal(cell) is not None or cell.eps != 0:
        return None
    from constructions import select, two_value_select  # they build on this module

    if two_value_select.applies(cell):
        return two_value_select.closed_form(cell, L_value)
    if select.suppresses(cell):
        return select.closed_form(cell, L_value)
    if not cell.read.last:
        return count_closed_form(screen_cell(cell), L_value)
    if cell.distractor:
        return None  # constructions.select_last: planned on a grid, no closed form derived
    if L_value < 2 or laws.family(cell) != "line" or not cell.pre:
        return None  # the softmax last read (the optimum over the shape) and linear attention
        # without a norm (its offset is a cubic): no closed form derived
    at = {L: sympy.Integer(L_value)}
    with mpmath.workdps(40):
        values = [mpmath.mpf(sympy.N(e.xreplace(at), 40)) for e in last_closed_form(cell)]
    j = 0 if values[0] >= values[1] else 1
    return {"B": float(values[j]), "B_exact": str(last_closed_form(cell)[j].xreplace(at)),
            "valid_for": "L >= 2", "branch": ("slope", "offset")[j],
            "K": float(1 - sympy.Rational(1, L_value - 1))}
