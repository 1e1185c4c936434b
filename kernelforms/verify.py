"""Verify a reformulation without a solver: :func:`verify`.

``kf.verify(problem, "sqlp")`` compiles the problem (no solve), draws random kernels in the
declaration's form, maps each to the program's variables with the formulation's own
:meth:`~kernelforms.formulations.base.Formulation.lift` (auxiliary epigraph variables set
tight), and checks, on every point:

``objective``
    the program's objective (CVXPY ``.value``, constants included) equals the problem's
    own objective (``problem.declaration``), times the scale the formulation states (1,
    or ``1/s`` for the von Neumann full SDP);
``cones``
    every PSD and second-order cone constraint of the program holds at the lifted point;
``constraint rows``
    every linear row of the program either holds exactly at every point (an auxiliary
    definition such as ``u_1 + u_2 = 1``) or is, as an affine function of K, a positive
    multiple of one of the problem's constraint rows with the same sense (a nonzero
    multiple for an equality), and every problem row is matched by one: the random points
    are generic, not feasible, so a dropped, mis-scaled or mis-signed row shows;
``recovery``
    ``recover()`` on the lifted variables gives back the same K.

Points: ``K = G G^T`` for the PSD form, ``K = Q Y Q^T`` (Y random PSD) for a basis,
``K = V0 W V0^T`` for the Range form; when equality constraints force points equal (hard
PCP's must-links) ``K = P K' P^T`` with K' random, the subspace the formulations compile.

The dual (``"dual"``) is checked differently: its variables are multipliers, not a function
of K.  For random multipliers in their domains and random K, the program's value ``D`` and
its matrix ``M`` satisfy the Lagrangian identity

    f(K) - D = <M, K> + sum_k w_k sum_p [l_p(z_p) + l_p*(-c_p / w_k) + c_p z_p / w_k]
                     + sum_q nu_q (a_q . K - b_q)

(``z = A(K)``, ``c`` the multipliers' coefficients in ``Phi``), computed from the
declaration's losses and their conjugates; every Fenchel-Young gap is >= 0, so weak duality
``f(K) >= D`` holds whenever K is feasible and M is PSD.  The dual's recovery needs a solve
(the reduced primal) and is not checked.

A failed check is a finding: :func:`verify` returns a :class:`VerifyResult` whose
``passed`` is False and whose text says which check and by how much; it raises only on bad
arguments.
"""

from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: relative tolerance of every check (the lifted values are exact up to round-off)
RTOL = 1e-8


@dataclass
class Check:
    """One check: its name, whether it passed, the largest relative discrepancy seen and
    the tolerance, and a sentence of detail."""

    name: str
    passed: bool
    discrepancy: float
    tol: float
    detail: str

    def __str__(self) -> str:
        mark = "ok  " if self.passed else "FAIL"
        return f"{mark} {self.name:<16} max rel. discrepancy {self.discrepancy:.1e} (tol {self.tol:.0e})  {self.detail}"


