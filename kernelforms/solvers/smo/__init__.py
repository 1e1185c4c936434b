"""Hoi, Jin & Lyu's SMO-like dual solver for hinge NPKL ("smo"; Hoi, Jin & Lyu 2007).

Dual of P6 with the hinge loss (Hoi et al. 2007, "Dual Formulation"; docs/problems.md counts each pair once,
so a pair's multiplier enters ``M`` as ``Q_p T_p / 2`` at ``(i, j)`` and ``(j, i)``)::

    max  sum_p Q_p   s.t.  0 <= Q_p <= gamma,   M(Q) = L - sum_p (Q_p T_p / 2) (E_ij + E_ji)  PSD

SMO-like step (Hoi et al. 2007, eqs. 7-8): maximise over one ``Q_p`` with the others fixed.  With
``A`` = ``M`` without pair ``p``'s term, split into the 2 x 2 block on ``{k, l}``, the
border ``W`` (``(n-2) x 2``) and the rest ``A_2``, the constraint is the Schur-complement
condition ``A_1 - W^T A_2^{-1} W >= 0`` with ``G = W^T A_2^{-1} W``, i.e.

    L_kk >= G_11,  L_ll >= G_22,  |G_12 + T q - L_kl| <= mu = sqrt((L_kk - G_11)(L_ll - G_22))

with ``q = Q_p / 2`` (Hoi et al.'s ``Q_kl`` counts the ordered pair).  Hence the closed form

    Q_p = clip(2 (mu - T G_12 + T L_kl), 0, gamma)          (Hoi et al.: Q_kl = min(c, mu - T G_12 + T L_kl))

``A_2^{-1} W`` comes from a conjugate-gradient solve with the two columns of ``W`` as
right-hand sides at once (no inverse is formed; ``A_2`` is ``M`` restricted to the rows
and columns other than ``k, l``; ``W`` is read from rows ``k, l`` of the CSR ``M``; each
pair's CG starts from its previous solution).

Why a barrier.  Taken literally, the update above is coordinate ascent of a *linear*
function over the convex set ``{M(Q) PSD}``: the first sweep drives ``M`` onto the
boundary (singular) and from there no single coordinate can move although the dual is
not optimal (measured on the 30-point blobs instance with gamma = 1: it stops after 2
sweeps at ``sum Q = 0.286`` while the optimum is 0.808).  So each step maximises
``sum_p Q_p + mu log det M(Q)`` over the one entry instead, again in closed form: with
``u = b - T q`` (``b = L_kl - G_12``, ``a c = (L_kk - G_11)(L_ll - G_22)``) the optimum is the
root ``u = T (mu - sqrt(mu^2 + 4 a c)) / 2`` of ``u^2 - T mu u - a c = 0``, and
``q = T (b - u) -> sqrt(a c) + T b`` as ``mu -> 0``, which is Hoi et al.'s formula.

Central path and certificate.  At the barrier optimum for ``mu``, ``K_mu = mu M(Q)^{-1}``
is PSD (P6 hinge has no other primal constraint) and the stationarity in ``Q_p`` reads
``T_p (K_mu)_p = 1`` for ``0 < Q_p < gamma``, ``>= 1`` at 0, ``<= 1`` at gamma; hence
``tr(L K_mu) = tr(M K_mu) + sum_p Q_p T_p (K_mu)_p = n mu + ...`` and exactly
``primal(K_mu) - sum Q = n mu + c(Q)`` with the centrality
``c(Q) = sum_p [Q_p (T_p K_p - 1) + gamma max(0, 1 - T_p K_p)] >= 0``, zero on the path.
A stage ends when ``c(Q) <= center_tol * n mu`` (it needs ``K_mu`` at the pairs only:
``M^{-1}`` on the pairs' points, from the Cholesky factor below); ``mu`` is then
multiplied by ``barrier_factor``.  ``sum Q`` is a valid lower bound whenever ``M(Q)`` is
PSD.

Deviation 1: extrapolation.  Coordinate ascent on the barrier function converges slowly
as ``mu`` shrinks (one soft direction of the dual face: hundreds to thousands of sweeps
per stage at ``mu <= 1e-3``).  After each sweep a doubling line search on
``sum Q + mu log det M(Q)`` (dense Cholesky of ``M``) moves ``Q`` along the sweep's
displacement, box by clipping (measured on the 20-point test instance: 24 instead of 234
sweeps for the stage at ``mu = 1e-2``, 99 instead of 1192 at ``mu = 1e-3``).

Primal recovery (Hoi et al. 2007, "Efficient Dual Algorithm"): ``M K = 0``, so ``K = U B U^T`` with
``U`` spanning the (numerical) null space of ``M`` and ``B`` from the reduced primal
(Hoi et al. 2007, eq. 6) over a ``d x d`` PSD matrix (Clarabel).  ``U`` starts as the
eigenvectors of ``M`` with eigenvalue ``<= subspace_ratio * lambda_min(M)``, i.e. the
directions where ``K_mu``'s eigenvalue ``mu / lambda`` is within that factor of its
largest (2 .. m + 1 of them; extra directions are harmless: the reduced primal still
contains the solution, it only gets bigger).

Deviation 2: refinement and certificate (the dual is only approximate).  The reduced
primal's multipliers ``Q_r`` of its margin constraints are dual feasible except possibly
for ``M(Q_r) PSD``; the eigenvectors of ``M(Q_r)`` with negative eigenvalues are exactly
the directions in which the reduced solution is not optimal for the full problem, so they
are added to ``U`` and the reduced primal is solved again (``max_rounds``).  Lower bounds
(all valid): ``sum Q`` (``M(Q)`` PSD); ``(1 - th) sum Q_r + th sum Q`` with the smallest
``th`` making ``(1 - th) M(Q_r) + th M(Q)`` PSD (a generalised eigenvalue; ``M(Q)`` is
positive definite on the barrier path); ``sum Q_r + lambda_min(M(Q_r)) tr K*`` with
``tr K* <= primal / lambda_min(L)``.  The solver stops when ``primal - bound <= tol |primal|``.
The recovery is tried at the end of every stage with ``mu <= recover_below``.

What it solves, read from the canonical form (:func:`why_not`): a sparse linear cost ``<C, K>``
(``tr(L K)`` in P6) plus one or more hinge loss terms on off-diagonal entries ``K_ij``
(labels ``T_p``), over K PSD, without constraints.  Terms of different weights give each
pair its own box ``0 <= Q_p <= gamma_p`` (the dual above, term by term); equal weights are
P6's single ``gamma``.  A cost with a negative eigenvalue makes the problem unbounded;
up to ``DENSE_MAX`` points that is reported (status ``unbounded``, the direction in
``extras``) before any sweep.

Above ``DENSE_MAX`` points the dense parts (line search, centrality, refinement,
certificate) are skipped: plain barrier sweeps with the old stage rule (no multiplier
moved by more than ``0.01 mu``) and one reduced primal on a Lanczos basis of ``M``.

The package: :mod:`.numerics` (conjugate gradients, the pair matrix, the reduced primal's
size model), :mod:`.recovery` (the hinge rows of the canonical form, the reduced primal and
its refinement); :func:`why_not` (what it takes) and the ascent, :class:`HoiSMO`, are here.
"""

