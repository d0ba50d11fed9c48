"""Softmax attention with post-norm, the count task read at the last position: the shifted arc.

**The outputs.**  At the last read of ``(s, a^n)``, ``n >= 1``, the query is ``e_a`` (post-norm:
``h = e``), the weights are ``w_s = exp(tau <e_a, e_s>)`` (one ``s``) and ``w_a = exp(tau |e_a|^2)``
(``n`` tokens ``a``), and the residual is ``e_a + A``:

    Z r(n) = Z e_a + w_s e_s + n w_a e_a = w_s ((e_s + e_a) + n 2 rho e_a),
    rho = w_a/w_s = exp(tau <e_a, e_a - e_s>),   Z = w_s + n w_a > 0.

With ``eps = 0`` the norm (LayerNorm or RMSNorm) is invariant under the positive factor
``w_s/Z``, so ``z(n) = N(P + n Q)`` with ``P = e_s + e_a`` and ``Q = 2 rho e_a``: the projective
arc of :mod:`constructions.arc`, as at the BOS read (where ``P = 2 e_s``, ``Q = (e_s + e_a)/rho``).
The count ``n = 0`` is ``s`` read at ``s``: ``r(0) = 2 e_s`` and ``e_s = P - Q/(2 rho)``, so
``z(0) = N(P + n_* Q)``: **the same arc at the parameter** ``n_* = -1/(2 rho)``.  The counts
``n = 1..L`` are the BOS arc problem of ``L - 1`` (``m = n - 1 = 0..L-1``, the target shifted by
the free ``w0``), and ``n = 0`` is one more point of the arc, before the first, placed by ``rho``.

**Consequences.**  (i) A parameter set counting to ``L`` at the last read counts ``1..L`` on an
arc, so its read-out amplitude is at least ``R*(L-1)`` (:mod:`bounds.arc_lower`) and
``B_min^last(L) >= B_min^BOS(L-1)`` (:func:`bounds.lower.last_post_lower`).  (ii) The
construction below reaches ``B_min^BOS(L-1)`` wherever the extra point fits (module
construction), so the rate (``L^{3/2}`` bare, ``L^{3/4}`` with a gain) and the leading
constant are those of the BOS read, and against the BOS read at the same ``L`` the cost is
``B^last(L)/B^BOS(L) -> ((L-1)/L)^p``, ``p`` the exponent: the last read is cheaper by about
``p/L``, because the count ``0`` no longer sits on the counting arc's uniform grid.

**Construction.**  The symmetric arc of ``L - 1`` centred on ``c = (L+1)/2`` (``c = 1/2`` at
``L = 1``): the residual line ``V + n top`` with ``V = lam across - c top`` (:func:`constructions.
regression.axes`; for LayerNorm both are centred, for RMSNorm any plane does), read out as at
the BOS read (:func:`constructions.regression._arc_steps`: ``w = (A/sqrt(d)) top`` bare,
``w = g = S e_1`` with ``S^2 = A/(sqrt(d) a)`` with a gain, ``beta = 0``), ``w0 = c``:

    y(n) = c + A (n - c)/sqrt(lam^2 + (n - c)^2).

The amplitudes counting ``1..L`` are the BOS interval of ``L - 1`` (:func:`constructions.arc.interval`);
at ``L = 1`` every ``0 < A < 1`` counts both points (``|y(1) - 1| = |A/(2 s) - 1/2|`` and
``|y(-u)| = |1/2 - A x/s|`` with ``0 < x/s < 1``).  The embeddings, for ``u = -n_*`` in ``(0, 1/2)``:

    e_a = kappa u top,   e_s = kappa (V - u top),
    kappa^2 = sqrt(d) log(1/(2u)) / (u (2u + c)).

Then ``e_s + e_a = kappa V`` and ``<e_a, e_a - e_s> = kappa^2 u (2u + c)`` (``<top, V> = -c``,
``|top| = 1``), so ``rho = exp(tau kappa^2 u (2u + c)) = 1/(2u)``: ``Q = 2 rho e_a = kappa top``,
``P + n Q = kappa (V + n top)``, and ``r(0) = 2 e_s = 2 kappa (V - u top)``, the line at ``-u``:
every residual is a positive multiple of a point of ``V + n top``, exactly.  ``u`` is chosen in
the window of ``n_*`` that puts ``y(n_*)`` within ``1/2`` of ``0`` (:func:`offset_window`), in
``(0, 1/2)`` (``rho > 1``: this geometry has ``<e_a, e_a - e_s> > 0``), and where
``|e_s| = kappa sqrt(lam^2 + (c + u)^2) <= B`` (``|e_a| < |e_s|``); ``kappa -> 0`` as
``u -> 1/2``, so near ``n_* = -1/2`` the embeddings cost nothing.  The construction thus
counts iff the BOS problem of ``L - 1`` does at the shape and the window meets
``(max(u_B, u_lo), u_hi)``; the judge certifies every row.  Where the window is empty at the
BOS optimum of ``L - 1`` (the smallest ``L``) the bisection steps up: there ``B_min`` is the
construction's and ``B_lower`` the bound of ``L - 1``.
"""

