"""Classification at the last read: the unit-norm head on the last-read regression geometry.

The count task read at the last position (:mod:`constructions.tasks`) gives, for ``n >= 1``,
outputs on a line (the query is ``h_a`` for every ``n >= 1``) and for ``n = 0`` the output of
``s`` read at ``s``, placed by the offset of the embeddings:

* linear attention with pre-norm: ``z_n = e_a + tau <h_a, h_s> h_s + n tau |h_a|^2 h_a``
  (``n >= 1``) and ``z_0 = e_s + tau |h_s|^2 h_s``; the construction has ``h_s = h_a = h`` and
  the embeddings along ``top`` with scales ``lam_s, lam_a``, so along ``u = h/|h|`` the outputs
  sit at ``x_n = lam_a <u, top> + (n + 1) kappa`` and ``x_0 = lam_s <u, top> + kappa``,
  ``kappa = tau |h|^3``: every gap is ``kappa`` except the first, ``kappa + (lam_a - lam_s)
  <u, top>``;
* softmax attention with pre-norm and a gain: ``z_n = e_a + h_s + phi(n) (h_a - h_s)``
  (``phi(n) = n/(rho+n)``, ``n >= 1``) and ``z_0 = e_s + h_s``; along ``u = (h_a - h_s)/X`` the
  gaps are ``X rho/((rho+c)(rho+c+1))`` (``c = 1..L-1``) and the first is ``O + X/(rho+1)``
  with ``O = <u, e_a - e_s>``, the offset of the regression construction in units of ``X/D``
  (:func:`constructions.tasks.last_offsets`: ``delta = <w, e_s - e_a> = -(D/X) O``).

The geometry is the regression construction of :class:`constructions.tasks.TaskDesign` at
budget 1 with the values at their largest (linear: the slope at the capacity, so the gain has
norm 1; softmax: ``X`` the law's at the shape) and the offset at the end of its reach that
widens the first gap (``lam_s = 2^-20`` for the line; ``delta = delta_c - SHRINK r`` for the
segment).  The outputs are read along ``u`` by the 1-D head of
:func:`constructions.classification.collinear_head`, whose margin is ``1/sum_c 1/gap_c``
(:mod:`constructions.classification`); the softmax shape ``rho`` maximises it.  The proven
upper bound over every parameter set is :mod:`bounds.last_margin`.
"""

from __future__ import annotations

import mpmath
import numpy as np

from constructions import laws, zoom
from constructions.cell import Cell, Params
from constructions.classification import ClassificationDesign, check_size, collinear_head
from constructions.tasks import SHRINK, last_offsets

#: the scale of ``e_s`` in the line geometry: the offset ``delta = -Delta (1 - LINE_SLACK)``
#: just inside its reach ``(-Delta, Delta)`` (``e_s`` must stay non-zero under pre-norm)
LINE_SLACK = mpmath.mpf(2) ** -20
#: the read-out constant passed to the segment geometry: beyond every reachable offset, so that
#: the construction clips ``delta`` to the low end ``delta_c - SHRINK r`` of its reach
FAR = mpmath.mpf(10) ** 9


