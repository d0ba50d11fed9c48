"""Bare pre-norm with ``eps > 0`` read at the last position (:mod:`constructions.last_eps`), and
the select task read last with linear pre-norm and ``eps > 0`` (:func:`bounds.lower.b_lower`).

* the registry serves the cells with :class:`~constructions.last_eps.EpsBareDesign` (either kind,
  every ``d``) and the refusals agree;
* the construction counts at every ``L <= L*`` (judged in ball arithmetic at each ``L``), and an
  explicit token-by-token pass on random sequences (:mod:`verify.strategies`) agrees;
* the sweep's rows up to the exact ``L*`` are certified with ``0 < B_lower <= B_min``, the row
  at ``L*`` included, and the row beyond is null;
* the lemmas of the lower bound hold on random parameter sets: ``|N(e)| <= R(B)``, ``sigma <=
  R^2/4``, ``X^2 - R X + sigma <= 0``, the score-gap floor and ``|y(0) - K| <= 2 B^2``;
* the value length of the module is the verifier's norm;
* softmax attention with pre-LayerNorm and a gain at ``eps > 0``: served at ``d >= 3`` (RMSNorm,
  ``d = 2`` and classification refused), the carried construction's values and outputs equal
  the ``eps = 0`` construction's, rows certified above the proven bound;
* the select task read last with pre-LayerNorm and ``eps > 0``: served at ``d >= 3`` (RMSNorm and
  ``d = 2`` refused), the carried construction's outputs equal the ``eps = 0`` construction's on
  random sequences, rows certified above the proven bound, which is the count task's at the last
  read.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounds.lower import b_lower, last_line_lower
from bounds.lstar import cell_l_star, last_l_star_eps
from bounds.search import regression_row
from constructions import Cell, last_eps, regression, registry
from constructions.refusals import refusal
from tests.helpers import random_params
from verify import counts_to, reduced
from verify.backends import get_backend
from verify.forward import explicit, numbers
from verify.strategies import sequences, target


def _cell(d=8, kind="layernorm", eps=1e-5) -> Cell:
    return Cell("softmax", "pre_bare", d=d, eps=eps, norm=kind, read="last")


@pytest.mark.parametrize("d", [2, 3, 8, 256])
@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_the_registry_serves_every_width_and_kind(d, kind):
    cell = _cell(d, kind)
    assert refusal(cell) is None
    assert registry.serving(cell).name == "EpsBareDesign"
    assert isinstance(regression.design(cell), last_eps.EpsBareDesign)
    assert cell_l_star(cell) == last_l_star_eps(d)
    # eps = 0 stays with the scale-invariant design; classification is still refused
    assert registry.serving(cell.replace(eps=0.0)).name == "BareDesign"
    assert refusal(cell.replace(readout="classification")) is not None


@pytest.mark.parametrize("d,kind,eps", [(8, "layernorm", 1e-5), (2, "layernorm", 1e-5),
                                        (3, "rmsnorm", 0.5)])
def test_the_construction_counts_at_every_L_up_to_l_star(d, kind, eps):
    cell = _cell(d, kind, eps)
    design = regression.design(cell)
    assert design.estimate(design.l_star + 1) is None
    for L in range(1, design.l_star + 1):
        est = design.estimate(L)
        B = 1e-3 if L == 1 else est * (1 + 1e-3)
        params = design.build(L, B)
        assert float(params.bound()) <= B * (1 + 1e-9)
        assert counts_to(params, L, "arb256").counts, (L, B)
        if L > 1:  # well below the estimate the search finds nothing, and the judge agrees
            low = design.build(L, est * 0.9)
            assert not counts_to(low, L, "arb256").counts, L


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_explicit_pass_on_random_sequences_counts(data):
    cell = _cell(8, "layernorm")
    L = last_l_star_eps(8)
    params = _built(cell, L)
    seq = data.draw(sequences(cell, max_length=L))
    assert abs(float(explicit(params, seq, "mp50")) - target(seq)) < 0.5


_BUILT = {}


def _built(cell: Cell, L: int):
    if (cell, L) not in _BUILT:
        design = regression.design(cell)
        _BUILT[cell, L] = design.build(L, design.estimate(L) * (1 + 1e-3))
    return _BUILT[cell, L]


@pytest.mark.parametrize("d,kind", [(8, "layernorm"), (3, "rmsnorm")])
def test_the_rows_to_l_star_are_certified_above_the_proven_bound(d, kind):
    cell = _cell(d, kind)
    star = last_l_star_eps(d)
    assert star == 5  # beyond the eps = 0 L* of 4: values shorter than sqrt(d) let rho exceed 1
    for L in (4, star):
        row = regression_row(cell, L)
        assert row["certified"] and 0 < row["B_lower"] <= row["B_min"], (L, row)
    assert row["shape_value"] > 1  # the row at L* needs rho > 1
    far = regression_row(cell, star + 1)
    assert far["B_min"] is None and f"L* = {star}" in far["note"]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), scale=st.floats(0.01, 3), eps=st.sampled_from([1e-4, 0.1, 2.0]),
       kind=st.sampled_from(["layernorm", "rmsnorm"]))
def test_random_parameters_obey_the_lemmas_of_the_eps_bound(seed, scale, eps, kind):
    d = 4
    cell = _cell(d, kind, eps)
    params = random_params(cell, np.random.default_rng(seed), scale=scale)
    nums = numbers(params, "float64")
    h_s, h_a = (np.asarray(nums.h[t], dtype=float) for t in "sa")
    v = {k: np.asarray(x, dtype=float) for k, x in params.vectors.items()}
    B = max(np.linalg.norm(v[k]) for k in ("e_s", "e_a", "w"))
    R = math.sqrt(d) * B / math.sqrt(B**2 + d * eps)
    assert max(np.linalg.norm(h_s), np.linalg.norm(h_a)) <= R * (1 + 1e-12)
    sigma = h_a @ (h_s - h_a)
    X = np.linalg.norm(h_a - h_s)
    assert sigma <= R * R / 4 * (1 + 1e-12)
    assert X * X - R * X + sigma <= 1e-9 * (1 + R * R)
    if sigma > 0:
        assert B * B * (d - 4 * sigma) >= 4 * sigma * d * eps * (1 - 1e-9)
    y = np.asarray(reduced(params, list(range(5))), dtype=float)
    D = v["w"] @ (h_a - h_s)
    rho = math.exp(sigma / math.sqrt(d))
    K = y[1] - D / (rho + 1)
    n = np.arange(1, 5)
    assert np.allclose(y[1:], K + D * n / (rho + n), rtol=1e-9, atol=1e-9 * (1 + abs(K) + abs(D)))
    assert abs(y[0] - K) <= 2 * B**2 * (1 + 1e-12)


@given(c=st.floats(1e-3, 1e3), eps=st.floats(1e-8, 10), kind=st.sampled_from(["layernorm", "rmsnorm"]))
@settings(max_examples=30, deadline=None)
def test_the_value_length_is_the_norms(c, eps, kind):
    cell = _cell(5, kind, eps)
    e = np.array([c, 0, 0, 0, 0.0]) if kind == "rmsnorm" else c * np.array([2, -1, -1, 0, 0.0]) / math.sqrt(6)
    params = random_params(cell, np.random.default_rng(0))
    params = type(params)(cell, {**{k: np.asarray(x, dtype=float) for k, x in params.vectors.items()},
                                 "e_s": e + (0 if kind == "rmsnorm" else 3.0)}, params.scalars)
    h_s = np.asarray(numbers(params, "float64").h["s"], dtype=float)
    assert np.linalg.norm(h_s) == pytest.approx(last_eps.value_length(cell, c), rel=1e-12)
    # the inverse, where it is well conditioned (q away from 1): R(c(q)) = q sqrt(d)
    q = min(last_eps.value_length(cell, c) / math.sqrt(5), 0.999)
    assert last_eps.value_length(cell, last_eps.centred_length(cell, q)) == pytest.approx(q * math.sqrt(5), rel=1e-12)


SELECT = [dict(variant="pre_bare"), dict(variant="pre_learned", affine="gain"), dict(variant="pre_learned")]


def _select(kw, d=8, eps=1e-5) -> Cell:
    return Cell("linear", d=d, eps=eps, task="select", read="last", **kw)


@pytest.mark.parametrize("kw", SELECT)
def test_the_select_task_at_eps_is_served_with_layernorm_at_d_3(kw):
    for d in (3, 8):
        assert registry.serving(_select(kw, d)).name == "EpsSelectDesign"
        assert refusal(_select(kw, d)) is None
    assert refusal(_select(kw, 2)) is not None and registry.serving(_select(kw, 2)) is None
    rms = _select({**kw, "norm": "rmsnorm"})
    assert "pre-RMSNorm with eps > 0" in refusal(rms) and registry.serving(rms) is None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kw=st.sampled_from(SELECT), eps=st.sampled_from([1e-5, 0.01, 1.0]))
def test_the_carried_select_construction_has_the_eps_zero_outputs(data, kw, eps):
    """The proof of :class:`~constructions.last_eps.EpsSelectDesign`: every output of the carried
    parameters at ``eps`` is the ``eps = 0`` construction's (50 digits, random sequences)."""
    cell = _select(kw, 5, eps)
    design = regression.design(cell)
    L = data.draw(st.sampled_from([2, 5, 16]))
    B0 = design.inner.estimate(L) * 1.01
    with mpmath.workdps(60):
        p0 = design.inner.build(L, B0, dps=60)
        carried = design._carry(p0)
    seq = data.draw(sequences(cell, max_length=L))
    y0, y = (explicit(p, seq, "mp50") for p in (p0, carried))
    assert abs(y - y0) <= 1e-25 * (1 + abs(y0))
    assert abs(float(y) - target(seq)) < 0.5


