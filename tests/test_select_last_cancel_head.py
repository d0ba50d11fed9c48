"""Classification of the select task read last, softmax attention with pre-norm at eps = 0
(constructions.select_last_cancel_head): the judge certifies every served kind and affine at L =
1..8 and one cell at L = 32, within the proven bound and every vector in the unit ball; a forward
pass written here token by token in mpmath (the reference norm of tests.helpers, the softmax, the
raw-embedding residual) classifies random sequences as their count of a tokens; the distractor
cancels (D times every logit does not depend on n_b, to the rounding of the stored entries); the embeddings and the head scale
to 0 with the head still certified (B_min = 0 as an infimum); d = 2 and eps > 0 are refused.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds.margin import margin_upper
from constructions import classification, select_last_cancel_head
from constructions.cell import Cell, Params
from constructions.refusals import refusal
from tests.helpers import mp_norm, ref_norm
from verify.certify import certify
from verify.strategies import sequences, target

#: every served (kind, affine), at d = 3 or 8
CELLS = [("pre_bare", "layernorm", None, 3), ("pre_bare", "rmsnorm", None, 8),
         ("pre_learned", "layernorm", "gain", 8), ("pre_learned", "layernorm", "gain_bias", 3),
         ("pre_learned", "rmsnorm", "gain", 3), ("pre_learned", "rmsnorm", "gain_bias", 8)]


def _cell(variant, norm, affine, d, eps=0.0) -> Cell:
    return Cell("softmax", variant, "classification", d=d, norm=norm, affine=affine, eps=eps,
                task="select", read="last")


def _build(cell: Cell, L: int) -> Params:
    return classification.design(cell).build(L)


def forward(params: Params, seq: str):
    """``(logits, D)`` of ``seq`` read at its last token, by hand at the working precision: values
    ``ref_norm(e_x)``, weights ``exp(tau <h_q, h_j>)`` over ``j = 0..m``, ``z = e_q + sum_j w_j h_j
    / D``, ``logit_c = <u_c, z> + b_c``."""
    cell, V = params.cell, params.vectors
    vec = {k: [mpmath.mpf(x) for x in v] for k, v in V.items() if k != "u"}
    e = {t: vec[f"e_{t}"] for t in "sab"}
    h = {t: ref_norm(cell, e[t], vec, mpmath.mpf(0), mpmath.sqrt) for t in "sab"}
    q, tau = seq[-1], 1 / mpmath.sqrt(cell.d)
    w = [mpmath.exp(tau * mpmath.fsum(x * y for x, y in zip(h[q], h[t]))) for t in seq]
    D = mpmath.fsum(w)
    z = [e[q][i] + mpmath.fsum(wj * h[t][i] for wj, t in zip(w, seq)) / D for i in range(cell.d)]
    logits = [mpmath.fsum(mpmath.mpf(x) * y for x, y in zip(row, z)) + mpmath.mpf(b)
              for row, b in zip(V["u"], params.scalars["b"])]
    return logits, D


@pytest.mark.parametrize("variant,norm,affine,d", CELLS)
def test_every_served_cell_is_certified_at_small_L(variant, norm, affine, d):
    cell = _cell(variant, norm, affine, d)
    assert select_last_cancel_head.built(cell) and refusal(cell) is None
    for L in (1, 2, 3, 5, 8):
        params = _build(cell, L)
        res = certify(params, L)
        assert res.certified, (L, res.verdict)
        assert 0 < res.min_margin <= margin_upper(cell, L)
        assert all(mp_norm(v) <= 1 for k, v in params.vectors.items() if k != "u")
        assert all(mp_norm(r) <= 1 for r in params.vectors["u"])


def test_certified_at_L_32():
    cell = _cell("pre_bare", "layernorm", None, 8)
    params = _build(cell, 32)
    res = certify(params, 32)
    assert res.certified and 0 < res.min_margin <= margin_upper(cell, 32)


PARAMS = {spec: _build(_cell(*spec), 8) for spec in (CELLS[0], CELLS[5])}


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_sequences_are_classified_as_their_count(data):
    spec = data.draw(st.sampled_from(sorted(PARAMS, key=str)))
    seq = data.draw(sequences(_cell(*spec), max_length=8))
    with mpmath.workdps(40):
        logits, _ = forward(PARAMS[spec], seq)
        n = target(seq)
        assert logits[n] > max(x for c, x in enumerate(logits) if c != n)


@pytest.mark.parametrize("spec", [CELLS[0], CELLS[5]])
def test_the_distractor_cancels_exactly(spec):
    """For a query and a count of ``a``, ``D * logit_c`` is the same for every count of ``b``."""
    params, L = PARAMS[spec], 8
    with mpmath.workdps(40):
        for q, n_a in (("a", 3), ("b", 2), ("b", 0)):
            seen = []
            for n_b in range(1 if q == "b" else 0, L - n_a + 1):
                rest = "a" * n_a + "b" * n_b
                seq = "s" + rest.replace(q, "", 1) + q
                logits, D = forward(params, seq)
                seen.append([D * x for x in logits])
            assert len(seen) >= 2
            scale = max(abs(x) for x in seen[0])
            for row in seen[1:]:
                assert max(abs(x - y) for x, y in zip(row, seen[0])) <= mpmath.mpf(10) ** -12 * scale  # the stored entries are rounded


def test_embeddings_and_head_scale_to_zero():
    """``e -> lam e`` with ``b_c -> b_c + (1 - lam) <u_c, e_a>`` and then ``(u, b) -> kappa (u, b)``
    keeps the head certified (module docstring): every vector's norm goes to 0 (bare)."""
    cell, L = _cell("pre_bare", "rmsnorm", None, 8), 6
    params = _build(cell, L)
    V, b = params.vectors, params.scalars["b"]
    with mpmath.workdps(50):
        lam = kappa = mpmath.mpf(2) ** -12
        e_a = [mpmath.mpf(x) for x in V["e_a"]]
        u = [[mpmath.mpf(x) for x in row] for row in V["u"]]
        nb = [kappa * (mpmath.mpf(bc) + (1 - lam) * mpmath.fsum(x * y for x, y in zip(row, e_a)))
              for row, bc in zip(u, b)]
        vec = {k: np.array([lam * mpmath.mpf(x) for x in V[k]], dtype=object) for k in ("e_s", "e_a", "e_b")}
        vec["u"] = np.array([[kappa * x for x in row] for row in u], dtype=object)
    small = Params(cell, vec, {"b": nb})
    res = certify(small, L)
    assert res.certified
    assert max(mp_norm(v) for k, v in vec.items() if k != "u") <= 2.0**-11
    assert max(mp_norm(r) for r in vec["u"]) <= 2.0**-11


@pytest.mark.parametrize("variant,norm,affine", [("pre_bare", "layernorm", None),
                                                 ("pre_bare", "rmsnorm", None),
                                                 ("pre_learned", "rmsnorm", "gain")])
def test_d2_and_eps_are_refused(variant, norm, affine):
    for cell in (_cell(variant, norm, affine, 2), _cell(variant, norm, affine, 8, eps=1e-5)):
        assert refusal(cell) is not None and not select_last_cancel_head.built(cell)
        with pytest.raises(ValueError):
            classification.design(cell)
