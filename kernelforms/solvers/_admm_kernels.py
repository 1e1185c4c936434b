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
by ``|T_i|`` within windows of its order), at most :data:`BATCH` rows.  At rank
:data:`LANES` (8) with ``s <= SFAST`` - nearly every row of a kNN problem at the default rank -
a batch goes in two steps:

* a pass over its rows computes each row's sparse product ``(M other)_i`` into a row of a
  small buffer (:func:`_row_product`);
* then every group of :data:`LANES` rows is one call of a group kernel
  (:func:`_group_v`, :func:`_group_u`): LLVM code generated for each ``s`` from 0 to
  :data:`SFAST`, unrolled, with every value of the group in vector registers, a lane a row.
  It reads the rows' own iterates and their ``s`` partner rows (8 x 8 blocks turned by
  shuffles), forms the right-hand sides, ``P``, the Gram matrices, their Cholesky factors and
  the solutions, and writes the new rows.  The U-step's kernel also writes the multiplier and
  the rows' residual and objective terms.

Other ranks and larger ``s`` take the general path.  A first pass reads each row's sparse
product and gathers ``P`` into the batch's buffers, laid out row-last.  The small systems are
then solved for the whole batch at once, every operation a loop over the batch's rows
innermost (vector code, :func:`_chain_add`, :func:`_chain_sub`: each row's chain of dependent
operations runs beside the others').  Both paths do every row's arithmetic in float64 in the
same order, a multiply and an add each, never fused (no ``fastmath``): they give the same
bits, whatever the batches and the precision of the arrays (float32 arrays are a second
specialisation).  The general path's vectors also run over the unused columns of a batch of
fewer than :data:`BATCH` rows (up to the next multiple of :data:`LANES`), on what the
zero-initialised buffers or an earlier batch left there; the group kernels' unused lanes read
the group's first row again.  Neither is ever written out.

While it reads a row's sparse product, a kernel prefetches (a hint, :mod:`._prefetch`) the
row of the other factor that the nonzero :data:`AHEAD_M` places ahead will read, and the
partners of the terms :data:`AHEAD_T` places ahead, so that the random row reads of a factor
larger than the caches overlap; it changes no value.  The solver allocates the factors on
cache lines (:func:`kernelforms._pages.aligned`), so a row of rank 8 in float64 is one line
and one hint.  The kernels release the GIL (``nogil``): the solver's thread pool runs them on
disjoint row ranges.  They are compiled on first use and cached on disk (``cache=True``); this
module is imported by the solve only, so ``import kernelforms`` does not load numba.

Loops that LLVM does not vectorise well from plain code (the rank is a runtime value, and the
arrays may alias as far as it knows) are written as LLVM code (numba intrinsics): a row's
sparse product, :data:`LANES` ranks at a time with the sums in one vector register across the
row's nonzeros (:func:`_row_product`), the general path's dot products, :data:`LANES` batch
columns at a time, and the group kernels.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._prefetch import LINE, emit_hint, prefetch, prefetch_row

#: rows per batch of the systems (buffers of ``BATCH (s^2 + s r + 5 r)`` values)
BATCH = 32
#: lanes of the vector code: ranks per step of a row's sparse product, batch columns per
#: step of the small systems' dot products (a divisor of :data:`BATCH`)
LANES = 8  # (the group kernels turn 8 x 8 blocks: 8)
#: how far ahead the half-steps prefetch the other factor's rows: the row that the nonzero of
#: ``M`` this many places ahead reads (about four rows of a kNN graph), and the partners of the
#: terms :data:`AHEAD_T` places ahead (0: no prefetch)
AHEAD_M = 32
AHEAD_T = 12
#: the general path (other ranks, larger ``|T_i|``) prefetches, row by row, the rows that the
#: row this many rows ahead reads (when the distances above are positive)
AHEAD_ROWS = 4
#: the largest ``|T_i|`` that the group kernels solve (LLVM code for each ``s`` up to it)
SFAST = 8

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
    def row_product(typingctx, other, indices, data, e0, e1, q0, mv, pf, pend):
        """``mv[q0 + l] = 0.0 + data[e0] other[indices[e0], q0 + l] + ... + data[e1 - 1]
        other[indices[e1 - 1], q0 + l]`` for the ``width`` lanes ``l``: a row's sparse
        product for ``width`` ranks, float64, the nonzeros in order, a multiply and an add
        each (not fused), the sums in one vector register.  ``other``: 2-d, float32 or float64,
        any layout (a row's lanes read with one load when the layout is C); ``mv``: 1-d float64,
        C layout; ``q0 + width <= other.shape[1]`` (not checked).  With ``pf > 0``, each
        nonzero ``e`` also prefetches the row ``other[indices[e + pf]]`` (its first line, and
        its last when the row is longer than a line) while ``e + pf < pend``."""
        if not (_arr(other, 2) and _arr(indices, 1, types.Integer) and _arr(data, 1)
                and _arr(mv, 1, layout="C") and mv.dtype == types.float64
                and _ints(e0, e1, q0, pf, pend)):
            return None

        def codegen(context, builder, signature, args):
            oty, ity, dty, e0t, e1t, q0t, mty, pft, pet = signature.args
            o, ind, dat, mva = (context.make_array(t)(context, builder, a)
                                for t, a in zip((oty, ity, dty, mty), args[:3] + args[6:7]))
            a0, a1, b0, pfd, pe = (context.cast(builder, a, t, types.intp)
                          for a, t in zip(args[3:6] + args[7:9], (e0t, e1t, q0t, pft, pet)))
            i8p = ir.IntType(8).as_pointer()
            ost = cgutils.unpack_tuple(builder, o.strides, 2)
            # the last byte of a row, from its first (a second hint when past one line)
            span = builder.add(builder.mul(builder.sub(cgutils.unpack_tuple(builder, o.shape, 2)[1],
                                                       ir.Constant(a0.type, 1)), ost[1]),
                               ir.Constant(a0.type, context.get_abi_sizeof(
                                   context.get_value_type(oty.dtype)) - 1))
            wide = builder.icmp_signed(">=", span, ir.Constant(a0.type, LINE))
            f64, i32 = ir.DoubleType(), ir.IntType(32)
            vty = ir.VectorType(f64, width)
            ety = ir.VectorType(context.get_value_type(oty.dtype), width)
            zero = ir.Constant(vty, [0.0] * width)
            acc = cgutils.alloca_once_value(builder, zero)
            with cgutils.for_range_slice(builder, a0, a1, ir.Constant(a0.type, 1)) as (e, _):
                ep = builder.add(e, pfd)
                with builder.if_then(builder.icmp_signed("<", ep, pe), likely=True):
                    # the row that the nonzero pf places ahead reads (a hint)
                    jp = builder.load(_ptr(context, builder, ity, ind, [ep]))
                    jp = context.cast(builder, jp, ity.dtype, types.intp)
                    pp = builder.gep(builder.bitcast(o.data, i8p), [builder.mul(jp, ost[0])])
                    emit_hint(builder, pp)
                    with builder.if_then(wide, likely=False):
                        emit_hint(builder, builder.gep(pp, [span]))
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

        return types.void(other, indices, data, e0, e1, q0, mv, pf, pend), codegen

    row_product.__name__ = row_product.__qualname__ = f"_row_product{width}"
    return intrinsic(row_product)


#: ``_row_product(other, indices, data, e0, e1, q0, mv, pf, pend)``, :data:`LANES` ranks;
#: ``_row_product4``: 4 ranks (ranks 4 to :data:`LANES` - 1)
_row_product = _make_row_product(LANES)
_row_product4 = _make_row_product(4)


@numba.njit(inline="always", **_opts)
def _row_products(other, indices, data, e0, e1, mv, pf, pend):
    """``mv = (M other)_i`` from the CSR row ``[e0, e1)`` at any rank: :data:`LANES` (or 4)
    ranks at a time, the last step ending at ``r`` and overlapping the one before (its lanes
    there computed again to the same bits), ranks below 4 one at a time; the first step
    prefetches ``pf`` nonzeros ahead (:func:`_row_product`)."""
    r = other.shape[1]
    if r >= LANES:
        _row_product(other, indices, data, e0, e1, 0, mv, pf, pend)
        for q0 in range(LANES, r - LANES, LANES):
            _row_product(other, indices, data, e0, e1, q0, mv, 0, 0)
        if r > LANES:
            _row_product(other, indices, data, e0, e1, r - LANES, mv, 0, 0)
    elif r >= 4:
        _row_product4(other, indices, data, e0, e1, 0, mv, pf, pend)
        _row_product4(other, indices, data, e0, e1, r - 4, mv, 0, 0)
    else:
        for q in range(r):
            acc = 0.0
            for e in range(e0, e1):
                acc += np.float64(data[e]) * other[indices[e], q]
            mv[q] = acc


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


def _transpose8(builder, rows):
    """Eight ``<8 x double>`` vectors turned: ``out[q][k] = rows[k][q]`` (three rounds of
    shuffles, pairs of vectors at distance 1, 2 and 4)."""
    i32 = ir.IntType(32)

    def shuf(a, b, idx):
        return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(i32, 8), idx))

    x = list(rows)
    # round 1: y[p] = rows p, p + 1 at even q; y[p + 1] at odd q
    y = []
    for p in range(0, 8, 2):
        y += [shuf(x[p], x[p + 1], [0, 8, 2, 10, 4, 12, 6, 14]),
              shuf(x[p], x[p + 1], [1, 9, 3, 11, 5, 13, 7, 15])]
    # round 2: pairs of rounds-1 vectors two apart
    z = [None] * 8
    for base in (0, 4):
        for par in (0, 1):
            a, b = y[base + par], y[base + 2 + par]
            z[base + par] = shuf(a, b, [0, 1, 8, 9, 4, 5, 12, 13])
            z[base + 2 + par] = shuf(a, b, [2, 3, 10, 11, 6, 7, 14, 15])
    # round 3: halves
    w = [None] * 8
    for t in range(4):
        w[t] = shuf(z[t], z[t + 4], [0, 1, 2, 3, 8, 9, 10, 11])
        w[t + 4] = shuf(z[t], z[t + 4], [4, 5, 6, 7, 12, 13, 14, 15])
    return w


