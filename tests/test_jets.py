"""Interval jets (bounds.jets): value and gradient enclosures over boxes, and the mean-value form.

Expectations are independent of the jets: values by plain float evaluation of the same formula
at sampled points of the box, gradients by central differences.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds.jets import Jet, concatenate, mean_value_upper
from verify.intervals import Iv

COEF = np.array([0.5, 1.0, 2.0, 3.0])


def f(x, y):
    """A rational-and-root function of two variables, positive denominators and arguments on
    the boxes drawn (``x, y`` in ``[0.5, 3]``), summed over a small array."""
    terms = ((x.square() + y * COEF + 1.0).sqrt() * x) / (y.square() + COEF)
    return terms.sum()


def f_float(x: float, y: float) -> float:
    return float(np.sum(np.sqrt(x * x + y * COEF + 1.0) * x / (y * y + COEF)))


def box_jets(x0, x1, y0, y1):
    return (Jet(Iv(x0, x1), (Iv(1.0), Iv(0.0))), Jet(Iv(y0, y1), (Iv(0.0), Iv(1.0))))


boxes = st.tuples(st.floats(0.5, 2.5), st.floats(1e-6, 0.5), st.floats(0.5, 2.5), st.floats(1e-6, 0.5))


@settings(max_examples=60, deadline=None)
@given(boxes, st.floats(0, 1), st.floats(0, 1))
def test_enclosures_hold(box, s, t):
    x0, wx, y0, wy = box
    x1, y1 = x0 + wx, y0 + wy
    px, py = x0 + s * wx, y0 + t * wy
    over = f(*box_jets(x0, x1, y0, y1))
    value = f_float(px, py)
    assert over.v.lo - 1e-12 <= value <= over.v.hi + 1e-12
    e = 1e-6
    grad = ((f_float(px + e, py) - f_float(px - e, py)) / (2 * e),
            (f_float(px, py + e) - f_float(px, py - e)) / (2 * e))
    for g, iv in zip(grad, over.g):
        assert iv.lo - 1e-6 <= g <= iv.hi + 1e-6
    # the mean-value form bounds every value of the box, and is tight on small boxes
    xc, yc = 0.5 * (x0 + x1), 0.5 * (y0 + y1)
    centre = f(Jet(Iv(xc)), Jet(Iv(yc)))
    h = (np.array(max(x1 - xc, xc - x0)), np.array(max(y1 - yc, yc - y0)))
    top = float(mean_value_upper(centre, over, h))
    assert value <= top * (1 + 1e-15) + 1e-15
    assert top <= f_float(xc, yc) + sum(max(abs(g.lo), abs(g.hi)) * w for g, w in zip(over.g, h)) + 1e-9


def test_mean_value_form_is_second_order_at_a_maximum():
    """At a smooth maximum (``1 - x^2 - y^2`` at 0) the excess of the mean-value form falls like
    the square of the box: a box 10 times smaller gains a factor about 100."""
    def g(x, y):
        return 1.0 - x.square() - y.square()

    excess = []
    for w in (1e-1, 1e-2):
        top = float(mean_value_upper(g(Jet(Iv(0.0)), Jet(Iv(0.0))), g(*box_jets(-w, w, -w, w)),
                                     (np.array(w), np.array(w))))
        excess.append(top - 1.0)
    assert excess[1] > 0 and 60 < excess[0] / excess[1] < 140


def test_concatenate_and_broadcast_gradients():
    """A gradient held unbroadcast (constant along the array) is summed once per entry."""
    x = Jet(Iv(0.0, 1.0), (Iv(1.0),))
    arr = -x + np.arange(5.0)  # d/dx = -1 for each of the 5 entries
    total = arr.sum()
    assert total.g[0].lo <= -5.0 <= total.g[0].hi and total.g[0].hi - total.g[0].lo < 1e-12
    joined = concatenate([Iv(2.0), arr, x * 3.0])
    assert joined.v.lo.shape == (7,)
    assert np.allclose(joined.g[0].lo, [0.0, -1, -1, -1, -1, -1, 3.0], rtol=1e-14, atol=0)
    assert np.all(joined.g[0].lo <= [0.0, -1, -1, -1, -1, -1, 3.0])
    assert math.isclose(float(joined.sum().v.hi), 2 + 10 + 3, rel_tol=1e-14)


def test_where_takes_each_entry_from_one_side():
    """``where`` keeps value and gradient of ``a`` on the mask and of ``b`` off it, broadcast."""
    from bounds.jets import where

    a = Jet(Iv(np.array([[1.0, 2.0, 3.0]])), (Iv(np.array([[10.0, 20.0, 30.0]])),))
    b = Jet(Iv(-1.0, 1.0), (Iv(5.0),))
    mask = np.array([[True, False, True], [False, True, False]])
    got = where(mask, a, b)
    assert got.v.lo.tolist() == [[1.0, -1.0, 3.0], [-1.0, 2.0, -1.0]]
    assert got.v.hi.tolist() == [[1.0, 1.0, 3.0], [1.0, 2.0, 1.0]]
    assert got.g[0].lo.tolist() == [[10.0, 5.0, 30.0], [5.0, 20.0, 5.0]]
