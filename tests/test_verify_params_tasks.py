"""``python -m verify`` on the ``select`` task and the ``last`` read position.

The judge (:func:`verify.judge.counts_to`) reads the task and the read position from the cell:
``select`` is judged on every input with ``n_a + n_b <= L`` (the target is ``n_a``), ``last``
reads the count at the last position under a causal mask.  The parameter sets below are
linear attention without a norm, at ``d = 4`` (``tau = 1/2``), whose outputs are worked out by
hand in exact arithmetic.
"""

from __future__ import annotations

import json

import pytest

from verify import __main__ as verify_cli


def _file(tmp_path, cell: dict, vectors: dict, w0=0) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"cell": {"attention": "linear", "variant": "none", "d": 4, **cell},
                                "vectors": vectors, "scalars": {"w0": w0}}))
    return str(path)


def _verify(capsys, *argv):
    rc = verify_cli.main([*map(str, argv), "--json"])
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if captured.out else None), captured.err


# bos read: e_s = (1,0,0,0), e_a = (1,1,0,0), w = (0,2,0,0).  Scores tau <e_s, e_x>: s 1/2, a 1/2,
# so A = 1/2 e_s + n_a/2 e_a + n_b tau <e_s, e_b> e_b and y = <w, e_s + A> = n_a + n_b tau
# <e_s, e_b> <w, e_b>.
E_S, E_A, W = [1, 0, 0, 0], [1, 1, 0, 0], [0, 2, 0, 0]


@pytest.mark.parametrize("e_b,L,verdict", [
    ([0, 0, 1, 0], 6, "counts"),               # <e_s, e_b> = 0: y = n_a
    ([1, 1, 0, 0], 6, "does not count"),        # e_b = e_a: y = n_a + n_b, wrong at (0, 1)
    (["0.25", "0.25", 1, 0], 7, "counts"),      # y = n_a + n_b/16: |y - n_a| < 1/2 iff n_b < 8
    (["0.25", "0.25", 1, 0], 8, "does not count"),
], ids=["invisible b", "b like a", "drift within L = 7", "drift fails at n_b = 8"])
def test_select_judges_every_pair(e_b, L, verdict, tmp_path, capsys):
    path = _file(tmp_path, {"task": "select"}, {"e_s": E_S, "e_a": E_A, "e_b": e_b, "w": W})
    rc, report, err = _verify(capsys, "--params", path, "--L", L)
    assert (rc, report["verdict"]) == ((0 if verdict == "counts" else 1), verdict), err
    assert report["cell"]["task"] == "select"


def test_select_override_on_a_count_file(tmp_path, capsys):
    """``--task select`` with a distractor vector given: the b that looks like a fails."""
    path = _file(tmp_path, {"task": "select"}, {"e_s": E_S, "e_a": E_A, "e_b": E_A, "w": W})
    rc, report, _ = _verify(capsys, "--params", path, "--L", 3, "--task", "select")
    assert rc == 1 and report["verdict"] == "does not count"


@pytest.mark.parametrize("suffix", [".json", ".safetensors"])
def test_count_override_on_a_select_file_ignores_the_distractor(tmp_path, capsys, suffix):
    """``--task count`` on a select file: the count inputs have no ``b``, so ``e_b`` is left out
    (named in ``ignored``) and the verdict is that of the same file without it, as a count file.
    Here ``e_b = e_a`` fails the select task but not the count task; its norm, the largest of
    the file, is not in ``B``."""
    from verify import params_file

    big_b = [2, 2, 0, 0]  # like a, and the largest vector of the file
    select = _file(tmp_path, {"task": "select"}, {"e_s": E_S, "e_a": E_A, "e_b": big_b, "w": W})
    if suffix == ".safetensors":
        params, _ = params_file.read(select)
        select = str(tmp_path / "p.safetensors")
        with open(select, "wb") as fh:
            fh.write(params_file.to_safetensors(params))
    rc, as_select, _ = _verify(capsys, "--params", select, "--L", 3)
    assert rc == 1 and as_select["verdict"] == "does not count" and as_select["ignored"] == []
    rc, report, err = _verify(capsys, "--params", select, "--L", 3, "--task", "count")
    (tmp_path / "c").mkdir()
    plain = _file(tmp_path / "c", {"task": "count"}, {"e_s": E_S, "e_a": E_A, "w": W})
    rc_plain, alone, _ = _verify(capsys, "--params", plain, "--L", 3)
    assert (rc, report["verdict"]) == (rc_plain, alone["verdict"]) == (0, "counts"), err
    assert report["ignored"] == ["e_b"] and alone["ignored"] == []
    assert report["cell"] == alone["cell"] and report["B"] == alone["B"] < as_select["B"]
    assert verify_cli.main(["--params", select, "--L", "3", "--task", "count"]) == 0
    assert "ignored: e_b" in capsys.readouterr().out


def test_select_override_on_a_count_file_needs_the_distractor(tmp_path, capsys):
    path = _file(tmp_path, {"task": "count"}, {"e_s": E_S, "e_a": E_A, "w": W})
    rc, _, err = _verify(capsys, "--params", path, "--L", 3, "--task", "select")
    assert rc == 2 and "e_b" in err and err.count("\n") == 1


# last read: e_s = (0,1,1,0), e_a = (1,0,0,0) (orthogonal), w = (2, 1/2, 1/2, 0), w0 = -2.
# n >= 1: query e_a, scores tau <e_a, e_s> = 0 and tau |e_a|^2 = 1/2, so r = e_a (1 + n/2) and
# y = 2 (1 + n/2) - 2 = n.  n = 0: query e_s, r = e_s (1 + tau |e_s|^2) = 2 e_s, y = 2 - 2 = 0.
# Read at bos instead: r = 2 e_s + n tau <e_s, e_a> e_a = 2 e_s, y = 0 for every n: wrong at 1.
LAST = {"e_s": [0, 1, 1, 0], "e_a": [1, 0, 0, 0], "w": [2, "0.5", "0.5", 0]}


def test_last_read_counts_where_bos_does_not(tmp_path, capsys):
    path = _file(tmp_path, {"read": "last"}, LAST, w0=-2)
    rc, report, err = _verify(capsys, "--params", path, "--L", 50)
    assert (rc, report["verdict"], report["cell"]["read"]) == (0, "counts", "last"), err
    assert report["worst_error"] == 0.0
    rc, report, _ = _verify(capsys, "--params", path, "--L", 50, "--read", "bos")
    assert (rc, report["verdict"], report["first_failure"]) == (1, "does not count", 1)


@pytest.mark.parametrize("task,read", [("select", "bos"), ("count", "last")])
def test_a_certified_head_of_another_task_or_read_reports_the_infimum(task, read, tmp_path, capsys):
    """Scaling only the head leaves the argmax, whatever the task or the read position: a
    classification head certified to count has ``B_min = 0`` as an infimum."""
    from constructions import classification
    from constructions.cell import Cell
    from verify.params_file import to_json

    cell = Cell("linear", "pre_learned", "classification", d=4, task=task, read=read)
    path = tmp_path / "head.json"
    path.write_text(to_json(classification.design(cell).build(5)))
    rc, report, err = _verify(capsys, "--params", path, "--L", 5)
    assert (rc, report["verdict"]) == (0, "counts"), err
    assert report["B_min"] == 0.0 and report["B_min_is_infimum"] is True and report["ratio"] is None
