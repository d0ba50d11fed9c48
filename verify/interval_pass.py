"""The regression read-out of the count task, every count at once in float intervals.

The judge (:mod:`verify.judge`) decides a count in ball arithmetic at about 25 us each; this
pass decides almost all of them in outward-rounded float intervals (:mod:`verify.intervals`)
at well under a microsecond, and leaves the rest to the balls.  Its rigour is the judge's: a
count is *correct* only if the whole enclosure of ``y(n) - n`` lies in ``(-1/2, 1/2)``, *wrong*
only if it lies outside, and *open* otherwise (then the balls decide it).

**The read-out as a function of the count** (input ``(s, a^n)``, read at ``s``; the forward
pass of :mod:`verify.forward` with ``h_x`` the token values, ``sigma_x = tau <h_s, h_x>`` and,
for softmax, ``rho = exp(sigma_s - sigma_a)``, so that the attention weights of ``s`` and of each
``a`` are ``rho/(rho+n)`` and ``1/(rho+n)``; ``n = 0`` is included, its ``a`` weight being 0):

* no post-norm, softmax: ``y = <w, e_s> + w0 + (rho <w, h_s> + n <w, h_a>)/(rho + n)``, i.e.
  ``y - n = c0 + n D/(rho + n) - n`` with ``c0 = <w, e_s + h_s> + w0`` and ``D = <w, h_a - h_s>``;
* no post-norm, linear: ``y - n = K0 + n K1`` with ``K0 = <w, e_s> + sigma_s <w, h_s> + w0``
  and ``K1 = sigma_a <w, h_a> - 1``;
* post-norm: ``k r(n) = P + n Q`` with ``k = rho + n``, ``P = rho (e_s + h_s)``,
  ``Q = e_s + h_a`` (softmax; multiply ``r = e_s + (rho h_s + n h_a)/(rho + n)`` out) or
  ``k = 1``, ``P = e_s + sigma_s h_s``, ``Q = sigma_a h_a`` (linear), all centred by the
  kind's ``C`` (linear, so ``C(k r) = C(P) + n C(Q)``; below ``P, Q`` stand for the centred
  vectors).  With ``|Q|^2 > 0``, the foot ``n0 = -<P, Q>/|Q|^2`` and ``P0 = P + n0 Q`` (so
  ``<P0, Q> = 0``): ``|P + nQ|^2 = |Q|^2 (x^2 + lam2)`` with ``x = n - n0`` and
  ``lam2 = |P0|^2/|Q|^2``, and ``<wg, P + nQ> = b + x a`` with ``a = <wg, Q>``,
  ``b = <wg, P0>`` (``wg = w * g`` with a gain, else ``w``).  Since ``k > 0``,
  ``N(r) = C(kr)/sqrt(|C(kr)|^2/d + eps k^2)`` and

      ``y - n = c + (b + x a)/sqrt(|Q|^2 (x^2 + lam2)/d + eps k^2) - n``,

  ``c = w0 + <w, beta>`` (with a bias, else ``w0``); for ``eps = 0`` the constants ``a, b`` are
  divided by ``sqrt(|Q|^2/d)`` once, leaving ``c + (b + x a)/sqrt(x^2 + lam2) - n``.

These are the forward pass's formulas rearranged exactly (no approximation), so they describe
the same real numbers.  The constants (``O(d)`` work) are computed once in ball arithmetic,
where the cancellations of nearly opposite embeddings are harmless, and enclosed in floats
(:func:`verify.backends.arb_bounds`); each count then costs a few interval operations, well
conditioned: ``x`` is a difference of a float count and one constant, never of two large
nearly equal sums (the Gram form of :func:`verify.forward._regression_gram` in floats loses
``log2 n`` bits and more to those cancellations, which is why the float64 screen fails at large
``L`` after post-norm).  Anything non-finite (an exponent beyond the float range, a zero
divisor) gives an enclosure that decides nothing, so it only sends counts to the balls.
Where ``|Q|^2`` cannot be told from 0 (the residual does not move with ``n``) the pass does not
apply (:func:`prepare` returns None).
"""

from __future__ import annotations

import numpy as np

from constructions.cell import Params
from verify.backends import arb_bounds, get_backend
from verify.forward import Numbers, numbers
from verify.intervals import Iv

#: the ball backend the constants are computed in by :func:`counts_surely`
BALLS = "arb256"


def _enclose(*balls) -> list[Iv]:
    """Float intervals containing the balls."""
    lo, hi = arb_bounds(np.array(balls, dtype=object))
    return [Iv(lo[i], hi[i]) for i in range(len(balls))]


