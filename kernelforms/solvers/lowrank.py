"""Burer-Monteiro low-rank solver ("lowrank"): ``K = G G^T``, L-BFGS and an augmented Lagrangian.

The idea of SDPLR (Burer & Monteiro 2003, cited by Hu & Kwok 2013 and 2015): replace the
PSD variable by a factor ``G`` of shape ``(n, r)`` (the papers' ``V^T``), which drops
the PSD constraint and leaves a smooth nonlinear program in ``n r`` unknowns.

* Smooth problems (P1 soft PCP, P3 RegPCP, P5 RegMVU, P6 with the square or squared
  hinge loss) are minimised directly by L-BFGS (``scipy.optimize``, L-BFGS-B without
  bounds).
* Problems with constraints (P2 hard PCP, P4 MVU, P6 linear loss with ``K_ii <= b^2``)
  use an augmented Lagrangian around L-BFGS: ``f(G) - lambda^T c(G) + (sigma/2)||c(G)||^2``
  (inequalities through the usual ``max(0, .)`` form), multipliers updated by
  ``lambda <- lambda - sigma c`` and ``sigma`` multiplied by 10 when the violation
  does not drop by 4 (Bertsekas 1999, the method SDPLR uses).
* MVU's centring ``sum_ij K_ij = ||G^T 1||^2 = 0`` holds iff ``G^T 1 = 0``; it is imposed
  *exactly* by optimising over ``H`` with ``G = (I - 11^T/n) H`` (a linear map whose
  adjoint is itself), so only the distance equalities go into the augmented Lagrangian.
* P3 / P5 search over ``K = Q Y Q^T``: ``Y = H H^T`` and ``G = Q H``.
* P2 is solved with every must-link component collapsed to one row (``G = P H``, ``P`` the
  component indicator): ``K_ii = K_jj = K_ij = 1`` force ``g_i = g_j``, and the collapsed
  problem has the strictly feasible point ``K_c = I`` that P2 lacks.  On P2 itself the
  augmented Lagrangian stopped 1e-4 to 9e-4 *below* the optimum at a violation of 1e-7
  (without an interior point the objective moves like ``sqrt(violation)``); collapsed,
  it is within 3e-7 of Clarabel (docs/other_solvers.md).

Statuses: ``converged`` only when the violation is below ``feas_tol`` and the last inner
solve met ``gtol``; ``infeasible`` for hard PCP with a cannot-link inside a must-link
component (found before solving) and for equality constraints whose stalled residual
gives a Farkas certificate (:func:`_farkas`); ``max_iter`` when the violation stalls
without one (the message says what was seen); ``error`` / ``numerical_error`` when
L-BFGS-B fails (an inner failure is never success); ``timeout`` at the time limit.

Every pair term is a row-wise dot product ``g_i . g_j`` and its gradient a scatter
of rows through fixed sparse incidence matrices, so one objective/gradient costs
``O(nnz(L) r + m r)``; no ``n x n`` matrix is ever formed.

Rank
----
The problem is nonconvex in ``G``.  For an SDP with ``m`` linear constraints there is an
optimal ``K`` of rank ``r`` with ``r (r + 1) / 2 <= m`` (Barvinok-Pataki), and for
``r (r + 1) / 2 > m`` second-order critical points of the factored problem are global
in practice (Boumal, Voroninski & Bandeira 2016).  The default rank is therefore
``max(problem.default_rank(), rank_rule(m) + 1)``, capped at ``n`` (or ``m_basis``), with
``m`` the number of terms/constraints of the problem (``problem.n_terms``, plus ``n``
for the linear loss's diagonal bounds).

Optimality evidence
-------------------
Each of these problems is a convex SDP ``min F(K)`` over ``K PSD`` (with linear
constraints ``A(K) = b``).  At the returned ``G`` the solver forms the *dual slack*
``S = grad F(K) - sum_k lambda_k A_k`` (sparse: ``L`` plus pair / edge terms) and reports
``extras["dual_slack_min_eig"]`` (Lanczos) and ``extras["complementarity"] = ||S G||_F``;
``S >= 0``, ``S G = 0`` and feasibility together certify a global optimum (KKT).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Callable, ClassVar

import numpy as np
import scipy.sparse as sp

from ..errors import OptionError, SolverError
from ..problems import MVU, NPKL, PCP, RegMVU, RegPCP, rank_rule
from ..result import Status
from .base import IterativeSolver, SolverOutput
from .options import Boolean, FactorInit, Interval, Rank, StrOptions

__all__ = ["LowRankBM", "TEST_RTOL", "default_rank", "build_model"]

#: relative objective gap to the conic optimum that the tests require
TEST_RTOL = 1e-4


# ----------------------------------------------------------------------------- pair operators
class _PairOp:
    """``z_p = g_i . g_j`` for index pairs and the scatter of ``sum_p w_p dz_p/dG``."""

    def __init__(self, idx: np.ndarray, n: int) -> None:
        idx = np.asarray(idx, dtype=np.int64).reshape(-1, 2)
        self.i, self.j = idx[:, 0].copy(), idx[:, 1].copy()
        p = len(idx)
        cols = np.arange(p)
        self.Pi = sp.csr_matrix((np.ones(p), (self.i, cols)), shape=(n, p))
        self.Pj = sp.csr_matrix((np.ones(p), (self.j, cols)), shape=(n, p))
        self.n = n

    def values(self, G: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", G[self.i], G[self.j])

    def dvalues(self, G: np.ndarray, V: np.ndarray) -> np.ndarray:
        """Directional derivative of the values at G along V."""
        return np.einsum("ij,ij->i", G[self.i], V[self.j]) + np.einsum("ij,ij->i", V[self.i], G[self.j])

    def grad(self, G: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``sum_p w_p d(g_i . g_j)/dG = 2 S_w G`` with ``S_w = sum_p w_p (E_ij + E_ji) / 2``."""
        return self.Pi @ (w[:, None] * G[self.j]) + self.Pj @ (w[:, None] * G[self.i])

    def matrix(self, w: np.ndarray) -> sp.csr_matrix:
        """``sum_p w_p A_p`` with ``A_p = (E_ij + E_ji) / 2`` (``E_ii`` on the diagonal)."""
        h = 0.5 * w
        return sp.csr_matrix((np.concatenate([h, h]), (np.concatenate([self.i, self.j]),
                                                       np.concatenate([self.j, self.i]))),
                             shape=(self.n, self.n))


