"""Command line: dense grids of sweeps (cells x d x L) into a results store on disk.

    python -m bounds.grid --variant V1,V2,... [--attention A,...] [--norm K,...] [--affine F,...]
        [--readout R,...] [--task T,...] [--read P,...] [--d D1,D2,...] --Lmax N [--Lmin N]
        [--eps E] [--fit-from L] [--rtol R] [--lower-boxes N] --out STORE [--scheduler ADDRESS]
        [--jobs J] [--no-cache] [--quiet] [--json]

The grid is every combination of the listed parts (``--affine`` applies to the learned
variants only) at every ``d``, each swept over the sweep's grid of ``L``
(:func:`bounds.sweep.grid`).  Every cell is checked as ``bounds.sweep`` checks it, before any
work; its rows are ``bounds.search.row``, as in the sweep, and are printed with the sweep's
monotone envelope over the cell's grid (:func:`bounds.sweep.envelope`); an ``L`` the sweep
leaves out (:func:`bounds.sweep.summary`) is listed under ``unreached``, with its cell.  Each
row is kept in the store (:mod:`bounds.store`) as it completes and read from it on the next
run; rows are computed in
local worker processes, or on a Dask cluster with ``--scheduler``.  Bad input: one line on
stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

from bounds import pool, store, sweep
from bounds.lower import ARC_BOXES
from constructions import __version__, cli, progress
from constructions.cell import AFFINES, ATTENTIONS, KINDS, NORMS, READOUTS, READS, TASKS


def _items(choices=None, convert=str):
    """An argparse type: a comma list of distinct, non-empty items (of ``choices``)."""

    def parse(text: str) -> tuple:
        items = [t.strip() for t in text.split(",")]
        if any(not t for t in items):
            raise argparse.ArgumentTypeError(f"an empty item in {text!r}")
        if choices is not None:
            for t in items:
                if t not in choices:
                    raise argparse.ArgumentTypeError(
                        f"unknown item {t!r} in {text!r}; choose from {', '.join(choices)}")
        try:
            values = [convert(t) for t in items]
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
        if len(set(values)) < len(values):
            raise argparse.ArgumentTypeError(f"a repeated item in {text!r}")
        return tuple(values)

    return parse


LEARNED = tuple(a for a in AFFINES if a != "bare")


def _parser() -> cli.Parser:
    p = cli.Parser(prog="python -m bounds.grid", description=__doc__.split("\n")[0],
                   epilog=f"B_min: {sweep.MEANING['B_min']}.  B_lower: {sweep.MEANING['B_lower']}.")
    p.add_argument("--variant", required=True, metavar="V,...", type=_items(NORMS),
                   help=f"comma list of norm placements ({', '.join(NORMS)})")
    p.add_argument("--attention", metavar="A,...", type=_items(ATTENTIONS), default=("softmax",),
                   help="comma list of attentions: softmax (default), linear")
    p.add_argument("--norm", metavar="K,...", type=_items(tuple(KINDS)), default=("layernorm",),
                   help="comma list of norm kinds: layernorm (default), rmsnorm")
    p.add_argument("--affine", metavar="F,...", type=_items(LEARNED), default=None,
                   help="comma list of the affines of the learned variants: gain, gain_bias "
                        "(default: gain_bias for layernorm, gain for rmsnorm)")
    p.add_argument("--readout", metavar="R,...", type=_items(READOUTS), default=("regression",),
                   help="comma list of read-outs: regression (default), classification")
    p.add_argument("--task", metavar="T,...", type=_items(tuple(TASKS)), default=("count",),
                   help="comma list of tasks: count (default), select")
    p.add_argument("--read", metavar="P,...", type=_items(tuple(READS)), default=("bos",),
                   help="comma list of read positions: bos (default), last")
    p.add_argument("--d", metavar="D,...", type=_items(convert=int), default=(8,),
                   help="comma list of widths d (default 8)")
    p.add_argument("--Lmax", required=True, type=int, help="the largest count of each sweep")
    p.add_argument("--Lmin", type=int, default=None, help="the smallest count (default 2)")
    p.add_argument("--eps", type=cli.nonnegative_float, default=0.0,
                   help="the norm epsilon (default 0)")
    p.add_argument("--fit-from", type=int, default=64, dest="fit_from",
                   help="fit each cell's rate over L >= this (default 64)")
    p.add_argument("--rtol", type=float, default=1e-6, help="bisection tolerance (default 1e-6)")
    p.add_argument("--lower-boxes", type=int, default=ARC_BOXES, dest="lower_boxes",
                   help=f"cap on the boxes of the post-norm lower bound (default {ARC_BOXES})")
    p.add_argument("--out", required=True, metavar="STORE",
                   help="the results store: a directory of one file per row, read and extended")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="compute the rows on the Dask cluster of this scheduler "
                        "(e.g. tcp://host:8786; needs the dask extra)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="local worker processes (default: the number of CPUs; not with --scheduler)")
    p.add_argument("--no-cache", action="store_true", dest="no_cache",
                   help="recompute every row (and rewrite its entry) instead of reading the store")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (it is drawn on stderr only when stderr is a terminal)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    return p


def _sweep_argv(args, d: int, attention="softmax", variant="none", norm="layernorm",
                affine=None, readout="regression", task="count", read="bos") -> list[str]:
    """The sweep's arguments for one cell of the grid."""
    argv = ["--variant", variant, "--attention", attention, "--norm", norm, "--readout", readout,
            "--task", task, "--read", read,
            "--d", str(d), "--Lmax", str(args.Lmax), "--eps", repr(args.eps),
            "--rtol", repr(args.rtol), "--lower-boxes", str(args.lower_boxes),
            "--fit-from", str(args.fit_from), "--jobs", str(args.jobs)]
    if args.Lmin is not None:
        argv += ["--Lmin", str(args.Lmin)]
    if affine is not None:
        argv += ["--affine", affine]
    return argv


