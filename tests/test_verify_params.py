"""``python -m verify --params FILE``: the certified verdict on a parameter file.

Verdicts are checked against an independent reference (:func:`helpers.ref_mp`, the model by
hand in mpmath at 60 digits): parameter sets made to miss the rule ``|y - n| < 1/2`` by 1e-12
at one input, or to meet it by 1e-12, are judged as the reference says, and plain float64 gets
one of them wrong.  Bad input is one line on stderr naming the field, exit status 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal

import mpmath
import numpy as np
import pytest
import safetensors.numpy
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.cell import Cell, Params
from constructions.classification import design as classification_design
from constructions.regression import design
from helpers import ref_mp
from verify import __main__ as verify_cli
from verify import params_file
from verify import report as verify_report
from verify.judge import MAX_COUNTS, counts_to

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DPS = 60
MISS = mpmath.mpf("1e-12")
REPORT_KEYS = {"file", "cell", "L", "verdict", "certified", "backend", "first_failure", "undecided",
               "first_undecided", "B", "B_min", "B_min_exact", "B_min_is_infimum", "B_min_source",
               "ratio", "rounded"}


def run(argv, capsys):
    rc = verify_cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def write_json(tmp_path, params, name="p.json"):
    path = tmp_path / name
    path.write_text(params_file.to_json(params))
    return path


def ref_errors(params: Params, L: int):
    """``y(n) - n`` for ``n = 0..L`` by the reference at ``DPS`` digits."""
    with mpmath.workdps(DPS):
        return [ref_mp(params, "s" + "a" * n, DPS).out - n for n in range(L + 1)]


def at_the_edge(params: Params, L: int, miss) -> tuple[Params, int]:
    """``params`` with ``w0`` shifted so that the largest ``y(n) - n`` (reference) is
    ``1/2 + miss``: the set fails at that one ``n`` if ``miss > 0`` and counts if ``miss < 0``
    (the spread of the errors is below 1, so the smallest stays above -1/2).  The new ``w0`` is
    a 200-bit binary number, within 2^-190 of the exact shift."""
    errs = ref_errors(params, L)
    top = max(range(L + 1), key=lambda n: errs[n])
    assert max(errs) - min(errs) < 1 - 2 * abs(miss)
    with mpmath.workprec(200):
        w0 = params.scalars["w0"] + (mpmath.mpf(1) / 2 + miss - errs[top])
    return Params(params.cell, params.vectors, {"w0": w0}), top


@pytest.fixture(scope="module")
def post_bare_64():
    cell = Cell("softmax", "post_bare", "regression", d=8)
    return design(cell).build(64, design(cell).estimate(64) * 1.01)


@pytest.mark.parametrize("miss", [MISS, -MISS], ids=["fails by 1e-12", "counts by 1e-12"])
def test_a_set_at_the_edge_is_judged_as_the_reference_says(post_bare_64, miss, tmp_path, capsys):
    params, top = at_the_edge(post_bare_64, 64, miss)
    errs = ref_errors(params, 64)  # the reference, on the very numbers written to the file
    with mpmath.workdps(DPS):
        assert abs(abs(errs[top]) - mpmath.mpf(1) / 2 - miss) < mpmath.mpf("1e-40")
        assert all(abs(e) < mpmath.mpf(1) / 2 for n, e in enumerate(errs) if n != top)
    rc, out, err = run(["--params", write_json(tmp_path, params), "--L", 64, "--json"], capsys)
    report = json.loads(out)
    if miss > 0:
        assert (rc, report["verdict"], report["first_failure"]) == (1, "does not count", top)
        assert report["certified"] is False
    else:
        assert (rc, report["verdict"], report["certified"]) == (0, "counts", True)
        assert report["first_failure"] is None
    assert report["worst_error_at"] == top and report["worst_error"] == pytest.approx(0.5, abs=1e-11)


def test_plain_float64_misjudges_a_set_that_fails_by_1e_12(post_bare_64):
    """That is why the verdict is certified: float64 passes the set that fails by 1e-12."""
    params, top = at_the_edge(post_bare_64, 64, MISS)
    assert counts_to(params, 64, "float64").verdict == "counts"
    assert counts_to(params, 64, "arb256").first_failure == top


def test_a_head_at_the_edge_is_judged_as_the_reference_says(tmp_path, capsys):
    """Classification: the bias of the class with the smallest margin moved so that its margin
    is -1e-12 or +1e-12 (reference at 60 digits); lowering ``b_n`` only raises the margins of
    the other counts, whose competitor it is."""
    L = 8
    head = classification_design(Cell("softmax", "none", "classification", d=4)).build(L)
    with mpmath.workdps(DPS):
        logits = [ref_mp(head, "s" + "a" * n, DPS).out for n in range(L + 1)]
        margins = [lg[n] - max(v for c, v in enumerate(lg) if c != n) for n, lg in enumerate(logits)]
    n = min(range(L + 1), key=lambda k: margins[k])
    for miss, verdict, rc_want in ((-MISS, "does not count", 1), (MISS, "counts", 0)):
        b = head.scalars["b"].copy()
        with mpmath.workprec(200):
            b[n] = b[n] - margins[n] + miss
        params = Params(head.cell, head.vectors, {"b": b})
        with mpmath.workdps(DPS):
            lg = ref_mp(params, "s" + "a" * n, DPS).out
            assert abs(lg[n] - max(v for c, v in enumerate(lg) if c != n) - miss) < mpmath.mpf("1e-40")
        rc, out, _ = run(["--params", write_json(tmp_path, params), "--json"], capsys)
        report = json.loads(out)
        assert (rc, report["verdict"], report["L"]) == (rc_want, verdict, L)
        if miss > 0:
            assert report["min_margin_at"] == n and 0 < report["min_margin"] <= 1e-12
        else:
            assert report["first_failure"] == n


def test_report_keys_and_bound(tmp_path, capsys, post_bare_64):
    path = write_json(tmp_path, post_bare_64)
    rc, out, err = run(["--params", path, "--L", 64, "--exact", "--json"], capsys)
    report = json.loads(out)
    assert rc == 0 and err == ""
    assert REPORT_KEYS | {"worst_error", "worst_error_at"} <= set(report)
    assert report["cell"] == post_bare_64.cell.keys()
    # B(theta) bounds the exact largest norm from above, and closely
    exact = float(post_bare_64.bound())
    assert exact <= report["B"] <= exact * (1 + 1e-12)
    # the exact closed form of B_min(64) for bare post-norm (module constructions.closed_forms):
    # b* = (L-1)(L+2)/(4 sqrt(2L+1)) at L = 64, B_min = b*/sqrt(d)
    b_star = 63 * 66 / (4 * 129 ** 0.5)
    assert report["B_min"] == pytest.approx(b_star / 8 ** 0.5, rel=1e-12)
    assert report["ratio"] == pytest.approx(report["B"] / report["B_min"], rel=1e-15)
    assert report["B_min_is_infimum"] is False and report["B_min_exact"]
    assert 1 < report["ratio"] < 1.02  # built at 1.01 times the estimate of B_min
    # without --exact: no exact form, the same B_min to the last bit or the nearest double
    rc, out, _ = run(["--params", path, "--L", 64, "--json"], capsys)
    plain = json.loads(out)
    assert rc == 0 and plain["B_min_exact"] is None
    assert plain["B_min"] == pytest.approx(report["B_min"], rel=2**-52)
    # --exact in the text report prints the exact form
    rc, out, _ = run(["--params", path, "--L", 64, "--exact"], capsys)
    assert f"B_min(L) exactly: {report['B_min_exact']}" in out.splitlines()


def test_text_output_and_counts_past_L(tmp_path, capsys, post_bare_64):
    """Text: the verdict, the first failure and B; judged past its L the set fails."""
    path = write_json(tmp_path, post_bare_64)
    rc, out, _ = run(["--params", path, "--L", 64], capsys)
    assert rc == 0 and "L = 64: counts" in out and "B(theta)" in out and "B_min(L)" in out
    rc, out, _ = run(["--params", path, "--L", 200], capsys)
    want = counts_to(post_bare_64, 200, "arb256").first_failure
    assert want is not None and rc == 1
    assert "does not count" in out and f"first failing input: n = {want}" in out


def _printed(out, prefix):
    line = next(l for l in out.splitlines() if l.startswith(prefix))
    return Decimal(line[len(prefix):].split()[0])


@settings(max_examples=200, deadline=None)
@given(b=st.floats(1e-300, 1e300), err=st.floats(0, 0.5, exclude_max=True),
       margin=st.floats(1e-300, 1e300))
def test_the_text_keeps_each_number_s_claim(b, err, margin):
    """Printed in the text report, B(theta) is still an upper bound on the reported B, the
    smallest margin still a lower bound on the reported margin, and a worst error below 1/2
    (a set that counts) does not print as 1/2: each printed decimal read back exactly."""
    base = {"cell": {"attention": "softmax", "variant": "none", "readout": "regression", "d": 8,
                     "eps": 0.0, "task": "count", "read": "bos"},
            "L": 3, "verdict": "counts", "backend": "arb256", "certified": True,
            "first_failure": None, "undecided": 0, "B": b, "B_min": None,
            "B_min_source": "not known"}
    out = verify_report.text({**base, "worst_error": err, "worst_error_at": 2})
    assert _printed(out, "B(theta): ") >= Decimal(b)
    worst = _printed(out, "worst |y - n|: ")
    assert float(worst) == err and worst < Decimal("0.5")
    out = verify_report.text({**base, "min_margin": margin,
                              "min_margin_at": 1})
    assert _printed(out, "smallest logit margin: ") <= Decimal(margin)


@pytest.mark.parametrize("entry", ["1.7e308", "1e400"])
def test_entries_beyond_the_doubles_give_strict_json_and_a_quiet_stderr(entry, tmp_path):
    """A distractor of entries near or beyond the largest double: B(theta) (its norm exceeds
    every double) and a worst error of an unbounded ball are null, never NaN or Infinity,
    which JSON does not have; nothing but the report is printed."""
    d = 8
    unit = [["1" if i == j else "0" for i in range(d)] for j in range(3)]
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({
        "cell": {"attention": "softmax", "variant": "none", "d": d, "task": "select"},
        "vectors": {"e_s": unit[0], "e_a": unit[1], "e_b": [entry] * d, "w": unit[2]},
        "scalars": {"w0": "0"}}))

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON report"))

    p = subprocess.run([sys.executable, "-m", "verify", "--params", str(path), "--L", "2", "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    report = strict(p.stdout)
    assert p.returncode == 1 and p.stderr == ""
    assert report["verdict"] in ("does not count", "cannot certify")
    assert report["B"] is None and report["ratio"] is None and report["worst_error_at"] is not None
    out = verify_report.text(report)
    assert "B(theta): beyond the largest double" in out and "nan" not in out.lower()
    assert ("worst |y - n|: not a finite double" in out) == (report["worst_error"] is None)


def test_classification_b_min_is_an_infimum_and_ratio_undefined(tmp_path, capsys):
    head = classification_design(Cell("softmax", "post_learned", "classification", d=4)).build(6)
    rc, out, _ = run(["--params", write_json(tmp_path, head), "--L", 6, "--json"], capsys)
    report = json.loads(out)
    assert rc == 0 and report["verdict"] == "counts"
    assert report["B_min"] == 0.0 and report["B_min_is_infimum"] is True and report["ratio"] is None
    assert report["B"] <= 1 + 1e-12  # a unit-norm head
    assert report["min_margin"] > 0


def test_no_closed_form_is_said_not_known(tmp_path, capsys):
    """eps > 0: the closed forms are derived for eps = 0."""
    cell = Cell("softmax", "none", "regression", d=4, eps=0.5)
    params = Params(cell, {"e_s": [1, 0, 0, 0], "e_a": [0, 1, 0, 0], "w": [0, 1, 0, 0]}, {"w0": 0})
    rc, out, _ = run(["--params", write_json(tmp_path, params), "--L", 3, "--json"], capsys)
    report = json.loads(out)
    assert report["B_min"] is None and report["ratio"] is None and "not known" in report["B_min_source"]
    assert rc == (0 if report["verdict"] == "counts" else 1)
    assert report["verdict"] == counts_to(params, 3, "arb256").verdict.replace("fails", "does not count")


def test_the_same_verdict_from_both_formats(tmp_path, capsys, post_bare_64):
    """The set rounded to doubles, as JSON and as safetensors: the same report."""
    rounded = params_file.rounded_to_double(post_bare_64)
    (tmp_path / "p.safetensors").write_bytes(params_file.to_safetensors(post_bare_64))
    reports = []
    for path in (write_json(tmp_path, rounded), tmp_path / "p.safetensors"):
        rc, out, _ = run(["--params", path, "--L", 64, "--json"], capsys)
        reports.append({k: v for k, v in json.loads(out).items() if k != "file"})
    assert reports[0] == reports[1]


def test_a_decimal_that_is_not_binary_is_counted_as_rounded(tmp_path, capsys):
    text = json.dumps({"cell": {"variant": "none", "d": 2},
                       "vectors": {"e_s": [0.1, 0], "e_a": [0, 1], "w": ["0.25", 1]},
                       "scalars": {"w0": 0}})
    (tmp_path / "p.json").write_text(text)
    _, out, _ = run(["--params", tmp_path / "p.json", "--L", 1, "--json"], capsys)
    assert json.loads(out)["rounded"] == 1  # 0.1; 0.25, 0 and 1 are binary


def test_subprocess_exit_statuses(tmp_path, post_bare_64):
    path = write_json(tmp_path, post_bare_64)
    proc = subprocess.run([sys.executable, "-m", "verify", "--params", str(path), "--L", "64"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "" and "L = 64: counts" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "verify", "--params", str(tmp_path / "none.json"),
                           "--L", "4"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "none.json" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- bad input


def _good() -> dict:
    return {"cell": {"attention": "softmax", "variant": "post_learned", "readout": "regression", "d": 3},
            "vectors": {"e_s": [1, 0, 0], "e_a": [0, 1, 0], "g": [1, 1, 1], "beta": [0, 0, 0],
                        "w": [1, 2, 3]},
            "scalars": {"w0": "0.5"}}


def _with(path, value):
    doc = _good()
    *head, last = path
    node = doc
    for key in head:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return json.dumps(doc)


JSON_CASES = {
    "not JSON": ("{cell", "not JSON"),
    "top level list": ("[1, 2]", "JSON object"),
    "missing vectors": (_with(["vectors"], KeyError), "vectors"),
    "unknown top key": (json.dumps({**_good(), "extra": 1}), "extra"),
    "unknown cell key": (_with(["cell", "varaint"], "none"), "varaint"),
    "missing variant": (_with(["cell", "variant"], KeyError), "variant"),
    "unknown variant": (_with(["cell", "variant"], "post_foo"), "post_foo"),
    "unknown norm": (_with(["cell", "norm"], "batchnorm"), "batchnorm"),
    "unknown task": (_with(["cell", "task"], "sort"), "task"),
    "attention a number": (_with(["cell", "attention"], 3), "cell.attention"),
    "d not an integer": (_with(["cell", "d"], 3.5), "cell.d"),
    "d too small": (_with(["cell", "d"], 1), "d must be"),
    "d negative": (_with(["cell", "d"], -3), "d must be"),
    "eps rounds to 0": (_with(["cell", "eps"], "1e-400"), "cell.eps"),
    "eps infinite": (_with(["cell", "eps"], "1e400"), "eps"),
    "eps negative": (_with(["cell", "eps"], -1), "eps"),
    "eps a word": (_with(["cell", "eps"], "small"), "cell.eps"),
    "missing vector": (_with(["vectors", "e_a"], KeyError), "vectors.e_a"),
    "extra vector": (_with(["vectors", "u"], [[1, 2, 3]]), "vectors.u"),
    "wrong length": (_with(["vectors", "e_s"], [1, 0]), "e_s"),
    "vector a number": (_with(["vectors", "w"], 3), "vectors.w"),
    "NaN": (_with(["vectors", "e_s"], [1, float("nan"), 0]), "vectors.e_s[1]"),
    "Infinity": (_with(["vectors", "g"], [1, 1, float("inf")]), "vectors.g[2]"),
    "string inf": (_with(["vectors", "g"], [1, "inf", 1]), "vectors.g[1]"),
    "non-numeric string": (_with(["vectors", "w"], [1, "two", 3]), "vectors.w[1]"),
    "boolean": (_with(["vectors", "beta"], [0, True, 0]), "vectors.beta[1]"),
    "null": (_with(["scalars", "w0"], None), "scalars.w0"),
    "w0 a list": (_with(["scalars", "w0"], [1]), "scalars.w0"),
    "missing w0": (_with(["scalars", "w0"], KeyError), "scalars.w0"),
    "huge exponent": (_with(["scalars", "w0"], "1e999999"), "scalars.w0"),
    "duplicate key": ('{"cell": {"variant": "none", "variant": "none"}}', "variant"),
    "nested too deeply": ("[" * 100000 + "]" * 100000, "not JSON"),
}


def _one_line_naming(err: str, field: str):
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err and field in err, err


@pytest.mark.parametrize("text,field", list(JSON_CASES.values()), ids=list(JSON_CASES))
def test_bad_json_file(text, field, tmp_path, capsys):
    (tmp_path / "p.json").write_text(text)
    rc, out, err = run(["--params", tmp_path / "p.json", "--L", 3], capsys)
    assert rc == 2 and out == ""
    _one_line_naming(err, field)
    assert "p.json" in err


def test_bad_bytes(tmp_path, capsys):
    (tmp_path / "p.json").write_bytes(b"\xff\xfe{}")
    rc, _, err = run(["--params", tmp_path / "p.json", "--L", 3], capsys)
    assert rc == 2
    _one_line_naming(err, "not JSON")


def _head(L=3, d=3) -> Params:
    rng = np.random.default_rng(1)
    cell = Cell("softmax", "pre_learned", "classification", d=d, affine="gain")
    return Params(cell, {"e_s": rng.normal(size=d), "e_a": rng.normal(size=d), "g": rng.normal(size=d),
                         "u": rng.normal(size=(L + 1, d))}, {"b": rng.normal(size=L + 1)})


def _tensors(params: Params) -> dict:
    """A PyTorch-style state dict of ``params`` as the README's name map gives it."""
    V, S = params.vectors, params.scalars
    f = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
    out = {"embedding.weight": f(np.stack([V["e_s"], V["e_a"]])), "norm.weight": f(V["g"])}
    out["readout.weight"], out["readout.bias"] = f(V["u"]), f(S["b"])
    return out