from __future__ import annotations

import mpmath
import numpy as np
import sympy

from constructions import arc, laws, zoom
from constructions.basis import FrameVector
from constructions.cell import Cell, Params
from constructions.regression import (RegressionDesign, Step, _check_budget, _check_count, _temperature,
                                      _vec, axes, program)
from constructions.symbols import (ARGS, BETA, E1, E_A, E_S, G, V, W, W0, A, B, C, S, kappa, t, tau)

#: ``u = -n_*``, the parameter of the count 0 before the arc's origin (a sixth argument)
u_0 = sympy.Symbol("u_0", positive=True)


def centre(L_value: int):
    """``c``: the centre of the counts ``1..L``, ``(L+1)/2`` (``1/2`` at ``L = 1``), exact."""
    return mpmath.mpf(L_value + 1) / 2 if L_value >= 2 else mpmath.mpf(1) / 2


def zero_interval(lam_value, L_value: int, sqrt):
    """``(A_lo, A_hi)``: the amplitudes with ``y(-1/2) < 1/2`` and ``y(0) > -1/2`` (``L >= 2``;
    plain arithmetic with its ``sqrt``).  ``y`` increases, so exactly then some ``u`` in
    ``(0, 1/2)`` has ``|y(-u)| < 1/2``: with ``s_x = sqrt(lam^2 + x^2)``, ``y(-1/2) = c - A X/s_X``
    (``X = c + 1/2 = (L+2)/2``) is below ``1/2`` iff ``A > (L/2) s_X/X``, and ``y(0) = c - A c/s_c``
    is above ``-1/2`` iff ``A < (c + 1/2) s_c/c``."""
    c = (L_value + 1) / 2
    X = c + 1 / 2
    return (L_value / 2) * sqrt(lam_value**2 + X**2) / X, X * sqrt(lam_value**2 + c**2) / c


def interval(lam_value, L_value: int):
    """``(A_lo, A_hi)``: the amplitudes counting ``1..L`` with room for the count 0 (mpmath): the
    BOS arc interval of ``L - 1`` within :func:`zero_interval`; ``(0, 1)`` at ``L = 1`` (module
    docstring)."""
    if L_value == 1:
        return mpmath.mpf(0), mpmath.mpf(1)
    lo, hi = arc.interval(lam_value, L_value - 1)
    z_lo, z_hi = zero_interval(mpmath.mpf(lam_value), mpmath.mpf(L_value), mpmath.sqrt)
    return max(lo, z_lo), min(hi, z_hi)


def interval_float(lam_value, L_value: int):
    """Vectorised float64 :func:`interval` (a screen)."""
    lv = np.asarray(lam_value, dtype=np.float64)
    if L_value == 1:
        return np.zeros(lv.shape), np.ones(lv.shape)
    lo, hi = arc.interval_float(lv, L_value - 1)
    z_lo, z_hi = zero_interval(lv, float(L_value), np.sqrt)
    return np.maximum(lo, z_lo), np.minimum(hi, z_hi)


