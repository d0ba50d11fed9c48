"""Proven lower bounds ``B_lower(L) <= B_min(L)``, evaluated rigorously in ball arithmetic.

Every bound is ``inf`` over the reduced problem of the smallest budget whose *capacity* (an
upper bound on the read-out amplitude any parameter set of that norm reaches) covers the
smallest counting amplitude.  Each function's docstring carries its proof; the evaluation uses
Arb balls, and every comparison that discards a case is certain.
"""

from __future__ import annotations

import heapq
import math

import flint

from bounds.arc_lower import arc_lower
from bounds.lstar import feasible as bare_pre_feasible
from constructions import one_sided, segment
from constructions.cell import Cell
from constructions import laws
from verify.backends import arb_floor

PREC = 128


def line_lower(cell: Cell, L: int) -> float:
    """Linear attention without post-norm: ``y(n) = C + k n``, ``k = tau <h_s,h_a> <w,h_a>``.

    *Proof.*  Counting at ``n = 0`` and ``n = L`` needs ``|C| < 1/2`` and ``|C + (k-1)L| < 1/2``,
    so ``k > 1 - 1/L``.  By Cauchy-Schwarz ``k <= tau |h_s| |h_a|^2 |w| <= cap(B)``, the line
    capacity of :mod:`constructions.laws` (``|h| <= H B``, or ``|h| = sqrt(d)`` for bare
    pre-norm), so ``B >= cap^{-1}(1 - 1/L)`` (:func:`constructions.laws.budget`).  It is
    attained in the limit (aligned vectors), so it equals ``B_min``.
    """
    with flint.ctx.workprec(PREC):
        return arb_floor(laws.budget(cell, 1 - flint.arb(1) / L, laws.ARB))


def _lo_term_min(a: float, b: float, L: int, k: int) -> flint.arb:
    """``min`` over ``rho`` in ``[a, b]`` of ``lo_k(rho) = (k-1)(rho+L)(rho+L-k)/(rho k)``.

    ``lo_k = (k-1)/k (rho + 2L - k + L(L-k)/rho)`` is convex in ``rho`` with its minimum at
    ``sqrt(L(L-k))``: evaluate at the clipped stationary point (point balls, no dependency).
    """
    def lo_k(rho: flint.arb) -> flint.arb:
        return segment.lo_term(k, rho, L)

    # the minimiser is a, b or the stationary point; include the latter unless it is surely
    # outside [a, b] (an extra candidate can only lower the bound)
    values = [lo_k(flint.arb(a)), lo_k(flint.arb(b))]
    if k < L:
        stat = flint.arb(L * (L - k)).sqrt()
        if not (stat < a or stat > b):
            values.append(lo_k(stat))
    return min(values, key=arb_floor)


def _gaps(x: float, L: int) -> set:
    """Integer gaps around ``x`` clipped to ``[1, L]`` (:func:`constructions.segment.candidates`)."""
    return set(segment.candidates(x, L))


def _budget_needed(cell: Cell, D: flint.arb, sigma: flint.arb,
                   sigma_low: flint.arb | None = None) -> flint.arb:
    """Smallest ``B`` whose segment capacity (:mod:`constructions.laws`) reaches amplitude ``D``
    at score gap ``sigma`` (a ball).

    With ``|h| <= H B`` and ``|v_x| <= V B``: ``B X >= D`` with ``X^2 - H B X - sigma <= 0``
    gives ``B >= D/sqrt(H D + sigma)`` (when ``H D + 2 sigma > 0``; else the root's smallest
    value ``2 sqrt(-sigma)/H``), ``X <= 2 V B`` gives ``B >= sqrt(D/(2V))``, and the score gap
    ``sigma <= 2 H V B^2`` gives ``B >= sqrt(sigma/(2 H V))``.  Where ``X^2 = 2 sigma`` (rigid
    values, or values on a line) the first is ``B >= D/sqrt(2 sigma)``.  Increasing in ``D``
    and decreasing in ``sigma``, so evaluating at the lower end of ``D`` and the upper end of
    ``sigma`` bounds it from below over a box; the score-gap floor increases with ``sigma``, so
    it is evaluated at ``sigma_low``, the lower end of the box.
    """
    if laws.rigid(cell):
        return D / (2 * sigma).sqrt()
    low = sigma_low.max(flint.arb(0)) if sigma_low is not None else flint.arb(0)
    floor = (low / laws.score_gap_max(cell, flint.arb(1), laws.ARB)).sqrt()
    if laws.on_a_line(cell):
        return (D / (2 * sigma).sqrt()).max(floor)
    H, V = laws.value_reach(cell, laws.ARB)
    main = D / (H * D + sigma).sqrt() if (H * D + 2 * sigma) > 0 else 2 * (-sigma).sqrt() / H
    return main.max((D / (2 * V)).sqrt()).max(floor)


