r"""Classification of the select task at the last read, linear attention with pre-norm and a gain:
a head that never reads the distractor.

*The reduction.*  With linear attention an input with ``n_a`` tokens ``a`` and ``n_b`` tokens
``b`` read at query ``q`` gives ``z = e_q + tau <h_q, h_s> h_s + n_a tau <h_q, h_a> h_a + n_b tau
<h_q, h_b> h_b``: every ``b`` adds a vector along ``h_b``, for either query.  A head whose rows
``u_c`` are all orthogonal to ``h_b`` has logits that do not depend on ``n_b``, so it reads only

* query ``a``: ``z_a(n) = e_a + tau <h_a, h_s> h_s + n tau |h_a|^2 h_a``, ``n = 1..L``;
* query ``b``: ``z_b(n) = e_b + tau <h_b, h_s> h_s + n tau <h_b, h_a> h_a``, ``n = 0..L-1``;
* ``(s)``: ``z_s = e_s + tau |h_s|^2 h_s``;

class 0 is ``{z_b(0), z_s}``, class ``n`` (``1 <= n <= L-1``) is ``{z_a(n), z_b(n)}``, class ``L``
is ``{z_a(L)}``.  With ``<h_b, h_a> = |h_a|^2`` the two lines have one step.

*The geometry* (at unit budget: ``|g| <= 1``, every ``|e_x| <= 1``, ``|beta| <= 1``).  The gain
is ``g = cos(phi) e_1 + sin(phi) e_2`` and the embeddings lie in the plane of two orthonormal
directions ``f_1, f_2`` (RMSNorm ``e_1, e_2``; LayerNorm ``c_1`` and the unit part of the centred
``e_2`` orthogonal to it, :meth:`SelectLastHead.frame`), up to what the norm removes; where the
cell has a bias it is ``beta = cos(omega) e_1 + sin(omega) e_2`` (else 0), in coordinates ``b``.
The norm maps a unit (LayerNorm: centred unit) vector ``t`` to ``sqrt(d) t``, so the unit
embedding ``c_1 f_1 + c_2 f_2`` has the value ``K c + b`` in the coordinates ``e_1, e_2``, ``K =
sqrt(d) diag(cos phi, sin phi) F`` with ``F`` the first two coordinates of ``f_1, f_2``: the
values fill an ellipse, shifted by the bias.  For ``h_a = K c_a + b`` (``c_a = (cos theta, sin
theta)``) the values on the line through ``h_a`` orthogonal to it are ``h_a + s J h_a`` (``J`` the
quarter turn), the values of ``c = c_a + s q``, ``q = K^-1 J h_a``; on the unit circle iff ``s (2
<c_a, q> + s |q|^2) = 0``, so the second one is ``c_b = c_a - 2 (<c_a, q>/|q|^2) q``
(:func:`_chord`; without a bias it is the reflection of ``c_a`` across ``K^T h_a``), and ``h_b = K
c_b + b`` has ``<h_b - h_a, h_a> = 0``: ``<h_b, h_a> = |h_a|^2``, the two lines have one step;
``h_s = h_a``.  A bias lets the values reach beyond the gain's ellipse about 0 (at ``d = 8``,
LayerNorm, ``kappa'`` 3.66 against 1.40 without one; RMSNorm 4.10 against 1.53), and tells the
gain's signs apart (``phi`` past ``pi/2`` as well).  The head reads
along

    w = P h_a / |P h_a|,   P the projection off h_b,

a unit vector orthogonal to ``h_b`` with ``<w, h_a> = |P h_a| = |h_a| |h_b - h_a| / |h_b|``
(``h_b - h_a`` is orthogonal to ``h_a``, so the triangle ``0, h_a, h_b`` has its right angle at
``h_a``).  Along ``w`` the step of either line is ``kappa' = tau |h_a|^2 <w, h_a> = tau |h_a|^3
|h_b - h_a| / |h_b|``, and with ``h_s = h_a``

    <w, z_a(n)> = <w, e_a> + (n + 1) kappa',   <w, z_b(n)> = <w, e_b> + (n + 1) kappa',
    <w, z_s> = <w, e_s> + kappa'.

So the embeddings are set, through what the norm removes (its values unchanged), to ``<w, e_b>
= <w, e_a>`` and ``e_s = e_a``: the difference of the two lines lies across ``w`` and every
output of class ``n`` sits at ``x_n = <w, e_a> + (n + 1) kappa'``.  LayerNorm: ``e_x = nu t_x +
mu_x one`` with the directions ``t_x = c_x1 f_1 + c_x2 f_2`` and ``mu_b - mu_a = -nu <w, t_b - t_a>
/ <w, one>`` (``<w, one> != 0``), centred on 0 with ``nu`` the largest that keeps ``|e_x| <= 1``.
RMSNorm: ``e_a = lam t_a``, ``e_b = gam t_b`` with ``gam <w, t_b> = lam <w, t_a>`` (both inner
products of one sign: the float screen keeps only such shapes), the larger scale 1.  The head
is the collinear head of :func:`constructions.classification.collinear_head` on ``x_0..x_L``
along ``w``: margin

    m = 1 / sum_{c=0}^{L-1} 1/kappa' = kappa' / L.

Every ``u_c`` is a multiple of ``w``, so the judge's inputs with any ``n_b`` have the logits of
these ``L + 1`` positions.  The split ``phi``, the angle ``theta`` and the bias angle ``omega``
maximise ``kappa'`` at unit budget (a float grid; any shape where the embeddings above exist is a valid construction, and
the judge certifies every row).  ``kappa'`` does not depend on ``L``.

*The bound.*  The count task at the last read is the sub-task ``n_b = 0`` of this one
(:func:`bounds.margin.margin_upper`), so its bound ``cap(1, 1)/(L - 1)``
(:func:`bounds.last_margin.last_margin_upper`) holds: ``cap(1, 1) = tau H^3`` with ``H`` the
largest value at unit budget.  The query-``b`` inputs halve it
(:func:`bounds.last_margin.select_linear_upper`: the classes ``n, n+1`` read at ``b`` differ by
``tau (<h_b, h_a> h_a - j |h_b|^2 h_b)`` for every ``j`` in ``[0, 1]``, at most ``tau H^3/2``
long for the best ``j``): ``tau H^3/(2 (L - 1))`` from ``L = 2``, and ``margin_upper`` is the
smaller of the two (this one at ``d = 8`` in every cell of the head).  The ratio
``margin_upper/margin`` is then ``L/(L - 1)`` times ``tau H^3/(2 kappa')``: the price of a chord
orthogonal to ``h_a`` inside the ellipse of values (a bounded factor: the rate ``-1`` of the
count task is kept).  No head of this form escapes a factor: ``|h_b| = |h_a|/cos(psi) <= H``
(``psi`` the angle of ``h_a, h_b``) gives ``kappa' = tau |h_a|^3 sin(psi) <= tau H^3 max_x x^3
sqrt(1 - x^2) = tau H^3 (3/4)^(3/2)/2``, a ratio of at least 1.54.  The grid's ``kappa'`` is
within ``2e-4`` of the float maximum of ``tau |h_a|^3 |h_b - h_a|/|h_b|`` under ``<h_b - h_a,
h_a> = 0`` over every gain and bias of the whole space (SLSQP from many starts) at ``d = 8``, 1.5% below it at ``d = 3`` (where a gain off ``e_1, e_2`` helps); an
independent float max-min over every parameter (the epigraph problem of
``tests/test_select_margin_gap.py``) finds heads that read the distractor and beat this one
(``0.66`` against ``0.43`` at ``d = 3``, ``L = 4``, LayerNorm with a bias): no head of this form
is max-min.

*L = 1*: the same head on ``x_0, x_1`` (margin ``kappa'``).

Not built here (:func:`constructions.refusals.refusal`): no norm and bare pre-norm (without a
gain ``<h_b, h_a> = |h_a|^2`` and a difference of the lines across ``w`` cost the embeddings
what the values are), ``eps > 0``, post-norm.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np

from constructions import laws, registry
from constructions.cell import Cell, Params
from constructions.classification import ClassificationDesign, _mp_vector, check_size, collinear_head
from constructions.symbols import ONE
from verify.backends import get_backend

#: every trainable vector is kept this much inside the unit ball (rounding stays within it)
KEEP = 1 - mpmath.mpf(2) ** -40
#: the grids of gain splits, embedding angles and bias angles screened
PHI_POINTS = 157
THETA_POINTS = 314
OMEGA_POINTS = 16
#: the shapes kept per split and bias (best first), tried in order until the embeddings exist
KEPT = 8


def built(cell: Cell) -> bool:
    """Whether ``cell`` (classification) is served by :class:`SelectLastHead`."""
    return registry.builds("select_last_head", cell)


class SelectLastHead(ClassificationDesign):
    """The unit-norm head of the select task read last, linear attention with pre-norm and a
    gain (module docstring); the interface of
    :class:`~constructions.classification.ClassificationDesign` (``build``; no symbolic
    ``geometry``, no foot, no pencil)."""

    def __init__(self, cell: Cell):
        if not built(cell):
            from constructions.refusals import refusal

            raise ValueError(f"{cell.describe()}: {refusal(cell) or 'not served by SelectLastHead'}")
        self.cell, self.family, self.geometry, self.foot, self.pencil = cell, laws.family(cell), None, None, None

    def frame(self, ctx=mpmath):
        """``(f_1, f_2)``: orthonormal embedding directions whose values span the plane of
        ``e_1, e_2`` (RMSNorm ``e_1, e_2``; LayerNorm ``c_1`` and the unit part of the centred
        ``e_2`` orthogonal to it), as d-vectors of ``ctx`` numbers (mpmath or float)."""
        d = self.cell.d
        num = (lambda x: mpmath.mpf(x)) if ctx is mpmath else float
        sqrt = mpmath.sqrt if ctx is mpmath else math.sqrt
        e1 = np.array([num(1)] + [num(0)] * (d - 1), dtype=object if ctx is mpmath else float)
        e2 = np.roll(e1, 1)
        if not self.cell.kind.centred:
            return e1, e2
        f1 = e1 - sum(e1) / d
        f1 = f1 / sqrt(sum(f1 * f1))
        f2 = e2 - sum(e2) / d
        f2 = f2 - sum(f2 * f1) * f1
        return f1, f2 / sqrt(sum(f2 * f2))

    def _plane_map(self, phi, ctx=mpmath):
        """``K``, the 2x2 map of ``(c_1, c_2)`` to the value of the unit embedding ``c_1 f_1 +
        c_2 f_2`` in the coordinates ``e_1, e_2`` at ``g = cos(phi) e_1 + sin(phi) e_2``:
        ``sqrt(d) diag(cos phi, sin phi) F`` with ``F`` the first two coordinates of ``f_1, f_2``
        (the norm maps a centred, resp. any, unit vector ``t`` to ``sqrt(d) t``)."""
        f1, f2 = self.frame(ctx)
        sqrt, cos, sin = (mpmath.sqrt, mpmath.cos, mpmath.sin) if ctx is mpmath else (math.sqrt, math.cos, math.sin)
        sd = sqrt(self.cell.d)
        return [[sd * cos(phi) * f1[0], sd * cos(phi) * f2[0]], [sd * sin(phi) * f1[1], sd * sin(phi) * f2[1]]]

    def biases(self) -> list:
        """The biases screened, as angles ``omega`` of ``b = cos(omega) e_1 + sin(omega) e_2``
        (``None``: no bias; the only choice without one)."""
        if not self.cell.affine.bias:
            return [None]
        return [None] + list(np.linspace(0, 2 * math.pi, OMEGA_POINTS, endpoint=False))

    def shapes(self) -> list[tuple]:
        """The gain splits ``phi``, angles ``theta`` of ``c_a`` and bias angles ``omega``
        (:meth:`biases`), best ``kappa'`` first (a float screen of ``|h_a|^3 |h_b - h_a|/|h_b|``
        at unit budget on a grid), where the embeddings exist (module docstring: ``<w, one> !=
        0``, resp. ``<w, t_a> <w, t_b> > 0``)."""
        found = []
        th = np.linspace(0, math.pi if not self.cell.affine.bias else 2 * math.pi, THETA_POINTS,
                         endpoint=False)
        ca = np.stack([np.cos(th), np.sin(th)])  # (2, n)
        phis = np.linspace(0.02, math.pi / 2 - 0.02, PHI_POINTS)
        if self.cell.affine.bias:  # a bias tells the gain's signs apart
            phis = np.concatenate([phis, math.pi - phis])
        for phi in phis:
            K = np.array(self._plane_map(phi, np), dtype=float)
            for omega in self.biases():
                b = np.zeros(2) if omega is None else np.array([math.cos(omega), math.sin(omega)])
                ha = K @ ca + b[:, None]
                with np.errstate(invalid="ignore", divide="ignore"):
                    cb = _chord(ca, np.linalg.solve(K, _turn(ha)))
                    hb = K @ cb + b[:, None]
                    w = ha - np.sum(ha * hb, axis=0) / np.sum(hb * hb, axis=0) * hb
                    w = w / np.linalg.norm(w, axis=0)
                    F = (np.linalg.norm(ha, axis=0) ** 3 * np.linalg.norm(hb - ha, axis=0)
                         / np.linalg.norm(hb, axis=0))
                if self.cell.kind.centred:
                    ok = np.abs(w[0] + w[1]) > 1e-3  # <w, one> sqrt(d), w in the plane of e_1, e_2
                else:  # t_x = c_x: <w, t_x> = <w, c_x> in the plane
                    ok = np.sum(w * ca, axis=0) * np.sum(w * cb, axis=0) > 1e-9
                F = np.where(ok & np.isfinite(F), F, -np.inf)
                top = np.argsort(F)[-KEPT:]  # the best few of this split and bias
                found += [(float(F[i]), float(phi), float(th[i]), omega) for i in top if F[i] > 0]
        found.sort(key=lambda r: r[0], reverse=True)
        return [(phi, t, omega) for _, phi, t, omega in found]

    @functools.lru_cache(maxsize=None)
    def embeddings(self, dps: int = 50) -> dict:
        """The exact vectors of the geometry (module docstring; mpf at ``dps`` digits) and, under
        ``"_w"``, the head's direction: the best shape where they exist."""
        for phi, theta, omega in self.shapes():
            vec = self._at(phi, theta, omega, dps)
            if vec is not None:
                return vec
        raise ValueError(f"{self.cell.describe()}: no shape of the grid admits the embeddings")

    def _at(self, phi: float, theta: float, omega, dps: int):
        """The geometry at split ``phi``, angle ``theta`` and bias angle ``omega`` (``None``: no
        bias); None where ``<w, one> = 0`` (LayerNorm) or ``<w, t_a>``, ``<w, t_b>`` differ in
        sign (RMSNorm)."""
        cell, d = self.cell, self.cell.d
        with mpmath.workdps(dps):
            ph, th = mpmath.mpf(phi), mpmath.mpf(theta)
            f1, f2 = self.frame()
            e1 = np.array([mpmath.mpf(1)] + [mpmath.mpf(0)] * (d - 1), dtype=object)
            g = (mpmath.cos(ph) * e1 + mpmath.sin(ph) * np.roll(e1, 1)) * KEEP
            b = [mpmath.mpf(0)] * 2 if omega is None else [mpmath.cos(omega), mpmath.sin(omega)]
            beta = (b[0] * e1 + b[1] * np.roll(e1, 1)) * KEEP
            K = self._plane_map(ph)
            ca = [mpmath.cos(th), mpmath.sin(th)]
            ha = [K[0][0] * ca[0] + K[0][1] * ca[1] + b[0], K[1][0] * ca[0] + K[1][1] * ca[1] + b[1]]
            det = K[0][0] * K[1][1] - K[0][1] * K[1][0]
            turned = [-ha[1], ha[0]]
            q = [(K[1][1] * turned[0] - K[0][1] * turned[1]) / det,
                 (K[0][0] * turned[1] - K[1][0] * turned[0]) / det]  # K^-1 J h_a
            cb = list(_chord(np.array(ca, dtype=object), np.array(q, dtype=object)))
            t_a = ca[0] * f1 + ca[1] * f2
            t_b = cb[0] * f1 + cb[1] * f2
            h_a, h_b = self._values(g, beta, t_a, t_b, dps)
            w = h_a - (_dot(h_a, h_b) / _dot(h_b, h_b)) * h_b
            w = w / mpmath.sqrt(_dot(w, w))
            wa, wb = _dot(w, t_a), _dot(w, t_b)
            if cell.kind.centred:
                one = _mp_vector(ONE, d)
                wo = _dot(w, one)
                if abs(wo) < mpmath.mpf(2) ** -20:
                    return None
                c = -(wb - wa) / wo  # (mu_b - mu_a)/nu
                nu = KEEP / mpmath.sqrt(1 + c * c / 4)
                e_a = nu * t_a - (nu * c / 2) * one
                e_b = nu * t_b + (nu * c / 2) * one
            else:
                if not wa * wb > 0:
                    return None
                ratio = wa / wb  # gam/lam
                lam, gam = (KEEP, KEEP * ratio) if ratio <= 1 else (KEEP / ratio, KEEP)
                e_a, e_b = lam * t_a, gam * t_b
            vec = {"e_s": e_a.copy(), "e_a": e_a, "e_b": e_b, "g": g}
            if cell.affine.bias:
                vec["beta"] = beta
            vec["_w"] = w
            return vec

    def _values(self, g, beta, t_a, t_b, dps: int):
        """``h_a``, ``h_b`` as the verifier's forward pass computes them (mpf)."""
        from verify.forward import numbers

        vec = {"e_s": t_a, "e_a": t_a, "e_b": t_b, "g": g}
        if self.cell.affine.bias:
            vec["beta"] = beta
        params = Params(self.cell, {**vec, "u": np.zeros((2, self.cell.d))}, {"b": [0, 0]})
        bk = get_backend(f"mp{dps}")
        with bk.context():
            nums = numbers(params, bk, readout=False)
            return (np.array([mpmath.mpf(x) for x in nums.h["a"]], dtype=object),
                    np.array([mpmath.mpf(x) for x in nums.h["b"]], dtype=object))

    def step(self, dps: int = 50):
        """``kappa' = tau |h_a|^2 <w, h_a>``, the gap of the positions ``x_n`` (mpf)."""
        vec = self.embeddings(dps)
        with mpmath.workdps(dps):
            h_a, _ = self._values(vec["g"], vec.get("beta"), vec["e_a"], vec["e_b"], dps)
            return _dot(h_a, h_a) * _dot(vec["_w"], h_a) / mpmath.sqrt(self.cell.d)

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The unit-norm head at ``L`` (refused beyond the limits of
        :func:`constructions.classification.check_size`): the collinear head along ``w`` on the
        positions ``x_0..x_L`` of the outputs ``z_s, z_a(1), .., z_a(L)`` (those of every class)."""
        if isinstance(L_value, bool) or not isinstance(L_value, (int, np.integer)) or L_value < 1:
            raise ValueError(f"L must be a positive integer, got {L_value!r}")
        L_value = int(L_value)
        check_size(self.cell, L_value)
        vec = dict(self.embeddings(dps))
        w = vec.pop("_w")
        with mpmath.workdps(dps):
            x = [_dot(w, z) for z in self.outputs(vec, L_value, dps)]
            if not all(q > p for p, q in zip(x, x[1:])):
                raise ValueError(f"{self.cell.describe()}: the outputs are not in order at L = {L_value}")
            u, b = collinear_head(x, w)
        return Params(self.cell, {**vec, "u": u}, {"b": b})

    def outputs(self, vec: dict, L_value: int, dps: int):
        """``z_s, z_a(1), .., z_a(L)`` of the verifier's forward pass (rows of mpf); the outputs
        ``z_b(n)`` have the positions of ``z_a(n)`` along ``w`` (module docstring)."""
        from verify.forward import reduced

        params = Params(self.cell, {**vec, "u": np.zeros((L_value + 1, self.cell.d))},
                        {"b": [0] * (L_value + 1)})
        query = ["s"] + ["a"] * L_value
        return reduced(params, list(range(L_value + 1)), backend=f"mp{dps}", readout=False, query=query)


def _dot(p, q):
    return mpmath.fsum(p * q)


def _turn(v):
    """``J v``: the plane vector(s) ``v`` (first axis the two coordinates) turned by 90 degrees."""
    return np.stack([-v[1], v[0]])


def _chord(c, q):
    """The second point ``c + s q`` of the unit circle on the line through the unit ``c`` along
    ``q``: ``|c + s q|^2 = 1`` iff ``s (2 <c, q> + s |q|^2) = 0``, so ``s = -2 <c, q>/|q|^2``
    (floats with a trailing axis of points, or mpf)."""
    s = -2 * (c[0] * q[0] + c[1] * q[1]) / (q[0] * q[0] + q[1] * q[1])
    return np.stack([c[0] + s * q[0], c[1] + s * q[1]]) if isinstance(s, np.ndarray) else (c[0] + s * q[0], c[1] + s * q[1])
