"""Out-of-sample extension of a learned factor (Hu & Kwok 2015, Section III-E).

New points are treated as unlabeled points of the graph: their rows minimise
``tr(G^T L G)`` with the in-sample rows fixed.  Used by
:class:`~kernelforms.estimator.KernelLearner` (``extension="joint"``) and available for
any result with a factor (``from kernelforms.extend import extend``; the old location
``kernelforms.solvers.bcd.extend`` re-exports it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from .errors import ProblemError

__all__ = ["extend"]


def _rel(diff: np.ndarray, ref: np.ndarray) -> float:
    return math.sqrt(float(np.einsum("ij,ij->", diff, diff))
                     / max(float(np.einsum("ij,ij->", ref, ref)), 1e-300))


def extend(result: Any, new_points: Any, graph: Any, *, method: str = "block",
           eps: float = 1e-8, max_iter: int = 10000, b: float | None = None) -> np.ndarray:
    """Out-of-sample extension (Hu & Kwok 2015, Section III-E): learn rows for new points.

    The in-sample rows (``result.factor``) stay fixed; the new rows minimise
    ``tr([G_I; G_O]^T L [G_I; G_O])`` over ``G_O``, i.e. they are treated as unlabeled
    points: eq. 13 row by row (``method="sequential"``, Gauss-Seidel) or eq. 17 for all
    new rows at once (``method="block"``, Jacobi), iterated until the relative change
    is below ``eps``.

    Parameters
    ----------
    result : Result or ndarray (n_in, r)
        A fitted result (its ``factor``) or the in-sample factor itself.
    new_points : array of int (n_new,)
        Positions of the new points in ``graph``; the remaining positions, in
        increasing order, are the in-sample points in the order of ``result.factor``.
    graph : sparse (n_in + n_new, n_in + n_new)
        Laplacian over in-sample and new points together (positive diagonal).
    method : {"block", "sequential"}
    eps : float
    max_iter : int
    b : float, optional
        Project each new row onto ``||g|| <= b`` (the linear loss's bound).

    Returns
    -------
    ndarray (n_new, r)
        The factor rows of the new points, in the order of ``new_points``.
    """
    GI = np.asarray(getattr(result, "factor", result), dtype=float)
    if GI.ndim != 2:
        raise ProblemError(f"The 'result' parameter of extend must have a 2-D factor. Got shape {GI.shape}.")
    L = sp.csr_matrix(graph, dtype=float)
    N = L.shape[0]
    if L.shape != (N, N):
        raise ProblemError(f"The 'graph' parameter of extend must be square. Got shape {L.shape}.")
    new = np.asarray(new_points, dtype=np.int64).ravel()
    if new.size == 0 or new.min() < 0 or new.max() >= N or np.unique(new).size != new.size:
        raise ProblemError(f"The 'new_points' parameter of extend must be distinct indices in "
                           f"[0, {N - 1}]. Got {new_points!r}.")
    old = np.setdiff1d(np.arange(N), new)
    if old.size != GI.shape[0]:
        raise ProblemError(f"extend: graph has {N} points and {new.size} are new, so "
                           f"{old.size} in-sample rows are expected; the factor has {GI.shape[0]}.")
    if method not in ("block", "sequential"):
        raise ProblemError(f"The 'method' parameter of extend must be 'block' or 'sequential'. "
                           f"Got {method!r} instead.")
    d = L.diagonal()
    if np.any(d[new] <= 0):
        raise ProblemError("extend: every new point needs L_ii > 0 (build L with delta > 0).")
    r = GI.shape[1]
    G = np.zeros((N, r))
    G[old] = GI
    Lbar = (L - sp.diags(d)).tocsr()
    Lnew = Lbar[new]
    dn = d[new][:, None]

    def proj(g):
        if b is None:
            return g
        nr = np.sqrt(np.einsum("ij,ij->i", g, g))
        f = np.minimum(1.0, b / np.maximum(nr, 1e-300))
        return g * f[:, None]

    if method == "block":
        for _ in range(max_iter):
            gn = proj(-(Lnew @ G) / dn)
            ch = _rel(gn - G[new], gn)
            G[new] = gn
            if ch < eps:
                break
    else:
        Lb = Lbar
        for _ in range(max_iter):
            prev = G[new].copy()
            for i in new:
                a, e = Lb.indptr[i], Lb.indptr[i + 1]
                g = -(Lb.data[a:e] @ G[Lb.indices[a:e]]) / d[i]
                G[i] = proj(g[None, :])[0]
            ch = _rel(G[new] - prev, G[new])
            if ch < eps:
                break
    return G[new].copy()
