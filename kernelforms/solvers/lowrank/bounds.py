"""lowrank's evidence at a returned factor: the dual slack's smallest eigenvalue and the
complementarity (KKT), a bound on ``tr(K)`` over the feasible set, and the Farkas test that
proves stalled constraints infeasible."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from ...model import SymOperator, sym_sum
from ...model.oracle import Oracle, PairOp

__all__ = ["as_matrix", "farkas", "graph_connected", "kkt_evidence", "trace_bound"]


def graph_connected(n: int, i: np.ndarray, j: np.ndarray) -> bool:
    from scipy.sparse.csgraph import connected_components

    A = sp.coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n))
    return int(connected_components(A, directed=False)[0]) == 1


def trace_bound(model: Oracle) -> float | None:
    """A bound on ``tr(K)`` over the feasible set of the constraints (model units), or None.

    * Every diagonal entry bounded above by an ``==`` or ``<=`` row (hard PCP, merged:
      ``K_ii = 1``; the linear NPKL loss: ``K_ii <= b^2``): ``tr(K) <= sum_i b_i``.
    * A centred ``K`` with ``||g_i - g_j||^2 = d_ij^2`` on the distance equality rows of a
      connected graph (MVU): every ``||g_i - g_j|| <= D = sum_e d_e`` (a path), so
      ``tr(K) = sum_ij ||g_i - g_j||^2 / (2 n) <= n D^2 / 2``.
    """
    n = model.rows
    top = np.full(n, np.inf)
    for blk in model.eq + model.ineq:
        op = blk.op
        if not isinstance(op, PairOp):
            continue
        up = op.i == op.j
        if blk.sgn is not None:
            up &= blk.sgn > 0
        np.minimum.at(top, op.i[up], blk.t[up])
    if np.all(np.isfinite(top)):
        return float(np.sum(top))
    if model.center and model.graph is not None:
        E, b = model.graph
        if graph_connected(n, E[:, 0], E[:, 1]):
            D = float(np.sum(np.sqrt(np.maximum(b, 0.0))))
            return 0.5 * n * D * D
    return None


def farkas(model: Oracle, G: np.ndarray, ce: np.ndarray, ci: np.ndarray) -> dict[str, Any]:
    """Try to prove the constraints (``A_e(K) = b_e``, ``sgn A_i(K) <= sgn b_i``, ``K PSD``)
    infeasible.

    For any ``y`` (free on equalities, ``>= 0`` on inequalities) a feasible ``K`` has
    ``<S_y, K> <= y . b`` with ``S_y = sum_e y_e A_e + sum_i y_i sgn_i A_i`` and
    ``y . b = sum_e y_e b_e + sum_i y_i sgn_i b_i``, and ``<S_y, K> >= min(0,
    lambda_min(S_y)) tr(K)``; so ``y . b < min(0, lambda_min(S_y)) tau`` with ``tau >= tr(K)``
    proves infeasibility.  ``y`` is the residual at the stalled point (``c_e`` and
    ``max(0, c_i)``): at the kernel nearest to feasibility it makes ``S_y`` PSD with
    ``y . b = -||y||^2 < 0`` (the optimality conditions of ``min ||A(K) - b||^2``).
    """
    from ...certificate import min_eigenvalue

    y = np.concatenate([np.asarray(ce, dtype=float), np.maximum(np.asarray(ci, dtype=float), 0.0)])
    ny = float(np.linalg.norm(y))
    if not ny > 0:
        return {"infeasible": False, "note": "zero residual"}
    y = y / ny
    parts = []
    yb, k = 0.0, 0
    for blk in model.eq + model.ineq:
        yk = y[k:k + len(blk)]
        if blk.sgn is not None:
            yk = blk.sgn * yk
        parts.append(blk.op.adjoint(yk))
        yb += float(yk @ blk.t)
        k += len(blk)
    mu, _ = min_eigenvalue(as_matrix(sym_sum(model.rows, parts)))
    tau = trace_bound(model)
    bound = 0.0 if mu >= 0 else (-math.inf if tau is None else mu * tau)
    margin = 1e-10 * max(1.0, max(float(np.max(np.abs(blk.t), initial=0.0))
                                  for blk in model.eq + model.ineq))
    infeasible = bool(yb < bound - margin)
    how = (f"y = the normalised residual: y . b = {yb:.3g}, lambda_min(sum y_k A_k) = {mu:.3g}"
           + (f", trace bound {tau:.3g}" if tau is not None and mu < 0 else ""))
    note = (f"Farkas certificate {how} (y . b < min(0, lambda_min) tr(K) for every feasible K)"
            if infeasible else f"no Farkas certificate from {how}")
    return {"infeasible": infeasible, "note": note, "y_dot_b": yb, "min_eig": mu}


def as_matrix(S: SymOperator, dense_below: int = 2000) -> Any:
    """A :class:`SymOperator` as a sparse matrix, a dense array (small, with a dense part)
    or a ``LinearOperator``."""
    if S.is_sparse:
        return S.sparse
    return S.dense() if S.n <= dense_below else S.linear_operator()


def kkt_evidence(model: Oracle, G: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray,
                 deadline: float | None = None) -> dict[str, Any]:
    """Smallest eigenvalue of the dual slack S (restricted as the model is) and ||S G||.

    Skipped (``certificate_error``) when the time limit is reached during Lanczos."""
    import scipy.sparse.linalg as ssla

    try:
        Sop = model.dual_slack(G, lam_e, lam_i)
        S = Sop.sparse if Sop.is_sparse else Sop.linear_operator()
        if model.basis is not None:
            Q = model.basis
            Sr = Q.T @ Sop.matmat(Q)
            ev = float(np.linalg.eigvalsh((Sr + Sr.T) / 2).min())
            comp = float(np.linalg.norm(Q.T @ Sop.matmat(G)))
            scale = float(np.abs(Sr).max())
        else:
            n = model.n
            if Sop.is_sparse:
                scale = float(abs(S).max()) if S.nnz else 1.0
            else:
                scale = float(np.abs(Sop.dense()).max()) if n <= 2000 else 1.0
            if model.center:
                shift = 2.0 * (scale * 10 + 1.0)

                def mv(v):
                    v = np.asarray(v).reshape(n, -1)
                    c = v - v.mean(axis=0, keepdims=True)
                    Sc = S @ c
                    out = Sc - Sc.mean(axis=0, keepdims=True) + shift * v.mean(axis=0, keepdims=True)
                    return out

                op = ssla.LinearOperator((n, n), matvec=mv, matmat=mv, dtype=float)
            else:
                op = S
            if n <= 400:
                Md = op @ np.eye(n) if model.center or not Sop.is_sparse else S.toarray()
                ev = float(np.linalg.eigvalsh((Md + Md.T) / 2).min())
            else:
                v0 = np.ones(n) / math.sqrt(n)
                base = op

                def timed(v, base=base):
                    if deadline is not None and time.perf_counter() > deadline:
                        raise TimeoutError("time limit reached during the certificate's Lanczos")
                    return base @ v

                top = ssla.LinearOperator((n, n), matvec=timed, matmat=timed, dtype=float)
                w, X = ssla.eigsh(top, k=1, which="SA", v0=v0, tol=1e-8, maxiter=20 * n)
                x = X[:, 0] / np.linalg.norm(X[:, 0])
                # the Ritz value minus its residual: an eigenvalue lies within it
                ev = float(w[0]) - float(np.linalg.norm(base @ x - w[0] * x))
            SG = S @ G
            if model.center:
                SG = SG - SG.mean(axis=0, keepdims=True)
            comp = float(np.linalg.norm(SG))
        out = {"dual_slack_min_eig": ev, "dual_slack_scale": scale, "complementarity": comp}
        if model.eq and not model.penalties and not model.ineq:
            # weak duality with the ALM multipliers (see docs/other_solvers.md): for a
            # feasible K', f(K') = <S, K'> + sum lam_k b_k >= min(0, lam_min(S)) tr(K') + dual
            dual, k = 0.0, 0
            for blk in model.eq:
                dual += float(lam_e[k:k + len(blk)] @ blk.t)
                k += len(blk)
            f_model, _ = model.smooth(G)
            s2 = model.scale**2
            m = min(0.0, ev)
            lb = None
            if model.C is None and model.trace_coef < 0:
                # f = t tr(K') with t < 0 bounds its own trace: f (1 - m / t) >= dual
                den = 1.0 - m / model.trace_coef
                if den > 0:
                    lb = dual / den
            else:
                tau = trace_bound(model)
                if tau is not None:
                    lb = dual + m * tau
            if lb is not None:
                obj = model.sign * f_model * s2
                if model.sign > 0:
                    out["lower_bound"] = lb * s2
                    out["certified_gap"] = (f_model - lb) / max(abs(f_model), 1e-300)
                else:
                    ub = -lb * s2
                    out["upper_bound"] = ub
                    out["certified_gap"] = (ub - obj) / max(abs(ub), 1e-300)
        return out
    except Exception as exc:  # a diagnostic must never sink a solve
        return {"certificate_error": f"{type(exc).__name__}: {exc}"}
