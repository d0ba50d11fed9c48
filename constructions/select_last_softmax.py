r"""The select task read at the last position, softmax attention with pre-norm and a gain.

Inputs ``(s, x_1..x_m)``, ``x_i`` in {a, b}, ``m <= L``, read at the last position: the query
is ``h_q``, ``q = x_m`` (``s`` when ``m = 0``), the residual ``e_q + A`` (:mod:`verify.inputs`).
With ``n_a`` tokens ``a`` and ``n_b`` tokens ``b`` the attention weights, relative to one ``a``,
are ``rho_q = exp(tau <h_q, h_s - h_a>)`` for ``s`` and ``beta_q = exp(tau <h_q, h_b - h_a>)``
for each ``b``; with ``v_x = <w, h_x>`` the output is

    y = <w, e_q> + w0 + (rho_q v_s + n_a v_a + n_b beta_q v_b)/(rho_q + n_a + n_b beta_q).

**Why the count task's geometry fails.**  The count construction at the last read
(:class:`constructions.tasks.TaskDesign`) has every value on the read axis ``e_1``: ``h_s =
x_s e_1``, ``h_a = alpha e_1`` with ``alpha (x_s - alpha) = sigma = sqrt(d) log rho`` small and
``X = x_s - alpha`` large (``D = <w, h_a - h_s> = -W X``, ``w = W e_1``).  A query ``b`` must count
the ``a`` tokens, so it must score ``s`` against ``a`` as ``a`` does (``rho_b`` near ``rho_a``:
the shape of the segment is pinned to a relative ``1/L``), and no score makes the value of ``b``
vanish: a ``b`` on the axis is read as an ``a`` or an ``s`` or shifts the segment.

**The geometry: a second axis of the gain, b pushed off by scores.**  With ``g = g_1 e_1 + g_2
e_2`` (the other coordinates 0) the values are ``h = (g_1 n_1, g_2 n_2)`` for a normalised
embedding ``N(e) = (n_1, n_2, ...)``; the coordinates that ``g`` ignores absorb the rest of
``|N(e)|^2 = d`` (RMSNorm: ``d >= 3``; LayerNorm, which must also centre ``N(e)``: ``d >= 4``),
so every point of the ellipse's interior is a value.  The construction takes

    h_s = (x_s, c),   h_a = (alpha, c),   h_b = (alpha, c/2),   w = W e_1,   W = -D/X,

so ``h_s - h_a = X e_1`` and ``u = h_b - h_a = -(c/2) e_2`` is orthogonal to it.  Hence

* ``rho_a = exp(tau <h_a, X e_1>) = exp(tau alpha X) = rho`` and ``rho_b = exp(tau <h_b, X e_1>)
  = rho``: *both queries see the count task's shape*;
* ``beta_a = exp(tau <h_a, u>) = exp(-tau c^2/2)`` and ``beta_b = exp(tau <h_b, u>) =
  exp(-tau c^2/4)``: each ``b`` weighs at most ``beta_b`` of an ``a``;
* ``v_b = v_a`` (``w`` reads ``e_1`` only): a ``b`` acts as a fraction ``beta_q`` of an ``a``.

So ``y = C_q + D phi(n_a + beta_q n_b)`` with ``phi(nu) = nu/(rho + nu)``, ``C_q = <w, e_q> + w0 +
v_s``.  The construction sets ``C_a = C_b = C``.  *Every select input's error lies in* ``[C +
g(n_a), C + G(n_a)]``, ``g(n) = D phi(n) - n``, ``G(n) = D phi(n + beta_b (L - n)) - n``.
*Proof.*  ``phi`` increases, ``beta_a = beta_b^2 <= beta_b`` and ``n_b <= L - n_a``, so ``n_a <=
n_a + beta_q n_b <= n_a + beta_b (L - n_a)``.  The queries ``a`` have ``n_a = 1..L``, the queries
``b`` ``n_a = 0..L-1``: together the count task's inputs at the BOS read, ``n = 0..L``.  So the
parameters solve select to ``L`` if

    C in (-1/2 - min_{0..L} g,  1/2 - max_{0..L} G)

and ``(s)``, ``y = C + <w, e_s - e_a>``, is within ``1/2`` of 0.  Both ``g`` and ``G`` are concave
(``phi`` is, and the argument of ``G`` is affine in ``n``): ``g`` has its minimum at an end,
``min(0, g(L))``, and ``G`` its maximum at the integers around its stationary point
(:func:`errors`).  The envelope is met: ``n_b = 0`` (query ``a``) gives ``g``, and query ``b`` at
``n_b = L - n_a`` gives ``G``.  (A sufficient condition, the float plan's; every reported
parameter set is judged on every input.)

*What suppressing b costs.*  Scores: ``c^2 ~ 4 sqrt(d) log L^3`` makes ``G`` near ``g``, a
value part ``c = O(d^{1/4} sqrt(log L))`` off the read axis.  Budget: ``|g|^2 = g_1^2 + g_2^2``
with ``g_2^2 = B c/sqrt(d)`` (the split that maximises ``x_s = g_1 sqrt(d - c^2/g_2^2) = sqrt(d)
B - c`` with RMSNorm), a relative price ``c/(sqrt(d) B) = O(sqrt(log L)/L)``.  Values: one
constant ``C`` serves both queries, so the lines ``n = 1..L`` (query ``a``) and ``n = 0..L-1``
(query ``b``) are held together on the segment of the BOS read, ``n = 0..L``, where the count task
at the last read needs only ``n = 1..L`` (the segment of ``L - 1``): a relative price ``O(1/L)``.
With LayerNorm the second coordinate is paid by the centring: ``n_1 <= sqrt(d (d-2)/(d-1))``
against the count task's ``sqrt(d - 1)`` (a bounded factor, ``1 - 1/(2 (d-1)^2)`` to first
order).  The rate stays the count task's, 1.

*Embeddings and constants.*  RMSNorm ignores the scale: ``e_x = lam_x N_x/sqrt(d)``; ``<w, e_x> =
lam_x W n_{x,1}/sqrt(d)``, and ``n_{b,1} = n_{a,1}`` gives ``C_b = C_a`` at ``lam_b = lam_a``;
``lam_s`` in ``(0, B]`` sets ``y(s)`` (to 0 where within reach, else as near as it reaches).
LayerNorm ignores the part along ``one``: ``e_x = nu N_x + mu_x one`` (``nu = 2^-10 min(B, 1)``,
``mu_a = mu_b = 0``), and ``mu_s`` sets ``y(s) = 0``.  A bias, where the cell has one, is 0.

*Plan and budget.*  At budget ``B`` the float plan (:meth:`GainSoftmaxSelectDesign.plan`) takes,
on a grid of ``(log rho, c, D)``, the point of largest width ``1 - (max G - min g)`` with
``D <= B X`` (``|w| = D/X <= B``) and ``y(s)`` within reach; the construction counts where it is
positive.  ``L = 1`` is the witness of :meth:`GainSoftmaxSelectDesign._witness`.

*Lower bound.*  The count task at the last read is the sub-task ``n_b = 0``, so its proven
bound holds (:func:`bounds.lower.last_select_softmax_lower`).  No closed form is derived.

Not built: RMSNorm at ``d = 2`` and LayerNorm at ``d = 3`` (the values fill only the ellipse's
boundary, where two points with the same first coordinate have the same norm, so ``b`` cannot
score below ``a`` from its own query with ``rho_b = rho_a``), ``eps > 0`` (the embeddings use
the norm's exact invariances).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from constructions import registry, zoom
from constructions.cell import Cell, Params
from constructions.refusals import refusal
from constructions.regression import RegressionDesign, _check_budget, _check_count

#: the plan's grids: log rho (offsets to 2 log L), the perpendicular part c (fractions of its
#: largest), the amplitude D (offsets from rho in units of L)
LOG_RHO_STEPS = np.linspace(-6.0, 2.0, 161)
C_FRACTIONS = np.array([0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8])
D_STEPS = np.linspace(-1.0, 3.0, 81)
#: the perpendicular part is never taken beyond ``sqrt(4 sqrt(d) log(64 L^3))`` (``beta_b >=
#: 1/(64 L^3)``: the ``b`` tokens then move an output by at most ``D/(64 L^2 rho)``)
C_SPREAD = 64
#: LayerNorm: the embeddings' centred scale relative to ``min(B, 1)``
NU = mpmath.mpf(2) ** -10


def _first_coordinate(cell: Cell, n2, num):
    """The largest ``n_1`` of a normalised embedding with second coordinate ``n2`` and every
    other coordinate free: RMSNorm ``sqrt(d - n2^2)``; LayerNorm the root of ``n_1^2 + n_2^2 +
    (n_1 + n_2)^2/(d - 2) = d`` (the rest, ``d - 2`` coordinates summing to ``-(n_1 + n_2)``, has
    squared norm at least ``(n_1 + n_2)^2/(d - 2)``)."""
    d = cell.d
    if not cell.kind.centred:
        return num.sqrt(d - n2**2)
    k = d - 2
    a = 1 + 1 / k
    b = 2 * n2 / k
    c0 = a * n2**2 - d
    return (-b + num.sqrt(b * b - 4 * a * c0)) / (2 * a)


def inside(cell: Cell, n1, n2):
    """Whether ``(n1, n2)`` leads a normalised embedding whose other coordinates are free:
    RMSNorm ``n_1^2 + n_2^2 <= d``; LayerNorm ``n_1^2 + n_2^2 + (n_1 + n_2)^2/(d - 2) <= d``
    (:func:`_first_coordinate`; with ``d - 2 >= 2`` free coordinates every squared norm above that
    least one is reached)."""
    d = cell.d
    extra = (n1 + n2) ** 2 / (d - 2) if cell.kind.centred else 0
    return n1**2 + n2**2 + extra <= d


def geometry(cell: Cell, B, log_rho, c, num=np):
    """``(g_1, g_2, x_s, alpha, X)`` at budget ``B``, shape ``log rho`` and perpendicular part
    ``c`` (module docstring; ``num`` is numpy or mpmath).  ``g_2^2 = B c/sqrt(d)``; ``alpha`` is
    the small root of ``alpha (x_s - alpha) = sqrt(d) log rho`` (nan where it has none)."""
    sd = num.sqrt(cell.d)
    g2 = num.sqrt(B * c / sd)
    g1 = num.sqrt(B**2 - g2**2)
    x_s = g1 * _first_coordinate(cell, c / g2, num)
    sigma = sd * log_rho
    alpha = (x_s - num.sqrt(x_s**2 - 4 * sigma)) / 2
    return g1, g2, x_s, alpha, x_s - alpha


def errors(L: int, rho, D, c, d, num=np):
    """``(g_min, G_max)``: the least ``g(n) = D phi(n) - n`` over ``n = 0..L`` and the largest
    ``G(n) = D phi(n + beta_b (L - n)) - n`` (module docstring).  Both are concave (``phi`` is
    concave and the argument of ``G`` is linear in ``n``): ``g`` has its minimum at an end,
    ``min(0, g(L))``; ``G`` its maximum at the integers around its stationary point ``n* = (sqrt(D
    (1 - beta_b) rho) - rho - beta_b L)/(1 - beta_b)``."""
    beta = num.exp(-c**2 / (4 * num.sqrt(d)))
    peak = (num.sqrt(D * (1 - beta) * rho) - rho - beta * L) / (1 - beta)
    if num is np:
        base = np.floor(np.where(np.isfinite(peak), peak, 0))
        cand = [np.clip(base + j, 0, L) for j in (-1, 0, 1, 2)] + [0, L]
        top = np.maximum
    else:
        cand = sorted({0, L, *(min(max(j, 0), L) for j in range(int(mpmath.floor(peak)) - 1,
                                                                    int(mpmath.floor(peak)) + 3))})
        top = max
    G = lambda n: D * (n + beta * (L - n)) / (rho + n + beta * (L - n)) - n
    G_max = G(cand[0])
    for n in cand[1:]:
        G_max = top(G_max, G(n))
    g_L = D * L / (rho + L) - L
    g_min = np.minimum(0.0, g_L) if num is np else min(0, g_L)
    return g_min, G_max


class GainSoftmaxSelectDesign(RegressionDesign):
    """Softmax attention with pre-norm and a gain (a bias left at 0), the select task read last
    (module docstring): the count task's segment on ``e_1``, ``b`` pushed off by the second axis."""

    def __init__(self, cell: Cell):
        # the module of the class: a subclass serves its own cells (constructions.select_last_circle)
        if not registry.builds(type(self).__module__.rsplit(".", 1)[-1], cell):
            raise ValueError(f"{cell.describe()}: {refusal(cell)}")
        super().__init__(cell)

    def compiled_parts(self) -> None:
        """Nothing to compile: the construction is evaluated in mpmath from the plan's point."""

    def c_top(self, L: int) -> float:
        """The largest perpendicular part the plan tries (:data:`C_SPREAD`)."""
        return math.sqrt(4 * math.sqrt(self.cell.d) * math.log(C_SPREAD * L**3))

    def _grid(self, L: int, B: float):
        """The plan's grid at ``(L, B)``: ``(log rho, c, D, width)`` arrays (width ``-inf`` where
        inadmissible)."""
        d = self.cell.d
        lr = (2 * math.log(L) + LOG_RHO_STEPS)[:, None, None]
        # c within the budget: n_2 = sqrt(c sqrt(d)/B) < sqrt(d), g_2 < B
        c_max = min(self.c_top(L), 0.9 * B * math.sqrt(d))
        cc = (c_max * C_FRACTIONS)[None, :, None]
        rho = np.exp(lr)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            g1, g2, x_s, alpha, X = geometry(self.cell, B, lr, cc)
            cap = B * X
            D = rho + L * D_STEPS[None, None, :]
            D = np.where(D > cap, cap, D)
            g_min, G_max = errors(L, rho, D, cc, d)
            width = 1 - (G_max - g_min)
            C = -(g_min + G_max) / 2
            ok = (np.isfinite(width) & (D > 0) & np.isfinite(X) & (X > 0) & (x_s > 0)
                  & inside(self.cell, alpha / g1, cc / g2) & inside(self.cell, alpha / g1, cc / (2 * g2)))
            if self.cell.kind.centred:
                # |e_s|^2 = d (nu^2 + mu_s^2) <= B^2, mu_s = C X/D (to first order in nu)
                nu = float(NU) * min(B, 1.0)
                ok &= d * (nu**2 + (C * X / D) ** 2) < B**2
            else:
                # y(s) = C + <w, e_s - e_a>: its top, with lam_a = B where n_a1 > 0
                top = np.where(alpha > 0, (D / X) * B * alpha / (g1 * math.sqrt(d)), 0.0)
                width = np.minimum(width, C + top + 0.5)
        width = np.where(ok, width, -np.inf)
        return lr, cc, D, width

    def plan(self, L: int, B: float):
        """``(log rho, c, D, width)``: the grid point of largest width (module docstring)."""
        lr, cc, D, width = self._grid(L, B)
        i, j, k = np.unravel_index(int(np.argmax(width)), width.shape)
        return float(lr[i, 0, 0]), float(cc[0, j, 0]), float(D[i, j, k]), float(width[i, j, k])

    def best_shape(self, L_value: int, B_value: float):
        """``(rho, width)`` of the plan."""
        if L_value == 1:
            return None, math.inf
        lr, _, _, width = self.plan(L_value, float(B_value))
        return math.exp(lr), width

    def estimate(self, L_value: int, hi_B: float = 1e6, rtol: float = 1e-7):
        """The smallest budget at which the plan has positive width (``1e-12`` at ``L = 1``)."""
        if L_value == 1:
            return 1e-12
        feasible = lambda b: self.plan(L_value, b)[-1] > 0
        if not feasible(hi_B):
            return None
        return zoom.bisect_up(feasible, 1e-3, hi_B, rtol)[1]

    def screen(self, L_value: int, B_value) -> Params:
        return self.build(L_value, B_value, dps=20)

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The construction at budget ``B`` for solving select to ``L`` (module docstring)."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            if L_value == 1:
                return self._witness(Bv)
            lr, c_f, D_f, _ = self.plan(L_value, float(Bv))
            return self._params(L_value, Bv, mpmath.mpf(lr), mpmath.mpf(c_f), mpmath.mpf(D_f))

    def _params(self, L: int, Bv, lr, c, D) -> Params:
        cell = self.cell
        d = cell.d
        sd = mpmath.sqrt(d)
        g1, g2, x_s, alpha, X = geometry(cell, Bv, lr, c, mpmath)
        rho = mpmath.exp(lr)
        g_min, G_max = errors(L, rho, D, c, d, mpmath)
        C = -(g_min + G_max) / 2
        W = -D / X
        zero = [mpmath.mpf(0)] * d
        N = {"s": (x_s / g1, c / g2), "a": (alpha / g1, c / g2), "b": (alpha / g1, c / (2 * g2))}
        vec = {x: self._normalised(n1, n2) for x, (n1, n2) in N.items()}
        g = np.array([g1, g2] + zero[2:], dtype=object)
        w = np.array([W] + zero[1:], dtype=object)
        v_s = W * x_s
        if cell.kind.centred:
            nu = NU * min(Bv, 1)
            e_a, e_b = nu * vec["a"], nu * vec["b"]
            # y(s) = C + W (nu (n_s1 - n_a1) + mu_s) = 0
            mu_s = -C / W - nu * (N["s"][0] - N["a"][0])
            e_s = nu * vec["s"] + mu_s * np.array([mpmath.mpf(1)] * d, dtype=object)
        else:
            lam_a = Bv if alpha > 0 else Bv * mpmath.mpf(2) ** -20
            e_a, e_b = (lam_a / sd) * vec["a"], (lam_a / sd) * vec["b"]
            # <w, e_s> = lam_s W n_s1/sqrt(d) = -(C - <w, e_a>) where within (0, B]
            wa = lam_a * W * N["a"][0] / sd
            per = W * N["s"][0] / sd
            lam_s = min(Bv, max(Bv * mpmath.mpf(2) ** -40, (wa - C) / per))
            e_s = (lam_s / sd) * vec["s"]
        vectors = {"e_s": e_s, "e_a": e_a, "e_b": e_b, "g": g, "w": w}
        if cell.affine.bias:
            vectors["beta"] = np.array(zero, dtype=object)
        w0 = C - v_s - W * e_a[0]
        return Params(cell, vectors, {"w0": w0})

    def _normalised(self, n1, n2):
        """A normalised embedding ``(n1, n2, rest)`` of the kind: RMSNorm the rest on ``e_3``;
        LayerNorm the rest centring it, its spread on ``e_3 - e_4`` (:func:`_first_coordinate`)."""
        d = self.cell.d
        out = [n1, n2] + [mpmath.mpf(0)] * (d - 2)
        rest = d - n1**2 - n2**2
        if not self.cell.kind.centred:
            out[2] = mpmath.sqrt(max(rest, 0))
        else:
            m = -(n1 + n2) / (d - 2)
            spread = mpmath.sqrt(max(rest - (d - 2) * m**2, 0) / 2)
            for i in range(2, d):
                out[i] = m
            out[2] += spread
            out[3] -= spread
        return np.array(out, dtype=object)

    def _witness(self, Bv) -> Params:
        """``L = 1``: ``g = B e_d`` (so ``w = v e_1`` reads no value), ``e_a = B u_a`` with
        ``<e_1, u_a> = u`` (RMSNorm ``u_a = e_1``, ``u = 1``; LayerNorm ``(e_1 - e_2)/sqrt 2``),
        ``e_s = e_b = B u_0`` with ``<e_1, u_0> = 0`` (``e_2``; ``(e_2 - e_3)/sqrt 2``), ``v =
        min(B, 1/B)``: ``y(s) = y(s, b) = w0`` and ``y(s, a) = w0 + R``, ``R = v B u <= 1``;
        ``w0 = 1/2 - R/2`` puts them at ``1/2 -+ R/2``."""
        d = self.cell.d
        zero = [mpmath.mpf(0)] * d
        u_a, u_0, g = list(zero), list(zero), list(zero)
        if self.cell.kind.centred:
            r = 1 / mpmath.sqrt(2)
            u_a[0], u_a[1], u_0[1], u_0[2] = r, -r, r, -r
        else:
            u_a[0], u_0[1] = mpmath.mpf(1), mpmath.mpf(1)
        g[d - 1] = Bv
        v = min(Bv, 1 / Bv)
        w = [v] + zero[1:]
        R = v * Bv * u_a[0]
        arr = lambda x: np.array(x, dtype=object)
        vectors = {"e_s": Bv * arr(u_0), "e_a": Bv * arr(u_a), "e_b": Bv * arr(u_0), "g": arr(g), "w": arr(w)}
        if self.cell.affine.bias:
            vectors["beta"] = arr(zero)
        return Params(self.cell, vectors, {"w0": mpmath.mpf(1) / 2 - R / 2})