META = {"attention": "softmax", "variant": "pre_learned", "affine": "gain", "readout": "classification",
        "d": "3"}
ST_CASES = {
    "garbage": (None, None, "not a safetensors file"),
    "unknown tensor": ({"extra.weight": np.zeros(3)}, None, "extra.weight"),
    "unused tensor": ({"norm.bias": np.zeros(3)}, None, "norm.bias"),
    "missing tensor": ({"norm.weight": None}, None, "norm.weight"),
    "embedding rows": ({"embedding.weight": np.zeros((3, 3))}, None, "embedding.weight"),
    "gain length": ({"norm.weight": np.ones(4)}, None, "norm.weight"),
    "bias length": ({"readout.bias": np.zeros(3)}, None, "readout.bias"),
    "head width": ({"readout.weight": np.zeros((4, 2))}, None, "readout.weight"),
    "integer dtype": ({"norm.weight": np.ones(3, dtype=np.int32)}, None, "I32"),
    "non-finite": ({"norm.weight": np.array([1.0, np.inf, 1.0], dtype=np.float32)}, None, "norm.weight"),
    "missing variant": ({}, {"variant": None}, "variant"),
    "unknown metadata key": ({}, {"colour": "red"}, "colour"),
    "bad d": ({}, {"d": "three"}, "metadata.d"),
    "bad readout": ({}, {"readout": "ranking"}, "ranking"),
}


