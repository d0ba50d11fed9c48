"""The direction certificate of bounds.select_direction: a proven upper bound on the max-min
margin of every head on one placement of the select task read at s.

It is attacked by linear programs over all heads of polygonal norm inside the unit disk
(feasible heads, so a lower estimate of the true max-min) on random placements and random
directions, checked against the placement's level bound (written out from the model), and
against the level head, whose margin it meets on the head's own placement.
"""

from __future__ import annotations

import math

import flint
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import search
from bounds.select_direction import ARB, PREC, inverse_steps, placement_upper
from constructions import pencil
from constructions.cell import Cell
from tests.test_select_margin import _level_of, _max_min, _outputs


def _values(seed: int, d: int, rigid: bool):
    """Three random values: unit vectors without a norm, on the sphere of radius ``sqrt(d)``
    for bare pre-RMSNorm."""
    rng = np.random.default_rng(seed)
    vs = [v / np.linalg.norm(v) for v in rng.normal(size=(3, d))]
    if seed % 3 == 0:  # near the corner where the distractor weighs least
        vs[2] = -vs[0] + 0.2 * vs[2]
        vs[2] /= np.linalg.norm(vs[2])
    return [v * (math.sqrt(d) if rigid else 1.0) for v in vs]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(3, 6), rigid=st.booleans())
def test_no_head_beats_the_certificate_and_it_never_exceeds_the_level_bound(seed, L, rigid):
    """The max-min over heads with rows inside a 64-gon inscribed in the unit disk (every such
    head has ``|u_c| <= 1``) is at most the certificate, which is at most the placement's own
    level bound ``X rho / sum_n (rho + n)(rho + n + 1 + beta (L - 1 - n))``."""
    d = 4
    h_s, h_a, h_b = _values(seed, d, rigid)
    z, cls = _outputs(np.zeros(d), h_s, h_a, h_b, d, L)
    attack = _max_min(z, cls, L, sides=64, inscribed=True)
    cert = placement_upper(h_s, h_a, h_b, d, L)
    assert attack <= cert * (1 + 1e-9)
    assert cert <= _level_of(np.zeros(d), h_s, h_a, h_b, d, L) * (1 + 1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(3, 5), phi=st.floats(-1.5, 1.5))
def test_every_certified_direction_bounds_every_head(seed, L, phi):
    """(D) of the module docstring at an arbitrary direction ``phi``, in ball arithmetic, wherever
    its assumptions are certified, is at least the inscribed-polygon max-min."""
    d = 3
    h_s, h_a, h_b = _values(seed, d, rigid=seed % 2 == 0)
    with flint.ctx.workprec(PREC):
        frame = pencil.Frame(np.array([flint.arb(0)] * d, dtype=object),
                             *(np.array([flint.arb(float(x)) for x in v], dtype=object) for v in (h_s, h_a, h_b)), d, ARB)
        x, t = frame.line(L, ARB)
        steps, ok = inverse_steps(x, t, frame.a, frame.delta, flint.arb(phi))
        bound = float((1 / sum(steps, flint.arb(0))).upper()) if ok else math.inf
    z, cls = _outputs(np.zeros(d), h_s, h_a, h_b, d, L)
    assert _max_min(z, cls, L, sides=64, inscribed=True) <= bound * (1 + 1e-9)


def test_direction_zero_is_the_level_bound():
    """At ``phi = 0`` the steps are ``1/(T_{n+1} g_n)`` and (D) is the level bound of the
    placement, written out from the model."""
    d, L = 5, 9
    h_s, h_a, h_b = _values(7, d, rigid=False)
    frame = pencil.Frame(np.zeros(d), h_s, h_a, h_b, d)
    x, t = frame.line(L)
    steps, ok = inverse_steps(x, t, frame.a, frame.delta, 0.0)
    assert ok
    assert 1 / steps.sum() == pytest.approx(_level_of(np.zeros(d), h_s, h_a, h_b, d, L), rel=1e-12)


CELLS = [("none", {}, 8), ("pre_bare", {}, 3), ("pre_bare", {"norm": "rmsnorm"}, 8),
         ("pre_learned", {"norm": "rmsnorm", "affine": "gain"}, 8), ("pre_learned", {}, 8)]


@pytest.mark.parametrize("variant,kw,d", CELLS)
def test_the_certificate_meets_the_level_head_on_its_placement(variant, kw, d):
    """On the head's placement at ``L = 16`` the head's float margin (float64, so to rounding) is
    at most the certificate and the certificate exceeds it by no more than rounding: on its
    placement the level head is the max-min over every head of norm at most 1."""
    L = 16
    cell = Cell("softmax", variant, "classification", task="select", d=d, **kw)
    design = pencil.PencilDesign(cell)
    geo, frame = design.frame(design.best_shape(L), L)
    head = frame.margin(L)
    cert = placement_upper(geo["_h_s"], geo["_h_a"], geo["_h_b"], d, L)
    assert head * (1 - 1e-12) <= cert <= head * (1 + 1e-9)


def test_the_certified_row_is_below_the_certificate_of_its_placement():
    """The judge's certified margin of the sweep's row (pre-RMSNorm, ``L = 8``) is at most the
    certificate of the placement it was built on (the float placement; the built one differs by
    rounding, far below the tolerance)."""
    L, d = 8, 8
    cell = Cell("softmax", "pre_bare", "classification", task="select", d=d, norm="rmsnorm")
    row = search.classification_row(cell, L)
    design = pencil.PencilDesign(cell)
    geo, _ = design.frame(design.best_shape(L), L)
    assert row["certified"] and row["margin"] > 0
    assert row["margin"] <= placement_upper(geo["_h_s"], geo["_h_a"], geo["_h_b"], d, L) * (1 + 1e-9)


@pytest.mark.parametrize("variant,kw", [("pre_bare", {"norm": "rmsnorm"}), ("none", {})])
def test_a_direct_search_stays_below_margin_upper(variant, kw):
    """An attack on the cell's proven bound at ``L = 4``, ``d = 3``: the inscribed-polygon
    max-min of random placements at unit budget and of the head's placement (each a margin some
    head reaches) never exceeds ``margin_upper``."""
    from bounds.margin import margin_upper

    L, d = 4, 3
    cell = Cell("softmax", variant, "classification", task="select", d=d, **kw)
    design = pencil.PencilDesign(cell)
    geo, _ = design.frame(design.best_shape(L), L)
    candidates = [(geo["_h_s"], geo["_h_a"], geo["_h_b"])]
    candidates += [_values(seed, d, rigid=variant != "none") for seed in range(30)]
    upper = margin_upper(cell, L)
    for h_s, h_a, h_b in candidates:
        z, cls = _outputs(np.zeros(d), np.asarray(h_s, float), np.asarray(h_a, float), np.asarray(h_b, float), d, L)
        assert _max_min(z, cls, L, sides=64, inscribed=True) <= upper
