"""The full SDP: the problem written directly over its PSD matrix variable.

P1, P2, P4 and P6 use K itself (an ``n x n`` PSD block); P3 and P5 use
``K = Q Y Q^T`` with ``Y`` of size ``m_basis``; P7 works on the r-dimensional range
of K0.  Squared terms are written with ``sum_squares`` (CVXPY turns them into one
second-order cone), hinge losses with ``pos`` (slack variables).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..problems import MVU, NPKL, PCP, BregmanLowRank, RegMVU, RegPCP
from ..problems.bregman import DISTANCE, EQ, GE, LE
from ..result import LowRank, psd_factor
from .base import Compiled, ConicData, Formulation, program_size


def pair_functionals(B: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows ``a_p`` with ``a_p . vec(Y) = (B Y B^T)_{ij}`` for every pair ``p = (i, j)``.

    ``vec`` is CVXPY's column-major one; ``Y`` is symmetric so the row is the
    symmetrised outer product ``(b_i b_j^T + b_j b_i^T) / 2`` flattened.
    """
    bi, bj = B[idx[:, 0]], B[idx[:, 1]]
    outer = np.einsum("pa,pb->pab", bi, bj)
    outer = 0.5 * (outer + outer.transpose(0, 2, 1))
    return outer.reshape(len(idx), -1, order="F")


