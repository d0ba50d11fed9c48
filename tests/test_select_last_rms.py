"""The select task read at the last position after post-RMSNorm, softmax attention
(constructions.select_last_rms): the certifying judge at every pair for small L, the token-by-token
pass on random sequences, every output on one line with the query b at rate 1, B_lower <= B_min,
the registry and the refusals.

Expectations are derived here independently of the construction's formulas: the explicit pass
(written from the model, position by position) against the count of ``a`` tokens, and the line
parameter of each output recomputed in mpmath from the model's weights and residuals.
"""

from __future__ import annotations

import mpmath
import pytest

from bounds.lower import b_lower, last_post_lower
from constructions import select_last_rms
from constructions.cell import Cell
from constructions.refusals import refusal
from constructions.regression import design
from tests.helpers import counts_random_sequences, mp_norm as _norm
from verify import counts_to

BUILT = [("post_bare", None), ("post_learned", "gain"), ("post_learned", "gain_bias")]


def _cell(variant, affine=None, d=8, readout="regression", **kw) -> Cell:
    return Cell("softmax", variant, readout, d=d, affine=affine, norm="rmsnorm", task="select",
                read="last", **kw)


def _params(cell: Cell, L: int, factor=1 + 1e-6):
    dz = design(cell)
    est = dz.estimate(L)
    return dz.build(L, est * factor), est


@pytest.mark.parametrize("case, d, Ls", [
    (BUILT[0], 8, (1, 3, 10)),
    (BUILT[0], 2, (5,)),
    (BUILT[1], 8, (3, 10)),
    (BUILT[2], 8, (3,)),
], ids=lambda c: str(c))
def test_the_construction_is_certified_at_every_pair(case, d, Ls):
    cell = _cell(*case, d=d)
    assert select_last_rms.built(cell)
    for L in Ls:
        params, est = _params(cell, L)
        res = counts_to(params, L, "arb256")  # every (n_a, n_b) with n_a + n_b <= L, both queries
        assert res.certified, (L, res.first_failure)
        assert max(float(_norm(v)) for v in params.vectors.values()) <= est * (1 + 1e-6) * (1 + 1e-12)


@pytest.mark.parametrize("case", BUILT[:2], ids=lambda c: c[0] + "-" + str(c[1]))
def test_random_sequences_through_the_explicit_pass(case):
    cell = _cell(*case)
    L = 10
    params, _ = _params(cell, L)
    counts_random_sequences(params, L, 30)


def _line_parameter(params, counts):
    """``(p, off)``: the residual of the forward pass at ``(n_a, n_b, q)`` written as ``l0 + p
    step`` plus a remainder ``off`` off that line, where ``l0`` and ``step`` are read off the model
    (the residuals of ``(s, a)`` and ``(s, a, a)`` with their softmax denominators multiplied back:
    computed here from the weights, not from the construction)."""
    v = params.vectors
    tau = 1 / mpmath.sqrt(params.cell.d)
    e = {"s": v["e_s"], "a": v["e_a"], "b": v["e_b"]}
    dot = lambda x, y: mpmath.fsum(p * q for p, q in zip(x, y))

    def scaled(n_a, n_b, q):
        # Z r / w_qs: the query's own embedding plus the attention sum, weights over w_qs
        w = {x: mpmath.exp(tau * (dot(e[q], e[x]) - dot(e[q], e["s"]))) for x in "sab"}
        z = 1 + n_a * w["a"] + n_b * w["b"]
        return [z * eq + es + n_a * w["a"] * ea + n_b * w["b"] * eb
                for eq, es, ea, eb in zip(e[q], e["s"], e["a"], e["b"])]

    l1, l2 = scaled(1, 0, "a"), scaled(2, 0, "a")
    step = [y - x for x, y in zip(l1, l2)]
    l0 = [x - y for x, y in zip(l1, step)]
    out = []
    for n_a, n_b, q in counts:
        r = scaled(n_a, n_b, q)
        # r is a positive multiple of l0 + p step: solve in the plane by least squares
        g = [[dot(l0, l0), dot(l0, step)], [dot(step, l0), dot(step, step)]]
        h = [dot(l0, r), dot(step, r)]
        det = g[0][0] * g[1][1] - g[0][1] * g[1][0]
        x = (h[0] * g[1][1] - h[1] * g[0][1]) / det
        y = (g[0][0] * h[1] - g[1][0] * h[0]) / det
        off = _norm([ri - x * a - y * b for ri, a, b in zip(r, l0, step)]) / _norm(r)
        out.append((y / x, off, x))
    return out


