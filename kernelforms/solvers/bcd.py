"""BCDKL: block coordinate descent on ``K = G G^T`` for NPKL (SPEC.md P6, seed 004) and P1.

The paper writes ``K = V^T V`` with columns ``v_i``; our factor ``G`` (``n x r``) is
``V^T``, so the paper's column ``v_i`` is our row ``G[i]``.  One block is one row.

Per-row subproblem (exactly SPEC.md P6, every pair counted once).  With
``c_i = sum_{k != i} L_ik g_k`` and ``a_j = T_ij g_j`` for the partners ``j in T(i)``,
the part of the objective that depends on ``g = g_i`` is::

    L_ii ||g||^2 + 2 g.c_i + gamma * sum_{j in T(i)} loss(a_j . g)

which is twice the paper's eq. 18 with the paper's own ``gamma``.  Hence the paper's
updates hold verbatim for SPEC.md's scaling:

* no pair (set U): ``g = -c_i / L_ii`` (eq. 13); or all of U at once, one Jacobi step
  of eq. 17 (``unlabeled="block"``);
* hinge: box QP eq. 22, ``min 1/2 a'Pa - a'q``, ``0 <= a <= gamma/2``,
  ``P = A A^T``, ``q_j = a_j.c_i + L_ii``; ``g = (A^T alpha - c_i) / L_ii`` (eq. 21);
* squared hinge: QP eq. 25, ``H = P + (L_ii/gamma) I``, ``alpha >= 0``, same recovery;
* square: closed form eq. 28, ``(L_ii I + gamma A^T A) g = gamma A^T 1 - c_i``, solved
  with the Sherman-Morrison-Woodbury identity on the ``|T(i)| x |T(i)|`` matrix
  ``(L_ii/gamma) I + A A^T``;
* linear: eq. 31, ``g~ = (gamma/2 A^T 1 - c_i) / L_ii`` projected onto ``||g|| <= b``
  (SPEC.md's ``K_ii <= b^2`` holds for *every* i, so unlabeled rows are projected too).

The small QPs are solved in batches (every labeled row of one colour at once, padded to
the largest ``|T(i)|``) by a primal-dual active-set (semismooth Newton) method with
exact solves of the free block, warm-started from the previous sweep's multipliers,
with projected coordinate descent as a fall-back for rows whose KKT residual is not
yet below ``qp_tol``.  A per-row safeguard keeps the old row whenever the new one
does not decrease the row objective, so every sweep is monotone.

Soft PCP (SPEC.md P1, not in the paper) is supported too: its row subproblem is quartic
(the diagonal term ``(gamma/2)(||g||^2 - 1)^2``) and is solved exactly through a scalar
secular equation in ``mu = gamma (||g||^2 - 1)`` (:meth:`BCDEngine._update_pcp`).

Parallel Gauss-Seidel: rows ``i`` and ``k`` interact only if ``L_ik != 0`` or
``{i, k}`` is a pair.  A greedy colouring (networkx, largest-first) of that graph
gives independent sets; updating one colour at once *is* a sequential Gauss-Seidel
pass over its rows in any order, so the coloured sweep has the same monotone descent
as the sequential one, with a few vectorised numpy calls per colour instead of a
Python loop over rows.  ``order="sequential"`` keeps the paper's Algorithm 1 (random
order over L, then over U) for comparison.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..problems import NPKL, PCP
from ..result import Status
from .base import IterativeSolver, SolverOutput

#: relative objective tolerance this method reaches against the full SDP (tests)
TEST_RTOL = 1e-3

ORDERS = ("color", "sequential")
UNLABELED = ("gauss_seidel", "block")


# ----------------------------------------------------------------------------- QPs
def box_qp(H: np.ndarray, q: np.ndarray, upper: float, x0: np.ndarray | None = None, *,
           tol: float = 1e-12, max_newton: int = 25, max_cd: int = 5000) -> np.ndarray:
    """Solve a batch of small box QPs ``min 1/2 x'Hx - q'x  s.t. 0 <= x <= upper``.

    Parameters
    ----------
    H : ndarray (B, t, t)
        Symmetric positive semidefinite matrices.
    q : ndarray (B, t)
    upper : float
        Upper bound (``np.inf`` for a one-sided bound).
    x0 : ndarray (B, t), optional
        Warm start.
    tol : float
        KKT tolerance on the natural residual, relative to ``1 + max |q|`` per row.

    Returns
    -------
    ndarray (B, t)
        The minimisers (exact up to round-off where the active-set step converged).

    Notes
    -----
    Primal-dual active set (semismooth Newton on ``x = clip(x - w / diag H)``,
    ``w = Hx - q``): guess the bound/free split, solve the free block exactly
    (pseudo-inverse, so a singular ``H`` is fine), repeat.  Rows that do not reach
    the KKT tolerance fall back to projected coordinate descent (exact line
    minimisation per coordinate), which converges for any PSD ``H``.
    """
    B, t = q.shape
    if B == 0 or t == 0:
        return np.zeros((B, t))
    hd = np.einsum("bii->bi", H)
    scale = 1.0 + np.max(np.abs(q), axis=1)  # (B,)
    hds = np.maximum(hd, 1e-14 * scale[:, None])
    x = np.zeros((B, t)) if x0 is None else np.clip(x0, 0.0, upper)
    eye = np.eye(t, dtype=bool)

    def residual_of(Hs, qs, hs, xs, sc):
        w = np.einsum("bij,bj->bi", Hs, xs) - qs
        nat = xs - np.clip(xs - w / hs, 0.0, upper)
        return np.max(np.abs(nat) * hs, axis=1) / sc

    res = residual_of(H, q, hds, x, scale)
    todo = np.flatnonzero(res > tol)
    prev = None  # active sets used in the previous Newton step, for the rows in todo
    stalled = []
    for _ in range(max_newton):
        if todo.size == 0:
            break
        Hs, qs, xs, hs = H[todo], q[todo], x[todo], hds[todo]
        w = np.einsum("bij,bj->bi", Hs, xs) - qs
        z = xs - w / hs
        low = z <= 0.0
        up = z >= upper
        free = ~(low | up)
        sets = np.where(low, 0, np.where(up, 2, 1))
        if prev is not None:
            same = np.all(sets == prev, axis=1)
            if np.any(same):  # the same split again without reaching KKT: hand over
                stalled.append(todo[same])
                keep = ~same
                todo, Hs, qs, hs = todo[keep], Hs[keep], qs[keep], hs[keep]
                low, up, free, sets = low[keep], up[keep], free[keep], sets[keep]
                if todo.size == 0:
                    break
        xb = np.where(up, upper if math.isfinite(upper) else 0.0, 0.0)
        ff = free[:, :, None] & free[:, None, :]
        Hm = np.where(ff, Hs, 0.0) + np.where(eye & ~free[:, :, None], 1.0, 0.0)
        rhs = np.where(free, qs - np.einsum("bij,bj->bi", Hs, xb), xb)
        # exact solve of the free block; a relative ridge of 1e-13 keeps a singular
        # P_FF (hinge with more partners than the rank) solvable
        Hm = Hm + (1e-13 * (1.0 + np.max(hs, axis=1)))[:, None, None] * eye
        xn = np.linalg.solve(Hm, rhs[:, :, None])[:, :, 0]
        x[todo] = np.clip(np.where(free, xn, xb), 0.0, upper)
        keep = residual_of(Hs, qs, hs, x[todo], scale[todo]) > tol
        prev = sets[keep]
        todo = todo[keep]
    todo = np.concatenate([todo] + stalled) if stalled else todo
    # fall-back: projected coordinate descent on the remaining rows
    it = 0
    while todo.size and it < max_cd:
        Hs, qs, hs = H[todo], q[todo], hds[todo]
        xs = x[todo]
        for j in range(t):
            wj = np.einsum("bi,bi->b", Hs[:, j, :], xs) - qs[:, j]
            xs[:, j] = np.clip(xs[:, j] - wj / hs[:, j], 0.0, upper)
        x[todo] = xs
        it += 1
        if it % 10 == 0 or it >= max_cd:
            todo = todo[residual_of(Hs, qs, hs, xs, scale[todo]) > tol]
    return x


def huber_hinge(z: np.ndarray, mu: float) -> np.ndarray:
    """``max_{0<=beta<=1} beta (1 - z) - mu beta^2 / 2``: the hinge for ``mu = 0``."""
    u = 1.0 - z
    if mu <= 0:
        return np.maximum(0.0, u)
    return np.where(u <= 0, 0.0, np.where(u >= mu, u - 0.5 * mu, u * u / (2.0 * mu)))


def spd_solve(W: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Solve a batch of small symmetric positive definite systems ``W x = y``.

    Gaussian elimination without pivoting, vectorised over the batch (one numpy step
    per pivot); for the ``|T(i)| <= 8`` systems of the square loss this avoids one
    LAPACK call per row.  Larger systems go to ``numpy.linalg.solve``.
    """
    B, t = y.shape
    if t > 8:
        return np.linalg.solve(W, y[:, :, None])[:, :, 0]
    W = W.copy()
    y = y.copy()
    for k in range(t - 1):
        f = W[:, k + 1:, k] / W[:, k, k][:, None]
        W[:, k + 1:, k + 1:] -= f[:, :, None] * W[:, k, None, k + 1:]
        y[:, k + 1:] -= f * y[:, k:k + 1]
    x = np.empty_like(y)
    for k in range(t - 1, -1, -1):
        x[:, k] = (y[:, k] - np.einsum("bj,bj->b", W[:, k, k + 1:], x[:, k + 1:])) / W[:, k, k]
    return x


