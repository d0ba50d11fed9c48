"""bounds.search: the certified B_min of regression cells and the classification rows.

``B_min`` must be *sharp*: the construction at ``B_min (1 - 1e-4)`` does not count, at
``B_min (1 + 1e-4)`` it does, and counting is monotone in the budget around it.  Where a closed
form is known (linear attention, the softmax segment by an independent brute force of the
reduced problem) ``B_min`` is compared with it.
"""

from __future__ import annotations

import functools
import math
import signal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from bounds.lstar import l_star
from bounds.search import classification_row, regression_row, unreached
from constructions import regression
from constructions.cell import ATTENTIONS, NORMS, Cell
from verify import counts_to

CASES = [("softmax", "none", 8), ("softmax", "post_bare", 8), ("softmax", "post_learned", 16),
         ("linear", "none", 8), ("softmax", "pre_learned", 8), ("softmax", "pre_bare", 8),
         ("linear", "pre_bare", 8)]
IDS = [f"{a}/{n}/L{l}" for a, n, l in CASES]


@functools.lru_cache(maxsize=None)
def _row(att, norm, L, d=8):
    return regression_row(Cell(att, norm, "regression", d=d), L)


def _counts(att, norm, L, budget, backend, d=8):
    params = regression.design(Cell(att, norm, "regression", d=d)).build(L, budget)
    return counts_to(params, L, backend=backend).verdict == "counts"


@pytest.mark.parametrize("att,norm,L", CASES, ids=IDS)
def test_regression_row_is_certified(att, norm, L):
    row = _row(att, norm, L)
    assert row["L"] == L
    assert row["certified"] is True
    assert isinstance(row["B_min"], float) and math.isfinite(row["B_min"]) and row["B_min"] > 0
    assert row.get("worst_error") is None or row["worst_error"] < 0.5
    if row.get("B_lower") is not None:  # a proven lower bound never exceeds a certified witness
        assert row["B_lower"] <= row["B_min"] * (1 + 1e-12)


@pytest.mark.parametrize("att,norm,L", CASES, ids=IDS)
def test_b_min_is_sharp(att, norm, L):
    b_min = _row(att, norm, L)["B_min"]
    for backend in ("float64", "arb256"):
        assert not _counts(att, norm, L, b_min * (1 - 1e-4), backend), backend
        assert _counts(att, norm, L, b_min * (1 + 1e-4), backend), backend


@pytest.mark.parametrize("att,norm,L", CASES, ids=IDS)
def test_counting_is_monotone_in_the_budget_near_b_min(att, norm, L):
    b_min = _row(att, norm, L)["B_min"]
    budgets = np.linspace(b_min * (1 - 1e-3), b_min * (1 + 1e-3), 10)
    for backend in ("float64", "arb256"):
        verdicts = [_counts(att, norm, L, b, backend) for b in budgets]
        first = verdicts.index(True)
        assert 0 < first < len(budgets), (backend, verdicts)  # B_min is inside the grid
        assert all(verdicts[first:]), (backend, verdicts)
        assert budgets[first - 1] < b_min <= budgets[first] * (1 + 1e-6)


@pytest.mark.parametrize("L", [2, 8, 33])
@pytest.mark.parametrize("d", [3, 8])
def test_linear_closed_forms(L, d):
    none = regression_row(Cell("linear", "none", "regression", d=d), L)
    assert none["certified"]
    assert none["B_min"] == pytest.approx((math.sqrt(d) * (1 - 1 / L)) ** 0.25, rel=1e-5)
    bare = regression_row(Cell("linear", "pre_bare", "regression", d=d), L)
    assert bare["certified"]
    assert bare["B_min"] == pytest.approx((1 - 1 / L) / d, rel=1e-5)


