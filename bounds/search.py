"""B_min(L) by certified bisection, and the certified margin of classification heads.

Regression: the construction of :mod:`constructions.regression` at budget ``B`` is the best the
cell admits at ``B``, so ``B_min(L)`` is the smallest ``B`` at which it counts.  We bracket it
with the float64 estimate of the reduced problem, bisect on ``B`` (relative tolerance ``rtol``)
judging each construction by a screen (:func:`_screen`: the judge's float-interval first pass
:func:`verify.interval_pass.counts_surely`, well conditioned at every ``L``, where the float64
forward pass loses the boundary after post-norm beyond ``L ~ 10^4``; the float64 judge where the
pass does not apply; for the select task with a distractor that provably changes no output, on
the count task's ``L + 1`` inputs: :meth:`constructions.regression.RegressionDesign.screen`),
and confirm the final parameter set in ball arithmetic on every input of the cell's task and
read position (:func:`verify.judge.counts_to`).  The reported ``B_min`` is a rigorous
upper bound on the largest norm of that confirmed parameter set.

Classification: the infimum of ``B`` is 0 (free biases make the argmax scale-free), so instead
of bisecting we build the unit-norm head of :mod:`constructions.classification`, certify its
smallest logit margin and report beside it the proven upper bound of :mod:`bounds.margin`.
"""

from __future__ import annotations

import time
from decimal import ROUND_CEILING

from bounds import contrast_lower
from bounds.lower import ARC_BOXES, b_lower
from bounds.lstar import cell_l_star, l_star_reason
from constructions import cli, laws, registry, regression
from constructions.cell import Cell, Params
from verify import interval_pass
from verify.certify import certify, rigorous_bound, witness_budget
from verify.judge import counts_to
from verify.report import directed


def _screen(params: Params, L: int, backend: str = "float64") -> bool:
    """The bisection's judge: on a float64 screen the interval first pass
    (:func:`verify.interval_pass.counts_surely`, well conditioned at every ``L``, and rigorous)
    where it applies, else the judge on ``backend`` (the design's
    :attr:`~constructions.regression.RegressionDesign.screen_backend`)."""
    surely = interval_pass.counts_surely(params, L) if backend == "float64" else None
    return counts_to(params, L, backend).counts if surely is None else surely


def _unavailable(cell: Cell, L: int):
    """Why no parameters count to L in this cell, or None."""
    top = cell_l_star(cell)
    if top is None or L <= top:
        return None
    if cell.post:
        return (f"post-norm ({cell.kind.name}) at d = {cell.d} maps every input to one of two "
                f"points; no parameters count to L >= 2 (it needs d >= {laws.smallest_d(cell)})")
    if cell.read.last or cell.distractor:
        return f"{l_star_reason(cell)}: beyond L* = {top} no parameter set counts"
    return (f"bare pre-norm bounds the scores; beyond L* = {top} no parameter norm suffices")


def unreached(cell: Cell, row: dict) -> str | None:
    """Why the sweep does not report ``row`` (of :func:`row`) as a row, or None where it does.

    A row's null ``B_min`` claims that no parameter set counts to its ``L``, so a row is reported
    only where it is certified or where that claim is proven: ``L`` beyond the cell's ``L*``
    (:func:`_unavailable`, with the proofs of :mod:`bounds.lstar`).  Every other row -- no
    construction at this ``L`` (:meth:`constructions.regression.RegressionDesign.unreached`),
    a bisection that never counts (``eps > 0``), a parameter set the balls do not certify --
    is beyond the toolkit's reach, not a proof: its note is the reason (the sweep lists it under
    ``unreached``, :func:`bounds.sweep.summary`)."""
    if row.get("certified") or _unavailable(cell, row["L"]) is not None:
        return None
    return row.get("note") or "no parameter set certified"


