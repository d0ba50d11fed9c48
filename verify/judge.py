"""The counting judge: do parameters count to ``L``?

SPEC's rules, for the inputs ``(s, a^n)``, ``n = 0..L``:

* regression: correct for ``n`` iff ``|y(n) - n| < 1/2`` (strict);
* classification: correct iff ``n`` is the unique argmax of the logits, i.e. the margin
  ``logit_n(n) - max_{c != n} logit_c(n)`` is ``> 0``.

On the ball backend the verdict is rigorous: a count is *correct* only if the whole enclosure
satisfies the rule, *wrong* only if no point of it does, and otherwise *undecided*; then the
parameters are not certified ("cannot certify").  On every other backend the verdict is that
of the computed numbers (a screen).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from constructions.cell import Params
from verify.backends import get_backend
from verify.forward import reduced

CERTIFYING_BACKEND = "arb256"


@dataclass(frozen=True)
class CountResult:
    """Outcome of :func:`counts_to`.

    ``verdict`` is ``"counts"``, ``"fails"`` or ``"cannot certify"`` (ball backend only).
    ``worst_error`` is the largest ``|y - n|`` (regression; an upper bound on the ball
    backend), ``min_margin`` the smallest logit margin (classification; a lower bound on the ball
    backend); ``*_at`` give the count where they occur.
    """

    L: int
    backend: str
    verdict: str
    first_failure: int | None
    undecided: tuple
    worst_error: float | None = None
    worst_error_at: int | None = None
    min_margin: float | None = None
    min_margin_at: int | None = None

    @property
    def counts(self) -> bool:
        return self.verdict == "counts"

    @property
    def certified(self) -> bool:
        """True iff the parameters provably count to L (rigorous backend and verdict counts)."""
        return self.counts and get_backend(self.backend).rigorous

    def __bool__(self):
        return self.counts


def _margins(bk, logits: np.ndarray, n: np.ndarray):
    """Lower and upper float bounds of ``logit_n - max_{c != n} logit_c`` for each row ``n``."""
    lo, hi = bk.lower(logits), bk.upper(logits)
    rows = np.arange(len(n))
    own_lo, own_hi = lo[rows, n], hi[rows, n]
    hi_other, lo_other = hi.copy(), lo.copy()
    hi_other[rows, n] = -np.inf
    lo_other[rows, n] = -np.inf
    # rounding the difference of two floats: widen by one ulp in the safe direction
    m_lo = np.nextafter(own_lo - hi_other.max(axis=1), -np.inf)
    m_hi = np.nextafter(own_hi - lo_other.max(axis=1), np.inf)
    if not bk.rigorous:
        m_lo = m_hi = own_lo - hi_other.max(axis=1)
    return m_lo, m_hi


def counts_to(params: Params, L: int, backend="float64") -> CountResult:
    """Judge whether ``params`` count to ``L`` (every ``n = 0..L``), on ``backend``."""
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"L must be an integer >= 1, got {L!r}")
    L = int(L)
    bk = get_backend(backend)
    if params.classes is not None and params.classes != L + 1:
        raise ValueError(f"a classification head with {params.classes} classes judges L={params.classes - 1}, not L={L}")
    n = np.arange(L + 1)
    out = reduced(params, n, backend=bk)
    with bk.context():
        if params.cell.readout == "regression":
            err = out - bk.vec(n.astype(object)) if out.dtype == object else out - n
            err_hi = np.maximum(bk.upper(err), -bk.lower(err))  # upper bound of |y - n|
            err_lo = np.maximum(np.maximum(bk.lower(err), -bk.upper(err)), 0.0)  # lower bound
            good, bad = err_hi < 0.5, ~(err_lo < 0.5)
            if not bk.rigorous:
                good, bad = np.abs(err_hi) < 0.5, ~(np.abs(err_hi) < 0.5)
            worst = int(np.argmax(np.nan_to_num(err_hi, nan=np.inf)))
            extra = dict(worst_error=float(err_hi[worst]), worst_error_at=worst)
        else:
            m_lo, m_hi = _margins(bk, out, n)
            good, bad = m_lo > 0, ~(m_hi > 0)
            worst = int(np.argmin(np.nan_to_num(m_lo, nan=-np.inf)))
            extra = dict(min_margin=float(m_lo[worst]), min_margin_at=worst)
    bad_idx = np.flatnonzero(bad)
    undecided = tuple(int(i) for i in np.flatnonzero(~good & ~bad))
    if bad_idx.size:
        verdict = "fails"
    elif undecided:
        verdict = "cannot certify"
    else:
        verdict = "counts"
    return CountResult(
        L=L, backend=bk.name, verdict=verdict,
        first_failure=int(bad_idx[0]) if bad_idx.size else None,
        undecided=undecided, **extra,
    )
