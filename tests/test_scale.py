"""Large L: the interval first pass of the judge, the bisection's boundary at L = 2^20, the
sweep's grid cap and the benchmark's output.

The first pass (:mod:`verify.interval_pass`) must never be more optimistic than the balls: on
random parameters it may say *correct* only where the balls say correct, *wrong* only where
they say wrong, and its enclosures contain the reference forward pass at 60 digits.
"""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import benchmark, search, sweep
from constructions import one_sided, regression
from constructions.cell import MAX_L, Cell, Params
from helpers import ARCHS, arch_cell, examples, random_params, ref_mp
from verify import counts_to, interval_pass, judge, reduced
from verify.backends import get_backend
from verify.forward import numbers

REGRESSION_ARCHS = [a for a in ARCHS if a[2] == "regression"]
ARCH_IDS = ["/".join(a[:2] + a[3:4] + ((a[4] or "bare"),)) for a in REGRESSION_ARCHS]


def _spread(cell: Cell, rng, L: int, slope: float, eps: float) -> Params | None:
    """Random parameters rescaled so that ``y`` spreads over about ``[0, slope L]`` with
    ``y(0) = 0``: some counts pass, some fail (None where the output does not move)."""
    p = random_params(cell, rng)
    y = reduced(p, range(L + 1))
    if not np.all(np.isfinite(y)) or abs(y[-1] - y[0]) < 1e-9:
        return None
    k = slope * L / (y[-1] - y[0])
    V = dict(p.vectors, w=[float(x) * k for x in p.vectors["w"]])
    y0 = reduced(Params(cell, V, {"w0": 0.0}), [0])[0]
    return Params(cell, V, {"w0": float(-y0)})


def _ball_verdicts(params: Params, L: int):
    """Per count ``(correct, wrong)`` decided in balls only (the judge's own chunk routine)."""
    bk = get_backend("arb256")
    with bk.context():
        nums = numbers(params, bk)
        good, bad, _ = judge._regression_chunk(bk, params, nums, np.arange(L + 1), np.zeros(L + 1, dtype=np.int64), np.zeros(L + 1, dtype=np.int64))
        return good, bad, interval_pass.prepare(params, nums)


@pytest.mark.parametrize("arch", REGRESSION_ARCHS, ids=ARCH_IDS)
@settings(max_examples=examples(6))
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(1, 40), slope=st.floats(0.5, 2.0),
       eps=st.sampled_from([0.0, 0.25]))
