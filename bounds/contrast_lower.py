r"""The select task read last, softmax attention without a norm or after post-norm (``eps = 0``),
classification: the score contrast that no head can do without, a proven lower bound on ``B_min``.

Both proofs take the classes 1 and 2 only.  Write ``tau = 1/sqrt(d)``, ``W = exp(tau <e_a, e_b>)``
(the weight of ``b`` at the query ``a`` and of ``a`` at the query ``b``) and ``w^q_j = exp(tau
<e_q, e_j>)``.

*Claim (no norm).*  If ``e_s, e_a, e_b, u_0..u_L, b_0..b_L`` solve the task to ``L >= 4`` (every
input of length at most ``L``, classes ``n_a``), then with ``B = max(|e_a|, |e_b|)`` and ``x =
exp(B^2/sqrt d)``

    2 x^2 + x/(L - 3) > L - 1,

so ``B > sqrt(sqrt(d) ln x_L)``, ``x_L`` the positive root of ``2 x^2 + x/(L - 3) = L - 1``
(0 where ``x_L <= 1``, i.e. ``L <= 4``).  Then ``B^2 >= (sqrt(d)/2) ln((L - 1)/2) - o(1)``: the
embeddings grow like ``sqrt(ln L)``, and ``B_min`` is not an infimum of 0 (as it is wherever heads
and embeddings scale down together).

*Proof.*  As in :mod:`constructions.select_last_contrast_head`, the logit of class ``c`` at the
query ``q`` is ``F^q_c / D^q`` with ``D^q > 0`` common to the classes and ``F^q_c`` affine in
``(n_a, n_b)``.  Write ``delta`` for a difference class 2 minus class 1, ``sigma = delta(q_c + r_c +
b_c)``, ``X = delta(2 r_c + b_c)``, ``Y = delta(2 q_c + b_c)``, so ``X + Y = 2 sigma``.

Query ``b``: ``G(n_a, n_b) = delta F^b = A + W sigma n_a + w^b_b X n_b``, with ``G(1, n_b) < 0`` for
``1 <= n_b <= L - 1`` (class 1 wins) and ``G(2, n_b) > 0`` for ``1 <= n_b <= L - 2``.  Then ``G(2, 1)
- G(1, L - 1) > 0`` and ``G(2, L - 2) - G(1, 1) > 0`` give ``W sigma > (L - 2) w^b_b X`` and ``W sigma
> -(L - 3) w^b_b X``: so ``sigma > 0`` and ``|X| < W sigma / ((L - 3) w^b_b)``.

Query ``a``: ``H(n_a, n_b) = delta F^a = A' + w^a_a Y n_a + W sigma n_b``, with ``H(1, L - 1) < 0 <
H(2, 0)``, so ``w^a_a Y > (L - 1) W sigma > 0``.  With ``Y = 2 sigma - X <= 2 sigma + |X|``:

    (L - 1) W sigma < w^a_a sigma (2 + W / ((L - 3) w^b_b)),

and dividing by ``W sigma > 0``: ``L - 1 < 2 exp(tau (|e_a|^2 - <e_a, e_b>)) + exp(tau (|e_a|^2 -
|e_b|^2))/(L - 3) <= 2 x^2 + x/(L - 3)`` (``|e_a|^2 - <e_a, e_b> <= 2 B^2``, ``|e_a|^2 - |e_b|^2 <=
B^2``).  The left side of the claim is increasing in ``x > 0``, so ``x > x_L``.  Every input used
has length at most ``L``.  QED.

*Claim (post-norm).*  After post-norm with ``eps = 0`` (LayerNorm or RMSNorm, every affine), if the
parameters solve the task to ``L >= 5``, then with ``B >= max(|e_s|, |e_a|, |e_b|)`` and ``x =
exp(B^2/sqrt d)``

    x^2 > (L - 1)/3,  i.e.  B^2 > (sqrt(d)/2) ln((L - 1)/3):

the rate of the no-norm bound and of the construction, with the constant 3 for 2.

*Proof.*  (1) *The decision is a convex cone.*  The output is ``z = g * N(r) + beta`` (``g = 1``,
``beta = 0`` where bare) with ``N(r) = sqrt(d) X/|X|``, ``X = C D r``: ``D > 0`` the softmax
denominator and ``C`` the centring (LayerNorm) or the identity (RMSNorm).  So ``logit_2 - logit_1
= gamma(X)/|X|`` with ``gamma(X) = <l, X> + delta |X|``, ``l = sqrt(d) g * (u_2 - u_1)``, ``delta =
<u_2 - u_1, beta> + b_2 - b_1``.  ``gamma`` is positively homogeneous, convex if ``delta >= 0`` and
concave if ``delta < 0``.  Class 1 needs ``gamma < 0`` on its inputs, class 2 ``gamma > 0``.  If
``delta >= 0``, ``{gamma < 0}`` is a convex cone (``gamma(sum l_i X_i) <= sum l_i gamma(X_i)``), so no
``X`` of class 2 is a positive combination of those of class 1; if ``delta < 0``, the same with the
classes swapped.

(2) *The chart.*  ``D r = w^q_s (e_q + e_s) + n_a w^q_a (e_q + e_a) + n_b w^q_b (e_q + e_b)``, so
``X = w^q_s M (xi, eta, 1)`` with ``M = [C e_a, C e_b, C e_s]`` and the chart point ``(xi, eta) = (1
+ 2 rho n_a + mu n_b, mu n_b)`` at the query ``a`` (``n_a >= 1``), ``(kappa n_a, 1 + kappa n_a + 2 nu
n_b)`` at the query ``b`` (``n_b >= 1``), where ``rho = w^a_a/w^a_s``, ``mu = W/w^a_s``, ``kappa =
W/w^b_s``, ``nu = w^b_b/w^b_s``.  A convex combination of chart points is, with its weights divided
by the ``w^q_s``, a positive combination of the ``X``: so the chart points of class 1 or those of
class 2 have a convex hull that holds no point of the other class.  In the coordinates ``(x, u) =
(xi, xi - eta)`` class ``n`` is ``A_{n,m} = (1 + 2 n rho + m mu, 1 + 2 n rho)`` (``0 <= m <= L -
n``; a horizontal at ``u > 0``) and ``B_{n,m} = (n kappa, -(1 + 2 m nu))`` (``1 <= m <= L - n``; a
vertical at ``u < 0``).

(3) *Class 2 outside the hull of class 1* makes the embeddings large.  The hull holds ``B_{1,1} =
(kappa, -(1 + 2 nu))`` and, at the same height, the point ``lambda A_{1,L-1} + (1 - lambda)
B_{1,L-1}`` with ``lambda = (L - 2) nu / (1 + rho + (L - 1) nu)``, at ``x = kappa + lambda (q -
kappa)``, ``q = 1 + 2 rho + (L - 1) mu``; ``B_{2,1} = (2 kappa, -(1 + 2 nu))`` lies on the segment
between them unless ``kappa > lambda (q - kappa)``, that is ``kappa (1 + rho + (2L - 3) nu) > (L -
2) nu q``.  Divided by ``mu nu``:

    (kappa/mu)(1/nu + 2L - 3) + (rho/mu)(kappa/nu) > (L - 2)(1/mu + L - 1 + 2 rho/mu).

Now ``kappa/mu = exp(tau <e_s, e_a - e_b>) <= x^2``, ``kappa/nu = exp(tau (<e_a, e_b> - |e_b|^2))
<= x^(1/4)`` and ``1/nu = exp(tau (<e_b, e_s> - |e_b|^2)) <= x^(1/4)`` (``t B - t^2 <= B^2/4``).  If
``x^(1/4) >= L - 3``, then ``x^2 >= (L - 3)^8 > (L - 1)/3``.  Otherwise ``kappa/nu < 2 (L - 2)`` and
``1/nu < L - 3``, so ``(kappa/mu)(3L - 6) > (L - 1)(L - 2)``: ``x^2 >= kappa/mu > (L - 1)/3``.

(4) *Class 1 outside the hull of class 2* does too.  With ``p = 1 + 4 rho`` and ``lambda_1 = (1 + rho
+ (L - 2) nu)/(1 + 2 rho + (L - 2) nu)`` (in ``(1/2, 1)``), the points ``lambda_1 h + (1 - lambda_1)
B_{2,L-2}``, ``h`` on the segment from ``A_{2,0}`` to ``A_{2,L-2}``, fill the height ``u = 1 + 2 rho``
of the ``A_{1,m}`` from ``x_0 = p - (1 - lambda_1)(p - 2 kappa)`` to ``x_1 = x_0 + lambda_1 (L - 2)
mu``, a length ``>= mu`` (``L >= 4``).  Also ``x_1 >= 1 + 2 rho``, the ``x`` of ``A_{1,0}``: if ``q_2 =
p + (L - 2) mu >= 2 kappa``, ``x_1 = q_2 - (1 - lambda_1)(q_2 - 2 kappa) >= q_2 (1 + rho)/(1 + 2 rho)
>= (1 + 4 rho)(1 + rho)/(1 + 2 rho) >= 1 + 2 rho`` (``1 - lambda_1 <= rho/(1 + 2 rho)``); else ``x_1 >
q_2``.  The ``A_{1,m}`` step by ``mu`` from ``1 + 2 rho``, so one of them lies in ``[x_0, x_1]``
unless the last is left of it: ``1 + 2 rho + (L - 1) mu < x_0``, i.e. ``(L - 1) mu < 2 rho + (1 -
lambda_1)(2 kappa - p) < 2 rho + kappa``.  So ``L - 1 < 2 rho/mu + kappa/mu <= 3 x^2`` (``rho/mu =
exp(tau <e_a, e_a - e_b>) <= x^2``).

By (1) and (2), (3) or (4) holds.  Every input used has length at most ``L``.  QED.

*Evaluation.*  The roots in ball arithmetic; the float returned is below the ball
(:func:`verify.backends.arb_floor`).
"""

