"""The orthonormal frame of the constructions, and vectors written on it.

Every construction vector lies in the span of three orthonormal vectors of R^d:

* ``c_1 = (e_1 - 1/d) / sqrt((d-1)/d)`` -- the centred unit vector with the largest possible
  coordinate: first coordinate ``sqrt((d-1)/d)``, every other ``-1/sqrt(d(d-1))``;
  ``sqrt(d) c_1`` is the LayerNorm output with the largest entry, ``sqrt(d-1)``;
* ``p = (e_2 - e_3)/sqrt(2)`` -- centred, orthogonal to ``c_1`` and zero in the first
  coordinate: second coordinate ``1/sqrt(2)``, third ``-1/sqrt(2)``, every other 0 (needs
  ``d >= 3``; at ``d = 2`` the centred space is the line of ``c_1`` and ``p`` is the zero
  vector);
* ``one = (1, ..., 1)/sqrt(d)`` -- the direction LayerNorm removes: every coordinate
  ``1/sqrt(d)``;

and the first standard basis vector is ``e_1 = sqrt((d-1)/d) c_1 + one/sqrt(d)``.  Its unit
partner in the plane of ``c_1`` and ``one``,

* ``q = (c_1 - sqrt(d-1) one)/sqrt(d)`` -- orthogonal to ``e_1``, zero in the first coordinate,
  every other ``-1/sqrt(d-1)`` (any ``d >= 2``),

spans with ``e_1`` the plane RMSNorm constructions use: ``N(e_1) = sqrt(d) e_1`` is the RMSNorm
output with the largest entry, ``sqrt(d)``, and unlike ``p`` the vector ``q`` exists at ``d = 2``.

So a vector ``v`` of the span is fixed by three numbers: its first coordinate ``f``, the
common value ``r`` of its coordinates beyond the third, and the half-difference ``s`` of the
second and third, ``v = (f, r + s, r - s, r, ..., r)`` (at ``d = 2``: ``(f, r)``).  A
:class:`FrameVector` holds these exactly (sympy); its coefficients on the frame are

    <v, c_1> = sqrt((d-1)/d) (f - r),   <v, p> = sqrt(2) s,   <v, one> = (f + (d-1) r)/sqrt(d),

and the inner product of two vectors is the three-term sum ``f f' + (d-1) r r' + 2 s s'``.
Building, combining and compiling a construction is therefore O(1) symbolic work in ``d``; only
a numeric d-vector (:meth:`FrameVector.matrix`, or the evaluation in
:mod:`constructions.regression`) has ``d`` entries.  Exact zeros stay exact (``e_1`` is
``(1, 0, 0)``, not a cancellation of frame terms).

Vectors are written as linear sympy expressions in the vector symbols of
:mod:`constructions.symbols` (``c_1, p, one, e_1`` and named vectors), and
:meth:`FrameVector.of` reads off their ``(f, r, s)``.
"""

from __future__ import annotations

import sympy

from constructions.symbols import C1, E1, ONE, P, Q, d, inner

#: (f, r, s) of the frame vectors, of e_1 and of q, as functions of d (module docstring)
PATTERN = {
    C1: (sympy.sqrt((d - 1) / d), -1 / sympy.sqrt(d * (d - 1)), sympy.Integer(0)),
    P: (sympy.Integer(0), sympy.Integer(0), 1 / sympy.sqrt(2)),
    ONE: (1 / sympy.sqrt(d), 1 / sympy.sqrt(d), sympy.Integer(0)),
    E1: (sympy.Integer(1), sympy.Integer(0), sympy.Integer(0)),
    Q: (sympy.Integer(0), -1 / sympy.sqrt(d - 1), sympy.Integer(0)),
}
#: the frame, and e_1 written on it
FRAME = (C1, P, ONE)
E1_ON_FRAME = sympy.sqrt((d - 1) / d) * C1 + ONE / sympy.sqrt(d)


class FrameVector:
    """``(f, r, s)``: the vector ``(f, r + s, r - s, r, ..., r)`` of R^d (module docstring)."""

    __slots__ = ("d", "pattern")

    def __init__(self, width: int, pattern):
        self.d = int(width)
        f, r, s = (sympy.sympify(c) for c in pattern)
        # at d = 2 there is no second/third split: p is the zero vector
        self.pattern = (f, r, s if self.d >= 3 else sympy.Integer(0))

    @classmethod
    def of(cls, expr, width: int, known: dict | None = None) -> "FrameVector":
        """The vector of a linear combination of vector symbols.

        ``expr`` is linear in ``c_1, p, one, e_1, q`` and in the symbols of ``known`` (a mapping
        to :class:`FrameVector`); each of ``f, r, s`` is ``expr`` with every vector symbol
        replaced by its own ``f``, ``r`` or ``s`` (they are linear functionals).
        """
        known = known or {}
        parts = []
        for j in range(3):
            rule = {sym: pat[j].subs(d, width) for sym, pat in PATTERN.items()}
            rule.update({sym: vec.pattern[j] for sym, vec in known.items()})
            parts.append(sympy.sympify(expr).xreplace(rule))
        return cls(width, parts)

    def dot(self, other: "FrameVector"):
        """``<u, v> = f f' + (d-1) r r' + 2 s s'``."""
        (f, r, s), (f2, r2, s2) = self.pattern, other.pattern
        return f * f2 + (self.d - 1) * r * r2 + 2 * s * s2

    def frame_coefficients(self) -> tuple:
        """``(<v, c_1>, <v, p>, <v, one>)``: the coefficients on the orthonormal frame."""
        f, r, s = self.pattern
        w = self.d
        return (sympy.sqrt(sympy.Rational(w - 1, w)) * (f - r), sympy.sqrt(2) * s,
                (f + (w - 1) * r) / sympy.sqrt(w))

    def map(self, f) -> "FrameVector":
        """Apply ``f`` to each of ``f, r, s``."""
        return FrameVector(self.d, [f(c) for c in self.pattern])

    @property
    def free_symbols(self) -> set:
        return set().union(*(c.free_symbols for c in self.pattern))

    def coordinates(self) -> list:
        """The distinct coordinates ``[f, r + s, r - s, r][:min(d, 4)]`` (coordinate 4 on is ``r``)."""
        f, r, s = self.pattern
        return [f, r + s, r - s, r][:min(self.d, 4)] if self.d >= 3 else [f, r]

    def matrix(self) -> sympy.Matrix:
        """The full ``d x 1`` sympy vector (``d`` entries: for moderate ``d`` only)."""
        head = self.coordinates()
        return sympy.Matrix(head + head[-1:] * (self.d - len(head)))


def frame_vector(axis, width: int) -> FrameVector:
    """``c_1``, ``p``, ``one``, ``e_1`` or ``q`` at width ``d``."""
    return FrameVector.of(axis, width)


def inner_products(expr, width: int, known: dict):
    """``expr`` with every ``inner(u, v)`` replaced by its value.

    ``u`` and ``v`` are linear combinations of frame symbols and of the vectors in ``known``.
    """
    def value(u, v):
        return FrameVector.of(u, width, known).dot(FrameVector.of(v, width, known))

    return sympy.sympify(expr).replace(lambda e: getattr(e, "func", None) == inner,
                                       lambda e: value(*e.args))


def one(width: int) -> sympy.Matrix:
    return frame_vector(ONE, width).matrix()


def e1(width: int) -> sympy.Matrix:
    return frame_vector(E1, width).matrix()


def c1(width: int) -> sympy.Matrix:
    return frame_vector(C1, width).matrix()


def perp(width: int) -> sympy.Matrix:
    return frame_vector(P, width).matrix()
