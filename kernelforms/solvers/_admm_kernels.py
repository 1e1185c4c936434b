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

Two kinds of loop are written as LLVM vector code (numba intrinsics), because LLVM does not
vectorise them well from the plain loops (the rank is a runtime value, and the arrays may
alias as far as it knows): a row's sparse product, :data:`LANES` ranks at a time with the
sums in one vector register across the row's nonzeros (:func:`_row_product`), and every dot
product of the small systems - ``sum_q P[a, q, k] C[q, k]``, the Gram matrices, the Cholesky
and triangular-solve updates, the output - :data:`LANES` batch columns at a time with the sum
in a register (:func:`_chain_add`, :func:`_chain_sub`).  Each lane does the scalar loop's
operations in the same order (a multiply and an add, not fused): the same bits.  The small
systems' vectors also run over the unused columns of a batch of fewer than :data:`BATCH` rows
(up to the next multiple of :data:`LANES`), on what the zero-initialised buffers or an earlier
batch left there; those columns are never written out.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._prefetch import prefetch_row

#: rows per batch of the systems (buffers of ``BATCH (s^2 + s r + 5 r)`` values)
BATCH = 32
#: lanes of the vector code: ranks per step of a row's sparse product, batch columns per
#: step of the small systems' dot products (a divisor of :data:`BATCH`)
LANES = 8
#: how many rows ahead the gathers prefetch the other factor's rows that row will read: the
#: columns of its CSR row of ``M`` and its ``|T_i|`` pair partners (0: no prefetch)
AHEAD_M = 4
AHEAD_T = 4

_opts = dict(nogil=True, cache=True, error_model="numpy")


def _ptr(context, builder, aty, ary, idxs):
    """The address of ``a[idxs]`` in a numba array struct ``ary`` (from its strides)."""
    st = cgutils.unpack_tuple(builder, ary.strides, aty.ndim)
    off = builder.mul(idxs[0], st[0])
    for i, s in zip(idxs[1:], st[1:]):
        off = builder.add(off, builder.mul(i, s))
    i8p = ir.IntType(8).as_pointer()
    return builder.bitcast(builder.gep(builder.bitcast(ary.data, i8p), [off]), ary.data.type)


def _vec_at(builder, ptr, vty):
    """``ptr`` (to contiguous elements) as a pointer to a ``vty`` vector."""
    return builder.bitcast(ptr, vty.as_pointer())


def _arr(t, ndim, kind=types.Float, layout=None):
    return (isinstance(t, types.Array) and t.ndim == ndim and isinstance(t.dtype, kind)
            and (layout is None or t.layout == layout))


def _ints(*ts):
    return all(isinstance(t, types.Integer) for t in ts)


def _make_row_product(width):
    def row_product(typingctx, other, indices, data, e0, e1, q0, mv):
        """``mv[q0 + l] = 0.0 + data[e0] other[indices[e0], q0 + l] + ... + data[e1 - 1]
        other[indices[e1 - 1], q0 + l]`` for the ``width`` lanes ``l``: a row's sparse
        product for ``width`` ranks, float64, the nonzeros in order, a multiply and an add
        each (not fused), the sums in one vector register.  ``other``: 2-d, float32 or float64,
        any layout (a row's lanes read with one load when the layout is C); ``mv``: 1-d float64,
        C layout; ``q0 + width <= other.shape[1]`` (not checked)."""
        if not (_arr(other, 2) and _arr(indices, 1, types.Integer) and _arr(data, 1)
                and _arr(mv, 1, layout="C") and mv.dtype == types.float64 and _ints(e0, e1, q0)):
            return None

        def codegen(context, builder, signature, args):
            oty, ity, dty, e0t, e1t, q0t, mty = signature.args
            o, ind, dat, mva = (context.make_array(t)(context, builder, a)
                                for t, a in zip((oty, ity, dty, mty), args[:3] + args[6:]))
            a0, a1, b0 = (context.cast(builder, a, t, types.intp)
                          for a, t in zip(args[3:6], (e0t, e1t, q0t)))
            f64, i32 = ir.DoubleType(), ir.IntType(32)
            vty = ir.VectorType(f64, width)
            ety = ir.VectorType(context.get_value_type(oty.dtype), width)
            zero = ir.Constant(vty, [0.0] * width)
            acc = cgutils.alloca_once_value(builder, zero)
            with cgutils.for_range_slice(builder, a0, a1, ir.Constant(a0.type, 1)) as (e, _):
                w = builder.load(_ptr(context, builder, dty, dat, [e]))
                w = context.cast(builder, w, dty.dtype, types.float64)
                j = builder.load(_ptr(context, builder, ity, ind, [e]))
                j = context.cast(builder, j, ity.dtype, types.intp)
                if oty.layout == "C":
                    x = builder.load(_vec_at(builder, _ptr(context, builder, oty, o, [j, b0]), ety),
                                     align=1)
                else:
                    x = ir.Constant(ety, ir.Undefined)
                    for t in range(width):
                        q = builder.add(b0, ir.Constant(b0.type, t))
                        x = builder.insert_element(
                            x, builder.load(_ptr(context, builder, oty, o, [j, q])), i32(t))
                if ety.element != f64:
                    x = builder.fpext(x, vty)
                wv = builder.insert_element(ir.Constant(vty, ir.Undefined), w, i32(0))
                wv = builder.shuffle_vector(wv, ir.Constant(vty, ir.Undefined),
                                            ir.Constant(ir.VectorType(i32, width), [0] * width))
                builder.store(builder.fadd(builder.load(acc), builder.fmul(wv, x)), acc)
            builder.store(builder.load(acc),
                          _vec_at(builder, _ptr(context, builder, mty, mva, [b0]), vty), align=1)
            return context.get_dummy_value()

        return types.void(other, indices, data, e0, e1, q0, mv), codegen

    row_product.__name__ = row_product.__qualname__ = f"_row_product{width}"
    return intrinsic(row_product)