@pytest.mark.parametrize("kw", SELECT[:2])
def test_the_select_rows_at_eps_are_certified_above_the_bound(kw):
    cell = _select(kw, 8, 0.01)
    for L in (2, 8):
        row = regression_row(cell, L)
        assert row["certified"] and row["B_lower"] is not None and row["B_lower"] <= row["B_min"], row
        zero = regression_row(cell.replace(eps=0.0), L, lower=False)
        assert row["B_min"] >= zero["B_min"] * (1 - 1e-6)  # eps = 0.01 costs here, never helps this construction
    assert regression_row(cell, 8)["B_lower"] > 0


@pytest.mark.parametrize("kw", [dict(variant="pre_bare"), dict(variant="pre_learned", affine="gain")])
def test_the_select_bound_at_eps_is_the_count_tasks(kw):
    cell = Cell("linear", d=4, eps=0.01, task="select", read="last", **kw)
    for L in (2, 3, 9):
        got = b_lower(cell, L, None)
        assert got is not None and got == last_line_lower(cell.replace(task="count"), L)
    assert b_lower(cell, 9, None) > 0


def test_readme_states_the_exact_l_star():
    """The README's values of ``L*`` with ``eps > 0`` (5 at ``d = 2..16``, 7 at 64, 16 at 256)."""
    assert {d: last_l_star_eps(d) for d in (2, 3, 8, 16, 64, 256)} == {2: 5, 3: 5, 8: 5, 16: 5, 64: 7, 256: 16}
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
    assert "5 at\n  `d = 2..16`, 7 at `d = 64`, 16 at `d = 256`" in text


