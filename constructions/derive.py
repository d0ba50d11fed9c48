"""The derivation of a cell: the result first, then how it follows.

    python -m constructions.derive --variant V [--attention A] [--readout R] [--d D]
        [--norm layernorm|rmsnorm] [--affine gain|gain_bias] [--eps E] [--format text|latex|json]

:func:`derivation` returns the derivation as :class:`Section` s of :class:`Row` s: ``lhs rel
rhs`` with sympy sides, a plain-words note saying what the left side is, and the range of
``L`` where the row holds.  The sections are

1. the result: ``B_min(L)`` as a sympy expression in ``L`` and the ``L`` for which it holds
   (:func:`constructions.closed_forms.formula`);
2. the orthonormal frame the vectors are written on, by its coordinates (which agree beyond the
   third, so nothing is ``d`` long);
3. the model reduced to a read-out of the count, and 4. the counting conditions;
5. the construction at budget ``B`` as named quantities
   (:meth:`constructions.regression.RegressionDesign.steps`);
6. the bound (capacity and budget) and 7. how the closed form follows.

Classification cells get the result, frame, model, conditions, the geometry at budget 1 and
the head.  Every symbol is defined in the row where it first appears or before.

:func:`render` prints ``latex`` (each section a paragraph title and one ``align*``; compiles
in a standard article with ``amsmath``), ``text`` (plain: no LaTeX macros) or ``json`` (one
object: the cell, every row with its LaTeX and ``sympy.srepr``, and ``closed_forms`` whose
``B_min`` entry is the ``srepr`` of the closed form in ``L`` with its range; ``srepr`` strings
evaluate back in sympy's namespace).  The constructions are derived for ``eps = 0``; with
``eps > 0`` the derivation says so and gives no closed form.  Linear attention with
post-RMSNorm (the one-sided arc, :mod:`constructions.one_sided`) has no closed form: its
derivation gives the model, the construction and the bound as a fixed point.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sympy
from sympy.printing.latex import LatexPrinter
from sympy.printing.str import StrPrinter

from constructions import arc, cli, closed_forms, laws, line, one_sided, segment
from constructions.basis import E1_ON_FRAME, PATTERN
from constructions.cell import ATTENTIONS, KINDS, MAX_D, NORMS, READOUTS, Cell
from constructions.regression import FAMILIES, axes, design, family
from constructions.symbols import (BETA, C1, E1, E_A, E_S, F, G, H_A, H_S, LN, ONE, P, Q, U, U_c, W, A, B, B_min, C,
                                   D, D_hi, D_lo, D_star, K, K_min, L, L_star, argmax, b, b_c, b_hi,
                                   b_lo, b_star, budget, c, cap, coord, d, delta, i, infimum, inner,
                                   k, k_slope, k_star, kk, kk_star, lam, lam_star, lam_star_sq,
                                   lam_x_sq, lead_c, lo_k, hi_k, m, maximum, mean, minimum, n, rho, rho_star, storage,
                                   psi, t, tau, var, x, x_pos, x_star, y, z)

PROG = "derive"
FORMATS = ("text", "latex", "json")


@dataclass(frozen=True)
class Row:
    """``lhs rel rhs`` (sympy sides), what ``lhs`` is (plain words), and where the row holds."""

    lhs: sympy.Basic
    rel: str
    rhs: sympy.Basic
    note: str = ""
    condition: sympy.Basic | None = None


@dataclass(frozen=True)
class Section:
    """A titled group of rows, with an optional sentence in plain words before them."""

    title: str
    rows: list
    intro: str = ""


@dataclass(frozen=True)
class _Family:
    """How the construction's generic shape and amplitude read in this family."""

    shape: sympy.Symbol | None
    amplitude: sympy.Symbol
    words: str


_FAMILIES = {"segment": _Family(rho, D, "the attention ratio rho and the read-out amplitude D"),
             "arc": _Family(lam, b, "the arc distance lambda and the read-out amplitude b"),
             "line": _Family(None, K, "the slope K")}


def _named(cell: Cell):
    fam = _FAMILIES[family(cell)]
    rule = {A: fam.amplitude}
    if fam.shape is not None:
        rule[t] = fam.shape
    return fam, rule


