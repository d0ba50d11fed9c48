"""Which construction serves which cell: one table per read-out, one entry per construction.

An :class:`Entry` names a design class (its module in :mod:`constructions` and its name) and
the cells it serves, a predicate on the parts of the :class:`~constructions.cell.Cell`
(attention, placement, kind, affine, ``d``, ``eps``, task, read).  :func:`serving` returns the
first entry of the cell's table (:data:`REGRESSION` or :data:`CLASSIFICATION`) that serves it,
None where no construction is derived; :func:`construct` builds it
(:func:`constructions.regression.design` and :func:`constructions.classification.design` are
this, cached).  The predicates are plain cell logic and the design modules are imported only
when an entry is built: they build on :mod:`constructions.regression`, which dispatches through
this table, and loading this module loads neither them nor sympy.

The entries of a table serve disjoint sets of cells (the tests check it on a grid), so the order
of a table is only the order in which a reader meets them; the cells no entry serves are those
:func:`constructions.refusals.refusal` gives a reason for, in its own plain logic (the tests check
that the two agree on every cell of a grid of all parts).

*Regression* (the count task read at ``s`` first, then the last read, then the select task):

* :func:`count_bos`: :class:`~constructions.regression.RegressionDesign`, and
  :func:`count_foot`: :class:`~constructions.regression.FootDesign` (the one-sided arc);
* the count task read last: :func:`pair_read`, :func:`rigid_read`, :func:`line_read`
  (:mod:`constructions.last_read`), :func:`eps_rigid_read`, :func:`eps_gain_read` and
  :func:`eps_rms_gain_read` (:mod:`constructions.last_eps`), :func:`last_arc` (:mod:`constructions.last_post`, softmax and
  linear attention), :func:`last_foot` (:mod:`constructions.last_foot`), :func:`eps_last_arc` and
  :func:`eps_last_foot` (:mod:`constructions.last_post_eps`: post-norm at ``eps > 0``),
  :func:`value_read` (:class:`~constructions.tasks.TaskDesign`);
* the select task read at ``s``: :func:`free_select` (:class:`~constructions.tasks.TaskDesign`, a
  distractor that changes nothing), :func:`foot_select` (:class:`~constructions.tasks.FootSelectDesign`),
  :func:`suppressed_select` (:mod:`constructions.select`), :func:`two_value_select`
  (:mod:`constructions.two_value_select`);
* the select task read last: :func:`free_select_last`, :func:`bare_select_last`,
  :func:`scale_select_last`, :func:`gain_select_last` (:mod:`constructions.select_last`),
  :func:`gain_softmax_select_last` (:mod:`constructions.select_last_softmax`),
  :func:`circle_softmax_select_last` (:mod:`constructions.select_last_circle`),
  :func:`pair_select_last` (:mod:`constructions.select_last_pair`),
  :func:`bare_softmax_select_last` (:mod:`constructions.select_last_bare`),
  :func:`select_last_arc` (:mod:`constructions.select_last_post`), :func:`eps_select_last_arc`
  (:mod:`constructions.last_post_eps`),
  :func:`linear_select_last_arc`, :func:`linear_select_last_foot`
  (:mod:`constructions.select_last_linear_post`),
  :func:`select_last_rms` (:mod:`constructions.select_last_rms`),
  :func:`eps_select_last` (:mod:`constructions.last_eps`).

*Classification* (a head on the geometry of a regression entry at budget 1):
:func:`last_arc_head` (:class:`~constructions.last_post.LastArcHead`), :func:`last_head`
(:class:`~constructions.last_read.LastReadHead`), :func:`bos_head`
(:class:`~constructions.classification.ClassificationDesign`) and, for the select task read last,
:func:`gain_select_last` (:class:`~constructions.select_last_head.SelectLastHead`) and
:func:`points_select_last` (:class:`~constructions.select_last_points.SelectLastPointsHead`, on
the points of the regression construction) and, without a norm, :func:`free_select_last`
(:class:`~constructions.select_last_free_head.FreeSelectLastHead`), with softmax attention
:func:`contrast_select_last` (:class:`~constructions.select_last_contrast_head.
ContrastSelectLastHead`, without a norm and after post-norm, not scale-free) and, with pre-norm at
``eps = 0``, :func:`cancel_select_last`
(:class:`~constructions.select_last_cancel_head.CancelSelectLastHead`); the count task read last
after post-RMSNorm with linear attention: :func:`last_foot`, the regression cell's own test
(:class:`~constructions.count_last_foot_head.CountLastFootHead`, its tied arc's head or the select task's).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from constructions import laws
from constructions.cell import Cell


@dataclass(frozen=True)
class Entry:
    """A construction: the class ``name`` of ``constructions.<module>`` and the cells it serves."""

    module: str
    name: str
    serves: Callable[[Cell], bool]
    #: classification: ``B_min`` is an infimum of 0, the construction's embeddings (and gain,
    #: bias) scaling down to 0 with a head that still counts (SPEC's design notes); False where
    #: the embeddings' scores must keep a contrast, and the rows report the embeddings' bound
    scale_free: bool = True

    @property
    def key(self) -> str:
        """The entry's name in tables keyed by entry (its predicate's name: unique in a table),
        e.g. :data:`bounds.lower.LOWER`."""
        return self.serves.__name__

    def load(self) -> type:
        """The design class (its module imported on first use)."""
        return getattr(importlib.import_module(f"constructions.{self.module}"), self.name)


# ----------------------------------------------------------------------- the count task, at s
def count_bos(cell: Cell) -> bool:
    """The count task read at ``s`` where the foot of the residual line is free (every cell but
    linear attention with post-RMSNorm): the families of :mod:`constructions.regression`."""
    return not cell.distractor and not cell.read.last and _foot_free(cell)


def count_foot(cell: Cell) -> bool:
    """The count task read at ``s``, linear attention with post-RMSNorm: the one-sided arc."""
    return not cell.distractor and not cell.read.last and not _foot_free(cell)


def _foot_free(cell: Cell) -> bool:
    """Whether no budget ties the foot of the residual line (:func:`constructions.laws.foot_distance`)."""
    return laws.foot_distance(cell, 1.0, laws.FLOAT) is None


# ----------------------------------------------------------------------- the count task, read last
def _count_last(cell: Cell) -> bool:
    return not cell.distractor and cell.read.last


def pair_read(cell: Cell) -> bool:
    """Softmax attention without a norm (``L* = 2``)."""
    return _count_last(cell) and cell.attention == "softmax" and not cell.normed


def rigid_read(cell: Cell) -> bool:
    """Softmax attention with bare pre-norm at ``eps = 0`` (``L* = 4``), either kind, every ``d``."""
    return _count_last(cell) and cell.attention == "softmax" and laws.rigid(cell) and cell.eps == 0


def eps_rigid_read(cell: Cell) -> bool:
    """Softmax attention with bare pre-norm at ``eps > 0`` (``L*`` of
    :func:`bounds.lstar.last_l_star_eps`), either kind, every ``d``."""
    return _count_last(cell) and cell.attention == "softmax" and laws.rigid(cell) and cell.eps > 0


def eps_gain_read(cell: Cell) -> bool:
    """Softmax attention with pre-LayerNorm, a gain and ``eps > 0`` at ``d >= 3``: the
    :func:`value_read` construction of ``eps = 0`` carried exactly (:mod:`constructions.last_eps`)."""
    return (_count_last(cell) and cell.attention == "softmax" and cell.pre and cell.affine.gain
            and cell.kind.centred and cell.eps > 0 and cell.kind.image_dim(cell.d) >= 2)


def eps_rms_gain_read(cell: Cell) -> bool:
    """Softmax attention with pre-RMSNorm, a gain and ``eps > 0``, every ``d``: the
    :func:`value_read` construction of ``eps = 0`` carried exactly (:mod:`constructions.last_eps`)."""
    return (_count_last(cell) and cell.attention == "softmax" and cell.pre and cell.affine.gain
            and not cell.kind.centred and cell.eps > 0)


def line_read(cell: Cell) -> bool:
    """Linear attention without a norm."""
    return _count_last(cell) and cell.attention == "linear" and not cell.normed


def last_arc(cell: Cell) -> bool:
    """Post-norm at ``eps = 0`` (the arc of ``L - 1`` and the count 0 on it): softmax attention,
    or linear attention with LayerNorm (with RMSNorm the foot is tied to the budget), every ``d``:
    below the arc's width (LayerNorm at ``d = 2``) every output is one of two points and the
    construction serves ``L = 1`` only (:func:`bounds.lstar.cell_l_star`: ``L* = 1``)."""
    return (_count_last(cell) and cell.post and cell.eps == 0
            and (cell.attention == "softmax" or cell.kind.centred))


def last_arc_head(cell: Cell) -> bool:
    """:func:`last_arc` but with a gain below the arc's width (LayerNorm at ``d = 2``), where the
    head's plane of the gain (:mod:`constructions.classification`) is not there."""
    return last_arc(cell) and not (cell.affine.gain and cell.d < laws.smallest_d(cell))


