"""A proven upper bound on the max-min margin of classification read at the last position.

The question is :mod:`bounds.margin`'s (every trainable vector of norm at most 1, free biases),
for the count task read at the last position without post-norm (:mod:`constructions.last_read`).
For ``n >= 1`` the query is ``h_a`` whatever the parameters, so the outputs ``z_1..z_L`` are
collinear; ``z_0`` (read at ``s``) may lie anywhere.  The bound uses only ``z_1..z_L`` (but for
softmax without a norm, where ``z_0`` is on their line: *Pair* below): the
pair inequality of neighbours ``c, c+1`` in ``1..L`` summed as in (C) of :mod:`bounds.margin`
(``k_c = <u_c, v>`` in ``[-1, 1]`` along the unit direction ``v`` of the line) gives

    m <= 1 / sum_{c=1}^{L-1} 1/(x_{c+1} - x_c).                                     (C')

*Line (linear attention).*  ``z_n = e_a + tau <h_a, h_s> h_s + n tau |h_a|^2 h_a``: every gap is
``kappa = tau |h_a|^3 <= cap(1, 1)`` (the line capacity of :func:`constructions.laws.capacity`
at unit budget: ``|h| <= H``, ``|h| = sqrt(d)`` bare, ``|h| = |e| <= 1`` without a norm), so
``m <= cap(1, 1)/(L - 1)``.  The plane head of :mod:`constructions.last_read` attains it (bare
pre-norm and no norm), so there it is the max-min margin.  With a gain this bound,
which ignores ``z_0``, stays above the construction by up to about ``kappa/((L-1) G)`` (``G`` its
first gap): there the smaller :func:`_offline`, which sees ``z_0`` (the pair ``0, 1`` weighted
against the chain, over every parameter set), is taken too.

*Segment (softmax, pre-norm with a gain).*  ``z_n = e_a + h_s + phi(n)(h_a - h_s)``,
``phi(n) = n/(rho+n)``, ``rho = exp(tau <h_a, h_s - h_a>)``: the gaps are
``X rho/((rho+c)(rho+c+1))`` with ``X = |h_a - h_s|``, and with ``L' = L - 1``, ``rho' = rho + 1``

    sum_{c=1}^{L-1} (rho+c)(rho+c+1) = S(rho) = L' rho'^2 + L'^2 rho' + (L'^3 - L')/3,

so ``m <= X rho/S(rho)``.  ``X <= Xmax(sigma) = min(2V, (H + sqrt(H^2 - 4 sigma))/2)`` at score
gap ``sigma = sqrt(d) log rho`` (:func:`constructions.laws.last_value_gap`, valid for either sign
of ``sigma``, and ``|h_a - h_s| <= 2V`` from ``|v_x| <= V``), which decreases in ``rho``; real
roots need ``sigma <= H^2/4`` and ``sigma = X <h_a, u> >= -H X >= -2 H V``, so ``rho`` lies in
``[exp(-2HV/sqrt d), exp(H^2/(4 sqrt d))]``.  The factor ``rho/S(rho)`` increases up to
``rho* = sqrt(1 + L' + (L'^2 - 1)/3)`` and decreases beyond (``S - rho S' = L' + L'^2 + (L'^3 -
L')/3 - L' rho^2``).  The supremum over that interval is bounded by branch and bound
(:func:`bounds.margin._branch_and_bound`): on ``[a, b]`` by ``Xmax(sigma(a))`` times the factor at
the point of ``[a, b]`` nearest ``rho*``.  Shapes ``rho < 1``, which the construction does not
use (there ``X`` may exceed its value at ``rho = 1``), are covered too.

*Segment, bare pre-norm* (``eps = 0``).  ``|h_a| = |h_s| = sqrt(d)``, so ``sigma = <h_a, h_s> - d
<= 0`` (``rho <= 1``), ``sigma >= -2d`` (``rho >= exp(-2 sqrt d)``) and ``X^2 = |h_a - h_s|^2 = 2d -
2 <h_a, h_s> = -2 sigma``: ``X = sqrt(-2 sqrt(d) log rho)``, decreasing in ``rho``; the same branch
and bound on ``[exp(-2 sqrt d), 1]``, attained by the plane head at every ``rho``.  LayerNorm at
``d = 2`` realises only ``h_a = h_s`` (``X = 0``: one output for every ``n >= 1``) and ``h_a =
-h_s`` (``rho = exp(-2 sqrt d)``): the bound is its value there.  (With ``eps >
0``, ``|h| < sqrt(d)`` and no bound is returned.)

*Pair (softmax without a norm).*  ``h = e``, the count 0 is read at ``s`` with ``A = e_s``, so
``z_0 = 2 e_s = (e_a + e_s) - (e_a - e_s)``: for every parameter set ``z_0`` is the point of the
line at ``phi = -1``, and (C) of :mod:`bounds.margin` over all ``L + 1`` points gives, with the
first gap ``X (1 + 1/(rho+1))``,

    m <= X / (S(rho)/rho + (rho+1)/(rho+2))     (:func:`constructions.last_read.pair_margin`)

(``X = 0`` leaves one output: no head counts).  ``X <= Xmax(sigma)`` and ``rho`` in
``[exp(-2/sqrt d), exp(1/(4 sqrt d))]`` as for the segment (``H = V = 1``).  On ``[a, b]``:
``Xmax`` at ``a`` (it decreases), ``S(rho)/rho`` at its smallest, the point nearest ``rho*``
(``rho/S`` increases up to ``rho*`` and decreases beyond), and ``(rho+1)/(rho+2)``, increasing,
at ``a``.  The construction realises ``Xmax`` at every ``rho``
(:func:`constructions.last_read.pair_vectors`), so the supremum is the max-min margin.

*L = 1.*  Only the pair ``0, 1``: ``2m <= <u_1 - u_0, z_1 - z_0> <= 2 |z_1 - z_0|`` and
``|z_1 - z_0| <= |e_a| + |e_s| + |A(1) - A(0)|``, at most ``2 + 3 cap(1, 1)`` (line:
``|A(0)| <= cap``, ``|A(1)| <= 2 cap``) or ``2 + 2V`` (segment: ``|A(1) - A(0)| = phi(1) X``;
bare, ``phi(1) X = X/(1 + rho)`` with both factors decreasing in ``rho``, at most their values at
``rho = exp(-2 sqrt d)``: ``2 + 2 sqrt(d)/(1 + exp(-2 sqrt d))``).  Without a norm, and for
bare pre-norm, the plane head at ``L = 1`` (``e_s = -e_a``) attains these.

*Post-norm* (``eps = 0``): the outputs ``z_1..z_L`` lie on an arc, and the BOS read's arc bound
of ``L - 1`` applies (:func:`_post`).

Evaluated in ball arithmetic and rounded up: ``O(1)`` in ``L`` and ``d``.
"""

