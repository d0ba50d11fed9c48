"""Certified verdicts: the judge in ball arithmetic, and a rigorous upper bound on ``B(theta)``.

:func:`certify` judges on ``arb256`` and, only if the balls are too wide to decide every count,
again on ``arb1024``: a verdict of either is rigorous (:mod:`verify.judge`), so the first
decided one is the verdict.  :func:`rigorous_bound` encloses every vector's Euclidean norm in a
ball and returns a float at least as large as the largest.
"""

from __future__ import annotations

import flint
import numpy as np

from constructions.cell import Params
from verify.backends import get_backend
from verify.forward import NormUndefined
from verify.judge import CountResult, counts_to

#: the ball backends tried in turn
CERTIFY = ("arb256", "arb1024")
#: the budget of the ``L = 1`` witness, where ``B_min = 0`` is an infimum (every budget > 0
#: counts), doubled up to ``WITNESS_STEPS`` times where the construction does not count there
WITNESS_BUDGET = 1e-3
WITNESS_STEPS = 10


def witness_budget(build) -> float:
    """The budget of the ``L = 1`` witness of a construction ``build(L, B) -> Params``: the first
    ``WITNESS_BUDGET 2^k`` (``k <= WITNESS_STEPS``) at which it counts to 1 in ball arithmetic
    (every construction does at ``k = 0`` but the one-sided arc, whose float read-out at small
    budgets has a margin below float64's resolution of its constant); ``WITNESS_BUDGET`` if none
    does (the caller's certification then says so)."""
    for k in range(WITNESS_STEPS + 1):
        B = WITNESS_BUDGET * 2.0**k
        if counts_to(build(1, B), 1, backend="arb256").counts:
            return B
    return WITNESS_BUDGET


def rigorous_bound(params: Params) -> float:
    """A float upper bound on ``B(theta)``, computed in ball arithmetic."""
    bk = get_backend("arb256")
    with bk.context():
        best = 0.0
        for v in params.vectors.values():
            rows = bk.vec(v)
            rows = rows if rows.ndim == 2 else rows[None, :]
            for row in rows:
                norm = flint.arb(sum((x * x for x in row), flint.arb(0))).sqrt()
                best = max(best, float(bk.upper(np.array([norm], dtype=object))[0]))
        return best


def certify(params: Params, L: int) -> CountResult:
    """Judge in ball arithmetic, raising the precision once if the balls are too wide.

    A norm input that the balls cannot tell from a degenerate one (constant for LayerNorm, zero
    for RMSNorm, with ``eps = 0``) is "cannot certify" too.
    """
    res = None
    for backend in CERTIFY:
        try:
            res = counts_to(params, L, backend=backend)
        except NormUndefined:
            res = CountResult(L=L, backend=backend, verdict="cannot certify", first_failure=None,
                              undecided=tuple(range(L + 1)))
            continue
        if res.verdict != "cannot certify":
            return res
    return res
