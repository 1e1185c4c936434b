"""Burer-Monteiro low-rank solver ("lowrank"): ``K = G G^T``, L-BFGS and an augmented Lagrangian.

The idea of SDPLR (Burer & Monteiro 2003, cited by Hu & Kwok 2013 and 2015): replace the
PSD variable by a factor ``G`` of shape ``(n, r)`` (the papers' ``V^T``), which drops
the PSD constraint and leaves a smooth nonlinear program in ``n r`` unknowns.

The solver reads the problem's declaration only, through its factored oracle
(:func:`kernelforms.model.oracle`: the objective, its gradient and Hessian-vector products
and the constraint rows on a factor, derived once from the canonical form); what it accepts
is data (:data:`CAPABILITIES`), and the reason it does not apply is worded from the mismatch:

* the form ``K PSD`` (``G`` is ``n x r``) or ``K = B Y B^T`` (``Y = H H^T``, ``G = B H``;
  P3, P5); not ``range(K) in range(K0)`` with a Bregman divergence (P7: a spectral term,
  infinite off the range and at singular K);
* the linear terms as one fixed operator ``C`` (``tr K`` kept as a coefficient) and any
  number of *smooth* loss terms on any linear map (squared, squared hinge, linear, logistic; a hinge
  term is refused with its reason);
* constraints: equality and inequality rows on any map.  Without constraints (P1, P3, P5,
  P6 square / squared hinge) L-BFGS minimises directly (``scipy.optimize``, L-BFGS-B
  without bounds).  With constraints (P2, P4, P6 linear with ``K_ii <= b^2``, a user's
  ``<=`` / ``>=`` rows) an augmented Lagrangian runs around L-BFGS:
  ``f(G) - lambda^T c(G) + (sigma/2)||c(G)||^2`` for equalities, the usual
  ``max(0, .)`` form for inequalities, multipliers updated by ``lambda <- lambda - sigma c``
  and ``sigma`` multiplied by 10 when the violation does not drop by 4 (Bertsekas 1999,
  the method SDPLR uses).  A problem of linear terms and constraints only is homogeneous
  and is solved in units where the mean nonzero bound is 1 (MVU's squared distances).
* an equality ``sum_ij K_ij = ||G^T 1||^2 = 0`` (MVU's centring) holds iff ``G^T 1 = 0``;
  it is imposed *exactly* by optimising over ``H`` with ``G = (I - 11^T/n) H`` (a linear
  map whose adjoint is itself; the chain's ``Centre`` step, kept by the oracle), so only
  the other rows go into the augmented Lagrangian.
* points forced equal by equality rows (P2's must-links: ``K_ii = K_jj = K_ij = 1`` force
  ``g_i = g_j``) are merged first (the chain's ``MergeEqualPoints``, read through the
  oracle: :func:`kernelforms.model.merge_equal_points`,
  ``G = P H`` with ``P`` the group indicator); the merged problem has the strictly
  feasible point ``K_c = I`` that P2 lacks.  On P2 itself the augmented Lagrangian stopped
  1e-4 to 9e-4 *below* the optimum at a violation of 1e-7 (without an interior point the
  objective moves like ``sqrt(violation)``); merged, it is within 3e-7 of Clarabel
  (docs/other_solvers.md).

Statuses: ``converged`` only when the violation is below ``feas_tol`` and the last inner
solve met ``gtol`` (without constraint rows also when the Lagrangian certificate proves the
point within ``stop_gap`` once the objective has stalled, :class:`_CertStop`); ``infeasible`` when the merge finds two equality rows asking different
values of one entry (hard PCP with a cannot-link inside a must-link chain; found before
solving) and when the stalled residual gives a Farkas certificate on the declaration's
constraints (:func:`_farkas`); ``max_iter`` when the violation stalls without one (the
message says what was seen); ``error`` / ``numerical_error`` when L-BFGS-B fails (an inner
failure is never success); ``timeout`` at the time limit.

Every pair row (entries, distances) is a row-wise dot product ``g_i . g_j`` and its
gradient ``2 A*(w) G`` a scatter of rows through sparse incidence matrices built once per
solve (the maps' generic ``adjoint_op`` would build a sparse matrix per evaluation); other
maps go through their own ``apply`` / ``adjoint_op``.  One objective/gradient costs
``O(nnz(C) r + m r)``; no ``n x n`` matrix is ever formed.

Rank
----
The problem is nonconvex in ``G``.  For an SDP with ``m`` linear constraints there is an
optimal ``K`` of rank ``r`` with ``r (r + 1) / 2 <= m`` (Barvinok-Pataki), and for
``r (r + 1) / 2 > m`` second-order critical points of the factored problem are global
in practice (Boumal, Voroninski & Bandeira 2016).  The default rank is therefore
``max(problem.default_rank(), rank_rule(m) + 1)``, capped at the PSD block (``n``, or the
basis's ``k`` columns), with ``m`` the declaration's loss and constraint rows.

Optimality evidence
-------------------
Each of these problems is a convex SDP ``min F(K)`` over ``K PSD`` (with linear
constraints ``A(K) = b``).  At the returned ``G`` the solver forms the *dual slack*
``S = grad F(K) - sum_k lambda_k A_k`` (``C`` plus the maps' adjoints) and reports
``extras["dual_slack_min_eig"]`` (Lanczos) and ``extras["complementarity"] = ||S G||_F``;
``S >= 0``, ``S G = 0`` and feasibility together certify a global optimum (KKT).
"""

from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from .._parallel import with_threads
from ..errors import OptionError, SolverError
from ..model import PSD, Basis, Capabilities, Range, SymOperator, sym_sum
from ..model.oracle import Oracle, PairOp, oracle
from ..problems.base import rank_rule
from ..result import Status
from . import _lbfgs
from .base import IterativeSolver, SolverOutput
from .options import Boolean, FactorInit, Interval, Rank, StrOptions

__all__ = ["LowRankBM", "TEST_RTOL", "default_rank", "build_model"]

#: relative objective gap to the conic optimum that the tests require
TEST_RTOL = 1e-4


# ----------------------------------------------------------------------------- the ALM
def _augmented(model: Oracle, H: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray,
               sigma: float) -> tuple[float, np.ndarray]:
    """Augmented Lagrangian value and gradient with respect to ``H``: ``f(G) - lam_e . c_e +
    (sigma / 2) ||c_e||^2 + (1 / 2 sigma) sum(max(0, lam_i + sigma c_i)^2 - lam_i^2)`` with
    ``f``, ``c`` the oracle's (:class:`~kernelforms.model.oracle.Oracle`)."""
    G = model.to_G(H)
    f, g = model.smooth(G)
    if model.eq or model.ineq:
        ce, ci = model.constraints(G)
        if len(ce):
            f += float(-lam_e @ ce + 0.5 * sigma * ce @ ce)
            g += model.scatter(G, model.eq, -lam_e + sigma * ce)
        if len(ci):
            # (1 / 2 sigma) sum(max(0, lam + sigma c)^2 - lam^2), lam >= 0 for c <= 0
            s = np.maximum(0.0, lam_i + sigma * ci)
            f += float((s @ s - lam_i @ lam_i) / (2.0 * sigma))
            g += model.scatter(G, model.ineq, s)
    return f, model.to_H_grad(g)


