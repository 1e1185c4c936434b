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
from typing import Any, ClassVar

import numpy as np

from ..errors import (
    KernelformsError,
    ConvergenceWarning,
    NoTraceBound,
    NotApplicable,
    NumericalTrouble,
    OptionError,
    SolverError,
)
from ..result import LowRank, Result, Solution, Status
from ..util import format_bytes  # noqa: F401 - the one byte formatter (solvers import it from here)

#: default memory limit (bytes) of a hand-written solver's working set, the same as the
#: conic size guard; pass ``max_memory=`` to ``solve``/``run`` to change it
DEFAULT_MAX_MEMORY = 4 * 2**30
#: n x r float arrays a hand-written solver is assumed to hold at once (iterates, duals,
#: gradients, products L @ G, temporaries) when it does not override ``estimate_memory``
WORKING_ARRAYS = 12


class Method(ABC):
    """A runnable method: a formulation with a conic solver, or a hand-written solver."""

    name: str = ""
    formulation_name: str = ""
    solver_name: str = ""
    #: True when an "optimal" status is a certificate of optimality (conic solvers)
    certifying: bool = False
    #: what the method accepts, as data (forms, senses, divergence: a
    #: :class:`kernelforms.model.Capabilities`), None when it decides in ``applies_to`` alone;
    #: its mismatch is the first reason ``applies_to`` gives
    capabilities: Any = None

    @abstractmethod
    def applies_to(self, problem: Any) -> str | None:
        """``None`` when the method applies, else the reason it does not."""

    @abstractmethod
    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None,
            **options: Any) -> Result:
        """Solve ``problem``; raise :class:`NotApplicable` if it does not apply."""

    def check_applies(self, problem: Any, max_memory: Any = None) -> None:
        """Raise :class:`NotApplicable` with the reason; the problem's own arrays a method
        reads to decide (e.g. the linear cost) are built only within ``max_memory`` bytes."""
        from ..model.checks import limit_memory

        try:
            with limit_memory(max_memory):
                reason = self.applies_to(problem)
        except NotApplicable as exc:
            if str(exc).startswith("method "):
                raise
            out = NotApplicable(f"method {self.name!r} does not fit: {exc}")
            out.memory = getattr(exc, "memory", None)  # type: ignore[attr-defined]
            raise out from None
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


#: what :meth:`IterativeSolver._solve` returns: a :class:`~kernelforms.result.Solution`
#: (the name the solvers import)
SolverOutput = Solution


