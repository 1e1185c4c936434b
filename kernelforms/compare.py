"""``compare()``: run several methods on one problem and check that their objectives agree.

One :class:`Report` row per method.  Rows survive everything a single method can do:
a method that does not apply is *skipped* with its reason, one that raises (anything but
``KeyboardInterrupt`` / ``SystemExit``, including a Rust solver's panic) is an *error* row
with the message, one that runs past ``time_limit`` is stopped (it runs in a child process)
and becomes a *timeout* row.  With ``json_path`` the finished rows are written after every
method (atomically), so Ctrl-C or a crash leaves them on disk; a path that cannot be
written is refused before any method runs, and a write that fails later warns and still
returns the report.

The report lives in :mod:`kernelforms.report` (verdicts, exports), running one method in
:mod:`kernelforms.isolation`, the progress display in :mod:`kernelforms.progress`; their
public names are re-exported here.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Sequence

from .errors import OptionError, ProblemError
from . import isolation
from .isolation import (  # noqa: F401 - re-exported
    CERT_KEYS,
    FORKSERVER_PRELOAD,
    KILL_GRACE,
    attach_certificate,
    can_isolate,
    run_isolated,
    run_one,
)
from .progress import Progress  # noqa: F401 - re-exported
from .report import (  # noqa: F401 - re-exported
    DEFAULT_VTOL,
    EXIT_CODES,
    JSON_FORMAT,
    LEGEND,
    NEAR_ZERO,
    PLAIN_FORMULATIONS,
    Report,
    ReportWriteError,
    ReportWriteWarning,
    RowVerdict,
    atomic_write,
    check_tolerance,
    check_writable,
    constraint_scale,
    default_vtol,
    objective_scale,
    plain_formulation,
    relative_gap,
    seed_to_json,
    warn_write,
)
from .result import Result

__all__ = ["compare", "Report", "RowVerdict", "check_writable", "atomic_write", "relative_gap",
           "Progress", "ReportWriteError", "ReportWriteWarning", "EXIT_CODES", "DEFAULT_VTOL",
           "default_vtol", "constraint_scale", "KILL_GRACE"]


#: a method that stops on a certified relative gap (its option ``gap_tol``) and is given
#: none is run with ``gap_tol = GAP_SHARE * rtol`` when its default is looser: two rows, each
#: certified within ``rtol / 2`` of the optimum, are within ``rtol`` of each other
GAP_SHARE = 0.5


def gap_request(spec: Any, opts: dict[str, Any], rtol: float) -> float | None:
    """The ``gap_tol`` compare runs ``spec`` with, or None (no such option, one was given,
    ``rtol`` is 0, or the method's default is already at most ``GAP_SHARE * rtol``).

    At a method's own default (``bcd`` 1e-3, ``mvu`` 2e-4) a row may stop that far from the
    optimum, exactly as documented, and still be reported as disagreeing at ``rtol = 1e-4``."""
    if "gap_tol" in opts or not rtol > 0:
        return None
    from .methods import get_method

    default = (getattr(get_method(spec), "defaults", None) or {}).get("gap_tol")
    if default is None:
        return None
    want = GAP_SHARE * rtol
    return want if want < float(default) else None


# ---------------------------------------------------------------------- argument checks
def check_methods(methods: Any, owner: str = "compare") -> list[Any]:
    """``methods`` as a list: names (``"sdp:scs"``), a comma-separated string, or Method
    instances; anything else is an :class:`OptionError` before any work."""
    from .solvers.base import Method

    example = 'e.g. ["sdp:clarabel", "admm"] or "sdp:clarabel,admm"'
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    elif isinstance(methods, (list, tuple)):
        methods = list(methods)
    elif methods is not None and not isinstance(methods, (dict, set, bytes)) and hasattr(methods, "__iter__"):
        methods = list(methods)
    else:
        raise OptionError(f"The 'methods' argument of {owner} must be a list of method names "
                          f"({example}; `kernelforms methods` lists them). Got {methods!r} instead.")
    if not methods:
        raise OptionError(f"The 'methods' argument of {owner} is empty: give at least one method ({example}).")
    for m in methods:
        if not isinstance(m, (str, Method)):
            raise OptionError(f"The 'methods' argument of {owner} must hold method names (str) or "
                              f"Method instances ({example}). Got {m!r} ({type(m).__name__}) in it.")
    return methods


def method_key(spec: Any) -> str:
    """The key of ``spec`` in ``options``: the string itself, or a Method's ``name``."""
    return spec if isinstance(spec, str) else getattr(spec, "name", "")


def check_options(options: Any, methods: Sequence[Any], owner: str = "compare") -> dict[str, dict[str, Any]]:
    """``options`` (None or ``{method: {option: value}}``) checked against ``methods``."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise OptionError(f"The 'options' argument of {owner} must be a dict of per-method option "
                          f"dicts, e.g. {{'admm': {{'rho': 10.0}}}}. Got {type(options).__name__} "
                          f"{options!r} instead.")
    keys = [method_key(m) for m in methods]
    for k, v in options.items():
        if k not in keys:
            raise OptionError(f"The 'options' argument of {owner} has options for {k!r}, which is not "
                              f"among the methods ({', '.join(map(repr, keys))}); the key must be the "
                              "method string exactly as given.")
        if not isinstance(v, dict):
            raise OptionError(f"The 'options' argument of {owner}: the options of {k!r} must be a dict "
                              f"(option name -> value). Got {type(v).__name__} {v!r} instead.")
    return options


def check_compare_args(problem: Any, methods: Any, *, rtol: Any, vtol: Any, seed: Any,
                       time_limit: Any, options: Any, kill_grace: Any = KILL_GRACE,
                       owner: str = "compare", need_problem: bool = True
                       ) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """Every argument check of :func:`compare` (also run by ``compare_grid`` before it
    starts any worker).  Returns the methods as a list and the options dict."""
    from .solvers.base import check_run_args

    if need_problem and not all(hasattr(problem, a) for a in ("label", "params", "fingerprint", "sense")):
        raise ProblemError(f"{owner} needs a kernelforms problem (e.g. kf.PCP.from_data(X, pairs)); "
                           f"got {type(problem).__name__}.")
    methods = check_methods(methods, owner)
    check_tolerance("rtol", rtol, owner)
    if vtol is not None:
        check_tolerance("vtol", vtol, owner)
    check_tolerance("kill_grace", kill_grace, owner)
    check_run_args(owner, seed, time_limit)
    return methods, check_options(options, methods, owner)


# ---------------------------------------------------------------------- compare
def compare(problem: Any, methods: Sequence[Any] | str, *, rtol: float = 1e-4, seed: Any = 0,
            time_limit: float | None = None, vtol: float | None = None,
            options: dict[str, dict[str, Any]] | None = None, certify: bool = True,
            json_path: str | os.PathLike | None = None, progress: bool | None = None,
            kill_grace: float = KILL_GRACE, recipe: dict[str, Any] | None = None) -> Report:
    """Run several methods on one problem and compare their objectives.

    Parameters
    ----------
    problem : Problem
    methods : sequence of str or Method, or a comma-separated str
        Method names, e.g. ``["sdp", "sqlp", "admm"]`` or ``"sdp:scs,sdp:clarabel"``;
        :class:`~kernelforms.solvers.base.Method` instances are accepted too.
    rtol : float, default 1e-4
        Relative objective gap under which two rows agree (finite, >= 0).
    seed : int, numpy.random.Generator or None
        Passed to every method.  A Generator is recorded in the report (and its JSON) as
        its state before the first method.
    time_limit : float, optional
        Seconds per method (> 0), the certificate included.  With a limit every method
        runs in a child process that is killed ``kill_grace`` seconds after the limit (row
        status ``timeout``); its certificate is computed in the child inside the same
        deadline, or left out with a note.  Without one, methods run in this process.
    vtol : float, optional
        Largest constraint violation for a row to count as feasible (finite, >= 0), in the
        units of the constraint rows.  Default: ``1e-5 x max(1, largest |b_k|)`` over the
        problem's right-hand sides (:func:`~kernelforms.report.default_vtol`): 1e-5 for
        the problems with 0 / 1 right-hand sides, 1e-5 of the largest squared edge
        distance for MVU.  The value used is ``report.vtol``.
    options : dict, optional
        Per-method options, keyed by the method string exactly as given
        (``{"admm": {"rho": 10.0}}``); a key that is not a method is an error.  A method
        that stops on a certified relative gap (option ``gap_tol``: ``bcd``, ``mvu``) and is
        given none here runs with ``gap_tol = rtol / 2`` when its default is looser (two
        rows within ``rtol / 2`` of the optimum agree); the report's notes say so.
    certify : bool, default True
        Add a certified gap (:mod:`kernelforms.certificate`) to rows with a kernel when
        the problem has a certificate.
    json_path : path, optional
        Write the report here after every finished method (atomically), so an interrupted
        comparison leaves its finished rows; the final report overwrites it.  A path that
        cannot be written is refused before any method runs; a write that fails later
        warns (:class:`~kernelforms.report.ReportWriteWarning`) and the report is still
        returned (``report.write_error`` says what happened).
    progress : bool, optional
        Progress on stderr: default on (a live bar on a terminal, one plain line per
        method otherwise); False for silence.
    recipe : dict, optional
        How the instance was built (stored in the report, used by baselines).

    Returns
    -------
    Report
        ``str(report)`` is a table; ``report.verdict`` / ``report.exit_code`` the verdict
        (``"agree"`` 0, ``"disagree"`` 1, ``"agree_partial"`` 3, ``"unverified"`` 3);
        ``report.agree()`` is True for ``"agree"`` only.  Agreement needs evidence: a
        finished row (``optimal`` / ``converged``) proved within ``rtol`` (a solver's
        certificate or its own certified gap), or two finished rows of different methods
        agreeing; a lone row stopped by ``max_iter`` or ``time_limit`` is ``"unverified"``.

    Raises
    ------
    OptionError, ProblemError
        Bad arguments (before any work): ``methods`` not a list of names, ``options`` not a
        dict of dicts, ``rtol`` / ``vtol`` NaN, infinite or negative, ``time_limit`` <= 0,
        ``seed`` not an int >= 0 / Generator / None, ``json_path`` not writable.
    KeyboardInterrupt
        Re-raised after the finished rows were written to ``json_path`` (the partial
        report is attached as ``exc.report``).
    """
    methods, options = check_compare_args(problem, methods, rtol=rtol, vtol=vtol, seed=seed,
                                          time_limit=time_limit, options=options, kill_grace=kill_grace)
    vtol = default_vtol(problem) if vtol is None else float(vtol)
    rtol, kill_grace = float(rtol), float(kill_grace)
    if json_path is not None:
        check_writable(json_path, "json_path")
    seed_record = seed_to_json(seed)  # a Generator's state before any method draws from it
    scale = objective_scale(problem)
    rows: list[Result] = []
    isolate = time_limit is not None and can_isolate()
    bar = Progress(len(methods), progress)
    if isolate:
        ctx = isolation.mp_context()
        if ctx.get_start_method() == "forkserver":
            isolation.warm_up(ctx)
    write_note: list[str] = []

    def report(complete: bool) -> Report:
        rep = Report(problem_label=problem.label, problem_params=problem.params(),
                     fingerprint=problem.fingerprint(), sense=problem.sense, rows=list(rows),
                     rtol=rtol, vtol=vtol, seed=seed_record, complete=complete, recipe=recipe,
                     time_limit=time_limit, objective_scale=scale)
        rep.write_error = write_note[0] if write_note else None
        return rep

    def write(rep: Report) -> None:
        try:
            rep.to_json(json_path)
        except (OSError, TypeError, ValueError) as exc:
            if not write_note:
                write_note.append(warn_write(json_path, exc))
            rep.write_error = write_note[0]

    try:
        for i, spec in enumerate(methods, 1):
            opts = dict(options.get(method_key(spec), {}))
            res = isolation.prepare(problem, spec)
            bar.start(i, (method_key(spec) or repr(spec)) if res is None else res.method, background=not isolate)
            asked = None
            if res is None:
                asked = gap_request(spec, opts, rtol)
                if asked is not None:
                    opts["gap_tol"] = asked
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # statuses are in the rows
                    if isolate:
                        from .methods import get_method

                        res = run_isolated(problem, get_method(spec), seed=seed,
                                           time_limit=float(time_limit), options=opts,
                                           grace=kill_grace, tick=bar.tick, certify=certify)
                    else:
                        res = run_one(problem, spec, seed=seed, time_limit=time_limit, options=opts)
                        if certify:
                            bar.stage("certifying")
                            deadline = None if time_limit is None else t0 + float(time_limit) + kill_grace
                            attach_certificate(problem, res, deadline)
                if res.factor is not None and not res.size:
                    res.size = "factor {} x {}".format(*res.factor.shape)
                if asked is not None:
                    res.gap_tol_asked = asked
            bar.done(res)
            rows.append(res)
            if json_path is not None and i < len(methods):
                write(report(False))
    except KeyboardInterrupt as exc:
        bar.interrupted()
        partial = report(False)
        if json_path is not None:
            write(partial)
        exc.report = partial  # type: ignore[attr-defined]
        raise
    finally:
        bar.close()
    final = report(True)
    if json_path is not None:
        write(final)
    return final

