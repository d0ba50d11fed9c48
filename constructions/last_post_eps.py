r"""Post-norm with ``eps > 0`` read last: the arcs of ``eps = 0`` lifted to ``R^{d+1}``.

Softmax attention, the count task (:class:`EpsArcDesign`, below; either kind, every affine,
LayerNorm ``d >= 3``) and the select task with post-LayerNorm (:class:`EpsSelectArcDesign`);
linear attention with post-LayerNorm (:class:`LinearEpsArcDesign`) and with post-RMSNorm (the
one-sided arc, :class:`EpsFootDesign`).  Each class docstring proves its outputs.

*The outputs are an arc in one more dimension.*  At the last read (:mod:`constructions.last_post`)
the residual of ``(s, a^n)`` is ``r(n) = (P + n Q)/(1 + n rho)`` with ``P = e_s + e_a``, ``Q = 2 rho
e_a``, ``rho = exp(tau <e_a, e_a - e_s>)``, for ``n >= 1``, and the count 0 is the same formula at
``n_* = -1/(2 rho)`` (``r(0) = 2 e_s`` and ``1 + n_* rho = 1/2``).  With ``eps > 0`` the norm
``N(x) = x_c/sqrt(|x_c|^2/d + eps) = sqrt(d) x_c/|(x_c, s)|``, ``s = sqrt(d eps)`` and ``(x_c, s)`` in
``R^{d+1}``, is no longer invariant under the factor ``1/(1 + n rho)``, but since that factor is
positive at every ``n`` in ``{n_*, 1, ..., L}``,

    N(r(n)) = sqrt(d) (P_c + n Q_c)/|X(n)|,   X(n) = X_0 + n X_1,  X_0 = (P_c, s),  X_1 = (Q_c, s rho),

exactly: the outputs are the first ``d`` coordinates of the points of a line of ``R^{d+1}``
scaled to the sphere of radius ``sqrt(d)``, an arc again (``eps`` enters as a last coordinate that
both embeddings carry as ``s/2`` and the read-out as 0; the scores do not see it, since it adds
the same ``s^2/4`` to ``<e_a, e_a>`` and ``<e_a, e_s>``).

*Construction.*  Take the symmetric arc of :class:`constructions.last_post.LastArcDesign` (shape
``lam``, centre ``c``, amplitude ``A``, the count 0 at ``n_* = -u``, ``rho = 1/(2u)``) on a plane of
``R^{d+1}`` tilted towards the last axis: unit vectors, with ``top, across`` the kind's axes
(:func:`constructions.regression.axes`),

    T = (tau_1 top + tau_2 across, theta),   N = (nu across, phi),
    theta = s/(2 u kappa),   phi = s (2u + c)/(2 u kappa lam),   nu = sqrt(1 - phi^2),
    tau_2 = -theta phi/nu,   tau_1 = sqrt(1 - theta^2/(1 - phi^2)),

orthonormal (``tau_2 nu + theta phi = 0``; ``tau_1^2 + tau_2^2 + theta^2 = 1``), which needs
``theta^2 + phi^2 < 1``.  The centred embeddings are

    e_a = kappa u T_d + al one,   e_s = kappa (lam N_d - (c + u) T_d) + be one

(``T_d, N_d`` the first ``d`` coordinates; ``one`` the unit constant vector, LayerNorm only; RMSNorm
has ``al = be = 0``).  Then ``X_1 = (2 rho kappa u T_d, s rho) = kappa T`` (``2 rho u = 1``, ``kappa u
theta = s/2``) and ``X_0 = (kappa (lam N_d - c T_d), s) = kappa (lam N - c T)`` (``kappa (lam phi -
c theta) = s``), so ``X(n) = kappa (lam N + (n - c) T)``: with ``|X(n)| = kappa sqrt(lam^2 + (n -
c)^2)`` every output is

    N(r(n)) = sqrt(d) (lam nu across + (n - c)(tau_1 top + tau_2 across))/sqrt(lam^2 + (n - c)^2).

The read-out of :func:`constructions.steps.arc_readout_steps` at the amplitude ``A/tau_1`` reads
only the part along ``top`` (bare ``w`` along ``top``; with a gain ``w = g = S e_1``, and ``e_1`` has
no part along ``across``), so with ``w0 = c`` the outputs are exactly ``y(n) = c + A (n - c)/sqrt(lam^2
+ (n - c)^2)`` at ``n = -u, 1, ..., L``: those of ``eps = 0``, which count iff ``A`` is in the arc's
interval (:func:`constructions.last_post.interval`) and ``u`` in its window
(:func:`constructions.last_post.offset_window`).  ``eps`` costs the read-out the factor ``1/tau_1``.

*The scale.*  ``<e_a, e_a - e_s> = kappa^2 u ((2u + c)(1 - theta^2) + lam theta phi) + al (al - be)
= kappa^2 u (2u + c) - M``, ``M = al (be - al)`` (the ``theta``-terms cancel: both are ``(2u + c)
s^2/(4u)``), and ``rho = 1/(2u)`` asks ``kappa^2 u (2u + c) - M = sqrt(d) log(1/(2u))``.  RMSNorm:
``M = 0``, ``kappa`` is that of ``eps = 0``, ``kappa_0^2 = sqrt(d) log(1/(2u))/(u (2u + c))``, and the
tilt needs ``theta < 1``, ``sqrt(d) eps (2u + c) < 4 u log(1/(2u))``: since ``4 u log(1/(2u)) <= 2/e``
this geometry has no ``u`` once ``sqrt(d) eps (2u + c) >= 2/e``, about ``L >= 1.47/(sqrt(d) eps)``
(:meth:`EpsArcDesign.estimate` is None there, and :meth:`EpsArcDesign.unreached` says why).  LayerNorm: ``one`` is removed by the norm, so
``kappa >= kappa_0`` is free, ``al = sqrt(M)``, ``be = 2 sqrt(M)``; ``kappa`` is the largest with
``|e_s| = B (1 - 2^-20)``, where ``|e_s|^2 = kappa^2 (lam^2 + (c + u)^2) - s^2/4 + 4 M`` (the lifted
``e_s`` has length ``kappa sqrt(lam^2 + (c + u)^2)`` and last coordinate ``s/2``), or ``kappa_0`` if that
is smaller; a larger ``kappa`` tilts the plane less.  ``|e_a|^2 = kappa^2 u^2 - s^2/4 + M < |e_s|^2``.

At budget ``B`` the construction takes the point of zoomed grids over ``(lam, u)``
(:meth:`EpsArcDesign._choose`) maximising the smallest of the margins (``u``
inside its window, ``|e_s| <= B``, the amplitude's relative slack with the capacity cut by
``tau_1``), the amplitude the middle of the interval; a float
screen, the judge certifies every row with the cell's ``eps``.  The proven ``B_lower`` is that of
``eps = 0``, :func:`bounds.lower.last_post_lower` (the arc problem of ``L - 1`` on the lifted line:
its proof covers every ``eps``).
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np

from constructions import last_post, registry, zoom
from constructions.cell import Cell, Params
from constructions.last_foot import LastFootDesign
from constructions.regression import FootDesign, RegressionDesign, _check_budget, _check_count

#: the points of the grids over ``u`` in ``(0, 1/2)`` and over ``log lam``, the rounds zoomed
#: around the best point, and the factor of the local box of ``lam`` (:meth:`EpsArcDesign._choose`)
U_POINTS = 129
LAM_POINTS = 65
ROUNDS = 6
LAM_SPAN = 8.0
#: the shares of the capacity the one-sided read-out is placed below (:func:`_foot_choice`: halfway
#: between ``R*`` and the share; 1 is the ``eps = 0`` design's)
CAP_SHARES = (1.0, 0.8, 0.6, 0.45, 0.3, 0.2)
#: the share of the budget the embeddings leave unused (LayerNorm's ``|e_s| = B (1 - SPARE)``)
SPARE = 2.0**-20



def _tilted_window(c, lam, u, theta2, phi2, lo, hi, cap):
    """The float screen of the tilted arcs (:class:`EpsArcDesign`, :class:`EpsSelectArcDesign`) on
    a grid of ``(lam, u)``: ``(A, amp, window)``.  The tilt ``tau1 = sqrt(1 - theta^2/(1 - phi^2))``
    (nan where it has no room) scales the read-out's capacity ``cap``; ``A`` is the middle of the
    counting amplitudes ``[lo, min(hi, cap tau1)]`` and ``amp`` their relative width (its sign
    where ``lo <= 0``); with ``n(v) = c + lam q/sqrt(1 - q^2)``, ``q = (v - c)/A``, the count at
    which the read-out of the arc about ``c`` reaches ``v``, ``window`` is the distance of ``u``
    from the ends of ``(max(0, -n(1/2)), min(1/2, -n(-1/2)))``."""
    tilt = 1 - theta2 / (1 - phi2)
    tau1 = np.sqrt(np.where((phi2 < 1) & (tilt > 0), tilt, np.nan))
    top = np.minimum(hi, cap * tau1)
    A = (lo + top) / 2
    amp = np.where(lo > 0, (top - lo) / np.where(lo > 0, lo, 1.0), np.where(top > 0, 1.0, -1.0))

    def n_at(v):
        q = (v - c) / A
        return np.where(q <= -1, -np.inf, np.where(q >= 1, np.inf, c + lam * q / np.sqrt(1 - q * q)))

    return A, amp, np.minimum(u - np.maximum(0.0, -n_at(0.5)), np.minimum(0.5, -n_at(-0.5)) - u)


class EpsArcDesign(RegressionDesign):
    """Softmax attention with post-norm and ``eps > 0``, the count task read last (module
    docstring): the symmetric arc of ``L - 1`` on a plane of ``R^{d+1}`` tilted by ``eps``."""

    #: the searched range of ``u`` (``rho = 1/(2u) > 1``), on a linear grid (``U_LOG`` False) or of ``log u``
    U_BOX = (1e-12, 0.5 - 1e-15)
    U_LOG = False

    def __init__(self, cell: Cell):
        if cell.readout != "regression" or not registry.eps_last_arc(cell) or cell.attention != "softmax":
            raise ValueError("EpsArcDesign is for softmax attention with post-norm and eps > 0, the "
                             "count task read last (LayerNorm d >= 3)")
        super().__init__(cell)
        self.inner = last_post.LastArcDesign(cell.replace(eps=0.0))
        self._choices = {}

    def steps(self) -> list:
        """Not symbolic: the tilt is evaluated numerically (a ValueError says so)."""
        raise ValueError(f"{self.cell.describe()}: the construction is the eps = 0 arc lifted numerically "
                         "(constructions.last_post_eps), with no symbolic derivation of its own")

    def compiled_parts(self) -> None:
        """The ``eps = 0`` design's compiled parts (its shape search)."""
        self.inner.compiled_parts()

    def best_shape(self, L_value: int, B_value: float):
        return self.inner.best_shape(L_value, float(B_value))

    def centre(self, L_value: int):
        """``c``, the centre of the arc's counts: :func:`constructions.last_post.centre` (mpf)."""
        return last_post.centre(L_value)

    @property
    def free_kappa(self) -> bool:
        """Whether the scale ``kappa`` is free (LayerNorm: the parts along ``one``) or tied to ``u``."""
        return self.cell.kind.centred

    # ------------------------------------------------------------------ the geometry
    def _geometry(self, L_value: int, B_value, lam, u, ops=np):
        """``(kappa, theta, phi, tau_1, M, |e_s|)`` at ``u`` (broadcast; ``ops`` numpy or a scalar
        module with ``sqrt``, ``log``): the module docstring's scale and tilt."""
        d, eps = self.cell.d, (self.cell.eps if ops is np else mpmath.mpf(self.cell.eps))
        c = float(self.centre(L_value)) if ops is np else self.centre(L_value)
        s2 = d * eps
        sq = ops.sqrt
        log_term = sq(d) * ops.log(1 / (2 * u))
        k0 = log_term / (u * (2 * u + c))
        if self.free_kappa:
            kb = (B_value**2 * (1 - SPARE) ** 2 + s2 / 4 + 4 * log_term) / (lam**2 + (c + u) ** 2
                                                                              + 4 * u * (2 * u + c))
            k2 = np.maximum(k0, kb) if ops is np else max(k0, kb)
        else:
            k2 = k0
        M = k2 * u * (2 * u + c) - log_term
        theta2 = s2 / (4 * u * u * k2)
        phi2 = s2 * (2 * u + c) ** 2 / (4 * u * u * k2 * lam**2)
        es2 = k2 * (lam**2 + (c + u) ** 2) - s2 / 4 + 4 * M
        return k2, theta2, phi2, es2, M

    def _margins(self, L_value: int, B_value: float, lam: np.ndarray, u: np.ndarray):
        """``(score, A)`` on the broadcast grid ``lam x u``: the smallest margin (positive iff the
        geometry counts there, module docstring) and the middle amplitude (float64 screen)."""
        c = float(self.centre(L_value))
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            _, theta2, phi2, es2, _ = self._geometry(L_value, B_value, lam, u)
            lo, hi = self.inner.interval_float(lam, L_value)
            A, amp, window = _tilted_window(c, lam, u, theta2, phi2, lo, hi,
                                            self.inner.capacity(lam, B_value))
            budget = (B_value - np.sqrt(np.maximum(es2, 0))) / B_value
            score = np.minimum(np.minimum(window, budget), amp)
        return np.where(np.isfinite(score), score, -np.inf), A

    def _choose(self, L_value: int, B_value: float):
        """``(lam, u, A, score)``: the best point of grids over ``log lam`` and ``u`` in ``(0, 1/2)``
        zoomed ``ROUNDS`` times around their best, from two boxes of ``lam`` (the ``eps = 0``
        design's domain of shapes, and within ``LAM_SPAN`` of its best shape at ``B``), or None
        where no point counts."""
        key = (L_value, float(B_value))
        if key not in self._choices:
            dom = self.inner.domain(L_value, B_value)
            lam0 = self.best_shape(L_value, B_value)[0]
            best = (-np.inf, None, None, None)
            for lam_box in ((dom[0], dom[1]), (max(dom[0], lam0 / LAM_SPAN), min(dom[1], lam0 * LAM_SPAN))):
                point = self._zoom(L_value, B_value, [(math.log(lam_box[0]), math.log(lam_box[1])),
                                                      self.U_BOX])
                if point[0] > best[0]:
                    best = point
            self._choices[key] = (None if not best[0] > 0
                                  else (math.exp(best[1]), best[2], best[3], best[0]))
        return self._choices[key]

    def _zoom(self, L_value: int, B_value: float, box):
        """``(score, log lam, u, A)``: the best of ``ROUNDS`` grids, each around the best so far."""
        best = (-np.inf, None, None, None)
        to_u = np.exp if self.U_LOG else (lambda v: v)
        for _ in range(ROUNDS):
            log_lam = np.linspace(*box[0], LAM_POINTS)[:, None]
            grid_v = np.linspace(*box[1], U_POINTS)[None, :]
            score, A = self._margins(L_value, B_value, np.exp(log_lam), to_u(grid_v))
            A = np.broadcast_to(A, score.shape)
            i, j = np.unravel_index(int(np.argmax(score)), score.shape)
            if not np.isfinite(score[i, j]):
                break
            if score[i, j] > best[0]:
                best = (float(score[i, j]), float(log_lam[i, 0]), float(grid_v[0, j]), float(A[i, j]))
            steps = [(hi - lo) / (n - 1) for (lo, hi), n in zip(box, (LAM_POINTS, U_POINTS))]
            box = [(best[1] - 2 * steps[0], best[1] + 2 * steps[0]),
                   (max(self.U_BOX[0], best[2] - 2 * steps[1]), min(self.U_BOX[1], best[2] + 2 * steps[1]))]
        return best if best[2] is None else best[:2] + (float(to_u(best[2])),) + best[3:]

    def tilts(self, L_value: int) -> bool:
        """Whether some ``u`` in ``(0, 1/2)`` leaves RMSNorm's tilt ``theta < 1``, ``sqrt(d) eps
        (2u + c) < 4 u log(1/(2u))`` (module docstring; always with LayerNorm, whose ``kappa`` is
        free).  A float screen on a grid of ``u``, finer than the search's."""
        if self.free_kappa:
            return True
        u = np.linspace(1e-6, 0.5 - 1e-9, 20001)
        c = float(self.centre(L_value))
        return bool(np.any(math.sqrt(self.cell.d) * self.cell.eps * (2 * u + c) < 4 * u * np.log(1 / (2 * u))))

    def unreached(self, L_value: int) -> str | None:
        """Why this construction has no row at ``L`` (None: it may have one): RMSNorm's tilt
        (:meth:`tilts`)."""
        if self.tilts(L_value):
            return None
        return (f"the lifted arc (constructions.last_post_eps) needs sqrt(d) eps (2u + c) < 4u log(1/(2u)) "
                f"for some u in (0, 1/2), c = {float(self.centre(L_value)):g} the arc's centre, where its scale "
                f"is tied to u: false at L = {L_value} (d = {self.cell.d}, eps = {self.cell.eps:g}); no "
                "construction is derived here")

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """The smallest budget at which some ``u`` counts on the screen (None if none up to
        ``hi_B``), from the ``eps = 0`` design's estimate up."""
        est0 = self.inner.estimate(L_value, hi_B, rtol)
        if est0 is None or not self.tilts(L_value):
            return None
        feasible = lambda b: self._choose(L_value, b) is not None
        if feasible(est0):  # eps rarely helps; step down to a failing budget first
            lo = est0
            while feasible(lo) and lo > 1e-12:
                lo /= 2
            return zoom.bisect_up(feasible, lo, lo * 2, max(rtol, 1e-9))[1]
        return zoom.threshold(feasible, est0, est0 * 1.01, hi_B, max(rtol, 1e-9))

    # ------------------------------------------------------------------ the construction
    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The lifted arc at budget ``B`` (module docstring) in mpmath at ``dps`` digits; where no
        ``u`` counts, every vector 0 and ``w0 = 0`` (within the budget, counting nothing)."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            choice = self._choose(L_value, float(Bv))
            if choice is None:
                zero = np.array([mpmath.mpf(0)] * self.cell.d, dtype=object)
                return Params(self.cell, {k: zero for k in self.cell.vector_names()}, {"w0": mpmath.mpf(0)})
            lam, u, A, _ = (mpmath.mpf(x) for x in choice)
            return self._params(L_value, Bv, lam, u, A)

    def _tilted(self, L_value: int, Bv, lam, u):
        """``(c_a, c_s, tau_1, M)``: the centred embeddings on the tilted plane (module docstring;
        mpmath), the read-out's factor ``tau_1`` and ``M``."""
        from constructions.last_read import _unit_axes

        cell, d = self.cell, self.cell.d
        c = self.centre(L_value)
        k2, _, _, _, M = self._geometry(L_value, Bv, lam, u, mpmath)
        kappa = mpmath.sqrt(k2)
        s = mpmath.sqrt(d * mpmath.mpf(cell.eps))
        theta = s / (2 * u * kappa)
        phi = s * (2 * u + c) / (2 * u * kappa * lam)
        nu = mpmath.sqrt(1 - phi * phi)
        tau2 = -theta * phi / nu
        tau1 = mpmath.sqrt(1 - theta * theta - tau2 * tau2)
        top, across = _unit_axes(cell)
        T, N = tau1 * top + tau2 * across, nu * across
        return kappa * u * T, kappa * (lam * N - (c + u) * T), tau1, M

    def _params(self, L_value: int, Bv, lam, u, A) -> Params:
        from constructions.classification import _mp_vector
        from constructions.symbols import ONE

        e_a, e_s, tau1, M = self._tilted(L_value, Bv, lam, u)
        if self.free_kappa and M > 0:
            one = _mp_vector(ONE, self.cell.d)
            e_a, e_s = e_a + mpmath.sqrt(M) * one, e_s + 2 * mpmath.sqrt(M) * one
        return Params(self.cell, {"e_s": e_s, "e_a": e_a, **readout(self.cell, A / tau1)},
                      {"w0": self.centre(L_value)})


