"""The select task read last, softmax attention without a norm or after post-norm, classification:
the head of constructions.select_last_contrast_head (certified, cancels b at its own query) and
the proven lower bounds of bounds.contrast_lower (checked against independent LPs over heads)."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from bounds import contrast_lower, search
from constructions import classification
from constructions.cell import Cell
from verify import explicit
from verify.certify import certify, rigorous_bound
from verify.report import check
from verify.strategies import sequences, target


def cell(d=8):
    return Cell(attention="softmax", variant="none", readout="classification", d=d, task="select",
                read="last")


@pytest.fixture(scope="module")
def heads():
    return {(d, L): classification.design(cell(d)).build(L) for d in (2, 3, 8)
            for L in (1, 2, 3, 5, 8, 16)}


def own_logits(params, seq: str):
    """An independent token-by-token pass (mpmath, 40 digits): softmax at the last token."""
    with mpmath.workdps(40):
        e = {t: [mpmath.mpf(x) for x in params.vectors[f"e_{t}"]] for t in "sab"}
        dot = lambda x, y: mpmath.fsum(p * q for p, q in zip(x, y))
        tau = 1 / mpmath.sqrt(params.cell.d)
        q = e[seq[-1]]
        w = [mpmath.exp(tau * dot(q, e[t])) for t in seq]
        D = mpmath.fsum(w)
        A = [mpmath.fsum(wj * e[t][i] for wj, t in zip(w, seq)) / D for i in range(params.cell.d)]
        z = [qi + ai for qi, ai in zip(q, A)]
        return [dot([mpmath.mpf(x) for x in u], z) + mpmath.mpf(b)
                for u, b in zip(params.vectors["u"], params.scalars["b"])]


def test_certified_at_every_small_L_and_every_d(heads):
    for (d, L), params in heads.items():
        res = certify(params, L)
        assert res.certified and res.min_margin > 0, (d, L, res.verdict)
        rows = np.array([[float(x) for x in u] for u in params.vectors["u"]])
        assert np.linalg.norm(rows, axis=1).max() <= 1


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_sequences_are_counted_by_an_independent_pass(heads, data):
    d, L = data.draw(st.sampled_from([(2, 8), (3, 16), (8, 16)]))
    params = heads[(d, L)]
    seq = data.draw(sequences(params.cell, max_length=L))
    mine = own_logits(params, seq)
    assert max(range(L + 1), key=lambda c: mine[c]) == target(seq)
    theirs = np.asarray(explicit(params, seq, "float64"), dtype=float)
    assert int(np.argmax(theirs)) == target(seq)


def test_b_is_cancelled_at_its_own_query(heads):
    """At the query b the logits times D/w_s do not move with n_b (module docstring)."""
    params = heads[(8, 16)]
    with mpmath.workdps(40):
        e = {t: [mpmath.mpf(x) for x in params.vectors[f"e_{t}"]] for t in "sab"}
        dot = lambda x, y: mpmath.fsum(p * q for p, q in zip(x, y))
        tau = 1 / mpmath.sqrt(8)
        for n_a in (0, 3, 7):
            scaled = []
            for n_b in (1, 4, 16 - n_a):
                seq = "s" + "a" * n_a + "b" * n_b
                D = mpmath.fsum(mpmath.exp(tau * dot(e["b"], e[t])) for t in seq)
                w_s = mpmath.exp(tau * dot(e["b"], e["s"]))
                scaled.append([x * D / w_s for x in own_logits(params, seq)])
            for other in scaled[1:]:
                assert max(abs(p - q) for p, q in zip(other, scaled[0])) < mpmath.mpf(10) ** -25


def test_lower_bound_is_monotone_and_below_every_certified_bound(heads):
    values = [contrast_lower.b_lower(cell(), L) for L in range(1, 80)]
    assert values[:4] == [0.0] * 4 and values[4] > 0
    assert all(a <= b for a, b in zip(values, values[1:]))
    for (d, L), params in heads.items():
        assert contrast_lower.b_lower(cell(d), L) < rigorous_bound(params, exclude=("u",))


def test_lower_bound_has_the_construction_slope():
    """B_lower^2 = (sqrt(d)/2) ln((L - 1)/2) + o(1): the slope of the construction's law."""
    for L in (2**10, 2**16):
        b = contrast_lower.b_lower(cell(), L)
        assert b**2 == pytest.approx(math.sqrt(8) / 2 * math.log((L - 1) / 2), abs=1e-3)


