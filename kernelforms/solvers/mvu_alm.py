"""MVU by an augmented Lagrangian with a preconditioned Newton inner solve ("mvu").

The problem (maximum variance unfolding, Weinberger & Saul 2006; P4 of docs/problems.md)::

    max  tr(K)  s.t.  K_ii + K_jj - 2 K_ij = d_ij^2  on the edges of a graph,
                      sum_ij K_ij = 0,  K PSD.

Recognised from the declaration's canonical form (:func:`kernelforms.model.canonical`;
:data:`~kernelforms.solvers.mvu_parts.CAPABILITIES` and
:func:`~kernelforms.solvers.mvu_parts.reason`): the PSD form, a maximisation whose only
linear term is a positive multiple of ``tr K``, no loss terms, and as constraints the
centring ``1^T K 1 = 0`` (the chain's flag ``centred``) and distance rows on a connected
graph, all equalities or all ``<=`` (the inequality form of Sun, Boyd, Xiao & Diaconis 2006, ``MVU(...,
equality=False)``: ``K = 0`` is strictly feasible, so bounded multipliers exist).  For
``<=`` rows the augmented Lagrangian is Rockafellar's (1973), ``psi_e(c) = (max(0, lam_e +
sigma_e c)^2 - lam_e^2) / (2 sigma_e)`` (:func:`_al_weights`), the multipliers are clipped at
0, the violation is ``max(c_e, 0)`` and the projection moves only the rows violated or
within its tolerance of their bound; everything else below is shared.

The method
----------
Burer & Monteiro (2003): ``K = V V^T`` with ``V`` of shape ``(n, r)``, ``r`` small.  The
centring row holds exactly by keeping ``V^T 1 = 0`` (every update below preserves it).
The problem is solved in units where the largest edge distance is 1 (``t_e = d_e^2 /
d_max^2 <= 1``), so every tolerance is relative to the largest squared distance.

* **Start**: landmark Isomap (de Silva & Tenenbaum 2003): shortest paths on the graph from
  ``landmarks`` points chosen by farthest-point sampling, classical MDS of the landmarks,
  the other points placed by distance-based triangulation, the result scaled to fit the
  edge lengths by least squares.  On manifold data it lands near the unrolled optimum.
* **Augmented Lagrangian** (Hestenes 1969, Powell 1969; Bertsekas 1999) on the edge rows
  ``c_e(V) = ||v_i - v_j||^2 - t_e``::

      L(V; lam, sigma) = -||V||_F^2 + lam^T c(V) + (1/2) sum_e sigma_e c_e(V)^2,
      lam <- lam + sigma * c(V) after each inner solve,

  with one penalty per edge, ``sigma_e = beta max(|lam_e|, 1e-3 max|lam|) / max(t_e, t_med)``
  (``t_med`` the median squared length: 1 / t_e alone gave the shortest edges, 4-5 orders
  of magnitude below the longest at 2,000 points, penalties that wrecked the Hessian): the
  tensions of an MVU solution differ by orders of magnitude along the graph, and a penalty
  in proportion keeps ``w_e = lam_e + sigma_e c_e`` of the sign of ``lam_e`` unless the
  edge is off by ``1 / beta`` of its length (a uniform penalty made compressed edges
  "buckle": large negative curvature in every inner solve).  ``beta`` (option ``sigma0``)
  is multiplied by 5 when a converged inner solve did not cut the violation by 4, up to
  :data:`BETA_MAX` = 1e3 (with 1e6 the point got feasible but ``lam + sigma c`` was noise:
  no certificate at 300 points and above).  The
  starting multipliers are uniform, ``lam = kappa 1`` with
  ``kappa = ||V||^2 / sum_e ||v_i - v_j||^2`` (the best uniform ``lam`` in ``L(lam) V = V``).
* **Inner solve**: regularised Newton steps ``(H + rho I) P = -g`` with the exact Hessian
  ``H = 2 (L(w) - I) (x) I_r + J^T diag(sigma) J`` (sparse, ``n r`` rows), factorised by a
  sparse ``LDL^T`` (QDLDL, Stellato et al. 2020; the structure and its ordering are built
  once per rank, :class:`_NewtonPattern`) whose inertia says whether ``H + rho I`` is
  positive definite on ``1^perp`` (``rho`` raised until it is; Levenberg-Marquardt /
  trust-region Newton), with two steps of iterative refinement (``H`` reaches a condition
  number of 1e11 near the optimum).  The augmented Lagrangian is a quartic polynomial along
  any direction, so the step length is its exact minimiser, capped at the full regularised
  Newton step.  The multiplier update ``lam + sigma c`` moves each multiplier by at most
  :data:`MULT_STEP` times its size per outer iteration (safeguarded augmented Lagrangian,
  Birgin & Martinez 2014); when the violation stalls at the largest penalty the rank may
  grow (below).
* **Certificate and rank** (Burer & Monteiro 2003; the rank-growth step of HALLaR, Monteiro,
  Sujanani & Cifuentes 2023): after each inner solve the updated multipliers ``lam`` give
  the dual slack ``S = L(lam) - I`` on ``1^perp`` and weak duality ``tr(K*) (1 +
  lambda_min(S)) <= t^T lam`` (for ``lambda_min(S) > -1``, of either sign;
  docs/certificate.md).  ``lambda_min`` is dense below 400 points; above, shift-invert
  Lanczos with a sparse ``LDL^T`` of ``S - tau I``, ``tau`` verified below the spectrum by
  the inertia (Sylvester: exactly one negative pivot, the constant vector's), then ``tau``
  moved up while the inertia allows (a shift far below the spectrum left Lanczos stalling on
  the clustered bottom), and the Ritz value minus its residual kept only when the inertia of
  ``S`` minus it confirms that nothing lies below.  When ``lambda_min(S) < 0`` near
  feasibility (or while the violation stalls at the largest penalty), no kernel of the
  current rank solves the subproblem over ``K``: ``V`` gets one more column along the
  eigenvector (amplitude: the exact minimiser of the next subproblem along it), up to
  ``max_rank``.
* **The bound and the point**: every multiplier vector gives a valid bound, so the best one
  seen is kept (with its multipliers, ``Result.multipliers``).  A point whose
  violation is below 1e-3 and whose objective is within ``10 gap_tol`` of that bound is
  projected onto the edge rows by a few Gauss-Newton steps (:func:`project_to_edges`,
  min-norm corrections ``J^T y``, solved as ``(J^T J + mu I) D = -J^T c`` on the Newton
  system's sparsity pattern), and the projected point is the one tested and returned.

**On the face of the cliques** (option ``face``, ``==`` rows only; Krislock & Wolkowicz
2010, :func:`kernelforms.model.faces.clique_rows`): every feasible ``K`` has its range in
``null(A)``, ``A`` the sparse rows of the cliques' affine dependencies, so ``V`` is kept in
it (the start and every update projected by ``x - W (W^T x)``, ``W`` an orthonormal basis of
``range(A^T)``), the Newton and Gauss-Newton systems are restricted to it exactly
(``Z_r^T H Z_r``, ``Z`` a sparse orthonormal basis of ``null(A)``: :class:`_NewtonPattern`)
and ``lambda_min`` is that of ``Z^T (L(lam) - I) Z``.  The bound stays one of the original
problem: ``<L(lam) - I, K> >= lambda_min tr K`` for every PSD ``K`` with its range in the
face, and every feasible ``K`` is one.  Dependent rows (overlapping cliques, a clique listed
twice) are dropped by one small SVD per group of overlapping cliques.

For ``<=`` rows two more pieces: the penalty starts at ``beta = 100`` (:data:`SIGMA0_LE`;
from 1 the first inner solve stretched a Swiss roll 2.6-fold and collapsed it to rank 1,
a stationary point 0.6% below the optimum where the positive multipliers' graph falls
apart), and the rank step refills a column of ``V`` without variance instead of adding one,
along the lifted multipliers' eigenvector when the graph is disconnected, with the exact
amplitude of :func:`_grow_amplitude_le`.

Measured (docs/mvu.md, 2 cores shared): the inequality form converges at 2,000 points in
10-20 s with certified gaps of 1e-6 to 4e-5, and at 20,000 points within ten minutes.  The
equality form does not reliably certify 1e-3 at 2,000 points in 60 s (20,000 points: gap
0.47 after 600 s).  The rolls have no strictly feasible kernel (a 5-clique's distances fix its Gram block at rank 3 in any dimension), so
the dual's multipliers are not unique and those that certify a small gap are thousands of
times ``tr K``: a tiny violation buys much objective (docs/mvu.md).

Statuses: ``converged`` only when the violation is at most ``feas_tol`` (relative to the
largest squared distance) **and** the certified gap ``(upper bound - tr K) / tr K`` is at
most ``gap_tol`` and at least ``-gap_tol / 10`` (a point that beats the bound by more is
infeasible by more than its objective can afford: at a violation of 1e-4, 60 points, one
beat Clarabel's optimum by 0.6%) **and** the objective sensitivity
``||lam||_1 max_e |c_e| / ((1 + lambda_min(S)) tr K)`` is at most ``gap_tol``, for the
bound's multipliers ``lam`` and the point's edge violations ``c`` (:func:`sensitivity`: the
largest first-order change of ``tr K`` when the point is moved onto the edge rows).  With
``|lam^T c|`` in its place a 50-point roll (seed 26) converged 2.4e-3 above its optimum at
a violation of 8e-6 (``|lam^T c| / tr K`` read 1.2e-4, the sensitivity 1.0e-3): an optimum's
multipliers cancel, ``sum_e |lam_e| t_max`` reaching thousands of times ``tr K``, so a
small violation is worth much more objective than the edges violated at one point show.
**And** the point must be repairable: Gauss-Newton onto the edge rows (:func:`project_to_edges`,
at most 20 steps) must at least halve its violation, and the repaired point is the one returned,
its gap measured again.  The sensitivity is an estimate from the run's own multipliers, not
a bound: without the repair test a 52-point roll (seed 43) converged 1.95e-3 above its
optimum at a violation of 1.1e-7 (sensitivity 1.2e-4) that Gauss-Newton could not lower;
the optimum's multipliers are 63 times larger in sum (docs/mvu.md, "The repair test").
``timeout`` at the time limit; ``max_iter`` otherwise (the message says what was reached).
"""

