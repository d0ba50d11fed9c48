"""Command line: sweep B_min(L) (regression) or the certified margin (classification).

    python -m bounds.sweep --variant post_learned --Lmax 4096 [--Lmin N] [--d D]
        [--attention softmax|linear] [--readout regression|classification] [--eps E]
        [--task count|select] [--read bos|last]
        [--fit-from L] [--rtol R] [--lower-boxes N] [--jobs J] [--quiet] [--json] [--out DIR]
        [--save-params DIR]

Default grid: powers of two from ``Lmin`` (default 2) to ``Lmax``, ``Lmin`` and ``Lmax``
included.  Prints a table, or one JSON object with ``--json``; ``--out DIR`` also writes
``sweep.csv`` and ``sweep.json``; ``--save-params DIR`` writes every certified witness
(:func:`verify.params_file.witness_files`).  A row is certified, or null where a proof says
that nothing counts (``L > L*``); an ``L`` with neither is no row and is listed under
``unreached`` with its reason (:func:`summary`).  A progress bar over the rows is drawn on stderr
when it is a terminal (not with ``--quiet``).  Bad input: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import math
import os
import sys
from decimal import ROUND_CEILING, ROUND_FLOOR

from bounds import fit as fitting
from bounds import pool, search
from bounds.lower import ARC_BOXES
from bounds.lstar import cell_l_star, l_star_reason, l_star_status
from bounds.search import row as sweep_row
from bounds.search import warm_up
from constructions import __version__, cli, progress, registry, regression
from constructions.cell import ATTENTIONS, KINDS, NORMS, READOUTS, READS, TASKS, Cell
from constructions.cell import MAX_L as CELL_MAX_L
from constructions.refusals import refusal
from verify.judge import check_cost
from verify.report import directed


MEANING = {
    "B_min": "the norm bound B(theta) of an explicit parameter set certified in ball "
             "arithmetic to count to L (rounded up): an upper bound on the true minimum",
    "B_lower": "a proven lower bound: no parameter set with a smaller bound counts to L",
}


def _parser() -> cli.Parser:
    p = cli.Parser(prog="python -m bounds.sweep", description=__doc__.split("\n")[0],
                   epilog=f"B_min: {MEANING['B_min']}.  B_lower: {MEANING['B_lower']}.")
    p.add_argument("--variant", required=True, choices=NORMS,
                   help="norm placement: none, pre_bare, pre_learned, post_bare, post_learned "
                        "(learned: with the affine of --affine)")
    p.add_argument("--norm", choices=tuple(KINDS), default="layernorm",
                   help="norm kind: layernorm (default, centres then scales) or rmsnorm (scales only)")
    p.add_argument("--affine", choices=("gain", "gain_bias"), default=None,
                   help="the affine of a learned variant: gain (g * N(v)) or gain_bias "
                        "(g * N(v) + beta); default gain_bias for layernorm, gain for rmsnorm")
    p.add_argument("--Lmax", required=True, type=int, help="the largest count of the grid")
    p.add_argument("--Lmin", type=int, default=None, help="the smallest count of the grid (default 2)")
    p.add_argument("--d", type=int, default=8, help="the width d of the layer (default 8)")
    p.add_argument("--attention", choices=ATTENTIONS, default="softmax",
                   help="softmax (default) or linear attention")
    p.add_argument("--readout", choices=READOUTS, default="regression",
                   help="regression (default: y = <w, z> + w0, rounded) or classification "
                        "(argmax of <u_c, z> + b_c)")
    p.add_argument("--eps", type=cli.nonnegative_float, default=0.0,
                   help="the LayerNorm epsilon (default 0; constructions are derived for 0)")
    p.add_argument("--task", choices=tuple(TASKS), default="count",
                   help="count (default: the a tokens of (s, a^n)) or select (the a tokens among "
                        "a and distractor b tokens, every input of length <= L)")
    p.add_argument("--read", choices=tuple(READS), default="bos",
                   help="where the count is read: bos (default: at s) or last (at the last "
                        "position, causal mask)")
    p.add_argument("--fit-from", type=int, default=64, dest="fit_from",
                   help="fit the rate over L >= this (default 64)")
    p.add_argument("--rtol", type=float, default=1e-6, help="bisection tolerance (default 1e-6)")
    p.add_argument("--lower-boxes", type=int, default=ARC_BOXES, dest="lower_boxes",
                   help=f"cap on the branch-and-bound boxes of the post-norm lower bound "
                        f"(default {ARC_BOXES}; a smaller cap gives a weaker, still valid bound)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes for the rows (default: the number of CPUs)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (it is drawn on stderr only when stderr is a terminal)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="also write DIR/sweep.json and DIR/sweep.csv (atomically, both or neither)")
    p.add_argument("--save-params", default=None, metavar="DIR", dest="save_params",
                   help="write the certified parameter set of every row as DIR/L<L>.json (exact "
                        "decimals) and DIR/L<L>.safetensors (rounded to float64, written only if "
                        "that rounding is certified too), for python -m verify --params")
    return p


#: the largest count the sweep accepts: the judge's and the constructions' limit (a
#: classification row is refused long before, by the size of its head)
MAX_L = CELL_MAX_L


def grid(Lmin: int, Lmax: int) -> list[int]:
    Ls = {Lmin, Lmax}
    k = 1
    while 2**k <= Lmax:
        if 2**k >= Lmin:
            Ls.add(2**k)
        k += 1
    return sorted(Ls)


def parse(argv) -> tuple[argparse.Namespace, Cell, list[int]]:
    """Validate the arguments (every check before any work): ``(args, cell, grid)``."""
    args = _parser().parse_args(argv)
    if args.Lmax < 1:
        raise cli.UsageError(f"--Lmax must be >= 1, got {args.Lmax}")
    if args.Lmin is None:
        args.Lmin = min(2, args.Lmax)
    if args.Lmin < 1 or args.Lmin > args.Lmax:
        raise cli.UsageError(f"--Lmin must be between 1 and --Lmax, got {args.Lmin}")
    if args.d < 2:
        raise cli.UsageError(f"--d must be >= 2, got {args.d}")
    if not math.isfinite(args.eps) or args.eps < 0:
        raise cli.UsageError(f"--eps must be a finite number >= 0, got {args.eps}")
    if not (1e-12 <= args.rtol < 0.1):
        raise cli.UsageError(f"--rtol must be in [1e-12, 0.1), got {args.rtol}")
    if args.Lmax > MAX_L:
        raise cli.UsageError(f"--Lmax must be at most {MAX_L}, got {args.Lmax}")
    if args.out is not None:
        cli.check_out_dir(args.out)
    if args.save_params is not None:
        cli.check_out_dir(args.save_params, "--save-params")
    if args.jobs < 1:
        raise cli.UsageError(f"--jobs must be >= 1, got {args.jobs}")
    if args.lower_boxes < 1:
        raise cli.UsageError(f"--lower-boxes must be >= 1, got {args.lower_boxes}")
    if args.fit_from < 1:
        raise cli.UsageError(f"--fit-from must be >= 1, got {args.fit_from}")
    cell = Cell(args.attention, args.variant, args.readout, args.d, args.eps, norm=args.norm,
                affine=args.affine, task=args.task, read=args.read)
    why = refusal(cell)
    if why is not None:  # a cell without a construction yet: refused, never a wrong row
        raise cli.UsageError(f"{cell.attention}/{cell.variant}/{cell.readout}: {why}"
                             f"{_refused_l_star(cell)}")
    Ls = grid(args.Lmin, args.Lmax)
    check_cell(cell, max(Ls))
    return args, cell, Ls


def check_cell(cell: Cell, Lmax: int) -> None:
    """Refuse (``ValueError`` naming the reason) a cell the sweep cannot run up to ``Lmax``:
    a cell without a derived construction, a cell whose largest row is beyond the judge's limits
    (:func:`verify.judge.check_cost`: the select task and the last read have about ``L^2/2`` and
    ``L^2`` inputs) or, for classification, the head's (the cost grows with L: the largest row
    decides; rows beyond a finite ``L*`` are null without a judgement)."""
    star = cell_l_star(cell)
    judged = Lmax if star is None else min(Lmax, star)
    if cell.readout == "regression":
        regression.design(cell)
        check_cost(cell, judged)
        return
    from constructions import classification  # scipy: only classification sweeps load it

    classification.design(cell)
    classification.check_size(cell, Lmax)
    check_cost(cell, judged)


def _row(cell: Cell, L: int, rtol: float, arc_boxes: int, save: bool, closed: bool = True) -> dict:
    """One row (``closed``: with its closed form); with ``save`` the files of its certified
    witness (:func:`verify.params_file.witness_files`) and their note ride along under
    ``_files`` for :func:`sweep` to write (and name in the row's ``saved``) once the envelope
    (:func:`envelope`) has said which witness each row reports."""
    r = sweep_row(cell, L, rtol=rtol, arc_boxes=arc_boxes, witness=save, closed=closed)
    witness = r.pop("witness", None)
    if witness is not None:
        from verify import params_file  # safetensors: only --save-params loads it

        r["_files"] = params_file.witness_files(witness, L, f"L{L}")
    return r


def _witness_for(cell: Cell, files: dict, source: int, L: int) -> tuple[dict, str | None]:
    """The files of the witness of ``L' = source`` (its exact JSON among ``files``) written for
    ``L <= L'`` (:func:`envelope`): for classification the head's rows ``0..L`` only (a head for
    ``L`` has ``L + 1`` rows).  It is certified again at ``L`` before anything is written
    (:func:`verify.params_file.witness_files` certifies it and its float64 rounding); a witness
    of ``L'`` that does not certify at ``L`` contradicts :func:`envelope`'s argument and raises."""
    from constructions.cell import Params
    from verify import params_file
    from verify.certify import certify

    params, _ = params_file.from_json(files[f"L{source}.json"])
    if cell.readout == "classification":
        params = Params(params.cell, {**params.vectors, "u": params.vectors["u"][:L + 1]},
                        {**params.scalars, "b": params.scalars["b"][:L + 1]})
    res = certify(params, L)
    if not res.certified:
        raise cli.Failure(f"the certified witness of L = {source} does not certify at L = {L} "
                           f"({res.verdict}): the envelope's argument fails, a judge is wrong")
    return params_file.witness_files(params, L, f"L{L}")


def sweep(cell: Cell, Ls, fit_from: int = 64, rtol: float = 1e-6,
          lower_boxes: int = ARC_BOXES, jobs: int = 1, save_params: str | None = None,
          done=None, closed_forms: bool = True) -> dict:
    """Every row, the rate fit and ``L*``: the object printed by ``--json``.  The rows are
    computed in ``jobs`` worker processes (:func:`bounds.pool.rows`; ``done(i, row)`` is
    called as the row of ``Ls[i]`` completes).  With ``save_params`` (a directory) the
    certified witness of every row is written there, one atomic pair of files per row
    (:func:`constructions.cli.write_files`).  ``closed_forms=False`` leaves out the rows'
    exact closed forms (``closed_form``, built in sympy), which the table does not print."""
    compute = functools.partial(_row, save=save_params is not None, closed=closed_forms)
    rows = pool.rows([(cell, L) for L in Ls], rtol, lower_boxes, jobs, done, compute,
                     functools.partial(warm_up, closed=closed_forms))
    files = {r["L"]: r.pop("_files") for r in rows if "_files" in r}
    result = summary(cell, rows, fit_from, rtol, lower_boxes)
    if save_params is not None:
        for r in result["rows"]:  # every row's files are those of the witness it reports
            source = r.get(_witness_key(cell))
            if source is not None:
                files[r["L"]] = _witness_for(cell, files[source][0], source, r["L"])
            if r["L"] in files:
                named, note = files[r["L"]]
                r["saved"] = " ".join(named)
                if note:
                    r["note"] = f"{r['note']}; {note}" if r.get("note") else note
        for named, _ in files.values():
            cli.write_files(save_params, named)
    return result


#: the key naming the larger ``L'`` whose witness a row reports (:func:`envelope`)
ENVELOPE_KEYS = {"regression": "B_min_witness_L", "classification": "margin_witness_L"}


def _scale_free(cell: Cell) -> bool:
    """A classification cell whose ``B_min`` is an infimum of 0
    (:func:`constructions.registry.scale_free`); its rows' value is the margin, every other
    cell's is the cost ``B_min``."""
    return cell.readout == "classification" and registry.scale_free(cell)


def _witness_key(cell: Cell) -> str:
    """The key of :data:`ENVELOPE_KEYS` that names a row's witness in ``cell``."""
    return ENVELOPE_KEYS["classification" if _scale_free(cell) else "regression"]


def envelope(cell: Cell, rows: list[dict]) -> list[dict]:
    """The rows with the monotone envelope (new dicts; ``rows`` are not changed).

    *The argument.*  A parameter set that counts to ``L'`` counts to every ``L <= L'``: the
    inputs of ``L`` are among those of ``L'`` (the count task's ``n <= L``; the select task's
    pairs ``n_a + n_b <= L``, at either read position), and whether one input is counted
    correctly does not depend on ``L`` (regression: ``|y - n| < 1/2`` at that input).  So a
    certified witness of ``L'`` is one of ``L``, and the true ``B_min`` is non-decreasing.  For a
    classification head of ``L'`` the head of ``L`` is its rows ``0..L`` (no vector grows): an
    input of count ``n <= L`` is judged against the classes ``c != n, c <= L``, among those of
    ``L'``, so its margin is at least the one it had, and the margin of the smaller head over the
    inputs of ``L`` is ``>= margin(L')``.

    *The rule.*  Regression: where a larger ``L'`` of the rows has a certified ``B_min`` below
    that of ``L`` (or ``L`` has none certified), the row of ``L`` reports the smallest such
    ``B_min(L')``, certified, with ``B_min_witness_L = L'``, its own construction's value as
    ``B_min_own`` (None where it has none) and a note; its other keys (``worst_error``,
    ``shape``, ``closed_form``, ...) stay those of its own construction.  Classification: the
    same with the largest certified ``margin`` (``margin_witness_L``, ``margin_own``; the
    ratio to ``margin_upper`` is recomputed, and ``B_min = 0`` is then shown as an infimum); but
    a classification cell that is not scale-free (:func:`_scale_free`) goes by its cost, as
    regression does, the row taking the witness's ``B_min`` and ``margin``.  The
    fit (:func:`summary`) uses the reported values; ``--save-params`` writes, for such a row,
    the witness of ``L'`` certified again at ``L`` (:func:`_witness_for`).

    *The check.*  A proven lower bound at ``L'' <= L`` is one at ``L`` (the true ``B_min`` is
    non-decreasing), so every reported ``B_min(L)`` must be ``>=`` every ``B_lower(L'')``,
    ``L'' <= L``; and every certified ``margin(L)`` ``<=`` every ``margin_upper(L'')``,
    ``L'' <= L`` (a head of ``L`` restricted to ``L''`` has at least its margin).  A row that
    breaks this contradicts a certificate or a proof: :class:`constructions.cli.Failure` (one line,
    exit status 1).
    """
    regression = cell.readout == "regression"
    cost = not _scale_free(cell)  # the rows' value is a cost: B_min
    key, witness_key = ("B_min" if cost else "margin"), _witness_key(cell)
    better = (lambda a, b: a < b) if cost else (lambda a, b: a > b)
    out = [dict(r) for r in rows]
    best = None  # (value, L) of the best certified row of a larger L, scanning down
    for r in sorted(out, key=lambda r: r["L"], reverse=True):
        own = r[key] if r.get("certified") and r.get(key) is not None else None
        if best is not None and (own is None or better(best[0], own)):
            value, source = best
            r.update({f"{key}_own": own, key: value, witness_key: source, "certified": True})
            what = (f"B_min is the certified witness of L = {source} (it counts to every L <= {source}"
                    + ("" if regression else f", its head's rows 0..{r['L']}") + ")"
                    if cost else
                    f"margin is that of the certified head of L = {source}, its rows 0..{r['L']} "
                    f"(margins over fewer inputs and classes are no smaller)")
            mine = "none certified" if own is None else directed(own, ROUND_CEILING if cost
                                                                 else ROUND_FLOOR, 7)
            note = f"{what}; this L's own construction: {mine} ({key}_own)"
            r["note"] = f"{note}; {r['note']}" if r.get("note") else note
            if cost and not regression:  # the witness's head and margin come with its embeddings
                src = next(x for x in out if x["L"] == source)
                r.update(margin=src["margin"], margin_ratio=None)
            elif not regression:
                r.update(B_min=0.0, B_min_is_infimum=True, B_lower=0.0)
                upper = r.get("margin_upper")
                r["margin_ratio"] = upper / value if upper is not None else None
        elif own is not None:  # as good as every larger L's: the best so far
            best = (own, r["L"])
    _check_bounds(cell, out)
    return out


def _check_bounds(cell: Cell, rows: list[dict]) -> None:
    """The check of :func:`envelope`: :class:`constructions.cli.Failure` naming the first pair of rows that breaks it."""
    pairs = [("B_lower", "B_min", True)]  # (proven, certified, the proof bounds from below)
    if cell.readout == "classification":
        pairs.append(("margin_upper", "margin", False))
    for proven, certified, below in pairs:
        bound = None  # (value, L): the strongest proven bound of the rows so far, in L order
        for r in sorted(rows, key=lambda r: r["L"]):
            v = r.get(proven)
            if v is not None and (bound is None or (v > bound[0] if below else v < bound[0])):
                bound = (v, r["L"])
            c = r.get(certified) if r.get("certified") else None
            if bound is not None and c is not None and (c < bound[0] if below else c > bound[0]):
                raise cli.Failure(f"row L = {r['L']}: the certified {certified} {c!r} is "
                                   f"{'below' if below else 'above'} the proven {proven} "
                                   f"{bound[0]!r} of L = {bound[1]}: a certificate or a proof is wrong")


def summary(cell: Cell, rows: list[dict], fit_from: int = 64, rtol: float = 1e-6,
            lower_boxes: int = ARC_BOXES) -> dict:
    """The sweep's object for the cell's ``rows`` (in L order): the rows with their monotone
    envelope (:func:`envelope`), the fit of the values they report, and ``L*``.

    *Which rows.*  A row's null ``B_min`` says that nothing counts to its ``L``, so the rows are
    those with a certified value and those where a proof says that nothing counts (beyond
    ``L*``); every other ``L`` (no certified parameter set, no proof: :func:`bounds.search.unreached`,
    judged after the envelope, which may give it the witness of a larger ``L``) is no row and is
    listed under ``unreached`` as ``{"L", "reason"}`` (empty where none).  Where every ``L`` is
    unreached the rows are empty and the fit has no points: an answer, not an error.
    """
    enveloped, rows, missed = envelope(cell, rows), [], []
    for r in enveloped:
        why = search.unreached(cell, r)
        if why is None:
            rows.append(r)
        else:
            missed.append({"L": r["L"], "reason": why})
    quantity = "margin" if _scale_free(cell) else "B_min"
    fitted = fitting.fit([r["L"] for r in rows],
                         [r[quantity] if r.get("certified") else None for r in rows], fit_from)
    fitted.update(quantity=quantity, theory=fitting.theory_exponent(cell))
    if quantity == "margin":
        fitted["theory_local"] = fitting.theory_local(rows, fit_from)
    elif cell.readout == "classification":
        fitted["log_law"] = fitting.log_law(cell, rows, fit_from)
    fitted["note"] = FIT_NOTE
    if cell.readout == "regression":
        fitted["leading_constant"] = fitting.leading_constant(cell, rows)
    if fitting.theory_note(cell):
        fitted["theory_note"] = fitting.theory_note(cell)
    out = {
        "version": __version__, **cell.keys(), "rows": rows, "fit": fitted,
        "unreached": missed, "L_star": cell_l_star(cell),
        **_l_star_keys(cell),
        "certifying_backend": "arb256 (ball arithmetic)", "rtol": rtol,
        "lower_boxes": lower_boxes if cell.post and cell.readout == "regression" else None,
    }
    if cell.eps > 0 and cell.normed:
        from constructions import registry

        out["note"] = (("the construction is the eps = 0 arc lifted to R^{d+1}, derived for eps > 0 "
                        "(constructions.last_post_eps); the certified values are upper bounds, not "
                        "proven minimal")
                       if registry.builds("last_post_eps", cell) else
                       ("constructions are derived for eps = 0 (a scale-invariant norm); with "
                        "eps > 0 the certified values are upper bounds, not proven minimal"))
    return out


#: the human line of an L* that is not exact (:func:`bounds.lstar.l_star_status`)
L_STAR_NOTES = {
    "finite": "L* is finite but not derived: at most {L_star_upper} (the count task's, a sub-task)",
    "unknown": "L*: not derived whether it is finite",
}


def _l_star_keys(cell: Cell) -> dict:
    """``L_star_status`` (``exact``, ``infinite``: no finite L*, ``finite``: finite, not derived,
    ``unknown``) and ``L_star_upper`` (a proven upper bound where ``finite``, else null)."""
    status, value = l_star_status(cell)
    return {"L_star_status": status, "L_star_upper": value if status == "finite" else None}


def _refused_l_star(cell: Cell) -> str:
    """What is known of a refused cell's ``L*`` (:func:`bounds.lstar.l_star_status`), for its
    one line: ``"; L* = N"`` (exact), ``"; L* is finite, at most U"`` (``L_star_status``
    ``finite``), else nothing."""
    status, value = l_star_status(cell)
    if status == "exact":
        return f"; L* = {value} at d = {cell.d}"
    if status == "finite":
        return f"; L* is finite, at most {value} (L_star_status finite, L_star_upper {value})"
    return ""


FIT_NOTE = ("the rates are asymptotic: at finite L the log-log fit carries the corrections of "
            "the constructions, so its 95% interval can exclude the theory exponent; "
            "local_exponent (the slope between the two largest L) and the fit with a 1/L "
            "correction term converge to it")


def _fmt(v, spec="{:.7g}"):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return spec.format(v)


def _bound(v, rounding) -> str:
    """A bound to 7 digits, rounded in its own direction, so that the printed decimal is still the
    bound: ``B_min`` (a certified upper bound) up, ``B_lower`` and ``margin`` (a proven and a
    certified lower bound) down."""
    return "-" if v is None else directed(v, rounding, 7)


def table(result: dict) -> str:
    cls = result["readout"] == "classification"
    head = ["L", "B_min", "B_lower", "certified", "seconds"] + (["margin", "storage"] if cls else [])
    lines = [" ".join(f"{h:>12}" for h in head)]
    for r in result["rows"]:
        cells = [str(r["L"]), _bound(r["B_min"], ROUND_CEILING), _bound(r["B_lower"], ROUND_FLOOR),
                 _fmt(r["certified"]),
                 _fmt(r["seconds"], "{:.3f}")]
        if cls:
            cells += [_bound(r["margin"], ROUND_FLOOR), _fmt(r["storage"], "{:d}")]
        line = " ".join(f"{c:>12}" for c in cells)
        if r.get("note"):
            line += f"   {r['note']}"
        lines.append(line)
    f = result["fit"]
    title = (f"{result['attention']}/{result['variant']}/{result['readout']}, d={result['d']}, "
             f"eps={result['eps']:g}"
             + ("" if result["variant"] == "none" else f", {result['norm']} {result['affine']}")
             + f", task {result['task']}, read {result['read']}")
    if f["exponent"] is not None:
        ci = f"[{f['ci95'][0]:.4f}, {f['ci95'][1]:.4f}]" if f["ci95"] else "(too few points)"
        fit_line = (f"fit of log {f['quantity']} on log L over L >= {f['L_from']}: exponent "
                    f"{f['exponent']:.4f}, 95% CI {ci}; theory {_fmt(f['theory'], '{:g}')}")
    else:
        fit_line = (f"fit over L >= {f['L_from']}: too few certified rows; theory "
                    f"{_fmt(f['theory'], '{:g}')}")
    legend = [f"  {k}: {v}" for k, v in MEANING.items()]
    extra = []
    if f.get("local_exponent") is not None:
        c = f["corrected"]["exponent"]
        extra.append(f"local exponent between L = {f['local_between'][0]} and {f['local_between'][1]}: "
                     f"{f['local_exponent']:.4f}" + (f"; with a 1/L correction: {c:.4f}" if c is not None else ""))
    lead = f.get("leading_constant")
    if lead is not None:
        extra.append(_leading_note(lead, result["d"]))
    law = f.get("log_law")
    if law is not None and law["slope"] is not None:
        ci = f"[{law['ci95'][0]:.4f}, {law['ci95'][1]:.4f}]" if law["ci95"] else "(too few points)"
        extra.append(f"fit of B_min^2 on ln L over L >= {f['L_from']}: slope {law['slope']:.4f}, "
                     f"95% CI {ci}; theory {law['theory']:.4f} (sqrt(d)/2)")
    out = [title, *legend, *lines, *_unreached_line(result["unreached"]), fit_line, *extra]
    if f.get("theory_note"):
        out.append(f"theory: {f['theory_note']}")
    if cls and any(r.get("B_min_is_infimum") for r in result["rows"]):
        out.append("B_min is an infimum: with free biases the argmax is scale-free, so heads of "
                   "any norm > 0 count; margin is the certified smallest logit gap at unit norm")
    elif cls:
        out.append("B_min is the certified bound of the embeddings: the head's rows scale down "
                   "freely, the embeddings' scores must keep a contrast; margin is the certified "
                   "smallest logit gap of the head with rows of norm <= 1")
    if result["L_star"] is not None:
        why = l_star_reason(Cell(**{k: result[k] for k in CSV_METADATA if k != "version"}))
        out.append(f"L* = {result['L_star']}: the largest count {why} reaches at d={result['d']}")
    elif result.get("L_star_status") in L_STAR_NOTES:
        out.append(L_STAR_NOTES[result["L_star_status"]].format(**result))
    if result.get("note"):
        out.append(result["note"])
    return "\n".join(out)


def _unreached_line(missed: list[dict]) -> list[str]:
    """The table's line after the rows naming the unreached ``L`` (:func:`summary`) with their
    reasons, the ``L`` of one reason together (none where every ``L`` is a row)."""
    if not missed:
        return []
    by: dict[str, list[int]] = {}
    for m in missed:
        by.setdefault(m["reason"], []).append(m["L"])
    parts = [f"L = {', '.join(map(str, Ls))}: {why}" for why, Ls in by.items()]
    return ["unreached (no parameter set certified and no proof that none counts; not rows): "
            + "; ".join(parts)]


def _leading_note(lead: dict, d: int) -> str:
    """The fit note of the leading term (:func:`bounds.fit.leading_constant`)."""
    what = f"proven for {lead['proven']}"
    note = (f"leading constant: {lead['statement']}, c(d) = {lead['general']} (d >= {lead['d_min']}), "
            f"c({d}) = {lead['exact']} = {lead['value']:.7g}, {what}")
    if lead["ratio"] is not None:
        note += f"; at L = {lead['L']}: B_min/(c L^p) = {lead['ratio']:.7f}"
        if lead["lower_ratio"] is not None:
            note += f", B_lower/(c L^p) = {lead['lower_ratio']:.7f}"
    return note


#: columns of every CSV row that say what the file is about
CSV_METADATA = ("attention", "variant", "norm", "affine", "readout", "d", "eps", "task", "read",
                "version")


def csv_text(result: dict) -> str:
    """The rows as CSV, each with the cell's metadata (:data:`CSV_METADATA`) in front."""
    keys = sorted({k for r in result["rows"] for k in r}, key=lambda k: (k != "L", k))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[*CSV_METADATA, *keys])
    writer.writeheader()
    meta = {k: result[k] for k in CSV_METADATA}
    for r in result["rows"]:
        writer.writerow({**meta, **{k: (json.dumps(v) if isinstance(v, dict) else v)
                                    for k, v in r.items()}})
    return buf.getvalue()


def write_out(result: dict, folder: str) -> None:
    """``sweep.json`` and ``sweep.csv`` in ``folder``: both whole, or neither changed."""
    cli.write_files(folder, {"sweep.json": json.dumps(result, indent=2) + "\n",
                             "sweep.csv": csv_text(result)})


def execute(parsed) -> int:
    args, cell, Ls = parsed
    with progress.Bar(len(Ls), "sweep", args.quiet) as bar:
        result = sweep(cell, Ls, args.fit_from, args.rtol, args.lower_boxes, args.jobs,
                       args.save_params, done=lambda i, row: bar.advance(),
                       closed_forms=args.json or args.out is not None)
    if args.out:
        write_out(result, args.out)
    cli.emit(json.dumps(result) if args.json else table(result))
    return 0


def main(argv=None) -> int:
    return cli.run("sweep", parse, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
