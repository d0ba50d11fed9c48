"""The worker pool (bounds.pool) under hostile conditions: results that do not travel (an
exception whose pickle does not load, a message cut short by a dying worker, large rows),
descriptors numbered past select's limit, no pipe left open in the parent and none of another
worker's pipes held by a worker, a stopped worker when the run stops early, a callback that
raises, and a signal to the whole process group or a SIGKILL of the parent."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from bounds import pool
from constructions import cli
from constructions.cell import Cell

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/task") or not hasattr(os, "fork"),
                                reason="needs fork and /proc")

CELL = Cell("linear", "none", "regression")
TASKS = [(CELL, L) for L in (3, 1, 4, 1, 5, 9, 2, 6)]


def _no_warm(cell):
    return None


def _children() -> set[int]:
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as fh:
        return {int(p) for p in fh.read().split()}


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _pipes() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with __import__("contextlib").suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("pipe:"):
                out.add(target)
    return out


class _TwoArgs(Exception):
    def __init__(self, a, b):
        super().__init__(f"bad pair {a}, {b}")


def _unloadable_at_5(cell, L, rtol, arc_boxes):
    if L == 5:
        raise _TwoArgs(1, 2)  # pickles, but its pickle calls _TwoArgs("bad pair 1, 2"): no load
    return {"L": L}


def _echo(cell, L, rtol, arc_boxes):
    return {"L": L}


def _large(cell, L, rtol, arc_boxes):
    return {"L": L, "blob": bytes([L]) * ((1 << 20) + L)}  # past any pipe buffer


def _my_pipes(cell, L, rtol, arc_boxes):
    return {"L": L, "pipes": sorted(_pipes())}


def test_an_exception_whose_pickle_does_not_load_arrives_as_its_text():
    """Never the unpickling's own TypeError.  (Where a library has made such exceptions load --
    ``tblib``'s pickling support, which ``distributed`` installs in its process -- the exception
    arrives as itself.)"""
    with pytest.raises((RuntimeError, _TwoArgs), match="bad pair 1, 2") as caught:
        pool.rows(TASKS, jobs=2, compute=_unloadable_at_5, warm=_no_warm)
    if caught.type is RuntimeError:
        assert "_TwoArgs: bad pair 1, 2" in str(caught.value)


def test_a_message_cut_short_is_a_failure_and_none_is_left(monkeypatch):
    real, parent = pool._write_all, os.getpid()

    def dies_midway(fd, data):  # inherited by the forked workers: each dies in its first reply
        if os.getpid() == parent:  # the parent's task indices
            return real(fd, data)
        real(fd, data[:len(data) // 2])
        os._exit(9)

    monkeypatch.setattr(pool, "_write_all", dies_midway)
    before, fds = _children(), _fds()
    with pytest.raises(cli.Failure, match="unreadable|ended before its row"):
        pool.rows(TASKS, jobs=2, compute=_large, warm=_no_warm)
    assert _children() == before and _fds() == fds


def test_rows_larger_than_a_pipe_arrive_whole_and_no_pipe_is_left_open():
    fds = _fds()
    out = pool.rows(TASKS, jobs=2, compute=_large, warm=_no_warm)
    assert [(r["L"], r["blob"]) for r in out] == [(L, bytes([L]) * ((1 << 20) + L)) for _, L in TASKS]
    assert _fds() == fds


def test_descriptors_past_1024_are_served():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1200:
        pytest.skip("needs 1200 open files")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        out = pool.rows(TASKS, jobs=2, compute=_echo, warm=_no_warm)
    finally:
        for fd in held:
            os.close(fd)
    assert [r["L"] for r in out] == [L for _, L in TASKS]


def test_a_worker_holds_no_other_worker_s_pipes():
    mine = _pipes()
    out = pool.rows(TASKS, jobs=3, compute=_my_pipes, warm=_no_warm)
    for r in out:  # the pipes a worker has beyond those it inherited: its own two
        assert len(set(r["pipes"]) - mine) == 2


def test_a_callback_that_raises_ends_every_worker_and_leaks_nothing():
    before, fds = _children(), _fds()
    for exc in (OSError(28, "No space left on device", "store"), KeyboardInterrupt()):
        def done(i, r, exc=exc):
            raise exc

        with pytest.raises(type(exc)):
            pool.rows(TASKS, jobs=2, compute=_echo, warm=_no_warm, done=done)
        assert _children() == before and _fds() == fds


def _stops_at_9_fails_at_6(cell, L, rtol, arc_boxes):
    if L == 9:  # the first task handed out: this worker stops
        os.kill(os.getpid(), signal.SIGSTOP)
    if L == 6:
        time.sleep(0.2)  # long enough for the other worker to have stopped
        raise ValueError("no row at L = 6")
    return {"L": L}


def _alarm(signum, frame):
    raise TimeoutError("the pool waited for a stopped worker")


def test_a_run_that_stops_early_does_not_wait_for_a_stopped_worker():
    before = _children()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        with pytest.raises(ValueError, match="no row at L = 6"):
            pool.rows(TASKS, jobs=2, compute=_stops_at_9_fails_at_6, warm=_no_warm)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        for pid in _children() - before:  # only after a failure above
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert _children() == before


DRIVER = textwrap.dedent("""
    import os, sys, time
    from bounds import pool
    from constructions import cli
    from constructions.cell import Cell
    folder = sys.argv[1]

    def slow(cell, L, rtol, arc_boxes):
        open(os.path.join(folder, str(os.getpid())), "w").close()
        time.sleep(0.05)
        return {"L": L}

    def execute(args):
        pool.rows([(Cell("linear", "none", "regression"), L) for L in range(1, 200)], jobs=2,
                  compute=slow, warm=lambda cell: None)
        return 0

    sys.exit(cli.run("probe", lambda argv: argv, execute, []))
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _run_and_signal(kill) -> tuple[int, str, list[int]]:
    """Start the driver in its own session, wait until both workers run a row, ``kill`` it;
    its exit status, stderr and the workers still alive 0.5 s after it ended."""
    folder = tempfile.mkdtemp()
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, folder], stderr=subprocess.PIPE,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            start_new_session=True)
    deadline = time.monotonic() + 20
    while len(os.listdir(folder)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    kill(proc.pid)
    try:
        err = proc.communicate(timeout=20)[1].decode()
    except subprocess.TimeoutExpired:
        proc.kill()
        err = "no end"
    workers = [int(p) for p in os.listdir(folder)]
    deadline = time.monotonic() + 0.5
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.01)
    left = [p for p in workers if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    return proc.returncode, err, left


@pytest.mark.parametrize("sig, status, word", [(signal.SIGTERM, 143, "terminated"),
                                               (signal.SIGINT, 130, "interrupted")])
def test_a_signal_to_the_process_group_is_one_line_and_ends_every_worker(sig, status, word):
    code, err, left = _run_and_signal(lambda pid: os.killpg(pid, sig))
    assert (code, err, left) == (status, f"probe: {word}\n", [])


def test_the_workers_die_with_a_killed_parent():
    code, err, left = _run_and_signal(lambda pid: os.kill(pid, signal.SIGKILL))
    assert code == -signal.SIGKILL and left == []


def test_a_worker_that_cannot_be_started_is_a_failure_and_leaks_nothing(monkeypatch):
    """``fork`` refused (processes exhausted): one-line failure, no descriptor of the attempt left."""
    import errno as _errno

    def refuse():
        raise OSError(_errno.EAGAIN, os.strerror(_errno.EAGAIN))

    before = sorted(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(pool.os, "fork", refuse)
    with pytest.raises(cli.Failure, match="cannot start a worker process"):
        pool.rows([(CELL, L) for L in (1, 2, 3)], jobs=2, compute=_echo_for_fork, warm=lambda c: None)
    assert sorted(os.listdir("/proc/self/fd")) == before


def _echo_for_fork(cell, L, rtol, arc_boxes):
    return {"L": L}
