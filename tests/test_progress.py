"""The progress bar: on stderr only when it is a terminal and --quiet is not given, never on
stdout, and cleared however the run ends (no half-drawn line before the command's last line)."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest

from bounds import grid, sweep
from constructions import progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeTerminal(io.StringIO):
    def isatty(self):
        if self.closed:
            raise ValueError("I/O operation on closed file")  # as a real stream does
        return True


class BrokenTerminal(FakeTerminal):
    """A terminal that stops accepting output with ``errno`` (EIO: after a hang-up)."""

    errno = None

    def write(self, text):
        if self.errno is not None:
            raise OSError(self.errno, os.strerror(self.errno))
        return super().write(text)


#: longer than the bar's shortest interval between redraws (tqdm's mininterval, 0.1 s)
STEP = 0.15


def _visible_last_line(text: str) -> str:
    """What a terminal shows on its last line: the text after the last carriage return."""
    lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")  # a terminal's newline is \r\n
    return lines[-1].split("\r")[-1]


@pytest.mark.parametrize("quiet,tty,shown", [(False, True, True), (True, True, False),
                                             (False, False, False)])
def test_shown_only_on_a_terminal_without_quiet(monkeypatch, quiet, tty, shown):
    err, out = (FakeTerminal() if tty else io.StringIO()), io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", out)
    with progress.Bar(3, "test", quiet) as bar:
        assert bar.shown == shown
        for _ in range(3):
            time.sleep(STEP)
            bar.advance()
    assert out.getvalue() == ""
    text = err.getvalue()
    assert ("3/3" in text) == shown and ("test" in text) == shown
    if shown:  # cleared: the terminal's last line is blank
        assert text.endswith("\r") and _visible_last_line(text).strip() == ""
    else:
        assert text == ""


def test_ctrl_c_while_the_bar_is_first_drawn_clears_it(monkeypatch):
    """A Ctrl-C that arrives just after tqdm drew the bar, before its constructor returned."""
    err = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", err)
    base = progress._tqdm_class()

    class Interrupted(base):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            assert "0/3" in err.getvalue()  # drawn
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(progress, "_tqdm_class", lambda: Interrupted)
    try:
        with progress.Bar(3, "test"):
            pass
    except KeyboardInterrupt:  # where the command prints its last line ("sweep: interrupted")
        shown = _visible_last_line(err.getvalue())
    else:
        pytest.fail("the interrupt was lost")
    assert shown.strip() == ""


def test_closed_or_missing_stderr_is_no_bar(monkeypatch):
    closed = FakeTerminal()
    closed.close()
    for stream in (None, closed):
        monkeypatch.setattr(sys, "stderr", stream)
        assert not progress.enabled(False)
        with progress.Bar(2, "test") as bar:
            assert not bar.shown
            bar.advance()


def test_an_error_in_the_block_clears_the_bar(monkeypatch):
    err = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(KeyboardInterrupt):
        with progress.Bar(5, "test") as bar:
            time.sleep(STEP)
            bar.advance(2)
            raise KeyboardInterrupt
    assert "2/5" in err.getvalue() and _visible_last_line(err.getvalue()).strip() == ""


@pytest.mark.parametrize("errno", [5, 32], ids=["EIO", "EPIPE"])
def test_a_terminal_that_fails_stops_the_bar_not_the_work(monkeypatch, errno):
    err = BrokenTerminal()
    monkeypatch.setattr(sys, "stderr", err)
    with progress.Bar(4, "test", initial=1) as bar:
        assert bar.shown and "1/4" in err.getvalue()
        before = err.getvalue()
        err.errno = errno
        for _ in range(2):
            time.sleep(STEP)
            bar.advance()  # no exception: the work goes on
    err.errno = None
    assert err.getvalue() == before


SWEEP_ARGS = ["--variant", "none", "--attention", "linear", "--Lmax", "8", "--jobs", "1", "--json"]


@pytest.mark.parametrize("main,argv", [(sweep.main, SWEEP_ARGS),
                                       (grid.main, [*SWEEP_ARGS, "--d", "2,3", "--no-cache"])],
                         ids=["sweep", "grid"])
def test_commands_draw_the_bar_only_on_a_terminal_without_quiet(monkeypatch, capsys, tmp_path,
                                                                main, argv):
    if main is grid.main:
        argv = [*argv, "--out", str(tmp_path / "store")]
    outputs = []
    for terminal, quiet in ((False, False), (True, True), (True, False)):
        err = FakeTerminal() if terminal else io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        assert main(argv + (["--quiet"] if quiet else [])) == 0
        outputs.append(json.loads(capsys.readouterr().out))
        drawn = err.getvalue()
        if terminal and not quiet:
            assert drawn.startswith("\r") and "0/" in drawn  # the bar, then cleared
            assert _visible_last_line(drawn).strip() == ""
        else:
            assert drawn == ""
    # the output is the same with or without the bar
    for out in outputs:
        for r in out["rows"]:
            r.pop("seconds")
        out.pop("computed", None), out.pop("from_store", None)
    assert outputs[0] == outputs[1] == outputs[2]


def _on_a_terminal(argv, interrupt_when=None):
    """Run ``argv`` with stderr on a pseudo-terminal (100 columns) and stdout on a pipe;
    ``interrupt_when(stderr so far)`` true: Ctrl-C to its process group.  Returns
    ``(status, stdout, stderr)``."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    seen = bytearray()

    def read():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end is closed
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if interrupt_when is not None:
        deadline = time.time() + 90
        while proc.poll() is None and time.time() < deadline:
            if interrupt_when(seen.decode(errors="replace")):
                os.killpg(proc.pid, signal.SIGINT)
                break
            time.sleep(0.05)
    out, _ = proc.communicate(timeout=120)
    reader.join(timeout=10)
    os.close(master)
    return proc.returncode, out.decode(), seen.decode(errors="replace")


def test_bar_on_a_terminal_and_ctrl_c_leaves_one_clean_line(tmp_path):
    # 32 rows, the first ones the largest: the interrupt comes long before the end
    folder = tmp_path / "store"
    status, out, err = _on_a_terminal(
        [sys.executable, "-m", "bounds.grid", "--variant", "post_learned", "--d", "3,8",
         "--Lmax", "65536", "--jobs", "2", "--out", str(folder)],
        interrupt_when=lambda err: "0/32" in err)
    assert status == 130
    assert out == ""
    assert "grid:   0%" in err and "0/32" in err  # the bar was drawn on the terminal
    assert "Traceback" not in err
    assert _visible_last_line(err) == "grid: interrupted"
    assert err.endswith("\n")
    for entry in folder.glob("*.json") if folder.exists() else ():  # whole, if any
        json.loads(entry.read_text())
