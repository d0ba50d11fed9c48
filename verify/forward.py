"""The forward pass of the attention layer at the read position, for every backend.

The model is the README's (section "The model in brief") with the norm kinds and affines of the
specification's extensions (the parts of :class:`constructions.cell.Cell`).

For an input ``(s, x_1, ..., x_n)`` with ``x_i`` in ``{a, b}``:

* the norm ``N(v) = C(v) / sqrt(|C(v)|^2 / d + eps)`` with the kind's centring ``C``
  (:meth:`constructions.cell.NormKind.centre`): LayerNorm ``C(v) = v - mean v``, so
  ``|C(v)|^2 / d`` is the population variance; RMSNorm ``C(v) = v``, the mean square.  Then the
  affine: ``LN(v) = N(v)`` (bare), ``g * N(v)`` (gain) or ``g * N(v) + beta`` (gain_bias);
* ``h_j = e_{x_j}`` (no norm, post-norm) or ``h_j = LN(e_{x_j})`` (pre-norm);
* ``score_j = tau <h_q, h_j>`` with ``tau = 1/sqrt(d)``, for ``j = 0..n``, where ``q`` is the
  read position: 0 (``bos``) or the last, ``n`` (``last``: under the causal mask it attends to
  ``0..n``, every position);
* softmax: ``A = sum_j softmax(score)_j h_j`` (computed with the maximum score subtracted);
  linear: ``A = sum_j score_j h_j``;
* ``r = e_{x_q} + A``; ``z = LN(r)`` under post-norm, else ``z = r``;
* regression ``y = <w, z> + w0``; classification logits ``<u_c, z> + b_c``, always summed in
  one fixed order (:func:`logits`).

With ``eps = 0`` the norm is undefined where ``C(v) = 0`` (the kind's
:attr:`~constructions.cell.NormKind.degenerate` inputs: a constant vector for LayerNorm, the zero
vector for RMSNorm); the pass raises :class:`NormUndefined` there.

:func:`explicit` follows these formulas token by token.  :func:`reduced` uses that the output
depends on the sequence only through the counts ``(n_a, n_b)`` and the query token ``x_q``
(:mod:`verify.inputs`): with the three token values ``h_s, h_a, h_b`` and their scores
``sigma_x = tau <h_{x_q}, h_x>``,

    softmax: ``A = (w_s h_s + n_a w_a h_a + n_b w_b h_b) / (w_s + n_a w_a + n_b w_b)``,
             ``w_x = exp(sigma_x - m)``, ``m`` the largest score present;
    linear:  ``A = sigma_s h_s + n_a sigma_a h_a + n_b sigma_b h_b``,

vectorised over all the counts given.  The regression read-out then needs only inner products
of the four vectors ``e_{x_q}, h_s, h_a, h_b`` (:func:`_regression_gram`): ``O(d)`` work once and
``O(1)`` per count; classification forms the vectors ``z``, ``O(d)`` per count.  Both passes
run unchanged on every backend of :mod:`verify.backends`.  Every count is computed by the same
operations whichever other counts share the call, so a range of counts may be evaluated in
chunks (:func:`outputs`, as :mod:`verify.judge` does) with results identical to one call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from constructions.cell import Params
from verify.backends import Backend, get_backend
from verify.inputs import Q_A, Q_B, Q_S, QUERY_TOKENS


class NormUndefined(ValueError):
    """A norm with ``eps = 0`` applied to one of its kind's degenerate inputs (``C(v) = 0``)."""


#: the exception's name from before the norm kinds; callers import it under either name
LayerNormUndefined = NormUndefined


@dataclass
class Numbers:
    """The parameters of a cell converted into one backend's numbers."""

    backend: Backend
    e: dict  # token -> raw embedding
    h: dict  # token -> value vector h_x (after pre-norm, if any)
    g: np.ndarray | None  # the affine's gain (None without one)
    beta: np.ndarray | None  # the affine's bias (None without one)
    w: np.ndarray | None
    w0: object
    u: np.ndarray | None
    b: np.ndarray | None
    tau: object
    eps: object


def _degenerate_base(kind, v: np.ndarray):
    """What every entry of a degenerate row of ``v`` (last axis) equals: ``C(v) = 0`` exactly
    when ``v`` is constant (centred kind: the row's first entry) or zero (uncentred kind: 0)."""
    return v[..., :1] if kind.centred else 0


def _refuse_degenerate(params: Params, bk: Backend, bad: np.ndarray, where: str,
                       counts=None) -> None:
    """Raise :class:`NormUndefined` at the first flagged row (eps = 0, a degenerate input)."""
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        at = where if counts is None else f"{where} at count n_a={counts[0][i]}, n_b={counts[1][i]}"
        kind = params.cell.kind
        raise NormUndefined(
            f"{kind.name} with eps=0 is undefined on {kind.degenerate} ({at})"
            + ("; on balls: indistinguishable from one at the working precision" if bk.rigorous
               else "")
        )


