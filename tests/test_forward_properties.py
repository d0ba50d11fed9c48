"""Properties of the forward pass over every architecture (attention x placement x norm kind x
affine x read-out, :data:`helpers.ARCHS`): explicit == reduced, permutation invariance, scale
invariance of LayerNorm and RMSNorm, float64 vs mpmath agreement and ball enclosures."""

from __future__ import annotations

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.cell import Cell, Params
from helpers import (ARCH_IDS, ARCHS, KIND_NAMES, U64, arb_radius, arch_cell, as_mp_list, error_scale,
                     error_scales, examples, random_params, ref_mp, ref_norm, to_mp)
from verify import explicit, reduced
from verify.backends import get_backend
from verify.forward import _normalise, numbers

# Float64 tolerance.  Every output is a chain of roundings whose longest part is the sum over
# the N <= 200 positions (explicit) or a handful of operations per token (reduced), plus ~16
# operations for the scores, exp, the norm and read-out.  Each rounding is at most one unit
# round-off u = 2^-53 of the magnitude it touches, and ``helpers.error_scale`` bounds those
# magnitudes to first order (including the norm's amplification ~ sqrt(d)/|C(r)|).  So
# |error| <= (N + 16) u S up to small constants; we allow a factor 8 on top.  (Measured on random
# draws: the worst ratio error / ((N + 16) u S) is below 0.03, so the bound is not tight but the
# test still catches any real discrepancy, which would be O(1) relative to S, i.e. ~1e13 times
# larger than the tolerance.)
F64_FACTOR = 8
#: mp50 works at 50 digits (169 bits); the same first-order bound with u = 2^-160 (a margin of
#: 2^9 over its unit round-off)
MP50_U = mpmath.mpf(2) ** -160
ARB_SLACK = mpmath.mpf("1e-95")  # a 100-digit value lies in an arb256 ball up to its own rounding
ARB_RAD = mpmath.mpf("1e-60")  # arb256 balls are tight: radius ~1e-75 of the error scale

PRE_ARCHS = [a for a in ARCHS if a[1].startswith("pre")]
POST_ARCHS = [a for a in ARCHS if a[1].startswith("post")]
AFFINE_CHOICES = (None, "gain", "gain_bias")  # bare, and the two learned affines


def f64_tol(N, S):
    return F64_FACTOR * (N + 16) * U64 * S


def mp50_tol(N, S):
    return F64_FACTOR * (N + 16) * MP50_U * S


def max_abs_diff(x, y):
    xs, ys = as_mp_list(x), as_mp_list(y)
    assert len(xs) == len(ys)
    return max(abs(a - b) for a, b in zip(xs, ys))


def assert_enclosed(balls, values, S):
    """Every ball contains its value (up to :data:`ARB_SLACK` S) and is tight."""
    balls, values = np.atleast_1d(balls), as_mp_list(values)
    assert len(balls) == len(values)
    for ball, v in zip(balls, values):
        mid, rad = to_mp(ball), arb_radius(ball)
        with mpmath.workprec(600):
            assert abs(mid - v) <= rad + ARB_SLACK * S
            assert rad <= ARB_RAD * S


@st.composite
def draws(draw, arch, distractor=True, max_len=200):
    d = draw(st.integers(3, 8), label="d")
    eps = draw(st.sampled_from([0.0, 0.0, 0.125, 1e-3]), label="eps")
    read = draw(st.sampled_from(["bos", "last"]), label="read")
    cell = arch_cell(arch, d=d, eps=eps, task="select" if distractor else "count", read=read)
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    scale = draw(st.floats(0.3, 2.0), label="scale")
    classes = draw(st.integers(2, 5), label="classes")
    params = random_params(cell, np.random.default_rng(seed), classes=classes, scale=scale)
    n = draw(st.integers(0, max_len), label="length")
    alphabet = "ab" if distractor else "a"
    rest = draw(st.lists(st.sampled_from(alphabet), min_size=n, max_size=n), label="tokens")
    return params, "s" + "".join(rest)


# ------------------------------------------------------------------ explicit == reduced


