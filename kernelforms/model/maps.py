"""Linear maps of the kernel: the ``A`` in ``A(K)`` of every term and constraint.

A map sends a symmetric ``n x n`` matrix ``K`` to a vector of ``size`` numbers.  Each
map can

* evaluate itself on a dense ``K`` or on a factor (:class:`~kernelforms.result.LowRank`,
  ``K = G G^T``) without forming ``K`` (:meth:`LinearMap.apply`);
* apply its adjoint ``A*(w) = sum_p w_p A_p`` to a factor, ``A*(w) G``, in
  O(size + n r) (:meth:`LinearMap.adjoint_op`);
* write itself as CVXPY expressions, of a ``K`` variable (:meth:`LinearMap.cvx`) or of
  ``vec(Y)`` when ``K = B Y B^T`` (:meth:`LinearMap.functionals`).

The vocabulary is small on purpose: every problem of docs/problems.md is written with
:class:`PairMap` (entries ``K_ij`` and squared distances ``K_ii + K_jj - 2 K_ij`` over a
list of pairs; :func:`Entries` and :func:`Distances` build the common cases),
:class:`Inner` (``<M, K>`` for a sparse symmetric ``M``, e.g. ``tr(L K)``), :class:`Trace`
and :class:`TotalSum` (``1^T K 1``, the centring of MVU).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from .._parallel import parallel
from ..errors import ProblemError
from ..result import LowRank
from .checks import Count, Indices, SymmetricMatrix

class RowKind(enum.IntEnum):
    """The kind of one row of a linear map.

    A :class:`PairMap` stores ``DISTANCE`` (``K_ii + K_jj - 2 K_ij``) or ``ENTRY`` (``K_ij``)
    per row (an IntEnum: the stored int arrays compare equal to the members).  The
    canonical form (:mod:`kernelforms.model.canonical`) splits entries into off-diagonal
    ``ENTRY`` and ``DIAGONAL`` (``K_ii``) rows, and files the rows of any other map (an
    inner product, the trace, the total sum) as ``GENERAL``.
    """

    DISTANCE = 0
    ENTRY = 1
    DIAGONAL = 2
    GENERAL = 3


#: the kind of one row of a :class:`PairMap`
DISTANCE, ENTRY = RowKind.DISTANCE, RowKind.ENTRY


def _freeze(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class SymOperator:
    """A symmetric ``n x n`` operator ``S + U diag(c) U^T`` (``S`` sparse, ``U`` thin dense).

    What an adjoint returns: every map of this package has a sparse adjoint except
    :class:`TotalSum`, whose adjoint ``w 1 1^T`` is the rank-one part.  Products with a
    factor cost O(nnz(S) r + n k r) and never form a dense matrix.
    """

    n: int
    sparse: sp.csr_matrix
    U: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    c: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def matmat(self, G: np.ndarray) -> np.ndarray:
        """``(S + U diag(c) U^T) @ G`` for an ``(n, r)`` array (or an ``(n,)`` vector); a large
        ``S`` is multiplied on several cores (:func:`kernelforms._parallel.parallel`)."""
        out = parallel(self.sparse) @ G
        if self.c.size:
            c = self.c[:, None] if G.ndim == 2 else self.c
            out = out + self.U @ (c * (self.U.T @ G))
        return out

    __matmul__ = matmat

    def dense(self) -> np.ndarray:
        """The operator as a dense array (small n only)."""
        D = self.sparse.toarray()
        if self.c.size:
            D += (self.U * self.c) @ self.U.T
        return D

    @property
    def is_sparse(self) -> bool:
        return self.c.size == 0

    def __add__(self, other: "SymOperator") -> "SymOperator":
        if not isinstance(other, SymOperator):
            return NotImplemented
        U = np.hstack([self.U.reshape(self.n, -1), other.U.reshape(self.n, -1)])
        return SymOperator(self.n, (self.sparse + other.sparse).tocsr(), U,
                           np.concatenate([self.c, other.c]))

    def linear_operator(self):
        """A ``scipy.sparse.linalg.LinearOperator`` (for ``eigsh``)."""
        from scipy.sparse.linalg import LinearOperator

        return LinearOperator((self.n, self.n), matvec=self.matmat, matmat=self.matmat,
                              rmatvec=self.matmat, dtype=float)

    @classmethod
    def zero(cls, n: int) -> "SymOperator":
        return cls(n, sp.csr_matrix((n, n)), np.zeros((n, 0)), np.zeros(0))


def sym_sum(n: int, parts: list[SymOperator]) -> SymOperator:
    """The sum of several operators (zero when ``parts`` is empty)."""
    out = SymOperator.zero(n)
    for p in parts:
        out = out + p
    return out


class LinearMap(ABC):
    """``A: S^n -> R^size``; see the module docstring."""

    n: int

    @property
    @abstractmethod
    def size(self) -> int:
        """Number of rows (scalars) the map produces."""

    @abstractmethod
    def apply(self, K: "np.ndarray | LowRank") -> np.ndarray:
        """``A(K)`` for a dense ``K`` or a factor, as a float array of length ``size``."""

    @abstractmethod
    def adjoint_op(self, w: Any) -> SymOperator:
        """``A*(w) = sum_p w_p A_p`` as a :class:`SymOperator`."""

    @abstractmethod
    def cvx(self, K: Any) -> Any:
        """``A(K)`` as a CVXPY expression of shape ``(size,)`` for an ``n x n`` variable."""

    @abstractmethod
    def functionals(self, B: np.ndarray) -> np.ndarray:
        """Rows ``a_p`` (shape ``(size, k * k)``) with ``a_p . vec(Y) = A(B Y B^T)_p``.

        ``vec`` is CVXPY's column-major one; ``Y`` is symmetric, so each row is the
        symmetrised ``B^T A_p B`` flattened.  Used when the kernel is ``K = B Y B^T``.
        """

    @abstractmethod
    def describe(self) -> str:
        """A short phrase for messages and reports, e.g. ``"K_ij over 120 pairs"``."""

    def adjoint(self, w: Any) -> sp.csr_matrix:
        """``A*(w)`` as a sparse matrix; a map with a dense adjoint raises."""
        op = self.adjoint_op(w)
        if not op.is_sparse:
            raise ProblemError(f"the adjoint of {self.describe()} is dense; use adjoint_op")
        return op.sparse

    def _weights(self, w: Any) -> np.ndarray:
        w = np.broadcast_to(np.asarray(w, dtype=float), (self.size,))
        return np.ascontiguousarray(w)

    # ---- structure queries (used by solvers to recognise what they can handle) ----
    @property
    def is_entries(self) -> bool:
        """True when every row is an entry ``K_ij``."""
        return False

    @property
    def is_distances(self) -> bool:
        """True when every row is a squared distance ``K_ii + K_jj - 2 K_ij``."""
        return False


# --------------------------------------------------------------------- pair rows
@dataclass(frozen=True, eq=False)
class PairMap(LinearMap):
    """Rows over index pairs: ``K_ij`` (kind ENTRY; ``i == j`` gives a diagonal entry) or
    ``K_ii + K_jj - 2 K_ij`` (kind DISTANCE, ``i != j``), in the given order.

    Build with :func:`Entries` / :func:`Distances`, or directly with a per-row ``kind``
    (Bregman constraint lists mix the two).
    """

    n: int
    i: np.ndarray
    j: np.ndarray
    kind: np.ndarray

    #: the declared parameter constraints (kernelforms.model.checks), checked on construction
    parameter_constraints: ClassVar[dict] = {"n": Count(), "i": Indices(1), "j": Indices(1)}

    def __post_init__(self) -> None:
        pc = self.parameter_constraints
        n = pc["n"].check("PairMap", "n", self.n)
        i = pc["i"].check("PairMap", "i", np.ravel(self.i) if isinstance(self.i, np.ndarray) else self.i, n)
        j = pc["j"].check("PairMap", "j", np.ravel(self.j) if isinstance(self.j, np.ndarray) else self.j, n)
        if i.shape != j.shape:
            raise ProblemError(f"The 'j' parameter of PairMap must have the length of 'i' ({len(i)}). "
                               f"Got {len(j)} indices instead.")
        kind = None
        try:
            ka = np.asarray(self.kind)
            whole = ka.dtype.kind in "iu" or (ka.dtype.kind == "f" and bool(np.all(ka == np.round(ka))))
            if whole and ka.ndim <= 1:
                kind = np.broadcast_to(ka.astype(np.int64).ravel() if ka.ndim else ka.astype(np.int64),
                                       i.shape).copy()
        except (TypeError, ValueError, OverflowError):
            kind = None
        if kind is None or not np.all(np.isin(kind, (DISTANCE, ENTRY))):
            raise ProblemError("The 'kind' parameter of PairMap must be DISTANCE (0) or ENTRY (1), one "
                               f"value or one per row. Got {self.kind!r} instead.")
        if np.any((kind == DISTANCE) & (i == j)):
            k = int(np.flatnonzero((kind == DISTANCE) & (i == j))[0])
            raise ProblemError(f"PairMap: the distance row {k} joins point {int(i[k])} to itself; a "
                               "distance row needs i != j.")
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "i", _freeze(i))
        object.__setattr__(self, "j", _freeze(j))
        object.__setattr__(self, "kind", _freeze(kind))
        object.__setattr__(self, "_dist", _freeze(kind == DISTANCE))

    @property
    def size(self) -> int:
        return len(self.i)

    @property
    def pairs(self) -> np.ndarray:
        """The rows as an ``(size, 2)`` index array."""
        return np.stack([self.i, self.j], axis=1)

    @property
    def is_entries(self) -> bool:
        return not bool(np.any(self._dist))

    @property
    def is_distances(self) -> bool:
        return bool(np.all(self._dist))

    @property
    def is_diagonal(self) -> bool:
        """True when every row is a diagonal entry ``K_ii``."""
        return self.is_entries and bool(np.all(self.i == self.j))

    def apply(self, K: "np.ndarray | LowRank") -> np.ndarray:
        if self.size == 0:
            return np.zeros(0)
        i, j, dist = self.i, self.j, self._dist
        if isinstance(K, LowRank):
            G = K.G
            if self.is_entries:
                return np.einsum("ij,ij->i", G[i], G[j])
            if self.is_distances:
                D = G[i] - G[j]
                return np.einsum("ij,ij->i", D, D)
            out = np.einsum("ij,ij->i", G[i], G[j])
            D = G[i[dist]] - G[j[dist]]
            out[dist] = np.einsum("ij,ij->i", D, D)
            return out
        K = np.asarray(K)
        out = K[i, j].astype(float)
        if np.any(dist):
            a, b = i[dist], j[dist]
            out[dist] = K[a, a] + K[b, b] - 2 * K[a, b]
        return out

    def adjoint_op(self, w: Any) -> SymOperator:
        w = self._weights(w)
        i, j, dist = self.i, self.j, self._dist
        ent = ~dist
        half = 0.5 * w[ent]
        rows = [i[ent], j[ent]]
        cols = [j[ent], i[ent]]
        data = [half, half]
        if np.any(dist):
            a, b, v = i[dist], j[dist], w[dist]
            rows += [a, b, a, b]
            cols += [a, b, b, a]
            data += [v, v, -v, -v]
        S = sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(self.n, self.n))
        S.sum_duplicates()
        return SymOperator(self.n, S, np.zeros((self.n, 0)), np.zeros(0))

    def cvx(self, K: Any) -> Any:
        import cvxpy as cp

        i, j = self.i, self.j
        if self.is_entries:
            return K[i, j]
        if self.is_distances:
            return K[i, i] + K[j, j] - 2 * K[i, j]
        e = self._dist.astype(float)
        return cp.multiply(e, K[i, i] + K[j, j]) + cp.multiply(1 - 3 * e, K[i, j])

    def functionals(self, B: np.ndarray) -> np.ndarray:
        B = np.asarray(B, dtype=float)
        k = B.shape[1]
        if self.size == 0:
            return np.zeros((0, k * k))
        bi, bj = B[self.i], B[self.j]
        out = np.empty((self.size, k, k))
        ent = ~self._dist
        if np.any(ent):
            o = np.einsum("pa,pb->pab", bi[ent], bj[ent])
            out[ent] = 0.5 * (o + o.transpose(0, 2, 1))
        if np.any(self._dist):
            d = bi[self._dist] - bj[self._dist]
            out[self._dist] = np.einsum("pa,pb->pab", d, d)
        return out.reshape(self.size, -1, order="F")

    def describe(self) -> str:
        if self.is_diagonal:
            return f"K_ii over {self.size} points"
        if self.is_entries:
            return f"K_ij over {self.size} pairs"
        if self.is_distances:
            return f"K_ii + K_jj - 2 K_ij over {self.size} pairs"
        nd = int(self._dist.sum())
        return f"{nd} distances and {self.size - nd} entries of K"

    def take(self, rows: Any) -> "PairMap":
        """The map restricted to some rows (a boolean mask or indices), in their order."""
        return PairMap(self.n, self.i[rows], self.j[rows], self.kind[rows])


def Entries(n: int, pairs: Any) -> PairMap:
    """``K_ij`` for every row ``(i, j)`` of ``pairs`` (an ``(p, 2)`` array; ``i == j`` allowed)."""
    pc = Entries.parameter_constraints
    n = pc["n"].check("Entries", "n", n)
    P = pc["pairs"].check("Entries", "pairs", pairs, n)
    return PairMap(n, P[:, 0], P[:, 1], ENTRY)


def Distances(n: int, pairs: Any) -> PairMap:
    """``K_ii + K_jj - 2 K_ij`` for every row ``(i, j)`` of ``pairs`` (``i != j``)."""
    pc = Distances.parameter_constraints
    n = pc["n"].check("Distances", "n", n)
    P = pc["pairs"].check("Distances", "pairs", pairs, n)
    return PairMap(n, P[:, 0], P[:, 1], DISTANCE)


def Diagonal(n: int, indices: Any = None) -> PairMap:
    """``K_ii`` for the given points (all by default)."""
    pc = Diagonal.parameter_constraints
    n = pc["n"].check("Diagonal", "n", n)
    idx = pc["indices"].check("Diagonal", "indices", indices, n)
    if idx is None:
        idx = np.arange(n, dtype=np.int64)
    return PairMap(n, idx, idx, ENTRY)


Entries.parameter_constraints = {"n": Count(), "pairs": Indices(2)}  # type: ignore[attr-defined]
Distances.parameter_constraints = {"n": Count(), "pairs": Indices(2)}  # type: ignore[attr-defined]
Diagonal.parameter_constraints = {"n": Count(), "indices": Indices(1, allow_none=True)}  # type: ignore[attr-defined]


# --------------------------------------------------------------------- inner products
class _OneRow(LinearMap):
    """A map with one row, ``<M, K>`` for some symmetric ``M``."""

    @property
    def size(self) -> int:
        return 1

    @staticmethod
    def _row(value: float) -> np.ndarray:
        return np.array([float(value)])

    @staticmethod
    def _cvx_row(expr: Any) -> Any:
        import cvxpy as cp

        return cp.reshape(expr, (1,), order="F")

    def _scalar(self, w: Any) -> float:
        return float(self._weights(w)[0])


@dataclass(frozen=True, eq=False)
class Inner(_OneRow):
    """One row: ``<M, K> = tr(M K)`` for a sparse symmetric ``M`` (e.g. a Laplacian)."""

    M: Any

    parameter_constraints: ClassVar[dict] = {"M": SymmetricMatrix()}

    def __post_init__(self) -> None:
        M = self.parameter_constraints["M"].check("Inner", "M", self.M)
        if M.nnz:
            asym = abs(M - M.T)
            if asym.nnz and asym.max() > 1e-10 * max(1.0, abs(M).max()):
                raise ProblemError("The 'M' parameter of Inner must be symmetric; the largest "
                                   f"|M - M^T| entry is {float(asym.max()):.3g}. Pass (M + M.T) / 2.")
        object.__setattr__(self, "M", M)
        object.__setattr__(self, "n", M.shape[0])

    def apply(self, K: "np.ndarray | LowRank") -> np.ndarray:
        if isinstance(K, LowRank):
            return self._row(K.trace_with(self.M))
        return self._row(self.M.multiply(np.asarray(K)).sum())

    def adjoint_op(self, w: Any) -> SymOperator:
        return SymOperator(self.n, (self.M * self._scalar(w)).tocsr(), np.zeros((self.n, 0)), np.zeros(0))

    def cvx(self, K: Any) -> Any:
        import cvxpy as cp

        return self._cvx_row(cp.sum(cp.multiply(self.M, K)))

    def functionals(self, B: np.ndarray) -> np.ndarray:
        B = np.asarray(B, dtype=float)
        C = B.T @ (self.M @ B)
        return (0.5 * (C + C.T)).reshape(1, -1, order="F")

    def describe(self) -> str:
        return f"<M, K> (M with {self.M.nnz} nonzeros)"


@dataclass(frozen=True, eq=False)
class Trace(_OneRow):
    """One row: ``tr(K)``."""

    n: int

    parameter_constraints: ClassVar[dict] = {"n": Count()}

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", self.parameter_constraints["n"].check("Trace", "n", self.n))

    def apply(self, K: "np.ndarray | LowRank") -> np.ndarray:
        return self._row(K.trace() if isinstance(K, LowRank) else np.trace(K))

    def adjoint_op(self, w: Any) -> SymOperator:
        return SymOperator(self.n, sp.identity(self.n, format="csr") * self._scalar(w),
                           np.zeros((self.n, 0)), np.zeros(0))

    def cvx(self, K: Any) -> Any:
        import cvxpy as cp

        return self._cvx_row(cp.trace(K))

    def functionals(self, B: np.ndarray) -> np.ndarray:
        B = np.asarray(B, dtype=float)
        return (B.T @ B).reshape(1, -1, order="F")

    def describe(self) -> str:
        return "tr(K)"


@dataclass(frozen=True, eq=False)
class TotalSum(_OneRow):
    """One row: ``1^T K 1 = sum_ij K_ij`` (zero for a centred kernel)."""

    n: int

    parameter_constraints: ClassVar[dict] = {"n": Count()}

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", self.parameter_constraints["n"].check("TotalSum", "n", self.n))

    def apply(self, K: "np.ndarray | LowRank") -> np.ndarray:
        return self._row(K.total_sum() if isinstance(K, LowRank) else np.sum(K))

    def adjoint_op(self, w: Any) -> SymOperator:
        return SymOperator(self.n, sp.csr_matrix((self.n, self.n)), np.ones((self.n, 1)),
                           np.array([self._scalar(w)]))

    def cvx(self, K: Any) -> Any:
        import cvxpy as cp

        return self._cvx_row(cp.sum(K))

    def functionals(self, B: np.ndarray) -> np.ndarray:
        s = np.asarray(B, dtype=float).sum(axis=0)
        return np.outer(s, s).reshape(1, -1, order="F")

    def describe(self) -> str:
        return "sum_ij K_ij"
