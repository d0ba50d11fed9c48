"""Independent checks of the select-last constructions (the free pair among them) and the foot of
the last-read post-RMSNorm line, against a forward pass written here from the model's rules
(mpmath, not :mod:`verify.forward`) and against identities derived by hand."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from constructions import regression
from constructions.cell import Cell
from verify.judge import counts_to


def _norm(cell, p, v):
    d = len(v)
    c = [x - mp.fsum(v) / d for x in v] if cell.kind.centred else list(v)
    s = mp.sqrt(mp.fsum(x * x for x in c) / d + cell.eps)
    n = [x / s for x in c]
    if cell.affine.gain:
        n = [g * x for g, x in zip(p["g"], n)]
    if "beta" in p:
        n = [x + b for x, b in zip(n, p["beta"])]
    return n


def _dot(u, v):
    return mp.fsum(x * y for x, y in zip(u, v))


def _output(cell, p, w0, seq):
    """``y`` of the token sequence ``seq`` (``seq[0] = 's'``) by the model's rules."""
    tau = 1 / mp.sqrt(cell.d)
    e = {t: p["e_" + t] for t in "sab" if "e_" + t in p}
    h = {t: (_norm(cell, p, v) if cell.pre else v) for t, v in e.items()}
    q = seq[-1] if cell.read.last else seq[0]
    scores = [tau * _dot(h[q], h[t]) for t in seq]
    if cell.attention == "softmax":
        top = max(scores)
        ws = [mp.exp(x - top) for x in scores]
        ws = [x / mp.fsum(ws) for x in ws]
    else:
        ws = scores
    r = [e[q][i] + mp.fsum(wj * h[t][i] for wj, t in zip(ws, seq)) for i in range(cell.d)]
    return _dot(p["w"], _norm(cell, p, r) if cell.post else r) + w0


def _sequences(cell, L):
    """Every input up to ``L``, one sequence per ``(n_a, n_b, last token)``."""
    out = [("s",)]
    for m in range(1, L + 1):
        for na in range(m + 1):
            nb = m - na
            if nb and not cell.distractor:
                continue
            if cell.read.last:
                out += [("s",) + ("b",) * nb + ("a",) * na] if na else []
                out += [("s",) + ("a",) * na + ("b",) * nb] if nb else []
            else:
                out.append(("s",) + ("a",) * na + ("b",) * nb)
    return out


def _errors(params, L, dps=50):
    with mp.workdps(dps):
        p = {k: [mp.mpf(x) for x in v] for k, v in params.vectors.items()}
        w0 = mp.mpf(params.scalars["w0"])
        return [float(abs(_output(params.cell, p, w0, s) - s.count("a"))) for s in _sequences(params.cell, L)]


@pytest.mark.parametrize("cell", [
    Cell("softmax", "pre_learned", "regression", d=3, norm="rmsnorm", affine="gain", task="select", read="last"),
    Cell("softmax", "post_bare", "regression", d=3, task="select", read="last"),
], ids=["softmax-pre-rms-gain", "softmax-post-layernorm"])
def test_select_last_rows_count_by_an_independent_pass(cell):
    """The row's parameter set (just above the design's least budget) solves select to L by the
    rules applied here, every one of the 1 + L(L+1) inputs, and the judge certifies it."""
    L = 4
    design = regression.design(cell)
    B = design.estimate(L)
    params = design.build(L, B * (1 + 1e-6))
    errors = _errors(params, L)
    assert len(errors) == 1 + L * (L + 1)
    assert max(errors) < 0.5
    assert counts_to(params, L, "arb256").verdict == "counts"
    assert max(float(np.linalg.norm(np.array(v, dtype=float))) for v in params.vectors.values()) <= B * (1 + 2e-6)


@pytest.mark.parametrize("d", [3, 7])
def test_free_select_pair_solves_two_and_misses_three(d):
    """Softmax select read last without a norm (``b`` a copy of ``s``): the construction just above
    its least budget at ``L = 2`` has every error below 1/2 under this forward pass, and the same
    parameters miss on some input of ``L = 3`` (:func:`test_count_last_without_norm_cannot_reach_three`)."""
    cell = Cell("softmax", "none", "regression", d=d, task="select", read="last")
    design = regression.design(cell)
    params = design.build(2, design.estimate(2) * (1 + 1e-6))
    assert max(_errors(params, 2)) < 0.5
    assert max(_errors(params, 3)) >= 0.5


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(0, 2**32 - 1))
def test_count_last_without_norm_cannot_reach_three(d, seed):
    """Softmax without a norm read last: ``y(n) - y(0) = D (1 + phi(n))`` with ``phi(n) = n/(rho +
    n)``, so ``(y(3) - y(1)) / (y(1) - y(0)) = 2 rho/((rho + 2)(rho + 3)) <= 2 sqrt6/(12 + 5 sqrt6)
    < 1/2``, while counting to 3 needs ``y(3) - y(1) > 1`` and ``y(1) - y(0) < 2``: the count
    task (and the select task, its super-task) stops at ``L* <= 2``."""
    rng = np.random.default_rng(seed)
    cell = Cell("softmax", "none", "regression", d=d, read="last")
    scale = rng.uniform(0.1, 3.0)
    p = {k: [mp.mpf(float(x)) for x in rng.normal(size=d) * scale] for k in ("e_s", "e_a", "w")}
    with mp.workdps(40):
        y = [_output(cell, p, 0, ("s",) + ("a",) * n) for n in range(4)]
        first = y[1] - y[0]
        assert abs(y[3] - y[1]) <= (2 * mp.sqrt(6) / (12 + 5 * mp.sqrt(6))) * abs(first) * (1 + mp.mpf(10) ** -20)
    assert 2 * math.sqrt(6) / (12 + 5 * math.sqrt(6)) < 0.5


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.integers(0, 2**32 - 1))
def test_last_foot_lies_beyond_sqrt_d_over_B_squared(d, seed):
    """Linear attention with post-RMSNorm read last: the residuals ``r(n)``, ``n >= 1`` (computed
    here from the rules) lie on a line whose foot ``n0 = -<P, Q>/|Q|^2`` is at most
    ``-sqrt(d)/|e_a|^2 <= -sqrt(d)/B^2``, the restriction :func:`bounds.lower.last_foot_lower` uses."""
    rng = np.random.default_rng(seed)
    e_a, e_s = (rng.normal(size=d) * rng.uniform(0.05, 4.0) for _ in range(2))
    tau = 1 / math.sqrt(d)
    r = lambda n: e_a + tau * (e_a @ e_s) * e_s + n * tau * (e_a @ e_a) * e_a
    P, Q = r(0), r(1) - r(0)
    assert np.allclose(r(3), P + 3 * Q)
    n0 = -(P @ Q) / (Q @ Q)
    B = max(np.linalg.norm(e_a), np.linalg.norm(e_s))
    assert n0 <= -math.sqrt(d) / (e_a @ e_a) * (1 - 1e-12)
    assert n0 <= -math.sqrt(d) / B**2 * (1 - 1e-12)
