"""Nothing already computed is lost: baselines saved by several processes at once, and the
baseline options of the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kernelforms as kf
from kernelforms.cli import main as cli
from kernelforms.result import Result, Status
from kernelforms.testing import baseline_lock, check_baseline, save_baseline

ROOT = Path(__file__).resolve().parent.parent

#: a child process: saves `count` entries into `path`; load_baseline sleeps after reading, so
#: that the read-modify-write windows of the processes overlap (without the lock, every
#: process would overwrite the others' entries)
CHILD = textwrap.dedent("""
    import sys, time
    import kernelforms as kf, kernelforms.testing as kt
    from kernelforms.result import Result, Status
    path, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    read = kt.load_baseline
    def slow(p):
        data = read(p)
        time.sleep(0.15)
        return data
    kt.load_baseline = slow
    for k in range(count):
        row = Result(method="sdp:clarabel", status=Status.OPTIMAL, objective=1.0 + k, violation=0.0,
                     certifying=True)
        rep = kf.Report(f"p{who}-{k}", {}, f"f{who}{k}", "min", [row])
        kt.save_baseline(rep, path, name=f"{who}-{k}")
""")


def test_processes_saving_one_baseline_at_once_lose_no_entry(tmp_path):
    """Three processes saving at once lost an entry in 1 of 12 trials (read-modify-write
    without a lock)."""
    path = tmp_path / "base.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OPENBLAS_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(w), "3"], env=env,
                              stderr=subprocess.PIPE) for w in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    data = json.loads(path.read_text())
    assert sorted(data["instances"]) == sorted(f"{w}-{k}" for w in range(4) for k in range(3))
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]  # no temporary file left


def test_baseline_lock_gives_up_with_a_clear_error_when_held(tmp_path):
    path = tmp_path / "base.json"
    with baseline_lock(path):
        with pytest.raises(kf.KernelformsError, match="locked by another process"):
            with baseline_lock(path, timeout=0.2):
                pass
    with baseline_lock(path, timeout=0.2):  # released
        pass


def test_an_unverified_comparison_is_not_pinned_as_a_baseline(tmp_path):
    rep = kf.Report("p", {}, "f", "min", [Result("admm", Status.MAX_ITER, objective=3.0, violation=0.0)])
    assert rep.verdict == "unverified"
    with pytest.raises(kf.KernelformsError, match="verified nothing"):
        save_baseline(rep, tmp_path / "b.json")
    assert not (tmp_path / "b.json").exists()


def test_baseline_of_a_small_optimum_drifts_on_the_data_scale(tmp_path):
    rows = [Result("sdp:clarabel", Status.OPTIMAL, objective=2.0e-5, violation=0.0, certifying=True)]
    rep = kf.Report("p", {}, "f", "min", rows, objective_scale=28.0)
    save_baseline(rep, tmp_path / "b.json", name="small")
    near = kf.Report("p", {}, "f", "min", [Result("sdp:clarabel", Status.OPTIMAL, objective=2.003e-5,
                                                  violation=0.0, certifying=True)], objective_scale=28.0)
    assert check_baseline(near, tmp_path / "b.json", "small") == []
    far = kf.Report("p", {}, "f", "min", [Result("sdp:clarabel", Status.OPTIMAL, objective=2.0e-5 + 1e-4,
                                                 violation=0.0, certifying=True)], objective_scale=28.0)
    assert "drifts" in check_baseline(far, tmp_path / "b.json", "small")[0]


def test_cli_baseline_that_is_a_directory_says_so(tmp_path, capsys):
    code = cli(["compare", "pcp", "--dataset", "iris", "--n-points", "30", "--methods", "sdp:clarabel",
                "--baseline", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "is a directory" in err and "no such file" not in err


def test_cli_json_empty_string_names_the_empty_string(capsys):
    code = cli(["compare", "pcp", "--dataset", "iris", "--n-points", "30", "--methods", "sdp:clarabel",
                "--json", "", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "--json" in err and "''" in err and "'.'" not in err


@pytest.mark.parametrize("methods", ["sdp:", "sdp:clarabel,sqlp:", " :clarabel"])
def test_cli_methods_with_an_empty_conic_solver_name_are_refused(methods, capsys):
    code = cli(["compare", "pcp", "--dataset", "iris", "--n-points", "30", "--methods", methods, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "--methods" in err and "empty" in err
