"""The derivation export: sympy objects, LaTeX that compiles, text; errors exit 2."""

import itertools
import shutil
import subprocess
import sys

import pytest
import sympy

from constructions import basis
from constructions.cell import ATTENTIONS, NORMS, READOUTS, Cell
from constructions.derive import derivation, main, render
from constructions.regression import A, B, C, L, design, t


def test_every_cell_has_a_derivation():
    for att, norm, ro in itertools.product(ATTENTIONS, NORMS, READOUTS):
        sections = derivation(Cell(att, norm, ro))
        titles = [title for title, _ in sections]
        assert "counting conditions" in titles
        for _, rows in sections:
            for lhs, rel, rhs in rows:
                assert isinstance(lhs, sympy.Basic) and isinstance(rhs, (sympy.Basic, sympy.MatrixBase))


@pytest.mark.parametrize("norm", NORMS)
def test_construction_section_reassembles_the_vectors(norm):
    """The vectors shown on the basis (c_1, p, 1-hat) equal the construction's vectors."""
    cell = Cell("softmax", norm, "regression")
    rows = dict(((str(lhs), rhs) for lhs, _, rhs in
                 dict(derivation(cell))["construction at budget B"]))
    point = {B: sympy.Rational(7, 3), L: 11, t: sympy.Rational(29, 2), A: sympy.Rational(13, 5),
             C: sympy.Rational(-3, 7)}
    subs = {sympy.Symbol(k): v for k, v in rows.items() if k.startswith("s_")}
    frame = {sympy.Symbol("c_1"): basis.c1(8), sympy.Symbol("p"): basis.perp(8),
             sympy.Symbol(r"\hat{1}"): basis.one(8)}
    exprs = design(cell).symbolic()
    # evaluate the named subexpressions s_0, s_1, ... in order at the point
    values = dict(point)
    for sym, expr in ((s, e) for s, e in subs.items()):
        values[sym] = sympy.N(expr.subs(values), 40)
    for name, shown in (("e_s", "e_s"), ("e_a", "e_a"), ("w", "w")):
        shown_expr = rows[shown].subs(values)
        vec = sympy.zeros(8, 1)
        for sym, bvec in frame.items():
            vec += shown_expr.coeff(sym) * bvec
        diff = (vec - exprs[name]).subs(point).evalf(30)
        assert max(abs(v) for v in diff) < 1e-20, name


def test_latex_is_align_environments():
    out = render(Cell("softmax", "post_learned", "regression"), "latex")
    assert out.count(r"\begin{align*}") == out.count(r"\end{align*}") >= 5
    assert r"\frac" in out


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_latex_compiles(tmp_path):
    body = render(Cell("softmax", "none", "regression"), "latex")
    tex = tmp_path / "d.tex"
    tex.write_text("\\documentclass{article}\\usepackage{amsmath}\\begin{document}\n"
                   + body + "\n\\end{document}\n")
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:]


def test_cli_text_and_errors(capsys):
    assert main(["--variant", "pre_bare", "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "L^*" in out and "counting conditions" in out
    assert main(["--variant", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("derive: error:")
    assert main(["--variant", "none", "--d", "1"]) == 2


def test_cli_subprocess():
    res = subprocess.run([sys.executable, "-m", "constructions.derive", "--variant", "none",
                          "--attention", "linear", "--format", "latex"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0
    assert r"\begin{align*}" in res.stdout
