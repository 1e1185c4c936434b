"""verify catches planted bugs: each kind of bug below is planted in a copy of a formulation
at test time (the compiled program or the data it is built from, monkeypatched) and
``kf.verify`` must fail it, naming the check that found it.

The kinds: the relaxations that make the program's feasible set larger than the problem's
(a second-order cone relaxed, the Schur LMI's corner doubled, a PSD block dropped, an
auxiliary equality dropped), the dual's domain bugs (the hinge multipliers' box or the
squared hinge's sign dropped, the constraint rows' multiplier signs swapped), and the bugs
of coefficients, signs, rows, scalings, constants and bases.

``python tests/test_verify_mutations.py [OUT.md] [--before REV]`` runs every mutation against the
verify of git revision REV (default ``main``: ``git show main:kernelforms/verify/``) and
against this one, and prints (or writes) the table bug kind x formulation, caught before / after.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Callable

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import model as km

cp = pytest.importorskip("cvxpy")

import test_conformance as conf  # noqa: E402
import test_formulations as tf  # noqa: E402


def _ge_problem():
    """A declared problem with ">=" rows the dual applies to (K_ii >= 0.5)."""
    X, y, pairs = conf._pcp_data("iris", 12, 5)
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=4)
    return kf.DeclaredProblem(km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
        losses=[km.LossTerm(km.Entries(n, pairs.must), km.Squared(np.ones(pairs.n_must)), 1.0)],
        constraints=[km.Constraint(km.Diagonal(n), ">=", np.full(n, 0.5))]), name="ge")


def instance(name: str):
    if name == "ge":
        return _ge_problem()
    if name in tf.INSTANCES:
        return tf.INSTANCES[name]
    return conf.instance(name)


# ---------------------------------------------------------------------------- planting
def _rebuild(compiled, constraints=None, objective=None):
    """The compiled program with other constraints or another objective (same variables)."""
    prog = compiled.program
    compiled.program = cp.Problem(objective if objective is not None else prog.objective,
                                  list(constraints) if constraints is not None else prog.constraints)
    return compiled


def _after_compile(mp, cls, change: Callable[[Any, Any], Any]) -> None:
    """Patch ``cls.compile`` so that ``change(problem, compiled)`` edits every program it builds."""
    orig = cls.compile

    def compile(self, problem, **options):
        return change(problem, orig(self, problem, **options))

    mp.setattr(cls, "compile", compile)


def _sqlp():
    from kernelforms.formulations.sqlp import SQLP
    return SQLP


def _schur():
    from kernelforms.formulations.schur_sdp import SchurComplementSDP
    return SchurComplementSDP


def _dual():
    from kernelforms.formulations.dual_sdp import DualSDP
    return DualSDP


def _full():
    from kernelforms.formulations.full_sdp import FullSDP
    return FullSDP


def soc_relaxed(mp):
    from cvxpy.constraints import SOC

    def change(problem, c):
        u = c.inverse.u
        return _rebuild(c, [cp.SOC(2 * u[0], u[1:]) if isinstance(k, SOC) else k
                            for k in c.program.constraints])
    _after_compile(mp, _sqlp(), change)


def schur_corner(mp):
    import scipy.sparse as sp

    def change(problem, c):
        inv = c.inverse
        R, w, y, nu = inv.R, inv.w, inv.y, inv.nu
        k = R.shape[0]
        a = cp.reshape(R @ y - w, (k, 1), order="F")
        eye = sp.eye(k, format="csr") if sp.issparse(R) else np.eye(k)
        lmi = cp.bmat([[eye, a], [a.T, cp.reshape(2 * nu, (1, 1), order="F")]])
        cons = list(c.program.constraints)
        cons[1] = lmi >> 0
        return _rebuild(c, cons)
    _after_compile(mp, _schur(), change)


def _inequality_on(k, name: str, side: int) -> bool:
    """``k`` is an inequality whose side ``side`` (0: left, 1: right) is the variable ``name``."""
    from cvxpy.constraints import Inequality

    return (isinstance(k, Inequality) and isinstance(k.args[side], cp.Variable)
            and k.args[side].name() == name)


def hinge_box_dropped(mp):
    _after_compile(mp, _dual(), lambda p, c: _rebuild(
        c, [k for k in c.program.constraints if not _inequality_on(k, "Q", 0)]))  # Q <= w


def squared_hinge_sign_dropped(mp):
    _after_compile(mp, _dual(), lambda p, c: _rebuild(
        c, [k for k in c.program.constraints if not _inequality_on(k, "Q", 1)]))  # 0 <= Q


def row_signs_swapped(mp):
    from cvxpy.constraints import Inequality

    def change(problem, c):
        rows = {id(nu) for _, nu in c.inverse.rows}
        cons = [k.args[1] <= k.args[0]
                if isinstance(k, Inequality) and any(id(v) in rows for v in k.variables()) else k
                for k in c.program.constraints]
        return _rebuild(c, cons)
    _after_compile(mp, _dual(), change)


def psd_dropped(mp, cls_of=_sqlp):
    from cvxpy.constraints import PSD

    def change(problem, c):
        cons = list(c.program.constraints)
        first = next(i for i, k in enumerate(cons) if isinstance(k, PSD))
        return _rebuild(c, cons[:first] + cons[first + 1:])
    _after_compile(mp, cls_of(), change)


def aux_equality_dropped(mp):
    from cvxpy.constraints import Equality

    def change(problem, c):
        u = c.inverse.u
        return _rebuild(c, [k for k in c.program.constraints if not (
            isinstance(k, Equality) and k.size == 1 and [v.id for v in k.variables()] == [u.id])])
    _after_compile(mp, _sqlp(), change)


def _quadratic_form(mp, change):
    """Patch the quadratic form the SQLP and the Schur SDPs are built from."""
    from kernelforms.formulations import schur_sdp, sqlp

    orig = sqlp.quadratic_form
    for mod in (sqlp, schur_sdp):
        mp.setattr(mod, "quadratic_form", lambda problem: change(problem, orig))


def quadratic_weight(mp):
    _quadratic_form(mp, lambda problem, orig: dataclasses.replace(
        q := orig(problem), F=q.F * np.sqrt(1.1), h=q.h * np.sqrt(1.1)))
    full = _full()
    terms = full._terms

    def heavier(self, decl, write, **kw):
        losses = tuple(dataclasses.replace(t, weight=1.1 * t.weight) for t in decl.losses)
        return terms(self, dataclasses.replace(decl, losses=losses), write, **kw)
    mp.setattr(full, "_terms", heavier)


def linear_sign(mp):
    full = _full()
    orig = full._terms

    def terms(self, decl, write, **kw):
        flipped = tuple(dataclasses.replace(t, coef=-t.coef) for t in decl.linear)
        return orig(self, dataclasses.replace(decl, linear=flipped), write, **kw)
    mp.setattr(full, "_terms", terms)


def _constraints(mp, change):
    full = _full()
    orig = full._constraints

    def mutated(decl, write, dense):
        return orig(dataclasses.replace(decl, constraints=change(decl.constraints)), write, dense)
    mp.setattr(full, "_constraints", staticmethod(mutated))


def equality_row_dropped(mp):
    _constraints(mp, lambda cs: tuple(c for c in cs if not c.is_equality)
                 + tuple(c for c in cs if c.is_equality)[1:])


def wrong_bound(mp):
    _constraints(mp, lambda cs: cs[:-1] + (km.Constraint(cs[-1].map, cs[-1].sense, cs[-1].bound * 1.01),))


def flipped_sense(mp):
    _constraints(mp, lambda cs: tuple(km.Constraint(c.map, np.where(c.sense == km.LE, km.GE, np.where(
        c.sense == km.GE, km.LE, c.sense)), c.bound) for c in cs))


def svec_scaling(mp):
    from kernelforms.formulations import sqlp

    orig = sqlp._pair_rows

    def rows(m):
        R = orig(m).tocoo()
        diag = sqlp.svec_index(np.arange(m.n), np.arange(m.n), m.n)
        R.data = np.where(np.isin(R.col, diag), R.data, R.data * np.sqrt(2.0))  # K_ij read as sqrt2 K_ij
        return R.tocsr()
    mp.setattr(sqlp, "_pair_rows", rows)


def conjugate_constant(mp):
    def change(problem, c):
        extra = [cp.sum_squares(var) / (4 * w) for m, loss, w, var, _ in c.inverse.terms
                 if isinstance(loss, km.Squared)]
        return _rebuild(c, objective=cp.Maximize(c.program.objective.expr - sum(extra)))  # ||lam||^2 / (2w)
    _after_compile(mp, _dual(), change)


def dual_weight(mp):
    dual = _dual()
    orig = dual._loss_terms

    def doubled(can):
        return [(m, loss, 2 * w) for m, loss, w in orig(can)]
    mp.setattr(dual, "_loss_terms", staticmethod(doubled))


def dropped_constant(mp):
    from kernelforms.formulations import schur_sdp

    orig = schur_sdp.factor_quadratic
    mp.setattr(schur_sdp, "factor_quadratic",
               lambda q, rtol=1e-12: dataclasses.replace(orig(q, rtol), const=0.0))


def _reversed(problem):
    decl = problem.declaration
    return types.SimpleNamespace(declaration=dataclasses.replace(
        decl, form=km.Basis(decl.form.B[:, ::-1])))


def reversed_basis_sdp(mp):
    full = _full()
    orig = full.compile

    def compile(self, problem, **options):
        c = orig(self, _reversed(problem), **options)
        c.inverse.B, c.inverse.decl = problem.declaration.form.B, problem.declaration
        return c
    mp.setattr(full, "compile", compile)


def reversed_basis_qsdp(mp):
    _quadratic_form(mp, lambda problem, orig: dataclasses.replace(
        orig(_reversed(problem)), basis=problem.declaration.form.B))


@dataclasses.dataclass(frozen=True)
class Mutation:
    kind: str
    plant: Callable[[Any], None]
    cases: tuple  # (formulation, instance name, the check that must fail)
    new: bool = False  # one of the kinds the verify of before passed


MUTATIONS = {
    "soc_relaxed": Mutation("SQLP cone relaxed: 2 u_1 >= norm(u_{2:})", soc_relaxed,
                            (("sqlp", "P1", "auxiliaries"), ("sqlp", "P3", "auxiliaries")), True),
    "schur_corner": Mutation("Schur LMI corner: [[I, a], [a^T, 2 nu]]", schur_corner,
                             (("scsdp", "P1", "auxiliaries"), ("scsdp", "P6_square", "auxiliaries"),
                              ("scsdp_factor", "P3", "auxiliaries")), True),
    "hinge_box": Mutation("dual hinge box dropped (Q <= w)", hinge_box_dropped,
                          (("dual", "P6_hinge", "multiplier domain"), ("dual", "u2", "multiplier domain")),
                          True),
    "row_signs": Mutation("dual row multiplier signs swapped", row_signs_swapped,
                          (("dual", "p6_linear", "multiplier domain"), ("dual", "u1", "multiplier domain"),
                           ("dual", "ge", "multiplier domain")), True),
    "squared_hinge_sign": Mutation("dual squared-hinge sign dropped (Q >= 0)", squared_hinge_sign_dropped,
                                   (("dual", "P6_squared_hinge", "multiplier domain"),), True),
    "psd_dropped": Mutation("PSD block dropped (smat(y) PSD)", lambda mp: psd_dropped(mp),
                            (("sqlp", "P3", "kernel domain"),), True),
    "psd_dropped_schur": Mutation("PSD block dropped (smat(y) PSD)", lambda mp: psd_dropped(mp, _schur),
                                  (("scsdp", "P1", "kernel domain"), ("scsdp_factor", "P3", "kernel domain")),
                                  True),
    "aux_equality": Mutation("auxiliary equality dropped (u_1 + u_2 = 1)", aux_equality_dropped,
                             (("sqlp", "P1", "auxiliaries"),), True),
    "weight": Mutation("loss weight x 1.1", quadratic_weight,
                       (("sqlp", "P3", "objective"), ("scsdp", "P3", "objective"),
                        ("scsdp_factor", "P1", "objective"), ("sdp", "P6_square", "objective"))),
    "linear_sign": Mutation("linear term's sign flipped", linear_sign, (("sdp", "P1", "objective"),)),
    "equality_dropped": Mutation("equality row dropped", equality_row_dropped,
                                 (("sdp", "P4", "constraint rows"),)),
    "wrong_bound": Mutation("constraint bound x 1.01", wrong_bound, (("sdp", "P4", "constraint rows"),)),
    "flipped_sense": Mutation("constraint sense flipped (<= / >=)", flipped_sense,
                              (("sdp", "P7_burg", "constraint rows"),)),
    "svec": Mutation("svec scaling (off-diagonal sqrt 2)", svec_scaling,
                     (("sqlp", "P1", "objective"), ("scsdp", "P6_square", "objective"))),
    "constant": Mutation("factorisation constant dropped", dropped_constant,
                         (("scsdp_factor", "P3", "objective"),)),
    "conjugate": Mutation("dual conjugate constant norm(lam)^2 / (2w)", conjugate_constant,
                          (("dual", "P1", "lagrangian"),)),
    "dual_weight": Mutation("dual loss weight x 2", dual_weight, (("dual", "P6_hinge", "lagrangian"),)),
    "basis_sdp": Mutation("reversed basis", reversed_basis_sdp, (("sdp", "P3", "objective"),)),
    "basis_qsdp": Mutation("reversed basis", reversed_basis_qsdp,
                           (("sqlp", "P3", "objective"), ("scsdp_factor", "P5", "objective"))),
}


def _cases():
    for key, mut in MUTATIONS.items():
        for form, name, check in mut.cases:
            yield pytest.param(key, form, name, check, id=f"{key}-{form}-{name}")


@pytest.mark.parametrize("key,form,name,check", list(_cases()))
def test_verify_fails_a_planted_bug(monkeypatch, key, form, name, check):
    p = instance(name)
    assert kf.verify(p, form).passed  # the formulation as written passes
    MUTATIONS[key].plant(monkeypatch)
    res = kf.verify(p, form)
    failed = {c.name for c in res.checks if not c.passed}
    assert not res.passed and check in failed, str(res)


def test_the_ge_instance_verifies_and_its_dual_has_ge_rows():
    p = _ge_problem()
    res = kf.verify(p, "dual")
    assert res.passed, str(res)
    assert "refuses all" in res.check("multiplier domain").detail


def test_a_badly_scaled_correct_program_is_no_relaxation_and_a_relaxed_one_still_is(monkeypatch):
    # RegMVU with nu = 1e9: the objective is ~1e15 at random points, where the rotated cone of
    # the SQLP and the Schur LMI resolve a 0.3 % move of the epigraph only to round-off
    X = kf.datasets.load("swiss_roll", n_points=18, seed=0)[0]
    p = kf.RegMVU.from_data(X, m_basis=5, nu=1e9)
    for form in ("sqlp", "scsdp_factor"):
        res = kf.verify(p, form)
        assert res.passed, str(res)
        assert "only because the cone is flat" in res.check("auxiliaries").detail
    soc_relaxed(monkeypatch)
    assert not kf.verify(p, "sqlp").check("auxiliaries").passed


def test_deep_solves_check_the_converse_at_program_optima(monkeypatch):
    p = instance("P1")
    res = kf.verify(p, "sqlp", deep=True)
    assert res.passed, str(res)
    assert "3 solves" in res.check("extreme points").detail
    soc_relaxed(monkeypatch)
    res = kf.verify(p, "sqlp", deep=True)
    c = res.check("extreme points")
    # the relaxed program's optimum 0.136 recovers a kernel whose objective is 1.038
    assert not c.passed and c.discrepancy > 0.5 and "recovered kernel" in c.detail, str(res)


def test_deep_dual_compares_its_optimum_with_the_full_sdp(monkeypatch):
    p = instance("P6_hinge")
    res = kf.verify(p, "dual", deep=True)
    assert res.passed and res.check("strong duality").discrepancy < 1e-6, str(res)
    hinge_box_dropped(monkeypatch)
    c = kf.verify(p, "dual", deep=True).check("strong duality")
    assert not c.passed and c.discrepancy > 0.1  # 4.344 against 3.794


# ---------------------------------------------------------------------------- before / after
def _main_verify(rev: str = "main"):
    """The verify of git revision ``rev`` (the ``main`` branch by default), loaded as a module
    of the installed package: ``kernelforms/verify.py``, or the package ``kernelforms/verify/``
    (its files written to a temporary directory)."""
    import importlib.util
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    name = "kernelforms._verify_main"
    git = lambda *a: subprocess.run(["git", *a], cwd=root, check=True,  # noqa: E731
                                    capture_output=True, text=True).stdout
    files = git("ls-tree", "--name-only", f"{rev}:kernelforms/verify/") if subprocess.run(
        ["git", "cat-file", "-e", f"{rev}:kernelforms/verify/__init__.py"], cwd=root,
        capture_output=True).returncode == 0 else ""
    if not files:
        src = git("show", f"{rev}:kernelforms/verify.py")
        spec = importlib.util.spec_from_loader(name, loader=None)
        mod = importlib.util.module_from_spec(spec)
        mod.__package__ = "kernelforms"
        sys.modules[spec.name] = mod
        exec(compile(src, f"{rev}:kernelforms/verify.py", "exec"), mod.__dict__)
        return mod.verify
    where = Path(tempfile.mkdtemp(prefix="verify-main-"))
    for f in files.split():
        if f.endswith(".py"):
            (where / f).write_text(git("show", f"{rev}:kernelforms/verify/{f}"))
    spec = importlib.util.spec_from_file_location(name, where / "__init__.py",
                                                  submodule_search_locations=[str(where)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.verify


def _optimum(p, form) -> str:
    """The compiled program's optimum (Clarabel), or its status when it has none."""
    from kernelforms.explain import compile_for

    _, c = compile_for(p, form, "verify")
    try:
        c.program.solve(solver="CLARABEL")
    except cp.error.SolverError:
        return "solver failed"
    return f"{c.program.value:.6g}" if c.program.status == cp.OPTIMAL else c.program.status


