"""The edges of the commands: closed and full output, signals, files whole or absent, help."""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from bounds import benchmark, sweep
from constructions import __version__, cli, derive
from constructions.cell import architectures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP = [sys.executable, "-m", "bounds.sweep"]
QUICK = ["--variant", "none", "--attention", "linear", "--Lmax", "16"]


def _one_line_error(err: str) -> None:
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


# --------------------------------------------------------------------------- standard output


def test_full_stdout_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        proc = subprocess.run(SWEEP + QUICK, cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 2
    _one_line_error(proc.stderr)
    assert "No space left" in proc.stderr


def test_closed_stdout_is_quiet():
    proc = subprocess.Popen(SWEEP + QUICK + ["--json"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the sweep prints
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 141
    assert err == ""


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize("sig,status,word", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_signal_ends_the_sweep_and_its_workers(tmp_path, sig, status, word):
    out = tmp_path / "res"
    proc = subprocess.Popen(SWEEP + ["--variant", "post_learned", "--Lmax", "65536", "--jobs", "2",
                                     "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    deadline = time.time() + 60
    workers = []
    while time.time() < deadline and len(workers) < 2:
        time.sleep(0.2)
        workers = _children(proc.pid)
    assert len(workers) == 2, "the sweep did not start its worker processes"
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # Ctrl-C reaches the whole process group
    else:
        proc.send_signal(sig)
    try:
        outs, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # show where it hangs
        proc.send_signal(signal.SIGABRT)
        outs, err = proc.communicate()
        raise AssertionError(f"the sweep did not end after {sig!r}: {err[-3000:]}") from None
    assert proc.returncode == status
    assert err.strip() == f"sweep: {word}"
    assert outs == ""
    time.sleep(0.5)
    alive = [w for w in workers if os.path.exists(f"/proc/{w}")
             and open(f"/proc/{w}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    assert alive == []
    assert not out.exists()  # nothing was written: the rows were not finished


# --------------------------------------------------------------------------- files


def test_out_refused_up_front(tmp_path, monkeypatch, capsys):
    """Every unusable ``--out`` is refused before the (long) sweep starts: in process, where a
    sweep that started would fail the test, and one of them at the process level."""
    blocker = tmp_path / "file"
    blocker.write_text("x")

    def started(*args, **kw):
        raise AssertionError("the sweep started before --out was refused")

    monkeypatch.setattr(sweep, "sweep", started)
    for target in ("", "   ", str(blocker), str(blocker / "below")):
        assert sweep.main(["--variant", "post_learned", "--Lmax", "65536", "--out", target]) == 2, target
        out, err = capsys.readouterr()
        assert out == ""
        _one_line_error(err)
    start = time.perf_counter()
    proc = subprocess.run(SWEEP + ["--variant", "post_learned", "--Lmax", "65536", "--out", str(blocker / "below")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    _one_line_error(proc.stderr)
    assert time.perf_counter() - start < 30  # refused before the (long) sweep


def _sweep_to(out, *extra, limit=None):
    def shrink():
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(SWEEP + QUICK + ["--out", str(out), *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, preexec_fn=shrink)


def test_failed_write_keeps_the_previous_pair(tmp_path):
    out = tmp_path / "res"
    first = _sweep_to(out)
    assert first.returncode == 0, first.stderr
    before = {name: (out / name).read_bytes() for name in ("sweep.json", "sweep.csv")}
    # a file-size limit below the size of the new JSON: the write fails part-way
    failed = _sweep_to(out, "--d", "5", limit=200)
    assert failed.returncode == 2
    _one_line_error(failed.stderr)
    assert sorted(os.listdir(out)) == ["sweep.csv", "sweep.json"]  # no partial file left
    assert {name: (out / name).read_bytes() for name in before} == before


def test_csv_and_json_say_what_they_are(tmp_path, capsys):
    out = tmp_path / "res"  # the files' content: in process (the tests above run the command)
    assert sweep.main(QUICK + ["--out", str(out), "--d", "5"]) == 0, capsys.readouterr().err
    result = json.loads((out / "sweep.json").read_text())
    assert result["version"] == __version__
    with open(out / "sweep.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(result["rows"])
    for row in rows:
        assert (row["attention"], row["variant"], row["readout"]) == ("linear", "none", "regression")
        assert int(row["d"]) == 5 and float(row["eps"]) == 0.0 and row["version"] == __version__


def _write_pair(args):
    folder, tag, times = args
    for _ in range(times):
        cli.write_files(folder, {"a.json": json.dumps({"run": tag}) + "\n" + "x" * 20000,
                                 "a.csv": f"run\n{tag}\n" + "y" * 20000})
    return tag


def test_concurrent_writers_never_mix_a_pair(tmp_path):
    folder = str(tmp_path / "shared")
    for _ in range(5):
        with ProcessPoolExecutor(4) as pool:
            list(pool.map(_write_pair, [(folder, tag, 20) for tag in "abcd"]))
        run_json = json.loads((tmp_path / "shared" / "a.json").read_text().splitlines()[0])["run"]
        run_csv = (tmp_path / "shared" / "a.csv").read_text().splitlines()[1]
        assert run_json == run_csv
        assert sorted(os.listdir(folder)) == ["a.csv", "a.json"]


def test_write_files_leaves_nothing_when_interrupted(tmp_path, monkeypatch):
    """An exception between the temporary files and the renames leaves the old set alone."""
    folder = tmp_path / "res"
    cli.write_files(str(folder), {"one": "old 1", "two": "old 2"})
    real_replace = os.replace

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli.write_files(str(folder), {"one": "new 1", "two": "new 2"})
    monkeypatch.setattr(os, "replace", real_replace)
    assert sorted(os.listdir(folder)) == ["one", "two"]
    assert (folder / "one").read_text() == "old 1" and (folder / "two").read_text() == "old 2"


# --------------------------------------------------------------------------- help and benchmark


@pytest.mark.parametrize("parser", [sweep._parser, benchmark._parser, derive._parser],
                         ids=["sweep", "benchmark", "derive"])
def test_every_option_has_help(parser):
    for action in parser()._actions:
        assert action.help and action.help != argparse.SUPPRESS, action.option_strings


def test_sweep_help_says_what_the_bounds_mean():
    text = sweep._parser().format_help()
    assert "B_min" in text and "B_lower" in text and "lower bound" in text


BENCH_BAD = [["--cells", "foo"], ["--cells", "softmax/none"], ["--Lmax", "0"], ["--repeat", "0"],
             ["--Lmax", "x"], ["--unknown"]]


@pytest.mark.parametrize("argv", BENCH_BAD, ids=[" ".join(a) for a in BENCH_BAD])
def test_benchmark_bad_input(argv, capsys):
    assert benchmark.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    _one_line_error(captured.err)


def test_benchmark_full_stdout():
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "bounds.benchmark", "--Lmax", "2", "--cells",
                               "linear/none/regression"], cwd=ROOT, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 2
    _one_line_error(proc.stderr)


def test_benchmark_reports_wall_and_cpu(capsys):
    assert benchmark.main(["--Lmax", "4", "--cells", "linear/none/regression"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "wall" in lines[0] and "cpu" in lines[0]
    fields = lines[1].split()
    wall, cpu = float(fields[3]), float(fields[5])
    assert wall > 0 and cpu > 0


# --------------------------------------------------------------------------- found by hostile use


@pytest.mark.parametrize("module", ["bounds.sweep", "constructions.derive", "bounds.benchmark"])
def test_help_on_a_full_stdout_is_an_error(module):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 2
    _one_line_error(proc.stderr)


@pytest.mark.parametrize("argv", [SWEEP + QUICK, [sys.executable, "-m", "constructions.derive",
                                                  "--variant", "none"]], ids=["sweep", "derive"])
def test_stdout_closed_before_start_is_quiet(argv):
    proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=120, preexec_fn=lambda: os.close(1))
    assert proc.returncode == 141
    assert proc.stderr == ""


@pytest.mark.parametrize("eps", ["1e-400", "-1e-400", "0x1p-2000"])
def test_eps_that_is_not_representable_is_refused(eps, capsys):
    assert sweep.main(["--variant", "post_bare", "--Lmax", "4", "--eps", eps]) == 2
    _one_line_error(capsys.readouterr().err)


def test_negative_zero_eps_is_zero(capsys):
    assert sweep.main(["--variant", "none", "--Lmax", "2", "--eps", "-0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["eps"] == 0.0 and str(out["eps"]) == "0.0"


def test_failed_file_names_the_file(tmp_path):
    failed = _sweep_to(tmp_path / "res", limit=200)
    assert failed.returncode == 2
    _one_line_error(failed.stderr)
    assert "sweep.json" in failed.stderr or "sweep.csv" in failed.stderr


def test_files_follow_the_umask(tmp_path):
    out = tmp_path / "res"
    proc = subprocess.run(SWEEP + QUICK + ["--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, preexec_fn=lambda: os.umask(0o027))
    assert proc.returncode == 0, proc.stderr
    for name in ("sweep.json", "sweep.csv"):
        assert (out / name).stat().st_mode & 0o777 == 0o640


def test_benchmark_repeat_is_bounded(capsys):
    assert benchmark.main(["--repeat", str(benchmark.MAX_REPEAT + 1)]) == 2
    _one_line_error(capsys.readouterr().err)


def _wait_for(pid: int, ready, limit: float = 60.0) -> None:
    """Poll the running process ``pid`` every 2 ms until ``ready(pid)`` holds."""
    end = time.monotonic() + limit
    while not ready(pid):
        assert time.monotonic() < end, "the process never reached the state under test"
        time.sleep(0.002)


def _numpy_is_loading(pid: int) -> bool:
    """numpy's compiled core is mapped: the toolkit's modules are loading (the command itself
    starts only after every module of ``bounds.sweep`` has loaded, about 0.2 s later)."""
    with open(f"/proc/{pid}/maps") as fh:
        return "_multiarray_umath" in fh.read()


def _has_workers(pid: int) -> bool:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return bool(fh.read().split())


def _signal_group_when(ready, argv, sig):
    proc = subprocess.Popen(SWEEP + argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        _wait_for(proc.pid, ready)
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc.returncode, err


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs /proc")
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_while_the_modules_load_is_one_line(sig, status):
    """Between the interpreter's start and the command's own handling, the package's start-up
    handler ends the run: one line, 130 / 143, no traceback."""
    code, err = _signal_group_when(_numpy_is_loading, QUICK, sig)
    assert code == status, err
    _one_line_error(err)


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs /proc")
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_to_the_group_while_workers_run_is_one_line(sig, status):
    """Ctrl-C at a terminal, or ``kill`` of the process group, reaches the worker processes too:
    the run still ends in one line with 130 / 143 (a worker killed while holding the pool's
    task lock once made the shutdown wait forever)."""
    argv = ["--variant", "post_learned", "--Lmax", str(2 ** 20), "--jobs", "2"]
    code, err = _signal_group_when(_has_workers, argv, sig)
    assert code == status, err
    _one_line_error(err)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal")
def test_workers_do_not_outlive_a_killed_sweep():
    """SIGKILL of the command (no chance to tidy) ends its workers at once, not after their rows:
    the first rows at ``L = 2^20`` take seconds."""
    argv = ["--variant", "post_learned", "--Lmax", str(2 ** 20), "--jobs", "2"]
    proc = subprocess.Popen(SWEEP + argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        _wait_for(proc.pid, _has_workers)
        time.sleep(0.2)  # the workers are past their start
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
            workers = [int(w) for w in fh.read().split()]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)

    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 2.0
    while any(alive(w) for w in workers):
        assert time.monotonic() < deadline, "a worker outlived the killed sweep"
        time.sleep(0.01)


@pytest.mark.parametrize("main,argv", [
    (sweep.main, ["--variant", "none", "--Lmax", "4", "--qui"]),
    (derive.main, ["--variant", "none", "--read", "last"]),  # not --readout
    (benchmark.main, ["--repeat", "1", "--naive", "16"]),
])
def test_an_abbreviated_option_is_unknown(main, argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    _one_line_error(err)
    assert "unrecognized arguments" in err


@pytest.mark.parametrize("cell", architectures(d=4), ids=lambda c: c.describe())
def test_every_architecture_sweeps_or_is_refused_in_one_line(cell, capsys):
    argv = ["--variant", cell.variant, "--attention", cell.attention, "--readout", cell.readout,
            "--norm", cell.kind.name, "--d", "4", "--Lmax", "2", "--jobs", "1", "--json"]
    argv += ["--affine", cell.affine.name] if cell.learned else []
    rc = sweep.main(argv)
    out, err = capsys.readouterr()
    if rc == 0:
        assert json.loads(out)["rows"][-1]["L"] == 2 and not err
    else:
        assert rc == 2 and not out and len(err.strip().splitlines()) == 1
