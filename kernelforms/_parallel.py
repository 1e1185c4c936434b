"""Sparse matrix products on several cores.

scipy's ``csr_matrix @ x`` runs on one core.  The Lanczos runs of the certificate at large
``n`` are mostly such products (a million two-Gaussian points: thousands of products of about
0.1 s each), so :func:`parallel` wraps a large CSR matrix in an object whose ``@``
splits the rows into blocks of equal ``nnz`` and runs scipy's own CSR kernel on each block
in a thread (the kernel releases the GIL).  Every row is summed by one thread in the same
order as scipy's serial product, so the result is bitwise the same.

:func:`limit_threads` and :func:`with_threads` are the one place that caps the thread pools of
BLAS (and OpenMP) around a computation: the solvers' ``threads`` option and the estimator's
single thread on small inputs.

The number of threads is :func:`threads`: the environment variable ``KERNELFORMS_NUM_THREADS``
when set to a positive integer (1 turns the threading off), else the cores this process may
run on, at most 4.
"""

from __future__ import annotations

import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import numpy as np
import scipy.sparse as sp

try:  # the CSR x dense kernels behind ``csr_matrix @ ndarray``; they add into the output
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec
    from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs
except ImportError:  # pragma: no cover - private scipy API missing: serial products
    _csr_matvec = _csr_matvecs = None

#: the most threads used without ``KERNELFORMS_NUM_THREADS`` (memory bandwidth, not cores,
#: limits a sparse product beyond a few threads)
MAX_THREADS = 4
#: products with fewer multiply-adds (``nnz`` times the columns of ``x``) stay serial: a
#: thread hand-off costs tens of microseconds
MIN_WORK = 1_000_000
ENV = "KERNELFORMS_NUM_THREADS"

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_key: tuple[int, int] = (0, 0)  # (process id, size): a forked child makes its own pool


def threads() -> int:
    """Threads for large sparse products (and admm's row blocks): ``KERNELFORMS_NUM_THREADS``
    when it is set to a positive integer, else the cores available to this process (its CPU
    affinity where the platform reports it), at most :data:`MAX_THREADS`.

    Any other value of the variable is ignored with a ``RuntimeWarning`` naming it (it is
    read in the middle of a solve, where an exception would lose the work done)."""
    cores = _cores()
    raw = os.environ.get(ENV, "").strip()
    if raw:
        try:
            val = int(raw)
        except ValueError:
            val = 0
        if val >= 1:
            return val
        if raw not in _warned:
            _warned.add(raw)
            warnings.warn(f"{ENV}={raw!r} is not a positive integer and is ignored ({cores} "
                          "thread(s) used): set it to a positive integer (1 = no threads) or "
                          "unset it.", RuntimeWarning, stacklevel=2)
    return cores


_warned: set[str] = set()


def limit_threads(limit: int | None, user_api: str | None = "blas") -> Any:
    """A context manager that caps the threads of ``user_api``'s pools (``threadpoolctl``:
    ``"blas"``, ``"openmp"``, or None for both) at ``limit``; no cap for None.

    The solvers' ``threads`` option caps BLAS alone (their products are small, and threaded
    BLAS on them was many times slower on a shared 2-core machine: 70x for lowrank; a 300 x 300
    ``eigh`` took 0.8-5 s with OpenBLAS's 2 threads and 0.035-0.048 s with one); the
    estimator caps both for small inputs (scikit-learn's neighbour search and k-means start
    OpenMP threads: a kNN search on 31 points took 0.14 s with the default threads)."""
    from contextlib import nullcontext

    if limit is None:
        return nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return nullcontext()
    return threadpool_limits(limits=int(limit), user_api=user_api)


