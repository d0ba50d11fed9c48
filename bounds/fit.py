"""Growth rates: least-squares fits of log(quantity) on log(L), with the theory exponents.

The fits are ordinary least squares over the tail ``L >= L_from`` (:func:`fit`); each 95%
interval is ``slope +- t_{0.975, n-k} * stderr`` (Student t, ``k`` fitted coefficients).

Theory exponents (the README's results and the constructions' docstrings):

* regression ``B_min``: :func:`constructions.laws.theory_exponent` (linear attention without
  post-norm 0, the segment 1, the arc 3/2 bare and 3/4 with a gain; bare pre-norm with
  softmax: none, a finite ``L*``);
* classification margin at unit norm: :func:`constructions.laws.margin_exponent` (segment
  ``-3`` once ``L`` is well beyond the largest attention ratio, line ``-1``, arc ``-2``); the
  local exponent of the proven bound between the two largest ``L`` (:func:`theory_local`) is the
  theory at the grid's own ``L``.

Leading constants of regression ``B_min`` (:func:`leading_constant`): ``c(d)`` with
``B_min(L) = c(d) L^p (1 + o(1))`` from :func:`constructions.laws.leading_term`, and the ratio
``B_min / (c L^p)`` at the largest certified ``L``.
"""

from __future__ import annotations

import math

import numpy as np
import mpmath

from constructions.cell import Cell
from constructions import laws, registry


def theory_exponent(cell: Cell):
    """The proven growth exponent of the fitted quantity (None where it does not grow):
    :func:`constructions.laws.theory_exponent` for ``B_min``, the margin's for classification;
    0 for the ``B_min`` of a classification cell that is not scale-free, which grows like
    ``sqrt(ln L)`` (:func:`log_law`)."""
    if cell.readout == "classification":
        return laws.margin_exponent(cell) if registry.scale_free(cell) else 0.0
    return laws.theory_exponent(cell)


def log_law(cell: Cell, rows, L_from: int) -> dict:
    """The fit of ``B_min^2`` on ``ln L`` over the certified rows with ``L >= L_from``: its slope,
    95% interval and the theory slope ``sqrt(d)/2`` (the select task read last with softmax
    attention, classification: :mod:`constructions.select_last_contrast_head` keeps ``B^2 =
    (sqrt(d)/2) ln L + O(1)``, and :mod:`bounds.contrast_lower` proves ``B_min^2 >= (sqrt(d)/2)
    ln((L - 1)/2) - o(1)`` without a norm, ``> (sqrt(d)/2) ln((L - 1)/3)`` after post-norm)."""
    pts = sorted((r["L"], r["B_min"]) for r in rows
                 if r.get("certified") and r.get("B_min") and r["L"] >= L_from)
    out = {"slope": None, "ci95": None, "theory": math.sqrt(cell.d) / 2, "model": "B_min^2 = c + s ln L"}
    if len(pts) < 2:
        return out
    x = np.log([p[0] for p in pts])
    slope, half = _least_squares([x], np.array([p[1] ** 2 for p in pts]))
    out["slope"] = slope
    if half is not None:
        out["ci95"] = [slope - half, slope + half]
    return out


