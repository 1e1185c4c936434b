"""The eigenvalue engine: a lower estimate of ``lambda_min`` of a symmetric matrix or operator
(dense, plain Lanczos, ARPACK), the lowest eigenpairs, and cheap rigorous lower bounds
(Collatz-Wielandt, inertia).  Every ``lambda_min`` of the package comes from here."""

from __future__ import annotations

import contextlib
import contextvars
import math
import sys
import weakref
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg.blas import daxpy

from .._pages import owns_memory, streamed
from .._parallel import accumulator, parallel


#: below this many rows lambda_min is computed densely (exact); above, by Lanczos
DENSE_BELOW = 500
#: when Lanczos does not converge (a clustered spectrum near an optimum), matrices up to this
#: many rows are decomposed densely instead (5,000 rows: 200 MB, about a minute)
DENSE_FALLBACK = 5000
#: Lanczos' tolerance on the residual ``||A x - theta x||``, relative to ``||A||`` (the
#: residual is subtracted from the Ritz value anyway).  ARPACK's own rule is relative to the
#: Ritz value, which near an optimum is about 0: four negative eigenvalues of -5.7e-4 ..
#: -2.5e-5 at a million points asked for residuals down to 2.5e-11 and had not converged after
#: 9 minutes; relative to the norm (Lanczos on ``c I - A``, ``c ~ ||A||``): 3,695 products, 164 s
LANCZOS_TOL = 1e-9
#: ARPACK's restarts (``maxiter``) before it gives up (a million points needed about 190 at
#: 24 vectors); past them the callers fall back (dense below DENSE_FALLBACK rows, or the best
#: Ritz pairs).  Without a cap, a1a's graph (duplicate points: exactly repeated eigenvalues)
#: ran 20 n restarts, 1.4 million products, 100 s at 1,200 points
LANCZOS_RESTARTS = 1000
#: from this many rows on, :func:`min_eigenvalue` runs a plain Lanczos recurrence without
#: reorthogonalisation (:func:`lanczos_min`: two passes, the second for the Ritz vector)
#: before ARPACK: at a million rows ARPACK's orthogonalisation against its 24 basis vectors
#: costs more than the product itself (one smallest eigenvalue: 78 s against 35 s)
PLAIN_LANCZOS_ABOVE = 50_000
#: the plain recurrence's step cap (past it ARPACK takes over)
PLAIN_LANCZOS_STEPS = 20_000
#: the Lanczos vectors the plain recurrence keeps in memory (bytes; 1,000 steps at a million
#: rows take 8 GB): the Ritz vectors are summed from them, and only the vectors past this
#: budget are formed again by a second pass of the recurrence; what a solver's memory
#: estimate counts (:func:`kernelforms.solvers.memory.plain_lanczos_bytes`)
LANCZOS_KEEP_BYTES = 2 * 2**30
#: the most the rank growth lets its certificates keep (:func:`keep_budget`): LANCZOS_KEEP_BYTES
#: plus what ``max_memory`` leaves beside the solver's estimate, up to this (a million
#: two-Gaussian points, the escape and the shifted run at admm's certified point: 2 GiB kept
#: 268 vectors, the shifted run took 1,113 products, 85-88 CPU s in all; 4 GiB keeps 536, 845
#: products, 68 CPU s); the vectors are the same whatever is kept
LANCZOS_KEEP_MAX = 4 * 2**30
#: :func:`lanczos_min` with a ``floor``: the looser residual rule (relative to ``||A||``) at
#: which a smallest Ritz value still ``FLOOR_MARGIN`` estimates above the floor ends the run
#: (the bound that reads it is the same for every value at or above the floor)
FLOOR_TOL = 1e-7
FLOOR_MARGIN = 4.0
#: in :func:`lanczos_lowest`, Ritz values this close (relative to ``||A||``) are copies of one
#: eigenvalue (the plain recurrence repeats converged ones; an unconverged copy of a 1,500-row
#: matrix's converged eigenvalue was 1.2e-7 from it with a residual estimate of 2e-4)
GHOST_GAP = 1e-6


#: :func:`directions_only`'s rule for :func:`lanczos_lowest` (``tol_rest``, ``enough``)
_DIRECTIONS: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "directions_only", default=None)


@contextlib.contextmanager
def directions_only(tol_rest: float, enough: float | None):
    """Within the block, :func:`lanczos_lowest` calls that give no ``tol_rest`` / ``enough``
    of their own take these: only the smallest pair is needed to the strict rule (the
    bound's ``lambda_min``), the others are directions (the rank growth's escape columns,
    checked by the solve and the certificates that follow), and the run may end once a
    converged value is ``>= enough``.  The rank growth wraps its escape in it: at 300,000
    two-Gaussian points the escape's run took 330 products instead of 500."""
    token = _DIRECTIONS.set((float(tol_rest), enough))
    try:
        yield
    finally:
        _DIRECTIONS.reset(token)


_KEEP: contextvars.ContextVar[int | None] = contextvars.ContextVar("lanczos_keep", default=None)


@contextlib.contextmanager
def keep_budget(nbytes: int):
    """Within the block, the plain Lanczos runs keep at most ``nbytes`` of vectors (instead of
    :data:`LANCZOS_KEEP_BYTES`), and :func:`reuse_vectors`' pool holds as much.  The numbers
    do not depend on it: the vectors past the budget are formed again by the same
    recurrence."""
    token = _KEEP.set(max(0, int(nbytes)))
    try:
        yield
    finally:
        _KEEP.reset(token)


