"""Regression constructions for the regression cells, at a given budget ``B``.

Every regression cell reduces to a one-parameter family of read-outs of the count
(``y(n) = C + A * f_t(n)``, ``f_t`` the family module's ``SHAPE``) with an *amplitude* ``A`` and, except for
linear attention without post-norm, a *shape* ``t``:

=================  ==========================  ===========  ================================
family             read-out ``y(n)``           shape ``t``  amplitude ``A``
=================  ==========================  ===========  ================================
segment (softmax,  ``C + D n/(rho+n)``         ``rho``      ``D = <w, h_a - h_s>``
no/pre-norm)
arc (post-norm)    ``L/2 + b x/sqrt(lam^2+x^2)`` ``lam``    ``b`` (read-out of the arc)
line (linear,      ``C + K n``                 --           ``K = tau <h_s,h_a> <w,h_a>``
no/pre-norm)
=================  ==========================  ===========  ================================

For each ``t`` the counting amplitudes form an open interval ``(lo(t), hi(t))``
(:mod:`constructions.segment`, :mod:`constructions.arc`, :mod:`constructions.line`),
and at budget ``B`` the cell can reach amplitudes up to a *capacity* ``cap(t, B)``, derived in
:mod:`constructions.laws` (:func:`constructions.steps.capacity_branches` writes it as a minimum of increasing
branches).  The constructions below attain it:

Write ``M`` for the kind's largest output coordinate (``sqrt(d-1)`` LayerNorm, ``sqrt(d)``
RMSNorm, :meth:`~constructions.cell.NormKind.max_coordinate`) and ``(top, across)`` for its
axes (:func:`axes`: ``(c_1, p)`` LayerNorm, ``(e_1, q)`` RMSNorm), so that an embedding
``a top + b across`` with ``a^2 + b^2 = 1`` normalises to ``sqrt(d)(a top + b across)``, first
coordinate ``a M``.

* softmax, no norm (any kind): ``e_a = B c_1``, ``e_s = -r c_1`` with ``|e_a - e_s| = X`` the
  root of ``X^2 - B X - sigma = 0``, ``sigma = sqrt(d) log rho``; the score gap needs
  ``sigma <= 2 B^2`` (:meth:`RegressionDesign.domain`).
* softmax, pre-norm with a gain: ``g = B e_1`` (and ``beta`` along ``e_1``), so both values lie
  on ``e_1``; ``e_a = -nu top`` gives ``h_a = (beta_1 - M B) e_1`` and ``e_s`` at cosine
  ``N_1/M`` to ``top`` sets the first coordinate ``N_1 = X/B - M`` of ``N(e_s)``, so
  ``|h_s - h_a| = X``, the law's value gap (:func:`constructions.laws.value_gap`).  With a bias
  ``beta_1 = sigma/X - B N_1`` fixes the score gap (``|beta_1| <= B`` on the law's domain);
  without one ``h_s = (X - M B) e_1`` and the score gap is ``(X - M B) X = sigma``, the law's
  quadratic.  LayerNorm with a gain and no bias at ``d = 2`` maps onto a line
  (:func:`constructions.laws.on_a_line`): ``N(e) = +-(1, -1)``, so ``e_s = -e_a = nu c_1``,
  ``g = (X/2) e_1``, ``h_s = -h_a = (X/2) e_1`` and ``X = sqrt(2 sigma)``, ``|g| <= B`` iff
  ``sigma <= 2 B^2``.
* softmax, bare pre-norm: ``|h| = sqrt(d)``, the angle between ``h_s = sqrt(d) top`` and
  ``h_a = sqrt(d)(cos top + sin across)`` fixes ``sigma``; only ``w`` costs (the embeddings are
  scale-free).  LayerNorm at ``d = 2`` realises only ``h_a = +-h_s`` (two score gaps); RMSNorm
  has the whole circle at ``d = 2``.
* post-norm (the arc): the residual line ``lam across + (n - L/2) top`` is centred for
  LayerNorm and lies in the plane ``(e_1, q)`` for RMSNorm; either norm maps it to
  ``sqrt(d)`` times its unit vector.  The read-out is ``w`` along ``top`` (bare) or
  ``w = g = S e_1`` (gain; a bias is 0), ``S = sqrt(A/(sqrt(d) a))`` with ``a`` the kind's
  :meth:`~constructions.cell.NormKind.axis_reach`: ``w * g = S^2 e_1`` projects on the plane as
  ``S^2 a top``, the law's ``sqrt(d) a B^2`` at ``S = B``.  The embeddings can realise any arc
  with arbitrarily small norm (scale invariance), so they cost nothing.
* linear, no norm or pre-norm: aligned vectors (Cauchy-Schwarz is tight): ``e_s = e_a`` along
  ``top``, ``g = B e_1`` (and ``beta = B e_1``), values of the law's largest norm ``H B``.

**Linear attention with post-RMSNorm: the one-sided arc** (:class:`FootDesign`).  Its residual is
``r(n) = e_s + tau <e_s, e_s> e_s + n tau <e_s, e_a> e_a = P + n Q``, whose foot
``n0 = -<P, Q>/|Q|^2 = -(1 + tau|e_s|^2)/(tau |e_a|^2)`` lies before the first count, at
``n0 < -sqrt(d)/B^2`` (:func:`constructions.laws.foot_distance`): the symmetric arc
(``n0 = L/2``) of the arc family is not realisable, and the optimal arc is one-sided
(:mod:`constructions.one_sided`), with the read-out angle ``psi`` as a second free shape
parameter beside ``lam`` and the foot at the budget's limit (:func:`constructions.steps._foot_steps`).  RMSNorm does not centre, so
nothing removes a common part of ``P`` and ``Q``; LayerNorm escapes this by centring away the
common ``one`` component of the embeddings (:func:`constructions.steps._arc_steps`).  Its proven lower bound is the
restricted arc bound (:func:`bounds.arc_lower.arc_lower` with ``foot``).

The cell counts to ``L`` at budget ``B`` iff some ``t`` has ``lo(t) < min(hi(t), cap(t, B))``.
:meth:`RegressionDesign.build` picks the ``t`` with the largest relative slack
(:meth:`RegressionDesign.best_shape`) and the middle amplitude, so the construction counts at
every ``B`` above ``B_min`` and ``B_min`` of the construction is ``B_min`` of the cell.

**The construction as a derivation.**  :meth:`RegressionDesign.steps` lists the construction
as named quantities (:class:`constructions.steps.Step`, built in :mod:`constructions.steps`,
the symbolic side, loaded on first use), each a sympy expression in the arguments ``B, L, t, A, C``
(:data:`constructions.symbols.ARGS`) and the earlier quantities; vectors are combinations of the
frame ``c_1, p, one`` (and ``e_1``, ``q``) of :mod:`constructions.basis`, inner products
``inner(u, v)``.  :meth:`RegressionDesign.frame` resolves them into exact
:class:`~constructions.basis.FrameVector` s (O(1) work in ``d``), :meth:`RegressionDesign.symbolic`
into full sympy d-vectors (moderate ``d`` only), and :meth:`RegressionDesign.evaluate` evaluates
the compiled construction in mpmath: for the cells of :func:`constructions.codegen.cells` the
straight-line program sympy compiled once (:mod:`constructions.generated`), so that the numeric
paths never load sympy.
"""

