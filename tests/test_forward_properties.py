"""Properties of the forward pass: explicit == reduced, permutation invariance, LayerNorm
scale invariance, float64 vs mpmath agreement and ball enclosures."""

from __future__ import annotations

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.cell import Cell, Params
from helpers import (ALL_CELLS, examples, CELL_IDS, U64, arb_radius, as_mp_list, error_scale, error_scales,
                     random_params, ref_mp, to_mp)
from verify import explicit, reduced
from verify.backends import get_backend
from verify.forward import _normalise, numbers

# Float64 tolerance.  Every output is a chain of roundings whose longest part is the sum over
# the N <= 200 positions (explicit) or a handful of operations per token (reduced), plus ~16
# operations for the scores, exp, LayerNorm and read-out.  Each rounding is at most one unit
# round-off u = 2^-53 of the magnitude it touches, and ``helpers.error_scale`` bounds those
# magnitudes to first order (including LayerNorm's amplification ~ sqrt(d)/|centred r|).  So
# |error| <= (N + 16) u S up to small constants; we allow a factor 8 on top.  (Measured on random
# draws: the worst ratio error / ((N + 16) u S) is below 0.03, so the bound is not tight but the
# test still catches any real discrepancy, which would be O(1) relative to S, i.e. ~1e13 times
# larger than the tolerance.)
F64_FACTOR = 8


def f64_tol(N, S):
    return F64_FACTOR * (N + 16) * U64 * S


MP50_REL = mpmath.mpf("1e-25")  # mp50 carries ~50 digits; required agreement: 1e-25 of the magnitude


def max_abs_diff(x, y):
    xs, ys = as_mp_list(x), as_mp_list(y)
    assert len(xs) == len(ys)
    return max(abs(a - b) for a, b in zip(xs, ys))


@st.composite
def draws(draw, cell_spec, distractor=True, max_len=200):
    attention, norm, readout = cell_spec
    d = draw(st.integers(3, 8), label="d")
    eps = draw(st.sampled_from([0.0, 0.0, 0.125, 1e-3]), label="eps")
    cell = Cell(attention, norm, readout, d=d, eps=eps, distractor=distractor)
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    scale = draw(st.floats(0.3, 2.0), label="scale")
    classes = draw(st.integers(2, 5), label="classes")
    params = random_params(cell, np.random.default_rng(seed), classes=classes, scale=scale)
    n = draw(st.integers(0, max_len), label="length")
    alphabet = "ab" if distractor else "a"
    rest = draw(st.lists(st.sampled_from(alphabet), min_size=n, max_size=n), label="tokens")
    return params, "s" + "".join(rest)


# ------------------------------------------------------------------ explicit == reduced


@pytest.mark.parametrize("cell_spec", ALL_CELLS, ids=CELL_IDS)
@settings(max_examples=examples(15))
@given(data=st.data())
def test_explicit_equals_reduced(cell_spec, data):
    params, seq = data.draw(draws(cell_spec))
    na, nb = seq.count("a"), seq.count("b")
    N = len(seq) - 1
    S = error_scale(params, na, nb)
    ex50 = explicit(params, seq, "mp50")
    rd50 = reduced(params, [na], [nb], "mp50")[0]
    assert max_abs_diff(ex50, rd50) <= MP50_REL * S
    ex64 = explicit(params, seq, "float64")
    rd64 = reduced(params, [na], [nb], "float64")[0]
    tol = f64_tol(N, S)
    assert max_abs_diff(ex64, rd64) <= tol
    # each float64 pass is also close to the (much more precise) mp50 value
    assert max_abs_diff(ex64, rd50) <= tol
    assert max_abs_diff(rd64, rd50) <= tol


def test_explicit_differs_from_reduced_for_different_counts():
    """Guard against a vacuous comparison: the output does depend on the counts."""
    rng = np.random.default_rng(7)
    p = random_params(Cell("softmax", "post_bare", "regression", d=5, distractor=True), rng)
    assert abs(to_mp(explicit(p, "saab", "mp50")) - to_mp(reduced(p, [1], [2], "mp50")[0])) > 1e-6


