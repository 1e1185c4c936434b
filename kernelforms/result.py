"""Results: the status enum, the low-rank kernel value and the Result record."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np


class Status(str, enum.Enum):
    """How a method ended.  The string values are stable (they appear in JSON)."""

    OPTIMAL = "optimal"
    OPTIMAL_INACCURATE = "optimal_inaccurate"
    CONVERGED = "converged"  #: a hand-written solver met its own stopping rule
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    MAX_ITER = "max_iter"
    TIMEOUT = "timeout"
    NUMERICAL_ERROR = "numerical_error"
    SKIPPED = "skipped"
    ERROR = "error"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value

    @property
    def has_solution(self) -> bool:
        """True when the method returned a kernel worth evaluating."""
        return self in _WITH_SOLUTION

    @property
    def certifies_optimality(self) -> bool:
        """True for a conic solver's own optimality certificate."""
        return self is Status.OPTIMAL


_WITH_SOLUTION = frozenset(
    {Status.OPTIMAL, Status.OPTIMAL_INACCURATE, Status.CONVERGED, Status.MAX_ITER, Status.TIMEOUT}
)

#: relative eigenvalue threshold used for the reported numerical rank
RANK_RTOL = 1e-9


@dataclass(frozen=True, eq=False)
class LowRank:
    """A PSD kernel held as a factor: ``K = G @ G.T`` with ``G`` of shape ``(n, r)``.

    Every quantity a problem needs (entries on pairs, the diagonal, ``tr(L K)``)
    is computed from ``G`` without forming the ``n x n`` matrix.
    """

    G: np.ndarray

    def __post_init__(self) -> None:
        G = np.asarray(self.G, dtype=float)
        if G.ndim == 1:
            G = G[:, None]
        if G.ndim != 2:
            raise ValueError(f"LowRank expects a 2-D factor (n, r); got shape {G.shape}")
        object.__setattr__(self, "G", G)

    @property
    def n(self) -> int:
        return self.G.shape[0]

    @property
    def r(self) -> int:
        return self.G.shape[1]

    def dense(self) -> np.ndarray:
        """The kernel as a dense ``n x n`` array (small n only)."""
        return self.G @ self.G.T

    def diag(self) -> np.ndarray:
        return np.einsum("ij,ij->i", self.G, self.G)

    def entries(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """``K[i, j]`` for index arrays, in O(len(i) r)."""
        return np.einsum("ij,ij->i", self.G[i], self.G[j])

    def trace(self) -> float:
        return float(np.sum(self.G * self.G))

    def trace_with(self, L: Any) -> float:
        """``tr(L K) = sum(G * (L @ G))`` for a sparse or dense symmetric L."""
        return float(np.sum(self.G * (L @ self.G)))

    def total_sum(self) -> float:
        """``1^T K 1 = ||G^T 1||^2``."""
        s = self.G.sum(axis=0)
        return float(s @ s)

    def eigenvalues(self) -> np.ndarray:
        """Nonzero-part spectrum: the squared singular values of G (length min(n, r))."""
        sv = np.linalg.svd(self.G, compute_uv=False)
        return sv**2


def as_kernel(K: Any, n: int | None = None) -> "np.ndarray | LowRank":
    """Accept a dense symmetric matrix or a :class:`LowRank` (or an ``(n, r)`` factor wrapped)."""
    if isinstance(K, LowRank):
        out = K
    else:
        try:
            import scipy.sparse as sp

            if sp.issparse(K):
                K = K.toarray()
        except ImportError:  # pragma: no cover
            pass
        from .errors import ProblemError  # a ValueError too: callers catching that still work

        try:
            if np.asarray(K).dtype.kind == "c":
                raise ProblemError("K must be real; it has complex values (kernelforms never drops "
                                   "an imaginary part)")
            out = np.asarray(K, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ProblemError(f"K must be a numeric (n, n) matrix or a LowRank factor; got "
                               f"{type(K).__name__}: {exc}") from exc
        if out.ndim != 2 or out.shape[0] != out.shape[1]:
            raise ProblemError(
                f"K must be a square (n, n) matrix or a LowRank factor; got shape {out.shape}"
            )
    size = out.n if isinstance(out, LowRank) else out.shape[0]
    if n is not None and size != n:
        from .errors import ProblemError

        raise ProblemError(f"K has n = {size} rows but the problem has n = {n} points")
    return out


def spectrum_summary(K: "np.ndarray | LowRank") -> tuple[float, int]:
    """Smallest eigenvalue and numerical rank of K (rank: eigenvalues > RANK_RTOL * max)."""
    if isinstance(K, LowRank):
        ev = K.eigenvalues()
        min_eig = float(ev.min()) if K.r >= K.n else 0.0
    else:
        ev = np.linalg.eigvalsh((K + K.T) / 2)
        min_eig = float(ev.min())
    top = float(ev.max()) if ev.size else 0.0
    rank = int(np.sum(ev > RANK_RTOL * top)) if top > 0 else 0
    return min_eig, rank


def psd_factor(K: np.ndarray) -> np.ndarray:
    """Factor of the PSD part of a dense symmetric matrix: ``G`` with ``G G^T = K_+``.

    Negative eigenvalues (solver round-off) are dropped; exactly-zero columns are removed.
    """
    w, U = np.linalg.eigh((K + K.T) / 2)
    keep = w > 0
    return U[:, keep] * np.sqrt(w[keep])


@dataclass(kw_only=True)
class Evidence:
    """The typed fields a :class:`Solution` and a :class:`Result` share (keyword-only; None
    when the method does not set them); a solution hands them to its result:

    * ``multipliers``: the constraint rows' multipliers the method ended with, one per row of
      the original declaration in its order, the centring row excluded, in the sign of
      :func:`kernelforms.certificate.certify` (MVU: one per edge); a method that solved a
      merged problem drops them (:meth:`kernelforms.model.Chain.invert_multipliers`);
    * ``lower_bound`` / ``upper_bound``: a valid bound on the optimum (a minimisation's lower,
      a maximisation's upper), ``certified_gap`` its relative gap, ``certificate_time`` in
      seconds, ``certificate_note`` (why it was not computed, or whose bound it is);
    * ``certifying``: whether an ``optimal``/``converged`` status of this run is a certificate;
    * ``claimed_status``: the status the method's own rule claimed, when it was replaced
      (a problem solved by design other than the one given); ``solves``: that other problem,
      in words;
    * ``rank_path`` (the ranks a factored solver solved at), ``rank_growth`` (why the rank
      stopped growing), ``rank_used`` (the factor's columns at the end of the solve),
      ``certstop_fired`` (the iteration and gap at which a solve stopped on the certificate).
    """

    multipliers: np.ndarray | None = None
    lower_bound: float | None = None
    upper_bound: float | None = None
    certified_gap: float | None = None
    certificate_time: float | None = None
    certificate_note: str | None = None
    certifying: bool | None = None
    claimed_status: Status | None = None
    solves: str | None = None
    rank_path: list[int] | None = None
    rank_growth: str | None = None
    rank_used: int | None = None
    certstop_fired: dict[str, Any] | None = None


#: the typed fields a :class:`Solution` hands to its :class:`Result` (besides factor, status,
#: iterations, history, message and extras): those of :class:`Evidence`
SOLUTION_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Evidence))