def _inputs(L):
    """Every input (n_a, n_b, last token) of the select task read last with length <= L."""
    out = [(0, 0, "s")]
    for n_a in range(L + 1):
        for n_b in range(L + 1 - n_a):
            if n_a:
                out.append((n_a, n_b, "a"))
            if n_b:
                out.append((n_a, n_b, "b"))
    return out


def _residual(e, n_a, n_b, q, d):
    """The residual ``r = e_q + A`` of the input with ``n_a`` tokens ``a``, ``n_b`` tokens ``b``
    and last token ``q``, softmax at ``q`` (a float pass of its own)."""
    counts = {"s": 1, "a": n_a, "b": n_b}
    w = {t: counts[t] * math.exp(e[q] @ e[t] / math.sqrt(d)) for t in "sab"}
    return e[q] + sum(w[t] * e[t] for t in "sab") / sum(w.values())


def lp_margin(e, L, d):
    """The largest margin of any head (every entry of u in [-1, 1], biases free) on the outputs
    of the embeddings ``e`` (float LP over the outputs of every input)."""
    zs, cls = [], []
    for n_a, n_b, q in _inputs(L):
        zs.append(_residual(e, n_a, n_b, q, d))
        cls.append(n_a)
    C, nv = L + 1, (L + 1) * (d + 1) + 1  # u_c (d), b_c, then m
    rows = []
    for z, n in zip(zs, cls):
        for c in range(C):
            if c == n:
                continue
            row = np.zeros(nv)
            row[c * (d + 1):c * (d + 1) + d] = z
            row[c * (d + 1) + d] = 1
            row[n * (d + 1):n * (d + 1) + d] -= z
            row[n * (d + 1) + d] -= 1
            row[-1] = 1
            rows.append(row)  # l_c - l_n + m <= 0
    bounds = [(-1, 1)] * nv
    for c in range(C):
        bounds[c * (d + 1) + d] = (None, None)
    bounds[-1] = (None, 1)
    cost = np.zeros(nv)
    cost[-1] = -1
    res = linprog(cost, A_ub=np.array(rows), b_ub=np.zeros(len(rows)), bounds=bounds, method="highs")
    return -res.fun


def test_the_necessary_condition_against_an_lp_over_heads():
    """Embeddings that break the proof's inequality admit no head (LP margin <= 0 to float
    noise); the construction's embeddings, which keep it, admit one."""
    L, d = 7, 3
    tau = 1 / math.sqrt(d)
    rng = np.random.default_rng(5)
    broken = 0
    for _ in range(40):
        e = {t: rng.normal(size=d) * rng.uniform(0.3, 2.5) for t in "sab"}
        a, b = e["a"], e["b"]
        lhs = 2 * math.exp(tau * (a @ a - a @ b)) + math.exp(tau * (a @ a - b @ b)) / (L - 3)
        if lhs < L - 1:
            broken += 1
            assert lp_margin(e, L, d) < 1e-9
    assert broken >= 5
    params = classification.design(cell(d)).build(L)
    e = {t: np.array([float(x) for x in params.vectors[f"e_{t}"]]) for t in "sab"}
    assert lp_margin(e, L, d) > 1e-7


