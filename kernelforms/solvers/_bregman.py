"""Shared machinery of the Bregman projection solvers (Kulis, Sustik & Dhillon 2006).

Both solvers (:mod:`~kernelforms.solvers.burg`, :mod:`~kernelforms.solvers.von_neumann`)
run the cyclic projection method of Kulis et al. (2006), Section 3.3: constraints are
visited in order, each projection solves their eq. 3 for the step ``alpha`` that makes the
constraint hold with equality, and inequality constraints get the dual correction of eq. 4.

Sign convention.  We keep, for every constraint ``k``, ``nu_k`` = the sum of the steps
taken along its matrix ``A_k`` (``grad f(X) = grad f(X0) + sum_k nu_k A_k``).  The KKT
conditions ask ``nu_k <= 0`` for ``<=`` constraints, ``nu_k >= 0`` for ``>=`` ones and leave
equalities free.  The paper's ``lambda_k >= 0`` of a ``<=`` constraint is ``-nu_k``; its
``alpha' = min(lambda_k, alpha)`` reads here

* ``<=``: ``alpha' = min(-nu_k, alpha)``,
* ``>=``: ``alpha' = max(-nu_k, alpha)`` (the same rule for ``-A_k``),
* ``==``: ``alpha' = alpha`` (no correction),

followed by ``nu_k += alpha'``.

The dual.  For sign-feasible ``nu`` the iterate ``X(nu)`` (``grad f(X) = grad f(X0) +
sum nu_k A_k``) minimises the Lagrangian, so

    g(nu) = D(X(nu), K0) - sum_k nu_k (tr(A_k X(nu)) - b_k)

is a lower bound on the optimum (weak duality), concave in ``nu``, with gradient
``b - values(X(nu))``; a cyclic sweep is coordinate ascent on ``g`` (Hildreth's method).
Burg: ``g = log det S + nu.b`` with ``S = I - sum nu_k M_k``; von Neumann:
``g = sum lambda0 - tr exp(log Lambda0 + sum nu_k M_k) + nu.b`` (``M_k``: ``A_k`` in range
coordinates).  Coordinate ascent is slow when the active constraints are nearly
dependent (measured: 5,000+ sweeps on some 25-60 point instances), so the driver
alternates the sweeps with a **projected Newton method on g** (Bertsekas 1982: Newton on
the free duals, the Hessian from the same range-coordinate rows, an Armijo search along
the projection arc).  Both steps only increase ``g``; each Newton step costs
``O(m^2 r^2 + m^3)`` with ``m`` the constraints that are violated or have a nonzero dual
(never ``O(n)``).  ``newton=False`` gives the plain cyclic method.

Stopping rule.  ``converged`` needs both (i) the relative change of ``nu`` over the last
sweep (or Newton step) ``<= tol`` and (ii) every constraint's violation ``<= vtol`` times
its scale ``max(|b_k|, s_k)``, ``s_k`` the size of the row's functional at K0
(``d0`` for a distance, ``sqrt(K0_ii K0_jj)`` for an entry).

Infeasibility.  A sign-feasible ``d`` (``d_k <= 0`` on ``<=`` rows, ``>= 0`` on ``>=``
rows) with ``d.b > 0`` and ``E = sum_k d_k V0^T A_k V0`` gives, for every feasible K,
``d.b <= sum_k d_k value_k(K) = tr(E V0^T K V0) <= lambda_max(E) tr(K)``: if
``lambda_max(E) <= 0`` no K satisfies the constraints, and otherwise every feasible K has
``tr K >= d.b / lambda_max(E)``.  On an infeasible problem the duals diverge along such a
``d``; the driver tests ``d = nu`` and the recent growth of ``nu`` and reports
``infeasible`` when ``lambda_max(E) <= 0`` or the trace bound exceeds
:data:`CERT_TRACE_RATIO` times ``tr K0``.  Without such a certificate an unfinished run
is ``max_iter`` and the message says what was seen.

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
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.linalg

from ..model import DISTANCE, GE, LE, Burg, PairMap, Range, VonNeumann
from ..model.canonical import Canonical, Capabilities, PairRows, canonical, pair_rows
from ..result import Status
from .base import IterativeSolver, SolverOutput
from .options import Boolean, Interval

#: tolerance used by the tests against the conic solve (relative objective gap)
TEST_RTOL = 1e-5
#: a dual direction proves infeasibility when every feasible K would need a trace above
#: this multiple of tr(K0) (or when lambda_max(E) <= 0: an exact certificate)
CERT_TRACE_RATIO = 1e9
#: rank-one rows subtracted to remove the positive part of a candidate certificate
CERT_REPAIRS = 200
#: Newton steps per call of the dual Newton stage
NEWTON_STEPS = 40
#: The dual Newton stage's budget is counted in *work units*, not seconds, so that the path a
#: run takes (and so its status, iterations and result) does not depend on the machine's
#: speed or load; the time limit only stops a run.  One unit is about one floating-point
#: operation; each projection, Newton step and dual point (a line-search try) also counts a
#: fixed cost for what it does besides its arithmetic (Python, small-array calls), measured
#: as about 10 us, 0.1 ms and 0.1 ms.
#: The work a Newton stage may always take for its chunks after the first (beyond it, no
#: more than the sweeps so far took): about a second of steps on small problems.
NEWTON_FLOOR_WORK = 1e9
#: fixed work of one projection of a sweep (burg; von Neumann counts 5 times it)
PROJECTION_WORK = 1e4
#: fixed work of one Newton step's Hessian and factorisation (beyond ``m^2 r^2 + m^3 / 3``)
NEWTON_STEP_WORK = 1e5
#: fixed work of one dual point (one try of the line search; beyond ``c r^2 + r^3``)
DUAL_POINT_WORK = 1e5
#: largest epsilon of the dual Newton stage's epsilon-active set (dimensionless duals)
EPS_ACTIVE = 1e-3
#: the dual Newton stage is skipped when more duals than this are free (O(m^3) solve)
NEWTON_MAX_FREE = 3000

COMMON_DEFAULTS: dict[str, Any] = {
    "tol": 1e-10,        # relative change of the dual variables over one sweep / Newton step
    "vtol": 1e-6,        # largest violation relative to the constraint's scale
    "max_sweeps": 5000,
    "check_every": 1,    # record divergence / violation every this many iterations
    "newton": True,      # projected Newton steps on the dual between sweeps
}

COMMON_CONSTRAINTS: dict[str, list] = {
    "tol": [Interval(Real, 0, None, closed="neither")],
    "vtol": [Interval(Real, 0, None, closed="neither")],
    "max_sweeps": [Interval(Integral, 1, None, closed="left")],
    "check_every": [Interval(Integral, 1, None, closed="left")],
    "newton": [Boolean()],
}


_LABEL = {"burg": Burg.label, "von_neumann": VonNeumann.label}


def capabilities_of(divergence: str) -> Capabilities:
    """What the projections of ``divergence`` accept: that divergence over the Range form,
    no linear or loss term, at least one constraint row, every one on entries or distances
    (:class:`~kernelforms.model.PairMap` rows: any number of blocks, any senses)."""
    return Capabilities(forms=(Range,), divergence={"burg": Burg, "von_neumann": VonNeumann}[divergence],
                        linear=False, losses=False, needs=("constraints",), pair_constraints=True)


def why_not(decl: Any, divergence: str, name: str) -> str | None:
    """Why the projections of ``divergence`` (``"burg"`` / ``"von_neumann"``) do not apply
    to a declaration (None when they do): the mismatch of :func:`capabilities_of`, worded,
    then what the data must satisfy: ``K0`` of full rank on its range, every row reachable
    from ``range(K0)`` (:func:`~kernelforms.problems.base.check_constraints_in_range`) and
    a bound ``> 0`` on the rank-one ``<=`` / ``==`` rows (:func:`positive_bound_reason`).
    The solve reads the same canonical form (its :attr:`~kernelforms.model.Canonical.pair_rows`,
    in the declaration's order, and the Range form's factor)."""
    what = (f"{name!r} minimises the {_LABEL[divergence]} divergence D(K, K0) over range(K0) "
            "subject to constraints on entries and distances of K (Kulis et al. 2006)")
    why = capabilities_of(divergence).why(decl, what, repr(name))
    if why is not None:
        return why
    can = canonical(decl)
    form = can.form
    lam0 = np.asarray(form.lam0, dtype=float)
    if lam0.size == 0 or not np.all(np.isfinite(lam0)) or lam0.min() <= 1e-20 * max(lam0.max(), 1e-300):
        return (f"{what}; K0 = G0 G0^T must have full rank r on its range, but G0 ({form.n} x "
                f"{form.r}) has singular values down to {math.sqrt(max(lam0.min(initial=0.0), 0.0)):.3g}: "
                "drop dependent columns of G0 (e.g. keep the leading eigenvectors of K0)")
    from ..errors import ProblemError
    from ..problems.base import check_constraints_in_range

    try:
        check_constraints_in_range(name, np.asarray(form.G0, dtype=float), can.pair_rows)
    except ProblemError as exc:
        return str(exc)
    return positive_bound_reason(can.pair_rows, _LABEL[divergence])


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
    def build(cls, rows: PairRows, F0: np.ndarray) -> "ConstraintRows":
        c = rows
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
        R = L if self.rank1.all() else self.right @ F
        return np.einsum("ij,ij->i", L, R)

    def values_W(self, W: np.ndarray) -> np.ndarray:
        """Every constraint's value for ``K = F0 W F0^T`` (W r x r symmetric)."""
        return np.einsum("ij,ij->i", self.left @ W, self.right)

    def violations(self, F: np.ndarray) -> np.ndarray:
        return violations_of(self.values(F), self.sense, self.bound)

    def combination(self, nu: np.ndarray) -> np.ndarray:
        """``sum_k nu_k M_k`` (r x r, symmetric) with ``M_k = sym(left_k right_k^T)``."""
        idx = np.flatnonzero(nu)
        if idx.size == 0:
            return np.zeros((self.left.shape[1],) * 2)
        P = self.left[idx].T @ (nu[idx, None] * self.right[idx])
        return 0.5 * (P + P.T)

    def hessian_gram(self, W: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """``H_kl = tr(W M_k W M_l)`` on the rows ``idx`` (W symmetric PSD)."""
        L, R = self.left[idx], self.right[idx]
        LW = L @ W
        Pll = LW @ L.T
        if self.rank1[idx].all():
            return Pll * Pll
        Prr = R @ W @ R.T
        Plr = LW @ R.T
        return 0.5 * (Pll * Prr + Plr * Plr.T)


def violations_of(values: np.ndarray, sense: np.ndarray, bound: np.ndarray) -> np.ndarray:
    g = values - bound
    return np.where(sense == LE, np.maximum(g, 0), np.where(sense == GE, np.maximum(-g, 0), np.abs(g)))


def constraint_scale(rows: PairRows, G0: np.ndarray) -> np.ndarray:
    """Per row ``max(|b_k|, s_k)``, ``s_k`` the functional's size at ``K0 = G0 G0^T``
    (``d0`` for a distance, ``sqrt(K0_ii K0_jj)`` for an entry): the unit of ``vtol``."""
    c = rows
    i, j = np.asarray(c.i), np.asarray(c.j)
    dist = c.kind == DISTANCE
    s = np.empty(len(c))
    s[dist] = np.sum((G0[i[dist]] - G0[j[dist]]) ** 2, axis=1)
    ent = ~dist
    s[ent] = np.linalg.norm(G0[i[ent]], axis=1) * np.linalg.norm(G0[j[ent]], axis=1)
    s = np.maximum(np.abs(np.asarray(c.bound, dtype=float)), s)
    tiny = 1e-300 + 1e-12 * float(np.sum(G0 * G0)) / max(G0.shape[0], 1)
    return np.maximum(s, tiny)


def positive_bound_reason(rows: Any, divergence_label: str) -> str | None:
    """Rank-one ``<=``/``==`` constraints need a bound > 0 (both divergences keep the range,
    so ``z^T K z`` stays > 0 whenever ``z^T K0 z`` is).

    ``rows`` is a :class:`~kernelforms.model.canonical.PairRows`, a
    :class:`~kernelforms.model.Declaration` or a problem (its ``declaration``); the rows are
    those of the declaration's constraint blocks on entries and distances, in order.
    """
    if not isinstance(rows, PairRows):
        decl = getattr(rows, "declaration", rows)
        rows = pair_rows([c for c in decl.constraints if isinstance(c.map, PairMap)])
    i, j, kind, sense, bound = rows.i, rows.j, rows.kind, rows.sense, rows.bound
    rank1 = (kind == DISTANCE) | (i == j)
    bad = rank1 & (sense != GE) & (bound <= 0)
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        return (f"constraint {k} (a distance or diagonal constraint with sense <= or ==) has "
                f"bound {bound[k]:.3g} <= 0; the {divergence_label} divergence keeps the range "
                "of K0, so such a value is unreachable (the problem is infeasible)")
    return None


def single_threaded_blas():
    """Context manager limiting BLAS/LAPACK to one thread.

    Each projection works on r x r arrays; a multithreaded LAPACK ``eigh`` on a busy
    machine was measured 25x slower at r = 64 (15 ms instead of 0.6 ms).  Entering it
    costs ~10 ms (library introspection), so it wraps a whole solve, never one sweep.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def clip_step(alpha: float, nu: float, sense: int) -> float:
    """Kulis et al. (2006) eq. 4: the dual correction (see the module docstring)."""
    if sense == LE:
        return min(-nu, alpha)
    if sense == GE:
        return max(-nu, alpha)
    return alpha


def project_signs(nu: np.ndarray, sense: np.ndarray) -> np.ndarray:
    """The nearest sign-feasible duals (``<= 0`` on ``<=`` rows, ``>= 0`` on ``>=`` rows)."""
    return np.where(sense == LE, np.minimum(nu, 0.0), np.where(sense == GE, np.maximum(nu, 0.0), nu))


@dataclass
class DualPoint:
    """The Lagrangian minimiser ``X(nu)`` of one dual point, as a divergence computes it."""

    g: float                 # dual value g(nu) (a lower bound on the optimum)
    values: np.ndarray       # every constraint's value at X(nu)
    state: Any               # whatever the divergence needs to set its iterate / Hessian


class _Deadline(Exception):
    pass


class BregmanSolver(IterativeSolver):
    """Common driver: the sweep loop, the dual Newton stage, convergence, certificates.

    Subclasses set ``divergence`` and implement ``_setup`` (state from the canonical form:
    its pair rows and the Range form's factor),
    ``_sweep`` (one pass over the constraints, updating ``nu`` in place), ``_factor_F``
    (the r x r matrix F with ``K = F0 F F^T F0^T``), ``_divergence``, ``_kernel`` and the
    dual hooks ``_dual_point`` (X(nu), g(nu) and the values), ``_dual_hessian`` and
    ``_set_state`` (make X(nu) the iterate).
    """

    divergence = ""
    defaults = dict(COMMON_DEFAULTS)
    parameter_constraints = dict(COMMON_CONSTRAINTS)

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        return capabilities_of(self.divergence)

    def applies_to(self, problem: Any) -> str | None:
        return why_not(problem.declaration, self.divergence, self.name)

    def timed_sweeps(self, problem: Any, n_sweeps: int = 3) -> tuple[PairRows, list[float], list[int]]:
        """Bare sweeps from ``nu = 0`` (no convergence checks, history or Newton stage):
        ``(rows, seconds per sweep, projections per sweep)``, the per-sweep cost that
        ``kernelforms bench bregman speed`` reports.  Raises ``ValueError`` with the reason
        when the solver does not apply."""
        why = self.applies_to(problem)
        if why is not None:
            raise ValueError(why)
        can = canonical(problem.declaration)
        self._setup(can)
        rows = can.pair_rows
        nu = [0.0] * len(rows)
        times, done = [], []
        with single_threaded_blas():  # entered once: entering costs ~10 ms
            for _ in range(n_sweeps):
                t0 = time.perf_counter()
                done.append(self._sweep(nu))
                times.append(time.perf_counter() - t0)
        return rows, times, done

    # -- subclass hooks -------------------------------------------------------------
    def _setup(self, can: Canonical) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sweep(self, nu: list, deadline: float | None = None) -> int:  # pragma: no cover
        raise NotImplementedError

    def _factor_F(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _divergence(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _kernel(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _dual_point(self, nu: np.ndarray) -> DualPoint | None:  # pragma: no cover
        """None when ``nu`` is outside the dual domain (Burg: ``S`` not positive definite)."""
        raise NotImplementedError

    def _dual_hessian(self, point: DualPoint, idx: np.ndarray) -> np.ndarray:  # pragma: no cover
        """``-d^2 g / d nu_idx^2`` (positive semidefinite)."""
        raise NotImplementedError

    def _set_state(self, point: DualPoint) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _projection_work(self, r: int) -> float:
        """Work units of one projection of a sweep (see :data:`NEWTON_FLOOR_WORK`): a rank-one
        update of an ``r x r`` factor."""
        return PROJECTION_WORK + 2.0 * r * r

    def _newton_step_work(self, m: int, r: int) -> float:
        """Work units of one Newton step's Hessian (``m^2 r^2``) and Cholesky factor
        (``m^3 / 3``) with ``m`` free duals."""
        return NEWTON_STEP_WORK + m ** 3 / 3.0 + float(m) ** 2 * r * r

    def _dual_point_work(self, r: int, c: int) -> float:
        """Work units of one dual point (``X(nu)`` and the ``c`` values: ``c r^2 + r^3``)."""
        return DUAL_POINT_WORK + c * r * r + float(r) ** 3

    def _newton_affordable(self, m: int) -> bool:
        """Is a Newton step with ``m`` free duals cheap enough (``O(m^2 r + m^3)``)?"""
        return m <= NEWTON_MAX_FREE

    # -- the dual Newton stage ------------------------------------------------------
    def _newton(self, nu: np.ndarray, steps: int, deadline: float | None, on_step) -> tuple[np.ndarray, str]:
        """Projected Newton ascent on g from ``nu`` (at most ``steps`` steps).

        Returns the new duals and why it stopped: ``"stationary"`` (KKT met to rounding),
        ``"steps"``, ``"stalled"`` (no ascent step found), ``"large"`` (too many free duals)
        or ``"domain"`` (``nu`` not in the dual domain).  ``on_step(nu_old, nu, point)`` is
        called after every accepted step; it may raise :class:`_Deadline` or return True
        to stop.
        """
        sense, b, scale = self.rows.sense, self.rows.bound, self.scale
        point = self._dual_point(nu)
        if point is None:
            return nu, "domain"
        mu = 0.0
        why = "steps"
        for _ in range(steps):
            if deadline is not None and time.perf_counter() > deadline:
                raise _Deadline
            grad = b - point.values
            # epsilon-active set (Bertsekas 1982): a dual within eps of 0 whose gradient
            # points out of its sign range is bound too and steps to 0 along the arc;
            # holding only the exact zeros made the projection of the Newton step cut
            # such duals and the step stop ascending (unscaled wine: the line search
            # failed every 16-180 steps, 5,000 sweeps ended 0.53 off in violation)
            outward = ((sense == LE) & (grad >= 0)) | ((sense == GE) & (grad <= 0))
            nus, gs_all = nu * scale, grad / scale  # dimensionless
            width = float(np.linalg.norm(nus - project_signs(nus + gs_all, sense)))
            eps = min(EPS_ACTIVE, width)
            binding = outward & (np.abs(nus) <= eps)
            free = np.flatnonzero(~binding)
            if free.size == 0 or np.max(np.abs(grad[free]) / scale[free]) <= 1e-15:
                why = "stationary"
                break
            if not self._newton_affordable(free.size):
                why = "large"
                break
            self.newton_work += self._newton_step_work(free.size, self.r_work)
            Hn = self._dual_hessian(point, free)
            if not np.all(np.isfinite(Hn)):
                why = "stalled"
                break
            diag = np.diag(Hn)
            dscale = np.sqrt(np.maximum(diag, 1e-300))
            Hs = Hn / dscale[:, None] / dscale[None, :]
            gs = grad[free] / dscale
            lm = max(mu, 1e-14)
            step = None
            for _try in range(8):
                try:
                    cf = scipy.linalg.cho_factor(Hs + lm * np.eye(free.size), lower=True,
                                                 check_finite=False)
                    step = scipy.linalg.cho_solve(cf, gs, check_finite=False) / dscale
                    if np.all(np.isfinite(step)):
                        break
                except (np.linalg.LinAlgError, ValueError):
                    pass
                step = None
                lm *= 100.0
            if step is None:
                why = "stalled"
                break
            t, accepted = 1.0, None
            for _ls in range(40):
                self.newton_work += self._dual_point_work(self.r_work, nu.size)
                cand = nu.copy()
                cand[free] += t * step
                cand[binding] *= 1.0 - t
                cand = project_signs(cand, sense)
                cand[np.abs(cand) <= 1e-300] = 0.0
                pt = self._dual_point(cand)
                if pt is not None and math.isfinite(pt.g):
                    inc = pt.g - point.g
                    pred = float(grad @ (cand - nu))
                    if inc >= 1e-4 * pred or (abs(inc) <= 1e-14 * (1.0 + abs(point.g)) and pred >= 0
                                              and t == 1.0):
                        accepted = (cand, pt)
                        break
                t *= 0.5
            if accepted is None:
                why = "stalled"
                break
            # damping only as needed for the factorisation: a damped step would stall
            # in the weakly curved directions (tiny eigenvalues of exp(Y) in von Neumann)
            mu = 0.0 if lm <= 1e-12 else 0.1 * lm
            old = nu
            nu, point = accepted
            self._set_state(point)
            if on_step(old, nu, point):
                why = "done"
                break
        self._set_state(point)
        return nu, why

    # -- infeasibility certificate -------------------------------------------------
    def _certificate(self, d: np.ndarray) -> dict | None:
        """Test a dual direction ``d`` as an infeasibility certificate (module docstring).

        A diverging ``d`` leaves ``E = sum d_k M_k`` with a small positive part; up to
        :data:`CERT_REPAIRS` times the top eigenvector ``v`` of E is removed with the
        ``<=``/``==`` rank-one row that costs least ``d.b`` per unit of ``(a_k . v)^2``
        (``d_k -= delta`` subtracts ``delta a_k a_k^T``, still sign-feasible).  The result
        is accepted only when ``d.b > 0`` and ``lambda_max(E) <= -noise`` (``noise`` bounds
        the round-off of forming E), or, failing that, when the trace bound exceeds
        :data:`CERT_TRACE_RATIO` tr K0.
        """
        rows = self.vrows
        d = project_signs(np.asarray(d, dtype=float), rows.sense)
        nrm = float(np.max(np.abs(d), initial=0.0))
        if nrm <= 0 or not np.all(np.isfinite(d)):
            return None
        d = d / nrm
        if not float(d @ rows.bound) > 0:
            return None
        # rows whose coefficient may decrease: '<=' / '==' rank-one rows with b > 0, and
        # '>=' rank-one rows down to d_k = 0 (both subtract delta a_k a_k^T from E)
        usable = np.flatnonzero(rows.rank1 & (rows.bound > 0))
        A = rows.left[usable]
        bu = rows.bound[usable]
        capped = rows.sense[usable] == GE
        size = np.sum(rows.left * rows.left, axis=1) if rows.rank1.all() else (
            np.linalg.norm(rows.left, axis=1) * np.linalg.norm(rows.right, axis=1))
        for _ in range(CERT_REPAIRS + 1):
            db = float(d @ rows.bound)
            if not db > 0:
                return None
            ev, V = np.linalg.eigh(rows.combination(d))
            lmax = float(ev[-1])
            noise = 1e-13 * (float(np.abs(d) @ size) + float(np.max(np.abs(ev))))
            if lmax <= -noise:
                return {"rows": int(np.count_nonzero(d)), "d_dot_b": db, "lambda_max": lmax,
                        "trace_bound": math.inf, "exact": True, "d": d}
            room = np.where(capped, d[usable], np.inf)
            ok = room > 0
            if not ok.any():
                break
            proj = (A @ V[:, -1]) ** 2
            want = (2.0 * max(lmax, 0.0) + 4.0 * noise) / np.maximum(proj, 1e-300)
            delta = np.minimum(want, room)
            gain = np.where(ok, delta * proj / (delta * bu + 1e-300), -1.0)
            k = int(np.argmax(gain))
            if not (gain[k] > 0 and proj[k] > 0):
                break
            d[usable[k]] -= delta[k]
        trace_bound = db / max(lmax, noise)
        if trace_bound >= CERT_TRACE_RATIO * self.trace_K0:
            return {"rows": int(np.count_nonzero(d)), "d_dot_b": db, "lambda_max": lmax,
                    "trace_bound": trace_bound, "exact": False, "d": d}
        return None

    # -- driver ---------------------------------------------------------------------
    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        tol, vtol = float(opts["tol"]), float(opts["vtol"])
        max_sweeps, check_every = int(opts["max_sweeps"]), int(opts["check_every"])
        use_newton = bool(opts["newton"])
        why = self.applies_to(problem)
        if why is not None:  # pragma: no cover - run() checks applies_to first
            from ..errors import NotApplicable

            raise NotApplicable(why)
        can = canonical(problem.declaration)
        c = len(can.pair_rows)
        log = self.iteration_log(opts, header=f"n = {can.form.n}, rank = {can.form.r}, "
                                 f"{c} constraints, tol = {tol:g}, vtol = {vtol:g}",
                                 residual="rel.viol", extra=("dual chg",))
        with single_threaded_blas():
            return self._run(can, tol, vtol, max_sweeps, check_every, use_newton, deadline, log)

    def _run(self, can, tol, vtol, max_sweeps, check_every, use_newton, deadline, log) -> SolverOutput:
        self._setup(can)
        rows, form = can.pair_rows, can.form
        self.scale = constraint_scale(rows, np.asarray(form.G0, dtype=float))
        V0, lam0 = form.V0, np.asarray(form.lam0, dtype=float)
        self.vrows = self.rows if self.divergence == "von_neumann" else ConstraintRows.build(rows, V0)
        self.trace_K0 = float(np.sum(lam0))
        self._cert_anchor, self._cert_calls, self._last_cert = None, 0, None
        c = len(rows)
        # the Newton stage's budget: work units (deterministic), never seconds
        self.r_work, self.newton_work = form.r, 0.0
        sweep_work = c * self._projection_work(form.r)
        nu = [0.0] * c
        hist: dict[str, list] = {"iteration": [], "stage": [], "divergence": [], "violation": [],
                                 "rel_violation": [], "dual_change": [], "projections": [], "time": []}
        t0 = time.perf_counter()
        st = {"it": 0, "sweeps": 0, "newton": 0, "proj": 0, "change": math.inf,
              "viol": math.inf, "rviol": math.inf, "nu_norm": [], "rviol_hist": []}
        next_newton = 3
        status, message = None, ""

        def record(stage: str, change: float, F: np.ndarray, vals: np.ndarray, force: bool) -> None:
            st["it"] += 1
            st["stage"] = stage
            it = st["it"]
            v = violations_of(vals, self.rows.sense, self.rows.bound)
            st["viol"] = float(v.max(initial=0.0))
            st["rviol"] = float(np.max(v / self.scale, initial=0.0))
            st["change"] = change
            if it % check_every == 0 or force:
                div = self._divergence()
                hist["iteration"].append(it)
                hist["stage"].append(stage)
                hist["divergence"].append(div)
                hist["violation"].append(st["viol"])
                hist["rel_violation"].append(st["rviol"])
                hist["dual_change"].append(change)
                hist["projections"].append(st["proj"])
                hist["time"].append(time.perf_counter() - t0)
                log.row(it, objective=div, residual=st["rviol"], rank=None, **{"dual chg": change})
            else:
                log.row(it, objective=None, residual=st["rviol"], **{"dual chg": change})

        def converged() -> bool:
            return st["change"] <= tol and st["rviol"] <= vtol

        def rel_change(old: np.ndarray, new: np.ndarray) -> float:
            nrm = float(np.linalg.norm(new))
            return float(np.linalg.norm(new - old)) / nrm if nrm > 0 else 0.0

        def timed_out() -> bool:
            return deadline is not None and time.perf_counter() > deadline

        prev = np.zeros(c)
        try:
            while st["sweeps"] < max_sweeps:
                done = self._sweep(nu, deadline)
                st["sweeps"] += 1
                st["proj"] += done
                cur = np.asarray(nu)
                F = self._factor_F()
                if not np.all(np.isfinite(F)) or not np.all(np.isfinite(cur)):
                    status, message = Status.NUMERICAL_ERROR, f"non-finite iterate in sweep {st['sweeps']}"
                    break
                change = rel_change(prev, cur)
                prev = cur
                record("sweep", change, F, self.rows.values(F), force=False)
                st["nu_norm"].append(float(np.linalg.norm(cur)))
                st["rviol_hist"].append(st["rviol"])
                if converged():
                    status = Status.CONVERGED
                    break
                if timed_out():
                    raise _Deadline
                cert = self._check_infeasible(cur)
                if cert is not None:
                    status, message = Status.INFEASIBLE, cert
                    break
                if use_newton and st["sweeps"] >= next_newton:
                    next_newton = 2 * st["sweeps"] + 5
                    log.message(f"dual Newton stage after sweep {st['sweeps']}")

                    def on_step(old, new, point):
                        st["newton"] += 1
                        before = st["rviol"]
                        Fs = self._factor_F()
                        record("newton", rel_change(old, new), Fs, point.values, force=False)
                        # Newton steps are cheap and converge quadratically: once the rule
                        # holds, keep polishing while a step still halves the violation
                        if converged() and (st["rviol"] <= 1e-3 * vtol or st["rviol"] > 0.5 * before):
                            return True
                        if timed_out():
                            raise _Deadline
                        return False

                    # Chunks of NEWTON_STEPS while a chunk uses all its steps (still
                    # ascending) and the stage's work is at most NEWTON_FLOOR_WORK or the
                    # work of all sweeps so far (with m free duals a step costs O(m^3),
                    # seconds at m = 3,000). Far from the optimum Newton's progress is
                    # damped (unscaled wine, 22 constraints: 2,441 steps from g = 2.6 to
                    # 5,663.7, each 0.35 ms). Between chunks an infeasibility certificate
                    # is tried (on an infeasible set g grows without bound). Work units,
                    # not seconds: the same call takes the same path on any machine.
                    nu_arr, why, chunks, stage_start = cur, "steps", 0, self.newton_work
                    while why == "steps" and (chunks == 0 or self.newton_work - stage_start
                                               <= max(NEWTON_FLOOR_WORK, st["sweeps"] * sweep_work)):
                        nu_arr, why = self._newton(nu_arr, NEWTON_STEPS, deadline, on_step)
                        chunks += 1
                        cert = self._check_infeasible(nu_arr, force=True)
                        if cert is not None or converged():
                            break
                    nu[:] = nu_arr.tolist()
                    prev = nu_arr.copy()
                    if converged():
                        status = Status.CONVERGED
                        break
                    if cert is not None:
                        status, message = Status.INFEASIBLE, cert
                        break
        except _Deadline:
            status = Status.TIMEOUT
            message = f"time limit after {st['sweeps']} sweeps and {st['newton']} Newton steps"
        nu_arr = np.asarray(nu, dtype=float)
        F = self._factor_F()
        finite = bool(np.all(np.isfinite(F)))
        if finite and (not hist["iteration"] or hist["iteration"][-1] != st["it"]):
            # the last iteration always appears in the history
            st["it"] -= 1
            record(st.get("stage", "sweep"), st["change"], F,
                   self.rows.values(F), force=True)
        if status is Status.CONVERGED:
            message = (f"dual change {st['change']:.2e} <= tol {tol:g} and largest relative "
                       f"violation {st['rviol']:.2e} <= vtol {vtol:g} after {st['sweeps']} sweeps"
                       f" and {st['newton']} Newton steps")
        elif status is None:
            status = Status.MAX_ITER
            message = f"max_sweeps = {max_sweeps} reached; " + self._stall_description(st, vtol, tol)
        elif status is Status.TIMEOUT:
            message += "; " + self._stall_description(st, vtol, tol)
        G = self._kernel() if finite and status is not Status.NUMERICAL_ERROR else None
        lower = math.nan
        if finite and status in (Status.CONVERGED, Status.MAX_ITER, Status.TIMEOUT):
            pt = self._dual_point(nu_arr)
            lower = pt.g if pt is not None else math.nan
        extras = {"sweeps": st["sweeps"], "newton_steps": st["newton"], "projections": st["proj"],
                  "dual": nu_arr, "active": int(np.sum(nu_arr != 0)),
                  "relative_violation": st["rviol"],
                  "time_per_sweep": (time.perf_counter() - t0) / max(st["sweeps"], 1)}
        out = SolverOutput(G, status, st["it"], hist, message, extras, lower_bound=lower)
        if status is Status.INFEASIBLE:
            extras["certificate"] = self._last_cert
            # an exact certificate (d.b > 0 with sum d_k A_k negative definite on range(K0),
            # beyond the round-off bound) proves infeasibility as a conic solver's status
            # does, so compare counts it as one; the trace-bound kind does not
            out.certifying = bool(self._last_cert["exact"])
        extras.update(self._extras())
        return out

    def _check_infeasible(self, nu: np.ndarray, force: bool = False) -> str | None:
        """Try ``d = nu`` and the growth of ``nu`` since an earlier check as certificates.

        Cheap (``O(c r^2 + r^3)``) but only worth it while the duals grow: it runs every
        sweep for the first 10, then every 10th, and after every Newton stage."""
        self._cert_calls += 1
        if not force and self._cert_calls > 10 and self._cert_calls % 10:
            return None
        cands = [nu]
        if self._cert_anchor is not None:
            cands.append(nu - self._cert_anchor)
        self._cert_anchor = nu.copy()
        for d in cands:
            cert = self._certificate(d)
            if cert is not None:
                self._last_cert = cert
                what = ("so no kernel satisfies them" if cert["exact"] else
                        f"so every kernel satisfying them has trace >= {cert['trace_bound']:.3g} "
                        f"(tr K0 = {self.trace_K0:.3g})")
                return (f"infeasible: a sign-feasible combination d of {cert['rows']} constraints "
                        f"(from the diverging duals) is contradictory on the range of K0: "
                        f"sum_k d_k b_k = {cert['d_dot_b']:.3g} > 0 while sum_k d_k A_k has "
                        f"largest eigenvalue {cert['lambda_max']:.3g} there, {what} "
                        "(extras['certificate'] holds d)")
        return None

    def _stall_description(self, st: dict, vtol: float, tol: float) -> str:
        norms, rv = st["nu_norm"], st["rviol_hist"]
        base = (f"largest relative violation {st['rviol']:.2e} (vtol {vtol:g}, absolute "
                f"{st['viol']:.2e}), dual change {st['change']:.2e} (tol {tol:g})")
        if len(norms) >= 20:
            h = len(norms) // 2
            growing = norms[-1] > 1.5 * norms[h] and norms[h] > 0
            stalled = rv[-1] > vtol and rv[-1] >= 0.5 * rv[h]
            if growing and stalled:
                return (f"violation stalled at {st['rviol']:.2e} (relative; it was {rv[h]:.2e} "
                        f"at sweep {h + 1}) while the duals grew from {norms[h]:.3g} to "
                        f"{norms[-1]:.3g}; the problem may be infeasible (no certificate found); "
                        + base)
        return base

    def _extras(self) -> dict[str, Any]:
        return {}
