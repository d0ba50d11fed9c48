"""The Mobius segment: what a linear read-out of softmax attention can count.

Without post-norm, softmax attention over ``(s, a^n)`` mixes the two values ``h_s`` and
``h_a`` with the weights ``rho/(rho+n)`` and ``n/(rho+n)``, ``rho = exp(score_s - score_a)``,
so every regression read-out has the form

    y(n) = C + D * phi(n),    phi(n) = n / (rho + n),

with ``D = <w, h_a - h_s>`` and a free constant ``C``.  The parameters count to ``L`` iff
``|y(n) - n| < 1/2`` for ``n = 0..L``.

**The feasible amplitudes are an explicit interval.**  For fixed ``rho`` and ``D`` a constant
``C`` exists iff ``max_n (D phi(n) - n) - min_n (D phi(n) - n) < 1``, i.e. iff for every pair
``i > j``:  ``(i - j) - 1 < D (phi(i) - phi(j)) < (i - j) + 1``.  Since ``phi`` is increasing
and concave, for a gap ``k = i - j`` the smallest increment is the last one,
``phi(L) - phi(L-k) = rho k / ((rho+L)(rho+L-k))``, and the largest the first,
``phi(k) - phi(0) = k/(rho+k)``.  Hence the feasible ``D`` form the open interval
``(D_lo, D_hi)`` with

    D_lo(rho) = max_{1<=k<=L} (k-1)(rho+L)(rho+L-k) / (rho k)
              = (rho+L)/rho * max_k (M + 1 - k - M/k),   M = rho + L,
    D_hi(rho) = min_{1<=k<=L} (k+1)(rho+k)/k = min_k (k + 1 + rho + rho/k).

Both inner functions are concave (resp. convex) in ``k``, so the extremum over integers is at
``floor`` or ``ceil`` of ``sqrt(M)`` (resp. ``sqrt(rho)``), clipped to ``[1, L]``.

With ``rho ~ L^2/4`` both ends meet at ``D ~ L^2/4``: this is where the quadratic growth of the
read-out product, hence the linear growth of every vector, comes from.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np


def lo_term(k, rho, L):
    """``(k-1)(rho+L)(rho+L-k)/(rho k)``: the lower constraint on ``D`` from the pair ``(L, L-k)``.

    Plain arithmetic, so the one formula serves sympy symbols, mpf, balls, fractions and numpy
    arrays alike (``rho`` must not be a Python int, or ``/`` would round).
    """
    return (k - 1) * (rho + L) * (rho + L - k) / (rho * k)


def hi_term(k, rho, L):
    """``(k+1)(rho+k)/k``: the upper constraint on ``D`` from the pair ``(k, 0)`` (as :func:`lo_term`)."""
    return (k + 1) * (rho + k) / k


@functools.cache
def _symbolic() -> dict:
    """The sympy statements, built on first use (module ``__getattr__``): ``SHAPE``
    (``y(n) = C + A * SHAPE``, shape ``t = rho``), the two constraints ``D_LO_K``, ``D_HI_K``
    for the gaps ``k`` and ``k'`` (for derivations), and the symbols this module names."""
    from constructions.symbols import L, k, kk, n, rho, t

    return {"SHAPE": n / (t + n), "D_LO_K": lo_term(k, rho, L), "D_HI_K": hi_term(kk, rho, L),
            "L": L, "k": k, "kk": kk, "n": n, "rho": rho, "t": t}


def __getattr__(name: str):
    if name in ("SHAPE", "D_LO_K", "D_HI_K", "L", "k", "kk", "n", "rho", "t"):
        return _symbolic()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def candidates(centre, L: int) -> list[int]:
    """Integers around ``centre`` clipped to ``[1, L]`` (a superset of the argmax).

    ``centre`` is a float, or an exact integer floor (beyond 2^53 floats lose integers).
    """
    c = int(math.floor(centre)) if math.isfinite(centre) else L
    return sorted({min(max(j, 1), L) for j in (c - 1, c, c + 1, c + 2)})


def interval(rho_value, L_value: int):
    """``(D_lo, D_hi)`` at ``rho`` for counting to ``L`` (mpmath numbers at current precision)."""
    r = mpmath.mpf(rho_value)
    lo = max(lo_term(kk, r, L_value) for kk in candidates(float(mpmath.sqrt(r + L_value)), L_value))
    hi = min(hi_term(kk, r, L_value) for kk in candidates(float(mpmath.sqrt(r)), L_value))
    return lo, hi


def interval_float(rho_value: np.ndarray, L_value: int):
    """Vectorised float64 version of :func:`interval` (a fast screen)."""
    r = np.asarray(rho_value, dtype=np.float64)

    def extremum(centre, term, pick):
        base = np.floor(centre)
        vals = [term(np.clip(base + j, 1, L_value), r, L_value) for j in (-1, 0, 1, 2)]
        return pick(np.stack(vals), axis=0)

    return extremum(np.sqrt(r + L_value), lo_term, np.max), extremum(np.sqrt(r), hi_term, np.min)


def centre(rho_value, D_value, L_value: int):
    """The constant ``C`` centring the error of ``C + D phi(n) - n`` over ``n = 0..L``.

    ``g(n) = D phi(n) - n`` is concave: its minimum over ``0..L`` is at an end and its maximum
    at ``floor`` or ``ceil`` of ``sqrt(D rho) - rho``; ``C = -(max g + min g)/2``.
    """
    r, Dv = mpmath.mpf(rho_value), mpmath.mpf(D_value)

    def g(n):
        return Dv * n / (r + n) - n

    peak = float(mpmath.sqrt(Dv * r) - r) if Dv * r > 0 else 0.0
    vals = [g(n) for n in {0, L_value, *candidates(peak, L_value)}]
    return -(max(vals) + min(g(0), g(L_value))) / 2
