"""The verdict on one parameter set: does it count to ``L``, how close, and at what cost?

:func:`check` decides in ball arithmetic (:func:`verify.certify.certify`: ``arb256``, then
``arb1024`` if undecided) and reports

* ``verdict``: ``counts`` (certified), ``does not count`` (some input is certainly wrong: the
  first is ``first_failure``) or ``cannot certify`` (no input is certainly wrong, but the balls
  leave some undecided, or a norm input cannot be told from a degenerate one);
* regression: the worst ``|y - n|`` and where (``worst_error``, ``worst_error_at``);
  classification: the smallest logit margin and where (``min_margin``, a rigorous lower bound);
* ``B``: a rigorous upper bound on ``B(theta)`` (:func:`verify.certify.rigorous_bound`);
* ``B_min``: ``B_min(L)`` of the cell where the toolkit knows it exactly, and ``ratio`` =
  ``B / B_min``.  Regression: the exact closed form
  (:func:`constructions.closed_forms.closed_form`, derived for the ``count`` task read at
  ``bos`` with ``eps = 0``), else not known.  The exact form (``B_min_exact``, sympy) is built
  only when asked (``exact``); otherwise ``B_min`` is the nearest double to the same closed
  form evaluated without sympy (:func:`constructions.closed_forms.value`; ``closed_form``'s
  float can differ from it in the last bit) and ``B_min_exact`` is None.  Classification: 0 as an infimum once some head
  counts to ``L`` where the cell's construction is scale-free
  (:func:`constructions.registry.scale_free`: free biases make the argmax invariant under a
  positive factor on the head, and there the embeddings scale down to 0 with it), and ``ratio``
  is undefined; not known where the embeddings' scores must keep a contrast (the select task read
  last with softmax attention without a norm or after post-norm,
  :mod:`constructions.select_last_contrast_head`) or no construction serves the cell.

:func:`exit_status` is 0 for ``counts`` and 1 otherwise.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal

from constructions.cell import BOS, COUNT, Params
from constructions import closed_forms, registry
from verify.certify import certify, rigorous_bound

VERDICTS = {"counts": "counts", "fails": "does not count", "cannot certify": "cannot certify"}


def _b_min(params: Params, L: int, counts: bool, exact: bool) -> dict:
    """``B_min``, ``B_min_exact``, ``B_min_is_infimum`` and ``B_min_source`` (module docstring)."""
    cell = params.cell
    known = cell.task == COUNT and cell.read == BOS
    out = {"B_min": None, "B_min_exact": None, "B_min_is_infimum": False}
    if cell.readout == "classification":
        if counts and registry.scale_free(cell):  # the cell's construction scales down to 0 and counts
            return {**out, "B_min": 0.0, "B_min_exact": "0" if exact else None, "B_min_is_infimum": True,
                    "B_min_source": "an infimum: with free biases the argmax is scale-free, and the "
                                    "cell's construction scales its embeddings down to 0"}
        if counts:
            return {**out, "B_min_source": "not known here: the head scales freely, but nothing "
                                           "shows that the embeddings do (their scores may have to "
                                           "keep a contrast; bounds.sweep reports B_min and B_lower)"}
        return {**out, "B_min_source": "not known here"}
    form = None if not known else (closed_forms.closed_form if exact else closed_forms.value)(cell, L)
    if form is None:
        return {**out, "B_min_source": "not known: no exact closed form for this cell at this L"}
    return {**out, "B_min": form["B"], "B_min_exact": form.get("B_exact"),
            "B_min_source": f"closed form ({form['valid_for']})"}


def _plain(x):
    """A count or a tuple of counts as JSON values."""
    return list(x) if isinstance(x, tuple) else x


def _finite(x):
    """``x``, or None where it is not a finite double (a ball without a finite midpoint, or a
    bound beyond the largest double): JSON has no NaN or infinity."""
    return x if x is None or math.isfinite(x) else None


def check(params: Params, L: int, rounded: int = 0, exact: bool = True, ignored=()) -> dict:
    """The report of the module docstring, as one JSON-ready dict; ``rounded`` is the number of
    file entries that were not binary numbers (:func:`verify.params_file.read`); ``exact``:
    whether to build the exact closed form (``B_min_exact``); ``ignored``: the file's vectors
    left out of ``params`` (a select file judged on the count task, :mod:`verify.params_file`),
    reported under ``ignored``."""
    res = certify(params, L)
    out = {"cell": params.cell.keys(), "L": L, "verdict": VERDICTS[res.verdict],
           "certified": res.certified, "backend": res.backend,
           "first_failure": _plain(res.first_failure), "undecided": len(res.undecided),
           "first_undecided": _plain(res.undecided[0]) if res.undecided else None}
    if params.cell.readout == "regression":
        out.update(worst_error=_finite(res.worst_error), worst_error_at=_plain(res.worst_error_at))
    else:
        out.update(min_margin=_finite(res.min_margin), min_margin_at=_plain(res.min_margin_at))
    out["B"] = _finite(rigorous_bound(params))
    out.update(_b_min(params, L, res.counts, exact))
    out["ratio"] = out["B"] / out["B_min"] if out["B_min"] and out["B"] is not None else None
    out["rounded"] = rounded
    out["ignored"] = list(ignored)
    return out


def exit_status(report: dict) -> int:
    """0 when the parameters count (certified), 1 when they do not or cannot be certified."""
    return 0 if report["verdict"] == "counts" else 1


def _input(at) -> str:
    """An input as the judge names it: a count ``n``, or the counts of its tokens."""
    return f"n = {at}" if isinstance(at, int) else f"counts {tuple(at) if isinstance(at, list) else at}"


def directed(x: float, rounding: str, digits: int = 10) -> str:
    """``x`` to ``digits`` significant digits, rounded in the direction ``rounding``
    (``ROUND_CEILING`` for an upper bound, ``ROUND_FLOOR`` for a lower bound), so that the
    printed decimal keeps the claim made of the number (``Decimal(x)`` is the double exactly)."""
    return format(Context(prec=digits, rounding=rounding).plus(Decimal(float(x))), "g")


def text(report: dict, source: str = "") -> str:
    """The report as lines for a person."""
    cell = report["cell"]
    head = (f"{cell['attention']}/{cell['variant']}/{cell['readout']} (d={cell['d']}, eps={cell['eps']:g}"
            + ("" if cell["variant"] == "none" else f", {cell['norm']} {cell['affine']}")
            + f", task {cell['task']}, read {cell['read']})")
    lines = [f"{source}: {head}" if source else head]
    how = (f"certified in ball arithmetic, {report['backend']}" if report["verdict"] == "counts"
           else f"decided in ball arithmetic, {report['backend']}")
    lines.append(f"L = {report['L']}: {report['verdict']} ({how})")
    if report["first_failure"] is not None:
        lines.append(f"first failing input: {_input(report['first_failure'])}")
    if report["undecided"]:
        lines.append(f"undecided inputs: {report['undecided']}, the first {_input(report['first_undecided'])}")
    if report.get("worst_error_at") is not None:
        worst = "not a finite double" if report["worst_error"] is None else repr(float(report["worst_error"]))
        lines.append(f"worst |y - n|: {worst} at {_input(report['worst_error_at'])}")
    if report.get("min_margin_at") is not None:
        least = ("not a finite double" if report["min_margin"] is None
                 else directed(report["min_margin"], ROUND_FLOOR, 7))
        lines.append(f"smallest logit margin: {least} at {_input(report['min_margin_at'])}"
                     + (" (a rigorous lower bound)" if report["certified"] else ""))
    lines.append("B(theta): beyond the largest double" if report["B"] is None
                 else f"B(theta): {directed(report['B'], ROUND_CEILING)} (rigorous upper bound)")
    if report["B_min"] is None:
        lines.append(f"B_min(L): {report['B_min_source']}")
    else:
        ratio = "" if report["ratio"] is None else f"; B(theta)/B_min(L) = {report['ratio']:.10g}"
        lines.append(f"B_min(L): {report['B_min']:.10g}, {report['B_min_source']}{ratio}")
        if report["B_min_exact"] is not None:
            lines.append(f"B_min(L) exactly: {report['B_min_exact']}")
    if report.get("rounded"):
        lines.append(f"note: {report['rounded']} entries of the file are not binary numbers and were "
                     "rounded (the verdict is that of the rounded numbers)")
    for name in report.get("ignored", ()):
        lines.append(f"ignored: {name} (no input of the {cell['task']} task has its token; "
                     "B(theta) leaves it out)")
    return "\n".join(lines)
