"""Dispatch of compiled conic programs to CVXPY's solvers.

One table maps CVXPY's statuses onto ours (as CVXPY's own solver interfaces map raw
statuses through a ``STATUS_MAP``), refined by the solver's own reason for stopping (a
time limit is ``timeout``, an iteration limit ``max_iter``).  Any installed conic solver
CVXPY knows can be named (``"sdp:clarabel"``, ``"sqlp:scs"``, ``"sdp:mosek"``); plain
``"sdp"`` picks Clarabel when the dense part of its interior-point system is small
(:data:`AUTO_KKT_ORDER`) and SCS otherwise (:func:`auto_solver`).

Time limits
-----------
``time_limit=T`` covers the whole call: building the program (CVXPY's compilation,
which cannot be interrupted), the solve and the recovery.  The solver is told the time
left (Clarabel ``time_limit``, SCS ``time_limit_secs``), but both check it only between
iterations, and one interior-point iteration on a large SDP can take minutes.  So a
time-limited conic solve runs in a child process (started from a fork server that has
imported CVXPY once) which is killed :data:`KILL_GRACE` seconds after the deadline; the
call returns status ``timeout`` within ``T + 2`` seconds whatever the solver does.  Inside
a process that may not start children (a daemonic worker) or inside a kernelforms worker
process (``compare`` isolates each method itself), the solve runs in place with the
solver's own limit and the compile time counted.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from numbers import Integral, Real
from typing import Any

from ..errors import ConvergenceWarning, NotApplicable, SolverError, SolverNotFound
from ..formulations.base import FIRST_ORDER_SOLVERS
from ..formulations.base import ipm_order
# the fork server (its preloaded modules) and the hiding of a __main__ script are shared
# with compare's child processes: one server, one preload list
from ..processes import fork_is_safe, main_not_reimported, mp_context
from ..registry import FORMULATIONS, SOLVERS, load
from ..result import Result, Status
from ..util import format_bytes
from .base import (
    Method,
    check_run_args,
    evaluate_into,
    parse_max_memory,
    validate_conic_options,
)
from .options import Boolean, Interval, check_option

#: the automatic choice takes Clarabel (interior point) when the dense part of its KKT
#: system has order <= this (2,589: the full SDP of 60 points, whose 1,830 svec entries are
#: coupled through the dense 1,830 x 1,830 scaling block), else SCS (first order).  An
#: interior-point iteration factorises that dense part, ~order^3 / 3 flops: ~6e9 here
#: (seconds), 1.5e12 for the full SDP of 150 points.  The Schur-complement SDP's arrow LMI
#: does not count as a dense block (Clarabel splits it), so P1's Schur SDP on 36 points
#: (LMI 667, order 1,490) goes to Clarabel, which solves it in seconds.
AUTO_KKT_ORDER = ipm_order((60,), 60 * 61 // 2)

#: default options, chosen so that the two solvers agree to ~1e-6 relative on P1
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "CLARABEL": {},
    "SCS": {"eps_abs": 1e-8, "eps_rel": 1e-8, "max_iters": 200_000},
}

#: Clarabel's default iteration limit (to tell its "MaxIterations" from "MaxTime")
CLARABEL_MAX_ITER = 200

#: how each solver spells a wall-clock limit
TIME_LIMIT_OPTION = {"CLARABEL": "time_limit", "SCS": "time_limit_secs", "MOSEK": None}

#: seconds a time-limited child process may run past the deadline before it is killed
KILL_GRACE = 1.0



def _status_map() -> dict[str, Status]:
    import cvxpy as cp

    return {
        cp.OPTIMAL: Status.OPTIMAL,
        cp.OPTIMAL_INACCURATE: Status.OPTIMAL_INACCURATE,
        cp.INFEASIBLE: Status.INFEASIBLE,
        cp.INFEASIBLE_INACCURATE: Status.INFEASIBLE,
        cp.UNBOUNDED: Status.UNBOUNDED,
        cp.UNBOUNDED_INACCURATE: Status.UNBOUNDED,
        cp.USER_LIMIT: Status.MAX_ITER,
        cp.SOLVER_ERROR: Status.NUMERICAL_ERROR,
    }


#: CVXPY's conic solvers that handle semidefinite cones, and the module each needs
SDP_SOLVER_MODULES = {"CLARABEL": "clarabel", "SCS": "scs", "MOSEK": "mosek", "CVXOPT": "cvxopt",
                      "SDPA": "sdpap", "COPT": "coptpy", "SCIP": "pyscipopt"}


#: each solver's relative accuracy option and its default (what :func:`solver_eps` reads)
SOLVER_EPS = {"CLARABEL": ("tol_gap_rel", 1e-8), "SCS": ("eps_rel", 1e-4)}


def solver_eps(solver: str, opts: dict[str, Any]) -> float | None:
    """The relative accuracy ``solver`` was asked for (its option, else its default);
    None for a solver without an entry in :data:`SOLVER_EPS`."""
    key, default = SOLVER_EPS.get(str(solver).upper(), (None, None))
    if key is None:
        return None
    val = opts.get(key, default)
    return float(val) if isinstance(val, (int, float)) else default


#: the solver's multipliers are kept in ``Result.solver_duals`` up to this many values
#: in all (past the row's certificate, which read them, they are a diagnostic)
DUALS_KEPT = 2000


def bound_duals(res: Result) -> None:
    """Drop ``res.solver_duals`` when it holds more than :data:`DUALS_KEPT` values
    (``res.solver_duals_size`` keeps their number), so a report's JSON stays small."""
    duals = res.solver_duals
    if not isinstance(duals, dict):
        return
    total = sum(int(getattr(a, "size", 0)) for part in duals.values() if isinstance(part, list)
                for a in part if a is not None)
    if total > DUALS_KEPT:
        res.solver_duals, res.solver_duals_size = None, total


