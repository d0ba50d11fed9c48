"""Sweep rows computed in local worker processes: the engine of ``bounds.sweep`` and ``bounds.grid``.

A *task* is a pair ``(cell, L)``; its row is ``bounds.search.row(cell, L, rtol, arc_boxes)``,
the same function whether it runs here, in a forked worker or on a remote worker, so where a
row is computed never changes it (rows are deterministic; only their ``seconds`` differ).

Workers are forked after every cell's compiled construction is built once
(:func:`bounds.search.warm_up`), so they inherit it; they take the largest ``L`` first (the
most expensive rows, for an even load) and report each row as it completes.  The parent owns
Ctrl-C and SIGTERM: each worker leaves the parent's process group (so a Ctrl-C at a terminal,
or a ``kill`` of the process group, reaches the parent alone) and ignores SIGINT, and whenever
the parent stops (done, interrupted, terminated, an error) it ends them with SIGTERM, whose
default action ends a worker wherever it is.  Why the parent alone: a worker waits for its next
task holding the task queue's lock, and a worker killed while holding it deadlocks the pool's
own shutdown (which takes that lock first); the parent sends SIGTERM only once it holds the
lock itself.  (Neither SIGKILL nor a SIGTERM handler that exits by exception is safe: a handler
runs only between bytecodes, and a SIGTERM arriving just before a worker blocks on the lock
leaves it blocked.)  A worker whose parent died unannounced (SIGKILL, of the parent or of its
group) gets SIGTERM from the kernel (Linux: ``prctl(PR_SET_PDEATHSIG)``; no task lock matters
once the parent is gone); elsewhere it reads the end of the task queue and exits, or exits on
the closed result pipe after the row it is computing.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
from typing import Callable, Sequence

from bounds.lower import ARC_BOXES
from bounds.search import row, warm_up
from constructions import cli
from constructions.cell import Cell


#: ``prctl``'s option: the signal a process receives when the thread that forked it ends
PR_SET_PDEATHSIG = 1


def _worker_init(parent: int) -> None:
    """A worker leaves the parent's process group, ignores Ctrl-C (the parent ends it), dies of
    SIGTERM, and gets SIGTERM if the parent dies (module docstring; the pool's workers are
    forked by the parent's calling thread, which outlives them); it starts with both held back
    by the parent (:func:`constructions.cli.held_signals`) and releases them here."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the request: it will not be signalled
        os._exit(128 + signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _indexed_row(job) -> tuple[int, dict]:
    index, compute, cell, L, rtol, arc_boxes = job
    return index, compute(cell, L, rtol, arc_boxes)


def rows(tasks: Sequence[tuple[Cell, int]], rtol: float = 1e-6, arc_boxes: int = ARC_BOXES,
         jobs: int = 1, done: Callable[[int, dict], None] | None = None,
         compute: Callable[..., dict] = row, warm: Callable[[Cell], None] = warm_up) -> list[dict]:
    """The row of every task, in the order of ``tasks``, computed in ``jobs`` forked processes
    (in this process if ``jobs <= 1``, for a single task, or where ``fork`` is unavailable).

    ``done(i, row)`` is called in this process as the row of ``tasks[i]`` completes (in order
    of completion), e.g. to store it or advance a progress bar.  ``compute(cell, L, rtol,
    arc_boxes)`` makes a row (default :func:`bounds.search.row`; a module-level function or a
    ``functools.partial`` of one, so that it reaches the workers); ``warm(cell)`` builds, before
    the workers are forked, what they inherit (default :func:`bounds.search.warm_up`).
    """
    out: list[dict | None] = [None] * len(tasks)

    def finished(i: int, r: dict) -> None:
        out[i] = r
        if done is not None:
            done(i, r)

    if jobs <= 1 or len(tasks) <= 1 or "fork" not in mp.get_all_start_methods():
        for i, (cell, L) in enumerate(tasks):
            finished(i, compute(cell, L, rtol, arc_boxes))
        return out
    for cell in dict.fromkeys(cell for cell, _ in tasks):
        warm(cell)
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][1])
    jobs_in_order = [(i, compute, *tasks[i], rtol, arc_boxes) for i in order]
    pool = None
    try:
        with cli.held_signals():  # delivered once the pool exists, so it is always ended
            pool = mp.get_context("fork").Pool(min(jobs, len(tasks)), initializer=_worker_init,
                                               initargs=(os.getpid(),))
        for i, r in pool.imap_unordered(_indexed_row, jobs_in_order, chunksize=1):
            finished(i, r)
        pool.close()
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    return out
