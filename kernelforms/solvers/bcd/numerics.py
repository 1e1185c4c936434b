"""The small numerical kernels of bcd: the batched box QPs of the row updates, the Huber
hinge, batched SPD solves, and the smallest eigenvalue and gap bookkeeping of its duality-gap
certificate."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp


#: row-update codes of the pair rows (per pair, so that one problem may mix them), named
#: by :attr:`kernelforms.model.Loss.row_update`
HINGE, SQUARED_HINGE, SQUARE, LINEAR = 0, 1, 2, 3
KIND_NAMES = ("hinge", "squared_hinge", "square", "linear")  # the uniform modes' names
_LOSS_NAMES = ("hinge", "squared_hinge", "squared", "linear")  # the losses' own names
#: Loss.row_update -> the code of its closed-form row update
_ROW_UPDATES = {name: code for code, name in enumerate(KIND_NAMES)}

#: the losses of the uniform modes as functions of the margin ``z`` (same as P6)
_MARGIN_LOSS = {
    "hinge": lambda z: np.maximum(0.0, 1.0 - z),
    "squared_hinge": lambda z: np.maximum(0.0, 1.0 - z) ** 2,
    "square": lambda z: (1.0 - z) ** 2,
    "linear": lambda z: -z,
}


#: coordinate-descent passes of the row-QP fall-back per sweep (a row left above qp_tol
#: is still safeguarded: it is kept only if it lowers its row objective)
QP_MAX_CD = 200


# ----------------------------------------------------------------------------- QPs
def box_qp(H: np.ndarray, q: np.ndarray, upper: Any, x0: np.ndarray | None = None, *,
           lower: Any = 0.0, tol: float = 1e-12, max_newton: int = 25,
           max_cd: int = 5000) -> np.ndarray:
    """Solve a batch of small box QPs ``min 1/2 x'Hx - q'x  s.t. lower <= x <= upper``.

    Parameters
    ----------
    H : ndarray (B, t, t)
        Symmetric positive semidefinite matrices.
    q : ndarray (B, t)
    upper : float or ndarray (B, t)
        Upper bound (``np.inf`` for a one-sided bound), one for all or one per entry.
    x0 : ndarray (B, t), optional
        Warm start.
    lower : float or ndarray (B, t)
        Lower bound (default 0; ``-np.inf`` for a free entry, whose ``H_jj`` must be > 0).
    tol : float
        KKT tolerance on the natural residual, relative to ``1 + max |q|`` per row.

    Returns
    -------
    ndarray (B, t)
        The minimisers (exact up to round-off where the active-set step converged).

    Notes
    -----
    Primal-dual active set (semismooth Newton on ``x = clip(x - w / diag H)``,
    ``w = Hx - q``): guess the bound/free split, solve the free block exactly
    (pseudo-inverse, so a singular ``H`` is fine), repeat.  Rows that do not reach
    the KKT tolerance fall back to projected coordinate descent (exact line
    minimisation per coordinate), which converges for any PSD ``H``.
    """
    B, t = q.shape
    if B == 0 or t == 0:
        return np.zeros((B, t))
    per_entry = np.ndim(upper) > 0 or np.ndim(lower) > 0
    if per_entry:
        upper = np.broadcast_to(np.asarray(upper, dtype=float), (B, t))
        lower = np.broadcast_to(np.asarray(lower, dtype=float), (B, t))

    def rows(a, sel):
        return a[sel] if per_entry else a

    hd = np.einsum("bii->bi", H)
    scale = 1.0 + np.max(np.abs(q), axis=1)  # (B,)
    hds = np.maximum(hd, 1e-14 * scale[:, None])
    if x0 is None:
        x = np.zeros((B, t)) if not per_entry else np.clip(np.zeros((B, t)), lower, upper)
    else:
        x = np.clip(x0, lower, upper)
    eye = np.eye(t, dtype=bool)

    def residual_of(Hs, qs, hs, xs, sc, lo, hi):
        w = np.einsum("bij,bj->bi", Hs, xs) - qs
        nat = xs - np.clip(xs - w / hs, lo, hi)
        return np.max(np.abs(nat) * hs, axis=1) / sc

    res = residual_of(H, q, hds, x, scale, lower, upper)
    todo = np.flatnonzero(res > tol)
    prev = None  # active sets used in the previous Newton step, for the rows in todo
    stalled = []
    for _ in range(max_newton):
        if todo.size == 0:
            break
        Hs, qs, xs, hs = H[todo], q[todo], x[todo], hds[todo]
        lo, hi = rows(lower, todo), rows(upper, todo)
        w = np.einsum("bij,bj->bi", Hs, xs) - qs
        z = xs - w / hs
        low = z <= lo
        up = z >= hi
        free = ~(low | up)
        sets = np.where(low, 0, np.where(up, 2, 1))
        if prev is not None:
            same = np.all(sets == prev, axis=1)
            if np.any(same):  # the same split again without reaching KKT: hand over
                stalled.append(todo[same])
                keep = ~same
                todo, Hs, qs, hs = todo[keep], Hs[keep], qs[keep], hs[keep]
                low, up, free, sets = low[keep], up[keep], free[keep], sets[keep]
                lo, hi = rows(lo, keep), rows(hi, keep)
                if todo.size == 0:
                    break
        if per_entry:
            xb = np.where(up, np.where(np.isfinite(hi), hi, 0.0),
                          np.where(low, np.where(np.isfinite(lo), lo, 0.0), 0.0))
        else:
            xb = np.where(up, upper if math.isfinite(upper) else 0.0, 0.0)
        ff = free[:, :, None] & free[:, None, :]
        Hm = np.where(ff, Hs, 0.0) + np.where(eye & ~free[:, :, None], 1.0, 0.0)
        rhs = np.where(free, qs - np.einsum("bij,bj->bi", Hs, xb), xb)
        # exact solve of the free block; a relative ridge of 1e-13 keeps a singular
        # P_FF (hinge with more partners than the rank) solvable
        Hm = Hm + (1e-13 * (1.0 + np.max(hs, axis=1)))[:, None, None] * eye
        xn = np.linalg.solve(Hm, rhs[:, :, None])[:, :, 0]
        x[todo] = np.clip(np.where(free, xn, xb), lo, hi)
        keep = residual_of(Hs, qs, hs, x[todo], scale[todo], lo, hi) > tol
        prev = sets[keep]
        todo = todo[keep]
    todo = np.concatenate([todo] + stalled) if stalled else todo
    # fall-back: projected coordinate descent on the remaining rows
    it = 0
    while todo.size and it < max_cd:
        Hs, qs, hs = H[todo], q[todo], hds[todo]
        lo, hi = rows(lower, todo), rows(upper, todo)
        xs = x[todo]
        for j in range(t):
            wj = np.einsum("bi,bi->b", Hs[:, j, :], xs) - qs[:, j]
            xs[:, j] = np.clip(xs[:, j] - wj / hs[:, j],
                               lo[:, j] if per_entry else lo, hi[:, j] if per_entry else hi)
        x[todo] = xs
        it += 1
        if it % 10 == 0 or it >= max_cd:
            todo = todo[residual_of(Hs, qs, hs, xs, scale[todo], lo, hi) > tol]
    return x


def huber_hinge(z: np.ndarray, mu: float) -> np.ndarray:
    """``max_{0<=beta<=1} beta (1 - z) - mu beta^2 / 2``: the hinge for ``mu = 0``."""
    u = 1.0 - z
    if mu <= 0:
        return np.maximum(0.0, u)
    return np.where(u <= 0, 0.0, np.where(u >= mu, u - 0.5 * mu, u * u / (2.0 * mu)))


def spd_solve(W: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Solve a batch of small symmetric positive definite systems ``W x = y``.

    Gaussian elimination without pivoting, vectorised over the batch (one numpy step
    per pivot); for the ``|T(i)| <= 8`` systems of the square loss this avoids one
    LAPACK call per row.  Larger systems go to ``numpy.linalg.solve``.
    """
    B, t = y.shape
    if t > 8:
        return np.linalg.solve(W, y[:, :, None])[:, :, 0]
    W = W.copy()
    y = y.copy()
    for k in range(t - 1):
        f = W[:, k + 1:, k] / W[:, k, k][:, None]
        W[:, k + 1:, k + 1:] -= f[:, :, None] * W[:, k, None, k + 1:]
        y[:, k + 1:] -= f * y[:, k:k + 1]
    x = np.empty_like(y)
    for k in range(t - 1, -1, -1):
        x[:, k] = (y[:, k] - np.einsum("bj,bj->b", W[:, k, k + 1:], x[:, k + 1:])) / W[:, k, k]
    return x



