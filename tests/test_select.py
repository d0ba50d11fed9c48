"""The select task with softmax attention and no norm (constructions.select): which inputs bind,
the construction's geometry, its certification, its closed form, the sweep rows and the CLI.

Exact checks use Fractions (the read-out ``C + (rho y_s + n_a y_a + n_b beta y_b)/(rho + n_a +
beta n_b)`` written out by hand here) or mpmath at 40 digits; the construction is judged by
the certifying judge on every input.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import search
from bounds import sweep as sweep_mod
from bounds.lstar import cell_l_star, l_star, last_l_star
from constructions import closed_forms, laws, segment, select, tasks
from constructions.cell import Cell, Params
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


#: the cells built here: ``(variant, norm)`` (pre_learned: the kind's usual affine, a gain)
BUILT = [("none", "layernorm"), ("pre_bare", "layernorm"), ("pre_bare", "rmsnorm"), ("pre_learned", "rmsnorm"),
         ("pre_learned", "layernorm")]


def _norm(cell: Cell, e):
    """The bare norm of an embedding, written out (LayerNorm: centred, population variance)."""
    d = len(e)
    if cell.kind.centred:
        m = mpmath.fsum(e) / d
        e = [x - m for x in e]
    return [x / mpmath.sqrt(mpmath.fsum(x * x for x in e) / d) for x in e]


@pytest.mark.parametrize("variant,norm", BUILT)
@settings(max_examples=25, deadline=None)
@given(d=st.sampled_from([2, 3, 8, 50]), B=st.floats(0.3, 300), frac=st.floats(0.01, 0.99),
       amp=st.floats(0.1, 1.0), L=st.integers(2, 500))
def test_the_construction_reads_b_as_s_and_weighs_it_at_most_as_a(variant, norm, d, B, frac, amp, L):
    """In the built vectors (values recomputed from the embeddings): ``<w, h_b> = <w, h_s>``,
    ``<h_s, h_b> <= <h_s, h_a>`` (``beta <= 1``; ``= 1`` without a norm), the score gap
    ``sqrt(d) log rho``, the amplitude ``<w, h_a - h_s>`` and every norm within ``B``."""
    cell = Cell("softmax", variant, d=d, norm=norm, task="select")
    if not select.suppresses(cell):
        return  # pre-LayerNorm at d = 2: two values (constructions.two_value_select)
    dz = design(cell)
    lo, hi = dz.domain(L, B)
    if not lo < hi:
        return  # beyond L*: no shape counts
    rho = lo * (hi / lo) ** frac
    with mpmath.workdps(40):
        A = amp * dz.capacity_mp(mpmath.mpf(rho), mpmath.mpf(B))
        v = dz.evaluate(L, B, rho, A, 0)
        h = {x: (_norm(cell, v[f"e_{x}"]) if cell.pre else v[f"e_{x}"]) for x in "sab"}
        if cell.learned:  # g * N(e) (+ beta), written out
            bias = v["beta"] if cell.affine.bias else [0] * d
            h = {x: [gi * hi + bi for gi, hi, bi in zip(v["g"], h[x], bias)] for x in "sab"}
        dot = lambda x, y: mpmath.fsum(p * q for p, q in zip(x, y))
        tol = mpmath.mpf(10) ** -28 * (1 + B**2 + d) * (1 + A)
        assert abs(dot(v["w"], h["b"]) - dot(v["w"], h["s"])) < tol
        beta_gap = dot(h["s"], h["b"]) - dot(h["s"], h["a"])
        assert beta_gap < tol and (cell.pre or abs(beta_gap) < tol)
        gap = dot(h["s"], h["s"]) - dot(h["s"], h["a"])
        assert abs(gap - mpmath.sqrt(d) * mpmath.log(rho)) < tol
        assert abs(dot(v["w"], h["a"]) - dot(v["w"], h["s"]) - A) < tol
        for name in ("e_s", "e_a", "e_b", "w") + (("g",) if cell.learned else ()):
            assert mpmath.sqrt(dot(v[name], v[name])) <= B * (1 + mpmath.mpf(10) ** -30)


@pytest.mark.parametrize("variant,norm,L,d", [("none", "layernorm", 5, 3), ("none", "layernorm", 12, 8),
                                              ("none", "layernorm", 30, 2), ("pre_bare", "layernorm", 12, 3),
                                              ("pre_bare", "rmsnorm", 20, 8), ("pre_bare", "rmsnorm", 9, 2),
                                              ("pre_learned", "rmsnorm", 12, 8), ("pre_learned", "rmsnorm", 7, 2),
                                              ("pre_learned", "layernorm", 10, 3)])
def test_the_judge_certifies_the_construction_on_every_input(variant, norm, L, d):
    cell = Cell("softmax", variant, d=d, norm=norm, task="select")
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


@pytest.mark.parametrize("variant,d", [("none", 2), ("none", 8), ("none", 17), ("pre_bare", 3), ("pre_bare", 8)])
def test_the_closed_form_is_the_budget_of_the_corner(variant, d):
    cell = Cell("softmax", variant, d=d, task="select")
    count = cell.replace(task="count")
    L_min = closed_forms.segment_L_min(count)
    assert select.closed_form(cell, L_min - 1) is None
    top = l_star(d) if cell.pre else 333
    assert (select.closed_form(cell, top + 1) is None) == bool(cell.pre)
    for L in sorted({L_min, 9, 12, 40, top} - set(range(top + 1, 400))):
        form = select.closed_form(cell, L)
        rho, D, B = (mpmath.mpf(form[k]) for k in ("rho", "D", "B"))
        # the capacity at that budget reaches the corner's amplitude (up to the double's rounding)
        assert laws.select_capacity(cell, rho, B, laws.MPMATH) == pytest.approx(float(D), rel=1e-13)
        sigma = mpmath.sqrt(d) * mpmath.log(rho)
        ratio = mpmath.mpf(form["B"]) / count_closed_form(count, L)["B"]
        if cell.pre:  # the price of the turn: 1/cos(phi), sin(phi) = max(0, sigma/d - 1); free for sigma <= d
            want = 1 / mpmath.sqrt(1 - max(0, sigma / d - 1) ** 2)
            assert (ratio == 1) == (sigma <= d)
        else:  # the price of the score gap: (B/B_count)^2 - 1 = sigma^2/(D (D + 2 sigma))
            want = mpmath.sqrt(1 + sigma**2 / (D * (D + 2 * sigma)))
        assert float(ratio) == pytest.approx(float(want), rel=1e-9)
        assert form["B"] == pytest.approx(design(cell).estimate(L), rel=1e-6)


def test_sweep_rows_are_certified_and_bounded_below_by_the_count_task():
    for variant, Ls in (("none", (1, 4, 16)), ("pre_bare", (8, 16, 34, 35))):
        cell = Cell("softmax", variant, task="select")
        count = cell.replace(task="count")
        for L in Ls:
            row = search.regression_row(cell, L)
            if L > l_star(8) and cell.pre:
                assert row["B_min"] is None and "L* = 34" in row["note"]
                continue
            assert row["certified"]
            assert row["B_lower"] <= row["B_min"]
            if L >= 8:
                B_count = count_closed_form(count, L)["B"]
                assert row["B_min"] == pytest.approx(tasks.closed_form(cell, L)["B"], rel=2e-6)
                assert row["B_lower"] <= B_count * (1 + 1e-6)
                assert row["B_min"] > B_count * (1 + 1e-4) or (cell.pre and L == 8)  # the distractor costs


@pytest.mark.parametrize("variant,L_star", [("none", None), ("pre_bare", 34)])
def test_the_sweep_json(variant, L_star, capsys):
    # two rows suffice for the object's shape; the rows themselves are certified up to L = 34 by
    # test_sweep_rows_are_certified_and_bounded_below_by_the_count_task
    argv = ["--variant", variant, "--attention", "softmax", "--task", "select", "--Lmax", "4",
            "--json", "--jobs", "1"]
    assert sweep_mod.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"attention", "variant", "readout", "d", "eps", "rows", "fit", "L_star"} <= set(result)
    assert (result["task"], result["read"], result["L_star"]) == ("select", "bos", L_star)
    assert L_star is None or L_star == cell_l_star(Cell("softmax", variant))
    assert [r["L"] for r in result["rows"]] == [2, 4]
    assert all(r["certified"] and r["B_lower"] <= r["B_min"] for r in result["rows"])


def test_what_is_refused():
    assert tasks.refusal(_cell()) is None
    assert tasks.refusal(Cell("softmax", "pre_bare", d=2, norm="rmsnorm", task="select")) is None
    assert tasks.refusal(_cell().replace(readout="classification")) is None  # the level head of constructions.pencil
    # LayerNorm at d = 2: two values, built to L* = 2 (constructions.two_value_select) at eps = 0
    assert tasks.refusal(Cell("softmax", "pre_bare", d=2, task="select")) is None
    assert tasks.refusal(Cell("softmax", "pre_bare", d=2, task="select", eps=0.1)) is not None
    for affine in ("gain", "gain_bias"):
        assert tasks.refusal(Cell("softmax", "pre_learned", affine=affine, d=2, task="select")) is None
        assert tasks.refusal(Cell("softmax", "pre_learned", affine=affine, d=2, task="select", eps=0.1)) is not None
        assert tasks.refusal(Cell("softmax", "pre_learned", affine=affine, d=3, task="select")) is None
        assert tasks.refusal(Cell("softmax", "pre_learned", affine=affine, norm="rmsnorm", d=2, task="select")) is None
    with pytest.raises(ValueError):
        select.SelectDesign(Cell("softmax", "none"))


def test_readme_table_and_statements():
    """The README's table: ``B_min`` is the closed form, the count task's column its closed form,
    ``B_lower`` the count task's (it meets the count task's ``B_min`` to 1e-5 without post-norm),
    the price their ratio; and bare pre-norm is free exactly while ``L <= 9`` at ``d = 8``."""
    from tests.test_readme import _table

    rows = [r for r in _table("Selective counting without post-norm") if r[1].isdigit()]
    assert len(rows) == 8
    for text, L, value, count, lower, price in rows:
        cell = Cell("softmax", text.split(", ")[1], task="select")
        L = int(L)
        got, want = select.closed_form(cell, L)["B"], count_closed_form(cell.replace(task="count"), L)["B"]
        assert got == pytest.approx(float(value), rel=1e-5)
        assert want == pytest.approx(float(count), rel=1e-5) == pytest.approx(float(lower), rel=1e-5)
        number = float(price.split("%")[0]) / 100 if "%" in price else float(price)
        assert got / want - 1 == pytest.approx(number, rel=5e-3, abs=1e-12)
        if "L* =" in price:
            assert f"L* = {cell_l_star(cell)}" in price and L == cell_l_star(cell)
    bare = design(Cell("softmax", "pre_bare", task="select"))
    plain = design(Cell("softmax", "pre_bare"))
    free = [L for L in range(2, 20) if bare.estimate(L) == pytest.approx(plain.estimate(L), rel=1e-6)]
    assert free == list(range(2, 10))


def test_the_leading_term_is_the_count_task_s():
    """``B_min(select) = L/2 (1 + o(1))`` without a norm: the count task's bound below, the
    closed form (at most ``sqrt(D*) <= (L+1)/2``) above."""
    cell = _cell()
    term = laws.leading_term(cell)
    assert term == laws.leading_term(cell.replace(task="count")) and term.proven == "B_min"
    for L in (64, 1024, 2**20):
        B = select.closed_form(cell, L)["B"]
        assert count_closed_form(cell.replace(task="count"), L)["B"] <= B <= (L + 1) / 2
    assert laws.leading_term(Cell("softmax", "pre_bare", task="select")) is None
    assert laws.leading_term(Cell("softmax", "pre_learned", task="select")) is None  # gain_bias
    gain = Cell("softmax", "pre_learned", affine="gain", task="select")
    assert laws.leading_term(gain) == laws.leading_term(gain.replace(task="count"))


# ------------------------------------------------ the binding inputs, from the vectors (review)
def _unit(x):
    n = mpmath.sqrt(mpmath.fsum(v * v for v in x))
    return [v / n for v in x]


def _dot(x, y):
    return mpmath.fsum(p * q for p, q in zip(x, y))


def _off(x, axis):
    """``x`` minus its part along the unit ``axis``."""
    p = _dot(x, axis)
    return [a - p * b for a, b in zip(x, axis)]


def _random_geometry(rng, cell: Cell, beta_above_one: bool):
    """Random embeddings and a unit read-out direction ``u`` with ``<u, h_b> = <u, h_s>``
    (``y_b = y_s`` for ``w`` along ``u``) and ``<h_s, h_b> <= <h_s, h_a>`` (``beta <= 1``), or
    ``> `` (``beta > 1``) when asked; built here from the definitions, not by the toolkit.  None
    where the draw cannot meet the ``beta`` condition."""
    d = cell.d
    gauss = lambda: [mpmath.mpf(rng.gauss(0, 1)) for _ in range(d)]
    scale = mpmath.mpf(10) ** rng.uniform(-0.5, 1)
    e_s, e_a, u = [scale * v for v in gauss()], [scale * v for v in gauss()], _unit(gauss())
    if not cell.pre:
        sign = -1 if beta_above_one else 1
        # e_b = e_s + t v with v orthogonal to u: <e_s, e_b> - <e_s, e_a> = -sign delta
        v = _off(gauss(), u)
        delta = mpmath.mpf(rng.choice([0, rng.uniform(0, 2)]) if not beta_above_one else rng.uniform(0.1, 2))
        t = (_dot(e_s, e_a) - _dot(e_s, e_s) - sign * delta * scale**2) / _dot(e_s, v)
        return {"e_s": e_s, "e_a": e_a, "e_b": [a + t * b for a, b in zip(e_s, v)]}, u
    norm = lambda e: _norm(cell, e)
    h_s, h_a = norm(e_s), norm(e_a)
    centre = (lambda x: [v - mpmath.fsum(x) / d for v in x]) if cell.kind.centred else (lambda x: x)
    axis = _unit(centre(u))  # <u, h> = <centre(u), h> for every value h
    p = _dot(axis, h_s)
    rest = _unit(_off(h_s, axis))
    other = _off(_off(centre(gauss()), axis), rest)
    # h_b on the sphere with <axis, h_b> = p, turned by chi from the mirror image of h_s
    chi = rng.uniform(0, 1.2) if _dot(other, other) > mpmath.mpf(10) ** -30 else 0  # a plane (d = 3)
    side = _unit(other) if chi else [0] * d
    h_b = [p * a + mpmath.sqrt(d - p * p) * (-mpmath.cos(chi) * b + mpmath.sin(chi) * c)
           for a, b, c in zip(axis, rest, side)]
    if (_dot(h_s, h_b) > _dot(h_s, h_a)) != beta_above_one:
        return None
    # a centred h_b of norm sqrt(d) is its own norm, and so is any positive multiple's (eps = 0)
    factor = mpmath.mpf(rng.uniform(0.2, 5))
    return {"e_s": e_s, "e_a": e_a, "e_b": [factor * x for x in h_b]}, u


def _features(cell: Cell, vectors, u, inputs):
    """``<u, r>`` at each input ``(n_a, n_b)``, by the reference forward pass of the tests
    (:func:`helpers.ref_forward`, the model written out by hand) with ``w = u``, ``w0 = 0``."""
    from helpers import MP, ref_forward

    return {ab: ref_forward(cell, {**vectors, "w": u}, {"w0": 0}, "s" + "a" * ab[0] + "b" * ab[1], MP).out
            for ab in inputs}


def _inside(rng, f, L: int, k: int):
    """``k`` random read-outs ``(alpha, w0)`` strictly inside the polygon of those that count to
    ``L`` on the features ``f[n]`` (its Chebyshev centre by a linear programme, then a random
    fraction of the way to its boundary along a random direction, exact in mpmath); [] if the
    polygon is empty or thin."""
    import numpy as np
    from scipy.optimize import linprog

    ff, n = np.array([float(f[i]) for i in range(L + 1)]), np.arange(L + 1.0)
    one = np.ones(L + 1)
    res = linprog([0, 0, 1], A_ub=np.vstack([np.c_[ff, one, -one], np.c_[-ff, -one, -one]]),
                  b_ub=np.r_[n, -n], bounds=[(None, None)] * 3, method="highs")
    if res.status or res.fun > 0.45:
        return []
    a0, b0 = (mpmath.mpf(v) for v in res.x[:2])
    out = []
    for _ in range(k):
        th = rng.uniform(0, 2 * math.pi)
        da, db = mpmath.cos(th) * abs(a0) * mpmath.mpf(10) ** -rng.uniform(0, 3), mpmath.sin(th)
        steps = []
        for i in range(L + 1):
            e0, de = a0 * f[i] + b0 - i, da * f[i] + db
            if de:
                steps.append(((1 if de > 0 else -1) * mpmath.mpf(1) / 2 - e0) / de)
        step = min(steps) * mpmath.mpf(rng.uniform(0.01, 0.999))
        out.append((a0 + step * da, b0 + step * db))
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(["none", "pre_bare"]),
       norm=st.sampled_from(["layernorm", "rmsnorm"]), d=st.sampled_from([3, 4, 8]), L=st.integers(2, 6))
def test_y_b_equal_y_s_and_beta_at_most_one_pass_every_select_input(seed, variant, norm, d, L):
    """The module docstring's claim on parameter sets drawn here (random embeddings, ``b`` read
    as ``s`` and weighed at most as ``a``, random read-outs that count the count inputs): the
    reference forward pass (mpmath, 50 digits) on all ``(L+1)(L+2)/2`` select inputs is within
    1/2 of ``n_a``."""
    import random

    rng = random.Random(seed)
    cell = Cell("softmax", variant, d=d, norm=norm, task="select")
    with mpmath.workdps(50):
        drawn = _random_geometry(rng, cell, beta_above_one=False)
        if drawn is None:
            return
        vectors, u = drawn
        if cell.pre:  # the drawn h_b: read as s, weighed at most as a
            h = {x: _norm(cell, vectors[f"e_{x}"]) for x in "sab"}
            assert abs(_dot(u, h["b"]) - _dot(u, h["s"])) < mpmath.mpf(10) ** -40
            assert _dot(h["s"], h["b"]) <= _dot(h["s"], h["a"])
        f = _features(cell, vectors, u, _triangle(L))
        for alpha, w0 in _inside(rng, [f[(n, 0)] for n in range(L + 1)], L, 3):
            assert all(abs(alpha * f[(n, 0)] + w0 - n) < 0.5 for n in range(L + 1))
            assert all(abs(alpha * f[ab] + w0 - ab[0]) < 0.5 for ab in _triangle(L)), (alpha, w0)


def test_beyond_beta_one_the_count_inputs_do_not_decide_from_the_vectors():
    """The same draw with ``<h_s, h_b> > <h_s, h_a>`` (``beta > 1``): some read-out that counts
    the count inputs fails a select input (the check above can fail)."""
    import random

    rng, failed = random.Random(7), 0
    with mpmath.workdps(30):
        for variant, norm, d, L in [("none", "layernorm", 3, 4), ("pre_bare", "layernorm", 8, 5),
                                    ("pre_bare", "rmsnorm", 4, 6)] * 4:
            cell = Cell("softmax", variant, d=d, norm=norm, task="select")
            drawn = _random_geometry(rng, cell, beta_above_one=True)
            if drawn is None:
                continue
            vectors, u = drawn
            f = _features(cell, vectors, u, _triangle(L))
            for alpha, w0 in _inside(rng, [f[(n, 0)] for n in range(L + 1)], L, 3):
                failed += not all(abs(alpha * f[ab] + w0 - ab[0]) < 0.5 for ab in _triangle(L))
    assert failed


def test_reference_forward_pass_is_the_judge_s():
    """The reference pass used above agrees with the toolkit's forward pass on a drawn set."""
    import random

    cell = Cell("softmax", "pre_bare", d=4, norm="layernorm", task="select")
    with mpmath.workdps(40):
        rng = random.Random(1)
        drawn = None
        while drawn is None:
            drawn = _random_geometry(rng, cell, beta_above_one=False)
        vectors, u = drawn
        params = Params(cell, {**vectors, "w": [3 * x for x in u]}, {"w0": mpmath.mpf("0.25")})
        f = _features(cell, vectors, u, [(2, 1), (0, 3), (1, 0)])
        for (na, nb), value in f.items():
            got = explicit(params, "s" + "a" * na + "b" * nb, backend="mp40")
            assert abs(got - (3 * value + mpmath.mpf("0.25"))) < mpmath.mpf(10) ** -30


