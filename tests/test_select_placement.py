"""The direction certificate over every placement (bounds.select_placement): the select task read
at s, softmax attention without a norm.

Attacked with linear programs over every head whose rows lie in a polygon inscribed in the
unit disk (feasible heads, so lower estimates of the max-min) on placements written out from
the model: in three dimensions (against the planar reduction), at random in the unit ball and
near the corner where the level bound peaks (against the whole bound), and inside random boxes
of the charts (against each box's bound); and against the level head, which it must meet.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import select_placement
from bounds.margin import margin_upper
from bounds.select_margin import level_upper
from constructions import pencil
from constructions.cell import Cell
from tests.test_select_margin import _max_min, _outputs


def _cell(d=8, variant="none"):
    return Cell("softmax", variant, "classification", task="select", d=d)


def _max_min_of(h_s, h_a, h_b, d, L):
    z, cls = _outputs(h_s, h_s, h_a, h_b, d, L)  # no norm: e = h
    return _max_min(z, cls, L)


def _ball(rng, n, dim):
    v = rng.normal(size=(n, dim))
    return v / np.linalg.norm(v, axis=1, keepdims=True) * rng.uniform(0, 1, size=(n, 1)) ** (1 / dim)


def test_every_placement_is_planar():
    """Taking off the part ``w`` of the values orthogonal to the plane of their differences keeps
    the scores (so ``rho`` and ``beta``) and every max-min margin, and shortens every value
    (module docstring)."""
    rng = np.random.default_rng(3)
    d, L = 8, 5
    for _ in range(6):
        h_s, h_a, h_b = _ball(rng, 3, 3)
        basis = np.linalg.qr(np.column_stack([h_a - h_s, h_b - h_s]))[0]
        w = h_s - basis @ (basis.T @ h_s)
        f_s, f_a, f_b = (h - w for h in (h_s, h_a, h_b))
        assert np.allclose(basis @ (basis.T @ f_a), f_a) and np.allclose(basis @ (basis.T @ f_b), f_b)
        for old, new in ((h_s, f_s), (h_a, f_a), (h_b, f_b)):
            assert np.linalg.norm(new) <= np.linalg.norm(old) + 1e-15
        assert np.dot(f_s, f_s - f_a) == pytest.approx(np.dot(h_s, h_s - h_a), abs=1e-12)
        assert np.dot(f_s, f_b - f_a) == pytest.approx(np.dot(h_s, h_b - h_a), abs=1e-12)
        assert _max_min_of(f_s, f_a, f_b, d, L) == pytest.approx(_max_min_of(h_s, h_a, h_b, d, L),
                                                                 rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("d,L", [(8, 4), (3, 5)])
def test_no_placement_beats_the_bound(d, L):
    """At random placements in the unit ball, near the level bound's corner ``h_b = h_a = -h_s``
    and at the level head's own, every feasible head's margin is below the bound, which is
    itself below the level bound's supremum over every placement."""
    U = select_placement.placement_sup(d, L)
    cell = _cell(d)
    assert U <= level_upper(cell, L) * (1 + 1e-9)
    rng = np.random.default_rng(d * 100 + L)
    placements = [tuple(_ball(rng, 3, 3)) for _ in range(12)]
    for eps in (1e-3, 1e-2, 0.05):
        e = np.array([1.0, 0, 0])
        turn = lambda t: np.array([-math.cos(t), math.sin(t), 0.0])
        placements += [(e, turn(eps), turn(-eps)), (e, turn(eps), turn(2 * eps) * (1 - eps))]
    design = pencil.PencilDesign(cell)
    geo, frame = design.frame(design.best_shape(L), L)
    placements.append(tuple(np.asarray(geo[k], float) for k in ("_h_s", "_h_a", "_h_b")))
    best = 0.0
    for h_s, h_a, h_b in placements:
        best = max(best, _max_min_of(h_s, h_a, h_b, d, L))
    assert 0 < best <= U
    assert frame.margin(L) <= U


def _chart_point(p, signs):
    s, ra, ta, rb, tb = p
    h_a = ra * signs[0] * np.array([1 - ta * ta, 2 * ta]) / (1 + ta * ta)
    h_b = rb * signs[1] * np.array([1 - tb * tb, 2 * tb]) / (1 + tb * tb)
    return np.array([s, 0.0]), h_a, h_b


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width=st.floats(1e-3, 0.2), L=st.integers(3, 6),
       chart=st.integers(0, 3), direction=st.booleans())
