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


def _pad_heap(env=_os.environ) -> bool:
    """Keep ``HEAP_PAD`` bytes of freed memory at the top of the heap (glibc's ``M_TOP_PAD``)
    and take arrays up to ``MMAP_FLOOR`` bytes from the heap rather than from fresh mappings
    (``M_MMAP_THRESHOLD``), unless the caller tuned the allocator (any ``MALLOC_*`` variable);
    True if both were set.

    A branch and bound round (:mod:`bounds.arc_lower`) and the judge's interval pass make
    temporaries of tens to hundreds of KiB and free them at once; with glibc's default pad
    (128 KiB) the heap is trimmed back to the kernel after such a round and the next one faults
    every page in again (about 33000 of the 51000 page faults of the headline sweep with
    ``--jobs 1``).  Arrays over glibc's mapping threshold (128 KiB at first, at most 32 MiB) are
    mapped and unmapped whole, so each is faulted in afresh: at ``L = 2^20`` the one-sided arc's
    systems (8 to 24 MiB each, hundreds per row) took 790000 page faults and as much system
    time as computing (33000 faults with the threshold at ``MMAP_FLOOR``).  Only where the
    memory comes from changes, never a value computed in it.
    Elsewhere (no ``mallopt``, or one that refuses the setting) nothing is done.
    """
    if any(k.startswith("MALLOC_") for k in env):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(_M_TOP_PAD, HEAP_PAD) == 1 and mallopt(_M_MMAP_THRESHOLD, MMAP_FLOOR) == 1


#: glibc's ``mallopt`` parameter numbers of ``M_TOP_PAD`` and ``M_MMAP_THRESHOLD`` (malloc.h),
#: the pad a command keeps and the size below which an array comes from the heap
_M_TOP_PAD, HEAP_PAD = -2, 32 << 20
_M_MMAP_THRESHOLD, MMAP_FLOOR = -3, 64 << 20

if _sys.argv[:1] == ["-m"]:
    _pad_heap()

from constructions.cell import ATTENTIONS, NORMS, READOUTS, Cell, Params

__all__ = ["__version__", "ATTENTIONS", "NORMS", "READOUTS", "Cell", "Params"]