GAIN = ["gain", "gain_bias"]


def _gain(affine, d=8, eps=1e-5, norm="layernorm") -> Cell:
    return Cell("softmax", "pre_learned", d=d, eps=eps, affine=affine, norm=norm, read="last")


@pytest.mark.parametrize("affine", GAIN)
def test_softmax_with_a_gain_at_eps_is_served_with_layernorm_at_d_3_and_rmsnorm(affine):
    for d in (3, 8):
        assert registry.serving(_gain(affine, d)).name == "EpsGainDesign" and refusal(_gain(affine, d)) is None
    assert refusal(_gain(affine, 2)) is not None
    for d in (2, 3, 8):  # RMSNorm: constructions.last_eps.EpsRmsGainDesign, every d
        rms = _gain(affine, d, norm="rmsnorm")
        assert refusal(rms) is None and registry.serving(rms).name == "EpsRmsGainDesign"
    head = _gain(affine).replace(readout="classification")
    assert refusal(head) is not None and registry.serving(head) is None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), affine=st.sampled_from(GAIN), eps=st.sampled_from([1e-5, 0.01, 1.0]))
def test_the_carried_gain_construction_has_the_eps_zero_outputs(data, affine, eps):
    """The proof of :class:`~constructions.last_eps.EpsGainDesign`: the gain ``g/s`` gives the
    ``eps = 0`` values and the parts along ``one`` the ``eps = 0`` offsets (50 digits)."""
    cell = _gain(affine, 5, eps)
    design = regression.design(cell)
    L = data.draw(st.sampled_from([2, 5, 16]))
    with mpmath.workdps(60):
        p0 = design.inner.build(L, design.inner.estimate(L) * 1.01, dps=60)
        carried = design._carry(p0)
    _same_outputs(cell, p0, carried, data, L)


