"""The count task read at the last position after post-norm, softmax attention and linear
attention with LayerNorm (:mod:`constructions.last_post`):

* the construction passes the explicit token-by-token forward pass on random sequences drawn
  by :mod:`verify.strategies`, and the judge certifies it at small ``L`` in ball arithmetic;
* its derivation, against an independent forward pass written here from the model: the outputs
  are ``y(n) = c + A (n - c)/sqrt(lam^2 + (n - c)^2)`` for ``n >= 1`` and the same formula at
  ``n = -u`` for the count 0, and every vector is within the budget;
* the lemma of the lower bound on random parameter sets: ``z(n) = N(P + n Q)`` for ``n >= 1``
  with ``P = e_s + e_a``, ``Q = 2 rho e_a``, and ``z(0) = N(P - Q/(2 rho))`` (softmax), or
  ``P = e_a + tau <e_a, e_s> e_s``, ``Q = tau |e_a|^2 e_a`` and ``z(0) = +-N(P - Q/(tau |e_a|^2))``
  (linear, the sign of ``<e_a, e_s>``);
* ``B_lower <= B_min`` on certified rows, the bound below the BOS construction of ``L - 1``
  (an independent upper bound on what it bounds), and the two meeting from ``L = 32``;
* the refusals of what is not built (``d = 2`` LayerNorm, classification with ``eps > 0``,
  the select task); the regression cells
  at ``eps > 0`` are built (:mod:`constructions.last_post_eps`).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import sweep as sweep_mod
from bounds.lower import _ends_lower, b_lower
from bounds.search import regression_row
from constructions import Cell, regression
from constructions.last_post import LastArcDesign, LinearLastArcDesign, centre
from constructions.tasks import refusal
from tests.helpers import examples, random_params
from verify import counts_to, explicit
from verify.strategies import sequences, target

#: every cell built: both kinds, every affine option
KW = [dict(variant="post_bare"),
      dict(variant="post_learned"),
      dict(variant="post_learned", affine="gain"),
      dict(variant="post_bare", norm="rmsnorm"),
      dict(variant="post_learned", norm="rmsnorm"),
      dict(variant="post_learned", norm="rmsnorm", affine="gain_bias"),
      dict(attention="linear", variant="post_bare"),
      dict(attention="linear", variant="post_learned"),
      dict(attention="linear", variant="post_learned", affine="gain")]


def _cell(kw, d=8, **extra) -> Cell:
    kw = {"attention": "softmax", **kw}
    return Cell(readout="regression", d=d, read="last", **kw, **extra)


def _budget(design, L, factor=1 + 1e-3):
    return 1e-3 if L == 1 else design.estimate(L) * factor


# --------------------------------------------------------------------------- an independent forward
def _norm(cell: Cell, v, p, sign=1):
    """``g * (sign N(v)) + beta`` by the model's definition (mpmath)."""
    d = len(v)
    if cell.kind.centred:
        m = mpmath.fsum(v) / d
        v = [x - m for x in v]
    scale = mpmath.sqrt(mpmath.fsum(x * x for x in v) / d)
    out = [sign * x / scale for x in v]
    if cell.affine.gain:
        out = [g * x for g, x in zip(p["g"], out)]
    if cell.affine.bias:
        out = [x + b for x, b in zip(out, p["beta"])]
    return out


def _last_read(cell: Cell, p: dict, n: int):
    """``z`` at the last read of ``(s, a^n)``: query and residual of the last token, attention
    over ``0..n`` (post-norm: ``h = e``)."""
    dot = lambda x, y: mpmath.fsum(a * b for a, b in zip(x, y))
    tau = 1 / mpmath.sqrt(cell.d)
    tokens = ["e_s"] + ["e_a"] * n
    q = p[tokens[-1]]
    scores = [tau * dot(q, p[t]) for t in tokens]
    if cell.attention == "softmax":
        top = max(scores)
        ex = [mpmath.exp(s - top) for s in scores]
        weights = [x / mpmath.fsum(ex) for x in ex]
    else:
        weights = scores
    A = [mpmath.fsum(x * p[t][i] for x, t in zip(weights, tokens)) for i in range(cell.d)]
    return _norm(cell, [a + b for a, b in zip(q, A)], p)


def _as_mp(params) -> dict:
    """The trainable vectors as mpf lists (a classification head's rows ``u`` left out)."""
    return {k: [mpmath.mpf(x) for x in v] for k, v in params.vectors.items() if k != "u"}


# --------------------------------------------------------------------------- the construction
@pytest.mark.parametrize("kw", [KW[1], KW[3], KW[6]])
def test_it_passes_the_explicit_pass_on_random_sequences(kw):
    cell = _cell(kw)
    design = regression.design(cell)
    L = 12
    params = design.build(L, _budget(design, L, 1.01))

    @settings(max_examples=examples(25), deadline=None)
    @given(sequences(cell, max_length=L))
    def check(seq):
        assert abs(float(explicit(params, seq, "float64")) - target(seq)) < 0.5

    check()


