"""A proven lower bound on the arc amplitude ``R*(L)`` (:mod:`constructions.arc`).

For ``n = 0..L`` let ``theta_n = atan((n - n0)/lam)`` (``lam > 0``, ``n0`` real) and
``v_n = (cos theta_n, sin theta_n)``.  Then

    R*(L) = inf |u|  over  (lam, n0, C, u)  with  |C + <u, v_n> - n| < 1/2  for every n,

the smallest read-out amplitude with which the projective arc counts to ``L``.  The symmetric
construction (``n0 = L/2``) reaches ``R_sym(L)`` (:func:`constructions.closed_forms.arc_closed_form`);
:func:`arc_lower` proves ``R*(L) >= (1 - rtol') R_sym(L)`` by branch and bound over the shape
``(lam, n0)`` of the arc.  The proof is in its docstring.
"""

from __future__ import annotations

import heapq
import math

import flint
import numpy as np

from verify.backends import arb_ceil, arb_floor

PREC = 128


_SIGNS = [(a, b, c) for a in (-1, 1) for b in (-1, 1) for c in (-1, 1) if not a == b == c]
_TRIPLES = [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)]
_PAIRS = [(i, j) for i in range(4) for j in range(i + 1, 4)]
_MIX = (0.0625, 0.25, 1.0, 4.0, 16.0)


