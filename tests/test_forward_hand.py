"""Hand-computed forward passes at d = 3 with small integer vectors.

Every expected value here is computed by the test with plain Python ``math`` (or ``mpmath`` at
high precision for the mp50 comparison), following the README's section "The model in brief"
and the specification's extensions: softmax weights with the maximum subtracted, LayerNorm with
the population variance or RMSNorm, the affine, the raw-``e_s`` residual and the read-out.
Nothing from the toolkit's forward pass is used to produce the expectations.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from helpers import (ARCH_IDS, ARCHS, B, BETA, E_A, E_B, E_S, FLOAT, G, MP, U, W, W0, as_mp_list, close,
                     hand_params, ref_forward)
from verify import explicit, reduced
from verify.backends import get_backend
from verify.forward import numbers


def close_mp(got, want, rel=mpmath.mpf("1e-45")):
    got, want = as_mp_list(got), (want if isinstance(want, list) else [want])
    assert len(got) == len(want)
    scale = 1 + max(abs(x) for x in want)
    for g, w in zip(got, want):
        assert abs(g - w) <= rel * scale, (g, w)


def counts(tokens):
    return tokens.count("a"), tokens.count("b")


# ----------------------------------------------------------------- fully written-out cases


def test_softmax_none_regression_written_out():
    """softmax / none / regression on (s, a, a): every step by hand."""
    p, _, _ = hand_params("softmax", "none", "regression")
    tau = 1 / math.sqrt(3)
    # scores: <e_s, e_s> = 1 + 0 + 4 = 5 ; <e_s, e_a> = 0 + 0 - 2 = -2
    s_s, s_a = 5 * tau, -2 * tau
    # softmax over (s_s, s_a, s_a) with the max s_s subtracted
    x_s, x_a = 1.0, math.exp(s_a - s_s)
    Z = x_s + 2 * x_a
    w_s, w_a = x_s / Z, x_a / Z
    assert abs(w_s + 2 * w_a - 1) < 1e-15
    A = [w_s * E_S[i] + 2 * w_a * E_A[i] for i in range(3)]
    r = [E_S[i] + A[i] for i in range(3)]
    y = sum(W[i] * r[i] for i in range(3)) + W0
    close(explicit(p, "saa"), y)
    close(reduced(p, [2])[0], y)
    # the same by the reference, and at 50 digits
    with mpmath.workdps(60):
        tau_mp = 1 / mpmath.sqrt(3)
        xa = mpmath.exp(-7 * tau_mp)
        Z = 1 + 2 * xa
        r_mp = [E_S[i] + (E_S[i] + 2 * xa * E_A[i]) / Z for i in range(3)]
        y_mp = sum(W[i] * r_mp[i] for i in range(3)) + mpmath.mpf(W0)
    close_mp(explicit(p, "saa", "mp50"), y_mp)
    close_mp(reduced(p, [2], backend="mp50")[0], y_mp)


def test_linear_post_bare_regression_written_out():
    """linear / post_bare / regression on (s, a, a): LayerNorm with population variance."""
    p, _, _ = hand_params("linear", "post_bare", "regression")
    tau = 1 / math.sqrt(3)
    s_s, s_a = 5 * tau, -2 * tau
    # linear attention: A = s_s e_s + 2 s_a e_a = tau * (5, -4, 14)
    A = [s_s * E_S[i] + 2 * s_a * E_A[i] for i in range(3)]
    assert all(abs(A[i] - tau * v) < 1e-14 for i, v in enumerate((5, -4, 14)))
    r = [E_S[i] + A[i] for i in range(3)]
    mean = sum(r) / 3
    c = [x - mean for x in r]
    var = sum(x * x for x in c) / 3  # population variance (divide by d, not d - 1)
    z = [x / math.sqrt(var) for x in c]
    assert abs(sum(x * x for x in z) - 3) < 1e-13  # |N(v)| = sqrt(d)
    y = sum(W[i] * z[i] for i in range(3)) + W0
    close(explicit(p, "saa"), y)
    close(reduced(p, [0, 2])[1], y)


def test_softmax_pre_learned_classification_eps_written_out():
    """softmax / pre_learned / classification with eps = 1/2 on (s, a)."""
    eps = 0.5
    p, _, _ = hand_params("softmax", "pre_learned", "classification", eps=eps)
    tau = 1 / math.sqrt(3)

    def ln(v):
        mean = sum(v) / 3
        c = [x - mean for x in v]
        var = sum(x * x for x in c) / 3
        return [G[i] * c[i] / math.sqrt(var + eps) + BETA[i] for i in range(3)]

    # e_s = (1, 0, 2): mean 1, centred (0, -1, 1), var 2/3
    h_s = ln(E_S)
    expect_hs = [0.0, 2 * -1 / math.sqrt(2 / 3 + eps) + 1, -1 / math.sqrt(2 / 3 + eps) + 1]
    close(h_s, expect_hs, rel=1e-15)
    h_a = ln(E_A)
    with get_backend("float64").context():
        nums = numbers(p, "float64")
    close(nums.h["s"], h_s)
    close(nums.h["a"], h_a)
    s_s = tau * sum(h_s[i] * h_s[i] for i in range(3))
    s_a = tau * sum(h_s[i] * h_a[i] for i in range(3))
    m = max(s_s, s_a)
    x_s, x_a = math.exp(s_s - m), math.exp(s_a - m)
    A = [(x_s * h_s[i] + x_a * h_a[i]) / (x_s + x_a) for i in range(3)]
    r = [E_S[i] + A[i] for i in range(3)]  # residual uses the raw embedding e_s
    logits = [sum(U[c][i] * r[i] for i in range(3)) + B[c] for c in range(3)]
    close(explicit(p, "sa"), logits)
    close(reduced(p, [1])[0], logits)


def test_linear_none_classification_distractor_written_out():
    """linear / none / classification with a distractor, on (s, b, a, b)."""
    p, _, _ = hand_params("linear", "none", "classification", distractor=True)
    tau = 1 / math.sqrt(3)
    # <e_s,e_s> = 5, <e_s,e_a> = -2, <e_s,e_b> = 2 + 0 + 2 = 4
    A = [tau * (5 * E_S[i] + (-2) * E_A[i] + 2 * 4 * E_B[i]) for i in range(3)]
    r = [E_S[i] + A[i] for i in range(3)]
    logits = [sum(U[c][i] * r[i] for i in range(3)) + B[c] for c in range(3)]
    close(explicit(p, "sbab"), logits)
    close(reduced(p, [1], [2])[0], logits)
    # and exactly: A = tau (5 e_s - 2 e_a + 8 e_b) = tau (21, -10, 20)
    with mpmath.workdps(60):
        t = 1 / mpmath.sqrt(3)
        r = [1 + 21 * t, -10 * t, 2 + 20 * t]
        logits_mp = [r[0], r[1] + mpmath.mpf("0.5"), r[0] + r[1] - r[2] - 1]
    close_mp(explicit(p, "sbab", "mp50"), logits_mp)


def test_post_learned_gain_and_bias_written_out():
    """softmax / post_learned / regression on (s,): z = g * N(r) + beta."""
    p, _, _ = hand_params("softmax", "post_learned", "regression")
    # only position 0: weight 1, A = e_s, r = 2 e_s = (2, 0, 4): mean 2, centred (0,-2,2), var 8/3
    sd = math.sqrt(8 / 3)
    z = [G[0] * 0 / sd + BETA[0], G[1] * -2 / sd + BETA[1], G[2] * 2 / sd + BETA[2]]
    y = sum(W[i] * z[i] for i in range(3)) + W0
    close(explicit(p, "s"), y)
    close(reduced(p, [0])[0], y)


# ----------------------------------------------------------------- every cell, by the reference

SEQUENCES = ["s", "sa", "saaa", "saaaaaaa"]
DISTRACTOR_SEQUENCES = ["sab", "sbba", "sbbbbaab"]


def hand_cases():
    for arch, name in zip(ARCHS, ARCH_IDS):
        attention, norm, readout, kind, affine = arch
        for eps in (0.0, 0.25) if norm != "none" else (0.0,):
            yield pytest.param(arch, eps, False, SEQUENCES, id=f"{name}-eps{eps}")
        yield pytest.param(arch, 0.0, True, DISTRACTOR_SEQUENCES, id=f"{name}-distractor")


@pytest.mark.parametrize("arch,eps,distractor,seqs", list(hand_cases()))
def test_hand_reference(arch, eps, distractor, seqs):
    """Compare explicit and reduced (float64 and mp50) with the plain-Python reference."""
    attention, norm, readout, kind, affine = arch
    p, vectors, scalars = hand_params(attention, norm, readout, eps=eps, distractor=distractor,
                               kind=kind, affine=affine)
    cell = p.cell
    na, nb = zip(*(counts(s) for s in seqs))
    red64 = reduced(p, list(na), list(nb) if distractor else None)
    red50 = reduced(p, list(na), list(nb) if distractor else None, backend="mp50")
    for k, seq in enumerate(seqs):
        want = ref_forward(cell, vectors, scalars, seq, FLOAT).out
        close(explicit(p, seq), want)
        close(red64[k], want)
        with mpmath.workdps(70):
            want_mp = ref_forward(cell, vectors, scalars, seq, MP).out
        close_mp(explicit(p, seq, "mp50"), want_mp)
        close_mp(red50[k], want_mp)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("readout", ["regression", "classification"])
def test_reference_is_not_trivially_equal_across_cells(attention, readout):
    """Sanity of the hand data: the placements, norm kinds and affines give different outputs
    (the tests can fail)."""
    archs = [a for a in ARCHS if a[0] == attention and a[2] == readout]
    outs = set()
    for _, norm, _, kind, affine in archs:
        p, vectors, scalars = hand_params(attention, norm, readout, kind=kind, affine=affine)
        out = ref_forward(p.cell, vectors, scalars, "saa", FLOAT).out
        outs.add(tuple(round(v, 9) for v in np.atleast_1d(out)))
    assert len(archs) == 13 and len(outs) == len(archs)
