"""The derivation export: what it prints is the construction, the result comes first, every
symbol is defined before use, LaTeX compiles, text is plain, JSON round-trips; the command."""

import itertools
import json
import os
import re
import shutil
import subprocess
import sys

import mpmath
import numpy as np
import pytest
import sympy

from constructions import closed_forms, derive, laws
from constructions.cell import ATTENTIONS, NORMS, READOUTS, Cell
from constructions.derive import Row, derivation, main, render
from constructions.regression import design
from constructions.symbols import C1, E1, ONE, P, Q, B, C, L, inner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the new norm kinds and affines: an RMSNorm cell at every placement and the LayerNorm gain cells
NEW = [("softmax", "none", "rmsnorm", None), ("softmax", "pre_bare", "rmsnorm", None),
       ("linear", "pre_bare", "rmsnorm", None), ("softmax", "pre_learned", "rmsnorm", "gain"),
       ("linear", "pre_learned", "rmsnorm", "gain_bias"), ("softmax", "post_bare", "rmsnorm", None),
       ("softmax", "post_learned", "rmsnorm", "gain"), ("softmax", "post_learned", "rmsnorm", "gain_bias"),
       ("softmax", "pre_learned", "layernorm", "gain"), ("linear", "pre_learned", "layernorm", "gain"),
       ("softmax", "post_learned", "layernorm", "gain"), ("linear", "post_learned", "layernorm", "gain")]
#: (attention, variant, readout, norm kind, affine)
ALL = ([(att, norm, readout, "layernorm", None) for att, norm, readout in itertools.product(ATTENTIONS, NORMS, READOUTS)]
       + [(att, norm, readout, kind, affine) for att, norm, kind, affine in NEW for readout in READOUTS])
IDS = ["/".join(c[:3]) + ("" if c[3] == "layernorm" and c[4] is None else f"/{c[3]}-{c[4] or 'bare'}") for c in ALL]
#: the regression cells of ALL: (attention, variant, norm kind, affine)
REG = [(att, norm, kind, affine) for att, norm, readout, kind, affine in ALL if readout == "regression"]
REG_IDS = ["/".join(c[:2]) + f"/{c[2]}-{c[3] or 'bare'}" for c in REG]
#: CI sets this so that a missing pdflatex fails the LaTeX test instead of skipping it
REQUIRE_PDFLATEX = os.environ.get("COUNTING_COST_REQUIRE_PDFLATEX") == "1"


def _cell(att, norm, readout="regression", kind="layernorm", affine=None, d=8):
    return Cell(att, norm, readout, d=d, norm=kind, affine=affine)


@pytest.mark.parametrize("att,norm,readout,kind,affine", ALL, ids=IDS)
def test_every_cell_has_a_derivation_result_first(att, norm, readout, kind, affine):
    cell = _cell(att, norm, readout, kind, affine)
    sections = derivation(cell)
    titles = [s.title for s in sections]
    assert titles[0] == "result" and "counting conditions" in titles
    for sec in sections:
        for row in sec.rows:
            assert isinstance(row, Row)
            assert isinstance(row.lhs, sympy.Basic) and isinstance(row.rhs, sympy.Basic)
    first = sections[0].rows[0]
    assert str(first.lhs) == "B_min(L)"
    form = closed_forms.formula(cell)
    if readout == "regression":
        shown = [(r.rhs, r.condition) for r in sections[0].rows[:len(form.pieces)]]
        assert shown == [(p.B_min, p.condition) for p in form.pieces]
    else:
        assert first.rhs == 0


# --------------------------------------------------------------------------- the printed construction
def _numeric_frame(d):
    """c_1, p, one, e_1, q as float arrays, built from their definitions (not from the toolkit)."""
    e1 = np.zeros(d)
    e1[0] = 1.0
    c1 = (e1 - 1.0 / d) / np.sqrt((d - 1) / d)
    p = np.zeros(d)
    if d >= 3:
        p[1], p[2] = 1 / np.sqrt(2), -1 / np.sqrt(2)
    one = np.ones(d) / np.sqrt(d)
    return {C1: c1, P: p, ONE: one, E1: e1, Q: (c1 - np.sqrt(d - 1) * one) / np.sqrt(d)}