from __future__ import annotations

import functools
import math
import numbers

import mpmath
import numpy as np

from constructions import arc, codegen, laws, line, registry, segment, zoom
from constructions.cell import MAX_B, MAX_L, Cell, Params, to_mpf

#: above this width :meth:`RegressionDesign.symbolic` refuses (it builds d-long sympy vectors);
#: :meth:`RegressionDesign.frame` and everything numeric work up to ``Cell``'s ``MAX_D``
SYMBOLIC_MAX_D = 4096

#: the module of each read-out family: one interface (``SHAPE``, ``interval``,
#: ``interval_float``, ``centre``)
FAMILIES = {"segment": segment, "arc": arc, "line": line}


#: the family of a cell (segment, arc or line)
family = laws.family


#: how far beyond the budget's limit the one-sided arc puts its foot: ``F = sqrt(d)/B^2 +
#: FOOT_SLACK`` with ``FOOT_SLACK = 2^-FOOT_SLACK_BITS`` (:data:`constructions.steps.FOOT_SLACK`,
#: exact), so that ``|e_s| = sqrt(FOOT_SLACK) B = B/4096 > 0`` (the limit needs ``e_s = 0``).
#: The foot moves by ``2^-24`` counts, which costs at most ``1.1e-8`` of ``B_min`` (about ``0.18
#: FOOT_SLACK`` relative, most at ``L = 4`` bare, falling like ``L^{-2}``): below the sweep's
#: tolerance, where a larger slack would show against the bare lower bound (met to ``1e-4``,
#: the tolerance of its branch and bound), while the embeddings and the residuals, all of the
#: size of ``e_s``, move away from the narrow formats' smallest numbers
FOOT_SLACK_BITS = 24

