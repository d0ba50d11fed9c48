"""The RMSNorm cells and LayerNorm with a gain and no bias: the constructions attain their laws.

For every such cell (both attentions, every placement, kinds and affines, ``d`` in {2, 3, 8}
where the cell counts):

* the regression construction at a budget slightly above ``design(cell).estimate(L)`` is
  certified to count in ball arithmetic, and slightly below it does not count (mpmath screen);
* its largest vector norm is within the budget;
* at the shape it picks, the construction with the amplitude set to the law's capacity
  ``constructions.laws.capacity`` stays within the budget and its read-out, computed by an
  independent reference forward pass written here from the README's model (``N`` with or without
  centring, then ``g * N + beta``), is exactly ``C + cap f_t(n)``: the capacity is attained;
* the unit-norm classification head built on the same geometry is certified to count;
* the closed-form ranges are tight: the closed form is the float64 optimum of the reduced problem
  at its smallest ``L`` and not one below.

Linear attention with post-RMSNorm, whose foot is tied to the budget, has its own tests
(``tests/test_linear_post_rms.py``).
"""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest

from constructions import classification, laws, regression
from constructions.cell import MAX_D, Cell
from constructions.closed_forms import closed_form, formula, segment_L_min
from constructions.regression import SYMBOLIC_MAX_D
from constructions.symbols import L as L_symbol
from verify import counts_to

#: (variant, norm kind, affine) of the new cells
PARTS = [("none", "rmsnorm", None), ("pre_bare", "rmsnorm", None), ("pre_learned", "rmsnorm", "gain"),
         ("pre_learned", "rmsnorm", "gain_bias"), ("post_bare", "rmsnorm", None),
         ("post_learned", "rmsnorm", "gain"), ("post_learned", "rmsnorm", "gain_bias"),
         ("pre_learned", "layernorm", "gain"), ("post_learned", "layernorm", "gain")]


def _cells():
    out = []
    for att, (variant, kind, affine), d in itertools.product(("softmax", "linear"), PARTS, (2, 3, 8)):
        cell = Cell(att, variant, "regression", d=d, norm=kind, affine=affine)
        if laws.foot_distance(cell, 1) is None and d >= laws.smallest_d(cell):
            out.append(cell)
    return out


CELLS = _cells()
IDS = [f"{c.attention}/{c.variant}/{c.kind.name}-{c.affine.name}/d{c.d}" for c in CELLS]
COUNTS = (3, 8, 64)
#: relative step above and below the estimate of B_min
STEP = 1e-3


def _norm(cell, v, vec):
    """The cell's norm of ``v`` with its affine, by hand (README, "The model in brief")."""
    d = cell.d
    if cell.kind.centred:
        mean = mpmath.fsum(v) / d
        v = [x - mean for x in v]
    scale = mpmath.sqrt(mpmath.fsum(x * x for x in v) / d + cell.eps)
    out = [x / scale for x in v]
    if cell.affine.gain:
        out = [g * x for g, x in zip(vec["g"], out)]
    if cell.affine.bias:
        out = [x + b for x, b in zip(out, vec["beta"])]
    return out


def _reference_readout(cell, vec, w0, L):
    """``y(n)`` for ``n = 0..L``, token by token, from plain lists of mpf."""
    dot = lambda a, b: mpmath.fsum(x * y for x, y in zip(a, b))
    e = {t: list(vec[f"e_{t}"]) for t in "sa"}
    h = {t: _norm(cell, e[t], vec) if cell.pre else e[t] for t in "sa"}
    tau = 1 / mpmath.sqrt(cell.d)
    ys = []
    for n in range(L + 1):
        scores = [tau * dot(h["s"], h["s"])] + [tau * dot(h["s"], h["a"])] * n
        values = [h["s"]] + [h["a"]] * n
        if cell.attention == "softmax":
            top = max(scores)
            weights = [mpmath.exp(s - top) for s in scores]
            total = mpmath.fsum(weights)
            weights = [wt / total for wt in weights]
        else:
            weights = scores
        mixed = [mpmath.fsum(wt * v[i] for wt, v in zip(weights, values)) for i in range(cell.d)]
        r = [a + b for a, b in zip(e["s"], mixed)]
        z = _norm(cell, r, vec) if cell.post else r
        ys.append(dot(vec["w"], z) + w0)
    return ys


