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
pre-norm and no norm), so there it is the max-min margin.  With a gain the largest ``kappa``
leaves ``z_0`` on or near the line (:func:`constructions.last_read.opposed_vectors`), and this
bound, which ignores ``z_0``, stays about ``1 + kappa/((L-1) G)`` above the construction (``G``
its first gap).

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
    <= 2 M`` with a gain (``|N_i| <= M``, the kind's largest coordinate; a bias cancels)."""
    from bounds.margin import margin_upper  # it imports this module

    if L >= 2:
        return margin_upper(cell.replace(read="bos"), L - 1)
    with flint.ctx.workprec(PREC):
        if cell.affine.gain:
            reach = flint.arb(cell.kind.max_coordinate(cell.d, laws.ARB.sqrt))
        else:
            reach = flint.arb(cell.d).sqrt()
        return arb_ceil(2 * reach)


def _arb(x) -> flint.arb:
    return x if isinstance(x, flint.arb) else flint.arb(x)


def last_margin_upper(cell: Cell, L: int) -> float | None:
    """A float ``U >= m`` for every parameter set of ``cell`` (classification, the count task at
    the last read) with every vector of norm <= 1 (module docstring); None where no proof
    applies: post-norm with ``eps > 0`` or without an arc construction; bare pre-norm softmax
    with ``eps > 0``).  Only upper bounds on ``|h|`` and ``|h_a - h_s|`` are used, which hold for
    every ``eps`` (``|N(v)| <= sqrt(d)``, ``|N(v)_i| <= M``), except the exact ``X = sqrt(-2
    sigma)`` of bare pre-norm (``eps = 0``); after post-norm (``eps = 0``): :func:`_post`."""
    if registry.builds("last_post", cell):  # constructions.last_post.built, without its sympy
        return _post(cell, L)
    if cell.post or (cell.attention == "softmax" and laws.rigid(cell) and cell.eps > 0):
        return None
    with flint.ctx.workprec(PREC):
        if laws.family(cell) == "line":
            cap = _arb(laws.capacity(cell, 1, 1, laws.ARB))
            value = 2 + 3 * cap if L == 1 else cap / (L - 1)
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