from __future__ import annotations

import flint

from constructions.cell import Cell
from verify.backends import arb_floor


def _x_lower(cell: Cell, L: int):
    """A ball below which ``x = exp(B^2/sqrt d)`` of a solving parameter set cannot lie (``L >=
    5``): the positive root of ``2 x^2 + x/(L - 3) = L - 1`` without a norm, ``sqrt((L - 1)/3)``
    after post-norm."""
    if cell.post:
        return (flint.arb(L - 1) / 3).sqrt()
    inv = flint.arb(1) / (L - 3)
    return (-inv + (inv * inv + 8 * (L - 1)).sqrt()) / 4


def b_lower(cell: Cell, L: int) -> float | None:
    """The proven lower bound on ``B_min(L)`` of the module docstring: ``sqrt(sqrt(d) ln x)``
    with ``x`` of :func:`_x_lower` (0 where ``L <= 4`` or ``x <= 1``); None where neither claim
    applies (pre-norm, ``eps > 0``, linear attention)."""
    if cell.attention != "softmax" or cell.pre or (cell.post and cell.eps != 0):
        return None
    if L <= 4:
        return 0.0
    with flint.ctx.workprec(128):
        x = _x_lower(cell, L)
        if not x > 1:
            return 0.0
        return arb_floor((flint.arb(cell.d).sqrt() * x.log()).sqrt())
