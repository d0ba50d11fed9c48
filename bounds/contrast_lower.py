r"""The select task read last, softmax attention without a norm, classification: the score contrast
that no head can do without, a proven lower bound on ``B_min``.

*Claim.*  If ``e_s, e_a, e_b, u_0..u_L, b_0..b_L`` solve the task to ``L >= 4`` (every input of
length at most ``L``, classes ``n_a``), then with ``B = max(|e_a|, |e_b|)`` and ``x = exp(B^2/sqrt
d)``

    2 x^2 + x/(L - 3) > L - 1,

so ``B > sqrt(sqrt(d) ln x_L)``, ``x_L`` the positive root of ``2 x^2 + x/(L - 3) = L - 1``
(:func:`b_lower`; 0 where ``x_L <= 1``, i.e. ``L <= 4``).  Then ``B^2 >= (sqrt(d)/2) ln((L -
1)/2) - o(1)``: the embeddings grow like ``sqrt(ln L)``, and ``B_min`` is not an infimum of 0 (as
it is wherever heads and embeddings scale down together).

*Proof.*  As in :mod:`constructions.select_last_contrast_head`, the logit of class ``c`` at the
query ``q`` is ``F^q_c / D^q`` with ``D^q > 0`` common to the classes and ``F^q_c`` affine in
``(n_a, n_b)``.  Take the classes 1 and 2 and write ``delta`` for a difference class 2 minus class 1,
``sigma = delta(q_c + r_c + b_c)``, ``X = delta(2 r_c + b_c)``, ``Y = delta(2 q_c + b_c)``, so ``X +
Y = 2 sigma``; ``W = exp(tau <e_a, e_b>)`` is the weight of ``b`` at query ``a`` and of ``a`` at
query ``b``.

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

*Evaluation.*  ``x_L`` and ``sqrt(sqrt(d) ln x_L)`` in ball arithmetic; the float returned is
below the ball (:func:`verify.backends.arb_floor`).
"""

from __future__ import annotations

import flint

from constructions.cell import Cell
from verify.backends import arb_floor


def b_lower(cell: Cell, L: int) -> float | None:
    """The proven lower bound on ``B_min(L)`` of the module docstring (0 where ``L <= 4``; None
    after a norm, where the logits are not affine in the counts and nothing is proven)."""
    if cell.normed:
        return None
    if L <= 4:
        return 0.0
    with flint.ctx.workprec(128):
        inv = flint.arb(1) / (L - 3)
        x = (-inv + (inv * inv + 8 * (L - 1)).sqrt()) / 4
        if not x > 1:
            return 0.0
        return arb_floor((flint.arb(cell.d).sqrt() * x.log()).sqrt())