def _make_group(ustep):
    def group(typingctx, other, tptr, tnbr, tsw, g0, m, s, Lam, MVR, k0, rho, out, Vold, alpha,
              relax, track, T):
        """Rows ``g0 .. g0 + m - 1`` (``1 <= m <=`` :data:`LANES`), each with ``s`` terms
        (``0 <= s <=`` :data:`SFAST`; another ``s`` does nothing), at rank :data:`LANES`; the
        rows' sparse products in ``MVR[k0 + k]``.  V-step (``other`` = U): ``out_i = A_i^{-1}
        (rho u_i - lambda_i + (M U)_i)``.  U-step (``other`` = V, ``out`` = U, read before it
        is written): ``h_i`` (relaxed with ``alpha`` when ``relax``), ``out_i = B_i^{-1} (rho
        h_i + lambda_i + (M V)_i)``, ``lambda_i += rho (h_i - u_i)`` and into ``T[:, k0 + k]``
        the terms ``||v_i - u_i||^2``, ``||v_i - v_i^old||^2`` and, with ``track``, the
        objective's; the V-step ignores ``Vold``, ``alpha``, ``relax``, ``track`` and ``T``.
        Every value is float64, in the general path's order (:func:`_solve`, :func:`_u_mult`):
        the same bits."""
        if not (_arr(other, 2) and _arr(tptr, 1, types.Integer) and _arr(tnbr, 1, types.Integer)
                and _arr(tsw, 1) and _arr(Lam, 2) and _arr(MVR, 2, layout="C") and _arr(out, 2)
                and _arr(Vold, 2) and _arr(T, 2, layout="C") and MVR.dtype == types.float64
                and T.dtype == types.float64 and _ints(g0, m, s, k0)):
            return None

        def codegen(context, builder, signature, args):
            tys = signature.args
            (oty, pty, nty, wty, _, _, _, lty, mvt, _, _, outt, vot, _, _, _, tt) = tys
            o, tp, tn, tw, lam, mvr, ou, vo, ta = (
                context.make_array(tys[n])(context, builder, args[n])
                for n in (0, 1, 2, 3, 7, 8, 11, 12, 16))
            g0v, mv_, sv, k0v = (context.cast(builder, args[n], tys[n], types.intp)
                                 for n in (4, 5, 6, 9))
            rhov = context.cast(builder, args[10], tys[10], types.float64)
            alv = context.cast(builder, args[13], tys[13], types.float64)
            rlv = context.cast(builder, args[14], tys[14], types.boolean)
            trv = context.cast(builder, args[15], tys[15], types.boolean)
            f64, i32 = ir.DoubleType(), ir.IntType(32)
            ip = context.get_value_type(types.intp)
            V = ir.VectorType(f64, LANES)

            def c(v):
                return ir.Constant(ip, v)

            def splat(x):
                v = builder.insert_element(ir.Constant(V, ir.Undefined), x, i32(0))
                return builder.shuffle_vector(v, ir.Constant(V, ir.Undefined),
                                              ir.Constant(ir.VectorType(i32, LANES), [0] * LANES))

            def row(aty, a, i):
                """``a[i, :LANES]`` as float64 lanes."""
                ety = ir.VectorType(context.get_value_type(aty.dtype), LANES)
                if aty.layout == "C":
                    x = builder.load(_vec_at(builder, _ptr(context, builder, aty, a, [i, c(0)]),
                                             ety), align=1)
                else:
                    x = ir.Constant(ety, ir.Undefined)
                    for q in range(LANES):
                        x = builder.insert_element(
                            x, builder.load(_ptr(context, builder, aty, a, [i, c(q)])), i32(q))
                return builder.fpext(x, V) if ety.element != f64 else x

            def store_row(aty, a, i, x):
                """``a[i, :LANES] = x`` (rounded to the array's precision); returns the value
                stored, as float64 lanes."""
                ety = ir.VectorType(context.get_value_type(aty.dtype), LANES)
                if ety.element != f64:
                    x = builder.fptrunc(x, ety)
                if aty.layout == "C":
                    builder.store(x, _vec_at(builder, _ptr(context, builder, aty, a, [i, c(0)]),
                                             ety), align=1)
                else:
                    for q in range(LANES):
                        builder.store(builder.extract_element(x, i32(q)),
                                      _ptr(context, builder, aty, a, [i, c(q)]))
                return builder.fpext(x, V) if ety.element != f64 else x

            def fold(init, terms, sub=False):
                acc = init
                for x, y in terms:
                    p = builder.fmul(x, y)
                    acc = builder.fsub(acc, p) if sub else builder.fadd(acc, p)
                return acc

            zero = ir.Constant(V, [0.0] * LANES)
            rhos = splat(rhov)
            # the lanes' rows: g0 + k for k < m, else g0 (read, never written)
            ik = [builder.select(builder.icmp_signed("<", c(k), mv_), builder.add(g0v, c(k)), g0v)
                  for k in range(LANES)]
            tk = [context.cast(builder, builder.load(_ptr(context, builder, pty, tp, [i])),
                               pty.dtype, types.intp) for i in ik]
            mvrows = [row(mvt, mvr, builder.add(k0v, c(k))) for k in range(LANES)]
            lrows = [row(lty, lam, i) for i in ik]
            if ustep:
                # other = V, out = U (read before it is written): h_i, rho h_i + lambda_i
                vrows = [row(oty, o, i) for i in ik]
                urows = [row(outt, ou, i) for i in ik]
                alphas = splat(alv)
                hrows = [builder.select(
                    rlv, builder.fadd(u, builder.fmul(alphas, builder.fsub(v, u))), v)
                    for u, v in zip(urows, vrows)]
                crows = [builder.fadd(builder.fmul(rhos, h), la) for h, la in zip(hrows, lrows)]
            else:
                # other = U: rho u_i - lambda_i
                crows = [builder.fsub(builder.fmul(rhos, row(oty, o, i)), la)
                         for i, la in zip(ik, lrows)]
            C = _transpose8(builder, [builder.fadd(a, b) for a, b in zip(crows, mvrows)])
            invv = splat(builder.fdiv(ir.Constant(f64, 1.0), rhov))
            one = splat(ir.Constant(f64, 1.0))
            sqrt = cgutils.get_or_insert_function(builder.module, ir.FunctionType(V, [V]),
                                                  f"llvm.sqrt.v{LANES}f64")
            end = builder.append_basic_block("group_end")
            sw = builder.switch(sv, end)
            for S in range(SFAST + 1):
                blk = builder.append_basic_block(f"group_s{S}")
                sw.add_case(ir.Constant(sv.type, S), blk)
                builder.position_at_end(blk)
                # P[a][q]: the a-th term's sqrt(c_ij) other_j, a vector over the lanes
                P = []
                for a in range(S):
                    rows = []
                    for k in range(LANES):
                        t = builder.add(tk[k], c(a))
                        j = context.cast(builder, builder.load(
                            _ptr(context, builder, nty, tn, [t])), nty.dtype, types.intp)
                        w = context.cast(builder, builder.load(
                            _ptr(context, builder, wty, tw, [t])), wty.dtype, types.float64)
                        rows.append(builder.fmul(splat(w), row(oty, o, j)))
                    P.append(_transpose8(builder, rows))
                # _solve's operations, in its order
                y = [fold(zero, [(P[a][q], C[q]) for q in range(LANES)]) for a in range(S)]
                G = [[None] * S for _ in range(S)]
                for a in range(S):
                    for e in range(a + 1):
                        G[a][e] = fold(zero, [(P[a][q], P[e][q]) for q in range(LANES)])
                    G[a][a] = builder.fadd(G[a][a], rhos)
                d = [None] * S
                for a in range(S):
                    for e in range(a):
                        G[a][e] = builder.fmul(fold(G[a][e], [(G[a][t], G[e][t]) for t in range(e)],
                                                    True), d[e])
                    acc = fold(G[a][a], [(G[a][t], G[a][t]) for t in range(a)], True)
                    d[a] = builder.fdiv(one, builder.call(sqrt, [acc]))
                for a in range(S):
                    y[a] = builder.fmul(fold(y[a], [(G[a][t], y[t]) for t in range(a)], True), d[a])
                for a in range(S - 1, -1, -1):
                    y[a] = builder.fmul(
                        fold(y[a], [(G[f][a], y[f]) for f in range(a + 1, S)], True), d[a])
                res = [builder.fmul(fold(C[q], [(P[a][q], y[a]) for a in range(S)], True), invv)
                       for q in range(LANES)]
                orow = _transpose8(builder, res)
                for k in range(LANES):
                    with builder.if_then(builder.icmp_signed("<", c(k), mv_)):
                        store_row(outt, ou, ik[k], orow[k])
                if ustep:
                    # the new u_i as stored (rounded to the array's precision), the multiplier,
                    # the residual terms ||v_i - u_i||^2, ||v_i - v_i^old||^2 summed in rank order
                    ety = ir.VectorType(context.get_value_type(outt.dtype), LANES)
                    unew = [x if ety.element == f64 else builder.fpext(builder.fptrunc(x, ety), V)
                            for x in orow]
                    for k in range(LANES):
                        with builder.if_then(builder.icmp_signed("<", c(k), mv_)):
                            store_row(lty, lam, ik[k], builder.fadd(
                                lrows[k], builder.fmul(rhos, builder.fsub(hrows[k], unew[k]))))
                    D1 = _transpose8(builder, [builder.fsub(v, u) for v, u in zip(vrows, unew)])
                    D2 = _transpose8(builder, [builder.fsub(v, row(vot, vo, i))
                                               for v, i in zip(vrows, ik)])
                    sums = [fold(zero, [(x, x) for x in D]) for D in (D1, D2)]
                    for n_, x in enumerate(sums):
                        builder.store(x, _vec_at(
                            builder, _ptr(context, builder, tt, ta, [c(n_), k0v]), V), align=1)
                    with builder.if_then(trv):
                        # sum_e (P_e . v_i)^2 / 2 - v_i . (M V)_i
                        VV = _transpose8(builder, vrows)
                        MV = _transpose8(builder, mvrows)
                        half = splat(ir.Constant(f64, 0.5))
                        t3 = zero
                        for e in range(S):
                            z = fold(zero, [(P[e][q], VV[q]) for q in range(LANES)])
                            t3 = builder.fadd(t3, builder.fmul(builder.fmul(half, z), z))
                        t3 = builder.fsub(t3, fold(zero, [(VV[q], MV[q]) for q in range(LANES)]))
                        builder.store(t3, _vec_at(
                            builder, _ptr(context, builder, tt, ta, [c(2), k0v]), V), align=1)
                builder.branch(end)
            builder.position_at_end(end)
            return context.get_dummy_value()

        return types.void(other, tptr, tnbr, tsw, g0, m, s, Lam, MVR, k0, rho, out, Vold, alpha,
                          relax, track, T), codegen

    group.__name__ = group.__qualname__ = "_group_u" if ustep else "_group_v"
    return intrinsic(group)