@dataclass
class VerifyResult:
    """What :func:`verify` found (``passed``: every check passed)."""

    method: str
    problem: str
    n_points: int
    seed: Any
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def check(self, name: str) -> Check:
        """The check called ``name``."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check {name!r}; checks: {', '.join(c.name for c in self.checks)}")

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        head = (f"verify {self.method} on {self.problem}: {'PASSED' if self.passed else 'FAILED'} "
                f"({len(self.checks)} checks, {self.n_points} random points, seed {self.seed}, "
                f"{self.seconds * 1e3:.0f} ms, no solver)")
        return "\n".join([head, *[f"  {c}" for c in self.checks], *[f"  note: {n}" for n in self.notes]])

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "problem": self.problem, "passed": self.passed,
                "n_points": self.n_points, "seed": self.seed, "seconds": self.seconds,
                "checks": [c.__dict__.copy() for c in self.checks], "notes": list(self.notes)}


# ---------------------------------------------------------------------------- random points
def _psd(rng: np.random.Generator, k: int) -> np.ndarray:
    G = rng.normal(size=(k, k + 2)) / np.sqrt(k + 2)
    return G @ G.T


def draw_kernels(decl: Any, n_points: int, rng: np.random.Generator) -> tuple[list[np.ndarray], str]:
    """``n_points`` random kernels in the declaration's form (see the module docstring) and a
    sentence saying how they were drawn."""
    from .model import PSD, Basis, Range, merge_equal_points

    form = decl.form
    merged = merge_equal_points(decl)
    out = []
    if merged is not None and merged.conflict is None:
        P = merged.P.toarray()
        for _ in range(n_points):
            K = P @ _psd(rng, merged.c) @ P.T
            out.append((K + K.T) / 2)
        return out, f"K = P K' P^T, K' random PSD {merged.c} x {merged.c} (points forced equal merged)"
    for _ in range(n_points):
        if isinstance(form, PSD):
            K = _psd(rng, form.n)
        elif isinstance(form, Basis):
            K = form.B @ _psd(rng, form.block) @ form.B.T
        elif isinstance(form, Range):
            K = form.V0 @ _psd(rng, form.r) @ form.V0.T
        else:  # pragma: no cover - the declaration admits only the three forms
            raise TypeError(type(form).__name__)
        out.append((K + K.T) / 2)
    how = {PSD: "K = G G^T, G random", Basis: "K = Q Y Q^T, Y random PSD",
           Range: "K = V0 W V0^T, W random PSD"}[type(form)]
    return out, how


# ---------------------------------------------------------------------------- the checks
def _term_scale(decl: Any, K: np.ndarray) -> float:
    """The sum of the absolute values of the objective's terms at K (the scale round-off is
    measured against)."""
    s = sum(abs(t.value(K)) for t in decl.linear) + sum(abs(t.value(K)) for t in decl.losses)
    if decl.divergence is not None:
        s += abs(decl.divergence.value(K, decl.form))
    return float(s)


def _value(expr: Any) -> np.ndarray:
    """``expr.value``, evaluated atom by atom with sparse constants densified when CVXPY's own
    evaluation fails (``np.hstack`` of a sparse constant in ``bmat``: the Schur LMI)."""
    try:
        return np.asarray(expr.value, dtype=float)
    except (ValueError, TypeError):
        pass
    return np.asarray(_value_rec(expr), dtype=float)


def _value_rec(expr: Any) -> Any:
    import scipy.sparse as sp
    from cvxpy.expressions.leaf import Leaf

    if isinstance(expr, Leaf):
        v = expr.value
        return v.toarray() if sp.issparse(v) else v
    return expr.numeric([_value_rec(a) for a in expr.args])


def _cone_violation(c: Any) -> float | None:
    """Relative violation of a PSD or SOC constraint at the variables' values (None for a
    constraint of another kind)."""
    from cvxpy.constraints import PSD as CvxPSD, SOC

    if isinstance(c, CvxPSD):
        A = _value(c.args[0])
        A = (A + A.T) / 2
        w = np.linalg.eigvalsh(A)
        return float(max(-w[0], 0.0) / max(np.abs(w).max(), 1e-300))
    if isinstance(c, SOC):
        t = np.atleast_1d(_value(c.args[0]))
        X = _value(c.args[1]).reshape(t.size, -1)
        nx = np.linalg.norm(X, axis=1)
        return float(np.max(np.maximum(nx - t, 0.0) / np.maximum(np.maximum(nx, np.abs(t)), 1e-300)))
    return None


def _program_rows(program: Any) -> list[tuple[bool, np.ndarray, np.ndarray]]:
    """``(is_equality, residual, scale)`` per linear constraint of the program at the current
    values (residual ``<= 0`` or ``== 0`` when the row holds)."""
    from cvxpy.constraints import Equality, Inequality

    out = []
    for c in program.constraints:
        if isinstance(c, (Equality, Inequality)):
            lhs = np.atleast_1d(_value(c.args[0])).ravel()
            rhs = np.atleast_1d(_value(c.args[1])).ravel()
            lhs, rhs = np.broadcast_arrays(lhs, rhs)
            # round-off scale: the constraint's largest side and the values of its variables
            # (``B y - u == h`` cancels B y against u row by row)
            big = max([float(np.abs(v.value).max(initial=0.0)) for v in c.variables()]
                      + [float((np.abs(lhs) + np.abs(rhs)).max(initial=0.0))])
            out.append((isinstance(c, Equality), lhs - rhs, np.abs(lhs) + np.abs(rhs) + big))
    return out


def _problem_rows(decl: Any, K: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(is_equality, residual, scale)`` of the declaration's rows at K, in the ``<= 0`` /
    ``== 0`` convention (a ``>=`` row negated)."""
    from .model import EQ, GE

    eqs, res, sc = [], [], []
    for c in decl.constraints:
        a = c.map.apply(K)
        g = a - c.bound
        res.append(np.where(c.sense == GE, -g, g))
        eqs.append(c.sense == EQ)
        sc.append(np.abs(a) + np.abs(c.bound))
    if not res:
        return np.zeros(0, bool), np.zeros(0), np.zeros(0)
    return np.concatenate(eqs), np.concatenate(res), np.concatenate(sc)


