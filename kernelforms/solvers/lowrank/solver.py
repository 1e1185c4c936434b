"""lowrank's solver: the options, the L-BFGS runs and the augmented Lagrangian around them
(see :mod:`kernelforms.solvers.lowrank` for the method)."""

from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np

from ..._parallel import with_threads
from ...errors import OptionError
from ...model import Basis, chain
from ...result import Status
from ..base import IterativeSolver, SolverOutput
from ..options import Boolean, FactorInit, Interval, Rank, StrOptions
from .alm import augmented, augmented_hessp
from .applies import CAPABILITIES, build_model, default_rank, reason
from .bounds import farkas as farkas_test
from .bounds import kkt_evidence
from .certstop import CertStop
from .precond import precond_lbfgs
from .start import start

__all__ = ["LowRankBM", "TEST_RTOL", "inner_failure"]

#: relative objective gap to the conic optimum that the tests require
TEST_RTOL = 1e-4

#: largest augmented-Lagrangian penalty (model units)
SIGMA_MAX = 1e8
#: outer iterations at SIGMA_MAX without a 2x decrease of the violation before giving up
STALL_OUTER = 10
#: an ABNORMAL L-BFGS line search with the largest gradient entry within this factor of gtol
#: is the objective's round-off (a stop at the precision limit, certified afterwards)
ROUNDOFF_GRAD = 1e3


def inner_failure(res: Any) -> tuple[Status, str] | None:
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
        row's Hessian block (:func:`~.precond.precond_lbfgs`).  The loss weight makes
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
        constraints (:data:`~.applies.CAPABILITIES`); otherwise the reason (:func:`~.applies.reason`)."""
        return reason(problem.declaration)

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
               certstop: CertStop | None = None, it0: int = 0):
        from scipy.optimize import minimize

        count = [0]

        def cb(intermediate_result):
            if on_iter is not None:
                on_iter(intermediate_result)
            if deadline is not None and time.perf_counter() > deadline:
                raise StopIteration
            count[0] += 1
            if (certstop is not None and certstop.due(count[0])
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

    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        return with_threads(opts.get("threads"), self._solve_inner, problem, opts, rng, deadline)

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
        H0 = start(problem, model, r, opts, rng)
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
        extras: dict[str, Any] = {}
        typed: dict[str, Any] = {"rank_used": r}  # the Solution's typed fields
        s2 = model.scale**2

        def fun_for(le, li, s):
            def fun(v):
                f, g = augmented(model, v.reshape(shape), le, li, s)
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

            certstop = CertStop(problem, model, shape, float(opts["stop_gap"]))
            if opts["precondition"] and model.has_row_blocks():
                res = precond_lbfgs(model, fun, x, shape, opts, deadline, gtol, on_iter,
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
            fail = inner_failure(res)
            grad_ok = bool(np.max(np.abs(res.jac)) <= 10 * gtol)
            if certstop.checks:
                extras.update(certstop.extras())
                typed.update(certstop.typed(returned=fail is None))
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
                          augmented_hessp(model, v.reshape(shape), pv.reshape(shape), le, li, sg).ravel())
                res = self._lbfgs(fun, x, opts, deadline, inner_gtol, opts["maxiter"], hp)
                fail = inner_failure(res)
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
                    farkas = farkas_test(model, G, ce, ci)
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
                        farkas = farkas_test(model, Gx, *model.constraints(Gx))
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
            evidence = kkt_evidence(model, G, lam_e, lam_i, deadline)
            # its bound and gap (at this very factor) are the Solution's own
            typed.update({k: evidence.pop(k) for k in ("lower_bound", "upper_bound", "certified_gap")
                          if k in evidence})
            extras.update(evidence)
        if model.dist_block is not None and model.center and model.trace_coef < 0 and model.C is None:
            # MVU-like (max tr K, centred, one block of distance equalities): the block's
            # multipliers in the sign of kernelforms.certificate, S = sum_e lam_e A_e - I (unit-free)
            k0 = sum(len(b) for b in model.eq[:model.dist_block])
            lam_d = lam_e[k0:k0 + len(model.eq[model.dist_block])]
            # (on the reduced declaration's rows: the chain maps them back, or drops them
            # when points were merged)
            typed["multipliers"] = chain(problem).invert_multipliers(-np.asarray(lam_d, dtype=float))
        if model.expand is not None:
            extras["components"] = model.rows
        return SolverOutput(model.problem_factor(G), status, total_iter, history, message, extras,
                            **typed)
