"""The counting judge: do parameters count to ``L``?

The rules of the README's model (section "The model in brief"), for every input of the cell's
task up to length ``L`` (:class:`verify.inputs.InputSet`: ``(s, a^n)``, ``n = 0..L``, for the
count task; every ``(n_a, n_b)`` with ``n_a + n_b <= L`` for the select task, and at the last
read each possible last token), whose target is its count ``n = n_a``:

* regression: correct iff ``|y - n| < 1/2`` (strict);
* classification: correct iff ``n`` is the unique argmax of the logits, i.e. the margin
  ``logit_n - max_{c != n} logit_c`` is ``> 0``.

On the ball backend the verdict is rigorous: a count is *correct* only if the whole enclosure
satisfies the rule, *wrong* only if no point of it does, and otherwise *undecided*; then the
parameters are not certified ("cannot certify").  For regression on the count task read at
``s`` a first pass in outward-rounded float intervals (:mod:`verify.interval_pass`, the same
rule on its enclosures) decides almost every count at a fraction of a microsecond, and only
the counts it leaves open are computed in balls.  On every other backend the verdict is that
of the computed numbers (a screen).

Resources.  The inputs are judged in chunks (:data:`CHUNK`); every input is computed by the
same operations whatever the chunk (:mod:`verify.forward`, :func:`verify.forward.logits`), and
the chunks' findings are merged exactly (:class:`_Tally`), so the result does not depend on the
chunk size.  Memory is ``O(CHUNK)`` numbers for regression; a classification head has ``L+1``
rows of ``d`` numbers, and the judge holds one copy of it in its own numbers (floats on
balls) and ``O(CHUNK)`` more.  Work beyond the limits of :func:`check_cost` is refused up
front, before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass

import flint
import numpy as np

from constructions.cell import MAX_L, Cell, Params
from verify.backends import NumpyBackend, arb_bounds, get_backend
from verify.forward import logits, numbers, outputs
from verify import interval_pass
from verify.inputs import Input, InputSet

#: The largest ``L`` judged (the counts ``n = 0..L``).  Regression costs about 1 us per count in
#: float64, 25 us on balls (arb256; 40 us at arb1024) and 150-250 us in mpmath (mp50-mp200) at
#: d = 8, so ``L = MAX_COUNTS`` takes about a second, under a minute and a few minutes; with the
#: interval first pass (count task read at ``s``) the balls take a fraction of a second.
MAX_COUNTS = MAX_L
#: The most inputs judged (``L + 1`` for the count task; the select task to ``L = 2048`` at the
#: BOS read, to ``L = 2047`` at the last read): about 4 s in float64, 2 minutes on balls.
MAX_INPUTS = 1 << 22
#: Numbers per intermediate array of one chunk: ``CHUNK`` counts of regression (one output
#: each), ``CHUNK // d`` counts of classification (a vector ``z`` each), whose logits are
#: formed in tiles of at most ``CHUNK`` entries (512 KiB of float64: they stay in cache).
CHUNK = 1 << 16
#: Counts per logit tile once the classes fill it (``CHUNK // TILE_ROWS`` classes a tile): a
#: few rows amortise the per-call cost of numpy, narrow tiles keep each operand in cache.
TILE_ROWS = 8
#: The most multiply-adds ``(L+1)^2 d`` of a classification judgement in floats (the float
#: backends, and the float enclosure of the ball backend): 1-1.5 ns each (d = 3..32), so the
#: largest judgement takes 2-3 minutes.
MAX_LOGIT_TERMS = 1 << 37
#: The same in the backend's own objects (mpmath): about 5 us each, 3 minutes at the limit.
MAX_OBJECT_LOGIT_TERMS = 1 << 25
#: A count the float enclosure leaves open is re-decided in balls against the competing
#: classes it could not exclude, if there are at most this many; otherwise it stays undecided.
MAX_BALL_CLASSES = 64


@dataclass(frozen=True)
class CountResult:
    """Outcome of :func:`counts_to`.

    ``verdict`` is ``"counts"``, ``"fails"`` or ``"cannot certify"`` (ball backend only), decided
    in the backend's own numbers (on balls: exactly).  ``worst_error`` is the largest ``|y - n|``
    (regression; rounded to the nearest float, so it may print as 0.5 when the exact value is
    just below; on balls the midpoint of its enclosure, within ``1e-15 L`` of the exact value),
    ``min_margin`` the smallest logit margin (classification; a rigorous lower bound on the ball
    backend); ``first_failure``, ``undecided`` and ``*_at`` name inputs: by their count ``n``
    for the count task at the BOS read, else as :class:`verify.inputs.Input`
    ``(n_a, n_b, query)`` (:meth:`verify.inputs.InputSet.label`).
    """

    L: int
    backend: str
    verdict: str
    first_failure: int | Input | None
    undecided: tuple
    worst_error: float | None = None
    worst_error_at: int | Input | None = None
    min_margin: float | None = None
    min_margin_at: int | Input | None = None

    @property
    def counts(self) -> bool:
        return self.verdict == "counts"

    @property
    def certified(self) -> bool:
        """True iff the parameters provably count to L (rigorous backend and verdict counts)."""
        return self.counts and get_backend(self.backend).rigorous

    def __bool__(self):
        return self.counts


def check_cost(cell: Cell, L: int, backend="arb256") -> None:
    """Refuse, with a ``ValueError`` naming the limit, a judgement too large to run.

    Regression costs ``O(1)`` per input: ``L <= MAX_COUNTS`` and at most ``MAX_INPUTS`` inputs
    (the select task has about ``L^2/2``, ``L^2`` at the last read).  Classification compares
    every input with every class, ``K (L+1) d`` multiply-adds for ``K`` inputs: at most
    ``MAX_LOGIT_TERMS`` in floats (float and ball backends), ``MAX_OBJECT_LOGIT_TERMS`` on the
    other (object) backends.
    """
    if L > MAX_COUNTS:
        raise ValueError(f"L = {L} is beyond the judge's limit MAX_COUNTS = {MAX_COUNTS} "
                         "(verify.judge.MAX_COUNTS)")
    size = InputSet(cell, L).size
    if size > MAX_INPUTS:
        raise ValueError(f"the {cell.task.name} task at L = {L} (read {cell.read.name}) has {size} "
                         f"inputs, beyond the judge's limit MAX_INPUTS = {MAX_INPUTS} "
                         "(verify.judge.MAX_INPUTS)")
    if cell.readout == "classification":
        bk = get_backend(backend)
        floats = bk.rigorous or isinstance(bk, NumpyBackend)
        name, limit = (("MAX_LOGIT_TERMS", MAX_LOGIT_TERMS) if floats
                       else ("MAX_OBJECT_LOGIT_TERMS", MAX_OBJECT_LOGIT_TERMS))
        terms = size * (L + 1) * cell.d
        if terms > limit:
            raise ValueError(
                f"a classification judgement at L = {L}, d = {cell.d} on {bk.name} costs "
                f"{size} inputs x (L+1) classes x d = {terms} multiply-adds, beyond the limit {name} = {limit} "
                f"(verify.judge.{name})")


class _Tally:
    """The findings of consecutive chunks merged into those of the whole range: the failing
    and undecided counts in order, and the first count where a value is largest (``sign = 1``)
    or smallest (``sign = -1``), NaN ranking first, exactly as one ``argmax`` would."""

    def __init__(self, sign: int):
        self.sign = sign
        self.first_failure = None
        self.undecided = []
        self.key = self.value = self.at = None

    def add(self, start: int, good: np.ndarray, bad: np.ndarray, value: np.ndarray) -> None:
        bad_idx = np.flatnonzero(bad)
        if self.first_failure is None and bad_idx.size:
            self.first_failure = start + int(bad_idx[0])
        self.undecided.extend(start + int(i) for i in np.flatnonzero(~good & ~bad))
        key = np.nan_to_num(self.sign * value, nan=np.inf)
        i = int(np.argmax(key))
        if self.key is None or key[i] > self.key:
            self.key, self.value, self.at = key[i], float(value[i]), start + i

    def verdict(self) -> str:
        if self.first_failure is not None:
            return "fails"
        return "cannot certify" if self.undecided else "counts"


def _regression_chunk(bk, params: Params, nums, n: np.ndarray, n_b: np.ndarray, query: np.ndarray):
    """``(surely correct, surely wrong, |y - n| to the nearest float)`` for the inputs of
    counts ``(n, n_b)`` and query tokens ``query``; the target is ``n``."""
    y = outputs(params, nums, n, n_b, query=query)
    err = y - bk.vec(n.astype(object)) if y.dtype == object else y - n
    good, bad = bk.within(err, 0.5)  # decided in the backend's own numbers
    # |y - n| to the nearest float, for reporting (the verdict above is exact); NaN where a
    # ball is unbounded (inf - inf), which the tally ranks first
    with np.errstate(invalid="ignore", over="ignore"):
        return good, bad, np.abs(0.5 * bk.lower(err) + 0.5 * bk.upper(err))


def _first_pass(bk, params: Params, nums):
    """The float-interval first pass (:mod:`verify.interval_pass`) where it applies: the ball
    backend, the count task read at ``s``; None elsewhere."""
    cell = params.cell
    if not bk.rigorous or cell.task.name != "count" or cell.read.name != "bos":
        return None
    return interval_pass.prepare(params, nums)


def _regression_counts(bk, params: Params, nums, inputs, fast):
    """:func:`_regression_chunk` on the inputs ``(n, n_b, query)``, with those the interval pass
    ``fast`` decides taken from it (the count task at the BOS read, where the input is its
    count ``n``; its verdicts are as rigorous as the balls'); the open ones are judged in balls."""
    if fast is None:
        return _regression_chunk(bk, params, nums, *inputs)
    n, n_b, query = inputs
    good, bad, err = fast.judge(n)
    open_ = ~(good | bad)
    if open_.any():
        good[open_], bad[open_], err[open_] = _regression_chunk(bk, params, nums, n[open_],
                                                                n_b[open_], query[open_])
    return good, bad, err


def _float_enclosure(x: np.ndarray):
    """Float midpoints and radii with ``|x - mid| <= rad`` entrywise (balls or exact mpf)."""
    if isinstance(x.flat[0], flint.arb):
        lo, hi = arb_bounds(x)
    else:  # exact numbers: round to nearest, off by at most half a spacing
        mid = np.vectorize(float, otypes=[np.float64])(x)
        return mid, np.spacing(np.abs(mid))
    mid = 0.5 * lo + 0.5 * hi
    return mid, np.nextafter(np.maximum(hi - mid, mid - lo), np.inf)


def _row_norms(a: np.ndarray) -> np.ndarray:
    """Float upper bounds of the Euclidean norms of the rows, safe against underflow.

    Each row is scaled by a power of two (exact, :func:`numpy.ldexp`) so that its largest
    entry lies in ``[1/2, 1)``; its squares are summed in the fixed order of
    :func:`verify.forward.logits` (a row's norm does not depend on the other rows), with
    relative error below ``(d + 3) u`` (a square that underflows is below ``2^-1074`` against
    a sum of at least ``1/4``, well inside the callers' ``1e-3`` inflation); the square root is
    scaled back and rounded up one float (a norm in the subnormal range would otherwise round
    to fewer digits).  Unscaled, the squares of entries below ``1.5e-154`` vanish and a
    non-zero row could get the norm 0.
    """
    top = np.abs(a).max(axis=1, initial=0.0)
    _, exponent = np.frexp(top)
    scaled = np.ldexp(a, -exponent[:, None])
    norm = np.ldexp(np.sqrt(logits(scaled.T, scaled.T, 0.0)), exponent)
    return np.where(top > 0, np.nextafter(norm, np.inf), 0.0)


class _Head:
    """A classification head as numbers of one backend: columns ``uT`` and biases ``bm``.

    On the ball backend these are float64 midpoints of the exact head (their radii enter
    :meth:`radius`): the logits of every count against every class are computed in floats and
    enclosed, and only the open cases go to balls.  Elsewhere they are the backend's own numbers.
    """

    def __init__(self, params: Params, bk, nums):
        self.params = params
        if not bk.rigorous:
            self.uT, self.bm = np.ascontiguousarray(nums.u.T), nums.b
            return
        um, ur = _float_enclosure(params.vectors["u"])
        self.bm, br = _float_enclosure(params.scalars["b"])
        self.uT = np.ascontiguousarray(um.T)
        self.um_max, self.ur_max = float(_row_norms(um).max()), float(_row_norms(ur).max())
        self.b_max, self.br_max = float(np.abs(self.bm).max()), float(br.max())

    def radius(self, zm: np.ndarray, zr: np.ndarray) -> np.ndarray:
        """Per row ``n``, a float ``rad_n`` with ``|fl(<um_c, zm_n> + bm_c) - (<u_c, z> + b_c)| <=
        rad_n`` for every class ``c``, every ``z`` of the row's ball and any summation order.

        With ``|u_c - um_c| <= ur``, ``|z - zm_n| <= |zr_n|`` and ``Z = |zm_n| + |zr_n| >= |z|``,
        ``|<u_c, z> - <um_c, zm_n>| <= |ur| Z + |um_c| |zr_n|`` (Cauchy-Schwarz); a float dot
        product of length ``d`` is within ``gamma_d |um_c| |zm_n|`` of the exact one in any
        order (``gamma_d = d u/(1 - d u)``, ``u = 2^-53``), adding ``bm_c`` rounds once more
        (``u (|um_c| |zm_n| (1 + gamma_d) + |bm_c|)``), and ``|b_c - bm_c| <= br``.  With
        ``gamma_{d+1}`` for ``gamma_d (1 + u)`` and maxima over the classes this is at most
        ``|ur| Z + |um| |zr| + gamma_{d+1} |um| Z + u (|um| Z + |bm|) + br``.  It is evaluated in
        floats from norms with relative error below ``(d + 3) u < 1e-10`` (``d <= 2^16``), so an
        inflation by ``1e-3`` covers that rounding, and ``(d + 2)`` smallest subnormals cover
        underflow (at most ``2d`` operations, each off by half of one).  The bound assumes no
        overflow: where a partial sum could overflow (``|um| Z + |bm|`` above half the largest
        float) the radius is infinite.
        """
        d = self.params.cell.d
        u = np.finfo(np.float64).eps / 2
        gamma = (d + 1) * u / (1 - (d + 1) * u)
        zrn = _row_norms(zr)
        z_up = _row_norms(zm) + zrn
        size = self.um_max * z_up + self.b_max
        rad = (self.ur_max * z_up + self.um_max * zrn + gamma * self.um_max * z_up + u * size
               + self.br_max) * (1 + 1e-3) + (d + 2) * np.finfo(np.float64).smallest_subnormal
        return np.where(np.isfinite(rad) & (size <= np.finfo(np.float64).max / 2), rad, np.inf)


def _slack(own, other, rad):
    """Rounding slack of ``own - other`` for logits within ``rad`` of the exact ones: each
    differs by ``rad``, and the float operations computing ``gap -+ slack`` err by at most half
    a spacing of magnitudes below ``|own| + |other| + 2 rad`` each: four such roundings."""
    return 2 * rad + 4 * np.spacing(np.abs(own) + np.abs(other) + 2 * rad)


def _decide_in_balls(bk, head: _Head, z_row, row, n: int, rad: float, m_lo: float):
    """Re-decide a count the float enclosure left open: ``(good, bad, margin lower bound)``.

    ``row`` holds the float logits of every class (``row[n]`` the own one): they bound every gap
    from below; the classes where that bound is not positive (at most ``MAX_BALL_CLASSES``,
    else the count stays undecided) are decided in ball arithmetic.
    """
    own = row[n]
    lower = np.nextafter(own - row - _slack(own, row, rad), -np.inf)
    lower[n] = np.inf
    open_ = np.flatnonzero(~(lower > 0))
    if open_.size > MAX_BALL_CLASSES:
        return False, False, m_lo
    U, B = head.params.vectors["u"], head.params.scalars["b"]
    own_ball = bk.vec(U[n]) @ z_row + bk.vec(B[n:n + 1])[0]
    gaps = own_ball - (bk.vec(U[open_]) @ z_row + bk.vec(B[open_]))
    lower[open_] = bk.lower(gaps)
    return all(g > 0 for g in gaps), any(g <= 0 for g in gaps), float(lower.min())


def _classification_block(bk, head: _Head, z: np.ndarray, n: np.ndarray, width: int):
    """``(surely correct, surely wrong, margin lower bound)`` for the rows ``z`` of counts ``n``.

    Every logit is computed in the fixed order of :func:`verify.forward.logits` (on the ball
    backend from float midpoints, within :meth:`_Head.radius` of the exact ones), ``width``
    classes at a time.
    """
    zm, zr = _float_enclosure(z) if bk.rigorous else (z, None)
    z_cols = zm.T[:, :, None]
    own = logits(zm.T, head.uT[:, n], head.bm[n])
    other = None
    for c0 in range(0, head.uT.shape[1], width):
        tile = logits(z_cols, head.uT[:, None, c0:c0 + width], head.bm[c0:c0 + width])
        mine = np.flatnonzero((n >= c0) & (n < c0 + width))
        tile[mine, n[mine] - c0] = -np.inf
        top = tile.max(axis=1)
        other = top if other is None else np.maximum(other, top)
    gap = own - other
    if not bk.rigorous:
        good = np.asarray(gap > 0, dtype=bool)
        return good, ~good, bk.lower(gap)
    rad = head.radius(zm, zr)
    slack = _slack(own, other, rad)
    m_lo, m_hi = np.nextafter(gap - slack, -np.inf), np.nextafter(gap + slack, np.inf)
    good, bad = m_lo > 0, m_hi <= 0  # NaN (overflow) decides nothing
    for i in np.flatnonzero(~(good | bad)):
        row = logits(zm[i], head.uT, head.bm)
        good[i], bad[i], m_lo[i] = _decide_in_balls(bk, head, z[i], row, n[i], rad[i], m_lo[i])
    return good, bad, m_lo


def _judge_classification(bk, params: Params, nums, inputs: InputSet, chunk: int,
                          tally: _Tally) -> None:
    """Classification in chunks of ``chunk // d`` vectors ``z``; their logits in tiles of at
    most ``chunk`` entries: ``width = min(L+1, chunk // TILE_ROWS)`` classes by
    ``chunk // width`` inputs.  The target class of an input is its count ``n_a``."""
    head = _Head(params, bk, nums)
    rows = max(1, chunk // params.cell.d)
    width = min(inputs.L + 1, max(1, chunk // TILE_ROWS))
    block = max(1, min(rows, chunk // width))
    for start in range(0, inputs.size, rows):
        n, n_b, query = inputs.chunk(start, start + rows)
        z = outputs(params, nums, n, n_b, readout=False, query=query)
        for s in range(0, len(n), block):
            found = _classification_block(bk, head, z[s:s + block], n[s:s + block], width)
            tally.add(start + s, *found)


def counts_to(params: Params, L: int, backend="float64", chunk: int = CHUNK) -> CountResult:
    """Judge whether ``params`` count to ``L`` (every ``n = 0..L``), on ``backend``.

    ``chunk`` bounds the numbers held per intermediate array (:data:`CHUNK`); the result does
    not depend on it.  Judgements beyond :func:`check_cost` raise ``ValueError`` up front.
    """
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"L must be an integer >= 1, got {L!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be an integer >= 1, got {chunk!r}")
    L, chunk = int(L), int(chunk)
    bk = get_backend(backend)
    if params.classes is not None and params.classes != L + 1:
        raise ValueError(f"a classification head with {params.classes} classes judges L={params.classes - 1}, not L={L}")
    check_cost(params.cell, L, bk)
    inputs = InputSet(params.cell, L)
    classify = params.cell.readout == "classification"
    tally = _Tally(sign=-1 if classify else 1)
    with bk.context():
        # balls: the logits are computed in floats and enclosed (_Head.radius), so the head is
        # not converted to balls
        nums = numbers(params, bk, readout=not (classify and bk.rigorous))
        if classify:
            _judge_classification(bk, params, nums, inputs, chunk, tally)
        else:
            fast = _first_pass(bk, params, nums)
            for start in range(0, inputs.size, chunk):
                tally.add(start, *_regression_counts(bk, params, nums, inputs.chunk(start, start + chunk), fast))
    label = inputs.label
    at = None if tally.at is None else label(tally.at)
    extra = (dict(min_margin=tally.value, min_margin_at=at) if classify
             else dict(worst_error=tally.value, worst_error_at=at))
    first = None if tally.first_failure is None else label(tally.first_failure)
    return CountResult(L=L, backend=bk.name, verdict=tally.verdict(), first_failure=first,
                       undecided=tuple(label(i) for i in tally.undecided), **extra)