@pytest.mark.parametrize("arch", ARCHS, ids=ARCH_IDS)
@settings(max_examples=examples(15))
@given(data=st.data())
def test_explicit_equals_reduced(arch, data):
    """Token by token and by counts agree: in float64 and mp50 to first-order rounding bounds,
    and the arb256 balls of both contain the 100-digit value."""
    params, seq = data.draw(draws(arch))
    na, nb = seq.count("a"), seq.count("b")
    q = [seq[-1]] if params.cell.read.last else None  # the read position's token
    N = len(seq) - 1
    S = error_scale(params, na, nb)
    ex50 = explicit(params, seq, "mp50")
    rd50 = reduced(params, [na], [nb], "mp50", query=q)[0]
    assert max_abs_diff(ex50, rd50) <= mp50_tol(N, S)
    ex64 = explicit(params, seq, "float64")
    rd64 = reduced(params, [na], [nb], "float64", query=q)[0]
    tol = f64_tol(N, S)
    assert max_abs_diff(ex64, rd64) <= tol
    # each float64 pass is also close to the (much more precise) mp50 value
    assert max_abs_diff(ex64, rd50) <= tol
    assert max_abs_diff(rd64, rd50) <= tol
    rd100 = reduced(params, [na], [nb], "mp100", query=q)[0]
    assert max_abs_diff(ex50, rd100) <= mp50_tol(N, S)
    assert_enclosed(explicit(params, seq, "arb256"), rd100, S)
    assert_enclosed(reduced(params, [na], [nb], "arb256", query=q)[0], rd100, S)


def test_explicit_differs_from_reduced_for_different_counts():
    """Guard against a vacuous comparison: the output does depend on the counts."""
    rng = np.random.default_rng(7)
    p = random_params(Cell("softmax", "post_bare", "regression", d=5, task="select"), rng)
    assert abs(to_mp(explicit(p, "saab", "mp50")) - to_mp(reduced(p, [1], [2], "mp50")[0])) > 1e-6


@pytest.mark.parametrize("arch", [a for a in ARCHS if a[2] == "regression"],
                         ids=[i for a, i in zip(ARCHS, ARCH_IDS) if a[2] == "regression"])
@settings(max_examples=examples(8))
@given(data=st.data())
def test_gram_readout_equals_the_readout_of_z(arch, data):
    """The regression read-out from the Gram matrix (no vector z formed) equals <w, z> + w0 of
    the vectors z the same pass returns with ``readout=False``."""
    params, seq = data.draw(draws(arch, max_len=40))
    n_a = list(range(0, 41, 5))
    n_b = [seq.count("b")] * len(n_a)
    # at the last read: b last where there is one, else a (s for the empty input)
    q = ([("b" if nb else "a" if na else "s") for na, nb in zip(n_a, n_b)]
         if params.cell.read.last else None)
    y = as_mp_list(reduced(params, n_a, n_b, "mp50", query=q))
    z = reduced(params, n_a, n_b, "mp50", readout=False, query=q)
    w, w0 = params.vectors["w"], params.scalars["w0"]
    S = error_scales(params, list(zip(n_a, n_b)))
    for k, row in enumerate(z):
        with mpmath.workdps(80):
            want = sum(wi * to_mp(zi) for wi, zi in zip(w, row)) + w0
        assert abs(y[k] - want) <= mp50_tol(0, S[k])


# ------------------------------------------------------------------ permutation invariance


@settings(max_examples=examples(40))
@given(data=st.data(), arch=st.sampled_from(ARCHS))
def test_permutation_invariance(data, arch):
    """Permuting x_1..x_m changes nothing (at the last read: keeping the last token)."""
    params, seq = data.draw(draws(arch, max_len=60))
    keep = 1 if params.cell.read.last and len(seq) > 1 else 0
    body, tail = seq[1:len(seq) - keep], seq[len(seq) - keep:]
    shuffled = "s" + "".join(data.draw(st.permutations(list(body)), label="perm")) + tail
    S = error_scale(params, seq.count("a"), seq.count("b"))
    out = explicit(params, seq, "mp50")
    assert max_abs_diff(out, explicit(params, shuffled, "mp50")) <= mp50_tol(len(seq), S)


# ------------------------------------------------------------------ scale invariance of the norms


def _h(params, token, backend):
    bk = get_backend(backend)
    with bk.context():
        return numbers(params, bk).h[token]


