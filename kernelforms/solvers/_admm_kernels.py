"""Compiled half-steps of KL_ADMM (:mod:`kernelforms.solvers.admm`).

Each kernel takes a range of rows ``[a, b)`` of the internal order and, for every row ``i``:
forms the right-hand side (``rho u_i - lambda_i`` for the V-step, ``rho h_i + lambda_i`` with
the relaxed ``h_i`` for the U-step) plus the CSR row of ``M`` times the other factor, gathers
the ``|T_i|`` neighbour rows of the other factor scaled by ``sqrt(c_ij)`` (``P``,
``|T_i| x r``), forms ``rho I + P P^T`` and ``P c``, solves it by Cholesky and writes
``(c - P^T y) / rho`` (Sherman-Morrison-Woodbury, Hu & Kwok 2013, eq. 25).  The U-step also
updates the multiplier and adds the row's residual and objective terms to the partial sums
of its block of rows (blocks aligned to absolute row indices: the sums do not depend on how
the rows are split between threads).

Rows go in batches of consecutive rows with the same ``|T_i| = s`` (the solver sorts the rows
by ``|T_i|`` within windows of its order), at most :data:`BATCH` rows: a first pass reads
each row's sparse product and gathers into the batch's buffers, laid out row-last, and the
small systems are then solved for the whole batch at once, every operation a loop over the
batch's rows innermost (which the compiler turns into vector instructions: each row's chain
of dependent operations runs beside the others').  The first pass prefetches (a hint,
:mod:`._prefetch`) the rows of the other factor that the rows :data:`AHEAD_M` /
:data:`AHEAD_T` ahead will read, so that the random row reads of a factor larger than the
caches overlap; it changes no value.  Every row's arithmetic is float64 in one
fixed order (no ``fastmath``, no fused multiply-adds), whatever the batches and the precision
of the arrays (float32 arrays are a second specialisation).  The kernels release the GIL
(``nogil``): the solver's thread pool runs them on disjoint row ranges.  They are compiled on
first use and cached on disk (``cache=True``); this module is imported by the solve only, so
``import kernelforms`` does not load numba.
"""

from __future__ import annotations

import numba
import numpy as np

from ._prefetch import prefetch_row

#: rows per batch of the systems (buffers of ``BATCH (s^2 + s r + 4 r)`` values)
BATCH = 32
#: how many rows ahead the gathers prefetch the other factor's rows that row will read: the
#: columns of its CSR row of ``M`` and its ``|T_i|`` pair partners (0: no prefetch)
AHEAD_M = 4
AHEAD_T = 4

_opts = dict(nogil=True, cache=True, error_model="numpy")


@numba.njit(inline="always", **_opts)
def _batch_end(i0, b, tptr):
    """The end of the batch that starts at ``i0``: consecutive rows with the same ``|T_i|``."""
    s = tptr[i0 + 1] - tptr[i0]
    i1 = i0 + 1
    while i1 < b and i1 - i0 < BATCH and tptr[i1 + 1] - tptr[i1] == s:
        i1 += 1
    return i1, s


@numba.njit(inline="always", **_opts)
def _load(i0, i1, indptr, indices, data, tptr, tnbr, tsw, other, C, MV, P, mv, am, at):
    """Rows ``[i0, i1)`` (batch column ``k = i - i0``): ``MV[:, k] = (M other)_i``,
    ``C[:, k] += MV[:, k]`` (``C`` holds the rest of the right-hand sides), ``P[a, :, k] =
    sqrt(c_ij) other_j`` for the row's ``a``-th term.  Before row ``i`` it prefetches the rows
    of ``other`` that row ``i + am`` reads through ``M`` and those row ``i + at`` reads as pair
    partners (a hint: no value changes; rows past the end of the range are the next range's)."""
    r = other.shape[1]
    n = tptr.size - 1
    for i in range(i0, i1):
        k = i - i0
        if am > 0 and i + am < n:
            for e in range(indptr[i + am], indptr[i + am + 1]):
                prefetch_row(other, indices[e])
        if at > 0 and i + at < n:
            for e in range(tptr[i + at], tptr[i + at + 1]):
                prefetch_row(other, tnbr[e])
        for q in range(r):
            mv[q] = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            w = np.float64(data[e])
            j = indices[e]
            for q in range(r):
                mv[q] += w * other[j, q]
        for q in range(r):
            MV[q, k] = mv[q]
            C[q, k] += mv[q]
        t0 = tptr[i]
        for a in range(tptr[i + 1] - t0):
            w = np.float64(tsw[t0 + a])
            j = tnbr[t0 + a]
            for q in range(r):
                P[a, q, k] = w * other[j, q]


