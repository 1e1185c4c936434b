"""The dual checks of :func:`~kernelforms.verify`: the Lagrangian identity at random
multipliers inside (and outside) the conjugates' domains, and the ``deep`` check against the
full SDP (strong duality)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from .checks import Check, VerifyResult, _value
from .primal import DEEP_RTOL

if TYPE_CHECKING:
    from ..formulations.dual_sdp import DualInverse


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
        from ..model import GE, LE

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
    inv: DualInverse = compiled.inverse
    prog = compiled.program
    sign = decl.sign
    blocks: list[tuple[_Block, Any]] = []
    for m, loss, w, var, coef in inv.terms:
        if var is not None:
            blocks.append((_Block(var, 2.0 * abs(w), loss=loss, w=w, coef=coef,
                                  label=f"{var.name()} ({loss.name} loss)"), None))
    for c, nu in inv.rows:
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
        M = np.asarray(inv.M.value, dtype=float)
        f = sign * decl.objective(K)
        MK = float(np.sum(M * Kp))
        fy_total, parts = 0.0, [abs(f), abs(D), abs(MK)]
        for m, loss, w, var, coef in inv.terms:
            zz = m.apply(Kp)
            c = -w * loss.conjugate_domain()[0] if var is None else np.asarray(coef.value, dtype=float).ravel()
            gap = w * (loss.value(zz) + loss.conjugate(-c / w) + c * zz / w)
            fy_min = min(fy_min, float(gap.min(initial=np.inf)) / max(1.0, float(np.abs(gap).max(initial=0))))
            fy_total += float(gap.sum())
            parts.append(float(np.abs(gap).sum()))
        rows_total = 0.0
        for c, nu in inv.rows:
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
    ok = bool(np.isfinite(fy_min)) and fy_min >= -rtol if inv.terms else True
    res.checks.append(Check("weak duality", ok, max(-fy_min, 0.0) if np.isfinite(fy_min) else
                            (0.0 if not inv.terms else float("inf")), rtol,
                            "every Fenchel-Young gap >= 0 and nu_q (a_q.K - b_q) >= 0 wherever row q "
                            "holds, at every drawn point, so f(K) >= D at feasible K whenever M is PSD"))
    res.notes.append("the dual's recovery solves a reduced primal (a solver run) and is not checked here"
                     " (deep=True compares the dual's optimum with the full SDP's)")


def _deep_dual(form: Any, compiled: Any, problem: Any, res: VerifyResult) -> None:
    """The dual's optimum (Clarabel) against the full SDP's: equal within DEEP_RTOL (strong
    duality; the primal over merged points has a strictly feasible kernel)."""
    import cvxpy as cp

    from ..registry import FORMULATIONS, load

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
