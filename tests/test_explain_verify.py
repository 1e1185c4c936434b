"""`explain` and `verify`: every formulation x problem of the formulation and conformance
tests is described and verifies on random points without a solver; deliberately broken
formulations (a wrong weight, a dropped term, a dropped constant, a wrong bound, a dropped
constraint block, a wrong dual weight) are caught; bad arguments raise before any work; the
block of docs/formulations.md is the command's output."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import model as km
from kernelforms.formulations.base import program_size

pytest.importorskip("cvxpy")

import test_conformance as conf  # noqa: E402
import test_formulations as tf  # noqa: E402

FORMULATIONS = ("sdp", "scsdp", "scsdp_factor", "sqlp", "dual")
CASES = ([pytest.param("formulations", n, f, id=f"{n}-{f}") for n in tf.INSTANCES for f in FORMULATIONS]
         + [pytest.param("conformance", n, f, id=f"{n}-{f}") for n in conf.INSTANCES for f in FORMULATIONS])


def _problem(source, name):
    return tf.INSTANCES[name] if source == "formulations" else conf.instance(name)


@pytest.mark.parametrize("source,name,form", CASES)
def test_explain_and_verify_every_pair(source, name, form):
    p = _problem(source, name)
    reason = kf.get_method(form).applies_to(p)
    if reason is not None:
        for call in (lambda: kf.explain(p, form), lambda: kf.verify(p, form)):
            with pytest.raises(kf.NotApplicable, match=f"method '{form}' does not apply"):
                call()
        return
    res = kf.verify(p, form, seed=1)
    assert res.passed, str(res)
    names = {c.name for c in res.checks}
    assert names == ({"lagrangian", "multiplier domain", "dual value", "weak duality"} if form == "dual" else
                     {"contradiction"} if "contradiction" in names else
                     {"objective", "cones", "constraint rows", "recovery", "auxiliaries", "kernel domain"})
    text, md = kf.explain(p, form), kf.explain(p, form, format="markdown")
    # the sizes printed are the program's own (counted independently from the CVXPY program)
    form_obj = kf.get_method(form).formulation
    compiled = form_obj.compile(p)
    size = program_size(compiled.program)
    for k in size.psd_blocks:
        assert f"PSD {k} x {k}" in text
    for k in size.soc_sizes:
        assert f"SOC {k}" in text
    assert f"scalar variables  {size.n_variables}" in text or form == "dual"
    assert "objective check" in text and "Objective check" in md and "$" in md


def test_sqlp_explain_shows_rank_and_cone_sizes_of_the_instance():
    p = tf.INSTANCES["P3"]
    text = kf.explain(p, "sqlp")
    compiled = kf.get_method("sqlp").formulation.compile(p)
    r = compiled.size.rank_A
    assert f"u in R^{r + 2}" in text and f"SOC size          {r + 2}" in text
    assert f"B y - u_{{3:}} = h_B    {r} rows" in text
    assert "K = Q smat(y) Q^T" in text
    lmi = kf.explain(p, "scsdp")
    d = 6 * 7 // 2
    assert f"LMI of size {d + 1}" in lmi and f"A^(1/2) in R^({d} x {d})" in lmi
    assert f"LMI of size {r + 1}" in kf.explain(p, "scsdp_factor")


# ---------------------------------------------------------------------------- mutations
def _failed(res):
    return {c.name for c in res.checks if not c.passed}


def test_a_wrong_weight_in_the_sqlp_is_caught(monkeypatch):
    from kernelforms.formulations import sqlp

    p = tf.INSTANCES["P3"]
    assert kf.verify(p, "sqlp").passed
    orig = sqlp.quadratic_form

    def heavier(problem):
        q = orig(problem)
        return dataclasses.replace(q, F=q.F * np.sqrt(1.1), h=q.h * np.sqrt(1.1))  # weight x 1.1

    monkeypatch.setattr(sqlp, "quadratic_form", heavier)
    res = kf.verify(p, "sqlp")
    assert not res.passed and _failed(res) == {"objective"}
    assert res.check("objective").discrepancy > 1e-3
    assert "FAILED" in str(res) and "FAIL objective" in str(res)


def test_a_dropped_constant_in_the_schur_sdp_is_caught(monkeypatch):
    from kernelforms.formulations import schur_sdp

    p = tf.INSTANCES["P3"]
    orig = schur_sdp.factor_quadratic
    assert orig(schur_sdp.quadratic_form(p)).const > 1e-3  # there is a constant to drop
    monkeypatch.setattr(schur_sdp, "factor_quadratic",
                        lambda q, rtol=1e-12: dataclasses.replace(orig(q, rtol), const=0.0))
    assert _failed(kf.verify(p, "scsdp_factor")) == {"objective"}


def test_a_dropped_term_in_the_full_sdp_is_caught(monkeypatch):
    from kernelforms.formulations.full_sdp import FullSDP

    p = tf.INSTANCES["P1"]
    orig = FullSDP._terms

    def without_linear(self, decl, write, **kw):  # drops tr(L K)
        return orig(self, dataclasses.replace(decl, linear=()), write, **kw)

    monkeypatch.setattr(FullSDP, "_terms", without_linear)
    assert _failed(kf.verify(p, "sdp")) == {"objective"}


def _mutate_constraints(monkeypatch, change):
    from kernelforms.formulations.full_sdp import FullSDP

    orig = FullSDP._constraints

    def mutated(decl, write, dense):
        return orig(dataclasses.replace(decl, constraints=change(decl.constraints)), write, dense)

    monkeypatch.setattr(FullSDP, "_constraints", staticmethod(mutated))


def test_a_wrong_bound_is_caught(monkeypatch):
    p = tf.INSTANCES["P4"]  # MVU: 1^T K 1 = 0 and the edge distances
    _mutate_constraints(monkeypatch, lambda cs: (cs[0], km.Constraint(cs[1].map, "==", cs[1].bound * 1.01)))
    res = kf.verify(p, "sdp")
    assert _failed(res) == {"constraint rows"}
    assert "match no problem row" in res.check("constraint rows").detail


def test_a_dropped_constraint_block_and_a_flipped_sense_are_caught(monkeypatch):
    p = tf.INSTANCES["P7_burg"]  # distance bounds <= u and >= l
    _mutate_constraints(monkeypatch, lambda cs: cs[:-1] if len(cs) > 1 else
                        (km.Constraint(cs[0].map, np.where(cs[0].sense == km.LE, km.GE, km.LE), cs[0].bound),))
    assert _failed(kf.verify(p, "sdp")) == {"constraint rows"}
    monkeypatch.undo()
    _mutate_constraints(monkeypatch, lambda cs: ())
    p4 = tf.INSTANCES["P4"]
    assert _failed(kf.verify(p4, "sdp")) == {"constraint rows"}


def test_a_wrong_weight_in_the_dual_is_caught(monkeypatch):
    from kernelforms.formulations.dual_sdp import DualSDP

    p = tf.INSTANCES["P6_hinge"]
    orig = DualSDP._loss_terms

    def doubled(can):
        return [(m, loss, 2 * w) for m, loss, w in orig(can)]

    monkeypatch.setattr(DualSDP, "_loss_terms", staticmethod(doubled))
    res = kf.verify(p, "dual")
    assert "lagrangian" in _failed(res), str(res)


# ---------------------------------------------------------------------------- arguments
def test_bad_arguments_raise_before_any_work():
    p = tf.INSTANCES["P1"]
    with pytest.raises(kf.SolverNotFound, match="Did you mean 'sqlp'"):
        kf.explain(p, "sqlq")
    with pytest.raises(kf.SolverNotFound, match="hand-written solver"):
        kf.verify(p, "admm")
    with pytest.raises(kf.NotApplicable, match="no loss term"):
        kf.explain(tf.INSTANCES["P2"], "sqlp")
    with pytest.raises(kf.ProblemError, match="format must be one of"):
        kf.explain(p, "sqlp", format="html")
    with pytest.raises(kf.ProblemError, match=r"'n_points' parameter of verify must be an integer in \[3, "):
        kf.verify(p, "sqlp", n_points=2)
    with pytest.raises(kf.ProblemError, match="'seed' parameter of verify must be"):
        kf.verify(p, "sqlp", seed=-1)
    with pytest.raises(kf.ProblemError, match="must be a kernelforms problem"):
        kf.verify(np.eye(3), "sdp")


def test_cli_explain_and_verify(capsys, monkeypatch):
    from kernelforms.cli import main

    args = ["regpcp", "--dataset", "soybean", "--m-basis", "5", "--method", "sqlp"]
    assert main(["explain", *args]) == 0
    out = capsys.readouterr().out
    assert "SQLP (Wu et al. 2009, eq. 21-25)" in out and "PSD block (s)     5" in out
    assert main(["explain", *args, "--markdown"]) == 0
    assert r"$$ \min \; u_1 - u_2" in capsys.readouterr().out
    assert main(["verify", *args]) == 0
    assert "PASSED" in capsys.readouterr().out
    assert main(["verify", *args[:-1], "admm"]) == 2
    assert "hand-written solver" in capsys.readouterr().err
    from kernelforms.formulations import sqlp

    orig = sqlp.factor_quadratic
    monkeypatch.setattr(sqlp, "factor_quadratic",
                        lambda q, rtol=1e-12: dataclasses.replace(orig(q, rtol), const=0.0))
    assert main(["verify", *args]) == 1
    assert "FAIL objective" in capsys.readouterr().out


def test_the_docs_block_is_the_commands_output():
    from kernelforms.explain import current_block, docs_block

    doc = (Path(__file__).resolve().parent.parent / "docs" / "formulations.md").read_text()
    assert current_block(doc) == docs_block(), (
        "docs/formulations.md is out of date: python -m kernelforms.explain --update docs/formulations.md")


# ---------------------------------------------------------------------------- side by side
def test_ipm_flops_counts_the_schur_complement_and_each_cone():
    from kernelforms.explain import ipm_flops
    from kernelforms.formulations.base import ProgramSize

    assert ipm_flops(ProgramSize(n_variables=3)) == pytest.approx(9.0)
    assert ipm_flops(ProgramSize(psd_blocks=(2,), n_variables=3)) == pytest.approx(9 + 9 * 4 + 3 * 8)
    assert ipm_flops(ProgramSize(soc_sizes=(5,), n_variables=3)) == pytest.approx(9 + 9 * 5)


def test_side_by_side_sets_the_schur_sdp_beside_the_sqlp_with_the_predicted_ratio():
    from kernelforms.explain import compare_programs, ipm_flops
    from kernelforms.recipes import build_from_recipe

    p = build_from_recipe({"problem": "regpcp", "dataset": "soybean", "m_basis": 8})
    out = compare_programs(p, ["scsdp", "sqlp"], measure=False)
    lines = out.splitlines()
    assert lines[0].endswith(": scsdp vs sqlp")
    row = {ln.split("  ")[0]: ln for ln in lines if ln and not ln.startswith(" ")}
    assert "PSD 37 x 37" in out and "SOC" in row["cone blocks"] + out  # the LMI of d + 1 = 37
    assert row["rank(A)"].count("of min(") == 2
    sizes = [kf.get_method(m).formulation.compile(p).size for m in ("scsdp", "sqlp")]
    ratio = ipm_flops(sizes[0]) / ipm_flops(sizes[1])
    assert ratio > 1 and f"predicted ratio scsdp / sqlp: {ratio:.3g}x work per iteration" in out
    assert "measured" not in row  # not solved


def test_side_by_side_measures_both_programs():
    from kernelforms.explain import compare_programs

    p = kf.PCP.from_data(*kf.datasets.load("iris", n_points=12, seed=0)[:1],
                         kf.pairs.sample_pairs(kf.datasets.load("iris", n_points=12, seed=0)[1], seed=0))
    out = compare_programs(p, ["sdp", "sqlp"], time_limit=60)
    assert out.count("optimal, ") == 2 and "measured:" in out and "time per iteration" in out


def test_side_by_side_bad_arguments_raise_before_any_solve(capsys):
    from kernelforms.cli import main
    from kernelforms.explain import compare_programs

    p = kf.PCP.from_data(*kf.datasets.load("iris", n_points=12, seed=0)[:1],
                         kf.pairs.sample_pairs(kf.datasets.load("iris", n_points=12, seed=0)[1], seed=0))
    with pytest.raises(kf.ProblemError, match="'methods' parameter of explain must name two"):
        compare_programs(p, ["sqlp"])
    with pytest.raises(kf.ProblemError, match="two or more different"):
        compare_programs(p, ["sqlp", "SQLP"])
    with pytest.raises(kf.SolverNotFound, match="hand-written solver"):
        compare_programs(p, ["sqlp", "admm"])
    args = ["regpcp", "--dataset", "soybean", "--m-basis", "5"]
    assert main(["explain", *args]) == 2  # neither --method nor --methods
    assert "give --method NAME" in capsys.readouterr().err
    assert main(["explain", *args, "--method", "sqlp", "--methods", "scsdp,sqlp"]) == 2
    assert "give --method NAME" in capsys.readouterr().err
    assert main(["explain", *args, "--methods", "sqlp"]) == 2
    assert "two or more different formulations" in capsys.readouterr().err
    assert main(["explain", *args, "--methods", "scsdp,sqlp", "--no-measure"]) == 0
    assert "predicted ratio scsdp / sqlp" in capsys.readouterr().out
