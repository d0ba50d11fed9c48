"""The classification head of the select task read at ``s`` with softmax attention without
post-norm: the level head on a pencil of rays through the distractor's point.

**The outputs.**  With ``rho = exp(tau <h_s, h_s - h_a>)`` and ``beta = exp(tau <h_s, h_b -
h_a>)`` the input with ``n_a`` tokens ``a`` and ``n_b`` tokens ``b`` has

    z(n_a, n_b) = e_s + (rho h_s + n_a h_a + n_b beta h_b)/(rho + n_a + beta n_b)
                = H + t (P_{n_a} - H),   t = (rho + n_a)/(rho + n_a + beta n_b),

with ``H = e_s + h_b`` and ``P_n = z(n, 0)`` the count task's outputs, on the segment
``P_0 + x_n e``, ``x_n = X n/(rho + n)``, ``X = |h_a - h_s|``, ``e = (h_a - h_s)/X``.  So the
inputs of class ``n`` lie on the ray from ``H`` through ``P_n``, at the levels ``t`` from
``T_n = (rho + n)/(rho + n + beta (L - n))`` (the longest input, ``n_b = L - n``; ``T_L = 1``;
:func:`weights`) up to 1; ``T_n`` increases with ``n``.  Write ``H - P_0 = a e - delta f``
(``delta > 0``, ``f`` a unit vector orthogonal to ``e``: :func:`frame`), so ``P_n - H = (x_n - a)
e + delta f``; every output lies in the plane of ``e, f`` through ``H``.

**The level head** (:func:`level_head`).  Classes ``u_c = k_c e + j_c f`` and logits
``l_c(z) = <u_c, z - H> - c m`` with ``k_0 = -1``, steps ``k_{n+1} - k_n = K_n = 2 m/(T_{n+1}
g_n)`` over the gaps ``g_n = x_{n+1} - x_n``, ``j_{n+1} - j_n = K_n (a - x_n)/delta``, and
``m = 1/sum_n 1/(T_{n+1} g_n)`` (so ``k_L = 1``).  Then ``D_i(z) = l_{i+1}(z) - l_i(z) =
t K_i (x_n - x_i) - m`` at ``z = H + t (P_n - H)`` (the ``j`` step cancels the part ``x_i - a``):
the separator of ``i, i+1`` is parallel to the ray of class ``i``.  At an input of class ``n``
(``T_n <= t <= 1``):

* ``i >= n``: ``D_i = t K_i (x_n - x_i) - m <= -m`` (``x_n <= x_i``), so every class ``c > n``
  has ``l_c - l_n = D_n + ... + D_{c-1} <= -(c - n) m``;
* ``i < n``: ``D_i >= t K_i g_i - m >= T_{i+1} K_i g_i - m = m`` (``x_n - x_i >= g_i``,
  ``t >= T_n >= T_{i+1}``), so every class ``c < n`` has ``l_c - l_n <= -(n - c) m``.

So every select input has the margin ``m``, against every class: the distractor drives the
classes ``n, n+1`` to the level ``T_{n+1}`` at worst, and the head has exactly the gap
``T_{n+1} g_n`` there.  :mod:`bounds.select_margin` proves ``m <= 1/sum_n 1/(T_{n+1} g_n)`` for
*every* head on the same outputs with ``|<u_c, e>| <= 1``: on its geometry the level head is
max-min up to its norm.

*Norms.*  Adding one vector to every ``u_c`` adds the same number to every logit and changes no
argmax and no margin; so with ``p_c = (k_c, j_c)`` and any centre ``q`` with ``|p_c - q| <= R``
for every ``c`` (:func:`centre`: nearly the smallest enclosing circle), the head ``u_c = ((p_c -
q)_1 e + (p_c - q)_2 f)/R`` (logits divided by ``R``) has every ``|u_c| <= 1`` and the margin
``m/R`` on every select input (:func:`margin`).  ``R >= 1`` (``k`` spans ``[-1, 1]``), with
``R`` near 1 where the ``j`` steps are small against the ``k`` steps: ``H`` far from the count
line (large ``delta``) or near the middle of it (``a`` between ``x_0`` and ``x_L``).  The
certified row's margin is the judge's, on all ``(L+1)(L+2)/2`` inputs.

**The geometry** (:class:`PencilDesign`).  The shape is searched over placements of the values
at unit budget (the regression constructions of :mod:`constructions.select` serve ``y_b = y_s``,
which a head does not need): without a norm (``h = e``) ``e_s = s E_1``, ``e_a = cos(theta) E_1
+ sin(theta) E_2``, ``e_b = cos(theta_b) E_1 + sin(theta_b)(cos(phi) E_2 + sin(phi) E_3)``
(``0 < s <= 1``; no ``phi`` at ``d = 2``).  With pre-norm every embedding is a unit vector
``e_x = cos(angle_x) c_1 + sin(angle_x) c_2`` of a plane of the norm's image (``c_1, c_2 = E_1,
E_2`` for RMSNorm, the centred :func:`centred_pair` for LayerNorm), so ``N(e_x) = sqrt(d) e_x /
sqrt(1 + d eps)``; bare, the values are these, at the angles ``0, gamma, psi`` of ``s, a, b``;
with a gain ``g = cos(chi) E_1 + sin(chi) E_2`` the values ``g * N(e_x)`` lie on an ellipse, at
the angles ``angle_s, angle_a, angle_b``, shifted by the bias ``b_1 E_1 + b_2 E_2`` (``b_1^2 +
b_2^2 <= 1``) where the cell has one.  The shape
maximising the float margin is searched (Nelder-Mead from the best of a grid) at
``min(L, FIT_L)``; with a gain from every split of :data:`GAIN_SPLITS`, the gains of two
coordinates of opposite signs (``chi > pi/2``) included: at ``d = 8`` an independent float
max-min over every parameter (the epigraph problem of ``tests/test_select_margin_gap.py``, many
random starts) meets the level head on the best of these placements to ``1e-4`` (its margin
``0.09471`` at ``L = 4``, ``0.022997`` at ``L = 8``, with a bias), 6% and 1.8% above a search
from the splits 0.4 and 0.7 alone on a coarser grid of angles.  :mod:`bounds.select_margin`
bounds every placement, up to what it cannot see: what keeps ``H`` off the count line costs
distractor weight (``beta``), and the supremum of its bound sits where ``H`` is on that line or
``beta`` is the smallest any values allow.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np

from constructions.cell import Cell, Params

#: the free placements are searched at this L (or at L itself if smaller) and taken over beyond
FIT_L = 1024
#: every trainable vector of a placement has norm at most this (an exact binary number below 1)
SHRINK = 1 - 2.0**-40
#: the gain splits ``chi`` searched with a gain (``g = cos(chi) E_1 + sin(chi) E_2``: past
#: ``pi/2`` the two coordinates have opposite signs, a different ellipse of values), and the
#: grid of embedding angles each starts from
GAIN_SPLITS = (0.4, 0.7, 1.9, 2.2, 2.5, 2.8)
ANGLES = tuple(np.linspace(0, 2 * math.pi, 12, endpoint=False))
#: the steps of the search without the bias, where the bias is searched after it
PRE_ITERATIONS = 300
#: the most restarts of the local search without a norm (:meth:`PencilDesign._restarted`)
RESTARTS = 4


def weights(rho, beta, L: int, n):
    """``T_n = (rho + n)/(rho + n + beta (L - n))`` (module docstring) for the counts ``n``."""
    return (rho + n) / (rho + n + beta * (L - n))


def level_head(x, t, a, delta):
    """``(m, k, j)``: the level head of the module docstring on the positions ``x`` with the
    weights ``t = T_0..T_L``; any numbers (float arrays or object arrays of mpf)."""
    gaps = np.diff(x)
    inv = 1 / (t[1:] * gaps)
    m = 1 / inv.sum()
    steps = 2 * m * inv
    k = np.concatenate([[-1 + 0 * m], -1 + np.cumsum(steps)])
    j = np.concatenate([[0 * m], np.cumsum(steps * (a - x[:-1]) / delta)])
    return m, k, j


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
    """The margin ``m/R`` of the level head on every select input (float64)."""
    m, k, j = level_head(np.asarray(x, float), np.asarray(t, float), float(a), float(delta))
    p = np.column_stack([k, j])
    return float(m / np.sqrt(((p - centre(p)) ** 2).sum(axis=1)).max())


class Frame:
    """The pencil of one placement (module docstring): ``P_0, e, f, X, a, delta, H, rho, beta``
    from the values and ``e_s``, in floats (``ctx = math``), mpf (``ctx = mpmath``) or any
    number type whose ``ctx`` has ``sqrt``, ``exp`` and ``dot`` (balls:
    :data:`bounds.select_direction.ARB`)."""

    def __init__(self, e_s, h_s, h_a, h_b, d: int, ctx=math):
        dot = getattr(ctx, "dot", None) or ((lambda u, v: mpmath.fsum(u * v)) if ctx is mpmath
                                           else (lambda u, v: float(np.dot(u, v))))
        tau = 1 / ctx.sqrt(d)
        self.X = ctx.sqrt(dot(h_a - h_s, h_a - h_s))
        self.e = (h_a - h_s) / self.X if self.X > 0 else h_a - h_s
        self.P0, self.H = e_s + h_s, e_s + h_b
        self.a = dot(self.H - self.P0, self.e)
        perp = self.H - self.P0 - self.a * self.e
        self.delta = ctx.sqrt(dot(perp, perp))
        self.f = -perp / self.delta if self.delta > 0 else perp
        self.rho = ctx.exp(tau * (dot(h_s, h_s) - dot(h_s, h_a)))
        self.beta = ctx.exp(tau * (dot(h_s, h_b) - dot(h_s, h_a)))

    def line(self, L: int, ctx=math):
        """The positions ``x_n`` and the weights ``T_n``, ``n = 0..L`` (``ctx`` as the frame's:
        floats for ``math``, else the exact counts as objects, in the frame's number type)."""
        if ctx is math:
            n = np.arange(L + 1, dtype=np.float64)
        else:
            n = np.array(list(range(L + 1)), dtype=object)
        return self.X * n / (self.rho + n), weights(self.rho, self.beta, L, n)

    def margin(self, L: int) -> float:
        """The level head's float margin, 0 where the pencil degenerates (``X = 0``: one output
        per level; ``delta = 0``: ``H`` on the count line)."""
        if not (self.X > 0 and self.delta > 0 and self.rho > 0):
            return 0.0
        x, t = (np.asarray(v, dtype=np.float64) for v in self.line(L))
        if not (np.all(np.isfinite(t)) and np.all(np.diff(x) > 0)):
            return 0.0
        return margin(x, t, self.a, self.delta)


def centred_pair(d: int, ctx=math):
    """Two orthonormal centred d-vectors (``d >= 3``): ``c_1`` the unit centred part of ``E_1``
    and ``c_2`` the unit part of the centred ``E_2`` orthogonal to ``c_1`` (the directions whose
    LayerNorm reaches furthest along ``E_1``, then along ``E_2``), as floats or mpf."""
    one = mpmath.mpf(1) if ctx is mpmath else 1.0
    dot = (lambda u, v: mpmath.fsum(u * v)) if ctx is mpmath else (lambda u, v: float(np.dot(u, v)))
    centred = []
    for i in range(2):
        v = np.array([-one / d] * d, dtype=object if ctx is mpmath else float)
        v[i] += 1
        centred.append(v)
    c1 = centred[0] / ctx.sqrt(dot(centred[0], centred[0]))
    w = centred[1] - dot(centred[1], c1) * c1
    return c1, w / ctx.sqrt(dot(w, w))


def free(cell: Cell) -> bool:
    """Whether the values have a placement here (module docstring): no norm, or pre-norm with a
    plane in the norm's image (RMSNorm; LayerNorm at ``d >= 3``)."""
    return not cell.normed or (cell.pre and (not cell.kind.centred or cell.d >= 3))


class PencilDesign:
    """The level head on the free placements of one cell (module docstring)."""

    def __init__(self, cell: Cell):
        self.cell = cell

    # ----------------------------------------------------------------- placements
    def embeddings(self, shape, ctx=math) -> dict:
        """The vectors of a placement (module docstring): ``e_s, e_a, e_b``, a gain ``g`` and a
        bias ``beta`` where the cell has them, and the values ``_h_s, _h_a, _h_b``, as d-vectors
        (floats, or mpf with ``ctx = mpmath``).  Every trainable vector is shrunk by
        :data:`SHRINK`, so that rounding cannot lift its norm above 1 (the head is read from the
        vectors as they are).  ``ValueError`` where the cell has no placement (:func:`free`)."""
        cell, d = self.cell, self.cell.d
        if not free(cell):
            raise ValueError(f"{cell.describe()}: the pencil has no placement of the values")
        zero = mpmath.mpf(0) if ctx is mpmath else 0.0
        axis = [np.array([zero] * d, dtype=object if ctx is mpmath else float) for _ in range(3)]
        for i in range(min(d, 3)):
            axis[i][i] += 1
        cs, sn = ctx.cos, ctx.sin
        if not cell.normed:
            s, theta, theta_b, *phi = shape  # no phi at d = 2
            side = cs(phi[0]) * axis[1] + sn(phi[0]) * axis[2] if phi else axis[1]
            out = {"e_s": s * axis[0], "e_a": cs(theta) * axis[0] + sn(theta) * axis[1],
                   "e_b": cs(theta_b) * axis[0] + sn(theta_b) * side}
            out = {k: v * SHRINK for k, v in out.items()}
            out.update({"_h_" + x: out["e_" + x] for x in "sab"})
            return out
        if cell.affine.gain:
            chi, angles, bias = shape[0], shape[1:4], shape[4:]
        else:
            angles, bias = (0, *shape), ()
        c1, c2 = centred_pair(d, ctx) if cell.kind.centred else axis[:2]
        out = {"e_" + x: cs(angle) * c1 + sn(angle) * c2 for x, angle in zip("sab", angles)}
        if cell.affine.gain:
            out["g"] = cs(chi) * axis[0] + sn(chi) * axis[1]
            if cell.affine.bias:
                b1, b2 = bias or (0, 0)
                out["beta"] = b1 * axis[0] + b2 * axis[1]
        out = {k: v * SHRINK for k, v in out.items()}
        one = ctx.mpf(1) if ctx is mpmath else 1.0
        scale = 1 / ctx.sqrt(one * SHRINK**2 / d + cell.eps)  # N(e) = scale e: e centred, |e| = SHRINK
        for x in "sab":
            h = scale * out["e_" + x] * (out["g"] if cell.affine.gain else 1)
            out["_h_" + x] = h + out["beta"] if "beta" in out else h
        return out

    def frame(self, shape, L: int, ctx=math) -> tuple[dict, Frame]:
        """The vectors of a placement (:meth:`embeddings`) and its pencil."""
        geo = self.embeddings(shape, ctx)
        return geo, Frame(geo["e_s"], geo["_h_s"], geo["_h_a"], geo["_h_b"], self.cell.d, ctx)

    def margin(self, shape, L: int) -> float:
        """The level head's float margin at a placement (0 where it degenerates or is out of its
        domain: ``0 < s <= 1`` without a norm)."""
        if not self.cell.normed and not 0 < shape[0] <= 1:
            return 0.0
        if self.cell.normed and len(shape) == 6 and shape[4] ** 2 + shape[5] ** 2 > 1:
            return 0.0  # the bias's norm
        try:
            return self.frame(shape, L)[1].margin(L)
        except (ZeroDivisionError, OverflowError):
            return 0.0

    @functools.lru_cache(maxsize=None)
    def best_shape(self, L: int) -> tuple:
        """The placement maximising the margin at ``min(L, FIT_L)``: Nelder-Mead from the best
        of a grid (with a gain: from the best start of every split of :data:`GAIN_SPLITS`, the
        best of the local optima; with a bias: each then from the best of a grid of biases added
        to it)."""
        fit = min(L, FIT_L)
        if not self.cell.normed:
            grid = [(1.0, th, tb) + ((ph,) if self.cell.d > 2 else ()) for th in (2.2, 2.5, 2.8)
                    for tb in (2.2, 2.5, 2.8) for ph in ((0.8, 1.6, 2.4) if self.cell.d > 2 else (0,))]
        elif self.cell.affine.gain:
            grid = [(chi, 0.0, ga, ps) for chi in GAIN_SPLITS for ga in ANGLES for ps in ANGLES]
        else:
            grid = [(ga, ps) for ga in np.linspace(0.3, 2.7, 9) for ps in np.linspace(2.4, 4.8, 9)]
        value = lambda p: self.margin(tuple(float(v) for v in p), fit)
        if not self.cell.normed:
            return self._restarted(value, max(grid, key=value))
        if not self.cell.affine.gain:
            return self._search(value, max(grid, key=value))
        found = []
        for chi in GAIN_SPLITS:  # a local search from the best start of every split
            start = max((p for p in grid if p[0] == chi), key=value)
            best = self._search(value, start, PRE_ITERATIONS if self.cell.affine.bias else 2000)
            if self.cell.affine.bias:  # then the bias, from the best without it
                biased = [best + (b1, b2) for b1 in np.linspace(-0.9, 0.9, 7) for b2 in np.linspace(-0.9, 0.9, 7)]
                best = self._search(value, max(biased + [best + (0.0, 0.0)], key=value))
            found.append(best)
        return max(found, key=value)

    @staticmethod
    def _restarted(value, start: tuple) -> tuple:
        """:meth:`_search` from ``start``, restarted from the point found while that improves it
        (at most :data:`RESTARTS` times).  Without a norm the optimum has ``e_a`` next to the line
        of ``e_s`` (``theta`` near ``pi``), where the angle ``phi`` of the side of ``e_b`` is
        nearly idle: the simplex collapses along it and stalls (at ``L = 32``, ``d = 8`` about
        0.16% below the optimum of the family, which one restart reaches)."""
        best = PencilDesign._search(value, start)
        for _ in range(RESTARTS):
            found = PencilDesign._search(value, best)
            if not value(found) > value(best):
                break
            best = found
        return best

    @staticmethod
    def _search(value, start: tuple, iterations: int = 2000) -> tuple:
        """Nelder-Mead from ``start`` on the margin ``value``, to a relative change of 1e-13 (or
        ``iterations`` steps)."""
        from scipy import optimize  # scipy loads only where a placement is shaped

        scale = value(start)
        res = optimize.minimize(lambda p: -value(p) / scale, start, method="Nelder-Mead",
                                options={"xatol": 1e-8, "fatol": 1e-13, "maxiter": iterations})
        return tuple(float(v) for v in (res.x if value(res.x) > scale else start))

    # ----------------------------------------------------------------- the head
    def build(self, L: int, dps: int) -> Params:
        """The level head on the placement of :meth:`best_shape`: the head in exact arithmetic,
        centred on a float centre ``q`` and divided by the exact ``R`` (enlarged by ``2^-40``,
        so that every ``|u_c| <= 1``), biases ``-<u_c, H> - c m/R``."""
        shape = self.best_shape(L)
        with mpmath.workdps(dps):
            geo, fr = self.frame(shape, L, mpmath)
            x, t = fr.line(L, mpmath)
            m, k, j = level_head(x, t, fr.a, fr.delta)
            q = centre(np.column_stack([k.astype(float), j.astype(float)]))
            k, j = k - mpmath.mpf(q[0]), j - mpmath.mpf(q[1])
            R = max(mpmath.sqrt(kc * kc + jc * jc) for kc, jc in zip(k, j)) * (1 + mpmath.mpf(2) ** -40)
            vec = {name: geo[name] for name in self.cell.vector_names() if name in geo and name != "w"}
            u = np.array([(kc * fr.e + jc * fr.f) / R for kc, jc in zip(k, j)], dtype=object)
            vec["u"] = u
            step = m / R
            return Params(self.cell, vec, {"b": [-mpmath.fsum(row * fr.H) - c * step for c, row in enumerate(u)]})
