r"""The select task read at the last position, softmax attention with bare pre-norm (``eps = 0``):
three values on one great circle, ``L* = 4`` (LayerNorm at ``d = 2``: two values, ``L* = 2``).

Inputs ``(s, x_1..x_m)``, ``x_i`` in {a, b}, ``m <= L``, read at the last position: the query
is ``h_q``, ``q = x_m`` (``s`` when ``m = 0``), the residual ``e_q + A`` (:mod:`verify.inputs`).
Bare pre-norm with ``eps = 0`` fixes ``|h_x| = sqrt(d)``.  With ``n_a`` tokens ``a`` and ``n_b``
tokens ``b`` the weight of a token ``x`` seen from the query ``q`` is ``p_qx = exp(tau <h_q, h_x>)``
and, with ``u_x = <w, h_x>`` and ``C_q = <w, e_q> + w0``,

    y = C_q + (p_qs u_s + n_a p_qa u_a + n_b p_qb u_b) / (p_qs + n_a p_qa + n_b p_qb)

(the order of the tokens changes nothing: the scores depend on the tokens only, so every input
is one of the classes of :func:`constructions.select_last_pair.classes`).

**L* = 4.**  *Nothing solves select beyond 4.*  The inputs ``(s)`` and ``(s, a^n)``, read at
their last token, are select inputs (``n_b = 0``) with the count task's targets and queries, so
a parameter set that solves select to ``L`` counts to ``L`` read last, and the count task with
bare pre-norm read last stops at ``L* = 4`` (:func:`bounds.lstar.last_l_star`, either kind,
every ``d``).  *Something solves it at every L <= 4*: the construction below, certified by the
judge in ball arithmetic at ``L = 1, 2, 3, 4`` (``tests/test_select_last_pre.py``), for
LayerNorm at ``d >= 3`` and RMSNorm at every ``d >= 2``.  So ``L* = 4`` exactly
(:func:`bounds.lstar.cell_l_star`).

*LayerNorm at d = 2: two values, L* = 2.*  Its values are ``+-v`` only; ``h_a = -h_s`` (else
``(s, a)`` and ``(s, a, a)`` have one output), ``h_b = h_s`` (``h_b = h_a`` gives ``(s, a, b)``
and ``(s, b, b)`` one output), and at ``L = 3`` the inputs ``(s, a)``, ``(s, a, a, a)`` and
``(s, b, b, a)`` of the query ``a`` ask for amplitudes that do not meet
(:func:`bounds.lstar.last_select_bare_l_star`).  The construction below with ``(th_a, th_b) =
(pi, 0)`` and ``Q = 0`` (no second centred direction) solves ``L = 2``, certified.

**The geometry.**  Two orthonormal directions ``top, across`` of the norm's image (LayerNorm:
``(e_1 - e_2)/sqrt 2`` and ``(e_1 + e_2 - 2 e_3)/sqrt 6``, centred, ``d >= 3``; RMSNorm: ``e_1,
e_2``) carry the unit directions ``v_x = cos(th_x) top + sin(th_x) across``, ``th_s = 0``, and the
values ``h_x = sqrt(d) v_x``; so ``p_qx = exp(sqrt(d) cos(th_q - th_x))``.  The read-out's part
in the plane, ``w_c = P top + Q across`` (``|w_c| < B``), gives ``u_x = sqrt(d) (P cos th_x + Q
sin th_x)``.  Given ``(th_a, th_b, P, Q)`` every output is ``C_q`` plus a known number, so each
query ``q`` has an interval of constants: ``C_q`` in ``(lo_q, hi_q)`` with ``lo_q = max (n_a -
avg) - 1/2``, ``hi_q = min (n_a - avg) + 1/2`` over the classes read at ``q`` (:func:`errors`).
The constants are reached through the embeddings, which the norm ignores in part:

* *LayerNorm* ignores the part along ``one = (1, ..., 1)/sqrt(d)``: ``e_x = nu v_x + mu_x one``
  (``nu = B/1024``, ``|mu_x| <= M = sqrt(B^2 - nu^2)``, so ``|e_x| <= B``, and ``N(e_x) = sqrt(d)
  v_x``) and ``w = w_c + om one`` with ``om = W = sqrt(B^2 - |w_c|^2)`` (``|w| = B``).  Then
  ``C_q = w0 + nu <w_c, v_q> + mu_q om``: ``C_q`` fills ``w0 + c_q +- M W``, ``c_q = nu <w_c,
  v_q>``, each ``q`` on its own ``mu_q``.
* *RMSNorm* ignores the scale: ``e_x = lam_x v_x``, ``0 < lam_x <= B`` (``N(e_x) = sqrt(d)
  v_x``), ``w = w_c``.  Then ``C_q = w0 + lam_q u_q/sqrt(d)``: ``C_q - w0`` fills the segment
  from ``lam_min u_q/sqrt(d)`` to ``B u_q/sqrt(d)`` (``lam_min = 2^-20 B``).

So some ``w0`` puts every ``C_q`` inside its interval iff every interval is non-empty and the
intervals of ``w0`` they leave, ``(lo_q - reach_hi_q, hi_q - reach_lo_q)``, meet (one
dimension: pairwise is enough, and the largest lower end against the least upper end decides):
the *slack* ``min(min_q (hi_q - lo_q), min_q (hi_q - reach_lo_q) - max_q (lo_q - reach_hi_q))``
(:func:`slack`, the reaches shrunk by :data:`constructions.tasks.SHRINK`) is positive iff the
construction at ``(th_a, th_b, P, Q)`` solves select to ``L`` at budget ``B``.  With LayerNorm
the slack is concave in ``(P, Q)`` for fixed angles (``hi_q`` is a minimum of affine functions,
``lo_q`` a maximum, ``W`` the root of a concave quadratic).

*Plan* (:meth:`BareSelectLastDesign.plan`, float64, a screen): the largest slack over ``(th_a,
th_b, P, Q)``, a grid (``th_a`` in ``[0, pi]`` by the reflection ``th -> -th``, ``th_b`` around the
circle, ``w_c`` by direction and length) refined by Nelder-Mead from its best points and from
the optimum at the budget of the estimate (the continuation of :meth:`~BareSelectLastDesign.
estimate`).  *Build*: the plan's point in mpmath, ``w0`` the middle of the common interval and
each ``C_q`` the middle of its interval clipped to its reach.  Every reported parameter set is
judged on every select input.  At the budgets of the rows the read-out's part in the plane takes
nearly all of ``B``; at ``L = 2`` the plan is ``h_a = -h_s``, ``h_b = h_s`` (``b`` a copy of ``s``,
as without a norm, :mod:`constructions.select_last_pair`), at ``L = 4`` ``a`` and ``b`` lie on one
side of ``s``, ``b`` beyond ``a``.

*Lower bound.*  The count task read last is the sub-task ``n_b = 0``, so its proven bound
(:func:`bounds.lower.last_bare_lower`) holds (:func:`bounds.lower.last_select_bare_lower`).  The
distractor costs (at ``L = 4`` and ``d = 8`` the construction needs about twice the count task's
``B_min``); no bound that sees it is derived.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
from scipy.optimize import minimize, minimize_scalar

from constructions import laws, registry, zoom
from constructions.cell import Cell, Params
from constructions.refusals import refusal
from constructions.regression import RegressionDesign, _check_budget, _check_count
from constructions.select_last_pair import classes
from constructions.tasks import SHRINK

#: the scale of the embeddings' parts in the plane, relative to the budget (LayerNorm)
NU = mpmath.mpf(2) ** -10
#: the smallest scale of an embedding, relative to the budget (RMSNorm: ``lam_x > 0``)
LAM_MIN = mpmath.mpf(2) ** -20
#: the plan's grid: angles of ``a`` (over ``[0, pi]``) and ``b`` (around the circle), directions
#: and relative lengths of ``w_c``
GRID = (13, 24, 24, 10)


def built(cell: Cell) -> bool:
    """Whether ``cell`` is served here (:func:`constructions.registry.bare_softmax_select_last`)."""
    return registry.builds("select_last_bare", cell)


def query(n_a: int, n_b: int, query_a: bool) -> int:
    """The index (``s, a, b`` = 0, 1, 2) of the query of a class of
    :func:`constructions.select_last_pair.classes`."""
    return 1 if query_a else (2 if n_b else 0)


def errors(L: int, d: int, th_a, th_b, P, Q, num=np):
    """``(lo, hi, u)``: per query ``q`` (``s, a, b``) the ends ``lo_q, hi_q`` of the constants
    ``C_q`` that put every class read at ``q`` within ``1/2`` of ``n_a`` (module docstring), and
    the value read-outs ``u_x``; vectorised over arrays of ``(th_a, th_b, P, Q)`` (``num = np``),
    or plain floats (``num = math``) or mpmath numbers (``num = mpmath``)."""
    sd = num.sqrt(d)
    ang = (0 * th_a, th_a, th_b)
    u = [sd * (P * num.cos(t) + Q * num.sin(t)) for t in ang]
    # per query the weights of s, a, b relative to its own, exp(sqrt(d) (cos - 1)) <= 1: no overflow
    p = [[num.exp(sd * (num.cos(ang[q] - t) - 1)) for t in ang] for q in range(3)]
    pu = [[pq[x] * u[x] for x in range(3)] for pq in p]
    lo, hi = [None] * 3, [None] * 3
    for n_a, n_b, qa in classes(L):
        q = query(n_a, n_b, qa)
        err = n_a - (pu[q][0] + n_a * pu[q][1] + n_b * pu[q][2]) / (p[q][0] + n_a * p[q][1] + n_b * p[q][2])
        lo[q] = err if lo[q] is None else _max(num, lo[q], err)
        hi[q] = err if hi[q] is None else _min(num, hi[q], err)
    return [x - 0.5 for x in lo], [x + 0.5 for x in hi], u


def _max(num, a, b):
    return np.maximum(a, b) if num is np else max(a, b)


def _min(num, a, b):
    return np.minimum(a, b) if num is np else min(a, b)


def _const(num, x):
    """The constant ``x`` (an mpf) as a float, or as itself for mpmath."""
    return x if num is mpmath else float(x)


def reaches(cell: Cell, B, th_a, th_b, P, Q, u, num=np):
    """Per query ``q`` the segment ``(low_q, high_q)`` that ``C_q - w0`` fills (module docstring),
    shrunk by ``SHRINK`` about its middle (LayerNorm) or its end at ``lam_min`` (RMSNorm)."""
    shrink = _const(num, mpmath.mpf(SHRINK))
    if cell.kind.centred:
        nu = B * _const(num, NU)
        R = shrink * num.sqrt(B**2 - nu**2) * num.sqrt(_max(num, 0 * B, B**2 - P**2 - Q**2))
        out = []
        for t in (0 * th_a, th_a, th_b):
            c = nu * (P * num.cos(t) + Q * num.sin(t))
            out.append((c - R, c + R))
        return out
    lam = B * _const(num, LAM_MIN)
    sd = num.sqrt(cell.d)
    out = []
    for x in u:
        near, far = lam * x / sd, lam * x / sd + shrink * (B - lam) * x / sd
        out.append((_min(num, near, far), _max(num, near, far)))
    return out


def slack(cell: Cell, L: int, B, th_a, th_b, P, Q, num=np):
    """The slack of the construction at ``(th_a, th_b, P, Q)`` and budget ``B`` (module
    docstring): positive iff it solves select to ``L``; ``-1 - (|w_c| - B)`` where ``|w_c| >= B``
    (vectorised with ``num = np``; ``math`` for one float point, ``mpmath``)."""
    lo, hi, u = errors(L, cell.d, th_a, th_b, P, Q, num)
    reach = reaches(cell, B, th_a, th_b, P, Q, u, num)
    width = _min(num, _min(num, hi[0] - lo[0], hi[1] - lo[1]), hi[2] - lo[2])
    top = _min(num, _min(num, hi[0] - reach[0][0], hi[1] - reach[1][0]), hi[2] - reach[2][0])
    bot = _max(num, _max(num, lo[0] - reach[0][1], lo[1] - reach[1][1]), lo[2] - reach[2][1])
    out = _min(num, width, top - bot)
    over = num.sqrt(P**2 + Q**2) - B
    if num is np:
        return np.where(over < 0, np.where(np.isfinite(out), out, -np.inf), -1 - over)
    return out if over < 0 else -1 - over


class BareSelectLastDesign(RegressionDesign):
    """Softmax attention with bare pre-norm (``eps = 0``), the select task read last (module
    docstring): three values on one great circle; solves select up to ``L* = 4`` (LayerNorm at
    ``d = 2``: ``h_a = -h_s``, ``h_b = h_s``, up to ``L* = 2``)."""

    def __init__(self, cell: Cell):
        if not built(cell):
            raise ValueError(f"{cell.describe()}: {refusal(cell)}")
        super().__init__(cell)
        from bounds.lstar import last_select_bare_l_star  # proven there (module docstring)

        self.l_star = last_select_bare_l_star(cell)
        #: LayerNorm at d = 2: the values +-h_s only, h_a = -h_s and h_b = h_s (module docstring)
        self.fixed = laws.two_values(cell)
        self._plans = {}
        #: per L: the estimate and the optimum there (the seed of :meth:`plan`)
        self._estimates = {}

    def compiled_parts(self) -> None:
        """Nothing to compile: the construction is evaluated in mpmath from the plan's point."""

    def _f(self, L: int, B: float):
        return lambda x: -slack(self.cell, L, B, *(float(v) for v in x), num=math)

    def _polish(self, L: int, B: float, start, stop: bool = False):
        """Nelder-Mead on ``-slack`` from ``start``: ``(x, slack)`` (``stop``: at the first point
        of positive slack or after 800 steps, enough for a feasibility test)."""
        f = self._f(L, B)

        def done(intermediate_result):
            if stop and intermediate_result.fun < 0:
                raise StopIteration

        res = minimize(f, np.asarray(start, dtype=float), method="Nelder-Mead", callback=done,
                       options={"maxiter": 800 if stop else 3000, "xatol": 1e-10, "fatol": 1e-12})
        return np.asarray(res.x, dtype=float), -float(res.fun)

    def _grid(self, L: int, B: float, keep: int = 3):
        """The ``keep`` best points of the plan's grid at budget ``B``."""
        na, nb, nphi, nr = GRID
        ta = np.linspace(0, math.pi, na)
        tb = np.linspace(-math.pi, math.pi, nb, endpoint=False)
        phi = np.linspace(0, 2 * math.pi, nphi, endpoint=False)
        r = B * (np.arange(1, nr + 1) / (nr + 1)) ** 0.5
        A, Bb, F, Rr = (x.ravel() for x in np.meshgrid(ta, tb, phi, r, indexing="ij"))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            s = slack(self.cell, L, B, A, Bb, Rr * np.cos(F), Rr * np.sin(F))
        idx = np.argsort(-s)[:keep]
        return [np.array([A[i], Bb[i], Rr[i] * np.cos(F[i]), Rr[i] * np.sin(F[i])]) for i in idx]

    def plan(self, L: int, B: float):
        """``(x, slack)``, ``x = (th_a, th_b, P, Q)``: the largest slack found at budget ``B``
        (module docstring): Nelder-Mead from the seed of :meth:`estimate`, and from the grid's
        best points where that has no positive slack."""
        key = (L, float(B))
        if key not in self._plans and self.fixed:
            self._plans[key] = self._line(L, float(B))
        if key not in self._plans:
            seed = self._seed(L)
            best = (None, -math.inf) if seed is None else self._polish(L, float(B), seed)
            if not best[1] > 0:
                best = max([best] + [self._polish(L, float(B), x) for x in self._grid(L, float(B))],
                           key=lambda p: p[1])
            self._plans[key] = best
        return self._plans[key]

    def _line(self, L: int, B: float):
        """LayerNorm at ``d = 2``: ``(th_a, th_b, P, Q) = (pi, 0, P, 0)``, the slack (concave in
        ``P``) maximised over ``|P| < B``."""
        f = lambda P: -slack(self.cell, L, B, math.pi, 0.0, P, 0.0, num=math)
        res = minimize_scalar(f, bounds=(-B * (1 - 1e-12), B * (1 - 1e-12)), method="bounded",
                              options={"xatol": 1e-12 * max(B, 1e-300)})
        return np.array([math.pi, 0.0, float(res.x), 0.0]), -float(res.fun)

    def _seed(self, L: int):
        """The optimum at the estimate's budget (None before the estimate ran, or beyond L*)."""
        if L not in self._estimates:
            self.estimate(L)
        return self._estimates.get(L, (None, None))[1]

    def best_shape(self, L_value: int, B_value: float):
        """``(rho_a, slack)``: ``rho_a = exp(tau <h_a, h_s - h_a>)``, the count task's shape, at the
        plan's point."""
        if L_value > self.l_star:
            return None, -math.inf
        x, s = self.plan(L_value, float(B_value))
        return math.exp(math.sqrt(self.cell.d) * (math.cos(x[0]) - 1)), s

    def estimate(self, L_value: int, hi_B: float = 1e6, rtol: float = 1e-7):
        """The smallest budget at which the plan has positive slack (``1e-12`` at ``L = 1``, None
        beyond ``L*``): bisection on ``B``, each test Nelder-Mead from the last feasible point
        (a continuation) and, to a relative ``1e-3``, from the grid's two best points; the optimum
        at the end becomes the seed of :meth:`plan` at this ``L``."""
        if L_value > self.l_star:
            return None
        if L_value == 1:
            return 1e-12
        if L_value in self._estimates:
            return self._estimates[L_value][0]
        if self.fixed:
            feasible = lambda b: self._line(L_value, b)[1] > 0
            up = zoom.threshold(feasible, 1e-6, 1e-3, hi_B, rtol)
            self._estimates[L_value] = (up, None)
            return up
        B_top = 1.0
        while True:
            starts = self._grid(L_value, B_top)
            x, s = max((self._polish(L_value, B_top, p) for p in starts), key=lambda p: p[1])
            if s > 0:
                break
            B_top *= 4
            if B_top > hi_B:
                self._estimates[L_value] = (None, None)
                return None
        state = {"x": x}

        def feasible(b, grid=True):
            # from the last feasible point, then (a basin it may miss) from the grid's best points
            for start in [state["x"]] + (self._grid(L_value, b, keep=2) if grid else []):
                y, sl = self._polish(L_value, b, start, stop=True)
                if sl > 0:
                    state["x"] = y
                    return True
            return False

        # the basin to 1e-3 with the grid, then the continuation alone
        lo, up = zoom.bisect_up(feasible, B_top / 1e3, B_top, max(rtol, 1e-3))
        lo, up = zoom.bisect_up(lambda b: feasible(b, grid=False), lo, up, rtol)
        # the seed: the optimum at the estimate (positive there: it starts from a feasible point)
        self._estimates[L_value] = (up, self._polish(L_value, up, state["x"])[0])
        return up

    def screen(self, L_value: int, B_value) -> Params:
        return self.build(L_value, B_value, dps=30)

    def build(self, L_value: int, B_value, dps: int = 50) -> Params:
        """The construction at budget ``B`` from the plan's point (module docstring); beyond
        ``L*`` the construction for ``L*`` (it does not solve select there)."""
        L_value = _check_count(L_value)
        with mpmath.workdps(dps):
            Bv = _check_budget(B_value)
            L_plan = min(L_value, self.l_star)
            if L_plan == 1 and not self.fixed:
                x = self._witness_point(float(Bv))
            else:
                x = self.plan(L_plan, float(Bv))[0]
            th_a, th_b, P, Q = (mpmath.mpf(float(v)) for v in x)
            if self.fixed:
                th_a, th_b, Q = mpmath.pi, mpmath.mpf(0), mpmath.mpf(0)
            return self._params(L_value, Bv, th_a, th_b, P, Q)

    def _witness_point(self, B: float):
        """``L = 1``: the grid's best point, polished (every budget has positive slack: ``w_c``
        along ``h_a - h_s`` reads ``(s, a)`` above ``(s)`` and ``(s, b)``)."""
        key = (1, B)
        if key not in self._plans:
            self._plans[key] = max((self._polish(1, B, x) for x in self._grid(1, B)), key=lambda p: p[1])
        return self._plans[key][0]

    def _params(self, L: int, Bv, th_a, th_b, P, Q) -> Params:
        cell = self.cell
        d = cell.d
        lo, hi, u = errors(L, d, th_a, th_b, P, Q, mpmath)
        reach = reaches(cell, Bv, th_a, th_b, P, Q, u, mpmath)
        top = min(h - r[0] for h, r in zip(hi, reach))
        bot = max(lw - r[1] for lw, r in zip(lo, reach))
        w0 = (top + bot) / 2
        # each constant at the middle of its interval, clipped to its reach
        C = [min(max((lw + h) / 2, w0 + r[0]), w0 + r[1]) for lw, h, r in zip(lo, hi, reach)]
        zero = [mpmath.mpf(0)] * d
        arr = lambda x: np.array(x, dtype=object)
        if cell.kind.centred:
            r2, r6 = 1 / mpmath.sqrt(2), 1 / mpmath.sqrt(6)
            top_v = arr([r2, -r2] + zero[2:])
            # d = 2: no second centred direction (the values are +-h_s, sin th_x = 0)
            across = arr([r6, r6, -2 * r6] + zero[3:]) if d >= 3 else arr(zero)
            one = arr([1 / mpmath.sqrt(d)] * d)
        else:
            top_v, across, one = arr([mpmath.mpf(1)] + zero[1:]), arr([mpmath.mpf(0), mpmath.mpf(1)] + zero[2:]), None
        dirs = [mpmath.cos(t) * top_v + mpmath.sin(t) * across for t in (mpmath.mpf(0), th_a, th_b)]
        w_c = P * top_v + Q * across
        if cell.kind.centred:
            nu = NU * Bv
            om = mpmath.sqrt(max(Bv**2 - P**2 - Q**2, 0))
            emb = []
            for v, t, c in zip(dirs, (mpmath.mpf(0), th_a, th_b), C):
                c_q = nu * (P * mpmath.cos(t) + Q * mpmath.sin(t))
                mu = (c - w0 - c_q) / om if om > 0 else mpmath.mpf(0)
                emb.append(nu * v + mu * one)
            w = w_c + om * one
        else:
            emb = []
            for v, c, x in zip(dirs, C, u):
                lam = (c - w0) * mpmath.sqrt(d) / x if x != 0 else LAM_MIN * Bv
                lam = min(max(lam, LAM_MIN * Bv), Bv)
                emb.append(lam * v)
            w = w_c
        vectors = {"e_s": emb[0], "e_a": emb[1], "e_b": emb[2], "w": w}
        return Params(cell, vectors, {"w0": w0})
