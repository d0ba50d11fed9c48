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

*The geometry* (at unit budget: ``|g| <= 1``, every ``|e_x| <= 1``, a bias 0).  The values lie
on an ellipse of semi-axes ``A_1, A_2``: ``h_a`` at angle ``theta`` on it and ``h_b`` its second
point on the chord through ``h_a`` orthogonal to ``h_a`` (the chord of
:class:`constructions.select_last.GainSelectDesign`), so ``<h_b, h_a> = |h_a|^2``; ``h_s = h_a``.
LayerNorm: the gain ``g = cos(phi) e_1 + sin(phi) (0, 1, .., 1)/sqrt(d-1)`` and the embedding
axes ``c_1, p`` of that design, its split ``phi``.  RMSNorm: ``g = cos(phi) e_1 + sin(phi) e_2``
and embeddings in the plane of ``e_1, e_2``, where the unit embedding ``(cos t, sin t)`` has the
value ``sqrt(d) (cos(phi) cos t, sin(phi) sin t)``: ``A_1 = sqrt(d) cos(phi)``, ``A_2 = sqrt(d)
sin(phi)``, both axes of order ``sqrt(d)`` (spreading the second part of the gain over ``d - 1``
coordinates, as the regression design does, shrinks ``A_2`` by ``sqrt(d - 1)``).  The head
reads along

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
mu_x one`` with the directions ``t_a``, ``t_b`` of the design and ``mu_b - mu_a = -nu <w, t_b - t_a>
/ <w, one>`` (``<w, one> != 0``), centred on 0 with ``nu`` the largest that keeps ``|e_x| <= 1``.
RMSNorm: ``e_a = lam t_a``, ``e_b = gam t_b`` with ``gam <w, t_b> = lam <w, t_a>`` (both inner
products of one sign: the float screen keeps only such shapes), the larger scale 1.  The head is the collinear head of
:func:`constructions.classification.collinear_head` on ``x_0..x_L`` along ``w``: margin

    m = 1 / sum_{c=0}^{L-1} 1/kappa' = kappa' / L.

Every ``u_c`` is a multiple of ``w``, so the judge's inputs with any ``n_b`` have the logits of
these ``L + 1`` positions.  The angle ``theta`` (RMSNorm: and ``phi``) maximises ``kappa'`` at unit
budget (a float grid; any shape where the embeddings above exist is a valid construction, and
the judge certifies every row).  ``kappa'`` does not depend on ``L``.

