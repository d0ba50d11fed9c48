"""The constructions: every cell counts, within its budget, and the closed forms are right.

* End to end: for all 20 cells the regression construction at ``1.01 * estimate`` and the
  unit-norm classification head count to small ``L``, certified in ball arithmetic.
* The symbolic side: free symbols, and numeric evaluation against sympy's own ``evalf``; and the
  *meaning* of the symbolic construction: run through an independent reference forward pass
  (``tests/helpers.ref_forward``), its read-out is exactly the family's ``C + A f_t(n)``.
* ``constructions.segment``/``constructions.arc`` closed-form intervals against brute force over
  all pairs / all counts, and against a linear program in ``(C, D)``.
"""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from constructions import arc, basis, classification, laws, regression, segment, zoom
from constructions.basis import FrameVector
from constructions.cell import ATTENTIONS, MAX_D, NORMS, Cell, Params
from constructions.symbols import ARGS, C1, E1, ONE, P, A, B, C, L, t
from helpers import ALL_CELLS, CELL_IDS, ref_mp
from verify import counts_to

REG_CELLS = list(itertools.product(ATTENTIONS, NORMS))
REG_IDS = ["/".join(c) for c in REG_CELLS]
def _reg_parts():
    """Every built regression cell at d = 8 and 3, and at d = 2 the ones with a plane or a line
    there that are new (RMSNorm, LayerNorm with a gain and no bias): (attention, variant, norm
    kind, affine, d)."""
    out = []
    for (att, norm), kind, d in itertools.product(REG_CELLS, ("layernorm", "rmsnorm"), (8, 3, 2)):
        if norm == "none" and kind == "rmsnorm":
            continue  # the kind is immaterial without a norm
        for affine in (None,) if norm == "none" or norm.endswith("bare") else ("gain", "gain_bias"):
            cell = Cell(att, norm, "regression", d=d, norm=kind, affine=affine)
            new = not cell.kind.centred or cell.affine.name == "gain"
            if laws.foot_distance(cell, 1) is None and d >= laws.smallest_d(cell) and (d > 2 or new):
                out.append((att, norm, kind, affine, d))
    return out


REG_PARTS = _reg_parts()
REG_PARTS_IDS = [f"{a}/{n}/{k}-{f or 'bare'}/d{d}" for a, n, k, f, d in REG_PARTS]
SMALL_L = (2, 5, 16)
FAST = settings(max_examples=25, deadline=None)


def _cell(att, norm, readout, d=8):
    return Cell(att, norm, readout, d=d)


# --------------------------------------------------------------------------- end to end


def _check_regression(cell, L):
    des = regression.design(cell)
    est = des.estimate(L)
    assert est is not None and est > 0, f"{cell.describe()} L={L}: no estimate"
    budget = 1.01 * est
    params = des.build(L, budget)
    res = counts_to(params, L, backend="arb256")
    assert res.verdict == "counts" and res.certified, (cell.describe(), L, res)
    assert res.worst_error < 0.5
    # the capacity claim: the construction stays within its budget
    assert params.bound() <= mpmath.mpf(budget) * (1 + mpmath.mpf("1e-9")), (
        cell.describe(), L, float(params.bound()), budget)


def _check_classification(cell, L):
    params = classification.design(cell).build(L)
    assert params.classes == L + 1
    norms = params.norms()
    assert len([k for k in norms if k.startswith("u_")]) == L + 1
    assert all(v <= 1 + 1e-12 for v in norms.values()), {k: float(v) for k, v in norms.items()}
    assert params.bound() <= 1 + 1e-12
    res = counts_to(params, L, backend="arb256")
    assert res.verdict == "counts" and res.certified, (cell.describe(), L, res)
    assert res.min_margin > 0



def _check(cell: Cell, L_value: int):
    if cell.readout == "regression":
        _check_regression(cell, L_value)
    else:
        _check_classification(cell, L_value)

