"""The exceptions and warnings kernelforms raises.

One small hierarchy, so that callers can catch everything of ours with
``except KernelformsError`` and nothing else leaks out as a bare NumPy or
CVXPY traceback.  Third-party errors are re-raised as ours with
``raise ... from exc``.
"""

from __future__ import annotations


class KernelformsError(Exception):
    """Base class of every error raised by kernelforms."""


class ProblemError(KernelformsError, ValueError):
    """Invalid problem data or parameters (raised before any work starts)."""


class DataError(KernelformsError, ValueError):
    """A data set name is unknown, or a data file is missing or corrupt."""


class NotApplicable(KernelformsError):
    """A method cannot be applied to a problem; the message says why."""


class NoTraceBound(NotApplicable):
    """The certificate has no bound at this instance: its minorant's lambda_min is negative
    and nothing bounds the optimum's trace (the problem may be unbounded)."""


class SolverNotFound(KernelformsError):
    """An unknown method name, or a conic solver that is not installed."""


class SolverError(KernelformsError):
    """A solver failed in a way that is not a status (bad option, crash)."""


class OptionError(SolverError, ProblemError):
    """A method option or run argument has a bad value (``rank`` outside ``[1, n]``,
    ``seed``, ``time_limit``, ``max_memory``).

    It is both a :class:`SolverError` (a bad option of a method) and a
    :class:`ProblemError` (a bad parameter, in the standard message shape), so either
    ``except`` clause catches it.
    """


class NumericalTrouble(SolverError):
    """Numerical trouble inside a hand-written solver (NaN in an iterate, a non-positive
    pivot, a step that would leave the PSD cone), with the iteration it happened at.

    Raised by the helpers of :mod:`kernelforms.solvers.base` (``check_finite``,
    ``check_pivots``, ``check_psd``, ``cholesky``) from inside a solver;
    :meth:`IterativeSolver.run` catches it and returns a Result with status
    ``numerical_error``, ``iterations = iteration`` and the message, so that it never
    escapes ``solve`` or ``compare``.

    Attributes
    ----------
    iteration : int or None
        The iteration at which the trouble was detected.
    factor : ndarray or None
        The last good factor, when the solver passed one (it is evaluated and reported).
    history : dict or None
        The per-iteration history so far, when the solver passed one.
    """

    def __init__(self, message: str, iteration: int | None = None, *, factor=None,
                 history: dict | None = None) -> None:
        super().__init__(message)
        self.iteration = iteration
        self.factor = factor
        self.history = history


class ConvergenceWarning(UserWarning):
    """A solver stopped before meeting its convergence criterion."""


class ProblemWarning(UserWarning):
    """The problem is valid but suspicious (e.g. visibly infeasible constraints)."""


def param_error(owner: str, name: str, expected: str, got: object) -> ProblemError:
    """Build the one message shape used for bad parameters.

    Follows scikit-learn: "The 'gamma' parameter of PCP must be a float > 0.
    Got -1 instead."
    """
    return ProblemError(
        f"The {name!r} parameter of {owner} must be {expected}. Got {got!r} instead."
    )
