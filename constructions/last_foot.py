"""Linear attention with post-RMSNorm, the count task read at the last position (``eps = 0``).

**The outputs.**  At the last read of ``(s, a^n)``, ``n >= 1``, the query is ``e_a`` (post-norm:
``h = e``), the scores are ``tau <e_a, e_s>`` (one ``s``) and ``tau |e_a|^2`` (``n`` tokens
``a``), and the residual is

    r(n) = e_a + gam e_s + n k e_a = P + n Q,   gam = tau <e_a, e_s>,  k = tau |e_a|^2,

a line with ``Q = k e_a``.  Write ``a = |e_a|^2``, ``b = |e_s|^2`` and ``e_s = sqrt(b) (c along
+ s perp)`` with ``along = e_a/|e_a|``, ``perp`` a unit vector orthogonal to it and ``c^2 + s^2
= 1``.  Then ``P + n Q = k |e_a| ((n + F) along + lam perp')`` with ``perp' = sign(c s) perp``
and

    F = (sqrt(d) + b c^2)/a,   lam = b |c s|/a:

the one-sided arc of :mod:`constructions.one_sided` with its foot at ``n0 = -F`` (RMSNorm does
not centre, ``z(n) = sqrt(d) r(n)/|r(n)|``).  The count 0 is ``s`` read at ``s``: ``r(0) = (1 +
tau b) e_s``, and ``P + n Q = gam e_s`` at ``n_* = -1/k = -u``, ``u = sqrt(d)/a``: for ``gam >
0`` (``c > 0``) **the same arc at the parameter** ``-u``, between the foot and the count 1
(``F = u + D`` with ``D = b c^2/a > 0``).  So the counts ``n = 1..L`` are the one-sided arc
problem of ``L - 1`` (``m = n - 1 = 0..L-1``, the target shifted by the free ``w0``) with its
foot at ``m0 = -(F + 1)``, and the count 0 is one more point of the arc, at ``n = -u``.

**What the budget ties.**  Given the geometry ``(F, lam, u)`` with ``0 < u < F`` the
embeddings are determined up to the plane's rotation: ``a = sqrt(d)/u``, ``tan(angle) = s/c =
lam/D`` and ``b = a (D^2 + lam^2)/D``.  So a budget ``B`` realises it iff

    sqrt(d)/u <= B^2   and   sqrt(d) (D^2 + lam^2) <= B^2 u D,   D = F - u       (*)

(:func:`embedding_budget`).  At the BOS read only the foot is tied (``F > sqrt(d)/B^2``, the
shape ``lam`` free); here ``(*)`` also ties ``lam``: ``lam <= B^2 u/(2 sqrt(d))`` at best
(``D = lam``), so the count 0, which must sit within about half a count before the count 1
(``0 < u < ~1/2``), keeps ``lam`` below ``B^2/(4 sqrt d)``.  Bare, ``B ~ L^{3/2}`` and ``lam ~
L^{3/2}``, so ``(*)`` holds with a foot ``F`` of order ``d^{3/2}``, far below the counted range:
the rate 3/2 and, as ``F/L -> 0``, the BOS read's constant.  With a gain the capacity is
``sqrt(d) B^2``, so ``B^2 ~ L^{3/2} ~ lam``: ``(*)`` binds, at the same order as the read-out,
and moves the foot out to a distance of order ``lam``: the rate 3/4 with a larger constant.

**Construction** (:class:`LastFootDesign`).  With ``(top, across) = (e_1, q)``
(:func:`constructions.regression.axes`), ``along = sin psi top + cos psi across``, ``perp =
cos psi top - sin psi across``:

    e_a = sqrt(sqrt(d)/u) along,   e_s = sqrt(sqrt(d)/(u D)) (D along + lam perp),

so ``a = sqrt(d)/u``, ``c = D/sqrt(D^2 + lam^2) > 0``, ``b = sqrt(d) (D^2 + lam^2)/(u D)``,
and by the formulas above the foot is at ``-(u + D) = -F``, the distance ``lam`` and the count 0
at ``-u``: every residual is a positive multiple of ``lam perp + (n + F) along``.  The read-out
is the BOS arc's (:func:`constructions.steps.arc_readout_steps`: along ``top``, bare ``w = (A/
sqrt(d)) top``, with a gain ``w = g = S e_1``), and ``<top, v_n> = SHAPE`` of
:mod:`constructions.one_sided`, so

    y(n) = w0 + A (lam cos psi + (n + F) sin psi)/sqrt(lam^2 + (n + F)^2),

with ``(w0 - 1, A, psi)`` the one-sided read-out of ``L - 1`` at the foot ``F + 1``
(:func:`constructions.one_sided.readout`, halfway between ``R*`` and the capacity): it counts
``1..L``.  The count 0 is read correctly iff ``|y(-u)| < 1/2``; ``u`` is chosen (:func:`place_zero`)
where that holds with the largest margin among the ``u`` that ``(*)`` admits at ``B``.  The
geometry ``(F, lam)`` minimises the larger of the two budgets, the read-out's
``cap^{-1}(R*(L - 1, F + 1, lam))`` and ``(*)``'s at the least read-out (:meth:`LastFootDesign.geometry`,
a float search); at ``L = 1`` any two points count (``B_min = 0``, :meth:`LastFootDesign.build`).
Everything here is a float64 screen: the judge certifies every row in ball arithmetic.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import sympy

from constructions import laws, one_sided, registry, zoom
from constructions.cell import Cell, Params
from constructions.last_post import u_0
from constructions.regression import FootDesign, Step, _check_budget, _check_count, _vec, axes
from constructions.steps import arc_readout_steps
from constructions.symbols import ARGS, E_A, E_S, W0, C, F, psi, t

#: the relative steps of the shape beyond the least one that :meth:`LastFootDesign.choice` tries
SHAPE_STEPS = np.array([0.0, 1e-5, 1e-4, 1e-3, 1e-2, 3e-2, 1e-1])

#: ``D = F - u``: how far the count 0 lies beyond the foot
D_0 = sympy.Symbol("D_0", positive=True)


def built(cell: Cell) -> bool:
    """Whether ``cell`` is built here: :func:`constructions.registry.last_foot`."""
    return registry.builds("last_foot", cell)


def embedding_budget(d: int, F_value, lam_value, u_value):
    """The least ``B`` of ``(*)`` (module docstring): ``B^2 = sqrt(d) max(1, (D^2 + lam^2)/D)/u``
    with ``D = F - u`` (numpy, vectorised over ``u``; ``inf`` where ``u`` is not in ``(0, F)``)."""
    u = np.asarray(u_value, dtype=np.float64)
    D = F_value - u
    with np.errstate(divide="ignore", invalid="ignore"):
        sq = math.sqrt(d) * np.maximum(1.0, (D * D + lam_value**2) / D) / u
    return np.where((u > 0) & (D > 0), np.sqrt(sq), np.inf)


def zero_grid(F_value: float, points: int = 1500) -> np.ndarray:
    """Candidate ``u`` in ``(0, F)``: a fine grid of the first three counts before the count 1
    (where ``y(-u)`` can be near 0) and a grid of the whole interval."""
    near = np.linspace(0.0, min(F_value, 3.0), points + 2)[1:-1]
    far = F_value * np.linspace(0.0, 1.0, points + 2)[1:-1]
    return np.unique(np.concatenate([near, far]))


def zero_output(F_value: float, lam_value: float, readout, u):
    """``y(-u)`` for the read-out ``(w0, A, psi)`` (numpy; ``u = -n`` gives ``y(n)``)."""
    w0, A_value, angle = readout
    x = F_value - np.asarray(u, dtype=np.float64)
    return w0 + A_value * (lam_value * np.cos(angle) + x * np.sin(angle)) / np.hypot(lam_value, x)


def place_zero(d: int, F_value: float, lam_value: float, readout, B_value: float):
    """``u``: among the grid :func:`zero_grid` the one with ``|y(-u)| < 1/2`` and ``(*)`` within
    the budget (a hair inside) of the largest margin ``1/2 - |y(-u)|``; None where none."""
    u = zero_grid(F_value)
    margin = 0.5 - np.abs(zero_output(F_value, lam_value, readout, u))
    fits = embedding_budget(d, F_value, lam_value, u) <= B_value * (1 - 1e-9)
    margin = np.where(fits, margin, -np.inf)
    k = int(np.argmax(margin))
    return float(u[k]) if margin[k] > 1e-12 else None


def zero_budget(d: int, F_value: float, lam_value: float, readout) -> float:
    """The least ``(*)`` budget over the ``u`` of the grid that read the count 0 correctly."""
    u = zero_grid(F_value)
    ok = np.abs(zero_output(F_value, lam_value, readout, u)) < 0.5
    if not ok.any():
        return math.inf
    return float(embedding_budget(d, F_value, lam_value, u[ok]).min())


class LastFootDesign(FootDesign):
    """Linear attention with post-RMSNorm read at the last position (module docstring).  The
    compiled construction takes ``ARGS`` (``t = lam``, ``C = w0``) and the read-out angle ``psi``,
    the foot ``F`` and the count 0's ``u``.  At ``L = 2`` the least read-out of the counts
    ``1, 2`` has amplitude 0 (two points), which leaves the count 0 no place, so the rows use the
    construction of ``L = 3``, which counts to 2 as well (an upper bound on ``B_min(2)``).

    ``first`` is the first count on the one-sided arc (1: the counts ``1..L`` are the arc of ``L -
    1`` with the foot at ``F + 1``, targets shifted by 1) and ``smallest_L`` the least ``L`` whose
    construction is built (smaller ``L`` use it); a subclass that counts ``0..L`` on the arc
    (:class:`constructions.select_last_linear_post.SelectFootDesign`) sets ``first = 0``."""

    #: the first count on the one-sided arc; the least L built (class docstring)
    first = 1
    smallest_L = 3

    def __init__(self, cell: Cell):
        if not (built(cell) and cell.readout == "regression"):
            raise ValueError("LastFootDesign is for linear attention with post-RMSNorm (eps = 0), "
                             "the count task read last")
        super().__init__(cell)
        self._geometries = {}

    def _arguments(self) -> tuple:
        return ARGS + (psi, F, u_0)

    def steps(self) -> list[Step]:
        top, across = axes(self.cell)
        sd = sympy.sqrt(self.cell.d)
        along = sympy.sin(psi) * top + sympy.cos(psi) * across
        perp = sympy.cos(psi) * top - sympy.sin(psi) * across
        out = [Step(D_0, F - u_0, "how far the count 0 lies beyond the foot"),
               _vec(E_A, sympy.sqrt(sd / u_0) * along,
                    "the embedding of a: tau |e_a|^2 = 1/u puts the count 0 at -u", "e_a"),
               _vec(E_S, sympy.sqrt(sd / (u_0 * D_0)) * (D_0 * along + t * perp),
                    "the embedding of s: the foot at -(u + D) = -F and the line at distance lambda", "e_s")]
        out += arc_readout_steps(self.cell)
        out.append(Step(W0, C, "the read-out bias", "w0"))
        return out

    def evaluate(self, L_value, B_value, t_value, A_value, C_value, psi_value=mpmath.pi / 2,
                 F_value=1, u_value=mpmath.mpf(1) / 2) -> dict:
        """The construction in mpmath at ``(lam, A, w0, psi, F, u)``."""
        values = self.compiled()(*(mpmath.mpf(v) for v in (B_value, L_value, t_value, A_value, C_value,
                                                            psi_value, F_value, u_value)))
        return self._named(values)

    # ------------------------------------------------------------------ the geometry
    def _need(self, L_value: int, log_F: float, log_lam: float) -> float:
        """The budget the geometry ``(e^log_F, e^log_lam)`` needs at the least read-out: the
        larger of the read-out's and ``(*)``'s (float)."""
        Fv, lam, k = math.exp(log_F), math.exp(log_lam), self.first
        if one_sided.centre_point(L_value - k, Fv + k, lam)[0] <= 0:  # no interior
            return math.inf
        R, x = one_sided.min_norm(L_value - k, Fv + k, lam)
        if x is None or not np.isfinite(R):
            return math.inf
        readout = (float(x[0]) + k, float(np.hypot(x[1], x[2])), float(np.arctan2(x[2], x[1])))
        return max(float(laws.budget(self.cell, R, laws.FLOAT)), zero_budget(self.cell.d, Fv, lam, readout))

    def geometry(self, L_value: int):
        """``(F, lam)`` minimising :meth:`_need` (``L >= 2``): a log grid of feet with the shapes
        around each foot's least one, then a Nelder-Mead search in ``(log F, log lam)`` (cached)."""
        if L_value not in self._geometries:
            from scipy.optimize import minimize

            best = (math.inf, 0.0, 0.0)
            for Fv in np.geomspace(2.0**-6, 4.0 * (L_value + 2) ** 1.5 + 10.0, 41):
                lam0, _ = one_sided.least_amplitude(L_value - self.first, float(Fv) + self.first)
                if lam0 is None:
                    continue
                for lam in lam0 * np.geomspace(0.2, 5.0, 17):
                    v = self._need(L_value, math.log(Fv), math.log(lam))
                    if v < best[0]:
                        best = (v, math.log(Fv), math.log(lam))
            if not np.isfinite(best[0]):
                self._geometries[L_value] = None
            else:
                res = minimize(lambda z: self._need(L_value, z[0], z[1]), np.array(best[1:]),
                               method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-9 * best[0]})
                z = res.x if res.fun < best[0] else best[1:]
                self._geometries[L_value] = (math.exp(z[0]), math.exp(z[1]))
        return self._geometries[L_value]

    def best_shape(self, L_value: int, B_value: float):
        """``(lam, slack)`` of :meth:`geometry` at budget ``B`` (the read-out's slack)."""
        geo = self.geometry(L_value) if L_value >= 2 else None
        if geo is None:
            return None, -np.inf
        Fv, lam = geo
        k = self.first
        return lam, one_sided.slack(L_value - k, Fv + k, lam, float(self.capacity(1.0, B_value)))

    def choice(self, L_value: int, B_value: float):
        """``(lam, A, w0, psi, F, u)`` (:meth:`evaluate`'s order) at budget ``B`` (``L >= 2``), or None where nothing fits
        (float).  The foot is :meth:`geometry`'s and the shape its ``lam`` or a step of
        :data:`SHAPE_STEPS` beyond it (the least shape is at the edge of those with an interior):
        the one whose read-out (:func:`constructions.one_sided.readout`) and count 0
        (:func:`place_zero`) leave the largest smaller margin."""
        L_value, k = max(L_value, self.smallest_L), self.first  # smaller L: that of smallest_L
        geo = self.geometry(L_value)
        if geo is None:
            return None
        Fv, lam0 = geo
        cap = float(self.capacity(1.0, B_value))
        counts = np.arange(k, L_value + 1, dtype=np.float64)
        best, margin = None, 0.0
        for lam in lam0 * (1 + SHAPE_STEPS):
            got = one_sided.readout(L_value - k, Fv + k, float(lam), cap)
            if got is None:
                continue
            readout = (got[0] + k, got[1], got[2])
            u = place_zero(self.cell.d, Fv, float(lam), readout, float(B_value))
            if u is None:
                continue
            here = min(0.5 - np.abs(zero_output(Fv, float(lam), readout, -counts) - counts).max(),
                       0.5 - abs(float(zero_output(Fv, float(lam), readout, u))))
            if here > margin:
                best, margin = (float(lam), readout[1], readout[0], readout[2], Fv, u), here
        return best

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """The least budget at which :meth:`choice` finds a construction (a float screen), or None;
        0 at ``L = 1``."""
        if L_value == 1:
            return 0.0
        L_value = max(L_value, self.smallest_L)
        geo = self.geometry(L_value)
        if geo is None:
            return None
        start = self._need(L_value, math.log(geo[0]), math.log(geo[1]))
        if not np.isfinite(start) or start > hi_B:
            return None
        fits = lambda b: self.choice(L_value, b) is not None
        return zoom.threshold(fits, start * (1 - 1e-3), start * (1 + 1e-3), hi_B, rtol)

    def _one(self, Bv):
        """``L = 1``: ``u = 2 sqrt(d)/B^2`` (``|e_a|^2 = B^2/2``), ``D = lam = 1/2`` (``|e_s|^2 =
        B^2/2``), and the read-out along the chord of the two points with ``A`` the smaller of
        half the capacity and ``1/(2 |v_1 - v_{-u}|)``: ``y(1) - y(-u) = A |v_1 - v_{-u}| in (0,
        1/2]`` about ``w0 = 1/2``, so both are within 1/2 of their counts."""
        d = self.cell.d
        u = 2 * mpmath.sqrt(d) / Bv**2
        lam, Fv = mpmath.mpf(1) / 2, u + mpmath.mpf(1) / 2
        point = lambda x: mpmath.matrix([lam, x + Fv]) / mpmath.hypot(lam, x + Fv)
        chord = point(mpmath.mpf(1)) - point(-u)
        size = mpmath.norm(chord)
        A_value = min(self.capacity_mp(1, Bv) / 2, 1 / (2 * size))
        angle = mpmath.atan2(chord[1], chord[0])
        mid = (point(mpmath.mpf(1)) + point(self._one_below(u))) / 2
        w0 = mpmath.mpf(1) / 2 - A_value * (mid[0] * mpmath.cos(angle) + mid[1] * mpmath.sin(angle))
        return lam, A_value, w0, angle, Fv, u

    def _one_below(self, u):
        """``L = 1``: the point below the count 1 whose midpoint with it :meth:`_one` reads as
        ``1/2``: the count 0 at ``-u``."""
        return -u

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The construction at budget ``B``; where :meth:`choice` finds none, the geometry's least
        read-out scaled into the capacity and ``u`` at the budget's limit (a parameter set within
        the budget that does not count)."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            if L_value == 1:
                chosen = self._one(Bv)
            else:
                chosen = self.choice(L_value, float(Bv)) or self._fallback(L_value, Bv)
            out = self.evaluate(L_value, Bv, *chosen)
            vectors = {k: v for k, v in out.items() if k != "w0" and not k.startswith("_")}
            return Params(self.cell, vectors, {"w0": out["w0"]})

    def _fallback(self, L_value: int, Bv):
        """A geometry within the budget that does not count (:meth:`build`)."""
        k = self.first
        geo = self.geometry(L_value) or (1.0, 1.0)
        Fv, lam = geo
        R, x = one_sided.min_norm(L_value - k, Fv + k, lam)
        x = np.array([L_value / 2, 0.0, 1.0]) if x is None else x
        A_value = min(float(np.hypot(x[1], x[2])), float(self.capacity(1.0, float(Bv)))) * (1 - 1e-12)
        # the largest u of the grid within the budget, else F/2 with e_a shrunk (scaled below)
        u = zero_grid(Fv)
        fits = embedding_budget(self.cell.d, Fv, lam, u) <= float(Bv) * (1 - 1e-9)
        if fits.any():
            uv = float(u[fits][0])
            return lam, A_value, float(x[0]) + k, float(np.arctan2(x[2], x[1])), Fv, uv
        # no u fits: a larger foot and distance that (*) admits (lam = D, u = F/2)
        uv = max(4 * math.sqrt(self.cell.d) / float(Bv) ** 2, 1.0)
        lam = min(lam, float(Bv) ** 2 * uv / (8 * math.sqrt(self.cell.d)))
        return lam, A_value, float(x[0]) + k, float(np.arctan2(x[2], x[1])), uv + lam, uv