def _segment_b_min_brute(L, d):
    """softmax/none B_min from the reduced problem, brute force over all pairs and a rho grid.

    For shape ``rho`` the amplitudes ``D`` count iff ``D_lo < D < D_hi`` (pairs ``i > j``); a
    budget ``B`` reaches ``D = B X`` with ``X^2 - B X - sigma = 0`` (``sigma = sqrt(d) log rho``)
    and needs ``X <= 2B``; so the budget of a shape is ``max(D_lo/sqrt(D_lo + sigma),
    sqrt(sigma/2))``.
    """
    n = np.arange(L + 1)
    i, j = np.triu_indices(L + 1, 1)
    k = j - i

    def need(rho):
        phi = n / (rho + n)
        gap = phi[j] - phi[i]
        lo, hi = ((k - 1) / gap).max(), ((k + 1) / gap).min()
        if not lo < hi:
            return math.inf
        sigma = math.sqrt(d) * math.log(rho)
        return max(lo / math.sqrt(lo + sigma), math.sqrt(sigma / 2))

    grid = np.geomspace(1, 100 * (L + 2) ** 2, 3001)
    vals = np.array([need(r) for r in grid])
    best = int(np.argmin(vals))
    res = minimize_scalar(need, bounds=(grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]),
                          method="bounded", options={"xatol": 1e-13})
    return min(float(res.fun), float(vals[best]))


@pytest.mark.parametrize("L", [5, 8])
def test_softmax_none_matches_independent_reduction(L):
    row = _row("softmax", "none", L)
    brute = _segment_b_min_brute(L, 8)
    assert row["B_min"] == pytest.approx(brute, rel=2e-6)


@settings(max_examples=60, deadline=None)
@given(B=st.floats(0.1, 10), a=st.floats(-1, 1), b=st.floats(0, 1), theta=st.floats(0, math.pi))
def test_softmax_none_capacity_bound(B, a, b, theta):
    """Any e_s, e_a of norm <= B: |e_a - e_s| <= X with X^2 - B X - sigma = 0 (the capacity)."""
    e_s = np.array([a * B, 0.0])
    e_a = b * B * np.array([math.cos(theta), math.sin(theta)])
    sigma = float(e_s @ (e_s - e_a))
    X = (B + math.sqrt(max(B * B + 4 * sigma, 0.0))) / 2
    assert np.linalg.norm(e_a - e_s) <= X * (1 + 1e-12) + 1e-12


# --------------------------------------------------------------------------- L* and edge rows


@pytest.mark.parametrize("d", [3, 8])
def test_bare_prenorm_beyond_lstar(d):
    Ls = l_star(d)
    at = regression_row(Cell("softmax", "pre_bare", "regression", d=d), Ls)
    assert at["certified"] and at["B_min"] > 0
    for L in (Ls + 1, Ls + 7):
        cell = Cell("softmax", "pre_bare", "regression", d=d)
        row = regression_row(cell, L)
        assert row["B_min"] is None
        assert row["certified"] is False
        assert row.get("note")
        assert unreached(cell, row) is None  # a proof that nothing counts: a null row


def test_postnorm_at_d2_says_so():
    for readout in ("regression", "classification"):
        row = (regression_row if readout == "regression" else classification_row)(
            Cell("softmax", "post_bare", readout, d=2), 4)
        assert row["B_min"] is None and not row["certified"] and row.get("note")


L1_CELLS = [(a, n) for a in ATTENTIONS for n in NORMS]


@pytest.mark.parametrize("att,norm", L1_CELLS, ids=[f"{a}/{n}" for a, n in L1_CELLS])
def test_l1_rows_are_certified(att, norm):
    """At L = 1 arbitrarily small parameters count; the row must still be certified."""
    row = regression_row(Cell(att, norm, "regression"), 1)
    assert row["B_min"] is not None and row["B_min"] < 1e-3
    assert row["certified"] is True


def _alarm(seconds):
    def handler(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)


