"""Post-norm with ``eps > 0`` read at the last position (:mod:`constructions.last_post_eps`).

* the registry serves softmax attention with post-norm at ``eps > 0`` (either kind, every affine,
  LayerNorm ``d >= 3``) with :class:`~constructions.last_post_eps.EpsArcDesign` and linear attention
  with post-LayerNorm with :class:`~constructions.last_post_eps.LinearEpsArcDesign`, with
  post-RMSNorm with :class:`~constructions.last_post_eps.EpsFootDesign`, and the refusals agree
  (LayerNorm at ``d = 2`` and classification still refused);
* the proof of the construction: the outputs of its parameters, through the verifier's pass with
  the cell's ``eps`` (50 digits), are exactly the ``eps = 0`` arc ``c + A (n - c)/sqrt(lam^2 + (n -
  c)^2)`` at ``n = -u, 1, ..., L`` (the count 0 at ``-u``), whatever the tilt;
* the parameters built just above the float estimate are certified by the judge (balls) with the
  cell's ``eps``, within the budget, and count random sequences through the explicit pass;
* linear attention: the counts ``1..L`` are the arc exactly, and the count 0 its own formula;
  with post-RMSNorm the one-sided arc of ``eps = 0`` exactly at ``n >= 1``;
* the sweep's rows are certified above the ``eps = 0`` bound (its proof covers every ``eps``,
  :func:`bounds.lower.last_post_lower`); RMSNorm's rows stop where the tilt has no ``u``, and their
  note says so.
"""

from __future__ import annotations

import mpmath
import pytest

from bounds.search import regression_row, unreached
from constructions import Cell, last_post, last_post_eps, regression, registry
from constructions.refusals import refusal
from tests.helpers import counts_random_sequences
from verify import counts_to, reduced

CELLS = [("layernorm", "post_bare", None), ("layernorm", "post_learned", "gain"),
         ("rmsnorm", "post_bare", None), ("rmsnorm", "post_learned", "gain_bias")]


def _cell(kind, variant, affine, d=8, eps=1e-5, attention="softmax") -> Cell:
    return Cell(attention, variant, norm=kind, affine=affine, d=d, eps=eps, read="last")


@pytest.mark.parametrize("kind,variant,affine", CELLS)
def test_the_registry_serves_softmax_post_norm_at_eps(kind, variant, affine):
    for d in (3, 8):
        cell = _cell(kind, variant, affine, d)
        assert refusal(cell) is None
        assert registry.serving(cell).name == "EpsArcDesign"
        assert isinstance(regression.design(cell), last_post_eps.EpsArcDesign)
        assert registry.serving(cell.replace(eps=0.0)).name == "LastArcDesign"
    narrow = _cell(kind, variant, affine, 2)
    assert (refusal(narrow) is None) == (kind == "rmsnorm")
    assert (registry.serving(narrow) is None) == (kind == "layernorm")


_BUILT = {}


def _built(cell: Cell, L: int):
    """The design, the parameters at 1.001 times its estimate, that budget and the choice."""
    if (cell, L) not in _BUILT:
        design = regression.design(cell)
        B = design.estimate(L) * (1 + 1e-3)
        _BUILT[cell, L] = design, design.build(L, B), B, design._choose(L, B)
    return _BUILT[cell, L]


@pytest.mark.parametrize("kind,variant,affine", CELLS)
@pytest.mark.parametrize("d,eps,L", [(3, 1e-2, 5), (8, 1e-5, 8)])
def test_the_outputs_are_the_eps_zero_arc(kind, variant, affine, d, eps, L):
    """The module docstring's identity: every count's output, with the tilt, is the arc's."""
    cell = _cell(kind, variant, affine, d, eps)
    _, params, _, (lam, u, A, _) = _built(cell, L)
    assert params.cell.eps == eps
    c = last_post.centre(L)
    with mpmath.workdps(50):
        lam, u, A = mpmath.mpf(lam), mpmath.mpf(u), mpmath.mpf(A)
        arc = lambda n: c + A * (n - c) / mpmath.sqrt(lam**2 + (n - c) ** 2)
        y = reduced(params, list(range(L + 1)), backend="mp50")
        want = [arc(-u)] + [arc(n) for n in range(1, L + 1)]
        for got, exact in zip(y, want):
            assert abs(got - exact) <= mpmath.mpf(10) ** -30 * (1 + abs(exact))


@pytest.mark.parametrize("kind,variant,affine", CELLS)
@pytest.mark.parametrize("d,eps,L", [(3, 1e-2, 5), (8, 1e-5, 8)])
def test_the_construction_is_certified_at_eps(kind, variant, affine, d, eps, L):
    cell = _cell(kind, variant, affine, d, eps)
    _, params, B, _ = _built(cell, L)
    assert float(params.bound()) <= B * (1 + 1e-9)
    assert counts_to(params, L, "arb256").counts
    counts_random_sequences(params, L, 5)


