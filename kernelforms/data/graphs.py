"""k-nearest-neighbour graphs, graph Laplacians and their bottom eigenvectors.

Conventions (docs/problems.md, "Conventions shared by all problems"):

- The symmetrised kNN graph has an edge ``{i, j}`` when j is among the k nearest
  neighbours of i *or* i among those of j (a point is never its own neighbour, even
  when duplicated).
- ``sigma`` = half of the mean distance from each point to its 10 nearest neighbours.
- ``S_ij = exp(-d_ij^2 / (2 sigma^2))`` on the graph's edges, ``D = diag(S 1)`` and
  ``L = (1 + delta) I - D^{-1/2} S D^{-1/2}``.

Everything is built from an edge list of ``O(n k)`` entries; no dense ``n x n`` array
is formed for data points.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from kernelforms.errors import ProblemError, param_error

__all__ = [
    "knn_edges",
    "knn_graph",
    "knn_adjacency",
    "gaussian_sigma",
    "knn_laplacian",
    "laplacian_from_weights",
    "unnormalized_laplacian",
    "smallest_eigenvectors",
]

_DENSE_EIG_MAX = 2000


def reject_complex(owner: str, name: str, value) -> None:
    """Raise ProblemError when ``value`` holds complex numbers (numpy would drop the
    imaginary part with only a warning)."""
    try:
        kind = np.asarray(value).dtype.kind
    except (TypeError, ValueError):
        return
    if kind == "c":
        raise ProblemError(f"{owner}: {name} must be real; it has complex values (kernelforms "
                           "never drops an imaginary part). Pass its real part, its modulus, or "
                           "the real and imaginary parts as separate features.")


def _as_points(X, owner: str) -> np.ndarray:
    if sp.issparse(X):
        raise ProblemError(
            f"{owner}: X must be a dense array of points (n, d); got a sparse matrix. "
            "Use X.toarray()."
        )
    reject_complex(owner, "X", X)
    try:
        raw = np.asarray(X)
        if raw.dtype.kind not in "biuf":
            raw = raw.astype(np.float64)  # lists, object arrays of numbers; strings fail here
        A = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ProblemError(f"{owner}: X must be a numeric array of shape (n, d): {exc}") \
            from exc
    if A.ndim != 2:
        raise ProblemError(f"{owner}: X must be 2-d (n points x d features); "
                           f"got shape {A.shape}.")
    if A.shape[0] < 2:
        raise ProblemError(f"{owner}: need at least 2 points; got {A.shape[0]}.")
    if A.shape[1] < 1:
        raise ProblemError(f"{owner}: X has no features (shape {A.shape}).")
    if not np.all(np.isfinite(A)):
        raise ProblemError(f"{owner}: X contains NaN or infinite values.")
    return A


def _unit_scale(X: np.ndarray) -> float:
    """A power of two ``s`` with ``max|s X|`` in [0.5, 1) (1.0 for a zero X).

    Neighbour searches square distances; scaling by a power of two is exact, keeps every
    neighbour ordering, and keeps those squares far from float64's overflow (X ~ 1e154)
    and underflow."""
    top = float(np.max(np.abs(X))) if X.size else 0.0
    if top == 0.0 or not np.isfinite(top):
        return 1.0
    return float(2.0 ** (-np.floor(np.log2(top)) - 1))


def _check_k(owner: str, k, n: int) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral) or k < 1 \
            or k >= n:
        raise param_error(owner, "k", f"an integer with 1 <= k < n = {n}", k)
    return int(k)


def _check_delta(owner: str, delta) -> float:
    if isinstance(delta, (bool, np.bool_)) or not isinstance(delta, numbers.Real) \
            or not np.isfinite(delta) or delta < 0:
        raise param_error(owner, "delta", "a finite float >= 0", delta)
    return float(delta)


def _pair_distances(X: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Exact Euclidean distances ||X[i] - X[j]||, in chunks (bounded memory)."""
    out = np.empty(len(i), dtype=np.float64)
    step = max(1, 2_000_000 // max(1, X.shape[1]))
    scale = _unit_scale(X)  # exact power of two: no overflow of the squares
    for s in range(0, len(i), step):
        diff = (X[i[s:s + step]] - X[j[s:s + step]]) * scale
        out[s:s + step] = np.sqrt(np.einsum("ij,ij->i", diff, diff)) / scale
    return out


#: ``knn_laplacian(method="auto")`` searches exactly up to this many points, approximately above
AUTO_EXACT_MAX = 200_000
#: the approximate search's ``eps`` (scipy's cKDTree): every returned neighbour is within
#: ``1 + APPROX_EPS`` times the distance of the true k-th nearest neighbour
APPROX_EPS = 1.0
GRAPH_METHODS = ("exact", "approx", "auto")


def _check_method(owner: str, method, n: int) -> str:
    """The search ``method`` resolved for ``n`` points ("exact" or "approx")."""
    if not isinstance(method, str) or method not in GRAPH_METHODS:
        raise param_error(owner, "method", 'one of "exact", "approx", "auto"', method)
    if method == "auto":
        return "exact" if n <= AUTO_EXACT_MAX else "approx"
    return method


def _neighbours(X: np.ndarray, k: int, method: str = "exact") -> tuple[np.ndarray, np.ndarray]:
    """The k nearest neighbours of every point, the point itself excluded.

    Returns ``(dist, ind)`` of shape (n, k), nearest first. A kd-tree (scipy's cKDTree) is
    queried in the tree's own point order, so consecutive queries visit the same leaves
    (about 1.5x faster than random order at a million points), on every core above 5,000
    points (one thread below: starting threads costs more than the search). The point
    itself is removed by index, so a duplicate of i still counts as a neighbour of i.

    ``method="exact"``: the true neighbours. ``"approx"``: the tree's (1 + eps)-approximate
    search (``eps = APPROX_EPS``): a branch is skipped when it cannot hold a point closer
    than the current k-th distance divided by ``1 + eps``, so every returned neighbour is
    within ``1 + eps`` times the true k-th nearest distance (Arya et al. 1998). In 10
    dimensions that skips most of the tree (two Gaussians: 7x less CPU at 100,000 points).
    Then one round of :func:`_refine` (the neighbours of the neighbours) finds more than half
    of the neighbours the tree missed; it only ever replaces a neighbour by a nearer one, so the
    ``1 + eps`` bound holds. Both steps give the same result whatever the thread count."""
    from scipy.spatial import cKDTree

    n = X.shape[0]
    eps = APPROX_EPS if method == "approx" else 0.0
    scale = _unit_scale(X)  # exact power of two: no overflow or underflow of the squares
    Xs = X * scale
    tree = cKDTree(Xs)
    order = tree.indices
    d_o, i_o = tree.query(Xs[order], k=k + 1, eps=eps, workers=-1 if n > 5000 else 1)
    d_o = np.asarray(d_o).reshape(n, k + 1)
    i_o = np.asarray(i_o, dtype=np.int64).reshape(n, k + 1)
    dist = np.empty_like(d_o)
    ind = np.empty_like(i_o)
    dist[order] = d_o
    ind[order] = i_o
    del d_o, i_o, tree
    # drop the point itself; where k + 1 duplicates hid it, drop the farthest instead
    own = ind == np.arange(n)[:, None]
    own[~own.any(axis=1), k] = True
    keep = ~own
    dist, ind = dist[keep].reshape(n, k), ind[keep].reshape(n, k)
    if method == "approx":
        dist, ind = _refine(Xs, ind)
    return dist / scale, ind


#: rows of :func:`_refine` per block (a block gathers ``block * (k + k^2) * d`` floats)
REFINE_BLOCK = 2048


def _refine(X: np.ndarray, ind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One round of neighbours-of-neighbours search (the local join of Dong et al. 2011).

    Each point's candidates are its k neighbours in ``ind`` and their k neighbours each; the
    k nearest distinct candidates other than the point itself (exact distances) are its new
    neighbours, nearest first (ties by index). The current neighbours are candidates, so no
    neighbour is replaced by a farther one. Vectorised over blocks of ``REFINE_BLOCK`` rows,
    the blocks on :func:`kernelforms._parallel.threads` threads; each row depends on ``ind``
    and ``X`` only, so the result does not depend on the thread count. Cost: ``n (k + k^2)``
    distances in ``d`` dimensions, about 0.2 CPU s per 10,000 points at k = 10, d = 10."""
    from concurrent.futures import ThreadPoolExecutor

    from .._parallel import threads

    n, k = ind.shape
    out_d = np.empty((n, k), dtype=np.float64)
    out_i = np.empty((n, k), dtype=np.int64)

    def block(s: int) -> None:
        rows = np.arange(s, min(n, s + REFINE_BLOCK))
        cur = ind[rows]
        cand = np.concatenate([cur, ind[cur].reshape(len(rows), k * k)], axis=1)
        cand.sort(axis=1)  # duplicates side by side, and ties later broken by index
        bad = np.empty(cand.shape, dtype=bool)
        bad[:, 0] = False
        np.equal(cand[:, 1:], cand[:, :-1], out=bad[:, 1:])
        bad |= cand == rows[:, None]
        diff = X[cand] - X[rows][:, None, :]
        d2 = np.einsum("ijk,ijk->ij", diff, diff)
        d2[bad] = np.inf
        # the k smallest (d2, index) pairs: a stable sort on d2 keeps the index order of ties
        pick = np.argsort(d2, axis=1, kind="stable")[:, :k]
        out_d[rows] = np.sqrt(np.take_along_axis(d2, pick, 1))
        out_i[rows] = np.take_along_axis(cand, pick, 1)

    starts = range(0, n, REFINE_BLOCK)
    t = min(threads(), len(starts))
    if t > 1:
        with ThreadPoolExecutor(t, thread_name_prefix="kernelforms-knn") as pool:
            list(pool.map(block, starts))
    else:
        for s in starts:
            block(s)
    return out_d, out_i


def knn_edges(X, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The symmetrised kNN graph as an edge list.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Points (finite, n >= 2).
    k : int, default 4
        Number of neighbours, ``1 <= k < n``.

    Returns
    -------
    edges : ndarray of shape (e, 2), int64
        Each edge once, ``i < j``, sorted lexicographically.
    dist : ndarray of shape (e,), float64
        Euclidean distances ``d_ij``, recomputed exactly per edge (0 for duplicate
        points).

    Raises
    ------
    ProblemError
        Bad ``X`` or ``k``.
    """
    A = _as_points(X, "knn_edges")
    n = A.shape[0]
    k = _check_k("knn_edges", k, n)
    _, ind = _neighbours(A, k)
    return _edges_from(A, ind)


def _edges_from(A: np.ndarray, ind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetrised edge list and exact distances from a (n, k) neighbour index array."""
    n, k = ind.shape
    rows = np.repeat(np.arange(n, dtype=np.int64), k)
    cols = ind.ravel().astype(np.int64)
    lo = np.minimum(rows, cols)
    hi = np.maximum(rows, cols)
    keys = np.unique(lo * n + hi)
    i, j = keys // n, keys % n
    edges = np.column_stack([i, j])
    return edges, _pair_distances(A, i, j)


def _symmetric_csr(n: int, i: np.ndarray, j: np.ndarray, w: np.ndarray) -> sp.csr_matrix:
    """CSR matrix with w at (i, j) and (j, i); explicit zeros are kept."""
    rows = np.concatenate([i, j])
    cols = np.concatenate([j, i])
    data = np.concatenate([w, w])
    M = sp.coo_matrix((data, (rows, cols)), shape=(n, n)).tocsr()
    M.sort_indices()
    return M


def knn_graph(X, k: int = 5) -> sp.csr_matrix:
    """The symmetrised kNN graph as a sparse distance matrix.

    Parameters
    ----------
    X : array-like of shape (n, d)
    k : int, default 5

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)
        Symmetric; entry ``(i, j)`` is ``d_ij`` for every edge. The sparsity
        *pattern* is the graph: an edge between duplicate points is stored as an
        explicit zero, which scipy arithmetic or ``eliminate_zeros`` would drop, so
        use :func:`knn_edges` or :func:`knn_adjacency` when that matters.
    """
    edges, dist = knn_edges(X, k)
    n = np.asarray(X).shape[0]
    return _symmetric_csr(n, edges[:, 0], edges[:, 1], dist)


def knn_adjacency(X, k: int = 4) -> sp.csr_matrix:
    """The 0/1 adjacency matrix of the symmetrised kNN graph (P5 uses it).

    Parameters
    ----------
    X : array-like of shape (n, d)
    k : int, default 4

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)
        Symmetric, 1.0 on every edge (also between duplicate points).
    """
    edges, dist = knn_edges(X, k)
    n = np.asarray(X).shape[0]
    return _symmetric_csr(n, edges[:, 0], edges[:, 1], np.ones_like(dist))


#: neighbours averaged for the Gaussian width (docs/problems.md: 10)
SIGMA_NEIGHBORS = 10


def gaussian_sigma(X, n_neighbors: int = SIGMA_NEIGHBORS) -> float:
    """Half of the mean distance from each point to its nearest neighbours.

    Parameters
    ----------
    X : array-like of shape (n, d)
    n_neighbors : int, default 10
        Clipped to ``n - 1`` when there are fewer other points.

    Returns
    -------
    float
        ``0.5 * mean_i mean_{j in N(i)} ||x_i - x_j||`` (the point itself excluded).

    Raises
    ------
    ProblemError
        If sigma would be 0 (every point has only duplicates among its neighbours).
    """
    A = _as_points(X, "gaussian_sigma")
    n = A.shape[0]
    if isinstance(n_neighbors, (bool, np.bool_)) or \
            not isinstance(n_neighbors, numbers.Integral) or n_neighbors < 1:
        raise param_error("gaussian_sigma", "n_neighbors", "an integer >= 1", n_neighbors)
    kk = min(int(n_neighbors), n - 1)
    _, ind = _neighbours(A, kk)
    return _sigma_from(A, ind)


def _sigma_from(A: np.ndarray, ind: np.ndarray) -> float:
    """Half the mean distance to the neighbours listed in ``ind`` (n, kk)."""
    n, kk = ind.shape
    rows = np.repeat(np.arange(n), kk)
    sigma = 0.5 * float(np.mean(_pair_distances(A, rows, ind.ravel())))
    if not sigma > 0:
        raise ProblemError(
            "gaussian_sigma: sigma is 0 because every point's nearest neighbours are "
            "duplicates of it. Remove duplicate points or pass sigma explicitly."
        )
    return sigma


def _graph_to_weights(G) -> sp.csr_matrix:
    import networkx as nx

    nodes = list(G.nodes)
    if set(nodes) == set(range(len(nodes))):
        nodes = list(range(len(nodes)))
    W = nx.to_scipy_sparse_array(G, nodelist=nodes, weight="weight", format="csr")
    return sp.csr_matrix(W, dtype=np.float64)


def _check_weights(W, owner: str) -> sp.csr_matrix:
    if sp.issparse(W):
        M = sp.csr_matrix(W, dtype=np.float64)
    else:
        try:
            A = np.asarray(W, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ProblemError(f"{owner}: W must be a numeric matrix: {exc}") from exc
        if A.ndim != 2:
            raise ProblemError(f"{owner}: W must be a square matrix; got shape {A.shape}.")
        M = sp.csr_matrix(A)
    n = M.shape[0]
    if M.shape[0] != M.shape[1]:
        raise ProblemError(f"{owner}: W must be square; got shape {M.shape}.")
    if n < 2:
        raise ProblemError(f"{owner}: need at least 2 nodes; got {n}.")
    if not np.all(np.isfinite(M.data)):
        raise ProblemError(f"{owner}: W contains NaN or infinite values.")
    if np.any(M.data < 0):
        raise ProblemError(f"{owner}: W must have non-negative weights.")
    asym = abs(M - M.T)
    scale = max(1.0, float(abs(M).max()) if M.nnz else 1.0)
    if asym.nnz and float(asym.max()) > 1e-10 * scale:
        raise ProblemError(f"{owner}: W must be symmetric (max |W - W^T| = "
                           f"{float(asym.max()):.3g}).")
    return M


def laplacian_from_weights(W, delta: float = 0.0, normalized: bool = True) -> sp.csr_matrix:
    """Graph Laplacian of a symmetric non-negative weight matrix.

    Parameters
    ----------
    W : scipy sparse matrix or array-like of shape (n, n)
        Symmetric, non-negative, finite. A diagonal (self loops) is used as given.
    delta : float, default 0.0
        Added to the diagonal (>= 0).
    normalized : bool, default True
        True: ``(1 + delta) I - D^{-1/2} W D^{-1/2}``; False: ``D + delta I - W``,
        with ``D = diag(W 1)``. Isolated nodes (degree 0) get ``D^{-1/2} = 0``.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)
    """
    delta = _check_delta("laplacian_from_weights", delta)
    M = _check_weights(W, "laplacian_from_weights")
    n = M.shape[0]
    deg = np.asarray(M.sum(axis=1)).ravel()
    if normalized:
        with np.errstate(divide="ignore"):
            dm = np.where(deg > 0, 1.0 / np.sqrt(deg), 0.0)
        C = M.tocoo()
        # d_i * d_j is commutative, so the result is exactly symmetric
        N = sp.csr_matrix((C.data * (dm[C.row] * dm[C.col]), (C.row, C.col)), shape=(n, n))
        L = sp.identity(n, format="csr") * (1.0 + delta) - N
    else:
        L = sp.diags(deg + delta) - M
    L = sp.csr_matrix(L)
    L.sort_indices()
    return L


def unnormalized_laplacian(A) -> sp.csr_matrix:
    """``D - A`` with ``D = diag(A 1)`` for a symmetric non-negative matrix A.

    Parameters
    ----------
    A : scipy sparse matrix or array-like of shape (n, n)
        For P5, the 0/1 kNN adjacency from :func:`knn_adjacency`.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)
    """
    return laplacian_from_weights(A, delta=0.0, normalized=False)


def knn_laplacian(X, k: int = 5, delta: float = 0.0, sigma: float | None = None, *,
                  weights: bool | None = None, method: str = "auto") -> sp.csr_matrix:
    """The normalised Laplacian of docs/problems.md on the symmetrised kNN graph.

    ``L = (1 + delta) I - D^{-1/2} S D^{-1/2}``, ``S_ij = exp(-d_ij^2 / (2 sigma^2))``
    on the edges of the symmetrised kNN graph, ``D = diag(S 1)``.

    Parameters
    ----------
    X : array-like (n, d), scipy sparse matrix, or networkx.Graph
        Dense array: data points (unless ``weights=True``). Sparse matrix: a symmetric
        weight matrix W, used as S. networkx Graph: S is its weighted adjacency (edge
        attribute ``'weight'``, default 1), nodes in ``range(n)`` order when they are
        0..n-1, else in ``G.nodes`` order.
    k : int, default 5
        Neighbours (1 <= k < n); ignored for weight input.
    delta : float, default 0.0
        Diagonal shift (>= 0).
    sigma : float, optional
        Gaussian width; default :func:`gaussian_sigma` of X. Not allowed with weight
        input.
    weights : bool, optional
        Force the interpretation of a dense ``X``: True means it is a weight matrix W
        (then S = W). By default a dense array is always taken as data points.
    method : {"auto", "exact", "approx"}, default "auto"
        The neighbour search for data points. ``"exact"``: the true k nearest neighbours
        (a kd-tree). ``"approx"``: a (1 + eps)-approximate kd-tree search
        (``eps = APPROX_EPS``; every neighbour returned is within ``1 + eps`` times the
        distance of the true k-th nearest) followed by one round of neighbours of
        neighbours, which only ever swaps a neighbour for a nearer one: much faster in 10 or
        more dimensions (two Gaussians, d = 10, a million points: 93 CPU s for the whole graph,
        about a minute on two cores, against 338-630 s of wall time for the exact search), a
        graph that shares most but not all of its edges with the exact one (there: 94% of the
        exact 10 nearest neighbours found; docs/admm.md, "A million points"). Deterministic:
        the same graph whatever the thread count.
        ``"auto"``: exact up to ``AUTO_EXACT_MAX`` = 200,000 points, approximate above.
        sigma (when not given) is computed from the same search. The problem is the one
        built from the graph returned: solvers and certificates are exact for it, whichever
        search built it (an approximate graph gives another problem, not a weaker
        certificate).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)
        Symmetric and positive semidefinite (definite when delta > 0).

    Raises
    ------
    ProblemError
        Bad k, delta, sigma or X (non-finite, fewer than 2 points, non-symmetric W).
    """
    delta = _check_delta("knn_laplacian", delta)
    if not isinstance(method, str) or method not in GRAPH_METHODS:
        raise param_error("knn_laplacian", "method", 'one of "exact", "approx", "auto"', method)
    is_graph = False
    try:
        import networkx as nx

        is_graph = isinstance(X, nx.Graph)
    except ImportError:  # pragma: no cover
        pass
    if is_graph or sp.issparse(X) or weights:
        if sigma is not None:
            raise ProblemError("knn_laplacian: sigma cannot be used with a weight "
                               "matrix or graph (S = W is used as given).")
        W = _graph_to_weights(X) if is_graph else X
        return laplacian_from_weights(W, delta=delta, normalized=True)
    A = _as_points(X, "knn_laplacian")
    n = A.shape[0]
    k = _check_k("knn_laplacian", k, n)
    method = _check_method("knn_laplacian", method, n)
    if sigma is not None and (isinstance(sigma, (bool, np.bool_))
                              or not isinstance(sigma, numbers.Real)
                              or not np.isfinite(sigma) or sigma <= 0):
        raise param_error("knn_laplacian", "sigma", "a finite float > 0 or None", sigma)
    # one neighbour search serves both the graph (k) and sigma (10 neighbours): the
    # search dominates the cost at large n
    ks = min(SIGMA_NEIGHBORS, n - 1)
    _, ind = _neighbours(A, max(k, ks) if sigma is None else k, method)
    if sigma is None:
        sigma = _sigma_from(A, ind[:, :ks])
    edges, dist = _edges_from(A, ind[:, :k])
    s = np.exp(-0.5 * (dist / float(sigma)) ** 2)  # ratio first: no overflow of dist**2
    S = _symmetric_csr(n, edges[:, 0], edges[:, 1], s)
    return laplacian_from_weights(S, delta=delta, normalized=True)


def _fix_signs(V: np.ndarray) -> np.ndarray:
    idx = np.argmax(np.abs(V), axis=0)
    sgn = np.sign(V[idx, np.arange(V.shape[1])])
    sgn[sgn == 0] = 1.0
    return V * sgn


#: eigenvalues closer than this (relative to the largest one computed, at least 1) are
#: one repeated eigenvalue for :func:`smallest_eigenvectors`
EIG_CLUSTER_RTOL = 1e-8


def _bottom_eigenpairs(M, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` smallest eigenpairs of the symmetric ``M`` (dense or sparse), ascending."""
    import scipy.linalg as sla
    import scipy.sparse.linalg as ssla

    n = M.shape[0]
    if n <= _DENSE_EIG_MAX or count >= n - 1:
        Ad = M.toarray() if sp.issparse(M) else M
        Ad = 0.5 * (Ad + Ad.T)
        return sla.eigh(Ad, subset_by_index=[0, count - 1])
    v0 = np.random.default_rng(0).standard_normal(n)
    try:
        vals, vecs = ssla.eigsh(sp.csc_matrix(M), k=count, sigma=-1e-3, which="LM", v0=v0)
    except (ssla.ArpackError, RuntimeError) as exc:
        raise ProblemError(f"smallest_eigenvectors: eigsh failed: {exc}") from exc
    order = np.argsort(vals)
    return vals[order], vecs[:, order]