# --------------------------------------------------------------------------- sections
def _result(cell: Cell) -> Section:
    if cell.readout == "classification":
        return Section("result", [
            Row(B_min(L), "=", sympy.Integer(0), "an infimum: free biases make the argmax scale-free, "
                                                 "so every bound above 0 counts"),
            Row(m, "~", L ** sympy.nsimplify(laws.margin_exponent(cell)),
                "the largest smallest logit gap of a head whose vectors have norm at most 1"),
            Row(storage, "=", _storage(cell), "the trainable scalars: L+1 output vectors and biases, "
                                              "and the other vectors")],
            "B_min(L) is the smallest bound on the norms of the trainable vectors at which the cell "
            "counts 0..L; what grows is the storage and the inverse margin.")
    form = closed_forms.formula(cell)
    intro = ("B_min(L) is the smallest bound on the norms of the trainable vectors at which the cell "
             "counts 0..L.")
    if form is None:
        why = ("the constructions are derived for eps = 0: with eps > 0 the toolkit's B_min is an "
               "upper bound and has no closed form" if cell.eps
               else "the foot of the residual line is tied to the budget and the optimal one-sided arc "
                    "is a numeric fixed point (constructions.one_sided): B_min has no closed form; the "
                    "sweep certifies it and proves B_lower" if _foot(cell)
               else f"at d = 2 bare pre-{cell.kind.name} realises only two score gaps: B_min has no "
                    "closed form")
        return Section("result", [], f"{intro} Here {why}.")
    rows = [Row(B_min(L), "=", piece.B_min, "the closed form" if piece is form.main
                else "the degenerate arc: no count binds", piece.condition) for piece in form.pieces]
    if family(cell) == "arc":
        rows.append(Row(B_min(L), "=", closed_forms.budget(cell, closed_forms.B_ARC_STAR_MULT4),
                        "the same for L a multiple of 4",
                        sympy.And(sympy.Ge(L, 8, evaluate=False), sympy.Eq(sympy.Mod(L, 4), 0))))
    if form.L_max is not None:
        rows.append(Row(L_star, "=", sympy.Integer(form.L_max),
                        "the largest count bare pre-norm reaches at this width: beyond it no parameters count"))
    return Section("result", rows, intro)


def _leading(cell: Cell) -> Section:
    """The leading term ``B_min(L) = c(d) L^p (1 + o(1))`` (:func:`constructions.laws.leading_term`)."""
    term = laws.leading_term(cell)
    if term is None:
        if laws.rigid(cell):
            why = "bare pre-norm counts only up to a finite L*: B_min has no power rate"
        elif laws.on_a_line(cell):
            why = ("the values lie on a line and their gap sqrt(2 sigma) does not grow with the "
                   "budget: B_min grows like L^2/sqrt(log L), not a power")
        else:
            why = "the constant is derived for eps = 0 only in this cell"
        return Section("leading constant", [], f"None: {why}.")
    p = term.exponent
    which = f"{term.proven} itself: the construction and the lower bound share the leading term"
    rows = [Row(lead_c(d), "=", term.general, f"the leading constant, for every d >= {term.d_min}"),
            Row(lead_c(sympy.Integer(cell.d)), "=", term.constant,
                f"at this width: {float(term.constant):.10g}"),
            Row(B_min(L), "~", lead_c(d) * L**p,
                f"{term.statement} as L -> infinity, the exponent p = {p}")]
    return Section("leading constant", rows, f"{term.statement}, with c(d) exact. Proven for {which}.")


def _storage(cell: Cell):
    others = len([v for v in cell.vector_names() if v != "u"])
    return (L + 1) * (cell.d + 1) + others * cell.d


def _frame(cell: Cell) -> Section:
    rest = sympy.Ge(i, 4, evaluate=False)
    rows = [Row(d, "=", sympy.Integer(cell.d), "the width of the layer"),
            Row(coord(C1, 1), "=", PATTERN[C1][0], "c_1: the centred unit vector with the largest first coordinate"),
            Row(coord(C1, i), "=", PATTERN[C1][1], "every other coordinate of c_1", sympy.Ge(i, 2, evaluate=False))]
    if cell.d >= 3:
        rows += [Row(coord(P, 2), "=", PATTERN[P][2], "p: centred, orthogonal to c_1, zero in the first coordinate"),
                 Row(coord(P, 3), "=", -PATTERN[P][2], "its third coordinate"),
                 Row(coord(P, i), "=", sympy.Integer(0), "its first and every later coordinate",
                     sympy.Or(sympy.Eq(i, 1), rest))]
    rows += [Row(coord(ONE, i), "=", PATTERN[ONE][0], "one: the direction LayerNorm removes, every coordinate"),
             Row(E1, "=", E1_ON_FRAME, "the first standard basis vector")]
    if axes(cell)[1] == Q:
        rows += [Row(Q, "=", (C1 - sympy.sqrt(d - 1) * ONE) / sympy.sqrt(d),
                     "q: the unit vector of the plane of c_1 and one orthogonal to e_1"),
                 Row(coord(Q, 1), "=", PATTERN[Q][0], "its first coordinate"),
                 Row(coord(Q, i), "=", PATTERN[Q][1], "every other coordinate of q", sympy.Ge(i, 2, evaluate=False))]
    intro = ("Every vector of the construction lies in the span of the orthonormal vectors c_1, p and "
             "one of R^d, given here by their i-th coordinates (coordinates 4 to d agree).")
    if cell.d == 2:
        intro += " At d = 2 the centred space is the line of c_1: there is no p."
    return Section("orthonormal frame", rows, intro)


