"""Classification of the select task read last, linear attention with a learned pre-norm
(constructions.select_last_head): the judge certifies the head at every small L, its margin is
below the proven bound, random sequences through the explicit pass are classified as their
count of ``a`` tokens, and the other cells of the task stay refused.

Expectations are derived here independently: the explicit token-by-token pass (written from the
model, position by position) in float64 and in mpmath at 60 digits, its logits' smallest gap over
every input, and the margin's ``1/L`` law of the head's equally spaced positions.
"""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings

from bounds.margin import margin_upper
from constructions import classification, select_last_head
from constructions.cell import Cell
from constructions.refusals import refusal
from verify import counts_to, explicit
from tests.helpers import mp_norm, select_last_gap
from verify.strategies import sequences, target

CASES = [("layernorm", "gain", 3), ("layernorm", "gain_bias", 8), ("rmsnorm", "gain", 2),
         ("rmsnorm", "gain_bias", 8)]


def _cell(norm, affine, d, variant="pre_learned", attention="linear", eps=0.0) -> Cell:
    return Cell(attention, variant, "classification", d=d, norm=norm, affine=affine, eps=eps,
                task="select", read="last")


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_the_head_is_certified_and_below_the_bound(case):
    cell = _cell(*case)
    head = classification.design(cell)
    assert isinstance(head, select_last_head.SelectLastHead)
    margins = {}
    for L in range(1, 7):
        params = head.build(L)
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
        # every trainable vector (each row of the head) within the unit ball
        assert all(mp_norm(v) <= 1 for k, v in params.vectors.items() if k != "u")
        assert all(mp_norm(row) <= 1 for row in params.vectors["u"])
        upper = margin_upper(cell, L)
        assert upper is not None and res.min_margin <= upper
        # the explicit pass (mpmath, 60 digits) on every input: the argmax is the count, and
        # the smallest logit gap is the judge's margin
        gap = select_last_gap(params, L)
        assert gap > 0
        assert abs(float(gap) - res.min_margin) <= 1e-9 * res.min_margin
        margins[L] = res.min_margin
    # the positions x_0..x_L are equally spaced by kappa' = tau |h_a|^2 <w, h_a>, so the margin
    # is kappa'/L
    for L, m in margins.items():
        assert m * L == pytest.approx(float(head.step()), rel=1e-9)


def test_the_head_never_reads_the_distractor():
    cell = _cell("layernorm", "gain", 8)
    params = classification.design(cell).build(4)
    for q in "ab":
        base = np.array(explicit(params, "s" + ("a" if q == "a" else "ab"), "mp60"), dtype=float)
        for k in range(1, 3):
            more = "s" + "b" * k + ("a" if q == "a" else "ab")
            assert np.allclose(np.array(explicit(params, more, "mp60"), dtype=float), base,
                               rtol=0, atol=1e-30)


PARAMS = {case: classification.design(_cell(*case)).build(8) for case in CASES[1:2] + CASES[3:]}


@settings(max_examples=60, deadline=None)
@given(sequences(_cell("layernorm", "gain_bias", 8), max_length=8))
def test_random_sequences_are_classified_as_their_count_layernorm(seq):
    logit = np.asarray(explicit(PARAMS[CASES[1]], seq, "float64"), dtype=float)
    assert int(np.argmax(logit)) == target(seq)


@settings(max_examples=60, deadline=None)
@given(sequences(_cell("rmsnorm", "gain_bias", 8), max_length=8))
def test_random_sequences_are_classified_as_their_count_rmsnorm(seq):
    logit = np.asarray(explicit(PARAMS[CASES[3]], seq, "float64"), dtype=float)
    assert int(np.argmax(logit)) == target(seq)


def test_the_bound_is_the_smaller_of_the_count_sub_tasks_and_the_query_b_bound():
    from bounds.last_margin import select_linear_upper

    for case in CASES:
        cell = _cell(*case)
        assert margin_upper(cell, 1) == margin_upper(cell.replace(task="count"), 1)
        for L in (2, 5):
            count, query_b = margin_upper(cell.replace(task="count"), L), select_linear_upper(cell, L)
            assert margin_upper(cell, L) == min(count, query_b) and query_b < count


@pytest.mark.parametrize("kw", [dict(variant="none"), dict(variant="pre_bare"),
                                dict(variant="post_learned"), dict(eps=0.01),
                                dict(attention="softmax")])
def test_the_other_cells_are_not_this_head(kw):
    cell = _cell(kw.pop("norm", "layernorm"), "gain" if "learned" in kw.get("variant", "pre_learned")
                 else None, 8, **kw)
    assert not select_last_head.built(cell)
    if kw.get("variant") in ("none", "pre_bare", "post_learned") or kw.get("attention") == "softmax":
        # constructions.select_last_free_head, constructions.select_last_points; softmax:
        # constructions.select_last_cancel_head
        assert refusal(cell) is None
        assert not isinstance(classification.design(cell), select_last_head.SelectLastHead)
        return
    assert refusal(cell) is not None
    with pytest.raises(ValueError):
        classification.design(cell)