class _DistOp:
    """``c_e = ||g_i - g_j||^2`` for the edges and its gradient scatter."""

    def __init__(self, idx: np.ndarray, n: int) -> None:
        idx = np.asarray(idx, dtype=np.int64).reshape(-1, 2)
        e = len(idx)
        cols = np.arange(e)
        self.B = sp.csr_matrix((np.concatenate([np.ones(e), -np.ones(e)]),
                                (np.concatenate([idx[:, 0], idx[:, 1]]), np.concatenate([cols, cols]))),
                               shape=(n, e))
        self.BT = self.B.T.tocsr()
        self.n = n

    def values(self, G: np.ndarray) -> np.ndarray:
        D = self.BT @ G
        return np.einsum("ij,ij->i", D, D)

    def dvalues(self, G: np.ndarray, V: np.ndarray) -> np.ndarray:
        return 2.0 * np.einsum("ij,ij->i", self.BT @ G, self.BT @ V)

    def grad(self, G: np.ndarray, w: np.ndarray) -> np.ndarray:
        return 2.0 * (self.B @ (w[:, None] * (self.BT @ G)))

    def matrix(self, w: np.ndarray) -> sp.csr_matrix:
        """``sum_e w_e (e_i - e_j)(e_i - e_j)^T``."""
        return (self.B @ sp.diags(w) @ self.BT).tocsr()