def _candidates(ns, thetas):
    """Multiplier vectors ``alpha`` (``sum alpha = 0``) among which the dual optimum lies.

    On a support of four points the ratio ``N(alpha)/|w(alpha)|`` is, within a sign cone,
    linear along the null direction ``z`` of ``alpha -> (sum alpha, w(alpha))``: it is maximal
    on the cone's boundary (three points or fewer), or unbounded (``N(z) > 0``: the four
    constraints are inconsistent, Farkas).  On three points ``i, j, k`` with fixed signs
    ``sigma`` write ``alpha = (x1, x2, -x1-x2)``: ``N = a.x`` with
    ``a = (n_i - n_k - (s_i - s_k)/2, n_j - n_k - (s_j - s_k)/2)`` and ``w = B x`` with
    ``B = [v_i - v_k, v_j - v_k]``; ``a.x/|Bx|`` is quasi-concave and maximal at
    ``x = (B^T B)^{-1} a``.  Returns the six pairs, these stationary points, and ``+-z``; the
    second value is the index of the best candidate by its point ratio.  Choosing among them
    never affects validity, only tightness.
    """
    vs = [(math.cos(t), math.sin(t)) for t in thetas]
    cands = []
    for i, j in _PAIRS:
        alpha = [0.0] * 4
        alpha[i], alpha[j] = -1.0, 1.0
        cands.append(alpha)
    for i, j, k in _TRIPLES:
        b1 = (vs[i][0] - vs[k][0], vs[i][1] - vs[k][1])
        b2 = (vs[j][0] - vs[k][0], vs[j][1] - vs[k][1])
        g11 = b1[0] * b1[0] + b1[1] * b1[1]
        g12 = b1[0] * b2[0] + b1[1] * b2[1]
        g22 = b2[0] * b2[0] + b2[1] * b2[1]
        det = g11 * g22 - g12 * g12
        if not det > 0:
            continue
        for si, sj, sk in _SIGNS:
            a1 = ns[i] - ns[k] - 0.5 * (si - sk)
            a2 = ns[j] - ns[k] - 0.5 * (sj - sk)
            x1 = (g22 * a1 - g12 * a2) / det
            x2 = (g11 * a2 - g12 * a1) / det
            scale = max(abs(x1), abs(x2), abs(x1 + x2))
            if not (scale > 0 and math.isfinite(scale)):
                continue
            alpha = [0.0] * 4
            alpha[i], alpha[j], alpha[k] = x1 / scale, x2 / scale, -(x1 + x2) / scale
            cands.append(alpha)
    rows = [(1.0, v[0], v[1]) for v in vs]
    z = []
    for i in range(4):
        (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = [rows[k] for k in range(4) if k != i]
        z.append((-1) ** i * (a0 * (b1 * c2 - b2 * c1) - a1 * (b0 * c2 - b2 * c0)
                              + a2 * (b0 * c1 - b1 * c0)))
    scale = max(abs(t) for t in z)
    zs = []
    if scale > 0 and math.isfinite(scale):
        zs = [[t / scale for t in z], [-t / scale for t in z]]
    A = np.array(cands)
    V = np.array(vs)
    N = A @ np.asarray(ns, dtype=float) - 0.5 * np.abs(A).sum(axis=1)
    w = np.hypot(*(A @ V).T)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(N > 0, np.where(w > 0, N / w, np.inf), -np.inf)
    return cands, int(np.argmax(ratios)), zs


def _norm_upper(x: flint.arb, y: flint.arb) -> flint.arb:
    """An exact float ball ``>= |(x, y)|`` for every point of the balls."""
    ux, uy = flint.arb(arb_ceil(abs(x))), flint.arb(arb_ceil(abs(y)))
    return flint.arb(arb_ceil((ux * ux + uy * uy).sqrt()))


def _zero_sum(alpha) -> list:
    """Balls for ``alpha`` whose largest entry is replaced by minus the sum of the others.

    The duality step needs ``sum alpha_i = 0`` exactly; the replaced entry is a ball that
    contains the exact value, so every later ball contains the values for that exact vector.
    Entries that are exactly zero stay ``None`` (skipped).
    """
    k = max(range(4), key=lambda i: abs(alpha[i]))
    out = [flint.arb(a) if a != 0 else None for a in alpha]
    out[k] = -sum((flint.arb(a) for i, a in enumerate(alpha) if i != k), flint.arb(0))
    return out


def arc_lower(L: int, R_target: float, rtol: float = 2e-3, max_boxes: int = 20000) -> float:
    """A float ``<= R*(L)``; equal to ``min(R_target, bound)`` (``R_target`` = ``R_sym`` is tight).

    *Proof.*  Write ``R_t = R_target``.

    1. **Relaxation.**  Keep only the counts ``P = {0, m, L-m, L}``, ``m = ceil(L/4)``
       (``L >= 6``, so ``0 < m < L-m < L`` and the smallest gap ``g = min(m, L-2m) >= 2``).
       Fewer constraints give a smaller infimum, so a lower bound for the relaxed problem is
       one for ``R*(L)``.  (For ``L <= 5`` the pair ``0, L`` alone gives ``|u| |v_L - v_0| >
       L - 1`` and ``|v_L - v_0| <= 2``, so ``R* >= (L-1)/2``.)

    2. **Weak duality.**  For ``alpha`` in ``R^4`` with ``sum alpha_i = 0``, multiply the
       constraint ``n_i - 1/2 < C + <u, v_i> < n_i + 1/2`` by ``alpha_i`` and add: ``C``
       cancels and ``<u, w> > N(alpha) := sum alpha_i n_i - (1/2) sum |alpha_i|`` with
       ``w = sum alpha_i v_i``.  By Cauchy-Schwarz, if ``N(alpha) > 0`` then
       ``|u| > N(alpha)/|w|``.

    3. **Shape coordinates.**  With ``S = 1/lam > 0`` and ``c = (L/2 - n0)/lam``,
       ``tan theta_n = T(n) = c + S (n - L/2)``.  ``T(n)`` increases in ``c``, and in ``S`` when
       ``n >= L/2`` (decreases when ``n < L/2``); ``atan`` increases.  So on a box
       ``[Sa, Sb] x [ca, cb]`` every ``theta_i`` lies in ``[atan T_lo, atan T_hi]`` with
       ``T_lo, T_hi`` the values at the matching corners; evaluated in ball arithmetic this
       interval, then ``cos``, ``sin``, ``|w|`` (an upper end) and ``N(alpha)/|w|`` (a lower
       end) bound ``|u|`` from below for every shape in the box and every feasible ``C, u``.
       Second, a Taylor model: ``v_i = g(T_i)`` with ``g(T) = (1, T)/sqrt(1+T^2)``,
       ``g'(T) = (-T, 1)/(1+T^2)^{3/2}``, ``|g''(T)| = sqrt(4T^2+1)/(1+T^2)^2`` (decreasing in
       ``|T|``, at most 1), and ``T_i = T_i(centre) + dc + dS d_i`` exactly; so
       ``w = w_c + a dc + b dS + E`` with ``a = sum alpha_i g'(T_i)``,
       ``b = sum alpha_i d_i g'(T_i)`` at the centre and ``|E| <= sum |alpha_i| mT_i^2
       sup|g''|/2`` (``mT_i = max |dc + dS d_i|`` over the corners, ``sup`` at
       ``|t| >= |T_i| - mT_i``); ``|w_c + a dc + b dS|`` is convex in ``(dc, dS)``, so its
       maximum over the box is at a corner.  ``alpha`` is chosen in floats among the
       candidates of :func:`_candidates` (and mixtures with the Farkas vector ``z``) by a float
       estimate of either bound; any choice is valid, and ``sum alpha = 0`` is made exact by
       :func:`_zero_sum`.  A child box inherits its parent's bound (it is a subset).

    4. **Symmetry.**  ``(lam, n0, C, (u1, u2))`` is feasible for ``P`` iff
       ``(lam, L - n0, L - C, (-u1, u2))`` is: the new angles are ``theta'_n = -theta_{L-n}``,
       so ``C' + <u', v'_n> - n = -(C + <u, v_{L-n}> - (L-n))``, and ``P`` is closed under
       ``n -> L-n``.  The map sends ``c`` to ``-c`` and keeps ``|u|``; so ``c >= 0`` suffices.

    5. **Compact domain.**  With ``M = R_t + 1`` and ``M' = R_t/(L-1) + 1``:

       (a) ``S < S_min = (L-1)/(L R_t)``: ``atan`` is 1-Lipschitz, so
       ``|theta_L - theta_0| <= S L`` and ``|v_L - v_0| <= S L``; the pair ``0, L`` gives
       ``|u| > (L-1)/(S L) > R_t``.

       (b) ``S > S_max = 2M/g``: the set ``{n real: |T(n)| <= M}`` is an interval of length
       ``2M/S < g``, so it holds at most one count of ``P``; of the other three, two have
       ``|T| > M`` with the same sign, so both angles lie in an arc of length
       ``atan(1/M) < 1/M`` (``(atan M, pi/2)`` or its negative) and ``|v_i - v_j| < 1/M``; the
       pair gives ``|u| > (|n_i - n_j| - 1) M >= (g - 1) M >= M > R_t``.

       (c) ``c - S L/2 > M'``, i.e. ``T(0) > M'``: all ``T(n) > M'`` (``T`` increases), so
       as in (b) ``|v_L - v_0| < 1/M'`` and ``|u| > (L-1) M' > R_t``.  Hence with ``c >= 0``
       only ``0 <= c <= M' + S_max L/2`` remains, and a box with ``ca - Sb L/2 > M'`` (a
       certain ball comparison) is discarded.

       The endpoints are rounded outward (``S_min`` down, ``S_max`` and the ``c`` range up), so
       the boxes cover the remaining domain.

    6. **Branch and bound.**  Boxes whose bound is ``>= R_t`` are discarded (no shape in them
       does better than ``R_t``); the box with the smallest bound is split (along the side with
       the larger change of ``T``: ``(Sb - Sa) L/2`` against ``cb - ca``; ``S`` at the geometric
       mean) until the smallest bound is ``>= R_t/(1 + rtol)`` or ``max_boxes`` boxes were
       evaluated.  Every shape lies in a remaining box, a discarded box, or an excluded region,
       so ``R*(L) >= min(smallest remaining bound, R_t)``, which is returned.
    """
    if L <= 5:
        return max(0.0, (L - 1) / 2)
    old, flint.ctx.prec = flint.ctx.prec, PREC
    try:
        m = -(-L // 4)
        ns = (0, m, L - m, L)
        g = min(m, L - 2 * m)
        half = flint.arb(L) / 2
        ds = [flint.arb(n) - half for n in ns]
        ds_f = [n - L / 2 for n in ns]
        Rt = flint.arb(R_target)
        Mp = Rt / (L - 1) + 1
        S_min = arb_floor(flint.arb(L - 1) / (L * Rt))
        S_max = arb_ceil(2 * (Rt + 1) / g)
        c_max = arb_ceil(Mp + flint.arb(S_max) * half)
        stop = R_target / (1 + rtol)

        ns_np = np.array(ns, dtype=float)
        ds_np = np.array(ds_f)

        def choose(Sa, Sb, ca, cb, Sm, cm):
            """The candidate with the best float estimate of the Taylor bound below."""
            T = cm + Sm * ds_np
            cands, ib, zs = _candidates(ns, np.arctan(T).tolist())
            mix = [[a + t * b for a, b in zip(cands[ib], z)] for z in zs for t in _MIX]
            A = np.array(cands + zs + mix)
            s2 = 1 + T * T
            G = np.stack([1 / np.sqrt(s2), T / np.sqrt(s2)], 1)
            Gp = np.stack([-T, np.ones_like(T)], 1) / (s2 ** 1.5)[:, None]
            N = A @ ns_np - 0.5 * np.abs(A).sum(1)
            wc, a, b = A @ G, A @ Gp, A @ (ds_np[:, None] * Gp)
            wmax = np.zeros(len(A))
            mT = np.zeros(4)
            for dc in (ca - cm, cb - cm):
                for dS in (Sa - Sm, Sb - Sm):
                    wmax = np.maximum(wmax, np.hypot(*(wc + a * dc + b * dS).T))
                    mT = np.maximum(mT, np.abs(dc + dS * ds_np))
            score = np.where(N > 0, N / (wmax + np.abs(A) @ (mT * mT / 2)), -np.inf)
            k = int(np.argmax(score))
            # the interval model: angles in [atan T_lo, atan T_hi], |w| <= |w(mid)| + sum |a| r
            t_lo = np.arctan(np.where(ds_np >= 0, ca + Sa * ds_np, ca + Sb * ds_np))
            t_hi = np.arctan(np.where(ds_np >= 0, cb + Sb * ds_np, cb + Sa * ds_np))
            tm, rad = (t_lo + t_hi) / 2, (t_hi - t_lo) / 2
            wm = A @ np.stack([np.cos(tm), np.sin(tm)], 1)
            score_i = np.where(N > 0, N / (np.hypot(*wm.T) + np.abs(A) @ rad), -np.inf)
            ki = int(np.argmax(score_i))
            return [float(t) for t in A[k]], [float(t) for t in A[ki]], score[k], score_i[ki]

        def taylor(alpha, Sa, Sb, ca, cb, Sm, cm) -> float:
            """Step 3 by a second-order Taylor model in ``T_i`` around the centre."""
            dcs = (flint.arb(ca) - cm, flint.arb(cb) - cm)
            dSs = (flint.arb(Sa) - Sm, flint.arb(Sb) - Sm)
            N = flint.arb(0)
            wx = wy = ax = ay = bx = by = E = flint.arb(0)
            for A, n, d in zip(_zero_sum(alpha), ns, ds):
                if A is None:
                    continue
                N += A * n - abs(A) / 2
                T = flint.arb(cm) + flint.arb(Sm) * d
                s2 = 1 + T * T
                r = s2.rsqrt()
                wx += A * r
                wy += A * T * r
                p = r * r * r
                ax -= A * T * p
                ay += A * p
                bx -= A * d * T * p
                by += A * d * p
                mT = flint.arb(max(arb_ceil(abs(dc + dS * d)) for dc in dcs for dS in dSs))
                # |g''(t)| = sqrt(4t^2+1)/(1+t^2)^2 decreases in |t|; |t| >= |T| - mT here
                t0 = flint.arb(max(arb_floor(abs(T) - mT), 0.0))
                q = 1 + t0 * t0
                E += abs(A) * mT * mT * (4 * t0 * t0 + 1).sqrt() / (2 * q * q)
            if not N > 0:
                return 0.0
            wmax = max(arb_ceil(_norm_upper(wx + ax * dc + bx * dS, wy + ay * dc + by * dS))
                       for dc in dcs for dS in dSs)
            w_hi = flint.arb(arb_ceil(flint.arb(wmax) + E))
            return max(arb_floor(N / w_hi), 0.0) if w_hi > 0 else 0.0

        def interval(alpha, Sa, Sb, ca, cb) -> float:
            """Step 3 by interval evaluation of the angles."""
            wx = wy = N = flint.arb(0)
            for A, n, d in zip(_zero_sum(alpha), ns, ds):
                if A is None:
                    continue
                lo_S, hi_S = (Sa, Sb) if d >= 0 else (Sb, Sa)
                th = (flint.arb(ca) + flint.arb(lo_S) * d).atan().union(
                    (flint.arb(cb) + flint.arb(hi_S) * d).atan())
                wx += A * th.cos()
                wy += A * th.sin()
                N += A * n - abs(A) / 2
            w_hi = _norm_upper(wx, wy)
            if not (N > 0 and w_hi > 0):
                return 0.0
            return max(arb_floor(N / w_hi), 0.0)

        def bound(Sa: float, Sb: float, ca: float, cb: float) -> float:
            if flint.arb(ca) - flint.arb(Sb) * half > Mp:  # (c): all tangents exceed M'
                return math.inf
            Sm, cm = 0.5 * (Sa + Sb), 0.5 * (ca + cb)
            alpha_t, alpha_i, est_t, est_i = choose(Sa, Sb, ca, cb, Sm, cm)
            if est_t >= est_i:
                v = taylor(alpha_t, Sa, Sb, ca, cb, Sm, cm)
                return v if v >= R_target else max(v, interval(alpha_i, Sa, Sb, ca, cb))
            v = interval(alpha_i, Sa, Sb, ca, cb)
            return v if v >= R_target else max(v, taylor(alpha_t, Sa, Sb, ca, cb, Sm, cm))

        heap = [(bound(S_min, S_max, 0.0, c_max), S_min, S_max, 0.0, c_max)]
        boxes = 1
        while heap and boxes < max_boxes:
            v, Sa, Sb, ca, cb = heap[0]
            if v >= stop:
                break
            heapq.heappop(heap)
            if (Sb - Sa) * L / 2 >= cb - ca:
                Sm = math.sqrt(Sa * Sb) if Sb > 2 * Sa else 0.5 * (Sa + Sb)
                if not Sa < Sm < Sb:  # cannot split in floats: keep the box as it is
                    heapq.heappush(heap, (v, Sa, Sb, ca, cb))
                    break
                kids = ((Sa, Sm, ca, cb), (Sm, Sb, ca, cb))
            else:
                cm = 0.5 * (ca + cb)
                if not ca < cm < cb:
                    heapq.heappush(heap, (v, Sa, Sb, ca, cb))
                    break
                kids = ((Sa, Sb, ca, cm), (Sa, Sb, cm, cb))
            for box in kids:
                boxes += 1
                w = max(bound(*box), v)
                if w < R_target:
                    heapq.heappush(heap, (w,) + box)
        best = heap[0][0] if heap else R_target
        return min(best, R_target)
    finally:
        flint.ctx.prec = old
