"""bounds.lstar: L*(d) of softmax attention with bare pre-norm, against an independent LP.

Counting to ``L`` at score ratio ``rho`` with a free read-out is the linear feasibility problem
``exists C, D, s > 0: |C + D n/(rho+n) - n| <= 1/2 - s`` for ``n = 0..L``; bare pre-norm caps
``rho`` at ``exp(2 sqrt(d))``.  We solve it with scipy's HiGHS, maximising ``s``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from bounds import lstar
from bounds.lstar import l_star

MARGIN = 1e-3  # the LP optimum is at least this far from 0 at L* and L*+1 for d = 2..10


def lp_slack(rho: float, L: int) -> float:
    """max s subject to |C + D phi(n) - n| <= 1/2 - s, n = 0..L (variables C, D, s)."""
    n = np.arange(L + 1, dtype=float)
    phi = n / (rho + n)
    ones = np.ones(L + 1)
    A_ub = np.vstack([np.column_stack([ones, phi, ones]), np.column_stack([-ones, -phi, ones])])
    b_ub = np.concatenate([0.5 + n, 0.5 - n])
    res = linprog([0, 0, -1], A_ub=A_ub, b_ub=b_ub,
                  bounds=[(None, None), (None, None), (None, 1)], method="highs")
    assert res.status == 0, res.message
    return float(res.x[2])


def brute_l_star(d: int, L_cap: int = 200) -> int:
    rho = math.exp(2 * math.sqrt(d))
    last = 0
    for L in range(1, L_cap + 1):
        s = lp_slack(rho, L)
        assert abs(s) > 1e-7, (d, L, s)  # decided, not at the LP's tolerance
        if s > 0:
            assert last == L - 1, (d, L)  # feasibility is monotone in L
            last = L
        elif L > last + 5:
            break
    return last


@pytest.mark.parametrize("d", range(2, 11))
def test_l_star_matches_lp_brute_force(d):
    Ls = l_star(d)
    assert Ls == brute_l_star(d)
    rho = math.exp(2 * math.sqrt(d))
    assert lp_slack(rho, Ls) > MARGIN
    assert lp_slack(rho, Ls + 1) < -MARGIN


@pytest.mark.parametrize("d", [2, 5, 8])
def test_feasible_agrees_with_lp(d):
    rho = math.exp(2 * math.sqrt(d))
    for L in range(1, l_star(d) + 4):
        assert lstar.feasible(d, L) == (lp_slack(rho, L) > 0), L


def test_known_values():
    """Values the LP above confirms (and a guard against silent changes)."""
    assert [l_star(d) for d in range(2, 11)] == [9, 12, 15, 19, 24, 29, 34, 41, 48]


def test_l_star_nondecreasing_in_d():
    values = [l_star(d) for d in range(2, 21)]
    assert all(a <= b for a, b in zip(values, values[1:])), values
    assert values[-1] > values[0]


@pytest.mark.parametrize("L", [3, 8, 15, 30])
def test_feasibility_is_monotone_in_rho(L):
    rhos = np.geomspace(0.05, 5e3, 80)
    slack = [lp_slack(r, L) for r in rhos]
    feasible = [s > 1e-7 for s in slack]
    assert any(feasible) and not all(feasible)  # the threshold is inside the grid
    first = feasible.index(True)
    assert all(s > -1e-9 for s in slack[first:]), slack[first:]
    assert all(s > 0 for s in slack[first + 1:])


def test_l_star_rejects_small_d():
    with pytest.raises(ValueError):
        l_star(1)


def test_post_norm_below_its_width_is_limited_only_at_eps_zero():
    """With eps = 0 post-norm at d = 2 (LayerNorm) leaves two points: L* = 1; with eps > 0
    the norm is not scale-invariant and no such claim is made."""
    from bounds.lstar import cell_l_star
    from constructions.cell import Cell

    assert cell_l_star(Cell("softmax", "post_bare", "regression", d=2)) == 1
    assert cell_l_star(Cell("softmax", "post_bare", "regression", d=2, eps=1.0)) is None
    assert cell_l_star(Cell("softmax", "post_bare", "regression", d=2, norm="rmsnorm")) is None
