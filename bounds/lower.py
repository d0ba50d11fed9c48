"""Proven lower bounds ``B_lower(L) <= B_min(L)``, evaluated rigorously in ball arithmetic.

Every bound is ``inf`` over the reduced problem of the smallest budget whose *capacity* (an
upper bound on the read-out amplitude any parameter set of that norm reaches) covers the
smallest counting amplitude.  Each function's docstring carries its proof; the evaluation uses
Arb balls, and every comparison that discards a case is certain.
"""

from __future__ import annotations

import functools
import heapq
import math

import flint

from bounds.arc_lower import arc_lower, ceiling
from bounds.lstar import feasible as bare_pre_feasible
from constructions import laws, registry, regression, segment
from constructions.cell import Cell
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
    branches = laws.segment_budgets(cell, D, sigma, laws.ARB)
    if laws.rigid(cell):
        return branches["value"]
    low = sigma_low.max(flint.arb(0)) if sigma_low is not None else flint.arb(0)
    floor = laws.segment_budgets(cell, D, low, laws.ARB)["score"]
    if laws.on_a_line(cell):
        return branches["value"].max(floor)
    H, _ = laws.value_reach(cell, laws.ARB)
    main = branches["value"] if (H * D + 2 * sigma) > 0 else 2 * (-sigma).sqrt() / H
    return main.max(branches["reach"]).max(floor)


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
        # score gap alone needs more than B_upper, all need more (decreasing in sigma).  Rigid
        # values and values on a line have sigma = X^2/2 >= 0: rho >= 1 holds every shape
        low = 1.0
        fixed_gap = laws.rigid(cell) or laws.on_a_line(cell)
        if not fixed_gap:
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
            if fixed_gap and not sigma_hi > 0:
                return 0.0
            need = _budget_needed(cell, flint.arb(max(D_low, 0.0)), sigma_hi, sigma_lo)
            return max(arb_floor(need), 0.0)

        return _branch_and_bound(bound, low, high, B_upper, rtol, max_boxes)


#: branch-and-bound budget for the arc (post-norm) bound: a cap, not reached for L <= 2^20
#: (about 0.02 million boxes from 2^16 to 2^20)
ARC_BOXES = 4_000_000