def _keep_bytes() -> int:
    """The kept vectors' budget in force (:func:`keep_budget`, else LANCZOS_KEEP_BYTES)."""
    nbytes = _KEEP.get()
    return LANCZOS_KEEP_BYTES if nbytes is None else nbytes


class _Pool:
    """Lanczos vectors of finished runs, for the next run to write into (:func:`reuse_vectors`)."""

    def __init__(self) -> None:
        self.spare: list[np.ndarray] = []
        self.bytes = 0
        self.open = True
        #: the last renumbering (:func:`_reordered`): the pattern it was found for, the order
        #: and the renumbered pattern with the position of each entry in the original
        self.order: tuple | None = None

    def take(self, n: int) -> np.ndarray:
        """A float vector of length ``n`` (its values are not defined)."""
        while self.spare:
            v = self.spare.pop()
            self.bytes -= v.nbytes
            if v.shape == (n,):
                return v
        return streamed((n,))

    def give(self, *lists: list) -> None:
        """Keep the vectors of ``lists`` (emptied) for later runs, up to the kept vectors'
        budget (:func:`keep_budget`) and eight vectors more; a vector still referenced
        elsewhere (a caller's loop variable) is left alone."""
        for vectors in lists:
            self._give(vectors)

    def _give(self, vectors: list) -> None:
        while self.open and vectors:
            v = vectors.pop()
            if not (isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim == 1
                    and owns_memory(v)
                    and v.flags.c_contiguous and v.flags.writeable):
                continue
            if self.bytes + v.nbytes > _keep_bytes() + 8 * v.nbytes:
                break
            # the references: ``v`` here and getrefcount's argument; any other is a reader
            if sys.getrefcount(v) <= 2:
                self.spare.append(v)
                self.bytes += v.nbytes
        vectors.clear()

    def release(self) -> None:
        """Drop the spare vectors (their memory goes back to the system)."""
        self.spare.clear()
        self.bytes = 0


_POOL: contextvars.ContextVar[_Pool | None] = contextvars.ContextVar("lanczos_pool", default=None)


@contextlib.contextmanager
def reuse_vectors():
    """Within the block, the plain Lanczos runs (:class:`Krylov`) write their vectors into
    the memory of the runs that have finished instead of new arrays; the memory is released
    at the end of the (outermost) block.  A new array's first write clears its pages (on the
    2-core virtual machine of the benchmarks, memory freed and then written again cost 18 ms
    per 8 MB vector: 4-5 s for 268 vectors at a million rows, in each run).
    The certificate's entry points and the rank growth of the low-rank solvers run in one;
    :func:`release_vectors` gives the memory back within the block (the rank growth, before a
    solve)."""
    if _POOL.get() is not None:
        yield
        return
    pool = _Pool()
    token = _POOL.set(pool)
    try:
        yield
    finally:
        _POOL.reset(token)
        pool.open = False
        pool.release()
        pool.order = None


def release_vectors() -> None:
    """Within :func:`reuse_vectors`, drop the vectors kept for the next run (their memory goes
    back to the system; the renumbering is kept).  The rank growth calls it before each solve,
    which needs its own memory, not the certificate's: at a million points the kept vectors
    take up to the kept vectors' budget plus eight vectors."""
    pool = _POOL.get()
    if pool is not None:
        pool.release()


def min_eigenvalue(A: Any, dense_below: int = DENSE_BELOW, seed: int = 0,
                   start: np.ndarray | None = None, keep: list | None = None,
                   floor: float | None = None, give_up: float | None = None) -> tuple[float, str]:
    """A lower estimate of the smallest eigenvalue of the symmetric matrix ``A``.

    Dense ``eigvalsh`` below ``dense_below`` rows; above, Lanczos (:func:`lanczos_bottom`)
    and the Ritz value minus its residual norm ``||A x - theta x||`` (an eigenvalue of A lies
    within that distance of theta, :func:`_ritz_lower`).  ``start``: a guess of the bottom
    eigenvector; Lanczos then starts from it plus 1e-2 of a random vector (it must still see
    the rest of the spectrum).  ``keep``: a list that receives the plain recurrence's run
    (:class:`Krylov`, from :data:`PLAIN_LANCZOS_ABOVE` rows), for :func:`lanczos_lowest` to
    continue on the same matrix.  ``floor``: only whether ``lambda_min >= floor`` matters to
    the caller (:func:`lanczos_min`'s early stop).  ``give_up``: any ``lambda_min`` below it is
    of no use to the caller; a plain run whose Ritz value falls below it stops and returns
    ``-inf`` (a valid lower estimate that carries no information), method
    ``"lanczos (stopped below give_up)"``.
    """
    n = A.shape[0]
    if n <= dense_below:
        M = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=float)
        return _dense_lower(M), "dense"
    from scipy.sparse.linalg import ArpackNoConvergence

    v0 = _start_vector(n, seed, start)
    if n >= PLAIN_LANCZOS_ABOVE:
        found = lanczos_min(A, v0, keep=keep, floor=floor, give_up=give_up)
        if found is not None:
            if math.isinf(found[1]):
                return -math.inf, "lanczos (stopped below give_up)"
            return found[0] - found[1], "lanczos"
    try:
        w, X = lanczos_bottom(A, 1, v0=v0)
    except ArpackNoConvergence as exc:  # use the best Ritz pair found, residual included
        if n <= DENSE_FALLBACK:  # clustered spectrum: a dense solve is still affordable
            M = A @ np.eye(n)
            M = M.toarray() if sp.issparse(M) else np.asarray(M, dtype=float)
            return _dense_lower(M), "dense (Lanczos did not converge)"
        if exc.eigenvalues.size == 0:
            return -math.inf, "lanczos (no convergence)"
        w, X = exc.eigenvalues, exc.eigenvectors
    return _ritz_lower(A, float(w[0]), X[:, 0]), "lanczos"