def offset_window(lam_value, A_value, L_value: int):
    """``(u_lo, u_hi)``: the ``u = -n_*`` in ``(0, 1/2)`` with ``|y(-u)| < 1/2`` (mpmath; empty
    when ``u_lo >= u_hi``).  ``y`` increases (``A > 0``), so ``|y(n)| < 1/2`` on ``(n(-1/2),
    n(1/2))`` with ``n(v) = c + lam q/sqrt(1 - q^2)``, ``q = (v - c)/A`` (``-inf`` where ``q <= -1``)."""
    c = centre(L_value)
    lam, A_v = mpmath.mpf(lam_value), mpmath.mpf(A_value)
    half = mpmath.mpf(1) / 2

    def n_at(v):
        q = (v - c) / A_v
        if q <= -1:
            return -mpmath.inf
        if q >= 1:
            return mpmath.inf
        return c + lam * q / mpmath.sqrt(1 - q * q)

    lo_n, hi_n = n_at(-half), n_at(half)
    return max(mpmath.mpf(0), -hi_n), min(half, -lo_n)


def embedding_norm(cell: Cell, lam_value, L_value: int, u_value):
    """``|e_s| = kappa sqrt(lam^2 + (c + u)^2)``, the larger embedding (mpmath)."""
    c, u = centre(L_value), mpmath.mpf(u_value)
    kap2 = mpmath.sqrt(cell.d) * mpmath.log(1 / (2 * u)) / (u * (2 * u + c))
    return mpmath.sqrt(kap2 * (mpmath.mpf(lam_value) ** 2 + (c + u) ** 2))


def choose_u(cell: Cell, lam_value, A_value, L_value: int, B_value):
    """``u``: the middle of the window :func:`offset_window` above the budget's limit ``u_B``
    (the smallest ``u`` with ``|e_s| <= B``, by bisection: ``|e_s| -> 0`` as ``u -> 1/2``), or
    ``None`` where that leaves nothing (mpmath)."""
    u_lo, u_hi = offset_window(lam_value, A_value, L_value)
    if not u_lo < u_hi:
        return None
    fits = lambda u: embedding_norm(cell, lam_value, L_value, u) <= B_value
    a, b = mpmath.mpf(0), mpmath.mpf(1) / 2  # b: |e_s| -> 0, fits in the limit
    b = b - (b - u_lo) * mpmath.mpf(2) ** -40
    if not fits(b):
        return None
    for _ in range(80):
        m = (a + b) / 2
        a, b = (a, m) if fits(m) else (m, b)
    lo = max(u_lo, b)
    if not lo < u_hi:
        return None
    u = (lo + u_hi) / 2
    for _ in range(60):  # |e_s| is not monotone in u everywhere: stay within the budget
        if fits(u):
            return u
        lo, u = u, (u + u_hi) / 2
    return None


