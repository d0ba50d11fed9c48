"""The select task read last after post-norm, checked from outside: linear attention with
post-LayerNorm / post-RMSNorm (constructions.select_last_linear_post) and softmax attention with
post-RMSNorm (constructions.select_last_rms).

The saved witnesses of certified sweep rows are re-judged by a forward pass written here from the
model alone (mpmath at 60 digits, token by token over the whole sequence, the causal read at the
last position), on every input ``(s, x_1..x_m)`` up to the order of the prefix (the attention sums
do not see it): every ``(n_a, n_b)`` with ``n_a + n_b <= L`` and each possible last token, and
``(s)``.  The checks: every output within 1/2 of its count, every parameter norm at most the
row's ``B_min``, ``B_lower <= B_min``, the row's ``worst_error`` and the file's cell agree with
the pass, and the command lines' refusals are one line on stderr with exit 2.
"""

from __future__ import annotations

import json

import mpmath
import pytest
from mpmath import mp, mpf

from bounds import sweep
from verify import __main__ as verify_cli

DPS = 60


# ----------------------------------------------------------------------------- the model
def _load(path):
    """The cell, the vectors and the scalars of a JSON parameter file (exact decimals, read at the
    working precision)."""
    o = json.loads(path.read_text())
    vectors = {k: [mpf(x) for x in v] for k, v in o["vectors"].items()}
    scalars = {k: mpf(x) for k, x in o["scalars"].items()}
    return o["cell"], vectors, scalars


def _normalize(cell, vec, r):
    """``N(r)`` (LayerNorm: centred, population variance; RMSNorm: no centring), then ``g *`` and
    ``+ beta`` where the file holds them."""
    d, eps = len(r), mpf(cell["eps"])
    if cell["norm"] == "layernorm":
        mean = sum(r) / d
        x = [t - mean for t in r]
        z = [t / mpmath.sqrt(sum(u * u for u in x) / d + eps) for t in x]
    else:
        z = [t / mpmath.sqrt(sum(u * u for u in r) / d + eps) for t in r]
    if "g" in vec:
        z = [g * t for g, t in zip(vec["g"], z)]
    if "beta" in vec:
        z = [t + b for t, b in zip(z, vec["beta"])]
    return z


def _output(cell, vec, sca, tokens):
    """``y`` read at the last position of ``(s,) + tokens`` under the causal mask, post-norm:
    ``h_j = e_{x_j}``, scores ``tau <h_m, h_j>`` over ``j = 0..m``, softmax or linear weights,
    the residual ``e_{x_m} + A``, ``z = N(r)``, ``y = <w, z> + w0``."""
    seq = ["s", *tokens]
    h = [vec["e_" + t] for t in seq]
    d = len(h[0])
    tau = 1 / mpmath.sqrt(d)
    scores = [tau * sum(x * y for x, y in zip(h[-1], hj)) for hj in h]
    if cell["attention"] == "softmax":
        top = max(scores)
        ex = [mpmath.exp(s - top) for s in scores]
        weights = [e / sum(ex) for e in ex]
    else:
        weights = scores
    r = [h[-1][i] + sum(wj * hj[i] for wj, hj in zip(weights, h)) for i in range(d)]
    z = _normalize(cell, vec, r)
    return sum(w * t for w, t in zip(vec["w"], z)) + sca["w0"]


def _inputs(L):
    """Every select input of length at most ``L`` up to the order of its prefix: ``(tokens,
    target)``, with each possible last token."""
    out = [((), 0)]
    for na in range(L + 1):
        for nb in range(L + 1 - na):
            for last in "ab":
                if (na if last == "a" else nb) == 0:
                    continue
                prefix = ["a"] * (na - (last == "a")) + ["b"] * (nb - (last == "b"))
                out.append(((*prefix, last), na))
    return out


def _judge(path, L):
    """``(worst |y - n|, max parameter norm, number of inputs)`` at ``DPS`` digits."""
    with mp.workdps(DPS):
        cell, vec, sca = _load(path)
        worst = max(abs(_output(cell, vec, sca, t) - n) for t, n in _inputs(L))
        bound = max(mpmath.sqrt(sum(x * x for x in v)) for v in vec.values())
        return worst, bound


def _sweep(capsys, tmp_path, args):
    rc = sweep.main(["--task", "select", "--read", "last", "--json", "--jobs", "1", "--quiet",
                     "--save-params", str(tmp_path), *args])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return json.loads(captured.out)


