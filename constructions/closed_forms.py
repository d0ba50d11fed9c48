"""Exact closed forms of ``B_min(L)``: each stated once, as a sympy expression in ``L``, with the
range of ``L`` where it holds (:func:`formula`); every number is its substitution at one ``L``
(:func:`closed_form`: the same functions taken at the exact ``L``, which gives the substituted
expression without building the formula), or, for a command that needs no exact form, the same
statement evaluated without sympy (:func:`value`: the extremal point below at the exact ``L``,
and the smallest budget whose capacity reaches its amplitude, at 192 bits).  The extremal points
are written once as functions of ``L`` (:func:`rho_star`, :func:`d_star`, :func:`x_star`, ...,
and the arc's crossing :func:`constructions.laws.arc_crossing_sq`), for the symbol and for exact
numbers alike; nothing is solved at run time except the budget law of the segment and the line
(:func:`_budget_law`).

In every family ``B_min`` is the *budget* (:func:`budget`) of the extremal shape and amplitude:
the smallest ``B`` whose capacity (:func:`constructions.regression.capacity_branches`) reaches
the amplitude, inside the shape's domain.  Only the extremal point is stated here.

**Segment (softmax without post-norm).**  Feasibility of a shape ``rho`` is an up-set
(:mod:`bounds.lstar`), and near the optimum the budget a shape needs grows with ``D_lo(rho)``
much faster than the score gap ``sigma = sqrt(d) log rho`` helps; so the optimum sits at the
*corner* ``rho*`` where the counting interval closes, ``D_lo(rho*) = D_hi(rho*)``.  There one
lower gap ``k`` (the pair ``(L, L-k)``) and one upper gap ``k'`` (the pair ``(k', 0)``) are
active, and ``lo_k(rho) = hi_k'(rho)`` is the quadratic :data:`CORNER`.  Writing ``L = 2m + 1``
(odd) or ``L = 2m`` (even),

    odd:  rho* = m^2,      D* = (m+1)^2,   k = m + 1, k' = m,
    even: rho* = m(m-1),   D* = m(m+1),    k = m,     k' = m (tie with m-1),

that is ``rho* = floor((L-1)^2/4)``, ``D* = floor((L+1)^2/4)``, ``k = ceil(L/2)``,
``k' = floor(L/2)``: at these points ``lo_k = hi_k'`` identically in ``m``, and for ``L >= 5``
``k``, ``k'`` are the integer extremisers (the tests check both).  The budget of a shape is
``max(D/sqrt(D + sigma), sqrt(sigma/2))`` (none: the capacity and the score-gap reach
``sigma <= 2 B^2``), ``max(D/sqrt(sigma + (1+sqrt(d-1)) D), sqrt(D/(2 sqrt(d-1))),
sqrt(sigma/(2 sqrt(d-1)(sqrt(d-1)+1))))`` (pre_learned LayerNorm; every pre-norm with a gain
is the inverse of its law's capacity and score-gap reach, :func:`budget`) and
``D/sqrt(2 sigma)`` (pre_bare, ``rho <= exp(2 sqrt(d))``).  The corner is the optimum, and
``B_min(L)`` its budget, for

* none (either kind): ``L >= 6``, every ``d``;
* pre-norm with a gain (LayerNorm or RMSNorm, gain or gain and bias): ``L >= 5``, every ``d``,
  except LayerNorm with a gain and no bias at ``d = 2``, which maps onto a line (value gap
  ``sqrt(2 sigma)``, :func:`constructions.laws.on_a_line`): ``L >= 7``;
* pre_bare (either kind): ``7 <= L <= L*(d)``, ``d >= 3``, and RMSNorm at ``d = 2`` (its values
  fill a circle; ``L*(2) = 9``); beyond ``L*`` nothing counts.  LayerNorm at ``d = 2`` realises
  only two score gaps and has no corner.  ``L*(d)`` is the same for both kinds: both fix
  ``|h| = sqrt(d)`` and reach every score gap up to ``2 d``.

Below these ranges the budget still falls to the right of the corner and the optimum is an
interior shape (none: ``L = 5`` for ``3 <= d <= 32``; pre_learned: ``L = 4`` for ``d >= 3``;
pre_bare: ``L = 6`` for every ``d``); at a few smaller ``L`` the score-gap floor happens to bind
at the same value (none at ``L = 4, 5`` for ``d >= 64``), which the ranges leave out.  The
ranges were established against the float64 optimum of the reduced problem
(:meth:`constructions.regression.RegressionDesign.estimate`) at every ``L <= 400`` for ``d`` in
``{2, ..., 8, 11, 17, 32, 64, 100, 256, 1000, 4096, 65536}`` (pre_bare: ``d <= 64``, up to
``min(400, L*(d))``; the RMSNorm cells and LayerNorm with a gain and no bias at every
``L <= 300`` of the same widths); the tests compare the formula with the certified sweep ``B_min`` at every
``L <= 200`` for ``d = 8`` and at samples of ``L`` for ``d = 3`` and ``17``.  Beyond ``L = 400``
the ranges are not proven: the corner stays optimal as long as the budget increases to its right.

**Arc (post-norm, symmetric construction; either attention with LayerNorm, softmax with
RMSNorm; any d where the image holds a plane: LayerNorm d >= 3, RMSNorm d >= 2).**  ``b_lo`` increases
with ``lam``, so the optimum is the smallest feasible ``lam``.  Each offset ``x`` allows
``b_lo(lam) < sqrt(lam^2 + x^2)(1 + 1/(2x))`` exactly beyond its crossing, whose square
:data:`LAM_SQ_X` solves the squared equation (linear in ``lam^2``;
:func:`constructions.laws.arc_crossing_sq`); so
``lam*^2 = max(0, max_x lam_x^2)``.  The maximum is at the offset ``x* = floor(3L/4) - L/2``
for ``L >= 3`` (the tests check it in exact rational arithmetic for every ``L <= 400``); for
``L <= 4`` no offset binds (``lam_x^2 <= 0``, and ``lam_{x*}^2 = 0`` at ``L = 3, 4``) and the
infimum is the degenerate arc ``lam -> 0``.  Then ``b* = b_lo(lam*)`` and ``B_min`` is its budget:
``b*/sqrt(d)`` (bare), ``sqrt(b*/(sqrt(d) a))`` (a gain, ``a`` the kind's axis reach:
``sqrt(b*/sqrt(d-1))`` for LayerNorm, ``sqrt(b*/sqrt(d))`` for RMSNorm), for every ``L >= 3``; at ``L = 2``
(where ``x* = 0`` is not an offset) ``b* = b_lo(0) = 1/2``.  For ``L`` a multiple of 4
(``x* = L/4``)

    lam*^2 = L^3 (L-4) / (16 (2L+1)),    b* = (L-1)(L+2) / (4 sqrt(2L+1)),

so ``b* ~ L^{3/2}/(4 sqrt(2))``.

**Line (linear attention without post-norm).**  The slope must exceed ``1 - 1/L``
(:data:`constructions.line.INTERVAL`), so ``B_min`` is the budget of that slope:
``(sqrt(d)(1 - 1/L))^{1/4}`` (none), ``(1 - 1/L)/d`` (bare pre-norm, either kind),
``(sqrt(d)(1 - 1/L))^{1/4}/H^{3/4}`` (pre-norm with a gain, ``H`` the law's value reach:
``1 + sqrt(d-1)`` for LayerNorm with a bias, ``sqrt(d-1)`` without, ``1 + sqrt(d)`` and
``sqrt(d)`` for RMSNorm), for every ``L >= 2`` and ``d`` (Cauchy-Schwarz: the line's capacity is
attained; :func:`bounds.lower.line_lower`).

All closed forms are for ``eps = 0`` (:func:`formula` returns None otherwise).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import mpmath

from constructions import arc, laws, line
from constructions.cell import Cell

#: the smallest L from which the corner is optimal (module docstring): no norm, values whose gap
#: is sqrt(2 sigma) (bare pre-norm, pre-norm onto a line), pre-norm with a gain (either kind)
SEGMENT_L_MIN_NONE = 6
SEGMENT_L_MIN_SQRT_GAP = 7
SEGMENT_L_MIN_GAIN = 5
#: the largest L at which no offset binds (lam*^2 = 0)
ARC_DEGENERATE_L_MAX = 4


def segment_L_min(cell: Cell) -> int:
    """The smallest ``L`` from which the corner is the optimum of a segment cell (module docstring)."""
    if not cell.pre:
        return SEGMENT_L_MIN_NONE
    if laws.rigid(cell) or laws.on_a_line(cell):
        return SEGMENT_L_MIN_SQRT_GAP
    return SEGMENT_L_MIN_GAIN


# The extremal point as functions of L, in plain arithmetic with the number type's ``floor``
# and ``ceil``: of the symbol L (sympy.floor, sympy.ceiling) they are the sympy statements
# RHO_STAR, D_STAR, K_STAR, KK_STAR, X_STAR; of an exact Fraction L (math.floor, math.ceil),
# their exact values.


def rho_star(L, floor):
    """The corner's attention ratio ``floor((L-1)^2/4)`` (module docstring)."""
    return floor((L - 1) ** 2 / 4)