def _same_outputs(cell, p0, carried, data, L: int) -> None:
    """The carried set has the values of the ``eps = 0`` set ``p0`` and its output on a drawn
    sequence (50 digits), which counts it."""
    with get_backend("mp50").context():
        h0, h = (numbers(p, "mp50").h for p in (p0, carried))
        assert all(abs(x - y) <= 1e-25 for t in "sa" for x, y in zip(h0[t], h[t]))
    seq = data.draw(sequences(cell, max_length=L))
    y0, y = (explicit(p, seq, "mp50") for p in (p0, carried))
    assert abs(y - y0) <= 1e-25 * (1 + abs(y0))
    assert abs(float(y) - target(seq)) < 0.5


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), affine=st.sampled_from(GAIN), eps=st.sampled_from([1e-5, 0.01, 1.0]),
       d=st.sampled_from([2, 3, 5]))
def test_the_carried_rms_gain_construction_has_the_eps_zero_outputs(data, affine, eps, d):
    """The proof of :class:`~constructions.last_eps.EpsRmsGainDesign`: the gain ``g/sig`` gives the
    ``eps = 0`` values, the read-out's part ``om p`` (orthogonal to the values) and ``w0`` the
    ``eps = 0`` offsets, so every output is the ``eps = 0`` construction's (50 digits)."""
    cell = _gain(affine, d, eps, norm="rmsnorm")
    design = regression.design(cell)
    L = data.draw(st.sampled_from([2, 5, 16]))
    with mpmath.workdps(60):
        p0 = design.inner.build(L, design.inner.estimate(L) * 1.01, dps=60)
        try:
            carried = design._carry(p0)
        except ValueError:  # d = 2 without an orthogonal direction: no positive length carries it
            assert d == 2 and design._carry(p0, bound_only=True) == math.inf
            return
    _same_outputs(cell, p0, carried, data, L)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_the_carried_witness_at_one_is_within_its_budget(norm):
    """``L = 1``: the carried parameters at budget ``B`` have a bound at most ``B`` and count."""
    design = regression.design(_gain("gain", 8, 0.01, norm=norm))
    params = design.build(1, 1e-3)
    assert float(params.bound()) <= 1e-3 and counts_to(params, 1, "arb256").counts


@pytest.mark.parametrize("affine", GAIN)
def test_the_rms_gain_rows_at_eps_are_certified_above_the_bound(affine):
    cell = _gain(affine, 8, 0.01, norm="rmsnorm")
    for L in (2, 16):
        row = regression_row(cell, L)
        assert row["certified"] and row["B_lower"] is not None and row["B_lower"] <= row["B_min"], row


@pytest.mark.parametrize("affine", GAIN[1:])  # gain alone: the carried outputs above
def test_the_gain_rows_at_eps_are_certified_above_the_bound(affine):
    cell = _gain(affine, 8, 0.01)
    for L in (2, 16):
        row = regression_row(cell, L)
        assert row["certified"] and 0 <= row["B_lower"] <= row["B_min"], row
        assert (row["B_lower"] > 0) == (L > 2)  # L = 2: the segment of L - 1 = 1 needs no amplitude
        params = regression.design(cell).build(L, row["B_min"])
        assert counts_to(params, L, "arb256").counts