#: ``_row_product(other, indices, data, e0, e1, q0, mv)``, :data:`LANES` ranks; ``_row_product4``:
#: 4 ranks (ranks 4 to :data:`LANES` - 1)
_row_product = _make_row_product(LANES)
_row_product4 = _make_row_product(4)


def _make_chain(subtract):
    def chain(typingctx, X, xm, Y, t0, t1, k0, I, Z):
        if not ((_arr(X, 2, layout="C") or _arr(X, 3, layout="C")) and _arr(Y, 2, layout="C")
                and _arr(I, 1, layout="C") and _arr(Z, 1, layout="C")
                and all(a.dtype == types.float64 for a in (X, Y, I, Z)) and _ints(xm, t0, t1, k0)):
            return None

        def codegen(context, builder, signature, args):
            xt, xmt, yt, t0t, t1t, k0t, it, zt = signature.args
            xa, ya, ia, za = (context.make_array(t)(context, builder, args[n])
                              for t, n in ((xt, 0), (yt, 2), (it, 6), (zt, 7)))
            m, a0, a1, b0 = (context.cast(builder, args[n], signature.args[n], types.intp)
                             for n in (1, 3, 4, 5))
            vty = ir.VectorType(ir.DoubleType(), LANES)
            acc = cgutils.alloca_once(builder, vty)
            builder.store(builder.load(_vec_at(builder, _ptr(context, builder, it, ia, [b0]), vty),
                                       align=1), acc)
            with cgutils.for_range_slice(builder, a0, a1, ir.Constant(a0.type, 1)) as (t, _):
                xi = [t, b0] if xt.ndim == 2 else [t, m, b0]
                x = builder.load(_vec_at(builder, _ptr(context, builder, xt, xa, xi), vty), align=1)
                y = builder.load(_vec_at(builder, _ptr(context, builder, yt, ya, [t, b0]), vty),
                                 align=1)
                p = builder.fmul(x, y)
                z = builder.load(acc)
                builder.store(builder.fsub(z, p) if subtract else builder.fadd(z, p), acc)
            builder.store(builder.load(acc),
                          _vec_at(builder, _ptr(context, builder, zt, za, [b0]), vty), align=1)
            return context.get_dummy_value()

        return types.void(X, xm, Y, t0, t1, k0, I, Z), codegen

    chain.__name__ = chain.__qualname__ = "_chain_sub" if subtract else "_chain_add"
    return intrinsic(chain)


#: ``_chain_add(X, xm, Y, t0, t1, k0, I, Z)``: ``Z[k] = I[k] + X_t0[k] Y[t0, k] + ... +
#: X_{t1-1}[k] Y[t1 - 1, k]`` for the :data:`LANES` columns ``k = k0 ..`` (each lane in this
#: order, a multiply and an add, not fused), where ``X_t`` is the row ``X[t]`` of a 2-d ``X`` or
#: ``X[t, xm]`` of a 3-d one; float64 arrays of C layout (the batch buffers and their rows),
#: ``k0 + LANES`` within the last axes (not checked); ``Z`` may be ``I``
_chain_add = _make_chain(False)
#: ``_chain_sub``: the same with ``Z[k] = I[k] - X_t0[k] Y[t0, k] - ...``
_chain_sub = _make_chain(True)


