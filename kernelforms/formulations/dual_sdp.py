"""The dual SDP and recovery of the primal from it (Hoi et al. 2007), for P1, P2 and hinge P6.

Write every pair functional as ``K_p = tr(E_p K)`` with ``E_p = (e_i e_j^T + e_j e_i^T) / 2``
(``E_p = e_i e_i^T`` on the diagonal) and ``Phi(lam) = sum_p lam_p E_p``; every pair is
counted once (docs/problems.md), so ``Phi(lam)`` has ``lam_p / 2`` at ``(i, j)`` and ``(j, i)``.

Hinge NPKL (P6, Hoi et al. 2007 eq. 3)::

    primal:  min tr(L K) + gamma sum_p eps_p   s.t.  T_p K_p >= 1 - eps_p, eps >= 0, K PSD
    dual:    max sum_p Q_p                     s.t.  0 <= Q_p <= gamma,  M = L - Phi(Q o T) PSD

Soft PCP (P1)::

    dual:    max t^T lam - ||lam||^2 / (2 gamma)   s.t.  M = L - Phi(lam) PSD

Hard PCP (P2)::

    dual:    max t^T lam                           s.t.  M = L - Phi(lam) PSD

(``L - Phi`` is Hoi et al. 2007's ``L - Q o T``; ``M`` is the multiplier of ``K PSD``.)

Recovery (Hoi et al. 2007, "Efficient Dual Algorithm"): complementary slackness ``M K = 0`` puts
``range(K)`` inside the null space of ``M``.  With ``U`` (``n x k``) an orthonormal
basis of that null space, ``K = U B U^T`` and the *reduced primal* over the small PSD
``B`` (``k x k``, Hoi et al. 2007 eq. 6) is solved with the same conic solver.  The reduced
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
from .base import Compiled, ConicData, Formulation, program_size
from .sqlp import ipm_order, svec_dim

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
    """``"dual"``: the Lagrange dual (Hoi et al. 2007) and the primal recovered from it.

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
            return (f"the dual form (Hoi et al. 2007) is written for the hinge loss; NPKL with the "
                    f"{problem.loss!r} loss: use 'sdp' (or 'sqlp' for the square loss)")
        return (f"the dual form (Hoi et al. 2007) covers P1 / P2 (PCP) and hinge P6 (NPKL); not "
                f"{type(problem).__name__}")

    def describe(self, problem: Any) -> str:
        n = problem.n
        return f"a dual SDP with an {n} x {n} PSD block (plus a reduced primal over the null space)"

    def kkt_order(self, problem: Any) -> int | None:
        return ipm_order((problem.n,))

    def conic_data(self, problem: Any) -> ConicData | None:
        n, p = problem.n, int(problem.n_terms)
        d = svec_dim(n)
        # M = L - Phi(lam): one PSD row per entry of svec(M), each multiplier in one entry;
        # the hinge bounds add 2p rows
        return ConicData(nnz=d + 4 * p, rows=d + 3 * p, psd=(n,))

    # ------------------------------------------------------------------ compile
    @staticmethod
    def _data(problem: Any) -> dict[str, Any]:
        """The (possibly reduced) data the dual is written over.

        Hard PCP: merge must-link components first (see the module docstring); the
        program is then over the ``c x c`` matrix ``K'`` with ``K = P K' P^T``.
        """
        if isinstance(problem, NPKL):
            idx, T = problem.signed_pairs
            return {"kind": "hinge", "L": problem.laplacian, "idx": np.asarray(idx),
                    "T": np.asarray(T, float), "lift": None, "note": ""}
        idx, t = problem.target_pairs
        data = {"kind": "hard" if problem.hard else "soft", "L": problem.laplacian,
                "idx": np.asarray(idx), "t": np.asarray(t, float), "lift": None, "note": ""}
        if not problem.hard or problem.pairs.n_must == 0:
            return data
        from scipy.sparse.csgraph import connected_components

        n, must, cannot = problem.n, problem.pairs.must, problem.pairs.cannot
        A = sp.coo_matrix((np.ones(len(must)), (must[:, 0], must[:, 1])), shape=(n, n))
        c, lab = connected_components(A, directed=False)
        ci, cj = lab[cannot[:, 0]], lab[cannot[:, 1]]
        if np.any(ci == cj):
            k = int(np.flatnonzero(ci == cj)[0])
            data["note"] = (f"cannot-link {tuple(map(int, cannot[k]))} joins a must-link component: "
                            "P2 is infeasible (the dual is unbounded)")
            return data
        P = sp.csr_matrix((np.ones(n), (np.arange(n), lab)), shape=(n, c))
        off = np.unique(np.sort(np.stack([ci, cj], axis=1), axis=1), axis=0)
        diag = np.repeat(np.arange(c)[:, None], 2, axis=1)
        data.update(L=(P.T @ problem.laplacian @ P).tocsr(), idx=np.concatenate([off, diag]),
                    t=np.concatenate([np.zeros(len(off)), np.ones(c)]), lift=P,
                    note=f"must-link components merged: K = P K' P^T with K' of size {c}")
        return data

    def compile(self, problem: Any, **options: Any) -> Compiled:
        import cvxpy as cp

        null_rtol = float(options.pop("null_rtol", NULL_RTOL))
        if options:
            raise SolverError(f"DualSDP compile options are 'null_rtol'; got {sorted(options)}")
        data = self._data(problem)
        L, idx = data["L"], data["idx"]
        n = L.shape[0]
        lam = cp.Variable(len(idx), name="Q" if data["kind"] == "hinge" else "lam")
        cons = []
        if data["kind"] == "hinge":
            coef = cp.multiply(data["T"], lam)
            obj = cp.sum(lam)
            cons = [lam >= 0, lam <= problem.gamma]
        elif data["kind"] == "hard":
            coef, obj = lam, data["t"] @ lam
        else:
            coef = lam
            obj = data["t"] @ lam - cp.sum_squares(lam) / (2 * problem.gamma)
        M = L - cp.reshape(pair_operator(idx, n) @ coef, (n, n), order="F")
        cons.append(M >> 0)
        prog = cp.Problem(cp.Maximize(obj), cons)
        data.update(problem=problem, lam=lam, null_rtol=null_rtol, psd=cons[-1])
        notes = [f"dual over {len(idx)} multipliers; primal recovered on the null space of M"]
        if data["note"]:
            notes.append(data["note"])
        return Compiled(prog, data, program_size(prog), notes)

    # ------------------------------------------------------------------ recovery
    def _multiplier(self, compiled: Compiled) -> np.ndarray:
        """``M = L - Phi(lam)`` (``Q o T`` for the hinge loss) at the solver's dual point."""
        inv = compiled.inverse
        lam = inv["lam"].value
        if lam is None:
            raise ValueError("the dual variable has no value")
        L = inv["L"]
        n = L.shape[0]
        coef = np.asarray(lam, float)
        if inv["kind"] == "hinge":
            coef = coef * inv["T"]
        Phi = (pair_operator(inv["idx"], n) @ coef).reshape(n, n)
        return (L.toarray() if sp.issparse(L) else np.asarray(L)) - Phi

    def null_basis(self, compiled: Compiled) -> np.ndarray:
        """Orthonormal ``U`` spanning null(M) (and the range of the solver's multiplier of M PSD)."""
        inv = compiled.inverse
        M = self._multiplier(compiled)
        w, V = np.linalg.eigh((M + M.T) / 2)
        tol = inv["null_rtol"] * max(1.0, float(np.abs(w).max()))
        U = V[:, w <= tol]
        inv["null_dim"] = U.shape[1]
        inv["min_eig_M"] = float(w[0])
        # Which basis of that null space: the eigenvectors of M computed at interior-point
        # accuracy are off by ~ accuracy / (smallest nonzero eigenvalue of M), which
        # measured 2e-5 on a 40-point hinge instance (docs/formulations.md), enough to move
        # the reduced primal's objective by 5e-6 relative.  The solver's multiplier Z of
        # "M PSD" satisfies M Z = 0 too (so range(Z) = null(M) in exact arithmetic) and
        # its leading eigenvectors are far better conditioned (gap = smallest nonzero
        # eigenvalue of K).  So: k = dim null(M) as counted above (or rank Z if larger),
        # and U = the k leading eigenvectors of Z.
        Z = inv["psd"].dual_value
        if Z is not None:
            Z = np.asarray(Z, float)
            wz, Vz = np.linalg.eigh((Z + Z.T) / 2)
            rank_z = int(np.sum(wz > RANGE_RTOL * max(float(wz.max(initial=0.0)), 1e-300)))
            k = max(U.shape[1], rank_z)
            inv["rank_Z"] = rank_z
            U = Vz[:, ::-1][:, :k]
        inv["basis_dim"] = U.shape[1]
        return U

    def recover(self, compiled: Compiled) -> LowRank:
        import cvxpy as cp

        inv = compiled.inverse
        problem = inv["problem"]
        U = self.null_basis(compiled)
        k = U.shape[1]
        lift = inv["lift"]
        if k == 0:
            inv["reduced_objective"] = float("nan")  # M is positive definite: K = 0
            return LowRank(np.zeros((problem.n, 1)))
        B = cp.Variable((k, k), PSD=True, name="B")
        L, idx = inv["L"], inv["idx"]
        smooth = cp.trace((U.T @ (L @ U)) @ B)
        Amat = self._entry_matrix(U, idx)
        vals = Amat @ cp.vec(B, order="F")
        if inv["kind"] == "hard":
            # p equations in k(k+1)/2 unknowns: dependent, and (at solver accuracy) very
            # slightly inconsistent.  Keep the independent combinations (SVD), whose
            # least-squares right-hand side is consistent.
            W, sv, _ = np.linalg.svd(Amat, full_matrices=False)
            W = W[:, sv > 1e-9 * max(float(sv.max(initial=0.0)), 1e-300)]
            obj, cons = smooth, [(W.T @ Amat) @ cp.vec(B, order="F") == W.T @ inv["t"]]
        elif inv["kind"] == "soft":
            obj, cons = smooth + 0.5 * problem.gamma * cp.sum_squares(vals - inv["t"]), []
        else:
            obj = smooth + problem.gamma * cp.sum(cp.pos(1 - cp.multiply(inv["T"], vals)))
            cons = []
        red = cp.Problem(cp.Minimize(obj), cons)
        stats = compiled.program.solver_stats
        solver = stats.solver_name if stats is not None else None
        t0 = time.perf_counter()
        try:
            red.solve(solver=solver, verbose=False)
        except cp.error.SolverError as exc:
            raise ValueError(f"the reduced primal failed: {exc}") from exc
        inv["reduced_time"] = time.perf_counter() - t0
        inv["reduced_status"] = red.status
        inv["reduced_iterations"] = red.solver_stats.num_iters if red.solver_stats else None
        inv["reduced_objective"] = red.value
        if B.value is None or red.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise ValueError(f"the reduced primal over the null space ended {red.status}")
        G = U @ psd_factor(B.value)
        return LowRank(G if lift is None else lift @ G)

    @staticmethod
    def _entry_matrix(U: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Rows ``a_p`` with ``a_p . vec(B) = (U B U^T)_{ij}`` for symmetric B (column-major vec)."""
        Ui, Uj = U[idx[:, 0]], U[idx[:, 1]]
        k = U.shape[1]
        A = np.einsum("pa,pb->pab", Ui, Uj)
        A = 0.5 * (A + A.transpose(0, 2, 1))
        return A.reshape(len(idx), k * k, order="F")

    def recovered_extras(self, compiled: Compiled) -> dict[str, Any]:
        inv = compiled.inverse
        return {key: inv[key] for key in ("null_dim", "rank_Z", "basis_dim", "min_eig_M", "reduced_objective",
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