from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..errors import OptionError, SolverError
from ..model import LE, canonical, oracle
from ..result import Status
from .base import IterativeSolver, SolverOutput
from .mvu_parts import (  # noqa: F401 - the solver's pieces, importable from here as before
    CAPABILITIES, _NewtonPattern, _row_violation, dual_slack_min_eig, landmark_isomap, onto,
    past, project_to_edges, reason)
from .options import Boolean, FactorInit, Interval, StrOptions

__all__ = ["MVUAugmentedLagrangian", "TEST_RTOL", "landmark_isomap", "dual_slack_min_eig"]

#: relative objective gap to the conic optimum that the tests require
TEST_RTOL = 1e-4

#: largest penalty factor beta (the per-edge penalty is beta |lam_e| / max(t_e, median t))
BETA_MAX = 1e3
#: ... and while the point's objective is above the best bound (polishing feasibility)
BETA_POLISH = 1e5
#: <= rows: also polish when the certified gap is met and only the violation is not
POLISH_WHEN_CERTIFIED = True
#: a point this close to feasible (relative) is projected onto the edge rows (Gauss-Newton)
PROJECT_BELOW = 1e-3
#: ... when the bound is within this many gap_tol of its objective
PROJECT_GAP = 10.0
#: ... to this fraction of feas_tol
PROJECT_TO = 0.5
#: Gauss-Newton steps of that projection for <= rows (6 for == rows): where the active set
#: changes each step gains less
PROJECT_STEPS_LE = 12
#: <= rows: the projection may shrink the point onto the rows when that costs at most this
#: fraction of gap_tol of the objective
SHRINK = 0.1
#: converged needs -NEGATIVE_GAP gap_tol <= certified gap <= gap_tol
NEGATIVE_GAP = 0.1
#: a point that passes the sensitivity test must also be repairable: Gauss-Newton onto the
#: edge rows (aiming at REPAIR_AIM x its violation, at most REPAIR_STEPS steps) must cut its
#: violation by REPAIR_CUT, and the repaired point is the one returned (a 52-point roll,
#: seed 43, passed the sensitivity test 1.95e-3 above its optimum at a violation of 1.1e-7
#: that Gauss-Newton could not lower: the optimum's multipliers were 63 x this run's)
REPAIR = True
REPAIR_AIM = 1e-3
REPAIR_CUT = 0.5
REPAIR_STEPS = 20
#: regularised Newton steps per inner solve (each one or a few sparse LDL^T factorisations)
NEWTON_MAX = 200
#: an inner solve stops at this fraction of its initial gradient norm (a tolerance shrunk
#: x0.2 per outer iteration was never met at 300 points, so the penalty never grew)
INNER_RTOL = 1e-2
#: a multiplier changes by at most this multiple of its size (or of the floor) per update
MULT_STEP = 4.0
#: <= rows: when lambda_min(S) < LIFT_BELOW the bound is also tried at lam + LIFT mean(lam)
LIFT_BELOW = -0.5
LIFT = 1e-2
#: iterative-refinement steps per Newton solve
REFINE = 2
#: multipliers below this fraction of the largest one get this floor in the penalty
PENALTY_FLOOR = 1e-3
#: the rank grows only once the relative violation is below this (or the point is feasible
#: and its inner solve converged): far from feasibility the multipliers mean little
GROW_VIOLATION = 1e-3
#: <= rows: a column of V whose singular value is below this fraction of the largest is
#: empty, and a new direction replaces it rather than adding a column
DEAD_COLUMN = 1e-4
#: the starting penalty factor of <= rows when sigma0 is not given (1 for == rows)
SIGMA0_LE = 100.0
#: feas_tol when it is not given: FEAS_TOL_EQ for == rows, FEAS_TOL_LE for <= rows (the
#: inequality form is strictly feasible, its multipliers bounded, so a violation of 1e-6 of
#: the largest squared distance costs little; at 1e-5 two 20,000-point rolls, seeds 34 and
#: 43, converged at violations of 2.0e-6 and 2.2e-6)
FEAS_TOL_EQ = 1e-5
FEAS_TOL_LE = 1e-6
#: the start is scaled so that this fraction of the edges is at least as long as asked
START_QUANTILE = 0.95
#: squared lengths below this quantile count as this quantile in the per-edge penalty
PENALTY_T_QUANTILE = 0.5