def eps_last_arc(cell: Cell) -> bool:
    """Post-norm at ``eps > 0``, at the arc's width (``d >= 3`` for LayerNorm), every affine:
    softmax attention (either kind: the arc of :func:`last_arc` on a plane of ``R^{d+1}`` tilted by
    ``eps``) or linear attention with LayerNorm (the arc with ``eps`` across it), in
    :mod:`constructions.last_post_eps`."""
    return (_count_last(cell) and cell.post and cell.eps > 0 and cell.d >= laws.smallest_d(cell)
            and (cell.attention == "softmax" or cell.kind.centred))


def last_foot(cell: Cell) -> bool:
    """Linear attention with post-RMSNorm at ``eps = 0`` (the one-sided arc of ``L - 1`` and the
    count 0 on it, its foot and distance tied to the budget), every ``d`` and affine."""
    return (_count_last(cell) and cell.post and cell.eps == 0 and cell.attention == "linear"
            and not _foot_free(cell))


def eps_last_foot(cell: Cell) -> bool:
    """Linear attention with post-RMSNorm at ``eps > 0``, every ``d`` and affine: the one-sided arc
    of :func:`last_foot` lifted (:mod:`constructions.last_post_eps`)."""
    return (_count_last(cell) and cell.post and cell.eps > 0 and cell.attention == "linear"
            and not _foot_free(cell))