class Pass:
    """The constants of one parameter set, enclosed in floats; :meth:`judge` decides counts."""

    def __init__(self, form: str, consts: dict):
        self.form = form
        self.c = consts

    def error(self, n: np.ndarray) -> Iv:
        """An enclosure of ``y(n) - n`` for the counts ``n`` (exact in float64 up to 2^53)."""
        c, N = self.c, Iv(n.astype(np.float64))
        if self.form == "segment":
            return c["c0"] + N * c["D"] / (c["rho"] + N) - N
        if self.form == "line":
            return c["K0"] + N * c["K1"]
        x = N - c["n0"]
        x2 = x.square() + c["lam2"]
        if "eps" not in c:
            return c["c"] + (c["b"] + x * c["a"]) / x2.sqrt() - N
        k = c["rho"] + N if "rho" in c else Iv(1.0)
        return c["c"] + (c["b"] + x * c["a"]) / (c["qd"] * x2 + c["eps"] * k.square()).sqrt() - N

    def judge(self, n: np.ndarray):
        """``(surely correct, surely wrong, |y - n| at the enclosure's midpoint)``; the rest
        is open."""
        with np.errstate(all="ignore"):
            e = self.error(n)
            mid = np.abs(0.5 * e.lo + 0.5 * e.hi)
            good = (e.lo > -0.5) & (e.hi < 0.5)
            # a wrong count whose enclosure is unbounded is left open: the balls report its error
            bad = ((e.lo >= 0.5) | (e.hi <= -0.5)) & np.isfinite(mid)
        return good, bad, mid


def prepare(params: Params, nums: Numbers) -> Pass | None:
    """The pass for a regression parameter set of the count task read at ``s``, from its ball
    numbers (:func:`verify.forward.numbers`, inside the backend's context); None where it does
    not apply (module docstring)."""
    cell = params.cell
    e_s, h_s, h_a = nums.e["s"], nums.h["s"], nums.h["a"]
    w, w0, tau = nums.w, nums.w0, nums.tau
    sig_s, sig_a = tau * (h_s @ h_s), tau * (h_s @ h_a)
    softmax = cell.attention == "softmax"
    rho = (sig_s - sig_a).exp() if softmax else None
    if not cell.post:
        if softmax:
            names, balls = ("c0", "D", "rho"), (w @ (e_s + h_s) + w0, w @ (h_a - h_s), rho)
            return Pass("segment", dict(zip(names, _enclose(*balls))))
        balls = (w @ e_s + sig_s * (w @ h_s) + w0, sig_a * (w @ h_a) - 1)
        return Pass("line", dict(zip(("K0", "K1"), _enclose(*balls))))
    d, kind = cell.d, cell.kind
    P, Q = (rho * (e_s + h_s), e_s + h_a) if softmax else (e_s + sig_s * h_s, sig_a * h_a)
    P, Q = kind.centre(P, d), kind.centre(Q, d)
    qq = Q @ Q
    if not qq > 0:
        return None
    n0 = -(P @ Q) / qq
    P0 = P + n0 * Q
    wg = w * nums.g if cell.affine.gain else w
    c = w0 + (w @ nums.beta) if cell.affine.bias else w0
    a, b = wg @ Q, wg @ P0
    consts = {"c": c, "n0": n0, "lam2": (P0 @ P0) / qq}
    if cell.eps == 0:
        scale = (qq / d).sqrt()
        consts.update(a=a / scale, b=b / scale)
    else:
        consts.update(a=a, b=b, qd=qq / d, eps=nums.eps)
        if softmax:
            consts["rho"] = rho
    return Pass("arc", dict(zip(consts, _enclose(*consts.values()))))


#: counts per interval evaluation of :func:`counts_surely` (bounded memory at any ``L``)
CHUNK = 1 << 16


def counts_surely(params: Params, L: int) -> bool | None:
    """Whether the pass proves every count ``0..L`` correct (False: some count is wrong or
    open); None where it does not apply (:func:`prepare`, or not the count task read at ``s``).

    A fast screen for a bisection: a True is as rigorous as the judge's ``counts`` on balls.
    """
    cell = params.cell
    if cell.readout != "regression" or cell.task.name != "count" or cell.read.name != "bos":
        return None
    bk = get_backend(BALLS)
    with bk.context():
        fast = prepare(params, numbers(params, bk))
    if fast is None:
        return None
    for start in range(0, L + 1, CHUNK):
        good, _, _ = fast.judge(np.arange(start, min(start + CHUNK, L + 1)))
        if not good.all():
            return False
    return True
