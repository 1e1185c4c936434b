"""Shared machinery of the cyclic Bregman projection solvers of seed 003.

Both solvers (:mod:`~kernelforms.solvers.burg`, :mod:`~kernelforms.solvers.von_neumann`)
run the cyclic projection method of 003 Section 3.3: constraints are visited in order,
each projection solves eq. 3 for the step ``alpha`` that makes the constraint hold with
equality, and inequality constraints get the dual correction of eq. 4.

Sign convention.  We keep, for every constraint ``k``, ``nu_k`` = the sum of the steps
taken along its matrix ``A_k`` (``grad f(X) = grad f(X0) + sum_k nu_k A_k``).  The KKT
conditions ask ``nu_k <= 0`` for ``<=`` constraints, ``nu_k >= 0`` for ``>=`` ones and leave
equalities free.  003's ``lambda_k >= 0`` of a ``<=`` constraint is ``-nu_k``; its
``alpha' = min(lambda_k, alpha)`` reads here

* ``<=``: ``alpha' = min(-nu_k, alpha)``,
* ``>=``: ``alpha' = max(-nu_k, alpha)`` (the same rule for ``-A_k``),
* ``==``: ``alpha' = alpha`` (no correction),

followed by ``nu_k += alpha'``.  Convergence (003 Section 5.1.3) is the change of ``nu``
over one full sweep, relative: ``||nu - nu_prev||_2 <= tol * ||nu||_2`` (``nu = 0``
throughout means K0 already satisfies every constraint).

Constraint shapes.  A distance constraint is rank one, ``A = z z^T`` with
``z = e_i - e_j``; a diagonal entry ``K_ii`` is rank one with ``z = e_i``; an
off-diagonal entry ``K_ij`` is the rank-two indefinite ``A = (e_i e_j^T + e_j e_i^T) / 2``.
All three are handled exactly (see the solver modules).  In range coordinates only the
rows ``z^T F0`` of the base factor ``F0`` (``G0`` for Burg, ``V0`` for von Neumann) are
needed; they are gathered once (``O(c r)``), so no projection touches ``n``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SolverError
from ..problems.bregman import DISTANCE, GE, LE, BregmanLowRank
from ..result import Status
from .base import IterativeSolver, SolverOutput

#: tolerance used by the tests against the conic solve (relative objective gap)
TEST_RTOL = 1e-5

COMMON_DEFAULTS: dict[str, Any] = {
    "tol": 1e-10,        # relative change of the dual variables over one sweep
    "max_sweeps": 5000,
    "check_every": 1,    # evaluate divergence / violation every this many sweeps
}


@dataclass
class ConstraintRows:
    """The constraints in range coordinates of a base factor ``F0`` (n x r).

    ``left[k] @ X @ right[k]`` is constraint k's value for ``K = F0 X F0^T``; for rank-one
    constraints ``right[k]`` is ``left[k]`` (``rank1[k]`` is True).
    """

    left: np.ndarray
    right: np.ndarray
    rank1: np.ndarray
    sense: np.ndarray
    bound: np.ndarray

    @classmethod
    def build(cls, problem: BregmanLowRank, F0: np.ndarray) -> "ConstraintRows":
        c = problem.constraints
        i, j = np.asarray(c.i), np.asarray(c.j)
        dist = c.kind == DISTANCE
        left = F0[i].copy()
        right = F0[j].copy()
        left[dist] -= F0[j[dist]]
        rank1 = dist | (i == j)
        right[rank1] = left[rank1]
        return cls(left, right, rank1, np.asarray(c.sense), np.asarray(c.bound, dtype=float))

    def values(self, F: np.ndarray) -> np.ndarray:
        """Every constraint's value for ``K = F0 F F^T F0^T`` (F r x r), O(c r^2)."""
        L = self.left @ F
        R = self.right @ F
        return np.einsum("ij,ij->i", L, R)

    def violations(self, F: np.ndarray) -> np.ndarray:
        g = self.values(F) - self.bound
        return np.where(self.sense == LE, np.maximum(g, 0),
                        np.where(self.sense == GE, np.maximum(-g, 0), np.abs(g)))


def positive_bound_reason(problem: BregmanLowRank, divergence_label: str) -> str | None:
    """Rank-one ``<=``/``==`` constraints need a bound > 0 (both divergences keep the range,
    so ``z^T K z`` stays > 0 whenever ``z^T K0 z`` is)."""
    c = problem.constraints
    rank1 = (c.kind == DISTANCE) | (c.i == c.j)
    bad = rank1 & (c.sense != GE) & (c.bound <= 0)
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        return (f"constraint {k} (a distance or diagonal constraint with sense <= or ==) has "
                f"bound {c.bound[k]:.3g} <= 0; the {divergence_label} divergence keeps the range "
                "of K0, so such a value is unreachable (the problem is infeasible for P7)")
    return None


