"""The select task read at the last position, softmax attention without a norm
(constructions.select_last_pair): the certifying judge at L = 1, 2 (and the failure at 3 that
the count task's L* = 2 proves for every parameter set), B_lower <= B_min, the explicit pass on
random sequences, the pairwise claim of the module docstring in sympy, the registry and the
sweep.

Expectations are derived here independently: every output recomputed from the parameters by
hand in mpmath (the model's softmax over ``tau <q, e_j>``, residual ``q + A``, read-out
``<w, r> + w0``), the target the count of ``a`` tokens; the sympy outputs from the token lists.
"""

from __future__ import annotations

import itertools
import json

import mpmath
import pytest
import sympy
from hypothesis import given, settings

from bounds import sweep as sweep_mod
from bounds.lower import b_lower, last_pair_lower
from bounds.lstar import cell_l_star, l_star_status
from bounds.search import regression_row
from constructions import registry, select_last_pair as slp
from constructions.cell import Cell
from constructions.refusals import refusal
from constructions.regression import design
from verify import counts_to, explicit
from verify.strategies import sequences, target


def _cell(d=3, **kw) -> Cell:
    return Cell("softmax", "none", "regression", d=d, task="select", read="last", **kw)


def _inputs(L: int):
    return ["s" + "".join(body) for m in range(L + 1) for body in itertools.product("ab", repeat=m)]


def _by_hand(params, seq: str):
    """The model's output at the last position of ``seq``, in mpmath (no norm: h = e)."""
    e = {x: [mpmath.mpf(t) for t in params.vectors[f"e_{x}"]] for x in "sab"}
    w = [mpmath.mpf(t) for t in params.vectors["w"]]
    dot = lambda u, v: mpmath.fsum(p * q for p, q in zip(u, v))
    tau = 1 / mpmath.sqrt(params.cell.d)
    q = e[seq[-1]]
    weights = [mpmath.exp(tau * dot(q, e[x])) for x in seq]
    total = mpmath.fsum(weights)
    A = [mpmath.fsum(wt * e[x][i] for wt, x in zip(weights, seq)) / total for i in range(len(q))]
    return dot(w, [qi + ai for qi, ai in zip(q, A)]) + params.scalars["w0"]


@pytest.mark.parametrize("d", [2, 3, 8])
def test_certified_at_L_1_and_2_within_the_budget_and_failing_at_3(d):
    cell = _cell(d)
    dz = design(cell)
    B = dz.estimate(2) * (1 + 1e-6)
    for L, budget in ((1, 1e-3), (2, B)):
        params = dz.build(L, budget)
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
        assert max(mpmath.norm(list(v)) for v in params.vectors.values()) <= budget * (1 + 1e-12)
        with mpmath.workdps(40):  # every input of the task, by hand, within 1/2 of its target
            assert all(abs(_by_hand(params, seq) - target(seq)) < 0.5 for seq in _inputs(L))
    # beyond L* = 2 (the count task's, a sub-task) the set fails, as every set does
    assert not counts_to(dz.build(2, B), 3, "arb256").counts
    assert dz.estimate(3) is None
    assert cell_l_star(cell) == 2 == cell_l_star(cell.replace(task="count"))
    assert l_star_status(cell) == ("exact", 2)


@pytest.mark.parametrize("d", [2, 3, 8])
def test_the_least_budget_is_the_count_task_s_lower_bound(d):
    """Above the proven bound of the sub-task n_b = 0 the construction solves select, below it
    nothing does (the bound) and the construction does not (its amplitude is clipped)."""
    cell = _cell(d)
    lower = last_pair_lower(cell.replace(task="count"), 2)
    dz = design(cell)
    assert counts_to(dz.build(2, lower * (1 + 1e-5)), 2, "arb256").certified
    assert not counts_to(dz.build(2, lower * (1 - 1e-5)), 2, "arb256").counts
    row = regression_row(cell, 2, closed=False)
    assert row["certified"] and row["B_lower"] <= row["B_min"] <= row["B_lower"] * (1 + 1e-5)
    assert b_lower(cell, 2, row["B_min"]) == lower


def test_random_sequences_through_the_explicit_pass():
    cell = _cell(5)
    dz = design(cell)
    params = dz.build(2, dz.estimate(2) * 1.05)

    @settings(max_examples=40, deadline=None)
    @given(sequences(cell, max_length=2))
    def check(seq):
        y = float(explicit(params, seq, "float64"))
        assert abs(y - target(seq)) < 0.5
        assert abs(y - float(_by_hand(params, seq))) < 1e-12

    check()