@pytest.mark.parametrize("tensors,meta,field", list(ST_CASES.values()), ids=list(ST_CASES))
def test_bad_safetensors_file(tensors, meta, field, tmp_path, capsys):
    path = tmp_path / "p.safetensors"
    if tensors is None:
        path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}xx")
    else:
        t = {k: v for k, v in {**_tensors(_head()), **tensors}.items() if v is not None}
        m = {k: v for k, v in {**META, **(meta or {})}.items() if v is not None}
        path.write_bytes(safetensors.numpy.save(t, metadata=m))
    rc, out, err = run(["--params", path, "--L", 3], capsys)
    assert rc == 2 and out == ""
    _one_line_naming(err, field)


@pytest.mark.parametrize("argv,field", [
    (["--L", "0"], "--L"), (["--L", str(MAX_COUNTS + 1)], "--L"), (["--L", "many"], "--L"),
    (["--task", "sort"], "--task"), (["--read", "first"], "--read"), (["--frobnicate"], "frobnicate"),
], ids=["L=0", "L too large", "L not a number", "bad task", "bad read", "unknown option"])
def test_bad_options(argv, field, tmp_path, capsys, post_bare_64):
    path = write_json(tmp_path, post_bare_64)
    rc, out, err = run(["--params", path, *argv], capsys)
    assert rc == 2 and out == ""
    _one_line_naming(err, field)


