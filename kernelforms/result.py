"""Results: the status enum, the low-rank kernel value and the Result record."""

from __future__ import annotations

import enum
import math
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Iterator

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


#: the fields of :class:`Result` that earlier versions kept in ``Result.extras`` (and that
#: other layers read): ``result.extras[key]`` still reads and writes them
TYPED_EXTRAS = ("certifying", "certified_gap", "lower_bound", "upper_bound", "certificate_note",
                "certificate_time", "size", "memory_estimate")


class Extras(MutableMapping):
    """``Result.extras``: a method's own diagnostics (a dict of anything).

    The keys of :data:`TYPED_EXTRAS` are not stored here but in the typed fields of the
    :class:`Result` (``result.certified_gap``, ...): ``extras["certified_gap"]`` reads and
    writes that field, and the key is present when the field is not None.  So code written
    against the old layout (and a solver that writes ``extras["lower_bound"]``) keeps
    working, and the typed field is the one value.
    """

    __slots__ = ("_owner", "_data")

    def __init__(self, owner: "Result", data: dict[str, Any] | None = None) -> None:
        self._owner = owner
        self._data: dict[str, Any] = {} if data is None else data

    def __getitem__(self, key: str) -> Any:
        if key in TYPED_EXTRAS:
            value = getattr(self._owner, key)
            if value is None:
                raise KeyError(key)
            return value
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in TYPED_EXTRAS:
            setattr(self._owner, key, value)
        else:
            self._data[key] = value

    def __delitem__(self, key: str) -> None:
        if key in TYPED_EXTRAS:
            if getattr(self._owner, key) is None:
                raise KeyError(key)
            setattr(self._owner, key, None)
        else:
            del self._data[key]

    def __iter__(self) -> Iterator[str]:
        yield from list(self._data)
        yield from [k for k in TYPED_EXTRAS if getattr(self._owner, k) is not None]

    def __len__(self) -> int:
        return len(self._data) + sum(getattr(self._owner, k) is not None for k in TYPED_EXTRAS)

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def own(self) -> dict[str, Any]:
        """The method's own diagnostics only (without the typed fields)."""
        return dict(self._data)

    def copy(self) -> dict[str, Any]:
        """A plain dict of every key, the typed fields included (as ``dict.copy``)."""
        return dict(self.items())


@dataclass
class Result:
    """What a method returns.  The kernel is kept as a factor, ``K = factor @ factor.T``.

    ``objective`` is always the *problem's own* evaluation on the returned kernel
    (never a solver's internal value), so rows of different methods compare.

    The fields after ``extras`` are read by other layers (the report, the plots, the
    command line) and are None when unknown: ``certifying`` (whether the method's
    ``optimal`` status certifies optimality), the certificate of
    :mod:`kernelforms.certificate` (``certified_gap``, ``lower_bound`` for a minimisation,
    ``upper_bound`` for MVU, ``certificate_time`` in seconds, ``certificate_note`` when it
    was not computed), ``size`` (the size of the solved program, as the report prints it)
    and ``memory_estimate`` (the bytes the size guard estimated).  ``extras`` holds the
    method's own diagnostics; ``extras[name]`` of one of these fields still reads and
    writes the field (see :class:`Extras`).
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
    certifying: bool | None = None
    certified_gap: float | None = None
    lower_bound: float | None = None
    upper_bound: float | None = None
    certificate_note: str | None = None
    certificate_time: float | None = None
    size: str | None = None
    memory_estimate: int | None = None

    def __post_init__(self) -> None:
        # the typed keys of a plain dict (old layout, or a solver's own extras) go to the
        # fields; an explicitly given field wins
        given = self.extras
        data = dict(given.items()) if isinstance(given, Extras) else dict(given or {})
        own = {}
        for key, value in data.items():
            if key in TYPED_EXTRAS:
                if getattr(self, key) is None:
                    setattr(self, key, value)
            else:
                own[key] = value
        self.extras = Extras(self, own)  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["extras"] = self.extras.own() if isinstance(self.extras, Extras) else dict(self.extras)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.extras = Extras(self, dict(state.get("extras") or {}))  # type: ignore[assignment]

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
