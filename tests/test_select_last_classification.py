"""Classification of the select task read last on the regression construction's points
(constructions.select_last_points): the sweep rows of every served cell are certified at small L,
with a positive margin below the proven bound; the head's margin is the smallest logit gap of the
explicit token-by-token pass over every input; random sequences are classified as their count of
``a`` tokens; the head on class intervals (constructions.classification.collinear_head) keeps the
margin it claims against a brute force over every pair of classes.

Expectations are derived here independently: the explicit pass (written from the model, position
by position) in mpmath, and the interval margin ``1/sum 1/gap`` from random intervals.
"""

from __future__ import annotations


import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds.margin import margin_upper
from bounds.search import classification_row
from constructions import classification, select_last_points
from constructions.cell import Cell
from constructions.classification import collinear_head
from constructions.refusals import refusal
from verify import explicit
from tests.helpers import mp_norm, select_last_gap
from verify.strategies import sequences, target

#: (variant, norm, affine, d, eps): one cell of every regression construction the head reads
CASES = [("pre_bare", "layernorm", None, 3, 0.0), ("pre_bare", "rmsnorm", None, 8, 0.0),
         ("pre_bare", "layernorm", None, 8, 0.01), ("post_bare", "layernorm", None, 8, 0.0),
         ("post_learned", "layernorm", "gain_bias", 3, 0.0), ("post_learned", "rmsnorm", "gain", 3, 0.0)]


def _cell(variant, norm, affine, d, eps, attention="linear") -> Cell:
    return Cell(attention, variant, "classification", d=d, norm=norm, affine=affine, eps=eps,
                task="select", read="last")


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_sweep_rows_are_certified_below_the_bound(case):
    cell = _cell(*case)
    assert select_last_points.built(cell) and refusal(cell) is None
    # post-RMSNorm: its regression construction's plan costs seconds per L (its shape search)
    for L in (1, 2) if case[0].startswith("post") and case[1] == "rmsnorm" else (1, 2, 3):
        row = classification_row(cell, L, witness=True)
        assert row["certified"], (L, row.get("note"))
        assert row["margin"] > 0
        assert row["margin_upper"] is not None and row["margin"] <= row["margin_upper"]
        params = row["witness"]
        # every trainable vector (each row of the head) within the unit ball
        assert all(mp_norm(v) <= 1 for k, v in params.vectors.items() if k != "u")
        assert all(mp_norm(r) <= 1 for r in params.vectors["u"])
        # the explicit pass on every input: the argmax is the count, and the smallest logit gap
        # is the judge's margin
        gap = select_last_gap(params, L)
        assert gap > 0
        assert abs(float(gap) - row["margin"]) <= 1e-9 * row["margin"]


PARAMS = {case: classification.design(_cell(*case)).build(6) for case in (CASES[1], CASES[3])}


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_sequences_are_classified_as_their_count(data):
    case = data.draw(st.sampled_from(sorted(PARAMS)))
    seq = data.draw(sequences(_cell(*case), max_length=6))
    logit = np.asarray(explicit(PARAMS[case], seq, "mp50"), dtype=float)
    assert int(np.argmax(logit)) == target(seq)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0.0, 1.0)), min_size=2, max_size=7))
def test_the_interval_head_keeps_its_margin(steps):
    # classes c = 0..L on a line: [lo_c, hi_c] with the gap g_c before lo_{c+1}
    lo, hi, x = [], [], 0.0
    for gap, width in steps:
        lo.append(x)
        hi.append(x + width)
        x += width + gap
    gaps = [lo[c + 1] - hi[c] for c in range(len(lo) - 1)]
    want = 1 / sum(1 / g for g in gaps)
    with mpmath.workdps(40):
        direction = np.array([mpmath.mpf(1), mpmath.mpf(0)], dtype=object)
        u, b = collinear_head([mpmath.mpf(v) for v in lo], direction, upper=[mpmath.mpf(v) for v in hi])
        assert all(abs(r[0]) <= 1 for r in u)
        worst = mpmath.inf
        for c in range(len(lo)):  # both ends and the middle of every class, against every class
            for p in (lo[c], hi[c], (lo[c] + hi[c]) / 2):
                logit = [r[0] * mpmath.mpf(p) + bc for r, bc in zip(u, b)]
                worst = min(worst, logit[c] - max(v for j, v in enumerate(logit) if j != c))
    assert float(worst) == pytest.approx(want, rel=1e-12)


def test_the_bound_is_the_count_sub_tasks():
    for case in CASES[:4]:
        cell = _cell(*case)
        count = margin_upper(cell.replace(task="count"), 3)
        # the count task's bound (a sub-task), or before post-norm the smaller bound of the
        # inputs read at a last b (bounds.last_margin.select_linear_upper)
        assert margin_upper(cell, 3) <= count
        if cell.post:
            assert margin_upper(cell, 3) == count


@pytest.mark.parametrize("kw", [dict(variant="pre_learned", norm="layernorm", affine="gain", eps=0.01),
                                dict(attention="softmax", variant="post_bare", norm="layernorm", affine=None,
                                     eps=0.01)])
def test_the_cells_without_a_head_are_refused(kw):
    cell = _cell(**{"d": 8, "eps": 0.0, **kw})
    assert refusal(cell) is not None
    assert not select_last_points.built(cell)
    with pytest.raises(ValueError):
        classification.design(cell)


def test_after_post_layernorm_the_arc_head_is_near_the_bound():
    # README: after post-LayerNorm the shaped symmetric arc with its greedy head keeps within
    # 10% of the proven bound at L = 32 (d = 8, bare)
    cell = _cell("post_bare", "layernorm", None, 8, 0.0)
    row = classification_row(cell, 32)
    assert row["certified"]
    assert 1 <= row["margin_ratio"] < 1.1


README_ROWS = {"pre_bare, LayerNorm": ("pre_bare", "layernorm", None),
               "pre_bare, RMSNorm": ("pre_bare", "rmsnorm", None),
               "post_bare, LayerNorm": ("post_bare", "layernorm", None),
               "post_learned, LayerNorm, gain": ("post_learned", "layernorm", "gain")}


def test_readme_table_at_64():
    # the README's table of the select task read last on the regression points: the margin and
    # the ratio at L = 64 (d = 8) to the digits printed
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text[text.index("* **The select task read last on the regression points"):]
    for name, (variant, norm, affine) in README_ROWS.items():
        line = next(l for l in section.splitlines() if l.strip().startswith(f"| {name} |"))
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        row = classification_row(_cell(variant, norm, affine, 8, 0.0), 64)
        assert row["certified"]
        assert row["margin"] == pytest.approx(float(parts[1]), rel=5e-6)
        assert row["margin_ratio"] == pytest.approx(float(parts[2]), rel=5e-4)