from __future__ import annotations

import functools
import math

import flint

from bounds.margin import PREC, _branch_and_bound, _geometric
from constructions import laws, registry
from constructions.cell import Cell
from constructions.last_read import mobius_sum, pair_margin
from verify.backends import arb_ceil


def _segment(cell: Cell, L: int) -> flint.arb:
    """``sup X rho/S(rho)`` over the reachable shapes (module docstring; bare pre-norm: ``X =
    sqrt(-2 sigma)`` on ``[exp(-2 sqrt d), 1]``)."""
    sd = flint.arb(cell.d).sqrt()
    Lp = flint.arb(L - 1)
    peak = (1 + Lp + (Lp * Lp - 1) / 3).sqrt()
    if laws.rigid(cell):
        X = lambda rho: (-2 * sd * rho.log()).max(flint.arb(0)).sqrt()
        low, high = (-2 * sd).exp(), flint.arb(1)
        if laws.two_values(cell):  # h_a = +-h_s: X = 0, or rho = exp(-2 sqrt d)
            return X(low) * low / mobius_sum(low, L)
    else:
        H, V = (flint.arb(v) for v in laws.value_reach(cell, laws.ARB))

        def X(rho):
            sigma = sd * rho.log()
            return (2 * V).min(_arb(laws.last_value_gap(cell, 1, sigma, laws.ARB)))

        low = (-2 * H * V / sd).exp()
        high = (_arb(laws.last_score_gap_max(cell, 1, laws.ARB)) / sd).exp()

    def shape(rho):
        return rho / mobius_sum(rho, L)

    def box(a, b):
        p = peak.min(b).max(a)
        return X(a) * shape(p)

    return _branch_and_bound(box, lambda r: X(r) * shape(r), low, high, _geometric)


