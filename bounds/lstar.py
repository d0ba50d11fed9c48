"""L*(d): the largest count that softmax attention with bare pre-norm can reach.

Under bare pre-norm ``|h_x| = sqrt(d)``, so ``sigma = <h_s, h_s - h_a> = d - <h_s, h_a>`` lies in
``[0, 2d]`` and ``rho = exp(sigma/sqrt(d)) <= rho_max = exp(2 sqrt(d))`` whatever the
parameters; the read-out vector ``w`` is unbounded, so the amplitude ``D`` is free.  By
:mod:`constructions.segment` the cell counts to ``L`` iff some ``rho <= rho_max`` has
``D_lo(rho) < D_hi(rho)``.

*Feasibility is monotone in rho.*  ``D_lo < D_hi`` means: for every pair of gaps ``k, k'``,
``(k-1) k' (rho+L)(rho+L-k) < rho k (k'+1)(rho+k')``.  The difference right minus left is a
quadratic in ``rho`` with leading coefficient ``k + k' > 0`` and constant term
``-(k-1) k' L (L-k) <= 0``, so it has one non-negative root and is positive exactly beyond it:
each pairwise condition holds on an up-set of ``rho``, and so does their conjunction.

*And in L* (counting to L includes counting to L-1).  Hence

    L*(d) = max { L : D_lo(rho_max, L) < D_hi(rho_max, L) },

found by doubling and bisection on ``L`` (:func:`l_star`), each test decided in ball arithmetic (the extremal
gaps are taken over a window of integers around ``sqrt(rho + L)`` and ``sqrt(rho)`` that
contains the argmax/argmin whatever the rounding); the precision is raised until every
comparison is decided.

*The last read* (:func:`last_l_star`).  Read at the last position, the query of ``n >= 1`` is
``h_a``: ``y(n) = K + D phi(n)``, ``phi(n) = n/(rho+n)``, ``D = <w, h_a - h_s>``,
``rho = exp(tau <h_a, h_s - h_a>)`` and ``y(0) = K + delta``, ``delta = <w, e_s - e_a>``.  Now
``<h_a, h_s> <= |h_a|^2 = d`` gives ``rho <= 1``, with ``rho = 1`` only at ``h_a = h_s`` where
``D = 0`` (nothing counts beyond ``L = 1``).  With ``m = n - 1`` and ``rho' = rho + 1``, ``D
phi(n) = D/rho' + (D rho/rho') m/(rho'+m)``: the counts ``1..L`` are the segment of ``L' =
L - 1`` at ``rho'``, any amplitude being reachable (``w`` is unbounded).  The offset ``delta``
is free too: LayerNorm ignores the ``one`` part of the embeddings and ``D`` the ``one`` part of
``w``, so ``delta`` takes any value; RMSNorm ignores the embeddings' scales ``lam_s, lam_a > 0``
and ``delta = lam_s <w, v_s> - lam_a <w, v_a>`` (``v`` the unit directions, independent for
``rho < 1``, ``h_a != -h_s``) with ``<w, v_s>, <w, v_a>`` free but for their difference
``D/sqrt(d)``: both positive, ``delta`` takes any value.  So the cell counts to ``L`` iff some
reachable ``rho' < 2`` has ``D_lo(rho', L') < D_hi(rho', L')``; that set of ``rho'`` is an open
up-set (above), and ``rho'`` reaches every value of ``(1 + exp(-2 sqrt(d)), 2)`` (``h_a`` turning
away from ``h_s``), so this holds iff it holds at ``rho' = 2``.  LayerNorm at ``d = 2`` has only
``h_a = +-h_s``: ``rho' = 1 + exp(-2 sqrt 2)`` decides.  Hence ``L* = 1 + max {L' : D_lo(2, L')
< D_hi(2, L')}``, independent of ``d``: 4 (at ``rho' = 2``, ``L' = 4`` has ``D_lo = D_hi = 6``).

*The last read, pre-LayerNorm at d = 2 with a gain and no bias* (``eps = 0``): also 4.  The
values are ``+-v``, ``v = g * (1, -1)``; ``h_a = h_s`` gives one output for every ``n >= 1``, so
``h_a = -h_s`` and ``rho = exp(-2 tau |v|^2) < 1``: ``rho' < 2`` and, as above, nothing counts
beyond ``L = 4``.  ``|v| = |g|`` is free, so ``rho'`` reaches every value of ``(1, 2)``, and the
amplitude ``D = <w, h_a - h_s> = -2 <w, v>`` and the offset ``delta = <w, e_s - e_a>`` are free
(take ``g = (G, G)``, so ``v`` is centred and the part of ``w`` along ``one`` moves only
``delta``, through the parts of the embeddings along ``one``, which LayerNorm removes): the open
up-set of feasible ``rho'`` contains ``2`` for ``L' = 3`` and so some ``rho' < 2``, and ``L = 4``
counts.  (With a bias the shape is free: :func:`constructions.laws.last_value_gap`, rate 1.)

*The last read with eps > 0* (:func:`last_l_star_eps`).  Now ``|N(e)| = |e_c| / sqrt(|e_c|^2/d +
eps)`` takes every length in ``[0, sqrt(d))`` (the scale of ``e`` is free), so the values fill
the open ball of radius ``sqrt(d)`` (in the centred subspace for LayerNorm) and ``<h_a, h_s -
h_a> <= |h_a| |h_s| - |h_a|^2 <= |h_s|^2/4 < d/4``: ``rho < exp(sqrt(d)/4)``, approached by
``h_a = h_s/2`` with ``|h_s| -> sqrt(d)``.  The amplitude and the offset stay free (LayerNorm:
the ``one`` parts; RMSNorm: turn ``h_a`` by a small angle off ``h_s``, which moves ``rho``
continuously, and ``<w, .>`` on two independent directions), so as above the cell counts to
``L`` iff the open up-set of feasible ``rho'`` meets ``(1, 1 + exp(sqrt(d)/4))``, i.e. iff it
holds at ``rho' = 1 + exp(sqrt(d)/4)``: ``L* = 1 + max {L' : D_lo < D_hi there}``, for every
``eps > 0``, either kind, every ``d >= 2``.

*What the report says where no exact L* is derived* (:func:`l_star_status`): ``infinite``
(the cell's construction counts to every ``L``), ``finite`` (a sub-task has a finite ``L*``,
a proven upper bound, the exact value not derived) or ``unknown``.
"""

