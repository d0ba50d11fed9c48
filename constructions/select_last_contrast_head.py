r"""Classification of the select task read last, softmax attention without a norm or after
post-norm: a head that the distractor cannot move at its own query, and the score contrast
that the count then costs.

*The logits are read on one line.*  Post-norm and no norm both score the raw embeddings (``h =
e``).  An input with ``n_a`` tokens ``a`` and ``n_b`` tokens ``b`` read at its last token ``q`` has
weights ``w^q_j = exp(tau <e_q, e_j>)``, the denominator ``D^q = w^q_s + n_a w^q_a + n_b w^q_b >
0`` and the residual ``r = e_q + (w^q_s e_s + n_a w^q_a e_a + n_b w^q_b e_b)/D^q``.

* *No norm* (``z = r``): the logit of class ``c`` is ``F^q_c / D^q`` with ``F^q_c = w^q_s (K^q_c +
  p_c) + n_a w^q_a (K^q_c + q_c) + n_b w^q_b (K^q_c + r_c)``, ``K^q_c = <u_c, e_q> + b_c``, ``p_c,
  q_c, r_c = <u_c, e_s>, <u_c, e_a>, <u_c, e_b>``.  Take ``b_c = -2 r_c``: at the query ``b`` the
  distractor's coefficient ``2 r_c + b_c`` vanishes.  With ``alpha_c = p_c - r_c``, ``beta_c = q_c -
  r_c`` and ``W = exp(tau <e_a, e_b>)`` (both ``w^a_b`` and ``w^b_a``)

      F^b_c = w^b_s (alpha_c + beta_c kappa n_a),                       kappa = W / w^b_s,
      F^a_c = w^a_s (alpha_c + beta_c (1 + 2 rho n_a + mu n_b)),  rho = w^a_a / w^a_s, mu = W / w^a_s,
      logit_c(s) = 2 alpha_c      (the input ``(s)``: ``z = 2 e_s``);

  ``u_c`` is the vector of the plane of ``e_s - e_b, e_a - e_b`` with ``<u_c, e_s - e_b> =
  alpha_c`` and ``<u_c, e_a - e_b> = beta_c``.
* *Post-norm* (``eps = 0``; ``z = g * N(r) + beta``, ``N`` scale invariant).  Take ``u_c``
  orthogonal to ``e_b`` with ``<u_c, e_s> = alpha_c``, ``<u_c, e_a> = beta_c`` (in the span of
  ``e_s, e_a, e_b``), a gain ``g`` on the all-ones axis and ``b_c = -<u_c, beta>``.  After
  RMSNorm ``N(r) = sqrt(d) r/|r|``; after LayerNorm ``N(r) = sqrt(d) C r/|C r|`` with ``C`` the
  centring, and ``e_b`` on the all-ones axis ``o`` makes ``u_c`` centred, so ``<u_c, C r> = <u_c,
  r>``.  Either way the logit is ``G <u_c, D^q r> / |(C) D^q r|`` (``G = sqrt(d)`` bare, ``|g|``
  with the gain) with the positive factor common to the classes, and ``<u_c, D^q r> = F^q_c`` of
  the no-norm case with ``r_c = b_c = 0``: the same lines and the same positions ``t``.

So in both every input is read at one position ``t`` of the lines ``alpha_c + beta_c t``: ``t =
kappa n_a`` (last token ``b``, ``n_b >= 1``), ``t = 1 + 2 rho n_a + mu n_b`` (last token ``a``,
``n_a >= 1``), ``t = 0`` (``(s)``).  The geometry makes ``2 rho = kappa``: class ``n`` then fills
``[kappa n, 1 + kappa n + mu (L - n)]`` (``1 <= n <= L - 1``; class ``L`` is the point ``1 +
kappa L``, class 0 the point 0), and the classes are apart iff ``kappa > 1 + mu (L - 1)``.  The
head's slopes ``beta_c`` and intercepts ``alpha_c`` are those of
:func:`constructions.classification.collinear_head` on these intervals of ``t``, every row scaled
by one factor to norm at most 1 (a positive factor on every ``(u_c, b_c)`` keeps the argmax).

*The geometry.*  ``e_a, e_b, e_s`` of one norm ``B``, at two angles (:func:`gram`): without a norm
in the first coordinate plane, ``e_b`` and ``e_s`` at ``phi`` and ``psi`` from ``e_a``; after
post-norm ``e_b = B o`` (``o`` the unit all-ones vector), ``e_a`` and ``e_s`` at two angles
from it, ``e_s`` turned by :data:`CHI` out of the plane of ``o, e_a`` (so that ``e_s, e_a, e_b``
are independent, and after LayerNorm their centred parts span a plane; ``d >= 3``).
``2 rho = kappa`` reads ``tau <e_a - e_b, e_a - e_s> = -ln 2``, which fixes
``B^2 = -sqrt(d) ln 2 / c_3`` with ``c_3 = <e_a - e_b, e_a - e_s>/B^2 < 0``; the condition
``kappa > (1 + SLACK)(1 + mu (L - 1))`` is ``tau <e_a - e_b, e_s> > ln((1 + SLACK)(L - 1 +
1/mu))``, and the angles are those of the smallest ``B`` that meets it (a float search,
:func:`angles`; the mpmath construction then checks that the classes are apart and the judge
certifies every input on balls).  The condition needs ``exp(tau <e_a - e_b, e_s>) > L - 1``, so
``2 B^2 >= sqrt(d) ln(L - 1)``: ``B^2 = (sqrt(d)/2) ln L + O(1)``.  This is the rate of the
proven lower bound (:func:`bounds.contrast_lower.b_lower`), without a norm and after post-norm.

*Not scale-free.*  The argmax is invariant under a positive factor on the head, not on the
embeddings: their scores set ``kappa`` and ``mu``.  So ``B_min`` here is not an infimum of 0: it is
at most the bound of ``e_s, e_a, e_b`` (and the gain, of norm ``B``, and the bias, 0; the head's
rows scale down freely) and at least :func:`bounds.contrast_lower.b_lower` (``L >= 5``).  The row's ``margin`` is that of the head with rows of norm ``<= 1`` on these
embeddings.
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


#: after post-norm, the angle of ``e_s`` out of the plane of ``e_b`` and ``e_a`` (the head needs
#: ``e_s, e_a, e_b`` independent)
CHI = math.pi / 4


def gram(cell: Cell, first: float, second: float, cos=math.cos, sin=math.sin):
    """``(g_ab, g_as, g_bs)``: the cosines between ``e_a, e_b, e_s`` (all of norm ``B``) at the
    geometry's two angles (module docstring): without a norm ``e_b`` and ``e_s`` at ``first`` and
    ``second`` from ``e_a`` in one plane; after post-norm ``e_a`` and ``e_s`` at ``first`` and
    ``second`` from ``e_b`` (on the all-ones axis), ``e_s`` turned by :data:`CHI` out of the plane
    of ``e_b`` and ``e_a``.  ``cos``/``sin``: floats (``math``) or ``mpmath``."""
    if cell.post:
        return cos(first), cos(first) * cos(second) + sin(first) * sin(second) * cos(CHI), cos(second)
    return cos(first), cos(second), cos(first - second)


def _excess(cell: Cell, first: float, second: float, L: int):
    """``(c_3, excess)``: ``<e_a - e_b, e_a - e_s>/B^2`` and ``tau <e_a - e_b, e_s> - ln((1 +
    SLACK)(L - 1 + 1/mu))`` at ``2 rho = kappa`` (floats; the excess is a large negative number
    where ``c_3 >= 0``: no ``B`` makes ``2 rho = kappa``)."""
    ab, as_, bs = gram(cell, first, second)
    c3 = 1 - as_ - ab + bs
    if c3 >= -1e-12:
        return c3, -1e6 * (1 + c3)  # finite, so that the search's difference quotients stay finite
    tb2 = -math.log(2) / c3  # tau B^2
    log_inv_mu = tb2 * (as_ - ab)  # ln(1/mu) = tau (<e_a, e_s> - <e_a, e_b>)
    # ln(L - 1 + 1/mu), computed without overflow
    if L > 1:
        big, small = max(math.log(L - 1), log_inv_mu), min(math.log(L - 1), log_inv_mu)
        lse = big + math.log1p(math.exp(small - big))
    else:
        lse = log_inv_mu
    return c3, tb2 * (as_ - bs) - math.log1p(SLACK) - lse


def angles(cell: Cell, L: int):
    """The geometry's two angles (:func:`gram`) with the smallest ``B`` that keeps the classes
    apart at ``L`` (module docstring; a float search from a grid of starts)."""
    from scipy.optimize import minimize

    best = None
    for phi0 in np.linspace(2.0, 4.3, 6):
        for psi0 in np.linspace(-1.4, 1.4, 7):
            # the same planar starts for both geometries: e_b at phi0, e_s at psi0 from e_a
            start = (-phi0, psi0 - phi0) if cell.post else (phi0, psi0)
            res = minimize(lambda v: _excess(cell, *v, L)[0], start, method="SLSQP",
                           constraints=[{"type": "ineq", "fun": lambda v: _excess(cell, *v, L)[1]}],
                           options={"maxiter": 200, "ftol": 1e-14})
            c3, excess = _excess(cell, *res.x, L)
            if excess >= 0 and (best is None or c3 < best[0]):
                best = (c3, float(res.x[0]), float(res.x[1]))
    if best is None:
        raise ValueError(f"no geometry keeps the classes apart at L = {L}")
    return best[1], best[2]


class ContrastSelectLastHead(ClassificationDesign):
    """The head of the select task read last, softmax attention without a norm or after
    post-norm (module docstring); the interface of :class:`~constructions.classification.ClassificationDesign`,
    not scale-free (its registry entry says so,
    :attr:`constructions.registry.Entry.scale_free`)."""

    def __init__(self, cell: Cell):
        if not built(cell):
            from constructions.refusals import refusal

            raise ValueError(f"{cell.describe()}: {refusal(cell) or 'not served by ContrastSelectLastHead'}")
        self.cell, self.family, self.geometry, self.foot, self.pencil = cell, laws.family(cell), None, None, None

    def embeddings(self, L_value: int, dps: int = 50) -> dict:
        """``e_a, e_b, e_s`` (and a gain ``g`` of norm ``B`` along the all-ones axis, a zero bias)
        at ``L`` (mpf at ``dps`` digits): norm ``B`` from ``2 rho = kappa`` (module docstring)."""
        cell, d = self.cell, self.cell.d
        first, second = angles(cell, L_value)
        with mpmath.workdps(dps):
            first, second = mpmath.mpf(first), mpmath.mpf(second)
            ab, as_, bs = gram(cell, first, second, mpmath.cos, mpmath.sin)
            B = mpmath.sqrt(-mpmath.sqrt(d) * mpmath.log(2) / (1 - as_ - ab + bs))
            zero = mpmath.mpf(0)
            if cell.post:  # e_b on the all-ones axis o, e_a in the plane of o, f_1
                o = np.array([1 / mpmath.sqrt(d)] * d, dtype=object)
                f1 = np.array([1 / mpmath.sqrt(2), -1 / mpmath.sqrt(2)] + [zero] * (d - 2), dtype=object)
                f2 = np.array([1 / mpmath.sqrt(6)] * 2 + [-2 / mpmath.sqrt(6)] + [zero] * (d - 3),
                              dtype=object)
                chi = mpmath.mpf(CHI)
                out = {"e_b": B * o, "e_a": B * (mpmath.cos(first) * o + mpmath.sin(first) * f1),
                       "e_s": B * (mpmath.cos(second) * o + mpmath.sin(second)
                                   * (mpmath.cos(chi) * f1 + mpmath.sin(chi) * f2))}
                if cell.affine.gain:
                    out["g"] = B * o
                if cell.affine.bias:
                    out["beta"] = np.array([zero] * d, dtype=object)
                return out

            def at(angle):
                v = np.array([zero] * d, dtype=object)
                v[0], v[1] = B * mpmath.cos(angle), B * mpmath.sin(angle)
                return v

            return {"e_s": at(second), "e_a": at(zero), "e_b": at(first)}

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
        """The head at ``L`` (refused beyond :func:`constructions.classification.check_size`):
        the collinear head in ``t`` (module docstring), ``u_c`` in the plane of ``e_s - e_b, e_a -
        e_b`` without a norm, orthogonal to ``e_b`` after post-norm."""
        if isinstance(L_value, bool) or not isinstance(L_value, (int, np.integer)) or L_value < 1:
            raise ValueError(f"L must be a positive integer, got {L_value!r}")
        L_value = int(L_value)
        check_size(self.cell, L_value)
        vec = self.embeddings(L_value, dps)
        lo, hi = self.positions(vec, L_value, dps)
        post = self.cell.post
        with mpmath.workdps(dps):
            if not all(lo[c + 1] > hi[c] for c in range(L_value)):
                raise ValueError(f"{self.cell.describe()}: the classes meet at L = {L_value}")
            slopes, intercepts = collinear_head(lo, [mpmath.mpf(1)], upper=hi)
            dot = lambda p, q: mpmath.fsum(i * j for i, j in zip(p, q))
            if post:  # <u_c, e_s> = alpha_c, <u_c, e_a> = beta_c, <u_c, e_b> = 0
                span = [vec["e_s"], vec["e_a"], vec["e_b"]]
                targets = lambda alpha, k: [alpha, k, 0]
            else:  # <u_c, e_s - e_b> = alpha_c, <u_c, e_a - e_b> = beta_c
                span = [vec["e_s"] - vec["e_b"], vec["e_a"] - vec["e_b"]]
                targets = lambda alpha, k: [alpha, k]
            gram_xy = mpmath.matrix([[dot(x, y) for y in span] for x in span])
            rows = []
            for k, alpha in zip(slopes[:, 0], intercepts):
                coef = mpmath.lu_solve(gram_xy, mpmath.matrix(targets(alpha, k)))
                rows.append(sum((coef[i] * x for i, x in enumerate(span) if i), coef[0] * span[0]))
            scale = SIGMA / max(mpmath.sqrt(dot(r, r)) for r in rows)
            u = np.array([r * scale for r in rows], dtype=object)
            if post:  # b_c = -<u_c, beta>: the logit is <u_c, g * N(r)> (module docstring)
                b = [-dot(r, vec["beta"]) if "beta" in vec else mpmath.mpf(0) for r in u]
            else:
                b = [-2 * dot(r, vec["e_b"]) for r in u]
        return Params(self.cell, {**vec, "u": u}, {"b": b})
