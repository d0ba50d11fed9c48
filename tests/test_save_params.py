"""``python -m bounds.sweep ... --save-params DIR``: every certified witness, as exact JSON and
as safetensors, and ``python -m verify`` reproduces each row's verdict from either file."""

from __future__ import annotations

import json
import math
import os

import mpmath
import pytest

from bounds import sweep as sweep_mod
from constructions.cell import Cell, Params
from constructions.regression import design
from verify import __main__ as verify_cli
from verify import params_file
from verify.certify import certify
from verify.forward import reduced


def _sweep(capsys, *argv):
    rc = sweep_mod.main(["--json", *argv])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return json.loads(captured.out)


def _verify(capsys, path, L):
    rc = verify_cli.main(["--params", str(path), "--L", str(L), "--json"])
    report = json.loads(capsys.readouterr().out)
    return rc, report


@pytest.mark.parametrize("argv", [
    ["--variant", "post_learned", "--Lmin", "8", "--Lmax", "16", "--jobs", "2"],
    ["--variant", "none", "--Lmin", "1", "--Lmax", "4", "--jobs", "1"],
    ["--variant", "pre_learned", "--norm", "rmsnorm", "--readout", "classification", "--Lmin", "4",
     "--Lmax", "8", "--d", "4", "--jobs", "1"],
], ids=["regression", "regression-infimum", "classification"])
def test_saved_witnesses_reproduce_the_rows(argv, tmp_path, capsys):
    out = tmp_path / "witnesses"
    result = _sweep(capsys, *argv, "--save-params", str(out))
    rows = [r for r in result["rows"] if r["certified"]]
    assert rows and all("witness" not in r for r in result["rows"])
    names = sorted(os.listdir(out))
    assert names == sorted(f"L{r['L']}{ext}" for r in rows for ext in (".json", ".safetensors"))
    for r in rows:
        assert r["saved"] == f"L{r['L']}.json L{r['L']}.safetensors"
        exact, _ = params_file.read(str(out / f"L{r['L']}.json"))
        assert exact.cell.keys() == {k: result[k] for k in exact.cell.keys()}
        for ext in (".json", ".safetensors"):
            rc, report = _verify(capsys, out / f"L{r['L']}{ext}", r["L"])
            assert (rc, report["verdict"], report["certified"]) == (0, "counts", True)
            if ext == ".json":  # the very parameter set of the row
                if result["readout"] == "classification":
                    assert report["min_margin"] == r["margin"] and report["B"] == r["margin_bound"]
                else:
                    assert report["B"] == r.get("witness_bound", r["B_min"])
                    assert report["worst_error"] == r["worst_error"]


def test_save_params_is_refused_up_front(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = sweep_mod.main(["--variant", "none", "--Lmax", "4", "--save-params", str(blocker)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--save-params" in err and "Traceback" not in err
    assert blocker.read_text() == "x"


def test_a_witness_whose_double_rounding_fails_is_saved_only_exactly():
    """A witness that counts by less than the rounding of its ``w0`` to a double: the JSON copy
    is written, the safetensors copy (that rounding) is not, and the note says why.

    Built from a construction rounded to doubles: ``y - n`` is linear in ``w0``, so ``t`` below
    (60 digits) is the ``w0`` at which the largest ``y(n) - n`` is exactly 1/2.  A ``w0`` just
    below ``t`` counts, and its nearest double is the double above ``t`` (which fails) when
    that double is the nearer of the two around ``t``: the budgets are tried until it is.
    """
    cell = Cell("softmax", "none", "regression", d=4)
    est = design(cell).estimate(16)
    for k in range(20):
        base = params_file.rounded_to_double(design(cell).build(16, est * (1 + k / 7)))
        with mpmath.workdps(60):
            ys = reduced(Params(cell, base.vectors, {"w0": 0}), list(range(17)), backend="mp60")
            t = mpmath.mpf(1) / 2 - max(y - n for n, y in enumerate(ys))
        up = float(t) if float(t) > t else math.nextafter(float(t), math.inf)  # the double above t
        down = math.nextafter(up, -math.inf)  # the double at or below t
        if up - t < t - down:
            break
    else:
        pytest.fail("no budget put the boundary nearer the double above it")
    with mpmath.workprec(200):
        witness = Params(cell, base.vectors, {"w0": t - mpmath.mpf(2) ** -150})
    assert certify(witness, 16).counts
    assert float(witness.scalars["w0"]) == up
    assert not certify(params_file.rounded_to_double(witness), 16).counts
    files, note = params_file.witness_files(witness, 16, "L16")
    assert list(files) == ["L16.json"] and "L16.safetensors not written" in note
    assert params_file.from_json(files["L16.json"])[0].scalars["w0"] == witness.scalars["w0"]