def _evaluate_rows(rows, d, point):
    """Evaluate the printed construction rows in float64 with numpy vectors.

    A vector row is linear in the vector symbols: its value is the sum over them of the
    derivative (the coefficient, a scalar expression) times the vector.  Inner products are
    numpy dot products.
    """
    vectors = _numeric_frame(d)
    scalars = dict(point)

    def scalar(expr):
        expr = expr.replace(lambda e: getattr(e, "func", None) == inner,
                            lambda e: sympy.Float(float(np.dot(vector(e.args[0]), vector(e.args[1])))))
        return float(sympy.N(expr.xreplace(scalars), 30))

    def vector(expr):
        out = np.zeros(d)
        for sym in expr.free_symbols & set(vectors):
            out += scalar(sympy.diff(expr, sym)) * vectors[sym]
        return out

    for row in rows:
        if str(row.lhs) in VECTOR_NAMES:
            vectors[row.lhs] = vector(row.rhs)
        else:
            scalars[row.lhs] = scalar(row.rhs)
    return vectors, scalars


VECTOR_NAMES = {"e_s", "e_a", "g", "beta", "w", "h_s", "h_a", "v", "q"}
POINTS = {"segment": (3.0, 9, 5.0, 17.5, 0.25), "arc": (2.0, 10, 7.0, 11.0, 0.0),
          "line": (1.3, 6, 1.0, 0.95, 0.125)}


@pytest.mark.parametrize("att,norm,kind,affine", REG, ids=REG_IDS)
@pytest.mark.parametrize("d", [2, 3, 8])
def test_printed_construction_is_the_construction(att, norm, kind, affine, d):
    """The construction section, evaluated on its own with numpy, gives the toolkit's vectors."""
    cell = _cell(att, norm, kind=kind, affine=affine, d=d)
    if cell.post and d < laws.smallest_d(cell):
        pytest.skip("post-norm needs a plane in the image")
    des = design(cell)
    rows = next(s for s in derivation(cell) if s.title == "construction at budget B").rows
    Bv, Lv, tv, Av, Cv = POINTS[des.family]
    named, _ = derive._named(cell)
    point = {B: Bv, L: Lv, C: Cv, named.amplitude: Av}
    if named.shape is not None:
        point[named.shape] = tv
    vectors, scalars = _evaluate_rows(rows, d, point)
    with mpmath.workdps(30):
        want = des.evaluate(Lv, Bv, tv, Av, Cv)
    for name in cell.vector_names():
        sym = sympy.Symbol(name)
        got = vectors[sym]
        ref = np.array([float(v) for v in want[name]])
        assert np.allclose(got, ref, rtol=1e-12, atol=1e-12), (name, got, ref)
    assert scalars[sympy.Symbol("w_0", real=True)] == pytest.approx(float(want["w0"]), rel=1e-12, abs=1e-12)


# --------------------------------------------------------------------------- every symbol defined
#: names a derivation introduces in words (its intros and notes)
INTRODUCED = {"L", "n", "B", "C", "w", "w_0", "e_s", "e_a", "h_s", "h_a", "g", "beta", "k", "k'", "i", "c",
              "u_c", "b_c"}
_BINDERS = ("maximum", "minimum", "infimum", "argmax")


def _used(expr):
    """Free symbols of ``expr``, without the indices its extrema bind."""
    bound = {a.args[1] for a in expr.atoms(sympy.Function) if a.func.__name__ in _BINDERS}
    return {str(s) for s in expr.free_symbols - bound}


@pytest.mark.parametrize("att,norm,readout,kind,affine", ALL, ids=IDS)
def test_every_symbol_is_defined_before_use(att, norm, readout, kind, affine):
    cell = _cell(att, norm, readout, kind, affine)
    defined = set(INTRODUCED)
    for sec in derivation(cell):
        for row in sec.rows:
            used = _used(row.rhs) | (set() if row.condition is None else _used(row.condition))
            lhs_names = {str(row.lhs)} | _used(row.lhs)
            missing = used - defined - lhs_names
            assert not missing, (sec.title, row, missing)
            defined |= lhs_names


def test_construction_has_no_anonymous_temporaries():
    for att, norm, kind, affine in REG:
        out = render(_cell(att, norm, kind=kind, affine=affine), "text")
        assert not re.search(r"\bs_\d+\b", out), (att, norm)
        assert not re.search(r"(?<![\w.])E(?![\w(])", out), (att, norm)  # Euler's number spelt exp(1)


