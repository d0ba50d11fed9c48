"""A proven upper bound on the max-min logit margin of a classification cell.

The question (:mod:`constructions.classification`): over *all* parameter sets with every
trainable vector (embeddings, gain, bias, every ``u_c``) of Euclidean norm at most 1 and free
biases ``b_c``, how large can the smallest margin ``m = min_n (l_n(z_n) - max_{c != n} l_c(z_n))``
be, ``l_c(z) = <u_c, z> + b_c``?  :func:`margin_upper` returns a float ``U`` with ``m <= U``
for every such parameter set, evaluated in ball arithmetic (python-flint ``arb``) and rounded up.

**The pair inequality.**  For neighbours ``c, c+1`` the margin conditions
``l_c(z_c) - l_{c+1}(z_c) >= m`` and ``l_{c+1}(z_{c+1}) - l_c(z_{c+1}) >= m`` add up to

    <u_{c+1} - u_c, z_{c+1} - z_c> >= 2 m        (c = 0..L-1),                      (P)

the biases cancel.  Every bound below sums (P) with weights and bounds the ``u`` side by
``|u_c| <= 1`` (only the part of ``u_c`` in the span of the outputs enters).

**Collinear outputs (no norm, pre-norm).**  With ``z_n = z_0 + x_n delta`` (``|delta| = 1``,
``x_n`` increasing), ``k_c = <u_c, delta>`` lies in ``[-1, 1]`` and (P) reads
``(k_{c+1} - k_c)(x_{c+1} - x_c) >= 2m``; dividing by the gap and summing telescopes:
``2m sum_c 1/(x_{c+1} - x_c) <= k_L - k_0 <= 2``, so

    m <= 1 / sum_c 1/(x_{c+1} - x_c).                                                 (C)

*Line (linear attention).*  ``z_n = z_0 + n tau <h_s, h_a> h_a``: gaps ``kappa = tau <h_s,h_a>
|h_a| <= tau |h_s| |h_a|^2``, at most the capacity ``cap(1, 1)`` of :func:`constructions.laws.capacity`
at unit budget (``tau H^3``, ``d`` for bare pre-norm), so ``m <= cap(1, 1)/L``.

*Segment (softmax).*  ``z_n = e_s + h_s + phi(n)(h_a - h_s)``, ``phi(n) = n/(rho+n)``, so the gaps
are ``X rho/((rho+c)(rho+c+1))`` with ``X = |h_a - h_s|`` and (C) gives

    m <= F(rho) = X rho / (L rho^2 + L^2 rho + (L^3 - L)/3),

with ``X <= value_gap(sigma)`` at unit budget, ``sigma = sqrt(d) log rho`` the score gap
(:func:`constructions.laws.value_gap`, proven in :mod:`constructions.laws`; it increases with
``sigma``) and ``sigma <= score_gap_max`` (:func:`constructions.laws.score_gap_max`).  For
``L >= 2`` and ``rho < 1`` the bound is below its value at ``rho = 1`` (``value_gap`` increases
with ``sigma`` and ``rho/(L rho^2 + L^2 rho + (L^3-L)/3)`` increases up to ``sqrt((L^2-1)/3) >=
1``), so the supremum over ``rho in [1, rho_max]`` bounds every parameter set.  At ``L = 1`` the
factor is ``1/(1 + rho)``, decreasing, and ``rho < 1`` can beat ``rho = 1`` (with a gain, once
``H^2 > 2 sqrt(d)``: the slope of ``F`` at ``rho = 1`` is ``sqrt(d)/(2H) - H/4``); there the
search starts at ``rho_low = exp(-H^2/(4 sqrt d))``: ``X^2 - H X - sigma <= 0`` has a real root
only for ``sigma >= -H^2/4``.  (Rigid values and values on a line have ``sigma >= 0``.)  It is
found by branch and bound: on ``[r0, r1]`` the numerator is at most ``value_gap(sigma(r1))`` and
the factor ``rho/(...)`` at most its value at the point of ``[r0, r1]`` nearest its peak.  LayerNorm at
``d = 2`` with bare pre-norm realises only ``rho = 1`` (``X = 0``) and ``rho_max``: there the
bound is ``F(rho_max)``.  The construction attains ``F`` at every ``rho >= 1``, so this bound is
the max-min margin, to the branch-and-bound tolerance, but at ``L = 1`` where ``rho < 1`` wins
(with a gain; the construction keeps ``rho >= 1``).

**The arc (post-norm, eps = 0).**  For either attention the residual is a positive multiple of
``P + n Q``, and the norm maps it to ``z_n = R unit(P' + n Q')`` (``P', Q'`` the centred parts
for LayerNorm), ``R = sqrt(d)``: points of a circle of radius ``R`` in a plane, at angles
``theta_n`` with ``tan theta_n = (n - p)/lam`` (``p`` the count at the foot of the residual line,
``lam > 0`` its distance in count units; ``lam = 0`` or ``Q' = 0`` leaves at most two distinct
outputs, and no head counts to ``L >= 2``).  Write ``z_{c+1} - z_c = l_c t_c``: the chord has
length ``l_c = 2R sin(dtheta_c/2)`` and its direction ``t_c`` is perpendicular to the bisector,
at angle ``(theta_c + theta_{c+1})/2 + pi/2``.  Dividing (P) by ``l_c`` and summing,

    2m sum_c 1/l_c <= sum_c <u_{c+1} - u_c, t_c>
                   = <u_L, t_{L-1}> - <u_0, t_0> + sum_{c=1}^{L-1} <u_c, t_{c-1} - t_c>
                   <= 2 + sum_c |t_{c-1} - t_c| <= 2 + Theta,

since ``|t_{c-1} - t_c| = 2 sin(.../2)`` is at most the angle between them and those angles add
up to at most the angle ``Theta = theta_L - theta_0`` that the arc subtends.  Next,
``l_c <= R dtheta_c`` and ``tan dtheta_c = lam/(lam^2 + x_c (x_c + 1))`` with ``x_c = c - p``
(the difference of two arctangents), so where ``a_c = lam^2 + x_c(x_c+1) > 0`` the angle is
below ``pi/2`` and ``1/l_c >= a_c/(R lam)``; always ``1/l_c >= 1/(2R)``.  Summing,
``sum_c a_c = L lam^2 + E(p)`` with ``E(p) = L (p - L/2)^2 + L^3/12 - L/3``, hence

    m <= R (1 + Theta(p, lam)/2) / max((L lam^2 + E(p))/lam, L/2).

For fixed ``lam`` both ``Theta`` (derivative ``lam/(lam^2+p^2) - lam/(lam^2+(L-p)^2)``) and
``-E`` are largest at ``p = L/2``, where ``Theta/2 = atan(L/(2 lam))``: the bound is at most

    V(lam) = R (1 + atan(L/(2 lam))) / max(L lam + (L^3/12 - L/3)/lam, L/2),

and its supremum over ``lam > 0`` is found by branch and bound (on ``[l0, l1]``: the arctangent
at ``l0``, the denominator at its smallest point of the interval; beyond ``LAM_TAIL L`` the
bound ``R (1 + atan(L/(2 l)))/(L l)`` at the start), and never above ``2R`` (one pair
inequality: ``2m <= |u_{c+1} - u_c| l_c <= 2 * 2R``).  With a gain (and a bias) the read-out
only sees the projection on the plane of ``g * u_c`` (a bias shifts every logit of a class by
a constant), and ``|P (g * u)| <= a |g * u|_1 <= a |g| |u|`` with ``a`` the kind's axis reach
(:meth:`~constructions.cell.NormKind.axis_reach`), so the bound is ``a V``.

*The dual certificate.*  The weights in that sum are all 1; any nonnegative weights give a
bound, and the construction's own head yields the best ones (its stationarity conditions).
:mod:`bounds.arc_margin` proves, for every ``L >= 4``, the supremum over every arc
``(lam, p)`` (and, with a gain, every ellipse of read-outs with squared semi-axes summing to at
most ``a^2``, in place of the disk) of the bound with those weights, by a branch and bound in
interval arithmetic; :func:`margin_upper` returns the smaller of the two bounds.  Both are
valid for every parameter set.  The certificate closes to ``TOLERANCE = 0.4%`` of the
construction's margin (``margin_ratio`` of the sweep rows, about 1.004) bare from ``L = 4`` and
with a gain from ``L = 8`` on (at ``L = 4, 5`` with a gain, 1.10-1.12); on the one-sided arc
(linear attention after RMSNorm, feet ``p <= -sqrt(d)``) bare from ``L = 8`` and with a gain
from ``L = 12`` on (1.14 at ``L = 8``).  The closed form above is 2-3% (bare) and 29-31% (gain)
above the construction for ``L >= 16``.

Cost: ``O(1)`` in ``L`` and ``d`` for the collinear families and the closed form (a few hundred
ball evaluations); the arc's certificate is ``O(L)`` per box, a few hundred boxes bare and about
one to one and a half thousand with a gain (about 5 s at ``L = 4096`` bare, 10 s at ``L = 1024``
with a gain).
"""

