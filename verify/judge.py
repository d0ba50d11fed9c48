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

import flint
import numpy as np

from constructions.cell import Params
from verify.backends import arb_bounds, get_backend
from verify.forward import reduced


@dataclass(frozen=True)
class CountResult:
    """Outcome of :func:`counts_to`.

    ``verdict`` is ``"counts"``, ``"fails"`` or ``"cannot certify"`` (ball backend only), decided
    in the backend's own numbers (on balls: exactly).  ``worst_error`` is the largest ``|y - n|``
    (regression; rounded to the nearest float, so it may print as 0.5 when the exact value is
    just below), ``min_margin`` the smallest logit margin (classification; a rigorous lower
    bound on the ball backend); ``*_at`` give the count where they occur.
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


def _margins(logits: np.ndarray, rad: float, n: np.ndarray, rigorous: bool):
    """Bounds of ``logit_n - max_{c != n} logit_c`` per row, for float logits within ``rad``.

    Destroys ``logits`` (the diagonal is overwritten to take the maximum over the others).
    """
    rows = np.arange(len(n))
    own = logits[rows, n].copy()
    logits[rows, n] = -np.inf
    other = logits.max(axis=1)
    gap = own - other
    if not rigorous:
        return gap, gap
    # each logit is within rad; every float operation below errs by at most half a spacing of
    # the magnitudes involved, all below |own| + |other| + 2 rad: cover four such roundings
    slack = 2 * rad + 4 * np.spacing(np.abs(own) + np.abs(other) + 2 * rad)
    return np.nextafter(gap - slack, -np.inf), np.nextafter(gap + slack, np.inf)


def _float_enclosure(x: np.ndarray):
    """Float midpoints and radii with ``|x - mid| <= rad`` entrywise (balls or exact mpf)."""
    if isinstance(x.flat[0], flint.arb):
        lo, hi = arb_bounds(x)
    else:  # exact numbers: round to nearest, off by at most half a spacing
        mid = np.vectorize(float, otypes=[np.float64])(x)
        return mid, np.spacing(np.abs(mid))
    mid = 0.5 * lo + 0.5 * hi
    return mid, np.nextafter(np.maximum(hi - mid, mid - lo), np.inf)


def _rigorous_logits(params: Params, z: np.ndarray):
    """Float logits ``<u_c, z_n> + b_c`` and one radius bounding every error, for balls ``z``.

    With ``zm, zr, um, ur`` the float midpoints and radii,
    ``|<u, z> - <um, zm>| <= |ur| |z| + |um| |zr|`` (Cauchy-Schwarz), the float dot product of
    length ``d`` is within ``gamma_d |um| |zm|`` of the exact one (``gamma_d = d u/(1 - d u)``, any
    summation order), adding ``b`` rounds once more.  Taking maxima over rows and classes gives
    one radius; it is computed in floats and inflated by 1e-3 relative to cover that rounding.
    """
    d = params.cell.d
    zm, zr = _float_enclosure(z)
    um, ur = _float_enclosure(params.vectors["u"])
    bm, br = _float_enclosure(params.scalars["b"])
    u = np.finfo(np.float64).eps / 2
    gamma = (d + 1) * u / (1 - (d + 1) * u)
    row = lambda a: np.sqrt((a * a).sum(axis=1))
    z_max = float((row(zm) + row(zr)).max())
    um_max, ur_max, zr_max = float(row(um).max()), float(row(ur).max()), float(row(zr).max())
    rad = (ur_max * z_max + um_max * zr_max + gamma * um_max * z_max
           + u * (um_max * z_max + float(np.abs(bm).max())) + float(br.max()))
    rad = rad * (1 + 1e-3) + np.finfo(np.float64).tiny
    return zm @ um.T + bm, (rad if np.isfinite(rad) else np.inf)


def _decide_in_balls(bk, params: Params, z: np.ndarray, n: np.ndarray, good, bad, m_lo):
    """Re-decide the rows the float enclosure left open with all logits in ball arithmetic
    (and replace their margin lower bounds by the balls' ones)."""
    u, b = bk.vec(params.vectors["u"]), bk.vec(params.scalars["b"])
    good, bad, m_lo = good.copy(), bad.copy(), m_lo.copy()
    for i in np.flatnonzero(~(good | bad)):
        logits = u @ z[i] + b
        gaps = np.array([logits[n[i]] - o for o in np.delete(logits, n[i])], dtype=object)
        good[i] = all(g > 0 for g in gaps)
        bad[i] = any(g <= 0 for g in gaps)
        m_lo[i] = bk.lower(gaps).min()
    return good, bad, m_lo


def counts_to(params: Params, L: int, backend="float64") -> CountResult:
    """Judge whether ``params`` count to ``L`` (every ``n = 0..L``), on ``backend``."""
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"L must be an integer >= 1, got {L!r}")
    L = int(L)
    bk = get_backend(backend)
    if params.classes is not None and params.classes != L + 1:
        raise ValueError(f"a classification head with {params.classes} classes judges L={params.classes - 1}, not L={L}")
    n = np.arange(L + 1)
    classify = params.cell.readout == "classification"
    # ball arithmetic on (L+1)^2 logits would be slow: enclose z in balls, then the logits by a
    # rigorous float interval product (see _rigorous_logits)
    out = reduced(params, n, backend=bk, readout=not (classify and bk.rigorous))
    with bk.context():
        if not classify:
            err = out - bk.vec(n.astype(object)) if out.dtype == object else out - n
            good, bad = bk.within(err, 0.5)  # decided in the backend's own numbers
            # |y - n| to the nearest float, for reporting (the verdict above is exact)
            err_hi = np.abs(0.5 * bk.lower(err) + 0.5 * bk.upper(err))
            worst = int(np.argmax(np.nan_to_num(err_hi, nan=np.inf)))
            extra = dict(worst_error=float(err_hi[worst]), worst_error_at=worst)
        else:
            # balls: a float enclosure of the logits; otherwise the backend's own numbers
            logits, rad = _rigorous_logits(params, out) if bk.rigorous else (out.copy(), 0.0)
            m_lo, m_hi = _margins(logits, rad, n, bk.rigorous)
            good, bad = m_lo > 0, ~(m_hi > 0)
            if bk.rigorous and not (good | bad).all():
                good, bad, m_lo = _decide_in_balls(bk, params, out, n, good, bad, m_lo)
            good, bad = np.asarray(good, dtype=bool), np.asarray(bad, dtype=bool)
            m_lo = bk.lower(m_lo) if not bk.rigorous else m_lo
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
