"""Command line: do the weights of a parameter file count to L?

    python -m verify --params FILE [--L N] [--task count|select] [--read bos|last] [--exact] [--json]

Prints the verdict (``counts``, ``does not count``, ``cannot certify``), decided in ball
arithmetic, with the worst ``|y - n|`` or the smallest logit margin, ``B(theta)`` and
``B_min(L)`` where it is known (:mod:`verify.report`); the file formats are those of
:mod:`verify.params_file`.  ``--task count`` on a file of the select task judges the count task's
inputs, none of which has a ``b`` token: the file's ``e_b`` is left out, and named in
``ignored`` (JSON; a line of the text).  Exit status 0 when the weights count, 1 when they do not or cannot
be certified, 2 for bad input (one line on stderr).
"""

from __future__ import annotations

import json
import sys

from constructions import cli
from constructions.cell import READS, TASKS
from verify import params_file, report
from verify.judge import MAX_COUNTS, check_cost


def _parser() -> cli.Parser:
    p = cli.Parser(prog="python -m verify", description=__doc__.split("\n")[0])
    p.add_argument("--params", required=True, metavar="FILE",
                   help="the parameter file: JSON (exact decimals), or safetensors if the name "
                        "ends in .safetensors (README, 'Checking your own weights')")
    p.add_argument("--L", type=int, default=None, dest="L",
                   help="judge every count 0..L (required for regression; a classification head "
                        "has one row per count, so L defaults to its rows minus 1 and must match)")
    p.add_argument("--task", choices=tuple(TASKS), default=None,
                   help="override the file's task: count, or select (needs e_b)")
    p.add_argument("--read", choices=tuple(READS), default=None,
                   help="override the file's read position: bos or last")
    p.add_argument("--exact", action="store_true",
                   help="also the exact closed form of B_min(L) (sympy; B_min_exact)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return p


def parse(argv):
    """``(args, params, L, rounded, ignored)``, every check done before any work (``ignored``:
    the file's vectors left out, :func:`verify.params_file.read`)."""
    args = _parser().parse_args(argv)
    if args.L is not None and not 1 <= args.L <= MAX_COUNTS:
        raise cli.UsageError(f"--L must be between 1 and {MAX_COUNTS} (verify.judge.MAX_COUNTS), got {args.L}")
    ignored = []
    params, rounded = params_file.read(args.params, task=args.task, read=args.read, ignored=ignored)
    rows = params.classes
    if rows is None and args.L is None:
        raise cli.UsageError("--L is required for a regression read-out")
    L = rows - 1 if args.L is None else args.L
    if rows is not None and rows != L + 1:
        raise cli.UsageError(f"{args.params}: the classification head has {rows} rows (classes "
                             f"0..{rows - 1}), so it judges L = {rows - 1}, not --L {L}")
    check_cost(params.cell, L, "arb256")
    return args, params, L, rounded, ignored


def execute(parsed) -> int:
    args, params, L, rounded, ignored = parsed
    result = report.check(params, L, rounded, exact=args.exact, ignored=ignored)
    cli.emit(json.dumps({"file": args.params, **result}) if args.json
             else report.text(result, args.params))
    return report.exit_status(result)


def main(argv=None) -> int:
    return cli.run("verify", parse, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
