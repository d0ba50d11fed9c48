"""The registry of constructions (:mod:`constructions.registry`) against the refusals.

* On a grid of every part (attention, placement, kind, affine, read-out, task, read, ``d`` in
  ``{2, 3, 8}``, ``eps`` in ``{0, 0.01}``), and on random cells of any width, a cell is served by
  an entry of its read-out's table iff :func:`constructions.refusals.refusal` gives no reason:
  the two statements, written apart, cannot drift.
* The entries of a table serve disjoint sets (so "the first entry" is "the entry"), each serves
  some cell of the grid and names a design class of its read-out.
* ``design(cell)`` (regression and classification) builds the serving entry's class, and refuses
  every other cell with the refusal's reason; the modules' own predicates (``last_post.built``,
  ``select_last.built``, ``two_value_select.applies``, ``select.suppresses``) name exactly the cells
  whose construction is theirs.
* Asking the registry loads neither sympy nor a design module.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from constructions import classification, last_post, regression, registry, select, select_last, two_value_select
from constructions.cell import (ATTENTIONS, KINDS, MAX_D, NORMS, READOUTS, READS, TASKS, VARIANTS, Cell,
                              architectures)
from constructions.classification import ClassificationDesign
from constructions.refusals import refusal

GRID = [cell for task, read, d, eps in itertools.product(TASKS, READS, (2, 3, 8), (0.0, 0.01))
        for cell in architectures(d=d, eps=eps, task=task, read=read)]
DESIGN = {"regression": regression.design, "classification": classification.design}
BASE = {"regression": regression.RegressionDesign, "classification": ClassificationDesign}


def _served(cell: Cell) -> list:
    return [e for e in registry.TABLES[cell.readout] if e.serves(cell)]


def test_the_grid_holds_every_part():
    """The grid is what it claims: every value of every part occurs (an independent count)."""
    assert len(GRID) == len(set(GRID)) == 2 * 2 * 13 * 2 * 2 * 3 * 2
    keys = [c.keys() for c in GRID]
    for part, values in (("attention", ATTENTIONS), ("readout", READOUTS), ("variant", NORMS),
                         ("norm", tuple(KINDS)), ("affine", ("bare", "gain", "gain_bias")),
                         ("task", tuple(TASKS)), ("read", tuple(READS)), ("d", (2, 3, 8)),
                         ("eps", (0.0, 0.01))):
        assert {k[part] for k in keys} == set(values), part


def test_a_cell_is_built_iff_it_is_not_refused():
    for cell in GRID:
        why, served = refusal(cell), _served(cell)
        assert (why is None) == bool(served), (cell.describe(), cell.keys(), why, served)


def test_the_entries_of_a_table_are_disjoint():
    for cell in GRID:
        served = _served(cell)
        assert len(served) <= 1, (cell.keys(), [e.name for e in served])
        assert registry.serving(cell) == (served[0] if served else None)


@st.composite
def cells(draw):
    variant = draw(st.sampled_from(NORMS))
    learned = VARIANTS[variant][1]
    return Cell(draw(st.sampled_from(ATTENTIONS)), variant, draw(st.sampled_from(READOUTS)),
                d=draw(st.one_of(st.integers(2, 12), st.integers(2, MAX_D))),
                eps=draw(st.sampled_from([0.0, 1e-12, 1e-5, 0.5, 3.0])),
                norm=draw(st.sampled_from(tuple(KINDS))),
                affine=draw(st.sampled_from(("gain", "gain_bias"))) if learned else None,
                task=draw(st.sampled_from(tuple(TASKS))), read=draw(st.sampled_from(tuple(READS))))


@given(cells())
def test_random_cells_agree_with_the_refusals(cell):
    served = _served(cell)
    assert len(served) <= 1
    assert (refusal(cell) is None) == bool(served), (cell.keys(), refusal(cell))


@pytest.mark.parametrize("readout", READOUTS)
def test_every_entry_serves_a_cell_and_names_a_design_of_its_readout(readout):
    for entry in registry.TABLES[readout]:
        assert any(entry.serves(c) for c in GRID if c.readout == readout), entry
        cls = entry.load()
        assert issubclass(cls, BASE[readout]) and cls.__module__ == f"constructions.{entry.module}", entry


@pytest.mark.parametrize("readout", READOUTS)
def test_design_builds_the_serving_entry_or_refuses_with_the_reason(readout):
    for cell in (c for c in GRID if c.readout == readout):
        entry = registry.serving(cell)
        if entry is None:
            with pytest.raises(ValueError) as info:
                DESIGN[readout](cell)
            assert refusal(cell) in str(info.value)
        else:
            assert type(DESIGN[readout](cell)) is entry.load(), cell.keys()
    other = next(c for c in GRID if c.readout != readout)
    with pytest.raises(ValueError, match=f"is for {readout} cells"):
        DESIGN[readout](other)


def test_the_modules_predicates_name_their_own_cells():
    """Each module's predicate holds exactly where ``design`` builds a class of that module
    (``last_post.built`` for either read-out)."""
    for cell in GRID:
        why = refusal(cell)
        module = None if why else type(DESIGN[cell.readout](cell)).__module__
        assert last_post.built(cell) == (module == "constructions.last_post"), cell.keys()
        assert select_last.built(cell) == (module == "constructions.select_last"), cell.keys()
        assert two_value_select.applies(cell) == (module == "constructions.two_value_select"), cell.keys()
        assert select.suppresses(cell) == (module == "constructions.select"), cell.keys()


_PROBE = """
import sys
from constructions import registry
from constructions.cell import architectures
served = [registry.serving(c) for task in ("count", "select") for read in ("bos", "last")
          for c in architectures(d=3, task=task, read=read)]
assert any(served)
loaded = [m for m in ("sympy", "constructions.tasks", "constructions.last_read", "constructions.select",
                      "constructions.select_last", "constructions.last_post", "constructions.steps")
          if m in sys.modules]
print(",".join(loaded) or "NONE")
"""


def test_asking_the_registry_loads_no_design_and_no_sympy():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(registry.__file__)))).stdout
    assert out.strip() == "NONE"


def test_every_regression_entry_has_its_lower_bound():
    """bounds.lower.LOWER is keyed by the regression entries, one each: an entry added without
    its bound (or a bound left behind by a removed entry) fails here, not in a sweep."""
    from bounds.lower import LOWER

    for table in registry.TABLES.values():
        keys = [e.key for e in table]
        assert len(keys) == len(set(keys))
    assert set(LOWER) == {e.key for e in registry.REGRESSION}


@pytest.mark.parametrize("cell", [c for c in GRID if c.readout == "regression"
                                  and registry.serving(c) is None][:40])
def test_an_unserved_cell_has_no_lower_bound(cell):
    """A cell no construction serves has no row, so no B_lower either."""
    from bounds.lower import b_lower

    assert b_lower(cell, 4, 1.0) is None


@pytest.mark.parametrize("task", TASKS)
def test_post_layernorm_at_d_2_is_not_called_impossible_at_eps(task):
    """At d = 2 with eps = 0 post-LayerNorm has two outputs (built: L = 1, and rows beyond it say
    that nothing counts); with eps > 0 its outputs fill a segment, so the refusal may only say
    that no construction is derived."""
    for attention in ATTENTIONS:
        cell = Cell(attention, "post_bare", d=2, task=task, read="last")
        assert refusal(cell) is None and registry.serving(cell) is not None
        assert "not derived" in refusal(cell.replace(eps=0.01))