def _values(cell: Cell) -> list:
    """How the token values h_s, h_a and (post-norm) the output are formed."""
    eps = sympy.nsimplify(cell.eps)
    if cell.kind.centred:
        norm = Row(LN(U), "=", (U - mean(U)) / sympy.sqrt(var(U) + eps),
                   "LayerNorm of a vector u: subtract the mean of its coordinates, divide by the root "
                   "of their population variance plus eps")
    else:
        norm = Row(LN(U), "=", U / sympy.sqrt(mean(U**2) + eps),
                   "RMSNorm of a vector u: divide by the root of the mean of its squared coordinates plus eps")
    if cell.pre:
        affine = cell.affine
        rows = [norm] + [Row(h, "=", G * LN(e) + (BETA if affine.bias else 0) if affine.gain else LN(e),
                             f"the value of the token {e.name[-1]}"
                             + (", with the gain g multiplying elementwise" if affine.gain else ""))
                         for h, e in ((H_S, E_S), (H_A, E_A))]
        return rows
    rows = [Row(h, "=", e, f"the value of the token {e.name[-1]}: its embedding")
            for h, e in ((H_S, E_S), (H_A, E_A))]
    if cell.post:
        rows.append(norm)
    return rows


def _model(cell: Cell) -> Section:
    fam = family(cell)
    rows = [Row(tau, "=", cell.tau, "the score temperature 1/sqrt(d)")] + _values(cell)
    named, rule = _named(cell)
    readout = FAMILIES[fam].SHAPE.xreplace(rule)
    intro = "The values of the tokens s (the read position) and a (counted n times) are h_s and h_a"
    if cell.readout == "classification":
        if fam == "segment":
            rows.append(Row(rho, "=", sympy.exp(tau * (inner(H_S, H_S) - inner(H_S, H_A))),
                            "the attention ratio of s over a: s gets weight rho/(rho+n), each a 1/(rho+n)"))
        elif fam == "arc":
            rows += (_foot_output(cell) if _foot(cell) else
                     [Row(x, "=", n - L / 2, "the offset of the count n from the middle"), *_arc_output(cell)])
        return Section("the model reduced to a read-out of the count", rows, intro + ".")
    if fam == "segment":
        rows += [Row(rho, "=", sympy.exp(tau * (inner(H_S, H_S) - inner(H_S, H_A))),
                     "the attention ratio of s over a: s gets weight rho/(rho+n), each a 1/(rho+n)"),
                 Row(D, "=", inner(W, H_A - H_S), "the read-out amplitude"),
                 Row(y(n), "=", C + D * readout, "the read-out after n tokens a; C collects the constants")]
    elif fam == "line":
        rows += [Row(K, "=", tau * inner(H_S, H_A) * inner(W, H_A), "the slope of the read-out"),
                 Row(y(n), "=", C + K * readout, "the read-out after n tokens a; C collects the constants")]
    elif _foot(cell):
        gain = "w times g elementwise" if cell.affine.gain else "w"
        top = axes(cell)[0]
        rows += [*_foot_output(cell),
                 Row(b, "=", sympy.sqrt(cell.d) * inner(W * G if cell.affine.gain else W, top),
                     f"the read-out amplitude, {gain} along {top}"),
                 Row(y(n), "=", C + b * one_sided.SHAPE.xreplace(rule),
                     "the read-out after n tokens a; psi is the angle of the read-out from the line's "
                     "normal, C the bias")]
    else:
        gain = "w times g elementwise" if cell.affine.gain else "w"
        top = axes(cell)[0]
        rows += [Row(x, "=", n - L / 2, "the offset of the count n from the middle"), *_arc_output(cell),
                 Row(b, "=", sympy.sqrt(cell.d) * inner(W * G if cell.affine.gain else W, top),
                     f"the read-out amplitude, {gain} along {top}"),
                 Row(y(n), "=", L / 2 + b * readout.xreplace({n: x + L / 2}),
                     "the read-out after n tokens a, with the bias L/2")]
    return Section("the model reduced to a read-out of the count", rows, intro + "; w and w_0 are the read-out.")


def _arc_output(cell: Cell) -> list:
    top, across = axes(cell)
    where = "the centred residual" if cell.kind.centred else "the residual"
    return [Row(lam, ">", sympy.Integer(0), "the shape of the arc: the distance of the line of residuals from "
                                            "the origin, in counts"),
            Row(z(n), "=", sympy.sqrt(cell.d) * (lam * across + x * top) / sympy.sqrt(lam**2 + x**2),
               f"the normalised residual: the construction puts {where} on the line "
               f"lambda {across} + x {top}, at distance lambda (in counts) from the origin, and "
               f"{cell.kind.name} scales it to norm sqrt(d)")]


