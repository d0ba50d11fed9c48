"""Outward-rounded interval arithmetic: every result encloses the exact (rational) value."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verify.intervals import Iv, check_float_mode, norm_upper

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
positive = st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False)


def _interval(a, b) -> Iv:
    return Iv(np.array([min(a, b)]), np.array([max(a, b)]))


def _points(iv: Iv, t: float):
    """Exact rationals inside ``iv``: both ends and one interior point."""
    lo, hi = Fraction(float(iv.lo[0])), Fraction(float(iv.hi[0]))
    return [lo, hi, lo + (hi - lo) * Fraction(t)]


def _pairs(x: Iv, y: Iv, s, t):
    """Exact points of ``x`` and ``y``, every combination."""
    return [(p, q) for p in _points(x, s) for q in _points(y, t)]


def _encloses(iv: Iv, exact: Fraction) -> bool:
    return Fraction(float(iv.lo[0])) <= exact <= Fraction(float(iv.hi[0]))


fractions_ = st.fractions(0, 1)


@settings(max_examples=200, deadline=None)
@given(a=finite, b=finite, c=finite, d=finite, s=fractions_, t=fractions_)
def test_add_sub_mul_enclose(a, b, c, d, s, t):
    x, y = _interval(a, b), _interval(c, d)
    for p, q in _pairs(x, y, s, t):
        assert _encloses(x + y, p + q)
        assert _encloses(x - y, p - q)
        assert _encloses(x * y, p * q)
        assert _encloses(abs(x), abs(p))
        assert _encloses(x.square(), p * p)
        assert _encloses(x ** 3, p ** 3)
        assert _encloses(-x, -p)


@settings(max_examples=200, deadline=None)
@given(a=finite, b=finite, c=positive, d=positive, s=fractions_, t=fractions_)
def test_division_by_positive_intervals_encloses(a, b, c, d, s, t):
    x, y = _interval(a, b), _interval(c, d)
    for p, q in _pairs(x, y, s, t):
        assert _encloses(x / y, p / q)
        assert _encloses(y ** -2, 1 / (q * q))


@settings(max_examples=200, deadline=None)
@given(c=positive, d=positive, t=fractions_)
def test_sqrt_encloses(c, d, t):
    y = _interval(c, d)
    r = y.sqrt()
    for q in _points(y, t):
        lo, hi = Fraction(float(r.lo[0])), Fraction(float(r.hi[0]))
        assert lo >= 0 and lo * lo <= q <= hi * hi


@settings(max_examples=100, deadline=None)
@given(a=finite, b=finite, c=finite, d=finite)
def test_norm_upper_bounds_every_point(a, b, c, d):
    x, y = _interval(a, b), _interval(c, d)
    top = Fraction(float(norm_upper(x, y)[0]))
    for p in (Fraction(a), Fraction(b)):
        for q in (Fraction(c), Fraction(d)):
            assert p * p + q * q <= top * top


def test_division_by_an_interval_around_zero_is_the_whole_line():
    q = Iv(np.array([1.0]), np.array([2.0])) / Iv(np.array([-1.0]), np.array([1.0]))
    assert q.lo[0] == -np.inf and q.hi[0] == np.inf


def test_rounding_is_outward_even_when_the_float_result_is_exact():
    # 0.1 + 0.2 rounds; 1 + 1 does not: both widen by one float, never shrink
    s = Iv(np.array([0.1])) + Iv(np.array([0.2]))
    assert s.lo[0] < 0.30000000000000004 and s.hi[0] >= 0.30000000000000004
    assert _encloses(s, Fraction(0.1) + Fraction(0.2))
    two = Iv(np.array([1.0])) + 1.0
    assert two.lo[0] < 2.0 < two.hi[0]


def test_only_integer_powers():
    with pytest.raises(ValueError):
        Iv(np.array([2.0])) ** 0.5


def test_array_on_the_left_defers_to_the_interval():
    x = Iv(np.array([1.0, -2.0]), np.array([2.0, -1.0]))
    y = np.array([3.0, 0.5]) * x
    assert isinstance(y, Iv)
    assert y.lo[0] < 3.0 and y.hi[0] > 6.0 and y.lo[1] < -1.0 and y.hi[1] > -0.5


def test_float_mode_has_gradual_underflow():
    check_float_mode()  # raises if subnormals were flushed to zero
    assert np.float64(1e-308) * np.float64(1e-10) > 0
