"""Which cells have no construction yet, and why (:func:`refusal`): the commands refuse them up
front, in one line, instead of printing a wrong row.  Plain cell logic (no sympy), so that a
command checks its cell before it loads any construction.  The cells that are built are those
an entry of :mod:`constructions.registry` serves: the two are stated apart, one as reasons and one
as constructions, and the tests check that they agree on a grid of every part."""

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
            if cell.post and cell.attention == "linear" and not cell.kind.centred and cell.eps == 0:
                # constructions.count_last_foot_head falls back on the select head: refused with it
                return refusal(cell.replace(task="select"))
            if cell.post and cell.eps > 0:
                return (f"{what} has no construction yet for classification after post-norm with "
                        "eps > 0 (the head of constructions.last_post.LastArcHead reads the arc at "
                        "budget 1 and eps = 0; the lifted arc of constructions.last_post_eps, which "
                        "regression uses, needs embeddings of length at least sqrt(d eps) lam: no head "
                        "is derived on it)")
            if cell.post and cell.affine.gain and cell.d < laws.smallest_d(cell):
                return (f"{what} has no construction for classification with a learned gain after "
                        "post-LayerNorm at d = 2 (the head of constructions.last_post.LastArcHead turns "
                        "the gain's plane, which the centred line does not hold; every output is one "
                        "of two points, so nothing counts beyond L = 1; regression is built)")
            if cell.post:  # constructions.last_post.LastArcHead on the last-read arc
                return refusal(cell.replace(readout="regression"))
            # the head of constructions.last_read on the last-read regression geometry
            if cell.attention == "softmax" and not cell.affine.gain:
                # constructions.last_read: the pair head (no norm), the plane head (bare
                # pre-norm, eps = 0)
                if not cell.normed or (cell.pre and cell.eps == 0):
                    return None
                return (f"{what} has no construction yet for classification with softmax attention "
                        "and bare pre-norm with eps > 0 (built: no norm, bare pre-norm at eps = 0, "
                        "pre_learned at eps = 0, post-norm)")
            if cell.attention == "softmax" and cell.pre and cell.eps > 0:
                return (f"{what} has no construction yet for classification with softmax attention, "
                        "a learned pre-norm and eps > 0 (the head reads the eps = 0 geometry; regression "
                        "is built with pre-LayerNorm, constructions.last_eps)")
            return refusal(cell.replace(readout="regression"))
        if (task == "select" and read == "bos" and cell.attention == "softmax" and cell.pre
                and cell.kind.image_dim(cell.d) == 1):
            return (f"{what} has no construction for classification at d = 2 with pre-LayerNorm (two "
                    "values: (s, a, a, b) and (s, a) have one output, so nothing solves it beyond "
                    "L = 2, constructions.two_value_select; regression is built)")
        # the head of constructions.classification on the regression geometry: where e_b
        # changes no output the count task's head, margin and storage; softmax attention
        # without post-norm: the pencil head of constructions.pencil
        if task == "select" and read == "last":
            return _select_last(cell)
        return refusal(cell.replace(readout="regression"))
    if task == "select" and read == "last":
        return _select_last(cell)
    if read == "last":
        if cell.attention == "softmax":
            if not cell.normed:
                return None  # constructions.last_read.PairDesign: L* = 2
            if cell.pre and not cell.affine.gain:
                # constructions.last_read.BareDesign (eps = 0, up to L* = 4) and
                # constructions.last_eps.EpsBareDesign (eps > 0, up to bounds.lstar.last_l_star_eps)
                return None
            if cell.post:
                # constructions.last_post.LastArcDesign: the arc of L - 1 and the count 0 on it
                # (at d = 2 with eps = 0, L = 1 only); eps > 0: constructions.last_post_eps.EpsArcDesign,
                # that arc lifted
                return _narrow_post(what, cell) if cell.d < laws.smallest_d(cell) else None
            if cell.kind.image_dim(cell.d) < 2 and cell.eps > 0:
                return (f"{what} has no construction yet at d = 2 with a learned pre-LayerNorm and "
                        "eps > 0 (the values s_x g * (1, -1)" + (" + beta" if cell.affine.bias else "")
                        + ", |s_x| < 1, are no longer two: not derived)")
            if cell.kind.image_dim(cell.d) < 2 and not cell.affine.bias:
                # the values are +-v (v = g * (1, -1)): bounds.lstar.cell_l_star, L* = 4; with a
                # bias constructions.tasks.TaskDesign (the two values beta +- v)
                return (f"{what} has no construction at d = 2 with pre-LayerNorm and a gain without "
                        "a bias (d >= 3, and gain_bias at d = 2, are built): the values are +-g * (1, -1), "
                        "so the counts 1..L are the segment of L - 1 at rho' = 1 + exp(-tau <h_a, h_a - "
                        "h_s>) < 2 (h_a = -h_s; h_a = h_s gives one output for n >= 1): nothing counts "
                        "beyond L = 4, and L = 4 counts, as with bare pre-norm (bounds.lstar.cell_l_star); "
                        "no construction for L <= 4 is derived")
            # eps = 0: constructions.tasks.TaskDesign; eps > 0: last_eps.EpsGainDesign (LayerNorm),
            # last_eps.EpsRmsGainDesign (RMSNorm)
            return None
        if cell.post:
            # constructions.last_post.LinearLastArcDesign (post-LayerNorm; at d = 2 with eps = 0,
            # L = 1 only), constructions.last_foot (post-RMSNorm: its foot is tied to the budget);
            # eps > 0: constructions.last_post_eps.LinearEpsArcDesign, EpsFootDesign
            return _narrow_post(what, cell) if cell.d < laws.smallest_d(cell) else None
        return None  # pre-norm here; without a norm constructions.last_read.LineDesign
    # select at the BOS read
    if cell.attention == "softmax" and cell.pre and cell.kind.image_dim(cell.d) < 2:
        if cell.eps == 0:
            return None  # constructions.two_value_select: two values, L* = 2
        return (f"{what} has no construction yet at d = 2 with pre-LayerNorm and eps > 0 (the "
                "values s_x (1, -1), |s_x| < 1, are no longer two: nothing solves it beyond the "
                "count task's L* (bounds.lstar.l_star), its own L* is not derived; eps = 0 is "
                "built, L* = 2)"
                if not cell.affine.gain else
                f"{what} has no construction yet at d = 2 with a learned pre-LayerNorm and eps > 0 "
                "(the values are no longer two; eps = 0 is built, L* = 2)")
    if cell.attention == "softmax" and not cell.post:
        return None  # constructions.select
    if cell.pre and not cell.affine.bias and cell.kind.image_dim(cell.d) == 1:
        return (f"{what} has no construction at d = 2 with pre-LayerNorm without a bias, and no "
                "parameters solve it for L >= 1: every value is +- one vector v, so a b token adds "
                "tau |v|^2 h_s to the attention as an a token does, and (s, a) and (s, b) have one "
                "output (d >= 3 is built)")
    return None