def _foot(cell: Cell) -> bool:
    """Whether the foot of the residual line is tied to the budget (the one-sided arc)."""
    return laws.foot_distance(cell, 1) is not None


def _foot_output(cell: Cell) -> list:
    top, across = axes(cell)
    along = sympy.sin(psi) * top + sympy.cos(psi) * across
    perp = sympy.cos(psi) * top - sympy.sin(psi) * across
    return [Row(F, ">", laws.foot_distance(cell, B), "the foot of the residual line lies at the count -F: "
                "-(1 + tau|e_s|^2)/(tau|e_a|^2), before the first count, and the budget B bounds how near"),
            Row(lam, ">", sympy.Integer(0), "the distance of the line of residuals from the origin, in counts"),
            Row(z(n), "=", sympy.sqrt(cell.d) * (lam * perp + (n + F) * along) / sympy.sqrt(lam**2 + (n + F) ** 2),
                f"the normalised residual: the residual line runs along sin(psi) {top} + cos(psi) {across}, "
                f"and {cell.kind.name} scales it to norm sqrt(d)")]


def _conditions(cell: Cell) -> Section:
    rows = []
    fam = family(cell)
    if cell.readout == "classification":
        rows.append(Row(argmax(inner(U_c, z(n)) + b_c, c, 0, L), "=", n,
                        "for every n = 0..L the class n has the unique largest logit; z(n) is the output "
                        "after n tokens a, u_c and b_c the output vector and bias of class c"))
    else:
        rows.append(Row(sympy.Abs(y(n) - n), "<", sympy.Rational(1, 2), "for every n = 0..L"))
    if fam == "segment":
        rows += [Row(lo_k(rho), "=", segment.D_LO_K, "the lower bound on D from the counts L and L - k, "
                                                     "for a gap k"),
                 Row(hi_k(rho), "=", segment.D_HI_K, "the upper bound on D from the counts k' and 0"),
                 Row(D_lo(rho), "=", maximum(lo_k(rho), k, 1, L), "the smallest counting amplitude"),
                 Row(D_hi(rho), "=", minimum(hi_k(rho), kk, 1, L), "the largest"),
                 Row(D_lo(rho), "<", D, "the counting amplitudes"), Row(D, "<", D_hi(rho))]
    elif _foot(cell):
        pass  # one-sided: no closed interval of amplitudes (constructions.one_sided)
    elif fam == "line":
        rows += [Row(line.INTERVAL[0], "<", K, "the counting slopes: n = 0 and n = L"),
                 Row(K, "<", line.INTERVAL[1])]
    else:
        rows += [Row(b_lo(lam), "=", arc.B_LO, "the smallest counting amplitude: the count L"),
                 Row(b_hi(lam), "=", minimum(arc.B_HI_X.xreplace({x: n - L / 2}), n, sympy.floor(L / 2) + 1, L),
                     "the largest: the counts right of the middle"),
                 Row(b_lo(lam), "<", b, "the counting amplitudes"), Row(b, "<", b_hi(lam))]
    if cell.readout == "classification":
        rows = rows[:1]
    return Section("counting conditions", rows)


def _construction(cell: Cell, keep=None) -> list:
    """The construction's steps as rows (the shape and amplitude by their family names).

    ``keep``: only the steps these keyed steps need (the classification geometry).
    """
    steps = design(cell.replace(readout="regression")).steps()
    if keep is not None:
        needed = set()
        for step in reversed(steps):
            if step.key in keep or step.symbol in needed:
                needed |= step.value.atoms(sympy.Symbol, sympy.Function) | {step.symbol}
        steps = [s for s in steps if s.symbol in needed]
    _, rule = _named(cell)
    return [Row(s.symbol, "=", s.value.xreplace(rule), s.meaning) for s in steps]


def _construction_section(cell: Cell) -> Section:
    named, _ = _named(cell)
    intro = (f"At budget B (the largest norm a trainable vector may have), for {named.words}, "
             "every vector on the frame (inner products written <u, v>).")
    if cell.eps:
        intro += (f" The construction is derived for eps = 0; at eps = {cell.eps:g} it is the one the "
                  "toolkit certifies, an upper bound.")
    return Section("construction at budget B", _construction(cell), intro)


