"""The derivation of a cell, as sympy objects and as LaTeX or text for papers.

    python -m constructions.derive --variant V [--attention A] [--readout R] [--d D]
        [--format latex|text]

:func:`derivation` returns the steps as sympy relations, grouped in sections: the reduced form
of the read-out as a function of the count, the counting conditions, the construction (every
trainable vector and scalar), the bound (capacity and budget) and the closed forms.  The LaTeX
output is one ``align*`` environment per section, preceded by a comment naming it; it compiles
in a standard article with ``amsmath``.
"""

from __future__ import annotations

import argparse
import sys

import sympy

from constructions import arc, basis, closed_forms, segment
from constructions.cell import ATTENTIONS, NORMS, READOUTS, Cell
from constructions.classification import MARGIN_EXPONENT
from constructions.regression import A, C, L, design, family, t

n, x, rho, D, b, lam, kk, k, sigma, X = sympy.symbols("n x rho D b lambda k' k sigma X", real=True)
y = sympy.Function("y")
tau = sympy.Symbol("tau", positive=True)


def _reduced(cell: Cell):
    fam = family(cell)
    dd = sympy.Integer(cell.d)
    if fam == "segment":
        return [
            (y(n), "=", C + D * n / (rho + n)),
            (rho, "=", sympy.exp(tau * (sympy.Symbol(r"\langle h_s, h_s\rangle")
                                        - sympy.Symbol(r"\langle h_s, h_a\rangle")))),
            (D, "=", sympy.Symbol(r"\langle w, h_a - h_s\rangle")),
            (tau, "=", 1 / sympy.sqrt(dd)),
        ]
    if fam == "line":
        return [
            (y(n), "=", C + sympy.Symbol("k") * n),
            (sympy.Symbol("k"), "=", tau * sympy.Symbol(r"\langle h_s, h_a\rangle")
             * sympy.Symbol(r"\langle w, h_a\rangle")),
            (tau, "=", 1 / sympy.sqrt(dd)),
        ]
    xs = n - L / 2
    return [
        (sympy.Symbol("z(n)"), "=", sympy.sqrt(dd) * sympy.Symbol(r"\frac{\lambda p + (n - L/2) q}"
                                                                     r"{\sqrt{\lambda^2 + (n-L/2)^2}}")),
        (y(n), "=", L / 2 + b * xs / sympy.sqrt(lam**2 + xs**2)),
    ]


def _conditions(cell: Cell):
    fam = family(cell)
    cond = [(sympy.Abs(y(n) - n), "<", sympy.Rational(1, 2))]
    if fam == "segment":
        return cond + [
            (sympy.Symbol("D_{lo}"), "=", sympy.Symbol(r"\max_{1\le k\le L}") * segment.D_LO_K.subs(
                {segment.rho: rho, segment.L: L, segment.k: k})),
            (sympy.Symbol("D_{hi}"), "=", sympy.Symbol(r"\min_{1\le k'\le L}") * segment.D_HI_K.subs(
                {segment.rho: rho, segment.L: L, segment.k: kk})),
            (sympy.Symbol("D_{lo}"), "<", sympy.Symbol(r"D < D_{hi}")),
        ]
    if fam == "line":
        return cond + [(1 - 1 / L, "<", sympy.Symbol(r"k < 1 + 1/L"))]
    return cond + [
        (sympy.Symbol("b_{lo}"), "=", arc.B_LO.subs({arc.lam: lam, arc.L: L})),
        (sympy.Symbol("b_{hi}"), "=", sympy.Symbol(r"\min_{x = n - L/2 > 0}")
         * arc.B_HI_X.subs({arc.lam: lam, arc.x: x})),
        (sympy.Symbol("b_{lo}"), "<", sympy.Symbol(r"b < b_{hi}")),
    ]


