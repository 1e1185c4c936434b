"""The linear algebra of smo: conjugate gradients on ``M(Q)`` for a pair, the pair matrix, the
Cholesky factor, the BLAS thread limit, and the reduced primal's size and time models that
bound the recovery basis."""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg as sla

from ..._parallel import with_threads as blas_threads  # noqa: F401 - re-exported
from ...problems import rank_rule


#: above this many points the line search, the centrality test and the refined recovery
#: (all dense) are skipped: plain barrier sweeps and one reduced primal on a Lanczos basis
DENSE_MAX = 500


def _cg_pair(matvec, W: np.ndarray, k: int, l: int, x0: np.ndarray | None, tol: float,
             maxiter: int, deadline: float | None = None) -> tuple[np.ndarray, int]:
    """Conjugate gradients for ``A_2 X = W``, two right-hand sides at once (each column its
    own recursion, the products with ``A`` together): ``A_2`` is ``matvec`` restricted to
    the rows / columns other than ``k, l`` (kept at zero).  Stops when both residuals are
    below ``tol`` times their right-hand side's norm; ``x0`` is a warm start.
    With a ``deadline`` it is checked every 32 iterations; the iteration count is then
    ``-1`` when it passed (the solution is incomplete)."""
    if x0 is None:
        X = np.zeros_like(W)
        R = W.copy()
    else:
        X = x0.copy()
        R = W - matvec(X)
        R[k] = R[l] = 0.0
    P = R.copy()
    rs = np.einsum("ij,ij->j", R, R)
    target = (tol * tol) * np.maximum(np.einsum("ij,ij->j", W, W), 1e-300)
    it = 0
    while it < maxiter and (rs[0] > target[0] or rs[1] > target[1]):
        if deadline is not None and it % 32 == 31 and time.perf_counter() > deadline:
            return X, -1
        AP = matvec(P)
        AP[k] = AP[l] = 0.0
        pAp = np.einsum("ij,ij->j", P, AP)
        if not (pAp[0] > 0 and pAp[1] > 0):
            break
        alpha = rs / pAp
        X += P * alpha
        R -= AP * alpha
        rs_new = np.einsum("ij,ij->j", R, R)
        if not (rs_new[0] > 0 and rs_new[1] > 0):
            it += 1
            break
        P = R + P * (rs_new / rs)
        rs = rs_new
        it += 1
    return X, it


def _pair_matrix(L: np.ndarray, idx: np.ndarray, T: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Dense ``M(Q) = L - sum_p (Q_p T_p / 2)(E_ij + E_ji)``."""
    M = np.array(L, dtype=float, copy=True)
    v = 0.5 * Q * T
    np.add.at(M, (idx[:, 0], idx[:, 1]), -v)
    np.add.at(M, (idx[:, 1], idx[:, 0]), -v)
    return M


def _svec_index(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of each entry of ``svec`` (Clarabel's PSD-triangle order: the upper
    triangle column by column)."""
    c = np.repeat(np.arange(d), np.arange(1, d + 1))
    r = np.arange(d * (d + 1) // 2) - c * (c + 1) // 2
    return r, c


def _chol(M: np.ndarray):
    """Lower Cholesky factor of ``M``, or None when ``M`` is not positive definite."""
    try:
        return sla.cho_factor(M, lower=True, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return None


#: reduced-primal memory model (bytes): _RP_T2 t^2 + _RP_MT m t + _RP_BASE, t = d (d + 1) / 2
_RP_T2, _RP_MT, _RP_BASE = 64.0, 192.0, 128 * 2**20


def reduced_primal_bytes(d: int, m: int) -> int:
    """Peak bytes of one reduced primal (:meth:`HoiSMO.reduced_primal`) over a basis of
    ``d`` directions with ``m`` pairs.

    Clarabel's KKT system holds the PSD cone's scaling as a dense block over the
    ``t = d (d + 1) / 2`` entries of ``svec(B)``, so the peak grows like ``t^2``; the margin
    block adds ``m t`` nonzeros.  Measured (peak RSS above the process before the call,
    ``resource.getrusage`` in a fresh process per point, 2026-11-23; docs/other_solvers.md):
    d = 20, 30, 40 (t = 210, 465, 820) with m = 2d and 6d: 8-12, 21-30, 51-71 MiB;
    d = 60 (t = 1,830): 203 MiB (m = 120), 266 MiB (m = 360); d = 80 (t = 3,240, m = 160):
    602 MiB; d = 100 (t = 5,050, m = 200): 1,417 MiB.  The CVXPY program it replaces had no
    cap on d (the refinement grew it towards n) and aborted on 16-48 GB at n = 300-400.
    In one fresh process of six the first call grew by 110 MiB more (d = 30: 132 MiB
    instead of 22).  Model (an upper envelope of the measurements):
    ``64 t^2 + 192 m t + 128 MiB``.
    """
    t = d * (d + 1) // 2
    return int(_RP_T2 * t * t + _RP_MT * m * t + _RP_BASE)


def default_max_basis(m: int) -> int:
    """Default cap of the recovery basis: ``4 r + 10`` with ``r = rank_rule(m)``, the
    largest ``r`` with ``r (r + 1) / 2 <= m``.  An optimal kernel of rank at most ``r``
    exists (Barvinok-Pataki, ``m`` margin constraints), and the refinement needs
    directions beyond it: the largest final bases measured were 28 on ``wine`` (60
    points, ``r = 11``, cap 54) and 33 on a 50-point ``digits`` subset (``r = 10``, cap 50)."""
    return 4 * rank_rule(m, 10**9) + 10


def _basis_cap(n: int, m: int, max_basis: int | None) -> int:
    """Largest recovery basis the solver may use: ``min(m + 1, n, max_basis)`` (>= 2),
    ``max_basis`` defaulting to :func:`default_max_basis`."""
    cap = default_max_basis(m) if max_basis is None else int(max_basis)
    return max(2, min(m + 1, n, cap))


def reduced_primal_seconds(d: int) -> float:
    """A pessimistic time of one interior-point iteration of the reduced primal (plus its
    setup): the dense ``t x t`` factorisation, ``t = d (d + 1) / 2``, at 1 GFlop/s
    (measured: ~5 s per iteration at d = 80 on the loaded 2-core machine).  The recovery
    gives Clarabel the remaining time minus this, and skips a reduced primal that would
    not get two iterations, so that it never overruns the deadline by more than one
    iteration's misestimate."""
    t = d * (d + 1) / 2
    return 0.05 + t**3 / 3e9


def largest_basis_within(n: int, m: int, budget: float) -> int:
    """The largest basis ``d`` whose reduced primal fits ``budget`` bytes (at least 2)."""
    d = 2
    while d < min(m + 1, n) and reduced_primal_bytes(d + 1, m) <= budget:
        d += 1
    return d
