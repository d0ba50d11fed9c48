"""The one-sided arc: what a linear read-out counts after post-norm when the foot of the
residual line is held before the counted range (linear attention with post-RMSNorm).

The residual line ``r(n) = P + n Q`` has its foot, the count ``n0`` at which ``|r(n)|`` is
least, at ``n0 = -F`` with ``F > sqrt(d)/B^2`` at budget ``B``
(:func:`constructions.laws.foot_distance`).  In the plane of ``P, Q`` let ``along = Q/|Q|`` and
``perp`` the unit vector along ``P + F Q``; with ``lam = |P + F Q|/|Q|`` (the distance of the
line from the origin, in counts) the normalised residual is ``sqrt(d) v_n`` with

    v_n = (lam perp + (n + F) along) / sqrt(lam^2 + (n + F)^2),

and every read-out is ``y(n) = C + <u, v_n>``, ``|u|`` the arc amplitude of
:mod:`constructions.laws`.  With ``u = A (cos psi perp + sin psi along)``

    y(n) = C + A f(n),   f(n) = (lam cos psi + (n + F) sin psi) / sqrt(lam^2 + (n + F)^2)

(:data:`SHAPE`).  Unlike the symmetric arc (:mod:`constructions.arc`, ``n0 = L/2``, where the
odd symmetry fixes ``psi = pi/2`` and ``C = L/2``) the angle ``psi`` and ``C`` are free.

**At a shape.**  For fixed ``(F, lam)`` the counting read-outs ``(C, u)``,
``|C + <u, v_n> - n| < 1/2`` for ``n = 0..L``, form an open convex polyhedron ``K``.  Its closure
has a unique point of least ``|u|``, ``R*(F, lam)`` (:func:`min_norm`: the small problem on a
few counts, solved exactly in the plane of ``u`` (:func:`_small`), adding the most violated
count until all ``L + 1`` hold; only a handful bind), and
an inscribed point of largest margin ``delta`` (:func:`centre_point`: the best uniform fit of
the counts, by the Remez exchange).  Every
mixture ``(1 - th) x* + th x_c`` with ``0 < th <= 1`` of the two is in ``K`` (margin ``th
delta > 0``) and has ``|u| <= (1 - th) R* + th |u_c|``; so a budget whose capacity exceeds
``R*`` counts at this shape iff ``delta > 0``, and :func:`readout` picks ``th`` so that ``|u|`` is
halfway between ``R*`` and the capacity.

**The best shape.**  ``R*`` is smallest where ``K`` shrinks to a point (at large ``L``; at
small ``L`` a single pair of counts binds and ``K`` keeps an interior): :func:`least_amplitude`
finds that edge as the root of ``delta`` (:func:`_edge`) next to the shape of an earlier search
at ``L`` or ``L - 1``, and otherwise minimises ``R*`` (a log-spaced scan and a Brent search);
:func:`best_shape` then takes, among the least shape and its neighbours at half-decade steps,
the counting one whose read-out has the largest margin.  ``R*``
(minimised over ``lam``) increases with ``F``, so the best foot is the nearest the budget allows.
As ``L`` grows the best ``lam`` is of order ``L^{3/2} >> L``: all counts are within ``O(L)`` of
the foot, where ``atan`` deviates from a line by the same cubic term as at the centre of the
symmetric arc, and ``psi`` cancels the quadratic one; so ``R*`` grows as ``L^{3/2}``, like the
other arcs.  Everything here is a float64 screen: the constructions are judged in ball
arithmetic, and the lower bound (:func:`bounds.arc_lower.arc_lower` with ``foot``) is proven
independently of it.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def _symbolic() -> dict:
    """The sympy statement, built on first use (module ``__getattr__``; a row needs no sympy):
    ``SHAPE``, ``y(n) = C + A * SHAPE`` with the foot at ``-F``, shape ``t = lam`` and read-out
    angle ``psi``."""
    import sympy

    from constructions.symbols import F, n, psi, t

    return {"SHAPE": (t * sympy.cos(psi) + (n + F) * sympy.sin(psi)) / sympy.sqrt(t**2 + (n + F) ** 2)}


def __getattr__(name: str):
    if name == "SHAPE":
        return _symbolic()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def points(L: int, foot: float, lam: float) -> np.ndarray:
    """``v_n`` for ``n = 0..L`` in the basis ``(perp, along)``: shape ``(L + 1, 2)``.

    The radius is ``sqrt(lam^2 + s^2)`` (``s = n + F``), not ``hypot`` (three times slower at
    ``L = 2^20``): the shapes searched have ``lam`` at most ``10 (L + 2)^{3/2}`` (about ``10^10`` at
    ``L = 2^20``) and ``|s| <= L + |F|``, so the squares are far from overflow, and the radius is
    within two units of rounding of ``hypot``'s, below the screen's noise (:func:`_noise`)."""
    return _at(np.arange(L + 1, dtype=np.float64) + foot, lam)


def _at(s: np.ndarray, lam: float) -> np.ndarray:
    """``v`` at the offsets ``s = n + F`` from the foot (:func:`points`)."""
    V = np.empty((2, len(s))).T  # columns contiguous
    r = np.multiply(s, s, out=V[:, 0])
    r += lam * lam
    np.sqrt(r, out=r)
    np.divide(s, r, out=V[:, 1])
    np.divide(lam, r, out=r)
    return V


#: shapes whose systems are kept: a search evaluates one shape after another (a few at once),
#: and a system holds ``3 (L + 1)`` floats (24 MiB at ``L = 2^20``)
SYSTEMS = 4


@functools.lru_cache(maxsize=SYSTEMS)
def _system(L: int, foot: float, lam: float):
    """The constraints ``|M x - ns| <= 1/2`` in ``x = (C', u)``, ``C' = C + <u, v_m>`` with the
    middle count's point ``v_m`` (well conditioned: ``C`` nearly cancels ``<u, v_m>``)."""
    M = np.empty((3, L + 1)).T  # columns contiguous
    M[:, 0] = 1.0
    V = points(L, foot, lam)
    mid = V[L // 2].copy()
    np.subtract(V[:, 0], mid[0], out=M[:, 1])
    np.subtract(V[:, 1], mid[1], out=M[:, 2])
    return M, np.arange(L + 1, dtype=np.float64), mid


@functools.lru_cache(maxsize=None)
def _pairs(k: int):
    """The ordered pairs ``(i, j)``, ``i != j``, of ``k`` counts."""
    return np.array([(a, b) for a in range(k) for b in range(k) if a != b]).T


def _small(M: np.ndarray, ns: np.ndarray):
    """``argmin |u|`` over ``x = (C', u)`` with ``|M x - ns| <= 1/2`` on a few counts, exactly
    (None: no read-out).  ``C'`` is free, so the condition is that the errors ``g_i = n_i - <u,
    W_i>`` (``W_i`` the rows of ``M`` without their 1) spread by at most 1: the half-planes
    ``<A_l, u> >= b_l`` with ``A_l = W_i - W_j``, ``b_l = n_i - n_j - 1`` for every ordered pair
    ``l = (i, j)``.  Their intersection ``P`` is a convex polygon.  If ``0`` is in it (every
    ``b_l <= 0``) it is the answer; otherwise the least-norm point lies on an edge of ``P``.  On
    the line of ``l``, ``u = p_l + s t_l`` with ``p_l = b_l A_l/|A_l|^2`` (the foot of 0) and
    ``t_l`` a unit vector along it, so ``|u|^2 = |p_l|^2 + s^2``; the other half-planes cut it to
    an interval of ``s`` (``s <A_m, t_l> >= b_m - <A_m, p_l>``), empty unless the line carries an
    edge, and the least point of the line within ``P`` is at ``s`` = 0 clamped to that interval.
    The answer is the least of these over the lines (``P`` empty: no line has a point in it);
    each half-plane is relaxed by ``1e-12 (max |b| + 1)`` against rounding.  ``C'`` is then the
    middle of the errors."""
    W = M[:, 1:]
    i, j = _pairs(len(ns))
    A, b = W[i] - W[j], ns[i] - ns[j] - 1.0
    if (b <= 0).all():
        u = np.zeros(2)
    else:
        tol = 1e-12 * (np.abs(b).max() + 1)
        sq = A[:, 0] ** 2 + A[:, 1] ** 2
        foot = b[:, None] * A / sq[:, None]
        along = np.stack([-A[:, 1], A[:, 0]], axis=1) / np.sqrt(sq)[:, None]
        rate = A @ along.T  # [m, l] = <A_m, t_l>
        need = (b - tol)[:, None] - A @ foot.T  # [m, l]: s <A_m, t_l> >= need
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = need / rate
        lo = np.where(rate > 0, bound, -np.inf).max(axis=0)
        hi = np.where(rate < 0, bound, np.inf).min(axis=0)
        ok = (lo <= hi) & ~((rate == 0) & (need > 0)).any(axis=0)
        if not ok.any():
            return None
        s = np.clip(0.0, lo, hi)
        size = np.where(ok, foot[:, 0] ** 2 + foot[:, 1] ** 2 + s**2, np.inf)
        best = int(np.argmin(size))
        u = foot[best] + s[best] * along[best]
    g = ns - W @ u
    return np.array([(g.max() + g.min()) / 2, u[0], u[1]])


def _plain(x: np.ndarray, mid: np.ndarray) -> np.ndarray:
    """``(C, u)`` from ``(C', u)``."""
    return np.array([x[0] - x[1] * mid[0] - x[2] * mid[1], x[1], x[2]])


@functools.lru_cache(maxsize=4096)
def min_norm(L: int, foot: float, lam: float):
    """``(R*, x*)``: the least amplitude at the shape and its read-out ``x* = (C, u_perp,
    u_along)``; ``(inf, None)`` where nothing counts (module docstring)."""
    M, ns, mid = _system(L, foot, lam)
    active = sorted({0, L, L // 4, L // 2, (3 * L) // 4})
    for _ in range(60):
        x = _small(M[active], ns[active])
        if x is None:
            return np.inf, None
        err = np.abs(M @ x - ns) - 0.5
        err[active] = -np.inf  # held by the small problem (to rounding)
        worst = int(np.argmax(err))
        if err[worst] <= _noise(L, x):
            return float(np.hypot(x[1], x[2])), _plain(x, mid)
        active = sorted(set(active) | {worst})
    return np.inf, None


def _noise(L: int, x: np.ndarray) -> float:
    """The rounding of an error ``C' + <u, W_n> - n`` in float64, ``64 eps (L + |x|_1)`` (at least
    ``1e-9``): a count that errs by less beyond 1/2 holds to the screen's resolution (at ``L =
    2^20`` the read-out has ``|x|_1 ~ 10^8``, and the errors of the counts that bind scatter by
    ``~10^-7``)."""
    return max(1e-9, 64 * np.finfo(float).eps * (L + float(np.abs(x).sum())))


#: the last reference of :func:`_chebyshev` per ``L``: nearby shapes have nearby references
_REFERENCE: dict = {}


@functools.lru_cache(maxsize=4096)
def centre_point(L: int, foot: float, lam: float):
    """``(delta, x_c)``: the read-out with the largest margin ``delta`` in every count.

    ``delta = 1/2 - E`` with ``E = min_x max_n |C + <u, v_n> - n|`` and ``x_c`` its minimiser, the
    best uniform fit of the counts (:func:`_chebyshev`) where ``L >= 3``; at ``L <= 2`` (at most
    three counts for the three unknowns, a fit with ``E = 0`` that need not be unique) the linear
    programme ``max delta`` subject to ``|M x - n| <= 1/2 - delta``, ``delta <= 1/2``."""
    M, ns, mid = _system(L, foot, lam)
    if L >= 3:
        try:
            E, x = _chebyshev(L, M, ns)
        except np.linalg.LinAlgError:  # the angles of the counts no longer separate in float64
            return -np.inf, None
        return 0.5 - E, _plain(x, mid)
    from scipy.optimize import linprog

    ones = np.ones((L + 1, 1))
    A_ub = np.vstack([np.hstack([M, ones]), np.hstack([-M, ones])])
    b_ub = np.concatenate([ns + 0.5, 0.5 - ns])
    res = linprog([0, 0, 0, -1], A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * 3 + [(None, 0.5)],
                  method="highs")
    if res.status != 0:
        return -np.inf, None
    return float(res.x[3]), _plain(res.x[:3], mid)


def _chebyshev(L: int, M: np.ndarray, ns: np.ndarray):
    """``(E, x)``: the best uniform fit ``x = (C', u)`` of the counts ``n = 0..L`` (``L >= 3``) by
    the rows of ``M`` and its error ``E``, by the Remez exchange.

    With ``theta_n`` the angle of ``v_n = (cos theta_n, sin theta_n)`` (increasing in ``n``, within
    ``(-pi/2, pi/2)``), a row is ``(1, cos theta, sin theta)`` up to the constant shift by ``v_m``:
    a trigonometric polynomial of degree one, which has at most two zeros on an interval shorter
    than ``2 pi`` unless it vanishes -- a Haar system of three functions.  So the best fit on the
    ``L + 1 >= 4`` counts is unique and is characterised by four counts ``r_0 < .. < r_3`` at which
    the error ``n - M x`` equals ``+-E`` with alternating signs and nowhere exceeds ``E`` in size
    (Chebyshev's alternation theorem).  On a reference ``r`` the levelled fit solves ``M_r x + s h
    = n_r`` (``s = (1, -1, 1, -1)``); if some count errs by more than ``|h|`` it enters the reference
    in place of the neighbour whose error has its sign (or, outside ``r``, the far end is dropped),
    keeping the signs alternating: ``|h|`` then grows strictly (de la Vallee Poussin), so no
    reference repeats and the exchange ends, at the best fit, when no error off the reference
    exceeds ``|h|`` (to the rounding of the errors, :func:`_noise`: then ``|h| <= E <= |h|``
    plus that).  The reference starts from the last one at ``L``, else from the Chebyshev extrema
    ``0, L/4, 3L/4, L`` of the asymptotic edge (:func:`_warm`)."""
    ref = _reference(L)
    for _ in range(4 * (L + 1)):
        sol = np.linalg.solve(np.hstack([M[ref], SIGNS[:, None]]), ns[ref])
        x, h = sol[:3], sol[3]
        err = ns - M @ x
        size = np.abs(err)
        size[ref] = 0.0  # at ``|h|`` by construction, to rounding
        k = int(np.argmax(size))
        if size[k] <= abs(h) + _noise(L, x):
            _REFERENCE[L] = tuple(ref)
            return float(abs(h)), x
        up = err[k] > 0
        same = [(s * h > 0) == up for s in SIGNS]  # the error at r_i has the sign of err[k]
        pos = int(np.searchsorted(ref, k))
        if pos == 0:
            ref = [k] + (ref[1:] if same[0] else ref[:3])
        elif pos == 4:
            ref = (ref[:3] if same[3] else ref[1:]) + [k]
        else:
            ref[pos - 1 if same[pos - 1] else pos] = k
    raise ArithmeticError(f"the Remez exchange did not end at L = {L}")


SIGNS = np.array([1.0, -1.0, 1.0, -1.0])


def _reference(L: int) -> list:
    """The reference the exchange starts from at ``L`` (:func:`_chebyshev`)."""
    return list(_REFERENCE.get(L, (0, max(1, L // 4), min(L - 1, (3 * L) // 4), L)))  # distinct


def margin_above(L: int, foot: float, lam: float) -> float:
    """An upper bound on ``delta`` (:func:`centre_point`) from four counts, ``O(1)`` instead of
    ``O(L)``: ``1/2 - |h|`` with ``h`` the levelled error on the last reference of the exchange at
    ``L``, plus the rounding of the errors (:func:`_noise`); ``inf`` where ``L < 3`` or the four
    rows do not separate in float64.

    The best fit on all counts errs by ``E`` at least as much as the best fit on any four of them
    (it is a fit of those four), and on four counts of a Haar system of three functions the best
    fit is the levelled one, with error ``|h|`` (Chebyshev's alternation theorem on the
    reference; de la Vallee Poussin), so ``delta = 1/2 - E <= 1/2 - |h|``.  A shape with a
    negative bound has no interior, without the ``O(L)`` exchange: the search's shapes below the
    edge of the admissible ones (:func:`best_shape`) are discarded this way."""
    if L < 3:
        return np.inf
    ref = _reference(L)
    V = _at(np.array(ref + [L // 2], dtype=np.float64) + foot, lam)
    rows = np.hstack([np.ones((4, 1)), V[:4] - V[4], SIGNS[:, None]])
    try:
        sol = np.linalg.solve(rows, np.array(ref, dtype=np.float64))
    except np.linalg.LinAlgError:
        return np.inf
    return 0.5 - abs(float(sol[3])) + _noise(L, sol[:3])


def slack(L: int, foot: float, lam: float, cap: float) -> float:
    """``(cap - R*)/R*`` where the shape has an interior (``delta > 0``), else ``-inf``."""
    if margin_above(L, foot, lam) <= 0 or centre_point(L, foot, lam)[0] <= 0:  # cheaper first
        return -np.inf
    R, _ = min_norm(L, foot, lam)
    if not np.isfinite(R) or R >= cap:
        return -np.inf
    return (cap - R) / R if R > 0 else np.inf  # L = 1: u = 0 counts


def _amplitude(L: int, foot: float, lam: float) -> float:
    """``R*`` at the shape: infinite where the best uniform fit errs by more than 1/2
    (:func:`centre_point`, ``delta < 0``: the closure of ``K`` is empty; the cheaper test where it
    is the Remez exchange, ``L >= 3``), else :func:`min_norm`'s."""
    if L >= 3 and (margin_above(L, foot, lam) < 0 or centre_point(L, foot, lam)[0] < 0):
        return np.inf
    return min_norm(L, foot, lam)[0]


def least_amplitude(L: int, foot: float):
    """``(lam, min over lam of R*)`` at the foot.  Where :func:`_warm` gives a guess: the edge of
    the admissible shapes next to it if the least is there (:func:`_edge`), else a Brent search in
    the bracket ``e^{+-1/4}`` around it, kept if its least is inside and below both ends; failing
    those, a log-spaced scan, then a bounded Brent search.  A function of ``(L, foot)`` alone."""
    return _least(L, float(foot))


def _warm(L: int):
    """The log of a guess of the best ``lam`` at ``L``: for ``L >= WARM_L`` the asymptotic edge
    ``lam = L^{3/2}/(4 sqrt 2)`` (None below it: no guess, the scan decides).  The guess depends
    on ``L`` alone, so the shape found at ``(L, foot)`` does not depend on earlier searches.

    The asymptotic edge: for ``lam >> L`` the angles ``theta_n = atan((n + F)/lam)`` are small and
    the counts are ``n + F = lam tan theta``; the read-outs ``C + A_perp cos theta + A_along sin
    theta`` are ``1, theta, theta^2`` up to ``O(theta^3)``, and ``lam tan theta - lam sin theta =
    (lam/2) theta^3 + O(theta^5)`` is the cubic they leave.  The best uniform fit of ``x^3`` on an
    interval of length ``h`` by quadratics errs by ``h^3/32`` (Chebyshev), here ``h = L/lam``: the
    fit errs by ``E = (lam/2) (L/lam)^3/32 = L^3/(64 lam^2)``, which is 1/2 at ``lam^2 =
    L^3/32``, with the alternation at the Chebyshev extrema ``0, L/4, 3L/4, L`` (the first
    reference of :func:`_chebyshev`)."""
    if L >= WARM_L:
        return 1.5 * np.log(L) - np.log(4 * np.sqrt(2))
    return None


#: from this ``L`` on the search starts at the asymptotic edge (:func:`_warm`;
#: at ``L = 256`` it is within 1% of the edge, at ``L = 4096`` within 0.06%)
WARM_L = 256


def _edge(L: int, foot: float, mid: float):
    """``(lam, R*)`` at the edge of the admissible shapes next to the guess ``e^mid``, if the least
    of ``R*`` over the bracket ``e^{mid +- 1/4}`` is there (else None).

    For ``L >= 16`` the least ``R*`` is where ``K`` shrinks to a point (module docstring): the
    shape ``lam_c`` at which the best uniform fit errs by exactly 1/2, ``delta(lam_c) = 0``
    (:func:`centre_point`), with ``delta < 0`` (no read-out) below it and ``delta > 0`` above.
    ``delta`` is smooth there, so its root is found by regula falsi (Illinois) on ``log lam``,
    keeping a bracket ``[a, b]`` with ``delta(a) < 0 <= delta(b)`` down to ``1e-13``; the answer
    is ``R*`` at ``b`` (:func:`min_norm`), admissible.  It is kept only where ``R*`` grows away from
    the edge (at ``b + 1e-6``) and stays above it at the far end of the bracket -- else the least
    is inside (small ``L``: a single pair of counts binds) and the Brent search decides."""
    delta = lambda ll: centre_point(L, foot, float(np.exp(ll)))[0]
    a = b = mid
    fa = fb = delta(mid)
    step = 1e-6
    while (fa < 0) == (fb < 0):  # widen towards the other side until delta changes sign
        if step > 0.25:
            return None
        if fb >= 0:
            a = mid - step
            fa = delta(a)
        else:
            b = mid + step
            fb = delta(b)
        step *= 8
    side = 0
    for _ in range(100):
        if b - a <= 1e-13:
            break
        c = (a * fb - b * fa) / (fb - fa)
        if not a < c < b:
            c = (a + b) / 2
        fc = delta(c)
        if fc < 0:
            a, fa = c, fc
            fb = fb / 2 if side < 0 else fb
            side = -1
        else:
            b, fb = c, fc
            fa = fa / 2 if side > 0 else fa
            side = 1
    R = min_norm(L, foot, float(np.exp(b)))[0]
    if not np.isfinite(R) or R >= _amplitude(L, foot, float(np.exp(b + 1e-6))) \
            or R >= _amplitude(L, foot, float(np.exp(mid + 0.25))):
        return None
    return float(np.exp(b)), float(R)


@functools.lru_cache(maxsize=256)
def _least(L: int, foot: float):
    from scipy.optimize import minimize_scalar

    value = lambda ll: _amplitude(L, foot, float(np.exp(ll)))
    mid = _warm(L)
    edge = None if mid is None else _edge(L, foot, mid)
    if edge is not None:
        return edge
    if mid is not None:  # a Brent search in a bracket around the guess, if it holds the least
        with np.errstate(invalid="ignore"):  # an infinite norm (no read-out) is a value
            res = minimize_scalar(value, bounds=(mid - 0.25, mid + 0.25), method="bounded",
                                  options={"xatol": 1e-12})
        if (np.isfinite(res.fun) and abs(res.x - mid) < 0.2
                and res.fun < min(value(mid - 0.25), value(mid + 0.25))):
            return float(np.exp(res.x)), float(res.fun)
    grid = np.linspace(np.log(1e-2), np.log(10.0 * (L + 2) ** 1.5), 49)
    vals = np.array([value(g) for g in grid])
    j = int(np.argmin(vals))
    if not np.isfinite(vals[j]):
        return None, np.inf
    with np.errstate(invalid="ignore"):
        res = minimize_scalar(value, bounds=(grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]),
                              method="bounded", options={"xatol": 1e-12})
    ll = res.x if res.fun < vals[j] else grid[j]
    return float(np.exp(ll)), min(float(res.fun), float(vals[j]))


#: relative steps from the least shape tried by :func:`best_shape`: half decades, 1e-9 to 0.3
STEPS = 10.0 ** np.arange(-9.0, 0.0, 0.5)


def best_shape(L: int, foot: float, cap: float):
    """``(lam, slack)``: among the least shape ``lam0`` and ``lam0 (1 + e)^{+-1}`` for half-decade
    steps ``e``, the counting shape (positive slack) whose read-out (:func:`readout`) has the
    largest margin, with its slack; where none counts, ``lam0`` and its slack.

    Where ``K`` shrinks to a point at ``lam0`` (``L >= 16``) the slack is largest next to it, on
    the side where ``K`` has an interior, but the margin ``delta`` of the interior vanishes there:
    at ``lam0 (1 + e)`` the slack falls like ``s0 - k e`` and ``delta`` grows like ``e``, so the
    read-out's margin ``th delta`` (:func:`_mixture`) is largest at an ``e`` of the order of the
    slack ``s0``, which a half-decade step finds within a fixed factor.

    The shapes are tried in decreasing order of a bound on that margin that needs no
    :func:`min_norm` (:func:`_margin_bound`), until the bound is below the best margin found."""
    lam0, R0 = least_amplitude(L, foot)
    if lam0 is None or R0 >= cap:
        return lam0, -np.inf if lam0 is None else (cap - R0) / R0
    shapes = [lam0, *(lam0 * (1 + STEPS)), *(lam0 / (1 + STEPS))]
    bounds = np.array([_margin_bound(L, foot, float(lam), cap, R0) for lam in shapes])
    best, margin = lam0, 0.0
    for k in np.argsort(-bounds, kind="stable"):
        if bounds[k] <= margin:
            break
        got = _mixture(L, foot, float(shapes[k]), cap)
        if got is not None and got[1] > margin:
            best, margin = float(shapes[k]), got[1]
    return best, slack(L, foot, best, cap)


def _margin_bound(L: int, foot: float, lam: float, cap: float, R0: float) -> float:
    """An upper bound on the margin ``th delta`` of :func:`_mixture` at the shape, given that its
    ``R*`` is at least ``R0`` (the least over the shapes): ``th <= 1``, and where ``|u_c| > cap``,
    ``th = (cap - R*)/(2 (|u_c| - R*))``, which decreases in ``R*`` (its derivative has the sign of
    ``cap - |u_c|``), so ``th <= (cap - R0)/(2 (|u_c| - R0))``; 0 where ``delta <= 0`` (decided
    from four counts where :func:`margin_above` says so)."""
    if margin_above(L, foot, lam) <= 0:
        return 0.0
    delta, xc = centre_point(L, foot, lam)
    if xc is None or delta <= 0:
        return 0.0
    uc = float(np.hypot(xc[1], xc[2]))
    return delta * (1.0 if uc <= cap else min(1.0, (cap - R0) / (2 * (uc - R0))))


def _mixture(L: int, foot: float, lam: float, cap: float):
    """``(x, margin)``: the read-out ``x = (1 - th) x* + th x_c`` with ``|u|`` halfway between
    ``R*`` and ``cap`` (module docstring) and its margin ``th delta`` (every error is at most
    ``(1 - th)/2 + th (1/2 - delta)``); None where the shape has no interior or ``R* >= cap``."""
    delta, xc = centre_point(L, foot, lam)
    if xc is None or delta <= 0:  # the cheaper test first
        return None
    R, xs = min_norm(L, foot, lam)
    if xs is None or R >= cap:
        return None
    target = (R + cap) / 2
    uc = float(np.hypot(xc[1], xc[2]))
    th = 1.0 if uc <= target else (target - R) / (uc - R)
    return (1 - th) * xs + th * xc, th * delta


def readout(L: int, foot: float, lam: float, cap: float):
    """``(C, A, psi)``: the counting read-out of :func:`_mixture`, ``|u|`` halfway between ``R*``
    and ``cap``; None where the shape has no interior or ``R* >= cap``."""
    got = _mixture(L, foot, lam, cap)
    if got is None:
        return None
    x = got[0]
    return float(x[0]), float(np.hypot(x[1], x[2])), float(np.arctan2(x[2], x[1]))


def binding_counts(L: int, foot: float, lam: float) -> list:
    """Candidate fours of counts for the restricted arc bound (any four give a valid bound, the
    binding ones a tight one).  The counts whose error at the least read-out of the shape is
    within ``1e-6`` of binding, largest first, then ``L``, ``0``, ``L/2``, ...: once taking them
    all, once skipping the neighbours of a count already taken (at large ``L`` the error next to
    a binding count is within float noise of binding, and would crowd out ``0``; at small ``L``
    two neighbours may both bind).  Each four has a count in the first half."""
    V = points(L, foot, lam)
    _, x = min_norm(L, foot, lam)
    err = np.abs(x[0] + V @ x[1:] - np.arange(L + 1))
    near = [int(k) for k in np.argsort(-err, kind="stable") if err[k] > 0.5 - 1e-6]
    fours = []
    for gap in (0, 1):
        out = []
        for k in near:
            if len(out) < 4 and all(abs(k - j) > gap for j in out):
                out.append(k)
        for k in [L, 0, L // 2, L // 4, (3 * L) // 4, 1, 2]:
            if k not in out and len(out) < 4:
                out.append(k)
        if 2 * min(out) > L:  # the bound needs a count in the first half
            out[-1] = 0
        if tuple(sorted(out)) not in fours:
            fours.append(tuple(sorted(out)))
    return fours
