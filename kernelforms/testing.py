"""Helpers for test suites: agreement assertions and regression baselines.

>>> from kernelforms.testing import assert_objectives_agree
>>> assert_objectives_agree(problem, ["sdp:clarabel", "admm"], rtol=1e-4)   # doctest: +SKIP

A **baseline file** pins the optimal objective of named instances so that a change in a
solver (or in the data pipeline) that moves an objective is caught::

    {
      "format": "kernelforms-baseline/1",
      "instances": {
        "pcp-iris-n30": {
          "recipe": {"problem": "pcp", "dataset": "iris", "n_points": 30, "seed": 0, ...},
          "fingerprint": "3f0c...",           # hash of the built instance (data + parameters)
          "problem": "PCP(n=30, ...)", "sense": "min",
          "status": "optimal", "optimum": 1.2345678901, "reference": "sdp:clarabel",
          "rtol": 1e-4,                          # tolerance of methods not listed below
          "vtol": 1e-5,                          # largest constraint violation accepted
          "methods": {"sdp:clarabel": {"objective": 1.2345678901, "rtol": 1e-6}},
          "kernelforms_version": "0.1.0"
        }
      }
    }

``kernelforms compare ... --save-baseline FILE`` adds (or replaces) the entry of the instance
it ran, ``--baseline FILE`` fails (exit status 1) when a method drifts from the stored optimum
by more than its tolerance.  :func:`check_baseline` is the same check in Python.
"""

from __future__ import annotations

import errno
import json
import math
import os
import time
from typing import Any, Iterable, Sequence

from .compare import NEAR_ZERO, Report, atomic_write, compare, relative_gap
from .recipes import RECIPE_DEFAULTS, build_from_recipe, make_recipe, recipe_name  # noqa: F401 - re-exported
from .result import Result, Status
from .solvers.base import Method, evaluate_into

BASELINE_FORMAT = "kernelforms-baseline/1"


# ---------------------------------------------------------------------- agreement
def assert_objectives_agree(problem: Any, methods: Sequence[Any] | str, rtol: float = 1e-4,
                            **compare_options: Any) -> Report:
    """Run :func:`~kernelforms.compare` and raise ``AssertionError`` unless all rows agree.

    Parameters
    ----------
    problem : Problem
    methods : sequence of str or Method
    rtol : float
        Relative objective gap allowed against the reference row.
    **compare_options
        Passed to :func:`~kernelforms.compare` (``seed``, ``time_limit``, ``options`` ...).

    Returns
    -------
    Report
        For further checks.  The error message names the rows that disagree and shows
        the whole table.
    """
    report = compare(problem, methods, rtol=rtol, **compare_options)
    report.assert_agree(rtol)
    return report


# ---------------------------------------------------------------------- baselines
def load_baseline(path: str | os.PathLike) -> dict[str, Any]:
    """Read and check a baseline file (an empty structure when the file does not exist).

    Raises :class:`~kernelforms.errors.DataError` naming the file, and the entry and field
    when one is wrong: not UTF-8, not valid JSON (or a number too long to read), not a
    ``kernelforms-baseline/1`` object, or an entry whose optimum, tolerances, status or
    methods have the wrong type.
    """
    from .errors import DataError
    from .report import decode_utf8, loads_json

    path = os.fspath(path)
    if not os.path.exists(path):
        return {"format": BASELINE_FORMAT, "instances": {}}
    source = f"baseline file {path!r}"
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise DataError(f"cannot read {source}: {exc.strerror or exc}") from None
    data = loads_json(decode_utf8(raw, source), source)
    return check_baseline_data(data, source)


