"""Post-LayerNorm at ``d = 2``, ``eps = 0``, read last: ``L* = 1`` (proof in
:func:`bounds.lstar.cell_l_star`).

* Every such cell (both tasks, both attentions, every affine, either read-out) is served but
  classification of the count task with a gain and of the select task with softmax attention
  (refused with their reasons); its row at ``L = 1`` is certified by the
  judge and its rows beyond are null with the reason, and the sweep reports ``L_star = 1``.
* The impossibility: for random parameters, every input of ``L = 2`` is normalised to one of
  two points, and with the read-out that puts the outputs of ``(s)`` and ``(s, a)`` exactly at 0
  and 1 (which counts the count task to 1 wherever the two points differ), the judge never finds
  ``L = 2`` solved.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bounds import sweep
from bounds.lstar import cell_l_star
from bounds.search import row
from constructions import registry
from constructions.cell import ATTENTIONS, READOUTS, TASKS, Cell, Params
from constructions.refusals import refusal
from verify import reduced
from verify.certify import certify
from verify.inputs import QUERY_TOKENS, InputSet
from verify.judge import counts_to

AFFINES = (("post_bare", None), ("post_learned", "gain"), ("post_learned", "gain_bias"))
CELLS = [Cell(attention, variant, readout, d=2, affine=affine, task=task, read="last")
         for attention, (variant, affine), readout, task in itertools.product(ATTENTIONS, AFFINES, READOUTS, TASKS)]


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: "-".join(map(str, c.keys().values())))
def test_the_rows_stop_at_l_star_1(cell):
    assert cell_l_star(cell) == 1
    why = refusal(cell)
    if cell.readout == "classification" and (cell.attention == "softmax" if cell.distractor
                                             else cell.affine.gain):
        assert why is not None and registry.serving(cell) is None
        return
    assert why is None and registry.serving(cell) is not None
    one = row(cell, 1)
    assert one["certified"] and one["B_min"] is not None
    if cell.readout == "regression":
        assert one["B_lower"] is not None and one["B_lower"] <= one["B_min"]
    two = row(cell, 2)
    assert two["B_min"] is None and two["B_lower"] is None and not two["certified"]
    assert "one of two" in two["note"]


def test_the_sweep_reports_l_star_1(capsys):
    assert sweep.main(["--variant", "post_learned", "--d", "2", "--read", "last", "--task", "select",
                       "--attention", "linear", "--Lmin", "1", "--Lmax", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["L_star"] == 1 and out["L_star_status"] == "exact"
    rows = {r["L"]: r for r in out["rows"]}
    assert rows[1]["certified"] and all(rows[L]["B_min"] is None for L in (2, 4))


@st.composite
def two_point_sets(draw):
    """A cell of :data:`CELLS` (regression) and random parameters whose read-out maps ``(s)`` to
    0 and ``(s, a)`` to 1 exactly (None where the two are one point or a norm input is
    degenerate)."""
    cell = draw(st.sampled_from([c for c in CELLS if c.readout == "regression"]))
    floats = st.floats(-3, 3, allow_nan=False).filter(lambda x: abs(x) > 1e-3)
    vec = lambda: np.array([draw(floats), draw(floats)])
    vectors = {name: vec() for name in cell.vector_names() if name != "w"}
    vectors["w"] = np.zeros(2)
    probe = Params(cell, vectors, {"w0": 0.0})
    try:
        z = reduced(probe, [0, 1], [0, 0], readout=False)
    except ValueError:
        return None
    z = np.asarray(z, dtype=np.float64)
    diff = z[1] - z[0]
    if not np.isfinite(z).all() or diff @ diff < 1e-6:
        return None
    w = diff / (diff @ diff)
    vectors["w"] = w
    return Params(cell, vectors, {"w0": float(-(w @ z[0]))})


@given(two_point_sets())
def test_no_parameter_set_counts_to_2(params):
    if params is None:
        return
    cell = params.cell
    inputs = InputSet(cell, 2)
    n_a, n_b, q = inputs.chunk(0, inputs.size)
    try:
        z = np.asarray(reduced(params, n_a, n_b, readout=False, query=[QUERY_TOKENS[k] for k in q]),
                       dtype=np.float64)
    except ValueError:  # a degenerate norm input: these parameters compute nothing there
        assert not certify(params, 2).counts
        return
    assert len({tuple(np.round(p, 9)) for p in z}) <= 2  # the two points of the proof
    # the read-out counts the count task (the sub-task n_b = 0) to 1: the search is not blind
    count = Params(cell.replace(task="count"), {k: v for k, v in params.vectors.items() if k != "e_b"},
                   params.scalars)
    assert counts_to(count, 1).counts
    assert not certify(params, 2).counts
