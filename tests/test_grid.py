"""python -m bounds.grid: the rows of the serial sweep, from a store that survives killed runs and
damaged entries, computed serially, in local worker processes or on a Dask cluster."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from bounds import cluster, grid, store, sweep
from constructions import __version__
from constructions.cell import Cell

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRID_CMD = [sys.executable, "-m", "bounds.grid"]
# cheap cells: no norm and bare post-norm, both read-outs, at d = 2 (where post-LayerNorm
# cannot count) and d = 3
PARTS = {"variant": ("none", "post_bare"), "readout": ("regression", "classification"), "d": (2, 3)}
LS = [2, 4, 8]
ARGS = ["--variant", "none,post_bare", "--readout", "regression,classification", "--d", "2,3",
        "--Lmax", "8", "--fit-from", "2"]
CELLS = [Cell("softmax", v, r, d) for v, r, d in itertools.product(*PARTS.values())]
TOTAL = len(CELLS) * len(LS)


def _one_line_error(err: str) -> None:
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def _json(obj):
    return json.loads(json.dumps(obj))


def _without_seconds(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "seconds"}


def _run(capsys, out, *extra) -> dict:
    assert grid.main([*ARGS, "--out", str(out), "--json", *extra]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # no terminal: no bar
    return json.loads(captured.out)


def _by_row(result: dict) -> dict:
    """``{(cell keys, L): row without seconds}`` of a grid result."""
    names = list(CELLS[0].keys())
    return {(tuple(r[k] for k in names), r["L"]): _without_seconds(r) for r in result["rows"]}


def _entries(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.glob("*.json")}


@pytest.fixture(scope="module")
def serial():
    """The serial sweep of every cell, ``{cell: the sweep's object}`` (as JSON reads it back)."""
    return {cell: _json(sweep.sweep(cell, LS, fit_from=2, jobs=1)) for cell in CELLS}


@pytest.fixture(scope="module")
def expected(serial):
    """The grid's rows as the serial sweep gives them: the cell's keys and the sweep's row."""
    return {(tuple(cell.keys().values()), r["L"]): _without_seconds({**cell.keys(), **r})
            for cell, result in serial.items() for r in result["rows"]}


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """A store filled by one run in two worker processes, and that run's result."""
    folder = tmp_path_factory.mktemp("populated") / "store"
    assert grid.main([*ARGS, "--out", str(folder), "--json", "--jobs", "2"]) == 0
    return folder


def _copy(populated, tmp_path):
    folder = tmp_path / "store"
    shutil.copytree(populated, folder)
    return folder


def test_rows_and_fits_are_the_serial_sweeps(tmp_path, capsys, serial, expected):
    result = _run(capsys, tmp_path / "store", "--jobs", "1")
    assert result["computed"] == TOTAL and result["from_store"] == 0
    assert result["version"] == __version__
    for r in result["rows"]:  # exactly the cell's keys and the sweep's row keys
        cell = Cell(r["attention"], r["variant"], r["readout"], r["d"])
        sweep_row = next(s for s in serial[cell]["rows"] if s["L"] == r["L"])
        assert set(r) == set(cell.keys()) | set(sweep_row)
    assert _by_row(result) == expected
    assert len(result["cells"]) == len(CELLS)
    for c in result["cells"]:
        cell = Cell(c["attention"], c["variant"], c["readout"], c["d"])
        assert c["fit"] == serial[cell]["fit"] and c["L_star"] == serial[cell]["L_star"]
    # a cell that cannot count at d = 2 gives the sweep's rows there: notes, nothing certified
    post2 = [r for r in result["rows"] if r["variant"] == "post_bare" and r["d"] == 2]
    assert post2 and all(r["B_min"] is None and r["note"] for r in post2)
    # one entry per row; the table of a second run reads them all
    assert len(_entries(tmp_path / "store")) == TOTAL
    assert grid.main([*ARGS, "--out", str(tmp_path / "store")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 1 + TOTAL + len(CELLS) + 1
    assert table[-1].startswith(f"{TOTAL} rows: {TOTAL} from the store")


def test_parallel_equals_serial(populated, expected, tmp_path, capsys):
    folder = _copy(populated, tmp_path)
    before = _entries(folder)
    assert len(before) == TOTAL
    result = _run(capsys, folder, "--jobs", "2")
    assert result["computed"] == 0 and _by_row(result) == expected
    assert _entries(folder) == before  # read, not rewritten


def test_entries_are_keyed_by_everything_that_determines_a_row(populated):
    keys = [json.loads(b)["key"] for b in _entries(populated).values()]
    wanted = {(tuple(cell.keys().values()), L) for cell in CELLS for L in LS}
    assert {(tuple(k[n] for n in CELLS[0].keys()), k["L"]) for k in keys} == wanted
    for k in keys:
        assert k["rtol"] == 1e-6 and k["lower_boxes"] == sweep.ARC_BOXES
        assert k["version"] == __version__
    # any change of a part, L, a tolerance or the version is another entry
    base = store.key(CELLS[0], 2, 1e-6, 1000)
    others = [store.key(CELLS[0].replace(d=4), 2, 1e-6, 1000), store.key(CELLS[0], 4, 1e-6, 1000),
              store.key(CELLS[0], 2, 1e-7, 1000), store.key(CELLS[0], 2, 1e-6, 999),
              store.key(CELLS[0].replace(eps=1e-3), 2, 1e-6, 1000), {**base, "version": "0"}]
    names = {store.entry_name(k) for k in [base, *others]}
    assert len(names) == 1 + len(others)


def test_damaged_entries_are_recomputed_never_served(populated, expected, tmp_path, capsys):
    folder = _copy(populated, tmp_path)
    files = sorted(folder.glob("*.json"))
    truncated, garbage, stale, other_key, not_a_row = files[:5]
    truncated.write_bytes(truncated.read_bytes()[:40])
    garbage.write_bytes(b"\xff\xfe not json")
    entry = json.loads(stale.read_text())
    stale.write_text(json.dumps({"key": {**entry["key"], "version": "0.0.0"}, "row": entry["row"]}))
    entry = json.loads(other_key.read_text())  # an entry whose key is another row's
    moved = {**entry["key"], "L": entry["key"]["L"] * 1024}
    other_key.write_text(json.dumps({"key": moved, "row": {**entry["row"], "L": moved["L"]}}))
    entry = json.loads(not_a_row.read_text())
    not_a_row.write_text(json.dumps({"key": entry["key"], "row": [1, 2]}))
    (folder / ".deadbeef.json.partial").write_text('{"key": ')  # a write killed midway
    damaged = {p.name for p in files[:5]}
    untouched = {n: b for n, b in _entries(folder).items() if n not in damaged}
    result = _run(capsys, folder, "--jobs", "1")
    assert result["computed"] == len(damaged) and _by_row(result) == expected
    after = _entries(folder)
    assert len(after) == TOTAL and {n: after[n] for n in untouched} == untouched
    for name in damaged:  # rewritten whole, for its own key
        entry = json.loads(after[name])
        assert store.entry_name(entry["key"]) == name and entry["row"]["L"] == entry["key"]["L"]


def test_no_cache_recomputes_and_rewrites(populated, expected, tmp_path, capsys):
    folder = _copy(populated, tmp_path)
    before = _entries(folder)
    part = ["--variant", "none,post_bare", "--d", "3", "--Lmax", "8", "--fit-from", "2"]
    assert grid.main([*part, "--out", str(folder), "--json", "--no-cache"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["computed"] == 2 * len(LS) and result["from_store"] == 0
    assert _by_row(result).items() <= expected.items()
    after = _entries(folder)
    assert after.keys() == before.keys()
    # each entry of the part is rewritten with this run's row (its own timing), the others kept
    seconds = {store.entry_name(store.key(Cell("softmax", r["variant"], "regression", 3), r["L"],
                                          1e-6, sweep.ARC_BOXES)): r["seconds"]
               for r in result["rows"]}
    for name, data in after.items():
        if name in seconds:
            assert json.loads(data)["row"]["seconds"] == seconds[name]
        else:
            assert data == before[name]


def _wait_for_entries(folder, count: int, proc=None, timeout: float = 90) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline and (proc is None or proc.poll() is None):
        n = len(list(folder.glob("*.json"))) if folder.exists() else 0
        if n >= count:
            return n
        time.sleep(0.02)
    raise AssertionError(f"fewer than {count} entries appeared in {folder}")


def test_a_killed_run_resumes_without_recomputing(tmp_path, capsys, expected):
    folder = tmp_path / "store"
    proc = subprocess.Popen([*GRID_CMD, *ARGS, "--out", str(folder), "--jobs", "2"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    _wait_for_entries(folder, 3, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the command, with no chance to tidy (its workers follow it)
    proc.wait(timeout=60)
    kept = _entries(folder)
    assert 3 <= len(kept) < TOTAL
    for name, data in kept.items():  # every entry is whole and its own key's
        entry = json.loads(data)
        assert store.entry_name(entry["key"]) == name
    stamps = {n: (folder / n).stat().st_mtime_ns for n in kept}
    result = _run(capsys, folder, "--jobs", "1")
    assert result["from_store"] == len(kept) and result["computed"] == TOTAL - len(kept)
    assert _by_row(result) == expected
    assert {n: (folder / n).stat().st_mtime_ns for n in kept} == stamps  # not rewritten
    stored_seconds = {json.loads(b)["row"]["seconds"] for b in kept.values()}
    assert stored_seconds <= {r["seconds"] for r in result["rows"]}  # served as stored


def test_sigterm_ends_the_grid_and_its_workers_leaving_whole_entries(tmp_path):
    folder = tmp_path / "store"
    # 36 rows of a fraction of a second each: the signal comes long before the end
    proc = subprocess.Popen([*GRID_CMD, "--variant", "none,post_learned", "--d", "3,8",
                             "--Lmax", "512", "--out", str(folder),
                             "--jobs", "2"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _wait_for_entries(folder, 2, proc)
    workers = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == proc.pid]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and out == ""
    assert err.strip() == "grid: terminated"
    assert workers  # the grid ran in worker processes; they are gone (or unreaped zombies)
    time.sleep(0.5)
    assert [w for w in workers if _parent(w) is not None] == []
    kept = _entries(folder)
    assert 2 <= len(kept) < 36
    for name, data in kept.items():
        assert store.entry_name(json.loads(data)["key"]) == name


def _parent(pid: int):
    """The parent of a live process; None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[1])


def test_dask_cluster_with_a_worker_killed_midway(tmp_path, capsys, expected, monkeypatch):
    import distributed

    folder = tmp_path / "store"
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as local, \
            distributed.Client(local, set_as_default=False) as client:
        pids = sorted(client.run(os.getpid).values())
        killed = []

        def kill_one_worker():
            killed.append(_wait_for_entries(folder, 2))
            os.kill(pids[0], signal.SIGKILL)

        killer = threading.Thread(target=kill_one_worker, daemon=True)
        killer.start()
        result = _run(capsys, folder, "--scheduler", local.scheduler_address)
        killer.join(timeout=5)
        assert killed and killed[0] < TOTAL  # the worker died while rows were outstanding
        assert not os.path.exists(f"/proc/{pids[0]}") or _parent(pids[0]) is None
        assert result["computed"] == TOTAL and _by_row(result) == expected
        assert len(_entries(folder)) == TOTAL
        # a worker of another toolkit version is refused, and nothing of it is stored
        monkeypatch.setattr(cluster, "__version__", "0.0.0-other")
        fresh = tmp_path / "other"
        status = grid.main(["--variant", "none", "--Lmax", "2", "--out", str(fresh),
                            "--scheduler", local.scheduler_address])
        captured = capsys.readouterr()
        assert status == 1 and captured.out == ""
        _one_line_error(captured.err)
        assert "0.0.0-other" in captured.err and __version__ in captured.err
        assert not list(fresh.glob("*.json")) if fresh.exists() else True


BASE = {"--variant": "none", "--Lmax": "8"}
BAD = [
    {"--variant": "none,foo"}, {"--variant": "none,"}, {"--variant": "none,none"},
    {"--variant": ""}, {"--d": "1"}, {"--d": "3,x"}, {"--d": "3,,8"}, {"--d": "3,3"},
    {"--d": "70000"}, {"--Lmax": str(2 * sweep.MAX_L)}, {"--Lmax": "0"}, {"--Lmin": "9"},
    {"--attention": "softmax,quadratic"}, {"--norm": "batchnorm"}, {"--readout": "ranking"},
    {"--affine": "gain"}, {"--variant": "none,pre_learned", "--affine": "bare"},
    {"--variant": "post_bare", "--task": "select", "--read": "last", "--norm": "rmsnorm",
     "--readout": "classification", "--eps": "0.001"},
    {"--readout": "classification", "--Lmax": "65536", "--d": "64"},
    {"--eps": "-1"}, {"--rtol": "0.5"}, {"--jobs": "0"}, {"--lower-boxes": "0"},
    {"--fit-from": "0"}, {"--out": None}, {"--variant": None},
]


def _argv(folder, change: dict) -> list[str]:
    options = {**BASE, "--out": str(folder), **change}
    return [x for k, v in options.items() if v is not None for x in (k, v)]


@pytest.mark.parametrize("change", BAD, ids=[" ".join(f"{k}={v}" for k, v in c.items()) for c in BAD])
def test_bad_input(tmp_path, capsys, change):
    folder = tmp_path / "store"
    assert grid.main(_argv(folder, change)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    _one_line_error(captured.err)
    assert not folder.exists()  # refused before any work


def test_a_refused_cell_is_named(tmp_path, capsys):
    assert grid.main(_argv(tmp_path / "s", {"--variant": "none,post_bare", "--attention": "linear",
                                            "--task": "select", "--read": "last",
                                            "--eps": "0.01"})) == 2
    assert "linear/post_bare/regression" in capsys.readouterr().err
    assert grid.main(_argv(tmp_path / "s", {"--readout": "classification", "--Lmax": "65536",
                                            "--d": "8,64"})) == 2
    assert "softmax/none/classification (d=64" in capsys.readouterr().err


def test_store_that_cannot_be_written(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for folder in (blocker, blocker / "below"):
        assert grid.main(_argv(folder, {})) == 2
        _one_line_error(capsys.readouterr().err)
    assert blocker.read_text() == "x"


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:9", "nonsense", "foo://bar:1"])
def test_unreachable_scheduler(tmp_path, capsys, monkeypatch, address):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 0.5)
    folder = tmp_path / "store"
    assert grid.main(_argv(folder, {"--scheduler": address})) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and address in captured.err
    _one_line_error(captured.err)
    assert not list(folder.glob("*.json")) if folder.exists() else True


def test_scheduler_without_dask(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    assert grid.main(_argv(tmp_path / "store", {"--scheduler": "tcp://127.0.0.1:8786"})) == 2
    err = capsys.readouterr().err
    _one_line_error(err)
    assert "dask" in err and "not installed" in err


def test_readme_documents_every_option_and_the_timeout():
    import argparse
    import re

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    (usage,) = [b for b in re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
                if b.startswith("python -m bounds.grid")]
    parser = grid._parser()
    options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    assert set(re.findall(r"--[A-Za-z][A-Za-z-]*", usage)) == options - {"--help"}
    assert all(a.help and a.help != argparse.SUPPRESS for a in parser._actions)
    assert f"within {cluster.CONNECT_TIMEOUT:g} seconds" in readme


@pytest.mark.parametrize("axes,expected", [
    (["--task", "count,select"], {("count", "bos"), ("select", "bos")}),
    (["--read", "bos,last"], {("count", "bos"), ("count", "last")}),
])
def test_task_and_read_are_axes_of_the_grid(axes, expected, tmp_path, capsys):
    """--task and --read multiply the grid like the other parts; each row is the sweep's."""
    argv = ["--variant", "pre_learned", "--attention", "linear", *axes, "--Lmax", "4",
            "--jobs", "1", "--quiet", "--json"]
    assert grid.main([*argv, "--out", str(tmp_path / "store")]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {(r["task"], r["read"]) for r in rows} == expected
    for task, read in expected:
        cell = Cell("linear", "pre_learned", "regression", 8, task=task, read=read)
        mine = [r for r in rows if (r["task"], r["read"]) == (task, read)]
        fresh = sweep.sweep(cell, sweep.grid(2, 4))["rows"]
        assert [r["B_min"] for r in mine] == [r["B_min"] for r in fresh]


def test_a_task_without_a_construction_is_refused_in_one_line(tmp_path, capsys):
    argv = ["--variant", "post_learned", "--attention", "linear", "--eps", "0.01", "--task", "select",
            "--read", "last", "--Lmax", "4", "--out", str(tmp_path / "store")]
    assert grid.main(argv) == 2
    err = capsys.readouterr().err
    assert "no construction" in err and len(err.strip().splitlines()) == 1