def check_baseline_data(data: Any, source: str = "baseline") -> dict[str, Any]:
    """``data`` when it is a valid baseline structure, else a :class:`DataError` naming
    ``source``, the entry and the field."""
    from .errors import DataError

    def bad(where: str, what: str, got: Any) -> DataError:
        s = repr(got)
        s = s if len(s) <= 80 else s[:60] + f"... ({len(s)} characters)"
        return DataError(f"{source} is not a valid {BASELINE_FORMAT} file: {where} must be {what}; got {s}")

    def number(where: str, v: Any, *, nonneg: bool = False, null: bool = False) -> None:
        if v is None and null:
            return
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        try:
            ok = ok and math.isfinite(float(v)) and (not nonneg or float(v) >= 0)
        except OverflowError:
            ok = False
        if not ok:
            raise bad(where, "a finite number" + (" >= 0" if nonneg else "") + (" or null" if null else ""), v)

    if not isinstance(data, dict):
        raise bad("the top level", f'a JSON object {{"format": "{BASELINE_FORMAT}", "instances": {{...}}}}', data)
    if data.get("format") != BASELINE_FORMAT:
        raise bad("'format'", repr(BASELINE_FORMAT), data.get("format"))
    if not isinstance(data.get("instances"), dict):
        raise bad("'instances'", "an object (entry name -> entry)", data.get("instances"))
    statuses = {st.value for st in Status}
    for name, e in data["instances"].items():
        w = f"instances[{name!r}]"
        if not isinstance(e, dict):
            raise bad(w, "an object", e)
        number(f"{w}.optimum", e.get("optimum"), null=True)
        for key in ("rtol", "vtol", "objective_scale"):
            if key in e:
                number(f"{w}.{key}", e[key], nonneg=True)
        if "status" in e and e["status"] not in statuses:
            raise bad(f"{w}.status", "one of " + ", ".join(sorted(statuses)), e["status"])
        if e.get("optimum") is None and "status" not in e:
            raise bad(f"{w}.status", "given when the optimum is null (the common verdict, e.g. 'infeasible')", None)
        if e.get("sense", "min") not in ("min", "max"):
            raise bad(f"{w}.sense", "'min' or 'max'", e.get("sense"))
        if e.get("fingerprint") is not None and not isinstance(e["fingerprint"], str):
            raise bad(f"{w}.fingerprint", "a string", e["fingerprint"])
        if e.get("recipe") is not None and not isinstance(e["recipe"], dict):
            raise bad(f"{w}.recipe", "an object (the instance's recipe) or null", e["recipe"])
        methods = e.get("methods", {})
        if not isinstance(methods, dict):
            raise bad(f"{w}.methods", "an object (method -> tolerance)", methods)
        for m, spec in methods.items():
            if not isinstance(spec, dict):
                raise bad(f"{w}.methods[{m!r}]", "an object", spec)
            if "rtol" in spec:
                number(f"{w}.methods[{m!r}].rtol", spec["rtol"], nonneg=True)
            if "objective" in spec:
                number(f"{w}.methods[{m!r}].objective", spec["objective"])
            if "status" in spec and spec["status"] not in statuses:
                raise bad(f"{w}.methods[{m!r}].status", "a status", spec["status"])
    return data


def baseline_entry(report: Report, *, recipe: dict[str, Any] | None = None, rtol: float | None = None,
                   tolerances: dict[str, float] | None = None) -> dict[str, Any]:
    """The baseline entry of one comparison: its reference optimum and a tolerance per method.

    Only rows that agree with the reference are stored (a baseline pins what is right).
    """
    from .errors import KernelformsError

    rtol = report.rtol if rtol is None else rtol
    tolerances = tolerances or {}
    recipe = recipe if recipe is not None else report.recipe
    ran = [r for r in report.rows if r.status is not Status.SKIPPED]
    if report.verdict == "unverified":
        raise KernelformsError("cannot save a baseline: the comparison verified nothing ("
                               + report.unverified_reason() + ")")
    if report.reference is None:
        statuses = {r.status for r in ran}
        if len(statuses) != 1 or next(iter(statuses)) not in (Status.INFEASIBLE, Status.UNBOUNDED):
            raise KernelformsError("cannot save a baseline: no feasible reference row and no common "
                                   f"verdict ({', '.join(sorted(s.value for s in statuses))})")
        status, optimum = next(iter(statuses)).value, None
    else:
        status, optimum = report.result(report.reference).status.value, report.reference_objective
    methods = {}
    for r in ran:
        gap = report.gaps.get(r.method)
        if optimum is None:
            methods[r.method] = {"status": r.status.value, "rtol": tolerances.get(r.method, rtol)}
        elif gap is not None and abs(gap) <= tolerances.get(r.method, rtol):
            methods[r.method] = {"objective": r.objective, "rtol": tolerances.get(r.method, rtol)}
    from ._version import __version__

    return {
        "recipe": recipe, "fingerprint": report.fingerprint, "problem": report.problem_label,
        "sense": report.sense, "status": status, "optimum": optimum, "reference": report.reference,
        "rtol": rtol, "vtol": report.vtol, "methods": methods, "kernelforms_version": __version__,
        **({"objective_scale": report.objective_scale} if report.objective_scale else {}),
    }


