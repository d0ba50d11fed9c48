"""The count task read last, linear attention with post-RMSNorm (``eps = 0``), classification
(:mod:`constructions.count_last_foot_head`): the select task's head without ``e_b``, certified on
the count task's own inputs, within the unit ball, its margin at least the select head's and at
most the proven bound, and each output that of an independent forward pass of the select cell's
parameter set on the same input (``e_b`` reads nothing there)."""

from __future__ import annotations

import pytest

from bounds.margin import margin_upper
from bounds.search import classification_row
from constructions import Cell, classification
from constructions.count_last_foot_head import CountLastFootHead
from constructions.tasks import refusal
from verify import counts_to, explicit

CELLS = [Cell("linear", "post_bare", "classification", d=8, norm="rmsnorm", read="last"),
         Cell("linear", "post_learned", "classification", d=3, norm="rmsnorm", read="last", affine="gain_bias")]


@pytest.mark.parametrize("cell,L", [(CELLS[0], 8), (CELLS[1], 1), (CELLS[1], 4)],
                         ids=lambda x: x.describe() if isinstance(x, Cell) else str(x))
def test_certified_within_the_ball_and_between_the_select_margin_and_the_bound(cell, L):
    assert refusal(cell) is None and isinstance(classification.design(cell), CountLastFootHead)
    row = classification_row(cell, L, witness=True)
    assert row["certified"] and row["margin_bound"] <= 1 + 1e-12
    assert "e_b" not in row["witness"].vectors
    select = counts_to(classification.design(cell.replace(task="select")).build(L), L, "arb256")
    assert select.certified and row["margin"] >= float(select.min_margin) * (1 - 1e-12)
    assert row["margin"] <= margin_upper(cell, L)


@pytest.mark.parametrize("cell", CELLS[:1], ids=lambda c: c.describe())
def test_the_count_outputs_are_the_select_parameter_sets(cell):
    L = 4
    select_params = classification.design(cell.replace(task="select")).build(L)
    count_params = classification.design(cell).stripped(L)
    for seq in [("s",), ("s", "a"), ("s",) + ("a",) * L]:
        a, b = explicit(select_params, seq, "mp40"), explicit(count_params, seq, "mp40")
        assert list(a) == list(b) and max(range(L + 1), key=lambda c: b[c]) == seq.count("a")


def test_with_eps_it_is_refused_for_the_count_task():
    reason = refusal(CELLS[0].replace(eps=0.01))
    assert reason and reason.startswith("the count task at the last read")


def test_bare_the_head_meets_the_bound_to_one_percent_from_L_16():
    """The count task's own tied arc (module docstring of constructions.count_last_foot_head):
    certified, and within 1% of the proven bound; the stripped select head, which keeps an
    extra class-0 point one count before the count 1, is below it."""
    cell, L = CELLS[0], 16
    row = classification_row(cell, L, witness=True)
    assert row["certified"] and row["margin_ratio"] <= 1.01
    select = counts_to(classification.design(cell).stripped(L), L, "arb256")
    assert select.certified and float(select.min_margin) < row["margin"]