def test_every_output_is_on_one_line_and_the_query_b_runs_at_rate_1():
    """From the model's weights: every residual is a positive multiple of a point of the count
    line; with the query b one more a moves the point by exactly one step (rate 1), the b tokens
    move either query forwards, and never as far as the points of the next count."""
    cell = _cell("post_bare")
    L = 10
    params, _ = _params(cell, L)
    with mpmath.workdps(60):
        pts = _line_parameter(params, [(n, 0, "a") for n in range(1, 5)]
                              + [(n, m, "b") for n in range(5) for m in (1, 2, L - n)]
                              + [(n, L - n, "a") for n in range(1, 4)])
        for p, off, scale in pts:
            assert off < mpmath.mpf(10) ** -40 and scale > 0
        a = {n: pts[n - 1][0] for n in range(1, 5)}
        assert all(abs(a[n] - n) < mpmath.mpf(10) ** -40 for n in a)
        qb = {(n, m): pts[4 + 3 * n + i][0] for n in range(5) for i, m in enumerate((1, 2, L - n))}
        for n in range(3):
            for m in (1, 2):
                # rate 1: one more a moves the query-b point by one step
                assert abs(qb[(n + 1, m)] - qb[(n, m)] - 1) < mpmath.mpf(10) ** -40
            assert qb[(n, 1)] < qb[(n, 2)] < qb[(n, L - n)] < min(qb[(n + 1, 1)], a[n + 1])
        for k, n in enumerate(range(1, 4)):
            assert a[n] < pts[19 + k][0] < min(a[n + 1], qb[(n + 1, 1)])


@pytest.mark.parametrize("case", BUILT[:2], ids=lambda c: c[0] + "-" + str(c[1]))
def test_the_lower_bound_is_below_the_certified_budget(case):
    cell = _cell(*case)
    for L in (3, 10):
        params, est = _params(cell, L)
        assert counts_to(params, L, "arb256").certified
        lo = b_lower(cell, L, est)
        assert lo == last_post_lower(cell.replace(task="count"), L, est)
        assert 0 < lo <= est * (1 + 1e-6)


def test_registry_and_refusals():
    for variant, affine in BUILT:
        for d in (2, 8):
            cell = _cell(variant, affine, d=d)
            assert refusal(cell) is None and select_last_rms.built(cell)
    for kw, words in ((dict(eps=1e-3), "eps > 0"), (dict(readout="classification", eps=1e-3), "classification")):
        cell = _cell("post_bare", **kw)
        why = refusal(cell)
        assert why is not None and words in why
        assert not select_last_rms.built(cell)
        with pytest.raises(ValueError):
            design(cell)
    # the LayerNorm cell keeps its own construction
    assert not select_last_rms.built(Cell("softmax", "post_bare", "regression", d=8, task="select", read="last"))


def test_the_fit_says_the_theory_exponent_is_the_lower_bounds():
    from bounds.fit import theory_exponent, theory_note

    for variant, affine in BUILT:
        cell = _cell(variant, affine)
        note = theory_note(cell)
        assert note is not None and "lower bound" in note and "not derived" in note
        assert theory_exponent(cell) == theory_exponent(cell.replace(task="count"))
    assert theory_note(Cell("softmax", "post_bare", "regression", d=8, task="select", read="last")) is None