# ----------------------------------------------------------------------------- the model
@dataclass
class _Model:
    """A factored problem: minimise ``f(G)`` with ``G = map(H)`` (+ constraints via ALM).

    ``f(G) = tr(G^T L G) + trace_coef ||G||^2 + sum_p phi(z_p)`` where the pair terms
    are penalties; ``eq`` are equalities ``values(G) - target = 0``; ``ineq`` are
    ``values(G) - target <= 0``.
    """

    n: int
    rows: int  # rows of H
    L: sp.csr_matrix | None = None
    trace_coef: float = 0.0
    #: (op, phi) with phi(z) -> (value, derivative)
    penalties: list[tuple[Any, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]]] = field(default_factory=list)
    eq: list[tuple[Any, np.ndarray]] = field(default_factory=list)
    ineq: list[tuple[Any, np.ndarray]] = field(default_factory=list)
    basis: np.ndarray | None = None  # G = Q H
    #: hard PCP: the problem's factor is ``expand @ G`` (must-link components collapsed)
    expand: sp.csr_matrix | None = None
    center: bool = False  # G = (I - 11^T/n) H
    scale: float = 1.0  # G_problem = scale * G_model (MVU distances are normalised)
    obj_scale: float = 1.0  # f_model = obj_scale * f_problem-in-model-units (informational)

    # ------------------------------------------------------------------ maps
    def to_G(self, H: np.ndarray) -> np.ndarray:
        if self.basis is not None:
            return self.basis @ H
        if self.center:
            return H - H.mean(axis=0, keepdims=True)
        return H

    def from_G(self, G: np.ndarray) -> np.ndarray:
        """A start ``H`` (model rows) from a factor of the problem (``n`` rows)."""
        if self.expand is not None:
            counts = np.asarray(self.expand.sum(axis=0)).ravel()
            return (self.expand.T @ G) / counts[:, None]
        if self.basis is not None:
            return self.basis.T @ G
        return G

    def problem_factor(self, G: np.ndarray) -> np.ndarray:
        """The problem's factor (``n`` rows, problem units) of the model factor ``G``."""
        if self.expand is not None:
            G = self.expand @ G
        return G * self.scale

    def to_H_grad(self, gG: np.ndarray) -> np.ndarray:
        if self.basis is not None:
            return self.basis.T @ gG
        if self.center:
            return gG - gG.mean(axis=0, keepdims=True)
        return gG

    @property
    def n_eq(self) -> int:
        return sum(len(t) for _, t in self.eq)

    @property
    def n_ineq(self) -> int:
        return sum(len(t) for _, t in self.ineq)

    # ------------------------------------------------------------------ pieces
    def smooth(self, G: np.ndarray) -> tuple[float, np.ndarray]:
        f = 0.0
        if self.L is not None:
            LG = self.L @ G
            f += float(np.sum(G * LG))
            g = 2.0 * LG
        else:
            g = np.zeros_like(G)
        if self.trace_coef:
            f += self.trace_coef * float(np.sum(G * G))
            g += 2.0 * self.trace_coef * G
        for op, phi in self.penalties:
            val, der = phi(op.values(G))
            f += float(np.sum(val))
            g += op.grad(G, der)
        return f, g

    def constraints(self, G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ce = [op.values(G) - t for op, t in self.eq]
        ci = [op.values(G) - t for op, t in self.ineq]
        return (np.concatenate(ce) if ce else np.zeros(0), np.concatenate(ci) if ci else np.zeros(0))

    def violation(self, ce: np.ndarray, ci: np.ndarray) -> float:
        v = float(np.max(np.abs(ce), initial=0.0))
        return max(v, float(np.max(ci, initial=0.0)))

    def _scatter(self, G: np.ndarray, ops: list, w: np.ndarray) -> np.ndarray:
        g = None
        k = 0
        for op, t in ops:
            gi = op.grad(G, w[k:k + len(t)])
            g = gi if g is None else g + gi
            k += len(t)
        return np.zeros_like(G) if g is None else g

    def augmented(self, H: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray,
                  sigma: float) -> tuple[float, np.ndarray]:
        """Augmented Lagrangian value and gradient with respect to ``H``."""
        G = self.to_G(H)
        f, g = self.smooth(G)
        if self.eq or self.ineq:
            ce, ci = self.constraints(G)
            if len(ce):
                f += float(-lam_e @ ce + 0.5 * sigma * ce @ ce)
                g += self._scatter(G, self.eq, -lam_e + sigma * ce)
            if len(ci):
                # (1 / 2 sigma) sum(max(0, lam + sigma c)^2 - lam^2), lam >= 0 for c <= 0
                s = np.maximum(0.0, lam_i + sigma * ci)
                f += float((s @ s - lam_i @ lam_i) / (2.0 * sigma))
                g += self._scatter(G, self.ineq, s)
        return f, self.to_H_grad(g)

    def augmented_hessp(self, H: np.ndarray, P: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray,
                        sigma: float) -> np.ndarray:
        """Hessian of :meth:`augmented` (with respect to ``H``) times a direction ``P``."""
        G, V = self.to_G(H), self.to_G(P)
        h = np.zeros_like(G)
        if self.L is not None:
            h += 2.0 * (self.L @ V)
        if self.trace_coef:
            h += 2.0 * self.trace_coef * V
        for op, phi in self.penalties:
            z = op.values(G)
            _, der, der2 = phi(z, True)
            h += op.grad(V, der) + op.grad(G, der2 * op.dvalues(G, V))
        if self.eq or self.ineq:
            ce, ci = self.constraints(G)
            k = 0
            for op, t in self.eq:
                c = ce[k:k + len(t)]
                w = -lam_e[k:k + len(t)] + sigma * c
                h += op.grad(V, w) + op.grad(G, sigma * op.dvalues(G, V))
                k += len(t)
            k = 0
            for op, t in self.ineq:
                c, li = ci[k:k + len(t)], lam_i[k:k + len(t)]
                s = np.maximum(0.0, li + sigma * c)
                act = (s > 0).astype(float)
                h += op.grad(V, s) + op.grad(G, sigma * act * op.dvalues(G, V))
                k += len(t)
        return self.to_H_grad(h)

    # ------------------------------------------------------------------ certificate
    def dual_slack(self, G: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray) -> sp.csr_matrix:
        """``S = grad F(K) - sum lam_k A_k`` (+ ``lam_i A_i`` for inequalities), sparse."""
        S = sp.csr_matrix((self.n, self.n))
        if self.L is not None:
            S = S + self.L
        if self.trace_coef:
            S = S + self.trace_coef * sp.identity(self.n, format="csr")
        for op, phi in self.penalties:
            _, der = phi(op.values(G))
            S = S + op.matrix(der)
        k = 0
        for op, t in self.eq:
            S = S - op.matrix(lam_e[k:k + len(t)])
            k += len(t)
        k = 0
        for op, t in self.ineq:
            S = S + op.matrix(lam_i[k:k + len(t)])
            k += len(t)
        return S.tocsr()


def _phi_square(gamma: float, T: np.ndarray, half: bool = False):
    """``gamma * (1 - T z)^2`` (or ``gamma/2 (z - t)^2`` variants built by callers)."""

    def phi(z, second=False):
        r = 1.0 - T * z
        if second:
            return gamma * r * r, -2.0 * gamma * r * T, np.full_like(z, 2.0 * gamma)
        return gamma * r * r, -2.0 * gamma * r * T

    return phi


def _phi_sqhinge(gamma: float, T: np.ndarray):
    def phi(z, second=False):
        r = np.maximum(0.0, 1.0 - T * z)
        if second:
            return gamma * r * r, -2.0 * gamma * r * T, 2.0 * gamma * (r > 0)
        return gamma * r * r, -2.0 * gamma * r * T

    return phi


def _phi_linear(gamma: float, T: np.ndarray):
    def phi(z, second=False):
        if second:
            return -gamma * T * z, -gamma * T, np.zeros_like(z)
        return -gamma * T * z, -gamma * T

    return phi


def _phi_target(weight: float, t: np.ndarray):
    """``weight * (z - t)^2``."""

    def phi(z, second=False):
        r = z - t
        if second:
            return weight * r * r, 2.0 * weight * r, np.full_like(z, 2.0 * weight)
        return weight * r * r, 2.0 * weight * r

    return phi


def _n_terms(problem: Any) -> int:
    m = int(problem.n_terms)
    if isinstance(problem, NPKL) and problem.loss == "linear":
        m += problem.n
    return m


def default_rank(problem: Any) -> int:
    """``max(problem.default_rank(), rank_rule(m) + 1)``, capped at the size of the PSD block.

    ``rank_rule(m) + 1`` is the smallest ``r`` with ``r (r + 1) / 2 > m`` (see the module notes).
    """
    cap = problem.m_basis if isinstance(problem, (RegPCP, RegMVU)) else problem.n
    m = _n_terms(problem)
    return int(max(1, min(cap, max(problem.default_rank(), rank_rule(m, 10**9) + 1))))


def must_link_components(problem: Any) -> tuple[int, np.ndarray]:
    """``(c, comp)``: the connected components of the must-link graph (singletons included)."""
    from scipy.sparse.csgraph import connected_components

    n, must = problem.n, problem.pairs.must
    A = sp.coo_matrix((np.ones(len(must)), (must[:, 0], must[:, 1])), shape=(n, n))
    c, comp = connected_components(A, directed=False)
    return int(c), np.asarray(comp, dtype=np.int64)


def _collapsed_hard_pcp(problem: Any) -> _Model:
    """P2 with every must-link component collapsed to one row.

    ``K_ii = K_jj = K_ij = 1`` force ``g_i = g_j`` (``||g_i - g_j||^2 = 0``), so a
    feasible ``G`` is ``P H`` with ``P`` the ``n x c`` component indicator and
    ``H`` the ``c x r`` factor of a kernel ``K_c`` with a unit diagonal and
    ``(K_c)_ab = 0`` for the cannot-linked components; ``tr(L K) = tr(P^T L P K_c)``.
    This is the same problem, but the reduced one has the strictly feasible point
    ``K_c = I``; the original has none (a must-link is an entry at the PSD bound),
    and the augmented Lagrangian then stops below the optimum by about
    ``sqrt(violation)`` (measured 1e-4 to 5e-4 relative at a violation of 1e-7).
    Needs no cannot-link inside a component (checked by the solver first).
    """
    n = problem.n
    c, comp = must_link_components(problem)
    P = sp.csr_matrix((np.ones(n), (np.arange(n), comp)), shape=(n, c))
    Lc = (P.T @ problem.laplacian @ P).tocsr()
    Lc = ((Lc + Lc.T) * 0.5).tocsr()
    cn = problem.pairs.cannot
    ab = np.sort(np.c_[comp[cn[:, 0]], comp[cn[:, 1]]], axis=1) if len(cn) else np.zeros((0, 2), np.int64)
    ab = np.unique(ab, axis=0) if len(ab) else ab
    diag = np.repeat(np.arange(c, dtype=np.int64)[:, None], 2, axis=1)
    idx = np.concatenate([ab.astype(np.int64), diag])
    t = np.concatenate([np.zeros(len(ab)), np.ones(c)])
    return _Model(c, c, L=Lc, eq=[(_PairOp(idx, c), t)], expand=P)


def build_model(problem: Any) -> _Model:
    """The factored model of a problem (see the module docstring)."""
    n = problem.n
    if isinstance(problem, PCP):
        if problem.hard:
            return _collapsed_hard_pcp(problem)
        idx, t = problem.target_pairs
        op = _PairOp(idx, n)
        return _Model(n, n, L=problem.laplacian, penalties=[(op, _phi_target(0.5 * problem.gamma, t))])
    if isinstance(problem, RegPCP):
        idx, t = problem.target_pairs
        return _Model(n, problem.m_basis, penalties=[(_PairOp(idx, n), _phi_target(1.0, t))],
                      basis=problem.basis)
    if isinstance(problem, MVU):
        d2 = problem.distances**2
        scale = float(np.sqrt(np.mean(d2))) if np.any(d2 > 0) else 1.0
        return _Model(n, n, trace_coef=-1.0, eq=[(_DistOp(problem.edges, n), d2 / scale**2)],
                      center=True, scale=scale)
    if isinstance(problem, RegMVU):
        d2 = problem.distances**2
        # maximise tr(K) - nu sum (dist - d^2)^2  <=>  minimise -||G||^2 + nu sum(...)^2
        return _Model(n, problem.m_basis, trace_coef=-1.0,
                      penalties=[(_DistOp(problem.edges, n), _phi_target(problem.nu, d2))],
                      basis=problem.basis)
    if isinstance(problem, NPKL):
        idx, T = problem.signed_pairs
        T = np.asarray(T, float)
        op = _PairOp(idx, n)
        if problem.loss == "square":
            return _Model(n, n, L=problem.laplacian, penalties=[(op, _phi_square(problem.gamma, T))])
        if problem.loss == "squared_hinge":
            return _Model(n, n, L=problem.laplacian, penalties=[(op, _phi_sqhinge(problem.gamma, T))])
        if problem.loss == "linear":
            diag = np.repeat(np.arange(n)[:, None], 2, axis=1)
            return _Model(n, n, L=problem.laplacian, penalties=[(op, _phi_linear(problem.gamma, T))],
                          ineq=[(_PairOp(diag, n), np.full(n, problem.b**2))])
    raise SolverError(f"lowrank: no factored model for {type(problem).__name__}")


# ----------------------------------------------------------------------------- the solver
def _spectral_init(problem: MVU, r: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """MVU start (model units): Laplacian eigenmaps of the kNN graph, scaled to fit the distances.

    Columns = eigenvectors 2 .. k+1 of the unnormalised graph Laplacian (k = min(r, 3)),
    times the least-squares factor that best matches ``||g_i - g_j||^2`` to ``d_ij^2``,
    padded with small random columns up to ``r``.  Centred by construction.
    """
    from ..data.graphs import smallest_eigenvectors, unnormalized_laplacian

    n = problem.n
    E = problem.edges
    A = sp.coo_matrix((np.ones(len(E)), (E[:, 0], E[:, 1])), shape=(n, n)).tocsr()
    k = max(1, min(r, 3, n - 2))
    _, V = smallest_eigenvectors(unnormalized_laplacian(A + A.T), k, skip=1)
    c = np.einsum("ij,ij->i", V[E[:, 0]] - V[E[:, 1]], V[E[:, 0]] - V[E[:, 1]])
    b = problem.distances**2 / scale**2
    s2 = float(c @ b) / max(float(c @ c), 1e-300)
    H = V * math.sqrt(max(s2, 1e-12))
    if r > k:
        pad = rng.standard_normal((n, r - k))
        pad *= 1e-2 * float(np.abs(H).max()) / max(float(np.abs(pad).max()), 1e-300)
        H = np.hstack([H, pad])
    return H - H.mean(axis=0, keepdims=True)


def with_threads(threads: Any, fn: Callable, *args: Any) -> Any:
    """Run ``fn(*args)`` with at most ``threads`` BLAS threads (no limit for None)."""
    if threads is None:
        return fn(*args)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return fn(*args)
    with threadpool_limits(limits=int(threads), user_api="blas"):
        return fn(*args)


#: largest augmented-Lagrangian penalty (model units)
SIGMA_MAX = 1e8
#: outer iterations at SIGMA_MAX without a 2x decrease of the violation before giving up
STALL_OUTER = 10


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


def _trace_bound(model: _Model) -> float | None:
    """A bound on ``tr(K)`` over the feasible set of an equality-constrained model (model units).

    Hard PCP (collapsed): ``tr(K_c) = c`` (unit diagonal).  MVU: a centred ``K`` with
    ``||g_i - g_j|| = d_ij`` on the edges of a connected graph has every
    ``||g_i - g_j|| <= D = sum_e d_e`` (a path), so ``tr(K) = sum_ij ||g_i - g_j||^2 / (2 n)
    <= n D^2 / 2``.
    """
    if model.L is not None and not model.penalties and model.trace_coef == 0:
        return float(model.n)
    if model.center and model.eq:
        D = float(sum(np.sum(np.sqrt(np.maximum(t, 0.0))) for _, t in model.eq))
        return 0.5 * model.n * D * D
    return None


def _farkas(model: _Model, G: np.ndarray, ce: np.ndarray) -> dict[str, Any]:
    """Try to prove the equality constraints ``<A_k, K> = b_k``, ``K PSD`` infeasible.

    For any ``y``: a feasible ``K`` has ``<sum_k y_k A_k, K> = y . b``, and
    ``<S_y, K> >= min(0, lambda_min(S_y)) tr(K)``; so ``y . b < min(0, lambda_min(S_y)) tau``
    with ``tau >= tr(K)`` proves infeasibility.  ``y`` is the residual ``A(K) - b`` at the
    stalled point: at the kernel nearest to feasibility it makes ``S_y`` PSD with
    ``y . b = -||y||^2 < 0`` (the optimality conditions of ``min ||A(K) - b||^2``).
    """
    from ..certificate import min_eigenvalue

    y = np.asarray(ce, dtype=float)
    ny = float(np.linalg.norm(y))
    if not ny > 0:
        return {"infeasible": False, "note": "zero residual"}
    y = y / ny
    S = sp.csr_matrix((model.n, model.n))
    yb, k = 0.0, 0
    for op, t in model.eq:
        S = S + op.matrix(y[k:k + len(t)])
        yb += float(y[k:k + len(t)] @ t)
        k += len(t)
    mu, _ = min_eigenvalue(S.tocsr())
    tau = _trace_bound(model)
    bound = 0.0 if mu >= 0 else (-math.inf if tau is None else mu * tau)
    margin = 1e-10 * max(1.0, max(float(np.max(np.abs(t), initial=0.0)) for _, t in model.eq))
    infeasible = bool(yb < bound - margin)
    how = (f"y = the normalised residual: y . b = {yb:.3g}, lambda_min(sum y_k A_k) = {mu:.3g}"
           + (f", trace bound {tau:.3g}" if tau is not None and mu < 0 else ""))
    note = (f"Farkas certificate {how} (y . b < min(0, lambda_min) tr(K) for every feasible K)"
            if infeasible else f"no Farkas certificate from {how}")
    return {"infeasible": infeasible, "note": note, "y_dot_b": yb, "min_eig": mu}


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
        Starting factor ``G`` (``n x k``, problem units; projected on the basis for P3 / P5,
        averaged over must-link components for P2, padded or cut to ``rank`` columns);
        ``None`` / "random" = Gaussian; "spectral" (MVU only) = Laplacian eigenmaps scaled
        to the distances.
    certificate : bool
        Compute the dual-slack eigenvalue (Lanczos; see the module notes).
    inner : {"lbfgs", "newton"}
        Inner solver of the augmented Lagrangian: L-BFGS, or a trust-region Newton-Krylov
        method (``scipy`` ``trust-krylov``) with exact Hessian-vector products.
    threads : int or None
        BLAS threads during the solve (``threadpoolctl``); 1 by default because the
        products are small and threaded BLAS on them is many times slower on a shared
        machine (measured: 70x on the 2-core CI box).  ``None`` leaves BLAS alone.
    """

    name = "lowrank"
    formulation_name = "factored G G^T (Burer-Monteiro)"
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
    }

    def applies_to(self, problem: Any) -> str | None:
        if isinstance(problem, (PCP, RegPCP, MVU, RegMVU)):
            return None
        if isinstance(problem, NPKL):
            if problem.loss == "hinge":
                return ("the hinge loss is not differentiable, so L-BFGS does not apply; "
                        "use 'smo', 'bcd' or a conic method")
            return None
        return f"no factored model for {type(problem).__name__}"

    # ------------------------------------------------------------------ helpers
    def _rank(self, problem: Any, opts: dict[str, Any]) -> int:
        """The rank: the declared option (an int in [1, n], checked by ``run``) or the
        default; only the basis problems need one more check (``rank <= m_basis``)."""
        r = opts["rank"]
        if r is None:
            return default_rank(problem)
        if isinstance(problem, (RegPCP, RegMVU)) and int(r) > problem.m_basis:
            raise OptionError(f"The 'rank' option of lowrank must be an int in [1, m_basis] = "
                              f"[1, {problem.m_basis}] for {type(problem).__name__} (K = Q Y Q^T with "
                              f"Y of size m_basis). Got {r!r} instead.")
        return int(r)

    def _lbfgs(self, fun, x0, opts, deadline, gtol, maxiter, hessp=None, on_iter=None):
        from scipy.optimize import minimize

        def cb(intermediate_result):
            if on_iter is not None:
                on_iter(intermediate_result)
            if deadline is not None and time.perf_counter() > deadline:
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

    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        return with_threads(opts.get("threads"), self._solve_inner, problem, opts, rng, deadline)

    def _start(self, problem: Any, model: _Model, r: int, opts: dict[str, Any],
               rng: np.random.Generator) -> np.ndarray:
        init = opts["init"]
        if isinstance(init, str):
            if init == "spectral" and not isinstance(problem, MVU):
                raise OptionError("The 'init' option of lowrank may be 'spectral' for MVU only "
                                  f"(Laplacian eigenmaps of the kNN graph); got a {type(problem).__name__}. "
                                  "Use 'random', None or an (n, rank) array.")
            if init == "spectral":
                return _spectral_init(problem, r, model.scale, rng)
            init = None
        if init is None:
            H0 = rng.standard_normal((model.rows, r)) / math.sqrt(r)
            if model.basis is not None and isinstance(problem, RegPCP):
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
        if isinstance(problem, PCP) and problem.hard:
            from ..data.pairs import inconsistent_pairs

            bad = inconsistent_pairs(problem.pairs)
            if bad:
                i, j = bad[0]
                return SolverOutput(
                    None, Status.INFEASIBLE, 0, {},
                    f"infeasible: the cannot-link ({i}, {j}) joins points linked by a chain of "
                    f"must-links (K_ij = 1 along the chain forces K[{i},{j}] = 1 where the cannot-link "
                    f"asks 0); {len(bad)} such cannot-link pair(s), found before solving",
                    {"infeasible_pairs": bad})
        model = build_model(problem)
        shape = (model.rows, r)
        H0 = self._start(problem, model, r, opts, rng)
        constrained = bool(model.eq or model.ineq)
        what = {True: "augmented Lagrangian, one row per outer iteration", False: "L-BFGS"}[constrained]
        log = self.iteration_log(
            opts, header=f"n = {problem.n}, rank = {r}, {what}"
            + (f", {model.rows} rows after collapsing must-links" if model.expand is not None else ""),
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
                f, g = model.augmented(v.reshape(shape), le, li, s)
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

            res = self._lbfgs(fun, x, opts, deadline, gtol, opts["maxiter"], on_iter=on_iter)
            x = res.x
            total_iter = int(res.nit)
            history["objective"].append(float(res.fun))
            history["inner_iter"].append(int(res.nit))
            fail = _inner_failure(res)
            grad_ok = bool(np.max(np.abs(res.jac)) <= 10 * gtol)
            if deadline is not None and time.perf_counter() > deadline:
                status, message = Status.TIMEOUT, f"time limit reached after {total_iter} L-BFGS iterations"
            elif fail is not None:
                status, message = fail
            elif res.success or grad_ok:
                # success: L-BFGS-B's own test (projected gradient <= gtol, or no relative
                # decrease of f above ftol = 1e-16, i.e. machine precision)
                status, message = Status.CONVERGED, f"L-BFGS: {res.message}"
            elif int(getattr(res, "status", 1)) == 1:
                status, message = Status.MAX_ITER, f"L-BFGS: {res.message}"
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
                          model.augmented_hessp(v.reshape(shape), pv.reshape(shape), le, li, sg).ravel())
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
                log.row(outer, objective=f * (s2 if model.trace_coef >= 0 else -s2),
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
                    farkas = _farkas(model, G, ce)
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
                if model.eq and viol > feas_model:
                    if farkas is None:
                        farkas = _farkas(model, model.to_G(x.reshape(shape)), model.constraints(
                            model.to_G(x.reshape(shape)))[0])
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
        if isinstance(problem, MVU):
            # in the sign of kernelforms.certificate: S = sum_e lam_e A_e - I (unit-free)
            extras["edge_multipliers"] = -np.asarray(lam_e, dtype=float).copy()
        if model.expand is not None:
            extras["components"] = model.rows
        return SolverOutput(model.problem_factor(G), status, total_iter, history, message, extras)

    # ------------------------------------------------------------------ certificate
    @staticmethod
    def _certificate(model: _Model, G: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray,
                     deadline: float | None = None) -> dict[str, Any]:
        """Smallest eigenvalue of the dual slack S (restricted as the model is) and ||S G||.

        Skipped (``certificate_error``) when the time limit is reached during Lanczos."""
        import scipy.sparse.linalg as ssla

        try:
            S = model.dual_slack(G, lam_e, lam_i)
            if model.basis is not None:
                Q = model.basis
                Sr = Q.T @ (S @ Q)
                ev = float(np.linalg.eigvalsh((Sr + Sr.T) / 2).min())
                comp = float(np.linalg.norm(Q.T @ (S @ G)))
                scale = float(np.abs(Sr).max())
            else:
                n = model.n
                scale = float(abs(S).max()) if S.nnz else 1.0
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
                    Md = op @ np.eye(n) if model.center else S.toarray()
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
                # weak duality with the ALM multipliers (see docs/other_solvers.md):
                # f(K') = <S, K'> + sum lam_k b_k >= lam_min(S) tr(K') + sum lam_k b_k
                dual = float(sum(lam_e[k0:k0 + len(t)] @ t for k0, (_, t) in
                                 zip(np.cumsum([0] + [len(t) for _, t in model.eq])[:-1], model.eq)))
                f_model, _ = model.smooth(G)
                s2 = model.scale**2
                if model.center and model.trace_coef < 0:  # MVU: -tr(K') (1 + lam_min^-) >= dual
                    den = 1.0 + min(0.0, ev)
                    if den > 0:
                        ub = -dual / den * s2
                        out["upper_bound"] = ub
                        out["certified_gap"] = (ub - (-f_model * s2)) / max(abs(ub), 1e-300)
                elif model.L is not None and model.trace_coef == 0:  # hard PCP: tr(K') = n
                    lb = dual + min(0.0, ev) * model.n
                    out["lower_bound"] = lb
                    out["certified_gap"] = (f_model - lb) / max(abs(f_model), 1e-300)
            return out
        except Exception as exc:  # a diagnostic must never sink a solve
            return {"certificate_error": f"{type(exc).__name__}: {exc}"}
