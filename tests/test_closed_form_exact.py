"""The closed forms without run-time solving: the explicit laws they read are the solutions
sympy finds, and a closed form at one ``L`` is the substitution of ``L`` into the formula.

* :func:`constructions.laws.arc_crossing_sq` is the root of ``b_lo^2 = b_hi_x^2`` in
  ``lam^2`` that ``sympy.solve`` finds (symbolically), and solves the equation exactly at random
  rational points (an invariant, in Fractions);
* the arc's budget law (the capacity's own inverse, :func:`constructions.laws.budget`) is the
  solved inverse of its capacity branch, as the same sympy expression (so every printed form
  is the one the solve gives);
* :func:`constructions.closed_forms.closed_form` (the piece's ingredients at the number ``L``)
  is, string for string, the formula's piece with ``L`` substituted, and
  :func:`constructions.closed_forms.value` its nearest double;
* the arc's closed forms call neither ``sympy.solve`` nor ``sympy.simplify``, and the exact
  report of an arc cell does not load the constructions.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions import arc, closed_forms as cf, laws
from constructions.cell import ATTENTIONS, NORMS, Cell
from constructions.regression import capacity_branches, design
from constructions.symbols import A, B, L, lam, sigma, x
from helpers import examples
from verify import params_file

ROOT = Path(__file__).resolve().parents[1]

#: every regression cell with a closed form of the count task, at a few widths
FORMED = [cell for att in ATTENTIONS for norm in NORMS for kind in ("layernorm", "rmsnorm")
          for affine in ((None,) if norm == "none" or norm.endswith("bare") else ("gain", "gain_bias"))
          for d in (2, 3, 8, 17)
          for cell in [Cell(att, norm, "regression", d=d, norm=kind, affine=affine)]
          if cf.ranges(cell) is not None]
ARC_CELLS = [cell for cell in FORMED if laws.family(cell) == "arc"]
SEGMENT_CELLS = [cell for cell in FORMED if laws.family(cell) == "segment"]


def test_arc_crossing_is_the_solution_of_the_bound_equation():
    """``sympy.solve`` of ``b_lo(lam)^2 = b_hi_x(lam)^2`` for ``lam^2`` has one root, the
    explicit crossing, as the same expression."""
    lo, hi = arc.b_lo(lam, L, sympy.sqrt), arc.b_hi_x(lam, x, sympy.sqrt)
    (root,) = sympy.solve(sympy.Eq(lo**2, hi**2), lam**2)
    explicit = laws.arc_crossing_sq(L, x)
    assert sympy.simplify(root - explicit) == 0
    assert root == explicit
    assert cf.LAM_SQ_X == explicit


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 10**9), st.fractions(min_value=Fraction(1, 10**6), max_value=10**9))
def test_arc_crossing_solves_the_squared_bounds_exactly(L_value, x_value):
    """At ``lam^2 = arc_crossing_sq(L, x)``: ``(lam^2 + L^2/4)(1 - 1/L)^2 = (lam^2 + x^2)(1 + 1/(2x))^2``
    in exact rationals (both sides written from the bounds' definitions)."""
    Lq = Fraction(L_value)
    u = laws.arc_crossing_sq(Lq, x_value)
    assert (u + Lq**2 / 4) * (1 - 1 / Lq) ** 2 == (u + x_value**2) * (1 + 1 / (2 * x_value)) ** 2


@pytest.mark.parametrize("cell", ARC_CELLS + [Cell("softmax", "post_learned", "regression", d=d) for d in (100, 65536)],
                         ids=lambda c: c.describe())
def test_arc_budget_law_is_the_solved_capacity(cell):
    """The arc's budget law is the solution ``B > 0`` of ``cap(B) = A`` sympy finds, as the same
    expression."""
    (branch,) = capacity_branches(cell)
    (root,) = sympy.solve(sympy.Eq(branch, A), B)
    assert cf._budget_law(cell) == root
    assert sympy.simplify(laws.capacity(cell, 1, root) - A) == 0


#: the segment cells of the law test: d = 8 (``sqrt(d - 1)`` irrational, as at d = 3; the same
#: branches of :func:`constructions.laws.segment_budgets` as at d = 3 and 17 for every cell) is left
#: out, d = 2 (degenerate cases, ``sqrt(d - 1) = 1``) and d = 17 (``sqrt(d - 1) = 4``) stay
SEGMENT_LAW_CELLS = [cell for cell in SEGMENT_CELLS if cell.d != 8]


def _law_shape(cell: Cell) -> tuple:
    """Which branches the segment's budget law has, and the conditions the law test reads."""
    branches = laws.segment_budgets(cell, A, sigma)
    return (sorted(k for k, v in branches.items() if v is not None), laws.rigid(cell),
            laws.on_a_line(cell), laws.value_reach(cell) is None)


def test_the_law_test_s_widths_cover_d_8():
    """Every segment cell at d = 8 has the branches and conditions of its twin at d = 3."""
    left_out = [cell for cell in SEGMENT_CELLS if cell not in SEGMENT_LAW_CELLS]
    assert left_out and all(cell.d == 8 for cell in left_out)
    for cell in left_out:
        assert cell.replace(d=3) in SEGMENT_LAW_CELLS
        assert _law_shape(cell) == _law_shape(cell.replace(d=3)), cell.describe()


@pytest.mark.parametrize("cell", SEGMENT_LAW_CELLS, ids=lambda c: c.describe())
def test_segment_budget_law_is_the_solved_capacity(cell):
    """Each branch of the segment's budget law solves its own equation (the capacity branch at
    ``A``, the score-gap reach at ``sigma``), and their maximum is the maximum of the roots sympy
    finds, at random positive amplitudes and score gaps (50 digits)."""
    branches = laws.segment_budgets(cell, A, sigma)
    if branches["score"] is not None:
        assert sympy.simplify(laws.score_gap_max(cell, branches["score"]) - sigma) == 0
    if branches["reach"] is not None:
        assert sympy.simplify(2 * laws.value_reach(cell)[1] * branches["reach"] ** 2 - A) == 0
    if laws.value_reach(cell) is None or laws.on_a_line(cell):  # X = sqrt(2 sigma)
        assert sympy.simplify(branches["value"] * sympy.sqrt(2 * sigma) - A) == 0
    solved = [sympy.solve(sympy.Eq(branch, A), B)[0] for branch in capacity_branches(cell)]
    if not laws.rigid(cell):
        solved.append(sympy.solve(sympy.Eq(laws.score_gap_max(cell, B), sigma), B)[0])
    rng = random.Random(cell.d)
    for _ in range(20):
        at = {A: sympy.Rational(rng.randint(1, 10**6), rng.randint(1, 1000)),
              sigma: sympy.Rational(rng.randint(1, 10**4), rng.randint(1, 1000))}
        law = sympy.Max(*laws.segment_budget_branches(cell, A, sigma)).xreplace(at)
        ref = sympy.Max(*solved).xreplace(at)
        assert abs(sympy.N(law - ref, 50)) < sympy.Float(10) ** -40 * sympy.N(ref, 50)
        if laws.value_reach(cell) is not None and not laws.on_a_line(cell):  # B X(B) = A on the root
            H, _ = laws.value_reach(cell)
            Bv = branches["value"].xreplace(at)
            X = (H * Bv + sympy.sqrt(H**2 * Bv**2 + 4 * at[sigma])) / 2
            assert abs(sympy.N(Bv * X - at[A], 50)) < sympy.Float(10) ** -40 * at[A]


def _substituted(cell: Cell, L_value: int) -> dict:
    """The closed form at ``L`` the slow way: the formula's piece built in ``L`` and ``L``
    substituted into it."""
    piece = cf.formula(cell).piece(L_value)
    at = {L: sympy.Integer(L_value)}
    B_exact = piece.B_min.xreplace(at)
    ext = {name: e.xreplace(at) for name, e in piece.extremal.items()}
    out = {"B": float(B_exact), "B_exact": str(B_exact), "valid_for": piece.valid_for}
    fam = laws.family(cell)
    if fam == "segment":
        out.update(rho=float(ext["rho"]), D=float(ext["D"]), k=int(ext["k"]), k_prime=int(ext["k_prime"]),
                   rho_exact=str(ext["rho"]), D_exact=str(ext["D"]))
    elif fam == "arc":
        out.update(**{"lambda": float(sympy.sqrt(ext["lambda_sq"])), "b": float(ext["b"]),
                      "x": None if L_value <= cf.ARC_DEGENERATE_L_MAX else float(ext["x"]),
                      "lambda_sq_exact": str(ext["lambda_sq"])})
    else:
        out["K"] = float(ext["K"])
    return out


def _check_at(cell: Cell, L_value: int) -> None:
    form = cf.formula(cell)
    got = cf.closed_form(cell, L_value)
    if not form.holds(L_value):
        assert got is None and cf.value(cell, L_value) is None
        return
    want = _substituted(cell, L_value)
    assert list(got) == list(want) and got == want
    assert cf.value(cell, L_value) == {"B": pytest.approx(want["B"], rel=4e-16), "valid_for": want["valid_for"]}


@pytest.mark.parametrize("cell", FORMED, ids=lambda c: c.describe())
def test_closed_form_is_the_substituted_formula_at_the_ends_of_its_range(cell):
    form = cf.formula(cell)
    ends = {form.L_min - 1, *(p.L_min for p in form.pieces), form.L_min + 1, form.L_min + 2}
    if form.L_max is not None:
        ends |= {form.L_max - 1, form.L_max, form.L_max + 1}
    for L_value in sorted(v for v in ends if v >= 1):
        _check_at(cell, L_value)


@settings(max_examples=examples(40), deadline=None)
@given(st.sampled_from(FORMED), st.integers(1, 2**20))
def test_closed_form_is_the_substituted_formula(cell, L_value):
    _check_at(cell, L_value)


@pytest.mark.parametrize("cell", ARC_CELLS[:4] + SEGMENT_CELLS[::4], ids=lambda c: c.describe())
def test_the_closed_form_solves_and_simplifies_nothing(cell, monkeypatch):
    """Built from scratch, the formula of an arc or a segment cell and its values call neither
    ``sympy.solve`` nor ``sympy.simplify`` (they read the explicit laws)."""
    def refuse(*args, **kwargs):
        raise AssertionError("symbolic solving at run time")

    for cached in (cf._symbolic, cf._budget_law, cf.formula, cf.ranges):
        cached.cache_clear()
    monkeypatch.setattr(sympy, "solve", refuse)
    monkeypatch.setattr(sympy, "simplify", refuse)
    assert cf.formula(cell).main.B_min.free_symbols == {L}
    ends = {end for piece in cf.ranges(cell) for end in piece if end is not None}
    for L_value in sorted(ends | {64, 4096} if cf.ranges(cell)[-1][1] is None else ends):
        assert cf.closed_form(cell, L_value)["B"] > 0


def test_the_exact_report_of_an_arc_cell_loads_no_construction(tmp_path):
    """``python -m verify --exact --json`` of a post-norm witness builds its exact ``B_min`` without
    loading the constructions (:mod:`constructions.regression`) and says what the report in
    this process says."""
    from verify import report

    cell, L_value = Cell("softmax", "post_learned", "regression", d=8), 256
    params = design(cell).build(L_value, design(cell).estimate(L_value) * 1.001)
    path = tmp_path / "p.json"
    path.write_text(params_file.to_json(params))
    code = ("import sys; from verify.__main__ import main; rc = main(sys.argv[1:]); "
            "print('constructions.regression' in sys.modules, rc)")
    res = subprocess.run([sys.executable, "-c", code, "--params", str(path), "--L", str(L_value), "--exact", "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    out, loaded = res.stdout.strip().splitlines()
    assert res.stderr == "" and loaded == "False 0"
    got = json.loads(out)
    assert got["B_min_exact"] == cf.closed_form(cell, L_value)["B_exact"] is not None
    assert got == {"file": str(path), **report.check(params, L_value, exact=True)}