def _pair(cell: Cell, L: int) -> flint.arb:
    """Softmax attention without a norm: ``sup_rho Xmax(rho)/(S(rho)/rho + (rho+1)/(rho+2))``
    (:func:`constructions.last_read.pair_margin`; module docstring)."""
    sd = flint.arb(cell.d).sqrt()
    Lp = flint.arb(L - 1)
    peak = (1 + Lp + (Lp * Lp - 1) / 3).sqrt()

    def X(rho):
        return (2 * flint.arb(1)).min(_arb(laws.last_value_gap(cell, 1, sd * rho.log(), laws.ARB)))

    def box(a, b):
        p = peak.min(b).max(a)
        return X(a) / (mobius_sum(p, L) / p + (a + 1) / (a + 2))

    low = (-2 / sd).exp()
    high = (_arb(laws.last_score_gap_max(cell, 1, laws.ARB)) / sd).exp()
    return _branch_and_bound(box, lambda r: pair_margin(X(r), r, L), low, high, _geometric)


def _post(cell: Cell, L: int) -> float:
    """Post-norm (``eps = 0``; softmax, and linear attention with LayerNorm): the BOS read's arc
    bound at ``L - 1`` (:func:`bounds.margin.margin_upper`).

    *Proof* (:mod:`constructions.last_post`).  ``z_1..z_L`` are ``R unit(P + n Q)`` (times the
    gain, plus the bias) for fixed ``P, Q``, i.e. the points ``m = 0..L-1`` of the arc of ``P + Q
    + m Q``: any arc, of which the BOS bound of ``L - 1`` classes holds for every one (its proof,
    :mod:`bounds.margin`, is over every foot ``p`` and distance ``lam``, and its dual
    certificate's weights are any nonnegative weights).  The margin is a minimum over every
    count and class; over the counts and classes ``1..L`` alone it is at least as large, and the
    head's rows ``u_1..u_L`` with their biases are a head of those ``L`` classes with every
    vector of norm at most 1.  At ``L = 1`` only the pair ``0, 1``: ``2m <= <u_1 - u_0, z_1 - z_0>
    <= 2 |z_1 - z_0|``, with ``|z_1 - z_0| <= 2 sqrt(d)`` bare and ``|g * (N_1 - N_0)| <= 2 M |g|
    <= 2 M`` with a gain (``|N_i| <= M``, the kind's largest coordinate; a bias cancels).

    *Linear attention after post-RMSNorm* (the count task,
    :mod:`constructions.count_last_foot_head`, and the select task's sub-task): the arc of ``P + Q + m Q`` has its foot at ``p = -(F + 1)`` and its distance
    tied, ``lam <= kappa F`` (:func:`constructions.laws.last_distance_ratio`), so the dual
    certificate over that smaller domain (:func:`bounds.arc_margin.arc_upper` of the last-read
    cell at ``L - 1``, from ``L = 5``) bounds it too; the smaller of the two is returned.

    *Softmax: every output* (from ``L = 5``).  The count 0 lies on the same arc, at ``n_* =
    -1/(2 rho)`` in a proven range, so the dual certificate over all ``L + 1`` outputs
    (:func:`bounds.arc_margin.last_arc_upper`) bounds ``m`` as well; a bias ``beta`` moves every
    output by ``beta``, i.e. every logit of class ``c`` by the constant ``<u_c, beta>`` that
    ``b_c`` absorbs, so the bound of the gain alone holds with a bias.  The smallest of the
    bounds is returned."""
    from bounds.margin import _arc_problem, _dual, margin_upper  # it imports this module

    if L >= 2:
        bound = margin_upper(cell.replace(read="bos"), L - 1)
        if laws.foot_distance(cell, 1) is not None and L - 1 >= 4:
            bound = min(bound, _dual(_arc_problem(cell), L - 1))
        if cell.attention == "softmax" and not cell.distractor:
            bound = min(bound, _last_dual(cell.replace(affine="gain") if cell.affine.bias else cell, L))
        return bound
    with flint.ctx.workprec(PREC):
        if cell.affine.gain:
            reach = flint.arb(cell.kind.max_coordinate(cell.d, laws.ARB.sqrt))
        else:
            reach = flint.arb(cell.d).sqrt()
        return arb_ceil(2 * reach)


