"""Running one method of :func:`~kernelforms.compare` safely: in this process (every failure
a row) or in a child process killed after its time limit, with the certificate computed
inside the same deadline."""

from __future__ import annotations

import os
import time
import traceback
import warnings
from contextlib import nullcontext
from typing import Any, Callable

import numpy as np

from .errors import KernelformsError, NotApplicable
from .processes import FORKSERVER_PRELOAD  # noqa: F401 - re-exported
from .processes import fork_is_safe, main_not_reimported, mp_context, warm_up
from .result import Result, Status

#: seconds a child process may run past ``time_limit`` (to return a solver's own
#: time-limited result, then its certificate) before it is killed
KILL_GRACE = 1.0
#: the fields of a row a certificate sets
CERT_KEYS = ("certified_gap", "lower_bound", "upper_bound", "certificate_time", "certificate_note")
#: exceptions that are never turned into a row
PASS_THROUGH = (KeyboardInterrupt, SystemExit, GeneratorExit)


def _name(spec: Any) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "name", repr(spec))


def _describe(exc: BaseException) -> str:
    kind = type(exc).__name__
    if not isinstance(exc, Exception):  # e.g. pyo3_runtime.PanicException from a Rust solver
        kind = f"{type(exc).__module__}.{kind}" if type(exc).__module__ != "builtins" else kind
    return f"{kind}: {exc}"


# ---------------------------------------------------------------------- in this process
def run_one(problem: Any, spec: Any, *, seed: Any, time_limit: float | None,
            options: dict[str, Any]) -> Result:
    """Run one method in this process, turning every failure into a row (never an exception).

    Anything raised, including ``BaseException`` subclasses such as the ``PanicException``
    a Rust solver (Clarabel) raises on a panic, becomes an ``error`` row; only
    ``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` pass through.
    """
    from .methods import get_method

    name = _name(spec)
    t0 = time.perf_counter()
    try:
        method = get_method(spec)
        name = method.name
        reason = method.applies_to(problem)
        if reason is not None:
            return Result(method=name, status=Status.SKIPPED, message=reason,
                          formulation=method.formulation_name, solver=method.solver_name)
        res = method.run(problem, seed=seed, time_limit=time_limit, **options)
        if res.certifying is None:
            res.certifying = bool(method.certifying)
        return res
    except NotApplicable as exc:
        return Result(method=name, status=Status.SKIPPED, message=str(exc))
    except KernelformsError as exc:
        return Result(method=name, status=Status.ERROR, message=f"{type(exc).__name__}: {exc}",
                      time=time.perf_counter() - t0)
    except MemoryError:
        return Result(method=name, status=Status.ERROR, message="out of memory",
                      time=time.perf_counter() - t0)
    except PASS_THROUGH:
        raise
    except BaseException as exc:  # noqa: BLE001 - a comparison must survive any one method
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
        return Result(method=name, status=Status.ERROR, message=_describe(exc) + where,
                      time=time.perf_counter() - t0)


def prepare(problem: Any, spec: Any) -> Result | None:
    """A finished row for methods that cannot start (unknown, or not applicable), else None."""
    from .methods import get_method

    try:
        method = get_method(spec)
        reason = method.applies_to(problem)
    except NotApplicable as exc:
        return Result(method=_name(spec), status=Status.SKIPPED, message=str(exc))
    except PASS_THROUGH:
        raise
    except BaseException as exc:  # noqa: BLE001
        return Result(method=_name(spec), status=Status.ERROR, message=_describe(exc))
    if reason is not None:
        return Result(method=method.name, status=Status.SKIPPED, message=reason,
                      formulation=method.formulation_name, solver=method.solver_name)
    return None


# ---------------------------------------------------------------------- certificates
def attach_certificate(problem: Any, res: Result, deadline: float | None = None) -> None:
    """Set ``res.certified_gap`` and ``res.lower_bound`` (``res.upper_bound`` for a
    maximisation) when a certificate applies.

    The bound is the Lagrangian certificate of :mod:`kernelforms.certificate`, or the method's
    own bound when it has one and it is tighter (bcd's duality gap, the Bregman solvers' dual
    point, smo's recovery bound, lowrank's multipliers): every such bound is valid, so the
    tightest is reported, and ``certificate_note`` says when it is the method's own.
    With ``deadline`` (a ``time.perf_counter()`` value) already passed, the certificate is
    not computed and ``certificate_note`` says so.
    """
    from . import certificate

    if res.factor is None or not res.ok or certificate.applies(problem) is not None:
        return
    if deadline is not None and time.perf_counter() >= deadline:
        res.certificate_note = "not computed: the time limit ran out after the solve"
        return
    is_max = problem.sense == "max"
    own = res.upper_bound if is_max else res.lower_bound
    own = float(own) if own is not None and np.isfinite(own) else None
    t0 = time.perf_counter()
    try:
        cert = certificate.certify(problem, res.kernel)
    except KernelformsError as exc:
        res.certificate_note = str(exc)
        cert = None
    except PASS_THROUGH:
        raise
    except BaseException as exc:  # noqa: BLE001 - a failed certificate must not lose the row
        res.certificate_note = _describe(exc)
        cert = None
    lam = res.extras.get("edge_multipliers")
    if cert is not None and lam is not None and hasattr(lam, "shape"):
        # the solver's own constraint multipliers (lowrank on MVU), kept when tighter; they
        # may not fit this declaration (NotApplicable), which leaves the fitted bound standing
        try:
            mine = certificate.certify(problem, res.kernel, multipliers=lam)
        except (KernelformsError, np.linalg.LinAlgError):
            mine = None
        if mine is not None and mine.relative_gap < cert.relative_gap:
            cert = mine
    bound = None if cert is None else (cert.upper_bound if is_max else cert.lower_bound)
    if own is not None and (bound is None or (own < bound if is_max else own > bound)):
        what = (f"the Lagrangian bound is {bound:.10g}" if bound is not None
                else f"no Lagrangian bound: {res.certificate_note}")
        res.certificate_note = f"the method's own bound {own:.10g} is tighter ({what})"
        bound = own
    if bound is None:
        return
    if is_max:
        res.upper_bound = bound
        res.certified_gap = (bound - res.objective) / max(abs(res.objective), 1e-12)
    else:
        res.lower_bound = bound
        res.certified_gap = (res.objective - bound) / max(abs(res.objective), 1e-12)
    res.certificate_time = time.perf_counter() - t0