from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ...model.canonical import PSD_MINIMISATION
from ...problems import rank_rule
from ...result import Status
from ..base import IterativeSolver, SolverOutput, format_bytes
from ..options import Boolean, Interval
from .numerics import (  # noqa: F401 - re-exported
    DENSE_MAX,
    _basis_cap,
    _cg_pair,
    _chol,
    _pair_matrix,
    _svec_index,
    blas_threads,
    default_max_basis,
    largest_basis_within,
    reduced_primal_bytes,
    reduced_primal_seconds,
)
from .recovery import Recovery, gamma_of, hinge_rows


def why_not(decl: Any, name: str = "smo") -> str | None:
    """Why the SMO-like dual solver does not apply to a declaration (None when it does),
    read from its canonical form (:func:`kernelforms.model.canonical`).

    Applies to: minimise ``<C, K> + sum_k gamma_k sum_p max(0, 1 - y_p K_ij)`` over K PSD,
    with ``C`` sparse (the linear terms, e.g. ``tr(L K)``), one or more hinge loss terms on
    off-diagonal entries ``K_ij`` (each pair at most once over all terms; the weights may
    differ) and no constraints: the dual of Hoi et al. (2007) with a box ``[0, gamma_k]``
    per pair.  (Without constraints the chain of reductions leaves such a declaration as
    it is.)
    """
    from ...model import Hinge, RowKind, canonical

    decl = getattr(decl, "declaration", decl)
    what = (f"{name!r} solves min <C, K> + sum of hinge losses on off-diagonal entries K_ij over "
            "K PSD, with no constraints (the dual of Hoi et al. 2007)")
    why = HoiSMO.capabilities.reason(decl, what)
    if why is not None:
        return why
    if decl.constraints:
        return f"{what}; this problem has {decl.n_constraint_rows} constraint rows"
    if not decl.losses:
        return f"{what}; this problem has no loss term"
    can = canonical(decl)
    for blk in can.loss_blocks:
        t = can.decl.losses[blk.terms[0][0]]
        if not issubclass(blk.loss_type, Hinge):
            return f"{what}; this problem has a {blk.name} loss term ({t.describe()})"
        if blk.kind != RowKind.ENTRY:
            return (f"{what}; the hinge term '{t.describe()}' is on {t.map.describe()}, not on "
                    "off-diagonal entries K_ij")
    if not decl.linear:
        return f"{what}; this problem has no linear term <C, K> (the dual's M(Q) starts at C)"
    if can.C is None:
        return (f"{what}; a linear term of this problem has a dense matrix "
                f"({', '.join(t.describe() for t in decl.linear)}), not a sparse C")
    rows = can.rows(Hinge, RowKind.ENTRY)
    n = can.n
    key = np.minimum(rows.i, rows.j) * n + np.maximum(rows.i, rows.j)
    if np.unique(key).size < key.size:
        return (f"{what}; a pair appears twice among the hinge terms (each pair K_ij may carry "
                "one hinge loss)")
    return None