class IterativeSolver(Method):
    """Base of the hand-written solvers (ADMM, BCD, Bregman projections, ...).

    Subclasses set ``name``, ``formulation_name`` (e.g. ``"factored V^T V"``),
    ``defaults`` (every accepted option with its default) and implement
    :meth:`applies_to` and :meth:`_solve`.
    """

    solver_name = "kernelforms"
    defaults: ClassVar[dict[str, Any]] = {}
    #: option name -> accepted kinds (see :mod:`kernelforms.solvers.options`); every key
    #: of ``defaults`` has an entry, and :meth:`run` checks them all before any work
    parameter_constraints: ClassVar[dict[str, list]] = {}
    #: options every hand-written solver takes, handled by :meth:`run` itself
    common_options: ClassVar[tuple[str, ...]] = ("verbose", "max_memory")
    #: a factored solver whose ``rank=None`` means: start small and grow the rank while the
    #: certificate finds negative curvature (:mod:`kernelforms.solvers.rank`)
    grows_rank: ClassVar[bool] = False
    #: the relative gap to the optimum a ``converged`` status promises (the documented
    #: tolerance): :func:`kernelforms.isolation.certify_status` turns a converged row whose
    #: certified gap is larger into ``optimal_inaccurate``; a ``gap_tol`` option, when the
    #: solver has one, takes its place (:meth:`certified_rtol`)
    certify_rtol: ClassVar[float | None] = 1e-4
    _log = None

    def certified_rtol(self, opts: dict[str, Any]) -> float | None:
        """The relative gap a ``converged`` status of this run promises: the ``gap_tol``
        option when the solver stops on a certified gap, else :attr:`certify_rtol`."""
        g = opts.get("gap_tol")
        if isinstance(g, (int, float, np.number)) and not isinstance(g, (bool, np.bool_)) \
                and float(g) > 0:
            return float(g)
        return self.certify_rtol

    def refine(self, problem: Any, factor: np.ndarray, directions: np.ndarray,
               opts: dict[str, Any], max_cols: int, *, thorough: bool = False,
               ) -> tuple[np.ndarray | None, dict[str, Any]]:
        """A better factor than a solve's, given the certificate's escape directions (the most
        negative eigenvectors of its matrix), with at most ``max_cols`` columns; or
        ``(None, record)`` when the solver has no such step or it failed.  The rank growth of
        :mod:`kernelforms.solvers.rank` calls it instead of a step and a warm re-solve (admm:
        an exact Ritz step over the factor and the directions).  ``opts`` are the resolved
        options; ``thorough`` asks for a costlier step (the solve stopped at max_iter)."""
        return None, {"note": "no refinement step"}

    def refines(self, opts: dict[str, Any]) -> bool:
        """Whether :meth:`refine` applies with these (resolved) options."""
        return False

    def max_rank(self, problem: Any) -> int:
        """The largest rank the solver uses unasked: the problem's Pataki bound."""
        return int(problem.default_rank())

    def working_rank(self, problem: Any, opts: dict[str, Any]) -> int:
        """The rank a run starts at: the ``rank`` option, else the ``init`` array's columns, else
        :func:`~kernelforms.solvers.rank.start_rank` (a solver that grows its rank) or
        :meth:`max_rank`."""
        from .rank import start_rank

        r = opts.get("rank")
        if isinstance(r, (int, np.integer)) and not isinstance(r, (bool, np.bool_)):
            return int(r)
        init = opts.get("init")
        if init is not None and not isinstance(init, str) and np.ndim(init) == 2:
            return int(np.shape(init)[1])
        cap = self.max_rank(problem)
        return start_rank(cap) if self.grows_rank else int(cap)

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

    def validate(self, problem: Any, opts: dict[str, Any]) -> None:
        """Check every option against :attr:`parameter_constraints` (one message shape,
        :class:`~kernelforms.errors.OptionError`); called by :meth:`run` before any work."""
        from .options import validate_options

        validate_options(self.name, self.parameter_constraints, opts, n=int(problem.n))

    def iteration_log(self, opts: dict[str, Any], *, header: str = "", extra: tuple[str, ...] = (),
                      residual: str = "residual") -> "IterationLog":
        """The iteration table of this run (printed when ``opts["verbose"]``); :meth:`run`
        closes it with the final status.  Call ``log.row(it, objective=..., residual=...,
        rank=...)`` once per iteration."""
        from .iterlog import IterationLog

        log = IterationLog(self.name, bool(opts.get("verbose", False)), header=header,
                           extra=extra, residual=residual)
        self._log = log
        return log

    @abstractmethod
    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        """Run the algorithm; ``deadline`` is a ``time.perf_counter()`` value or None.

        ``opts`` holds every option of ``defaults`` (checked against
        :attr:`parameter_constraints`) plus ``opts["verbose"]`` (a bool).
        """

    # ------------------------------------------------------------------ memory guard
    def estimate_memory(self, problem: Any, opts: dict[str, Any]) -> int | None:
        """Rough peak bytes of the solve, or None when unknown (used by the size guard).

        The default is the O((n + m) r) working set of a factored solver:
        ``8 * (WORKING_ARRAYS * n * r + 4 * m * r + 3 * nnz)`` with ``r`` the rank the run
        starts at (:meth:`working_rank`), ``m`` the number of constraint terms and
        ``nnz`` the nonzeros of the Laplacian (or the number of edges).  A solver whose
        working set differs (e.g. batched ``|T_i| x |T_i|`` systems) overrides this.
        """
        try:
            n = int(problem.n)
            r = self.working_rank(problem, opts)
            m = int(problem.n_terms)
            L = getattr(problem, "laplacian", None)
            nnz = int(L.nnz) if L is not None and hasattr(L, "nnz") else len(getattr(problem, "edges", ()))
        except (AttributeError, TypeError, ValueError):
            return None
        return int(8 * (WORKING_ARRAYS * n * int(r) + 4 * m * int(r) + 3 * nnz))

    def check_memory(self, problem: Any, opts: dict[str, Any], max_memory: float) -> None:
        """Raise :class:`NotApplicable` when :meth:`estimate_memory` exceeds ``max_memory``."""
        est = self.estimate_memory(problem, opts)
        if est is None or est <= max_memory:
            return
        r = opts.get("rank")
        r_txt = f"rank {r}" if r is not None else \
            f"{'starting' if self.grows_rank else 'default'} rank {self._safe_working_rank(problem, opts)}"
        raise NotApplicable(
            f"method {self.name!r} would need about {format_bytes(est)} of working memory for "
            f"n = {problem.n} points at {r_txt} (O(n r)), above max_memory = "
            f"{format_bytes(max_memory)}. Lower the rank (rank=...), use fewer points, or raise "
            "the limit with max_memory=<bytes>."
        )

    def _safe_working_rank(self, problem: Any, opts: dict[str, Any]) -> Any:
        try:
            return self.working_rank(problem, opts)
        except (AttributeError, TypeError, ValueError):
            return _safe_default_rank(problem)

    # ------------------------------------------------------------------ numerical checks
    # Thin wrappers so that a solver can write ``self.check_finite(V, it, "V")``; see the
    # module functions of the same names.
    @staticmethod
    def check_finite(array: Any, iteration: int, name: str = "iterate", **kw: Any) -> None:
        """Raise :class:`NumericalTrouble` when ``array`` has a NaN or inf entry."""
        check_finite(array, iteration, name, **kw)

    @staticmethod
    def check_pivots(values: Any, iteration: int, name: str = "pivot", **kw: Any) -> None:
        """Raise :class:`NumericalTrouble` unless every value is finite and > ``tol``."""
        check_pivots(values, iteration, name, **kw)

    @staticmethod
    def check_psd(W: Any, iteration: int, name: str = "W", **kw: Any) -> None:
        """Raise :class:`NumericalTrouble` when the small symmetric ``W`` is not PSD."""
        check_psd(W, iteration, name, **kw)

    @staticmethod
    def cholesky(A: Any, iteration: int, name: str = "system", **kw: Any) -> np.ndarray:
        """``numpy.linalg.cholesky`` (batched) that reports a non-positive pivot."""
        return cholesky(A, iteration, name, **kw)

    # ------------------------------------------------------------------ the run
    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None,
            **options: Any) -> Result:
        """Check, solve and evaluate; every failure of the algorithm is a status.

        Before any work: the method must apply (:class:`NotApplicable`), ``seed`` and
        ``time_limit`` must be valid (:class:`OptionError`) and every option known
        (:class:`SolverError`), a ``rank`` option must be in ``[1, n]`` (:class:`OptionError`),
        and the estimated working memory must fit ``max_memory`` bytes (default
        :data:`DEFAULT_MAX_MEMORY`; :class:`NotApplicable` otherwise).

        During the solve, :class:`NumericalTrouble` (from the ``check_*`` helpers),
        ``numpy.linalg.LinAlgError`` and ``FloatingPointError`` become status
        ``numerical_error`` with the message (and the iteration, when known); a
        ``max_iter``, ``timeout`` or ``numerical_error`` status warns with
        :class:`ConvergenceWarning`.
        """
        self.check_applies(problem, None if "max_memory" in self.defaults else
                           parse_max_memory(self.name, options.get("max_memory")))
        check_run_args(self.name, seed, time_limit)
        verbose = options.pop("verbose", False)
        if not isinstance(verbose, (bool, np.bool_)) and not (
                isinstance(verbose, (int, np.integer)) and verbose >= 0):
            raise OptionError(f"The 'verbose' option of {self.name} must be a bool (or an int "
                              f">= 0, where 0 is off). Got {verbose!r} instead.")
        if "max_memory" in self.defaults:  # the solver handles the option itself
            max_memory = math.inf
        else:
            max_memory = parse_max_memory(self.name, options.pop("max_memory", None))
        opts = self.resolve_options(options)
        self.validate(problem, opts)
        if opts.get("rank") is not None:
            check_rank(self.name, opts["rank"], problem.n)
        self.check_memory(problem, opts, max_memory)
        opts["verbose"] = bool(verbose)
        self._log = None
        rng = np.random.default_rng(seed)
        t0 = time.perf_counter()
        deadline = None if time_limit is None else t0 + float(time_limit)
        try:
            if self.grows_rank and (opts.get("rank") is None or self.refines(opts)):
                from .rank import grow

                fixed = opts.get("rank") is not None
                out = grow(self, problem, opts, rng, deadline,
                           cap=int(opts["rank"]) if fixed else self.max_rank(problem),
                           estimate=lambda r: self.estimate_memory(problem, dict(opts, rank=r)),
                           max_memory=max_memory, fixed=fixed,
                           regrow=options.get("max_iter") is None)
            else:
                out = self._solve(problem, opts, rng, deadline)
        except NumericalTrouble as exc:
            out = SolverOutput(factor=exc.factor, status=Status.NUMERICAL_ERROR,
                               iterations=int(exc.iteration or 0), history=dict(exc.history or {}),
                               message=str(exc))
        except (np.linalg.LinAlgError, FloatingPointError) as exc:
            out = SolverOutput(factor=None, status=Status.NUMERICAL_ERROR,
                               message=f"{type(exc).__name__} during the solve: {exc}")
        elapsed = time.perf_counter() - t0
        res = Result(method=self.name, status=out.status, formulation=self.formulation_name,
                     solver=self.solver_name, time=elapsed, solve_time=elapsed,
                     iterations=out.iterations, history=out.history, message=out.message,
                     extras=dict(out.extras), **out.typed())
        # the yardstick (objective, violation, the n x r factor's spectrum) is small dense
        # algebra: one BLAS thread is faster, and far faster on a loaded machine, where
        # two threads made it eat most of the T + 2 s a time limit allows
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            direction = diverging(problem, out.factor, res.status)
            if direction is not None:
                mark_unbounded(res, problem, direction)
            else:
                evaluate_into(res, problem, None if out.factor is None else LowRank(out.factor))
        if getattr(self, "stops_on_gap", False) and res.factor is not None \
                and out.certificate_note is not None and res.certified_gap is not None:
            # the rank growth stopped on the certificate at this very factor (stop_gap): it is
            # the row's certificate, not computed again by compare (30-80 s at a million points)
            res._certified_at = _point_key(res)  # type: ignore[attr-defined]
        if res.status is Status.CONVERGED:
            # a residual rule is not a certificate: converged only within the certified gap
            certify_status(problem, res, self.certified_rtol(opts), deadline)
        if self._log is not None:
            self._log.close(res.status, res.iterations,
                            f"objective {res.objective:.10g}, violation {res.violation:.3g}")
        if res.status in (Status.MAX_ITER, Status.TIMEOUT):
            warnings.warn(f"{self.name}: stopped before converging ({res.status.value}"
                          f" after {res.iterations} iterations)", ConvergenceWarning, stacklevel=2)
        elif res.status is Status.OPTIMAL_INACCURATE:
            warnings.warn(f"{self.name}: {res.message}", ConvergenceWarning, stacklevel=2)
        elif res.status is Status.NUMERICAL_ERROR:
            warnings.warn(f"{self.name}: numerical trouble after {res.iterations} iterations: "
                          f"{res.message}", ConvergenceWarning, stacklevel=2)
        return res