def readout(cell: Cell, amplitude) -> dict:
    """The read-out of :func:`constructions.steps.arc_readout_steps` at ``amplitude`` (mpmath):
    ``w = (A/sqrt(d)) top`` bare; ``w = g = S e_1``, ``S = sqrt(A/(sqrt(d) reach))``, with a gain
    (and ``beta = 0``)."""
    from constructions.classification import _mp_vector
    from constructions.last_read import _unit_axes
    from constructions.symbols import E1

    d = cell.d
    if not cell.affine.gain:
        return {"w": (amplitude / mpmath.sqrt(d)) * _unit_axes(cell)[0]}
    S = mpmath.sqrt(amplitude / (mpmath.sqrt(d) * cell.kind.axis_reach(d, mpmath.sqrt)))
    e1 = _mp_vector(E1, d)
    out = {"w": S * e1, "g": S * e1}
    if cell.affine.bias:
        out["beta"] = np.array([mpmath.mpf(0)] * d, dtype=object)
    return out


# ---------------------------------------------------------------------- linear attention, post-LayerNorm
class LinearEpsArcDesign(EpsArcDesign):
    r"""Linear attention with post-LayerNorm and ``eps > 0``, the count task read last
    (``d >= 3``, every affine).

    *The outputs.*  For ``n >= 1`` the residual is ``r(n) = P + n Q`` (``P = e_a + gam e_s``, ``Q = k
    e_a``, ``gam = tau <e_a, e_s>``, ``k = tau |e_a|^2``; :class:`constructions.last_post.LinearLastArcDesign`)
    and the count 0 is ``r(0) = m e_s``, ``m = 1 + tau |e_s|^2``.  With ``s = sqrt(d eps)`` the norm is
    ``sqrt(d) x_c/|(x_c, s)|``, so the counts ``1..L`` are read on the line ``X(n) = (P_c + n Q_c, s)`` of
    ``R^{d+1}``, whose direction ``(Q_c, 0)`` has no last coordinate: no tilt of the read-out.

    *Construction.*  The embeddings of ``LinearLastArcDesign`` on the residual line ``V' + n top``,
    ``V' = lam' across - c top``: with ``E^2 = sqrt(d)/u``, ``mu = B/2``, ``beta = mu/sqrt(lam^2 + (c +
    u)^2)``, ``M = sqrt(d)/(u beta) + beta (c + u)``,

        e_a = alpha top + eta one,  alpha = mu E/sqrt(M^2 + mu^2),  eta = E M/sqrt(M^2 + mu^2),
        e_s = beta (V' - u top) + mu one,

    so ``|e_a| = E`` (``k = 1/u``), ``gam beta = alpha/u`` (as there) and the centred residual is
    ``kappa (V' + n top)``, ``kappa = alpha/u``.  Then ``X(n) = kappa (lam' across + (n - c) top, s/kappa)``
    is the symmetric arc of shape ``lam`` iff ``lam'^2 + s^2/kappa^2 = lam^2``: ``lam' = sqrt(lam^2 -
    s^2/kappa^2)`` (``kappa lam > s``), and ``|e_s|^2 = beta^2 (lam'^2 + (c + u)^2) + mu^2 <= B^2/2``.
    The read-out of ``eps = 0`` (along ``top``, or ``w = g = S e_1``) at amplitude ``A`` and ``w0 = c``
    gives ``y(n) = c + A (n - c)/sqrt(lam^2 + (n - c)^2)`` at ``n = 1..L`` exactly, which counts iff ``A``
    is in the BOS arc interval of ``L - 1`` (:func:`constructions.arc.interval`).  The count 0 is off
    that arc: ``r(0)`` is along ``V' - u top`` with last coordinate ``s/(m beta)`` on the scale of its
    centred part, so

        y(0) = c - A (c + u)/sqrt(lam'^2 + (c + u)^2 + s^2/(m beta)^2),

    and it counts iff ``|y(0)| < 1/2``.  ``u >= sqrt(d)/B^2`` keeps ``|e_a| <= B``.  At budget ``B`` the
    construction takes the point of a grid over ``(lam, u)`` (:meth:`EpsArcDesign._choose`) with the
    largest smallest margin (the amplitude's relative slack, ``1/2 - |y(0)|``, the budget of
    ``e_a``), the amplitude the middle of its interval; a float screen, the judge certifies.
    """

    def __init__(self, cell: Cell):
        if cell.readout != "regression" or not registry.eps_last_arc(cell) or cell.attention != "linear":
            raise ValueError("LinearEpsArcDesign is for linear attention with post-LayerNorm and eps > 0 "
                             "at d >= 3, the count task read last")
        RegressionDesign.__init__(self, cell)
        self.inner = last_post.LinearLastArcDesign(cell.replace(eps=0.0))
        self._choices = {}

    #: ``u = sqrt(d)/|e_a|^2`` has no upper limit here: the grid is of ``log u``
    U_BOX = (math.log(1e-9), math.log(1e9))
    U_LOG = True

    def tilts(self, L_value: int) -> bool:
        """No tilt here (class docstring): every ``L`` may have a row."""
        return True

    def _linear_geometry(self, L_value: int, B_value, lam, u, ops=np):
        """``(alpha, eta, beta, mu, lam', |e_s|^2, m)`` at ``(lam, u)`` (class docstring; broadcast
        with numpy, scalars with mpmath)."""
        d, eps = self.cell.d, (self.cell.eps if ops is np else mpmath.mpf(self.cell.eps))
        c = float(last_post.centre(L_value)) if ops is np else last_post.centre(L_value)
        sd = ops.sqrt(d)
        E2 = sd / u
        mu = B_value / 2
        beta = mu / ops.sqrt(lam**2 + (c + u) ** 2)
        M = sd / (u * beta) + beta * (c + u)
        root = ops.sqrt(M**2 + mu**2)
        alpha, eta = mu * ops.sqrt(E2) / root, ops.sqrt(E2) * M / root
        lam_p2 = lam**2 - d * eps * u**2 / alpha**2
        es2 = beta**2 * (lam_p2 + (c + u) ** 2) + mu**2
        m = 1 + es2 / sd
        return alpha, eta, beta, mu, lam_p2, es2, m

    def _margins(self, L_value: int, B_value: float, lam: np.ndarray, u: np.ndarray):
        """``(score, A)`` on the broadcast grid ``lam x u`` (class docstring; float64 screen)."""
        from constructions import arc

        c = float(last_post.centre(L_value))
        d, eps = self.cell.d, self.cell.eps
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            _, _, beta, _, lam_p2, es2, m = self._linear_geometry(L_value, B_value, lam, u)
            if L_value == 1:
                lo, hi = np.zeros(np.shape(lam)), np.ones(np.shape(lam))
            else:
                lo, hi = arc.interval_float(lam, L_value - 1)
            top = np.minimum(hi, self.inner.capacity(lam, B_value))
            A = (lo + top) / 2
            amp = np.where(lo > 0, (top - lo) / np.where(lo > 0, lo, 1.0), np.where(top > 0, 1.0, -1.0))
            y0 = c - A * (c + u) / np.sqrt(lam_p2 + (c + u) ** 2 + d * eps / (m * beta) ** 2)
            zero = np.where(lam_p2 > 0, 0.5 - np.abs(y0), np.nan)
            budget = np.minimum((B_value - np.sqrt(math.sqrt(d) / u)) / B_value,
                                (B_value - np.sqrt(es2)) / B_value)
            score = np.minimum(np.minimum(zero, budget), amp)
        return np.where(np.isfinite(score), score, -np.inf), A

    def _params(self, L_value: int, Bv, lam, u, A) -> Params:
        from constructions.classification import _mp_vector
        from constructions.last_read import _unit_axes
        from constructions.symbols import ONE

        cell, d = self.cell, self.cell.d
        c = last_post.centre(L_value)
        alpha, eta, beta, mu, lam_p2, _, _ = self._linear_geometry(L_value, Bv, lam, u, mpmath)
        top, across = _unit_axes(cell)
        one = _mp_vector(ONE, d)
        V = mpmath.sqrt(lam_p2) * across - c * top
        vectors = {"e_a": alpha * top + eta * one, "e_s": beta * (V - u * top) + mu * one}
        return Params(cell, {**vectors, **readout(cell, A)}, {"w0": c})