def _affine(params: Params, nums: Numbers, x: np.ndarray) -> np.ndarray:
    """The affine after the norm, along the last axis: ``x``, ``g * x`` or ``g * x + beta``."""
    affine = params.cell.affine
    if affine.gain:
        x = x * nums.g
    if affine.bias:
        x = x + nums.beta
    return x


def _normalise(params: Params, nums: Numbers, v: np.ndarray, where: str, counts=None) -> np.ndarray:
    """``LN(v)`` along the last axis of ``v``: the affine of ``N(v) = C(v)/sqrt(|C(v)|^2/d + eps)``.

    Raises :class:`NormUndefined` when ``eps = 0`` and a row of ``v`` is degenerate (on balls:
    its statistic ``|C(v)|^2/d`` contains 0); the message names the count (or token) at which it
    happens.
    """
    bk = nums.backend
    cell = params.cell
    centred = cell.kind.centre(v, cell.d)
    stat = (centred * centred).sum(axis=-1, keepdims=True) / cell.d
    if cell.eps == 0:
        bad = bk.degenerate_rows(v, _degenerate_base(cell.kind, v), stat)
        _refuse_degenerate(params, bk, np.atleast_1d(bad), where, counts)
    return _affine(params, nums, centred / bk.sqrt(stat + nums.eps))


def numbers(params: Params, backend, readout: bool = True) -> Numbers:
    """Convert ``params`` into ``backend`` numbers and compute the token values ``h_x``.

    With ``readout=False`` the read-out vectors are left out.  Call inside ``backend.context()``.
    """
    bk = get_backend(backend)
    cell = params.cell
    V, S = params.vectors, params.scalars
    e = {t: bk.vec(V[f"e_{t}"]) for t in ("s", "a", "b") if f"e_{t}" in V}
    g = bk.vec(V["g"]) if cell.affine.gain else None
    beta = bk.vec(V["beta"]) if cell.affine.bias else None
    tau = 1 / bk.sqrt(bk.vec(np.array([cell.d], dtype=object)))[0]
    nums = Numbers(
        backend=bk, e=e, h={}, g=g, beta=beta,
        w=bk.vec(V["w"]) if readout and "w" in V else None,
        w0=bk.vec(np.array([S["w0"]], dtype=object))[0] if readout and "w0" in S else None,
        u=bk.vec(V["u"]) if readout and "u" in V else None,
        b=bk.vec(S["b"]) if readout and "b" in S else None,
        tau=tau, eps=bk.vec(np.array([cell.eps], dtype=object))[0],
    )
    for t, et in e.items():
        nums.h[t] = _normalise(params, nums, et, f"pre-norm of token {t}") if cell.pre else et
    return nums


def logits(z_cols, u_cols, b):
    """Classification logits ``<u, z> + b``, summed in one fixed order:
    ``((z_0 u_0 + z_1 u_1) + ... + z_{d-1} u_{d-1}) + b``.

    ``z_cols`` and ``u_cols`` yield the ``d`` coordinates as arrays that broadcast against each
    other and against ``b`` (e.g. ``z.T[:, :, None]`` and ``u.T[:, None, :]`` for every pair of
    rows).  Every product and sum is one elementwise operation rounded in the numbers' own type,
    so an entry's value does not depend on which or how many other entries are computed with it
    (a matrix product may round differently with the shape of its operands).
    """
    acc = None
    for zk, uk in zip(z_cols, u_cols):
        if acc is None:
            acc = zk * uk
        else:
            acc += zk * uk
    acc += b
    return acc


def _readout(params: Params, nums: Numbers, r: np.ndarray, counts=None, readout=True):
    """``z`` from the residual ``r`` (rows), then ``y`` (regression) or the logits."""
    z = _normalise(params, nums, r, "post-norm", counts) if params.cell.post else r
    if not readout:
        return z
    if params.cell.readout == "regression":
        return z @ nums.w + nums.w0
    return logits(z.T[:, :, None], nums.u.T[:, None, :], nums.b)


