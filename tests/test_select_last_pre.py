"""The select task read at the last position, softmax attention with bare pre-norm at eps = 0
(constructions.select_last_bare): a parameter set certified by the judge at L = 4 (so at every
L <= 4), the failure beyond L* = 4 that the count task's L* proves for every parameter set, an
independent linear-programming search that never beats that bound at L = 5, B_lower <= B_min, the
explicit pass on random sequences, the registry and the sweep's contract beyond L*.

Expectations are derived here independently: the LP below rebuilds every select output from a
value geometry and free read-outs (the model's softmax over ``tau <h_q, h_j>``, ``|h| = sqrt(d)``)
with scipy, outside the toolkit.
"""

from __future__ import annotations

import itertools
import json
import math

import flint

import mpmath
import numpy as np
import pytest
import sympy
from scipy.optimize import linprog

from bounds import sweep as sweep_mod
from bounds.lower import b_lower, last_bare_lower
from bounds.lstar import cell_l_star, l_star_status, last_l_star, last_l_star_eps
from constructions import registry, select_last_bare as slb
from constructions.cell import Cell
from constructions.refusals import refusal
from constructions.regression import design
from tests.helpers import counts_random_sequences, mp_norm
from verify import counts_to


def _cell(norm="layernorm", d=3, **kw) -> Cell:
    return Cell("softmax", "pre_bare", "regression", d=d, norm=norm, task="select", read="last", **kw)


CELLS = [("layernorm", 3), ("rmsnorm", 2)]


@pytest.fixture(scope="module")
def at_four():
    """``{(norm, d): (params, B)}``: the construction at 1.01 times the estimate of B_min(4)."""
    out = {}
    for norm, d in CELLS:
        dz = design(_cell(norm, d))
        B = dz.estimate(4) * 1.01
        out[norm, d] = dz.build(4, B), B
    return out


@pytest.mark.parametrize("norm,d", CELLS)
def test_certified_at_every_L_up_to_four_within_the_budget_and_failing_at_five(at_four, norm, d):
    params, B = at_four[norm, d]
    assert max(mp_norm(v) for v in params.vectors.values()) <= B * (1 + 1e-12)
    for L in (1, 2, 3, 4):  # the inputs up to L are among those up to 4
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
    # beyond L* = 4 (the count task's, a sub-task) the set fails, as every set does
    assert not counts_to(params, 5, "arb256").counts
    cell = params.cell
    assert design(cell).estimate(5) is None
    assert cell_l_star(cell) == 4 == cell_l_star(cell.replace(task="count")) == last_l_star(d, norm == "layernorm")
    assert l_star_status(cell) == ("exact", 4)


@pytest.mark.parametrize("norm,d", CELLS)
def test_random_sequences_through_the_explicit_pass(at_four, norm, d):
    counts_random_sequences(at_four[norm, d][0], 4, 25)


def _select_lp(G: np.ndarray, L: int, d: int) -> float:
    """The largest margin ``t`` (``|y - n_a| <= 1/2 - t`` on every select input up to ``L``) over
    the read-outs ``u_x = <w, h_x>`` and the constants ``C_q`` left free, for values of Gram matrix
    ``G`` (``s, a, b``): a linear program.  Free read-outs and constants only enlarge what a
    parameter set reaches, so a non-positive optimum means nothing solves select to ``L`` there."""
    tau = 1 / math.sqrt(d)
    rows, rhs = [], []
    for n_a, n_b in itertools.product(range(L + 1), repeat=2):
        for q in range(3):
            if not 1 <= n_a + n_b <= L and not (q == 0 and n_a + n_b == 0):
                continue
            if (q == 1 and n_a == 0) or (q == 2 and n_b == 0) or (q == 0 and n_a + n_b):
                continue
            p = np.exp(tau * (G[q] - G[q].max())) * np.array([1, n_a, n_b])
            coef = p / p.sum()  # y = C_q + coef . u
            row = np.concatenate([coef, np.eye(3)[q]])
            rows += [np.r_[-row, 1], np.r_[row, 1]]
            rhs += [-(n_a - 0.5), n_a + 0.5]
    # variables: u_s, u_a, u_b, C_s, C_a, C_b, t (u_s = 0: a common shift moves every output)
    bounds = [(0, 0)] + [(None, None)] * 5 + [(None, 0.5)]
    res = linprog(np.r_[np.zeros(6), -1], A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds,
                  method="highs")
    assert res.status == 0
    return -res.fun


