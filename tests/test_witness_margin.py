"""The L = 1 witness has a usable margin (verify.certify.witness_budget), and its sweep row says
the bound it reports.

The rule: the first budget ``WITNESS_BUDGET 2^k`` at which the construction counts to 1 with
``|y - n| <= 1/2 - WITNESS_MARGIN``.  Checked here against an independent judge (mpmath at 50
digits, not the balls the rule uses): the chosen witness has the margin, the grid budget below it
has not, and the row's witness is certified with the float64 rounding of it too.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from bounds import search
from constructions import regression
from constructions.cell import Cell
from verify import params_file
from verify.certify import WITNESS_BUDGET, WITNESS_MARGIN, WITNESS_STEPS, certify, rigorous_bound, witness_budget
from verify.judge import counts_to

#: cells whose witness margin at WITNESS_BUDGET spans 1e-3 to 2e-20 (measured): the one-sided arc
#: on the select task read last (the smallest), its count-task form, a segment and a bare arc
CELLS = [
    Cell("linear", "post_bare", "regression", d=8, norm="rmsnorm", task="select", read="last"),
    Cell("linear", "post_learned", "regression", d=8, norm="rmsnorm"),
    Cell("softmax", "none", "regression", d=8),
    Cell("softmax", "post_bare", "regression", d=8),
]
IDS = ["one-sided-select-last", "one-sided-gain", "softmax-none", "softmax-post-bare"]


def _margin_mp(params) -> float:
    """``1/2 - max |y - n|`` over the inputs of ``L = 1``, in mpmath (50 digits)."""
    res = counts_to(params, 1, backend="mp50")
    assert res.counts
    return 0.5 - res.worst_error


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_the_witness_budget_is_the_first_with_the_margin(cell):
    build = regression.design(cell).build
    B = witness_budget(build)
    k = round(math.log2(B / WITNESS_BUDGET))
    assert 0 <= k <= WITNESS_STEPS and B == WITNESS_BUDGET * 2.0**k
    assert _margin_mp(build(1, B)) >= WITNESS_MARGIN * (1 - 1e-6)
    if k > 0:  # the grid budget below has less margin (or does not count)
        res = counts_to(build(1, B / 2), 1, backend="mp50")
        assert not res.counts or 0.5 - res.worst_error < WITNESS_MARGIN * (1 + 1e-6)


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_the_row_reports_its_witness_and_its_double_rounding_certifies(cell):
    row = search.regression_row(cell, 1, witness=True)
    params = row.pop("witness")
    assert row["certified"] and certify(params, 1).certified
    assert row["witness_bound"] == rigorous_bound(params)
    assert row["worst_error"] <= 0.5 - WITNESS_MARGIN  # a margin a double shows
    # the note states the row's bound, rounded up (it is an upper bound)
    stated = Decimal(row["note"].split("B(theta) <= ")[1].split(",")[0])
    assert stated >= Decimal(row["witness_bound"]) and float(stated) <= row["witness_bound"] * 1.001
    files, note = params_file.witness_files(params, 1, "L1")
    assert note is None and "L1.safetensors" in files  # the float64 rounding counts too
