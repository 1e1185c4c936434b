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
        #: update the Gram matrix by one row per call, in blocks (:meth:`_blocked`; ``False``:
        #: recompute it from the whole vectors, as ``bcd`` always has; the two differ by
        #: rounding only)
        self.incremental = bool(incremental)
        self.dF: np.ndarray | None = None
        self.dR: np.ndarray | None = None
        self._prev: np.ndarray | None = None  # (2, N): the last image and residual (blocked path)
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
        if self.incremental:
            return self._blocked(x.ravel(), f, fx.shape, out)
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
            self.pos = (p + 1) % self.depth
            np.copyto(self.f_prev, f)
            self.r_prev = r
        else:
            self.f_prev, self.r_prev = f.copy(), r
        if self.count == 0:
            return None
        dR, dF = self.dR[: self.count], self.dF[: self.count]
        A = dR @ dR.T  # (the incremental Gram matrix is :meth:`_blocked`'s)
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

    def _blocked(self, x: np.ndarray, f: np.ndarray, shape: tuple,
                 out: np.ndarray | None) -> np.ndarray | None:
        """:meth:`candidate` with the incremental Gram matrix, in blocks of :data:`BLOCK`
        values: one pass forms the residual, its norm, the new differences, the Gram row and
        ``dR r`` (each block of ``r`` and of the new row used while in cache), one pass the
        candidate; about 20 passes over vectors of length N where the whole-vector operations
        took 37 (16 million values, depth 5: 340-384 -> 298-306 CPU ms a call at load 4).
        The same arithmetic but for the order of the sums (by block)."""
        N = f.size
        first = self._prev is None or self._prev.shape[1] != N or self.f_prev is None
        if self._prev is None or self._prev.shape[1] != N or self._prev.dtype != f.dtype:
            self._prev = np.empty((2, N), dtype=f.dtype)
            self.reset()  # another vector length: the history does not apply
            first = True
        if not first and (self.dF is None or self.dF.shape[1] != N):
            self.dF = np.empty((self.depth, N))
            self.dR = np.empty((self.depth, N))
        fp, rp = self._prev
        p = self.pos
        k = 0 if first else min(self.count + 1, self.depth)
        rr = 0.0
        row, rhs = np.zeros(k), np.zeros(k)
        w = min(BLOCK, N)
        rb, cb, t = np.empty(w, dtype=f.dtype), np.empty(w), np.empty(k)
        for lo in range(0, N, w):
            sl = slice(lo, min(lo + w, N))
            r = np.subtract(f[sl], x[sl], out=rb[:sl.stop - lo])
            rr += float(np.einsum("i,i->", r, r))
            if k:
                np.subtract(f[sl], fp[sl], out=self.dF[p, sl])
                np.subtract(r, rp[sl], out=self.dR[p, sl])
                D = self.dR[:k, sl]
                row += np.einsum("ki,i->k", D, self.dR[p, sl], out=t)
                rhs += np.einsum("ki,i->k", D, r, out=t)
            np.copyto(fp[sl], f[sl])
            np.copyto(rp[sl], r)
        self.residual_norm = float(np.sqrt(rr))
        self.f_prev = self.r_prev = fp  # (marks the history as started)
        if not k:
            return None
        self.count = k
        self.gram[p, :k] = row
        self.gram[:k, p] = row
        self.pos = (p + 1) % self.depth
        A = self.gram[:k, :k].copy()
        A[np.diag_indices_from(A)] += 1e-12 * max(float(np.trace(A)), 1e-300)
        try:
            c = np.linalg.solve(A, rhs)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(c)):
            return None
        res = np.empty(N, dtype=np.result_type(f, np.float64)) if out is None else out.reshape(-1)
        dF = self.dF[:k]
        for lo in range(0, N, w):
            sl = slice(lo, min(lo + w, N))
            cd = np.einsum("k,ki->i", c, dF[:, sl], out=cb[:sl.stop - lo])
            np.subtract(f[sl], cd, out=res[sl])
            if not np.isfinite(res[sl]).all():
                return None
        return res.reshape(shape)


#: values per block of :meth:`Anderson._blocked` (128 KB of float64: a block of the residual
#: and of the new difference stay in the core's cache while the history's rows stream by)
BLOCK = 1 << 14