# ---------------------------------------------------------------------- in a child process
def _child_main(conn: Any, problem: Any, method: Any, seed: Any, time_limit: float | None,
                options: dict[str, Any], certify: bool = False) -> None:
    sent = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run_one(problem, method, seed=seed, time_limit=time_limit, options=options)
            conn.send(("result", res))
            sent = True
            if certify:
                attach_certificate(problem, res)
                conn.send(("cert", {k: getattr(res, k) for k in CERT_KEYS if getattr(res, k) is not None}))
    except BaseException as exc:  # noqa: BLE001 - report anything (even pickling failures)
        try:
            if not sent:
                conn.send(("result", Result(method=_name(method), status=Status.ERROR,
                                            message=f"{_describe(exc)} (in the child process)")))
            else:
                conn.send(("cert", {"certificate_note": f"{_describe(exc)} (in the child process)"}))
        except BaseException:  # noqa: BLE001
            pass
    finally:
        conn.close()


def can_isolate() -> bool:
    """False inside a daemonic process (which may not start children)."""
    import multiprocessing as mp

    return not mp.current_process().daemon


def run_isolated(problem: Any, method: Any, *, seed: Any, time_limit: float,
                 options: dict[str, Any], grace: float = KILL_GRACE,
                 tick: Callable[..., None] | None = None, certify: bool = False) -> Result:
    """Run one method in a child process and kill it ``grace`` seconds after ``time_limit``.

    The method is also told ``time_limit`` so that a well-behaved solver stops by itself
    and returns its partial result; the kill is for the others.  The child sends back the
    :class:`Result` (a picklable dataclass) and then, with ``certify``, the certificate,
    computed in the child within the same deadline: when the deadline passes first the
    row is kept and ``certificate_note`` says that the certificate was not computed.
    ``tick(elapsed, stage)`` is called about every 0.2 s (``stage``: "running" or
    "certifying").
    """
    import multiprocessing as mp

    in_main = any(type(x).__module__ == "__main__" for x in (problem, method))
    # objects defined in __main__: a plain fork when it is safe (one thread here); else the
    # fork server's child re-imports a guarded script (or `python -m` module) to rebuild them;
    # fork only as the last resort (interactive objects, a script without a guard)
    from .grid import pool_mode

    reimport = in_main and not fork_is_safe() and pool_mode((problem, method))[0] == "processes-main"
    ctx = (mp.get_context("fork") if in_main and not reimport and "fork" in mp.get_all_start_methods()
           else mp_context())
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(send, problem, method, seed, time_limit, options, certify),
                       name=f"kernelforms:{_name(method)}")
    if ctx.get_start_method() == "forkserver":
        warm_up(ctx)
    t0 = time.perf_counter()
    try:
        with main_not_reimported(ctx) if not reimport else nullcontext():
            proc.start()
    except Exception as exc:  # noqa: BLE001 - e.g. a method holding a lambda cannot be pickled
        send.close()
        recv.close()
        return Result(method=_name(method), status=Status.ERROR,
                      formulation=getattr(method, "formulation_name", ""),
                      solver=getattr(method, "solver_name", ""),
                      message=f"cannot start the child process for the time limit ({_describe(exc)}); "
                              "define the method and problem in an importable module, or run without "
                              "time_limit")
    send.close()
    deadline = t0 + float(time_limit) + grace
    res: Result | None = None
    cert: dict[str, Any] | None = None
    try:
        while True:
            now = time.perf_counter()
            if now >= deadline:
                break
            if recv.poll(min(0.2, deadline - now)):
                try:
                    kind, payload = recv.recv()
                except (EOFError, OSError, ValueError, TypeError):
                    break
                if kind == "result":
                    res = payload
                    if not certify:
                        break
                else:
                    cert = payload
                    break
                continue
            if tick is not None:
                tick(time.perf_counter() - t0, "running" if res is None else "certifying")
            if not proc.is_alive() and not recv.poll(0):
                break
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join(1.0)
            if proc.is_alive():
                proc.kill()
        proc.join()
        recv.close()
    elapsed = time.perf_counter() - t0
    if res is not None:
        if cert is not None:
            for key, value in cert.items():
                setattr(res, key, value)
        elif certify and res.ok and res.factor is not None:
            if elapsed >= float(time_limit) + grace:
                res.certificate_note = (f"not computed: the time limit ({float(time_limit):g} s) "
                                                  "ran out after the solve")
            else:
                res.certificate_note = (f"not computed: the child process died "
                                                  f"(exit code {proc.exitcode})")
        return res
    name = _name(method)
    info = dict(formulation=getattr(method, "formulation_name", ""),
                solver=getattr(method, "solver_name", ""), time=elapsed)
    if proc.exitcode is not None and elapsed < float(time_limit) + grace:
        return Result(method=name, status=Status.ERROR,
                      message=f"the child process died (exit code {proc.exitcode})", **info)
    return Result(method=name, status=Status.TIMEOUT,
                  message=f"stopped: still running {elapsed:.1f} s after start "
                          f"(time limit {float(time_limit):g} s); process killed", **info)

