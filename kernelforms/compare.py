"""``compare()``: run several methods on one problem and check that their objectives agree."""

from __future__ import annotations

import json
import math
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .errors import KernelformsError, NotApplicable
from .result import Result, Status

#: default largest constraint violation for a row to count as feasible
DEFAULT_VTOL = 1e-5


def relative_gap(objective: float, reference: float, sense: str) -> float:
    """Signed relative gap, positive when ``objective`` is worse than ``reference``."""
    if not (math.isfinite(objective) and math.isfinite(reference)):
        return math.inf if objective != reference else 0.0
    diff = objective - reference if sense == "min" else reference - objective
    return diff / max(abs(reference), 1e-12)


@dataclass
class Report:
    """The outcome of :func:`compare`: one :class:`~kernelforms.result.Result` per method.

    Attributes
    ----------
    rows : list of Result
        In the order the methods were given; skipped methods have status ``skipped``
        and the reason in ``message``.
    reference : str or None
        The method whose objective is the reference, and ``reference_kind`` says how
        it was chosen ("certified" conic optimum or "best feasible").
    """

    problem_label: str
    problem_params: dict[str, Any]
    fingerprint: str
    sense: str
    rows: list[Result]
    rtol: float = 1e-4
    vtol: float = DEFAULT_VTOL
    seed: int = 0
    reference: str | None = None
    reference_kind: str = "none"
    reference_objective: float = math.nan
    version: str = ""
    gaps: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.version:
            from ._version import __version__

            self.version = __version__
        self._choose_reference()

    # ------------------------------------------------------------------ reference
    def _feasible(self, r: Result) -> bool:
        return r.ok and (not math.isfinite(r.violation) or r.violation <= self.vtol)

    def _choose_reference(self) -> None:
        from .methods import get_method

        def certified(r: Result) -> bool:
            try:
                return r.status.certifies_optimality and get_method(r.method).certifying
            except KernelformsError:
                return False

        pool = [r for r in self.rows if self._feasible(r) and certified(r)]
        kind = "certified"
        if not pool:
            pool = [r for r in self.rows if self._feasible(r)]
            kind = "best feasible"
        if not pool:
            self.reference, self.reference_kind = None, "none"
            self.gaps = {}
            return
        best = pool[0]
        for r in pool[1:]:
            if (r.objective < best.objective) if self.sense == "min" else (r.objective > best.objective):
                best = r
        self.reference, self.reference_kind = best.method, kind
        self.reference_objective = best.objective
        self.gaps = {r.method: relative_gap(r.objective, best.objective, self.sense)
                     for r in self.rows if r.ok}

    # ------------------------------------------------------------------ verdict
    def disagreements(self, rtol: float | None = None) -> list[str]:
        """Human-readable reasons, one per row that does not agree (empty when all agree)."""
        rtol = self.rtol if rtol is None else rtol
        out = []
        ran = [r for r in self.rows if r.status is not Status.SKIPPED]
        if not ran:
            return ["no method ran"]
        if self.reference is None:
            statuses = {r.status for r in ran}
            if len(statuses) == 1 and next(iter(statuses)) in (Status.INFEASIBLE, Status.UNBOUNDED):
                return []  # every method reports the same verdict
            return [f"{r.method}: {r.status.value}" for r in ran]
        for r in ran:
            if not r.ok:
                out.append(f"{r.method}: status {r.status.value} ({r.message})")
            elif math.isfinite(r.violation) and r.violation > self.vtol:
                out.append(f"{r.method}: violation {r.violation:.3g} > {self.vtol:g}")
            elif abs(self.gaps[r.method]) > rtol:
                out.append(f"{r.method}: relative gap {self.gaps[r.method]:+.3g} beyond rtol {rtol:g}")
        return out

    def agree(self, rtol: float | None = None) -> bool:
        """True when every method that ran is feasible and within ``rtol`` of the reference."""
        return not self.disagreements(rtol)

    def assert_agree(self, rtol: float | None = None) -> None:
        """Raise ``AssertionError`` naming the rows that disagree (for use in test suites)."""
        bad = self.disagreements(rtol)
        if bad:
            raise AssertionError("objectives disagree on " + self.problem_label + ":\n  " + "\n  ".join(bad))

    def result(self, method: str) -> Result:
        for r in self.rows:
            if r.method == method:
                return r
        raise KeyError(method)

    # ------------------------------------------------------------------ output
    def table(self) -> list[dict[str, Any]]:
        rows = []
        for r in self.rows:
            rows.append({
                "method": r.method, "formulation": r.formulation, "solver": r.solver,
                "status": r.status.value, "objective": r.objective,
                "gap": self.gaps.get(r.method, math.nan), "violation": r.violation,
                "min_eig": r.min_eig, "rank": r.rank, "size": r.extras.get("size", ""),
                "compile_s": r.compile_time, "solve_s": r.solve_time, "iterations": r.iterations,
                "message": r.message,
            })
        return rows

    def __str__(self) -> str:
        head = ["method", "formulation", "solver", "status", "objective", "rel.gap", "viol",
                "min_eig", "rank", "size", "compile s", "solve s", "iter"]
        lines = []
        for t in self.table():
            lines.append([
                t["method"], t["formulation"], t["solver"], t["status"], _num(t["objective"], 10),
                _num(t["gap"], 2, signed=True), _num(t["violation"], 2), _num(t["min_eig"], 2),
                str(t["rank"]) if t["status"] != "skipped" else "", t["size"] or "",
                _num(t["compile_s"], 3), _num(t["solve_s"], 3),
                "" if t["iterations"] is None else str(t["iterations"]),
            ])
        widths = [max(len(h), *(len(l[k]) for l in lines)) for k, h in enumerate(head)]
        fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
        out = [f"{self.problem_label}   [{self.sense}imise, fingerprint {self.fingerprint}]",
               fmt(head), fmt(["-" * w for w in widths])]
        out += [fmt(l) for l in lines]
        if self.reference is not None:
            out.append(f"reference: {self.reference} ({self.reference_kind} optimum"
                       f"{'' if self.reference_kind == 'certified' else '; no conic solver certified one'}"
                       f") = {self.reference_objective:.10g}")
        notes = [f"  {r.method}: {r.message}" for r in self.rows
                 if r.status in (Status.SKIPPED, Status.ERROR) or (not r.ok and r.message)]
        if notes:
            out.append("notes:")
            out += notes
        verdict = self.disagreements()
        out.append(f"agree (rtol {self.rtol:g}): " + ("yes" if not verdict else "NO\n  " + "\n  ".join(verdict)))
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernelforms_version": self.version,
            "problem": self.problem_label,
            "params": self.problem_params,
            "fingerprint": self.fingerprint,
            "sense": self.sense,
            "seed": self.seed,
            "rtol": self.rtol,
            "vtol": self.vtol,
            "reference": self.reference,
            "reference_kind": self.reference_kind,
            "reference_objective": _json_float(self.reference_objective),
            "agree": self.agree(),
            "rows": [{**{k: _json_float(v) for k, v in r.summary().items()},
                      "gap": _json_float(self.gaps.get(r.method, math.nan))} for r in self.rows],
        }

    def to_json(self, path: str | None = None, indent: int = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent)
        if path is not None:
            import os
            import tempfile

            d = os.path.dirname(os.path.abspath(path))
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".kernelforms-", suffix=".json")
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)  # atomic: a reader never sees half a file
        return text


