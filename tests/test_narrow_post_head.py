"""Classification after post-LayerNorm at d = 2 (below the arc's width): the head on the line.

Every output is ``g * N(r) + beta`` with ``N(r) = +-(1, -1)``: two points, so nothing counts
beyond L = 1, and at L = 1 a unit head reaches at most ``|z_1 - z_0|`` (``2m <= <u_1 - u_0,
z_1 - z_0> <= 2 |z_1 - z_0|``), with ``|z_1 - z_0| <= 2 |g| <= 2`` (gain) or ``2 sqrt(2)``
(bare).  Checked by the explicit token-by-token pass in mpmath, not by the toolkit's forward.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mpmath
import pytest

from constructions import classification
from constructions.cell import Cell
from tests.helpers import mp_norm, ref_mp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("variant, affine, attention, best", [
    ("post_learned", "gain", "softmax", 2),
    ("post_learned", "gain_bias", "linear", 2),
    ("post_bare", None, "softmax", 2 * mpmath.sqrt(2)),
])
def test_two_point_head_counts_to_one_at_the_largest_margin(variant, affine, attention, best):
    cell = Cell(attention, variant, "classification", 2, affine=affine)
    params = classification.design(cell).build(1)
    for name, v in params.vectors.items():
        rows = v if name == "u" else [v]
        assert all(mp_norm(row) <= 1 for row in rows), name
    margins = []
    for n, tokens in enumerate(("s", "sa")):
        out = ref_mp(params, tokens).out
        margins.append(out[n] - out[1 - n])
    # it counts, and at the largest margin a unit head can have on two points (up to rounding)
    assert min(margins) > best * (1 - 1e-12)
    assert max(margins) < best * (1 + 1e-12)
    with pytest.raises(ValueError, match="nothing counts beyond L = 1"):
        classification.design(cell).build(2)


def test_with_eps_the_outputs_on_the_line_are_counted_in_order():
    # eps > 0: N(r) = s (1, -1) with |s| < 1 rising with the centred part; the head counts to L
    L = 4
    cell = Cell("softmax", "post_learned", "classification", 2, 0.1, affine="gain")
    params = classification.design(cell).build(L)
    for n in range(L + 1):
        out = ref_mp(params, "s" + "a" * n).out
        assert out[n] > max(o for c, o in enumerate(out) if c != n), n


def test_sweep_with_a_gain_at_d_2_gives_its_row():
    proc = subprocess.run(
        [sys.executable, "-m", "bounds.sweep", "--variant", "post_learned", "--readout",
         "classification", "--affine", "gain", "--d", "2", "--Lmin", "1", "--Lmax", "2", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    rows = {r["L"]: r for r in json.loads(proc.stdout)["rows"]}
    assert rows[1]["certified"] and rows[1]["margin"] <= 2
    assert rows[2]["B_min"] is None and not rows[2]["certified"]
