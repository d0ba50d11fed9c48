"""Classification of the count task read last, linear attention with post-RMSNorm (``eps = 0``,
every ``d`` and affine): the select task's head without ``e_b``.

*The sub-task.*  The count task's inputs read last are ``(s)`` and ``(s, a^n)``, ``n = 1..L``: the
select inputs ``(0, 0, s)`` and ``(n, 0, a)`` (:mod:`verify.inputs`) with the same classes.  None of
them holds a token ``b``, so no output reads ``e_b``: a parameter set of the select cell with
``e_b`` dropped is a parameter set of the count cell with the same outputs on these inputs, every
vector of norm at most 1 if it had, and its smallest logit gap over them is at least the select
head's over all select inputs.  The head is therefore
:class:`constructions.select_last_points.SelectLastPointsHead` of the select cell (the one-sided
arc of :mod:`constructions.select_last_linear_post`, ``b`` a scaled ``a``, read on its plane), built
at ``L`` and stripped of ``e_b``; the judge certifies it on the count task's own inputs (nothing
above is assumed by the certificate).

*The bound* is the count cell's own (:func:`bounds.last_margin._post`: the one-sided arc bound of
``L - 1``), which the select cell also reports; the margin here is at least the select margin,
so ``margin_upper / margin`` is at most the select cell's ratio (about 1.02 at ``L = 16``, 1.008
at 64, bare, ``d = 8``).  Not shown to be the max-min head of the count task: the select head
keeps the count 0 and the distractor's outputs apart too, which the count task does not need.
"""

from __future__ import annotations

from constructions import laws, registry
from constructions.cell import Cell, Params
from constructions.classification import ClassificationDesign


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
        from constructions.select_last_points import SelectLastPointsHead

        self.cell, self.family, self.foot, self.pencil = cell, laws.family(cell), None, None
        self.select = SelectLastPointsHead(cell.replace(task="select"))
        self.geometry = self.select.geometry

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The select head at ``L`` without ``e_b``, as a parameter set of the count cell."""
        params = self.select.build(L_value, dps)
        return Params(self.cell, {k: v for k, v in params.vectors.items() if k != "e_b"}, params.scalars)