def _construction(cell: Cell):
    """Every vector written on the orthonormal basis ``c_1, p, 1/sqrt(d)`` of
    :mod:`constructions.basis` (all constructions live in their span: the coefficients are the
    inner products with the basis vectors), with common subexpressions named ``s_0, s_1, ...``."""
    dd = cell.d
    exprs = design(Cell(cell.attention, cell.norm, "regression", cell.d, cell.eps)).symbolic()
    frame = [(sympy.Symbol("c_1"), basis.c1(dd)), (sympy.Symbol("p"), basis.perp(dd)),
             (sympy.Symbol(r"\hat{1}"), basis.one(dd))]
    names, values = [], []
    for name, expr in exprs.items():
        if name.startswith("_"):
            continue
        if hasattr(expr, "T"):
            values.append([sympy.expand((expr.T * vec)[0, 0], power_base=False, power_exp=False,
                                        log=False, multinomial=False) for _, vec in frame])
        else:
            values.append([expr])
        names.append(name)
    flat = [c for vs in values for c in vs]
    subs, reduced = sympy.cse(flat, symbols=sympy.numbered_symbols("s_"))
    rows = [(sym, "=", val) for sym, val in subs]
    it = iter(reduced)
    for name, vs in zip(names, values):
        sym = sympy.Symbol({"e_s": "e_s", "e_a": "e_a", "g": "g", "beta": r"\beta", "w": "w",
                            "w0": "w_0"}[name])
        if len(vs) == 1:
            rows.append((sym, "=", next(it)))
        else:
            rows.append((sym, "=", sum(next(it) * b for b, _ in frame)))
    shape = {"segment": rho, "arc": lam, "line": None}[family(cell)]
    if shape is not None:
        rows.append((t, "=", shape))
    rows.append((A, "=", {"segment": D, "arc": b, "line": sympy.Symbol("k")}[family(cell)]))
    return rows


def _basis(cell: Cell):
    dd = cell.d
    return [(sympy.Symbol("c_1"), "=", basis.c1(dd).T), (sympy.Symbol("p"), "=", basis.perp(dd).T),
            (sympy.Symbol(r"\hat{1}"), "=", basis.one(dd).T)]


def _bound(cell: Cell):
    dz = design(Cell(cell.attention, cell.norm, "regression", cell.d, cell.eps))
    return [(sympy.Symbol(r"\mathrm{cap}(t, B)"), "=", dz.capacity_expr),
            (sympy.Symbol("B_{min}"), "=", sympy.Symbol(r"\inf\{B : \exists t,\ "
                                                         r"\mathrm{lo}(t) < \min(\mathrm{hi}(t), "
                                                         r"\mathrm{cap}(t, B))\}"))]


def _closed(cell: Cell):
    fam = family(cell)
    if fam == "segment":
        cf = closed_forms
        rows = [(sympy.Integer(0), "=", cf.CORNER.subs({cf.rho: rho, cf.L: L, cf.k: k, cf.kk: kk})),
                (sympy.Symbol(r"\rho^*"), "=", cf.rho_star().subs({cf.L: L, cf.k: k, cf.kk: kk})),
                (sympy.Symbol("D^*"), "=", sympy.Symbol(r"(k'+1)(\rho^* + k')/k'")),
                (sympy.Symbol(r"\rho^*_{L \ge 6}"), "=", cf.RHO_STAR_OF_L),
                (sympy.Symbol(r"D^*_{L \ge 6}"), "=", cf.D_STAR_OF_L),
                (sympy.Symbol("B_{min}"), "=", cf.budget(cell, sympy.Symbol("D^*"),
                                                         sympy.Symbol(r"\rho^*", positive=True)))]
        if cell.norm == "pre_bare":
            rows.append((sympy.Symbol(r"\rho"), r"\le", sympy.exp(2 * sympy.sqrt(cell.d))))
            rows.append((sympy.Symbol("L^*"), "=", sympy.Symbol(
                r"\max\{L : D_{lo}(e^{2\sqrt{d}}) < D_{hi}(e^{2\sqrt{d}})\}")))
        return rows
    if fam == "arc":
        cf = closed_forms
        B_star = sympy.Symbol("b^*")
        return [(sympy.Symbol(r"\lambda^{*2}"), "=", cf.LAM_STAR_SQ.subs({cf.L: L, cf.x: x})),
                (B_star, "=", cf.B_ARC_STAR.subs({cf.L: L, cf.x: x})),
                (sympy.Symbol(r"\lambda^{*2}_{4 \mid L}"), "=", cf.LAM_STAR_SQ_MULT4),
                (sympy.Symbol(r"b^*_{4 \mid L}"), "=", cf.B_ARC_STAR_MULT4),
                (sympy.Symbol("B_{min}"), "=", B_star / sympy.sqrt(cell.d) if cell.norm == "post_bare"
                 else sympy.sqrt(B_star / sympy.sqrt(cell.d - 1)))]
    return [(sympy.Symbol("B_{min}"), "=",
             sympy.sympify(closed_forms.line_closed_form(cell, 2)["B_exact"]).subs(
                 sympy.Rational(1, 2), 1 - 1 / L))]


