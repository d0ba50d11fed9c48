"""Command-line plumbing shared by every command of the toolkit.

Every command (``bounds.sweep``, ``bounds.benchmark``, ``constructions.derive``) runs its work
through :func:`run`, which fixes how a run ends:

=================================  ==========================================  ===========
event                              what the user sees                          exit status
=================================  ==========================================  ===========
success                            the output                                  0
the work fails (:class:`Failure`)  one line ``prog: error: ...``               1
bad input (:class:`UsageError`,    one line ``prog: error: ...`` on stderr     2
``ValueError`` while parsing)
Ctrl-C (SIGINT)                    one line ``prog: interrupted``              130
SIGTERM                            one line ``prog: terminated``               143
stdout closed (``| head -1``)      nothing (quiet, like a tool killed by       141
                                   SIGPIPE)
stdout or a file not writable      one line naming the target and the reason   2
(``> /dev/full``, disk full)
=================================  ==========================================  ===========

Never a traceback for any of these.  Output files are written by :func:`write_files`: each
file goes to a temporary file in the same directory and is renamed over its target only when
every file of the set is complete, under a lock on the directory and with SIGINT/SIGTERM held
back during the renames; so a set is whole or absent and never mixed with a concurrent run's.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import sys
import tempfile


class UsageError(Exception):
    """Bad input: reported in one line, exit status 2."""


class Failure(Exception):
    """The work could not be done (not the user's input): one line, exit status 1."""


class Terminated(BaseException):
    """Raised in the main process when it receives SIGTERM (so ``finally`` blocks run)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are :class:`UsageError` (one line, exit 2) and whose
    help text is written like any output (a full or closed stdout is reported, not ignored).
    Options are spelled out: an abbreviation (``--read`` for ``--readout``) is an unknown option,
    never a silent match of another one."""

    def __init__(self, *args, **kw):
        kw.setdefault("allow_abbrev", False)
        super().__init__(*args, **kw)

    def error(self, message):
        raise UsageError(message)

    def _print_message(self, message, file=None):
        if message:
            emit(message.rstrip("\n"), file or sys.stderr)


def nonnegative_float(text: str) -> float:
    """A float option that must be finite and >= 0, and not a positive number that rounds to 0
    (``1e-400``); ``-0`` is 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value >= 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    if value == 0 and any(ch in "123456789" for ch in text.lower().split("e")[0]):
        raise argparse.ArgumentTypeError(f"{text} is positive but rounds to 0 in double precision")
    return value + 0.0  # -0.0 becomes 0.0


def check_out_dir(folder: str, option: str = "--out") -> str:
    """Refuse, before any work, an output directory that cannot be written.

    The empty string, an existing file that is not a directory, and a path whose nearest
    existing ancestor is not a writable directory are :class:`UsageError`.  Writable means that
    an entry can be made there: the permission bits say nothing to root, nor about file systems
    that refuse every new entry (``/proc``, ``/sys``), so the check makes (and removes) a
    temporary file in the directory, or a temporary directory in the ancestor.
    """
    if not folder or not folder.strip():
        raise UsageError(f"{option} needs a directory name, got an empty string")
    if os.path.exists(folder):
        if not os.path.isdir(folder):
            raise UsageError(f"{option} {folder} exists and is not a directory")
        if not (os.access(folder, os.W_OK | os.X_OK) and _can_make_entry(folder, False)):
            raise UsageError(f"{option} {folder} is not a writable directory")
        return folder
    parent = os.path.dirname(os.path.abspath(folder))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if (not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK)
            or not _can_make_entry(parent, True)):
        raise UsageError(f"{option} {folder} cannot be created (no writable directory above it)")
    return folder


def _can_make_entry(folder: str, directory: bool) -> bool:
    """Whether a temporary file (``directory``: a directory) can be made in ``folder``; it is
    removed at once."""
    try:
        if directory:
            os.rmdir(tempfile.mkdtemp(dir=folder, prefix=".probe."))
        else:
            fd, path = tempfile.mkstemp(dir=folder, prefix=".probe.")
            os.close(fd)
            os.unlink(path)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def held_signals():
    """Hold SIGINT and SIGTERM back (delivered on exit) while the block runs."""
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def write_files(folder: str, files: dict[str, str | bytes]) -> None:
    """Write ``{name: text}`` into ``folder`` atomically, as a set (module docstring); text is
    written as UTF-8, bytes as they are.

    Raises ``OSError`` (and leaves every previous file intact, no temporary file behind) when
    a file cannot be written completely.
    """
    os.makedirs(folder, exist_ok=True)
    temps: dict[str, str] = {}
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX)  # one writer of the set at a time
        umask = os.umask(0)
        os.umask(umask)
        for name, text in files.items():
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".partial")
            temps[name] = tmp
            try:
                os.fchmod(fd, 0o666 & ~umask)  # as open() would create it
                with os.fdopen(fd, "wb") as fh:
                    fh.write(text.encode("utf-8") if isinstance(text, str) else text)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:  # name the file, not the temporary one
                raise OSError(exc.errno, exc.strerror, os.path.join(folder, name)) from None
        with held_signals():
            for name, tmp in temps.items():
                os.replace(tmp, os.path.join(folder, name))
            temps.clear()
            os.fsync(dir_fd)
    finally:
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        os.close(dir_fd)


def emit(text: str, stream=None) -> None:
    """Print ``text`` and a newline on stdout (or ``stream``) and flush: write errors surface
    here, inside :func:`run`; a stdout closed before start (``>&-``) is a closed pipe."""
    stream = sys.stdout if stream is None else stream
    if stream is None:
        raise BrokenPipeError("standard output is closed")
    stream.write(text + "\n")
    stream.flush()


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _on_sigterm(signum, frame):
    raise Terminated()


def say(prog: str, message: str) -> None:
    """One line on stderr, ``prog: message``."""
    with contextlib.suppress(OSError):
        print(f"{prog}: {message}", file=sys.stderr, flush=True)


def run(prog: str, parse, execute, argv=None) -> int:
    """``execute(parse(argv))`` with the exits of the module docstring.

    ``parse`` turns the argument list into whatever ``execute`` needs; a ``UsageError`` or
    ``ValueError`` it raises is bad input.  ``execute`` returns the exit status; it may raise
    ``UsageError`` for bad input it detects later (e.g. a cost estimated from the arguments).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C is KeyboardInterrupt again
    if hasattr(signal, "SIGXFSZ"):  # a file-size limit is an OSError, not a silent kill
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        try:
            args = parse(argv)
        except (UsageError, ValueError) as exc:
            say(prog, f"error: {exc}")
            return 2
        return execute(args)
    except UsageError as exc:
        say(prog, f"error: {exc}")
        return 2
    except Failure as exc:
        say(prog, f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        say(prog, "interrupted")
        return 130
    except Terminated:
        say(prog, "terminated")
        return 143
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except OSError as exc:
        target = exc.filename or "standard output"
        _silence_stdout()
        say(prog, f"error: {target}: {exc.strerror or exc}")
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)
