"""Resources: the judge's findings do not depend on its chunk size, work beyond the stated
limits is refused up front (fast, before any large allocation), and memory stays bounded at
large L (peak resident memory measured with ``resource.getrusage`` in a fresh subprocess)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions import classification
from constructions.cell import ATTENTIONS, NORMS, Cell, Params
from helpers import examples, random_params
from verify import MAX_COUNTS, check_cost, counts_to, reduced
from verify import judge

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: one backend of every family: numpy floats, mpmath objects, balls
BACKENDS = ["float64", "float32", "mp30", "arb128"]


def same(a, b) -> bool:
    """Two CountResults agree field by field (a NaN equals a NaN)."""
    def norm(x):
        return "nan" if isinstance(x, float) and math.isnan(x) else x
    return all(norm(getattr(a, f)) == norm(getattr(b, f)) for f in a.__dataclass_fields__)


def regression_params(cell: Cell, seed: int, L: int, slope: float) -> Params:
    """Random geometry with ``w`` scaled and ``w0`` shifted so that ``y`` spreads over about
    ``[0, slope L]``: some counts pass and some fail (as in test_judge)."""
    p = random_params(cell, np.random.default_rng(seed))
    y = reduced(p, range(L + 1))
    spread = float(y[-1] - y[0]) or 1.0
    w = [float(x) * slope * L / spread for x in p.vectors["w"]]
    q = Params(cell, dict(p.vectors, w=w), {"w0": 0.0})
    return Params(cell, dict(p.vectors, w=w), {"w0": float(-reduced(q, [0])[0])})


@st.composite
def judged(draw):
    """A parameter set, its L and a backend: regression or classification, any norm."""
    readout = draw(st.sampled_from(["regression", "classification"]), label="readout")
    cell = Cell(draw(st.sampled_from(ATTENTIONS)), draw(st.sampled_from(NORMS)), readout,
                d=draw(st.integers(3, 12), label="d"))
    L = draw(st.integers(1, 24), label="L")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    if readout == "regression":
        params = regression_params(cell, seed, L, draw(st.floats(0.8, 1.25), label="slope"))
    else:
        params = random_params(cell, np.random.default_rng(seed), classes=L + 1)
    return params, L, draw(st.sampled_from(BACKENDS), label="backend")


@settings(max_examples=examples(60))
@given(case=judged(), chunk=st.integers(1, 80))
def test_chunked_equals_unchunked(case, chunk):
    """Verdict, first failure, undecided counts, the extreme value and where it occurs: exactly
    the same in chunks of any size as in one piece."""
    params, L, backend = case
    whole = counts_to(params, L, backend)
    assert L + 1 <= judge.CHUNK // params.cell.d  # the default judges these counts in one piece
    assert same(counts_to(params, L, backend, chunk=chunk), whole)


@pytest.mark.parametrize("norm", ["none", "post_bare"])
@pytest.mark.parametrize("backend", ["float64", "arb256"])
def test_chunked_equals_unchunked_on_constructed_heads(norm, backend):
    """Constructed heads count (margins ~1e-6 at L = 40, well below the logits' size); with
    biases nudged by a few margins some counts fail.  Every chunk size finds the same."""
    L = 40
    head = classification.design(Cell("softmax", norm, "classification")).build(L)
    rng = np.random.default_rng(3)
    for nudge in (0.0, 3.0):
        margin = counts_to(head, L, "arb256").min_margin
        b = [bc + mpmath.mpf(nudge * margin * rng.normal()) for bc in head.scalars["b"]]
        p = Params(head.cell, head.vectors, {"b": b})
        whole = counts_to(p, L, backend)
        assert whole.verdict == ("counts" if nudge == 0 else "fails")
        for chunk in (1, 7, 64, 333):
            assert same(counts_to(p, L, backend, chunk=chunk), whole)


def borderline_regression(L: int, k1: int, k2: int, delta) -> Params:
    """Regression parameters with ``y(k1) - k1 = 1/2 - delta`` and ``y(k2) - k2 = -(1/2 - delta)``
    (solved for the read-out scale and ``w0`` at 80 digits)."""
    cell = Cell("softmax", "none", "regression", d=4)
    p = random_params(cell, np.random.default_rng(11))
    with mpmath.workdps(80):
        g = reduced(Params(cell, p.vectors, {"w0": 0}), range(L + 1), backend="mp80")
        hi, lo = k1 + mpmath.mpf(1) / 2 - delta, k2 - mpmath.mpf(1) / 2 + delta
        s = (hi - lo) / (g[k1] - g[k2])
        w = [s * mpmath.mpf(x) for x in p.vectors["w"]]
        return Params(cell, dict(p.vectors, w=w), {"w0": hi - s * g[k1]})


def test_undecided_counts_merged_across_chunks():
    """Two counts within 1e-45 of the boundary |y - n| = 1/2: balls of 128 bits cannot decide
    them, balls of 256 bits can; every chunk size reports the same undecided counts in order
    (and the same failures among the others)."""
    L, k1, k2 = 30, 9, 22
    p = borderline_regression(L, k1, k2, mpmath.mpf("1e-45"))
    whole = counts_to(p, L, "arb128")
    assert whole.undecided == (k1, k2) and not whole.certified
    assert counts_to(p, L, "arb256").undecided == ()
    for chunk in (1, 2, 5, 10, 13, 22):
        assert same(counts_to(p, L, "arb128", chunk=chunk), whole)


# ------------------------------------------------------------------ refusal up front


@pytest.mark.parametrize("L", [MAX_COUNTS + 1, 10**9, 10**18])
@pytest.mark.parametrize("backend", ["float64", "arb256"])
def test_counts_beyond_the_limit_are_refused_fast(L, backend):
    p = regression_params(Cell("softmax", "post_bare", "regression"), 5, 30, 1.0)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="MAX_COUNTS"):
        counts_to(p, L, backend)
    assert time.perf_counter() - start < 1.0  # refused before any evaluation


def test_largest_classification_work_accepted_and_the_next_refused():
    """check_cost (which counts_to calls first) at the boundary of MAX_LOGIT_TERMS, d = 8."""
    cell = Cell("softmax", "none", "classification", d=8)
    top = math.isqrt(judge.MAX_LOGIT_TERMS // cell.d) - 1  # largest L with (L+1)^2 d <= limit
    check_cost(cell, top, "arb256")
    with pytest.raises(ValueError, match="MAX_LOGIT_TERMS"):
        check_cost(cell, top + 1, "arb256")
    with pytest.raises(ValueError, match="MAX_LOGIT_TERMS"):
        check_cost(cell, top + 1, "float64")


def test_object_backend_classification_refused_fast_where_floats_run():
    """A head whose (L+1)^2 d logit terms exceed the mpmath limit is refused at once on mp and
    judged on float64 (small: 2^25 terms)."""
    cell = Cell("linear", "none", "classification", d=8)
    L = math.isqrt(judge.MAX_OBJECT_LOGIT_TERMS // cell.d)  # (L+1)^2 d just above the limit
    p = random_params(cell, np.random.default_rng(0), classes=L + 1)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="MAX_OBJECT_LOGIT_TERMS"):
        counts_to(p, L, "mp30")
    assert time.perf_counter() - start < 1.0
    assert counts_to(p, L, "float64").verdict in ("counts", "fails")


def test_classification_row_size_check():
    """The one cost function of a classification row: the head's (L+1) d entries and the
    certification's work; build refuses what it refuses, before building anything."""
    big_d = Cell("softmax", "post_bare", "classification", d=1 << 16)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="MAX_HEAD_ENTRIES"):
        classification.check_size(big_d, 4096)
    with pytest.raises(ValueError, match="MAX_HEAD_ENTRIES"):
        classification.design(big_d).build(4096)
    assert time.perf_counter() - start < 1.0
    classification.check_size(Cell("softmax", "none", "classification", d=8), 65536)
    narrow = Cell("softmax", "none", "classification", d=2)
    L = classification.MAX_HEAD_ENTRIES // narrow.d - 1  # the head fits, its judgement does not
    with pytest.raises(ValueError, match="MAX_LOGIT_TERMS"):
        classification.check_size(narrow, L)