def _narrow_post(what: str, cell: Cell) -> str | None:
    """Post-LayerNorm below the arc's width (``d = 2``: the centred subspace is a line).  None at
    ``eps = 0``: every output is one of two points, the constructions serve ``L = 1`` and the rows
    beyond say that nothing counts (:func:`bounds.lstar.cell_l_star`: ``L* = 1``)."""
    if cell.eps == 0:
        return None
    return (f"{what} has no construction yet at d = 2 with post-LayerNorm and eps > 0 (the arc "
            "needs a 2-D centred subspace at eps = 0; with eps > 0 the outputs x_c/sqrt(|x_c|^2/d + "
            "eps) of the centred line are no longer two points, and whether they count is not derived)")


def _linear_post(cell: Cell, what: str, uses: str) -> str | None:
    """Linear attention with post-norm, the select task read last (None: built at eps = 0;
    LayerNorm at d = 2 for L = 1 only): ``uses`` names what of the construction needs the norm's
    exact scale invariance."""
    if cell.d < laws.smallest_d(cell):
        return _narrow_post(what, cell)
    if cell.eps > 0:
        return (f"{what} has no construction yet for linear attention with post-norm and eps > 0 "
                f"({uses} the norm's scale invariance, eps = 0)")
    return None


def _select_last(cell: Cell) -> str | None:
    """Why the select task at the last read has no construction in ``cell`` (None: built,
    :mod:`constructions.select_last`: linear attention and regression, without a norm at
    ``d >= 3`` or with pre-norm at ``eps = 0``, not LayerNorm at ``d = 2``; with pre-LayerNorm
    at ``eps > 0`` and ``d >= 3``, :mod:`constructions.last_eps`; with post-norm at ``eps = 0``,
    :mod:`constructions.select_last_linear_post`, LayerNorm at ``d = 2`` for ``L = 1`` only)."""
    what = "the select task at the last read"
    if cell.readout == "classification":
        if cell.attention == "softmax":
            return _cancel_head(cell, what) if cell.pre else _contrast_head(cell, what)
        regression = _select_last(cell.replace(readout="regression"))
        if regression is not None:  # no regression geometry to carry a head
            return regression
        if cell.attention == "linear" and (cell.post or laws.rigid(cell) or not cell.normed
                                           or (cell.affine.gain and cell.eps == 0)):
            # constructions.select_last_head (a learned pre-norm, eps = 0) on the values of the
            # regression construction, constructions.select_last_points on its points,
            # constructions.select_last_free_head without a norm
            return None
        return (f"{what} has no construction yet for classification with linear attention, a "
                "learned pre-norm and eps > 0 (built: linear attention with a learned pre-norm at "
                "eps = 0, constructions.select_last_head; with bare pre-norm or post-norm, "
                "constructions.select_last_points, a head on the points of the regression "
                "construction, whose embeddings stay in the unit ball there and whose classes lie "
                "apart along its read-out or its arc; here the regression construction, "
                "constructions.last_eps, is built but no head on it is derived)")
    if cell.attention == "softmax":
        return _select_last_softmax(cell, what)
    if cell.post:
        # constructions.select_last_linear_post: eps = 0, b a scaled a (LayerNorm at d = 2: L = 1)
        return _linear_post(cell, what, "b as a scaled a and the arc use")
    if not cell.normed:
        if cell.d >= 3:
            return None
        return (f"{what} has no construction at d = 2 without a norm (it needs a third direction "
                "of the frame for e_s: constructions.select_last; d >= 3 is built)")
    if cell.eps > 0 and not cell.kind.centred:
        return (f"{what} has no construction yet for pre-RMSNorm with eps > 0 (the offsets of the "
                "eps = 0 constructions are set by the embeddings' scales, which with eps > 0 also set "
                "the values' lengths; pre-LayerNorm at d >= 3 is built, constructions.last_eps)")
    if cell.kind.image_dim(cell.d) >= 2:
        return None  # eps = 0: constructions.select_last; eps > 0 (LayerNorm): constructions.last_eps
    if cell.affine.gain:
        return (f"{what} has no construction at d = 2 with pre-LayerNorm and a gain (its values "
                "lie on one line, where no b scores a as a does without being a; d >= 3 is built)")
    if cell.eps > 0:
        return (f"{what} has no construction yet at d = 2 with bare pre-LayerNorm and eps > 0 (its "
                "values lie on one line through 0: not derived; d >= 3 is built)")
    return (f"{what} has no construction at d = 2 with bare pre-LayerNorm (its two values "
            "+-h leave b the value of a or of -a: not derived; d >= 3, and pre-RMSNorm at "
            "every d, are built)")


