"""The row updates of bcd: one colour of rows at once (labeled rows by their closed form or
box QP, unlabeled rows by eq. 13 / 17), one row (the sequential order), with the per-row
safeguard that keeps every sweep monotone."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .numerics import HINGE, QP_MAX_CD, SQUARE, SQUARED_HINGE, box_qp, huber_hinge, spd_solve


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


class RowUpdates:
    """The row updates of :class:`~kernelforms.solvers.bcd.BCDEngine` (eq. 13, 17, 21-31 of Hu &
    Kwok 2015, the mixed box QP and the quartic row of soft PCP); the engine's ``__init__``
    sets the attributes they read."""

    # ---------------------------------------------------------------- updates
    def _project(self, g: np.ndarray) -> np.ndarray:
        nrm = np.sqrt(np.einsum("ij,ij->i", g, g))
        over = nrm > self.b
        if np.any(over):
            g = g.copy()
            g[over] *= (self.b / nrm[over])[:, None]
        return g

    def _row_value(self, g, c, d, GJ, S, mask, pos=None) -> np.ndarray:
        """The row objective ``d||g||^2 + 2 g.c + gamma sum loss(a_j . g)`` (batched);
        ``a_j = S_j g_j`` with the partner rows ``GJ`` and signs ``S`` (0 where padded).
        Mixed kinds and weights (``pos``: the slots): ``sum_j w_j l_j(a_j . g)``."""
        z = S * np.einsum("btr,br->bt", GJ, g)
        if self.loss == "mixed":
            k = self.kind_slot[pos]
            tau = self.tau_slot[pos]
            lz = np.where(k == HINGE, huber_hinge(z, self.mu),
                          np.where(k == SQUARED_HINGE, np.maximum(0.0, 1.0 - z) ** 2,
                                   (tau - z) ** 2))
            return (d * np.einsum("br,br->b", g, g) + 2.0 * np.einsum("br,br->b", g, c)
                    + np.sum(np.where(mask, self.w_slot[pos] * lz, 0.0), axis=1))
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
            wts = None if self.gamma is not None else (
                np.where(mask, self.w_slot[pos], 0.0), self.wd[rows], self.td[rows])
            return self._update_pcp(G, rows, C, d, G[J] * mask[:, :, None],
                                    np.where(mask, self.tau_slot[pos], 0.0), mask, wts)
        GJ = G[J]  # (B, t, r); padded entries carry S = 0
        gam = self.gamma
        loss = self.loss
        t = S.shape[1]
        ii = np.arange(t)
        if loss == "mixed":
            return self._update_mixed(G, rows, C, d, GJ, S, pos, mask)
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
            alpha = box_qp(P, q, upper, a0, tol=self.qp_tol, max_cd=QP_MAX_CD)
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
        elif gam is not None:  # linear
            g = self._project((0.5 * gam * np.einsum("bt,btr->br", S, GJ) - C) / d[:, None])
        else:  # linear, weights per pair
            Sw = 0.5 * S * np.where(mask, self.w_slot[pos], 0.0)
            g = self._project((np.einsum("bt,btr->br", Sw, GJ) - C) / d[:, None])
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

    def _update_mixed(self, G, rows, C, d, GJ, S, pos, mask) -> np.ndarray:
        """Rows whose pairs mix hinge, squared hinge and squared losses, weights per pair.

        Each loss is ``w l(z) = w max_beta beta (tau - z) - w phi(beta)`` (hinge:
        ``0 <= beta <= 1``, ``phi = 0`` (Huber: ``mu beta^2 / 2``); squared hinge:
        ``beta >= 0``, ``phi = beta^2 / 4``; squared: ``beta`` free, ``phi = beta^2 / 4``).
        With ``alpha_j = w_j beta_j / 2`` the row's dual is the box QP of eq. 22 / 25 with a
        bound per entry: ``min 1/2 a'(P + D)a - a'q``, ``P = A A^T``, ``q_j = a_j.c_i +
        C_ii tau_j``, ``D_jj = C_ii / w_j`` for the quadratic ``phi`` (``2 mu C_ii / w_j`` for
        the smoothed hinge), ``0 <= a_j <= w_j / 2`` (hinge), ``a_j >= 0`` (squared hinge),
        ``a_j`` free (squared); ``g = (A^T a - c_i) / C_ii`` (eq. 21).
        """
        t = S.shape[1]
        ii = np.arange(t)
        k = np.where(mask, self.kind_slot[pos], -1)
        w = np.where(mask, self.w_slot[pos], 1.0)
        tau = np.where(mask, self.tau_slot[pos], 0.0)
        P = np.einsum("btr,bsr->bts", GJ, GJ) * (S[:, :, None] * S[:, None, :])
        q = np.where(mask, S * np.einsum("btr,br->bt", GJ, C) + d[:, None] * tau, 0.0)
        quad = (k == SQUARED_HINGE) | (k == SQUARE)
        add = np.where(quad, d[:, None] / w, 0.0) + np.where(mask, 0.0, 1.0)
        if self.mu > 0:
            add = add + np.where(k == HINGE, (2.0 * self.mu) * d[:, None] / w, 0.0)
        P[:, ii, ii] += add
        lower = np.where(k == SQUARE, -np.inf, 0.0)
        upper = np.where(k == HINGE, 0.5 * w, np.where(mask, np.inf, 0.0))
        a0 = np.where(mask, self.alpha[pos], 0.0)
        alpha = box_qp(P, q, upper, a0, lower=lower, tol=self.qp_tol, max_cd=QP_MAX_CD)
        alpha = np.where(mask, alpha, 0.0)
        self.alpha[pos[mask]] = alpha[mask]
        g = (np.einsum("bt,btr->br", alpha * S, GJ) - C) / d[:, None]
        old = G[rows]
        vn = self._row_value(g, C, d, GJ, S, mask, pos)
        vo = self._row_value(old, C, d, GJ, S, mask, pos)
        worse = ~(vn <= vo + 1e-13 * (np.abs(vo) + 1.0))
        if np.any(worse):
            self.n_safeguard += int(worse.sum())
            g[worse] = old[worse]
        return g

    # ---------------------------------------------------------------- P1 rows
    def _pcp_value(self, g, c, d, Bt, mask, wts=None) -> np.ndarray:
        """P1 row objective ``d s + 2 g.c + gamma/2 (s-1)^2 + gamma/2 sum (g.g_j - t_j)^2``.

        ``Bt`` is the pair ``(B, tgt)`` of partner rows and targets.  With weights
        ``wts = (w_j, w_d, t_d)``: ``d s + 2 g.c + w_d (s - t_d)^2 + sum w_j (g.g_j - t_j)^2``.
        """
        B, tgt = Bt
        sq = np.einsum("br,br->b", g, g)
        z = (B @ g[:, :, None])[:, :, 0]
        if wts is not None:
            wq, wd, td = wts
            return (d * sq + 2.0 * np.einsum("br,br->b", g, c) + wd * (sq - td) ** 2
                    + np.sum(np.where(mask, wq * (z - tgt) ** 2, 0.0), axis=1))
        return (d * sq + 2.0 * np.einsum("br,br->b", g, c)
                + 0.5 * self.gamma * ((sq - 1.0) ** 2
                                      + np.sum(np.where(mask, (z - tgt) ** 2, 0.0), axis=1)))

    def _update_pcp(self, G, rows, C, d, B, tgt, mask, wts=None) -> np.ndarray:
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

        Weights of their own (``wts = (w_j, w_d, t_d)``, per slot and per row): ``H = d I +
        B' diag(w) B``, ``h = -c_i + B' (w t)``, ``mu = 2 w_d (s - t_d)`` and the secular
        equation's right-hand side ``t_d + mu / (2 w_d)``.
        """
        nb, t = mask.shape
        r = G.shape[1]
        if wts is None:  # one weight: gamma / 2 on every term, t_d = 1
            gam = two_wd = self.gamma
            td = 1.0
            h = -C + 0.5 * gam * (tgt[:, None, :] @ B)[:, 0, :]
        else:
            wq, wd, td = wts
            two_wd = 2.0 * wd
            h = -C + ((wq * tgt)[:, None, :] @ B)[:, 0, :]

        def sub(a, sel):
            return a[sel] if np.ndim(a) else a

        M = np.concatenate([B.transpose(0, 2, 1), h[:, :, None]], axis=2)  # (nb, r, t+1)
        if t + 1 < r:
            Q, _ = np.linalg.qr(M)  # (nb, r, t+1): spans the partners and h
        else:
            Q = np.broadcast_to(np.eye(r), (nb, r, r))
        BQ = B @ Q
        k = Q.shape[2]
        if wts is None:
            Hq = 0.5 * gam * (BQ.transpose(0, 2, 1) @ BQ) + d[:, None, None] * np.eye(k)
        else:
            Hq = BQ.transpose(0, 2, 1) @ (wq[:, :, None] * BQ) + d[:, None, None] * np.eye(k)
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
        hard = (weight_bottom <= tiny) & (s_rest <= td - lam1 / two_wd)
        mu = np.empty(nb)
        # regular case: root of f(mu) = sum ht^2/(lam+mu)^2 - 1 - mu/gam on (-lam1, inf)
        reg = ~hard
        if np.any(reg):
            lr, hr, l1 = lam[reg], ht[reg], lam1[reg]
            tdr, twr = sub(td, reg), sub(two_wd, reg)
            lo = -l1
            hi = np.maximum(-l1 + hn[reg], 0.0) + tiny[reg]
            m = hi.copy()
            for _ in range(200):
                den = lr + m[:, None]
                f = np.sum(hr * hr / den**2, axis=1) - tdr - m / twr
                fp = -2.0 * np.sum(hr * hr / den**3, axis=1) - 1.0 / twr
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
            extra = np.sqrt(np.maximum(0.0, sub(td, hb) - lam1[hb] / sub(two_wd, hb) - s_rest[hb]))
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
        vn = self._pcp_value(g, C, d, (B, tgt), mask, wts)
        vo = self._pcp_value(old, C, d, (B, tgt), mask, wts)
        worse = ~(vn <= vo + 1e-13 * (np.abs(vo) + 1.0))
        if np.any(worse):
            self.n_safeguard += int(worse.sum())
            g[worse] = old[worse]
        return g

    def update_unlabeled(self, C: np.ndarray, rows: np.ndarray) -> np.ndarray:
        g = -C / self.d[rows][:, None]
        return self._project(g) if self.b is not None else g

    def sweep_block(self, G: np.ndarray, blk: _Block) -> None:
        """Update every row of one independent set at once (in place)."""
        if blk.n_unl:  # eq. 13 for all of them at once (independent rows)
            g = blk.Lunl @ G
            G[blk.unl_rows] = self._project(g) if self.b is not None else g
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
            if self.b is not None:
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
