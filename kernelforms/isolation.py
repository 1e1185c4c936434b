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

from .errors import KernelformsError, NotApplicable
from .processes import FORKSERVER_PRELOAD  # noqa: F401 - re-exported
from .processes import fork_is_safe, main_not_reimported, mp_context, warm_up
from .result import Result, Status
from .solvers.base import (CERT_KEYS, PASS_THROUGH, attach_certificate,  # noqa: F401 - re-exported
                           certify_status)
from .solvers.base import describe_exception as _describe

#: seconds a child process may run past ``time_limit`` (to return a solver's own
#: time-limited result, then its certificate) before it is killed
KILL_GRACE = 1.0


def _name(spec: Any) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "name", repr(spec))


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
# attach_certificate and certify_status live in kernelforms.solvers.base (the run calls them;
# importing this module there would close an import cycle through the registry dispatch)


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
    from .processes import pool_mode

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

