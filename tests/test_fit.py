"""bounds.fit: log-log least squares, its Student-t interval, and the theory exponents."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from bounds.fit import fit, t_quantile, theory_exponent
from constructions.cell import Cell

POW2 = [2**k for k in range(1, 13)]


@settings(max_examples=40, deadline=None)
@given(p=st.floats(-6, 6), c=st.floats(1e-3, 1e3),
       Ls=st.lists(st.sampled_from(POW2 + [3, 5, 7, 11, 100, 1000, 3000]), min_size=3, max_size=12,
                   unique=True))
def test_exact_power_law_recovered(p, c, Ls):
    assume(max(Ls) >= 2 * min(Ls))
    ys = [c * L**p for L in Ls]
    out = fit(Ls, ys, L_from=1)
    assert out["points"] == len(Ls)
    assert abs(out["exponent"] - p) < 1e-12
    lo, hi = out["ci95"]
    assert lo <= hi
    assert lo - 1e-12 <= p <= hi + 1e-12
    assert hi - lo < 1e-10  # no noise: the interval is (numerically) a point


def test_fit_matches_scipy_linregress():
    rng = np.random.default_rng(7)
    Ls = np.array(POW2[:9])
    ys = 2.5 * Ls**0.75 * np.exp(0.05 * rng.normal(size=len(Ls)))
    out = fit(list(Ls), list(ys), L_from=1)
    ref = stats.linregress(np.log(Ls), np.log(ys))
    half = stats.t.ppf(0.975, len(Ls) - 2) * ref.stderr
    assert out["exponent"] == pytest.approx(ref.slope, rel=1e-12)
    assert out["ci95"][0] == pytest.approx(ref.slope - half, rel=1e-9)
    assert out["ci95"][1] == pytest.approx(ref.slope + half, rel=1e-9)


def test_noise_widens_the_interval():
    rng = np.random.default_rng(3)
    Ls = POW2[:10]
    noise = rng.normal(size=len(Ls))
    widths = []
    for sigma in (0.0, 0.01, 0.1):
        ys = [3 * L**1.5 * math.exp(sigma * z) for L, z in zip(Ls, noise)]
        out = fit(Ls, ys, L_from=1)
        lo, hi = out["ci95"]
        assert lo - 1e-12 <= 1.5 <= hi + 1e-12
        widths.append(hi - lo)
    assert widths[0] < widths[1] < widths[2]
    assert widths[2] == pytest.approx(10 * widths[1], rel=1e-6)  # the width scales with the noise


def test_tail_and_missing_values():
    Ls = [2, 4, 8, 16, 32, 64, 128]
    ys = [100.0, None, 0.0, 16**2, 32**2, 64**2, 128**2]  # exact L^2 from 16 on
    out = fit(Ls, ys, L_from=16)
    assert out["points"] == 4 and out["L_from"] == 16
    assert out["exponent"] == pytest.approx(2.0, abs=1e-12)
    # without the tail cut the (wrong) first point changes the slope
    assert fit(Ls, ys, L_from=1)["exponent"] != pytest.approx(2.0, abs=1e-3)
    # None and non-positive values are skipped, not fitted
    assert fit(Ls, ys, L_from=1)["points"] == 5


def test_too_few_points():
    two = fit([4, 8], [16.0, 64.0], L_from=1)
    assert two["exponent"] == pytest.approx(2.0, abs=1e-12)
    assert two["ci95"] is None
    one = fit([4, 8, 16], [None, 0.0, 3.0], L_from=1)
    assert one["exponent"] is None and one["ci95"] is None and one["points"] == 1
    none = fit([4, 8, 16], [1.0, 2.0, 4.0], L_from=64)
    assert none["exponent"] is None and none["ci95"] is None and none["points"] == 0


@pytest.mark.parametrize("df,value", [(1, 12.7062047), (2, 4.3026527), (5, 2.5705818),
                                      (10, 2.2281389), (30, 2.0422725)])
def test_t_quantile_known_values(df, value):
    assert t_quantile(df, 0.975) == pytest.approx(value, abs=1e-6)


@settings(max_examples=15, deadline=None)
@given(df=st.integers(1, 200), p=st.sampled_from([0.9, 0.95, 0.975, 0.995]))
def test_t_quantile_matches_scipy(df, p):
    assert t_quantile(df, p) == pytest.approx(stats.t.ppf(p, df), rel=1e-9)


# the table of the module docstring of bounds/fit.py
THEORY = {
    ("softmax", "none", "regression"): 1.0,
    ("softmax", "pre_bare", "regression"): None,
    ("softmax", "pre_learned", "regression"): 1.0,
    ("softmax", "post_bare", "regression"): 1.5,
    ("softmax", "post_learned", "regression"): 0.75,
    ("linear", "none", "regression"): 0.0,
    ("linear", "pre_bare", "regression"): 0.0,
    ("linear", "pre_learned", "regression"): 0.0,
    ("linear", "post_bare", "regression"): 1.5,
    ("linear", "post_learned", "regression"): 0.75,
    ("softmax", "none", "classification"): -3.0,
    ("softmax", "pre_bare", "classification"): -3.0,
    ("softmax", "pre_learned", "classification"): -3.0,
    ("softmax", "post_bare", "classification"): -2.0,
    ("softmax", "post_learned", "classification"): -2.0,
    ("linear", "none", "classification"): -1.0,
    ("linear", "pre_bare", "classification"): -1.0,
    ("linear", "pre_learned", "classification"): -1.0,
    ("linear", "post_bare", "classification"): -2.0,
    ("linear", "post_learned", "classification"): -2.0,
}


@pytest.mark.parametrize("cell", sorted(THEORY), ids=["/".join(c) for c in sorted(THEORY)])
def test_theory_exponent_table(cell):
    got = theory_exponent(Cell(*cell))
    want = THEORY[cell]
    if want is None:
        assert got is None
    else:
        assert got == pytest.approx(want, abs=0)
    # the width does not change the rate
    assert theory_exponent(Cell(*cell, d=3)) == got


def test_values_on_a_line_grow_like_L_squared_over_sqrt_log_L():
    """LayerNorm with a gain and no bias at d = 2 puts the values on a line: theory exponent 2,
    and the certified rows' local exponent is that of ``L^2/sqrt(log L)``,
    ``2 - 1/(2 log L)``, at the geometric middle (not the 1 of the other segments)."""
    from bounds.search import regression_row

    cell = Cell("softmax", "pre_learned", "regression", d=2, affine="gain")
    assert theory_exponent(cell) == 2.0
    lo, hi = (regression_row(cell, L, lower=False)["B_min"] for L in (512, 2048))
    local = math.log(hi / lo) / math.log(4)
    assert abs(local - (2 - 1 / (2 * math.log(1024)))) < 0.02


def test_theory_matches_measured_segment_margin():
    """The -3 of the segment margin is what the closed form gives (large L)."""
    from constructions import classification

    des = classification.design(Cell("softmax", "none", "classification"))
    Ls = [256, 512, 1024, 2048]
    ms = []
    for L in Ls:
        t = des.best_shape(L)
        ms.append(des.margin(t, L))
    out = fit(Ls, ms, L_from=1)
    assert out["exponent"] == pytest.approx(-3.0, abs=0.02)


@pytest.mark.parametrize("variant,theory", [("post_bare", 1.5), ("post_learned", 0.75)])
def test_local_and_corrected_exponents_converge_where_the_plain_interval_does_not(variant, theory):
    """On the exact B_min(L) of the arc (its closed form, L = 64..4096) the plain fit's 95%
    interval excludes the theory exponent (finite-L bias), while the local exponent and the fit
    with a 1/L correction come within 3e-4 of it."""
    from constructions.closed_forms import closed_form

    cell = Cell("softmax", variant, "regression")
    Ls = [2**k for k in range(6, 13)]
    out = fit(Ls, [closed_form(cell, L)["B"] for L in Ls], L_from=64)
    lo, hi = out["ci95"]
    assert not lo <= theory <= hi
    assert abs(out["local_exponent"] - theory) < 3e-4
    assert abs(out["corrected"]["exponent"] - theory) < 3e-4
    assert abs(out["corrected"]["exponent"] - theory) < abs(out["exponent"] - theory) / 5


def test_the_one_sided_arc_with_a_gain_read_last_says_its_theory_is_the_bound_s():
    """Linear attention read last after post-RMSNorm with a gain (both tasks): the construction
    grows faster than the lower bound's exponent on the sweep's grid, and the fit says so; bare,
    or at the BOS read, no note."""
    from bounds.fit import theory_note

    for task in ("count", "select"):
        for affine in ("gain", "gain_bias"):
            cell = Cell("linear", "post_learned", "regression", norm="rmsnorm", affine=affine,
                        read="last", task=task)
            assert "lower bound" in theory_note(cell)
    assert theory_note(Cell("linear", "post_bare", "regression", norm="rmsnorm", read="last")) is None
    assert theory_note(Cell("linear", "post_learned", "regression", norm="rmsnorm", affine="gain")) is None
