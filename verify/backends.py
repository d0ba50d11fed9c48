"""Number systems the forward pass runs in.

A backend turns the exact parameters (mpf) into its own numbers and supplies the handful of
elementwise operations the forward pass needs (``exp``, ``sqrt``, ``maximum``); the arithmetic
itself (``+ - * /``, sums and dot products) is numpy's, on numpy dtypes or on object arrays of
mpmath or arb numbers.  So there is one forward pass, not one per backend.

* ``float64``, ``float32``, ``float16`` -- numpy floating point: a fast screen, never a proof;
* ``mp<digits>`` (e.g. ``mp50``) -- mpmath at that many decimal digits: high precision, not a
  proof by itself;
* ``arb<bits>`` (e.g. ``arb256``) -- ball arithmetic (python-flint / Arb): every number is a
  midpoint with a radius that provably encloses the exact real value, so comparisons made on
  the balls are rigorous.  This is the certifying backend.
"""

from __future__ import annotations

import contextlib
import math
import re

import flint
import mpmath
import numpy as np


#: the largest working precisions accepted (far beyond any certification's need; the cost of
#: an operation grows faster than linearly with the precision)
MAX_DIGITS, MAX_BITS = 5000, 1 << 15


class Backend:
    """Interface shared by all backends (see the module docstring)."""

    name = "abstract"
    rigorous = False

    def context(self):
        """Context manager fixing the working precision for this backend's arithmetic."""
        return contextlib.nullcontext()

    def vec(self, values) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def degenerate_rows(self, v: np.ndarray, base, stat: np.ndarray) -> np.ndarray:
        """Rows of ``v`` (last axis) on which a norm with ``eps = 0`` is undefined: those whose
        entries all equal ``base`` (broadcast against ``v``: the row's first entry for a centred
        norm, 0 for an uncentred one); ``stat`` (last axis of length 1) is the rows' statistic
        ``|C(v)|^2/d``.

        Entries are compared directly: a rounded mean can leave a tiny non-zero variance.
        """
        return np.all(v == base, axis=-1)

    def is_zero(self, x) -> np.ndarray:
        """Entries of ``x`` that are zero (on balls: that contain zero)."""
        return np.atleast_1d(x == 0)

    def full(self, shape, value) -> np.ndarray:
        """An array of the given shape filled with one backend number."""
        return np.full(shape, value, dtype=object)

    def exp(self, x):  # pragma: no cover - interface
        raise NotImplementedError

    def sqrt(self, x):  # pragma: no cover - interface
        raise NotImplementedError

    def maximum(self, a, b):  # pragma: no cover - interface
        raise NotImplementedError

    def within(self, x, bound: float):
        """``(surely, surely_not)``: boolean arrays for ``|x| < bound``, decided in this backend.

        Non-rigorous backends decide on the computed value, so the two are complementary.
        """
        inside = np.vectorize(lambda v: abs(v) < bound, otypes=[bool])(x)
        return inside, ~inside

    def lower(self, x) -> np.ndarray:
        """Float lower bound of each entry (just the value for non-rigorous backends)."""
        return np.asarray(x, dtype=np.float64)

    def upper(self, x) -> np.ndarray:
        """Float upper bound of each entry (just the value for non-rigorous backends)."""
        return np.asarray(x, dtype=np.float64)

    def __repr__(self):
        return f"<backend {self.name}>"


class NumpyBackend(Backend):
    """IEEE floating point in a numpy dtype."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.name = self.dtype.name

    def vec(self, values):
        arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
        if arr.dtype == object:
            flat = [float(x) for x in arr.ravel()]
            return np.array(flat, dtype=np.float64).reshape(arr.shape).astype(self.dtype)
        return arr.astype(self.dtype)

    def full(self, shape, value):
        return np.full(shape, value, dtype=self.dtype)

    def exp(self, x):
        with np.errstate(over="ignore", under="ignore"):
            return np.exp(x)

    def sqrt(self, x):
        return np.sqrt(x)

    def maximum(self, a, b):
        return np.maximum(a, b)


class ObjectBackend(Backend):
    """Numbers held in numpy object arrays; subclasses give the element type's operations."""

    def _convert(self, x):  # pragma: no cover - interface
        raise NotImplementedError

    def vec(self, values):
        arr = np.asarray(values, dtype=object)
        out = np.empty(arr.shape, dtype=object)
        for idx, x in np.ndenumerate(arr):
            out[idx] = self._convert(x)
        return out

    def exp(self, x):
        return self._exp(x)

    def sqrt(self, x):
        return self._sqrt(x)

    def maximum(self, a, b):
        return self._max(a, b)


class MpmathBackend(ObjectBackend):
    """mpmath at a fixed number of decimal digits (object arrays of mpf)."""

    def __init__(self, dps: int):
        if not 15 <= dps <= MAX_DIGITS:
            raise ValueError(f"mpmath backend needs 15 to {MAX_DIGITS} digits, got {dps}")
        self.dps = int(dps)
        self.name = f"mp{self.dps}"
        self._exp = np.frompyfunc(mpmath.exp, 1, 1)
        self._sqrt = np.frompyfunc(mpmath.sqrt, 1, 1)
        self._max = np.frompyfunc(max, 2, 1)

    def context(self):
        return mpmath.workdps(self.dps)

    def _convert(self, x):
        # unary plus rounds to the working precision
        return +(mpmath.mpf(float(x)) if isinstance(x, (float, np.floating)) else mpmath.mpf(x))

    def lower(self, x):
        return np.vectorize(float, otypes=[np.float64])(x)

    upper = lower


