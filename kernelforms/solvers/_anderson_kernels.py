"""Compiled passes of Anderson's incremental step (:meth:`._anderson.Anderson._blocked`).

Each kernel takes a range of values ``[a, b)`` of the flattened state (``a`` a multiple of the
block length, ``b`` too or the end), so the solver's thread pool runs them on disjoint ranges:

* :func:`fit_pass` forms the residual ``r = F(x) - x``, the new differences ``dF[p]``,
  ``dR[p]``, stores the image and residual for the next call, and adds up ``||r||^2``, the
  Gram row ``dR[:k] . dR[p]`` and ``dR[:k] . r`` **per block of values aligned to absolute
  indices** (one row of ``parts`` per block).  The caller sums the blocks in one fixed order,
  so the sums do not depend on how the values are split between threads.
* :func:`candidate_pass` writes the candidate ``F(x) - c dF`` and counts its non-finite values.

Every sum is float64 in one fixed order (no ``fastmath``: no reassociation, no fused
multiply-adds): a block's values in order, then the blocks in order.  The image, the residual
and the differences are formed in the precision of the arrays, as the whole-vector fit forms
them (float32 arrays are a second specialisation).  Both passes are bound by memory traffic,
not arithmetic (16 million values, depth 5: about 1.8 GB moved by the first, 0.9 GB by the
second).  The kernels release the GIL (``nogil``),
are compiled on first use and cached on disk (``cache=True``); this module is imported by the
incremental step only, so ``import kernelforms`` does not load numba.
"""

from __future__ import annotations

import numba
import numpy as np

_opts = dict(nogil=True, cache=True, error_model="numpy")


@numba.njit(**_opts)
def fit_pass(a, b, block, x, f, fp, rp, dF, dR, p, k, parts):
    """Values ``[a, b)``: ``rp = f - x`` (in ``rp``'s precision), with ``k > 0`` also
    ``dF[p] = f - fp_old``, ``dR[p] = rp - rp_old``, then ``fp = f``; for each block ``j`` of
    ``block`` values (``a`` a multiple of ``block``) ``parts[j, 0] = ||r||^2``,
    ``parts[j, 1 + q] = dR[q] . dR[p]`` and ``parts[j, 1 + k + q] = dR[q] . r`` for ``q < k``,
    over the block's values in order."""
    acc = np.empty(1 + 2 * k)
    lo = a
    while lo < b:
        hi = min(lo + block, b)
        rr = 0.0
        for q in range(1 + 2 * k):
            acc[q] = 0.0
        for i in range(lo, hi):
            fi = f[i]
            rn = rp.dtype.type(fi - x[i])
            # (the first call, k = 0, writes rp before reading it: a fresh buffer's pages are
            # then written once, not mapped to the zero page and copied on the write)
            ro = rp[i] if k > 0 else rn
            rp[i] = rn
            r = np.float64(rn)
            rr += r * r
            if k > 0:
                dF[p, i] = fi - fp[i]
                d = np.float64(rn - ro)
                dR[p, i] = d
                for q in range(k):
                    e = dR[q, i]
                    acc[1 + q] += e * d
                    acc[1 + k + q] += e * r
            fp[i] = fi
        j = lo // block
        parts[j, 0] = rr
        for q in range(1, 1 + 2 * k):
            parts[j, q] = acc[q]
        lo = hi


@numba.njit(**_opts)
def candidate_pass(a, b, f, dF, c, res):
    """Values ``[a, b)``: ``res = f - sum_q c[q] dF[q]`` (the sum over ``q`` in order, float64,
    then rounded to ``res``'s precision); returns the number of non-finite values written."""
    k = c.size
    bad = 0
    for i in range(a, b):
        s = 0.0
        for q in range(k):
            s += c[q] * dF[q, i]
        res[i] = np.float64(f[i]) - s
        v = res[i]
        if not v - v == 0.0:  # inf or nan
            bad += 1
    return bad