# ------------------------------------------------------------------------------ witnesses
CELLS = [
    # (attention, variant, norm, affine, d, Lmin, Lmax)
    ("linear", "post_bare", "layernorm", None, 3, 1, 4),
    ("linear", "post_learned", "layernorm", "gain", 8, 2, 4),
    ("linear", "post_bare", "rmsnorm", None, 3, 3, 3),
    ("linear", "post_learned", "rmsnorm", "gain_bias", 2, 1, 1),
    ("softmax", "post_bare", "rmsnorm", None, 8, 2, 2),
    ("softmax", "post_learned", "rmsnorm", "gain_bias", 3, 3, 3),
]


@pytest.mark.parametrize("attention, variant, norm, affine, d, Lmin, Lmax", CELLS,
                         ids=lambda v: str(v))
def test_saved_witnesses_count_by_an_independent_pass(capsys, tmp_path, attention, variant, norm,
                                                     affine, d, Lmin, Lmax):
    args = ["--attention", attention, "--variant", variant, "--norm", norm, "--d", str(d),
            "--Lmin", str(Lmin), "--Lmax", str(Lmax)] + (["--affine", affine] if affine else [])
    out = _sweep(capsys, tmp_path, args)
    assert (out["attention"], out["variant"], out["norm"], out["d"], out["task"], out["read"]) == (
        attention, variant, norm, d, "select", "last")
    assert out["rows"], out
    for row in out["rows"]:
        L = row["L"]
        assert row["certified"] is True, row
        assert row["B_lower"] is not None and row["B_lower"] <= row["B_min"], row
        path = tmp_path / f"L{L}.json"
        cell = json.loads(path.read_text())["cell"]
        assert (cell["attention"], cell["variant"], cell["norm"], cell["d"], cell["eps"],
                cell["task"], cell["read"]) == (attention, variant, norm, d, 0.0, "select", "last")
        worst, bound = _judge(path, L)
        assert worst < mpf(1) / 2, (L, worst)
        # the row's worst error is the pass's (float64 of a 60-digit value)
        assert abs(float(worst) - row["worst_error"]) < 1e-9, (L, worst, row["worst_error"])
        _check_geometry(path, L)
        if row.get("B_min_is_infimum"):
            # B_min = 0 not attained: the witness is within its stated bound
            assert row["B_min"] == 0 and float(bound) <= row["witness_bound"] * (1 + 1e-12), row
        else:
            assert float(bound) <= row["B_min"] * (1 + 1e-12), (L, bound, row["B_min"])


def _check_geometry(path, L):
    """The README's geometry on the witness: ``e_b = beta e_a``, with ``beta^2 = 2^-40/(L + 1)``
    (:func:`constructions.select_last_linear_post.shift`) for linear attention and ``rho = exp(tau
    (|e_a|^2 - <e_a, e_s>)) = ((1 + beta)/2)^(1/(1 - beta))`` (:func:`constructions.select_last_rms.
    rho_of`) for softmax attention."""
    from constructions import select_last_linear_post, select_last_rms
    with mp.workdps(DPS):
        cell, vec, _ = _load(path)
        ea, eb, es = vec["e_a"], vec["e_b"], vec["e_s"]
        dot = lambda x, y: sum(p * q for p, q in zip(x, y))  # noqa: E731
        beta = dot(ea, eb) / dot(ea, ea)
        assert beta > 0
        assert max(abs(b - beta * a) for a, b in zip(ea, eb)) <= mpf(10) ** -40 * mpmath.sqrt(dot(ea, ea))
        if cell["attention"] == "linear":
            assert abs(beta ** 2 / select_last_linear_post.shift(L) - 1) < mpf(10) ** -30
        else:
            tau = 1 / mpmath.sqrt(len(ea))
            rho = mpmath.exp(tau * (dot(ea, ea) - dot(ea, es)))
            want = select_last_rms.rho_of(beta, log=mpmath.log, exp=mpmath.exp)
            assert rho < 1 and abs(rho / want - 1) < mpf(10) ** -12, (rho, want)


