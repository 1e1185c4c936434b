"""Export to SDPA / CBF and import of external solutions (kernelforms.exchange).

* Round trips: for every (problem, formulation) pair of tests/test_formulations.py, the
  exported SDPA and CBF files, read back by our own readers and solved with Clarabel, have
  the compiled program's optimum to 1e-7 (relative; both solves at tolerance 1e-10, so
  the gaps measured are <= 2e-9).
* A hand-made SDPA file whose optimum is derived by hand, and the SDPA manual's example.
* A solution file (written by our CSDP / SDPA writers from a CVXPY solve of the exported
  file) imported as an :class:`ExternalSolution` row of ``compare``, agreeing with
  ``sdp:clarabel``.
* Errors: named before any work.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import exchange as ex
from kernelforms.errors import DataError, NotApplicable, OptionError, ProblemError
from kernelforms.exchange.sdpa import (
    check_solution,
    from_conic,
    read_csdp_solution,
    read_sdpa,
    solve_sdpa,
    write_sdpa,
)
from kernelforms.result import Status
from test_formulations import APPLIES, INSTANCES

pytest.importorskip("cvxpy")

#: both solves of a round trip run Clarabel at this tolerance
TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}
#: the round trip keeps the optimum to this (relative)
ROUND_TRIP_RTOL = 1e-7
#: Clarabel on P7's von Neumann program reports "optimal" with value inf (a CVXPY / Clarabel
#: matter, not the export's); test_formulations has no reference for it either
NO_REFERENCE = {("P7_von_neumann", "sdp")}
#: the 30-point instances: seconds each (the A^{1/2} Schur LMI of P1_n30 has order 466)
SLOW_INSTANCES = {"P1_n30", "P6_hinge_n30"}
#: programs with exponential cones (log det, entropy, the logistic loss and its conjugate)
EXP_CONES = {"P7_burg", "P7_von_neumann", "P6_logistic"}

PAIRS = [pytest.param(p, f, marks=[pytest.mark.slow] if p in SLOW_INSTANCES else [])
         for f in APPLIES for p in sorted(APPLIES[f]) if (p, f) not in NO_REFERENCE]


def _solve(program):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program.solve(solver="CLARABEL", **TIGHT)
    assert program.status in ("optimal", "optimal_inaccurate"), program.status
    return float(program.value)


@pytest.mark.parametrize("name,form", PAIRS)
def test_round_trip_keeps_the_optimum(name, form, tmp_path):
    problem = INSTANCES[name]
    compiled, _ = ex.compile_form(problem, form)
    ref = _solve(compiled.program)
    for suffix in (".dat-s", ".cbf"):
        path = tmp_path / f"{name}_{form}{suffix}"
        if suffix == ".dat-s" and name in EXP_CONES:
            # exponential cones, which SDPA cannot hold
            with pytest.raises(NotApplicable, match="exponential cone.*CBF"):
                ex.export(problem, form, path)
            continue
        ex.export(problem, form, path)
        value = _solve(ex.read_program(path))
        gap = abs(value - ref) / max(1.0, abs(ref))
        assert gap <= ROUND_TRIP_RTOL, (name, form, suffix, value, ref, gap)


def test_sdpa_and_cbf_files_read_back_exactly(tmp_path):
    """Writing and reading loses nothing: the SDPA data and the CBF program's objective and
    constraints at a random point are those of the conic form (an equality-constrained
    maximisation with arrow blocks, and a program with exponential cones)."""
    rng = np.random.default_rng(0)
    # P4 (MVU, a maximisation with equalities) through the SDPA file
    _, form = ex.compile_form(INSTANCES["P4"], "sdp")
    prog = from_conic(form)
    back = read_sdpa(write_sdpa(prog, tmp_path / "p4.dat-s"))
    assert back.sign == -1 and back.offset == form.offset and np.array_equal(back.c, prog.c)
    for b0, b1 in zip(prog.blocks, back.blocks):
        assert b0.size == b1.size
        assert np.array_equal(b0.i, b1.i) and np.array_equal(b0.j, b1.j)
        assert abs(b0.F - b1.F).max() == 0
    # the SDPA matrix at x is E(b - A x): compare with the cones' own rows (arrow, PSD, pairs)
    x = rng.normal(size=form.n)
    s = form.b - form.A @ x
    X = back.slack(x)
    z = form.zero
    assert np.allclose(X[0][:2 * z:2], s[:z]) and np.allclose(X[0][1:2 * z:2], -s[:z])
    r0 = form.cone_rows()["psd"][0]
    p = form.psd[0]
    L = np.tril(np.ones((p, p), dtype=bool))
    M = np.zeros((p, p))
    M.T[L.T] = s[r0:r0 + p * (p + 1) // 2]  # column-major lower triangle
    M = np.where(np.eye(p, dtype=bool), M, M / math.sqrt(2))
    M = np.tril(M) + np.tril(M, -1).T
    assert np.allclose(X[-1], M)
    # P1's SQLP through CBF: objective and every cone row at x
    compiled, form = ex.compile_form(INSTANCES["P1"], "sqlp")
    program = ex.read_program(ex.export(INSTANCES["P1"], "sqlp", tmp_path / "p1.cbf"))
    x = rng.normal(size=form.n)
    program.variables()[0].value = x
    assert math.isclose(program.objective.value, form.objective(x), rel_tol=1e-12)


HAND_MADE = '''" min x1  s.t.  [[x1, 1], [1, x2]] PSD,  x2 <= 4: optimum 1/4 at x = (1/4, 4)
* (x1 x2 >= 1 and x2 <= 4, so x1 >= 1/4; the second block is the row 4 - x2 >= 0)
2 =mdim
2 =nblocks
{2, -1}
{1.0, 0.0}
0 1 1 2 -1.0
1 1 1 1 1.0
2 1 2 2 1.0
0 2 1 1 -4.0
2 2 1 1 -1.0
'''

#: the example of the SDPA user's manual (Fujisawa, Kojima & Nakata), whose documented
#: optimum is objValPrimal = -41.9 (CSDP 6.2.0 on this file: -41.9 too)
SDPA_MANUAL_EXAMPLE = '''"Example 1: mDim = 3, nBLOCK = 1, {2}"
   3  =  mDIM
   1  =  nBOLCK
   2  = bLOCKsTRUCT
{48, -8, 20}
0 1 1 1 -11
0 1 2 2 23
1 1 1 1 10
1 1 1 2 4
2 1 2 2 -8
3 1 1 2 -8
3 1 2 2 -2
'''


def test_hand_made_sdpa_file(tmp_path):
    path = tmp_path / "hand.dat-s"
    path.write_text(HAND_MADE)
    prog = read_sdpa(path)
    assert [b.size for b in prog.blocks] == [2, -1] and prog.m == 2
    sol = solve_sdpa(prog, **TIGHT)
    assert sol.x == pytest.approx([0.25, 4.0], abs=1e-7)
    assert float(prog.c @ sol.x) == pytest.approx(0.25, abs=1e-8)
    # the dual certifies it: tr(F_i Y) = c_i and tr(F_0 Y) = 1/4
    checks = check_solution(prog, sol)
    assert checks["dual_infeas"] < 1e-8 and checks["gap"] < 1e-8
    assert checks["dobj"] == pytest.approx(0.25, abs=1e-8)
    path.write_text(SDPA_MANUAL_EXAMPLE)
    assert ex.read_program(path).solve(solver="CLARABEL") == pytest.approx(-41.9, rel=1e-7)


# ---------------------------------------------------------------------------- solutions
@pytest.fixture(scope="module")
def p1_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("p1")
    problem = INSTANCES["P1"]
    dat = ex.export(problem, "sdp", d / "p1.dat-s")
    ex.solve_exported(dat, d / "p1.sol", **TIGHT)          # CSDP's solution file
    ex.solve_exported(dat, d / "p1.out", **TIGHT)          # SDPA's result file
    return problem, d


def test_imported_solution_is_a_compare_row(p1_files):
    problem, d = p1_files
    external = ex.ExternalSolution(d / "p1.sol", method="sdp", label="csdp", program=d / "p1.dat-s")
    report = kf.compare(problem, ["sdp:clarabel", external], progress=False)
    rows = {r.method: r for r in report.rows}
    assert set(rows) == {"sdp:clarabel", "sdp:csdp"}
    imported = rows["sdp:csdp"]
    assert imported.status is Status.OPTIMAL, imported.message       # the dual was checked
    assert imported.extras["gap"] < 1e-8 and imported.extras["dual_infeas"] < 1e-8
    ref = rows["sdp:clarabel"].objective
    assert abs(imported.objective - ref) / abs(ref) < 1e-7
    assert imported.violation <= 1e-8
    assert report.agree()
    assert "sdp:csdp" in str(report)


def test_sdpa_result_and_vector_files(p1_files, tmp_path):
    problem, d = p1_files
    ref = kf.solve(problem, "sdp:clarabel").objective
    res = ex.ExternalSolution(d / "p1.out", method="sdp").run(problem)
    assert res.status is Status.OPTIMAL and res.method == "sdp:sdpa-file"
    assert abs(res.objective - ref) / abs(ref) < 1e-7
    # the values of x alone (e.g. from MOSEK on the CBF file): no dual, so not "optimal"
    cbf = ex.read_program(ex.export(problem, "sdp", tmp_path / "p1.cbf"))
    _solve(cbf)
    np.savetxt(tmp_path / "p1.x", cbf.variables()[0].value)
    res = ex.ExternalSolution(tmp_path / "p1.x", method="sdp").run(problem)
    assert res.status is Status.OPTIMAL_INACCURATE and "no dual" in res.message
    assert abs(res.objective - ref) / abs(ref) < 1e-7


def test_a_maximisation_imports_with_its_sign(tmp_path):
    problem = INSTANCES["P5"]  # RegMVU: sense max
    dat = ex.export(problem, "scsdp", tmp_path / "p5.dat-s")
    ex.solve_exported(dat, tmp_path / "p5.sol", **TIGHT)
    res = ex.ExternalSolution(tmp_path / "p5.sol", method="scsdp").run(problem)
    ref = kf.solve(problem, "scsdp:clarabel").objective
    assert res.status is Status.OPTIMAL
    assert res.objective > 0 and abs(res.objective - ref) / abs(ref) < 1e-7
    assert res.extras["file_objective"] == pytest.approx(res.objective, rel=1e-6)


# ---------------------------------------------------------------------------- errors
def test_errors_name_the_fix(tmp_path, p1_files):
    problem, d = p1_files
    with pytest.raises(OptionError, match="hand-written solver"):
        ex.export(problem, "admm", tmp_path / "a.dat-s")
    with pytest.raises(OptionError, match=r"\.dat-s.*\.cbf"):
        ex.export(problem, "sdp", tmp_path / "a.txt")
    with pytest.raises(OptionError, match="does not exist"):
        ex.export(problem, "sdp", tmp_path / "nowhere" / "a.cbf")
    with pytest.raises(NotApplicable, match="sqlp"):
        ex.export(INSTANCES["P2"], "sqlp", tmp_path / "a.cbf")
    with pytest.raises(OptionError, match="format="):
        ex.ExternalSolution(tmp_path / "p1.unknown")
    with pytest.raises(OptionError, match="hand-written"):
        ex.ExternalSolution(d / "p1.sol", method="admm")
    # a solution of another program: its length is wrong
    other = ex.export(INSTANCES["P3"], "sdp", tmp_path / "p3.dat-s")
    ex.solve_exported(other, tmp_path / "p3.sol")
    with pytest.raises(DataError, match="variables"):
        ex.ExternalSolution(tmp_path / "p3.sol").run(problem)
    # program= of another problem is refused before any work
    with pytest.raises(ProblemError, match="another problem"):
        ex.ExternalSolution(d / "p1.sol", program=other).run(problem)
    bad = tmp_path / "bad.dat-s"
    bad.write_text("2\n1\n2\n1 0\n1 1 1 1 x\n")
    with pytest.raises(DataError, match="non-numeric"):
        read_sdpa(bad)
    bad.write_text("2\n1\n-2\n1 0\n1 1 1 2 1.0\n")
    with pytest.raises(DataError, match="diagonal"):
        read_sdpa(bad)
    cbf = tmp_path / "bad.cbf"
    cbf.write_text("VER\n3\nVAR\n1 1\nF 1\nINT\n1\n0\n")
    with pytest.raises(DataError, match=r"bad\.cbf:6: integer variables \(INT\)"):
        ex.read_program(cbf)


def test_csdp_solution_file_layout(p1_files):
    """x on the first line, then 'matno block i j value' with matno 1 (X) and 2 (Y), i <= j."""
    problem, d = p1_files
    lines = (d / "p1.sol").read_text().splitlines()
    prog = read_sdpa(d / "p1.dat-s")
    assert len(lines[0].split()) == prog.m
    entries = np.array([[float(t) for t in s.split()] for s in lines[1:]])
    assert set(entries[:, 0]) == {1.0, 2.0} and np.all(entries[:, 2] <= entries[:, 3])
    sol = read_csdp_solution(prog, d / "p1.sol")
    assert check_solution(prog, sol)["gap"] < 1e-8


def test_cli_compare_export(tmp_path, capsys):
    import json

    from kernelforms.cli import main

    out, report = tmp_path / "programs", tmp_path / "report.json"
    code = main(["compare", "pcp", "--dataset", "iris", "--n-points", "10", "--methods",
                 "sdp:clarabel,admm", "--export", str(out), "--quiet", "--no-certify",
                 "--json", str(report)])
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["sdp.cbf", "sdp.dat-s"]
    text = capsys.readouterr().out
    assert "exported sdp (sdpa)" in text and "exported sdp (cbf)" in text
    # the exported program is the one compare solved
    rows = {r["method"]: r for r in json.loads(report.read_text())["rows"]}
    ref = rows["sdp:clarabel"]["objective"]
    for name in ("sdp.cbf", "sdp.dat-s"):
        assert abs(_solve(ex.read_program(out / name)) - ref) / abs(ref) < 1e-7


@pytest.mark.skipif(shutil.which("csdp") is None, reason="CSDP is not installed (Debian: coinor-csdp)")
@pytest.mark.parametrize("name,form", [("P1", "sdp"), ("P4", "sdp"), ("P1", "sqlp")])
def test_real_csdp_reads_the_file_and_its_answer_imports(name, form, tmp_path):
    """Where CSDP is installed: it solves the exported file, and its solution file is an
    optimal row agreeing with sdp:clarabel (equality pairs: P4; an arrow block: the SQLP)."""
    problem = INSTANCES[name]
    dat = ex.export(problem, form, tmp_path / f"{name}.dat-s")
    run = subprocess.run(["csdp", str(dat), str(tmp_path / f"{name}.sol")], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stdout[-500:]
    res = ex.ExternalSolution(tmp_path / f"{name}.sol", method=form, label="csdp").run(problem)
    ref = kf.solve(problem, "sdp:clarabel").objective
    assert res.status is Status.OPTIMAL, res.message
    assert abs(res.objective - ref) / abs(ref) < 1e-6


def test_cbf_with_exponential_cones_imports(tmp_path):
    """P7 (Burg: log det, exponential cones) goes through CBF; the values of x come back as a
    row agreeing with sdp:clarabel (the EXP rows' reordering and the PSD scaling undone)."""
    problem = INSTANCES["P7_burg"]
    program = ex.read_program(ex.export(problem, "sdp", tmp_path / "p7.cbf"))
    _solve(program)
    np.savetxt(tmp_path / "p7.x", program.variables()[0].value)
    res = ex.ExternalSolution(tmp_path / "p7.x", method="sdp", label="mosek").run(problem)
    ref = kf.solve(problem, "sdp:clarabel").objective
    assert res.method == "sdp:mosek" and res.status is Status.OPTIMAL_INACCURATE
    assert abs(res.objective - ref) / abs(ref) < 1e-7 and res.violation < 1e-7
