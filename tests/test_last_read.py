"""The last-position read beyond the regression cells of tests/test_tasks.py: classification
heads and their margin bound, softmax without a norm (``L* = 2``).

* every head is certified by the judge at several ``L`` and ``d``, with every vector of norm at
  most 1 and its margin below the proven bound;
* the lemmas of the bound, on random parameter sets of norm at most 1: the outputs after ``s``
  are collinear with the gaps the proof states, and the best head for them (linear programming
  over every head, tests/test_margin.py) never beats the bound;
* the bound closes on the construction as ``L`` grows;
* softmax without a norm: certified at ``L = 2`` at its proven budget, refused beyond with
  ``L* = 2``; the proof's steps checked on exact rationals and random parameter sets;
* bare pre-norm softmax: ``L* = 4`` at every width (exact rationals, an independent LP); the
  rows up to it certified (pre-LayerNorm, ``d >= 3``) above the proven bound, whose lemmas hold
  for random parameter sets;
* linear attention without a norm: rows certified, meeting the proven bound from ``L = 3``;
  the lemmas of the bound on random parameter sets;
* the sweep's rows and JSON keys.
"""

from __future__ import annotations

import json
import re
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounds import sweep as sweep_mod
from bounds.last_margin import last_margin_upper
from bounds.lower import b_lower, last_pair_lower
from bounds.lstar import cell_l_star, last_l_star
from bounds.margin import margin_upper
from bounds.search import classification_row, regression_row
from constructions import Cell, classification, laws, last_read, regression, segment
from tests.helpers import random_params
from tests.test_lstar import lp_slack
from tests.helpers import best_head, outputs_of, random_vectors
from verify import counts_to, reduced
from verify.forward import numbers

#: every classification cell built at the last read (the regression last-read geometries)
HEADS = [dict(attention="linear", variant="pre_bare"),
         dict(attention="linear", variant="pre_bare", norm="rmsnorm"),
         dict(attention="linear", variant="pre_learned", affine="gain"),
         dict(attention="linear", variant="pre_learned"),
         dict(attention="linear", variant="pre_learned", norm="rmsnorm"),
         dict(attention="linear", variant="pre_learned", norm="rmsnorm", affine="gain_bias"),
         dict(attention="softmax", variant="pre_learned"),
         dict(attention="softmax", variant="pre_learned", affine="gain"),
         dict(attention="softmax", variant="pre_learned", norm="rmsnorm")]


def _head_cell(kw, d=8) -> Cell:
    return Cell(readout="classification", read="last", d=d, **kw)


def _ids(kw) -> str:
    return "-".join(str(v) for v in kw.values())


@pytest.mark.parametrize("kw", HEADS, ids=_ids)
def test_the_last_read_head_is_certified_below_the_bound(kw):
    for d, L in ((3, 2), (3, 9), (8, 5), (8, 33), (16, 12)):
        cell = _head_cell(kw, d)
        params = classification.design(cell).build(L)
        res = counts_to(params, L, "arb256")
        assert res.certified and res.min_margin > 0, (d, L, res.verdict)
        assert params.bound() <= 1
        assert res.min_margin <= margin_upper(cell, L)


@pytest.mark.parametrize("kw", [HEADS[3], HEADS[4], HEADS[6], HEADS[8]], ids=_ids)
def test_the_bound_closes_on_the_construction(kw):
    """``margin_upper/margin`` falls towards 1 (the bound ignores only the count 0, whose gap
    is one of L)."""
    cell = _head_cell(kw)
    ratios = [classification_row(cell, L)["margin_ratio"] for L in (8, 64)]
    assert 1 <= ratios[1] < ratios[0] and ratios[1] < 1.02


@pytest.mark.parametrize("kw", [HEADS[3], HEADS[6], HEADS[8]], ids=_ids)
def test_the_head_is_nearly_max_min_for_its_outputs(kw):
    """The head reads along the line of ``z_1..z_L``; a head that also reads ``z_0``'s offset
    from that line (linear programming over every head) gains a little, less as L grows."""
    cell = _head_cell(kw, 4)
    gains = []
    for L in (2, 12):
        params = classification.design(cell).build(L)
        z = outputs_of(cell, {k: v for k, v in params.vectors.items() if k != "u"}, L)
        m = float(counts_to(params, L, "arb256").min_margin)
        assert m <= best_head(z, outer=True) * (1 + 1e-9)
        gains.append(best_head(z, outer=False) / m)
    assert gains[1] < max(gains[0], 1 + 1e-6) and gains[1] < 1.02


