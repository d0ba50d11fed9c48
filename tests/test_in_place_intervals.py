"""The in-place paths of the interval arithmetic and of the arc bound give the same floats as the
plain formulas they stand for, and commands start numpy with one BLAS thread."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bounds.arc_lower import _Boxes, _first_boxes
from verify import intervals
from verify.intervals import Iv

_ULP, _TINY = 2.0**-52, 5e-324  # 2^-52 and the smallest subnormal, written out independently

FLOATS = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True, width=64)
SHAPES = st.sampled_from([(1,), (3,), (2, 3), (4, 1, 2)])


def _same(a, b) -> bool:
    """Equal as floats, bit for bit (``-0.0`` is not ``0.0``), every ``nan`` equal to every ``nan``
    (IEEE leaves a ``nan``'s sign to the operation)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    keep = ~np.isnan(a)
    return a[keep].tobytes() == b[keep].tobytes()


@settings(max_examples=150, deadline=None)
@given(SHAPES.flatmap(lambda s: arrays(np.float64, s, elements=FLOATS)))
def test_widening_is_the_plain_formula(x):
    copy = x.copy()
    with np.errstate(all="ignore"):  # inf - inf is nan on both sides: no warning wanted
        _widening_agrees(x)
    assert _same(x, copy)  # the argument is left alone


def _widening_agrees(x):
    assert _same(intervals._down(x), x - (np.abs(x) * _ULP + _TINY))
    assert _same(intervals._up(x), x + (np.abs(x) * _ULP + _TINY))


@given(FLOATS)
def test_widening_scalars_and_zero_dimensional_arrays(v):
    plain = np.float64(v)
    with np.errstate(all="ignore"):
        for x in (v, plain, np.array(v)):
            assert _same(intervals._down(x), plain - (np.abs(plain) * _ULP + _TINY))
            assert _same(intervals._up(x), plain + (np.abs(plain) * _ULP + _TINY))


def _plain_product(a: Iv, b: Iv):
    p = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
    lo = np.minimum(np.minimum(p[0], p[1]), np.minimum(p[2], p[3]))
    hi = np.maximum(np.maximum(p[0], p[1]), np.maximum(p[2], p[3]))
    return lo - (np.abs(lo) * _ULP + _TINY), hi + (np.abs(hi) * _ULP + _TINY)


def _plain_quotient(a: Iv, b: Iv):
    with np.errstate(all="ignore"):
        q = (a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi)
        lo = np.minimum(np.minimum(q[0], q[1]), np.minimum(q[2], q[3]))
        hi = np.maximum(np.maximum(q[0], q[1]), np.maximum(q[2], q[3]))
        pos = b.lo > 0
        return (np.where(pos, lo - (np.abs(lo) * _ULP + _TINY), -np.inf),
                np.where(pos, hi + (np.abs(hi) * _ULP + _TINY), np.inf))


ENDS = st.floats(min_value=-1e300, max_value=1e300, allow_subnormal=True)


@st.composite
def interval_pairs(draw):
    """Two interval arrays of one shape or of broadcasting shapes (the in-place path and the
    fallback), ends ordered."""
    shape = draw(st.sampled_from([((5,), (5,)), ((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1), (1, 2))]))
    out = []
    for s in shape:
        a = draw(arrays(np.float64, s, elements=ENDS))
        b = draw(arrays(np.float64, s, elements=ENDS))
        out.append(Iv(np.minimum(a, b), np.maximum(a, b)))
    return out


@settings(max_examples=150, deadline=None)
@given(interval_pairs())
def test_products_and_quotients_are_the_plain_formulas(pair):
    a, b = pair
    with np.errstate(all="ignore"):
        for got, want in ((a * b, _plain_product(a, b)), (b * a, _plain_product(b, a)),
                          (a / b, _plain_quotient(a, b))):
            assert _same(got.lo, want[0]) and _same(got.hi, want[1])


def test_infeasible_with_the_tangents_given_is_the_same_test():
    for L in (64, 512, 4096):
        boxes = _Boxes(L)
        Sa, Sb, ca, cb = _first_boxes(1e-3 / L, 1.0, 1e3, L, k=16)
        tangents = boxes._tangent_range(Sa, Sb, ca, cb)
        mask = boxes.infeasible(Sa, Sb, ca, cb)
        assert np.array_equal(mask, boxes.infeasible(Sa, Sb, ca, cb, tangents))
        assert mask.any() and not mask.all()  # the grid holds both kinds of box


_THREADS = """
import sys
sys.argv[0] = "-m"  # as a command started with python -m (constructions reads argv[0])
import os, constructions, numpy
print(os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")))
"""


def _command_env(**extra) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env.update(extra)
    return subprocess.run([sys.executable, "-c", _THREADS], env=env, capture_output=True,
                          text=True, check=True).stdout.split()


def test_commands_start_numpy_with_one_blas_thread_unless_told():
    value, threads = _command_env()
    assert value == "1" and threads == "1"  # no BLAS worker thread besides the main one
    assert _command_env(OPENBLAS_NUM_THREADS="2")[0] == "2"  # the caller's choice stands
