"""Memory for large arrays written and read in passes: ordinary 4 KiB pages instead of the
transparent huge pages numpy asks for (see :func:`streamed`)."""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

__all__ = ["streamed", "owns_memory", "aligned", "STREAMED_BYTES", "LINE"]

#: arrays from this many bytes are allocated by :func:`streamed` on 4 KiB pages (numpy asks for
#: huge pages from 4 MiB)
STREAMED_BYTES = 1 << 22
#: bytes of a cache line (x86-64 and most ARM cores): :func:`aligned` starts arrays on them
LINE = 64


def streamed(shape: tuple, dtype: Any = np.float64) -> np.ndarray:
    """An uninitialised array for values that are read and written in order (Anderson's
    history, a solver's saved states, Lanczos vectors), on ordinary 4 KiB pages from
    :data:`STREAMED_BYTES` up (see :func:`owns_memory`).

    numpy asks the kernel for transparent huge pages for every array from 4 MiB; a pass in
    order gains nothing from them (a handful of streams needs a handful of TLB entries), and
    their first touch can cost several times more: the kernel clears 2 MiB at once, and in a
    virtual machine that returns free memory to its host (a balloon's free page reporting) the
    host backs the whole page again.  On such a machine the first write of 1.28 GB took
    3.1-3.7 s of system time on huge pages and 0.4-0.5 s on 4 KiB pages; later passes ran at
    the same speed on both, and so did a million-row sparse product reading its vector at
    random from either.  Smaller arrays, and platforms without ``madvise``: ``np.empty``.
    The memory is returned when the array (and every view of it) is freed.
    """
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    advice = getattr(mmap, "MADV_NOHUGEPAGE", None)
    if size < STREAMED_BYTES or advice is None:
        return np.empty(shape, dtype=dtype)
    buf = mmap.mmap(-1, size)  # anonymous, page-aligned, zero pages until written
    try:
        buf.madvise(advice)
    except OSError:  # a kernel without transparent huge pages: 4 KiB pages anyway
        pass
    arr = np.frombuffer(buf, dtype=dtype)
    return arr if len(shape) == 1 else arr.reshape(shape)


def owns_memory(a: np.ndarray) -> bool:
    """Whether ``a`` is the array that holds its memory: numpy's own (``owndata``) or a 1-D
    :func:`streamed` array (``base`` the view of its ``mmap``); a view of either is not."""
    if a.flags.owndata:
        return True
    base = a.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)


def aligned(shape: tuple, dtype: Any = np.float64, align: int = LINE) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align``-byte boundary.

    numpy's own large arrays start 16 bytes past a page (the allocator's header), so a row of
    64 bytes (rank 8, float64) straddles two cache lines: a random read of such a row moves two
    lines instead of one.  The solvers that read rows of their factors at random (admm's
    half-steps) allocate them here.  Memory as numpy's (huge pages from 4 MiB), ``align`` bytes
    more; freed with the array and every view of it."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    buf = np.empty(size + align, dtype=np.uint8)
    start = (-buf.ctypes.data) % align
    return buf[start:start + size].view(dtype).reshape(shape)
