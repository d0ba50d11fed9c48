r"""Classification of the select task read last, softmax attention with pre-norm at ``eps = 0``
(bare, gain, gain_bias; LayerNorm and RMSNorm, ``d >= 3``): a head that cancels the distractor
exactly.

*The logits.*  Values ``h_x = N(e_x)`` (bare) or ``g * N(e_x) + beta``; an input with ``n_a``
tokens ``a``, ``n_b`` tokens ``b`` and last token ``q`` in ``{a, b}`` has softmax weights
``w^q_j = exp(tau <h_q, h_j>)``, ``D^q = w^q_s + n_a w^q_a + n_b w^q_b > 0`` and the output ``z =
e_q + (w^q_s h_s + n_a w^q_a h_a + n_b w^q_b h_b)/D^q``, so the logit of class ``c`` is ``F^q_c /
D^q`` with

    F^q_c = w^q_s (K^q_c + p_c) + n_a w^q_a (K^q_c + q_c) + n_b w^q_b (K^q_c + r_c),

``K^q_c = <u_c, e_q> + b_c``, ``p_c, q_c, r_c = <u_c, h_s>, <u_c, h_a>, <u_c, h_b>``.

*The cancellation.*  Every row satisfies ``<u_c, e_a - e_b> = 0`` and the biases are ``b_c =
-<u_c, e_a> - r_c``: then ``K^a_c + r_c = K^b_c + r_c = 0`` and the distractor's term vanishes
exactly at both queries.  With ``alpha_c = p_c - r_c = <u_c, h_s - h_b>``, ``beta_c = q_c - r_c =
<u_c, h_a - h_b>``, ``rho_q = w^q_a / w^q_s = exp(tau <h_q, h_a - h_s>)`` and ``sigma_q = w^q_b /
w^q_s``,

    logit_c = (alpha_c + t beta_c) / (1 + t + n_b sigma_q),   t = rho_q n_a:

an affine function ``l_c(t) = alpha_c + t beta_c`` of the one position ``t``, divided by a positive
number common to all classes.  The input ``(s)`` attends to itself: ``z = e_s + h_s`` and
``logit_c = <u_c, e_s - e_a> + alpha_c``.

*The rows.*  Let ``M`` be the ``3 x d`` matrix of rows ``v_0 = e_a - e_b``, ``v_1 = h_s - h_b``,
``v_2 = h_a - h_b`` (independent: checked, else ``ValueError``), ``Gamma = M M^T`` and ``H =
Gamma^{-1}``.  The smallest ``u`` with ``M u = xi = (0, alpha, beta)`` is ``u = M^T H xi``, of
norm ``|u|^2 = xi^T H xi``.  For ``y = e_s - e_a``, ``<u, y> = xi^T H M y = alpha a_1 + beta a_2``
with ``(a_0, a_1, a_2) = H M y``, so the ``(s)`` logit is ``(1 + a_1) l_c(t_s)`` at the position
``t_s = a_2/(1 + a_1)`` (``1 + a_1 > 0``: checked).  Every input is thus one position ``t`` with a
positive factor: the class ``n`` holds the positions ``rho_a n`` (query ``a``, ``n >= 1``),
``rho_b n`` (query ``b``, ``n <= L - 1``) and, for ``n = 0``, ``t_s``; the factor is at least
``1/W_n`` with ``W_n`` the largest ``1 + t + n_b sigma_q`` of the class (``n_b <= L - n``, and
``1/(1 + a_1)`` for ``(s)``).

*The head in t* (weighted collinear).  With the classes' positions in ``[lo_n, hi_n]``, gaps
``G_n = lo_{n+1} - hi_n > 0``, slopes ``k_0 = -1``, ``k_{n+1} = k_n + m (W_n + W_{n+1})/G_n`` with
``m = 2 / sum_n (W_n + W_{n+1})/G_n`` (so ``k_L = 1``), breakpoints ``T_n = hi_n + G_n W_n/(W_n +
W_{n+1})`` and intercepts ``A_0 = 0``, ``A_{n+1} = A_n - (k_{n+1} - k_n) T_n`` (so ``l_n(T_n) =
l_{n+1}(T_n)``): for a position ``p <= hi_n`` and a class ``j > n``, ``l_n(p) - l_j(p) =
sum_{i=n}^{j-1} (k_{i+1} - k_i)(T_i - p) >= (k_{n+1} - k_n)(T_n - hi_n) = m W_n`` (every term is
non-negative), and ``j < n`` alike.  Dividing by the factor's ``W_n``: every input keeps the logit
margin ``m`` in units of the head's scale.  The rows are ``xi_c = S (0, A_c + C, k_c)``: a common
``C`` adds ``S C`` to every ``l_c``, which changes no argmax, and is chosen to minimise ``max_c
Q_c``, ``Q_c = (A_c + C, k_c) H' (A_c + C, k_c)^T`` (``H'`` the lower ``2 x 2`` block of ``H``);
``S = (1 - 2^-50) / sqrt(max_c Q_c)`` keeps every ``|u_c| < 1``.  The certified margin is then at
least ``S m``; the judge certifies it on balls, non-neighbours included.

*The embeddings* (every one of norm at most ``SIGMA = 1 - 2^-40``).  The values lie on a sphere of
radius ``R`` (``sqrt(d)`` bare; with a gain ``g = (R/sqrt d) 1``, ``R <= 1``, and ``beta = 0``) at
unit directions ``f`` of the norm's image (LayerNorm: centred orthonormal ``f_1, f_2, f_3``;
RMSNorm: the axes)

    h_s/R = c f_1 + s f_2,   h_b/R = c f_1 - s f_2,   h_a/R = c f_1 + s (cos psi f_2 + sin psi f_3),

``c, s = cos(theta/2), sin(theta/2)``.  Then ``<h_a - h_b, h_a - h_s> = 0`` (``h_a`` lies on the
sphere over the diameter ``[h_s, h_b]``), i.e. ``rho_a = rho_b``: the two queries put class ``n`` at
one position.  LayerNorm at ``d = 3`` (a centred plane): ``theta = pi``, ``f_1 = 0``.  LayerNorm:
``e_a = mu 1/sqrt(d) + nu h_a/R``, ``e_s = mu 1/sqrt(d) + nu h_s/R``, ``e_b = -mu 1/sqrt(d) + nu
h_b/R`` (``mu^2 + nu^2 = SIGMA^2``: the means make ``v_0`` independent of the values).  RMSNorm:
``e_x = l_x h_x/R`` with lengths ``l_a, l_b, l_s``; then ``<u, e_a - e_b> = 0`` ties ``<u, h_a>`` to
``<u, h_b>`` and ``d >= 3`` is needed for two free read-outs (at ``d = 2`` every row is a multiple
of one vector and ``l_c`` has one root for all ``c``: two classes).  The shape (``theta, psi``,
``nu/SIGMA`` or the ratios of the lengths, ``R`` with a gain) is chosen by a float optimisation
(Nelder-Mead) of ``S m`` at ``L`` (a screen); the head is rebuilt from the verifier's values at
``dps`` digits.  Nothing is claimed max-min: the biases are spent on the cancellation, so the
intercepts ``alpha_c`` are read-outs too, and the ellipse ``Q <= 1`` bounds slopes and intercepts
together.

*No L_star: B_min = 0 as an infimum at every L.*  With ``eps = 0`` the norm is scale invariant:
``e_x -> lam e_x`` (``lam > 0``) leaves ``h``, the weights and every ``t`` unchanged and
multiplies ``v_0`` and ``y`` by ``lam``; the rows ``u_c`` still satisfy ``<u_c, e_a - e_b> = 0``,
and with ``b_c = -<u_c, lam e_a> - r_c`` the ``a, b`` inputs keep their logits while ``(s)``'s are
``lam <u_c, y> + alpha_c = (1 + lam a_1) l_c(lam a_2/(1 + lam a_1))``.  Scaling the head ``u_c, b_c
-> kappa u_c, kappa b_c`` multiplies every logit by ``kappa > 0``.  So the certified head at
``(lam, kappa)`` classifies every input with margin at least ``kappa S m``: ``t_s(lam)`` is monotone
in ``lam`` and lies between ``0`` and ``t_s``, both in ``[lo_0, hi_0]``, and its factor ``1/(1 + lam
a_1)`` is at most ``max(1, 1/(1 + a_1)) <= W_0``.  As ``lam, kappa -> 0`` every embedding and row
goes to 0 (bare: ``B -> 0``).  With a gain, ``g -> gam g`` (``gam > 0``) scales the values by
``gam``: the right angle ``<h_a - h_b, h_a - h_s> = 0`` and the independence of ``v_1, v_2`` are
scale invariant, so the cancellation holds and every input with ``n_a = n`` sits at ``rho(gam) n``
with ``rho(gam) > 0``, strictly increasing in ``n``; and ``t_s(lam) -> 0`` as ``lam -> 0``, so for
``lam`` small enough class 0 (``{0, t_s(lam)}``) lies below ``rho(gam)``, every gap ``G_n`` is
positive and the weighted collinear head above exists at that geometry, with a positive margin.
So for every ``gam > 0`` some ``lam`` and every ``kappa > 0`` give a head that counts, and
``gam, lam, kappa -> 0`` takes every vector to 0: ``B_min = 0`` as an infimum with a gain too.
The tests certify the bare scaling at ``lam = kappa = 2^-12``.

*The bound* (:func:`bounds.margin.margin_upper`): the count task's at the last read, its sub-task
``n_b = 0`` (:mod:`constructions.select_last_points`, "The bound": the inputs ``(s, a^n)`` read at
their last token are select inputs with the same outputs).
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np

from constructions import laws, registry
from constructions.cell import Cell, Params
from constructions.classification import ClassificationDesign, check_size

#: every embedding's norm is at most this (rounding stays inside the unit ball)
SIGMA = 1 - mpmath.mpf(2) ** -40
#: the smallest and (one minus) the largest share ``nu/SIGMA`` of a LayerNorm embedding's centred
#: part (a nearly constant embedding would leave the float screen's norm undefined)
NU_MIN = 2.0**-16
#: the rows are scaled to norm at most this
SHRINK = 1 - mpmath.mpf(2) ** -50


def built(cell: Cell) -> bool:
    """Whether ``cell`` (classification) is served by :class:`CancelSelectLastHead`."""
    return registry.builds("select_last_cancel_head", cell)


class CancelSelectLastHead(ClassificationDesign):
    """The unit-norm head of the select task read last, softmax attention with pre-norm at
    ``eps = 0`` (module docstring); the interface of
    :class:`~constructions.classification.ClassificationDesign` (``build``)."""

    def __init__(self, cell: Cell):
        if not built(cell):
            from constructions.refusals import refusal

            raise ValueError(f"{cell.describe()}: {refusal(cell) or 'not served by CancelSelectLastHead'}")
        self.cell, self.family, self.geometry, self.foot, self.pencil = cell, laws.family(cell), None, None, None

    # ----------------------------------------------------------------- the shape
    def planar(self) -> bool:
        """LayerNorm at ``d = 3``: the centred plane, ``theta = pi``."""
        return self.cell.kind.centred and self.cell.d == 3

    def unpack(self, x) -> dict:
        """The shape from unconstrained floats ``x`` (Nelder-Mead's variables)."""
        sig = lambda v: 1 / (1 + math.exp(-max(min(v, 50.0), -50.0)))
        x = list(x)
        shape = {"theta": math.pi if self.planar() else math.pi * sig(x.pop(0)),
                 "psi": math.pi * sig(x.pop(0))}
        if self.cell.kind.centred:
            shape["nu"] = NU_MIN + (1 - 2 * NU_MIN) * sig(x.pop(0))
        else:
            shape["lb"], shape["ls"] = math.exp(max(min(x.pop(0), 8.0), -8.0)), math.exp(max(min(x.pop(0), 8.0), -8.0))
        if self.cell.affine.gain:
            shape["R"] = sig(x.pop(0))
        return shape

    def embeddings(self, shape: dict, dps: int | None = 50) -> dict:
        """``e_s, e_a, e_b`` (and ``g``, ``beta``) of ``shape`` (module docstring), mpf at ``dps``
        digits (``None``: float64), and under ``"_h"`` the values ``h_x = R unit_x`` they are built
        to have (the screen's; the build reads the verifier's)."""
        d, cell = self.cell.d, self.cell
        m = mpmath if dps else math
        num = mpmath.mpf if dps else float
        with mpmath.workdps(dps or 15):
            sigma = num(SIGMA)
            f = _frame(cell, self.planar(), num, m.sqrt)
            c, s = m.cos(num(shape["theta"]) / 2), m.sin(num(shape["theta"]) / 2)
            psi = num(shape["psi"])
            unit = {"s": c * f[0] + s * f[1], "b": c * f[0] - s * f[1],
                    "a": c * f[0] + s * (m.cos(psi) * f[1] + m.sin(psi) * f[2])}
            R = num(shape["R"]) * sigma if cell.affine.gain else m.sqrt(num(d))
            if cell.kind.centred:
                nu = sigma * num(shape["nu"])
                mu = m.sqrt(sigma**2 - nu**2)
                one = np.array([1 / m.sqrt(num(d))] * d, dtype=object if dps else float)
                vec = {f"e_{t}": (-mu if t == "b" else mu) * one + nu * unit[t] for t in "sab"}
            else:
                length = {"a": num(1), "b": num(shape["lb"]), "s": num(shape["ls"])}
                top = max(length.values())
                vec = {f"e_{t}": sigma * length[t] / top * unit[t] for t in "sab"}
            if cell.affine.gain:
                vec["g"] = np.array([R / m.sqrt(num(d))] * d, dtype=object if dps else float)
            if cell.affine.bias:
                vec["beta"] = np.array([num(0)] * d, dtype=object if dps else float)
            vec["_h"] = {t: R * unit[t] for t in "sab"}
            return vec

    def screen(self, x, L_value: int) -> float:
        """The margin ``S m`` of the shape ``unpack(x)`` on its designed values, float64
        (``-inf`` where degenerate)."""
        vec = self.embeddings(self.unpack(x), None)
        e = {t: vec[f"e_{t}"] for t in "sab"}
        try:
            return head(e, vec["_h"], 1 / math.sqrt(self.cell.d), L_value, False)[2]
        except (ValueError, ZeroDivisionError, np.linalg.LinAlgError, OverflowError):
            return -math.inf

    def best_shape(self, L_value: int) -> dict:
        """The shape maximising :meth:`screen` at ``L`` (cached)."""
        return _best_shape(self, L_value)

    # ----------------------------------------------------------------- the head
    def build(self, L_value: int, dps: int = 50) -> Params:
        """The head at ``L`` (refused beyond :func:`constructions.classification.check_size`)."""
        if isinstance(L_value, bool) or not isinstance(L_value, (int, np.integer)) or L_value < 1:
            raise ValueError(f"L must be a positive integer, got {L_value!r}")
        L_value = int(L_value)
        check_size(self.cell, L_value)
        vec = self.embeddings(self.best_shape(L_value), dps)
        vec.pop("_h")
        u, b, _ = _build_head(self.cell, vec, L_value, dps)
        return Params(self.cell, {**vec, "u": u}, {"b": b})


def _frame(cell: Cell, planar: bool, num=mpmath.mpf, sqrt=mpmath.sqrt) -> list:
    """Three orthonormal d-vectors of the norm's image (numbers ``num``): the axes (RMSNorm) or
    the centred axes made orthonormal (LayerNorm; the first 0 at ``d = 3``, where the image is a
    plane)."""
    d = cell.d
    axes = [np.array([num(int(i == j)) for i in range(d)], dtype=object) for j in range(3)]
    if not cell.kind.centred:
        return axes
    out = []
    for a in axes[:2 if planar else 3]:
        v = a - sum(a) / d
        for f in out:
            v = v - f * sum(v * f)
        out.append(v / sqrt(sum(v * v)))
    return ([np.array([num(0)] * d, dtype=object)] if planar else []) + out


def _build_head(cell: Cell, vec: dict, L_value: int, dps: int):
    """:func:`head` on the verifier's values and embeddings at ``dps`` digits."""
    from verify.forward import numbers

    zero = Params(cell, {**vec, "u": np.zeros((L_value + 1, cell.d))}, {"b": [0] * (L_value + 1)})
    nums = numbers(zero, f"mp{dps}", readout=False)
    with nums.backend.context():
        return head(nums.e, nums.h, nums.tau, L_value, True)


def head(e: dict, h: dict, tau, L_value: int, mp: bool):
    """``(u, b, margin)``: the rows, biases and the margin ``S m`` of the head of the module
    docstring on the embeddings ``e`` and values ``h`` (token -> vector), in mpmath (``mp``: the
    build, at the working precision) or float64 (the screen: ``u, b`` are None).  ``ValueError``
    where the construction does not apply (dependent ``v_0, v_1, v_2``, ``1 + a_1 <= 0``, classes
    out of order)."""
    L = L_value
    dot = (lambda x, y: mpmath.fsum(x * y)) if mp else (lambda x, y: float(np.dot(x, y)))
    exp = mpmath.exp if mp else math.exp
    e = {t: np.asarray(v, dtype=object if mp else float) for t, v in e.items()}
    h = {t: np.asarray(v, dtype=object if mp else float) for t, v in h.items()}
    rho = {q: exp(tau * dot(h[q], h["a"] - h["s"])) for q in "ab"}
    sig = {q: exp(tau * dot(h[q], h["b"] - h["s"])) for q in "ab"}
    M = [e["a"] - e["b"], h["s"] - h["b"], h["a"] - h["b"]]
    gram = [[dot(x, y) for y in M] for x in M]
    if mp:
        H = mpmath.inverse(mpmath.matrix(gram))
        H = [[H[i, j] for j in range(3)] for i in range(3)]
    else:
        if np.linalg.cond(gram) > 1e12:
            raise ValueError("v_0, v_1, v_2 are dependent")
        H = np.linalg.inv(np.array(gram)).tolist()
    My = [dot(x, e["s"] - e["a"]) for x in M]
    a1, a2 = (sum(H[i][j] * My[j] for j in range(3)) for i in (1, 2))
    if not a1 > -1:
        raise ValueError("1 + a_1 <= 0: the input (s) is read with the wrong sign")
    t_s = a2 / (1 + a1)
    lo, hi, W = [], [], []
    for n in range(L + 1):
        pts, ws = ([0 * t_s, t_s], [1 / (1 + a1), 1 + L * sig["b"]]) if n == 0 else ([], [])
        for q, ok in (("a", n >= 1), ("b", 1 <= n <= L - 1)):
            if ok:
                pts.append(rho[q] * n)
                ws.append(1 + rho[q] * n + (L - n) * sig[q])
        lo.append(min(pts))
        hi.append(max(pts))
        W.append(max(ws))
    gaps = [lo[n + 1] - hi[n] for n in range(L)]
    if not all(g > 0 for g in gaps):
        raise ValueError("two classes meet")
    steps = [(W[n] + W[n + 1]) / gaps[n] for n in range(L)]
    m = 2 / (mpmath.fsum(steps) if mp else math.fsum(steps))
    k, A = [-1 + 0 * m], [0 * m]
    for n in range(L):
        dk = m * steps[n]
        A.append(A[-1] - dk * (hi[n] + gaps[n] * W[n] / (W[n] + W[n + 1])))
        k.append(k[-1] + dk)
    C = _centre(np.array([float(v) for v in A]), np.array([float(v) for v in k]),
                [[float(H[i][j]) for j in (1, 2)] for i in (1, 2)])
    Q = [H[1][1] * (a + C) ** 2 + 2 * H[1][2] * (a + C) * kc + H[2][2] * kc**2 for a, kc in zip(A, k)]
    S = (SHRINK if mp else float(SHRINK)) / (mpmath.sqrt(max(Q)) if mp else math.sqrt(max(Q)))
    if not mp:
        return None, None, float(S * m)
    rows = []
    for a, kc in zip(A, k):
        xi = [0, S * (a + C), S * kc]
        coef = [mpmath.fsum(H[i][j] * xi[j] for j in range(3)) for i in range(3)]
        rows.append(coef[0] * M[0] + coef[1] * M[1] + coef[2] * M[2])
    b = [-dot(r, e["a"] + h["b"]) for r in rows]
    return np.array(rows, dtype=object), b, S * m


def _centre(A: np.ndarray, k: np.ndarray, H) -> float:
    """A common shift ``C`` near the minimiser of ``max_c Q_c`` (a convex function of ``C``; float):
    six rounds of a 17-point grid, each zoomed on the best point's neighbours.  Any ``C`` gives a
    valid head (the scale ``S`` is computed from it); only the margin depends on it."""
    span = float(np.max(A) - np.min(A)) + 1.0
    lo, hi = -float(np.max(A)) - span, -float(np.min(A)) + span
    for _ in range(6):
        C = np.linspace(lo, hi, 17)
        x = A[:, None] + C[None, :]
        worst = np.max(H[0][0] * x * x + 2 * H[0][1] * x * k[:, None] + H[1][1] * (k * k)[:, None], axis=0)
        i = int(np.argmin(worst))
        lo, hi = C[max(i - 1, 0)], C[min(i + 1, 16)]
    return float(C[i])


@functools.lru_cache(maxsize=None)
def _best_shape(des: CancelSelectLastHead, L_value: int) -> dict:
    """Nelder-Mead on :meth:`CancelSelectLastHead.screen` from the best of a small grid."""
    from scipy import optimize

    cell = des.cell
    dims = (0 if des.planar() else 1) + 1 + (1 if cell.kind.centred else 2) + (1 if cell.affine.gain else 0)
    f = lambda x: -math.log(max(des.screen(x, L_value), 1e-300))
    grid = [np.array(p) for p in sorted({p[:dims] for p in
            [(a, b, c, c2, r) for a in (-1.0, 0.5, 2.0) for b in (-1.0, 0.5, 2.0)
             for c in (-1.5, 0.5) for c2 in (-1.0, 1.0) for r in (0.0, 3.0)]})]
    start = min(grid, key=f)
    res = optimize.minimize(f, start, method="Nelder-Mead",
                            options={"xatol": 1e-5, "fatol": 1e-9, "maxfev": 100 * dims})
    best = res.x if res.fun < f(start) else start
    if not f(best) < 690:
        raise ValueError(f"{cell.describe()}: no shape separates the classes at L = {L_value}")
    return des.unpack(best)
