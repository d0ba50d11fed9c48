"""Regression constructions for the ten regression cells, at a given budget ``B``.

Every regression cell reduces to a one-parameter family of read-outs of the count
(``y(n) = C + A * f_t(n)``) with an *amplitude* ``A`` and, except for linear attention without
post-norm, a *shape* ``t``:

=================  ==========================  ===========  ================================
family             read-out ``y(n)``           shape ``t``  amplitude ``A``
=================  ==========================  ===========  ================================
segment (softmax,  ``C + D n/(rho+n)``         ``rho``      ``D = <w, h_a - h_s>``
no/pre-norm)
arc (post-norm)    ``L/2 + b x/sqrt(lam^2+x^2)`` ``lam``    ``b`` (read-out of the arc)
line (linear,      ``C + k n``                 --           ``k = tau <h_s,h_a> <w,h_a>``
no/pre-norm)
=================  ==========================  ===========  ================================

For each ``t`` the counting amplitudes form an open interval ``(lo(t), hi(t))``
(:mod:`constructions.segment`, :mod:`constructions.arc`; for the line ``(1 - 1/L, 1 + 1/L)``),
and at budget ``B`` the cell can reach amplitudes up to a *capacity* ``cap(t, B)``:

* softmax/none: the values ``e_s, e_a`` in the ball of radius ``B`` with
  ``<e_s, e_s - e_a> = sigma = sqrt(d) log rho`` are at most ``X`` apart, where
  ``X^2 - B X - sigma = 0`` (``X = |e_a - e_s| <= <e_s, u> + |e_a| <= sigma/X + B`` for the unit
  ``u`` along ``e_s - e_a``), attained by ``e_a = B c``, ``e_s = -r c``; so ``cap = B X``.
* softmax/pre_learned: ``h = g * N(e) + beta``; ``|g * N(e)| <= |g| max|N(e)_i| <= B sqrt(d-1)``
  and the same argument gives ``X^2 - (1 + sqrt(d-1)) B X - sigma = 0``, capped at
  ``X <= 2 sqrt(d-1) B``; attained with ``g = B e_1`` and ``beta`` along ``e_1``.
* softmax/pre_bare: ``|h| = sqrt(d)`` so ``|h_s - h_a|^2 = 2 sigma`` and ``rho <= exp(2 sqrt(d))``;
  ``cap = B sqrt(2 sigma)`` (only ``w`` costs; embeddings are scale-free).
* post_bare: ``cap = sqrt(d) B`` (``z`` has norm ``sqrt(d)``); post_learned: the read-out sees
  ``v = w * g`` only and ``|w| |g| >= |v|_1 >= sqrt(d/(d-1)) |v projected|``, so
  ``cap = sqrt(d-1) B^2``, attained by ``w = g`` on one coordinate.  The embeddings can realise
  any arc with arbitrarily small norm (scale invariance), so they cost nothing.
* linear: ``cap = tau B^4`` (none), ``d B`` (pre_bare), ``tau B^4 (1 + sqrt(d-1))^3``
  (pre_learned) by Cauchy-Schwarz, attained by aligned vectors.

The cell counts to ``L`` at budget ``B`` iff some ``t`` has ``lo(t) < min(hi(t), cap(t, B))``.
:meth:`RegressionDesign.build` picks the ``t`` with the largest relative slack
(:meth:`RegressionDesign.best_shape`) and the middle amplitude, so the construction counts at every ``B`` above ``B_min`` and ``B_min`` of the
construction is ``B_min`` of the cell.  The parameter vectors are sympy expressions in the
symbols ``B, L, t, A, C`` (:meth:`RegressionDesign.symbolic`), evaluated by mpmath.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import sympy

from constructions import arc, basis, segment, zoom
from constructions.cell import Cell, Params

B, L, t, A, C = sympy.symbols("B L t A C", real=True)
_ARGS = (B, L, t, A, C)


def family(cell: Cell) -> str:
    """``segment``, ``arc`` or ``line`` (see the module docstring)."""
    if cell.post:
        return "arc"
    return "segment" if cell.attention == "softmax" else "line"


def segment_reach(cell: Cell, sqrt=sympy.sqrt):
    """Constants of the segment capacity for ``none`` and ``pre_learned`` (module docstring).

    Returns ``(c, kappa, reach)``: the value gap ``X = |h_s - h_a|`` obeys
    ``X^2 - c B X - sigma <= 0`` and ``X <= kappa B``, and the score gap ``sigma <= reach B^2``.
    ``sqrt`` chooses the number type (sympy by default; balls for the lower bounds).
    """
    if cell.norm == "none":
        return 1, 2, 2
    sq = sqrt(cell.d - 1)
    return 1 + sq, 2 * sq, 2 * sq * (sq + 1)


def _dot(u, v):
    return (u.T * v)[0, 0]


def _embedding_scale(cell: Cell):
    """Norm of the embeddings where LayerNorm makes them scale-free.

    With ``eps = 0`` any positive norm does: half the budget, at most 1/2.  With ``eps > 0``
    LayerNorm is only approximately scale-free, best for large inputs: half the budget.
    """
    return sympy.Min(B, 1) / 2 if cell.eps == 0 else B / 2


def _segment_vectors(cell: Cell) -> dict:
    d = cell.d
    sd, sq = sympy.sqrt(d), sympy.sqrt(d - 1)
    c1, perp, e1 = basis.c1(d), basis.perp(d), basis.e1(d)
    sigma = sd * sympy.log(t)
    te = _embedding_scale(cell)
    if cell.norm == "none":
        r = (-B + sympy.sqrt(B**2 + 4 * sigma)) / 2
        X = B + r
        e_a, e_s = B * c1, -r * c1
        w = (A / X) * c1
        return {"e_s": e_s, "e_a": e_a, "w": w, "w0": C - 2 * _dot(w, e_s),
                "_h_s": e_s, "_h_a": e_a}
    if cell.norm == "pre_bare":
        cos_g = 1 - sigma / d
        sin_g = sympy.sqrt(sympy.Max(0, 1 - cos_g**2))
        e_s, e_a = te * c1, te * (cos_g * c1 + sin_g * perp)
        h_s, h_a = sd * c1, sd * (cos_g * c1 + sin_g * perp)
        delta = h_s - h_a
        w = -(A / (2 * sigma)) * delta
        return {"e_s": e_s, "e_a": e_a, "w": w, "w0": C - _dot(w, e_s) - _dot(w, h_s),
                "_h_s": h_s, "_h_a": h_a}
    # pre_learned
    c, kappa, _ = segment_reach(cell)
    X = sympy.Min((c * B + sympy.sqrt(c**2 * B**2 + 4 * sigma)) / 2, kappa * B)
    a = X / B - sq
    beta1 = sigma / X - B * a
    alpha = a / sq
    e_s = te * (alpha * c1 + sympy.sqrt(sympy.Max(0, 1 - alpha**2)) * perp)
    e_a = -te * c1
    h_s, h_a = (B * a + beta1) * e1, (beta1 - B * sq) * e1
    w = -(A / X) * e1
    return {"e_s": e_s, "e_a": e_a, "g": B * e1, "beta": beta1 * e1, "w": w,
            "w0": C - _dot(w, e_s) - _dot(w, h_s), "_h_s": h_s, "_h_a": h_a}


def _arc_vectors(cell: Cell) -> dict:
    """Embeddings with ``centre(r(n))`` a positive multiple of ``lam perp + (n - L/2) c1``."""
    d = cell.d
    sd = sympy.sqrt(d)
    c1, perp, one, e1 = basis.c1(d), basis.perp(d), basis.one(d), basis.e1(d)
    tau = cell.tau
    v = t * perp - (L / 2) * c1
    vnorm = sympy.sqrt(t**2 + L**2 / 4)
    beta_ = _embedding_scale(cell)
    if cell.attention == "softmax":
        # r(n) ~ 2 rho e_s + n (e_s + e_a): put e_s = P = kappa v/(2 rho), e_s + e_a = Q = kappa c1;
        # rho = exp(tau <e_s, e_s - e_a>) = exp(ell) fixes kappa; ell keeps both norms <= beta_.
        ell = sympy.Min(1, beta_**2 / (sd * (1 / sympy.sqrt(2) + sympy.E * sympy.sqrt(2) / vnorm) ** 2))
        rho_e = sympy.exp(ell)
        kappa = sympy.sqrt(ell / (tau * (vnorm**2 / (2 * rho_e**2) + L / (4 * rho_e))))
        P = kappa * v / (2 * rho_e)
        e_s, e_a = P, kappa * c1 - P
    else:
        # r(n) = (1 + tau|e_s|^2) e_s + n tau <e_s,e_a> e_a with e_s = eps v + eta one,
        # e_a = mu c1 + eta one; mu solves tau mu (eta^2 - eps mu L/2) = (1 + tau |e_s|^2) eps.
        eta = beta_ / 2
        eps_ = sympy.Min(eta / (2 * vnorm), eta**2 / (4 * sympy.sqrt(L * sd)), eta**3 / (8 * sd))
        K = (1 + tau * (eps_**2 * vnorm**2 + eta**2)) * eps_
        mu = 2 * K / (tau * eta**2 + sympy.sqrt(tau**2 * eta**4 - 2 * tau * eps_ * L * K))
        e_s, e_a = eps_ * v + eta * one, mu * c1 + eta * one
    out = {"e_s": e_s, "e_a": e_a, "w0": L / 2}
    if cell.norm == "post_bare":
        out["w"] = (A / sd) * c1
    else:
        # w * g = (A/sqrt(d)) sqrt(d/(d-1)) e_1, split evenly between w and g
        side = sympy.sqrt(A / sympy.sqrt(d - 1))
        out.update(w=side * e1, g=side * e1, beta=sympy.zeros(d, 1))
    return out


def _line_vectors(cell: Cell) -> dict:
    d = cell.d
    sd, sq = sympy.sqrt(d), sympy.sqrt(d - 1)
    c1, e1 = basis.c1(d), basis.e1(d)
    tau = cell.tau
    if cell.norm == "none":
        e = B * c1
        out = {"e_s": e, "e_a": e, "w": (A / (tau * B**3)) * c1}
        h = e
    elif cell.norm == "pre_bare":
        e = _embedding_scale(cell) * c1
        h = sd * c1
        out = {"e_s": e, "e_a": e, "w": (A / d) * c1}
    else:
        e = _embedding_scale(cell) * c1
        H = B * (sq + 1)
        h = H * e1
        out = {"e_s": e, "e_a": e, "g": B * e1, "beta": B * e1, "w": (A / (tau * H**3)) * e1}
    # y(0) = <w, e_s> + tau <h_s, h_s> <w, h_s> + w0
    out["w0"] = C - _dot(out["w"], e) - tau * _dot(h, h) * _dot(out["w"], h)
    out["_h_s"] = out["_h_a"] = h
    return out


def _capacity(cell: Cell):
    """``cap(t, B)`` as a sympy expression (see the module docstring)."""
    d = cell.d
    sd, sq = sympy.sqrt(d), sympy.sqrt(d - 1)
    sigma = sd * sympy.log(t)
    fam = family(cell)
    if fam == "arc":
        return sd * B if cell.norm == "post_bare" else sq * B**2
    if fam == "line":
        return {"none": B**4 / sd, "pre_bare": d * B,
                "pre_learned": B**4 * (1 + sq) ** 3 / sd}[cell.norm]
    if cell.norm == "pre_bare":
        return B * sympy.sqrt(2 * sigma)
    c, kappa, _ = segment_reach(cell)
    root = (c * B + sympy.sqrt(c**2 * B**2 + 4 * sigma)) / 2
    # for no norm the root never exceeds 2B inside the domain (sigma <= 2 B^2)
    return B * (root if cell.norm == "none" else sympy.Min(root, kappa * B))


def _relative_slack(lo, top):
    """``(top - lo)/lo``; where ``lo = 0`` (every amplitude > 0 counts) ``+inf`` if ``top > 0``."""
    lo, top = np.asarray(lo, dtype=float), np.asarray(top, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(lo > 0, (top - lo) / np.where(lo > 0, lo, 1.0), np.where(top > 0, np.inf, -np.inf))
    return np.nan_to_num(s, nan=-np.inf, posinf=np.inf)


class RegressionDesign:
    """The optimal regression construction of one cell (see the module docstring)."""

    def __init__(self, cell: Cell):
        if cell.readout != "regression":
            raise ValueError("RegressionDesign is for regression cells")
        self.cell = cell
        self.family = family(cell)
        self.capacity_expr = _capacity(cell)
        self._cap = sympy.lambdify((t, B), self.capacity_expr, "numpy")
        self.capacity_mp = sympy.lambdify((t, B), self.capacity_expr, "mpmath")
        self._build = None
        self._scans = {}

    # ----------------------------------------------------------------- symbolic side
    def symbolic(self) -> dict:
        """Every trainable vector and free scalar as a sympy expression in ``B, L, t, A, C``.

        Keys starting with ``_`` are derived quantities, not parameters: the token values
        ``_h_s, _h_a`` (after pre-norm) of the segment and line families.
        """
        builder = {"segment": _segment_vectors, "arc": _arc_vectors, "line": _line_vectors}
        return builder[self.family](self.cell)

    def compiled(self):
        """The construction lambdified for mpmath (built once, with common subexpressions).

        Every vector is a combination of :mod:`constructions.basis` vectors, whose coordinates
        ``3..d-1`` all agree; so only the first ``min(d, 4)`` coordinates are compiled and
        :meth:`evaluate` repeats the last of them (the agreement is checked on the sympy
        expressions).  This keeps large ``d`` cheap.
        """
        if self._build is None:
            exprs = self.symbolic()
            self._names = list(exprs)
            k = min(self.cell.d, 4)
            heads = []
            for name in self._names:
                e = exprs[name]
                if isinstance(e, sympy.MatrixBase):
                    if any(e[i] != e[k - 1] for i in range(k, e.shape[0])):
                        raise AssertionError(f"{name}: coordinates {k - 1}..d-1 differ")
                    e = e[:k, :]
                heads.append(e)
            self._build = sympy.lambdify(_ARGS, heads, "mpmath", cse=True)
        return self._build

    # ----------------------------------------------------------------- the reduced problem
    def domain(self, L_value: int, B_value: float):
        """Interval of admissible shapes ``t`` at budget ``B`` (None: no shape parameter).

        segment: ``rho >= 1`` and ``sigma = sqrt(d) log rho`` at most ``2 B^2`` (none),
        ``2 sqrt(d-1)(sqrt(d-1)+1) B^2`` (pre_learned) or ``2 d`` (pre_bare), and not beyond
        ``1e4 (L+2)^2`` where the segment only gets costlier (``D_lo(rho) >= rho (L-1)/L``);
        arc: ``lam`` between ``1e-3`` and ``10 (L+2)^{3/2} + 10``.
        """
        d = self.cell.d
        if self.family == "line":
            return None
        if self.family == "arc":
            return (1e-3, 10.0 * (L_value + 2) ** 1.5 + 10.0)
        if self.cell.norm == "pre_bare":
            sigma_max = 2 * d
        else:
            sigma_max = float(segment_reach(self.cell, math.sqrt)[2]) * B_value**2
        log_hi = sigma_max / math.sqrt(d)
        if self.cell.norm == "pre_bare" and d == 2:
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
        if self.family == "line":
            return mpmath.mpf(1) - mpmath.mpf(1) / L_value, mpmath.mpf(1) + mpmath.mpf(1) / L_value
        mod = segment if self.family == "segment" else arc
        return mod.interval(t_value, L_value)

    def interval_float(self, t_value, L_value: int):
        if self.family == "line":
            return np.full(np.shape(t_value), 1 - 1 / L_value), np.full(np.shape(t_value), 1 + 1 / L_value)
        mod = segment if self.family == "segment" else arc
        return mod.interval_float(t_value, L_value)

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
            while up_B / lo_B > 1 + tol:
                mid = math.sqrt(lo_B * up_B)
                if feasible(mid):
                    up_B = mid
                else:
                    lo_B = mid
            # the zoomed search can only do better than the grid: step down until it fails
            lo_B = up_B / 1.01
            while lo_B > 1e-12 and fine(lo_B):
                up_B, lo_B = lo_B, lo_B / 1.01
        return up_B

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The construction at budget ``B`` for counting to ``L``: best shape, middle amplitude."""
        t_value, _ = self.best_shape(L_value, float(B_value))
        with mpmath.workdps(dps):
            Bv = mpmath.mpf(B_value)
            tv = mpmath.mpf(t_value) if t_value is not None else mpmath.mpf(1)
            lo, hi = self.interval(tv, L_value)
            cap = self.capacity_mp(tv, Bv)
            Av = (lo + min(hi, cap)) / 2
            if self.family == "segment":
                Cv = segment.centre(tv, Av, L_value)
            elif self.family == "line":
                Cv = -(Av - 1) * L_value / 2
            else:
                Cv = mpmath.mpf(L_value) / 2
            out = self.evaluate(L_value, Bv, tv, Av, Cv)
            vectors = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})

    def evaluate(self, L_value, B_value, t_value, A_value, C_value) -> dict:
        """The symbolic construction evaluated in mpmath: name -> mpf or object array of mpf."""
        values = self.compiled()(mpmath.mpf(B_value), mpmath.mpf(L_value), mpmath.mpf(t_value),
                                 mpmath.mpf(A_value), mpmath.mpf(C_value))
        out = {}
        d = self.cell.d
        for name, v in zip(self._names, values):
            if hasattr(v, "tolist"):
                head = [mpmath.mpf(x) for x in np.array(v.tolist(), dtype=object).ravel()]
                out[name] = np.array(head + head[-1:] * (d - len(head)), dtype=object)
            else:
                out[name] = mpmath.mpf(v)
        return out


@functools.lru_cache(maxsize=None)
def design(cell: Cell) -> RegressionDesign:
    return RegressionDesign(cell)