def test_eps_costs_the_tilt_and_the_eps_zero_arc_counts_no_longer():
    """At ``eps = 0.01`` the ``eps = 0`` parameters (same vectors, the cell's ``eps``) do not count,
    the lifted ones do, at a budget above the ``eps = 0`` estimate."""
    cell = _cell("layernorm", "post_learned", "gain", 8, 1e-2)
    design, params, B, _ = _built(cell, 16)
    zero = design.inner.build(16, B)
    from constructions.cell import Params

    assert not counts_to(Params(cell, zero.vectors, zero.scalars), 16, "arb256").counts
    assert counts_to(params, 16, "arb256").counts
    assert B > design.inner.estimate(16)


def test_the_rows_are_above_the_bound_and_rmsnorm_says_where_it_stops():
    cell = _cell("rmsnorm", "post_bare", None, 8, 1e-2)
    row = regression_row(cell, 8)
    assert row["certified"] and 0 < row["B_lower"] <= row["B_min"]
    design = regression.design(cell)
    assert design.tilts(8) and not design.tilts(64)
    far = regression_row(cell, 64)
    assert far["B_min"] is None and "the lifted arc" in far["note"]
    assert unreached(cell, far) == far["note"]  # no proof that nothing counts: not a sweep row
    assert regression.design(cell.replace(norm="layernorm")).tilts(64)  # LayerNorm's kappa is free


# ---------------------------------------------------------------------- linear attention
LINEAR = [("post_bare", None), ("post_learned", "gain"), ("post_learned", "gain_bias")]


@pytest.mark.parametrize("variant,affine", LINEAR)
def test_the_registry_serves_linear_post_layernorm_at_eps(variant, affine):
    for d in (3, 8):
        cell = _cell("layernorm", variant, affine, d, attention="linear")
        assert refusal(cell) is None and registry.serving(cell).name == "LinearEpsArcDesign"
    assert refusal(_cell("layernorm", variant, affine, 2, attention="linear")) is not None
    rms = _cell("rmsnorm", variant, affine, 8, attention="linear")
    assert refusal(rms) is None and registry.serving(rms).name == "EpsFootDesign"
    for kind in ("layernorm", "rmsnorm"):
        head = _cell(kind, variant, affine, 8).replace(readout="classification")
        assert "eps > 0" in refusal(head) and registry.serving(head) is None


@pytest.mark.parametrize("variant,affine", LINEAR)
@pytest.mark.parametrize("d,eps,L", [(3, 1e-2, 5), (8, 1e-5, 8)])
def test_linear_outputs_are_the_arc_and_the_count_0_counts(variant, affine, d, eps, L):
    cell = _cell("layernorm", variant, affine, d, eps, attention="linear")
    design, params, B, (lam, u, A, _) = _built(cell, L)
    assert float(params.bound()) <= B * (1 + 1e-9)
    c = last_post.centre(L)
    with mpmath.workdps(50):
        lam, A = mpmath.mpf(lam), mpmath.mpf(A)
        y = reduced(params, list(range(L + 1)), backend="mp50")
        for n in range(1, L + 1):
            exact = c + A * (n - c) / mpmath.sqrt(lam**2 + (n - c) ** 2)
            assert abs(y[n] - exact) <= mpmath.mpf(10) ** -30 * (1 + abs(exact))
        assert abs(y[0]) < 0.5
    assert counts_to(params, L, "arb256").counts
    counts_random_sequences(params, L, 5)
    if d == 3:
        row = regression_row(cell, L)
        assert row["certified"] and row["B_lower"] <= row["B_min"]


# ---------------------------------------------------------------------- the select task
SELECT = [("post_bare", None), ("post_learned", "gain_bias")]


def _select(variant, affine, d=8, eps=1e-5, kind="layernorm") -> Cell:
    return _cell(kind, variant, affine, d, eps).replace(task="select")


@pytest.mark.parametrize("variant,affine", SELECT)
def test_the_registry_serves_the_select_task_with_post_layernorm_at_eps(variant, affine):
    for d in (3, 8):
        cell = _select(variant, affine, d)
        assert refusal(cell) is None and registry.serving(cell).name == "EpsSelectArcDesign"
    assert refusal(_select(variant, affine, 2)) is not None
    rms = _select(variant, affine, 8, kind="rmsnorm")
    assert "post-RMSNorm and eps > 0" in refusal(rms) and registry.serving(rms) is None


def _inner(u_, v):
    return mpmath.fsum(x * y for x, y in zip(u_, v))


