"""Growth rates: least-squares fit of log(quantity) on log(L), with the theory exponents.

The fit is ordinary least squares of ``log y`` on ``log L`` over the tail ``L >= L_from``; the
95% interval is ``slope +- t_{0.975, n-2} * stderr`` (Student t, needs at least 3 points).

Theory exponents (SPEC and the constructions' docstrings):

* regression ``B_min``: linear attention without post-norm 0 (exact counting is a fixed slope);
  softmax none 1, pre_learned 1 (the segment needs ``rho ~ L^2`` and ``D ~ L^2``); post-norm
  3/2 (bare) and 3/4 (learned), for either attention since the arc does not care how its line
  was made; softmax pre_bare: none (finite ``L*``);
* classification margin at unit norm: segment ``-3`` (bounded ``rho``), line ``-1``, arc ``-2``
  (:mod:`constructions.classification`).
"""

from __future__ import annotations

import math

import numpy as np
import mpmath

from constructions.cell import Cell
from constructions.classification import MARGIN_EXPONENT
from constructions.regression import family, segment_reach

_REGRESSION_THEORY = {"none": 1.0, "pre_learned": 1.0, "pre_bare": None,
                      "post_bare": 1.5, "post_learned": 0.75}


def theory_exponent(cell: Cell):
    """The proven growth exponent of the fitted quantity (None where it does not grow)."""
    if cell.readout == "classification":
        return MARGIN_EXPONENT[family(cell)]
    if cell.attention == "linear" and not cell.post:
        return 0.0
    return _REGRESSION_THEORY[cell.norm]


def t_quantile(df: int, p: float) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom, ``p > 1/2``.

    ``P(|T| > t) = I_{df/(df+t^2)}(df/2, 1/2)`` (regularised incomplete beta), solved for ``t``.
    """
    tail = 2 * (1 - p)
    f = lambda t: mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True) - tail
    return float(mpmath.findroot(f, (mpmath.mpf("0.01"), mpmath.mpf(1000)), solver="illinois"))


def theory_note(cell: Cell):
    """When the asymptotic exponent is reached, where that is not immediate (else None).

    Classification on the segment: at unit norm the attention ratio is at most
    ``rho_max = exp(sigma_max / sqrt(d))``; the margin decays like ``L^-2`` while ``L`` is below
    about ``rho_max`` and like ``L^-3`` beyond.
    """
    if cell.readout != "classification" or family(cell) != "segment":
        return None
    sigma_max = 2.0 * cell.d if cell.norm == "pre_bare" else float(segment_reach(cell, math.sqrt)[2])
    rho_max = math.exp(sigma_max / math.sqrt(cell.d))
    return (f"asymptotic exponent, reached for L >> rho_max = {rho_max:.4g} (the largest attention "
            "ratio at unit norm); below it the margin decays like L^-2")


def fit(Ls, ys, L_from: int) -> dict:
    """Fit ``y ~ L^p`` over ``L >= L_from`` (rows with a missing or non-positive y are skipped)."""
    pts = [(L, y) for L, y in zip(Ls, ys) if L >= L_from and y is not None and y > 0]
    out = {"exponent": None, "ci95": None, "points": len(pts), "L_from": L_from}
    if len(pts) < 2:
        return out
    x = np.log([p[0] for p in pts])
    y = np.log([p[1] for p in pts])
    xc = x - x.mean()
    slope = float((xc * (y - y.mean())).sum() / (xc * xc).sum())
    out["exponent"] = slope
    if len(pts) >= 3:
        resid = y - y.mean() - slope * xc
        stderr = math.sqrt((resid * resid).sum() / (len(pts) - 2) / (xc * xc).sum())
        half = t_quantile(len(pts) - 2, 0.975) * stderr
        out["ci95"] = [slope - half, slope + half]
    return out
