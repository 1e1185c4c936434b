"""A program read from a file whose solver's word is checked, not believed.

:func:`kernelforms.exchange.read_program` returns a :class:`CheckedProblem`: a
``cvxpy.Problem`` whose ``solve`` computes, from the solver's primal and dual values, the
primal residual, the dual residual and cone membership (the eigenvalues of the dual
matrices of the PSD blocks) and the duality gap, and lowers the status when they do not
confirm it: ``optimal`` becomes ``optimal_inaccurate`` (an ``infeasible`` whose
multipliers are not a Farkas certificate becomes ``infeasible_inaccurate``, and an
``infeasible_inaccurate`` whose multipliers are one becomes ``infeasible``).  What was
measured is in ``problem.check`` (a :class:`~kernelforms.exchange.sdpa.Verdict`: status,
message with the numbers, checks).
"""

from __future__ import annotations

from typing import Any, Callable

import cvxpy as cp

#: the CVXPY status a checked verdict leaves, given the solver's status
_LOWER = {"optimal": "optimal_inaccurate", "infeasible": "infeasible_inaccurate",
          "unbounded": "unbounded_inaccurate"}


class CheckedProblem(cp.Problem):
    """A ``cvxpy.Problem`` whose ``solve`` checks the solver's status (module docstring)."""

    def __init__(self, objective: Any, constraints: Any = None,
                 checker: Callable[["CheckedProblem"], Any] | None = None) -> None:
        super().__init__(objective, constraints)
        self._checker = checker
        self.check: Any = None

    def solve(self, *args: Any, **kwargs: Any) -> Any:
        value = super().solve(*args, **kwargs)
        self.check = None
        if self._checker is not None:
            said = str(self.status)
            verdict = self._checker(self)
            self.check = verdict
            if verdict is not None and verdict.status == "infeasible" and said.startswith("infeasible"):
                self._status = "infeasible"  # a Farkas certificate, checked here
            elif verdict is not None and verdict.status not in ("optimal", "infeasible") and said in _LOWER:
                self._status = _LOWER[said]
        return value


def sdpa_checker(prog: Any, handles: dict[str, Any]) -> Callable[[CheckedProblem], Any]:
    """The check of a solve of an SDPA program (:func:`~kernelforms.exchange.sdpa.judge` on
    the solver's ``x`` and multipliers)."""
    from .sdpa import CVXPY_STATUS, Verdict, judge, solution_from_cvxpy

    def check(problem: CheckedProblem) -> Any:
        status = str(problem.status)
        if status.startswith("unbounded"):
            return Verdict("numerical_error", f"the solver said {status}; CVXPY returns no ray, "
                           "so it is not checked")
        if status not in CVXPY_STATUS or (handles["x"].value is None and not status.startswith("infeasible")):
            return None
        sol = solution_from_cvxpy(prog, handles)
        return judge(prog, sol, CVXPY_STATUS[status], source=problem.solver_stats.solver_name
                     if problem.solver_stats is not None else "the solver")

    return check


def cbf_checker(prog: Any, parts: list) -> Callable[[CheckedProblem], Any]:
    """The check of a solve of a CBF program: an ``optimal`` is kept only when
    :func:`~kernelforms.exchange.cbf.check_cbf` confirms it within ``OPTIMAL_TOL``; other
    statuses are left as the solver said (not checked)."""
    from .cbf import check_cbf
    from .sdpa import OPTIMAL_TOL, Verdict

    def check(problem: CheckedProblem) -> Any:
        status = str(problem.status)
        if status != "optimal":
            return None
        checks = check_cbf(prog, problem, parts)
        who = problem.solver_stats.solver_name if problem.solver_stats is not None else "the solver"
        if checks is None:
            return Verdict("optimal_inaccurate", f"{who} said optimal but gave no multipliers to check")
        nums = (f"primal infeas {checks['primal_infeas']:.1e}, dual infeas {checks['dual_infeas']:.1e}, "
                f"gap {checks['gap']:.1e}")
        if max(checks["primal_infeas"], checks["dual_infeas"], checks["gap"]) <= OPTIMAL_TOL:
            return Verdict("optimal", f"{who} said optimal; checked: {nums}", checks)
        return Verdict("optimal_inaccurate", f"{who} said optimal, but the check measured {nums}, above "
                       f"the tolerance {OPTIMAL_TOL:g} for 'optimal'", checks)

    return check