def _augmented_hessp(model: Oracle, H: np.ndarray, P: np.ndarray, lam_e: np.ndarray,
                     lam_i: np.ndarray, sigma: float) -> np.ndarray:
    """Hessian of :func:`_augmented` (with respect to ``H``) times a direction ``P``."""
    G, V = model.to_G(H), model.to_G(P)
    h = model.hessp(G, V)
    if model.eq or model.ineq:
        ce, ci = model.constraints(G)
        k = 0
        for b in model.eq:
            c = ce[k:k + len(b)]
            w = -lam_e[k:k + len(b)] + sigma * c
            h += b.op.grad(V, w) + b.op.grad(G, sigma * b.op.dvalues(G, V))
            k += len(b)
        k = 0
        for b in model.ineq:
            c, li = ci[k:k + len(b)], lam_i[k:k + len(b)]
            s = np.maximum(0.0, li + sigma * c)
            act = (s > 0).astype(float)
            sg = 1.0 if b.sgn is None else b.sgn
            # c = sgn (v - t): dc = sgn dv, and sgn^2 = 1 in the curvature term
            h += b.op.grad(V, sg * s) + b.op.grad(G, sigma * act * b.op.dvalues(G, V))
            k += len(b)
    return model.to_H_grad(h)


#: what lowrank accepts: K PSD or K = B Y B^T, either sense, no divergence, any constraint
#: rows, smooth losses (the sentences are lowrank's own, :func:`_reason`)
CAPABILITIES = Capabilities(forms=(PSD, Basis), senses=("min", "max"), loss_property="smooth",
                            loss_word="smooth")


def _reason(decl: Any) -> str | None:
    """Why the factored solver does not apply to a declaration (None when it does): the
    mismatch of :data:`CAPABILITIES`, worded."""
    miss = CAPABILITIES.mismatch(decl)
    if miss is None:
        return None
    if isinstance(decl.form, Range) or decl.divergence is not None:
        div = (f" and the {decl.divergence.kind} divergence D(K, K0)" if decl.divergence is not None
               else "")
        return ("lowrank minimises smooth functions of linear maps of K = G G^T (K PSD or "
                f"K = B Y B^T); this problem is stated over range(K) in range(K0){div}, a spectral "
                "term (log det / matrix log) that is infinite off range(K0) and at singular K, so "
                "L-BFGS on a factor does not apply; use 'burg' or 'vonneumann' (Bregman "
                "projections) or a conic method")
    if miss.what == "loss_property":
        t = miss.term
        return (f"lowrank needs smooth loss terms (L-BFGS on K = G G^T); this problem has a "
                f"{t.loss.name} loss term ({t.describe()}), and the {t.loss.name} loss is not "
                f"differentiable, so L-BFGS does not apply; use 'smo', 'bcd' or a conic method")
    return (CAPABILITIES.reason(decl, "lowrank handles K PSD or K = B Y B^T")
            or CAPABILITIES.loss_reason(decl, "lowrank"))


def _graph_connected(n: int, i: np.ndarray, j: np.ndarray) -> bool:
    from scipy.sparse.csgraph import connected_components

    A = sp.coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n))
    return int(connected_components(A, directed=False)[0]) == 1


def build_model(problem: Any) -> Oracle:
    """The factored oracle of a problem's declaration (:func:`kernelforms.model.oracle`), or
    ``SolverError`` with the reason lowrank does not apply."""
    why = _reason(problem.declaration)
    if why is not None:
        raise SolverError(f"lowrank: {why}")
    return oracle(problem.declaration)


def default_rank(problem: Any) -> int:
    """``max(problem.default_rank(), rank_rule(m) + 1)``, capped at the size of the PSD block.

    ``m`` counts the declaration's loss and constraint rows; ``rank_rule(m) + 1`` is the
    smallest ``r`` with ``r (r + 1) / 2 > m`` (see the module notes).
    """
    decl = problem.declaration
    cap = int(getattr(decl.form, "block", decl.n))
    m = decl.n_loss_rows + decl.n_constraint_rows
    return int(max(1, min(cap, max(problem.default_rank(), rank_rule(m, 10**9) + 1))))


# ----------------------------------------------------------------------------- the solver
def _spectral_init(model: Oracle, r: int, rng: np.random.Generator) -> np.ndarray:
    """MVU-style start (model units): Laplacian eigenmaps of the graph of the distance
    equality rows, scaled to fit the distances.

    Columns = eigenvectors 2 .. k+1 of the unnormalised graph Laplacian (k = min(r, 3)),
    times the least-squares factor that best matches ``||g_i - g_j||^2`` to ``d_ij^2``,
    padded with small random columns up to ``r``.  Centred by construction.
    """
    from ..data.graphs import smallest_eigenvectors, unnormalized_laplacian

    n = model.rows
    E, b = model.graph
    A = sp.coo_matrix((np.ones(len(E)), (E[:, 0], E[:, 1])), shape=(n, n)).tocsr()
    k = max(1, min(r, 3, n - 2))
    _, V = smallest_eigenvectors(unnormalized_laplacian(A + A.T), k, skip=1)
    c = np.einsum("ij,ij->i", V[E[:, 0]] - V[E[:, 1]], V[E[:, 0]] - V[E[:, 1]])
    s2 = float(c @ b) / max(float(c @ c), 1e-300)
    H = V * math.sqrt(max(s2, 1e-12))
    if r > k:
        pad = rng.standard_normal((n, r - k))
        pad *= 1e-2 * float(np.abs(H).max()) / max(float(np.abs(pad).max()), 1e-300)
        H = np.hstack([H, pad])
    return H - H.mean(axis=0, keepdims=True)


#: largest augmented-Lagrangian penalty (model units)
SIGMA_MAX = 1e8
#: outer iterations at SIGMA_MAX without a 2x decrease of the violation before giving up
STALL_OUTER = 10


#: an ABNORMAL L-BFGS line search with the largest gradient entry within this factor of gtol
#: is the objective's round-off (a stop at the precision limit, certified afterwards)
ROUNDOFF_GRAD = 1e3