def segment_lower(cell: Cell, L: int, B_upper: float, rtol: float = 1e-6,
                  max_boxes: int = 20000) -> float:
    """Softmax attention without post-norm: the Mobius segment (:mod:`constructions.segment`).

    *Proof.*  Any parameter set gives ``y(n) = C + D n/(rho+n)`` with
    ``D = <w, h_a - h_s>``, ``sigma = <h_s, h_s - h_a> = sqrt(d) log rho``; counting to ``L``
    needs ``D_lo(rho) < D < D_hi(rho)``.  With ``X = |h_s - h_a|`` and ``u = (h_s - h_a)/X``:
    ``D <= |w| X <= B X`` and ``X = <h_s, u> - <h_a, u>`` where

    * none: ``<h_s, u> = sigma/X``, ``|h_a| <= B``: ``X^2 - B X - sigma <= 0`` and ``X <= 2B``;
    * pre_learned (``h = g*N(e) + beta``): ``<g*N(e_s), u> = (sigma - <beta, h_s-h_a>)/X <=
      sigma/X + B`` and ``|g*N(e)| <= B sqrt(d-1)``: ``X^2 - (1+sqrt(d-1)) B X - sigma <= 0``
      and ``X <= 2 sqrt(d-1) B``;
    * pre_bare: ``|h| = sqrt(d)`` gives ``X^2 = 2 sigma`` exactly.

    Solving ``B X(B, sigma) >= D_lo(rho)`` for ``B`` (:func:`_budget_needed`) and minimising over
    ``rho`` gives ``B_min``.  The minimum is bounded below by branch and bound over boxes of
    ``rho``: on a box, ``D_lo`` is bounded below by any single gap term and ``D_hi`` above by
    any single gap term (interval extensions), boxes with ``D_lo >= D_hi`` are discarded (no
    counting there), the others give ``_budget_needed(D_lo low, sigma high)``.  Boxes are
    split best-first until the bound is within ``rtol`` of ``B_upper`` (a certified ``B_min``)
    or ``max_boxes`` are used.  Shapes with ``rho`` below the range are infeasible because
    feasibility is an up-set in ``rho`` (:mod:`bounds.lstar`); above it, ``D_lo >= (L-1)(rho+L)/L``
    grows linearly while the capacity at ``B_upper`` grows like ``sqrt(log rho)``, so they
    need more than ``B_upper``; hence ``min(bound, B_upper)`` bounds ``B_min`` from below.
    """
    if L < 2:
        return 0.0
    with flint.ctx.workprec(PREC):
        sd = flint.arb(cell.d).sqrt()

        def infeasible(a: float, b: float) -> bool:
            # some pair of gaps already violates lo_k < hi_k' at the right end, hence on [a, b]
            # (each pair condition holds on an up-set of rho, see bounds.lstar)
            rho = flint.arb(b)
            ks = _gaps(math.sqrt(b + L), L)
            kks = _gaps(math.sqrt(b), L)
            return any(segment.hi_term(kk, rho, L) <= segment.lo_term(k, rho, L)
                       for k in ks for kk in kks)

        if laws.two_values(cell):
            # N(e) = +-(1, -1): the score gap is 0 (no amplitude) or 2d, so rho = exp(2 sqrt(2))
            rho = (2 * sd).exp()
            ks = _gaps(math.sqrt(float(rho.mid()) + L), L)
            D_low = max(arb_floor(flint.arb(kk - 1) * (rho + L) * (rho + L - kk) / (rho * kk)) for kk in ks)
            return min(arb_floor(_budget_needed(cell, flint.arb(D_low), 4 * flint.arb(1))), B_upper)
        # lower end: below an infeasible rho all are infeasible (up-set); below a rho whose
        # score gap alone needs more than B_upper, all need more (decreasing in sigma)
        low = 1.0
        if not laws.rigid(cell):
            while not (infeasible(low, low)
                       or _budget_needed(cell, flint.arb(0), sd * flint.arb(low).log()) > B_upper):
                low /= 2
        # upper end: beyond it even B_upper cannot reach D_lo >= (L-1)(rho+L)/L
        if laws.rigid(cell):
            high = math.exp(2 * math.sqrt(cell.d)) * (1 + 1e-12)  # rho_max, rounded up
        else:
            high = max(4.0 * L * L, 4 * math.sqrt(cell.d) * L)
            Bu = flint.arb(B_upper)
            while True:
                rho = flint.arb(high)
                D_tail = flint.arb(L - 1) * (rho + L) / L
                if _budget_needed(cell, D_tail, sd * rho.log()) > Bu:
                    break
                high *= 2

        def bound(a: float, b: float):
            if infeasible(a, b):
                return None
            ks = _gaps(math.sqrt(a + L), L) | _gaps(math.sqrt(b + L), L)
            D_low = max(arb_floor(_lo_term_min(a, b, L, k)) for k in ks)
            sigma_hi = flint.arb((sd * flint.arb(b).log()).upper())
            sigma_lo = flint.arb((sd * flint.arb(a).log()).lower())
            if laws.rigid(cell) and not sigma_hi > 0:
                return 0.0
            need = _budget_needed(cell, flint.arb(max(D_low, 0.0)), sigma_hi, sigma_lo)
            return max(arb_floor(need), 0.0)

        heap = []
        edges = [low * (high / low) ** (i / 64) for i in range(65)]
        for a, b in zip(edges[:-1], edges[1:]):
            v = bound(a, b)
            if v is not None:
                heapq.heappush(heap, (v, a, b))
        boxes = len(edges)
        while heap and boxes < max_boxes:
            v, a, b = heap[0]
            if v >= B_upper / (1 + rtol):
                break
            heapq.heappop(heap)
            m = math.sqrt(a * b)
            for lo_, hi_ in ((a, m), (m, b)):
                w = bound(lo_, hi_)
                boxes += 1
                if w is not None:
                    heapq.heappush(heap, (max(w, v), lo_, hi_))
        best = heap[0][0] if heap else B_upper
        return min(best, B_upper)


