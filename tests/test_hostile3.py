"""Edge inputs of the newer last-read cells: the L = 1 row of the select task read last after
post-LayerNorm (softmax), and the refusal of select-last classification naming what is built."""

from __future__ import annotations

import itertools

import pytest

from bounds.search import regression_row
from constructions import regression
from constructions.cell import ATTENTIONS, NORMS, Cell
from constructions.refusals import refusal
from verify.judge import counts_to


@pytest.mark.parametrize("variant", ["post_bare", "post_learned"])
def test_the_l1_row_of_select_last_post_is_a_certified_witness(variant):
    """A row with a B_min is backed by a witness that counts in ball arithmetic (no B_min = 0
    claimed on a witness that fails)."""
    cell = Cell("softmax", variant, "regression", 8, 0.0, task="select", read="last")
    row = regression_row(cell, 1, lower=False, witness=True, closed=False)
    assert row["certified"] and row["B_min"] is not None
    witness = row["witness"]
    assert counts_to(witness, 1, backend="arb256").counts
    assert witness.bound() <= row["B_min"] * (1 + 1e-9)


def test_select_last_classification_is_built_in_every_cell_at_eps_0_from_d_3():
    """Every attention, placement, kind and affine of the select task read last has a
    classification head at eps = 0 and d >= 3; with eps > 0 the refusals name the reason."""
    for att, var, norm, d in itertools.product(ATTENTIONS, NORMS, ("layernorm", "rmsnorm"), (3, 4, 8)):
        for affine in (("gain", "gain_bias") if var.endswith("learned") else ("bare",)):
            kw = {"affine": affine} if var.endswith("learned") else {}
            cell = Cell(att, var, "classification", d, 0.0, norm=norm, task="select", read="last", **kw)
            assert refusal(cell) is None, (cell.describe(), refusal(cell))
    why = refusal(Cell("softmax", "post_learned", "classification", 8, 1e-5, task="select", read="last"))
    assert why is not None and "eps > 0" in why