def _values(cell: Cell, vectors: dict):
    """``(h_s, h_a)`` of the parameters (float64), through the judge's own conversion."""
    from constructions import Params

    L = 1
    params = Params(cell, {**vectors, "u": np.zeros((L + 1, cell.d))}, {"b": [0.0] * (L + 1)})
    nums = numbers(params, "float64")
    return np.asarray(nums.h["s"], dtype=float), np.asarray(nums.h["a"], dtype=float)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kw=st.sampled_from(HEADS), L=st.integers(2, 7), seed=st.integers(0, 2**31))
def test_random_parameters_obey_the_lemmas_of_the_bound(kw, L, seed):
    """For any parameters of norm <= 1: ``z_1..z_L`` are collinear with the gaps of the proof
    (``tau |h_a|^3 <= cap(1, 1)``; ``X rho/((rho+c)(rho+c+1))`` with ``X <= Xmax(sigma)`` and
    ``sigma <= H^2/4``), and no head for their outputs beats the bound."""
    cell = _head_cell(kw, 4)
    rng = np.random.default_rng(seed)
    vectors = random_vectors(cell, rng)
    z = outputs_of(cell, vectors, L)
    if not np.all(np.isfinite(z)):
        return
    step = np.diff(z[1:], axis=0)
    lengths = np.linalg.norm(step, axis=1)
    direction = step[0] / lengths[0]
    assert np.allclose(step, lengths[:, None] * direction, atol=1e-9 * max(1.0, lengths.max()))
    h_s, h_a = _values(cell, vectors)
    d = cell.d
    if laws.family(cell) == "line":
        kappa = np.linalg.norm(h_a) ** 3 / math.sqrt(d)
        assert np.allclose(lengths, kappa, rtol=1e-9)
        assert kappa <= laws.capacity(cell, 1, 1, laws.FLOAT) * (1 + 1e-12)
    else:
        X = np.linalg.norm(h_a - h_s)
        sigma = float(h_a @ (h_s - h_a))
        rho = math.exp(sigma / math.sqrt(d))
        c = np.arange(1, L)
        assert np.allclose(lengths, X * rho / ((rho + c) * (rho + c + 1)), rtol=1e-9)
        assert sigma <= laws.last_score_gap_max(cell, 1.0, laws.FLOAT) * (1 + 1e-12)
        assert X <= laws.last_value_gap(cell, 1.0, min(sigma, laws.last_score_gap_max(cell, 1.0, laws.FLOAT)),
                                        laws.FLOAT) * (1 + 1e-12)
    # the inscribed polygon: at most the true optimum (bare pre-norm can sit at the bound)
    assert best_head(z, outer=False) <= last_margin_upper(cell, L) * (1 + 1e-9) + 1e-12


def test_the_line_bound_by_hand():
    """``cap(1, 1)/(L - 1)``: bare pre-norm has ``kappa = tau d^{3/2} = d``."""
    cell = _head_cell(HEADS[0])
    assert last_margin_upper(cell, 9) == pytest.approx(8 / 8, rel=1e-12)
    assert last_margin_upper(cell.replace(variant="none"), 9) == pytest.approx(1 / (8 * math.sqrt(8)), rel=1e-12)  # tau/(L-1)


def test_the_classification_sweep_at_the_last_read(capsys):
    argv = ["--variant", "pre_learned", "--attention", "softmax", "--readout", "classification",
            "--read", "last", "--Lmax", "16", "--jobs", "1", "--quiet", "--json"]
    assert sweep_mod.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["read"], result["readout"], result["L_star"]) == ("last", "classification", None)
    assert result["fit"]["theory"] == -3.0
    rho_max = math.exp((1 + math.sqrt(7)) ** 2 / (4 * math.sqrt(8)))  # exp(H^2/(4 sqrt d))
    assert f"rho_max = {rho_max:.4g}" in result["fit"]["theory_note"]
    for row in result["rows"]:
        assert row["certified"] and row["B_min"] == 0.0 and row["B_min_is_infimum"]
        assert 0 < row["margin"] <= row["margin_upper"]
        assert row["margin_ratio"] == pytest.approx(row["margin_upper"] / row["margin"])
        assert row["storage"] == (row["L"] + 1) * 9 + 4 * 8  # u, b; e_s, e_a, g, beta
        assert row["margin_bound"] <= 1


