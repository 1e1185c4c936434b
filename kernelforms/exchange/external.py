"""An external solver's answer as a method: :class:`ExternalSolution`.

``ExternalSolution("p.sol", method="sdp")`` is a :class:`~kernelforms.solvers.base.Method`
whose ``run(problem)`` compiles the problem with the formulation (as :func:`export` did),
reads the solution file, checks it against the program (primal and dual feasibility, the
duality gap), puts ``x`` back into the program's variables (CVXPY's own inverse
reductions), recovers the kernel with the formulation's ``recover`` and evaluates the
problem's own objective on it.  So it is a row of :func:`kernelforms.compare` like any
other method.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OptionError, ProblemError, SolverError
from ..result import Result, Status
from ..solvers.base import Method, check_run_args, evaluate_into

#: solution file formats and the suffixes that name them
SOLUTION_FORMATS = {"csdp": (".sol",), "sdpa": (".out", ".result"), "vector": (".x", ".txt")}
#: an imported solution is "optimal" when its primal and dual infeasibility and its relative
#: duality gap (see :func:`kernelforms.exchange.sdpa.check_solution`) are all below this
OPTIMAL_TOL = 1e-6


def solution_format(path: str | Path, fmt: str | None) -> str:
    """The solution format: ``fmt`` checked, or the one the suffix of ``path`` names."""
    if fmt is not None:
        if not isinstance(fmt, str) or fmt.lower() not in SOLUTION_FORMATS:
            raise OptionError(f"format={fmt!r} is not a solution format; use one of "
                              f"{', '.join(map(repr, SOLUTION_FORMATS))}")
        return fmt.lower()
    suffix = Path(path).suffix.lower()
    for name, suffixes in SOLUTION_FORMATS.items():
        if suffix in suffixes:
            return name
    raise OptionError(
        f"cannot tell the format of the solution file {str(path)!r} from its suffix; pass "
        "format='csdp' (CSDP's .sol: x, then 'matno block i j value' lines), 'sdpa' (SDPA's "
        "result file: xVec, xMat, yMat) or 'vector' (the values of x only, in the variable order "
        "of the exported file)")


class ExternalSolution(Method):
    """A solution file written by an external solver, for the program :func:`export` wrote.

    Parameters
    ----------
    path : str or Path
        The solution file.
    method : str, default "sdp"
        The conic formulation the file was exported from (``"sdp"``, ``"scsdp"``, ...; a
        solver suffix is ignored).
    format : {"csdp", "sdpa", "vector"}, optional
        CSDP's solution file (``.sol``), SDPA's result file (``.out`` / ``.result``), or
        the values of ``x`` alone (``.x`` / ``.txt``, e.g. from MOSEK on the CBF file);
        default: from the suffix.
    label : str, optional
        The solver's name in the row, e.g. ``"csdp"``: the row is ``f"{method}:{label}"``
        (default ``f"{method}:{format}-file"``).
    program : str or Path, optional
        The exported file (``.dat-s`` or ``.cbf``) the solution belongs to: its recorded
        method and problem fingerprint must match, checked before any work.

    The row's status is ``optimal`` when the file holds a dual (CSDP, SDPA) and the
    primal and dual infeasibility and the relative duality gap of the SDPA program are all
    below :data:`OPTIMAL_TOL`; ``optimal_inaccurate`` otherwise (the numbers are in the
    message and in ``extras``).  A ``vector`` file has no dual: its status is
    ``optimal_inaccurate`` and the certificate of :func:`~kernelforms.compare` is the
    check of its optimality.
    """

    def __init__(self, path: str | Path, method: str = "sdp", format: str | None = None,
                 label: str | None = None, program: str | Path | None = None) -> None:
        from ..registry import FORMULATIONS, SOLVERS, load

        if not isinstance(path, (str, Path)) or not str(path):
            raise OptionError(f"ExternalSolution needs the path of a solution file; got {path!r}")
        self.path = Path(path)
        self.format = solution_format(self.path, format)
        if not isinstance(method, str):
            raise OptionError(f"method must be a conic formulation name such as 'sdp'; got {method!r}")
        base = method.strip().lower().partition(":")[0]
        if base not in FORMULATIONS:
            kind = "a hand-written solver" if base in SOLVERS else "not a conic formulation"
            raise OptionError(f"method={method!r} is {kind}; a solution file belongs to an exported "
                              f"conic program: one of {', '.join(FORMULATIONS)}")
        self.method = base
        self.formulation = load(FORMULATIONS[base], base)()
        self.formulation_name = self.formulation.title or type(self.formulation).__name__
        self.label = label if label is not None else f"{self.format}-file"
        self.name = f"{base}:{self.label}"
        self.solver_name = self.label
        self.program = None if program is None else Path(program)

    def applies_to(self, problem: Any) -> str | None:
        return self.formulation.applies_to(problem)

    def __repr__(self) -> str:
        return f"<ExternalSolution {self.name!r} from {str(self.path)!r}>"

    def _check_program(self, problem: Any) -> None:
        from .cbf import META_PREFIX as CBF_META
        from .sdpa import META_PREFIX as SDPA_META
        import json

        try:
            with open(self.program, encoding="ascii", errors="replace") as fh:
                head = [next(fh, "") for _ in range(200)]
        except OSError as exc:
            raise ProblemError(f"cannot read program={str(self.program)!r}: {exc}") from exc
        meta = None
        for line in head:
            s = line.strip()
            for prefix in (SDPA_META, CBF_META):
                if s.startswith(prefix):
                    meta = json.loads(s[len(prefix):])
        if meta is None:
            raise ProblemError(f"program={str(self.program)!r} has no kernelforms metadata line; "
                               "was it written by kernelforms.exchange.export?")
        if meta.get("method") != self.method:
            raise ProblemError(f"program={str(self.program)!r} was exported from method "
                               f"{meta.get('method')!r}, not {self.method!r}")
        if meta.get("fingerprint") != problem.fingerprint():
            raise ProblemError(f"program={str(self.program)!r} was exported from another problem "
                               f"(fingerprint {meta.get('fingerprint')}, this one "
                               f"{problem.fingerprint()})")

    def run(self, problem: Any, *, seed: Any = 0, time_limit: float | None = None,
            **options: Any) -> Result:
        """Read, check and evaluate the solution file on ``problem`` (see the class docstring).

        Raises :class:`NotApplicable` when the formulation does not apply,
        :class:`SolverError` for options (there are none), :class:`ProblemError` when
        ``program`` belongs to another problem, :class:`~kernelforms.errors.DataError`
        for a malformed or mismatched solution file.
        """
        t0 = time.perf_counter()
        options.pop("_in_place", None)
        options.pop("max_memory", None)
        if options:
            raise SolverError(f"{self.name} reads a solution file and takes no options; got "
                              f"{sorted(options)}")
        self.check_applies(problem)
        check_run_args(self.name, seed, time_limit)
        if self.program is not None:
            self._check_program(problem)
        if not self.path.is_file():
            from ..errors import DataError

            raise DataError(f"the solution file {str(self.path)!r} does not exist")
        from .standard import compile_form
        from .sdpa import check_solution, from_conic, read_csdp_solution, read_sdpa_result

        compiled, form = compile_form(problem, self.method)
        t1 = time.perf_counter()
        res = Result(method=self.name, status=Status.OPTIMAL_INACCURATE,
                     formulation=self.formulation_name, solver=self.label, compile_time=t1 - t0,
                     size=str(compiled.size))
        checks: dict[str, float] = {}
        if self.format == "vector":
            x = _read_vector(self.path, form.n)
            if not form.exp:
                from .sdpa import SDPASolution

                checks = check_solution(from_conic(form), SDPASolution(x=x))
        else:
            prog = from_conic(form)
            reader = read_csdp_solution if self.format == "csdp" else read_sdpa_result
            sol = reader(prog, self.path)
            x = sol.x
            checks = check_solution(prog, sol)
        file_obj = form.objective(x)
        res.extras.update({"file": str(self.path), "file_format": self.format,
                           "file_objective": file_obj, **{k: v for k, v in checks.items()}})
        pinf, dinf, gap = (checks.get(k, math.nan) for k in ("primal_infeas", "dual_infeas", "gap"))
        optimal = all(v <= OPTIMAL_TOL for v in (pinf, dinf, gap))  # False when any is NaN
        res.status = Status.OPTIMAL if optimal else Status.OPTIMAL_INACCURATE
        res.certifying = optimal
        nums = ", ".join(f"{k.replace('_', ' ')} {v:.1e}" for k, v in
                         (("primal_infeas", pinf), ("dual_infeas", dinf), ("gap", gap))
                         if not math.isnan(v))
        res.message = (f"read {self.path.name} ({self.format}); program objective {file_obj:.10g}"
                       + (f"; {nums}" if nums else "")
                       + ("" if optimal else
                          ("; no dual in the file: optimality not checked" if math.isnan(dinf)
                           else f"; above the tolerance {OPTIMAL_TOL:g} for 'optimal'")))
        form.assign(x)
        kernel = self.formulation.recover(compiled)
        res.extras.update({k: v for k, v in self.formulation.recovered_extras(compiled).items()
                           if v is not None})
        evaluate_into(res, problem, kernel)
        res.solve_time = time.perf_counter() - t1
        res.time = time.perf_counter() - t0
        return res


def _read_vector(path: Path, n: int) -> np.ndarray:
    from ..errors import DataError

    try:
        x = np.array([float(t) for t in path.read_text(encoding="ascii", errors="replace").split()])
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a vector of numbers: {exc}") from exc
    if x.size != n:
        raise DataError(f"{path}: {x.size} values; the program has {n} variables (is it the "
                        "solution of this program?)")
    return x
