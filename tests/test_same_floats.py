"""The faster forms of the screens' and the arc bound's float steps give the floats of the plain
formulas they replace (so the rows, bounds and fits they lead to are unchanged)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds.arc_lower import _TRIPLES, _triple_alphas
from constructions import arc
from constructions.zoom import _linspace

FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_subnormal=True)


@settings(max_examples=200, deadline=None)
@given(FINITE, st.floats(min_value=0, max_value=1e6, allow_subnormal=True),
       st.integers(min_value=2, max_value=80))
def test_the_zoom_grid_is_numpys_linspace(a, width, points):
    b = a + width
    if not b > a:
        return
    assert _linspace(a, b, points).tobytes() == np.linspace(a, b, points).tobytes()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=1e-3, max_value=1e9), min_size=1, max_size=6),
       st.integers(min_value=1, max_value=10**6))
def test_nearest_offsets_are_the_clipped_candidates(lams, L):
    lv = np.array(lams)
    delta = 1.0 if L % 2 == 0 else 0.5
    base = np.floor(np.cbrt(lv * lv / 2) - delta)
    plain = np.stack([np.clip(delta + base + j, delta, L / 2) for j in (-1, 0, 1, 2)])
    assert arc.nearest_offsets(lv, L).tobytes() == plain.tobytes()
    assert [float(x) for x in arc.nearest_offsets(float(lv[0]), L)] == list(plain[:, 0])


def test_triple_multipliers_are_the_unit_vector_sums():
    rng = np.random.default_rng(1)
    x1, x2 = rng.normal(size=(2, 7, 4, 6))
    x1[0, 0, 0] = x2[0, 0, 0] = 0.0  # a degenerate candidate: zero multipliers
    eye = np.eye(4)[:, None, :]
    I, J, K = _TRIPLES.T
    plain = x1[..., None] * eye[I] + x2[..., None] * eye[J] - (x1 + x2)[..., None] * eye[K]
    got = _triple_alphas(x1, x2)
    assert got.shape == plain.shape and np.array_equal(got, plain)  # -0.0 == 0.0: zeros alike
    nonzero = plain != 0
    assert got[nonzero].tobytes() == plain[nonzero].tobytes()


def _plain_slack(lo, top):
    lo, top = np.asarray(lo, dtype=float), np.asarray(top, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(lo > 0, (top - lo) / np.where(lo > 0, lo, 1.0), np.where(top > 0, np.inf, -np.inf))
    return np.nan_to_num(s, nan=-np.inf, posinf=np.inf)


def test_relative_slack_is_the_nan_to_num_form():
    from constructions.regression import _relative_slack

    ends = np.array([0.0, -0.0, 5e-324, 1e-300, 1.0, -1.0, 2.0, 1e300, -1e300, np.inf, -np.inf, np.nan])
    lo, top = np.meshgrid(ends, ends)
    with np.errstate(over="ignore"):
        assert _relative_slack(lo, top).tobytes() == _plain_slack(lo, top).tobytes()
        for x, y in zip(lo.ravel(), top.ravel()):
            got, want = _relative_slack(x, y), _plain_slack(x, y)
            assert type(got) is type(want) and np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_score_cleaning_is_nan_to_num():
    from bounds.arc_lower import _nan_to_num

    x = np.array([[np.nan, -np.inf, np.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 3.5]])
    assert _nan_to_num(x).tobytes() == np.nan_to_num(x, nan=-np.inf).tobytes()


def test_null_vector_cofactors_are_the_deleted_row_determinants():
    from bounds.arc_lower import _COFACTOR_SIGNS, _OTHERS, _det3

    rng = np.random.default_rng(2)
    rows = np.concatenate([np.ones((5, 4, 1)), rng.normal(size=(5, 4, 2))], axis=2)
    plain = np.stack([(-1) ** i * _det3(np.delete(rows, i, axis=1)) for i in range(4)], 1)
    assert (_COFACTOR_SIGNS * _det3(rows[:, _OTHERS[1]])).tobytes() == plain.tobytes()
