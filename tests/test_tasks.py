"""The select task and the last-position read: constructions, lower bounds, the sweep, the README.

Random sequences are drawn with small strategies of this file (token strings over the cell's
tokens, of length at most ``L``) and run through the explicit token-by-token pass.
"""

from __future__ import annotations

import json
import re

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import search
from bounds import sweep as sweep_mod
from bounds.lower import b_lower, last_line_lower
from constructions import laws, tasks
from constructions.cell import Cell, Params
from constructions.closed_forms import closed_form as count_closed_form
from constructions.regression import design
from tests.test_readme import README, _table
from verify import counts_to, explicit, reduced

SELECT = [("linear", "none", "layernorm", None), ("linear", "pre_bare", "layernorm", None),
          ("linear", "pre_bare", "rmsnorm", None), ("linear", "pre_learned", "layernorm", "gain"),
          ("linear", "pre_learned", "layernorm", "gain_bias"), ("linear", "pre_learned", "rmsnorm", "gain"),
          ("linear", "pre_learned", "rmsnorm", "gain_bias"), ("linear", "post_bare", "layernorm", None),
          ("linear", "post_learned", "layernorm", None), ("softmax", "post_bare", "layernorm", None),
          ("softmax", "post_learned", "layernorm", None), ("softmax", "post_bare", "rmsnorm", None),
          ("softmax", "post_learned", "rmsnorm", None)]
#: the one-sided arc (linear attention with post-RMSNorm): a free distractor, no closed form
FOOT = [("linear", "post_bare", "rmsnorm", None), ("linear", "post_learned", "rmsnorm", "gain"),
        ("linear", "post_learned", "rmsnorm", "gain_bias")]
LAST = [("linear", "pre_bare", "layernorm", None), ("linear", "pre_bare", "rmsnorm", None),
        ("linear", "pre_learned", "layernorm", "gain"), ("linear", "pre_learned", "layernorm", "gain_bias"),
        ("linear", "pre_learned", "rmsnorm", "gain"), ("linear", "pre_learned", "rmsnorm", "gain_bias")]
SOFTMAX_LAST = [("softmax", "pre_learned", "layernorm", "gain_bias"), ("softmax", "pre_learned", "layernorm", "gain"),
                ("softmax", "pre_learned", "rmsnorm", "gain")]
CASES = ([(*c, "select", "bos") for c in SELECT + FOOT] + [(*c, "count", "last") for c in LAST]
         + [(*c, "count", "last") for c in SOFTMAX_LAST])
#: the cells with a closed form
CLOSED = [c for c in CASES if not (c[0] == "softmax" and c[5] == "last") and c[:4] not in FOOT]


def _cell(attention, variant, norm, affine, task, read, d=8) -> Cell:
    return Cell(attention, variant, "regression", d=d, norm=norm, affine=affine, task=task, read=read)


def _ids(case):
    return "-".join(str(x) for x in case if x is not None)


def sequences(cell: Cell, L: int):
    """Token strings ``s x_1..x_m`` with ``m <= L`` over the cell's tokens."""
    return st.text(alphabet=cell.task.tokens, max_size=L).map(lambda body: "s" + body)


def _budget(cell: Cell, L: int) -> float:
    """Just above ``B_min``: the closed form, or the float optimum of the reduced problem (the
    construction counts at every larger budget)."""
    form = tasks.closed_form(cell, L)
    return (form["B"] if form else design(cell).estimate(L)) * (1 + 1e-3)


@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.parametrize("L,d", [(5, 3), (12, 8)])
def test_the_construction_counts_every_input_and_random_sequences(case, L, d):
    cell = _cell(*case, d=d)
    params = design(cell).build(L, _budget(cell, L))
    assert float(params.bound()) <= _budget(cell, L) * (1 + 1e-12)
    assert counts_to(params, L, backend="arb256").certified  # every input, in balls

    @settings(max_examples=15, deadline=None)
    @given(seq=sequences(cell, L))
    def check(seq):
        y = explicit(params, seq, backend="mp40")
        assert abs(y - seq.count("a")) < 0.5

    check()


