"""The monotone envelope of the sweep's rows (bounds.sweep.envelope).

A parameter set certified to count to L' counts to every L <= L' (the inputs of L are among those
of L'), and a classification head of L' restricted to its rows 0..L classifies the inputs of L with
a margin at least its own.  Checked here: the rule against a brute force over random rows, the
check of proven bounds against certified ones, and on a cell where the rows are not monotone
(linear attention read last after post-RMSNorm with a gain: B_min(4) > B_min(8) at d = 8) the
reported row, the fit and the file ``--save-params`` writes for L = 4, judged at L = 4 by
``python -m verify``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bounds import fit as fitting
from bounds import sweep
from constructions import classification, cli
from constructions.cell import Cell
from verify import __main__ as verify_cli
from verify import params_file
from verify.certify import certify

REGRESSION = Cell("softmax", "none", "regression", d=8)
CLASSIFICATION = Cell("softmax", "none", "classification", d=4)


@st.composite
def raw_rows(draw):
    Ls = sorted(draw(st.sets(st.integers(2, 64), min_size=1, max_size=7)))
    rows = []
    for L in Ls:
        certified = draw(st.booleans())
        value = draw(st.floats(0.5, 10)) if certified or draw(st.booleans()) else None
        rows.append({"L": L, "B_min": value, "B_lower": draw(st.sampled_from([None, 0.0, 0.25])),
                     "certified": certified and value is not None, "seconds": 0.0,
                     "margin": value, "margin_upper": draw(st.sampled_from([None, 11.0]))})
    return rows


def _brute(rows, key, pick):
    """Per L: the best certified value over the rows of every L' >= L, and that L' (the
    smallest L' among equals after L itself)."""
    out = {}
    for r in rows:
        cands = [(q[key], q["L"]) for q in rows if q["L"] >= r["L"] and q["certified"]]
        sign = 1 if pick is min else -1
        out[r["L"]] = min(cands, key=lambda c: (sign * c[0], c[1])) if cands else None
    return out


@given(raw_rows())
def test_the_envelope_is_the_best_certified_value_of_every_larger_l(rows):
    for cell, key, pick in ((REGRESSION, "B_min", min), (CLASSIFICATION, "margin", max)):
        before = json.loads(json.dumps(rows))
        got = {r["L"]: r for r in sweep.envelope(cell, rows)}
        assert rows == before  # the input rows are not changed
        for r in rows:
            want, g = _brute(rows, key, pick)[r["L"]], got[r["L"]]
            if want is None:
                assert g == r
                continue
            assert g["certified"] and g[key] == want[0]
            own = r[key] if r["certified"] else None
            if own is not None and own == want[0]:  # its own value is the best: unchanged
                assert g == r
            else:
                wkey = sweep.ENVELOPE_KEYS[cell.readout]
                assert g[f"{key}_own"] == own and g[key] == got[g[wkey]][key]
                assert g[wkey] > r["L"] and f"L = {g[wkey]}" in g["note"]
        # the fit is made of the reported values
        fit = sweep.summary(cell, rows, fit_from=1)["fit"]
        Ls = sorted(got)
        want = fitting.fit(Ls, [got[L][key] if got[L]["certified"] else None for L in Ls], 1)
        assert fit["points"] == want["points"] == sum(1 for r in got.values() if r["certified"])
        assert fit["exponent"] == want["exponent"]


def test_a_certified_value_beyond_a_proven_bound_of_a_smaller_l_is_an_error():
    rows = [{"L": 2, "B_min": 3.0, "B_lower": 2.5, "certified": True},
            {"L": 4, "B_min": 2.0, "B_lower": 1.0, "certified": True}]  # 2.0 < B_lower(2)
    with pytest.raises(cli.Failure, match="L = 2"):
        sweep.envelope(REGRESSION, rows)
    rows = [{"L": 2, "margin": 0.1, "margin_upper": 0.2, "certified": True},
            {"L": 4, "margin": 0.3, "margin_upper": 0.4, "certified": True}]  # 0.3 > upper(2)
    with pytest.raises(cli.Failure, match="margin_upper"):
        sweep.envelope(CLASSIFICATION, rows)


def test_a_head_restricted_to_a_smaller_l_keeps_its_margin(tmp_path):
    head = classification.design(CLASSIFICATION).build(6)
    margin6 = certify(head, 6).min_margin
    files, _ = params_file.witness_files(head, 6, "L6")
    for L in (2, 5):
        named, note = sweep._witness_for(CLASSIFICATION, files, 6, L)
        assert note is None and set(named) == {f"L{L}.json", f"L{L}.safetensors"}
        small, _ = params_file.from_json(named[f"L{L}.json"])
        res = certify(small, L)
        assert small.classes == L + 1 and res.certified and res.min_margin >= margin6


LAST_GAIN = Cell("linear", "post_learned", "regression", d=8, norm="rmsnorm", read="last")


def test_a_non_monotone_cell_reports_the_larger_l_s_witness(tmp_path, capsys):
    result = sweep.sweep(LAST_GAIN, [4, 8], fit_from=4, jobs=1, save_params=str(tmp_path))
    r4, r8 = result["rows"]
    assert r4["B_min_own"] > r8["B_min"]  # the cell's rows are not monotone here
    assert r4["B_min_witness_L"] == 8 and r4["B_min"] == r8["B_min"] and r4["certified"]
    for r in (r4, r8):
        assert r["B_lower"] is not None and r["B_lower"] <= r["B_min"]
    assert result["fit"]["points"] == 2  # both reported values; with equal B_min the slope is 0
    assert result["fit"]["exponent"] == pytest.approx(0.0, abs=1e-12)
    # the file written for L = 4 is L = 8's witness, judged at L = 4
    assert (tmp_path / "L4.json").read_text() == (tmp_path / "L8.json").read_text()
    for name in ("L4.json", "L4.safetensors"):
        rc = verify_cli.main(["--params", str(tmp_path / name), "--L", "4", "--json"])
        report = json.loads(capsys.readouterr().out)
        assert rc == 0 and report["verdict"] == "counts" and report["cell"]["read"] == "last"
        assert report["B"] <= r4["B_min"] * (1 + 1e-12)