_group_v = _make_group(False)
_group_u = _make_group(True)


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
    each), ``P[a, :, k] = sqrt(c_ij) other_j`` for the row's ``a``-th term.  Before row ``i``
    it prefetches every line of the rows of ``other`` that row ``i +`` :data:`AHEAD_ROWS`
    reads through ``M`` (when ``am > 0``) and as pair partners (when ``at > 0``): a hint, no
    value changes; rows past the end of the range are the next range's."""
    r = other.shape[1]
    n = tptr.size - 1
    for i in range(i0, i1):
        k = i - i0
        ia = i + AHEAD_ROWS
        if am > 0 and ia < n:
            for e in range(indptr[ia], indptr[ia + 1]):
                prefetch_row(other, indices[e])
        if at > 0 and ia < n:
            for e in range(tptr[ia], tptr[ia + 1]):
                prefetch_row(other, tnbr[e])
        _row_products(other, indices, data, indptr[i], indptr[i + 1], mv, 0, 0)
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


@numba.njit(inline="always", **_opts)
def _load_fast(i0, i1, indptr, indices, data, tptr, tnbr, other, MVR, am, at):
    """Rows ``[i0, i1)`` at rank :data:`LANES`, for the group kernels: each row's sparse product
    ``(M other)_i`` into ``MVR[i - i0]``, prefetching the rows ``am`` nonzeros and the
    partners ``at`` terms ahead."""
    pend = indptr[indptr.size - 1] if am > 0 else 0
    tend = tptr[tptr.size - 1]
    for i in range(i0, i1):
        _row_product(other, indices, data, indptr[i], indptr[i + 1], 0, MVR[i - i0], am, pend)
        if at > 0:
            for t in range(tptr[i] + at, tptr[i + 1] + at):
                if t < tend:
                    prefetch(other, tnbr[t])