# ------------------------------------------------------------------ permutation invariance


@settings(max_examples=examples(25))
@given(data=st.data(), cell_spec=st.sampled_from(ALL_CELLS))
def test_permutation_invariance(data, cell_spec):
    params, seq = data.draw(draws(cell_spec, max_len=60))
    shuffled = "s" + "".join(data.draw(st.permutations(list(seq[1:])), label="perm"))
    S = error_scale(params, seq.count("a"), seq.count("b"))
    out = explicit(params, seq, "mp50")
    assert max_abs_diff(out, explicit(params, shuffled, "mp50")) <= mpmath.mpf("1e-40") * S


# ------------------------------------------------------------------ LayerNorm scale invariance


def _h(params, token, backend):
    bk = get_backend(backend)
    with bk.context():
        return numbers(params, bk).h[token]


def _pre_params(v, eps=0.0, learned=False, d=None):
    d = len(v) if d is None else d
    cell = Cell("softmax", "pre_learned" if learned else "pre_bare", "regression", d=d, eps=eps)
    vectors = {"e_s": v, "e_a": np.arange(d, dtype=float), "w": np.ones(d)}
    if learned:
        rng = np.random.default_rng(1)
        vectors["g"], vectors["beta"] = rng.normal(size=d), rng.normal(size=d)
    return Params(cell, vectors, {"w0": 0})


@settings(max_examples=examples(25))
@given(seed=st.integers(0, 2**32 - 1), c=st.floats(1e-3, 1e3), d=st.integers(3, 8),
       learned=st.booleans())
def test_layernorm_scale_invariant_at_eps0(seed, c, d, learned):
    """N(c v) = N(v) for c > 0 through the toolkit's LayerNorm (pre-norm token values)."""
    v = np.random.default_rng(seed).normal(size=d)
    with mpmath.workprec(300):
        cv = [mpmath.mpf(c) * mpmath.mpf(float(x)) for x in v]  # exact product (<= 106 bits)
    base, scaled = _pre_params(v, learned=learned), _pre_params(cv, learned=learned)
    # float64 rounds c v to the nearest floats first: a relative perturbation of u per entry
    for backend, tol in (("mp50", 1e-45), ("float64", 1e-13)):
        h0, h1 = as_mp_list(_h(base, "s", backend)), as_mp_list(_h(scaled, "s", backend))
        with mpmath.workdps(80):
            assert max(abs(a - b) for a, b in zip(h0, h1)) <= tol * (1 + max(abs(a) for a in h0))
    # and it is the normalised vector: mean 0, population variance 1 (bare)
    if not learned:
        h = as_mp_list(_h(base, "s", "mp50"))
        with mpmath.workdps(80):
            assert abs(sum(h)) < 1e-45 and abs(sum(x * x for x in h) / d - 1) < 1e-45


@settings(max_examples=examples(15))
@given(seed=st.integers(0, 2**32 - 1), c=st.sampled_from([0.1, 0.5, 2.0, 10.0]), d=st.integers(3, 8))
def test_layernorm_not_scale_invariant_with_eps(seed, c, d):
    """With eps > 0, N(c v) != N(v): v/sqrt(var + eps) depends on the scale."""
    v = np.random.default_rng(seed).normal(size=d)
    eps = 0.25
    h0 = as_mp_list(_h(_pre_params(v, eps=eps), "s", "mp50"))
    h1 = as_mp_list(_h(_pre_params(c * v, eps=eps), "s", "mp50"))  # c * v: floats, used as given
    assert max(abs(a - b) for a, b in zip(h0, h1)) > 1e-6
    # exact value by hand: N(cv) = c (v - mean v) / sqrt(c^2 var v + eps)
    with mpmath.workdps(60):
        vv = [mpmath.mpf(float(x)) for x in c * v]
        mean = sum(vv) / d
        var = sum((x - mean) ** 2 for x in vv) / d
        want = [(x - mean) / mpmath.sqrt(var + mpmath.mpf(eps)) for x in vv]
        assert max(abs(a - b) for a, b in zip(h1, want)) < 1e-45