*The bound.*  The count task at the last read is the sub-task ``n_b = 0`` of this one
(:func:`bounds.margin.margin_upper`), so its bound ``cap(1, 1)/(L - 1)``
(:func:`bounds.last_margin.last_margin_upper`) holds: ``cap(1, 1) = tau H^3`` with ``H`` the
largest value at unit gain.  The ratio ``margin_upper/margin`` is ``L/(L - 1)`` times
``cap(1, 1)/kappa'``: the price of a chord orthogonal to ``h_a`` inside the ellipse of values (a
bounded factor: the rate ``-1`` of the count task is kept).  No head of this form escapes a
factor: ``|h_b| = |h_a|/cos(psi) <= H`` (``psi`` the angle of ``h_a, h_b``) gives ``kappa' = tau
|h_a|^3 sin(psi) <= tau H^3 max_x x^3 sqrt(1 - x^2) = tau H^3 (3/4)^(3/2)/2``, a ratio of at least
3.08; with a bias the count task's values reach ``H`` beyond the gain's, which this head (its
bias 0) does not use.

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
#: the grid of gain splits screened for RMSNorm
PHI_POINTS = 157


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
        from constructions.select_last import GainSelectDesign

        self.cell, self.family, self.geometry, self.foot, self.pencil = cell, laws.family(cell), None, None, None
        self.values = GainSelectDesign(cell.replace(readout="regression"))

    def shapes(self) -> list[tuple[float, float]]:
        """The gain splits ``phi`` and angles ``theta`` of ``h_a`` on the ellipse, best ``kappa'``
        first (a float screen of ``|h_a|^3 |h_b - h_a|/|h_b|`` at unit budget): LayerNorm the
        split of the regression design and its angle grid; RMSNorm a grid of both, where
        ``<w, t_a> <w, t_b> > 0`` (module docstring)."""
        from constructions.select_last import THETA_GRID

        if self.cell.kind.centred:
            phis = [float(self.values.phi)]
        else:
            phis = np.linspace(0.02, math.pi / 2 - 0.02, PHI_POINTS)
        found = []
        for phi in phis:
            A1, A2 = self._semi_axes(phi, math.sqrt, math.cos, math.sin)
            X, Y, Xb, Yb = self.values._chord(A1, A2, THETA_GRID)
            F = np.hypot(X, Y) ** 3 * np.hypot(Xb - X, Yb - Y) / np.hypot(Xb, Yb)
            if not self.cell.kind.centred:  # w in the plane of e_1, e_2, t_x = (X/A1, Y/A2)
                dot = (X * Xb + Y * Yb) / (Xb**2 + Yb**2)
                wx, wy = X - dot * Xb, Y - dot * Yb
                F = np.where((wx * X / A1 + wy * Y / A2) * (wx * Xb / A1 + wy * Yb / A2) > 0, F, -np.inf)
            found += [(float(f), float(phi), float(th)) for f, th in zip(F, THETA_GRID) if f > 0]
        return [(phi, th) for _, phi, th in sorted(found, reverse=True)]

    def _semi_axes(self, phi, sqrt, cos, sin):
        """``(A_1, A_2)``, the semi-axes of the ellipse of values at unit gain split ``phi``:
        LayerNorm those of :class:`~constructions.select_last.GainSelectDesign`; RMSNorm ``g =
        cos(phi) e_1 + sin(phi) e_2`` on the unit embeddings of the plane of ``e_1, e_2``, whose
        values are ``sqrt(d) (cos(phi) t_1, sin(phi) t_2)``."""
        d = self.cell.d
        if self.cell.kind.centred:
            G1, G2 = cos(phi), sin(phi) / sqrt(d - 1)
            return sqrt(G1**2 * (d - 1) + G2**2), sqrt(d) * G2
        return sqrt(d) * cos(phi), sqrt(d) * sin(phi)

    @functools.lru_cache(maxsize=None)
    def embeddings(self, dps: int = 50) -> dict:
        """The exact vectors of the geometry (module docstring; mpf at ``dps`` digits) and, under
        ``"_w"``, the head's direction: the best shape where they exist."""
        for phi, theta in self.shapes():
            vec = self._at(phi, theta, dps)
            if vec is not None:
                return vec
        raise ValueError(f"{self.cell.describe()}: no shape of the grid admits the embeddings")

    def _at(self, phi: float, theta: float, dps: int):
        """The geometry at split ``phi`` and angle ``theta`` (None where ``<w, one> = 0``
        (LayerNorm) or ``<w, t_a>``, ``<w, t_b>`` differ in sign (RMSNorm))."""
        from constructions.select_last import _axes

        cell, d = self.cell, self.cell.d
        with mpmath.workdps(dps):
            th = mpmath.mpf(theta)
            e1 = np.array([mpmath.mpf(1)] + [mpmath.mpf(0)] * (d - 1), dtype=object)
            if cell.kind.centred:  # the regression design's split, exactly
                ph = mpmath.mpf(self.values.phi.p) / self.values.phi.q
                r = np.array([mpmath.mpf(0)] + [mpmath.mpf(1)] * (d - 1), dtype=object)
                g = (mpmath.cos(ph) * e1 + mpmath.sin(ph) / mpmath.sqrt(d - 1) * r) * KEEP
                top, across = _axes(cell)
            else:
                ph = mpmath.mpf(phi)
                top, across = e1, np.roll(e1, 1)
                g = (mpmath.cos(ph) * top + mpmath.sin(ph) * across) * KEEP
            A1, A2 = self._semi_axes(ph, mpmath.sqrt, mpmath.cos, mpmath.sin)
            X, Y = A1 * mpmath.cos(th), A2 * mpmath.sin(th)
            tv = 2 * X * Y * (1 / A1**2 - 1 / A2**2) / (Y**2 / A1**2 + X**2 / A2**2)
            Xb, Yb = X - tv * Y, Y + tv * X
            t_a = mpmath.cos(th) * top + mpmath.sin(th) * across
            t_b = (Xb / A1) * top + (Yb / A2) * across
            h_a, h_b = self._values(g, t_a, t_b, dps)
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
                vec["beta"] = 0 * e1
            vec["_w"] = w
            return vec

    def _values(self, g, t_a, t_b, dps: int):
        """``h_a``, ``h_b`` as the verifier's forward pass computes them (mpf)."""
        from verify.forward import numbers

        vec = {"e_s": t_a, "e_a": t_a, "e_b": t_b, "g": g}
        if self.cell.affine.bias:
            vec["beta"] = 0 * g
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
            h_a, _ = self._values(vec["g"], vec["e_a"], vec["e_b"], dps)
            return _dot(h_a, h_a) * _dot(vec["_w"], h_a) / mpmath.sqrt(self.cell.d)

    def exact_margin(self, L_value: int, dps: int = 50):
        """The head's margin ``kappa'/L`` (module docstring; mpf)."""
        return self.step(dps) / L_value

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The unit-norm head at ``L`` (refused beyond the limits of
        :func:`constructions.classification.check_size`): the collinear head along ``w`` on the
        positions ``x_0..x_L`` of the outputs ``z_b(0)``, ``z_a(1)``, ..., ``z_a(L)``."""
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
