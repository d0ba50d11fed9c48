"""Parameter constructions for every architecture cell, built symbolically and evaluated at any precision."""

import os as _os
import signal as _signal
import sys as _sys

__version__ = "0.2.0"

if _sys.argv[:1] == ["-m"]:
    # Started as a command (``python -m ...``, every command imports this package first): a
    # signal while the modules load ends the run in one line, until the command's own handling
    # takes over (:func:`constructions.cli.run`).
    def _while_loading(signum, frame):
        word = "interrupted" if signum == _signal.SIGINT else "terminated"
        _os.write(2, f"{word} while starting\n".encode())
        _os._exit(128 + signum)

    _signal.signal(_signal.SIGINT, _while_loading)
    _signal.signal(_signal.SIGTERM, _while_loading)
    # A command's arrays are small (boxes of a branch and bound, a few vectors): BLAS threads
    # only spin up, at numpy's import and after its products, on the cores the worker
    # processes use.  One thread per process unless the caller chose otherwise (before numpy
    # loads: OpenBLAS reads it once).
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from constructions.cell import ATTENTIONS, NORMS, READOUTS, Cell, Params

__all__ = ["__version__", "ATTENTIONS", "NORMS", "READOUTS", "Cell", "Params"]