class LastReadHead(ClassificationDesign):
    """The unit-norm head of a classification cell read at the last position (module
    docstring); the interface of :class:`~constructions.classification.ClassificationDesign`."""

    def __init__(self, cell: Cell):
        if not cell.read.last or cell.distractor:
            raise ValueError("LastReadHead is for the count task read at the last position")
        super().__init__(cell)
        if self.family not in ("line", "segment"):
            raise ValueError(f"{cell.describe()}: no last-read head without pre-norm")

    # ------------------------------------------------------------------ the float screen
    def _segment_parts(self, rho):
        """``(X, O)`` of the segment geometry at unit budget and shape(s) ``rho`` (float64)."""
        cell = self.cell
        rho = np.asarray(rho, dtype=np.float64)
        X = laws.last_value_gap(cell, 1.0, np.sqrt(cell.d) * np.log(rho), laws.NUMPY)
        alpha = 1 - X / cell.kind.max_coordinate(cell.d, np.sqrt)
        dc, r = last_offsets(cell, 1.0, X, X, alpha, laws.NUMPY)  # D/X = 1: O per unit
        return X, float(SHRINK) * r - dc

    def margin(self, t_value, L_value: int):
        """Float64 margin ``1/sum_c 1/gap_c`` of the last-read outputs at shape(s) ``t``
        (module docstring; -inf where degenerate)."""
        tv = np.atleast_1d(np.asarray(t_value, dtype=np.float64))
        Lp = L_value - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.family == "line":
                kappa = float(self.geometry.capacity(1.0, 1.0))
                first = kappa + float(self._line_reach()) * (1 - float(LINE_SLACK))
                inv = Lp / kappa + 1 / first
                m = np.full(tv.shape, 1 / inv)
            else:
                X, O = self._segment_parts(tv)
                rp = tv + 1
                S = Lp * rp**2 + Lp**2 * rp + (Lp**3 - Lp) / 3
                m = 1 / (S / (X * tv) + 1 / (O + X / rp))
        m[~np.isfinite(m) | (m <= 0)] = -np.inf
        return m if np.ndim(t_value) else float(m[0])

    def _line_reach(self):
        """``<u, top>`` per unit scale of the embeddings: the first gap's extra length at
        ``lam_a - lam_s = 1`` (the axis reach with a gain, 1 bare)."""
        return 1 if laws.rigid(self.cell) else self.cell.kind.axis_reach(self.cell.d, mpmath.sqrt)

    def best_shape(self, L_value: int):
        """``rho`` maximising :meth:`margin` over the last-read domain at unit budget (segment);
        None (line)."""
        if self.family == "line":
            return None
        dom = self.geometry.domain(L_value, 1.0)
        return zoom.maximize(lambda tt: self.margin(tt, L_value), dom[0], dom[1], points=33)[0]

    # ------------------------------------------------------------------ the head
    def geometry_at(self, L_value: int, t_value) -> dict:
        """The regression geometry at budget 1 (module docstring), evaluated in mpmath at the
        current precision."""
        one = mpmath.mpf(1)
        if self.family == "line":
            A = self.geometry.capacity_mp(one, one) * (1 - mpmath.mpf(2) ** -40)
            reach = laws.last_offset_reach(self.cell, one, A, laws.MPMATH)
            C = mpmath.mpf(1) / 2 + reach * (1 - 2 * LINE_SLACK)
            return self.geometry.evaluate(L_value, one, one, A, C)
        return self.geometry.evaluate(L_value, one, mpmath.mpf(t_value), one, FAR)

    def outputs(self, geo: dict, L_value: int, t_value):
        """``(u, x)``: the read direction and the positions ``x_n = <u, z_n>`` of the exact
        outputs (module docstring), mpf."""
        d = self.cell.d
        tau = 1 / mpmath.sqrt(d)
        e_s, e_a, h_s, h_a = geo["e_s"], geo["e_a"], geo["_h_s"], geo["_h_a"]
        dot = lambda p, q: mpmath.fsum(p * q)
        if self.family == "line":
            u = h_a / mpmath.sqrt(dot(h_a, h_a))
            base = dot(u, e_a) + tau * dot(h_a, h_s) * dot(u, h_s)
            step = tau * dot(h_a, h_a) * dot(u, h_a)
            x0 = dot(u, e_s) + tau * dot(h_s, h_s) * dot(u, h_s)
            return u, [x0] + [base + n * step for n in range(1, L_value + 1)]
        diff = h_a - h_s
        X = mpmath.sqrt(dot(diff, diff))
        u = diff / X
        rho = mpmath.mpf(t_value)
        base = dot(u, e_a) + dot(u, h_s)
        return u, [dot(u, e_s) + dot(u, h_s)] + [base + X * n / (rho + n) for n in range(1, L_value + 1)]

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The unit-norm head: the geometry at budget 1 and the 1-D head on the positions
        (refused beyond the limits of :func:`constructions.classification.check_size`)."""
        check_size(self.cell, L_value)
        t_value = self.best_shape(L_value)
        with mpmath.workdps(dps):
            geo = self.geometry_at(L_value, t_value)
            vec = {k: v for k, v in geo.items() if k not in ("w", "w0") and not k.startswith("_")}
            u, x = self.outputs(geo, L_value, t_value)
            if not all(b > a for a, b in zip(x, x[1:])):
                raise ValueError(f"{self.cell.describe()}: the last-read outputs are not in order at L = {L_value}")
            vec["u"], b = collinear_head(x, u)
            return Params(self.cell, vec, {"b": b})
