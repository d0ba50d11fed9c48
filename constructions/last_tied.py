r"""The last read's one-sided arc at unit budget, shaped for a classification head (linear
attention with post-RMSNorm, ``eps = 0``).

*The arc.*  Read at the last token ``a`` (:mod:`constructions.last_foot`), the residual of
``n >= 1`` counted tokens is a positive multiple of ``(n + F) along + lam perp``, and the input
``(s)`` read at ``s`` is the same line at ``n = -u`` (a positive multiple of ``e_s``), where with
``a = |e_a|^2``, ``b = |e_s|^2`` and ``e_s = sqrt(b) (c along + s perp)`` (``c, s > 0``)

    F = (sqrt(d) + b c^2)/a,   lam = b c s/a,   D = F - u = b c^2/a.

RMSNorm (no centring) maps every residual to ``sqrt(d)`` times its direction, so the outputs are
the points ``sqrt(d) unit(x along + lam perp)`` at the offsets ``x = n + F`` (``n >= 1``) and
``x = D`` (the input ``(s)``); a gain ``g`` multiplies them coordinatewise.  At unit budget the
distance is tied to the foot, ``lam <= kappa F`` (:func:`constructions.laws.last_distance_ratio`,
equality at ``b = 1``, ``c^2 = t* = sigma/(1 + 2 sigma)``, ``sigma = sqrt(d)``): the arc of the
counts subtends less than ``atan(kappa)`` (about 8.6 degrees at ``d = 8``), where the BOS read's
symmetric arc subtends some 127.  Where a regression read-out needs the count 0 within half a
count of the count 1 (``u < ~1/2``, :mod:`constructions.last_foot`), a head does not: ``F`` is
free, and its best value grows like ``L`` (about ``0.57 L`` at ``d = 8``), so that the arc's
gaps ``sqrt(d) lam/(x^2 + lam^2)`` per count fall like ``1/L`` and the margin like ``L^-2``.

*The select task* (:mod:`constructions.select_last_linear_post`).  ``e_b = beta e_a`` with
``beta^2 = SHIFT/(L + 1)``: the query ``b`` reads what the query ``a`` reads at ``p = n_a + beta^2
n_b``, so the class ``n >= 1`` lies at the offsets ``[n + F, n + F + beta^2 (L - n)]`` and the
class 0 at ``[F, F + beta^2 L]`` (query ``b`` without ``a``) and at ``D`` (the input ``(s)``,
beyond the foot's side of the counts: a larger angle).  The classes are then in order along the
arc, class 0 from ``x = D`` to ``x ~ F``, and the greedy head of
:func:`constructions.classification.circle_head` reads them at their facing ends
(:func:`constructions.select_last_points.arc_screen`).

*The count task* (:mod:`constructions.count_last_foot_head`) has no query ``b``: its points are
the offsets ``D`` and ``n + F`` for ``n = 1..L`` (:func:`counts`), and its parameter set has no
``e_b``.

*The shape* ``(F/L, t = c^2, omega, chi)`` (``b = 1 - 2^-30``, ``a = (sqrt(d) + b t)/F``, at most
``1 - 2^-30``): ``along = cos(omega) e_1 + sin(omega) e_2``, ``perp = -sin(omega) e_1 + cos(omega)
e_2`` and, with a gain, ``g = (1 - 2^-40)(cos(chi) e_1 + sin(chi) e_2)`` (the bias 0), so that
the head reads ``(cos(chi) N_1, sin(chi) N_2)``: an arc of an ellipse.  It maximises the float
screen of the greedy head on the points (Nelder-Mead from a grid, at ``min(L, FIT_L)``; ``F/L``,
``t``, ``omega`` and ``chi`` carried over beyond).  Everything here is a float screen: the judge
certifies every row in ball arithmetic on every input.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np

from constructions import laws
from constructions.cell import Cell, Params

#: the shape is optimised at this L (or at L itself if smaller) and carried over beyond
FIT_L = 128
#: ``|e_s|^2`` and the largest ``|e_a|^2``: a hair inside the unit ball
INSIDE = 1 - 2.0**-30
#: the gain's length
GAIN = 1 - 2.0**-40


def offsets(d: int, F_over_L: float, t: float, L: int):
    """``(a, F, lam, D)`` of the shape at ``L`` (module docstring; floats)."""
    b = INSIDE
    F = F_over_L * L
    a = min((math.sqrt(d) + b * t) / F, INSIDE)
    F = (math.sqrt(d) + b * t) / a
    return a, F, b * math.sqrt(t * (1 - t)) / a, b * t / a


def counts(cell: Cell, L: int) -> np.ndarray:
    """The counts ``n`` whose offsets ``F + n`` hold outputs: ``0..L`` for the select task (the
    offset ``F`` is the query ``b`` without ``a``, class 0), ``1..L`` for the count task, whose
    class 0 is the input ``(s)`` alone."""
    return np.arange(0 if cell.distractor else 1, L + 1, dtype=np.float64)


def plane_points(cell: Cell, L: int, shape) -> np.ndarray:
    """The outputs in the plane of ``e_1, e_2`` at the offsets ``D``, then ``F + n`` for the
    :func:`counts` ``n`` (a float array of one row each)."""
    F_over_L, t, omega, chi = shape
    _, F, lam, D = offsets(cell.d, F_over_L, t, L)
    x = np.concatenate([[D], F + counts(cell, L)])
    return on_plane(cell, x, lam, omega, chi)


def on_plane(cell: Cell, x: np.ndarray, lam: float, omega: float, chi: float) -> np.ndarray:
    """``sqrt(d) unit(x along + lam perp)`` in the plane of ``e_1, e_2`` (``along`` at the angle
    ``omega``), times the gain ``(cos(chi), sin(chi))`` where the cell has one."""
    r = np.hypot(x, lam) / math.sqrt(cell.d)
    al, pe = x / r, lam / r
    co, so = math.cos(omega), math.sin(omega)
    y = np.stack([al * co - pe * so, al * so + pe * co], axis=1)
    return y * np.array([math.cos(chi), math.sin(chi)]) if cell.affine.gain else y


def screen(cell: Cell, L: int, shape) -> float:
    """The float margin of the greedy head with the middle biases on :func:`plane_points` (the
    classes at their facing ends, every point against every class; 0 where it fails)."""
    from constructions.select_last_points import arc_screen

    F_over_L, t, _, chi = shape
    if not (F_over_L > 0 and 0 < t < 1) or (cell.affine.gain and not 0 < chi < math.pi / 2):
        return 0.0
    y = plane_points(cell, L, shape)
    z = np.concatenate([y, np.zeros((len(y), 1))], axis=1)
    n_a = np.concatenate([[0], counts(cell, L)]).astype(np.int64)
    with np.errstate(all="ignore"):
        out = arc_screen(np.zeros(3), z, n_a, L)
    return 0.0 if out is None else float(out[0])


@functools.lru_cache(maxsize=None)
def best_shape(cell: Cell, L_fit: int):
    """``(F/L, t, omega, chi)`` maximising :func:`screen` at ``L_fit`` (module docstring)."""
    from scipy import optimize  # loaded only where the shape is searched

    ts = laws.last_distance_ratio(cell, 1, laws.FLOAT)  # only to start t near t*
    sigma = math.sqrt(cell.d)
    t_star = sigma / (1 + 2 * sigma)
    assert ts is not None
    f = lambda p: -screen(cell, L_fit, tuple(p))
    if cell.affine.gain:
        grid = [(q, t_star, om, ch) for q in (0.3, 0.6, 1.0) for om in np.linspace(0, math.pi, 9)[:-1]
                for ch in (0.3, math.pi / 4, 1.2)]
    else:
        grid = [(q, t_star, 0.0, 0.0) for q in (0.2, 0.4, 0.6, 0.8, 1.2)]
    start = min(grid, key=f)
    res = optimize.minimize(f, start, method="Nelder-Mead",
                            options={"xatol": 1e-7, "fatol": 1e-16, "maxiter": 800})
    best = tuple(float(v) for v in res.x)
    return best if f(best) <= f(start) else start


def tied_arc(cell: Cell, L: int, F: float, omega: float, chi: float):
    """``(lam, p, y)``: the arc of ``L`` of the counts ``1..L+1`` read last at the foot ``F``: the
    offsets ``x_m = F + 1 + m = m - p``, ``m = 0..L``, at the tie ``lam = kappa F``, and its points
    ``y`` on the plane ``omega`` with the ellipse ``chi`` (:func:`on_plane`; floats)."""
    kappa = laws.last_distance_ratio(cell, 1, laws.FLOAT)
    lam = kappa * F
    return lam, -(F + 1), on_plane(cell, F + 1 + np.arange(L + 1, dtype=np.float64), lam, omega, chi)


@functools.lru_cache(maxsize=None)
def count_shape(cell: Cell, L: int) -> tuple[float, float, float]:
    """``(F, omega, chi)`` maximising the greedy margin of :func:`tied_arc`'s points (Nelder-Mead in
    ``(log(F - sqrt(d)), omega, chi)`` from a few starts; bare, ``omega = chi = 0``)."""
    from scipy import optimize  # loaded only where the shape is searched

    from constructions.classification import circle_margin

    floor = math.sqrt(cell.d)  # F >= sqrt(d) at unit budget

    def f(p):
        if cell.affine.gain and not 0 < p[2] < math.pi / 2:
            return 0.0
        with np.errstate(all="ignore"):
            return -circle_margin(tied_arc(cell, L, floor + math.exp(p[0]), p[1], p[2])[2])

    starts = [(math.log(q * L), om, ch) for q in (0.3, 0.6, 1.0)
              for om, ch in ([(1.5, 0.03), (1.5, 0.3), (0.0, 1.2)] if cell.affine.gain else [(0.0, 0.0)])]
    start = min(starts, key=f)
    fixed = () if cell.affine.gain else (1, 2)
    free = [i for i in range(3) if i not in fixed]
    g = lambda v: f([v[free.index(i)] if i in free else start[i] for i in range(3)])
    res = optimize.minimize(g, [start[i] for i in free], method="Nelder-Mead",
                            options={"xatol": 1e-7, "fatol": 1e-16, "maxiter": 800})
    best = [res.x[free.index(i)] if i in free else start[i] for i in range(3)]
    return floor + math.exp(best[0]), float(best[1]), float(best[2])


def count_arc(cell: Cell, L: int):
    """``(lam, p, y, eta)``: :func:`tied_arc` at :func:`count_shape` (the weights of
    :func:`bounds.arc_margin.certificate` are read from its greedy head), and its ellipse in the
    coordinates ``(perp, along)`` of
    :mod:`bounds.arc_margin`: ``eta = cos(2 chi) e(2 alpha)`` with ``alpha = omega + pi/2`` the
    angle of ``e_1`` there (``(0, 0)`` bare)."""
    F, omega, chi = count_shape(cell, L)
    eta = math.cos(2 * chi) * np.array([-math.cos(2 * omega), -math.sin(2 * omega)])
    return *tied_arc(cell, L, F, omega, chi), eta if cell.affine.gain else np.zeros(2)


def shape(cell: Cell, L: int):
    """The shape of the head at ``L`` (:func:`best_shape` at ``min(L, FIT_L)``)."""
    return best_shape(cell.replace(readout="classification"), min(L, FIT_L))


def geometry(cell: Cell, L: int, dps: int = 50) -> Params:
    """The regression-cell parameter set of the shape at ``L`` (``w = e_1``, ``w0 = 0``: the head
    reads the outputs, not ``w``), every vector of norm below 1 (mpmath)."""
    F_over_L, t, omega, chi = shape(cell, L)
    d = cell.d
    with mpmath.workdps(dps):
        a, F, lam, D = offsets(d, F_over_L, t, L)
        zero = [mpmath.mpf(0)] * d
        along, perp, first = list(zero), list(zero), list(zero)
        co, so = mpmath.cos(omega), mpmath.sin(omega)
        along[0], along[1] = co, so
        perp[0], perp[1] = -so, co
        first[0] = mpmath.mpf(1)
        ra, rb = mpmath.sqrt(mpmath.mpf(a)), mpmath.sqrt(mpmath.mpf(INSIDE))
        c, s = mpmath.sqrt(mpmath.mpf(t)), mpmath.sqrt(1 - mpmath.mpf(t))
        beta = mpmath.sqrt(mpmath.mpf(1) / 2**40 / (L + 1))
        vec = lambda xs: np.array(xs, dtype=object)
        vectors = {"e_a": vec([ra * v for v in along]),
                   "e_s": vec([rb * (c * p + s * q) for p, q in zip(along, perp)]),
                   "w": vec(first)}
        if cell.distractor:
            vectors["e_b"] = vec([beta * ra * v for v in along])
        if cell.affine.gain:
            g = list(zero)
            g[0], g[1] = GAIN * mpmath.cos(chi), GAIN * mpmath.sin(chi)
            vectors["g"] = vec(g)
            if cell.affine.bias:
                vectors["beta"] = vec(zero)
        return Params(cell.replace(readout="regression"), vectors, {"w0": mpmath.mpf(0)})
