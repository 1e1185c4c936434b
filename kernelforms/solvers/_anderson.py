"""Anderson acceleration (type II) of a fixed-point map ``x -> F(x)``, shared by the solvers.

Walker & Ni (2011); the safeguards are the caller's: ``bcd`` accepts a candidate only if it
lowers the objective, ``admm`` only if the next fixed-point residual is smaller than the
last accepted one (Zhang et al. 2019, "Accelerating ADMM for efficient simulation and
optimization", Section 4).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._pages import streamed

__all__ = ["Anderson"]


class Anderson:
    """Anderson acceleration (type II, depth ``m``) of a map ``x -> F(x)``.

    Keeps the last ``m`` differences of iterates' images ``dF`` and residuals ``dR``
    (``R = F(x) - x``) in ring buffers, and their Gram matrix ``dR dR^T`` (one new row per
    call); the candidate is ``F(x_k) - dF c`` with ``c`` the least-squares fit
    ``dR c ~ R_k`` (normal equations, ``m x m``).  ``O(N m)`` per call for vectors of
    length ``N``; the caller decides whether to take the candidate.
    """

    def __init__(self, depth: int, incremental: bool = True, threads: int = 1) -> None:
        self.depth = int(depth)
        #: threads of the incremental step's passes (the shared pool of
        #: :mod:`kernelforms._parallel`; 1: the calling thread alone)
        self.threads = max(1, int(threads))
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
                self.dF = streamed((self.depth, f.size))
                self.dR = streamed((self.depth, f.size))
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
        """:meth:`candidate` with the incremental Gram matrix, in two compiled passes
        (:mod:`._anderson_kernels`) over ranges of blocks of :data:`BLOCK` values, run on
        :attr:`threads` threads: one forms the residual, the new differences, the stored
        image and residual and, per block, ``||r||^2``, the Gram row and ``dR r``; one the
        candidate and its finiteness.  The blocks' sums are added in one fixed order, so the
        result does not depend on the threads.  The same arithmetic as the whole-vector fit
        but for the order of the sums."""
        from . import _anderson_kernels as kern  # compiled on first use (numba), cached on disk

        N = f.size
        first = self._prev is None or self._prev.shape[1] != N or self.f_prev is None
        if self._prev is None or self._prev.shape[1] != N or self._prev.dtype != f.dtype:
            self._prev = streamed((2, N), f.dtype)
            self.reset()  # another vector length: the history does not apply
            first = True
        if not first and (self.dF is None or self.dF.shape[1] != N):
            self.dF = streamed((self.depth, N))
            self.dR = streamed((self.depth, N))
        if self.dF is None:  # (not read while k = 0; the kernels want arrays)
            self.dF = self.dR = np.empty((self.depth, 0))
        fp, rp = self._prev
        p = self.pos
        k = 0 if first else min(self.count + 1, self.depth)
        w = max(1, min(BLOCK, N))
        parts = np.empty((-(-N // w), 1 + 2 * k))
        ranges = self._ranges(N, w)
        self._run(ranges, lambda ab: kern.fit_pass(ab[0], ab[1], w, x, f, fp, rp, self.dF,
                                                   self.dR, p, k, parts))
        tot = parts.sum(axis=0)  # the blocks in one fixed order, whatever the threads
        self.residual_norm = float(np.sqrt(tot[0]))
        self.f_prev = self.r_prev = fp  # (marks the history as started)
        if not k:
            return None
        self.count = k
        row, rhs = tot[1:1 + k], tot[1 + k:]
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
        bad = self._run(ranges, lambda ab: kern.candidate_pass(ab[0], ab[1], f, dF, c, res))
        if sum(bad):
            return None
        return res.reshape(shape)

    def _ranges(self, N: int, w: int) -> list[tuple[int, int]]:
        """The value ranges of the threads: whole blocks of ``w`` values, as even as the
        blocks allow (one range below :data:`MIN_PARALLEL` values or with one thread)."""
        nb = -(-N // w)
        t = min(self.threads, nb) if N >= MIN_PARALLEL else 1
        cuts = [min(N, (nb * i // t) * w) for i in range(t + 1)]
        return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a] or [(0, N)]

    def _run(self, ranges: list[tuple[int, int]], fn: Any) -> list:
        if len(ranges) == 1:
            return [fn(ranges[0])]
        from .._parallel import _executor

        return list(_executor(self.threads).map(fn, ranges))


#: values per block of :meth:`Anderson._blocked`'s sums (128 KB of float64), aligned to
#: absolute indices: the threads' ranges are whole blocks
BLOCK = 1 << 14
#: vectors shorter than this are done on one thread (a thread hand-off costs tens of
#: microseconds; a pass over 2^17 values about a millisecond)
MIN_PARALLEL = 1 << 17