@pytest.mark.parametrize("att,norm,readout", ALL_CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("L_value", SMALL_L)
def test_every_cell_counts_certified_d8(att, norm, readout, L_value):
    _check(_cell(att, norm, readout, d=8), L_value)


# d = 3: the smallest width post-norm allows; bare pre-norm only up to L*(3) = 12
D3_CASES = [
    ("softmax", "none", 16), ("softmax", "pre_bare", 12), ("softmax", "pre_learned", 16),
    ("softmax", "post_bare", 16), ("softmax", "post_learned", 5), ("linear", "post_bare", 16),
    ("linear", "post_learned", 5), ("linear", "pre_learned", 16),
]


@pytest.mark.parametrize("readout", ["regression", "classification"])
@pytest.mark.parametrize("att,norm,L_value", D3_CASES, ids=[f"{a}/{n}/L{l}" for a, n, l in D3_CASES])
def test_cells_count_certified_d3(att, norm, L_value, readout):
    _check(_cell(att, norm, readout, d=3), L_value)


@pytest.mark.parametrize("att,norm", REG_CELLS, ids=REG_IDS)
def test_regression_counts_above_estimate_and_stays_in_budget(att, norm):
    """Every budget above B_min works (not only 1.01 x), and never costs more than the budget."""
    cell = _cell(att, norm, "regression")
    des = regression.design(cell)
    L_value = 7
    est = des.estimate(L_value)
    for factor in (1.0005, 1.3, 4.0):
        budget = est * factor
        params = des.build(L_value, budget)
        assert params.bound() <= mpmath.mpf(budget) * (1 + mpmath.mpf("1e-9")), (factor, float(params.bound()))
        assert counts_to(params, L_value, backend="arb256").certified, factor


def test_estimate_is_none_beyond_lstar():
    from bounds.lstar import l_star

    des = regression.design(_cell("softmax", "pre_bare", "regression", d=3))
    assert des.estimate(l_star(3)) is not None
    assert des.estimate(l_star(3) + 1) is None


# --------------------------------------------------------------------------- symbolic side

SYMBOLS = {B, L, t, A, C}


def test_exported_symbols_are_the_builder_arguments():
    assert [s.name for s in ARGS] == ["B", "L", "t", "A", "C"]
    assert all(isinstance(s, sympy.Symbol) for s in SYMBOLS)
    # one definition: the modules share the very same symbols (same assumptions)
    from constructions import closed_forms, derive

    assert regression.L is L is closed_forms.L and segment.L is L and arc.L is L
    assert derive.L is L and sympy.Symbol("L", integer=True, positive=True) == L != sympy.Symbol("L")


# --------------------------------------------------------------------------- the frame


def _explicit_frame(d):
    """c_1, p, one, e_1 from their definitions, as exact sympy matrices."""
    e1 = sympy.zeros(d, 1)
    e1[0] = 1
    ones = sympy.ones(d, 1)
    c1 = (e1 - ones / d) / sympy.sqrt(sympy.Rational(d - 1, d))
    p = sympy.zeros(d, 1)
    if d >= 3:
        p[1], p[2] = 1 / sympy.sqrt(2), -1 / sympy.sqrt(2)
    return {C1: c1, P: p, ONE: ones / sympy.sqrt(d), E1: e1}


@pytest.mark.parametrize("d", [2, 3, 4, 7])
def test_frame_vectors_are_their_definitions(d):
    frame = _explicit_frame(d)
    for sym, vec in frame.items():
        assert basis.frame_vector(sym, d).matrix() == vec
    # orthonormal (p is zero at d = 2) and e_1 on the frame as stated
    for u, v in itertools.product((C1, P, ONE), repeat=2):
        want = int(u == v and (u != P or d >= 3))
        assert sympy.simplify((frame[u].T * frame[v])[0, 0]) == want
        assert sympy.simplify(basis.frame_vector(u, d).dot(basis.frame_vector(v, d))) == want
    on_frame = basis.E1_ON_FRAME.subs(basis.d, d)
    assert FrameVector.of(on_frame, d).pattern == basis.frame_vector(E1, d).pattern


@given(coeffs=st.lists(st.fractions(-5, 5, max_denominator=7), min_size=8, max_size=8), d=st.integers(2, 9))
@FAST
def test_frame_vector_algebra_matches_matrices(coeffs, d):
    """Combinations, inner products, coordinates and frame coefficients agree with the d-vectors."""
    a = [sympy.Rational(c.numerator, c.denominator) for c in coeffs]
    frame = _explicit_frame(d)
    u_expr = a[0] * C1 + a[1] * P + a[2] * ONE + a[3] * E1
    v_expr = a[4] * C1 + a[5] * P + a[6] * ONE + a[7] * E1
    u, v = FrameVector.of(u_expr, d), FrameVector.of(v_expr, d)
    mat = lambda e: sum((e.coeff(s) * m for s, m in frame.items()), sympy.zeros(d, 1))
    U, Vm = mat(u_expr), mat(v_expr)
    assert sympy.simplify(u.matrix() - U) == sympy.zeros(d, 1)
    assert sympy.simplify(u.dot(v) - (U.T * Vm)[0, 0]) == 0
    for coefficient, sym in zip(u.frame_coefficients(), (C1, P, ONE)):
        assert sympy.simplify(coefficient - (U.T * frame[sym])[0, 0]) == 0
    # a named vector built from another
    w = FrameVector.of(2 * sympy.Symbol("u") - C1, d, {sympy.Symbol("u"): u})
    assert sympy.simplify(w.matrix() - (2 * U - frame[C1])) == sympy.zeros(d, 1)


def test_symbolic_is_refused_at_large_width_and_frame_is_not():
    cell = Cell("softmax", "post_learned", "regression", d=MAX_D)
    des = regression.design(cell)
    with pytest.raises(ValueError, match=f"d <= {regression.SYMBOLIC_MAX_D}"):
        des.symbolic()
    frame = des.frame()
    assert set(frame) == set(cell.vector_names()) | set(cell.scalar_names())
    assert frame["w"].pattern[1:] == (0, 0)  # w = S e_1 exactly
    small = regression.design(Cell("softmax", "post_learned", "regression", d=regression.SYMBOLIC_MAX_D))
    assert small.symbolic()["w"].shape == (regression.SYMBOLIC_MAX_D, 1)


@pytest.mark.parametrize("att,norm", REG_CELLS, ids=REG_IDS)
def test_large_width_is_cheap_and_counts(att, norm):
    """d = 65536: compile and build in O(1) symbolic work; the construction counts (float64)."""
    import time

    cell = Cell(att, norm, "regression", d=MAX_D)
    des = regression.design(cell)
    start = time.perf_counter()
    des.compiled()
    L_value = 5 if norm != "pre_bare" else 7
    est = des.estimate(L_value)
    params = des.build(L_value, 1.01 * est)
    assert time.perf_counter() - start < 20
    assert counts_to(params, L_value, backend="float64").counts
    vals = params.vectors["e_a"]
    assert len(vals) == MAX_D and vals[3] == vals[MAX_D - 1]


BAD_COUNTS = [0, -3, 2.0, True, "4", None, np.float64(3)]
BAD_BUDGETS = [0, -1.0, float("nan"), float("inf"), True, "2", None, 1j, mpmath.mpf("-inf")]


@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
def test_build_refuses_bad_counts(bad):
    des = regression.design(Cell("softmax", "none", "regression"))
    with pytest.raises(ValueError, match="L must be an integer >= 1"):
        des.build(bad, 3.0)


@pytest.mark.parametrize("bad", BAD_BUDGETS, ids=repr)
def test_build_refuses_bad_budgets(bad):
    des = regression.design(Cell("softmax", "none", "regression"))
    with pytest.raises(ValueError, match="B must be a finite real number > 0"):
        des.build(4, bad)


def test_build_accepts_every_kind_of_real():
    from fractions import Fraction

    des = regression.design(Cell("linear", "none", "regression"))
    ref = des.build(4, 1.5)
    for B_value in (np.float32(1.5), mpmath.mpf("1.5"), Fraction(3, 2), sympy.Rational(3, 2)):
        got = des.build(np.int64(4), B_value)
        assert all((got.vectors[k] == ref.vectors[k]).all() for k in ref.vectors)


@pytest.mark.parametrize("att,norm,kind,affine,d", REG_PARTS, ids=REG_PARTS_IDS)
def test_symbolic_free_symbols(att, norm, kind, affine, d):
    cell = Cell(att, norm, "regression", d=d, norm=kind, affine=affine)
    sym = regression.design(cell).symbolic()
    names = {k for k in sym if not k.startswith("_")}
    assert names == set(cell.vector_names()) | set(cell.scalar_names())
    for name, expr in sym.items():
        assert isinstance(expr, (sympy.Basic, sympy.MatrixBase)), name
        assert expr.free_symbols <= SYMBOLS, (name, expr.free_symbols)
        if isinstance(expr, sympy.MatrixBase):
            assert expr.shape == (d, 1), name
    # the vectors that carry the construction depend on the budget or the amplitude
    assert A in sym["w"].free_symbols


# admissible numeric points (B, L, t, A, C) per family
POINTS = {"segment": (3.0, 9, 5.0, 17.5, 0.25), "arc": (2.0, 10, 7.0, 11.0, 0.0),
          "line": (1.3, 6, 1.0, 0.95, 0.125)}


@pytest.mark.parametrize("att,norm,kind,affine,d", REG_PARTS, ids=REG_PARTS_IDS)
def test_evaluate_matches_evalf(att, norm, kind, affine, d):
    cell = Cell(att, norm, "regression", d=d, norm=kind, affine=affine)
    des = regression.design(cell)
    Bv, Lv, tv, Av, Cv = POINTS[des.family]
    sym = des.symbolic()
    with mpmath.workdps(40):
        got = des.evaluate(Lv, Bv, tv, Av, Cv)
        subs = {B: sympy.Float(Bv, 50), L: sympy.Integer(Lv), t: sympy.Float(tv, 50),
                A: sympy.Float(Av, 50), C: sympy.Float(Cv, 50)}
        assert set(got) == set(sym)
        for name, expr in sym.items():
            ref = [sympy.N(x.subs(subs), 45) for x in expr] if isinstance(expr, sympy.MatrixBase) \
                else [sympy.N(expr.subs(subs), 45)]
            vals = list(np.atleast_1d(got[name]))
            assert len(vals) == len(ref), name
            scale = 1 + max(abs(mpmath.mpf(r)) for r in ref)
            for r, v in zip(ref, vals):
                assert abs(mpmath.mpf(r) - v) <= mpmath.mpf("1e-30") * scale, (name, r, v)


def _family_readout(family, n, Lv, tv, Av, Cv):
    """The read-out ``y(n)`` the module docstring of constructions.regression promises."""
    n = mpmath.mpf(n)
    if family == "segment":
        return Cv + Av * n / (tv + n)
    if family == "line":
        return Cv + Av * n
    x = n - mpmath.mpf(Lv) / 2
    return mpmath.mpf(Lv) / 2 + Av * x / mpmath.sqrt(tv**2 + x**2)


@pytest.mark.parametrize("att,norm,kind,affine,d", REG_PARTS, ids=REG_PARTS_IDS)
def test_symbolic_construction_reads_out_the_family(att, norm, kind, affine, d):
    """Through an independent forward pass the construction is exactly ``C + A f_t(n)``."""
    cell = Cell(att, norm, "regression", d=d, norm=kind, affine=affine)
    des = regression.design(cell)
    Bv, Lv, tv, Av, Cv = POINTS[des.family]
    with mpmath.workdps(60):
        vals = des.evaluate(Lv, Bv, tv, Av, Cv)
        params = Params(cell, {k: v for k, v in vals.items() if k != "w0" and not k.startswith("_")},
                        {"w0": vals["w0"]})
        for n in range(Lv + 1):
            ref = ref_mp(params, "s" + "a" * n, dps=60)
            want = _family_readout(des.family, n, Lv, mpmath.mpf(tv), mpmath.mpf(Av), mpmath.mpf(Cv))
            assert abs(ref.out - want) < mpmath.mpf("1e-35") * (1 + abs(want)), (n, ref.out, want)
            if des.family != "arc":  # the derived token values are the model's
                for tok, key in (("s", "_h_s"), ("a", "_h_a")):
                    if n or tok == "s":
                        got = ref.h[tok]
                        assert max(abs(g - h) for g, h in zip(got, vals[key])) < mpmath.mpf("1e-35")


# --------------------------------------------------------------------------- segment


def _phi(rho, n):
    return mpmath.mpf(n) / (rho + n)


def _segment_brute(rho, Lv):
    """``(max (i-j-1)/(phi_i-phi_j), min (i-j+1)/(phi_i-phi_j))`` over all pairs ``i > j``."""
    lo, hi = None, None
    for i in range(Lv + 1):
        for j in range(i):
            gap = _phi(rho, i) - _phi(rho, j)
            a, b = (i - j - 1) / gap, (i - j + 1) / gap
            lo = a if lo is None else max(lo, a)
            hi = b if hi is None else min(hi, b)
    return lo, hi


def _segment_spread_slack(rho, D, Lv):
    """Exact ``s``: the largest ``1/2 - max_n |C + D phi(n) - n|`` over ``C``."""
    g = [D * _phi(rho, n) - n for n in range(Lv + 1)]
    return (1 - (max(g) - min(g))) / 2


def _lp_slack(phi_values, Lv, D_fixed=None):
    """max s over (C, D, s): |C + D phi(n) - n| <= 1/2 - s for n = 0..L (D fixed if given)."""
    n = np.arange(Lv + 1, dtype=float)
    phi_values = np.asarray(phi_values, dtype=float)
    ones = np.ones(Lv + 1)
    A_ub = np.vstack([np.column_stack([ones, phi_values, ones]),
                      np.column_stack([-ones, -phi_values, ones])])
    b_ub = np.concatenate([0.5 + n, 0.5 - n])
    d_bounds = (None, None) if D_fixed is None else (D_fixed, D_fixed)
    res = linprog([0, 0, -1], A_ub=A_ub, b_ub=b_ub, bounds=[(None, None), d_bounds, (None, 1)],
                  method="highs")
    assert res.status == 0, res.message
    return res.x[2], res.x[1]


#: shapes (rho or lambda) spread over six decades
shapes = st.floats(-2, 4).map(lambda e: 10.0**e)


@FAST
@given(rho=shapes, Lv=st.integers(1, 30))
def test_segment_interval_matches_brute_force(rho, Lv):
    with mpmath.workdps(40):
        lo, hi = segment.interval(rho, Lv)
        blo, bhi = _segment_brute(mpmath.mpf(rho), Lv)
        assert abs(lo - blo) <= mpmath.mpf("1e-30") * (1 + abs(blo))
        assert abs(hi - bhi) <= mpmath.mpf("1e-30") * (1 + abs(bhi))
    flo, fhi = segment.interval_float(np.array([rho]), Lv)
    assert flo[0] == pytest.approx(float(blo), rel=1e-9, abs=1e-12)
    assert fhi[0] == pytest.approx(float(bhi), rel=1e-9)


@FAST
@given(rho=st.floats(-1, 3).map(lambda e: 10.0**e), Lv=st.integers(1, 30))
def test_segment_interval_is_the_feasible_set_lp(rho, Lv):
    with mpmath.workdps(40):
        r = mpmath.mpf(rho)
        lo, hi = segment.interval(r, Lv)
        phis = [float(_phi(r, n)) for n in range(Lv + 1)]
        # D free: some (C, D) counts iff the interval is non-empty
        s_free, D_opt = _lp_slack(phis, Lv)
        if hi > lo:
            s_mid = _segment_spread_slack(r, (lo + hi) / 2, Lv)
            assert s_mid > 0
            assert s_free >= s_mid - 1e-9
        else:
            assert s_free < 1e-9
        if s_free > 1e-7:  # the LP's optimal amplitude lies in the interval
            assert hi > lo
            assert lo * (1 - 1e-6) - 1e-9 <= D_opt <= hi * (1 + 1e-6)
        width = hi - lo
        if width > 0:
            for D in (lo + width / 100, (lo + hi) / 2, hi - width / 100):
                exact = _segment_spread_slack(r, D, Lv)
                assert exact > 0
                s, _ = _lp_slack(phis, Lv, float(D))
                assert s > -1e-9
                if exact > 1e-7:
                    assert s > 0
        step = max(abs(width), hi * mpmath.mpf("1e-4")) / 100
        for D in (lo - step, hi + step):
            exact = _segment_spread_slack(r, D, Lv)
            assert exact < 0
            s, _ = _lp_slack(phis, Lv, float(D))
            assert s < 1e-9
            if exact < -1e-7:
                assert s < 0


@FAST
@given(rho=st.floats(0, 3).map(lambda e: 10.0**e), Lv=st.integers(1, 30), frac=st.floats(0.05, 0.95))
def test_segment_centre_is_minimax(rho, Lv, frac):
    with mpmath.workdps(40):
        r = mpmath.mpf(rho)
        lo, hi = segment.interval(r, Lv)
        if not hi > lo:
            return
        D = lo + frac * (hi - lo)
        Cv = segment.centre(r, D, Lv)
        err = max(abs(Cv + D * _phi(r, n) - n) for n in range(Lv + 1))
        g = [D * _phi(r, n) - n for n in range(Lv + 1)]
        assert abs(err - (max(g) - min(g)) / 2) < mpmath.mpf("1e-30")
        assert err < mpmath.mpf(1) / 2


def test_segment_known_corner():
    """rho = 12 is where counting to 8 first becomes possible: D_lo = D_hi = 20 there."""
    with mpmath.workdps(30):
        lo, hi = segment.interval(12, 8)
        assert abs(lo - 20) < mpmath.mpf("1e-25") and abs(hi - 20) < mpmath.mpf("1e-25")
        lo2, hi2 = segment.interval(mpmath.mpf(12) * (1 - mpmath.mpf("1e-6")), 8)
        assert lo2 > hi2
        lo3, hi3 = segment.interval(mpmath.mpf(12) * (1 + mpmath.mpf("1e-6")), 8)
        assert lo3 < hi3


# --------------------------------------------------------------------------- arc


def _arc_brute(lam, Lv):
    """Feasible amplitudes of ``L/2 + b x/sqrt(lam^2+x^2)``, brute force over every count."""
    lo, hi = mpmath.mpf(0), mpmath.inf
    half = mpmath.mpf(Lv) / 2
    for n in range(Lv + 1):
        x = n - half
        if x == 0:
            continue
        s = mpmath.sqrt(lam**2 + x**2)
        lo = max(lo, s * (1 - 1 / (2 * abs(x))))
        hi = min(hi, s * (1 + 1 / (2 * abs(x))))
    return lo, hi


def _arc_counts(lam, b, Lv):
    half = mpmath.mpf(Lv) / 2
    return all(abs(half + b * (n - half) / mpmath.sqrt(lam**2 + (n - half) ** 2) - n) < mpmath.mpf(1) / 2
               for n in range(Lv + 1))


@FAST
@given(lam=shapes, Lv=st.integers(1, 30))
def test_arc_interval_matches_brute_force(lam, Lv):
    with mpmath.workdps(40):
        lo, hi = arc.interval(lam, Lv)
        blo, bhi = _arc_brute(mpmath.mpf(lam), Lv)
        # (full precision of the lower end is checked in test_arc_interval_full_precision)
        assert abs(lo - blo) <= mpmath.mpf("1e-14") * (1 + blo)
        assert abs(hi - bhi) <= mpmath.mpf("1e-30") * (1 + bhi)
    flo, fhi = arc.interval_float(np.array([lam]), Lv)
    assert flo[0] == pytest.approx(float(blo), rel=1e-9, abs=1e-12)
    assert fhi[0] == pytest.approx(float(bhi), rel=1e-9)


def test_arc_interval_full_precision():
    with mpmath.workdps(40):
        lo, _ = arc.interval(1, 3)
        exact = mpmath.sqrt(1 + mpmath.mpf(9) / 4) * (1 - mpmath.mpf(1) / 3)
        assert abs(lo - exact) < mpmath.mpf("1e-35")


@FAST
@given(lam=shapes, Lv=st.integers(1, 30))
def test_arc_interval_is_the_feasible_set(lam, Lv):
    with mpmath.workdps(40):
        lv = mpmath.mpf(lam)
        lo, hi = arc.interval(lv, Lv)
        width = hi - lo
        if width > 0:
            for b in (lo + width * mpmath.mpf("1e-6"), (lo + hi) / 2, hi - width * mpmath.mpf("1e-6")):
                assert _arc_counts(lv, b, Lv), b
        step = max(abs(width), hi * mpmath.mpf("1e-9")) * mpmath.mpf("1e-6")
        if lo > 0:
            assert not _arc_counts(lv, lo - step, Lv)
        assert not _arc_counts(lv, hi + step, Lv)
        assert not _arc_counts(lv, hi, Lv)  # strict inequality at the bound itself


def test_arc_needs_lambda_of_order_L_three_halves():
    """The smallest feasible lambda grows like L^{3/2} (the post-norm rate)."""
    def smallest(Lv):
        grid = np.geomspace(1e-2, 1e5, 4001)
        lo, hi = arc.interval_float(grid, Lv)
        ok = lo < hi
        first = int(np.argmax(ok))
        assert ok[first] and ok[first:].all()  # feasibility is an up-set in lambda
        return grid[first]

    ratio = smallest(256) / smallest(64)
    assert 4 ** 1.5 * 0.8 < ratio < 4 ** 1.5 * 1.2


def test_build_refuses_beyond_its_limits_up_front():
    from constructions.cell import MAX_B, MAX_L

    des = regression.design(Cell("softmax", "post_learned", "regression"))
    with pytest.raises(ValueError, match="MAX_L"):
        des.build(MAX_L + 1, 6.0)
    with pytest.raises(ValueError, match="MAX_B"):
        des.build(4, MAX_B * 10)
    assert des.build(4, MAX_B).bound() <= MAX_B * (1 + 1e-12)


@settings(max_examples=15, deadline=None)
@given(L=st.integers(1, 3000))
def test_arc_screen_minimum_is_the_minimum_over_every_offset(L):
    """The float arc interval takes ``b_hi`` at the offsets next to its minimiser only: the
    same number as the minimum over every offset."""
    lam = np.geomspace(1e-3, 1e8, 37)
    xs = np.arange(L + 1) - L / 2
    whole = arc._hi_np(lam[:, None], xs[xs > 0]).min(axis=-1)
    assert np.array_equal(arc.interval_float(lam, L)[1], whole)


@settings(max_examples=200, deadline=None)
@given(log_t=st.floats(-20, 20), rtol=st.sampled_from([1e-3, 1e-7, 1e-12]))
def test_bisect_up_brackets_the_threshold(log_t, rtol):
    """:func:`constructions.zoom.bisect_up` on the up-set ``[t, oo)``: the bracket holds ``t``,
    its upper end is feasible, and its width is within ``rtol``."""
    threshold = float(np.exp(log_t))
    lo, hi = zoom.bisect_up(lambda b: b >= threshold, 1e-10, 1e10, rtol)
    assert lo < threshold <= hi and hi / lo <= 1 + rtol