def _json_float(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _num(v: Any, digits: int, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:+.{digits}g}" if signed else f"{v:.{digits}g}"


def run_one(problem: Any, spec: Any, *, seed: int, time_limit: float | None,
            options: dict[str, Any]) -> Result:
    """Run one method, turning every failure into a row (never an exception)."""
    from .methods import get_method

    name = spec if isinstance(spec, str) else getattr(spec, "name", repr(spec))
    t0 = time.perf_counter()
    try:
        method = get_method(spec)
        name = method.name
        reason = method.applies_to(problem)
        if reason is not None:
            return Result(method=name, status=Status.SKIPPED, message=reason,
                          formulation=method.formulation_name, solver=method.solver_name)
        return method.run(problem, seed=seed, time_limit=time_limit, **options)
    except NotApplicable as exc:
        return Result(method=name, status=Status.SKIPPED, message=str(exc))
    except KernelformsError as exc:
        return Result(method=name, status=Status.ERROR, message=f"{type(exc).__name__}: {exc}",
                      time=time.perf_counter() - t0)
    except MemoryError:
        return Result(method=name, status=Status.ERROR, message="out of memory",
                      time=time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - a comparison must survive any one method
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return Result(method=name, status=Status.ERROR,
                      message=f"{type(exc).__name__}: {exc} (at {tb.filename}:{tb.lineno})",
                      time=time.perf_counter() - t0)


def compare(problem: Any, methods: Sequence[Any] | str, *, rtol: float = 1e-4, seed: int = 0,
            time_limit: float | None = None, vtol: float = DEFAULT_VTOL,
            options: dict[str, dict[str, Any]] | None = None) -> Report:
    """Run several methods on one problem and compare their objectives.

    Parameters
    ----------
    problem : Problem
    methods : sequence of str, or a comma-separated str
        Method names, e.g. ``["sdp", "sqlp", "admm"]`` or ``"sdp:scs,sdp:clarabel"``.
    rtol : float, default 1e-4
        Relative objective gap under which two rows agree.
    seed : int
        Passed to every method.
    time_limit : float, optional
        Seconds per method.
    vtol : float
        Largest constraint violation for a row to count as feasible.
    options : dict, optional
        Per-method options, keyed by method string.

    Returns
    -------
    Report
        ``str(report)`` is a table; ``report.agree()`` the verdict.  A method that does
        not apply is a skipped row with its reason; a method that fails is an error row.
    """
    if isinstance(methods, str):
        methods = [m for m in methods.split(",") if m.strip()]
    options = options or {}
    rows = []
    for spec in methods:
        key = spec if isinstance(spec, str) else getattr(spec, "name", "")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statuses are in the rows
            rows.append(run_one(problem, spec, seed=seed, time_limit=time_limit,
                                options=dict(options.get(key, {}))))
    return Report(problem_label=problem.label, problem_params=problem.params(),
                  fingerprint=problem.fingerprint(), sense=problem.sense, rows=rows,
                  rtol=rtol, vtol=vtol, seed=seed)