def parse(argv):
    """Validate the arguments (every check before any work): ``(args, cells, Ls)``.

    Every cell is validated by the sweep's own :func:`bounds.sweep.parse`, so the grid accepts
    and refuses exactly what the sweep does: first the options common to the cells (at each
    ``d``, on the cell without a norm, which always has a construction), then each cell, whose
    refusal names it.
    """
    args = _parser().parse_args(argv)
    cli.check_out_dir(args.out)
    for d in args.d:
        _, _, Ls = sweep.parse(_sweep_argv(args, d))
    learned = [v for v in args.variant if v.endswith("_learned")]
    if args.affine is not None and not learned:
        raise cli.UsageError("--affine applies to the learned variants (pre_learned, "
                             "post_learned), and --variant lists none")
    cells = []
    for attention, variant, norm, readout, task, read, d in itertools.product(
            args.attention, args.variant, args.norm, args.readout, args.task, args.read, args.d):
        for affine in (args.affine or (None,)) if variant in learned else (None,):
            try:
                _, cell, _ = sweep.parse(_sweep_argv(args, d, attention, variant, norm, affine,
                                                     readout, task, read))
            except (cli.UsageError, ValueError) as exc:
                name = f"{attention}/{variant}/{readout}"
                where = "" if name in str(exc) else (
                    f"{name} (d={d}, {norm}{' ' + affine if affine else ''}): ")
                raise cli.UsageError(f"{where}{exc}") from None
            cells.append(cell)
    return args, cells, Ls


