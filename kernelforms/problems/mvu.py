"""Maximum variance unfolding: MVU (P4) and RegMVU (P5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..errors import ProblemError, param_error
from ..result import as_kernel
from ..model.kinds import Boolean
from .base import Problem, check_basis, check_basis_size, check_int, check_positive, sq_distances
from .schema import Param, count, positive


#: largest edge distance MVU accepts: the solvers square and sum these (n^2 d^2 must stay
#: far below float64's 1.8e308)
MAX_DISTANCE = 1e100


def _check_edges(owner: str, edges: Any, distances: Any, n: Any) -> tuple[np.ndarray, np.ndarray, int]:
    n = check_int(owner, "n", n, low=2)
    if isinstance(edges, (str, bytes)):
        raise param_error(owner, "edges", "an int array of shape (e, 2)", type(edges).__name__)
    try:
        E = np.asarray(edges)
    except (TypeError, ValueError) as exc:
        raise param_error(owner, "edges", "an int array of shape (e, 2)", type(edges).__name__) from exc
    from ..data.graphs import reject_complex

    reject_complex(owner, "distances", distances)
    try:
        if isinstance(distances, (str, bytes)):
            raise TypeError(type(distances).__name__)
        d = np.asarray(distances, dtype=float)
    except (TypeError, ValueError) as exc:
        raise param_error(owner, "distances", "a float array of shape (e,)",
                          type(distances).__name__) from exc
    if E.ndim != 2 or E.shape[1] != 2 or E.shape[0] == 0:
        raise param_error(owner, "edges", "a non-empty int array of shape (e, 2)", E.shape)
    if E.dtype == bool or E.dtype.kind not in "iuf":
        if E.dtype.kind != "O":
            raise param_error(owner, "edges", "integer point indices", f"dtype {E.dtype}")
        try:
            E = E.astype(float)
        except (TypeError, ValueError) as exc:
            raise param_error(owner, "edges", "integer point indices", "non-numeric values") from exc
    if not np.issubdtype(E.dtype, np.integer):
        if not (np.all(np.isfinite(E)) and np.all(E == np.round(E)) and np.all(np.abs(E) < 2.0**62)):
            raise param_error(owner, "edges", "integer point indices", "non-integer values")
    E = E.astype(np.int64)
    if d.shape != (E.shape[0],):
        raise param_error(owner, "distances", f"a float array of shape ({E.shape[0]},)", d.shape)
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise param_error(owner, "distances", "finite and >= 0", "NaN, inf or negative values")
    if d.size and float(d.max()) > MAX_DISTANCE:
        raise ProblemError(
            f"{owner}: the largest distance is {float(d.max()):.3g}; MVU works with squared "
            f"distances and their sums, which overflow float64 above {MAX_DISTANCE:.0e}. "
            "Rescale the data (kernelforms.datasets.scale(X), or X / abs(X).max()); the "
            "optimal kernel scales with the square of the factor.")
    if E.min() < 0 or E.max() >= n:
        raise ProblemError(f"{owner}: an edge index is outside [0, {n - 1}] (n = {n}).")
    if np.any(E[:, 0] == E[:, 1]):
        raise ProblemError(f"{owner}: an edge joins a point to itself; remove self loops.")
    E = np.sort(E, axis=1)
    E, first, inv = np.unique(E, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if len(E) < len(d):
        # an edge listed twice is fine only with the same distance
        spread = np.zeros(len(E))
        np.maximum.at(spread, inv, np.abs(d - d[first][inv]))
        if np.any(spread > 1e-12 * max(1.0, float(d.max()))):
            k = int(np.argmax(spread))
            raise ProblemError(
                f"{owner}: edge ({int(E[k, 0])}, {int(E[k, 1])}) is listed more than once with "
                "different distances; list each edge once ((i, j) and (j, i) are the same edge)."
            )
    d = d[first]
    # components over the points the edges touch, plus the untouched points (each one a
    # component): O(e) memory, whatever n (n = 2**40 points allocated terabytes before)
    touched, inv = np.unique(E, return_inverse=True)
    inv = inv.reshape(E.shape)
    t = len(touched)
    A = sp.coo_matrix((np.ones(len(E)), (inv[:, 0], inv[:, 1])), shape=(t, t))
    ncomp = connected_components(A, directed=False)[0] + (n - t)
    if ncomp > 1:
        alone = f" ({n - t} of the n = {n} points are on no edge)" if n > t else ""
        raise ProblemError(
            f"{owner}: the neighbour graph has {ncomp} connected components{alone}, so maximising "
            "tr(K) is unbounded (components can drift apart). Increase k or join the components."
        )
    E.flags.writeable = False
    d.flags.writeable = False
    return E, d, n


@dataclass(frozen=True, eq=False, repr=False)
class MVU(Problem):
    """Maximum variance unfolding (docs/problems.md P4, Wu et al. 2009, eq. 1-4)::

        max  tr(K)  s.t.  sum_ij K_ij = 0,
                          K_ii + K_jj - 2 K_ij = d_ij^2  for every edge of N,   K PSD

    With ``equality=False`` the distance rows are ``K_ii + K_jj - 2 K_ij <= d_ij^2`` (Sun,
    Boyd, Xiao & Diaconis 2006): ``K = 0`` is then strictly feasible, so Slater's condition
    holds and bounded dual multipliers exist.  Build from data with :meth:`from_data`
    (symmetrised kNN graph, k = 4).
    """

    edges: Any
    distances: Any
    n_points: int
    equality: bool = True

    kind = "mvu"
    sense = "max"
    kind_help = {"mvu": "P4 MVU (k = 4)"}
    parameters = (
        count("k", 4, "neighbours in the kNN graph (1 <= k < n)", allow_none=True),
        Param("inequality", (Boolean(),), False,
              "distance rows <= d_ij^2 instead of == (Sun, Boyd, Xiao & Diaconis 2006; strictly "
              "feasible, so certifiable)"),
    )

    def __post_init__(self) -> None:
        E, d, n = _check_edges("MVU", self.edges, self.distances, self.n_points)
        object.__setattr__(self, "edges", E)
        object.__setattr__(self, "distances", d)
        object.__setattr__(self, "n_points", n)
        if not isinstance(self.equality, (bool, np.bool_)):
            raise param_error("MVU", "equality", "True (distance rows ==, the default) or False "
                              "(distance rows <=)", repr(self.equality))
        object.__setattr__(self, "equality", bool(self.equality))

    @property
    def n(self) -> int:
        return self.n_points

    @property
    def n_terms(self) -> int:
        return len(self.edges) + 1

    @classmethod
    def from_data(cls, X, *, k: int = 4, **params) -> "MVU":
        from ..data.graphs import knn_edges

        E, d = knn_edges(X, k=k)
        prob = cls(E, d, np.asarray(X).shape[0], **params)
        return prob.with_definition(f"{cls.__name__}.from_data", points=np.asarray(X, dtype=float),
                                    graph=("knn_edges", k))

    def declare(self):
        """Maximise ``tr(K)`` s.t. ``1^T K 1 = 0`` and ``d_K(i, j) = d_ij^2`` on the edges
        (``<= d_ij^2`` when ``equality`` is False)."""
        from ..model import PSD, Constraint, Declaration, Distances, LinearTerm, TotalSum, Trace

        rows = "==" if self.equality else "<="
        return Declaration(PSD(self.n), linear=(LinearTerm(Trace(self.n)),),
                           constraints=(Constraint(TotalSum(self.n), "==", 0.0),
                                        Constraint(Distances(self.n, self.edges), rows, self.distances**2)),
                           sense="max")

    def params(self) -> dict[str, Any]:
        # equality=True (P4's default) is not listed: instances built before the option
        # keep their fingerprints
        out = {"kind": "mvu", "n": self.n, "n_edges": int(len(self.edges))}
        if not self.equality:
            out["equality"] = False
        return out

    def _fingerprint_arrays(self):
        return [self.edges, self.distances]


def _basis_cut_tie(L: Any, vals: np.ndarray) -> dict[str, Any] | None:
    """Whether the basis (eigenvectors 2 .. m + 1 of the Laplacian ``L``, eigenvalues ``vals``)
    cuts through a repeated eigenvalue: eigenvalue m + 2 equals eigenvalue m + 1 within the
    tolerance of :func:`~kernelforms.data.graphs.smallest_eigenvectors`.  Then the basis is
    one choice among many and the optimum may depend on it.  Returns None, or the
    eigenvalue, its multiplicity, how many of its eigenvectors are in the basis, and the
    ``m_basis`` values just below and above its eigenspace.

    Only the eigenvalues next to the cut are computed (dense up to 200 rows, else
    shift-invert Lanczos at the cut), not the bottom of the spectrum again.
    """
    import scipy.sparse.linalg as ssla

    from ..data.graphs import EIG_CLUSTER_RTOL

    n, m = L.shape[0], len(vals)
    if m + 1 >= n:
        return None
    lam = float(vals[-1])
    tol = EIG_CLUSTER_RTOL * max(1.0, abs(lam))
    inside = int(np.sum(np.abs(vals - lam) <= tol))
    if n <= 200:
        near = np.linalg.eigvalsh(L.toarray())
    else:
        k = min(n - 2, inside + 4)
        v0 = np.random.default_rng(0).standard_normal(n)
        while True:
            near = ssla.eigsh(sp.csc_matrix(L), k=k, sigma=lam - 1e-6 * max(1.0, abs(lam)),
                              which="LM", v0=v0, return_eigenvectors=False)
            if np.sum(np.abs(near - lam) <= tol) < k or k == n - 2:
                break
            k = min(n - 2, 2 * k)
    total = int(np.sum(np.abs(near - lam) <= tol))
    if total <= inside:
        return None
    return {"eigenvalue": lam, "multiplicity": total, "inside": inside,
            "m_below": m - inside, "m_above": m - inside + total}


@dataclass(frozen=True, eq=False, repr=False)
class RegMVU(Problem):
    """Graph-Laplacian regularised MVU (docs/problems.md P5, Wu et al. 2009, eq. 11).

    ``Q`` = eigenvectors 2 .. m_basis+1 of the unnormalised Laplacian of the 0/1 kNN
    graph N, ``K = Q Y Q^T``::

        max  tr(Y) - nu * sum_{(i,j) in N} (K_ii - 2 K_ij + K_jj - d_ij^2)^2   over Y PSD

    The reported objective is this value (larger is better); ``tr(Y) = tr(K)`` since Q
    has orthonormal columns, and the objective is evaluated as ``tr(K) - nu * ...``.
    ``nu`` defaults to 1 (Wu et al. 2009 leave it free).
    """

    edges: Any
    distances: Any
    n_points: int
    m_basis: int = 10
    nu: float = 1.0
    basis: np.ndarray | None = field(default=None, repr=False)

    kind = "regmvu"
    sense = "max"
    kind_help = {"regmvu": "P5 RegMVU (m_basis, nu)"}
    parameters = (
        count("k", 4, "neighbours in the kNN graph (1 <= k < n)", allow_none=True),
        count("m_basis", 10, "basis size (1 <= m_basis < n)"),
        positive("nu", 1.0, "penalty on the distance residuals"),
    )

    def __post_init__(self) -> None:
        owner = "RegMVU"
        E, d, n = _check_edges(owner, self.edges, self.distances, self.n_points)
        object.__setattr__(self, "edges", E)
        object.__setattr__(self, "distances", d)
        object.__setattr__(self, "n_points", n)
        m = check_basis_size(owner, self.m_basis, n)
        object.__setattr__(self, "m_basis", m)
        object.__setattr__(self, "nu", check_positive(owner, "nu", self.nu))
        tie = None
        if self.basis is None:
            from ..data.graphs import smallest_eigenvectors, unnormalized_laplacian

            A = sp.coo_matrix((np.ones(len(E)), (E[:, 0], E[:, 1])), shape=(n, n)).tocsr()
            A = A + A.T
            L = unnormalized_laplacian(A)
            vals, Q = smallest_eigenvectors(L, m, skip=1)
            tie = _basis_cut_tie(L, vals)
        else:
            Q = check_basis(owner, self.basis, n, m)
        object.__setattr__(self, "basis_tie", tie)
        if tie is not None:
            import warnings

            from ..errors import ProblemWarning

            warnings.warn(
                f"RegMVU: the Laplacian's eigenvalue {tie['eigenvalue']:.6g} has multiplicity "
                f"{tie['multiplicity']} and straddles the basis cut: eigenvectors 2 .. "
                f"m_basis + 1 = {m + 1} take {tie['inside']} of its {tie['multiplicity']} "
                "eigenvectors, and which ones changes the optimum.  A fixed choice is made "
                "(the orthonormalised projection of fixed pseudo-random vectors onto the "
                "eigenspace; recorded as basis_tie in the problem's parameters); "
                f"m_basis = {tie['m_below']} or {tie['m_above']} takes none or all of them.",
                ProblemWarning, stacklevel=3)
        Q = np.ascontiguousarray(Q)
        Q.flags.writeable = False
        object.__setattr__(self, "basis", Q)

    @property
    def n(self) -> int:
        return self.n_points

    @property
    def n_terms(self) -> int:
        return len(self.edges)

    @classmethod
    def from_data(cls, X, *, k: int = 4, **params) -> "RegMVU":
        from ..data.graphs import knn_edges

        E, d = knn_edges(X, k=k)
        prob = cls(E, d, np.asarray(X).shape[0], **params)
        return prob.with_definition(f"{cls.__name__}.from_data", points=np.asarray(X, dtype=float),
                                    graph=("knn_edges", k))

    def distance_residuals(self, K: Any) -> np.ndarray:
        K = as_kernel(K, self.n)
        return sq_distances(K, self.edges) - self.distances**2

    def declare(self):
        """Maximise ``tr(K) - nu sum_N (d_K(i, j) - d_ij^2)^2`` over ``K = Q Y Q^T``, Y PSD."""
        from ..model import Basis, Declaration, Distances, LinearTerm, LossTerm, Squared, Trace

        return Declaration(Basis(self.basis), linear=(LinearTerm(Trace(self.n)),),
                           losses=(LossTerm(Distances(self.n, self.edges), Squared(self.distances**2),
                                            -self.nu),),
                           sense="max")

    def params(self) -> dict[str, Any]:
        out = {"kind": "regmvu", "n": self.n, "n_edges": int(len(self.edges)),
               "m_basis": self.m_basis, "nu": self.nu}
        tie = getattr(self, "basis_tie", None)
        if tie is not None:  # the basis is one choice among many: say so wherever params go
            out["basis_tie"] = (f"eigenvalue {tie['eigenvalue']:.6g} x{tie['multiplicity']}, "
                                f"{tie['inside']} in the basis (fixed choice)")
        return out

    def _fingerprint_arrays(self):
        return [self.edges, self.distances]

    def fingerprint(self) -> str:
        """As every problem's, without the ``basis_tie`` note: it follows from the inputs
        hashed already, and the instance keeps the fingerprint it had before the note."""
        return Problem.fingerprint(_WithoutNote(self))


class _WithoutNote:
    """What :meth:`Problem.fingerprint` reads of a RegMVU, its parameters without the note."""

    def __init__(self, problem: "RegMVU") -> None:
        self._problem = problem
        self._definition = getattr(problem, "_definition", None)
        self.kind = problem.kind

    def params(self) -> dict[str, Any]:
        return {k: v for k, v in self._problem.params().items() if k != "basis_tie"}

    def _fingerprint_arrays(self):
        return self._problem._fingerprint_arrays()