def test_regression_needs_L_and_a_head_has_its_own(tmp_path, capsys, post_bare_64):
    rc, _, err = run(["--params", write_json(tmp_path, post_bare_64)], capsys)
    assert rc == 2
    _one_line_naming(err, "--L")
    path = tmp_path / "h.safetensors"
    path.write_bytes(safetensors.numpy.save(_tensors(_head(L=3)), metadata=META))
    rc, _, err = run(["--params", path, "--L", 5], capsys)
    assert rc == 2
    _one_line_naming(err, "4 rows")
    rc, out, _ = run(["--params", path, "--json"], capsys)  # L from the head: 3
    assert json.loads(out)["L"] == 3 and rc in (0, 1)


def test_select_override_needs_the_distractor(tmp_path, capsys, post_bare_64):
    rc, _, err = run(["--params", write_json(tmp_path, post_bare_64), "--L", 4, "--task", "select"], capsys)
    assert rc == 2
    _one_line_naming(err, "e_b")


def test_missing_file(tmp_path, capsys):
    for name in ("none.json", "none.safetensors"):
        rc, _, err = run(["--params", tmp_path / name, "--L", 3], capsys)
        assert rc == 2
        _one_line_naming(err, name)


def test_readme_usage_lists_every_option():
    import re

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    (block,) = [b for lang, b in re.findall(r"```(\w*)\n(.*?)```", readme, flags=re.S)
                if lang == "bash" and b.lstrip().startswith("python -m verify ")]
    documented = set(re.findall(r"--[A-Za-z][A-Za-z-]*", block))
    parser = verify_cli._parser()
    assert documented == {o for a in parser._actions for o in a.option_strings} - {"--help", "-h"}