def regression_row(cell: Cell, L: int, rtol: float = 1e-6, arc_boxes: int = ARC_BOXES,
                   lower: bool = True, witness: bool = False, closed: bool = True) -> dict:
    """One sweep row: certified ``B_min(L)`` of a regression cell (``lower=False``: no ``B_lower``).

    A row without a certified ``B_min`` carries its reason as ``note``; :func:`unreached` says
    whether it is a proof that nothing counts (a null row) or beyond the toolkit's reach.  A
    bisection that never counts up to 1000 times the estimate at ``eps = 0``, where the
    construction is derived to count at every budget above its estimate (the reduced problem's
    boundary), contradicts the construction or its estimate: :class:`constructions.cli.Failure`
    (at ``eps > 0``, where it is carried from ``eps = 0``, the row is unreached).

    ``witness=True`` adds the certified parameter set behind ``B_min`` as ``row["witness"]``
    (a :class:`~constructions.cell.Params`, not JSON: the caller takes it out of the row).
    ``closed=False`` leaves out the row's ``closed_form`` (:func:`_closed_form`: exact, in sympy),
    for a caller that does not print it.
    """
    start = time.perf_counter()
    row = {"L": L, "B_min": None, "B_lower": None, "certified": False}
    why = _unavailable(cell, L)
    design = regression.design(cell)
    est = None if why else design.estimate(L)
    if est is None:
        row.update(note=why or design.unreached(L) or "no construction is derived for this L",
                   seconds=time.perf_counter() - start)
        return row
    if L == 1:
        inf = _infimum_row(dict(row), design, L, start, witness)
        if inf["certified"]:
            return inf
        # a family whose L = 1 witness fails at small budgets (constructions.select_last_post,
        # constructions.select_last_rms):
        # the infimum 0 is not shown, so the row is the bisection's certified bound, as at L >= 2
    # where the screen judges the construction itself (a design that does not override
    # RegressionDesign.screen, which returns build(L, b)), the confirmation below reuses the
    # screened parameter sets: build is deterministic, so they are the sets it would rebuild
    screened = {} if type(design).screen is regression.RegressionDesign.screen else None

    def counts(b):
        params = design.screen(L, b)
        if screened is not None:
            screened[b] = params
        return _screen(params, L, design.screen_backend)

    # bracket [lo, hi] around the estimate: lo fails, hi counts (widen until both hold)
    step = 1e-5
    hi, lo = est * (1 + step), est * (1 - step)
    while not counts(hi):
        hi, step = hi * (1 + step), step * 4
        if hi > 1e3 * est:
            what = f"the construction does not count up to B = {hi:.4g}"
            if not cell.eps:
                raise cli.Failure(f"L = {L}: {what}, 1000 times its estimate {est:.7g}: the "
                                  "construction or its estimate is wrong")
            row.update(note=f"{what} (constructions are derived for eps = 0)",
                       seconds=time.perf_counter() - start)
            return row
    step = 1e-5
    while counts(lo):
        hi, lo, step = lo, lo * max(1 - step, 0.5), step * 4
    while hi / lo > 1 + rtol:
        mid = (lo * hi) ** 0.5
        lo, hi = (lo, mid) if counts(mid) else (mid, hi)
    # confirm rigorously.  The reduced problem's boundary (est, exact arithmetic on the counting
    # interval, well conditioned) is tried too: where the float64 screen cannot represent the
    # construction (nearly cancelling embeddings) it fails too early and hi overshoots.  Then
    # step up if the float screen was too optimistic.
    tries = sorted({hi, est * (1 + rtol)}) + [hi * (1 + rtol) ** k for k in range(1, 8)]
    for b in tries:
        params = screened[b] if screened is not None and b in screened else design.build(L, b)
        res = certify(params, L)
        if res.counts:
            hi = b
            break
    shape, _ = design.best_shape(L, hi)
    b_min = rigorous_bound(params) if res.counts else None
    row.update(
        B_min=b_min,
        B_lower=b_lower(cell, L, b_min, arc_boxes, rtol) if lower else None,
        **({"closed_form": _closed_form(cell, L)} if closed else {}),
        certified=res.certified,
        worst_error=res.worst_error,
        shape=None if shape is None else {"arc": "lambda", "segment": "rho"}[design.family],
        shape_value=shape,
        seconds=time.perf_counter() - start,
    )
    if not res.counts:
        row["note"] = f"cannot certify ({res.verdict})"
    elif witness and res.certified:
        row["witness"] = params
    return row


def _closed_form(cell: Cell, L: int) -> dict | None:
    """The closed form of ``B_min(L)`` (:func:`constructions.tasks.closed_form`; None with
    ``eps > 0``, where none is derived)."""
    if cell.eps != 0:
        return None
    from constructions.tasks import closed_form  # sympy: only rows that show it load it

    return closed_form(cell, L)


def _infimum_row(row: dict, design, L: int, start: float, witness: bool = False) -> dict:
    """L = 1: B_min is 0, not attained.

    In every family but :mod:`constructions.select_last_post` and
    :mod:`constructions.select_last_rms` (whose witnesses fail at small budgets:
    :func:`regression_row` bisects there, as at ``L >= 2``) the counting amplitudes at L = 1
    start at 0 (``D_lo = 0``, ``b_lo = 0``,
    ``k > 1 - 1/L = 0``) and the capacity is positive at every budget ``B > 0``, so every
    budget counts; the row certifies one witness, at the budget of
    :func:`verify.certify.witness_budget` (``1e-3``, doubled until the witness's read-out has the
    margin ``verify.certify.WITNESS_MARGIN``); the note names the bound the row reports,
    ``witness_bound`` (:func:`verify.certify.rigorous_bound` of the witness, rounded up), not the
    budget asked for (a construction need not use all of it).
    """
    B = witness_budget(design.build)
    params = design.build(L, B)
    res = certify(params, L)
    bound = rigorous_bound(params)
    what = (f"a witness certified with B(theta) <= {directed(bound, ROUND_CEILING, 4)}, its "
            "witness_bound" if res.certified else f"no witness certified: {res.verdict}")
    row.update(B_min=0.0, B_min_is_infimum=True, B_lower=0.0, certified=res.certified,
               witness_bound=bound, worst_error=res.worst_error,
               note=f"every budget > 0 counts ({what})", seconds=time.perf_counter() - start)
    if witness and res.certified:
        row["witness"] = params
    return row


