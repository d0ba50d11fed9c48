"""Every closed form against the certified sweep: wherever a closed form states that it holds,
it is the certified ``B_min`` of ``bounds.search.regression_row`` to the bisection tolerance.

For every LayerNorm regression cell of the five variants: every ``L`` in ``2..64`` and a sample
up to ``200`` at ``d = 8`` (at ``d = 8`` the forms change piece below ``L = 36``, and their
integer parts -- the floors and ceilings in ``L`` -- every few ``L``), and a sample of ``L`` at
``d = 3`` and ``d = 17``; for the RMSNorm cells and LayerNorm with a gain and no bias (every
construction the toolkit builds): a sample of ``L`` at ``d = 2, 3, 8``.  The certified ``B_min`` is a rigorous upper bound on the norms of a
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
from constructions.closed_forms import formula, ranges
from constructions.laws import foot_distance

RTOL = 1e-5
#: the certified B_min lies within a few RTOL above the infimum
SLACK = 3 * RTOL
SAMPLE = (2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 33, 64, 127, 200)
#: d = 8: every L to 64, then a sample
DENSE = (*range(2, 65), 65, 96, 127, 128, 129, 160, 200)
LAYERNORM = [(att, norm, "layernorm", None) for att, norm in itertools.product(ATTENTIONS, NORMS)]
#: the new kinds and affines: (attention, variant, norm kind, affine), every one the toolkit builds
NEW = [(att, variant, kind, affine) for att in ATTENTIONS
       for variant, kind, affine in (("none", "rmsnorm", None), ("pre_bare", "rmsnorm", None),
                                     ("pre_learned", "rmsnorm", "gain"), ("pre_learned", "rmsnorm", "gain_bias"),
                                     ("post_bare", "rmsnorm", None), ("post_learned", "rmsnorm", "gain"),
                                     ("post_learned", "rmsnorm", "gain_bias"), ("pre_learned", "layernorm", "gain"),
                                     ("post_learned", "layernorm", "gain"))
       if foot_distance(Cell(att, variant, "regression", norm=kind, affine=affine), 1) is None]
NEW_SAMPLE = (2, 5, 7, 9, 33)
CASES = ([(*parts, d, L) for d in (8, 3, 17) for parts in LAYERNORM for L in (DENSE if d == 8 else SAMPLE)]
         + [(*parts, d, L) for d in (2, 3, 8) for parts in NEW for L in NEW_SAMPLE])


def _cell(att, norm, kind, affine, d):
    return Cell(att, norm, "regression", d=d, norm=kind, affine=affine)


def _row(case):
    """``(case, closed form, certified B_min)``; the row carries ``closed_form(cell, L)``."""
    *parts, L = case
    cell = _cell(*parts)
    form = formula(cell)
    if form is None or not form.holds(L):
        return case, None, None
    row = regression_row(cell, L, rtol=RTOL, lower=False)
    return case, row["closed_form"]["B"], row["B_min"] if row["certified"] else None


@pytest.fixture(scope="module")
def rows():
    """Every case computed once, in parallel."""
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return {case: (form, b_min) for case, form, b_min in pool.map(_row, CASES, chunksize=8)}


PARAMS = ([(*parts, d) for d in (8, 3, 17) for parts in LAYERNORM]
          + [(*parts, d) for d in (2, 3, 8) for parts in NEW])


@pytest.mark.parametrize("att,norm,kind,affine,d", PARAMS,
                         ids=[f"{a}/{n}/{k}-{f or 'bare'}/d{d}" for a, n, k, f, d in PARAMS])
def test_closed_form_is_the_certified_b_min(rows, att, norm, kind, affine, d):
    cell = _cell(att, norm, kind, affine, d)
    form = formula(cell)
    if form is None:
        # only where the cell has no arc (post-LayerNorm at d = 2) or two score gaps (bare
        # pre-LayerNorm at d = 2)
        assert d == 2 and cell.kind.centred
        return
    claimed = [L for (*parts, L) in CASES if tuple(parts) == (att, norm, kind, affine, d) and form.holds(L)]
    assert claimed  # every regression cell has a closed form at these widths
    if d == 8 and (kind, affine) == ("layernorm", None):
        assert claimed == [L for L in DENSE if form.holds(L)]
        # every change of piece lies in the dense part
        assert all(r[0] <= 64 and (r[1] is None or r[1] < 64) for r in ranges(cell))
    for L in claimed:
        value, b_min = rows[(att, norm, kind, affine, d, L)]
        assert b_min is not None, (L, "the sweep did not certify")
        assert value * (1 - 1e-12) <= b_min <= value * (1 + SLACK), (L, value, b_min)