def test_an_independent_search_never_solves_five(at_four):
    """Random geometries of three values on the sphere of radius sqrt(d) (LayerNorm's centred
    plane at d = 3, and three dimensions at d = 8): the LP's margin at L = 5 is never positive
    (the proof: the count task's sub-task stops at 4); the construction's own geometry has a
    positive one at L = 4 and none at 5."""
    rng = np.random.default_rng(5)
    for d, dim in ((3, 2), (8, 3)):
        for _ in range(30):
            V = rng.normal(size=(3, dim))
            V *= math.sqrt(d) / np.linalg.norm(V, axis=1, keepdims=True)
            assert _select_lp(V @ V.T, 5, d) <= 1e-9
    params, B = at_four["layernorm", 3]
    x, s = design(params.cell).plan(4, B)
    assert s > 0
    ang = np.array([0.0, x[0], x[1]])
    V = math.sqrt(3) * np.c_[np.cos(ang), np.sin(ang)]
    assert _select_lp(V @ V.T, 4, 3) > 0 and _select_lp(V @ V.T, 5, 3) <= 1e-9


def test_the_lower_bound_is_the_count_task_s_and_below_the_certified_bound(at_four):
    params, B = at_four["layernorm", 3]
    cell = params.cell
    lower = b_lower(cell, 4, B)
    count = cell.replace(task="count")
    assert lower is not None and 0 < lower <= B
    assert lower == last_bare_lower(count, 4, min(B, design(count).estimate(4)))
    # the count task's least budget is below the select task's: its construction solves count there
    assert counts_to(design(count).build(4, lower * 1.01), 4, "arb256").counts


def test_the_cells_built_and_the_cells_refused():
    for norm, d in (("layernorm", 2), ("layernorm", 3), ("layernorm", 8), ("rmsnorm", 2), ("rmsnorm", 8)):
        cell = _cell(norm, d)
        assert refusal(cell) is None and slb.built(cell)
        assert registry.serving(cell).name == "BareSelectLastDesign"
        assert type(design(cell)) is slb.BareSelectLastDesign
    for cell in (_cell("rmsnorm", 3, eps=0.1), _cell("layernorm", 2, eps=0.1),
                 _cell("layernorm", 2).replace(readout="classification")):
        assert refusal(cell) is not None and registry.serving(cell) is None
    assert l_star_status(_cell("rmsnorm", 3, eps=0.1)) == ("finite", last_l_star_eps(3))
    with pytest.raises(ValueError):
        slb.BareSelectLastDesign(_cell().replace(task="count"))


def test_the_sweep_reports_L_star_and_null_rows_beyond_it(capsys):
    argv = ["--variant", "pre_bare", "--task", "select", "--read", "last", "--Lmin", "5",
            "--Lmax", "1024", "--d", "3", "--json"]
    assert sweep_mod.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["L_star"] == 4 and out["L_star_status"] == "exact"
    assert out["rows"] and all(r["B_min"] is None and "L* = 4" in r["note"] for r in out["rows"])


def test_the_witness_at_L_1_within_a_tiny_budget():
    """L = 1 at the budget of the infimum row's witness: certified, every vector within ``B``."""
    B = 1e-3
    params = design(_cell("rmsnorm", 3)).build(1, B)
    assert counts_to(params, 1, "arb256").certified
    assert max(mp_norm(v) for v in params.vectors.values()) <= mpmath.mpf(B) * (1 + 1e-12)


def test_two_values_at_d_2_solve_two_and_not_three():
    """LayerNorm at d = 2 (values +-v): the construction (h_a = -h_s, h_b = h_s) is certified at
    L = 2, and the proof's inequality at L = 3 holds in ball arithmetic, 2/(rho+1) > 3/(rho+3) +
    1/(3 rho+1) at rho = exp(-2 sqrt 2); the LP at h_a = -h_s, h_b = h_s finds a margin at 2 and
    none at 3 (h_b = h_a gives (s, a, b) and (s, b, b) one output, the proof's other case)."""
    cell = _cell("layernorm", 2)
    assert cell_l_star(cell) == 2 and l_star_status(cell) == ("exact", 2)
    dz = design(cell)
    B = dz.estimate(2) * 1.01
    params = dz.build(2, B)
    assert counts_to(params, 2, "arb256").certified
    assert max(mp_norm(v) for v in params.vectors.values()) <= B * (1 + 1e-12)
    assert not counts_to(params, 3, "arb256").counts and dz.estimate(3) is None
    counts_random_sequences(params, 2, 15)
    rho = (-2 * flint.arb(2).sqrt()).exp()
    assert 2 / (rho + 1) > 3 / (rho + 3) + 1 / (3 * rho + 1)
    r = sympy.Symbol("rho", positive=True)
    gap = 2 / (r + 1) - 3 / (r + 3) - 1 / (3 * r + 1)
    assert sympy.simplify(gap - 4 * r * (1 - r) / ((r + 1) * (r + 3) * (3 * r + 1))) == 0
    G = np.array([[2, -2, 2], [-2, 2, -2], [2, -2, 2]], dtype=float)  # h_a = -h_s, h_b = h_s
    assert _select_lp(G, 3, 2) <= 1e-9 and _select_lp(G, 2, 2) > 0
