"""One positive variable: maximising a vectorised function by zooming log-spaced grids, and the
threshold of a monotone predicate by geometric bisection."""

from __future__ import annotations

import math

import numpy as np


def bisect_up(feasible, lo: float, hi: float, rtol: float) -> tuple[float, float]:
    """``(lo, hi)`` with ``hi/lo <= 1 + rtol`` bracketing the threshold of a predicate that holds
    on an up-set ``[B*, oo)``, from a bracket with ``feasible(hi)`` and not ``feasible(lo)``
    (not checked): each step halves ``log(hi/lo)`` at the geometric middle.  ``hi`` is feasible."""
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return lo, hi


def threshold(feasible, lo: float, up: float, hi: float, rtol: float) -> float | None:
    """The least feasible budget to ``rtol`` (from above) of a predicate that holds on an up-set,
    from ``lo`` not feasible and a first guess ``up``: ``up`` doubles (``lo`` following) until it
    is feasible, then :func:`bisect_up`; None if that passes ``hi``."""
    while not feasible(up):
        lo, up = up, up * 2
        if up > hi:
            return None
    return bisect_up(feasible, lo, up, rtol)[1]


def maximize(f, lo: float, hi: float, points: int = 65, rounds: int = 5):
    """``(t, f(t))`` approximately maximising ``f`` over ``[lo, hi]`` (``0 < lo <= hi``).

    ``f`` maps an array of ``t`` to an array of values (``-inf`` where inadmissible).  Each round
    evaluates ``points`` log-spaced values and zooms into the two cells around the best; after
    ``r`` rounds the bracket has shrunk by ``(2/(points-1))^r``.  A screen, not a proof: where
    the result matters it is judged afterwards.
    """
    best_t, best_v = lo, -np.inf
    a, b = np.log(lo), np.log(hi)
    for _ in range(rounds):
        grid = np.exp(_linspace(a, b, points)) if b > a else np.array([np.exp(a)])
        vals = np.asarray(f(grid), dtype=np.float64)
        j = int(np.argmax(vals))
        if vals[j] > best_v:
            best_t, best_v = float(grid[j]), float(vals[j])
        if len(grid) == 1:
            break
        step = (b - a) / (points - 1)
        a, b = max(a, np.log(grid[j]) - step), min(b, np.log(grid[j]) + step)
    return best_t, best_v


def _linspace(a: float, b: float, points: int) -> np.ndarray:
    """``numpy.linspace(a, b, points)`` for floats ``a < b`` and ``points >= 2``, the same floats
    by the same operations (``k * step + a``, or ``(k / (points - 1)) * (b - a) + a`` where the
    step underflows to 0, and the last point ``b`` itself), without its argument handling (the
    zoom calls it thousands of times on a few dozen points)."""
    div = points - 1
    delta = b - a
    step = delta / div
    y = np.arange(points, dtype=np.float64)
    if step == 0:
        y /= div
        y *= delta
    else:
        y *= step
    y += a
    y[-1] = b
    return y