#: a factor whose mean squared row norm (mean ``K_ii``) passes this, or that is not finite,
#: is tested for a direction of unbounded descent (:func:`diverging`)
DIVERGED_SCALE = 1e10
#: the recession test's step (a unit direction ``d``: ``tr(t d d^T) = t``)
RECESSION_STEP = 1e8


def recession_direction(problem: Any, candidates: list[np.ndarray]) -> tuple[np.ndarray, float] | None:
    """A direction ``D = F F^T`` (``tr D = 1``) among the factors ``F`` of ``candidates``
    along which the objective improves without bound, with its rate per unit trace; or None.

    ``f(t D)`` of a convex objective is eventually affine in ``t`` along a recession
    direction: with ``T`` = :data:`RECESSION_STEP` the test asks ``f(2T) - f(T) < 0`` (min;
    ``> 0`` for a maximisation) and ``f(4T) - f(2T) = 2 (f(2T) - f(T))`` to 1e-6 (a squared
    loss that sees ``D`` adds ``6 w a^2 T^2``, which fails it), and every constraint row
    unchanged along ``D`` (equalities ``A(D) = 0``, inequalities of the right sign), so that
    any feasible point stays feasible along the ray.  Only for the form ``K PSD`` without a
    divergence (a divergence is bounded below)."""
    from ..model import EQ, GE, LE, PSD

    decl = problem.declaration
    if not isinstance(decl.form, PSD) or decl.divergence is not None:
        return None
    sign = -1.0 if getattr(problem, "sense", "min") == "max" else 1.0
    T = RECESSION_STEP
    for F in candidates:
        F = np.asarray(F, dtype=float).reshape(decl.n, -1)
        nf = float(np.linalg.norm(F))
        if not (nf > 0 and math.isfinite(nf)):
            continue
        F = F / nf
        try:
            f1, f2, f4 = (sign * decl.objective(LowRank(math.sqrt(t) * F)) for t in (T, 2 * T, 4 * T))
        except (ValueError, FloatingPointError, OverflowError):
            continue
        s1, s2 = f2 - f1, f4 - f2
        if not (math.isfinite(s1) and math.isfinite(s2) and s1 < -1e-9 * T):
            continue
        if abs(s2 - 2.0 * s1) > 1e-6 * abs(s1):
            continue
        ok = True
        for row in decl.constraints:
            g = np.asarray(row.map.apply(LowRank(F)), dtype=float)
            sense = np.broadcast_to(row.sense, g.shape)
            eps = 1e-9
            if np.any((sense == EQ) & (np.abs(g) > eps)) or np.any((sense == LE) & (g > eps)) \
                    or np.any((sense == GE) & (g < -eps)):
                ok = False
                break
        if ok:
            return F, s1 / T
    return None