@pytest.mark.parametrize("case", [c for c in CASES if c[4] == "select"], ids=_ids)
def test_the_distractor_changes_no_output(case):
    """What the screen relies on: y(n_a, n_b) = y(n_a, 0) exactly, here to 1e-35 at 50 digits."""
    cell = _cell(*case)
    L = 9
    params = design(cell).build(L, _budget(cell, L))
    n_a, n_b = np.meshgrid(np.arange(L + 1), np.arange(L + 1))
    keep = (n_a + n_b <= L).ravel()
    n_a, n_b = n_a.ravel()[keep], n_b.ravel()[keep]
    with mpmath.workdps(50):
        y = reduced(params, n_a, n_b, backend="mp50")
        y0 = reduced(params, n_a, np.zeros_like(n_b), backend="mp50")
        assert max(abs(a - b) for a, b in zip(y, y0)) < mpmath.mpf(10) ** -35


@pytest.mark.parametrize("case", CLOSED, ids=_ids)
def test_the_closed_form_is_the_boundary_of_the_construction(case):
    cell = _cell(*case)
    for L in (3, 7, 20):
        B = tasks.closed_form(cell, L)["B"]
        assert not counts_to(design(cell).build(L, B * (1 - 1e-5)), L, "mp30").counts
        assert counts_to(design(cell).build(L, B * (1 + 1e-5)), L, "mp30").counts


@pytest.mark.parametrize("case", CLOSED, ids=_ids)
def test_the_select_task_costs_what_the_count_task_costs(case):
    cell = _cell(*case)
    if cell.read.last:
        return
    count = cell.replace(task="count")
    for L in (2, 6, 33):
        assert tasks.closed_form(cell, L)["B"] == count_closed_form(count, L)["B"]


@pytest.mark.parametrize("case", [CASES[0], CASES[9], CASES[-5], CASES[-9], CASES[-1], CASES[-3]], ids=_ids)
def test_sweep_rows_are_certified_and_the_lower_bound_is_below(case):
    cell = _cell(*case)
    for L in (1, 4, 9, 16):
        row = search.regression_row(cell, L)
        assert row["certified"]
        assert row["B_lower"] <= row["B_min"]
        form = tasks.closed_form(cell, L)
        if L > 1 and form:
            assert row["B_min"] == pytest.approx(form["B"], rel=2e-6)
        if L == 16 and not form:  # the softmax last read: the bound meets the construction
            assert row["B_min"] / row["B_lower"] - 1 < 3e-6


@settings(max_examples=40, deadline=None)
@given(case=st.sampled_from(SOFTMAX_LAST), seed=st.integers(0, 2**32 - 1))
def test_the_softmax_last_read_amplitude_is_within_its_capacity(case, seed):
    """The lemma of the softmax lower bound: seen from h_a, D = <w, h_a - h_s> <= B X with
    X^2 - H B X + sigma <= 0, sigma = <h_a, h_s - h_a>, for any parameters."""
    from verify.forward import numbers

    cell = _cell(*case, "count", "last", d=4)
    rng = np.random.default_rng(seed)
    vectors = {name: rng.normal(size=cell.d) * rng.uniform(0.1, 3) for name in cell.vector_names()}
    params = Params(cell, vectors, {"w0": 0.0})
    with mpmath.workdps(40):
        nums = numbers(params, "mp40")
        h_s, h_a, w = nums.h["s"], nums.h["a"], nums.w
        sig = h_a @ (h_s - h_a)
        D = abs(w @ (h_a - h_s))
        B = params.bound()
        H, _ = laws.value_reach(cell, laws.MPMATH)
        assert 4 * sig <= (H * B) ** 2 * (1 + mpmath.mpf(10) ** -30)
        X = laws.last_value_gap(cell, B, min(sig, (H * B) ** 2 / 4), laws.MPMATH)
        assert D <= B * X * (1 + mpmath.mpf(10) ** -30)


