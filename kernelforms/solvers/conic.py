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
from .base import Method, check_run_args, evaluate_into, validate_conic_options

#: above this total PSD-block dimension the automatic choice is SCS (first order):
#: an interior-point step on an n x n block costs O(n^6) flops for the full SDP.
AUTO_SCS_ABOVE = 60

#: default options, chosen so that the two solvers agree to ~1e-6 relative on P1
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "CLARABEL": {},
    "SCS": {"eps_abs": 1e-8, "eps_rel": 1e-8, "max_iters": 200_000},
}

#: default size guard: a conic program whose estimated interior-point memory exceeds this
#: many bytes is refused before it is built (raise it with ``max_memory=``)
DEFAULT_MAX_MEMORY = 4 * 2**30

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

    def check_size(self, problem: Any, max_memory: float) -> None:
        """Raise :class:`NotApplicable` when the program would need more than ``max_memory`` bytes.

        The message says what would be built, how large it is, and which formulations
        (and hand-written solvers) fit instead.
        """
        est = self.formulation.estimate_memory(problem)
        if est is None or est <= max_memory:
            return
        est = self.formulation.precise_memory(problem)
        if est is None or est <= max_memory:
            return
        from ..formulations.sqlp import pretty_bytes
        from ..methods import FORMULATIONS, SOLVERS, get_method

        describe = getattr(self.formulation, "describe", None)
        what = describe(problem) if describe else f"the {self.formulation_name} program"
        fits = []
        for name in FORMULATIONS:
            if name == self.formulation.name:
                continue
            try:
                other = get_method(name).formulation
                if other.applies_to(problem) is None:
                    e = other.estimate_memory(problem)
                    if e is None or e <= max_memory:
                        fits.append(f"'{name}' (~{pretty_bytes(e)})" if e else f"'{name}'")
            except Exception:  # noqa: BLE001 - a broken sibling must not hide this message
                continue
        for name in SOLVERS:
            try:
                if get_method(name).applies_to(problem) is None:
                    fits.append(f"'{name}' (hand-written)")
            except Exception:  # noqa: BLE001
                continue
        instead = ("; fits instead: " + ", ".join(fits)) if fits else "; no other conic formulation fits"
        raise NotApplicable(
            f"method {self.name!r} would build {what}, needing about {pretty_bytes(est)} for the "
            f"interior-point KKT system, above max_memory = {pretty_bytes(max_memory)} "
            f"(raise it with max_memory=<bytes>){instead}."
        )

    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None,
            **options: Any) -> Result:
        import cvxpy as cp

        self.check_applies(problem)
        max_memory = options.pop("max_memory", DEFAULT_MAX_MEMORY)
        if isinstance(max_memory, bool) or not isinstance(max_memory, (int, float)) or max_memory <= 0:
            raise SolverError(f"The 'max_memory' option of {self.name!r} must be a number of bytes > 0. "
                              f"Got {max_memory!r} instead.")
        self.check_size(problem, float(max_memory))
        compile_opts = {k[len("compile_"):]: v for k, v in options.items() if k.startswith("compile_")}
        solver_opts = {k: v for k, v in options.items() if not k.startswith("compile_")}
        # bad arguments fail here, before CVXPY builds anything
        check_run_args(self.name, seed, time_limit)
        validate_conic_options(self.requested_solver, solver_opts, method=self.name)
        t0 = time.perf_counter()
        compiled = self.formulation.compile(problem, **compile_opts)
        t1 = time.perf_counter()
        psd_dim = sum(compiled.size.psd_blocks)
        solver = resolve_solver(self.requested_solver, psd_dim)
        validate_conic_options(solver, solver_opts, method=self.name)
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
            primal_status = getattr(self.formulation, "primal_status", None)
            if primal_status is not None:  # a dual program's verdict, read for the primal
                status = primal_status(status)
            if status is Status.MAX_ITER and time_limit is not None and res.solve_time >= 0.95 * time_limit:
                status = Status.TIMEOUT
            res.status = status
            res.message = f"{solver}: {compiled.program.status}"
            res.extras["solver_status"] = compiled.program.status
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