def value_read(cell: Cell) -> bool:
    """Pre-norm, the values read along one axis: linear attention (every affine, ``d`` and
    ``eps``), or softmax attention with a gain at ``eps = 0`` and a plane in the norm's image or a
    bias (LayerNorm at ``d = 2``: the two values ``beta +- g * (1, -1)``)."""
    return (_count_last(cell) and cell.pre
            and (cell.attention == "linear"
                 or (cell.affine.gain and cell.eps == 0
                     and (cell.kind.image_dim(cell.d) >= 2 or cell.affine.bias))))


# ----------------------------------------------------------------------- the select task, at s
def _select_bos(cell: Cell) -> bool:
    return cell.distractor and not cell.read.last


def free_select(cell: Cell) -> bool:
    """A distractor that changes no output: softmax attention with post-norm, linear attention
    without post-RMSNorm and without values on one line (:func:`constructions.laws.on_a_line`,
    where ``b`` adds what ``a`` adds)."""
    return _select_bos(cell) and (
        (cell.attention == "softmax" and cell.post)
        or (cell.attention == "linear" and _foot_free(cell) and not laws.on_a_line(cell)))


def foot_select(cell: Cell) -> bool:
    """Linear attention with post-RMSNorm: the one-sided arc and a distractor that scores 0."""
    return _select_bos(cell) and not _foot_free(cell)


def suppressed_select(cell: Cell) -> bool:
    """Softmax attention without post-norm, the distractor suppressed at a price: no norm, bare
    pre-norm without two values (:func:`constructions.laws.two_values`), pre-norm with a gain and
    a plane for it (RMSNorm; LayerNorm at ``d >= 3``); every ``eps``."""
    return _select_bos(cell) and cell.attention == "softmax" and (
        not cell.normed
        or (laws.rigid(cell) and not laws.two_values(cell))
        or (cell.pre and cell.affine.gain and cell.kind.image_dim(cell.d) >= 2))


def two_value_select(cell: Cell) -> bool:
    """Softmax attention with pre-LayerNorm at ``d = 2`` and ``eps = 0`` (two values, ``L* = 2``),
    every affine."""
    return (_select_bos(cell) and cell.attention == "softmax" and cell.pre
            and cell.kind.image_dim(cell.d) == 1 and cell.eps == 0)