# ------------------------------------------------ the budget's monotonicity (laws.select_budget)
@settings(max_examples=60, deadline=None)
@given(B=st.floats(1e-3, 1e4), frac=st.floats(1e-6, 1.0))
def test_select_capacity_increases_in_the_budget(B, frac):
    """At fixed ``sigma`` (in the domain ``sigma <= 3 B^2/2``) the capacity ``B (B + r)``
    increases in ``B`` (mpmath, a relative step of ``1e-6``), and its inverse at the corner's
    branch is :func:`constructions.laws.select_budget`."""
    cell = _cell()
    with mpmath.workdps(60):
        Bm = mpmath.mpf(B)
        sigma = frac * 3 * Bm**2 / 2
        cap = lambda b: b * laws.select_value_gap(cell, b, sigma, laws.MPMATH)
        assert cap(Bm * (1 + mpmath.mpf(10) ** -6)) > cap(Bm)
        D = cap(Bm)
        assert laws.select_budget(cell, D, sigma, laws.MPMATH) == pytest.approx(Bm, rel=1e-40)


def test_select_root_falls_with_the_budget_at_a_small_score_gap():
    """The root ``r`` itself is not monotone in ``B``: ``r ~ sigma/B`` for ``B^2 >> sigma``
    (why :func:`constructions.laws.select_budget` argues on the capacity)."""
    cell = _cell()
    r = lambda b, s: laws.select_value_gap(cell, b, s, laws.MPMATH) - b
    with mpmath.workdps(40):
        assert r(mpmath.mpf(2), 1) < r(mpmath.mpf(1), 1)
        assert r(mpmath.mpf(1), 1) < r(mpmath.mpf(2), 5)  # and it rises with sigma