def diverging(problem: Any, factor: np.ndarray | None, status: Status) -> tuple[np.ndarray, float] | None:
    """The recession direction (:func:`recession_direction`) a diverging run found, or None.

    Tested only when the factor left any bounded scale (mean ``K_ii`` above
    :data:`DIVERGED_SCALE`) or the solve ended in numerical trouble; the candidates are the
    factor itself (the direction the run went: ``K / tr K``) and its leading left singular
    vectors."""
    if factor is None or status not in (Status.CONVERGED, Status.MAX_ITER, Status.TIMEOUT,
                                        Status.NUMERICAL_ERROR):
        return None
    G = np.asarray(factor, dtype=float)
    if G.ndim != 2 or G.size == 0 or not np.all(np.isfinite(G)):
        return None
    scale = float(np.einsum("ij,ij->", G, G)) / G.shape[0]
    if not (scale > DIVERGED_SCALE or status is Status.NUMERICAL_ERROR):
        return None
    try:
        U, _, _ = np.linalg.svd(G, full_matrices=False)
    except np.linalg.LinAlgError:
        return None
    return recession_direction(problem, [G] + [U[:, k] for k in range(min(3, U.shape[1]))])


def recession_from_gradient(problem: Any, factor: np.ndarray, k: int = 4) -> tuple[np.ndarray, float] | None:
    """A recession direction (:func:`recession_direction`) among the factor itself, its leading
    left singular vectors and the ``k`` lowest eigenvectors of the objective's gradient at
    ``K = factor factor^T``; for a point where no certificate
    holds (no bound on the trace of the optimum), as a solver of a bounded relaxation leaves
    it.  Dense below 2,000 points, else Lanczos (ARPACK) on the gradient operator."""
    decl = problem.declaration
    n = int(decl.n)
    try:
        H = decl.gradient(LowRank(np.asarray(factor, dtype=float)))
        if n <= 2000:
            w, V = np.linalg.eigh(H.dense())
        else:
            from scipy.sparse.linalg import LinearOperator, eigsh

            op = LinearOperator((n, n), matvec=lambda x: H.matmat(x.reshape(n, -1)).ravel(),
                                dtype=float)
            w, V = eigsh(op, k=min(k, n - 1), which="SA", tol=1e-6, maxiter=20 * n)
    except Exception:  # noqa: BLE001 - no eigenvectors: no direction to test
        return None
    order = np.argsort(w)[:k]
    if getattr(problem, "sense", "min") == "max":
        order = np.argsort(w)[::-1][:k]
    G = np.asarray(factor, dtype=float)
    U, _, _ = np.linalg.svd(G, full_matrices=False)
    return recession_direction(problem, [G] + [U[:, c] for c in range(min(3, U.shape[1]))]
                               + [V[:, c] for c in order])