#: certified early stop of the unconstrained L-BFGS runs (:class:`_CertStop`): a chunk of
#: iterations whose relative decrease of the objective is below this has stalled, and the
#: Lagrangian certificate is computed at its end
CERTSTOP_STALL = 1e-7
#: a check after one at iteration ``k`` waits until iteration ``CERTSTOP_SPACING * k``: a
#: run of ``N`` iterations makes at most ``log2(N / k0) + 1`` checks (deterministic, unlike
#: a budget on the clock; measured at 7,494 points: 0.8-1.9 s a check, 4-10% of the fit)
CERTSTOP_SPACING = 2
#: the preconditioned runs' L-BFGS: "numpy" (:mod:`kernelforms.solvers._lbfgs`, no bounds) or
#: "scipy" (L-BFGS-B)
PRECOND_LBFGS = "numpy"
#: a check that gave no bound (a failed eigenvalue run at that point) is retried at the next
#: stalled chunk's end, up to this many times in a row, before the spacing applies again
CERTSTOP_RETRIES = 2
#: plain L-BFGS (no chunks): the stall test every this many iterations
CERTSTOP_EVERY = 100


class _CertStop:
    """The certified early stop of lowrank's unconstrained L-BFGS runs (option ``stop_gap``).

    At a degenerate optimum the factor can keep a nearly flat direction (a singular value
    that shrinks by a third per thousand iterations) while the objective has long reached
    its optimum to 1e-7: the gradient rule (``gtol``) waits for that direction to die.  So
    when the objective has stalled (relative decrease below :data:`CERTSTOP_STALL` over a
    chunk), :func:`kernelforms.certificate.certify` bounds the optimum at the current factor,
    and a relative gap at most ``stop_gap`` ends the run: the point is proven within
    ``stop_gap`` of the optimum.  After a check at iteration ``k`` the next waits until
    iteration :data:`CERTSTOP_SPACING` ``* k`` (the checks' cost is bounded by their number,
    and the run does not depend on the clock); their times are recorded.
    """

    def __init__(self, problem: Any, model: "Oracle", shape: tuple[int, int], rtol: float) -> None:
        self.problem, self.model, self.shape, self.rtol = problem, model, shape, float(rtol)
        self.spent, self.last_cost = 0.0, 0.0
        self.f_prev: float | None = None
        self.fired: tuple[int, float] | None = None
        #: the certificate that fired the stop (computed at the factor the run returns)
        self.certificate: Any = None
        self.checks: list[tuple[int, float | None, float]] = []
        self.off: str | None = None if self.rtol > 0 else "stop_gap = 0"
        if self.off is None:
            from .. import certificate

            # no certificate for the problem: no checks; a point where one fails (Lanczos
            # without convergence, then no finite bound) is that point only
            self.off = certificate.applies(problem)
        self.failed = 0  # checks in a row that gave no gap

    def check(self, x: np.ndarray, f: float, it: int) -> bool:
        """True when the objective has stalled since the last call and the certificate
        proves the point at ``x`` (iteration ``it``) within ``stop_gap``."""
        from .. import certificate
        from ..errors import KernelformsError

        prev, self.f_prev = self.f_prev, float(f)
        if self.off is not None or self.fired is not None or prev is None or not np.isfinite(f):
            return False
        if prev - f > CERTSTOP_STALL * max(abs(f), 1e-300):
            return False  # still decreasing: the gradient rule may yet stop it
        if (self.checks and it < CERTSTOP_SPACING * self.checks[-1][0]
                and not 0 < self.failed <= CERTSTOP_RETRIES):
            return False  # the checks' spacing (a failed check is retried at the next stall)
        t = time.perf_counter()
        gap, cert = None, None
        try:
            G = self.model.problem_factor(self.model.to_G(np.asarray(x).reshape(self.shape)))
            cert = certificate.certify(self.problem, G)
            gap = float(cert.relative_gap)
        except (KernelformsError, np.linalg.LinAlgError, ValueError, ArithmeticError):
            # this point only (pendigits 7,494 at gamma = 100, seed 1: ARPACK found no
            # eigenvalue at iteration 1,175, so no bound; the rule used to stop checking there,
            # and the run went on to the gradient rule's 4,787 iterations)
            pass
        self.last_cost = time.perf_counter() - t
        self.spent += self.last_cost
        self.checks.append((int(it), gap, self.last_cost))
        self.failed = self.failed + 1 if gap is None else 0
        if gap is not None and math.isfinite(gap) and gap <= self.rtol:
            self.fired, self.certificate = (int(it), gap), cert
            return True
        return False

    def extras(self, returned: bool = True) -> dict[str, Any]:
        """What the checks did: ``certstop_checks`` [(iteration, gap or None, seconds)]; when
        the stop fired, its certificate as the run's own bound (``lower_bound``, or
        ``upper_bound`` for a maximisation, ``certified_gap``, ``certificate_time``): the run
        returns the very factor it was computed at, so the status check after the run
        (:func:`~kernelforms.solvers.base.certify_status`) and the rank growth
        (:func:`~kernelforms.solvers.rank.grow`) read it instead of computing it again."""
        out: dict[str, Any] = {"certstop_checks": list(self.checks), "certstop_seconds": self.spent}
        c = self.certificate
        if c is not None and returned:  # (returned: the run returns the certified factor)
            side = "upper_bound" if c.sense == "max" else "lower_bound"
            out.update({side: float(c.bound), "certified_gap": float(c.relative_gap),
                        "certificate_time": float(self.last_cost),
                        "certstop_fired": {"iteration": self.fired[0], "relative_gap": self.fired[1],
                                           "stop_gap": self.rtol}})
        return out


def _inner_failure(res: Any) -> tuple[Status, str] | None:
    """The status of an inner solve that failed (never success), or None.

    L-BFGS-B reports bad input as a message starting with "ERROR" (e.g. "ERROR: M <= 0"
    for a memory of 0); a non-finite iterate or value is a numerical error.
    """
    msg = str(getattr(res, "message", ""))
    if msg.upper().startswith("ERROR"):
        return Status.ERROR, f"the inner L-BFGS-B solve failed: {msg}"
    if not np.all(np.isfinite(res.x)) or not np.isfinite(float(res.fun)):
        return Status.NUMERICAL_ERROR, f"non-finite iterate or value in the inner solve ({msg})"
    return None


