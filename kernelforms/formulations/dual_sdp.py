"""The dual SDP and recovery of the primal from it (seed 002), for P1, P2 and hinge P6.

Write every pair functional as ``K_p = tr(E_p K)`` with ``E_p = (e_i e_j^T + e_j e_i^T) / 2``
(``E_p = e_i e_i^T`` on the diagonal) and ``Phi(lam) = sum_p lam_p E_p``; every pair is
counted once (SPEC.md), so ``Phi(lam)`` has ``lam_p / 2`` at ``(i, j)`` and ``(j, i)``.

Hinge NPKL (P6, 002 eq. 3)::

    primal:  min tr(L K) + gamma sum_p eps_p   s.t.  T_p K_p >= 1 - eps_p, eps >= 0, K PSD
    dual:    max sum_p Q_p                     s.t.  0 <= Q_p <= gamma,  M = L - Phi(Q o T) PSD

Soft PCP (P1)::

    dual:    max t^T lam - ||lam||^2 / (2 gamma)   s.t.  M = L - Phi(lam) PSD

Hard PCP (P2)::

    dual:    max t^T lam                           s.t.  M = L - Phi(lam) PSD

(``L - Phi`` is 002's ``L - Q o T``; ``M`` is the multiplier of ``K PSD``.)

Recovery (002, "Efficient Dual Algorithm"): complementary slackness ``M K = 0`` puts
``range(K)`` inside the null space of ``M``.  With ``U`` (``n x k``) an orthonormal
basis of that null space, ``K = U B U^T`` and the *reduced primal* over the small PSD
``B`` (``k x k``, 002 eq. 6) is solved with the same conic solver.  The reduced
primal's objective equals the dual's to solver accuracy (reported in
``Result.extras``: ``dual_objective``, ``reduced_objective``, ``null_dim``).

The null space is the span of the eigenvectors of ``M`` with eigenvalue
``<= null_rtol * max(1, ||M||)`` (compile option ``null_rtol``, default
:data:`NULL_RTOL`).  Taking a few directions too many is harmless (the reduced
primal is still a restriction of the primal that contains its solution); too few
would cut the solution off, hence the generous default.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..problems import NPKL, PCP
from ..result import LowRank, psd_factor
from .base import Compiled, Formulation, program_size
from .sqlp import kkt_bytes

#: eigenvalues of M below NULL_RTOL * max(1, ||M||_2) span its null space
NULL_RTOL = 1e-5
#: eigenvalues of the solver's multiplier Z above RANGE_RTOL * max span its range
RANGE_RTOL = 1e-6


def pair_operator(idx: np.ndarray, n: int) -> sp.csr_matrix:
    """Sparse ``(n*n, p)`` matrix ``P`` with ``vec(Phi(lam)) = P @ lam`` (either vec order)."""
    i, j = idx[:, 0], idx[:, 1]
    p = np.arange(len(idx))
    diag = i == j
    rows = np.concatenate([i[diag] * n + i[diag], (i * n + j)[~diag], (j * n + i)[~diag]])
    cols = np.concatenate([p[diag], p[~diag], p[~diag]])
    vals = np.concatenate([np.ones(diag.sum()), np.full(2 * (~diag).sum(), 0.5)])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n * n, len(idx)))


class DualSDP(Formulation):
    """``"dual"``: the Lagrange dual (002) and the primal recovered from it.

    One PSD block ``n x n`` (the constraint ``M PSD``), ``p`` scalar variables (one per
    pair, plus the diagonal for PCP), bounds ``0 <= Q <= gamma`` for the hinge loss.
    """

    name = "dual"
    title = "DualSDP"

    def applies_to(self, problem: Any) -> str | None:
        if isinstance(problem, PCP):
            return None
        if isinstance(problem, NPKL):
            if problem.loss == "hinge":
                return None
            return (f"the dual form (002) is written for the hinge loss; NPKL with the "
                    f"{problem.loss!r} loss: use 'sdp' (or 'sqlp' for the square loss)")
        return (f"the dual form (002) covers P1 / P2 (PCP) and hinge P6 (NPKL); not "
                f"{type(problem).__name__}")

    def describe(self, problem: Any) -> str:
        n = problem.n
        return f"a dual SDP with an {n} x {n} PSD block (plus a reduced primal over the null space)"

    def estimate_memory(self, problem: Any) -> int | None:
        return kkt_bytes(0, (problem.n,))

    # ------------------------------------------------------------------ compile
    def compile(self, problem: Any, **options: Any) -> Compiled:
        import cvxpy as cp

        null_rtol = float(options.pop("null_rtol", NULL_RTOL))
        if options:
            raise SolverError(f"DualSDP compile options are 'null_rtol'; got {sorted(options)}")
        n = problem.n
        L = problem.laplacian
        if isinstance(problem, PCP):
            idx, t = problem.target_pairs
            lam = cp.Variable(len(idx), name="lam")
            coef = lam
            if problem.hard:
                obj = t @ lam
            else:
                obj = t @ lam - cp.sum_squares(lam) / (2 * problem.gamma)
            cons = []
        else:
            idx, T = problem.signed_pairs
            lam = cp.Variable(len(idx), name="Q")
            coef = cp.multiply(T, lam)
            obj = cp.sum(lam)
            cons = [lam >= 0, lam <= problem.gamma]
        P = pair_operator(np.asarray(idx), n)
        M = L - cp.reshape(P @ coef, (n, n), order="F")
        cons.append(M >> 0)
        prog = cp.Problem(cp.Maximize(obj), cons)
        inverse = {"problem": problem, "lam": lam, "idx": np.asarray(idx), "null_rtol": null_rtol,
                   "psd": cons[-1]}
        notes = [f"dual over {len(idx)} multipliers; primal recovered on the null space of M"]
        return Compiled(prog, inverse, program_size(prog), notes)

    # ------------------------------------------------------------------ recovery
    def _multiplier(self, compiled: Compiled) -> np.ndarray:
        inv = compiled.inverse
        lam = inv["lam"].value
        if lam is None:
            raise ValueError("the dual variable has no value")
        problem = inv["problem"]
        n = problem.n
        coef = np.asarray(lam, float)
        if isinstance(problem, NPKL):
            coef = coef * problem.signed_pairs[1]
        Phi = (pair_operator(inv["idx"], n) @ coef).reshape(n, n)
        return problem.laplacian.toarray() - Phi

    def recover(self, compiled: Compiled) -> LowRank:
        import cvxpy as cp

        inv = compiled.inverse
        problem = inv["problem"]
        M = self._multiplier(compiled)
        w, V = np.linalg.eigh((M + M.T) / 2)
        tol = inv["null_rtol"] * max(1.0, float(np.abs(w).max()))
        U = V[:, w <= tol]
        inv["null_dim"] = U.shape[1]
        inv["min_eig_M"] = float(w[0])
        # The solver's multiplier of "M PSD" estimates K itself; its range lies in null(M)
        # exactly, but the eigenvectors of M computed at interior-point accuracy are off by
        # ~ accuracy / (smallest nonzero eigenvalue of M), which can be 1e-5 (docs).  Adding
        # range(Z) makes the subspace exact to solver accuracy; the reduced primal stays 002's.
        Z = inv["psd"].dual_value
        if Z is not None:
            wz, Vz = np.linalg.eigh((np.asarray(Z) + np.asarray(Z).T) / 2)
            Vz = Vz[:, wz > RANGE_RTOL * max(float(wz.max(initial=0.0)), 1e-300)]
            Ub, sb, _ = np.linalg.svd(np.hstack([U, Vz]), full_matrices=False)
            U = Ub[:, sb > 1e-8]
        k = U.shape[1]
        inv["basis_dim"] = k
        if k == 0:
            inv["reduced_objective"] = float("nan")  # M is positive definite: K = 0
            return LowRank(np.zeros((problem.n, 1)))
        B = cp.Variable((k, k), PSD=True, name="B")
        LU = problem.laplacian @ U
        smooth = cp.trace((U.T @ LU) @ B)
        if isinstance(problem, PCP):
            idx, t = problem.target_pairs
            vals = self._entries(U, idx, B)
            if problem.hard:
                obj, cons = smooth, [vals == t]
            else:
                obj, cons = smooth + 0.5 * problem.gamma * cp.sum_squares(vals - t), []
        else:
            idx, T = problem.signed_pairs
            vals = self._entries(U, idx, B)
            obj, cons = smooth + problem.gamma * cp.sum(cp.pos(1 - cp.multiply(T, vals))), []
        red = cp.Problem(cp.Minimize(obj), cons)
        solver = compiled.program.solver_stats.solver_name if compiled.program.solver_stats else None
        t0 = time.perf_counter()
        try:
            red.solve(solver=solver, verbose=False)
        except cp.error.SolverError as exc:
            raise ValueError(f"the reduced primal failed: {exc}") from exc
        inv["reduced_time"] = time.perf_counter() - t0
        inv["reduced_status"] = red.status
        inv["reduced_iterations"] = red.solver_stats.num_iters if red.solver_stats else None
        inv["reduced_objective"] = red.value
        if B.value is None:
            raise ValueError(f"the reduced primal ended {red.status}")
        return LowRank(U @ psd_factor(B.value))

    @staticmethod
    def _entries(U: np.ndarray, idx: np.ndarray, B):
        """``(U B U^T)_{ij}`` for every pair, as a linear expression in B."""
        import cvxpy as cp

        Ui, Uj = U[idx[:, 0]], U[idx[:, 1]]
        k = U.shape[1]
        A = np.einsum("pa,pb->pab", Ui, Uj)
        A = 0.5 * (A + A.transpose(0, 2, 1))
        return A.reshape(len(idx), k * k, order="F") @ cp.vec(B, order="F")

    def recovered_extras(self, compiled: Compiled) -> dict[str, Any]:
        inv = compiled.inverse
        return {key: inv[key] for key in ("null_dim", "basis_dim", "min_eig_M", "reduced_objective",
                                          "reduced_status", "reduced_iterations", "reduced_time")
                if key in inv} | {"dual_objective": compiled.program.value}

    def primal_status(self, status: Any) -> Any:
        """The dual's verdict read for the primal: dual unbounded = primal infeasible."""
        from ..result import Status

        if status is Status.UNBOUNDED:
            return Status.INFEASIBLE
        if status is Status.INFEASIBLE:
            return Status.UNBOUNDED
        return status