@functools.lru_cache(maxsize=256)
def _last_dual(cell: Cell, L: int) -> float:
    """:func:`bounds.arc_margin.last_arc_upper` once per cell (a bias, which shifts every logit of
    a class by one constant, is dropped by the caller: the bound holds for any weights)."""
    from bounds.arc_margin import last_arc_upper

    return last_arc_upper(cell, L)


#: the largest number of boxes :func:`_offline` splits (a cap on its cost; any partition is a proof)
OFFLINE_BOXES = 3000
#: :func:`_offline` stops once its largest box is within this of its best point
OFFLINE_TOLERANCE = 1e-4


def _offline(cell: Cell, L: int) -> flint.arb:
    """Linear attention with pre-norm and a gain, ``L >= 2``: the supremum over every parameter set
    of the weighted pair bound of :func:`constructions.last_read.offline_head`, which sees ``z_0``.

    *Notation.*  ``b = 1`` with a bias (else 0 and ``beta = 0``), ``M`` the kind's largest
    coordinate, ``x = h_a - beta = g * N_a``, ``y' = h_s - beta = g * N_s``, ``r = |h_a|``, ``v =
    h_a/r``, ``kappa = tau r^3``; ``y = h_s = s v + y_perp`` with ``t = |y_perp|``; ``e = e_a - e_s``.

    (L1) ``|x|, |y'| <= M`` (``|g * N| <= |g| max_i |N_i|``), so ``r <= M + b``, ``|x| >= r - b``
    and ``s^2 + t^2 = |y|^2 <= (M + b)^2``; ``|e| <= 2``.

    (L2) *One gain for both values.*  If ``|x|^2 >= M^2/2`` then ``|y'_perp x|^2 <= M^2 - |x|^2``.
    Proof: ``N_a, N_s`` lie in the image ``V`` of the norm (``R^d``, or the centred hyperplane) with
    ``|N| <= sqrt(d)``; let ``W`` be their span and ``Q`` the compression of ``diag(g^2)`` to ``W``,
    with eigenvalues ``mu_1 >= mu_2 >= 0``, ``mu_1 + mu_2 <= trace(P_V diag(g^2)) <= M^2/d``
    (``|g| <= 1``; for LayerNorm ``(1 - 1/d) |g|^2``).  The Gram matrix of ``x, y'`` is that of ``N_a,
    N_s`` under ``Q``, so ``|x|^2 <= mu_1 d`` and ``|x|^2 |y'_perp x|^2 = det = det[N_a N_s]^2 mu_1
    mu_2 <= d^2 mu_1 (M^2/d - mu_1)``, decreasing in ``mu_1`` from ``mu_1 >= |x|^2/d >= M^2/(2d)``:
    at most ``d |x|^2 (M^2/d - |x|^2/d)``.

    (L3) *The bias is nearly along ``v``.*  ``|x|^2 = (r - beta_v)^2 + |beta_perp|^2 <= M^2`` with
    ``beta_v <= sqrt(b^2 - |beta_perp|^2)``, so ``r <= phi(|beta_perp|)``, ``phi(q) = sqrt(b^2 - q^2) +
    sqrt(M^2 - q^2)`` decreasing: ``|beta_perp| < eps`` for any ``eps`` with ``phi(eps) < r``
    (:func:`_tilt`; ``eps = b`` if none).  And ``beta_v = r - <x, v> >= r - M``.

    (L4) Hence ``s = <y', v> + beta_v >= r - 2M``, and with ``y' = a x/|x| + y'_perp x`` (``|a| <= M``,
    ``|(x/|x|)_perp v| = |beta_perp|/|x| <= eps/(r - b)``): ``t <= T(r) = eps (1 + M/(r - b)) + sqrt(M^2 -
    (r - b)^2)`` when ``(r - b)^2 >= M^2/2`` (else ``t <= M + b``); ``T`` decreases in ``r``.

    (L5) ``D = z_1 - z_0 = e + (kappa + tau (r s - s^2 - t^2) s) v - tau (s^2 + t^2 - r s) y_perp``:
    ``G = <v, D> = e_v + kappa + tau (r s - s^2 - t^2) s`` and the distance of ``z_0`` from the line
    is ``P <= |e_perp| + tau |s^2 + t^2 - r s| t``.

    (L7) *RMSNorm* (any ``eps``): ``e_a = alpha_a n_a`` with ``n_a = N_a/|N_a|`` a unit vector,
    ``alpha_a = |e_a| <= 1`` (``e_s`` alike), and ``|x|^2 <= d sum_i p_i q_i`` with ``p_i = n_{a,i}^2``
    (``sum p = 1``), ``q_i = g_i^2`` (``sum q <= 1``).  With ``delta = 1 - |x|^2/M^2 <= 1 - (r - b)^2/M^2``
    (``M^2 = d``) and ``j`` the index of the largest ``q``: ``sum p q <= q_j`` gives ``q_j >= 1 - delta``,
    so ``sum_{i != j} q_i <= delta`` and ``p_j >= 1 - 2 delta``; the line of ``n_a`` is within
    ``asin(sqrt(2 delta))`` of ``e_j``, that of ``x`` within ``asin(sqrt(2 delta^2/(1 - delta)))``
    (``sum_{i != j} x_i^2 <= d delta (1 - p_j)``), and that of ``v`` within ``asin(eps/(r - b))`` of
    ``x``.  For ``n_s``: ``|y'|^2 <= d (p'_j + delta)`` and ``|y'| >= beta_v - s >= r - M - s``.  Angles
    between lines add and ``sin`` is subadditive, so ``|e_perp| <= |n_{a,perp}| + |n_{s,perp}|``, each at
    most the sum of the sines (capped at 1; :func:`_rms_turn`).

    (L6) ``m <= f_w = (1 + w |D| + |v - w D|)/(2 (A + w))`` for every ``w >= 0``, ``A = (L - 1)/kappa``
    (:func:`constructions.last_read.offline_head`); with ``|D|^2 = G^2 + P^2`` and ``|v - w D|^2 =
    (1 - w G)^2 + w^2 P^2`` it decreases in ``A``, increases in ``P`` and is convex in ``G``.

    *Branch and bound* over boxes of ``(r, s, e_v)`` in ``[0, M + b] x [-2M, M + b] x [-2, 2]``: on a
    box ``kappa <= tau r_hi^3``; ``t <= min(T(r_lo), M + b)``; ``G`` in the ball enclosure of (L5)
    over the box; ``|e_perp| <= sqrt(4 - e_v^2)`` at the ``e_v`` nearest 0 (and (L7) at ``r_lo``,
    ``s_hi``); ``P`` at its upper end;
    then for one ``w`` per box (a float search) ``f_w`` at both ends of ``G`` (convexity), at the
    largest ``P`` and the smallest ``A``.  Boxes with ``s_hi < r_lo - 2M`` are empty (L4).  The
    result is the largest box bound of the final partition, so it is a proof whatever the
    stopping rule; the search stops at :data:`OFFLINE_TOLERANCE` of the best box centre (a point
    of the relaxation) or :data:`OFFLINE_BOXES`."""
    import heapq

    from constructions.last_read import offline_value, offline_weight

    d = cell.d
    M = flint.arb(cell.kind.max_coordinate(d, laws.ARB.sqrt))
    b = flint.arb(1 if cell.affine.bias else 0)
    tau = 1 / flint.arb(d).sqrt()
    zero = flint.arb(0)
    sqrt = _sqrt_plus
    A_of = lambda r: flint.arb(L - 1) / (tau * r**3) if float(r.upper().mid()) > 0 else None

    memo = {}

    def reach(r_lo):
        """``t_max`` on boxes with ``r >= r_lo`` (L4), remembered per ``r_lo``."""
        key = ("T", float(r_lo.mid()))
        if key not in memo:
            memo[key] = _reach(r_lo)
        return memo[key]

    def _reach(r_lo):
        q = r_lo - b
        if float(q.lower().mid()) <= 0 or float((2 * q * q - M * M).lower().mid()) < 0:
            return M + b
        eps = _tilt(M, b, r_lo)
        return (eps * (1 + M / q) + sqrt(M * M - q * q)).min(M + b)

    def value(A, G_lo, G_hi, P):
        fl = lambda x: float(x.mid())
        w = offline_weight(fl(A), fl(G_hi), math.hypot(fl(G_hi), fl(P))) if fl(G_hi) > 0 else 0.0
        w = flint.arb(w)
        out = None
        for G in (G_lo, G_hi):
            f = offline_value(A, G, sqrt(G * G + P * P), w, sqrt).upper()
            out = f if out is None else out.max(f)
        return out

    def bound(box):
        (r1, r2), (s1, s2), (a1, a2) = box
        if float(s2.mid()) < float((r1 - 2 * M).mid()):
            return zero
        A = A_of(r2)
        if A is None:
            return zero
        T = reach(r1)
        # G: kappa + tau (r s^2 - s^3) - tau t^2 s rises with r (d/dr = tau (3 r^2 + s^2)); in s,
        # r s^2 - s^3 has its critical points at 0 (a minimum) and 2r/3 (a maximum)
        cubic = lambda r, s_: r * s_ * s_ - s_ * s_ * s_
        hi_s = [s1, s2] + [q for q in (2 * r2 / 3,) if float(s1.mid()) < float(q.mid()) < float(s2.mid())]
        lo_s = [s1, s2] + ([zero] if float(s1.mid()) < 0 < float(s2.mid()) else [])
        G_hi = tau * (r2**3 + max((cubic(r2, q) for q in hi_s), key=lambda v: float(v.mid()))
                      + T * T * (-s1).max(zero))
        G_lo = tau * (r1**3 + min((cubic(r1, q) for q in lo_s), key=lambda v: float(v.mid()))
                      - T * T * s2.max(zero))
        # P: |s^2 + t^2 - r s| t; s^2 - r s is convex in s and linear in r
        quad = lambda r, s_: s_ * s_ - r * s_
        up = max((quad(r, q) for r in (r1, r2) for q in (s1, s2)), key=lambda v: float(v.mid())) + T * T
        low = min((quad(r, (r / 2).max(s1).min(s2)) for r in (r1, r2)), key=lambda v: float(v.mid()))
        Pq = tau * up.abs_upper().max(low.abs_upper()) * T
        near = zero if float(a1.mid()) <= 0 <= float(a2.mid()) else a1.abs_upper().min(a2.abs_upper())
        e_perp = sqrt(4 - near * near).upper()
        if not cell.kind.centred:
            key = ("turn", float(r1.mid()), float(s2.mid()))
            if key not in memo:
                memo[key] = _rms_turn(M, b, r1, s2)
            e_perp = e_perp.min(memo[key])
        return value(A, G_lo + a1, G_hi + a2, e_perp + Pq)

    def centre(box):
        (r1, r2), (s1, s2), (a1, a2) = box
        r, s, a = (r1 + r2) / 2, (s1 + s2) / 2, (a1 + a2) / 2
        A = A_of(r)
        if A is None or float(s.mid()) < float((r - 2 * M).mid()):
            return zero
        G = tau * r**3 + tau * (r * s - s * s) * s + a
        P = sqrt(4 - a * a)  # a point of the relaxation: t = 0, e_perp as large as allowed
        if not cell.kind.centred:
            P = P.min(_rms_turn(M, b, r, s))
        Dn = sqrt(G * G + P * P)
        f = lambda w: float(offline_value(A, G, Dn, flint.arb(w), sqrt).mid())
        w = offline_weight(float(A.mid()), float(G.mid()), float(Dn.mid())) if float(G.mid()) > 0 else 0.0
        return flint.arb(min(f(w), f(0.0)))

    top_r = M + b

    def split(box):
        """Halve the widest side (``r`` in ``sqrt(M + b - r)``, where ``T`` varies like it)."""
        u = lambda r: math.sqrt(max(0.0, float((top_r - r).mid())))
        (r1, r2) = box[0]
        widths = [(u(r1) - u(r2)) / math.sqrt(float(top_r.mid()))]
        widths += [float((hi - lo).mid()) / scale for (lo, hi), scale in zip(box[1:], (3 * float(M.mid()), 4))]
        k = widths.index(max(widths))
        lo, hi = box[k]
        if k == 0:
            um = (u(r1) + u(r2)) / 2
            mid = flint.arb(min(max(float(top_r.mid()) - um * um, float(r1.mid())), float(r2.mid())))
        else:
            mid = (lo + hi) / 2
        return [tuple(part if j == k else iv for j, iv in enumerate(box)) for part in ((lo, mid), (mid, hi))]

    start = ((zero, M + b), (-2 * M, M + b), (flint.arb(-2), flint.arb(2)))
    heap, best = [], zero

    def push(box):
        ub = bound(box)
        heapq.heappush(heap, (-float(ub.mid()), id(box), box, ub))

    push(start)
    for _ in range(OFFLINE_BOXES):
        top = heapq.heappop(heap)
        for part in split(top[2]):
            best = best.max(centre(part))
            push(part)
        if -heap[0][0] <= float(best.mid()) * (1 + OFFLINE_TOLERANCE):
            break
    out = heap[0][3]
    for entry in heap:
        out = out.max(entry[3])
    return out