def _regression_gram(params: Params, nums: Numbers, terms, counts) -> np.ndarray:
    """Regression ``y`` for residuals ``r = sum_k c_k v_k`` without forming the rows of ``r``.

    ``terms`` pairs coefficient arrays ``c_k`` (one entry per count) with fixed vectors
    ``v_k``.  Without post-norm ``y = sum_k c_k <w, v_k> + w0``.  With post-norm the kind's
    centring ``C`` is linear, so ``C(r) = sum_k c_k C(v_k)`` and the statistic (variance or mean
    square) is a quadratic form in the coefficients, ``|C(r)|^2/d = sum_jk c_j c_k
    <C(v_j), C(v_k)>/d``; with ``C(v_k)`` taken exactly zero for a degenerate ``v_k`` (equal
    entries, or zero),

        ``y = sum_k c_k <w * g, C(v_k)> / sqrt(|C(r)|^2/d + eps) + <w, beta> + w0``,

    where ``g = 1`` without a gain and the term ``<w, beta>`` is absent without a bias.  So the
    cost is ``O(d)`` once and ``O(1)`` per count.  With ``eps = 0`` a count whose statistic is
    zero (on balls: contains zero) raises :class:`NormUndefined`.
    """
    bk = nums.backend
    cell = params.cell
    if not cell.post:
        return sum(c * (v @ nums.w) for c, v in terms) + nums.w0
    d, kind = cell.d, cell.kind
    zero = bk.vec(np.zeros(d, dtype=object))
    cen = [zero if np.all(v == _degenerate_base(kind, v)) else kind.centre(v, d) for _, v in terms]
    wg = nums.w * nums.g if cell.affine.gain else nums.w
    stat = sum(c * cj * (cen[j] @ cen[k]) for j, (cj, _) in enumerate(terms)
               for k, (c, _) in enumerate(terms)) / d
    if cell.eps == 0:
        _refuse_degenerate(params, bk, bk.is_zero(stat), "post-norm", counts)
    y = sum(c * (wg @ cv) for (c, _), cv in zip(terms, cen)) / bk.sqrt(stat + nums.eps) + nums.w0
    return y + nums.w @ nums.beta if cell.affine.bias else y


def _check_tokens(params: Params, tokens) -> str:
    seq = "".join(tokens) if not isinstance(tokens, str) else tokens
    if not seq or seq[0] != "s":
        raise ValueError("a sequence must start with the token s")
    allowed = params.cell.task.tokens
    bad = sorted(set(seq[1:]) - set(allowed))
    if bad:
        raise ValueError(
            f"tokens after s must be in {{{', '.join(allowed)}}} for this cell, got {', '.join(bad)}"
        )
    return seq


def explicit(params: Params, tokens, backend="float64"):
    """Output at the read position for one token sequence, computed position by position.

    The read position is 0 (BOS read) or the last one (last read: under the causal mask it
    attends to every position, ``0..m``).

    ``tokens`` is a string such as ``"saab"`` (or a sequence of ``"s"``, ``"a"``, ``"b"``).
    Returns ``y`` (regression) or the vector of logits (classification) in backend numbers.
    """
    bk = get_backend(backend)
    seq = _check_tokens(params, tokens)
    with bk.context():
        nums = numbers(params, bk)
        E = np.stack([nums.e[t] for t in seq])  # raw embeddings, one row per position
        H = np.stack([nums.h[t] for t in seq])  # values h_j
        read = -1 if params.cell.read.last else 0  # the read position (causal: it sees 0..m)
        scores = (H @ H[read]) * nums.tau
        if params.cell.attention == "softmax":
            m = functools.reduce(bk.maximum, scores)
            weights = bk.exp(scores - m)
            weights = weights / weights.sum()
        else:
            weights = scores
        attended = weights @ H
        r = E[read] + attended
        return _readout(params, nums, r[None, :])[0]


def _check_counts(params: Params, n_a, n_b, query=None):
    """The counts as equal-length 1-D int64 arrays (``n_b = 0`` when omitted) and the query
    tokens coded as in :data:`verify.inputs.QUERY_TOKENS`, validated.

    At the BOS read the query is ``s``.  At the last read it is the last token: ``s`` for the
    empty input, else one of the tokens present; omitted, it is the only token present (an
    input with both ``a`` and ``b`` must say which is last).
    """
    n_a = np.atleast_1d(np.asarray(n_a, dtype=np.int64))
    n_b = np.zeros_like(n_a) if n_b is None else np.atleast_1d(np.asarray(n_b, dtype=np.int64))
    if n_a.shape != n_b.shape or n_a.ndim != 1:
        raise ValueError("n_a and n_b must be 1-D arrays of the same length")
    if (n_a < 0).any() or (n_b < 0).any():
        raise ValueError("counts must be non-negative")
    if (n_b > 0).any() and not params.cell.distractor:
        raise ValueError("this cell has no distractor token b, so n_b must be 0")
    empty = n_a + n_b == 0
    if not params.cell.read.last:
        if query is not None and np.any(np.asarray(query) != "s"):
            raise ValueError("at the BOS read the query token is s")
        return n_a, n_b, np.full(n_a.shape, Q_S)
    if query is None:
        if ((n_a > 0) & (n_b > 0)).any():
            raise ValueError("an input with both a and b needs its last token (query)")
        return n_a, n_b, np.where(empty, Q_S, np.where(n_a > 0, Q_A, Q_B))
    labels = np.broadcast_to(np.asarray(query, dtype=object), n_a.shape)
    if not set(labels) <= set(QUERY_TOKENS):
        raise ValueError(f"the last token must be one of {', '.join(QUERY_TOKENS)}")
    q = np.array([QUERY_TOKENS.index(t) for t in labels], dtype=np.int64)
    present = np.where(q == Q_S, empty, np.where(q == Q_A, n_a > 0, n_b > 0))
    if not present.all():
        raise ValueError("the last token must be s for the empty input and a token present otherwise")
    return n_a, n_b, q


