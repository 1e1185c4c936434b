"""The primal recovery of smo: ``K = U B U^T`` from the reduced primal over a basis of
``M(Q)``'s lowest eigenvectors, refined until the certified gap is small; the central point
when time runs out first."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ...result import LowRank, psd_factor
from .numerics import (
    DENSE_MAX,
    _chol,
    _pair_matrix,
    _svec_index,
    reduced_primal_seconds,
)


def hinge_rows(source: Any) -> tuple[Any, Any]:
    """``(can, rows)``: the canonical form of a problem (or declaration, or canonical form)
    smo applies to (:func:`kernelforms.solvers.smo.why_not`) and its block of hinge rows on
    off-diagonal entries (``rows.pairs``, labels ``rows.data``, weights ``rows.weight``)."""
    from ...model import Hinge, RowKind, canonical

    can = canonical(source)
    return can, can.rows(Hinge, RowKind.ENTRY)


def gamma_of(rows: Any) -> Any:
    """The hinge weight: one number when every pair has the same (P6), else one per pair
    (the dual box ``0 <= Q_p <= gamma_p``)."""
    w = rows.weight
    return float(w[0]) if w.size and np.all(w == w[0]) else w


class Recovery:
    """The primal recovery of :class:`~kernelforms.solvers.smo.HoiSMO`: the central point, the
    reduced primal over a basis (Hoi et al. 2007, eq. 6) and its refinement to a certified gap."""

    @staticmethod
    def _central_point(problem: Any, M: sp.csr_matrix, Mdense: np.ndarray | None, Q: np.ndarray,
                       mu: float, m: int, d_cap: int, n: int) -> dict[str, Any]:
        """``K_mu = mu M(Q)^{-1}`` (PSD, hence feasible for hinge P6) as a factor, with the
        lower bound ``sum Q`` (valid when ``M(Q)`` is PSD): the fallback point when the
        time limit comes before any recovery.  Dense eigendecomposition up to
        ``DENSE_MAX`` points, else shift-invert Lanczos; only the ``d_cap`` largest
        directions of ``K_mu`` are kept (still PSD, so still feasible; its objective is
        the problem's own evaluation)."""
        import scipy.sparse.linalg as ssla

        if not mu > 0:
            return {"reduced_status": "no recovery (time limit, plain update: no central point)"}
        try:
            if Mdense is not None:
                w, V = np.linalg.eigh(Mdense)
            else:
                k = min(n - 2, d_cap)
                w, V = ssla.eigsh(M, k=k, sigma=0.0, which="LM")
        except (np.linalg.LinAlgError, ArithmeticError, RuntimeError, ValueError) as exc:
            return {"reduced_status": f"no recovery (time limit); central point failed: {exc}"}
        if not (np.all(np.isfinite(w)) and float(w.min()) > 0):
            return {"reduced_status": "no recovery (time limit); M(Q) not positive definite"}
        ev = mu / w
        o = np.argsort(ev)[::-1][:d_cap]  # the largest directions of K_mu (a PSD point still)
        o = o[ev[o] >= 1e-12 * float(ev[o[0]])]
        G = V[:, o] * np.sqrt(ev[o])
        primal = problem.objective(LowRank(G))
        lb = float(Q.sum())
        return {"factor": G, "primal": primal, "lower_bound": lb, "reduced_status": "central point",
                "rel_gap": (primal - lb) / max(abs(primal), 1e-300)}

    # ------------------------------------------------------------------ recovery
    @staticmethod
    def reduced_primal(problem: Any, U: np.ndarray, time_limit: float | None = None):
        """Hoi et al. 2007, eq. 6 over ``K = U B U^T``: returns ``(status, objective, B, Q_r)``.

        ``Q_r`` are the multipliers of the margin constraints ``T_p K_p >= 1 - eps_p``
        (clipped to ``[0, gamma]``), i.e. the reduced problem's dual.  Written for Clarabel
        directly (``svec(B)`` in its PSD-triangle cone, then ``eps``): the data are built
        in a few vectorised numpy operations, so the whole reduced primal runs under
        ``time_limit`` seconds (Clarabel's own limit; status ``"MaxTime"`` then, with its
        last iterate, still a valid kernel once projected on the PSD cone).  Its memory is
        :func:`reduced_primal_bytes`.  ``problem`` is a problem the solver applies to (or its
        declaration, or canonical form).
        """
        import clarabel

        can, rows = hinge_rows(problem)
        idx, T = rows.pairs, rows.data
        m, d = len(idx), U.shape[1]
        r, c = _svec_index(d)
        t = len(r)
        w = np.where(r == c, 1.0, math.sqrt(2.0))
        Ui, Uj = U[idx[:, 0]], U[idx[:, 1]]
        # <sym(u_i u_j^T), B> = svec(sym(u_i u_j^T)) . svec(B), row p of the margin block
        coef = Ui[:, r] * Uj[:, c]
        coef += Ui[:, c] * Uj[:, r]
        coef *= (0.5 * w) * -T[:, None]
        Am = sp.hstack([sp.csc_matrix(coef), -sp.identity(m, format="csc")], format="csc")
        del coef
        Ae = sp.hstack([sp.csc_matrix((m, t)), -sp.identity(m, format="csc")], format="csc")
        Ab = sp.hstack([-sp.identity(t, format="csc"), sp.csc_matrix((t, m))], format="csc")
        A = sp.vstack([Am, Ae, Ab], format="csc")
        del Am, Ae, Ab
        gamma = gamma_of(rows)
        C = U.T @ (can.C @ U)
        C = 0.5 * (C + C.T)
        gam = np.full(m, float(gamma)) if np.ndim(gamma) == 0 else gamma
        q = np.concatenate([w * C[r, c], gam])
        b = np.concatenate([-np.ones(m), np.zeros(m + t)])
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        if time_limit is not None:
            settings.time_limit = max(float(time_limit), 1e-3)
        cones = [clarabel.NonnegativeConeT(2 * m), clarabel.PSDTriangleConeT(d)]
        sol = clarabel.DefaultSolver(sp.csc_matrix((t + m, t + m)), q, A, b, cones, settings).solve()
        del A
        status = str(sol.status)
        x = np.asarray(sol.x, float)
        if x.size != t + m or not np.all(np.isfinite(x)) or status in ("PrimalInfeasible", "DualInfeasible"):
            return status, None, None, None
        B = np.zeros((d, d))
        B[r, c] = x[:t] / w
        B = B + B.T - np.diag(np.diag(B))
        z = np.asarray(sol.z, float)[:m]
        Qr = np.clip(z, 0.0, gamma) if np.all(np.isfinite(z)) else None
        return status, float(sol.obj_val), B, Qr

    @classmethod
    def recover(cls, problem: Any, M: sp.csr_matrix, Q: np.ndarray, ratio: float = 1e3,
                max_rounds: int = 30, tol: float = 1e-6, max_basis: int | None = None,
                deadline: float | None = None) -> dict[str, Any]:
        """``K = U B U^T`` from the reduced primal (Hoi et al. 2007, eq. 6), refined and certified.

        ``U`` starts as the eigenvectors of ``M = M(Q)`` with eigenvalue
        ``<= ratio * lambda_min(M)`` (2 .. m + 1 of them).  Each round solves the reduced
        primal, takes its multipliers ``Q_r`` and adds to ``U`` the eigenvectors of
        ``M(Q_r)`` with negative eigenvalues (the directions in which the reduced solution is
        not optimal for the full problem) until the certified gap is ``<= tol``.  The basis
        never exceeds ``max_basis`` directions (default ``min(m + 1, n)``), which bounds the
        reduced primal's memory (:func:`reduced_primal_bytes`).
        Certificate (lower bounds on the optimum, all valid): ``sum Q`` when ``M(Q)`` is
        PSD; ``(1 - th) sum Q_r + th sum Q`` with the smallest ``th`` making
        ``(1 - th) M(Q_r) + th M(Q)`` PSD (a generalised eigenvalue); and
        ``sum Q_r + lambda_min(M(Q_r)) tr K*`` with ``tr K* <= primal / lambda_min(L)``.
        With a ``deadline`` (``time.perf_counter()`` value) every step checks it and the
        reduced primal gets the remaining time; ``rec["timed_out"]`` is then True and the
        best kernel so far is kept.
        """
        import scipy.sparse.linalg as ssla

        can, rows = hinge_rows(problem)
        n = can.n
        idx, T = rows.pairs, rows.data
        m = len(idx)
        d_cap = max(2, min(m + 1, n, n if max_basis is None else int(max_basis)))
        rec: dict[str, Any] = {"dual_objective_barrier": float(Q.sum()), "timed_out": False}

        def left() -> float | None:
            return None if deadline is None else deadline - time.perf_counter()

        def out_of_time() -> bool:
            rem = left()
            return rem is not None and rem <= 0

        def budget(d: int) -> tuple[bool, float | None]:
            """(enough time for a reduced primal over d directions, Clarabel's time limit)"""
            rem = left()
            if rem is None:
                return True, None
            need = reduced_primal_seconds(d)
            return rem >= 2 * need, rem - need

        if out_of_time():
            rec.update(timed_out=True, rounds=0, reduced_status="not started (time limit)")
            return rec
        if n > DENSE_MAX:  # Lanczos basis, one reduced primal, no certificate
            k = min(n - 1, d_cap + 10)
            scale = float(abs(M).sum(axis=1).max())
            sigma = -1e-6 * scale
            lu = ssla.splu((M - sigma * sp.identity(n, format="csr")).tocsc())

            def inv(x: np.ndarray) -> np.ndarray:  # shift-invert products, deadline-checked
                if out_of_time():
                    raise TimeoutError
                return lu.solve(np.asarray(x, float))

            OPinv = ssla.LinearOperator((n, n), matvec=inv, dtype=float)
            try:
                w, V = ssla.eigsh(M, k=k, sigma=sigma, which="LM", OPinv=OPinv)
            except TimeoutError:
                rec.update(timed_out=True, rounds=0, reduced_status="not started (time limit in Lanczos)")
                return rec
            o = np.argsort(w)
            w, V = w[o], V[:, o]
            base = max(float(w[0]), 1e-14 * scale)
            d = int(min(max(2, np.sum(w <= ratio * base)), d_cap, k))
            rec.update({"min_eig_M": float(w[0]), "null_dim": d, "basis_dim": d, "rounds": 1,
                        "lower_bound": math.nan, "rel_gap": math.inf})
            ok, limit = budget(d)
            if not ok:
                rec.update(timed_out=True, reduced_status="not started (time limit)")
                return rec
            status, obj, B, _ = cls.reduced_primal(can, V[:, :d], limit)
            rec.update({"reduced_status": status, "reduced_objective": obj, "timed_out": status == "MaxTime"})
            if B is not None:
                G = V[:, :d] @ psd_factor(B)
                rec["factor"] = G
                rec["primal"] = problem.objective(LowRank(G))
            return rec
        Ld = can.C.toarray()
        Mb = M.toarray()
        w, V = np.linalg.eigh(Mb)
        lam_L = float(np.linalg.eigvalsh(Ld)[0])
        wmax = max(1.0, float(np.abs(w).max()))
        base = max(float(w[0]), 1e-14 * wmax)
        d = int(min(max(2, np.sum(w <= ratio * base)), d_cap))
        U = V[:, :d]
        Fb = _chol(Mb)
        rec.update({"min_eig_M": float(w[0]), "null_dim": d})
        best = None
        lb_max = -math.inf
        rounds = 0
        for rounds in range(1, max_rounds + 1):
            ok, limit = budget(U.shape[1])
            if not ok:
                rec["timed_out"] = True
                rounds -= 1
                break
            status, obj, B, Qr = cls.reduced_primal(can, U, limit)
            if B is None:
                rec["reduced_status"] = status
                break
            G = U @ psd_factor(B)
            primal = problem.objective(LowRank(G))
            tau = primal / lam_L if lam_L > 0 else math.inf
            lbs = [float(Q.sum()) + (min(0.0, float(w[0])) * tau if w[0] < 0 else 0.0)]
            neg = np.zeros((n, 0))
            if best is None or primal < best["primal"]:
                best = {"factor": G, "primal": primal, "reduced_objective": obj, "reduced_status": status,
                        "basis_dim": U.shape[1]}
            if status == "MaxTime" or out_of_time():
                rec["timed_out"] = True
            elif Qr is not None:
                Mr = _pair_matrix(Ld, idx, T, Qr)
                wr, Vr = np.linalg.eigh(Mr)
                if wr[0] >= 0 or math.isfinite(tau):
                    lbs.append(float(Qr.sum()) + min(0.0, float(wr[0])) * tau)
                if Fb is not None and not out_of_time():
                    # smallest th with (1 - th) M(Q_r) + th M(Q) PSD: s = lambda_max(-M_r, M)
                    s = max(0.0, float(sla.eigh(-Mr, Mb, eigvals_only=True,
                                                subset_by_index=[n - 1, n - 1])[0]))
                    th = s / (1.0 + s)
                    lbs.append((1.0 - th) * float(Qr.sum()) + th * float(Q.sum()))
                neg = Vr[:, wr < -1e-10 * max(1.0, float(np.abs(wr).max()))]
            lb_max = max([lb_max] + [x for x in lbs if math.isfinite(x)])  # every round's bound holds
            best["lower_bound"] = lb_max
            best["rel_gap"] = (best["primal"] - lb_max) / max(abs(best["primal"]), 1e-300)
            best["reduced_dual_objective"] = None if Qr is None else float(Qr.sum())
            if rec["timed_out"] or best["rel_gap"] <= tol or neg.shape[1] == 0:
                break
            room = d_cap - U.shape[1]
            if room <= 0:
                rec["basis_full"] = True
                break
            neg = neg[:, : min(room, max(2, U.shape[1] // 2))]
            neg = neg - U @ (U.T @ neg)
            U, _ = np.linalg.qr(np.hstack([U, neg]))
        rec["rounds"] = rounds
        if best is not None:
            rec.update(best)
        return rec
