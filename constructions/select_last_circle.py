r"""The select task read at the last position, softmax attention with pre-norm, a gain *and a
bias*, where the values fill only a closed curve (RMSNorm at ``d = 2``, LayerNorm at ``d = 3``).

The notation is :mod:`constructions.select_last_softmax`'s: the query ``q`` weighs ``s``, each
``a`` and each ``b`` by ``rho_q : 1 : beta_q``, ``rho_q = exp(tau <h_q, h_s - h_a>)``, ``beta_q =
exp(tau <h_q, h_b - h_a>)``, ``v_x = <w, h_x>``.  That construction puts ``h_s = (x_s, c)``, ``h_a =
(alpha, c)``, ``h_b = (alpha, c/2)`` in the interior of the values' ellipse; here the norm's image
is a plane (``N(e)`` lies on the circle of radius ``sqrt(d)`` of the plane: RMSNorm ``R^2``,
LayerNorm the centred plane of ``R^3``), so with ``eps = 0`` the values ``g * N(e) + beta`` fill
only a curve.

**Why the bias.**  Without it the curve is an ellipse centred at 0.  The construction needs two
values on one line orthogonal to ``h_s - h_a`` (``rho_b = rho_a``) *on the same side of that
line's foot* (so that ``<h_b, h_b - h_a> < 0``: ``b`` weighs less than ``a`` from its own query);
the foot lies at ``sigma/|h_s - h_a|`` from 0, inside a centred ellipse whose chord ``h_s - h_a``
is longer than ``sqrt(2 sigma)``, and a line through an inner point meets the curve once on each
side of it.  A bias moves the curve away from 0, and the three points above lie on one *circle*:

    g = gam (1, ..., 1),  beta = beta_1 f_1 + (3c/4) f_2,  r = |g| = gam sqrt(d),

with ``f_1, f_2`` an orthonormal frame of the image plane (RMSNorm ``e_1, e_2``; LayerNorm ``(e_1
- e_2)/sqrt 2``, ``(e_1 + e_2 - 2 e_3)/sqrt 6``), so the values are the circle of radius ``r``
about ``beta``.  The points ``(alpha, c)`` and ``(alpha, c/2)`` (coordinates on ``f_1, f_2``) are
the ends of a chord along ``f_2`` at ``c/4`` on either side of the centre's height ``3c/4``;
``(alpha, c)`` and ``(x_s, c)`` the ends of a chord along ``f_1`` at ``c/4`` above it, so
``beta_1 = (x_s + alpha)/2`` and ``r^2 = X^2/4 + c^2/16`` (``X = x_s - alpha``).  The three points
are those of :mod:`constructions.select_last_softmax`, so its scores, values and error envelope
hold verbatim (``rho_a = rho_b = exp(tau alpha X)``, ``beta_a = beta_b^2``, ``beta_b = exp(-c^2/(4
sqrt d))``, ``v_b = v_a`` with ``w = W f_1``): every select input's error lies in ``[C + g(n_a), C +
G(n_a)]`` and the parameters solve select to ``L`` if ``C`` lies in ``(-1/2 - min g, 1/2 - max G)``
and ``y(s)`` within ``1/2`` of 0 (:func:`constructions.select_last_softmax.errors`).

*Budget.*  ``|beta|^2 = beta_1^2 + 9 c^2/16`` binds: at budget ``B`` take ``beta_1 = b = sqrt(B^2 -
9 c^2/16)``; ``alpha X = sigma = sqrt(d) log rho`` and ``X = 2 (b - alpha)`` give ``alpha = (b -
sqrt(b^2 - 2 sigma))/2`` (:func:`geometry`), and then ``r^2 = (b - alpha)^2 + c^2/16 <= B^2`` where
``alpha >= -(sqrt(B^2 - c^2/16) - b)`` (always for ``sigma >= 0``; checked on the grid).  The
read-out ``|w| = D/X <= B``.  The value gap is ``X ~ 2 B`` (the count task's geometry on one
axis of the gain reaches ``sqrt(d) B``), so the rate is the count task's, 1.

*Embeddings and constants.*  ``e_x = lam N_x/sqrt(d)`` with ``N_x = (h_x - beta)/gam`` (centred
for LayerNorm, so ``N(e_x) = N_x`` for both kinds at ``eps = 0``) and one scale ``lam`` for all:
``<w, e_x> = lam W <f_1, N_x>/sqrt(d)`` is equal for ``a`` and ``b`` (one first coordinate), so
``C_a = C_b = C``, and ``y(s) = C + <w, e_s - e_a> = C + lam W X/r``.  Since ``g(0) = 0 <= G(0)``
the interval of ``C`` lies in ``(-1/2, 1/2)`` and its middle is at least half its width
``wid`` inside, so ``lam = min(B, wid r/(4 D))`` (``|lam W X/r| <= wid/4``) puts ``y(s)`` within
``1/2`` of 0.  The plan is :meth:`constructions.select_last_softmax.GainSoftmaxSelectDesign.plan`
on this geometry; ``L = 1`` is that module's witness (``g = B e_d``, no bias).  Every reported
parameter set is judged on every input.

*Lower bound.*  The count task at the last read is the sub-task ``n_b = 0``
(:func:`bounds.lower.last_select_softmax_lower`; its proof allows the bias, ``|h| <= (1 + M) B``).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from constructions import select_last_softmax as sls
from constructions.cell import Cell, Params
from constructions.select_last_softmax import errors

#: the largest perpendicular part, relative to ``4 B/3`` (where ``|beta|`` reaches ``B``)
C_LIMIT = 0.9


def frame(cell: Cell):
    """The orthonormal frame ``(f_1, f_2)`` of the norm's image plane (module docstring)."""
    d = cell.d
    zero = [mpmath.mpf(0)] * d
    if cell.kind.centred:
        r2, r6 = 1 / mpmath.sqrt(2), 1 / mpmath.sqrt(6)
        f1, f2 = [r2, -r2] + zero[2:], [r6, r6, -2 * r6] + zero[3:]
    else:
        f1, f2 = [mpmath.mpf(1)] + zero[1:], [mpmath.mpf(0), mpmath.mpf(1)] + zero[2:]
    return np.array(f1, dtype=object), np.array(f2, dtype=object)