def _sympy_points(L: int):
    """``(target, psi)`` of every input up to ``L`` from the token lists: with ``e_b = e_s`` a
    token equal to the query weighs 1, another ``rho``; the values read ``-D/2`` (``s, b``) and
    ``D/2`` (``a``), the query's own value is added, and ``y = w0 + D psi``."""
    rho = sympy.Symbol("rho", positive=True)
    value = {"s": -sympy.Rational(1, 2), "b": -sympy.Rational(1, 2), "a": sympy.Rational(1, 2)}
    same = lambda x, y: (x == "a") == (y == "a")
    points = []
    for seq in _inputs(L):
        weights = [1 if same(x, seq[-1]) else rho for x in seq]
        mean = sum(wt * value[x] for wt, x in zip(weights, seq)) / sum(weights)
        points.append((seq.count("a"), sympy.simplify(value[seq[-1]] + mean)))
    return rho, points


def _positive(expr, rho) -> bool:
    """``expr`` is a ratio of polynomials in ``rho`` whose coefficients have one sign each, the
    same for both: positive for every ``rho > 0``."""
    num, den = sympy.fraction(sympy.together(expr))
    signs = [{sympy.sign(c) for c in sympy.Poly(sympy.expand(p), rho).coeffs()} for p in (num, den)]
    return all(len(s) == 1 for s in signs) and signs[0] == signs[1]


def test_the_distractor_leaves_the_count_task_s_lower_end_and_raises_no_upper_end_below_it():
    """The module docstring's claim at L = 2, every pair of inputs: the largest lower end is the
    count task's ``(rho+2)/(rho+4)``, and every upper end exceeds it for every ``rho > 0``."""
    rho, points = _sympy_points(2)
    d_lo = (rho + 2) / (rho + 4)
    lows, highs = [sympy.Integer(0)], []
    for (ti, pi), (tj, pj) in itertools.combinations(points, 2):
        step = sympy.simplify(pi - pj)
        if step == 0:
            assert ti == tj
            continue
        if not _positive(step, rho):
            assert _positive(-step, rho)
            ti, tj, step = tj, ti, -step
        lows.append(sympy.simplify((ti - tj - 1) / step))
        highs.append(sympy.simplify((ti - tj + 1) / step))
    assert any(sympy.simplify(lo - d_lo) == 0 for lo in lows)
    assert all(sympy.simplify(d_lo - lo) == 0 or _positive(d_lo - lo, rho) for lo in lows)
    assert all(_positive(hi - d_lo, rho) for hi in highs)
    # the module's interval is these ends at sample shapes
    for r in (sympy.Rational(1, 10), sympy.Rational(1, 2), sympy.Integer(1), sympy.Integer(3)):
        lo, hi = slp.select_interval(mpmath.mpf(r), 2)
        assert abs(lo - d_lo.subs(rho, r)) < 1e-12
        assert abs(hi - min(h.subs(rho, r) for h in highs)) < 1e-12


def test_the_cell_is_built_at_every_d_and_eps_and_classification_has_its_own_head():
    for d, eps in ((2, 0.0), (3, 0.0), (8, 0.5)):
        cell = _cell(d, eps=eps)
        assert refusal(cell) is None and slp.built(cell)
        assert registry.serving(cell).name == "SelectPairDesign"
        assert type(design(cell)) is slp.SelectPairDesign
    clf = Cell("softmax", "none", "classification", d=3, task="select", read="last")
    assert refusal(clf) is None and registry.serving(clf).name == "ContrastSelectLastHead"
    with pytest.raises(ValueError):
        slp.SelectPairDesign(_cell(3).replace(task="count"))


def test_the_sweep_reports_the_rows_and_L_star(capsys):
    argv = ["--variant", "none", "--task", "select", "--read", "last", "--Lmin", "1", "--Lmax", "4",
            "--d", "3", "--json"]
    assert sweep_mod.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["L"]: r for r in out["rows"]}
    assert out["L_star"] == 2 and out["L_star_status"] == "exact"
    assert rows[1]["certified"] and rows[1]["B_min"] == 0
    assert rows[2]["certified"] and rows[2]["B_lower"] <= rows[2]["B_min"]
    assert rows[4]["B_min"] is None and "L* = 2" in rows[4]["note"]