class LastArcDesign(RegressionDesign):
    """Softmax attention with post-norm read at the last position (module docstring): the
    symmetric arc of ``L - 1`` on the counts ``1..L``, the count ``0`` on its extension at
    ``n_* = -u``; ``u`` is a sixth argument of the construction (:meth:`evaluate`)."""

    def __init__(self, cell: Cell):
        if not (cell.read.last and cell.attention == "softmax" and cell.post and cell.eps == 0
                and cell.readout == "regression" and not cell.distractor and cell.d >= laws.smallest_d(cell)):
            raise ValueError("LastArcDesign is for softmax attention with post-norm (eps = 0), the count "
                             "task read last")
        super().__init__(cell)

    def steps(self) -> list[Step]:
        cell = self.cell
        d = cell.d
        sd = sympy.sqrt(d)
        top, across = axes(cell)
        out = [_temperature(cell),
               _vec(V, t * across - C * top, "the residual line at n = 0, up to scale: V + n top"),
               Step(kappa, sympy.sqrt(sd * sympy.log(1 / (2 * u_0)) / (u_0 * (2 * u_0 + C))),
                    "the scale of the embeddings: rho = exp(tau <e_a, e_a - e_s>) = 1/(2u)"),
               _vec(E_A, kappa * u_0 * top, "the embedding of a: 2 rho e_a = kappa top", "e_a"),
               _vec(E_S, kappa * (V - u_0 * top), "the embedding of s: e_s + e_a = kappa V, and 2 e_s "
                    "is the line at n = -u", "e_s")]
        if not cell.affine.gain:
            out.append(_vec(W, (A / sd) * top, f"the read-out, along {top}", "w"))
        else:
            reach = cell.kind.axis_reach(d)
            out += [Step(S, sympy.sqrt(A / (sd * reach)), "the norm of w and of g, which share the amplitude"),
                    _vec(W, S * E1, "the read-out", "w"),
                    _vec(G, S * E1, f"the {cell.kind.name} gain", "g")]
            if cell.affine.bias:
                out.append(_vec(BETA, sympy.Integer(0), f"the {cell.kind.name} bias", "beta"))
        out.append(Step(W0, C, "the read-out bias, the centre of the counts 1..L", "w0"))
        return out

    def compiled(self):
        """The construction lambdified for mpmath in ``ARGS`` and ``u``."""
        if self._build is None:
            assignments, out = program(self.steps(), self.cell.d)
            self._names = list(out)
            heads = [v.coordinates() if isinstance(v, FrameVector) else v for v in out.values()]
            self._build = sympy.lambdify(ARGS + (u_0,), heads, "mpmath", cse=lambda exprs: (assignments, exprs))
        return self._build

    def evaluate(self, L_value, B_value, t_value, A_value, C_value, u_value=mpmath.mpf(1) / 4) -> dict:
        """As :meth:`RegressionDesign.evaluate`, with ``u = -n_*`` (default ``1/4``)."""
        values = self.compiled()(mpmath.mpf(B_value), mpmath.mpf(L_value), mpmath.mpf(t_value),
                                 mpmath.mpf(A_value), mpmath.mpf(C_value), mpmath.mpf(u_value))
        return self._named(values)

    def interval(self, t_value, L_value: int):
        return interval(t_value, L_value)

    def interval_float(self, t_value, L_value: int):
        return interval_float(t_value, L_value)

    def _point(self, L_value: int, Bv):
        """``(lam, A, c, u)`` at budget ``B`` (mpmath): the best shape, the middle amplitude, the
        centre and :func:`choose_u` (None where no ``u`` fits)."""
        lam = mpmath.mpf(self.best_shape(L_value, float(Bv))[0])
        lo, hi = self.interval(lam, L_value)
        Av = (lo + min(hi, self.capacity_mp(lam, Bv))) / 2
        return lam, Av, centre(L_value), choose_u(self.cell, lam, Av, L_value, Bv)

    def _fits(self, L_value: int, B_value: float) -> bool:
        """Whether the count 0 finds its place at budget ``B`` (a screen at 20 digits)."""
        with mpmath.workdps(20):
            return self._point(L_value, mpmath.mpf(B_value))[3] is not None

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """The BOS problem of ``L - 1`` (:meth:`RegressionDesign.estimate` on :meth:`interval`),
        then up to where the count 0 fits as well (:meth:`_fits`)."""
        est = super().estimate(L_value, hi_B, rtol)
        if est is None or self._fits(L_value, est):
            return est
        lo_B, up_B = est, est * 2
        while not self._fits(L_value, up_B):
            lo_B, up_B = up_B, up_B * 2
            if up_B > hi_B:
                return None
        return zoom.bisect_up(lambda b: self._fits(L_value, b), lo_B, up_B, rtol)[1]

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The construction at budget ``B``; where no ``u`` fits, ``u`` at the budget's limit
        side of ``1/2`` (a parameter set within the budget that does not count)."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            lam, Av, c, u = self._point(L_value, Bv)
            if u is None:
                u = mpmath.mpf(1) / 2 - mpmath.mpf(2) ** -60
            out = self.evaluate(L_value, Bv, lam, Av, c, u)
            vectors = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})
