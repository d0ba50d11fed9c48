"""Command line: the report of every cell -- a table and the figures a paper needs.

    python -m bounds.report [--Lmax 4096] [--d 8] [--out DIR] [--jobs J] [--quiet]

Sweeps every architecture (:func:`constructions.cell.architectures`: attention x placement x
norm kind x affine x read-out) at width ``d`` over the sweep's grid to ``Lmax`` and writes, into
``DIR`` (default ``report``), atomically as one set:

* ``report.md`` and ``report.csv`` -- one line per cell: the fitted exponent with its 95%
  interval, the theory exponent, ``B_min`` and ``B_lower`` at a few ``L``, ``L*``, the storage
  and the margin of classification, whether every ``L`` of the grid is answered (certified, or
  null by a proof that nothing counts) and the ``L`` that are not (``unreached``);
* figures, each as PNG and PDF: ``bmin`` (``B_min`` against ``L`` for every regression cell,
  with the fitted and the theory slopes), ``convergence`` (``B_min / (c L^p)`` against ``L``,
  converging to 1, with the exact leading constants), ``geometry`` (the read-out
  representation ``z(n)`` of each placement on its principal plane), ``lstar`` (``L*(d)`` of
  bare pre-norm), ``norm_kinds`` (RMSNorm against LayerNorm), ``margin`` (the classification
  margins and their proven upper bounds), ``precision`` (the precision walls of each number
  format, :mod:`verify.precision`), ``tasks`` (the select task and the last-position read
  against plain counting, for the cells built for them).

The Markdown table is also printed on stdout.  Every number comes from the sweep
(:func:`bounds.sweep.sweep`), so the report says what the sweep says.
"""

from __future__ import annotations

import csv
import io
import sys

import numpy as np

from bounds import sweep as sweeping
from bounds.lstar import l_star
from constructions import cli, progress, regression, tasks
from constructions.cell import MAX_D, Cell, architectures
from verify import precision, reduced

#: the counts of the table's B_min / B_lower columns (those in the grid)
TABLE_L = (16, 256, 4096)
#: the widths of the L*(d) figure
LSTAR_D = tuple(range(2, 33))
#: the count up to which the geometry figure draws z(n)
GEOMETRY_L = 16
#: the largest count of the precision walls (every L up to it) and of the task sweeps (the
#: select task has about L^2/2 inputs)
PRECISION_LMAX = 256
TASKS_LMAX = 256
#: the cells of the precision figure: softmax regression at each placement
PRECISION_VARIANTS = ("none", "pre_bare", "pre_learned", "post_bare", "post_learned")


