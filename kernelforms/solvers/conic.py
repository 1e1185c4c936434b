"""Dispatch of compiled conic programs to CVXPY's solvers.

One table maps CVXPY's statuses onto ours (as CVXPY's own solver interfaces map raw
statuses through a ``STATUS_MAP``).  Any installed conic solver CVXPY knows can be
named (``"sdp:clarabel"``, ``"sqlp:scs"``, ``"sdp:mosek"``); plain ``"sdp"`` picks
Clarabel for small programs and SCS above :data:`AUTO_SCS_ABOVE`.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from ..errors import ConvergenceWarning, NotApplicable, SolverError, SolverNotFound
from ..result import Result, Status
from .base import Method, evaluate_into

#: above this total PSD-block dimension the automatic choice is SCS (first order):
#: an interior-point step on an n x n block costs O(n^6) flops for the full SDP.
AUTO_SCS_ABOVE = 60

#: default options, chosen so that the two solvers agree to ~1e-6 relative on P1
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "CLARABEL": {},
    "SCS": {"eps_abs": 1e-8, "eps_rel": 1e-8, "max_iters": 200_000},
}

#: how each solver spells a wall-clock limit
TIME_LIMIT_OPTION = {"CLARABEL": "time_limit", "SCS": "time_limit_secs", "MOSEK": None}


def _status_map() -> dict[str, Status]:
    import cvxpy as cp

    return {
        cp.OPTIMAL: Status.OPTIMAL,
        cp.OPTIMAL_INACCURATE: Status.OPTIMAL_INACCURATE,
        cp.INFEASIBLE: Status.INFEASIBLE,
        cp.INFEASIBLE_INACCURATE: Status.INFEASIBLE,
        cp.UNBOUNDED: Status.UNBOUNDED,
        cp.UNBOUNDED_INACCURATE: Status.UNBOUNDED,
        cp.USER_LIMIT: Status.MAX_ITER,
        cp.SOLVER_ERROR: Status.NUMERICAL_ERROR,
    }


def installed_conic_solvers() -> list[str]:
    """Installed CVXPY solvers that handle semidefinite cones, upper case."""
    import cvxpy as cp

    sdp_capable = {"CLARABEL", "SCS", "MOSEK", "CVXOPT", "SDPA", "COPT", "SCIP"}
    return [s for s in cp.installed_solvers() if s in sdp_capable]


def resolve_solver(name: str | None, psd_dim: int) -> str:
    """Upper-case CVXPY solver name; ``None`` means the automatic choice."""
    installed = installed_conic_solvers()
    if name is None:
        choice = "CLARABEL" if psd_dim <= AUTO_SCS_ABOVE else "SCS"
        if choice not in installed:
            choice = installed[0] if installed else choice
        return choice
    up = name.upper()
    if up not in installed:
        import cvxpy as cp

        known = "known to CVXPY but not installed" if up in cp.settings.SOLVERS else "not a CVXPY conic solver"
        raise SolverNotFound(
            f"conic solver {name!r} is {known}. Installed conic solvers: "
            f"{', '.join(s.lower() for s in installed)}."
        )
    return up


class ConicMethod(Method):
    """A formulation solved by one of CVXPY's conic solvers."""

    certifying = True

    def __init__(self, formulation: Any, solver: str | None = None) -> None:
        self.formulation = formulation
        self.requested_solver = solver
        self.name = formulation.name + (f":{solver.lower()}" if solver else "")
        self.formulation_name = formulation.title or type(formulation).__name__
        self.solver_name = solver.upper() if solver else "auto"
        if solver is not None:
            resolve_solver(solver, 0)  # fail early on a solver that is not installed

    def applies_to(self, problem: Any) -> str | None:
        return self.formulation.applies_to(problem)

    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None,
            **options: Any) -> Result:
        import cvxpy as cp

        self.check_applies(problem)
        compile_opts = {k[len("compile_"):]: v for k, v in options.items() if k.startswith("compile_")}
        solver_opts = {k: v for k, v in options.items() if not k.startswith("compile_")}
        t0 = time.perf_counter()
        compiled = self.formulation.compile(problem, **compile_opts)
        t1 = time.perf_counter()
        psd_dim = sum(compiled.size.psd_blocks)
        solver = resolve_solver(self.requested_solver, psd_dim)
        opts = {**DEFAULT_OPTIONS.get(solver, {}), **solver_opts}
        tl_key = TIME_LIMIT_OPTION.get(solver)
        if time_limit is not None and tl_key:
            opts.setdefault(tl_key, float(time_limit))
        res = Result(method=self.name, status=Status.ERROR, formulation=self.formulation_name,
                     solver=solver, compile_time=t1 - t0,
                     extras={"size": str(compiled.size), "size_detail": compiled.size.to_dict(),
                             "notes": list(compiled.notes)})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # CVXPY's own chatter; statuses carry the news
                compiled.program.solve(solver=solver, verbose=False, **opts)
        except cp.error.SolverError as exc:
            res.status = Status.NUMERICAL_ERROR
            res.message = f"{solver} failed: {exc}"
        except (TypeError, ValueError, KeyError) as exc:
            raise SolverError(f"{solver} rejected the options {sorted(solver_opts)}: {exc}") from exc
        t2 = time.perf_counter()
        res.solve_time = t2 - t1
        res.time = t2 - t0
        stats = compiled.program.solver_stats
        if stats is not None:
            res.iterations = stats.num_iters
            if stats.solve_time is not None:
                res.extras["solver_time"] = stats.solve_time
        if res.message == "":
            status = _status_map().get(compiled.program.status, Status.ERROR)
            if status is Status.MAX_ITER and time_limit is not None and res.solve_time >= 0.95 * time_limit:
                status = Status.TIMEOUT
            res.status = status
            res.message = f"{solver}: {compiled.program.status}"
            res.extras["solver_objective"] = compiled.program.value
        if res.status.has_solution:
            try:
                kernel = self.formulation.recover(compiled)
            except (TypeError, ValueError) as exc:  # variable has no value
                res.status = Status.NUMERICAL_ERROR
                res.message += f"; recovery failed: {exc}"
            else:
                res.extras.update(self.formulation.recovered_extras(compiled))
                evaluate_into(res, problem, kernel)
        if res.status in (Status.MAX_ITER, Status.TIMEOUT, Status.OPTIMAL_INACCURATE):
            warnings.warn(f"{self.name}: {res.message}", ConvergenceWarning, stacklevel=2)
        return res
