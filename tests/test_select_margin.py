"""The select task's classification margin without post-norm: the level head of
constructions.pencil and the level bound of bounds.select_margin.

The head is checked exactly (Fractions, every class at every level of every input), the bound
against independent max-min computations (linear programs over all heads of polygonal norm,
for sampled parameter sets at L <= 8) and against a float grid of its own supremum; the rows
are certified by the judge.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from bounds import search
from bounds.margin import margin_upper
from bounds.select_margin import applies, level_upper
from constructions import classification, laws, pencil
from constructions.cell import Cell


def _cell(variant="none", **kw) -> Cell:
    return Cell("softmax", variant, "classification", task="select", **kw)


def _outputs(e_s, h_s, h_a, h_b, d, L):
    """Every distinct select output ``z(n_a, n_b)`` (written out from the model) and its class."""
    tau = 1 / math.sqrt(d)
    w_s, w_a, w_b = (math.exp(tau * float(np.dot(h_s, h))) for h in (h_s, h_a, h_b))
    z, cls = [], []
    for n_a in range(L + 1):
        for n_b in range(L - n_a + 1):
            z.append(e_s + (w_s * h_s + n_a * w_a * h_a + n_b * w_b * h_b) / (w_s + n_a * w_a + n_b * w_b))
            cls.append(n_a)
    return np.array(z), cls


def _max_min(z, cls, L, sides=64, inscribed=True):
    """The max-min margin over every head whose rows lie in a regular polygon of ``sides`` sides
    inscribed in (or circumscribed about) the unit disk of the outputs' plane, free biases (a
    linear program).  Inscribed: a lower estimate of the unit-disk max-min; circumscribed: an
    upper one."""
    centre = z.mean(axis=0)
    basis = np.linalg.svd(z - centre)[2][:2]
    y = (z - centre) @ basis.T
    # every margin scales with the outputs: solved at unit size (the solver's tolerances are
    # absolute) and scaled back
    size = float(np.abs(y).max()) or 1.0
    y = y / size
    nc = L + 1
    nv = 3 * nc + 1
    rows, rhs = [], []
    for point, n in zip(y, cls):
        for c in range(nc):
            if c != n:
                row = np.zeros(nv)
                row[2 * n:2 * n + 2] -= point
                row[2 * c:2 * c + 2] += point
                row[2 * nc + n], row[2 * nc + c], row[-1] = -1, 1, 1
                rows.append(row)
                rhs.append(0.0)
    reach = math.cos(math.pi / sides) if inscribed else 1.0
    for c in range(nc):
        for angle in np.arange(sides) * 2 * math.pi / sides:
            row = np.zeros(nv)
            row[2 * c], row[2 * c + 1] = math.cos(angle), math.sin(angle)
            rows.append(row)
            rhs.append(reach)
    cost = np.zeros(nv)
    cost[-1] = -1
    bounds = [(None, None)] * nv
    bounds[2 * nc] = (0, 0)
    res = linprog(cost, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    assert res.status == 0
    return -res.fun * size


def _unit(v):
    return v / np.linalg.norm(v)


# ----------------------------------------------------------------- the level head, exactly

@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.fractions(Fraction(1, 50), 5, max_denominator=50), min_size=1, max_size=8),
       raw=st.lists(st.fractions(Fraction(1, 20), 1, max_denominator=20), min_size=9, max_size=9),
       a=st.fractions(-3, 3, max_denominator=10), delta=st.fractions(Fraction(1, 10), 4, max_denominator=10),
       levels=st.lists(st.fractions(0, 1, max_denominator=7), min_size=3, max_size=3))
def test_the_level_head_keeps_margin_m_at_every_level_against_every_class(gaps, raw, a, delta, levels):
    """Exact: with ``z - H = t ((x_n - a) e + delta f)`` and the logits ``<u_c, z - H> - c m``,
    every class ``n`` keeps the margin ``m`` against every class at every level ``t`` in
    ``[T_n, 1]`` (``T`` increasing to ``T_L = 1``), with equality against ``n + 1``."""
    x = np.array([Fraction(0)] + [sum(gaps[:i + 1]) for i in range(len(gaps))], dtype=object)
    L = len(x) - 1
    t = np.array(sorted(raw[:L]) + [Fraction(1)], dtype=object)
    m, k, j = pencil.level_head(x, t, a, delta)
    assert m == 1 / sum(1 / (t[i + 1] * gaps[i]) for i in range(L))
    assert k[0] == -1 and k[-1] == 1
    for n in range(L + 1):
        for lam in [Fraction(0), Fraction(1)] + levels:
            level = t[n] + lam * (1 - t[n])
            logit = [level * (k[c] * (x[n] - a) + j[c] * delta) - c * m for c in range(L + 1)]
            gaps_n = [logit[n] - logit[c] for c in range(L + 1) if c != n]
            assert min(gaps_n) >= m
            if n < L:
                assert logit[n] - logit[n + 1] == m


# ----------------------------------------------------------------- the bound against max-min

def _level_of(e_s, h_s, h_a, h_b, d, L):
    """The level bound ``X rho / sum_n (rho + n)(rho + n + 1 + beta (L - 1 - n))`` of one
    parameter set, summed term by term."""
    tau = 1 / math.sqrt(d)
    rho = math.exp(tau * float(np.dot(h_s, h_s - h_a)))
    beta = math.exp(tau * float(np.dot(h_s, h_b - h_a)))
    X = float(np.linalg.norm(h_a - h_s))
    return X * rho / sum((rho + n) * (rho + n + 1 + beta * (L - 1 - n)) for n in range(L))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(3, 6))
def test_no_sampled_parameter_set_beats_the_level_bound(seed, L):
    """Random unit embeddings without a norm (near the distractor-free corner ``e_a = -e_s``
    half the time): the max-min margin of every head on their outputs (linear program, polygonal
    norm just inside the disk) is at most the parameter set's own level bound, which is at most
    the proven ``margin_upper``, itself below the count task's bound."""
    rng = np.random.default_rng(seed)
    d = 8
    e_s, e_a, e_b = (_unit(rng.normal(size=d)) for _ in range(3))
    if seed % 2:
        e_a = _unit(-e_s + 0.3 * rng.normal(size=d))
    z, cls = _outputs(e_s, e_s, e_a, e_b, d, L)
    best = _max_min(z, cls, L)
    own = _level_of(e_s, e_s, e_a, e_b, d, L)
    cell = _cell(d=d)
    assert best <= own * (1 + 1e-9)
    assert own <= margin_upper(cell, L) < margin_upper(cell.replace(task="count"), L)


