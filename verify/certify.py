"""Certified verdicts: the judge in ball arithmetic, and a rigorous upper bound on ``B(theta)``.

:func:`certify` judges on ``arb256`` and, only if the balls are too wide to decide every count,
again on ``arb1024``: a verdict of either is rigorous (:mod:`verify.judge`), so the first
decided one is the verdict.  :func:`rigorous_bound` encloses every vector's Euclidean norm in a
ball and returns a float at least as large as the largest.
"""

from __future__ import annotations

import flint

from constructions.cell import Params
from verify.backends import arb_ceil, get_backend
from verify.forward import NormUndefined
from verify.judge import CountResult, counts_to

#: the ball backends tried in turn
CERTIFY = ("arb256", "arb1024")
#: the budget of the ``L = 1`` witness, where ``B_min = 0`` is an infimum (every budget > 0
#: counts), doubled up to ``WITNESS_STEPS`` times until the witness has ``WITNESS_MARGIN``
WITNESS_BUDGET = 1e-3
WITNESS_STEPS = 10
#: the margin ``1/2 - |y - n|`` the ``L = 1`` witness must have at every input
#: (:func:`witness_budget`)
WITNESS_MARGIN = 1e-6


def witness_budget(build) -> float:
    """The budget of the ``L = 1`` witness of a construction ``build(L, B) -> Params``.

    Rule: the first ``B = WITNESS_BUDGET 2^k`` (``k = 0..WITNESS_STEPS``) at which ``build(1, B)``
    counts to 1 in ball arithmetic with worst error ``|y - n| <= 1/2 - WITNESS_MARGIN`` at every
    input; if no budget of the grid has that margin, the first at which it counts at all; if
    none counts, ``WITNESS_BUDGET`` (the caller's certification then says so).

    Why a margin and not "counts".  At ``L = 1`` every budget counts and the read-out of a
    construction separates its targets by an amount that vanishes with ``B`` (measured at
    ``d = 8``: like ``B`` after bare post-LayerNorm, like ``B^5`` for the one-sided arc of
    linear attention after bare post-RMSNorm on the select task read last, whose margin at
    ``1e-3`` is ``2e-20``): "counts"
    alone picks a witness whose margin can be anything from ``1e-3`` to nothing a double
    resolves.  Its callers need the margin:

    * the sweep's ``L = 1`` row (:func:`bounds.search.regression_row`) prints ``worst_error``
      as a double (it read ``0.5`` beside ``certified``) and ``--save-params`` writes the witness
      rounded to float64 only where that rounding certifies too: a margin of ``1e-6`` is ten
      orders of magnitude above a double's relative spacing, so the rounded witness counts;
    * the precision walls (:mod:`verify.walls`) run the ``L = 1`` witness in each format as
      "the construction at ``B_min``"; for ``L >= 2`` that construction is built at
      ``(1 + RTOL) B_min`` with ``RTOL = 1e-6``, where its margin is about ``1e-6`` too, so the
      witness at ``WITNESS_MARGIN`` puts ``L = 1`` on the same footing as every other ``L``
      instead of on the accident of how fast one construction's margin vanishes.

    ``worst_error`` is the midpoint of its ball, within ``1e-15`` of the exact value: the
    comparison chooses the budget, it certifies nothing (the caller certifies the witness).
    """
    first = None
    for k in range(WITNESS_STEPS + 1):
        B = WITNESS_BUDGET * 2.0**k
        res = counts_to(build(1, B), 1, backend="arb256")
        if res.counts:
            if res.worst_error is not None and res.worst_error <= 0.5 - WITNESS_MARGIN:
                return B
            first = B if first is None else first
    return WITNESS_BUDGET if first is None else first


def rigorous_bound(params: Params, exclude: tuple[str, ...] = ()) -> float:
    """A float upper bound on ``B(theta)``, computed in ball arithmetic: the largest norm's ball
    rounded up to the nearest float above it (:func:`verify.backends.arb_ceil`; a norm that is 1
    to working precision, e.g. ``1 - 10^-33``, gives 1.0, not the next floats above); the vectors
    named in ``exclude`` left out (the head ``u`` of a classification cell whose embeddings alone
    set ``B_min``)."""
    bk = get_backend("arb256")
    with bk.context():
        best = 0.0
        for name, v in params.vectors.items():
            if name in exclude:
                continue
            rows = bk.vec(v)
            rows = rows if rows.ndim == 2 else rows[None, :]
            for row in rows:
                norm = flint.arb(sum((x * x for x in row), flint.arb(0))).sqrt()
                best = max(best, arb_ceil(norm))
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