#: the names of :mod:`constructions.steps` (the symbolic side) that this module's
#: ``__getattr__`` also answers, loading it (and sympy) on first use
_STEPS = ("Step", "axes", "capacity_branches", "program", "resolve", "FOOT_SLACK", "_branches", "_vec",
          "_embedding_scale", "_score_gap", "_temperature", "_segment_steps", "_foot_steps",
          "_arc_steps", "_line_steps")


def __getattr__(name: str):
    """The symbolic side, loaded on first use: the names of :mod:`constructions.steps`
    (:data:`_STEPS`) and the symbols of :mod:`constructions.symbols`."""
    if name in _STEPS:
        from constructions import steps

        return getattr(steps, name)
    if not name.startswith("__"):
        from constructions import symbols

        if hasattr(symbols, name):
            return getattr(symbols, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_count(L_value) -> int:
    if isinstance(L_value, (bool, np.bool_)) or not isinstance(L_value, numbers.Integral):
        raise ValueError(f"L must be an integer >= 1, got {L_value!r}")
    if L_value < 1:
        raise ValueError(f"L must be an integer >= 1, got {L_value}")
    if L_value > MAX_L:
        raise ValueError(f"L = {L_value} is beyond the limit MAX_L = {MAX_L} (constructions.cell.MAX_L)")
    return int(L_value)


def _check_budget(B_value) -> mpmath.mpf:
    """``B`` as an mpf (current precision); a ValueError unless a finite real number > 0."""
    if isinstance(B_value, (bool, np.bool_)) or not isinstance(B_value, numbers.Real):
        raise ValueError(f"B must be a finite real number > 0, got {B_value!r}")
    try:
        value = to_mpf(B_value)  # int, float, numpy, mpf, sympy numbers
    except ValueError:
        value = mpmath.mpf(float(B_value))  # other reals (fractions.Fraction)
    if not mpmath.isfinite(value) or value <= 0:
        raise ValueError(f"B must be a finite real number > 0, got {B_value!r}")
    if value > MAX_B:
        raise ValueError(f"B = {B_value!r} is beyond the limit MAX_B = {MAX_B:g} (constructions.cell.MAX_B)")
    return value


def _relative_slack(lo, top):
    """``(top - lo)/lo``; where ``lo = 0`` (every amplitude > 0 counts) ``+inf`` if ``top > 0``.

    As ``numpy.nan_to_num(s, nan=-inf, posinf=inf)`` of that (the form this replaces, the same
    floats): a ``nan`` is ``-inf`` and a ``-inf`` the most negative float (``-1.8e308``); a
    0-d result is a numpy scalar."""
    lo, top = np.asarray(lo, dtype=float), np.asarray(top, dtype=float)
    positive = lo > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(positive, (top - lo) / np.where(positive, lo, 1.0),
                     np.where(top > 0, np.inf, -np.inf))
    s = np.maximum(s, -_FLOAT_MAX)  # -inf -> -max; nan stays nan
    s = np.where(np.isnan(s), -np.inf, s)
    return s[()] if s.ndim == 0 else s


_FLOAT_MAX = float(np.finfo(np.float64).max)


class RegressionDesign:
    """The optimal regression construction of one cell (see the module docstring)."""

    #: the judge's backend for the bisection's screen (:func:`bounds.search.regression_row`)
    screen_backend = "float64"

    def __init__(self, cell: Cell):
        if cell.readout != "regression":
            raise ValueError("RegressionDesign is for regression cells")
        self.cell = cell
        self.family = family(cell)
        self.module = FAMILIES[self.family]
        self._frame = None
        self._build = None
        self._scans = {}

    def __getattr__(self, name: str):
        """The capacity, built on first use: ``capacity_expr`` (the law
        :func:`constructions.laws.capacity` in the symbols ``t, B``), ``_cap`` and ``capacity_mp``
        (it compiled for numpy and mpmath, :func:`constructions.codegen.lambdified`: without sympy
        where generated).  A subclass that sets them itself never reaches this."""
        if name == "capacity_expr":
            from constructions.symbols import B, t

            value = laws.capacity(self.cell, t, B)
        elif name in ("_cap", "capacity_mp"):
            module = "numpy" if name == "_cap" else "mpmath"

            def lambdify():
                import sympy

                from constructions.symbols import B, t

                return sympy.lambdify((t, B), self.capacity_expr, module)

            value = codegen.lambdified(self._code_key(f"capacity {module}"), module, lambdify)
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        setattr(self, name, value)
        return value

    def _code_key(self, part: str) -> str | None:
        """The key of a generated ``part`` of this design (:mod:`constructions.codegen`), or None:
        only the designs of this module, whose steps the generated file's key covers."""
        if type(self) not in (RegressionDesign, FootDesign):
            return None
        return f"{type(self).__name__}:{codegen.cell_key(self.cell)}:{part}"

    def compiled_parts(self) -> None:
        """Build the compiled construction and capacities once (worker processes then inherit
        them; :func:`constructions.codegen.generate` records them)."""
        self.compiled()
        self._cap, self.capacity_mp  # noqa: B018 (built on first use)

    # ----------------------------------------------------------------- symbolic side
    def steps(self) -> list:
        """The construction as named quantities, in order (module docstring; O(1) in ``d``)."""
        from constructions import steps  # the symbolic side (sympy)

        builder = {"segment": steps._segment_steps, "arc": steps._arc_steps, "line": steps._line_steps}
        return builder[self.family](self.cell)

    def frame(self) -> dict:
        """Every trainable vector and free scalar, exactly, with O(1) symbolic work in ``d``.

        Vectors are :class:`~constructions.basis.FrameVector` s: their exact first coordinate
        ``f``, common coordinate ``r`` beyond the third and half-difference ``s`` of the second
        and third (``FrameVector.pattern``), and their coefficients on the orthonormal frame
        ``c_1, p, one`` (``FrameVector.frame_coefficients()``), all sympy expressions in
        ``B, L, t, A, C``; the scalar ``w0`` is a sympy expression.  Keys starting with ``_``
        are derived quantities, not parameters: the token values ``_h_s, _h_a`` (after
        pre-norm) of the segment and line families.
        """
        if self._frame is None:
            from constructions.steps import resolve

            self._frame = resolve(self.steps(), self.cell.d)
        return self._frame

    def symbolic(self) -> dict:
        """:meth:`frame` with every vector as a full ``d x 1`` sympy matrix.

        Builds ``d``-long vectors, so it is refused above ``SYMBOLIC_MAX_D`` (use :meth:`frame`).
        """
        if self.cell.d > SYMBOLIC_MAX_D:
            raise ValueError(f"symbolic() builds d-long sympy vectors and is limited to "
                             f"d <= {SYMBOLIC_MAX_D} (got d = {self.cell.d}); frame() gives the "
                             "same construction as exact coefficients on the frame at any d")
        from constructions.basis import FrameVector

        return {name: v.matrix() if isinstance(v, FrameVector) else v for name, v in self.frame().items()}

    def compiled(self):
        """The construction lambdified for mpmath (built once): the straight-line
        :func:`constructions.steps.program` of the steps (generated where current,
        :func:`constructions.codegen.lambdified`).

        Only the distinct coordinates of every vector (``FrameVector.coordinates``, at most
        four) are computed; :meth:`evaluate` repeats the last of them up to ``d``.
        """
        if self._build is None:
            key, made = self._code_key("construction"), {}

            def lambdify():
                import sympy

                from constructions.basis import FrameVector
                from constructions.steps import program

                assignments, out = program(self.steps(), self.cell.d)
                made["names"] = list(out)
                heads = [v.coordinates() if isinstance(v, FrameVector) else v for v in out.values()]
                return sympy.lambdify(self._arguments(), heads, "mpmath",
                                      cse=lambda exprs: (assignments, exprs))

            def names():
                from constructions.steps import program

                return made.get("names") or list(program(self.steps(), self.cell.d)[1])

            build = codegen.lambdified(key, "mpmath", lambdify)
            self._names = codegen.cached(key and f"{key} names", names)
            self._build = build
        return self._build

    def _arguments(self) -> tuple:
        """The arguments of the compiled construction: :data:`constructions.symbols.ARGS`."""
        from constructions.symbols import ARGS

        return ARGS

    # ----------------------------------------------------------------- the reduced problem
    def domain(self, L_value: int, B_value: float):
        """Interval of admissible shapes ``t`` at budget ``B`` (None: no shape parameter).

        segment: ``rho >= 1`` and ``sigma = sqrt(d) log rho`` at most the law's score-gap reach
        (:func:`constructions.laws.score_gap_max`), and not beyond ``1e4 (L+2)^2`` where the
        segment only gets costlier (``D_lo(rho) >= rho (L-1)/L``); bare pre-norm mapping onto a
        line (LayerNorm at ``d = 2``) realises the single shape ``rho = exp(2 sqrt(d))``;
        arc: ``lam`` between ``1e-3`` and ``10 (L+2)^{3/2} + 10``.
        """
        d = self.cell.d
        if self.family == "line":
            return None
        if self.family == "arc":
            return (1e-3, 10.0 * (L_value + 2) ** 1.5 + 10.0)
        sigma_max = laws.score_gap_max(self.cell, B_value, laws.FLOAT)
        log_hi = sigma_max / math.sqrt(d)
        if laws.rigid(self.cell) and laws.on_a_line(self.cell):
            return (math.exp(log_hi), math.exp(log_hi))  # h_s = +-h_a: two scores only
        return (1.0, math.exp(min(log_hi, math.log(1e4 * (L_value + 2) ** 2))))

    def _scan(self, L_value: int):
        """A log-spaced grid of shapes over the widest domain, with ``lo, hi`` (cached per L)."""
        if L_value not in self._scans:
            dom = self.domain(L_value, 1e150)
            grid = np.geomspace(dom[0], dom[1], 513 if dom[1] > dom[0] else 1)
            lo, hi = self.interval_float(grid, L_value)
            self._scans[L_value] = (grid, lo, hi)
        return self._scans[L_value]

    def interval(self, t_value, L_value: int):
        """``(lo, hi)``: the counting amplitudes at shape ``t`` (mpmath)."""
        return self.module.interval(t_value, L_value)

    def interval_float(self, t_value, L_value: int):
        """``(lo, hi)`` in float64 (a screen), vectorised over ``t``."""
        return self.module.interval_float(t_value, L_value)

    def capacity(self, t_value, B_value):
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(self._cap(np.asarray(t_value, dtype=float), float(B_value)), dtype=float)

    def slack(self, t_value, L_value: int, B_value: float):
        """Relative slack ``(min(hi, cap) - lo)/lo`` at shape(s) ``t`` (float64 screen)."""
        lo, hi = self.interval_float(t_value, L_value)
        return _relative_slack(lo, np.minimum(hi, self.capacity(t_value, B_value)))

    def best_shape(self, L_value: int, B_value: float):
        """The shape with the largest slack at budget ``B`` and that slack (float64)."""
        if self.family == "line":
            return None, float(self.slack(np.array(1.0), L_value, B_value))
        grid, s = self._grid_slack(L_value, B_value)
        j = int(np.argmax(s))
        if len(grid) == 1 or not np.isfinite(s[j]):
            return float(grid[j]), float(s[j])
        dom = self.domain(L_value, B_value)
        a = max(grid[max(j - 1, 0)], dom[0])
        b = min(grid[min(j + 1, len(grid) - 1)], dom[1])
        t_best, s_best = zoom.maximize(lambda tt: self.slack(tt, L_value, B_value), a, b, points=33)
        return (t_best, s_best) if s_best > s[j] else (float(grid[j]), float(s[j]))

    def _grid_slack(self, L_value: int, B_value: float):
        """Relative slack on the cached shape grid at budget ``B`` (inadmissible shapes: -inf)."""
        grid, lo, hi = self._scan(L_value)
        s = _relative_slack(lo, np.minimum(hi, self.capacity(grid, B_value)))
        dom = self.domain(L_value, B_value)
        s[(grid > dom[1] * (1 + 1e-12)) | (grid < dom[0])] = -np.inf
        return grid, s

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """Smallest budget at which some shape has positive slack (None if none up to ``hi_B``).

        Bisection on ``B``: first on the cached shape grid (coarse), then with the zoomed
        shape search.  A float64 estimate of ``B_min``, used to bracket the judged bisection.
        """
        coarse = lambda b: (self.best_shape(L_value, b)[1] if self.family == "line"
                            else self._grid_slack(L_value, b)[1].max()) > 0
        fine = lambda b: self.best_shape(L_value, b)[1] > 0
        if not coarse(hi_B):
            return None
        lo_B, up_B = 1e-12, hi_B
        for feasible, tol in ((coarse, 1e-3), (fine, rtol)):
            lo_B, up_B = zoom.bisect_up(feasible, lo_B, up_B, tol)
            # the zoomed search can only do better than the grid: step down until it fails
            lo_B = up_B / 1.01
            while lo_B > 1e-12 and fine(lo_B):
                up_B, lo_B = lo_B, lo_B / 1.01
        return up_B

    def build(self, L_value: int, B_value, dps: int = 50, shape=None) -> Params:
        """The construction at budget ``B`` for counting to ``L``: best shape, middle amplitude.

        ``L`` must be an integer >= 1 and ``B`` a finite real number > 0 (else ValueError).
        ``shape``: the shape to use instead of :meth:`best_shape`'s search (a caller that has
        located it, e.g. near the closed form's extremal shape).
        """
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            t_value = self.best_shape(L_value, float(Bv))[0] if shape is None else shape
            tv = mpmath.mpf(t_value) if t_value is not None else mpmath.mpf(1)
            lo, hi = self.interval(tv, L_value)
            cap = self.capacity_mp(tv, Bv)
            Av = (lo + min(hi, cap)) / 2
            Cv = self.module.centre(tv, Av, L_value)
            out = self.evaluate(L_value, Bv, tv, Av, Cv)
            vectors = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})

    def unreached(self, L_value: int) -> str | None:
        """Why the construction has no estimate at ``L`` where the design knows it, else None
        (then a generic reason): the sweep lists that ``L`` as unreached with this reason, not as
        a row (:func:`bounds.search.unreached`: no proof that nothing counts)."""
        return None

    def screen(self, L_value: int, B_value) -> Params:
        """The parameters the float screen of the bisection judges: the construction itself
        (a task whose distractor provably changes nothing screens fewer inputs,
        :meth:`constructions.tasks.TaskDesign.screen`)."""
        return self.build(L_value, B_value)

    def evaluate(self, L_value, B_value, t_value, A_value, C_value) -> dict:
        """The construction evaluated in mpmath: name -> mpf or length-d object array of mpf."""
        values = self.compiled()(mpmath.mpf(B_value), mpmath.mpf(L_value), mpmath.mpf(t_value),
                                 mpmath.mpf(A_value), mpmath.mpf(C_value))
        return self._named(values)

    def _named(self, values) -> dict:
        """The compiled values by name, vectors repeated out to length ``d``."""
        out = {}
        d = self.cell.d
        for name, v in zip(self._names, values):
            if isinstance(v, (list, tuple)):
                head = [mpmath.mpf(x) for x in v]
                out[name] = np.array(head + head[-1:] * (d - len(head)), dtype=object)
            else:
                out[name] = mpmath.mpf(v)
        return out


