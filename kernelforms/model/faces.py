"""Facial reduction of the cliques of fixed distances (Krislock & Wolkowicz 2010).

A clique ``C`` of the graph whose distances are all fixed (equality rows ``K_ii + K_jj -
2 K_ij = d_ij^2`` on every pair of ``C``) fixes the clique's centred Gram matrix ``B_C = -J
D_C J / 2`` (``D_C`` the squared distances, ``J = I - 1 1^T / |C|``).  When ``B_C`` has rank
``t < |C| - 1`` (a 5-clique of points in 3-D: ``t = 3``), every feasible ``K = V V^T`` has its
rows on ``C`` in the affine span of the clique's own configuration:  ``V[C] = 1 a^T + P_C
M`` for some ``a``, ``M``, ``P_C`` the clique's points by classical MDS.  So every column
``x`` of a feasible factor satisfies ``N_C^T x[C] = 0``, ``N_C`` (``|C| x (|C| - t - 1)``)
spanning the null space of ``B_C`` orthogonal to ``1``, and ``range(K)`` lies in

    F = { x in R^n : N_C^T x[C] = 0 for every clique C, 1^T x = 0 }

(the last row: MVU's centring ``1^T K 1 = 0`` over K PSD means ``K 1 = 0``).  Every feasible
kernel is ``K = U Y U^T`` with ``U`` an orthonormal basis of ``F`` (``n x p``) and ``Y`` PSD
(``p x p``): the face of the PSD cone that contains the feasible set, the intersection of
the cliques' faces (Krislock & Wolkowicz 2010, Theorem 2.3 and section 3: intersecting
subspaces).  ``tr K = tr Y`` because ``U`` has orthonormal columns.

:func:`clique_rows` computes the constraint rows of ``F`` without its basis: a sparse
matrix ``A`` (one row per dependency ``N_C``, on the clique's points only), the cliques
batched by size for their small eigendecompositions (one stacked ``eigh`` per size), and
an orthonormal basis ``W`` of ``range(A^T)`` (sparse: one small SVD per group of
overlapping cliques, which drops dependent rows: overlapping cliques, or a clique listed
twice, make ``A`` rank-deficient), so that ``x - W (W^T x)`` projects onto ``null(A)`` in
``O(nnz(W))`` (:class:`CliqueRows`).  That is what the ``mvu`` solver's ``face=True``
works with, at any size.  :func:`clique_face` adds the dense basis ``U`` of ``F`` (``O(n^3)``,
meant for up to a few thousand points); :class:`Face` keeps it, the per-clique ranks and the
smallest relative eigenvalue of the cliques counted at full rank (a nearly flat tetrahedron:
numerically close to a smaller face that the tolerance did not take).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

#: a clique's Gram eigenvalue below this fraction of its largest counts as zero.  The exact
#: zeros of 3-D points come out near 1e-16 of the largest after rounding; a Swiss roll's
#: nearly flat cliques (points on a curved surface) form a continuum down towards them: the
#: flattest at full rank is 7.5e-10 at 2,000 points, 2.4e-13 at 20,000, 2.1e-15 at 100,000
#: (k = 5; the largest ratio counted as zero there 7.3e-16).  At 1e-8, eight cliques of a
#: 2,000-point roll were taken as flat and the data's own feasible configuration lay 5e-6
#: off the face.  Taking a clique of ratio ``rho`` as flat changes its squared distances by
#: about ``rho`` of the largest: below this tolerance, the rounding of the distances
RANK_RTOL = 1e-15


@dataclass(frozen=True, eq=False)
class Face:
    """``range(K) ⊆ range(U)`` for every feasible K (see the module docstring).

    ``U`` (``n x p``, orthonormal columns, ``U^T 1 = 0``); ``cliques`` the maximal cliques
    used (sizes >= 4); ``reducing`` how many of them gave a constraint (``|C| > t + 1``);
    ``rows`` the constraint rows stacked before the null space (``sum |C| - t - 1`` plus the
    centring row); ``flattest`` the smallest ``lambda_t / lambda_1`` of a clique counted at its
    full rank ``t = |C| - 1`` (how close a non-reducing clique is to reducing)."""

    U: np.ndarray
    cliques: tuple = field(repr=False)
    reducing: int
    rows: int
    flattest: float
    tol: float

    @property
    def n(self) -> int:
        return self.U.shape[0]

    @property
    def p(self) -> int:
        return self.U.shape[1]

    def describe(self) -> str:
        return (f"facial reduction of {self.reducing} of {len(self.cliques)} cliques (Krislock & "
                f"Wolkowicz 2010): K = U Y U^T, Y PSD {self.p} x {self.p} (n = {self.n})")


def maximal_cliques(n: int, i: np.ndarray, j: np.ndarray, min_size: int = 4) -> list[tuple]:
    """The maximal cliques of the graph with at least ``min_size`` vertices (sorted tuples)."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(i.tolist(), j.tolist()))
    return sorted(tuple(sorted(c)) for c in nx.find_cliques(g) if len(c) >= min_size)


