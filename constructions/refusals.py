"""Which cells have no construction yet, and why (:func:`refusal`): the commands refuse them up
front, in one line, instead of printing a wrong row.  Plain cell logic (no sympy), so that a
command checks its cell before it loads any construction."""

from __future__ import annotations

from constructions import laws
from constructions.cell import Cell


def refusal(cell: Cell) -> str | None:
    """Why ``cell``'s task and read position have no construction yet (None: built, or the
    count task at the BOS read)."""
    task, read = cell.task.name, cell.read.name
    if task == "count" and read == "bos":
        return None
    what = f"the {task} task at the {read} read"
    if cell.readout == "classification":
        if read == "last" and task == "count":
            # the head of constructions.last_read on the last-read regression geometry
            if cell.attention == "softmax" and not cell.affine.gain:
                return (f"{what} has no construction yet for classification with softmax attention "
                        "without a learned pre-norm (built: linear attention with pre-norm, softmax "
                        "with pre_learned)")
            return refusal(cell.replace(readout="regression")) or (
                None if cell.pre else f"{what} has no construction yet for classification without pre-norm")
        # the head of constructions.classification on the regression geometry: where e_b
        # changes no output the count task's head, margin and storage; softmax attention
        # without post-norm: the pencil head of constructions.pencil
        return refusal(cell.replace(readout="regression"))
    if task == "select" and read == "last":
        return f"{what} has no construction yet (the query b must count the a tokens too)"
    if laws.foot_distance(cell, 1) is not None and read == "last":
        return (f"{what} has no construction yet for linear attention with post-RMSNorm (its count "
                "construction is the one-sided arc, constructions.one_sided)")
    if read == "last":
        if cell.attention == "softmax":
            if not cell.normed:
                return None  # constructions.last_read.PairDesign: L* = 2
            if cell.pre and not cell.affine.gain and cell.eps == 0:
                if cell.kind.centred and cell.d >= 3:
                    return None  # constructions.last_read.BareDesign, up to L* = 4
                return (f"{what} has no construction yet for softmax attention with bare pre-norm "
                        f"{'at d = 2' if cell.kind.centred else 'RMSNorm'} (nothing counts beyond "
                        "L = 4, bounds.lstar.last_l_star; built: pre-LayerNorm at d >= 3)")
            if not cell.pre or not cell.affine.gain:
                why = {"pre": "with bare pre-norm and eps > 0 (its L* = 4 and rows use eps = 0)",
                       "post": "with post-norm (built: pre_learned)"}[cell.placement.name]
                return f"{what} has no construction yet for softmax attention {why}"
            if cell.kind.image_dim(cell.d) < 2:
                return f"{what} has no construction at d = 2 with pre-LayerNorm (d >= 3 is built)"
            if cell.eps > 0:
                return (f"{what} has no construction yet for softmax attention with eps > 0 (its "
                        "offset uses the norm's exact invariances, eps = 0)")
            if cell.affine.bias and not cell.kind.centred:
                return (f"{what} has no construction yet for pre-RMSNorm with a gain and a bias "
                        "(built: gain, and LayerNorm with either affine)")
            return None
        if cell.post:
            return (f"{what} has no construction yet for linear attention with post-norm (built: "
                    "without a norm and with pre-norm)")
        return None  # pre-norm here; without a norm constructions.last_read.LineDesign
    # select at the BOS read
    if cell.attention == "softmax" and cell.pre and cell.affine.gain and cell.kind.image_dim(cell.d) < 2:
        return (f"{what} has no construction at d = 2 with a learned pre-LayerNorm (its two "
                "values +-g * (1, -1) (+ beta) make b a copy of a, which gives (s, a) and (s, b) "
                "one output, or of s, which weighs what s weighs: not derived; d >= 3 is built)")
    if cell.attention == "softmax" and not cell.post:
        if laws.two_values(cell):
            return (f"{what} has no construction at d = 2 with bare pre-LayerNorm (its two values "
                    "make b a copy of a, which gives (s, a) and (s, b) one output, or of s, which "
                    "weighs what s weighs: the count inputs no longer decide, not derived; d >= 3 "
                    "is built)")
        return None  # constructions.select
    if cell.pre and not cell.affine.bias and cell.kind.image_dim(cell.d) == 1:
        return (f"{what} has no construction at d = 2 with pre-LayerNorm without a bias, and no "
                "parameters solve it for L >= 1: every value is +- one vector v, so a b token adds "
                "tau |v|^2 h_s to the attention as an a token does, and (s, a) and (s, b) have one "
                "output (d >= 3 is built)")
    return None
