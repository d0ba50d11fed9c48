"""An independent re-derivation of the certified rows of the last-read and two-value cells.

The forward pass here (:func:`forward`) is written from the model alone (README, "The model in
brief"), in mpmath at 60 digits, token by token with the causal mask: it imports nothing of
``constructions`` or ``verify``.  Its only inputs are the cell's keys (the JSON vocabulary of
the sweep) and the parameter vectors as numbers.  For every cell below and every ``L`` of
:data:`LS` (up to the cell's ``L*``) the sweep's row (:func:`bounds.search.regression_row`) is
computed with its certified witness, and the witness is checked against the model:

* it is correct on every input of the task and read position: every sequence of length at most
  ``L`` while there are few (:data:`EXHAUSTIVE`), else one sequence per ``(n_a, n_b, last
  token)`` in a shuffled order (the read at the last position sees the multiset of earlier
  tokens, so the order of those is immaterial: the shuffle checks exactly that);
* ``B(theta)``, the largest Euclidean norm of its trainable vectors (never ``w0``), computed
  here, is at most the row's ``B_min`` (at ``L = 1``, where ``B_min = 0`` is an infimum, at most
  the row's ``witness_bound``), and ``B_lower <= B_min`` where a lower bound is reported.

The cells of :data:`FEW` (linear attention with post-RMSNorm read last, the select task read
last with softmax attention and a learned pre-norm or post-LayerNorm) are checked at the few
``L`` each lists, ``d = 8`` and their smallest ``d``.
"""

from __future__ import annotations

import itertools
import random

import mpmath
import pytest

from bounds.search import regression_row
from constructions.cell import Cell

DPS = 60
LS = (1, 2, 3, 4, 5, 8, 16)
#: inputs up to this L are every sequence (2^(L+1) - 1 of them for select), beyond one per class
EXHAUSTIVE = 8


def _norm(v, kind: str, eps):
    """LayerNorm ``(v - mean)/sqrt(var + eps)`` (population variance) or RMSNorm
    ``v/sqrt(mean(v^2) + eps)``; a zero denominator is a degenerate input (``ZeroDivisionError``)."""
    d = len(v)
    if kind == "layernorm":
        mean = mpmath.fsum(v) / d
        c = [x - mean for x in v]
        den = mpmath.sqrt(mpmath.fsum(x * x for x in c) / d + eps)
    else:
        c = list(v)
        den = mpmath.sqrt(mpmath.fsum(x * x for x in c) / d + eps)
    if den == 0:
        raise ZeroDivisionError("norm of a degenerate vector")
    return [x / den for x in c]


def _affine(n, keys: dict, vec: dict):
    """``N(v)``, ``g * N(v)`` or ``g * N(v) + beta`` elementwise."""
    if keys["affine"] == "bare":
        return n
    out = [g * x for g, x in zip(vec["g"], n)]
    if keys["affine"] == "gain_bias":
        out = [o + b for o, b in zip(out, vec["beta"])]
    return out


def forward(keys: dict, vec: dict, w0, tokens: str):
    """The regression output ``y`` of the model on ``tokens`` (``"s"`` then letters from
    ``"ab"``), read at position 0 (``read = bos``: attention over every position) or at the last
    position (``read = last``: causal mask, so it attends to every position; the query is the
    last token's value, the residual that token's raw embedding)."""
    with mpmath.workdps(DPS):
        d = keys["d"]
        eps = mpmath.mpf(keys["eps"])
        pre = keys["variant"].startswith("pre")
        post = keys["variant"].startswith("post")
        emb = {t: [mpmath.mpf(x) for x in vec["e_" + t]] for t in set(tokens)}
        vec = {k: [mpmath.mpf(x) for x in v] for k, v in vec.items()}
        tau = 1 / mpmath.sqrt(d)
        values = []
        for t in tokens:  # token by token: the value of each position
            h = emb[t]
            if pre:
                h = _affine(_norm(h, keys["norm"], eps), keys, vec)
            values.append(h)
        read = 0 if keys["read"] == "bos" else len(tokens) - 1
        seen = range(len(tokens)) if keys["read"] == "bos" else range(read + 1)  # causal mask
        q = values[read]
        scores = [tau * mpmath.fdot(q, values[j]) for j in seen]
        if keys["attention"] == "softmax":
            top = max(scores)
            weights = [mpmath.exp(s - top) for s in scores]
            total = mpmath.fsum(weights)
            weights = [x / total for x in weights]
        else:
            weights = scores
        A = [mpmath.fsum(wt * values[j][i] for wt, j in zip(weights, seen)) for i in range(d)]
        r = [x + a for x, a in zip(emb[tokens[read]], A)]
        z = _affine(_norm(r, keys["norm"], eps), keys, vec) if post else r
        return mpmath.fdot(vec["w"], z) + mpmath.mpf(w0)


