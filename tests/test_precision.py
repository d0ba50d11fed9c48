"""The precision wall: the rounded pass (verify.rounded), the formats (verify.formats), the walls
(verify.walls) and the command (python -m verify.precision).

The rounded pass is checked against an independent scalar simulation written from the order
stated in verify/rounded.py's docstring: Python loops over float64 scalars with an explicit
round-to-nearest-even after every operation (:func:`ref_round`, exact rational arithmetic with
subnormals and overflow, not ml_dtypes).
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.cell import Cell, Params
from verify import walls as W
from verify.formats import BY_NAME, FORMATS, Arith
from verify.forward import explicit, reduced
from verify.judge import counts_to
from verify.rounded import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ----------------------------------------------------------------------------- the reference
def ref_round(x, fmt):
    """``x`` (a float64 value) rounded to nearest, ties to even, to ``fmt``: exact rationals."""
    x = float(x)
    if x == 0 or math.isnan(x):
        return x
    info = fmt.info
    has_inf = fmt.name != "float8_e4m3fn"
    if math.isinf(x):
        return x if has_inf else math.nan
    p = fmt.bits
    k = math.frexp(float(info.smallest_normal))[1]  # smallest normal = 2^(k-1)
    e = math.frexp(abs(x))[1]
    unit = max(e, k) - p  # exponent of the ulp (subnormals: that of the smallest normal)
    q = Fraction(abs(x)) / Fraction(2) ** unit
    v = Fraction(round(q)) * Fraction(2) ** unit  # Fraction rounds half to even
    if v > Fraction(float(info.max)):
        return math.copysign(math.inf, x) if has_inf else math.nan
    return math.copysign(float(v), x)


def ref_y(cell, vectors, scalars, n, fmt, work):
    """The read-out for ``(s, a^n)`` by the order of verify/rounded.py, one scalar at a time."""
    rs = lambda v: ref_round(v, fmt)  # noqa: E731
    rw = lambda v: ref_round(v, work)  # noqa: E731
    f = np.float64
    P = {k: [rs(f(x)) for x in v] for k, v in vectors.items()}
    w0 = rs(f(scalars["w0"]))
    d = cell.d
    D, tau, eps = rw(f(d)), rw(f(1 / math.sqrt(d))), rw(f(cell.eps))

    def seq(terms):
        acc = terms[0]
        for t in terms[1:]:
            acc = rw(f(acc) + f(t))
        return acc

    def norm(v):
        x = [rw(f(t)) for t in v]
        if cell.kind.centred:
            mean = rw(f(seq(x)) / f(D))
            c = [rw(f(t) - f(mean)) for t in x]
        else:
            c = x
        stat = rw(f(seq([rw(f(t) * f(t)) for t in c])) / f(D))
        den = rw(np.sqrt(f(rw(f(stat) + f(eps)))))
        out = [rw(f(t) / f(den)) for t in c]
        if cell.affine.gain:
            out = [rw(f(o) * f(rw(g))) for o, g in zip(out, P["g"])]
        if cell.affine.bias:
            out = [rw(f(o) + f(rw(b))) for o, b in zip(out, P["beta"])]
        return [rs(o) for o in out]

    def dot(a, b):
        return seq([rw(f(rw(x)) * f(rw(y))) for x, y in zip(a, b)])

    h = {t: norm(P[f"e_{t}"]) if cell.pre else P[f"e_{t}"] for t in "sa"}
    sigma = {t: rw(f(tau) * f(dot(h["s"], h[t]))) for t in "sa"}
    seqn = "s" + "a" * n
    if cell.attention == "softmax":
        m = sigma["s"] if n == 0 else max(sigma["s"], sigma["a"])
        p = [rw(np.exp(np.array([rw(f(sigma[t]) - f(m))]))[0]) for t in seqn]
        Z = seq(p)
        weights = [rs(x) for x in p]
    else:
        weights = [rs(sigma[t]) for t in seqn]
    A = []
    for k in range(d):
        Nk = seq([rw(f(rw(wj)) * f(rw(h[t][k]))) for wj, t in zip(weights, seqn)])
        A.append(rs(rw(f(Nk) / f(Z))) if cell.attention == "softmax" else rs(Nk))
    r = [rs(rw(f(rw(e)) + f(rw(a)))) for e, a in zip(P["e_s"], A)]
    z = norm(r) if cell.post else r
    return rs(rw(f(dot(z, P["w"])) + f(rw(w0))))


CELLS = [Cell("softmax", "none", "regression", d=3), Cell("softmax", "pre_learned", "regression", d=4),
         Cell("softmax", "post_learned", "regression", d=3), Cell("linear", "pre_bare", "regression", d=3),
         Cell("softmax", "post_bare", "regression", d=4, norm="rmsnorm"),
         Cell("softmax", "pre_learned", "regression", d=3, norm="rmsnorm", affine="gain", eps=0.25)]
ENTRY = st.sampled_from([0.0, 0.5, -1.0, 1.25, 3.0, -0.1, 1e-3, 7.5, -20.0, 0.3333, 100.0, 2.0 ** -12])


@st.composite
def cases(draw):
    cell = draw(st.sampled_from(CELLS))
    vec = lambda: [draw(ENTRY) for _ in range(cell.d)]  # noqa: E731
    vectors = {name: vec() for name in cell.vector_names()}
    return cell, vectors, {"w0": draw(ENTRY)}, draw(st.sampled_from(FORMATS)), draw(st.booleans())


@settings(max_examples=60)
@given(cases())
def test_the_rounded_pass_rounds_every_operation(case):
    cell, vectors, scalars, fmt, mixed = case
    ar = Arith.of(fmt, "float32" if mixed else None)
    params = Params(cell, vectors, scalars)
    got = run(params, 5, ar).y.astype(np.float64)
    with np.errstate(all="ignore"):
        want = np.array([ref_y(cell, vectors, scalars, n, fmt, ar.work) for n in range(6)])
    assert np.array_equal(got, want, equal_nan=True)


@settings(max_examples=60)
@given(st.floats(allow_nan=False, allow_infinity=False, width=64), st.sampled_from(FORMATS))
def test_conversions_round_to_nearest_even(x, fmt):
    with np.errstate(over="ignore"):
        got = fmt.round(np.float64(x)).astype(np.float64)
    assert np.array_equal(got, ref_round(x, fmt), equal_nan=True)


@settings(max_examples=30)
@given(st.lists(st.floats(-300, 300, allow_nan=False), min_size=2, max_size=40), st.sampled_from(FORMATS))
def test_running_sums_round_every_partial_sum(values, fmt):
    ar = Arith.of(fmt)
    terms = fmt.round(np.array(values))
    got = ar.running(np.stack([terms, terms[::-1]], axis=1), axis=0).astype(np.float64)
    for col, seq in enumerate((terms, terms[::-1])):
        acc = float(seq[0])
        want = [acc]
        for t in seq[1:]:
            acc = ref_round(np.float64(acc) + np.float64(float(t)), fmt)
            want.append(acc)
        assert np.array_equal(got[:, col], want, equal_nan=True)
        assert np.array_equal(ar.total(seq[None, :]).astype(np.float64), [want[-1]], equal_nan=True)


def test_a_running_sum_of_ones_stagnates_at_the_integer_ceiling():
    for fmt in FORMATS[:4]:
        total = Arith.of(fmt).running(np.ones(5000, dtype=fmt.dtype))
        assert float(total[-1]) == fmt.integer_ceiling == 2 ** fmt.bits


def test_float64_agrees_with_the_toolkit_s_forward_pass():
    """Same real function, different summation order (explicit normalises the weights first and
    uses numpy's reductions): both within 64 (n + d) u of the exact value (mp50) and of each
    other, in units of the read-out's scale ``1 + |w0| + sum_k |w_k| max |z|`` (a forward-error
    bound for sums of at most n + d terms; the random parameters keep the norms' statistics of
    order 1, so no division amplifies it)."""
    rng = np.random.default_rng(7)
    ar = Arith.of("float64")
    for cell in CELLS:
        for _ in range(4):
            vectors = {k: rng.uniform(-2, 2, cell.d).tolist() for k in cell.vector_names()}
            params = Params(cell, vectors, {"w0": float(rng.uniform(-2, 2))})
            ps = run(params, 12, ar)
            exact = np.array([float(v) for v in reduced(params, list(range(13)), backend="mp50")])
            scale = 1 + abs(float(ps.params["w0"])) + np.abs(ps.params["w"]).sum() * np.abs(ps.z).max()
            tol = 64 * (12 + cell.d) * 2.0 ** -53 * scale
            for n in range(13):
                y_explicit = float(explicit(params, "s" + "a" * n))
                assert abs(float(ps.y[n]) - y_explicit) <= tol
                assert abs(float(ps.y[n]) - exact[n]) <= tol


# ----------------------------------------------------------------------------- hand-made reasons
def _linear_integer_readout():
    """Linear attention, d = 4 (tau = 1/2): sigma_s = 1, sigma_a = 1/2, the second coordinate
    of A_n is -1 + n 2^-7 and of r_n is (n - 256)/128, all exact in bfloat16 for n <= 384;
    w = 128 e_2, w0 = 256 give y = n exactly until the read-out itself must hold n."""
    cell = Cell("linear", "none", "regression", d=4)
    return Params(cell, {"e_s": [1, -1, 0, 0], "e_a": [1 + 2 ** -6, 2 ** -6, 0, 0], "w": [0, 128, 0, 0]},
                  {"w0": 256})


def test_bfloat16_read_out_cannot_represent_257():
    params = _linear_integer_readout()
    for ar in (Arith.of("bfloat16"), Arith.of("bfloat16", "float32")):
        ps = run(params, 300, ar)
        assert ps.counts_up_to() == 256
        assert W.diagnose(ps, 257, params)[0] == "not_representable"
    assert run(params, 300, Arith.of("float16")).counts_up_to() == 300
    bf = BY_NAME["bfloat16"]
    assert bf.representable_within_half([255, 256, 258]).all() and not bf.representable_within_half(257)


def test_softmax_denominator_stagnates_at_256_in_bfloat16():
    """Zero scores: every p_j = 1, so Z_n = n + 1 until 256 + 1 rounds to 256."""
    cell = Cell("softmax", "none", "regression", d=4)
    params = Params(cell, {"e_s": [0, 0, 0, 0], "e_a": [1, 0, 0, 0], "w": [1, 0, 0, 0]}, {"w0": 0})
    ps = run(params, 300, Arith.of("bfloat16"))
    Z = ps.Z.astype(np.float64)
    assert list(Z[:256]) == list(range(1, 257)) and (Z[256:] == 256).all()
    assert W.diagnose(ps, 256, params)[0] == "sum_stagnates"
    assert (run(params, 300, Arith.of("bfloat16", "float32")).Z.astype(np.float64) == np.arange(1, 302)).all()


def test_exp_underflow_is_named():
    """Score gap -2 tau c^2 = -200: exp(-200) is 0 in bfloat16, positive in float64."""
    c = math.sqrt(200.0)
    cell = Cell("softmax", "none", "regression", d=4)
    params = Params(cell, {"e_s": [c, 0, 0, 0], "e_a": [-c, 0, 0, 0], "w": [1 / (2 * c), 0, 0, 0]}, {"w0": -1})
    ps = run(params, 4, Arith.of("bfloat16"))
    assert float(ps.p[1]) == 0 and ps.counts_up_to() == 0
    assert W.diagnose(ps, 1, params)[0] == "exp_underflow"
    assert float(run(params, 4, Arith.of("float64")).p[1]) > 0


def test_variance_that_rounds_to_zero_is_named():
    """r = 2 e_s = (2^-5, -2^-5, 0, 0): its squares 2^-10 are half the smallest subnormal of
    float8_e4m3fn (2^-9) and round to 0 (ties to even), so the statistic is 0."""
    cell = Cell("softmax", "post_bare", "regression", d=4)
    e = [2 ** -6, -(2 ** -6), 0, 0]
    params = Params(cell, {"e_s": e, "e_a": e, "w": [1, 0, 0, 0]}, {"w0": 0})
    ps = run(params, 3, Arith.of("float8_e4m3fn"))
    assert float(ps.stat[0]) == 0
    assert W.diagnose(ps, 0, params)[0] == "variance_zero"
    assert float(run(params, 3, Arith.of("float16")).stat[0]) > 0


def test_overflowing_parameter_is_named():
    cell = Cell("softmax", "none", "regression", d=4)
    params = Params(cell, {"e_s": [1, 0, 0, 0], "e_a": [0, 1, 0, 0], "w": [1000, 0, 0, 0]}, {"w0": 0})
    ps = run(params, 2, Arith.of("float8_e4m3fn"))
    assert np.isnan(ps.params["w"].astype(np.float64)[0])
    assert W.diagnose(ps, 0, params)[0] == "overflow"
    assert W.diagnose(run(params, 2, Arith.of("float8_e5m2")), 0, params)[0] != "overflow"


# ----------------------------------------------------------------------------- the walls
def test_constants_are_the_sweep_s():
    from bounds import search
    assert W.RTOL == inspect.signature(search.regression_row).parameters["rtol"].default
    # the L = 1 witness: the sweep's row certifies the parameter set the walls build (one-sided
    # arc too): the same budget gives the same witness, whose bound the row reports
    from verify.certify import rigorous_bound
    for cell in (Cell("softmax", "post_bare", "regression", d=8),
                 Cell("linear", "post_bare", "regression", d=8, norm="rmsnorm")):
        row = search.regression_row(cell, 1)
        budgets = W.Budgets(cell)
        built = budgets.build(1, budgets.witness_budget)
        assert row["certified"] and row["witness_bound"] == rigorous_bound(built)


# the README table's rows: label -> (cell, accumulate); every number is checked against a run
README_LMAX = 256
README_ROWS = {
    **{v: (Cell("softmax", v, "regression", d=8), None)
       for v in ("none", "pre_bare", "pre_learned", "post_bare", "post_learned")},
    "none, accumulate float32": (Cell("softmax", "none", "regression", d=8), "float32"),
    "post_learned, accumulate float32": (Cell("softmax", "post_learned", "regression", d=8), "float32"),
    "none, classification": (Cell("softmax", "none", "classification", d=8), None),
}


@pytest.fixture(scope="module")
def readme_runs():
    from verify.precision import report
    return {label: report(cell, README_LMAX, acc) for label, (cell, acc) in README_ROWS.items()}


def _readme_section():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        return fh.read().split("## Number formats: the precision wall", 1)[1].split("\n## ", 1)[0]


def test_readme_walls_table_is_the_command_s(readme_runs):
    section = _readme_section()
    assert f"--Lmax {README_LMAX}" in section
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| cell", "| `L`", "| margin", "| bits"))]
    assert [r[0] for r in rows] == list(README_ROWS)
    for label, *entries in rows:
        got = readme_runs[label]["formats"]
        assert len(entries) == len(FORMATS)
        for entry, fmt in zip(entries, FORMATS):
            f = got[fmt.name]
            if README_ROWS[label][0].readout == "classification":
                assert entry == f"`{f['L_wall_best']}` {f['reason']}"
                assert f["L_wall_construction"] == f["L_wall_best"]
            else:
                assert entry == f"`{f['L_wall_construction']} / {f['L_wall_best']}` {f['reason']}"
    table = {line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")[1:]]
             for line in section.splitlines() if line.startswith(("| `L`", "| margin", "| bits"))}
    runs = readme_runs["none, classification"]["rows"]
    assert [int(x) for x in table["`L`"]] == [r["L"] for r in runs]
    assert [float(x) for x in table["margin"]] == pytest.approx([r["margin"] for r in runs], rel=1e-3)
    assert [int(x) for x in table["bits needed"]] == [r["bits_needed"] for r in runs]


def test_readme_usage_lists_every_option():
    import re

    from verify.precision import _parser
    block = _readme_section().split("```bash", 1)[1].split("```", 1)[0]
    documented = set(re.findall(r"--[A-Za-z][A-Za-z-]*", block))
    assert documented == {o for a in _parser()._actions for o in a.option_strings if o.startswith("--")} - {"--help"}


def test_walls_obey_the_integer_ceiling_and_are_attained(readme_runs):
    for label, (cell, acc) in README_ROWS.items():
        if cell.readout != "regression":
            continue
        budgets = W.Budgets(cell)
        for name, f in readme_runs[label]["formats"].items():
            fmt, ar = BY_NAME[name], Arith.of(name, acc)
            assert 0 <= f["L_wall_construction"] <= f["L_wall_best"] <= min(README_LMAX, fmt.integer_ceiling)
            if f["L_wall_best"] == fmt.integer_ceiling < README_LMAX:
                assert f["reason"] == "not_representable"
            assert (f["reason"] == "none") == (f["L_wall_best"] == README_LMAX)
            member = budgets.design.build(f["best_member"]["L_target"], f["best_member"]["B"])
            assert run(member, f["L_wall_best"], ar).counts_up_to() >= f["L_wall_best"]
            if f["construction_failure"]:
                L = f["construction_failure"]["L"]
                assert L == f["L_wall_construction"] + 1
                params = budgets.construction(L, budgets.construction_budget(L))
                assert run(params, L, ar).counts_up_to() < L


def test_the_construction_at_b_min_counts_where_the_balls_say_so(readme_runs):
    """The construction the wall scans at L is certified in ball arithmetic (the sweep's check),
    and the float64 pass counts it there (its margin ~ RTOL is far above float64's error at
    these L)."""
    cell = Cell("softmax", "post_learned", "regression", d=8)
    budgets = W.Budgets(cell)
    for L in (2, 9, 30):
        params = budgets.construction(L, budgets.construction_budget(L))
        assert counts_to(params, L, backend="arb256").counts
        assert run(params, L, Arith.of("float64")).counts_up_to() >= L
    assert readme_runs["post_learned"]["formats"]["float64"]["L_wall_construction"] == README_LMAX


def test_classification_walls_and_margins():
    cell = Cell("softmax", "none", "classification", d=8)
    found, rows = W.classification_walls(cell, 16, {f.name: Arith.of(f) for f in FORMATS})
    from constructions.classification import design
    for row in rows:
        judged = counts_to(design(cell).build(row["L"]), row["L"], backend="float64")
        assert row["margin"] == pytest.approx(judged.min_margin, rel=1e-6)
        assert row["bits_needed"] == math.ceil(math.log2(2 * row["logit_scale"] / row["margin"]))
    assert [r["margin"] for r in rows] == sorted((r["margin"] for r in rows), reverse=True)
    for w in found.values():
        assert w.best == w.construction and w.construction in [0] + [r["L"] for r in rows]


# ----------------------------------------------------------------------------- the one-sided arc
ONE_SIDED = Cell("linear", "post_learned", "regression", d=8, norm="rmsnorm")


def test_the_one_sided_arc_walls_at_every_l_agree_with_a_run_per_l(monkeypatch):
    """The construction walls of the one-sided arc at every L against an independent evaluation
    per L: a fresh design's cold estimate of B_min(L) (no guess from L - 1), its construction at
    (1 + RTOL) B_min, run in the format; the wall is the largest L below which every L counts, the
    first failing L is recorded with its first failing count.  The construction at the float64
    wall is certified in ball arithmetic; the best member counts to the best wall.  (A coarse grid
    of best-budget targets keeps the test short: every L <= 4, then doubling, and Lmax.)"""
    from constructions import regression
    from verify import precision
    assert precision.parse(["--variant", "post_bare", "--attention", "linear", "--norm", "rmsnorm"])[1].post
    monkeypatch.setattr(W, "SMALL_TARGETS", 4)
    monkeypatch.setattr(W, "TARGET_RATIO", 2.0)
    Lmax = 20
    ariths = {name: Arith.of(name) for name in ("float16", "bfloat16", "float32", "float64")}
    walls = W.regression_walls(ONE_SIDED, Lmax, ariths)
    budgets = W.Budgets(ONE_SIDED)
    design = budgets.design
    constructions = {1: design.build(1, budgets.witness_budget)}
    for L in range(2, Lmax + 1):
        constructions[L] = design.build(L, regression.FootDesign(ONE_SIDED).estimate(L) * (1 + W.RTOL))
    assert counts_to(constructions[1], 1, backend="arb256").counts  # the witness budget counts
    for name, w in walls.items():
        counted = [run(constructions[L], L, ariths[name]).counts_up_to() for L in range(1, Lmax + 1)]
        failing = [L for L, c in zip(range(1, Lmax + 1), counted) if c < L]
        assert w.construction == (failing[0] - 1 if failing else Lmax)
        if failing:
            assert w.construction_failure == {"L": failing[0], "n": counted[failing[0] - 1] + 1}
        else:
            assert w.construction_failure is None and w.construction_reason == "none"
        assert 0 <= w.construction <= w.best <= Lmax
        if w.construction_reason == "rounding_error":  # the exact value printed shows it counts
            n = w.construction_failure["n"]
            exact = float(re.search(r"exact (\S+):", w.construction_detail).group(1))
            assert abs(exact - n) < 0.5, w.construction_detail
        member = design.build(w.member["L_target"], w.member["B"])
        assert max(run(member, w.best, ariths[name]).counts_up_to(), 0) >= w.best  # -1: fails at n = 0
    top = walls["float64"].construction
    assert top == Lmax and counts_to(constructions[top], top, backend="arb256").counts


# ----------------------------------------------------------------------------- the command
def _cmd(argv, capsys):
    from verify import precision
    rc = precision.main(list(argv))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_json_keys(capsys):
    rc, text, err = _cmd(["--variant", "pre_learned", "--Lmax", "12", "--json", "--accumulate", "float32"], capsys)
    assert rc == 0, err
    out = json.loads(text)
    assert set(Cell("softmax", "pre_learned").keys()) <= set(out)
    assert out["accumulate"] == "float32" and out["Lmax"] == 12
    assert "construction_grid" not in out  # every cell's construction wall is taken at every L
    assert list(out["formats"]) == [f.name for f in FORMATS]
    for name, f in out["formats"].items():
        assert {"L_wall_construction", "L_wall_best", "reason"} <= set(f)
        assert f["work_format"] == ("float32" if BY_NAME[name].bits < 24 else name)


@pytest.mark.parametrize("args", [["--variant", "nope"], ["--variant", "none", "--Lmax", "0"],
                                  ["--variant", "none", "--Lmax", "100000"],
                                  ["--variant", "none", "--accumulate", "float16"],
                                  ["--variant", "none", "--d", "1"], ["--variant", "none", "--eps", "-1"],
                                  ["--variant", "none", "--readout", "classification", "--Lmax", "1"]])
def test_bad_input_is_one_line_and_exit_2(args, capsys):
    rc, out, err = _cmd(args, capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("python -m verify.precision: error: ")


def test_the_command_runs_as_a_module():
    res = subprocess.run([sys.executable, "-m", "verify.precision", "--variant", "none", "--Lmax", "3"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0 and res.stderr == ""
    assert [line.split()[0] for line in res.stdout.splitlines()[2:]] == [f.name for f in FORMATS]


def test_progress_bar_only_on_a_terminal_and_not_with_quiet(monkeypatch):
    from verify import precision
    args = lambda *extra: precision.parse(["--variant", "none", "--Lmax", "4", *extra])[0]  # noqa: E731
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert precision._progress(args()) is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert precision._progress(args("--quiet")) is None
    bar = precision._progress(args())(3)
    assert bar.fp is not None and bar.total == 3
    bar.close()
