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
                 "--seed", "--gamma", "--loss", "--vtol", "examples:"):
        assert flag in out
    with pytest.raises(SystemExit):
        cli(["--help"])
    assert "kernelforms compare pcp --dataset soybean" in capsys.readouterr().out


def test_compare_vtol_defaults_to_the_constraint_scale_and_can_be_given(tmp_path, capsys):
    roll = ["compare", "mvu", "--dataset", "swiss_roll", "--n-points", "40", "--methods", "mvu",
            "--no-certify", "--quiet"]
    out = tmp_path / "r.json"
    assert cli([*roll, "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    viol = rep["rows"][0]["violation"]
    assert rep["vtol"] > 1e-3 and viol <= rep["vtol"]  # 1e-5 of the largest squared distance (157)
    capsys.readouterr()
    assert cli([*roll, "--vtol", f"{viol / 2!r}", "--json", str(out)]) == 1  # absolute when given
    assert json.loads(out.read_text())["vtol"] == viol / 2
    assert "infeasible" in capsys.readouterr().out
    assert cli([*roll, "--vtol", "-1"]) == 2  # refused before anything runs
    assert "argument --vtol: must be a finite number >= 0" in capsys.readouterr().err


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
    assert "will run" in sdp
    assert "does not apply:" in out or len(kf.method_names()) == 1
    assert "certificate (Lagrangian lower bound): applies" in out
    assert cli(["methods", "mvu", *IRIS30, "--k", "8"]) == 0
    assert "certificate (Lagrangian upper bound): applies" in capsys.readouterr().out
    assert cli(["methods", "pcp-hard", *IRIS30]) == 0
    # hard PCP (must-links as equalities) is certified on the merged must-link points
    assert "certificate (Lagrangian lower bound): applies" in capsys.readouterr().out


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


# ---------------------------------------------------------------------- frictions of a new user
def _no_run(monkeypatch):
    """Make any method run fail the test: bad input must be refused before work starts."""
    import sys

    def boom(*a, **k):
        raise AssertionError("compare() ran although the input was bad")

    monkeypatch.setattr(sys.modules["kernelforms.compare"], "compare", boom)


def test_n_points_draws_generated_sets_at_that_size(capsys):
    # was: "two_gaussians (1000 points)" then PCP(n=300)
    assert cli(["methods", "pcp", "--dataset", "two_gaussians", "--n-points", "30"]) == 0
    assert capsys.readouterr().out.startswith("PCP(n=30,")
    assert cli(["methods", "pcp", "--dataset", "chessboard", "--n-points", "130"]) == 0
    assert capsys.readouterr().out.startswith("PCP(n=130,")
    assert cli(["methods", "mvu", "--dataset", "swiss_roll", "--n-points", "25", "--k", "6"]) == 0
    assert capsys.readouterr().out.startswith("MVU(n=25,")


def test_n_points_above_the_file_is_refused_not_capped(capsys, monkeypatch):
    # was: "iris (500 points)" then n = 150
    _no_run(monkeypatch)
    code = cli(["compare", "pcp", "--dataset", "iris", "--n-points", "500", "--methods", "sdp"])
    err = capsys.readouterr().err
    assert code == 2 and "500" in err and "150 points" in err and "Traceback" not in err


def test_n_points_subset_is_the_stratified_one_of_the_stored_baselines(capsys):
    # the CLI's subset (and so the fingerprint) is the one the shipped baselines were made with
    from pathlib import Path

    base = json.loads((Path(__file__).parent / "data" / "baselines.json").read_text())
    entry = base["instances"]["pcp-iris-n30"]
    from kernelforms.cli import _build_recipe

    problem = _build_recipe(entry["recipe"])[0]
    assert problem.fingerprint() == entry["fingerprint"]


@pytest.mark.parametrize("args, flag", [
    (["compare", "pcp", "--dataset", "iris", "--n-points", "0"], "--n-points"),
    (["compare", "pcp", "--dataset", "iris", "--n-points", "-5"], "--n-points"),
    (["compare", "pcp", "--dataset", "iris", "--n-points", "2"], "n_points"),
    (["compare", "pcp", "--dataset", "iris", "--n-points", "x"], "--n-points"),
    (["compare", "pcp", "--dataset", "iris", "--seed", "-1"], "--seed"),
    (["compare", "pcp", "--dataset", "iris", "--gamma", "nan"], "--gamma"),
    (["compare", "pcp", "--dataset", "iris", "--gamma", "0"], "--gamma"),
    (["compare", "pcp", "--dataset", "iris", "--k", "0"], "--k"),
    (["compare", "pcp", "--dataset", "iris", "--delta", "-1"], "--delta"),
    (["compare", "pcp", "--dataset", "iris", "--rtol", "0"], "--rtol"),
    (["compare", "pcp", "--dataset", "iris", "--time-limit", "-3"], "--time-limit"),
    (["compare", "pcp", "--dataset", "iris", "--max-memory", "lots"], "--max-memory"),
    (["compare", "pcp", "--dataset", "irsi"], "--dataset"),
    (["compare", "npkl", "--dataset", "iris", "--loss", "hinj"], "--loss"),
    (["compare", "regpcp", "--dataset", "iris", "--m-basis", "0"], "--m-basis"),
    (["grid", "pcp", "--dataset", "iris", "--sizes", "abc"], "--sizes"),
    (["grid", "pcp", "--dataset", "iris", "--sizes", "30,,60"], "--sizes"),
    (["grid", "pcp", "--dataset", "iris", "--seeds", "1,-1"], "--seeds"),
    (["grid", "pcp", "--dataset", "iris", "--workers", "0"], "--workers"),
])
def test_bad_flag_values_exit_2_with_a_message_not_a_traceback(args, flag, capsys, monkeypatch):
    _no_run(monkeypatch)
    if "--methods" not in args:
        args = args + ["--methods", "sdp:clarabel"]
    assert cli(args) == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err


@pytest.mark.parametrize("problem, flag", [
    ("pcp", ["--loss", "hinge"]), ("pcp", ["--m-basis", "5"]), ("pcp-hard", ["--gamma", "2"]),
    ("mvu", ["--gamma", "2"]), ("mvu", ["--n-must", "3"]), ("bregman", ["--k", "3"]),
    ("npkl", ["--rank", "4"]), ("regmvu", ["--per-class"]), ("npkl", ["--b", "2"]),
])
def test_flag_the_problem_does_not_use_is_an_error_not_ignored(problem, flag, capsys, monkeypatch):
    # was: --loss hinge silently ignored for pcp
    _no_run(monkeypatch)
    assert cli(["compare", problem, *IRIS30, "--methods", "sdp", *flag]) == 2
    err = capsys.readouterr().err
    assert flag[0] in err and ("applies to" in err or "only used by" in err)
    # where the flag applies, it is accepted (here: by `methods`, which only builds)
    assert cli(["methods", "npkl", *IRIS30, "--loss", "linear", "--b", "2"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("args, flag", [
    (["grid", "pcp", *IRIS30, "--sizes", "20,30"], "--sizes"),
    (["grid", "pcp", "--dataset", "iris", "--seed", "1", "--seeds", "2,3"], "--seeds"),
    (["compare", "pcp", *IRIS30, "--baseline-name", "x"], "--baseline-name"),
])
def test_flag_that_another_flag_overrides_is_an_error_not_ignored(args, flag, capsys, monkeypatch):
    _no_run(monkeypatch)
    assert cli(args + ["--methods", "sdp"]) == 2
    assert flag in capsys.readouterr().err


def test_methods_without_a_problem_refuses_problem_flags(capsys):
    assert cli(["methods", "--dataset", "heart"]) == 2
    assert "--dataset: give a problem first" in capsys.readouterr().err
    assert cli(["methods", "pcp"]) == 0  # soybean by default
    assert capsys.readouterr().out.startswith("PCP(n=47,")


def test_methods_typo_exits_2_not_1(capsys, monkeypatch):
    # was: exit 1 ("disagree") for a typo
    _no_run(monkeypatch)
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp,admn"]) == 2
    err = capsys.readouterr().err
    assert "'admn'" in err and "Did you mean" in err and "admm" in err
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp,sdp"]) == 2
    assert "twice" in capsys.readouterr().err
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp:nosuchsolver"]) == 2


@pytest.mark.parametrize("flag", ["--json", "--markdown", "--plot", "--save-baseline"])
def test_unwritable_output_is_refused_before_any_method_runs(flag, tmp_path, capsys, monkeypatch):
    _no_run(monkeypatch)
    bad = str(tmp_path / "no" / "such" / "dir" / "out.x")
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp", flag, bad]) == 2
    err = capsys.readouterr().err
    assert "out.x" in err and "Traceback" not in err
    # a directory is not a file either
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp", flag, str(tmp_path)]) == 2
    capsys.readouterr()


def test_missing_baseline_file_is_refused_before_any_method_runs(tmp_path, capsys, monkeypatch):
    _no_run(monkeypatch)
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp", "--baseline",
                str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


def test_write_failing_after_the_run_keeps_the_report_and_exits_2(tmp_path, capsys, monkeypatch):
    import sys

    def disk_full(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sys.modules["kernelforms.compare"], "atomic_write", disk_full)
    md = tmp_path / "r.md"
    code = cli(["compare", "pcp", *IRIS30, "--methods", "sdp:clarabel", "--markdown", str(md), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "sdp:clarabel" in out and "agree" in out  # the table was printed
    assert str(md) in err and "No space left" in err and "Traceback" not in err


def test_timed_out_method_exits_with_the_report_exit_code(capsys, monkeypatch):
    from kernelforms import methods

    monkeypatch.setitem(methods.SOLVERS, "slow", "kernelforms.testing:SlowMethod")
    code = cli(["compare", "pcp", *IRIS30, "--methods", "sdp:clarabel,slow", "--time-limit", "1",
                "--quiet"])
    out = capsys.readouterr().out
    assert "timeout" in out
    assert code == 3  # agree among the rows that finished (the reference is certified)


def test_legend_explains_the_columns(capsys):
    code = cli(["compare", "pcp", *IRIS30, "--methods", "sdp:clarabel", "--legend", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert kf.Report.legend() in out and "Columns" in out


def test_verbose_prints_the_iteration_table_of_hand_written_solvers(capsys):
    code = cli(["compare", "npkl", *IRIS30, "--methods", "simplenpkl", "--verbose", "--quiet"])
    out = capsys.readouterr().out
    assert code == 3, out  # a lone uncertified row verifies nothing: unverified
    assert " simplenpkl:" in out and "iter" in out and "objective" in out


def test_verbose_without_a_hand_written_solver_is_an_error(capsys, monkeypatch):
    _no_run(monkeypatch)
    assert cli(["compare", "pcp", *IRIS30, "--methods", "sdp:clarabel", "--verbose"]) == 2
    assert "--verbose" in capsys.readouterr().err


def test_grid_sizes_above_the_file_are_refused_before_any_run(capsys, monkeypatch):
    import sys

    monkeypatch.setattr(sys.modules["kernelforms.grid"], "compare_grid", lambda *a, **k: pytest.fail("grid ran"))
    assert cli(["grid", "pcp", "--dataset", "soybean", "--sizes", "20,60", "--methods", "sdp"]) == 2
    assert "60" in capsys.readouterr().err


def test_grid_draws_generated_sets_at_each_size_and_plots_time_vs_size(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "t.png"
    code = cli(["grid", "pcp", "--dataset", "two_gaussians", "--sizes", "12,400", "--methods",
                "admm", "--workers", "2", "--plot", str(png), "--no-certify"])
    out = capsys.readouterr().out
    assert code == 0, out  # admm's run certifies itself (--no-certify skips only compare's own)
    ns = [line.split()[0] for line in out.splitlines()[1:3]]
    assert ns == ["12", "400"]  # 400 > the generator's default 300: drawn, not capped
    assert png.stat().st_size > 1000


def test_methods_says_what_compare_will_do_with_the_memory_it_needs(capsys):
    # was: `methods pcp --dataset heart` said sdp/sqlp/scsdp "apply", then compare skipped them
    assert cli(["methods", "pcp", "--dataset", "heart"]) == 0
    lines = {l.split()[0]: l for l in capsys.readouterr().out.splitlines()[2:] if l.strip()}
    skipped = [m for m in kf.method_names() if "skipped (size guard" in lines[m]]
    running = [m for m in kf.method_names() if "will run" in lines[m]]
    assert "scsdp" in skipped and "needs about" in lines["scsdp"] and "GiB" in lines["scsdp"]
    assert "admm" in running and "needs about" in lines["admm"]
    # compare does what `methods` said: the skipped ones are skipped (before any solve)
    cli(["compare", "pcp", "--dataset", "heart", "--methods", ",".join(skipped), "--quiet"])
    out = capsys.readouterr().out
    for m in skipped:
        row = next(l for l in out.splitlines() if l.startswith(m + " "))
        assert "skipped" in row
    # --max-memory moves the guard: with a tiny limit what fitted is skipped
    assert cli(["methods", "pcp", "--dataset", "heart", "--max-memory", "1KB"]) == 0
    out = capsys.readouterr().out
    assert "skipped (size guard" in next(l for l in out.splitlines() if l.startswith("admm "))


def test_bregman_default_rank_fits_data_of_fewer_than_16_dimensions(tmp_path, capsys):
    # the default rank was 16 (Kulis et al. 2006, 16-dimensional Pendigits): on the 10 data
    # sets with d < 16 (iris, wine, glass, two_gaussians, ...) `compare bregman` failed with
    # "rank must be an int in [1, 4]" unless --rank was given
    out = tmp_path / "r.json"
    args = ["compare", "bregman", "--dataset", "two_gaussians", "--n-points", "60", "--methods",
            "burg", "--quiet", "--json", str(out)]
    assert cli(args) == 0
    rep = json.loads(out.read_text())
    assert "r=10" in rep["problem"] and rep["rows"][0]["status"] == "converged"
    # 16 given is refused on such data, with the range in the message
    assert cli(["compare", "bregman", "--dataset", "iris", "--rank", "16", "--methods", "burg"]) == 2
    assert "must be an int in [1, 4]. Got 16" in capsys.readouterr().err


def test_bregman_recipe_rank_16_and_the_default_are_one_instance():
    # recipes written before the default changed say rank 16; on data of 16 or more
    # dimensions they build the instance the default builds (same fingerprint, same name)
    from kernelforms.recipes import build_from_recipe, recipe_name

    old = {"problem": "bregman", "dataset": "soybean", "rank": 16}
    new = {"problem": "bregman", "dataset": "soybean"}
    assert build_from_recipe(old).fingerprint() == build_from_recipe(new).fingerprint()
    assert recipe_name(old) == recipe_name(new) == "bregman-soybean"
    assert build_from_recipe({**new, "rank": 8}).fingerprint() != build_from_recipe(new).fingerprint()


def test_bregman_constraints_and_epsilon_from_the_command_line(tmp_path, capsys):
    # Kulis et al.'s 100 constraints are infeasible at iris's rank 4 (a proof, exit 0 with
    # both rows infeasible); --n-constraints makes a feasible draw, which the CLI could not
    from kernelforms.recipes import build_from_recipe, recipe_name

    out = tmp_path / "r.json"
    base = ["compare", "bregman", "--dataset", "iris", "--methods", "burg", "--quiet", "--json", str(out)]
    assert cli(base) == 0
    assert json.loads(out.read_text())["rows"][0]["status"] == "infeasible"
    assert cli(base + ["--n-constraints", "10", "--epsilon", "0.1"]) == 0
    rep = json.loads(out.read_text())
    assert rep["rows"][0]["status"] == "converged" and "n_constraints=10" in rep["problem"]
    assert rep["recipe"]["n_constraints"] == 10 and rep["recipe"]["epsilon"] == 0.1
    # the defaults given explicitly are the default instance
    new = {"problem": "bregman", "dataset": "soybean"}
    same = {**new, "n_constraints": 100, "epsilon": 0.25}
    assert build_from_recipe(same).fingerprint() == build_from_recipe(new).fingerprint()
    assert recipe_name(same) == "bregman-soybean"
    assert recipe_name({**new, "n_constraints": 10}) == "bregman-soybean-n_constraints=10"
    assert build_from_recipe({**new, "epsilon": 0.1}).fingerprint() != build_from_recipe(new).fingerprint()
    # refused before any work: another problem, or a value out of range
    assert cli(["compare", "pcp", "--dataset", "iris", "--n-constraints", "5", "--methods", "admm"]) == 2
    assert "--n-constraints: not used by pcp" in capsys.readouterr().err
    assert cli(base + ["--epsilon", "1.5"]) == 2
    # (the range is the schema's: refused by the parser, naming the flag)
    assert "argument --epsilon: must be a float in [0, 1); got '1.5'" in capsys.readouterr().err
    with pytest.raises(kf.ProblemError, match=r"'epsilon' parameter of build_problem\('bregman'\) must be "
                       r"a float in \[0, 1\) or None"):
        build_from_recipe({**new, "epsilon": 1.5})


def test_compare_mvu_on_a_disconnected_graph_names_the_flags_that_fix_it(capsys):
    # the 4-NN graph of the 200-point roll of seed 0 has 2 components (tr K unbounded): the
    # error comes before any method runs and names a --seed and a --k that connect it
    from kernelforms.cli import main as cli

    rc = cli(["compare", "mvu", "--dataset", "swiss_roll", "--n-points", "200", "--methods", "mvu",
              "--inequality"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "2 components" in err and "--seed 1" in err and "--k 5" in err
    from kernelforms.cli.run import _components

    X1, _ = kf.datasets.load("swiss_roll", n_points=200, seed=1)
    X0, _ = kf.datasets.load("swiss_roll", n_points=200, seed=0)
    assert _components(X1, 4) == 1 and _components(X0, 5) == 1 and _components(X0, 4) == 2
