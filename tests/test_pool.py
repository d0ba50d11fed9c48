"""The sweep's worker pool (bounds.pool): rows in the order of the tasks whatever order they
complete in, a worker's exception raised in the parent, a worker that dies on its own a one-line
failure (never a wait), and no worker left behind."""

from __future__ import annotations

import os

import pytest

from bounds import pool
from constructions import cli
from constructions.cell import Cell

CELL = Cell("linear", "none", "regression")
TASKS = [(CELL, L) for L in (3, 1, 4, 1, 5, 9, 2, 6)]


def _no_warm(cell):
    return None


def _echo(cell, L, rtol, arc_boxes):
    return {"L": L, "pid": os.getpid()}


def _fails_at_5(cell, L, rtol, arc_boxes):
    if L == 5:
        raise ValueError("no row at L = 5")
    return {"L": L}


def _dies_at_5(cell, L, rtol, arc_boxes):
    if L == 5:
        os._exit(3)
    return {"L": L}


def _children() -> set[int]:
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as fh:
        return {int(p) for p in fh.read().split()}


def test_rows_in_task_order_from_the_workers():
    seen = []
    out = pool.rows(TASKS, jobs=2, compute=_echo, warm=_no_warm, done=lambda i, r: seen.append(i))
    assert [r["L"] for r in out] == [L for _, L in TASKS]
    assert sorted(seen) == list(range(len(TASKS)))
    assert os.getpid() not in {r["pid"] for r in out} and len({r["pid"] for r in out}) <= 2


def test_a_worker_s_exception_is_raised_here():
    with pytest.raises(ValueError, match="no row at L = 5"):
        pool.rows(TASKS, jobs=2, compute=_fails_at_5, warm=_no_warm)


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs /proc")
def test_a_worker_that_dies_is_a_failure_and_none_is_left():
    before = _children()
    with pytest.raises(cli.Failure, match="ended before its row"):
        pool.rows(TASKS, jobs=2, compute=_dies_at_5, warm=_no_warm)
    assert _children() == before  # every worker ended and reaped
