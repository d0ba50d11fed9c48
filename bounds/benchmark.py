"""Benchmark: wall and CPU time of the sweep command for every cell (not a test).

    python -m bounds.benchmark [--Lmax 4096] [--repeat 1] [--cells softmax/post_learned/regression[/rmsnorm] ...]
        [--large L ...] [--naive-L 4096] [--json]

A cell is ``attention/variant/readout``, with LayerNorm, or ``attention/variant/readout/kind`` with the
norm kind (``layernorm`` or ``rmsnorm``); the default is the 20 LayerNorm cells.  Each sweep runs as its own process, exactly as a user types it (the table, not ``--json``), so
the times include start-up.  CPU time is that of the sweep process and its worker processes
(user + system, from ``resource.getrusage(RUSAGE_CHILDREN)``); wall time is the elapsed time.
Prints one line per cell with the best of ``--repeat`` runs (the JSON also has every run's CPU
time, ``cpu_runs``) and the wall-time targets (5 s for the headline ``post_learned`` regression
sweep, 10 s for every cell; 10 s for a single row at ``L = 2^20``).

``--large L ...`` also times the single row at each ``L`` (e.g. ``65536 1048576``) of every
regression cell given, one sweep process each (``--Lmin L --Lmax L --jobs 1``), with its
``B_min``, ``B_lower`` and their gap.  ``--naive-L`` compares the certifying judge
(:func:`verify.judge.counts_to` on balls) on the headline construction at that ``L`` with a
naive check: the token-by-token forward pass (:func:`verify.forward.explicit`) in mpmath at 50
digits for every count.  The naive check costs ``O(L^2)``; it is timed at nine counts spread
over ``0..L`` and extrapolated by least squares (a cost linear in the sequence length) to the
sum over all ``L + 1`` counts.  ``--json`` prints one JSON object instead of the table.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from bounds.sweep import MAX_L
from constructions import cli
from constructions.cell import ATTENTIONS, KINDS, LAYERNORM, NORMS, READOUTS, Cell

HEADLINE = ("softmax", "post_learned", "regression", LAYERNORM.name)
TARGETS = {"headline": 5.0, "cell": 10.0, "row": 10.0}
#: the counts at which the naive check is timed (then extrapolated to every count)
NAIVE_SAMPLES = 9
#: the most runs per cell (each is a whole sweep)
MAX_REPEAT = 20


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _timed(cmd: list) -> tuple[float, float, str]:
    """``(wall, cpu, stdout)`` of one run of ``cmd``; a failure is a :class:`cli.Failure`."""
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.perf_counter() - wall0, _children_cpu() - cpu0
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise cli.Failure(f"{' '.join(cmd[2:])} exited {proc.returncode}: {last}")
    return wall, cpu, proc.stdout


def _sweep_cmd(attention: str, variant: str, readout: str, kind: str, *extra) -> list:
    return [sys.executable, "-m", "bounds.sweep", "--variant", variant, "--attention", attention,
            "--readout", readout, "--norm", kind, *extra]


def time_cell(attention: str, variant: str, readout: str, kind: str, Lmax: int,
              repeat: int) -> tuple[float, list]:
    """The best wall time of the sweep of one cell over ``repeat`` runs (seconds), and the CPU
    time of every run."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu, _ = _timed(_sweep_cmd(attention, variant, readout, kind, "--Lmax", str(Lmax)))
        walls.append(wall)
        cpus.append(cpu)
    return min(walls), cpus


def time_row(attention: str, variant: str, kind: str, L: int) -> dict:
    """The single regression row at ``L`` of one cell, in its own sweep process (one job)."""
    wall, cpu, out = _timed(_sweep_cmd(attention, variant, "regression", kind, "--Lmin", str(L),
                                       "--Lmax", str(L), "--jobs", "1", "--json"))
    result = json.loads(out)
    # an L the sweep does not reach is no row: its entry of unreached, with the reason as note
    (row,) = result["rows"] or [{"B_min": None, "B_lower": None, "certified": False,
                                 "note": m["reason"]} for m in result["unreached"]]
    gap = (row["B_min"] / row["B_lower"] - 1 if row.get("B_min") and row.get("B_lower")
           else None)
    return {"attention": attention, "variant": variant, "norm": kind, "L": L, "wall": wall, "cpu": cpu,
            "B_min": row["B_min"], "B_lower": row["B_lower"], "gap": gap,
            "certified": row["certified"], "note": row.get("note")}


def naive_ratio(L: int) -> dict:
    """The certifying judge against the naive token-by-token mpmath check, on the headline
    construction at ``L`` just above its boundary (CPU seconds of this process)."""
    from constructions import regression  # the constructions are only needed here
    from verify import counts_to, explicit

    design = regression.design(Cell(*HEADLINE[:3], norm=HEADLINE[3]))
    params = design.build(L, design.estimate(L) * (1 + 1e-4))
    start = time.process_time()
    res = counts_to(params, L, "arb256")
    judge = time.process_time() - start
    ns = sorted({round(L * k / (NAIVE_SAMPLES - 1)) for k in range(NAIVE_SAMPLES)})
    cost = []
    for n in ns:
        start = time.process_time()
        explicit(params, "s" + "a" * n, "mp50")
        cost.append(time.process_time() - start)
    # cost(n) = a + b (n + 1), fitted; summed over n = 0..L
    b, a = np.polyfit(np.array(ns, dtype=float) + 1, np.array(cost), 1)
    naive = (L + 1) * a + b * (L + 1) * (L + 2) / 2
    naive = max(naive, sum(cost))  # never below what was measured
    return {"L": L, "certified": res.certified, "judge_seconds": judge,
            "naive_seconds": naive, "naive_timed_counts": ns, "ratio": naive / judge}


