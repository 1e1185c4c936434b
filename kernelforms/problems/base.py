"""The problem base class and the validation helpers every problem shares.

A problem is immutable, validated data.  It evaluates its own objective and
constraint violation on a kernel given either densely or as a
:class:`~kernelforms.result.LowRank` factor; the factor path costs
O(nnz(L) r + m r) and never forms an ``n x n`` matrix.
"""

from __future__ import annotations

import contextvars
import hashlib
import math
import numbers
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import scipy.sparse as sp

from ..errors import ProblemError, ProblemWarning, param_error
from ..util import as_rng  # noqa: F401  (re-exported: problems validate seeds with it)
from ..result import LowRank, as_kernel, spectrum_summary

Sense = Literal["min", "max"]

_ComplexWarning = getattr(getattr(np, "exceptions", np), "ComplexWarning", Warning)

#: dense Laplacians above this many points trigger a warning (sparse was expected)
DENSE_WARN_N = 2000
#: tolerance on the symmetry of a given Laplacian, relative to its largest entry
SYMMETRY_RTOL = 1e-10


def check_positive(owner: str, name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A finite float > 0 (or >= 0), else the standard ProblemError."""
    expected = "a float >= 0" if allow_zero else "a float > 0"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise param_error(owner, name, expected, value)
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise param_error(owner, name, expected, value)
    return v


def check_int(owner: str, name: str, value: Any, *, low: int, high: int | None = None) -> int:
    """An integer in ``[low, high]``, else the standard ProblemError."""
    rng = f"an int in [{low}, {high}]" if high is not None else f"an int >= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise param_error(owner, name, rng, value)
    v = int(value)
    if v < low or (high is not None and v > high):
        raise param_error(owner, name, rng, value)
    return v


def check_basis_size(owner: str, value: Any, n: int, *, name: str = "m_basis") -> int:
    """The size of an eigenvector basis: an int in ``[1, n - 1]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= n - 1:
        raise param_error(owner, name, f"an int in [1, n - 1] = [1, {n - 1}] (the basis size "
                          f"cannot exceed n - 1 for n = {n} points)", value)
    return int(value)


def check_choice(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (strings), else the standard ProblemError with close matches."""
    if not isinstance(value, str) or value not in choices:
        import difflib

        close = difflib.get_close_matches(str(value), choices, n=2)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ProblemError(
            f"The {name!r} parameter of {owner} must be one of {', '.join(map(repr, choices))}. "
            f"Got {value!r} instead.{hint}"
        )
    return value


#: the Laplacian a ``from_data`` has just built with ``knn_laplacian`` (PSD by construction:
#: ``(1 + delta) I - D^-1/2 S D^-1/2`` with ``S >= 0``): :func:`check_laplacian` skips the PSD
#: test for that very object (at a million points the test's 60 Lanczos steps took 4.6 s)
_BUILT_PSD: contextvars.ContextVar[Any] = contextvars.ContextVar("built_psd", default=None)


def check_laplacian(owner: str, L: Any, *, name: str = "laplacian") -> sp.csr_matrix:
    """Validate a graph Laplacian and return it as a read-only CSR matrix.

    Checks: 2-D and square, finite, symmetric (to ``SYMMETRY_RTOL`` relative),
    nonnegative diagonal ("degree").  A dense array above ``DENSE_WARN_N`` points warns.
    """
    if isinstance(L, LowRank):
        raise param_error(owner, name, "a square sparse or dense matrix", "LowRank")
    if sp.issparse(L):
        _check_real_dtype(owner, name, L.dtype)
        M = sp.csr_matrix(L, dtype=float, copy=True)
    else:
        if isinstance(L, (str, bytes)):
            raise param_error(owner, name, "a square numeric matrix", type(L).__name__)
        if isinstance(L, np.ndarray):
            _check_real_dtype(owner, name, L.dtype)
        try:
            with warnings.catch_warnings():
                # complex input is rejected below, not silently cast
                warnings.simplefilter("error", _ComplexWarning)
                raw = np.asarray(L)
                _check_real_dtype(owner, name, raw.dtype)
                arr = np.asarray(raw, dtype=float)
        except (TypeError, ValueError, OverflowError, _ComplexWarning) as exc:
            raise param_error(owner, name, "a square numeric matrix", type(L).__name__) from exc
        if arr.ndim != 2:
            raise ProblemError(
                f"The {name!r} parameter of {owner} must be a square 2-D matrix. "
                f"Got an array of shape {arr.shape} instead."
            )
        if arr.shape[0] > DENSE_WARN_N:
            warnings.warn(
                f"{owner}: {name!r} is a dense {arr.shape[0]} x {arr.shape[1]} array; "
                "pass a scipy.sparse matrix (kernelforms.graphs.knn_laplacian builds one) "
                "to keep memory O(nnz).",
                ProblemWarning,
                stacklevel=3,
            )
        M = sp.csr_matrix(arr)
    if M.shape[0] != M.shape[1]:
        raise ProblemError(
            f"The {name!r} parameter of {owner} must be square. Got shape {M.shape} instead."
        )
    if M.shape[0] < 2:
        raise ProblemError(f"The {name!r} parameter of {owner} must have n >= 2 rows. Got {M.shape}.")
    if M.nnz and not np.all(np.isfinite(M.data)):
        raise ProblemError(f"The {name!r} parameter of {owner} contains NaN or inf entries.")
    M.sum_duplicates()
    M.eliminate_zeros()
    scale = float(np.max(np.abs(M.data))) if M.nnz else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        asym = M - M.T
        worst = float(np.max(np.abs(asym.data))) if asym.nnz else 0.0
    if not worst <= SYMMETRY_RTOL * max(scale, 1.0):
        raise ProblemError(
            f"The {name!r} parameter of {owner} must be symmetric; the largest |L - L^T| entry "
            f"is {worst:.3g} (tolerance {SYMMETRY_RTOL:g} relative to the largest entry). "
            "Symmetrise it ((L + L.T) / 2) if that is round-off."
        )
    if worst > 0:
        # round-off asymmetry within the tolerance: use the symmetric part, which gives
        # the same tr(L K) for every symmetric K
        M = sp.csr_matrix((M + M.T) * 0.5)
        M.eliminate_zeros()
    d = M.diagonal()
    if np.any(d < 0):
        i = int(np.argmin(d))
        raise ProblemError(
            f"The {name!r} parameter of {owner} has a negative diagonal entry (degree) "
            f"L[{i},{i}] = {d[i]:.3g}; a graph Laplacian has a nonnegative diagonal."
        )
    M.sort_indices()
    if _BUILT_PSD.get() is not L:
        _check_psd_laplacian(owner, name, M)
    for arr in (M.data, M.indices, M.indptr):
        arr.flags.writeable = False
    return M


#: a Laplacian is rejected when it has an eigenvalue below -PSD_RTOL * max(1, max |L_ij|)
PSD_RTOL = 1e-8
#: Laplacians up to this many rows get a dense eigenvalue check
PSD_DENSE_N = 500
#: Lanczos steps of the PSD check above PSD_DENSE_N rows (O(steps * nnz + n * steps^2))
PSD_LANCZOS_STEPS = 60


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.einsum("i,i->", a, b))


def _lanczos_min_rayleigh(M: sp.csr_matrix, steps: int) -> float:
    """The Rayleigh quotient of the smallest Ritz vector of ``steps`` Lanczos steps (the
    three-term recurrence, a fixed random start): an upper bound on ``lambda_min(M)``
    that reaches it fast when the smallest eigenvalue is separated from the rest.  The
    quotient is recomputed from the vector, so lost orthogonality cannot make it wrong."""
    # einsum, not BLAS: a threaded ddot on a loaded 2-core machine cost 8 ms per call here
    n = M.shape[0]
    k = min(steps, n)
    Q = np.zeros((k, n))  # rows: the Lanczos vectors
    q = np.random.default_rng(0).standard_normal(n)
    Q[0] = q / math.sqrt(_dot(q, q))
    alpha: list[float] = []
    beta: list[float] = []
    for j in range(k):
        w = M @ Q[j]
        alpha.append(_dot(Q[j], w))
        w -= alpha[-1] * Q[j]
        if j:
            w -= beta[-1] * Q[j - 1]
        b = math.sqrt(_dot(w, w))
        if j + 1 == k or b <= 1e-12 * max(1.0, abs(alpha[-1])):
            break
        beta.append(b)
        Q[j + 1] = w / b
    m = len(alpha)
    T = np.diag(alpha) + np.diag(beta[:m - 1], 1) + np.diag(beta[:m - 1], -1)
    _, U = np.linalg.eigh(T)
    x = np.einsum("k,kn->n", U[:, 0], Q[:m])
    return _dot(x, M @ x) / _dot(x, x)


def _check_psd_laplacian(owner: str, name: str, M: sp.csr_matrix) -> None:
    """Reject a Laplacian with a negative eigenvalue (beyond round-off).

    Every method assumes ``tr(L K) >= 0``: with a negative eigenvalue the smooth problems
    are unbounded below along its eigenvector (a solver "converged" at -1.6e17) and the
    certificates' trace bounds no longer hold.  Cheapest test first, O(nnz) each:

    1. diagonal dominance ``L_ii >= sum_{j != i} |L_ij|`` (Gershgorin: PSD, done);
    2. every stored 2 x 2 principal minor ``L_ii L_jj - L_ij^2`` (a negative one proves
       an eigenvalue below 0);
    3. ``n <= PSD_DENSE_N``: the exact smallest eigenvalue; above, the smallest Rayleigh
       quotient of ``PSD_LANCZOS_STEPS`` Lanczos steps (an upper bound on it, so a
       rejection is always right; a negative eigenvalue buried in a cluster near 0 could
       pass).  A normalised kNN Laplacian of 40,000 points takes about 0.2 s.
    """
    n = M.shape[0]
    d = M.diagonal()
    absM = abs(M)
    off = np.asarray(absM.sum(axis=1)).ravel() - np.abs(d)
    scale = max(1.0, float(np.max(np.abs(M.data))) if M.nnz else 0.0)
    tol = PSD_RTOL * scale
    if np.all(d - off >= -tol):
        return
    fix = (f"A graph Laplacian (D - S, or the normalised I - D^-1/2 S D^-1/2 with S >= 0) is "
           f"positive semidefinite; build it with kernelforms.graphs.knn_laplacian, or add a "
           f"multiple of the identity (L + c I)")
    coo = M.tocoo()
    offd = coo.row != coo.col
    minor = d[coo.row[offd]] * d[coo.col[offd]] - coo.data[offd] ** 2
    if minor.size and float(np.min(minor)) < -tol * scale:
        k = int(np.argmin(minor))
        i, j = int(coo.row[offd][k]), int(coo.col[offd][k])
        raise ProblemError(
            f"The {name!r} parameter of {owner} must be positive semidefinite; its 2 x 2 principal "
            f"minor on rows ({i}, {j}) is L_ii L_jj - L_ij^2 = {float(minor[k]):.3g} < 0, so it has a "
            f"negative eigenvalue and tr(L K) is unbounded below. {fix}."
        )
    if n <= PSD_DENSE_N:
        lam = float(np.linalg.eigvalsh(M.toarray())[0])
        how = "its smallest eigenvalue is"
    else:
        lam = _lanczos_min_rayleigh(M, PSD_LANCZOS_STEPS)
        how = "a Rayleigh quotient x^T L x / x^T x (Lanczos) is"
    if lam < -tol:
        raise ProblemError(
            f"The {name!r} parameter of {owner} must be positive semidefinite; {how} {lam:.3g} "
            f"(tolerance -{tol:.1g}), so tr(L K) is unbounded below along its eigenvector. {fix}."
        )


def check_pairs(owner: str, pairs: Any, n: int, *, need: bool = True):
    """Coerce to :class:`~kernelforms.data.pairs.Pairs` and check indices against n.

    A :class:`Pairs` built for a different number of points (``pairs.n != n``) is an
    error: it was almost certainly drawn for another data set or subsample.
    """
    from ..data.pairs import Pairs

    if not isinstance(pairs, Pairs):
        if isinstance(pairs, tuple) and len(pairs) == 2:
            pairs = Pairs(pairs[0], pairs[1], n=n)
        else:
            raise param_error(owner, "pairs", "a Pairs(must, cannot) value or a (must, cannot) tuple",
                              type(pairs).__name__)
    if pairs.n is not None and pairs.n != n:
        raise ProblemError(
            f"The 'pairs' parameter of {owner} was built for n = {pairs.n} points, but the "
            f"problem has n = {n} points (the size of its Laplacian / data). Draw the pairs "
            "from the same points (e.g. sample_pairs(y) with the y of these points)."
        )
    pairs.check_n(n)
    if need and len(pairs) == 0:
        raise ProblemError(
            f"The 'pairs' parameter of {owner} is empty; this problem needs at least one "
            "must-link or cannot-link pair (kernelforms.pairs.sample_pairs draws some)."
        )
    return pairs


def _check_real_dtype(owner: str, name: str, dtype: Any) -> None:
    """Reject complex, string and other non-real dtypes (no silent casts)."""
    kind = np.dtype(dtype).kind
    if kind not in "biufO":
        raise param_error(owner, name, "a real numeric matrix", f"dtype {np.dtype(dtype)}")


def check_basis(owner: str, Q: Any, n: int, m: int, *, name: str = "basis",
                atol: float = 1e-6) -> np.ndarray:
    """An ``(n, m)`` finite array with orthonormal columns (``Q^T Q = I`` to ``atol``)."""
    try:
        Q = np.asarray(Q, dtype=float)
    except (TypeError, ValueError) as exc:
        raise param_error(owner, name, f"a float array of shape ({n}, {m})", type(Q).__name__) from exc
    if Q.shape != (n, m):
        raise param_error(owner, name, f"an array of shape ({n}, {m})", Q.shape)
    if not np.all(np.isfinite(Q)):
        raise param_error(owner, name, "an array of finite values", "NaN or inf entries")
    err = float(np.max(np.abs(Q.T @ Q - np.eye(m))))
    if not err <= atol:
        raise ProblemError(
            f"The {name!r} parameter of {owner} must have orthonormal columns (Q^T Q = I); "
            f"the largest |Q^T Q - I| entry is {err:.3g}. Orthonormalise it "
            "(numpy.linalg.qr) or leave it None to compute the eigenvectors."
        )
    return Q


def factor_from_kernel(owner: str, K0: Any, *, name: str = "K0", rtol: float = 1e-10) -> np.ndarray:
    """Validate a dense PSD kernel and return a full-column-rank factor ``G0`` (``K0 = G0 G0^T``).

    For problems given an input kernel instead of a factor (Bregman P7).  Raises
    :class:`ProblemError` when K0 is not square, not finite, not symmetric or not
    positive semidefinite (an eigenvalue below ``-rtol * max|eig|``), or is zero.
    Eigenvalues at or below ``rtol * max|eig|`` are dropped, so ``G0`` has
    ``r = rank(K0)`` columns.
    """
    if sp.issparse(K0):
        K0 = K0.toarray()
    try:
        A = np.asarray(K0, dtype=float)
    except (TypeError, ValueError) as exc:
        raise param_error(owner, name, "a square numeric matrix", type(K0).__name__) from exc
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise param_error(owner, name, "a square (n, n) matrix with n >= 2", A.shape)
    if not np.all(np.isfinite(A)):
        raise param_error(owner, name, "a matrix of finite values", "NaN or inf entries")
    scale = float(np.max(np.abs(A)))
    if float(np.max(np.abs(A - A.T))) > SYMMETRY_RTOL * max(scale, 1.0):
        raise ProblemError(f"The {name!r} parameter of {owner} must be symmetric; the largest "
                           f"|K0 - K0^T| entry is {float(np.max(np.abs(A - A.T))):.3g}.")
    lam, V = np.linalg.eigh((A + A.T) / 2)
    top = float(np.max(np.abs(lam)))
    if top == 0:
        raise ProblemError(f"The {name!r} parameter of {owner} is the zero matrix; a kernel "
                           "needs rank >= 1.")
    if lam[0] < -rtol * top:
        raise ProblemError(
            f"The {name!r} parameter of {owner} must be positive semidefinite; its smallest "
            f"eigenvalue is {lam[0]:.3g} (largest {lam[-1]:.3g}). Clip the negative "
            "eigenvalues or add a multiple of the identity."
        )
    keep = lam > rtol * top
    return V[:, keep] * np.sqrt(lam[keep])


def check_constraints_in_range(owner: str, G0: np.ndarray, constraints: Any, *,
                               rtol: float = 1e-10) -> None:
    """Reject linear constraints that no kernel with ``range(K) ⊆ range(K0)`` can meet.

    With ``K = G0 W G0^T``, the entry ``K_ij`` vanishes for every W when row i (or j)
    of ``G0`` is zero, and the distance ``K_ii + K_jj - 2 K_ij`` vanishes when rows i
    and j of ``G0`` are equal.  Such a constraint is then ``0 <sense> bound``: an error
    when it fails (e.g. ``d_K(i, j) >= l > 0`` for two points K0 cannot tell apart),
    and a projection onto it would divide by zero.  Also rejects ``d_K(i, j) <= u``
    with ``u < 0`` (distances are nonnegative).  ``constraints`` is a
    :class:`~kernelforms.problems.bregman.LinearConstraints`.
    """
    from ..model import DISTANCE, EQ, GE, LE

    G0 = np.asarray(G0, dtype=float)
    c = constraints
    if len(c) == 0:
        return
    rownorm = np.sqrt(np.einsum("ij,ij->i", G0, G0))
    tiny = rtol * max(float(rownorm.max()), 1e-300)
    dist = c.kind == DISTANCE
    diff = np.sqrt(np.sum((G0[c.i] - G0[c.j]) ** 2, axis=1))
    dead = np.where(dist, diff <= tiny, (rownorm[c.i] <= tiny) | (rownorm[c.j] <= tiny))
    fails = ((c.sense == LE) & (c.bound < 0)) | ((c.sense == GE) & (c.bound > 0)) \
        | ((c.sense == EQ) & (c.bound != 0))
    neg_dist = dist & (c.sense == LE) & (c.bound < 0)
    bad = (dead & fails) | neg_dist
    if np.any(bad):
        k = int(np.argmax(bad))
        what = "d_K" if dist[k] else "K"
        op = {LE: "<=", GE: ">=", EQ: "=="}[int(c.sense[k])]
        why = ("distances are nonnegative" if neg_dist[k] and not dead[k] else
               f"it is 0 for every K with range(K) ⊆ range(K0) ("
               + ("rows i and j of G0 are equal" if dist[k] else "a row of G0 is zero") + ")")
        raise ProblemError(
            f"{owner}: constraint {k} ({what}({int(c.i[k])}, {int(c.j[k])}) {op} "
            f"{float(c.bound[k]):.6g}) cannot be met: {why}; {int(bad.sum())} constraint(s) "
            "like it. Remove them or use an input kernel K0 whose range separates these points."
        )


def _hash_value(h: Any, v: Any) -> None:
    """Feed one definition part into a hash, canonically: a whole number the same whatever
    its type (``5``, ``5.0``, ``np.int64(5)``), other reals by their exact bits, arrays by
    shape and values (reals as float64, integers as int64), pairs by their index arrays, a
    numpy Generator by its state, anything else by ``repr``."""
    if v is None or isinstance(v, (bool, np.bool_, str)):
        h.update(repr(v if not isinstance(v, np.bool_) else bool(v)).encode())
        return
    if isinstance(v, (numbers.Integral, np.integer)):
        h.update(f"n{int(v)}".encode())
        return
    if isinstance(v, (numbers.Real, np.floating)):
        x = float(v)
        if x.is_integer() and abs(x) < 2.0**53:
            h.update(f"n{int(x)}".encode())
        else:
            h.update(f"r{x.hex()}".encode())
        return
    if isinstance(v, np.random.Generator):
        h.update(repr(v.bit_generator.state).encode())
        return
    if hasattr(v, "must") and hasattr(v, "cannot"):  # Pairs
        _hash_value(h, np.asarray(v.must))
        _hash_value(h, np.asarray(v.cannot))
        return
    if sp.issparse(v):
        c = sp.csr_matrix(v, dtype=float)
        c.sum_duplicates()
        c.sort_indices()
        h.update(f"sparse{c.shape}".encode())
        for a in (c.data, c.indices.astype(np.int64), c.indptr.astype(np.int64)):
            _hash_value(h, a)
        return
    if isinstance(v, dict):
        h.update(f"dict{len(v)}".encode())
        for key in sorted(v):
            h.update(str(key).encode())
            _hash_value(h, v[key])
        return
    if isinstance(v, (tuple, list)) and not all(isinstance(x, (int, float)) for x in v):
        h.update(f"seq{len(v)}".encode())
        for x in v:
            _hash_value(h, x)
        return
    a = np.asarray(v)
    if a.dtype.kind in "biu":
        a = a.astype(np.int64)
    elif a.dtype.kind == "f":
        a = a.astype(np.float64)
    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())


def rank_rule(m: int, n: int) -> int:
    """The default rank of Hu & Kwok 2013 and 2015 (docs/problems.md): the largest r with r(r+1)/2 <= m, capped at n."""
    r = int((math.isqrt(8 * m + 1) - 1) // 2)
    return max(1, min(r, n))


@dataclass(frozen=True)
class Evaluation:
    """The problem's yardstick applied to one kernel."""

    objective: float
    violation: float
    min_eig: float
    rank: int


class Problem(ABC):
    """Base class of the seven problems of docs/problems.md, and of problems of your own.

    Subclasses are frozen dataclasses; they validate in ``__post_init__``, state themselves
    in :meth:`declare` (a :class:`~kernelforms.model.Declaration`) and give :attr:`n` and
    :meth:`params`.  Objective, violation, every formulation, solver and the certificate
    follow from the declaration.
    """

    #: short name used by the CLI and the registry ("pcp", "mvu", ...)
    kind: ClassVar[str] = ""
    #: "min" or "max"
    sense: ClassVar[Sense] = "min"

    @property
    @abstractmethod
    def n(self) -> int:
        """Number of points."""

    @property
    def n_terms(self) -> int:
        """``m`` of docs/problems.md: the number of terms in the constraint set (rank rule)."""
        return 0

    def default_rank(self) -> int:
        return rank_rule(self.n_terms, self.n)

    @abstractmethod
    def declare(self):
        """The problem as a :class:`~kernelforms.model.Declaration` (built once, see
        :attr:`declaration`)."""

    @cached_property
    def declaration(self):
        """The problem stated in the vocabulary of :mod:`kernelforms.model`: what every
        formulation, solver and the certificate read."""
        return self.declare()

    def objective(self, K: Any) -> float:
        """The objective of docs/problems.md at K (dense or :class:`LowRank`), evaluated
        from the declaration's terms."""
        return self.declaration.objective(as_kernel(K, self.n))

    def violation(self, K: Any) -> float:
        """Largest violation of the problem's constraints at K (PSD-ness excluded; see min_eig)."""
        return self.declaration.violation(as_kernel(K, self.n))

    def evaluate(self, K: Any) -> Evaluation:
        K = as_kernel(K, self.n)
        min_eig, rank = spectrum_summary(K)
        return Evaluation(float(self.objective(K)), float(self.violation(K)), min_eig, rank)

    def better(self, a: float, b: float) -> bool:
        """True when objective ``a`` is strictly better than ``b`` for this sense."""
        return a < b if self.sense == "min" else a > b

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """JSON-friendly parameters (no arrays) for reports."""

    def fingerprint(self) -> str:
        """A short hash of the instance: its kind, parameters and defining data, never how
        it was built (the CLI, a recipe, ``from_data`` or a grid give one fingerprint for one
        instance).

        The defining data is the most primitive form known: a problem built from points
        (``from_data``, which the CLI and recipes call too) hashes the points, the graph's
        parameters and its pairs (or, for Bregman, the labels and the seed that draw its
        constraints), never floats derived from them (a Laplacian's weights or an SVD factor
        change in their last bits with the BLAS build and thread count).  A problem given its
        matrices directly hashes those, which are then its definition.  Numbers are hashed
        by value (``5``, ``5.0`` and ``np.int64(5)`` alike), arrays by shape and values.
        """
        h = hashlib.sha1(b"kernelforms-instance/2")
        h.update(str(self.kind).encode())
        _hash_value(h, self.params())
        definition = getattr(self, "_definition", None)
        if definition is not None:
            _, parts = definition
            _hash_value(h, parts)
        else:
            _hash_value(h, list(self._fingerprint_arrays()))
        return h.hexdigest()[:16]

    def with_definition(self, builder: str, **parts: Any):
        """Record what this instance is defined by (for :meth:`fingerprint`); returns self.

        ``parts`` are the defining inputs in their canonical form (the raw points, the pairs,
        the graph's parameters; the problem's own parameters are hashed from
        :meth:`params` anyway); ``builder`` names the constructor for messages and is not
        part of the fingerprint.  Called by the ``from_data`` constructors.
        """
        object.__setattr__(self, "_definition", (str(builder), dict(parts)))
        return self

    def _fingerprint_arrays(self) -> list[np.ndarray]:
        return []

    def __repr__(self) -> str:
        """One line: the kind, its sizes and parameters, and the fingerprint (never the
        arrays; ``problem.laplacian``, ``problem.pairs``, ... hold those)."""
        return f"<{self.label}, fingerprint {self.fingerprint()}>"

    @property
    def label(self) -> str:
        """A one-line description for report headers."""
        p = ", ".join(f"{k}={v}" for k, v in self.params().items() if k != "kind")
        return f"{type(self).__name__}({p})"


class GraphPairsProblem(Problem):
    """Base of the problems given by a Laplacian and must-/cannot-link pairs (PCP, RegPCP, NPKL).

    Subclasses are dataclasses with ``laplacian`` and ``pairs`` fields; ``default_delta``
    is the Laplacian shift :meth:`from_data` uses (docs/problems.md: 0, and 0.01 for NPKL).
    """

    default_delta: ClassVar[float] = 0.0

    @property
    def n(self) -> int:
        return self.laplacian.shape[0]

    @classmethod
    def from_data(cls, X, pairs, *, k: int = 5, delta: float | None = None,
                  graph_method: str = "auto", **params):
        """Build L from data with :func:`kernelforms.graphs.knn_laplacian` (the defaults of
        docs/problems.md); ``graph_method`` is its neighbour search (``"exact"``, ``"approx"``
        or ``"auto"``: exact up to ``AUTO_EXACT_MAX`` points)."""
        from ..data.graphs import GRAPH_METHODS, _check_method, knn_laplacian

        check_choice(f"{cls.__name__}.from_data", "graph_method", graph_method, GRAPH_METHODS)
        d = cls.default_delta if delta is None else delta
        L = knn_laplacian(X, k=k, delta=d, method=graph_method)
        token = _BUILT_PSD.set(L)  # PSD by construction: no eigenvalue test
        try:
            prob = cls(L, pairs, **params)
        finally:
            _BUILT_PSD.reset(token)
        # the instance: the points and the graph's parameters (what L is computed from), the
        # pairs; the parameters are in params().  The search that built the graph is part of
        # it when approximate ("auto" is the search it resolves to at this n); the exact
        # search's tuple is the one instances had before the option (their fingerprints stay)
        return prob.with_definition(f"{cls.__name__}.from_data", points=np.asarray(X, dtype=float),
                                    graph=graph_definition(k, d, _check_method(
                                        f"{cls.__name__}.from_data", graph_method, L.shape[0])),
                                    pairs=prob.pairs)

    def _fingerprint_arrays(self):
        L = self.laplacian
        return [L.data, L.indices, L.indptr, self.pairs.must, self.pairs.cannot]


def graph_definition(k: int, delta: float, method: str) -> tuple:
    """The graph part of a ``from_data`` fingerprint: ``("knn_laplacian", k, delta)`` for the
    exact neighbour search, with ``"approx"`` appended for the approximate one (two graphs
    built by different searches are different instances)."""
    return ("knn_laplacian", k, delta) + (() if method == "exact" else (str(method),))


# ---------------------------------------------------------------- kernel access helpers
def entries(K: "np.ndarray | LowRank", idx: np.ndarray) -> np.ndarray:
    """``K[i, j]`` for the rows ``(i, j)`` of an index array of shape (p, 2)."""
    if idx.size == 0:
        return np.zeros(0)
    if isinstance(K, LowRank):
        return K.entries(idx[:, 0], idx[:, 1])
    return K[idx[:, 0], idx[:, 1]]


def diagonal(K: "np.ndarray | LowRank") -> np.ndarray:
    return K.diag() if isinstance(K, LowRank) else np.diagonal(K).copy()


def sq_distances(K: "np.ndarray | LowRank", idx: np.ndarray) -> np.ndarray:
    """``K_ii + K_jj - 2 K_ij`` for the pairs in idx."""
    if idx.size == 0:
        return np.zeros(0)
    if isinstance(K, LowRank):
        D = K.G[idx[:, 0]] - K.G[idx[:, 1]]
        return np.einsum("ij,ij->i", D, D)
    i, j = idx[:, 0], idx[:, 1]
    return K[i, i] + K[j, j] - 2 * K[i, j]