def _parser() -> cli.Parser:
    p = cli.Parser(prog="python -m bounds.report", description=__doc__.split("\n")[0])
    p.add_argument("--Lmax", type=int, default=4096, help="the largest count of every sweep (default 4096)")
    p.add_argument("--d", type=int, default=8, help="the width d of every cell (default 8)")
    p.add_argument("--out", default="report", metavar="DIR",
                   help="the folder of the report (default: report), written atomically")
    p.add_argument("--jobs", type=int, default=None,
                   help="worker processes for the rows of each sweep (default: the number of CPUs)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def parse(argv):
    args = _parser().parse_args(argv)
    if not 2 <= args.Lmax <= sweeping.MAX_L:
        raise cli.UsageError(f"--Lmax must be between 2 and {sweeping.MAX_L}, got {args.Lmax}")
    if not 3 <= args.d <= MAX_D:
        raise cli.UsageError(f"--d must be between 3 and {MAX_D} (post-norm needs d >= 3), got {args.d}")
    if args.jobs is not None and args.jobs < 1:
        raise cli.UsageError(f"--jobs must be >= 1, got {args.jobs}")
    cli.check_out_dir(args.out)
    return args


def name(cell: Cell) -> str:
    """A short label: ``attention/variant[ kind affine]/readout[ task/read]`` (the task and the
    read position where they are not the count task read at ``s``)."""
    norm = "" if not cell.normed else f" {cell.kind.name} {cell.affine.name}"
    task = ("" if (cell.task.name, cell.read.name) == ("count", "bos")
            else f" {cell.task.name}/{cell.read.name}")
    return f"{cell.attention}/{cell.variant}{norm}/{cell.readout}{task}"


def _sweep(cell: Cell, Lmax: int, jobs: int | None):
    """``(sweep result, None)``, or ``(None, why not)`` where the sweep refuses the cell."""
    argv = ["--variant", cell.variant, "--attention", cell.attention, "--readout", cell.readout,
            "--norm", cell.kind.name, "--Lmax", str(Lmax), "--d", str(cell.d),
            "--task", cell.task.name, "--read", cell.read.name]
    argv += ["--affine", cell.affine.name] if cell.learned else []
    argv += [] if jobs is None else ["--jobs", str(jobs)]
    try:
        args, cell, Ls = sweeping.parse(argv)  # the sweep's own up-front checks
    except (cli.UsageError, ValueError) as exc:
        return None, str(exc)
    return sweeping.sweep(cell, Ls, jobs=args.jobs), None


def run_cells(cells, Lmax: int, jobs: int | None, bar=None) -> list[tuple[Cell, dict | None, str | None]]:
    """``(cell, sweep result or None, why not)`` for each cell."""
    out = []
    for cell in cells:
        out.append((cell, *_sweep(cell, Lmax, jobs)))
        if bar is not None:
            bar.advance()
    return out


def task_cells(d: int) -> list[Cell]:
    """The regression cells built for the select task or the last read
    (:func:`constructions.tasks.refusal`)."""
    return [c for task, read in (("select", "bos"), ("count", "last"), ("select", "last"))
            for c in architectures(readouts=("regression",), d=d, task=task, read=read)
            if tasks.refusal(c) is None]


def _at(rows, L, key):
    row = next((r for r in rows if r["L"] == L), None)
    return None if row is None else row.get(key)


def _num(x, spec="{:.6g}"):
    return "" if x is None else spec.format(x)


def table_rows(results) -> list[dict]:
    """One flat dict per cell (the columns of ``report.csv`` and ``report.md``)."""
    table = []
    for cell, res, why in results:
        entry = {"cell": name(cell), "readout": cell.readout}
        if res is None:
            entry["note"] = why
            table.append(entry)
            continue
        rows, f, missed = res["rows"], res["fit"], res["unreached"]
        swept = {r["L"] for r in rows} | {m["L"] for m in missed}
        Ls = [L for L in TABLE_L if L in swept]
        entry.update(exponent=f["exponent"], ci95_low=(f["ci95"] or [None, None])[0],
                     ci95_high=(f["ci95"] or [None, None])[1], theory=f["theory"],
                     L_star=res["L_star"],
                     # every row is certified or null by a proof (bounds.sweep.summary): every L
                     # of the grid is answered unless one is unreached
                     certified=not missed,
                     unreached=" ".join(str(m["L"]) for m in missed) or None)
        lead = f.get("leading_constant")
        if cell.readout == "regression":
            entry.update(leading_constant=lead and lead["exact"], c_value=lead and lead["value"],
                         ratio_at_Lmax=lead and lead["ratio"])
            for L in Ls:
                entry[f"B_min@{L}"] = _at(rows, L, "B_min")
                entry[f"B_lower@{L}"] = _at(rows, L, "B_lower")
        else:
            top = rows[-1]["L"]
            entry.update({f"margin@{top}": _at(rows, top, "margin"),
                          f"margin_upper@{top}": _at(rows, top, "margin_upper"),
                          f"storage@{top}": _at(rows, top, "storage")})
        notes = sorted({r["note"] for r in rows if r.get("note") and r["L"] > 1}
                       | {f"L = {m['L']} unreached: {m['reason']}" for m in missed})
        if notes:
            entry["note"] = "; ".join(notes)
        table.append(entry)
    return table


def _columns(table) -> list[str]:
    cols = []
    for entry in table:
        cols += [k for k in entry if k not in cols]
    return [c for c in cols if c != "note"] + ["note"]


def csv_text(table) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_columns(table))
    writer.writeheader()
    writer.writerows(table)
    return buf.getvalue()


def markdown(table, figures) -> str:
    lines = []
    for readout in ("regression", "classification"):
        part = [e for e in table if e["readout"] == readout]
        cols = [c for c in _columns(part) if c != "readout"]
        lines += [f"## {readout.capitalize()}", "", "| " + " | ".join(cols) + " |",
                  "|" + "---|" * len(cols)]
        for e in part:
            cells = []
            for c in cols:
                v = e.get(c)
                cells.append("" if v is None else ("yes" if v is True else "no" if v is False
                                                   else _num(v) if isinstance(v, float) else str(v)))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Figures", ""] + [f"![{f}]({f}.png) ([PDF]({f}.pdf))" for f in figures]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------- figures


