"""Sweep rows on a Dask distributed cluster (the optional extra ``counting-cost[dask]``).

Every row is one task, ``remote_row(cell, L, rtol, arc_boxes)``, which runs
``bounds.search.row`` -- the function the local pool (:mod:`bounds.pool`) and the serial sweep
run -- so a row computed on the cluster equals the row computed here (rows are deterministic;
only their ``seconds`` differ).  The workers must have the toolkit installed; each task
returns the worker's toolkit version with its row, and a row from another version is refused
(it would be stored under this version's key).

Rows on one worker process run one at a time: the working precisions of mpmath and of
python-flint's ball arithmetic are process-wide settings, so two rows in two threads of one
process could change each other's precision.  Start workers with one thread each
(``dask worker ADDRESS --nthreads 1 --nworkers N``) to use every core.

Tasks are submitted largest ``L`` first (the most expensive rows), and each row is handed to
the caller as it arrives, so a client or worker that dies loses only the rows in flight: the
scheduler reruns the tasks of a lost worker elsewhere, and a rerun of the client finds the
rows it already stored.  dask is imported only here, when a scheduler address is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Callable, Sequence

from bounds.search import row
from constructions import __version__, cli
from constructions.cell import Cell

#: seconds to wait for the scheduler before giving up
CONNECT_TIMEOUT = 5.0
#: one row at a time per worker process (module docstring)
_ROW_LOCK = threading.Lock()


def remote_row(cell: Cell, L: int, rtol: float, arc_boxes: int) -> tuple[str, dict]:
    """On a worker: ``(its toolkit version, the row of (cell, L))``."""
    with _ROW_LOCK:
        return __version__, row(cell, L, rtol, arc_boxes)


def connect(address: str):
    """A ``distributed.Client`` of the scheduler at ``address``; :class:`UsageError` (one line)
    when dask is not installed or the scheduler cannot be reached within
    :data:`CONNECT_TIMEOUT` seconds."""
    try:
        import distributed
    except ImportError:
        raise cli.UsageError("--scheduler needs dask.distributed, which is not installed "
                             "(pip install 'counting-cost[dask]')") from None
    import distributed.comm

    async def probe():
        comm = await distributed.comm.connect(address, timeout=CONNECT_TIMEOUT)
        await comm.close()

    # the client's own log lines (reconnection attempts, a lost scheduler, shutdown) are not
    # this command's output: its failures are reported once, as the command's one line
    for name in ("distributed", *logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        # a malformed address, no scheduler, or a server that is not one fails the probe, before
        # a client exists (a client that fails to start hangs in its finaliser)
        asyncio.run(probe())
        return distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except Exception as exc:  # whatever the failure, the scheduler cannot be used
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise cli.UsageError(f"--scheduler {address}: cannot connect: {reason}") from None


def rows(address: str, tasks: Sequence[tuple[Cell, int]], rtol: float, arc_boxes: int,
         done: Callable[[int, dict], None]) -> None:
    """Compute the row of every task on the cluster at ``address``; ``done(i, row)`` is called
    here as the row of ``tasks[i]`` arrives.  A task that fails (an error in the row, a worker
    that cannot import the toolkit, a task that killed its workers again and again) or a
    worker of another toolkit version is a :class:`constructions.cli.Failure`."""
    client = connect(address)
    import distributed

    try:
        futures = {client.submit(remote_row, cell, L, rtol, arc_boxes, pure=False, priority=L): i
                   for i, (cell, L) in enumerate(tasks)}
        for future in distributed.as_completed(futures, loop=client.loop):
            try:
                version, result = future.result()
            except Exception as exc:  # raised on the worker, or the task was lost
                reason = " ".join(str(exc).split())
                cell, L = tasks[futures[future]]
                raise cli.Failure(f"the row L = {L} of {cell.describe()} failed on the cluster "
                                  f"({type(exc).__name__}: {reason}); the rows stored are kept, "
                                  "a rerun computes the others") from None
            if version != __version__:
                raise cli.Failure(f"a worker runs counting-cost {version}, this command "
                                  f"{__version__}: install the same version on every worker")
            done(futures[future], result)
    finally:  # the rows already handed over are stored; a failing shutdown changes nothing
        with contextlib.suppress(Exception):
            client.close(timeout=CONNECT_TIMEOUT)
