r"""Classification of the select task read last, softmax attention without a norm: a head that
cancels the distractor at its own query, and the score contrast that the count then costs.

*The logits are linear in the counts.*  Without a norm ``h = e``.  An input with ``n_a`` tokens
``a`` and ``n_b`` tokens ``b`` read at its last token ``q`` has weights ``w^q_j = exp(tau <e_q,
e_j>)``, the denominator ``D^q = w^q_s + n_a w^q_a + n_b w^q_b > 0`` and the output ``z = e_q +
(w^q_s e_s + n_a w^q_a e_a + n_b w^q_b e_b)/D^q``, so the logit of class ``c`` is ``F^q_c / D^q``
with

    F^q_c = w^q_s (K^q_c + p_c) + n_a w^q_a (K^q_c + q_c) + n_b w^q_b (K^q_c + r_c),

``K^q_c = <u_c, e_q> + b_c``, ``p_c, q_c, r_c = <u_c, e_s>, <u_c, e_a>, <u_c, e_b>``.  ``D^q`` is
common to every class, so the argmax is that of ``F^q_c``: an affine function of ``(n_a, n_b)``.

*The head.*  Take ``b_c = -2 r_c``: at the query ``b`` the distractor's coefficient ``K^b_c + r_c
= 2 r_c + b_c`` vanishes.  With ``alpha_c = p_c - r_c`` and ``beta_c = q_c - r_c`` the three
queries give (``W = exp(tau <e_a, e_b>)`` is both ``w^a_b`` and ``w^b_a``)

    F^b_c = w^b_s (alpha_c + beta_c kappa n_a),                         kappa = W / w^b_s,
    F^a_c = w^a_s (alpha_c + beta_c (1 + 2 rho n_a + mu n_b)),    rho = w^a_a / w^a_s, mu = W / w^a_s,
    logit_c(s) = 2 alpha_c          (the input ``(s)``: ``z = 2 e_s``),

so every input is read at one position ``t`` of the lines ``alpha_c + beta_c t``: ``t = kappa
n_a`` (last token ``b``, ``n_b >= 1``), ``t = 1 + 2 rho n_a + mu n_b`` (last token ``a``, ``n_a
>= 1``), ``t = 0`` (``(s)``).  The geometry below makes ``2 rho = kappa``: class ``n`` then fills
``[kappa n, 1 + kappa n + mu (L - n)]`` (``1 <= n <= L - 1``; class ``L`` is the point ``1 +
kappa L``, class 0 the point 0), and the classes are apart iff ``kappa > 1 + mu (L - 1)``.  The
head is :func:`constructions.classification.collinear_head` on these intervals of ``t`` (its
slopes ``beta_c``, its intercepts ``alpha_c``); ``u_c`` is the vector of the plane of ``e_s - e_b,
e_a - e_b`` with ``<u_c, e_s - e_b> = alpha_c`` and ``<u_c, e_a - e_b> = beta_c``, every row
scaled by one factor to norm at most 1 (a positive factor on every ``(u_c, b_c)`` keeps the
argmax).

*The geometry.*  ``e_a, e_b, e_s`` of one norm ``B`` in the first coordinate plane, ``e_b`` and
``e_s`` at the angles ``phi`` and ``psi`` from ``e_a``.  ``2 rho = kappa`` reads ``tau <e_a - e_b,
e_a - e_s> = -ln 2``, which fixes ``B^2 = -sqrt(d) ln 2 / c_3`` with ``c_3 = 1 - cos phi - cos psi
+ cos(phi - psi) < 0``; the condition ``kappa > (1 + SLACK)(1 + mu (L - 1))`` is ``tau <e_a - e_b,
e_s> > ln((1 + SLACK)(L - 1 + 1/mu))``, and the angles are those of the smallest ``B`` that meets
it (a float search, :func:`angles`; the mpmath construction then checks the condition and the
judge certifies every input on balls).  The condition needs ``exp(tau <e_a - e_b, e_s>) > L -
1``, so ``2 B^2 >= sqrt(d) ln(L - 1)``: ``B^2 = (sqrt(d)/2) ln L + O(1)``, the rate of the proven
lower bound (:func:`bounds.contrast_lower.b_lower`), which the construction meets to a constant
in ``B^2``.

*Not scale-free.*  The argmax is invariant under a positive factor on the head, not on the
embeddings: their scores set ``kappa`` and ``mu``.  So ``B_min`` here is not an infimum of 0: it is
at most the bound of ``e_s, e_a, e_b`` (the head's rows scale down freely) and at least
:func:`bounds.contrast_lower.b_lower` (``L >= 5``).  The row's ``margin`` is that of the head with
rows of norm ``<= 1`` on these embeddings.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from constructions import laws, registry
from constructions.cell import Cell, Params
from constructions.classification import ClassificationDesign, check_size, collinear_head

#: the relative slack of the condition ``kappa > 1 + mu (L - 1)`` (the smallest gap of ``t``)
SLACK = 2.0**-4
#: the head's rows are scaled to this norm (rounding stays inside the unit ball)
SIGMA = 1 - mpmath.mpf(2) ** -40


def built(cell: Cell) -> bool:
    """Whether ``cell`` (classification) is served by :class:`ContrastSelectLastHead`."""
    return registry.builds("select_last_contrast_head", cell)


def _cosines(phi: float, psi: float):
    """``(c_3, c_d)``: ``<e_a - e_b, e_a - e_s>/B^2`` and ``<e_a - e_b, e_s>/B^2`` at the angles."""
    c3 = 1 - math.cos(phi) - math.cos(psi) + math.cos(phi - psi)
    cd = math.cos(psi) - math.cos(phi - psi)
    return c3, cd


def _excess(phi: float, psi: float, L: int, d: int) -> float:
    """``tau <e_a - e_b, e_s> - ln((1 + SLACK)(L - 1 + 1/mu))`` at the angles (float;
    a large negative number where ``c_3 >= 0``: no ``B`` makes ``2 rho = kappa``)."""
    c3, cd = _cosines(phi, psi)
    if c3 >= -1e-12:
        return -1e6 * (1 + c3)  # finite, so that the search's difference quotients stay finite
    tb2 = -math.log(2) / c3  # tau B^2
    log_inv_mu = tb2 * (math.cos(psi) - math.cos(phi))  # -tau <e_a, e_b - e_s> / B^2 * tau B^2
    # ln(L - 1 + 1/mu), computed without overflow
    big = max(math.log(max(L - 1, 1e-300)), log_inv_mu)
    small = min(math.log(max(L - 1, 1e-300)), log_inv_mu)
    lse = big + math.log1p(math.exp(small - big)) if L > 1 else log_inv_mu
    return tb2 * cd - math.log1p(SLACK) - lse


def angles(L: int, d: int):
    """``(phi, psi)``: the angles of ``e_b`` and ``e_s`` from ``e_a`` with the smallest ``B`` that
    keeps the classes apart at ``L`` (module docstring; a float search from a grid of starts)."""
    from scipy.optimize import minimize

    best = None
    for phi0 in np.linspace(2.0, 4.3, 6):
        for psi0 in np.linspace(-1.4, 1.4, 7):
            res = minimize(lambda v: _cosines(*v)[0], (phi0, psi0), method="SLSQP",
                           constraints=[{"type": "ineq", "fun": lambda v: _excess(v[0], v[1], L, d)}],
                           options={"maxiter": 200, "ftol": 1e-14})
            phi, psi = res.x
            if _excess(phi, psi, L, d) >= 0 and (best is None or _cosines(phi, psi)[0] < best[0]):
                best = (_cosines(phi, psi)[0], float(phi), float(psi))
    if best is None:
        raise ValueError(f"no geometry keeps the classes apart at L = {L}")
    return best[1], best[2]


class ContrastSelectLastHead(ClassificationDesign):
    """The head of the select task read last, softmax attention without a norm (module
    docstring); the interface of :class:`~constructions.classification.ClassificationDesign`,
    not scale-free (:attr:`scale_free`)."""

    #: the embeddings set the scores: ``B_min`` is not an infimum of 0 (module docstring)
    scale_free = False

    def __init__(self, cell: Cell):
        if not built(cell):
            from constructions.refusals import refusal

            raise ValueError(f"{cell.describe()}: {refusal(cell) or 'not served by ContrastSelectLastHead'}")
        self.cell, self.family, self.geometry, self.foot, self.pencil = cell, laws.family(cell), None, None, None

    def embeddings(self, L_value: int, dps: int = 50) -> dict:
        """``e_a, e_b, e_s`` at ``L`` (mpf at ``dps`` digits): norm ``B`` from ``2 rho = kappa``."""
        phi, psi = angles(L_value, self.cell.d)
        d = self.cell.d
        with mpmath.workdps(dps):
            phi, psi = mpmath.mpf(phi), mpmath.mpf(psi)
            c3 = 1 - mpmath.cos(phi) - mpmath.cos(psi) + mpmath.cos(phi - psi)
            B = mpmath.sqrt(-mpmath.sqrt(d) * mpmath.log(2) / c3)

            def at(angle):
                v = np.array([mpmath.mpf(0)] * d, dtype=object)
                v[0], v[1] = B * mpmath.cos(angle), B * mpmath.sin(angle)
                return v

            return {"e_s": at(psi), "e_a": at(mpmath.mpf(0)), "e_b": at(phi)}

    def positions(self, vec: dict, L_value: int, dps: int = 50):
        """``(lo, hi)``: the ends of every class's interval of ``t`` (module docstring; mpf)."""
        tau = 1 / mpmath.sqrt(self.cell.d)
        with mpmath.workdps(dps):
            dot = lambda x, y: mpmath.fsum(p * q for p, q in zip(vec[x], vec[y]))
            w = lambda q, j: mpmath.exp(tau * dot(q, j))
            kappa = w("e_a", "e_b") / w("e_b", "e_s")
            two_rho = 2 * w("e_a", "e_a") / w("e_a", "e_s")
            mu = w("e_a", "e_b") / w("e_a", "e_s")
            lo, hi = [mpmath.mpf(0)], [mpmath.mpf(0)]
            for n in range(1, L_value + 1):
                ends = [1 + two_rho * n, 1 + two_rho * n + mu * (L_value - n)]
                if n < L_value:
                    ends.append(kappa * n)
                lo.append(min(ends))
                hi.append(max(ends))
            return lo, hi

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The head at ``L`` (refused beyond :func:`constructions.classification.check_size`)."""
        if isinstance(L_value, bool) or not isinstance(L_value, (int, np.integer)) or L_value < 1:
            raise ValueError(f"L must be a positive integer, got {L_value!r}")
        L_value = int(L_value)
        check_size(self.cell, L_value)
        vec = self.embeddings(L_value, dps)
        lo, hi = self.positions(vec, L_value, dps)
        with mpmath.workdps(dps):
            if not all(lo[c + 1] > hi[c] for c in range(L_value)):
                raise ValueError(f"{self.cell.describe()}: the classes meet at L = {L_value}")
            slopes, intercepts = collinear_head(lo, [mpmath.mpf(1)], upper=hi)
            x, y = vec["e_s"] - vec["e_b"], vec["e_a"] - vec["e_b"]
            dot = lambda p, q: mpmath.fsum(i * j for i, j in zip(p, q))
            gram = mpmath.matrix([[dot(x, x), dot(x, y)], [dot(x, y), dot(y, y)]])
            rows = []
            for k, alpha in zip(slopes[:, 0], intercepts):
                cx, cy = mpmath.lu_solve(gram, mpmath.matrix([alpha, k]))
                rows.append(cx * x + cy * y)
            scale = SIGMA / max(mpmath.sqrt(dot(r, r)) for r in rows)
            u = np.array([r * scale for r in rows], dtype=object)
            b = [-2 * dot(r, vec["e_b"]) for r in u]
        return Params(self.cell, {**vec, "u": u}, {"b": b})
