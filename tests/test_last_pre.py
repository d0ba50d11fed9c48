"""The remaining pre-norm cells: the last read with bare pre-RMSNorm and bare pre-LayerNorm at
``d = 2``, with pre-RMSNorm ``gain_bias``, the exact ``L*`` with ``eps > 0``, the select task
with two values (pre-LayerNorm at ``d = 2``) and the sweep's ``L_star_status``.

* every construction is run token by token on random sequences (:mod:`verify.strategies`) and
  judged in ball arithmetic at small ``L``; its geometry (norms within the budget, the values
  the norm really produces, the amplitude and the offset it claims) is recomputed here from
  the parameters alone;
* rows certified with ``B_lower <= B_min``, and refused beyond ``L*`` with the reason;
* the two-value select task: its ``B_min(2)`` against an independent linear program, and the
  proof that nothing solves ``L = 3`` on random parameter sets of every affine option;
* ``L*`` with ``eps > 0`` against an independent LP at the supremum of the shapes, and the
  supremum's lemma on random parameter sets.
"""

from __future__ import annotations

import json
import math

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog, minimize_scalar

from bounds import sweep as sweep_mod
from bounds.lstar import cell_l_star, l_star, l_star_status, last_l_star, last_l_star_eps
from bounds.search import regression_row
from constructions import Cell, laws, regression, tasks, two_value_select
from constructions.cell import Params
from constructions.last_read import BareDesign, bare_offsets
from tests.test_lstar import lp_slack
from verify import counts_to, explicit
from verify.strategies import sequences, target

BARE_LAST = [dict(norm="rmsnorm", d=2), dict(norm="rmsnorm", d=3), dict(norm="rmsnorm", d=8),
             dict(norm="layernorm", d=2)]
TWO = [dict(variant="pre_bare"), dict(variant="pre_learned", affine="gain"),
       dict(variant="pre_learned", affine="gain_bias")]


def _bare(kw) -> Cell:
    return Cell("softmax", "pre_bare", "regression", read="last", **kw)


def _two(kw, **extra) -> Cell:
    return Cell("softmax", kw["variant"], "regression", d=2, affine=kw.get("affine"), task="select", **extra)


def _rms_bias(d=4) -> Cell:
    return Cell("softmax", "pre_learned", "regression", norm="rmsnorm", affine="gain_bias", read="last", d=d)


def _norm(cell: Cell, v):
    """The cell's norm of ``v`` (eps = 0), written here from the model."""
    v = np.asarray(v, dtype=float)
    if cell.kind.centred:
        c = v - v.mean()
        return c / math.sqrt((c * c).mean())
    return v / math.sqrt((v * v).mean())


def _values(params: Params):
    """``h_x`` for x in s, a (b): the pre-norm values computed from the parameters alone."""
    cell, v = params.cell, params.vectors
    out = {}
    for x in ("s", "a", "b"):
        if f"e_{x}" not in v:
            continue
        h = _norm(cell, np.array([float(c) for c in v[f"e_{x}"]]))
        if cell.affine.gain:
            h = np.array([float(c) for c in v["g"]]) * h
        if cell.affine.bias:
            h = h + np.array([float(c) for c in v["beta"]])
        out[x] = h
    return out


def _built(cell: Cell, L: int, over: float = 1.05) -> Params:
    design = regression.design(cell)
    return design.build(L, design.estimate(L) * over)


# ---------------------------------------------------------------- bare pre-norm at the last read
@pytest.mark.parametrize("kw", BARE_LAST, ids=lambda kw: f"{kw['norm']}-d{kw['d']}")
def test_bare_last_read_counts_token_by_token_and_in_the_judge(kw):
    """At 5% above its estimate the construction counts to every L <= L* = 4: the judge
    certifies it, and the explicit pass on every input agrees."""
    cell = _bare(kw)
    assert isinstance(regression.design(cell), BareDesign) and tasks.refusal(cell) is None
    for L in (2, 3, 4):
        params = _built(cell, L)
        assert counts_to(params, L, backend="arb256").certified
        for n in range(L + 1):
            assert abs(float(explicit(params, "s" + "a" * n, "float64")) - n) < 0.5


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_bare_last_read_on_random_sequences(data):
    kw = data.draw(st.sampled_from(BARE_LAST))
    cell = _bare(kw)
    params = _params_cache(cell, 4)
    seq = data.draw(sequences(cell, max_length=4))
    assert abs(float(explicit(params, seq, "float64")) - target(seq)) < 0.5