def inputs(keys: dict, L: int, rng: random.Random):
    """The task's inputs up to ``L`` as ``(tokens, target)``: count ``(s, a^n)``, ``n = 0..L``;
    select every sequence over ``{a, b}`` of length ``<= L`` (beyond :data:`EXHAUSTIVE` one per
    ``(n_a, n_b, last token)``, the earlier tokens shuffled)."""
    if keys["task"] == "count":
        return [("s" + "a" * n, n) for n in range(L + 1)]
    if L <= EXHAUSTIVE:
        return [("s" + "".join(x), x.count("a")) for m in range(L + 1)
                for x in itertools.product("ab", repeat=m)]
    out = [("s", 0)]
    for m in range(1, L + 1):
        for last in "ab":
            for before in range(m):  # the a's among the first m - 1 tokens
                rest = list("a" * before + "b" * (m - 1 - before))
                rng.shuffle(rest)
                out.append(("s" + "".join(rest) + last, before + (last == "a")))
    return out


def bound(vec: dict):
    """``B(theta)``: the largest Euclidean norm among the trainable vectors."""
    with mpmath.workdps(DPS):
        return max(mpmath.sqrt(mpmath.fsum(mpmath.mpf(x) ** 2 for x in v)) for v in vec.values())


def worst_error(keys: dict, vec: dict, w0, L: int, seed: int = 0):
    """``max |y - target|`` over the inputs of :func:`inputs` (``inf`` at a degenerate norm)."""
    rng = random.Random(seed)
    worst = mpmath.mpf(0)
    for tokens, target in inputs(keys, L, rng):
        try:
            y = forward(keys, vec, w0, tokens)
        except ZeroDivisionError:
            return mpmath.inf
        with mpmath.workdps(DPS):
            worst = max(worst, abs(y - target))
    return worst


CELLS = [
    # the select task at the last read, linear attention
    Cell("linear", "none", task="select", read="last"),
    Cell("linear", "pre_bare", task="select", read="last"),
    Cell("linear", "pre_bare", norm="rmsnorm", task="select", read="last"),
    *[Cell("linear", "pre_learned", norm=k, affine=f, task="select", read="last")
      for k in ("layernorm", "rmsnorm") for f in ("gain", "gain_bias")],
    # the last read after post-norm
    *[Cell("softmax", "post_bare", norm=k, read="last") for k in ("layernorm", "rmsnorm")],
    *[Cell("softmax", "post_learned", norm=k, affine=f, read="last")
      for k in ("layernorm", "rmsnorm") for f in ("gain", "gain_bias")],
    Cell("linear", "post_bare", read="last"),
    *[Cell("linear", "post_learned", affine=f, read="last") for f in ("gain", "gain_bias")],
    # bare pre-norm at the last read (L* = 4)
    Cell("softmax", "pre_bare", norm="rmsnorm", read="last"),
    Cell("softmax", "pre_bare", d=2, read="last"),
    # softmax, pre-RMSNorm with a gain and a bias, at the last read
    Cell("softmax", "pre_learned", norm="rmsnorm", affine="gain_bias", read="last"),
    # the select task with two values (L* = 2)
    Cell("softmax", "pre_bare", d=2, task="select"),
    *[Cell("softmax", "pre_learned", d=2, affine=f, task="select") for f in ("gain", "gain_bias")],
]


def _top(cell: Cell) -> int:
    """The largest L checked: the cell's L* where it is finite (known from the model: bare
    pre-norm at the last read, the select task with two values), else the largest of LS."""
    if cell.variant == "pre_bare" and cell.attention == "softmax" and cell.read.name == "last":
        return 4
    if cell.task.name == "select" and cell.read.name == "bos":
        return 2
    return LS[-1]


#: cells checked at a few L: ``(cell, Ls)`` (after post-LayerNorm the select task's ``L = 1`` row,
#: an infimum its geometry does not witness, is not certified: from ``L = 2``)
FEW = [
    # linear attention, post-RMSNorm, the count task read last (the one-sided arc)
    (Cell("linear", "post_bare", norm="rmsnorm", read="last"), (1, 2, 3, 5)),
    (Cell("linear", "post_learned", norm="rmsnorm", affine="gain", read="last"), (2, 5)),
    (Cell("linear", "post_learned", norm="rmsnorm", affine="gain_bias", read="last"), (5,)),
    (Cell("linear", "post_bare", d=3, norm="rmsnorm", read="last"), (3,)),
    # softmax attention with a learned pre-norm, the select task read last
    (Cell("softmax", "pre_learned", norm="rmsnorm", affine="gain", task="select", read="last"), (1, 2, 3, 5)),
    (Cell("softmax", "pre_learned", norm="rmsnorm", affine="gain_bias", task="select", read="last"), (2,)),
    (Cell("softmax", "pre_learned", affine="gain", task="select", read="last"), (2, 5)),
    (Cell("softmax", "pre_learned", affine="gain_bias", task="select", read="last"), (5,)),
    (Cell("softmax", "pre_learned", d=3, norm="rmsnorm", affine="gain", task="select", read="last"), (3,)),
    (Cell("softmax", "pre_learned", d=4, affine="gain", task="select", read="last"), (3,)),
    # softmax attention with post-LayerNorm, the select task read last
    (Cell("softmax", "post_bare", task="select", read="last"), (2, 3, 5)),
    (Cell("softmax", "post_learned", affine="gain", task="select", read="last"), (2, 5)),
    (Cell("softmax", "post_learned", affine="gain_bias", task="select", read="last"), (5,)),
    (Cell("softmax", "post_bare", d=3, task="select", read="last"), (3,)),
]

