"""The registry of method names and :func:`solve`.

A method string is ``NAME`` or ``NAME:SOLVER`` (``"sdp"``, ``"sqlp:clarabel"``).
Conic formulations are listed in :data:`FORMULATIONS`, hand-written solvers in
:data:`SOLVERS`, each as ``"module:Class"`` so that nothing heavy is imported until
a method is used.  Adding a method means writing its module and adding one line here.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from .errors import SolverNotFound
from .result import Result

#: conic formulations: method name -> "module:Class" (a Formulation)
FORMULATIONS: dict[str, str] = {
    "sdp": "kernelforms.formulations.full_sdp:FullSDP",
    "scsdp": "kernelforms.formulations.schur_sdp:SchurComplementSDP",
    "scsdp_factor": "kernelforms.formulations.schur_sdp:FactoredSchurComplementSDP",
    "sqlp": "kernelforms.formulations.sqlp:SQLP",
    "dual": "kernelforms.formulations.dual_sdp:DualSDP",
}

#: hand-written solvers: method name -> "module:Class" (an IterativeSolver)
SOLVERS: dict[str, str] = {
    "lowrank": "kernelforms.solvers.lowrank:LowRankBM",
    "smo": "kernelforms.solvers.smo:HoiSMO",
    "simplenpkl": "kernelforms.solvers.simplenpkl:SimpleNPKL",
    "burg": "kernelforms.solvers.burg:BurgProjection",
    "vonneumann": "kernelforms.solvers.von_neumann:VonNeumannProjection",
    "admm": "kernelforms.solvers.admm:KLADMM",
    "bcd": "kernelforms.solvers.bcd:BCDKL",
}


def method_names() -> list[str]:
    """Every method name this installation knows (without solver suffixes)."""
    return list(FORMULATIONS) + list(SOLVERS)


def _load(path: str, name: str = "") -> Any:
    mod, _, cls = path.partition(":")
    try:
        return getattr(importlib.import_module(mod), cls)
    except (ImportError, AttributeError) as exc:
        # a registered method whose module is missing, broken or lacks the class
        raise SolverNotFound(
            f"method {name!r} is registered as {path!r} but cannot be loaded: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


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
    name, _, solver = spec.strip().lower().partition(":")
    name, solver = name.strip(), solver.strip()
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