def _readme_section() -> str:
    from tests.test_readme import README

    return README.split("## Selective counting and the last-position read", 1)[1].split("\n## ", 1)[0]


def test_readme_margin_table_is_what_the_sweep_certifies():
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in _readme_section().splitlines() if line.startswith("  | linear") or line.startswith("  | softmax")]
    rows = [r for r in rows if len(r) == 5 and r[1].isdigit()]  # the margin table (cell, L, margin, ratio, BOS)
    assert len(rows) == 8
    for text, L, margin, ratio, bos in rows:
        attention, _, rest = text.partition(", ")
        parts = rest.split(" ")
        kw = dict(attention=attention, variant=parts[0], norm="rmsnorm" if "rmsnorm" in parts else "layernorm",
                  affine=next((p for p in parts if p in ("gain", "gain_bias")), None))
        cell = _head_cell(kw)
        row = classification_row(cell, int(L))
        assert row["certified"]
        assert row["margin"] == pytest.approx(float(margin), rel=1e-5)
        assert row["margin_ratio"] == pytest.approx(float(ratio), abs=2e-6)
        assert classification_row(cell.replace(read="bos"), int(L))["margin"] == pytest.approx(float(bos), rel=1e-5)


# ---------------------------------------------------------------------- softmax without a norm


@pytest.mark.parametrize("d", [2, 3, 8, 64])
def test_softmax_without_a_norm_counts_to_two_at_its_proven_budget(d):
    cell = Cell("softmax", "none", read="last", d=d)
    assert cell_l_star(cell) == 2 and isinstance(regression.design(cell), last_read.PairDesign)
    row = regression_row(cell, 2, rtol=1e-7)
    assert row["certified"] and row["B_lower"] <= row["B_min"] <= row["B_lower"] * (1 + 2e-7)
    assert row["B_lower"] == b_lower(cell, 2, None) == last_pair_lower(cell, 2)
    # the construction's boundary is the bound's root: just below it nothing counts
    below = regression.design(cell).build(2, row["B_lower"] * (1 - 1e-6))
    assert not counts_to(below, 2, "arb256").counts
    # as d grows rho -> 1 and B* -> sqrt(D_lo(1)/2) = sqrt(3/10), from below
    assert row["B_lower"] < math.sqrt(0.3)
    for L in (3, 4, 1024):
        far = regression_row(cell, L)
        assert far["B_min"] is None and far["B_lower"] is None and "L* = 2" in far["note"]


@given(rho=st.fractions(min_value=0, max_value=10**6).filter(lambda r: r > 0))
def test_the_proof_that_nothing_counts_to_three(rho):
    """The pairs (1, 0) and (3, 1) need 2 rho/((rho+2)(rho+3)) > 1/2, never true; for L >= 3 the
    pair interval is empty (exact rationals)."""
    assert 2 * rho / ((rho + 2) * (rho + 3)) < Fraction(1, 2)
    for L in (3, 4, 7):
        lo, hi = last_read.pair_interval(rho, L)
        assert lo >= hi


@settings(max_examples=60, deadline=None)
@given(rho=st.floats(0.05, 20), D=st.floats(0.01, 4), L=st.sampled_from([1, 2]))
def test_the_pair_interval_is_where_a_constant_counts(rho, D, L):
    """``lo < D < hi`` iff the intervals of the constants ``K`` for every count meet (computed
    directly, not by pairs); away from the ends."""
    lo, hi = last_read.pair_interval(rho, L)
    ends = [n - D * last_read._psi(n, rho) for n in range(L + 1)]
    direct = max(ends) - min(ends) < 1
    if min(abs(D - lo), abs(D - hi)) > 1e-9:
        assert direct == (lo < D < hi)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), scale=st.floats(0.1, 3))