def mark_unbounded(res: Result, problem: Any, found: tuple[np.ndarray, float]) -> None:
    """Status ``unbounded`` with the direction's factor ``F`` (``D = F F^T``, ``tr D = 1``)
    in ``res.unbounded_direction`` (its rate in ``res.unbounded_rate``)."""
    F, rate = found
    better = "increases" if getattr(problem, "sense", "min") == "max" else "decreases"
    res.status = Status.UNBOUNDED
    res.factor = None
    res.unbounded_direction = F
    res.unbounded_rate = rate
    res.message = (f"unbounded: the objective {better} without bound along K + t F F^T, "
                   f"tr(F F^T) = 1 (rate {abs(rate):.3g} per unit of trace; F in "
                   "the row's unbounded_direction)"
                   + (f"; the solve had said: {res.message}" if res.message else ""))


# ---------------------------------------------------------------------- certificates
#: the fields of a row a certificate sets
CERT_KEYS = ("certified_gap", "lower_bound", "upper_bound", "certificate_time", "certificate_note")
#: exceptions that are never turned into a row
PASS_THROUGH = (KeyboardInterrupt, SystemExit, GeneratorExit)


def describe_exception(exc: BaseException) -> str:
    kind = type(exc).__name__
    if not isinstance(exc, Exception):  # e.g. pyo3_runtime.PanicException from a Rust solver
        kind = f"{type(exc).__module__}.{kind}" if type(exc).__module__ != "builtins" else kind
    return f"{kind}: {exc}"



def attach_certificate(problem: Any, res: Result, deadline: float | None = None) -> None:
    """Set ``res.certified_gap`` and ``res.lower_bound`` (``res.upper_bound`` for a
    maximisation) when a certificate applies.

    The bound is the Lagrangian certificate of :mod:`kernelforms.certificate`, or the method's
    own bound when it has one and it is tighter (bcd's duality gap, the Bregman solvers' dual
    point, smo's recovery bound, lowrank's multipliers): every such bound is valid, so the
    tightest is reported, and ``certificate_note`` says when it is the method's own.
    With ``deadline`` (a ``time.perf_counter()`` value) already passed, the certificate is
    not computed and ``certificate_note`` says so.
    """
    from .. import certificate

    if res.factor is None or not res.ok or certificate.applies(problem) is not None:
        return
    key = _point_key(res)
    if getattr(res, "_certified_at", None) == key:
        return  # attached already at this very kernel (the run's own check): not twice
    if getattr(res, "_certified_at", None) is not None:
        # attached at another kernel (a wrapper changed the factor after the run): the gap
        # and note are stale; a bound stays valid (it bounds the optimum, not the point)
        res.certified_gap = res.certificate_note = res.certificate_time = res.no_trace_bound = None
    res._certified_at = key  # type: ignore[attr-defined]
    if deadline is not None and time.perf_counter() >= deadline:
        res.certificate_note = "not computed: the time limit ran out after the solve"
        return
    is_max = problem.sense == "max"
    own = res.upper_bound if is_max else res.lower_bound
    own = float(own) if own is not None and np.isfinite(own) else None
    t0 = time.perf_counter()
    try:
        # a conic solver's own multipliers (Formulation.duals) are one more candidate
        cert = certificate.certify(problem, res.kernel, duals=res.solver_duals)
    except KernelformsError as exc:
        res.certificate_note = str(exc)
        res.no_trace_bound = isinstance(exc, NoTraceBound)
        cert = None
    except PASS_THROUGH:
        raise
    except BaseException as exc:  # noqa: BLE001 - a failed certificate must not lose the row
        res.certificate_note = describe_exception(exc)
        cert = None
    lam = res.multipliers
    if cert is not None and lam is not None:
        # the solver's own constraint multipliers (lowrank on MVU), kept when tighter; they
        # may not fit this declaration (NotApplicable), which leaves the fitted bound standing
        try:
            mine = certificate.certify(problem, res.kernel, multipliers=lam)
        except (KernelformsError, np.linalg.LinAlgError):
            mine = None
        if mine is not None and mine.relative_gap < cert.relative_gap:
            cert = mine
    bound = None if cert is None else (cert.upper_bound if is_max else cert.lower_bound)
    if own is not None and (bound is None or (own < bound if is_max else own > bound)):
        what = (f"the Lagrangian bound is {bound:.10g}" if bound is not None
                else f"no Lagrangian bound: {res.certificate_note}")
        res.certificate_note = f"the method's own bound {own:.10g} is tighter ({what})"
        bound = own
    if bound is None:
        return
    if is_max:
        res.upper_bound = bound
        res.certified_gap = (bound - res.objective) / max(abs(res.objective), 1e-12)
    else:
        res.lower_bound = bound
        res.certified_gap = (res.objective - bound) / max(abs(res.objective), 1e-12)
    res.certificate_time = time.perf_counter() - t0


