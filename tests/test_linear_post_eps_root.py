"""Linear attention after post-LayerNorm with ``eps > 0`` (the read at ``s``): the embedding
``e_a = mu c_1 + eta one`` takes the smaller root ``mu`` of a quadratic, real only while ``2 tau xi
L omega <= tau^2 eta^4`` (:func:`constructions.steps._arc_steps`).  With ``eps > 0`` the
embeddings grow with the budget (``eta = B/4``), and ``xi``'s guard keeps that root real at every
budget the bisection may try: the construction is a real parameter set, and the sweep gives
rows instead of stopping."""

from __future__ import annotations

import mpmath
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bounds import sweep as sweep_mod
from constructions import Cell, regression
from tests.helpers import examples


@settings(max_examples=examples(40), deadline=None)
@given(d=st.integers(3, 8), L=st.integers(1, 64), B=st.floats(0.05, 1e4),
       eps=st.sampled_from([1e-3, 0.1, 1.0]), affine=st.sampled_from([None, "gain", "gain_bias"]))
@example(d=3, L=2, B=16.0, eps=0.1, affine=None)  # the root was complex here before the guard
@example(d=4, L=1, B=1e3, eps=1e-3, affine="gain")
def test_the_embeddings_are_real_at_every_budget(d, L, B, eps, affine):
    variant = "post_bare" if affine is None else "post_learned"
    cell = Cell("linear", variant, "regression", d=d, eps=eps, affine=affine)
    params = regression.design(cell).build(L, B)
    for name in ("e_s", "e_a"):
        assert all(isinstance(x, mpmath.mpf) and mpmath.isfinite(x) for x in params.vectors[name])


def test_the_sweep_gives_rows_at_d_3(capsys):
    assert sweep_mod.main(["--variant", "post_bare", "--attention", "linear", "--d", "3", "--eps", "0.1",
                           "--Lmin", "2", "--Lmax", "8", "--jobs", "1", "--quiet", "--json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["L"] for r in rows] == [2, 4, 8] and all(r["certified"] for r in rows)