#: branch-and-bound budget for the arc (post-norm) bound: a cap, not reached for L <= 65536
ARC_BOXES = 1_000_000


def post_lower(cell: Cell, L: int, B_upper: float, boxes: int = ARC_BOXES) -> float:
    """Post-norm (either attention): ``B >= cap^{-1}(R*(L))`` with the arc capacity of
    :mod:`constructions.laws` (``sqrt(d) B`` bare, ``sqrt(d) a B^2`` with a gain).

    *Proof.*  With ``eps = 0`` the read-out is ``C + <u, v_n>`` on the projective arc
    (:mod:`constructions.arc`) with ``|u| = sqrt(d) |w projected on the plane| <= sqrt(d) B``
    (bare) or ``|u| = sqrt(d) |(w*g) projected| <= sqrt(d) a |w*g|_1 <= sqrt(d) a |w| |g|``
    (gain; a bias only shifts ``y``).  Any counting parameter set thus has ``|u| >= R*(L)``, and
    :func:`bounds.arc_lower.arc_lower` bounds ``R*(L)`` from below to within ``1e-4`` of the
    capacity at ``B_upper`` (``boxes`` caps its branch and bound: a bound stopped by the cap
    is still valid, only weaker).

    Where the foot is tied to the budget (linear attention with post-RMSNorm,
    :func:`constructions.laws.foot_distance`) a parameter set of norm ``B <= B_upper`` has its
    foot at ``n0 < -F(B) <= -F(B_upper)``, so ``|u| >= R*_F(L)`` with ``F = F(B_upper)`` (rounded
    down): the restricted arc bound, on the four counts that bind at the one-sided optimum
    (:func:`constructions.one_sided.binding_counts`; any four counts give a valid bound).  A
    set with ``B > B_upper`` is above the returned bound anyway.
    """
    with flint.ctx.workprec(PREC):
        R_up = laws.capacity(cell, None, flint.arb(B_upper), laws.ARB)
        target = float(R_up.upper().mid()) * (1 + 1e-12)
        foot = laws.foot_distance(cell, flint.arb(B_upper), laws.ARB)
        if foot is None or L < 3:
            R_low = arc_lower(L, target, max_boxes=boxes)
        else:
            F = arb_floor(foot)
            lam, _ = one_sided.least_amplitude(L, F)
            counts = one_sided.binding_counts(L, F, lam) if lam is not None else None
            R_low = arc_lower(L, target, max_boxes=boxes, foot=F, counts=counts)
        return min(arb_floor(laws.budget(cell, flint.arb(R_low), laws.ARB)), B_upper)


def b_lower(cell: Cell, L: int, B_upper: float | None, arc_boxes: int = ARC_BOXES,
            rtol: float = 1e-6) -> float | None:
    """The proven lower bound for a sweep row (None where no proof is implemented).

    Where the reduced problem is solved exactly (segment), the branch and bound runs to the
    bisection tolerance ``rtol`` of ``B_upper``; the arc stops at ``1e-4``.

    The bounds with a gain and the line bounds only use ``max_i |N(e)_i| <= M`` and
    ``|N(e)| <= sqrt(d)``, which hold for every ``eps >= 0``; the bare pre-norm and post-norm
    bounds need ``eps = 0``.
    """
    if cell.readout == "classification":
        return 0.0
    if cell.post:
        if cell.eps > 0 or cell.d < laws.smallest_d(cell) or B_upper is None:
            return None
        return post_lower(cell, L, B_upper, arc_boxes)
    if cell.eps > 0 and laws.rigid(cell):
        return None  # the proofs below use |N(e)| = sqrt(d), true only for eps = 0
    if cell.attention == "linear":
        return line_lower(cell, L)
    if laws.rigid(cell) and not bare_pre_feasible(cell.d, L):
        return None
    if B_upper is None:
        return None
    return segment_lower(cell, L, B_upper, rtol)