@numba.njit(inline="always", **_opts)
def _batch_end(i0, b, tptr):
    """The end of the batch that starts at ``i0``: consecutive rows with the same ``|T_i|``."""
    s = tptr[i0 + 1] - tptr[i0]
    i1 = i0 + 1
    while i1 < b and i1 - i0 < BATCH and tptr[i1 + 1] - tptr[i1] == s:
        i1 += 1
    return i1, s


@numba.njit(inline="always", **_opts)
def _load(i0, i1, indptr, indices, data, tptr, tnbr, tsw, other, CR, C, MV, P, mv, am, at):
    """Rows ``[i0, i1)`` (batch column ``k = i - i0``): ``MV[:, k] = (M other)_i``,
    ``C[:, k] = CR[k] + MV[:, k]`` (``CR`` holds the rest of the right-hand sides, a row
    each), ``P[a, :, k] =
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
        e0 = indptr[i]
        e1 = indptr[i + 1]
        # LANES (or 4) ranks at a time; the last step ends at r, overlapping the one before
        # (its lanes there recomputed to the same bits); ranks below 4 one at a time
        if r >= LANES:
            for q0 in range(0, r - LANES, LANES):
                _row_product(other, indices, data, e0, e1, q0, mv)
            _row_product(other, indices, data, e0, e1, r - LANES, mv)
        elif r >= 4:
            _row_product4(other, indices, data, e0, e1, 0, mv)
            _row_product4(other, indices, data, e0, e1, r - 4, mv)
        else:
            for q in range(r):
                acc = 0.0
                for e in range(e0, e1):
                    acc += np.float64(data[e]) * other[indices[e], q]
                mv[q] = acc
        for q in range(r):
            MV[q, k] = mv[q]
            C[q, k] = CR[k, q] + mv[q]
        t0 = tptr[i]
        for a in range(tptr[i + 1] - t0):
            w = np.float64(tsw[t0 + a])
            j = tnbr[t0 + a]
            q0 = 0
            while q0 + LANES <= r:
                for ql in range(LANES):
                    P[a, q0 + ql, k] = w * other[j, q0 + ql]
                q0 += LANES
            for q in range(q0, r):
                P[a, q, k] = w * other[j, q]


@numba.njit(inline="always", **_opts)
def _solve(m, s, C, P, G, y, d, acc, zero, rho, out, i0):
    """For the batch's ``m`` rows: ``out_i = (c - P^T (rho I + P P^T)^{-1} P c) / rho``; the
    vector steps run over the first ``mw`` columns (``m`` rounded up to :data:`LANES`)."""
    r = C.shape[0]
    mw = -(-m // LANES) * LANES
    # the Gram matrices rho I + P P^T (lower triangles) and P c, summed over q in order
    for a in range(s):
        Pa = P[a]
        ya = y[a]
        for k0 in range(0, mw, LANES):
            _chain_add(Pa, 0, C, 0, r, k0, zero, ya)
        for e in range(a + 1):
            Pe = P[e]
            Gae = G[a, e]
            for k0 in range(0, mw, LANES):
                _chain_add(Pa, 0, Pe, 0, r, k0, zero, Gae)
        for k in range(mw):
            G[a, a, k] += rho
    # Cholesky G = R R^T in place (lower) with the reciprocals of R's diagonal in d, then
    # R R^T y = P c
    for a in range(s):
        Ga = G[a]
        for e in range(a):
            Ge = G[e]
            Gae = G[a, e]
            for k0 in range(0, mw, LANES):
                _chain_sub(Ga, 0, Ge, 0, e, k0, Gae, Gae)
            for k in range(mw):
                G[a, e, k] *= d[e, k]
        Gaa = G[a, a]
        for k0 in range(0, mw, LANES):
            _chain_sub(Ga, 0, Ga, 0, a, k0, Gaa, acc)
        for k in range(mw):
            d[a, k] = 1.0 / np.sqrt(acc[k])
    for a in range(s):
        Ga = G[a]
        ya = y[a]
        for k0 in range(0, mw, LANES):
            _chain_sub(Ga, 0, y, 0, a, k0, ya, ya)
        for k in range(mw):
            y[a, k] *= d[a, k]
    for a in range(s - 1, -1, -1):
        ya = y[a]
        for k0 in range(0, mw, LANES):
            _chain_sub(G, a, y, a + 1, s, k0, ya, ya)  # rows G[f, a], f = a + 1 .. s - 1
        for k in range(mw):
            y[a, k] *= d[a, k]
    inv = 1.0 / rho
    for q in range(r):
        Cq = C[q]
        for k0 in range(0, mw, LANES):
            _chain_sub(P, q, y, 0, s, k0, Cq, acc)  # rows P[a, q], a = 0 .. s - 1
        for k in range(m):
            out[i0 + k, q] = acc[k] * inv


@numba.njit(inline="always", **_opts)
def _work(r, smax):
    """A half-step's work arrays for batches of rows with ``|T_i| <= smax`` at rank ``r``:
    right-hand sides, sparse products, the gathered ``P``, the Gram matrices, ``y``, the
    reciprocal diagonals, a row of sums, one row's product, the right-hand sides without the
    product (a row each) and a row of zeros; zeroed, so that the columns of a short batch hold
    finite values."""
    sm = max(smax, 1)
    return (np.zeros((r, BATCH)), np.zeros((r, BATCH)), np.zeros((sm, r, BATCH)),
            np.zeros((sm, sm, BATCH)), np.zeros((sm, BATCH)), np.zeros((sm, BATCH)),
            np.zeros(BATCH), np.zeros(r), np.zeros((BATCH, r)), np.zeros(BATCH))


@numba.njit(**_opts)
def v_step(a, b, indptr, indices, data, tptr, tnbr, tsw, smax, U, Lam, rho, Vout, am=AHEAD_M,
           at=AHEAD_T):
    """Rows ``[a, b)`` of the V-step: ``v_i = A_i^{-1} ((M U)_i + rho u_i - lambda_i)``
    (Hu & Kwok 2013, eq. 7 and 13), written to ``Vout``; ``am``, ``at``: the prefetch
    distances (rows) of :func:`_load`."""
    C, MV, P, G, y, d, acc, mv, CR, zero = _work(U.shape[1], smax)
    r = U.shape[1]
    i0 = a
    while i0 < b:
        i1, s = _batch_end(i0, b, tptr)
        for i in range(i0, i1):
            for q in range(r):
                CR[i - i0, q] = rho * np.float64(U[i, q]) - np.float64(Lam[i, q])
        _load(i0, i1, indptr, indices, data, tptr, tnbr, tsw, U, CR, C, MV, P, mv, am, at)
        _solve(i1 - i0, s, C, P, G, y, d, acc, zero, rho, Vout, i0)
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
    C, MV, P, G, y, d, acc, mv, CR, zero = _work(V.shape[1], smax)
    r = V.shape[1]
    H = np.zeros((BATCH, r))
    VV = np.zeros((r, BATCH))
    z = np.zeros(BATCH)
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
                    h = u + alpha * (v - u)
                else:
                    h = v
                H[k, q] = h
                CR[k, q] = rho * h + np.float64(Lam[i, q])
        _load(i0, i1, indptr, indices, data, tptr, tnbr, tsw, V, CR, C, MV, P, mv, am, at)
        _solve(m, s, C, P, G, y, d, acc, zero, rho, U, i0)
        # each row's objective terms sum_e (P_e . v_i)^2 / 2 - v_i . (M V)_i, and its residual
        # terms; the multiplier
        for k in range(m):
            t3[k] = 0.0
        if track:
            mw = -(-m // LANES) * LANES
            for e in range(s):
                Pe = P[e]
                for k0 in range(0, mw, LANES):
                    _chain_add(Pe, 0, VV, 0, r, k0, zero, z)
                for k in range(m):
                    t3[k] += 0.5 * z[k] * z[k]
            for k0 in range(0, mw, LANES):
                _chain_add(VV, 0, MV, 0, r, k0, zero, z)
            for k in range(m):
                t3[k] -= z[k]
        for k in range(m):
            i = i0 + k
            a1 = a2 = 0.0
            for q in range(r):
                v = np.float64(V[i, q])
                u = np.float64(U[i, q])
                Lam[i, q] = np.float64(Lam[i, q]) + rho * (H[k, q] - u)
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