def _pre_params(v, eps=0.0, affine=None, d=None, kind="layernorm"):
    """softmax / pre-norm / regression with ``e_s = v`` (the affine's vectors random, fixed)."""
    d = len(v) if d is None else d
    cell = Cell("softmax", "pre_learned" if affine else "pre_bare", "regression", d=d, eps=eps,
                norm=kind, affine=affine)
    vectors = {"e_s": v, "e_a": np.arange(1, d + 1, dtype=float), "w": np.ones(d)}
    rng = np.random.default_rng(1)
    vectors.update({name: rng.normal(size=d) for name in cell.affine.vectors})
    return Params(cell, vectors, {"w0": 0})


@settings(max_examples=examples(40))
@given(seed=st.integers(0, 2**32 - 1), c=st.floats(1e-3, 1e3), d=st.integers(3, 8),
       kind=st.sampled_from(KIND_NAMES), affine=st.sampled_from(AFFINE_CHOICES))
def test_norm_scale_invariant_at_eps0(seed, c, d, kind, affine):
    """N(c v) = N(v) for c > 0 through the toolkit's norm (pre-norm token values), for
    LayerNorm and RMSNorm under every affine."""
    v = np.random.default_rng(seed).normal(size=d)
    with mpmath.workprec(300):
        cv = [mpmath.mpf(c) * mpmath.mpf(float(x)) for x in v]  # exact product (<= 106 bits)
    base, scaled = _pre_params(v, affine=affine, kind=kind), _pre_params(cv, affine=affine, kind=kind)
    # float64 rounds c v to the nearest floats first: a relative perturbation of u per entry
    for backend, tol in (("mp50", 1e-45), ("float64", 1e-13)):
        h0, h1 = as_mp_list(_h(base, "s", backend)), as_mp_list(_h(scaled, "s", backend))
        with mpmath.workdps(80):
            assert max(abs(a - b) for a, b in zip(h0, h1)) <= tol * (1 + max(abs(a) for a in h0))
    # and it is the normalised vector (bare): mean square 1, and mean 0 for LayerNorm
    if affine is None:
        h = as_mp_list(_h(base, "s", "mp50"))
        with mpmath.workdps(80):
            assert abs(sum(x * x for x in h) / d - 1) < 1e-45
            if kind == "layernorm":
                assert abs(sum(h) / d) < 1e-45
            else:  # RMSNorm keeps the direction of v
                ratio = [x / mpmath.mpf(float(y)) for x, y in zip(h, v)]
                assert max(ratio) - min(ratio) < 1e-45 * max(ratio) and min(ratio) > 0


@settings(max_examples=examples(20))
@given(seed=st.integers(0, 2**32 - 1), c=st.sampled_from([0.1, 0.5, 2.0, 10.0]), d=st.integers(3, 8),
       kind=st.sampled_from(KIND_NAMES))
def test_norm_not_scale_invariant_with_eps(seed, c, d, kind):
    """With eps > 0, N(c v) != N(v): C(v)/sqrt(|C(v)|^2/d + eps) depends on the scale."""
    v = np.random.default_rng(seed).normal(size=d)
    eps = 0.25
    h0 = as_mp_list(_h(_pre_params(v, eps=eps, kind=kind), "s", "mp50"))
    p1 = _pre_params(c * v, eps=eps, kind=kind)  # c * v: floats, used as given
    h1 = as_mp_list(_h(p1, "s", "mp50"))
    assert max(abs(a - b) for a, b in zip(h0, h1)) > 1e-6
    # exact value by the reference: N(cv) = C(cv) / sqrt(c^2 |C(v)|^2/d + eps)
    with mpmath.workdps(60):
        vv = [mpmath.mpf(float(x)) for x in c * v]
        want = ref_norm(p1.cell, vv, {}, mpmath.mpf(eps), mpmath.sqrt)
        assert max(abs(a - b) for a, b in zip(h1, want)) < 1e-45


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("affine", AFFINE_CHOICES)
def test_norm_rows_scale_invariant(kind, affine):
    """The post-norm path: _normalise on a batch of rows, each scaled by its own c > 0."""
    rng = np.random.default_rng(3)
    d = 6
    cell = Cell("linear", "post_learned" if affine else "post_bare", "regression", d=d, norm=kind,
                affine=affine)
    p = random_params(cell, rng)
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