# ----------------------------------------------------------------------- the select task, read last
def _select_last(cell: Cell) -> bool:
    """The select task read last with linear attention, without post-norm."""
    return cell.distractor and cell.read.last and cell.attention == "linear" and not cell.post


def free_select_last(cell: Cell) -> bool:
    """No norm, ``d >= 3`` (a third direction of the frame for ``e_s``)."""
    return _select_last(cell) and not cell.normed and cell.d >= 3


def bare_select_last(cell: Cell) -> bool:
    """Bare pre-LayerNorm at ``eps = 0``, ``d >= 3``."""
    return (_select_last(cell) and laws.rigid(cell) and cell.kind.centred and cell.eps == 0
            and cell.d >= 3)


def scale_select_last(cell: Cell) -> bool:
    """Bare pre-RMSNorm at ``eps = 0``, every ``d``."""
    return _select_last(cell) and laws.rigid(cell) and not cell.kind.centred and cell.eps == 0


def gain_select_last(cell: Cell) -> bool:
    """Pre-norm with a gain at ``eps = 0`` and a plane in the norm's image (not LayerNorm at ``d = 2``)."""
    return (_select_last(cell) and cell.pre and cell.affine.gain and cell.eps == 0
            and cell.kind.image_dim(cell.d) >= 2)


def _softmax_select_last(cell: Cell) -> bool:
    """The select task read last with softmax attention (the cells of the heads below differ in
    the norm)."""
    return cell.distractor and cell.read.last and cell.attention == "softmax"


def gain_softmax_select_last(cell: Cell) -> bool:
    """Softmax attention with pre-norm and a gain at ``eps = 0``, the values filling a 2-D
    ellipse (RMSNorm ``d >= 3``, LayerNorm ``d >= 4``; :mod:`constructions.select_last_softmax`)."""
    return (_softmax_select_last(cell) and cell.pre
            and cell.affine.gain and cell.eps == 0 and cell.d >= (4 if cell.kind.centred else 3))


def circle_softmax_select_last(cell: Cell) -> bool:
    """Softmax attention with pre-norm, a gain and a bias at ``eps = 0``, the values on a closed
    curve (the norm's image a plane: RMSNorm ``d = 2``, LayerNorm ``d = 3``;
    :mod:`constructions.select_last_circle`: the three points of :func:`gain_softmax_select_last`
    on a circle moved off 0 by the bias)."""
    return (_softmax_select_last(cell) and cell.pre
            and cell.affine.bias and cell.eps == 0 and cell.kind.image_dim(cell.d) == 2)


def pair_select_last(cell: Cell) -> bool:
    """Softmax attention without a norm, every ``d`` (``L* = 2``: ``b`` a copy of ``s`` on the count
    task's extremal pair, :mod:`constructions.select_last_pair`)."""
    return _softmax_select_last(cell) and not cell.normed


def bare_softmax_select_last(cell: Cell) -> bool:
    """Softmax attention with bare pre-norm at ``eps = 0``, either kind, every ``d`` (``L* = 4``:
    three values on one great circle; LayerNorm at ``d = 2``, two values, ``L* = 2``;
    :mod:`constructions.select_last_bare`)."""
    return (_softmax_select_last(cell) and laws.rigid(cell)
            and cell.eps == 0)


def select_last_arc(cell: Cell) -> bool:
    """The select task read last, softmax attention with post-LayerNorm at ``eps = 0``
    (:mod:`constructions.select_last_post`: b with the centred part of a); at ``d = 2`` (two
    points) ``L = 1`` only, as :func:`last_arc`."""
    return (_softmax_select_last(cell) and cell.post
            and cell.kind.centred and cell.eps == 0)


def linear_select_last_arc(cell: Cell) -> bool:
    """The select task read last, linear attention with post-LayerNorm at ``eps = 0``, every
    affine (:mod:`constructions.select_last_linear_post`: b a scaled a); at ``d = 2`` (two
    points) ``L = 1`` only, as :func:`last_arc`."""
    return (cell.distractor and cell.read.last and cell.attention == "linear" and cell.post
            and cell.kind.centred and cell.eps == 0)


def linear_select_last_foot(cell: Cell) -> bool:
    """The select task read last, linear attention with post-RMSNorm at ``eps = 0``, every ``d``
    and affine (:mod:`constructions.select_last_linear_post`: b a scaled a, the one-sided arc)."""
    return (cell.distractor and cell.read.last and cell.attention == "linear" and cell.post
            and not cell.kind.centred and cell.eps == 0)


