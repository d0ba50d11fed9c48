"""The line: what a linear read-out of linear attention without post-norm can count.

Linear attention over ``(s, a^n)`` sums the scores times the values, so with ``h_s, h_a`` the
token values every regression read-out is

    y(n) = C + K n,    K = tau <h_s, h_a> <w, h_a>,

a line in the count (:mod:`constructions.laws` bounds ``K`` at budget ``B``).  It counts to ``L``
iff ``|C + (K - 1) n| < 1/2`` for ``n = 0..L``; the error is linear in ``n``, so only the ends
bind: ``|C| < 1/2`` and ``|C + (K - 1) L| < 1/2``, i.e. the slopes form the open interval
``(1 - 1/L, 1 + 1/L)`` (:func:`slopes`, :data:`INTERVAL`) and ``C = -(K - 1) L/2`` centres the error.  The line
has no shape parameter (the interface's ``t`` is ignored).
"""

from __future__ import annotations

import functools

import mpmath
import numpy as np


def slopes(L):
    """The counting slopes ``(1 - 1/L, 1 + 1/L)``: ``|C + K n - n| < 1/2`` at ``n = 0`` and
    ``n = L`` (plain arithmetic: a symbol, an mpf or a float ``L``)."""
    return (1 - 1 / L, 1 + 1 / L)


@functools.cache
def _symbolic() -> dict:
    """The sympy statements, built on first use (module ``__getattr__``): ``SHAPE``
    (``y(n) = C + A * SHAPE``), ``INTERVAL`` (:func:`slopes` of the symbol ``L``) and the
    symbols this module names."""
    from constructions.symbols import L, n

    return {"SHAPE": n, "INTERVAL": slopes(L), "L": L, "n": n}


def __getattr__(name: str):
    if name in ("SHAPE", "INTERVAL", "L", "n"):
        return _symbolic()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def interval(t_value, L_value: int):
    """``(lo, hi)`` of the counting slopes (mpmath at the current precision)."""
    return slopes(mpmath.mpf(L_value))


def interval_float(t_value, L_value: int):
    """Float64 ``(lo, hi)`` broadcast to the shape of ``t``."""
    return tuple(np.full(np.shape(t_value), v) for v in slopes(float(L_value)))


def centre(t_value, A_value, L_value: int):
    """The constant ``C = -(K - 1) L/2`` that centres the error ``C + (K - 1) n`` on ``0..L``."""
    return -(A_value - 1) * L_value / 2
