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

What it solves, read from the declaration (:func:`match`): a sparse linear cost ``<C, K>``
(``tr(L K)`` in P6) plus one or more hinge loss terms on off-diagonal entries ``K_ij``
(labels ``T_p``), over K PSD, without constraints.  Terms of different weights give each
pair its own box ``0 <= Q_p <= gamma_p`` (the dual above, term by term); equal weights are
P6's single ``gamma``.  A cost with a negative eigenvalue makes the problem unbounded;
up to ``DENSE_MAX`` points that is reported (status ``unbounded``, the direction in
``extras``) before any sweep.

Above ``DENSE_MAX`` points the dense parts (line search, centrality, refinement,
certificate) are skipped: plain barrier sweeps with the old stage rule (no multiplier
moved by more than ``0.01 mu``) and one reduced primal on a Lanczos basis of ``M``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .._parallel import with_threads as blas_threads
from ..model import Hinge
from ..problems import rank_rule
from ..result import LowRank, Status, psd_factor
from .base import IterativeSolver, SolverOutput, format_bytes, psd_minimisation_reason
from .options import Boolean, Interval

__all__ = ["HoiSMO", "TEST_RTOL", "SMO_RTOL", "block_cg", "reduced_primal_bytes", "reduced_primal_seconds",
           "default_max_basis", "largest_basis_within"]

#: the issue's requirement: recovered primal within 1e-4 relative of the full-SDP optimum
#: (measured 1e-8 .. 1e-7 with the default ``tol``; see docs/other_solvers.md)
SMO_RTOL = 1e-4
TEST_RTOL = SMO_RTOL
#: above this many points the line search, the centrality test and the refined recovery
#: (all dense) are skipped: plain barrier sweeps and one reduced primal on a Lanczos basis
DENSE_MAX = 500


