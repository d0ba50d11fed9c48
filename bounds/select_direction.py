"""The direction certificate: a proven upper bound on the max-min margin of *every* head on the
outputs of one placement of the select task read at ``s`` (softmax attention without post-norm).

**The pencil** (:mod:`constructions.pencil`).  In the frame ``e, f`` of the outputs' plane the
class-``n`` inputs are the points ``H + t B_n``, ``B_n = P_n - H = (x_n - a) e + delta f``,
``t`` in ``[T_n, 1]`` (``delta > 0``; ``x_n``, ``T_n`` increasing, ``T_L = 1``), and their
convex hull is that segment ``S_n``.  For the neighbours ``n, n+1`` the two margin conditions at
``z_A`` in ``S_n`` and ``z_B`` in ``S_{n+1}`` add up to (the biases cancel; conditions are affine
in ``z``, so they hold on the hulls)

    <u_{n+1} - u_n, y> >= 2 m   for every y in D_n = S_{n+1} - S_n
                                 = { t' A_n - t B_n : t in [T_n, 1], t' in [T_{n+1}, 1] },

``A_n = B_{n+1}``.

**One direction.**  Fix a unit ``theta = cos(phi) e + sin(phi) f``.  If every ``D_n`` holds a
point ``r_n theta`` with ``r_n > 0``, dividing by ``r_n`` and summing telescopes:
``2 m sum_n 1/r_n <= <u_L - u_0, theta> <= 2`` (every ``|u_c| <= 1``; only the part of ``u_c``
in the plane enters), so

    m <= 1 / sum_{n=0}^{L-1} 1/r_n.                                                  (D)

*The point.*  Write ``c_n = cos(phi) delta - sin(phi)(x_n - a)``, the cross product of ``theta``
with ``B_n``.  A point ``t' A_n - t B_n`` is on the line of ``theta`` iff ``t' c_{n+1} = t c_n``.
Assume ``c_n > 0`` for every ``n`` and ``T_{n+1} <= k_n = c_n/c_{n+1} <= 1/T_n``.  Then
``t' = k_n t`` and the point is ``t (k_n A_n - B_n) = t rho_n theta`` with ``rho_n = <theta, k_n
A_n - B_n>``; multiplying by ``c_{n+1}``, ``rho_n c_{n+1} = cos(phi)(c_n (x_{n+1} - a) - c_{n+1}
(x_n - a)) + sin(phi) delta (c_n - c_{n+1})``, and ``c_n - c_{n+1} = sin(phi) g_n``, ``c_n (x_{n+1}
- a) - c_{n+1}(x_n - a) = cos(phi) delta g_n`` (``g_n = x_{n+1} - x_n``), so ``rho_n = delta g_n /
c_{n+1} > 0``.  The ``t`` with ``t`` in ``[T_n, 1]`` and ``k_n t`` in ``[T_{n+1}, 1]`` form the
interval ``[max(T_n, T_{n+1}/k_n), min(1, 1/k_n)]``, not empty by the assumption; its least ``t``
gives

    1/r_n = min(c_{n+1}/T_n, c_n/T_{n+1}) / (delta g_n).

At ``phi = 0`` every ``c_n = delta``, ``k_n = 1`` and ``1/r_n = 1/(T_{n+1} g_n)``: (D) is then the
level bound of the placement (:mod:`bounds.select_margin`, before its supremum over
placements), which needs no assumption (the point ``T_{n+1} g_n e`` is in every ``D_n``: both
classes at the level ``T_{n+1}``).  So the certificate is at most the level bound, and it is
tight where the level head's rows have a diameter of their enclosing circle along one
direction: (D) along that diameter is the head's margin ``m/R``.

:func:`placement_upper` picks ``phi`` by a float search (only the choice: any ``phi`` gives a
valid bound), then evaluates (D) in ball arithmetic (every assumption decided by the balls;
where one is not certain, the level bound of the placement, ``phi = 0``, is returned).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import flint
import numpy as np

from constructions.pencil import Frame
from verify.backends import _arb_from_exact, arb_ceil

#: the precision of the certificate's balls
PREC = 128
#: the float grid of directions ``phi`` (radians) searched before a local refinement
PHI_GRID = np.linspace(-1.55, 1.55, 125)

#: balls for :class:`constructions.pencil.Frame`
ARB = SimpleNamespace(sqrt=lambda v: flint.arb(v).sqrt(), exp=lambda v: flint.arb(v).exp(),
                      dot=lambda u, v: sum((p * q for p, q in zip(u, v)), flint.arb(0)))


def inverse_steps(x, t, a, delta, phi):
    """``(1/r_n, certified)`` of the module docstring for the positions ``x``, the weights ``t``
    (``T_0..T_L``) and the direction ``phi``, in floats (``phi`` a float) or balls (``phi`` a
    ball; ``certified`` then means every assumption is decided true by the balls)."""
    if isinstance(phi, flint.arb):
        cos, sin = phi.cos(), phi.sin()
    else:
        cos, sin = math.cos(phi), math.sin(phi)
    c = np.array([cos * delta - sin * (xn - a) for xn in x], dtype=object if isinstance(phi, flint.arb) else float)
    gaps = np.diff(x)
    first, second = c[1:] / t[:-1], c[:-1] / t[1:]
    conditions = np.concatenate([c, c[:-1] - t[1:] * c[1:], c[1:] - t[:-1] * c[:-1]])
    if isinstance(phi, flint.arb):
        ok = all(v > 0 for v in conditions[:len(c)]) and all(v >= 0 for v in conditions[len(c):])
        return [p.min(q) / (delta * g) for p, q, g in zip(first, second, gaps)], ok
    ok = bool(np.all(c > 0) and np.all(conditions[len(c):] >= 0))
    return np.minimum(first, second) / (delta * gaps), ok


def _float_sum(frame: Frame, L: int, phi: float) -> float:
    x, t = frame.line(L)
    steps, ok = inverse_steps(np.asarray(x, float), np.asarray(t, float), frame.a, frame.delta, phi)
    return float(steps.sum()) if ok else -1.0


def best_direction(frame: Frame, L: int) -> float:
    """The ``phi`` with the largest float ``sum 1/r_n`` (a grid, then a bounded scalar search
    around its best point); ``0.0`` (the level bound) where none is larger."""
    from scipy import optimize  # loaded only where a certificate is computed

    values = [_float_sum(frame, L, p) for p in PHI_GRID]
    i = int(np.argmax(values))
    lo, hi = PHI_GRID[max(i - 1, 0)], PHI_GRID[min(i + 1, len(PHI_GRID) - 1)]
    res = optimize.minimize_scalar(lambda p: -_float_sum(frame, L, p), bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-10})
    best = max([(values[i], float(PHI_GRID[i])), (-res.fun, float(res.x)), (_float_sum(frame, L, 0.0), 0.0)])
    return best[1]


def _arb_vector(v) -> np.ndarray:
    return np.array([_arb_from_exact(x) for x in v], dtype=object)


def placement_upper(h_s, h_a, h_b, d: int, L: int) -> float:
    """A float ``U >= m`` for every head with every ``|u_c| <= 1`` (free biases) on the select
    outputs of the values ``h_s, h_a, h_b`` (exact binary numbers: floats or mpf) at ``L``:
    (D) at :func:`best_direction`, in ball arithmetic, rounded up (module docstring).  ``e_s``
    only translates every output, which changes no margin."""
    float_frame = Frame(np.zeros(d), *(np.array([float(x) for x in v]) for v in (h_s, h_a, h_b)), d)
    with flint.ctx.workprec(PREC):
        vec = [_arb_vector(v) for v in (h_s, h_a, h_b)]
        frame = Frame(np.array([flint.arb(0)] * d, dtype=object), *vec, d, ARB)
        if not frame.X > 0:
            return 0.0 if frame.X == 0 else math.inf
        x, t = frame.line(L, ARB)
        level = sum((1 / (t[i + 1] * (x[i + 1] - x[i])) for i in range(L)), flint.arb(0))
        best = level
        if frame.delta > 0 and float_frame.delta > 0:
            phi = best_direction(float_frame, L)
            if phi != 0.0:
                steps, ok = inverse_steps(x, t, frame.a, frame.delta, flint.arb(phi))
                total = sum(steps, flint.arb(0))
                if ok and total > level:
                    best = total
        return arb_ceil(1 / best)