@pytest.mark.parametrize("learned", [False, True])
def test_layernorm_rows_scale_invariant(learned):
    """The post-norm path: _normalise on a batch of rows, each scaled by its own c > 0."""
    rng = np.random.default_rng(3)
    d = 6
    p = random_params(Cell("linear", "post_learned" if learned else "post_bare", "regression", d=d), rng)
    rows = rng.normal(size=(5, d))
    cs = [1e-3, 0.3, 1.0, 7.0, 1e4]
    with mpmath.workprec(300):  # exact products of two floats (<= 106 bits, exact in mp50)
        scaled_rows = np.array([[mpmath.mpf(c) * mpmath.mpf(x) for x in row] for c, row in zip(cs, rows)],
                               dtype=object)
    for backend, tol in (("mp50", 1e-40), ("float64", 1e-13)):
        bk = get_backend(backend)
        with bk.context():
            nums = numbers(p, bk)
            z0 = _normalise(p, nums, bk.vec(rows), "post-norm")
            z1 = _normalise(p, nums, bk.vec(scaled_rows), "post-norm")
        with mpmath.workdps(80):
            for a, b in zip(np.ravel(z0), np.ravel(z1)):
                assert abs(to_mp(a) - to_mp(b)) <= tol * 10


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("norm", ["pre_bare", "pre_learned"])
@pytest.mark.parametrize("readout", ["regression", "classification"])
def test_pre_norm_output_invariant_under_scaling_counted_embeddings(attention, norm, readout):
    """Pre-norm, eps = 0: h_a = LN(e_a) and h_b = LN(e_b) ignore the scale of e_a, e_b; e_a, e_b
    enter nowhere else (the residual uses the raw e_s only), so the outputs are unchanged."""
    rng = np.random.default_rng(11)
    cell = Cell(attention, norm, readout, d=5, distractor=True)
    p = random_params(cell, rng, classes=3)
    V = {k: v for k, v in p.vectors.items()}
    with mpmath.workprec(100):
        c_a, c_b = mpmath.mpf(3.5), mpmath.mpf("0.3")  # 0.3 rounded to 100 bits
    with mpmath.workprec(300):  # exact scaled copies (53 + 100 bits, exact in mp50's 166 bits)
        scaled = dict(V, e_a=[c_a * x for x in V["e_a"]], e_b=[c_b * x for x in V["e_b"]])
    q = Params(cell, scaled, p.scalars)
    na, nb = [0, 1, 2, 5, 9, 40], [0, 3, 0, 5, 1, 17]
    y0, y1 = reduced(p, na, nb, "mp50"), reduced(q, na, nb, "mp50")
    S = max(error_scales(p, list(zip(na, nb))))
    assert max_abs_diff(y0, y1) <= mpmath.mpf("1e-40") * S
    # while scaling e_s does change the output (it is also the raw residual)
    r = Params(cell, dict(V, e_s=[2 * x for x in V["e_s"]]), p.scalars)
    assert max_abs_diff(y0, reduced(r, na, nb, "mp50")) > 1e-6
    # and with eps > 0 the invariance is lost
    cell_eps = Cell(attention, norm, readout, d=5, distractor=True, eps=0.5)
    pe, qe = Params(cell_eps, V, p.scalars), Params(cell_eps, scaled, p.scalars)
    assert max_abs_diff(reduced(pe, na, nb, "mp50"), reduced(qe, na, nb, "mp50")) > 1e-6


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("norm", ["post_bare", "post_learned"])
@pytest.mark.parametrize("readout", ["regression", "classification"])
def test_post_norm_scale_invariance_on_a_ray(attention, norm, readout):
    """Post-norm, eps = 0, e_a = k e_s with k > 0: every attention output is a positive multiple
    of e_s, so r = (positive) e_s and z = LN(e_s) for every count and every common scale of the
    embeddings.  Expected value computed by hand from N(e_s)."""
    rng = np.random.default_rng(5)
    d = 4
    cell = Cell(attention, norm, readout, d=d)
    base = random_params(cell, rng, classes=3)
    e_s = [mpmath.mpf(x) for x in (1.0, -0.5, 2.0, 0.25)]
    V = dict(base.vectors)
    na = list(range(0, 12))
    with mpmath.workdps(60):
        mean = sum(e_s) / d
        sd = mpmath.sqrt(sum((x - mean) ** 2 for x in e_s) / d)
        z = [(x - mean) / sd for x in e_s]
        if cell.learned:
            z = [g * zi + b for g, zi, b in zip(V["g"], z, V["beta"])]
        if readout == "regression":
            want = sum(w * zi for w, zi in zip(V["w"], z)) + base.scalars["w0"]
            want = [[want]] * len(na)
        else:
            want = [[sum(u * zi for u, zi in zip(row, z)) + b for row, b in zip(V["u"], base.scalars["b"])]] * len(na)
    for c in (0.25, 1.0, 4.0):
        for k in (0.5, 3.0):
            vec = dict(V, e_s=[c * x for x in e_s], e_a=[c * k * x for x in e_s])
            p = Params(cell, vec, base.scalars)
            got = reduced(p, na, backend="mp50")
            assert max_abs_diff(got, want) < 1e-40
    # with eps > 0 the output moves with the count (z = r/sqrt(var r + eps) depends on |r|)
    cell_eps = Cell(attention, norm, readout, d=d, eps=0.5)
    p = Params(cell_eps, dict(V, e_s=e_s, e_a=[3 * x for x in e_s]), base.scalars)
    got = as_mp_list(reduced(p, [0, 10], backend="mp50"))
    half = len(got) // 2
    assert max(abs(a - b) for a, b in zip(got[:half], got[half:])) > 1e-6