@dataclass
class Solution(Evidence):
    """What a hand-written solver's ``_solve`` returns (and what the rank growth passes on).

    ``factor`` (``K = factor @ factor.T``, on the original declaration's points), ``status``,
    ``iterations``, ``history`` (lists per iteration) and ``message`` as in :class:`Result`;
    ``extras`` the method's own diagnostics only (no other layer reads them); the typed
    fields of :class:`Evidence` (keywords).
    """

    factor: np.ndarray | None
    status: Status
    iterations: int = 0
    history: dict[str, list] = field(default_factory=dict)
    message: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    def typed(self) -> dict[str, Any]:
        """The typed fields (:data:`SOLUTION_FIELDS`) that are set, for :class:`Result`."""
        return {k: getattr(self, k) for k in SOLUTION_FIELDS if getattr(self, k) is not None}


@dataclass
class Result(Evidence):
    """What a method returns.  The kernel is kept as a factor, ``K = factor @ factor.T``.

    ``objective`` is always the *problem's own* evaluation on the returned kernel
    (never a solver's internal value), so rows of different methods compare.

    The typed fields are read by other layers (the report, the verdicts, the plots, the
    command line, the benches) and are None when unknown: those of :class:`Evidence`
    (multipliers, bounds and certificate, ranks; keywords), and

    * ``size`` (the solved program's size as the report prints it), ``size_detail`` (a conic
      formulation's sizes, a dict) and ``memory_estimate`` (the bytes the size guard estimated);
    * ``solver_duals``: a conic solver's own multipliers read back onto the declaration (a
      dict, :meth:`~kernelforms.formulations.base.Formulation.duals`), or only their number
      ``solver_duals_size`` when they were too many to keep; ``solver_eps``: the conic
      solver's relative tolerance;
    * ``gap_tol_asked``: the ``gap_tol`` :func:`~kernelforms.compare` ran the method with;
    * ``no_trace_bound``: True when the certificate found no bound at this instance because
      nothing bounds the optimum's trace (``certificate_note`` words it; the problem may be
      unbounded, and a recession direction is looked for);
    * ``unbounded_direction`` (a factor ``F``, ``tr(F F^T) = 1``) and ``unbounded_rate`` of
      an ``unbounded`` row.

    ``extras`` is a plain dict of the method's own diagnostics, shown as they are.
    """

    method: str
    status: Status
    objective: float = math.nan
    violation: float = math.nan
    min_eig: float = math.nan
    rank: int = 0
    factor: np.ndarray | None = None
    time: float = 0.0
    compile_time: float = 0.0
    solve_time: float = 0.0
    iterations: int | None = None
    history: dict[str, list] = field(default_factory=dict)
    formulation: str = ""
    solver: str = ""
    message: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    size: str | None = None
    memory_estimate: int | None = None
    size_detail: dict[str, Any] | None = None
    solver_duals: dict[str, Any] | None = None
    solver_duals_size: int | None = None
    solver_eps: float | None = None
    gap_tol_asked: float | None = None
    no_trace_bound: bool | None = None
    unbounded_direction: np.ndarray | None = None
    unbounded_rate: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        # a copy (copy.copy too) gets its own extras dict
        state = dict(self.__dict__)
        state["extras"] = dict(self.extras)
        return state

    @property
    def K(self) -> np.ndarray:
        """The learned kernel as a dense matrix (formed on demand; small n only)."""
        if self.factor is None:
            raise ValueError(f"method {self.method!r} returned no kernel (status {self.status.value})")
        return self.factor @ self.factor.T

    @property
    def kernel(self) -> LowRank | None:
        return None if self.factor is None else LowRank(self.factor)

    @property
    def ok(self) -> bool:
        return self.status.has_solution and math.isfinite(self.objective)

    def summary(self) -> dict[str, Any]:
        """JSON-friendly scalar fields (no arrays)."""
        return {
            "method": self.method,
            "formulation": self.formulation,
            "solver": self.solver,
            "status": self.status.value,
            "objective": self.objective,
            "violation": self.violation,
            "min_eig": self.min_eig,
            "rank": self.rank,
            "time": self.time,
            "compile_time": self.compile_time,
            "solve_time": self.solve_time,
            "iterations": self.iterations,
            "message": self.message,
            "size": self.size,
        }

    def __repr__(self) -> str:
        return (
            f"Result(method={self.method!r}, status={self.status.value!r}, "
            f"objective={self.objective:.10g}, violation={self.violation:.3g}, "
            f"rank={self.rank}, time={self.time:.3g}s)"
        )


#: the typed fields of :class:`Result` beyond the core ones (those of :class:`Evidence`, then
#: those after ``extras``): the report's JSON writes each that is set
RESULT_FIELDS: tuple[str, ...] = SOLUTION_FIELDS + tuple(
    f.name for f in fields(Result)[[f.name for f in fields(Result)].index("extras") + 1:])
