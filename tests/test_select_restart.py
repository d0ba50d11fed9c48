"""The placement search of the select task's level head without a norm reaches a local optimum of
its family: no fresh local search from the placement found improves the margin (a single
Nelder-Mead run stalls where ``e_a`` is next to the line of ``e_s``, the side angle of ``e_b``
nearly idle), and the certified row stays below the proven bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from bounds import search
from bounds.margin import margin_upper
from constructions import pencil
from constructions.cell import Cell


def _cell(d: int) -> Cell:
    return Cell("softmax", "none", "classification", d=d, task="select")


def _outputs(e_s, e_a, e_b, d, L):
    """Every select output ``z(n_a, n_b)`` without a norm, written out from the model."""
    w = [math.exp(float(np.dot(e_s, e)) / math.sqrt(d)) for e in (e_s, e_a, e_b)]
    z, cls = [], []
    for n_a in range(L + 1):
        for n_b in range(L - n_a + 1):
            tot = w[0] + n_a * w[1] + n_b * w[2]
            z.append(e_s + (w[0] * e_s + n_a * w[1] * e_a + n_b * w[2] * e_b) / tot)
            cls.append(n_a)
    return np.array(z), np.array(cls)


@pytest.mark.parametrize("d,L", [(8, 32), (3, 16)])
def test_no_fresh_search_improves_the_placement(d, L):
    """Nelder-Mead restarted (a fresh simplex) from the placement found, and from it perturbed,
    never raises the level head's float margin by more than 1e-9 of itself."""
    design = pencil.PencilDesign(_cell(d))
    shape = design.best_shape(L)
    found = design.margin(shape, L)
    rng = np.random.default_rng(0)
    for start in (np.array(shape), np.array(shape) + rng.normal(scale=0.05, size=len(shape))):
        res = minimize(lambda p: -design.margin(tuple(p), L) / found, start, method="Nelder-Mead",
                       options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 1500})
        assert -res.fun <= 1 + 1e-9


def test_the_certified_row_is_the_head_on_its_outputs_and_below_the_bound():
    """At ``L = 32``, ``d = 8``: the row is certified, its margin is the level head's float margin
    at the placement, and recomputing the head's logits on every output written out from the
    model gives the same margin; ``margin_upper`` is above it."""
    cell, L = _cell(8), 32
    design = pencil.PencilDesign(cell)
    row = search.classification_row(cell, L)
    assert row["certified"]
    assert row["margin"] == pytest.approx(design.margin(design.best_shape(L), L), rel=1e-6)
    params = design.build(L, 30)
    vec = params.vectors
    e_s, e_a, e_b = (np.array([float(x) for x in vec["e_" + t]]) for t in "sab")
    z, cls = _outputs(e_s, e_a, e_b, 8, L)
    U = np.array([[float(x) for x in r] for r in vec["u"]])
    b = np.array([float(x) for x in params.scalars["b"]])
    logits = z @ U.T + b
    own = logits[np.arange(len(cls)), cls]
    logits[np.arange(len(cls)), cls] = -np.inf
    assert np.min(own - logits.max(axis=1)) == pytest.approx(row["margin"], rel=1e-6)
    assert row["margin"] <= margin_upper(cell, L)
