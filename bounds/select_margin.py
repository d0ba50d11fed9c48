"""A proven upper bound on the max-min margin of the select task read at ``s``, softmax attention
without post-norm, that sees the distractor.

**The outputs** (:mod:`constructions.pencil`).  With values ``h_s, h_a, h_b``, ``tau = 1/sqrt(d)``,
``rho = exp(tau <h_s, h_s - h_a>)`` and ``beta = exp(tau <h_s, h_b - h_a>)``, the input with
``n_a`` tokens ``a`` and ``n_b`` tokens ``b`` has the output

    z(n_a, n_b) = H + t (P_{n_a} - H),   t = (rho + n_a)/(rho + n_a + beta n_b),

``H = e_s + h_b``, ``P_n = z(n, 0) = e_s + h_s + phi(n)(h_a - h_s)``, ``phi(n) = n/(rho + n)``.
So ``P_{n+1} - P_n = g_n e`` with ``e = (h_a - h_s)/X``, ``X = |h_a - h_s|`` and
``g_n = X rho/((rho + n)(rho + n + 1))``.  The smallest ``t`` of class ``n`` is that of its
longest input ``(n, L - n)``, ``T_n = (rho + n)/(rho + n + beta (L - n))``, which increases with
``n`` (the numerator grows, ``beta (L - n)`` falls) up to ``T_L = 1``.

**The level pairs.**  For ``n = 0..L-1`` the point ``z* = H + T_{n+1} (P_n - H)`` is a convex
combination of the class-``n`` inputs ``P_n`` (``t = 1``) and ``z(n, L - n)`` (``t = T_n <=
T_{n+1}``); every margin condition ``l_n(z) - l_c(z) >= m`` is affine in ``z``, so it holds at
``z*`` too.  With the class-``(n+1)`` input ``z(n+1, L-n-1) = H + T_{n+1} (P_{n+1} - H)`` the two
conditions of the pair ``n, n+1`` add up to (the biases cancel)

    <u_{n+1} - u_n, T_{n+1} g_n e> >= 2 m:

the distractor drives both classes to the same level ``T_{n+1}``, where their gap along the
count line has shrunk by that factor.  With ``k_c = <u_c, e>`` in ``[-1, 1]``, dividing by
``T_{n+1} g_n`` and summing telescopes to ``2 m sum_n 1/(T_{n+1} g_n) <= k_L - k_0 <= 2``:

    m <= F = X rho / S,   S = sum_{n=0}^{L-1} (rho + n)(rho + n + 1 + beta (L - 1 - n))
         = L rho^2 + L^2 rho + (L^3 - L)/3 + beta (rho L (L - 1)/2 + L (L - 1)(L - 2)/6)

(``sum_n n (L - 1 - n) = L (L - 1)(L - 2)/6``).  ``beta = 0`` gives the count task's bound
(:func:`bounds.margin.margin_upper`); every ``beta > 0`` lowers it.

**The distractor cannot hide.**  ``log beta - log rho = tau (<h_s, h_b> - |h_s|^2) >= -tau
(|h_s| |h_b| + |h_s|^2) >= -tau M``, ``M = 2 H^2`` with ``|h| <= H`` at unit budget
(:func:`constructions.laws.value_reach`; ``H = sqrt(d)`` for bare pre-norm, ``M = 2 d``).  ``S``
increases with ``beta``, so ``F <= X rho/S(rho, rho kappa)``, ``kappa = exp(-tau M)``; with
``X <= value_gap(sigma)`` (:func:`constructions.laws.value_gap`, increasing in the score gap
``sigma = sqrt(d) log rho``)

    m <= G(rho) = value_gap(sigma(rho)) / (L rho + L^2 + c/rho + kappa (rho L (L-1)/2 + L (L-1)(L-2)/6)),

``c = (L^3 - L)/3``.  The denominator is convex in ``rho``, smallest at ``rho* = sqrt(c/(L +
kappa L (L - 1)/2))``, and ``rho* >= 1`` for ``L >= 3``: ``c >= L + L (L - 1)/2`` iff ``2 L^2 - 3 L
- 5 = (2 L - 5)(L + 1) >= 0``.  So for ``rho < 1`` (``sigma < 0``) both factors are below their
values at ``rho = 1``, and the supremum of ``G`` over ``[1, rho_max]`` (``rho_max`` from
:func:`constructions.laws.score_gap_max`) bounds every parameter set: a branch and bound (on
``[r0, r1]``: ``value_gap`` at ``r1``, the denominator at the point of ``[r0, r1]`` nearest
``rho*``), in ball arithmetic.  Bare pre-LayerNorm at ``d = 2`` realises only ``rho = 1``
(``X = 0``) and ``rho_max``: there the bound is ``G(rho_max)``.

*What it does not see.*  The bound drops the part of ``u_c`` orthogonal to ``e``: it is reached
only if the head's separators can follow the rays through ``H`` (the level head of
:mod:`constructions.pencil`) at no cost in norm, i.e. with ``H`` far from the count line or
beside its middle.  Its supremum takes ``beta = kappa rho`` (``h_b = -h_s`` at the largest norm)
together with the largest ``X``: without a norm that is ``h_b = h_a = -h_s``, where ``H`` is on
the count line and no head separates at all; with pre-norm ``H`` projects beyond the end of the
count line, where the head's rows drift off the ``e`` axis.  The construction's margin is below
it by the price of keeping ``H`` off the line or beside it.
"""