# ------------------------------------------------ L* of the select task (bounds.lstar)
def test_select_at_d2_pre_layernorm_stops_at_two():
    """Bare pre-LayerNorm at ``d = 2`` (two values): ``L* = 2`` with
    ``eps = 0``, not the count task's ``L*(2)``.  The docstring's read-out counts to 2 (certified
    on every select input) and not to 3; and in every parameter set (random draws) ``a`` is a
    copy of ``s``, or ``b`` of ``a`` or of ``s``, so one of the pairs ``(s, s a)``, ``(s b, s a)``,
    ``(s a a b, s a)`` has one output for two targets."""
    import numpy as np

    cell = Cell("softmax", "pre_bare", d=2, task="select")
    assert cell_l_star(cell) == 2 < l_star(2) == cell_l_star(cell.replace(task="count"))
    assert cell_l_star(cell.replace(eps=0.1)) is None  # not derived
    assert cell_l_star(cell.replace(norm="rmsnorm")) == l_star(2)  # a plane of values: built
    params = Params(cell, {"e_s": [1, -1], "e_a": [-1, 1], "e_b": [2, -2], "w": [-5, 5]}, {"w0": 20})
    assert counts_to(params, 2, backend="arb256").certified
    assert not counts_to(params, 3, backend="arb256").counts
    rng = np.random.default_rng(5)
    for _ in range(20):
        vectors = {k: rng.normal(size=2) for k in ("e_s", "e_a", "e_b", "w")}
        drawn = Params(cell, vectors, {"w0": float(rng.normal())})
        y = {seq: explicit(drawn, seq, backend="mp40") for seq in ("s", "sa", "sb", "saab")}
        tie = min(abs(y[seq] - y["sa"]) for seq in ("s", "sb", "saab"))
        assert tie < mpmath.mpf(10) ** -30
        assert not counts_to(drawn, 3, backend="mp30").counts


