"""The select task read at the last position, softmax attention with pre-norm and a gain
(constructions.select_last_softmax): the token-by-token pass on random sequences, the certifying
judge at every small L, the geometry's scores and values, the error envelope the plan relies on
against every input, B_lower <= B_min, refusals.

Expectations are derived here independently: the scores and values recomputed from the
parameters by hand in mpmath (the model's LayerNorm/RMSNorm, elementwise gain), every input's
output written as the weighted mean of its three values, the count of ``a`` tokens as target.
"""

from __future__ import annotations

import itertools

import mpmath
import pytest

from bounds import search
from bounds.lower import b_lower, last_select_softmax_lower
from constructions import registry, select_last_softmax as sls
from constructions.cell import Cell
from constructions.refusals import refusal
from constructions.regression import design
from tests.helpers import counts_random_sequences, mp_norm as _norm, ref_norm
from verify import counts_to, explicit

BUILT = [("rmsnorm", "gain", 3), ("rmsnorm", "gain_bias", 8), ("layernorm", "gain", 4),
         ("layernorm", "gain_bias", 8)]


def _cell(norm, affine, d, attention="softmax", variant="pre_learned", **kw) -> Cell:
    return Cell(attention, variant, "regression", d=d, norm=norm, affine=affine, task="select",
                read="last", **kw)


def _params(cell: Cell, L: int, factor=1 + 1e-3):
    dz = design(cell)
    est = dz.estimate(L)
    return dz.build(L, est * factor if L > 1 else 1e-3), est


def _value(params, x):
    """``g * N(e_x) (+ beta)`` by hand (eps = 0): the reference norm of tests.helpers."""
    return ref_norm(params.cell, list(params.vectors[f"e_{x}"]), params.vectors, 0, mpmath.sqrt)


@pytest.mark.parametrize("case", BUILT, ids=lambda c: "-".join(map(str, c)))
def test_the_construction_is_certified_at_every_small_L(case):
    cell = _cell(*case)
    for L in range(1, 7):
        params, est = _params(cell, L)
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
        B = est * (1 + 1e-3) if L > 1 else 1e-3
        assert max(float(_norm(v)) for v in params.vectors.values()) <= B * (1 + 1e-9)


@pytest.mark.parametrize("case", BUILT[1::2], ids=lambda c: "-".join(map(str, c)))
def test_random_sequences_through_the_explicit_pass(case):
    cell = _cell(*case)
    L = 30
    params, _ = _params(cell, L)
    counts_random_sequences(params, L, 40)


@pytest.mark.parametrize("case", BUILT, ids=lambda c: "-".join(map(str, c)))
def test_the_scores_and_values_are_the_geometry(case):
    """``rho_b = rho_a``, ``beta_a = beta_b^2 < 1``, ``v_b = v_a``: recomputed from the vectors."""
    cell = _cell(*case)
    L = 16
    params, _ = _params(cell, L)
    with mpmath.workdps(50):
        h = {x: _value(params, x) for x in "sab"}
        dot = lambda u, v: sum(p * q for p, q in zip(u, v))
        tau = 1 / mpmath.sqrt(cell.d)
        diff = [p - q for p, q in zip(h["s"], h["a"])]
        rho_a, rho_b = mpmath.exp(tau * dot(h["a"], diff)), mpmath.exp(tau * dot(h["b"], diff))
        u = [p - q for p, q in zip(h["b"], h["a"])]
        beta_a, beta_b = mpmath.exp(tau * dot(h["a"], u)), mpmath.exp(tau * dot(h["b"], u))
        w = params.vectors["w"]
        assert abs(rho_a / rho_b - 1) < mpmath.mpf(10) ** -30
        assert beta_b < 1 and abs(beta_a - beta_b**2) < mpmath.mpf(10) ** -30
        assert abs(dot(w, h["b"]) - dot(w, h["a"])) < mpmath.mpf(10) ** -30
        assert dot(w, h["a"]) - dot(w, h["s"]) > 0  # D > 0