def distance_functionals(B: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows with ``a_p . vec(Y) = (b_i - b_j)^T Y (b_i - b_j)``."""
    d = B[idx[:, 0]] - B[idx[:, 1]]
    return np.einsum("pa,pb->pab", d, d).reshape(len(idx), -1, order="F")


def _merged_hard_pcp(problem):
    """``(P, P^T L P, idx, t)`` over must-link components of a hard PCP, or None when there
    are no must-links or a cannot-link falls inside a component (infeasible: left to the solver)."""
    from ..formulations.dual_sdp import DualSDP

    data = DualSDP._data(problem)
    if data["lift"] is None:
        return None
    return data["lift"], data["L"], data["idx"], data["t"]


def _pcp_targets(problem) -> tuple[np.ndarray, np.ndarray]:
    return problem.target_pairs


class FullSDP(Formulation):
    """``"sdp"``: the problem over its own PSD variable (see the module docstring)."""

    name = "sdp"
    title = "FullSDP"

    def applies_to(self, problem: Any) -> str | None:
        if isinstance(problem, (PCP, RegPCP, MVU, RegMVU, NPKL, BregmanLowRank)):
            return None
        return f"no full-SDP form for {type(problem).__name__}"

    def describe(self, problem: Any) -> str:
        """What :meth:`compile` would build (for the size guard's message)."""
        k = problem.n
        if isinstance(problem, (RegPCP, RegMVU)):
            k = problem.m_basis
        elif isinstance(problem, BregmanLowRank):
            k = problem.r
        return f"a full SDP with a {k} x {k} PSD block"

    @staticmethod
    def _block(problem: Any) -> int:
        if isinstance(problem, (RegPCP, RegMVU)):
            return problem.m_basis
        if isinstance(problem, BregmanLowRank):
            return problem.r
        return problem.n

    def kkt_order(self, problem: Any) -> int | None:
        # the svec of the k x k block: an interior-point method's scaling matrix is dense in
        # its k(k+1)/2 entries, and so is the block of the k(k+1)/2 unknowns it couples
        # (~order^3 / 3 flops per iteration)
        from .sqlp import ipm_order

        k = self._block(problem)
        return ipm_order((k,), k * (k + 1) // 2)

    def conic_data(self, problem: Any) -> ConicData | None:
        k = self._block(problem)
        p = int(getattr(problem, "n_terms", 0) or 0)
        d = k * (k + 1) // 2
        if isinstance(problem, (RegPCP, RegMVU, BregmanLowRank)):
            # every term is a dense functional of vec(Y) (k^2 entries); P7's log det / von
            # Neumann entropy adds a 2k x 2k block (and cones of size O(k))
            k2 = 2 * k if isinstance(problem, BregmanLowRank) else k
            return ConicData(nnz=k2 * (k2 + 1) // 2 + p * k * k + 8 * k, rows=k2 * (k2 + 1) // 2 + 2 * p,
                             psd=(k2,))
        # one PSD row per entry of svec(K); each pair / edge term reads a few entries
        return ConicData(nnz=d + 4 * p, rows=d + 3 * p, psd=(k,))

    def compile(self, problem: Any, **options: Any) -> Compiled:
        if options:
            from ..errors import SolverError

            raise SolverError(f"FullSDP takes no compile options; got {sorted(options)}")
        import cvxpy as cp

        if isinstance(problem, PCP) and problem.hard and _merged_hard_pcp(problem) is not None:
            # P2 with must-links has no strictly feasible K (K_ii = K_jj = K_ij = 1 forces
            # equal rows), which leaves interior-point solvers "inaccurate".  Merge each
            # must-link component into one point (exact: K = P K' P^T), so that K' = I is
            # strictly feasible.  The same reduction is used by the dual (dual_sdp.py).
            P, Lr, idx, t = _merged_hard_pcp(problem)
            c = P.shape[1]
            Kr = cp.Variable((c, c), PSD=True, name="K'")
            obj = cp.sum(cp.multiply(Lr.toarray(), Kr))
            cons = [Kr[idx[:, 0], idx[:, 1]] == t]
            inverse = {"Y": Kr, "B": P.toarray()}
            prog = cp.Problem(cp.Minimize(obj), cons)
            return Compiled(prog, inverse, program_size(prog),
                            [f"must-link components merged: K = P K' P^T, K' of size {c}"])
        if isinstance(problem, (PCP, MVU, NPKL)):
            n = problem.n
            K = cp.Variable((n, n), PSD=True, name="K")
            obj, cons = self._direct(problem, K)
            inverse = {"K": K}
        elif isinstance(problem, (RegPCP, RegMVU)):
            m = problem.m_basis
            Y = cp.Variable((m, m), PSD=True, name="Y")
            obj, cons = self._reduced(problem, Y)
            inverse = {"Y": Y, "B": problem.basis}
        else:  # BregmanLowRank
            r = problem.r
            W = cp.Variable((r, r), PSD=True, name="W")
            obj, cons, B = self._bregman(problem, W)
            inverse = {"Y": W, "B": B}
        prog = cp.Problem(cp.Minimize(obj) if problem.sense == "min" else cp.Maximize(obj), cons)
        return Compiled(prog, inverse, program_size(prog))

    # ------------------------------------------------------------ K itself
    def _direct(self, problem, K):
        import cvxpy as cp

        if isinstance(problem, MVU):
            E, d = problem.edges, problem.distances
            i, j = E[:, 0], E[:, 1]
            cons = [cp.sum(K) == 0, K[i, i] + K[j, j] - 2 * K[i, j] == d**2]
            return cp.trace(K), cons
        L = problem.laplacian
        smooth = cp.sum(cp.multiply(L, K))  # tr(L K), L symmetric
        if isinstance(problem, PCP):
            idx, t = problem.target_pairs
            vals = K[idx[:, 0], idx[:, 1]]
            if problem.hard:
                return smooth, [vals == t]
            return smooth + 0.5 * problem.gamma * cp.sum_squares(vals - t), []
        # NPKL
        idx, T = problem.signed_pairs
        z = cp.multiply(T, K[idx[:, 0], idx[:, 1]])
        cons = []
        if problem.loss == "hinge":
            loss = cp.sum(cp.pos(1 - z))
        elif problem.loss == "squared_hinge":
            loss = cp.sum_squares(cp.pos(1 - z))
        elif problem.loss == "square":
            loss = cp.sum_squares(1 - z)
        else:  # linear
            loss = -cp.sum(z)
            cons.append(cp.diag(K) <= problem.b**2)
        return smooth + problem.gamma * loss, cons

    # ------------------------------------------------------------ K = Q Y Q^T
    def _reduced(self, problem, Y):
        import cvxpy as cp

        Q = problem.basis
        y = cp.vec(Y, order="F")
        if isinstance(problem, RegPCP):
            idx, t = problem.target_pairs
            A = pair_functionals(Q, idx)
            return cp.sum_squares(A @ y - t), []
        A = distance_functionals(Q, problem.edges)
        return cp.trace(Y) - problem.nu * cp.sum_squares(A @ y - problem.distances**2), []

    # ------------------------------------------------------------ P7 on range(K0)
    def _bregman(self, problem, W):
        import cvxpy as cp

        V0, lam0 = problem.eigenbasis
        r = problem.r
        c = problem.constraints
        if problem.divergence == "burg":
            # K = B W B^T with B = V0 diag(sqrt(lam0)): D = tr(W) - log det W - r
            B = V0 * np.sqrt(lam0)
            obj = cp.trace(W) - cp.log_det(W) - r
        else:
            # K = V0 (s W) V0^T with s = mean(lam0), so that W = O(1) in the exponential cones
            # (unscaled, Clarabel was 4e-4 off on Pendigits, lam0 up to 1.7e7).  D is
            # 1-homogeneous, D(K, K0) = s D(K/s, K0/s): the program minimises D / s,
            # D / s = tr(W log W) - tr(W log diag(lam0 / s)) - tr(W) + sum(lam0) / s
            sc = float(np.mean(lam0))
            B = V0 * np.sqrt(sc)
            obj = (-cp.von_neumann_entr(W) - cp.sum(cp.multiply(np.log(lam0 / sc), cp.diag(W)))
                   - cp.trace(W) + float(np.sum(lam0)) / sc)
        idx = np.stack([c.i, c.j], axis=1)
        A = np.where((c.kind == DISTANCE)[:, None], distance_functionals(B, idx),
                     pair_functionals(B, idx))
        # row scaling (positive, so senses keep): bounds are ~ squared distances of the
        # data; unscaled rows made Clarabel stop at "optimal_inaccurate" on log_det
        scale = 1.0 / np.maximum(np.abs(c.bound), 1e-3 * np.linalg.norm(A, axis=1) + 1e-300)
        A, bnd = A * scale[:, None], c.bound * scale
        vals = A @ cp.vec(W, order="F")
        cons = []
        for sense, op in ((LE, "le"), (GE, "ge"), (EQ, "eq")):
            sel = np.flatnonzero(c.sense == sense)
            if sel.size == 0:
                continue
            v, b = vals[sel], bnd[sel]
            cons.append(v <= b if op == "le" else v >= b if op == "ge" else v == b)
        return obj, cons, B

    # ------------------------------------------------------------ back to a kernel
    def recover(self, compiled: Compiled) -> LowRank:
        inv = compiled.inverse
        if "K" in inv:
            K = inv["K"].value
            if K is None:
                raise ValueError("the K variable has no value")
            return LowRank(psd_factor(K))
        Y = inv["Y"].value
        if Y is None:
            raise ValueError("the Y variable has no value")
        return LowRank(inv["B"] @ psd_factor(Y))