from __future__ import annotations

import functools
import heapq
import math

import flint

from bounds.arc_margin import arc_upper
from constructions import laws
from constructions.cell import Cell
from verify.backends import arb_ceil

#: bits of the ball arithmetic
PREC = 128
#: relative tolerance of the branch and bound (the bound returned is the largest box bound)
TOLERANCE = 1e-6
#: the most boxes a branch and bound splits (a cap gives a weaker, still valid bound)
MAX_BOXES = 4000
#: the arc's search interval for lam ends at LAM_TAIL * L (a closed form covers the rest)
LAM_TAIL = 1e6


def _arb(x) -> flint.arb:
    return x if isinstance(x, flint.arb) else flint.arb(x)


def _branch_and_bound(box_bound, point_value, start, stop, split) -> flint.arb:
    """The largest ``box_bound`` over a partition of ``[start, stop]`` refined until it is
    within :data:`TOLERANCE` of the best ``point_value`` seen (or :data:`MAX_BOXES` splits).

    ``box_bound(a, b)`` is a ball whose upper end bounds the function on ``[a, b]``;
    ``point_value(x)`` a ball containing its value at ``x`` (only used to stop early).
    """
    best = flint.arb(0)
    heap = []

    def push(a, b):
        ub = box_bound(a, b)
        heapq.heappush(heap, (-float(ub.upper().mid()), id(ub), a, b, ub))

    push(start, stop)
    for _ in range(MAX_BOXES):
        top = heap[0]
        mid = split(top[2], top[3])
        best = max(best, point_value(mid).lower(), key=lambda v: float(v.mid()))
        if float(top[4].upper().mid()) <= float(best.mid()) * (1 + TOLERANCE):
            break
        heapq.heappop(heap)
        push(top[2], mid)
        push(mid, top[3])
    out = heap[0][4].upper()
    for entry in heap:
        out = out.max(entry[4].upper())
    return out


