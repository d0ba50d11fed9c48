"""Closed forms: the stated extremal points are what the reduced problem says, exactly.

The comparison with the certified sweep is in ``test_closed_form_sweep.py``; here the facts the
closed forms rest on are checked symbolically or in exact rational arithmetic: the corner
identities and extremal gaps, the active offset of the arc, the budget as the inverse of the
capacity, and the ranges.
"""

import itertools
import math
from fractions import Fraction

import mpmath
import pytest
import sympy

from bounds.lower import line_lower
from bounds.lstar import l_star
from constructions import arc, closed_forms as cf, laws, segment
from constructions.cell import ATTENTIONS, NORMS, Cell
from constructions.regression import capacity_branches, design, family
from constructions.symbols import A, L, k, kk, lam, rho, sigma, x

REG_CELLS = list(itertools.product(ATTENTIONS, NORMS))
#: every (attention, variant, norm kind, affine) with a construction, the new kinds and affines included
ALL_PARTS = [(att, norm, kind, affine) for att, norm in REG_CELLS for kind in ("layernorm", "rmsnorm")
             for affine in ((None,) if norm == "none" or norm.endswith("bare") else ("gain", "gain_bias"))
             if laws.foot_distance(Cell(att, norm, "regression", norm=kind, affine=affine), 1) is None]


def test_corner_identities_hold_symbolically():
    m = sympy.Symbol("m", positive=True, integer=True)
    odd = {L: 2 * m + 1, rho: m**2, k: m + 1, kk: m}
    even = {L: 2 * m, rho: m * (m - 1), k: m, kk: m}
    assert sympy.expand(cf.CORNER.subs(odd)) == 0
    assert sympy.expand(cf.CORNER.subs(even)) == 0
    # CORNER is the numerator of lo_k - hi_k': it vanishes exactly where they meet
    r = sympy.Rational(37, 3)
    point = {rho: r, L: 11, k: 4, kk: 5}
    lhs = (segment.D_LO_K - segment.D_HI_K).subs(point)
    assert (lhs == 0) == (cf.CORNER.subs(point) == 0)
    assert sympy.sign(lhs) == sympy.sign(cf.CORNER.subs(point))


@pytest.mark.parametrize("L_value", range(5, 301))
def test_corner_formulas_are_the_exact_corner(L_value):
    """rho*, D*, k*, k'* of the closed form: D_lo = D_hi = D* at rho* with those extremal gaps,
    and the interval is empty just left of rho* and open just right (exact rationals)."""
    sub = {L: L_value}
    r, D_star = Fraction(int(cf.RHO_STAR.subs(sub))), int(cf.D_STAR.subs(sub))
    k_star, kk_star = int(cf.K_STAR.subs(sub)), int(cf.KK_STAR.subs(sub))
    lo = {kv: segment.lo_term(kv, r, L_value) for kv in range(1, L_value + 1)}
    hi = {kv: segment.hi_term(kv, r, L_value) for kv in range(1, L_value + 1)}
    assert max(lo.values()) == lo[k_star] == D_star
    assert min(hi.values()) == hi[kk_star] == D_star
    eps = Fraction(1, 10**6)
    for shift, empty in ((-eps, True), (eps, False)):
        rr = r + shift
        top = max(segment.lo_term(kv, rr, L_value) for kv in range(1, L_value + 1))
        bottom = min(segment.hi_term(kv, rr, L_value) for kv in range(1, L_value + 1))
        assert (top >= bottom) == empty


def _exact(expr, *symbols):
    """A rational function of ``symbols`` evaluated in exact rational arithmetic."""
    num, den = (sympy.Poly(part, *symbols) for part in sympy.fraction(sympy.cancel(expr)))

    def value(poly, args):
        return sum(Fraction(int(c.p), int(c.q)) * math.prod(a**e for a, e in zip(args, powers))
                   for powers, c in poly.terms())

    return lambda *args: value(num, args) / value(den, args)


_LAM_SQ_X = _exact(cf.LAM_SQ_X, L, x)


