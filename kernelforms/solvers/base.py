"""The method contract shared by conic and hand-written solvers.

Every method has a ``name``, says whether it ``applies_to`` a problem (``None`` or a
reason) and ``run``s it into a :class:`~kernelforms.result.Result` whose objective is
the problem's own evaluation.  Hand-written solvers subclass :class:`IterativeSolver`
and implement one method, :meth:`IterativeSolver._solve`; option checking, timing,
evaluation and warnings live here (as pymanopt's optimizer base does).
"""

from __future__ import annotations

import difflib
import math
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import ConvergenceWarning, NotApplicable, SolverError
from ..result import LowRank, Result, Status


class Method(ABC):
    """A runnable method: a formulation with a conic solver, or a hand-written solver."""

    name: str = ""
    formulation_name: str = ""
    solver_name: str = ""
    #: True when an "optimal" status is a certificate of optimality (conic solvers)
    certifying: bool = False

    @abstractmethod
    def applies_to(self, problem: Any) -> str | None:
        """``None`` when the method applies, else the reason it does not."""

    @abstractmethod
    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None,
            **options: Any) -> Result:
        """Solve ``problem``; raise :class:`NotApplicable` if it does not apply."""

    def check_applies(self, problem: Any) -> None:
        reason = self.applies_to(problem)
        if reason is not None:
            raise NotApplicable(f"method {self.name!r} does not apply to {type(problem).__name__}: {reason}")

    def __repr__(self) -> str:
        return f"<method {self.name!r}>"


def evaluate_into(result: Result, problem: Any, kernel: LowRank | None) -> Result:
    """Fill the yardstick fields of ``result`` from the problem's own evaluation."""
    if kernel is None:
        return result
    result.factor = kernel.G
    if not np.all(np.isfinite(kernel.G)):
        result.status = Status.NUMERICAL_ERROR
        result.message = (result.message + "; " if result.message else "") + "the kernel has NaN/inf entries"
        return result
    ev = problem.evaluate(kernel)
    result.objective, result.violation = ev.objective, ev.violation
    result.min_eig, result.rank = ev.min_eig, ev.rank
    return result


@dataclass
class SolverOutput:
    """What :meth:`IterativeSolver._solve` returns."""

    factor: np.ndarray | None
    status: Status
    iterations: int = 0
    history: dict[str, list] = field(default_factory=dict)
    message: str = ""
    extras: dict[str, Any] = field(default_factory=dict)


class IterativeSolver(Method):
    """Base of the hand-written solvers (ADMM, BCD, Bregman projections, ...).

    Subclasses set ``name``, ``formulation_name`` (e.g. ``"factored V^T V"``),
    ``defaults`` (every accepted option with its default) and implement
    :meth:`applies_to` and :meth:`_solve`.
    """

    solver_name = "kernelforms"
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, spec: str | None = None) -> None:
        if spec is not None and ":" in spec:
            raise SolverError(
                f"method {self.name!r} is a hand-written solver and takes no conic solver "
                f"suffix (got {spec!r})"
            )

    def resolve_options(self, options: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            hints = []
            for u in unknown:
                close = difflib.get_close_matches(u, list(self.defaults), n=1)
                hints.append(f"{u!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise SolverError(
                f"unknown option(s) for method {self.name!r}: {', '.join(hints)}. "
                f"Valid options: {', '.join(sorted(self.defaults)) or 'none'}."
            )
        return {**self.defaults, **options}

    @abstractmethod
    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        """Run the algorithm; ``deadline`` is a ``time.perf_counter()`` value or None."""

    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None,
            **options: Any) -> Result:
        self.check_applies(problem)
        opts = self.resolve_options(options)
        rng = np.random.default_rng(seed)
        t0 = time.perf_counter()
        deadline = None if time_limit is None else t0 + float(time_limit)
        out = self._solve(problem, opts, rng, deadline)
        elapsed = time.perf_counter() - t0
        res = Result(method=self.name, status=out.status, formulation=self.formulation_name,
                     solver=self.solver_name, time=elapsed, solve_time=elapsed,
                     iterations=out.iterations, history=out.history, message=out.message,
                     extras=dict(out.extras))
        evaluate_into(res, problem, None if out.factor is None else LowRank(out.factor))
        if res.status in (Status.MAX_ITER, Status.TIMEOUT):
            warnings.warn(f"{self.name}: stopped before converging ({res.status.value}"
                          f" after {res.iterations} iterations)", ConvergenceWarning, stacklevel=2)
        return res


def finite_or_nan(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v
