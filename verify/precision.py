"""Command line: the precision wall of a cell in each real number format.

    python -m verify.precision --variant V [--attention A] [--readout R] [--norm K] [--affine F]
        [--eps E] [--d D] [--Lmax N] [--accumulate float32] [--json] [--quiet]

For each format (float8_e4m3fn, float8_e5m2, bfloat16, float16, float32, float64) the largest
count the cell reaches when its whole forward pass runs in that format (the rounded pass of
:mod:`verify.rounded`), for the construction at ``B_min`` and for the best budget of its
family, with the reason it stops (:mod:`verify.walls`).  ``--accumulate float32`` keeps sums,
the softmax and the norm statistics in float32 and stores in the format.

The wall search needs ``B_min(L)``; ``bounds.search`` certifies it, but ``verify`` may not
import ``bounds`` (data flows constructions -> verify -> bounds), so the walls take the same
construction at ``(1 + RTOL) B_min`` with ``B_min`` from the closed forms or the float64
estimate of :mod:`constructions.regression` (:class:`verify.walls.Budgets`); the
construction's margin at that budget is about ``RTOL`` (the sweep's tolerance) either way.
"""

from __future__ import annotations

import json
import sys

from constructions import cli
from constructions.cell import ATTENTIONS, KINDS, NORMS, READOUTS, Cell
from verify import walls as W
from verify.formats import ACCUMULATE, FORMATS, Arith
from verify.rounded import MAX_PASS_ENTRIES

PROG = "python -m verify.precision"
#: the default largest count
DEFAULT_LMAX = 1024


def _parser() -> cli.Parser:
    p = cli.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True, choices=NORMS,
                   help="norm placement: none, pre_bare, pre_learned, post_bare, post_learned")
    p.add_argument("--attention", choices=ATTENTIONS, default="softmax", help="softmax (default) or linear")
    p.add_argument("--readout", choices=READOUTS, default="regression",
                   help="regression (default) or classification")
    p.add_argument("--norm", choices=tuple(KINDS), default="layernorm", help="layernorm (default) or rmsnorm")
    p.add_argument("--affine", choices=("gain", "gain_bias"), default=None,
                   help="the affine of a learned variant (default: the kind's usual one)")
    p.add_argument("--eps", type=cli.nonnegative_float, default=0.0, help="the norm epsilon (default 0)")
    p.add_argument("--d", type=int, default=8, help="the width d (default 8)")
    p.add_argument("--Lmax", type=int, default=DEFAULT_LMAX,
                   help=f"the largest count of the grid (default {DEFAULT_LMAX}; every L up to it)")
    p.add_argument("--accumulate", choices=ACCUMULATE, default=None,
                   help="accumulate sums, the softmax and the norm statistics in this format")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def parse(argv):
    args = _parser().parse_args(argv)
    cell = Cell(args.attention, args.variant, args.readout, d=args.d, eps=args.eps, norm=args.norm,
                affine=args.affine)
    limit = W.MAX_LMAX[cell.readout]
    if args.Lmax < 1:
        raise cli.UsageError(f"--Lmax must be at least 1, got {args.Lmax}")
    if args.Lmax > limit:
        raise cli.UsageError(f"--Lmax {args.Lmax} is beyond the limit {limit} for {cell.readout} "
                             f"(verify.walls.MAX_LMAX)")
    if cell.readout == "classification" and args.Lmax < 2:
        raise cli.UsageError("--Lmax must be at least 2 for classification (a head has L + 1 >= 2 classes)")
    if (args.Lmax + 1) * cell.d > MAX_PASS_ENTRIES:
        raise cli.UsageError(f"--Lmax {args.Lmax} at d = {cell.d} needs passes of (Lmax+1) d = "
                             f"{(args.Lmax + 1) * cell.d} numbers, beyond verify.rounded.MAX_PASS_ENTRIES "
                             f"= {MAX_PASS_ENTRIES}")
    if cell.readout == "regression":
        from constructions.regression import design
        design(cell)  # a cell without a construction is bad input (ValueError: one line)
    else:
        from constructions.classification import design, check_size
        design(cell)
        check_size(cell, args.Lmax)
    return args, cell


def _progress(args):
    if args.quiet or not sys.stderr.isatty():
        return None
    from tqdm import tqdm
    return lambda total: tqdm(total=total, file=sys.stderr, leave=False, unit="L")


def report(cell: Cell, Lmax: int, accumulate=None, progress=None) -> dict:
    """The command's JSON object (module docstring)."""
    ariths = {f.name: Arith.of(f, accumulate) for f in FORMATS}
    rows = None
    if cell.readout == "regression":
        found = W.regression_walls(cell, Lmax, ariths, progress)
    else:
        found, rows = W.classification_walls(cell, Lmax, ariths, progress)
    formats = {}
    for name, w in found.items():
        ar = ariths[name]
        formats[name] = {
            "L_wall_construction": w.construction, "L_wall_best": w.best, "reason": w.reason,
            "detail": w.detail, "reason_construction": w.construction_reason,
            "detail_construction": w.construction_detail,
            "L_last_construction": w.last_construction,
            "construction_failure": w.construction_failure, "best_member": w.member,
            "members_tried": w.tried, "bits": w.fmt.bits, "integer_ceiling": w.fmt.integer_ceiling,
            "work_format": ar.work.name,
        }
    out = dict(cell.keys())
    out.update(Lmax=Lmax, accumulate=accumulate, rtol=W.RTOL, formats=formats)
    if rows is not None:
        out["rows"] = rows
    return out


def table(result: dict, cell: Cell) -> str:
    head = (f"{cell.describe()}, every L <= {result['Lmax']}"
            + (f", accumulating in {result['accumulate']}" if result["accumulate"] else ""))
    lines = [head, f"{'format':<14} {'bits':>4} {'2^p':>16} {'construction':>12} {'best':>6}  reason"]
    for name, f in result["formats"].items():
        lines.append(f"{name:<14} {f['bits']:>4} {f['integer_ceiling']:>16} {f['L_wall_construction']:>12} "
                     f"{f['L_wall_best']:>6}  {f['reason']}: {f['detail']}")
    for row in result.get("rows", []):
        lines.append(f"  L = {row['L']}: margin {row['margin']:.4g}, largest logit {row['logit_scale']:.4g}, "
                     f"bits needed ~{row['bits_needed']}")
    return "\n".join(lines)


def execute(parsed) -> int:
    args, cell = parsed
    result = report(cell, args.Lmax, args.accumulate, _progress(args))
    cli.emit(json.dumps(result) if args.json else table(result, cell))
    return 0


def main(argv=None) -> int:
    return cli.run(PROG, parse, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
