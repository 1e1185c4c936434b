"""Command-line arguments and messages: reproduce's --out and --seed, the benchmarks' unknown
flags, mvu at its defaults on a few points.  Each test is named after the symptom."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelforms as kf


def _reproduce(argv, capsys):
    from kernelforms.reproduce import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, capsys.readouterr().err


def test_reproduce_out_existing_file_is_a_clear_error_before_any_work(tmp_path, capsys, monkeypatch):
    import kernelforms.reproduce as rp

    monkeypatch.setattr(rp, "run", lambda *a, **k: pytest.fail("an experiment started"))
    f = tmp_path / "table.md"
    f.write_text("keep me")
    code, err = _reproduce(["kulis2006-fig1", "--quick", "--out", str(f)], capsys)
    assert code == 2 and "is an existing file" in err and "Traceback" not in err
    assert f.read_text() == "keep me"


def test_reproduce_out_under_proc_is_a_clear_error(capsys, monkeypatch):
    import kernelforms.reproduce as rp

    monkeypatch.setattr(rp, "run", lambda *a, **k: pytest.fail("an experiment started"))
    code, err = _reproduce(["kulis2006-fig1", "--quick", "--out", "/proc/x"], capsys)
    assert code == 2 and "cannot create or write the directory" in err


@pytest.mark.parametrize("seed", ["-1", "abc", "1.5"])
def test_reproduce_seed_minus_one_is_a_clear_error(seed, capsys):
    code, err = _reproduce(["kulis2006-fig1", "--quick", "--seed", seed], capsys)
    assert code == 2 and "argument --seed: must be an int >= 0" in err


def test_reproduce_run_checks_seed_and_out_in_python(tmp_path):
    from kernelforms.reproduce import run

    with pytest.raises(kf.errors.ProblemError, match=r"The 'seed' parameter of reproduce must be an int >= 0"):
        run("kulis2006-fig1", seed=-1)
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(kf.errors.ProblemError, match="is an existing file"):
        run("kulis2006-fig1", out=str(f))


def test_reproduce_writes_through_a_temporary_name(tmp_path):
    from kernelforms.reproduce import _write_text

    target = tmp_path / "t.md"
    _write_text(str(target), "table")
    assert target.read_text() == "table" and [p.name for p in tmp_path.iterdir()] == ["t.md"]


@pytest.mark.parametrize("name", ["admm", "bcd", "bregman", "formulations", "lowrank", "mvu"])
def test_bench_bogus_flag_says_the_flag_is_unknown_not_required_cmd(name, capsys):
    from kernelforms.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["bench", name, "--bogus-flag"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "unrecognized arguments: --bogus-flag" in err, err
    assert "required: cmd" not in err


@pytest.mark.parametrize("n", [4, 7, 11])
def test_mvu_at_its_defaults_solves_fewer_than_12_points(n):
    t = np.linspace(0, 1, n)
    X = np.c_[t, np.sin(3 * t), 0.1 * np.cos(5 * t)]
    p = kf.MVU.from_data(X, k=min(4, n - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(p, "mvu")
        ref = kf.solve(p, "sdp:clarabel")
    assert res.status.value == "converged", res.message
    assert res.violation <= 1e-6 * max(1.0, float(np.max(p.distances)) ** 2)
    # what converged certifies: an upper bound on the maximum within gap_tol (2e-4) of the objective
    assert res.upper_bound is not None and 0 <= res.certified_gap <= 2e-4
    assert res.objective <= res.upper_bound
    # equality MVU has no strictly feasible kernel, and Clarabel may end optimal_inaccurate with
    # an objective above the certified maximum (n = 11 with clarabel 0.11: 2.36262 > 2.36222, at a
    # violation of 2e-6): only an optimal row is a reference
    if ref.status.value == "optimal":
        assert abs(res.objective - ref.objective) <= 1e-4 * abs(ref.objective)
        assert ref.objective <= res.upper_bound * (1 + 1e-6)


def test_mvu_rank_above_n_names_only_the_option_given():
    t = np.linspace(0, 1, 6)
    p = kf.MVU.from_data(np.c_[t, np.sin(3 * t)], k=3)
    with pytest.raises(kf.errors.OptionError) as exc:
        kf.solve(p, "mvu", rank=7)
    assert "'rank'" in str(exc.value) and "max_rank" not in str(exc.value)