def _point_key(res: Result) -> tuple:
    """The kernel and objective a certificate was computed at (a digest of the factor)."""
    import hashlib

    G = np.ascontiguousarray(res.factor, dtype=float)
    return (G.shape, hashlib.blake2b(G.tobytes(), digest_size=16).hexdigest(), float(res.objective))


def certify_status(problem: Any, res: Result, rtol: float | None,
                   deadline: float | None = None) -> None:
    """The one rule for what a finished row may claim: ``converged`` (a hand-written solver's
    stopping rule) and ``optimal`` (a conic solver's word) stand only when the certificate
    of :mod:`kernelforms.certificate` at the returned kernel confirms the relative gap
    within ``rtol``, the method's documented tolerance.

    The certificate is attached to the row (:func:`attach_certificate`: the Lagrangian
    bound, or the method's own when tighter), so a later :func:`attach_certificate` (compare's)
    reuses it.  A certified gap above ``rtol`` turns the status into ``optimal_inaccurate``
    (the method stopped by its own rule; the point is not proven within its tolerance), and
    the message gives the gap, the bound and the claim it replaced.  When no certificate
    applies to the problem, cannot be computed for the instance (no trace bound) or the
    deadline has passed, the status is kept and ``certificate_note`` says why.
    ``rtol=None`` (a method that solves another problem by design, such as SimpleNPKL's
    bounded one) keeps the status; its certificate is attached all the same, and a point
    where no trace bound holds is still tested for unboundedness.
    """
    if res.status not in (Status.CONVERGED, Status.OPTIMAL) or not res.ok:
        return
    own = res.upper_bound if problem.sense == "max" else res.lower_bound
    if rtol is not None and own is not None and np.isfinite(own):
        gap = (own - res.objective) if problem.sense == "max" else (res.objective - own)
        if gap / max(abs(res.objective), 1e-12) <= rtol:
            return  # the method's own valid bound (bcd's duality gap) confirms it: no more work
    attach_certificate(problem, res, deadline)
    gap = res.certified_gap
    if gap is None and res.no_trace_bound:
        # no certificate because nothing bounds the optimum's trace: the problem may be
        # unbounded (a solver of a bounded relaxation stops at a finite point there)
        found = recession_from_gradient(problem, res.factor)
        if found is not None:
            mark_unbounded(res, problem, found)
            res.objective = math.nan
        return
    if rtol is None or gap is None or not np.isfinite(gap) or gap <= rtol:
        return
    claimed = res.status
    bound = res.upper_bound if problem.sense == "max" else res.lower_bound
    side = "upper" if problem.sense == "max" else "lower"
    res.status = Status.OPTIMAL_INACCURATE
    res.claimed_status = claimed
    what = ("the solver said optimal" if claimed is Status.OPTIMAL
            else "the stopping rule was met")
    res.message = (f"{res.message}; {what}, but the certified relative gap is {gap:.2g} "
                   f"({side} bound {bound:.10g}), above the method's tolerance {rtol:g}"
                   ).lstrip("; ")


# ---------------------------------------------------------------------- shared validators
def check_rank(owner: str, rank: Any, n: int, *, default: int | None = None) -> int:
    """The rank ``r`` of a factor ``G`` (n x r): an int in ``[1, n]``.

    ``rank=None`` returns ``default`` (typically ``problem.default_rank()``); a bool, a
    float, a value below 1 or above n is an :class:`~kernelforms.errors.OptionError`
    (both a ``ProblemError`` and a ``SolverError``) in the standard message shape.  :meth:`IterativeSolver.run` applies it to every
    solver's ``rank`` option; call it again where the solver resolves its default.
    """
    if rank is None and default is not None:
        rank = default
    if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)) \
            or not 1 <= int(rank) <= int(n):
        raise OptionError(f"The 'rank' parameter of {owner} must be an int in [1, n] = [1, {int(n)}] "
                          "(the number of columns of the factor G, at most the number of points). "
                          f"Got {rank!r} instead.")
    return int(rank)