def test_interval_pass_is_never_more_optimistic_than_the_balls(arch, seed, L, slope, eps):
    cell = arch_cell(arch, d=5, eps=eps)
    params = _spread(cell, np.random.default_rng(seed), L, slope, eps)
    if params is None:
        return
    good, bad, fast = _ball_verdicts(params, L)
    assert fast is not None  # random embeddings: the residual moves with n
    n = np.arange(L + 1)
    fgood, fbad, _ = fast.judge(n)
    assert not np.any(fgood & fbad)
    assert np.all(good[fgood]) and np.all(bad[fbad])
    # the enclosure holds the reference forward pass at 60 digits, token by token
    err = fast.error(n)
    for m in sorted({0, L // 2, L}):
        with mpmath.workdps(60):
            exact = ref_mp(params, "s" + "a" * m, dps=60).out - m
            assert mpmath.mpf(float(err.lo[m])) <= exact <= mpmath.mpf(float(err.hi[m]))
    # and the judge with the pass gives the balls' verdict
    res = counts_to(params, L, "arb256")
    if bad.any():
        assert res.verdict == "fails" and res.first_failure == int(np.flatnonzero(bad)[0])
    elif good.all():
        assert res.verdict == "counts"


def test_interval_pass_decides_the_constructions_at_large_L():
    """At L = 2^18 the post-norm construction just above its boundary is decided at every count
    by the pass (the float64 forward pass fails it: its Gram form loses the boundary to the
    cancellation of nearly opposite embeddings)."""
    cell = Cell("softmax", "post_learned", "regression")
    L = 1 << 18
    des = regression.design(cell)
    params = des.build(L, des.estimate(L) * (1 + 1e-5))
    assert interval_pass.counts_surely(params, L) is True
    assert counts_to(params, L, "float64").verdict == "fails"


def test_exact_boundary_is_left_to_the_balls():
    """|y - n| = 1/2 exactly: the enclosure straddles it, the count goes to the balls, which
    decide it (strict rule: wrong)."""
    cell = Cell("linear", "none", "regression", d=4)
    p = Params(cell, {"e_s": [2, 0, 0, 0], "e_a": [2, 0, 0, 0], "w": [9 / 32, 0, 0, 0]},
               {"w0": -6 * 9 / 32})  # y = 9n/8, error exactly 1/2 at n = 4
    bk = get_backend("arb256")
    with bk.context():
        fast = interval_pass.prepare(p, numbers(p, bk))
    good, bad, _ = fast.judge(np.arange(5))
    assert list(good) == [True] * 4 + [False] and not bad[4]
    res = counts_to(p, 4, "arb256")
    assert res.verdict == "fails" and res.first_failure == 4 and res.undecided == ()


@pytest.mark.parametrize("attention,variant", [("softmax", "post_learned"), ("linear", "none")])
def test_bisection_finds_the_boundary_at_two_to_the_twenty(attention, variant):
    """The certified B_min at L = 2^20 counts (rigorously), and the construction at
    ``B_min (1 - 10 rtol)`` does not: the judge on balls (with its interval first pass) finds a
    failing count, which is certain."""
    cell = Cell(attention, variant, "regression")
    L, rtol = MAX_L, 1e-6
    row = search.regression_row(cell, L, rtol=rtol, lower=False)
    assert row["certified"] and row["worst_error"] < 0.5
    des = regression.design(cell)
    below = counts_to(des.build(L, row["B_min"] * (1 - 10 * rtol)), L, "arb256")
    assert below.verdict == "fails"


def test_grid_cap_is_the_judge_s_limit():
    assert sweep.MAX_L == MAX_L == judge.MAX_COUNTS == 2**20
    _, _, Ls = sweep.parse(["--variant", "none", "--Lmax", str(MAX_L)])
    assert Ls[-1] == MAX_L and Ls[-2] == MAX_L // 2


def test_grid_cap_refused_beyond(capsys):
    rc = sweep.main(["--variant", "none", "--Lmax", str(MAX_L + 1)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and str(MAX_L) in err[0]


def test_benchmark_reports_cpu_wall_rows_and_the_naive_ratio(capsys):
    rc = benchmark.main(["--Lmax", "8", "--cells", "linear/none/regression", "--large", "64",
                         "--naive-L", "16", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    (cell,) = out["cells"]
    assert (cell["attention"], cell["variant"], cell["readout"], cell["norm"]) == (
        "linear", "none", "regression", "layernorm")
    assert cell["wall"] > 0 and cell["cpu"] > 0
    (row,) = out["large_rows"]
    assert row["L"] == 64 and row["certified"] and row["cpu"] > 0 and row["wall"] > 0
    naive = out["naive"]
    assert naive["L"] == 16 and naive["naive_seconds"] > 0 and naive["judge_seconds"] > 0
    assert naive["ratio"] == pytest.approx(naive["naive_seconds"] / naive["judge_seconds"])


@pytest.mark.parametrize("L", [one_sided.WARM_L, 1024])
@pytest.mark.parametrize("foot", [1e-3, 0.5, 3.0])
def test_the_one_sided_cold_start_finds_the_scan_s_least_shape(monkeypatch, L, foot):
    """From ``L >= WARM_L`` on the least amplitude is found from the
    asymptotic edge ``lam = L^{3/2}/(4 sqrt 2)`` as the root of the best fit's margin; the
    log-spaced scan with a Brent search (the path below ``WARM_L``) must find the same shape and
    no smaller amplitude, and the shape found is the edge: the margin is >= 0 there and < 0 just
    below it."""
    one_sided._least.cache_clear()
    guess = one_sided._warm(L)
    lam, R = one_sided.least_amplitude(L, foot)
    assert one_sided.centre_point(L, foot, lam)[0] >= 0 > one_sided.centre_point(L, foot, lam * (1 - 1e-6))[0]
    assert abs(np.log(lam) - guess) < 0.01  # the asymptotic edge, at most 1% off from WARM_L on
    monkeypatch.setattr(one_sided, "WARM_L", 10 * L)
    one_sided._least.cache_clear()
    lam_scan, R_scan = one_sided.least_amplitude(L, foot)
    one_sided._least.cache_clear()
    assert R <= R_scan * (1 + 1e-9) and lam == pytest.approx(lam_scan, rel=1e-5)


def test_the_one_sided_row_at_two_to_the_sixteen_is_at_its_boundary():
    """Linear attention after post-RMSNorm (the one-sided arc, cold-started at this L): the
    certified ``B_min`` counts and the construction at ``B_min (1 - 10 rtol)`` fails on balls."""
    cell = Cell("linear", "post_bare", "regression", norm="rmsnorm")
    L, rtol = 2**16, 1e-6
    row = search.regression_row(cell, L, rtol=rtol, lower=False)
    assert row["certified"] and row["worst_error"] < 0.5
    below = counts_to(regression.design(cell).build(L, row["B_min"] * (1 - 10 * rtol)), L, "arb256")
    assert below.verdict == "fails"


def test_benchmark_times_a_row_of_either_norm_kind():
    """``--cells A/V/R/K`` names the norm kind: the row of the one-sided arc (linear attention,
    post-RMSNorm) is timed in its own sweep process, certified, with its proven gap."""
    args = benchmark.parse(["--cells", "linear/post_bare/regression/rmsnorm", "softmax/none/regression"])
    assert args.cells == [("linear", "post_bare", "regression", "rmsnorm"),
                          ("softmax", "none", "regression", "layernorm")]
    row = benchmark.time_row("linear", "post_bare", "rmsnorm", 16)
    assert row["norm"] == "rmsnorm" and row["certified"] and row["cpu"] > 0
    assert 0 <= row["gap"] <= 1e-4  # B_min / B_lower - 1


@settings(max_examples=examples(40), deadline=None)
@given(L=st.integers(3, 300), foot=st.floats(1e-3, 10.0), loglam=st.floats(-1.0, 4.0))
def test_the_one_sided_margin_from_four_counts_bounds_the_best_fit_s(L, foot, loglam):
    """:func:`constructions.one_sided.margin_above` (the levelled error on the exchange's last
    reference) is never below the margin of the best fit on every count, whatever reference
    the earlier searches left."""
    lam = float(10.0**loglam) * L
    delta, _ = one_sided.centre_point(L, foot, lam)
    assert one_sided.margin_above(L, foot, lam) >= delta
    # on the best fit's own reference (the last one) the bound is the margin itself, to rounding
    if np.isfinite(delta) and 0.5 - delta > 1e-3:
        assert one_sided.margin_above(L, foot, lam) == pytest.approx(delta, rel=1e-6)