def _rms_turn(M: flint.arb, b: flint.arb, r: flint.arb, s: flint.arb) -> flint.arb:
    """RMSNorm: a bound on ``|e_perp|`` for ``|h_a| >= r`` and ``<h_s, v> <= s``
    ((L7) of :func:`_offline`), or 2 where it does not apply."""
    zero, one = flint.arb(0), flint.arb(1)
    q = r - b
    if not float(q.lower().mid()) > 0:
        return flint.arb(2)
    delta = (1 - q * q / (M * M)).max(zero)
    if not float(delta.upper().mid()) < 0.5:
        return flint.arb(2)
    eps = _tilt(M, b, r)
    common = _sqrt_plus(2 * delta * delta / (1 - delta)) + eps / q
    ys = (r - M - s).max(zero)
    turn_a = (_sqrt_plus(2 * delta) + common).min(one)
    turn_s = (_sqrt_plus(1 - ys * ys / (M * M) + delta) + common).min(one)
    return (turn_a + turn_s).upper()


def _sqrt_plus(x: flint.arb) -> flint.arb:
    """A ball containing ``sqrt(max(q, 0))`` for every ``q`` in the ball ``x``."""
    zero = flint.arb(0)
    if float(x.upper().mid()) <= 0:
        return zero
    if float(x.lower().mid()) < 0:
        return flint.arb.union(zero, x.upper().sqrt())
    return x.sqrt()


