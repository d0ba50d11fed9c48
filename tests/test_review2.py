"""The classification margin bound at L = 1 with pre-norm and a gain: shapes with rho < 1.

At ``L = 1`` the segment bound of :mod:`bounds.margin` is ``X/(1 + rho)``, which decreases in
``rho``: a value ``h_a`` beyond ``h_s`` on its own axis (``sigma = <h_s, h_s - h_a> < 0``) can
separate the two outputs by more than any shape ``rho >= 1``.  The parameter sets here are
written out by hand (pre-RMSNorm with a gain, every value on ``E_1``), their margin is
computed independently (the two outputs differ by ``(h_a - h_s)/(1 + rho)``) and certified by
the judge, and must stay below ``margin_upper``.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from bounds.margin import margin_upper
from constructions.cell import Cell, Params
from verify.judge import counts_to


def _cell(d: int, task: str) -> Cell:
    return Cell("softmax", "pre_learned", "classification", d=d, norm="rmsnorm", affine="gain", task=task)


def _axis_head(cell: Cell, c, s):
    """``e_s = c E_1 + s E_2`` (``c^2 + s^2 = 1``), ``e_a = E_1``, ``g = E_1``: ``h_s = c sqrt(d) E_1``,
    ``h_a = sqrt(d) E_1``; the head ``u_1 = -u_0 = E_1`` with the biases centred between the two
    outputs, and the margin ``Delta = sqrt(d)(1 - c)/(1 + rho)`` it has (mpmath)."""
    d = cell.d
    E = [[mpmath.mpf(int(i == j)) for j in range(d)] for i in range(2)]
    e_s = [c * E[0][j] + s * E[1][j] for j in range(d)]
    sd = mpmath.sqrt(d)
    rho = mpmath.exp(sd * c * (c - 1))  # exp(tau <h_s, h_s - h_a>), tau = 1/sqrt(d)
    x0 = c + c * sd  # <E_1, z_0>: z_0 = e_s + h_s
    x1 = c + (rho * c * sd + sd) / (rho + 1)
    vectors = {"e_s": e_s, "e_a": E[0], "g": E[0], "u": [[-v for v in E[0]], E[0]]}
    if cell.distractor:
        vectors["e_b"] = e_s  # b reads as s: (s, b) is the output of class 0
    mid = (x0 + x1) / 2
    return Params(cell, vectors, {"b": [mid, -mid]}), x1 - x0


@pytest.mark.parametrize("task", ["count", "select"])
@pytest.mark.parametrize("d", [32, 64])
def test_hand_built_head_with_rho_below_one_is_under_the_bound(d, task):
    cell = _cell(d, task)
    with mpmath.workdps(40):
        params, delta = _axis_head(cell, mpmath.mpf(7) / 25, mpmath.mpf(24) / 25)
    res = counts_to(params, 1, "arb256")
    assert res.certified
    assert abs(res.min_margin - float(delta)) < 1e-9
    # the shape has rho < 1 and beats the value of the bound at rho = 1, sqrt(d)/2
    assert float(delta) > math.sqrt(d) / 2
    assert res.min_margin <= margin_upper(cell, 1)


@pytest.mark.parametrize("d", [2, 5, 8, 64, 400])
def test_bound_at_one_is_the_supremum_over_the_axis_family(d):
    """RMSNorm with a gain: ``H = V = sqrt(d)`` and the family ``h_s = c H E_1``, ``h_a = H E_1``
    (``c`` in ``[-1, 1]``) realises ``X = H (1 - c)`` at ``sigma = H^2 c (c - 1)``, the largest
    ``X`` at that score gap, over every reachable ``sigma``: the bound is its supremum of
    ``X/(1 + rho)`` (a float grid, refined around its best point)."""
    H = math.sqrt(d)

    def value(c):
        return H * (1 - c) / (1 + np.exp(H * H * c * (c - 1) / math.sqrt(d)))

    grid = np.linspace(-1, 1, 200001)
    best = grid[np.argmax(value(grid))]
    fine = np.linspace(max(-1, best - 1e-4), min(1, best + 1e-4), 20001)
    sup = float(value(fine).max())
    bound = margin_upper(_cell(d, "count"), 1)
    assert sup <= bound <= sup * (1 + 1e-5)
