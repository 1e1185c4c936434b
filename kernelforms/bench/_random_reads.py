"""The random-read floor of an admm half-step (``kernelforms bench admm roofline``): a compiled
pass that reads every row of the other factor that a half-step reads at random - the columns
of each CSR row of ``M`` and the rows of its terms' partners - with the half-steps' vector row
product and prefetch (:func:`kernelforms.solvers._admm_kernels._row_product`), and writes each
row's two sums; nothing else.  Its time is what the row reads cost on this machine; the byte
model counts the same rows at the copy bandwidth, as an order with local columns would read
them.  Imported by the bench only (numba)."""

from __future__ import annotations

import numba
import numpy as np

from ..solvers._admm_kernels import LANES, _row_product, _row_product4


@numba.njit(inline="always", nogil=True, cache=True)
def _products(other, indices, data, e0, e1, mv, pf, pend):
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
                acc += data[e] * other[indices[e], q]
            mv[q] = acc


@numba.njit(nogil=True, cache=True)
def random_reads_pass(indptr, indices, data, tptr, tnbr, tsw, other, out, am, at):
    """``out[0, i] = (M other)_i`` and ``out[1, i] = sum_t sqrt(c_t) other[tnbr[t]]`` over row
    ``i``'s terms, prefetching the rows ``am`` nonzeros and ``at`` terms ahead (0: none)."""
    n = other.shape[0]
    nnz, nt = indptr[n], tptr[n]
    for i in range(n):
        _products(other, indices, data, indptr[i], indptr[i + 1], out[0, i], am, nnz)
        _products(other, tnbr, tsw, tptr[i], tptr[i + 1], out[1, i], at, nt)
