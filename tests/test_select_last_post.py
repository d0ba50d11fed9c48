"""The select task read at the last position after post-LayerNorm, softmax attention
(constructions.select_last_post): the token-by-token pass on random sequences, the certifying
judge at every small L, the b tokens as shifts along the arc, B_lower <= B_min, refusals.

Expectations are derived here independently: the explicit pass (written from the model, position
by position) against the count of ``a`` tokens, and the arc parameter of each output recomputed
in mpmath from the weights of the model (not from the construction's formulas).
"""

from __future__ import annotations

import mpmath
import pytest

from bounds.lower import b_lower, last_post_lower
from constructions import select_last_post
from constructions.cell import Cell
from constructions.refusals import refusal
from constructions.regression import design
from tests.helpers import counts_random_sequences, mp_norm as _norm, params_at_estimate as _params
from verify import counts_to, explicit

BUILT = [("post_bare", None), ("post_learned", "gain"), ("post_learned", "gain_bias")]


def _cell(variant, affine=None, d=8, **kw) -> Cell:
    return Cell("softmax", variant, "regression", d=d, affine=affine, task="select", read="last", **kw)


@pytest.mark.parametrize("case", BUILT, ids=lambda c: c[0] + "-" + str(c[1]))
@pytest.mark.parametrize("d", [3, 8])
def test_the_construction_is_certified_at_every_small_L(case, d):
    cell = _cell(*case, d=d)
    assert select_last_post.built(cell)
    for L in range(2, 9):
        params, est = _params(cell, L)
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
        assert max(float(_norm(v)) for v in params.vectors.values()) <= est * (1 + 1e-4) * (1 + 1e-12)


@pytest.mark.parametrize("case", BUILT, ids=lambda c: c[0] + "-" + str(c[1]))
def test_random_sequences_through_the_explicit_pass(case):
    cell = _cell(*case)
    L = 24
    params, _ = _params(cell, L)
    counts_random_sequences(params, L, 40)


def test_b_moves_a_point_only_along_the_arc_and_by_little():
    """Every output equals ``c + A f(p)`` on one arc, the b tokens shift ``p`` by less than the
    suppression bound: from the model, the output with ``n_b`` tokens b lies between the outputs
    of ``n_a`` and ``n_a + 1`` tokens a of the same query, and closer to the first as ``n_b``
    shrinks; the queries a and b agree where ``n_b`` is 1 (the same line, the same rate)."""
    cell = _cell("post_bare")
    L = 16
    params, est = _params(cell, L)
    eps = select_last_post.eps_bound(cell, est)
    with mpmath.workdps(50):
        y = lambda s: explicit(params, s, "mp50")
        for n in (1, 4, 9):
            base = y("s" + "a" * n)
            nxt = y("s" + "a" * (n + 1))
            for nb in (1, 3, 6):
                with_b = y("s" + "b" * nb + "a" * n)  # query a
                assert base <= with_b < base + (nxt - base) * (eps * nb * 2 + mpmath.mpf(10) ** -30)
            qb = y("s" + "a" * n + "b")  # query b with one b: p = n + eps_b
            assert base <= qb < base + (nxt - base) * (eps * 2 + mpmath.mpf(10) ** -30)


@pytest.mark.parametrize("case", BUILT, ids=lambda c: c[0] + "-" + str(c[1]))
def test_the_lower_bound_is_below_the_certified_budget(case):
    cell = _cell(*case)
    for L in (3, 8, 16):
        params, est = _params(cell, L)
        assert counts_to(params, L, "arb256").certified
        lo = b_lower(cell, L, est)
        assert lo == last_post_lower(cell.replace(task="count"), L, est)
        assert 0 < lo <= est * (1 + 1e-4)


def test_the_select_interval_is_the_bos_arc_at_eps_0():
    from constructions import arc

    for L, lam in ((4, 9.0), (9, 40.0), (16, 90.0)):
        with mpmath.workdps(30):
            lo, hi = select_last_post.select_interval(lam, L, 0)
            a_lo, a_hi = arc.interval(lam, L)
            assert abs(lo - a_lo) < mpmath.mpf(10) ** -25 and abs(hi - a_hi) < mpmath.mpf(10) ** -25
            lo2, hi2 = select_last_post.select_interval(lam, L, mpmath.mpf(10) ** -3)
            assert lo2 >= lo and hi2 <= hi and (lo2 > lo or hi2 < hi)  # the shift only narrows it


@pytest.mark.parametrize("kw, words", [
    (dict(d=2, eps=1e-3), "d = 2"),
    (dict(eps=1e-3, norm="rmsnorm"), "eps > 0"),
    (dict(attention="linear", eps=1e-3), "linear attention with post-norm and eps > 0"),
    (dict(readout="classification", d=2), "classification"),
])
def test_refusals(kw, words):
    base = dict(attention="softmax", variant="post_bare", readout="regression", d=8, task="select", read="last")
    base.update(kw)
    cell = Cell(**base)
    why = refusal(cell)
    assert why is not None and words in why
    assert not select_last_post.built(cell)
    with pytest.raises(ValueError):
        design(cell)


def test_eps_has_its_own_construction():
    """Post-LayerNorm with eps > 0: constructions.last_post_eps serves it, not this module."""
    cell = Cell("softmax", "post_bare", "regression", d=8, eps=1e-3, task="select", read="last")
    assert refusal(cell) is None and not select_last_post.built(cell)
    assert type(design(cell)).__name__ == "EpsSelectArcDesign"


def test_rmsnorm_has_its_own_construction():
    """Post-RMSNorm removes no direction: constructions.select_last_rms serves it, not this module."""
    from constructions import select_last_rms

    cell = Cell("softmax", "post_bare", "regression", d=8, norm="rmsnorm", task="select", read="last")
    assert refusal(cell) is None and not select_last_post.built(cell) and select_last_rms.built(cell)