class FootDesign(RegressionDesign):
    """Linear attention with post-RMSNorm: the one-sided arc (:mod:`constructions.one_sided`).

    The shape is ``lam`` (``t``) with the read-out angle ``psi`` as a sixth argument of the
    construction (:meth:`evaluate`), and the foot is the budget's, ``F(B) = sqrt(d)/B^2 +
    FOOT_SLACK``.  At budget ``B`` the construction counts iff some ``lam`` has
    ``R*(F(B), lam) < cap(B)`` and an interior (:func:`constructions.one_sided.slack`); ``R*``
    increases with ``F`` and ``F(B)`` decreases with ``B``, so the smallest such ``B`` is the
    fixed point of the decreasing map ``T(B) = budget(min_lam R*(F(B), lam))`` (:meth:`estimate`).

    The screen is the interval pass (:func:`verify.interval_pass.counts_surely`): ``e_s`` and
    ``e_a`` are nearly orthogonal (``cos = F/sqrt(F^2 + lam^2)``, about ``1e-13`` at ``L = 4096``),
    so the float64 forward pass would carry the foot and ``lam`` with a relative error far above
    the counting margin, while the pass takes the foot and ``lam`` from the parameters in ball
    arithmetic and is rigorous (at ``L = 16384`` about a tenth of the ``mp30`` judge's time).
    """

    def __init__(self, cell: Cell):
        super().__init__(cell)
        self._fixed = {}  # L -> the fixed point found by estimate (a guess for L + 1)

    def foot(self, B_value: float) -> float:
        """``F(B)``, the foot the construction uses at budget ``B`` (float)."""
        return laws.foot_distance(self.cell, float(B_value), laws.FLOAT) + 2.0**-FOOT_SLACK_BITS

    def _arguments(self) -> tuple:
        """The compiled construction's arguments: ``ARGS`` and the read-out angle ``psi``."""
        from constructions.symbols import ARGS, psi

        return ARGS + (psi,)

    def interval(self, t_value, L_value: int):
        raise ValueError("the one-sided arc's counting amplitudes depend on the read-out angle and "
                         "on the budget's foot: see constructions.one_sided")

    interval_float = interval

    def slack(self, t_value, L_value: int, B_value: float):
        from constructions import one_sided

        cap = float(self.capacity(1.0, B_value))
        return np.array([one_sided.slack(L_value, self.foot(B_value), float(v), cap)
                         for v in np.atleast_1d(t_value)])

    def best_shape(self, L_value: int, B_value: float):
        from constructions import one_sided

        return one_sided.best_shape(L_value, self.foot(B_value), float(self.capacity(1.0, B_value)))

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """The fixed point ``B* = T(B*)`` (class docstring), or None.

        ``T`` decreases, so ``B <= B*`` gives ``T(B) >= B*`` and the other way round: starting
        from ``T(oo)`` (the foot at ``FOOT_SLACK``), or from a guess ``g`` (the fixed point at
        ``L - 1`` times ``(L/(L-1))^p``, ``p`` the growth exponent, where it is known), every two
        iterates bracket ``B*`` (``g`` and ``T(g)`` too).  The
        iteration is kept while it contracts (at large ``L`` the foot barely moves ``R*``: two
        or three steps); where it does not (small ``L``, ``|T'| >= 1``, where it oscillates)
        the bracket is bisected on the sign of ``T(B) - B``.  It stops at ``rtol/10`` or at the
        noise of the float search for ``R*`` (about ``1e-9``).
        """
        from constructions import one_sided

        def T(b):
            foot = 2.0**-FOOT_SLACK_BITS if b is None else self.foot(b)
            R = one_sided.least_amplitude(L_value, foot)[1]
            return float(laws.budget(self.cell, R, laws.FLOAT)) if np.isfinite(R) else None

        before = self._fixed.get(L_value - 1)
        if before:
            lo = before * (L_value / (L_value - 1)) ** laws.theory_exponent(self.cell)
        else:
            lo = T(None)
            if lo is None or lo > hi_B:
                return None
            if lo == 0:  # L = 1: every budget counts
                return lo
        hi = T(lo)
        change = abs(hi - lo)
        while hi is not None and abs(hi - lo) > 0.1 * rtol * hi:
            nxt = T(hi)
            if nxt is None or abs(nxt - hi) > change / 2:
                break
            lo, hi, change = hi, nxt, abs(nxt - hi)
        if hi is None:
            return None
        lo, hi = min(lo, hi), max(lo, hi)
        for _ in range(60):
            if hi - lo <= 0.1 * rtol * hi:
                break
            mid = (lo + hi) / 2
            t = T(mid)
            if t is None:
                return None
            lo, hi = (mid, hi) if t > mid else (lo, mid)
        self._fixed[L_value] = hi
        return hi if hi <= hi_B else None

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The construction at budget ``B``: the best ``lam``, a read-out halfway between ``R*`` and
        the capacity (:func:`constructions.one_sided.readout`); where nothing counts, the least
        read-out, scaled to the capacity if it exceeds it (a parameter set within the budget that
        does not count)."""
        from constructions import one_sided

        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            foot, cap = self.foot(float(Bv)), float(self.capacity(1.0, float(Bv)))
            lam, _ = self.best_shape(L_value, float(Bv))
            if lam is None:
                lam = 1.0
            chosen = one_sided.readout(L_value, foot, lam, cap)
            if chosen is None:
                R, x = one_sided.min_norm(L_value, foot, lam)
                x = np.array([L_value / 2, 0.0, 1.0]) if x is None else x
                A = min(float(np.hypot(x[1], x[2])), cap) * (1 - 1e-12)
                chosen = (float(x[0]), A, float(np.arctan2(x[2], x[1])))
            Cv, Av, angle = chosen
            out = self.evaluate(L_value, Bv, lam, Av, Cv, angle)
            vectors = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})

    def evaluate(self, L_value, B_value, t_value, A_value, C_value, psi_value=mpmath.pi / 2) -> dict:
        """As :meth:`RegressionDesign.evaluate`, with the read-out angle ``psi`` (default
        ``pi/2``: ``top`` along the line, the direction the classification head reads)."""
        values = self.compiled()(mpmath.mpf(B_value), mpmath.mpf(L_value), mpmath.mpf(t_value),
                                 mpmath.mpf(A_value), mpmath.mpf(C_value), mpmath.mpf(psi_value))
        return self._named(values)


@functools.lru_cache(maxsize=None)
def design(cell: Cell) -> RegressionDesign:
    """The construction of a regression cell: the first entry of
    :data:`constructions.registry.REGRESSION` that serves it, built (its module imported on
    first use: the design modules build on this one); a ValueError naming
    :func:`constructions.refusals.refusal`'s reason where no entry does."""
    if cell.readout != "regression":
        raise ValueError("RegressionDesign is for regression cells")
    return registry.construct(cell)