def _counts(cell):
    """The counts of COUNTS the cell can reach (bare pre-norm stops at L*)."""
    des = regression.design(cell)
    return [L for L in COUNTS if des.estimate(L) is not None]


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_construction_counts_above_the_estimate_and_not_below(cell):
    des = regression.design(cell)
    for L in _counts(cell):
        est = des.estimate(L)
        above = des.build(L, est * (1 + STEP))
        res = counts_to(above, L, backend="arb256")
        assert res.verdict == "counts" and res.certified, (L, res)
        assert above.bound() <= mpmath.mpf(est * (1 + STEP)) * (1 + mpmath.mpf("1e-9")), L
        below = des.build(L, est * (1 - STEP))
        assert counts_to(below, L, backend="mp30").verdict != "counts", L


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_construction_attains_the_capacity(cell):
    """At its shape, with amplitude cap(t, B), the construction costs at most B and reads out
    C + cap f_t(n) (reference forward pass)."""
    des = regression.design(cell)
    L = 8
    est = des.estimate(L)
    if est is None:
        pytest.skip("beyond L*")
    B_value = 1.5 * est
    with mpmath.workdps(40):
        t_value, _ = des.best_shape(L, B_value)
        tv = mpmath.mpf(t_value if t_value is not None else 1)
        Bv = mpmath.mpf(B_value)
        cap = laws.capacity(cell, tv, Bv, laws.MPMATH)
        out = des.evaluate(L, Bv, tv, cap, 0)
        vec = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
        for name, v in vec.items():
            assert mpmath.sqrt(mpmath.fsum(x * x for x in v)) <= Bv * (1 + mpmath.mpf("1e-30")), name
        ys = _reference_readout(cell, vec, out["w0"], L)
        f = {"segment": lambda n: n / (tv + n), "line": lambda n: n,
             "arc": lambda n: (n - mpmath.mpf(L) / 2) / mpmath.sqrt(tv**2 + (n - mpmath.mpf(L) / 2) ** 2)}
        shape = f[des.family]
        for n, y in enumerate(ys):
            want = cap * (shape(n) - shape(0))
            assert abs((y - ys[0]) - want) <= mpmath.mpf("1e-25") * (1 + abs(want)), (n, y - ys[0], want)


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_reference_forward_pass_agrees(cell):
    """The construction counts in the reference forward pass above the estimate, not below."""
    des = regression.design(cell)
    L = 8
    est = des.estimate(L)
    if est is None:
        pytest.skip("beyond L*")
    with mpmath.workdps(40):
        for factor, counts in ((1 + STEP, True), (1 - STEP, False)):
            params = des.build(L, est * factor)
            ys = _reference_readout(cell, params.vectors, params.scalars["w0"], L)
            assert (max(abs(y - n) for n, y in enumerate(ys)) < 0.5) is counts, factor


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_classification_head_counts(cell):
    L = 8
    params = classification.design(cell.replace(readout="classification")).build(L)
    assert params.bound() <= 1 + 1e-12
    res = counts_to(params, L, backend="arb256")
    assert res.verdict == "counts" and res.certified and res.min_margin > 0, res


@pytest.mark.parametrize("norm,affine,d", [("rmsnorm", None, MAX_D), ("rmsnorm", "gain", 2 * SYMBOLIC_MAX_D),
                                           ("rmsnorm", "gain_bias", 2 * SYMBOLIC_MAX_D),
                                           ("layernorm", "gain", 2 * SYMBOLIC_MAX_D)],
                         ids=["rmsnorm-bare", "rmsnorm-gain", "rmsnorm-gain_bias", "layernorm-gain"])
def test_classification_arc_head_at_large_width(norm, affine, d):
    """At a large width the arc head reads the arc's plane (bare: the kind's axes ``e_1, q``) or,
    through a gain on the first two coordinates, the plane of ``e_1, e_2``; built without
    d-long symbolic vectors; every vector has norm at most 1 and the head turns (its first and
    last vectors point apart).  The bare head is built at the largest accepted width
    ``MAX_D = 65536``; the heads with a gain, whose exact d-long vectors are built by the same
    code (:class:`~constructions.cell.Params`) and whose structure does not depend on ``d``, at
    twice ``regression.SYMBOLIC_MAX_D``, the largest width the toolkit builds d-long symbolic
    vectors for."""
    variant = "post_bare" if affine is None else "post_learned"
    cell = Cell("softmax", variant, "classification", d=d, norm=norm, affine=affine)
    params = classification.design(cell).build(4)
    assert params.bound() <= 1 + 1e-12
    u = params.vectors["u"]
    if affine is not None:
        g = params.vectors["g"]
        assert all(x == 0 for x in g[2:]) and g[0] * g[0] + g[1] * g[1] <= 1
        assert ("beta" in params.vectors) is (affine == "gain_bias")
        assert all(x == 0 for row in u for x in row[2:])
        plane = [(float(row[0]), float(row[1])) for row in u]
    else:  # v_1 e_1 + v_2 q: every coordinate beyond the first is the same
        assert all(x == row[1] for row in u for x in row[2:])
        plane = [(float(row[0]), -float(row[1]) * (cell.d - 1) ** 0.5) for row in u]
    turns = np.diff(np.unwrap([np.arctan2(b, a) for a, b in plane]))
    assert np.all(turns > 0) or np.all(turns < 0)


SEGMENT_CELLS = [c for c in CELLS if regression.family(c) == "segment" and c.pre]


@pytest.mark.parametrize("cell", SEGMENT_CELLS, ids=[f"{c.variant}/{c.kind.name}-{c.affine.name}/d{c.d}"
                                                     for c in SEGMENT_CELLS])
def test_segment_range_is_tight(cell):
    """The corner is the float64 optimum from segment_L_min on, and not one below."""
    des = regression.design(cell)
    L_min = segment_L_min(cell)
    assert formula(cell).L_min == L_min
    for L in (L_min, L_min + 1):
        est = des.estimate(L)
        assert est == pytest.approx(closed_form(cell, L)["B"], rel=1e-5), L
    below = formula(cell).main.B_min.subs(L_symbol, L_min - 1)
    assert abs(des.estimate(L_min - 1) - float(below)) > 1e-4 * des.estimate(L_min - 1)