_CACHE: dict = {}


def _params_cache(cell: Cell, L: int) -> Params:
    if (cell, L) not in _CACHE:
        _CACHE[cell, L] = _built(cell, L)
    return _CACHE[cell, L]


@settings(max_examples=40, deadline=None)
@given(kw=st.sampled_from(BARE_LAST[:2] + BARE_LAST[3:]), B=st.floats(0.5, 20),
       log_rho=st.floats(-1.99, -0.05), frac=st.floats(0.01, 0.99), C=st.floats(-30, 30))
def test_bare_geometry_is_what_it_claims(kw, B, log_rho, frac, C):
    """For any budget, shape (LayerNorm at d = 2: its only one), amplitude below B X and constant:
    every vector within B, the values are the norms of the embeddings, the amplitude is
    <w, h_a - h_s>, and the offset <w, e_s - e_a> lies in bare_offsets' reach (its middle when
    the constant asks for it)."""
    cell = _bare(kw)
    design = regression.design(cell)
    d = cell.d
    rho = math.exp(-2 * math.sqrt(d)) if design.fixed else math.exp(log_rho * math.sqrt(d))
    X = math.sqrt(-2 * math.sqrt(d) * math.log(rho))
    D = frac * B * X
    with mpmath.workdps(40):
        out = design.evaluate(4, B, rho, D, C)
    vec = {k: np.array([float(x) for x in out[k]]) for k in ("e_s", "e_a", "w")}
    params = Params(cell, {k: out[k] for k in ("e_s", "e_a", "w")}, {"w0": out["w0"]})
    assert params.bound() <= B * (1 + 1e-12)
    h = _values(params)
    assert np.allclose(h["s"], np.array([float(x) for x in out["_h_s"]]), atol=1e-9)
    assert np.allclose(h["a"], np.array([float(x) for x in out["_h_a"]]), atol=1e-9)
    assert math.exp((h["a"] @ (h["s"] - h["a"])) / math.sqrt(d)) == pytest.approx(rho, rel=1e-7)
    assert vec["w"] @ (h["a"] - h["s"]) == pytest.approx(D, rel=1e-7, abs=1e-9)
    dc, r = bare_offsets(cell, B, D, rho, laws.FLOAT)
    offset = vec["w"] @ (vec["e_s"] - vec["e_a"])
    assert abs(offset - dc) <= r + 1e-7 * (1 + abs(dc) + r)
    if abs(C + dc) + 0.5 < 0.99 * r:  # the constant's wish is inside the reach: y(0) = 0 exactly
        assert C + offset == pytest.approx(0, abs=1e-6 * (1 + abs(C)))


@pytest.mark.parametrize("kw", [BARE_LAST[1], BARE_LAST[3]], ids=["rmsnorm-d3", "layernorm-d2"])
def test_bare_last_read_rows(kw):
    """Certified rows up to L* = 4 above the proven bound; L = 5 is refused with L*'s reason."""
    cell = _bare(kw)
    assert cell_l_star(cell) == last_l_star(cell.d, cell.kind.centred) == 4
    for L in (2, 4):
        row = regression_row(cell, L)
        assert row["certified"] and 0 < row["B_lower"] <= row["B_min"]
    row = regression_row(cell, 5)
    assert row["B_min"] is None and "L* = 4" in row["note"] and "last read" in row["note"]


def test_layernorm_at_d2_has_one_shape():
    """LayerNorm at d = 2 has the values +-h_s only: the construction's shape is exp(-2 sqrt 2),
    and its lower bound (the one shape) comes close to the certified row at L* = 4."""
    cell = _bare(dict(norm="layernorm", d=2))
    params = _built(cell, 4)
    h = _values(params)
    assert np.allclose(h["a"], -h["s"], atol=1e-12)
    row = regression_row(cell, 4)
    assert row["B_lower"] <= row["B_min"] <= row["B_lower"] * 1.01