def single_threaded_blas():
    """Context manager limiting BLAS/LAPACK to one thread.

    Each projection works on r x r arrays; a multithreaded LAPACK ``eigh`` on a busy
    machine was measured 25x slower at r = 64 (15 ms instead of 0.6 ms).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def clip_step(alpha: float, nu: float, sense: int) -> float:
    """003 eq. 4: the dual correction (see the module docstring for the sign convention)."""
    if sense == LE:
        return min(-nu, alpha)
    if sense == GE:
        return max(-nu, alpha)
    return alpha


class BregmanSolver(IterativeSolver):
    """Common driver: option checks, the sweep loop, convergence and history.

    Subclasses set ``divergence`` and implement ``_setup`` (state from the problem),
    ``_sweep`` (one pass over the constraints, updating ``nu`` in place), ``_factor_F``
    (the r x r matrix F with ``K = F0 F F^T F0^T``), ``_divergence`` and ``_kernel``.
    """

    divergence = ""
    defaults = dict(COMMON_DEFAULTS)

    def applies_to(self, problem: Any) -> str | None:
        if not isinstance(problem, BregmanLowRank):
            return f"{self.name!r} solves BregmanLowRank (P7) only, not {type(problem).__name__}"
        if problem.divergence != self.divergence:
            return (f"{self.name!r} minimises the {self.divergence} divergence; the problem "
                    f"uses {problem.divergence!r}")
        return positive_bound_reason(problem, self.divergence)

    def _check_opts(self, opts: dict[str, Any]) -> None:
        tol, ms, ce = opts["tol"], opts["max_sweeps"], opts["check_every"]
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0:
            raise SolverError(f"The 'tol' option of {self.name!r} must be a float > 0. Got {tol!r} instead.")
        for nm, v in (("max_sweeps", ms), ("check_every", ce)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise SolverError(f"The {nm!r} option of {self.name!r} must be an int >= 1. Got {v!r} instead.")

    # -- subclass hooks -------------------------------------------------------------
    def _setup(self, problem: BregmanLowRank) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sweep(self, nu: list) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _factor_F(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _divergence(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _kernel(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- driver ---------------------------------------------------------------------
    def _solve(self, problem: BregmanLowRank, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        self._check_opts(opts)
        tol, max_sweeps, check_every = float(opts["tol"]), int(opts["max_sweeps"]), int(opts["check_every"])
        self._setup(problem)
        c = len(problem.constraints)
        nu = [0.0] * c
        hist: dict[str, list] = {"sweep": [], "divergence": [], "violation": [], "dual_change": [],
                                 "projections": [], "time": []}
        t0 = time.perf_counter()
        status, message = Status.MAX_ITER, f"max_sweeps = {max_sweeps} reached"
        sweeps = 0
        n_proj = 0
        prev = np.zeros(c)
        for sweeps in range(1, max_sweeps + 1):
            with single_threaded_blas():
                n_proj += self._sweep(nu)
            cur = np.asarray(nu)
            nrm = float(np.linalg.norm(cur))
            change = float(np.linalg.norm(cur - prev)) / nrm if nrm > 0 else 0.0
            prev = cur
            finite = math.isfinite(change) and np.all(np.isfinite(self._factor_F()))
            last = change <= tol or not finite or sweeps == max_sweeps or (
                deadline is not None and time.perf_counter() > deadline)
            if sweeps % check_every == 0 or last:
                F = self._factor_F()
                hist["sweep"].append(sweeps)
                hist["divergence"].append(self._divergence() if finite else math.nan)
                hist["violation"].append(float(self.rows.violations(F).max(initial=0.0)) if finite else math.nan)
                hist["dual_change"].append(change)
                hist["projections"].append(n_proj)
                hist["time"].append(time.perf_counter() - t0)
            if not finite:
                status, message = Status.NUMERICAL_ERROR, f"non-finite iterate in sweep {sweeps}"
                break
            if change <= tol:
                status = Status.CONVERGED
                message = (f"dual change {change:.2e} <= tol {tol:g} after {sweeps} sweeps, "
                           f"largest violation {hist['violation'][-1]:.2e}")
                break
            if deadline is not None and time.perf_counter() > deadline:
                status, message = Status.TIMEOUT, f"time limit after {sweeps} sweeps"
                break
        if status is Status.MAX_ITER:
            message += (f" (dual change {hist['dual_change'][-1]:.2e}, largest violation "
                        f"{hist['violation'][-1]:.2e}; growing duals suggest infeasible constraints)")
        G = self._kernel() if status is not Status.NUMERICAL_ERROR else None
        nu_arr = np.asarray(nu)
        extras = {"sweeps": sweeps, "projections": n_proj, "dual": nu_arr,
                  "active": int(np.sum(nu_arr != 0)),
                  "time_per_sweep": (time.perf_counter() - t0) / max(sweeps, 1)}
        extras.update(self._extras())
        return SolverOutput(G, status, sweeps, hist, message, extras)

    def _extras(self) -> dict[str, Any]:
        return {}