def _tilt(M: flint.arb, b: flint.arb, r: flint.arb) -> flint.arb:
    """An ``eps`` with ``sqrt(b^2 - eps^2) + sqrt(M^2 - eps^2) < r`` checked in balls (then
    ``|beta_perp| < eps``, (L3) of :func:`_offline`), or ``b`` where none is found: a float
    bisection on ``phi`` (decreasing on ``[0, b]``), rounded up and checked."""
    if float(b.mid()) == 0:
        return flint.arb(0)
    phi = lambda q: _sqrt_plus(b * b - q * q) + _sqrt_plus(M * M - q * q)
    target = float(r.lower().mid())
    if not float(phi(b).upper().mid()) < target:
        return b
    bf, Mf = float(b.mid()), float(M.mid())
    phi_f = lambda q: math.sqrt(max(0.0, bf * bf - q * q)) + math.sqrt(max(0.0, Mf * Mf - q * q))
    lo, hi = 0.0, bf
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if phi_f(mid) < target else (mid, hi)
    for q in (hi * (1 + 1e-12), hi * (1 + 1e-6), bf):
        q = flint.arb(q).min(b)
        if float(phi(q).upper().mid()) < target:
            return q
    return b


def _arb(x) -> flint.arb:
    return x if isinstance(x, flint.arb) else flint.arb(x)