def _contrast_head(cell: Cell, what: str) -> str | None:
    """Classification with softmax attention without a norm or after post-norm: None where
    :mod:`constructions.select_last_contrast_head` builds (no norm, every ``d``; post-norm at
    ``eps = 0``, ``d >= 3``)."""
    if not cell.normed:
        return None
    if cell.eps > 0:
        return (f"{what} has no construction yet for classification with softmax attention, "
                "post-norm and eps > 0 (constructions.select_last_contrast_head reads every output "
                "through the norm's factor 1/|r|, common to the classes only where the norm is "
                "exactly scale invariant, eps = 0; eps = 0 is built at d >= 3)")
    if cell.d >= 3:
        return None
    return (f"{what} has no construction at d = 2 for classification with softmax attention after "
            f"post-{cell.kind.name} (the head of constructions.select_last_contrast_head needs rows "
            "orthogonal to e_b that read e_s and e_a independently: three independent embeddings; "
            "d >= 3 is built)")


def _cancel_head(cell: Cell, what: str) -> str | None:
    """Classification with softmax attention and pre-norm: None where
    :mod:`constructions.select_last_cancel_head` builds (``eps = 0``, ``d >= 3``)."""
    if cell.eps > 0:
        return (f"{what} has no construction yet for classification with softmax attention, pre-norm "
                "and eps > 0 (constructions.select_last_cancel_head puts h_a on the sphere over the "
                "diameter [h_s, h_b] and scales the embeddings freely, which uses the norm's exact "
                "scale invariance, eps = 0; eps = 0 is built at d >= 3)")
    if cell.d >= 3:
        return None
    return (f"{what} has no construction at d = 2 for classification with softmax attention and "
            f"pre-{cell.kind.name} (the head of constructions.select_last_cancel_head needs rows "
            "orthogonal to e_a - e_b that read h_s - h_b and h_a - h_b independently: "
            + ("the centred line holds one direction" if cell.kind.centred else
               "in the plane every such row is a multiple of one vector, so every logit has one "
               "root in the position and two classes are told apart")
            + "; d >= 3 is built)")