def d_star(L, floor):
    """The corner's amplitude ``floor((L+1)^2/4)``."""
    return floor((L + 1) ** 2 / 4)


def k_star(L, ceil):
    """The active lower gap ``ceil(L/2)``."""
    return ceil(L / 2)


def kk_star(L, floor):
    """The active upper gap ``floor(L/2)``."""
    return floor(L / 2)


def x_star(L, floor):
    """The active offset ``floor(3L/4) - L/2`` of the arc (``L >= 3``)."""
    return floor(3 * L / 4) - L / 2


@functools.cache
def _symbolic() -> dict:
    """The sympy statements, built on first use (module ``__getattr__``; a command that needs
    only the value of ``B_min``, :func:`value`, never loads sympy), each the plain-arithmetic
    function above or of :mod:`constructions.laws` and :mod:`constructions.arc` applied to the
    symbols (no solving):

    * ``RHO_STAR``, ``D_STAR``, ``K_STAR``, ``KK_STAR``: the corner and the active gaps;
    * ``X_STAR``: the active offset of the arc (``L >= 3``);
    * ``LAM_SQ_X``: the square of the smallest lambda at which the offset x allows b_lo, the
      root of ``b_lo^2 = b_hi_x^2`` (:func:`constructions.laws.arc_crossing_sq`);
    * ``LAM_STAR_SQ``, ``B_ARC_STAR``: the extremal arc for L >= 3 (lam*^2 = 0 at L = 3, 4);
      ``B_ARC_DEGENERATE``: the degenerate arc of L = 2;
    * for ``L`` a multiple of 4, ``L >= 8`` (active offset ``x = L/4``) the simplified extremal
      arc ``LAM_STAR_SQ_MULT4``, ``B_ARC_STAR_MULT4``.
    """
    import sympy

    from constructions.symbols import L, x

    xs = x_star(L, sympy.floor)
    lam_star_sq = laws.arc_crossing_sq(L, xs)
    return {"RHO_STAR": rho_star(L, sympy.floor), "D_STAR": d_star(L, sympy.floor),
            "K_STAR": k_star(L, sympy.ceiling), "KK_STAR": kk_star(L, sympy.floor), "X_STAR": xs,
            "LAM_SQ_X": laws.arc_crossing_sq(L, x), "LAM_STAR_SQ": lam_star_sq,
            "B_ARC_STAR": arc.b_lo(sympy.sqrt(lam_star_sq), L, sympy.sqrt),
            "B_ARC_DEGENERATE": arc.b_lo(0, L, sympy.sqrt),
            "LAM_STAR_SQ_MULT4": L**3 * (L - 4) / (16 * (2 * L + 1)),
            "B_ARC_STAR_MULT4": (L - 1) * (L + 2) / (4 * sympy.sqrt(2 * L + 1)), "L": L}