# --------------------------------------------------------------------------- formats
@pytest.mark.parametrize("att,norm,readout,kind,affine", ALL, ids=IDS)
def test_text_is_plain(att, norm, readout, kind, affine):
    out = render(_cell(att, norm, readout, kind, affine), "text")
    # every LaTeX macro starts with a backslash; groups and math mode need braces and dollars
    assert not set("\\{}$") & set(out)


def test_large_width_prints_no_long_lists():
    """At d = 65536 the frame is given by its distinct coordinates, nothing is d long."""
    for fmt in ("text", "latex"):
        out = render(_cell("softmax", "post_learned", d=65536), fmt)
        assert len(out) < 20000
        assert out.count("65535") < 40
    text = render(_cell("softmax", "none", d=65536), "text")
    assert "c_1[1] = sqrt(d - 1)/sqrt(d)" in text and "c_1[i] = -1/(sqrt(d)*sqrt(d - 1))" in text


def test_latex_is_align_environments():
    out = render(_cell("softmax", "post_learned"), "latex")
    assert out.count(r"\begin{align*}") == out.count(r"\end{align*}") >= 6
    assert r"\frac" in out and r"\langle" in out


def test_latex_compiles(tmp_path):
    """Every cell's LaTeX in a minimal article with amsmath, compiled by pdflatex."""
    if shutil.which("pdflatex") is None:
        if REQUIRE_PDFLATEX:
            pytest.fail("pdflatex is not installed (COUNTING_COST_REQUIRE_PDFLATEX=1)")
        pytest.skip("pdflatex not installed")
    body = "\n\n".join(f"\\section*{{{name.replace('_', ' ')}}}\n" + render(_cell(*c), "latex")
                       for name, c in zip(IDS, ALL))
    big = render(_cell("softmax", "post_learned", d=65536), "latex")
    (tmp_path / "d.tex").write_text("\\documentclass{article}\n\\usepackage{amsmath}\n\\begin{document}\n"
                                    + body + "\n\n" + big + "\n\\end{document}\n")
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "d.tex"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:]
    assert (tmp_path / "d.pdf").stat().st_size > 0


@pytest.mark.parametrize("att,norm,readout,kind,affine", ALL, ids=IDS)
def test_json_round_trips(att, norm, readout, kind, affine):
    cell = _cell(att, norm, readout, kind, affine)
    data = json.loads(render(cell, "json"))
    assert data["cell"] == {"attention": att, "variant": norm, "norm": kind, "affine": cell.affine.name,
                            "readout": readout, "d": 8, "eps": 0.0, "task": "count", "read": "bos"}
    namespace = vars(sympy)
    rows = [r for s in derivation(cell) for r in s.rows]
    assert len(data["steps"]) == len(rows)
    for step, row in zip(data["steps"], rows):
        assert eval(step["srepr"], namespace) == row.rhs
        assert eval(step["lhs_srepr"], namespace) == row.lhs
        assert step["latex"] and step["section"]
    entry = data["closed_forms"]["B_min"]
    expr = eval(entry["srepr"], namespace)
    L_sym = eval(data["symbol"]["L"], namespace)
    assert L_sym == L
    assert expr.free_symbols <= {L}
    if readout == "classification":
        assert entry["infimum"] and expr == 0
        return
    form = closed_forms.formula(cell).main
    assert (entry["L_min"], entry["L_max"], entry["valid_for"]) == (form.L_min, form.L_max, form.valid_for)
    for L_value in {form.L_min, form.L_min + 1, 16, 33}:
        if form.holds(L_value):
            assert float(expr.subs(L_sym, L_value)) == pytest.approx(
                closed_forms.closed_form(cell, L_value)["B"], rel=1e-14)
    for piece in data["closed_forms"]["pieces"]:
        assert eval(piece["srepr"], namespace).free_symbols <= {L}


def test_json_closed_form_is_the_certified_b_min():
    """What a notebook imports: the srepr, evaluated at L = 64, is the sweep's certified B_min."""
    from bounds.search import regression_row

    for att, norm in (("linear", "pre_learned"), ("linear", "pre_bare"), ("softmax", "post_learned")):
        cell = _cell(att, norm)
        data = json.loads(render(cell, "json"))
        expr = sympy.parse_expr(data["closed_forms"]["B_min"]["srepr"], local_dict=vars(sympy))
        value = float(expr.subs(L, 64))
        row = regression_row(cell, 64, rtol=1e-6, lower=False)
        assert value * (1 - 1e-12) <= row["B_min"] <= value * (1 + 3e-6)