def _normalise(R: np.ndarray, eq: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Rows of R (a row's residuals over the points) scaled to unit norm; equality rows
    signed so that ``row . w > 0`` (any nonzero multiple of an equality is the same row)."""
    N = R / np.linalg.norm(R, axis=1, keepdims=True)
    flip = eq & (N @ w < 0)
    N[flip] *= -1
    return N


def _match_rows(prog: list, prob: list, zero_tol: float, tol: float) -> Check:
    """The constraint-row check (see the module docstring)."""
    from scipy.spatial import cKDTree

    P_eq = np.concatenate([np.full(r.size, e) for e, r, _ in prog[0]]) if prog[0] else np.zeros(0, bool)
    P_res = np.stack([np.concatenate([r for _, r, _ in pts]) if pts else np.zeros(0) for pts in prog], axis=1)
    P_sc = np.stack([np.concatenate([s for _, _, s in pts]) if pts else np.zeros(0) for pts in prog], axis=1)
    Q_eq = prob[0][0]
    Q_res = np.stack([r for _, r, _ in prob], axis=1) if prob else np.zeros((0, 0))
    Q_sc = np.stack([s for _, _, s in prob], axis=1) if prob else np.zeros((0, 0))
    n_pts = P_res.shape[1] if P_res.size else len(prob)

    def zero(R, S):
        return np.all(np.abs(R) <= zero_tol * np.maximum(S, 1e-300), axis=1) if R.size else np.zeros(0, bool)

    p_zero, q_zero = zero(P_res, P_sc), zero(Q_res, Q_sc)
    w = np.random.default_rng(12345).normal(size=n_pts)
    Pn = _normalise(P_res[~p_zero], P_eq[~p_zero], w) if np.any(~p_zero) else np.zeros((0, n_pts))
    Qn = _normalise(Q_res[~q_zero], Q_eq[~q_zero], w) if np.any(~q_zero) else np.zeros((0, n_pts))
    Pe, Qe = P_eq[~p_zero], Q_eq[~q_zero]
    worst, unmatched_prog, unmatched_prob = 0.0, 0, 0
    if len(Pn) and len(Qn):
        for e in (True, False):
            a, b = Pn[Pe == e], Qn[Qe == e]
            if not len(a):
                continue
            if not len(b):
                unmatched_prog += len(a)
                continue
            d, _ = cKDTree(b).query(a)
            worst = max(worst, float(np.where(d <= tol, d, 0.0).max(initial=0.0)))
            unmatched_prog += int(np.sum(d > tol))
            d2, _ = cKDTree(a).query(b)
            unmatched_prob += int(np.sum(d2 > tol))
        for e in (True, False):  # problem rows of a sense the program has none of
            if np.any(Qe == e) and not np.any(Pe == e):
                unmatched_prob += int(np.sum(Qe == e))
    else:
        unmatched_prog, unmatched_prob = len(Pn), len(Qn)
    ok = unmatched_prog == 0 and unmatched_prob == 0
    detail = (f"{int(p_zero.sum())} program rows hold exactly at every point (auxiliary), "
              f"{len(Pn)} match the problem's {len(Qn)} rows up to positive scaling (every problem row "
              "matched; rows merged or repeated in the problem may share one program row)"
              if ok else
              f"{unmatched_prog} program rows match no problem row and {unmatched_prob} problem rows "
              f"(of {len(Qn)}) are matched by no program row")
    if int(q_zero.sum()):
        detail += f"; {int(q_zero.sum())} problem rows are zero at every point"
    return Check("constraint rows", ok, worst if ok else float("inf"), tol, detail)


def _check_args(n_points: Any, seed: Any) -> None:
    from .errors import ProblemError

    if isinstance(n_points, bool) or not isinstance(n_points, numbers.Integral) or n_points < 3:
        raise ProblemError(f"verify: n_points must be an integer >= 3 (rows are matched over the "
                           f"points); got {n_points!r}")
    if seed is not None and not isinstance(seed, np.random.Generator) and (
            isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise ProblemError(f"verify: seed must be a nonnegative integer, a numpy Generator or None; "
                           f"got {seed!r}")


def verify(problem: Any, method: Any, *, n_points: int = 4, seed: Any = 0,
           rtol: float = RTOL) -> VerifyResult:
    """Check that ``method`` is a correct reformulation of ``problem`` on random points,
    without a solver (see the module docstring for every check).

    Parameters
    ----------
    problem : a kernelforms problem
    method : str
        A formulation (``"sdp"``, ``"scsdp"``, ``"scsdp_factor"``, ``"sqlp"``, ``"dual"``; a
        ``":solver"`` suffix is ignored) or a Formulation instance.
    n_points : int
        Random points (at least 3).
    seed : int, numpy Generator or None
    rtol : float
        Relative tolerance of every check.

    Returns
    -------
    VerifyResult
        ``passed`` False is a finding (which check, by how much), not an exception.

    Raises
    ------
    SolverNotFound, NotApplicable, ProblemError
        Unknown method or a hand-written solver; a formulation that does not apply (the
        reason); a bad ``n_points`` or ``seed``.
    """
    from .explain import _label, compile_for

    _check_args(n_points, seed)
    t0 = time.perf_counter()
    form, compiled = compile_for(problem, method, "verify")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    decl = problem.declaration
    points, how = draw_kernels(decl, int(n_points), rng)
    res = VerifyResult(form.name, _label(problem), int(n_points),
                       seed if not isinstance(seed, np.random.Generator) else "generator")
    res.notes.append(f"points: {how}")
    if hasattr(form, "draw_multipliers"):
        _verify_dual(form, compiled, decl, points, rng, rtol, res)
    elif compiled.inverse.get("infeasible"):
        viol = [decl.violation(K) for K in points]
        ok = all(v > 0 for v in viol)
        res.checks.append(Check("contradiction", ok, 0.0, 0.0,
                                f"the program is 0 == 1 ({compiled.notes[0] if compiled.notes else ''}); "
                                f"the problem's constraints are violated at every point (min violation "
                                f"{min(viol):.3g})" if ok else "a drawn point satisfies the constraints "
                                "the compile proved contradictory"))
    else:
        _verify_primal(form, compiled, decl, points, rtol, res)
    res.seconds = time.perf_counter() - t0
    return res


def _verify_primal(form: Any, compiled: Any, decl: Any, points: list, rtol: float,
                   res: VerifyResult) -> None:
    prog = compiled.program
    obj_worst, cone_worst, n_cones = 0.0, 0.0, 0
    prog_rows, prob_rows = [], []
    scale = 1.0
    for K in points:
        lift = form.lift(compiled, K)
        lift.assign()
        scale = lift.objective_scale
        p = float(prog.objective.value)
        f = decl.objective(K)
        ref = max(_term_scale(decl, K) * scale, abs(scale * f), 1e-300)
        obj_worst = max(obj_worst, abs(p - scale * f) / ref)
        for c in prog.constraints:
            v = _cone_violation(c)
            if v is not None:
                n_cones += 1
                cone_worst = max(cone_worst, v)
        prog_rows.append(_program_rows(prog))
        prob_rows.append(_problem_rows(decl, K))
    what = "the problem's objective" if scale == 1.0 else f"{scale:.6g} x the problem's objective"
    res.checks.append(Check("objective", obj_worst <= rtol, obj_worst, rtol,
                            f"program objective at the lifted points vs {what}"))
    res.checks.append(Check("cones", cone_worst <= rtol, cone_worst, rtol,
                            f"{n_cones // max(len(points), 1)} PSD / SOC constraints hold at the lifted points"
                            if n_cones else "no cone constraint (PSD variables hold by construction)"))
    res.checks.append(_match_rows(prog_rows, prob_rows, zero_tol=1e-9, tol=1e-6))
    # recovery: at the last point
    K = points[-1]
    G = form.recover(compiled).G
    err = float(np.linalg.norm(G @ G.T - K) / max(np.linalg.norm(K), 1e-300))
    res.checks.append(Check("recovery", err <= 1e-7, err, 1e-7, "recover() of the lifted variables vs K"))


def _verify_dual(form: Any, compiled: Any, decl: Any, points: list, rng: np.random.Generator,
                 rtol: float, res: VerifyResult) -> None:
    inv = compiled.inverse
    sign = decl.sign
    worst, fy_min, weak_cases = 0.0, np.inf, 0
    for K in points:
        Kp = form.primal_coordinates(compiled, K)
        form.draw_multipliers(compiled, rng).assign()
        D = float(compiled.program.objective.value)
        M = np.asarray(inv["M"].value, dtype=float)
        f = sign * decl.objective(K)
        MK = float(np.sum(M * Kp))
        fy_total, parts = 0.0, [abs(f), abs(D), abs(MK)]
        for m, loss, w, var, coef in inv["terms"]:
            z = m.apply(Kp)
            c = w * loss.labels if var is None else np.asarray(coef.value, dtype=float).ravel()
            gap = w * (loss.value(z) + loss.conjugate(-c / w) + c * z / w)
            fy_min = min(fy_min, float(gap.min(initial=np.inf)) / max(1.0, float(np.abs(gap).max(initial=0))))
            fy_total += float(gap.sum())
            parts.append(float(np.abs(gap).sum()))
        rows_total = 0.0
        for c, nu in inv["rows"]:
            r = np.asarray(nu.value, dtype=float) * (c.map.apply(Kp) - c.bound)
            rows_total += float(r.sum())
            parts.append(float(np.abs(r).sum()))
        disc = abs(f - D - (MK + fy_total + rows_total)) / max(sum(parts), 1e-300)
        worst = max(worst, disc)
        weak_cases += 1
    res.checks.append(Check("lagrangian", worst <= rtol, worst, rtol,
                            "f(K) - D(multipliers) = <M, K> + Fenchel-Young gaps + sum nu (a.K - b) "
                            "at random K and random multipliers in their domains"))
    ok = bool(np.isfinite(fy_min)) and fy_min >= -rtol if inv["terms"] else True
    res.checks.append(Check("weak duality", ok, max(-fy_min, 0.0) if np.isfinite(fy_min) else
                            (0.0 if not inv["terms"] else float("inf")), rtol,
                            "every Fenchel-Young gap >= 0 (multipliers in the conjugates' domains), so "
                            "f(K) >= D at feasible K whenever M is PSD"))
    res.notes.append("the dual's recovery solves a reduced primal (a solver run) and is not checked here")
