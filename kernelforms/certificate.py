"""Optimality certificates for factorised results, without an SDP solve.

One Lagrangian bound, built from the problem's declaration (``problem.declaration``, the
vocabulary of :mod:`kernelforms.model`).  Write the problem as a minimisation (a
maximisation is ``min -f``) of ``F(K) = <C, K> + sum_k w_k sum_p l_k(A_k(K)_p)`` over the
kernel's form, subject to ``A(K) {<=, ==, >=} b``.  At a point ``K = V V^T``:

* each loss row gets a slope ``u_p`` (its gradient; at a kink, where the loss's
  ``subdifferential`` is an interval (the hinge's), a multiplier fitted in it), and ``l(z) >= u z - l*(u)`` for every ``z`` (Fenchel);
* each constraint row gets a multiplier ``y_p`` of the right sign (``>= 0`` for ``<=``,
  ``<= 0`` for ``>=``, free for ``==``; zero on inactive rows), fitted to the point by
  least squares on stationarity ``H V = 0``;

so for every feasible ``K'`` in the form ``F(K') >= c + <H, K'>`` with
``H = C + sum_k A_k*(w_k u_k) + A*(y)`` and ``c = -sum_k w_k sum_p l*(u_p) - y.b``, and

    F(K*) >= c + min(0, lambda_min(H on the form)) * tau,     tau >= tr(K*).

``lambda_min`` is over the form: ``B^T H B`` for ``K = B Y B^T`` (and ``V0^T H V0`` for a
range), on the centred subspace when the declaration has ``1^T K 1 = 0``, on the merged
points when equality rows force ``v_i = v_j`` (hard must-links).  ``tau`` is derived from
the declaration (docs/certificate.md lists the rules): diagonal or trace upper bounds,
squared losses on the diagonal or on distances, a positive definite linear term, distance
bounds on a connected graph with centring, or ``F = -tr(K)`` alone (then the bound holds
implicitly, MVU).  A divergence (Bregman, P7) is handled by its Lagrange dual function in
closed form instead, with no trace bound.  When no bound is justified, :func:`applies` and
:func:`certify` say why (:class:`~kernelforms.errors.NotApplicable`).

``lambda_min`` comes from Lanczos (:func:`scipy.sparse.linalg.eigsh`) above
:data:`DENSE_BELOW` rows, and nothing ``n x n`` is ever dense at large ``n``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._parallel import parallel
from .result import LowRank

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
#: in :func:`lanczos_lowest`, Ritz values this close (relative to ``||A||``) are copies of one
#: eigenvalue (the plain recurrence repeats converged ones; an unconverged copy of a 1,500-row
#: matrix's converged eigenvalue was 1.2e-7 from it with a residual estimate of 2e-4)
GHOST_GAP = 1e-6
#: rows within this distance of a loss's kink (Loss.subdifferential's tol) get fitted slopes; inequality rows
#: with a slack above this (relative to max(1, |b|)) are inactive (multiplier 0)
KINK_TOL = 1e-4
#: a divergence's dual function is maximised over the multipliers by L-BFGS-B for at most this
#: many iterations and about this many seconds (near a face of the PSD cone it is
#: ill-conditioned: a von Neumann instance with W's two smallest eigenvalues 2e-15 and 3e-7
#: needed about 1,000 iterations, 0.3 s, to close the gap to 1e-10)
DUAL_MAX_ITER = 5000
DUAL_SECONDS = 5.0
#: at most this many L-BFGS-B runs, each rescaled by the value the last one reached
DUAL_ROUNDS = 5


@dataclass
class Certificate:
    """A bound on the optimum of a convex problem, from one point.

    Attributes
    ----------
    objective : float
        ``f`` at the certified point (the problem's own objective, in its own sense).
    lower_bound : float
        Minimisation problems: ``f(K*) >= lower_bound`` for the optimum ``K*``.
        Maximisation problems (MVU, RegMVU): ``nan``; the bound is ``upper_bound``.
    gap, relative_gap : float
        How far the point can be from the optimum: ``objective - lower_bound``
        (``upper_bound - objective`` for a maximisation), and the same divided by
        ``max(|objective|, |bound|, 1e-12)`` (:func:`relative`).  Negative only for an
        infeasible point that beats the optimum (see ``violation``).
    violation : float
        The point's largest constraint violation (``problem.violation``); the bound holds
        regardless, but ``objective`` is only attained by a feasible kernel.
    min_eig : float
        Smallest eigenvalue of the minorant's matrix ``H`` over the form (a lower estimate,
        see ``eig_method``); for a divergence, of the dual's ``I + S`` (Burg) or ``nan``.
    inner : float
        ``<H, K>`` at the point.
    trace_bound : float
        The bound ``tau >= tr(K*)`` used (``nan`` when none was needed).
    eig_method : str
        ``"dense"`` or ``"lanczos"``.
    note : str
        How the minorant and the trace bound were obtained.
    """

    objective: float
    lower_bound: float
    gap: float
    relative_gap: float
    min_eig: float
    inner: float
    trace_bound: float
    eig_method: str
    note: str = ""
    sense: str = "min"
    upper_bound: float = math.nan
    violation: float = 0.0

    @property
    def bound(self) -> float:
        """The certified bound on the optimum: lower for ``sense == "min"``, upper for ``"max"``."""
        return self.upper_bound if self.sense == "max" else self.lower_bound

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ====================================================================== eigenvalues
def min_eigenvalue(A: Any, dense_below: int = DENSE_BELOW, seed: int = 0,
                   start: np.ndarray | None = None) -> tuple[float, str]:
    """A lower estimate of the smallest eigenvalue of the symmetric matrix ``A``.

    Dense ``eigvalsh`` below ``dense_below`` rows; above, Lanczos (:func:`lanczos_bottom`)
    and the Ritz value minus its residual norm ``||A x - theta x||`` (an eigenvalue of A lies
    within that distance of theta, :func:`_ritz_lower`).  ``start``: a guess of the bottom
    eigenvector; Lanczos then starts from it plus 1e-2 of a random vector (it must still see
    the rest of the spectrum).
    """
    n = A.shape[0]
    if n <= dense_below:
        M = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=float)
        return _dense_lower(M), "dense"
    from scipy.sparse.linalg import ArpackNoConvergence

    v0 = _start_vector(n, seed, start)
    if n >= PLAIN_LANCZOS_ABOVE:
        found = lanczos_min(A, v0)
        if found is not None:
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


def _plain_start(A: Any, v0: np.ndarray, max_steps: int | None):
    """What both plain-Lanczos routines start from: the operator (products on several
    cores), ``||A||``'s estimate (1 when it is not usable), the step cap and the unit start."""
    from scipy.sparse.linalg import aslinearoperator

    nrm = _norm_estimate(A)
    nrm = nrm if nrm > 0 and math.isfinite(nrm) else 1.0
    steps = PLAIN_LANCZOS_STEPS if max_steps is None else int(max_steps)
    v0 = np.asarray(v0, dtype=float)
    return aslinearoperator(parallel(A)), nrm, steps, v0 / np.linalg.norm(v0)


def _plain_step(op: Any, v: np.ndarray, v_prev: np.ndarray, b: float
                ) -> tuple[np.ndarray, float, float]:
    """One step of the three-term recurrence: ``(w, alpha_j, beta_j)``, ``w`` not yet
    divided by ``beta_j``."""
    w = np.array(op.matvec(v), dtype=float).ravel()  # a copy: updated in place below
    w -= b * v_prev
    a = float(w @ v)
    w -= a * v
    return w, a, float(np.linalg.norm(w))


def _plain_vectors(op: Any, v0: np.ndarray, alpha: list[float], beta: list[float], m: int):
    """The second pass: the first ``m`` Lanczos vectors again, from the stored coefficients
    (the same recurrence, so the same vectors up to rounding)."""
    v_prev, v, b = np.zeros(len(v0)), v0, 0.0
    for j in range(m):
        yield j, v
        if j == m - 1:
            return
        w = np.array(op.matvec(v), dtype=float).ravel()
        w -= b * v_prev
        w -= alpha[j] * v
        b = beta[j]
        v_prev, v = v, w / b


def lanczos_min(A: Any, v0: np.ndarray, tol: float = LANCZOS_TOL,
                max_steps: int | None = None, check: int = 10) -> tuple[float, float, int] | None:
    """The smallest Ritz value of the symmetric ``A``, its residual norm and the number of
    products, by the plain Lanczos recurrence from ``v0`` (no reorthogonalisation), or None
    when it has not converged within ``max_steps`` (default :data:`PLAIN_LANCZOS_STEPS`).

    Every ``check`` steps the tridiagonal's smallest eigenpair ``(theta, s)`` gives the
    residual estimate ``beta_j |s_j|``; at ``tol * ||A||`` (the rule of :func:`lanczos_bottom`)
    a second pass repeats the recurrence (the same coefficients) to form the Ritz vector, and
    its residual ``||A x - theta x||`` is computed, not estimated: an eigenvalue of ``A`` lies
    within it of ``theta`` whatever the loss of orthogonality did (Paige 1980: the extreme Ritz
    values converge regardless; lost orthogonality only repeats them).  Twice the products of
    one pass, but no basis to store or orthogonalise against: a million-row sparse matrix's
    smallest eigenvalue took 960 products, 35 s, where ARPACK took 78 s."""
    from scipy.linalg import eigh_tridiagonal

    n = A.shape[0]
    op, nrm, steps, v0 = _plain_start(A, v0, max_steps)
    alpha: list[float] = []
    beta: list[float] = []
    v_prev, v, b = np.zeros(n), v0, 0.0
    theta, svec = math.nan, None
    for j in range(steps):
        w, a, b = _plain_step(op, v, v_prev, b)
        alpha.append(a)
        beta.append(b)
        if not (math.isfinite(a) and math.isfinite(b)):
            return None
        done = b <= 1e-14 * nrm  # an invariant subspace: the Ritz values are eigenvalues
        if done or (j + 1) % check == 0:
            th, S = eigh_tridiagonal(np.array(alpha), np.array(beta[:-1]), select="i",
                                     select_range=(0, 0))
            if done or abs(b * S[-1, 0]) <= tol * nrm:
                theta, svec = float(th[0]), S[:, 0]
                break
        v_prev, v = v, w / b
    if svec is None:
        return None
    m = len(svec)
    x = np.zeros(n)
    for j, v in _plain_vectors(op, v0, alpha, beta, m):  # summing the Ritz vector
        x += svec[j] * v
    nx = float(np.linalg.norm(x))
    if not nx > 0 or not math.isfinite(nx):
        return None
    x /= nx
    r = float(np.linalg.norm(np.asarray(op.matvec(x), dtype=float).ravel() - theta * x))
    if not r <= 100.0 * tol * nrm:  # the estimate was wrong (or not finite): ARPACK decides
        return None
    return theta, r, 2 * m