#: the proven lower bounds on ``B_min`` of the classification cells that are not scale-free, by
#: the key of the registry entry that serves them
CLASSIFICATION_LOWER = {"contrast_select_last": contrast_lower.b_lower}


def classification_row(cell: Cell, L: int, witness: bool = False) -> dict:
    """One sweep row of a classification cell: the certified margin of a unit-norm head, and
    ``margin_upper``, a proven upper bound on the margin of every parameter set with every
    vector of norm <= 1 (:func:`bounds.margin.margin_upper`; None where no proof applies), with
    their ratio ``margin_ratio`` (``witness=True``: and the certified head as
    ``row["witness"]``, as in :func:`regression_row`).  ``B_min`` is 0 as an infimum only where
    the head is certified (a certified head scaled by any ``t > 0`` still counts) and the cell is
    scale-free (:func:`constructions.registry.scale_free`); else None: null by a proof
    beyond ``L*``, or a row the sweep does not report (:func:`unreached`).  Where the cell is not
    scale-free, ``B_min`` is the certified bound of every vector but the head (whose rows scale
    down freely) and ``B_lower`` the proof of :data:`CLASSIFICATION_LOWER`."""
    start = time.perf_counter()
    row = {"L": L, "B_min": 0.0, "B_min_is_infimum": True, "B_lower": 0.0, "certified": False,
           "margin": None, "storage": None}
    why = _unavailable(cell, L)
    if why:
        row.update(B_min=None, B_min_is_infimum=False, B_lower=None, note=why,
                   seconds=time.perf_counter() - start)
        return row
    from bounds.margin import margin_upper  # with the classification heads (sympy, scipy)
    from constructions import classification  # scipy: only classification rows load it

    try:
        params = classification.design(cell).build(L)
    except ValueError as exc:  # the construction has no head at this L: no row (unreached)
        row.update(B_min=None, B_min_is_infimum=False, note=f"no head built: {exc}",
                   seconds=time.perf_counter() - start)
        return row
    res = certify(params, L)
    margin = res.min_margin if res.counts else None
    upper = margin_upper(cell, L)
    row.update(
        certified=res.certified,
        margin=margin,
        margin_upper=upper,
        margin_ratio=upper / margin if upper is not None and margin else None,
        margin_bound=rigorous_bound(params),
        storage=params.storage(),
        seconds=time.perf_counter() - start,
    )
    if not registry.scale_free(cell):  # the embeddings set B_min (their scores' contrast)
        row.update(B_min=rigorous_bound(params, exclude=("u",)) if res.certified else None,
                   B_min_is_infimum=False,
                   B_lower=CLASSIFICATION_LOWER[registry.serving(cell).key](cell, L))
    elif not res.certified:  # no head certified: nothing shows that B_min is an infimum of 0
        row.update(B_min=None, B_min_is_infimum=False)
    if not res.counts:
        row["note"] = f"cannot certify ({res.verdict})"
    elif witness and res.certified:
        row["witness"] = params
    return row


def warm_up(cell: Cell, closed: bool = True) -> None:
    """Build the cell's compiled construction and (``closed``) closed form once (worker
    processes then inherit them)."""
    if cell.readout == "regression":
        regression.design(cell).compiled_parts()
        if closed:
            _closed_form(cell, 2)  # the closed form's symbolic solving, once
    else:
        from constructions import classification

        geometry = classification.design(cell).geometry
        if geometry is not None:  # the last read's plane and pair heads have no symbolic geometry
            # its compiled parts (a design carried numerically from eps = 0, constructions.last_eps,
            # compiles the eps = 0 construction it carries)
            geometry.compiled_parts()


def row(cell: Cell, L: int, rtol: float = 1e-6, arc_boxes: int = ARC_BOXES,
        witness: bool = False, closed: bool = True) -> dict:
    """The sweep row of ``cell`` at ``L``: :func:`regression_row` (``closed``: with its closed
    form) or :func:`classification_row`."""
    if cell.readout == "regression":
        return regression_row(cell, L, rtol, arc_boxes, witness=witness, closed=closed)
    return classification_row(cell, L, witness=witness)