class Krylov:
    """The plain Lanczos recurrence (no reorthogonalisation) on the symmetric ``A`` from
    ``v0``, kept so that it can be continued and its vectors read again.

    It holds the coefficients ``alpha_j, beta_j``, the first Lanczos vectors (as many as
    :data:`LANCZOS_KEEP_BYTES` allows) and the last two.  :meth:`vectors` gives the first
    ``m`` vectors for summing Ritz vectors: the kept ones, then the recurrence again from the
    last two kept (the same operations, so the same vectors), so only the vectors past the
    budget cost a second product.  :func:`lanczos_lowest` given a run of :func:`lanczos_min`
    on the same matrix continues it instead of starting again (the diagonal shift's eight
    pairs after the bound's ``lambda_min``: the first pass is shared).

    For a sparse ``A`` the products add into vectors the run owns (:func:`_recur`): past the
    kept ones, the recurrence reuses three vectors instead of allocating one per step (at a
    million rows the fresh vectors' page faults took 11 CPU s of a 62-s certificate)."""

    def __init__(self, A: Any, v0: np.ndarray, max_steps: int | None = None,
                 keep_bytes: float | None = None) -> None:
        self.shape = A.shape
        #: the rows' order the recurrence runs in (None: ``A``'s own): a large sparse ``A``
        #: is renumbered by reverse Cuthill-McKee so that its products read ``x`` nearly in
        #: order (:data:`REORDER_ABOVE`); :meth:`to_points` maps vectors back
        self.perm: np.ndarray | None = None
        if sp.issparse(A) and A.shape[0] >= REORDER_ABOVE and A.shape[0] == A.shape[1]:
            A, self.perm = _reordered(A)
            v0 = np.asarray(v0, dtype=float)[self.perm]
        self.op, self.nrm, self.steps, self.v0 = _plain_start(A, v0, max_steps)
        #: the products' kernel that adds into a given vector (None: ``op`` allocates)
        self.add = accumulator(A)
        n = len(self.v0)
        budget = _keep_bytes() if keep_bytes is None else keep_bytes
        self.keep = max(2, int(budget // (8 * max(n, 1))))
        self.alpha: list[float] = []
        self.beta: list[float] = []
        self.kept: list[np.ndarray] = []
        self.products = 0
        #: :func:`lanczos_min`'s answer: ``(theta, x, r)``, the Ritz value, its unit vector
        #: and its computed residual norm (None before)
        self.ritz: tuple[float, np.ndarray, float] | None = None
        self._v_prev, self._v, self._w = np.zeros(n), self.v0, None
        self._v_prev_kept = False  # whether _v_prev is in ``kept`` (else it may be reused)
        self._free: list[np.ndarray] = []  # vectors of the run no longer read
        self._pool = _POOL.get()
        if self._pool is not None:  # the run's vectors go back to the pool when it is dropped
            weakref.finalize(self, self._pool.give, self.kept, self._free)

    def _new(self) -> np.ndarray | None:
        """A vector for the sparse products to write into: one the run no longer reads, else
        the pool's (:func:`reuse_vectors`) or a new one; None when the products allocate."""
        if self.add is None:
            return None
        if self._free:
            return self._free.pop()
        n = len(self.v0)
        return self._pool.take(n) if self._pool is not None else streamed((n,))

    def to_points(self, x: np.ndarray) -> np.ndarray:
        """Vectors (or the rows of an ``(n, k)`` block) of the recurrence's order in ``A``'s."""
        if self.perm is None:
            return x
        y = np.empty_like(x)
        y[self.perm] = x
        return y

    @property
    def m(self) -> int:
        """Steps taken (the tridiagonal's order)."""
        return len(self.alpha)

    @property
    def b(self) -> float:
        """The last ``beta_j`` (0 before the first step)."""
        return self.beta[-1] if self.beta else 0.0

    @property
    def invariant(self) -> bool:
        """The last step found an invariant subspace (its Ritz values are eigenvalues)."""
        return bool(self.beta) and self.b <= 1e-14 * self.nrm

    def step(self) -> bool:
        """One more step of the recurrence; False when a coefficient is not finite."""
        if self._w is not None:  # the previous step's vector, normalised (in place)
            self._w /= self.b
            if not self._v_prev_kept:
                self._free.append(self._v_prev)
            self._v_prev_kept = len(self.kept) > 0 and self.kept[-1] is self._v
            self._v_prev, self._v = self._v, self._w
        if len(self.kept) < self.keep:
            self.kept.append(self._v)
        self._w, a, b = _plain_step(self.op, self._v, self._v_prev, self.b, self.add, self._new())
        self.products += 1
        self.alpha.append(a)
        self.beta.append(b)
        return math.isfinite(a) and math.isfinite(b)

    def lowest(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """The tridiagonal's ``p`` smallest eigenpairs."""
        from scipy.linalg import eigh_tridiagonal

        return eigh_tridiagonal(np.array(self.alpha), np.array(self.beta[:-1]), select="i",
                                select_range=(0, p - 1))

    def vectors(self, m: int):
        """``(j, v_j)`` for the first ``m`` Lanczos vectors: the kept ones, then the
        recurrence again from the last two kept, with the stored coefficients.  A vector
        formed again is valid until the next one is asked for (its memory is reused)."""
        kept = self.kept
        for j in range(min(m, len(kept))):
            yield j, kept[j]
        if m <= len(kept):
            return
        j0 = len(kept) - 1
        v = kept[j0]
        v_prev = kept[j0 - 1] if j0 >= 1 else np.zeros(len(v))
        b = self.beta[j0 - 1] if j0 >= 1 else 0.0
        free: list[np.ndarray] = []
        for j in range(j0, m - 1):
            w = _recur(self.op, v, v_prev, b, self.add, free.pop() if free else self._new())
            self.products += 1
            _axpy(-self.alpha[j], v, w)  # the operations of _plain_step, in its order
            b = self.beta[j]
            w /= b
            if j - 1 > j0:  # v_{j-1} was formed here, not kept: read no more
                free.append(v_prev)
            v_prev, v = v, w
            yield j + 1, v
        if self._pool is not None:
            if m - 2 > j0:  # v_{m-2} was formed here (the last one is the caller's)
                free.append(v_prev)
            del v_prev, v, w
            self._pool.give(free)


#: :class:`Krylov` renumbers a sparse matrix of at least this many rows (reverse
#: Cuthill-McKee): at a million two-Gaussian points a product of the certificate's ``H``
#: (10.7 million nonzeros, rows in the data's random order) took 43 CPU ms, 36 in this order
#: (about 0.7 CPU s to find it and renumber, once per run of hundreds of products)
REORDER_ABOVE = 200_000


def _reordered(A: Any) -> tuple[Any, np.ndarray]:
    """``A`` renumbered by reverse Cuthill-McKee (``A[p][:, p]``, its rows' entries sorted by
    column) and the order ``p``.

    Within :func:`reuse_vectors`, a matrix with the pattern of the previous one (the rank
    growth's certificates: each escape's ``H`` and its shifted matrix differ only in their
    values) takes the order found for it and its values are gathered into the renumbered
    pattern (at a million rows 0.2 s instead of 0.9 s: the order and the renumbering)."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    A = sp.csr_matrix(A)
    pool = _POOL.get()
    canonical = bool(A.has_canonical_format)  # (a position map needs one entry per place)
    if pool is not None and canonical and pool.order is not None:
        indptr, indices, p, B_indptr, B_indices, where = pool.order
        if A.shape == (len(p), len(p)) and np.array_equal(A.indptr, indptr) \
                and np.array_equal(A.indices, indices):
            # (the pattern copied: a caller may sort or change a matrix's arrays in place)
            return sp.csr_matrix((A.data[where], B_indices.copy(), B_indptr.copy()),
                                 shape=A.shape), p
    p = np.asarray(reverse_cuthill_mckee(A, symmetric_mode=True), dtype=np.intp)

    def renumbered(M: Any) -> Any:
        B = M[p][:, p].tocsr()
        B.sort_indices()
        return B

    if pool is None or not canonical or A.nnz >= 2**53:
        return renumbered(A), p
    # the renumbered positions of the entries (exact as floats below 2**53; from 1, so that
    # no entry is a zero an indexing step could drop)
    B = renumbered(sp.csr_matrix((np.arange(1, A.nnz + 1, dtype=float), A.indices, A.indptr),
                                 shape=A.shape))
    if B.nnz != A.nnz:  # pragma: no cover - scipy's indexing keeps every entry
        return renumbered(A), p
    where = B.data.astype(np.intp) - 1
    pool.order = (A.indptr.copy(), A.indices.copy(), p, B.indptr.copy(), B.indices.copy(), where)
    return sp.csr_matrix((A.data[where], B.indices, B.indptr), shape=A.shape), p


def _plain_start(A: Any, v0: np.ndarray, max_steps: int | None):
    """What the plain-Lanczos routines start from: the operator (products on several
    cores), ``||A||``'s estimate (1 when it is not usable), the step cap and the unit start."""
    from scipy.sparse.linalg import aslinearoperator

    nrm = _norm_estimate(A)
    nrm = nrm if nrm > 0 and math.isfinite(nrm) else 1.0
    steps = PLAIN_LANCZOS_STEPS if max_steps is None else int(max_steps)
    v0 = np.asarray(v0, dtype=float)
    return aslinearoperator(parallel(A)), nrm, steps, v0 / np.linalg.norm(v0)


def _plain_step(op: Any, v: np.ndarray, v_prev: np.ndarray, b: float, add: Any = None,
                out: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """One step of the three-term recurrence: ``(w, alpha_j, beta_j)``, ``w`` not yet
    divided by ``beta_j``.  The updates are in place (BLAS ``axpy``): at a million rows
    each temporary ``b v`` was one more pass over 8 MB per step (:meth:`Krylov.vectors`
    repeats the same operations to form the same vectors again).  ``add`` and ``out``: as
    :func:`_recur`."""
    w = _recur(op, v, v_prev, b, add, out)
    a = float(w @ v)
    _axpy(-a, v, w)
    return w, a, float(np.linalg.norm(w))


def _recur(op: Any, v: np.ndarray, v_prev: np.ndarray, b: float, add: Any = None,
           out: np.ndarray | None = None) -> np.ndarray:
    """``A v - b v_prev``, the recurrence's product term.  With ``add`` (a
    :class:`~kernelforms._parallel.ParallelCSR`): ``-b v_prev`` is written into ``out`` (a
    vector the caller no longer reads; a new one when None) and the product is added to it
    by the sparse kernel, no vector allocated; else ``op``'s product, then the ``axpy``."""
    if add is None:
        w = _product(op, v, v_prev)
        _axpy(-b, v_prev, w)
        return w
    w = streamed((len(v),)) if out is None else out
    np.multiply(v_prev, -b, out=w)
    return add.matvec_add(v, w)


def _product(op: Any, v: np.ndarray, v_prev: np.ndarray) -> np.ndarray:
    """``op v`` as a contiguous float vector the recurrence may update in place (copied
    when it is not writable or shares memory with the vectors it came from)."""
    w = np.asarray(op.matvec(v), dtype=float).ravel()
    if not (w.flags.c_contiguous and w.flags.writeable) or np.may_share_memory(w, v) \
            or np.may_share_memory(w, v_prev):
        w = np.array(w, dtype=float)
    return w


def _axpy(a: float, x: np.ndarray, y: np.ndarray) -> None:
    """``y += a x`` in place (BLAS ``daxpy`` for contiguous float vectors)."""
    if y.dtype == np.float64 and x.dtype == np.float64 and y.flags.c_contiguous \
            and x.flags.c_contiguous and x.shape == y.shape:
        daxpy(x, y, a=a)
    else:  # pragma: no cover - the recurrence's vectors are contiguous floats
        y += a * x


def lanczos_min(A: Any, v0: np.ndarray, tol: float = LANCZOS_TOL,
                max_steps: int | None = None, check: int = 10,
                keep: list | None = None, floor: float | None = None,
                give_up: float | None = None) -> tuple[float, float, int] | None:
    """The smallest Ritz value of the symmetric ``A``, its residual norm and the number of
    products, by the plain Lanczos recurrence from ``v0`` (no reorthogonalisation), or None
    when it has not converged within ``max_steps`` (default :data:`PLAIN_LANCZOS_STEPS`).

    Every ``check`` steps the tridiagonal's smallest eigenpair ``(theta, s)`` gives the
    residual estimate ``beta_j |s_j|``; at ``tol * ||A||`` (the rule of :func:`lanczos_bottom`)
    the Ritz vector is summed from the Lanczos vectors (:class:`Krylov`: kept in memory up
    to :data:`LANCZOS_KEEP_BYTES`, the rest formed again by a second pass of the same
    recurrence) and its residual ``||A x - theta x||`` is computed, not estimated: an
    eigenvalue of ``A`` lies within it of ``theta`` whatever the loss of orthogonality did
    (Paige 1980: the extreme Ritz values converge regardless; lost orthogonality only repeats
    them).  No basis to orthogonalise against: a million-row sparse matrix's smallest
    eigenvalue took 960 products (two passes), 35 s, where ARPACK took 78 s.  ``keep``: a
    list that receives the run (:class:`Krylov`), for :func:`lanczos_lowest` to continue.

    ``floor``: the caller needs only whether ``lambda_min >= floor`` (a bound that uses
    ``min(0, lambda_min)``: ``floor = 0``).  The run then also stops once the smallest Ritz
    value's estimate is within :data:`FLOOR_TOL` ``* ||A||`` and the Ritz value minus
    :data:`FLOOR_MARGIN` times it is still at or above ``floor``; the residual is computed as
    always, and a value below ``floor`` after all is returned as it is (the caller's
    bound then uses it).

    ``give_up``: every ``lambda_min`` below it is of no use to the caller (a bound it would
    give is too loose to matter).  The smallest Ritz value is an upper estimate of
    ``lambda_min`` (it is the Rayleigh quotient of a vector of the Krylov space; in finite
    precision Ritz values stay within round-off of the spectrum, Paige 1980), so once it is
    below ``give_up`` by more than :data:`FLOOR_TOL` ``* ||A||`` the run stops and returns
    ``(theta, inf, products)``: no lower estimate (an infinite residual).  A run on a matrix
    far from PSD ends after tens of steps instead of converging."""
    K = Krylov(A, v0, max_steps)
    if keep is not None:
        keep.append(K)
    n = A.shape[0]
    while True:
        theta, svec = math.nan, None
        loose = math.nan  # the residual a stop at the floor allows
        while K.m < K.steps:
            if not K.step():
                return None
            done = K.invariant
            if done or K.m % check == 0:
                th, S = K.lowest(1)
                est = abs(K.b * S[-1, 0])
                if done or est <= tol * K.nrm:
                    theta, svec = float(th[0]), S[:, 0]
                    break
                if give_up is not None and float(th[0]) + FLOOR_TOL * K.nrm < give_up:
                    return float(th[0]), math.inf, K.products
                if floor is not None and est <= FLOOR_TOL * K.nrm and \
                        float(th[0]) - FLOOR_MARGIN * est >= floor:
                    theta, svec = float(th[0]), S[:, 0]
                    loose = float(th[0]) - floor
                    break
        if svec is None:
            return None
        x = np.zeros(n)
        for j, v in K.vectors(len(svec)):  # summing the Ritz vector
            _axpy(float(svec[j]), v, x)
        nx = float(np.linalg.norm(x))
        if not nx > 0 or not math.isfinite(nx):
            return None
        x /= nx
        r = float(np.linalg.norm(np.asarray(K.op.matvec(x), dtype=float).ravel() - theta * x))
        K.products += 1
        if r <= 100.0 * tol * K.nrm or r <= loose:
            K.ritz = (theta, K.to_points(x), r)
            return theta, r, K.products
        if math.isnan(loose) or done:
            return None  # the estimate was wrong (or not finite): ARPACK decides
        floor = None  # theta - r fell below the floor: on to the strict rule


def lanczos_lowest(A: Any, k: int, v0: np.ndarray, tol: float = LANCZOS_TOL,
                   max_steps: int | None = None, check: int = 10,
                   resume: Krylov | None = None, tol_rest: float | None = None,
                   enough: float | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """The ``k`` smallest eigenpairs of the symmetric ``A`` by the plain Lanczos recurrence
    from ``v0`` (no reorthogonalisation, as :func:`lanczos_min`): ``(w, X, r, products)``,
    ascending values, unit vectors and the **computed** residual norms
    ``||A x_i - w_i x_i||``; None when it has not converged within ``max_steps`` (default
    :data:`PLAIN_LANCZOS_STEPS`) or a residual exceeds 100 times the rule.  ``resume``: a
    run of the recurrence on the same matrix (:func:`lanczos_min`'s, by its ``keep``) to
    continue instead of starting from ``v0``; ``products`` then counts the products of the
    whole run.

    Without reorthogonalisation a converged eigenvalue reappears as further Ritz values of
    the tridiagonal (Paige's "ghosts"), first unconverged and then converged: Ritz values
    within :data:`GHOST_GAP` ``* ||A||`` of each other count as one eigenvalue.  The
    recurrence runs until the converged Ritz values (residual estimate ``beta_j |s_ji|`` at
    most ``tol * ||A||``) below the first unconverged one that is not such a copy take ``k``
    distinct values.  One Ritz vector is summed per value (the best-converged copy; ``k + 2``
    when there are that many) from the Lanczos vectors (:meth:`Krylov.vectors`); a
    Rayleigh-Ritz step on their span (orthonormalised, dropping directions of its Gram matrix
    below ``1e-10`` of the largest) gives the pairs, whose residuals are then computed from
    one block product.  An eigenvalue within the ghost gap of a converged one can be missed
    (as by any single-vector Lanczos): the pairs are directions, and a bound built on them is
    checked by its own eigenvalue run.

    ``tol_rest`` (at least ``tol``; default ``tol``): the rule for the pairs after the
    smallest, when only the smallest value must be accurate (a lower estimate of
    ``lambda_min``) and the others are directions: the run stops once the smallest meets
    ``tol`` and the others ``tol_rest``, and their residuals are checked against
    ``tol_rest``.

    Without ``tol_rest`` and ``enough``, inside :func:`directions_only` its rule applies.

    ``enough``: fewer than ``k`` pairs will do once the distinct converged values include
    one at or above ``enough`` (every eigenvalue below it that the run sees is then among
    them: the diagonal shift needs the negative ones, ``enough = 0``); the pairs returned are
    then those values' (at most ``k``)."""
    n = A.shape[0]
    k = max(1, min(int(k), n))
    rule = _DIRECTIONS.get()
    if rule is not None and tol_rest is None and enough is None:
        tol_rest, enough = rule
    tol_rest = tol if tol_rest is None else max(float(tol_rest), tol)
    if resume is not None and resume.shape == A.shape and resume.m > 0 \
            and all(math.isfinite(x) for x in resume.alpha + resume.beta):
        K = resume
        if max_steps is not None:
            K.steps = max(K.steps, int(max_steps))
    else:
        K = Krylov(A, v0, max_steps)
    S = None
    first = K is resume  # a continued run is checked before its next step
    while K.m < K.steps or first:
        if not first and not K.step():
            return None
        first = False
        m = K.m
        done = K.invariant
        if done or (m >= k and m % check == 0):
            p = min(m, 4 * k + 8)
            b = K.b
            while True:  # the Ritz values below the first unconverged one that is not a ghost
                th, Sp = K.lowest(p)
                est = np.abs(b * Sp[-1]) if not done else np.zeros(p)
                ok = est <= tol_rest * K.nrm
                cv = th[ok]
                # an unconverged copy of a converged value (a ghost being formed) does not block
                near = np.zeros(p, bool) if not cv.size else \
                    np.min(np.abs(th[:, None] - cv[None, :]), axis=1) <= GHOST_GAP * K.nrm
                c = p if np.all(ok | near) else int(np.argmin(ok | near))
                if c < p or p == m:
                    break
                p = min(m, 2 * p)
            # one Ritz vector per distinct converged value (the best-converged copy)
            idx = np.flatnonzero(ok[:c])
            pick: list[int] = []
            for i in idx:
                if pick and th[i] - th[pick[-1]] <= GHOST_GAP * K.nrm:
                    if est[i] < est[pick[-1]]:
                        pick[-1] = int(i)
                else:
                    pick.append(int(i))
            short = enough is not None and bool(pick) and th[pick[-1]] >= enough
            if (len(pick) >= k or (done and pick) or short) and est[pick[0]] <= tol * K.nrm:
                # (the smallest value's copy meets the strict rule: with tol_rest = tol, always)
                S = Sp[:, pick[:k + 2]]  # two more when converged: the merged span is wider
                need = k if len(pick) >= k or not short else len(pick)
                break
        if done:
            break
    if S is None:
        return None
    m, keep = S.shape
    X = np.zeros((n, keep))
    block = 16  # Lanczos vectors gathered and added to X by one product
    # one vector per row (contiguous copies; a column of an (n, block) array is a strided
    # write of n values: 12 ms at a million rows against 0.7 ms)
    buf = np.empty((block, n))
    part = np.empty_like(X)  # one block's sum, reused (a fresh n x keep array per block faulted)
    for j, v in K.vectors(m):  # summing the Ritz vectors
        buf[j % block] = v
        if j % block == block - 1 or j == m - 1:
            j0 = j - j % block
            np.matmul(buf[:j - j0 + 1].T, S[j0:j + 1], out=part)
            X += part
    del buf, part
    if not np.all(np.isfinite(X)):
        return None
    gw, gu = np.linalg.eigh(X.T @ X)
    use = gw > 1e-10 * max(float(gw[-1]), 1e-300)
    Q = X @ (gu[:, use] / np.sqrt(gw[use]))
    del X
    Q, _ = np.linalg.qr(Q)
    AQ = np.asarray(K.op.matmat(Q), dtype=float)
    K.products += Q.shape[1]
    R = Q.T @ AQ
    w, Z = np.linalg.eigh((R + R.T) / 2)
    w, Z = w[:k], Z[:, :k]
    Y = Q @ Z
    r = np.linalg.norm(AQ @ Z - Y * w, axis=0)
    if w.size < need or not (r[0] <= 100.0 * tol * K.nrm and np.all(r <= 100.0 * tol_rest * K.nrm)):
        return None
    return w, K.to_points(Y), r, K.products


def _start_vector(n: int, seed: int, start: np.ndarray | None) -> np.ndarray:
    """A random start for Lanczos, or mostly ``start`` (when it is a usable length-``n``
    vector) plus 1e-2 of the random one (Lanczos must still see the rest of the spectrum)."""
    v0 = np.random.default_rng(seed).standard_normal(n)
    if start is not None and np.shape(start) == (n,) and np.all(np.isfinite(start)) \
            and np.linalg.norm(start) > 0:
        x = np.asarray(start, dtype=float)
        v0 = x / np.linalg.norm(x) + 1e-2 * v0 / np.linalg.norm(v0)
    return v0


def _ritz_lower(A: Any, theta: float, x: np.ndarray) -> float:
    """``theta - ||A x - theta x||`` for the unit ``x``: an eigenvalue of the symmetric ``A``
    lies within the residual norm of the Ritz value."""
    x = x / np.linalg.norm(x)
    return theta - float(np.linalg.norm(A @ x - theta * x))


def _norm_estimate(A: Any) -> float:
    """About ``||A||_2``, from above for a sparse matrix (the largest absolute row sum), else
    by ten power steps (a scale for a stopping rule, not a bound)."""
    if sp.issparse(A):
        return float(np.max(np.asarray(abs(A).sum(axis=1)).ravel(), initial=0.0))
    n = A.shape[0]
    x = np.random.default_rng(1).standard_normal(n)
    x /= np.linalg.norm(x)
    est = 0.0
    for _ in range(10):
        y = np.asarray(A @ x).ravel()
        est = float(np.linalg.norm(y))
        if not est > 0 or not math.isfinite(est):
            break
        x = y / est
    return est


def lanczos_bottom(A: Any, k: int, v0: np.ndarray | None = None, ncv: int | None = None,
                   tol: float = LANCZOS_TOL, maxiter: int = LANCZOS_RESTARTS
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest eigenpairs of the symmetric ``A`` (ascending) by ARPACK's Lanczos,
    stopped when each residual is below ``tol * ||A||``: Lanczos runs on ``c I - A`` with
    ``c ~ ||A||`` (largest eigenvalues), whose Ritz values are all about ``c``, so ARPACK's
    rule (residual relative to the Ritz value) becomes one relative to the norm.  Raises
    ARPACK's ``ArpackNoConvergence`` (its eigenpairs mapped back to ``A``) after ``maxiter``
    restarts."""
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, aslinearoperator, eigsh

    n = A.shape[0]
    c = _norm_estimate(A)
    c = c if c > 0 and math.isfinite(c) else 1.0
    op = aslinearoperator(parallel(A))

    def mv(x):
        x = np.asarray(x)
        return c * x - (op.matvec(x) if x.ndim == 1 else op.matmat(x))

    B = LinearOperator((n, n), matvec=mv, matmat=mv, dtype=float)
    ncv = min(n, max(24, 2 * k + 1)) if ncv is None else ncv
    try:
        w, X = eigsh(B, k=k, which="LA", tol=tol, ncv=ncv, maxiter=maxiter, v0=v0)
    except ArpackNoConvergence as exc:
        wb = np.asarray(exc.eigenvalues)
        o = np.argsort(-wb)
        raise ArpackNoConvergence(str(exc), c - wb[o], np.asarray(exc.eigenvectors)[:, o]) from exc
    o = np.argsort(-w)
    return c - w[o], X[:, o]


def _dense_lower(M: np.ndarray) -> float:
    """``eigvalsh``'s smallest eigenvalue minus its round-off bound ``n eps ||M||_1``.

    A backward-stable symmetric eigensolver returns eigenvalues within a few
    ``n eps ||M||`` of the exact ones; without the margin a singular matrix (a
    Laplacian with ``delta = 0``) came out at ``+5e-17`` and passed for positive
    definite, giving a trace bound of 4e17.
    """
    n = M.shape[0]
    if n == 0:
        return math.inf
    lam = float(np.linalg.eigvalsh((M + M.T) / 2)[0])
    norm1 = float(np.max(np.sum(np.abs(M), axis=0))) if n else 0.0
    return lam - n * np.finfo(float).eps * norm1


def _collatz_lower(A: sp.spmatrix, rel: float = 1e-6, maxiter: int = 1000) -> float | None:
    """``min_i (A x)_i / x_i`` for a positive ``x``: a lower bound on ``lambda_min`` of a
    symmetric Z-matrix ``A`` (off-diagonal entries <= 0; e.g. a normalised graph Laplacian,
    where Gershgorin's discs reach below 0), by the Collatz-Wielandt bound on the Perron root
    of ``c I - A``.  ``x = (A + eps I)^{-1} 1`` (conjugate gradients; eps = ``rel`` times the
    largest diagonal entry) is nearly the Perron vector, giving about ``-eps``.  Rigorous for
    any ``x > 0``, however inexact the solve; ``None`` when ``A`` is not a Z-matrix, ``x`` is
    not positive or the bound is below ``-100 eps``.  Linear in nnz per iteration: 0.x s where
    an ``LDL^T`` of a 10-dimensional kNN Laplacian of 100,000 points ran for over 20 minutes."""
    from scipy.sparse.linalg import aslinearoperator, cg

    A = sp.csr_matrix(A)
    n = A.shape[0]
    d = A.diagonal()
    off = A - sp.diags(d)
    if off.nnz and float(off.data.max()) > 0:
        return None
    scale = max(float(np.max(np.abs(d))) if n else 0.0, 1e-300)
    eps = rel * scale
    try:
        x, _ = cg(aslinearoperator(parallel(A + eps * sp.identity(n, format="csr"))), np.ones(n),
                  rtol=1e-6, maxiter=maxiter)
    except (ValueError, ArithmeticError):
        return None
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        return None
    low = float(np.min((A @ x) / x))
    return low if low >= -100 * eps else None


def _inertia_lower(A: sp.spmatrix) -> float | None:
    """``-eps`` when ``A + eps I`` has no negative pivot in a symmetric ``LDL^T`` (sparse LU
    with diagonal pivoting and a symmetric ordering): by Sylvester's law of inertia
    ``lambda_min(A) > -eps``.  ``None`` when the test fails or cannot be run.

    Used where only "about zero or above" matters (a Laplacian in a trace bound that a
    squared loss already makes finite): Lanczos for the bottom of a Laplacian's spectrum
    took over 8 minutes at 20,000 points, this 0.4 s.
    """
    from scipy.sparse.linalg import splu

    n = A.shape[0]
    scale = max(1.0, float(abs(A).max())) if A.nnz else 1.0
    eps = 1e-9 * scale
    try:
        lu = splu((A + eps * sp.identity(n)).tocsc(), permc_spec="MMD_AT_PLUS_A",
                  diag_pivot_thresh=0.0, options=dict(SymmetricMode=True))
    except (RuntimeError, ValueError, MemoryError):
        return None
    if not np.array_equal(lu.perm_r, lu.perm_c):  # not a symmetric elimination: no inertia
        return None
    d = lu.U.diagonal()
    if d.size != n or not np.all(np.isfinite(d)) or np.any(d <= 0):
        return None
    return -eps


#: :func:`_arpack_lowest`'s runs in turn: (residual tolerance relative to ``||A||``, restarts).
#: A cluster at the bottom of the spectrum keeps ARPACK from resolving single eigenvectors to
#: 1e-9: 17 eigenvalues within 3e-6 on a spectrum of width 1.9 (2,000 rows) converged 0 of 4
#: pairs in 100 restarts at 1e-9, 1e-8 or 1e-7 with 24 or 96 vectors, and 4 of 4 at 1e-6 in
#: 100 restarts with 24 (0.2 s); widening the basis instead (24, 96, 384 vectors, 1,000
#: restarts each) took 23 s there and made admm on 3,000-5,000 pendigits points 2.6-10 times
#: slower (NPKL-square on 3,000: 465 s with the widening, 113 s with these runs; on 5,000:
#: 2,223 s, 214 s).  A vector in the cluster's span has a residual of at most the cluster's width, so a
#: looser tolerance finds such directions at once; only the first run's pairs are accurate
#: enough for a bound (see :func:`_arpack_lowest`).
ARPACK_RUNS = ((LANCZOS_TOL, 150), (1e-7, 60), (1e-6, 60), (1e-5, 60))


def _arpack_lowest(A: Any, j: int, v0: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """The ``j`` smallest eigenpairs of ``A`` by ARPACK (:func:`lanczos_bottom`):
    ``(w, X, converged)``.  The runs of :data:`ARPACK_RUNS` in turn, each with few restarts
    (fail fast), the first one to converge all ``j`` pairs answers.  ``converged`` is True only
    for the first run (residuals at most :data:`LANCZOS_TOL` ``||A||``): the caller then bounds
    ``lambda_min`` by the Ritz value minus its residual (:func:`_ritz_lower`).  A looser run's
    pairs are escape directions only: Ritz pairs of negative curvature in a clustered bottom,
    not single eigenpairs (a residual of 2e-6 times a trace bound of 8.5e4 would move a bound
    by 2e-4 of an objective of 850), so ``converged`` is False and the caller takes
    ``lambda_min`` from :meth:`_Space.min_eig` as when no run converges (then the pairs ARPACK
    did converge, possibly none).  Never a value that was not computed."""
    from scipy.sparse.linalg import ArpackNoConvergence

    k = A.shape[0]
    w, X = np.zeros(0), np.zeros((k, 0))
    ncv = min(k, max(24, 2 * j + 1))
    for i, (tol, restarts) in enumerate(ARPACK_RUNS):
        try:
            w, X = lanczos_bottom(A, j, v0=v0, ncv=ncv, tol=tol, maxiter=restarts)
            return np.asarray(w), np.asarray(X), i == 0
        except ArpackNoConvergence as exc:
            if np.size(exc.eigenvalues) > np.size(w):
                w, X = np.asarray(exc.eigenvalues), np.asarray(exc.eigenvectors).reshape(k, -1)
    return w, X, False
