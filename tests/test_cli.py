"""The `kernelforms` command: compare with its exports and baselines, grid, datasets, methods."""

from __future__ import annotations

import json

import pytest

import kernelforms as kf
from kernelforms.cli import main as cli

IRIS30 = ["--dataset", "iris", "--n-points", "30"]


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit):
        cli(["compare", "--help"])
    out = capsys.readouterr().out
    for flag in ("--json", "--markdown", "--plot", "--baseline", "--save-baseline", "--time-limit",
                 "--seed", "--gamma", "--loss", "examples:"):
        assert flag in out
    with pytest.raises(SystemExit):
        cli(["--help"])
    assert "kernelforms compare pcp --dataset soybean" in capsys.readouterr().out


def test_datasets_lists_sizes(capsys):
    assert cli(["datasets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["name", "n", "d", "n_classes"]
    iris = next(l for l in lines if l.startswith("iris "))
    assert iris.split()[1:4] == ["150", "4", "3"]


def test_methods_says_which_apply_and_why_not(capsys):
    assert cli(["methods"]) == 0
    assert "sdp " in capsys.readouterr().out
    assert cli(["methods", "npkl", *IRIS30, "--loss", "hinge"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NPKL(n=30")
    sdp = next(l for l in out.splitlines() if l.startswith("sdp "))
    assert sdp.rstrip().endswith("applies")
    assert "does not apply:" in out or len(kf.method_names()) == 1
    assert "certificate (gradient lower bound): applies" in out
    assert cli(["methods", "mvu", *IRIS30, "--k", "8"]) == 0
    assert "certificate (upper bound from edge multipliers): applies" in capsys.readouterr().out
    assert cli(["methods", "pcp-hard", *IRIS30]) == 0
    assert "certificate (gradient lower bound): no:" in capsys.readouterr().out


def test_compare_exports_and_baseline_round_trip(tmp_path, capsys):
    js, md, png, base = (tmp_path / f for f in ("r.json", "r.md", "r.png", "base.json"))
    args = ["compare", "pcp", *IRIS30, "--methods", "sdp:clarabel,sdp:scs", "--quiet"]
    code = cli(args + ["--json", str(js), "--markdown", str(md), "--save-baseline", str(base),
                       "--rtol", "1e-5"])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(js.read_text())
    assert data["complete"] and data["recipe"]["dataset"] == "iris" and data["recipe"]["n_points"] == 30
    assert kf.Report.from_json(js).to_json() == js.read_text()
    assert md.read_text().count("| sdp:") == 2
    entry = json.loads(base.read_text())["instances"]["pcp-iris-n30"]
    assert set(entry["methods"]) == {"sdp:clarabel", "sdp:scs"} and entry["rtol"] == 1e-5
    # the same instance against the stored optimum: passes
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp:scs", "--baseline", str(base),
                "--markdown", "-", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "baseline: ok" in out and "| sdp:scs |" in out
    pytest.importorskip("matplotlib")
    assert cli(args + ["--plot", str(png)]) == 0 and png.stat().st_size > 1000
    capsys.readouterr()


def test_baseline_fails_on_a_perturbed_solver(tmp_path, capsys, monkeypatch):
    from kernelforms import methods

    base = tmp_path / "base.json"
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp:clarabel", "--rtol", "1e-6",
                "--save-baseline", str(base), "--quiet"]) == 0
    capsys.readouterr()
    monkeypatch.setitem(methods.SOLVERS, "buggy", "kernelforms.testing:PerturbedMethod")
    code = cli(["compare", "pcp", *IRIS30, "--methods", "buggy", "--baseline", str(base), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1
    assert "baseline: FAILED" in out and "buggy: objective" in out and "drifts" in out


def test_time_limit_flag_and_bad_input(capsys):
    code = cli(["compare", "regpcp", *IRIS30, "--methods", "sdp:clarabel", "--time-limit", "60",
                "--quiet"])
    assert code == 0 and "optimal" in capsys.readouterr().out
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp", "--gamma", "-1"]) == 2
    assert "gamma" in capsys.readouterr().err


def test_grid_command(tmp_path, capsys):
    out_json = tmp_path / "g.json"
    code = cli(["grid", "pcp", "--dataset", "iris", "--sizes", "20,30", "--methods", "sdp:clarabel",
                "--workers", "2", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 of 2 instances agree" in out
    assert [r["params"]["n"] for r in json.loads(out_json.read_text())] == [20, 30]