def check_run_args(owner: str, seed: Any, time_limit: Any) -> None:
    """``seed``: an int >= 0, a numpy Generator or None (fresh entropy);
    ``time_limit``: None or a number of seconds > 0."""
    if seed is not None and not isinstance(seed, np.random.Generator) and (
            isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer))
            or seed < 0):
        raise OptionError(f"The 'seed' option of {owner} must be an int >= 0 or a "
                          f"numpy.random.Generator. Got {seed!r} instead.")
    if time_limit is not None and (
            isinstance(time_limit, (bool, np.bool_)) or not isinstance(time_limit, (int, float, np.number))
            or not float(time_limit) > 0 or math.isnan(float(time_limit))):
        raise OptionError(f"The 'time_limit' option of {owner} must be None or a number of "
                          f"seconds > 0. Got {time_limit!r} instead.")


_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20,
          "mib": 2**20, "g": 2**30, "gb": 2**30, "gib": 2**30, "t": 2**40, "tb": 2**40, "tib": 2**40}


def parse_max_memory(owner: str, value: Any) -> float:
    """Bytes from ``max_memory``: None (the default), a number > 0, or a string such as
    ``"512MB"`` / ``"8GiB"`` (binary units); ``math.inf`` disables the guard."""
    if value is None:
        return float(DEFAULT_MAX_MEMORY)
    v: float | None = None
    if isinstance(value, str):
        import re

        mt = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
        if mt and mt.group(2).lower() in _UNITS:
            v = float(mt.group(1)) * _UNITS[mt.group(2).lower()]
    elif not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.number)):
        v = float(value)
    if v is None or math.isnan(v) or v <= 0:
        raise OptionError(f"The 'max_memory' option of {owner} must be a number of bytes > 0 "
                          f"or a string such as '8GB'. Got {value!r} instead.")
    return v


def _safe_default_rank(problem: Any) -> Any:
    try:
        return problem.default_rank()
    except Exception:  # noqa: BLE001 - only used in a message
        return "?"


# ---------------------------------------------------------------------- numerical trouble
def check_finite(array: Any, iteration: int, name: str = "iterate", *, factor: Any = None,
                 history: dict | None = None) -> None:
    """Raise :class:`~kernelforms.errors.NumericalTrouble` when ``array`` has NaN or inf.

    Call it on the iterate (or a cheap scalar of it, e.g. a residual norm) every
    iteration; pass the last good ``factor`` and the ``history`` so far to have them
    reported.  ``IterativeSolver.run`` turns the exception into status
    ``numerical_error`` with ``iterations = iteration``.
    """
    a = np.asarray(array)
    if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
        bad = ~np.isfinite(a)
        kind = "NaN" if np.any(np.isnan(a)) else "inf"
        where = "" if a.ndim == 0 else f" (first at index {tuple(int(i) for i in np.argwhere(bad)[0])}," \
            f" {int(bad.sum())} of {a.size} entries)"
        raise NumericalTrouble(f"{kind} in {name} at iteration {iteration}{where}", iteration,
                               factor=factor, history=history)


def check_pivots(values: Any, iteration: int, name: str = "pivot", *, tol: float = 0.0,
                 factor: Any = None, history: dict | None = None) -> None:
    """Raise :class:`~kernelforms.errors.NumericalTrouble` unless every value is finite
    and ``> tol``.

    For pivots of a hand-written factorisation, the denominators of a batched solve,
    or the PSD condition of a Bregman projection: the Burg update
    ``K + beta K a a^T K`` stays PSD only while ``1 + beta a^T K a > 0``, so pass
    ``1 + beta * p`` (with ``name="1 + beta p (Burg projection)"``).
    """
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v) & (v > tol)
    if not np.all(ok):
        k = int(np.argmin(ok.ravel()))
        raise NumericalTrouble(
            f"non-positive {name} at iteration {iteration}: {v.ravel()[k]:.3g} (entry {k}, "
            f"{int((~ok).sum())} of {v.size} not > {tol:g}); the step would leave the PSD cone "
            "or divide by zero", iteration, factor=factor, history=history)


def check_psd(W: Any, iteration: int, name: str = "W", *, rtol: float = 1e-10,
              factor: Any = None, history: dict | None = None) -> None:
    """Raise :class:`~kernelforms.errors.NumericalTrouble` when the small symmetric
    matrix (or stack of matrices) ``W`` has an eigenvalue below ``-rtol * max|eig|``
    (or a NaN).  Costs one ``eigvalsh``: for r x r matrices, not n x n ones."""
    A = np.asarray(W, dtype=float)
    check_finite(A, iteration, name, factor=factor, history=history)
    ev = np.linalg.eigvalsh((A + np.swapaxes(A, -1, -2)) / 2)
    top = np.max(np.abs(ev), axis=-1, keepdims=True)
    lo = ev[..., :1]
    if np.any(lo < -rtol * np.maximum(top, 1e-300)):
        raise NumericalTrouble(
            f"{name} left the PSD cone at iteration {iteration}: smallest eigenvalue "
            f"{float(np.min(lo)):.3g}", iteration, factor=factor, history=history)


