"""Classification of the count task read last, linear attention with post-RMSNorm (``eps = 0``,
every ``d`` and affine): the better of two heads, by a float screen of every input against every
class.

*The count task's own arc* (``L >= 2``).  Read last, the counts ``n = 1..L`` lie on the one-sided
arc ``sqrt(d) unit((n + F) along + lam perp)`` and the input ``(s)`` at the offset ``D = F - u``
of the same line (:mod:`constructions.last_tied`: ``e_s`` at the cosine ``c > 0`` to ``e_a``, so
``(s)`` is at the angle ``arccos(c)`` from ``along``, some 49 degrees at ``d = 8``, while the
counts span less than ``atan(kappa)``, some 8.6).  The count task has no input at the offset ``F``
(the query ``b`` of the select task, which the select head keeps apart as a class-0 point one
count before the count 1), so its classes ``1..L`` are the arc of ``L - 1`` gaps that its bound
(``margin_upper``, :func:`bounds.last_margin._post`: the dual certificate of the tied arc of
``L - 1``) is taken over, and the count 0 is far from them.  :func:`constructions.last_tied.
geometry` of the count cell (its shape ``(F/L, t, omega, chi)`` searched on these points) with the
arc head of :func:`constructions.select_last_points.arc_screen` (the greedy head of the classes in
the order of their angle, the middle biases) reads it.  The count 0 costs the head nothing
measurable (bare, ``d = 8``, ``L = 16``: its margin is the greedy optimum of the counts ``1..L``
alone to 1e-8), and ``margin_ratio`` is 1.0040 from ``L = 8`` (bare, ``d = 8``): the
certificate's own tolerance, :data:`bounds.arc_margin.TOLERANCE`.

*The sub-task's head.*  The count task's inputs read last are ``(s)`` and ``(s, a^n)``, ``n =
1..L``: the select inputs ``(0, 0, s)`` and ``(n, 0, a)`` (:mod:`verify.inputs`) with the same
classes.  None of them holds a token ``b``, so no output reads ``e_b``: a parameter set of the
select cell with ``e_b`` dropped is a parameter set of the count cell with the same outputs on
these inputs, every vector of norm at most 1 if it had, and its smallest logit gap over them is at
least the select head's over all select inputs (:meth:`CountLastFootHead.stripped`: the select
head of :class:`constructions.select_last_points.SelectLastPointsHead`).  It is the head at ``L =
1``, and the candidate that the screen compares beyond.

The judge certifies the built head on the count task's own inputs (nothing above is assumed by
the certificate).  With a gain the head is within 0.1% of a float search of the tied arc's greedy
optimum over its foot and ellipse, and the bound, whose certificate takes the least over the
weights of a few feet (:data:`bounds.arc_margin.TIED_FEET`), meets it to 1.0042 at ``L = 16`` and
1.0040 at 64 (``d = 8``; 1.004 at ``d = 3`` and 16 as well).
"""

from __future__ import annotations

import mpmath
import numpy as np

from constructions import last_tied, laws, registry
from constructions.cell import Cell, Params
from constructions.classification import ClassificationDesign
from constructions.select_last_points import (SelectLastPointsHead, arc_head, arc_screen, conic_centre,
                                              plane_margin, read_points)


def built(cell: Cell) -> bool:
    """Whether ``cell`` (classification) is served by :class:`CountLastFootHead`."""
    return registry.builds("count_last_foot_head", cell)


class CountLastFootHead(ClassificationDesign):
    """The select task's head of the same architecture without ``e_b`` (module docstring); the
    interface of :class:`~constructions.classification.ClassificationDesign` (``build``;
    ``geometry`` is the select head's)."""

    def __init__(self, cell: Cell):
        if not built(cell):
            raise ValueError(f"{cell.describe()}: not served by CountLastFootHead")
        self.cell, self.family, self.foot, self.pencil = cell, laws.family(cell), None, None
        self.select = SelectLastPointsHead(cell.replace(task="select"))
        self.geometry = self.select.geometry

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The better, by the float screen of every input against every class, of the select head
        at ``L`` without ``e_b`` and the arc head on the count task's own tied arc (module
        docstring)."""
        best = self.stripped(L_value, dps)
        if L_value < 2:
            return best
        own = self._tied(L_value, dps)
        return own[0] if own is not None and own[1] > screen(best, L_value) else best

    def stripped(self, L_value: int, dps: int = 50) -> Params:
        """The select head at ``L`` without ``e_b``, as a parameter set of the count cell."""
        params = self.select.build(L_value, dps)
        return Params(self.cell, {k: v for k, v in params.vectors.items() if k != "e_b"}, params.scalars)

    def _tied(self, L_value: int, dps: int):
        """``(params, margin)``: the arc head on :func:`constructions.last_tied.geometry` of the
        count cell and its float screen (every input against every class,
        :func:`constructions.select_last_points.arc_screen`); None where its outputs are not read
        apart."""
        geometry = last_tied.geometry(self.cell, L_value, dps)
        z, n_a = read_points(geometry, L_value)
        arc = arc_screen(conic_centre(geometry), z, n_a, L_value)
        if arc is None:
            return None
        with mpmath.workdps(dps):
            u, b = arc_head(*arc[1:])
        vectors = {k: v for k, v in geometry.vectors.items() if k != "w"}
        return Params(self.cell, {**vectors, "u": u}, {"b": b}), arc[0]


def screen(params: Params, L_value: int) -> float:
    """The smallest float margin of the head ``params`` over every input against every class."""
    z, n_a = read_points(params, L_value)
    u = np.array([[float(c) for c in row] for row in params.vectors["u"]])
    b = np.array([float(c) for c in params.scalars["b"]])
    return plane_margin(z, n_a, u, b)
