"""Linear attention with a gain at the last read: the head of ``z_0..z_L`` off the line
(:func:`constructions.last_read.offline_head`) on the opposed embeddings (turned towards ``one``
under LayerNorm, :func:`constructions.last_read.opposed_shape`).

* every row is certified by the judge, with every vector of norm at most 1, and its margin is at
  most the proven ``margin_upper``;
* the weighted pair bound of :func:`~constructions.last_read.offline_value` holds for random
  points against linear programming over every head, and its minimum over the weight is that
  max-min (so the head, which attains the minimum, is max-min for its points);
* for ``L <= 6`` the construction's margin is the max-min of its own outputs (linear
  programming), and an independent search over every parameter of norm at most 1 (scipy,
  objective: that linear program) finds no parameter set beating the construction by more than
  the search's own tolerance, and none whose judged head beats ``margin_upper``;
* the closed form :func:`~constructions.last_read.opposed_points` agrees with the forward pass.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from bounds.margin import margin_upper
from constructions import Cell, classification, last_read
from constructions.cell import Params
from tests.test_margin import best_head, outputs_of
from verify import counts_to

CELLS = [Cell(attention="linear", variant="pre_learned", readout="classification", d=d, norm=norm,
              affine=affine, read="last")
         for d, norm, affine in ((8, "layernorm", "gain"), (8, "layernorm", "gain_bias"),
                                 (8, "rmsnorm", "gain"), (4, "rmsnorm", "gain_bias"))]


#: eps > 0: the norm of the turned embeddings shrinks with theta (LayerNorm), the shape follows
EPS_CELLS = [CELLS[0].replace(d=2, eps=0.1), CELLS[1].replace(d=3, eps=0.1), CELLS[2].replace(eps=0.1)]


def _judged(params: Params, L: int) -> float:
    res = counts_to(params, L, "arb256")
    assert res.certified and res.min_margin > 0
    assert params.bound() <= 1
    return float(res.min_margin)


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.describe())
@pytest.mark.parametrize("L", [3, 16])  # 16: the first L of the 1% goal
def test_the_construction_is_judged_and_below_the_bound(cell, L):
    assert last_read.opposed_cell(cell)
    params = classification.design(cell).build(L)
    m = _judged(params, L)
    assert m <= margin_upper(cell, L)
    if L <= 6:  # max-min for its own outputs: inside the polygon brackets of the LP
        z = outputs_of(cell, {k: v for k, v in params.vectors.items() if k != "u"}, L)
        assert best_head(z, outer=False) * (1 - 1e-7) <= m <= best_head(z, outer=True) * (1 + 1e-9)


@pytest.mark.parametrize("cell", EPS_CELLS[:2], ids=lambda c: c.describe())
def test_with_eps_the_searched_shape_is_judged_and_below_the_bound(cell):
    params = classification.design(cell).build(4)
    assert last_read.opposed_shape(cell, 4) > 0
    assert _judged(params, 4) <= margin_upper(cell, 4)


def test_the_weighted_pair_bound_against_linear_programming():
    """Random planar points ``z_0`` off the line of equally spaced ``z_1..z_L``: every weight gives
    at least the LP's max-min; where ``z_0`` is close to the line against its distance before
    ``z_1`` (``P <= G/4``, ``G >= kappa``: the opposed embeddings' regime) the smallest is within
    the polygons' bracket of it (far off the line the pairs of 0 with ``c >= 2`` bind too and the
    bound is not met)."""
    rng = np.random.default_rng(5)
    for _ in range(8):
        L = int(rng.integers(2, 7))
        kappa = rng.uniform(0.5, 5)
        G = kappa * rng.uniform(1, 4)
        P = G * rng.uniform(0.001, 0.25)
        z = np.zeros((L + 1, 2))
        z[0] = (-G, P)
        z[1:, 0] = kappa * np.arange(L)
        A, Dn = (L - 1) / kappa, math.hypot(G, P)
        f = lambda w: last_read.offline_value(A, G, Dn, w, math.sqrt)
        inner, outer = best_head(z, outer=False), best_head(z, outer=True)
        for w in rng.uniform(0, 3 / Dn, 5).tolist() + [0.0]:
            assert f(w) >= inner * (1 - 1e-9)
        far = z.copy()
        far[0, 1] = rng.uniform(0.5, 3) * G  # far off the line: the bound still holds
        Dfar = math.hypot(G, far[0, 1])
        assert last_read.offline_value(A, G, Dfar, last_read.offline_weight(A, G, Dfar), math.sqrt) >= \
            best_head(far, outer=False) * (1 - 1e-9)
        w = last_read.offline_weight(A, G, Dn)
        assert inner * (1 - 1e-9) <= f(w) <= outer * (1 + 1e-6)


@pytest.mark.parametrize("cell", CELLS[:3] + EPS_CELLS, ids=lambda c: c.describe())
def test_the_closed_form_of_the_opposed_points(cell):
    theta = last_read.opposed_shape(cell, 9)
    assert 0 <= theta <= math.pi / 2
    with mpmath.workdps(30):
        z = last_read.last_outputs(cell, last_read.opposed_vectors(cell, theta), 3, 30)
        z = np.array([[float(c) for c in row] for row in z])
    kappa, G, Dn = last_read.opposed_points(cell, theta)
    D = z[1] - z[0]
    assert np.linalg.norm(z[2] - z[1]) == pytest.approx(kappa, rel=1e-9)
    assert D[0] == pytest.approx(G, rel=1e-9) and np.linalg.norm(D) == pytest.approx(Dn, rel=1e-9)


def _unit(v):
    return v / max(1.0, float(np.linalg.norm(v)))


@pytest.mark.parametrize("cell, L", [(CELLS[1], 3), (CELLS[3], 4)], ids=lambda c: str(c))
def test_a_search_over_every_parameter(cell, L):
    """Nelder-Mead over ``e_s, e_a, g`` (and ``beta``), each of norm at most 1, from the
    construction and from random starts, maximising the LP max-min of the outputs: its winner's
    judged head stays below ``margin_upper`` and the construction is within 2% of it."""
    from scipy import optimize

    names = [n for n in cell.vector_names() if n != "u"]
    d = cell.d
    params = classification.design(cell).build(L)
    m = _judged(params, L)
    start = np.concatenate([np.array(params.vectors[n], dtype=float) for n in names])

    def vectors(p):
        return {n: _unit(p[i * d:(i + 1) * d]) for i, n in enumerate(names)}

    def value(p):
        try:
            return -best_head(outputs_of(cell, vectors(p), L), outer=False, sides=64)
        except (ValueError, ZeroDivisionError, FloatingPointError, AssertionError):
            return 0.0

    rng = np.random.default_rng(1)
    best = min((optimize.minimize(value, x0, method="Nelder-Mead",
                                  options={"maxfev": 120, "xatol": 1e-6, "fatol": 1e-9})
                for x0 in (start, start + rng.normal(0, 0.3, start.size))), key=lambda r: r.fun)
    found = -best.fun
    assert m >= found * 0.98
    vec = {n: np.array([mpmath.mpf(float(c)) * (1 - mpmath.mpf(2) ** -30) for c in v])
           for n, v in vectors(best.x).items()}
    with mpmath.workdps(40):
        z = last_read.last_outputs(cell, vec, L, 40)
        u, b = last_read.offline_head(z)
    winner = Params(cell, {**vec, "u": u}, {"b": b})
    assert _judged(winner, L) <= margin_upper(cell, L)


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.describe())
def test_random_parameters_obey_the_lemmas_of_the_bound(cell):
    """(L2) ``|y'_perp x|^2 <= M^2 - |x|^2`` once ``|x|^2 >= M^2/2``, (L3)-(L4) ``|beta_perp| <= eps``,
    ``s >= r - 2M``, ``t <= T(r)``, and (RMSNorm, (L7)) ``|e_perp| <= _rms_turn`` of
    :func:`bounds.last_margin._offline`, on parameters of norm at most 1 drawn near the extremal
    ones (``g`` near ``e_1``, ``beta`` near ``e_1``) and at random."""
    import flint

    from bounds.last_margin import _rms_turn, _tilt
    from tests.test_last_read import _values

    rng = np.random.default_rng(11)
    d = cell.d
    M = float(cell.kind.max_coordinate(d, math.sqrt))
    b = 1.0 if cell.affine.bias else 0.0
    e1 = np.eye(d)[0]
    seen = 0
    for k in range(300):
        spread = 10.0 ** rng.uniform(-4, 0) if k % 3 else 1.0
        vec = {"g": _unit(e1 + spread * rng.normal(size=d)),
               "e_a": _unit(e1 * rng.choice([-1, 1]) + spread * rng.normal(size=d)),
               "e_s": _unit(-e1 + spread * rng.normal(size=d))}
        if cell.affine.bias:
            vec["beta"] = _unit(e1 + spread * rng.normal(size=d))
        h_s, h_a = _values(cell, vec)
        beta = vec.get("beta", np.zeros(d))
        x, yp = h_a - beta, h_s - beta
        r = float(np.linalg.norm(h_a))
        v = h_a / r
        assert np.linalg.norm(x) <= M * (1 + 1e-12) and np.linalg.norm(yp) <= M * (1 + 1e-12)
        if x @ x >= M * M / 2:
            xh = x / np.linalg.norm(x)
            assert np.linalg.norm(yp - (yp @ xh) * xh) ** 2 <= M * M - x @ x + 1e-9
        s = h_s @ v
        assert s >= r - 2 * M - 1e-9
        eps = float(_tilt(flint.arb(M), flint.arb(b), flint.arb(r * (1 - 1e-12))).upper().mid())
        assert np.linalg.norm(beta - (beta @ v) * v) <= eps + 1e-9
        q = r - b
        if q > 0 and 2 * q * q >= M * M:
            seen += 1
            T = eps * (1 + M / q) + math.sqrt(max(0.0, M * M - q * q))
            assert np.linalg.norm(h_s - s * v) <= T + 1e-9
            if not cell.kind.centred:
                e = vec["e_a"] - vec["e_s"]
                turn = float(_rms_turn(flint.arb(M), flint.arb(b), flint.arb(r * (1 - 1e-12)),
                                       flint.arb(s * (1 + 1e-12) + 1e-12)).mid())
                assert np.linalg.norm(e - (e @ v) * v) <= turn + 1e-9
    assert seen >= 50


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.describe())
def test_the_bound_sees_z0_and_meets_the_construction(cell):
    """``margin_upper`` is below the bound of the counts ``1..L`` alone (``cap/(L-1)``) and, at
    ``d = 8`` and ``L = 16``, within 1% of the judged construction."""
    if cell.d != 8:
        pytest.skip("the 1% is measured at d = 8")
    L = 16
    kappa = last_read.opposed_points(cell, 0.0)[0]
    m = _judged(classification.design(cell).build(L), L)
    U = margin_upper(cell, L)
    assert m <= U <= kappa / (L - 1) * (1 + 1e-12)
    assert U / m <= 1.01


def test_readme_ratio_table_is_what_the_sweep_certifies():
    """The ``L = 16`` column of the README's table of ``margin_ratio`` for these cells (``d = 8``);
    every entry is within the issue's 1%."""
    from bounds.search import classification_row
    from tests.test_readme import README

    section = README.split("Measured `margin_ratio` at `d = 8`", 1)[1].split("\n\n  *", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.strip().startswith("| layernorm") or line.strip().startswith("| rmsnorm")]
    assert len(rows) == 4
    for name, *ratios in rows:
        norm, affine = (p.strip() for p in name.split(","))
        assert all(1 <= float(r) <= 1.01 for r in ratios)
        cell = Cell(attention="linear", variant="pre_learned", readout="classification", norm=norm,
                    affine=affine, read="last")
        row = classification_row(cell, 16)
        assert row["certified"]
        assert row["margin_ratio"] == pytest.approx(float(ratios[0]), abs=2e-6)
