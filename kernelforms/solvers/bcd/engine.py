"""The bcd engine: the factor's rows as blocks, the colouring into independent sets and the
precomputed data of each colour; the updates and the certificate are its two halves
(:mod:`.rows`, :mod:`.certify`)."""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from ...model import LE, RowKind, canonical
from .certify import Certify
from .numerics import HINGE, KIND_NAMES, LINEAR, SQUARE, SQUARED_HINGE, _ROW_UPDATES
from .rows import RowUpdates, _Block  # noqa: F401 - _Block: the colours' data


class BCDEngine(RowUpdates, Certify):
    """The BCD updates on a factor ``G`` (rows are the blocks).

    The pair rows are in a margin form: pair ``p = {i, j}`` (``i != j``) carries
    ``w_p l_p(z_p)`` with ``z_p = s_p K_ij`` (``T``: the signs ``s_p``) and, by its loss's
    row update (``kind``), ``l = max(0, 1 - z)`` (hinge), ``max(0, 1 - z)^2``,
    ``(tau_p - z)^2`` (a squared loss ``(K_ij - t)^2``: ``s = t, tau = 1`` when ``t = +-1``,
    else ``s = 1, tau = t``) or ``-z`` (linear).  ``loss`` names the row update: one kind
    with one weight (``"hinge"``, ``"squared_hinge"``, ``"square"``, ``"linear"``: the
    closed forms of Hu & Kwok 2015, ``gamma`` the weight), ``"pcp"`` (squared losses on the
    pairs and on every ``K_ii``, weights ``wd`` and targets ``td``: the quartic row of soft
    PCP), or ``"mixed"`` (any mix of hinge, squared hinge and squared losses and weights:
    one box QP per row); ``b``: the bound ``K_ii <= b^2`` of the linear loss.

    Parameters
    ----------
    source : a problem, a declaration or its canonical form
        Read through :func:`kernelforms.model.canonical` (the reduced declaration: a
        minimisation, points forced equal merged): the sparse cost ``C`` (symmetric,
        positive diagonal; ``L`` below), the loss blocks on entries and on ``K_ii``, and the
        constraint block ``K_ii <= b^2``.  :meth:`BCDKL.applies_to` has checked that bcd
        takes it.
    perm : the points renumbered (new point ``a`` is point ``perm[a]``), or None
    """

    def __init__(self, source, *, perm: np.ndarray | None = None, qp_tol: float = 1e-12):
        can = canonical(source)
        n = can.n
        C = can.C
        I, J, W, K, S, Tau = [], [], [], [], [], []
        wd = td = None
        for blk in can.loss_blocks:
            if blk.kind == RowKind.DIAGONAL:  # squared losses on K_ii (soft PCP)
                wd, td = np.empty(n), np.empty(n)
                wd[blk.i], td[blk.i] = blk.weight, blk.data
                continue
            k = _ROW_UPDATES[blk.loss_type.row_update]
            m = blk.size
            I.append(blk.i)
            J.append(blk.j)
            W.append(blk.weight)
            K.append(np.full(m, k, dtype=np.int64))
            S.append(blk.data)  # margin losses: the label; squared: the target (below)
            Tau.append(np.ones(m) if k in (HINGE, SQUARED_HINGE) else
                       np.zeros(m) if k == LINEAR else np.full(m, np.nan))
        cat = (lambda x, dt: np.concatenate(x).astype(dt) if x else np.zeros(0, dt))  # noqa: E731
        i, j, w, kind = cat(I, np.int64), cat(J, np.int64), cat(W, float), cat(K, np.int64)
        lab, tau = cat(S, float), cat(Tau, float)
        sq = kind == SQUARE
        unit = np.abs(lab) == 1.0
        one = np.unique(kind)
        uniform = bool(w.size and np.all(w == w[0]))
        b = None
        le = can.constraint_blocks.get(LE)
        if le is not None:
            b = math.sqrt(float(le.bound[0]))
        if wd is not None:
            mode = "pcp"
            sign = np.ones(i.size)
            tau = lab
            gamma = (2.0 * float(wd[0]) if bool(np.all(w == wd[0]) and np.all(wd == wd[0])
                                                and np.all(td == 1.0)) else None)
        else:
            sign = np.where(sq & ~unit, 1.0, lab)
            tau = np.where(sq, np.where(unit, 1.0, lab), tau)
            if one.size == 1 and one[0] == LINEAR:
                mode, gamma = "linear", (float(w[0]) if uniform else None)
            elif uniform and one.size == 1 and (one[0] != SQUARE or np.all(unit)):
                mode, gamma = KIND_NAMES[int(one[0])], float(w[0])
            else:
                mode, gamma = "mixed", None
        idx = np.stack([i, j], axis=1)
        L = sp.csr_matrix(C, dtype=float)
        if perm is not None:
            inv = np.empty(n, dtype=np.int64)
            inv[perm] = np.arange(n)
            L, idx = L[perm][:, perm].tocsr(), inv[idx]
            wd = None if wd is None else wd[perm]
            td = None if td is None else td[perm]
        self.n = n
        self.d = L.diagonal().copy()
        Lbar = (L - sp.diags(self.d)).tocsr()
        Lbar.eliminate_zeros()
        Lbar.sort_indices()
        self.L = L
        self.Lbar = Lbar
        # loss = the row update; gamma = the one weight of a uniform mode (pcp: twice it)
        self.loss, self.gamma, self.b = mode, gamma, b
        self.qp_tol = qp_tol
        T = np.asarray(sign, dtype=float)
        self.idx, self.T = idx, T
        self.tau, self.w, self.kind = tau, w, kind
        self.wd, self.td = wd, td
        self.has_hinge = bool(np.any(kind == HINGE))
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