def test_what_nothing_counts_beyond():
    """The refusals' claims, independently: softmax without a norm at the last read cannot count
    to 3 (the ratio 2 rho/((rho+2)(rho+3)) never reaches 1/2), and with bare pre-norm
    (rho' = rho + 1 <= 2) the shifted segment of L - 1 = 4 is infeasible while 3 is not."""
    import sympy

    from constructions import segment

    rho = sympy.Symbol("rho", positive=True)
    assert sympy.solve_univariate_inequality(4 * rho > (rho + 2) * (rho + 3), rho,
                                             relational=False) == sympy.EmptySet
    lo, hi = segment.interval(2, 4)
    assert lo >= hi
    lo, hi = segment.interval(2, 3)
    assert lo < hi
    from bounds.lstar import cell_l_star

    rms = Cell("softmax", "pre_bare", read="last", norm="rmsnorm")
    assert tasks.refusal(rms) is None and cell_l_star(rms) == 4  # built to L* = 4

    assert cell_l_star(Cell("softmax", "none", read="last")) == 2  # built to L* = 2


@settings(max_examples=40, deadline=None)
@given(case=st.sampled_from([c for c in CLOSED if c[5] == "last"]), seed=st.integers(0, 2**32 - 1))
def test_the_last_read_slope_is_within_the_line_capacity(case, seed):
    """The lemma of the lower bound: for n >= 1 the last read is a line whose slope is at most
    cap(B(theta)), for any parameters."""
    cell = _cell(*case, d=4)
    rng = np.random.default_rng(seed)
    vectors = {name: rng.normal(size=cell.d) * rng.uniform(0.1, 3) for name in cell.vector_names()}
    params = Params(cell, vectors, {"w0": float(rng.normal())})
    with mpmath.workdps(40):
        y = reduced(params, [1, 2, 5], backend="mp40")
        slope = y[1] - y[0]
        assert abs((y[2] - y[1]) - 3 * slope) < mpmath.mpf(10) ** -25 * (1 + abs(slope))
        assert slope <= laws.capacity(cell, None, params.bound(), laws.MPMATH) * (1 + mpmath.mpf(10) ** -30)


@pytest.mark.parametrize("case", [c for c in CLOSED if c[5] == "last"], ids=_ids)
def test_the_last_read_bound_meets_the_construction_where_the_offset_is_free(case):
    cell = _cell(*case)
    # where the construction's offset reach covers 1/(L-1) the two agree (module docstring)
    for L in list(range(3, 80, 3)) + [99, 100]:
        B = tasks.closed_form(cell, L)["B"]
        low = last_line_lower(cell, L)
        assert low <= B * (1 + 1e-15)
        reach = laws.last_offset_reach(cell, low, 1 - 1 / (L - 1), laws.FLOAT)
        if reach > 1 / (L - 1) * (1 + 1e-9):
            assert low == pytest.approx(B, rel=1e-12)
    assert b_lower(cell, 50, None) == last_line_lower(cell, 50)
    # cheaper than the BOS read, which needs the slope 1 - 1/L
    bos = cell.replace(read="bos")
    assert all(tasks.closed_form(cell, L)["B"] < count_closed_form(bos, L)["B"] for L in (2, 8, 64))


REFUSED = [dict(attention="softmax", variant="pre_learned", task="select", d=2, eps=0.01),
           dict(attention="softmax", variant="pre_bare", task="select", d=2, eps=0.01),
           dict(attention="linear", variant="pre_bare", task="select", d=2),
           dict(attention="softmax", variant="post_bare", read="last", eps=0.01, readout="classification"),
           dict(attention="softmax", variant="post_bare", task="select", read="last", norm="rmsnorm", eps=0.01),
           dict(attention="linear", variant="post_bare", task="select", read="last", eps=0.01),
           dict(attention="linear", variant="post_learned", task="select", read="last", eps=0.01),
           dict(attention="softmax", variant="pre_bare", eps=0.01, readout="classification", read="last"),
           dict(attention="softmax", variant="pre_learned", readout="classification", task="select", d=2),
           dict(attention="linear", variant="pre_learned", affine="gain", task="select", d=2)]


