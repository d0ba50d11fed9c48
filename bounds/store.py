"""A results store on disk: one file per sweep row, keyed by everything that determines the row.

A row ``bounds.search.row(cell, L, rtol, arc_boxes)`` is a function of the cell (its keys
:meth:`constructions.cell.Cell.keys`: attention, variant, norm, affine, read-out, ``d``,
``eps``, task, read position), ``L``, the tolerances (``rtol`` and the lower bound's box cap)
and the code, which the toolkit version ``constructions.__version__`` names.  :func:`key` is
that dictionary; the entry of a key is the file ``<sha256 of its canonical JSON>.json`` in the
store's directory, holding ``{"key": ..., "row": ...}``.

Guarantees:

* an entry is whole or absent: it is written to a temporary file in the same directory and
  renamed over its name (:func:`constructions.cli.write_files`), so a run killed at any moment
  (even by SIGKILL) leaves every entry either complete or untouched;
* an entry is served only for its own key: :meth:`Store.get` reads the file, and returns its
  row only if it parses as JSON and its stored key equals the key asked for (a file that is
  unreadable, truncated, edited, from another version or another key -- a hash collision --
  is a miss, and the row is recomputed and the entry rewritten);
* concurrent runs on one store are safe: each rename is atomic, and two runs that compute the
  same row write the same row.

Rows are stored as JSON, so a row read back equals the row written after a JSON round trip
(floats round-trip exactly; tuples read back as lists), which is what the commands print.
"""

from __future__ import annotations

import hashlib
import json
import os

from constructions import __version__, cli
from constructions.cell import Cell


def key(cell: Cell, L: int, rtol: float, lower_boxes: int) -> dict:
    """Everything that determines the row of ``(cell, L)`` (module docstring)."""
    return {**cell.keys(), "L": L, "rtol": rtol, "lower_boxes": lower_boxes,
            "version": __version__}


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def entry_name(k: dict) -> str:
    """The file name of a key's entry."""
    return hashlib.sha256(_canonical(k).encode()).hexdigest() + ".json"


class Store:
    """The store in the directory ``folder`` (created on the first write)."""

    def __init__(self, folder: str):
        self.folder = folder

    def path(self, k: dict) -> str:
        return os.path.join(self.folder, entry_name(k))

    def get(self, k: dict) -> dict | None:
        """The stored row of key ``k``, or None (absent, unreadable or not that key's)."""
        try:
            with open(self.path(k), encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):  # absent, unreadable, not JSON or not UTF-8
            return None
        if (not isinstance(entry, dict) or entry.get("key") != k
                or not isinstance(entry.get("row"), dict) or entry["row"].get("L") != k["L"]):
            return None
        return entry["row"]

    def put(self, k: dict, row: dict) -> None:
        """Store ``row`` as the entry of ``k``, atomically (an ``OSError`` leaves the old one)."""
        cli.write_files(self.folder, {entry_name(k): json.dumps({"key": k, "row": row}) + "\n"})