from __future__ import annotations

import functools
import math

import flint

from constructions import laws, segment
from constructions.cell import Cell


def _bos_shape(d: int) -> flint.arb:
    """``rho_max = exp(2 sqrt(d))``, the largest attention ratio of bare pre-norm read at ``s``
    (a ball at the current precision)."""
    return (2 * flint.arb(d).sqrt()).exp()


def _feasible(d: int, L: int, prec: int, shape=_bos_shape) -> bool | None:
    """Is ``D_lo < D_hi`` at ``shape(d)`` (default ``rho_max``) for counting to L?  None if
    undecided at ``prec``."""
    with flint.ctx.workprec(prec):
        rho = shape(d)

        def window(x: flint.arb):
            # exact integer floor of sqrt(mid x): floats would lose integers beyond 2^53
            return segment.candidates(math.isqrt(int(x.mid().floor().unique_fmpz())), L)

        lo = [segment.lo_term(k, rho, L) for k in window(rho + L)]
        hi = [segment.hi_term(k, rho, L) for k in window(rho)]
        top = functools.reduce(lambda a, b: a.max(b), lo)
        bottom = functools.reduce(lambda a, b: a.min(b), hi)
        if top < bottom:
            return True
        if top >= bottom:
            return False
        return None


def feasible(d: int, L: int, shape=_bos_shape) -> bool:
    """Whether the Mobius segment at ``shape(d)`` (default ``rho_max``: softmax attention with
    bare pre-norm at width ``d``) has counting amplitudes for ``0..L`` (exact)."""
    if L <= 0:
        return True
    # enough bits that the ball around rho + L ~ L^2 is far narrower than 1 (exact windows)
    prec = max(128, 2 * int(L).bit_length() + 64)
    while True:
        res = _feasible(d, L, prec, shape)
        if res is not None:
            return res
        prec *= 2
        if prec > 1 << 16:  # pragma: no cover - would need D_lo == D_hi exactly
            raise ArithmeticError(f"cannot decide feasibility of L={L} at d={d}")


