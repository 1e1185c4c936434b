"""Memory models shared by the hand-written solvers' ``estimate_memory``.

A factored solver's peak is its own O((n + m) r) working set plus what it calls at its
largest step: the Lagrangian certificate of the rank growth
(:func:`kernelforms.certificate.escape`: a dense eigensolver below
``certificate.DENSE_BELOW`` rows, Lanczos above), a dense duality-gap check (bcd), or the
subspace step (admm's ``polish``, a small cone program through CVXPY).  Each term below was
fitted to tracemalloc peaks on digits P1 (n = 100 ... 1,797) and rounded up.
"""

from __future__ import annotations

#: bytes of one float64
F = 8
#: Python, CVXPY and Clarabel objects of one subspace step, whatever its size (5.8 MiB
#: measured at 100 points)
RITZ_FIXED = 8 * 2**20


def dense_eig_bytes(n: int) -> int:
    """A dense symmetric eigensolve of an ``n x n`` sparse matrix: the dense copy, LAPACK's
    own copy and the eigenvectors (5.8 MiB measured at n = 499: 3.05 x 8 n^2)."""
    return int(4 * F * n * n)


def lanczos_bytes(n: int, vectors: int = 128) -> int:
    """A Lanczos (ARPACK) run: its basis and work vectors (1.15 MiB measured at 1,500
    points: about 100 vectors of n)."""
    return int(F * n * vectors)


#: steps of the certificate's plain Lanczos runs at 100,000 points (two-Gaussian kNN
#: Laplacians with pairs: 120-230 measured), and their growth with n (about 480 at a million)
PLAIN_STEPS_1E5 = 250
PLAIN_STEPS_EXPONENT = 0.45


def plain_lanczos_bytes(n: int) -> int:
    """The Lanczos vectors the certificate's plain recurrence keeps in memory
    (:class:`kernelforms.certificate.eigen.Krylov`, from ``PLAIN_LANCZOS_ABOVE`` rows): one
    vector of ``n`` per step, at most ``LANCZOS_KEEP_BYTES`` (2 GiB, reached from about
    150,000 points: the rank growth lets its runs keep more only where ``max_memory`` leaves
    room beside this estimate, :func:`kernelforms.certificate.keep_budget`).  The steps are
    those measured on kNN Laplacians (:data:`PLAIN_STEPS_1E5` at 100,000 points, times
    ``(n / 1e5)^0.45``); a clustered spectrum takes more, up to the same cap."""
    from ..certificate import LANCZOS_KEEP_BYTES, PLAIN_LANCZOS_ABOVE

    if n < PLAIN_LANCZOS_ABOVE:
        return 0
    steps = PLAIN_STEPS_1E5 * (n / 1e5) ** PLAIN_STEPS_EXPONENT
    return int(min(float(LANCZOS_KEEP_BYTES), F * n * steps))


def certificate_bytes(n: int, rows: int) -> int:
    """:func:`kernelforms.certificate.escape` (and :func:`~kernelforms.certificate.certify`'s
    diagonal shift) over ``n`` points and ``rows`` loss and constraint rows: the eigensolver
    (dense below ``DENSE_BELOW`` rows, else ARPACK's basis and the plain recurrence's kept
    vectors; ARPACK's basis below ``PLAIN_LANCZOS_ABOVE`` rows), the gradient operator and
    the point's row and point arrays (tracemalloc: 178 MiB at 100,000 two-Gaussian points,
    129 MiB of it the kept Lanczos vectors).  The
    dense fallback of a Lanczos run that does not converge, up to ``DENSE_FALLBACK`` rows,
    is not counted: it is the exception."""
    from ..certificate import DENSE_BELOW, PLAIN_LANCZOS_ABOVE

    if n < DENSE_BELOW:
        eig = dense_eig_bytes(n)
    else:
        eig = lanczos_bytes(n) if n < PLAIN_LANCZOS_ABOVE else plain_lanczos_bytes(n)
    return int(eig + 16 * F * rows + 24 * F * n)


def ritz_bytes(n: int, rows: int, s: int, chunk: int) -> int:
    """admm's subspace step over ``s`` columns: the Hessian's assembly, ``chunk`` rows at a
    time of ``s^2`` functionals (12 s^2 bytes per row measured: 23 MiB at 3,300 rows, s = 24),
    the basis and the gradient directions (``4 s`` columns of n), and the cone program."""
    return int(RITZ_FIXED + 12 * s * s * min(rows, chunk) + 4 * F * n * s)
