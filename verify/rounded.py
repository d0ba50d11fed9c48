"""The forward pass of a kernel in a real number format, for every count ``n = 0..N`` at once.

The model is :mod:`verify.forward`'s (the README's "The model in brief", the count task read
at ``s``) with every arithmetic result rounded (:class:`verify.formats.Arith`: stored in ``F``,
computed in ``G``; ``G = F`` unless accumulating in a wider format).  The order of the
operations is fixed, and is the order of a standard attention kernel:

1. the parameters are rounded to ``F``; the constants ``tau = 1/sqrt(d)``, ``eps`` and ``d``
   to ``G``;
2. the norm of a row ``v`` (:func:`_norm`): ``mean = (sum_k v_k)/d`` (LayerNorm),
   ``c = v - mean``, ``stat = (sum_k c_k c_k)/d``, ``c/sqrt(stat + eps)``, then ``* g``,
   ``+ beta``, all in ``G``, the result stored in ``F``.  Sums over the ``d`` coordinates are
   sequential from coordinate 0;
3. scores ``sigma_x = tau * (sum_k h_{s,k} h_{x,k})`` in ``G``;
4. softmax with the row maximum ``m`` subtracted first (``m = sigma_s`` at ``n = 0``, else
   ``max(sigma_s, sigma_a)``): ``p_j = exp(sigma_j - m)`` in ``G``; the denominator
   ``Z_n = p_0 + p_1 + ... + p_n`` and the numerator ``N_n = P_0 h_0 + ... + P_n h_n``
   (``P_j = p_j`` stored in ``F``, as a kernel casts the probabilities for the value product)
   are **running sums over the positions, left to right, in G**; then ``A_n = N_n / Z_n``
   stored in ``F`` (normalisation deferred to the end, as in FlashAttention; with one block
   and the maximum known first, no rescaling).  Linear attention: ``N_n`` with ``P_j`` the
   score stored in ``F``, ``A_n = N_n``;
5. ``r = e_s + A`` in ``F``; ``z = LN(r)`` (post-norm, step 2) or ``r``;
6. regression ``y = (sum_k w_k z_k) + w0`` in ``G``, stored in ``F``; classification the logits
   ``(sum_k u_{c,k} z_k) + b_c`` likewise.

A kernel computes each position's term separately; all positions ``j >= 1`` hold the token
``a``, whose term is the same rounded number at every position, so the pass computes it once
and the running sums repeat it: ``Z`` and ``N`` for every ``n = 0..N`` are one
``np.add.accumulate`` each, ``O(N d)`` work for the whole range (not the count-reduced shortcut
``n * p_a`` of :func:`verify.forward.reduced`, which a kernel does not compute: in ``F`` a
running sum of equal terms stagnates, ``1 + 1 + ...`` stops at 256 in bfloat16).

In float64 the pass evaluates the same real function as :func:`verify.forward.explicit` in a
different summation order (explicit normalises the weights first and uses numpy's reductions),
so the two agree to rounding error, not bit for bit (tests/test_precision.py bounds the
difference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from constructions.cell import Params
from verify.formats import Arith

#: the most numbers ``(N+1) d`` of one pass (a few arrays of this size are held at once)
MAX_PASS_ENTRIES = 1 << 23
#: logits formed at once in a classification pass (tiles of counts x classes x 1)
LOGIT_TILE = 1 << 20


@dataclass
class Pass:
    """Every stored stage of one rounded pass, indexed by the count ``n = 0..N``.

    Arrays hold the format's numbers (``F`` for stored values, ``G`` for ``Z``, ``N``,
    ``stat``); ``stat`` is the post-norm statistic (None without post-norm), ``p`` the
    probabilities ``(p_s, p_a)`` for ``n >= 1`` (softmax), ``y`` the read-out (regression) and
    ``logits`` (classification, ``(N+1, classes)``).
    """

    arith: Arith
    params: dict
    pre_stat: dict
    h: dict
    sigma: dict
    p: tuple | None
    Z: np.ndarray | None
    N: np.ndarray
    A: np.ndarray
    r: np.ndarray
    stat: np.ndarray | None
    z: np.ndarray
    y: np.ndarray | None = None
    logits: np.ndarray | None = None

    def correct(self) -> np.ndarray:
        """Per count: ``|y - n| < 1/2`` (regression) or ``n`` the unique argmax of the logits."""
        n = np.arange(len(self.z), dtype=np.float64)
        with np.errstate(all="ignore"):
            if self.y is not None:
                return np.abs(self.y.astype(np.float64) - n) < 0.5
            return self.margins() > 0

    def margins(self) -> np.ndarray:
        """Classification: ``logit_n(n) - max_{c != n} logit_c(n)`` in float64 (NaN-safe: a NaN
        logit gives a NaN margin, which is not > 0)."""
        lg = self.logits.astype(np.float64)
        idx = np.arange(lg.shape[0])
        own = lg[idx, idx]
        other = lg.copy()
        other[idx, idx] = -np.inf
        with np.errstate(all="ignore"):
            out = own - other.max(axis=1)
        out[np.isnan(lg).any(axis=1)] = np.nan
        return out

    def counts_up_to(self) -> int:
        """The largest ``L <= N`` such that every count ``0..L`` is correct (-1: not even 0)."""
        bad = np.flatnonzero(~self.correct())
        return int(bad[0]) - 1 if len(bad) else len(self.z) - 1


def check_size(params: Params, N: int) -> None:
    """Refuse (``ValueError``) a pass beyond :data:`MAX_PASS_ENTRIES`, or a cell it does not run."""
    cell = params.cell
    if cell.task.name != "count" or cell.read.name != "bos":
        raise ValueError("the rounded pass runs the count task read at s (task count, read bos)")
    if (N + 1) * cell.d > MAX_PASS_ENTRIES:
        raise ValueError(f"a rounded pass over n = 0..{N} at d = {cell.d} has (N+1) d = {(N + 1) * cell.d} "
                         f"numbers, beyond the limit MAX_PASS_ENTRIES = {MAX_PASS_ENTRIES} "
                         "(verify.rounded.MAX_PASS_ENTRIES)")


def _f64(x) -> np.ndarray:
    return np.array([float(v) for v in np.ravel(x)], dtype=np.float64).reshape(np.shape(x))


def _norm(cell, ar: Arith, v, g, beta):
    """Step 2 of the module docstring on the rows of ``v`` (``F`` values): ``(LN(v) in F, stat)``."""
    x = ar.to_work(v)
    d = ar.constant(cell.d)
    if cell.kind.centred:
        mean = ar.to_work(ar.total(x) / d)
        c = ar.to_work(x - mean[..., None])
    else:
        c = x
    stat = ar.to_work(ar.total(ar.to_work(c * c)) / d)
    den = ar.sqrt(ar.to_work(stat + ar.constant(cell.eps)))
    out = ar.to_work(c / den[..., None])
    if g is not None:
        out = ar.to_work(out * ar.to_work(g))
    if beta is not None:
        out = ar.to_work(out + ar.to_work(beta))
    return ar.to_store(out), stat


def _dot(ar: Arith, a, b):
    """``sum_k a_k b_k`` along the last axis, sequential, in ``G`` (not stored)."""
    return ar.total(ar.to_work(ar.to_work(a) * ar.to_work(b)))


def float_values(params: Params) -> dict:
    """Every parameter (vectors and scalars) as float64 arrays: what :func:`run` rounds to ``F``."""
    return {name: _f64(v) for name, v in {**params.vectors, **params.scalars}.items()}


def run(params: Params, N: int, arith: Arith, values: dict | None = None) -> Pass:
    """The rounded pass (module docstring) for the inputs ``(s, a^n)``, ``n = 0..N``.

    ``values``: :func:`float_values` of ``params``, when the caller runs several formats."""
    check_size(params, N)
    with np.errstate(all="ignore"):
        return _run(params, N, arith, float_values(params) if values is None else values)


def _run(params: Params, N: int, arith: Arith, values: dict) -> Pass:
    cell, ar = params.cell, arith
    P = {name: ar.to_store(v) for name, v in values.items()}
    g, beta = P.get("g"), P.get("beta")
    h, pre_stat = {}, {}
    for t in ("s", "a"):
        if cell.pre:
            h[t], pre_stat[t] = _norm(cell, ar, P[f"e_{t}"], g, beta)
        else:
            h[t] = P[f"e_{t}"]
    tau = ar.constant(1 / math.sqrt(cell.d))
    sigma = {t: ar.to_work(tau * _dot(ar, h["s"], h[t])) for t in ("s", "a")}
    hs, ha = ar.to_work(h["s"]), ar.to_work(h["a"])
    if cell.attention == "softmax":
        m = np.maximum(sigma["s"], sigma["a"])
        p = (ar.exp(ar.to_work(sigma["s"] - m)), ar.exp(ar.to_work(sigma["a"] - m)))
        p0 = ar.exp(ar.to_work(sigma["s"] - sigma["s"]))  # n = 0: the maximum is sigma_s
        Zterms = np.full(N + 1, p[1], dtype=ar.work.dtype)
        Zterms[0] = p[0]
        Z = ar.running(Zterms)
        Z[0] = p0
        weights = (ar.stored(p[0]), ar.stored(p[1]))
    else:
        p, Z = None, None
        weights = (ar.stored(sigma["s"]), ar.stored(sigma["a"]))
    terms = np.empty((N + 1, cell.d), dtype=ar.work.dtype)
    terms[0] = ar.to_work(weights[0] * hs)
    terms[1:] = ar.to_work(weights[1] * ha)
    num = ar.running(terms, axis=0)
    if cell.attention == "softmax":
        num[0] = ar.to_work(ar.stored(p0) * hs)
        A = ar.to_store(num / Z[:, None])
    else:
        A = ar.to_store(num)
    r = ar.to_store(ar.to_work(P["e_s"]) + ar.to_work(A))
    stat = None
    if cell.post:
        z, stat = _norm(cell, ar, r, g, beta)
    else:
        z = r
    out = Pass(arith=ar, params=P, pre_stat=pre_stat, h=h, sigma=sigma, p=p, Z=Z, N=num, A=A,
               r=r, stat=stat, z=z)
    if cell.readout == "regression":
        out.y = ar.to_store(_dot(ar, z, P["w"]) + ar.to_work(P["w0"]))
    else:
        out.logits = _logits(ar, z, P["u"], P["b"])
    return out


def _logits(ar: Arith, z, u, b):
    """``(sum_k u_{c,k} z_{n,k}) + b_c`` for every count ``n`` and class ``c``, in tiles of counts."""
    rows = max(1, LOGIT_TILE // max(1, len(u)))
    out = np.empty((len(z), len(u)), dtype=ar.store.dtype)
    uw, bw = ar.to_work(u), ar.to_work(b)
    for lo in range(0, len(z), rows):
        zt = ar.to_work(z[lo:lo + rows])
        acc = None
        for k in range(z.shape[1]):
            prod = ar.to_work(zt[:, k, None] * uw[None, :, k])
            acc = prod if acc is None else ar.to_work(acc + prod)
        out[lo:lo + rows] = ar.to_store(acc + bw[None, :])
    return out
