"""Test helpers: an independent pure-Python reference of the model, random parameters, exact
conversions of backend numbers, and the error scale used for float64 tolerances.

The reference :func:`ref_forward` is written from the README's section "The model in brief"
with plain Python lists and loops; it does not import anything from the toolkit's forward pass.  It runs on any
number system given as ``(num, exp, sqrt)`` -- ``math`` floats or ``mpmath`` at high precision.
"""

from __future__ import annotations

import itertools
import math
import os
from types import SimpleNamespace

import flint
import mpmath
import numpy as np

from constructions.cell import ATTENTIONS, NORMS, READOUTS, Cell, Params

ALL_CELLS = list(itertools.product(ATTENTIONS, NORMS, READOUTS))
CELL_IDS = ["/".join(c) for c in ALL_CELLS]

FLOAT = SimpleNamespace(num=float, exp=math.exp, sqrt=math.sqrt)
MP = SimpleNamespace(num=mpmath.mpf, exp=mpmath.exp, sqrt=mpmath.sqrt)

U64 = 2.0**-53  # unit round-off of float64


def examples(n: int) -> int:
    """Per-test hypothesis example count: modest by default, 10x under HYPOTHESIS_PROFILE=explore."""
    return n * 10 if os.environ.get("HYPOTHESIS_PROFILE") == "explore" else n


# --------------------------------------------------------------------------- reference model


def ref_forward(cell: Cell, vectors: dict, scalars: dict, tokens: str, lib=FLOAT):
    """The model (README, "The model in brief") by hand.  Returns every intermediate quantity.

    ``vectors``/``scalars`` hold plain numbers (or lists of them) with the names of
    ``cell.vector_names()`` / ``cell.scalar_names()``.
    """
    num, exp, sqrt = lib.num, lib.exp, lib.sqrt
    d = cell.d
    eps = num(cell.eps)
    vec = {k: [num(x) for x in v] for k, v in vectors.items() if k != "u"}
    U = [[num(x) for x in row] for row in vectors["u"]] if "u" in vectors else None

    def layernorm(v):
        mean = sum(v) / d
        centred = [x - mean for x in v]
        var = sum(x * x for x in centred) / d  # population variance
        out = [x / sqrt(var + eps) for x in centred]
        if cell.learned:
            out = [gi * oi + bi for gi, oi, bi in zip(vec["g"], out, vec["beta"])]
        return out

    def dot(x, y):
        return sum(a * b for a, b in zip(x, y))

    E = {t: vec[f"e_{t}"] for t in "sab" if f"e_{t}" in vec}
    H = {t: (layernorm(v) if cell.pre else v) for t, v in E.items()}
    tau = 1 / sqrt(num(d))
    scores = [tau * dot(H["s"], H[t]) for t in tokens]
    if cell.attention == "softmax":
        m = max(scores)
        ex = [exp(s - m) for s in scores]
        total = sum(ex)
        weights = [x / total for x in ex]
    else:
        weights = list(scores)
    A = [sum(weights[j] * H[t][i] for j, t in enumerate(tokens)) for i in range(d)]
    r = [E["s"][i] + A[i] for i in range(d)]
    z = layernorm(r) if cell.post else r
    if cell.readout == "regression":
        out = dot(vec["w"], z) + num(scalars["w0"])
    else:
        out = [dot(row, z) + num(bc) for row, bc in zip(U, scalars["b"])]
    return SimpleNamespace(h=H, tau=tau, scores=scores, weights=weights, A=A, r=r, z=z, out=out)


def params_as_lists(params: Params):
    """The exact (mpf) parameters of ``params`` as plain lists, for :func:`ref_forward`."""
    vectors = {k: v.tolist() for k, v in params.vectors.items()}
    scalars = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in params.scalars.items()}
    return vectors, scalars


def ref_mp(params: Params, tokens: str, dps: int = 80):
    """The reference forward pass in mpmath at ``dps`` digits."""
    vectors, scalars = params_as_lists(params)
    with mpmath.workdps(dps):
        return ref_forward(params.cell, vectors, scalars, tokens, MP)


# --------------------------------------------------------------------------- random parameters


def random_params(cell: Cell, rng: np.random.Generator, classes: int = 4, scale: float = 1.0) -> Params:
    """Normal-ish parameters (floats, so exact in every backend) for ``cell``.

    Embeddings are ``scale * N(0, 1)``: for d >= 3 a normal vector is far from constant with
    overwhelming probability, so LayerNorm is well conditioned.
    """
    d = cell.d
    vectors = {name: scale * rng.normal(size=d) for name in ("e_s", "e_a", "e_b") if name in cell.vector_names()}
    if cell.learned:
        vectors["g"] = 1.0 + 0.5 * rng.normal(size=d)
        vectors["beta"] = 0.5 * rng.normal(size=d)
    if cell.readout == "regression":
        vectors["w"] = rng.normal(size=d)
        scalars = {"w0": float(rng.normal())}
    else:
        vectors["u"] = rng.normal(size=(classes, d))
        scalars = {"b": rng.normal(size=classes)}
    return Params(cell, vectors, scalars)


