"""Leading constants ``B_min(L) = c(d) L^p (1 + o(1))`` (:func:`constructions.laws.leading_term`).

The constant is checked against the exact closed forms (sympy limits along every residue class
the floors of the closed form need, and mpmath at ``L = 2^20, 2^24`` with the correction term
worked out by hand), the proof obligations of its docstring are checked symbolically, and the
sweep's ``fit.leading_constant``, its table note, the derivation and the README's column are
checked against independent computations.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

import mpmath
import pytest
import sympy
from hypothesis import given, settings, strategies as st
from sympy.parsing.sympy_parser import (convert_xor, implicit_multiplication_application,
                                        parse_expr, standard_transformations)

from bounds import sweep
from constructions import arc, closed_forms, laws, segment
from constructions.cell import Cell
from constructions.derive import derivation, render, text
from constructions.symbols import L, d, k, kk, lam, rho, x
from helpers import ARCHS, ARCH_IDS, arch_cell, examples

_REGRESSION = [(a, i) for a, i in zip(ARCHS, ARCH_IDS)
               if a[2] == "regression" and laws.foot_distance(arch_cell(a), 1) is None]
#: every constructed regression cell with a power rate (bare pre-norm with softmax has none)
POWER = [(a, i) for a, i in _REGRESSION if laws.leading_term(arch_cell(a)) is not None]
CELLS = [a for a, _ in POWER]
IDS = [i for _, i in POWER]
m = sympy.Symbol("m", integer=True, positive=True)


def _family_degree(cell):
    fam = laws.family(cell)
    return fam, (2 if fam == "segment" else laws.degree(cell))


def test_every_power_rate_cell_is_listed():
    """The cells without a leading term at d = 8 are exactly those without a theory exponent."""
    missing = [i for a, i in _REGRESSION if laws.leading_term(arch_cell(a)) is None]
    assert missing and all("softmax/pre_bare" in i for i in missing)
    assert len(CELLS) == len(_REGRESSION) - len(missing) >= 20
    for a in CELLS:
        term = laws.leading_term(arch_cell(a))
        assert float(term.exponent) == laws.theory_exponent(arch_cell(a))


def _limit(expr):
    """``lim_{m -> oo}`` of an expression built with Max (limits of the arguments)."""
    if isinstance(expr, (sympy.Max, sympy.Min)):
        return expr.func(*[_limit(a) for a in expr.args])
    return sympy.limit(expr, m, sympy.oo)


def _over(expr, scale):
    return expr.func(*[a / scale for a in expr.args]) if isinstance(expr, sympy.Max) else expr / scale


def _distinct_forms():
    """The cells with distinct closed forms (softmax and linear share the arc's, gain and
    gain_bias the arc's with a gain)."""
    out = {}
    for arch, name in POWER:
        cell = arch_cell(arch)
        out.setdefault(sympy.srepr(closed_forms.formula(cell).main.B_min), (arch, name))
    return list(out.values())


@pytest.mark.parametrize("arch", [a for a, _ in _distinct_forms()], ids=[i for _, i in _distinct_forms()])
def test_constant_is_the_limit_of_the_closed_form(arch):
    """``lim B(L)/L^p = c`` along every residue class of ``L`` (mod 2: the segment's floors,
    mod 4: the arc's), on the exact closed form, by sympy."""
    cell = arch_cell(arch)
    term = laws.leading_term(cell)
    form = closed_forms.formula(cell).main.B_min
    period = {"segment": 2, "arc": 4, "line": 1}[laws.family(cell)]
    for r in range(period):
        Lm = period * m + r
        # floor of a polynomial in the integer m: sympy splits off its integer part
        expr = form.xreplace({L: Lm}).replace(sympy.floor, lambda a: sympy.floor(sympy.expand(a)))
        assert not expr.atoms(sympy.floor)
        assert sympy.simplify(_limit(_over(expr, Lm ** term.exponent)) - term.constant) == 0


def _correction(cell):
    """``a`` in ``B/(c L^p) = 1 + a/L + o(1/L)`` for ``L`` a multiple of 4, by hand from the
    closed forms: segment ``sqrt(D*) = sqrt(L (L + 2))/2`` gives ``1 + 1/L`` (the score gap
    enters at ``O(log L / L^2)``); arc ``b* = (L-1)(L+2)/(4 sqrt(2L+1))`` gives ``1 + 3/(4L)``,
    and its budget the ``1/m``-th power; line ``(1 - 1/L)^{1/m}``."""
    fam, deg = _family_degree(cell)
    return {"segment": 1, "arc": Fraction(3, 4 * deg), "line": Fraction(-1, deg)}[fam]


@pytest.mark.parametrize("arch", CELLS, ids=IDS)
def test_ratio_at_large_L_has_the_expected_correction(arch):
    """The exact closed form at ``L = 2^20, 2^24`` (mpmath, 60 digits): ``L (B/(c L^p) - 1)``
    is the hand-derived correction ``a`` up to ``O(log L / L)``."""
    cell = arch_cell(arch)
    term = laws.leading_term(cell)
    form = closed_forms.formula(cell).main.B_min
    a = float(_correction(cell))
    with mpmath.workdps(60):
        for e in (20, 24):
            Lv = 2**e
            B = mpmath.mpf(str(sympy.N(form.xreplace({L: sympy.Integer(Lv)}), 60)))
            c = mpmath.mpf(str(sympy.N(term.constant, 60)))
            ratio = B / (c * mpmath.mpf(Lv) ** mpmath.mpf(str(sympy.N(term.exponent, 60))))
            assert abs(Lv * (ratio - 1) - a) < 100 * e / Lv * max(cell.d, 1) ** 0.5


@pytest.mark.parametrize("arch", CELLS, ids=IDS)
def test_general_constant_at_other_widths(arch):
    """``c(d)`` at ``d`` is the constant of the cell at that width, for ``d >= d_min``; the
    segment's is ``1/(2 sqrt(H))`` with ``H`` the law's value reach, and ``cap(B)/B^2 -> H``."""
    cell = arch_cell(arch)
    term = laws.leading_term(cell)
    for w in sorted({term.d_min, 17}):
        other = laws.leading_term(cell.replace(d=w))
        assert sympy.simplify(term.general.subs(d, w) - other.constant) == 0
    if laws.family(cell) == "segment":
        B = sympy.Symbol("B", positive=True)
        cap = laws.capacity(cell, sympy.Integer(1000), B)
        kappa = _limit_B(cap / B**2, B)
        H, _ = laws.value_reach(cell)
        assert sympy.simplify(kappa - H) == 0
        assert sympy.simplify(term.constant - 1 / (2 * sympy.sqrt(H))) == 0


def _limit_B(expr, B):
    expr = sympy.expand(expr)
    if isinstance(expr, sympy.Min):
        return sympy.Min(*[sympy.limit(a, B, sympy.oo) for a in expr.args])
    mins = [f for f in sympy.Mul.make_args(expr) if isinstance(f, sympy.Min)]
    if mins:
        rest = expr / mins[0]
        return sympy.Min(*[sympy.limit(rest * a, B, sympy.oo) for a in mins[0].args])
    return sympy.limit(expr, B, sympy.oo)


def test_cells_without_a_rate_or_a_derived_constant():
    assert laws.leading_term(Cell("softmax", "pre_bare", "regression")) is None
    on_line = Cell("softmax", "pre_learned", "regression", d=2, affine="gain")
    assert laws.on_a_line(on_line) and laws.leading_term(on_line) is None
    assert laws.leading_term(on_line.replace(d=3)).d_min == 3
    assert laws.leading_term(Cell("softmax", "post_learned", "classification")) is None
    assert laws.leading_term(Cell("softmax", "post_bare", "regression", eps=0.1)) is None
    assert laws.leading_term(Cell("linear", "pre_learned", "regression", eps=0.1)) is None
    for variant in ("none", "pre_learned"):
        at_eps = laws.leading_term(Cell("softmax", variant, "regression", eps=0.1))
        assert at_eps.constant == laws.leading_term(Cell("softmax", variant, "regression")).constant


# --------------------------------------------------------------------------- proof obligations
def test_segment_corner_pairs_close_at_the_corner():
    """The docstring's segment obligations, as polynomials in ``m`` (``L = 2m``, ``2m + 1``):
    ``lo_k(rho*) = hi_k'(rho*) = D*`` for the active gaps; ``rho*^2 >= L (L - k)`` (``lo_k``
    increases from ``rho*`` on) for ``L >= 5``; and every pair of the extremisers just right of
    the corner has the numerator of ``lo_k - hi_k'`` ``<= 0`` at ``rho*`` and decreasing."""
    num = sympy.fraction(sympy.together(segment.D_LO_K - segment.D_HI_K))[0]
    cases = ((2 * m, (m, m + 1), (m - 1, m)), (2 * m + 1, (m + 1, m + 2), (m, m + 1)))
    for Lm, ks, kks in cases:
        at = {L: Lm}
        rs = sympy.simplify(closed_forms.RHO_STAR.xreplace(at))
        Ds = sympy.simplify(closed_forms.D_STAR.xreplace(at))
        k0, kk0 = sympy.simplify(closed_forms.K_STAR.xreplace(at)), sympy.simplify(closed_forms.KK_STAR.xreplace(at))
        assert sympy.simplify(segment.D_LO_K.xreplace({k: k0, L: Lm, rho: rs}) - Ds) == 0
        assert sympy.simplify(segment.D_HI_K.xreplace({kk: kk0, L: Lm, rho: rs}) - Ds) == 0
        gap = sympy.expand(rs**2 - Lm * (Lm - k0))
        first = 2 if Lm.subs(m, 2) == 5 else 3  # from L = 5 on (L = 4 fails: rho* = 2 < sqrt(8))
        assert all(cf >= 0 for cf in sympy.Poly(sympy.expand(gap.subs(m, m + first)), m).all_coeffs())
        for kv in ks:
            for kkv in kks:
                N = sympy.expand(num.xreplace({L: Lm, k: kv, kk: kkv}))
                for poly in (N.subs(rho, rs), sympy.diff(N, rho).subs(rho, rs)):
                    # <= 0 for every m >= 2: all coefficients of the shifted polynomial <= 0
                    shifted = sympy.Poly(sympy.expand(poly.subs(m, m + 2)), m)
                    assert all(cf <= 0 for cf in shifted.all_coeffs())
                assert sympy.diff(N, rho).subs(rho, rs).subs(m, 2) < 0


@settings(max_examples=examples(100))
@given(st.integers(3, 10**6), st.data())
def test_arc_crossings_are_below_the_bound(L_value, data):
    """``lam_x^2 <= L^4/(16(2L-1))`` at every offset ``x = n - L/2 > 0`` (exact rationals; the
    crossing written out by hand agrees with :data:`constructions.closed_forms.LAM_SQ_X`)."""
    n_value = data.draw(st.integers(L_value // 2 + 1, L_value), label="n")
    xv = Fraction(2 * n_value - L_value, 2)
    Lf = Fraction(L_value)
    num = (Lf - 1) ** 2 / 4 - (xv + Fraction(1, 2)) ** 2
    den = (1 + 1 / (2 * xv)) ** 2 - (1 - 1 / Lf) ** 2
    lam_sq = num / den
    expr = closed_forms.LAM_SQ_X.xreplace({L: sympy.Integer(L_value), x: sympy.Rational(xv.numerator, xv.denominator)})
    assert sympy.Rational(lam_sq.numerator, lam_sq.denominator) == sympy.simplify(expr)
    assert lam_sq <= Lf**4 / (16 * (2 * Lf - 1))


def test_arc_upper_bound_amplitude_and_its_leading_term():
    """``b_lo(sqrt(Lam)) = (L-1) sqrt(L^2 + 8L - 4)/(4 sqrt(2L-1))``, at least the closed form's
    ``b*`` (the symmetric optimum) and with the same leading term ``L^{3/2}/(4 sqrt 2)``."""
    Lam = L**4 / (16 * (2 * L - 1))
    b_up = arc.B_LO.subs(lam, sympy.sqrt(Lam))
    stated = (L - 1) * sympy.sqrt(L**2 + 8 * L - 4) / (4 * sympy.sqrt(2 * L - 1))
    assert sympy.simplify(b_up**2 - stated**2) == 0
    lead = 1 / (4 * sympy.sqrt(2))
    assert sympy.limit(stated / L**sympy.Rational(3, 2), L, sympy.oo) == lead
    for Lv in (3, 4, 7, 64, 1001, 65536):
        assert float(closed_forms.B_ARC_STAR.subs(L, Lv)) <= float(stated.subs(L, Lv)) * (1 + 1e-15)


def test_segment_lower_bound_is_below_the_closed_form_with_the_same_limit():
    """The docstring's lower bound ``f(D*) = D*/sqrt(H D* + sqrt(d) log(2 D*))`` is below the
    exact ``B_min`` (the closed form) and ``f(D*)/(c L) -> 1``."""
    for arch in CELLS:
        cell = arch_cell(arch)
        if laws.family(cell) != "segment":
            continue
        H, _ = laws.value_reach(cell)
        f = closed_forms.D_STAR / sympy.sqrt(H * closed_forms.D_STAR
                                             + sympy.sqrt(cell.d) * sympy.log(2 * closed_forms.D_STAR))
        c = laws.leading_term(cell).constant
        for Lv in (5, 6, 17, 64, 1000, 2**20):
            low = sympy.N(f.subs(L, Lv), 30)
            exact = sympy.N(closed_forms.formula(cell).main.B_min.subs(L, Lv), 30)
            assert low <= exact
        assert abs(float(sympy.N(f.subs(L, 2**24) / (c * 2**24), 30)) - 1) < 1e-6


# --------------------------------------------------------------------------- reporting
#: one cell per family, norm kind and affine, swept on a short grid
SWEPT = [a for a in CELLS if a[1] in ("none", "pre_learned", "post_bare", "post_learned")
         and (a[0] == "softmax" or a[1] == "pre_learned")]


@pytest.mark.parametrize("arch", SWEPT, ids=[IDS[CELLS.index(a)] for a in SWEPT])
def test_sweep_reports_the_ratio_at_the_largest_L(arch):
    cell = arch_cell(arch)
    result = sweep.sweep(cell, [32], jobs=1)
    lead = result["fit"]["leading_constant"]
    term = laws.leading_term(cell)
    assert lead["L"] == 32 and lead["proven"] == term.proven
    assert sympy.sympify(lead["exact"]) == term.constant == eval(lead["srepr"], vars(sympy))
    assert eval(lead["general_srepr"], vars(sympy)) == term.general
    assert lead["value"] == pytest.approx(float(term.constant), rel=1e-15)
    exact = closed_forms.closed_form(cell, 32)["B"]
    scale = float(term.constant) * 32 ** float(term.exponent)
    gap = 2e-4 if cell.post else 1e-5  # the post-norm bisection stops within 1e-4 of the optimum
    assert lead["ratio"] == pytest.approx(exact / scale, rel=gap)
    assert lead["ratio"] >= exact / scale * (1 - 1e-12)  # B_min is certified, above the optimum
    assert lead["lower_ratio"] <= exact / scale * (1 + 1e-12)
    note = sweep.table(result)
    assert "leading constant: " + term.statement in note and f"at L = 32: B_min/(c L^p) = {lead['ratio']:.7f}" in note
    json.dumps(result)


def test_sweep_has_no_constant_without_a_rate():
    result = sweep.sweep(Cell("softmax", "pre_bare", "regression"), [8], jobs=1)
    assert result["fit"]["leading_constant"] is None
    assert "leading constant" not in sweep.table(result)


@pytest.mark.parametrize("arch", CELLS, ids=IDS)
def test_derive_names_the_constant(arch):
    """The JSON derivation (its steps carry the text of every row) names ``c(d)``, ``c`` at the
    width, the exponent and the statement; the LaTeX has the section (compiled for every cell
    by tests/test_derive.py)."""
    cell = arch_cell(arch)
    term = laws.leading_term(cell)
    data = json.loads(render(cell, "json"))
    rows = [s for s in data["steps"] if s["section"] == "leading constant"]
    assert [eval(r["srepr"], vars(sympy)) for r in rows] == [
        term.general, term.constant, sympy.Function("c")(d) * L**term.exponent]
    assert rows[0]["text"].startswith(f"c(d) = {text(term.general)}")
    assert term.statement in rows[2]["text"] and f"p = {term.exponent}" in rows[2]["text"]
    lead = data["leading_constant"]
    assert eval(lead["general"]["srepr"], vars(sympy)) == term.general
    assert eval(lead["constant"]["srepr"], vars(sympy)) == term.constant
    assert lead["statement"] == term.statement and lead["exponent"] == str(term.exponent)


def test_derive_text_and_latex_have_the_section():
    cell = Cell("softmax", "post_learned", "regression")
    term = laws.leading_term(cell)
    out = render(cell, "text")
    assert "\nleading constant:\n" in out and term.statement in out
    assert out.index("leading constant:") < out.index("orthonormal frame:")
    assert "\\paragraph{Leading constant.}" in render(cell, "latex")


def test_derive_says_why_there_is_no_constant():
    (section,) = [s for s in derivation(Cell("softmax", "pre_bare", "regression")) if s.title == "leading constant"]
    assert not section.rows and "finite L*" in section.intro


# --------------------------------------------------------------------------- README
_PARSE = standard_transformations + (implicit_multiplication_application, convert_xor)


def _readme_constants():
    from test_readme import _table
    return [row for row in _table("LayerNorm against RMSNorm")]


def test_readme_column_is_the_toolkit_s():
    """Each entry of the README's leading-constant column is ``c(d)`` of the cell (LayerNorm /
    RMSNorm) in exact form and its value at ``d = 8``, or ``-`` where there is none."""
    rows = _readme_constants()
    assert len(rows) == 11
    seen = 0
    for attention, part, _exp, _ln, _rms, _dims, lead in rows:
        placement, _, rest = part.partition(", ")
        affines = [a.split(" ")[0] for a in rest.split(" or ")] if rest else ["bare"]
        per_kind = [e.strip() for e in lead.split(" / ")]
        per_kind += per_kind[-1:] * (2 - len(per_kind))  # one entry: the same for both kinds
        for kind, entries in zip(("layernorm", "rmsnorm"), per_kind):
            items = entries.split(", ")
            for affine, entry in zip(affines, items + items[-1:] * (len(affines) - len(items))):
                variant = "none" if placement == "none" else f"{placement}_{'bare' if affine == 'bare' else 'learned'}"
                learned = None if affine == "bare" else affine
                cell = Cell(attention, variant, "regression", d=8, norm=kind, affine=learned)
                term = laws.leading_term(cell)
                if term is None:
                    assert entry == "-", (part, kind)
                    continue
                exact, value = re.fullmatch(r"`([^`]+)` = ([0-9.]+)", entry).groups()
                parsed = parse_expr(exact, local_dict={"d": d}, transformations=_PARSE)
                assert sympy.simplify(parsed - term.general) == 0, (part, kind, exact)
                assert float(value) == pytest.approx(float(term.constant), rel=5e-6)
                seen += 1
    assert seen == 18
