"""The select task with softmax attention and no norm (constructions.select): which inputs bind,
the construction's geometry, its certification, its closed form, the sweep rows and the CLI.

Exact checks use Fractions (the read-out ``C + (rho y_s + n_a y_a + n_b beta y_b)/(rho + n_a +
beta n_b)`` written out by hand here) or mpmath at 40 digits; the construction is judged by
the certifying judge on every input.
"""

from __future__ import annotations

import json
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import search
from bounds import sweep as sweep_mod
from constructions import laws, segment, select, tasks
from constructions.cell import Cell
from constructions.closed_forms import closed_form as count_closed_form
from constructions.regression import design
from verify import counts_to, explicit


def _cell(d=8) -> Cell:
    return Cell("softmax", "none", "regression", d=d, task="select")


def _g(rho, beta, D, n_a, n_b):
    """``D phi - n_a`` with ``y_b = y_s`` (Fractions)."""
    return D * n_a / (rho + beta * n_b + n_a) - n_a


def _counts(rho, beta, D, C, inputs) -> bool:
    return all(abs(C + _g(rho, beta, D, a, b)) < Fraction(1, 2) for a, b in inputs)


def _triangle(L):
    return [(a, b) for a in range(L + 1) for b in range(L + 1 - a)]


def _count_feasible(rho, L, u):
    """An amplitude ``u`` of the way into the count task's ``(D_lo, D_hi)`` at ``rho`` (every gap,
    exact) and the constant centring its error, or None where the interval is empty."""
    lo = max(segment.lo_term(k, rho, L) for k in range(1, L + 1))
    hi = min(segment.hi_term(k, rho, L) for k in range(1, L + 1))
    if not lo < hi:
        return None
    D = lo + u * (hi - lo)
    g = [_g(rho, Fraction(0), D, n, 0) for n in range(L + 1)]
    return D, -(max(g) + min(g)) / 2


fractions = st.fractions(min_value=Fraction(1, 20), max_value=400, max_denominator=50)


@settings(max_examples=150, deadline=None)
@given(L=st.integers(1, 7), rho=fractions, beta=st.fractions(Fraction(1, 50), 1, max_denominator=50),
       u=st.fractions(Fraction(1, 20), Fraction(19, 20), max_denominator=20),
       shift=st.fractions(Fraction(-3, 5), Fraction(3, 5), max_denominator=40))
def test_with_beta_at_most_one_the_count_inputs_decide_the_select_task(L, rho, beta, u, shift):
    found = _count_feasible(rho, L, u)
    D, C = found if found else (rho * u * 4, shift)
    C += shift
    assert _counts(rho, beta, D, C, _triangle(L)) == _counts(rho, beta, D, C, select.binding_inputs(L))


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 7), rho=fractions, beta=st.fractions(Fraction(1, 50), 50, max_denominator=50),
       D=st.fractions(Fraction(1, 10), 200, max_denominator=50))
def test_the_extremes_lie_on_the_edge_and_the_hypotenuse(L, rho, beta, D):
    """Any beta: ``g`` decreases in ``n_b``, so the maximum over the triangle is on ``n_b = 0`` and
    the minimum on ``n_a + n_b = L``."""
    values = [_g(rho, beta, D, a, b) for a, b in _triangle(L)]
    assert max(values) == max(_g(rho, beta, D, a, 0) for a in range(L + 1))
    assert min(values) == min(_g(rho, beta, D, a, L - a) for a in range(L + 1))


def test_beyond_beta_one_an_interior_input_can_bind():
    """Some counting parameter set with ``beta > 1`` fails the select task first at an input
    ``(n_a, L - n_a)`` with ``0 < n_a < L``: there the count inputs do not decide."""
    hits = []
    for L in range(3, 8):
        for rho in (Fraction(L * L, 4), Fraction(L * L, 2), Fraction(L * L)):
            D, C = _count_feasible(rho, L, Fraction(1, 2))
            for beta in (Fraction(3, 2), Fraction(2), Fraction(4)):
                hyp = [C + _g(rho, beta, D, a, L - a) for a in range(L + 1)]
                low = min(hyp)
                if low <= -Fraction(1, 2) and hyp[0] > low and hyp[-1] > low:
                    hits.append((L, rho, beta))
                    assert _counts(rho, beta, D, C, select.binding_inputs(L))
    assert hits


@settings(max_examples=30, deadline=None)
@given(d=st.sampled_from([2, 3, 8, 50]), B=st.floats(0.3, 300), frac=st.floats(0.01, 0.99),
       amp=st.floats(0.1, 1.0), L=st.integers(2, 500))