def _bound(cell: Cell) -> Section:
    fam = family(cell)
    named, rule = _named(cell)
    des = design(cell.replace(readout="regression"))
    shape, amp = named.shape, named.amplitude
    cap_args = (shape, B) if fam == "segment" else (B,)
    rows = [Row(cap(*cap_args), "=", des.capacity_expr.xreplace(rule),
                "the largest amplitude a parameter set of norm at most B reaches (the capacity)"),
            Row(budget(*cap_args[:-1], amp), "=", closed_forms.budget(cell, amp, shape),
                "the smallest such B for the amplitude"
                + (", within the score gap that B allows" if fam == "segment" and not laws.rigid(cell) else ""))]
    if fam == "segment":
        rows.append(Row(B_min(L), "=", infimum(budget(rho, D_lo(rho)), rho, sympy.Lt(D_lo(rho), D_hi(rho))),
                        "the cheapest shape at which some amplitude counts"))
    elif _foot(cell):
        rows.append(Row(B_min(L), "=", infimum(budget(b), b, sympy.Lt(sympy.Abs(y(n) - n), sympy.Rational(1, 2))),
                        "the cheapest amplitude over lambda, psi and C with the foot F at the budget's "
                        "limit, for every n = 0..L: a fixed point, since F depends on B"))
    elif fam == "arc":
        rows += [Row(lam_star, "=", infimum(lam, lam, sympy.Lt(b_lo(lam), b_hi(lam))),
                     "the closest arc that counts: b_lo increases with lambda"),
                 Row(B_min(L), "=", budget(b_lo(lam_star)), "")]
    else:
        rows.append(Row(B_min(L), "=", budget(line.INTERVAL[0]), "the budget of the smallest counting slope"))
    return Section("bound", rows)


def _closed(cell: Cell) -> Section:
    form = closed_forms.formula(cell)
    if form is None:
        return Section("closed form", [], "None applies here (see the result).")
    fam = family(cell)
    cf = closed_forms
    if fam == "segment":
        rows = [Row(lo_k(rho), "=", hi_k(rho), "the corner, where the counting interval closes, for the "
                                               "active gaps"),
                Row(sympy.Integer(0), "=", cf.CORNER, "the same, multiplied out"),
                Row(k_star, "=", cf.K_STAR, "the active lower gap"),
                Row(kk_star, "=", cf.KK_STAR, "the active upper gap"),
                Row(rho_star, "=", cf.RHO_STAR, "the corner: the root of the corner equation at these gaps"),
                Row(D_star, "=", cf.D_STAR, "the amplitude at the corner"),
                Row(B_min(L), "=", cf.budget(cell, D_star, rho_star),
                    "the budget increases to the right of the corner", form.main.condition)]
        if laws.rigid(cell):
            rows.insert(0, Row(rho, "<=", sympy.exp(2 * sympy.sqrt(cell.d)),
                               "bare pre-norm fixes the norm of the values to sqrt(d), so rho is bounded"))
        return Section("closed form", rows)
    if fam == "arc":
        mult4 = sympy.And(sympy.Ge(L, 8, evaluate=False), sympy.Eq(sympy.Mod(L, 4), 0))
        rows = [Row(lam_x_sq, "=", cf.LAM_SQ_X, "the square of the smallest lambda at which the count "
                                                "L/2 + x allows the amplitude b_lo(lambda)"),
                Row(x_star, "=", cf.X_STAR, "the binding offset", form.main.condition),
                Row(lam_star_sq, "=", cf.LAM_STAR_SQ, "the largest of the crossings (0 at L = 3, 4)",
                    form.main.condition),
                Row(b_star, "=", cf.B_ARC_STAR, "b_lo at the extremal arc", form.main.condition),
                Row(b_star, "=", cf.B_ARC_DEGENERATE, "b_lo(0): at L = 2 no count binds",
                    form.pieces[0].condition),
                Row(lam_star_sq, "=", cf.LAM_STAR_SQ_MULT4, "for L a multiple of 4", mult4),
                Row(b_star, "=", cf.B_ARC_STAR_MULT4, "for L a multiple of 4", mult4),
                Row(B_min(L), "=", cf.budget(cell, b_star), "the budget of b^*")]
        return Section("closed form", rows)
    return Section("closed form", [Row(K_min, "=", line.INTERVAL[0], "the smallest counting slope"),
                                   Row(B_min(L), "=", cf.budget(cell, K_min), "its budget", form.main.condition)])


def _head(cell: Cell) -> Section:
    named, rule = _named(cell)
    fam = family(cell)
    position = FAMILIES[fam].SHAPE.xreplace(rule)
    rows = []
    if fam == "arc":
        return _circle_head(cell)
    if fam == "segment":
        direction = (H_A - H_S) / sympy.sqrt(inner(H_A - H_S, H_A - H_S))
    elif fam == "line":
        direction = H_A / sympy.sqrt(inner(H_A, H_A))
    else:
        direction = E1 if cell.affine.gain else axes(cell)[0]
    rows += [Row(delta, "=", direction, "the read-out direction: the outputs vary along it only"
                 + ("" if fam != "arc" else ", read on the arc")),
             Row(x_pos(n), "=", position, "the position of the output for the count n along delta "
                                          "(up to a fixed scale and offset)"),
             Row(U_c, "=", k_slope(c) * delta, "the output vector of class c, along delta"),
            Row(k_slope(0), "=", sympy.Integer(-1), "the slopes rise from -1 to 1"),
            Row(k_slope(c + 1) - k_slope(c), "=", 2 * m / (x_pos(c + 1) - x_pos(c)), ""),
            Row(m, "=", 1 / sympy.Sum(1 / (x_pos(n + 1) - x_pos(n)), (n, 0, L - 1)),
                "the margin, the largest smallest logit gap of a unit-norm head for these outputs")]
    return Section("the head", rows, "The biases b_c put the breakpoints of the upper envelope "
                                     "at the midpoints of neighbouring positions.")


