r"""Classification of the select task read last, linear attention without a norm (``d >= 3``): a
head along a direction that never sees the distractor's value.

*The outputs* (``h = e``; :mod:`constructions.select_last`).  An input with ``n_a`` tokens ``a``
and ``n_b`` tokens ``b`` read at query ``q`` has

    z_q(n_a, n_b) = e_q + tau (<e_q, e_s> e_s + n_a <e_q, e_a> e_a + n_b <e_q, e_b> e_b),

and ``(s)`` has ``z_s = e_s (1 + tau |e_s|^2)``.  Every ``b`` adds a vector along ``e_b``.  A head
whose rows ``u_c`` are all multiples of one unit vector ``v`` orthogonal to ``e_b`` has logits
that depend on the position ``X = <v, z>`` alone, and ``X`` does not depend on ``n_b``:

    X_a(n) = <v, e_a> + tau <e_a, e_s> <v, e_s> + n k_a,   k_a = tau |e_a|^2 <v, e_a>,
    X_b(n) = tau <e_b, e_s> <v, e_s> + n k_b,              k_b = tau <e_a, e_b> <v, e_a>,
    X_s = <v, e_s> (1 + tau |e_s|^2),

class 0 is ``{X_b(0), X_s}``, class ``n`` (``1 <= n <= L - 1``) is ``{X_a(n), X_b(n)}``, class
``L`` is ``{X_a(L)}``.

*The geometry* (every vector of norm ``sigma = 1 - 2^-40`` or less).  On the first three
coordinate axes ``f_1, f_2, f_3``:

    e_a = lam f_1,   e_b = lam f_1 + gam f_2,   lam = sigma sqrt(2/3),  gam = sigma/sqrt(3),
    v = (x/lam) f_1 - (x/gam) f_2 + sqrt(1 - (x/lam)^2 - (x/gam)^2) f_3,
    e_s = -sigma (v + f_2)/|v + f_2|,      x = tau gam sigma^2 / (2 + tau sigma^2).

Then ``<v, e_b> = x - x = 0``; ``<e_a, e_b> = lam^2 = |e_a|^2``, so ``k_a = k_b = k = tau lam^2
x``; and the two lines coincide, ``X_a(n) = X_b(n)``: their difference is ``D = <v, e_a> + tau
<v, e_s> <e_a - e_b, e_s> = x - tau gam <v, e_s> <f_2, e_s>``, and with ``|v + f_2|^2 = 2(1 +
v_2)``, ``v_2 = -x/gam``, the product ``<v, e_s> <f_2, e_s> = sigma^2 (1 + v_2)/2``, so ``D = x -
tau gam sigma^2 (1 - x/gam)/2 = 0`` by the choice of ``x``.  Finally ``<v, e_s> < 0`` and ``<e_b,
e_s> = -sigma gam/|v + f_2| < 0``, so ``X_s < 0 < X_b(0)``: the input ``(s)`` lies below class 0's
other output, on the outer side.  Every class ``n >= 1`` is one position ``X_0 + n k``
(``X_0 = X_b(0)``) and class 0 is ``[X_s, X_0]``.

*The head* (:func:`constructions.classification.collinear_head` on these intervals along ``v``):
the gaps are all ``k``, so the margin is

    m = 1 / sum_{c=0}^{L-1} 1/k = k/L,   k = tau^2 sigma^4 (2/3) / (sqrt(3) (2 + tau sigma^2)),

about ``0.0204/L`` at ``d = 8``.  *Why this shape:* for a head along ``v`` orthogonal to ``e_b``
with one step (``<e_a, e_b> = |e_a|^2``) and coinciding lines (``D = 0``), ``D = 0`` needs ``x =
<v, e_a> = tau gam <v, e_s> <f_2, e_s>``, and the largest value of ``<v, y> <f_2, y>`` over ``|y|
<= sigma`` is ``sigma^2 (1 + <v, f_2>)/2`` (the top eigenvalue of ``(v f_2^T + f_2 v^T)/2`` times
``sigma^2``), so ``x <= tau gam sigma^2 (1 - x/gam)/2``, i.e. ``x`` is at most the value above,
and ``k = tau lam^2 x`` is largest at ``|e_b| = sigma`` and ``gam = sigma/sqrt 3`` (the maximum
of ``lam^2 gam`` on ``lam^2 + gam^2 = sigma^2``): the largest step of a head of this form.
Nothing is claimed max-min: ``|e_a| < 1`` and the lines' coincidence cost the factor against the
bound.

*The bound* (:func:`bounds.margin.margin_upper`): the smaller of the count task's at the last
read (its sub-task ``n_b = 0``), ``tau/(L - 1)``, and the query-``b`` bound
:func:`bounds.last_margin.select_linear_upper`, ``tau/(2 (L - 1))`` (``H = 1``): the ratio is
``L/(L - 1)`` times ``tau/(2k)`` (8.65 at ``d = 8``), the rate ``-1`` is the bound's.

The judge certifies every row on balls; the positions above are for the head's breakpoints and
are recomputed from the verifier's own forward pass (mpmath), not assumed.
"""