def installed_conic_solvers() -> list[str]:
    """Installed CVXPY solvers that handle semidefinite cones, upper case.

    Found by their modules (without importing CVXPY, whose import takes seconds: a
    time-limited solve imports it in the child process, inside the time limit).
    """
    import importlib.util

    found = []
    for name, module in SDP_SOLVER_MODULES.items():
        try:
            if importlib.util.find_spec(module) is not None:
                found.append(name)
        except (ImportError, ValueError):
            continue
    return found


def resolve_solver(name: str | None) -> str:
    """Upper-case CVXPY solver name; ``None`` means Clarabel (or the first installed
    conic solver); :func:`auto_solver` makes the size-dependent choice."""
    installed = installed_conic_solvers()
    if name is None:
        return "CLARABEL" if "CLARABEL" in installed or not installed else installed[0]
    up = name.upper()
    if up not in installed:
        import cvxpy as cp

        known = "known to CVXPY but not installed" if up in cp.settings.SOLVERS else "not a CVXPY conic solver"
        raise SolverNotFound(
            f"conic solver {name!r} is {known}. Installed conic solvers: "
            f"{', '.join(s.lower() for s in installed)}."
        )
    return up


def auto_solver(formulation: Any, problem: Any) -> str:
    """The automatic choice for ``formulation`` on ``problem``: Clarabel when the dense
    part of its interior-point system has order <= :data:`AUTO_KKT_ORDER` (or the
    formulation's own ``auto_kkt_order(problem)``; or is unknown), else SCS; falls back to
    whichever of the two is installed."""
    installed = installed_conic_solvers()
    order = formulation.kkt_order(problem)
    own = getattr(formulation, "auto_kkt_order", None)  # formulations from elsewhere may lack it
    limit = (own(problem) if callable(own) else None) or AUTO_KKT_ORDER
    choice = "CLARABEL" if order is None or order <= limit else "SCS"
    if choice not in installed:
        other = "SCS" if choice == "CLARABEL" else "CLARABEL"
        choice = other if other in installed else (installed[0] if installed else choice)
    return choice