def save_baseline(report: Report, path: str | os.PathLike, *, name: str | None = None,
                  recipe: dict[str, Any] | None = None, rtol: float | None = None,
                  tolerances: dict[str, float] | None = None) -> str:
    """Add (or replace) the entry of ``report``'s instance in the baseline file at ``path``;
    returns the entry's name.

    The report comes first, as in :func:`check_baseline`; the old order
    ``save_baseline(path, report)`` still works with a ``DeprecationWarning``.  Processes that
    save into the same file at once are serialised by a lock (``<path>.lock``,
    :class:`baseline_lock`): each reads the file, adds its entry and replaces the file
    atomically, so no entry is lost.  A baseline
    file that exists but is not valid raises :class:`~kernelforms.errors.DataError` (it is
    not overwritten); a path that cannot be written raises
    :class:`~kernelforms.report.ReportWriteError` naming it.
    """
    if not isinstance(report, Report) and isinstance(path, Report):
        import warnings

        warnings.warn("save_baseline(path, report) is deprecated: pass the report first, "
                      "save_baseline(report, path), as check_baseline(report, path)",
                      DeprecationWarning, stacklevel=2)
        report, path = path, report
    if not isinstance(report, Report):
        from .errors import OptionError

        raise OptionError(f"save_baseline(report, path) needs a Report first (from kf.compare); "
                          f"got {type(report).__name__}.")
    entry = baseline_entry(report, recipe=recipe, rtol=rtol, tolerances=tolerances)
    if name is None:
        name = recipe_name(entry["recipe"]) if entry["recipe"] else f"{report.problem_label}-{report.fingerprint}"
    # read-modify-write under an exclusive lock, so that processes saving into the same file
    # at once do not lose each other's entries; the file itself is replaced atomically
    with baseline_lock(path):
        data = load_baseline(path)
        data["instances"][name] = entry
        data["instances"] = dict(sorted(data["instances"].items()))
        atomic_write(path, json.dumps(data, indent=2) + "\n")
    return name


#: seconds :func:`baseline_lock` waits for another process's lock before it gives up
LOCK_TIMEOUT = 60.0


class baseline_lock:
    """An exclusive ``fcntl.flock`` on ``<path>.lock`` (created next to the baseline and left
    there: removing it would let two processes lock different files) for a read-modify-write
    of the baseline at ``path``.  Waits at most :data:`LOCK_TIMEOUT` seconds, then raises
    :class:`~kernelforms.report.ReportWriteError` naming the lock file.  Where ``fcntl`` does
    not exist (Windows) the write is not locked."""

    def __init__(self, path: str | os.PathLike, timeout: float | None = None) -> None:
        self.lock_path = os.fspath(path) + ".lock"
        self.timeout = LOCK_TIMEOUT if timeout is None else timeout
        self.fd: int | None = None

    def __enter__(self) -> "baseline_lock":
        from .report import ReportWriteError

        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self
        try:
            self.fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise ReportWriteError(f"could not create the lock file {self.lock_path!r} of the baseline: "
                                   f"{exc.strerror or exc}", self.lock_path) from exc
        end = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= end:
                    os.close(self.fd)
                    self.fd = None
                    raise ReportWriteError(f"the baseline is locked by another process ({self.lock_path!r} "
                                           f"held for more than {self.timeout:g} s); nothing was written",
                                           self.lock_path) from None
                time.sleep(0.01)
            except OSError as exc:  # a file system without locks: write unlocked, as before
                os.close(self.fd)
                self.fd = None
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    return self
                raise ReportWriteError(f"could not lock {self.lock_path!r}: {exc.strerror or exc}",
                                       self.lock_path) from exc

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def find_entry(baseline: dict[str, Any], report: Report, name: str | None = None
               ) -> tuple[str | None, dict[str, Any] | None]:
    """The entry for ``report``: by ``name``, else by fingerprint, else by recipe."""
    inst = baseline["instances"]
    if name is not None:
        return (name, inst[name]) if name in inst else (name, None)
    for k, e in inst.items():
        if e.get("fingerprint") == report.fingerprint:
            return k, e
    if report.recipe is not None:
        want = make_recipe(**report.recipe)
        for k, e in inst.items():
            if e.get("recipe") and make_recipe(**e["recipe"]) == want:
                return k, e
    return None, None