@pytest.mark.parametrize("variant,kw,L", [("none", {}, 6), ("pre_bare", {}, 8), ("pre_learned", {"norm": "rmsnorm"}, 6)])
def test_the_level_head_is_max_min_on_its_placement_up_to_its_norm(variant, kw, L):
    """On the head's own placement: its margin is at most the max-min of every head (a linear
    program with the polygon about the disk: an upper estimate), and the max-min with the
    polygon inside the disk is at most ``m = 1/sum 1/(T_{n+1} g_n)``, the head's margin before its
    rows are divided by their radius ``R``."""
    cell = _cell(variant, **kw)
    des = classification.design(cell)
    shape = des.best_shape(L)
    geo, fr = des.pencil.frame(shape, L)
    z, cls = _outputs(geo["e_s"], geo["_h_s"], geo["_h_a"], geo["_h_b"], cell.d, L)
    got = des.margin(shape, L)
    x, t = fr.line(L)
    m, _, _ = pencil.level_head(x, t, fr.a, fr.delta)
    assert got <= _max_min(z, cls, L, inscribed=False) * (1 + 1e-9)
    assert _max_min(z, cls, L) <= m * (1 + 1e-9)  # the level bound of this placement


@pytest.mark.parametrize("variant,kw", [("none", {}), ("none", {"d": 3}), ("pre_bare", {}),
                                        ("pre_bare", {"norm": "rmsnorm", "d": 2}),
                                        ("pre_learned", {"norm": "rmsnorm"}), ("pre_learned", {"d": 3})])
def test_the_level_bound_is_the_supremum_over_the_score_gap(variant, kw):
    """``level_upper`` is at least the float maximum of ``G`` (module docstring of
    bounds.select_margin, written out here) on a fine grid of ``rho``, and within the branch and
    bound's tolerance of it."""
    cell = _cell(variant, **kw)
    count = cell.replace(task="count")
    d = cell.d
    if laws.rigid(count):
        M = 2 * d
    else:
        H, _ = laws.value_reach(count, laws.FLOAT)
        M = 2 * H * H
    kappa = math.exp(-M / math.sqrt(d))
    rho_max = math.exp(float(laws.score_gap_max(count, 1, laws.FLOAT)) / math.sqrt(d))
    for L in (3, 16, 200):
        def G(rho):
            X = laws.value_gap(count, 1, math.sqrt(d) * math.log(rho), laws.FLOAT)
            n = np.arange(L)
            return X * rho / np.sum((rho + n) * (rho + n + 1 + kappa * rho * (L - 1 - n)))

        grid = max(G(r) for r in np.geomspace(1, rho_max, 4001))
        U = level_upper(cell, L)
        assert grid * (1 - 1e-12) <= U <= grid * (1 + 1e-4)  # the grid has float rounding


