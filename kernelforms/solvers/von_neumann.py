"""``"vonneumann"``: cyclic Bregman projections for the von Neumann divergence (Kulis et al. 2006, Algorithm 2).

The kernel is kept as ``K = V0 W diag(lam) W^T V0^T`` (Kulis et al. 2006, Section 5.2.1) with ``V0`` the
orthonormal eigenbasis of ``K0`` (``V0``, ``lam0`` of the declaration's Range form), ``W`` an ``r x r`` orthogonal
matrix (``I`` at the start) and ``lam`` the current eigenvalues (``lambda0`` at the start).
Only the rows ``z^T V0`` of the constrained points are used (gathered once).

Projection onto a constraint with matrix ``A`` (``z z^T`` for distances and diagonal
entries, ``(e_i e_j^T + e_j e_i^T)/2`` for an off-diagonal entry): eq. 6 gives
``log K+ = log K + alpha A`` on the range, i.e. in the current eigenbasis

    X(alpha) = exp(diag(log lam) + alpha A_w),   A_w = W^T V0^T A V0 W,

and ``alpha`` solves ``phi(alpha) = tr(X(alpha) A_w) = b`` (Kulis et al. 2006, Section 5.2.2).  ``phi`` is
increasing; we solve it with a safeguarded Newton iteration (on ``log phi`` for the
rank-one constraints, whose ``phi > 0``; on ``phi`` itself for entries), keeping a
bracket and bisecting whenever a Newton step leaves it.  The derivative comes from the
Daleckii-Krein formula: with ``X(alpha) = U diag(exp theta) U^T`` and ``q = U^T w``,
``phi'(alpha) = sum_kl q_k^2 q_l^2 (e^theta_k - e^theta_l)/(theta_k - theta_l)``.
At ``alpha = 0`` the matrix is already diagonal, so the first Newton step is free; a
projection typically needs 2-5 eigendecompositions (Kulis et al. 2006: "rarely more than six").
The dual correction of eq. 4 is applied to ``alpha`` and the state is updated by
``W <- W U``, ``lam <- exp(theta)`` at the corrected step.

Deviation from Kulis et al. (2006) (measured, see docs/bregman.md): the eigendecomposition of the
diagonal-plus-rank-one matrix is LAPACK's dense ``eigh`` (``O(r^3)`` flops) instead of a
secular-equation solver (``O(r^2)``); at r <= 64 one ``eigh`` call costs less than a
vectorised Python secular solver would, and the update ``W <- W U`` is a dense
``O(r^3)`` product in Kulis et al. (2006) too (they mention the fast multipole method to reduce it).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from scipy.linalg.lapack import dsyevd as _syevd

from ..model import GE, LE
from ._bregman import DUAL_POINT_WORK, PROJECTION_WORK
from ._bregman import TEST_RTOL, BregmanSolver, ConstraintRows, DualPoint  # noqa: F401

__all__ = ["VonNeumannProjection"]

#: Newton stops when |phi(alpha) - b| <= ROOT_RTOL * |b| (or the bracket collapses)
ROOT_RTOL = 1e-13
MAX_NEWTON = 60


def _exp_divided_differences(theta: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``F_kl = (e^theta_k - e^theta_l) / (theta_k - theta_l)`` (``e^theta_k`` on ties),
    written ``e^max(theta_k, theta_l) * (-expm1(-|x|)) / |x|`` with ``x = theta_k - theta_l``
    (no cancellation, and no overflow when the spread of theta exceeds 709)."""
    x = np.abs(theta[:, None] - theta[None, :])
    ratio = np.divide(-np.expm1(-x), x, out=np.ones_like(x), where=x != 0.0)
    return ratio * np.maximum(e[:, None], e[None, :])