def cholesky(A: Any, iteration: int, name: str = "system", *, factor: Any = None,
             history: dict | None = None) -> np.ndarray:
    """``numpy.linalg.cholesky`` of a matrix or a stack of matrices; a non-positive pivot
    (or NaN) raises :class:`~kernelforms.errors.NumericalTrouble` naming the iteration
    and the first failing matrix of the stack."""
    A = np.asarray(A, dtype=float)
    check_finite(A, iteration, name, factor=factor, history=history)
    try:
        return np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        ev = np.linalg.eigvalsh((A + np.swapaxes(A, -1, -2)) / 2)[..., 0]
        k = int(np.argmin(ev.ravel())) if ev.ndim else 0
        where = f" (matrix {k} of the batch)" if A.ndim > 2 else ""
        raise NumericalTrouble(
            f"non-positive pivot in the Cholesky factorisation of {name}{where} at iteration "
            f"{iteration}: smallest eigenvalue {float(np.min(ev)):.3g}", iteration,
            factor=factor, history=history) from None


# ---------------------------------------------------------------------- conic options
#: settings CVXPY itself accepts with any solver (keywords of ``Problem.solve``);
#: ``verbose`` is not here: kernelforms fixes it (solver output is always off)
CVXPY_SOLVE_OPTIONS = frozenset({"warm_start", "canon_backend", "ignore_dpp", "enforce_dpp"})

#: SCS 3.x settings (checked against scs 3.3.1) plus those CVXPY's SCS interface translates
SCS_OPTIONS = frozenset({
    "normalize", "scale", "adaptive_scale", "rho_x", "max_iters", "eps_abs", "eps_rel",
    "eps_infeas", "alpha", "time_limit_secs", "acceleration_lookback", "acceleration_interval",
    "write_data_filename", "log_csv_filename", "linear_solver",
    # newer SCS releases
    "adaptive_diag_scale", "acceleration_regularization", "acceleration_relaxation",
    # CVXPY: eps -> eps_abs and eps_rel, use_indirect -> linear_solver, use_quad_obj
    "eps", "use_indirect", "use_quad_obj",
})


def conic_solver_options(solver_name: str | None) -> frozenset[str] | None:
    """The option names a CVXPY conic solver accepts through kernelforms, or None when
    kernelforms does not know the list (then nothing is checked).

    ``solver_name`` is the CVXPY name (``"CLARABEL"``, ``"SCS"``, any case); ``None``
    (automatic choice) gives the names valid for Clarabel or SCS.
    """
    if solver_name is None:
        a, b = conic_solver_options("CLARABEL"), conic_solver_options("SCS")
        return None if a is None or b is None else a | b
    up = str(solver_name).upper()
    if up == "SCS":
        return SCS_OPTIONS | CVXPY_SOLVE_OPTIONS
    if up == "CLARABEL":
        try:
            import clarabel
        except ImportError:  # pragma: no cover - not installed: resolve_solver says so
            return None
        settings = {a for a in dir(clarabel.DefaultSettings())
                    if not a.startswith("_") and a not in ("default", "verbose")}
        # CVXPY's Clarabel interface: use_quad_obj, accept_unknown
        return frozenset(settings | {"use_quad_obj", "accept_unknown"}) | CVXPY_SOLVE_OPTIONS
    return None


def validate_conic_options(solver_name: str | None, options: dict[str, Any], *,
                           method: str | None = None) -> None:
    """Raise :class:`~kernelforms.errors.SolverError` for an option the conic solver
    does not know, naming it, suggesting close matches and listing the valid ones.

    CVXPY passes settings straight to the solver, which rejects unknown names only after
    the program has been built (Clarabel: ``TypeError``; SCS: "invalid keyword
    argument"); calling this first makes the error immediate and readable.  Keys
    starting with ``compile_`` (formulation options) and ``max_memory`` (the size guard)
    are not solver settings and are skipped.  Unknown solvers (not Clarabel or SCS) are
    not checked.
    """
    valid = conic_solver_options(solver_name)
    if valid is None:
        return
    keys = [k for k in options if not (isinstance(k, str) and (k.startswith("compile_") or k == "max_memory"))]
    unknown = [k for k in keys if k not in valid]
    if not unknown:
        return
    who = (f"method {method!r} (" if method else "") + \
        (f"conic solver {str(solver_name).upper()}" if solver_name else "the automatic conic solver choice (Clarabel or SCS)") + \
        (")" if method else "")
    hints = []
    for u in unknown:
        if u == "verbose":
            hints.append("'verbose' (kernelforms keeps solver output off)")
            continue
        close = difflib.get_close_matches(str(u), sorted(valid), n=2)
        hints.append(f"{u!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""))
    raise SolverError(
        f"unknown option(s) for {who}: {', '.join(hints)}. Valid options: "
        f"{', '.join(sorted(valid))}."
    )