@pytest.mark.parametrize("kw", KW)
def test_the_judge_certifies_it_at_small_L(kw):
    cell = _cell(kw)
    design = regression.design(cell)
    assert isinstance(design, LinearLastArcDesign if cell.attention == "linear" else LastArcDesign)
    for L in range(1, 6):
        res = counts_to(design.build(L, _budget(design, L)), L, "arb256")
        assert res.counts and res.certified, (L, res.verdict)


@pytest.mark.parametrize("kw", [KW[0], KW[2], KW[7]])
def test_below_the_estimate_it_does_not_count(kw):
    design = regression.design(_cell(kw))
    for L in (3, 6):
        assert not counts_to(design.build(L, design.estimate(L) * 0.99), L, "arb256").counts


@settings(max_examples=examples(12), deadline=None)
@given(st.sampled_from(KW), st.integers(2, 40), st.floats(1.001, 3.0), st.sampled_from([3, 5, 8]))
def test_the_outputs_are_the_arc_with_the_count_0_at_minus_u(kw, L, factor, d):
    cell = _cell(kw, d=d)
    design = regression.design(cell)
    with mpmath.workdps(40):
        Bv = mpmath.mpf(design.estimate(L) * factor)
        lam, A, c, u = design._point(L, Bv)
        assert u is not None and u > 0
        if cell.attention == "softmax":
            assert u < mpmath.mpf(1) / 2  # rho = 1/(2u) > 1
        assert c == centre(L)
        params = design.build(L, Bv, dps=40)
        p = _as_mp(params)
        assert max(mpmath.sqrt(mpmath.fsum(x * x for x in v)) for v in p.values()) <= Bv * (1 + mpmath.mpf(10) ** -30)
        y = lambda m: c + A * (m - c) / mpmath.sqrt(lam**2 + (m - c) ** 2)
        w0 = params.scalars["w0"]
        for n in sorted({0, 1, 2, L // 2, L}):
            z = _last_read(cell, p, n)
            got = mpmath.fsum(a * b for a, b in zip(p["w"], z)) + w0
            want = y(-u) if n == 0 else y(n)
            assert abs(got - want) < mpmath.mpf(10) ** -25 * (1 + abs(want))
            assert abs(got - n) < mpmath.mpf(1) / 2


@settings(max_examples=examples(15), deadline=None)
@given(st.sampled_from(KW), st.integers(0, 2**32 - 1))
def test_random_parameters_put_every_count_on_one_line(kw, seed):
    """The lemma of :func:`bounds.lower.last_post_lower` (and the count 0's place)."""
    cell = _cell(kw, d=5)
    p = _as_mp(random_params(cell, np.random.default_rng(seed)))
    dot = lambda x, y: mpmath.fsum(a * b for a, b in zip(x, y))
    e_s, e_a = p["e_s"], p["e_a"]
    with mpmath.workdps(40):
        tau = 1 / mpmath.sqrt(cell.d)
        sign = 1
        if cell.attention == "softmax":  # Z r(n) = w_s (P + n Q)
            rho = mpmath.exp(tau * dot(e_a, [a - s for a, s in zip(e_a, e_s)]))
            P = [s + a for s, a in zip(e_s, e_a)]
            Q = [2 * rho * a for a in e_a]
            n_star = -1 / (2 * rho)
        else:  # r(n) = P + n Q; r(0) is gam e_s = P + n_* Q up to a positive factor
            gam, k = tau * dot(e_a, e_s), tau * dot(e_a, e_a)
            P = [a + gam * s for s, a in zip(e_s, e_a)]
            Q = [k * a for a in e_a]
            n_star, sign = -1 / k, (1 if gam > 0 else -1)
        for n in (0, 1, 2, 7):
            m = n_star if n == 0 else n
            want = _norm(cell, [x + m * y for x, y in zip(P, Q)], p, sign if n == 0 else 1)
            got = _last_read(cell, p, n)
            assert max(abs(g - w) for g, w in zip(got, want)) < mpmath.mpf(10) ** -25 * (1 + max(abs(w) for w in want))


# --------------------------------------------------------------------------- the lower bound
@pytest.mark.parametrize("kw", [KW[0], KW[1], KW[4], KW[6]])
def test_the_lower_bound_is_below_the_certified_rows(kw):
    cell = _cell(kw)
    for L in (2, 3, 8, 32):
        row = regression_row(cell, L, arc_boxes=200_000)
        assert row["certified"]
        assert 0 <= row["B_lower"] <= row["B_min"]
        if L >= 3:
            # the arc's part bounds B_min at the BOS read of L - 1, which that read's construction
            # exceeds; the counts 0, L alone give the other part
            bos = regression_row(cell.replace(read="bos"), L - 1, lower=False)
            assert 0 < row["B_lower"] <= max(bos["B_min"], _ends_lower(cell, L))
        if L >= 32:  # the construction reaches the BOS arc of L - 1
            assert row["B_min"] <= row["B_lower"] * (1 + 1e-3)


def test_the_lower_bound_needs_what_it_uses():
    # eps > 0: the same bound (bounds.lower.last_post_lower: the arc of the lifted line)
    assert b_lower(_cell(KW[0], eps=0.1), 8, 1.0) == b_lower(_cell(KW[0]), 8, 1.0)
    assert b_lower(_cell(KW[3], eps=0.1), 8, None) is None
    assert b_lower(_cell(KW[0]), 8, None) is None
    # L = 2: only the counts 0 and 2, |<w, N_2 - N_0>| <= 2 sqrt(d) |w| must exceed 1 (bare)
    assert b_lower(_cell(KW[0]), 2, 1.0) == pytest.approx(1 / (2 * math.sqrt(8)), rel=1e-12)


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("cell", [
    _cell(KW[0], d=2, eps=0.01), _cell(KW[1], d=2, eps=0.01),
    _cell(KW[6], d=2, eps=0.01), _cell(KW[2], d=2).replace(readout="classification"),
    Cell(attention="softmax", variant="post_bare", norm="rmsnorm", read="last", task="select", eps=0.01),
    Cell(attention="softmax", variant="post_learned", read="last", readout="classification", eps=0.01)])
def test_what_is_not_built_is_refused(cell):
    assert refusal(cell)


def test_every_built_cell_is_not_refused():
    for kw in KW:
        for d in (3, 8):
            assert refusal(_cell(kw, d=d)) is None
    assert refusal(_cell(KW[3], d=2)) is None  # RMSNorm holds the arc at d = 2
    # softmax with eps > 0: constructions.last_post_eps
    assert refusal(_cell(KW[0], eps=0.01)) is None and refusal(_cell(KW[3], eps=0.01)) is None
    assert refusal(_cell(KW[7], eps=0.01)) is None  # linear, post-LayerNorm
    assert refusal(_cell(dict(attention="linear", variant="post_bare", norm="rmsnorm"), eps=0.01)) is None


def test_the_sweep_refuses_d_2_layernorm_with_eps_in_one_line(capsys):
    argv = ["--variant", "post_bare", "--read", "last", "--d", "2", "--eps", "0.01", "--Lmax", "4"]
    assert sweep_mod.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not derived" in err


# --------------------------------------------------------------------------- classification
@pytest.mark.parametrize("kw", [KW[0], KW[2], KW[4], KW[6]])
def test_the_classification_head_is_certified_within_unit_norm(kw):
    """Certified at several ``L`` with every vector of norm at most 1, its margin below the
    proven ``margin_upper`` and below the pair bound ``m <= |z_{n+1} - z_n|`` (``<u_{n+1} - u_n, z_{n+1} - z_n> >= 2 m`` with
    ``|u_{n+1} - u_n| <= 2``) on outputs from the independent forward pass."""
    from bounds.search import classification_row
    from constructions import classification
    from constructions.last_post import LastArcHead

    cell = _cell(kw).replace(readout="classification")
    assert refusal(cell) is None and isinstance(classification.design(cell), LastArcHead)
    for L in (1, 3, 10):
        row = classification_row(cell, L, witness=True)
        assert row["certified"] and row["margin"] > 0 and row["margin_bound"] <= 1 + 1e-12  # rounded up
        assert row["margin"] <= row["margin_upper"]  # bounds.last_margin: the BOS arc bound of L - 1
        p = _as_mp(row["witness"])
        with mpmath.workdps(30):
            z = [_last_read(cell, p, n) for n in range(L + 1)]
            gaps = [mpmath.sqrt(mpmath.fsum((a - b) ** 2 for a, b in zip(z[n + 1], z[n]))) for n in range(L)]
        assert row["margin"] <= min(gaps) * (1 + 1e-12)


@pytest.mark.parametrize("kw", [KW[0], KW[2], KW[3], KW[6], KW[7]])
def test_the_head_is_within_one_percent_of_the_proven_bound(kw):
    """At ``L = 16`` the certified margin of the shaped arc (its foot moved with the head; with
    linear attention the count 0 on the antipode) is within 1% of :func:`bounds.last_margin._post`
    (softmax: the dual certificate over every output; linear: the arc bound of ``L - 1``)."""
    from bounds.search import classification_row

    row = classification_row(_cell(kw).replace(readout="classification"), 16)
    assert row["certified"] and row["margin"] <= row["margin_upper"] <= 1.01 * row["margin"]
