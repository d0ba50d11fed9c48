"""Exact (sympy) unit vectors of R^d used by the constructions.

* ``one``  -- ``(1, ..., 1)/sqrt(d)``, the direction LayerNorm removes;
* ``c1``   -- the centred unit vector with the largest possible coordinate:
  ``(e_1 - 1/d)/sqrt((d-1)/d)``, first coordinate ``sqrt((d-1)/d)``; ``sqrt(d) c1`` is the
  LayerNorm output with the largest entry, ``sqrt(d-1)``;
* ``perp`` -- ``(e_2 - e_3)/sqrt(2)``: centred, orthogonal to ``c1`` and zero in the first
  coordinate (needs ``d >= 3``; at ``d = 2`` the centred space is the line of ``c1`` and
  ``perp`` is returned as the zero vector, only ever used with coefficient 0 there);
* ``e1``   -- the first standard basis vector.
"""

from __future__ import annotations

import sympy


def one(d: int) -> sympy.Matrix:
    return sympy.ones(d, 1) / sympy.sqrt(d)


def e1(d: int) -> sympy.Matrix:
    v = sympy.zeros(d, 1)
    v[0] = 1
    return v


def c1(d: int) -> sympy.Matrix:
    return (e1(d) - sympy.ones(d, 1) / d) / sympy.sqrt(sympy.Rational(d - 1, d))


def perp(d: int) -> sympy.Matrix:
    v = sympy.zeros(d, 1)
    if d >= 3:
        v[1], v[2] = 1 / sympy.sqrt(2), -1 / sympy.sqrt(2)
    return v
