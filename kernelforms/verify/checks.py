"""What :func:`~kernelforms.verify` returns (:class:`Check`, :class:`VerifyResult`), the random
kernels it draws, and the checks shared by the primal and the dual: term scales, values of
CVXPY expressions, cone violations, constraint rows matched up to positive scaling."""

from __future__ import annotations

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
    """``n_points`` random kernels in the declaration's form (see :mod:`kernelforms.verify`)
    and a sentence saying how they were drawn.  ``indefinite``: the same forms with the inner
    matrix's largest eigenvalue negated (symmetric, not PSD: no problem point)."""
    from ..model import PSD, Basis, Range, chain

    def inner(k: int) -> np.ndarray:
        A = _psd(rng, k)
        return _flip(A) if indefinite else A

    form = decl.form
    merged = chain(decl).merged  # the chain's merge (None: none, or a conflict)
    out = []
    if merged is not None:
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
    from ..model import EQ, GE

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
    """The constraint-row check (see :mod:`kernelforms.verify`)."""
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