def last_margin_upper(cell: Cell, L: int) -> float | None:
    """A float ``U >= m`` for every parameter set of ``cell`` (classification, the count task at
    the last read) with every vector of norm <= 1 (module docstring); None where no proof
    applies: post-norm with ``eps > 0`` or without an arc construction; bare pre-norm softmax
    with ``eps > 0``).  Only upper bounds on ``|h|`` and ``|h_a - h_s|`` are used, which hold for
    every ``eps`` (``|N(v)| <= sqrt(d)``, ``|N(v)_i| <= M``), except the exact ``X = sqrt(-2
    sigma)`` of bare pre-norm (``eps = 0``); after post-norm (``eps = 0``; with linear attention
    and post-RMSNorm too, :mod:`constructions.count_last_foot_head`): :func:`_post`."""
    if registry.builds("last_post", cell) or registry.builds("count_last_foot_head", cell):
        return _post(cell, L)  # the arc of the last read (without loading the heads' sympy)
    if cell.post or (cell.attention == "softmax" and laws.rigid(cell) and cell.eps > 0):
        return None
    with flint.ctx.workprec(PREC):
        if laws.family(cell) == "line":
            cap = _arb(laws.capacity(cell, 1, 1, laws.ARB))
            value = 2 + 3 * cap if L == 1 else cap / (L - 1)
            if L >= 2 and cell.affine.gain:  # z_0 seen too: never above cap/(L - 1) (w = 0)
                value = value.min(_offline(cell, L))
        elif not cell.normed:
            value = _pair(cell, L)
        elif L == 1 and laws.rigid(cell):
            sd = flint.arb(cell.d).sqrt()
            value = 2 + 2 * sd / (1 + (-2 * sd).exp())
        elif L == 1:
            value = 2 + 2 * _arb(laws.value_reach(cell, laws.ARB)[1])
        else:
            value = _segment(cell, L)
        return arb_ceil(value)