def _largest(test) -> int:
    """The largest ``L >= 0`` with ``test(L)`` (a down-set of ``L``, ``test(0)`` true), by
    doubling and bisection."""
    lo = 0
    hi = 1
    while test(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if test(mid) else (lo, mid)
    return lo


@functools.lru_cache(maxsize=None)
def l_star(d: int) -> int:
    """``L*(d)``, exact (see the module docstring)."""
    if d < 2:
        raise ValueError(f"d must be at least 2, got {d}")
    return _largest(lambda L: feasible(d, L))


def _last_shape(centred_d2: bool):
    """The shape ``rho' = rho + 1`` that decides the last read (module docstring): 2, or
    ``1 + exp(-2 sqrt(2))`` for LayerNorm at ``d = 2`` (values ``+-h_s`` only)."""
    if centred_d2:
        return lambda d: 1 + (-2 * flint.arb(2).sqrt()).exp()
    return lambda d: flint.arb(2)


@functools.lru_cache(maxsize=None)
def last_l_star(d: int, centred: bool = True) -> int:
    """``L*`` of softmax attention with bare pre-norm read at the last position (module
    docstring, *the last read*), exact: ``1 + max {L' : D_lo(rho', L') < D_hi(rho', L')}`` at
    ``rho' = 2`` (``1 + exp(-2 sqrt 2)`` for LayerNorm at ``d = 2``; ``centred`` names the kind)."""
    if d < 2:
        raise ValueError(f"d must be at least 2, got {d}")
    shape = _last_shape(centred and d == 2)
    return 1 + _largest(lambda L: feasible(d, L, shape))


def _last_eps_shape(d: int) -> flint.arb:
    """``rho' = 1 + exp(sqrt(d)/4)``, the supremum of the last read's shapes with ``eps > 0``."""
    return 1 + (flint.arb(d).sqrt() / 4).exp()


@functools.lru_cache(maxsize=None)
def last_l_star_eps(d: int) -> int:
    """``L*`` of softmax attention with bare pre-norm and ``eps > 0`` read at the last position
    (module docstring, *the last read with eps > 0*), exact: ``1 + max {L' : D_lo(rho', L') <
    D_hi(rho', L')}`` at ``rho' = 1 + exp(sqrt(d)/4)``."""
    if d < 2:
        raise ValueError(f"d must be at least 2, got {d}")
    return 1 + _largest(lambda L: feasible(d, L, _last_eps_shape))


def l_star_reason(cell: Cell) -> str:
    """Why the cell's ``L*`` (:func:`cell_l_star`) is finite, in words."""
    if cell.distractor and not cell.read.last and cell.kind.image_dim(cell.d) == 1 and cell.pre:
        return ("the select task with two values (pre-LayerNorm at d = 2: b is a copy of a or "
                "of s)")
    if cell.read.last and not cell.normed:
        return "softmax without a norm at the last read (e = h ties y(0) to the amplitude)"
    if cell.read.last and cell.eps > 0:
        return "bare pre-norm with eps > 0 at the last read (rho < exp(sqrt(d)/4))"
    if cell.read.last and cell.distractor and laws.two_values(cell):
        return ("bare pre-LayerNorm at d = 2 at the last read (two values: b is a copy of a or "
                "of s)")
    if cell.read.last and cell.distractor:
        return ("bare pre-norm at the last read (its count task, the sub-task n_b = 0: scores from "
                "h_a favour a, rho <= 1)")
    if cell.read.last and cell.affine.gain:
        return ("pre-LayerNorm with a gain and no bias at d = 2 at the last read (two values +-v: "
                "scores from h_a favour a, rho < 1)")
    if cell.read.last:
        return "bare pre-norm at the last read (scores from h_a favour a: rho <= 1)"
    if cell.post:
        return f"post-norm at d = {cell.d}"
    return "bare pre-norm"


def cell_l_star(cell: Cell) -> int | None:
    """The exact largest countable ``L`` of a cell where it is finite, else None (also where a
    finite ``L`` is not derived: the case below).

    Softmax regression with rigid values (bare pre-norm, either norm kind: ``|h| = sqrt(d)``
    and the score gap reaches ``2 d`` at ``h_a = -h_s``) read at ``s``: :func:`l_star`, for the
    select task too.  *Proof (select).*  The count task is a sub-task, so nothing solves select
    beyond ``L*``.  At ``L <= L*`` the count task's interval is open at ``rho_max`` (the feasible
    shapes are an up-set, module docstring), and by continuity of the strict inequalities at
    some ``rho < rho_max``; there ``gamma < pi`` and :mod:`constructions.select`'s construction
    (``y_b = y_s``, ``beta <= 1``, a read-out turned by ``phi < pi/2``) reaches every amplitude
    at a finite budget, and solves select iff it counts.

    That construction needs a plane of values: bare pre-LayerNorm at ``d = 2``
    (:func:`constructions.laws.two_values`) has, with ``eps = 0``, only ``h = +-v``, and the
    select task read at ``s`` stops at ``L = 2``.  *Proof.*  Counting ``n = 0, 1`` needs
    ``h_a = -h_s`` (``h_a = h_s`` makes ``y`` constant), and ``h_b = h_a`` reads ``(s, b)`` as
    ``(s, a)``; so ``h_b = h_s``, the weights of ``s, a, b`` are ``rho, 1, rho`` and the inputs
    ``(n_a, n_b) = (2, 1)`` and ``(1, 0)`` mix ``h_s`` and ``h_a`` in the same proportion
    ``rho : 1`` (``2 rho : 2`` against ``rho : 1``): one output for the targets 2 and 1.  At
    ``L = 2`` the read-out ``y = 20 n_a / (rho (1 + n_b) + n_a)`` (``rho = exp(2 sqrt 2)``) is
    within ``1/2`` of ``n_a`` on all six inputs.  The same holds with a learned pre-LayerNorm
    (values ``beta +- g * (1, -1)``, :mod:`constructions.two_value_select`).  Linear attention
    with pre-LayerNorm without a bias at ``d = 2`` (every value ``+-v``): 0, since each ``b``
    adds ``tau |v|^2 h_s`` to the attention as each ``a`` does (:func:`constructions.tasks.refusal`).
    With ``eps > 0`` the values ``s_x v``
    (``-1 < s_x < 1``) are no longer two and this ``L*`` is not derived (None).

    Below the smallest width of post-norm (:func:`constructions.laws.smallest_d`: LayerNorm at
    ``d = 2``) with ``eps = 0``: 1, at either read, for either task, attention and read-out.
    *Proof.*  At ``d = 2`` the centring is ``C(v) = ((v_1 - v_2)/2) (1, -1)`` and the variance
    ``((v_1 - v_2)/2)^2``, so ``N(v) = sign(v_1 - v_2) (1, -1)``, undefined at ``v_1 = v_2`` (a
    parameter set with such a norm input computes nothing; the judge refuses it): the output
    ``z = g * N(r) + beta`` (bare: ``N(r)``) is one of two points whatever the input, and so is
    the read-out (regression ``y = <w, z> + w0``; classification the argmax).  Counting
    ``0, 1, 2`` needs three outputs: ``|y - n| < 1/2`` for two different integers ``n`` cannot
    hold at one ``y``, nor can one argmax be two classes.  The count task's inputs are the select
    task's (``n_b = 0``), so nothing solves either beyond ``L = 1``.  ``L = 1`` is solved: at the
    last read the count 0 is ``(s)`` read at ``s`` and the count 1 is ``(s, a)`` read at ``a``, and
    the constructions of :mod:`constructions.last_post` (the two residuals ``-(c + u) top`` and
    ``(1 - c) top``, ``c = 1/2``, up to positive factors: opposite sides of the centred line),
    :mod:`constructions.select_last_post` and :mod:`constructions.select_last_linear_post` (which
    also read ``(s, b)`` on the side of ``(s)``) solve it, certified in ball arithmetic by the judge
    (``tests/test_last_narrow_post.py``); at the read at ``s`` likewise the families of
    :mod:`constructions.regression`.  Softmax regression read at the last
    position: 2 without a norm (:mod:`constructions.last_read`; the select task too,
    :func:`last_select_free_l_star`), :func:`last_l_star` with bare
    pre-norm (:func:`last_l_star_eps` with ``eps > 0``) and with pre-LayerNorm at ``d = 2`` with a
    gain and no bias, ``eps = 0`` (module docstring: 4; no construction is built there).
    """
    if cell.post and cell.d < laws.smallest_d(cell) and cell.eps == 0:
        return 1  # eps = 0: scale invariance leaves two points (with eps > 0 it does not)
    if cell.read.last:
        if cell.readout != "regression" or laws.family(cell) != "segment":
            return None
        if cell.distractor:  # None but without a norm and with bare pre-norm (eps = 0)
            return last_select_free_l_star(cell) or last_select_bare_l_star(cell)
        if not cell.normed:
            from constructions.last_read import PAIR_L_STAR

            return PAIR_L_STAR  # e = h ties y(0) to the Mobius amplitude (constructions.last_read)
        if (cell.pre and cell.affine.gain and not cell.affine.bias and cell.kind.image_dim(cell.d) == 1
                and cell.eps == 0):
            return last_l_star(cell.d, centred=False)  # a gain, no bias: the shape rho' = 2 decides
        if not laws.rigid(cell):
            return None
        return last_l_star_eps(cell.d) if cell.eps > 0 else last_l_star(cell.d, cell.kind.centred)
    if cell.readout == "regression" and laws.family(cell) == "segment" and laws.rigid(cell):
        if cell.distractor and laws.two_values(cell):
            return 2 if cell.eps == 0 else None
        return l_star(cell.d)
    if (cell.readout == "regression" and laws.family(cell) == "segment" and cell.distractor
            and cell.pre and cell.kind.image_dim(cell.d) == 1 and cell.eps == 0):
        return 2  # two values with a gain as well (constructions.two_value_select)
    if (cell.readout == "regression" and cell.attention == "linear" and cell.distractor
            and not cell.read.last and laws.on_a_line(cell) and cell.eps == 0):
        return 0  # b adds what a adds (constructions.tasks.refusal): nothing solves L = 1
    return None


def l_star_status(cell: Cell) -> tuple[str, int | None]:
    """``(status, value)`` of the cell's ``L*`` (module docstring): ``("exact", L*)``
    (:func:`cell_l_star`); ``("finite", U)`` where ``L*`` is finite but not derived, ``U`` a
    proven upper bound: the select task with bare pre-norm (the count task is a sub-task, so
    nothing solves it beyond the count task's ``L*``); ``("infinite", None)`` where the cell's
    construction counts to every ``L`` (no refusal, none of the finite cases); ``("unknown",
    None)`` else: a cell without a construction, or post-norm below its smallest width with
    ``eps > 0``, where the construction stops but no bound is proven."""
    star = cell_l_star(cell)
    if star is not None:
        return "exact", star
    if (cell.distractor and cell.readout == "regression" and laws.family(cell) == "segment"
            and laws.rigid(cell)):
        count = cell_l_star(cell.replace(task="count"))
        if count is not None:
            return "finite", count
    from constructions.refusals import refusal  # plain cell logic: no sympy

    if refusal(cell) is not None or (cell.post and cell.d < laws.smallest_d(cell)):
        return "unknown", None
    return "infinite", None


def last_select_free_l_star(cell: Cell) -> int | None:
    """The exact ``L*`` of the select task read last with softmax attention and no norm
    (regression): 2 at every ``d``, None for other cells.  *Proof.*  The count task read last is
    its sub-task ``n_b = 0`` and stops at ``L* = 2`` (:class:`constructions.last_read.PairDesign`),
    so nothing solves select beyond 2; :class:`constructions.select_last_pair.SelectPairDesign`
    (``b`` a copy of ``s``) solves it to 2 at every budget above the count task's ``B*``, every
    ``d``, certified in ball arithmetic by the judge (``tests/test_select_last_pair.py``)."""
    if (cell.readout != "regression" or cell.attention != "softmax" or cell.normed
            or not cell.distractor or not cell.read.last):
        return None
    from constructions.last_read import PAIR_L_STAR  # sympy: only the last read loads it

    return PAIR_L_STAR


def last_select_bare_l_star(cell: Cell) -> int | None:
    """The exact ``L*`` of the select task read last with softmax attention and bare pre-norm at
    ``eps = 0`` (regression; LayerNorm ``d >= 3``, RMSNorm every ``d``): 4, the count task's
    :func:`last_l_star`; None for other cells.  *Proof.*  The count task read last is the
    sub-task ``n_b = 0`` (the inputs ``(s)`` and ``(s, a^n)`` with their targets and queries), so
    nothing solves select beyond ``last_l_star(d) = 4``;
    :class:`constructions.select_last_bare.BareSelectLastDesign` (three values on one great
    circle) solves it at ``L = 1..4``, certified in ball arithmetic by the judge
    (``tests/test_select_last_pre.py``).

    LayerNorm at ``d = 2`` has the two values ``+-v`` only: 2.  *Proof.*  Counting ``(s, a)``
    against ``(s, a, a)`` needs ``h_a = -h_s`` (``h_a = h_s`` gives both one output).  ``h_b = h_a``
    gives ``(s, a, b)`` and ``(s, b, b)`` one query, one multiset of values and one residual
    ``e_b + A``, so one output for the targets 1 and 0: nothing solves ``L = 2``.  So ``h_b = h_s``,
    and from the query ``a`` the tokens ``s`` and ``b`` weigh ``rho = exp(-2 sqrt 2)`` of an ``a``:
    ``y = K_a + D psi`` with ``psi = n_a/((1 + n_b) rho + n_a)``, ``D = <w, h_a - h_s>``.  At ``L =
    3`` the inputs ``(s, a)``, ``(s, a, a, a)`` (targets 1, 3) need ``D (psi_30 - psi_10) > 1`` and
    ``(s, a)``, ``(s, b, b, a)`` (both 1) need ``D (psi_10 - psi_12) < 1``, with ``psi_10 = 1/(rho +
    1)``, ``psi_30 = 3/(rho + 3)``, ``psi_12 = 1/(3 rho + 1)``: both hold only if ``psi_10 - psi_12
    < psi_30 - psi_10``, i.e. ``2/(rho + 1) < 3/(rho + 3) + 1/(3 rho + 1)``, but the difference
    ``2/(rho + 1) - 3/(rho + 3) - 1/(3 rho + 1) = 4 rho (1 - rho)/((rho + 1)(rho + 3)(3 rho + 1))``
    is positive for every ``0 < rho < 1`` (checked in sympy and, at ``rho = exp(-2 sqrt 2)``, in
    ball arithmetic by the tests).  The construction with ``h_a = -h_s``, ``h_b = h_s`` solves
    ``L = 2`` (certified)."""
    if (cell.readout != "regression" or cell.attention != "softmax" or not laws.rigid(cell)
            or cell.eps != 0 or not cell.distractor or not cell.read.last):
        return None
    if laws.two_values(cell):
        return 2
    return last_l_star(cell.d, cell.kind.centred)