def test_rows_report_the_embeddings_bound_not_an_infimum():
    row = search.classification_row(cell(), 16)
    assert row["certified"] and row["B_min_is_infimum"] is False
    assert row["B_lower"] == contrast_lower.b_lower(cell(), 16) > 1
    assert row["B_lower"] < row["B_min"] and row["margin_upper"] is None
    params = classification.design(cell()).build(16)
    assert row["B_min"] == rigorous_bound(params, exclude=("u",))
    report = check(params, 16, exact=False)
    assert report["verdict"] == "counts" and report["B_min"] is None
    assert not report["B_min_is_infimum"]


def test_the_readme_row_at_16():
    """The README's table row of L = 16 is what the sweep's row reports."""
    import os
    import re

    with open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text.split("### Classification of the select task read last with softmax attention")[1]
    (line,) = re.findall(r"^\| 16 \| (\S+) \| (\S+) \| (\S+) \|$", section.split("## ")[0], flags=re.M)
    row = search.classification_row(cell(), 16)
    assert float(line[0]) >= row["B_min"] and float(line[0]) - row["B_min"] < 1e-6
    assert float(line[1]) <= row["B_lower"] and row["B_lower"] - float(line[1]) < 1e-6
    assert float(line[2]) == pytest.approx(row["margin"], rel=2e-3)


POST = [Cell(attention="softmax", variant=v, readout="classification", d=d, task="select", read="last",
             **({"affine": a} if a else {}))
        for v, a in (("post_bare", None), ("post_learned", "gain"), ("post_learned", None)) for d in (3, 8)]
POST += [Cell(attention="softmax", variant=v, readout="classification", d=d, task="select", read="last",
              norm="rmsnorm", **({"affine": a} if a else {}))
         for v, a in (("post_bare", None), ("post_learned", None)) for d in (3, 8)]


@pytest.mark.parametrize("post", POST, ids=lambda c: c.describe())
def test_after_post_norm_the_head_reads_t(post):
    """A head orthogonal to e_b (e_b on the all-ones axis) without biases reads every output at
    its t; certified at small L, and the independent pass (with the norm) agrees."""
    for L in (1, 3, 6, 12):
        params = classification.design(post).build(L)
        res = certify(params, L)
        assert res.certified, (post.describe(), L, res.verdict)
        e_b = np.array([float(x) for x in params.vectors["e_b"]])
        assert np.ptp(e_b) < 1e-15
    seqs = ["s", "sb", "sab", "sba", "saaab", "sbbba", "sabbabbaaab", "sbbbbbbbbbb"]
    for seq in seqs:
        logits = np.asarray(explicit(params, seq, "float64"), dtype=float)
        assert int(np.argmax(logits)) == target(seq)
    row = search.classification_row(post, 12)
    assert row["certified"] and not row["B_min_is_infimum"]
    assert row["B_min"] == rigorous_bound(params, exclude=("u",))
    assert 0 < row["B_lower"] == contrast_lower.b_lower(post, 12) < row["B_min"]


def _pair_outputs(e, L, d, centred):
    """The normalised outputs ``N(r)`` (eps = 0, an own pass) of every input of class 1 and of
    class 2, read at its last token."""
    out = {1: [], 2: []}
    for n_a, n_b, q in _inputs(L):
        if n_a not in out:
            continue
        r = _residual(e, n_a, n_b, q, d)
        r = r - r.mean() if centred else r
        out[n_a].append(math.sqrt(d) * r / np.linalg.norm(r))
    return out


def _separable(out, d):
    """Whether some ``(l, delta)`` (``|l_i| <= 1``) has ``<l, y> + delta <= -m`` on class 1 and
    ``>= m`` on class 2 with ``m > 1e-7``: the logit difference of any head with any gain and bias
    after the norm (float LP)."""
    rows = [np.r_[y, 1.0, 1.0] for y in out[1]] + [np.r_[-y, -1.0, 1.0] for y in out[2]]
    cost = np.zeros(d + 2)
    cost[-1] = -1
    res = linprog(cost, A_ub=np.array(rows), b_ub=np.zeros(len(rows)),
                  bounds=[(-1, 1)] * d + [(None, None), (None, 1)], method="highs")
    return -res.fun > 1e-7


