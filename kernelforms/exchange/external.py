"""An external solver's answer as a method: :class:`ExternalSolution`.

``ExternalSolution("p.sol", method="sdp")`` is a :class:`~kernelforms.solvers.base.Method`
whose ``run(problem)`` compiles the problem with the formulation (as :func:`export` did),
reads the solution file, checks what the solver said against the program (primal and dual
feasibility, the duality gap, infeasibility certificates: :func:`~.sdpa.judge`), puts ``x``
(and the dual) back into the program's variables and constraints (CVXPY's own inverse
reductions), recovers the kernel with the formulation's ``recover`` and evaluates the
problem's own objective on it.  So it is a row of :func:`kernelforms.compare` like any
other method.
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OptionError, ProblemError, SolverError
from ..result import Result, Status
from ..solvers.base import Method, check_run_args, evaluate_into

from .sdpa import CSDP_CODES, OPTIMAL_TOL, SDPA_PHASES  # noqa: F401 - OPTIMAL_TOL re-exported

#: solution file formats and the suffixes that name them
SOLUTION_FORMATS = {"csdp": (".sol",), "sdpa": (".out", ".result"), "vector": (".x", ".txt")}


class PrecisionWarning(UserWarning):
    """An imported solution file was printed with too few digits to be checked."""


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

    returncode : int, optional
        CSDP's exit code (CSDP does not write it into the solution file): what CSDP said,
        checked like SDPA's ``phase.value``, which is read from the result file.

    The row's status is what the solver said, checked against the SDPA program rebuilt
    from the problem (:func:`kernelforms.exchange.sdpa.judge`): ``optimal`` only when
    the primal and dual infeasibility and the relative duality gap are all within
    :data:`OPTIMAL_TOL` (otherwise ``optimal_inaccurate``, the numbers in the message and
    in ``extras``); ``infeasible`` / ``unbounded`` only when the file holds a certificate
    that checks; an iteration limit or a failure as such.  Without a status (CSDP's file,
    no ``returncode``) the checks decide.  A ``vector`` file has no dual: its status is
    ``optimal_inaccurate`` and the certificate of :func:`~kernelforms.compare` is the
    check of its optimality.
    """

    def __init__(self, path: str | Path, method: str = "sdp", format: str | None = None,
                 label: str | None = None, program: str | Path | None = None,
                 returncode: int | None = None) -> None:
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
        if program is not None and (not isinstance(program, (str, Path)) or not str(program)):
            raise OptionError(f"program= must be the path of the exported .dat-s / .cbf file; got {program!r}")
        self.program = None if program is None else Path(program)
        if returncode is not None and (isinstance(returncode, bool) or not isinstance(returncode, (int, np.integer))):
            raise OptionError(f"The 'returncode' parameter of ExternalSolution must be CSDP's exit code "
                              f"(an int). Got {returncode!r} instead.")
        if returncode is not None and self.format != "csdp":
            raise OptionError(f"returncode= is CSDP's exit code; this is a {self.format!r} file"
                              + (" (SDPA's phase.value is read from the file)" if self.format == "sdpa" else ""))
        self.returncode = None if returncode is None else int(returncode)

    def applies_to(self, problem: Any) -> str | None:
        return self.formulation.applies_to(problem)

    def __repr__(self) -> str:
        return f"<ExternalSolution {self.name!r} from {str(self.path)!r}>"

    def _check_program(self, problem: Any) -> None:
        from ..errors import DataError
        from .cbf import META_PREFIX as CBF_META
        from .sdpa import META_PREFIX as SDPA_META, read_metadata

        where = f"program={str(self.program)!r}"
        if self.program.is_dir():
            raise ProblemError(f"{where} is a directory; give the exported .dat-s / .cbf file")
        try:
            with open(self.program, encoding="ascii", errors="replace") as fh:
                head = [next(fh, "")[:100_000] for _ in range(200)]
        except OSError as exc:
            raise ProblemError(f"cannot read {where}: {exc.strerror or exc}") from exc
        meta = None
        for no, line in enumerate(head, 1):
            s = line.strip()
            for prefix in (SDPA_META, CBF_META):
                if s.startswith(prefix):
                    try:
                        meta = read_metadata(s, prefix, f"{self.program}:{no}")
                    except DataError as exc:
                        raise ProblemError(f"{where}: bad metadata line: {exc}") from exc
        if meta is None:
            raise ProblemError(f"{where} has no kernelforms metadata line; "
                               "was it written by kernelforms.exchange.export?")
        if meta.get("method") != self.method:
            raise ProblemError(f"{where} was exported from method "
                               f"{meta.get('method')!r}, not {self.method!r}")
        if meta.get("fingerprint") != problem.fingerprint():
            raise ProblemError(f"{where} was exported from another problem "
                               f"(fingerprint {meta.get('fingerprint')!r}, this one "
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
        from ..errors import DataError

        if self.path.is_dir():
            raise DataError(f"the solution file {str(self.path)!r} is a directory, not a file")
        if not self.path.is_file():
            raise DataError(f"the solution file {str(self.path)!r} does not exist")
        from .standard import compile_form
        from .sdpa import SDPASolution, Verdict, _finite, check_solution, conic_dual, from_conic, judge
        from .sdpa import read_csdp_solution, read_sdpa_result

        compiled, form = compile_form(problem, self.method)
        t1 = time.perf_counter()
        res = Result(method=self.name, status=Status.OPTIMAL_INACCURATE,
                     formulation=self.formulation_name, solver=self.label, compile_time=t1 - t0,
                     size=str(compiled.size))
        digits = None
        if self.format == "vector":
            x = _read_vector(self.path, form.n)
            if not np.all(np.isfinite(x)):
                verdict = Verdict("numerical_error", "the file holds NaN or inf values")
            elif form.exp:
                verdict = Verdict("optimal_inaccurate", "no dual in the file: optimality not checked")
            else:
                checks = check_solution(from_conic(form), SDPASolution(x=x))
                verdict = Verdict("optimal_inaccurate",
                                  f"primal infeas {checks['primal_infeas']:.1e}; no dual in the file: "
                                  "optimality not checked", checks)
        else:
            prog = from_conic(form)
            if self.format == "csdp":
                sol = read_csdp_solution(prog, self.path)
                claim = None
                if self.returncode is not None:
                    claim = CSDP_CODES.get(self.returncode,
                                           ("numerical_error", f"failure (return code {self.returncode})"))
                    claim = (claim[0], f"{claim[1]} (return code {self.returncode})")
                source = "CSDP" if self.label == "csdp-file" else self.label
            else:
                sol = read_sdpa_result(prog, self.path)
                claim = None
                if sol.status:
                    claim = (SDPA_PHASES[sol.status][0], f"{SDPA_PHASES[sol.status][1]} ({sol.status})")
                source = "SDPA" if self.label == "sdpa-file" else self.label
            digits = sol.digits
            x = sol.x
            verdict = judge(prog, sol, claim, source=source)
        status = Status(verdict.status)
        primal_status = getattr(self.formulation, "primal_status", None)
        if primal_status is not None:  # a dual program's verdict, read for the primal
            status = primal_status(status)
        res.status = status
        res.certifying = status is Status.OPTIMAL
        finite = bool(np.all(np.isfinite(x)))
        file_obj = form.objective(x) if finite else math.nan
        res.extras.update({"file": str(self.path), "file_format": self.format,
                           "file_objective": file_obj,
                           **{k: v for k, v in verdict.checks.items()}})
        if digits is not None:
            res.extras["file_digits"] = digits
        res.message = (f"read {self.path.name} ({self.format}); "
                       + (f"program objective {file_obj:.10g}; " if status.has_solution else "")
                       + verdict.message)
        if digits is not None and digits < 7:
            warnings.warn(f"{self.path}: the solution is printed with {digits} significant digits; its "
                          "objective and checks are only that accurate (SDPA: print with '%+.17e', see "
                          "docs/export.md)", PrecisionWarning, stacklevel=2)
        if status.has_solution:
            # the multipliers too, when the file has a (finite) dual: the formulation's
            # recovery reads them as after an in-process solve (the dual's null space basis)
            y = None
            if self.format != "vector" and sol.Y is not None and _finite(sol):
                y = conic_dual(prog, sol.Y)
            form.assign(x, y)
            try:
                kernel = self.formulation.recover(compiled)
            except (TypeError, ValueError, np.linalg.LinAlgError) as exc:
                res.status = Status.NUMERICAL_ERROR
                res.message += f"; recovery failed: {exc}"
            else:
                res.extras.update({k: v for k, v in self.formulation.recovered_extras(compiled).items()
                                   if v is not None})
                if compiled.inverse.recovery_note:
                    res.message += "; " + compiled.inverse.recovery_note
                if y is not None:
                    # the file's dual on the declaration's rows (as after an in-process solve)
                    try:
                        duals = self.formulation.duals(compiled)
                    except (TypeError, ValueError, KeyError, IndexError):
                        duals = None
                    if duals is not None:
                        res.solver_duals = duals
                res.solver_eps = OPTIMAL_TOL
                evaluate_into(res, problem, kernel)
        res.solve_time = time.perf_counter() - t1
        res.time = time.perf_counter() - t0
        if res.status is Status.OPTIMAL:
            # the file's "optimal" is checked at the recovered kernel too, held to the
            # tolerance of a conic row (ConicMethod.row_rtol: 1e-5 with the file's dual on
            # every row, else 1e-3)
            from ..solvers.base import certify_status
            from ..solvers.conic import ConicMethod

            certify_status(problem, res, ConicMethod.row_rtol(problem, res))
        from ..solvers.conic import bound_duals

        bound_duals(res)
        return res


def _read_vector(path: Path, n: int) -> np.ndarray:
    from ..errors import DataError

    from .sdpa import _read_text

    try:
        x = np.array([float(t) for t in _read_text(path, "solution file").split()])
    except ValueError as exc:
        raise DataError(f"{path}: not a vector of numbers: {exc}") from exc
    if x.size != n:
        raise DataError(f"{path}: {x.size} values; the program has {n} variables (is it the "
                        "solution of this program?)")
    return x
