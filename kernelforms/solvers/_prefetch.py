"""Software-prefetch hints for compiled kernels (numba).

``prefetch(a, i)`` asks the CPU to bring the cache line holding ``a[i]`` (1-d) or ``a[i, 0]``
(2-d) towards the core; ``prefetch_row(a, i)`` every line of the C-contiguous row ``a[i, :]``
(a row may straddle two lines when the array is not aligned to them).  Both compile to LLVM's
``llvm.prefetch`` (read, high temporal locality, data cache): a hint that never faults (no
bounds check is needed, an address outside the array is never read), changes no value and
returns nothing; on a target without a prefetch instruction it compiles to nothing.  Used by
:mod:`kernelforms.solvers._admm_kernels` to overlap the latency of random row reads; imported
by compiled kernels only, so ``import kernelforms`` does not load numba.

numba's disk cache (``cache=True``) of a kernel that calls these is keyed on the kernel's own
source file: after editing this module, touch the kernels' module (or clear its
``__pycache__``) so that they are compiled again.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: bytes per cache line assumed by :func:`prefetch_row` (x86-64 and most ARM cores)
LINE = 64


@intrinsic
def _hint(typingctx, arr, idx, off):
    """Prefetch the byte ``off`` bytes past the start of ``a[i]`` / ``a[i, 0]``."""
    if (not isinstance(arr, types.Array) or arr.ndim not in (1, 2)
            or not isinstance(idx, types.Integer) or not isinstance(off, types.Integer)):
        return None
    sig = types.void(arr, idx, off)

    def codegen(context, builder, signature, args):
        aty, ity, oty = signature.args
        ary = context.make_array(aty)(context, builder, args[0])
        i = context.cast(builder, args[1], ity, types.intp)
        o = context.cast(builder, args[2], oty, types.intp)
        stride0 = cgutils.unpack_tuple(builder, ary.strides, aty.ndim)[0]
        i8p = ir.IntType(8).as_pointer()
        emit_hint(builder, builder.gep(builder.bitcast(ary.data, i8p),
                                       [builder.add(builder.mul(i, stride0), o)]))
        return context.get_dummy_value()

    return sig, codegen


def emit_hint(builder, ptr):
    """Emit ``llvm.prefetch`` of the byte at ``ptr`` (an ``i8*``): read, keep in all levels,
    data.  For other intrinsics that prefetch inside their own loops."""
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    # the intrinsic's name carries the pointer type: "p0" with opaque pointers (LLVM 15+)
    name = "llvm.prefetch.p0" if str(i8p) == "ptr" else "llvm.prefetch.p0i8"
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)
    builder.call(fn, [ptr, i32(0), i32(3), i32(1)])


@numba.njit(inline="always", nogil=True, cache=True)
def prefetch(a, i):
    """Prefetch the cache line of ``a[i]`` (1-d) or ``a[i, 0]`` (2-d) for reading."""
    _hint(a, i, 0)


@numba.njit(inline="always", nogil=True, cache=True)
def prefetch_row(a, i):
    """Prefetch every cache line of the C-contiguous row ``a[i, :]`` for reading."""
    nb = a.shape[1] * a.itemsize
    off = 0
    while off < nb:
        _hint(a, i, off)
        off += LINE
    _hint(a, i, nb - 1)