def table(before: str = "main") -> str:
    import time

    old = _main_verify(before)
    lines = ["| bug kind | formulation | instance | optimum as written / planted | main's verify | "
             "this verify (failed checks) | this verify, deep=True | seconds (main / this / deep) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    counts = {"before": 0, "after": 0, "deep": 0, "all": 0}
    summary: dict = {}  # kind -> formulation -> [caught before, caught after, cases]

    def verdict(r):
        failed = ", ".join(c.name for c in r.checks if not c.passed)
        return f"caught ({failed})" if failed else "PASSED"

    for key, mut in MUTATIONS.items():
        for form, name, _ in mut.cases:
            p = instance(name)
            written = _optimum(p, form)
            with pytest.MonkeyPatch.context() as mp:
                mut.plant(mp)
                planted = _optimum(p, form)
                t = time.perf_counter()
                r0 = old(p, form)
                t0 = time.perf_counter() - t
                t = time.perf_counter()
                r1 = kf.verify(p, form)
                t1 = time.perf_counter() - t
                t = time.perf_counter()
                r2 = kf.verify(p, form, deep=True)
                t2 = time.perf_counter() - t
            cell = summary.setdefault(mut.kind, {}).setdefault(form, [0, 0, 0])
            cell[0] += not r0.passed
            cell[1] += not r1.passed
            cell[2] += 1
            counts["all"] += 1
            counts["before"] += not r0.passed
            counts["after"] += not r1.passed
            counts["deep"] += not r2.passed
            lines.append(f"| {mut.kind} | {form} | {name} | {written} / {planted} | {verdict(r0)} | "
                         f"{verdict(r1)} | {verdict(r2)} | {t0:.2f} / {t1:.2f} / {t2:.2f} |")
    lines.append("")
    lines.append(f"caught: main's verify {counts['before']} of {counts['all']}, this verify "
                 f"{counts['after']} of {counts['all']} (deep=True: {counts['deep']})")
    forms = [f for f in ("sdp", "scsdp", "scsdp_factor", "sqlp", "dual")
             if any(f in row for row in summary.values())]
    grid = ["| bug kind (cases caught: main's verify -> this one) | " + " | ".join(forms) + " |",
            "| --- | " + " | ".join("---" for _ in forms) + " |"]
    for kind, row in summary.items():
        grid.append(f"| {kind} | " + " | ".join(
            f"{row[f][0]}/{row[f][2]} -> {row[f][1]}/{row[f][2]}" if f in row else "" for f in forms) + " |")
    return "\n".join(grid + [""] + lines)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="planted bugs: the verify of REV against this one")
    ap.add_argument("out", nargs="?", help="write the Markdown table here too")
    ap.add_argument("--before", default="main", metavar="REV",
                    help="git revision whose kernelforms/verify.py is 'before' (default main)")
    args = ap.parse_args()
    text = table(args.before)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    print(text)
