"""The command ``python -m bounds.sweep``: output contract, grid, files and bad input."""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import signal
import subprocess
import sys
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import sweep as sweep_mod
from bounds.fit import fit, theory_exponent
from bounds.lstar import l_star
from constructions.cell import Cell
from verify.judge import MAX_INPUTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP_KEYS = {"attention", "variant", "readout", "d", "eps", "rows", "fit", "unreached", "L_star"}
ROW_KEYS = {"L", "B_min", "B_lower", "certified"}
FIT_KEYS = {"exponent", "ci95", "theory"}


def _strict_json(text):
    def bad(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=bad)


def run_main(argv, capsys):
    rc = sweep_mod.main(list(argv))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def run_cli(*args, timeout=120):
    proc = subprocess.run([sys.executable, "-m", "bounds.sweep", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def _check_shape(result):
    assert TOP_KEYS <= set(result)
    assert FIT_KEYS <= set(result["fit"])
    for missed in result["unreached"]:
        assert set(missed) == {"L", "reason"} and missed["reason"]
    assert not {r["L"] for r in result["rows"]} & {m["L"] for m in result["unreached"]}
    for row in result["rows"]:
        assert ROW_KEYS <= set(row)
        assert isinstance(row["certified"], bool)
        if row["B_min"] is None:  # null only where nothing counts: beyond L*
            assert result["L_star"] is not None and row["L"] > result["L_star"]
        if row["B_min"] is not None:
            assert isinstance(row["B_min"], (int, float)) and row["B_min"] >= 0
        if row["B_min"] is not None and row["B_lower"] is not None:
            assert row["B_lower"] <= row["B_min"] * (1 + 1e-12)


# --------------------------------------------------------------------------- subprocess


def test_cli_json_pre_bare_with_out_dir(tmp_path):
    out_dir = tmp_path / "res"
    rc, out, err = run_cli("--variant", "pre_bare", "--d", "3", "--Lmax", "16", "--json",
                           "--out", str(out_dir))
    assert rc == 0, err
    assert "Traceback" not in err
    result = _strict_json(out)
    _check_shape(result)
    assert (result["attention"], result["variant"], result["readout"]) == ("softmax", "pre_bare", "regression")
    assert result["d"] == 3 and result["eps"] == 0.0
    assert result["L_star"] == l_star(3) == 12
    assert [r["L"] for r in result["rows"]] == [2, 4, 8, 16]
    for r in result["rows"]:
        if r["L"] <= result["L_star"]:
            assert r["certified"] is True and r["B_min"] > 0
        else:
            assert r["B_min"] is None and r["certified"] is False
    bs = [r["B_min"] for r in result["rows"] if r["B_min"] is not None]
    assert bs == sorted(bs)  # counting further never gets cheaper
    assert result["fit"]["theory"] is None
    # --out writes the same object and a CSV of the rows
    with open(out_dir / "sweep.json") as fh:
        assert _strict_json(fh.read()) == result
    with open(out_dir / "sweep.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["L"]) for r in rows] == [r["L"] for r in result["rows"]]
    for csv_row, row in zip(rows, result["rows"]):
        if row["B_min"] is None:
            assert csv_row["B_min"] in ("", "None", "null")
        else:
            assert float(csv_row["B_min"]) == pytest.approx(row["B_min"], rel=1e-12)
        assert csv_row["certified"] in ("True", "False", "true", "false")
        assert (csv_row["certified"].lower() == "true") == row["certified"]


def test_cli_table_output():
    rc, out, err = run_cli("--variant", "none", "--attention", "linear", "--Lmax", "8")
    assert rc == 0, err
    lines = out.strip().splitlines()
    assert "linear/none/regression" in lines[0]
    # the header says what the two bounds are
    assert lines[1].split()[0] == "B_min:" and "certified" in lines[1]
    assert lines[2].split()[0] == "B_lower:" and "lower bound" in lines[2]
    header = lines[3].split()
    assert header[:4] == ["L", "B_min", "B_lower", "certified"]
    body = [ln.split() for ln in lines[4:7]]
    assert [int(b[0]) for b in body] == [2, 4, 8]
    for b, L in zip(body, (2, 4, 8)):
        assert float(b[1]) == pytest.approx((math.sqrt(8) * (1 - 1 / L)) ** 0.25, rel=1e-5)
        assert b[3] == "yes"
    with pytest.raises(ValueError):
        json.loads(out)


@pytest.fixture(scope="module")
def small_results():
    """One regression and one classification sweep, two rows each, whose numbers the test below
    replaces."""
    return [sweep_mod.sweep(Cell("softmax", "none", readout, d=4), [1, 2], rtol=1e-3)
            for readout in ("regression", "classification")]


@settings(max_examples=100, deadline=None)
@given(bmin=st.floats(1e-300, 1e300), lower=st.floats(1e-300, 1e300),
       margin=st.floats(1e-300, 1e300))
def test_the_table_prints_each_bound_on_its_side(small_results, bmin, lower, margin):
    """Every printed B_min is at least the certified bound, every printed B_lower and margin at
    most the proven or certified one: each decimal in the table read back exactly."""
    for result in small_results:
        row = {**result["rows"][-1], "B_min": bmin, "B_lower": lower, "margin": margin}
        lines = sweep_mod.table({**result, "rows": [row]}).splitlines()
        cells = lines[lines.index(next(l for l in lines if l.split()[:2] == ["L", "B_min"])) + 1].split()
        assert Decimal(cells[1]) >= Decimal(bmin) and Decimal(cells[2]) <= Decimal(lower)
        if result["readout"] == "classification":
            assert Decimal(cells[5]) <= Decimal(margin)


# a few at the process level (each costs an interpreter start); test_bad_input covers all
SUBPROCESS_BAD = [
    ["--variant", "sideways", "--Lmax", "8"],  # rejected by the argument parser
    ["--variant", "none"],  # a required option missing
    ["--variant", "none", "--Lmax", "8", "--eps", "nan"],  # rejected by the validation
]


def test_cli_bad_input_processes():
    """At the process level: exit 2, one line on stderr, nothing on stdout, no traceback."""
    procs = [subprocess.Popen([sys.executable, "-m", "bounds.sweep", *args], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in SUBPROCESS_BAD]
    for args, proc in zip(SUBPROCESS_BAD, procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (args, err)
        assert out == "", args
        assert len(err.strip().splitlines()) == 1, (args, err)
        assert err.endswith("\n") and "Traceback" not in err


# --------------------------------------------------------------------------- in process


def test_default_grid_includes_lmax(capsys):
    rc, out, err = run_main(["--variant", "none", "--Lmax", "20", "--json"], capsys)
    assert rc == 0, err
    result = _strict_json(out)
    _check_shape(result)
    assert [r["L"] for r in result["rows"]] == [2, 4, 8, 16, 20]
    assert all(r["certified"] and r["B_min"] > 0 for r in result["rows"])
    bs = [r["B_min"] for r in result["rows"]]
    assert bs == sorted(bs)
    assert result["L_star"] is None
    assert result["fit"]["theory"] == theory_exponent(Cell("softmax", "none", "regression"))
    # default fit tail is L >= 64: nothing to fit here
    assert result["fit"]["exponent"] is None and result["fit"]["ci95"] is None


def test_lmin_and_fit_from(capsys):
    rc, out, err = run_main(["--variant", "none", "--attention", "linear", "--Lmin", "5",
                             "--Lmax", "20", "--fit-from", "2", "--json"], capsys)
    assert rc == 0, err
    result = _strict_json(out)
    Ls = [r["L"] for r in result["rows"]]
    assert Ls == [5, 8, 16, 20]
    f = result["fit"]
    ref = fit(Ls, [r["B_min"] for r in result["rows"]], 2)
    assert f["exponent"] == pytest.approx(ref["exponent"], rel=1e-12)
    assert f["ci95"][0] <= f["exponent"] <= f["ci95"][1]
    assert f["theory"] == 0.0


@settings(max_examples=30, deadline=None)
@given(Lmin=st.integers(1, 300), span=st.integers(0, 3000))
def test_grid(Lmin, span):
    Lmax = Lmin + span
    g = sweep_mod.grid(Lmin, Lmax)
    assert g == sorted(set(g))
    assert g[0] == Lmin and g[-1] == Lmax
    inner = set(g) - {Lmin, Lmax}
    assert all(L & (L - 1) == 0 for L in inner)  # powers of two
    assert inner == {2**k for k in range(1, 13) if Lmin < 2**k < Lmax}


def test_classification_rows(capsys):
    rc, out, err = run_main(["--variant", "post_learned", "--readout", "classification",
                             "--Lmax", "8", "--json"], capsys)
    assert rc == 0, err
    result = _strict_json(out)
    _check_shape(result)
    assert result["readout"] == "classification"
    assert [r["L"] for r in result["rows"]] == [2, 4, 8]
    d = result["d"]
    for r in result["rows"]:
        assert r["B_min"] == 0.0 and r["B_min_is_infimum"] is True
        assert r["certified"] is True and r["margin"] > 0
        # u_0..u_L and b, plus e_s, e_a, g, beta
        assert r["storage"] == (r["L"] + 1) * (d + 1) + 4 * d
    margins = [r["margin"] for r in result["rows"]]
    assert margins == sorted(margins, reverse=True)
    assert result["fit"]["theory"] == -2.0
    assert result["L_star"] is None


def test_pre_bare_lstar_in_process(capsys):
    rc, out, err = run_main(["--variant", "pre_bare", "--Lmin", "30", "--Lmax", "40", "--json"], capsys)
    assert rc == 0, err
    result = _strict_json(out)
    assert result["L_star"] == l_star(8) == 34
    assert [r["L"] for r in result["rows"]] == [30, 32, 40]
    by_L = {r["L"]: r for r in result["rows"]}
    assert by_L[30]["certified"] and by_L[32]["certified"]
    assert by_L[40]["B_min"] is None and by_L[40]["certified"] is False


@pytest.mark.parametrize("att,norm", [("linear", "post_bare"), ("softmax", "none"),
                                      ("softmax", "post_learned")])
def test_lmax_one_is_valid_input(att, norm, capsys):
    rc, out, err = run_main(["--variant", norm, "--attention", att, "--Lmax", "1", "--json"], capsys)
    assert rc == 0, err
    result = _strict_json(out)
    assert [r["L"] for r in result["rows"]] == [1]
    assert result["rows"][0]["B_min"] is not None


def test_positive_eps_answers(capsys):
    def handler(signum, frame):
        raise TimeoutError("sweep with eps > 0 did not finish")

    signal.signal(signal.SIGALRM, handler)
    signal.alarm(60)
    try:
        rc, out, err = run_main(["--variant", "post_learned", "--eps", "0.1", "--Lmax", "4",
                                 "--json"], capsys)
    finally:
        signal.alarm(0)
    assert rc == 0, err
    result = _strict_json(out)
    _check_shape(result)
    assert result["eps"] == 0.1 and result["L_star"] is None
    assert all(r["certified"] for r in result["rows"])  # no L* here: no null row
    assert sorted([r["L"] for r in result["rows"]] + [m["L"] for m in result["unreached"]]) == [2, 4]


BAD = {
    "unknown variant": ["--variant", "sideways", "--Lmax", "8"],
    "Lmax 0": ["--variant", "none", "--Lmax", "0"],
    "Lmax -3": ["--variant", "none", "--Lmax", "-3"],
    "Lmax abc": ["--variant", "none", "--Lmax", "abc"],
    "Lmax float": ["--variant", "none", "--Lmax", "8.5"],
    "Lmin > Lmax": ["--variant", "none", "--Lmax", "8", "--Lmin", "9"],
    "Lmin 0": ["--variant", "none", "--Lmax", "8", "--Lmin", "0"],
    "d 1": ["--variant", "none", "--Lmax", "8", "--d", "1"],
    "d 0": ["--variant", "none", "--Lmax", "8", "--d", "0"],
    "eps -1": ["--variant", "none", "--Lmax", "8", "--eps", "-1"],
    "eps nan": ["--variant", "none", "--Lmax", "8", "--eps", "nan"],
    "eps inf": ["--variant", "none", "--Lmax", "8", "--eps", "inf"],
    "attention foo": ["--variant", "none", "--Lmax", "8", "--attention", "foo"],
    "readout foo": ["--variant", "none", "--Lmax", "8", "--readout", "foo"],
    "missing variant": ["--Lmax", "8"],
    "missing Lmax": ["--variant", "none"],
    "rtol 0": ["--variant", "none", "--Lmax", "8", "--rtol", "0"],
    "rtol -1": ["--variant", "none", "--Lmax", "8", "--rtol", "-1"],
    "unknown flag": ["--variant", "none", "--Lmax", "8", "--frobnicate"],
    "stray positional": ["--variant", "none", "--Lmax", "8", "extra"],
}


@pytest.mark.parametrize("argv", list(BAD.values()), ids=list(BAD))
def test_bad_input(argv, capsys):
    rc, out, err = run_main(argv, capsys)
    assert rc == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.strip() and "Traceback" not in err


def test_a_grid_beyond_the_judge_s_inputs_is_refused_up_front(capsys):
    """The select task has (L+1)(L+2)/2 inputs: from the first L past verify.judge.MAX_INPUTS the
    sweep is refused before any work (one line, exit 2); a grid whose rows past a finite L* are
    null needs no judgement there and runs."""
    L = next(L for L in itertools.count(1) if (L + 1) * (L + 2) // 2 > MAX_INPUTS)
    argv = ["--attention", "softmax", "--variant", "none", "--task", "select", "--Lmin", str(L),
            "--Lmax", str(L)]
    with pytest.raises(ValueError, match="MAX_INPUTS"):
        sweep_mod.parse(argv)
    rc, out, err = run_main(argv + ["--quiet"], capsys)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "MAX_INPUTS" in err
    sweep_mod.parse(["--attention", "softmax", "--variant", "pre_bare", "--task", "select",
                     "--Lmin", str(L), "--Lmax", str(L)])


def test_out_dir_that_is_a_file(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, out, err = run_main(["--variant", "none", "--attention", "linear", "--Lmax", "2",
                             "--out", str(blocker)], capsys)
    assert rc == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
