"""KL_ADMM: low-rank kernel learning by ADMM (Hu & Kwok 2013, Algorithm 1).

The kernel is split as ``K = V^T U`` with the consensus constraint ``V = U``
(Hu & Kwok 2013, eq. 5); the paper's ``V`` (``r x n``) is our ``G^T``.  Each half-step is
separable over points given the other factor, and every point's ``r x r`` system
(eq. 11-13) is solved through the Sherman-Morrison-Woodbury identity (eq. 25) as a
``|T_i| x |T_i|`` system.  A half-step is one compiled pass over the rows
(:mod:`._admm_kernels`, numba): each row's sparse product with M, the gather of its
neighbours' rows, its small Cholesky solve and (U-step) its multiplier, residual and
objective terms, with no temporaries of size n.

The factor 2 (docs/problems.md counts every pair once)
-------------------------------------------------
Hu & Kwok 2013, eq. 5 sums ``(v_i^T u_j - T_ij)^2`` over the pairs of ``T`` and uses
``T_i = {j : (i, j) in T}`` for every ``i``, i.e. it treats ``T`` as a symmetric set
of *ordered* pairs: at ``V = U`` an off-diagonal pair is then counted twice.  Here
the bi-convex function that ADMM minimises is

    F(V, U) = tr(V L U^T) + sum_{(i,j) ordered in T_sym} (c_ij / 2) (v_i^T u_j - t_ij)^2

with ``c_ij = w`` for an off-diagonal pair of weight ``w`` in the problem (counted
once there) and ``c_ii = 2 w_ii`` on the diagonal, so that ``F(G, G)`` is exactly
the problem's objective.  The method reads the problem's canonical form (:func:`why_not`,
:func:`admm_structure`) and, for its Ritz step, the factored oracle (:mod:`._subspace`):
any sparse linear cost ``<C, K>`` (``C = L`` here) plus any number of squared loss terms
``w sum_p (K_{i_p j_p} - t_p)^2`` on entries of K, no constraints; for instance

* P1 (PCP soft): ``w = gamma / 2`` on M, C and the diagonal, i.e. ``c_ij = gamma / 2``
  off the diagonal and ``c_ii = gamma``;
* P6 with the square loss: ``gamma (1 - T_ij K_ij)^2 = gamma (K_ij - T_ij)^2`` on
  M ∪ C, i.e. ``c_ij = gamma``, targets ``+-1``, no diagonal terms.

Updates (our row convention, ``v_i`` the i-th row of ``V``), with ``M = W_T - L`` and
``W_T`` the symmetric sparse matrix of ``c_ij t_ij`` on ``T``:

    A_i = rho I + sum_{j in T_i} c_ij u_j u_j^T,   c_i = (M U)_i + rho u_i - lambda_i,   v_i = A_i^{-1} c_i
    B_i = rho I + sum_{j in T_i} c_ij v_j v_j^T,   d_i = (M V)_i + rho v^_i + lambda_i,   u_i = B_i^{-1} d_i
    Lambda += rho (V^ - U),     V^ = relax V + (1 - relax) U   (over-relaxation; relax = 1: Algorithm 1)

and ``A_i^{-1} c = (c - P (rho I + P^T P)^{-1} P^T c) / rho`` with ``P = [sqrt(c_ij) u_j]``.
Residuals (eq. 14) are divided by ``sqrt(n r)``; rho follows eq. 15 with the floor
``rho_min = 1.5 ||L||_2`` by default (see docs/admm.md for why not the paper's 10).
By default the map ``(U, Lambda) -> (U+, Lambda+)`` is Anderson-accelerated (safeguarded by
its fixed-point residual; ``accelerate=None`` is Algorithm 1's iteration), and after the
solve the rank growth takes exact Ritz steps (``polish``; :mod:`._subspace`).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..result import Status
from .._pages import aligned, streamed
from ._anderson import Anderson
from ..model import RowKind
from ..model.canonical import Capabilities
from .base import DIVERGED_SCALE, IterativeSolver, SolverOutput
from .options import Boolean, FactorInit, Interval, Rank, StrOptions

__all__ = ["KLADMM", "TEST_RTOL", "admm_structure", "coupling_norm", "why_not"]

#: relative objective gap to the conic optimum that tests require
TEST_RTOL = 1e-4


#: ``rho_min = AUTO_RHO_FACTOR * ||L||_2`` when ``rho_min="auto"``
AUTO_RHO_FACTOR = 1.5


def coupling_norm(M: sp.spmatrix) -> float:
    """Spectral norm of a symmetric sparse matrix (dense for n <= 200, else a few Lanczos steps).

    Used with ``M = L``: the term ``tr(V L U^T)`` couples the two factors bilinearly
    with no curvature in either block, and rho must dominate it.
    """
    n = M.shape[0]
    if n <= 200:
        return float(np.max(np.abs(np.linalg.eigvalsh(M.toarray()))))
    from scipy.sparse.linalg import eigsh

    try:
        v0 = np.ones(n) / math.sqrt(n)
        w = eigsh(M, k=1, which="LM", tol=1e-3, v0=v0, return_eigenvectors=False, maxiter=10 * n)
        return float(abs(w[0]))
    except Exception:  # no convergence: fall back to the Gershgorin bound
        return float(np.max(np.asarray(abs(M).sum(axis=1)).ravel()))


# ----------------------------------------------------------------------------- structure
#: rows per partial sum of the residuals and the objective (the U-step's sums are kept per
#: block of SUM_ROWS rows, aligned to absolute row indices, and added in one fixed order; the
#: threads' row ranges are multiples of it, so that the sums do not depend on the threads)
SUM_ROWS = 256
#: the internal order is reverse Cuthill-McKee's, then by ``|T_i|`` within each stretch of
#: WINDOW rows (the kernels solve consecutive rows with the same ``|T_i|`` as one batch)
WINDOW = 4096


@dataclass
class _Structure:
    n: int
    M: sp.csr_matrix  # W_T - L in the internal order, sorted column indices
    tptr: np.ndarray  # (n + 1,) row i's terms are tptr[i]:tptr[i + 1] (its own diagonal term first)
    tnbr: np.ndarray  # each term's neighbour j (int32 below 2**31 points)
    tsw: np.ndarray  # sqrt(c_ij)
    tst: np.ndarray  # sqrt(c_ij) t_ij (the objective's targets)
    const: float  # sum c_ij t_ij^2 / 2 over the terms (the objective's constant)
    chunks: list[tuple[int, int]]  # the row ranges [a, b) of the threads
    pi: np.ndarray  # unordered off-diagonal pairs, internal indices
    pj: np.ndarray
    pw: np.ndarray  # problem weight w of each pair
    pt: np.ndarray  # target of each pair
    di: np.ndarray  # points with a diagonal term, internal indices (empty: none)
    dw: np.ndarray  # problem weight of each diagonal term
    dt: np.ndarray  # its target
    perm: np.ndarray  # internal row a is original point perm[a]
    iperm: np.ndarray  # original point k is internal row iperm[k]
    dall: bool = False  # di is every point once, in order

    @property
    def sizes(self) -> np.ndarray:
        """``|T_i|`` of every row (internal order)."""
        return np.diff(self.tptr)

    @property
    def smax(self) -> int:
        return int(self.sizes.max()) if self.n else 0

    @property
    def group_sizes(self) -> dict[int, int]:
        """How many points have ``|T_i| = s``, by ``s``."""
        counts = np.bincount(self.sizes)
        return {int(s): int(c) for s, c in enumerate(counts) if c}

    @property
    def own_terms(self) -> int:
        """Terms ``(i, i)`` (a point's own diagonal term: its row needs no gather)."""
        rows = np.repeat(np.arange(self.n), self.sizes)
        return int(np.count_nonzero(self.tnbr == rows))


def why_not(decl: Any) -> str | None:
    """Why KL_ADMM does not apply to a declaration (or a problem's), None when it does.

    KL_ADMM handles ``min <C, K> + sum_k w_k sum_p (K_{i_p j_p} - t_p)^2`` over ``K`` PSD:
    any sparse linear cost plus squared losses on entries of K (P1 and P6 with the
    square loss are this case), with no constraints and no divergence.  What it solves is
    then read from the canonical form (:func:`admm_structure`).
    """
    from ..model import canonical

    decl = getattr(decl, "declaration", decl)
    head = "admm handles a sparse linear cost plus squared losses on entries of K over K PSD"
    caps = KLADMM.capabilities
    why = caps.reason(decl, head)
    if why is not None:
        return why
    if not decl.losses:
        return f"{head}; this problem has no loss term (only linear terms)"
    why = caps.loss_reason(decl, "admm")
    if why is not None:
        return why
    if canonical(decl).C is None:
        return (f"{head}; this problem has a linear term with a dense adjoint "
                f"({', '.join(t.map.describe() for t in decl.linear)})")
    return None


def _terms(can: Any) -> tuple[Any, Any]:
    """The canonical form's squared-loss blocks: off-diagonal entries (every pair once, in the
    problem's counting) and diagonal entries ``K_ii``."""
    from ..model import RowKind, Squared

    return can.rows(Squared, RowKind.ENTRY), can.rows(Squared, RowKind.DIAGONAL)


def admm_structure(problem: Any, *, reorder: bool = True, block_rows: int | None = None) -> _Structure:
    """Precompute everything that does not change across iterations.

    Parameters
    ----------
    problem : a problem (or declaration) admm handles (see :func:`why_not`)
    reorder : bool
        Renumber the points by reverse Cuthill-McKee on the sparsity of ``M = W_T - L``
        (cache-friendly sparse products and gathers; the result is returned in the
        original order).
    block_rows : int, optional
        Rows per block, rounded up to a multiple of :data:`SUM_ROWS`; blocks are the unit of
        work of the threads.  Default: one block.

    Returns
    -------
    _Structure
        ``M`` and every row's terms ``(j, sqrt(c_ij))`` as CSR-like arrays.
    """
    from ..model import canonical

    why = why_not(problem)
    if why is not None:
        raise SolverError(f"admm: {why}")
    can = canonical(getattr(problem, "declaration", problem))
    off, dia = _terms(can)
    L = can.C
    n = int(L.shape[0])
    i, j = np.asarray(off.i, dtype=np.int64), np.asarray(off.j, dtype=np.int64)
    w, t = np.asarray(off.weight, dtype=float), np.asarray(off.data, dtype=float)
    vdi = np.asarray(dia.i, dtype=np.int64)
    vdw, vdt = np.asarray(dia.weight, dtype=float), np.asarray(dia.data, dtype=float)
    # ordered, symmetric pair list; c_ij = w off the diagonal, 2 w_ii on it
    oi = np.concatenate([i, j, vdi])
    oj = np.concatenate([j, i, vdi])
    oc = np.concatenate([w, w, 2.0 * vdw])
    ot = np.concatenate([t, t, vdt])
    WT = sp.csr_matrix((oc * ot, (oi, oj)), shape=(n, n))
    M = (WT - L).tocsr()
    if reorder and n > 2:
        from scipy.sparse.csgraph import reverse_cuthill_mckee

        perm = np.asarray(reverse_cuthill_mckee(M, symmetric_mode=True), dtype=np.int64)
    else:
        perm = np.arange(n, dtype=np.int64)
    # then by |T_i| within each WINDOW rows (stable): consecutive rows with the same |T_i| are
    # solved as one batch
    deg = np.bincount(oi, minlength=n)
    perm = perm[np.lexsort((deg[perm], np.arange(n) // WINDOW))]
    iperm = np.empty(n, dtype=np.int64)
    iperm[perm] = np.arange(n, dtype=np.int64)
    M = M[perm][:, perm].tocsr()
    M.sort_indices()
    index = np.int32 if n < 2**31 else np.int64
    oi, oj = iperm[oi], iperm[oj]
    order = np.lexsort((oj, oj != oi, oi))  # each point's own diagonal term first
    oi, oj, oc, ot = oi[order], oj[order], oc[order], ot[order]
    tptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(oi, minlength=n), out=tptr[1:])
    tsw = np.sqrt(oc)
    tst = tsw * ot
    if block_rows is None:
        block_rows = n
    block_rows = max(1, -(-int(block_rows) // SUM_ROWS)) * SUM_ROWS
    cuts = list(range(0, n, block_rows)) + [n]
    # the diagonal terms in the internal order (all points once: no gather per iteration)
    di = iperm[vdi]
    dord = np.argsort(di, kind="stable")
    return _Structure(n=n, M=M, tptr=tptr, tnbr=oj.astype(index), tsw=tsw, tst=tst,
                      const=0.5 * float(np.dot(tst, tst)), chunks=list(zip(cuts[:-1], cuts[1:])),
                      pi=iperm[i], pj=iperm[j], pw=w, pt=t,
                      di=di[dord], dw=vdw[dord], dt=vdt[dord], perm=perm, iperm=iperm,
                      dall=bool(np.array_equal(di[dord], np.arange(n))))


def _dot(A: np.ndarray, B: np.ndarray) -> float:
    """``<A, B>`` without BLAS (a threaded ddot costs more than it saves here)."""
    return float(np.einsum("ij,ij->", A, B, dtype=np.float64))


#: ``stop_gap="auto"``: the relative gap at which the rank growth and the Ritz steps stop, from
#: :data:`AUTO_STOP_GAP_N` points (100,000 two-Gaussian points: certified 5.5e-6 after the
#: first solve, where the curvature rule took two more steps and another certificate; a million:
#: the curvature rule alone went on for over half an hour); below, ``0`` (the curvature rule,
#: certified <= 1e-6, at a fraction of a second per step)
AUTO_STOP_GAP = 1e-5
AUTO_STOP_GAP_N = 100_000


# ----------------------------------------------------------------------------- solver
class KLADMM(IterativeSolver):
    """KL_ADMM (Hu & Kwok 2013, Algorithm 1): a sparse linear cost plus squared losses on entries.

    Any declaration ``min <C, K> + sum_k w_k sum_p (K_{i_p j_p} - t_p)^2`` over K PSD with
    no constraints (P1, soft PCP, and P6 with the square loss are two cases; see
    :func:`why_not` for the reason given otherwise).

    Options
    -------
    rank : int or None
        Rank ``r`` of the factor.  Default ``None``: start at rank 8 and grow while the
        certificate finds negative curvature, up to the problem's rank rule (largest ``r``
        with ``r (r + 1) / 2 <= m``); see :mod:`kernelforms.solvers.rank`.
    rho : float, default 100
        Initial penalty (Hu & Kwok 2013, footnote 2).
    max_iter : int, default 500
        ``IterMax`` (footnote 2; 100 on the adult sets).
    tol : float, default 1e-5
        Stop when ``max(primal, dual) < tol`` with the residuals of eq. 14 divided by
        ``sqrt(n r)`` (root-mean-square per entry, so that one tolerance fits every n).
        The paper gives no value; 1e-5 gave objective gaps of 1e-7 to 3e-6 on iris/wine.
    adaptive_rho : bool, default True
        Residual balancing of eq. 15 (double rho when primal > mu * dual, halve it,
        not below ``rho_min``, when dual > mu * primal).
    rho_min : float or "auto", default "auto"
        Lower bound of eq. 15.  The paper uses 10; ``"auto"`` is ``1.5 ||L||_2`` (about 3
        for a normalised Laplacian): below about ``||L||_2`` the bilinear coupling
        ``tr(V L U^T)`` oscillates, and a floor far above it makes every step short
        (wine: gap 5e-4 after 500 iterations with the floor 10, 1.5e-5 with "auto").
    mu : float, default 10
        Ratio threshold of eq. 15.
    relax : float in (0, 2), default 1.6
        Over-relaxation (Boyd et al. 2011, 3.4.3): ``alpha V + (1 - alpha) U`` replaces
        ``V`` in the U-update and the multiplier update; 1.0 is Algorithm 1 exactly.
    init : array (n, r) or None
        Starting factor; default ``N(0, 1/r)`` entries (``K_ii`` about 1) from the seed.
    reorder : bool, default True
        Reverse Cuthill-McKee renumbering for cache-friendly sparse products.
    threads : int, default 0
        Row blocks processed by a thread pool (0: 1 for small problems, else the available
        cores, at most 4, or ``KERNELFORMS_NUM_THREADS`` when set).
    block_rows : int or None
        Rows per block (default ``ceil(n / threads)``), rounded up to a multiple of
        :data:`SUM_ROWS` (the blocks of the residual sums).
    dtype : {"float64", "float32"}, default "float64"
        Storage precision of the iterates, M's values and the weights (each row's arithmetic
        is float64).  ``float32`` halves the memory traffic (for timing runs; objective
        accuracy about 1e-6 relative).
    track_objective : bool, default True
        Record the objective at every iteration in the history (computed in the U-step
        from the rows it reads anyway: a few operations per term, no extra pass).
    accelerate : "anderson" or None, default "anderson"
        Anderson acceleration (type II, depth ``anderson_depth``) of the ADMM map
        ``(U, Lambda) -> (U+, Lambda+)``, safeguarded by its fixed-point residual: a candidate
        is kept only if the next iteration's residual ``||T(x) - x||`` is below the last
        accepted one, else the run goes back to the plain step (Zhang et al. 2019).
        Costs ``2 anderson_depth + 6`` more ``n x 2r`` arrays and ``O(n r depth)`` per
        iteration; cuts the iterations 2-5x (docs/admm.md).  Not part of Hu & Kwok 2013:
        ``None`` is Algorithm 1's iteration.
    anderson_depth : int, default 5
        Differences kept by the acceleration.
    anderson_start : float, default 1e-3
        The acceleration starts once ``max(primal, dual)`` is below this: extrapolating
        from the first, far-from-stationary iterates can carry the factor into another
        basin (two Gaussians, n = 100,000, d = 5: objective 18,072 against 3,820).
    polish : bool, default True
        After ADMM converges, while the Lagrangian certificate finds negative curvature,
        take exact Ritz steps: minimise the objective over ``K = B Y B^T``, ``Y`` PSD, with
        ``B`` spanning the factor and the certificate's escape directions (a small cone
        program; :mod:`kernelforms.solvers._subspace`).  ADMM is slow on the optimum's small
        eigenvalues: at 100,000 points it stops with a certified gap of 9e-3 and three Ritz
        steps take it below 1e-8.  Not part of Hu & Kwok 2013; ``False`` is Algorithm 1
        (with the rank growth of :mod:`kernelforms.solvers.rank` when ``rank=None``).
        With ``rank`` given, the steps keep that rank.
    stop_gap : float >= 0 or "auto", default "auto"
        The rank growth and the Ritz steps stop as soon as the Lagrangian certificate (with
        its diagonal shift) proves the point within this relative gap of the optimum, even
        while it still finds negative curvature (a million two-Gaussian points: the first
        solve at rank 8 is certified 9.4e-6; the curvature rule alone went on for over half
        an hour).  ``0``: only the curvature rule (share <= 5e-7, certified gap <= 1e-6).
        ``"auto"``: :data:`AUTO_STOP_GAP` from :data:`AUTO_STOP_GAP_N` points, where each
        certificate of the rank growth costs seconds to minutes, else ``0`` (the tighter
        point costs a fraction of a second there).
    """

    name = "admm"
    #: min over K PSD, no divergence, no constraints, squared losses on entries K_ij
    capabilities = Capabilities(constraints=False, loss_property="is_squared", loss_word="squared",
                                loss_rows=(RowKind.ENTRY, RowKind.DIAGONAL), rows_word="entries K_ij")
    formulation_name = "factored V^T U, V = U (ADMM)"
    grows_rank = True
    #: the rank growth and the Ritz steps stop once the certificate proves ``stop_gap``
    stops_on_gap = True
    defaults: ClassVar[dict[str, Any]] = {
        "rank": None,
        "rho": 100.0,
        "max_iter": 500,
        "tol": 1e-5,
        "adaptive_rho": True,
        "rho_min": "auto",
        "mu": 10.0,
        "init": None,
        "relax": 1.6,
        "reorder": True,
        "threads": 0,
        "block_rows": None,
        "track_objective": True,
        "dtype": "float64",
        "accelerate": "anderson",
        "anderson_depth": 5,
        "anderson_start": 1e-3,
        "polish": True,
        "stop_gap": "auto",
    }
    parameter_constraints: ClassVar[dict[str, list]] = {
        "rank": [Rank(), None],
        "rho": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "adaptive_rho": [Boolean()],
        "rho_min": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "mu": [Interval(Real, 1, None, closed="neither")],
        "init": [FactorInit(), None],
        "relax": [Interval(Real, 0, 2, closed="neither")],
        "reorder": [Boolean()],
        "threads": [Interval(Integral, 0, None, closed="left")],
        "block_rows": [Interval(Integral, 1, None, closed="left"), None],
        "track_objective": [Boolean()],
        "dtype": [StrOptions({"float64", "float32"})],
        "accelerate": [StrOptions({"anderson"}), None],
        "anderson_depth": [Interval(Integral, 1, 50, closed="both")],
        "anderson_start": [Interval(Real, 0, None, closed="neither")],
        "polish": [Boolean()],
        "stop_gap": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
    }

    def applies_to(self, problem: Any) -> str | None:
        return why_not(problem.declaration)

    # ------------------------------------------------------------------ polish
    def refines(self, opts: dict[str, Any]) -> bool:
        return bool(opts.get("polish", True))

    def refine(self, problem: Any, factor: np.ndarray, directions: np.ndarray,
               opts: dict[str, Any], max_cols: int, *, thorough: bool = False,
               ) -> tuple[np.ndarray | None, dict[str, Any]]:
        """One exact Ritz step over ``span[factor, directions]`` (see :mod:`._subspace`); with
        ``thorough`` (ADMM stopped at max_iter, its point is not stationary within its own span
        and its neighbours) also over the gradient directions ``H G``."""
        from ..model import oracle
        from ._subspace import ritz_step

        return ritz_step(oracle(problem.declaration), np.asarray(factor, dtype=float), directions,
                         max_cols=max_cols, gradient=thorough)

    # ------------------------------------------------------------------ options
    def estimate_memory(self, problem: Any, opts: dict[str, Any]) -> int | None:
        """Peak bytes of a run: the larger of the ADMM solve and what follows it (the
        certificate's eigensolves of the rank growth, the subspace step), which never
        overlap (the solve's arrays are freed when it returns).

        The solve: ``5 n r`` values (U and Lambda, V, the new V, the start), with Anderson
        acceleration ``4 depth + 12`` more (its differences of the state ``(U, Lambda)``, the
        saved and extrapolated states, the residuals), M (12 bytes per nonzero) and the pair
        structure (about 60 bytes per pair row); the compiled half-steps work row by row in
        ``O(r + |T_i|^2)`` scratch.
        After the solve: the factor and :func:`kernelforms.solvers.memory.certificate_bytes`
        (with the certificate's kept Lanczos vectors, 2 GiB counted), or the subspace step's
        :func:`~kernelforms.solvers.memory.ritz_bytes` with ``polish``."""
        from ..model import canonical
        from . import memory as mm
        from ._subspace import _CHUNK, MAX_SUBSPACE

        try:
            n = int(problem.n)
            r = int(self.working_rank(problem, opts))
            if why_not(problem.declaration) is not None:
                return None
            can = canonical(problem.declaration)
            off, dia = _terms(can)
            pairs = off.size
            terms = dia.size + 2 * pairs  # sum |T_i| (the diagonal terms and both ends of a pair)
            nnz = int(can.C.nnz) + terms
        except (AttributeError, TypeError, ValueError):
            return None
        arrays = 5
        if opts.get("accelerate", "anderson") == "anderson":
            arrays += 4 * int(opts.get("anderson_depth", 5)) + 12
        F = mm.F
        working = F * arrays * n * r + 12 * nnz + 60 * terms
        extra = 0
        rows = n + pairs
        if opts.get("rank") is None or self.refines(opts):
            extra = mm.certificate_bytes(n, rows)
            if self.refines(opts):
                extra = max(extra, mm.ritz_bytes(n, rows, MAX_SUBSPACE, _CHUNK))
            extra += F * n * r
        return int(max(working, extra))

    def stop_gap(self, problem: Any, opts: dict[str, Any]) -> float:
        """The ``stop_gap`` option resolved for ``problem`` (``"auto"``: by its size)."""
        value = opts.get("stop_gap", "auto")
        if isinstance(value, str):
            return AUTO_STOP_GAP if int(problem.n) >= AUTO_STOP_GAP_N else 0.0
        return float(value)

    def _check(self, problem: Any, opts: dict[str, Any]) -> dict[str, Any]:
        """Resolve the defaults; every option was checked against
        :attr:`parameter_constraints` by ``run``.  Only the start needs the problem and
        the rank (its shape must be ``(n, rank)``)."""
        from ..errors import OptionError

        n = problem.n
        o = dict(opts)
        o["rank"] = int(problem.default_rank() if o["rank"] is None else o["rank"])
        o["rho_min"] = None if isinstance(o["rho_min"], str) else float(o["rho_min"])
        for key in ("rho", "tol", "mu", "relax", "anderson_start"):
            o[key] = float(o[key])
        o["max_iter"], o["threads"] = int(o["max_iter"]), int(o["threads"])
        if o["init"] is not None:
            G0 = np.asarray(o["init"], dtype=float)
            if G0.shape != (n, o["rank"]):
                raise OptionError(f"The 'init' option of admm must be a finite array of shape "
                                  f"(n, rank) = ({n}, {o['rank']}) (the rank option, or the default "
                                  f"rank {problem.default_rank()}). Got shape {G0.shape} instead; "
                                  "pass rank=init.shape[1].")
            o["init"] = G0
        return o

    # ------------------------------------------------------------------ algorithm
    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        o = self._check(problem, opts)
        t0 = time.perf_counter()
        n, r = problem.n, o["rank"]
        from ..model import canonical

        C = canonical(problem.declaration).C  # applies_to checked it: sparse
        threads = o["threads"]
        if threads == 0:
            threads = _auto_threads(C.nnz, n, r)
        block_rows = o["block_rows"]
        if block_rows is None:
            block_rows = -(-n // threads)
        S = admm_structure(problem, reorder=o["reorder"], block_rows=block_rows)
        # the start is drawn in the original order, so renumbering does not change it
        G0 = rng.standard_normal((n, r)) / math.sqrt(r) if o["init"] is None else o["init"]
        dtype = np.dtype(o["dtype"])
        # U and Lambda are the two halves of one array: the state of the ADMM map.  Lambda and
        # the new V are first written here, in the setup: a fresh zero array read before it
        # is written (Lambda in the first V-step) maps the kernel's zero page, then copies it
        # on the first write, inside the kernels
        # (rows on cache lines: the half-steps read rows of U and V at random)
        state = aligned((2, n, r), dtype)
        U, Lam = state[0], state[1]
        U[...] = G0[S.perm]
        Lam.fill(0.0)
        from . import _admm_kernels as kern  # compiled on first use (numba), cached on disk

        # the working precision's copies of M's values and the terms' weights (float32 halves
        # their bytes; every row's arithmetic is float64 in the kernels)
        Mp, Mi, Md = S.M.indptr, S.M.indices, S.M.data.astype(dtype, copy=False)
        tptr, tnbr, tsw = S.tptr, S.tnbr, S.tsw.astype(dtype, copy=False)
        smax = S.smax
        V = aligned((n, r), dtype)
        V[...] = U
        Vnew = aligned((n, r), dtype)
        Vnew.fill(0.0)  # (overwritten by the first V-step)
        alpha = o["relax"]
        rho = o["rho"]
        rho_min = o["rho_min"]
        if rho_min is None:
            # kept on the declaration: every solve of the rank growth reads the same C
            # (a few Lanczos steps, 4 CPU seconds at a million points)
            from ..model.chain import derived

            rho_min = AUTO_RHO_FACTOR * derived(problem.declaration, "admm_coupling_norm",
                                                lambda d: coupling_norm(C))
        track = o["track_objective"]
        scale = 1.0 / math.sqrt(n * r)
        hist: dict[str, list] = {"objective": [], "primal": [], "dual": [], "rho": [], "time": []}
        # the U-step's partial sums (primal, dual, objective) per block of SUM_ROWS rows
        parts = np.zeros((-(-n // SUM_ROWS), 3))
        pool = ThreadPoolExecutor(threads) if threads > 1 and len(S.chunks) > 1 else None
        log = self.iteration_log(o, header=f"n = {n}, rank = {r}, {threads} thread(s), rho_min = {rho_min:.3g}",
                                 extra=("rho",), residual="max(p, d)")

        def run(fn):
            if pool is None:
                for ch in S.chunks:
                    fn(ch)
            else:
                list(pool.map(fn, S.chunks))

        # the prefetch distances and the group kernels (every argument passed: one compiled
        # signature shared with the tests)
        ahead = (kern.AHEAD_M, kern.AHEAD_T, True)

        def v_step(ch: tuple[int, int]) -> None:
            # eq. 7, 13: c_i = (M U)_i + rho u_i - lambda_i ; v_i = A_i^{-1} c_i
            kern.v_step(ch[0], ch[1], Mp, Mi, Md, tptr, tnbr, tsw, smax, U, Lam, rho, Vnew, *ahead)

        def u_step(ch: tuple[int, int]) -> None:
            # eq. 8, 13: d_i = (M V)_i + rho h_i + lambda_i ; u_i = B_i^{-1} d_i; the multiplier
            # (Algorithm 1 line 8), the residuals (eq. 14) and the objective at V
            kern.u_step(ch[0], ch[1], Mp, Mi, Md, tptr, tnbr, tsw, smax, V, Vold, U, Lam, rho,
                        alpha, alpha != 1.0, track, parts, SUM_ROWS, *ahead)

        # load (or compile) the kernels for these types now, on an empty range of rows: the
        # setup's time, not the first iteration's
        kern.v_step(0, 0, Mp, Mi, Md, tptr, tnbr, tsw, smax, U, Lam, rho, Vnew, *ahead)
        kern.u_step(0, 0, Mp, Mi, Md, tptr, tnbr, tsw, smax, V, V, U, Lam, rho, alpha,
                    alpha != 1.0, track, parts, SUM_ROWS, *ahead)

        aa = (Anderson(int(o["anderson_depth"]), threads=threads)
              if o["accelerate"] == "anderson" else None)
        if aa is not None:
            # copied and passed in order: on 4 KiB pages (see kernelforms._pages.streamed)
            x_in = streamed(state.shape, dtype)  # the state the current iteration started from
            fallback = streamed(state.shape, dtype)  # the plain step from the last accepted state
            hist["accelerated"] = []
        accelerated, res_ok, n_acc, n_rej, active = False, math.inf, 0, 0, False

        setup = time.perf_counter() - t0
        cpu0 = time.process_time()
        status, message, it = Status.MAX_ITER, "", 0
        try:
            for it in range(1, o["max_iter"] + 1):
                if aa is not None:
                    np.copyto(x_in, state)
                run(v_step)
                Vold, V, Vnew = V, Vnew, V
                run(u_step)
                tot = parts.sum(axis=0)  # the blocks in one fixed order, whatever the threads
                primal = math.sqrt(tot[0]) * scale
                dual = rho * math.sqrt(tot[1]) * scale
                if track:
                    hist["objective"].append(float(tot[2]) + S.const)
                hist["primal"].append(primal)
                hist["dual"].append(dual)
                hist["rho"].append(rho)
                hist["time"].append(time.perf_counter() - t0)
                if aa is not None:
                    hist["accelerated"].append(accelerated)
                log.row(it, objective=hist["objective"][-1] if track else None,
                        residual=max(primal, dual), rank=r, rho=rho)
                if not (math.isfinite(primal) and math.isfinite(dual)):
                    status, message = Status.NUMERICAL_ERROR, f"non-finite residuals at iteration {it}"
                    break
                if _dot(V, V) > DIVERGED_SCALE * n:
                    # the factor leaves every bounded scale: stop while it is finite, so that
                    # the run's recession test (base.diverging) can name the direction
                    status, message = (Status.NUMERICAL_ERROR,
                                       f"the factor is diverging (mean K_ii above {DIVERGED_SCALE:g}) "
                                       f"at iteration {it}")
                    break
                if max(primal, dual) < o["tol"]:
                    status, message = Status.CONVERGED, f"max(primal, dual) < tol = {o['tol']:g}"
                    break
                if deadline is not None and time.perf_counter() > deadline:
                    status, message = Status.TIMEOUT, f"time limit reached after {it} iterations"
                    break
                rho_old = rho
                if o["adaptive_rho"]:  # eq. 15
                    if primal > o["mu"] * dual:
                        rho = 2.0 * rho
                    elif dual > o["mu"] * primal:
                        rho = max(rho / 2.0, rho_min)
                if aa is not None and (active or max(primal, dual) <= o["anderson_start"]):
                    active = True
                    if rho != rho_old:  # another map: the history does not describe it
                        aa.reset()
                        accelerated, res_ok = False, math.inf
                        continue
                    # the candidate overwrites x_in (read first; copied again next iteration)
                    cand = aa.candidate(x_in, state, out=x_in)
                    if accelerated and not aa.residual_norm < res_ok:
                        # the extrapolated state did worse than the plain step it replaced
                        # (its pair stays in the history: it is a true evaluation of the map)
                        np.copyto(state, fallback)
                        accelerated, n_rej = False, n_rej + 1
                        continue
                    res_ok = aa.residual_norm
                    accelerated = cand is not None
                    if accelerated:
                        np.copyto(fallback, state)
                        np.copyto(state, cand)
                        n_acc += 1
        finally:
            if pool is not None:
                pool.shutdown()
        if status is Status.MAX_ITER:
            message = f"max_iter = {o['max_iter']} reached (primal {primal:.2e}, dual {dual:.2e}, tol {o['tol']:g})"
        G = np.asarray(V[S.iperm], dtype=np.float64)
        extras = {"rank": r, "rho_final": rho, "rho_min": rho_min, "setup_time": setup,
                  "cpu_time_iterations": time.process_time() - cpu0,
                  "threads": threads, "blocks": len(S.chunks), "groups": S.group_sizes}
        if aa is not None:
            extras["anderson"] = {"accepted": n_acc, "rejected": n_rej}
        return SolverOutput(factor=G, status=status, iterations=it, history=hist,
                            message=message, extras=extras)


def _auto_threads(nnz: int, n: int, r: int) -> int:
    """Threads for the row blocks: 1 for small problems (thread overhead), else
    :func:`kernelforms._parallel.threads` (the available cores, at most 4, or
    ``KERNELFORMS_NUM_THREADS``)."""
    from .._parallel import threads

    if (nnz + n) * r < 2_000_000:
        return 1
    return threads()
