"""Rank that grows only when the certificate asks (Burer & Monteiro 2005; Journee et al. 2010).

A factored solver (admm, bcd, lowrank) optimises over ``K = G G^T`` with ``G`` of ``r``
columns.  The optimum of the kernel-learning problems usually has a small rank (2-3 for two
classes of must-link / cannot-link pairs), far below the Pataki bound that guarantees a
factor of that rank exists (``r (r + 1) / 2 <= m``, which grows with the number of pairs).
So, when the user gives no ``rank``, the solver starts at :data:`START_RANK` and, after each
converged solve, asks the Lagrangian certificate (:func:`kernelforms.certificate.escape`)
whether the point is optimal:

* the certificate's matrix ``H`` (the Lagrangian's gradient, with the constraint multipliers
  that give the best bound) is PSD over the form up to round-off: the point is optimal;
  stop.  (A hinge problem whose best bound is loose and comes from a PSD matrix takes ``H``
  from the hinge slopes fitted to stationarity instead: :func:`kernelforms.certificate.escape`.)
* otherwise ``H`` has negative eigenvalues: ``K + t v v^T`` lowers the objective along each
  such eigenvector ``v``.  The factor's spare directions (singular values below
  :data:`DEFICIENT` of the largest: a rank-deficient factor that is not yet a second-order
  point, as a first-order solver stopped by its residual tolerance leaves it) make room
  first; then the columns ``sqrt(t) v`` are appended (``t`` by a line search on the
  objective; a small step when there are constraints, which the solver restores) and the
  solve restarts from there, warm.  The rank grows only when no spare direction is left.
* a step that did not halve the curvature's share of the gap means the solver's own
  accuracy is the limit: stop (at most :data:`MAX_PHASES` solves).
* a solve that stopped at ``max_iter`` at a rank below the optimum's crawls there without
  converging (admm on 900 digits, P1: the optimum has rank 10; at rank 8 it ended 0.5% above
  it with a certified gap of 5e-2).  When the user gave no ``max_iter`` and the certificate's
  curvature share is above :data:`STALL_RTOL` (after admm's refinement steps), the rank grows
  as above and the solver runs again (at most :data:`MAX_REGROW` times); a given
  ``max_iter`` ends the run at that solve.  Not for bcd and lowrank on problems with
  constraint rows (there a stalled violation, not the rank, is the usual cause).

* a warm re-solve of a solver with a refinement step (admm) that meets its residual rule at a
  point above the one it started from, far from optimal (curvature share above
  :data:`STALL_RTOL`), stopped next to a saddle of the factored problem: the new columns were
  too small to leave it.  Once per run it is solved again at that rank from the seed's random
  start (pendigits 3,000, NPKL square, optimum of rank 20: warm re-solves at ranks 24-29 ended
  at 378.61 with a certified gap of 0.38; cold at rank 24, then two refinement steps: 378.44105,
  certified 9.4e-6).

The rank never exceeds the solver's cap (the Pataki bound), and ``rank=`` fixes it as
before.  The memory guard reads the starting rank; a step that would pass ``max_memory``
stops the growth with a message.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any

import numpy as np

from ..errors import KernelformsError
from ..result import LowRank, Status

__all__ = ["START_RANK", "GROW_RTOL", "GROW_STEP", "start_rank", "grow"]

#: first rank tried when the user gives none
START_RANK = 8
#: grow when the negative curvature of the certificate's matrix accounts for more than this
#: relative gap (``-lambda_min tau / |f|``): below it the point is certified to that accuracy
#: whatever rank is added
GROW_RTOL = 5e-7
#: most columns added in one step (the eigenvectors of the most negative eigenvalues)
GROW_STEP = 4
#: a factor whose smallest singular value is below this fraction of its largest is rank
#: deficient: a column is to spare, so a negative eigenvalue of the certificate's matrix
#: there is the solve's inexactness, not a missing direction (Burer & Monteiro 2005,
#: Theorem 4.1: a rank-deficient second-order point is optimal)
DEFICIENT = 1e-3
#: most solves in one run (each after a step along negative curvature)
MAX_PHASES = 8
#: a step that did not halve the curvature's share of the gap ends the growth only below this
#: share (above it the point is far from optimal: grow again, within MAX_PHASES)
STALL_RTOL = 1e-2
#: most refinement steps (a solver's :meth:`~kernelforms.solvers.base.IterativeSolver.refine`,
#: taken instead of a step and a re-solve) in one run
MAX_RITZ = 8
#: most growth steps after a solve that stopped at max_iter far from the optimum (the
#: curvature's share above STALL_RTOL after the refinement steps), each followed by a solve
MAX_REGROW = 4
#: a solve that stopped at max_iter is reported converged when refinement steps bring the
#: Lagrangian certificate's relative gap below this (and the curvature's share below
#: :data:`GROW_RTOL`)
CERTIFIED_RTOL = 1e-6
#: a point whose certificate (the diagonal shift included) proves a relative gap above the
#: solver's ``stop_gap`` but within this factor of it is a near miss: the run takes one more
#: step (a refinement step or a solve, and its certificate) and then stops at the best point
#: with the gap it proved.  Without it the curvature rule's steps decide how many follow
#: (up to :data:`MAX_RITZ` refinement steps and more solves, each with an escape and a shifted
#: run: about 100 CPU s at a million points, the step itself not counted)
NEAR_MISS = 4.0
#: the escape's eigenpairs after the smallest are computed to this residual (relative to
#: ``||H||``; :func:`kernelforms.certificate.eigen.directions_only`), the smallest to the
#: certificate's strict rule.  They are directions: to grow along, and the diagonal shift's,
#: whose own eigenvalue run checks the matrix built on them (a million two-Gaussian points:
#: 1e-6 -> 1e-5 took the escape's run from 620 to 540 steps, 976 -> 817 products; the same
#: four negative eigenvalues to 3e-4 relative, the shifted run 1,053 -> 1,013 products,
#: certified gap 9.42e-6 -> 9.43e-6)
ESCAPE_PAIR_TOL = 1e-5


def start_rank(cap: int) -> int:
    """``min(START_RANK, cap)``."""
    return int(max(1, min(START_RANK, int(cap))))


def _merge_history(parts: list[dict[str, list]], offsets: list[float]) -> dict[str, list]:
    """Concatenate the phases' histories (keys every phase has); times are shifted so they
    run from the start of the first phase."""
    if not parts:
        return {}
    keys = [k for k in parts[0] if all(k in h for h in parts)]
    out: dict[str, list] = {k: [] for k in keys}
    for h, off in zip(parts, offsets):
        for k in keys:
            vals = list(h[k])
            if k == "time":
                vals = [off + float(v) for v in vals]
            out[k].extend(vals)
    return out


def _step(problem: Any, G: np.ndarray, v: np.ndarray, slope: float, constrained: bool) -> float:
    """``t > 0`` for the new column ``sqrt(t) v``: the minimiser of the objective's quadratic
    model along ``K + t v v^T`` (exact for squared losses, piecewise for hinges), checked to
    lower the objective and halved until it does; with constraint rows, or when no step
    lowers the objective, a small step (1e-3 of a column's mean square): a zero column would
    be a stationary point the solver never leaves."""
    scale = float(np.mean(np.sum(G * G, axis=0))) if G.size else 1.0
    scale = scale if scale > 0 and math.isfinite(scale) else 1.0
    small = 1e-3 * scale
    if constrained or not slope < 0:
        return small
    phi = _ray(problem, G, v)
    f0 = phi(0.0)
    t = scale
    for _ in range(30):  # a step with curvature in view
        ft = phi(t)
        if math.isfinite(ft) and ft - f0 - slope * t > 0:
            break
        t *= 4.0
    else:
        return small
    a = (ft - f0 - slope * t) / (t * t)  # phi(t) ~ f0 + slope t + a t^2, a > 0
    t = -slope / (2.0 * a)
    for _ in range(30):
        if t > 0 and phi(t) < f0:
            return t
        t /= 2.0
    return small


def _ray(problem: Any, G: np.ndarray, v: np.ndarray) -> Any:
    """``t -> `` the minimisation's objective at the factor ``[G, sqrt(t) v]``: the factored
    oracle's :meth:`~kernelforms.model.Oracle.ray` (the rows' values at ``G`` and ``v`` once,
    then one pass over the loss rows per ``t``), or the declaration's objective at each ``t``
    where the oracle does not cover the problem (a divergence) or works in other units."""
    from ..model import oracle

    decl = problem.declaration
    try:
        orc = oracle(decl)
    except ValueError:
        orc = None
    if orc is not None and orc.conflict is None and orc.expand is None and orc.scale == 1.0:
        return orc.ray(G, v)
    sign = -1.0 if getattr(problem, "sense", "min") == "max" else 1.0
    return lambda t: sign * float(decl.objective(LowRank(np.hstack([G, math.sqrt(t) * v[:, None]]))))


def _own_gap(problem: Any, out: Any, f: float) -> float | None:
    """The relative gap the solver's own bound certifies (bcd's duality gap), or None."""
    key = "upper_bound" if getattr(problem, "sense", "min") == "max" else "lower_bound"
    b = getattr(out, key)
    try:
        b = float(b)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(b):
        return None
    gap = (b - f) if key == "upper_bound" else (f - b)
    return max(gap, 0.0) / max(abs(f), 1e-12)


def _spare_of(sv: np.ndarray) -> int:
    """The factor's spare directions: singular values below :data:`DEFICIENT` of the largest."""
    return int(np.sum(sv < DEFICIENT * sv[0])) if sv.size and sv[0] > 0 else 0