def lanczos_lowest(A: Any, k: int, v0: np.ndarray, tol: float = LANCZOS_TOL,
                   max_steps: int | None = None, check: int = 10
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """The ``k`` smallest eigenpairs of the symmetric ``A`` by the plain Lanczos recurrence
    from ``v0`` (no reorthogonalisation, as :func:`lanczos_min`): ``(w, X, r, products)``,
    ascending values, unit vectors and the **computed** residual norms
    ``||A x_i - w_i x_i||``; None when it has not converged within ``max_steps`` (default
    :data:`PLAIN_LANCZOS_STEPS`) or a residual exceeds 100 times the rule.

    Without reorthogonalisation a converged eigenvalue reappears as further Ritz values of
    the tridiagonal (Paige's "ghosts"), first unconverged and then converged: Ritz values
    within :data:`GHOST_GAP` ``* ||A||`` of each other count as one eigenvalue.  The first
    pass runs until the converged Ritz values (residual estimate ``beta_j |s_ji|`` at most
    ``tol * ||A||``) below the first unconverged one that is not such a copy take ``k``
    distinct values.  The second pass repeats the recurrence and sums one Ritz vector per
    value (the best-converged copy; ``k + 2`` when there are that many); a Rayleigh-Ritz step
    on their span (orthonormalised, dropping directions of its Gram matrix below ``1e-10`` of
    the largest) gives the pairs, whose residuals are then computed from one block product.
    An eigenvalue within the ghost gap of a converged one can be missed (as by any
    single-vector Lanczos): the pairs are directions, and a bound built on them is checked
    by its own eigenvalue run."""
    from scipy.linalg import eigh_tridiagonal

    n = A.shape[0]
    k = max(1, min(int(k), n))
    op, nrm, steps, v0 = _plain_start(A, v0, max_steps)
    alpha: list[float] = []
    beta: list[float] = []
    v_prev, v, b = np.zeros(n), v0, 0.0
    S = None
    for j in range(steps):
        w, a, b = _plain_step(op, v, v_prev, b)
        alpha.append(a)
        beta.append(b)
        if not (math.isfinite(a) and math.isfinite(b)):
            return None
        done = b <= 1e-14 * nrm  # an invariant subspace: the Ritz values are eigenvalues
        if done or (j + 1 >= k and (j + 1) % check == 0):
            m = j + 1
            p = min(m, 4 * k + 8)
            while True:  # the Ritz values below the first unconverged one that is not a ghost
                th, Sp = eigh_tridiagonal(np.array(alpha), np.array(beta[:-1]), select="i",
                                          select_range=(0, p - 1))
                est = np.abs(b * Sp[-1]) if not done else np.zeros(p)
                ok = est <= tol * nrm
                cv = th[ok]
                # an unconverged copy of a converged value (a ghost being formed) does not block
                near = np.zeros(p, bool) if not cv.size else \
                    np.min(np.abs(th[:, None] - cv[None, :]), axis=1) <= GHOST_GAP * nrm
                c = p if np.all(ok | near) else int(np.argmin(ok | near))
                if c < p or p == m:
                    break
                p = min(m, 2 * p)
            # one Ritz vector per distinct converged value (the best-converged copy)
            idx = np.flatnonzero(ok[:c])
            pick: list[int] = []
            for i in idx:
                if pick and th[i] - th[pick[-1]] <= GHOST_GAP * nrm:
                    if est[i] < est[pick[-1]]:
                        pick[-1] = int(i)
                else:
                    pick.append(int(i))
            if len(pick) >= k or (done and pick):
                S = Sp[:, pick[:k + 2]]  # two more when converged: the merged span is wider
                break
        v_prev, v = v, w / b
    if S is None:
        return None
    m, keep = S.shape
    X = np.zeros((n, keep))
    block = 16  # Lanczos vectors gathered and added to X by one product
    buf = np.empty((n, block))
    for j, v in _plain_vectors(op, v0, alpha, beta, m):  # summing the Ritz vectors
        buf[:, j % block] = v
        if j % block == block - 1 or j == m - 1:
            j0 = j - j % block
            X += buf[:, :j - j0 + 1] @ S[j0:j + 1]
    del buf
    if not np.all(np.isfinite(X)):
        return None
    gw, gu = np.linalg.eigh(X.T @ X)
    use = gw > 1e-10 * max(float(gw[-1]), 1e-300)
    Q = X @ (gu[:, use] / np.sqrt(gw[use]))
    del X
    Q, _ = np.linalg.qr(Q)
    AQ = np.asarray(op.matmat(Q), dtype=float)
    R = Q.T @ AQ
    w, Z = np.linalg.eigh((R + R.T) / 2)
    w, Z = w[:k], Z[:, :k]
    Y = Q @ Z
    r = np.linalg.norm(AQ @ Z - Y * w, axis=0)
    if w.size < k or not np.all(r <= 100.0 * tol * nrm):
        return None
    return w, Y, r, 2 * m - 1 + Q.shape[1]


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


def relative(gap: float, objective: float, bound: float) -> float:
    """``gap / max(|objective|, |bound|, 1e-12)`` (the finite bound only).

    Dividing by ``|objective|`` alone blows up when the objective is near 0 and is
    meaningless when the objective and the bound have opposite signs.
    """
    den = max(abs(objective), abs(bound) if math.isfinite(bound) else 0.0, 1e-12)
    return gap / den if math.isfinite(gap) else math.inf


def _no_cert(msg: str):
    from .errors import NotApplicable

    return NotApplicable(msg)


# ====================================================================== the form
class _Space:
    """Where the certified kernel lives: ``K = B Z B^T`` with ``Z`` PSD (``B`` orthonormal:
    the identity for the PSD form, the basis for ``Basis`` / ``Range``, merged-point
    indicators when equality rows force ``v_i = v_j``), on the centred subspace when
    ``1^T K 1 = 0`` is declared."""

    def __init__(self, n: int, basis: np.ndarray | None, merge: sp.csr_matrix | None,
                 centred: bool) -> None:
        self.n = n
        self.basis = basis
        self.merge = merge
        self.centred = centred
        if basis is not None:
            self.k = basis.shape[1]
            u = basis.sum(axis=0)
        elif merge is not None:
            self.k = merge.shape[1]
            u = np.asarray(merge.sum(axis=0)).ravel()
        else:
            self.k = n
            u = np.ones(n)
        nu = float(np.linalg.norm(u))
        # the centring direction in Z's coordinates (None: the form is centred already)
        self.u = u / nu if centred and nu > 1e-12 * math.sqrt(n) else None

    @property
    def plain(self) -> bool:
        return self.basis is None and self.merge is None

    def coords(self, V: np.ndarray) -> np.ndarray:
        """``F`` with ``B F`` the projection of ``V`` onto the form (centred)."""
        if self.basis is not None:
            F = self.basis.T @ V
        elif self.merge is not None:
            F = np.asarray(self.merge.T @ V)
        else:
            F = V
        if self.u is not None:
            if self.plain:
                F = F - F.mean(axis=0, keepdims=True)
            else:
                F = F - np.outer(self.u, self.u @ F)
        return F

    def lift(self, F: np.ndarray) -> np.ndarray:
        if self.basis is not None:
            return self.basis @ F
        if self.merge is not None:
            return np.asarray(self.merge @ F)
        return F

    def restrict_rows(self, M: np.ndarray) -> np.ndarray:
        """``B^T M`` for an ``(n, r)`` array."""
        if self.basis is not None:
            return self.basis.T @ M
        if self.merge is not None:
            return np.asarray(self.merge.T @ M)
        return M

    def restrict_columns(self, A: Any, r: int) -> Any:
        """Each column ``vec(M)`` (row-major ``(n, r)``) of ``A`` to ``vec(B^T M)``."""
        if self.plain:
            return A
        Bt = self.basis.T if self.basis is not None else self.merge.T.tocsr()
        if sp.issparse(Bt):
            return (sp.kron(Bt, sp.identity(r), format="csr") @ A).tocsr() if sp.issparse(A) \
                else sp.kron(Bt, sp.identity(r), format="csr") @ A
        A = A.toarray() if sp.issparse(A) else A
        m = A.shape[1]
        return np.einsum("kn,nrm->krm", Bt, A.reshape(self.n, r, m)).reshape(self.k * r, m)

    def operator(self, H: Any) -> Any:
        """``B^T H B``: a sparse matrix (PSD / merged forms), a dense one (a basis) or a
        SymOperator (a dense part)."""
        from .model import SymOperator

        if self.basis is not None:
            M = self.basis.T @ H.matmat(self.basis)
            return (M + M.T) / 2
        if self.merge is None:
            return H.sparse if H.is_sparse else H
        B = self.merge
        S = (B.T @ H.sparse @ B).tocsr()
        if H.is_sparse:
            return S
        return SymOperator(self.k, S, np.asarray(B.T @ H.U), H.c)

    def min_eig(self, H: Any, dense_below: int,
                start: np.ndarray | None = None) -> tuple[float, str]:
        """A lower estimate of ``lambda_min(B^T H B)`` on the centred subspace (Lanczos started
        from ``start``, a point-space vector, on the plain form)."""
        if not self.plain:
            start = None
        from .model import SymOperator

        M = self.operator(H)
        k = self.k
        if self.u is None:
            if isinstance(M, SymOperator):
                if k <= dense_below:
                    return min_eigenvalue(M.dense(), dense_below)
                return min_eigenvalue(M.linear_operator(), dense_below, start=start)
            return min_eigenvalue(M, dense_below, start=start)
        # the centring direction is outside the feasible set's range: lift it above the
        # spectrum (Gershgorin) and take lambda_min on the rest
        lift = _gershgorin_lift(M)
        u = self.u
        if k <= dense_below:
            D = M.dense() if isinstance(M, SymOperator) else (M.toarray() if sp.issparse(M) else M)
            if self.plain:
                A = D + (lift / k) * np.ones((k, k))
            else:
                A = D + lift * np.outer(u, u)
            return min_eigenvalue(A, dense_below)
        from scipy.sparse.linalg import LinearOperator

        PM = parallel(M)

        def mv(x):
            x = np.asarray(x).reshape(k, -1)
            return PM @ x + lift * np.outer(u, u @ x)

        return min_eigenvalue(LinearOperator((k, k), matvec=mv, matmat=mv, dtype=float), dense_below,
                              start=start)

    def lowest(self, H: Any, j: int, dense_below: int, seed: int = 0,
               start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``j`` smallest eigenvalues of ``B^T H B`` on the centred subspace and their unit
        eigenvectors lifted to the points (``B x``, an ``(n, j)`` array): Burer-Monteiro's
        escape directions.  Dense below ``dense_below`` rows, else Lanczos (started from
        ``start``, a point-space vector, when given: the previous step's directions): the
        plain recurrence (:func:`lanczos_lowest`) from :data:`PLAIN_LANCZOS_ABOVE` rows,
        ARPACK below that or when it does not converge."""
        w, Y, _ = self.lowest_with_bound(H, j, dense_below, seed, start)
        return w, Y

    def lowest_with_bound(self, H: Any, j: int, dense_below: int, seed: int = 0,
                          start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float | None]:
        """:meth:`lowest` and, from the same Lanczos run, the lower estimate of ``lambda_min``
        that :meth:`min_eig` gives (the Ritz value minus its residual norm); None for that
        estimate when the matrix is small enough for :meth:`min_eig`'s dense path or Lanczos
        did not converge (then :meth:`min_eig` decides)."""
        from .model import SymOperator

        M = self.operator(H)
        k = self.k
        j = max(1, min(int(j), k - 1 if self.u is not None else k))
        u = self.u
        lift = _gershgorin_lift(M) if u is not None else 0.0
        low = None
        if k <= dense_below:
            D = M.dense() if isinstance(M, SymOperator) else (M.toarray() if sp.issparse(M) else np.asarray(M))
            if u is not None:
                D = D + lift * np.outer(u, u)
            w, X = np.linalg.eigh((D + D.T) / 2)
            w, X = w[:j], X[:, :j]
        else:
            from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator

            op = M.linear_operator() if isinstance(M, SymOperator) else parallel(M)

            def mv(x):
                x = np.asarray(x).reshape(k, -1)
                y = op @ x
                return y + lift * np.outer(u, u @ x) if u is not None else y

            A = LinearOperator((k, k), matvec=mv, matmat=mv, dtype=float)
            # mostly the previous directions, a little of every other one
            v0 = _start_vector(k, seed, start if self.plain else None)
            found = lanczos_lowest(A, j, v0) if k >= PLAIN_LANCZOS_ABOVE else None
            if found is not None:  # residuals computed: the first one bounds lambda_min
                w, X, r, _ = found
                low = float(w[0] - r[0])
            else:
                w, X, converged = _arpack_lowest(A, j, v0)
                order = np.argsort(w)
                w, X = np.asarray(w)[order], np.asarray(X)[:, order]
                if converged and w.size:
                    low = _ritz_lower(A, float(w[0]), X[:, 0])
        Y = self.lift(X)
        nrm = np.linalg.norm(Y, axis=0)
        nrm[nrm == 0] = 1.0
        return np.asarray(w, dtype=float), Y / nrm, low

    def near_zero_lower(self, H: Any, dense_below: int) -> tuple[float, str]:
        """A lower estimate of ``lambda_min`` that may be loose (down to ``-1e-9 ||H||``) when the
        true value is about 0 or above; cheap at large ``n`` (Gershgorin, then inertia)."""
        M = self.operator(H)
        if self.basis is not None or self.k <= dense_below or not sp.issparse(M):
            return self.min_eig(H, dense_below)
        d = M.diagonal()
        off = np.asarray(abs(M).sum(axis=1)).ravel() - np.abs(d)
        g = float(np.min(d - off))
        # Gershgorin's bound is rigorous; a Laplacian's rows sum to 0 only to round-off, so
        # accept it down to the inertia test's own looseness (an LDL^T of a 10-dimensional
        # kNN Laplacian at 100,000 points did not finish in 20 minutes)
        if g >= -1e-9 * max(1.0, float(np.max(np.abs(d)))):
            return g, "Gershgorin"
        # eps = 1e-6 of the diagonal first; a graph whose conditioning CG cannot reach in 200
        # steps (a million 3-d points: 3,000 steps, 64 s) gets eps = 1e-3, a bound near
        # -5e-4 in 4 s, which loosens the trace bound it feeds by about P |bound| / (w mu^2)
        for rel, steps in ((1e-6, 200), (1e-3, 600)):
            low = _collatz_lower(M, rel, steps)
            if low is not None:
                return low, "Collatz-Wielandt (Z-matrix)"
        low = _inertia_lower(M)
        if low is not None:
            return low, "inertia (LDL^T)"
        return self.min_eig(H, dense_below)


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


def _gershgorin_lift(M: Any) -> float:
    """A shift above the spectrum of ``M`` (Gershgorin): added along the centring direction,
    it moves that direction out of the way of ``lambda_min``."""
    from .model import SymOperator

    if isinstance(M, SymOperator):
        row = np.asarray(abs(M.sparse).sum(axis=1)).ravel()
        Uc = np.abs(M.U) * np.abs(M.c)
        row = row + Uc @ np.abs(M.U).sum(axis=0)
    elif sp.issparse(M):
        row = np.asarray(abs(M).sum(axis=1)).ravel()
    else:
        row = np.abs(M).sum(axis=1)
    return 2.0 + 2.0 * float(row.max())


# ====================================================================== reading the declaration
@dataclass
class _Term:
    map: Any
    loss: Any
    w: float  # weight in the minimisation (> 0)


@dataclass
class _Rows:
    map: Any
    sense: np.ndarray
    bound: np.ndarray


@dataclass
class _View:
    """What the certificate needs from a declaration (see :func:`_match`)."""

    decl: Any
    n: int
    sign: float
    space: _Space
    C: Any                      # SymOperator: the linear terms in the minimisation's sign
    terms: list[_Term]
    rows: list[_Rows]           # constraint blocks that carry multipliers
    kappa: float = 0.0          # F = -kappa tr(K) alone (the bound holds implicitly)
    divergence: Any = None

    @property
    def n_rows(self) -> int:
        return sum(b.map.size for b in self.rows)


def _scaled(op: Any, a: float) -> Any:
    from .model import SymOperator

    return SymOperator(op.n, (op.sparse * a).tocsr(), op.U, op.c * a)


def _pairmap(m: Any) -> bool:
    from .model import PairMap

    return isinstance(m, PairMap)


def _is_total_sum(m: Any) -> bool:
    """``1^T K 1`` (its adjoint is ``w 1 1^T``)."""
    if m.size != 1 or _pairmap(m):
        return False
    op = m.adjoint_op(1.0)
    return (not op.is_sparse and op.sparse.nnz == 0 and op.U.shape[1] == 1
            and np.allclose(op.U[:, 0], op.U[0, 0]) and op.U[0, 0] != 0 and op.c[0] > 0)


def _is_trace(m: Any) -> bool:
    """``tr(K)`` (its adjoint is ``w I``)."""
    if m.size != 1 or _pairmap(m):
        return False
    op = m.adjoint_op(1.0)
    return op.is_sparse and abs(op.sparse - sp.identity(m.n)).sum() == 0


def _merge_basis(decl: Any) -> sp.csr_matrix | None:
    """Orthonormal indicators of the points that equality rows force equal, or None.

    ``K_ii = K_jj = K_ij = a`` (hard must-links) force ``v_i = v_j`` for every PSD
    ``K = V V^T`` (:func:`kernelforms.model.reductions.point_groups`).  The feasible set
    then has no strictly feasible point, but it lives in the span of the merged points'
    indicators, where it has one (Hu & Kwok 2013's collapsing).
    """
    from .model.reductions import point_groups

    labels = point_groups(decl)
    if labels is None:
        return None
    n, size = decl.n, np.bincount(labels).astype(float)
    return sp.csr_matrix((1.0 / np.sqrt(size[labels]), (np.arange(n), labels)),
                         shape=(n, len(size)))


def _match(decl: Any) -> "_View | str":
    """The certificate's view of a declaration, or the reason it has no certificate."""
    from .model import Basis, Range, SymOperator, sym_sum

    n, sign = decl.n, decl.sign
    form = decl.form
    if decl.divergence is not None:
        if decl.linear or decl.losses:
            return (f"the dual bound covers a divergence with constraints only; this declaration "
                    f"also has {len(decl.linear)} linear and {len(decl.losses)} loss terms")
        if not isinstance(form, Range):
            return "a divergence needs the Range form"
        rows = [_Rows(c.map, np.asarray(c.sense), np.asarray(c.bound, dtype=float))
                for c in decl.constraints]
        return _View(decl, n, sign, _Space(n, form.V0, None, False), SymOperator.zero(n), [], rows,
                     divergence=decl.divergence)
    basis = None
    if isinstance(form, Basis):
        B = np.asarray(form.B, dtype=float)
        if not form.orthonormal:
            Q, R = np.linalg.qr(B)
            dr = np.abs(np.diag(R))
            if dr.size == 0 or dr.min() <= 1e-10 * dr.max():
                return "the basis B of K = B Y B^T does not have full column rank"
            B = Q
        basis = B
    elif isinstance(form, Range):
        basis = np.asarray(form.V0, dtype=float)
    centred = False
    rows = []
    for c in decl.constraints:
        sense = np.asarray(c.sense)
        bound = np.asarray(c.bound, dtype=float)
        if _is_total_sum(c.map) and bound[0] == 0 and sense[0] in (0, -1):
            centred = True  # 1^T K 1 <= 0 with K PSD: K 1 = 0
            continue
        rows.append(_Rows(c.map, sense, bound))
    merge = _merge_basis(decl) if basis is None else None
    space = _Space(n, basis, merge, centred)
    C = _scaled(sym_sum(n, [t.gradient() for t in decl.linear]), sign)
    terms = [_Term(t.map, t.loss, sign * t.weight) for t in decl.losses]
    kappa = 0.0
    if not decl.losses and decl.linear and all(_is_trace(t.map) for t in decl.linear):
        k = -sign * float(sum(t.coef[0] for t in decl.linear))
        if k > 0:
            kappa = k
    view = _View(decl, n, sign, space, C, terms, rows, kappa=kappa)
    why = _trace_rules_missing(view)
    return why if why else view


def _trace_rules_missing(view: _View) -> str:
    """'' when some rule may bound tr(K*) for this declaration (decided on the data by
    :func:`certify`), else why none can."""
    if view.kappa > 0:
        return ""
    for b in view.rows:
        up = b.sense != 1  # <= or ==
        if not np.any(up):
            continue
        if _pairmap(b.map) and (np.any(b.map.kind[up] == 0) or np.any(b.map.i[up] == b.map.j[up])):
            return ""
        if _is_trace(b.map):
            return ""
    for t in view.terms:
        if t.loss.is_squared and _pairmap(t.map) and (np.any(t.map.kind == 0) or np.any(t.map.i == t.map.j)):
            return ""
    if view.decl.linear:
        return ""  # a positive definite linear term bounds the trace (checked on the data)
    return ("no bound on tr(K*) follows from this declaration (it has " + view.decl.structure()
            + "): the certificate needs an upper bound on the diagonal, the trace or the "
            "distances, a squared loss on diagonal entries or distances, a positive definite "
            "linear term, or the objective -tr(K) alone")


# ====================================================================== public entry points
def applies(problem: Any) -> str | None:
    """``None`` when :func:`certify` covers ``problem``'s declaration, else the reason it does
    not (whether a trace bound holds for an instance is decided on the data by
    :func:`certify`)."""
    view = _match(problem.declaration)
    return view if isinstance(view, str) else None


def certify(problem: Any, K: Any, *, dense_below: int = DENSE_BELOW,
            multipliers: np.ndarray | None = None, duals: dict | None = None) -> Certificate:
    """Certify a kernel (factor ``V``, ``K = V V^T``) for a convex problem.

    Parameters
    ----------
    problem : any problem with a declaration (P1-P7, DeclaredProblem)
    K : LowRank, an (n, r) factor, or a dense PSD (n, n) matrix
    dense_below : int
        Problems with at most this many rows use a dense eigenvalue solve.
    multipliers : ndarray, optional
        Constraint multipliers to use instead of the ones fitted to ``K``, one per
        constraint row in the declaration's order (the centring row ``1^T K 1 = 0``
        excluded; for MVU: one per edge).  Any vector gives a valid bound (rows of the wrong
        sign are clipped to 0); a solver's own multipliers may give a tighter one.
    duals : dict, optional
        A conic solver's own multipliers (:meth:`kernelforms.formulations.base.Formulation.duals`):
        ``{"constraints": [...], "losses": [...]}``, one entry per constraint and per loss
        term of the declaration, in its order, each an array (one value per row, in the
        minimisation's sign: ``>= 0`` on ``<=`` rows, ``<= 0`` on ``>=`` rows; a loss's slopes
        ``u``) or None.  They are one more candidate beside the fitted multipliers (the best
        bound is kept); they are clipped to their sign and a hinge slope to its box first,
        so any values give a valid bound.  The certificate's ``note`` says which won.

    Returns
    -------
    Certificate
        ``lower_bound <= f(K*)`` (a maximisation: ``f(K*) <= upper_bound``);
        ``relative_gap`` is how far ``K`` can be from optimal.

    Raises
    ------
    NotApplicable
        When :func:`applies` rejects the declaration, or no trace bound holds for this
        instance (the message says which rule failed and why).
    """
    decl = problem.declaration
    view = _match(decl)
    if isinstance(view, str):
        raise _no_cert(f"no certificate for {_name(problem)}: {view}")
    n = decl.n
    y_given = None
    if multipliers is not None:
        if view.n_rows == 0:
            raise _no_cert(f"certify: 'multipliers' are constraint multipliers (MVU only among "
                           f"P1-P6 takes them); {_name(problem)} has no constraint rows")
        y_given = np.asarray(multipliers, dtype=float).ravel()
        if y_given.shape != (view.n_rows,) or not np.all(np.isfinite(y_given)):
            raise _no_cert(f"certify: 'multipliers' must be {view.n_rows} finite numbers, one per "
                           "constraint row in the declaration's order, the centring row excluded "
                           f"(MVU: one per edge); got shape {np.shape(multipliers)}")
    V = _factor(K, n)
    if view.divergence is not None:
        return _certify_divergence(view, V, y_given)
    if duals is not None and y_given is None:
        given = _from_duals(view, duals)
        if given is not None:
            cert, pt, us, y = _lagrangian(view, V, dense_below, None, solver=given)
            shifted = _diagonal_shift(view, pt, us, y, cert, dense_below)
            return cert if shifted is None else shifted
    return _certify_lagrangian(view, V, dense_below, y_given)


def duals_cover(problem: Any, duals: dict) -> bool:
    """Whether a solver's multipliers (:func:`certify`'s ``duals``) cover every constraint
    row and every hinge term of the certificate's view of ``problem`` (then the bound with
    them closes to about the solver's accuracy)."""
    view = _match(problem.declaration)
    if isinstance(view, str) or view.divergence is not None:
        return False
    got = _from_duals(view, duals)
    return got is not None and got[2]


def _from_duals(view: _View, duals: dict) -> "tuple[list, np.ndarray, bool] | None":
    """A solver's multipliers on the certificate's rows: per-term slopes (None where the
    solver gave none), the constraint multipliers (0 where it gave none) and whether they
    cover every constraint row and every hinge term (None when they cover nothing)."""
    decl = view.decl
    cons = list(duals.get("constraints") or [])
    losses = list(duals.get("losses") or [])
    if len(cons) != len(decl.constraints) or len(losses) != len(decl.losses):
        return None
    ys, complete, used = [], True, False
    for c, d in zip(decl.constraints, cons):
        bound = np.asarray(c.bound, dtype=float)
        if _is_total_sum(c.map) and bound[0] == 0 and np.asarray(c.sense)[0] in (0, -1):
            continue  # the centring row: the certificate works on the centred subspace
        if d is None or np.shape(d) != (c.map.size,) or not np.all(np.isfinite(d)):
            ys.append(np.zeros(c.map.size))
            complete = False
        else:
            ys.append(np.asarray(d, dtype=float))
            used = True
    y = np.concatenate(ys) if ys else np.zeros(0)
    us: list = []
    for t, d in zip(view.terms, losses):
        ok = d is not None and np.shape(d) == (t.map.size,) and np.all(np.isfinite(d))
        lo, hi = t.loss.conjugate_domain()
        if np.all(lo == hi):
            us.append(None)  # a loss whose slope is fixed (linear): its gradient
            continue
        if not ok:
            complete = False
            us.append(None)  # its gradient at the point (the exact tangent)
            continue
        # into the conjugate's domain (hinge: u = -alpha y, alpha in [0, 1]), where it is finite
        us.append(np.clip(np.asarray(d, dtype=float), lo, hi))
        used = True
    if not used:
        return None
    return us, y, complete


def mvu_multipliers(problem: Any, V: np.ndarray) -> np.ndarray:
    """Constraint multipliers fitted to the point by least squares on stationarity ``H V = 0``
    (one per constraint row, the centring row excluded: for MVU one per edge).

    At an optimum of MVU, ``S = sum_e lam_e A_e - I (+ c 11^T)`` is PSD and ``S K = 0``;
    for a centred factor the ``11^T`` term drops out, so row ``i`` of ``S V = 0`` reads
    ``sum_{e = (i, j)} lam_e (v_i - v_j) = v_i``: ``n r`` linear equations in the edge
    multipliers, solved by LSQR (sparse, ``4 r`` non-zeros per edge).
    """
    view = _match(problem.declaration)
    if isinstance(view, str) or view.divergence is not None or view.n_rows == 0:
        raise _no_cert(f"mvu_multipliers: {_name(problem)} has no constraint multipliers to fit")
    V = _factor(V, view.n)
    pt = _Point(view, V)
    _, y, _ = _fit(view, pt, pt.base_u(), kinks=False)
    return y


@dataclass
class Escape:
    """The certificate at a factor and the directions that would lower its objective.

    ``values`` are the smallest eigenvalues of the certificate's matrix ``H`` (the
    Lagrangian's gradient with the multipliers that gave the best bound) over the form,
    ascending; ``vectors`` the matching unit directions in point space (``(n, j)``).  A
    negative value ``lambda`` means ``K + t v v^T`` lowers the Lagrangian at rate ``lambda``:
    the factor ``[V, sqrt(t) v]`` of one more column leaves the (non-optimal) point
    (Burer & Monteiro 2005).  ``values >= 0`` (to round-off) certify the point.
    """

    certificate: Certificate
    values: np.ndarray
    vectors: np.ndarray

    @property
    def gap_from_curvature(self) -> float:
        """The part of the relative gap that comes from the negative curvature,
        ``-min(0, lambda_min) tau / max(|f|, |bound|)``: what growing the rank can close."""
        c = self.certificate
        # no eigenpair computed (Lanczos did not converge): the certificate's own lambda_min
        # decides; an unknown one is not "no curvature"
        s = float(self.values[0]) if self.values.size else float(c.min_eig)
        if math.isnan(s):
            return math.inf
        s = min(0.0, s)
        if s == 0.0:
            return 0.0
        tau = c.trace_bound
        if not math.isfinite(tau):
            return math.inf
        return -s * tau / max(abs(c.objective), abs(c.bound) if math.isfinite(c.bound) else 0.0, 1e-12)


def escape(problem: Any, V: Any, *, multipliers: np.ndarray | None = None, k: int = 1,
           dense_below: int = DENSE_BELOW, start: np.ndarray | None = None) -> Escape:
    """The Lagrangian certificate at the factor ``V`` and the ``k`` directions of most
    negative curvature of its matrix (see :class:`Escape`).

    Used by the factored solvers to grow their rank only when the point is not optimal.
    ``start`` (a vector over the points, e.g. the sum of the previous step's directions)
    starts Lanczos near the directions sought.
    Raises :class:`~kernelforms.errors.NotApplicable` where :func:`certify` does, and for
    a divergence (its solvers have no rank to grow).
    """
    decl = problem.declaration
    view = _match(decl)
    if isinstance(view, str):
        raise _no_cert(f"no certificate for {_name(problem)}: {view}")
    if view.divergence is not None:
        raise _no_cert("escape: a divergence's certificate is its dual function; no rank to grow")
    y_given = None
    if multipliers is not None and view.n_rows:
        y_given = np.asarray(multipliers, dtype=float).ravel()
        if y_given.shape != (view.n_rows,) or not np.all(np.isfinite(y_given)):
            y_given = None
    Vf = _factor(V, view.n)
    pairs: list = []
    fitted: list = []
    cert, pt, us, y = _lagrangian(view, Vf, dense_below, y_given, want=k, start=start, pairs=pairs,
                                  fitted=fitted)
    if pairs:  # the certificate's Lanczos run gave the directions too (converged or not)
        vals, vecs = pairs[0], pairs[1]
    else:
        H = pt.gradient(us)
        if view.n_rows:
            H = H + _constraint_op(view, y)
        vals, vecs = view.space.lowest(H, k, dense_below, start=start)
    _remember(view, Vf, dense_below, y_given, cert, (us, y), (vals, vecs))
    if _hinge_blind(view, cert, vals):
        # the best bound came from a minorant whose matrix is PSD but far below the point
        # (hinge slopes 0 on the kinked pairs: L itself): it says nothing about the point.
        # The directions come from the slopes fitted to stationarity H V = 0 instead, the
        # minorant that touches the point (a 500-point digits NPKL-hinge at rank 8, whose
        # optimum has rank 9: best bound from a PSD matrix, relative gap 0.97, no curvature,
        # so the rank never grew and bcd ended 0.7% above the optimum; the fitted slopes'
        # matrix has lambda_min -1.4e-2)
        us_fit, y_fit = fitted if fitted else _fit(view, pt, pt.base_u())[:2]
        H = pt.gradient(us_fit)
        if view.n_rows:
            H = H + _constraint_op(view, y_fit)
        fvals, fvecs = view.space.lowest(H, k, dense_below, start=start)
        if fvals.size and float(fvals[0]) < 0:
            vals, vecs = fvals, fvecs
    return Escape(cert, vals, vecs)


#: a certificate looser than this whose best minorant has no negative curvature, on a
#: problem with a hinge term, takes its escape directions from the fitted hinge slopes
BLIND_GAP = 1e-2


def _hinge_blind(view: _View, cert: Certificate, vals: np.ndarray) -> bool:
    """Whether the best bound's matrix is PSD while the bound is loose, on a hinge problem
    (see :func:`escape`)."""
    if all(t.loss.smooth for t in view.terms):
        return False
    if vals.size and float(vals[0]) < 0:
        return False
    return not cert.relative_gap <= BLIND_GAP  # also when the gap is inf or NaN


def _name(problem: Any) -> str:
    return type(problem).__name__


def _factor(K: Any, n: int) -> np.ndarray:
    if isinstance(K, LowRank):
        return K.G
    A = np.asarray(K, dtype=float)
    if A.ndim == 2 and A.shape == (n, n) and n > 1 and np.allclose(A, A.T):
        from .result import psd_factor

        return psd_factor(A)
    if A.ndim not in (1, 2) or A.shape[0] != n or A.size == 0:
        from .errors import ProblemError

        raise ProblemError(f"certify: K must be a LowRank, an (n, r) factor or an (n, n) PSD "
                           f"matrix with n = {n}; got shape {A.shape}")
    return A.reshape(n, -1)


#: the round-off allowed in ``<H, K>`` by :func:`_below_the_point`, relative to
#: ``||V||_F ||H V||_F`` (the sum's own error is about ``eps`` times that)
POINT_CHECK_RTOL = 1e-12


def _point_direction(pt: "_Point", HV: np.ndarray) -> np.ndarray:
    """The unit vector of least Rayleigh quotient of ``H`` on the range of the point's factor
    (``HV = H V``; the factor whitened by its Gram matrix, directions below ``1e-15`` of its
    largest eigenvalue dropped): a start for an eigenvalue run that must not miss it."""
    V = pt.Vp
    g, U = np.linalg.eigh(V.T @ V)
    keep = g > 1e-15 * max(float(g[-1]), 1e-300)
    T = U[:, keep] / np.sqrt(g[keep])
    M = T.T @ (V.T @ HV) @ T
    _, Z = np.linalg.eigh((M + M.T) / 2)
    x = V @ (T @ Z[:, 0])
    nx = float(np.linalg.norm(x))
    return x / nx if nx > 0 and math.isfinite(nx) else x


def _below_the_point(s: float, pt: "_Point", HV: np.ndarray, extra: float = 0.0) -> bool:
    """Whether ``s`` can be a lower estimate of ``lambda_min`` of the certificate's matrix
    ``H`` over the form, judged by the point itself: ``K = B F F^T B^T`` lies in the form, so
    ``<H, K> >= lambda_min ||F||_F^2``, and an ``s`` above ``<H, K> / ||F||_F^2`` (beyond
    round-off) is not below ``lambda_min``.  A Lanczos run started from earlier directions can
    settle on an eigenvalue above the bottom with a small residual (the residual only says an
    eigenvalue is near): NPKL-square on 60,000 two-Gaussian points, bcd's point, read
    ``1.1e-10`` where ``lambda_min`` is ``-6.0e-8`` and ``<H, K> = -2.2e-5``, and the bound
    came out 2.2e-5 above a feasible point's objective.  ``HV = H V`` at the point's factor
    ``pt.Vp``; ``extra`` is added to ``<H, K>`` (a diagonal shift's ``sum_i d_i K_ii``)."""
    if not math.isfinite(s):
        return True
    inner = float(np.sum(pt.Vp * HV)) + extra
    trace = float(np.sum(pt.F * pt.F))
    slack = POINT_CHECK_RTOL * float(np.linalg.norm(pt.Vp)) * float(np.linalg.norm(HV)) + abs(extra) * 1e-12
    return s * trace <= inner + slack


# ====================================================================== the point
class _Point:
    """The point projected onto the form, with what every candidate bound needs."""

    def __init__(self, view: _View, V: np.ndarray) -> None:
        self.view = view
        sp_ = view.space
        self.F = sp_.coords(V)
        self.Vp = sp_.lift(self.F)
        self.K = LowRank(self.Vp)
        self.z = [t.map.apply(self.K) for t in view.terms]
        self.r = self.Vp.shape[1]

    def dominant(self, rtol: float = 1e-6) -> np.ndarray | None:
        """The point's factor without its directions of eigenvalue below ``rtol`` times the
        largest (None when there are none)."""
        F = self.F
        if F.shape[1] < 2 or F.shape[1] > 200:
            return None
        U, sv, _ = np.linalg.svd(F, full_matrices=False)
        keep = sv**2 >= rtol * sv[0] ** 2 if sv.size and sv[0] > 0 else np.zeros(0, bool)
        if keep.all() or not keep.any():
            return None
        return self.view.space.lift(U[:, keep] * sv[keep])

    def base_u(self) -> list[np.ndarray]:
        return [t.loss.grad(z) for t, z in zip(self.view.terms, self.z)]

    def gradient(self, us: list[np.ndarray]) -> Any:
        from .model import sym_sum

        v = self.view
        return sym_sum(v.n, [v.C] + [t.map.adjoint_op(t.w * u) for t, u in zip(v.terms, us)])

    def constant(self, us: list[np.ndarray], exact: list[bool]) -> float:
        """``sum_k w_k sum_p (l(z_p) - u_p z_p)`` (a gradient) or ``-w_k sum_p l*(u_p)``."""
        c = 0.0
        for t, z, u, ex in zip(self.view.terms, self.z, us, exact):
            if ex and t.loss.smooth:
                c += t.w * float(np.sum(t.loss.value(z) - u * z))
            else:
                c -= t.w * float(np.sum(t.loss.conjugate(u)))
        return c


def _columns(view: _View, pt: _Point, items: list[tuple[Any, np.ndarray, np.ndarray]],
             Vp: np.ndarray) -> Any:
    """The stationarity columns ``vec(B^T A_p* V)`` (row-major ``(k, r)``) of the rows
    ``(map, row indices, coefficient)``: sparse, ``4 r`` non-zeros per pair row."""
    n, r = view.n, Vp.shape[1]
    blocks = []
    for m, idx, coef in items:
        k = len(idx)
        if k == 0:
            continue
        if _pairmap(m):
            i, j = m.i[idx], m.j[idx]
            dist = m.kind[idx] == 0
            col = np.arange(k)
            ar = np.arange(r)
            rows_i = (i[:, None] * r + ar).ravel()
            rows_j = (j[:, None] * r + ar).ravel()
            cc = np.repeat(col, r)
            D = Vp[i] - Vp[j]
            half_i = 0.5 * Vp[j]
            half_j = 0.5 * Vp[i]
            # entry rows: E_p V = (e_i v_j^T + e_j v_i^T) / 2; distance rows: (e_i - e_j)(v_i - v_j)^T
            di = np.where(dist[:, None], D, half_i) * coef[:, None]
            dj = np.where(dist[:, None], -D, half_j) * coef[:, None]
            A = sp.csr_matrix((np.concatenate([di.ravel(), dj.ravel()]),
                               (np.concatenate([rows_i, rows_j]), np.concatenate([cc, cc]))),
                              shape=(n * r, k))
        else:
            cols = [coef[q] * m.adjoint_op(np.eye(m.size)[p]).matmat(Vp).ravel()
                    for q, p in enumerate(idx)]
            A = sp.csr_matrix(np.stack(cols, axis=1))
        blocks.append(A)
    if not blocks:
        return sp.csr_matrix((n * r, 0))
    A = blocks[0] if len(blocks) == 1 else sp.hstack(blocks, format="csr")
    return view.space.restrict_columns(A, r)


def _kink_rows(loss: Any, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows within ``KINK_TOL`` of a kink of ``loss`` (its subdifferential an interval),
    and the interval's ends ``e0`` (least magnitude) and ``e1`` on them."""
    if loss.smooth:
        return np.zeros(0, dtype=int), np.zeros(0), np.zeros(0)
    lo, hi = loss.subdifferential(z, KINK_TOL)
    kink = np.flatnonzero(hi > lo)
    lo, hi = lo[kink], hi[kink]
    first = np.abs(lo) <= np.abs(hi)
    return kink, np.where(first, lo, hi), np.where(first, hi, lo)


def _fit(view: _View, pt: _Point, us: list[np.ndarray], *, kinks: bool = True,
         y_fixed: np.ndarray | None = None, active_only: bool = True,
         Vfit: np.ndarray | None = None):
    """Fit the hinge slopes at kinks and the constraint multipliers (active rows, right
    sign) to stationarity ``B^T H B F = 0`` by (bounded) least squares.

    Returns the slopes, the multipliers (one per constraint row) and a note.
    """
    from scipy.optimize import lsq_linear
    from scipy.sparse.linalg import lsqr

    us = [u.copy() for u in us]
    items, lo, hi, where = [], [], [], []
    # rows at a kink (the loss's subdifferential an interval [e0, e1]): u = e0 + alpha (e1 - e0),
    # alpha in [0, 1], from e0 the end of least magnitude (the hinge's: u = -alpha y from 0)
    if kinks:
        for k, (t, z) in enumerate(zip(view.terms, pt.z)):
            kink, e0, e1 = _kink_rows(t.loss, z)
            if kink.size:
                us[k][kink] = e0
                items.append((t.map, kink, t.w * (e1 - e0)))
                lo.append(np.zeros(kink.size)), hi.append(np.ones(kink.size))
                where.append(("u", k, kink))
    # constraint rows: active ones only
    off = 0
    n_rows = view.n_rows
    if y_fixed is None:
        for b in view.rows:
            act = np.flatnonzero(_active(b.sense, b.map.apply(pt.K) - b.bound, b.bound)) \
                if active_only else np.arange(b.map.size)
            if act.size:
                items.append((b.map, act, np.ones(act.size)))
                blo, bhi = _bounds_of(b.sense[act])
                lo.append(blo), hi.append(bhi)
                where.append(("y", off, act))
            off += b.map.size
    G = pt.gradient(us)
    if y_fixed is not None:
        G = G + _constraint_op(view, y_fixed)
    y = np.zeros(n_rows) if y_fixed is None else y_fixed.copy()
    if not items:
        return us, y, ""
    Vf = pt.Vp if Vfit is None else Vfit
    A = _columns(view, pt, items, Vf)
    rhs = -view.space.restrict_rows(G.matmat(Vf))
    extra = 0
    sp_ = view.space
    if sp_.u is not None:
        # K 1 = 0: stationarity holds up to u w^T (the centring row's multiplier); needed
        # unless every column and the gradient are centred already (MVU: distance rows)
        all_dist = all(_pairmap(m) and np.all(m.kind[idx] == 0) for m, idx, _ in items)
        resid_u = sp_.u @ rhs
        if not (all_dist and np.linalg.norm(resid_u) <= 1e-12 * max(1.0, np.linalg.norm(rhs))):
            r = Vf.shape[1]
            U = sp.csr_matrix(np.kron(sp_.u[:, None], np.eye(r)))
            A = sp.hstack([A, U], format="csr")
            lo.append(np.full(r, -np.inf)), hi.append(np.full(r, np.inf))
            extra = r
    lo_, hi_ = np.concatenate(lo), np.concatenate(hi)
    b = rhs.ravel()
    m = A.shape[1]
    if np.all(np.isinf(lo_)) and np.all(np.isinf(hi_)):
        sol = lsqr(A, b, atol=1e-14, btol=1e-14, iter_lim=20 * m + 1000)
        x = np.asarray(sol[0], dtype=float)
        how = "LSQR"
    elif _diagonal_only(items, pt) and extra == 0:
        x = _diagonal_fit(items, Vf, rhs, lo_, hi_)
        how = "row by row"
    else:
        sol = lsq_linear(A, b, bounds=(lo_, hi_), lsmr_tol="auto", max_iter=200)
        x = np.clip(sol.x, lo_, hi_)
        how = "bounded least squares"
    pos = 0
    for (kind, k, idx) in where:
        val = x[pos:pos + idx.size]
        pos += idx.size
        if kind == "u":
            t = view.terms[k]
            us[k][idx] = -val * t.loss.labels[idx]
        else:
            y[k + idx] = val
    return us, y, how


def _diagonal_only(items, pt) -> bool:
    """Every unknown is a diagonal entry row, on distinct points, of the plain PSD form."""
    if not pt.view.space.plain:
        return False
    pts = []
    for m, idx, _ in items:
        if not (_pairmap(m) and np.all((m.kind[idx] == 1) & (m.i[idx] == m.j[idx]))):
            return False
        pts.append(m.i[idx])
    p = np.concatenate(pts)
    return len(np.unique(p)) == len(p)


def _diagonal_fit(items, V, rhs, lo, hi) -> np.ndarray:
    """Diagonal rows touch one row of ``H V`` each: the least squares decouple,
    ``y_i = <R_i, v_i> / ||v_i||^2`` clipped to its sign (NPKL's ``K_ii <= b^2``)."""
    i = np.concatenate([m.i[idx] for m, idx, _ in items])
    coef = np.concatenate([c for _, _, c in items])
    nv = np.einsum("ij,ij->i", V[i], V[i])
    x = np.einsum("ij,ij->i", rhs[i], V[i]) / np.maximum(nv, 1e-300) / coef
    return np.clip(x, lo, hi)


def _constraint_op(view: _View, y: np.ndarray) -> Any:
    from .model import sym_sum

    parts, off = [], 0
    for b in view.rows:
        parts.append(b.map.adjoint_op(y[off:off + b.map.size]))
        off += b.map.size
    return sym_sum(view.n, parts)


def _senses(view: _View) -> np.ndarray:
    """Each constraint row's sense (-1 ``<=``, 0 ``==``, +1 ``>=``), in the rows' order."""
    return np.concatenate([b.sense for b in view.rows]) if view.rows else np.zeros(0, int)


def _bounds_of(sense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``(lo, hi)`` on the multipliers of rows of these senses: ``>= 0`` on ``<=``
    rows, ``<= 0`` on ``>=`` rows, free on ``==``."""
    return np.where(sense == -1, 0.0, -np.inf), np.where(sense == 1, 0.0, np.inf)


def _active(sense: np.ndarray, residual: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Rows whose slack (``residual = A(K) - b``, signed by the sense) is at most
    ``KINK_TOL`` relative to ``max(1, |b|)``: equalities always."""
    slack = np.where(sense == -1, -residual, np.where(sense == 1, residual, 0.0))
    return slack <= KINK_TOL * np.maximum(1.0, np.abs(bound))


def _sign_bounds(view: _View) -> tuple[np.ndarray, np.ndarray]:
    return _bounds_of(_senses(view))


def _clip_sign(view: _View, y: np.ndarray) -> np.ndarray:
    return np.clip(y, *_sign_bounds(view))


def _bounds_vec(view: _View) -> np.ndarray:
    return np.concatenate([b.bound for b in view.rows]) if view.rows else np.zeros(0)


# ====================================================================== trace bounds
class _Trace:
    """``tau >= tr(K*)`` from the declaration's rules, computed lazily (once per certify)."""

    def __init__(self, view: _View, pt: _Point, dense_below: int) -> None:
        self.view, self.pt, self.dense_below = view, pt, dense_below
        self.value: float | None = None
        self.note = ""
        self.failures: list[str] = []

    def get(self) -> float:
        if self.value is None:
            best, note = math.inf, ""
            for rule in (self._from_constraints, self._from_objective, self._from_distance_bounds):
                tau, how = rule()
                if tau is not None and tau < best:
                    best, note = tau, how
                if math.isfinite(best):
                    break  # the rules are tried cheapest first
            self.value, self.note = best, note
        return self.value

    def reason(self) -> str:
        return "; ".join(self.failures) if self.failures else "no rule applies"

    # -- rule 1: upper bounds on the diagonal or on tr(K)
    def _from_constraints(self):
        v = self.view
        n = v.n
        cap = np.full(n, np.inf)
        tr_cap = math.inf
        for b in v.rows:
            up = b.sense != 1
            m = b.map
            if _pairmap(m):
                d = up & (m.kind == 1) & (m.i == m.j)
                if np.any(d):
                    np.minimum.at(cap, m.i[d], np.maximum(b.bound[d], 0.0))
            elif _is_trace(m) and up[0]:
                tr_cap = min(tr_cap, max(float(b.bound[0]), 0.0))
        out = min(tr_cap, float(cap.sum()))
        if math.isfinite(out):
            return out, ("tau from the trace bound" if out == tr_cap else
                         "tau = sum of the upper bounds on K_ii")
        return None, ""

    # -- rule 2: F(K*) <= F(a feasible point) and F >= beta tr(K) + quadratics in tr(K)
    def _from_objective(self):
        v, pt = self.view, self.pt
        F_ub, how_ub = _feasible_value(v, pt)
        if F_ub is None:
            self.failures.append("no feasible point is known to bound the objective "
                                 f"({how_ub})")
            return None, ""
        c0 = 0.0
        lin = [v.C]
        quads = []  # (a, mu, T): a (mu x - T)_+^2
        for t in v.terms:
            lb = -t.loss.conjugate(np.zeros(t.map.size))
            m = t.map
            used = np.zeros(m.size, dtype=bool)
            if t.loss.is_squared and _pairmap(m):
                q, used = self._squared_rows(t)
                if q is not None:
                    quads.append(q)
            rest = ~used
            if np.all(np.isfinite(lb[rest])):
                c0 += t.w * float(np.sum(lb[rest]))
            elif t.loss.curvature == 0 and np.all(rest):
                lin.append(m.adjoint_op(t.w * t.loss.grad(np.zeros(m.size))))
            else:
                self.failures.append(f"the {t.loss.name} loss term is unbounded below")
                return None, ""
        from .model import sym_sum

        Cl = sym_sum(v.n, lin)
        if not quads:
            beta, _ = v.space.min_eig(Cl, self.dense_below)
            if not beta > 0:
                self.failures.append(
                    f"the linear terms' matrix has lambda_min <= 0 on the form (lower estimate "
                    f"{beta:.3g}), so the objective bounds no trace (for a Laplacian: build it "
                    "with delta > 0, e.g. NPKL.from_data(..., delta=0.01))")
                return None, ""
            tau = max(0.0, F_ub - c0) / beta
            return tau, f"tau = (F_ub - lb) / lambda_min(C) ({how_ub})"
        beta, _ = v.space.near_zero_lower(Cl, self.dense_below)
        tau = _quad_sup(beta, quads, F_ub - c0)
        if tau is None:
            self.failures.append("the quadratic trace inequality has no solution")
            return None, ""
        return tau, f"tau from the squared loss rows and F(K*) <= {F_ub:.6g} ({how_ub})"

    def _squared_rows(self, t: _Term):
        """``w sum_P r_p^2 >= (w / |P|)(mu tr(K) - sum_P t_p)_+^2`` for the diagonal rows (mu =
        the smallest count over the points) or the distance rows (mu = lambda_min of the
        graph Laplacian on the form)."""
        v, m = self.view, t.map
        n = v.n
        tg = t.loss.targets
        diag = (m.kind == 1) & (m.i == m.j)
        if np.any(diag):
            cnt = np.bincount(m.i[diag], minlength=n).astype(float)
            if v.space.basis is not None:
                B = v.space.basis
                mu = _dense_lower(B.T @ (cnt[:, None] * B))
            else:
                mu = float(cnt.min())
            if mu > 0:
                P = int(diag.sum())
                return (t.w / P, mu, float(tg[diag].sum())), diag
        dist = m.kind == 0
        if np.any(dist):
            mu = _laplacian_mu(v, m.take(dist), self.dense_below)
            if mu is not None and mu > 0:
                P = int(dist.sum())
                return (t.w / P, mu, float(tg[dist].sum())), dist
        return None, np.zeros(m.size, dtype=bool)

    # -- rule 3: sum of distances <= sum of bounds, with the graph's lambda_2
    def _from_distance_bounds(self):
        v = self.view
        best = None
        for b in v.rows:
            m = b.map
            if not _pairmap(m):
                continue
            rows = (b.sense != 1) & (m.kind == 0)
            if not np.any(rows):
                continue
            mu = _laplacian_mu(v, m.take(rows), self.dense_below)
            if mu is None:
                self.failures.append("the distance rows' graph Laplacian is too large for the "
                                     "dense lambda_2 this rule uses")
                continue
            if not mu > 0:
                self.failures.append("the distance rows do not bound tr(K) (their graph is not "
                                     "connected, or K is not centred)")
                continue
            tau = float(np.maximum(b.bound[rows], 0).sum()) / mu
            if best is None or tau < best:
                best = tau
        if best is None:
            return None, ""
        return best, "tau = sum of distance bounds / lambda_2 of their graph"


def _laplacian_mu(v: _View, m: Any, dense_below: int) -> float | None:
    """A lower estimate of ``lambda_min`` of ``A*(1)`` (a graph Laplacian) on the form; ``None``
    when it would need Lanczos on a large Laplacian."""
    from scipy.sparse.csgraph import connected_components

    sp_ = v.space
    op = m.adjoint_op(np.ones(m.size))
    if sp_.basis is None:
        if sp_.u is None and sp_.merge is None:
            return 0.0  # the constant vector is in the kernel of a Laplacian
        A = sp.coo_matrix((np.ones(m.size), (m.i, m.j)), shape=(v.n, v.n))
        if connected_components(A, directed=False)[0] > 1 and sp_.merge is None:
            return 0.0
        if sp_.k > dense_below:
            return None
    lam, _ = sp_.min_eig(op, dense_below)
    return lam


def _quad_sup(beta: float, quads: list, R: float) -> float | None:
    """``sup {x >= 0: beta x + sum_q a_q (mu_q x - T_q)_+^2 <= R}`` (``None`` if empty)."""
    def phi(x):
        return beta * x + sum(a * max(mu * x - T, 0.0) ** 2 for a, mu, T in quads)

    if len(quads) == 1:
        a, mu, T = quads[0]
        Rp = R - beta * T / mu
        if Rp >= 0 and phi(T / mu) <= R:
            b = beta / mu
            y = (-b + math.sqrt(b * b + 4.0 * a * Rp)) / (2.0 * a)
            return (T + y) / mu
    if phi(0.0) > R and beta >= 0:
        return None
    lo = 0.0
    hi = max(1.0, max(max(T, 0.0) / mu for _, mu, T in quads))
    while phi(hi) <= R:
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            return None
    if phi(lo) > R:  # find a point inside the (convex) sublevel set by ternary search
        a_, b_ = lo, hi
        for _ in range(200):
            m1, m2 = a_ + (b_ - a_) / 3, b_ - (b_ - a_) / 3
            if phi(m1) <= phi(m2):
                b_ = m2
            else:
                a_ = m1
        lo = (a_ + b_) / 2
        if phi(lo) > R:
            return None
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if phi(mid) <= R:
            lo = mid
        else:
            hi = mid
    return hi


def _feasible_value(v: _View, pt: _Point) -> tuple[float | None, str]:
    """An upper bound on ``F(K*)`` (the minimisation's sign) from feasible points on the ray
    of the point (projected onto the form): ``theta K`` for the ``theta >= 0`` every
    constraint row allows, ``K = 0`` among them when it is feasible.

    Each row is linear in ``theta``: ``theta a <= b`` / ``>= b`` gives an upper or a lower
    limit by the signs of ``a`` and ``b``, so rows of any mix (entries and distances,
    ``<=`` and ``>=``) leave an interval ``[lo, hi]``.  Tried: ``theta = 1`` clipped to it and
    both ends (pulled inside by 1e-12 relative); a candidate counts only when every row
    holds exactly at the kernel actually evaluated.  An equality row with a non-zero bound
    allows a single ``theta`` that rounding misses, so no point then.
    """
    sgn = v.sign
    lo, hi = 0.0, math.inf
    blocked = ""
    for b in v.rows:
        a = b.map.apply(pt.K)
        s, bd = b.sense, b.bound
        le, ge, eq = s == -1, s == 1, s == 0
        if np.any(eq & (bd != 0)):
            blocked = "equality rows with non-zero bounds fix the scale of the point"
            break
        # theta a <= bd on <= rows, theta a >= bd on >= rows (theta a = 0 on == rows)
        up = (le & (a > 0)) | (ge & (a < 0))
        down = (le & (a < 0)) | (ge & (a > 0))
        flat = a == 0
        if np.any(flat & ((le & (bd < 0)) | (ge & (bd > 0)))):
            blocked = "a row the point leaves at 0 is violated at every scale"
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            if np.any(up):
                hi = min(hi, float(np.min(bd[up] / a[up])))
            if np.any(down):
                lo = max(lo, float(np.max(bd[down] / a[down])))
        if np.any(eq & ~flat):
            hi = 0.0
    if not blocked and lo > hi:
        blocked = (f"no scaling of the point satisfies every row (theta would need "
                   f"{lo:.6g} <= theta <= {hi:.6g})")
    cands: list[tuple[float, str]] = []
    if not blocked:
        lo_in = lo * (1.0 + 1e-12) if lo > 0 else 0.0
        hi_in = hi * (1.0 - 1e-12) if math.isfinite(hi) else math.inf
        thetas = {min(max(1.0, lo_in), hi_in), lo_in}
        if math.isfinite(hi_in):
            thetas.add(hi_in)
        for th in sorted(t for t in thetas if lo_in <= t <= hi_in):
            Kt = LowRank(math.sqrt(th) * pt.Vp) if th > 0 else LowRank(np.zeros((v.n, 1)))
            if all(_holds(b, b.map.apply(Kt)) for b in v.rows):
                how = ("K = 0" if th == 0 else "the point" if th == 1.0
                       else f"the point scaled by {th:.12g}")
                cands.append((sgn * v.decl.objective(Kt), how))
        if not cands:
            blocked = "the scaled points miss some row by rounding"
    if not cands:
        return None, blocked
    val, how = min(cands, key=lambda c: c[0])
    return val, f"F_ub from {how}"


def _holds(b: _Rows, a: np.ndarray) -> bool:
    """Every row of the block holds exactly (no tolerance) at the values ``a``."""
    s, bd = b.sense, b.bound
    return bool(np.all(np.where(s == -1, a <= bd, np.where(s == 1, a >= bd, a == bd))))


# ====================================================================== the Lagrangian bound
def _certify_lagrangian(view: _View, V: np.ndarray, dense_below: int,
                        y_given: np.ndarray | None) -> Certificate:
    key = _memo_key(view, V, dense_below, y_given)
    hit = _MEMO.get("cert") if _MEMO.get("key") == key and _MEMO.get("decl")() is view.decl else None
    pairs = None
    if hit is not None:
        cert, (us, y), pairs = hit, _MEMO["uy"], _MEMO["pairs"]
        pt = _Point(view, V)
    else:
        cert, pt, us, y = _lagrangian(view, V, dense_below, y_given)
    shifted = _diagonal_shift(view, pt, us, y, cert, dense_below, pairs)
    return cert if shifted is None else shifted


#: the diagonal shift is tried when the curvature term ``-lambda_min tau`` is at least this
#: share of the certified gap, with at most this many negative eigenpairs
SHIFT_SHARE = 0.1
SHIFT_PAIRS = 8


def _diagonal_shift(view: _View, pt: _Point, us: list, y: np.ndarray, cert: Certificate,
                    dense_below: int, pairs: tuple | None = None) -> Certificate | None:
    """A tighter bound than ``c + lambda_min tau`` when the minorant has diagonal rows.

    Where the declaration has a loss or an (equality or ``<=``) constraint row on ``K_ii``
    (P1, NPKL's ``K_ii <= b^2``, hard PCP's ``K_ii = 1``; the PSD or merged form, not a basis),
    its slope or multiplier can be raised by ``d_i >= 0``: the minorant's matrix becomes
    ``H + diag(d)`` and its constant drops by the exact price (``w (l*(u + d / w) - l*(u))``
    for a loss, ``d b`` for a constraint row), about ``d_i K_ii`` for a loss.  ``tau`` pays
    for the negative curvature uniformly over the trace; the shift pays for it only where the
    negative eigenvectors live: ``d = sum_j |lambda_j| |x_j| S_j / sqrt(p)``, with
    ``S_j = sum_i |x_ji| sqrt(p_i)`` and ``p_i`` the first-order price (the smallest ``d`` in
    the Cauchy-Schwarz sense with ``diag(d) >= sum_j |lambda_j| x_j x_j^T``).  Then

        F(K*) >= c - price(d) + min(0, lambda_min(H + diag(d))) tau,

    valid for any ``d >= 0`` (the new minimum eigenvalue is computed, not assumed).  That
    ``d`` dominates each eigenpair on its own; ``alpha d`` with the scale of
    :func:`_shift_scale` (what the span of the computed eigenvectors needs) is tried first,
    the full ``d`` only when the scaled one's bound leaves room for it.  Returns None when it
    does not apply or does not improve the bound (or its relative gap).  One eigenvalue run
    for the shifted matrix (two when the scaled one fails), and one for the eigenvectors
    unless ``pairs`` (eigenvalues, unit eigenvectors of this minorant's matrix, from
    :func:`escape`) has them."""
    if not (view.space.basis is None and view.kappa == 0 and view.sign > 0 and view.divergence is None):
        return None
    s, tau = cert.min_eig, cert.trace_bound
    if not (math.isfinite(s) and s < 0 and math.isfinite(tau) and math.isfinite(cert.lower_bound)):
        return None
    if -s * tau < SHIFT_SHARE * cert.gap:
        return None
    n = view.n
    # the shiftable diagonal rows, one per point: (kind, term index or row offset, rows, points)
    owner = np.full(n, -1)
    price = np.full(n, np.nan)
    slots: list[tuple[str, int, np.ndarray, np.ndarray]] = []
    for k, (t, u) in enumerate(zip(view.terms, us)):
        m = t.map
        if not _pairmap(m):
            continue
        rows = np.flatnonzero((m.kind == 1) & (m.i == m.j))
        rows = rows[owner[m.i[rows]] < 0]
        if not rows.size:
            continue
        pts = m.i[rows]
        owner[pts] = len(slots)
        price[pts] = np.maximum(pt.z[k][rows], 0.0)  # l*'(u) = z at a smooth loss's gradient
        slots.append(("loss", k, rows, pts))
    off = 0
    for blk in view.rows:
        m = blk.map
        if _pairmap(m):
            rows = np.flatnonzero((m.kind == 1) & (m.i == m.j) & (blk.sense <= 0))
            rows = rows[owner[m.i[rows]] < 0]
            if rows.size:
                pts = m.i[rows]
                owner[pts] = len(slots)
                price[pts] = np.maximum(blk.bound[rows], 0.0)
                slots.append(("row", off, rows, pts))
        off += m.size
    if not slots:
        return None
    H = pt.gradient(us)
    if view.n_rows:
        H = H + _constraint_op(view, y)
    c = cert.lower_bound - s * tau
    if pairs is not None and np.size(pairs[0]) and float(np.min(pairs[0])) < 0:
        vals, X = np.asarray(pairs[0]), np.asarray(pairs[1])
    else:
        vals, X = view.space.lowest(H, SHIFT_PAIRS, dense_below)
    neg = np.flatnonzero(vals < 0)
    if not neg.size:
        return None
    ok = owner >= 0
    sq = np.sqrt(np.where(ok, np.maximum(price, 1e-12 * max(1.0, float(np.nanmax(price)))), 1.0))
    d_full = np.zeros(n)  # the sum of each negative eigenpair's own Cauchy-Schwarz diagonal
    for q in neg:
        a = np.abs(X[:, q]) * ok
        d_full += abs(float(vals[q])) * a * float(a @ sq) / sq
    bvec = _bounds_vec(view) if view.n_rows else None

    def price_of(d):
        cost = 0.0
        for kind, k, rows, pts in slots:
            dk = d[pts]
            if kind == "loss":
                t, u = view.terms[k], us[k]
                u2 = u.copy()
                u2[rows] += dk / t.w
                # the conjugate is per row (targets, labels): only the shifted rows change
                cost += t.w * float(np.sum((t.loss.conjugate(u2) - t.loss.conjugate(u))[rows]))
            else:
                cost += float(dk @ bvec[k + rows])
        return cost

    from .model import SymOperator

    cost_full = price_of(d_full)
    if not (math.isfinite(cost_full) and cost_full < -s * tau):
        return None  # no better than the curvature term even if the shifted matrix is PSD
    cands = []
    scaled = _shift_scale(H, X, d_full)
    if scaled is not None:
        a, start = scaled
        cost_a = price_of(a * d_full)
        if math.isfinite(cost_a) and cost_a < cost_full:
            cands.append((a * d_full, cost_a, f"scaled by {a:.3g}", start))
    cands.append((d_full, cost_full, "", None))
    HV = np.asarray(H @ pt.Vp)  # the point's own check of each shifted matrix's estimate
    diagK = np.sum(pt.Vp * pt.Vp, axis=1)
    best = None
    for d, cost, how_d, start in cands:
        if best is not None and best[0] >= c - cost:
            break  # this diagonal costs more than the best bound leaves, even if PSD
        Hd = H + SymOperator(n, sp.diags(d, format="csr"), np.zeros((n, 0)), np.zeros(0))
        s2, how = view.space.min_eig(Hd, dense_below, start=start)
        extra = float(d @ diagK)  # <diag(d), K>
        if not _below_the_point(s2, pt, HV, extra):
            s2, how = view.space.min_eig(Hd, dense_below)  # again, from a random start
            if not _below_the_point(s2, pt, HV, extra):
                continue  # no lower estimate of this shifted matrix: no bound from it
        lb = c - cost + min(0.0, s2) * tau
        if best is None or lb > best[0]:
            best = (lb, s2, how, d, cost, how_d)
    if best is None:
        return None
    lb, s2, how, d, cost, how_d = best
    F = view.sign * cert.objective
    gap = F - lb
    if not (lb > cert.lower_bound and relative(gap, F, lb) < cert.relative_gap):
        # (far from the optimum a higher negative bound can read as a larger relative gap)
        return None
    note = (f"{cert.note}; diagonal shift on {int(np.count_nonzero(d))} points for "
            f"{neg.size} negative eigenvalue(s) ({how_d + ', ' if how_d else ''}price {cost:.3g}, "
            f"lambda_min {s:.3g} -> {s2:.3g})")
    return Certificate(objective=cert.objective, lower_bound=lb, gap=gap,
                       relative_gap=relative(gap, F, lb), min_eig=s2, inner=cert.inner,
                       trace_bound=tau if s2 < 0 else math.nan, eig_method=how, note=note,
                       violation=cert.violation)


#: the margin on the scale of :func:`_shift_scale` (the small problem sees the matrix only on
#: the span of the computed eigenvectors, not its coupling to the rest)
SHIFT_MARGIN = 1.1


def _shift_scale(H: Any, X: np.ndarray, d: np.ndarray) -> tuple[float, np.ndarray] | None:
    """The smallest ``alpha`` in ``(0, 1]`` that keeps ``X^T (H + alpha diag(d)) X`` PSD on
    the span of the computed eigenvectors ``X`` (bisection on the small matrix), times
    :data:`SHIFT_MARGIN`, and the bottom Ritz vector of ``H + alpha diag(d)`` on that span
    (the start of the eigenvalue run that checks it); None when ``alpha`` is not below 1.

    The Cauchy-Schwarz diagonal ``d`` dominates each negative eigenpair on its own, so with
    several it pays again for what the others' diagonals already lift: on a million
    two-Gaussian points (four negative eigenvalues) ``alpha`` was 0.054 on the span.  Only
    a common scale is taken: per-eigenpair weights from a small SDP on the same span (0 for
    the most negative pair, whose diagonal the others covered there) left the whole matrix
    with ``lambda_min = -2e-5``: the span does not see the coupling to the other
    directions.  The caller computes the shifted matrix's smallest eigenvalue, so nothing
    here is trusted."""
    A0 = X.T @ np.asarray(H @ X)
    B = X.T @ (d[:, None] * X)
    A0, B = (A0 + A0.T) / 2, (B + B.T) / 2
    scale = max(float(np.max(np.abs(np.linalg.eigvalsh(A0)))), 1e-300)
    A0, B = A0 / scale, B / scale

    def psd(a):
        return float(np.linalg.eigvalsh(A0 + a * B)[0]) >= 0

    if not psd(1.0):
        return None
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if psd(mid) else (mid, hi)
    a = min(1.0, SHIFT_MARGIN * hi)
    if a >= 1.0:
        return None
    _, Z = np.linalg.eigh(A0 + a * B)
    return a, X @ Z[:, 0]


#: the last certificate :func:`escape` computed (the factored solvers' rank growth ends with
#: one at the point they return, which :func:`certify` would otherwise compute again: 30 s
#: at a million points)
_MEMO: dict[str, Any] = {}


def _memo_key(view: _View, V: np.ndarray, dense_below: int, y: np.ndarray | None) -> tuple:
    import hashlib

    def digest(a: np.ndarray | None) -> str:
        if a is None:
            return ""
        a = np.ascontiguousarray(a, dtype=float)
        return f"{a.shape}:" + hashlib.blake2b(a.tobytes(), digest_size=16).hexdigest()

    return (id(view.decl), digest(V), int(dense_below), digest(y))


def _remember(view: _View, V: np.ndarray, dense_below: int, y: np.ndarray | None,
              cert: Certificate, uy: tuple, pairs: tuple | None = None) -> None:
    import weakref

    try:
        ref = weakref.ref(view.decl)
    except TypeError:  # pragma: no cover - a declaration without weak references
        return
    _MEMO.clear()
    # uy: the minorant's multipliers; pairs: the eigenpairs of its matrix, when escape's
    # Lanczos run gave them (for the diagonal shift of a later certify at the same point)
    _MEMO.update(key=_memo_key(view, V, dense_below, y), decl=ref, cert=cert, uy=uy, pairs=pairs)


def _lagrangian(view: _View, V: np.ndarray, dense_below: int,
                y_given: np.ndarray | None, want: int = 0, start: np.ndarray | None = None,
                pairs: list | None = None,
                fitted: list | None = None,
                solver: tuple | None = None) -> tuple[Certificate, _Point, list, np.ndarray]:
    """The best Lagrangian certificate at ``V``, with the point and the loss and constraint
    multipliers ``(us, y)`` of the minorant that gave it (and, with ``want``, the ``want``
    lowest eigenpairs of its matrix in ``pairs`` when one Lanczos run gave both; ``fitted``
    receives ``(us, y)`` of the multipliers fitted to ``H V = 0`` when they were a
    candidate)."""
    decl = view.decl
    sp_ = view.space
    pt = _Point(view, V)
    sgn = view.sign
    # the point the certificate is for: its projection onto a basis / range form
    f = decl.objective(LowRank(pt.Vp if sp_.basis is not None else V))
    viol = float(decl.violation(LowRank(V)))
    trace = _Trace(view, pt, dense_below)
    base = pt.base_u()
    exact = [True] * len(view.terms)
    cands: list[tuple[list, np.ndarray, list, str]] = []
    y0 = np.zeros(view.n_rows)
    if y_given is not None:
        cands.append((base, _clip_sign(view, y_given), exact, "given multipliers"))
    else:
        kink_rows = [_kink_rows(t.loss, z) for t, z in zip(view.terms, pt.z)]
        kinked = any(r[0].size for r in kink_rows)
        hinge = not all(t.loss.smooth for t in view.terms)
        if view.n_rows == 0 or not np.any(_senses(view) == 0):
            cands.append((base, y0, [t.loss.smooth for t in view.terms],
                          "hinge multiplier minorant" if hinge else "gradient minorant"))
        if kinked:
            for a in (1.0, 0.0):
                us = [u.copy() for u in base]
                for k, (kink, e0, e1) in enumerate(kink_rows):
                    us[k][kink] = e0 + a * (e1 - e0)
                cands.append((us, y0, [False] * len(us), "hinge multiplier minorant"))
        if kinked or view.n_rows:
            us, y, how = _fit(view, pt, base)
            if fitted is not None:
                fitted[:] = [us, y]
            ex = [t.loss.smooth for t in view.terms]
            what = ("hinge multipliers" if kinked else "") + \
                (" and " if kinked and view.n_rows else "") + \
                ("constraint multipliers" if view.n_rows else "")
            cands.append((us, y, ex, f"{what} fitted to H V = 0 ({how})"))
            Vdom = pt.dominant()
            if Vdom is not None:
                # an interior-point solution carries many directions of eigenvalue ~1e-8
                # that the optimal H need not annihilate: fit on the dominant ones too
                us, y, how = _fit(view, pt, base, Vfit=Vdom)
                cands.append((us, y, ex, f"{what} fitted to H V = 0 on the dominant "
                                         f"{Vdom.shape[1]} directions of K ({how})"))
            if view.n_rows and any(np.any(b.sense != 0) for b in view.rows):
                # far from the optimum every inequality row may be inactive; a fit over all
                # rows (sign-constrained) still tightens the bound there
                us, y, how = _fit(view, pt, base, active_only=False)
                cands.append((us, y, ex, f"{what} fitted to H V = 0 on every row ({how})"))
    if solver is not None:
        # a conic solver's own multipliers (see :func:`_from_duals`): one more candidate
        s_us, s_y, complete = solver
        us = [u if su is None else su for u, su in zip(base, s_us)]
        ex = [su is None and t.loss.smooth for t, su in zip(view.terms, s_us)]
        cands.append((us, _clip_sign(view, s_y), ex,
                      "the solver's own multipliers" + ("" if complete else " (partial)")))
    best = best_uy = None
    mine: list = []
    # one candidate (no constraints, no kinks): its Lanczos run also gives the escape's
    # directions; several: each takes one eigenvalue, the escape one run for the best
    want = want if len(cands) == 1 else 0
    solver_cert = None
    for us, y, ex, how in cands:
        cert = _bound(view, pt, trace, us, y, ex, how, f, viol, dense_below, want, start, mine)
        if solver is not None and how.startswith("the solver's own"):
            solver_cert = cert
        if best is None or cert.lower_bound > best.lower_bound:
            best, best_uy = cert, (us, y)
            if pairs is not None:
                pairs[:] = list(mine)
    if solver_cert is not None and best is not solver_cert and \
            solver_cert.min_eig < 0 and (best.min_eig or 0) > 0:
        # the solver's minorant has lambda_min ~ -accuracy (its Z is PSD with zero
        # eigenvalues on range(K)), the best other one lambda_min > 0: a convex combination of
        # the two (valid: slopes and signs stay in their convex domains; its bound is at least
        # the combination of theirs, lambda_min concave) can have both a tight constant and
        # lambda_min >= 0, which needs no trace bound
        s_us, s_y = cands[-1][0], cands[-1][1]
        b_us, b_y = best_uy
        for th in (0.99, 0.9, 0.5):
            same = [np.array_equal(a, b) for a, b in zip(s_us, b_us)]
            us = [a if eq else th * a + (1 - th) * b for a, b, eq in zip(s_us, b_us, same)]
            y = th * s_y + (1 - th) * b_y
            # a term both give the same slopes keeps them exactly (a linear loss's conjugate
            # is finite at its one slope only); the others are bounded by their conjugates
            ex = [eq and t.loss.smooth for eq, t in zip(same, view.terms)]
            cert = _bound(view, pt, trace, us, y, ex,
                          f"the solver's own multipliers blended ({th:g}) with the {best.note.split(';')[0]}",
                          f, viol, dense_below, 0, start, None)
            if cert.lower_bound > best.lower_bound:
                best, best_uy = cert, (us, y)
    if not math.isfinite(best.lower_bound) and best.lower_bound < 0 and view.kappa == 0:
        raise _no_cert(f"no certificate: lambda_min of the minorant is {best.min_eig:.3g} < 0 and "
                       f"no bound on tr(K*) holds for this instance: {trace.reason()}")
    if sgn < 0:
        ub = -best.lower_bound
        gap = ub - f
        best = Certificate(objective=f, lower_bound=math.nan, gap=gap,
                           relative_gap=relative(gap, f, ub), min_eig=best.min_eig,
                           inner=best.inner, trace_bound=best.trace_bound,
                           eig_method=best.eig_method, note=best.note, sense="max",
                           upper_bound=ub, violation=viol)
    return best, pt, best_uy[0], best_uy[1]


def _bound(view, pt, trace, us, y, exact, how, f, viol, dense_below, want=0, start=None,
           pairs=None) -> Certificate:
    """One candidate: ``F* >= c + min(0, s) tau`` (and ``kappa c / (kappa + s)``).

    With ``want > 0`` (an escape), one Lanczos run gives both ``s`` and the ``want`` lowest
    eigenpairs, stored in ``pairs`` (a list) for the caller."""
    G = pt.gradient(us)
    if view.n_rows:
        G = G + _constraint_op(view, y)
    c = pt.constant(us, exact) - float(y @ _bounds_vec(view)) if view.n_rows else \
        pt.constant(us, exact)
    s = None
    if pairs is not None:
        pairs[:] = []
    if want > 0 and view.space.k > dense_below:
        # the pairs are kept even when Lanczos did not converge: they are what `lowest`
        # would return from the same run (before, escape repeated it: a1a, 2 x 18,044 products)
        vals, vecs, s = view.space.lowest_with_bound(G, want, dense_below, start=start)
        if pairs is not None:
            pairs[:] = [vals, vecs]
        eig_how = "lanczos"
    if s is None:
        s, eig_how = view.space.min_eig(G, dense_below)
    GV = np.asarray(G @ pt.Vp)
    inner = float(np.sum(pt.Vp * GV))
    notes = [how]
    if not _below_the_point(s, pt, GV):
        # the run missed the bottom: again, started from the point's own direction of least
        # curvature (the escape's pairs too), then from a random start
        x = _point_direction(pt, GV)
        again = None
        if want > 0 and view.space.k > dense_below:
            vals, vecs, again = view.space.lowest_with_bound(G, want, dense_below, start=x)
            if pairs is not None:
                pairs[:] = [vals, vecs]
        for start_again in (x, None):
            if again is not None and _below_the_point(again, pt, GV):
                break
            again, eig_how = view.space.min_eig(G, dense_below, start=start_again)
        notes.append(f"lambda_min read {s:.3g}, above the point's own <H, K> / tr K; "
                     f"computed again: {again:.3g}")
        s = again
        if not _below_the_point(s, pt, GV):
            notes.append("still above it: no bound from these multipliers")
            s = -math.inf
    lb, tau = -math.inf, math.nan
    if s >= 0:
        lb = c
        notes.append("lambda_min >= 0: no trace bound needed")
    if view.kappa > 0 and view.kappa + s > 0:
        # -kappa tr(K') = <G, K'> + c >= s tr(K') + c on the feasible set, for s of either
        # sign: tr(K*) (kappa + s) <= -c (with s > 0 this is below c's bound)
        k = view.kappa
        imp = k * c / (k + s)
        if imp > lb:
            lb, tau = imp, -c / (k + s)
            notes.append("F = -kappa tr(K): tr(K*) (kappa + s) <= -c")
    if s < 0 and not (view.kappa > 0 and view.kappa + s > 0):
        t = trace.get()
        if math.isfinite(t):
            cand = c + s * t
            if cand > lb:
                lb, tau = cand, t
                notes.append(trace.note)
        elif view.kappa > 0:
            notes.append("s <= -kappa: no bound from these multipliers")
    F = view.sign * f  # the minimisation's value at the point
    gap = F - lb
    return Certificate(objective=f, lower_bound=lb, gap=gap, relative_gap=relative(gap, F, lb),
                       min_eig=s, inner=inner, trace_bound=tau, eig_method=eig_how,
                       note="; ".join(notes), violation=viol)


# ====================================================================== divergences: the dual function
class _DualFunction:
    """The Lagrange dual function ``g(y) = min_W D(W, L) + <S_y, W> - y.b`` of a divergence
    over ``range(K0)`` (``L = diag(lam0)``, ``S_y = sum_p y_p S_p``), with its gradient
    ``<S_p, W(y)> - b_p`` at the minimiser ``W(y)``: ``(L^-1 + S_y)^-1`` (Burg) or
    ``exp(log L - S_y)`` (von Neumann).  Concave in ``y``; Burg's is ``-inf`` unless
    ``I + L^1/2 S_y L^1/2`` is positive definite.
    """

    def __init__(self, kind: str, lam0: np.ndarray, Phi: np.ndarray, b: np.ndarray) -> None:
        self.kind, self.lam0, self.Phi, self.b = kind, lam0, Phi, b
        self.h = np.sqrt(lam0)
        self.r = len(lam0)

    def _S(self, y: np.ndarray) -> np.ndarray:
        S = (self.Phi.T @ y).reshape(self.r, self.r, order="F")
        return (S + S.T) / 2

    def value(self, y: np.ndarray, grad: bool = False):
        """``(g, s)`` (``s`` = smallest eigenvalue of Burg's matrix, NaN for von Neumann), or
        ``(g, s, gradient)`` with ``grad``.  Far out (an infeasible problem's dual function
        grows without bound) ``exp`` overflows: ``g`` is then ``-inf`` or NaN, which the
        maximisation treats as a wall, so the overflow is not warned about."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self._value(y, grad)

    def _value(self, y: np.ndarray, grad: bool):
        S, h = self._S(y), self.h
        if self.kind == "burg":
            ev, U = np.linalg.eigh(np.eye(self.r) + (S * h[:, None]) * h[None, :])
            s = float(ev.min())
            if not s > 0:
                return (-math.inf, s, None) if grad else (-math.inf, s)
            g = float(np.sum(np.log(ev))) - float(y @ self.b)
            W = ((U / ev) @ U.T) * h[:, None] * h[None, :] if grad else None
        else:
            ev, U = np.linalg.eigh(np.diag(np.log(self.lam0)) - S)
            s = math.nan
            ex = np.exp(ev)
            g = float(np.sum(self.lam0) - np.sum(ex)) - float(y @ self.b)
            W = (U * ex) @ U.T if grad else None
        if not grad:
            return g, s
        return g, s, self.Phi @ W.ravel(order="F") - self.b

    def maximise(self, y0: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 max_iter: int = DUAL_MAX_ITER, seconds: float = DUAL_SECONDS
                 ) -> tuple[np.ndarray, float, float]:
        """L-BFGS-B on ``-g`` from ``y0`` within ``lo <= y <= hi``, at most ``max_iter``
        iterations and about ``seconds`` of wall time in all; returns ``(y, g, s)``, never
        worse than ``y0``.

        ``-g`` is divided by ``max(|g|, 1)`` at the start of a run, so that the gradient
        tolerance is relative; a fit near a face of the PSD cone can start at ``g = -3.5e12``
        where the optimum is 86.5, and a run scaled by that stops (its scaled gradient is
        below the tolerance) at ``g = -2,230`` (scipy 1.17).  So runs are repeated, each
        scaled by the value where the last one stopped, until one gains nothing
        (at most :data:`DUAL_ROUNDS` runs)."""
        from scipy.optimize import Bounds, minimize

        t_end = time.perf_counter() + seconds

        def stop(intermediate_result=None):
            if time.perf_counter() > t_end:
                raise StopIteration

        g0, s0 = self.value(y0)
        if not np.isfinite(g0) or len(y0) == 0:
            return y0, g0, s0
        best = (y0, g0, s0)
        left = int(max_iter)
        for _ in range(DUAL_ROUNDS):
            y_at, g_at = best[0], best[1]
            scale = max(abs(g_at), 1.0)

            def f(y, scale=scale):
                g, _, dg = self.value(y, grad=True)
                if not np.isfinite(g):  # outside Burg's domain: a wall the line search backs off
                    return 1e30, np.zeros_like(y)
                return -g / scale, -dg / scale

            try:
                res = minimize(f, y_at, jac=True, method="L-BFGS-B", bounds=Bounds(lo, hi),
                               callback=stop, options={"maxiter": left, "maxfun": 2 * left,
                                                       "ftol": 1e-15, "gtol": 1e-12})
            except (ValueError, np.linalg.LinAlgError):
                break
            y = np.clip(res.x, lo, hi)
            g, s = self.value(y)
            left -= int(res.nit)
            if not g > g_at:
                break
            best = (y, g, s)
            # a gain below the scale of the next run's tolerance: that run would stop at once
            if g - g_at <= 1e-12 * max(abs(g), 1.0) or left <= 0 or time.perf_counter() > t_end:
                break
        return best


def _certify_divergence(view: _View, V: np.ndarray, y_given: np.ndarray | None) -> Certificate:
    """``D(K*) >= g(y) = min_W D(W) + sum_p y_p (<S_p, W> - b_p)`` over ``W`` PSD, ``S_p =
    V0^T A_p V0``, in closed form:

    * Burg: ``g(y) = logdet(I + L^1/2 S_y L^1/2) - y.b`` (``-inf`` unless positive definite),
    * von Neumann: ``g(y) = tr(L) - tr exp(log L - S_y) - y.b``,

    with ``L = diag(lam0)``; ``y`` fitted to stationarity ``grad D(W) + S_y = 0`` at the
    point (``S_y = W^-1 - L^-1`` resp. ``log L - log W``), of the right sign, zero on
    inactive rows.
    """
    from scipy.optimize import lsq_linear

    decl = view.decl
    form = decl.form
    kind = view.divergence.kind
    K = LowRank(V)
    f = decl.objective(K)
    viol = float(decl.violation(K))
    W, _ = form.coordinates(K)
    lam0 = np.asarray(form.lam0, dtype=float)
    Phi = np.concatenate([b.map.functionals(form.V0) for b in view.rows], axis=0)  # (m, r*r)
    bvec = _bounds_vec(view)
    ev, Q = np.linalg.eigh(W)
    if y_given is not None:
        y = _clip_sign(view, y_given)
        how = "given multipliers"
    elif kind == "burg" and not ev.min() > 1e-12 * max(ev.max(), 1e-300):
        # D = +inf here (W singular): nothing to fit; y = 0 gives g = 0 (D >= 0)
        y = np.zeros(len(bvec))
        how = "y = 0 (W = V0^T K V0 is singular at this point: D is infinite, nothing to fit)"
    else:
        if kind == "burg":
            target = (Q / ev) @ Q.T - np.diag(1.0 / lam0)
        else:
            evc = np.maximum(ev, 1e-300)
            target = np.diag(np.log(lam0)) - (Q * np.log(evc)) @ Q.T
        vals = np.concatenate([b.map.apply(K) - b.bound for b in view.rows])
        sense = _senses(view)
        act = _active(sense, vals, bvec)
        lo, hi = _bounds_of(sense[act])
        y = np.zeros(len(bvec))
        if np.any(act):
            A = Phi[act].T
            sol = lsq_linear(A, target.ravel(order="F"), bounds=(lo, hi), lsmr_tol="auto",
                             max_iter=500)
            y[act] = np.clip(sol.x, lo, hi)
        how = "multipliers fitted to grad D(W) + S_y = 0 (bounded least squares)"
    dual = _DualFunction(kind, lam0, Phi, bvec)
    g, s = dual.value(y)
    if y_given is None:
        # the fit is poor where W has eigenvalues near 0 (log W); g is concave and smooth,
        # so a few bounded quasi-Newton steps from the fit find the multipliers
        y2, g2, s2 = dual.maximise(y, *_sign_bounds(view))
        if g2 > g:
            y, g, s = y2, g2, s2
            how += ", then the dual function maximised over y (L-BFGS-B)"
    name = "Burg dual function logdet(I + L^1/2 S_y L^1/2)" if kind == "burg" else \
        "von Neumann dual function tr(L) - tr exp(log L - S_y)"
    note = f"{name} - y.b; {how}"
    if y_given is None and not g >= 0.0:
        g = 0.0  # y = 0: the dual function is 0 (D >= 0)
        note += "; y = 0 bounds better (g(0) = 0)"
    gap = f - g
    return Certificate(objective=f, lower_bound=g, gap=gap, relative_gap=relative(gap, f, g),
                       min_eig=s, inner=math.nan, trace_bound=math.nan, eig_method="dense",
                       note=note, violation=viol)