def test_the_bos_l_star_is_not_claimed_for_the_last_read():
    """``l_star`` is the BOS read's (query ``h_s``); at the last read the query is ``h_a`` and
    ``L*`` is :func:`bounds.lstar.last_l_star`'s, not the BOS read's."""
    last = Cell("softmax", "pre_bare", read="last")
    assert cell_l_star(last) == last_l_star(8, True) != l_star(8)
    assert cell_l_star(Cell("softmax", "pre_bare")) == l_star(8)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.sampled_from([2, 3, 8]))
def test_the_mirror_image_scores_least_among_values_read_as_s(seed, d):
    """Bare pre-norm (module docstring): on the sphere ``|h| = sqrt(d)``, every ``h_b`` with
    ``<u, h_b> = <u, h_s>`` has ``<h_s, h_b> >= d cos 2 theta`` (``cos theta = <h_s, u>/sqrt d``),
    with equality at the mirror image ``2 <h_s, u> u - h_s``."""
    import random

    rng = random.Random(seed)
    with mpmath.workdps(40):
        gauss = lambda: [mpmath.mpf(rng.gauss(0, 1)) for _ in range(d)]
        u = _unit(gauss())
        h_s = [mpmath.sqrt(d) * x for x in _unit(gauss())]
        p = _dot(h_s, u)
        least = d * mpmath.cos(2 * mpmath.acos(p / mpmath.sqrt(d)))
        mirror = [2 * p * a - b for a, b in zip(u, h_s)]
        assert abs(_dot(h_s, mirror) - least) < mpmath.mpf(10) ** -30
        for _ in range(20):
            side = _unit(_off(gauss(), u))
            h_b = [p * a + mpmath.sqrt(d - p * p) * b for a, b in zip(u, side)]
            assert abs(_dot(u, h_b) - p) < mpmath.mpf(10) ** -30
            assert _dot(h_s, h_b) >= least - mpmath.mpf(10) ** -30