def test_the_construction_reads_b_as_s_and_weighs_it_as_a(d, B, frac, amp, L):
    """In the built vectors: ``<w, e_b> = <w, e_s>``, ``<e_s, e_b> = <e_s, e_a>`` (``beta = 1``), the
    score gap ``sqrt(d) log rho``, the amplitude ``<w, e_a - e_s>`` and every norm within ``B``."""
    cell = _cell(d)
    dz = design(cell)
    lo, hi = dz.domain(L, B)
    rho = lo * (hi / lo) ** frac
    with mpmath.workdps(40):
        A = amp * dz.capacity_mp(mpmath.mpf(rho), mpmath.mpf(B))
        v = dz.evaluate(L, B, rho, A, 0)
        dot = lambda x, y: mpmath.fsum(p * q for p, q in zip(x, y))
        tol = mpmath.mpf(10) ** -30 * (1 + B**2) * (1 + A)
        assert abs(dot(v["w"], v["e_b"]) - dot(v["w"], v["e_s"])) < tol
        assert abs(dot(v["e_s"], v["e_b"]) - dot(v["e_s"], v["e_a"])) < tol
        gap = dot(v["e_s"], v["e_s"]) - dot(v["e_s"], v["e_a"])
        assert abs(gap - mpmath.sqrt(d) * mpmath.log(rho)) < tol
        assert abs(dot(v["w"], v["e_a"]) - dot(v["w"], v["e_s"]) - A) < tol
        for name in ("e_s", "e_a", "e_b", "w"):
            assert mpmath.sqrt(dot(v[name], v[name])) <= B * (1 + mpmath.mpf(10) ** -30)


@pytest.mark.parametrize("L,d", [(5, 3), (12, 8), (30, 2)])
def test_the_judge_certifies_the_construction_on_every_input(L, d):
    cell = _cell(d)
    B = design(cell).estimate(L)
    params = design(cell).build(L, B * (1 + 1e-3))
    assert counts_to(params, L, backend="arb256").certified
    # and the bound is tight: a little below the estimate the construction fails
    assert not counts_to(design(cell).build(L, B * (1 - 1e-4)), L, "mp30").counts

    @settings(max_examples=15, deadline=None)
    @given(seq=st.text(alphabet="ab", max_size=L).map(lambda body: "s" + body))
    def check(seq):
        assert abs(explicit(params, seq, backend="mp40") - seq.count("a")) < 0.5

    check()


@pytest.mark.parametrize("d", [2, 8, 17])
def test_the_closed_form_is_the_budget_of_the_corner(d):
    cell = _cell(d)
    assert select.closed_form(cell, select.CLOSED_FORM_L_MIN - 1) is None
    for L in (6, 9, 40, 333):
        form = select.closed_form(cell, L)
        rho, D = mpmath.mpf(form["rho"]), mpmath.mpf(form["D"])
        B = mpmath.mpf(form["B"])
        # the capacity at that budget reaches the corner's amplitude (up to the double's rounding)
        assert laws.select_capacity(cell, rho, B, laws.MPMATH) == pytest.approx(float(D), rel=1e-13)
        # the price of the distractor: (B/B_count)^2 - 1 = sigma^2/(D (D + 2 sigma))
        sigma = mpmath.sqrt(d) * mpmath.log(rho)
        ratio = (mpmath.mpf(form["B"]) / count_closed_form(cell.replace(task="count"), L)["B"]) ** 2 - 1
        assert float(ratio) == pytest.approx(float(sigma**2 / (D * (D + 2 * sigma))), rel=1e-6)
        assert form["B"] == pytest.approx(design(cell).estimate(L), rel=1e-6)


def test_sweep_rows_are_certified_and_bounded_below_by_the_count_task():
    cell = _cell()
    for L in (1, 4, 16):
        row = search.regression_row(cell, L)
        assert row["certified"]
        assert row["B_lower"] <= row["B_min"]
        if L == 16:
            count = count_closed_form(cell.replace(task="count"), L)["B"]
            assert row["B_min"] == pytest.approx(tasks.closed_form(cell, L)["B"], rel=2e-6)
            assert row["B_lower"] <= count * (1 + 1e-6) < row["B_min"]  # the distractor costs


def test_the_sweep_json(capsys):
    argv = ["--variant", "none", "--attention", "softmax", "--task", "select", "--Lmax", "8",
            "--json", "--jobs", "1"]
    assert sweep_mod.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"attention", "variant", "readout", "d", "eps", "rows", "fit", "L_star"} <= set(result)
    assert (result["task"], result["read"], result["L_star"]) == ("select", "bos", None)
    assert [r["L"] for r in result["rows"]] == [2, 4, 8]
    assert all(r["certified"] and r["B_lower"] <= r["B_min"] for r in result["rows"])


def test_what_is_refused():
    assert tasks.refusal(_cell()) is None
    assert tasks.refusal(_cell().replace(readout="classification")) is not None
    for variant in ("pre_bare", "pre_learned"):
        assert tasks.refusal(Cell("softmax", variant, task="select")) is not None
    with pytest.raises(ValueError):
        select.SelectDesign(Cell("softmax", "none"))
