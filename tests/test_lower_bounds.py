"""Proven lower bounds: never above the certified B_min, tight, and equal to brute force on small L."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from bounds.lower import b_lower, line_lower, segment_lower
from bounds.search import regression_row
from constructions.cell import Cell

SEGMENT = [("softmax", "none"), ("softmax", "pre_learned"), ("softmax", "pre_bare")]
LINE = [("linear", "none"), ("linear", "pre_bare"), ("linear", "pre_learned")]


@pytest.mark.parametrize("attention,norm,L", [
    (a, n, L) for a, n in SEGMENT + LINE for L in (2, 5, 16, 33, 64, 1024)
    if not (a == "softmax" and n == "pre_bare" and L > 34)  # L*(8) = 34: nothing counts beyond
])
def test_lower_bound_below_certified_and_tight(attention, norm, L):
    cell = Cell(attention, norm, "regression")
    row = regression_row(cell, L)
    assert row["certified"]
    assert row["B_lower"] is not None
    assert row["B_lower"] <= row["B_min"]
    assert row["B_min"] / row["B_lower"] - 1 < 2.1e-6  # equal up to the bisection tolerance


# each example is a certified row with its lower bound; the deterministic test above checks the
# same inequality for both cells at L = 2, 5, 16, 33, 64, 1024, so a few random L suffice here
@settings(max_examples=6, deadline=None)
@given(L=st.integers(2, 60), norm=st.sampled_from(["none", "pre_learned"]))
def test_segment_lower_never_exceeds_certified(L, norm):
    cell = Cell("softmax", norm, "regression")
    row = regression_row(cell, L)
    assert row["B_lower"] <= row["B_min"]


def _lp_min_D(rho, L):
    """Smallest D with some C: |C + D n/(rho+n) - n| <= 1/2 (closure of the counting set)."""
    n = np.arange(L + 1)
    phi = n / (rho + n)
    A = np.concatenate([np.stack([np.ones(L + 1), phi], 1), -np.stack([np.ones(L + 1), phi], 1)])
    b = np.concatenate([n + 0.5, 0.5 - n])
    res = linprog([0, 1], A_ub=A, b_ub=b, bounds=[(None, None), (0, None)], method="highs")
    return res.fun if res.status == 0 else None


def _brute_force_none(L, d=8):
    """B_min of softmax/none by a dense scan of rho with LP-computed D_lo (independent code)."""
    def need(rho):
        D = _lp_min_D(rho, L)
        if D is None:
            return math.inf
        sigma = math.sqrt(d) * math.log(rho)
        B = 2 * math.sqrt(-sigma) if D + 2 * sigma <= 0 else D / math.sqrt(D + sigma)
        return max(B, math.sqrt(D / 2))

    grid = np.geomspace(0.05, 4 * (L + 2) ** 2, 400)
    vals = [need(r) for r in grid]
    j = int(np.argmin(vals))
    fine = np.geomspace(grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)], 400)
    return min(min(vals), min(need(r) for r in fine))


@pytest.mark.parametrize("L", [2, 3, 5, 8])
def test_segment_lower_matches_brute_force(L):
    cell = Cell("softmax", "none", "regression")
    brute = _brute_force_none(L)
    row = regression_row(cell, L)
    low = segment_lower(cell, L, row["B_min"])
    # the scan over a grid can only overestimate the infimum
    assert low <= brute * (1 + 1e-9)
    assert brute / low - 1 < 2e-3


@pytest.mark.parametrize("L", [2, 3, 7, 100])
def test_line_lower_closed_forms(L):
    d = 8
    assert line_lower(Cell("linear", "none", "regression"), L) == pytest.approx((math.sqrt(d) * (1 - 1 / L)) ** 0.25, rel=1e-12)
    assert line_lower(Cell("linear", "pre_bare", "regression"), L) == pytest.approx((1 - 1 / L) / d, rel=1e-12)
    learned = (math.sqrt(d) * (1 - 1 / L)) ** 0.25 / (1 + math.sqrt(d - 1)) ** 0.75
    assert line_lower(Cell("linear", "pre_learned", "regression"), L) == pytest.approx(learned, rel=1e-12)


def test_lower_bound_not_claimed_where_unproven():
    assert b_lower(Cell("softmax", "post_bare", "regression", eps=1e-3), 16, 3.0) is None
    assert b_lower(Cell("softmax", "post_bare", "regression", d=2), 16, 3.0) is None
    for task in ("count", "select"):  # nothing counts: no bound at the last read either
        assert b_lower(Cell("softmax", "post_bare", "regression", d=2, task=task, read="last"), 2, 3.0) is None
    assert b_lower(Cell("softmax", "pre_bare", "regression", eps=1e-3), 8, 5.0) is None
    assert b_lower(Cell("softmax", "none", "classification"), 16, None) == 0.0


def test_bare_pre_norm_beyond_l_star_has_no_lower_bound():
    assert b_lower(Cell("softmax", "pre_bare", "regression"), 35, None) is None


def test_segment_lower_is_a_bound_not_a_guess():
    """Feeding a too-small upper bound caps the result there: it never exceeds B_upper."""
    cell = Cell("softmax", "none", "regression")
    assert segment_lower(cell, 16, 1.0) <= 1.0


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("norm", ["post_bare", "post_learned"])
@pytest.mark.parametrize("L", [3, 8, 40, 64, 512])
def test_post_lower_bound_below_certified_and_tight(attention, norm, L):
    cell = Cell(attention, norm, "regression")
    row = regression_row(cell, L)
    assert row["B_lower"] <= row["B_min"]
    # the arc bound stops within 1e-4 of the target; B_min itself is within 1e-6 of optimal
    assert row["B_min"] / row["B_lower"] - 1 < 1.2e-4


def test_post_lower_bound_small_budget_is_weaker_but_valid():
    cell = Cell("softmax", "post_bare", "regression")
    B = regression_row(cell, 64)["B_min"]
    weak, strong = b_lower(cell, 64, B, arc_boxes=50), b_lower(cell, 64, B)
    assert 0 < weak < strong <= B
    assert B / strong - 1 < 1.2e-4


@pytest.mark.parametrize("L", [2, 3, 4, 9])
def test_values_on_a_line_rows_at_small_L(L):
    """LayerNorm with a gain and no bias at d = 2 (values ``h = +-g*v``: the score gap is 0 or
    ``X^2/2``, never negative): the row ends, certified, with its lower bound within 1e-4."""
    cell = Cell("softmax", "pre_learned", "regression", d=2, affine="gain")
    row = regression_row(cell, L)
    assert row["certified"] and 0 < row["B_lower"] <= row["B_min"]
    assert row["B_min"] / row["B_lower"] - 1 <= 1e-4
