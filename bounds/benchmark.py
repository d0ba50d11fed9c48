"""Benchmark: wall and CPU time of the sweep command for every cell (not a test).

    python -m bounds.benchmark [--Lmax 4096] [--repeat 1] [--cells softmax/post_learned/regression ...]

Each sweep runs as its own process, exactly as a user types it, so the times include start-up.
CPU time is that of the sweep process and its worker processes (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``); wall time is the elapsed time.  Prints one line per
cell with the best of ``--repeat`` runs and the wall-time targets (5 s for the headline
``post_learned`` regression sweep, 10 s for every cell).
"""

from __future__ import annotations

import itertools
import os
import resource
import subprocess
import sys
import time

from bounds.sweep import MAX_L
from constructions import cli
from constructions.cell import ATTENTIONS, NORMS, READOUTS

HEADLINE = ("softmax", "post_learned", "regression")
TARGETS = {"headline": 5.0, "cell": 10.0}
#: the most runs per cell (each is a whole sweep)
MAX_REPEAT = 20


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def time_cell(attention: str, norm: str, readout: str, Lmax: int, repeat: int) -> tuple[float, float]:
    """Best ``(wall, cpu)`` seconds of the sweep of one cell over ``repeat`` runs."""
    cmd = [sys.executable, "-m", "bounds.sweep", "--variant", norm, "--attention", attention,
           "--readout", readout, "--Lmax", str(Lmax), "--json"]
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        cpu0, wall0 = _children_cpu(), time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall, cpu = time.perf_counter() - wall0, _children_cpu() - cpu0
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise cli.Failure(f"the sweep of {attention}/{norm}/{readout} exited "
                               f"{proc.returncode}: {last}")
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return best_wall, best_cpu


def _cell(text: str) -> tuple[str, str, str]:
    parts = tuple(text.split("/"))
    if (len(parts) != 3 or parts[0] not in ATTENTIONS or parts[1] not in NORMS
            or parts[2] not in READOUTS):
        raise cli.UsageError(f"--cells: {text!r} is not attention/variant/readout "
                             f"(e.g. softmax/post_learned/regression)")
    return parts


def _parser() -> cli.Parser:
    p = cli.Parser(prog="python -m bounds.benchmark", description=__doc__.split("\n")[0])
    p.add_argument("--Lmax", type=int, default=4096, help="the largest count swept (default 4096)")
    p.add_argument("--repeat", type=int, default=1, help="runs per cell; the best is reported (default 1)")
    p.add_argument("--cells", nargs="+", default=None, metavar="A/V/R",
                   help="attention/variant/readout triples (default: all 20 cells)")
    return p


def parse(argv):
    args = _parser().parse_args(argv)
    if not 1 <= args.Lmax <= MAX_L:
        raise cli.UsageError(f"--Lmax must be between 1 and {MAX_L}, got {args.Lmax}")
    if not 1 <= args.repeat <= MAX_REPEAT:
        raise cli.UsageError(f"--repeat must be between 1 and {MAX_REPEAT}, got {args.repeat}")
    args.cells = ([_cell(c) for c in args.cells] if args.cells
                  else list(itertools.product(ATTENTIONS, NORMS, READOUTS)))
    return args


def execute(args) -> int:
    worst = 0.0
    cli.emit(f"{'attention':>8} {'variant':>13} {'readout':>15}  {'wall':>9}  {'cpu':>9}")
    for cell in args.cells:
        wall, cpu = time_cell(*cell, args.Lmax, args.repeat)
        target = TARGETS["headline" if cell == HEADLINE else "cell"]
        worst = max(worst, wall / target)
        flag = "ok" if wall <= target else "SLOW"
        cli.emit(f"{cell[0]:>8} {cell[1]:>13} {cell[2]:>15}  {wall:7.2f} s  {cpu:7.2f} s"
                 f"  (target {target:.0f} s wall) {flag}")
    cli.emit(f"worst wall time/target ratio: {worst:.2f}  (cpus: {os.cpu_count()})")
    return 0


def main(argv=None) -> int:
    return cli.run("benchmark", parse, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