@pytest.mark.parametrize("norm,affine", [("rmsnorm", "gain"), ("layernorm", "gain_bias")])
def test_pre_norm_with_a_gain_selects_at_a_price_that_vanishes(norm, affine):
    """Certified rows; B_lower is the count task's proven bound; B_min lies above the count task's
    and the relative price falls (O(sigma/B^2)); with a bias the construction leaves it 0."""
    cell = Cell("softmax", "pre_learned", norm=norm, affine=affine, task="select")
    count = cell.replace(task="count")
    prices = []
    for L in (8, 32):
        row, plain = search.regression_row(cell, L), search.regression_row(count, L)
        assert row["certified"] and row["B_lower"] <= plain["B_min"] <= row["B_min"] * (1 + 1e-6)
        assert row["B_lower"] == pytest.approx(plain["B_lower"], rel=1e-5)  # the count task's
        prices.append(row["B_min"] / plain["B_min"] - 1)
        if affine == "gain_bias":
            params = design(cell).build(L, row["B_min"])
            assert all(x == 0 for x in params.vectors["beta"])
    if affine == "gain":
        assert prices[0] > prices[1] > 0
        assert laws.leading_term(cell) == laws.leading_term(count)
    else:
        assert laws.leading_term(cell) is None


def test_readme_gain_table():
    """The README's pre-RMSNorm table: ``B_min`` is the construction's boundary (the float
    optimum of its reduced problem, which the certified sweep meets to its tolerance), the count
    task's column its closed form, the price their ratio."""
    from tests.test_readme import _table

    rows = [r for r in _table("Selective counting without post-norm") if r[0].isdigit()]
    assert len(rows) == 3
    cell = Cell("softmax", "pre_learned", norm="rmsnorm", task="select")
    for L, value, count, price in rows:
        L = int(L)
        got, want = design(cell).estimate(L), count_closed_form(cell.replace(task="count"), L)["B"]
        assert got == pytest.approx(float(value), rel=1e-5)
        assert want == pytest.approx(float(count), rel=1e-5)
        number = float(price.split("%")[0]) / 100 if "%" in price else float(price)
        assert got / want - 1 == pytest.approx(number, rel=5e-3)