def eps_select_last_arc(cell: Cell) -> bool:
    """The select task read last, softmax attention with post-LayerNorm at ``eps > 0`` and
    ``d >= 3``, every affine (:mod:`constructions.last_post_eps`: :func:`select_last_arc` on the
    tilted plane)."""
    return (_softmax_select_last(cell) and cell.post
            and cell.kind.centred and cell.eps > 0 and cell.d >= laws.smallest_d(cell))


def select_last_rms(cell: Cell) -> bool:
    """The select task read last, softmax attention with post-RMSNorm at ``eps = 0``, every ``d``
    and affine (:mod:`constructions.select_last_rms`: ``e_b`` parallel to ``e_a``, one line)."""
    return (_softmax_select_last(cell) and cell.post
            and not cell.kind.centred and cell.eps == 0)


def eps_select_last(cell: Cell) -> bool:
    """Pre-LayerNorm at ``eps > 0``, ``d >= 3``, bare or with a gain: the ``eps = 0`` construction
    (:func:`bare_select_last`, :func:`gain_select_last`) carried exactly (:mod:`constructions.last_eps`)."""
    return (_select_last(cell) and cell.pre and cell.kind.centred and cell.eps > 0
            and cell.kind.image_dim(cell.d) >= 2)


def softmax_last_arc(cell: Cell) -> bool:
    """:func:`last_arc` with softmax attention."""
    return last_arc(cell) and cell.attention == "softmax"


def linear_last_arc(cell: Cell) -> bool:
    """:func:`last_arc` with linear attention."""
    return last_arc(cell) and cell.attention == "linear"


def softmax_eps_last_arc(cell: Cell) -> bool:
    """:func:`eps_last_arc` with softmax attention."""
    return eps_last_arc(cell) and cell.attention == "softmax"


def linear_eps_last_arc(cell: Cell) -> bool:
    """:func:`eps_last_arc` with linear attention."""
    return eps_last_arc(cell) and cell.attention == "linear"


#: the regression constructions (module docstring)
REGRESSION = (
    Entry("regression", "RegressionDesign", count_bos),
    Entry("regression", "FootDesign", count_foot),
    Entry("last_read", "PairDesign", pair_read),
    Entry("last_read", "BareDesign", rigid_read),
    Entry("last_eps", "EpsBareDesign", eps_rigid_read),
    Entry("last_read", "LineDesign", line_read),
    Entry("last_post", "LastArcDesign", softmax_last_arc),
    Entry("last_post", "LinearLastArcDesign", linear_last_arc),
    Entry("last_post_eps", "EpsArcDesign", softmax_eps_last_arc),
    Entry("last_post_eps", "LinearEpsArcDesign", linear_eps_last_arc),
    Entry("last_foot", "LastFootDesign", last_foot),
    Entry("last_post_eps", "EpsFootDesign", eps_last_foot),
    Entry("tasks", "TaskDesign", value_read),
    Entry("last_eps", "EpsGainDesign", eps_gain_read),
    Entry("last_eps", "EpsRmsGainDesign", eps_rms_gain_read),
    Entry("tasks", "TaskDesign", free_select),
    Entry("tasks", "FootSelectDesign", foot_select),
    Entry("select", "SelectDesign", suppressed_select),
    Entry("two_value_select", "TwoValueSelectDesign", two_value_select),
    Entry("select_last", "FreeSelectDesign", free_select_last),
    Entry("select_last", "BareSelectDesign", bare_select_last),
    Entry("select_last", "ScaleSelectDesign", scale_select_last),
    Entry("select_last", "GainSelectDesign", gain_select_last),
    Entry("select_last_softmax", "GainSoftmaxSelectDesign", gain_softmax_select_last),
    Entry("select_last_circle", "CircleSoftmaxSelectDesign", circle_softmax_select_last),
    Entry("select_last_pair", "SelectPairDesign", pair_select_last),
    Entry("select_last_bare", "BareSelectLastDesign", bare_softmax_select_last),
    Entry("select_last_post", "SelectLastArcDesign", select_last_arc),
    Entry("last_post_eps", "EpsSelectArcDesign", eps_select_last_arc),
    Entry("select_last_linear_post", "LinearSelectLastArcDesign", linear_select_last_arc),
    Entry("select_last_linear_post", "SelectFootDesign", linear_select_last_foot),
    Entry("select_last_rms", "SelectLastRmsDesign", select_last_rms),
    Entry("last_eps", "EpsSelectDesign", eps_select_last),
)