def check_baseline(report: Report, baseline: dict[str, Any] | str | os.PathLike,
                   name: str | None = None) -> list[str]:
    """Reasons ``report`` drifts from its baseline entry (empty when every method is within
    its tolerance of the stored optimum).

    A method not listed in the entry is held to the entry's default ``rtol``; an instance
    whose fingerprint changed (data or parameters) or that has no entry is a failure.
    """
    if isinstance(report, (str, os.PathLike, dict)) and isinstance(baseline, Report):
        import warnings

        warnings.warn("check_baseline(baseline, report) is deprecated: pass the report first, "
                      "check_baseline(report, path)", DeprecationWarning, stacklevel=2)
        report, baseline = baseline, report
    if not isinstance(baseline, dict):
        baseline = load_baseline(baseline)
    else:
        baseline = check_baseline_data(baseline, "the baseline dict")
    key, entry = find_entry(baseline, report, name)
    if entry is None:
        return [f"no baseline entry for {report.problem_label} (fingerprint {report.fingerprint}"
                + (f", name {key!r}" if key else "") + ")"]
    out = []
    if entry.get("fingerprint") != report.fingerprint:
        out.append(f"[{key}] the instance changed: fingerprint {report.fingerprint} != stored "
                   f"{entry.get('fingerprint')} (data or parameters differ)")
    optimum = entry.get("optimum")
    for r in report.rows:
        if r.status is Status.SKIPPED:
            continue
        spec = entry.get("methods", {}).get(r.method, {})
        tol = float(spec.get("rtol", entry.get("rtol", report.rtol)))
        if optimum is None:
            if r.status.value != entry["status"]:
                out.append(f"[{key}] {r.method}: status {r.status.value}, baseline {entry['status']}")
            continue
        if not r.ok:
            out.append(f"[{key}] {r.method}: status {r.status.value} ({r.message}); "
                       f"baseline optimum {optimum:.10g}")
            continue
        vtol = float(entry.get("vtol", report.vtol))
        if math.isfinite(r.violation) and r.violation > vtol:
            out.append(f"[{key}] {r.method}: violation {r.violation:.3g} > {vtol:g}")
        drift = relative_gap(r.objective, float(optimum), entry.get("sense", report.sense),
                             NEAR_ZERO * float(entry.get("objective_scale", 0.0)))
        if abs(drift) > tol:
            out.append(f"[{key}] {r.method}: objective {r.objective:.10g} drifts {drift:+.3g} from the "
                       f"stored optimum {optimum:.10g} (tolerance {tol:g})")
    return out


def assert_matches_baseline(report: Report, baseline: Any, name: str | None = None) -> None:
    """Raise ``AssertionError`` listing the drifts found by :func:`check_baseline`."""
    bad = check_baseline(report, baseline, name)
    if bad:
        raise AssertionError("baseline check failed:\n  " + "\n  ".join(bad))


def run_baseline(path: str | os.PathLike, methods: Sequence[Any] | None = None,
                 names: Iterable[str] | None = None, **compare_options: Any) -> dict[str, list[str]]:
    """Rebuild every instance of a baseline file, run ``methods`` (default: the methods stored
    for it) and return the drifts per instance name (empty lists when all is well)."""
    data = load_baseline(path)
    out = {}
    for key, entry in data["instances"].items():
        if names is not None and key not in set(names):
            continue
        problem = build_from_recipe(entry["recipe"])
        ms = list(methods) if methods is not None else list(entry["methods"])
        report = compare(problem, ms, recipe=entry["recipe"], **compare_options)
        out[key] = check_baseline(report, data, key)
    return out


# ---------------------------------------------------------------------- test methods
class PerturbedMethod(Method):
    """A method that runs ``inner`` and then scales its kernel by ``1 + rel``: a solver
    with a deliberate bug, to check that a test suite (or a baseline) catches drift.

    Registered under a name (``SOLVERS["perturbed"] = "kernelforms.testing:PerturbedMethod"``)
    it takes that name.
    """

    certifying = False

    def __init__(self, spec: str | None = None, inner: str = "sdp:clarabel", rel: float = 1e-2) -> None:
        from .methods import get_method

        self.inner = get_method(inner)
        self.rel = float(rel)
        self.name = spec if spec else f"perturbed({self.inner.name})"
        self.formulation_name = self.inner.formulation_name
        self.solver_name = self.inner.solver_name

    def applies_to(self, problem: Any) -> str | None:
        return self.inner.applies_to(problem)

    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None, **options: Any) -> Result:
        from .result import LowRank

        res = self.inner.run(problem, seed=seed, time_limit=time_limit, **options)
        res.method = self.name
        if res.factor is not None:
            evaluate_into(res, problem, LowRank(res.factor * math.sqrt(1.0 + self.rel)))
        res.certifying = False
        return res