def _trace_bound(model: Oracle) -> float | None:
    """A bound on ``tr(K)`` over the feasible set of the constraints (model units), or None.

    * Every diagonal entry bounded above by an ``==`` or ``<=`` row (hard PCP, merged:
      ``K_ii = 1``; the linear NPKL loss: ``K_ii <= b^2``): ``tr(K) <= sum_i b_i``.
    * A centred ``K`` with ``||g_i - g_j||^2 = d_ij^2`` on the distance equality rows of a
      connected graph (MVU): every ``||g_i - g_j|| <= D = sum_e d_e`` (a path), so
      ``tr(K) = sum_ij ||g_i - g_j||^2 / (2 n) <= n D^2 / 2``.
    """
    n = model.rows
    top = np.full(n, np.inf)
    for blk in model.eq + model.ineq:
        op = blk.op
        if not isinstance(op, PairOp):
            continue
        up = op.i == op.j
        if blk.sgn is not None:
            up &= blk.sgn > 0
        np.minimum.at(top, op.i[up], blk.t[up])
    if np.all(np.isfinite(top)):
        return float(np.sum(top))
    if model.center and model.graph is not None:
        E, b = model.graph
        if _graph_connected(n, E[:, 0], E[:, 1]):
            D = float(np.sum(np.sqrt(np.maximum(b, 0.0))))
            return 0.5 * n * D * D
    return None


def _farkas(model: Oracle, G: np.ndarray, ce: np.ndarray, ci: np.ndarray) -> dict[str, Any]:
    """Try to prove the constraints (``A_e(K) = b_e``, ``sgn A_i(K) <= sgn b_i``, ``K PSD``)
    infeasible.

    For any ``y`` (free on equalities, ``>= 0`` on inequalities) a feasible ``K`` has
    ``<S_y, K> <= y . b`` with ``S_y = sum_e y_e A_e + sum_i y_i sgn_i A_i`` and
    ``y . b = sum_e y_e b_e + sum_i y_i sgn_i b_i``, and ``<S_y, K> >= min(0,
    lambda_min(S_y)) tr(K)``; so ``y . b < min(0, lambda_min(S_y)) tau`` with ``tau >= tr(K)``
    proves infeasibility.  ``y`` is the residual at the stalled point (``c_e`` and
    ``max(0, c_i)``): at the kernel nearest to feasibility it makes ``S_y`` PSD with
    ``y . b = -||y||^2 < 0`` (the optimality conditions of ``min ||A(K) - b||^2``).
    """
    from ..certificate import min_eigenvalue

    y = np.concatenate([np.asarray(ce, dtype=float), np.maximum(np.asarray(ci, dtype=float), 0.0)])
    ny = float(np.linalg.norm(y))
    if not ny > 0:
        return {"infeasible": False, "note": "zero residual"}
    y = y / ny
    parts = []
    yb, k = 0.0, 0
    for blk in model.eq + model.ineq:
        yk = y[k:k + len(blk)]
        if blk.sgn is not None:
            yk = blk.sgn * yk
        parts.append(blk.op.adjoint(yk))
        yb += float(yk @ blk.t)
        k += len(blk)
    mu, _ = min_eigenvalue(_as_matrix(sym_sum(model.rows, parts)))
    tau = _trace_bound(model)
    bound = 0.0 if mu >= 0 else (-math.inf if tau is None else mu * tau)
    margin = 1e-10 * max(1.0, max(float(np.max(np.abs(blk.t), initial=0.0))
                                  for blk in model.eq + model.ineq))
    infeasible = bool(yb < bound - margin)
    how = (f"y = the normalised residual: y . b = {yb:.3g}, lambda_min(sum y_k A_k) = {mu:.3g}"
           + (f", trace bound {tau:.3g}" if tau is not None and mu < 0 else ""))
    note = (f"Farkas certificate {how} (y . b < min(0, lambda_min) tr(K) for every feasible K)"
            if infeasible else f"no Farkas certificate from {how}")
    return {"infeasible": infeasible, "note": note, "y_dot_b": yb, "min_eig": mu}


def _as_matrix(S: SymOperator, dense_below: int = 2000) -> Any:
    """A :class:`SymOperator` as a sparse matrix, a dense array (small, with a dense part)
    or a ``LinearOperator``."""
    if S.is_sparse:
        return S.sparse
    return S.dense() if S.n <= dense_below else S.linear_operator()


