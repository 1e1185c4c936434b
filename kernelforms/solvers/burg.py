"""``"burg"``: cyclic Bregman projections for the Burg (LogDet) divergence (Kulis et al. 2006, Algorithm 1).

The kernel is kept as ``K = G0 B B^T G0^T`` (Kulis et al. 2006, Section 5.1.2) with ``G0`` the factor
of ``K0`` (the declaration's Range form) and ``B`` an ``r x r`` matrix, ``B = I`` at the start.  A projection never touches
``n``: the rows ``z^T G0`` of the constrained points are gathered once.

Rank-one constraint ``z^T K z <sense> b`` (distances, diagonal entries).  With
``w = B^T G0^T z`` and ``p = ||w||^2`` (the current value), Kulis et al. (2006) Section 5.1.1 gives the
closed form ``alpha = 1/p - 1/b``; after the dual correction (eq. 4) the update is
``K <- K + beta K z z^T K`` with ``beta = alpha' / (1 - alpha' p)``, i.e.
``B <- B L`` with ``L L^T = I + beta w w^T``.  We take the **symmetric square root**
``L = I + s w w^T``, ``s = (1 / sqrt(1 - alpha' p) - 1) / p`` (then
``(I + s w w^T)^2 = I + beta w w^T``), so ``B L = B + s (B w) w^T`` costs one
matrix-vector product and one rank-one update: ``O(r^2)``.

Rank-two constraint ``K_ij <sense> b`` with ``i != j`` (``A = (e_i e_j^T + e_j e_i^T)/2``,
Kulis et al. (2006) Section 5.3 omits the details).  The Bregman projection still has one dual
parameter: ``K+ = G0 B M^{-1} B^T G0^T`` with ``M = I - alpha (u v^T + v u^T)/2``,
``u = B^T G0^T e_i``, ``v = B^T G0^T e_j``.  With ``a11 = u.u``, ``a22 = v.v``,
``a12 = u.v`` and ``D = a11 a22 - a12^2`` the new value is

    phi(alpha) = u^T M^{-1} v = (4 a12 + 2 D alpha) / (4 - 4 a12 alpha - D alpha^2),

increasing on the interval where ``M`` is positive definite,
``-2/(s - a12) < alpha < 2/(s + a12)`` with ``s = sqrt(a11 a22)``, so ``phi(alpha) = b``
is the quadratic ``b D alpha^2 + (2 D + 4 b a12) alpha + 4 (a12 - b) = 0`` with exactly
one root in that interval (exact, no iteration).  ``(u v^T + v u^T)/2`` has the
eigenpairs ``mu_pm = (a12 +- s)/2``, ``e_pm ~ u/|u| +- v/|v|``, so the symmetric
``M^{-1/2} = I + sum_pm (1/sqrt(1 - alpha mu_pm) - 1) e_pm e_pm^T`` is again an
``O(r^2)`` update of ``B``.
"""

from __future__ import annotations

import math
from typing import Any

import time

import numpy as np
import scipy.linalg

from ..model import GE, LE
from ._bregman import TEST_RTOL, BregmanSolver, ConstraintRows, DualPoint  # noqa: F401  (TEST_RTOL re-exported)

__all__ = ["BurgProjection", "entry_step"]


def entry_step(a11: float, a22: float, a12: float, b: float) -> float:
    """The exact Burg projection step onto ``u^T M(alpha)^{-1} v = b`` (rank-two entry).

    Returns the root of ``b D a^2 + (2 D + 4 b a12) a + 4 (a12 - b) = 0`` inside the
    interval where ``M(alpha)`` is positive definite (see the module docstring).
    """
    s = math.sqrt(max(a11 * a22, 0.0))
    D = max(a11 * a22 - a12 * a12, 0.0)
    hi = 2.0 / (s + a12) if s + a12 > 0 else math.inf
    lo = -2.0 / (s - a12) if s - a12 > 1e-15 * max(s, 1e-300) else -math.inf
    qa, qb, qc = b * D, 2.0 * D + 4.0 * b * a12, 4.0 * (a12 - b)
    roots = []
    if abs(qa) <= 1e-14 * (abs(qb) + abs(qc)):
        if qb != 0:
            roots = [-qc / qb]
    else:
        disc = qb * qb - 4 * qa * qc
        if disc >= 0:
            sq = math.sqrt(disc)
            q = -0.5 * (qb + math.copysign(sq, qb))
            roots = [q / qa] + ([qc / q] if q != 0 else [])
    inside = [x for x in roots if lo < x < hi]
    if not inside:
        return math.nan
    # both inside can only happen through round-off at an end point: take the one closer to 0
    return min(inside, key=abs)