def _figure(rows=1, cols=1, size=(6.4, 4.8)):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, layout="constrained")
    for ax in axes.flat:  # up to 20 distinguishable series per panel
        ax.set_prop_cycle(color=plt.cm.tab20.colors)
    return fig, axes


def _label(ax, title: str, ylabel: str, grid: str = "both", xlabel: str = "L", fontsize: int = 7,
           **legend) -> None:
    """Title, axis labels, a light grid and the legend of one panel."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which=grid, alpha=0.3)
    ax.legend(fontsize=fontsize, **legend)


def _save(fig) -> dict[str, bytes]:
    from matplotlib import pyplot as plt

    out = {}
    for fmt in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=150, bbox_inches="tight",
                    metadata={"CreationDate": None} if fmt == "pdf" else None)
        out[fmt] = buf.getvalue()
    plt.close(fig)
    return out


def _series(res, key):
    pts = [(r["L"], r[key]) for r in res["rows"] if r.get("certified") and r.get(key)]
    return np.array(pts, dtype=float).reshape(-1, 2)


def _slope_line(ax, pts, slope, L_from, style, color):
    """A line of ``slope`` on log-log axes through the geometric mean of the points at
    ``L >= L_from`` (for the fitted slope this is the least-squares line), over those ``L``."""
    sel = pts[pts[:, 0] >= L_from]
    if slope is None or len(sel) == 0:
        return
    x0, y0 = np.exp(np.log(sel[:, 0]).mean()), np.exp(np.log(sel[:, 1]).mean())
    xs = np.array([sel[0, 0], sel[-1, 0]])
    ax.plot(xs, y0 * (xs / x0) ** float(slope), style, color=color, lw=1.6, alpha=0.8)


def figure_bmin(results):
    fig, axes = _figure(2, 2, (12, 9))
    for i, attention in enumerate(("softmax", "linear")):
        for j, kind in enumerate(("layernorm", "rmsnorm")):
            ax = axes[i][j]
            for cell, res, _ in results:
                if (res is None or cell.readout != "regression" or cell.attention != attention
                        or (cell.normed and cell.kind.name != kind)):
                    continue
                pts = _series(res, "B_min")
                if len(pts) < 2:
                    continue
                label = name(cell).split("/", 1)[1].rsplit("/", 1)[0]
                f = res["fit"]
                fitted = "-" if f["exponent"] is None else f"{f['exponent']:.3f}"
                theory = (f"theory {f['theory']:g}" if f["theory"] is not None
                          else f"L* = {res['L_star']}" if res["L_star"] else "no power law")
                (line,) = ax.loglog(pts[:, 0], pts[:, 1], "o", ms=3,
                                    label=f"{label}: fit {fitted}, {theory}")
                _slope_line(ax, pts, f["exponent"], f["L_from"], "--", line.get_color())
                _slope_line(ax, pts, f["theory"], f["L_from"], ":", line.get_color())
            _label(ax, f"{attention} attention, {kind}", "certified B_min(L)", grid="major",
                   xlabel="L (largest count)", loc="upper left")
    fig.suptitle("Certified B_min against L (regression read-out): points; dashed: the fitted "
                 "power law, dotted: the theory exponent (both over the fit's range L >= 64)")
    return _save(fig)


def figure_convergence(results):
    """``B_min / (c L^p)`` with the exact leading constant of each regression cell."""
    fig, axes = _figure(1, 2, (13, 5))
    for ax, attention in zip(axes[0], ("softmax", "linear")):
        for cell, res, _ in results:
            lead = res and res["fit"].get("leading_constant")
            if not lead or cell.readout != "regression" or cell.attention != attention:
                continue
            pts = _series(res, "B_min")
            ratio = pts[:, 1] / (lead["value"] * pts[:, 0] ** lead["exponent_value"])
            ax.semilogx(pts[:, 0], ratio, "o-", ms=3, lw=1,
                        label=f"{name(cell).split('/', 1)[1].rsplit('/', 1)[0]}: c = {lead['exact']}")
        ax.axhline(1.0, color="0.3", lw=0.8)
        _label(ax, f"{attention} attention: B_min / (c(d) L^p)", "certified B_min over its leading term")
    return _save(fig)


def figure_geometry(d: int):
    """``z(n)``, ``n = 0..GEOMETRY_L``, of the optimal softmax construction of each placement
    (no norm: the Mobius segment; bare pre-norm: the bounded segment; post-norm: the arc), on
    the plane of its two principal directions."""
    fig, axes = _figure(1, 3, (15, 4.6))
    cases = [("none", "no norm: the segment"), ("pre_bare", "bare pre-norm: the bounded segment"),
             ("post_bare", "bare post-norm: the arc")]
    for ax, (variant, title) in zip(axes[0], cases):
        cell = Cell("softmax", variant, "regression", d=d)
        L = min(GEOMETRY_L, l_star(d)) if variant == "pre_bare" else GEOMETRY_L
        design = regression.design(cell)
        params = design.build(L, design.estimate(L) * (1 + 1e-3))
        z = np.asarray(reduced(params, np.arange(L + 1), readout=False), dtype=float)
        centred = z - z.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        xy = centred @ vt[:2].T
        ax.plot(xy[:, 0], xy[:, 1], "-", color="0.7", lw=0.8)
        sc = ax.scatter(xy[:, 0], xy[:, 1], c=np.arange(L + 1), cmap="viridis", s=18, zorder=3)
        for n in sorted({0, L // 2, L}):
            ax.annotate(f"n={n}", xy[n], textcoords="offset points", xytext=(0, 8), fontsize=8,
                        ha="center")
        ax.margins(0.12)
        ax.set_title(f"{title} (L = {L})", fontsize=10)
        ax.set_xlabel("first principal direction")
        ax.set_ylabel("second principal direction")
        ax.set_aspect("equal", adjustable="datalim")
        fig.colorbar(sc, ax=ax, label="count n")
    fig.suptitle(f"The read-out representation z(n) of the softmax constructions (d = {d})")
    return _save(fig)


def figure_lstar():
    fig, axes = _figure()
    ax = axes[0][0]
    values = [l_star(d) for d in LSTAR_D]
    ax.semilogy(LSTAR_D, values, "o-", ms=3)
    ax.set_xlabel("width d")
    ax.set_ylabel("L*(d): the largest countable L")
    ax.set_title("Bare pre-norm (softmax, LayerNorm or RMSNorm): L*(d)")
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig)


def figure_norm_kinds(results):
    """``B_min`` of each RMSNorm regression cell over that of its LayerNorm twin."""
    fig, axes = _figure(1, 1, (8, 5))
    ax = axes[0][0]
    by = {(c.attention, c.variant, c.kind.name, c.affine.name, c.readout): r for c, r, _ in results}
    for (attention, variant, kind, affine, readout), res in by.items():
        twin = by.get((attention, variant, "layernorm", affine, readout))
        if kind != "rmsnorm" or readout != "regression" or res is None or twin is None:
            continue
        mine, theirs = dict(map(tuple, _series(res, "B_min"))), dict(map(tuple, _series(twin, "B_min")))
        Ls = sorted(set(mine) & set(theirs))
        if Ls:
            ax.semilogx(Ls, [mine[L] / theirs[L] for L in Ls], "o-", ms=3,
                        label=f"{attention}/{variant} {affine}")
    ax.axhline(1.0, color="0.5", lw=0.8)
    _label(ax, "RMSNorm against LayerNorm, same placement and affine",
           "B_min(RMSNorm) / B_min(LayerNorm)", fontsize=8)
    return _save(fig)


def figure_margin(results):
    fig, axes = _figure(1, 2, (12, 4.8))
    for ax, attention in zip(axes[0], ("softmax", "linear")):
        for cell, res, _ in results:
            if res is None or cell.readout != "classification" or cell.attention != attention:
                continue
            pts = _series(res, "margin")
            if len(pts) >= 2:
                (line,) = ax.loglog(pts[:, 0], pts[:, 1], "o-", ms=3, lw=1,
                                    label=name(cell).split("/", 1)[1].rsplit("/", 1)[0])
                up = _series(res, "margin_upper")
                if len(up):
                    ax.loglog(up[:, 0], up[:, 1], ":", lw=1, color=line.get_color())
        _label(ax, f"{attention} attention: certified margin (dotted: proven upper bound)",
               "smallest logit margin", grid="major")
    return _save(fig)


def precision_walls(d: int, Lmax: int) -> dict[str, dict]:
    """The precision walls (:func:`verify.precision.report`) of the softmax regression cells of
    :data:`PRECISION_VARIANTS` at width ``d``, every ``L`` up to ``Lmax``."""
    return {v: precision.report(Cell("softmax", v, "regression", d=d), Lmax)
            for v in PRECISION_VARIANTS}


def figure_precision(walls):
    fig, axes = _figure(1, 1, (11, 5))
    ax = axes[0][0]
    formats = list(next(iter(walls.values()))["formats"])
    width = 0.8 / len(walls)
    for k, (variant, result) in enumerate(walls.items()):
        best = [max(result["formats"][f]["L_wall_best"], 0.5) for f in formats]  # 0 on a log axis
        ax.bar(np.arange(len(formats)) + (k - (len(walls) - 1) / 2) * width, best, width,
               label=f"softmax/{variant}")
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(formats)), formats)
    ax.set_ylabel(f"largest L counted (best budget; every L to {result['Lmax']})")
    ax.set_title("The precision wall: the whole forward pass rounded to each format (regression)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig)


def figure_tasks(task_results, results):
    """``B_min`` of each cell built for the select task or the last read over the same cell's
    plain counting (the count task read at ``s``): one panel per task and read position (more
    than 20 series in a panel repeat the colours with another line style)."""
    plain = {(c.attention, c.variant, c.kind.name, c.affine.name): r for c, r, _ in results
             if c.readout == "regression"}
    panels: dict[tuple[str, str], list] = {}
    for cell, res, _ in task_results:
        twin = plain.get((cell.attention, cell.variant, cell.kind.name, cell.affine.name))
        if res is None or twin is None:
            continue
        mine, theirs = dict(map(tuple, _series(res, "B_min"))), dict(map(tuple, _series(twin, "B_min")))
        Ls = sorted(set(mine) & set(theirs))
        if Ls:
            label = name(cell).replace("/regression", "")
            panels.setdefault((cell.task.name, cell.read.name), []).append(
                (label, Ls, [mine[L] / theirs[L] for L in Ls]))
    keys = sorted(panels) or [("select", "bos")]
    fig, axes = _figure(len(keys), 1, (13, 5 * len(keys)))
    for ax, key in zip(axes[:, 0], keys):
        series = panels.get(key, [])
        for i, (label, Ls, ratio) in enumerate(series):
            ax.semilogx(Ls, ratio, "o", ls=("-", "--", ":")[i // 20 % 3], ms=3, lw=1, label=label)
        ax.axhline(1.0, color="0.3", lw=0.8, label="plain counting")
        _label(ax, f"The {key[0]} task read at {key[1]} against plain counting",
               "B_min(task, read) / B_min(count, bos)", loc="upper left", bbox_to_anchor=(1.02, 1.0),
               ncol=2 if len(series) > 24 else 1)
    return _save(fig)


def figures(results, task_results, walls, d: int) -> dict[str, dict[str, bytes]]:
    return {"bmin": figure_bmin(results), "convergence": figure_convergence(results),
            "geometry": figure_geometry(d), "lstar": figure_lstar(),
            "norm_kinds": figure_norm_kinds(results), "margin": figure_margin(results),
            "precision": figure_precision(walls), "tasks": figure_tasks(task_results, results)}


def execute(args) -> int:
    cells, extra = architectures(d=args.d), task_cells(args.d)
    with progress.Bar(len(cells) + len(extra) + 1, "report", args.quiet) as bar:
        results = run_cells(cells, args.Lmax, args.jobs, bar)
        task_results = run_cells(extra, min(args.Lmax, TASKS_LMAX), args.jobs, bar)
        walls = precision_walls(args.d, min(args.Lmax, PRECISION_LMAX))
        bar.advance()
    table = table_rows(results + task_results)
    drawn = figures(results, task_results, walls, args.d)
    text = markdown(table, list(drawn))
    files = {"report.md": text, "report.csv": csv_text(table)}
    for fig, formats in drawn.items():
        files.update({f"{fig}.{fmt}": data for fmt, data in formats.items()})
    cli.write_files(args.out, files)
    cli.emit(text)
    return 0


def main(argv=None) -> int:
    return cli.run("report", parse, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