@pytest.mark.parametrize("case", BUILT[:2], ids=lambda c: "-".join(map(str, c)))
def test_every_input_lies_in_the_plans_envelope(case):
    """The module's claim: every select input's error is within ``[C + g(n_a), C + G(n_a)]``
    (the monotone envelope of the plan), checked on every input at small L by the explicit pass,
    and the extremes are met (n_b = 0, and n_b = L - n_a for query b)."""
    cell = _cell(*case)
    dz = design(cell)
    for L in (3, 6):
        B = dz.estimate(L) * 1.01
        lr, c, D, _ = dz.plan(L, B)
        params = dz.build(L, B)
        with mpmath.workdps(50):
            rho, D, c = mpmath.exp(mpmath.mpf(lr)), mpmath.mpf(D), mpmath.mpf(c)
            beta = mpmath.exp(-c**2 / (4 * mpmath.sqrt(cell.d)))
            g = lambda n: D * n / (rho + n) - n
            G = lambda n: D * (n + beta * (L - n)) / (rho + n + beta * (L - n)) - n
            C = explicit(params, "s" + "a", "mp50") - 1 - g(1)  # the line constant, from query a
            for m in range(1, L + 1):
                for seq in itertools.product("ab", repeat=m):
                    s = "s" + "".join(seq)
                    n_a = s.count("a")
                    e = explicit(params, s, "mp50") - n_a
                    assert C + g(n_a) - mpmath.mpf(10) ** -30 <= e <= C + G(n_a) + mpmath.mpf(10) ** -30, s
            g_min, G_max = sls.errors(L, rho, D, c, cell.d, mpmath)
            assert abs(g_min - min(g(n) for n in range(L + 1))) < mpmath.mpf(10) ** -30
            assert abs(G_max - max(G(n) for n in range(L + 1))) < mpmath.mpf(10) ** -30


@pytest.mark.parametrize("L", [4, 16])
def test_the_lower_bound_is_below_the_certified_row_and_is_the_count_tasks(L):
    cell = _cell("rmsnorm", "gain", 8)
    row = search.regression_row(cell, L)
    assert row["certified"] and row["B_lower"] is not None
    assert 0 < row["B_lower"] <= row["B_min"]
    count = search.regression_row(cell.replace(task="count"), L)
    assert row["B_lower"] <= count["B_min"] * (1 + 1e-6)  # the count task's bound: below its B_min
    assert row["B_min"] >= count["B_lower"]
    assert b_lower(cell, L, row["B_min"]) == last_select_softmax_lower(cell, L, row["B_min"])
    assert last_select_softmax_lower(cell, L, None) is None


def test_the_price_of_b_vanishes_relative_to_the_count_task():
    """The distractor's relative price (budget ``O(sqrt(log L)/L)``, the joint segment
    ``O(1/L)``) falls with L: the plan's B over the count task's construction's B."""
    cell = _cell("rmsnorm", "gain", 8)
    ratios = [design(cell).estimate(L) / design(cell.replace(task="count")).estimate(L) for L in (16, 128, 1024)]
    assert all(r > 1 for r in ratios)
    assert ratios[0] > ratios[1] > ratios[2] and ratios[2] < 1.05


@pytest.mark.parametrize("norm, d, affines", [("rmsnorm", 2, ("gain",)), ("layernorm", 3, ("gain",)),
                                               ("layernorm", 2, ("gain", "gain_bias"))])
def test_the_boundary_widths_are_refused(norm, d, affines):
    for affine in affines:
        cell = _cell(norm, affine, d)
        why = refusal(cell)
        assert why is not None and ("ellipse" in why or "two values" in why)
        assert registry.serving(cell) is None
        with pytest.raises(ValueError):
            design(cell)


@pytest.mark.parametrize("variant, norm, eps", [("pre_bare", "layernorm", 0.01), ("pre_bare", "rmsnorm", 0.01),
                                                ("post_learned", "rmsnorm", 0.01)])
def test_the_other_softmax_cells_are_refused_with_a_reason(variant, norm, eps):
    affine = "gain_bias" if variant.endswith("learned") else None
    cell = _cell(norm, affine, 8, variant=variant, eps=eps)
    why = refusal(cell)
    assert why is not None and "softmax" in why
    assert registry.serving(cell) is None
    eps_cell = _cell("rmsnorm", "gain", 8, eps=0.01)
    assert "eps > 0" in refusal(eps_cell) and registry.serving(eps_cell) is None