@pytest.mark.parametrize("L_value", range(2, 401))
def test_arc_active_offset(L_value):
    """The largest crossing over the offsets x = n - L/2 > 0 is at x* (L >= 5); for L <= 4 none
    is positive (exact rationals)."""
    offsets = [Fraction(2 * n - L_value, 2) for n in range(L_value + 1) if 2 * n > L_value]
    values = {xv: _LAM_SQ_X(Fraction(L_value), xv) for xv in offsets}
    best = max(values, key=values.get)
    if L_value <= cf.ARC_DEGENERATE_L_MAX:
        assert values[best] <= 0
        if L_value >= 3:  # the general formula gives the degenerate arc by itself
            assert cf.LAM_STAR_SQ.subs(L, L_value) == 0
    else:
        x_star = Fraction(str(cf.X_STAR.subs(L, L_value)))
        assert values[best] > 0 and values[x_star] == values[best]
        assert Fraction(str(cf.LAM_STAR_SQ.subs(L, L_value))) == values[best]


def test_arc_crossing_solves_the_bound_equation():
    """At lambda^2 = LAM_SQ_X the outermost bound b_lo meets the bound of the offset x."""
    for L_value, x_value in ((9, sympy.Rational(5, 2)), (12, 3), (40, 9)):
        lam_value = sympy.sqrt(cf.LAM_SQ_X.subs({L: L_value, x: x_value}))
        lo = arc.B_LO.subs({lam: lam_value, L: L_value})
        hi = arc.B_HI_X.subs({lam: lam_value, x: x_value})
        assert sympy.simplify(lo - hi) == 0


def test_arc_multiple_of_four_simplification():
    m = sympy.Symbol("m", positive=True, integer=True)
    general = cf.LAM_SQ_X.subs(x, L / 4)
    assert sympy.simplify(general - cf.LAM_STAR_SQ_MULT4) == 0
    b_general = arc.B_LO.subs(lam, sympy.sqrt(general))
    assert sympy.simplify(b_general**2 - cf.B_ARC_STAR_MULT4**2) == 0
    # and x* = L/4 for L = 4m
    assert sympy.simplify(cf.X_STAR.subs(L, 4 * m) - m) == 0


@pytest.mark.parametrize("att,norm,kind,affine", ALL_PARTS,
                         ids=[f"{a}/{n}/{k}-{f or 'bare'}" for a, n, k, f in ALL_PARTS])
@pytest.mark.parametrize("d", [2, 3, 8, 100])
def test_budget_inverts_the_capacity(att, norm, kind, affine, d):
    """cap(shape, budget(A, shape)) = A on the binding branch and >= A on every branch; a
    slightly smaller budget reaches less (mpmath, 40 digits)."""
    cell = Cell(att, norm, "regression", d=d, norm=kind, affine=affine)
    cap = design(cell).capacity_mp
    with mpmath.workdps(40):
        for amp, shape in ((sympy.Rational(7, 2), sympy.Integer(3)), (sympy.Integer(150), sympy.Integer(120)),
                           (sympy.Rational(1, 3), sympy.Rational(9, 4))):
            need = cf.budget(cell, amp, shape)
            B_value = mpmath.mpf(sympy.N(need, 50))
            t_value = mpmath.mpf(sympy.N(shape, 50))
            reach = cap(t_value, B_value)
            assert reach >= amp * (1 - mpmath.mpf("1e-30"))
            if family(cell) == "segment" and not laws.rigid(cell):
                # the score-gap reach sigma <= reach B^2 may bind instead of the capacity
                floor = sympy.sqrt(sympy.sqrt(d) * sympy.log(shape) / laws.score_gap_max(cell, 1))
                if abs(mpmath.mpf(sympy.N(floor, 50)) - B_value) < mpmath.mpf("1e-30") * B_value:
                    continue
            assert abs(reach - amp) < mpmath.mpf("1e-30") * (1 + amp)
            assert cap(t_value, B_value * (1 - mpmath.mpf("1e-10"))) < amp


