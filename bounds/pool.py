"""Sweep rows computed in local worker processes: the engine of ``bounds.sweep`` and ``bounds.grid``.

A *task* is a pair ``(cell, L)``; its row is ``bounds.search.row(cell, L, rtol, arc_boxes)``,
the same function whether it runs here, in a forked worker or on a remote worker, so where a
row is computed never changes it (rows are deterministic; only their ``seconds`` differ).

Workers are forked after every cell's compiled construction is built once
(:func:`bounds.search.warm_up`), so they inherit it and the list of tasks; the parent hands
each idle worker the index of the next task, the largest ``L`` first (the most expensive rows,
for an even load), and reports each row as it completes.

**Nothing is shared between the processes but their own pipes.**  Each worker has a pipe in
(task indices, 4 bytes each) and a pipe out (length-prefixed pickles of its results), written
and read by no one else, so a worker may die at any instant without leaving a lock held or a
message half-read by another (``multiprocessing.Pool`` shares one task queue behind a lock that
an idle worker holds while it waits: a worker killed then -- e.g. by a SIGTERM to the whole
process group -- made the pool's shutdown, which takes that lock, wait forever).  The parent
owns Ctrl-C and SIGTERM: each worker leaves the parent's process group (a Ctrl-C at a terminal,
or a ``kill`` of the group, reaches the parent alone) and ignores SIGINT.  When every row is
done the parent closes the task pipes and the workers exit at their end; when it stops early
(interrupted, terminated, an error) it ends them with SIGTERM, then SIGCONT (a stopped
worker acts on its SIGTERM only once continued), with SIGINT and SIGTERM held back meanwhile
so that a second signal cannot leave a worker running.  A worker whose parent died
unannounced (SIGKILL) gets SIGTERM from the kernel (Linux: ``prctl(PR_SET_PDEATHSIG)``), and
elsewhere ends at the closed pipes.  A worker that dies on its own is a failure of the run
(:class:`constructions.cli.Failure`, one line), never a wait; so is a message cut short
by a worker dying as it writes, or one that does not load.  An exception whose pickle does not
load (e.g. its ``__init__`` takes other arguments than its ``args``) is sent as a
``RuntimeError`` with its type and text.  The parent waits on the result pipes with ``poll``,
which, unlike ``select``, takes descriptors of any number.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import sys
from collections import deque
from typing import Callable, Sequence

from bounds.lower import ARC_BOXES
from bounds.search import row, warm_up
from constructions import cli
from constructions.cell import Cell

#: ``prctl``'s option: the signal a process receives when the thread that forked it ends
PR_SET_PDEATHSIG = 1


def _worker_init(parent: int) -> None:
    """A worker leaves the parent's process group, ignores Ctrl-C (the parent ends it), dies of
    SIGTERM, and gets SIGTERM if the parent dies (module docstring; the parent forks its workers
    from the thread that waits for them); it starts with both held back by the parent
    (:func:`constructions.cli.held_signals`) and releases them here."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the request: it will not be signalled
        os._exit(128 + signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None at the end of the pipe before the first byte."""
    parts, got = [], 0
    while got < size:
        chunk = os.read(fd, size - got)
        if not chunk:
            if got:
                raise EOFError("a message ended midway")
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _serve(tasks_in: int, results_out: int, jobs: list, compute: Callable[..., dict],
           rtol: float, arc_boxes: int) -> None:
    """A worker's loop: read a task index, compute its row, send back the pickle of ``(index,
    True, row)`` (or ``(index, False, exception)``), until the task pipe ends."""
    while (head := _read_exactly(tasks_in, 4)) is not None:
        index = int.from_bytes(head, "little")
        cell, L = jobs[index]
        try:
            message = (index, True, compute(cell, L, rtol, arc_boxes))
        except Exception as exc:  # reported by the parent, as if raised there
            message = (index, False, exc)
        try:
            data = pickle.dumps(message)
            if not message[1]:  # an exception whose pickle does not load (e.g. its __init__
                pickle.loads(data)  # takes other arguments than its args) is sent as text
        except Exception:
            problem = message[2] if not message[1] else sys.exc_info()[1]
            text = RuntimeError(f"{type(problem).__name__}: {problem}")
            data = pickle.dumps((index, False, text))
        _write_all(results_out, len(data).to_bytes(8, "little") + data)


def _receive(results: int, pid: int) -> tuple:
    """The next message ``(index, ok, value)`` of the worker ``pid`` from its result pipe; a
    message that ends early (the worker died while writing it) or does not load is a
    :class:`constructions.cli.Failure`, like a worker that ended before its row."""
    try:
        head = _read_exactly(results, 8)
        if head is not None:
            return pickle.loads(_read_exactly(results, int.from_bytes(head, "little")))
    except (EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError) as exc:
        raise cli.Failure(f"the result of a worker process (pid {pid}) is unreadable: "
                          f"{type(exc).__name__}: {exc}") from None
    raise cli.Failure(f"a worker process (pid {pid}) ended before its row")


def _fork_worker(parent: int, inherited: list[int], jobs: list, compute, rtol, arc_boxes):
    """``(pid, task pipe's write end, result pipe's read end)`` of a new worker; the child
    closes the parent's ends of the earlier workers' pipes (``inherited``) and never returns.
    Where no pipe or process can be made (descriptors or processes exhausted): a
    :class:`constructions.cli.Failure` naming it, and nothing of the attempt left open."""
    made: list[int] = []
    try:
        tasks_in, tasks_out = os.pipe()
        made += [tasks_in, tasks_out]
        results_in, results_out = os.pipe()
        made += [results_in, results_out]
        pid = os.fork()
    except OSError as exc:
        for fd in made:
            os.close(fd)
        raise cli.Failure(f"cannot start a worker process: {exc.strerror or exc}") from None
    if pid == 0:  # the worker
        status = 1
        try:
            for fd in (*inherited, tasks_out, results_in):
                os.close(fd)
            _worker_init(parent)
            _serve(tasks_in, results_out, jobs, compute, rtol, arc_boxes)
            status = 0
        finally:
            os._exit(status)  # no parent's cleanup, buffers or handlers run here
    os.close(tasks_in)
    os.close(results_out)
    return pid, tasks_out, results_in


def rows(tasks: Sequence[tuple[Cell, int]], rtol: float = 1e-6, arc_boxes: int = ARC_BOXES,
         jobs: int = 1, done: Callable[[int, dict], None] | None = None,
         compute: Callable[..., dict] = row, warm: Callable[[Cell], None] = warm_up) -> list[dict]:
    """The row of every task, in the order of ``tasks``, computed in ``jobs`` forked processes
    (in this process if ``jobs <= 1``, for a single task, or where ``fork`` is unavailable).

    ``done(i, row)`` is called in this process as the row of ``tasks[i]`` completes (in order
    of completion), e.g. to store it or advance a progress bar.  ``compute(cell, L, rtol,
    arc_boxes)`` makes a row (default :func:`bounds.search.row`); ``warm(cell)`` builds, before
    the workers are forked, what they inherit (default :func:`bounds.search.warm_up`).  An
    exception raised by ``compute`` in a worker is raised here.
    """
    out: list[dict | None] = [None] * len(tasks)

    def finished(i: int, r: dict) -> None:
        out[i] = r
        if done is not None:
            done(i, r)

    if jobs <= 1 or len(tasks) <= 1 or not hasattr(os, "fork"):
        for i, (cell, L) in enumerate(tasks):
            finished(i, compute(cell, L, rtol, arc_boxes))
        return out
    for cell in dict.fromkeys(cell for cell, _ in tasks):
        warm(cell)
    work = list(tasks)
    waiting = deque(sorted(range(len(work)), key=lambda i: -work[i][1]))
    workers: dict[int, tuple[int, int]] = {}  # result pipe -> (pid, task pipe)
    busy: set[int] = set()
    poller = select.poll()
    finished_normally = False

    def hand_out(results: int) -> None:
        """The next task to the worker of ``results``, or the end of its task pipe."""
        pid, task_pipe = workers[results]
        if waiting:
            try:
                _write_all(task_pipe, waiting.popleft().to_bytes(4, "little"))
            except BrokenPipeError:  # not the command's stdout: the worker is gone
                raise cli.Failure(f"a worker process (pid {pid}) ended before its row") from None
            busy.add(results)
        else:
            busy.discard(results)
            with contextlib.suppress(KeyError):
                poller.unregister(results)
            with contextlib.suppress(OSError):
                os.close(task_pipe)
            workers[results] = (pid, -1)

    try:
        with cli.held_signals():  # delivered once every worker is known, so each is ended
            parent = os.getpid()
            for _ in range(min(jobs, len(work))):
                inherited = [fd for pair in workers.items() for fd in (pair[0], pair[1][1])]
                pid, task_pipe, results = _fork_worker(parent, inherited, work, compute, rtol, arc_boxes)
                workers[results] = (pid, task_pipe)
        for results in list(workers):
            hand_out(results)
        for results in busy:  # poll, not select: no limit on the descriptors' numbers
            poller.register(results, select.POLLIN)
        while busy:
            for results, _ in poller.poll():
                index, ok, value = _receive(results, workers[results][0])
                if not ok:
                    raise value
                finished(index, value)
                hand_out(results)
        finished_normally = True
    finally:
        with cli.held_signals():  # a second Ctrl-C or SIGTERM cannot leave a worker running
            for results, (pid, task_pipe) in workers.items():
                if not finished_normally:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
                        os.kill(pid, signal.SIGCONT)  # a stopped worker's SIGTERM waits for it
                for fd in (task_pipe, results):
                    if fd >= 0:
                        with contextlib.suppress(OSError):
                            os.close(fd)
        for pid, _ in workers.values():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return out