@settings(max_examples=20, deadline=None)
@given(d=st.sampled_from([2, 3, 8]), B=st.floats(0.5, 300), frac=st.floats(0.01, 0.99), L=st.integers(2, 300))
def test_pre_rmsnorm_with_a_bias_takes_s_and_b_off_the_read_out(d, B, frac, L):
    """The bias -g_1 e_1 (values recomputed from the embeddings): h_s = -h_b along q, b read as
    s, <h_s, h_b - h_a> = -sigma (b weighs 1/rho of a), amplitude the capacity, norms within B;
    its leading term is the count task's."""
    cell = Cell("softmax", "pre_learned", d=d, norm="rmsnorm", affine="gain_bias", task="select")
    dz = design(cell)
    lo, hi = dz.domain(L, B)
    rho = lo * (hi / lo) ** frac
    with mpmath.workdps(40):
        A = dz.capacity_mp(mpmath.mpf(rho), mpmath.mpf(B))
        v = dz.evaluate(L, B, rho, A, 0)
        h = {x: [g * n + b for g, n, b in zip(v["g"], _norm(cell, v[f"e_{x}"]), v["beta"])] for x in "sab"}
        dot = lambda x, y: mpmath.fsum(p * q for p, q in zip(x, y))
        sig = mpmath.sqrt(d) * mpmath.log(rho)
        tol = mpmath.mpf(10) ** -28 * (1 + B**2 + d) * (1 + A)
        assert abs(dot(v["w"], h["b"]) - dot(v["w"], h["s"])) < tol
        assert abs(dot(h["s"], [p - q for p, q in zip(h["s"], h["a"])]) - sig) < tol
        assert abs(dot(h["s"], [p - q for p, q in zip(h["b"], h["a"])]) + sig) < tol
        assert abs(dot(v["w"], h["a"]) - dot(v["w"], h["s"]) - A) < tol
        for name in ("e_s", "e_a", "e_b", "w", "g", "beta"):
            assert mpmath.sqrt(dot(v[name], v[name])) <= B * (1 + mpmath.mpf(10) ** -30)
    assert laws.leading_term(cell) == laws.leading_term(cell.replace(task="count"))