# ----------------------------------------------------------------------- classification heads
def last_head(cell: Cell) -> bool:
    """The count task read last without post-norm, on the geometry of :func:`pair_read`,
    :func:`rigid_read`, :func:`line_read` or :func:`value_read`."""
    return pair_read(cell) or rigid_read(cell) or line_read(cell) or value_read(cell)


def bos_head(cell: Cell) -> bool:
    """The read at ``s``, on the geometry of every regression entry there but
    :func:`two_value_select` (two values: ``(s, a, a, b)`` and ``(s, a)`` have one output)."""
    return (not cell.read.last and not two_value_select(cell)
            and any(e.serves(cell) for e in REGRESSION))


def points_select_last(cell: Cell) -> bool:
    """The select task read last, linear attention with bare pre-norm or post-norm: on the points
    of :func:`bare_select_last`, :func:`scale_select_last`, :func:`linear_select_last_arc`,
    :func:`linear_select_last_foot` or, bare, :func:`eps_select_last`."""
    return (bare_select_last(cell) or scale_select_last(cell) or linear_select_last_arc(cell)
            or linear_select_last_foot(cell) or (eps_select_last(cell) and not cell.affine.gain))


def contrast_select_last(cell: Cell) -> bool:
    """The select task read last, softmax attention without a norm, every ``d``, or after
    post-norm at ``eps = 0``, ``d >= 3``, either kind and every affine (a head that cancels ``b``
    at its own query, :mod:`constructions.select_last_contrast_head`)."""
    return pair_select_last(cell) or (_softmax_select_last(cell) and cell.post and cell.eps == 0
                                      and cell.d >= 3)


def cancel_select_last(cell: Cell) -> bool:
    """The select task read last, softmax attention with pre-norm at ``eps = 0``, ``d >= 3``, every
    kind and affine (:mod:`constructions.select_last_cancel_head`: the distractor cancelled)."""
    return _softmax_select_last(cell) and cell.pre and cell.eps == 0 and cell.d >= 3


#: the classification heads (module docstring)
CLASSIFICATION = (
    Entry("classification", "ClassificationDesign", bos_head),
    Entry("last_read", "LastReadHead", last_head),
    Entry("last_post", "LastArcHead", last_arc_head),
    Entry("select_last_head", "SelectLastHead", gain_select_last),
    Entry("select_last_points", "SelectLastPointsHead", points_select_last),
    Entry("select_last_free_head", "FreeSelectLastHead", free_select_last),
    Entry("count_last_foot_head", "CountLastFootHead", last_foot),
    Entry("select_last_contrast_head", "ContrastSelectLastHead", contrast_select_last, scale_free=False),
    Entry("select_last_cancel_head", "CancelSelectLastHead", cancel_select_last),
)

TABLES = {"regression": REGRESSION, "classification": CLASSIFICATION}


def scale_free(cell: Cell) -> bool:
    """Whether ``B_min`` of the classification ``cell`` is known to be an infimum of 0: the
    :attr:`Entry.scale_free` of the entry serving it; False where none serves it (nothing is
    known there)."""
    entry = serving(cell)
    return entry is not None and entry.scale_free


def serving(cell: Cell) -> Entry | None:
    """The first entry of the table of ``cell``'s read-out that serves it (None: not built)."""
    return next((e for e in TABLES[cell.readout] if e.serves(cell)), None)


def builds(module: str, cell: Cell) -> bool:
    """Whether ``cell`` is served by a construction of ``constructions.<module>``."""
    entry = serving(cell)
    return entry is not None and entry.module == module


def construct(cell: Cell):
    """The construction serving ``cell``, built; a ValueError naming
    :func:`constructions.refusals.refusal`'s reason where none does."""
    entry = serving(cell)
    if entry is None:
        from constructions.refusals import refusal

        raise ValueError(f"{cell.describe()}: {refusal(cell) or 'no construction is derived'}")
    return entry.load()(cell)
