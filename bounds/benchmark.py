"""Benchmark: wall time of the sweep command for every cell (not a test).

    python -m bounds.benchmark [--Lmax 4096] [--repeat 1] [--cells softmax/post_learned/regression ...]

Each sweep runs as its own process, exactly as a user types it, so the time includes start-up.
Prints one line per cell with the best wall time over ``--repeat`` runs and the targets
(5 s for the headline ``post_learned`` regression sweep, 10 s for every cell).
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import time

from constructions.cell import ATTENTIONS, NORMS, READOUTS


def time_cell(attention: str, norm: str, readout: str, Lmax: int, repeat: int) -> float:
    cmd = [sys.executable, "-m", "bounds.sweep", "--variant", norm, "--attention", attention,
           "--readout", readout, "--Lmax", str(Lmax), "--json"]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bounds.benchmark", description=__doc__.split("\n")[0])
    p.add_argument("--Lmax", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--cells", nargs="*", default=None,
                   help="attention/norm/readout triples (default: all 20)")
    args = p.parse_args(argv)
    cells = ([tuple(c.split("/")) for c in args.cells] if args.cells
             else list(itertools.product(ATTENTIONS, NORMS, READOUTS)))
    worst = 0.0
    for attention, norm, readout in cells:
        seconds = time_cell(attention, norm, readout, args.Lmax, args.repeat)
        target = 5.0 if (attention, norm, readout) == ("softmax", "post_learned", "regression") else 10.0
        worst = max(worst, seconds / target)
        flag = "ok" if seconds <= target else "SLOW"
        print(f"{attention:>8} {norm:>13} {readout:>15}  {seconds:7.2f} s  (target {target:.0f} s) {flag}",
              flush=True)
    print(f"worst time/target ratio: {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