def _perp_basis(m: int) -> np.ndarray:
    """An orthonormal basis of ``1^perp`` in ``R^m`` (``m x (m - 1)``, Householder)."""
    v = np.ones(m)
    v[0] += np.sqrt(m)
    H = np.eye(m) - 2.0 * np.outer(v, v) / float(v @ v)
    return H[:, 1:]


#: a singular value of a group of overlapping cliques' rows below this fraction of its
#: largest marks a dependent row (dropped from the range basis ``W``)
DEPENDENT_RTOL = 1e-10


@dataclass(frozen=True, eq=False)
class CliqueRows:
    """The rows of the face of the cliques, sparse (see the module docstring).

    ``A`` (``k x n``, CSR): one row ``N_C[:, l]`` on the points of each reducing clique per
    dependency (orthonormal within a clique, orthogonal to ``1``; the centring row is not
    among them); ``W`` (``n x q``, CSC, ``q = rank A``): orthonormal columns spanning
    ``range(A^T)``; ``Z`` (``n x (n - q)``, CSC): orthonormal columns spanning ``null(A)``
    (the constant vector among its span); ``cliques``, ``reducing``, ``flattest``, ``tol`` as in :class:`Face`;
    ``smallest_zero``: the largest relative eigenvalue of a clique counted as zero (how
    close the rank decision came to the tolerance)."""

    A: sp.csr_matrix
    W: sp.csc_matrix
    Z: sp.csc_matrix
    cliques: tuple = field(repr=False)
    reducing: int
    flattest: float
    tol: float
    smallest_zero: float

    @property
    def n(self) -> int:
        return self.A.shape[1]

    @property
    def q(self) -> int:
        """The codimension of the face in ``1^perp``."""
        return self.W.shape[1]

    def project(self, X: np.ndarray) -> np.ndarray:
        """``X`` (``n`` or ``n x r``) projected onto ``null(A)`` and centred: ``X - W (W^T X)
        - mean``; ``O(nnz(W) r + n r)``."""
        X = np.asarray(X, dtype=float)
        if self.q:
            X = X - self.W @ (self.W.T @ X)
        return X - X.mean(axis=0, keepdims=True)

    def residual(self, X: np.ndarray) -> float:
        """``max |A X|`` over the rows and columns (how far ``X`` is off the face)."""
        if not self.A.shape[0]:
            return 0.0
        return float(np.max(np.abs(self.A @ np.asarray(X, dtype=float)), initial=0.0))