@numba.njit(inline="always", **_opts)
def _solve(m, s, C, P, G, y, d, acc, rho, out, i0):
    """For the batch's ``m`` rows: ``out_i = (c - P^T (rho I + P P^T)^{-1} P c) / rho``."""
    r = C.shape[0]
    # the Gram matrices rho I + P P^T (lower triangles) and P c, summed over q in order
    for a in range(s):
        for k in range(m):
            y[a, k] = 0.0
        for q in range(r):
            for k in range(m):
                y[a, k] += P[a, q, k] * C[q, k]
        for e in range(a + 1):
            for k in range(m):
                G[a, e, k] = 0.0
            for q in range(r):
                for k in range(m):
                    G[a, e, k] += P[a, q, k] * P[e, q, k]
        for k in range(m):
            G[a, a, k] += rho
    # Cholesky G = R R^T in place (lower) with the reciprocals of R's diagonal in d, then
    # R R^T y = P c
    for a in range(s):
        for e in range(a):
            for k in range(m):
                acc[k] = G[a, e, k]
            for f in range(e):
                for k in range(m):
                    acc[k] -= G[a, f, k] * G[e, f, k]
            for k in range(m):
                G[a, e, k] = acc[k] * d[e, k]
        for k in range(m):
            acc[k] = G[a, a, k]
        for f in range(a):
            for k in range(m):
                acc[k] -= G[a, f, k] * G[a, f, k]
        for k in range(m):
            d[a, k] = 1.0 / np.sqrt(acc[k])
    for a in range(s):
        for f in range(a):
            for k in range(m):
                y[a, k] -= G[a, f, k] * y[f, k]
        for k in range(m):
            y[a, k] *= d[a, k]
    for a in range(s - 1, -1, -1):
        for f in range(a + 1, s):
            for k in range(m):
                y[a, k] -= G[f, a, k] * y[f, k]
        for k in range(m):
            y[a, k] *= d[a, k]
    inv = 1.0 / rho
    for q in range(r):
        for k in range(m):
            acc[k] = C[q, k]
        for a in range(s):
            for k in range(m):
                acc[k] -= P[a, q, k] * y[a, k]
        for k in range(m):
            out[i0 + k, q] = acc[k] * inv


@numba.njit(inline="always", **_opts)
def _work(r, smax):
    """A half-step's work arrays for batches of rows with ``|T_i| <= smax`` at rank ``r``:
    right-hand sides, sparse products, the gathered ``P``, the Gram matrices, ``y``, the
    reciprocal diagonals, a row of sums and one row's product."""
    sm = max(smax, 1)
    return (np.empty((r, BATCH)), np.empty((r, BATCH)), np.empty((sm, r, BATCH)),
            np.empty((sm, sm, BATCH)), np.empty((sm, BATCH)), np.empty((sm, BATCH)),
            np.empty(BATCH), np.empty(r))


@numba.njit(**_opts)
def v_step(a, b, indptr, indices, data, tptr, tnbr, tsw, smax, U, Lam, rho, Vout, am=AHEAD_M,
           at=AHEAD_T):
    """Rows ``[a, b)`` of the V-step: ``v_i = A_i^{-1} ((M U)_i + rho u_i - lambda_i)``
    (Hu & Kwok 2013, eq. 7 and 13), written to ``Vout``; ``am``, ``at``: the prefetch
    distances (rows) of :func:`_load`."""
    C, MV, P, G, y, d, acc, mv = _work(U.shape[1], smax)
    r = U.shape[1]
    i0 = a
    while i0 < b:
        i1, s = _batch_end(i0, b, tptr)
        for i in range(i0, i1):
            for q in range(r):
                C[q, i - i0] = rho * np.float64(U[i, q]) - np.float64(Lam[i, q])
        _load(i0, i1, indptr, indices, data, tptr, tnbr, tsw, U, C, MV, P, mv, am, at)
        _solve(i1 - i0, s, C, P, G, y, d, acc, rho, Vout, i0)
        i0 = i1


