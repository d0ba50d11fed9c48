"""Every module the toolkit imports is installed by ``pip install -e .`` (README's first command),
or, for the two modules that say so, by the optional extra they name."""

from __future__ import annotations

import ast
import pathlib
import re
import sys
import tomllib
from importlib import metadata

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("constructions", "verify", "bounds")
# module -> the extra it needs, stated in its docstring or its error message
OPTIONAL = {"verify/strategies.py": "strategies", "bounds/cluster.py": "dask"}


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in PACKAGES}


def _distributions(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[;! ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_every_import_is_a_declared_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = _distributions(project["dependencies"])
    extras = {k: _distributions(v) for k, v in project["optional-dependencies"].items()}
    providers = metadata.packages_distributions()
    seen = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            allowed = required | extras.get(OPTIONAL.get(name, ""), set())
            for module in _imports(path):
                dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
                assert dists, f"{name} imports {module}, which no installed distribution provides"
                assert dists & allowed, f"{name} imports {module} ({sorted(dists)}), not declared"
                seen.add(module)
    assert {"numpy", "sympy", "flint", "scipy", "ml_dtypes", "matplotlib"} <= seen


def test_the_optional_modules_name_their_extra():
    for name, extra in OPTIONAL.items():
        assert f"counting-cost[{extra}]" in (ROOT / name).read_text(), name