# ---------------------------------------------------------------- pre-RMSNorm gain_bias, last read
@settings(max_examples=40, deadline=None)
@given(B=st.floats(0.5, 8), gap=st.floats(0.01, 0.99), frac=st.floats(0.01, 0.99), C=st.floats(-20, 20))
def test_rmsnorm_gain_bias_geometry_is_what_it_claims(B, gap, frac, C):
    """Any budget, shape, amplitude below the capacity and constant: every vector within B, the
    values g * N(e) + beta as claimed, the amplitude <w, h_a - h_s>, and the offset within the
    reach of tasks.last_offsets (also where alpha < 0, which the across part and the common
    scale of the embeddings reach)."""
    cell = _rms_bias()
    design = regression.design(cell)
    # a score gap within the largest, H^2 B^2/4 (H = 1 + sqrt(d))
    rho = math.exp(gap * laws.last_score_gap_max(cell, B, laws.FLOAT) / math.sqrt(cell.d))
    cap = float(design.capacity_mp(rho, B))
    D = frac * cap
    with mpmath.workdps(40):
        out = design.evaluate(4, B, rho, D, C)
    names = ("e_s", "e_a", "g", "beta", "w")
    params = Params(cell, {k: out[k] for k in names}, {"w0": out["w0"]})
    assert params.bound() <= B * (1 + 1e-12)
    h = _values(params)
    assert np.allclose(h["s"], [float(x) for x in out["_h_s"]], atol=1e-8 * B)
    assert np.allclose(h["a"], [float(x) for x in out["_h_a"]], atol=1e-8 * B)
    w = np.array([float(x) for x in out["w"]])
    assert w @ (h["a"] - h["s"]) == pytest.approx(D, rel=1e-7)
    X = float(np.linalg.norm(h["s"] - h["a"]))
    alpha = 1 - X / (math.sqrt(cell.d) * B)
    dc, r = tasks.last_offsets(cell, B, D, X, alpha, laws.FLOAT)
    e = {k: np.array([float(x) for x in out[k]]) for k in ("e_s", "e_a")}
    offset = w @ (e["e_s"] - e["e_a"])
    assert abs(offset - dc) <= r * (1 + 1e-9) + 1e-9


def test_rmsnorm_gain_bias_rows_and_sequences():
    """Certified rows (B_lower <= B_min), the refusal lifted, and the built parameters right on
    random sequences."""
    cell = _rms_bias()
    assert tasks.refusal(cell) is None and cell_l_star(cell) is None
    assert l_star_status(cell) == ("infinite", None)
    for L in (4, 16):
        row = regression_row(cell, L)
        assert row["certified"] and row["B_lower"] <= row["B_min"] <= 1.5 * row["B_lower"]
    params = _built(cell, 16)
    assert counts_to(params, 16, backend="arb256").certified

    @settings(max_examples=25, deadline=None)
    @given(seq=sequences(cell, max_length=16))
    def run(seq):
        assert abs(float(explicit(params, seq, "float64")) - target(seq)) < 0.5

    run()


# ---------------------------------------------------------------- L* with eps > 0 at the last read
@pytest.mark.parametrize("d", [2, 8, 64])
def test_the_last_read_l_star_with_eps_against_an_lp(d):
    """L*_eps = 1 + the largest L' whose shifted segment counts at rho' = 1 + exp(sqrt(d)/4)
    (an independent LP), and bare pre-norm reports it for either kind with eps > 0, where the
    rows are built (constructions.last_eps)."""
    rho = 1 + math.exp(math.sqrt(d) / 4)
    Lp = 1
    while lp_slack(rho, Lp + 1) > 0:
        Lp += 1
    assert abs(lp_slack(rho, Lp + 1)) > 1e-7 and lp_slack(rho, Lp) > 1e-7  # decided
    assert last_l_star_eps(d) == 1 + Lp >= last_l_star(d, True)
    for norm in ("layernorm", "rmsnorm"):
        cell = Cell("softmax", "pre_bare", read="last", norm=norm, d=d, eps=0.01)
        assert cell_l_star(cell) == 1 + Lp and l_star_status(cell) == ("exact", 1 + Lp)
        assert tasks.refusal(cell) is None


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.sampled_from([2, 3, 8]), eps=st.sampled_from([1e-3, 0.1, 2.0]),
       norm=st.sampled_from(["layernorm", "rmsnorm"]))
