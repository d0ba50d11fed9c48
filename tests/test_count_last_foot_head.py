"""The count task read last, linear attention with post-RMSNorm (``eps = 0``), classification
(:mod:`constructions.count_last_foot_head`): the select task's head without ``e_b``, certified on
the count task's own inputs, within the unit ball, its margin at least the select head's and at
most the proven bound, and each output that of an independent forward pass of the select cell's
parameter set on the same input (``e_b`` reads nothing there)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds.margin import margin_upper
from bounds.search import classification_row
from constructions import Cell, classification, last_tied, laws
from constructions.count_last_foot_head import CountLastFootHead
from constructions.tasks import refusal
from tests.helpers import best_head, examples
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


@pytest.mark.parametrize("cell", [CELLS[0], CELLS[0].replace(variant="post_learned", affine="gain"),
                                  CELLS[0].replace(variant="post_learned", affine="gain", d=16)],
                         ids=lambda c: c.describe())
def test_the_head_meets_the_bound_to_one_percent_at_L_16(cell):
    """The count task's own tied arc (module docstring of constructions.count_last_foot_head):
    certified, and within 1% of the proven bound (with a gain: the certificate over several
    feet, bounds.arc_margin.TIED_FEET); the stripped select head, which keeps an extra class-0
    point one count before the count 1, is below it."""
    L = 16
    row = classification_row(cell, L, witness=True)
    assert row["certified"] and row["margin_ratio"] <= 1.01
    select = counts_to(classification.design(cell).stripped(L), L, "arb256")
    assert select.certified and float(select.min_margin) < row["margin"]


GAIN = CELLS[0].replace(variant="post_learned", affine="gain")


@settings(max_examples=examples(12), deadline=None)
@given(F_scale=st.floats(0.3, 3.0), tie=st.floats(0.05, 1.0), omega=st.floats(0, 3.14159),
       chi=st.floats(0.01, 1.56))
def test_no_head_on_a_tied_arc_beats_the_bound_with_a_gain(F_scale, tie, omega, chi):
    """The bound with a gain (the certificate over several feet) against an independent linear
    program over every head (the inscribed polygon: at most the true max-min) on the counts
    ``1..L`` of a tied arc at unit budget: foot ``F >= sqrt(d)`` near the construction's, distance
    ``lam <= kappa F``, any plane and ellipse of the gain."""
    L = 8
    F0, _, _ = last_tied.count_shape(GAIN, L - 1)
    F = max(F_scale * F0, math.sqrt(GAIN.d))
    kappa = laws.last_distance_ratio(GAIN, 1, laws.FLOAT)
    y = last_tied.on_plane(GAIN, F + 1 + np.arange(L, dtype=np.float64), tie * kappa * F, omega, chi)
    assert best_head(y, outer=False) <= margin_upper(GAIN, L) * (1 + 1e-9)