@pytest.mark.parametrize("arch", PRE_ARCHS, ids=[i for a, i in zip(ARCHS, ARCH_IDS) if a in PRE_ARCHS])
def test_pre_norm_output_invariant_under_scaling_counted_embeddings(arch):
    """Pre-norm, eps = 0: h_a = LN(e_a) and h_b = LN(e_b) ignore the scale of e_a, e_b; e_a, e_b
    enter nowhere else (the residual uses the raw e_s only), so the outputs are unchanged."""
    rng = np.random.default_rng(11)
    cell = arch_cell(arch, d=5, task="select")
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
    cell_eps = arch_cell(arch, d=5, task="select", eps=0.5)
    pe, qe = Params(cell_eps, V, p.scalars), Params(cell_eps, scaled, p.scalars)
    assert max_abs_diff(reduced(pe, na, nb, "mp50"), reduced(qe, na, nb, "mp50")) > 1e-6


@pytest.mark.parametrize("arch", POST_ARCHS, ids=[i for a, i in zip(ARCHS, ARCH_IDS) if a in POST_ARCHS])
def test_post_norm_scale_invariance_on_a_ray(arch):
    """Post-norm, eps = 0, e_a = k e_s with k > 0: every attention output is a positive multiple
    of e_s, so r = (positive) e_s and z = LN(e_s) for every count and every common scale of the
    embeddings.  Expected value computed by the reference from N(e_s)."""
    rng = np.random.default_rng(5)
    d = 4
    cell = arch_cell(arch, d=d)
    base = random_params(cell, rng, classes=3)
    e_s = [mpmath.mpf(x) for x in (1.0, -0.5, 2.0, 0.25)]
    V = dict(base.vectors)
    na = list(range(0, 12))
    with mpmath.workdps(60):
        z = ref_norm(cell, e_s, V, 0, mpmath.sqrt)
        if cell.readout == "regression":
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
    # with eps > 0 the output moves with the count (z = C(r)/sqrt(|C(r)|^2/d + eps) depends on |r|)
    cell_eps = arch_cell(arch, d=d, eps=0.5)
    p = Params(cell_eps, dict(V, e_s=e_s, e_a=[3 * x for x in e_s]), base.scalars)
    got = as_mp_list(reduced(p, [0, 10], backend="mp50"))
    half = len(got) // 2
    assert max(abs(a - b) for a, b in zip(got[:half], got[half:])) > 1e-6


# ------------------------------------------------------------------ float64 vs mp50, and balls


@pytest.mark.parametrize("arch", ARCHS, ids=ARCH_IDS)
@settings(max_examples=examples(6))
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(1, 64), d=st.integers(3, 8),
       eps=st.sampled_from([0.0, 0.125]))
def test_float64_matches_mp50_and_balls_enclose(arch, seed, L, d, eps):
    cell = arch_cell(arch, d=d, eps=eps)
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
        assert max_abs_diff(mp[k], mp100[k]) <= mp50_tol(L, S[k])
        # the ball contains the 100-digit value (and so the mp50 one up to mp50's rounding)
        assert_enclosed(arb[k], mp100[k], S[k])


@pytest.mark.parametrize("arch", ARCHS, ids=ARCH_IDS)
def test_explicit_ball_contains_reference(arch):
    """explicit on arb256 (with a distractor) encloses a 90-digit hand reference."""
    rng = np.random.default_rng(21)
    cell = arch_cell(arch, d=4, task="select")
    p = random_params(cell, rng, classes=3)
    seq = "sabbaab"
    ref = ref_mp(p, seq, dps=90).out
    ref = ref if isinstance(ref, list) else [ref]
    out = np.atleast_1d(explicit(p, seq, "arb256"))
    assert len(out) == len(ref)
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
@settings(max_examples=examples(20))
@given(arch=st.sampled_from(ARCHS), seed=st.integers(0, 2**32 - 1), d=st.integers(3, 19),
       L=st.integers(1, 24), data=st.data())
def test_each_count_independent_of_the_others_in_the_call(backend, arch, seed, d, L, data):
    """The judge evaluates counts in chunks: every count's output must be bit for bit the same
    whichever other counts are computed with it (the classification logits included, which a
    matrix product could round differently with the shape of its operands)."""
    cell = arch_cell(arch, d=d)
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
    cell = Cell("softmax", "none", "regression", d=4, task="select")
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
