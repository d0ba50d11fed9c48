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


def test_select_last_classification_refusal_names_every_built_regression_family():
    """The line refusing select-last classification lists where regression is built: every module
    whose design serves a built select-last regression cell is named in it."""
    modules = set()
    for att, var, norm, d in itertools.product(ATTENTIONS, NORMS, ("layernorm", "rmsnorm"), (3, 4, 8)):
        cell = Cell(att, var, "regression", d, 0.0, norm=norm, task="select", read="last")
        if refusal(cell) is None:
            modules.add(type(regression.design(cell)).__module__)
    assert modules
    why = refusal(Cell("softmax", "post_learned", "classification", 8, 0.0, task="select",
                       read="last"))
    missing = [m for m in sorted(modules) if m not in why]
    assert not missing, (missing, why)
