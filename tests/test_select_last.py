"""The select task read at the last position, linear attention (constructions.select_last): the
token-by-token pass on random sequences, the certifying judge at every small L, the reduction of
the inputs to two lines and a point, the bare pre-norm lower bound, B_lower <= B_min, refusals.

Expectations are derived here independently: the outputs of the explicit pass (written from
the model, position by position) against the count of ``a`` tokens, exact line arithmetic in
mpmath at 60 digits, and the Gram bound of the lower bound recomputed with Fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import search
from bounds import sweep as sweep_mod
from bounds.lower import b_lower, last_free_line_lower, last_line_lower, last_select_line_lower
from constructions import laws, select_last, tasks
from constructions.cell import Cell
from constructions.regression import design
from tests.helpers import counts_random_sequences
from verify import counts_to, explicit

BUILT = [("none", "layernorm"), ("pre_bare", "layernorm"), ("pre_bare", "rmsnorm"),
         ("pre_learned", "layernorm", "gain"), ("pre_learned", "layernorm", "gain_bias"),
         ("pre_learned", "rmsnorm", "gain"), ("pre_learned", "rmsnorm", "gain_bias")]


def _cell(variant, norm="layernorm", affine=None, d=8, **kw) -> Cell:
    return Cell("linear", variant, "regression", d=d, norm=norm, affine=affine, task="select", read="last", **kw)


def _params(cell: Cell, L: int, factor=1 + 1e-4):
    dz = design(cell)
    est = dz.estimate(L)
    return dz.build(L, est * factor if L > 1 else 1e-3), est


@pytest.mark.parametrize("case", BUILT, ids=lambda c: "-".join(c))
@pytest.mark.parametrize("d", [2, 3, 8])
def test_the_construction_is_certified_at_every_small_L(case, d):
    cell = _cell(*case, d=d)
    if not select_last.built(cell):
        assert d == 2 and (cell.kind.centred or not cell.normed) and tasks.refusal(cell) is not None
        return
    for L in range(1, 9):
        params, est = _params(cell, L)
        res = counts_to(params, L, "arb256")
        assert res.certified, (L, res.first_failure)
        # within the budget it was built at
        B = est * (1 + 1e-4) if L > 1 else 1e-3
        assert max(float(mpmath.sqrt(sum(x * x for x in v))) for v in params.vectors.values()) <= B * (1 + 1e-12)
        if L > 1:  # below the plan's budget too: the vectors are shrunk to it, never beyond
            small = design(cell).build(L, est * 0.7)
            assert max(float(mpmath.sqrt(sum(x * x for x in v))) for v in small.vectors.values()) <= est * 0.7 * (1 + 1e-12)


@pytest.mark.parametrize("case", BUILT, ids=lambda c: "-".join(c))
def test_random_sequences_through_the_explicit_pass(case):
    cell = _cell(*case)
    L = 40
    params, _ = _params(cell, L)
    counts_random_sequences(params, L, 60)


@pytest.mark.parametrize("case", BUILT, ids=lambda c: "-".join(c))
def test_the_outputs_lie_on_two_lines_and_a_point(case):
    """No output depends on the number of b tokens; query a gives ``K_a + k_a n`` and query b
    ``K_b + k_b n`` (no norm: the same slope, and the b line is the a line shifted by one count)."""
    cell = _cell(*case)
    L = 12
    params, _ = _params(cell, L)
    with mpmath.workdps(60):
        y = lambda s: explicit(params, s, "mp60")
        ya = [y("s" + "a" * n) for n in range(1, L + 1)]
        yb = [y("s" + "a" * n + "b") for n in range(0, L)]
        for n in (1, 3, 7):  # b tokens change nothing (any order)
            assert abs(y("s" + "ba" * n) - y("s" + "a" * n)) < mpmath.mpf(10) ** -40  # query a
            assert abs(y("s" + "ab" * n + "bb") - y("s" + "a" * n + "b")) < mpmath.mpf(10) ** -40  # query b
        ka, kb = ya[1] - ya[0], yb[1] - yb[0]
        assert all(abs(ya[i + 1] - ya[i] - ka) < mpmath.mpf(10) ** -40 for i in range(L - 1))
        assert all(abs(yb[i + 1] - yb[i] - kb) < mpmath.mpf(10) ** -40 for i in range(L - 1))
        if not cell.normed or cell.affine.gain:  # b scores a as a does: one slope, shifted lines
            assert abs(ka - kb) < mpmath.mpf(10) ** -40
            assert all(abs((yb[n] - n) - (ya[n] - (n + 1))) < mpmath.mpf(10) ** -40 for n in range(L))
            assert abs(y("s")) < mpmath.mpf(10) ** -40  # K_s = 0
        elif cell.kind.centred and not design(cell)._use_one(L):  # the symmetric slopes 1 +- a/(L-1)
            assert ka > 1 > kb and abs((ka - 1) + (kb - 1)) < mpmath.mpf(10) ** -40
        else:  # one constant: query a exact, s on it, query b below
            assert abs(ka - 1) < mpmath.mpf(10) ** -40 and kb < 1
            assert abs(y("s") - (ya[0] - 1)) < mpmath.mpf(10) ** -40


@settings(max_examples=100, deadline=None)
@given(L=st.integers(3, 400), u=st.fractions(0, 1, max_denominator=64), v=st.fractions(0, 1, max_denominator=64),
       wq=st.fractions(-1, 1, max_denominator=64), d=st.sampled_from([3, 8, 64]))
def test_the_bare_bound_holds_for_every_feasible_slope_set(L, u, v, wq, d):
    """Every ``(x, c, q)`` the proof allows (``|x - 1|, |c x - 1|, |q| < 1/(L-1)``) needs the
    Gram norm ``(x^2 - 2cxq + q^2)/(d^2 (1 - c^2))``, at least the bound squared (Fractions)."""
    e = Fraction(1, L - 1)
    x = 1 - e + 2 * e * (u * Fraction(62, 64) + Fraction(1, 64))  # strictly inside
    cx = 1 - e + 2 * e * (v * Fraction(62, 64) + Fraction(1, 64))
    c = cx / x
    if c >= 1:
        return  # h_b = h_a, excluded by the proof (then q = x)
    q = wq * e * Fraction(63, 64)
    gram = (x * x - 2 * c * x * q + q * q) / (d * d * (1 - c * c))
    bound = last_select_line_lower(_cell("pre_bare", d=d), L)
    assert bound**2 <= float(gram) * (1 + 1e-12)


def test_b_lower_is_the_count_task_s_and_the_bare_bound_grows():
    for d in (3, 8):
        for L in (1, 2, 3, 5, 64, 1000):
            gain = _cell("pre_learned", affine="gain", d=d)
            assert b_lower(gain, L, None) == last_line_lower(gain.replace(task="count"), L)
            free = _cell("none", d=d)
            assert b_lower(free, L, None) == last_free_line_lower(free.replace(task="count"), L)
            bare = _cell("pre_bare", d=d)
            count = last_line_lower(bare.replace(task="count"), L)
            low = b_lower(bare, L, None)
            assert low >= count
            if L >= 3:
                e = 1 / (L - 1)
                assert low >= (1 - 2 * e) * (1 + e) / (2 * d * math.sqrt(e)) * (1 - 1e-14)
    # the rate: sqrt(L)/(2d)
    bare = _cell("pre_bare")
    assert b_lower(bare, 4097, None) == pytest.approx(math.sqrt(4096) / 16, rel=2e-3)
    assert laws.theory_exponent(bare) == 0.5 and laws.theory_exponent(_cell("none")) == 0.0


@pytest.mark.parametrize("case", BUILT, ids=lambda c: "-".join(c))
def test_rows_are_certified_above_the_lower_bound(case):
    cell = _cell(*case)
    for L in (2, 5, 16):
        row = search.regression_row(cell, L)
        assert row["certified"] and row["B_lower"] is not None
        assert row["B_lower"] <= row["B_min"]
        if not cell.normed or cell.affine.gain:  # bounded in L: the price is budget, not growth
            assert row["B_min"] < 4


def test_the_bare_rows_approach_the_bound_s_leading_term():
    """LayerNorm: to the bound's ``sqrt(L-1)/(2d)``; RMSNorm (one constant): ``sqrt(2)`` above,
    the root of ``1 - sqrt(1 - 1/(d B)^2) = (1 - nu/d)/L`` (solved here by bisection)."""
    cell = _cell("pre_bare")
    dz = design(cell)
    ratios = [dz.estimate(L) / last_select_line_lower(cell, L) for L in (64, 512, 2047)]
    assert ratios[0] > ratios[1] > ratios[2] > 1 and ratios[2] < 1.06
    rms = _cell("pre_bare", norm="rmsnorm")
    for L in (2, 64, 2047):
        d, nu = rms.d, float(select_last.BARE_NU)
        f = lambda B: 1 - math.sqrt(1 - 1 / (d * B) ** 2) - (1 - nu * min(B, 1) / d) / L
        lo, hi = 1 / d, 100.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
        assert design(rms).estimate(L) == pytest.approx(hi, rel=1e-6)
    ratio = design(rms).estimate(2047) / last_select_line_lower(rms, 2047)
    assert ratio == pytest.approx(math.sqrt(2), rel=0.01)


REFUSED = [dict(variant="none", d=2), dict(variant="pre_bare", d=2), dict(variant="pre_bare", norm="rmsnorm", eps=0.01),
           dict(variant="pre_bare", eps=0.01, d=2), dict(variant="pre_learned", d=2),
           dict(variant="pre_learned", norm="rmsnorm", eps=0.01),
           dict(variant="post_bare", norm="rmsnorm", eps=0.01), dict(variant="post_bare", d=2, eps=0.01),
           dict(variant="post_bare", eps=0.01), dict(variant="none", readout="classification", d=2)]


@pytest.mark.parametrize("kw", REFUSED, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_cells_still_refused_say_why(kw, capsys):
    kw = dict(kw)
    cell = Cell(kw.pop("attention", "linear"), kw.pop("variant"), kw.pop("readout", "regression"),
                task="select", read="last", **kw)
    why = tasks.refusal(cell)
    assert why is not None and "no construction" in why and not select_last.built(cell)
    argv = ["--variant", cell.variant, "--attention", cell.attention, "--readout", cell.readout,
            "--task", "select", "--read", "last", "--Lmax", "4", "--d", str(cell.d), "--eps", str(cell.eps),
            "--norm", cell.kind.name]
    assert sweep_mod.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "no construction" in err


def test_built_cells_are_not_refused_and_have_no_closed_form():
    for case in BUILT:
        cell = _cell(*case)
        assert tasks.refusal(cell) is None and select_last.built(cell)
        assert tasks.closed_form(cell, 8) is None
        assert isinstance(design(cell), (select_last.FreeSelectDesign, select_last.BareSelectDesign,
                                         select_last.GainSelectDesign, select_last.ScaleSelectDesign))


def test_bare_layernorm_builds_the_cheaper_geometry():
    """Bare pre-LayerNorm: the one-constant geometry where it is cheaper (small L), the
    symmetric slopes beyond, and never above either."""
    dz = design(_cell("pre_bare"))
    for L in (2, 8, 128, 512):
        one, sym = dz.one.estimate(L), select_last._RigidDesign.estimate(dz, L)
        assert dz.estimate(L) == min(one, sym)
    assert dz._use_one(2) and not dz._use_one(512)
    params, _ = _params(dz.cell, 512)
    with mpmath.workdps(60):
        y = lambda seq: explicit(params, seq, "mp60")
        ka, kb = y("saa") - y("sa"), y("sab") - y("sb")
        assert ka > 1 > kb and abs((ka - 1) + (kb - 1)) < mpmath.mpf(10) ** -40  # 1 +- a/(L-1)