def test_random_parameters_obey_the_lemmas_of_the_pair_bound(seed, scale):
    """Any parameters: ``y(0) = K - D``, ``y(n) = K + D n/(rho+n)`` with ``D = <w, e_a - e_s>``,
    ``rho = exp(tau <e_a, e_s - e_a>)``, and ``D``, ``-sigma`` at most ``2 B^2``."""
    cell = Cell("softmax", "none", read="last", d=4)
    params = random_params(cell, np.random.default_rng(seed), scale=scale)
    v = {k: np.asarray(x, dtype=float) for k, x in params.vectors.items()}
    y = np.asarray(reduced(params, list(range(6))), dtype=float)
    D = v["w"] @ (v["e_a"] - v["e_s"])
    sigma = v["e_a"] @ (v["e_s"] - v["e_a"])
    rho = math.exp(sigma / 2)
    K = y[0] + D
    n = np.arange(1, 6)
    assert np.allclose(y[1:], K + D * n / (rho + n), rtol=1e-9, atol=1e-9 * (1 + abs(K) + abs(D)))
    B = float(params.bound())
    assert D <= laws.last_pair_reach(cell, B) * (1 + 1e-12) and -sigma <= laws.last_pair_reach(cell, B) * (1 + 1e-12)


def test_the_sweep_reports_l_star_two(capsys):
    argv = ["--variant", "none", "--read", "last", "--Lmax", "8", "--jobs", "1", "--quiet", "--json"]
    assert sweep_mod.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["L_star"] == 2 and result["fit"]["theory"] is None
    rows = {r["L"]: r for r in result["rows"]}
    assert rows[2]["certified"] and rows[2]["B_lower"] <= rows[2]["B_min"]
    assert all(rows[L]["B_min"] is None and not rows[L]["certified"] for L in (4, 8))
    assert sweep_mod.main(argv[:-1]) == 0
    assert "L* = 2" in capsys.readouterr().out


def test_readme_pair_numbers():
    text = " ".join(_readme_section().split())
    m = re.search(r"certified to `rtol`: ([0-9.]+) at `d = 8` \(([0-9.]+) at `d = 2`, rising to "
                  r"`sqrt\(3/10\) = ([0-9.]+)` as `d` grows\), against ([0-9.]+) at the BOS read", text)
    assert m, "the README states B*(d) and the BOS value"
    at8, at2, limit, bos = map(float, m.groups())
    assert last_pair_lower(Cell("softmax", "none", read="last", d=8), 2) == pytest.approx(at8, rel=2e-6)
    assert last_pair_lower(Cell("softmax", "none", read="last", d=2), 2) == pytest.approx(at2, rel=2e-6)
    assert limit == pytest.approx(math.sqrt(0.3), rel=1e-6)
    assert last_pair_lower(Cell("softmax", "none", read="last", d=1 << 16), 2) == pytest.approx(limit, rel=1e-3)
    assert regression.design(Cell("softmax", "none")).estimate(2) == pytest.approx(bos, rel=1e-5)


# ---------------------------------------------------------------------- bare pre-norm: L* = 4


def test_bare_pre_norm_last_read_l_star_is_four():
    """The proof's steps: at ``rho' = 2`` the shifted segment of ``L' = 3`` has amplitudes and
    that of ``L' = 4`` has ``D_lo = D_hi = 6`` (exact rationals); an independent LP on the shifted
    problem just below ``rho' = 2`` (reachable) counts ``L' = 3`` and not ``L' = 4``; so ``L* = 4``
    at every width, and the cell's ``L*`` is it."""
    two = Fraction(2)
    lo3 = max(segment.lo_term(k, two, 3) for k in range(1, 4))
    hi3 = min(segment.hi_term(k, two, 3) for k in range(1, 4))
    lo4 = max(segment.lo_term(k, two, 4) for k in range(1, 5))
    hi4 = min(segment.hi_term(k, two, 4) for k in range(1, 5))
    assert lo3 < hi3 and lo4 == hi4 == 6
    assert lp_slack(2 - 1e-6, 3) > 1e-4 and lp_slack(2 - 1e-6, 4) < 0
    for d in (2, 3, 8, 512):
        for kind in ("layernorm", "rmsnorm"):
            cell = Cell("softmax", "pre_bare", read="last", d=d, norm=kind)
            assert last_l_star(d, cell.kind.centred) == 4 == cell_l_star(cell)
    # LayerNorm at d = 2 has only h_a = +-h_s: rho' = 1 + exp(-2 sqrt 2) decides, and it counts L' = 3
    assert lp_slack(1 + math.exp(-2 * math.sqrt(2)), 3) > 1e-4
    assert lp_slack(1 + math.exp(-2 * math.sqrt(2)), 4) < -1e-4


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), kind=st.sampled_from(["layernorm", "rmsnorm"]))
def test_bare_pre_norm_scores_from_a_favour_a(seed, kind):
    """``rho = exp(tau <h_a, h_s - h_a>) <= 1`` for any parameters (``|h| = sqrt(d)``), so
    ``rho' = rho + 1 <= 2``."""
    cell = Cell("softmax", "pre_bare", read="last", d=5, norm=kind)
    params = random_params(cell, np.random.default_rng(seed))
    nums = numbers(params, "float64")
    h_s, h_a = (np.asarray(nums.h[t], dtype=float) for t in "sa")
    assert h_a @ (h_s - h_a) <= 1e-12