def test_an_undefined_norm_cannot_be_certified(tmp_path, capsys):
    """Bare pre-LayerNorm of a constant embedding (eps = 0) is undefined: never "counts"."""
    cell = Cell("softmax", "pre_bare", "regression", d=3)
    params = Params(cell, {"e_s": [1, 1, 1], "e_a": [1, 0, 0], "w": [0, 1, 0]}, {"w0": 0})
    rc, out, err = run(["--params", write_json(tmp_path, params), "--L", 2, "--json"], capsys)
    report = json.loads(out)
    assert (rc, report["verdict"], report["certified"], err) == (1, "cannot certify", False, "")
    assert report["undecided"] == 3 and report["first_undecided"] == 0


# ----------------------------------------------------------------------------- B_min without sympy
VALUE_CELLS = [Cell("softmax", "none", "regression", d=8), Cell("softmax", "pre_bare", "regression", d=3),
               Cell("softmax", "pre_learned", "regression", d=8, norm="rmsnorm", affine="gain"),
               Cell("softmax", "post_bare", "regression", d=3), Cell("linear", "post_learned", "regression", d=8),
               Cell("linear", "pre_learned", "regression", d=17), Cell("linear", "none", "regression", d=2)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(VALUE_CELLS), st.one_of(st.integers(1, 40), st.integers(1, MAX_COUNTS)))