def _arb_from_exact(x) -> flint.arb:
    """The arb of a binary number (int, float or mpf): exact when it fits the precision,
    otherwise a ball that encloses it (still rigorous)."""
    if isinstance(x, mpmath.mpf):
        sign, man, exp, bc = x._mpf_
        if not man and exp:  # mpmath encodes inf and nan as a zero mantissa with an exponent
            raise ValueError(f"non-finite value {x}")
        man = -int(man) if sign else int(man)
        if exp >= 0:
            return flint.arb(man << exp)
        return flint.arb(flint.fmpq(man, 1 << -exp))  # rounds outward if bc > precision
    if isinstance(x, (int, np.integer)):
        return flint.arb(int(x))
    if isinstance(x, (float, np.floating)):
        return _arb_from_exact(mpmath.mpf(float(x)))
    if isinstance(x, flint.arb):
        return x
    raise TypeError(f"cannot convert {type(x).__name__} exactly to a ball")


class ArbBackend(ObjectBackend):
    """Ball arithmetic (Arb via python-flint) at ``prec`` bits: rigorous enclosures."""

    rigorous = True

    def __init__(self, prec: int):
        if not 53 <= prec <= MAX_BITS:
            raise ValueError(f"ball backend needs 53 to {MAX_BITS} bits, got {prec}")
        self.prec = int(prec)
        self.name = f"arb{self.prec}"
        self._exp = np.frompyfunc(lambda v: v.exp(), 1, 1)
        self._sqrt = np.frompyfunc(lambda v: v.sqrt(), 1, 1)
        # Softmax is invariant under any common shift, so the shift need not be a rigorous max:
        # the exact midpoint of the larger ball is as good and keeps the result rigorous.
        self._max = np.frompyfunc(lambda a, b: a.mid() if a.mid() >= b.mid() else b.mid(), 2, 1)
        self._contains_zero = np.vectorize(lambda v: v.contains(0), otypes=[bool])

    def context(self):
        return flint.ctx.workprec(self.prec)

    def _convert(self, x):
        return _arb_from_exact(x)

    def within(self, x, bound: float):
        """Decided on the balls: surely inside, surely outside, or neither (undecided)."""
        b = flint.arb(bound)
        surely = np.vectorize(lambda v: bool(v < b) and bool(v > -b), otypes=[bool])(x)
        surely_not = np.vectorize(lambda v: bool(v >= b) or bool(v <= -b), otypes=[bool])(x)
        return surely, surely_not

    def degenerate_rows(self, v, base, stat):
        """Rows whose statistic ball contains 0: degenerate, or not distinguishable from
        degenerate at this precision -- either way the norm with eps = 0 cannot be evaluated."""
        return self.is_zero(stat[..., 0])

    def is_zero(self, x):
        return np.atleast_1d(self._contains_zero(x))

    def lower(self, x):
        return arb_bounds(np.asarray(x, dtype=object))[0]

    def upper(self, x):
        return arb_bounds(np.asarray(x, dtype=object))[1]


def arb_floor(x: flint.arb) -> float:
    """A float <= every point of the ball."""
    lo = x.lower()
    f = float(lo.mid())
    return f if flint.arb(f) <= lo else math.nextafter(f, -math.inf)


def arb_ceil(x: flint.arb) -> float:
    """A float >= every point of the ball."""
    hi = x.upper()
    f = float(hi.mid())
    return f if flint.arb(f) >= hi else math.nextafter(f, math.inf)


def arb_bounds(x: np.ndarray):
    """Float arrays ``lo <= x <= hi`` (entrywise, rigorous) for an object array of balls."""
    flat = list(x.flat)
    mid = np.array([float(v.mid()) for v in flat], dtype=np.float64).reshape(x.shape)
    rad = np.array([float(v.rad()) for v in flat], dtype=np.float64).reshape(x.shape)
    # float() rounds to nearest: the midpoint may move by half a spacing (unless it converted
    # exactly) and the radius shrink by half an ulp; cover both
    exact = np.array([flint.arb(f) == v.mid() for f, v in zip(mid.flat, flat)]).reshape(x.shape)
    point = np.array([v.is_exact() for v in flat], dtype=bool).reshape(x.shape)
    moved = np.where(exact, 0.0, np.spacing(np.abs(mid)))
    rad = np.where(point & exact, 0.0, np.nextafter(rad * (1 + 2.0**-50) + moved, np.inf))
    # mid -+ rad rounds once more, unless rad is 0
    lo = np.where(rad == 0, mid, np.nextafter(mid - rad, -np.inf))
    hi = np.where(rad == 0, mid, np.nextafter(mid + rad, np.inf))
    bad = ~(np.isfinite(mid) & np.isfinite(rad))
    lo[bad], hi[bad] = -np.inf, np.inf
    return lo, hi


_PATTERN = re.compile(r"^(float64|float32|float16|mp(\d+)|arb(\d+))$")


def get_backend(spec) -> Backend:
    """A backend from its name: ``float64``, ``float32``, ``float16``, ``mp<dps>``, ``arb<bits>``."""
    if isinstance(spec, Backend):
        return spec
    m = _PATTERN.match(str(spec))
    if not m:
        raise ValueError(
            f"unknown backend {spec!r}; use float64, float32, float16, mp<digits> or arb<bits>"
        )
    if m.group(2):
        return MpmathBackend(int(m.group(2)))
    if m.group(3):
        return ArbBackend(int(m.group(3)))
    return NumpyBackend(spec)