#: up to this n the duality-gap certificate uses a dense symmetric eigensolver (exact to
#: round-off); above it, Lanczos (ARPACK) for the smallest eigenvalue
DENSE_EIG_MAX = 2500
#: up to this many pairs the hinge certificate also fits the multipliers (an m x m QP)
FIT_MAX_PAIRS = 1500


def lambda_min(Z: sp.spmatrix) -> tuple[float, np.ndarray] | None:
    """Smallest eigenvalue of the symmetric sparse ``Z`` and a unit eigenvector.

    Dense (LAPACK ``syevr``, one eigenpair) for ``n <= DENSE_EIG_MAX``, else Lanczos;
    ``None`` when Lanczos does not converge (no certificate then).
    """
    n = Z.shape[0]
    if n <= DENSE_EIG_MAX:
        import scipy.linalg as sla

        w, V = sla.eigh(Z.toarray(), subset_by_index=[0, 0], driver="evr")
        return float(w[0]), V[:, 0]
    import scipy.sparse.linalg as spla

    try:
        w, V = spla.eigsh(Z.tocsr(), k=1, which="SA", tol=1e-10, ncv=min(n, 64),
                          maxiter=20 * n)
    except spla.ArpackNoConvergence:
        return None
    # the Lanczos residual bounds the distance of the Ritz value to an eigenvalue
    v = V[:, 0]
    res = float(np.linalg.norm(Z @ v - w[0] * v))
    return float(w[0]) - res, v


@dataclass
class Certificate:
    """A duality-gap certificate of a BCD iterate (see :meth:`BCDEngine.certificate`)."""

    primal: float  # the problem's objective at G (exact hinge for the hinge)
    dual: float  # a lower bound on the optimum (a feasible dual point)
    gap: float  # primal - dual >= primal - optimum
    rel_gap: float  # gap relative to |optimum| (conservative)
    smoothed_rel_gap: float  # rel_gap of the smoothed hinge (mu > 0), else = rel_gap


def _rel_gap(gap: float, primal: float, dual: float) -> float:
    """``gap / |optimum|`` bounded from above: the optimum lies in ``[dual, primal]``."""
    if primal * dual > 0:
        den = min(abs(primal), abs(dual))
    else:  # the optimum may be 0: relative to the larger magnitude (documented)
        den = max(abs(primal), abs(dual))
    return gap / den if den > 0 else (0.0 if gap <= 0 else math.inf)