def _spare(G: Any) -> int:
    """:func:`_spare_of` the factor ``G`` (0 without a finite factor)."""
    G = np.asarray(G, dtype=float)
    if G.ndim != 2 or not G.size or not np.all(np.isfinite(G)):
        return 0
    return _spare_of(np.linalg.svd(G, compute_uv=False))


def _gap_met(solver: Any, problem: Any, out: Any, esc: Any, opts: dict[str, Any], need: float,
             gap: float, seen: list | None = None, spent: float = 0.0) -> Any:
    """The certificate that proves the point within the solver's ``stop_gap`` option, or None.

    Only for a solver that declares ``stops_on_gap`` (admm) and when the usual rules would
    go on (curvature share above :data:`GROW_RTOL`, or a loose gap the refinement would
    tighten): the escape's certificate first, then :func:`kernelforms.certificate.certify`
    at the same factor, which reuses the escape's bound and eigenpairs and adds only the
    diagonal shift (one more eigenvalue run).  The bound is stored in ``out``'s typed fields
    (``lower_bound`` / ``upper_bound``, ``certified_gap``, ``certificate_time``) so the status
    check after the run does not compute it again.  ``seen`` (a list) receives the best
    certificate computed here when it does not meet ``stop_gap`` (left empty when none was).
    ``spent``: the seconds the escape took (added to the certificate's time)."""
    from .. import certificate
    from ..certificate.shift import wanted_gap

    if not getattr(solver, "stops_on_gap", False):
        return None
    stop = solver.stop_gap(problem, opts)
    if not stop > 0:
        return None
    if out.factor is None or not (need > GROW_RTOL or gap > CERTIFIED_RTOL):
        return None  # the usual rules stop here anyway, with a tighter point
    cert = esc.certificate
    t = time.perf_counter() - spent
    if not cert.relative_gap <= float(stop):
        if not need > 0:
            return None  # no negative curvature: no shift to tighten the bound
        try:
            # the shift's eigenvalue run only where its price leaves the bound within stop
            with wanted_gap(float(stop)):
                cert = certificate.certify(problem, out.factor)
        except (KernelformsError, np.linalg.LinAlgError, ValueError, ArithmeticError):
            return None
    if not cert.relative_gap <= float(stop):
        if seen is not None:
            seen[:] = [cert, time.perf_counter() - t]
        return None
    _store(out, cert, time.perf_counter() - t)
    return cert


