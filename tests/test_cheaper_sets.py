"""Certified parameter sets that cost less than the construction of their cell.

The sweep's ``B_min`` is the bound of the cell's construction, certified to count: an upper
bound on the true ``B_min(L)``.  For some of the newer cells the construction is known not to be
optimal at small ``L``: each file below holds a parameter set found by a direct numerical search
(every vector free, the worst error minimised) that the ball-arithmetic verifier certifies to
count to ``L = 8`` with a rigorous ``B(theta)`` below the construction's.  The README says so
where it states these cells' rows; the test keeps that sentence true.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bounds.search import row
from verify import __main__ as verify_cli
from verify.params_file import read

DATA = Path(__file__).parent / "data"
FILES = ["cheaper_select_last_linear_none_L8.json", "cheaper_last_softmax_post_bare_L8.json",
         "cheaper_last_linear_post_bare_L8.json"]


@pytest.mark.parametrize("name", FILES)
def test_a_certified_set_below_the_construction(name, capsys):
    path = DATA / name
    params, _ = read(str(path))
    rc = verify_cli.main(["--params", str(path), "--L", "8", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["verdict"] == "counts" and report["certified"]
    built = row(params.cell, 8)
    assert built["certified"]
    assert report["B"] < built["B_min"]  # the rigorous B(theta) rounded up, below the construction
    assert built["B_lower"] is None or built["B_lower"] <= report["B"]  # and never below the proof