# ------------------------------------------------------------------ float64 vs mp50, and balls


@pytest.mark.parametrize("cell_spec", ALL_CELLS, ids=CELL_IDS)
@settings(max_examples=examples(6))
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(1, 64), d=st.integers(3, 8),
       eps=st.sampled_from([0.0, 0.125]))
def test_float64_matches_mp50_and_balls_enclose(cell_spec, seed, L, d, eps):
    attention, norm, readout = cell_spec
    cell = Cell(attention, norm, readout, d=d, eps=eps)
    params = random_params(cell, np.random.default_rng(seed), classes=3)
    n = list(range(L + 1))
    S = error_scales(params, [(k, 0) for k in n])
    mp = reduced(params, n, backend="mp50")
    f64 = reduced(params, n, backend="float64")
    mp100 = reduced(params, n, backend="mp100")
    arb = reduced(params, n, backend="arb256")
    for k in n:
        # float64 vs mp50: the same first-order rounding bound as above, N = 0 summed terms in the
        # reduced form but the counts enter as factors; (L + 16) covers it generously.
        assert max_abs_diff(f64[k], mp[k]) <= f64_tol(L, S[k])
        for ball, v50, v100 in zip(np.atleast_1d(arb[k]), as_mp_list(mp[k]), as_mp_list(mp100[k])):
            mid, rad = to_mp(ball), arb_radius(ball)
            with mpmath.workprec(600):
                # the mp50 value lies in the ball up to mp50's own rounding (tiny slack)
                assert abs(mid - v50) <= rad + mpmath.mpf("1e-45") * S[k]
                # a 100-digit value must lie in the ball up to 1e-95 (radius is ~1e-75)
                assert abs(mid - v100) <= rad + mpmath.mpf("1e-95") * S[k]
                assert rad <= mpmath.mpf("1e-60") * S[k]  # and the ball is tight


@pytest.mark.parametrize("cell_spec", [c for c in ALL_CELLS if c[1] in ("none", "post_learned", "pre_bare")],
                         ids=lambda c: "/".join(c))