@functools.cache
def _corner() -> sympy.Expr:
    """``CORNER``, built on first use (module ``__getattr__``; only the derivation prints it):
    the corner equation ``lo_k(rho) = hi_k'(rho)`` as a polynomial in ``rho`` (the numerator of
    the difference, multiplied out)."""
    import sympy

    from constructions import segment

    return sympy.expand(sympy.fraction(sympy.together(segment.D_LO_K - segment.D_HI_K))[0])


_SYMBOLIC_NAMES = ("RHO_STAR", "D_STAR", "K_STAR", "KK_STAR", "X_STAR", "LAM_SQ_X", "LAM_STAR_SQ", "B_ARC_STAR",
                   "B_ARC_DEGENERATE", "LAM_STAR_SQ_MULT4", "B_ARC_STAR_MULT4", "L")


def __getattr__(name: str):
    if name == "CORNER":
        return _corner()
    if name in _SYMBOLIC_NAMES:
        return _symbolic()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _budget_law(cell: Cell):
    """The smallest ``B`` reaching amplitude ``A`` (sympy, in ``A`` and, for the segment, ``sigma``).

    Each capacity branch increases in ``B``, so the capacity (their minimum) reaches ``A`` iff
    every branch does: the maximum of the branches' inverses.  The segment's are the law's
    (:func:`constructions.laws.segment_budget_branches`, with the score-gap reach), the arc's the inverse
    of its power of ``B`` (:func:`constructions.laws.budget`); no solving for either (the tests
    check both against the solved branches).  The line's branch is solved.
    """
    import sympy

    from constructions.symbols import A, B, sigma

    fam = laws.family(cell)
    if fam == "arc":
        return laws.budget(cell, A)
    if fam == "segment":
        return sympy.Max(*laws.segment_budget_branches(cell, A, sigma))
    from constructions.regression import capacity_branches

    inverses = []
    for branch in capacity_branches(cell):
        (root,) = sympy.solve(sympy.Eq(branch, A), B)
        inverses.append(root)
    return sympy.Max(*inverses)


