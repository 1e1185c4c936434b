"""Subspace polish for a factored solver of a quadratic problem (a Rayleigh-Ritz step).

A first-order factored solver (KL_ADMM) reaches the optimum's large eigen-directions fast and
its small ones slowly: at 100,000 two-Gaussian points (P1) admm stops by its residual test
with the objective within 1e-7 of the optimum, but with the optimum's third eigenvalue
(0.83, against 4.8e4 for the first two) spread over three columns of the factor.  The
objective hardly sees that error; the Lagrangian certificate does, because it multiplies
the most negative eigenvalue of the gradient by a bound on the trace of K* (about n): a
relative gap of 9e-3.

A Ritz step solves the problem exactly over the kernels whose range lies in the span of the
factor ``G``, the certificate's escape directions ``V`` (eigenvectors of the negative
eigenvalues of ``H = grad f(K)``) and, for a point that is not stationary (ADMM stopped at
max_iter), the gradient directions ``H G``:

    min  f(B Y B^T)   over   Y PSD (s x s),     B an orthonormal basis of span[G, V, H G] (x sqrt n)

For an objective that is a linear cost plus squared losses on entries of K (the problems
admm solves) this is a convex quadratic in ``svec(Y)`` over a PSD block of size
``s <= MAX_SUBSPACE``: the declaration's factored oracle (:func:`kernelforms.model.oracle`)
gives the objective, its gradient and that quadratic (:meth:`~kernelforms.model.Oracle.subspace_quadratic`,
one pass over the pairs, chunked so the memory stays ``O(chunk s^2)``), and the small cone
program is solved by Clarabel.  The new
factor is ``B U sqrt(diag(ev))`` from ``Y``'s largest eigenpairs; it is kept only when the
objective drops.  Since ``G`` itself lies in the subspace (``Y = B^T G G^T B / n^2``), the
step can only lower the objective, up to the cone solver's accuracy.

This is the subspace correction of low-rank SDP methods; it is not part of Hu & Kwok 2013,
and admm's ``polish=False`` turns it off.  The rank growth of :mod:`.rank` calls it through
``KLADMM.refine``.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["ritz_step", "MAX_SUBSPACE"]

#: largest subspace (columns of B) the polish uses: the Hessian costs ``O(p s^4 / 4)``
MAX_SUBSPACE = 24
#: the gradient directions fill the subspace while the Hessian's assembly stays below this
#: many multiply-adds (3e10: all 24 columns at 100,000 points, 14 at a million)
FLOP_BUDGET = 3e10
#: pairs per chunk of the Hessian assembly
_CHUNK = 16384


#: Clarabel settings tried in turn for the subspace program: tight first (near the optimum
#: the decrease is ~1e-10 of the objective, below the default tolerances: a step at the
#: defaults landed 1.9e-10 *above* the point on a 30-point PCP and was refused, leaving a
#: certified gap of 9e-6 where the tight step certifies 3e-11), then looser, then Clarabel's
#: defaults, the only ones whose "optimal_inaccurate" is accepted (the tight ones fail on
#: some larger subspaces: 11 columns at n = 100,000)
SUBSPACE_TOLERANCES = (
    dict(tol_gap_abs=1e-13, tol_gap_rel=1e-12, tol_feas=1e-12, tol_ktratio=1e-10),
    dict(tol_gap_abs=1e-11, tol_gap_rel=1e-10, tol_feas=1e-10, tol_ktratio=1e-8),
    {},
)


def _solve_small(Hs: np.ndarray, lin: np.ndarray, idx: np.ndarray, s: int,
                 Y0: np.ndarray) -> tuple[np.ndarray | None, str]:
    """``min y^T Hs y + lin^T y`` over ``Y`` PSD by Clarabel; ``None`` on failure.

    Written in the step ``d = y - y0`` from the current point, so that the solver's relative
    tolerances act on the decrease (small) rather than on the objective (large).
    """
    import cvxpy as cp

    a, b = idx
    y0 = Y0[a, b]
    g0 = 2.0 * (Hs @ y0) + lin
    ev, V = np.linalg.eigh(Hs)
    keep = ev > max(float(ev[-1]), 0.0) * 1e-14
    R = (V[:, keep] * np.sqrt(ev[keep])).T
    sel = sp.csr_matrix((np.ones(a.size), (np.arange(a.size), a * s + b)), shape=(a.size, s * s))
    why = ""
    for settings in SUBSPACE_TOLERANCES:
        # a fresh problem per attempt: CVXPY keeps Clarabel's solver (and its settings)
        # with a problem it solved before
        D = cp.Variable((s, s), symmetric=True)
        d = sel @ cp.vec(D, order="C")
        prob = cp.Problem(cp.Minimize(cp.sum_squares(R @ d) + g0 @ d), [Y0 + D >> 0])
        try:
            with warnings.catch_warnings():
                # CVXPY warns "Solution may be inaccurate" on optimal_inaccurate: the status
                # is read below, and the step is kept only if it lowers the objective (the
                # certificate of the run then says how good the point is)
                warnings.simplefilter("ignore", UserWarning)
                prob.solve(solver="CLARABEL", **settings)
        except cp.error.SolverError as exc:
            why = f"the subspace program failed ({exc})"
            continue
        last = settings is SUBSPACE_TOLERANCES[-1]
        if prob.status not in (("optimal", "optimal_inaccurate") if last else ("optimal",)) \
                or D.value is None:
            why = f"the subspace program ended {prob.status}"
            continue
        Y = Y0 + D.value
        note = "" if prob.status == "optimal" else \
            "the subspace program ended optimal_inaccurate (Clarabel's default tolerances)"
        return 0.5 * (Y + Y.T), note
    return None, why


def ritz_step(orc: Any, G: np.ndarray, directions: np.ndarray | None = None, *,
              max_cols: int | None = None, gradient: bool = True) -> tuple[np.ndarray | None, dict[str, Any]]:
    """One Ritz step over ``span[G, directions, H G]``: the exact minimiser of the objective
    over ``K = B Y B^T``, ``Y`` PSD, as a factor of at most ``max_cols`` columns (default
    ``G``'s); ``None`` when the subspace program fails or does not lower the objective.

    ``orc`` is the declaration's :class:`~kernelforms.model.Oracle` (``K PSD``, losses
    quadratic in entries of K).  ``directions`` are the certificate's escape vectors (the
    most negative eigenvectors of ``grad f(K)``); the gradient directions ``H G`` fill the
    subspace up to :data:`MAX_SUBSPACE` columns when ``gradient`` is true.
    """
    t0 = time.perf_counter()
    n, r = G.shape
    max_cols = r if max_cols is None else int(max_cols)
    f = orc.value(G)
    rec: dict[str, Any] = {"objective_before": f, "objective_after": f, "subspace": 0, "note": ""}
    if r > MAX_SUBSPACE:
        # the Hessian over r (r + 1) / 2 entries of Y is dense: at r = 275 (the adult-a6a run)
        # 37,950^2 values, which grew the process past 15 GB; the memory model assumes s <= 24
        rec["note"] = (f"rank {r} is above the subspace step's {MAX_SUBSPACE} columns (its Hessian "
                       "grows as r^4): no step")
        rec["time"] = time.perf_counter() - t0
        return None, rec
    Qg, _ = np.linalg.qr(G)
    cols = [Qg]
    room = MAX_SUBSPACE - r
    if directions is not None and directions.size and room > 0:
        Dv = np.asarray(directions, dtype=float).reshape(n, -1)[:, :room]
        cols.append(Dv)
        room -= Dv.shape[1]
    if gradient:
        # the Hessian costs about terms x (s (s + 1) / 2)^2 flops: keep it within a budget
        s0 = MAX_SUBSPACE - room  # columns so far
        s_max = s0
        terms = sum(int(op.i.size) for op, _ in orc.penalties)
        while s_max < MAX_SUBSPACE and terms * ((s_max + 1) * (s_max + 2) / 2) ** 2 <= FLOP_BUDGET:
            s_max += 1
        room = s_max - s0
    if gradient and room > 0:
        D = 0.5 * orc.smooth(G)[1]  # H G: the gradient in G is 2 grad f(K) G
        D -= Qg @ (Qg.T @ D)
        Ud, sd, _ = np.linalg.svd(D, full_matrices=False)
        k = int(min(room, np.sum(sd > 1e-12 * max(float(sd[0]) if sd.size else 0.0, 1e-300))))
        cols.append(Ud[:, :k])
    Q, Rq = np.linalg.qr(np.hstack(cols))
    # drop the columns the QR found dependent
    dep = np.abs(np.diag(Rq)) > 1e-10 * max(float(np.max(np.abs(np.diag(Rq)))), 1e-300)
    Q = Q[:, dep]
    s = Q.shape[1]
    rec["subspace"] = s
    B = Q * math.sqrt(n)  # entries of K of order one in Y
    Hs, lin, idx = orc.subspace_quadratic(B, _CHUNK)
    Y0 = (B.T @ G) @ (G.T @ B) / float(n * n)
    Y, why = _solve_small(Hs, lin, idx, s, Y0)
    rec["time"] = time.perf_counter() - t0
    rec["note"] = why
    if Y is None:
        return None, rec
    ev, U = np.linalg.eigh(Y)
    order = np.argsort(ev)[::-1]
    ev, U = ev[order], U[:, order]
    sig = int(np.sum(ev > 1e-8 * max(float(ev[0]), 1e-300)))  # interior-point round-off below
    k = max(1, min(max_cols, max(r, sig)))
    Gn = B @ (U[:, :k] * np.sqrt(np.maximum(ev[:k], 0.0)))
    fn = orc.value(Gn)
    rec["time"] = time.perf_counter() - t0
    if not (math.isfinite(fn) and fn < f):
        rec["note"] = f"the step did not lower the objective ({fn:.12g} >= {f:.12g})"
        return None, rec
    rec["objective_after"] = fn
    rec["rank"] = k
    return Gn, rec
