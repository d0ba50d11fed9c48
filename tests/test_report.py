"""The report: every architecture in the table, its numbers those of the sweep, the figures
written whole (PNG and PDF), bad input refused."""

from __future__ import annotations

import csv
import io
import os

import pytest

from bounds import report, sweep
from constructions.cell import Cell, architectures


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The report at d = 3 to L = 16; the task cells' sweeps (the select task and the last read,
    whose shape searches cost most) only to L = 2, enough for their lines and figure."""
    out = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report, "TASKS_LMAX", 2)
        assert report.main(["--Lmax", "16", "--d", "3", "--out", str(out), "--jobs", "1"]) == 0
    return out


def test_every_architecture_has_a_line(written):
    with open(written / "report.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    every = [report.name(c) for c in architectures(d=3)] + [report.name(c) for c in report.task_cells(3)]
    assert [r["cell"] for r in rows] == every and len(set(every)) == len(every)
    md = (written / "report.md").read_text(encoding="utf-8")
    for r in rows:
        assert f"| {r['cell']} |" in md


def test_the_numbers_are_the_sweeps(written):
    with open(written / "report.csv", encoding="utf-8") as fh:
        rows = {r["cell"]: r for r in csv.DictReader(fh)}
    cell = Cell("softmax", "post_learned", "regression", d=3)
    fresh = sweep.sweep(cell, sweep.grid(2, 16))
    line = rows[report.name(cell)]
    assert float(line["B_min@16"]) == pytest.approx(fresh["rows"][-1]["B_min"], rel=1e-5)
    assert float(line["B_lower@16"]) == pytest.approx(fresh["rows"][-1]["B_lower"], rel=1e-5)
    assert line["certified"] == "True"
    pre = rows[report.name(Cell("softmax", "pre_bare", "regression", d=3))]
    assert int(pre["L_star"]) == sweep.cell_l_star(Cell("softmax", "pre_bare", "regression", d=3))


def test_the_figures_are_whole_files(written):
    for fig in ("bmin", "convergence", "geometry", "lstar", "norm_kinds", "margin", "precision",
                "tasks"):
        assert (written / f"{fig}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        pdf = (written / f"{fig}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and pdf.rstrip().endswith(b"%%EOF")
        assert f"({fig}.png)" in (written / "report.md").read_text(encoding="utf-8")
    assert not [f for f in os.listdir(written) if f.endswith(".partial")]


@pytest.mark.parametrize("argv,message", [
    (["--Lmax", "1"], "--Lmax must be between"),
    (["--d", "2"], "--d must be between 3"),
    (["--jobs", "0"], "--jobs must be >= 1"),
])
def test_bad_input_is_one_line(argv, message, capsys, tmp_path):
    assert report.main(argv + ["--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_the_markdown_table_parses():
    table = [{"cell": "x", "readout": "regression", "exponent": 1.5, "certified": True, "note": None}]
    text = report.markdown(table, ["bmin"])
    lines = [ln for ln in io.StringIO(text).read().splitlines() if ln.startswith("|")]
    assert lines[0] == "| cell | exponent | certified | note |"
    assert lines[2] == "| x | 1.5 | yes |  |"
