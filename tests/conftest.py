"""Shared pytest configuration for the foundation-layer tests.

* Puts the repository root on ``sys.path`` so the tests run with plain ``pytest`` as well as
  ``python -m pytest`` without installing the package.
* Registers hypothesis profiles.  The default ("suite") is derandomised, keeps the example
  counts modest and never writes an example database into the working tree; run with
  ``HYPOTHESIS_PROFILE=explore`` for a longer randomised search.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import tempfile  # noqa: E402

from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402

# Keep hypothesis' files (failure patches) out of the working tree.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "counting-cost-hypothesis"))

_COMMON = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("suite", max_examples=20, derandomize=True, **_COMMON)
settings.register_profile("explore", max_examples=200, derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))