def test_explicit_ball_contains_reference(cell_spec):
    """explicit on arb256 (with a distractor) encloses an 80-digit hand reference."""
    rng = np.random.default_rng(21)
    cell = Cell(*cell_spec, d=4, distractor=True)
    p = random_params(cell, rng, classes=3)
    seq = "sabbaab"
    ref = ref_mp(p, seq, dps=90).out
    ref = ref if isinstance(ref, list) else [ref]
    out = np.atleast_1d(explicit(p, seq, "arb256"))
    for ball, want in zip(out, ref):
        with mpmath.workprec(600):
            assert abs(to_mp(ball) - want) <= arb_radius(ball) + mpmath.mpf("1e-85")


# ------------------------------------------------------------------ outputs per count, whatever the call


def _exactly(x):
    """A backend number as a comparable exact value (a ball: its midpoint and radius; NaN as
    itself, so that a NaN in both places compares equal)."""
    if isinstance(x, flint.arb):
        return (to_mp(x), arb_radius(x))
    v = to_mp(x)
    return "nan" if mpmath.isnan(v) else v


@pytest.mark.parametrize("backend", ["float64", "float16", "mp30", "arb128"])
@settings(max_examples=examples(12))
@given(spec=st.sampled_from(ALL_CELLS), seed=st.integers(0, 2**32 - 1), d=st.integers(3, 19),
       L=st.integers(1, 24), data=st.data())
def test_each_count_independent_of_the_others_in_the_call(backend, spec, seed, d, L, data):
    """The judge evaluates counts in chunks: every count's output must be bit for bit the same
    whichever other counts are computed with it (the classification logits included, which a
    matrix product could round differently with the shape of its operands)."""
    cell = Cell(*spec, d=d)
    params = random_params(cell, np.random.default_rng(seed), classes=L + 1)
    every = reduced(params, range(L + 1), backend=backend)
    some = data.draw(st.lists(st.integers(0, L), min_size=1, max_size=L + 1), label="counts")
    part = reduced(params, some, backend=backend)
    for k, out in zip(some, part):
        assert [_exactly(x) for x in np.atleast_1d(out)] == [_exactly(x) for x in np.atleast_1d(every[k])]


# ------------------------------------------------------------------ softmax stability


@pytest.mark.parametrize("backend", ["float64", "mp50", "arb256"])
def test_softmax_with_huge_scores_is_stable(backend):
    """Scores far beyond float64's exp range (~709): the softmax must subtract the largest score
    *present* (an absent token's score must not enter, or exp underflows to 0/0).

    d = 4, tau = 1/2: sigma_s = 800, sigma_a = 780, sigma_b = 2000.  By hand, with n_a copies
    of a and n_b of b, the weights are proportional to 1, n_a e^-20, n_b e^1200.
    """
    cell = Cell("softmax", "none", "regression", d=4, distractor=True)
    e_s, e_a, e_b = [40, 0, 0, 0], [39, 1, 0, 0], [100, 0, 0, 0]
    w = [0.25, 1.0, 0.0, 0.0]
    p = Params(cell, {"e_s": e_s, "e_a": e_a, "e_b": e_b, "w": w}, {"w0": -1.0})
    counts = [(0, 0), (1, 0), (7, 0), (200, 0), (0, 1), (3, 2)]
    with mpmath.workdps(60):
        want = []
        for na, nb in counts:
            ws, wa, wb = mpmath.mpf(1), na * mpmath.exp(-20), nb * mpmath.exp(1200)
            Z = ws + wa + wb
            r = [e_s[i] + (ws * e_s[i] + wa * e_a[i] + wb * e_b[i]) / Z for i in range(4)]
            want.append(sum(wi * ri for wi, ri in zip(w, r)) - 1)
    na, nb = zip(*counts)
    got = as_mp_list(reduced(p, list(na), list(nb), backend))
    for (a, b), g, v in zip(counts, got, want):
        assert mpmath.isfinite(g)
        assert abs(g - v) <= 1e-12 * abs(v)
        if a + b <= 7:
            e = to_mp(explicit(p, "s" + "a" * a + "b" * b, backend))
            assert mpmath.isfinite(e) and abs(e - v) <= 1e-12 * abs(v)
