"""The duality-gap certificate of bcd (a feasible dual point from the loss derivatives or the
fitted hinge multipliers, scaled to ``L - M(s) >= 0`` by a certified eigenvalue), the escape
direction, the stretch step along a sweep, and the objective on the factor."""

from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from .numerics import (FIT_MAX_PAIRS, HINGE, SQUARE, SQUARED_HINGE, _MARGIN_LOSS, Certificate,
                       _rel_gap, box_qp, huber_hinge, lambda_min)


#: step multiples tried along a sweep's step when Anderson's extrapolation is rejected
#: (:meth:`BCDEngine.stretch`)
STRETCH = (2.0, 4.0, 8.0, 16.0, 32.0)


class Certify:
    """The duality-gap certificate of :class:`~kernelforms.solvers.bcd.BCDEngine` and what
    reads it: the dual scaling, the hinge multipliers, the escape direction, the stretch step
    and the objective; the engine's ``__init__`` sets the attributes they read."""

    # ---------------------------------------------------------------- certificate
    def _offdiag(self, w: np.ndarray) -> sp.csr_matrix:
        """``sum_p w_p (e_i e_j' + e_j e_i')`` over the pairs ``p = {i, j}``."""
        i, j = self.idx[:, 0], self.idx[:, 1]
        return sp.csr_matrix((np.concatenate([w, w]), (np.concatenate([i, j]),
                                                        np.concatenate([j, i]))),
                             shape=(self.n, self.n))

    def _scale_to_psd(self, M: sp.spmatrix) -> float | None:
        """The largest certified ``t`` in ``[0, 1]`` with ``L - t M`` PSD (``None``: no
        eigenvalue).  ``h(t) = lambda_min(L - t M)`` is concave, ``h(0) = lambda_min(L)``:
        one Newton step from ``t = 1``, then the chord from 0 certifies a root bracket."""
        if self._l0 is None:
            e0 = lambda_min(self.L)
            if e0 is None:
                return None
            self._l0 = e0[0]
        l0 = self._l0
        if l0 <= 0:
            return None
        e1 = lambda_min(self.L - M)
        if e1 is None:
            return None
        h1, v = e1
        if h1 >= 0:
            return 1.0
        vMv = float(v @ (M @ v))
        tn = 1.0 + h1 / vMv if vMv > 0 else 0.0  # the tangent's root (h1 < 0)
        tn = min(max(tn, 0.0), 1.0)
        if tn > 0:
            e2 = lambda_min(self.L - tn * M)
            if e2 is None:
                return None
            h2 = e2[0]
            if h2 >= 0:
                return tn
            return tn * l0 / (l0 - h2)
        return l0 / (l0 - h1)

    def _betas(self, G: np.ndarray, z: np.ndarray, mu: float) -> np.ndarray:
        """The dual variable ``beta_p`` of every pair's loss at ``G`` (margins ``z``).

        Each loss is ``max_beta beta (tau - z) - phi(beta)``: ``beta = -l'(z)`` for the
        squared (``2 (tau - z)``) and squared hinge (``2 max(0, 1 - z)``) losses and the
        smoothed hinge (``clip((1 - z) / mu, 0, 1)``); for the exact hinge, the row QPs'
        multipliers ``alpha = w beta / 2`` of the pair's two slots, averaged.
        """
        k = self.kind
        beta = np.where(k == SQUARE, 2.0 * (self.tau - z), 2.0 * np.maximum(0.0, 1.0 - z))
        h = k == HINGE
        if np.any(h):
            if mu > 0:
                bh = np.clip((1.0 - z) / mu, 0.0, 1.0)
            else:  # the row QPs' multipliers alpha = w s / 2, both slots averaged
                bh = np.clip(self.alpha[self.pair_slots].sum(axis=1) / self.w, 0.0, 1.0)
            beta = np.where(h, bh, beta)
        return beta

    def fitted_multipliers(self, G: np.ndarray, s0: np.ndarray) -> np.ndarray | None:
        """Hinge multipliers ``0 <= s <= 1`` that best satisfy stationarity ``Z(s) G = 0``.

        ``(L G)_i = sum_{j in T(i)} (w_ij / 2) s_ij T_ij g_j`` for the labeled rows (the
        unlabeled ones hold no ``s``): a bounded linear least-squares problem with one
        column per hinge pair (``2 r`` nonzeros), solved through its normal equations by
        :func:`box_qp`.  The other pairs (a problem mixing losses) keep their ``s0`` and
        move to the right-hand side.  Returns every pair's multiplier (``s0`` off the
        hinge pairs); ``None`` when there are more than ``FIT_MAX_PAIRS`` hinge pairs.
        """
        hp = np.flatnonzero(self.kind == HINGE)
        m = hp.size
        if m == 0 or m > FIT_MAX_PAIRS:
            return None
        r = G.shape[1]
        lab = np.flatnonzero(self.labeled)
        where = -np.ones(self.n, dtype=np.int64)
        where[lab] = np.arange(lab.size)
        i, j = self.idx[hp, 0], self.idx[hp, 1]
        ar = np.arange(r)
        rows = np.concatenate([(where[i][:, None] * r + ar).ravel(),
                               (where[j][:, None] * r + ar).ravel()])
        cols = np.tile(np.repeat(np.arange(m), r), 2)
        wT = (0.5 * self.w[hp] * self.T[hp])[:, None]
        vals = np.concatenate([(wT * G[j]).ravel(), (wT * G[i]).ravel()])
        A = sp.csr_matrix((vals, (rows, cols)), shape=(lab.size * r, m))
        R = self.L @ G
        if m < self.idx.shape[0]:  # the other pairs' part of Z(s) G, fixed
            o = self.kind != HINGE
            R = R - self._offdiag(np.where(o, 0.5 * self.w * self.T * s0, 0.0)) @ G
        b = R[lab].ravel()
        # the normal equations, a box QP solved by the same active-set method as the rows
        H = (A.T @ A).toarray()
        q = A.T @ b
        x = box_qp(H[None], q[None], 1.0, np.clip(s0[hp], 0.0, 1.0)[None], tol=1e-10,
                   max_cd=50)[0]
        x = np.clip(x, 0.0, 1.0)
        if not np.all(np.isfinite(x)):
            return None
        out = np.array(s0, dtype=float)
        out[hp] = x
        return out

    def _margin_certificate(self, z, trLK, beta, mu) -> Certificate | None:
        """The dual bound of the pair losses from the multipliers ``beta`` (any mix of
        hinge, squared hinge and squared losses; see :meth:`certificate`)."""
        w, k = self.w, self.kind
        t = self._scale_to_psd(self._offdiag(0.5 * w * self.T * beta))
        if t is None:
            return None
        h = k == HINGE
        lz = np.where(h, np.maximum(0.0, 1.0 - z),
                      np.where(k == SQUARED_HINGE, np.maximum(0.0, 1.0 - z) ** 2, (self.tau - z) ** 2))
        primal = trLK + float(np.sum(w * lz))
        # D(t') = sum w (t' beta tau - phi(t' beta)), phi = beta^2 / 4 off the hinge: concave
        # in the multiple t'; its best value up to the certified t
        a = float(np.sum(w * beta * self.tau))
        bq = float(np.sum(np.where(h, 0.0, w * beta * beta)))
        tt = min(t, 2.0 * a / bq) if bq > 0 else t
        tt = max(tt, 0.0)
        dual = tt * a - 0.25 * tt * tt * bq
        gap = primal - dual
        sm = gap
        if mu > 0 and np.any(h):  # the smoothed problem: Huber loss, phi(s) = mu s^2 / 2
            psm = trLK + float(np.sum(w * np.where(h, huber_hinge(z, mu), lz)))
            tb = tt * beta
            sm = psm - (dual - 0.5 * mu * float(np.sum(np.where(h, w * tb * tb, 0.0))))
        return Certificate(primal, dual, gap, _rel_gap(gap, primal, dual),
                           _rel_gap(sm, primal, dual))

    def certificate(self, G: np.ndarray, mu: float = 0.0) -> Certificate | None:
        """A feasible point of the dual of the convex problem in ``K`` built from ``G``.

        With ``w l(z) = w max_s s (tau - z) - w phi(s)`` per pair (hinge: ``0 <= s <= 1``,
        ``phi = 0``; squared hinge: ``s >= 0``, ``phi = s^2/4``; squared: ``phi = s^2/4``,
        the conjugates of the losses), the dual is ``max sum_p w_p (s_p tau_p - phi(s_p))``
        s.t. ``L - sum_p (w_p/2) s_p T_p (e_i e_j' + e_j e_i') >= 0``.  ``s`` comes from the
        iterate (the loss derivative, or the QP multipliers of the exact hinge) and is
        scaled by the largest certified ``t`` that makes the matrix PSD.  Linear loss:
        ``K_ii <= b^2`` gets multipliers ``nu`` from the row KKT conditions, shifted by
        ``-lambda_min``.  Soft PCP: ``s = 2 w (K_p - t_p)`` with a diagonal shift.
        ``primal - dual`` bounds ``primal - optimum``.  ``None`` when an eigenvalue could
        not be computed.
        """
        n = self.n
        i, j = self.idx[:, 0], self.idx[:, 1]
        Kp = np.einsum("ij,ij->i", G[i], G[j])
        trLK = float(np.sum(G * (self.L @ G)))
        if self.loss == "pcp":
            w, wd, td, tp = self.w, self.wd, self.td, self.tau
            s = 2.0 * w * (Kp - tp)
            sd = 2.0 * wd * (np.einsum("ij,ij->i", G, G) - td)
            primal = trLK + float(np.sum(s * s / (4.0 * w))) + float(np.sum(sd * sd / (4.0 * wd)))
            e = lambda_min(self.L + sp.diags(sd) + self._offdiag(0.5 * s))
            if e is None:
                return None
            sd = sd + max(0.0, -e[0])
            dual = (-float(s @ tp) - float(sd @ td) - float(np.sum(s * s / (4.0 * w)))
                    - float(np.sum(sd * sd / (4.0 * wd))))
            gap = primal - dual
            rel = _rel_gap(gap, primal, dual)
            return Certificate(primal, dual, gap, rel, rel)
        z = self.T * Kp
        if self.loss == "linear":
            primal = trLK - float(np.sum(self.w * z))
            Z0 = self.L - self._offdiag(0.5 * self.w * self.T)
            ZG = Z0 @ G
            nrm = np.einsum("ij,ij->i", G, G)
            nu = np.maximum(0.0, -np.einsum("ij,ij->i", ZG, G) / np.maximum(nrm, 1e-300))
            e = lambda_min(Z0 + sp.diags(nu))
            if e is None:
                return None
            dual = -self.b ** 2 * (float(nu.sum()) + n * max(0.0, -e[0]))
            gap = primal - dual
            rel = _rel_gap(gap, primal, dual)
            return Certificate(primal, dual, gap, rel, rel)
        s = self._betas(G, z, mu)
        s_fit = self.fitted_multipliers(G, s) if np.any(self.kind == HINGE) else None
        if s_fit is not None:
            c_fit = self._margin_certificate(z, trLK, s_fit, mu)
            c_own = self._margin_certificate(z, trLK, s, mu)
            if c_fit is None or c_own is None:
                return c_fit or c_own
            if mu > 0:  # keep the smoothed gap of the loss derivative (phase switch)
                c_fit.smoothed_rel_gap = c_own.smoothed_rel_gap
            return c_fit if c_fit.gap <= c_own.gap else c_own
        return self._margin_certificate(z, trLK, s, mu)

    def escape(self, G: np.ndarray, mu: float) -> tuple[np.ndarray, float] | None:
        """A descent step out of a non-optimal stationary point of the factored problem.

        BCD on ``G`` can stop at a point that is stationary in ``G`` but not optimal in
        ``K`` (the factorisation is non-convex).  There the dual matrix ``Z(s)`` built from
        the loss derivative ``s`` has a negative eigenvalue; its eigenvector ``v`` is a
        descent direction ``K + t v v'``.  In the factor: ``G + beta v w'``, ``w`` the
        right singular vector of ``G``'s smallest singular value, ``beta`` the best of a
        few halvings.  Returns ``(G_new, f_new)`` or ``None`` (no descent found).
        Smooth losses and the smoothed hinge (``mu > 0``) only.
        """
        i, j = self.idx[:, 0], self.idx[:, 1]
        Kp = np.einsum("ij,ij->i", G[i], G[j])
        if self.loss == "pcp":
            Z = (self.L + sp.diags((2.0 * self.wd) * (np.einsum("ij,ij->i", G, G) - self.td))
                 + self._offdiag(self.w * (Kp - self.tau)))
        elif self.loss == "linear":
            return None  # the ball constraint: BCD's projection handles the boundary
        else:
            if mu <= 0 and np.any(self.kind == HINGE):
                return None
            s = self._betas(G, self.T * Kp, mu)
            Z = self.L - self._offdiag(0.5 * self.w * self.T * s)
        e = lambda_min(Z)
        if e is None or e[0] >= 0:
            return None
        v = e[1] / np.linalg.norm(e[1])
        _, _, Wt = np.linalg.svd(G, full_matrices=False)
        w = Wt[-1]
        f0 = self.objective(G, mu)
        beta0 = float(np.sqrt(np.max(np.einsum("ij,ij->i", G, G))))
        best = None
        for k in range(16):
            for sgn in (1.0, -1.0):
                Gt = G + (sgn * beta0 * 0.5 ** k) * np.outer(v, w)
                if self.b is not None:
                    Gt = self._project(Gt)
                ft = self.objective(Gt, mu)
                if ft < f0 and (best is None or ft < best[1]):
                    best = (Gt, ft)
            if best is not None:
                break
        return best

    def stretch(self, G: np.ndarray, G_new: np.ndarray, f_new: float, mu: float = 0.0,
                factors: tuple[float, ...] = STRETCH) -> tuple[np.ndarray, float, float]:
        """The best of ``G + beta (G_new - G)`` over ``beta`` in ``(1,) + factors`` (increasing;
        stops at the first that does not lower the objective), projected onto the ball for
        the linear loss.  Returns ``(G', f(G'), beta)``.

        Near the saddle ``K = 0`` of the factored problem the sweep is close to a linear
        map ``G -> M G`` whose dominant eigenvalue is barely above 1 on a large graph (the
        smooth modes of L): the amplitude grows a few percent per sweep for hundreds of
        sweeps, and Anderson acceleration, which extrapolates to the fixed point, points
        back at the saddle.  ``beta M - (beta - 1) I`` has the same eigenvectors with the
        growth multiplied by ``beta``; the objective decides.
        """
        D = G_new - G
        if self.b is not None:  # the ball: project every candidate, evaluate it afresh
            best, fb, bb = G_new, f_new, 1.0
            for beta in factors:
                cand = self._project(G + beta * D)
                fc = self.objective(cand, mu)
                if not fc < fb:
                    break
                best, fb, bb = cand, fc, beta
            return best, fb, bb
        # K(beta) is quadratic in beta: two products with L serve every beta
        i, j = self.idx[:, 0], self.idx[:, 1]
        LG, LD = self.L @ G, self.L @ D
        a0, a1, a2 = float(np.sum(G * LG)), float(np.sum(D * LG)), float(np.sum(D * LD))
        Gi, Gj, Di, Dj = G[i], G[j], D[i], D[j]
        p0 = np.einsum("ij,ij->i", Gi, Gj)
        p1 = np.einsum("ij,ij->i", Gi, Dj) + np.einsum("ij,ij->i", Di, Gj)
        p2 = np.einsum("ij,ij->i", Di, Dj)
        pcp = self.loss == "pcp"
        if pcp:
            d0, d1, d2 = (np.einsum("ij,ij->i", G, G), 2.0 * np.einsum("ij,ij->i", G, D),
                          np.einsum("ij,ij->i", D, D))
        fb, bb = f_new, 1.0
        for beta in factors:
            fc = self._value(p0 + beta * (p1 + beta * p2), a0 + beta * (2.0 * a1 + beta * a2),
                             d0 + beta * (d1 + beta * d2) if pcp else None, mu)
            if not fc < fb:
                break
            fb, bb = fc, beta
        return (G_new, f_new, 1.0) if bb == 1.0 else (G + bb * D, fb, bb)

    def objective(self, G: np.ndarray, mu: float = 0.0) -> float:
        """The problem's objective at ``K = G G^T`` (with the Huber-smoothed hinge when
        ``mu > 0``)."""
        Kp = np.einsum("ij,ij->i", G[self.idx[:, 0]], G[self.idx[:, 1]])
        trLK = float(np.sum(G * (self.L @ G)))
        dg = np.einsum("ij,ij->i", G, G) if self.loss == "pcp" else None
        return self._value(Kp, trLK, dg, mu)

    def _value(self, Kp: np.ndarray, trLK: float, dg: np.ndarray | None, mu: float) -> float:
        """The objective from the pair entries ``K_p``, ``tr(L K)`` and (soft PCP) ``K_ii``."""
        if self.loss == "pcp":
            res = Kp - self.tau
            if self.gamma is not None:
                dd = dg - 1.0
                return trLK + 0.5 * self.gamma * float(res @ res + dd @ dd)
            dd = dg - self.td
            return trLK + float(np.sum(self.w * res * res)) + float(np.sum(self.wd * dd * dd))
        z = self.T * Kp
        if self.gamma is None:
            k = self.kind
            hinge = huber_hinge(z, mu) if mu > 0 else np.maximum(0.0, 1.0 - z)
            lz = np.where(k == HINGE, hinge,
                          np.where(k == SQUARED_HINGE, np.maximum(0.0, 1.0 - z) ** 2,
                                   np.where(k == SQUARE, (self.tau - z) ** 2, -z)))
            return trLK + float(np.sum(self.w * lz))
        lz = huber_hinge(z, mu) if (self.loss == "hinge" and mu > 0) else _MARGIN_LOSS[self.loss](z)
        return trLK + self.gamma * float(np.sum(lz))
