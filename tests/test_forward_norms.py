"""RMSNorm and the affines (bare, gain, gain_bias) in the forward pass, by hand at d = 3, and
where a norm with eps = 0 is undefined.

Every expected value is computed here from the specification's formulas (RMSNorm
``N(v) = v / sqrt(mean(v^2) + eps)``, then ``N(v)``, ``g * N(v)`` or ``g * N(v) + beta``) with the
small integer vectors of ``helpers.hand_params``: ``e_s = (1, 0, 2)``, ``e_a = (0, 1, -1)``,
``g = (1, 2, -1)``, ``beta = (0, 1, 1)``, ``w = (1, 2, 3)``, ``w0 = 1/2``, ``tau = 1/sqrt(3)``;
so ``mean(e_s^2) = 5/3``, ``mean(e_a^2) = 2/3``, ``<w, e_s> = 7``, ``<w, e_a> = -1`` and
``<w, beta> = 5``.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from constructions.cell import Cell, Params
from helpers import B, BETA, E_A, E_S, G, U, W, W0, arb_radius, as_mp_list, close, hand_params, ref_mp, to_mp
from verify import LayerNormUndefined, NormUndefined, counts_to, explicit, reduced
from verify.backends import get_backend
from verify.forward import numbers

BACKENDS = ["float64", "mp50", "arb256"]


def rms(*args, **kw):
    """:func:`helpers.hand_params` for RMSNorm."""
    return hand_params(*args, kind="rmsnorm", **kw)[0]


def agrees(got, want, backend, rel=1e-13):
    """``got`` (backend numbers) equals ``want`` (floats computed by hand): to ``rel`` of the
    magnitude in floats and mpmath, and inside the ball (up to float rounding of ``want``) on
    balls."""
    got, want = np.atleast_1d(got), np.atleast_1d(np.asarray(want, dtype=float))
    assert got.shape == want.shape
    if backend.startswith("arb"):
        for ball, w in zip(got, want):
            assert abs(to_mp(ball) - mpmath.mpf(w)) <= arb_radius(ball) + 1e-14 * (1 + abs(w))
    else:
        close([float(x) for x in got], want, rel)


# ----------------------------------------------------------------- written out by hand


@pytest.mark.parametrize("backend", BACKENDS)
def test_linear_pre_rmsnorm_bare_written_out(backend):
    """linear / pre_bare RMSNorm / regression on (s, a, a).

    ``h_s = e_s sqrt(3/5)``, ``h_a = e_a sqrt(3/2)``, both of norm ``sqrt(3)``; the scores are
    ``tau |h_s|^2 = sqrt(3)`` and ``tau <h_s, h_a> = -2 (3/sqrt(10)) / sqrt(3) = -sqrt(6/5)``;
    with ``<w, h_s> = 7 sqrt(3/5)`` and ``<w, h_a> = -sqrt(3/2)``,
    ``y = <w, e_s> + sqrt(3) <w, h_s> + 2 (-sqrt(6/5)) <w, h_a> + w0
       = 7 + 21/sqrt(5) + 6/sqrt(5) + 1/2``.
    """
    p = rms("linear", "pre_bare", "regression")
    y = 7.5 + 27 / math.sqrt(5)
    agrees(explicit(p, "saa", backend), y, backend)
    agrees(reduced(p, [2], backend=backend)[0], y, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_linear_pre_rmsnorm_gain_written_out(backend):
    """linear / pre RMSNorm gain / regression on (s,): ``h_s = g * e_s sqrt(3/5)
    = (1, 0, -2) sqrt(3/5)``, ``|h_s|^2 = 3``, score ``sqrt(3)``, ``A = sqrt(3) h_s``, so
    ``y = 7 + (3/sqrt(5)) <w, (1, 0, -2)> + 1/2 = 15/2 - 3 sqrt(5)``."""
    p = rms("linear", "pre_learned", "regression", affine="gain")
    assert "beta" not in p.vectors
    agrees(explicit(p, "s", backend), 7.5 - 3 * math.sqrt(5), backend)
    agrees(reduced(p, [0], backend=backend)[0], 7.5 - 3 * math.sqrt(5), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_pre_rmsnorm_gain_bias_classification_eps_written_out(backend):
    """softmax / pre RMSNorm gain_bias / classification with eps = 1/2 on (s, a):
    ``h_s = g * e_s / sqrt(5/3 + 1/2) + beta``, ``h_a = g * e_a / sqrt(2/3 + 1/2) + beta``."""
    eps = 0.5
    p = rms("softmax", "pre_learned", "classification", eps=eps, affine="gain_bias")
    tau = 1 / math.sqrt(3)
    h_s = [G[i] * E_S[i] / math.sqrt(5 / 3 + eps) + BETA[i] for i in range(3)]
    h_a = [G[i] * E_A[i] / math.sqrt(2 / 3 + eps) + BETA[i] for i in range(3)]
    close(h_s, [1 / math.sqrt(13 / 6), 1, 1 - 2 / math.sqrt(13 / 6)], rel=1e-15)
    close(h_a, [0, 1 + 2 / math.sqrt(7 / 6), 1 + 1 / math.sqrt(7 / 6)], rel=1e-15)
    s_s = tau * sum(x * x for x in h_s)
    s_a = tau * sum(x * y for x, y in zip(h_s, h_a))
    m = max(s_s, s_a)
    x_s, x_a = math.exp(s_s - m), math.exp(s_a - m)
    r = [E_S[i] + (x_s * h_s[i] + x_a * h_a[i]) / (x_s + x_a) for i in range(3)]
    logits = [sum(U[c][i] * r[i] for i in range(3)) + B[c] for c in range(3)]
    agrees(explicit(p, "sa", backend), logits, backend)
    agrees(reduced(p, [1], backend=backend)[0], logits, backend)


#: softmax / post RMSNorm on (s,): ``r = 2 e_s = (2, 0, 4)``, ``mean(r^2) = 20/3``, so
#: ``N(r) = (2, 0, 4) s`` with ``s = sqrt(3/20)``; ``<w, N(r)> = 14 s``, ``<w, g * N(r)> =
#: (2 - 12) s = -sqrt(15)`` and gain_bias adds ``<w, beta> = 5``
POST_S = {None: 0.5 + 14 * math.sqrt(3 / 20), "gain": 0.5 - math.sqrt(15),
          "gain_bias": 5.5 - math.sqrt(15)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("affine", list(POST_S))
def test_softmax_post_rmsnorm_written_out(affine, backend):
    """softmax / post RMSNorm (bare, gain, gain_bias) / regression on (s,), by :data:`POST_S`;
    the gain without a bias has no ``<w, beta>`` term (explicit and the Gram read-out)."""
    p = rms("softmax", "post_learned" if affine else "post_bare", "regression", affine=affine)
    agrees(explicit(p, "s", backend), POST_S[affine], backend)
    agrees(reduced(p, [0], backend=backend)[0], POST_S[affine], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_post_rmsnorm_gain_bias_classification_written_out(backend):
    """The same residual through a classification head: ``z = g * N(r) + beta = (2 s, 1, 1 - 4 s)``,
    so the logits ``<u_c, z> + b_c`` are ``2 s``, ``1 + 1/2`` and ``2 s + 1 - (1 - 4 s) - 1``."""
    p = rms("softmax", "post_learned", "classification", affine="gain_bias")
    s = math.sqrt(3 / 20)
    logits = [2 * s, 1.5, 6 * s - 1]
    agrees(explicit(p, "s", backend), logits, backend)
    agrees(reduced(p, [0], backend=backend)[0], logits, backend)


# ----------------------------------------------------------------- constant vectors


@pytest.mark.parametrize("backend", BACKENDS)
def test_rmsnorm_defined_on_a_constant_token_where_layernorm_is_not(backend):
    """Pre-norm with ``e_s = (2, 2, 2)``: RMSNorm gives ``h_s = (1, 1, 1)`` (mean square 4), the
    only position has weight 1, ``r = e_s + h_s = (3, 3, 3)`` and ``y = 3 * 6 + 1/2`` exactly;
    LayerNorm (eps = 0) is undefined there."""
    cell = Cell("softmax", "pre_bare", "regression", d=3, norm="rmsnorm")
    vectors = {"e_s": [2, 2, 2], "e_a": E_A, "w": W}
    p = Params(cell, vectors, {"w0": W0})
    agrees(explicit(p, "s", backend), 18.5, backend)
    agrees(reduced(p, [0], backend=backend)[0], 18.5, backend)
    q = Params(cell.replace(norm="layernorm"), vectors, {"w0": W0})
    with pytest.raises(LayerNormUndefined, match="layernorm with eps=0 is undefined on a constant"):
        reduced(q, [0], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("readout", ["regression", "classification"])
def test_rmsnorm_defined_on_a_constant_residual_where_layernorm_is_not(backend, readout):
    """softmax / post RMSNorm, ``e_s = e_a = (1, 1, 1)``: the weights sum to 1, so
    ``r = (2, 2, 2)`` and ``z = (1, 1, 1)`` at every count: ``y = <w, 1> + 1/2 = 13/2``, logits
    ``<u_c, 1> + b_c = (1, 3/2, 0)``.  LayerNorm (eps = 0) is undefined at every count."""
    cell = Cell("softmax", "post_bare", readout, d=3, norm="rmsnorm")
    head = ({"w": W}, {"w0": W0}) if readout == "regression" else ({"u": U}, {"b": B})
    p = Params(cell, {"e_s": [1, 1, 1], "e_a": [1, 1, 1], **head[0]}, head[1])
    want = [6.5] if readout == "regression" else [1, 1.5, 0]
    n = [0, 1, 2, 7, 40]
    for k, out in zip(n, reduced(p, n, backend=backend)):
        agrees(out, want, backend)
        agrees(explicit(p, "s" + "a" * k, backend), want, backend)
    q = Params(cell.replace(norm="layernorm"), p.vectors, p.scalars)
    with pytest.raises(NormUndefined, match=r"constant vector \(post-norm at count n_a=0, n_b=0\)"):
        reduced(q, n, backend=backend)


# ----------------------------------------------------------------- undefined at zero


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("token", ["s", "a"])
@pytest.mark.parametrize("affine", [None, "gain", "gain_bias"])
def test_pre_rmsnorm_undefined_on_a_zero_embedding(backend, token, affine):
    """Pre RMSNorm, eps = 0, a zero embedding: undefined (LayerNormUndefined is NormUndefined);
    with eps > 0 it is ``N(0) = 0``, so the token's value is the affine's bias (or 0)."""
    cell = Cell("softmax", "pre_learned" if affine else "pre_bare", "regression", d=3,
                norm="rmsnorm", affine=affine)
    vectors = {"e_s": E_S, "e_a": E_A, "w": W, f"e_{token}": [0, 0, 0]}
    vectors.update({name: {"g": G, "beta": BETA}[name] for name in cell.affine.vectors})
    p = Params(cell, vectors, {"w0": W0})
    msg = rf"^rmsnorm with eps=0 is undefined on the zero vector \(pre-norm of token {token}\)"
    for run in (lambda: explicit(p, "saa", backend), lambda: reduced(p, [0, 1, 2], backend=backend),
                lambda: counts_to(p, 2, backend)):
        with pytest.raises(LayerNormUndefined, match=msg):
            run()
    assert NormUndefined is LayerNormUndefined and issubclass(NormUndefined, ValueError)
    q = Params(cell.replace(eps=0.25), vectors, {"w0": W0})
    bk = get_backend(backend)
    with bk.context():
        h = as_mp_list(numbers(q, bk).h[token])
    assert h == (BETA if "beta" in vectors else [0, 0, 0])
    for n, got in zip([0, 1, 2], as_mp_list(reduced(q, [0, 1, 2], backend="mp50"))):
        want = ref_mp(q, "s" + "a" * n).out
        assert abs(got - want) < 1e-40 * (1 + abs(want))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("readout", ["regression", "classification"])
def test_post_rmsnorm_undefined_on_a_zero_residual(backend, readout):
    """softmax / post RMSNorm with ``e_s = 0``: every score is 0, so ``A = n/(n+1) e_a`` and
    ``r_n = n/(n+1) e_a``: zero at ``n = 0`` only.  For ``n >= 1``, ``z = N(e_a) = e_a sqrt(3/2)``:
    ``y = <w, e_a> sqrt(3/2) + 1/2``, logits ``<u_c, e_a> sqrt(3/2) + b_c``."""
    cell = Cell("softmax", "post_bare", readout, d=3, norm="rmsnorm")
    head = ({"w": W}, {"w0": W0}) if readout == "regression" else ({"u": U}, {"b": B})
    p = Params(cell, {"e_s": [0, 0, 0], "e_a": E_A, **head[0]}, head[1])
    msg = r"rmsnorm with eps=0 is undefined on the zero vector \(post-norm at count n_a=0, n_b=0\)"
    with pytest.raises(NormUndefined, match=msg):
        reduced(p, [3, 0, 1], backend=backend)
    with pytest.raises(NormUndefined, match=msg):
        counts_to(p, 2, backend)
    with pytest.raises(NormUndefined, match=r"zero vector \(post-norm\)"):
        explicit(p, "s", backend)
    k = math.sqrt(1.5)
    want = ([-1 * k + W0] if readout == "regression"
            else [sum(u * x for u, x in zip(row, E_A)) * k + b for row, b in zip(U, B)])
    for n, out in zip([1, 2, 9], reduced(p, [1, 2, 9], backend=backend)):
        agrees(out, want, backend)
        agrees(explicit(p, "s" + "a" * n, backend), want, backend)


@pytest.mark.parametrize("readout", ["regression", "classification"])
def test_post_rmsnorm_undecided_zero_on_balls(readout):
    """A residual that is zero to ~2^-400 without being zero: balls at 256 bits cannot tell it
    from zero (its mean-square ball contains 0), so the pass refuses; at 1024 bits they can.

    softmax / post RMSNorm, ``e_s = (t, 0, 0)``, ``e_a = -3 e_s``: the scores are
    ``sigma_s = tau t^2``, ``sigma_a = -3 tau t^2``, and with ``x = n exp(-4 tau t^2)``,
    ``r_n = (1 + (1 - 3x)/(1 + x)) e_s = 2 (1 - x)/(1 + x) e_s``: zero when ``x = 1``, i.e. at
    ``n = 2`` for ``4 tau t^2 = ln 2``.  ``t`` is that root rounded to 400 bits, so ``r_2`` is a
    tiny non-zero multiple of ``e_1`` and ``z = N(r_2) = +-sqrt(3) e_1``.
    """
    with mpmath.workprec(400):
        t = mpmath.sqrt(mpmath.log(2) * mpmath.sqrt(3) / 4)
    with mpmath.workprec(410):
        e_s, e_a = [t, 0, 0], [-3 * t, 0, 0]  # -3 t is exact at 410 bits
    cell = Cell("softmax", "post_bare", readout, d=3, norm="rmsnorm")
    head = ({"w": W}, {"w0": W0}) if readout == "regression" else ({"u": U}, {"b": B})
    p = Params(cell, {"e_s": e_s, "e_a": e_a, **head[0]}, head[1])
    msg = (r"zero vector \(post-norm at count n_a=2, n_b=0\); "
           r"on balls: indistinguishable from one at the working precision")
    with pytest.raises(NormUndefined, match=msg):
        reduced(p, [0, 1, 2, 3], backend="arb256")
    assert len(reduced(p, [0, 1, 3], backend="arb256")) == 3
    out = np.atleast_1d(reduced(p, [2], backend="arb1024")[0])
    coef, bias = ([W[0]], [W0]) if readout == "regression" else ([u[0] for u in U], B)
    with mpmath.workdps(120):
        for sign in (1, -1):  # the sign of r_2 is that of the rounding of t
            want = [b + sign * mpmath.sqrt(3) * c for c, b in zip(coef, bias)]
            if all(abs(to_mp(x) - v) <= arb_radius(x) + mpmath.mpf("1e-110") for x, v in zip(out, want)):
                break
        else:
            pytest.fail(f"arb1024 output {out} is neither sign of sqrt(3) e_1 read out")
    # r_2 ~ 2^-400 |e_s|: the rows lose 400 of the 1024 bits to the cancellation, the Gram
    # read-out (a quadratic form in the coefficients) twice that
    assert all(arb_radius(x) < 1e-50 for x in out)
