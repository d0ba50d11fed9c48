"""Softmax attention with pre-LayerNorm at ``d = 2`` read last (count task, ``eps = 0``): the two
values ``beta +- g * (1, -1)``.

* The law :func:`constructions.laws.last_value_gap` (weight 2) holds on random parameters: the
  value gap of the forward pass's values is within it at their own budget and score gap.
* gain_bias rows are certified, ``B_lower <= B_min``, the two meeting at ``L = 8``; without a bias
  ``L* = 4`` (:func:`bounds.lstar.cell_l_star`) and the cell is refused.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from bounds.lstar import cell_l_star
from bounds.search import row
from constructions import laws
from constructions.cell import Cell, Params
from constructions.refusals import refusal
from verify.forward import numbers

CELL = Cell("softmax", "pre_learned", "regression", d=2, read="last")


@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=10, max_size=10))
def test_the_value_gap_law_holds(xs):
    e_s, e_a, g, beta, w = (np.array(xs[i:i + 2]) for i in range(0, 10, 2))
    if abs(e_s[0] - e_s[1]) < 1e-6 or abs(e_a[0] - e_a[1]) < 1e-6:
        return
    params = Params(CELL, {"e_s": e_s, "e_a": e_a, "g": g, "beta": beta, "w": w}, {"w0": 0.0})
    h = numbers(params, "float64").h
    h_s, h_a = (np.asarray(h[t], dtype=np.float64) for t in ("s", "a"))
    B = max(np.linalg.norm(v) for v in (e_s, e_a, g, beta, w))
    X, sigma = np.linalg.norm(h_s - h_a), h_a @ (h_s - h_a)
    if X == 0:
        return
    assert sigma <= float(laws.last_score_gap_max(CELL, B, laws.FLOAT)) + 1e-9
    assert X <= float(laws.last_value_gap(CELL, B, min(sigma, B * B / 2), laws.FLOAT)) + 1e-9


def test_gain_bias_rows_are_certified_and_meet_the_bound():
    for L in (2, 8):
        r = row(CELL, L)
        assert r["certified"] and r["B_lower"] <= r["B_min"]
    assert r["B_min"] <= r["B_lower"] * (1 + 1e-4)
    assert refusal(CELL) is None and cell_l_star(CELL) is None


def test_without_a_bias_l_star_is_4():
    cell = CELL.replace(affine="gain")
    assert cell_l_star(cell) == 4 and "L = 4" in refusal(cell)