def _circle_head(cell: Cell) -> Section:
    """The arc's head (:mod:`constructions.classification`): unit vectors of the plane read,
    turned greedily along the chords of the points read."""
    psi, phi, chord = sympy.Function("psi"), sympy.Function("phi"), sympy.Function("l")
    chi = sympy.Symbol("chi")
    a1, a2 = (E1, sympy.Symbol("e_2")) if cell.affine.gain else axes(cell)
    rows = []
    if cell.affine.gain:
        rows += [Row(inner(a2, a1), "=", sympy.Integer(0), "e_2, the second standard basis vector"),
                 Row(chi, "<", sympy.pi / 2, "the angle of the gain from e_1 towards e_2 (positive; "
                                             "optimised numerically with the arc's shape)")]
        rows.append(Row(G, "=", sympy.cos(chi) * a1 + sympy.sin(chi) * a2,
                        f"the {cell.kind.name} gain of the head, on the first two coordinates (the "
                        "arc's plane turned into theirs); the head reads an arc of an ellipse"))
        if cell.affine.bias:
            rows.append(Row(BETA, "=", sympy.Integer(0), "its bias"))
    rows += [Row(U_c, "=", sympy.cos(psi(c)) * a1 + sympy.sin(psi(c)) * a2,
                 "the output vector of class c, a unit vector of the plane read; phi(c) and l(c) "
                 "are the angle and length of the chord from the point read for c to that for c+1"),
             Row(psi(0), "=", phi(0) - sympy.pi, "the first vector points against the first chord"),
             Row(sympy.cos(psi(c + 1) - phi(c)), "=", sympy.cos(psi(c) - phi(c)) + 2 * m / chord(c),
                 "each step the smallest turn the pair inequality allows (psi(c+1) >= phi(c+1) - pi); "
                 "m the largest margin for which no cosine exceeds 1")]
    return Section("the head", rows, "The biases b_c put the breakpoints of the upper envelope "
                                     "at the midpoints of neighbouring points.")


def derivation(cell: Cell) -> list[Section]:
    """The derivation of a cell (module docstring); a ``ValueError`` for a cell without a
    construction (the other tasks and reads are derived in :mod:`constructions.tasks`; the
    classification head of the one-sided arc is not built)."""
    if cell.task.distractor or cell.read.last:
        raise ValueError(f"{cell.describe()}: the derivation covers the count task at the BOS "
                         "read; the other tasks and reads are derived in constructions.tasks")
    if cell.readout == "classification":
        from constructions import classification

        classification.design(cell)  # refuses a cell without a head
    head = [_result(cell), _frame(cell), _model(cell), _conditions(cell)]
    if cell.readout == "classification":
        keep = {"e_s", "e_a", "_h_s", "_h_a"} | (set() if cell.post else {"g", "beta"})
        geometry = _construction(cell, keep=keep)
        return head + [Section("the geometry at budget B = 1", [Row(r.lhs, r.rel, r.rhs.subs(B, 1), r.note)
                                                                for r in geometry],
                               "The regression construction at budget 1 without its read-out."),
                       _head(cell)]
    return [head[0], _leading(cell), *head[1:], _construction_section(cell), _bound(cell), _closed(cell)]


# --------------------------------------------------------------------------- printing
_EXTREMA = {"maximum": ("max", r"\max"), "minimum": ("min", r"\min"), "infimum": ("inf", r"\inf"),
            "argmax": ("argmax", r"\operatorname{argmax}")}


