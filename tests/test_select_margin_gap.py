"""The select task's classification margin against an independent optimum over every parameter.

A float max-min over *all* parameters of a select cell (embeddings, gain, bias, every ``u_c``
inside the unit ball, free biases ``b_c``), written out from the model: the margin conditions
``l_n(z) - l_c(z) >= m`` as the smooth epigraph problem "maximise ``m``" (SLSQP), on the
extreme inputs of every class (read at ``s`` the outputs of class ``n`` lie on a segment from
``n_b = 0`` to ``n_b = L - n``; read last with linear attention they are affine in ``n_b`` for
each last token), every condition being affine in ``z``.  The optimum found is a parameter set
like any other: the judge certifies its margin in balls on every input, and the proven
``margin_upper`` must be at least that (if not, the bound is wrong).  The toolkit's own head
(certified by the judge) must not beat the bound either, and with a learned pre-norm it must
meet the float optimum of its family of placements (the search covers the gains whose two
coordinates have opposite signs).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from bounds.margin import margin_upper
from constructions import pencil
from constructions.cell import Cell, Params
from verify.judge import counts_to

#: every vector of the optimum is pulled this far inside the unit ball before the judge reads it
INSIDE = 1 - 2.0**-30


class _MaxMin:
    """The epigraph problem of one select cell at ``L`` (module docstring), float64."""

    def __init__(self, cell: Cell, L: int):
        self.cell, self.L, d = cell, L, cell.d
        self.blocks = 5 if cell.learned else 3
        ins = []  # (query 0 = s, 1 = a, 2 = b; n_a; n_b)
        if not cell.read.last:
            for n in range(L + 1):
                ins += [(0, n, 0)] + ([(0, n, L - n)] if n < L else [])
        else:
            ins.append((0, 0, 0))
            for n in range(1, L + 1):
                ins += [(1, n, 0)] + ([(1, n, L - n)] if n < L else [])
            for n in range(L):
                ins += [(2, n, 1)] + ([(2, n, L - n)] if L - n > 1 else [])
        self.ins = np.array(ins)
        cls = self.ins[:, 1]
        pairs = np.array([(i, c) for i, n in enumerate(cls) for c in range(L + 1) if c != n])
        self.pi, self.pc = pairs[:, 0], pairs[:, 1]
        self.pn = cls[self.pi]
        self.ng = self.blocks * d
        self.size = self.ng + (L + 1) * (d + 1) + 1

    def values(self, G):
        d = self.cell.d
        E = G[:3 * d].reshape(3, d)
        if not self.cell.normed:
            return E, E
        C = E - E.mean(axis=1, keepdims=True)
        N = math.sqrt(d) * C / np.linalg.norm(C, axis=1, keepdims=True)
        if not self.cell.learned:
            return E, N
        return E, G[3 * d:4 * d] * N + G[4 * d:5 * d]

    def outputs(self, G):
        E, V = self.values(G)
        q, n_a, n_b = self.ins.T
        score = (V[q] @ V.T) / math.sqrt(self.cell.d)
        counts = np.stack([np.ones(len(q)), n_a, n_b], axis=1)
        if self.cell.attention == "softmax":
            w = np.exp(score - score.max(axis=1, keepdims=True)) * counts
            return E[q] + (w @ V) / w.sum(axis=1, keepdims=True)
        return E[q] + (score * counts) @ V

    def split(self, x):
        d, L, o = self.cell.d, self.L, self.ng
        return x[:o], x[o:o + (L + 1) * d].reshape(L + 1, d), x[o + (L + 1) * d:-1], x[-1]

    def margins(self, x):
        G, U, B, m = self.split(x)
        Z = self.outputs(G)
        return np.einsum("kd,kd->k", U[self.pn] - U[self.pc], Z[self.pi]) + B[self.pn] - B[self.pc] - m

    def margins_jac(self, x):
        d, L = self.cell.d, self.L
        G, U, B, _ = self.split(x)
        Z = self.outputs(G)
        J = np.zeros((len(self.pi), self.size))
        du = U[self.pn] - U[self.pc]
        for j in range(self.ng):  # the geometry by central differences
            step = np.zeros_like(G)
            step[j] = 1e-7
            dz = (self.outputs(G + step) - self.outputs(G - step)) / 2e-7
            J[:, j] = np.einsum("kd,kd->k", du, dz[self.pi])
        rows = np.arange(len(self.pi))
        for k in range(d):
            J[rows, self.ng + self.pn * d + k] += Z[self.pi, k]
            J[rows, self.ng + self.pc * d + k] -= Z[self.pi, k]
        o = self.ng + (L + 1) * d
        J[rows, o + self.pn] += 1
        J[rows, o + self.pc] -= 1
        J[:, -1] = -1
        return J

    def slices(self):
        d = self.cell.d
        return [slice(i * d, (i + 1) * d) for i in range(self.blocks + self.L + 1)]

    def solve(self, seed: int, maxiter: int):
        """SLSQP from a random geometry and a head along the principal direction of the class
        means; returns the point with every vector pulled inside the unit ball."""
        L = self.L
        rng = np.random.default_rng(seed)
        G = rng.normal(size=self.ng)
        for s in self.slices()[:self.blocks]:
            G[s] *= rng.uniform(0.3, 1) / np.linalg.norm(G[s])
        Z = self.outputs(G)
        cls = self.ins[:, 1]
        mean = np.array([Z[cls == n].mean(axis=0) for n in range(L + 1)])
        v = np.linalg.svd(mean - mean.mean(axis=0))[2][0]
        k = -1 + 2 * np.argsort(np.argsort(mean @ v)) / L
        x = np.concatenate([G, (0.9 * np.outer(k, v)).ravel(), np.zeros(L + 1), [0.0]])
        x[-1] = self.margins(x).min()
        norms = lambda x: np.array([1 - x[s] @ x[s] for s in self.slices()])

        def norms_jac(x):
            J = np.zeros((len(self.slices()), self.size))
            for i, s in enumerate(self.slices()):
                J[i, s] = -2 * x[s]
            return J

        grad = np.zeros(self.size)
        grad[-1] = -1
        res = minimize(lambda x: -x[-1], x, jac=lambda x: grad, method="SLSQP",
                       constraints=[dict(type="ineq", fun=self.margins, jac=self.margins_jac),
                                    dict(type="ineq", fun=norms, jac=norms_jac)],
                       options=dict(maxiter=maxiter, ftol=1e-12))
        x = res.x.copy()
        for s in self.slices():
            x[s] *= min(1.0, INSIDE / np.linalg.norm(x[s]))
        return x

    def params(self, x) -> Params:
        d = self.cell.d
        G, U, B, _ = self.split(x)
        vec = {"e_" + t: G[i * d:(i + 1) * d] for i, t in enumerate("sab")}
        if self.cell.learned:
            vec.update(g=G[3 * d:4 * d], beta=G[4 * d:5 * d])
        return Params(self.cell, {**vec, "u": U}, {"b": list(B)})


def _cell(variant, **kw) -> Cell:
    return Cell(kw.pop("attention", "softmax"), variant, "classification", d=3, task="select", **kw)


@pytest.mark.parametrize("cell,seed", [
    (_cell("none"), 0), (_cell("pre_bare"), 0), (_cell("pre_learned"), 1),
    (_cell("pre_learned", attention="linear", read="last"), 0),
])
def test_the_certified_optimum_never_exceeds_margin_upper(cell, seed):
    """The float optimum (a parameter set with every vector of norm below 1) is certified by the
    judge in balls on every input up to ``L``; its certified margin is positive and at most the
    proven ``margin_upper``."""
    L = 3
    problem = _MaxMin(cell, L)
    params = problem.params(problem.solve(seed, maxiter=30))
    assert all(float(n) <= 1 for n in params.norms().values())
    result = counts_to(params, L, backend="arb256")
    assert result.verdict == "counts"
    assert 0 < result.min_margin <= margin_upper(cell, L)


def test_the_learned_placement_search_finds_its_families_optimum():
    """With a gain the level head's placements are ``g = cos(chi) E_1 + sin(chi) E_2`` and three
    angles on the centred plane: no Nelder-Mead from a random placement of the family (the
    gain's coordinates of either sign) beats the search's margin, and the certified row never
    exceeds ``margin_upper``."""
    from scipy.optimize import minimize as nm

    L = 4
    cell = Cell("softmax", "pre_learned", "classification", d=8, task="select", affine="gain")
    design = pencil.PencilDesign(cell)
    shape = design.best_shape(L)
    found = design.margin(shape, L)
    rng = np.random.default_rng(3)
    for _ in range(3):
        start = [rng.uniform(0, math.pi)] + list(rng.uniform(0, 2 * math.pi, 3))
        res = nm(lambda p: -design.margin(tuple(p), L), start, method="Nelder-Mead",
                 options={"maxiter": 300, "xatol": 1e-7, "fatol": 1e-12})
        assert -res.fun <= found * (1 + 1e-6)
    row = counts_to(design.build(L, 30), L, backend="arb256")
    assert row.verdict == "counts" and row.min_margin <= margin_upper(cell, L)


def test_the_chord_is_the_second_value_orthogonal_to_h_a():
    """:func:`constructions.select_last_head._chord` against brute force: on random ellipses of
    values ``K c + b`` the point ``c_b`` is a unit vector other than ``c_a`` with ``<h_b - h_a,
    h_a> = 0``, and a dense scan of the unit circle finds no third such point."""
    from constructions.select_last_head import _chord, _turn

    rng = np.random.default_rng(7)
    scan = np.linspace(0, 2 * math.pi, 20001)
    circle = np.stack([np.cos(scan), np.sin(scan)])
    for _ in range(20):
        K, b = rng.normal(size=(2, 2)), rng.normal(size=2)
        ca = circle[:, rng.integers(len(scan))]
        ha = K @ ca + b
        cb = np.array(_chord(ca, np.linalg.solve(K, _turn(ha))))
        hb = K @ cb + b
        assert abs(cb @ cb - 1) < 1e-9 and abs((hb - ha) @ ha) < 1e-9 * (1 + ha @ ha)
        f = (K @ circle + b[:, None] - ha[:, None]).T @ ha  # sign changes: the roots on the circle
        roots = circle[:, np.nonzero(np.sign(f[1:]) != np.sign(f[:-1]))[0]]
        assert all(min(np.linalg.norm(r - ca), np.linalg.norm(r - cb)) < 1e-3 for r in roots.T)


def test_the_select_last_head_uses_the_bias():
    """Read last with linear attention: with a bias the head's step ``kappa'`` (and so its margin
    ``kappa'/L``) is above the best step of the same cell without one, its certified margin at
    ``L = 3`` is at most ``margin_upper``, and ``margin_upper/margin`` is above the 1.54 no head
    of this form escapes and below 2.4 at ``L = 1024``."""
    from constructions import classification

    cells = [Cell("linear", "pre_learned", "classification", d=8, task="select", read="last",
                  affine=affine) for affine in ("gain_bias", "gain")]
    biased, plain = (classification.design(c) for c in cells)
    assert float(biased.step()) > 1.5 * float(plain.step())
    row = counts_to(biased.build(3), 3, backend="arb256")
    assert row.verdict == "counts" and row.min_margin <= margin_upper(cells[0], 3)
    assert row.min_margin == pytest.approx(float(biased.step()) / 3, rel=1e-9)
    # the ratio of the README: L/(L - 1) tau H^3/(2 kappa'), 2.35 at L = 1024
    ratio = margin_upper(cells[0], 1024) / (float(biased.step()) / 1024)
    assert 1.54 < ratio < 2.4


def test_the_query_b_lemma_against_a_scan():
    """:func:`bounds.last_margin.select_linear_upper`'s lemma: ``min_{0 <= j <= 1} |gamma h_a - j
    q^2 h_b| <= max(p^2 q, p^3)/2`` for random values (a dense scan of ``j``), and the pair step
    ``D_j`` it rests on is the difference of the written-out outputs ``z_b(n+1, 1) - z_b(n, 1 + j)``."""
    rng = np.random.default_rng(11)
    js = np.linspace(0, 1, 4001)
    d, tau = 4, 0.5
    for _ in range(200):
        h_s, h_a, h_b, e_b = rng.normal(size=(4, d)) * rng.uniform(0.1, 2, size=(4, 1))
        p, q, gamma = np.linalg.norm(h_a), np.linalg.norm(h_b), h_a @ h_b
        scan = np.linalg.norm(gamma * h_a[None] - js[:, None] * q * q * h_b[None], axis=1).min()
        assert scan <= max(p * p * q, p**3) / 2 * (1 + 1e-12)
        z = lambda n, k: e_b + tau * ((h_b @ h_s) * h_s + n * gamma * h_a + k * (h_b @ h_b) * h_b)
        j = rng.uniform()
        assert np.allclose(z(3, 1) - z(2, 1 + j), tau * (gamma * h_a - j * q * q * h_b))