def test_the_text_s_b_min_is_the_exact_closed_form_rounded_to_nearest(cell, L):
    """``closed_forms.value`` (no sympy) against the exact closed form, evaluated by sympy to 40
    digits: the same range, and the double nearest to the exact value."""
    from constructions import closed_forms
    got, want = closed_forms.value(cell, L), closed_forms.closed_form(cell, L)
    assert (got is None) == (want is None)
    if want is not None:
        exact = closed_forms.formula(cell).piece(L).B_min.xreplace({closed_forms.L: L}).evalf(40)
        assert got["B"] == float(exact) and got["valid_for"] == want["valid_for"]


@pytest.mark.parametrize("cell", [Cell("softmax", "post_learned", "regression", d=8),
                                  Cell("softmax", "pre_learned", "regression", d=8),
                                  Cell("linear", "none", "regression", d=8)], ids=lambda c: c.describe())
def test_the_text_report_loads_neither_sympy_nor_scipy_and_says_the_same(cell, tmp_path):
    """The text report needs no symbols: run as a command it never imports sympy or scipy, and
    it prints what the report with the exact closed form prints."""
    from verify import report
    L = 300
    params = design(cell).build(L, design(cell).estimate(L) * 1.001)
    path = write_json(tmp_path, params)
    code = ("import sys; from verify.__main__ import main; rc = main(sys.argv[1:]); "
            "print(sorted(m for m in ('sympy', 'scipy') if m in sys.modules), rc)")
    res = subprocess.run([sys.executable, "-c", code, "--params", str(path), "--L", str(L)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    *lines, loaded = res.stdout.strip().splitlines()
    assert res.stderr == "" and loaded == "[] 0"
    with_exact = report.text(report.check(params, L, exact=True), str(path)).splitlines()
    assert lines == [line for line in with_exact if not line.startswith("B_min(L) exactly:")]