def _geometric(a, b):
    return (a * b).sqrt() if float(a.mid()) > 0 else b / 64


def _segment(cell: Cell, L: int) -> flint.arb:
    """``sup F(rho)`` over ``rho in [1, rho_max]``, from ``rho_low < 1`` at ``L = 1`` (module
    docstring)."""
    ops = laws.ARB
    sd = flint.arb(cell.d).sqrt()
    c = flint.arb(L**3 - L) / 3
    peak = (c / L).sqrt()
    start, floor = flint.arb(1), None
    if L == 1 and not (laws.rigid(cell) or laws.on_a_line(cell)):
        H = _arb(laws.value_reach(cell, ops)[0])
        start = (-H * H / (4 * sd)).exp()
        # sigma >= -H^2/4 on every reachable shape; raising sigma to just above it only raises
        # value_gap (it increases) and keeps its square root real in ball arithmetic
        floor = -H * H / 4 * (1 - flint.arb(2) ** -64)

    def X(rho):
        sigma = sd * rho.log()
        return _arb(laws.value_gap(cell, 1, sigma if floor is None else sigma.max(floor), ops))

    def shape(rho):
        return rho / (L * rho * rho + L * L * rho + c)

    rho_max = (_arb(laws.score_gap_max(cell, 1, ops)) / sd).exp()
    if laws.two_values(cell):
        return X(rho_max) * shape(rho_max)

    def box(a, b):
        p = peak.min(b).max(a) if float(peak.mid()) > float(a.mid()) else a
        return X(b) * shape(p)

    return _branch_and_bound(box, lambda r: X(r) * shape(r), start, rho_max, _geometric)


def _arc(cell: Cell, L: int) -> flint.arb:
    """``sup V(lam)`` (times the axis reach with a gain; module docstring)."""
    R = flint.arb(cell.d).sqrt()
    c = flint.arb(L**3) / 12 - flint.arb(L) / 3
    half = flint.arb(L) / 2

    def denominator(lam):
        return (L * lam + c / lam).max(half)

    def V(lam):
        return R * (1 + (half / lam).atan()) / denominator(lam)

    def box(a, b):
        # L lam + c/lam is convex (c > 0 for L >= 3, else increasing): smallest at the point
        # of [a, b] nearest sqrt(c/L); at a = 0 the arctangent is pi/2
        if float(c.mid()) > 0:
            p = (c / L).sqrt().min(b).max(a)
            low = denominator(p) if float(p.mid()) > 0 else half
        else:
            low = denominator(a) if float(a.mid()) > 0 else half
        top = 1 + ((half / a).atan() if float(a.mid()) > 0 else flint.arb.pi() / 2)
        return R * top / low

    tail_start = flint.arb(LAM_TAIL) * L
    inner = _branch_and_bound(box, V, flint.arb(0), tail_start, _geometric)
    tail = R * (1 + (half / tail_start).atan()) / (L * tail_start - abs(c) / tail_start)
    bound = inner.max(tail).min(2 * R)
    if cell.affine.gain:
        bound = bound * _arb(cell.kind.axis_reach(cell.d, laws.ARB.sqrt))
    dual = _dual(_arc_problem(cell), L)
    return bound.min(flint.arb(dual)) if math.isfinite(dual) else bound