@pytest.mark.parametrize("case", [CASES[0], CASES[4], CASES[10]] + [(*c, "select", "bos") for c in FOOT[:2]],
                         ids=_ids)
def test_classification_selects_with_the_count_task_s_margin(case):
    """The classification head on the select geometry: certified on every select input, with
    the margin of the count task's head (the outputs z do not depend on n_b), and the count
    task's proven margin bound above it."""
    from bounds.search import classification_row

    cell = _cell(*case).replace(readout="classification")
    L = 12
    row, count = classification_row(cell, L), classification_row(cell.replace(task="count"), L)
    assert row["certified"] and count["certified"]
    assert row["margin"] == pytest.approx(count["margin"], rel=1e-9)
    assert row["storage"] == count["storage"] + cell.d  # the embedding of b
    assert row["margin_upper"] == count["margin_upper"] >= row["margin"]


@pytest.mark.parametrize("case", FOOT, ids=_ids)
def test_the_one_sided_arc_selects_at_the_count_task_s_cost(case):
    """Linear attention with post-RMSNorm: e_b is orthogonal to e_s (it scores 0, so the
    residual, which RMSNorm does not centre, is the count task's), and the sweep rows, certified
    on every select input, are the count task's: B_min and the proven B_lower."""
    cell = _cell(*case, "select", "bos", d=2)
    with mpmath.workdps(40):
        v = design(cell).build(7, _budget(cell, 7)).vectors
        dot = lambda x, y: mpmath.fsum(p * q for p, q in zip(x, y))
        assert abs(dot(v["e_s"], v["e_b"])) < mpmath.mpf(10) ** -30
        assert dot(v["e_b"], v["e_b"]) == pytest.approx(dot(v["e_s"], v["e_s"]), rel=1e-30)
    for L in (1, 5, 16):
        row, count = search.regression_row(cell, L), search.regression_row(cell.replace(task="count"), L)
        assert row["certified"] and count["certified"]
        assert (row["B_min"], row["B_lower"]) == (count["B_min"], count["B_lower"])
        assert row["B_lower"] <= row["B_min"]


@pytest.mark.parametrize("kw", REFUSED, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_cells_without_a_construction_are_refused_up_front(kw, capsys):
    kw = dict(kw)
    argv = ["--variant", kw.pop("variant"), "--Lmax", "8"]
    for key, value in kw.items():
        argv += [f"--{key}", str(value)]
    assert sweep_mod.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "no construction" in err


def test_the_json_names_the_task_and_the_read(capsys):
    argv = ["--variant", "pre_learned", "--attention", "linear", "--read", "last", "--Lmax", "4",
            "--json", "--jobs", "1"]
    assert sweep_mod.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["task"], result["read"]) == ("count", "last")
    assert all(r["certified"] for r in result["rows"])
    assert sweep_mod.main(argv[:6] + ["--Lmax", "2", "--jobs", "1"]) == 0
    assert "task count, read last" in capsys.readouterr().out


def _cell_of(text: str, task: str, read: str) -> Cell:
    attention, _, rest = text.partition(", ")
    parts = rest.split(" ")
    norm = "rmsnorm" if "rmsnorm" in parts else "layernorm"
    affine = next((p for p in parts if p in ("gain", "gain_bias")), None)
    return Cell(attention, parts[0], "regression", d=8, norm=norm, affine=affine, task=task, read=read)