class SlowMethod(Method):
    """A method that sleeps ``delay`` seconds (in small steps, ignoring its time limit)
    and then runs ``inner``: for testing time limits and streamed results.

    ``until``: a file path; the sleep ends as soon as that file exists (a gate a test opens,
    in any process on this machine).  ``n_points``: sleep only on instances of these sizes
    (an int or a tuple of ints; every instance when None).
    """

    certifying = False

    def __init__(self, spec: str | None = None, inner: str = "sdp:clarabel", delay: float = 60.0,
                 until: str | os.PathLike | None = None, n_points: int | Sequence[int] | None = None) -> None:
        from .methods import get_method

        self.inner = get_method(inner)
        self.delay = float(delay)
        self.until = None if until is None else os.fspath(until)
        self.n_points = None if n_points is None else (
            (int(n_points),) if isinstance(n_points, int) else tuple(int(n) for n in n_points))
        self.name = spec if spec else f"slow({self.inner.name})"
        self.formulation_name = "sleeps first"
        self.solver_name = self.inner.solver_name

    def applies_to(self, problem: Any) -> str | None:
        return self.inner.applies_to(problem)

    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None, **options: Any) -> Result:
        if self.n_points is None or problem.params().get("n") in self.n_points:
            end = time.perf_counter() + self.delay
            while time.perf_counter() < end and not (self.until and os.path.exists(self.until)):
                time.sleep(0.05)
        res = self.inner.run(problem, seed=seed, time_limit=time_limit, **options)
        res.method = self.name
        return res


class FailingMethod(Method):
    """A method that raises ``exc`` (default ``RuntimeError``) when run."""

    def __init__(self, spec: str | None = None, exc: BaseException | None = None) -> None:
        self.name = spec or "failing"
        self.exc = exc if exc is not None else RuntimeError("deliberate failure")
        self.formulation_name = "raises"
        self.solver_name = "none"

    def applies_to(self, problem: Any) -> str | None:
        return None

    def run(self, problem: Any, **_: Any) -> Result:
        raise self.exc


class ExitingMethod(Method):
    """A method that ends its process at once with ``os._exit(code)``, as a segfault or the
    out-of-memory killer would, on instances of ``n_points`` points (an int or a tuple of
    ints; every instance when None), and runs ``inner`` on the others: for testing that a
    lost worker becomes an error row (:func:`~kernelforms.compare_grid`) or that a dead
    child does (:func:`~kernelforms.compare` with a time limit).

    It never ends the process that created it (a test run would vanish): there it raises
    ``RuntimeError`` instead, which ``compare`` turns into an ``error`` row.
    """

    certifying = False

    def __init__(self, spec: str | None = None, inner: str = "sdp:clarabel",
                 n_points: int | Sequence[int] | None = None, code: int = 70) -> None:
        from .methods import get_method

        self.inner = get_method(inner)
        self.n_points = None if n_points is None else (
            (int(n_points),) if isinstance(n_points, int) else tuple(int(n) for n in n_points))
        self.code = int(code)
        self.home_pid = os.getpid()
        self.name = spec if spec else f"exiting({self.inner.name})"
        self.formulation_name = self.inner.formulation_name
        self.solver_name = self.inner.solver_name

    def applies_to(self, problem: Any) -> str | None:
        return self.inner.applies_to(problem)

    def run(self, problem: Any, *, seed: int = 0, time_limit: float | None = None, **options: Any) -> Result:
        if self.n_points is None or problem.params().get("n") in self.n_points:
            if os.getpid() == self.home_pid:
                raise RuntimeError(f"{self.name} would end the process that created it (pid {self.home_pid}); "
                                   "it only ends worker and child processes")
            os._exit(self.code)
        res = self.inner.run(problem, seed=seed, time_limit=time_limit, **options)
        res.method = self.name
        return res
