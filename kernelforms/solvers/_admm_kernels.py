"""Compiled half-steps of KL_ADMM (:mod:`kernelforms.solvers.admm`), one pass per row.

Each kernel takes a range of rows ``[a, b)`` of the internal order and, for every row ``i``,
in one pass: forms the right-hand side (``rho u_i - lambda_i`` for the V-step, ``rho h_i +
lambda_i`` with the relaxed ``h_i`` for the U-step) plus the CSR row of ``M`` times the other
factor, gathers the ``|T_i|`` neighbour rows of the other factor scaled by ``sqrt(c_ij)``
(``P``, ``|T_i| x r``), forms ``rho I + P P^T`` and ``P c``, solves it by Cholesky and
writes ``(c - P^T y) / rho`` (Sherman-Morrison-Woodbury, Hu & Kwok 2013, eq. 25).  The U-step
also updates the multiplier and adds the row's residual and objective terms to the partial
sums of its block of rows (blocks aligned to absolute row indices: the sums
do not depend on how the rows are split between threads).

Every row's arithmetic runs in float64 in one fixed order (no ``fastmath``), whatever the
precision of the arrays (float32 arrays are a second specialisation).  The kernels release
the GIL (``nogil``): the solver's thread pool runs them on disjoint row ranges.  They are
compiled on first use and cached on disk (``cache=True``); this module is imported by the
solve only, so ``import kernelforms`` does not load numba.
"""

from __future__ import annotations

import numba
import numpy as np

@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _solve_row(i, c, mv, indptr, indices, data, tptr, tnbr, tsw, other, rho, P, G, y, d, out):
    """``mv = (M other)_i``; ``c += mv``; ``out_i = (rho I + P^T P)^{-1} c`` through
    ``(c - P^T (rho I + P P^T)^{-1} P c) / rho`` with ``P = [sqrt(c_ij) other_j]``."""
    r = c.shape[0]
    for q in range(r):
        mv[q] = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        w = np.float64(data[k])
        j = indices[k]
        for q in range(r):
            mv[q] += w * other[j, q]
    for q in range(r):
        c[q] += mv[q]
    t0 = tptr[i]
    s = tptr[i + 1] - t0
    for a in range(s):
        w = np.float64(tsw[t0 + a])
        j = tnbr[t0 + a]
        for q in range(r):
            P[a, q] = w * other[j, q]
    # the Gram matrix rho I + P P^T (lower triangle) and P c
    for a in range(s):
        acc = 0.0
        for q in range(r):
            acc += P[a, q] * c[q]
        y[a] = acc
        for e in range(a + 1):
            acc = 0.0
            for q in range(r):
                acc += P[a, q] * P[e, q]
            G[a, e] = acc
        G[a, a] += rho
    # Cholesky G = R R^T in place (lower) with the reciprocals of R's diagonal in d (one
    # square root and one division per column), then R R^T y = P c
    for a in range(s):
        for e in range(a):
            acc = G[a, e]
            for f in range(e):
                acc -= G[a, f] * G[e, f]
            G[a, e] = acc * d[e]
        acc = G[a, a]
        for f in range(a):
            acc -= G[a, f] * G[a, f]
        d[a] = 1.0 / np.sqrt(acc)
    for a in range(s):
        acc = y[a]
        for f in range(a):
            acc -= G[a, f] * y[f]
        y[a] = acc * d[a]
    for a in range(s - 1, -1, -1):
        acc = y[a]
        for f in range(a + 1, s):
            acc -= G[f, a] * y[f]
        y[a] = acc * d[a]
    inv = 1.0 / rho
    for q in range(r):
        acc = c[q]
        for a in range(s):
            acc -= P[a, q] * y[a]
        out[i, q] = acc * inv
    return s


@numba.njit(nogil=True, cache=True, error_model="numpy")
def v_step(a, b, indptr, indices, data, tptr, tnbr, tsw, smax, U, Lam, rho, Vout):
    """Rows ``[a, b)`` of the V-step: ``v_i = A_i^{-1} ((M U)_i + rho u_i - lambda_i)``
    (Hu & Kwok 2013, eq. 7 and 13), written to ``Vout``."""
    r = U.shape[1]
    c = np.empty(r)
    mv = np.empty(r)
    P = np.empty((max(smax, 1), r))
    G = np.empty((max(smax, 1), max(smax, 1)))
    y = np.empty(max(smax, 1))
    d = np.empty(max(smax, 1))
    for i in range(a, b):
        for q in range(r):
            c[q] = rho * np.float64(U[i, q]) - np.float64(Lam[i, q])
        _solve_row(i, c, mv, indptr, indices, data, tptr, tnbr, tsw, U, rho, P, G, y, d, Vout)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def u_step(a, b, indptr, indices, data, tptr, tnbr, tsw, smax, V, Vold, U, Lam, rho, alpha,
           relax, track, parts, sum_rows):
    """Rows ``[a, b)`` of the U-step: ``u_i = B_i^{-1} ((M V)_i + rho h_i + lambda_i)`` with
    ``h_i = u_i + alpha (v_i - u_i)`` when ``relax`` else ``v_i`` (eq. 8 and 13), the
    multiplier ``lambda_i += rho (h_i - u_i)`` (Algorithm 1, line 8), and per block of
    ``sum_rows`` rows (``parts[row // sum_rows]``; ``a`` a multiple of ``sum_rows``): ``||v_i - u_i||^2``,
    ``||v_i - v_i^old||^2`` and, with ``track``, ``sum_j c_ij (v_i . v_j)^2 / 2 - v_i . (M V)_i``
    (the objective at V without its constant)."""
    r = V.shape[1]
    c = np.empty(r)
    h = np.empty(r)
    mv = np.empty(r)
    P = np.empty((max(smax, 1), r))
    G = np.empty((max(smax, 1), max(smax, 1)))
    y = np.empty(max(smax, 1))
    d = np.empty(max(smax, 1))
    blk = -1
    pr = du = ob = 0.0
    for i in range(a, b):
        if i // sum_rows != blk:
            if blk >= 0:
                parts[blk, 0] = pr
                parts[blk, 1] = du
                parts[blk, 2] = ob
            blk = i // sum_rows
            pr = du = ob = 0.0
        for q in range(r):
            v = np.float64(V[i, q])
            u = np.float64(U[i, q])
            if relax:
                h[q] = u + alpha * (v - u)
            else:
                h[q] = v
            c[q] = rho * h[q] + np.float64(Lam[i, q])
        s = _solve_row(i, c, mv, indptr, indices, data, tptr, tnbr, tsw, V, rho, P, G, y, d, U)
        if track:
            # sqrt(c_ij) K_ij = P_j . v_i, and <V, M V> from the row's product
            for e in range(s):
                acc = 0.0
                for q in range(r):
                    acc += P[e, q] * V[i, q]
                ob += 0.5 * acc * acc
            acc = 0.0
            for q in range(r):
                acc += np.float64(V[i, q]) * mv[q]
            ob -= acc
        for q in range(r):
            v = np.float64(V[i, q])
            u = np.float64(U[i, q])
            Lam[i, q] = np.float64(Lam[i, q]) + rho * (h[q] - u)
            pr += (v - u) * (v - u)
            dv = v - np.float64(Vold[i, q])
            du += dv * dv
    if blk >= 0:
        parts[blk, 0] = pr
        parts[blk, 1] = du
        parts[blk, 2] = ob