# --------------------------------------------------------------------------- exact conversions


def to_mp(x) -> mpmath.mpf:
    """A backend number as an exact mpf (arb: its midpoint)."""
    if isinstance(x, flint.arb):
        return _exact_mpf(*x.mid().man_exp())
    if isinstance(x, mpmath.mpf):
        return x
    return mpmath.mpf(float(x))


def arb_radius(x: flint.arb) -> mpmath.mpf:
    return _exact_mpf(*x.rad().man_exp())


def _exact_mpf(man, exp) -> mpmath.mpf:
    """man * 2**exp as an mpf without rounding (mpf() rounds to the working precision)."""
    man, exp = int(man), int(exp)
    with mpmath.workprec(max(53, man.bit_length() + 2)):
        return mpmath.mpf((man, exp))


def as_mp_list(out):
    """Output of the toolkit (scalar or 1-D array) as a list of exact mpf."""
    arr = np.atleast_1d(np.asarray(out, dtype=object))
    return [to_mp(x) for x in arr.ravel()]


# --------------------------------------------------------------------------- error scale


def error_scale(params: Params, n_a: int, n_b: int = 0) -> mpmath.mpf:
    """The magnitude that the rounding errors of one forward pass are relative to.

    Rounding perturbs every quantity by a few ulps of the *magnitudes* involved, not of the
    result, so the absolute error of the output is bounded (to first order, times the number of
    roundings on the longest chain, i.e. about the number of summed terms) by this scale:

    * ``R``: the residual's magnitude ``|e_s| + sum_j |weight_j| |h_j|`` times ``(1 + max|score|)``
      (exp turns an absolute score error into a relative weight error) times the pre-norm
      amplification ``kappa = |e_x| / |centred e_x|``;
    * post-norm multiplies absolute errors in ``r`` by ``|dN/dr| <= sqrt(d) max(1,|g|) / |centred r|``
      and adds the size of ``z``;
    * the read-out multiplies by ``|w|`` (``|u_c|``) and adds ``|w0|`` (``|b_c|``).
    """
    return error_scales(params, [(n_a, n_b)])[0]


def error_scales(params: Params, pairs) -> list:
    """:func:`error_scale` for many counts ``(n_a, n_b)``; 30 digits suffice for a scale."""
    cell = params.cell
    toks = "sa" + ("b" if cell.distractor else "")
    V = params.vectors
    vectors, scalars = params_as_lists(params)
    out = []
    with mpmath.workdps(30):
        ref = ref_forward(cell, vectors, scalars, toks, MP)  # token values and their scores

        def norm(v):
            return mpmath.sqrt(sum(x * x for x in v))

        def centred(v):
            mean = sum(v) / len(v)
            return [x - mean for x in v]

        sigma = dict(zip(toks, ref.scores))
        hn = {t: norm(ref.h[t]) for t in toks}
        kappa = 1
        if cell.pre:
            kappa = max(norm(V[f"e_{t}"]) / norm(centred(V[f"e_{t}"])) for t in toks)
        smax = max(abs(s) for s in ref.scores)
        es = norm(V["e_s"])
        gmax = max([1] + [abs(x) for x in V["g"]]) if cell.learned else 1
        zmax = gmax * mpmath.sqrt(cell.d) + (norm(V["beta"]) if cell.learned else 0)
        if cell.readout == "regression":
            rows = [(norm(V["w"]), abs(params.scalars["w0"]))]
        else:
            rows = [(norm(row), abs(bc)) for row, bc in zip(V["u"], params.scalars["b"])]
        for n_a, n_b in pairs:
            counts = {"s": 1, "a": n_a, "b": n_b}
            present = [t for t in toks if counts[t] > 0]
            if cell.attention == "softmax":
                m = max(sigma[t] for t in present)
                wt = {t: counts[t] * mpmath.exp(sigma[t] - m) for t in present}
                total = sum(wt.values())
                coef = {t: wt[t] / total for t in present}
                A_abs = max(hn[t] for t in present)
            else:
                coef = {t: counts[t] * sigma[t] for t in present}
                A_abs = sum(abs(coef[t]) * hn[t] for t in present)
            R = (es + A_abs) * kappa * (1 + smax)
            if cell.post:
                r = [V["e_s"][i] + sum(coef[t] * ref.h[t][i] for t in present) for i in range(cell.d)]
                R = R * mpmath.sqrt(cell.d) * gmax / norm(centred(r)) + zmax
            out.append(max(wn * R + bn for wn, bn in rows))
    return out
