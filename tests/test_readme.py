"""The README's claims that a test can check: the set-up commands, the documented options of
every command, the Python example, the backends, the limits and the post-norm gap."""

from __future__ import annotations

import os
import re

import pytest

from bounds import search, sweep
from constructions import cell as cell_mod
from constructions import derive
from constructions.cell import Cell
from verify import judge
from verify.backends import get_backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
    README = fh.read()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.S)


def _block(lang: str, starts: str) -> str:
    (text,) = [b for k, b in BLOCKS if k == lang and b.lstrip().startswith(starts)]
    return text


def _options(parser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")} - {"--help"}


def test_the_two_set_up_commands_come_first_and_ci_runs_the_second():
    first = BLOCKS[0][1].strip().splitlines()
    assert first == ["python -m pip install -e . && python -m bounds.sweep --variant post_learned --Lmax 4096",
                     "python -m pip install -e '.[test]' && python -m pytest"]
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as fh:
        ci = fh.read()
    assert "pip install --quiet -e '.[test]'" in ci and ci.rstrip().endswith("python -m pytest")


@pytest.mark.parametrize("starts,parser", [("python -m bounds.sweep", sweep._parser),
                                           ("python -m constructions.derive", derive._parser)],
                         ids=["sweep", "derive"])
def test_usage_lists_every_option(starts, parser):
    documented = set(re.findall(r"--[A-Za-z][A-Za-z-]*", _block("bash", starts)))
    assert documented == _options(parser())


def test_python_example_runs(capsys):
    exec(compile(_block("python", "from constructions"), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "verdict='counts'" in printed and "backend='arb256'" in printed


def test_backends_named_exist():
    line = re.search(r"Backends: (.*?)\.\s", README.replace("\n", " ")).group(1)
    for name in re.findall(r"`([a-z0-9<>]+)`", line):
        get_backend(name.replace("<digits>", "30").replace("<bits>", "128"))


def test_limits_are_the_toolkit_s():
    assert f"`d <= {cell_mod.MAX_D}` (`constructions.cell.MAX_D`)" in README
    assert judge.MAX_COUNTS == 2**20 and "`L <= 2^20` (`verify.judge.MAX_COUNTS`)" in README
    assert sweep.MAX_L == 2**20 and "(at most 1048576 = 2^20" in README
    assert f"default {sweep.ARC_BOXES}," in README


# 16384: where the float64 screen alone overshot the boundary (softmax embeddings nearly cancel)
@pytest.mark.parametrize("attention,variant,L,gap", [("softmax", "post_bare", 16384, 1e-4),
                                                     ("linear", "post_learned", 4096, 5e-5)])
def test_post_norm_gap_as_stated(attention, variant, L, gap):
    row = search.regression_row(Cell(attention, variant, "regression"), L)
    assert row["certified"]
    assert row["B_min"] / row["B_lower"] - 1 <= gap


def _table(title: str) -> list[list[str]]:
    section = README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ") and not line.startswith("| attention")]


def _number_at(text: str):
    """The first number of a cell and the ``L`` it is stated at (4096 unless another is named)."""
    m = re.match(r"([0-9.]+)", text)
    at = re.search(r"at (?:`L = )?(\d+)", text)
    return float(m.group(1)), (int(at.group(1)) if at else 4096)


def test_layernorm_against_rmsnorm_table():
    """Every number of the table is the cell's closed form (itself checked against the certified
    sweep by tests/test_closed_form_sweep.py); "the same" holds too, and the one-sided arc of
    linear attention after RMSNorm (no closed form) is its float64 optimum."""
    from constructions.closed_forms import closed_form
    from constructions.regression import design
    from constructions.laws import smallest_d

    rows = _table("LayerNorm against RMSNorm")
    assert len(rows) == 11
    for attention, part, _exponent, ln, rms, dims, *_ in rows:
        placement, _, rest = part.partition(", ")
        affine = rest.split(" ")[0] or "bare"
        variant = "none" if placement == "none" else f"{placement}_{'bare' if affine == 'bare' else 'learned'}"
        learned = None if variant in ("none", f"{placement}_bare") else affine
        value, L = _number_at(ln)
        cells = {k: Cell(attention, variant, "regression", d=8, norm=k, affine=learned)
                 for k in ("layernorm", "rmsnorm")}
        assert closed_form(cells["layernorm"], L)["B"] == pytest.approx(value, rel=1e-5)
        if closed_form(cells["rmsnorm"], L) is None:
            # linear attention after RMSNorm: no closed form; the float64 optimum of the one-sided
            # arc (the certified sweep B_min meets it to the bisection tolerance)
            assert design(cells["rmsnorm"]).estimate(L) == pytest.approx(_number_at(rms)[0], rel=1e-5)
        elif rms.startswith("the same"):
            assert closed_form(cells["rmsnorm"], L)["B"] == closed_form(cells["layernorm"], L)["B"]
        else:
            assert closed_form(cells["rmsnorm"], L)["B"] == pytest.approx(_number_at(rms)[0], rel=1e-5)
        want = dims.split(" / ")
        assert str(smallest_d(cells["layernorm"])) == want[0]
        if want[1] != "-":
            assert str(smallest_d(cells["rmsnorm"])) == want[1]


def _property_example_with(params):
    """The README's property test, run on ``params``: it raises where they do not count."""
    namespace = {"params": params, "explicit": __import__("verify").explicit}
    exec(compile(_block("python", "from hypothesis"), "README.md", "exec"), namespace)
    namespace["test_counts"]()


def test_property_example_passes_a_counter_and_fails_a_non_counter():
    from constructions.regression import design

    cell = Cell("softmax", "none", "regression", d=4)
    good = design(cell).build(64, design(cell).estimate(64) * 1.01)
    _property_example_with(good)
    bad = design(cell).build(64, design(cell).estimate(64) * 0.9)
    assert not judge.counts_to(bad, 64, "mp50").counts
    with pytest.raises(AssertionError):
        _property_example_with(bad)


def test_report_usage_lists_every_option():
    from bounds import report

    documented = set(re.findall(r"--[A-Za-z][A-Za-z-]*", _block("bash", "python -m bounds.report")))
    assert documented == _options(report._parser())
    assert "52 cells" in README and len(cell_mod.architectures()) == 52
