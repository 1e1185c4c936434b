"""The primal checks of :func:`~kernelforms.verify`: the lifted points (objective, rows, cones),
the converse (auxiliary moves at a fixed kernel; the kernel's domain) and the ``deep``
checks of a primal program."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .checks import (
    CHOLESKY_FROM,
    Check,
    VerifyResult,
    _cone_violation,
    _match_rows,
    _problem_rows,
    _program_rows,
    _psd_within,
    _term_scale,
    _value,
    draw_kernels,
)

#: relative improvement of the program's objective of the auxiliary moves (K fixed): the
#: feasible steps along a ray form an interval, so when this one leaves a cone the larger
#: ones do too
AUX_STEP = 3e-3
#: decades the step grows by when the smallest move stays within round-off
AUX_DECADES = 5
#: objective scale at the points beyond which a found relaxation may be round-off (a
#: correct RegMVU with nu = 1e11, objective ~1e16 at random points, looks relaxed)
HUGE_SCALE = 1e14
#: a cone holds after an auxiliary move when its relative violation is at most this or 16
#: times its violation at the lifted point (round-off: a tight cone is left at first order)
ROUNDOFF = 1e-14
#: relative tolerance of the ``deep`` checks, which read an interior-point solution
DEEP_RTOL = 1e-6
#: random tilts of the objective in the ``deep`` check (besides the program's own optimum)
DEEP_TILTS = 2


def _verify_primal(form: Any, compiled: Any, decl: Any, points: list, rng: np.random.Generator,
                   rtol: float, res: VerifyResult) -> None:
    prog = compiled.program
    obj_worst, cone_worst, n_cones = 0.0, 0.0, 0
    prog_rows, prob_rows = [], []
    scale = 1.0
    aux = _AuxiliaryMoves()
    aux_vars = None
    for K in points:
        lift = form.lift(compiled, K)
        lift.assign()
        if aux_vars is None:
            aux_vars = auxiliary_variables(form, compiled, lift)
        scale = lift.objective_scale
        p = float(prog.objective.value)
        f = decl.objective(K)
        ref = max(_term_scale(decl, K) * scale, abs(scale * f), 1e-300)
        obj_worst = max(obj_worst, abs(p - scale * f) / ref)
        viol0, scales = {}, {}
        for i, c in enumerate(prog.constraints):
            v = _cone_violation(c, scales)
            if v is not None:
                n_cones += 1
                cone_worst = max(cone_worst, v)
                viol0[i] = v
        prog_rows.append(_program_rows(prog))
        prob_rows.append(_problem_rows(decl, K))
        aux.at(prog, aux_vars, viol0, scales, ref, rtol, rng)
    what = "the problem's objective" if scale == 1.0 else f"{scale:.6g} x the problem's objective"
    res.checks.append(Check("objective", obj_worst <= rtol, obj_worst, rtol,
                            f"program objective at the lifted points vs {what}"))
    res.checks.append(Check("cones", cone_worst <= rtol, cone_worst, rtol,
                            f"{n_cones // max(len(points), 1)} PSD / SOC constraints hold at the lifted points"
                            if n_cones else "no cone constraint (PSD variables hold by construction)"))
    res.checks.append(_match_rows(prog_rows, prob_rows, zero_tol=1e-9, tol=1e-6))
    # recovery: at the last point (the auxiliary moves restored its values)
    K = points[-1]
    G = form.recover(compiled).G
    err = float(np.linalg.norm(G @ G.T - K) / max(np.linalg.norm(K), 1e-300))
    res.checks.append(Check("recovery", err <= 1e-7, err, 1e-7, "recover() of the lifted variables vs K"))
    res.checks.append(aux.check(rtol))
    res.checks.append(_kernel_domain(form, compiled, decl, rng, rtol))


# ---------------------------------------------------------------------------- the converse
def _flat(values: list) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(v, dtype=float), order="F") for v in values]) \
        if values else np.zeros(0)


def _set_flat(variables: list, x: np.ndarray) -> None:
    o = 0
    for v in variables:
        k = int(v.size)
        part = x[o:o + k]
        v.value = float(part[0]) if v.shape == () else part.reshape(v.shape, order="F")
        o += k


def _jacobian(expr: Any, variables: list, x0: np.ndarray) -> np.ndarray:
    """``d expr / d (variables)`` at their current values (``expr.size x sum sizes``, column-major
    entries): CVXPY's own gradient, or differences when CVXPY cannot form it (a ``bmat`` of a
    sparse constant)."""
    import scipy.sparse as sp

    ids = {id(v) for v in expr.variables()}
    m = int(expr.size)
    try:
        grad = expr.grad
        cols = []
        for v in variables:
            g = grad.get(v) if id(v) in ids else None
            if g is None:
                if id(v) in ids:
                    raise ValueError("no gradient")
                cols.append(np.zeros((m, int(v.size))))
                continue
            g = g.toarray() if sp.issparse(g) else np.asarray(g, dtype=float)
            cols.append(np.reshape(g, (int(v.size), m)).T)
        return np.hstack(cols) if cols else np.zeros((m, 0))
    except (ValueError, TypeError, AttributeError, NotImplementedError):
        pass
    e0 = np.ravel(_value(expr), order="F")
    J = np.zeros((m, x0.size))
    for j in range(x0.size):
        h = max(1.0, abs(float(x0[j])))
        x = x0.copy()
        x[j] += h
        _set_flat(variables, x)
        J[:, j] = (np.ravel(_value(expr), order="F") - e0) / h
    _set_flat(variables, x0)
    return J


def auxiliary_variables(form: Any, compiled: Any, lift: Any) -> list:
    """The lifted variables ``recover()`` does not read (epigraph variables such as the
    SQLP's ``u`` or the Schur LMI's ``nu``), found by moving each and recovering again; the
    lift's values are assigned on return."""
    G0 = form.recover(compiled).G
    K0 = G0 @ G0.T
    tol = 1e-9 * max(float(np.linalg.norm(K0)), 1.0)
    out = []
    for v, val in lift.values.items():
        x = np.asarray(val, dtype=float)
        bump = 1e-3 * max(1.0, float(np.abs(x).max(initial=0.0)))
        try:
            if x.ndim == 2 and x.shape[0] == x.shape[1]:
                v.value = x + bump * np.eye(x.shape[0])  # stays PSD and symmetric
            else:
                v.value = x + bump * np.linspace(1.0, 2.0, max(x.size, 1)).reshape(x.shape)
            G = form.recover(compiled).G
            reads = float(np.linalg.norm(G @ G.T - K0)) > tol
        except ValueError:  # a variable recover() cannot do without
            reads = True
        finally:
            v.value = val
        if not reads:
            out.append(v)
    return out


