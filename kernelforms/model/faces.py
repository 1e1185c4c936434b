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

:func:`clique_face` computes ``F`` (dense null space: ``O(n^3)``, meant for up to a few
thousand points) and reports what it used; :class:`Face` keeps the basis, the per-clique
ranks and the smallest relative eigenvalue of the cliques counted at full rank (a nearly
flat tetrahedron: numerically close to a smaller face that the tolerance did not take).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

#: a clique's Gram eigenvalue below this fraction of its largest counts as zero
RANK_RTOL = 1e-8


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


def clique_face(n: int, i: np.ndarray, j: np.ndarray, sq: np.ndarray,
                rank_rtol: float = RANK_RTOL) -> Face:
    """The face :class:`Face` of the cliques of the distance rows ``||v_i - v_j||^2 = sq``
    (edges ``(i, j)``, squared distances ``sq``), with the centring ``K 1 = 0``."""
    from scipy.linalg import null_space

    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    sq = np.asarray(sq, dtype=float)
    lookup = {}
    for a, b, d in zip(np.minimum(i, j).tolist(), np.maximum(i, j).tolist(), sq.tolist()):
        lookup[(a, b)] = d
    cliques = maximal_cliques(n, i, j)
    rr, cc, vv = [], [], []
    row = 0
    reducing = 0
    flattest = 1.0
    for C in cliques:
        m = len(C)
        D = np.zeros((m, m))
        for a in range(m):
            for b in range(a + 1, m):
                D[a, b] = D[b, a] = lookup[(C[a], C[b])]
        J = np.eye(m) - 1.0 / m
        B = -0.5 * J @ D @ J
        # B 1 = 0: its eigenvectors on 1^perp (an eigh of B itself mixes 1 into the rest of
        # a null space of dimension > 1)
        Z = _perp_basis(m)
        w, Q = np.linalg.eigh(Z.T @ ((B + B.T) / 2) @ Z)
        Q = Z @ Q
        top = max(float(w[-1]), 0.0)
        if top <= 0:
            continue
        zero = w <= rank_rtol * top
        t = int(np.sum(~zero))
        if t == m - 1:
            flattest = min(flattest, float(np.min(w)) / top)
            continue
        reducing += 1
        N = Q[:, zero]
        for col in range(N.shape[1]):
            rr.extend([row] * m)
            cc.extend(C)
            vv.extend(N[:, col].tolist())
            row += 1
    rr.extend([row] * n)
    cc.extend(range(n))
    vv.extend([1.0 / np.sqrt(n)] * n)
    row += 1
    A = sp.csr_matrix((vv, (rr, cc)), shape=(row, n)).toarray()
    U = null_space(A, rcond=1e-10)
    U.flags.writeable = False
    return Face(U, tuple(cliques), reducing, row, flattest, rank_rtol)