# ---------------------------------------------------------------------- option values
class _PositiveSeconds:
    """A number of seconds > 0 (``math.inf``: no limit)."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        real = isinstance(v, Real) and not isinstance(v, bool)  # numpy numbers too; np.bool_ is not Real
        return real and not math.isnan(float(v)) and float(v) > 0

    def describe(self) -> str:
        return "a number of seconds > 0 (inf: no limit)"

    def invalid(self) -> list[Any]:
        return [0, -1.0, math.nan, "5", True]


_POS = [Interval(Real, 0, None, closed="neither")]
_NONNEG = [Interval(Real, 0, None, closed="left")]
_ITERS = [Interval(Integral, 1, None, closed="left")]
_COUNT = [Interval(Integral, 0, None, closed="left")]
_BOOL = [Boolean()]

#: SCS settings whose values kernelforms checks before building anything
SCS_OPTION_CONSTRAINTS: dict[str, list] = {
    "max_iters": _ITERS, "eps_abs": _NONNEG, "eps_rel": _NONNEG, "eps_infeas": _NONNEG,
    "eps": _NONNEG, "time_limit_secs": _NONNEG, "alpha": [Interval(Real, 0, 2, closed="neither")],
    "scale": _POS, "rho_x": _POS, "normalize": _BOOL, "adaptive_scale": _BOOL,
    "acceleration_lookback": [Interval(Integral, None, None)],
    "acceleration_interval": _ITERS, "use_indirect": _BOOL, "use_quad_obj": _BOOL,
    "warm_start": _BOOL,
}


def clarabel_option_constraints() -> dict[str, list]:
    """Declared kinds of Clarabel's settings: ``max_iter`` an int >= 1, ``time_limit``
    seconds > 0, every ``tol_*`` / ``reduced_tol_*`` and the other real settings > 0 (the
    regularisation constants >= 0), integer counts >= 0, booleans bools."""
    try:
        import clarabel
    except ImportError:  # pragma: no cover - not installed: resolve_solver says so
        return {}
    out: dict[str, list] = {}
    defaults = clarabel.DefaultSettings()
    for name in dir(defaults):
        if name.startswith("_") or name in ("default", "verbose"):
            continue
        value = getattr(defaults, name)
        if callable(value):
            continue
        if isinstance(value, bool):
            out[name] = _BOOL
        elif isinstance(value, int):
            out[name] = _COUNT
        elif isinstance(value, float):
            out[name] = _NONNEG if "regularization" in name else _POS
    out.update(max_iter=_ITERS, time_limit=[_PositiveSeconds()],
               max_step_fraction=[Interval(Real, 0, 1, closed="right")],
               linesearch_backtrack_step=[Interval(Real, 0, 1, closed="neither")],
               warm_start=_BOOL, accept_unknown=_BOOL, use_quad_obj=_BOOL)
    return out


def conic_option_constraints(solver: str | None) -> dict[str, list]:
    """Declared value kinds of a conic solver's options (empty when not known)."""
    if solver is None:
        return {**clarabel_option_constraints(), **SCS_OPTION_CONSTRAINTS}
    up = str(solver).upper()
    if up == "SCS":
        return dict(SCS_OPTION_CONSTRAINTS)
    if up == "CLARABEL":
        return clarabel_option_constraints()
    return {}


def check_conic_option_values(solver: str | None, options: dict[str, Any], *, method: str) -> None:
    """Raise :class:`OptionError` naming the option when a known setting has a bad value
    (``max_iter=-1``, ``eps_abs=nan``, ``time_limit_secs="5"``), before any work."""
    kinds = conic_option_constraints(solver)
    who = f"{method} ({str(solver).upper() if solver else 'Clarabel or SCS'})"
    for key, value in options.items():
        if key in kinds:
            check_option(who, key, value, kinds[key])


