"""Validation of cells, parameters, token sequences, counts and backends: every bad input is a
ValueError with a message that says what is wrong."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import sympy

from constructions.cell import Cell, Params, architectures, to_mpf
from verify import LayerNormUndefined, counts_to, explicit, reduced
from verify.backends import get_backend

D = 3


def vecs(cell: Cell, classes: int = 3, **override):
    """A valid (vectors, scalars) pair for ``cell``, with entries replaced by ``override``."""
    base = {"e_s": [1.0, 0.0, 2.0], "e_a": [0.0, 1.0, -1.0], "e_b": [2.0, -1.0, 1.0],
            "g": [1.0, 2.0, -1.0], "beta": [0.0, 1.0, 1.0], "w": [1.0, 2.0, 3.0],
            "u": [[float(c), 1.0, -1.0] for c in range(classes)]}
    vectors = {k: v for k, v in base.items() if k in cell.vector_names()}
    scalars = {"w0": 0.5} if cell.readout == "regression" else {"b": [0.0] * classes}
    for k, v in override.items():
        (scalars if k in ("w0", "b", "w1") else vectors)[k] = v
    return vectors, scalars


REG = Cell("softmax", "none", "regression", d=D)
REG_LEARNED = Cell("softmax", "post_learned", "regression", d=D)
CLS = Cell("linear", "pre_bare", "classification", d=D)
DIS = Cell("softmax", "none", "regression", d=D, task="select")


# ------------------------------------------------------------------ cells


@pytest.mark.parametrize("kwargs,match", [
    (dict(attention="relu"), r"unknown attention 'relu'.*softmax, linear"),
    (dict(attention="Softmax"), r"unknown attention"),
    (dict(variant="mid"), r"unknown norm placement \(variant\) 'mid'.*none, pre_bare"),
    (dict(variant="post"), r"unknown norm placement"),
    (dict(norm="batchnorm"), r"unknown norm kind 'batchnorm'.*layernorm, rmsnorm"),
    (dict(variant="pre_learned", affine="scale"), r"unknown affine 'scale'"),
    (dict(variant="pre_bare", affine="gain"), r"pre_bare has no learned affine"),
    (dict(variant="none", affine="gain_bias"), r"none has no learned affine"),
    (dict(variant="post_learned", affine="bare"), r"use the \*_bare variant"),
    (dict(readout="ranking"), r"unknown read-out 'ranking'.*regression, classification"),
    (dict(d=1), r"d must be at least 2, got 1"),
    (dict(d=0), r"d must be at least 2, got 0"),
    (dict(d=-4), r"d must be at least 2"),
    (dict(d=2.5), r"d must be an integer"),
    (dict(d="8"), r"d must be an integer"),
    (dict(d=True), r"d must be an integer"),
    (dict(eps=-1e-12), r"eps must be a finite number >= 0"),
    (dict(eps=-1), r"eps must be a finite number >= 0"),
    (dict(eps=math.nan), r"eps must be a finite number >= 0"),
    (dict(eps=math.inf), r"eps must be a finite number >= 0"),
    (dict(eps=-math.inf), r"eps must be a finite number >= 0"),
    (dict(eps="1e-3"), r"eps must be a finite number >= 0"),
    (dict(eps=True), r"eps must be a finite number >= 0"),
])
def test_cell_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Cell(**kwargs)


def test_cell_accepts_and_normalises():
    c = Cell("linear", "post_learned", "classification", d=np.int64(5), eps=1, task="select")
    assert c.d == 5 and type(c.d) is int and c.eps == 1.0 and type(c.eps) is float
    assert c.post and c.learned and not c.pre
    assert c.vector_names() == ("e_s", "e_a", "e_b", "g", "beta", "u")
    assert c.scalar_names() == ("b",)
    assert Cell(d=2).d == 2  # d = 2 is a valid model (post-norm just cannot count well there)
    assert Cell(d=9).tau == 1 / sympy.Integer(3)


@pytest.mark.parametrize("variant,norm,affine,vectors", [
    ("none", "layernorm", None, ("e_s", "e_a", "w")),
    ("none", "rmsnorm", None, ("e_s", "e_a", "w")),
    ("pre_bare", "rmsnorm", None, ("e_s", "e_a", "w")),
    ("pre_learned", "layernorm", None, ("e_s", "e_a", "g", "beta", "w")),
    ("pre_learned", "layernorm", "gain", ("e_s", "e_a", "g", "w")),
    ("post_learned", "rmsnorm", None, ("e_s", "e_a", "g", "w")),
    ("post_learned", "rmsnorm", "gain_bias", ("e_s", "e_a", "g", "beta", "w")),
])
def test_cell_parts(variant, norm, affine, vectors):
    """The variant names decode once into parts; the parts decide the trainable vectors."""
    c = Cell("softmax", variant, "regression", d=4, norm=norm, affine=affine)
    assert c.variant == variant and c.kind.name == norm
    assert c.vector_names() == vectors
    assert c.affine.name == (affine or ("bare" if variant.endswith("bare") or variant == "none"
                                        else {"layernorm": "gain_bias", "rmsnorm": "gain"}[norm]))
    assert c.pre == variant.startswith("pre") and c.post == variant.startswith("post")
    assert c.replace() == c and hash(c.replace()) == hash(c)
    assert c.replace(readout="classification").vector_names()[-1] == "u"
    assert c.keys()["norm"] == norm and c.keys()["affine"] == c.affine.name
    if variant != "none":
        other = "rmsnorm" if norm == "layernorm" else "layernorm"
        assert c.replace(norm=other) != c
    assert Cell(d=9).tau == 1 / sympy.Integer(3)


# ------------------------------------------------------------------ parameters


@pytest.mark.parametrize("cell,override,match", [
    # wrong shapes
    (REG, dict(e_s=[1.0, 2.0]), r"e_s must have shape \(3,\), got \(2,\)"),
    (REG, dict(e_a=[1.0, 2.0, 3.0, 4.0]), r"e_a must have shape \(3,\), got \(4,\)"),
    (REG, dict(w=[[1.0, 2.0, 3.0]]), r"w must have shape \(3,\), got \(1, 3\)"),
    (REG, dict(e_s=1.0), r"e_s must have shape \(3,\), got \(\)"),
    (REG, dict(w0=[0.5]), r"w0 must have shape \(\), got \(1,\)"),
    (REG_LEARNED, dict(g=[1.0, 1.0]), r"g must have shape \(3,\)"),
    (REG_LEARNED, dict(beta=[0.0] * 5), r"beta must have shape \(3,\)"),
    # non-finite entries
    (REG, dict(e_a=[0.0, math.nan, 1.0]), r"e_a has a non-finite entry nan at index \(1,\)"),
    (REG, dict(w=[math.inf, 0.0, 1.0]), r"w has a non-finite entry inf at index \(0,\)"),
    (REG, dict(e_s=[1.0, 2.0, -math.inf]), r"e_s has a non-finite entry"),
    (REG, dict(w0=math.nan), r"w0 has a non-finite entry"),
    (REG, dict(w0=mpmath.inf), r"w0 has a non-finite entry"),
    (REG_LEARNED, dict(g=[1.0, "nan", 1.0]), r"g has a non-finite entry"),
    (CLS, dict(u=[[0.0, 1.0, 1.0], [1.0, math.inf, 0.0], [0.0, 0.0, 0.0]]), r"u has a non-finite entry inf at index \(1, 1\)"),
    (CLS, dict(b=[0.0, math.nan, 1.0]), r"b has a non-finite entry"),
    # non-numbers
    (REG, dict(e_s=[1.0, None, 2.0]), r"expected a number"),
    (REG, dict(e_s=[1.0, True, 2.0]), r"expected a number"),
    (REG, dict(w0=sympy.I), r"expected a real number"),
    # vectors the cell does not use
    (REG, dict(g=[1.0, 1.0, 1.0]), r"does not use the vector\(s\) g"),
    (REG, dict(e_b=[1.0, 1.0, 1.0]), r"does not use the vector\(s\) e_b"),
    (REG, dict(u=[[1.0, 0.0, 0.0]] * 3), r"does not use the vector\(s\) u"),
    (CLS, dict(w=[1.0, 0.0, 0.0]), r"does not use the vector\(s\) w"),
    (CLS, dict(beta=[1.0, 0.0, 0.0]), r"does not use the vector\(s\) beta"),
    # scalars the cell does not use
    (REG, dict(b=[0.0, 0.0]), r"does not use the scalar\(s\) b"),
    (REG, dict(w1=1.0), r"does not use the scalar\(s\) w1"),
    (CLS, dict(w0=0.0), r"does not use the scalar\(s\) w0"),
    # classification head shapes
    (CLS, dict(u=[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), r"u must have shape \(L\+1, 3\) with L >= 1, got \(3, 2\)"),
    (CLS, dict(u=[[1.0, 0.0, 0.0, 0.0]] * 3), r"u must have shape \(L\+1, 3\)"),
    (CLS, dict(u=[[1.0, 0.0, 0.0]], b=[0.0]), r"u must have shape \(L\+1, 3\) with L >= 1, got \(1, 3\)"),
    (CLS, dict(u=[1.0, 0.0, 0.0]), r"u must have shape \(L\+1, 3\)"),
    (CLS, dict(u=[[1.0, 0.0, 0.0], [1.0, 0.0]]), r"u must have shape|cannot read"),
    (CLS, dict(b=[0.0, 0.0]), r"b must have shape \(3,\), got \(2,\)"),
    (CLS, dict(b=[0.0] * 4), r"b must have shape \(3,\), got \(4,\)"),
    (CLS, dict(b=0.0), r"b must have shape \(3,\), got \(\)"),
])
def test_params_reject(cell, override, match):
    vectors, scalars = vecs(cell, **override)
    with pytest.raises(ValueError, match=match):
        Params(cell, vectors, scalars)


@pytest.mark.parametrize("cell,missing,kind", [
    (REG, "e_a", "vector"), (REG, "w", "vector"), (REG_LEARNED, "g", "vector"),
    (REG_LEARNED, "beta", "vector"), (DIS, "e_b", "vector"), (CLS, "u", "vector"),
    (REG, "w0", "scalar"), (CLS, "b", "scalar"),
])
def test_params_missing(cell, missing, kind):
    vectors, scalars = vecs(cell)
    (vectors if kind == "vector" else scalars).pop(missing)
    with pytest.raises(ValueError, match=rf"needs the {kind}\(s\) {missing}"):
        Params(cell, vectors, scalars)


def test_params_message_names_the_cell():
    vectors, scalars = vecs(REG, g=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"softmax/none/regression \(d=3, eps=0\)"):
        Params(REG, vectors, scalars)


def test_params_cell_must_be_a_cell():
    with pytest.raises(ValueError, match="cell must be a Cell"):
        Params("softmax/none/regression", *vecs(REG))


def test_params_store_exact_values_and_bound():
    vectors, scalars = vecs(CLS, e_s=[3, 4, 0], e_a=["0.5", 0, 0], u=[[0, 0, 0], [1, 2, 2], [0, 0, 6]])
    p = Params(CLS, vectors, scalars)
    assert all(isinstance(x, mpmath.mpf) for x in p.vectors["e_s"])
    assert p.vectors["e_a"][0] == mpmath.mpf(1) / 2
    norms = p.norms()
    assert norms["e_s"] == 5 and norms["u_0"] == 0 and norms["u_1"] == 3 and norms["u_2"] == 6
    assert p.bound() == 6
    assert p.classes == 3
    assert p.storage() == 3 + 3 + 9 + 3
    assert to_mpf(sympy.Rational(1, 4)) == mpmath.mpf(0.25)
    assert to_mpf(0.1) == mpmath.mpf(0.1)  # floats are taken exactly


# ------------------------------------------------------------------ LayerNorm undefined


@pytest.mark.parametrize("backend", ["float64", "mp50", "arb256"])
@pytest.mark.parametrize("token", ["s", "a"])
def test_pre_norm_constant_embedding(backend, token):
    cell = Cell("softmax", "pre_bare", "regression", d=D)
    p = Params(cell, *vecs(cell, **{f"e_{token}": [2.0, 2.0, 2.0]}))
    msg = rf"eps=0 is undefined on a constant vector \(pre-norm of token {token}\)"
    with pytest.raises(LayerNormUndefined, match=msg):
        explicit(p, "saa", backend)
    with pytest.raises(LayerNormUndefined, match=msg):
        reduced(p, [0, 1, 2], backend=backend)
    with pytest.raises(ValueError, match=msg):  # LayerNormUndefined is a ValueError
        counts_to(p, 2, backend)


def test_pre_norm_constant_embedding_is_fine_with_eps():
    cell = Cell("softmax", "pre_bare", "regression", d=D, eps=0.25)
    p = Params(cell, *vecs(cell, e_s=[2.0, 2.0, 2.0]))
    y = reduced(p, [0, 1, 2])
    assert np.all(np.isfinite(y))


@pytest.mark.parametrize("backend", ["float64", "mp50", "arb256"])
@pytest.mark.parametrize("d", [3, 7, 8])
def test_constant_vector_detected_when_the_mean_rounds(backend, d):
    """(0.1 + 0.1 + 0.1) / 3 != 0.1 in float64: a variance test would see ~1e-34, not 0.  The
    vector is still exactly constant, so every backend must raise (regression test)."""
    cell = Cell("softmax", "pre_bare", "regression", d=d)
    vectors = {"e_s": [0.1] * d, "e_a": list(range(d)), "w": [1.0] * d}
    p = Params(cell, vectors, {"w0": 0.0})
    with pytest.raises(LayerNormUndefined, match="token s"):
        explicit(p, "sa", backend)
    # post-norm: e_s = e_a = 0.1 * 1 gives r = 2 e_s = 0.2 * 1 (exact in floats) at every count
    cell = Cell("softmax", "post_bare", "regression", d=d)
    p = Params(cell, dict(vectors, e_a=[0.1] * d), {"w0": 0.0})
    with pytest.raises(LayerNormUndefined, match=r"n_a=0, n_b=0"):
        reduced(p, [0, 1, 2], backend=backend)


@pytest.mark.parametrize("backend", ["float64", "mp50", "arb256"])
def test_post_norm_constant_residual_through_inexact_scores(backend):
    """softmax / post_bare, d = 3, e_s = e_a = (1, 1, 1): every h_j = e_s, the softmax weights
    sum to 1, so r = 2 (1, 1, 1) is constant at every count and LayerNorm (eps = 0) is undefined."""
    cell = Cell("softmax", "post_bare", "regression", d=3)
    p = Params(cell, {"e_s": [1, 1, 1], "e_a": [1, 1, 1], "w": [1, 2, 3]}, {"w0": 0})
    with pytest.raises(LayerNormUndefined, match=r"post-norm at count n_a=0, n_b=0"):
        reduced(p, [0, 1, 2], backend=backend)


def test_post_norm_constant_residual_never_counts_on_balls():
    """Whatever arb256 does with the undefined LayerNorm, it must not certify counting."""
    cell = Cell("softmax", "post_bare", "regression", d=3)
    p = Params(cell, {"e_s": [1, 1, 1], "e_a": [1, 1, 1], "w": [1, 2, 3]}, {"w0": 0})
    try:
        res = counts_to(p, 2, "arb256")
    except LayerNormUndefined:
        return
    assert not res.counts and not res.certified


def _post_constant_at_two():
    """linear/post_bare, d = 4 (tau = 1/2): r_n = 3 e_s + 1.5 n e_a, with e_a = -e_s + 3.5 * 1,
    so r_n is constant exactly at n = 2 (r_2 = 3 (e_s + e_a) = 10.5 * (1, 1, 1, 1))."""
    cell = Cell("linear", "post_bare", "regression", d=4)
    return Params(cell, {"e_s": [2, 0, 0, 0], "e_a": [1.5, 3.5, 3.5, 3.5], "w": [1, 0, 0, 0]}, {"w0": 0})


@pytest.mark.parametrize("backend", ["float64", "mp50", "arb256"])
def test_post_norm_constant_residual_names_the_count(backend):
    p = _post_constant_at_two()
    # counts 0 and 1 are fine
    assert len(reduced(p, [0, 1], backend=backend)) == 2
    explicit(p, "sa", backend)
    msg = r"constant vector \(post-norm at count n_a=2, n_b=0\)"
    with pytest.raises(LayerNormUndefined, match=msg):
        reduced(p, [0, 1, 2, 3], backend=backend)
    with pytest.raises(LayerNormUndefined, match=msg):
        counts_to(p, 3, backend)
    with pytest.raises(LayerNormUndefined, match="post-norm"):
        explicit(p, "saa", backend)


def test_post_norm_constant_residual_softmax_first_count():
    """softmax/post_learned with constant e_s and e_a: r is constant at every count; the message
    names the first one."""
    cell = Cell("softmax", "post_learned", "classification", d=D)
    p = Params(cell, *vecs(cell, e_s=[1.0, 1.0, 1.0], e_a=[-3.0, -3.0, -3.0]))
    with pytest.raises(LayerNormUndefined, match=r"n_a=0, n_b=0"):
        reduced(p, [0, 1, 2])
    with pytest.raises(LayerNormUndefined, match=r"n_a=5, n_b=0"):
        reduced(p, [5, 0])


# ------------------------------------------------------------------ tokens and counts


@pytest.mark.parametrize("cell,tokens,match", [
    (REG, "", r"must start with the token s"),
    (REG, "aa", r"must start with the token s"),
    (REG, "as", r"must start with the token s"),
    (REG, "sab", r"tokens after s must be in \{a\} for this cell, got b"),
    (REG, "sasa", r"tokens after s must be in \{a\}.*got s"),
    (REG, "sax", r"got x"),
    (DIS, "sabc", r"tokens after s must be in \{a, b\} for this cell, got c"),
    (DIS, ["a", "s"], r"must start with the token s"),
])
def test_bad_tokens(cell, tokens, match):
    p = Params(cell, *vecs(cell))
    with pytest.raises(ValueError, match=match):
        explicit(p, tokens)


def test_tokens_as_a_list():
    p = Params(DIS, *vecs(DIS))
    assert explicit(p, ["s", "a", "b"]) == explicit(p, "sab")


@pytest.mark.parametrize("cell,args,match", [
    (REG, ([1, 2], [0, 1]), r"no distractor token b, so n_b must be 0"),
    (REG, ([-1],), r"counts must be non-negative"),
    (DIS, ([1], [-2]), r"counts must be non-negative"),
    (DIS, ([1, 2], [0]), r"same length"),
    (DIS, ([[1, 2]], [[0, 0]]), r"1-D"),
])
def test_bad_counts(cell, args, match):
    p = Params(cell, *vecs(cell))
    with pytest.raises(ValueError, match=match):
        reduced(p, *args)


@pytest.mark.parametrize("L", [0, -1, 1.5, True, "3", None])
def test_counts_to_rejects_bad_L(L):
    p = Params(REG, *vecs(REG))
    with pytest.raises(ValueError, match=r"L must be an integer >= 1"):
        counts_to(p, L)


def test_counts_to_classes_must_match_L():
    p = Params(CLS, *vecs(CLS, classes=3))
    with pytest.raises(ValueError, match=r"3 classes judges L=2, not L=4"):
        counts_to(p, 4)
    assert counts_to(p, 2).L == 2


@pytest.mark.parametrize("spec,match", [
    ("float128", r"unknown backend 'float128'"),
    ("mp", r"unknown backend"),
    ("arb", r"unknown backend"),
    ("numpy", r"unknown backend"),
    ("mp10", r"needs 15 to 5000 digits"),
    ("arb32", r"needs 53 to 32768 bits"),
    ("mp99999999", r"needs 15 to 5000 digits"),
    ("arb99999999", r"needs 53 to 32768 bits"),
])
def test_bad_backend(spec, match):
    with pytest.raises(ValueError, match=match):
        get_backend(spec)


@pytest.mark.parametrize("cell", architectures(d=5, task="select", read="last"), ids=lambda c: c.describe())
def test_a_cell_is_rebuilt_from_its_keys(cell):
    assert Cell(**cell.keys()) == cell
