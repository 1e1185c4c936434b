"""The random-read floor of an admm half-step (``kernelforms bench admm roofline``): a compiled
pass that reads every row of the other factor that a half-step reads at random - the columns
of each CSR row of ``M`` and the rows of its terms' partners - with the half-steps' vector row
product and prefetch (:func:`kernelforms.solvers._admm_kernels._row_products`), and writes each
row's two sums; nothing else.  Its time is what the row reads cost on this machine; the byte
model counts the same rows at the copy bandwidth, as an order with local columns would read
them.  Imported by the bench only (numba)."""

from __future__ import annotations

import numba

from ..solvers._admm_kernels import _row_products


@numba.njit(nogil=True, cache=True)
def random_reads_pass(indptr, indices, data, tptr, tnbr, tsw, other, out, am, at):
    """``out[0, i] = (M other)_i`` and ``out[1, i] = sum_t sqrt(c_t) other[tnbr[t]]`` over row
    ``i``'s terms, prefetching the rows ``am`` nonzeros and ``at`` terms ahead (0: none)."""
    n = other.shape[0]
    nnz, nt = indptr[n], tptr[n]
    for i in range(n):
        _row_products(other, indices, data, indptr[i], indptr[i + 1], out[0, i], am, nnz)
        _row_products(other, tnbr, tsw, tptr[i], tptr[i + 1], out[1, i], at, nt)