def budget(cell: Cell, amplitude, shape=None):
    """``B`` needed for ``amplitude`` at ``shape`` (``rho``; unused off the segment), sympy: the
    budget law (:func:`_budget_law`) at these values."""
    import sympy

    from constructions.symbols import A

    if laws.family(cell) == "segment":
        return sympy.Max(*laws.segment_budget_branches(cell, amplitude, sympy.sqrt(cell.d) * sympy.log(shape)))
    return _budget_law(cell).subs(A, amplitude)


#: the working precision (bits) of :func:`value` and the relative width its bisection stops at
VALUE_PREC = 192
_VALUE_RTOL = mpmath.mpf(2) ** -150


def _smallest_budget(reaches) -> mpmath.mpf:
    """The smallest ``B > 0`` with ``reaches(B)``, for a predicate that holds on an up-set
    ``[B*, oo)`` (and not at 0): doubling, then bisection to a relative width of 2^-150."""
    lo, hi = mpmath.mpf(0), mpmath.mpf(1)
    while not reaches(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > hi * _VALUE_RTOL:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


def _extremal(cell: Cell, L_value: int, piece: int) -> dict:
    """The extremal point of :func:`formula`'s ``piece``-th piece at one ``L``, exact and
    without sympy: the functions above (and the arc's crossing,
    :func:`constructions.laws.arc_crossing_sq`, at ``x*``) of the rational ``L``.  Segment:
    ``rho``, ``D`` (Fractions), ``k``, ``k_prime`` (ints); arc: ``lambda_sq`` (a Fraction; 0 for
    the degenerate arc of the first piece, and exactly 0 at ``L = 3, 4``) and ``x`` (None for
    the first piece); line: ``K``."""
    Lq = Fraction(L_value)
    fam = laws.family(cell)
    if fam == "line":
        return {"K": line.slopes(Lq)[0]}
    if fam == "arc":
        if piece == 0:
            return {"lambda_sq": Fraction(0), "x": None}
        xs = x_star(Lq, math.floor)
        return {"lambda_sq": laws.arc_crossing_sq(Lq, xs), "x": xs}
    return {"rho": Fraction(rho_star(Lq, math.floor)), "D": Fraction(d_star(Lq, math.floor)),
            "k": k_star(Lq, math.ceil), "k_prime": kk_star(Lq, math.floor)}


def _mpf(q: Fraction) -> mpmath.mpf:
    return mpmath.mpf(q.numerator) / q.denominator


def _value_mp(cell: Cell, L_value: int, piece: int) -> mpmath.mpf:
    """``B_min(L)`` of :func:`formula`'s ``piece``-th piece, in mpmath at :data:`VALUE_PREC`.

    The same statement as :func:`formula`, evaluated numerically: the extremal point
    (:func:`_extremal`), and the budget as the smallest ``B`` whose capacity
    (:func:`constructions.laws.capacity`, and for the segment the score-gap reach) reaches the
    amplitude.  Arc and line: the law's own inverse (:func:`constructions.laws.budget`).
    """
    ops, ext = laws.MPMATH, _extremal(cell, L_value, piece)
    fam = laws.family(cell)
    if fam == "line":
        return laws.budget(cell, _mpf(ext["K"]), ops)
    if fam == "arc":
        b = arc.b_lo(mpmath.sqrt(_mpf(ext["lambda_sq"])), mpmath.mpf(L_value), mpmath.sqrt)
        return laws.budget(cell, b, ops)
    rho, D = _mpf(ext["rho"]), _mpf(ext["D"])
    sigma = mpmath.sqrt(cell.d) * mpmath.log(rho)
    rigid = laws.rigid(cell)
    return _smallest_budget(lambda B: laws.capacity(cell, rho, B, ops) >= D
                            and (rigid or laws.score_gap_max(cell, B, ops) >= sigma))


def _piece_at(cell: Cell, L_value: int) -> tuple | None:
    """``(index, range)`` of the piece of :func:`formula` that holds at ``L`` (None: none)."""
    return next(((i, r) for i, r in enumerate(ranges(cell) or ()) if _holds(r, L_value)), None)


def value(cell: Cell, L_value: int) -> dict | None:
    """``B_min(L)`` as a float (``B``, the nearest double to the value computed at
    :data:`VALUE_PREC` bits) and the range of the piece (``valid_for``), without sympy: what
    :func:`closed_form` gives as ``B`` and ``valid_for``, for a command that needs no exact
    form.  None where no closed form holds at this ``L``."""
    found = _piece_at(cell, L_value)
    if found is None:
        return None
    i, r = found
    with mpmath.workprec(VALUE_PREC):
        B = float(_value_mp(cell, L_value, i))
    return {"B": B, "valid_for": _valid_for(r)}


@functools.cache
def ranges(cell: Cell) -> tuple | None:
    """The ranges ``(L_min, L_max)`` of the pieces of :func:`formula` (``L_max`` None: every
    ``L >= L_min``), or None where no closed form applies (see :func:`formula`)."""
    if cell.readout != "regression" or cell.eps != 0 or laws.foot_distance(cell, 1, laws.FLOAT) is not None:
        return None
    if cell.task.distractor or cell.read.last:
        return None  # the other tasks and reads: constructions.tasks.closed_form
    fam = laws.family(cell)
    if fam == "line":
        return ((2, None),)
    if fam == "arc":
        return None if cell.d < laws.smallest_d(cell) else ((2, 2), (3, None))
    if laws.rigid(cell) and laws.on_a_line(cell):
        return None
    from bounds.lstar import l_star

    return ((segment_L_min(cell), l_star(cell.d) if laws.rigid(cell) else None),)


def _holds(r: tuple, L_value: int) -> bool:
    return L_value >= r[0] and (r[1] is None or L_value <= r[1])


def _valid_for(r: tuple) -> str:
    L_min, L_max = r
    if L_max is None:
        return f"L >= {L_min}"
    if L_max == L_min:
        return f"L = {L_min}"
    return f"{L_min} <= L <= {L_max}"


@dataclass(frozen=True)
class Piece:
    """``B_min(L) = B_min`` for ``L_min <= L <= L_max`` (every ``L >= L_min`` if ``L_max`` is None).

    ``extremal`` holds the optimal shape, amplitude and active indices as sympy expressions in
    ``L`` (named as :func:`closed_form`'s keys).
    """

    B_min: sympy.Expr
    L_min: int
    L_max: int | None
    extremal: dict = field(default_factory=dict)

    def holds(self, L_value: int) -> bool:
        return _holds((self.L_min, self.L_max), L_value)

    @property
    def condition(self) -> sympy.Basic:
        """The range as a sympy relation in ``L``."""
        import sympy

        from constructions.symbols import L

        if self.L_max == self.L_min:
            return sympy.Eq(L, self.L_min, evaluate=False)
        low = sympy.Ge(L, self.L_min, evaluate=False)
        return low if self.L_max is None else sympy.And(low, sympy.Le(L, self.L_max, evaluate=False))

    @property
    def valid_for(self) -> str:
        return _valid_for((self.L_min, self.L_max))


@dataclass(frozen=True)
class ClosedForm:
    """``B_min(L)`` of a cell: one or more :class:`Piece` s on disjoint ranges of ``L``.

    The last piece is the general one (the largest ``L``); an arc has a first piece for ``L = 2``,
    where the active-offset formula is undefined.
    """

    pieces: tuple

    @property
    def main(self) -> Piece:
        return self.pieces[-1]

    def piece(self, L_value: int) -> Piece | None:
        return next((p for p in self.pieces if p.holds(L_value)), None)

    def holds(self, L_value: int) -> bool:
        return self.piece(L_value) is not None

    @property
    def L_min(self) -> int:
        return self.pieces[0].L_min

    @property
    def L_max(self) -> int | None:
        return self.main.L_max


@functools.cache
def formula(cell: Cell) -> ClosedForm | None:
    """The closed form of ``B_min(L)`` of a regression cell and its range (module docstring).

    None where none applies: classification, ``eps > 0``, linear attention with post-RMSNorm
    (its one-sided arc is a numeric fixed point, :mod:`constructions.one_sided`), post-LayerNorm
    at ``d = 2``, bare pre-LayerNorm at ``d = 2``, and the select task or the last read
    (:func:`constructions.tasks.closed_form`).
    """
    spans = ranges(cell)
    if spans is None:
        return None
    import sympy

    k = _symbolic()
    fam = laws.family(cell)
    if fam == "line":
        return ClosedForm((Piece(budget(cell, line.INTERVAL[0]), *spans[0], {"K": line.INTERVAL[0]}),))
    if fam == "arc":
        degenerate = Piece(budget(cell, k["B_ARC_DEGENERATE"]), *spans[0],
                           {"lambda_sq": sympy.Integer(0), "b": k["B_ARC_DEGENERATE"]})
        return ClosedForm((degenerate, Piece(budget(cell, k["B_ARC_STAR"]), *spans[1],
                                             {"x": k["X_STAR"], "lambda_sq": k["LAM_STAR_SQ"], "b": k["B_ARC_STAR"]})))
    return ClosedForm((Piece(budget(cell, k["D_STAR"], k["RHO_STAR"]), *spans[0],
                             {"rho": k["RHO_STAR"], "D": k["D_STAR"], "k": k["K_STAR"], "k_prime": k["KK_STAR"]}),))


def closed_form(cell: Cell, L_value: int) -> dict | None:
    """``B_min(L)`` and its extremal point at one ``L``: :func:`formula`'s piece at this ``L``,
    evaluated at the exact ``L``.

    ``B`` (float) and ``B_exact`` (the exact value as a string), the range ``valid_for`` of the
    piece used, and per family: ``rho, D, k, k_prime`` (segment), ``lambda, b, x`` (arc; ``x``
    None where no offset binds), ``K`` (line), with the exact ``rho_exact, D_exact`` and
    ``lambda_sq_exact``.  None where no closed form holds at this ``L``.

    The piece is not built and substituted: its ingredients are taken at the number ``L``
    instead -- the extremal point (:func:`_extremal`, exact rationals), the amplitude
    (:func:`constructions.arc.b_lo` of the extremal arc; the corner's ``D*``; the line's
    ``1 - 1/L``) and the budget law (:func:`budget`) -- the same functions :func:`formula`
    applies to the symbol ``L``, so ``B_exact`` is the substitution of ``L`` into the piece
    (the tests compare them, ``sympy.srepr`` for ``sympy.srepr``).
    """
    found = _piece_at(cell, L_value)
    if found is None:
        return None
    import sympy

    piece, r = found
    ext = _extremal(cell, L_value, piece)
    out = {"valid_for": _valid_for(r)}
    fam = laws.family(cell)
    if fam == "segment":
        rho, D = sympy.Integer(ext["rho"].numerator), sympy.Integer(ext["D"].numerator)
        B_exact = budget(cell, D, rho)
        out.update(rho=float(rho), D=float(D), k=ext["k"], k_prime=ext["k_prime"],
                   rho_exact=str(rho), D_exact=str(D))
    elif fam == "arc":
        lam_sq = sympy.Rational(ext["lambda_sq"].numerator, ext["lambda_sq"].denominator)
        b = arc.b_lo(sympy.sqrt(lam_sq), sympy.Integer(L_value), sympy.sqrt)
        B_exact = budget(cell, b)
        out.update(**{"lambda": float(sympy.sqrt(lam_sq)), "b": float(b),
                      "x": None if L_value <= ARC_DEGENERATE_L_MAX else float(ext["x"]),
                      "lambda_sq_exact": str(lam_sq)})
    else:
        K = sympy.Rational(ext["K"].numerator, ext["K"].denominator)
        B_exact = budget(cell, K)
        out["K"] = float(K)
    return {"B": float(B_exact), "B_exact": str(B_exact), **out}


def arc_closed_form(cell: Cell, L_value: int) -> dict | None:
    """:func:`closed_form` of a post-norm cell (the extremal arc ``lambda``, ``b``, ``x``)."""
    if laws.family(cell) != "arc":
        raise ValueError(f"{cell.describe()} is not a post-norm cell")
    return closed_form(cell, L_value)