__all__ = ["HoiSMO", "TEST_RTOL", "SMO_RTOL", "reduced_primal_bytes", "reduced_primal_seconds",
           "default_max_basis", "largest_basis_within"]

#: the promise: the recovered primal within 1e-4 relative of the full-SDP optimum
#: (measured 1e-8 .. 1e-7 with the default ``tol``; see docs/other_solvers.md)
SMO_RTOL = 1e-4
TEST_RTOL = SMO_RTOL


class HoiSMO(IterativeSolver, Recovery):
    """``"smo"``: Hoi et al.'s dual coordinate ascent with closed-form single-entry updates.

    Options
    -------
    max_sweeps : int >= 1
        Passes over all pairs (in total, over all barrier stages).
    tol : float > 0
        Stop when the certified duality gap ``primal - lower bound`` of the recovered
        kernel is at most ``tol * |primal|`` (module notes).
    cg_tol : float > 0
        Relative residual of the CG solves.
    seed_order : bool
        Visit the pairs in a random order each sweep (else in order).
    barrier0, barrier_min, barrier_factor : float
        Log-det barrier path: each single-entry step maximises ``sum Q + mu log det M(Q)``
        in closed form (Hoi et al.'s update is the limit ``mu -> 0``); ``mu`` starts at
        ``barrier0`` (``>= 0``) and is multiplied by ``barrier_factor`` (in ``(0, 1)``) once
        the iterate is centred, down to ``barrier_min`` (``> 0``).  ``barrier0 = 0`` runs
        Hoi et al.'s plain update, which stalls.
    center_tol : float > 0
        A stage ends when ``primal(K_mu) - sum Q - n mu <= center_tol * n mu`` with
        ``K_mu = mu M(Q)^{-1}`` (zero exactly on the central path).
    extrapolate : bool
        After each sweep, a doubling line search on the barrier function along the
        sweep's displacement (deviation from Hoi et al. 2007; module notes).
    recover_below : float > 0
        Try the recovery (and its certificate) at the end of every stage with
        ``mu <= recover_below``.
    subspace_ratio : float >= 1
        Initial recovery basis: eigenvectors of ``M`` with eigenvalue
        ``<= subspace_ratio * lambda_min(M)`` (``K_mu``'s eigenvalues within that factor
        of its largest), at least 2 and at most ``m + 1``.
    max_rounds : int >= 1
        Reduced primals per recovery (the basis grows between them).
    max_basis : int >= 2 or None
        Most directions in the recovery basis; None: ``4 r + 10`` with ``r = rank_rule(m)``
        (:func:`default_max_basis`), and never more than ``min(m + 1, n)``.  The reduced
        primal's memory grows like ``max_basis^4`` (:func:`reduced_primal_bytes`; 0.28 GiB
        at n = 60, m = 72; 3.6 GiB at n = m = 400) and the memory guard counts it at this
        cap, so a large problem is refused under ``max_memory`` unless the cap is lowered
        (the refusal names the largest cap that fits); a basis at the cap may leave the
        certified gap above ``tol`` (status ``max_iter``, the gap in ``extras``).
    threads : int >= 1 or None
        BLAS threads during the solve (``threadpoolctl``; None: no limit).  1 by default:
        the products are small and threaded BLAS on a loaded machine was up to 100x slower.

    Time limit: the sweeps (checked before every pair update), the line search, the CG
    solves and the recovery (each step, and Clarabel gets the remaining time) all check
    the deadline.  On expiry the best recovered kernel is returned with status
    ``timeout``, or, when no recovery has run yet, the central-path point
    ``K_mu = mu M(Q)^{-1}`` (feasible, with the lower bound ``sum Q``).
    """

    name = "smo"
    #: min over K PSD, no divergence (the rest: :func:`why_not`, on the canonical form)
    capabilities = PSD_MINIMISATION
    formulation_name = "dual of hinge NPKL, SMO-like (Hoi et al. 2007)"
    defaults: ClassVar[dict[str, Any]] = {
        "max_sweeps": 3000,
        "tol": 1e-6,
        "cg_tol": 1e-10,
        "seed_order": True,
        "barrier0": 1.0,
        "barrier_min": 1e-6,
        "barrier_factor": 0.1,
        "center_tol": 1.0,
        "extrapolate": True,
        "recover_below": 1e-2,
        "subspace_ratio": 1e3,
        "max_rounds": 30,
        "max_basis": None,
        "threads": 1,
    }
    parameter_constraints: ClassVar[dict[str, list]] = {
        "max_sweeps": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "cg_tol": [Interval(Real, 0, None, closed="neither")],
        "seed_order": [Boolean()],
        "barrier0": [Interval(Real, 0, None, closed="left")],
        "barrier_min": [Interval(Real, 0, None, closed="neither")],
        "barrier_factor": [Interval(Real, 0, 1, closed="neither")],
        "center_tol": [Interval(Real, 0, None, closed="neither")],
        "extrapolate": [Boolean()],
        "recover_below": [Interval(Real, 0, None, closed="neither")],
        "subspace_ratio": [Interval(Real, 1, None, closed="left")],
        "max_rounds": [Interval(Integral, 1, None, closed="left")],
        "max_basis": [Interval(Integral, 2, None, closed="left"), None],
        "threads": [Interval(Integral, 1, None, closed="left"), None],
    }

    def applies_to(self, problem: Any) -> str | None:
        return why_not(problem.declaration, self.name)

    # ------------------------------------------------------------------ memory guard
    @staticmethod
    def ascent_bytes(n: int, m: int) -> int:
        """Working set of the dual ascent and of the recovery's dense algebra (bytes):
        up to 16 dense ``n x n`` arrays when ``n <= DENSE_MAX`` (M, L, Cholesky factors,
        eigenvectors, the generalised eigenproblem), the CG warm starts (``16 m n``, when
        they fit 256 MB) and the sparse ``M``."""
        dense = 16 * 8 * n * n if n <= DENSE_MAX else 8 * n * (min(n - 1, m + 11) + 8)
        warm = 16 * m * n if 16 * m * n <= 2**28 else 0
        return int(dense + warm + 64 * (n + m))

    def estimate_memory(self, problem: Any, opts: dict[str, Any]) -> int | None:
        """:meth:`ascent_bytes` plus the reduced primal at the largest basis the recovery
        may use, ``min(m + 1, n, max_basis)`` (:func:`reduced_primal_bytes`)."""
        n, m = int(problem.n), int(problem.n_terms)
        d = _basis_cap(n, m, opts.get("max_basis"))
        return self.ascent_bytes(n, m) + reduced_primal_bytes(d, m)

    def check_memory(self, problem: Any, opts: dict[str, Any], max_memory: float) -> None:
        from ...errors import NotApplicable

        est = self.estimate_memory(problem, opts)
        if est is None or est <= max_memory:
            return
        n, m = int(problem.n), int(problem.n_terms)
        d = _basis_cap(n, m, opts.get("max_basis"))
        fit = largest_basis_within(n, m, max_memory - self.ascent_bytes(n, m))
        raise NotApplicable(
            f"method 'smo' would need about {format_bytes(est)} for n = {n} points and m = {m} "
            f"pairs: its primal recovery solves an SDP over a basis of up to d = {d} directions "
            f"(memory ~ d^4: {format_bytes(reduced_primal_bytes(d, m))}), above max_memory = "
            f"{format_bytes(max_memory)}. Cap the basis with max_basis={fit} (the largest that fits; "
            "the certified gap may then stay above tol), use fewer points or pairs, or raise the "
            "limit with max_memory=<bytes>."
        )

    # ------------------------------------------------------------------ the solve
    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        return blas_threads(opts["threads"], self._ascend, problem, opts, rng, deadline)

    def _ascend(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
                deadline: float | None) -> SolverOutput:
        tol = float(opts["tol"])
        cg_tol = float(opts["cg_tol"])
        mu = float(opts["barrier0"])
        mu_min = float(opts["barrier_min"])
        factor = float(opts["barrier_factor"])
        center_tol = float(opts["center_tol"])
        recover_below = float(opts["recover_below"])
        ratio = float(opts["subspace_ratio"])
        ms = int(opts["max_sweeps"])
        max_rounds = int(opts["max_rounds"])
        can, rows = hinge_rows(problem)
        n = can.n
        gamma = gamma_of(rows)
        per_pair = np.ndim(gamma) > 0  # hinge terms of different weights: a box per pair
        gam = gamma.tolist() if per_pair else []
        gamma_max = float(np.max(gamma))
        gamma_text = (f"gamma = {gamma:g}" if not per_pair else
                      "gamma = " + " / ".join(f"{x:g}" for x in np.unique(gamma)) + " (per hinge term)")
        L = sp.csr_matrix(can.C)
        idx, T = rows.pairs, rows.data
        m = len(idx)
        d_cap = _basis_cap(n, m, opts["max_basis"])
        log = self.iteration_log(opts, header=f"n = {n}, {m} pairs, {gamma_text}, recovery basis <= {d_cap}",
                                 residual="centrality", extra=("barrier", "cert. gap"))
        ki, li = idx[:, 0], idx[:, 1]
        # M as L plus explicit (possibly zero) entries on every pair, so updates are in place
        pat = sp.csr_matrix((np.full(2 * m, 1e-300), (np.concatenate([ki, li]), np.concatenate([li, ki]))),
                            shape=(n, n))
        M = (L + pat).tocsr()
        M.sort_indices()
        M.data[np.abs(M.data) < 1e-200] = 0.0  # the 1e-300 placeholders, not L's values

        def pos(a: int, b: int) -> int:
            lo, hi = M.indptr[a], M.indptr[a + 1]
            return lo + int(np.searchsorted(M.indices[lo:hi], b))

        slot_kl = np.array([pos(a, b) for a, b in zip(ki, li)], dtype=np.int64)
        slot_lk = np.array([pos(b, a) for a, b in zip(ki, li)], dtype=np.int64)
        Lkl = np.asarray(L[ki, li]).ravel()
        Ld = L.diagonal()
        indptr, indices, data = M.indptr, M.indices, M.data
        dense = n <= DENSE_MAX
        Ldense = L.toarray() if dense else None
        if dense and n > 0:
            # C with a negative eigenvalue (a declared cost; P6's Laplacian is PSD by
            # construction): K = t v v^T sends <C, K> to -inf while the hinge terms stay >= 0
            lam_c, v_c = sla.eigh(Ldense, subset_by_index=[0, 0])
            if float(lam_c[0]) < -1e-10 * max(1.0, float(np.abs(Ldense).max())):
                msg = (f"unbounded: the cost C has eigenvalue {float(lam_c[0]):.3g} < 0, so K = t v v^T "
                       "(v its eigenvector, extras['direction']) sends <C, K> to -inf as t grows while "
                       "every hinge term stays >= 0")
                return SolverOutput(None, Status.UNBOUNDED, 0, {}, msg, {"direction": v_c[:, 0]})
        pts, inv = np.unique(idx, return_inverse=True)
        inv = inv.reshape(idx.shape)
        E_pts = np.zeros((n, len(pts))) if dense else None
        if dense:
            E_pts[pts, np.arange(len(pts))] = 1.0

        Q = np.zeros(m)
        # warm starts of the CG solves, one n x 2 block per pair (when it fits in 256 MB)
        X0 = np.zeros((m, n, 2)) if 16 * m * n <= 2**28 else None
        history: dict[str, list] = {"dual_objective": [], "max_change": [], "cg_iterations": [],
                                    "barrier": [], "centrality": [], "gap": []}
        status, message = Status.MAX_ITER, f"{ms} sweeps"
        W = np.zeros((n, 2))
        stage_sweeps = 0
        Qprev = Q.copy()
        best: dict[str, Any] | None = None  # the best recovered primal so far
        lb_all = -math.inf  # the best lower bound so far
        t_start = time.perf_counter()
        t_recovery = 0.0
        sweeps = 0

        def expired() -> bool:
            return deadline is not None and time.perf_counter() > deadline

        def set_M(Qnew: np.ndarray) -> None:
            v = Lkl - 0.5 * Qnew * T
            data[slot_kl] = v
            data[slot_lk] = v
            if dense:
                Mdense[ki, li] = v
                Mdense[li, ki] = v

        def barrier_value(Qx: np.ndarray):
            F = _chol(_pair_matrix(Ldense, idx, T, Qx))
            if F is None:
                return -math.inf, None
            return float(Qx.sum()) + 2.0 * mu * float(np.sum(np.log(np.diag(F[0])))), F

        def recover() -> dict[str, Any]:
            nonlocal t_recovery, lb_all, best
            t0 = time.perf_counter()
            rec = self.recover(problem, M, Q, ratio, max_rounds, tol, max_basis=d_cap, deadline=deadline)
            t_recovery += time.perf_counter() - t0
            lb_all = max(lb_all, rec.get("lower_bound", -math.inf))
            if rec.get("factor") is not None and (best is None or rec["primal"] < best["primal"]):
                best = rec
            log.message(f"recovery at barrier {mu:.0e}: {rec.get('rounds', 0)} reduced primal(s), basis "
                        f"{rec.get('basis_dim', '-')}, certified gap {rec.get('rel_gap', math.inf):.2e}"
                        + (" (time limit)" if rec.get("timed_out") else ""))
            return rec

        # A_2 X for X vanishing on rows k, l: (M X) with rows k, l then zeroed by _cg_pair;
        # small problems keep a dense copy of M in step (faster products)
        Mdense = M.toarray() if dense else None
        matvec = Mdense.__matmul__ if dense else M.__matmul__

        for sweeps in range(1, ms + 1):
            order = rng.permutation(m) if opts["seed_order"] else np.arange(m)
            max_change, cg_total = 0.0, 0
            cut = False
            for p in order:
                if deadline is not None and time.perf_counter() > deadline:
                    cut = True
                    break
                k, l = int(ki[p]), int(li[p])
                # W: columns k and l of A (= rows k, l of the symmetric M) off rows k, l
                W[:] = 0.0
                sk, sl = slice(indptr[k], indptr[k + 1]), slice(indptr[l], indptr[l + 1])
                W[indices[sk], 0] = data[sk]
                W[indices[sl], 1] = data[sl]
                W[k] = W[l] = 0.0
                X, its = _cg_pair(matvec, W, k, l, None if X0 is None else X0[p], cg_tol, 4 * n, deadline)
                if its < 0:  # the deadline passed inside CG: this pair is not updated
                    cut = True
                    break
                if X0 is not None:
                    X0[p] = X
                cg_total += its
                Gm = W.T @ X
                a = max(0.0, Ld[k] - Gm[0, 0])
                c = max(0.0, Ld[l] - Gm[1, 1])
                b = Lkl[p] - Gm[0, 1]
                t = T[p]
                if mu > 0:
                    # maximise 2q + mu log det [[a, b - t q], [b - t q, c]] over q = Q_p / 2:
                    # u = b - t q solves u^2 - t mu u - a c = 0 with |u| < sqrt(a c)
                    u = t * (mu - math.sqrt(mu * mu + 4.0 * a * c)) / 2.0
                    q2 = 2.0 * t * (b - u)
                else:  # Hoi et al.'s closed form: Q = min(c, mu - T G12 + T L_kl), ordered-pair units
                    q2 = 2.0 * (math.sqrt(a * c) + t * b)
                if not math.isfinite(q2):
                    status, message = Status.NUMERICAL_ERROR, f"non-finite update of pair {int(p)} in sweep {sweeps}"
                    cut = True
                    break
                q = min(gam[p] if per_pair else gamma, max(0.0, q2))
                change = abs(q - Q[p])
                if change > 0:
                    Q[p] = q
                    v = Lkl[p] - 0.5 * q * T[p]
                    data[slot_kl[p]] = v
                    data[slot_lk[p]] = v
                    if dense:
                        Mdense[k, l] = Mdense[l, k] = v
                max_change = max(max_change, change)
            if cut:
                if status is not Status.NUMERICAL_ERROR:
                    status, message = Status.TIMEOUT, f"time limit reached in sweep {sweeps}"
                history["dual_objective"].append(float(Q.sum()))
                break
            stage_sweeps += 1
            centred = False
            centrality = math.nan
            if mu > 0 and dense:
                fQ, F = barrier_value(Q)
                if opts["extrapolate"] and stage_sweeps >= 2 and F is not None:
                    # doubling line search along the sweep's displacement (box by clipping)
                    D = Q - Qprev
                    alpha = 1.0
                    while alpha < 1e8 and not expired():
                        Qt = np.clip(Q + alpha * D, 0.0, gamma)
                        ft, Ft = barrier_value(Qt)
                        if not ft > fQ:
                            break
                        Q, fQ, F = Qt, ft, Ft
                        alpha *= 2.0
                    set_M(Q)
                if F is not None:
                    # K_mu = mu M^{-1} at the pairs (for the stage test only)
                    Z = sla.cho_solve(F, E_pts, check_finite=False)
                    Kp = mu * Z[idx[:, 0], inv[:, 1]]
                    z = T * Kp
                    hinge = (np.sum(gamma * np.maximum(0.0, 1.0 - z)) if per_pair
                             else gamma * np.sum(np.maximum(0.0, 1.0 - z)))
                    centrality = float(np.sum(Q * (z - 1.0)) + hinge)
                    centred = centrality <= center_tol * n * mu
            elif mu > 0:
                centred = max_change <= 0.01 * mu
            Qprev = Q.copy()
            dual_obj = float(Q.sum())
            history["dual_objective"].append(dual_obj)
            history["max_change"].append(max_change)
            history["cg_iterations"].append(cg_total)
            history["barrier"].append(mu)
            history["centrality"].append(centrality)
            if not math.isfinite(dual_obj):
                status, message = Status.NUMERICAL_ERROR, f"non-finite dual objective in sweep {sweeps}"
                history["gap"].append(math.nan)
                break
            gap = math.nan
            if mu == 0.0:
                if max_change <= 1e-12 * gamma_max:
                    status, message = Status.CONVERGED, f"no multiplier moved (plain update, {sweeps} sweeps)"
                    history["gap"].append(gap)
                    log.row(sweeps, objective=dual_obj, residual=max_change, barrier=mu, **{"cert. gap": gap})
                    break
            elif centred and mu <= recover_below * (1 + 1e-9) and not expired():
                rec = recover()
                gap = rec.get("rel_gap", math.inf)
                if gap <= tol:
                    history["gap"].append(gap)
                    log.row(sweeps, objective=dual_obj, residual=centrality, barrier=mu, **{"cert. gap": gap})
                    status = Status.CONVERGED
                    message = (f"certified relative gap {gap:.1e} <= tol (barrier {mu:.0e}, {sweeps} sweeps, "
                               f"{rec['rounds']} reduced primal(s))")
                    break
            history["gap"].append(gap)
            log.row(sweeps, objective=dual_obj, residual=centrality if dense else max_change, barrier=mu,
                    **{"cert. gap": gap})
            if expired():
                status, message = Status.TIMEOUT, f"time limit reached after {sweeps} sweeps"
                break
            if centred and mu > 0:
                if mu <= mu_min * (1 + 1e-9):
                    message = f"barrier at its minimum {mu:.0e} and the gap above tol"
                    break
                mu = max(mu_min, mu * factor)
                stage_sweeps = 0
                log.message(f"centred: barrier -> {mu:.0e}")
        if status is not Status.CONVERGED and status is not Status.TIMEOUT:
            if expired():
                status, message = Status.TIMEOUT, message + "; time limit reached before the final recovery"
            else:
                rec = recover()
                if rec.get("timed_out"):
                    status, message = Status.TIMEOUT, message + "; time limit reached in the recovery"
        if best is None and status is Status.TIMEOUT:
            best = self._central_point(problem, M, Mdense, Q, mu, m, d_cap, n)
            if best.get("factor") is not None:
                message += "; no recovery yet: returned the central-path point K_mu = mu M(Q)^-1"
        if best is None:
            best = {"reduced_status": "no recovery (time limit)" if status is Status.TIMEOUT
                    else "recovery failed"}
        if "primal" in best and math.isfinite(lb_all):  # every recovery's bound holds
            best["lower_bound"] = max(lb_all, best.get("lower_bound", -math.inf))
            best["rel_gap"] = (best["primal"] - best["lower_bound"]) / max(abs(best["primal"]), 1e-300)
        G = best.pop("factor", None)
        best.pop("primal", None)
        lower = best.pop("lower_bound", None)  # the recovery's bound: the Solution's own
        extras = {"dual_objective": float(Q.sum()), "sweeps": sweeps, "barrier": mu,
                  "ascent_time": time.perf_counter() - t_start - t_recovery,
                  "recovery_time": t_recovery, "max_basis": d_cap, **best}
        if G is None:
            bad = Status.TIMEOUT if status is Status.TIMEOUT else Status.NUMERICAL_ERROR
            return SolverOutput(None, bad, sweeps, history,
                                message + "; " + str(best.get("reduced_status", "recovery failed")), extras,
                                lower_bound=lower)
        return SolverOutput(G, status, sweeps, history, message, extras, lower_bound=lower)