def test_the_eps_shape_stays_below_its_supremum(seed, d, eps, norm):
    """The lemma: with eps > 0 every value has |h| < sqrt(d) and <h_a, h_s - h_a> < d/4, and the
    supremum is approached by h_a = h_s/2 (an embedding scaled to half the value)."""
    rng = np.random.default_rng(seed)
    cell = Cell("softmax", "pre_bare", read="last", norm=norm, d=d, eps=eps)

    def value(e):
        c = e - e.mean() if cell.kind.centred else e
        return c / math.sqrt((c * c).mean() + eps)

    e_s, e_a = rng.normal(size=d) * rng.uniform(0.01, 100), rng.normal(size=d) * rng.uniform(0.01, 100)
    h_s, h_a = value(e_s), value(e_a)
    assert h_s @ h_s < d and h_a @ (h_s - h_a) < d / 4
    big = e_s * 1e6 / np.linalg.norm(e_s)
    hs = value(big)
    # |value(lam v)| = lam |v_c| / sqrt(lam^2 |v_c|^2/d + eps): half of |hs| at this lam
    vc = np.linalg.norm(big - big.mean() if cell.kind.centred else big) / 1e6
    half = np.linalg.norm(hs) / 2
    lam = math.sqrt(eps) * half / (vc * math.sqrt(1 - half**2 / d))
    ha = value(big / 1e6 * lam)
    assert ha @ (hs - ha) == pytest.approx(d / 4, rel=1e-6)


# ---------------------------------------------------------------- the select task with two values
def _lp_amplitude(rho: float, L: int):
    """The least amplitude D with some K within 1/2 - 1e-12 of every select input's target,
    ``y = K + D n_a/((1 + n_b) rho + n_a)``, by a linear program (independent of the module)."""
    rows, rhs = [], []
    for na in range(L + 1):
        for nb in range(L + 1 - na):
            f = na / ((1 + nb) * rho + na)
            rows += [[1, f], [-1, -f]]
            rhs += [0.5 + na - 1e-12, 0.5 - na - 1e-12]
    res = linprog([0, 1], A_ub=rows, b_ub=rhs, bounds=[(None, None), (0, None)], method="highs")
    return float(res.x[1]) if res.status == 0 else math.inf


def _reference_budget(cell: Cell) -> float:
    """B_min(2) from the LP and the reach of the module docstring, optimised numerically here."""
    tau = 1 / math.sqrt(2)
    if not cell.affine.gain:
        return _lp_amplitude(math.exp(2 * math.sqrt(2)), 2) / (2 * math.sqrt(2))
    if not cell.affine.bias:
        f = lambda tv: max(tv, _lp_amplitude(math.exp(2 * tau * tv * tv), 2) / (2 * tv))
        return minimize_scalar(f, bounds=(0.05, 3), method="bounded", options={"xatol": 1e-10}).fun

    def counts(B):
        f = lambda tv: _lp_amplitude(math.exp(tau * (2 * tv * tv - 2 * B * tv)), 2) - 2 * B * tv
        return minimize_scalar(f, bounds=(1e-6, B), method="bounded", options={"xatol": 1e-12}).fun < 0

    lo, hi = 0.1, 3.0
    for _ in range(36):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if counts(mid) else (mid, hi)
    return hi


@pytest.mark.parametrize("kw", TWO, ids=lambda kw: kw.get("affine", "bare"))
def test_two_value_select_rows_and_closed_form(kw):
    """Rows certified at L = 1, 2 with B_lower <= B_min; B_min(2) meets the closed form and an
    independent LP-based optimum; L = 3 refused with the reason; L* = 2 exact."""
    cell = _two(kw)
    assert isinstance(regression.design(cell), two_value_select.TwoValueSelectDesign)
    assert cell_l_star(cell) == 2 and l_star_status(cell) == ("exact", 2)
    ref = _reference_budget(cell)
    form = tasks.closed_form(cell, 2)
    assert form["B"] == pytest.approx(ref, rel=1e-6)
    row = regression_row(cell, 2)
    assert row["certified"] and row["B_lower"] <= row["B_min"]
    assert row["B_min"] == pytest.approx(form["B"], rel=1e-5) and row["B_min"] >= form["B"] * (1 - 1e-12)
    assert regression_row(cell, 1)["certified"]
    row = regression_row(cell, 3)
    assert row["B_min"] is None and "two values" in row["note"]


@pytest.mark.parametrize("kw", TWO, ids=lambda kw: kw.get("affine", "bare"))
def test_two_value_select_on_random_sequences(kw):
    cell = _two(kw)
    params = _built(cell, 2)
    assert counts_to(params, 2, backend="arb256").certified
    assert np.allclose(_values(params)["b"], _values(params)["s"])  # b is a copy of s

    @settings(max_examples=30, deadline=None)
    @given(seq=sequences(cell, max_length=2))
    def run(seq):
        assert abs(float(explicit(params, seq, "float64")) - target(seq)) < 0.5

    run()


