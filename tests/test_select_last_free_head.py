"""Classification of the select task read last, linear attention without a norm
(constructions.select_last_free_head): the judge certifies the head at d = 3 and 8; its margin is
the smallest logit gap of the explicit token-by-token pass over every input and equals k/L with
k = tau^2 sigma^4 (2/3)/(sqrt(3)(2 + tau sigma^2)), evaluated here from that closed form (the
positions of the docstring: two coinciding lines of step k); it lies below the proven bound, and
random sequences are classified as their count of ``a`` tokens.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds.search import classification_row
from constructions import classification, select_last_free_head
from constructions.cell import Cell
from constructions.refusals import refusal
from tests.helpers import mp_norm, select_last_gap
from verify import explicit
from verify.strategies import sequences, target


def _cell(d: int) -> Cell:
    return Cell("linear", "none", "classification", d=d, norm="layernorm", affine=None, eps=0.0,
                task="select", read="last")


def _step(d: int) -> float:
    with mpmath.workdps(30):
        tau, sigma = 1 / mpmath.sqrt(d), 1 - mpmath.mpf(2) ** -40
        return float(tau**2 * sigma**4 * mpmath.mpf(2) / 3 / (mpmath.sqrt(3) * (2 + tau * sigma**2)))


@pytest.mark.parametrize("d", [3, 8])
@pytest.mark.parametrize("L", [1, 2, 5])
def test_the_head_is_certified_with_margin_k_over_L(d, L):
    cell = _cell(d)
    assert select_last_free_head.built(cell) and refusal(cell) is None
    row = classification_row(cell, L, witness=True)
    assert row["certified"], row.get("note")
    assert row["margin"] == pytest.approx(_step(d) / L, rel=1e-9)
    assert row["margin"] <= row["margin_upper"]
    params = row["witness"]
    assert all(mp_norm(v) <= 1 for k, v in params.vectors.items() if k != "u")
    assert all(mp_norm(r) <= 1 for r in params.vectors["u"])
    gap = select_last_gap(params, L)
    assert abs(float(gap) - row["margin"]) <= 1e-9 * row["margin"]


def test_d2_is_refused():
    cell = _cell(2)
    assert refusal(cell) is not None and not select_last_free_head.built(cell)


PARAMS = {d: classification.design(_cell(d)).build(8) for d in (3, 8)}


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_random_sequences_are_classified_as_their_count(data):
    d = data.draw(st.sampled_from(sorted(PARAMS)))
    seq = data.draw(sequences(_cell(d), max_length=8))
    logit = np.asarray(explicit(PARAMS[d], seq, "mp50"), dtype=float)
    assert int(np.argmax(logit)) == target(seq)