from __future__ import annotations

import flint

from bounds.margin import PREC, _arb, _branch_and_bound, _geometric
from constructions import laws
from constructions.cell import Cell
from verify.backends import arb_ceil


def level_sum(rho, beta, L: int):
    """``S = L rho^2 + L^2 rho + (L^3 - L)/3 + beta (rho L (L - 1)/2 + L (L - 1)(L - 2)/6)``, the
    sum over ``n`` of ``(rho + n)(rho + n + 1 + beta (L - 1 - n))`` (module docstring), in any
    number type (balls, intervals, jets, floats).  The coefficients are integers, exact as
    floats below ``2^53`` (the select task's ``L`` is below 2895: :data:`verify.judge.MAX_INPUTS`)."""
    return (L * rho * rho + L * L * rho + (L**3 - L) // 3
            + beta * (rho * (L * (L - 1) // 2) + L * (L - 1) * (L - 2) // 6))


def applies(cell: Cell, L: int) -> bool:
    """Whether the level bound is proven for ``cell`` at ``L`` (module docstring): the select task
    read at ``s``, softmax attention without post-norm, classification, ``eps = 0`` under a
    norm, ``L >= 3``."""
    return (cell.distractor and not cell.read.last and cell.attention == "softmax" and not cell.post
            and cell.readout == "classification" and (cell.eps == 0 or not cell.normed) and L >= 3)


def level_upper(cell: Cell, L: int) -> float:
    """``sup G`` (module docstring) rounded up: a float ``U >= m`` for every parameter set of the
    select cell with every vector of norm at most 1.  ``ValueError`` where it does not apply."""
    if not applies(cell, L):
        raise ValueError(f"{cell.describe()}, L = {L}: the level bound needs the select task read "
                         "at s, softmax attention without post-norm, eps = 0 under a norm, L >= 3")
    count = cell.replace(task="count")
    with flint.ctx.workprec(PREC):
        return arb_ceil(_level(count, L))


def _level(cell: Cell, L: int) -> flint.arb:
    ops = laws.ARB
    sd = flint.arb(cell.d).sqrt()
    tau = 1 / sd
    if laws.rigid(cell):
        M = flint.arb(2 * cell.d)
    else:
        H, _ = laws.value_reach(cell, ops)
        M = 2 * _arb(H) ** 2
    kappa = (-tau * M).exp()
    c = flint.arb(L**3 - L) / 3
    lin = L + kappa * flint.arb(L * (L - 1)) / 2
    peak = (c / lin).sqrt()

    def X(rho):
        return _arb(laws.value_gap(cell, 1, sd * rho.log(), ops))

    def denominator(rho):  # S(rho, kappa rho)/rho = lin rho + (a constant) + c/rho: convex
        return level_sum(rho, kappa * rho, L) / rho

    rho_max = (_arb(laws.score_gap_max(cell, 1, ops)) / sd).exp()
    if laws.two_values(cell):
        return X(rho_max) / denominator(rho_max)

    def box(a, b):
        p = peak.min(b).max(a)
        return X(b) / denominator(p)

    return _branch_and_bound(box, lambda r: X(r) / denominator(r), flint.arb(1), rho_max, _geometric)