def _table(result: dict) -> str:
    fmt = sweep._fmt
    head = ["attention", "variant", "norm", "affine", "readout", "d", "L", "B_min", "B_lower",
            "certified", "margin", "seconds"]
    widths = [9, 12, 9, 9, 14, 5, 6, 12, 12, 9, 12, 8]
    line = lambda cells: " ".join(f"{c:>{w}}" for c, w in zip(cells, widths)).rstrip()
    lines = [line(head)]
    for r in result["rows"]:
        text = line([r["attention"], r["variant"], r["norm"], r["affine"], r["readout"],
                     str(r["d"]), str(r["L"]), fmt(r["B_min"]), fmt(r["B_lower"]),
                     fmt(r["certified"]), fmt(r.get("margin"), "{:.6e}"),
                     fmt(r["seconds"], "{:.3f}")])
        lines.append(text + (f"   {r['note']}" if r.get("note") else ""))
    for m in result["unreached"]:
        lines.append(f"unreached, not a row: {m['attention']}/{m['variant']}/{m['readout']}, "
                     f"d={m['d']}, {m['norm']} {m['affine']}, L = {m['L']}: {m['reason']}")
    for c in result["cells"]:
        f = c["fit"]
        name = (f"{c['attention']}/{c['variant']}/{c['readout']}, d={c['d']}"
                + ("" if c["variant"] == "none" else f", {c['norm']} {c['affine']}"))
        if f["exponent"] is not None:
            ci = f"[{f['ci95'][0]:.4f}, {f['ci95'][1]:.4f}]" if f["ci95"] else "(too few points)"
            text = f"exponent of {f['quantity']} {f['exponent']:.4f}, 95% CI {ci}"
        else:
            text = f"too few certified rows over L >= {f['L_from']} to fit"
        text += f"; theory {fmt(f['theory'], '{:g}')}"
        if c["L_star"] is not None:
            text += f"; L* = {c['L_star']}"
        lines.append(f"{name}: {text}")
    lines.append(f"{len(result['rows'])} rows: {result['from_store']} from the store "
                 f"{result['store']}, {result['computed']} computed")
    return "\n".join(lines)


def execute(parsed) -> int:
    args, cells, Ls = parsed
    entries = store.Store(args.out)
    tasks = [(cell, L) for cell in cells for L in Ls]
    keys = [store.key(cell, L, args.rtol, args.lower_boxes) for cell, L in tasks]
    rows = [None] * len(tasks) if args.no_cache else [entries.get(k) for k in keys]
    missing = [i for i, r in enumerate(rows) if r is None]
    with progress.Bar(len(tasks), "grid", args.quiet, initial=len(tasks) - len(missing)) as bar:
        def done(j: int, row: dict) -> None:
            i = missing[j]
            entries.put(keys[i], row)
            rows[i] = json.loads(json.dumps(row))  # as a stored row reads back
            bar.advance()

        todo = [tasks[i] for i in missing]
        if args.scheduler is not None:
            from bounds import cluster  # dask only when asked for
            cluster.rows(args.scheduler, todo, args.rtol, args.lower_boxes, done)
        else:
            pool.rows(todo, args.rtol, args.lower_boxes, args.jobs, done)
    out_rows, out_cells, missed = [], [], []
    for c, cell in enumerate(cells):
        mine = rows[c * len(Ls):(c + 1) * len(Ls)]
        summary = sweep.summary(cell, mine, args.fit_from, args.rtol, args.lower_boxes)
        out_rows += [{**cell.keys(), **r} for r in summary["rows"]]  # with their envelope
        missed += [{**cell.keys(), **m} for m in summary["unreached"]]
        out_cells.append({**cell.keys(), "fit": summary["fit"], "L_star": summary["L_star"],
                          **({"note": summary["note"]} if "note" in summary else {})})
    result = {"version": __version__, "store": args.out, "rtol": args.rtol,
              "lower_boxes": args.lower_boxes, "rows": out_rows, "unreached": missed,
              "cells": out_cells,
              "computed": len(missing), "from_store": len(tasks) - len(missing)}
    cli.emit(json.dumps(result) if args.json else _table(result))
    return 0


def main(argv=None) -> int:
    return cli.run("grid", parse, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