def _cell(text: str) -> tuple[str, str, str, str]:
    """``(attention, variant, readout, kind)`` of ``A/V/R`` (LayerNorm) or ``A/V/R/K``."""
    parts = tuple(text.split("/"))
    if len(parts) == 3:
        parts += (LAYERNORM.name,)
    if (len(parts) != 4 or parts[0] not in ATTENTIONS or parts[1] not in NORMS
            or parts[2] not in READOUTS or parts[3] not in KINDS):
        raise cli.UsageError(f"--cells: {text!r} is not attention/variant/readout[/norm] "
                             f"(e.g. softmax/post_learned/regression or linear/post_bare/regression/rmsnorm)")
    return parts


def _parser() -> cli.Parser:
    p = cli.Parser(prog="python -m bounds.benchmark", description=__doc__.split("\n")[0])
    p.add_argument("--Lmax", type=int, default=4096, help="the largest count swept (default 4096)")
    p.add_argument("--repeat", type=int, default=1, help="runs per cell; the best is reported (default 1)")
    p.add_argument("--cells", nargs="+", default=None, metavar="A/V/R[/K]",
                   help="attention/variant/readout, optionally /layernorm or /rmsnorm (default: "
                        "all 20 cells with LayerNorm)")
    p.add_argument("--large", nargs="+", type=int, default=[], metavar="L",
                   help="also time the single row at each L (e.g. 65536 1048576) of every "
                        "regression cell given (slow: up to minutes per row)")
    p.add_argument("--naive-L", type=int, default=4096, dest="naive_L",
                   help="L of the comparison with the naive token-by-token mpmath check "
                        "(default 4096; 0: none)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    return p


def parse(argv):
    args = _parser().parse_args(argv)
    if not 1 <= args.Lmax <= MAX_L:
        raise cli.UsageError(f"--Lmax must be between 1 and {MAX_L}, got {args.Lmax}")
    if not 1 <= args.repeat <= MAX_REPEAT:
        raise cli.UsageError(f"--repeat must be between 1 and {MAX_REPEAT}, got {args.repeat}")
    for L in args.large:
        if not 1 <= L <= MAX_L:
            raise cli.UsageError(f"--large must be between 1 and {MAX_L}, got {L}")
    if not 0 <= args.naive_L <= MAX_L:
        raise cli.UsageError(f"--naive-L must be between 0 and {MAX_L}, got {args.naive_L}")
    args.cells = ([_cell(c) for c in args.cells] if args.cells
                  else list(itertools.product(ATTENTIONS, NORMS, READOUTS, [LAYERNORM.name])))
    return args


def _large_cells(cells) -> list:
    """The regression cells among ``cells`` whose rows can be timed at any ``L`` (bare pre-norm
    counts only up to its ``L*``, so it has no large rows)."""
    return [(a, v, k) for a, v, r, k in cells if r == "regression" and v != "pre_bare"]


def _name(variant: str, kind: str) -> str:
    """The variant as the table prints it: with ``(rms)`` after post- or pre-RMSNorm."""
    return variant if kind == LAYERNORM.name or variant == "none" else f"{variant}(rms)"


def execute(args) -> int:
    worst = 0.0
    out = {"cpus": os.cpu_count(), "Lmax": args.Lmax, "cells": [], "large_rows": [], "naive": None}
    if not args.json:
        cli.emit(f"{'attention':>8} {'variant':>14} {'readout':>15}  {'wall':>9}  {'cpu':>9}")
    for cell in args.cells:
        wall, cpus = time_cell(*cell, args.Lmax, args.repeat)
        cpu = min(cpus)
        target = TARGETS["headline" if cell == HEADLINE else "cell"]
        worst = max(worst, wall / target)
        out["cells"].append({"attention": cell[0], "variant": cell[1], "readout": cell[2],
                             "norm": cell[3], "wall": wall, "cpu": cpu, "cpu_runs": cpus, "target_wall": target})
        if not args.json:
            cli.emit(f"{cell[0]:>8} {_name(cell[1], cell[3]):>14} {cell[2]:>15}  {wall:7.2f} s  {cpu:7.2f} s"
                     f"  (target {target:.0f} s wall) {'ok' if wall <= target else 'SLOW'}")
    for L in args.large:
        for attention, variant, kind in _large_cells(args.cells):
            row = time_row(attention, variant, kind, L)
            out["large_rows"].append(row)
            if not args.json:
                gap = "-" if row["gap"] is None else f"{row['gap']:.2e}"
                cli.emit(f"{attention:>8} {_name(variant, kind):>14} {'L = ' + str(L):>15}  {row['wall']:7.2f} s"
                         f"  {row['cpu']:7.2f} s  B_min/B_lower - 1 = {gap}"
                         f"  certified: {'yes' if row['certified'] else 'no'}"
                         + (f"  (target {TARGETS['row']:.0f} s wall)" if L == MAX_L else ""))
    if args.naive_L:
        out["naive"] = naive = naive_ratio(args.naive_L)
        if not args.json:
            cli.emit(f"naive token-by-token mpmath check at L = {naive['L']}: "
                     f"{naive['naive_seconds']:.4g} s CPU (extrapolated from "
                     f"{len(naive['naive_timed_counts'])} counts) against {naive['judge_seconds']:.4g} s "
                     f"for the certifying judge: {naive['ratio']:.0f}x")
    out["worst_wall_ratio"] = worst
    if args.json:
        cli.emit(json.dumps(out))
    else:
        cli.emit(f"worst wall time/target ratio: {worst:.2f}  (cpus: {os.cpu_count()})")
    return 0


def main(argv=None) -> int:
    return cli.run("benchmark", parse, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