# ---------------------------------------------------------------------- the select task, softmax, post-LayerNorm
def select_interval_float(lam, L_value: int, eps_b: float):
    """Vectorised float64 :func:`constructions.select_last_post.select_interval` over ``lam`` (a
    screen): the amplitudes with ``y(n) > n - 1/2`` and ``y(n + eps_b (L - n)) < n + 1/2``, ``n =
    0..L``, ``y(p) = c + A f(p)``, ``c = L/2`` (each condition bounds ``A`` by the sign of ``f``;
    where ``f = 0`` and the condition fails, the empty ``(1, 0)``)."""
    lam = np.asarray(lam, dtype=np.float64)[..., None]
    c = L_value / 2
    n = np.arange(L_value + 1, dtype=np.float64)
    lo = np.zeros(lam.shape[:-1])
    hi = np.full(lam.shape[:-1], np.inf)
    bad = np.zeros(lam.shape[:-1], dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for p, g, above in ((n, n - 0.5 - c, True), (n + eps_b * (L_value - n), n + 0.5 - c, False)):
            f = (p - c) / np.sqrt(lam**2 + (p - c) ** 2)
            bound = g / f
            raises = (f > 0) == above  # A f > g with f > 0 (or A f < g with f < 0) bounds A below
            lo = np.maximum(lo, np.where((f != 0) & raises, bound, 0.0).max(axis=-1))
            hi = np.minimum(hi, np.where((f != 0) & ~raises, bound, np.inf).min(axis=-1))
            bad |= ((f == 0) & ((0 > g) != above)).any(axis=-1)
    return np.where(bad, 1.0, lo), np.where(bad, 0.0, hi)


class EpsSelectArcDesign(EpsArcDesign):
    r"""The select task read last, softmax attention with post-LayerNorm and ``eps > 0`` (``d >= 3``,
    every affine): the construction of :mod:`constructions.select_last_post` on the tilted plane.

    *Why the lift holds.*  There (``c_b = c_a``, the parts along ``one`` ``m_s = m_a = M``, ``m_b =
    M/2``) the centred residual of query ``a`` is ``w_as (P + p Q)`` with ``p = n_a + eps_a n_b`` and
    ``Z = w_as + n_a w_aa + n_b w_ab = w_as (1 + p rho)``; of query ``b`` ``w_bs (P + p Q)``, ``p = n_a
    + eps_b n_b``, ``Z = w_bs (1 + p rho)`` (``w_ba/w_bs = rho``, ``w_bb/w_ba = eps_b``); and ``(s)``
    is ``p = -u`` (``2 (P - u Q) = (P - u Q)/(1 - u rho)``).  So every centred residual is ``(P_c +
    p Q_c)/(1 + p rho)`` with ``1 + p rho > 0``, the count task's form in ``p``, and the lift of
    :class:`EpsArcDesign` puts every output on the arc ``y(p) = c + A (p - c)/sqrt(lam^2 + (p -
    c)^2)`` at ``eps > 0`` exactly, now with ``c = L/2`` (the counts ``0..L``).

    *The scale is tied.*  ``w_ba/w_bs = rho`` needs ``m_a = m_s`` (``<e_b, e_a - e_s> = <c_a, c_a - c_s>
    + m_b (m_a - m_s)``), so the parts along ``one`` do not enter ``rho`` and ``kappa = kappa_0`` (no
    free ``kappa``): the tilt needs ``sqrt(d) eps (2u + c) < 4u log(1/(2u))``, as RMSNorm's count task
    (:meth:`EpsArcDesign.tilts`).  The budget as there: ``|c_s| <= B/sqrt 2``, ``M = (1 - 2^-20)
    sqrt(B^2 - |c_s|^2)``, so ``eps_b <= eps(B)`` (:func:`constructions.select_last_post.eps_bound`);
    the amplitudes are :func:`constructions.select_last_post.select_interval` at ``eps(B)`` within
    the capacity cut by ``tau_1``, and ``(s)`` needs ``u`` in the window of ``y(-u)``.  ``B_lower`` is
    the count task's at the last read (a sub-task, :func:`bounds.lower.select_last_post_lower`).
    """

    def __init__(self, cell: Cell):
        from constructions.select_last_post import SelectLastArcDesign

        if cell.readout != "regression" or not registry.eps_select_last_arc(cell):
            raise ValueError("EpsSelectArcDesign is for the select task read last, softmax attention "
                             "with post-LayerNorm and eps > 0 at d >= 3")
        RegressionDesign.__init__(self, cell)
        self.inner = SelectLastArcDesign(cell.replace(eps=0.0))
        self._choices = {}

    def centre(self, L_value: int):
        """``c = L/2``, the centre of the counts ``0..L`` (mpf)."""
        return mpmath.mpf(L_value) / 2

    @property
    def free_kappa(self) -> bool:
        """Tied (class docstring)."""
        return False

    def _margins(self, L_value: int, B_value: float, lam: np.ndarray, u: np.ndarray):
        """``(score, A)`` on the broadcast grid ``lam x u`` (class docstring; float64 screen)."""
        from constructions.select_last_post import EMB, eps_bound

        c = L_value / 2
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            _, theta2, phi2, cs2, _ = self._geometry(L_value, B_value, lam, u)
            lo, hi = select_interval_float(lam[:, 0], L_value, float(eps_bound(self.cell, B_value)))
            A, amp, window = _tilted_window(c, lam, u, theta2, phi2, lo[:, None], hi[:, None],
                                            self.inner.capacity(lam, B_value))
            budget = (B_value * float(EMB) - np.sqrt(np.maximum(cs2, 0))) / B_value
            score = np.minimum(np.minimum(window, budget), amp)
        return np.where(np.isfinite(score), score, -np.inf), A

    def _params(self, L_value: int, Bv, lam, u, A) -> Params:
        from constructions.classification import _mp_vector
        from constructions.symbols import ONE

        c_a, c_s, tau1, _ = self._tilted(L_value, Bv, lam, u)
        one = _mp_vector(ONE, self.cell.d)
        M = (1 - mpmath.mpf(2) ** -20) * mpmath.sqrt(Bv**2 - mpmath.fsum(c_s * c_s))
        vectors = {"e_s": c_s + M * one, "e_a": c_a + M * one, "e_b": c_a + (M / 2) * one}
        return Params(self.cell, {**vectors, **readout(self.cell, A / tau1)}, {"w0": self.centre(L_value)})


# ---------------------------------------------------------------------- linear attention, post-RMSNorm
class EpsFootDesign(LastFootDesign):
    r"""Linear attention with post-RMSNorm and ``eps > 0``, the count task read last (every ``d``
    and affine): the one-sided arc of :class:`constructions.last_foot.LastFootDesign` lifted.

    *The outputs.*  For ``n >= 1`` the residual is ``r(n) = P + n Q = k |e_a| ((n + F) along + lam
    perp)`` (``k = tau |e_a|^2 = 1/u``, :mod:`constructions.last_foot`), and RMSNorm with ``eps``
    reads it as the line ``X(n) = (P + n Q, s)`` of ``R^{d+1}`` (``s = sqrt(d eps)``): with ``sigma =
    s/(k |e_a|) = s u^{3/2}/d^{1/4}``, ``X(n) = k |e_a| ((n + F) along + lam perp + sigma e_{d+1})``, the
    one-sided arc with the same foot ``-F`` and the distance ``sqrt(lam^2 + sigma^2)``.  The read-out
    ``(A_R/sqrt(d)) top`` (or ``w = g = S e_1``) gives

        y(n) = w0 + A_R (lam cos psi_R + (n + F) sin psi_R)/sqrt(lam^2 + sigma^2 + (n + F)^2)

    (``along = sin psi_R top + cos psi_R across``, ``perp = cos psi_R top - sin psi_R across``).

    *Construction.*  The ``eps = 0`` design's choice ``(lam*, A, w0, psi, F, u)`` for the lifted
    arc (its read-out of the one-sided arc of ``L - 1`` at the foot ``F + 1``, distance ``lam*``) is
    realised with ``lam = sqrt(lam*^2 - sigma^2)`` in ``R^d``, ``A_R sin psi_R = A sin psi`` and ``A_R
    lam cos psi_R = A lam* cos psi``: then ``y(n)`` is exactly the ``eps = 0`` choice's output at every
    ``n >= 1``.  The count 0 is off that line: ``r(0) = m e_s``, ``m = 1 + tau |e_s|^2``, so

        y(0) = w0 + A_R m <top, e_s>/sqrt(m^2 |e_s|^2 + s^2),

    and ``u`` is the grid's (:func:`constructions.last_foot.zero_grid`) with the largest margin ``1/2
    - |y(0)|`` among those the embeddings' budget ``(*)`` (:func:`constructions.last_foot.embedding_budget`
    at ``lam``) admits, with ``A_R`` within the capacity; the read-out is the one-sided one halfway
    between ``R*`` and a share of the capacity (``CAP_SHARES``: the count 0 moves with the amplitude,
    and ``eps`` moves it off the line), the best of those.  ``B_lower`` is the ``eps = 0`` bound
    (:func:`bounds.lower.last_foot_lower`: the foot of the lifted line is that of ``P + n Q``).
    """

    def __init__(self, cell: Cell):
        if cell.readout != "regression" or not registry.eps_last_foot(cell):
            raise ValueError("EpsFootDesign is for linear attention with post-RMSNorm and eps > 0, the "
                             "count task read last")
        FootDesign.__init__(self, cell)
        self._geometries = {}
        self.inner = LastFootDesign(cell.replace(eps=0.0))

    def steps(self) -> list:
        """The ``eps = 0`` steps (the construction's form); its numbers are carried numerically."""
        return self.inner.steps()

    def geometry(self, L_value: int):
        """The ``eps = 0`` design's ``(F, lam*)`` (the lifted arc's)."""
        return self.inner.geometry(L_value)

    def choice(self, L_value: int, B_value: float):
        """``(lam, A_R, w0, psi_R, F, u)`` (class docstring), or None: :func:`_foot_choice`."""
        return _foot_choice(self, L_value, B_value)

    def estimate(self, L_value: int, hi_B: float = 1e12, rtol: float = 1e-7):
        """As at ``eps = 0`` (:meth:`LastFootDesign.estimate`); ``L = 1`` on the construction of
        ``L = 2`` (with ``eps > 0`` no infimum 0 is claimed)."""
        return super().estimate(max(L_value, 2), hi_B, rtol)

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """As at ``eps = 0`` with :meth:`choice`; ``L = 1`` on the construction of ``L = 2``."""
        return super().build(max(_check_count(L_value), 2), B_value, dps)


def _foot_choice(design, L_value: int, B_value: float):
    """:meth:`EpsFootDesign.choice` (its docstring): ``(lam, A_R, w0, psi_R, F, u)`` or None."""
    from constructions import one_sided
    from constructions.last_foot import SHAPE_STEPS, embedding_budget, zero_grid, zero_output

    cell, d = design.cell, design.cell.d
    L_value, k = max(L_value, design.smallest_L), design.first
    geo = design.geometry(L_value)
    if geo is None:
        return None
    Fv, lam0 = geo
    cap = float(design.capacity(1.0, B_value))
    counts = np.arange(k, L_value + 1, dtype=np.float64)
    s = math.sqrt(d * cell.eps)
    best, margin = None, 0.0
    for lam_star, share in itertools.product(lam0 * (1 + SHAPE_STEPS), CAP_SHARES):
        lam_star = float(lam_star)
        got = one_sided.readout(L_value - k, Fv + k, lam_star, cap * share)
        if got is None:
            continue
        w0, A, angle = got[0] + k, got[1], got[2]
        u = zero_grid(Fv)
        with np.errstate(invalid="ignore", divide="ignore"):
            sigma = s * u**1.5 / d**0.25
            lam = np.sqrt(lam_star**2 - sigma**2)
            sin_r, cos_r = A * math.sin(angle), A * lam_star * math.cos(angle) / lam
            A_R = np.hypot(sin_r, cos_r)
            psi_r = np.arctan2(sin_r, cos_r)
            D = Fv - u
            scale = np.sqrt(math.sqrt(d) / (u * D))
            b = math.sqrt(d) * (D * D + lam * lam) / (u * D)
            m = 1 + b / math.sqrt(d)
            top_s = scale * (D * np.sin(psi_r) + lam * np.cos(psi_r))
            y0 = w0 + A_R * m * top_s / np.sqrt(m * m * b + s * s)
            ok = (lam > 0) & (A_R < cap * (1 - 1e-9)) & (embedding_budget(d, Fv, lam, u) <= B_value * (1 - 1e-9))
            zero = np.where(ok, 0.5 - np.abs(y0), -np.inf)
        j = int(np.argmax(zero))
        if not zero[j] > 1e-12:
            continue
        here = min(0.5 - np.abs(zero_output(Fv, lam_star, (w0, A, angle), -counts) - counts).max(), float(zero[j]))
        if here > margin:
            best, margin = (float(lam[j]), float(A_R[j]), w0, float(psi_r[j]), Fv, float(u[j])), here
    return best
