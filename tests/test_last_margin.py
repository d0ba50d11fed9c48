"""Classification at the last read where ``z_0`` leaves the line (the plane head) or is its
point at ``phi = -1`` (the pair head), and the proven ``margin_upper`` of those cells.

* every head is certified by the judge, with every vector of norm at most 1 and its margin at
  most the proven bound;
* for ``L <= 8`` the margin is the max-min margin of its own outputs (linear programming over
  every head, bracketing the disk by polygons), and from the lengths the docstrings name on it
  is the bound itself: construction, exact max-min and bound agree;
* random parameter sets of norm at most 1: the outputs obey the lemmas of the bound (``z_0`` on
  the line at ``phi = -1`` without a norm; ``X = sqrt(-2 sigma)`` bare) and no head for them beats
  the bound;
* the bound by hand (``kappa/(L-1)``) and by an independent dense grid (softmax);
* ``margin_upper/margin`` within 1% from ``L = 16`` (to ``1e-5`` for these cells); linear attention
  with a gain: the opposed embeddings keep the collinear margin of their first gap (by hand), and
  the bound that sees ``z_0`` is below the chain's;
* the theory exponents and the sweep's rows; the cells still refused say so.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounds import sweep as sweep_mod
from bounds.last_margin import last_margin_upper
from bounds.margin import margin_upper
from bounds.search import classification_row
from constructions import Cell, classification, laws, last_read
from tests.helpers import best_head, outputs_of, random_vectors
from verify import counts_to

#: the cells of the plane head and of the pair head
NEW = [dict(attention="linear", variant="none"),
       dict(attention="linear", variant="pre_bare"),
       dict(attention="linear", variant="pre_bare", norm="rmsnorm"),
       dict(attention="softmax", variant="pre_bare"),
       dict(attention="softmax", variant="none"),
       dict(attention="softmax", variant="pre_bare", norm="rmsnorm")]
#: the first L from which the plane head meets the bound (module docstring of last_read), at d = 8
MEETS_FROM = {("linear", "none", "layernorm"): 3, ("linear", "pre_bare", "layernorm"): 6,
              ("linear", "pre_bare", "rmsnorm"): 6, ("softmax", "pre_bare", "layernorm"): 2,
              ("softmax", "none", "layernorm"): 1, ("softmax", "pre_bare", "rmsnorm"): 3}


def _cell(kw, d=8) -> Cell:
    return Cell(readout="classification", read="last", d=d, **kw)


def _ids(kw) -> str:
    return "-".join(str(v) for v in kw.values())


def _margin(params, L) -> float:
    res = counts_to(params, L, "arb256")
    assert res.certified and res.min_margin > 0, res.verdict
    return float(res.min_margin)


@pytest.mark.parametrize("kw", NEW, ids=_ids)
def test_the_heads_are_certified_below_the_bound(kw):
    for d, L in ((3, 1), (3, 5), (8, 2), (8, 21), (16, 9)):
        cell = _cell(kw, d)
        params = classification.design(cell).build(L)
        m = _margin(params, L)
        assert params.bound() <= 1
        assert m <= margin_upper(cell, L)


@pytest.mark.parametrize("kw", NEW, ids=_ids)
def test_small_L_agrees_with_the_exact_max_min(kw):
    """``L <= 8``: the certified margin is never above the max-min of its outputs (circumscribed
    polygon), and from the stated length on the inscribed polygon's head, the construction and the
    proven bound coincide (to the polygon's ``2e-5`` and the bound's ``1e-6``)."""
    cell = _cell(kw)
    start = MEETS_FROM[(kw["attention"], kw["variant"], kw.get("norm", "layernorm"))]
    for L in range(2, 9):
        params = classification.design(cell).build(L)
        m = _margin(params, L)
        z = outputs_of(cell, {k: v for k, v in params.vectors.items() if k != "u"}, L)
        outer, inner = best_head(z, outer=True), best_head(z, outer=False)
        upper = margin_upper(cell, L)
        assert m <= outer * (1 + 1e-9) and inner <= upper * (1 + 1e-9)
        if L >= start:
            assert m == pytest.approx(upper, rel=3e-6) and inner == pytest.approx(m, rel=3e-5)


@pytest.mark.parametrize("d", [2, 8])
def test_one_count_meets_the_bound(d):
    """``L = 1``: the margin is ``|z_1 - z_0|``, at ``e_s = -e_a`` the bound's ``2 + 3 kappa`` (linear)
    or ``2 + 2 sqrt(d)/(1 + exp(-2 sqrt d))`` (bare softmax), computed here by hand."""
    sd = math.sqrt(d)
    hand = {("linear", "none"): 2 + 3 / sd, ("linear", "pre_bare"): 2 + 3 * d,
            ("softmax", "pre_bare"): 2 + 2 * sd / (1 + math.exp(-2 * sd))}
    for kw in NEW:
        cell = _cell(kw, d)
        if (kw["attention"], kw["variant"]) == ("linear", "pre_bare") and d == 2 and "norm" not in kw:
            continue  # LayerNorm at d = 2 maps onto a line: the collinear head of the regression geometry
        m, upper = _margin(classification.design(cell).build(1), 1), margin_upper(cell, 1)
        assert m == pytest.approx(upper, rel=1e-9)
        if (kw["attention"], kw["variant"]) in hand:
            assert upper == pytest.approx(hand[(kw["attention"], kw["variant"])], rel=1e-12)


@pytest.mark.parametrize("kw", NEW, ids=_ids)
def test_the_bound_is_met_from_sixteen(kw):
    cell = _cell(kw)
    for L in (16, 64):
        row = classification_row(cell, L)
        assert row["certified"] and 1 <= row["margin_ratio"] <= 1 + 1e-5


def test_every_built_softmax_and_bare_cell_is_within_one_percent():
    """The ratio of the last-read cells whose bound closes (softmax with a learned pre-norm too)."""
    for kw in NEW[1:] + [dict(attention="softmax", variant="pre_learned")]:
        row = classification_row(_cell(kw), 16)
        assert row["certified"] and row["margin_ratio"] <= 1.01


@pytest.mark.parametrize("d", [3, 8])
def test_the_line_bounds_by_hand(d):
    """Gaps ``tau |h_a|^3``: ``tau`` without a norm, ``d`` bare; the plane head keeps it."""
    tau = 1 / math.sqrt(d)
    for variant, kappa in (("none", tau), ("pre_bare", d)):
        cell = _cell(dict(attention="linear", variant=variant), d)
        assert last_margin_upper(cell, 17) == pytest.approx(kappa / 16, rel=1e-12)
        assert _margin(classification.design(cell).build(17), 17) == pytest.approx(kappa / 16, rel=1e-9)


def _pair_sup(d: int, L: int) -> float:
    """The pair bound on a dense grid of rho, written here from the model: ``e_a = alpha e_s``
    (the extremal geometry) gives ``sigma = alpha - alpha^2``, ``X = 1 - alpha``, and the outputs
    ``-X, X n/(rho+n)`` have margin ``1/sum 1/gap``."""
    alpha = np.linspace(-1, 0.5, 200001)
    rho = np.exp((alpha - alpha**2) / math.sqrt(d))
    X = 1 - alpha
    n = np.arange(1, L + 1)
    x = np.concatenate([-X[:, None], X[:, None] * n / (rho[:, None] + n)], axis=1)
    return float(np.max(1 / np.sum(1 / np.diff(x, axis=1), axis=1)))


def _bare_sup(d: int, L: int) -> float:
    """The bare segment bound on a dense grid: ``X = sqrt(-2 sigma)``, points ``X n/(rho+n)``."""
    sigma = np.linspace(-2 * d, -1e-9, 200001)
    rho = np.exp(sigma / math.sqrt(d))
    n = np.arange(1, L + 1)
    x = np.sqrt(-2 * sigma)[:, None] * n / (rho[:, None] + n)
    return float(np.max(1 / np.sum(1 / np.diff(x, axis=1), axis=1)))


@pytest.mark.parametrize("d, L", [(2, 1), (3, 4), (8, 8), (8, 40)])
def test_the_softmax_bounds_against_a_dense_grid(d, L):
    pair = last_margin_upper(_cell(dict(attention="softmax", variant="none"), d), L)
    assert _pair_sup(d, L) <= pair <= _pair_sup(d, L) * (1 + 2e-6)
    if d >= 3 and L >= 2:
        bare = last_margin_upper(_cell(dict(attention="softmax", variant="pre_bare"), d), L)
        assert _bare_sup(d, L) <= bare <= _bare_sup(d, L) * (1 + 2e-6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kw=st.sampled_from(NEW), L=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_random_parameters_obey_the_lemmas_and_the_bound(kw, L, seed):
    cell = _cell(kw, 4)
    rng = np.random.default_rng(seed)
    vectors = random_vectors(cell, rng)
    z = outputs_of(cell, vectors, L)
    if not np.all(np.isfinite(z)):
        return
    if cell.attention == "softmax" and not cell.normed:
        e_s, e_a = (np.asarray(vectors[k], dtype=float) for k in ("e_s", "e_a"))
        assert np.allclose(z[0], (e_a + e_s) - (e_a - e_s), atol=1e-12)  # phi = -1
        sigma = float(e_a @ (e_s - e_a))
        assert np.linalg.norm(e_a - e_s) <= laws.last_value_gap(cell, 1.0, sigma, laws.FLOAT) * (1 + 1e-12)
        assert sigma <= laws.last_score_gap_max(cell, 1.0, laws.FLOAT) * (1 + 1e-12)
    if cell.attention == "softmax" and cell.normed:
        assert laws.last_score_gap_max(cell, 1.0, laws.FLOAT) == 0  # rho <= 1
    assert best_head(z, outer=False) <= last_margin_upper(cell, L) * (1 + 1e-9) + 1e-12


def test_the_theory_exponents():
    """``-1`` on the line, ``-3`` for softmax; the bound's own slope between large ``L`` tends to it."""
    for kw, p in ((NEW[0], -1.0), (NEW[1], -1.0), (NEW[3], -3.0), (NEW[4], -3.0)):
        cell = _cell(kw)
        assert laws.margin_exponent(cell) == p
        a, b = last_margin_upper(cell, 2048), last_margin_upper(cell, 4096)
        assert math.log(b / a) / math.log(2) == pytest.approx(p, abs=5e-3)