@settings(max_examples=40, deadline=None)
@given(kw=st.sampled_from(TWO), seed=st.integers(0, 2**32 - 1))
def test_nothing_solves_the_two_value_select_task_at_three(kw, seed):
    """The proof on random parameter sets: one of the pairs (s, sa), (sb, sa), (saab, sa) has one
    output for two targets (a copy of s, or b a copy of a or of s)."""
    cell = _two(kw)
    rng = np.random.default_rng(seed)
    vectors = {k: rng.normal(size=2) * rng.uniform(0.1, 5) for k in cell.vector_names()}
    params = Params(cell, vectors, {"w0": float(rng.normal())})
    with mpmath.workdps(40):
        y = {seq: explicit(params, seq, backend="mp40") for seq in ("s", "sa", "sb", "saab")}
        tie = min(abs(y[seq] - y["sa"]) for seq in ("s", "sb", "saab"))
        assert tie < mpmath.mpf(10) ** -25 * (1 + abs(y["sa"]))


def test_two_value_select_refusals_say_why():
    """eps > 0 (the values are no longer two) and the classification head are refused with
    their reasons; the bare eps > 0 cell's L* is finite, bounded by the count task's."""
    bare = _two(TWO[0], eps=0.1)
    assert "no longer two" in tasks.refusal(bare)
    assert l_star_status(bare) == ("finite", l_star(2))
    assert "no longer two" in tasks.refusal(_two(TWO[2], eps=0.1))
    assert l_star_status(_two(TWO[2], eps=0.1)) == ("unknown", None)
    assert "one output" in tasks.refusal(_two(TWO[1]).replace(readout="classification"))


# ---------------------------------------------------------------- the sweep's L* report
def test_the_sweep_tells_the_l_star_apart(capsys):
    """JSON: L_star_status exact (bare pre-RMSNorm read last), infinite (pre_learned), unknown
    (post-norm below its width with eps > 0); the human report names the unknown one."""
    def run(*argv):
        assert sweep_mod.main([*argv, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    r = run("--variant", "pre_bare", "--norm", "rmsnorm", "--read", "last", "--Lmax", "2")
    assert (r["L_star"], r["L_star_status"], r["L_star_upper"]) == (4, "exact", None)
    r = run("--variant", "pre_learned", "--Lmax", "2")
    assert (r["L_star"], r["L_star_status"]) == (None, "infinite")
    r = run("--variant", "post_bare", "--d", "2", "--eps", "0.1", "--Lmax", "2")
    assert (r["L_star"], r["L_star_status"]) == (None, "unknown")
    assert sweep_mod.main(["--variant", "post_bare", "--d", "2", "--eps", "0.1", "--Lmax", "2"]) == 0
    assert "not derived whether it is finite" in capsys.readouterr().out


def test_with_eps_the_two_value_select_task_reaches_three():
    """With eps > 0 the values s_x (1, -1) take any |s_x| < 1, so the select task at d = 2 is no
    longer capped at 2 (the refusal's claim): a witness for L = 3, its read-out from an LP here,
    certified by the judge in ball arithmetic."""
    eps = 0.01
    cell = _two(TWO[0], eps=eps)
    s = {"s": -0.6993, "a": 0.4995, "b": -0.54945}
    weight = {x: math.exp(math.sqrt(2) * s["s"] * s[x]) for x in s}  # tau <h_s, h_x>, |(1,-1)|^2 = 2
    rows, rhs = [], []
    for na, nb in two_value_select.inputs(3):
        mean = ((weight["s"] * s["s"] + na * weight["a"] * s["a"] + nb * weight["b"] * s["b"])
                / (weight["s"] + na * weight["a"] + nb * weight["b"]))
        rows += [[1, mean, 1], [-1, -mean, 1]]
        rhs += [0.5 + na, 0.5 - na]
    res = linprog([0, 0, -1], A_ub=rows, b_ub=rhs, bounds=[(None, None), (None, None), (None, 1)], method="highs")
    K, D, margin = res.x
    assert margin > 0.1
    c1 = np.array([1.0, -1.0]) / math.sqrt(2)
    # N(lam c_1) = s (1, -1) at lam = s sqrt(2 eps/(1 - s^2))
    e = {f"e_{x}": s[x] * math.sqrt(2 * eps / (1 - s[x] ** 2)) * c1 for x in s}
    w = (D / 2) * np.array([1.0, -1.0])
    params = Params(cell, {**e, "w": w}, {"w0": K - float(w @ e["e_s"])})
    assert counts_to(params, 3, backend="arb256").certified
    assert tasks.refusal(cell) is not None and cell_l_star(cell) is None
