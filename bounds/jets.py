"""First-order interval jets: enclosures of a function and of its gradient over a box.

A :class:`Jet` carries an interval :class:`~verify.intervals.Iv` ``v`` and a tuple ``g`` of
intervals, one per input variable.  Started from the inputs ``x_i = Jet(X_i, e_i)`` (``X_i`` the
box's interval of variable ``i``, ``e_i`` the unit gradient), every operation applies the sum,
product, quotient and square-root rules of differentiation to the intervals, so by induction
over the operations, for every point ``x`` of the box the value and the gradient of each
intermediate function at ``x`` lie in its ``v`` and ``g`` (interval arithmetic encloses every
value a rational expression takes on its interval arguments; a square root whose argument is
not surely positive, or a divisor that is not, gives an infinite derivative enclosure, never a
wrong one).  A jet with no gradient (``g = ()``) is plain interval arithmetic, used at a box's
centre.

**The mean-value form.**  If ``f`` is differentiable on the box ``X = [c - h, c + h]`` (``c``
its centre, ``h >= 0`` componentwise), then for ``x`` in ``X``,
``f(x) = f(c) + grad f(xi) . (x - c)`` for some ``xi`` on the segment from ``c`` to ``x``, so

    f(x) <= sup f(c) + sum_i |grad_i f|(X) h_i                                 (:func:`mean_value_upper`)

with ``f(c)`` enclosed by a gradient-free evaluation and ``grad f`` by the jet over the box.  The
excess over ``sup_X f`` is second order in ``h`` near a smooth maximum (where the gradient
vanishes), which is what lets a branch and bound close a tolerance with few boxes.
"""

from __future__ import annotations

import numpy as np

from verify.intervals import Iv


def _iv(x) -> Iv:
    return x if isinstance(x, Iv) else Iv(x)


class Jet:
    """An interval value ``v`` with interval partial derivatives ``g`` (module docstring)."""

    __slots__ = ("v", "g")
    __array_ufunc__ = None  # ``array * Jet`` defers to ``Jet.__rmul__``

    def __init__(self, v, g=()):
        self.v = _iv(v)
        self.g = tuple(g)

    @staticmethod
    def _of(x) -> "Jet":
        return x if isinstance(x, Jet) else Jet(x)

    def _grads(self, other: "Jet"):
        n = max(len(self.g), len(other.g))
        zero = Iv(0.0)
        return (self.g or (zero,) * n), (other.g or (zero,) * n)

    def __add__(self, other):
        o = Jet._of(other)
        a, b = self._grads(o)
        return Jet(self.v + o.v, tuple(x + y for x, y in zip(a, b)))

    __radd__ = __add__

    def __neg__(self):
        return Jet(-self.v, tuple(-x for x in self.g))

    def __sub__(self, other):
        return self + (-Jet._of(other))

    def __rsub__(self, other):
        return Jet._of(other) + (-self)

    def __mul__(self, other):
        if not isinstance(other, Jet):  # a constant (float array or interval)
            return Jet(self.v * other, tuple(x * other for x in self.g))
        a, b = self._grads(other)
        return Jet(self.v * other.v, tuple(x * other.v + self.v * y for x, y in zip(a, b)))

    __rmul__ = __mul__

    def __truediv__(self, other):
        o = Jet._of(other)
        q = self.v / o.v
        a, b = self._grads(o)
        return Jet(q, tuple((x - q * y) / o.v for x, y in zip(a, b)))

    def __rtruediv__(self, other):
        return Jet._of(other) / self

    def square(self) -> "Jet":
        return Jet(self.v.square(), tuple(2.0 * (self.v * x) for x in self.g))

    def sqrt(self) -> "Jet":
        s = self.v.sqrt()
        return Jet(s, tuple(x / (2.0 * s) for x in self.g))

    def __getitem__(self, key):
        shape = np.broadcast_shapes(self.v.lo.shape, *(x.lo.shape for x in self.g))
        return Jet(_broadcast(self.v, shape)[key], tuple(_broadcast(x, shape)[key] for x in self.g))

    def sum(self) -> "Jet":
        """The sum over the last axis (a pairwise tree of interval additions); a gradient that
        is constant along the axis (held unbroadcast) is summed as often as the value."""
        shape = np.broadcast_shapes(self.v.lo.shape, *(x.lo.shape for x in self.g))
        return Jet(_tree_sum(_broadcast(self.v, shape)),
                   tuple(_tree_sum(_broadcast(x, shape)) for x in self.g))


def _broadcast(x: Iv, shape) -> Iv:
    return Iv(np.broadcast_to(x.lo, shape), np.broadcast_to(x.hi, shape))


def where(mask: np.ndarray, a: Jet, b: Jet) -> Jet:
    """``a`` where ``mask``, else ``b``, entry by entry (values and gradients, broadcast to the
    mask's shape): on each entry it is one of the two, so their enclosures are its."""
    def pick(x, y):
        x, y = _broadcast(x, mask.shape), _broadcast(y, mask.shape)
        return Iv(np.where(mask, x.lo, y.lo), np.where(mask, x.hi, y.hi))
    return Jet(pick(a.v, b.v), tuple(pick(x, y) for x, y in zip(a.g, b.g)))


def _tree_sum(x: Iv) -> Iv:
    """``sum`` over the last axis by halving (every addition rounded outward)."""
    if x.lo.ndim == 0:
        return x
    out = x
    while out.lo.shape[-1] > 1:
        n = out.lo.shape[-1]
        if n % 2:
            pad = [(0, 0)] * (out.lo.ndim - 1) + [(0, 1)]
            out = Iv(np.pad(out.lo, pad), np.pad(out.hi, pad))
        out = out[..., 0::2] + out[..., 1::2]
    return out[..., 0]


def mean_value_upper(at_centre: Jet, over_box: Jet, half_widths) -> np.ndarray:
    """``sup f(c) + sum_i |grad_i f|(X) h_i`` rounded up (module docstring), per box: an upper
    bound of ``f`` on the box ``[c - h, c + h]``; ``+inf`` where an enclosure is not finite."""
    total = Iv(at_centre.v.hi)
    for grad, h in zip(over_box.g, half_widths):
        total = total + abs(grad) * Iv(h)
    return upper(total)


def upper(x: Iv) -> np.ndarray:
    """The upper ends, ``+inf`` where not finite (an unknown ``nan`` included)."""
    hi = np.asarray(x.hi, dtype=np.float64)
    return np.where(np.isfinite(hi), hi, np.inf)


def concatenate(jets) -> Jet:
    """The jets joined along their last axis (values and gradients broadcast to the leading
    shape of the widest part; a scalar part is one entry)."""
    jets = [Jet._of(j) for j in jets]
    n = max(len(j.g) for j in jets)
    shapes = [np.broadcast_shapes(j.v.lo.shape, *(x.lo.shape for x in j.g)) or (1,) for j in jets]
    lead = np.broadcast_shapes(*(sh[:-1] for sh in shapes))
    cat = lambda ivs: Iv(np.concatenate([np.broadcast_to(x.lo, lead + sh[-1:]) for x, sh in zip(ivs, shapes)], axis=-1),
                         np.concatenate([np.broadcast_to(x.hi, lead + sh[-1:]) for x, sh in zip(ivs, shapes)], axis=-1))
    grads = [cat([j.g[i] if j.g else Iv(0.0) for j in jets]) for i in range(n)]
    return Jet(cat([j.v for j in jets]), grads)