@functools.lru_cache(maxsize=256)
def _arc(L: int, target: float, boxes: int, foot: float | None = None, counts: tuple | None = None) -> float:
    """:func:`bounds.arc_lower.arc_lower`, once per problem.  The reduced problem depends only on
    ``L``, the target, the cap, the foot and the counts (not on the attention or the norm kind
    that led to them), and the branch and bound is deterministic, so equal arguments give the
    same bound: softmax and linear attention after LayerNorm share it."""
    return arc_lower(L, target, max_boxes=boxes, foot=foot, counts=counts)


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
    down): the restricted arc bound, the best over fours of counts that bind at the one-sided
    optimum (:func:`constructions.one_sided.binding_counts`; any four counts give a valid bound,
    so their largest does).  A
    set with ``B > B_upper`` is above the returned bound anyway.
    """
    with flint.ctx.workprec(PREC):
        R_up = laws.capacity(cell, None, flint.arb(B_upper), laws.ARB)
        target = float(R_up.upper().mid()) * (1 + 1e-12)
        foot = laws.foot_distance(cell, flint.arb(B_upper), laws.ARB)
        R_low = _arc(L, target, boxes) if foot is None else _foot_arc(L, target, boxes, arb_floor(foot))
        return min(arb_floor(laws.budget(cell, flint.arb(R_low), laws.ARB)), B_upper)


def _foot_arc(L: int, target: float, boxes: int, F: float) -> float:
    """The restricted arc bound ``<= R*_F(L)`` (the foot at ``n0 <= -F``): for ``L < 3`` the pair
    ``0, L`` (:func:`bounds.arc_lower.arc_lower`, step 1), else the best over the arc's own four
    ``0, m, L - m, L`` (``counts=None``; at large ``L`` the one-sided optimum binds near them, the
    Chebyshev nodes of its cubic deviation) and the fours of counts that bind at the one-sided
    optimum (:func:`constructions.one_sided.binding_counts`; the float search's fours may miss the
    count ``0``, or, at large ``L``, hold neighbours of one binding count within float noise): any
    four give a valid bound, so their largest does.  The fours are tried in that order until one
    reaches :func:`bounds.arc_lower.ceiling`, the most any four can give."""
    if L < 3:
        return _arc(L, target, boxes, F)
    from constructions import one_sided  # scipy: only the one-sided arc needs it

    best = _arc(L, target, boxes, F)
    top = ceiling(L, target)
    if best >= top:
        return best
    lam, _ = one_sided.least_amplitude(L, F)
    for counts in one_sided.binding_counts(L, F, lam) if lam is not None else []:
        best = max(best, _arc(L, target, boxes, F, tuple(counts)))
        if best >= top:
            break
    return best


def _ends_lower(cell: Cell, L: int) -> float:
    """Post-norm read last, from the counts ``0`` and ``L`` alone: ``B >= budget((L - 1)/2)``
    (:func:`constructions.laws.budget`, the inverse of the capacity), every ``eps >= 0``.

    *Proof.*  ``y(0) < 1/2`` and ``y(L) > L - 1/2``, so ``<w * g, N_L - N_0> = y(L) - y(0) > L - 1``
    (``g = 1`` bare; the bias and ``w0`` cancel), where ``N_0`` (the input ``(s)``, read at ``s``)
    and ``N_L`` are outputs of the norm, in its image ``C`` and of length at most ``sqrt(d)`` (equal
    at ``eps = 0``), so ``N_L - N_0 = t p`` with ``p`` a unit vector of ``C`` and ``0 <= t <= 2
    sqrt(d)``.  The read-out along ``p`` is bounded as the arc's is along its plane (:func:`
    last_post_lower`: ``|<w * g, p>| <= |w|`` bare, ``<= a |w * g|_1 <= a |w| |g|`` with a gain,
    ``|P_C e_i| <= a``), that is ``|<w * g, p>| sqrt(d) <= cap(B)``; so ``L - 1 < 2 cap(B)``.
    Unlike the arc of ``L - 1`` it sees the count ``0``, and at small ``L`` it is the larger.
    """
    if L < 2:
        return 0.0
    return max(arb_floor(laws.budget(cell, flint.arb(L - 1) / 2, laws.ARB)), 0.0)


def last_foot_lower(cell: Cell, L: int, B_upper: float, boxes: int = ARC_BOXES) -> float:
    """Linear attention with post-RMSNorm read at the last position (``eps = 0``):
    ``B >= cap^{-1}(R*_F(L - 1))`` with the foot ``F = 1 + sqrt(d)/B_upper^2`` (0 for ``L <= 2``),
    or the bound of the counts ``0, L`` (:func:`_ends_lower`) where that is larger.

    *Proof* (:mod:`constructions.last_foot`).  For ``n >= 1`` the residual is ``r(n) = P + n Q``
    with ``P = e_a + tau <e_a, e_s> e_s``, ``Q = tau |e_a|^2 e_a``, and RMSNorm (``eps = 0``) is
    scale-invariant, so ``y(n) = C + <u, v_n>`` on the projective arc of that line with ``|u| <=
    cap(B)`` (the read-out of :func:`post_lower`).  Its foot is at ``n0 = -<P, Q>/|Q|^2 = -(sqrt(d)
    + <e_s, e_a>^2/|e_a|^2)/|e_a|^2 <= -sqrt(d)/|e_a|^2 <= -sqrt(d)/B^2`` (``e_a != 0``; with
    ``e_a = 0``, or ``P, Q`` dependent, ``z(n)`` takes at most two values for ``n >= 1`` and
    nothing counts ``1..L`` for ``L >= 3``).  With ``m = n - 1`` the counts ``n = 1..L`` are the
    counts ``m = 0..L-1`` of the arc ``(P + Q) + m Q`` with targets ``m + 1`` (the ``1`` absorbed
    by ``C``), whose foot is at ``m0 = n0 - 1 <= -(1 + sqrt(d)/B^2)``.  A parameter set of norm
    ``B <= B_upper`` counting to ``L`` thus solves the one-sided arc problem of ``L - 1`` with its
    foot at ``m0 <= -F``, ``F = 1 + sqrt(d)/B_upper^2`` (rounded down: a smaller ``F`` admits more
    shapes), dropping ``n = 0`` only relaxes it, so ``|u| >= R*_F(L - 1)``, bounded from below
    by :func:`_foot_arc`; a set with ``B > B_upper`` is above the returned bound anyway.  At ``L - 1
    = 1`` that bound is 0 (two points on any arc are separated by every amplitude).
    """
    if L <= 2:
        return _ends_lower(cell, L)
    with flint.ctx.workprec(PREC):
        R_up = laws.capacity(cell, None, flint.arb(B_upper), laws.ARB)
        target = float(R_up.upper().mid()) * (1 + 1e-12)
        foot = 1 + laws.foot_distance(cell, flint.arb(B_upper), laws.ARB)
        R_low = _foot_arc(L - 1, target, boxes, arb_floor(foot))
        return max(min(arb_floor(laws.budget(cell, flint.arb(R_low), laws.ARB)), B_upper),
                   _ends_lower(cell, L))


def last_post_lower(cell: Cell, L: int, B_upper: float, boxes: int = ARC_BOXES) -> float:
    """Post-norm read at the last position (``eps = 0``; softmax attention, and linear attention
    with LayerNorm): the post-norm bound of the BOS read at ``L - 1`` (:func:`post_lower`; 0 for
    ``L <= 2``), or the bound of the counts ``0, L`` (:func:`_ends_lower`) where that is larger.

    *Proof* (:mod:`constructions.last_post`).  For ``n >= 1`` the query is ``e_a`` and the
    residual a positive multiple of ``P + n Q`` for fixed ``P, Q`` (softmax: ``Z r(n) = w_s ((e_s
    + e_a) + n 2 rho e_a)`` with ``Z, w_s > 0``; linear: ``r(n) = e_a + tau <e_a, e_s> e_s + n tau
    |e_a|^2 e_a`` itself); the norm is scale-invariant, so
    ``z(n) = N(P + n Q)``, and ``y(n) = C + <u, v_n>`` on the projective arc
    of the line ``P + n Q`` exactly as at the BOS read, with the same read-out vectors, so the
    same capacity ``|u| <= cap(B)`` (``sqrt(d) B`` bare, ``sqrt(d) a B^2`` with a gain).  Where
    the centred ``P, Q`` are dependent, ``z(n)`` takes at most two values and nothing counts
    ``1..L`` for ``L >= 3``.  With ``m = n - 1`` the counts ``n = 1..L`` are the counts
    ``m = 0..L-1`` of the arc ``P' + m Q`` (``P' = P + Q``) with targets ``m + 1``, and the
    ``1`` is absorbed by ``C``: a parameter set counting to ``L`` at the last read solves the
    arc problem of ``L - 1`` (dropping ``n = 0`` only relaxes it), so ``|u| >= R*(L-1)`` and
    ``B >= cap^{-1}(R*(L-1))``, which :func:`post_lower` of the BOS cell at ``L - 1`` bounds from
    below.  At ``L - 1 = 1`` ``R*(1) = 0`` (any positive amplitude separates two points), so
    the arc's bound is 0 for ``L <= 2``.

    *eps > 0* (:mod:`constructions.last_post_eps`).  With ``s = sqrt(d eps)`` the norm is ``N(x) =
    sqrt(d) x_c/|(x_c, s)|``, ``(x_c, s)`` in ``R^{d+1}``.  Softmax: ``r(n) = (P + n Q)/(1 + n rho)``
    with ``1 + n rho > 0``, so ``N(r(n)) = sqrt(d) (P_c + n Q_c)/|X(n)|`` with ``X(n) = (P_c, s) + n
    (Q_c, s rho)``; linear: ``r(n) = P + n Q`` itself, ``X(n) = (P_c, s) + n (Q_c, 0)``.  Either way
    ``y(n) = C + <(w * g, 0), sqrt(d) X(n)/|X(n)|>`` (``g = 1`` bare): the arc of the line ``X`` of
    ``R^{d+1}`` on the sphere of radius ``sqrt(d)``, read by the projection ``u`` of ``(w * g, 0)`` on
    its plane ``Pi`` (inside ``C x R``, ``C`` the norm's image).  The capacity is unchanged: ``|u| <=
    |w|`` times ``sqrt(d)`` bare, and with a gain ``|P_Pi (e_i, 0)| <= |P_C e_i| = a`` for every basis
    vector, so ``|u| <= sqrt(d) a |w * g|_1 <= sqrt(d) a |w| |g|``; where ``X(0), X(1)`` are
    dependent every ``y(n)`` is one value.  The arc problem of ``L - 1`` and its bound ``R*(L-1)``
    are those of a line in a plane, whatever the dimension around it, so the bound of ``eps = 0``
    holds for every ``eps >= 0``.
    """
    if L <= 2:
        return _ends_lower(cell, L)
    return max(post_lower(cell.replace(read="bos", eps=0.0), L - 1, B_upper, boxes),
               _ends_lower(cell, L))


def select_last_post_lower(cell: Cell, L: int, B_upper: float, boxes: int = ARC_BOXES) -> float:
    """The select task read last after post-norm (``eps = 0``): :func:`last_post_lower` of the
    count task (softmax with LayerNorm, :mod:`constructions.select_last_post`, or RMSNorm,
    :mod:`constructions.select_last_rms`; linear attention with LayerNorm,
    :mod:`constructions.select_last_linear_post`).

    *Proof.*  The inputs of the count task read last, ``(s)`` and ``(s, a^n)`` read at the last
    ``a``, are inputs of the select task (``n_b = 0``) with the same targets, read at the same
    position, so a parameter set solving select to ``L`` counts to ``L`` at the last read, and
    :func:`last_post_lower` bounds its budget.
    """
    return last_post_lower(cell.replace(task="count"), L, B_upper, boxes)


def last_line_lower(cell: Cell, L: int) -> float:
    """Linear attention with pre-norm read at the last position, the count task:
    ``B >= cap^{-1}(1 - 1/(L-1))`` (0 for ``L <= 2``).

    *Proof.*  For ``n >= 1`` the query is ``h_a``, the scores ``tau <h_a, h_s>`` (one ``s``) and
    ``tau |h_a|^2`` (``n`` tokens ``a``) and the residual ``e_a + A``, so
    ``y(n) = K + k n`` with ``k = tau |h_a|^2 <w, h_a>`` and ``K`` independent of ``n``.
    Counting at ``n = 1`` and ``n = L`` needs ``|K + k - 1| < 1/2`` and ``|K + k L - L| < 1/2``,
    so ``(L-1)|k - 1| < 1`` and ``k > 1 - 1/(L-1)``.  By Cauchy-Schwarz ``k <= tau |h_a|^3 |w|
    <= cap(B)``, the line capacity of :mod:`constructions.laws` (``|h| <= H B``, or
    ``|h| = sqrt(d)`` bare, ``eps = 0``; with ``eps > 0`` the norm scales ``N_0(e)`` by
    ``|e_c|/sqrt(|e_c|^2 + d eps) < 1``, so the values are only shorter and the capacity bounds
    ``k`` for every ``eps``), whence the bound (:func:`constructions.laws.budget`, increasing).  The count ``n = 0`` is off the line (:mod:`constructions.tasks`) and is not
    used, so the bound is met only where the offset it needs is within reach.
    """
    if L <= 2:
        return 0.0
    with flint.ctx.workprec(PREC):
        return arb_floor(laws.budget(cell, 1 - flint.arb(1) / (L - 1), laws.ARB))


def last_free_line_lower(cell: Cell, L: int, rtol: float = 1e-12) -> float:
    """Linear attention without a norm read at the last position: the smallest ``B`` with
    ``tau B^4 > max(1 - 1/(L-1), 1 - (1 + R)/L)``, ``R = 2 B^2 (1 + tau B^2)`` (0 at ``L = 1``).

    *Proof.*  For ``n >= 1`` ``y(n) = K + k n`` with ``k = tau |e_a|^2 <w, e_a> <= tau B^4``, so
    ``k > 1 - 1/(L-1)`` as in :func:`last_line_lower`.  The count 0 is read at ``s``:
    ``y(0) = K + delta``, ``delta = <w, e_s>(1 + tau |e_s|^2) - <w, e_a> - tau <e_a, e_s> <w, e_s>``,
    so ``|delta| <= B^2 (1 + tau B^2) + B^2 + tau B^4 = R`` and ``|K| < 1/2 + R``.  Counting
    ``n = L`` needs ``K > L (1 - k) - 1/2``, hence ``k > 1 - (1 + R)/L`` (for ``k <= 1``; a larger
    ``k`` exceeds both floors).  The left side increases in ``B`` and the right side decreases:
    every ``B`` at which the inequality surely fails (ball arithmetic) is below every counting
    budget, and bisection returns the largest one found.
    """
    if L <= 1:
        return 0.0
    with flint.ctx.workprec(PREC):
        tau = 1 / flint.arb(cell.d).sqrt()
        floor = 1 - flint.arb(1) / (L - 1)

        def fails(b: float) -> bool:
            B = flint.arb(b)
            R = 2 * B * B * (1 + tau * B * B)
            need = floor.max(1 - (1 + R) / L)
            return bool(tau * B**4 <= need)

        lo, hi = 1e-6, 1e3
        while hi - lo > rtol * lo:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fails(mid) else (lo, mid)
        return lo


def last_select_line_lower(cell: Cell, L: int) -> float | None:
    """The select task read at the last position, linear attention: the count task's bound at
    the last read (None where none is proven; every ``eps``), and with bare pre-norm at least
    ``(1 - 2/(L-1))(1 + 1/(L-1)) sqrt(L-1)/(2d)`` (``L >= 3``, ``eps = 0``).

    *Sub-task.*  The count task's inputs at the last read, ``(s)`` and ``(s, a^n)`` read at the
    last ``a``, are inputs of the select task (``n_b = 0``) with the same targets and the same
    query: parameters that solve select to ``L`` count to ``L``, so :func:`last_free_line_lower`
    (no norm) and :func:`last_line_lower` (pre-norm) hold.

    *The distractor, bare pre-norm.*  ``|h_x| = sqrt(d)`` for every token.  Query ``a`` reads
    ``y = K_a + x n_a + p n_b`` (``x = sqrt(d) <w, h_a>``), query ``b`` reads ``y = K_b + c x n_a
    + q n_b`` with ``c = <h_a, h_b>/d`` and ``q = sqrt(d) <w, h_b>`` (:mod:`constructions.select_last`).
    With ``e = 1/(L-1)``: the inputs ``(1, 0)`` and ``(L, 0)`` at query ``a`` give ``|x - 1| <
    e``; ``(0, 1)`` and ``(L-1, 1)`` at query ``b`` give ``|c x - 1| < e``; ``(0, 1)`` and ``(0, L)``
    at query ``b`` give ``|q| < e``.  So ``c > (1 - e)/x > (1 - e)/(1 + e) > 0``, and ``c < 1``:
    ``c = 1`` is ``h_b = h_a``, where ``q = x > 1 - e >= e`` (``L >= 3``).  The least ``|w|`` with
    ``<w, h_a> = x/sqrt(d)`` and ``<w, h_b> = q/sqrt(d)`` is that of the Gram system,
    ``|w|^2 >= (x^2 - 2 c x q + q^2)/(d^2 (1 - c^2))``; the numerator is ``(x - c q)^2 + q^2
    (1 - c^2) >= (x - |q|)^2 > (1 - 2e)^2`` and ``1 - c^2 < 1 - ((1-e)/(1+e))^2 = 4e/(1+e)^2``.
    Hence ``B >= |w| > (1 - 2e)(1 + e)/(2 d sqrt(e))``, evaluated in ball arithmetic (lower end).
    """
    count = cell.replace(task="count")
    if not cell.normed:
        return last_free_line_lower(count, L)
    if not cell.pre:
        return None
    base = last_line_lower(count, L)
    if not laws.rigid(cell) or L < 3 or cell.eps > 0:  # the distractor's bound needs |h| = sqrt(d)
        return base
    with flint.ctx.workprec(PREC):
        e = 1 / flint.arb(L - 1)
        bound = (1 - 2 * e) * (1 + e) / (2 * cell.d * e.sqrt())
        return max(base, arb_floor(bound))


def last_pair_lower(cell: Cell, L: int, rtol: float = 1e-12) -> float:
    """Softmax attention without a norm read at the last position: ``B*``, the root of
    ``2 B^2 = D_lo(exp(-2 B^2/sqrt(d)))``, ``D_lo(rho) = (rho+2)/(rho+4)``, at ``L = 2`` (0 at
    ``L = 1``; nothing counts beyond).

    *Proof* (:mod:`constructions.last_read`).  With ``e = h``, ``y(0) = K - D`` and
    ``y(n) = K + D n/(rho+n)``; counting ``n = 0`` and ``n = 2`` needs ``D (1 + 2/(rho+2)) > 1``,
    i.e. ``D > D_lo(rho)``, which increases in ``rho``.  At budget ``B``, ``D <= 2 B^2`` and
    ``rho >= exp(-2 B^2/sqrt(d))`` (:func:`constructions.laws.last_pair_reach`), so a counting set
    has ``2 B^2 > D_lo(exp(-2 B^2/sqrt(d)))``.  The left side increases in ``B`` and the right
    decreases, so every ``B`` at which ``2 B^2 - D_lo(exp(-2 B^2/sqrt(d))) < 0`` holds surely
    (ball arithmetic) is below every counting budget; bisection returns the largest one found.
    """
    if L <= 1:
        return 0.0
    with flint.ctx.workprec(PREC):
        sd = flint.arb(cell.d).sqrt()

        def below(b: float) -> bool:
            cap = laws.last_pair_reach(cell, flint.arb(b))
            rho = (-cap / sd).exp()
            return bool(cap - (rho + 2) / (rho + 4) < 0)

        lo, hi = 1e-3, 2.0
        while hi - lo > rtol * lo:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if below(mid) else (lo, mid)
        return lo


def last_bare_lower(cell: Cell, L: int, B_upper: float, max_boxes: int = 1500, pieces: int = 48) -> float:
    """Softmax attention with bare pre-norm read at the last position (``eps = 0``, ``L <= 4``).

    *Proof.*  For ``n >= 1`` ``y(n) = K + D phi(n)``, ``phi(n) = n/(rho+n)``, ``rho = exp(tau <h_a,
    h_s - h_a>)`` in ``[exp(-2 sqrt(d)), 1)`` (:mod:`bounds.lstar`, the last read), and ``y(0) =
    K + delta``, ``delta = <w, e_s - e_a>``.  A counting parameter set of bound ``B`` has

    1. ``D rho/rho' > D_lo(rho', L - 1)`` with ``rho' = rho + 1`` (the counts ``1..L``, the
       shifted segment of :meth:`constructions.tasks.TaskDesign.interval`);
    2. ``B >= |w| >= D/X``, ``X = |h_a - h_s| = sqrt(-2 sqrt(d) log rho)`` (``|h| = sqrt(d)``);
    3. ``|K - g(n)| < 1/2`` for ``g(n) = n - D phi(n)`` and ``|K + delta| < 1/2`` with ``|delta|
       <= |w| |e_s - e_a| <= 2 B^2``, so ``|g(n)| < 1 + 2 B^2``: ``B^2 > (max_n |g(n)| - 1)/2``.

    Branch and bound over boxes ``[a, b]`` of ``rho`` (:func:`_branch_and_bound`): a box is dropped
    where a pair of gaps fails at ``rho' = b + 1`` (an up-set, :mod:`bounds.lstar`); else ``D >=
    D_min = D_lo(box) (b+1)/b``, ``X <= X(a)``, ``phi(n)`` in ``[n/(b+n), n/(a+n)]``, and the
    amplitudes ``[D_min, B_upper X(a)]`` (beyond, 2. exceeds ``B_upper``) are cut into ``pieces``:
    on ``[D_j, D_{j+1}]`` the budget is at least ``max(D_j/X(a), sqrt((max_n dist(n, [D_j
    phi_lo, D_{j+1} phi_hi]) - 1)/2))``, and the box's bound is the least over the pieces.  The
    offset bound ``2 B^2`` exceeds what the construction reaches (``2 mu W``,
    :mod:`constructions.last_read`), so ``B_lower`` stays below ``B_min``.  Either norm kind
    (only ``|h| = sqrt(d)`` is used); LayerNorm at ``d = 2`` has only the values ``+-h_s``, and
    ``h_a = h_s`` gives ``D = 0``, so for ``L >= 2`` the shape is ``rho = exp(-2 sqrt(d))``
    exactly: the boxes cover a float interval around it.
    """
    if L < 2:
        return 0.0
    with flint.ctx.workprec(PREC):
        sd = flint.arb(cell.d).sqrt()

        def gap(a: float) -> flint.arb:
            return flint.arb((-2 * sd * flint.arb(a).log()).sqrt().upper())

        low = math.exp(-2 * math.sqrt(cell.d)) * (1 - 1e-12)
        # LayerNorm at d = 2: h_a = -h_s, rho = exp(-2 sqrt(d)) exactly, inside [low, high]
        high = low * (1 + 1e-11) if laws.two_values(cell) else 1.0
        return _last_rigid_lower(L, B_upper, gap, lambda a: flint.arb(0), low, high, max_boxes, pieces)


def last_bare_eps_lower(cell: Cell, L: int, B_upper: float, max_boxes: int = 1500, pieces: int = 48) -> float:
    """Softmax attention with bare pre-norm and ``eps > 0`` read at the last position
    (:mod:`constructions.last_eps`, ``L <= L*`` of :func:`bounds.lstar.last_l_star_eps`).

    *Proof.*  As :func:`last_bare_lower`, whose three conditions hold with two changes.  The
    values are no longer of length ``sqrt(d)``: ``|N(e)| = c/sqrt(c^2/d + eps)`` (``c`` the length
    of the centred part of ``e``, at most ``|e| <= B``) is at most ``R(B) = sqrt(d) B/sqrt(B^2 +
    d eps)``, increasing in ``B``.  So for ``B <= B_upper``, with ``R = R(B_upper)`` and ``u = (h_s
    - h_a)/X``: ``sigma = <h_a, h_s - h_a> = X <h_a, u>`` and ``X = <h_s, u> - <h_a, u> <= R -
    sigma/X``, so ``X^2 - R X + sigma <= 0``: ``X <= X_max(sigma) = (R + sqrt(R^2 - 4 sigma))/2``
    (decreasing in ``sigma``: on a box of ``rho`` evaluated at its lower end) and ``sigma <= R^2/4``,
    so ``rho <= exp(R^2/(4 sqrt d))``: shapes beyond need more than ``B_upper``.  And the score gap
    costs budget: ``sigma <= |h_a| |h_s| - |h_a|^2 <= R(B)^2/4`` gives ``B^2 (d - 4 sigma) >= 4
    sigma d eps``, i.e. ``B >= sqrt(4 sigma d eps/(d - 4 sigma))`` for ``sigma > 0`` (increasing
    in ``sigma``: evaluated at the box's lower end).  The offset bound ``|delta| <= |w| |e_s - e_a|
    <= 2 B^2`` is unchanged, and ``sigma >= -|h_a| |h_s| - |h_a|^2 >= -2 d`` keeps ``rho >=
    exp(-2 sqrt(d))``.  Each box's bound is the larger of the floor and the least over the pieces
    of amplitudes (:func:`last_bare_lower`); a parameter set of bound above ``B_upper`` is above the
    returned ``min(bound, B_upper)`` anyway.  Either norm kind, every ``d`` (LayerNorm at ``d =
    2`` included: only ``|h| <= R`` is used).
    """
    if L < 2:
        return 0.0
    with flint.ctx.workprec(PREC):
        d = flint.arb(cell.d)
        sd, eps = d.sqrt(), flint.arb(cell.eps)
        Bu = flint.arb(B_upper)
        R = sd * Bu / (Bu * Bu + d * eps).sqrt()
        R = flint.arb(R.upper())
        zero = flint.arb(0)

        def sigma(a: float) -> flint.arb:
            return flint.arb((sd * flint.arb(a).log()).lower())

        def gap(a: float) -> flint.arb:
            return flint.arb(((R + (R * R - 4 * sigma(a)).max(zero).sqrt()) / 2).upper())

        def floor(a: float) -> flint.arb:
            s = sigma(a)
            if not s > 0:
                return zero
            room = d - 4 * s
            if not room > 0:  # beyond R^2/4 < d/4: outside the range below
                return flint.arb(B_upper)
            return (4 * s * d * eps / room).sqrt()

        low = math.exp(-2 * math.sqrt(cell.d)) * (1 - 1e-12)
        high = float(((R * R / (4 * sd)).exp()).upper().mid()) * (1 + 1e-12)
        return _last_rigid_lower(L, B_upper, gap, floor, low, high, max_boxes, pieces)


def _last_rigid_lower(L: int, B_upper: float, gap, floor, low: float, high: float, max_boxes: int,
                      pieces: int) -> float:
    """The branch and bound of :func:`last_bare_lower` over boxes ``[a, b]`` of ``rho`` in ``[low,
    high]``, with ``gap(a)`` an upper bound on ``X`` over the box and ``floor(a)`` a lower bound on
    the budget of every shape in it (balls at the current precision)."""
    Lp = L - 1
    zero = flint.arb(0)

    def infeasible(b: float) -> bool:
        rho = flint.arb(b) + 1
        ks, kks = _gaps(math.sqrt(b + 1 + Lp), Lp), _gaps(math.sqrt(b + 1), Lp)
        return any(segment.hi_term(kk, rho, Lp) <= segment.lo_term(k, rho, Lp)
                   for k in ks for kk in kks)

    def bound(a: float, b: float):
        if infeasible(b):
            return None
        ks = _gaps(math.sqrt(a + 1 + Lp), Lp) | _gaps(math.sqrt(b + 1 + Lp), Lp)
        D_min = max(max(arb_floor(_lo_term_min(a + 1, b + 1, Lp, k)) for k in ks), 0.0)
        D_min *= arb_floor((flint.arb(b) + 1) / b)
        X_hi = gap(a)
        least = max(arb_floor(floor(a)), 0.0)
        D_max = float((flint.arb(B_upper) * X_hi).upper().mid())
        if D_min >= D_max or least >= B_upper:
            return B_upper
        lo_phi = [flint.arb(n) / (flint.arb(b) + n) for n in range(1, L + 1)]
        hi_phi = [flint.arb(n) / (flint.arb(a) + n) for n in range(1, L + 1)]
        edges = [D_min + (D_max - D_min) * j / pieces for j in range(pieces + 1)]
        best = math.inf
        for D0, D1 in zip(edges[:-1], edges[1:]):
            far = zero
            for n, pl, ph in zip(range(1, L + 1), lo_phi, hi_phi):
                far = far.max(n - D1 * ph).max(D0 * pl - n)
            offset = ((far - 1).max(zero) / 2).sqrt()
            best = min(best, arb_floor((flint.arb(D0) / X_hi).max(offset)))
        return max(best, least, 0.0)

    return _branch_and_bound(bound, low, high, B_upper, 1e-6, max_boxes)


def _last_budget_needed(cell: Cell, D: flint.arb, sigma_low: flint.arb, sigma_high: flint.arb) -> flint.arb:
    """Smallest ``B`` that reaches the Mobius amplitude ``D`` at the last read with a score gap
    in ``[sigma_low, sigma_high]`` (softmax, pre-norm with a gain; :mod:`constructions.tasks`).

    With ``|h| <= H B``, ``|v_x| <= V B`` and the query ``h_a``:
    ``D <= B X`` with ``X^2 - H B X + k sigma <= 0`` (:func:`constructions.laws.last_value_gap`,
    ``k`` its weight: 2 for the two values of LayerNorm at ``d = 2`` with a bias, else 1),
    ``X <= 2 V B``, and ``sigma = X <h_a, u> >= -H B X >= -2 H V B^2``.  The first, with
    ``u = B^2`` and ``s = k sigma``: ``(H u + sqrt(H^2 u^2 - 4 s u))/2 >= D``; its left side
    increases in ``u`` from ``u = 4 s/H^2`` (``s > 0``; from 0 otherwise), so its root is
    ``u = D^2/(D H - s)`` when ``D H >= 2 s`` and ``4 s/H^2`` else (where the two
    cases cannot be told apart on balls, the smaller is taken).  Both increase in ``D`` and in
    ``sigma`` (evaluated at ``sigma_low``); ``sqrt(-sigma/(2 H V))`` decreases in ``sigma``
    (evaluated at ``sigma_high``); ``sqrt(D/(2V))`` increases in ``D``.
    """
    H, V = laws.value_reach(cell, laws.ARB)
    zero = flint.arb(0)
    s = laws.last_gap_weight(cell) * sigma_low
    corner = 2 * s.max(zero).sqrt() / H
    main = (D * D / (D * H - s)).sqrt() if D * H - s > 0 else None
    if main is None or not (D * H >= 2 * s):
        main = corner if main is None or D * H < 2 * s else main.min(corner)
    floor = ((-sigma_high).max(zero) / (2 * H * V)).sqrt()
    return main.max((D / (2 * V)).sqrt()).max(floor)


def last_segment_lower(cell: Cell, L: int, B_upper: float, rtol: float = 1e-6,
                       max_boxes: int = 20000) -> float:
    """Softmax attention with pre-norm and a gain, the count task read at the last position.

    *Proof.*  For ``n >= 1`` the query is ``h_a`` and ``y(n) = K + D n/(rho+n)`` with
    ``D = <w, h_a - h_s>`` and ``rho = exp(tau <h_a, h_s - h_a>)``, ``sigma = sqrt(d) log rho``;
    with ``m = n - 1`` and ``rho' = rho + 1`` this is the BOS segment of ``L - 1`` at ``rho'`` and
    amplitude ``D rho/rho'`` (:meth:`constructions.tasks.TaskDesign.interval`), so counting
    ``n = 1..L`` needs ``D > D_lo(rho', L-1) rho'/rho``, and then
    ``B >= need(D, sigma)`` (:func:`_last_budget_needed`).  Branch and bound over boxes of
    ``rho`` as :func:`segment_lower`: on a box ``[a, b]``, ``D_lo(rho', L-1)`` is bounded below
    by any gap term's minimum over ``[a+1, b+1]`` and ``rho'/rho >= (b+1)/b``; a box is dropped
    when a pair of gaps already fails at ``rho' = b + 1`` (feasibility is an up-set in
    ``rho'``, :mod:`bounds.lstar`).  Below the range every shape is infeasible or needs more
    than ``B_upper`` from ``sigma >= -2 H V B^2``; above it ``D_lo >= (L-2)(rho'+L-1)/(L-1)`` and
    ``sigma`` both grow, and so does the budget they need.  The count ``n = 0`` is not used.
    """
    if L < 2:
        return 0.0
    Lp = L - 1
    with flint.ctx.workprec(PREC):
        sd = flint.arb(cell.d).sqrt()

        def sig(x: float) -> flint.arb:
            return sd * flint.arb(x).log()

        def infeasible(b: float) -> bool:
            rho = flint.arb(b) + 1
            ks, kks = _gaps(math.sqrt(b + 1 + Lp), Lp), _gaps(math.sqrt(b + 1), Lp)
            return any(segment.hi_term(kk, rho, Lp) <= segment.lo_term(k, rho, Lp)
                       for k in ks for kk in kks)

        low = 1.0
        while not (infeasible(low) or _last_budget_needed(cell, flint.arb(0), sig(low), sig(low)) > B_upper):
            low /= 2
        high = max(4.0 * L * L, 4.0)
        while True:
            rho = flint.arb(high) + 1
            tail = flint.arb(Lp - 1) * (rho + Lp) / Lp
            if _last_budget_needed(cell, tail, sig(high), sig(high)) > B_upper:
                break
            high *= 2

        def bound(a: float, b: float):
            if infeasible(b):
                return None
            ks = _gaps(math.sqrt(a + 1 + Lp), Lp) | _gaps(math.sqrt(b + 1 + Lp), Lp)
            D_low = max(arb_floor(_lo_term_min(a + 1, b + 1, Lp, k)) for k in ks)
            D_low = max(D_low, 0.0) * arb_floor((flint.arb(b) + 1) / b)
            sig_lo = flint.arb(sig(a).lower())
            sig_hi = flint.arb(sig(b).upper())
            return max(arb_floor(_last_budget_needed(cell, flint.arb(D_low), sig_lo, sig_hi)), 0.0)

        return _branch_and_bound(bound, low, high, B_upper, rtol, max_boxes)


def last_select_softmax_lower(cell: Cell, L: int, B_upper: float | None, rtol: float = 1e-6) -> float | None:
    """The select task read last, softmax attention with pre-norm and a gain
    (:mod:`constructions.select_last_softmax`): the count task's bound at the last read,
    :func:`last_segment_lower`.  *Proof.*  The count task's inputs at the last read, ``(s)`` and
    ``(s, a^n)`` read at the last ``a``, are select inputs (``n_b = 0``) with the same targets
    and the same query: parameters that solve select to ``L`` count to ``L``.  The branch and
    bound is valid for any cap; it is run towards the count task's own optimum (a float
    estimate), below which every lower bound lies (None without a cap)."""
    if B_upper is None:
        return None
    count = cell.replace(task="count")
    est = regression.design(count).estimate(L)
    return last_segment_lower(count, L, B_upper if est is None else min(B_upper, est), rtol)


def last_select_bare_lower(cell: Cell, L: int, B_upper: float | None) -> float | None:
    """The select task read last, softmax attention with bare pre-norm at ``eps = 0``
    (:mod:`constructions.select_last_bare`): the count task's bound at the last read,
    :func:`last_bare_lower`.  *Proof.*  The count task's inputs at the last read, ``(s)`` and
    ``(s, a^n)`` read at the last ``a``, are select inputs (``n_b = 0``) with the same targets and
    the same query: parameters that solve select to ``L`` count to ``L``.  The branch and bound is
    valid for any cap (shapes it drops need more than the cap, and it returns at most the cap); it
    is run towards the count task's own optimum (a float estimate), below which every lower bound
    lies (None without a cap)."""
    if B_upper is None:
        return None
    count = cell.replace(task="count")
    est = regression.design(count).estimate(L)
    return last_bare_lower(count, L, B_upper if est is None else min(B_upper, est))


def _count_bos(cell: Cell, L: int, B_upper, arc_boxes: int, rtol: float):
    """The count task read at ``s``: :func:`post_lower` (post-norm, ``eps = 0``),
    :func:`line_lower` (linear attention), :func:`segment_lower` (softmax; bare pre-norm where
    it counts); None at ``eps > 0`` with bare pre-norm or post-norm (the proofs use
    ``|N(e)| = sqrt(d)``, true only for ``eps = 0``)."""
    if cell.post:
        if cell.eps > 0 or cell.d < laws.smallest_d(cell) or B_upper is None:
            return None
        return post_lower(cell, L, B_upper, arc_boxes)
    if cell.eps > 0 and laws.rigid(cell):
        return None
    if cell.attention == "linear":
        return line_lower(cell, L)
    if laws.rigid(cell) and not bare_pre_feasible(cell.d, L):
        return None
    if B_upper is None:
        return None
    return segment_lower(cell, L, B_upper, rtol)


def _select_bos(cell: Cell, L: int, B_upper, arc_boxes: int, rtol: float):
    """The select task read at ``s``: the count task's bound.  *Proof.*  The inputs of the count
    task, ``(s, a^n)`` for ``n <= L``, are inputs of the select task (``n_b = 0``) with the same
    targets, read at the same position: parameters that solve select to ``L`` count to ``L``, so
    ``B_min(select) >= B_min(count) >= B_lower(count)``.  Where the distractor costs
    (:mod:`constructions.select`) the count task's branch and bound is run towards the count
    task's optimum, a float estimate (:func:`segment_lower` is valid whatever its ``B_upper``:
    shapes it does not cover need more than ``B_upper``, and it returns at most ``B_upper``; a cap
    above the optimum would be out of reach of every lower bound, and the search would spend all
    its boxes)."""
    from constructions.select import suppresses  # sympy: only the select task loads it

    count = cell.replace(task="count")
    if B_upper is not None and suppresses(cell):
        est = regression.design(count).estimate(L)
        B_upper = B_upper if est is None else min(B_upper, est)
    return b_lower(count, L, B_upper, arc_boxes, rtol)


def _capped(bound):
    """``bound(cell, L, B_upper, ...)`` of a branch and bound that needs a cap (None without one)."""
    return lambda cell, L, B_upper, arc_boxes, rtol: (
        None if B_upper is None else bound(cell, L, B_upper, arc_boxes))


def _value_read(cell: Cell, L: int, B_upper, arc_boxes: int, rtol: float):
    """The count task read last with pre-norm, values along one axis: :func:`last_line_lower`
    (linear attention; None with bare pre-norm at ``eps > 0``) and :func:`last_segment_lower`
    (softmax with a gain; both use only ``|N(e)_i| <= M`` with a gain, true for every ``eps``)."""
    if cell.eps > 0 and laws.rigid(cell):
        return None
    if cell.attention == "linear":
        return last_line_lower(cell, L)
    if not cell.affine.gain or B_upper is None:
        return None
    return last_segment_lower(cell, L, B_upper, rtol)


def _rigid_read(cell: Cell, L: int, B_upper, arc_boxes: int, rtol: float):
    """Softmax with bare pre-norm read last: :func:`last_bare_lower` (``L <= 4``), with
    ``eps > 0`` :func:`last_bare_eps_lower` (``L <= L*``)."""
    if B_upper is None:
        return None
    return (last_bare_eps_lower if cell.eps > 0 else last_bare_lower)(cell, L, B_upper)


def _select_foot(cell: Cell, L: int, B_upper, arc_boxes: int, rtol: float):
    """The select task read last, linear attention with post-RMSNorm: the count task's one-sided
    arc (:func:`last_foot_lower`; a sub-task, ``n_b = 0``)."""
    if B_upper is None:
        return None
    return last_foot_lower(cell.replace(task="count"), L, B_upper, arc_boxes)


#: the proven lower bound of each regression construction, keyed by its entry of
#: :data:`constructions.registry.REGRESSION` (:attr:`~constructions.registry.Entry.key`); each
#: is called as ``bound(cell, L, B_upper, arc_boxes, rtol)`` and returns a float or None (no proof)
LOWER = {
    # the count task read at s
    "count_bos": _count_bos,
    "count_foot": _count_bos,
    # the count task read last
    "pair_read": lambda cell, L, *_: last_pair_lower(cell, L),
    "rigid_read": _rigid_read,
    "eps_rigid_read": _rigid_read,
    "line_read": lambda cell, L, *_: last_free_line_lower(cell, L),
    "softmax_last_arc": _capped(last_post_lower),
    "linear_last_arc": _capped(last_post_lower),
    "softmax_eps_last_arc": _capped(last_post_lower),  # its proof holds for every eps
    "linear_eps_last_arc": _capped(last_post_lower),
    "last_foot": _capped(last_foot_lower),
    "eps_last_foot": _capped(last_foot_lower),
    "value_read": _value_read,
    "eps_gain_read": _value_read,
    "eps_rms_gain_read": _value_read,
    # the select task read at s
    "free_select": _select_bos,
    "foot_select": _select_bos,
    "suppressed_select": _select_bos,
    "two_value_select": _select_bos,
    # the select task read last
    "free_select_last": lambda cell, L, *_: last_select_line_lower(cell, L),
    "bare_select_last": lambda cell, L, *_: last_select_line_lower(cell, L),
    "scale_select_last": lambda cell, L, *_: last_select_line_lower(cell, L),
    "gain_select_last": lambda cell, L, *_: last_select_line_lower(cell, L),
    "eps_select_last": lambda cell, L, *_: last_select_line_lower(cell, L),
    "gain_softmax_select_last": lambda cell, L, B_upper, arc_boxes, rtol: (
        last_select_softmax_lower(cell, L, B_upper, rtol)),
    "circle_softmax_select_last": lambda cell, L, B_upper, arc_boxes, rtol: (
        last_select_softmax_lower(cell, L, B_upper, rtol)),
    "pair_select_last": lambda cell, L, *_: last_pair_lower(cell, L),  # its sub-task n_b = 0
    "bare_softmax_select_last": lambda cell, L, B_upper, *_: last_select_bare_lower(cell, L, B_upper),
    "select_last_arc": _capped(select_last_post_lower),
    "eps_select_last_arc": _capped(select_last_post_lower),
    "linear_select_last_arc": _capped(select_last_post_lower),
    "select_last_rms": _capped(select_last_post_lower),
    "linear_select_last_foot": _select_foot,
}


def b_lower(cell: Cell, L: int, B_upper: float | None, arc_boxes: int = ARC_BOXES,
            rtol: float = 1e-6) -> float | None:
    """The proven lower bound for a sweep row: that of the regression construction serving the
    cell (:data:`LOWER`; 0 for classification, whose rows report a margin; None where no
    construction serves the cell, where no proof is implemented, and below the smallest width of
    post-norm beyond ``L = 1``, where nothing counts).

    ``B_upper`` is the row's certified ``B_min`` (None: none), the cap of the branch and bounds.
    Where the reduced problem is solved exactly (segment), the branch and bound runs to the
    bisection tolerance ``rtol`` of ``B_upper``; the arc stops at ``1e-4``.
    """
    if cell.readout == "classification":
        return 0.0
    if cell.post and cell.eps == 0 and cell.d < laws.smallest_d(cell) and L >= 2:
        return None  # two points: nothing counts beyond L = 1 (bounds.lstar.cell_l_star), no row
    entry = registry.serving(cell)
    return None if entry is None else LOWER[entry.key](cell, L, B_upper, arc_boxes, rtol)


def _branch_and_bound(bound, low: float, high: float, B_upper: float, rtol: float,
                      max_boxes: int) -> float:
    """``min(B_upper, min over [low, high] of the budget a shape needs)``, from below.

    ``bound(a, b)`` is a rigorous lower bound on the budget every shape in ``[a, b]`` needs (None:
    no shape there counts).  The interval is cut into 64 geometric boxes, and the box of the
    smallest bound is halved (geometrically) until that bound reaches ``B_upper / (1 + rtol)`` or
    ``max_boxes`` boxes are spent.  A child keeps its parent's bound if that is larger (both are
    valid), so the smallest bound of the boxes left is a lower bound over ``[low, high]``, and a
    smaller cap only weakens it.
    """
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