def test_budget_law_has_one_branch_per_capacity_branch():
    for att, norm, kind, affine in ALL_PARTS:
        cell = Cell(att, norm, "regression", norm=kind, affine=affine)
        law = cf._budget_law(cell)
        pieces = law.args if isinstance(law, sympy.Max) else (law,)
        floor = family(cell) == "segment" and not laws.rigid(cell)
        assert len(pieces) == len(capacity_branches(cell)) + floor
        assert law.free_symbols <= {A, sigma}


@pytest.mark.parametrize("L_value", [2, 3, 7, 64, 1000])
@pytest.mark.parametrize("d", [2, 3, 8, 65536])
def test_line_closed_forms_equal_the_proven_lower_bound(L_value, d):
    """The line's B_min is its Cauchy-Schwarz bound, proved and evaluated in ball arithmetic."""
    for norm in ("none", "pre_bare", "pre_learned"):
        cell = Cell("linear", norm, "regression", d=d)
        form = cf.closed_form(cell, L_value)
        low = line_lower(cell, L_value)
        assert low <= form["B"] <= low * (1 + 1e-15) + 1e-300


def test_ranges():
    for d in (2, 3, 8, 65536):
        for att, norm in REG_CELLS:
            cell = Cell(att, norm, "regression", d=d)
            form = cf.formula(cell)
            fam = family(cell)
            if (fam == "arc" or norm == "pre_bare" and fam == "segment") and d == 2:
                assert form is None
                continue
            if fam == "segment" and norm == "pre_bare" and d > 8:
                continue  # L*(d) grows like exp(sqrt(d)); checked at small d below
            lo = {"segment": cf.segment_L_min(cell) if fam == "segment" else None, "arc": 2, "line": 2}[fam]
            assert form.L_min == lo
            assert cf.closed_form(cell, lo) is not None
            assert cf.closed_form(cell, lo - 1) is None
            if fam == "segment" and norm == "pre_bare":
                assert form.L_max == l_star(d)
                assert cf.closed_form(cell, l_star(d) + 1) is None
            else:
                assert form.L_max is None
    assert cf.formula(Cell("softmax", "none", "classification")) is None
    assert cf.formula(Cell("softmax", "none", "regression", eps=1e-3)) is None


def test_closed_form_values_are_substitutions_of_the_formula():
    cell = Cell("softmax", "post_learned", "regression")
    form = cf.formula(cell)
    assert [(p.L_min, p.L_max) for p in form.pieces] == [(2, 2), (3, None)]
    for L_value in (2, 3, 5, 12, 33):
        expr = form.piece(L_value).B_min.subs(L, L_value)
        got = cf.closed_form(cell, L_value)
        assert got["B"] == pytest.approx(float(expr), rel=1e-15)
        assert sympy.sympify(got["B_exact"]).equals(expr)
    # at L = 3, 4 the general piece is the degenerate arc too
    for L_value in (3, 4):
        assert sympy.simplify(form.main.B_min.subs(L, L_value) - form.pieces[0].B_min.subs(L, L_value)) == 0
    # the degenerate arc for L <= 4: lambda* = 0, b* = b_lo(0) = (L-1)/2
    got = cf.closed_form(cell, 3)
    assert got["lambda"] == 0.0 and got["b"] == pytest.approx(1.0) and got["x"] is None


def test_segment_closed_form_is_the_float_optimum_at_large_width():
    """At d = 65536 the score-gap floor binds at small L: the closed form takes it into account."""
    cell = Cell("softmax", "none", "regression", d=65536)
    est = design(cell).estimate(8)
    assert cf.closed_form(cell, 8)["B"] == pytest.approx(est, rel=1e-6)
    form = cf.formula(cell)
    sigma_star = math.sqrt(65536) * math.log(12)
    assert cf.closed_form(cell, 8)["B"] == pytest.approx(math.sqrt(sigma_star / 2), rel=1e-12)
    assert form.holds(6) and not form.holds(5)