def with_threads(limit: int | None, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with at most ``limit`` BLAS threads (:func:`limit_threads`; no cap for
    None): how the solvers apply their ``threads`` option."""
    with limit_threads(limit):
        return fn(*args)


def _cores() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cores))


def _executor(n: int) -> ThreadPoolExecutor:
    """The shared pool of ``n`` threads.  A child process forked after the pool was made
    inherits the executor but not its threads (once all of them had started and were idle,
    the child's tasks waited forever): the pool is keyed by the process id, so the child
    starts its own."""
    global _pool, _pool_key
    key = (os.getpid(), n)
    with _lock:
        if _pool is None or _pool_key != key:
            if _pool is not None and _pool_key[0] == key[0]:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(n, thread_name_prefix="kernelforms-spmv")
            _pool_key = key
        return _pool


if hasattr(os, "register_at_fork"):  # the lock may be held by another thread at the fork
    os.register_at_fork(after_in_child=lambda: globals().__setitem__("_lock", threading.Lock()))


class ParallelCSR:
    """A CSR matrix whose products with dense vectors and blocks use :func:`threads` threads.

    Supports ``A @ x`` for ``x`` of shape ``(n,)`` or ``(n, m)``, ``matvec`` / ``matmat``
    (so ``scipy.sparse.linalg.aslinearoperator`` takes it), ``shape`` and ``dtype``.  The
    wrapped matrix is ``.matrix``."""

    def __init__(self, A: sp.csr_matrix, n_threads: int) -> None:
        self.matrix = A
        self.shape = A.shape
        self.dtype = A.dtype
        self.n_threads = n_threads
        cuts = np.searchsorted(A.indptr, np.linspace(0, A.nnz, n_threads + 1)[1:-1])
        bounds = np.unique(np.concatenate([[0], cuts, [A.shape[0]]])).astype(np.int64)
        self._blocks = [(int(a), int(b)) for a, b in pairwise(bounds) if b > a]

    def _product(self, x: np.ndarray) -> np.ndarray:
        A = self.matrix
        x = np.asarray(x)
        if x.dtype != np.float64 or x.ndim not in (1, 2) or x.shape[0] != A.shape[1] \
                or A.nnz * (1 if x.ndim == 1 else x.shape[1]) < MIN_WORK or len(self._blocks) < 2:
            return A @ x
        x = np.ascontiguousarray(x)
        ncol = A.shape[1]
        if x.ndim == 1:
            out = np.zeros(A.shape[0])

            def run(ab):
                a, b = ab
                _csr_matvec(b - a, ncol, A.indptr[a:b + 1], A.indices, A.data, x, out[a:b])
        else:
            m = x.shape[1]
            out = np.zeros((A.shape[0], m))
            xf = x.reshape(-1)

            def run(ab):
                a, b = ab
                _csr_matvecs(b - a, ncol, m, A.indptr[a:b + 1], A.indices, A.data, xf,
                             out[a:b].reshape(-1))
        list(_executor(self.n_threads).map(run, self._blocks))
        return out

    def matvec_add(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out += A x`` in place, for contiguous float64 vectors ``x`` and ``out``: each row's
        sum starts from ``out``'s value and adds the row's entries in order, whatever the
        threads (the same bits).  No output is allocated: a fresh 8 MB vector per product
        cost a million-point Lanczos run its pages' zeroing and TLB flushes on every step."""
        A = self.matrix
        if not (x.dtype == out.dtype == np.float64 and x.flags.c_contiguous
                and out.flags.c_contiguous and x.shape == (A.shape[1],)
                and out.shape == (A.shape[0],)):
            raise ValueError("matvec_add needs contiguous float64 vectors x of shape "
                             f"({A.shape[1]},) and out of shape ({A.shape[0]},)")
        ncol = A.shape[1]
        if A.nnz < MIN_WORK or len(self._blocks) < 2:
            _csr_matvec(A.shape[0], ncol, A.indptr, A.indices, A.data, x, out)
            return out

        def run(ab):
            a, b = ab
            _csr_matvec(b - a, ncol, A.indptr[a:b + 1], A.indices, A.data, x, out[a:b])
        list(_executor(self.n_threads).map(run, self._blocks))
        return out

    def __matmul__(self, x: Any) -> np.ndarray:
        return self._product(x)

    matvec = matmat = dot = __matmul__


def parallel(A: Any) -> Any:
    """``A`` wrapped in :class:`ParallelCSR` when it is a large real CSR / CSC matrix with
    ``nnz`` enough to pay for threads and :func:`threads` is above 1; else ``A`` itself.
    Use it only where ``A`` is multiplied by dense vectors or blocks (nothing else is
    forwarded)."""
    if isinstance(A, ParallelCSR) or _csr_matvec is None or not sp.issparse(A):
        return A
    if A.format not in ("csr", "csc") or A.dtype != np.float64 or A.nnz < MIN_WORK // 4:
        return A
    n_threads = threads()
    if n_threads < 2:
        return A
    return ParallelCSR(_kernel_csr(A), n_threads)


def accumulator(A: Any) -> ParallelCSR | None:
    """``A`` as a :class:`ParallelCSR` (:func:`threads` threads, one for a small ``A``) whose
    :meth:`ParallelCSR.matvec_add` adds products into a caller's vector, when ``A`` is a real
    CSR / CSC matrix and scipy's kernel is available; else None (the caller multiplies)."""
    P = parallel(A)
    if isinstance(P, ParallelCSR):
        return P
    if _csr_matvec is None or not sp.issparse(A) or A.format not in ("csr", "csc") \
            or A.dtype != np.float64:
        return None
    return ParallelCSR(_kernel_csr(A), 1)  # small, or one thread: the serial kernel


def _kernel_csr(A: Any) -> sp.csr_matrix:
    """``A`` in CSR with one index type for ``indptr`` and ``indices`` (scipy's kernel wants
    both alike; duplicate or unsorted entries are fine: the kernel adds each entry)."""
    A = A.tocsr()
    if A.indptr.dtype != A.indices.dtype:
        idx = np.result_type(A.indptr.dtype, A.indices.dtype)
        A = sp.csr_matrix((A.data, A.indices.astype(idx), A.indptr.astype(idx)), shape=A.shape)
    return A
