"""Edge inputs of the sweep's newer cells: output directories that refuse every entry, the L*
that a refused cell's line carries, and classification rows without a certified head."""

from __future__ import annotations

import itertools
import json
import os

import pytest

from bounds import lstar, sweep
from bounds.search import classification_row
from constructions import classification, cli
from constructions.cell import ATTENTIONS, NORMS, READOUTS, READS, TASKS, Cell
from constructions.refusals import refusal
from verify.judge import counts_to


def _main(argv, capsys, monkeypatch):
    """The sweep's exit status and its stderr lines, with the work itself forbidden: whatever
    is refused here is refused before any row is computed."""
    def no_work(*args, **kwargs):
        raise AssertionError("the sweep started work")

    monkeypatch.setattr(sweep, "sweep", no_work)
    rc = sweep.main(list(argv))
    captured = capsys.readouterr()
    assert captured.out == ""
    return rc, captured.err.splitlines()


NO_ENTRIES = "/proc"  # a directory in which no file or directory can be made, even by root


@pytest.mark.skipif(not os.path.isdir(NO_ENTRIES), reason="needs /proc")
@pytest.mark.parametrize("option", ["--out", "--save-params"])
@pytest.mark.parametrize("target", ["hostile-out/inner", ""])
def test_an_out_directory_that_takes_no_entry_is_refused_up_front(option, target, capsys,
                                                                   monkeypatch):
    folder = os.path.join(NO_ENTRIES, target) if target else NO_ENTRIES
    rc, err = _main(["--variant", "none", "--attention", "linear", "--task", "select", "--read",
                     "last", "--Lmax", "64", "--jobs", "1", option, folder], capsys, monkeypatch)
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"sweep: error: {option} {folder}")


def test_the_writability_probe_leaves_nothing_behind(tmp_path):
    assert cli.check_out_dir(str(tmp_path)) == str(tmp_path)
    assert cli.check_out_dir(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    assert list(tmp_path.iterdir()) == []  # neither the probes nor the directory to be made


def _refused_cells():
    for att, var, ro, task, read, d, eps in itertools.product(
            ATTENTIONS, NORMS, READOUTS, TASKS, READS, (2, 8), (0.0, 0.01)):
        cell = Cell(att, var, ro, d, eps, task=task, read=read)
        if refusal(cell) is not None:
            yield cell


def _argv(cell: Cell) -> list[str]:
    return ["--attention", cell.attention, "--variant", cell.variant, "--readout", cell.readout,
            "--task", cell.task.name, "--read", cell.read.name, "--d", str(cell.d),
            "--eps", repr(cell.eps), "--Lmax", "4", "--jobs", "1"]


def test_a_refused_cell_names_what_is_known_of_its_l_star(capsys, monkeypatch):
    """Every refused cell is one line, exit status 2; it ends with its L* where
    bounds.lstar.l_star_status knows it (exact, or a proven upper bound), and says nothing of
    an L* where nothing is known."""
    seen = set()
    for cell in _refused_cells():
        rc, err = _main(_argv(cell), capsys, monkeypatch)
        assert rc == 2 and len(err) == 1, (cell, err)
        status, value = lstar.l_star_status(cell)
        seen.add(status)
        if status == "exact":
            assert err[0].endswith(f"; L* = {value} at d = {cell.d}"), err
        elif status == "finite":
            assert err[0].endswith(f"L_star_upper {value})") and f"at most {value}" in err[0], err
        else:
            assert "; L* " not in err[0], err
    assert seen >= {"exact", "finite", "unknown"}  # every case is exercised


def test_the_select_task_beyond_its_count_tasks_l_star_is_bounded_by_it(capsys, monkeypatch):
    """The count task is a sub-task of select: the refused select cell's upper bound is the
    count task's exact L* at the same read (softmax with bare pre-norm read last is built at
    eps = 0, constructions.select_last_bare)."""
    for d, eps, read in ((8, 0.01, "last"), (2, 0.01, "last"), (2, 0.01, "bos")):
        cell = Cell("softmax", "pre_bare", "regression", d, eps, task="select", read=read)
        count = lstar.cell_l_star(cell.replace(task="count"))
        assert count is not None
        rc, err = _main(_argv(cell), capsys, monkeypatch)
        assert rc == 2 and f"L* is finite, at most {count} " in err[0]


def test_a_classification_row_without_a_certified_head_claims_no_infimum(capsys):
    """Post-norm with eps > 0: the unit head is not certified (checked by the judge
    independently), so nothing shows that B_min is an infimum of 0 and the row's B_min is null;
    nothing proves that no head counts either, so the sweep reports no row for L = 4 but lists it
    under ``unreached``; the JSON stays strict.  At eps = 0 the certified head keeps B_min = 0 as
    an infimum."""
    failing = Cell("softmax", "post_bare", "classification", 8, 0.01)
    assert not counts_to(classification.design(failing).build(4), 4, "arb256").counts
    row = classification_row(failing, 4)
    assert row["certified"] is False and row["margin"] is None
    assert row["B_min"] is None and row["B_min_is_infimum"] is False

    rc = sweep.main(["--variant", "post_bare", "--readout", "classification", "--eps", "0.01",
                     "--Lmin", "4", "--Lmax", "4", "--json", "--jobs", "1"])
    out = capsys.readouterr().out
    assert rc == 0

    def refuse(constant):
        raise ValueError(f"non-finite JSON constant {constant}")

    result = json.loads(out, parse_constant=refuse)
    assert result["rows"] == [] and [m["L"] for m in result["unreached"]] == [4]

    good = classification_row(failing.replace(eps=0.0), 4)
    assert good["certified"] is True and good["B_min"] == 0.0 and good["B_min_is_infimum"] is True


def test_a_heads_exact_infimum_is_printed_only_with_exact(tmp_path, capsys):
    """``B_min_exact`` (and the text's ``B_min(L) exactly`` line) come with ``--exact`` only, for
    a classification head as for regression: without it the key is null."""
    from verify import __main__ as verify_cli
    from verify.params_file import to_json

    cell = Cell("linear", "pre_learned", "classification", d=4, task="count", read="last")
    path = tmp_path / "head.json"
    path.write_text(to_json(classification.design(cell).build(5)))
    for extra, exact in (([], None), (["--exact"], "0")):
        assert verify_cli.main(["--params", str(path), "--json", *extra]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["B_min"] == 0.0 and report["B_min_exact"] == exact
        assert verify_cli.main(["--params", str(path), *extra]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert ("B_min(L) exactly: 0" in lines) == (exact is not None)
