"""The bcd engine: the factor's rows as blocks, the colouring into independent sets and the
precomputed data of each colour; the updates and the certificate are its two halves
(:mod:`.rows`, :mod:`.certify`)."""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .certify import Certify
from .rows import RowUpdates, _Block  # noqa: F401 - _Block: the colours' data
from .view import _View


class BCDEngine(RowUpdates, Certify):
    """The BCD updates on a factor ``G`` (rows are the blocks).

    Parameters
    ----------
    view : _View
        The problem as :func:`_match` reads it from the declaration: the cost ``C``
        (symmetric, positive diagonal; ``L`` below), the pairs with their kinds, signs,
        targets and weights, the diagonal terms and the bound.
    """

    def __init__(self, view: _View, *, qp_tol: float = 1e-12):
        L = sp.csr_matrix(view.C, dtype=float)
        self.n = L.shape[0]
        self.d = L.diagonal().copy()
        Lbar = (L - sp.diags(self.d)).tocsr()
        Lbar.eliminate_zeros()
        Lbar.sort_indices()
        self.L = L
        self.Lbar = Lbar
        self.view = view
        # loss = the row update (view.mode); gamma = the one weight of a uniform mode
        self.loss, self.gamma, self.b = view.mode, view.gamma, view.b
        self.qp_tol = qp_tol
        idx = np.asarray(view.idx, dtype=np.int64).reshape(-1, 2)
        T = np.asarray(view.sign, dtype=float)
        self.idx, self.T = idx, T
        self.tau, self.w, self.kind = view.tau, view.w, view.kind
        self.wd, self.td = view.wd, view.td
        n = self.n
        rows = np.concatenate([idx[:, 0], idx[:, 1]])
        cols = np.concatenate([idx[:, 1], idx[:, 0]])
        # the (row, partner) slots of the pairs: slot -> pair, then the sign matrix P
        Pk = sp.csr_matrix((np.concatenate([np.arange(1, idx.shape[0] + 1)] * 2), (rows, cols)),
                           shape=(n, n))
        Pk.sort_indices()
        pair = Pk.data - 1
        P = sp.csr_matrix((T[pair], Pk.indices, Pk.indptr), shape=(n, n))
        self.P = P
        self.deg = np.diff(P.indptr)
        # per slot: the pair's target, weight and kind (the mixed and weighted updates)
        self.tau_slot, self.w_slot, self.kind_slot = self.tau[pair], self.w[pair], self.kind[pair]
        # loss "pcp" = soft PCP: squared losses on the pairs and on every K_ii; every row
        # carries its diagonal term, so every row is "labeled"
        self.labeled = self.deg > 0 if self.loss != "pcp" else np.ones(n, dtype=bool)
        self.alpha = np.zeros(P.nnz)  # dual warm starts, one per (row, partner) slot
        # the two (row, partner) slots of every pair, to read the pair multipliers back
        # (every pair owns exactly two slots: i != j, no duplicates)
        self.pair_slots = np.argsort(Pk.data, kind="stable").reshape(-1, 2)
        self._l0: float | None = None  # smallest eigenvalue of L (for the dual bound)
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
