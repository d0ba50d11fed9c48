"""What a sweep row claims: a null ``B_min`` only where a proof says that nothing counts
(``L > L*``); every other ``L`` without a certified parameter set is listed under ``unreached``
and is no row of the JSON, the table, the CSV, the saved parameters or the fit."""

from __future__ import annotations

import csv
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import grid, report, search, sweep
from bounds.lstar import cell_l_star
from constructions import cli
from constructions.cell import Cell

#: softmax after bare post-RMSNorm at d = 4, eps = 0.1: rows at L = 2, 4; at L = 8 read at s the
#: bisection of the carried construction never counts, read last the tilt has no room
EPS = ["--variant", "post_bare", "--norm", "rmsnorm", "--d", "4", "--eps", "0.1", "--jobs", "1",
       "--quiet"]


def _strict(text: str):
    def bad(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=bad)


def _main(capsys, *argv):
    rc = sweep.main([*EPS, *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _no_claim_without_proof(result: dict) -> None:
    """Every row certified or beyond ``L*``; the rows and the unreached ``L`` are disjoint."""
    star = result["L_star"]
    for r in result["rows"]:
        assert r["certified"] or (star is not None and r["L"] > star and r["B_min"] is None)
    assert not {r["L"] for r in result["rows"]} & {m["L"] for m in result["unreached"]}


@pytest.fixture(scope="module")
def last_read(tmp_path_factory):
    """The last read to L = 8 with --json, --out and --save-params, then as a table."""
    folder, params = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("params")
    capture = pytest.MonkeyPatch()
    outputs = []
    with capture.context() as m:
        for extra in (["--json", "--out", str(folder), "--save-params", str(params)], []):
            lines = []
            m.setattr(cli, "emit", lines.append)
            assert sweep.main([*EPS, "--read", "last", "--Lmax", "8", *extra]) == 0
            outputs.append(lines[0])
    return _strict(outputs[0]), outputs[1], folder, params


def test_an_unreached_l_is_no_row_and_is_listed_with_its_reason(last_read):
    result, _, _, _ = last_read
    _no_claim_without_proof(result)
    assert [r["L"] for r in result["rows"]] == [2, 4]
    assert all(r["certified"] and r["B_min"] > 0 for r in result["rows"])
    (missed,) = result["unreached"]
    assert missed["L"] == 8 and "the lifted arc" in missed["reason"] and "L = 8" in missed["reason"]
    assert result["fit"]["points"] == 0  # the fit counts the certified rows only (none >= 64)


def test_out_save_params_and_the_table_agree_with_the_json(last_read):
    result, text, folder, params = last_read
    with open(folder / "sweep.json") as fh:
        written = _strict(fh.read())
    assert written["unreached"] == result["unreached"]
    assert [r["L"] for r in written["rows"]] == [r["L"] for r in result["rows"]]
    with open(folder / "sweep.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["L"]) for r in rows] == [r["L"] for r in result["rows"]]
    assert sorted(p.name for p in params.iterdir() if p.suffix == ".json") == ["L2.json", "L4.json"]
    lines = text.splitlines()
    starts = [line.split()[0] for line in lines if line.startswith(" ") and line.split()[0].isdigit()]
    assert starts == ["2", "4"]
    (line,) = [line for line in lines if line.startswith("unreached")]
    assert f"L = 8: {result['unreached'][0]['reason']}" in line
    assert lines.index(line) == lines.index(next(l for l in lines if l.startswith("fit"))) - 1


def test_a_bisection_that_never_counts_at_eps_above_zero_is_unreached(capsys):
    rc, out, err = _main(capsys, "--Lmin", "4", "--Lmax", "8", "--json")
    assert rc == 0, err
    result = _strict(out)
    _no_claim_without_proof(result)
    assert [r["L"] for r in result["rows"]] == [4]
    (missed,) = result["unreached"]
    assert missed["L"] == 8 and "does not count up to B" in missed["reason"]


def test_every_l_unreached_gives_no_rows_exit_zero_and_says_why(capsys):
    rc, out, err = _main(capsys, "--read", "last", "--Lmin", "8", "--Lmax", "16", "--json")
    assert rc == 0, err
    result = _strict(out)
    assert result["rows"] == [] and [m["L"] for m in result["unreached"]] == [8, 16]
    assert all("the lifted arc" in m["reason"] for m in result["unreached"])
    assert result["fit"]["exponent"] is None and result["fit"]["points"] == 0
    rc, out, _ = _main(capsys, "--read", "last", "--Lmin", "8", "--Lmax", "16")
    assert rc == 0 and "unreached" in out and "L = 8" in out and "L = 16" in out


def test_beyond_l_star_the_rows_stay_null(capsys):
    """Bare pre-LayerNorm at d = 3 (L* = 12): L = 16 is a null row, with the proof's reason."""
    assert sweep.main(["--variant", "pre_bare", "--d", "3", "--Lmin", "8", "--Lmax", "16",
                       "--json", "--jobs", "1", "--quiet"]) == 0
    result = _strict(capsys.readouterr().out)
    assert result["L_star"] == 12 and result["unreached"] == []
    _no_claim_without_proof(result)
    eight, sixteen = result["rows"]
    assert eight["certified"] and eight["B_min"] > 0
    assert sixteen["B_min"] is None and sixteen["B_lower"] is None and "L* = 12" in sixteen["note"]


def test_a_classification_head_not_certified_is_unreached(capsys):
    """Post-LayerNorm with eps > 0: the unit head is not certified at L = 4, and nothing proves
    that no head counts there."""
    assert sweep.main(["--variant", "post_bare", "--readout", "classification", "--eps", "0.01",
                       "--Lmin", "4", "--Lmax", "4", "--json", "--jobs", "1", "--quiet"]) == 0
    result = _strict(capsys.readouterr().out)
    assert result["rows"] == []
    (missed,) = result["unreached"]
    assert missed["L"] == 4 and "cannot certify" in missed["reason"]


def _never_counts(params, L, backend="float64"):
    return False


def test_a_bisection_that_never_counts_at_eps_zero_is_a_failure(monkeypatch, capsys):
    """At eps = 0 the construction counts above its estimate: a bisection that never counts
    contradicts it (here forced by a screen that never counts) and stops the sweep, exit 1."""
    monkeypatch.setattr(search, "_screen", _never_counts)
    cell = Cell("softmax", "none", "regression", d=4)
    with pytest.raises(cli.Failure, match="does not count up to B"):
        search.regression_row(cell, 4, lower=False, closed=False)
    carried = cell.replace(eps=0.1)
    row = search.regression_row(carried, 4, lower=False, closed=False)
    assert row["B_min"] is None and search.unreached(carried, row) == row["note"]
    assert sweep.main(["--variant", "none", "--d", "4", "--Lmin", "4", "--Lmax", "4", "--json",
                       "--jobs", "1", "--quiet"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "does not count up to B" in captured.err and "Traceback" not in captured.err


def test_the_grid_lists_the_unreached_l_with_their_cell(tmp_path, capsys):
    argv = ["--variant", "post_bare", "--norm", "rmsnorm", "--d", "4", "--eps", "0.1", "--read",
            "last", "--Lmin", "8", "--Lmax", "8", "--jobs", "1", "--quiet",
            "--out", str(tmp_path / "store")]
    assert grid.main([*argv, "--json"]) == 0
    result = _strict(capsys.readouterr().out)
    (missed,) = result["unreached"]
    assert result["rows"] == [] and missed["L"] == 8 and missed["norm"] == "rmsnorm"
    assert "the lifted arc" in missed["reason"]
    assert grid.main(argv) == 0  # the table of the stored row
    assert any(line.startswith("unreached, not a row") and "L = 8" in line
               for line in capsys.readouterr().out.splitlines())


def test_the_report_line_says_which_l_are_unreached(last_read):
    result, _, _, _ = last_read
    cell = Cell("softmax", "post_bare", "regression", d=4, eps=0.1, norm="rmsnorm", read="last")
    (entry,) = report.table_rows([(cell, result, None)])
    assert entry["certified"] is False and entry["unreached"] == "8"
    assert "L = 8 unreached: " in entry["note"]


# ------------------------------------------------------------------ the rule, on any rows

PRE = Cell("softmax", "pre_bare", "regression", d=3)  # L* = 12


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.integers(1, 20), st.floats(1.0, 100.0) | st.none(), min_size=1))
def test_summary_reports_a_row_only_with_a_value_or_a_proof(values):
    """Any rows (a value: certified; None: not, with a note; beyond L* never a value): every L
    is a row or unreached, never both; a row is certified or beyond L*; an L is unreached
    exactly where it has no value, no larger L has one (the envelope) and L <= L*."""
    star = cell_l_star(PRE)
    rows = []
    for L in sorted(values):
        v = values[L] if L <= star else None
        rows.append({"L": L, "B_min": v, "B_lower": None, "certified": v is not None,
                     **({} if v is not None else {"note": f"nothing at {L}"})})
    out = sweep.summary(PRE, rows, fit_from=2)
    _no_claim_without_proof(out)
    shown, missed = [r["L"] for r in out["rows"]], [m["L"] for m in out["unreached"]]
    assert sorted(shown + missed) == sorted(values)
    valued = [r["L"] for r in rows if r["certified"]]
    assert missed == [L for L in sorted(values)
                      if L <= star and not any(V >= L for V in valued)]
    assert all(m["reason"] == f"nothing at {m['L']}" for m in out["unreached"])