def geometry(cell: Cell, B, log_rho, c, num=np):
    """``(b, alpha, X, r)`` at budget ``B``, shape ``log rho`` and perpendicular part ``c``
    (module docstring): ``b = sqrt(B^2 - 9 c^2/16)`` the centre's first coordinate, ``alpha`` the
    small root of ``2 alpha (b - alpha) = sigma``, ``X = 2 (b - alpha)``, ``r`` the radius."""
    b = num.sqrt(B**2 - 9 * c**2 / 16)
    sigma = num.sqrt(cell.d) * log_rho
    alpha = (b - num.sqrt(b**2 - 2 * sigma)) / 2
    X = 2 * (b - alpha)
    return b, alpha, X, num.sqrt(X**2 / 4 + c**2 / 16)


class CircleSoftmaxSelectDesign(sls.GainSoftmaxSelectDesign):
    """Softmax attention with pre-norm, a gain and a bias, the values on a circle (RMSNorm at
    ``d = 2``, LayerNorm at ``d = 3``; module docstring)."""

    def _grid(self, L: int, B: float):
        d = self.cell.d
        lr = (2 * math.log(L) + sls.LOG_RHO_STEPS)[:, None, None]
        c_max = min(self.c_top(L), C_LIMIT * 4 * B / 3)
        cc = (c_max * sls.C_FRACTIONS)[None, :, None]
        rho = np.exp(lr)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            _, alpha, X, r = geometry(self.cell, B, lr, cc)
            D = rho + L * sls.D_STEPS[None, None, :]
            D = np.where(D > B * X, B * X, D)
            g_min, G_max = errors(L, rho, D, cc, d)
            width = 1 - (G_max - g_min)
            ok = np.isfinite(width) & (D > 0) & np.isfinite(X) & (X > 0) & (r <= B)
        return lr, cc, D, np.where(ok, width, -np.inf)

    def _params(self, L: int, Bv, lr, c, D) -> Params:
        cell = self.cell
        d = cell.d
        b, alpha, X, r = geometry(cell, Bv, lr, c, mpmath)
        g_min, G_max = errors(L, mpmath.exp(lr), D, c, d, mpmath)
        C = -(g_min + G_max) / 2
        wid = 1 - (G_max - g_min)
        W = -D / X
        f1, f2 = frame(cell)
        beta = b * f1 + (3 * c / 4) * f2
        h = {"s": (alpha + X) * f1 + c * f2, "a": alpha * f1 + c * f2, "b": alpha * f1 + (c / 2) * f2}
        gam = r / mpmath.sqrt(d)
        lam = min(Bv, wid * r / (4 * D))
        e = {x: (lam / mpmath.sqrt(d)) * (hx - beta) / gam for x, hx in h.items()}
        w = W * f1
        v_s = W * (alpha + X)
        w0 = C - v_s - sum(p * q for p, q in zip(w, e["a"]))
        vectors = {"e_s": e["s"], "e_a": e["a"], "e_b": e["b"],
                   "g": np.array([gam] * d, dtype=object), "beta": beta, "w": w}
        return Params(cell, vectors, {"w0": w0})
