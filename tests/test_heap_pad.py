"""Commands keep freed memory at the top of the heap (glibc ``M_TOP_PAD``), unless the caller
tuned the allocator: freed temporaries are not faulted in again."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import constructions

_FAULTS = """
import sys
sys.argv[0] = "-m"  # as a command started with python -m (constructions reads argv[0])
import resource, constructions, numpy as np
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):  # rounds of temporaries of SIZE floats, 8 MB together, freed at once
    xs = [np.ones(SIZE) for _ in range(10**6 // SIZE)]
    del xs
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(size=20000, **extra) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(extra)
    out = subprocess.run([sys.executable, "-c", _FAULTS.replace("SIZE", str(size))], env=env, capture_output=True,
                         text=True, check=True).stdout
    return int(out)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
                    reason="M_TOP_PAD is glibc's")
@pytest.mark.parametrize("size,choice", [(20000, "MALLOC_TOP_PAD_"),  # 160 KB temporaries
                                         (10**6, "MALLOC_MMAP_THRESHOLD_")])  # one 8 MB array
def test_a_command_reuses_freed_pages_unless_the_caller_tuned_malloc(size, choice):
    page = os.sysconf("SC_PAGE_SIZE")
    again = 19 * 8 * 10**6 // page  # the pages of the 19 rounds after the first
    default = _faults(size, **{choice: "131072"})  # the caller's choice (glibc's default) stands
    padded = _faults(size)
    # glibc's default trims the heap or unmaps the array: every round faults it in (fewer
    # faults than pages where the kernel maps huge pages)
    assert default > 5 * padded
    assert padded < again / 10  # padded: the rounds reuse the pages of the first


def test_the_pad_is_left_to_a_caller_who_set_malloc_variables():
    assert constructions._pad_heap({"MALLOC_ARENA_MAX": "2"}) is False
