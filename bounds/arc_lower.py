"""A proven lower bound on the arc amplitude ``R*(L)`` (:mod:`constructions.arc`).

For ``n = 0..L`` let ``theta_n = atan((n - n0)/lam)`` (``lam > 0``, ``n0`` real) and
``v_n = (cos theta_n, sin theta_n)``.  Then

    R*(L) = inf |u|  over  (lam, n0, C, u)  with  |C + <u, v_n> - n| < 1/2  for every n,

the smallest read-out amplitude with which the projective arc counts to ``L``.  The symmetric
construction (``n0 = L/2``) reaches ``R_sym(L)`` (:func:`constructions.closed_forms.arc_closed_form`);
:func:`arc_lower` proves ``R*(L) >= (1 - rtol') R_sym(L)`` by branch and bound over the shape
``(lam, n0)`` of the arc, evaluating whole batches of boxes at once in outward-rounded interval
arithmetic (:mod:`verify.intervals`).  The proof is in its docstring.
"""

from __future__ import annotations

import itertools

import flint
import numpy as np

from verify.intervals import Iv, _down, _up, check_float_mode, norm_upper
from verify.backends import arb_ceil, arb_floor

PREC = 128

_PAIRS = [(i, j) for i in range(4) for j in range(i + 1, 4)]
_TRIPLES = np.array([(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)])
_SIGNS = np.array([s for s in itertools.product((-1, 1), repeat=3) if len(set(s)) > 1], dtype=float)
_HALVES = np.full(4, 0.5)  # abs(alpha) @ _HALVES = sum |alpha_i| / 2 (a matrix product: fast)
_MIX = np.array([0.0625, 0.25, 1.0, 4.0, 16.0])
#: the stationary points of three counts kept per box (the best by their point ratio)
_KEEP = 4
#: per count ``i``, the index ``i`` and the other three counts (two (4, 3) index arrays)
_OTHERS = (np.repeat(np.arange(4)[:, None], 3, 1),
           np.array([[j for j in range(4) if j != i] for i in range(4)]))
_PAIR_ALPHAS = np.array([[-1.0 if k == i else 1.0 if k == j else 0.0 for k in range(4)]
                         for i, j in _PAIRS])
#: the pairs, the stationary points of the triples, and the candidates :func:`_candidates` returns
_N_PAIRS, _N_TRI = len(_PAIRS), len(_TRIPLES) * len(_SIGNS)
_N_CANDIDATES = _N_PAIRS + _KEEP + 2 + 2 * len(_MIX)
#: the pairs of the vectors (w_c, a, b, w_m) whose inner products :meth:`_Boxes.choose` uses
_DOTS = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2), (3, 3))


def _stack(arrays, axis: int) -> np.ndarray:
    """``numpy.stack(arrays, axis)`` for ``axis`` 0, 1 or -1, by one concatenation of views (the
    same array; ``numpy.stack`` costs several microseconds per call in argument handling)."""
    key = (None,) if axis == 0 else (slice(None), None) if axis == 1 else (Ellipsis, None)
    return np.concatenate([a[key] for a in arrays], axis)


def _norm(x: np.ndarray) -> np.ndarray:
    """Euclidean norm over a last axis of size 2 (float: a choice of candidates, no bound)."""
    return np.sqrt(x[..., 0] * x[..., 0] + x[..., 1] * x[..., 1])


def _unit(T: np.ndarray) -> np.ndarray:
    """``v = (1, T)/sqrt(1 + T^2)``: the point of angle ``atan T`` (last axis of size 2)."""
    r = 1 / np.sqrt(1 + T * T)
    return _stack([r, T * r], -1)


def _candidates(ns: np.ndarray, T: np.ndarray, V: np.ndarray | None = None,
                a12: tuple | None = None) -> np.ndarray:
    """Multiplier vectors ``alpha`` (``sum alpha = 0``) among which the dual optimum lies.

    ``T`` has shape ``(boxes, 4)`` (tangents of the four angles); the result has shape
    ``(boxes, K, 4)``.  On a support of four points the ratio ``N(alpha)/|w(alpha)|`` is, within
    a sign cone, linear along the null direction ``z`` of ``alpha -> (sum alpha, w(alpha))``: it
    is maximal on the cone's boundary (three points or fewer), or unbounded (``N(z) > 0``: the
    four constraints are inconsistent, Farkas).  On three points ``i, j, k`` with fixed signs
    ``sigma`` write ``alpha = (x1, x2, -x1-x2)``: ``N = a.x`` with
    ``a = (n_i - n_k - (s_i - s_k)/2, n_j - n_k - (s_j - s_k)/2)`` and ``w = B x`` with
    ``B = [v_i - v_k, v_j - v_k]``; ``a.x/|Bx|`` is quasi-concave and maximal at
    ``x = (B^T B)^{-1} a``.  Returns the six pairs, these stationary points, ``+-z`` and
    mixtures of ``+-z`` with the best of the others by its point ratio.  Choosing among them
    never affects validity, only tightness; degenerate candidates are zero rows (``N = 0``).
    ``V`` (the points ``_unit(T)``) and ``a12`` (:func:`_triple_targets` of ``ns``) may be
    passed when already computed.
    """
    nb = T.shape[0]
    V = _unit(T) if V is None else V                    # (nb, 4, 2)
    if a12 is None:
        a12 = _triple_targets(ns)
    a1, a2 = a12
    # all candidates in one array: the pairs, the stationary points, then +-z (filled in place)
    A = np.empty((nb, _N_PAIRS + _N_TRI + 2, 4))
    A[:, :_N_PAIRS] = _PAIR_ALPHAS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # the four triples (i, j, k) on axis 1, the sign patterns on axis 2
        I, J, K = _TRIPLES.T
        VK = np.take(V, K, axis=1)
        b1, b2 = np.take(V, I, axis=1) - VK, np.take(V, J, axis=1) - VK   # (nb, 4, 2)
        g11, g12, g22 = ((x[..., 0] * y[..., 0] + x[..., 1] * y[..., 1])[:, :, None]
                         for x, y in ((b1, b1), (b1, b2), (b2, b2)))
        det = g11 * g22 - g12 * g12
        x1 = (g22 * a1 - g12 * a2) / det
        x2 = (g11 * a2 - g12 * a1) / det
        scale = np.maximum(np.maximum(abs(x1), abs(x2)), abs(x1 + x2))
        ok = (det > 0) & (scale > 0) & np.isfinite(scale)
        x1, x2 = (np.where(ok, x / scale, 0.0) for x in (x1, x2))
        _triple_alphas(x1, x2, out=A[:, _N_PAIRS:_N_PAIRS + _N_TRI].reshape(nb, len(_TRIPLES), -1, 4))
        # row i: (-1)^i D_i, D_i the determinant of the rows (1, v_j), j != i
        z = _COFACTOR_SIGNS * _det3_xy(V[..., 0][:, _OTHERS[1]], V[..., 1][:, _OTHERS[1]])
        scale = abs(z).max(1, keepdims=True)
        z = np.where((scale > 0) & np.isfinite(scale), z / scale, 0.0)
        A[:, -2] = z
        np.negative(z, out=A[:, -1])
        N = _N_float(A, ns)
        w = _norm(A @ V)
        ratio = np.where(N > 0, np.where(w > 0, N / w, np.inf), -np.inf)
    rows = np.arange(nb)
    best = A[rows, np.argmax(ratio, 1)]                 # (nb, 4)
    out = np.empty((nb, _N_CANDIDATES, 4))
    out[:, :_N_PAIRS] = A[:, :_N_PAIRS]
    # of the stationary points only the best few by their point ratio (the box bounds of
    # :meth:`_Boxes.choose` cost in proportion to the candidates)
    tri = ratio[:, _N_PAIRS:_N_PAIRS + _N_TRI]
    top = _N_PAIRS + np.argpartition(-tri, _KEEP - 1, axis=1)[:, :_KEEP]
    out[:, _N_PAIRS:_N_PAIRS + _KEEP] = A[rows[:, None], top]
    out[:, _N_PAIRS + _KEEP:_N_PAIRS + _KEEP + 2] = A[:, -2:]
    # the mixtures best + mu (+-z), mu in _MIX
    np.add(best[:, None, None], _MIX[:, None] * A[:, -2:, None],
           out=out[:, _N_PAIRS + _KEEP + 2:].reshape(nb, 2, len(_MIX), 4))
    return out


