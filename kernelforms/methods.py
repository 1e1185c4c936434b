"""The registry of method names and :func:`solve`.

A method string is ``NAME`` or ``NAME:SOLVER`` (``"sdp"``, ``"sqlp:clarabel"``).
Conic formulations are listed in :data:`FORMULATIONS`, hand-written solvers in
:data:`SOLVERS` (both defined in :mod:`kernelforms.registry`, re-exported here), each as
``"module:Class"`` so that nothing heavy is imported until a method is used.  Adding a
method means writing its module and adding one line to the registry.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterable

from .errors import KernelformsError, NotApplicable, SolverNotFound
from .registry import FORMULATIONS, SOLVERS, method_names
from .registry import load as _load
from .result import Result

def get_method(spec: Any):
    """Turn ``"name"`` or ``"name:solver"`` (or a Method instance) into a Method.

    Raises
    ------
    SolverNotFound
        ``spec`` is not a non-empty string, names no known method (the message lists
        the known ones and the close matches), names a conic solver that is not
        installed (the message lists the installed ones), or a registered method's
        module cannot be imported.
    SolverError
        A conic solver suffix on a hand-written solver (``"admm:scs"``).
    """
    from .solvers.base import Method

    if isinstance(spec, Method):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise SolverNotFound(f"a method is named by a string such as 'sdp' or 'sqlp:scs'; got {spec!r}. "
                             f"Known methods: {', '.join(method_names())}.")
    name, colon, solver = spec.strip().lower().partition(":")
    name, solver = name.strip(), solver.strip()
    if colon and not (name and solver):
        what = "conic solver name after ':'" if name else "method name before ':'"
        fix = f"give one ('{name}:clarabel') or none ('{name}')" if name else "e.g. 'sdp:clarabel'"
        raise SolverNotFound(f"method {spec!r} has an empty {what}: {fix}.")
    if name in FORMULATIONS:
        from .solvers.conic import ConicMethod

        formulation = _load(FORMULATIONS[name], name)()
        try:
            return ConicMethod(formulation, solver or None)
        except SolverNotFound as exc:
            from .solvers.conic import installed_conic_solvers

            installed = [s.lower() for s in installed_conic_solvers()]
            close = difflib.get_close_matches(solver, installed, n=2)
            if not close:
                raise
            hint = " or ".join(repr(f"{name}:{c}") for c in close)
            raise SolverNotFound(f"{exc} Did you mean {hint}?") from exc
    if name in SOLVERS:
        return _load(SOLVERS[name], name)(spec)
    close = difflib.get_close_matches(name, method_names(), n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise SolverNotFound(
        f"unknown method {spec!r}.{hint} Known methods: {', '.join(method_names())} "
        "(conic ones take an optional ':solver', e.g. 'sdp:scs')."
    )


def applicable_methods(problem: Any) -> dict[str, str | None]:
    """Every known method and ``None`` (applies) or the reason it does not."""
    return {name: get_method(name).applies_to(problem) for name in method_names()}


@dataclass
class MethodPlan:
    """What :func:`compare` (and ``kernelforms methods``) will do with one method.

    ``applies``: the method solves this kind of problem; ``reason``: why it does not, or
    why the size guard refuses it (the message ``solve`` would raise); ``memory``: the
    estimated bytes of the solve (the chosen solver's model for conic methods, the working
    set for hand-written ones; None when unknown); ``will_run``: applies and passes the
    size guard; ``solver``: the conic solver the method would use (``"CLARABEL"``,
    ``"SCS"``; ``"kernelforms"`` for hand-written solvers, ``""`` when unknown).
    """

    name: str
    applies: bool
    reason: str | None = None
    memory: int | None = None
    will_run: bool = False
    solver: str = ""


def plan(problem: Any, methods: Iterable[Any] | None = None, *,
         max_memory: Any = None) -> list[MethodPlan]:
    """For each method (default: every known one), whether it applies to ``problem``, its
    estimated memory, and whether it will run under ``max_memory`` (bytes, or a string such
    as ``"8GB"``; default 4 GiB).

    The size guard is the one :meth:`Method.run` applies before any work (the same
    ``check_size`` / ``check_memory`` call, at the method's default options), so a plan row
    with ``will_run=False`` is exactly a row that ``compare`` reports as skipped, with the
    same message.  Nothing is built or solved.
    """
    import math

    from .solvers.base import IterativeSolver, parse_max_memory

    limit = parse_max_memory("plan", max_memory)
    specs = method_names() if methods is None else list(methods)
    out: list[MethodPlan] = []
    for spec in specs:
        name = spec if isinstance(spec, str) else getattr(spec, "name", repr(spec))
        try:
            method = get_method(spec)
            name = method.name
            from .model.checks import limit_memory

            with limit_memory(limit):
                reason = method.applies_to(problem)
        except NotApplicable as exc:
            if getattr(exc, "memory", None) is None:
                out.append(MethodPlan(name=str(name), applies=False, reason=f"{type(exc).__name__}: {exc}"))
            else:  # the size guard on the problem's own arrays (the message solve raises)
                out.append(MethodPlan(name=str(name), applies=True, memory=int(exc.memory),
                                      reason=f"method {str(name)!r} does not fit: {exc}",
                                      solver=getattr(method, "solver_name", "")))
            continue
        except KernelformsError as exc:
            out.append(MethodPlan(name=str(name), applies=False, reason=f"{type(exc).__name__}: {exc}"))
            continue
        except Exception as exc:  # noqa: BLE001 - one broken method must not hide the others
            out.append(MethodPlan(name=str(name), applies=False, reason=f"{type(exc).__name__}: {exc}"))
            continue
        if reason is not None:
            out.append(MethodPlan(name=name, applies=False, reason=reason,
                                  solver=getattr(method, "solver_name", "")))
            continue
        row = MethodPlan(name=name, applies=True)
        try:
            if isinstance(method, IterativeSolver):
                row.solver = method.solver_name
                opts = method.resolve_options({})
                row.memory = method.estimate_memory(problem, opts)
                guard = math.inf if "max_memory" in method.defaults else limit
                method.check_memory(problem, opts, guard)
            elif hasattr(method, "check_size"):
                row.solver = method.solver_for(problem)
                row.memory = method.estimate_memory(problem, row.solver)
                est = method.check_size(problem, limit, row.solver)
                if est is not None:
                    row.memory = est
            row.will_run = True
        except NotApplicable as exc:
            row.reason = str(exc)
            memory = getattr(exc, "memory", None)
            if memory is not None:
                row.memory = int(memory)
        except Exception as exc:  # noqa: BLE001 - reported, as compare would
            row.reason = f"{type(exc).__name__}: {exc}"
        out.append(row)
    return out


def solve(problem: Any, method: Any = "sdp", *, seed: int = 0, time_limit: float | None = None,
          **options: Any) -> Result:
    """Solve ``problem`` with one method.

    Parameters
    ----------
    problem : Problem
        One of the problems in :mod:`kernelforms.problems`.
    method : str or Method, default "sdp"
        ``"sdp"``, ``"sdp:scs"``, ``"admm"``, ... (see :func:`method_names`).
    seed : int
        Seed of every random choice the method makes.
    time_limit : float, optional
        Seconds; passed to the solver.
    **options
        Method options (a solver's own settings for conic methods; options prefixed
        ``compile_`` go to the formulation).  Unknown options are an error.

    Returns
    -------
    Result
        Its ``objective`` is the problem's own evaluation of the returned kernel.

    Raises
    ------
    NotApplicable
        The method cannot solve this problem (the message says why).
    SolverNotFound
        Unknown method name or conic solver not installed.
    """
    return get_method(method).run(problem, seed=seed, time_limit=time_limit, **options)