def _arc_problem(cell: Cell) -> Cell:
    """The cell that stands for ``cell``'s arc problem: softmax attention where the foot is free
    (both attentions reach every arc, and the certificate is read from the softmax twin) and a
    gain without its bias (a bias shifts every logit of a class by one constant: the bound and
    the head's weights do not see it; any weights give a valid bound anyway)."""
    if laws.foot_distance(cell, 1) is None:
        cell = cell.replace(attention="softmax")
    return cell.replace(affine="gain") if cell.affine.bias else cell


@functools.lru_cache(maxsize=256)
def _dual(problem: Cell, L: int) -> float:
    """:func:`bounds.arc_margin.arc_upper` once per problem (:func:`_arc_problem`)."""
    return arc_upper(problem, L)


def margin_upper(cell: Cell, L: int) -> float | None:
    """A float ``U >= m`` for every parameter set of ``cell`` with every vector of norm <= 1
    (module docstring); None where no proof applies (``eps > 0`` with a norm; the last read:
    :func:`bounds.last_margin.last_margin_upper`, whose docstring says where it is None).

    The select task read at ``s``: the count task's bound.  *Proof.*  Its inputs ``(s, a^n)``
    are select inputs (``n_b = 0``) with the same classes, so a select head's margin is at most
    its margin on them, which is that of the same parameters without ``e_b`` on the count task,
    a parameter set of the count cell with every vector of norm at most 1.  The select task read
    last with linear attention: the count task's bound at the last read, by the same argument
    (``(s, a^n)`` read at its last token is the select input ``n_b = 0`` with query ``a``, ``(s)``
    at ``s``; the argument is the attention's and the norm's own, so it holds for softmax
    attention with pre-norm as well); after post-RMSNorm (``eps = 0``) the arc bound of
    :func:`bounds.last_margin._post`, whose proof covers every arc; or the bound
    of its query-``b`` inputs (:func:`bounds.last_margin.select_linear_upper`) where that is
    smaller.  With softmax
    attention without post-norm the smaller of that and the level bound of
    :mod:`bounds.select_margin`, which sees the distractor; without a norm (``L <= select_placement.MAX_L``) also
    the direction certificate over every placement (:mod:`bounds.select_placement`), which sees
    the radius of the head's rows too.  The select task read last with softmax attention (not
    scale-free: its embeddings' scores must keep a contrast): after bare post-norm at ``eps = 0``
    the count task's BOS arc bound of ``L - 1``, which holds for every head with rows of norm at
    most 1 whatever the embeddings (every output has norm ``sqrt(d)``, and the inputs ``(s,
    a^n)`` read at query ``a`` are an arc: :func:`bounds.last_margin._post`); else None."""
    if cell.readout != "classification":
        raise ValueError("margin_upper is for classification cells")
    if cell.read.last and (not cell.distractor or cell.attention == "linear" or cell.pre):
        from bounds.last_margin import _post, last_margin_upper, select_linear_upper  # they build on this module

        count = cell.replace(task="count")
        bound = last_margin_upper(count, L)
        if bound is None and cell.distractor and cell.post and cell.eps == 0:
            # linear attention after post-RMSNorm: the count task's z_1..z_L are an arc R unit(P + n Q)
            # (r(n) = e_a + tau <e_a, e_s> e_s + n tau |e_a|^2 e_a), so _post's proof holds
            bound = _post(count, L)
        bounds = [b for b in (bound, select_linear_upper(cell, L) if cell.distractor else None)
                  if b is not None]
        return min(bounds) if bounds else None
    if cell.read.last and cell.post and cell.eps == 0 and not cell.affine.gain and L >= 2:
        # the select task read last with softmax after bare post-norm (not scale-free): every
        # output has norm sqrt(d) whatever the embeddings, and the inputs (s, a^n) read at query
        # a are the count task's arc, so the BOS read's arc bound of L - 1 holds at every budget
        # (bounds.last_margin._post, its first bound)
        return margin_upper(cell.replace(task="count", read="bos"), L - 1)
    if (cell.eps > 0 and cell.normed) or cell.read.last:
        return None
    level = None
    if cell.distractor:
        from bounds import select_placement  # they build on this module
        from bounds.select_margin import applies, level_upper

        level = level_upper(cell, L) if applies(cell, L) else None
        if select_placement.applies(cell, L):
            level = min(level, select_placement.placement_upper(cell, L))
        cell = cell.replace(task="count")
    with flint.ctx.workprec(PREC):
        fam = laws.family(cell)
        if fam == "line":
            value = _arb(laws.capacity(cell, 1, 1, laws.ARB)) / L
        elif fam == "segment":
            value = _segment(cell, L)
        else:
            value = _arc(cell, L)
        bound = arb_ceil(value)
    return bound if level is None else min(bound, level)