@numba.njit(inline="always", **_opts)
def _v_rows(i0, i1, r, U, Lam, rho, CR):
    """The V-step's right-hand sides without the product: ``CR[k] = rho u_i - lambda_i``."""
    for i in range(i0, i1):
        for q in range(r):
            CR[i - i0, q] = rho * np.float64(U[i, q]) - np.float64(Lam[i, q])


@numba.njit(inline="always", **_opts)
def _u_rows(i0, i1, r, V, U, Lam, rho, alpha, relax, VV, H, CR):
    """The U-step's rows: the relaxed ``h_i`` (``H[k]``), ``CR[k] = rho h_i + lambda_i`` and
    ``VV[:, k] = v_i`` (row-last, for the objective terms)."""
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


@numba.njit(inline="always", **_opts)
def _u_mult(i0, m, r, V, U, Vold, Lam, H, rho, t1, t2):
    """The multiplier ``lambda_i += rho (h_i - u_i)`` and each row's residual terms
    ``||v_i - u_i||^2`` (``t1``) and ``||v_i - v_i^old||^2`` (``t2``), summed in rank order."""
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


@numba.njit(**_opts)
def v_step(a, b, indptr, indices, data, tptr, tnbr, tsw, smax, U, Lam, rho, Vout, am, at, groups):
    """Rows ``[a, b)`` of the V-step: ``v_i = A_i^{-1} ((M U)_i + rho u_i - lambda_i)``
    (Hu & Kwok 2013, eq. 7 and 13), written to ``Vout``; ``am``, ``at``: the prefetch
    distances (nonzeros of ``M``, terms) of the group path (the solver passes
    :data:`AHEAD_M`, :data:`AHEAD_T`), whose kernels do the batches at rank :data:`LANES` with
    ``|T_i| <=`` :data:`SFAST` unless ``groups`` is False (the general path for every batch:
    the same bits); the general path prefetches :data:`AHEAD_ROWS` rows ahead where they are
    positive.  Every argument is passed, none left to a default: each set of argument types is
    compiled once (about 5 s a kernel), and a default left out would be another set."""
    C, MV, P, G, y, d, acc, mv, CR, zero = _work(U.shape[1], smax)
    r = U.shape[1]
    MVR = np.zeros((BATCH, r))
    T = np.zeros((3, BATCH))
    i0 = a
    while i0 < b:
        i1, s = _batch_end(i0, b, tptr)
        if groups and r == LANES and s <= SFAST:
            _load_fast(i0, i1, indptr, indices, data, tptr, tnbr, U, MVR, am, at)
            m = i1 - i0
            for g in range(0, m, LANES):
                _group_v(U, tptr, tnbr, tsw, i0 + g, min(LANES, m - g), s, Lam, MVR, g, rho, Vout,
                         Vout, 0.0, False, False, T)
        else:
            _v_rows(i0, i1, r, U, Lam, rho, CR)
            _load(i0, i1, indptr, indices, data, tptr, tnbr, tsw, U, CR, C, MV, P, mv, am, at)
            _solve(i1 - i0, s, C, P, G, y, d, acc, zero, rho, Vout, i0)
        i0 = i1