@pytest.mark.parametrize("variant,affine", SELECT)
@pytest.mark.parametrize("d,eps,L", [(3, 1e-2, 6), (8, 1e-5, 8)])
def test_the_select_outputs_are_the_arc_at_the_shifted_counts(variant, affine, d, eps, L):
    """Every input's output is the arc ``c + A (p - c)/sqrt(lam^2 + (p - c)^2)``, ``c = L/2``, at
    ``p = n_a + e n_b`` (``e = w_qb/w_qa`` from the query ``q``'s scores) or ``p = -u`` for ``(s)``;
    the parameters are certified and count random sequences."""
    cell = _select(variant, affine, d, eps)
    _, params, B, (lam, u, A, _) = _built(cell, L)
    assert float(params.bound()) <= B * (1 + 1e-9)
    with mpmath.workdps(50):
        e = params.vectors
        tau = 1 / mpmath.sqrt(d)
        lam, u, A, c = mpmath.mpf(lam), mpmath.mpf(u), mpmath.mpf(A), mpmath.mpf(L) / 2
        arc = lambda p: c + A * (p - c) / mpmath.sqrt(lam**2 + (p - c) ** 2)
        shift = {q: mpmath.exp(tau * (_inner(e[f"e_{q}"], e["e_b"]) - _inner(e[f"e_{q}"], e["e_a"])))
                 for q in "ab"}
        inputs = [(0, 0, "s"), (L, 0, "a"), (1, L - 1, "a"), (0, L, "b"), (L // 2, L - L // 2, "b")]
        y = reduced(params, [i[0] for i in inputs], [i[1] for i in inputs], "mp50",
                    query=[i[2] for i in inputs])
        for (n_a, n_b, q), got in zip(inputs, y):
            exact = arc(-u) if q == "s" else arc(n_a + shift[q] * n_b)
            assert abs(got - exact) <= mpmath.mpf(10) ** -30 * (1 + abs(exact)), (n_a, n_b, q)
    assert counts_to(params, L, "arb256").counts
    counts_random_sequences(params, L, 5)


def test_the_select_rows_are_above_the_count_task_s_bound_and_stop_where_the_tilt_does():
    cell = _select("post_learned", "gain", 8, 1e-2)
    row = regression_row(cell, 8)
    assert row["certified"] and 0 < row["B_lower"] <= row["B_min"]
    design = regression.design(cell)
    assert not design.free_kappa and not design.tilts(64)
    assert "the lifted arc" in design.unreached(64)


def test_the_sweep_says_the_construction_is_derived_for_eps(capsys):
    import json

    from bounds import sweep

    argv = ["--variant", "post_bare", "--read", "last", "--eps", "1e-5", "--Lmin", "4", "--Lmax", "4",
            "--d", "3", "--json", "--jobs", "1"]
    assert sweep.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert "derived for eps > 0" in out["note"] and "upper bounds" in out["note"]
    (row,) = out["rows"]
    assert row["certified"] and row["B_lower"] <= row["B_min"]


# ---------------------------------------------------------------------- linear attention, post-RMSNorm
@pytest.mark.parametrize("variant,affine", [("post_bare", None), ("post_learned", "gain")])
@pytest.mark.parametrize("d,eps,L", [(2, 1e-2, 5), (8, 1e-5, 8)])
def test_the_lifted_one_sided_arc_has_the_eps_zero_outputs(variant, affine, d, eps, L):
    """:class:`~constructions.last_post_eps.EpsFootDesign`: at ``n >= 1`` the outputs are those of
    the ``eps = 0`` one-sided read-out it lifts, ``w0 + A (lam* cos psi + (n + F) sin psi)/sqrt(lam*^2
    + (n + F)^2)``; the count 0 within 1/2; certified; random sequences."""
    cell = _cell("rmsnorm", variant, affine, d, eps, attention="linear")
    design = regression.design(cell)
    B = design.estimate(L) * (1 + 1e-3)
    params = design.build(L, B)
    assert float(params.bound()) <= B * (1 + 1e-9)
    lam_R, A_R, w0, psi_R, F, u = design.choice(L, B)
    with mpmath.workdps(50):
        s = mpmath.sqrt(d * mpmath.mpf(eps))
        sigma = s * mpmath.mpf(u) ** 1.5 / mpmath.mpf(d) ** 0.25
        lam_star = mpmath.sqrt(mpmath.mpf(lam_R) ** 2 + sigma**2)
        A_R, lam_R = mpmath.mpf(A_R), mpmath.mpf(lam_R)
        sin_, cos_ = A_R * mpmath.sin(psi_R), A_R * lam_R * mpmath.cos(psi_R) / lam_star  # A sin, A cos psi
        y = reduced(params, list(range(L + 1)), backend="mp50")
        for n in range(1, L + 1):
            x = n + mpmath.mpf(F)
            exact = w0 + (lam_star * cos_ + x * sin_) / mpmath.sqrt(lam_star**2 + x**2)
            assert abs(y[n] - exact) <= mpmath.mpf(10) ** -30 * (1 + abs(exact))
        assert abs(y[0]) < 0.5
    assert counts_to(params, L, "arb256").counts
    counts_random_sequences(params, L, 5)