def test_the_level_bound_refuses_where_it_is_not_proven():
    assert not applies(_cell("post_bare"), 8) and not applies(_cell(), 2)
    assert not applies(_cell("pre_bare", eps=0.1), 8) and applies(_cell(eps=0.1), 8)
    with pytest.raises(ValueError):
        level_upper(_cell("post_learned"), 8)
    # post-norm keeps the count task's bound (the distractor can be cancelled there)
    assert margin_upper(_cell("post_bare"), 8) == margin_upper(_cell("post_bare").replace(task="count"), 8)


# ----------------------------------------------------------------- certified rows

@pytest.mark.parametrize("variant,kw,Ls", [("none", {}, (2, 9, 40)), ("none", {"d": 2}, (7,)),
                                           ("pre_bare", {"d": 3}, (5, 12)), ("pre_bare", {"norm": "rmsnorm", "d": 2}, (6,)),
                                           ("pre_bare", {}, (34,)), ("pre_learned", {"norm": "rmsnorm"}, (6,)),
                                           ("pre_learned", {"norm": "rmsnorm", "affine": "gain_bias"}, (5,)),
                                           ("pre_learned", {"d": 3}, (5,))])
def test_the_level_head_is_certified_on_every_select_input(variant, kw, Ls):
    """The judge certifies the head on all (L+1)(L+2)/2 inputs; its smallest margin is the
    head's m/R, at most the proven margin_upper (which sees the distractor from L = 3 on: below
    the count task's bound); every row of the head has norm at most 1."""
    cell = _cell(variant, **kw)
    des = classification.design(cell)
    for L in Ls:
        row = search.classification_row(cell, L)
        assert row["certified"], row
        assert row["margin"] == pytest.approx(des.margin(des.best_shape(L), L), rel=1e-6)
        count_bound = margin_upper(cell.replace(task="count"), L)
        assert row["margin"] <= row["margin_upper"] <= count_bound
        if L >= 3:
            assert row["margin_upper"] < count_bound
        params = des.build(L)
        assert max(mpmath.fsum(x * x for x in u) for u in params.vectors["u"]) <= 1
        assert all(mpmath.fsum(x * x for x in params.vectors[k]) <= 1
                   for k in params.vectors if k != "u")


def test_the_level_head_in_the_sweep_json(capsys):
    from bounds import sweep as sweep_mod

    argv = ["--variant", "none", "--attention", "softmax", "--task", "select", "--readout",
            "classification", "--Lmax", "8", "--json", "--jobs", "1"]
    assert sweep_mod.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"attention", "variant", "readout", "d", "eps", "rows", "fit", "L_star"} <= set(result)
    assert (result["task"], result["readout"]) == ("select", "classification")
    assert [r["L"] for r in result["rows"]] == [2, 4, 8]
    assert all(r["certified"] and 0 < r["margin"] <= r["margin_upper"] for r in result["rows"])


def _readme_rows():
    from tests.test_readme import _table

    return [r for r in _table("Selective classification without post-norm") if r[1].isdigit()]


def test_readme_classification_table_has_its_rows():
    assert len(_readme_rows()) >= 5


@pytest.mark.parametrize("row", _readme_rows(), ids=lambda r: f"{r[0]}-{r[1]}")
def test_readme_classification_table(row):
    """The README's table of select margins: each margin is the head's float margin at its shape
    (certified rows where cheap), ``margin_upper`` the proven bound, and the ratio theirs (one
    test per row, so that the rows' bounds run in parallel)."""
    text, L, select_m, upper, ratio = row
    parts = text.split(", ")
    kw = {"norm": parts[2]} if len(parts) > 2 else {}
    cell = _cell(parts[1], **kw)
    L = int(L)
    des = classification.design(cell)
    got = des.margin(des.best_shape(L), L)
    assert got == pytest.approx(float(select_m), rel=1e-3)
    bound = margin_upper(cell, L)
    assert bound == pytest.approx(float(upper), rel=1e-3) and bound / got == pytest.approx(float(ratio), rel=1e-3)
    if L <= 32:
        row = search.classification_row(cell, L)
        assert row["certified"] and row["margin"] == pytest.approx(float(select_m), rel=1e-3)