class BurgProjection(BregmanSolver):
    """Cyclic Bregman projections for P7 with the Burg divergence (Kulis et al. 2006, Algorithm 1).

    Options
    -------
    tol : float, default 1e-10
        Dual-change part of the stopping rule: the dual variables change by at most ``tol``
        (relative 2-norm) over the last sweep or Newton step.
    vtol : float, default 1e-6
        Feasibility part of the stopping rule: every constraint's violation is at most
        ``vtol`` times its scale ``max(|b_k|, value of the row's functional at K0)``.
        ``converged`` needs both.
    max_sweeps : int, default 5000
        Sweeps (full passes over the constraints) at most.
    check_every : int, default 1
        Record divergence and largest violation in the history every this many iterations.
    newton : bool, default True
        Alternate the sweeps with projected Newton steps on the dual (see
        :mod:`kernelforms.solvers._bregman`); ``False`` runs the plain cyclic method of
        Kulis et al. (2006).

    Notes
    -----
    Per projection: ``O(r^2)`` (one ``r``-vector-matrix product for ``w = B^T v``, one for
    ``B w`` and a rank-one update of ``B``).  The factor ``G = G0 B`` (``O(n r^2)``) is formed
    once at the end.  The result has the rank of ``K0`` (the Burg divergence is finite only
    on the range of ``K0``).
    """

    name = "burg"
    formulation_name = "factored G0 B (Kulis et al. 2006, Alg. 1)"
    divergence = "burg"

    def _setup(self, can: Any) -> None:
        self.G0 = np.asarray(can.form.G0, dtype=float)
        self.r = can.form.r
        self.rows = ConstraintRows.build(can.pair_rows, self.G0)
        self.B = np.eye(self.r)
        self.n_failed = 0
        # plain Python lists: scalar access in the sequential loop is cheapest this way
        self._plan = list(zip(range(len(self.rows.bound)), self.rows.left, self.rows.right,
                              self.rows.rank1.tolist(), self.rows.sense.tolist(),
                              self.rows.bound.tolist()))

    def _sweep(self, nu: list, deadline: float | None = None) -> int:
        B = self.B
        done = 0
        sqrt, outer, dot = math.sqrt, np.outer, np.dot
        clock = time.perf_counter
        for k, zl, zr, rank1, sense, b in self._plan:
            if deadline is not None and not k & 255 and k and clock() > deadline:
                break
            if rank1:
                w = dot(zl, B)                    # (B^T z)^T
                p = float(dot(w, w))
                if p <= 0.0:
                    continue                      # z outside range(K0): value fixed at 0
                if b > 0.0:
                    alpha = 1.0 / p - 1.0 / b
                else:                             # only '>=' reaches here: never active
                    alpha = -math.inf
                nk = nu[k]
                if sense == LE:
                    alpha = min(-nk, alpha)
                elif sense == GE:
                    alpha = max(-nk, alpha)
                if alpha == 0.0:
                    continue
                t = 1.0 - alpha * p
                sc = (1.0 / sqrt(t) - 1.0) / p
                B += sc * outer(dot(B, w), w)
                nu[k] = nk + alpha
                done += 1
            else:
                u = dot(zl, B)
                v = dot(zr, B)
                a11, a22, a12 = float(dot(u, u)), float(dot(v, v)), float(dot(u, v))
                if a11 <= 0.0 or a22 <= 0.0:
                    continue                      # K_ij fixed at 0
                alpha = entry_step(a11, a22, a12, b)
                if math.isnan(alpha):
                    self.n_failed += 1
                    continue
                nk = nu[k]
                if sense == LE:
                    alpha = min(-nk, alpha)
                elif sense == GE:
                    alpha = max(-nk, alpha)
                if alpha == 0.0:
                    continue
                s = math.sqrt(a11 * a22)
                nu_ = u / math.sqrt(a11)
                nv_ = v / math.sqrt(a22)
                for sign in (1.0, -1.0):
                    mu = 0.5 * (a12 + sign * s)
                    if abs(mu) <= 1e-15 * s:
                        continue
                    e = nu_ + sign * nv_
                    e /= math.sqrt(float(dot(e, e)))
                    sc = 1.0 / sqrt(1.0 - alpha * mu) - 1.0
                    B += sc * outer(dot(B, e), e)
                nu[k] = nk + alpha
                done += 1
        return done

    def _factor_F(self) -> np.ndarray:
        return self.B

    # ------------------------------------------------------------------ the dual
    def _dual_point(self, nu: np.ndarray) -> DualPoint | None:
        # W = S^{-1}, S = I - sum nu_k M_k (must be positive definite); g = log det S + nu.b
        S = np.eye(self.r) - self.rows.combination(nu)
        try:
            Lc = np.linalg.cholesky(S)
        except np.linalg.LinAlgError:
            return None
        d = np.diag(Lc)
        if not np.all(d > 0) or not np.all(np.isfinite(Lc)):
            return None
        Linv = scipy.linalg.solve_triangular(Lc, np.eye(self.r), lower=True, check_finite=False)
        W = Linv.T @ Linv
        g = 2.0 * float(np.sum(np.log(d))) + float(nu @ self.rows.bound)
        return DualPoint(g, self.rows.values_W(W), (Linv, W))

    def _dual_hessian(self, point: DualPoint, idx: np.ndarray) -> np.ndarray:
        return self.rows.hessian_gram(point.state[1], idx)

    def _set_state(self, point: DualPoint) -> None:
        self.B = point.state[0].T.copy()          # B B^T = L^{-T} L^{-1} = S^{-1}

    def _divergence(self) -> float:
        # K = G0 B B^T G0^T: D = tr(B B^T) - log det(B B^T) - r (invariant to the choice of G0)
        sign, logdet = np.linalg.slogdet(self.B)
        if sign == 0:
            return math.inf
        return float(np.sum(self.B * self.B) - 2.0 * logdet - self.r)

    def _kernel(self) -> np.ndarray:
        return self.G0 @ self.B

    def _extras(self) -> dict[str, Any]:
        return {"entry_step_failures": self.n_failed}