class _Text(StrPrinter):
    """Plain text: no LaTeX, powers as ``^``, inner products ``<u, v>``, coordinates ``v[i]``."""

    def _print_Function(self, expr):
        name = expr.func.__name__
        if name == "inner":
            return f"<{self._print(expr.args[0])}, {self._print(expr.args[1])}>"
        if name == "coord":
            return f"{self._print(expr.args[0])}[{self._print(expr.args[1])}]"
        if name in _EXTREMA:
            body, index, *rng = expr.args
            where = (f"{self._print(rng[0])} <= {self._print(index)} <= {self._print(rng[1])}"
                     if len(rng) == 2 else f"{self._print(index)} with {self._print(rng[0])}")
            return f"{_EXTREMA[name][0]} over {where} of ({self._print(body)})"
        return super()._print_Function(expr)

    def _print_Exp1(self, expr):
        return "exp(1)"

    def _print_Abs(self, expr):
        return f"|{self._print(expr.args[0])}|"

    def _print_Mod(self, expr):
        return f"{self.parenthesize(expr.args[0], 50)} mod {self._print(expr.args[1])}"

    def _print_Equality(self, expr):
        return f"{self._print(expr.lhs)} = {self._print(expr.rhs)}"

    def _print_And(self, expr):
        bounds = _between(expr)
        if bounds is not None:
            return " <= ".join(self._print(v) for v in bounds)
        return " and ".join(self._print(a) for a in expr.args)

    def _print_Or(self, expr):
        return " or ".join(self._print(a) for a in expr.args)

    def _print_Piecewise(self, expr):
        parts = [f"{self._print(e)} if {self._print(cond)}" if cond is not sympy.true
                 else f"{self._print(e)} otherwise" for e, cond in expr.args]
        return "(" + "; ".join(parts) + ")"

    def _print_Sum(self, expr):
        body, (index, lo, hi) = expr.args[0], expr.args[1]
        return f"sum over {self._print(lo)} <= {self._print(index)} <= {self._print(hi)} of ({self._print(body)})"

    def doprint(self, expr):
        return super().doprint(expr).replace("**", "^")


class _Latex(LatexPrinter):
    """LaTeX with ``\\langle u, v\\rangle``, ``(v)_i``, extrema with their ranges and ``\\mathrm{e}``."""

    def __init__(self):
        super().__init__({"symbol_names": {ONE: r"\hat{\mathbf{1}}"}})

    def _print_Function(self, expr, exp=None):
        name = expr.func.__name__
        if name == "inner":
            out = rf"\left\langle {self._print(expr.args[0])}, {self._print(expr.args[1])} \right\rangle"
        elif name == "coord":
            out = rf"\left({self._print(expr.args[0])}\right)_{{{self._print(expr.args[1])}}}"
        elif name in _EXTREMA:
            body, index, *rng = expr.args
            where = (rf"{self._print(rng[0])} \le {self._print(index)} \le {self._print(rng[1])}"
                     if len(rng) == 2 else rf"{self._print(index)}:\ {self._print(rng[0])}")
            out = rf"{_EXTREMA[name][1]}_{{{where}}} \left({self._print(body)}\right)"
        else:
            return super()._print_Function(expr, exp)
        return out if exp is None else rf"{out}^{{{exp}}}"

    def _print_Exp1(self, expr, exp=None):
        return r"\mathrm{e}" if exp is None else rf"\mathrm{{e}}^{{{exp}}}"

    def _print_And(self, expr):
        bounds = _between(expr)
        if bounds is not None:
            return r" \le ".join(self._print(v) for v in bounds)
        return super()._print_And(expr)


def _between(expr):
    """``(a, v, b)`` if ``expr`` is ``v >= a and v <= b``, else None."""
    if len(expr.args) != 2:
        return None
    low = [r for r in expr.args if isinstance(r, sympy.GreaterThan)]
    high = [r for r in expr.args if isinstance(r, sympy.LessThan)]
    if len(low) == 1 and len(high) == 1 and low[0].lhs == high[0].lhs:
        return low[0].rhs, low[0].lhs, high[0].rhs
    return None


_TEXT, _LATEX = _Text(), _Latex()
_REL_TEXT = {"<=": "<=", "~": "~"}
_REL_LATEX = {"=": "=", "<": "<", ">": ">", "<=": r"\le", "~": r"\sim"}
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def text(expr) -> str:
    """Plain text of a sympy object (no LaTeX)."""
    return _TEXT.doprint(expr)


def latex(expr) -> str:
    """LaTeX of a sympy object."""
    return _LATEX.doprint(expr)


def _escape(words: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in words)


def row_text(row: Row) -> str:
    out = f"{text(row.lhs)} {_REL_TEXT.get(row.rel, row.rel)} {text(row.rhs)}"
    extra = "; ".join(p for p in ((f"for {text(row.condition)}" if row.condition is not None else ""),
                                  row.note) if p)
    return out + (f"\n      ({extra})" if extra else "")


def row_latex(row: Row) -> str:
    out = f"{latex(row.lhs)} &{_REL_LATEX[row.rel]} {latex(row.rhs)}"
    extra = [] if row.condition is None else [latex(row.condition)]
    if row.note:
        extra.append(rf"\text{{{_escape(row.note)}}}")
    return out + (" && " + r",\ ".join(extra) if extra else "")