# ---------------------------------------------------------------------- time-limited child
def _in_worker_process() -> bool:
    """True where this module must not start a child: a daemonic process, or a process
    kernelforms already started for one method (``compare`` kills those itself)."""
    import multiprocessing as mp

    proc = mp.current_process()
    return bool(proc.daemon) or proc.name.startswith("kernelforms")


def _noop() -> None:
    pass


#: pids of processes whose fork server is known to be running with CVXPY imported
_SERVER_READY: set[int] = set()
#: pids of processes that ran a conic solver in place (its native thread pools may exist,
#: which makes a plain fork unsafe from then on)
_SOLVED_IN_PLACE: set[int] = set()
_WARMING: dict[int, Any] = {}


def _child_context(hard_stop: float) -> Any:
    """The multiprocessing context for a time-limited child, or None when it could not be
    made ready before ``hard_stop``.

    A plain fork starts at once with everything imported, and is safe only while this process
    has a single thread (:func:`kernelforms.processes.fork_is_safe`: a conic solve here, the
    user's own or ours, a threaded BLAS or any other thread makes it unsafe); otherwise a fork
    server (started once, in the background, importing
    :data:`kernelforms.processes.FORKSERVER_PRELOAD`); spawn where neither exists.
    """
    import multiprocessing as mp
    import threading

    pid = os.getpid()
    if pid not in _SOLVED_IN_PLACE and fork_is_safe():
        import cvxpy  # noqa: F401 - once here (counted in the time limit), not in every child

        if fork_is_safe():  # the import started no thread
            return mp.get_context("fork")
    ctx = mp_context()
    if ctx.get_start_method() != "forkserver" or pid in _SERVER_READY:
        return ctx
    warm = _WARMING.get(pid)
    if warm is None:
        def start() -> None:
            p = ctx.Process(target=_noop, name="kernelforms-warmup")
            with main_not_reimported(ctx):
                p.start()
            p.join()
            _SERVER_READY.add(pid)

        warm = threading.Thread(target=start, name="kernelforms-forkserver-warmup", daemon=True)
        warm.start()
        _WARMING[pid] = warm
    warm.join(max(0.0, hard_stop - 0.5 - time.perf_counter()))
    return ctx if pid in _SERVER_READY else None


def _child(conn: Any, method: Any, problem: Any, seed: int, time_limit: float,
           options: dict[str, Any]) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = method.run(problem, seed=seed, time_limit=time_limit, _in_place=True, **options)
        conn.send(res)
    except BaseException as exc:  # noqa: BLE001 - report anything, even a solver panic
        try:
            conn.send(Result(method=getattr(method, "name", "?"), status=Status.ERROR,
                             message=f"{type(exc).__name__} in the solver process: {exc}"))
        except BaseException:  # noqa: BLE001
            pass
    finally:
        conn.close()


def _stop(proc: Any) -> None:
    if proc.is_alive():
        proc.terminate()
        proc.join(1.0)
        if proc.is_alive():
            proc.kill()
    proc.join(5.0)


