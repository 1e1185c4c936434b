"""Verify a reformulation without a solver: :func:`verify`.

A correct reformulation has both inclusions: every problem point is a program point with
the same objective, and every program point maps back (``recover``) to a problem point
whose objective is no worse (the program is no relaxation).  ``kf.verify(problem, "sqlp")``
compiles the problem (no solve), draws random kernels in the declaration's form, maps each
to the program's variables with the formulation's own
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
    ``recover()`` on the lifted variables gives back the same K;

and the converse:

``auxiliaries``
    with K fixed, the auxiliary variables (those ``recover`` does not read, found by moving
    each variable and recovering again) are moved along directions that keep every equality row and improve
    the objective (the projected gradient and random directions of the rows' null space);
    each move must leave a cone by more than round-off (or break an inequality row) before
    the objective improves by 0.3 % of its scale.  An epigraph cone that is not tight
    (``2 u_1 >= ||u_{2:}||``, a Schur LMI ``[[I, a], [a^T, 2 nu]]``, a dropped
    ``u_1 + u_2 = 1``) lets the program go below the problem's objective over the same K,
    and shows here;
``kernel domain``
    an indefinite kernel of the form (the largest eigenvalue of its inner matrix negated),
    lifted, must violate a cone or be refused by a PSD variable: a dropped PSD block shows.

Together with the rows (matched to the problem's, so no row is looser), these say that no
program point over a kernel has an objective below the problem's at that kernel.  ``deep=True`` adds a
check with a solver, for small instances (each is a full conic solve):

``extreme points``
    the program is solved (Clarabel), then twice more with its objective tilted by a random
    linear term on the kernel variables within a ball around the optimum; at each solution
    ``recover()`` must be problem-feasible with an objective no worse than the program's
    value.

Points: ``K = G G^T`` for the PSD form, ``K = Q Y Q^T`` (Y random PSD) for a basis,
``K = V0 W V0^T`` for the Range form; when equality constraints force points equal (hard
PCP's must-links) ``K = P K' P^T`` with K' random, the subspace the formulations compile.

The dual (``"dual"``) is checked from outside: its variables are multipliers, not a
function of K.  Multipliers are drawn per coordinate from ``N(0, (2 w)^2)`` (``N(0, 1)``
for a constraint row's), a distribution that does not depend on the dual program's
constraints, and:

``multiplier domain``
    the program (its constraints other than ``M PSD``) accepts every point whose
    conjugates are finite (the draws conditioned on ``l*(-c / w) < inf``, and on
    ``nu_q (a_q . K - b_q) >= 0`` wherever row q holds: ``nu <= 0`` on ``<=`` rows) and
    refuses every point with one coordinate outside (three per block and point): a dropped
    hinge box ``Q <= w`` or swapped row signs show;
``dual value``
    at the accepted points the program's objective equals the dual function
    ``-sum_k w_k sum_p l_p*(-c_p / w_k) + b . nu`` computed from the declaration's conjugates;
``lagrangian``
    at those points and random K, the program's value ``D`` and its matrix ``M`` satisfy

        f(K) - D = <M, K> + sum_k w_k sum_p [l_p(z_p) + l_p*(-c_p / w_k) + c_p z_p / w_k]
                         + sum_q nu_q (a_q . K - b_q)

    (``z = A(K)``, ``c`` the multipliers' coefficients in ``Phi``);
``weak duality``
    every Fenchel-Young gap is >= 0 at the accepted points, so (with the domain's signs)
    ``f(K) >= D`` whenever K is feasible and M is PSD.

The dual's recovery needs a solve (the reduced primal) and is not checked; ``deep=True``
adds ``strong duality``: the dual's optimum equals the full SDP's (both solved by Clarabel).

A failed check is a finding: :func:`verify` returns a :class:`VerifyResult` whose
``passed`` is False and whose text says which check and by how much; it raises only on bad
arguments (before any work).
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


def _flip(A: np.ndarray) -> np.ndarray:
    """``A`` (PSD) with its largest eigenvalue negated: an indefinite matrix of the same size."""
    w, V = np.linalg.eigh(A)
    w[-1] = -w[-1]
    return (V * w) @ V.T


def draw_kernels(decl: Any, n_points: int, rng: np.random.Generator, *,
                 indefinite: bool = False) -> tuple[list[np.ndarray], str]:
    """``n_points`` random kernels in the declaration's form (see the module docstring) and a
    sentence saying how they were drawn.  ``indefinite``: the same forms with the inner
    matrix's largest eigenvalue negated (symmetric, not PSD: no problem point)."""
    from .model import PSD, Basis, Range, merge_equal_points

    def inner(k: int) -> np.ndarray:
        A = _psd(rng, k)
        return _flip(A) if indefinite else A

    form = decl.form
    merged = merge_equal_points(decl)
    out = []
    if merged is not None and merged.conflict is None:
        P = merged.P.toarray()
        for _ in range(n_points):
            K = P @ inner(merged.c) @ P.T
            out.append((K + K.T) / 2)
        return out, f"K = P K' P^T, K' random PSD {merged.c} x {merged.c} (points forced equal merged)"
    for _ in range(n_points):
        if isinstance(form, PSD):
            K = inner(form.n)
        elif isinstance(form, Basis):
            K = form.B @ inner(form.block) @ form.B.T
        elif isinstance(form, Range):
            K = form.V0 @ inner(form.r) @ form.V0.T
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


