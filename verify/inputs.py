"""Every input of a cell's task up to ``L``, enumerated in a fixed order by its counts.

The output of the layer at the read position depends on an input ``(s, x_1, ..., x_m)`` only
through ``(n_a, n_b, q)``: the counts of ``a`` and ``b`` and the query token ``q`` of the read
position.  Attention is a sum over the attended positions, each term a function of that
position's token and of the query alone (the scores ``tau <h_q, h_j>`` and the values ``h_j``;
the softmax normaliser is the same sum), so permuting ``x_1..x_m`` changes nothing; the
residual adds ``e_q``.  At the BOS read ``q = s`` and position 0 attends to every position; at
the last read under a causal mask ``q = x_m`` (``s`` when ``m = 0``) and position ``m`` attends
to ``0..m``, i.e. again to every position.  So an input is the triple ``(n_a, n_b, q)``, with
``n_a + n_b = m <= L``, ``q = s`` iff (last read) ``m = 0``, and ``q`` one of the tokens present.

The inputs of a cell (:class:`InputSet`) are therefore:

* ``count`` at ``bos``: ``(n, 0, s)`` for ``n = 0..L`` -- ``L + 1`` inputs;
* ``count`` at ``last``: ``(0, 0, s)`` and ``(n, 0, a)`` for ``n = 1..L`` -- ``L + 1``;
* ``select`` at ``bos``: ``(n_a, n_b, s)`` for ``n_a + n_b <= L`` -- ``(L+1)(L+2)/2``;
* ``select`` at ``last``: ``(0, 0, s)``, and for each length ``m = 1..L`` the ``2m`` triples
  ``(n_a, m - n_a, a)`` for ``n_a = 1..m`` and ``(m - n_b, n_b, b)`` for ``n_b = 1..m`` --
  ``1 + L(L+1)``.

They are listed by length ``m`` first (so the first failing input is a shortest one), then in
the order above; the index of an input is closed-form, so any slice of the list is computed
directly (:meth:`InputSet.chunk`) and a judge can walk it in chunks of bounded memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from constructions.cell import Cell

#: the query tokens, coded as small integers in the arrays of :meth:`InputSet.chunk`
QUERY_TOKENS = ("s", "a", "b")
Q_S, Q_A, Q_B = range(3)


class Input(NamedTuple):
    """One input by its counts and the query token of the read position."""

    n_a: int
    n_b: int
    query: str

    def __str__(self) -> str:
        return f"n_a={self.n_a}, n_b={self.n_b}" + ("" if self.query == "s" else f", last {self.query}")


def _isqrt(x: np.ndarray) -> np.ndarray:
    """``floor(sqrt(x))`` for int64 ``x >= 0`` (float square root, corrected exactly)."""
    r = np.floor(np.sqrt(x.astype(np.float64))).astype(np.int64)
    r -= (r * r > x)
    r += ((r + 1) * (r + 1) <= x)
    return r


@dataclass(frozen=True)
class InputSet:
    """The inputs of ``cell``'s task and read position up to length ``L`` (module docstring)."""

    cell: Cell
    L: int

    @property
    def size(self) -> int:
        L = self.L
        if not self.cell.task.distractor:
            return L + 1
        return 1 + L * (L + 1) if self.cell.read.last else (L + 1) * (L + 2) // 2

    @property
    def by_count(self) -> bool:
        """Whether an input is named by its count ``n`` alone (the count task at the BOS read)."""
        return not self.cell.task.distractor and not self.cell.read.last

    def chunk(self, start: int, stop: int):
        """``(n_a, n_b, query)`` int64 arrays of the inputs ``start..stop-1`` (query coded by
        :data:`QUERY_TOKENS`)."""
        i = np.arange(start, min(stop, self.size), dtype=np.int64)
        if not self.cell.task.distractor:
            n_a, n_b = i, np.zeros_like(i)
        elif not self.cell.read.last:
            # index = m (m + 1) / 2 + n_a
            m = (_isqrt(8 * i + 1) - 1) // 2
            n_a = i - m * (m + 1) // 2
            n_b = m - n_a
        else:
            # index = 1 + m (m - 1) + j, j = 0..2m-1; j < m: last a, n_a = j + 1; else last b
            k = np.maximum(i - 1, 0)
            m = (1 + _isqrt(4 * k + 1)) // 2  # the largest m with m (m - 1) <= k
            j = k - m * (m - 1)
            last_a = j < m
            n_b = np.where(last_a, m - (j + 1), j - m + 1)
            n_a = m - n_b
            n_a, n_b = np.where(i == 0, 0, n_a), np.where(i == 0, 0, n_b)
            query = np.where(i == 0, Q_S, np.where(last_a, Q_A, Q_B))
            return n_a, n_b, query
        if self.cell.read.last:
            query = np.where(n_a + n_b == 0, Q_S, Q_A)
        else:
            query = np.full(i.shape, Q_S)
        return n_a, n_b, query

    def label(self, index: int):
        """The input at ``index``: its count ``n`` (:attr:`by_count`) or an :class:`Input`."""
        n_a, n_b, q = (int(x[0]) for x in self.chunk(index, index + 1))
        return n_a if self.by_count else Input(n_a, n_b, QUERY_TOKENS[q])