def _json(cell: Cell, sections: list[Section]) -> str:
    steps = [{"section": s.title, "name": text(r.lhs), "relation": r.rel, "text": row_text(r),
              "latex": row_latex(r), "lhs_srepr": sympy.srepr(r.lhs), "srepr": sympy.srepr(r.rhs),
              "note": r.note, "condition": None if r.condition is None else text(r.condition)}
             for s in sections for r in s.rows]
    forms = {}
    form = closed_forms.formula(cell)
    if cell.readout == "classification":
        forms["B_min"] = {"srepr": sympy.srepr(sympy.Integer(0)), "text": "0", "valid_for": "L >= 1",
                          "L_min": 1, "L_max": None, "infimum": True}
    elif form is not None:
        pieces = [{"srepr": sympy.srepr(p.B_min), "text": text(p.B_min), "latex": latex(p.B_min),
                   "valid_for": p.valid_for, "L_min": p.L_min, "L_max": p.L_max, "infimum": False,
                   "extremal": {name: {"srepr": sympy.srepr(e), "text": text(e)} for name, e in p.extremal.items()}}
                  for p in form.pieces]
        forms["B_min"] = pieces[-1]
        forms["pieces"] = pieces
        if form.L_max is not None:
            forms["L_star"] = form.L_max
    out = {"cell": cell.keys(),
           "symbol": {"L": sympy.srepr(L)}, "steps": steps, "closed_forms": forms}
    term = laws.leading_term(cell)
    if term is not None:
        out["leading_constant"] = {
            "statement": term.statement, "exponent": str(term.exponent),
            "general": {"srepr": sympy.srepr(term.general), "text": text(term.general),
                        "latex": latex(term.general), "d_min": term.d_min},
            "constant": {"srepr": sympy.srepr(term.constant), "text": text(term.constant),
                         "value": float(term.constant)},
            "proven": term.proven}
    return json.dumps(out, indent=1)


def render(cell: Cell, fmt: str) -> str:
    """The derivation as ``text``, ``latex`` or ``json`` (module docstring)."""
    sections = derivation(cell)
    if fmt == "json":
        return _json(cell, sections)
    parts = []
    for sec in sections:
        if fmt == "latex":
            title = sec.title[0].upper() + sec.title[1:]
            body = [rf"\paragraph{{{_escape(title)}.}} {_escape(sec.intro)}"]
            if sec.rows:
                rows = " \\\\\n".join(f"  {row_latex(r)}" for r in sec.rows)
                body.append(f"\\begin{{align*}}\n{rows}\n\\end{{align*}}")
            parts.append("\n".join(body))
        else:
            body = [f"{sec.title}:"] + ([f"  {sec.intro}"] if sec.intro else [])
            body += [f"  {row_text(r)}" for r in sec.rows]
            parts.append("\n".join(body))
    head = cell.describe()
    return (f"% {head}\n" if fmt == "latex" else f"{head}\n\n") + "\n\n".join(parts)


# --------------------------------------------------------------------------- command line
def _parser() -> cli.Parser:
    p = cli.Parser(prog="python -m constructions.derive", description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True, choices=NORMS, help="the norm placement")
    p.add_argument("--attention", choices=ATTENTIONS, default="softmax", help="the attention (default softmax)")
    p.add_argument("--readout", choices=READOUTS, default="regression", help="the read-out (default regression)")
    p.add_argument("--d", type=int, default=8, help=f"the width d of the layer, 2..{MAX_D} (default 8)")
    p.add_argument("--norm", choices=tuple(KINDS), default="layernorm", help="the norm kind (default layernorm)")
    p.add_argument("--affine", choices=("gain", "gain_bias"), default=None,
                   help="the affine of a *_learned variant (default: the kind's usual one, gain_bias "
                        "for layernorm, gain for rmsnorm)")
    p.add_argument("--eps", type=cli.nonnegative_float, default=0.0,
                   help="the norm epsilon (default 0; the constructions are derived for 0)")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text (plain), latex (align* environments) or json (default text)")
    return p


def parse(argv) -> tuple[Cell, str]:
    """The cell and the format (bad input: ValueError or cli.UsageError, one line, exit 2)."""
    args = _parser().parse_args(argv)
    cell = Cell(args.attention, args.variant, args.readout, args.d, args.eps, norm=args.norm,
                affine=args.affine)
    if cell.post and cell.d < laws.smallest_d(cell):
        raise cli.UsageError(f"post-{cell.kind.name} at d = {cell.d} maps every input to one of two "
                             "points: nothing to derive beyond L = 1")
    return cell, args.format


def execute(parsed) -> int:
    cell, fmt = parsed
    cli.emit(render(cell, fmt))
    return 0


def main(argv=None) -> int:
    return cli.run(PROG, parse, execute, argv)


if __name__ == "__main__":
    raise SystemExit(main())
