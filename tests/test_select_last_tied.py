"""The select task read last after post-RMSNorm with linear attention (classification): the head
on the last read's tied arc (constructions.last_tied) is certified, its margin is the explicit
pass's smallest logit gap, and it lies below the proven bound of bounds.arc_margin over the tied
domain, within a few per cent of it from L = 8 (bare RMSNorm).  The margin and the bound are two
independent computations, so the ratio test fails if either moves the wrong way."""

from __future__ import annotations

import pytest

from bounds.search import classification_row
from constructions.cell import Cell
from tests.helpers import select_last_gap


@pytest.mark.parametrize("affine, d, L, ratio", [(None, 8, 8, 1.1), ("gain", 3, 4, None)])
def test_the_tied_head_is_certified_below_its_bound(affine, d, L, ratio):
    variant = "post_learned" if affine else "post_bare"
    cell = Cell("linear", variant, "classification", d=d, norm="rmsnorm", affine=affine,
                task="select", read="last")
    row = classification_row(cell, L, witness=True)
    assert row["certified"], row.get("note")
    assert 0 < row["margin"] <= row["margin_upper"]
    if ratio is not None:
        assert row["margin_upper"] / row["margin"] < ratio
    gap = select_last_gap(row["witness"], L)
    assert abs(float(gap) - row["margin"]) <= 1e-9 * row["margin"]