CASES = ([(c, L) for c in CELLS for L in LS if L <= _top(c) and (L != 4 or _top(c) == 4)]
         + [(c, L) for c, Ls in FEW for L in Ls])


@pytest.mark.parametrize("cell,L", CASES, ids=[f"{c.describe()}-{c.task.name}-{c.read.name}-L{L}"
                                                for c, L in CASES])
def test_certified_row_counts_in_the_model(cell, L):
    row = regression_row(cell, L, lower=L <= 3, witness=True, closed=False)
    assert row["certified"], row.get("note")
    params = row["witness"]
    keys = cell.keys()
    vec = {name: list(params.vectors[name]) for name in cell.vector_names()}
    err = worst_error(keys, vec, params.scalars["w0"], L)
    assert err < mpmath.mpf(1) / 2, (cell.describe(), L, err)
    B = bound(vec)
    if L == 1:
        assert row["B_min"] == 0 and row["B_min_is_infimum"]
        assert B <= row["witness_bound"]
    else:
        assert B <= row["B_min"], (B, row["B_min"])
    if row.get("B_lower") is not None:
        assert row["B_lower"] <= row["B_min"]


def test_forward_by_hand():
    """The forward pass on a case computed by hand: d = 2, linear attention, no norm, the last
    read of (s, a): e_s = (1, 0), e_a = (0, 2), tau = 1/sqrt 2.  Query e_a: scores 0 and
    4 tau, A = 4 tau e_a = (0, 8 tau), r = e_a + A = (0, 2 + 8 tau); w = (0, 1), w0 = 0."""
    keys = {"attention": "linear", "variant": "none", "norm": "layernorm", "affine": "bare",
            "d": 2, "eps": 0.0, "task": "count", "read": "last"}
    vec = {"e_s": [1, 0], "e_a": [0, 2], "w": [0, 1]}
    with mpmath.workdps(DPS):
        assert abs(forward(keys, vec, 0, "sa") - (2 + 8 / mpmath.sqrt(2))) < mpmath.mpf(10) ** -50
        # read at s: the query is e_s, score tau*1, A = tau e_s, r = (1 + tau) e_s: w reads 0
        assert forward(keys, vec, 0, "s") == 0
        # softmax, post-LayerNorm at d = 3: s alone gives z = N(2 e_s), independent of e_s's scale
        keys3 = dict(keys, attention="softmax", variant="post_bare", d=3)
        v3 = {"e_s": [1, 2, 6], "e_a": [0, 0, 1], "w": [1, -1, 0]}
        big = dict(v3, e_s=[10, 20, 60])
        assert abs(forward(keys3, v3, 0, "s") - forward(keys3, big, 0, "s")) < mpmath.mpf(10) ** -50
        # N((2, 4, 12)) = (2-6, 4-6, 12-6)/sqrt(56/3): w reads -2 / sqrt(56/3)
        expected = -2 / mpmath.sqrt(mpmath.mpf(56) / 3)
        assert abs(forward(keys3, v3, 0, "s") - expected) < mpmath.mpf(10) ** -50


AGREE = CELLS + [c for c, _ in FEW]


@pytest.mark.parametrize("cell", AGREE, ids=[f"{c.describe()}-{c.task.name}-{c.read.name}"
                                             for c in AGREE])
def test_forward_agrees_with_the_toolkit_on_random_parameters(cell):
    """The forward pass here and the toolkit's (:func:`verify.forward.explicit`, at 80 digits)
    give one output on random parameters and random sequences: two independent readings of the
    model agree to 40 digits (a norm input the toolkit refuses as degenerate is skipped)."""
    from hypothesis import given, settings

    from verify.forward import NormUndefined, explicit
    from verify.strategies import parameter_sets, sequences

    keys = cell.keys()

    @settings(max_examples=8, deadline=None)
    @given(parameter_sets(cell, max_magnitude=2.0), sequences(cell, 6))
    def agree(params, tokens):
        vec = {name: list(params.vectors[name]) for name in cell.vector_names()}
        try:
            theirs = explicit(params, tokens, "mp80")
        except NormUndefined:
            return
        ours = forward(keys, vec, params.scalars["w0"], tokens)
        with mpmath.workdps(DPS):
            assert abs(ours - mpmath.mpf(theirs)) <= mpmath.mpf(10) ** -40 * (1 + abs(ours))

    agree()