def _N_float(A: np.ndarray, ns: np.ndarray, absA: np.ndarray | None = None) -> np.ndarray:
    """``N(alpha)`` in floats for the rows of ``A`` (``(nb, K, 4)``): ``A @ ns - |A| @ 1/2``
    as one matrix-vector product over all rows: the same floats per row as the batched
    ``A @ ns - abs(A) @ _HALVES`` (each row is its own dot product with the same vector; a float
    choice among candidates, never part of a bound)."""
    A2 = A.reshape(-1, 4)
    absA = abs(A2) if absA is None else absA.reshape(-1, 4)
    return (A2 @ ns - absA @ _HALVES).reshape(A.shape[:-1])


def _triple_targets(ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vectors ``a = (a1, a2)`` of :func:`_candidates` per triple (axis 0) and sign pattern
    (axis 1): they depend on the counts only."""
    I, J, K = _TRIPLES.T
    a1 = (ns[I] - ns[K])[:, None] - 0.5 * (_SIGNS[:, 0] - _SIGNS[:, 2])   # (4, 6)
    a2 = (ns[J] - ns[K])[:, None] - 0.5 * (_SIGNS[:, 1] - _SIGNS[:, 2])
    return a1, a2


def _triple_alphas(x1: np.ndarray, x2: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The multipliers ``alpha = (x1, x2, -x1-x2)`` on the counts ``(i, j, k)`` of each triple of
    :data:`_TRIPLES` (axis 1 of ``x1``, ``x2``; shape ``(nb, 4, S)``), zero on the fourth count:
    shape ``(nb, 4, S, 4)``.  Written entry by entry: the same values as
    ``x1 e_i + x2 e_j - (x1 + x2) e_k`` with unit vectors ``e`` (up to the sign of a zero, which
    no later step sees: a zero multiplier contributes nothing, and every bound rounds a zero
    outward to the same floats).  Written into ``out`` (of that shape) if given."""
    if out is None:
        out = np.zeros(x1.shape + (4,))
    else:
        out[...] = 0.0
    minus = -(x1 + x2)
    for t, (i, j, k) in enumerate(_TRIPLES):
        out[:, t, :, i] = x1[:, t]
        out[:, t, :, j] = x2[:, t]
        out[:, t, :, k] = minus[:, t]
    return out


#: ``(-1)^i`` per count ``i``: the cofactor signs of the null vector ``z`` (:func:`_candidates`)
_COFACTOR_SIGNS = np.array([1.0, -1.0, 1.0, -1.0])
_FLOAT_MAX = float(np.finfo(np.float64).max)


def _nan_to_num(x: np.ndarray) -> np.ndarray:
    """``numpy.nan_to_num(x, nan=-inf)`` of a float array, the same floats without its argument
    handling: ``nan`` to ``-inf``, ``+-inf`` to the largest floats ``+-1.8e308`` (the order of
    the scores, a float choice among candidates, kept as it was)."""
    y = np.clip(x, -_FLOAT_MAX, _FLOAT_MAX)  # nan stays nan
    return np.fmax(y, -np.inf, out=y)        # and becomes -inf (fmax ignores a nan)


def _det3(m: np.ndarray) -> np.ndarray:
    """Determinants of ``(..., 3, 3)`` matrices whose first column is ones (floats, for the
    null vector of :func:`_candidates`: a choice, never part of a bound):
    ``(x2 - x1)(y3 - y1) - (x3 - x1)(y2 - y1)`` for the rows ``(1, x_i, y_i)``."""
    return _det3_xy(m[..., 1], m[..., 2])


def _det3_xy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`_det3` of the rows ``(1, x_i, y_i)``, ``i`` on the last axis of ``x`` and ``y``."""
    return (x[..., 1] - x[..., 0]) * (y[..., 2] - y[..., 0]) - (x[..., 2] - x[..., 0]) * (y[..., 1] - y[..., 0])


def _exact_alpha(alpha: np.ndarray) -> np.ndarray:
    """``alpha`` rounded to floats whose sum is exactly ``0`` (rows of four; a float array).

    The duality step needs ``sum alpha_i = 0`` exactly.  With ``2^(x-1) <= max |alpha_i| < 2^x``
    and ``u = 2^(x-50)``, every ``alpha_i/u`` (exact: a power of two) is below ``2^50`` in
    magnitude and is rounded to an integer ``q_i``; the largest entry's ``q`` is replaced by minus
    the sum of the other three, an integer below ``3 * 2^50 < 2^53`` in magnitude, so that sum and
    every ``q_i u`` are exact floats and ``sum_i q_i u = 0`` exactly.  The rounding moves each
    entry by at most ``u/2 <= 2^-50`` of the largest, and the replaced one by that much three times
    plus the row's own sum (tiny for the candidates, whose sum is zero up to rounding): a
    different multiplier vector, as valid as any, whose later products with intervals enclose
    its values (exact floats: :class:`verify.intervals.Iv` then needs two products, not four).
    Rows whose largest entry is below ``2^-900`` (so that ``u`` stays a normal float) become
    zero rows.
    """
    big = np.max(abs(alpha), axis=1)
    _, x = np.frexp(big)
    u = np.ldexp(1.0, x - 50)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):  # u underflows to 0 only on the zero rows
        q = np.where(big[:, None] >= 2.0 ** -900, np.round(alpha / u), 0.0)
    top = np.arange(4) == np.argmax(abs(q), axis=1)[:, None]
    rest = np.where(top, 0.0, q)
    q = np.where(top, -(rest[:, 0] + rest[:, 1] + rest[:, 2] + rest[:, 3])[:, None], q)
    return q * u


def _sum4_ends(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sum over the four counts (axis 1) of ``Iv(lo, hi)``, left to right, each partial sum
    rounded outward: the floats of ``x[:, 0] + x[:, 1] + x[:, 2] + x[:, 3]`` in :class:`Iv`."""
    return _sum4_down(lo), _up(_up(_up(hi[:, 0] + hi[:, 1]) + hi[:, 2]) + hi[:, 3])


def _sum4_down(lo: np.ndarray) -> np.ndarray:
    """The lower end of :func:`_sum4_ends`."""
    return _down(_down(_down(lo[:, 0] + lo[:, 1]) + lo[:, 2]) + lo[:, 3])


def _scaled(lo: np.ndarray, hi: np.ndarray, f) -> tuple[np.ndarray, np.ndarray]:
    """``Iv(lo, hi) * f`` for exact floats ``f`` (the two products, the smaller rounded down, the
    larger up): the floats of :meth:`Iv.__mul__`."""
    p, q = lo * f, hi * f
    return _down(np.minimum(p, q)), _up(np.maximum(p, q))


def _times_nonneg(lo, hi, p_lo, p_hi) -> tuple[np.ndarray, np.ndarray]:
    """``Iv(lo, hi) * Iv(p_lo, p_hi)`` for a factor with ``0 <= p_lo <= p_hi``: of the four end
    products the smallest is ``lo p_lo`` if ``lo >= 0``, else ``lo p_hi``, and the largest
    ``hi p_hi`` if ``hi >= 0``, else ``hi p_lo`` (exactly, hence also after the monotone
    rounding): the floats of :meth:`Iv.__mul__`, two products instead of four."""
    return _down(lo * np.where(lo >= 0, p_lo, p_hi)), _up(hi * np.where(hi >= 0, p_hi, p_lo))


def _one_plus_t_end(T: np.ndarray, rnd, opp) -> np.ndarray:
    """One end of ``1 + t`` with ``t = tan(atan(T)/2) = T/(1 + s)``, ``s = sqrt(1 + T^2)``, at
    float points ``T``: the lower end with ``rnd, opp = _down, _up``, the upper end with
    ``rnd, opp = _up, _down``.

    For ``T >= 0`` as written; for ``T < 0`` as ``(1 + 1/(s - T))/(1 + s)`` (``s + T =
    1/(s - T)``), so no difference of nearby values is formed on either side.  Every quantity
    is positive, and ``1 + t`` increases in ``T/(1 + s)`` and in ``1/(s - T)`` and decreases in
    ``1 + s``: so its lower end is the formula with each increasing part rounded down (``rnd``)
    and ``s`` rounded up (``opp``), the upper end the other way round.  These are the floats
    of :class:`verify.intervals.Iv` on the point ``Iv(T)``, end by end: ``T^2`` is ``|T|^2``;
    ``1 + s >= 2`` and, for ``T < 0``, ``s - T > 0`` (``s >= 1`` rounded down by less than one
    float twice, ``-T > 0``), so the positivity guards of :class:`Iv` division hold where the
    branch is used; of the four quotients of a positive numerator by ``[lo, hi] > 0`` the
    smallest is the one by ``hi`` (rounding is monotone).  Finite ``T`` only (the tangents of
    a box are).
    """
    s = opp(np.sqrt(opp(1 + np.maximum(opp(T * T), 0.0))))
    d = opp(s + 1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        pos = rnd(1 + rnd(T / d))
        neg = rnd(rnd(1 + rnd(1 / opp(s - T))) / d)
    return np.where(T >= 0, pos, neg)


def _prod_end(x: np.ndarray, k: int, rnd) -> np.ndarray:
    """One end of the product of ``k`` intervals with nonnegative ends, given as ``x[..., 0]``,
    ``x[..., 1]``, ... (lower ends with ``rnd = _down``, upper ends with ``_up``): the products
    left to right, each rounded outward.  For ``0 <= a <= b``, ``0 <= c <= d`` the smallest of
    the four end products of :class:`verify.intervals.Iv` is ``a c`` and the largest ``b d``
    (rounding is monotone), so these are its floats."""
    out = x[..., 0]
    for j in range(1, k):
        out = rnd(out * x[..., j])
    return out


def _ratio_lower(N_lo: np.ndarray, w_hi: np.ndarray) -> np.ndarray:
    """``N/|w|`` from below where ``N > 0`` surely (``N_lo`` the lower end of ``N``); ``0``
    elsewhere (never ``nan``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (Iv(N_lo) / Iv(w_hi)).lo
    ok = (N_lo > 0) & (w_hi > 0) & (q > 0)
    return np.where(ok, q, 0.0)


class _Boxes:
    """The four counts, the offsets ``d_i = n_i - L/2`` and the bounds of step 3 on arrays of boxes."""

    def __init__(self, L: int, counts=None):
        m = -(-L // 4)
        self.L = L
        self.ns = np.array([0.0, m, L - m, L] if counts is None else sorted(counts), dtype=float)
        self.ds = self.ns - L / 2  # exact: multiples of 1/2 far below 2^53
        # 1/G_i, G_i = prod_{j != i} |n_i - n_j| (step 3b), enclosed (the product need not be exact)
        gaps = Iv(np.ones(4))
        for k in range(3):
            gaps = gaps * abs(self.ns - self.ns[_OTHERS[1][:, k]])
        self.inv_gaps = 1 / gaps
        self.a12 = _triple_targets(self.ns)

    def _N_lo(self, alpha: np.ndarray) -> np.ndarray:
        """The lower end of ``N(alpha) = sum alpha_i n_i - (1/2) sum |alpha_i|`` (``alpha`` exact
        floats of :func:`_exact_alpha`: halving them is exact), summed as :class:`Iv` does."""
        p = alpha * self.ns
        return _sum4_down(_down(_down(p) - abs(alpha) * 0.5))

    def choose(self, Sa, Sb, ca, cb, Sm, cm, tangents):
        """Per box, the candidates with the best float estimates of the two bounds below.

        Third, the float value of the relaxed problem at the centre (the best point ratio):
        an estimate of what no bound on the box can exceed.  ``tangents`` is
        :meth:`_tangent_range` of the boxes.
        """
        ds = self.ds
        T = cm[:, None] + Sm[:, None] * ds                  # (nb, 4)
        G = _unit(T)
        A = _candidates(self.ns, T, G, self.a12)            # (nb, K, 4)
        nb = len(Sa)
        s2 = 1 + T * T
        Gp = _stack([-T, np.ones_like(T)], -1) / (s2 ** 1.5)[..., None]
        absA = abs(A)
        N = _N_float(A, self.ns, absA)
        at_lo, at_hi = (np.arctan(x) for x in tangents)
        tm = (at_lo + at_hi) / 2
        rad = (at_hi - at_lo) / 2
        # w_c, a, b of the Taylor estimate and w at the mid-angles, from one product
        W = A @ np.concatenate([G, Gp, ds[None, :, None] * Gp, _stack([np.cos(tm), np.sin(tm)], -1)],
                               axis=2)
        W = [W[..., k] for k in range(8)]   # (wc, a, b, wm), two components each
        dot = lambda i, j: W[2 * i] * W[2 * j] + W[2 * i + 1] * W[2 * j + 1]
        ww, aa, bb, wa, wb, ab, mm = (dot(i, j) for i, j in _DOTS)
        # |wc + a dc + b dS|^2 at the corners, from the six inner products (a float estimate)
        wmax = np.zeros(N.shape)
        mT = np.zeros(T.shape)
        wa2, wb2 = 2 * wa, 2 * wb
        dSs = [dS[:, None] for dS in (Sa - Sm, Sb - Sm)]
        sws = [S_ * (S_ * bb + wb2) for S_ in dSs]   # the terms in dS alone, once per dS
        for dc in (ca - cm, cb - cm):
            c_ = dc[:, None]
            cw, c2 = ww + c_ * (c_ * aa + wa2), 2 * c_
            for S_, sw in zip(dSs, sws):
                wmax = np.maximum(wmax, cw + sw + c2 * S_ * ab)
                mT = np.maximum(mT, abs(c_ + S_ * ds))
        wmax = np.sqrt(np.maximum(wmax, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            den = _stack([wmax + (absA @ (mT * mT / 2)[..., None])[..., 0],
                            np.sqrt(mm) + (absA @ rad[..., None])[..., 0], np.sqrt(ww)], 0)
            score = _nan_to_num(np.where(N > 0, N / den, -np.inf))
        best = np.argmax(score[:2], -1)
        rows = np.arange(nb)
        return A[rows, best[0]], A[rows, best[1]], score[2].max(1)

    def _tangent_range(self, Sa, Sb, ca, cb):
        """Per count, floats below and above every ``T_i = c + S d_i`` over the box."""
        up = self.ds >= 0
        S_lo = np.where(up, Sa[:, None], Sb[:, None])
        S_hi = np.where(up, Sb[:, None], Sa[:, None])
        # (Iv(c) + Iv(S) * d).lo and .hi: the product of points is one float, rounded both ways
        return _down(ca[:, None] + _down(S_lo * self.ds)), _up(cb[:, None] + _up(S_hi * self.ds))

    def taylor(self, alpha, Sa, Sb, ca, cb, Sm, cm) -> np.ndarray:
        """Step 3 by a third-order Taylor model in ``T_i`` around the centre.

        The floats of the interval evaluation of step 3 in :class:`Iv`, computed end by end
        where the signs are known: ``r = (1 + T^2)^{-1/2}`` and its powers are positive (a
        lower end below ``0``, from rounding a value below ``2^-1074``, is raised to ``0``:
        the enclosure holds, and :func:`_times_nonneg` needs it), products with them take
        two end products (:func:`_times_nonneg`), and of the remainder, the norms and the
        final sum only the upper ends that bound ``|w|`` are formed.  The six components of
        ``g``, ``g'``, ``g''`` and the six sums of step 3 (two components each) lie side by
        side on a last axis.
        """
        A = _exact_alpha(alpha)
        return _ratio_lower(self._N_lo(A), self._taylor_norm(A, Sa, Sb, ca, cb, Sm, cm))

    def _taylor_norm(self, A, Sa, Sb, ca, cb, Sm, cm) -> np.ndarray:
        """An upper bound of ``|w(alpha)|`` over each box by the Taylor model of step 3
        (:meth:`taylor`; ``A`` exact floats of :func:`_exact_alpha`)."""
        ds = self.ds
        # the corners' offsets from the centre, enclosed (boxes, corners)
        dcS = _stack([ca - cm, ca - cm, cb - cm, cb - cm, Sa - Sm, Sb - Sm, Sa - Sm, Sb - Sm], 1)
        dcS_lo, dcS_hi = _down(dcS), _up(dcS)
        dc, dS = Iv(dcS_lo[:, :4], dcS_hi[:, :4]), Iv(dcS_lo[:, 4:], dcS_hi[:, 4:])
        mdc, mdS = np.maximum(-dcS_lo, dcS_hi).reshape(-1, 2, 4).max(2).T
        p = Sm[:, None] * ds
        T_lo, T_hi = _down(cm[:, None] + _down(p)), _up(cm[:, None] + _up(p))
        a_lo = np.where(T_lo >= 0, T_lo, np.where(T_hi <= 0, -T_hi, 0.0))   # |T|
        a_hi = np.maximum(-T_lo, T_hi)
        sq_lo, sq_hi = np.maximum(_down(a_lo * a_lo), 0.0), _up(a_hi * a_hi)  # T^2
        # r = 1/sqrt(1 + T^2) (the root is >= 1 - 2^-51 > 0), r^3 = (r^1)^2 r, r^5 = r^3 r r
        r_lo = np.maximum(_down(1 / _up(np.sqrt(_up(sq_hi + 1)))), 0.0)
        r_hi = _up(1 / _down(np.sqrt(_down(sq_lo + 1))))
        rw_lo, rw_hi = np.maximum(_down(r_lo), 0.0), _up(r_hi)
        r3_lo = np.maximum(_down(np.maximum(_down(rw_lo * rw_lo), 0.0) * r_lo), 0.0)
        r3_hi = _up(_up(rw_hi * rw_hi) * r_hi)
        r5_lo = np.maximum(_down(np.maximum(_down(r3_lo * r_lo), 0.0) * r_lo), 0.0)
        r5_hi = _up(_up(r3_hi * r_hi) * r_hi)
        # g = (r, T r), g' = (-T r^3, r^3), g'' = ((2T^2 - 1) r^5, -3T r^5): six components
        # the four products T r, T r^3, (2T^2 - 1) r^5, (-3T) r^5 side by side on a first axis
        F_lo, F_hi = _times_nonneg(_stack([T_lo, T_lo, _down(_down(2 * sq_lo) - 1), _down(T_hi * -3.0)], 0),
                                   _stack([T_hi, T_hi, _up(_up(2 * sq_hi) - 1), _up(T_lo * -3.0)], 0),
                                   _stack([r_lo, r3_lo, r5_lo, r5_lo], 0), _stack([r_hi, r3_hi, r5_hi, r5_hi], 0))
        G_lo = _stack([r_lo, F_lo[0], -F_hi[1], r3_lo, F_lo[2], F_lo[3]], -1)   # (nb, 4, 6)
        G_hi = _stack([r_hi, F_hi[0], -F_lo[1], r3_hi, F_hi[2], F_hi[3]], -1)
        d3 = ds[None, :, None]
        P = _scaled(G_lo, G_hi, A[:, :, None])          # alpha g, alpha g', alpha g''
        X = _scaled(P[0][..., 2:], P[1][..., 2:], d3)   # alpha d g', alpha d g''
        Y = _scaled(X[0][..., 2:], X[1][..., 2:], d3)   # alpha d^2 g''
        Z = _scaled(np.concatenate([P[0][..., 4:], Y[0]], -1), np.concatenate([P[1][..., 4:], Y[1]], -1), 0.5)
        # the sums w, a, b, q_cS, q_cc, q_SS (two components each)
        S_lo, S_hi = _sum4_ends(np.concatenate([P[0][..., :4], X[0], Z[0]], -1),
                                np.concatenate([P[1][..., :4], X[1], Z[1]], -1))
        nb = len(S_lo)
        w = Iv(S_lo[:, None, :2], S_hi[:, None, :2])
        ab = Iv(S_lo[:, 2:6].reshape(nb, 2, 1, 2), S_hi[:, 2:6].reshape(nb, 2, 1, 2))   # a, b
        # w + a dc + b dS at the corners (the two products side by side)
        prod = ab * Iv(_stack([dc.lo, dS.lo], 1)[..., None], _stack([dc.hi, dS.hi], 1)[..., None])
        u = w + prod[:, 0] + prod[:, 1]
        lin = norm_upper(u[..., 0], u[..., 1]).max(1)
        Q = Iv(S_lo[:, 6:].reshape(nb, 3, 2), S_hi[:, 6:].reshape(nb, 3, 2))
        n_cS, n_cc, n_SS = norm_upper(Q[..., 0], Q[..., 1]).T
        quad = _up(_up(_up(n_cc * _up(mdc * mdc)) + _up(_up(n_cS * mdc) * mdS)) + _up(n_SS * _up(mdS * mdS)))
        # |g'''(t)| = 3 sqrt(4t^4+1)/(1+t^2)^3 decreases in |t|; |t| >= |T| - mT on the box
        x = Iv(dc.lo[:, :, None], dc.hi[:, :, None]) + Iv(dS.lo[:, :, None], dS.hi[:, :, None]) * ds
        mT = np.maximum(-x.lo, x.hi).max(1)
        x0 = np.maximum(_down(a_lo - mT), 0.0)
        t2_lo, t2_hi = np.maximum(_down(x0 * x0), 0.0), _up(x0 * x0)
        m3_hi = _up(_up(_up(mT) * _up(mT)) * mT)                       # mT^3
        top = _up(_up(m3_hi * abs(A)) * _up(np.sqrt(_up(_up(4 * _up(t2_hi * t2_hi)) + 1))))
        u_lo = _down(t2_lo + 1)                                        # 2 (1 + t2)^3
        den_lo = _down(2 * _down(np.maximum(_down(_down(u_lo) * _down(u_lo)), 0.0) * u_lo))
        E = _up(top / den_lo)
        E = _up(_up(_up(E[:, 0] + E[:, 1]) + E[:, 2]) + E[:, 3])
        return _up(_up(lin + quad) + E)

    def interval(self, alpha, tangents) -> np.ndarray:
        """Step 3 by the range of each ``v_i`` over the box's range of ``T_i`` (``tangents``,
        :meth:`_tangent_range` of the boxes).  The floats of its evaluation in :class:`Iv`,
        end by end: ``s = sqrt(1 + T^2) >= 1 - 2^-51 > 0``, so of the quotients ``T/s`` the
        smaller is the one by the upper end of ``s`` for ``T >= 0`` and by the lower end
        below, and ``1/s`` is ``[1/s_hi, 1/s_lo]``."""
        A = _exact_alpha(alpha)
        return _ratio_lower(self._N_lo(A), self._interval_norm(A, tangents))

    def _interval_norm(self, A, tangents) -> np.ndarray:
        """An upper bound of ``|w(alpha)|`` over each box by the ranges of :meth:`interval`
        (``A`` exact floats of :func:`_exact_alpha`)."""
        lo, hi = tangents
        # sin = T/sqrt(1+T^2) increases with T: its lower end at lo, its upper end at hi
        X = _stack([lo, hi], 0)
        XX = X * X                                          # |T|^2 of the points
        s_lo = _down(np.sqrt(_down(np.maximum(_down(XX), 0.0) + 1)))
        s_hi = _up(np.sqrt(_up(_up(XX) + 1)))
        sin_lo = _down(lo / np.where(lo >= 0, s_hi[0], s_lo[0]))
        sin_hi = _up(hi / np.where(hi >= 0, s_lo[1], s_hi[1]))
        # cos = 1/sqrt(1+T^2) is a function of T^2 over [lo, hi]
        T2 = Iv(lo, hi).square()
        cos_lo, cos_hi = _down(1 / _up(np.sqrt(_up(T2.hi + 1)))), _up(1 / _down(np.sqrt(_down(T2.lo + 1))))
        C_lo, C_hi = _sum4_ends(*_scaled(_stack([cos_lo, sin_lo], -1), _stack([cos_hi, sin_hi], -1),
                                         A[:, :, None]))
        return norm_upper(Iv(C_lo[:, 0], C_hi[:, 0]), Iv(C_lo[:, 1], C_hi[:, 1]))

    def farkas(self, lo, hi, Sa, Sb) -> tuple[Iv, Iv]:
        """Enclosures of the two sides of step 3b's test ``16 S^2 E > sum_i (s_i^2 + s_i)
        prod_{j != i} q_ij / G_i``, for tangents ``T_i`` anywhere in ``[lo_i, hi_i]`` and slopes
        ``S`` in ``[Sa, Sb]``.

        Every factor is a function of one ``T_i`` with its monotonicity used (``1 + t`` increases
        with ``T``, ``1 - t`` decreases, ``s = sqrt(1 + T^2)`` is a function of ``T^2``), and
        ``1 + t`` is computed without cancellation on both signs of ``T``
        (:func:`_one_plus_t_end`).  Both sides increase in every factor, all nonnegative, so
        each end is the formula at the factors' matching ends (:meth:`_sides`).
        """
        T2 = Iv(lo, hi).square()
        pm_lo, pm_hi = self._one_minus_plus(lo, hi, _down, _up), self._one_minus_plus(lo, hi, _up, _down)
        return (Iv(self._lhs(pm_lo, Sa, _down), self._lhs(pm_hi, Sb, _up)),
                Iv(self._rhs(pm_lo, T2.lo, _down), self._rhs(pm_hi, T2.hi, _up)))

    @staticmethod
    def _one_minus_plus(lo, hi, rnd, opp) -> np.ndarray:
        """The lower (``rnd = _down``) or upper ends of ``1 + t_i`` and ``1 - t_i``, stacked on a
        first axis: ``1 + t`` increases with ``T`` (its lower end at ``lo``) and ``1 - t =
        (1 + t)(-T)`` decreases (its lower end at ``-hi``).  Both are positive (``|t| < 1``),
        so a lower end is raised to ``0`` if it fell below (never, for finite tangents): the
        enclosure holds, and the products of :func:`_prod_end` need nonnegative ends."""
        ends = _one_plus_t_end(_stack([lo, -hi], 0) if rnd is _down else _stack([hi, -lo], 0), rnd, opp)
        return np.maximum(ends, 0.0) if rnd is _down else ends

    def _lhs(self, pm, S, rnd) -> np.ndarray:
        """One end of ``16 S^2 E``, ``E = (prod (1+t_i) + prod (1-t_i))/2``, from the matching
        ends ``pm`` of :meth:`_one_minus_plus` and of ``S > 0`` (the floats of :class:`Iv`:
        ``S^2`` is ``|S|^2``, every factor is nonnegative)."""
        P = _prod_end(pm, 4, rnd)                      # (2, nb): the two products
        E = rnd(rnd(P[0] + P[1]) * 0.5)
        return rnd(rnd(np.maximum(rnd(S * S), 0.0) * 16) * E)

    def _rhs(self, pm, T2, rnd) -> np.ndarray:
        """One end of ``sum_i (1 + T_i^2 + s_i) prod_{j != i} q_ij / G_i`` from the matching ends
        of :meth:`_one_minus_plus` and of ``T^2`` (every term nonnegative and increasing in
        each of them; the floats of :class:`Iv`, summed left to right)."""
        u = rnd(1 + T2)                                # 1 + T^2
        s = rnd(np.sqrt(u))                            # s = sqrt(1 + T^2) (u >= 1 - 2^-51)
        pq = rnd(pm[:, :, _OTHERS[0]] * pm[:, :, _OTHERS[1]])   # (2, nb, 4, 3)
        q = rnd(pq[0] + pq[1])                         # q_ij for the three j != i of every i
        terms = rnd(rnd(rnd(u + s) * _prod_end(q, 3, rnd)) * (self.inv_gaps.lo if rnd is _down
                                                              else self.inv_gaps.hi))
        return rnd(rnd(rnd(terms[:, 0] + terms[:, 1]) + terms[:, 2]) + terms[:, 3])

    def infeasible(self, Sa, Sb, ca, cb, tangents=None) -> np.ndarray:
        """Step 3b: the boxes on which the four constraints are surely inconsistent
        (``tangents``: :meth:`_tangent_range` of the boxes, if already computed): the lower end
        of the left side of :meth:`farkas` above the upper end of its right side."""
        if tangents is None:
            tangents = self._tangent_range(Sa, Sb, ca, cb)
        lo, hi = tangents
        with np.errstate(invalid="ignore", over="ignore"):
            T2_hi = _up(np.square(np.maximum(-lo, hi)))  # the upper end of Iv(lo, hi).square()
            return (self._lhs(self._one_minus_plus(lo, hi, _down, _up), Sa, _down)
                    > self._rhs(self._one_minus_plus(lo, hi, _up, _down), T2_hi, _up))

    def bound(self, Sa, Sb, ca, cb, half: float, Mp: float, foot: float | None = None):
        """Step 3 on every box (the better of the two models), ``inf`` where (c) excludes it,
        where step 3b does, or (with ``foot``) where step 7 does.

        Also returns the float estimate of the relaxed problem at each centre (a stopping
        rule only, never part of the bound).
        """
        Sm, cm = 0.5 * (Sa + Sb), 0.5 * (ca + cb)
        # (c): all tangents exceed M' (the lower end of Iv(ca) - Iv(Sb) * half)
        excluded = _down(ca - _up(Sb * half)) > Mp
        if foot is not None:  # step 7: every shape of the box has its foot after -foot
            excluded |= (Iv(cb) - Iv(Sa) * (Iv(self.L / 2) + foot)).hi < 0
        rest = np.flatnonzero(~excluded)
        # the tangents' ranges, elementwise per box: computed once, for step 3b and step 3
        tangents = self._tangent_range(*(x[rest] for x in (Sa, Sb, ca, cb)))
        feasible = ~self.infeasible(*(x[rest] for x in (Sa, Sb, ca, cb)), tangents)
        rest = rest[feasible]
        v, point = np.full(len(Sa), np.inf), np.full(len(Sa), np.inf)
        if len(rest):
            Sa, Sb, ca, cb, Sm, cm = (x[rest] for x in (Sa, Sb, ca, cb, Sm, cm))
            tangents = tuple(t[feasible] for t in tangents)
            alpha_t, alpha_i, p = self.choose(Sa, Sb, ca, cb, Sm, cm, tangents)
            # :meth:`taylor` and :meth:`interval`, their exact multipliers and N side by side
            nr = len(rest)
            A = _exact_alpha(np.concatenate([alpha_t, alpha_i]))
            w = np.concatenate([self._taylor_norm(A[:nr], Sa, Sb, ca, cb, Sm, cm),
                                self._interval_norm(A[nr:], tangents)])
            b = _ratio_lower(self._N_lo(A), w)
            v[rest] = np.maximum(b[:nr], b[nr:])
            if foot is not None:  # the centre's foot (a float test)
                p = np.where(cm < Sm * (self.L / 2 + foot), np.inf, p)
            point[rest] = p
        return v, point


#: a round of the branch and bound evaluates at least this many boxes when it can (fewer,
#: larger rounds: a round costs a fixed overhead besides its boxes)
_MIN_ROUND = 1024
#: the first partition of the domain has FIRST x FIRST boxes (:func:`_first_boxes`)
FIRST = 8
#: from this L on, step 5(a) keeps the strip of slopes the pair (0, L) alone settles
#: within rtol (below it the strip costs more boxes than it saves: measured)
_STRIP_FROM = 4096


#: the relative tolerance of :func:`arc_lower` (and of its :func:`ceiling`) unless one is given
RTOL = 1e-4


def ceiling(L: int, R_target: float, rtol: float = RTOL) -> float:
    """The largest value :func:`arc_lower` returns at ``L``: ``R_target``, and from
    ``_STRIP_FROM`` on the level ``R_target/(1 + rtol)`` of the strip of step 5(a)."""
    return R_target / (1 + rtol) if L >= _STRIP_FROM else R_target


def _split(Sa, Sb, ca, cb, L: int):
    """Halve every box along the side with the larger change of ``T`` (None if one cannot be).

    ``S`` is cut at the geometric mean while the box spans more than a factor 2, else at the
    midpoint; ``c`` at the midpoint.
    """
    by_S = (Sb - Sa) * (L / 2) >= cb - ca
    Sm = np.where(Sb > 2 * Sa, np.sqrt(Sa * Sb), 0.5 * (Sa + Sb))
    cm = 0.5 * (ca + cb)
    if not np.all(np.where(by_S, (Sa < Sm) & (Sm < Sb), (ca < cm) & (cm < cb))):
        return None
    cut = np.where(by_S, Sm, cm)
    return [np.concatenate([Sa, np.where(by_S, cut, Sa)]),
            np.concatenate([np.where(by_S, cut, Sb), Sb]),
            np.concatenate([ca, np.where(by_S, ca, cut)]),
            np.concatenate([np.where(by_S, cb, cut), cb])]


def _first_boxes(S_min: float, S_max: float, c_max: float, L: int, k: int = FIRST):
    """The domain ``[S_min, S_max] x [0, c_max]`` of step 5 cut into ``k x k`` boxes: geometric
    in ``S``, and in ``c`` geometric from the scale ``S_min L/2`` of the tangents' spread (a first
    cell ``[0, S_min L/2]``).  The edges run from end to end, so the boxes cover the domain."""
    Se = np.geomspace(S_min, S_max, k + 1)
    Se[0], Se[-1] = S_min, S_max
    c0 = S_min * L / 2
    ce = np.concatenate([[0.0], np.geomspace(c0, c_max, k)]) if 0 < c0 < c_max else np.array([0.0, c_max])
    ce[-1] = c_max
    Se, ce = np.unique(Se), np.unique(ce)
    Sa, ca = np.meshgrid(Se[:-1], ce[:-1], indexing="ij")
    Sb, cb = np.meshgrid(Se[1:], ce[1:], indexing="ij")
    return [x.ravel() for x in (Sa, Sb, ca, cb)]


def arc_lower(L: int, R_target: float, rtol: float = RTOL, max_boxes: int = 1_000_000,
              foot: float | None = None, counts=None) -> float:
    """A float ``<= R*(L)``; equal to ``min(R_target, bound)`` (``R_target`` = ``R_sym`` is tight).

    With ``foot = F >= 0`` the bound is on ``R*_F(L)``, the same infimum over the shapes whose
    foot lies at ``n0 <= -F`` only (the arcs linear attention reaches after RMSNorm,
    :func:`constructions.laws.foot_reach`): steps 1-3, 5 and 6 below hold verbatim on that
    subset, step 4 is not needed and step 7 discards the rest.  ``counts`` replaces the four
    counts of step 1 by others ``n_1 < n_2 < n_3 < n_4`` of ``0..L`` (those that bind at the
    restricted optimum; only with ``foot``, since step 4 needs counts closed under
    ``n -> L - n``; any ``L >= 3``, where four distinct counts exist): step 5 then reads with ``n_1, n_4`` for ``0, L`` and, for (b), ``T(n) =
    (n - n0) S >= n S``: if ``S > S_max = M/n_2`` the counts ``n_2, n_3, n_4`` all have
    ``T > M`` and the pair ``n_2, n_4`` (``n_4 - n_2 >= 2``: the counts are distinct) gives
    ``|u| > (n_4 - n_2 - 1) M >= M > R_t``; in (c), ``T(n_1) = c - S (L/2 - n_1)`` with
    ``n_1 <= L/2`` (required) decreases in ``S``, as ``T(0)`` does.

    *Proof.*  Write ``R_t = R_target``.

    1. **Relaxation.**  Keep only the counts ``P = {0, m, L-m, L}``, ``m = ceil(L/4)``
       (``L >= 6``, so ``0 < m < L-m < L`` and the smallest gap ``g = min(m, L-2m) >= 2``).
       Fewer constraints give a smaller infimum, so a lower bound for the relaxed problem is
       one for ``R*(L)``.  (For ``L <= 5`` the pair ``0, L`` alone gives ``|u| |v_L - v_0| >
       L - 1`` and ``|v_L - v_0| <= 2``, so ``R* >= (L-1)/2``.  With a foot ``n0 <= -F``
       (step 7) the chord is shorter: with ``s = -n0 >= F`` the angle ``Delta = theta_L -
       theta_0`` has ``tan Delta = L lam/(lam^2 + s(s+L)) <= L/(2 sqrt(s(s+L))) <=
       L/(2 sqrt(F(F+L)))`` (AM-GM; ``0 < Delta < pi/2``), so ``R*_F >= (L-1)/(2 sin(Delta_F/2))``
       with ``Delta_F = atan(L/(2 sqrt(F(F+L))))``.  At ``L = 2`` this is ``R*_F`` itself: the
       read-out along ``v_2 - v_0`` of norm just above ``1/|v_2 - v_0|`` counts, as ``v_1``
       projects between ``v_0`` and ``v_2``, and the bound is met at ``s = F``,
       ``lam = sqrt(F(F+2))``.)

    2. **Weak duality.**  For ``alpha`` in ``R^4`` with ``sum alpha_i = 0``, multiply the
       constraint ``n_i - 1/2 < C + <u, v_i> < n_i + 1/2`` by ``alpha_i`` and add: ``C``
       cancels and ``<u, w> > N(alpha) := sum alpha_i n_i - (1/2) sum |alpha_i|`` with
       ``w = sum alpha_i v_i``.  By Cauchy-Schwarz, if ``N(alpha) > 0`` then
       ``|u| > N(alpha)/|w|``.

    3. **Shape coordinates.**  With ``S = 1/lam > 0`` and ``c = (L/2 - n0)/lam``,
       ``tan theta_n = T(n) = c + S (n - L/2)`` and ``v_n = g(T(n))``, ``g(T) = (1, T)/sqrt(1+T^2)``
       (algebraic: no angle is ever computed).  ``T(n)`` increases in ``c``, and in ``S`` when
       ``n >= L/2`` (decreases when ``n < L/2``).  So on a box ``[Sa, Sb] x [ca, cb]`` every
       ``T_i`` lies in ``[T_lo, T_hi]``, the values at the matching corners; there
       ``sin theta = T/sqrt(1+T^2)`` increases with ``T`` and ``cos theta = 1/sqrt(1+T^2)`` is a
       function of ``T^2``, which give the range of each ``v_i``, then ``|w|`` (an upper end) and
       ``N(alpha)/|w|`` (a lower end) bound ``|u|`` from below for every shape in the box and
       every feasible ``C, u``.  Second, a Taylor model: ``T_i = T_i(centre) + dc + dS d_i``
       exactly, and with ``r = (1+T^2)^{-1/2}``, ``g' = (-T r^3, r^3)``,
       ``g'' = ((2T^2 - 1) r^5, -3T r^5)`` and ``|g'''(T)| = 3 sqrt(4T^4+1)/(1+T^2)^3``
       (decreasing in ``|T|``: with ``x = T^2`` the derivative of its log has the sign of
       ``-8x^2 + 4x - 3 < 0``), Taylor's theorem gives
       ``w = w_c + a dc + b dS + q_cc dc^2 + q_cS dc dS + q_SS dS^2 + E`` with, at the centre,
       ``a = sum alpha_i g'(T_i)``, ``b = sum alpha_i d_i g'(T_i)``,
       ``q_cc = sum alpha_i g''(T_i)/2``, ``q_cS = sum alpha_i d_i g''(T_i)``,
       ``q_SS = sum alpha_i d_i^2 g''(T_i)/2``, and ``|E| <= sum |alpha_i| mT_i^3 sup|g'''|/6``
       (``mT_i = max |dc + dS d_i|`` over the corners, ``sup`` at ``|t| >= |T_i| - mT_i``).
       ``|w_c + a dc + b dS|`` is convex in ``(dc, dS)``, so its maximum over the box is at a
       corner; the quadratic terms are bounded by ``|q_cc| max dc^2 + |q_cS| max |dc dS| +
       |q_SS| max dS^2``.  Keeping the second-order terms exact (they nearly cancel when
       ``alpha`` is close to the null vector ``z`` of :func:`_candidates`, which certifies
       most of the domain) is what lets large boxes be discarded.
       ``alpha`` is chosen in floats among the candidates of :func:`_candidates` by a float
       estimate of either bound; any choice is valid, and ``sum alpha = 0`` is made exact by
       :func:`_exact_alpha`.  Every quantity is evaluated in outward-rounded interval
       arithmetic (:mod:`verify.intervals`), so each computed bound is below the exact one.
       A child box inherits its parent's bound (it is a subset).

    3b. **Infeasible boxes** (:meth:`_Boxes.infeasible`).  Let ``M`` be the ``4 x 3`` matrix of
       rows ``(1, v_i)`` and ``z_i = (-1)^i D_i`` with ``D_i`` the determinant of ``M`` without
       row ``i``: by Laplace expansion of the ``4 x 4`` matrices ``[M | M_col]`` (two equal
       columns) ``sum_i z_i M_i = 0``, so ``sum z = 0`` and ``w(z) = 0``; step 2 with ``alpha =
       +-z`` then reads ``0 > N(+-z)``, and a shape with ``|z.n| > |z|_1/2`` (``N(z) > 0`` or
       ``N(-z) > 0``) admits no ``(C, u)`` at all.  Both sides are closed forms without
       cancellation in the half-angle tangents ``t_i = tan(theta_i/2)`` in ``(-1, 1)``
       (increasing in ``i``): ``cos theta = (1-t^2)/(1+t^2)``, ``sin theta = 2t/(1+t^2)``,
       ``T = 2t/(1-t^2)``.  Laplace expansion along the last column gives ``|z.n| = |Delta|``,
       ``Delta`` the determinant of the rows ``(1, cos theta_i, sin theta_i, n_i)``; with
       ``n_i = n0 + T_i/S`` (subtract ``n0`` times the first column) and each row multiplied by
       ``(1+t_i^2)(1-t_i^2) > 0`` the rows become ``(1-t^4, (1-t^2)^2, 2t(1-t^2), 2t(1+t^2))``, and
       by Cauchy-Binet with the ``4 x 5`` Vandermonde rows ``(1, t_i, .., t_i^4)`` (whose minors
       without the power ``k`` are ``V e_{4-k}``, ``V = prod_{i<j} (t_j - t_i) > 0``, ``e`` the
       elementary symmetric functions) and the coefficient minors ``16, 0, 16, 0, 16``:
       ``Delta = 16 V (1 + e_2 + e_4) / (S prod (1+t_i^2)(1-t_i^2))``, where
       ``1 + e_2 + e_4 = E = (prod (1+t_i) + prod (1-t_i))/2 > 0``.  Likewise (rows
       ``(1+t^2, 1-t^2, 2t)``, determinant ``4`` times the Vandermonde) ``D_i = 4 V_i /
       prod_{j != i} (1+t_j^2) > 0``, ``V_i`` the Vandermonde of the other three, and
       ``V_i/V = 1/prod_{j != i} |t_i - t_j|``.  From ``T_j - T_i = 2 (t_j - t_i)(1 + t_i t_j) /
       ((1-t_i^2)(1-t_j^2))`` and ``T_j - T_i = S (n_j - n_i)``, with ``p = 1 + t``,
       ``m = 1 - t``, ``q_ij = p_i p_j + m_i m_j = 2(1 + t_i t_j)``:
       ``|t_i - t_j| = S |n_i - n_j| p_i m_i p_j m_j / q_ij``; and ``(1 + t^2)/(1 - t^2)^2 =
       (s^2 + s)/2`` with ``s = sqrt(1 + T^2)``.  Altogether the products of all ``p_j m_j``
       cancel and ``|z.n| / (|z|_1/2) = 16 S^2 E / sum_i (s_i^2 + s_i) prod_{j != i} q_ij / G_i``,
       ``G_i = prod_{j != i} |n_i - n_j|``.  Every term is positive, ``p = 1 + T/(1 + s)`` is
       computed as ``(1 + 1/(s - T))/(1 + s)`` for ``T < 0`` (:func:`_one_plus_t_end`) and
       ``m(T) = p(-T)``: no difference of nearby values is formed.  On a box, ``t`` increases
       with ``T`` (so ``p_i`` lies between its values at the ends of the range of ``T_i`` of
       step 3, and ``m_i`` too), ``s_i`` is a function of ``T_i^2`` and ``S`` lies in
       ``[Sa, Sb]``, so interval evaluation encloses both sides for every shape in the box
       (:meth:`_Boxes.farkas`).  A box where the left side is surely larger holds only shapes
       that cannot count on ``P``, and is discarded.  (Which boxes are tested never affects
       validity; the test needs no centre and no derivative, so deep inside the infeasible
       region, where the ratio is far above ``1``, whole large boxes go at once.)

    4. **Symmetry.**  ``(lam, n0, C, (u1, u2))`` is feasible for ``P`` iff
       ``(lam, L - n0, L - C, (-u1, u2))`` is: the new angles are ``theta'_n = -theta_{L-n}``,
       so ``C' + <u', v'_n> - n = -(C + <u, v_{L-n}> - (L-n))``, and ``P`` is closed under
       ``n -> L-n``.  The map sends ``c`` to ``-c`` and keeps ``|u|``; so ``c >= 0`` suffices.

    5. **Compact domain.**  With ``M = R_t + 1`` and ``M' = R_t/(L-1) + 1``:

       (a) ``S < S_min = (L-1)/(L R_s)``: ``atan`` is 1-Lipschitz, so
       ``|theta_L - theta_0| <= S L`` and ``|v_L - v_0| <= S L``; the pair ``0, L`` gives
       ``|u| > (L-1)/(S L) > R_s``.  Here ``R_s = R_t`` for ``L < 4096``; from ``L = 4096`` on
       ``R_s`` is the float ``R_t/(1 + rtol)``, so the strip of slopes within ``rtol`` of
       ``S_min``, which the pair alone settles to ``rtol``, needs no boxes, and the returned
       value is at most ``R_s`` (step 6).  ``S_min`` is rounded down, so
       ``(L-1)/(L S_min) >= R_s`` exactly.

       (b) ``S > S_max = 2M/g``: the set ``{n real: |T(n)| <= M}`` is an interval of length
       ``2M/S < g``, so it holds at most one count of ``P``; of the other three, two have
       ``|T| > M`` with the same sign, so both angles lie in an arc of length
       ``atan(1/M) < 1/M`` (``(atan M, pi/2)`` or its negative) and ``|v_i - v_j| < 1/M``; the
       pair gives ``|u| > (|n_i - n_j| - 1) M >= (g - 1) M >= M > R_t``.

       (c) ``c - S L/2 > M'``, i.e. ``T(0) > M'``: all ``T(n) > M'`` (``T`` increases), so
       as in (b) ``|v_L - v_0| < 1/M'`` and ``|u| > (L-1) M' > R_t``.  Hence with ``c >= 0``
       only ``0 <= c <= M' + S_max L/2`` remains, and a box with ``ca - Sb L/2 > M'`` (a
       certain interval comparison) is discarded.

       The endpoints are rounded outward (``S_min`` down, ``S_max``, ``M'`` and the ``c``
       range up), so the boxes cover the remaining domain.

    6. **Branch and bound.**  The domain of step 5 is first cut into ``8 x 8`` boxes
       (:func:`_first_boxes`; geometric in ``S`` and ``c``).  Boxes whose bound is ``>= R_t`` are discarded (no shape in them
       does better than ``R_t``).  In rounds, every box with a bound below ``R_t/(1 + a)``
       (the smallest first, when the budget runs out) is split by :func:`_split` (a few times
       over while the boxes are few) until the smallest bound is ``>= R_t/(1 + a)`` (or
       within ``a`` of the smallest float value of the relaxed problem met at a box centre,
       when that is below ``R_t``: no bound can exceed it), or ``max_boxes`` boxes were
       evaluated; ``a = rtol`` from ``L = 4096`` on (where the strip of step 5(a) caps the
       result at ``R_s`` anyway) and ``rtol/2`` below.  Every shape lies in a
       remaining box, a discarded box, or an excluded region, so
       ``R*(L) >= min(smallest remaining bound, R_s, R_t)``, which is returned.

    7. **A restricted foot** (``foot = F``).  ``n0 <= -F`` reads ``T(0) = -n0 S >= F S``, i.e.
       ``c >= S (L/2 + F)``; such shapes have ``c > 0``, so the domain of step 5 holds them all
       without the symmetry of step 4 (which does not preserve the restriction).  A box with
       ``cb - Sa (L/2 + F) < 0`` (an outward-rounded comparison) contains no such shape, since
       ``c - S (L/2 + F)`` increases in ``c`` and decreases in ``S``, and is discarded; every
       other box keeps the bound of step 3 over the whole box, which is below the bound over
       its restricted part.  So the returned value bounds ``R*_F(L)`` from below.  (For
       ``L <= 5`` the bound of step 1 holds for every shape, restricted or not.)
    """
    if foot is not None and not foot >= 0:
        raise ValueError(f"foot must be a number >= 0, got {foot!r}")
    if L <= 5 and (counts is None or L < 3):
        if foot is None or L < 2:
            return min(max(0.0, (L - 1) / 2), R_target)
        with flint.ctx.workprec(PREC):  # the pair 0, L with the foot (step 1)
            F = flint.arb(foot)
            delta = (flint.arb(L) / (2 * (F * (F + L)).sqrt())).atan() if foot > 0 else flint.arb.pi() / 2
            return min(arb_floor((L - 1) / (2 * (delta / 2).sin())), R_target)
    if counts is not None:
        counts = sorted(int(k) for k in counts)
        if (foot is None or len(set(counts)) != 4 or counts[0] < 0 or 2 * counts[0] > L
                or counts[-1] > L):
            raise ValueError(f"counts must be four distinct counts of 0..L, the first at most L/2, "
                             f"and need a foot; got {counts!r}")
    check_float_mode()
    boxes = _Boxes(L, counts)
    first, span = int(boxes.ns[0]), int(boxes.ns[3] - boxes.ns[0])
    with flint.ctx.workprec(PREC):
        m = -(-L // 4)
        g = min(m, L - 2 * m)
        Rt = flint.arb(R_target)
        Mp = arb_ceil(Rt / (span - 1) + 1)
        # a float: the level of step 5(a) (R_t itself below _STRIP_FROM)
        strip = ceiling(L, R_target, rtol)
        S_min = arb_floor(flint.arb(span - 1) / (span * flint.arb(strip)))
        S_max = arb_ceil(2 * (Rt + 1) / g if counts is None else (Rt + 1) / int(boxes.ns[1]))
        c_max = arb_ceil(flint.arb(Mp) + flint.arb(S_max) * (flint.arb(L) / 2 - first))
    # the relaxed problem's value at any evaluated shape caps what can be proven: once one is
    # below the target, aim within rtol of the smallest such value instead (a stopping rule)
    reach = R_target
    # where no strip caps the result, aim within rtol/2 (step 6)
    aim = rtol if L >= _STRIP_FROM else rtol / 2

    def bound(Sa, Sb, ca, cb):
        nonlocal reach
        v, point = boxes.bound(Sa, Sb, ca, cb, L / 2 - first, Mp, foot)
        reach = min(reach, float(point.min()))
        return v

    live = _first_boxes(S_min, S_max, c_max, L)
    v = bound(*live)
    evaluated = len(v)
    keep = v < R_target
    live, v = [x[keep] for x in live], v[keep]
    while len(v) and evaluated < max_boxes:
        open_ = np.flatnonzero(v < reach / (1 + aim))
        if not len(open_):
            break
        batch = max(1, min(len(open_), (max_boxes - evaluated + 1) // 2))
        pick = open_[np.argsort(v[open_], kind="stable")[:batch]]
        kids, vk = [x[pick] for x in live], v[pick]
        # few boxes: split them several times before evaluating (fewer, larger rounds)
        for _ in range(4):
            halves = _split(*kids, L)
            if halves is None:
                break
            kids, vk = halves, np.tile(vk, 2)
            if len(vk) >= _MIN_ROUND:
                break
        if len(vk) == len(pick):
            break  # boxes too small to split in floats: their bounds are final
        vk = np.maximum(bound(*kids), vk)
        evaluated += len(vk)
        rest = np.ones(len(v), dtype=bool)
        rest[pick] = False
        keep = vk < R_target
        live = [np.concatenate([x[rest], k[keep]]) for x, k in zip(live, kids)]
        v = np.concatenate([v[rest], vk[keep]])
    best = float(v.min()) if len(v) else R_target
    return min(best, strip, R_target)
