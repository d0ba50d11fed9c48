"""Every closed form against the certified sweep: wherever a closed form states that it holds,
it is the certified ``B_min`` of ``bounds.search.regression_row`` to the bisection tolerance.

For every regression cell: every ``L`` in ``2..200`` at ``d = 8``, and a sample of ``L`` at
``d = 3`` and ``d = 17``.  The certified ``B_min`` is a rigorous upper bound on the norms of a
parameter set confirmed in ball arithmetic, so it can only lie above the infimum the closed form
states, and the bisection stops within ``RTOL`` of the float64 threshold.  The rows skip the
lower bound (its own tests are elsewhere) and run in worker processes.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os

import pytest

from bounds.search import regression_row
from constructions.cell import ATTENTIONS, NORMS, Cell
from constructions.closed_forms import formula

RTOL = 1e-5
#: the certified B_min lies within a few RTOL above the infimum
SLACK = 3 * RTOL
SAMPLE = (2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 33, 64, 127, 200)
CASES = [(att, norm, d, L) for d in (8, 3, 17) for att, norm in itertools.product(ATTENTIONS, NORMS)
         for L in (range(2, 201) if d == 8 else SAMPLE)]


def _row(case):
    """``(case, closed form, certified B_min)``; the row carries ``closed_form(cell, L)``."""
    att, norm, d, L = case
    cell = Cell(att, norm, "regression", d=d)
    if not formula(cell).holds(L):
        return case, None, None
    row = regression_row(cell, L, rtol=RTOL, lower=False)
    return case, row["closed_form"]["B"], row["B_min"] if row["certified"] else None


@pytest.fixture(scope="module")
def rows():
    """Every case computed once, in parallel."""
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return {case: (form, b_min) for case, form, b_min in pool.map(_row, CASES, chunksize=8)}


@pytest.mark.parametrize("d", [8, 3, 17])
@pytest.mark.parametrize("att,norm", list(itertools.product(ATTENTIONS, NORMS)),
                         ids=["/".join(c) for c in itertools.product(ATTENTIONS, NORMS)])
def test_closed_form_is_the_certified_b_min(rows, att, norm, d):
    form = formula(Cell(att, norm, "regression", d=d))
    claimed = [L for (a, n, dd, L) in CASES if (a, n, dd) == (att, norm, d) and form.holds(L)]
    assert claimed  # every regression cell has a closed form at these widths
    if d == 8:
        assert claimed == [L for L in range(2, 201) if form.holds(L)]
    for L in claimed:
        value, b_min = rows[(att, norm, d, L)]
        assert b_min is not None, (L, "the sweep did not certify")
        assert value * (1 - 1e-12) <= b_min <= value * (1 + SLACK), (L, value, b_min)