def block_cg(matvec, B: np.ndarray, tol: float = 1e-12, maxiter: int | None = None,
             x0: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Conjugate gradients for ``A X = B`` with several right-hand sides at once.

    Each column runs its own CG recursion (its own step sizes); the products with ``A``
    are done together.  Stops when every residual is below ``tol * ||b||``.  ``x0`` is a
    starting point (a warm start; zeros when omitted).
    """
    n, s = B.shape
    maxiter = 10 * n if maxiter is None else maxiter
    if x0 is None:
        X = np.zeros_like(B)
        R = B.copy()
    else:
        X = np.array(x0, dtype=float)
        R = B - matvec(X)
    P = R.copy()
    rs = np.einsum("ij,ij->j", R, R)
    bb = np.einsum("ij,ij->j", B, B)
    target = (tol**2) * np.maximum(bb, 1e-300)
    it = 0
    while it < maxiter and np.any(rs > target):
        AP = matvec(P)
        pAp = np.einsum("ij,ij->j", P, AP)
        active = (rs > target) & (pAp > 0)
        if not np.any(active):
            break
        alpha = np.where(active, rs / np.where(pAp > 0, pAp, 1.0), 0.0)
        X += P * alpha
        R -= AP * alpha
        rs_new = np.einsum("ij,ij->j", R, R)
        beta = np.where(active, rs_new / np.maximum(rs, 1e-300), 0.0)
        P = R + P * beta
        rs = np.where(active, rs_new, rs)
        it += 1
    return X, it


def _cg_pair(matvec, W: np.ndarray, k: int, l: int, x0: np.ndarray | None, tol: float,
             maxiter: int, deadline: float | None = None) -> tuple[np.ndarray, int]:
    """:func:`block_cg` specialised to one pair: ``A_2 X = W`` with ``A_2`` = ``matvec``
    restricted to the rows/columns other than ``k, l`` (kept at zero), two columns.
    With a ``deadline`` it is checked every 32 iterations; the iteration count is then
    ``-1`` when it passed (the solution is incomplete)."""
    if x0 is None:
        X = np.zeros_like(W)
        R = W.copy()
    else:
        X = x0.copy()
        R = W - matvec(X)
        R[k] = R[l] = 0.0
    P = R.copy()
    rs = np.einsum("ij,ij->j", R, R)
    target = (tol * tol) * np.maximum(np.einsum("ij,ij->j", W, W), 1e-300)
    it = 0
    while it < maxiter and (rs[0] > target[0] or rs[1] > target[1]):
        if deadline is not None and it % 32 == 31 and time.perf_counter() > deadline:
            return X, -1
        AP = matvec(P)
        AP[k] = AP[l] = 0.0
        pAp = np.einsum("ij,ij->j", P, AP)
        if not (pAp[0] > 0 and pAp[1] > 0):
            break
        alpha = rs / pAp
        X += P * alpha
        R -= AP * alpha
        rs_new = np.einsum("ij,ij->j", R, R)
        if not (rs_new[0] > 0 and rs_new[1] > 0):
            it += 1
            break
        P = R + P * (rs_new / rs)
        rs = rs_new
        it += 1
    return X, it


def _pair_matrix(L: np.ndarray, idx: np.ndarray, T: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Dense ``M(Q) = L - sum_p (Q_p T_p / 2)(E_ij + E_ji)``."""
    M = np.array(L, dtype=float, copy=True)
    v = 0.5 * Q * T
    np.add.at(M, (idx[:, 0], idx[:, 1]), -v)
    np.add.at(M, (idx[:, 1], idx[:, 0]), -v)
    return M


def _svec_index(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of each entry of ``svec`` (Clarabel's PSD-triangle order: the upper
    triangle column by column)."""
    c = np.repeat(np.arange(d), np.arange(1, d + 1))
    r = np.arange(d * (d + 1) // 2) - c * (c + 1) // 2
    return r, c


def _chol(M: np.ndarray):
    """Lower Cholesky factor of ``M``, or None when ``M`` is not positive definite."""
    try:
        return sla.cho_factor(M, lower=True, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return None


#: reduced-primal memory model (bytes): _RP_T2 t^2 + _RP_MT m t + _RP_BASE, t = d (d + 1) / 2
_RP_T2, _RP_MT, _RP_BASE = 64.0, 192.0, 128 * 2**20


def reduced_primal_bytes(d: int, m: int) -> int:
    """Peak bytes of one reduced primal (:meth:`HoiSMO.reduced_primal`) over a basis of
    ``d`` directions with ``m`` pairs.

    Clarabel's KKT system holds the PSD cone's scaling as a dense block over the
    ``t = d (d + 1) / 2`` entries of ``svec(B)``, so the peak grows like ``t^2``; the margin
    block adds ``m t`` nonzeros.  Measured (peak RSS above the process before the call,
    ``resource.getrusage`` in a fresh process per point, 2026-11-23; docs/other_solvers.md):
    d = 20, 30, 40 (t = 210, 465, 820) with m = 2d and 6d: 8-12, 21-30, 51-71 MiB;
    d = 60 (t = 1,830): 203 MiB (m = 120), 266 MiB (m = 360); d = 80 (t = 3,240, m = 160):
    602 MiB; d = 100 (t = 5,050, m = 200): 1,417 MiB.  The CVXPY program it replaces had no
    cap on d (the refinement grew it towards n) and aborted on 16-48 GB at n = 300-400.
    In one fresh process of six the first call grew by 110 MiB more (d = 30: 132 MiB
    instead of 22).  Model (an upper envelope of the measurements):
    ``64 t^2 + 192 m t + 128 MiB``.
    """
    t = d * (d + 1) // 2
    return int(_RP_T2 * t * t + _RP_MT * m * t + _RP_BASE)


def default_max_basis(m: int) -> int:
    """Default cap of the recovery basis: ``4 r + 10`` with ``r = rank_rule(m)``, the
    largest ``r`` with ``r (r + 1) / 2 <= m``.  An optimal kernel of rank at most ``r``
    exists (Barvinok-Pataki, ``m`` margin constraints), and the refinement needs
    directions beyond it: the largest final bases measured were 28 on ``wine`` (60
    points, ``r = 11``, cap 54) and 33 on a 50-point ``digits`` subset (``r = 10``, cap 50)."""
    return 4 * rank_rule(m, 10**9) + 10


def _basis_cap(n: int, m: int, max_basis: int | None) -> int:
    """Largest recovery basis the solver may use: ``min(m + 1, n, max_basis)`` (>= 2),
    ``max_basis`` defaulting to :func:`default_max_basis`."""
    cap = default_max_basis(m) if max_basis is None else int(max_basis)
    return max(2, min(m + 1, n, cap))


def reduced_primal_seconds(d: int) -> float:
    """A pessimistic time of one interior-point iteration of the reduced primal (plus its
    setup): the dense ``t x t`` factorisation, ``t = d (d + 1) / 2``, at 1 GFlop/s
    (measured: ~5 s per iteration at d = 80 on the loaded 2-core machine).  The recovery
    gives Clarabel the remaining time minus this, and skips a reduced primal that would
    not get two iterations, so that it never overruns the deadline by more than one
    iteration's misestimate."""
    t = d * (d + 1) / 2
    return 0.05 + t**3 / 3e9


def largest_basis_within(n: int, m: int, budget: float) -> int:
    """The largest basis ``d`` whose reduced primal fits ``budget`` bytes (at least 2)."""
    d = 2
    while d < min(m + 1, n) and reduced_primal_bytes(d + 1, m) <= budget:
        d += 1
    return d


@dataclass(frozen=True, eq=False)
class HingeView:
    """What the SMO-like solver reads from a declaration (:func:`match`): the sparse cost
    ``C`` (the linear terms), the pairs ``idx`` (m x 2) of the hinge terms with their labels
    ``T`` (+1 / -1), and ``gamma``, the hinge weight: one number when every hinge term has
    the same weight (P6), else one per pair (the dual box ``0 <= Q_p <= gamma_p``)."""

    n: int
    C: sp.csr_matrix
    idx: np.ndarray
    T: np.ndarray
    gamma: Any

    @property
    def m(self) -> int:
        return len(self.idx)

    @property
    def gamma_max(self) -> float:
        return float(np.max(self.gamma))

    def gamma_text(self) -> str:
        if np.ndim(self.gamma) == 0:
            return f"gamma = {self.gamma:g}"
        g = np.unique(self.gamma)
        return "gamma = " + " / ".join(f"{x:g}" for x in g) + " (per hinge term)"


def match(decl: Any, name: str = "smo") -> "HingeView | str":
    """The :class:`HingeView` of a declaration, or why the SMO-like dual solver does not
    apply (a sentence for ``applies_to``).

    Applies to: minimise ``<C, K> + sum_k gamma_k sum_p max(0, 1 - y_p K_ij)`` over K PSD,
    with ``C`` sparse (the linear terms, e.g. ``tr(L K)``), one or more hinge loss terms on
    off-diagonal entries ``K_ij`` (each pair at most once over all terms; the weights may
    differ) and no constraints: the dual of Hoi et al. (2007) with a box ``[0, gamma_k]``
    per pair.
    """
    what = (f"{name!r} solves min <C, K> + sum of hinge losses on off-diagonal entries K_ij over "
            "K PSD, with no constraints (the dual of Hoi et al. 2007)")
    why = psd_minimisation_reason(decl, what)
    if why is not None:
        return why
    if decl.constraints:
        return f"{what}; this problem has {decl.n_constraint_rows} constraint rows"
    if not decl.losses:
        return f"{what}; this problem has no loss term"
    for t in decl.losses:
        if not isinstance(t.loss, Hinge):
            return f"{what}; this problem has a {t.loss.name} loss term ({t.describe()})"
        if not t.map.is_entries or np.any(t.map.i == t.map.j):
            return (f"{what}; the hinge term '{t.describe()}' is on {t.map.describe()}, not on "
                    "off-diagonal entries K_ij")
    if not decl.linear:
        return f"{what}; this problem has no linear term <C, K> (the dual's M(Q) starts at C)"
    C = decl.cost_matrix()
    if C is None:
        return (f"{what}; a linear term of this problem has a dense matrix "
                f"({', '.join(t.describe() for t in decl.linear)}), not a sparse C")
    terms = decl.losses
    if len(terms) == 1:
        t = terms[0]
        idx = t.map.pairs
        T = np.asarray(t.loss.labels, dtype=float)
        gamma: Any = float(t.weight)
    else:
        idx = np.concatenate([t.map.pairs for t in terms])
        T = np.concatenate([np.asarray(t.loss.labels, dtype=float) for t in terms])
        w = np.concatenate([np.full(t.map.size, float(t.weight)) for t in terms])
        gamma = float(w[0]) if np.all(w == w[0]) else w
    n = decl.n
    key = np.minimum(idx[:, 0], idx[:, 1]) * n + np.maximum(idx[:, 0], idx[:, 1])
    if np.unique(key).size < key.size:
        return (f"{what}; a pair appears twice among the hinge terms (each pair K_ij may carry "
                "one hinge loss)")
    return HingeView(n, sp.csr_matrix(C), idx, T, gamma)


def _view_of(source: Any) -> HingeView:
    """A problem's :class:`HingeView` (or the view itself); NotApplicable when it has none."""
    if isinstance(source, HingeView):
        return source
    got = match(source.declaration)
    if isinstance(got, str):
        from ..errors import NotApplicable

        raise NotApplicable(got)
    return got


class HoiSMO(IterativeSolver):
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
        got = match(problem.declaration, self.name)
        return got if isinstance(got, str) else None

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
        from ..errors import NotApplicable

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
        view = _view_of(problem)
        n = view.n
        gamma = view.gamma
        per_pair = np.ndim(gamma) > 0  # hinge terms of different weights: a box per pair
        gam = view.gamma.tolist() if per_pair else []
        gamma_max = view.gamma_max
        L = view.C
        idx, T = view.idx, view.T
        m = len(idx)
        d_cap = _basis_cap(n, m, opts["max_basis"])
        log = self.iteration_log(opts, header=f"n = {n}, {m} pairs, {view.gamma_text()}, recovery basis <= {d_cap}",
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
            rec = self.recover(problem, M, Q, ratio, max_rounds, tol, max_basis=d_cap, deadline=deadline,
                               view=view)
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
            best = self._central_point(problem, M, Mdense, Q, mu, m, d_cap, view.n)
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
        extras = {"dual_objective": float(Q.sum()), "sweeps": sweeps, "barrier": mu,
                  "ascent_time": time.perf_counter() - t_start - t_recovery,
                  "recovery_time": t_recovery, "max_basis": d_cap, **best}
        if G is None:
            bad = Status.TIMEOUT if status is Status.TIMEOUT else Status.NUMERICAL_ERROR
            return SolverOutput(None, bad, sweeps, history,
                                message + "; " + str(best.get("reduced_status", "recovery failed")), extras)
        return SolverOutput(G, status, sweeps, history, message, extras)

    @staticmethod
    def _central_point(problem: Any, M: sp.csr_matrix, Mdense: np.ndarray | None, Q: np.ndarray,
                       mu: float, m: int, d_cap: int, n: int) -> dict[str, Any]:
        """``K_mu = mu M(Q)^{-1}`` (PSD, hence feasible for hinge P6) as a factor, with the
        lower bound ``sum Q`` (valid when ``M(Q)`` is PSD): the fallback point when the
        time limit comes before any recovery.  Dense eigendecomposition up to
        ``DENSE_MAX`` points, else shift-invert Lanczos; only the ``d_cap`` largest
        directions of ``K_mu`` are kept (still PSD, so still feasible; its objective is
        the problem's own evaluation)."""
        import scipy.sparse.linalg as ssla

        if not mu > 0:
            return {"reduced_status": "no recovery (time limit, plain update: no central point)"}
        try:
            if Mdense is not None:
                w, V = np.linalg.eigh(Mdense)
            else:
                k = min(n - 2, d_cap)
                w, V = ssla.eigsh(M, k=k, sigma=0.0, which="LM")
        except (np.linalg.LinAlgError, ArithmeticError, RuntimeError, ValueError) as exc:
            return {"reduced_status": f"no recovery (time limit); central point failed: {exc}"}
        if not (np.all(np.isfinite(w)) and float(w.min()) > 0):
            return {"reduced_status": "no recovery (time limit); M(Q) not positive definite"}
        ev = mu / w
        o = np.argsort(ev)[::-1][:d_cap]  # the largest directions of K_mu (a PSD point still)
        o = o[ev[o] >= 1e-12 * float(ev[o[0]])]
        G = V[:, o] * np.sqrt(ev[o])
        primal = problem.objective(LowRank(G))
        lb = float(Q.sum())
        return {"factor": G, "primal": primal, "lower_bound": lb, "reduced_status": "central point",
                "rel_gap": (primal - lb) / max(abs(primal), 1e-300)}

    # ------------------------------------------------------------------ recovery
    @staticmethod
    def reduced_primal(problem: Any, U: np.ndarray, time_limit: float | None = None):
        """Hoi et al. 2007, eq. 6 over ``K = U B U^T``: returns ``(status, objective, B, Q_r)``.

        ``Q_r`` are the multipliers of the margin constraints ``T_p K_p >= 1 - eps_p``
        (clipped to ``[0, gamma]``), i.e. the reduced problem's dual.  Written for Clarabel
        directly (``svec(B)`` in its PSD-triangle cone, then ``eps``): the data are built
        in a few vectorised numpy operations, so the whole reduced primal runs under
        ``time_limit`` seconds (Clarabel's own limit; status ``"MaxTime"`` then, with its
        last iterate, still a valid kernel once projected on the PSD cone).  Its memory is
        :func:`reduced_primal_bytes`.  ``problem`` is a problem the solver applies to, or its
        :class:`HingeView`.
        """
        import clarabel

        view = _view_of(problem)
        idx, T = view.idx, view.T
        m, d = len(idx), U.shape[1]
        r, c = _svec_index(d)
        t = len(r)
        w = np.where(r == c, 1.0, math.sqrt(2.0))
        Ui, Uj = U[idx[:, 0]], U[idx[:, 1]]
        # <sym(u_i u_j^T), B> = svec(sym(u_i u_j^T)) . svec(B), row p of the margin block
        coef = Ui[:, r] * Uj[:, c]
        coef += Ui[:, c] * Uj[:, r]
        coef *= (0.5 * w) * -T[:, None]
        Am = sp.hstack([sp.csc_matrix(coef), -sp.identity(m, format="csc")], format="csc")
        del coef
        Ae = sp.hstack([sp.csc_matrix((m, t)), -sp.identity(m, format="csc")], format="csc")
        Ab = sp.hstack([-sp.identity(t, format="csc"), sp.csc_matrix((t, m))], format="csc")
        A = sp.vstack([Am, Ae, Ab], format="csc")
        del Am, Ae, Ab
        C = U.T @ (view.C @ U)
        C = 0.5 * (C + C.T)
        gam = np.full(m, float(view.gamma)) if np.ndim(view.gamma) == 0 else view.gamma
        q = np.concatenate([w * C[r, c], gam])
        b = np.concatenate([-np.ones(m), np.zeros(m + t)])
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        if time_limit is not None:
            settings.time_limit = max(float(time_limit), 1e-3)
        cones = [clarabel.NonnegativeConeT(2 * m), clarabel.PSDTriangleConeT(d)]
        sol = clarabel.DefaultSolver(sp.csc_matrix((t + m, t + m)), q, A, b, cones, settings).solve()
        del A
        status = str(sol.status)
        x = np.asarray(sol.x, float)
        if x.size != t + m or not np.all(np.isfinite(x)) or status in ("PrimalInfeasible", "DualInfeasible"):
            return status, None, None, None
        B = np.zeros((d, d))
        B[r, c] = x[:t] / w
        B = B + B.T - np.diag(np.diag(B))
        z = np.asarray(sol.z, float)[:m]
        Qr = np.clip(z, 0.0, view.gamma) if np.all(np.isfinite(z)) else None
        return status, float(sol.obj_val), B, Qr

    @classmethod
    def recover(cls, problem: Any, M: sp.csr_matrix, Q: np.ndarray, ratio: float = 1e3,
                max_rounds: int = 30, tol: float = 1e-6, max_basis: int | None = None,
                deadline: float | None = None, view: HingeView | None = None) -> dict[str, Any]:
        """``K = U B U^T`` from the reduced primal (Hoi et al. 2007, eq. 6), refined and certified.

        ``U`` starts as the eigenvectors of ``M = M(Q)`` with eigenvalue
        ``<= ratio * lambda_min(M)`` (2 .. m + 1 of them).  Each round solves the reduced
        primal, takes its multipliers ``Q_r`` and adds to ``U`` the eigenvectors of
        ``M(Q_r)`` with negative eigenvalues (the directions in which the reduced solution is
        not optimal for the full problem) until the certified gap is ``<= tol``.  The basis
        never exceeds ``max_basis`` directions (default ``min(m + 1, n)``), which bounds the
        reduced primal's memory (:func:`reduced_primal_bytes`).
        Certificate (lower bounds on the optimum, all valid): ``sum Q`` when ``M(Q)`` is
        PSD; ``(1 - th) sum Q_r + th sum Q`` with the smallest ``th`` making
        ``(1 - th) M(Q_r) + th M(Q)`` PSD (a generalised eigenvalue); and
        ``sum Q_r + lambda_min(M(Q_r)) tr K*`` with ``tr K* <= primal / lambda_min(L)``.
        With a ``deadline`` (``time.perf_counter()`` value) every step checks it and the
        reduced primal gets the remaining time; ``rec["timed_out"]`` is then True and the
        best kernel so far is kept.
        """
        import scipy.sparse.linalg as ssla

        view = _view_of(problem if view is None else view)
        n = view.n
        idx, T = view.idx, view.T
        m = len(idx)
        d_cap = max(2, min(m + 1, n, n if max_basis is None else int(max_basis)))
        rec: dict[str, Any] = {"dual_objective_barrier": float(Q.sum()), "timed_out": False}

        def left() -> float | None:
            return None if deadline is None else deadline - time.perf_counter()

        def out_of_time() -> bool:
            rem = left()
            return rem is not None and rem <= 0

        def budget(d: int) -> tuple[bool, float | None]:
            """(enough time for a reduced primal over d directions, Clarabel's time limit)"""
            rem = left()
            if rem is None:
                return True, None
            need = reduced_primal_seconds(d)
            return rem >= 2 * need, rem - need

        if out_of_time():
            rec.update(timed_out=True, rounds=0, reduced_status="not started (time limit)")
            return rec
        if n > DENSE_MAX:  # Lanczos basis, one reduced primal, no certificate
            k = min(n - 1, d_cap + 10)
            scale = float(abs(M).sum(axis=1).max())
            sigma = -1e-6 * scale
            lu = ssla.splu((M - sigma * sp.identity(n, format="csr")).tocsc())

            def inv(x: np.ndarray) -> np.ndarray:  # shift-invert products, deadline-checked
                if out_of_time():
                    raise TimeoutError
                return lu.solve(np.asarray(x, float))

            OPinv = ssla.LinearOperator((n, n), matvec=inv, dtype=float)
            try:
                w, V = ssla.eigsh(M, k=k, sigma=sigma, which="LM", OPinv=OPinv)
            except TimeoutError:
                rec.update(timed_out=True, rounds=0, reduced_status="not started (time limit in Lanczos)")
                return rec
            o = np.argsort(w)
            w, V = w[o], V[:, o]
            base = max(float(w[0]), 1e-14 * scale)
            d = int(min(max(2, np.sum(w <= ratio * base)), d_cap, k))
            rec.update({"min_eig_M": float(w[0]), "null_dim": d, "basis_dim": d, "rounds": 1,
                        "lower_bound": math.nan, "rel_gap": math.inf})
            ok, limit = budget(d)
            if not ok:
                rec.update(timed_out=True, reduced_status="not started (time limit)")
                return rec
            status, obj, B, _ = cls.reduced_primal(view, V[:, :d], limit)
            rec.update({"reduced_status": status, "reduced_objective": obj, "timed_out": status == "MaxTime"})
            if B is not None:
                G = V[:, :d] @ psd_factor(B)
                rec["factor"] = G
                rec["primal"] = problem.objective(LowRank(G))
            return rec
        Ld = view.C.toarray()
        Mb = M.toarray()
        w, V = np.linalg.eigh(Mb)
        lam_L = float(np.linalg.eigvalsh(Ld)[0])
        wmax = max(1.0, float(np.abs(w).max()))
        base = max(float(w[0]), 1e-14 * wmax)
        d = int(min(max(2, np.sum(w <= ratio * base)), d_cap))
        U = V[:, :d]
        Fb = _chol(Mb)
        rec.update({"min_eig_M": float(w[0]), "null_dim": d})
        best = None
        lb_max = -math.inf
        rounds = 0
        for rounds in range(1, max_rounds + 1):
            ok, limit = budget(U.shape[1])
            if not ok:
                rec["timed_out"] = True
                rounds -= 1
                break
            status, obj, B, Qr = cls.reduced_primal(view, U, limit)
            if B is None:
                rec["reduced_status"] = status
                break
            G = U @ psd_factor(B)
            primal = problem.objective(LowRank(G))
            tau = primal / lam_L if lam_L > 0 else math.inf
            lbs = [float(Q.sum()) + (min(0.0, float(w[0])) * tau if w[0] < 0 else 0.0)]
            neg = np.zeros((n, 0))
            if best is None or primal < best["primal"]:
                best = {"factor": G, "primal": primal, "reduced_objective": obj, "reduced_status": status,
                        "basis_dim": U.shape[1]}
            if status == "MaxTime" or out_of_time():
                rec["timed_out"] = True
            elif Qr is not None:
                Mr = _pair_matrix(Ld, idx, T, Qr)
                wr, Vr = np.linalg.eigh(Mr)
                if wr[0] >= 0 or math.isfinite(tau):
                    lbs.append(float(Qr.sum()) + min(0.0, float(wr[0])) * tau)
                if Fb is not None and not out_of_time():
                    # smallest th with (1 - th) M(Q_r) + th M(Q) PSD: s = lambda_max(-M_r, M)
                    s = max(0.0, float(sla.eigh(-Mr, Mb, eigvals_only=True,
                                                subset_by_index=[n - 1, n - 1])[0]))
                    th = s / (1.0 + s)
                    lbs.append((1.0 - th) * float(Qr.sum()) + th * float(Q.sum()))
                neg = Vr[:, wr < -1e-10 * max(1.0, float(np.abs(wr).max()))]
            lb_max = max([lb_max] + [x for x in lbs if math.isfinite(x)])  # every round's bound holds
            best["lower_bound"] = lb_max
            best["rel_gap"] = (best["primal"] - lb_max) / max(abs(best["primal"]), 1e-300)
            best["reduced_dual_objective"] = None if Qr is None else float(Qr.sum())
            if rec["timed_out"] or best["rel_gap"] <= tol or neg.shape[1] == 0:
                break
            room = d_cap - U.shape[1]
            if room <= 0:
                rec["basis_full"] = True
                break
            neg = neg[:, : min(room, max(2, U.shape[1] // 2))]
            neg = neg - U @ (U.T @ neg)
            U, _ = np.linalg.qr(np.hstack([U, neg]))
        rec["rounds"] = rounds
        if best is not None:
            rec.update(best)
        return rec