def select_linear_upper(cell: Cell, L: int) -> float | None:
    """A float ``U >= m`` for every parameter set of the *select* task read last with linear
    attention without post-norm (classification, every vector of norm <= 1, free biases), from
    its query-``b`` inputs; None where it does not apply (another cell, post-norm, ``L < 2``).

    *The inputs.*  Read at a last token ``b`` with ``n`` tokens ``a`` and ``k >= 1`` tokens
    ``b`` (the query among them), linear attention gives

        z_b(n, k) = e_b + tau (<h_b, h_s> h_s + n <h_b, h_a> h_a + k |h_b|^2 h_b),

    of class ``n``, for ``1 <= k <= L - n``; it is affine in ``k``, and every margin condition is
    affine in ``z``, so the conditions hold for every real ``k`` in that range.

    *The pairs.*  For ``n = 0..L-2`` and any ``j`` in ``[0, 1]`` take ``z_b(n+1, 1)`` (class
    ``n+1``: ``1 <= L - n - 1``) and ``z_b(n, 1 + j)`` (class ``n``: ``1 + j <= 2 <= L - n``).
    Their two margin conditions add up to (the biases cancel)
    ``<u_{n+1} - u_n, D_j> >= 2 m`` with ``D_j = tau (<h_b, h_a> h_a - j |h_b|^2 h_b)``, one vector
    for every ``n``; summing over ``n`` telescopes to ``2 m (L - 1) <= <u_{L-1} - u_0, D_j> <= 2
    |D_j|``, so ``m <= tau B/(L - 1)``, ``B = min_{0 <= j <= 1} |gamma h_a - j q^2 h_b|``, with
    ``p = |h_a|``, ``q = |h_b|``, ``gamma = <h_a, h_b> = p q cos(psi)``.

    *The lemma* ``B <= max(p^2 q, p^3)/2``.  Write ``u = gamma h_a``, ``v = q^2 h_b``: ``<u, v> =
    gamma^2 q^2 >= 0``, and the nearest point of the segment ``{j v}`` to ``u`` is at ``j* =
    gamma^2/q^4`` if that is at most 1: then ``B = |u| sin(psi) = p^2 q |cos(psi)| sin(psi) <= p^2
    q/2``.  Else (``gamma^2 > q^4``) ``B = |u - v|``, ``B^2 = gamma^2 p^2 - 2 gamma^2 q^2 + q^6``;
    with ``c = cos(psi)^2``, ``q^2 = p^2 y`` (``gamma^2 = p^4 c y``, and ``gamma^2 > q^4`` reads ``y <
    c``) it is ``p^6 y (c - 2 c y + y^2) < p^6 y (c - c y) = p^6 c y (1 - y) <= p^6/4`` (``y^2 < c
    y``).  Every value has ``|h| <= H`` (:func:`constructions.laws.value_reach` at unit budget;
    ``sqrt(d)`` for bare pre-norm, whose ``|N(v)| <= sqrt(d)`` at every ``eps``), so

        m <= tau H^3 / (2 (L - 1)),

    half of the count task's ``cap(1, 1)/(L - 1)`` (``cap(1, 1) = tau H^3``).  The bound is met
    with equality by no head of :mod:`constructions.select_last_head` (whose step is at most
    ``tau H^3 (3/4)^(3/2)/2``), and it sees neither ``z_a`` nor the realisable values."""
    if not (cell.distractor and cell.read.last and cell.attention == "linear" and not cell.post
            and cell.readout == "classification" and L >= 2):
        return None
    with flint.ctx.workprec(PREC):
        sd = flint.arb(cell.d).sqrt()
        H = sd if laws.rigid(cell) else _arb(laws.value_reach(cell, laws.ARB)[0])
        return arb_ceil(H ** 3 / (2 * sd * (L - 1)))
