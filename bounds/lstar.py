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

found by doubling and bisection on ``L``, each test decided in ball arithmetic (the extremal
gaps are taken over a window of integers around ``sqrt(rho + L)`` and ``sqrt(rho)`` that
contains the argmax/argmin whatever the rounding); the precision is raised until every
comparison is decided.
"""

from __future__ import annotations

import functools
import math

import flint

from constructions import laws, segment
from constructions.cell import Cell


def _feasible(d: int, L: int, prec: int) -> bool | None:
    """Is ``D_lo < D_hi`` at ``rho_max`` for counting to L?  None if undecided at ``prec``."""
    with flint.ctx.workprec(prec):
        rho = (2 * flint.arb(d).sqrt()).exp()

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


def feasible(d: int, L: int) -> bool:
    """Whether softmax attention with bare pre-norm at width ``d`` can count to ``L`` (exact)."""
    if L <= 0:
        return True
    # enough bits that the ball around rho + L ~ L^2 is far narrower than 1 (exact windows)
    prec = max(128, 2 * int(L).bit_length() + 64)
    while True:
        res = _feasible(d, L, prec)
        if res is not None:
            return res
        prec *= 2
        if prec > 1 << 16:  # pragma: no cover - would need D_lo == D_hi exactly
            raise ArithmeticError(f"cannot decide feasibility of L={L} at d={d}")


@functools.lru_cache(maxsize=None)
def l_star(d: int) -> int:
    """``L*(d)``, exact (see the module docstring)."""
    if d < 2:
        raise ValueError(f"d must be at least 2, got {d}")
    lo = 1
    if not feasible(d, lo):
        return 0
    hi = 2
    while feasible(d, hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if feasible(d, mid) else (lo, mid)
    return lo


def cell_l_star(cell: Cell) -> int | None:
    """The exact largest countable ``L`` of a cell where it is finite, else None (also where a
    finite ``L`` is not derived: the read at the last position, and the case below).

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
    within ``1/2`` of ``n_a`` on all six inputs.  With ``eps > 0`` the values ``s_x v``
    (``-1 < s_x < 1``) are no longer two and this ``L*`` is not derived (None).

    Below the smallest width of post-norm (:func:`constructions.laws.smallest_d`) with
    ``eps = 0`` every input maps to one of two points: 1.
    """
    if cell.post and cell.d < laws.smallest_d(cell) and cell.eps == 0:
        return 1  # eps = 0: scale invariance leaves two points (with eps > 0 it does not)
    if cell.readout == "regression" and laws.family(cell) == "segment" and laws.rigid(cell):
        if cell.read.last:
            return None  # the query is h_a, not h_s: l_star's segment does not apply (not derived)
        if cell.distractor and laws.two_values(cell):
            return 2 if cell.eps == 0 else None
        return l_star(cell.d)
    return None