def _store(out: Any, cert: Any, seconds: float) -> None:
    """The certificate ``cert`` of ``out``'s factor in ``out``'s typed fields (the status check
    after the run reads them instead of computing the certificate again)."""
    side = "upper_bound" if cert.sense == "max" else "lower_bound"
    setattr(out, side, float(cert.bound))
    out.certified_gap, out.certificate_time = float(cert.relative_gap), float(seconds)
    out.certificate_note = cert.note


def _keep_for(estimate: Any, r: int, max_memory: float) -> int:
    """The bytes of Lanczos vectors the certificates at rank ``r`` may keep
    (:func:`kernelforms.certificate.keep_budget`): the ``LANCZOS_KEEP_BYTES`` the memory
    estimate counts, plus what ``max_memory`` leaves beside the estimate, up to
    ``LANCZOS_KEEP_MAX`` (a million points, admm at the default limit of 4 GiB: about
    3.5 GiB at rank 8; every kept vector is a product the run does not repeat)."""
    from ..certificate.eigen import LANCZOS_KEEP_BYTES, LANCZOS_KEEP_MAX

    est = estimate(r) if estimate is not None else None
    if est is None or not math.isfinite(float(est)):
        return int(LANCZOS_KEEP_BYTES)
    room = max(0.0, float(max_memory) - float(est))
    return int(min(float(LANCZOS_KEEP_MAX), LANCZOS_KEEP_BYTES + room))


