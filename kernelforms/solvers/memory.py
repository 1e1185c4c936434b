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


def certificate_bytes(n: int, rows: int) -> int:
    """:func:`kernelforms.certificate.escape` over ``n`` points and ``rows`` loss and
    constraint rows (the dense fallback of a Lanczos run that does not converge, up to
    ``certificate.DENSE_FALLBACK`` rows, is not counted: it is the exception)."""
    from ..certificate import DENSE_BELOW

    eig = dense_eig_bytes(n) if n < DENSE_BELOW else lanczos_bytes(n)
    return int(eig + 6 * F * rows + 4 * F * n)


def ritz_bytes(n: int, rows: int, s: int, chunk: int) -> int:
    """admm's subspace step over ``s`` columns: the Hessian's assembly, ``chunk`` rows at a
    time of ``s^2`` functionals (12 s^2 bytes per row measured: 23 MiB at 3,300 rows, s = 24),
    the basis and the gradient directions (``4 s`` columns of n), and the cone program."""
    return int(RITZ_FIXED + 12 * s * s * min(rows, chunk) + 4 * F * n * s)