@pytest.mark.parametrize("att,norm", [("softmax", "post_bare"), ("linear", "pre_bare")])
def test_positive_eps_rows_terminate(att, norm):
    """eps > 0: the construction may not count, but the row must say so (no hang, no crash),
    and the sweep then lists it as unreached, not as a null row (nothing proves that none counts)."""
    _alarm(60)
    try:
        row = regression_row(Cell(att, norm, "regression", eps=0.1), 4)
    finally:
        signal.alarm(0)
    assert row["L"] == 4
    if row["B_min"] is None:
        assert row.get("note") and not row["certified"]
        assert unreached(Cell(att, norm, "regression", eps=0.1), row) == row["note"]
    else:
        assert row["certified"]


# --------------------------------------------------------------------------- classification

CLS_CASES = [("softmax", "none"), ("softmax", "pre_bare"), ("softmax", "post_learned"),
             ("linear", "none"), ("linear", "post_bare"), ("softmax", "pre_learned")]


@pytest.mark.parametrize("L", [3, 8])
@pytest.mark.parametrize("att,norm", CLS_CASES, ids=[f"{a}/{n}" for a, n in CLS_CASES])
def test_classification_row(att, norm, L):
    cell = Cell(att, norm, "classification", d=8)
    row = classification_row(cell, L)
    assert row["L"] == L
    assert row["B_min"] == 0.0 and row["B_min_is_infimum"] is True
    assert row["certified"] is True
    assert row["margin"] > 0
    others = [v for v in cell.vector_names() if v != "u"]
    assert row["storage"] == (L + 1) * (cell.d + 1) + cell.d * len(others)
    if row.get("margin_bound") is not None:
        assert row["margin_bound"] <= 1 + 1e-12


def test_softmax_none_margin_closed_form():
    L, d = 8, 8
    row = classification_row(Cell("softmax", "none", "classification", d=d), L)

    def margin(rho):
        X = (1 + math.sqrt(1 + 4 * math.sqrt(d) * math.log(rho))) / 2  # |h_a - h_s| at budget 1
        return X * rho / (L * rho**2 + L**2 * rho + (L**3 - L) / 3)

    rho_max = math.exp(2 / math.sqrt(d))  # sigma <= 2 at unit norm
    grid = np.geomspace(1, rho_max, 2001)
    best = max(margin(r) for r in grid)
    res = minimize_scalar(lambda r: -margin(r), bounds=(1, rho_max), method="bounded",
                          options={"xatol": 1e-12})
    best = max(best, -res.fun)
    assert row["margin"] == pytest.approx(best, rel=1e-6)
    assert row["margin"] <= best * (1 + 1e-9)  # certified margin is a lower bound


@pytest.mark.parametrize("L", [4, 10])
def test_linear_none_margin_closed_form(L):
    """Positions kappa n with kappa = tau at unit norm: m = 1/(sqrt(d) L)."""
    d = 8
    row = classification_row(Cell("linear", "none", "classification", d=d), L)
    assert row["margin"] == pytest.approx(1 / (math.sqrt(d) * L), rel=1e-6)


def test_classification_margin_shrinks_with_L():
    cell = Cell("softmax", "post_bare", "classification", d=8)
    margins = [classification_row(cell, L)["margin"] for L in (4, 8, 16)]
    assert margins[0] > margins[1] > margins[2] > 0


REGRESSION_CELLS = [(a, n) for a in ATTENTIONS for n in NORMS]


@settings(max_examples=20, deadline=None)
@given(cell_index=st.integers(0, len(REGRESSION_CELLS) - 1), L=st.integers(2, 30),
       f1=st.floats(0.5, 2.0), f2=st.floats(0.5, 2.0))
def test_feasibility_is_monotone_in_the_bound(cell_index, L, f1, f2):
    """Property: if the construction counts at budget B, it counts at every larger budget."""
    att, norm = REGRESSION_CELLS[cell_index]
    cell = Cell(att, norm, "regression")
    design = regression.design(cell)
    est = design.estimate(L)
    if est is None:  # bare pre-norm beyond L*
        return
    small, large = sorted((f1, f2))
    if counts_to(design.build(L, est * small), L, "float64").counts:
        assert counts_to(design.build(L, est * large), L, "float64").counts