@numba.njit(**_opts)
def u_step(a, b, indptr, indices, data, tptr, tnbr, tsw, smax, V, Vold, U, Lam, rho, alpha,
           relax, track, parts, sum_rows, am=AHEAD_M, at=AHEAD_T):
    """Rows ``[a, b)`` of the U-step: ``u_i = B_i^{-1} ((M V)_i + rho h_i + lambda_i)`` with
    ``h_i = u_i + alpha (v_i - u_i)`` when ``relax`` else ``v_i`` (eq. 8 and 13), the
    multiplier ``lambda_i += rho (h_i - u_i)`` (Algorithm 1, line 8), and per block of
    ``sum_rows`` rows (``parts[row // sum_rows]``; ``a`` a multiple of ``sum_rows``):
    ``||v_i - u_i||^2``, ``||v_i - v_i^old||^2`` and, with ``track``,
    ``sum_j c_ij (v_i . v_j)^2 / 2 - v_i . (M V)_i`` (the objective at V without its constant),
    each row's three terms added to its block's sums in the order of the rows; ``am``, ``at``:
    the prefetch distances (rows) of :func:`_load`."""
    C, MV, P, G, y, d, acc, mv = _work(V.shape[1], smax)
    r = V.shape[1]
    H = np.empty((r, BATCH))
    VV = np.empty((r, BATCH))
    z = np.empty(BATCH)
    t1 = np.empty(BATCH)
    t2 = np.empty(BATCH)
    t3 = np.empty(BATCH)
    blk = -1
    pr = du = ob = 0.0
    i0 = a
    while i0 < b:
        i1, s = _batch_end(i0, b, tptr)
        m = i1 - i0
        for i in range(i0, i1):
            k = i - i0
            for q in range(r):
                v = np.float64(V[i, q])
                u = np.float64(U[i, q])
                VV[q, k] = v
                if relax:
                    H[q, k] = u + alpha * (v - u)
                else:
                    H[q, k] = v
                C[q, k] = rho * H[q, k] + np.float64(Lam[i, q])
        _load(i0, i1, indptr, indices, data, tptr, tnbr, tsw, V, C, MV, P, mv, am, at)
        _solve(m, s, C, P, G, y, d, acc, rho, U, i0)
        # each row's objective terms sum_e (P_e . v_i)^2 / 2 - v_i . (M V)_i, and its residual
        # terms; the multiplier
        for k in range(m):
            t3[k] = 0.0
        if track:
            for e in range(s):
                for k in range(m):
                    z[k] = 0.0
                for q in range(r):
                    for k in range(m):
                        z[k] += P[e, q, k] * VV[q, k]
                for k in range(m):
                    t3[k] += 0.5 * z[k] * z[k]
            for k in range(m):
                z[k] = 0.0
            for q in range(r):
                for k in range(m):
                    z[k] += VV[q, k] * MV[q, k]
            for k in range(m):
                t3[k] -= z[k]
        for k in range(m):
            i = i0 + k
            a1 = a2 = 0.0
            for q in range(r):
                v = VV[q, k]
                u = np.float64(U[i, q])
                Lam[i, q] = np.float64(Lam[i, q]) + rho * (H[q, k] - u)
                a1 += (v - u) * (v - u)
                dv = v - np.float64(Vold[i, q])
                a2 += dv * dv
            t1[k] = a1
            t2[k] = a2
        for k in range(m):
            i = i0 + k
            if i // sum_rows != blk:
                if blk >= 0:
                    parts[blk, 0] = pr
                    parts[blk, 1] = du
                    parts[blk, 2] = ob
                blk = i // sum_rows
                pr = du = ob = 0.0
            pr += t1[k]
            du += t2[k]
            ob += t3[k]
        i0 = i1
    if blk >= 0:
        parts[blk, 0] = pr
        parts[blk, 1] = du
        parts[blk, 2] = ob