def test_softmax_rms_gain_costs_what_bare_costs(capsys, tmp_path):
    """README: softmax attention after post-RMSNorm with a gain has the bare ``B_min`` at every
    ``L`` of the grid from 4 (the embeddings set the bound), at ``d = 8``."""
    common = ["--attention", "softmax", "--norm", "rmsnorm", "--Lmin", "4", "--Lmax", "4"]
    bare = _sweep(capsys, tmp_path / "bare", common + ["--variant", "post_bare"])["rows"][0]
    gain = _sweep(capsys, tmp_path / "gain", common + ["--variant", "post_learned", "--affine",
                                                       "gain"])["rows"][0]
    assert bare["certified"] and gain["certified"]
    assert bare["B_min"] == gain["B_min"]
    assert gain["B_lower"] <= gain["B_min"] and bare["B_lower"] <= bare["B_min"]


def test_a_witness_does_not_count_one_further(capsys, tmp_path):
    """The pass is not vacuous: the witness of ``L`` fails at ``L + 1`` in it and in the judge."""
    out = _sweep(capsys, tmp_path, ["--attention", "softmax", "--variant", "post_bare", "--norm",
                                    "rmsnorm", "--d", "2", "--Lmin", "3", "--Lmax", "3"])
    assert out["rows"][0]["certified"]
    worst, _ = _judge(tmp_path / "L3.json", 4)
    assert worst >= mpf(1) / 2
    assert verify_cli.main(["--params", str(tmp_path / "L3.json"), "--L", "4"]) == 1
    capsys.readouterr()


def test_gain_and_gain_bias_give_one_row_with_linear_post_layernorm(capsys, tmp_path):
    """README: for linear attention after post-LayerNorm ``gain`` and ``gain_bias`` (the bias at 0)
    give the same rows."""
    rows = {}
    for affine in ("gain", "gain_bias"):
        out = _sweep(capsys, tmp_path / affine, ["--attention", "linear", "--variant", "post_learned",
                                                  "--affine", affine, "--d", "3", "--Lmax", "8"])
        rows[affine] = [(r["L"], r["B_min"]) for r in out["rows"]]
        if affine == "gain_bias":
            beta = json.loads((tmp_path / affine / "L8.json").read_text())["vectors"]["beta"]
            assert all(mpf(x) == 0 for x in beta)
    assert rows["gain"] == rows["gain_bias"]


# ------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("argv", [
    ["--attention", "linear", "--variant", "post_bare", "--d", "2", "--eps", "0.01"],
    ["--attention", "linear", "--variant", "post_bare", "--d", "3", "--eps", "0.1"],
    ["--attention", "linear", "--variant", "post_learned", "--norm", "rmsnorm", "--eps", "1e-5"],
    ["--attention", "softmax", "--variant", "post_bare", "--norm", "rmsnorm", "--eps", "0.01"],
    ["--attention", "softmax", "--variant", "post_learned", "--norm", "rmsnorm", "--readout",
     "classification", "--eps", "1e-5"],
    ["--attention", "softmax", "--variant", "post_bare", "--d", "2", "--readout", "classification"],
    ["--attention", "linear", "--variant", "post_learned", "--readout", "classification", "--eps", "0.01"],
    ["--attention", "linear", "--variant", "post_bare", "--affine", "gain"],
    ["--attention", "softmax", "--variant", "post_bare", "--norm", "rmsnorm", "--eps", "nan"],
    ["--attention", "softmax", "--variant", "post_bare", "--norm", "rmsnorm", "--Lmin", "8"],
], ids=lambda a: " ".join(a[1::2]))
def test_refused_inputs_are_one_line_exit_2(capsys, argv):
    rc = sweep.main(["--task", "select", "--read", "last", "--Lmax", "4", *argv])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err


def test_the_refused_and_the_built_cells_agree():
    """A select-last post-norm regression cell is refused iff no construction is registered for it."""
    from constructions import registry
    from constructions.cell import Cell
    from constructions.refusals import refusal
    for attention in ("softmax", "linear"):
        for variant, affines in (("post_bare", (None,)), ("post_learned", ("gain", "gain_bias"))):
            for norm in ("layernorm", "rmsnorm"):
                for affine in affines:
                    for d in (2, 3):
                        for eps in (0.0, 0.01):
                            cell = Cell(attention, variant, "regression", d=d, affine=affine,
                                        norm=norm, eps=eps, task="select", read="last")
                            built = any(e.serves(cell) for e in registry.REGRESSION)
                            assert built == (refusal(cell) is None), cell
                            # eps = 0: every d (LayerNorm at d = 2 for L = 1 only, L* = 1)
                            expect = (eps == 0
                                      # eps > 0: constructions.last_post_eps (softmax, LayerNorm)
                                      or (eps > 0 and attention == "softmax" and norm == "layernorm"
                                          and d >= 3))
                            assert built == expect, cell
