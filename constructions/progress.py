"""A progress bar for long runs, shared by every command (a thin layer over ``tqdm``).

The bar is drawn on stderr, only when stderr is a terminal and ``--quiet`` is not given; it
never writes to stdout, so a command's output (a table, one JSON object) is the same with or
without it.  It is transient: when the block ends -- normally, or by Ctrl-C, SIGTERM
(:class:`constructions.cli.Terminated`), a closed pipe or any error -- the bar's line is
cleared and the cursor returned to its start, so the one line :func:`constructions.cli.run`
prints next (``sweep: interrupted``) stands alone on the terminal, and no half-drawn line
remains.  A terminal that stops accepting output (``OSError`` on stderr, e.g. after a hang-up)
turns the bar off instead of ending the run.

    with progress.Bar(total=len(rows), desc="sweep", quiet=args.quiet) as bar:
        for ...:
            bar.advance()
"""

from __future__ import annotations

import contextlib
import functools
import sys

from constructions.cli import held_signals


@functools.cache
def _tqdm_class():
    """``tqdm`` without its monitor thread (commands fork worker processes while a bar is
    open), imported when a bar is first drawn: a run without one never loads it."""
    from tqdm import tqdm

    class _Tqdm(tqdm):
        monitor_interval = 0

    return _Tqdm


def enabled(quiet: bool, stream=None) -> bool:
    """Whether a bar is drawn: not ``quiet`` and ``stream`` (default stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    if quiet or stream is None:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


class Bar:
    """A bar over ``total`` steps, ``initial`` of them already done; a context manager whose
    exit clears it (see the module docstring)."""

    def __init__(self, total: int, desc: str, quiet: bool = False, initial: int = 0,
                 unit: str = "row"):
        self._tqdm = None
        if not enabled(quiet):
            return
        try:
            # tqdm draws the bar before its constructor returns: a Ctrl-C there would leave a
            # drawn bar this object does not hold.  Held back, it is delivered on leaving the
            # block, once the bar is held, and clears it on its way out of the constructor.
            with held_signals():
                self._tqdm = _tqdm_class()(total=total, initial=initial, desc=desc, unit=unit,
                                           file=sys.stderr, leave=False, dynamic_ncols=True)
        except OSError:
            self.close()
        except BaseException:
            self.close()
            raise

    @property
    def shown(self) -> bool:
        """Whether the bar is being drawn."""
        return self._tqdm is not None

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more steps as done."""
        if self._tqdm is None:
            return
        try:
            self._tqdm.update(steps)
        except (OSError, ValueError):  # stderr went away: stop drawing, keep working
            self._drop()

    def close(self) -> None:
        """Clear the bar's line (idempotent)."""
        if self._tqdm is not None:
            with contextlib.suppress(OSError, ValueError):
                self._tqdm.close()
            self._drop()

    def _drop(self) -> None:
        bar, self._tqdm = self._tqdm, None
        if bar is not None:
            bar.disable = True  # tqdm's own close and finaliser then write nothing

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