@pytest.mark.parametrize("d", [3, 8])
def test_bare_pre_norm_rows_up_to_l_star(d):
    cell = Cell("softmax", "pre_bare", read="last", d=d)
    assert isinstance(regression.design(cell), last_read.BareDesign)
    for L in (2, 3, 4):
        row = regression_row(cell, L)
        assert row["certified"] and 0 < row["B_lower"] <= row["B_min"], (L, row)
        if L > 2:  # where the amplitude, not the offset, binds the bound nearly meets the construction
            assert row["B_lower"] > 0.98 * row["B_min"]
        # no parameter set below B_lower counts, so neither does the construction there
        below = regression.design(cell).build(L, row["B_lower"] * (1 - 1e-6))
        assert below.bound() <= row["B_lower"] and not counts_to(below, L, "arb256").counts
    far = regression_row(cell, 5)
    assert far["B_min"] is None and "L* = 4" in far["note"]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), scale=st.floats(0.2, 3))
def test_random_parameters_obey_the_lemmas_of_the_bare_bound(seed, scale):
    """For any bare pre-LayerNorm parameters read last: ``y(n) = K + D n/(rho+n)`` (``n >= 1``)
    with ``D = <w, h_a - h_s> <= |w| X``, ``X^2 = -2 sigma``, and ``|y(0) - K| <= 2 B^2``."""
    cell = Cell("softmax", "pre_bare", read="last", d=4)
    params = random_params(cell, np.random.default_rng(seed), scale=scale)
    nums = numbers(params, "float64")
    h_s, h_a = (np.asarray(nums.h[t], dtype=float) for t in "sa")
    v = {k: np.asarray(x, dtype=float) for k, x in params.vectors.items()}
    y = np.asarray(reduced(params, list(range(5))), dtype=float)
    sigma = h_a @ (h_s - h_a)
    X = np.linalg.norm(h_a - h_s)
    assert X**2 == pytest.approx(-2 * sigma, rel=1e-9, abs=1e-12)
    D = v["w"] @ (h_a - h_s)
    rho = math.exp(sigma / 2)
    K = y[1] - D / (rho + 1)
    n = np.arange(1, 5)
    assert np.allclose(y[1:], K + D * n / (rho + n), rtol=1e-9, atol=1e-9 * (1 + abs(K) + abs(D)))
    B = float(params.bound())
    assert D <= np.linalg.norm(v["w"]) * X * (1 + 1e-12)
    assert abs(y[0] - K) <= 2 * B**2 * (1 + 1e-12)


def test_readme_bare_table_is_what_the_sweep_certifies():
    section = _readme_section()
    part = section.split("| `L` | `B_min`, last read | `B_lower` | `B_min`, BOS read |", 1)[1]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in part.splitlines()[2:5]]
    cell = Cell("softmax", "pre_bare", read="last")
    for L, bmin, blow, bos in rows:
        row = regression_row(cell, int(L))
        assert row["B_min"] == pytest.approx(float(bmin), rel=1e-5)
        assert row["B_lower"] == pytest.approx(float(blow), rel=1e-5)
        assert regression.design(cell.replace(read="bos")).estimate(int(L)) == pytest.approx(float(bos), rel=1e-5)
    text = " ".join(section.split())
    gaps = {int(L): 1 - float(blow) / float(bmin) for L, bmin, blow, _ in rows}
    assert "within 1.1% of `B_min` where the amplitude binds (`L = 3, 4`), 6% at `L = 2`" in text
    assert gaps[3] < 0.011 and gaps[4] < 0.011 and round(100 * gaps[2]) == 6