from __future__ import annotations

import mpmath
import numpy as np

from constructions import laws, registry
from constructions.cell import Cell, Params
from constructions.classification import ClassificationDesign, check_size, collinear_head

#: every embedding's norm is at most this (rounding stays inside the unit ball)
SIGMA = 1 - mpmath.mpf(2) ** -40


def built(cell: Cell) -> bool:
    """Whether ``cell`` (classification) is served by :class:`FreeSelectLastHead`."""
    return registry.builds("select_last_free_head", cell)


class FreeSelectLastHead(ClassificationDesign):
    """The unit-norm head of the select task read last, linear attention without a norm (module
    docstring); the interface of :class:`~constructions.classification.ClassificationDesign`."""

    def __init__(self, cell: Cell):
        if not built(cell):
            from constructions.refusals import refusal

            raise ValueError(f"{cell.describe()}: {refusal(cell) or 'not served by FreeSelectLastHead'}")
        self.cell, self.family, self.geometry, self.foot, self.pencil = cell, laws.family(cell), None, None, None

    def embeddings(self, dps: int = 50) -> dict:
        """``e_a, e_b, e_s`` and, under ``"_v"``, the head's direction (mpf at ``dps`` digits)."""
        d = self.cell.d
        with mpmath.workdps(dps):
            sigma = mpmath.mpf(SIGMA)
            tau = 1 / mpmath.sqrt(d)
            lam, gam = sigma * mpmath.sqrt(mpmath.mpf(2) / 3), sigma / mpmath.sqrt(3)
            x = tau * gam * sigma**2 / (2 + tau * sigma**2)
            f = [np.array([mpmath.mpf(int(i == j)) for i in range(d)], dtype=object) for j in range(3)]
            v = (x / lam) * f[0] - (x / gam) * f[1] + mpmath.sqrt(1 - (x / lam) ** 2 - (x / gam) ** 2) * f[2]
            vf = v + f[1]
            e_s = -sigma * vf / mpmath.sqrt(mpmath.fsum(vf * vf))
            return {"e_s": e_s, "e_a": lam * f[0], "e_b": lam * f[0] + gam * f[1], "_v": v}

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The head at ``L`` (refused beyond :func:`constructions.classification.check_size`): the
        collinear head along ``v`` on the class intervals of the outputs' positions."""
        if isinstance(L_value, bool) or not isinstance(L_value, (int, np.integer)) or L_value < 1:
            raise ValueError(f"L must be a positive integer, got {L_value!r}")
        L_value = int(L_value)
        check_size(self.cell, L_value)
        vec = self.embeddings(dps)
        v = vec.pop("_v")
        lo, hi = class_ends(self.cell, vec, v, L_value, dps)
        with mpmath.workdps(dps):
            if not all(lo[c + 1] > hi[c] for c in range(L_value)):
                raise ValueError(f"{self.cell.describe()}: the classes meet at L = {L_value}")
            u, b = collinear_head(lo, v, upper=hi)
        return Params(self.cell, {**vec, "u": u}, {"b": b})


def class_ends(cell: Cell, vec: dict, v, L_value: int, dps: int):
    """``(lo, hi)``: the smallest and largest position ``<v, z>`` of every class ``0..L`` over the
    outputs ``z_s``, ``z_a(n, 0)`` (``n >= 1``) and ``z_b(n, 1)`` (``n <= L - 1``), from the
    verifier's forward pass at ``dps`` digits (along ``v`` no other ``n_b`` moves them)."""
    from verify.forward import reduced

    params = Params(cell, {**vec, "u": np.zeros((L_value + 1, cell.d))}, {"b": [0] * (L_value + 1)})
    n_a = [0] + list(range(1, L_value + 1)) + list(range(L_value))
    n_b = [0] * (L_value + 1) + [1] * L_value
    query = ["s"] + ["a"] * L_value + ["b"] * L_value
    z = reduced(params, n_a, n_b, backend=f"mp{dps}", readout=False, query=query)
    with mpmath.workdps(dps):
        lo, hi = [None] * (L_value + 1), [None] * (L_value + 1)
        for c, row in zip(n_a, z):
            x = mpmath.fsum(mpmath.mpf(p) * q for p, q in zip(row, v))
            lo[c] = x if lo[c] is None else min(lo[c], x)
            hi[c] = x if hi[c] is None else max(hi[c], x)
        return lo, hi