class VonNeumannProjection(BregmanSolver):
    """Cyclic Bregman projections for P7 with the von Neumann divergence (Kulis et al. 2006, Algorithm 2).

    Options
    -------
    tol : float, default 1e-10
        Dual-change part of the stopping rule (relative 2-norm over the last sweep or
        Newton step).
    vtol : float, default 1e-6
        Feasibility part: every violation at most ``vtol`` times the constraint's scale
        ``max(|b_k|, value of the row's functional at K0)``; ``converged`` needs both.
    max_sweeps : int, default 5000
    check_every : int, default 1
        Record divergence and largest violation every this many iterations.
    newton : bool, default True
        Projected Newton steps on the dual between sweeps (``False``: the plain cyclic
        method of Kulis et al. 2006).

    Notes
    -----
    Kulis et al. (2006) Algorithm 2 writes the eigendecomposition ``U Theta U^T = Lambda + beta w w^T``;
    by eq. 6 it is ``log Lambda + beta w w^T`` (then ``Lambda <- exp(Theta)``), which is
    what we compute.  ``extras['newton_evals']`` is the mean number of eigendecompositions
    per projection.
    """

    name = "vonneumann"
    formulation_name = "factored V0 W diag(lam) W^T V0^T (Kulis et al. 2006, Alg. 2)"
    divergence = "von_neumann"

    def _projection_work(self, r: int) -> float:
        """A projection solves for its step with a few ``r x r`` eigendecompositions and
        rotates the factor (``W U``): about five burg projections' fixed cost plus ``r^3``
        several times."""
        return 5.0 * PROJECTION_WORK + 10.0 * float(r) ** 3

    def _dual_point_work(self, r: int, c: int) -> float:
        """A dual point takes the eigendecomposition of ``log Lambda0 + sum nu_k M_k`` and
        its exponential: about three burg dual points' fixed cost plus ``r^3`` several times."""
        return 3.0 * DUAL_POINT_WORK + c * r * r + 10.0 * float(r) ** 3

    def _setup(self, can: Any) -> None:
        V0, lam0 = can.form.V0, np.asarray(can.form.lam0, dtype=float)
        self.V0, self.lam0 = V0, lam0
        self.loglam0 = np.log(lam0)
        self.r = can.form.r
        self.rows = ConstraintRows.build(can.pair_rows, V0)
        self.W = np.eye(self.r)
        self.d = self.loglam0.copy()      # log of the current eigenvalues
        self.n_evals = 0
        self.n_solves = 0
        self.n_failed = 0
        self._plan = list(zip(range(len(self.rows.bound)), self.rows.left, self.rows.right,
                              self.rows.rank1.tolist(), self.rows.sense.tolist(),
                              self.rows.bound.tolist()))

    # ------------------------------------------------------------------ one projection
    def _eval(self, alpha: float, u: np.ndarray, v: np.ndarray, rank1: bool):
        """phi(alpha), phi'(alpha) and the eigendecomposition of d + alpha A_w."""
        d = self.d
        if rank1:
            M = alpha * np.outer(u, u)
        else:
            M = (0.5 * alpha) * (np.outer(u, v) + np.outer(v, u))
        M.flat[:: self.r + 1] += d
        theta, U, info = _syevd(M, lower=1)
        if info != 0:
            theta, U = np.linalg.eigh(M)
        self.n_evals += 1
        e = np.exp(theta)
        F = _exp_divided_differences(theta, e)
        qu = u @ U
        if rank1:
            q2 = qu * qu
            return float(q2 @ e), float(q2 @ F @ q2), theta, U
        qv = v @ U
        phi = float((qu * e) @ qv)
        P = np.outer(qu, qv)
        dphi = float(np.sum(F * P * (0.5 * (P + P.T))))
        return phi, dphi, theta, U

    def _solve_alpha(self, u: np.ndarray, v: np.ndarray, rank1: bool, b: float,
                     phi0: float, dphi0: float):
        """Safeguarded Newton for phi(alpha) = b; returns (alpha, theta, U) or NaN."""
        use_log = rank1                       # phi > 0 and b > 0 there
        def h_of(phi, dphi):
            if use_log:
                if phi <= 0:
                    return -math.inf, math.inf
                return math.log(phi) - math.log(b), dphi / phi
            return phi - b, dphi
        h, dh = h_of(phi0, dphi0)
        lo, hi = (-math.inf, 0.0) if h > 0 else (0.0, math.inf)
        alpha, theta, U = 0.0, None, None
        scale = 1.0 / max(float(u @ u), 1e-300)
        tolh = ROOT_RTOL if use_log else ROOT_RTOL * max(abs(b), 1e-300)
        expand = 1.0
        for _ in range(MAX_NEWTON):
            step = -h / dh if dh > 0 and math.isfinite(dh) else math.nan
            cand = alpha + step if math.isfinite(step) else math.nan
            if not (lo < cand < hi):
                if math.isfinite(lo) and math.isfinite(hi):
                    cand = 0.5 * (lo + hi)
                elif math.isfinite(lo):
                    cand = lo + expand * scale
                    expand *= 4.0
                else:
                    cand = hi - expand * scale
                    expand *= 4.0
            alpha = cand
            phi, dphi, theta, U = self._eval(alpha, u, v, rank1)
            h, dh = h_of(phi, dphi)
            if abs(h) <= tolh:
                return alpha, theta, U
            if h > 0:
                hi = alpha
            else:
                lo = alpha
            if math.isfinite(lo) and math.isfinite(hi) and hi - lo <= 1e-15 * max(abs(lo), abs(hi)):
                return alpha, theta, U
        return math.nan, None, None

    def _sweep(self, nu: list, deadline: float | None = None) -> int:
        done = 0
        W = self.W
        clock = time.perf_counter
        for k, zl, zr, rank1, sense, b in self._plan:
            if deadline is not None and not k & 15 and k and clock() > deadline:
                break
            W = self.W
            d = self.d
            lam = np.exp(d)
            u = zl @ W
            if rank1:
                v = u
                q2 = u * u
                phi0 = float(q2 @ lam)
                if phi0 <= 0.0:
                    continue
                if b <= 0.0:                  # only '>=' reaches here: never active
                    nk = nu[k]
                    if nk == 0.0:
                        continue
            else:
                v = zr @ W
                phi0 = float((u * lam) @ v)
                q2 = None
            nk = nu[k]
            # inactive inequality with zero dual: alpha' = 0, skip the root finding
            if sense == LE and nk == 0.0 and phi0 <= b:
                continue
            if sense == GE and nk == 0.0 and phi0 >= b:
                continue
            F0 = _exp_divided_differences(d, lam)
            if rank1:
                dphi0 = float(q2 @ F0 @ q2)
            else:
                P = np.outer(u, v)
                dphi0 = float(np.sum(F0 * P * (0.5 * (P + P.T))))
            if rank1 and b <= 0.0:
                alpha, theta, U = -math.inf, None, None
            else:
                self.n_solves += 1
                alpha, theta, U = self._solve_alpha(u, v, rank1, b, phi0, dphi0)
                if math.isnan(alpha):
                    self.n_failed += 1
                    continue
            if sense == LE:
                a2 = min(-nk, alpha)
            elif sense == GE:
                a2 = max(-nk, alpha)
            else:
                a2 = alpha
            if a2 == 0.0:
                continue
            if a2 != alpha:
                _, _, theta, U = self._eval(a2, u, v, rank1)
            self.W = W @ U
            self.d = theta
            nu[k] = nk + a2
            done += 1
        return done

    # ------------------------------------------------------------------ the dual
    def _dual_point(self, nu: np.ndarray) -> DualPoint | None:
        # X(nu) = exp(log Lambda0 + sum nu_k M_k); g = sum lambda0 - tr X + nu.b
        Y = self.rows.combination(nu)
        Y.flat[:: self.r + 1] += self.loglam0
        if not np.all(np.isfinite(Y)):
            return None
        theta, U = np.linalg.eigh(Y)
        if theta[-1] > 700.0:
            return None
        e = np.exp(theta)
        LU = self.rows.left @ U
        RU = LU if self.rows.rank1.all() else self.rows.right @ U
        vals = np.einsum("ij,j,ij->i", LU, e, RU)
        g = float(np.sum(self.lam0) - np.sum(e) + nu @ self.rows.bound)
        return DualPoint(g, vals, (theta, U, e, LU, RU))

    def _dual_hessian(self, point: DualPoint, idx: np.ndarray) -> np.ndarray:
        # Daleckii-Krein: H_kl = sum_ij F_ij (U^T M_k U)_ij (U^T M_l U)_ij
        theta, U, e, LU, RU = point.state
        f = _exp_divided_differences(theta, e).ravel()
        L, R = LU[idx], RU[idx]
        m = len(idx)
        Z = (L[:, :, None] * R[:, None, :]).reshape(m, -1)
        Zf = Z * f
        T1 = Zf @ Z.T
        if self.rows.rank1[idx].all():
            return T1
        Z2 = (R[:, :, None] * L[:, None, :]).reshape(m, -1)
        T = 0.5 * (T1 + Zf @ Z2.T)
        return 0.5 * (T + T.T)

    def _newton_affordable(self, m: int) -> bool:
        # the Daleckii-Krein Hessian costs m^2 r^2 flops and an m x r^2 temporary
        return m <= 3000 and m * m * self.r * self.r <= 4e8

    def _set_state(self, point: DualPoint) -> None:
        theta, U = point.state[0], point.state[1]
        self.W = U.copy()
        self.d = theta.copy()

    # ------------------------------------------------------------------ readouts
    def _factor_F(self) -> np.ndarray:
        return self.W * np.exp(0.5 * self.d)

    def _divergence(self) -> float:
        lam = np.exp(self.d)
        diagW = (self.W * self.W) @ lam           # diag(W diag(lam) W^T)
        return float(np.sum(lam * self.d) - diagW @ self.loglam0 - np.sum(lam) + np.sum(self.lam0))

    def _kernel(self) -> np.ndarray:
        return self.V0 @ self._factor_F()

    def _extras(self) -> dict[str, Any]:
        return {"newton_evals": self.n_evals / max(self.n_solves, 1),
                "root_failures": self.n_failed}
