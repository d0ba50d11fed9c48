"""The generated code of constructions.codegen: current, equal to what sympy derives now, and
used only while current."""

from __future__ import annotations

import builtins
import subprocess
import sys

import mpmath
import numpy as np
import pytest

from constructions import codegen, generated, laws, regression
from constructions.cell import Cell

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def fresh():
    """Every entry as sympy makes it now, and the lambdified functions themselves."""
    made = {}
    real = codegen.lambdified

    def keep(key, module, make):
        fn = real(key, module, make)
        if codegen._RECORD is not None and key is not None:
            made[key] = fn
        return fn

    codegen.lambdified = keep
    try:
        entries = codegen.generate()
    finally:
        codegen.lambdified = real
    return entries, made


def test_generated_file_is_current(fresh):
    """The committed file is exactly what the generator writes now (else: regenerate it with
    ``python -m constructions.codegen``), and its key is that of the sources."""
    entries, _ = fresh
    with open(codegen.GENERATED, encoding="utf-8") as f:
        assert f.read() == codegen.render(entries), "stale: run python -m constructions.codegen"
    assert generated.KEY == codegen.source_key()
    assert set(generated.FUNCTIONS) == set(entries["FUNCTIONS"])


def _names(code) -> set:
    out = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            out |= _names(c)
    return out


def test_generated_functions_bind_as_lambdify(fresh):
    """Each generated function is lambdify's: the same source and, name by name, the same
    objects behind every global it uses (so it computes the same thing, bit for bit)."""
    _, made = fresh
    for key, (module, source) in generated.FUNCTIONS.items():
        fn = codegen._function(key, module, source)
        ref = made[key]
        assert fn.__code__.co_varnames == ref.__code__.co_varnames, key
        for name in _names(fn.__code__):
            ours = fn.__globals__.get(name, getattr(builtins, name, None))
            theirs = ref.__globals__.get(name, getattr(builtins, name, None))
            assert ours is not None and ours is theirs, (key, name)


def test_generated_values_equal_sympy(fresh):
    entries, _ = fresh
    assert generated.VALUES == entries["VALUES"]
    cell = Cell("softmax", "post_learned", "regression", 8, 0.0)
    fields = generated.VALUES[f"leading_term:{codegen.cell_key(cell)}"]
    term = laws.leading_term(cell)
    assert fields["exact"] == str(term.constant) and fields["general"] == str(term.general)
    man, exp = fields["constant_30"]
    assert abs(man * 2.0**exp - float(term.constant)) < 1e-15


def test_generated_construction_evaluates_as_sympy():
    """The generated construction of the headline cell, evaluated, equals the lambdified one
    and the sympy steps substituted exactly (an independent evaluation)."""
    cell = Cell("softmax", "post_learned", "regression", 8, 0.0)
    des = regression.design(cell)
    fresh = regression.RegressionDesign(cell)
    with codegen.recording():  # forces sympy's own lambdify
        ref = fresh.compiled()
        fresh.compiled_parts()
    assert des.compiled().__code__.co_filename.startswith("<generated")
    args = [mpmath.mpf(v) for v in ("3.5", "64", "20.25", "1.75", "0.5")]
    with mpmath.workdps(40):
        assert des.compiled()(*args) == ref(*args)
    t_grid = np.geomspace(1.0, 1e3, 7)
    assert np.array_equal(des.capacity(t_grid, 2.5), fresh.capacity(t_grid, 2.5))


def test_stale_key_falls_back_to_sympy(monkeypatch):
    """A source edited after generation (another key) leaves every entry unused: the calls
    compute with sympy and give the same results."""
    cell = Cell("linear", "post_learned", "regression", 8, 0.0)
    key = f"RegressionDesign:{codegen.cell_key(cell)}:capacity mpmath"
    assert key in generated.FUNCTIONS
    monkeypatch.setattr(codegen, "_entries", lambda: ({}, {}))
    calls = []
    fn = codegen.lambdified(key, "mpmath", lambda: calls.append(1) or (lambda t, B: "sympy"))
    assert calls == [1] and fn(1, 1) == "sympy"
    assert codegen.cached(f"leading_term:{codegen.cell_key(cell)}", lambda: "derived") == "derived"


def test_entries_follow_the_source_key(monkeypatch):
    """The file's entries are used iff its KEY equals the hash of the sources."""
    codegen._entries.cache_clear()
    monkeypatch.setattr(codegen, "source_key", lambda: "edited")
    try:
        assert codegen._entries() == ({}, {})
    finally:
        codegen._entries.cache_clear()
    monkeypatch.undo()
    assert codegen._entries()[0] is generated.FUNCTIONS


def test_source_key_covers_the_sources(tmp_path, monkeypatch):
    """Changing one byte of a source changes the key."""
    for name in codegen.SOURCES:
        with open(f"{codegen._HERE}/{name}", "rb") as f:
            (tmp_path / name).write_bytes(f.read())
    monkeypatch.setattr(codegen, "_HERE", str(tmp_path))
    first = codegen.source_key.__wrapped__()
    path = tmp_path / "laws.py"
    path.write_bytes(path.read_bytes() + b"#")
    assert codegen.source_key.__wrapped__() != first


def test_check_command_reports_current():
    out = subprocess.run([sys.executable, "-m", "constructions.codegen", "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "current" in out.stdout, out.stdout + out.stderr
    bad = subprocess.run([sys.executable, "-m", "constructions.codegen", "--bogus"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_command_rewrites_a_stale_file(fresh, tmp_path, monkeypatch, capsys):
    """``--check`` fails on a stale file and writes nothing; without it the file is rewritten to
    what the generator gives, after which ``--check`` passes."""
    entries, _ = fresh
    target = tmp_path / "generated.py"
    target.write_text(codegen.render({**entries, "KEY": "stale"}), encoding="utf-8")
    monkeypatch.setattr(codegen, "GENERATED", str(target))
    monkeypatch.setattr(codegen, "generate", lambda: entries)
    assert codegen.main(["--check"]) == 1 and "stale" in capsys.readouterr().out
    assert "KEY = 'stale'" in target.read_text(encoding="utf-8")
    assert codegen.main([]) == 0 and "written" in capsys.readouterr().out
    assert target.read_text(encoding="utf-8") == codegen.render(entries)
    assert codegen.main(["--check"]) == 0 and "current" in capsys.readouterr().out