@pytest.mark.parametrize("attention, variant, theory", [("softmax", "none", -3.0), ("linear", "none", -1.0)])
def test_the_sweep_rows(attention, variant, theory, capsys):
    argv = ["--variant", variant, "--attention", attention, "--readout", "classification",
            "--read", "last", "--Lmax", "16", "--jobs", "1", "--quiet", "--json"]
    assert sweep_mod.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["read"], result["readout"], result["L_star"]) == ("last", "classification", None)
    assert result["fit"]["theory"] == theory
    assert [r["L"] for r in result["rows"]] == [2, 4, 8, 16]  # beyond the regression L* = 2
    for row in result["rows"]:
        assert row["certified"] and row["B_min"] == 0.0 and row["B_min_is_infimum"]
        assert 0 < row["margin"] <= row["margin_upper"]
        assert row["storage"] == (row["L"] + 1) * 9 + 2 * 8  # u, b; e_s, e_a
    assert result["rows"][-1]["margin_ratio"] <= 1 + 1e-5


def test_bare_layernorm_at_width_two_has_one_shape():
    """``h = +-sqrt(2) c_1``: the head sits at ``h_a = -h_s`` and meets the bound, which is its value
    there (``X = 2 sqrt 2``, ``rho = exp(-4/sqrt 2)``, points ``X n/(rho+n)``)."""
    cell = _cell(dict(attention="softmax", variant="pre_bare"), 2)
    rho, X = math.exp(-4 / math.sqrt(2)), 2 * math.sqrt(2)
    for L in (2, 9):
        x = X * np.arange(1, L + 1) / (rho + np.arange(1, L + 1))
        by_hand = 1 / np.sum(1 / np.diff(x))
        assert margin_upper(cell, L) == pytest.approx(by_hand, rel=1e-12)
        assert _margin(classification.design(cell).build(L), L) == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.parametrize("kw", [dict(attention="softmax", variant="pre_bare", eps=0.01),
                                dict(attention="softmax", variant="post_bare", eps=0.01)], ids=_ids)
