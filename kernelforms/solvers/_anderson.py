"""Anderson acceleration (type II) of a fixed-point map ``x -> F(x)``, shared by the solvers.

Walker & Ni (2011); the safeguards are the caller's: ``bcd`` accepts a candidate only if it
lowers the objective, ``admm`` only if the next fixed-point residual is smaller than the
last accepted one (Zhang et al. 2019, "Accelerating ADMM for efficient simulation and
optimization", Section 4).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Anderson"]


class Anderson:
    """Anderson acceleration (type II, depth ``m``) of a map ``x -> F(x)``.

    Keeps the last ``m`` differences of iterates' images ``dF`` and residuals ``dR``
    (``R = F(x) - x``) in ring buffers, and their Gram matrix ``dR dR^T`` (one new row per
    call); the candidate is ``F(x_k) - dF c`` with ``c`` the least-squares fit
    ``dR c ~ R_k`` (normal equations, ``m x m``).  ``O(N m)`` per call for vectors of
    length ``N``; the caller decides whether to take the candidate.
    """

    def __init__(self, depth: int, incremental: bool = True) -> None:
        self.depth = int(depth)
        #: update the Gram matrix by one row per call (``False``: recompute it, as ``bcd``
        #: always has; the two differ by rounding only)
        self.incremental = bool(incremental)
        self.dF: np.ndarray | None = None
        self.dR: np.ndarray | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the history (the buffers stay allocated)."""
        self.f_prev: np.ndarray | None = None
        self.r_prev: np.ndarray | None = None
        self.gram = np.zeros((self.depth, self.depth))
        self.count = 0
        self.pos = 0
        #: ``||F(x) - x||`` at the last call
        self.residual_norm = np.inf

    def candidate(self, x: np.ndarray, fx: np.ndarray,
                  out: np.ndarray | None = None) -> np.ndarray | None:
        """The extrapolated point from ``x`` and ``F(x)`` (``None`` while the history is empty
        or when the fit fails); written into ``out`` (same shape as ``fx``) when given."""
        f = fx.ravel()
        r = f - x.ravel()
        self.residual_norm = float(np.sqrt(r @ r))
        if self.f_prev is not None:
            if self.dF is None or self.dF.shape[1] != f.size:
                self.dF = np.empty((self.depth, f.size))
                self.dR = np.empty((self.depth, f.size))
            p = self.pos
            np.subtract(f, self.f_prev, out=self.dF[p])
            np.subtract(r, self.r_prev, out=self.dR[p])
            self.count = min(self.count + 1, self.depth)
            if self.incremental:
                row = self.dR[: self.count] @ self.dR[p]
                self.gram[p, : self.count] = row
                self.gram[: self.count, p] = row
            self.pos = (p + 1) % self.depth
            np.copyto(self.f_prev, f)
            self.r_prev = r
        else:
            self.f_prev, self.r_prev = f.copy(), r
        if self.count == 0:
            return None
        dR, dF = self.dR[: self.count], self.dF[: self.count]
        A = self.gram[: self.count, : self.count].copy() if self.incremental else dR @ dR.T
        A[np.diag_indices_from(A)] += 1e-12 * max(float(np.trace(A)), 1e-300)
        try:
            c = np.linalg.solve(A, dR @ r)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(c)):
            return None
        if out is None:
            res = f - c @ dF
        else:
            res = out.reshape(-1)
            np.copyto(res, f)
            res -= c @ dF
        if not np.all(np.isfinite(res)):
            return None
        return res.reshape(fx.shape)