def test_eps_is_said():
    cell = Cell("softmax", "pre_learned", "regression", eps=0.01)
    out = render(cell, "text")
    assert "derived for eps = 0" in out
    assert json.loads(render(cell, "json"))["closed_forms"] == {}


# --------------------------------------------------------------------------- the command
def _run(*args, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "constructions.derive", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, **kw)


def test_cli_in_process(capsys):
    assert main(["--variant", "pre_bare", "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "L^*" in out and "counting conditions" in out
    assert main(["--variant", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("derive: error:")


def test_cli_norm_kind_and_affine(capsys):
    """--norm and --affine choose the cell: post-RMSNorm counts at d = 2, LayerNorm with a gain
    has no bias, and linear attention with post-RMSNorm derives its one-sided arc."""
    assert main(["--variant", "post_learned", "--norm", "rmsnorm", "--d", "2", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["cell"]["norm"], data["cell"]["affine"], data["cell"]["d"]) == ("rmsnorm", "gain", 2)
    assert main(["--variant", "pre_learned", "--affine", "gain", "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "layernorm gain" in out and "beta" not in out
    assert main(["--variant", "post_bare", "--attention", "linear", "--norm", "rmsnorm"]) == 0
    assert "one-sided arc" in capsys.readouterr().out


def test_cli_interrupt_exits_130(monkeypatch, capsys):
    def interrupted(cell, fmt):
        raise KeyboardInterrupt

    monkeypatch.setattr(derive, "render", interrupted)
    assert main(["--variant", "none"]) == 130
    assert capsys.readouterr().err == "derive: interrupted\n"


BAD = [["--variant", "bogus"], ["--variant", "none", "--d", "1"], ["--variant", "none", "--d", "70000"],
       ["--variant", "none", "--d", "x"], ["--variant", "none", "--eps", "-1"],
       ["--variant", "none", "--eps", "nan"], ["--variant", "none", "--format", "pdf"],
       ["--variant", "post_bare", "--d", "2"], ["--attention", "softmax"],
       ["--variant", "none", "--affine", "gain"], ["--variant", "pre_learned", "--norm", "batchnorm"]]


#: a few of :data:`BAD` at the process level (each costs an interpreter start): one the argument
#: parser rejects, one a value check, one a cell check; the in-process test covers all of them
SUBPROCESS_BAD = [BAD[0], BAD[4], BAD[7]]


@pytest.mark.parametrize("args", BAD, ids=[" ".join(a) for a in BAD])
def test_cli_bad_input_is_one_line_exit_2_in_process(args, capsys):
    assert main(args) == 2, args
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("derive: error:"), (args, err)


def test_cli_bad_input_is_one_line_exit_2():
    procs = [subprocess.Popen([sys.executable, "-m", "constructions.derive", *args], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in SUBPROCESS_BAD]
    for args, proc in zip(SUBPROCESS_BAD, procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (args, err)
        assert out == "" and err.count("\n") == 1 and err.startswith("derive: error:"), (args, err)
        assert "Traceback" not in err


def test_cli_closed_pipe_and_full_disk():
    head = subprocess.run(f"{sys.executable} -m constructions.derive --variant post_learned --d 200 "
                          "--format latex | head -c 10", shell=True, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert head.returncode == 0 and len(head.stdout) == 10
    assert "Traceback" not in head.stderr and head.stderr == ""
    with open("/dev/full", "w") as full:
        res = subprocess.run([sys.executable, "-m", "constructions.derive", "--variant", "none", "--format",
                              "latex"], cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    # a reader that leaves at once: quiet, 141 (or 0 if the output fitted in the pipe)
    proc = subprocess.Popen([sys.executable, "-m", "constructions.derive", "--variant", "post_learned",
                             "--format", "json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    assert proc.wait(timeout=120) in (0, 141)
    assert proc.stderr.read() == b""


def test_cli_help_covers_every_option():
    res = _run("--help")
    assert res.returncode == 0
    for option in ("--variant", "--attention", "--readout", "--d", "--norm", "--affine", "--eps", "--format"):
        line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith(option))
        block = res.stdout.split(line, 1)[1].split("\n  -", 1)[0]
        assert len((line + block).split()) > 3, option


def test_cli_large_width_is_fast():
    res = _run("--variant", "post_learned", "--d", "65536", "--format", "latex", timeout=60)
    assert res.returncode == 0 and r"\begin{align*}" in res.stdout