# ------------------------------------------------------------------ bounded memory


def peak_growth_mb(setup: str, work: str) -> tuple[float, dict]:
    """Run the code ``setup``, then ``work`` (which leaves a dict ``out``), in a fresh
    interpreter; return how far ``work`` raised the peak resident memory (MiB, from
    ``resource.getrusage``) and ``out``."""
    script = "\n".join([
        "import json, resource",
        textwrap.dedent(setup),
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss",
        textwrap.dedent(work),
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss",
        "print(json.dumps(dict(growth=(after - before) / 1024, out=out)))",
    ])
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return found["growth"], found["out"]


REGRESSION_SETUP = """
    from constructions import Cell
    from constructions.regression import design
    from verify import MAX_COUNTS, counts_to
    des = design(Cell("softmax", "post_learned", "regression"))
    p = des.build(1024, des.estimate(1024) * 1.01)
    counts_to(p, 1024, "arb256")
"""


def test_regression_memory_bounded_on_balls():
    """2^17 counts on balls held at once take over 100 MiB; in chunks of 2^12, a few."""
    growth, out = peak_growth_mb(
        REGRESSION_SETUP,
        "r = counts_to(p, 1 << 17, 'arb256', chunk=1 << 12); out = dict(n=r.L)")
    assert out["n"] == 1 << 17
    assert growth < 40, f"peak grew by {growth:.0f} MiB"  # all counts at once: about 190 MiB


def test_regression_at_the_largest_accepted_L_in_float64():
    """L = MAX_COUNTS in float64 with the default chunk: quick, and memory stays bounded."""
    start = time.perf_counter()
    growth, out = peak_growth_mb(
        REGRESSION_SETUP,
        "r = counts_to(p, MAX_COUNTS, 'float64'); out = dict(L=r.L, at=r.worst_error_at)")
    assert out["L"] == MAX_COUNTS and 0 <= out["at"] <= MAX_COUNTS
    assert growth < 64, f"peak grew by {growth:.0f} MiB"  # all counts at once: about 140 MiB
    assert time.perf_counter() - start < 120


def test_classification_memory_bounded_at_large_L():
    """A certified head at L = 8192, d = 8: (L+1)^2 float logits would take 512 MiB per copy;
    the judge holds tiles of at most CHUNK entries besides a float copy of the head."""
    growth, out = peak_growth_mb(
        """
        from constructions import Cell, classification
        from verify import counts_to
        p = classification.design(Cell("softmax", "post_bare", "classification")).build(8192)
        """,
        "r = counts_to(p, 8192, 'arb256'); out = dict(certified=r.certified, L=r.L)")
    assert out == {"certified": True, "L": 8192}
    assert growth < 100, f"peak grew by {growth:.0f} MiB"  # all logits at once: about 1 GiB