class LowRankBM(IterativeSolver):
    """``"lowrank"``: Burer-Monteiro factorisation ``K = G G^T`` solved by L-BFGS / ALM.

    Options
    -------
    rank : int or None
        Columns of ``G``; ``None`` = :func:`default_rank`.
    gtol : float
        L-BFGS tolerance on the largest gradient entry (``scipy`` ``gtol``), relative to
        the gradient's initial size for the smooth problems.
    maxiter : int
        L-BFGS iterations per (inner) solve.
    max_outer : int
        Augmented-Lagrangian outer iterations.
    feas_tol : float
        Stop the augmented Lagrangian when the largest violation (in the problem's units)
        is below this and the inner solve converged.
    sigma0 : float
        Initial penalty (scaled internally by the problem's size).
    maxcor : int >= 1
        L-BFGS memory.
    init : ndarray, "random", "spectral" or None
        Starting factor ``G`` (``n x k``, problem units; projected on the basis for the
        ``K = B Y B^T`` form (P3 / P5), averaged over merged points (P2's must-link
        components), padded or cut to ``rank`` columns); ``None`` / "random" = Gaussian;
        "spectral" (distance equality rows over K PSD, e.g. MVU) = Laplacian eigenmaps of
        their graph, scaled to the distances.
    certificate : bool
        Compute the dual-slack eigenvalue (Lanczos; see the module notes).
    inner : {"lbfgs", "newton"}
        Inner solver of the augmented Lagrangian: L-BFGS, or a trust-region Newton-Krylov
        method (``scipy`` ``trust-krylov``) with exact Hessian-vector products.
    precondition : bool, default False
        Without constraint rows and with losses on entries only (P1, P6 square / squared
        hinge): L-BFGS in variables scaled row by row by the inverse square root of the
        row's Hessian block (:meth:`LowRankBM._precond_lbfgs`).  The loss weight makes
        each row stiff along a few directions and leaves the Laplacian's soft ones, so
        plain L-BFGS needs iterations in proportion to ``gamma``; scaled, about as many
        at ``gamma = 100`` as at 1.  The scaled runs use a numpy L-BFGS (two-loop recursion,
        backtracking line search), the plain ones scipy's L-BFGS-B.
    stop_gap : float >= 0, default 1e-6
        Without constraint rows: when the objective has stalled (relative decrease below
        1e-7 over a chunk of iterations, checked every 100 iterations without
        ``precondition``), the Lagrangian certificate
        (:func:`kernelforms.certificate.certify`) is computed at the current factor and a
        relative gap at most ``stop_gap`` stops the run ``converged`` (the message names
        the gap and the iteration).  After a check at iteration ``k`` the next waits until
        iteration ``2 k``.  0 turns the rule off (the gradient rule ``gtol`` alone).
    threads : int or None
        BLAS threads during the solve (``threadpoolctl``); 1 by default because the
        products are small and threaded BLAS on them is many times slower on a shared
        machine (measured: 70x on the 2-core CI box).  ``None`` leaves BLAS alone.
    """

    name = "lowrank"
    capabilities = CAPABILITIES
    formulation_name = "factored G G^T (Burer-Monteiro)"
    grows_rank = True

    def max_rank(self, problem: Any) -> int:
        """:func:`default_rank`: the Pataki bound of the loss and constraint rows, capped at
        the PSD block."""
        return default_rank(problem)
    defaults: ClassVar[dict[str, Any]] = {
        "rank": None,
        "gtol": 1e-9,
        "maxiter": 20000,
        "max_outer": 60,
        "feas_tol": 1e-7,
        "sigma0": 10.0,
        "maxcor": 20,
        "init": None,
        "certificate": True,
        "threads": 1,
        "inner": "lbfgs",
        "precondition": False,
        "stop_gap": 1e-6,
    }
    parameter_constraints: ClassVar[dict[str, list]] = {
        "rank": [Rank(), None],
        "gtol": [Interval(Real, 0, None, closed="neither")],
        "maxiter": [Interval(Integral, 1, None, closed="left")],
        "max_outer": [Interval(Integral, 1, None, closed="left")],
        "feas_tol": [Interval(Real, 0, None, closed="neither")],
        "sigma0": [Interval(Real, 0, None, closed="neither")],
        # L-BFGS-B stops with "ERROR: M <= 0" for a memory of 0
        "maxcor": [Interval(Integral, 1, None, closed="left")],
        "init": [FactorInit(), StrOptions({"random", "spectral"}), None],
        "certificate": [Boolean()],
        "threads": [Interval(Integral, 1, None, closed="left"), None],
        "inner": [StrOptions({"lbfgs", "newton"})],
        "precondition": [Boolean()],
        "stop_gap": [Interval(Real, 0, None, closed="left")],
    }

    def applies_to(self, problem: Any) -> str | None:
        """None for a declaration with a PSD or basis form, smooth losses and any linear
        constraints (:data:`CAPABILITIES`); otherwise the reason (:func:`_reason`)."""
        return _reason(problem.declaration)

    # ------------------------------------------------------------------ helpers
    def _rank(self, problem: Any, opts: dict[str, Any]) -> int:
        """The rank: the declared option (an int in [1, n], checked by ``run``) or the
        default; only the basis form needs one more check (``rank <= k``, its columns)."""
        r = opts["rank"]
        if r is None:
            return default_rank(problem)
        form = problem.declaration.form
        if isinstance(form, Basis) and int(r) > form.block:
            raise OptionError(f"The 'rank' option of lowrank must be an int in [1, k] = "
                              f"[1, {form.block}] for K = B Y B^T (Y of size k, the basis's columns: "
                              f"m_basis of RegPCP / RegMVU). Got {r!r} instead.")
        return int(r)

    def _lbfgs(self, fun, x0, opts, deadline, gtol, maxiter, hessp=None, on_iter=None,
               certstop: _CertStop | None = None, it0: int = 0):
        from scipy.optimize import minimize

        count = [0]

        def cb(intermediate_result):
            if on_iter is not None:
                on_iter(intermediate_result)
            if deadline is not None and time.perf_counter() > deadline:
                raise StopIteration
            count[0] += 1
            if (certstop is not None and count[0] % CERTSTOP_EVERY == 0
                    and certstop.check(intermediate_result.x, float(intermediate_result.fun),
                                       it0 + count[0])):
                raise StopIteration

        if hessp is not None:
            res = minimize(fun, x0, jac=True, hessp=hessp, method="trust-krylov", callback=cb,
                           options={"maxiter": int(maxiter), "gtol": gtol})
            # trust-krylov's gtol is on the 2-norm; report the max entry as L-BFGS does
            res.success = bool(res.success or np.max(np.abs(res.jac)) <= gtol)
            return res
        return minimize(fun, x0, jac=True, method="L-BFGS-B", callback=cb,
                        options={"maxiter": int(maxiter), "gtol": gtol, "ftol": 1e-16,
                                 "maxcor": int(opts["maxcor"]), "maxfun": 4 * int(maxiter)})

    def _precond_lbfgs(self, model: "Oracle", fun, x0: np.ndarray, shape: tuple[int, int],
                       opts: dict[str, Any], deadline: float | None, gtol: float, on_iter=None,
                       certstop: _CertStop | None = None):
        """L-BFGS on ``Z`` with ``g_i = T_i z_i``, ``T_i = B_i^{-1/2}`` the inverse square root
        of row ``i``'s Hessian block (:meth:`Oracle.row_blocks`, eigenvalues floored at 1e-3
        of their median largest): the rows' stiff directions (the loss weight times a rank-one
        term) and soft ones (the Laplacian) get comparable curvature.  The blocks depend on
        ``G``, so L-BFGS runs in chunks (25 iterations, doubling to 400), each from the
        current point with freshly computed blocks; the chunks run the numpy L-BFGS of
        :mod:`kernelforms.solvers._lbfgs` (no bounds, so none of L-BFGS-B's bookkeeping: a
        third of the fit at 7,494 points x 20 columns; :data:`PRECOND_LBFGS`).  Stops when the
        largest entry of the gradient in ``G`` (the unpreconditioned one, as without
        preconditioning) is at most ``gtol``, when a chunk stops for lack of progress (the
        ``ftol`` test of L-BFGS-B), when
        ``certstop`` proves the point at a chunk's end (:class:`_CertStop`), or after
        ``maxiter`` iterations in all.  Returns a ``scipy`` ``OptimizeResult`` in ``G``.
        """
        from scipy.optimize import OptimizeResult, minimize

        n, r = shape
        x = np.asarray(x0, dtype=float).copy()
        total, chunk, maxiter = 0, 25, int(opts["maxiter"])
        last: dict[str, Any] = {}
        res = None
        stalls = 0
        if certstop is not None:
            certstop.check(x, float(fun(x)[0]), 0)  # the reference value of the stall test
        while True:
            H = x.reshape(shape)
            w, Q = np.linalg.eigh(model.row_blocks(H))
            floor = max(1e-3 * float(np.median(w[:, -1])), 1e-12)
            w = np.maximum(w, floor)
            T = np.einsum("nab,nb,ncb->nac", Q, w**-0.5, Q)      # B^{-1/2}
            Tinv = np.einsum("nab,nb,ncb->nac", Q, w**0.5, Q)    # B^{1/2}

            def fz(z, T=T):
                h = np.matmul(T, z.reshape(n, r, 1)).ravel()
                f, g = fun(h)
                last["x"], last["g"], last["f"] = h, g, f
                return f, np.matmul(T, g.reshape(n, r, 1)).ravel()

            def cb(intermediate_result):
                if on_iter is not None:
                    on_iter(intermediate_result)
                if deadline is not None and time.perf_counter() > deadline:
                    raise StopIteration
                if "g" in last and float(np.max(np.abs(last["g"]))) <= gtol:
                    raise StopIteration

            z0 = np.einsum("nab,nb->na", Tinv, H).ravel()
            steps = min(chunk, maxiter - total)
            if PRECOND_LBFGS == "numpy":
                res = _lbfgs.minimize(fz, z0, maxiter=steps, maxcor=int(opts["maxcor"]), ftol=1e-16,
                                      maxfun=4 * steps, callback=cb)
            else:
                res = minimize(fz, z0, jac=True, method="L-BFGS-B", callback=cb,
                               options={"maxiter": steps, "gtol": 0.0, "ftol": 1e-16,
                                        "maxcor": int(opts["maxcor"]), "maxfun": 4 * steps})
            total += int(res.nit)
            xz = np.einsum("nab,nb->na", T, res.x.reshape(shape)).ravel()
            f, g = fun(xz)
            if not (np.all(np.isfinite(xz)) and np.isfinite(f)):
                break
            x = xz
            gmax = float(np.max(np.abs(g)))
            timed_out = deadline is not None and time.perf_counter() > deadline
            # ftol: no relative decrease; stop on two such chunks in a row (a fresh chunk
            # restarts the L-BFGS memory, which can stall once where a longer run would not)
            # (an ABNORMAL line search, status 2, at a point near machine precision likewise)
            stop = (int(res.status) == 0 and int(res.nit) < steps) or int(res.status) == 2
            stalled = stop and stalls >= 1
            stalls = stalls + 1 if stop else 0
            if gmax <= gtol or timed_out or total >= maxiter or stalled or int(res.status) not in (0, 1, 2, 99):
                break
            if certstop is not None and certstop.check(x, float(f), total):
                break
            chunk = min(2 * chunk, 400)
        ok = int(res.status) in (0, 99) and (gmax <= gtol or stalled) if res is not None else False
        out = OptimizeResult(x=x if res is None else x, fun=f, jac=g, nit=total,
                             success=bool(ok),
                             status=0 if ok else (1 if total >= maxiter else int(res.status)),
                             message=(f"preconditioned L-BFGS: largest gradient entry {gmax:.2e} "
                                      f"(gtol {gtol:.2e}); last chunk: {res.message}"))
        return out

    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        return with_threads(opts.get("threads"), self._solve_inner, problem, opts, rng, deadline)

    def _start(self, problem: Any, model: Oracle, r: int, opts: dict[str, Any],
               rng: np.random.Generator) -> np.ndarray:
        init = opts["init"]
        if isinstance(init, str):
            if init == "spectral" and (model.graph is None or model.basis is not None):
                raise OptionError(
                    "The 'init' option of lowrank may be 'spectral' only for a problem with distance "
                    "equality constraints over K PSD, such as MVU (Laplacian eigenmaps of their graph); "
                    f"this problem has {problem.declaration.structure()}. Use 'random', None or an "
                    "(n, rank) array.")
            if init == "spectral":
                return _spectral_init(model, r, rng)
            init = None
        if init is None:
            H0 = rng.standard_normal((model.rows, r)) / math.sqrt(r)
            if model.entry_losses:
                # K = B Y B^T with orthonormal B: rows of G = B H are sqrt(k / n) smaller
                H0 *= math.sqrt(model.n / max(model.rows, 1))
            return H0
        # an (n, k) factor of the problem (shape checked by the declaration)
        H0 = model.from_G(np.asarray(init, dtype=float)) / model.scale
        if H0.shape[1] < r:
            H0 = np.hstack([H0, 1e-3 * rng.standard_normal((model.rows, r - H0.shape[1]))])
        return H0[:, :r].copy()

    def _solve_inner(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
                     deadline: float | None) -> SolverOutput:
        r = self._rank(problem, opts)
        model = build_model(problem)
        if model.conflict is not None:
            return SolverOutput(None, Status.INFEASIBLE, 0, {},
                                f"infeasible: {model.conflict} (found before solving)",
                                {"infeasibility_check": {"infeasible": True, "note": model.conflict},
                                 "infeasible_pairs": model.conflict_pairs})
        shape = (model.rows, r)
        H0 = self._start(problem, model, r, opts, rng)
        constrained = bool(model.eq or model.ineq)
        what = {True: "augmented Lagrangian, one row per outer iteration", False: "L-BFGS"}[constrained]
        log = self.iteration_log(
            opts, header=f"n = {problem.n}, rank = {r}, {what}"
            + (f", {model.rows} rows after merging the points forced equal (e.g. must-links)"
               if model.expand is not None else ""),
            extra=("sigma",) if constrained else (), residual="violation" if constrained else "|grad|")
        history: dict[str, list] = {"objective": [], "violation": [], "sigma": [], "inner_iter": []}
        n_eq, n_in = model.n_eq, model.n_ineq
        lam_e, lam_i = np.zeros(n_eq), np.zeros(n_in)
        sigma = float(opts["sigma0"])
        x = H0.ravel()
        total_iter = 0
        status, message = Status.MAX_ITER, ""
        outer = 0
        prev_viol = math.inf
        viol = math.nan
        extras: dict[str, Any] = {"rank_used": r}
        s2 = model.scale**2

        def fun_for(le, li, s):
            def fun(v):
                f, g = _augmented(model, v.reshape(shape), le, li, s)
                return f, g.ravel()
            return fun

        if not constrained:
            fun = fun_for(lam_e, lam_i, sigma)
            _, g0 = fun(x)
            gtol = float(opts["gtol"]) * max(1.0, float(np.max(np.abs(g0))))
            count = [0]

            def on_iter(ir):
                count[0] += 1
                log.row(count[0], objective=float(ir.fun))

            certstop = _CertStop(problem, model, shape, float(opts["stop_gap"]))
            if opts["precondition"] and model.has_row_blocks():
                res = self._precond_lbfgs(model, fun, x, shape, opts, deadline, gtol, on_iter,
                                          certstop=certstop)
                left = int(opts["maxiter"]) - int(res.nit)
                if (float(np.max(np.abs(res.jac))) > 10 * gtol and left > 0 and np.all(np.isfinite(res.x))
                        and certstop.fired is None
                        and not (deadline is not None and time.perf_counter() > deadline)):
                    # the scaled runs stopped short of gtol (line searches at round-off):
                    # plain L-BFGS from there
                    done = int(res.nit)
                    res = self._lbfgs(fun, res.x, dict(opts, maxiter=left), deadline, gtol, left,
                                      on_iter=on_iter, certstop=certstop, it0=done)
                    res.nit = int(res.nit) + done
            else:
                res = self._lbfgs(fun, x, opts, deadline, gtol, opts["maxiter"], on_iter=on_iter,
                                  certstop=certstop)
            x = res.x
            total_iter = int(res.nit)
            history["objective"].append(float(res.fun))
            history["inner_iter"].append(int(res.nit))
            fail = _inner_failure(res)
            grad_ok = bool(np.max(np.abs(res.jac)) <= 10 * gtol)
            if certstop.checks:
                extras.update(certstop.extras(returned=fail is None))
            if fail is None and certstop.fired is not None:
                # the objective stalled and the Lagrangian certificate proves the point
                it_c, gap_c = certstop.fired
                status = Status.CONVERGED
                message = (f"certified gap {gap_c:.2g} <= stop_gap {float(opts['stop_gap']):g} at "
                           f"iteration {it_c} of this solve (the objective stalled; largest gradient entry "
                           f"{float(np.max(np.abs(res.jac))):.2e}, gtol {gtol:.2e})")
            elif deadline is not None and time.perf_counter() > deadline:
                status, message = Status.TIMEOUT, f"time limit reached after {total_iter} L-BFGS iterations"
            elif fail is not None:
                status, message = fail
            elif res.success or grad_ok:
                # success: L-BFGS-B's own test (projected gradient <= gtol, or no relative
                # decrease of f above ftol = 1e-16, i.e. machine precision)
                status, message = Status.CONVERGED, f"L-BFGS: {res.message}"
            elif int(getattr(res, "status", 1)) == 1:
                status, message = Status.MAX_ITER, f"L-BFGS: {res.message}"
            elif (int(getattr(res, "status", 1)) == 2
                  and float(np.max(np.abs(res.jac))) <= ROUNDOFF_GRAD * gtol):
                # ABNORMAL: the line search found no decrease, at a gradient near gtol: the
                # objective's round-off, not a failure (iris / soybean folds of KernelLearner
                # ended numerical_error 1.3-4.5 x above 10 gtol, certified gaps <= 1e-7):
                # the precision limit; the certificate (rank.grow, certify_status) decides
                status = Status.CONVERGED
                message = (f"L-BFGS: the line search found no decrease at round-off ({res.message}); "
                           f"largest gradient entry {float(np.max(np.abs(res.jac))):.2e} "
                           f"(gtol {gtol:.2e}): the precision limit, the certificate decides")
            else:
                status = Status.NUMERICAL_ERROR
                message = (f"L-BFGS stopped ({res.message}) with the largest gradient entry "
                           f"{float(np.max(np.abs(res.jac))):.2e} above 10 x gtol = {10 * gtol:.2e}")
            viol = 0.0
        else:
            feas = float(opts["feas_tol"])
            feas_model = feas / s2  # violation is measured in problem units
            # first subproblem to 1e-4 of the initial gradient (absolute 1e-6 was far
            # too tight for the first outer iterations at n = 2000), then x0.1 per outer
            _, g_init = fun_for(lam_e, lam_i, sigma)(x)
            inner_gtol = max(float(opts["gtol"]), 1e-4 * float(np.max(np.abs(g_init))))
            best_viol, best_outer = math.inf, 0
            lam_norms: list[float] = []
            farkas: dict[str, Any] | None = None
            for outer in range(1, int(opts["max_outer"]) + 1):
                fun = fun_for(lam_e, lam_i, sigma)
                hp = None
                if opts["inner"] == "newton":
                    hp = (lambda v, pv, le=lam_e, li=lam_i, sg=sigma:
                          _augmented_hessp(model, v.reshape(shape), pv.reshape(shape), le, li, sg).ravel())
                res = self._lbfgs(fun, x, opts, deadline, inner_gtol, opts["maxiter"], hp)
                fail = _inner_failure(res)
                if fail is not None:
                    status, message = fail
                    message += f" (outer iteration {outer})"
                    break
                x = res.x
                total_iter += int(res.nit)
                G = model.to_G(x.reshape(shape))
                ce, ci = model.constraints(G)
                viol = model.violation(ce, ci)
                f, _ = model.smooth(G)
                history["objective"].append(f)
                history["violation"].append(viol * s2)
                history["sigma"].append(sigma)
                history["inner_iter"].append(int(res.nit))
                log.row(outer, objective=f * s2 * model.sign,
                        residual=viol * s2, sigma=sigma)
                # multiplier update (first-order, as SDPLR)
                lam_e = lam_e - sigma * ce
                lam_i = np.maximum(0.0, lam_i + sigma * ci)
                lam_norms.append(float(np.sqrt(lam_e @ lam_e + lam_i @ lam_i)))
                if viol < 0.5 * best_viol:
                    best_viol, best_outer = viol, outer
                if deadline is not None and time.perf_counter() > deadline:
                    status = Status.TIMEOUT
                    message = (f"time limit reached after {outer} outer iterations, violation "
                               f"{viol * s2:.2e}")
                    break
                tight = inner_gtol <= float(opts["gtol"]) * 1.0001
                inner_ok = res.success or float(np.max(np.abs(res.jac))) <= 10 * inner_gtol
                if viol <= feas_model and tight and inner_ok:
                    status = Status.CONVERGED
                    message = (f"augmented Lagrangian converged: violation {viol * s2:.2e}, "
                               f"{outer} outer iterations")
                    break
                # stalled at the largest penalty: look for a proof of infeasibility
                if sigma >= SIGMA_MAX and outer - best_outer >= 3 and farkas is None:
                    farkas = _farkas(model, G, ce, ci)
                    log.message(f"violation stalled at {viol * s2:.2e}: infeasibility check: "
                                f"{farkas['note']}")
                    if farkas["infeasible"]:
                        status = Status.INFEASIBLE
                        message = (f"infeasible: {farkas['note']} (augmented Lagrangian stalled at "
                                   f"violation {viol * s2:.2e} after {outer} outer iterations)")
                        break
                if sigma >= SIGMA_MAX and outer - best_outer >= STALL_OUTER:
                    status = Status.MAX_ITER
                    message = (f"augmented Lagrangian stalled: violation {viol * s2:.2e} above "
                               f"feas_tol = {feas:g} (best {best_viol * s2:.2e} at outer {best_outer}, "
                               f"no 2x decrease in {STALL_OUTER} outer iterations at the largest "
                               f"penalty {SIGMA_MAX:.0e}); the problem may have no strictly feasible "
                               f"point, where the objective can be off by about sqrt(violation)"
                               + (f"; {farkas['note']}" if farkas is not None else ""))
                    break
                # raise the penalty only when an accurate inner solve did not cut the
                # violation by 4 (an inexact one says nothing about the multipliers)
                if viol > 0.25 * prev_viol and inner_ok:
                    sigma = min(sigma * 10.0, SIGMA_MAX)
                if viol <= 0.25 * prev_viol:
                    prev_viol = viol
                if inner_ok:
                    inner_gtol = max(float(opts["gtol"]), inner_gtol * 0.1)
            else:
                status = Status.MAX_ITER
                seen = (f"augmented Lagrangian: {int(opts['max_outer'])} outer iterations, violation "
                        f"{viol * s2:.2e} (best {best_viol * s2:.2e} at outer {best_outer}), penalty "
                        f"{sigma:.0e}, multiplier norm {lam_norms[0]:.3g} -> {lam_norms[-1]:.3g}")
                if viol > feas_model:
                    if farkas is None:
                        Gx = model.to_G(x.reshape(shape))
                        farkas = _farkas(model, Gx, *model.constraints(Gx))
                    if farkas["infeasible"]:
                        status = Status.INFEASIBLE
                        message = f"infeasible: {farkas['note']} ({seen})"
                    else:
                        message = f"{seen}; not shown infeasible: {farkas['note']}"
                else:
                    message = seen
            if farkas is not None:
                extras["infeasibility_check"] = farkas
            extras["outer_iterations"] = outer
        H = x.reshape(shape)
        G = model.to_G(H)
        if not np.all(np.isfinite(G)):
            return SolverOutput(None, Status.NUMERICAL_ERROR, total_iter, history,
                                "NaN or inf in the factor" + (f" ({message})" if message else ""))
        if opts["certificate"] and status is not Status.TIMEOUT:
            extras.update(self._certificate(model, G, lam_e, lam_i, deadline))
        if model.dist_block is not None and model.center and model.trace_coef < 0 and model.C is None:
            # MVU-like (max tr K, centred, one block of distance equalities): the block's
            # multipliers in the sign of kernelforms.certificate, S = sum_e lam_e A_e - I (unit-free)
            k0 = sum(len(b) for b in model.eq[:model.dist_block])
            lam_d = lam_e[k0:k0 + len(model.eq[model.dist_block])]
            extras["edge_multipliers"] = -np.asarray(lam_d, dtype=float).copy()
        if model.expand is not None:
            extras["components"] = model.rows
        return SolverOutput(model.problem_factor(G), status, total_iter, history, message, extras)

    # ------------------------------------------------------------------ certificate
    @staticmethod
    def _certificate(model: Oracle, G: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray,
                     deadline: float | None = None) -> dict[str, Any]:
        """Smallest eigenvalue of the dual slack S (restricted as the model is) and ||S G||.

        Skipped (``certificate_error``) when the time limit is reached during Lanczos."""
        import scipy.sparse.linalg as ssla

        try:
            Sop = model.dual_slack(G, lam_e, lam_i)
            S = Sop.sparse if Sop.is_sparse else Sop.linear_operator()
            if model.basis is not None:
                Q = model.basis
                Sr = Q.T @ Sop.matmat(Q)
                ev = float(np.linalg.eigvalsh((Sr + Sr.T) / 2).min())
                comp = float(np.linalg.norm(Q.T @ Sop.matmat(G)))
                scale = float(np.abs(Sr).max())
            else:
                n = model.n
                if Sop.is_sparse:
                    scale = float(abs(S).max()) if S.nnz else 1.0
                else:
                    scale = float(np.abs(Sop.dense()).max()) if n <= 2000 else 1.0
                if model.center:
                    shift = 2.0 * (scale * 10 + 1.0)

                    def mv(v):
                        v = np.asarray(v).reshape(n, -1)
                        c = v - v.mean(axis=0, keepdims=True)
                        Sc = S @ c
                        out = Sc - Sc.mean(axis=0, keepdims=True) + shift * v.mean(axis=0, keepdims=True)
                        return out

                    op = ssla.LinearOperator((n, n), matvec=mv, matmat=mv, dtype=float)
                else:
                    op = S
                if n <= 400:
                    Md = op @ np.eye(n) if model.center or not Sop.is_sparse else S.toarray()
                    ev = float(np.linalg.eigvalsh((Md + Md.T) / 2).min())
                else:
                    v0 = np.ones(n) / math.sqrt(n)
                    base = op

                    def timed(v, base=base):
                        if deadline is not None and time.perf_counter() > deadline:
                            raise TimeoutError("time limit reached during the certificate's Lanczos")
                        return base @ v

                    top = ssla.LinearOperator((n, n), matvec=timed, matmat=timed, dtype=float)
                    w, X = ssla.eigsh(top, k=1, which="SA", v0=v0, tol=1e-8, maxiter=20 * n)
                    x = X[:, 0] / np.linalg.norm(X[:, 0])
                    # the Ritz value minus its residual: an eigenvalue lies within it
                    ev = float(w[0]) - float(np.linalg.norm(base @ x - w[0] * x))
                SG = S @ G
                if model.center:
                    SG = SG - SG.mean(axis=0, keepdims=True)
                comp = float(np.linalg.norm(SG))
            out = {"dual_slack_min_eig": ev, "dual_slack_scale": scale, "complementarity": comp}
            if model.eq and not model.penalties and not model.ineq:
                # weak duality with the ALM multipliers (see docs/other_solvers.md): for a
                # feasible K', f(K') = <S, K'> + sum lam_k b_k >= min(0, lam_min(S)) tr(K') + dual
                dual, k = 0.0, 0
                for blk in model.eq:
                    dual += float(lam_e[k:k + len(blk)] @ blk.t)
                    k += len(blk)
                f_model, _ = model.smooth(G)
                s2 = model.scale**2
                m = min(0.0, ev)
                lb = None
                if model.C is None and model.trace_coef < 0:
                    # f = t tr(K') with t < 0 bounds its own trace: f (1 - m / t) >= dual
                    den = 1.0 - m / model.trace_coef
                    if den > 0:
                        lb = dual / den
                else:
                    tau = _trace_bound(model)
                    if tau is not None:
                        lb = dual + m * tau
                if lb is not None:
                    obj = model.sign * f_model * s2
                    if model.sign > 0:
                        out["lower_bound"] = lb * s2
                        out["certified_gap"] = (f_model - lb) / max(abs(f_model), 1e-300)
                    else:
                        ub = -lb * s2
                        out["upper_bound"] = ub
                        out["certified_gap"] = (ub - obj) / max(abs(ub), 1e-300)
            return out
        except Exception as exc:  # a diagnostic must never sink a solve
            return {"certificate_error": f"{type(exc).__name__}: {exc}"}