def sensitivity(lam: np.ndarray, s_min: float, violation: float, objective: float) -> float:
    """How far the objective can move, relative to it and to first order, when a point whose
    edge rows are violated by at most ``violation`` is moved onto them:
    ``||lam||_1 violation / ((1 + s_min) |objective|)`` for the bound's multipliers ``lam``
    (dual feasible after division by ``1 + s_min``); all in the solver's units (the largest
    squared distance 1).  It bounds ``|lam^T c|`` over every violation ``c`` of that size."""
    if not s_min > -1.0:
        return math.inf
    return float(np.sum(np.abs(lam))) * violation / (1.0 + s_min) / max(abs(objective), 1e-300)


def _al_weights(lam: np.ndarray, sigma: np.ndarray, c: np.ndarray,
                ineq: bool) -> tuple[np.ndarray, np.ndarray]:
    """The augmented Lagrangian's first-order weights ``w_e`` (its derivative in ``c_e``) and
    curvatures ``s_e`` (its second derivative): ``lam + sigma c`` and ``sigma`` for ``==``
    rows; for ``<=`` rows (Rockafellar 1973, ``psi(c) = (max(0, lam + sigma c)^2 -
    lam^2) / (2 sigma)``) ``max(0, lam + sigma c)`` and ``sigma`` where that is positive,
    else 0 (the generalised Hessian of the semismooth Newton method)."""
    w = lam + sigma * c
    if not ineq:
        return w, sigma
    on = w > 0
    return np.where(on, w, 0.0), np.where(on, sigma, 0.0)