def _select_last_softmax(cell: Cell, what: str) -> str | None:
    """Softmax attention (regression): None where :mod:`constructions.select_last_softmax`
    builds (pre-norm with a gain, ``eps = 0``, RMSNorm ``d >= 3``, LayerNorm ``d >= 4``), where
    :mod:`constructions.select_last_bare` builds (bare pre-norm, ``eps = 0``, either kind, every
    ``d``), where
    :mod:`constructions.select_last_post` builds (post-LayerNorm, ``eps = 0``; at ``d = 2`` for
    ``L = 1`` only), where
    :mod:`constructions.select_last_rms` builds (post-RMSNorm, ``eps = 0``, every ``d``) and
    where :mod:`constructions.select_last_pair` builds (no norm, every ``d``)."""
    if cell.post:
        # constructions.select_last_post: b with the centred part of a, suppressed along one;
        # eps > 0 (LayerNorm): constructions.last_post_eps.EpsSelectArcDesign, on the tilted plane
        if cell.eps > 0 and not cell.kind.centred:
            return (f"{what} has no construction yet for softmax attention with post-RMSNorm and "
                    "eps > 0 (constructions.select_last_rms puts e_b = beta e_a on one line, its "
                    "outputs N(r) with the scale of r, which eps no longer ignores: not derived; "
                    "post-LayerNorm is built, constructions.last_post_eps)")
        if not cell.kind.centred:
            return None  # constructions.select_last_rms: e_b parallel to e_a, rho < 1, one line
        return _narrow_post(what, cell) if cell.d < laws.smallest_d(cell) else None
    if not cell.normed:
        return None  # constructions.select_last_pair: b a copy of s, L* = 2
    if not cell.affine.gain:
        # constructions.select_last_bare: three values on one great circle, L* = 4 (LayerNorm
        # at d = 2: two values, L* = 2)
        if cell.eps > 0:
            return (f"{what} has no construction yet for softmax attention with bare pre-norm and "
                    "eps > 0 (the count task at the last read, its sub-task n_b = 0, stops at "
                    "bounds.lstar.last_l_star_eps, so select's L* is at most that; eps = 0 is built, "
                    "L* = 4, 2 with LayerNorm at d = 2, constructions.select_last_bare)")
        return None
    if cell.eps > 0:
        return (f"{what} has no construction yet for softmax attention with a learned pre-norm and "
                "eps > 0 (the construction uses the norm's exact invariances, eps = 0)")
    if cell.d < (4 if cell.kind.centred else 3) and cell.affine.bias and cell.kind.image_dim(cell.d) == 2:
        return None  # constructions.select_last_circle: the three points on a circle off 0
    if cell.d < (4 if cell.kind.centred else 3):
        if cell.kind.image_dim(cell.d) == 1:
            return (f"{what} has no construction yet at d = 2 with a learned pre-LayerNorm and softmax "
                    "attention (two values: h_a = h_s reads (s, a) as (s, a, a), h_b = h_a reads "
                    "(s, b, a) as (s, a, a), and h_b = h_s reads (s, b, a, a) as (s, a), so nothing "
                    "solves it beyond L = 2; L = 2 is not built)")
        return (f"{what} has no construction yet at d = {cell.d} with a learned pre-{cell.kind.name} "
                "without a bias and softmax attention (the values fill a centred ellipse, where the "
                "second point of the line through h_a orthogonal to h_s - h_a has <h_b, h_b - h_a> > 0 "
                "when 0 <= <h_a, h_s - h_a> < |h_s - h_a|^2/2, so b weighs more than a from its own "
                "query at the shape of a; parameter sets found by a float search solve it at L = 2, 3, "
                "4, 8, certified, with b read as s; no construction is derived; with a bias "
                "constructions.select_last_circle is built, "
                + ("d >= 4" if cell.kind.centred else "d >= 3") + " is built)")
    return None