#: the Gram matrix (at unit bound) of the embeddings that need the least bound for the chart's
#: necessary condition on the classes 1 and 2 (a search; the LP needs x^2 about 8-16 (L - 1)/3)
HULL_GRAM = np.array([[1.0, -0.9385924, 0.54629104], [-0.9385924, 0.99844217, -0.70233458],
                      [0.54629104, -0.70233458, 0.61629504]])


def _post(d, centred):
    return Cell(attention="softmax", variant="post_bare", readout="classification", d=d,
                task="select", read="last", norm="layernorm" if centred else "rmsnorm")


@settings(max_examples=30, deadline=None)
@given(st.integers(5, 40), st.sampled_from([3, 8]), st.booleans(), st.integers(0, 2**32 - 1),
       st.floats(0.2, 1.0))
def test_post_norm_lower_bound_against_an_lp_over_heads(L, d, centred, seed, shrink):
    """After post-norm (LayerNorm: centred; RMSNorm) no head separates the classes 1 and 2 when
    the embeddings' bound is at most the proven one: the LP over every head's logit difference
    ``<l, N(r)> + delta`` (any gain and bias folded in) finds no margin.  The directions are
    random, or near :data:`HULL_GRAM`."""
    rng = np.random.default_rng(seed)
    U = rng.normal(size=(3, d))
    if seed % 2:
        U = np.zeros((3, d))
        U[:, :3] = np.linalg.cholesky(HULL_GRAM)
        U += 0.02 * rng.normal(size=(3, d))
    U /= np.linalg.norm(U, axis=1).max()
    e = dict(zip("abs", contrast_lower.b_lower(_post(d, centred), L) * shrink * U))
    assert not _separable(_pair_outputs(e, L, d, centred), d)


@pytest.mark.parametrize("centred", [True, False])
def test_post_norm_construction_is_separable_only_above_the_bound(centred):
    """The LP check can fail: the construction's embeddings separate the classes 1 and 2 at their
    own bound, and no longer when scaled down to the proven one."""
    for L in (6, 12, 24):
        post = _post(3, centred)
        params = classification.design(post).build(L)
        e = {t: np.array([float(x) for x in params.vectors[f"e_{t}"]]) for t in "sab"}
        assert _separable(_pair_outputs(e, L, 3, centred), 3)
        scale = contrast_lower.b_lower(post, L) / rigorous_bound(params, exclude=("u",))
        assert not _separable(_pair_outputs({t: scale * v for t, v in e.items()}, L, 3, centred), 3)


def test_the_readme_post_norm_lower_bound():
    """The README's B_lower(1024) after post-norm is the proven bound at d = 8, rounded down."""
    import os
    import re

    with open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text.split("### Classification of the select task read last with softmax attention")[1]
    (quoted,) = re.findall(r"`B_lower\(1024\) =\s+(\d+\.\d+)` at `d = 8`", section.split("## ")[0])
    for kind in (True, False):
        b = contrast_lower.b_lower(_post(8, kind), 1024)
        assert float(quoted) <= b < float(quoted) + 1e-6


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_bare_post_norm_rows_carry_a_budget_free_margin_upper(norm):
    """After bare post-norm the contrast rows (embeddings of norm B_min > 1) carry the count
    task's BOS arc bound of ``L - 1``, which holds at every budget (every output has norm
    ``sqrt(d)``); the certified margin is below it.  With a gain (its norm grows with the
    budget) no bound is claimed."""
    from bounds.margin import margin_upper

    c = Cell("softmax", "post_bare", "classification", d=8, task="select", read="last", norm=norm)
    for L in (5, 16):
        row = search.classification_row(c, L)
        assert row["certified"] and row["B_min"] > 1
        assert row["margin_upper"] == margin_upper(c.replace(task="count", read="bos"), L - 1)
        assert 0 < row["margin"] <= row["margin_upper"]
    gain = c.replace(variant="post_learned", affine="gain")
    assert margin_upper(gain, 16) is None