def t_quantile(df: int, p: float) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom, ``p > 1/2``.

    ``P(|T| > t) = I_{df/(df+t^2)}(df/2, 1/2)`` (regularised incomplete beta), solved for ``t``.
    """
    tail = 2 * (1 - p)
    f = lambda t: mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True) - tail
    return float(mpmath.findroot(f, (mpmath.mpf("0.01"), mpmath.mpf(1000)), solver="illinois"))


def theory_note(cell: Cell):
    """When the asymptotic exponent is reached, where that is not immediate (else None).

    The select task read last after post-RMSNorm (:mod:`constructions.select_last_rms`): the
    theory exponent is the lower bound's, not the construction's; so it is for linear attention
    read last after post-RMSNorm with a gain (:mod:`constructions.last_foot`, both tasks), where
    the foot's tie to the budget makes the construction grow faster.  The select task read last
    with the head of :mod:`constructions.select_last_points`: the theory exponent is the count
    task's bound's, the head's margin falls faster (but after post-LayerNorm, where the shaped arc
    head meets the bound's rate).  Classification on the
    segment: at unit norm the attention ratio is at most
    ``rho_max = exp(sigma_max / sqrt(d))``; the margin decays like ``L^-2`` while ``L`` is below
    about ``rho_max`` and like ``L^-3`` beyond (:func:`constructions.laws.margin_exponent`).
    """
    if cell.readout == "regression" and registry.builds("select_last_rms", cell):
        return ("theory is the exponent of the proven lower bound (the count task read last, its "
                "sub-task n_b = 0); the construction (constructions.select_last_rms) suppresses b "
                "with the embeddings' size and grows like L^{3/2} sqrt(log L), bare and with a gain; "
                "the select task's own rate is not derived")
    if (cell.readout == "regression" and cell.read.last and cell.attention == "linear" and cell.post
            and not cell.kind.centred and cell.affine.gain):
        return ("theory is the exponent of the proven lower bound; the construction (the one-sided "
                "arc of constructions.last_foot, its foot tied to the budget) grows faster on the "
                "sweep's grid, its float shape search is not shown optimal, and the rate of B_min "
                "is not derived")
    if (cell.readout == "classification" and registry.builds("select_last_points", cell)
            and not (cell.post and cell.kind.centred)):
        return ("theory is the exponent of the proven upper bound (the count task read last, its "
                "sub-task n_b = 0); the head (constructions.select_last_points on the regression "
                "geometry) decays faster, and the select task's own rate is not derived")
    if cell.readout == "classification" and not registry.scale_free(cell):
        return ("B_min grows like sqrt(ln L), slower than every power: the construction's "
                "embeddings keep the score contrast exp(tau <e_a - e_b, e_s>) > L - 1 "
                "(constructions.select_last_contrast_head); "
                + "the proven lower bound has the same slope of B_min^2 on ln L (bounds.contrast_lower)"
                + "; log_law fits B_min^2 on ln L")
    if cell.readout != "classification" or laws.family(cell) != "segment":
        return None
    gap = laws.last_score_gap_max if cell.read.last else laws.score_gap_max
    sigma_max = float(gap(cell, 1.0, laws.FLOAT))
    rho_max = math.exp(sigma_max / math.sqrt(cell.d))
    return (f"asymptotic exponent, reached for L >> rho_max = {rho_max:.4g} (the largest attention "
            "ratio at unit norm); below it the margin decays like L^-2; theory_local is the "
            "exponent of the proven max-min margin at the grid's largest L")


def theory_local(rows, L_from: int = 1):
    """The slope of ``log margin_upper`` on ``log L`` between the two largest ``L >= L_from`` of
    classification rows (None with fewer than two bounds): the exponent the theory gives at the
    grid's own ``L``.  Where the bound is the max-min margin (segment and line, to 1e-6) this is
    the exact local exponent; after post-norm that of the bound."""
    pts = sorted((r["L"], r["margin_upper"]) for r in rows
                 if r.get("margin_upper") and r["L"] >= L_from)
    if len(pts) < 2:
        return None
    (L1, m1), (L2, m2) = pts[-2], pts[-1]
    return float(math.log(m2 / m1) / math.log(L2 / L1))


def _least_squares(columns, y):
    """Ordinary least squares of ``y`` on ``[1, *columns]``: the slope of the first column and
    its 95% half-width (Student t with ``n - k`` degrees of freedom; None if ``n <= k``)."""
    X = np.column_stack([np.ones_like(y), *columns])
    n, k = X.shape
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    if n <= k:
        return float(coef[1]), None
    resid = y - X @ coef
    cov = np.linalg.inv(X.T @ X) * float(resid @ resid) / (n - k)
    return float(coef[1]), t_quantile(n - k, 0.975) * math.sqrt(max(float(cov[1, 1]), 0.0))


def fit(Ls, ys, L_from: int) -> dict:
    """Fit ``y ~ L^p`` over ``L >= L_from`` (rows with a missing or non-positive y are skipped).

    Three estimates of the exponent ``p``:

    * ``exponent`` and ``ci95``: least squares of ``log y`` on ``log L``.  The rates are
      asymptotic, so at finite ``L`` the data carry corrections (``B_min = c L^p (1 + O(1/L))``
      for the arc, ``O(log L / L^2)`` for the segment) and the interval, which only measures
      the scatter about a straight line, can exclude the theory exponent;
    * ``local_exponent``: the slope between the two largest ``L`` (``local_between``), which
      converges to ``p``;
    * ``corrected`` (``exponent``, ``ci95``): least squares of ``log y`` on ``log L`` and
      ``1/L`` (needs three points; the interval four), which absorbs the leading correction.
    """
    pts = sorted((L, y) for L, y in zip(Ls, ys) if L >= L_from and y is not None and y > 0)
    out = {"exponent": None, "ci95": None, "points": len(pts), "L_from": L_from,
           "local_exponent": None, "local_between": None,
           "corrected": {"exponent": None, "ci95": None, "model": "log y = c + p log L + a/L"}}
    if len(pts) < 2:
        return out
    Lv = np.array([p[0] for p in pts], dtype=float)
    x, y = np.log(Lv), np.log([p[1] for p in pts])
    slope, half = _least_squares([x], y)
    out["exponent"] = slope
    if half is not None:
        out["ci95"] = [slope - half, slope + half]
    out["local_exponent"] = float((y[-1] - y[-2]) / (x[-1] - x[-2]))
    out["local_between"] = [pts[-2][0], pts[-1][0]]
    if len(pts) >= 3:
        p_c, half_c = _least_squares([x, 1 / Lv], y)
        out["corrected"]["exponent"] = p_c
        out["corrected"]["ci95"] = None if half_c is None else [p_c - half_c, p_c + half_c]
    return out


def leading_constant(cell: Cell, rows) -> dict | None:
    """The leading term ``B_min(L) = c(d) L^p (1 + o(1))`` of a regression cell
    (:func:`constructions.laws.leading_term`) and how the rows approach it (None where none is
    derived: no power rate, classification, or ``eps > 0`` where the constant is not derived).

    ``value`` and ``exact`` (a string; ``srepr`` evaluates back in sympy) are ``c`` at the cell's
    width, ``general`` is ``c(d)`` (valid for ``d >= d_min``), ``exponent`` is ``p``;
    ``proven`` is ``B_min`` (upper and lower bounds share the leading term).  ``ratio`` is
    ``B_min / (c L^p)`` and ``lower_ratio`` is ``B_lower / (c L^p)`` at the largest certified ``L`` of the rows (``L``),
    with ``c`` and ``p`` at 30 digits.  The exact forms come from
    :func:`constructions.laws.leading_term_fields` (generated: no sympy at run time).
    """
    fields = laws.leading_term_fields(cell)
    if fields is None:
        return None
    out = {k: fields[k] for k in ("value", "exact", "srepr", "general", "general_srepr", "d_min",
                                  "exponent", "exponent_value", "statement", "proven")}
    out.update(L=None, ratio=None, lower_ratio=None)
    certified = [r for r in rows if r.get("certified") and r.get("B_min")]
    if certified:
        last = max(certified, key=lambda r: r["L"])
        c, p = (_exact_mpf(fields[k]) for k in ("constant_30", "exponent_30"))
        scale = c * mpmath.mpf(last["L"]) ** p
        out["L"] = last["L"]
        out["ratio"] = float(last["B_min"] / scale)
        if last.get("B_lower") is not None:
            out["lower_ratio"] = float(last["B_lower"] / scale)
    return out


def _exact_mpf(pair) -> mpmath.mpf:
    """``mantissa * 2^exponent`` as an mpf, exactly (not rounded to the working precision: as
    ``mpmath.mpf`` keeps the binary value of a sympy Float)."""
    man, exp = pair
    with mpmath.workprec(max(53, abs(man).bit_length())):
        return mpmath.mpf((man, exp))
