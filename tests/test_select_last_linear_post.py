"""The select task read at the last position, linear attention with post-LayerNorm
(constructions.select_last_linear_post): the certifying judge at every small L, the
token-by-token pass on random sequences, where the b tokens and the query b put the outputs
(from the model alone), B_lower <= B_min, the refusals of the cells left.

Expectations are derived here independently of the construction's formulas: the explicit pass
(written from the model, position by position) against the count of ``a`` tokens, and the
ordering of outputs it computes.
"""

from __future__ import annotations

import mpmath
import pytest
from hypothesis import given, settings

from bounds import sweep as sweep_mod
from bounds.lower import b_lower, last_post_lower
from constructions import select_last_linear_post as mod
from constructions.cell import Cell
from constructions.refusals import refusal
from constructions.regression import design
from verify import counts_to, explicit
from verify.strategies import sequences, target

BUILT = [("post_bare", None), ("post_learned", "gain"), ("post_learned", "gain_bias")]


def _cell(variant, affine=None, d=8, **kw) -> Cell:
    return Cell("linear", variant, "regression", d=d, affine=affine, task="select", read="last", **kw)


def _params(cell: Cell, L: int, factor=1 + 1e-4):
    dz = design(cell)
    est = dz.estimate(L)
    return dz.build(L, est * factor), est


def _norm(v):
    return mpmath.sqrt(sum(x * x for x in v))


@pytest.mark.parametrize("case", BUILT, ids=lambda c: c[0] + "-" + str(c[1]))
@pytest.mark.parametrize("d", [3, 8])
def test_the_construction_is_certified_at_every_small_L(case, d):
    cell = _cell(*case, d=d)
    assert mod.built(cell) and isinstance(design(cell), mod.LinearSelectLastArcDesign)
    for L in range(2, 9):
        params, est = _params(cell, L)
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
        assert max(float(_norm(v)) for v in params.vectors.values()) <= est * (1 + 1e-4) * (1 + 1e-12)
        # and not at a budget well below it: the estimate is where the construction starts to count
        below = design(cell).build(L, est * (1 - 1e-2))
        assert not counts_to(below, L, "arb256").counts


def test_certified_at_L_16():
    cell = _cell("post_bare", d=4)
    params, _ = _params(cell, 16)
    assert counts_to(params, 16, "arb256").certified


@pytest.mark.parametrize("case", BUILT, ids=lambda c: c[0] + "-" + str(c[1]))
def test_random_sequences_through_the_explicit_pass(case):
    cell = _cell(*case, d=5)
    L = 16
    params, _ = _params(cell, L)

    @settings(max_examples=40, deadline=None)
    @given(sequences(cell, max_length=L))
    def check(seq):
        assert abs(float(explicit(params, seq, "mp50")) - target(seq)) < 0.5

    check()


def test_where_the_b_tokens_and_the_query_b_put_the_outputs():
    """From the model: at query a the b tokens change no output (up to the pass's rounding); at
    query b neither do they, and the output of ``n`` tokens a lies strictly between the query-a
    outputs of ``n - 1`` and ``n`` (query b runs on the same arc, behind query a by less than one
    count); query b with no a is the input ``(s)``."""
    cell = _cell("post_bare")
    L = 12
    params, _ = _params(cell, L)
    tiny = mpmath.mpf(10) ** -35
    with mpmath.workdps(60):
        y = lambda s: explicit(params, s, "mp50")
        y_s = y("s")
        assert abs(y("sb") - y_s) < tiny and abs(y("sbbb") - y_s) < tiny
        prev = y_s
        for n in range(1, L):
            ya = y("s" + "a" * n)
            for nb in (1, 2, 5):
                if n + nb <= L:
                    assert abs(y("s" + "b" * nb + "a" * n) - ya) < tiny  # query a
                    assert abs(y("s" + "a" * n + "b" * nb) - y("s" + "a" * n + "b")) < tiny  # query b
            yb = y("s" + "a" * n + "b")
            assert prev < yb < ya, n
            prev = ya


def test_query_b_runs_slower_than_query_a_by_the_stated_rate():
    """``sigma < 1`` and its closed form against the embeddings: ``sigma = eta alpha/(nu beta)``
    read off the built vectors (their parts along ``one`` and the centred ``top`` parts)."""
    cell = _cell("post_bare", d=6)
    L = 10
    dz = design(cell)
    B = dz.estimate(L) * (1 + 1e-3)
    with mpmath.workdps(50):
        lam, A, c, u = dz._point(L, mpmath.mpf(B))
        assert u is not None
        sigma = mod.query_b_rate(cell, L, B, lam, c, u)
        assert 0 < 1 - sigma < u
        p = dz.build(L, B).vectors
        d = cell.d
        mean = lambda v: sum(v) / d
        one_part = lambda v: mean(v) * mpmath.sqrt(d)  # <v, one>, one = (1..1)/sqrt(d)
        centred = lambda v: [x - mean(v) for x in v]
        ca, cs = centred(p["e_a"]), centred(p["e_s"])
        assert max(abs(x) for x in centred(p["e_b"])) < mpmath.mpf(10) ** -40  # e_b along one
        # the top part of c_s is <c_s, top> = -beta (c + u), with top = c_a/|c_a|
        top_a = _norm(ca)
        top_s = -sum(x * y for x, y in zip(cs, ca)) / top_a / (c + u)
        rate = one_part(p["e_a"]) * top_a / (one_part(p["e_s"]) * top_s)
        assert abs(rate - sigma) < mpmath.mpf(10) ** -30


@pytest.mark.parametrize("case", BUILT, ids=lambda c: c[0] + "-" + str(c[1]))
def test_the_lower_bound_is_below_the_certified_budget(case):
    cell = _cell(*case)
    for L in (3, 8, 16):
        params, est = _params(cell, L)
        assert counts_to(params, L, "arb256").certified
        lo = b_lower(cell, L, est)
        assert lo == last_post_lower(cell.replace(task="count"), L, est)
        assert 0 < lo <= est * (1 + 1e-4)


@pytest.mark.parametrize("kw, words", [
    (dict(norm="rmsnorm"), "post-RMSNorm"),
    (dict(d=2), "d = 2"),
    (dict(eps=1e-3), "eps > 0"),
    (dict(readout="classification"), "classification"),
])
def test_refusals(kw, words, capsys):
    base = dict(attention="linear", variant="post_bare", readout="regression", d=8, task="select", read="last")
    base.update(kw)
    cell = Cell(**base)
    why = refusal(cell)
    assert why is not None and words in why
    assert not mod.built(cell)
    with pytest.raises(ValueError):
        design(cell)
    argv = ["--variant", "post_bare", "--attention", "linear", "--readout", cell.readout, "--task", "select",
            "--read", "last", "--Lmax", "4", "--d", str(cell.d), "--eps", str(cell.eps), "--norm", cell.kind.name]
    assert sweep_mod.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and words in err
