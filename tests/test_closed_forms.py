"""Closed forms: derived symbolically, then checked against the numeric optimum."""

import math

import pytest
import sympy

from bounds.search import regression_row
from constructions import closed_forms as cf
from constructions.cell import Cell
from constructions.regression import design


def test_corner_identities_hold_symbolically():
    m = sympy.Symbol("m", positive=True, integer=True)
    odd = {cf.L: 2 * m + 1, cf.rho: m**2, cf.k: m + 1, cf.kk: m}
    even = {cf.L: 2 * m, cf.rho: m * (m - 1), cf.k: m, cf.kk: m}
    assert sympy.simplify(cf.CORNER.subs(odd)) == 0
    assert sympy.simplify(cf.CORNER.subs(even)) == 0
    # and these are the floor formulas
    assert sympy.simplify(cf.RHO_STAR_OF_L.subs(cf.L, 2 * m + 1) - m**2) == 0
    assert sympy.simplify(cf.D_STAR_OF_L.subs(cf.L, 2 * m + 1) - (m + 1) ** 2) == 0


def test_arc_multiple_of_four_identity():
    lam_sq = cf.LAM_STAR_SQ.subs(cf.x, cf.L / 4)
    assert sympy.simplify(lam_sq - cf.LAM_STAR_SQ_MULT4) == 0
    assert sympy.simplify(cf.B_ARC_STAR.subs(cf.x, cf.L / 4) ** 2 - cf.B_ARC_STAR_MULT4**2) == 0


@pytest.mark.parametrize("L", range(2, 201))
def test_segment_and_arc_closed_forms_match_numeric_optimum(L):
    for norm in ("none", "post_bare"):
        cell = Cell("softmax", norm, "regression")
        form = cf.closed_form(cell, L)
        if form is None:
            continue
        est = design(cell).estimate(L)
        assert form["B"] == pytest.approx(est, rel=1e-6)
        if norm == "none" and L >= 6:
            assert form["rho"] == (L - 1) ** 2 // 4
            assert form["D"] == (L + 1) ** 2 // 4
        if norm == "post_bare" and L % 4 == 0 and L >= 8:
            assert form["b"] == pytest.approx((L - 1) * (L + 2) / (4 * math.sqrt(2 * L + 1)), rel=1e-12)


def test_corner_closed_form_applies_from_L_6():
    cell = Cell("softmax", "none", "regression")
    assert all(cf.closed_form(cell, L) is not None for L in range(6, 60))


@pytest.mark.parametrize("attention,norm", [("softmax", "pre_learned"), ("softmax", "pre_bare"),
                                            ("softmax", "post_learned"), ("linear", "post_bare"),
                                            ("linear", "none"), ("linear", "pre_bare"),
                                            ("linear", "pre_learned")])
@pytest.mark.parametrize("L", [8, 13, 34])
def test_closed_form_matches_certified_b_min(attention, norm, L):
    cell = Cell(attention, norm, "regression")
    form = cf.closed_form(cell, L)
    assert form is not None
    row = regression_row(cell, L)
    # the certified set lies above the infimum by at most the bisection tolerance
    assert row["B_min"] >= form["B"] * (1 - 1e-9)
    assert row["B_min"] / form["B"] - 1 < 5e-6


def test_arc_infimum_for_tiny_L_is_degenerate_arc():
    form = cf.closed_form(Cell("softmax", "post_bare", "regression"), 3)
    assert form["lambda"] == 0.0 and form["b"] == pytest.approx(1.0)