def _cone_violation(c: Any, scales: dict | None = None) -> float | None:
    """Relative violation of a PSD or SOC constraint at the variables' values (None for a
    constraint of another kind).  ``scales`` collects each PSD constraint's largest
    absolute eigenvalue (by ``id``), which :func:`_psd_within` reads."""
    from cvxpy.constraints import PSD as CvxPSD, SOC

    if isinstance(c, CvxPSD):
        A = _value(c.args[0])
        A = (A + A.T) / 2
        w = np.linalg.eigvalsh(A)
        big = max(float(np.abs(w).max()), 1e-300)
        if scales is not None:
            scales[id(c)] = big
        return float(max(-w[0], 0.0) / big)
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


#: most random points :func:`verify` accepts (rows are matched over them; a few suffice)
MAX_POINTS = 1000
#: most bytes the random kernels (dense n x n each, kept for the row matching) may take
MAX_POINT_BYTES = 2**30
#: largest ``rtol``: the lifted values are exact up to round-off, so a looser tolerance only
#: lets real bugs pass (a weight off by 0.1 % moves the objective by about 1e-3)
MAX_RTOL = 1e-3
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


def _check_args(n_points: Any, seed: Any, rtol: Any, deep: Any) -> None:
    from .errors import ProblemError

    if isinstance(n_points, bool) or not isinstance(n_points, numbers.Integral) or not 3 <= n_points <= MAX_POINTS:
        raise ProblemError(f"The 'n_points' parameter of verify must be an integer in [3, {MAX_POINTS}] "
                           f"(rows are matched over the points; a few suffice). Got {n_points!r} instead.")
    if seed is not None and not isinstance(seed, np.random.Generator) and (
            isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise ProblemError(f"The 'seed' parameter of verify must be a nonnegative integer, a numpy "
                           f"Generator or None. Got {seed!r} instead.")
    if (isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not np.isfinite(float(rtol))
            or not 0.0 < float(rtol) <= MAX_RTOL):
        raise ProblemError(f"The 'rtol' parameter of verify must be a float in (0, {MAX_RTOL:g}] (the "
                           f"lifted values are exact up to round-off; a looser tolerance lets real bugs "
                           f"pass). Got {rtol!r} instead.")
    if not isinstance(deep, (bool, np.bool_)):
        raise ProblemError(f"The 'deep' parameter of verify must be True or False. Got {deep!r} instead.")


def _check_problem(problem: Any, n_points: int) -> None:
    """An empty problem has nothing to verify, and the points must fit in memory (both
    refused before any work)."""
    from .errors import ProblemError
    from .util import format_bytes

    decl = getattr(problem, "declaration", None)
    if decl is None:
        return  # compile_for says what a problem is
    n = int(decl.n)
    if n < 1:
        raise ProblemError(f"verify: the problem has n = {n} points; there is no kernel to check "
                           "(give a problem with at least one point)")
    need = 8.0 * n_points * n * n
    if 8.0 * 3 * n * n > MAX_POINT_BYTES:
        raise ProblemError(f"verify: the problem is too large to verify ({n} points): verify draws dense "
                           f"{n} x {n} kernels, and even 3 take {format_bytes(24.0 * n * n)}, over "
                           f"{format_bytes(MAX_POINT_BYTES)}; verify the formulation on a smaller instance "
                           "of the same problem (the check is structural)")
    if need > MAX_POINT_BYTES:
        raise ProblemError(f"The 'n_points' parameter of verify is too large for this problem: "
                           f"{n_points} random {n} x {n} kernels take {format_bytes(need)}, over "
                           f"{format_bytes(MAX_POINT_BYTES)}; use n_points <= "
                           f"{int(MAX_POINT_BYTES // (8 * n * n))} (the default 4 is enough)")


def verify(problem: Any, method: Any, *, n_points: int = 4, seed: Any = 0,
           rtol: float = RTOL, deep: bool = False) -> VerifyResult:
    """Check that ``method`` is a correct reformulation of ``problem`` on random points,
    without a solver (see the module docstring for every check).

    Parameters
    ----------
    problem : a kernelforms problem
    method : str
        A formulation (``"sdp"``, ``"scsdp"``, ``"scsdp_factor"``, ``"sqlp"``, ``"dual"``; a
        ``":solver"`` suffix is ignored) or a Formulation instance.
    n_points : int
        Random points (3 to 1000; at most 1 GiB of random n x n kernels).
    seed : int, numpy Generator or None
    rtol : float
        Relative tolerance of every check, in (0, 1e-3].
    deep : bool
        Also solve the program a few times (its own optimum and randomly tilted objectives
        within a ball around it; for the dual, its optimum against the full SDP's) and check
        the solutions map back to problem points no better than the program says.  For
        small instances: each solve is a full conic solve.

    Returns
    -------
    VerifyResult
        ``passed`` False is a finding (which check, by how much), not an exception.

    Raises
    ------
    SolverNotFound, NotApplicable, ProblemError
        Unknown method or a hand-written solver; a formulation that does not apply (the
        reason); a bad ``n_points``, ``seed``, ``rtol`` or ``deep``, an empty problem.
    """
    from .explain import _label, compile_for

    _check_args(n_points, seed, rtol, deep)
    _check_problem(problem, int(n_points))
    rtol = float(rtol)
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
        if deep:
            _deep_dual(form, compiled, problem, res)
    elif compiled.inverse.get("infeasible"):
        viol = [decl.violation(K) for K in points]
        ok = all(v > 0 for v in viol)
        res.checks.append(Check("contradiction", ok, 0.0, 0.0,
                                f"the program is 0 == 1 ({compiled.notes[0] if compiled.notes else ''}); "
                                f"the problem's constraints are violated at every point (min violation "
                                f"{min(viol):.3g})" if ok else "a drawn point satisfies the constraints "
                                "the compile proved contradictory"))
    else:
        _verify_primal(form, compiled, decl, points, rng, rtol, res)
        if deep:
            _deep_primal(form, compiled, decl, points, rng, res)
    res.seconds = time.perf_counter() - t0
    return res


#: PSD blocks larger than this are tested by a Cholesky factorisation in the auxiliary moves
#: (about 5 times cheaper than the eigenvalues; the Schur LMI of A^(1/2) has size d + 1)
CHOLESKY_FROM = 200


def _psd_within(c: Any, tol: float, big: float) -> bool:
    """Whether a PSD constraint's smallest eigenvalue is at least ``-tol * big`` (a Cholesky
    factorisation of the shifted matrix)."""
    import scipy.linalg as sla

    A = _value(c.args[0])
    A = (A + A.T) / 2 + (tol * big) * np.eye(A.shape[0])
    try:
        sla.cholesky(A, lower=True, check_finite=False, overwrite_a=True)
        return True
    except sla.LinAlgError:
        return False


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

    from .result import LowRank

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


# ---------------------------------------------------------------------------- the dual
#: single-coordinate points outside the conjugates' domains tried per block and point
OUT_TRIES = 3
#: rejection-sampling rounds for a coordinate inside (or outside) the conjugate's domain
DRAW_ROUNDS = 200


def _accepts(prog: Any, rtol: float) -> tuple[bool, str]:
    """Whether the program's constraints other than PSD ones hold at the current values (the
    multipliers' domain), and the first one that does not."""
    from cvxpy.constraints import PSD as CvxPSD

    for c in prog.constraints:
        if isinstance(c, CvxPSD):
            continue
        try:
            rows = _program_rows_of(c)
        except ValueError as exc:
            return False, str(exc)
        if rows is None:
            continue
        eq, r, s = rows
        bad = np.abs(r) > rtol * s if eq else r > rtol * s
        if np.any(bad):
            return False, str(c)
    return True, ""


def _program_rows_of(c: Any) -> tuple[bool, np.ndarray, np.ndarray] | None:
    from cvxpy.constraints import Equality, Inequality

    if not isinstance(c, (Equality, Inequality)):
        return None
    lhs = np.atleast_1d(_value(c.args[0])).ravel()
    rhs = np.atleast_1d(_value(c.args[1])).ravel()
    lhs, rhs = np.broadcast_arrays(lhs, rhs)
    return isinstance(c, Equality), lhs - rhs, np.abs(lhs) + np.abs(rhs) + 1e-300


class _Block:
    """One block of multipliers, its wide distribution and its domain (where the conjugate is
    finite), read from the declaration: a loss term's ``l*(-c / w)`` (``c`` the block's
    coefficient in Phi) or a constraint row's sense (``nu_q (a_q . K - b_q) >= 0`` wherever row
    q holds, the sign the Lagrangian identity needs for weak duality)."""

    def __init__(self, var: Any, sigma: float, loss: Any = None, w: float = 1.0, coef: Any = None,
                 sense: Any = None, label: str = "") -> None:
        self.var, self.sigma, self.loss, self.w, self.coef, self.sense = var, sigma, loss, w, coef, sense
        self.label = label

    def coefficients(self, x: np.ndarray) -> np.ndarray:
        """The block's coefficients in Phi at multipliers ``x`` (the program's own expression;
        read once as ``a o x`` when it is elementwise linear, which is checked)."""
        if getattr(self, "_a", None) is None:
            self.var.value = np.ones(int(self.var.size))
            a = np.ravel(np.asarray(self.coef.value, dtype=float))
            self.var.value = x
            c = np.ravel(np.asarray(self.coef.value, dtype=float))
            self._a = a if np.allclose(c, a * x, rtol=1e-12, atol=0.0) else False
            return c
        if self._a is False:
            self.var.value = x
            return np.ravel(np.asarray(self.coef.value, dtype=float))
        return self._a * x

    def finite(self, x: np.ndarray) -> np.ndarray:
        """Per coordinate: is the conjugate (the row's sign rule) finite at multipliers ``x``."""
        from .model import GE, LE

        if self.loss is not None:
            return np.isfinite(self.loss.conjugate(-self.coefficients(x) / self.w))
        return ~(((self.sense == LE) & (x > 0)) | ((self.sense == GE) & (x < 0)))

    def draw(self, rng: np.random.Generator, inside: bool, size: int | None = None) -> np.ndarray:
        """Coordinates from N(0, sigma^2) conditioned on being inside / outside the domain
        (NaN where DRAW_ROUNDS rounds found none)."""
        n = int(self.var.size) if size is None else size
        out = np.full(n, np.nan)
        todo = np.arange(n)
        for _ in range(DRAW_ROUNDS):
            x = rng.normal(scale=self.sigma, size=int(self.var.size))
            ok = self.finite(x)
            take = todo[(ok[todo] if inside else ~ok[todo])]
            out[take] = x[take]
            todo = todo[np.isnan(out[todo])]
            if not todo.size:
                break
        return out

    def conjugate_term(self, x: np.ndarray, b: Any = None) -> float:
        """The block's term of the dual function: ``-w sum l*(-c / w)`` or ``b . nu``."""
        if self.loss is not None:
            return float(-self.w * np.sum(self.loss.conjugate(-self.coefficients(x) / self.w)))
        return float(np.asarray(b, dtype=float) @ x)


def _verify_dual(form: Any, compiled: Any, decl: Any, points: list, rng: np.random.Generator,
                 rtol: float, res: VerifyResult) -> None:
    inv = compiled.inverse
    prog = compiled.program
    sign = decl.sign
    blocks: list[tuple[_Block, Any]] = []
    for m, loss, w, var, coef in inv["terms"]:
        if var is not None:
            blocks.append((_Block(var, 2.0 * abs(w), loss=loss, w=w, coef=coef,
                                  label=f"{var.name()} ({loss.name} loss)"), None))
    for c, nu in inv["rows"]:
        blocks.append((_Block(nu, 1.0, sense=np.asarray(c.sense), label=f"{nu.name()} (constraint rows)"),
                       c.bound))
    worst, fy_min, value_worst = 0.0, np.inf, 0.0
    rejected_in, accepted_out, n_in, n_out, no_inside = [], [], 0, 0, []
    for K in points:
        Kp = form.primal_coordinates(compiled, K)
        # multipliers drawn per coordinate from N(0, sigma^2) (sigma from the declaration's
        # weights, not the program's constraints), conditioned on a finite conjugate
        z = {}
        for blk, _ in blocks:
            x = blk.draw(rng, inside=True)
            if np.any(np.isnan(x)):
                no_inside.append(blk.label)
                x = np.nan_to_num(x)
            z[id(blk)] = x
        for blk, _ in blocks:
            blk.var.value = z[id(blk)]
        n_in += 1
        ok, why = _accepts(prog, rtol)
        if not ok:
            rejected_in.append(why)
        D = float(prog.objective.value)
        terms = [blk.conjugate_term(z[id(blk)], b) for blk, b in blocks]
        D_ind = sum(terms)
        for blk, _ in blocks:  # (coefficients() assigns values when it reads the program)
            blk.var.value = z[id(blk)]
        value_worst = max(value_worst, abs(D - D_ind) / max(sum(abs(t) for t in terms) + abs(D), 1e-300))
        # the Lagrangian identity at K
        M = np.asarray(inv["M"].value, dtype=float)
        f = sign * decl.objective(K)
        MK = float(np.sum(M * Kp))
        fy_total, parts = 0.0, [abs(f), abs(D), abs(MK)]
        for m, loss, w, var, coef in inv["terms"]:
            zz = m.apply(Kp)
            c = -w * loss.conjugate_domain()[0] if var is None else np.asarray(coef.value, dtype=float).ravel()
            gap = w * (loss.value(zz) + loss.conjugate(-c / w) + c * zz / w)
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
        # one coordinate at a time outside its domain: the program must refuse the point
        for blk, _ in blocks:
            x_in = z[id(blk)]
            out = blk.draw(rng, inside=False, size=OUT_TRIES)
            for j, v in zip(rng.choice(x_in.size, size=min(OUT_TRIES, x_in.size), replace=False), out):
                if np.isnan(v):
                    continue  # no coordinate value outside the domain (a free multiplier)
                x = x_in.copy()
                x[j] = v
                blk.var.value = x
                n_out += 1
                if _accepts(prog, rtol)[0]:
                    accepted_out.append(f"{blk.label}[{j}] = {v:.3g}")
            blk.var.value = x_in
    res.checks.append(Check("lagrangian", worst <= rtol, worst, rtol,
                            "f(K) - D(multipliers) = <M, K> + Fenchel-Young gaps + sum nu (a.K - b) "
                            "at random K and random multipliers with finite conjugates"))
    dom_ok = not rejected_in and not accepted_out and not no_inside
    if dom_ok:
        detail = (f"multipliers drawn per coordinate from N(0, (2w)^2) (N(0, 1) for constraint rows), "
                  f"independently of the program's constraints: the program accepts all {n_in} points "
                  f"whose conjugates are finite and refuses all {n_out} points with one coordinate "
                  "outside a conjugate's domain")
    else:
        bits = []
        if rejected_in:
            bits.append(f"the program refuses {len(rejected_in)} of {n_in} points whose conjugates are "
                        f"finite (first: {rejected_in[0]})")
        if accepted_out:
            bits.append(f"the program accepts {len(accepted_out)} of {n_out} points with an infinite "
                        f"conjugate (first: {accepted_out[0]})")
        if no_inside:
            bits.append(f"no multipliers with a finite conjugate were found for {no_inside[0]}")
        detail = "; ".join(bits)
    res.checks.append(Check("multiplier domain", dom_ok,
                            (len(rejected_in) + len(accepted_out)) / max(n_in + n_out, 1), 0.0, detail))
    res.checks.append(Check("dual value", value_worst <= rtol, value_worst, rtol,
                            "the program's objective vs -sum_k w_k sum_p l_p*(-c_p / w_k) + b . nu, "
                            "from the declaration's conjugates, at the accepted points"))
    ok = bool(np.isfinite(fy_min)) and fy_min >= -rtol if inv["terms"] else True
    res.checks.append(Check("weak duality", ok, max(-fy_min, 0.0) if np.isfinite(fy_min) else
                            (0.0 if not inv["terms"] else float("inf")), rtol,
                            "every Fenchel-Young gap >= 0 and nu_q (a_q.K - b_q) >= 0 wherever row q "
                            "holds, at every drawn point, so f(K) >= D at feasible K whenever M is PSD"))
    res.notes.append("the dual's recovery solves a reduced primal (a solver run) and is not checked here"
                     " (deep=True compares the dual's optimum with the full SDP's)")


def _deep_dual(form: Any, compiled: Any, problem: Any, res: VerifyResult) -> None:
    """The dual's optimum (Clarabel) against the full SDP's: equal within DEEP_RTOL (strong
    duality; the primal over merged points has a strictly feasible kernel)."""
    import cvxpy as cp

    from .registry import FORMULATIONS, load

    t0 = time.perf_counter()
    primal = load(FORMULATIONS["sdp"], "sdp")().compile(problem)
    try:
        compiled.program.solve(solver="CLARABEL")
        primal.program.solve(solver="CLARABEL")
    except cp.error.SolverError as exc:
        res.checks.append(Check("strong duality", False, float("inf"), DEEP_RTOL, f"a solve failed ({exc})"))
        return
    sd, sp_ = compiled.program.status, primal.program.status
    sign = problem.declaration.sign
    if sd != cp.OPTIMAL or sp_ != cp.OPTIMAL:
        same = {(cp.UNBOUNDED, cp.INFEASIBLE), (cp.INFEASIBLE, cp.UNBOUNDED)}
        ok = (sd, sp_) in same
        res.checks.append(Check("strong duality", ok, 0.0 if ok else float("inf"), DEEP_RTOL,
                                f"the dual ended {sd}, the full SDP {sp_}"))
        return
    D = sign * float(compiled.program.value)
    P = float(primal.program.value)
    gap = abs(D - P) / max(abs(P), 1.0)
    res.checks.append(Check("strong duality", gap <= DEEP_RTOL, gap, DEEP_RTOL,
                            f"the dual's optimum {D:.8g} vs the full SDP's {P:.8g} (Clarabel, "
                            f"{time.perf_counter() - t0:.2f} s)"))