@numba.njit(**_opts)
def u_step(a, b, indptr, indices, data, tptr, tnbr, tsw, smax, V, Vold, U, Lam, rho, alpha,
           relax, track, parts, sum_rows, am, at, groups):
    """Rows ``[a, b)`` of the U-step: ``u_i = B_i^{-1} ((M V)_i + rho h_i + lambda_i)`` with
    ``h_i = u_i + alpha (v_i - u_i)`` when ``relax`` else ``v_i`` (eq. 8 and 13), the
    multiplier ``lambda_i += rho (h_i - u_i)`` (Algorithm 1, line 8), and per block of
    ``sum_rows`` rows (``parts[row // sum_rows]``; ``a`` a multiple of ``sum_rows``):
    ``||v_i - u_i||^2``, ``||v_i - v_i^old||^2`` and, with ``track``,
    ``sum_j c_ij (v_i . v_j)^2 / 2 - v_i . (M V)_i`` (the objective at V without its constant),
    each row's three terms added to its block's sums in the order of the rows; ``am``, ``at``,
    ``groups``: as in :func:`v_step`."""
    C, MV, P, G, y, d, acc, mv, CR, zero = _work(V.shape[1], smax)
    r = V.shape[1]
    MVR = np.zeros((BATCH, r))
    T = np.zeros((3, BATCH))
    H = np.zeros((BATCH, r))
    VV = np.zeros((r, BATCH))
    z = np.zeros(BATCH)
    # each row's residual and objective terms: the group kernels write them into T, the general
    # path through these views of its rows
    t1, t2, t3 = T[0], T[1], T[2]
    blk = -1
    pr = du = ob = 0.0
    i0 = a
    while i0 < b:
        i1, s = _batch_end(i0, b, tptr)
        m = i1 - i0
        fast = groups and r == LANES and s <= SFAST
        if fast:
            # the group kernels do the rows' whole update: the solve, the multiplier, the
            # residual and objective terms (into T)
            _load_fast(i0, i1, indptr, indices, data, tptr, tnbr, V, MVR, am, at)
            for g in range(0, m, LANES):
                _group_u(V, tptr, tnbr, tsw, i0 + g, min(LANES, m - g), s, Lam, MVR, g, rho, U,
                         Vold, alpha, relax, track, T)
        else:
            for k in range(m):
                t3[k] = 0.0
            _u_rows(i0, i1, r, V, U, Lam, rho, alpha, relax, VV, H, CR)
            _load(i0, i1, indptr, indices, data, tptr, tnbr, tsw, V, CR, C, MV, P, mv, am, at)
            _solve(m, s, C, P, G, y, d, acc, zero, rho, U, i0)
            # each row's objective terms sum_e (P_e . v_i)^2 / 2 - v_i . (M V)_i, and its
            # residual terms; the multiplier
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
            _u_mult(i0, m, r, V, U, Vold, Lam, H, rho, t1, t2)
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