def _classification(cell: Cell):
    m = sympy.Symbol("m")
    xn = sympy.Function("x")
    return [(m, r"\le", 1 / sympy.Sum(1 / (xn(n + 1) - xn(n)), (n, 0, L - 1))),
            (sympy.Symbol(r"\mathrm{storage}"), "=", (L + 1) * (cell.d + 1)
             + len([v for v in cell.vector_names() if v != "u"]) * cell.d),
            (sympy.Symbol(r"\text{margin exponent}"), "=",
             sympy.nsimplify(MARGIN_EXPONENT[family(cell)]))]


def derivation(cell: Cell) -> list[tuple[str, list]]:
    """Sections ``(title, [(lhs, relation, rhs), ...])`` with sympy ``lhs``/``rhs``."""
    out = [("orthonormal basis used by the construction", _basis(cell)),
           ("reduced read-out as a function of the count", _reduced(cell)),
           ("counting conditions", _conditions(cell))]
    if cell.readout == "classification":
        out.append(("classification at unit norm: max-min margin and storage", _classification(cell)))
        geometry = [(lhs, rel, rhs) for lhs, rel, rhs in _construction(cell)
                    if str(lhs) not in ("w", "w_0", "A")]  # the head replaces the regression read-out
        used = set().union(*(getattr(rhs, "free_symbols", set()) for _, _, rhs in geometry))
        for _ in range(len(geometry)):  # drop named subexpressions nothing uses any more
            geometry = [row for row in geometry if not str(row[0]).startswith("s_") or row[0] in used]
            used = set().union(*(getattr(rhs, "free_symbols", set()) for _, _, rhs in geometry))
        geometry.append((sympy.Symbol("u_c"), "=", sympy.Symbol(r"k_c \hat{\delta}")))
        geometry.append((sympy.Symbol("k_{c+1} - k_c"), "=", sympy.Symbol(r"2m/(x_{c+1} - x_c)")))
        out.append(("construction of the geometry (at budget B = 1) and of the head", geometry))
        return out
    out += [("construction at budget B", _construction(cell)),
            ("bound", _bound(cell)),
            ("closed forms", _closed(cell))]
    return out


def _latex(expr) -> str:
    return expr if isinstance(expr, str) else sympy.latex(expr)


def render(cell: Cell, fmt: str) -> str:
    parts = []
    for title, rows in derivation(cell):
        if fmt == "latex":
            body = " \\\\\n".join(f"  {_latex(lhs)} &{rel} {_latex(rhs)}" for lhs, rel, rhs in rows)
            parts.append(f"% {title}\n\\begin{{align*}}\n{body}\n\\end{{align*}}")
        else:
            body = "\n".join(f"  {sympy.sstr(lhs)} {rel.replace(chr(92) + 'le', '<=')} {sympy.sstr(rhs)}"
                             for lhs, rel, rhs in rows)
            parts.append(f"{title}:\n{body}")
    head = f"{cell.describe()}"
    return (f"% {head}\n" if fmt == "latex" else f"{head}\n\n") + "\n\n".join(parts)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def main(argv=None) -> int:
    p = _Parser(prog="python -m constructions.derive", description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True, choices=NORMS)
    p.add_argument("--attention", choices=ATTENTIONS, default="softmax")
    p.add_argument("--readout", choices=READOUTS, default="regression")
    p.add_argument("--d", type=int, default=8)
    p.add_argument("--format", choices=("latex", "text"), default="text")
    try:
        args = p.parse_args(sys.argv[1:] if argv is None else argv)
        cell = Cell(args.attention, args.variant, args.readout, args.d)
        if cell.post and cell.d < 3:
            raise ValueError("post-norm at d = 2 maps every input to one of two points: "
                             "nothing to derive beyond L = 1")
    except ValueError as exc:
        print(f"derive: error: {exc}", file=sys.stderr)
        return 2
    print(render(cell, args.format))
    return 0


if __name__ == "__main__":
    sys.exit(main())
