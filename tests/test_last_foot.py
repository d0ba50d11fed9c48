"""Linear attention with post-RMSNorm, the count task read at the last position
(:mod:`constructions.last_foot`):

* the construction is certified by the judge in ball arithmetic at every small ``L`` with every
  vector within the budget, and passes the explicit token-by-token pass on random sequences
  drawn by :mod:`verify.strategies`;
* its geometry, against the model's formulas computed here from the embeddings alone: the foot
  ``-<P, Q>/|Q|^2`` at ``-F``, the distance ``|P + F Q|/|Q| = lam``, the count 0's residual a
  positive multiple of ``P - u Q``, and ``(*)``'s budget the norms of the embeddings;
* the lemma of the lower bound on random parameter sets: the foot of the counts ``1..L`` lies at
  ``n0 <= -sqrt(d)/|e_a|^2``, so at ``m0 <= -(1 + sqrt(d)/B^2)`` in ``m = n - 1``;
* ``B_lower <= B_min`` on certified constructions;
* the registry serves every affine at ``eps = 0`` (``eps > 0``: :mod:`constructions.last_post_eps`),
  and the rest is refused with its reason.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds.lower import b_lower, last_foot_lower
from constructions import Cell, registry, regression
from constructions.last_foot import LastFootDesign, embedding_budget
from constructions.refusals import refusal
from tests.helpers import examples
from verify import counts_to, explicit
from verify.certify import rigorous_bound
from verify.strategies import sequences, target

KW = [dict(variant="post_bare"), dict(variant="post_learned", affine="gain"),
      dict(variant="post_learned", affine="gain_bias")]


def _cell(kw, d=8, **extra) -> Cell:
    return Cell(attention="linear", readout="regression", norm="rmsnorm", read="last", d=d, **kw, **extra)


def _certified(cell: Cell, L: int):
    """The construction just above its float estimate (``1e-3`` at ``L = 1``) and its budget."""
    design = regression.design(cell)
    B = 1e-3 if L == 1 else design.estimate(L) * (1 + 1e-3)
    return design.build(L, B), B


@pytest.mark.parametrize("kw", KW)
def test_the_judge_certifies_every_small_L_within_the_budget(kw):
    cell = _cell(kw)
    for L in range(1, 6):
        params, B = _certified(cell, L)
        assert counts_to(params, L, "arb256").counts, (kw, L)
        assert rigorous_bound(params) <= B * (1 + 1e-9)


def test_at_d_2():
    params, B = _certified(_cell(KW[1], d=2), 4)
    assert counts_to(params, 4, "arb256").counts and rigorous_bound(params) <= B * (1 + 1e-9)


@settings(max_examples=examples(25), deadline=None)
@given(st.data())
def test_random_sequences_pass_the_explicit_forward(data):
    cell = _cell(KW[0])
    params, _ = _certified(cell, 6)
    seq = data.draw(sequences(cell, max_length=6))
    assert abs(float(explicit(params, seq, "mp30")) - target(seq)) < 0.5


def _geometry(e_s, e_a, d):
    """From the embeddings alone (the model's last read, linear attention): ``P, Q`` of the
    residual line of ``n >= 1``, its foot count, its distance in counts, and the count 0's
    residual."""
    tau = 1 / math.sqrt(d)
    P = e_a + tau * (e_a @ e_s) * e_s
    Q = tau * (e_a @ e_a) * e_a
    foot = -(P @ Q) / (Q @ Q)
    lam = np.linalg.norm(P + foot * Q) / np.linalg.norm(Q)
    r0 = e_s + tau * (e_s @ e_s) * e_s
    return P, Q, foot, lam, r0


@settings(max_examples=examples(30), deadline=None)
@given(F=st.floats(0.05, 50.0), frac=st.floats(0.01, 0.99), lam=st.floats(0.1, 100.0),
       angle=st.floats(-3.0, 3.0), d=st.sampled_from([2, 5, 8]))
def test_the_construction_realises_its_geometry(F, frac, lam, angle, d):
    cell = _cell(KW[0], d=d)
    u = frac * F
    with mpmath.workdps(30):
        out = regression.design(cell).evaluate(8, 1e6, lam, 3.0, 0.5, angle, F, u)
    e_s, e_a = (np.array(out[k], dtype=float) for k in ("e_s", "e_a"))
    P, Q, foot, lam_seen, r0 = _geometry(e_s, e_a, d)
    assert foot == pytest.approx(-F, rel=1e-9, abs=1e-9)
    assert lam_seen == pytest.approx(lam, rel=1e-8)
    at = P - u * Q  # the line at n = -u
    assert r0 @ at > 0 and abs(r0 @ at) == pytest.approx(np.linalg.norm(r0) * np.linalg.norm(at), rel=1e-9)
    need = float(embedding_budget(d, F, lam, u))
    assert max(np.linalg.norm(e_s), np.linalg.norm(e_a)) == pytest.approx(need, rel=1e-9)


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 2**31), d=st.sampled_from([2, 3, 8]), scale=st.floats(0.1, 10.0))
def test_the_bound_lemma_on_random_parameters(seed, d, scale):
    rng = np.random.default_rng(seed)
    e_s, e_a = scale * rng.standard_normal(d), scale * rng.standard_normal(d)
    P, Q, foot, _, r0 = _geometry(e_s, e_a, d)
    B = max(np.linalg.norm(e_s), np.linalg.norm(e_a))
    assert foot <= -math.sqrt(d) / (e_a @ e_a) * (1 - 1e-12) <= -math.sqrt(d) / B**2 * (1 - 1e-9)
    # in m = n - 1 the counts 1..L start at m = 0 on the line (P + Q) + m Q, foot at foot - 1
    assert -((P + Q) @ Q) / (Q @ Q) == pytest.approx(foot - 1, abs=1e-9 * (1 + abs(foot)))
    # the count 0 is the line at -sqrt(d)/|e_a|^2, up to the sign of <e_a, e_s>
    at = P - math.sqrt(d) / (e_a @ e_a) * Q
    cos = (r0 @ at) / (np.linalg.norm(r0) * np.linalg.norm(at))
    assert abs(cos) == pytest.approx(1.0, abs=1e-9) and np.sign(cos) == np.sign(e_a @ e_s)


@pytest.mark.parametrize("kw", KW[:2])
def test_the_lower_bound_is_below_the_certified_construction(kw):
    cell = _cell(kw)
    # L = 2: the counts 0 and 2 alone, |<w * g, N_2 - N_0>| <= 2 sqrt(d) |w| (|g|) > 1
    ends = 1 / (2 * math.sqrt(cell.d))
    assert b_lower(cell, 2, 1.0) == pytest.approx(math.sqrt(ends) if cell.affine.gain else ends, rel=1e-12)
    for L in (3, 6):
        params, B = _certified(cell, L)
        assert counts_to(params, L, "arb256").counts
        low = last_foot_lower(cell, L, B)
        assert 0 < low <= rigorous_bound(params)
        assert b_lower(cell, L, B) == low


def test_served_and_refused():
    for kw in KW:
        for d in (2, 8):
            cell = _cell(kw, d=d)
            assert refusal(cell) is None
            assert registry.serving(cell).load() is LastFootDesign
        # eps > 0: the one-sided arc lifted (constructions.last_post_eps)
        assert refusal(_cell(kw, eps=0.01)) is None
        assert registry.serving(_cell(kw, eps=0.01)).name == "EpsFootDesign"
        # classification: the count task's tied arc head (constructions.count_last_foot_head);
        # refused at eps > 0
        assert refusal(_cell(kw).replace(readout="classification")) is None
        assert registry.serving(_cell(kw).replace(readout="classification")).name == "CountLastFootHead"
        assert refusal(_cell(kw, eps=0.01).replace(readout="classification"))
    with pytest.raises(ValueError):
        LastFootDesign(_cell(KW[0]).replace(read="bos"))