def test_readme_table_is_the_closed_forms():
    rows = [r for r in _table("Selective counting and the last-position read") if r[2].isdigit()]
    assert len(rows) == 16
    for taskread, text, L, value, bos in rows:
        task, read = taskread.split(", ")
        cell = _cell_of(text, task, read)
        L = int(L)
        form = tasks.closed_form(cell, L)
        got = form["B"] if form else search.regression_row(cell, L, lower=False)["B_min"]
        assert got == pytest.approx(float(value), rel=1e-5)
        count = count_closed_form(cell.replace(task="count", read="bos"), L)["B"]
        if bos == "the same":
            assert got == count
        else:
            assert count == pytest.approx(float(bos), rel=1e-5)


def test_readme_statements():
    section = README.split("## Selective counting and the last-position read", 1)[1].split("\n## ", 1)[0]
    text = " ".join(section.split())
    # where B_min meets B_lower at d = 8
    found = {name: int(L) for L, name in re.findall(r"`L = (\d+)` \((gain_bias|gain|bare)\)", text)}
    want = {}
    for name, cell in (("gain", _cell("linear", "pre_learned", "layernorm", "gain", "count", "last")),
                       ("gain_bias", _cell("linear", "pre_learned", "layernorm", "gain_bias", "count", "last")),
                       ("bare", _cell("linear", "pre_bare", "layernorm", None, "count", "last"))):
        # the offset binds while B_delta exceeds cap^-1(1 - 1/(L-1)) (floats, a margin of 1e-9)
        binds = [L for L in range(3, 400)
                 if laws.last_offset_budget(cell, L, laws.FLOAT) > last_line_lower(cell, L) * (1 + 1e-9)]
        want[name] = max(binds) + 1
    assert found == want
    assert tasks.refusal(Cell("softmax", "pre_learned", task="select", d=2, eps=0.1)) is not None
    assert tasks.refusal(Cell("softmax", "post_learned", task="select")) is None
    assert "nothing counts beyond `L = 2`" in text


@settings(max_examples=30, deadline=None)
@given(variant=st.sampled_from(["pre_bare", "pre_learned"]), seed=st.integers(0, 2**32 - 1))
def test_nothing_selects_with_pre_layernorm_without_a_bias_at_d2(variant, seed):
    """The refusal's proof: at d = 2 every value is +- one vector, so for any parameters the
    inputs (s, a) and (s, b), targets 1 and 0, have one output (linear attention)."""
    cell = Cell("linear", variant, "regression", d=2, affine="gain" if variant == "pre_learned" else None,
                task="select")
    assert "no parameters solve it" in tasks.refusal(cell)
    rng = np.random.default_rng(seed)
    vectors = {name: rng.normal(size=2) * rng.uniform(0.1, 3) for name in cell.vector_names()}
    params = Params(cell, vectors, {"w0": float(rng.normal())})
    with mpmath.workdps(40):
        y_a, y_b = explicit(params, "sa", backend="mp40"), explicit(params, "sb", backend="mp40")
        assert abs(y_a - y_b) < mpmath.mpf(10) ** -30 * (1 + abs(y_a))


@pytest.mark.parametrize("variant", ["post_bare", "post_learned"])
def test_softmax_post_norm_selects_with_eps(variant):
    """eps > 0: e_b = -e_s leaves only the radial factor the norm sees; the screen judges every
    select input and the certified rows lie above the count task's (a sub-task)."""
    cell = Cell("softmax", variant, d=8, eps=1e-5, task="select")
    assert tasks.refusal(cell) is None and tasks.screen_cell(cell) == cell
    assert tasks.screen_cell(cell.replace(eps=0.0)) == cell.replace(eps=0.0, task="count")
    for L in (4, 16):
        row, count = search.regression_row(cell, L, lower=False), search.regression_row(cell.replace(task="count"), L, lower=False)
        assert row["certified"] and count["certified"]
        assert row["B_min"] >= count["B_min"] * (1 - 1e-6)
