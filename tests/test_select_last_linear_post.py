"""The select task read at the last position, linear attention with post-LayerNorm and
post-RMSNorm (constructions.select_last_linear_post): the certifying judge at every small L, the
token-by-token pass on random sequences, the query b against the query a and the b tokens' shifts
(from the model alone), B_lower <= B_min, the refusals of the cells left.

Expectations are derived here independently of the construction's formulas: the explicit pass
(written from the model, position by position) against the count of ``a`` tokens, and the
outputs it computes compared with each other.
"""

from __future__ import annotations

import mpmath
import pytest

from bounds import sweep as sweep_mod
from bounds.lower import b_lower, last_foot_lower, last_post_lower
from constructions import select_last_linear_post as mod
from constructions.cell import Cell
from constructions.refusals import refusal
from constructions.regression import design
from tests.helpers import counts_random_sequences, mp_norm as _norm, params_at_estimate as _params
from verify import counts_to, explicit

BUILT = [("post_bare", None), ("post_learned", "gain"), ("post_learned", "gain_bias")]
NORMS = ["layernorm", "rmsnorm"]
IDS = lambda c: c[0] + "-" + str(c[1])  # noqa: E731


def _cell(variant, affine=None, d=8, norm="layernorm", **kw) -> Cell:
    return Cell("linear", variant, "regression", d=d, affine=affine, task="select", read="last", norm=norm,
                **kw)


@pytest.mark.parametrize("case", BUILT, ids=IDS)
@pytest.mark.parametrize("norm, d, Ls", [("layernorm", 3, range(1, 9)), ("layernorm", 8, range(1, 9)),
                                         ("rmsnorm", 2, (1, 3)), ("rmsnorm", 8, (3, 8))])
def test_the_construction_is_certified_at_every_small_L(case, norm, d, Ls):
    cell = _cell(*case, d=d, norm=norm)
    kind = mod.LinearSelectLastArcDesign if norm == "layernorm" else mod.SelectFootDesign
    assert mod.built(cell) and isinstance(design(cell), kind)
    for L in Ls:
        if L == 1:  # every budget counts: the witness at a small one
            est = 1e-3
            params = design(cell).build(1, est)
        else:
            params, est = _params(cell, L)
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
        assert max(float(_norm(v)) for v in params.vectors.values()) <= est * (1 + 1e-4) * (1 + 1e-12)
        if L >= 2 and norm == "layernorm":
            # and not at a budget well below: the estimate is where the construction starts to count
            assert not counts_to(design(cell).build(L, est * (1 - 1e-2)), L, "arb256").counts


def test_certified_at_L_16():
    for norm in NORMS:
        params, _ = _params(_cell("post_bare", d=5, norm=norm), 16)
        assert counts_to(params, 16, "arb256").certified


@pytest.mark.parametrize("case", BUILT, ids=IDS)
@pytest.mark.parametrize("norm", NORMS)
def test_random_sequences_through_the_explicit_pass(case, norm):
    cell = _cell(*case, d=5, norm=norm)
    L = 16
    params, _ = _params(cell, L)
    counts_random_sequences(params, L, 20)


@pytest.mark.parametrize("norm", NORMS)
def test_the_query_b_reads_as_the_query_a_and_b_tokens_barely_move_a_point(norm):
    """From the model: the query b's output at ``(n_a, n_b)`` is the query a's at the same pair
    (up to the pass's rounding), and the b tokens move an output by at most ``2^-40`` of the step
    between two counts (``e_b = beta e_a``, ``beta^2 L < 2^-40``)."""
    cell = _cell("post_bare", norm=norm, d=5)
    L = 16
    params, _ = _params(cell, L)
    tiny = mpmath.mpf(10) ** -35
    with mpmath.workdps(60):
        y = lambda s: explicit(params, s, "mp50")  # noqa: E731
        for n in (1, 2, 7, 15):
            ya, step = y("s" + "a" * n), abs(y("s" + "a" * (n + 1)) - y("s" + "a" * n))
            for nb in sorted({1, 2, L - n}):
                query_a = y("s" + "b" * nb + "a" * n)
                query_b = y("s" + "a" * n + "b" * nb)
                assert abs(query_a - query_b) < tiny * (1 + abs(ya)), (n, nb)
                assert abs(query_a - ya) <= step * mpmath.mpf(2) ** -40 + tiny, (n, nb)


@pytest.mark.parametrize("case", BUILT, ids=IDS)
@pytest.mark.parametrize("norm", NORMS)
def test_the_lower_bound_is_the_count_task_s_below_the_certified_budget(case, norm):
    cell = _cell(*case, norm=norm)
    count_bound = last_post_lower if norm == "layernorm" else last_foot_lower
    for L in (3, 8, 16) if norm == "layernorm" else (3, 8):
        params, est = _params(cell, L)
        assert counts_to(params, L, "arb256").certified
        lo = b_lower(cell, L, est)
        assert lo == count_bound(cell.replace(task="count"), L, est)
        assert 0 < lo <= est * (1 + 1e-4)


@pytest.mark.parametrize("kw, words", [
    (dict(d=2, eps=1e-3), "d = 2"),
    (dict(eps=1e-3), "eps > 0"),
    (dict(eps=1e-3, norm="rmsnorm"), "eps > 0"),
    (dict(readout="classification", eps=1e-3), "eps > 0"),
])
def test_refusals(kw, words, capsys):
    base = dict(attention="linear", variant="post_bare", readout="regression", d=8, task="select", read="last",
                norm="layernorm")
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
