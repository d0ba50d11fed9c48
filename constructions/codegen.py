"""Generated code: what sympy computes for the numeric paths, stored once so that they run
without sympy.

Two kinds of entries, each under a string key:

* :func:`lambdified` ``(key, module, make)``: the function ``make()`` returns, a
  ``sympy.lambdify`` of an expression for ``module`` (``"mpmath"`` or ``"numpy"``).  The
  generated entry is the *source text* lambdify wrote for it; executed in the module's namespace
  it is the same function: the same code with every name bound to the same object (the tests
  regenerate every entry and check both, name by name).
* :func:`cached` ``(key, compute)``: a value ``compute()`` derives in sympy, made only of
  strings, numbers, booleans, None, lists and dicts (e.g. the exact leading constants of
  :func:`bounds.fit.leading_constant`), stored as a Python literal.

The entries live in :mod:`constructions.generated`, written by ``python -m constructions.codegen``
(:func:`generate` of the cells of :func:`cells`, the default sweep's).  They are used only
while they are current: :data:`constructions.generated.KEY` must equal :func:`source_key`, the
SHA-256 of the modules the entries are derived from (:data:`SOURCES`); any edit to one of them
makes every entry stale, and then each call computes its entry with sympy as before (correct,
only slower) until the file is regenerated.  A key absent from the file is computed the same
way.  Either path returns the same function or value, so where an entry comes from never
changes a result.

    python -m constructions.codegen [--check]

writes :mod:`constructions.generated` (``--check``: writes nothing, exit status 1 if the file
is not what :func:`generate` gives now).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import inspect
import os
import sys
from typing import Callable

#: the modules (in this package) the generated entries are derived from: the constructions'
#: steps and laws (with the leading terms), the frame, the symbols, the cell, the arc family
#: and this generator
SOURCES = ("arc.py", "basis.py", "cell.py", "codegen.py", "laws.py", "regression.py", "steps.py",
           "symbols.py")

_HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = os.path.join(_HERE, "generated.py")

#: while :func:`recording`: the entries made, by key
_RECORD: dict | None = None


@functools.cache
def source_key() -> str:
    """The SHA-256 of the files of :data:`SOURCES`, in that order (each preceded by its name)."""
    h = hashlib.sha256()
    for name in SOURCES:
        with open(os.path.join(_HERE, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


@functools.cache
def _entries() -> tuple[dict, dict]:
    """``(FUNCTIONS, VALUES)`` of :mod:`constructions.generated` where it is current, else empty."""
    try:
        from constructions import generated
    except ImportError:
        return {}, {}
    if getattr(generated, "KEY", None) != source_key():
        return {}, {}
    return generated.FUNCTIONS, generated.VALUES


def namespace(module: str) -> dict:
    """The names a generated function of ``module`` is executed with: the module's own
    (``mpmath``, ``numpy``), ``reduce`` (which lambdify's printers import for a minimum of more
    than two terms) and the builtins, as in lambdify's namespace for that module (the tests
    check every name the generated functions use)."""
    if module == "mpmath":
        import mpmath as numbers
    elif module == "numpy":
        import numpy as numbers
    else:
        raise ValueError(f"no generated namespace for the module {module!r}")
    return {**vars(numbers), "reduce": functools.reduce, "builtins": builtins, "range": range}


def _function(key: str, module: str, source: str) -> Callable:
    ns = namespace(module)
    exec(compile(source, f"<generated {key}>", "exec"), ns)
    return ns["_lambdifygenerated"]


def lambdified(key: str | None, module: str, make: Callable[[], Callable]) -> Callable:
    """The function ``make()`` lambdifies for ``module``: from its generated source where that is
    current (module docstring), else ``make()`` itself.  ``key`` None: always ``make()``."""
    if _RECORD is not None and key is not None:
        fn = make()
        _RECORD["functions"][key] = (module, inspect.getsource(fn))
        return fn
    entry = _entries()[0].get(key) if key is not None else None
    if entry is None or entry[0] != module:
        return make()
    return _function(key, module, entry[1])


def cached(key: str | None, compute: Callable[[], object]):
    """``compute()``, or its generated value where that is current (module docstring)."""
    if _RECORD is not None and key is not None:
        value = compute()
        _RECORD["values"][key] = value
        return value
    values = _entries()[1]
    if key is None or key not in values:
        return compute()
    return values[key]


def cell_key(cell) -> str:
    """A cell as a key: its parts (:meth:`constructions.cell.Cell.keys`) in order."""
    return ",".join(f"{k}={v}" for k, v in cell.keys().items())


@contextlib.contextmanager
def recording():
    """Within: every :func:`lambdified` and :func:`cached` call computes its entry with sympy
    and records it; yields the record ``{"functions": ..., "values": ...}``."""
    global _RECORD
    before, _RECORD = _RECORD, {"functions": {}, "values": {}}
    try:
        yield _RECORD
    finally:
        _RECORD = before


def cells() -> list:
    """The cells whose entries are generated: every regression architecture of the default sweep
    (``d = 8``, ``eps = 0``, the count task read at ``bos``)."""
    from constructions.cell import architectures

    return architectures(("regression",), d=8, eps=0.0)


def generate() -> dict:
    """Every entry, computed with sympy: ``{"KEY", "FUNCTIONS", "VALUES"}``.

    Fresh objects are built (never the cached designs of the process), so each entry is made
    by sympy here: the arc family's functions, and per cell of :func:`cells` its construction
    and capacities (:meth:`constructions.regression.RegressionDesign.compiled_parts`) and its
    leading term (:func:`constructions.laws.leading_term_fields`).
    """
    from constructions import arc, laws, regression

    with recording() as record:
        arc.compiled.__wrapped__()
        for cell in cells():
            regression.design.__wrapped__(cell).compiled_parts()
            laws.leading_term_fields(cell)
    return {"KEY": source_key(), "FUNCTIONS": dict(sorted(record["functions"].items())),
            "VALUES": dict(sorted(record["values"].items()))}


def render(entries: dict) -> str:
    """The text of :mod:`constructions.generated` for ``entries`` (of :func:`generate`)."""
    head = ('"""Generated by ``python -m constructions.codegen`` (:mod:`constructions.codegen`): do '
            'not edit.\n\nThe sources lambdify wrote for the numeric paths, and values derived in '
            'sympy, under\nthe key of the modules they come from (used only while ``KEY`` is '
            'current)."""\n\n')
    def table(d: dict) -> str:
        return "{\n" + "".join(f"    {k!r}:\n        {v!r},\n" for k, v in d.items()) + "}\n"

    return (head + f"KEY = {entries['KEY']!r}\n\nFUNCTIONS = {table(entries['FUNCTIONS'])}\n"
            f"VALUES = {table(entries['VALUES'])}")


def main(argv=None) -> int:
    from constructions import cli

    def parse(args):
        p = cli.Parser(prog="python -m constructions.codegen",
                       description="write (or check) constructions/generated.py")
        p.add_argument("--check", action="store_true",
                       help="write nothing; exit status 1 if the file is not current")
        return p.parse_args(args)

    def execute(args) -> int:
        # run as ``python -m`` this is ``__main__``: record in the module the constructions import
        from constructions import codegen

        text = codegen.render(codegen.generate())
        try:
            with open(codegen.GENERATED, encoding="utf-8") as f:
                current = f.read() == text
        except FileNotFoundError:
            current = False
        if args.check:
            cli.emit(f"{codegen.GENERATED}: "
                     + ("current" if current else "stale: run python -m constructions.codegen"))
            return 0 if current else 1
        if not current:
            folder, name = os.path.split(codegen.GENERATED)
            cli.write_files(folder, {name: text})
        cli.emit(f"{codegen.GENERATED}: " + ("unchanged" if current else "written"))
        return 0

    return cli.run("codegen", parse, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
