"""Test helpers: an independent pure-Python reference of the model, random parameters, exact
conversions of backend numbers, the error scale used for float64 tolerances, and the
classification heads' references (the best head of given outputs, by linear programming).

The reference :func:`ref_forward` is written from the README's section "The model in brief"
and the specification's extensions (norm kinds LayerNorm and RMSNorm, affines bare, gain and
gain_bias) with plain Python lists and loops; it does not import anything from the toolkit's
forward pass and reads only the cell's description (its names and placement).  It runs on any
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
from verify import reduced

ALL_CELLS = list(itertools.product(ATTENTIONS, NORMS, READOUTS))
CELL_IDS = ["/".join(c) for c in ALL_CELLS]

KIND_NAMES = ("layernorm", "rmsnorm")
LEARNED_AFFINES = ("gain", "gain_bias")


def _norm_parts(variant):
    """``(norm kind, affine)`` pairs a variant can carry (``affine`` None: the variant's own)."""
    if variant == "none":
        return [("layernorm", None)]
    if variant.endswith("_bare"):
        return [(kind, None) for kind in KIND_NAMES]
    return [(kind, affine) for kind in KIND_NAMES for affine in LEARNED_AFFINES]


#: every architecture: ``(attention, variant, readout, norm kind, affine)`` -- attention x
#: placement x kind x affine x read-out (the kind is immaterial without a norm)
ARCHS = [(attention, variant, readout, kind, affine)
         for attention, variant, readout in ALL_CELLS for kind, affine in _norm_parts(variant)]
ARCH_IDS = ["/".join((att, var, ro) + ((kind, aff or "bare") if var != "none" else ()))
            for att, var, ro, kind, aff in ARCHS]


def arch_cell(arch, **kw) -> Cell:
    """The cell of an :data:`ARCHS` entry; ``kw`` as for :class:`Cell` (``d``, ``eps``, ...)."""
    attention, variant, readout, kind, affine = arch
    return Cell(attention, variant, readout, norm=kind, affine=affine, **kw)


FLOAT = SimpleNamespace(num=float, exp=math.exp, sqrt=math.sqrt)
MP = SimpleNamespace(num=mpmath.mpf, exp=mpmath.exp, sqrt=mpmath.sqrt)

U64 = 2.0**-53  # unit round-off of float64


def examples(n: int) -> int:
    """Per-test hypothesis example count: modest by default, 10x under HYPOTHESIS_PROFILE=explore."""
    return n * 10 if os.environ.get("HYPOTHESIS_PROFILE") == "explore" else n


# --------------------------------------------------------------------------- reference model


def ref_centre(cell: Cell, v: list) -> list:
    """The centring of the cell's norm kind: ``v - mean(v)`` (LayerNorm), ``v`` (RMSNorm)."""
    if cell.kind.name == "layernorm":
        mean = sum(v) / len(v)
        return [x - mean for x in v]
    if cell.kind.name == "rmsnorm":
        return list(v)
    raise ValueError(f"no reference for the norm kind {cell.kind.name}")


def ref_norm(cell: Cell, v: list, vec: dict, eps, sqrt) -> list:
    """``LN(v)`` by hand: ``N(v) = (v - mean)/sqrt(var + eps)`` (LayerNorm, population
    variance) or ``v/sqrt(mean(v^2) + eps)`` (RMSNorm), then ``N(v)`` (bare), ``g * N(v)``
    (gain) or ``g * N(v) + beta`` (gain_bias) with ``vec["g"]``, ``vec["beta"]``."""
    c = ref_centre(cell, v)
    stat = sum(x * x for x in c) / len(v)  # the population variance, or the mean square
    out = [x / sqrt(stat + eps) for x in c]
    name = cell.affine.name
    if name in ("gain", "gain_bias"):
        out = [gi * oi for gi, oi in zip(vec["g"], out)]
    if name == "gain_bias":
        out = [oi + bi for oi, bi in zip(out, vec["beta"])]
    return out


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

    def norm(v):
        return ref_norm(cell, v, vec, eps, sqrt)

    def dot(x, y):
        return sum(a * b for a, b in zip(x, y))

    E = {t: vec[f"e_{t}"] for t in "sab" if f"e_{t}" in vec}
    H = {t: (norm(v) if cell.pre else v) for t, v in E.items()}
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
    z = norm(r) if cell.post else r
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

    Embeddings are ``scale * N(0, 1)``: for d >= 3 a normal vector is far from constant (and
    from zero) with overwhelming probability, so the norm is well conditioned.
    """
    d = cell.d
    vectors = {name: scale * rng.normal(size=d) for name in ("e_s", "e_a", "e_b") if name in cell.vector_names()}
    if "g" in cell.vector_names():
        vectors["g"] = 1.0 + 0.5 * rng.normal(size=d)
    if "beta" in cell.vector_names():
        vectors["beta"] = 0.5 * rng.normal(size=d)
    if cell.readout == "regression":
        vectors["w"] = rng.normal(size=d)
        scalars = {"w0": float(rng.normal())}
    else:
        vectors["u"] = rng.normal(size=(classes, d))
        scalars = {"b": rng.normal(size=classes)}
    return Params(cell, vectors, scalars)


# --------------------------------------------------------------------------- hand parameters

#: small integer parameters at d = 3 (all exactly representable), for computations by hand
E_S = [1, 0, 2]
E_A = [0, 1, -1]
E_B = [2, -1, 1]
G = [1, 2, -1]
BETA = [0, 1, 1]
W = [1, 2, 3]
W0 = 0.5
U = [[1, 0, 0], [0, 1, 0], [1, 1, -1]]
B = [0, 0.5, -1]


def hand_params(attention, norm, readout, eps=0.0, distractor=False, kind="layernorm", affine=None):
    """``(Params, vectors, scalars)`` of the hand vectors above for a cell at d = 3 (``norm``
    the variant, ``kind`` the norm kind)."""
    cell = Cell(attention, norm, readout, d=3, eps=eps, task="select" if distractor else "count", norm=kind,
                affine=affine)
    vectors = {"e_s": E_S, "e_a": E_A}
    if distractor:
        vectors["e_b"] = E_B
    vectors.update({name: {"g": G, "beta": BETA}[name] for name in cell.affine.vectors})
    if readout == "regression":
        vectors["w"] = W
        scalars = {"w0": W0}
    else:
        vectors["u"] = U
        scalars = {"b": B}
    return Params(cell, vectors, scalars), vectors, scalars


def close(got, want, rel=1e-13):
    """Float ``got`` equals ``want`` to ``rel`` of the magnitude ``1 + max |want|``."""
    got, want = np.atleast_1d(np.asarray(got, dtype=float)), np.atleast_1d(np.asarray(want, dtype=float))
    assert got.shape == want.shape
    scale = 1.0 + np.max(np.abs(want))
    assert np.max(np.abs(got - want)) <= rel * scale, (got, want)


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
      amplification ``kappa = |e_x| / |C(e_x)|`` (``C`` the norm kind's centring);
    * post-norm multiplies absolute errors in ``r`` by ``|dN/dr| <= sqrt(d) max(1,|g|) / |C(r)|``
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
            return ref_centre(cell, v)

        sigma = dict(zip(toks, ref.scores))
        hn = {t: norm(ref.h[t]) for t in toks}
        kappa = 1
        if cell.pre:
            kappa = max(norm(V[f"e_{t}"]) / norm(centred(V[f"e_{t}"])) for t in toks)
        smax = max(abs(s) for s in ref.scores)
        es = norm(V["e_s"])
        if cell.read.last:  # any token may be the query and give the residual its embedding
            tau = 1 / mpmath.sqrt(cell.d)
            smax = max(abs(tau * mpmath.fsum(x * y for x, y in zip(ref.h[t], ref.h[u])))
                       for t in toks for u in toks)
            es = max(norm(V[f"e_{t}"]) for t in toks)
        gmax = max([1] + [abs(x) for x in V["g"]]) if "g" in V else 1
        zmax = gmax * mpmath.sqrt(cell.d) + (norm(V["beta"]) if "beta" in V else 0)
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


# ------------------------------------------------------------------ classification heads

#: sides of the polygons that bracket the unit disk in :func:`best_head`
SIDES = 512


def best_head(z: np.ndarray, outer: bool = True, sides: int = SIDES) -> float:
    """The max-min margin over every head for the outputs ``z`` (rows), by linear programming.

    Maximise ``m`` subject to ``<u_n - u_c, z_n> + b_n - b_c >= m`` for every ``n != c`` and
    ``|u_c| <= 1``.  Only the part of ``u_c`` in the span of the differences ``z_n - z_0``
    changes a margin (the rest adds a constant per class, absorbed by ``b_c``), so the head is
    written in an orthonormal basis of that span (dimension 1 or 2 here).  In two dimensions the
    disk is replaced by the circumscribed regular polygon with ``sides`` sides (``outer``: an
    optimum at least the true one) or the inscribed one (an optimum at most the true one, and
    within ``1 - cos(pi/sides)`` of it: ``2e-5`` for :data:`SIDES`).
    """
    from scipy import optimize

    diff = z - z[0]
    _, s, vt = np.linalg.svd(diff, full_matrices=False)
    y = diff @ vt[s > 1e-12 * max(s.max(), 1e-300)].T
    K, r = y.shape
    assert r <= 2, r
    nv = K * r + K + 1
    rows = []
    for n in range(K):
        for c in range(K):
            if c != n:  # m - <u_n - u_c, y_n> - b_n + b_c <= 0
                a = np.zeros(nv)
                a[n * r:(n + 1) * r] -= y[n]
                a[c * r:(c + 1) * r] += y[n]
                a[K * r + n] -= 1
                a[K * r + c] += 1
                a[-1] = 1
                rows.append(a)
    rhs = [0.0] * len(rows)
    if r == 2:
        angles = 2 * np.pi * np.arange(sides) / sides
        reach = 1.0 if outer else math.cos(math.pi / sides)
        for c in range(K):
            for t in angles:
                a = np.zeros(nv)
                a[2 * c], a[2 * c + 1] = math.cos(t), math.sin(t)
                rows.append(a)
                rhs.append(reach)
    bounds = [(-1, 1) if r == 1 else (None, None)] * (K * r) + [(0, 0)] + [(None, None)] * K
    obj = np.zeros(nv)
    obj[-1] = -1.0
    res = optimize.linprog(obj, A_ub=np.array(rows), b_ub=rhs, bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return -res.fun


def outputs_of(cell: Cell, vectors: dict, L: int) -> np.ndarray:
    """The outputs ``z_n`` (after the norm and its affine) of the reference model for embeddings
    (and gain, bias) ``vectors``, with a placeholder head."""
    head = {"u": np.zeros((L + 1, cell.d))}
    return reduced(Params(cell, {**vectors, **head}, {"b": [0] * (L + 1)}), list(range(L + 1)),
                   readout=False).astype(float)


def unit_ball(v: np.ndarray) -> np.ndarray:
    return v / max(1.0, float(np.linalg.norm(v)))


def random_vectors(cell: Cell, rng) -> dict:
    """Random trainable vectors of norm at most 1 (the head aside)."""
    names = [n for n in cell.vector_names() if n != "u"]
    return {n: unit_ball(rng.normal(size=cell.d) * rng.uniform(0.2, 1.5)) for n in names}


# ------------------------------------------------------------------ random sequences


def counts_random_sequences(params: Params, L: int, examples: int) -> None:
    """``params`` gives every one of ``examples`` random sequences of its cell's task (length up to
    ``L``, :func:`verify.strategies.sequences`) its target within 1/2, through the explicit
    token-by-token pass at 50 digits (hypothesis; a failure shrinks to a shortest sequence)."""
    from hypothesis import given, settings

    from verify import explicit
    from verify.strategies import sequences, target

    @settings(max_examples=examples, deadline=None)
    @given(sequences(params.cell, max_length=L))
    def check(seq):
        assert abs(float(explicit(params, seq, "mp50")) - target(seq)) < 0.5

    check()


def mp_norm(v) -> mpmath.mpf:
    """The Euclidean norm of ``v`` in mpmath."""
    return mpmath.sqrt(sum(x * x for x in v))


def params_at_estimate(cell: Cell, L: int, factor=1 + 1e-4):
    """``(parameters built at factor * the float estimate of B_min(L), the estimate)`` for a
    regression cell."""
    from constructions.regression import design

    dz = design(cell)
    est = dz.estimate(L)
    return dz.build(L, est * factor), est


def select_last_inputs(L: int) -> list[str]:
    """Every select input of length at most ``L`` as a token string, one order per composition
    and last token (read last, the output depends on the counts and the last token only)."""
    out = ["s"]
    for n_a, n_b in itertools.product(range(L + 1), repeat=2):
        if 0 < n_a + n_b <= L:
            if n_a:
                out.append("s" + "b" * n_b + "a" * n_a)
            if n_b:
                out.append("s" + "a" * n_a + "b" * n_b)
    return out


def select_last_gap(params, L: int):
    """The smallest logit gap of a classification head over every select input read last
    (:func:`select_last_inputs`), through the explicit pass at 60 digits: the logit of the count
    minus the largest other logit (positive iff the head classifies every input)."""
    from verify import explicit
    from verify.strategies import target

    with mpmath.workdps(60):
        gaps = []
        for seq in select_last_inputs(L):
            logit = [mpmath.mpf(x) for x in explicit(params, seq, "mp60")]
            n = target(seq)
            gaps.append(logit[n] - max(x for c, x in enumerate(logit) if c != n))
        return min(gaps)
