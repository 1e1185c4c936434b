"""Run it anywhere: export compiled programs to SDPA and CBF, import external solutions.

>>> import kernelforms as kf
>>> kf.export(problem, "sdp", "p1.dat-s")              # doctest: +SKIP
>>> kf.export(problem, "sqlp", "p1_sqlp.cbf")          # doctest: +SKIP
>>> # $ csdp p1.dat-s p1.sol
>>> kf.compare(problem, ["sdp:clarabel", kf.ExternalSolution("p1.sol", method="sdp")])  # doctest: +SKIP

* :func:`export`: a conic formulation's compiled program, in CVXPY's standard conic form
  (:mod:`.standard`), written as SDPA sparse (``.dat-s``, :mod:`.sdpa`) or CBF
  (``.cbf``, :mod:`.cbf`).  :func:`export_all` writes every conic method in both formats.
* :func:`read_program`: either file back as a ``cvxpy.Problem`` (our own readers), whose
  optimum is the problem's objective, and whose solver's ``optimal`` is checked
  (:mod:`.checked`).
* :class:`ExternalSolution` (:mod:`.external`): a CSDP / SDPA solution file as a method
  that :func:`kernelforms.compare` runs like any other.
* :func:`solve_exported`: solve an exported SDPA file with a CVXPY solver and write the
  solution in CSDP's or SDPA's format, as an external solver would (for tests and for
  machines without CSDP).

docs/export.md shows how to run CSDP, SDPA and MOSEK on the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import NotApplicable, OptionError
from .external import OPTIMAL_TOL, SOLUTION_FORMATS, ExternalSolution, PrecisionWarning
from .standard import ConicForm, compile_form, standard_form

__all__ = ["export", "export_all", "read_program", "ExternalSolution", "solve_exported",
           "compile_form", "standard_form", "ConicForm", "FORMATS", "SOLUTION_FORMATS",
           "OPTIMAL_TOL", "PrecisionWarning"]

#: program formats and their suffixes
FORMATS = {"sdpa": ".dat-s", "cbf": ".cbf"}


def program_format(path: str | Path, fmt: str | None) -> str:
    """``fmt`` checked, or the format the suffix of ``path`` names."""
    if fmt is not None:
        if not isinstance(fmt, str) or fmt.lower() not in FORMATS:
            raise OptionError(f"format={fmt!r} is not an export format; use 'sdpa' (.dat-s) or 'cbf' (.cbf)")
        return fmt.lower()
    name = str(path).lower()
    for f, suffix in FORMATS.items():
        if name.endswith(suffix):
            return f
    raise OptionError(f"cannot tell the format of {str(path)!r} from its suffix: name the file "
                      "*.dat-s (SDPA sparse) or *.cbf (CBF), or pass format='sdpa' / 'cbf'")


def export(problem: Any, method: str, path: str | Path, format: str | None = None,
           **compile_options: Any) -> Path:
    """Write the program that ``method`` compiles for ``problem`` to ``path``.

    Parameters
    ----------
    problem : Problem
    method : str
        A conic formulation: ``"sdp"``, ``"scsdp"``, ``"scsdp_factor"``, ``"sqlp"``,
        ``"dual"`` (a solver suffix such as ``"sdp:scs"`` is ignored: the program is the same).
    path : str or Path
        ``*.dat-s`` for SDPA sparse, ``*.cbf`` for CBF (or name ``format``).
    format : {"sdpa", "cbf"}, optional
    **compile_options
        Passed to the formulation's ``compile`` (e.g. ``rank_rtol`` for the SQLP).

    Returns
    -------
    Path
        The file written.  Its comment lines say what it is; its optimum (plus the offset
        recorded in the SDPA comment, with the sense) is the problem's objective.

    Raises
    ------
    OptionError
        Unknown format or suffix, ``method`` not a conic formulation, ``problem`` not a
        kernelforms problem, or ``path`` not writable (a directory, a missing or read-only
        directory), before any work.
    ReportWriteError
        The write failed (e.g. a full disk): the file is written to a temporary name and
        renamed, so no truncated file is left.
    NotApplicable
        The formulation does not apply, or the format cannot hold the program (SDPA and
        the exponential cones of the Bregman problems: use CBF).
    """
    from ..compare import check_writable

    if not hasattr(problem, "fingerprint") or not hasattr(problem, "label"):
        raise OptionError(f"export needs a kernelforms problem (kf.PCP, kf.MVU, ...) as its first "
                          f"argument; got {type(problem).__name__}")
    fmt = program_format(path, format)
    path = check_writable(path, "path")
    compiled, form = compile_form(problem, method, **compile_options)
    comments = [f"kernelforms export of method {form.meta['method']!r} ({compiled.size})",
                f"problem: {problem.label}; fingerprint {form.meta['fingerprint']}",
                f"conic form: {form.describe()}",
                ("the problem's objective = " + ("" if form.sign > 0 else "-")
                 + f"(c^T x + {form.offset!r})" if fmt == "sdpa" else
                 "the optimum of this file is the problem's objective (constant in OBJBCOORD)")]
    if fmt == "sdpa":
        from .sdpa import from_conic, write_sdpa

        prog = from_conic(form)
        if form.zero:
            comments.append(f"the first {2 * form.zero} rows of block 1 are {form.zero} equalities, "
                            "each written as a pair r >= 0, -r >= 0")
        if form.soc:
            comments.append(f"{len(form.soc)} second-order cone(s) written as arrow blocks [[t, u^T], [u, t I]]")
        return write_sdpa(prog, path, comments)
    from .cbf import write_cbf

    return write_cbf(form, path, comments)


def export_all(problem: Any, directory: str | Path, methods: list[str] | None = None,
               formats: tuple[str, ...] = ("sdpa", "cbf")) -> list[dict[str, Any]]:
    """Export every conic formulation (or ``methods``) that applies in every format.

    Files are named ``{method}.dat-s`` / ``{method}.cbf`` in ``directory`` (created).
    Returns one record per (method, format): ``{"method", "format", "path"}`` or
    ``{"method", "format", "skipped": reason}``.
    """
    from ..registry import FORMULATIONS

    if not isinstance(directory, (str, Path)) or not str(directory).strip():
        raise OptionError(f"export_all needs a directory path; got {directory!r}")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise OptionError(f"cannot export into {str(directory)!r}: it exists and is not a directory")
    if isinstance(formats, str) or not formats:
        raise OptionError(f"formats must be a tuple of 'sdpa' / 'cbf'; got {formats!r}")
    for f in formats:
        program_format("x", f)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptionError(f"cannot create the directory {str(directory)!r}: {exc.strerror or exc}") from exc
    names = list(FORMULATIONS) if methods is None else list(dict.fromkeys(
        m.strip().lower().partition(":")[0] for m in methods))
    out = []
    for name in names:
        for f in formats:
            target = directory / f"{name}{FORMATS[f]}"
            try:
                out.append({"method": name, "format": f, "path": export(problem, name, target, format=f)})
            except NotApplicable as exc:
                out.append({"method": name, "format": f, "skipped": str(exc)})
    return out


def read_program(path: str | Path, format: str | None = None, max_memory: Any = None) -> Any:
    """An exported (or any) SDPA / CBF file as a ``cvxpy.Problem`` (our own readers).

    For files written by :func:`export` the problem's optimum is the kernel problem's
    objective (the offset and sense are restored from the metadata line of an SDPA file).
    The problem is a :class:`~kernelforms.exchange.checked.CheckedProblem`: after
    ``solve`` its status is the solver's, checked (``optimal`` only when the primal and
    dual residuals and the duality gap computed from the solver's values are within
    :data:`OPTIMAL_TOL`; what was measured is in ``problem.check``).  Declared sizes that
    need more than ``max_memory`` bytes (default 4 GiB) are refused before any allocation.
    """
    fmt = program_format(path, format)
    if fmt == "sdpa":
        import cvxpy as cp

        from .checked import CheckedProblem, sdpa_checker
        from .sdpa import read_sdpa

        prog = read_sdpa(path, max_memory=max_memory)
        problem, handles = prog.to_cvxpy()
        checker = sdpa_checker(prog, handles)
        if prog.sign < 0:
            return CheckedProblem(cp.Maximize(-problem.objective.args[0]), problem.constraints, checker)
        return CheckedProblem(problem.objective, problem.constraints, checker)
    from .cbf import read_cbf
    from .checked import CheckedProblem, cbf_checker

    prog = read_cbf(path, max_memory=max_memory)
    parts: list = []
    problem = prog.to_cvxpy(parts)[0]
    return CheckedProblem(problem.objective, problem.constraints, cbf_checker(prog, parts))


def solve_exported(path: str | Path, solution_path: str | Path, *, solver: str = "CLARABEL",
                   format: str | None = None, max_memory: Any = None, **options: Any) -> Path:
    """Solve an exported SDPA file with a CVXPY solver and write its solution file
    (``format`` ``"csdp"`` or ``"sdpa"``, default from the suffix), as CSDP or SDPA would:
    ``x`` and the matrices ``X`` and ``Y``.

    The solver's status is checked as in :func:`read_program`: the SDPA result file says
    ``pdOPT`` only for a checked optimum (``pdFEAS`` otherwise, ``dUNBD`` with the Farkas
    certificate in ``yMat`` for an infeasible program); a CSDP file carries no status, and
    :class:`ExternalSolution` checks it on import.  Raises :class:`OptionError` for an
    unknown solver or format, :class:`NotApplicable` when the solver gives nothing to write.
    """
    from ..compare import check_writable
    from .external import solution_format
    from .sdpa import read_sdpa, solve_sdpa, write_csdp_solution, write_sdpa_result

    if str(path).lower().endswith(FORMATS["cbf"]):
        raise OptionError(f"solve_exported solves SDPA files (.dat-s); {str(path)!r} is CBF: use "
                          "read_program(path).solve(solver=...) instead")
    fmt = solution_format(solution_path, format)
    if fmt == "vector":
        raise OptionError("solve_exported writes 'csdp' or 'sdpa' solution files (they carry the dual)")
    solution_path = check_writable(solution_path, "solution_path")
    import cvxpy as cp

    if not isinstance(solver, str) or solver.upper() not in cp.installed_solvers():
        raise OptionError(f"The 'solver' parameter of solve_exported must be an installed CVXPY solver "
                          f"({', '.join(sorted(cp.installed_solvers()))}). Got {solver!r} instead.")
    prog = read_sdpa(path, max_memory=max_memory)
    sol = solve_sdpa(prog, solver=solver, **options)
    writer = write_csdp_solution if fmt == "csdp" else write_sdpa_result
    return writer(prog, sol, solution_path)