def reduced(params: Params, n_a, n_b=None, backend="float64", readout=True, query=None):
    """Outputs for many inputs at once, each given by its counts ``(n_a, n_b)`` and, at the
    last read, its last token ``query`` (``"s"``, ``"a"`` or ``"b"``; see :func:`_check_counts`).

    The output depends only on these (:mod:`verify.inputs`).  Returns an array of ``y``
    (regression, shape ``(K,)``) or of logits (classification, ``(K, L+1)``); with
    ``readout=False`` the vectors ``z`` fed to the read-out (shape ``(K, d)``).
    """
    bk = get_backend(backend)
    n_a, n_b, q = _check_counts(params, n_a, n_b, query)
    with bk.context():
        return outputs(params, numbers(params, bk, readout=readout), n_a, n_b, readout, q)


def outputs(params: Params, nums: Numbers, n_a: np.ndarray, n_b: np.ndarray, readout=True,
            query: np.ndarray | None = None):
    """:func:`reduced` on parameters already converted by :func:`numbers` (with the same
    ``readout``), for valid int64 count arrays and query codes (default: all ``s``); call inside
    ``nums.backend.context()``.

    Converting once and calling this per chunk of counts gives the same numbers as one call:
    the inputs of each query token are computed together, by the same operations.
    """
    if query is None:
        query = np.full(n_a.shape, Q_S)
    groups = [(q, np.flatnonzero(query == q)) for q in range(len(QUERY_TOKENS))]
    groups = [(q, idx) for q, idx in groups if idx.size]
    if len(groups) == 1:
        return _outputs_at(params, nums, n_a, n_b, readout, QUERY_TOKENS[groups[0][0]])
    out = None
    for q, idx in groups:
        part = _outputs_at(params, nums, n_a[idx], n_b[idx], readout, QUERY_TOKENS[q])
        if out is None:
            out = np.empty((len(n_a),) + part.shape[1:], dtype=part.dtype)
        out[idx] = part
    return out


def _outputs_at(params: Params, nums: Numbers, n_a: np.ndarray, n_b: np.ndarray, readout,
                q: str):
    """The outputs of inputs that share the query token ``q``: scores ``tau <h_q, h_x>``,
    residual ``e_q + A``."""
    bk = nums.backend
    h = nums.h
    toks = ["s", "a"] + (["b"] if params.cell.distractor else [])
    sigma = {t: (h[q] @ h[t]) * nums.tau for t in toks}
    na = bk.vec(n_a.astype(object))
    nb = bk.vec(n_b.astype(object))
    cnt = {"s": None, "a": na, "b": nb}
    present = {"a": n_a > 0, "b": n_b > 0}
    if params.cell.attention == "softmax":
        m = bk.full(n_a.shape, sigma["s"])
        for t in toks[1:]:
            m = bk.maximum(m, np.where(present[t], sigma[t], sigma["s"]))
        weight = {"s": bk.exp(sigma["s"] - m)}
        for t in toks[1:]:
            # exponent taken as 0 where the token is absent: avoids 0 * inf
            weight[t] = cnt[t] * bk.exp(np.where(present[t], sigma[t] - m, m - m))
        Z = sum(weight[t] for t in toks)
        coef = {t: weight[t] / Z for t in toks}
    else:
        coef = {"s": bk.full(n_a.shape, sigma["s"])}
        coef.update({t: cnt[t] * sigma[t] for t in toks[1:]})
    # r = e_q + sum_t coef_t h_t
    terms = [(bk.vec(np.ones(n_a.shape, dtype=object)), nums.e[q])]
    terms += [(coef[t], h[t]) for t in toks]
    if readout and params.cell.readout == "regression":
        return _regression_gram(params, nums, terms, (n_a, n_b))
    r = sum(np.multiply.outer(c, v) for c, v in terms)
    return _readout(params, nums, r, counts=(n_a, n_b), readout=readout)
