"""The headline sweep's numeric path loads no sympy; its exact forms are built where printed."""

from __future__ import annotations

import json
import subprocess
import sys

from bounds import sweep
from constructions import regression
from constructions.cell import Cell

CELL = Cell("softmax", "post_learned", "regression", 8, 0.0)

_PROBE = """
import sys
from bounds import sweep
sweep.main({argv!r})
print("SYMPY" if "sympy" in sys.modules else "NO-SYMPY", "TQDM" if "tqdm" in sys.modules else "NO-TQDM")
"""


def _probe(argv) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv)], capture_output=True,
                         text=True, check=True).stdout
    lines = out.strip().splitlines()
    return "\n".join(lines[:-1]), lines[-1]


def test_the_table_loads_neither_sympy_nor_tqdm():
    text, loaded = _probe(["--variant", "post_learned", "--Lmax", "8", "--quiet", "--jobs", "1"])
    assert loaded == "NO-SYMPY NO-TQDM"
    assert "c(8) = 14**(3/4)/28" in text  # the exact constant, from the generated values


def _imported_by_command(argv) -> set[str]:
    """Every module the command ``python -m bounds.sweep argv`` imports (``-X importtime`` reports
    each import on stderr; the forked worker processes inherit both, so a module first imported
    in a worker is reported too)."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-m", "bounds.sweep", *argv],
                         capture_output=True, text=True, check=True).stderr
    return {line.rsplit("|", 1)[1].strip() for line in err.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_the_headline_command_loads_no_sympy_in_any_process():
    """The headline's own command (the table, worker processes as by default: two here) imports
    no sympy anywhere; with ``--json`` (the rows' exact closed forms) it does, which the probe
    sees."""
    argv = ["--variant", "post_learned", "--Lmax", "16", "--quiet", "--jobs", "2"]
    table = _imported_by_command(argv)
    assert "bounds.arc_lower" in table and "numpy" in table
    assert not any(m == "sympy" or m.startswith("sympy.") for m in table)
    assert "sympy" in _imported_by_command(["--variant", "post_learned", "--Lmax", "4", "--quiet",
                                            "--jobs", "2", "--json"])


def test_json_rows_carry_the_exact_closed_forms():
    text, loaded = _probe(["--variant", "post_learned", "--Lmax", "4", "--json", "--jobs", "1"])
    assert loaded.startswith("SYMPY")
    rows = json.loads(text)["rows"]
    assert all(set(r["closed_form"]) >= {"B", "B_exact"} for r in rows)


def test_rows_without_closed_forms_are_the_same_rows():
    """Leaving the closed forms out changes nothing else in a row."""
    with_forms = sweep.sweep(CELL, [2, 5], jobs=1)
    without = sweep.sweep(CELL, [2, 5], jobs=1, closed_forms=False)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("seconds", "closed_form")}
    assert [strip(r) for r in with_forms["rows"]] == [strip(r) for r in without["rows"]]
    assert all("closed_form" not in r for r in without["rows"])
    assert with_forms["fit"] == without["fit"]


def test_symbolic_names_still_reachable_from_regression():
    """The symbolic side moved to constructions.steps; regression answers its names."""
    from constructions import steps, symbols

    assert regression.Step is steps.Step and regression.program is steps.program
    assert regression.L is symbols.L
    assert regression.FOOT_SLACK == steps.FOOT_SLACK and 2.0**-regression.FOOT_SLACK_BITS == float(steps.FOOT_SLACK)
    try:
        regression.no_such_name
    except AttributeError:
        pass
    else:
        raise AssertionError("an unknown name must raise AttributeError")