# ------------------------------------------------------------------------- the engine
@dataclass
class _Block:
    """Precomputed data of one colour (an independent set of rows)."""

    Lunl: sp.csr_matrix  # -Lbar[unlabeled rows] / L_ii: eq. 13 is G[rows] = Lunl @ G
    Llab: sp.csr_matrix  # Lbar[labeled rows]: C = Llab @ G
    unl_rows: Any  # unlabeled rows (index array, or a slice when contiguous)
    lab_rows: Any  # labeled rows
    n_unl: int
    n_lab: int
    J: np.ndarray  # (nl, tmax) partner indices (0 where padded)
    S: np.ndarray  # (nl, tmax) signs (0 where padded)
    pos: np.ndarray  # (nl, tmax) slot in the pair-CSR (0 where padded)
    mask: np.ndarray  # (nl, tmax) bool


class BCDEngine:
    """The BCD updates on a factor ``G`` (rows are the blocks).

    Parameters
    ----------
    laplacian : sparse (n, n)
        Symmetric, with positive diagonal.
    idx, T : ndarray
        Pairs (m, 2) and their signs (+1 must, -1 cannot).
    loss : str
    gamma, b : float
    """

    def __init__(self, laplacian, idx, T, loss: str, gamma: float, b: float, *,
                 qp_tol: float = 1e-12):
        L = sp.csr_matrix(laplacian, dtype=float)
        self.n = L.shape[0]
        self.d = L.diagonal().copy()
        Lbar = (L - sp.diags(self.d)).tocsr()
        Lbar.eliminate_zeros()
        Lbar.sort_indices()
        self.L = L
        self.Lbar = Lbar
        self.loss, self.gamma, self.b = loss, float(gamma), float(b)
        self.qp_tol = qp_tol
        idx = np.asarray(idx, dtype=np.int64).reshape(-1, 2)
        T = np.asarray(T, dtype=float)
        self.idx, self.T = idx, T
        n = self.n
        rows = np.concatenate([idx[:, 0], idx[:, 1]])
        cols = np.concatenate([idx[:, 1], idx[:, 0]])
        P = sp.csr_matrix((np.concatenate([T, T]), (rows, cols)), shape=(n, n))
        P.sort_indices()
        self.P = P
        self.deg = np.diff(P.indptr)
        # loss "pcp" = SPEC.md P1: (gamma/2) sum over pairs and the diagonal of
        # (K_ij - t_ij)^2, t = 1 on must-links (sign +1) and the diagonal, 0 on cannot-links;
        # every row carries its diagonal term, so every row is "labeled"
        self.labeled = self.deg > 0 if loss != "pcp" else np.ones(n, dtype=bool)
        self.alpha = np.zeros(P.nnz)  # dual warm starts, one per (row, partner) slot
        self.n_safeguard = 0
        self.mu = 0.0  # Huber smoothing of the hinge (0 = the exact hinge of P6)

    # ---------------------------------------------------------------- colouring
    def coloring(self, rows: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """Greedy (largest-first) colouring of the interaction graph on ``rows``.

        Returns ``(colour, seconds)``; ``colour[i] = -1`` for rows not coloured.
        """
        import networkx as nx

        t0 = time.perf_counter()
        A = (abs(self.Lbar) + abs(self.P)).tocsr()
        colour = -np.ones(self.n, dtype=np.int64)
        if rows is None:
            rows = np.arange(self.n)
        sel = np.zeros(self.n, dtype=bool)
        sel[rows] = True
        C = sp.triu(A, k=1).tocoo()
        keep = sel[C.row] & sel[C.col]
        g = nx.Graph()
        g.add_nodes_from(rows.tolist())
        g.add_edges_from(zip(C.row[keep].tolist(), C.col[keep].tolist()))
        col = nx.greedy_color(g, strategy="largest_first")
        nodes = np.fromiter(col.keys(), dtype=np.int64, count=len(col))
        vals = np.fromiter(col.values(), dtype=np.int64, count=len(col))
        colour[nodes] = vals
        return colour, time.perf_counter() - t0

    def make_block(self, rows: np.ndarray) -> _Block:
        rows = np.asarray(rows, dtype=np.int64)
        lab = np.flatnonzero(self.labeled[rows])
        unl = np.flatnonzero(~self.labeled[rows])
        lr = rows[lab]
        deg = self.deg[lr]
        tmax = int(deg.max()) if deg.size else 0
        ar = np.arange(tmax)
        mask = ar[None, :] < deg[:, None]
        pos = np.where(mask, self.P.indptr[lr][:, None] + ar[None, :], 0)
        J = np.where(mask, self.P.indices[pos] if self.P.nnz else 0, 0)
        S = np.where(mask, self.P.data[pos] if self.P.nnz else 0.0, 0.0)
        ur, lr_ = rows[unl], rows[lab]
        Lunl = (sp.diags(-1.0 / self.d[ur]) @ self.Lbar[ur]).tocsr()
        Llab = self.Lbar[lr_]
        if rows.size and np.all(np.diff(rows) == 1) and np.all(np.diff(lab) == 1) \
                and (lab.size == 0 or unl.size == 0 or unl[-1] < lab[0]):
            # contiguous colour (rows reordered by colour, unlabeled first): slices
            a, u, b = int(rows[0]), int(rows[0]) + unl.size, int(rows[-1]) + 1
            return _Block(Lunl, Llab, slice(a, u), slice(u, b), unl.size, lab.size,
                          J, S, pos, mask)
        return _Block(Lunl, Llab, ur, lr_, unl.size, lab.size, J, S, pos, mask)

    # ---------------------------------------------------------------- updates
    def _project(self, g: np.ndarray) -> np.ndarray:
        nrm = np.sqrt(np.einsum("ij,ij->i", g, g))
        over = nrm > self.b
        if np.any(over):
            g = g.copy()
            g[over] *= (self.b / nrm[over])[:, None]
        return g

    def _row_value(self, g, c, d, GJ, S, mask) -> np.ndarray:
        """The row objective ``d||g||^2 + 2 g.c + gamma sum loss(a_j . g)`` (batched);
        ``a_j = S_j g_j`` with the partner rows ``GJ`` and signs ``S`` (0 where padded)."""
        z = S * np.einsum("btr,br->bt", GJ, g)
        if self.loss == "hinge":
            lz = huber_hinge(z, self.mu)
        elif self.loss == "squared_hinge":
            lz = np.maximum(0.0, 1.0 - z) ** 2
        elif self.loss == "square":
            lz = (1.0 - z) ** 2
        else:
            lz = -z
        return (d * np.einsum("br,br->b", g, g) + 2.0 * np.einsum("br,br->b", g, c)
                + self.gamma * np.sum(np.where(mask, lz, 0.0), axis=1))

    def update_labeled(self, G: np.ndarray, rows: np.ndarray, C: np.ndarray, J, S, pos,
                       mask) -> np.ndarray:
        """New rows for labeled rows (batched); ``C`` = ``Lbar[rows] @ G``.

        ``A`` (rows ``a_j = T_ij g_j``) is never formed: with the partner rows ``GJ`` and
        the signs ``S`` (0 on padding), ``A A^T = S S^T * GJ GJ^T``, ``A x = S * GJ x``,
        ``A^T y = GJ^T (S y)``.
        """
        d = self.d[rows]
        if self.loss == "pcp":
            return self._update_pcp(G, rows, C, d, G[J] * mask[:, :, None],
                                    np.where(mask & (S > 0), 1.0, 0.0), mask)
        GJ = G[J]  # (B, t, r); padded entries carry S = 0
        gam = self.gamma
        loss = self.loss
        t = S.shape[1]
        ii = np.arange(t)
        if loss in ("hinge", "squared_hinge"):
            P = np.einsum("btr,bsr->bts", GJ, GJ) * (S[:, :, None] * S[:, None, :])
            q = S * np.einsum("btr,br->bt", GJ, C) + d[:, None]
            P[:, ii, ii] += np.where(mask, 0.0, 1.0)
            q = np.where(mask, q, 0.0)
            if loss == "squared_hinge":
                P[:, ii, ii] += (d / gam)[:, None]
                upper = np.inf
            else:
                upper = gam / 2.0
                if self.mu > 0:
                    P[:, ii, ii] += (2.0 * self.mu / gam) * d[:, None]
            a0 = np.where(mask, self.alpha[pos], 0.0)
            alpha = box_qp(P, q, upper, a0, tol=self.qp_tol)
            alpha = np.where(mask, alpha, 0.0)
            self.alpha[pos[mask]] = alpha[mask]
            g = (np.einsum("bt,btr->br", alpha * S, GJ) - C) / d[:, None]
        elif loss == "square":
            # (d I + gam A^T A) g = x,  x = gam A^T 1 - C;  SMW on (d/gam I + A A^T)
            x = gam * np.einsum("bt,btr->br", S, GJ) - C
            W = np.einsum("btr,bsr->bts", GJ, GJ) * (S[:, :, None] * S[:, None, :])
            W[:, ii, ii] += (d / gam)[:, None]
            y = spd_solve(W, S * np.einsum("btr,br->bt", GJ, x))  # (B, t)
            g = (x - np.einsum("bt,btr->br", y * S, GJ)) / d[:, None]
        else:  # linear
            g = self._project((0.5 * gam * np.einsum("bt,btr->br", S, GJ) - C) / d[:, None])
        if loss in ("square", "linear"):
            return g  # closed forms: the exact row minimiser
        # QP losses: never accept a row that increases its own objective (guards against
        # a QP solved to qp_tol only)
        old = G[rows]
        vn = self._row_value(g, C, d, GJ, S, mask)
        vo = self._row_value(old, C, d, GJ, S, mask)
        worse = vn > vo + 1e-13 * (np.abs(vo) + 1.0)
        if np.any(worse):
            self.n_safeguard += int(worse.sum())
            g[worse] = old[worse]
        return g

    # ---------------------------------------------------------------- P1 rows
    def _pcp_value(self, g, c, d, Bt, mask) -> np.ndarray:
        """P1 row objective ``d s + 2 g.c + gamma/2 (s-1)^2 + gamma/2 sum (g.g_j - t_j)^2``.

        ``Bt`` is the pair ``(B, tgt)`` of partner rows and targets.
        """
        B, tgt = Bt
        sq = np.einsum("br,br->b", g, g)
        z = (B @ g[:, :, None])[:, :, 0]
        return (d * sq + 2.0 * np.einsum("br,br->b", g, c)
                + 0.5 * self.gamma * ((sq - 1.0) ** 2
                                      + np.sum(np.where(mask, (z - tgt) ** 2, 0.0), axis=1)))

    def _update_pcp(self, G, rows, C, d, B, tgt, mask) -> np.ndarray:
        """Exact global minimiser of the quartic P1 row subproblem (batched).

        With ``H = d I + (gamma/2) B^T B``, ``h = -c + (gamma/2) B^T t`` the row objective
        is ``g'Hg - 2h'g + (gamma/2)(||g||^2 - 1)^2`` + const.  Because the last term is a
        convex function of ``s = ||g||^2``, ``g`` is a global minimiser iff
        ``(H + mu I) g = h``, ``mu = gamma (s - 1)`` and ``H + mu I >= 0``.  On the span of
        the partners and ``h`` (``H = d I`` on its complement, where ``h`` vanishes),
        eigen-decompose ``H`` and solve the secular equation
        ``sum_k ht_k^2 / (lam_k + mu)^2 = 1 + mu / gamma`` for ``mu > -lam_min``
        (safeguarded Newton in a bracket); in the "hard case" (``ht`` has no weight on
        the smallest eigenvalue and the equation has no root there) ``mu = -lam_min`` and
        the missing norm goes along that eigenvector.
        """
        gam = self.gamma
        nb, t = mask.shape
        r = G.shape[1]
        h = -C + 0.5 * gam * (tgt[:, None, :] @ B)[:, 0, :]
        M = np.concatenate([B.transpose(0, 2, 1), h[:, :, None]], axis=2)  # (nb, r, t+1)
        if t + 1 < r:
            Q, _ = np.linalg.qr(M)  # (nb, r, t+1): spans the partners and h
        else:
            Q = np.broadcast_to(np.eye(r), (nb, r, r))
        BQ = B @ Q
        k = Q.shape[2]
        Hq = 0.5 * gam * (BQ.transpose(0, 2, 1) @ BQ) + d[:, None, None] * np.eye(k)
        lam, W = np.linalg.eigh(Hq)  # ascending
        ht = (W.transpose(0, 2, 1) @ (Q.transpose(0, 2, 1) @ h[:, :, None]))[:, :, 0]
        if k < r:  # the complement of span(Q) has eigenvalue d <= lam (H >= d I)
            lam1 = np.minimum(lam[:, 0], d)
        else:
            lam1 = lam[:, 0]
        hn = np.sqrt(np.einsum("bk,bk->b", ht, ht))
        scale = hn + np.abs(lam1) + 1.0
        tiny = 1e-12 * scale
        bottom = (lam - lam1[:, None]) <= 1e-12 * scale[:, None]  # eigenvalues at lam_min
        weight_bottom = np.sqrt(np.sum(np.where(bottom, ht * ht, 0.0), axis=1))
        rest = ~bottom
        with np.errstate(divide="ignore", invalid="ignore"):
            s_rest = np.sum(np.where(rest, ht * ht / np.where(rest, lam - lam1[:, None], 1.0) ** 2,
                                     0.0), axis=1)
        hard = (weight_bottom <= tiny) & (s_rest <= 1.0 - lam1 / gam)
        mu = np.empty(nb)
        # regular case: root of f(mu) = sum ht^2/(lam+mu)^2 - 1 - mu/gam on (-lam1, inf)
        reg = ~hard
        if np.any(reg):
            lr, hr, l1 = lam[reg], ht[reg], lam1[reg]
            lo = -l1
            hi = np.maximum(-l1 + hn[reg], 0.0) + tiny[reg]
            m = hi.copy()
            for _ in range(200):
                den = lr + m[:, None]
                f = np.sum(hr * hr / den**2, axis=1) - 1.0 - m / gam
                fp = -2.0 * np.sum(hr * hr / den**3, axis=1) - 1.0 / gam
                lo = np.where(f > 0, m, lo)
                hi = np.where(f <= 0, m, hi)
                step = m - f / fp
                bad = ~((step > lo) & (step < hi))
                new = np.where(bad, 0.5 * (lo + hi), step)
                if np.all(np.abs(new - m) <= 1e-15 * (np.abs(m) + 1.0)):
                    m = new
                    break
                m = new
            mu[reg] = m
        mu[hard] = -lam1[hard]
        den = lam + mu[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            gt = np.where(np.abs(den) > 0, ht / den, 0.0)
        if np.any(hard):
            hb = np.flatnonzero(hard)
            gt[hb] = np.where(bottom[hb], 0.0, gt[hb])
            extra = np.sqrt(np.maximum(0.0, 1.0 - lam1[hb] / gam - s_rest[hb]))
            gh = (Q[hb] @ (W[hb] @ gt[hb][:, :, None]))[:, :, 0]
            # the missing norm along an eigenvector of lam_min: inside span(Q) if lam[0]
            # is the minimum, else any unit vector orthogonal to span(Q)
            in_span = bottom[hb, 0] & (lam[hb, 0] <= lam1[hb] + tiny[hb])
            v = (Q[hb] @ W[hb][:, :, 0:1])[:, :, 0]
            if np.any(~in_span):
                for jj in np.flatnonzero(~in_span):
                    e = np.random.default_rng(0).standard_normal(r)
                    Qi = Q[hb[jj]]
                    e -= Qi @ (Qi.T @ e)
                    v[jj] = e / np.linalg.norm(e)
            g = np.empty((nb, r))
            g[hb] = gh + extra[:, None] * v
            rg = np.flatnonzero(~hard)
            g[rg] = (Q[rg] @ (W[rg] @ gt[rg][:, :, None]))[:, :, 0]
        else:
            g = (Q @ (W @ gt[:, :, None]))[:, :, 0]
        old = G[rows]
        vn = self._pcp_value(g, C, d, (B, tgt), mask)
        vo = self._pcp_value(old, C, d, (B, tgt), mask)
        worse = ~(vn <= vo + 1e-13 * (np.abs(vo) + 1.0))
        if np.any(worse):
            self.n_safeguard += int(worse.sum())
            g[worse] = old[worse]
        return g

    def update_unlabeled(self, C: np.ndarray, rows: np.ndarray) -> np.ndarray:
        g = -C / self.d[rows][:, None]
        return self._project(g) if self.loss == "linear" else g

    def sweep_block(self, G: np.ndarray, blk: _Block) -> None:
        """Update every row of one independent set at once (in place)."""
        if blk.n_unl:  # eq. 13 for all of them at once (independent rows)
            g = blk.Lunl @ G
            G[blk.unl_rows] = self._project(g) if self.loss == "linear" else g
        if blk.n_lab:
            C = blk.Llab @ G
            G[blk.lab_rows] = self.update_labeled(G, blk.lab_rows, C, blk.J, blk.S,
                                                  blk.pos, blk.mask)

    def sweep_row(self, G: np.ndarray, i: int) -> None:
        """Sequential update of one row (the paper's inner loop)."""
        Lb = self.Lbar
        a, e = Lb.indptr[i], Lb.indptr[i + 1]
        c = Lb.data[a:e] @ G[Lb.indices[a:e]]
        if not self.labeled[i]:
            g = -c / self.d[i]
            if self.loss == "linear":
                nr = math.sqrt(float(g @ g))
                if nr > self.b:
                    g *= self.b / nr
            G[i] = g
            return
        pa, pe = self.P.indptr[i], self.P.indptr[i + 1]
        J = self.P.indices[pa:pe][None, :]
        S = self.P.data[pa:pe][None, :]
        pos = np.arange(pa, pe)[None, :]
        mask = np.ones_like(S, dtype=bool)
        G[i] = self.update_labeled(G, np.array([i]), c[None, :], J, S, pos, mask)[0]

    def jacobi_unlabeled(self, G: np.ndarray, U: np.ndarray, LU: sp.csr_matrix) -> None:
        """One step of eq. 17 on all unlabeled rows U at once (LU = Lbar[U])."""
        G[U] = self.update_unlabeled(LU @ G, U)

    def objective(self, G: np.ndarray, mu: float = 0.0) -> float:
        """P6 at ``K = G G^T`` (with the Huber-smoothed hinge when ``mu > 0``)."""
        from ..problems.npkl import LOSSES

        if self.loss == "pcp":
            Kp = np.einsum("ij,ij->i", G[self.idx[:, 0]], G[self.idx[:, 1]])
            res = Kp - (self.T > 0)
            dg = np.einsum("ij,ij->i", G, G) - 1.0
            return float(np.sum(G * (self.L @ G))) + 0.5 * self.gamma * float(res @ res + dg @ dg)
        z = self.T * np.einsum("ij,ij->i", G[self.idx[:, 0]], G[self.idx[:, 1]])
        lz = huber_hinge(z, mu) if (self.loss == "hinge" and mu > 0) else LOSSES[self.loss](z)
        return float(np.sum(G * (self.L @ G))) + self.gamma * float(np.sum(lz))


# ------------------------------------------------------------------------- the method
class BCDKL(IterativeSolver):
    """``"bcd"``: block coordinate descent for NPKL (seed 004, Algorithm 1) and soft PCP (P1).

    Options
    -------
    rank : int, optional
        Rank r of ``K = G G^T``; default the paper's rule ``r(r+1)/2 <= m``.
    order : {"color", "sequential"}
        ``"color"`` (default): greedy colouring of the graph of L's nonzeros and the
        pairs; all rows of one colour are updated at once, colours in a random order
        per sweep.  ``"sequential"``: Algorithm 1's loop (random order over L, then U).
    unlabeled : {"gauss_seidel", "block"}
        Rows without pairs updated one by one by eq. 13 (default) or all at once by
        one Jacobi step of eq. 17 per sweep.
    eps : float
        Stop when ``||G_t - G_{t-1}||_F / ||G_t||_F < eps`` (Algorithm 1, step 14).
    max_iter : int
        ``itermax``.
    init : ndarray (n, r), optional
        Starting factor; default Gaussian ``N(0, 1/r)`` (projected onto the ball for
        the linear loss).
    record : bool
        Record the objective after every sweep in ``history`` (costs one ``L @ G``).
    qp_tol : float
        KKT tolerance of the small QPs.
    smoothing : "auto", None or float
        Hinge loss only.  Plain BCD (``None``, the paper's algorithm) stalls at
        coordinate-wise minima of the non-smooth hinge; ``"auto"`` (= 0.1) runs BCD on the
        Huber-smoothed hinge with ``mu = smoothing, smoothing/10, ... >= mu_min`` (each
        phase to ``eps``; same QP with ``H = P + (2 L_ii mu / gamma) I``), then on the
        exact hinge.  ``history["surrogate"]`` is the objective each sweep minimised.
    mu_min : float
        Smallest smoothing before the exact phase.
    """

    name = "bcd"
    formulation_name = "factored K = G G^T (BCD)"
    defaults = {
        "rank": None,
        "order": "color",
        "unlabeled": "gauss_seidel",
        "eps": 1e-5,
        "max_iter": 1000,
        "init": None,
        "record": True,
        "qp_tol": 1e-12,
        "smoothing": "auto",
        "mu_min": 1e-6,
    }

    def applies_to(self, problem: Any) -> str | None:
        if isinstance(problem, PCP) and problem.hard:
            return ("hard PCP (P2) has equality constraints K_ij = t_ij; BCD minimises a sum of "
                    "per-row terms and handles only the soft P1 and P6")
        if not isinstance(problem, (NPKL, PCP)):
            return f"BCD solves NPKL (P6) and soft PCP (P1) only; got {type(problem).__name__}"
        d = problem.laplacian.diagonal()
        if np.any(d <= 0):
            i = int(np.argmin(d))
            return (f"every L_ii must be > 0 (the per-row subproblem divides by it); "
                    f"L[{i},{i}] = {d[i]:.3g} (build L with delta > 0)")
        return None

    def _check(self, problem: NPKL, opts: dict) -> dict:
        n = problem.n
        r = opts["rank"]
        if r is None:
            r = problem.default_rank()
        elif isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 1 <= r <= n:
            raise SolverError(f"The 'rank' option of bcd must be an int in [1, {n}]. Got {r!r} instead.")
        opts["rank"] = int(r)
        if opts["order"] not in ORDERS:
            raise SolverError(f"The 'order' option of bcd must be one of {ORDERS}. "
                              f"Got {opts['order']!r} instead.")
        if opts["unlabeled"] not in UNLABELED:
            raise SolverError(f"The 'unlabeled' option of bcd must be one of {UNLABELED}. "
                              f"Got {opts['unlabeled']!r} instead.")
        for key in ("eps", "qp_tol"):
            v = opts[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise SolverError(f"The {key!r} option of bcd must be a float > 0. Got {v!r} instead.")
        mi = opts["max_iter"]
        if isinstance(mi, bool) or not isinstance(mi, (int, np.integer)) or mi < 1:
            raise SolverError(f"The 'max_iter' option of bcd must be an int >= 1. Got {mi!r} instead.")
        if opts["init"] is not None:
            G0 = np.asarray(opts["init"], dtype=float)
            if G0.shape != (n, opts["rank"]) or not np.all(np.isfinite(G0)):
                raise SolverError(f"The 'init' option of bcd must be a finite array of shape "
                                  f"({n}, {opts['rank']}). Got shape {G0.shape} instead.")
        return opts

    def _solve(self, problem: NPKL, opts: dict, rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        opts = self._check(problem, opts)
        n, r = problem.n, opts["rank"]
        if isinstance(problem, PCP):  # P1: must-links +1, cannot-links -1 (targets 1 / 0)
            idx, T = problem.pairs.indices, problem.pairs.signs
            loss, bnd = "pcp", 1.0
        else:
            idx, T = problem.signed_pairs
            loss, bnd = problem.loss, problem.b
        eng = BCDEngine(problem.laplacian, idx, T, loss, problem.gamma, bnd,
                        qp_tol=opts["qp_tol"])
        if opts["init"] is None:
            G = rng.standard_normal((n, r)) / math.sqrt(r)
        else:
            G = np.array(opts["init"], dtype=float)
        if loss == "linear":
            G = eng._project(G)
        block = opts["unlabeled"] == "block"
        U = np.flatnonzero(~eng.labeled)
        Lab = np.flatnonzero(eng.labeled)
        color_time = color_cpu = 0.0
        blocks: list[_Block] = []
        perm = None
        if opts["order"] == "color":
            # colour, then renumber the rows so that every colour is a contiguous slice
            # (unlabeled rows first): the updates become slice writes, the row blocks of
            # L contiguous CSR slices (the reordering of seed 004's conclusion, ref. [45])
            cc0 = time.process_time()
            colour, color_time = eng.coloring(Lab if block else None)
            color_cpu = time.process_time() - cc0
            ncol = int(colour.max()) + 1 if colour.size and colour.max() >= 0 else 0
            colour = np.where(colour < 0, ncol, colour)
            perm = np.lexsort((eng.labeled, colour))
            inv = np.empty(n, dtype=np.int64)
            inv[perm] = np.arange(n)
            Lp = problem.laplacian[perm][:, perm]
            eng = BCDEngine(Lp, inv[idx], T, loss, problem.gamma, bnd,
                            qp_tol=opts["qp_tol"])
            G = np.ascontiguousarray(G[perm])
            cs = colour[perm]
            starts = np.searchsorted(cs, np.arange(ncol + 2))
            blocks = [eng.make_block(np.arange(starts[c], starts[c + 1])) for c in range(ncol)]
            U = np.arange(starts[ncol], n)
            Lab = np.arange(0, starts[ncol])
        LU = eng.Lbar[U] if block else None
        # smoothing schedule (hinge only): mu0, mu0/10, ... >= mu_min, then the exact hinge
        sm = opts["smoothing"]
        if sm == "auto":
            sm = 0.1 if loss == "hinge" else None
        mus = [0.0]
        if sm and loss == "hinge":
            mus = []
            mu = float(sm)
            while mu >= opts["mu_min"] * (1 - 1e-12):
                mus.append(mu)
                mu /= 10.0
            mus.append(0.0)
        hist: dict[str, list] = {"objective": [], "surrogate": [], "mu": [], "time": [],
                                 "sweep_time": [], "sweep_cpu": [], "change": []}
        t_start = time.perf_counter()
        status, message, it = Status.MAX_ITER, "", 0
        max_iter = int(opts["max_iter"])
        change = math.inf
        for phase, mu in enumerate(mus):
            eng.mu = mu
            last = phase == len(mus) - 1
            phase_status = None
            while it < max_iter:
                it += 1
                G_old = G.copy()  # for the stopping test (not part of the sweep time)
                ts = time.perf_counter()
                cs0 = time.process_time()
                if opts["order"] == "color":
                    for c in rng.permutation(len(blocks)):
                        eng.sweep_block(G, blocks[c])
                else:
                    for i in rng.permutation(Lab):
                        eng.sweep_row(G, int(i))
                    if not block:
                        for i in rng.permutation(U):
                            eng.sweep_row(G, int(i))
                if block and U.size:
                    eng.jacobi_unlabeled(G, U, LU)
                sweep = time.perf_counter() - ts
                sweep_cpu = time.process_time() - cs0
                # norms without BLAS (a threaded BLAS on a loaded machine costs more
                # than the sweep itself)
                G_old -= G
                change = math.sqrt(float(np.einsum("ij,ij->", G_old, G_old)) /
                                   max(float(np.einsum("ij,ij->", G, G)), 1e-300))
                hist["sweep_time"].append(sweep)
                hist["sweep_cpu"].append(sweep_cpu)
                hist["change"].append(change)
                hist["mu"].append(mu)
                if opts["record"]:
                    f = eng.objective(G)
                    hist["objective"].append(f)
                    hist["surrogate"].append(eng.objective(G, mu) if mu > 0 else f)
                hist["time"].append(time.perf_counter() - t_start)
                if not np.all(np.isfinite(G)):
                    phase_status = Status.NUMERICAL_ERROR
                    message = f"non-finite factor at sweep {it}"
                    break
                if change < opts["eps"]:
                    phase_status = Status.CONVERGED
                    message = (f"relative change {change:.2e} < eps = {opts['eps']:g} "
                               f"after {it} sweeps")
                    break
                if deadline is not None and time.perf_counter() > deadline:
                    phase_status = Status.TIMEOUT
                    message = f"time limit reached after {it} sweeps"
                    break
            if phase_status in (Status.NUMERICAL_ERROR, Status.TIMEOUT):
                status = phase_status
                break
            if last:
                if phase_status is Status.CONVERGED:
                    status = Status.CONVERGED
                else:
                    message = f"max_iter = {max_iter} sweeps reached (last change {change:.2e})"
        if len(mus) > 1:
            message += f"; hinge smoothing continuation mu = {mus[0]:g} .. {mus[-2]:g} -> 0"
        extras = {"rank": r, "order": opts["order"], "unlabeled": opts["unlabeled"],
                  "n_colors": len(blocks), "coloring_time": color_time,
                  "coloring_cpu": color_cpu,
                  "n_labeled": int(eng.labeled.sum()), "safeguard_rejections": eng.n_safeguard}
        if perm is not None:
            G = G[inv]
        return SolverOutput(G, status, it, hist, message, extras)


# ------------------------------------------------------------------ out-of-sample
def _rel(diff: np.ndarray, ref: np.ndarray) -> float:
    return math.sqrt(float(np.einsum("ij,ij->", diff, diff))
                     / max(float(np.einsum("ij,ij->", ref, ref)), 1e-300))


def extend(result: Any, new_points: Any, graph: Any, *, method: str = "block",
           eps: float = 1e-8, max_iter: int = 10000, b: float | None = None) -> np.ndarray:
    """Out-of-sample extension (seed 004 Section III-E): learn rows for new points.

    The in-sample rows (``result.factor``) stay fixed; the new rows minimise
    ``tr([G_I; G_O]^T L [G_I; G_O])`` over ``G_O``, i.e. they are treated as unlabeled
    points: eq. 13 row by row (``method="sequential"``, Gauss-Seidel) or eq. 17 for all
    new rows at once (``method="block"``, Jacobi), iterated until the relative change
    is below ``eps``.

    Parameters
    ----------
    result : Result or ndarray (n_in, r)
        A fitted result (its ``factor``) or the in-sample factor itself.
    new_points : array of int (n_new,)
        Positions of the new points in ``graph``; the remaining positions, in
        increasing order, are the in-sample points in the order of ``result.factor``.
    graph : sparse (n_in + n_new, n_in + n_new)
        Laplacian over in-sample and new points together (positive diagonal).
    method : {"block", "sequential"}
    eps : float
    max_iter : int
    b : float, optional
        Project each new row onto ``||g|| <= b`` (the linear loss's bound).

    Returns
    -------
    ndarray (n_new, r)
        The factor rows of the new points, in the order of ``new_points``.
    """
    from ..errors import ProblemError

    GI = np.asarray(getattr(result, "factor", result), dtype=float)
    if GI.ndim != 2:
        raise ProblemError(f"The 'result' parameter of extend must have a 2-D factor. Got shape {GI.shape}.")
    L = sp.csr_matrix(graph, dtype=float)
    N = L.shape[0]
    if L.shape != (N, N):
        raise ProblemError(f"The 'graph' parameter of extend must be square. Got shape {L.shape}.")
    new = np.asarray(new_points, dtype=np.int64).ravel()
    if new.size == 0 or new.min() < 0 or new.max() >= N or np.unique(new).size != new.size:
        raise ProblemError(f"The 'new_points' parameter of extend must be distinct indices in "
                           f"[0, {N - 1}]. Got {new_points!r}.")
    old = np.setdiff1d(np.arange(N), new)
    if old.size != GI.shape[0]:
        raise ProblemError(f"extend: graph has {N} points and {new.size} are new, so "
                           f"{old.size} in-sample rows are expected; the factor has {GI.shape[0]}.")
    if method not in ("block", "sequential"):
        raise ProblemError(f"The 'method' parameter of extend must be 'block' or 'sequential'. "
                           f"Got {method!r} instead.")
    d = L.diagonal()
    if np.any(d[new] <= 0):
        raise ProblemError("extend: every new point needs L_ii > 0 (build L with delta > 0).")
    r = GI.shape[1]
    G = np.zeros((N, r))
    G[old] = GI
    Lbar = (L - sp.diags(d)).tocsr()
    Lnew = Lbar[new]
    dn = d[new][:, None]

    def proj(g):
        if b is None:
            return g
        nr = np.sqrt(np.einsum("ij,ij->i", g, g))
        f = np.minimum(1.0, b / np.maximum(nr, 1e-300))
        return g * f[:, None]

    if method == "block":
        for _ in range(max_iter):
            gn = proj(-(Lnew @ G) / dn)
            ch = _rel(gn - G[new], gn)
            G[new] = gn
            if ch < eps:
                break
    else:
        Lb = Lbar
        for _ in range(max_iter):
            prev = G[new].copy()
            for i in new:
                a, e = Lb.indptr[i], Lb.indptr[i + 1]
                g = -(Lb.data[a:e] @ G[Lb.indices[a:e]]) / d[i]
                G[i] = proj(g[None, :])[0]
            ch = _rel(G[new] - prev, G[new])
            if ch < eps:
                break
    return G[new].copy()