def _pooled(fn: Any) -> Any:
    """``fn`` run inside :func:`kernelforms.certificate.eigen.reuse_vectors`: the growth's
    certificates (an escape, a diagonal shift, per step) write their Lanczos vectors into the
    memory of the runs before them instead of new arrays."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        from ..certificate.eigen import reuse_vectors

        with reuse_vectors():
            return fn(*args, **kwargs)
    return run


@_pooled
def grow(solver: Any, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
         deadline: float | None, cap: int, estimate: Any = None, max_memory: float = math.inf,
         fixed: bool = False, regrow: bool = True) -> Any:
    """Run ``solver._solve`` from :func:`start_rank` (or the given ``init``'s columns) and
    grow the rank while the certificate finds negative curvature (see the module docstring).

    ``opts`` are the resolved options with ``rank=None``; ``cap`` the largest rank;
    ``estimate(rank)`` the working-memory estimate at a rank (the guard for each step).
    With ``fixed`` (the user gave ``rank``, and the solver has a refinement step) the rank
    stays ``opts["rank"]`` and only refinement steps follow the solve.  With ``regrow`` (the
    user gave no ``max_iter``), a solve that stopped at max_iter far from the optimum grows
    the rank and solves again (at most :data:`MAX_REGROW` times); a given ``max_iter`` ends
    the run there.
    Returns the last phase's :class:`~kernelforms.solvers.base.SolverOutput` (or the phase
    with the best certified gap when a later one ended worse), with the iterations and
    histories of the phases up to it, ``rank_path`` (the ranks solved at) and
    ``rank_growth`` (why it stopped).
    """
    from .. import certificate
    from ..certificate.eigen import directions_only, keep_budget, release_vectors

    init = opts.get("init")
    G = np.asarray(init, dtype=float) if isinstance(init, np.ndarray) or (
        init is not None and not isinstance(init, str)) else None
    if fixed:
        r = int(opts["rank"])
    else:
        r = int(G.shape[1]) if G is not None else start_rank(cap)
    constrained = bool(problem.declaration.constraints)
    refining = bool(solver.refines(opts))
    t0 = time.perf_counter()
    phases, offsets, path, iters = [], [], [], 0
    why, prev, best = "", None, None
    ritz: list[dict[str, Any]] = []
    out = None
    last = "solve"
    solves = 0
    tight_prev: float | None = None
    widened = False
    forced = 0
    cold = False
    ritz_base = 0  # refinement steps before a cold restart (each solve from a start gets MAX_RITZ)
    start: np.ndarray | None = None
    near: float | None = None  # the certified gap of a near miss (NEAR_MISS), once one was seen
    # (output, certificate, seconds) of each near miss: stored in the output returned only at
    # the end (a refinement step's output is a copy of its solve's, typed fields included)
    proved: list[tuple[Any, Any, float]] = []
    while True:
        if out is None:  # a solve (else the refinement step left its output)
            # the certificates' kept Lanczos vectors are not held through a solve: its own
            # working memory (and at a million points up to 4 GiB of vectors beside it would
            # pass 8 GiB)
            release_vectors()
            o = dict(opts, rank=r, init=G if G is not None else opts.get("init"))
            offsets.append(time.perf_counter() - t0)
            out = solver._solve(problem, o, rng, deadline)
            solves += 1
            phases.append(out.history)
            path.append(r)
            iters += int(out.iterations)
            last = "solve"
        at_max_iter = out.status is Status.MAX_ITER and out.factor is not None \
            and bool(np.all(np.isfinite(out.factor)))
        unconverged = at_max_iter and refining
        # a solve that stopped at max_iter far from the optimum may grow the rank and run again
        may_regrow = regrow and not fixed and forced < MAX_REGROW and solves < MAX_PHASES
        # a solver without a refinement step: when the certificate shows the point far from
        # optimal (below); not with constraint rows, where a stalled violation, not the rank,
        # is the usual cause
        maxed = at_max_iter and not refining and not constrained and may_regrow and r < cap
        if (out.status is not Status.CONVERGED or out.factor is None) and not (unconverged or maxed):
            why = f"stopped at rank {r}: the solve ended {out.status.value}"
            break
        if r >= cap and not refining and not _spare(out.factor):
            # at the cap with every column in use: a stationary point there is optimal; with
            # spare (near-zero) columns it may be a saddle (a warm start from a lower-rank
            # solution: soybean fold at gamma = 1 from gamma = 0.1's factor stopped after 17
            # iterations 0.4% above the optimum, certified gap 0.26): the escape below uses them
            why = f"rank {r} is the cap (the Pataki bound)"
            break
        if deadline is not None and time.perf_counter() >= deadline:
            why = f"time limit reached at rank {r}"
            out.status, out.message = Status.TIMEOUT, f"time limit reached after the solve at rank {r}"
            break
        fired = out.certstop_fired
        if fired is not None and out.status is Status.CONVERGED and not unconverged:
            # the solve stopped on the Lagrangian certificate at this very factor (lowrank's
            # stop_gap): no rank added can lower the objective by more than that gap, and the
            # certificate is not computed again here (pendigits 7,494 at gamma = 100: a second
            # solve and three more certificates, 13 s of a 59 s fit, for a gap already 2.4e-6)
            own = float(fired["relative_gap"])
            if best is None or own < best[0]:
                best = (own, out, r, len(phases), iters)
            why = (f"rank {r} certified by the solve's stop: the Lagrangian certificate's relative "
                   f"gap {own:.2g} <= stop_gap {float(fired['stop_gap']):g}")
            break
        try:
            # only the smallest eigenvalue bounds; the other pairs are directions to grow
            # along, and only the negative ones are used
            t_esc = time.perf_counter()
            budget = _keep_for(estimate, r, max_memory)
            with directions_only(ESCAPE_PAIR_TOL, 0.0), keep_budget(budget):
                esc = certificate.escape(problem, out.factor, multipliers=out.multipliers,
                                         k=GROW_STEP if refining else min(GROW_STEP, cap - r),
                                         start=start)
        except (KernelformsError, np.linalg.LinAlgError, ValueError) as exc:
            why = f"kept rank {r}: no certificate to grow by ({exc})"
            break
        # the next certificate's Lanczos starts from these directions (a nearby point's
        # bottom eigenvectors: at a million points the cold start took thousands of products)
        start = esc.vectors.sum(axis=1) if esc.vectors.size else None
        need = esc.gap_from_curvature
        gap = esc.certificate.relative_gap
        own = _own_gap(problem, out, esc.certificate.objective)
        # the best phase by its tighter certificate (the Lagrangian one or the solver's own)
        cert_gap = gap if own is None else min(gap, own)
        if best is None or cert_gap < best[0]:
            best = (cert_gap, out, r, len(phases), iters)
        seen: list = []
        # (the escape's seconds count in the certificate's time: its bound and eigenpairs are
        # the certificate's first part)
        with keep_budget(budget):
            met = _gap_met(solver, problem, out, esc, opts, need, gap, seen,
                           spent=time.perf_counter() - t_esc)
        if met is None and seen and seen[0].relative_gap < cert_gap:
            # the shifted certificate proved more than the escape's: this phase's gap
            cert_gap = float(seen[0].relative_gap)
            if best is None or cert_gap < best[0]:
                best = (cert_gap, out, r, len(phases), iters)
        if met is None and seen and cert_gap <= NEAR_MISS * solver.stop_gap(problem, opts):
            proved.append((out, seen[0], seen[1]))
            if near is not None:
                # the step after a near miss did not reach stop_gap either: stop at the best
                why = (f"rank {r}: certified relative gap {cert_gap:.2g} above stop_gap "
                       f"{solver.stop_gap(problem, opts):g} after one more step than the near "
                       f"miss at {near:.2g}; stopped there (at most one step follows a point "
                       f"within {NEAR_MISS:g} times stop_gap)")
                break
            near = cert_gap
        elif near is not None and met is None and need > GROW_RTOL:
            why = (f"rank {r}: certified relative gap {cert_gap:.2g} after one more step than "
                   f"the near miss at {near:.2g} (stop_gap {solver.stop_gap(problem, opts):g}); "
                   "stopped there")
            break
        if met is not None:
            best = (float(met.relative_gap), out, r, len(phases), iters)
            why = (f"rank {r} certified: the Lagrangian certificate's relative gap "
                   f"{met.relative_gap:.2g} <= stop_gap {solver.stop_gap(problem, opts):g}")
            if unconverged:
                out.status = Status.CONVERGED
                out.message = (f"{out.message}; then certified by the Lagrangian certificate "
                               f"(relative gap {met.relative_gap:.2g} <= stop_gap "
                               f"{solver.stop_gap(problem, opts):g})")
            break
        if (refining and not fixed and last == "solve" and solves > 1 and not cold
                and out.status is Status.CONVERGED and need > STALL_RTOL and solves < MAX_PHASES
                and G is not None and opts.get("init") is None
                and esc.certificate.objective > float(problem.declaration.objective(LowRank(G)))):
            # a warm re-solve that met its residual rule at a point worse than the one it
            # started from, far from optimal: it stopped near a saddle of the factored problem
            # (its new columns too small to leave it; pendigits 3,000 NPKL-square: rank 24
            # warm ended 378.61, certified 0.38; a cold start at that rank reaches the optimum,
            # 378.441).  Once per run: solve again at this rank from the seed's random start
            cold = True
            G = None
            out = None
            ritz_base, prev, tight_prev, widened = len(ritz), None, None, False
            continue
        if maxed and (not need > STALL_RTOL or (own is not None and own <= STALL_RTOL)):
            why = (f"stopped at rank {r}: the solve ended {out.status.value} (relative gap from "
                   f"curvature {need:.2g})")
            break
        if own is not None and own <= need and not maxed:
            why = (f"rank {r} certified by the solver's own bound (relative gap {own:.2g}), tighter "
                   f"than the Lagrangian certificate's curvature term ({need:.2g})")
            break
        # no negative curvature left, but the certificate is loose: the complementarity
        # term <grad f, K> (a solve that stopped at its own tol).  An exact Ritz step over the
        # factor makes it vanish within the factor's span (its KKT conditions)
        tighten = (refining and not need > GROW_RTOL and gap > CERTIFIED_RTOL
                   and len(ritz) - ritz_base < MAX_RITZ and (tight_prev is None or gap < 0.5 * tight_prev))
        if not need > GROW_RTOL and not tighten:
            lam = float(esc.values[0]) if esc.values.size else float(esc.certificate.min_eig)
            why = (f"rank {r} certified: lambda_min of the certificate's matrix {lam:.3g} "
                   f"(relative gap from curvature {need:.2g} <= {GROW_RTOL:g})")
            if unconverged and gap <= CERTIFIED_RTOL:
                # the solve stopped at max_iter, the refinement steps reached a point the
                # Lagrangian certificate proves optimal: that is the stopping rule that fired
                out.status = Status.CONVERGED
                out.message = (f"{out.message}; then certified by the Lagrangian certificate "
                               f"(relative gap {gap:.2g} <= {CERTIFIED_RTOL:g})")
            break
        stalled = prev is not None and need > 0.5 * prev and not tighten
        if tighten:
            tight_prev = gap
        if (unconverged and stalled and last == "refine" and not widened and len(ritz) - ritz_base < MAX_RITZ
                and best[0] <= 100 * CERTIFIED_RTOL):
            # close to certified: once per run, one more step (the certificate is not monotone
            # along the steps: a step that lowers the objective can raise the curvature share
            # before it falls; 100-point digits P1: 4.6e-6 -> 9.1e-6 -> 2.7e-7)
            stalled, widened = False, True
        regrow_now = maxed  # (maxed: need > STALL_RTOL here)
        if unconverged and (stalled or len(ritz) - ritz_base >= MAX_RITZ):
            if not (may_regrow and need > STALL_RTOL):
                why = (f"stopped at rank {r}: the solve ended {out.status.value} and the refinement "
                       f"steps did not certify the point (relative gap from curvature {need:.2g})")
                break
            # far from optimal after the refinement steps: the rank is too small for the
            # solve to converge (digits 900 P1: the optimum has rank 10; admm at rank 8 ended
            # at max_iter 0.5% above it, at rank 12 it converges): grow and solve again
            regrow_now = True
        thorough = unconverged
        if regrow_now:
            forced += 1
            refine_now = False
        elif stalled and last == "refine" and refining and not widened:
            # the step lowered the objective but not the curvature: once, a step over a wider
            # subspace (the gradient directions H G too) before solving again (at 100,000
            # points after Anderson-accelerated ADMM: share 1.9e-5 -> 1.6e-4 after a step)
            refine_now, thorough, widened = True, True, True
        elif stalled and last == "refine":
            # a refinement step from a point far from the optimum (the directions do not
            # span it): solve again from the refined point, with the escape step
            refine_now = False
        elif stalled and need > STALL_RTOL:
            # not halved, but the share is still large: the point is far from optimal, not at
            # the limit of the solve's accuracy; grow again (NPKL-square on 1,200 pendigits
            # points: 1.5 -> 0.77 stopped lowrank 6.7e-4 above the optimum, "converged")
            refine_now = True
        elif stalled and last == "solve" and refining and len(ritz) - ritz_base < MAX_RITZ:
            # a solve after growing ended with more curvature than the refinement step before
            # it (its own tol limits it): refinement steps from this point, not a stop (usps
            # 5,000 NPKL-square: 1.7e-4 after the steps at rank 17, 1.7e-3 after the solve at 21)
            refine_now = True
        elif stalled:
            why = (f"stopped at rank {r}: the last step along negative curvature did not halve "
                   f"its share of the gap ({prev:.2g} -> {need:.2g}); the solve's own accuracy "
                   "(its tol) limits the certificate here")
            break
        else:
            refine_now = True
        can_refine = refining and refine_now and len(ritz) - ritz_base < MAX_RITZ
        if solves >= MAX_PHASES and not can_refine:
            why = f"stopped at rank {r} after {MAX_PHASES} solves (relative gap from curvature {need:.2g})"
            break
        prev = need
        neg = esc.values < 0
        V = esc.vectors[:, neg]
        slopes = esc.values[neg]
        if can_refine:
            # the solver's own refinement (admm: an exact Ritz step over the factor and V)
            max_cols = r if fixed else min(cap, r + V.shape[1])
            if estimate is not None and max_cols > r:
                est = estimate(max_cols)
                if est is not None and est > max_memory:
                    max_cols = r
            Gr, rec = solver.refine(problem, out.factor, V, opts, max_cols, thorough=thorough)
            rec = dict(rec, relative_gap_before=gap)
            ritz.append(rec)
            if Gr is not None:
                r = int(Gr.shape[1])
                path.append(r)
                # one history entry per step: its objective and time; the other entries
                # (residuals, penalties) repeat the last solve's
                h = {k: list(v[-1:]) or [math.nan] for k, v in (out.history or {}).items()}
                if "objective" in h:
                    h["objective"] = [float(rec["objective_after"])]
                if "time" in h:
                    h["time"] = [0.0]
                offsets.append(time.perf_counter() - t0)
                phases.append(h)
                iters += 1  # a refinement step counts as one iteration (one history entry)
                # the solver's own SolverOutput with the refined factor (no import of .base:
                # base imports this module)
                out = dataclasses.replace(out, factor=Gr, iterations=0, extras=dict(out.extras))
                last = "refine"
                continue
            if fixed or unconverged or tighten:
                why = f"kept rank {r}: the refinement step failed ({rec.get('note', '')})"
                break
        if fixed and not refine_now:
            # the given rank: solve again from the refined point (no escape columns)
            G = np.asarray(out.factor, dtype=float)
            if solves >= MAX_PHASES:
                why = f"stopped at rank {r} after {MAX_PHASES} solves (relative gap from curvature {need:.2g})"
                break
            out = None
            continue
        if fixed:
            why = f"kept rank {r} (given): {MAX_RITZ} refinement steps (relative gap from curvature {need:.2g})"
            break
        if solves >= MAX_PHASES:
            why = f"stopped at rank {r} after {MAX_PHASES} solves (relative gap from curvature {need:.2g})"
            break
        # the factor's directions, largest first; those below DEFICIENT of the largest are
        # spare: the escape directions take their place before the rank grows
        U, sv, _ = np.linalg.svd(np.asarray(out.factor, dtype=float), full_matrices=False)
        spare = _spare_of(sv)
        new = min(V.shape[1], GROW_STEP, cap - (r - spare))
        drop = min(spare, new)
        r_new = r - drop + new
        if new <= 0:
            why = f"rank {r} is the cap (the Pataki bound)" if V.shape[1] else (
                f"kept rank {r}: the certificate's matrix has lambda_min "
                f"{esc.certificate.min_eig:.3g} but no eigenvector of a negative eigenvalue was "
                f"computed to grow along (relative gap from curvature {need:.2g})")
            break
        if estimate is not None and r_new > r:
            est = estimate(r_new)
            if est is not None and est > max_memory:
                why = (f"kept rank {r}: rank {r_new} would need about {est / 2**30:.2f} GiB, "
                       f"above max_memory (relative gap from curvature {need:.2g})")
                break
        Gn = (U * sv)[:, :r - drop]
        for c in range(new):
            t = _step(problem, Gn, V[:, c], float(slopes[c]), constrained)
            Gn = np.hstack([Gn, math.sqrt(max(t, 0.0)) * V[:, c:c + 1]])
        G, r = Gn, Gn.shape[1]
        out = None
    if best is not None and best[1] is not out:
        # a later solve ended worse (or unconverged): the best certified phase is the answer
        last = f"the last solve (rank {path[-1]}) ended {out.status.value}"
        out = best[1]
        why = (f"{why}; returned the solve at rank {best[2]} (certified relative gap "
               f"{best[0]:.2g}), better than where {last}")
        # the history and iterations end where the returned point was found
        phases, offsets, iters = phases[:best[3]], offsets[:best[3]], best[4]
    for o, cert, seconds in proved:
        if o is out:  # a near miss returned: the certificate computed at its factor
            _store(out, cert, seconds)
    out.iterations = iters
    out.history = _merge_history(phases, offsets)
    extras = dict(out.extras, rank=int(np.shape(out.factor)[1]) if out.factor is not None else path[-1])
    out.rank_path, out.rank_growth = path, why
    if ritz:
        extras["refinement"] = ritz
        done = sum(1 for x in ritz if "rank" in x)
        rough = sum(1 for x in ritz if "rank" in x and "optimal_inaccurate" in str(x.get("note", "")))
        out.message = f"{out.message}; {done} refinement step(s) after the solve" + (
            f" ({rough} from a subspace program solved at reduced accuracy)" if rough else "")
    out.extras = extras
    return out