class _AuxiliaryMoves:
    """The converse inclusion at the lifted points: with K fixed, move the auxiliary
    variables (:func:`auxiliary_variables`) along directions that keep every equality row and
    improve the objective, and check that every such move leaves a cone (or an inequality
    row) before the objective improves by ``AUX_STEP``: no program point over the same K
    is better than the problem's objective there."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.worst = 0.0
        self.found = ""
        self.tried = 0
        self.no_gain = 0
        self.points = 0
        self.determined = 0
        self.unresolved = 0
        self.margin = np.inf  # least (cone violation / tolerance) of a refused first step
        self._affine: dict[int, np.ndarray] = {}  # Jacobians of affine expressions (constant)

    def _jacobian(self, expr: Any, aux: list, x0: np.ndarray, key: Any = None) -> np.ndarray:
        """:func:`_jacobian`, computed once for an affine expression (``key``: the object that
        keeps it, since ``c.args[0] - c.args[1]`` is a new expression each time)."""
        k = id(key if key is not None else expr)
        if k in self._affine:
            return self._affine[k]
        J = _jacobian(expr, aux, x0)
        if expr.is_affine():
            self._affine[k] = J
        return J

    def at(self, prog: Any, aux: list, viol0: dict, scales: dict, ref: float, rtol: float,
           rng: np.random.Generator) -> None:
        from cvxpy.constraints import Equality, Inequality, Zero

        if not aux:
            return
        self.points += 1
        self.names = [v.name() for v in aux]
        x0 = _flat([v.value for v in aux])
        ids = {id(v) for v in aux}
        sgn = 1.0 if prog.objective.NAME == "minimize" else -1.0
        p0 = sgn * float(prog.objective.value)
        g = sgn * self._jacobian(prog.objective.expr, aux, x0).ravel()
        touching = [c for c in prog.constraints if any(id(v) in ids for v in c.variables())]
        eqs = [c for c in touching if isinstance(c, (Equality, Zero))]
        ineqs = [c for c in touching if isinstance(c, Inequality)]
        cones = [(i, c) for i, c in enumerate(prog.constraints) if i in viol0
                 and any(id(v) in ids for v in c.variables())]
        if eqs:
            import scipy.linalg as sla

            J = np.vstack([self._jacobian(c.args[0] - c.args[1] if isinstance(c, Equality) else c.args[0],
                                          aux, x0, key=c) for c in eqs])
            N = sla.null_space(J)
        else:
            N = np.eye(x0.size)
        if N.shape[1] == 0:
            self.determined += 1  # the equality rows fix the auxiliaries given K
            return
        dirs = [-N @ (N.T @ g)]
        if N.shape[1] > 1:
            dirs += [N @ rng.normal(size=N.shape[1]) for _ in range(2)]
        ineq0 = [np.ravel(_value(c.args[0] - c.args[1])) for c in ineqs]

        def excess(t: float, d: np.ndarray, exact: bool = False) -> float:
            """Largest (cone violation / its round-off tolerance) at ``x0 + t d`` (inf when an
            inequality row breaks); ``exact``: eigenvalues for every PSD block."""
            _set_flat(aux, x0 + t * d)
            worst = 0.0
            for i, c in cones:
                tol = max(16 * viol0[i], ROUNDOFF)
                if not exact and id(c) in scales and c.args[0].shape[0] > CHOLESKY_FROM:
                    worst = max(worst, 0.0 if _psd_within(c, tol, scales[id(c)]) else np.inf)
                else:
                    worst = max(worst, _cone_violation(c) / tol)
                if worst > 1.0 and not exact:
                    return worst
            for c, r0 in zip(ineqs, ineq0):
                r = np.ravel(_value(c.args[0] - c.args[1]))
                if np.any(r > np.maximum(r0, 0.0) + ROUNDOFF * (1.0 + np.abs(r0))):
                    return np.inf
            return worst

        try:
            for d in dirs:
                rate = -float(g @ d)
                if rate <= 0:
                    d, rate = -d, -rate
                if rate <= 1e-12 * max(float(np.linalg.norm(g) * np.linalg.norm(d)), 1e-300):
                    self.no_gain += 1
                    continue
                self.tried += 1
                unit = ref / rate  # the step that improves the objective by its scale (if affine)
                first = excess(AUX_STEP * unit, d)
                if first > 1.0:
                    self.margin = min(self.margin, first)
                    continue
                # The smallest move stays within round-off.  Either an epigraph has slack (a
                # relaxation), or the cone is so flat along d that the move's violation is below
                # round-off (a badly scaled point: mu ~ 1e12 in the SQLP's rotated cone).  Grow
                # the step by decades to the first one outside, find where the violation leaves
                # round-off (t_b, by bisection) and read it at t_b / 2: a tight cone, whose
                # violation grows from zero at the point (convex along d), is violated there by
                # a fraction of round-off (about half); an epigraph with slack is strictly
                # inside there (violation exactly zero).
                t_in, t_out = AUX_STEP * unit, None
                for k in range(1, AUX_DECADES + 1):
                    t = AUX_STEP * unit * 10.0**k
                    if excess(t, d) > 1.0:
                        t_out = t
                        break
                    t_in = t
                if t_out is not None:
                    lo, hi = t_in, t_out
                    for _ in range(60):
                        if hi <= lo * (1 + 1e-6):
                            break
                        mid = np.sqrt(lo * hi)
                        lo, hi = (lo, mid) if excess(mid, d) > 1.0 else (mid, hi)
                    if excess(hi / 2, d, exact=True) > 0.05:
                        self.unresolved += 1
                        continue
                _set_flat(aux, x0 + t_in * d)
                gain = (p0 - sgn * float(prog.objective.value)) / ref
                if gain > rtol and gain > self.worst:
                    self.worst = gain
                    self.found = (f"with K fixed, moving {', '.join(self.names)} keeps every cone and row "
                                  f"and lowers the program's objective by at least {gain:.3g} x its scale "
                                  f"({ref:.3g}) below the problem's: the program is a relaxation (an "
                                  "epigraph cone is not tight)")
                    if ref > HUGE_SCALE:
                        self.found += (f"; or the points are beyond double precision (objective scale "
                                       f"{ref:.3g}: the cones resolve it only to about {ref * 1e-16:.2g}); "
                                       "rescale the problem to check")
        finally:
            _set_flat(aux, x0)

    def check(self, rtol: float) -> Check:
        if not self.points:
            return Check("auxiliaries", True, 0.0, rtol,
                         "no auxiliary variable: recover() reads every program variable (the lifted "
                         "points are all of the program's points)")
        if self.found:
            return Check("auxiliaries", False, self.worst, rtol, self.found)
        detail = (f"with K fixed at each lifted point, {self.tried} improving moves of "
                  f"{', '.join(self.names)} within the equality rows each leave a cone before the "
                  f"objective improves by {AUX_STEP:g} x its scale (the epigraphs are tight: "
                  "no program point over the same K is better)")
        if np.isfinite(self.margin):
            detail += f"; the least violation of a refused move is {self.margin:.2g} x the round-off tolerance"
        if self.no_gain:
            detail += f"; {self.no_gain} directions do not change the objective"
        if self.determined:
            detail += f"; at {self.determined} points the equality rows fix the auxiliaries given K"
        if self.unresolved:
            detail += (f"; {self.unresolved} moves stay within round-off only because the cone is flat "
                       "there (tight: the violation grows from zero at the point; a badly scaled "
                       "point, whose 0.3 % the cone resolves only to round-off)")
        return Check("auxiliaries", True, 0.0, rtol, detail)


def _kernel_domain(form: Any, compiled: Any, decl: Any, rng: np.random.Generator,
                   rtol: float) -> Check:
    """The converse for the kernel variables: an indefinite kernel of the form (no problem
    point), lifted, must leave the program (a cone violated, or a PSD variable refusing it)."""
    K = draw_kernels(decl, 1, rng, indefinite=True)[0][0]
    try:
        form.lift(compiled, K).assign()
    except ValueError as exc:  # CVXPY refuses a PSD variable's indefinite value
        return Check("kernel domain", True, 1.0, rtol,
                     f"an indefinite kernel of the form is refused by the program's PSD variable ({exc})")
    from cvxpy.constraints import PSD as CvxPSD, SOC

    # smallest cones first; the first one violated settles it
    cones = sorted((c for c in compiled.program.constraints if isinstance(c, (CvxPSD, SOC))),
                   key=lambda c: int(c.size))
    worst = 0.0
    for c in cones:
        worst = max(worst, _cone_violation(c))
        if worst > rtol:
            break
    ok = worst > rtol
    return Check("kernel domain", ok, worst, rtol,
                 f"an indefinite kernel of the form, lifted, violates a cone by {worst:.3g} (relative): "
                 "the program's kernel is PSD as the problem's" if ok else
                 "an indefinite kernel of the form, lifted, satisfies every cone: the program admits "
                 "kernels that are no problem point (a PSD constraint is missing)")


def _deep_primal(form: Any, compiled: Any, decl: Any, points: list, rng: np.random.Generator,
                 res: VerifyResult) -> None:
    """Program points from solves: the program's own optimum, then ``DEEP_TILTS`` optima of the
    objective tilted by a random linear term on the kernel variables within a ball around
    it; at each, ``recover()`` must be problem-feasible with an objective no better than the
    program's (the program is no relaxation)."""
    import cvxpy as cp

    from ..result import LowRank

    t0 = time.perf_counter()
    prog = compiled.program
    lift = form.lift(compiled, points[0])
    lift.assign()
    aux = {id(v) for v in auxiliary_variables(form, compiled, lift)}
    kernel = [v for v in lift.values if id(v) not in aux]
    scale = lift.objective_scale
    sense = 1.0 if prog.objective.NAME == "minimize" else -1.0
    worst, n_solved, notes = 0.0, 0, []
    bscale = max([float(np.abs(c.bound).max(initial=0.0)) for c in decl.constraints] + [1.0])

    def check_at(label: str, value: float) -> None:
        nonlocal worst, n_solved
        G = form.recover(compiled).G
        f = decl.objective(LowRank(G))
        viol = float(decl.violation(LowRank(G)))
        ref = max(_term_scale(decl, G @ G.T), abs(f), 1.0)
        p = value / scale
        better = sense * (f - p) / ref  # > 0: the program claims better than the kernel it recovers
        worst = max(worst, better, viol / bscale)
        n_solved += 1
        if better > DEEP_RTOL or viol > DEEP_RTOL * bscale:
            notes.append(f"{label}: program {p:.8g}, recovered kernel {f:.8g}, violation {viol:.2g}")

    def solve(problem: Any, label: str) -> bool:
        try:
            problem.solve(solver="CLARABEL")
        except (cp.error.SolverError, ValueError) as exc:
            notes.append(f"{label}: the solve failed ({exc})")
            return False
        if problem.status not in (cp.OPTIMAL,):
            notes.append(f"{label}: the solve ended {problem.status} (not checked)")
            return False
        return True

    # the program's value is the solver's (CVXPY's .value re-evaluates the objective at the
    # solution, inf for a von Neumann entropy at an eigenvalue of -5e-9)
    if solve(prog, "the program's optimum"):
        value = float(prog.solution.opt_val)
        check_at("the program's optimum", value)
        x_opt = _flat([v.value for v in kernel])
        kv = cp.hstack([cp.vec(v, order="F") for v in kernel])
        rho = 0.25 * max(float(np.linalg.norm(x_opt)), 1.0)
        for j in range(DEEP_TILTS):
            r = rng.normal(size=x_opt.size)
            r *= 0.1 * max(abs(value), 1.0) / (rho * np.linalg.norm(r))
            tilted = cp.Problem(type(prog.objective)(prog.objective.expr + sense * (r @ kv)),
                                prog.constraints + [cp.norm(kv - x_opt) <= rho])
            label = f"tilt {j + 1}"
            if solve(tilted, label):
                x = _flat([v.value for v in kernel])
                check_at(label, float(tilted.solution.opt_val) - sense * float(r @ x))
    ok = n_solved > 0 and worst <= DEEP_RTOL
    detail = (f"{n_solved} solves (the program's optimum and {DEEP_TILTS} random tilts within a ball "
              f"around it, Clarabel, {time.perf_counter() - t0:.2f} s): at each solution recover() is "
              "problem-feasible with an objective no worse than the program's value" if ok else
              "; ".join(notes) or "no solve ended optimal")
    if not ok and notes and n_solved:
        detail = "the program is a relaxation or recovery loses feasibility: " + detail
    res.checks.append(Check("extreme points", ok, worst, DEEP_RTOL, detail))