def _grow_amplitude_le(x: np.ndarray, q: np.ndarray, c: np.ndarray, lam: np.ndarray,
                       sigma: np.ndarray) -> float:
    """The amplitude ``theta`` of a new column ``theta x`` that minimises the augmented
    Lagrangian of ``<=`` rows along it: with ``u = theta^2`` the edge rows move to ``c_e + u
    q_e`` (``q_e = (x_i - x_j)^2``) and the value ``-u ||x||^2 + sum_e psi_e(c_e + u q_e)``
    is convex in ``u``, its slope ``-||x||^2 + sum_e q_e max(0, lam_e + sigma_e (c_e + u
    q_e))`` increasing: its zero is found by bisection.  A slack row (``c_e < 0``) lets the
    column grow until it takes the slack up; the quartic with every row's full penalty (the
    previous rule) gave amplitudes so small at 2,000 points that six columns were added
    before the point moved."""
    xx = float(x @ x)

    def slope(u: float) -> float:
        return -xx + float(q @ np.maximum(lam + sigma * (c + u * q), 0.0))

    if not slope(0.0) < 0 or not np.any(q > 0):
        return 1e-3
    hi = 1.0
    for _ in range(200):
        if slope(hi) >= 0:
            break
        hi *= 4.0
    else:
        return 1e-3
    lo = 0.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if slope(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return math.sqrt(hi)


def _al_value(V: np.ndarray, ei: np.ndarray, ej: np.ndarray, t: np.ndarray, lam: np.ndarray,
              sigma: np.ndarray, ineq: bool) -> float:
    """The augmented Lagrangian ``-||V||^2 + sum_e psi_e(c_e(V))`` (see :func:`_al_weights`)."""
    U = V[ei] - V[ej]
    c = np.einsum("ij,ij->i", U, U) - t
    if ineq:
        psi = (np.maximum(lam + sigma * c, 0.0) ** 2 - lam * lam) / (2.0 * sigma)
    else:
        psi = lam * c + 0.5 * sigma * c * c
    return -float(np.sum(V * V)) + float(np.sum(psi))



# ----------------------------------------------------------------------------- the solver
class MVUAugmentedLagrangian(IterativeSolver):
    """``"mvu"``: MVU by an augmented Lagrangian on ``K = V V^T`` with regularised Newton
    inner solves (see the module notes).

    Options
    -------
    rank : int
        Columns of ``V`` at the start (grown by one whenever the certificate's dual slack
        has a negative eigenvalue at a feasible point, up to ``max_rank``).
    max_rank : int
        Largest number of columns.
    feas_tol : float or None
        (None: :data:`FEAS_TOL_EQ` = 1e-5 for ``==`` rows, :data:`FEAS_TOL_LE` = 1e-6 for
        ``<=`` rows.)  Stop when the largest distance violation ``|K_ii + K_jj - 2 K_ij - d_ij^2|``,
        divided by the largest ``d_ij^2``, is at most this ...
    gap_tol : float
        ... and the certified relative gap ``(upper bound - tr K) / tr K`` is at most this
        (and at least ``-gap_tol / 10``), and the objective sensitivity
        ``||lam||_1 max|c| / tr K`` is at most this (the
        module notes, "Statuses").
    max_outer : int
        Augmented-Lagrangian outer iterations (multiplier updates).
    sigma0 : float or None
        Initial penalty factor ``beta`` (None: 1 for ``==`` rows, :data:`SIGMA0_LE` = 100
        for ``<=`` rows): edge ``e`` is penalised by
        ``beta max(|lam_e|, 1e-3 max|lam|) / max(t_e, median t)`` (grown x5, up to
        :data:`BETA_MAX`, when a
        converged inner solve did not cut the violation by 4).
    landmarks : int
        Landmarks of the Isomap start.
    init : "isomap", "random" or an (n, k) array
        The start (problem units for an array; padded or cut to ``rank`` columns).
    threads : int or None
        BLAS threads during the solve (1 by default: the dense products are thin).
    face : bool
        ``==`` rows only: solve on the face of the cliques (Krislock & Wolkowicz 2010;
        :func:`kernelforms.model.faces.clique_rows`): every column of ``V`` stays in
        ``null(A)``, the Newton steps and projections are restricted to it and the
        certificate's ``lambda_min`` is taken on it (docs/mvu.md, "Equality MVU on the face
        of its cliques").  False by default.
    """

    name = "mvu"
    formulation_name = "factored V V^T, augmented Lagrangian + regularised Newton (MVU)"
    defaults: ClassVar[dict[str, Any]] = {
        "rank": 3,
        "max_rank": 12,
        "feas_tol": None,
        "gap_tol": 2e-4,
        "max_outer": 500,
        "sigma0": None,
        "landmarks": 50,
        "init": "isomap",
        "threads": 1,
        "face": False,
    }
    parameter_constraints: ClassVar[dict[str, list]] = {
        "rank": [Interval(Integral, 1, None, closed="left")],
        "max_rank": [Interval(Integral, 1, None, closed="left")],
        "feas_tol": [Interval(Real, 0, None, closed="neither"), None],
        "gap_tol": [Interval(Real, 0, None, closed="neither")],
        "max_outer": [Interval(Integral, 1, None, closed="left")],
        "sigma0": [Interval(Real, 0, None, closed="neither"), None],
        "landmarks": [Interval(Integral, 2, None, closed="left")],
        "init": [FactorInit(), StrOptions({"isomap", "random"})],
        "threads": [Interval(Integral, 1, None, closed="left"), None],
        "face": [Boolean()],
    }

    capabilities = CAPABILITIES

    def applies_to(self, problem: Any) -> str | None:
        """None for MVU's declaration, else the reason (:func:`~kernelforms.solvers.mvu_parts.reason`)."""
        return reason(problem.declaration)

    def estimate_memory(self, problem: Any, opts: dict[str, Any]) -> int | None:
        """The factor, the Newton system's LU (about 60 nonzeros per row of ``n r`` rows for a
        kNN graph of a 2-D manifold) and the edge arrays."""
        try:
            n = int(problem.n)
            r = min(int(opts.get("max_rank") or 12), n)
            e = sum(b.size for b in canonical(problem.declaration).constraint_blocks.values())
        except (AttributeError, TypeError, ValueError, IndexError):
            return None
        return int(8 * (30 * n * r + 20 * e * r + 200 * n * min(r, 6)))

    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        from .._parallel import with_threads

        return with_threads(opts.get("threads"), self._run, problem, opts, rng, deadline)

    # ------------------------------------------------------------------ the start
    def _start(self, n: int, ei: np.ndarray, ej: np.ndarray, t: np.ndarray, r: int,
               opts: dict[str, Any], rng: np.random.Generator, dscale: float,
               deadline: float | None = None, face: Any = None) -> np.ndarray:
        init = opts["init"]
        if isinstance(init, str) and init == "isomap":
            V = landmark_isomap(n, ei, ej, np.sqrt(t), r, int(opts["landmarks"]), rng,
                                deadline=deadline)
        elif isinstance(init, str):  # random
            V = rng.standard_normal((n, r))
        else:
            V = np.asarray(init, dtype=float) / dscale
            if V.shape[1] < r:
                V = np.hstack([V, np.zeros((n, r - V.shape[1]))])
            V = V[:, :r].copy()
        V = onto(V, face)
        # scale to fit the edge lengths (least squares on the squared distances)
        U = V[ei] - V[ej]
        q = np.einsum("ij,ij->i", U, U)
        ok = q > 1e-12 * max(float(q.max()), 1e-300)
        s2 = float(np.quantile(t[ok] / q[ok], START_QUANTILE)) if np.any(ok) else 1.0
        V *= math.sqrt(max(s2, 1e-300))
        # tiny noise in every column, so no column is exactly zero (a saddle of the factor)
        amp = 1e-3 * max(float(np.abs(V).max()), 1.0)
        V += amp * rng.standard_normal(V.shape) / math.sqrt(n)
        return onto(V, face)

    # ------------------------------------------------------------------ the algorithm
    def _run(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
             deadline: float | None) -> SolverOutput:
        why = reason(problem.declaration)
        if why is not None:
            raise SolverError(f"mvu: {why}")
        # the canonical form (the chain's reduced declaration: a minimisation, the centring
        # row kept by centred factors) gives the rows, the factored oracle their operator on
        # K = V V^T (the distance rows' incidence matrix) and the trace coefficient
        can = canonical(problem.declaration)
        orc = oracle(problem.declaration)
        ((sense, rows),) = can.constraint_blocks.items()
        ineq = sense == LE  # distance rows <=: multipliers >= 0, violation max(c, 0)
        blocks = orc.ineq if ineq else orc.eq
        coef = -orc.trace_coef  # the oracle minimises -coef tr(K)
        n = can.n
        r = int(opts["rank"])
        # max_rank is a cap: a K over n points has rank <= n (the default 12 refused every
        # MVU below 12 points, naming options nobody had passed)
        rmax = min(int(opts["max_rank"]), n)
        if r > n:
            if r != self.defaults["rank"]:
                raise OptionError(f"The 'rank' option of mvu must be at most the number of points "
                                  f"n = {n}. Got {r} instead.")
            r = n  # the default starting rank, capped like max_rank
        if r > rmax:
            raise OptionError(f"The 'rank' option of mvu ({r}) must be at most 'max_rank' "
                              f"({rmax}); raise max_rank or lower rank.")
        if not isinstance(opts["init"], str):
            A = np.asarray(opts["init"])
            if A.shape[0] != n:
                raise OptionError(f"The 'init' option of mvu must have n = {n} rows; got shape "
                                  f"{A.shape}.")
        if opts["face"] and ineq:
            raise OptionError("The 'face' option of mvu needs equality distance rows (the face of "
                              "the cliques holds only where every clique distance is fixed); "
                              "this problem's rows are <=: use face=False.")
        ei, ej = rows.i, rows.j
        bmax = float(rows.bound.max())
        if not bmax > 0:
            # every edge has length 0: the only feasible centred kernel is 0
            return SolverOutput(np.zeros((n, 1)), Status.CONVERGED, 0, {},
                                "every edge distance is 0: K = 0 is the only feasible kernel",
                                upper_bound=0.0, certified_gap=0.0, rank_used=1)
        # model units: the largest squared distance is 1 (the oracle's are the mean one's;
        # mvu's tolerances are relative to the largest)
        t = rows.bound / bmax
        dscale = math.sqrt(bmax)
        m = len(t)
        # the incidence matrix of the edges (n x m; the gradient of sum_e w_e c_e is 2 B (w U))
        Bm = (blocks[0].op.B if len(blocks) == 1
              else sp.hstack([blk.op.B for blk in blocks], format="csr"))
        feas = float(opts["feas_tol"] if opts["feas_tol"] is not None
                     else (FEAS_TOL_LE if ineq else FEAS_TOL_EQ))
        gtol_rel = float(opts["gap_tol"])
        extras: dict[str, Any] = {}
        log = self.iteration_log(opts, header=f"n = {n}, edges = {m}, rank = {r}, augmented "
                                 "Lagrangian + regularised Newton", extra=("beta", "newton", "gap"),
                                 residual="violation")
        face = None
        if opts["face"]:
            from ..model.faces import clique_rows

            t_face = time.process_time()
            face = clique_rows(n, ei, ej, t)
            extras["face"] = {"reducing": face.reducing, "cliques": len(face.cliques),
                              "rows": int(face.A.shape[0]), "codimension": face.q,
                              "flattest": face.flattest, "largest_zero": face.smallest_zero,
                              "cpu_seconds": time.process_time() - t_face}
            log.message(f"face of {face.reducing} of {len(face.cliques)} cliques: codimension "
                        f"{face.q} in 1^perp")
        V = self._start(n, ei, ej, t, r, opts, rng, dscale, deadline, face)
        history: dict[str, list] = {"objective": [], "violation": [], "beta": [], "newton": [],
                                    "gap": [], "rank": [], "time": [], "dual_slack_min_eig": []}
        U = V[ei] - V[ej]
        kappa = float(np.sum(V * V)) / max(float(np.sum(U * U)), 1e-300)
        lam = np.full(m, kappa)
        # <= rows start at a larger penalty: from beta = 1 the first inner solve stretched
        # the roll 2.6-fold and the point collapsed to rank 1 (its height lost), a stationary
        # point 0.6% below the optimum that the rank-growth step left only slowly (20,000
        # points: gap 0.14 after 600 s); from 100 the height stays (1.5% of tr K)
        beta = float(opts["sigma0"] if opts["sigma0"] is not None else (SIGMA0_LE if ineq else 1.0))

        t_pen = np.maximum(t, max(float(np.quantile(t, PENALTY_T_QUANTILE)), 1e-12))

        lam_tiny = 1e-12 * kappa  # <= rows: every multiplier may reach 0

        def penalties(lam):
            floor = PENALTY_FLOOR * max(float(np.max(np.abs(lam))), lam_tiny)
            return beta * np.maximum(np.abs(lam), floor) / t_pen

        sigma = penalties(lam)
        prev_viol = math.inf
        status, message = Status.MAX_ITER, ""
        total_newton = 0
        gap, ub, s_min = math.inf, math.inf, math.nan
        t_start = time.perf_counter()
        guess = 0.0
        outer = 0
        state: dict[str, Any] = {"face": face}
        best_ub, best_lam, best_smin = math.inf, lam.copy(), math.nan
        for outer in range(1, int(opts["max_outer"]) + 1):
            c0 = np.einsum("ij,ij->i", V[ei] - V[ej], V[ei] - V[ej]) - t
            g0 = self._grad(V, ei, ej, Bm, _al_weights(lam, sigma, c0, ineq)[0])
            if face is not None:
                g0 = face.project(g0)
            gnorm0 = float(np.linalg.norm(g0))
            # inexact inner solves: each subproblem cuts its gradient by 1 / INNER_RTOL
            inner_tol = INNER_RTOL * gnorm0
            V, newton, ok = self._inner(V, ei, ej, Bm, t, lam, sigma, inner_tol, deadline, state,
                                        ineq=ineq)
            total_newton += newton
            U = V[ei] - V[ej]
            c = np.einsum("ij,ij->i", U, U) - t
            viol = float(np.max(_row_violation(c, ineq)))
            # safeguarded update: a multiplier moves by at most MULT_STEP times its own size
            # (or the floor) per outer iteration.  With the penalty in proportion to |lam_e|,
            # lam_e + sigma_e c_e multiplies lam_e by 1 + beta c_e / t_e, and on an edge that a
            # rank too small cannot meet (c_e / t_e ~ 1e-2) that compounded to lambda_min(S) =
            # -1e17 within ten iterations (2,000 points, seed 5), after which no bound came
            cap = MULT_STEP * np.maximum(np.abs(lam), PENALTY_FLOOR * float(np.max(np.abs(lam))))
            stalled = viol > 0.25 * prev_viol and ok and BETA_MAX <= beta
            lam = lam + np.clip(sigma * c, -cap, cap)
            if ineq:  # the multiplier of a <= row is >= 0 (max(0, lam + sigma c))
                lam = np.maximum(lam, 0.0)
            sigma = penalties(lam)
            obj = float(np.sum(V * V))
            # the certificate with the updated multipliers (they are the next subproblem's
            # first-order weights): weak duality, valid for any lam
            # (past the deadline: the last shift the inertia proved, or no bound)
            s_min, x, how = dual_slack_min_eig(n, ei, ej, lam, guess, deadline=deadline, face=face)
            guess = s_min if math.isfinite(s_min) else 0.0
            # lambda_min(L(lam)) = 1 + s_min on 1^perp, so lam / (1 + s_min) is dual feasible
            # for any s_min > -1 (also above 0: then the bound is lower than lam^T t)
            den = 1.0 + s_min
            # no bound from an eigenvalue the inertia could not confirm
            ub = float(lam @ t) / den if den > 0 and "unavailable" not in how else math.inf
            if ub < best_ub:  # weak duality: every multiplier vector's bound is valid
                best_ub, best_lam, best_smin = ub, lam.copy(), s_min
            if ineq and s_min < LIFT_BELOW:
                # <= rows: multipliers clipped at 0 can leave the graph of the positive ones
                # disconnected, L(lam) singular on 1^perp and no bound (lambda_min(S) = -1);
                # lam + eps (every entry > 0, still a dual point of the <= rows) has one.
                # At 20,000 points the bound froze at a gap of 0.23 for 600 s without it
                lam_l = lam + LIFT * float(np.mean(lam))
                s_l, x_l, how_l = dual_slack_min_eig(n, ei, ej, lam_l, guess, deadline=deadline)
                if s_min <= -1.0 + 1e-6 and s_l < -0.5 * gtol_rel and bool(np.any(x_l)):
                    # the positive multipliers' graph is disconnected: S's eigenvector is a
                    # component indicator; the lifted multipliers' one is the direction the
                    # point is missing (2,000 points, seed 1: the point had collapsed to rank
                    # 1, 0.6% below the optimum, and six indicator columns were added before
                    # the second dimension of the optimum was found)
                    x = x_l
                if 1.0 + s_l > 0 and "unavailable" not in how_l:
                    ub_l = float(lam_l @ t) / (1.0 + s_l)
                    if ub_l < best_ub:
                        best_ub, best_lam, best_smin = ub_l, lam_l, s_l
            # the point projected onto the edge rows (Gauss-Newton, min-norm correction)
            # against the best bound so far
            Vp, vp = V, viol
            if (viol <= PROJECT_BELOW and math.isfinite(best_ub)
                    and abs(best_ub - obj) <= PROJECT_GAP * gtol_rel * abs(obj)):
                Vp, vp = project_to_edges(V, ei, ej, t, PROJECT_TO * feas, ineq=ineq,
                                          max_steps=PROJECT_STEPS_LE if ineq else 6,
                                          max_shrink=SHRINK * gtol_rel, deadline=deadline,
                                          pattern=state.get("pattern"), face=face)
            objp = float(np.sum(Vp * Vp))
            gap = (best_ub - objp) / max(abs(objp), 1e-300)
            own_gap = (ub - obj) / max(abs(obj), 1e-300)  # this iteration's multipliers
            # a column of V (in its singular basis) carrying no variance: the new direction
            # goes there instead of a new column (a point collapsed to a lower rank keeps its
            # Newton system's size)
            dead = None
            if ineq:
                Uv, sv, _ = np.linalg.svd(V, full_matrices=False)
                if sv[-1] <= DEAD_COLUMN * sv[0]:
                    dead = (Uv, sv)
            grow = (s_min < -0.5 * gtol_rel and (V.shape[1] < rmax or dead is not None)
                    and own_gap > gtol_rel and bool(np.any(x))
                    and (viol <= GROW_VIOLATION or (ok and viol <= feas) or stalled)
                    and not past(deadline))  # a timeout returns the point it measured
            if grow:
                # L(lam) - I has a negative eigenvalue: the subproblem over K is not solved
                # by any kernel of this rank; add a column along the eigenvector, its
                # amplitude the exact minimiser of the next subproblem along it
                xu = x[ei] - x[ej]
                q = xu * xu
                if ineq:
                    th = _grow_amplitude_le(x, q, c, lam, sigma)
                    th = min(th, float(np.linalg.norm(V)) / max(float(np.linalg.norm(x)), 1e-300))
                else:
                    wg, sg = _al_weights(lam, sigma, c, ineq)
                    A2 = -float(x @ x) + float(wg @ q)
                    A4 = 0.5 * float(np.sum(sg * q * q))
                    th = math.sqrt(-A2 / (2.0 * A4)) if A2 < 0 and A4 > 0 else 1e-3
                if dead is not None:
                    Uv, sv = dead
                    V = Uv * sv  # the same K, its columns by decreasing variance
                    V[:, -1] = th * x
                    what = f"rank {V.shape[1]}, its empty column replaced"
                else:
                    V = np.hstack([V, th * x[:, None]])
                    what = f"rank {V.shape[1] - 1} -> {V.shape[1]}"
                V = onto(V, face)
                log.message(f"lambda_min(S) = {s_min:.3g} < 0: {what}")
            history["objective"].append(obj * bmax * coef)
            history["violation"].append(viol)
            history["beta"].append(beta)
            history["newton"].append(newton)
            history["gap"].append(gap)
            history["rank"].append(V.shape[1])
            history["dual_slack_min_eig"].append(s_min)
            history["time"].append(time.perf_counter() - t_start)
            log.row(outer, objective=obj * bmax * coef, residual=viol, beta=beta,
                    newton=newton, gap=gap, rank=V.shape[1])
            # a point above the bound is infeasible by more than its objective can afford:
            # only a small negative gap (a tenth of gap_tol) is accepted.  And the violation
            # must be too small to move the objective by gap_tol: moving the point onto the
            # edge rows changes tr K by about lam^T c (first order, lam the bound's dual
            # feasible multipliers), at most ||lam||_1 max|c| whichever edges are violated.
            # |lam^T c| alone (the signs of c as they fell) passed points 0.24% above the
            # optimum: the multipliers of an optimum cancel (sum lam_e t_e = tr K while
            # sum |lam_e| t_max reached 8,000 tr K on a 50-point roll), so the objective
            # moves by far more than the violated edges' lam^T c as the point gets feasible
            shift = math.inf
            if vp <= feas and -NEGATIVE_GAP * gtol_rel <= gap <= gtol_rel and best_smin > -1:
                shift = sensitivity(best_lam, best_smin, vp, objp)
            if shift <= gtol_rel and REPAIR:
                # the sensitivity is an estimate from this run's multipliers, not a bound:
                # the point must also be repairable (Gauss-Newton cuts its violation by
                # REPAIR_CUT), and the gap is measured again at the repaired point
                Vq, vq = project_to_edges(Vp, ei, ej, t, REPAIR_AIM * vp, max_steps=REPAIR_STEPS,
                                          ineq=ineq, max_shrink=SHRINK * gtol_rel,
                                          deadline=deadline, pattern=state.get("pattern"),
                                          face=face)
                objq = float(np.sum(Vq * Vq))
                gapq = (best_ub - objq) / max(abs(objq), 1e-300)
                if vq <= REPAIR_CUT * vp and -NEGATIVE_GAP * gtol_rel <= gapq <= gtol_rel:
                    Vp, vp, objp, gap = Vq, vq, objq, gapq
                else:
                    state["repair_refused"] = state.get("repair_refused", 0) + 1
                    shift = 2.0 * gtol_rel  # not converged: polish on
            if shift <= gtol_rel:
                V, viol, obj = Vp, vp, objp
                status = Status.CONVERGED
                message = (f"feasible to {viol:.2e} (relative to the largest squared distance) with "
                           f"a certified gap {gap:.2e} (objective sensitivity {shift:.1e}) after {outer} "
                           f"outer iterations, {total_newton} Newton steps")
                break
            if past(deadline):
                if vp < viol:  # the projected point is the one the gap was measured at
                    V, viol, obj = Vp, vp, objp
                status = Status.TIMEOUT
                message = (f"time limit reached after {outer} outer iterations: violation "
                           f"{viol:.2e} (relative), certified gap {gap:.2e}")
                break
            # the point's objective above the best bound: the bound is as good as the point
            # needs, the point is not feasible enough; the penalty may then rise further
            # (or the gap is met and only the sensitivity is not)
            above = gap < -NEGATIVE_GAP * gtol_rel or (math.isfinite(shift) and shift > gtol_rel)
            if POLISH_WHEN_CERTIFIED and ineq and 0 <= gap <= gtol_rel and vp > feas:
                # <= rows: the gap is met and only the violation is not; the bounded
                # multipliers allow the polishing penalty (at BETA_MAX the violation fell
                # x0.57 per outer iteration at 20,000 points, 40 CPU s each)
                above = True
            if above and beta >= BETA_MAX and viol <= GROW_VIOLATION:
                beta = min(5.0 * beta, BETA_POLISH)
                sigma = penalties(lam)
            elif viol > 0.25 * prev_viol and ok:
                beta = min(5.0 * beta, BETA_MAX)
                sigma = penalties(lam)
            else:
                prev_viol = viol
        else:
            if vp < viol:
                V, viol = Vp, vp
            message = (f"{int(opts['max_outer'])} outer iterations: violation {viol:.2e} (relative, "
                       f"feas_tol {feas:g}), certified gap {gap:.2e} (gap_tol {gtol_rel:g})")
        G = V * dscale
        extras.update({"outer_iterations": outer,
                       "newton_steps": total_newton, "dual_slack_min_eig": best_smin,
                       "relative_violation": viol, "feas_tol": feas})
        out = SolverOutput(G, status, total_newton, history, message, extras,
                           multipliers=best_lam * coef, rank_used=int(V.shape[1]))
        if math.isfinite(best_ub):
            obj = float(np.sum(V * V))
            out.upper_bound = best_ub * bmax * coef
            out.certified_gap = (best_ub - obj) / max(abs(obj), 1e-300)
            extras["objective_sensitivity"] = sensitivity(best_lam, best_smin, viol, obj)
        return out

    # ------------------------------------------------------------------ pieces
    @staticmethod
    def _grad(V, ei, ej, Bm, w):
        U = V[ei] - V[ej]
        return -2.0 * V + 2.0 * (Bm @ (w[:, None] * U))

    def _inner(self, V, ei, ej, Bm, t, lam, sigma, tol, deadline, state, ineq=False):
        """Minimise the augmented Lagrangian over ``V`` by regularised Newton steps.

        Each step solves ``(H + rho I) P = -g`` with the exact Hessian ``H`` (sparse, ``n r``
        rows, one ``r x r`` block per edge and per point) by a sparse ``LDL^T``; ``rho`` is
        raised (x 4) until the factorisation's inertia shows ``H + rho I`` positive definite
        on ``1^perp`` (the constant vectors are exact eigenvectors with eigenvalue
        ``rho - 2``), and lowered (/ 4) after each accepted step (Levenberg-Marquardt /
        trust-region Newton; it handles the indefinite and the flat directions of the
        factored problem).  The step length minimises the quartic along ``P`` exactly.
        """
        n, r = V.shape
        m = len(t)
        a = np.arange(r)
        N = n * r
        pattern = state.get("pattern")
        face = state.get("face")
        if pattern is None or pattern.N != N:
            pattern = _NewtonPattern(ei, ej, n, r, face)
            state["pattern"] = pattern
        steps = 0
        ok = False
        rho = state.get("rho", 1.0)
        factorisations = 0
        for steps in range(1, NEWTON_MAX + 1):
            if past(deadline):  # before the step's factorisations, which are its cost
                steps -= 1
                break
            U = V[ei] - V[ej]
            c = np.einsum("ij,ij->i", U, U) - t
            w, se = _al_weights(lam, sigma, c, ineq)
            g = -2.0 * V + 2.0 * (Bm @ (w[:, None] * U))
            if face is not None:  # the gradient on the face (the steps stay in it)
                g = face.project(g)
            gn = float(np.linalg.norm(g))
            if not math.isfinite(gn):
                raise FloatingPointError(f"non-finite augmented-Lagrangian gradient (penalty up to "
                                         f"{float(np.max(sigma)):.3g})")
            if gn <= tol:
                ok = True
                steps -= 1
                break
            blk = 4.0 * np.broadcast_to(se, (m,))[:, None, None] * U[:, :, None] * U[:, None, :]
            blk[:, a, a] += 2.0 * w[:, None]
            b = blk.ravel()
            scale = float(np.abs(b).max(initial=0.0)) + 2.0
            rho = max(rho, 1e-10 * scale)
            base = pattern.assemble(b)
            lu = None
            late = False
            for attempt in range(60):
                if attempt and past(deadline):  # between the inertia tests
                    late = True
                    break
                lu, neg = pattern.factor(base, rho - 2.0)
                factorisations += 1
                want = r if rho < 2.0 else 0
                if neg == want:
                    break
                lu = None
                rho = max(4.0 * rho, 1e-6 * scale)
                if not rho <= 1e6 * scale:
                    break
            if late:  # no step from a factorisation whose inertia was not shown
                steps -= 1
                break
            if lu is None:
                P = -g
            else:
                z = pattern.solve(lu, -g.ravel(), REFINE).reshape(n, r)
                P = onto(z, face)
                if not np.all(np.isfinite(P)):
                    P = -g
            # the exact line search is scale-free: keep the direction at the factor's size
            # (an almost singular system can return a direction of norm 1e100)
            pscale = (float(np.linalg.norm(V)) + 1.0) / max(float(np.linalg.norm(P)), 1e-300)
            P = P * pscale
            alpha = self._quartic_step(V, P, U, c, ei, ej, lam, sigma, ineq)
            if alpha is None:
                pscale = (float(np.linalg.norm(V)) + 1.0) / max(gn, 1e-300)
                P = -g * pscale
                alpha = self._quartic_step(V, P, U, c, ei, ej, lam, sigma, ineq)
                if alpha is None:
                    break
            if lu is not None:
                # at most the full Newton step: the exact line search along a regularised
                # step went 5-25 times further, compressed short edges under large
                # penalties and needed rho ~1e8 on the next step (2,000 points)
                alpha = min(alpha, 1.0 / pscale)
            if ineq:
                # the quartic froze the active rows; a slack row that becomes active
                # along the step adds curvature: halve until the true value decreases
                f0 = _al_value(V, ei, ej, t, lam, sigma, True)
                for _ in range(40):
                    if _al_value(V + alpha * P, ei, ej, t, lam, sigma, True) < f0:
                        break
                    alpha *= 0.5
                else:
                    break
            V = onto(V + alpha * P, face)
            # a full step: trust the model more; a short one: less
            rho = rho / 4.0 if alpha * pscale > 0.5 else rho * 2.0
        state["rho"] = rho
        state["factorisations"] = state.get("factorisations", 0) + factorisations
        return V, steps, ok

    @staticmethod
    def _quartic_step(V, P, U, c, ei, ej, lam, sigma, ineq=False):
        """The minimiser over alpha > 0 of the augmented Lagrangian along ``P`` (a quartic;
        for ``<=`` rows the quartic of the rows active at ``alpha = 0``)."""
        Pu = P[ei] - P[ej]
        a = 2.0 * np.einsum("ij,ij->i", U, Pu)
        q = np.einsum("ij,ij->i", Pu, Pu)
        if ineq:
            w, se = _al_weights(lam, sigma, c, True)
            A1 = -2.0 * float(np.sum(V * P)) + float(w @ a)
            if not A1 < 0:
                return None
            A2 = -float(np.sum(P * P)) + float(w @ q) + 0.5 * float(np.sum(se * a * a))
            A3 = float(np.sum(se * a * q))
            A4 = 0.5 * float(np.sum(se * q * q))
            roots = np.roots([4.0 * A4, 3.0 * A3, 2.0 * A2, A1])
            cand = [float(z.real) for z in roots
                    if abs(z.imag) <= 1e-10 * max(1.0, abs(z)) and z.real > 0]
            if not cand:
                return None
            return min(cand, key=lambda x: A1 * x + A2 * x * x + A3 * x**3 + A4 * x**4)
        sc = sigma * c
        A1 = -2.0 * float(np.sum(V * P)) + float(lam @ a) + float(sc @ a)
        if not A1 < 0:
            return None
        A2 = -float(np.sum(P * P)) + float(lam @ q) + 0.5 * float(np.sum(sigma * (a * a + 2.0 * c * q)))
        A3 = float(np.sum(sigma * a * q))
        A4 = 0.5 * float(np.sum(sigma * q * q))
        roots = np.roots([4.0 * A4, 3.0 * A3, 2.0 * A2, A1])
        cand = [float(z.real) for z in roots if abs(z.imag) <= 1e-10 * max(1.0, abs(z)) and z.real > 0]
        if not cand:
            return None

        def val(x):
            return A1 * x + A2 * x * x + A3 * x**3 + A4 * x**4

        return min(cand, key=val)