def test_each_box_bound_holds_on_its_box(seed, width, L, chart, direction):
    """A box's bound (at the centre's direction, or at a random one: any is valid) is at least
    the max-min of feasible heads at points of the box with ``cr > 0`` (the others are
    mirrored), for random boxes of the charts, near the corner too."""
    rng = np.random.default_rng(seed)
    d = 8
    signs = (1.0 if chart % 2 == 0 else -1.0, 1.0 if chart < 2 else -1.0)
    centre = np.array([rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(-1, 1), rng.uniform(0, 1),
                       rng.uniform(-1, 1)])
    if seed % 3 == 0:  # the corner h_a = h_b = -h_s
        centre = np.array([1.0, 1.0, 0.0, 1.0, 0.0]) - rng.uniform(0, 0.05, 5) * np.array([1, 1, -1, 1, 1])
        signs = (-1.0, -1.0)
    span = np.array([1.0, 1.0, 2.0, 1.0, 2.0]) * width
    lo = np.clip(centre - span / 2, [0, 0, -1, 0, -1], [1, 1, 1, 1, 1])
    hi = np.clip(centre + span / 2, [0, 0, -1, 0, -1], [1, 1, 1, 1, 1])
    cols = [np.array([[signs[0]]]), np.array([[signs[1]]])]
    tau, root = select_placement.root(d)
    if direction:
        w = np.array([rng.uniform(-0.75, 0.75)])
    else:
        w = select_placement._float_best(((lo + hi) / 2)[None, :], cols, tau, L)[1]
    bound, _ = select_placement.box_bounds(lo[None, :], hi[None, :], cols, w, root, L)
    checked = 0
    for _ in range(40):
        h_s, h_a, h_b = _chart_point(lo + (hi - lo) * rng.uniform(size=5), signs)
        cr = (h_a[0] - h_s[0]) * h_b[1] - h_a[1] * (h_b[0] - h_s[0])
        if cr > 0 and checked < 5:  # a point with cr < 0 is bounded by its mirror image's box
            assert _max_min_of(h_s, h_a, h_b, d, L) <= bound[0] * (1 + 1e-9)
            checked += 1


def test_the_head_meets_the_bound_within_one_percent():
    """``d = 8``, ``L = 16``: the certified row's margin is below ``margin_upper``, which is now the
    bound over every placement and within 1% of the head (the level bound was 4% above it)."""
    from bounds import search

    cell, L = _cell(8), 16
    row = search.classification_row(cell, L)
    assert row["certified"]
    U = margin_upper(cell, L)
    assert U == select_placement.placement_upper(cell, L) < level_upper(cell, L)
    assert row["margin"] <= U <= row["margin"] * 1.01
    assert level_upper(cell, L) > row["margin"] * 1.03


def test_where_it_applies():
    assert select_placement.applies(_cell(), 3) and select_placement.applies(_cell(), select_placement.MAX_L)
    assert not select_placement.applies(_cell(), 2)
    assert not select_placement.applies(_cell(), select_placement.MAX_L + 1)
    assert not select_placement.applies(_cell(variant="pre_bare"), 8)
    with pytest.raises(ValueError):
        select_placement.placement_upper(_cell(variant="pre_bare"), 8)


def _chart_of(h_s, h_a, h_b):
    """The chart coordinates ``(s, r_a, t_a, r_b, t_b)`` and signs of a planar placement, turned
    so that ``h_s`` is on the first axis and mirrored so that ``cr > 0``."""
    basis = np.linalg.qr(np.column_stack([h_a - h_s, h_b - h_s]))[0]
    w = h_s - basis @ (basis.T @ h_s)  # the planar reduction (module docstring)
    flat = [basis.T @ (h - w) for h in (h_s, h_a, h_b)]
    first = flat[0] / np.linalg.norm(flat[0])
    turn = np.array([[first[0], first[1]], [-first[1], first[0]]])
    pts = [turn @ p for p in flat]
    if (pts[1][0] - pts[0][0]) * pts[2][1] - pts[1][1] * (pts[2][0] - pts[0][0]) < 0:
        pts = [p * np.array([1.0, -1.0]) for p in pts]
    out, signs = [float(pts[0][0])], []
    for p in pts[1:]:
        theta = math.atan2(p[1], p[0])
        sign = 1.0 if abs(theta) <= math.pi / 2 else -1.0
        half = theta / 2 if sign > 0 else (theta - math.copysign(math.pi, theta)) / 2
        out += [float(np.linalg.norm(p)), math.tan(half)]
        signs.append(sign)
    return np.array(out), tuple(signs)


@pytest.mark.parametrize("width", [3e-3, 2e-2, 8e-2])
def test_box_bounds_at_the_head(width):
    """Boxes about the level head's placement (``d = 8``, ``L = 6``), where the bound is nearly
    tight: each box's bound is at least the head's margin and every feasible head's margin at
    points of the box."""
    d, L = 8, 6
    cell = _cell(d)
    design = pencil.PencilDesign(cell)
    geo, frame = design.frame(design.best_shape(L), L)
    values = [np.asarray(geo[k], float) for k in ("_h_s", "_h_a", "_h_b")]
    point, signs = _chart_of(*values)
    assert _max_min_of(*_chart_point(point, signs), d, L) == pytest.approx(_max_min_of(*values, d, L), rel=1e-6)
    cols = [np.array([[signs[0]]]), np.array([[signs[1]]])]
    tau, root = select_placement.root(d)
    rng = np.random.default_rng(int(width * 1e4))
    for _ in range(4):
        lo = np.clip(point - width * rng.uniform(0, 1, 5), [0, 0, -1, 0, -1], [1, 1, 1, 1, 1])
        hi = np.clip(point + width * rng.uniform(0, 1, 5), [0, 0, -1, 0, -1], [1, 1, 1, 1, 1])
        w = select_placement._float_best(((lo + hi) / 2)[None, :], cols, tau, L)[1]
        bound = select_placement.box_bounds(lo[None, :], hi[None, :], cols, w, root, L)[0][0]
        assert frame.margin(L) <= bound
        for _ in range(3):
            p = lo + (hi - lo) * rng.uniform(size=5)
            assert _max_min_of(*_chart_point(p, signs), d, L) <= bound * (1 + 1e-9)
