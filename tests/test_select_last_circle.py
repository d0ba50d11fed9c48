"""The select task read last, softmax attention with a learned pre-norm with a bias where the
values fill a curve (constructions.select_last_circle: RMSNorm d = 2, LayerNorm d = 3): the
certifying judge, the geometry recomputed by hand from the vectors, the lemma that without a
bias no two values sit on one side of the foot, B_lower <= B_min.

Expectations are derived here independently: the values recomputed from the parameters by hand
in mpmath (the model's LayerNorm/RMSNorm, elementwise gain, bias), the scores and weights as the
model defines them, the count of ``a`` tokens as target (the judge)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bounds.lower import b_lower, last_select_softmax_lower
from constructions import registry
from constructions.cell import Cell
from constructions.refusals import refusal
from constructions.regression import design
from tests.helpers import counts_random_sequences, mp_norm as _norm, ref_norm
from verify import counts_to

CASES = [("rmsnorm", 2), ("layernorm", 3)]


def _cell(norm, d, affine="gain_bias") -> Cell:
    return Cell("softmax", "pre_learned", "regression", d=d, norm=norm, affine=affine, task="select",
                read="last")


def _value(params, x):
    """``g * N(e_x) (+ beta)`` by hand (eps = 0): the reference norm of tests.helpers."""
    return ref_norm(params.cell, list(params.vectors[f"e_{x}"]), params.vectors, 0, mpmath.sqrt)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_certified_and_within_the_budget(case):
    cell = _cell(*case)
    dz = design(cell)
    assert registry.serving(cell).key == "circle_softmax_select_last" and refusal(cell) is None
    for L in (1, 2, 5):
        B = dz.estimate(L) * (1 + 1e-3) if L > 1 else 1e-3
        params = dz.build(L, B)
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
        assert max(float(_norm(v)) for v in params.vectors.values()) <= B * (1 + 1e-9)
    # below the plan's budget the same construction does not solve select (the judge says so)
    assert not counts_to(dz.build(5, dz.estimate(5) * 0.9), 5, "mp50").counts


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_the_values_are_three_points_of_a_circle_off_zero(case):
    """``rho_b = rho_a``, ``beta_a = beta_b^2 < 1``, ``v_b = v_a``, ``D > 0``, and the values at
    distance ``|g|`` from the bias (a circle), recomputed from the vectors."""
    cell = _cell(*case)
    dz = design(cell)
    L = 12
    params = dz.build(L, dz.estimate(L) * 1.001)
    with mpmath.workdps(50):
        dot = lambda u, v: sum(p * q for p, q in zip(u, v))
        sub = lambda u, v: [p - q for p, q in zip(u, v)]
        h = {x: _value(params, x) for x in "sab"}
        g, beta, w = params.vectors["g"], params.vectors["beta"], params.vectors["w"]
        for x in "sab":
            assert abs(_norm(sub(h[x], beta)) - _norm(g)) < mpmath.mpf(10) ** -30
        assert _norm(beta) > _norm(g) / 2  # the circle is moved off 0
        tau = 1 / mpmath.sqrt(cell.d)
        delta, u = sub(h["s"], h["a"]), sub(h["b"], h["a"])
        rho_a, rho_b = mpmath.exp(tau * dot(h["a"], delta)), mpmath.exp(tau * dot(h["b"], delta))
        beta_a, beta_b = mpmath.exp(tau * dot(h["a"], u)), mpmath.exp(tau * dot(h["b"], u))
        assert abs(rho_a / rho_b - 1) < mpmath.mpf(10) ** -30 and rho_a > 1
        assert beta_b < 1 and abs(beta_a - beta_b**2) < mpmath.mpf(10) ** -30
        assert abs(dot(w, h["b"]) - dot(w, h["a"])) < mpmath.mpf(10) ** -30
        assert dot(w, h["a"]) - dot(w, h["s"]) > 0


def test_random_sequences_through_the_explicit_pass():
    cell = _cell("layernorm", 3)
    L = 24
    counts_random_sequences(design(cell).build(L, design(cell).estimate(L) * 1.001), L, 30)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.05, 20), st.floats(0.05, 20), st.floats(-math.pi, math.pi),
       st.floats(-math.pi, math.pi))
def test_without_a_bias_b_outweighs_a_from_its_own_query(a1, a2, th_s, th_a):
    """The refusal's lemma: on a centred ellipse (``g * N``, no bias), the second point ``h_b`` of
    the line through ``h_a`` orthogonal to ``h_s - h_a`` has ``<h_b, h_b - h_a> > 0`` whenever
    ``0 <= sigma = <h_a, h_s - h_a> < |h_s - h_a|^2/2`` (so ``beta_b > 1``)."""
    E = np.diag([a1, a2])
    hs, ha = E @ [math.cos(th_s), math.sin(th_s)], E @ [math.cos(th_a), math.sin(th_a)]
    delta = hs - ha
    sigma = float(ha @ delta)
    if not (0 <= sigma < 0.999 * (delta @ delta) / 2) or delta @ delta < 1e-6:
        return
    u = np.array([-delta[1], delta[0]])
    # the second root t != 0 of |E^-1 (ha + t u)|^2 = 1
    Ei = np.linalg.inv(E)
    p, q = Ei @ ha, Ei @ u
    t = -2 * (p @ q) / (q @ q)
    hb = ha + t * u
    assert abs(np.linalg.norm(Ei @ hb) - 1) < 1e-9
    assert hb @ (hb - ha) > -1e-9 * (1 + abs(t) * np.linalg.norm(u)) ** 2


@pytest.mark.parametrize("L", [4])
def test_the_lower_bound_is_the_count_tasks_and_below_the_row(L):
    cell = _cell("rmsnorm", 2)
    B = design(cell).estimate(L) * 1.001
    low = b_lower(cell, L, B)
    assert low == last_select_softmax_lower(cell, L, B)
    assert low is not None and 0 <= low <= B
    assert low <= design(cell.replace(task="count")).estimate(L) * (1 + 1e-6)