def smallest_eigenvectors(L, m: int, skip: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The m smallest eigenpairs of a symmetric PSD matrix, after skipping some.

    Parameters
    ----------
    L : scipy sparse matrix or array-like of shape (n, n)
        Symmetric positive semidefinite (e.g. a graph Laplacian).
    m : int
        Number of eigenpairs returned (>= 1).
    skip : int, default 0
        Number of smallest eigenpairs skipped first (P5 skips the constant vector of
        the unnormalised Laplacian with ``skip=1``).

    Returns
    -------
    values : ndarray of shape (m,)
        Ascending.
    vectors : ndarray of shape (n, m)
        Orthonormal columns; each column's largest-magnitude entry is positive.

    Notes
    -----
    Dense ``scipy.linalg.eigh`` for n <= 2000, else ``scipy.sparse.linalg.eigsh`` in
    shift-invert mode around -1e-3 with a fixed start vector.  The span of the returned
    vectors is what a basis ``Q`` means to a problem; it is unique unless a repeated
    eigenvalue straddles a cut (the ``skip``-th or the ``(skip + m)``-th eigenvalue equals
    its neighbour within ``EIG_CLUSTER_RTOL``).  Then the columns from that eigenspace are
    a canonical choice, the orthonormalised projection of fixed pseudo-random vectors onto
    it, so that the result does not depend on the LAPACK build or thread count.
    """
    if sp.issparse(L):
        M = sp.csr_matrix(L, dtype=np.float64)
    else:
        try:
            M = np.asarray(L, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ProblemError(f"smallest_eigenvectors: L must be numeric: {exc}") from exc
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] < 1:
        raise ProblemError(f"smallest_eigenvectors: L must be square; got shape {M.shape}.")
    n = M.shape[0]
    for pname, v, low in (("m", m, 1), ("skip", skip, 0)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or v < low:
            raise param_error("smallest_eigenvectors", pname, f"an integer >= {low}", v)
    m, skip = int(m), int(skip)
    if m + skip > n:
        raise ProblemError(f"smallest_eigenvectors: m + skip = {m + skip} exceeds n = {n}.")
    data = M.data if sp.issparse(M) else M
    if not np.all(np.isfinite(data)):
        raise ProblemError("smallest_eigenvectors: L contains NaN or infinite values.")
    # compute a few eigenpairs past the cut (and from the first one) to see whether an
    # eigenvalue cluster straddles a cut; grow the window until the cluster ends
    extra = min(8, n - skip - m)
    while True:
        hi = skip + m - 1 + extra
        vals, vecs = _bottom_eigenpairs(M, hi + 1)
        tol = EIG_CLUSTER_RTOL * max(1.0, float(np.max(np.abs(vals))))
        if extra == n - skip - m or abs(vals[hi] - vals[skip + m - 1]) > tol:
            break
        extra = min(2 * extra + 1, n - skip - m)
    sel = np.arange(skip, skip + m)
    out = vecs[:, sel].copy()
    for cut_lo, cut_hi in ((skip - 1, skip), (skip + m - 1, skip + m)):
        if cut_lo < 0 or cut_hi > hi:
            continue
        if abs(vals[cut_hi] - vals[cut_lo]) > tol:
            continue
        # a repeated eigenvalue across the cut: any orthonormal basis of part of its
        # eigenspace is "the" eigenvectors, and LAPACK's choice changes with the BLAS
        # build and thread count.  Take a canonical one: project fixed vectors onto the
        # eigenspace (its projector is unique) and orthonormalise.
        lam = vals[cut_lo]
        cluster = np.flatnonzero(np.abs(vals[: hi + 1] - lam) <= tol)
        inside = cluster[(cluster >= skip) & (cluster < skip + m)]
        Vc = vecs[:, cluster]
        R = np.random.default_rng(20261123).standard_normal((n, len(inside)))
        Qc, _ = np.linalg.qr(Vc @ (Vc.T @ R))
        out[:, inside - skip] = Qc
    vals = vals[sel]
    vecs = out
    return np.asarray(vals, dtype=np.float64), _fix_signs(np.asarray(vecs, dtype=np.float64))
