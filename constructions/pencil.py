"""The classification head of the select task read at ``s`` with softmax attention without
post-norm: a pencil of lines through the distractor's point.

**The outputs.**  With ``rho = exp(tau <h_s, h_s - h_a>)`` and ``beta = exp(tau <h_s, h_b -
h_a>)`` the input with ``n_a`` tokens ``a`` and ``n_b`` tokens ``b`` has

    z(n_a, n_b) = e_s + (rho h_s + n_a h_a + n_b beta h_b)/(rho + n_a + beta n_b)
                = H + t (P_{n_a} - H),   t = (rho + n_a)/(rho + n_a + beta n_b),

with ``H = e_s + h_b`` and ``P_n = z(n, 0)`` the count task's outputs, on the segment
``P_0 + x_n e``, ``x_n = X n/(rho + n)``, ``X = |h_a - h_s|``, ``e = (h_a - h_s)/X``.  So the
inputs of class ``n`` lie on the segment from ``P_n`` (``t = 1``) towards ``H``, down to
``t_n = (rho + n)/(rho + n + beta (L - n))`` (the longest input, ``n_b = L - n``; ``t_L = 1``).
``t_n`` increases with ``n``.  Whatever the head, a read-out that reads the count inputs on a
line cannot separate them: the inputs ``(n + 1, L - n - 1)`` fall below ``P_n`` on the line once
``beta (L - n - 1) > rho`` roughly, and at unit norm ``rho`` is bounded.

**A homogeneous head.**  Logits ``l_c(z) = <u_c, z - H>`` (biases ``b_c = -<u_c, H>``) scale
with ``t`` on every segment: ``l_n(z) - l_c(z) = t (l_n(P_n) - l_c(P_n))``.  So if the head has
the margin ``m/t_n`` at every count output ``P_n`` (against every class), every select input of
class ``n`` has margin at least ``t_n m/t_n = m``.

*On the line.*  Write ``H - P_0 = a e - delta f`` (``delta > 0``, ``f`` a unit vector orthogonal
to ``e``; ``delta = 0`` puts ``H`` on the line and no homogeneous head separates the counts).
For ``u_c = k_c e + j_c f``, ``l_c(P_0 + x e) = k_c (x - a) + j_c delta``: a line in ``xi = x - a``
with slope ``k_c`` and intercept ``b_c = j_c delta``.  The one-dimensional head of
:mod:`constructions.classification` with the margins ``m/t_n`` (:func:`line_head`): slopes
rising from ``-1`` by ``s_n = 2 m/(t_n g_n)`` over the gaps ``g_n = x_{n+1} - x_n``, breakpoints
at the midpoints (``b_{n+1} = b_n - s_n (mid_n - a)``); then class ``n`` beats ``n + 1`` at
``P_n`` by ``s_n g_n/2 = m/t_n`` and ``n + 1`` beats ``n`` at ``P_{n+1}`` by the same ``>= m/t_{n+1}``;
the upper envelope is convex, so a neighbour is the strongest competitor.  The slopes sum to 2:
``m = 1/sum_n 1/(t_n g_n)``.

*Norms.*  Adding one vector ``c`` to every ``u_c`` adds ``<c, z - H>`` to every logit and changes
no argmax and no margin; so with ``p_c = (k_c, b_c/delta)`` and any centre ``q`` with
``|p_c - q| <= R`` for every ``c`` (:func:`centre`: nearly the smallest enclosing circle), the head
``u_c = ((p_c - q)_1 e + (p_c - q)_2 f)/R`` has every ``|u_c| <= 1`` and the margin ``m/R`` on every
select input (:func:`margin`).  The certified row's margin is the judge's, on all
``(L+1)(L+2)/2`` inputs.

*Cost.*  Against the count task's head the margin loses the factor ``t_0 = rho/(rho + beta L)``
(about ``rho/(beta L)``: the distractor's total weight against that of ``s``) and ``1/R``.  The
count task's proven ``margin_upper`` (:func:`bounds.margin.margin_upper`) bounds it from above
but does not see that loss: it is an upper bound only.
"""

from __future__ import annotations

import numpy as np


def weights(rho, beta, L: int, n):
    """``t_n = (rho + n)/(rho + n + beta (L - n))`` (module docstring) for the counts ``n``."""
    return (rho + n) / (rho + n + beta * (L - n))


def line_head(x, t, a):
    """``(m, k, b)``: the one-dimensional head with margin ``m/t_n`` at ``x_n`` (module
    docstring), slopes ``k`` and intercepts ``b`` of the lines in ``xi = x - a``; any numbers
    (float arrays or object arrays of mpf)."""
    gaps = np.diff(x)
    inv = 1 / (t[:-1] * gaps)
    m = 1 / inv.sum()
    steps = 2 * m * inv
    k = np.concatenate([[-1 + 0 * m], -1 + np.cumsum(steps)])
    mids = (x[1:] + x[:-1]) / 2 - a
    b = np.concatenate([[0 * m], -np.cumsum(steps * mids)])
    return m, k, b


def centre(points: np.ndarray) -> np.ndarray:
    """The centre of the smallest circle enclosing the float points ``p`` (``(n, 2)``): Welzl's
    incremental algorithm (points in a fixed shuffled order; each point outside the current
    circle is on the boundary of the circle of the points so far).  Any centre gives a valid
    head, with the radius measured from it; the smallest gives the largest margin."""
    p = points[np.random.default_rng(0).permutation(len(points))].tolist()
    c, r2 = p[0], 0.0
    slack = lambda q, c, r2: (q[0] - c[0]) ** 2 + (q[1] - c[1]) ** 2 <= r2 * (1 + 1e-12)
    for i in range(1, len(p)):
        if slack(p[i], c, r2):
            continue
        c, r2 = _two(p[i], p[0])
        for j in range(1, i):
            if slack(p[j], c, r2):
                continue
            c, r2 = _two(p[i], p[j])
            for k in range(j):
                if not slack(p[k], c, r2):
                    c, r2 = _three(p[i], p[j], p[k])
    return np.array(c)


def _two(a, b):
    c = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
    return c, (a[0] - c[0]) ** 2 + (a[1] - c[1]) ** 2


def _three(a, b, c):
    """The circumcircle of three points (the widest pair's circle if they are collinear)."""
    bx, by, cx, cy = b[0] - a[0], b[1] - a[1], c[0] - a[0], c[1] - a[1]
    det = 2 * (bx * cy - by * cx)
    if det == 0:
        return max((_two(a, b), _two(a, c), _two(b, c)), key=lambda cr: cr[1])
    ux = (cy * (bx * bx + by * by) - by * (cx * cx + cy * cy)) / det
    uy = (bx * (cx * cx + cy * cy) - cx * (bx * bx + by * by)) / det
    return (a[0] + ux, a[1] + uy), ux * ux + uy * uy


def margin(x, t, a, delta) -> float:
    """The margin ``m/R`` of the homogeneous head on every select input (float64)."""
    m, k, b = line_head(np.asarray(x, float), np.asarray(t, float), float(a))
    p = np.column_stack([k, b / float(delta)])
    return float(m / np.sqrt(((p - centre(p)) ** 2).sum(axis=1)).max())