def test_the_softmax_cells_still_unbuilt_are_refused(kw, capsys):
    kw = dict(kw)
    argv = ["--variant", kw.pop("variant"), "--readout", "classification", "--read", "last", "--Lmax", "8"]
    for key, value in kw.items():
        argv += [f"--{key}", str(value)]
    assert sweep_mod.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "no construction" in err


def test_the_pair_head_reads_collinear_outputs_in_order():
    cell = _cell(NEW[4])
    with pytest.raises(ValueError, match="not in order"):
        last_read.pair_head(np.array([[1.0, 0.0], [0.0, 0.0], [2.0, 0.0]], dtype=object))
    assert last_read.pair_cell(cell) and not last_read.plane_cell(cell)


def test_readme_table_of_the_new_heads():
    from tests.test_readme import README

    section = README.split("The cells of the plane and pair heads", 1)[1].split("\n* ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("  | 16 ") or line.startswith("  | 1024 ")]
    assert len(rows) == 6
    for L, text, margin, ratio, bos in rows:
        attention, variant = text.split(" ")
        cell = _cell(dict(attention=attention, variant=variant))
        row = classification_row(cell, int(L))
        assert row["certified"]
        assert row["margin"] == pytest.approx(float(margin), rel=1e-5)
        assert row["margin_ratio"] == pytest.approx(float(ratio), abs=2e-6)
        assert classification_row(cell.replace(read="bos"), int(L))["margin"] == pytest.approx(float(bos), rel=1e-5)


@pytest.mark.parametrize("norm, affine, M, b, top_1", [
    ("layernorm", "gain_bias", math.sqrt(7), 1, math.sqrt(7 / 8)),
    ("layernorm", "gain", math.sqrt(7), 0, math.sqrt(7 / 8)),
    ("rmsnorm", "gain", math.sqrt(8), 0, 1.0),
    ("rmsnorm", "gain_bias", math.sqrt(8), 1, 1.0)])
def test_the_opposed_embeddings_of_linear_attention_with_a_gain(norm, affine, M, b, top_1):
    """``h_a = (M + b) e_1``, ``h_s = (b - M) e_1``: gaps ``kappa = tau (M + b)^3`` (the bound's
    capacity), first gap ``G = kappa (1 + c^2 - c^3) + 2 <e_1, top>`` at ``theta = 0``; the head keeps
    at least the collinear margin ``1/((L-1)/kappa + 1/G)`` of the points projected on ``e_1`` (by
    hand, ``d = 8``), and the bound, which sees ``z_0``, lies between the margin and the chain's
    ``kappa/(L-1)``, within ``1 + kappa/((L-1) G)`` of the margin."""
    cell = _cell(dict(attention="linear", variant="pre_learned", norm=norm, affine=affine))
    assert last_read.opposed_cell(cell) and not last_read.plane_cell(cell)
    kappa = (M + b) ** 3 / math.sqrt(8)
    c = (b - M) / (b + M)
    G = kappa * (1 + c * c - c**3) + 2 * top_1
    for L in (2, 16, 40):
        m = _margin(classification.design(cell).build(L), L)
        collinear = 1 / ((L - 1) / kappa + 1 / G)
        assert m >= collinear * (1 - 1e-9)
        assert m <= margin_upper(cell, L) <= kappa / (L - 1) * (1 + 1e-12)
        assert margin_upper(cell, L) / m <= 1 + kappa / ((L - 1) * G) + 1e-9