def _edge_lookup(n: int, i: np.ndarray, j: np.ndarray, sq: np.ndarray):
    """A vectorised ``(a, b) -> sq`` over the undirected edges (sorted keys, binary search)."""
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    key = lo * np.int64(n) + hi
    order = np.argsort(key, kind="stable")
    keys, vals = key[order], sq[order]

    def get(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        k = np.minimum(a, b) * np.int64(n) + np.maximum(a, b)
        pos = np.clip(np.searchsorted(keys, k), 0, max(len(keys) - 1, 0))
        if len(keys) == 0 or not np.all(keys[pos] == k):
            raise ValueError("a clique pair is not an edge of the distance rows")
        return vals[pos]

    return get


def _bases(A: sp.csr_matrix, n: int) -> tuple[sp.csc_matrix, sp.csc_matrix]:
    """``(W, Z)``: orthonormal bases of ``range(A^T)`` (``n x rank A``) and of ``null(A)``
    (``n x (n - rank A)``), both sparse.  Rows that share a point are grouped (connected
    components of ``|A| |A|^T``: the rows of one clique, or of cliques that overlap); each
    group gets one small SVD on its points, which drops dependent rows (overlapping
    cliques, a clique listed twice).  ``Z`` is the identity on the points of no group and
    the SVD's complement on each group's points (the groups' points are disjoint)."""
    from scipy.sparse.csgraph import connected_components

    if A.shape[0] == 0:
        return sp.csc_matrix((n, 0)), sp.identity(n, format="csc")
    Ab = A.copy()
    Ab.data = np.ones_like(Ab.data)
    ncomp, comp = connected_components(Ab @ Ab.T, directed=False)
    order = np.argsort(comp, kind="stable")
    cuts = np.searchsorted(comp[order], np.arange(ncomp + 1))
    wr, wc, wv, zr, zc, zv = [], [], [], [], [], []
    nw = nz = 0
    used = np.zeros(n, dtype=bool)
    # one small SVD per group (a loop over groups of cliques, not over points)
    for g in range(ncomp):
        sub = A[order[cuts[g]:cuts[g + 1]]]
        pts = np.unique(sub.indices)
        used[pts] = True
        _, s, Vt = np.linalg.svd(sub[:, pts].toarray(), full_matrices=True)
        rank = int(np.sum(s > DEPENDENT_RTOL * max(float(s[0]), 1e-300)))
        for (rr, cc, vv, Q, k0) in ((wr, wc, wv, Vt[:rank].T, nw), (zr, zc, zv, Vt[rank:].T, nz)):
            rr.append(np.repeat(pts, Q.shape[1]))
            cc.append(k0 + np.tile(np.arange(Q.shape[1]), len(pts)))
            vv.append(Q.ravel())
        nw += rank
        nz += len(pts) - rank
    free = np.flatnonzero(~used)
    zr.append(free)
    zc.append(nz + np.arange(len(free)))
    zv.append(np.ones(len(free)))
    nz += len(free)
    W = sp.csc_matrix((np.concatenate(wv), (np.concatenate(wr), np.concatenate(wc))), shape=(n, nw))
    Z = sp.csc_matrix((np.concatenate(zv), (np.concatenate(zr), np.concatenate(zc))), shape=(n, nz))
    return W, Z


def clique_rows(n: int, i: np.ndarray, j: np.ndarray, sq: np.ndarray,
                rank_rtol: float = RANK_RTOL, cliques: list | None = None) -> CliqueRows:
    """The sparse rows :class:`CliqueRows` of the face of the cliques of the distance rows
    ``||v_i - v_j||^2 = sq`` (edges ``(i, j)``, squared distances ``sq``).  ``cliques``: the
    maximal cliques (sizes >= 4) when known, else :func:`maximal_cliques`.

    Cliques of one size are processed together: their distance matrices ``(c, m, m)``, the
    centred Gram matrices on ``1^perp`` and one stacked ``eigh``."""
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    sq = np.asarray(sq, dtype=float)
    if cliques is None:
        cliques = maximal_cliques(n, i, j)
    get = _edge_lookup(n, i, j, sq)
    by_size: dict[int, list] = {}
    for C in cliques:
        by_size.setdefault(len(C), []).append(C)
    rows_v, rows_c = [], []
    reducing, flattest, smallest_zero = 0, 1.0, 0.0
    k = 0
    for m in sorted(by_size):
        Cs = np.asarray(by_size[m], dtype=np.int64)  # (c, m)
        a, b = np.triu_indices(m, 1)
        D = np.zeros((len(Cs), m, m))
        d = get(Cs[:, a], Cs[:, b])
        D[:, a, b] = d
        D[:, b, a] = d
        J = np.eye(m) - 1.0 / m
        B = -0.5 * J @ D @ J
        # B 1 = 0: its eigenvectors on 1^perp (an eigh of B itself mixes 1 into the rest of
        # a null space of dimension > 1)
        Z = _perp_basis(m)
        w, Q = np.linalg.eigh(Z.T @ ((B + np.swapaxes(B, 1, 2)) / 2) @ Z)
        Q = Z @ Q  # (c, m, m - 1)
        top = np.maximum(w[:, -1], 0.0)
        live = top > 0
        zero = (w <= rank_rtol * top[:, None]) & live[:, None]
        t = np.sum(~zero, axis=1)
        full = live & (t == m - 1)
        if np.any(full):
            flattest = min(flattest, float(np.min(w[full, 0] / top[full])))
        red = live & (t < m - 1)
        reducing += int(np.sum(red))
        if np.any(red):
            rel = np.where(zero, np.abs(w) / np.where(top > 0, top, 1.0)[:, None], 0.0)
            smallest_zero = max(smallest_zero, float(np.max(rel[red])))
        c_idx, col = np.nonzero(zero & red[:, None])
        rows_v.append(Q[c_idx, :, col])  # (k_m, m): the dependencies N_C[:, l]
        rows_c.append(Cs[c_idx])
        k += len(c_idx)
    if k:
        vals = np.concatenate([v.ravel() for v in rows_v])
        cols = np.concatenate([c.ravel() for c in rows_c])
        sizes = np.concatenate([np.full(len(v), v.shape[1]) for v in rows_v])
        rr = np.repeat(np.arange(k), sizes)
        A = sp.csr_matrix((vals, (rr, cols)), shape=(k, n))
    else:
        A = sp.csr_matrix((0, n))
    W, Z = _bases(A, n)
    return CliqueRows(A, W, Z, tuple(cliques), reducing, flattest, rank_rtol, smallest_zero)


def clique_face(n: int, i: np.ndarray, j: np.ndarray, sq: np.ndarray,
                rank_rtol: float = RANK_RTOL) -> Face:
    """The face :class:`Face` of the cliques of the distance rows ``||v_i - v_j||^2 = sq``
    (edges ``(i, j)``, squared distances ``sq``), with the centring ``K 1 = 0``: the rows of
    :func:`clique_rows` and a dense orthonormal basis of their null space (``O(n^3)``)."""
    from scipy.linalg import null_space

    R = clique_rows(n, i, j, sq, rank_rtol)
    centre = sp.csr_matrix(np.full((1, n), 1.0 / np.sqrt(n)))
    A = sp.vstack([R.A, centre], format="csr").toarray()
    U = null_space(A, rcond=1e-10)
    U.flags.writeable = False
    return Face(U, R.cliques, R.reducing, A.shape[0], R.flattest, rank_rtol)