class ConicMethod(Method):
    """A formulation solved by one of CVXPY's conic solvers."""

    certifying = True
    #: the largest relative gap an ``optimal`` row may promise (see :meth:`row_rtol`): the
    #: certificate of :mod:`kernelforms.certificate` at the recovered kernel must confirm the
    #: row's tolerance, else the row is ``optimal_inaccurate``
    #: (:func:`kernelforms.solvers.base.certify_status`)
    certify_rtol = 1e-2
    #: the tolerance's floor when the solver's own multipliers cover every constraint row and
    #: hinge term (:meth:`~kernelforms.formulations.base.Formulation.duals`): with them the
    #: certificate closes to about the solver's accuracy (a factored Schur NPKL-square row
    #: 2.7e-3 -> 3.8e-7, MVU 1.4e-5 -> 2.8e-8, a dual hinge row 5.0e-5 -> 1.8e-7)
    DUALS_FLOOR = 1e-5
    #: the floor otherwise (multipliers fitted at the recovered kernel: 1.6e-4 to 2.7e-3 on
    #: conformance rows whose objectives agree to 1e-6)
    FITTED_FLOOR = 1e-3

    @classmethod
    def row_rtol(cls, problem: Any, res: Result) -> float:
        """The relative gap a row must certify to stay ``optimal``:
        ``min(max(floor, eps), 1e-2)`` with ``eps`` the solver's own relative tolerance and the
        floor :data:`DUALS_FLOOR` when the solver's multipliers cover the problem's rows
        (:func:`kernelforms.certificate.duals_cover`), :data:`FITTED_FLOOR` otherwise."""
        from .. import certificate

        duals = res.solver_duals
        covered = isinstance(duals, dict) and certificate.duals_cover(problem, duals)
        floor = cls.DUALS_FLOOR if covered else cls.FITTED_FLOOR
        eps = res.solver_eps
        eps = float(eps) if eps is not None and math.isfinite(eps) else 0.0
        return min(max(floor, eps), cls.certify_rtol)

    def __init__(self, formulation: Any, solver: str | None = None) -> None:
        self.formulation = formulation
        self.requested_solver = solver
        self.name = formulation.name + (f":{solver.lower()}" if solver else "")
        self.formulation_name = formulation.title or type(formulation).__name__
        self.solver_name = solver.upper() if solver else "auto"
        if solver is not None:
            resolve_solver(solver)  # fail early on a solver that is not installed

    @property
    def capabilities(self) -> Any:  # type: ignore[override]
        return self.formulation.capabilities

    def applies_to(self, problem: Any) -> str | None:
        return self.formulation.applies_to(problem)

    def solver_for(self, problem: Any) -> str:
        """The CVXPY solver this method uses on ``problem`` (the requested one, or the
        automatic choice, made before building anything)."""
        if self.requested_solver is not None:
            return resolve_solver(self.requested_solver)
        return auto_solver(self.formulation, problem)

    def estimate_memory(self, problem: Any, solver: str | None = None) -> int | None:
        """Estimated peak bytes of the solve with ``solver`` (default: :meth:`solver_for`)."""
        return self.formulation.estimate_memory(problem, solver or self.solver_for(problem))

    def check_size(self, problem: Any, max_memory: float, solver: str | None = None) -> int | None:
        """Raise :class:`NotApplicable` when the solve would need more than ``max_memory``
        bytes; else return the estimate (None when unknown).

        Each solver has its own model (see docs/formulations.md): an interior-point
        solver's memory is its KKT factorisation, SCS's is the program's data plus its
        iterates.  The message says what would be built, how large it is, and which
        formulations (and hand-written solvers) fit instead.
        """
        solver = solver or self.solver_for(problem)
        est = self.formulation.estimate_memory(problem, solver)
        if est is None or est <= max_memory:
            return est
        est = self.formulation.precise_memory(problem, solver)
        if est is None or est <= max_memory:
            return est
        describe = getattr(self.formulation, "describe", None)
        what = describe(problem) if describe else f"the {self.formulation_name} program"
        fits = []
        for name in FORMULATIONS:
            # the first of: this solver, Clarabel, SCS that fits (one suggestion per formulation)
            for other_solver in dict.fromkeys([solver, "CLARABEL", "SCS"]):
                if name == self.formulation.name and other_solver == solver:
                    continue
                spec = f"{name}:{other_solver.lower()}"
                try:
                    other = ConicMethod(load(FORMULATIONS[name], name)(), other_solver.lower())
                    if other.applies_to(problem) is not None:
                        break
                    e = other.estimate_memory(problem)
                except Exception:  # noqa: BLE001 - a broken sibling must not hide this message
                    continue
                if e is None or e <= max_memory:
                    fits.append(f"'{spec}' (~{format_bytes(e)})" if e else f"'{spec}'")
                    break
        for name in SOLVERS:
            try:
                m = load(SOLVERS[name], name)(name)
                if m.applies_to(problem) is None:
                    opts = m.resolve_options({})
                    e = m.estimate_memory(problem, opts)
                    if e is None or e <= max_memory:
                        fits.append(f"'{name}' (hand-written)")
            except Exception:  # noqa: BLE001
                continue
        instead = ("; fits instead: " + ", ".join(dict.fromkeys(fits))) if fits else \
            "; no other conic formulation fits"
        model = ("the interior-point KKT factorisation" if solver not in FIRST_ORDER_SOLVERS
                 else "its data and iterates")
        exc = NotApplicable(
            f"method {self.name!r} would build {what} and solve it with {solver}, needing about "
            f"{format_bytes(est)} for {model}, above max_memory = {format_bytes(max_memory)} "
            f"(raise it with max_memory=<bytes>){instead}."
        )
        exc.memory = est  # type: ignore[attr-defined] - read by methods.plan
        raise exc

    # ------------------------------------------------------------------ run
    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None,
            **options: Any) -> Result:
        """Check, build, solve and evaluate.

        Before any work: the method must apply and fit ``max_memory`` bytes
        (:class:`NotApplicable`), ``seed`` / ``time_limit`` / ``max_memory`` and every solver
        option must be valid (:class:`OptionError` / :class:`SolverError`).  With
        ``time_limit`` the call returns within ``time_limit + 2`` seconds (see the module
        docstring).  A solver failure, including a crash of the solver's native code, is a
        status (``numerical_error`` / ``error``), never an exception.
        """
        t_start = time.perf_counter()
        in_place = bool(options.pop("_in_place", False))
        max_memory = parse_max_memory(self.name, options.pop("max_memory", None))
        self.check_applies(problem, max_memory)
        check_run_args(self.name, seed, time_limit)
        compile_opts = {k[len("compile_"):]: v for k, v in options.items() if k.startswith("compile_")}
        solver_opts = {k: v for k, v in options.items() if not k.startswith("compile_")}
        # bad arguments fail here, before CVXPY builds anything
        validate_conic_options(self.requested_solver, solver_opts, method=self.name)
        check_conic_option_values(self.requested_solver, solver_opts, method=self.name)
        solver = self.solver_for(problem)
        validate_conic_options(solver, solver_opts, method=self.name)
        check_conic_option_values(solver, solver_opts, method=self.name)
        estimate = self.check_size(problem, max_memory, solver)
        if time_limit is not None and not in_place and not _in_worker_process():
            res = self._run_isolated(problem, seed, float(time_limit), options, t_start, max_memory)
        else:
            deadline = None if time_limit is None else t_start + float(time_limit)
            res = self._run_here(problem, solver, compile_opts, solver_opts, deadline, t_start)
        if res.memory_estimate is None:
            res.memory_estimate = estimate
        if res.status is Status.OPTIMAL:
            # a solver's "optimal" is checked, not believed
            from .base import certify_status

            # (within the time limit and the second of grace a compare child gets)
            certify_status(problem, res, self.row_rtol(problem, res),
                           None if time_limit is None else t_start + float(time_limit) + 1.0)
        bound_duals(res)
        if res.status in (Status.MAX_ITER, Status.TIMEOUT, Status.OPTIMAL_INACCURATE,
                                           Status.NUMERICAL_ERROR, Status.ERROR):
            warnings.warn(f"{self.name}: {res.status.value}: {res.message}", ConvergenceWarning,
                          stacklevel=2)
        return res

    def _run_isolated(self, problem: Any, seed: int, time_limit: float, options: dict[str, Any],
                      t_start: float, max_memory: float) -> Result:
        """Run in a child process, killed :data:`KILL_GRACE` s after the deadline."""
        deadline = t_start + time_limit
        hard_stop = deadline + KILL_GRACE
        info = dict(method=self.name, formulation=self.formulation_name, solver=self.solver_name)
        ctx = _child_context(hard_stop)
        if ctx is None:
            return Result(status=Status.TIMEOUT, time=time.perf_counter() - t_start,
                          message=f"the time limit ({time_limit:g} s) ran out while the solver "
                                  "process was starting (importing CVXPY); nothing solved", **info)
        left = deadline - time.perf_counter()
        if left <= 0:
            return Result(status=Status.TIMEOUT, time=time.perf_counter() - t_start,
                          message=f"the time limit ({time_limit:g} s) ran out before the solve started",
                          **info)
        recv, send = ctx.Pipe(duplex=False)
        child_opts = {**options, "max_memory": max_memory}
        proc = ctx.Process(target=_child, args=(send, self, problem, seed, left, child_opts),
                           name=f"kernelforms-conic:{self.name}")
        with main_not_reimported(ctx):
            proc.start()
        send.close()
        res: Result | None = None
        try:
            while True:
                now = time.perf_counter()
                if now >= hard_stop:
                    break
                if recv.poll(min(0.2, hard_stop - now)):
                    try:
                        res = recv.recv()
                    except (EOFError, OSError):
                        res = None
                    break
                if not proc.is_alive() and not recv.poll(0):
                    break
        finally:
            _stop(proc)
            recv.close()
        elapsed = time.perf_counter() - t_start
        if res is not None:
            res.time = elapsed
            res.extras["isolated"] = True
            return res
        if proc.exitcode is not None and proc.exitcode != -15 and time.perf_counter() < hard_stop:
            return Result(status=Status.ERROR, time=elapsed,
                          message=f"the solver process died (exit code {proc.exitcode}; a negative "
                                  "code is the signal, e.g. -9 when the system ran out of memory)",
                          **info)
        return Result(status=Status.TIMEOUT, time=elapsed,
                      message=f"time limit {time_limit:g} s: the solver process was still building or "
                              f"solving after {elapsed:.1f} s and was stopped", **info)

    def _run_here(self, problem: Any, solver: str, compile_opts: dict[str, Any],
                  solver_opts: dict[str, Any], deadline: float | None, t_start: float) -> Result:
        t0 = time.perf_counter()
        import cvxpy as cp  # seconds on a first call: counted with the building

        _SOLVED_IN_PLACE.add(os.getpid())
        compiled = self.formulation.compile(problem, **compile_opts)
        t1 = time.perf_counter()
        res = Result(method=self.name, status=Status.ERROR, formulation=self.formulation_name,
                     solver=solver, compile_time=t1 - t0,
                     size=str(compiled.size), size_detail=compiled.size.to_dict(),
                     extras={"notes": list(compiled.notes)})
        opts = {**DEFAULT_OPTIONS.get(solver, {}), **solver_opts}
        tl_key = TIME_LIMIT_OPTION.get(solver)
        left = None
        if deadline is not None:
            left = deadline - t1
            if left <= 0:
                res.status = Status.TIMEOUT
                res.time = res.solve_time = time.perf_counter() - t_start
                res.message = (f"building the program (CVXPY) took {t1 - t0:.1f} s, past the time limit "
                               f"({deadline - t_start:g} s); nothing solved")
                return res
            if tl_key:
                given = opts.get(tl_key)
                opts[tl_key] = left if not given else min(float(given), left)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # CVXPY's own chatter; statuses carry the news
                compiled.program.solve(solver=solver, verbose=False, **opts)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except cp.error.SolverError as exc:
            res.status = Status.NUMERICAL_ERROR
            res.message = f"{solver} failed: {exc}"
        except (TypeError, ValueError, KeyError) as exc:
            raise SolverError(f"{solver} rejected the options {sorted(solver_opts)}: {exc}") from exc
        except BaseException as exc:  # noqa: BLE001 - e.g. a Rust panic in Clarabel (pyo3 PanicException)
            res.status = Status.ERROR
            res.message = (f"{solver} crashed ({type(exc).__name__}: {str(exc).strip()[:200]}); "
                           "the data may be badly scaled (e.g. huge gamma or weights)")
        t2 = time.perf_counter()
        res.solve_time = t2 - t1
        res.time = t2 - t0
        stats = compiled.program.solver_stats
        if stats is not None:
            res.iterations = stats.num_iters
            if stats.solve_time is not None:
                res.extras["solver_time"] = stats.solve_time
        if res.message == "":
            raw = compiled.program.status
            status = _status_map().get(raw, Status.ERROR)
            status = self._refine(status, solver, opts, stats, left, res.solve_time)
            primal_status = getattr(self.formulation, "primal_status", None)
            if primal_status is not None:  # a dual program's verdict, read for the primal
                status = primal_status(status)
            res.status = status
            res.message = f"{solver}: {raw}" + (f" ({status.value})" if status.value != raw else "")
            if status is Status.INFEASIBLE and not compiled.program.variables():
                # contradictory equalities found while compiling: a constant program that no
                # solver saw; the formulation's notes say why
                res.message = "infeasible, proved while compiling (no solver ran): " + "; ".join(compiled.notes)
            elif status is Status.INFEASIBLE and compiled.notes:
                res.message += "; " + "; ".join(compiled.notes)
            res.extras["solver_status"] = raw
            res.extras["solver_objective"] = compiled.program.value
        if res.status.has_solution:
            try:
                kernel = self.formulation.recover(compiled)
            except (KeyboardInterrupt, SystemExit, GeneratorExit):
                raise
            except (TypeError, ValueError) as exc:  # variable has no value
                if res.status not in (Status.MAX_ITER, Status.TIMEOUT):
                    res.status = Status.NUMERICAL_ERROR
                res.message += f"; recovery failed: {exc}"
            except BaseException as exc:  # noqa: BLE001 - a solver crash in the recovery solve
                res.status = Status.ERROR
                res.message += f"; recovery crashed: {type(exc).__name__}: {str(exc).strip()[:200]}"
            else:
                res.extras.update(self.formulation.recovered_extras(compiled))
                try:
                    duals = self.formulation.duals(compiled)
                except (TypeError, ValueError, KeyError, IndexError):
                    duals = None  # a dual value missing or misshapen: the fitted bound stands
                if duals is not None:
                    # the solver's own multipliers, for the certificate (arrays above 10,000
                    # values are written as their shape in a report's JSON)
                    res.solver_duals = duals
                res.solver_eps = solver_eps(solver, opts)
                if compiled.inverse.recovery_note:
                    res.message += "; " + compiled.inverse.recovery_note
                evaluate_into(res, problem, kernel)
        res.time = time.perf_counter() - t_start
        return res

    @staticmethod
    def _refine(status: Status, solver: str, opts: dict[str, Any], stats: Any, left: float | None,
                solve_time: float) -> Status:
        """Read why the solver stopped: a time limit is ``timeout``, an iteration limit
        ``max_iter`` (SCS reports both as "solved (inaccurate - reached ...)", which CVXPY
        maps to optimal_inaccurate; Clarabel's MaxTime and MaxIterations are both CVXPY's
        user_limit)."""
        extra = getattr(stats, "extra_stats", None)
        if solver == "SCS" and isinstance(extra, dict):
            why = str((extra.get("info") or {}).get("status", ""))
            if "time_limit" in why:
                return Status.TIMEOUT
            if "max_iters" in why and status in (Status.OPTIMAL_INACCURATE, Status.MAX_ITER):
                return Status.MAX_ITER
        if status is Status.MAX_ITER:
            iters = getattr(stats, "num_iters", None)
            if solver == "CLARABEL" and iters is not None:
                limit = opts.get("max_iter", CLARABEL_MAX_ITER)
                return Status.MAX_ITER if iters >= limit else Status.TIMEOUT
            if left is not None and solve_time >= 0.95 * left:
                return Status.TIMEOUT
        if status is Status.OPTIMAL_INACCURATE and left is not None and solve_time >= 0.95 * left:
            # stopped short of its tolerances with the time used up (Clarabel's AlmostSolved
            # at the limit on a loaded machine): the limit, not the solver, ended the solve
            return Status.TIMEOUT
        return status
