"""The public hypothesis strategies, and the toolkit's certified constructions run through the
explicit token-by-token pass on sequences they draw."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from constructions import classification, regression
from constructions.cell import Cell
from tests.helpers import ARCH_IDS, ARCHS, arch_cell, to_mp
from verify import counts_to, explicit
from verify.strategies import parameter_sets, sequences, target


@settings(max_examples=80, deadline=None)
@given(task=st.sampled_from(["count", "select"]), bounds=st.tuples(st.integers(0, 30), st.integers(0, 30)),
       data=st.data())
def test_sequences_are_inputs_of_the_task(task, bounds, data):
    lo, hi = sorted(bounds)
    cell = Cell(task=task, d=3)
    seq = data.draw(sequences(cell, hi, min_length=lo))
    assert seq[0] == "s" and lo <= len(seq) - 1 <= hi
    assert set(seq[1:]) <= set(cell.task.tokens)
    assert target(seq) == seq.count("a")


def test_every_order_and_composition_is_drawn():
    """Random order, not only sorted blocks: particular interleavings are found."""
    cell = Cell(task="select", d=3)
    for wanted in ("sbab", "sabba", "sb", "s", "saaa"):
        assert find(sequences(cell, 5), lambda s, w=wanted: s == w) == wanted
    assert find(sequences(Cell(d=3), 5), lambda s: len(s) == 4) == "saaa"


def test_bad_lengths_are_refused():
    with pytest.raises(ValueError, match="min_length"):
        sequences(Cell(d=3), 2, min_length=3)


@pytest.mark.parametrize("arch", ARCHS[::3], ids=ARCH_IDS[::3])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_parameter_sets_run_through_the_explicit_pass(arch, data):
    cell = arch_cell(arch, d=4, task="select")
    params = data.draw(parameter_sets(cell, classes=3))
    assert set(params.vectors) == set(cell.vector_names())
    for v in params.vectors.values():
        assert all(abs(float(x)) <= 4.0 for x in np.ravel(v))
    out = explicit(params, data.draw(sequences(cell, 12)), "mp50")
    assert np.all(np.isfinite(np.asarray(out, dtype=float)))


def _certified(cell: Cell, L: int):
    """A construction of ``cell`` certified to count to ``L`` (None: it cannot at this d)."""
    if cell.readout == "classification":
        params = classification.design(cell).build(L)
    else:
        design = regression.design(cell)
        est = design.estimate(L)
        if est is None:
            return None
        params = design.build(L, est * (1 + 1e-3))
    assert counts_to(params, L, "arb256").certified
    return params


@pytest.mark.parametrize("arch", ARCHS, ids=ARCH_IDS)
@pytest.mark.parametrize("d,L", [(3, 6), (8, 24)])
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_certified_constructions_count_random_sequences(arch, d, L, data):
    cell = arch_cell(arch, d=d)
    params = _certified(cell, L)
    if params is None:
        assert cell.placement.name != "none"  # only a norm can make a cell unable to count
        return
    seq = data.draw(sequences(cell, L))
    out = explicit(params, seq, "mp50")
    if cell.readout == "regression":
        with mpmath.workdps(50):
            assert abs(to_mp(out) - target(seq)) < 0.5
    else:
        logits = [to_mp(x) for x in out]
        assert max(range(len(logits)), key=logits.__getitem__) == target(seq)