# ---------------------------------------------------------------------- linear attention, no norm
@pytest.mark.parametrize("d", [2, 8])
def test_linear_without_a_norm_rows_meet_the_bound(d):
    cell = Cell("linear", "none", read="last", d=d)
    assert isinstance(regression.design(cell), last_read.LineDesign)
    for L in (1, 2, 3, 9, 64):
        row = regression_row(cell, L)
        assert row["certified"] and row["B_lower"] <= row["B_min"], (L, row)
        if L >= 3:  # the offset is within reach: the slope bound is met
            assert row["B_min"] <= row["B_lower"] * (1 + 2e-6)
            below = regression.design(cell).build(L, row["B_lower"] * (1 - 1e-5))
            assert below.bound() <= row["B_lower"] and not counts_to(below, L, "arb256").counts
    # the last read is cheaper than the BOS read, whose B_min is cap^-1(1 - 1/L)
    assert regression_row(cell, 9)["B_min"] < laws.budget(cell, 1 - 1 / 9, laws.FLOAT)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), scale=st.floats(0.2, 3))
def test_random_parameters_obey_the_lemmas_of_the_free_line_bound(seed, scale):
    """Any parameters: ``y(n) = K + k n`` (``n >= 1``) with ``k = tau |e_a|^2 <w, e_a> <= tau B^4``
    and ``|y(0) - K| <= 2 B^2 (1 + tau B^2)``."""
    cell = Cell("linear", "none", read="last", d=4)
    params = random_params(cell, np.random.default_rng(seed), scale=scale)
    v = {k: np.asarray(x, dtype=float) for k, x in params.vectors.items()}
    y = np.asarray(reduced(params, list(range(5))), dtype=float)
    tau = 1 / 2
    k = tau * (v["e_a"] @ v["e_a"]) * (v["w"] @ v["e_a"])
    K = y[1] - k
    assert np.allclose(y[1:], K + k * np.arange(1, 5), rtol=1e-9, atol=1e-9 * (1 + abs(K) + abs(k)))
    B = float(params.bound())
    assert k <= tau * B**4 * (1 + 1e-12)
    assert abs(y[0] - K) <= 2 * B**2 * (1 + tau * B**2) * (1 + 1e-12)


def test_readme_free_line_numbers():
    text = " ".join(_readme_section().split())
    m = re.search(r"At `d = 8`: ([0-9.]+) at `L = 2` \(`B_lower` ([0-9.]+); BOS ([0-9.]+)\), ([0-9.]+) "
                  r"at `L = 8` \(the bound; BOS ([0-9.]+)\), ([0-9.]+) at `L = 1024`", text)
    assert m
    b2, low2, bos2, b8, bos8, b1024 = map(float, m.groups())
    cell = Cell("linear", "none", read="last")
    row2 = regression_row(cell, 2)
    assert row2["B_min"] == pytest.approx(b2, rel=1e-5) and row2["B_lower"] == pytest.approx(low2, rel=1e-5)
    assert b_lower(cell, 8, None) == pytest.approx(b8, rel=1e-5)
    assert b_lower(cell, 1024, None) == pytest.approx(b1024, rel=1e-5)
    for L, bos in ((2, bos2), (8, bos8)):
        assert laws.budget(cell, 1 - 1 / L, laws.FLOAT) == pytest.approx(bos, rel=1e-5)


@pytest.mark.parametrize("L", [3, 4])
def test_the_bare_screen_is_quiet_at_large_d(L):
    """At d = 65536 the float screen of the bare last read meets shapes whose amplitude
    overflows (rho -> 1, X -> 0): they are marked bad, the screen's best shape stays finite and
    no floating-point warning reaches stderr."""
    design = regression.design(Cell("softmax", "pre_bare", "regression", d=65536, read="last"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for B in (0.01, 1.0, 10.0):
            rho, D, _ = design._best(L, B)
            assert 0 < rho < 1 and math.isfinite(D)
