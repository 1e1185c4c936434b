"""``compare()``: run several methods on one problem and check that their objectives agree.

One :class:`Report` row per method.  Rows survive everything a single method can do:
a method that does not apply is *skipped* with its reason, one that raises is an *error*
row with the message, one that runs past ``time_limit`` is stopped (it runs in a child
process) and becomes a *timeout* row.  With ``json_path`` the finished rows are written
after every method (atomically), so Ctrl-C or a crash leaves them on disk.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .errors import KernelformsError, NotApplicable
from .result import Result, Status

#: default largest constraint violation for a row to count as feasible
DEFAULT_VTOL = 1e-5
#: seconds a child process may run past ``time_limit`` (to return a solver's own
#: time-limited result) before it is killed
KILL_GRACE = 1.0
#: JSON schema tag of :meth:`Report.to_json`
JSON_FORMAT = "kernelforms-report/1"


def relative_gap(objective: float, reference: float, sense: str) -> float:
    """Signed relative gap, positive when ``objective`` is worse than ``reference``."""
    if not (math.isfinite(objective) and math.isfinite(reference)):
        return math.inf if objective != reference else 0.0
    diff = objective - reference if sense == "min" else reference - objective
    return diff / max(abs(reference), 1e-12)


def _is_certifying(r: Result) -> bool:
    if "certifying" in r.extras:
        return bool(r.extras["certifying"])
    from .methods import get_method

    try:
        return bool(get_method(r.method).certifying)
    except (KernelformsError, TypeError):
        return False


@dataclass
class Report:
    """The outcome of :func:`compare`: one :class:`~kernelforms.result.Result` per method.

    Attributes
    ----------
    rows : list of Result
        In the order the methods were given; skipped methods have status ``skipped``
        and the reason in ``message``; failures are ``error`` / ``timeout`` rows.
    reference : str or None
        The method whose objective is the reference; ``reference_kind`` says how it was
        chosen: ``"certified"`` (a conic solver's optimality certificate), ``"certified
        bound"`` (a factorised row whose :mod:`~kernelforms.certificate` gap is within
        ``rtol``) or ``"best feasible"`` (no certificate: the best feasible objective).
    complete : bool
        False when the comparison was interrupted (the rows are the finished ones).
    recipe : dict or None
        How to rebuild the instance (set by the CLI; see :mod:`kernelforms.testing`).
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
    complete: bool = True
    recipe: dict[str, Any] | None = None
    time_limit: float | None = None

    def __post_init__(self) -> None:
        if not self.version:
            from ._version import __version__

            self.version = __version__
        self._choose_reference()

    # ------------------------------------------------------------------ reference
    def _feasible(self, r: Result) -> bool:
        return r.ok and (not math.isfinite(r.violation) or r.violation <= self.vtol)

    def _choose_reference(self) -> None:
        def better(a: Result, b: Result) -> bool:
            return a.objective < b.objective if self.sense == "min" else a.objective > b.objective

        feasible = [r for r in self.rows if self._feasible(r)]
        kinds = [
            ("certified", [r for r in feasible if r.status.certifies_optimality and _is_certifying(r)]),
            ("certified bound", [r for r in feasible
                                 if abs(r.extras.get("certified_gap", math.inf)) <= self.rtol]),
            ("best feasible", feasible),
        ]
        for kind, pool in kinds:
            if pool:
                break
        else:
            self.reference, self.reference_kind, self.reference_objective = None, "none", math.nan
            self.gaps = {}
            return
        best = pool[0]
        for r in pool[1:]:
            if better(r, best):
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
            return [f"{r.method}: {r.status.value}" + (f" ({r.message})" if r.message else "")
                    for r in ran]
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
            raise AssertionError("objectives disagree on " + self.problem_label + ":\n  " + "\n  ".join(bad)
                                 + "\n" + str(self))

    def result(self, method: str) -> Result:
        for r in self.rows:
            if r.method == method:
                return r
        raise KeyError(method)

    # ------------------------------------------------------------------ output
    def table(self) -> list[dict[str, Any]]:
        """One dict per row: the report's columns (scalars only)."""
        rows = []
        for r in self.rows:
            rows.append({
                "method": r.method, "formulation": r.formulation, "solver": r.solver,
                "status": r.status.value, "objective": r.objective,
                "gap": self.gaps.get(r.method, math.nan), "violation": r.violation,
                "min_eig": r.min_eig, "rank": r.rank, "size": r.extras.get("size", "") or "",
                "compile_s": r.compile_time, "solve_s": r.solve_time, "time_s": r.time,
                "iterations": r.iterations,
                "cert_gap": r.extras.get("certified_gap", math.nan),
                "message": r.message,
            })
        return rows

    _HEAD = ["method", "formulation", "solver", "status", "objective", "rel.gap", "cert.gap",
             "viol", "min_eig", "rank", "size", "compile s", "solve s", "iter"]

    def _cells(self) -> list[list[str]]:
        lines = []
        for t in self.table():
            skipped = t["status"] == "skipped"
            failed = t["status"] in ("skipped", "error", "timeout")
            lines.append([
                t["method"], t["formulation"], t["solver"], t["status"], _num(t["objective"], 10),
                _num(t["gap"], 2, signed=True), _num(t["cert_gap"], 2), _num(t["violation"], 2),
                _num(t["min_eig"], 2), "" if skipped or t["status"] in ("error", "timeout") and
                not t["rank"] else str(t["rank"]), t["size"],
                _num(t["compile_s"] or (math.nan if failed else 0.0), 3),
                _num(t["solve_s"] or (math.nan if failed else 0.0), 3),
                "" if t["iterations"] is None else str(t["iterations"]),
            ])
        return lines

    def _footer(self) -> list[str]:
        out = []
        if self.reference is not None:
            how = {"certified": "certified optimum",
                   "certified bound": "certified by its gradient bound; no conic certificate",
                   "best feasible": "best feasible objective; nothing certified it"}[self.reference_kind]
            out.append(f"reference: {self.reference} ({how}) = {self.reference_objective:.10g}")
        else:
            out.append("reference: none (no feasible row)")
        notes = [f"{r.method}: {r.message}" for r in self.rows
                 if r.status in (Status.SKIPPED, Status.ERROR, Status.TIMEOUT)
                 or (not r.ok and r.message)]
        if notes:
            out.append("notes:")
            out += ["  " + n for n in notes]
        if not self.complete:
            out.append("INCOMPLETE: the comparison was interrupted; these are the finished rows")
        return out

    def __str__(self) -> str:
        lines = self._cells()
        head = self._HEAD
        widths = [max(len(h), *(len(l[k]) for l in lines)) if lines else len(h) for k, h in enumerate(head)]
        fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
        out = [f"{self.problem_label}   [{self.sense}imise, fingerprint {self.fingerprint}]",
               fmt(head), fmt(["-" * w for w in widths])]
        out += [fmt(l) for l in lines]
        out += self._footer()
        verdict = self.disagreements()
        out.append(f"agree (rtol {self.rtol:g}): " + ("yes" if not verdict else "NO\n  " + "\n  ".join(verdict)))
        return "\n".join(out)

    def to_markdown(self) -> str:
        """The report as a GitHub-flavoured Markdown table with the verdict below it."""
        esc = lambda s: s.replace("|", "\\|")  # noqa: E731
        out = [f"**{esc(self.problem_label)}** ({self.sense}imise, fingerprint `{self.fingerprint}`)", "",
               "| " + " | ".join(self._HEAD) + " |",
               "|" + "|".join("---:" if h not in ("method", "formulation", "solver", "status", "size")
                              else "---" for h in self._HEAD) + "|"]
        out += ["| " + " | ".join(esc(c) for c in cells) + " |" for cells in self._cells()]
        out.append("")
        out += [("- " + l.strip()) if not l.startswith("  ") else ("  - " + esc(l.strip()))
                for l in self._footer()]
        verdict = self.disagreements()
        out.append(f"- agree (rtol {self.rtol:g}): " + ("**yes**" if not verdict else "**NO**"))
        out += [f"  - {esc(v)}" for v in verdict]
        return "\n".join(out) + "\n"

    def to_frame(self):
        """The :meth:`table` as a ``pandas.DataFrame`` (pandas is an optional dependency)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("Report.to_frame needs pandas (pip install pandas)") from exc
        return pd.DataFrame(self.table()).set_index("method")

    def to_dict(self, include_history: bool = True) -> dict[str, Any]:
        """JSON-friendly dict; :meth:`from_dict` reads it back."""
        rows = []
        for r in self.rows:
            d = {k: _json_float(v) for k, v in r.summary().items()}
            d["gap"] = _json_float(self.gaps.get(r.method, math.nan))
            d["extras"] = _jsonable({k: v for k, v in r.extras.items() if k != "size"})
            if include_history and r.history:
                d["history"] = _jsonable(r.history)
            rows.append(d)
        return {
            "format": JSON_FORMAT,
            "kernelforms_version": self.version,
            "problem": self.problem_label,
            "params": _jsonable(self.problem_params),
            "fingerprint": self.fingerprint,
            "sense": self.sense,
            "seed": self.seed,
            "rtol": self.rtol,
            "vtol": self.vtol,
            "time_limit": self.time_limit,
            "recipe": _jsonable(self.recipe),
            "complete": self.complete,
            "reference": self.reference,
            "reference_kind": self.reference_kind,
            "reference_objective": _json_float(self.reference_objective),
            "agree": self.agree(),
            "rows": rows,
        }

    def to_json(self, path: str | os.PathLike | None = None, indent: int = 2,
                include_history: bool = True) -> str:
        """The report as JSON text; with ``path`` also written atomically (temp file + rename)."""
        text = json.dumps(self.to_dict(include_history), indent=indent)
        if path is not None:
            atomic_write(path, text)
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Report":
        """Rebuild a report (without kernels) from :meth:`to_dict` output."""
        rows = []
        for d in data["rows"]:
            extras = dict(d.get("extras") or {})
            if d.get("size") is not None:
                extras["size"] = d["size"]
            rows.append(Result(
                method=d["method"], status=Status(d["status"]),
                objective=_float(d.get("objective")), violation=_float(d.get("violation")),
                min_eig=_float(d.get("min_eig")), rank=int(d.get("rank") or 0),
                time=_float(d.get("time"), 0.0), compile_time=_float(d.get("compile_time"), 0.0),
                solve_time=_float(d.get("solve_time"), 0.0), iterations=d.get("iterations"),
                history={k: [_float(x) for x in v] for k, v in (d.get("history") or {}).items()},
                formulation=d.get("formulation", ""), solver=d.get("solver", ""),
                message=d.get("message", ""), extras=extras))
        rep = cls(problem_label=data["problem"], problem_params=dict(data.get("params") or {}),
                  fingerprint=data["fingerprint"], sense=data["sense"], rows=rows,
                  rtol=data.get("rtol", 1e-4), vtol=data.get("vtol", DEFAULT_VTOL),
                  seed=data.get("seed", 0), version=data.get("kernelforms_version", ""),
                  complete=data.get("complete", True), recipe=data.get("recipe"),
                  time_limit=data.get("time_limit"))
        # keep the stored verdict on the reference (it was chosen with the live methods)
        rep.reference = data.get("reference")
        rep.reference_kind = data.get("reference_kind", rep.reference_kind)
        rep.reference_objective = _float(data.get("reference_objective"))
        rep.gaps = {r["method"]: _float(r["gap"]) for r in data["rows"] if r.get("gap") is not None}
        return rep

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike) -> "Report":
        """Read a report from JSON text or from a file path."""
        s = os.fspath(text_or_path)
        if not s.lstrip().startswith("{"):
            with open(s) as fh:
                s = fh.read()
        return cls.from_dict(json.loads(s))


# ---------------------------------------------------------------------- helpers
def atomic_write(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory and a rename,
    so that a reader (or a crash) never sees half a file."""
    import tempfile

    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".kernelforms-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _json_float(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _float(v: Any, default: float = math.nan) -> float:
    if v is None:
        return default
    if isinstance(v, str):
        return {"inf": math.inf, "-inf": -math.inf}.get(v, default)
    return float(v)


def _jsonable(v: Any) -> Any:
    """Plain JSON types from numpy scalars / arrays / tuples; other objects as their repr."""
    import numpy as np

    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return _json_float(float(v))
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist()) if v.size <= 10_000 else f"<array {v.shape}>"
    return repr(v)


def _num(v: Any, digits: int, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:+.{digits}g}" if signed else f"{v:.{digits}g}"


def _name(spec: Any) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "name", repr(spec))


# ---------------------------------------------------------------------- running one method
def run_one(problem: Any, spec: Any, *, seed: int, time_limit: float | None,
            options: dict[str, Any]) -> Result:
    """Run one method in this process, turning every failure into a row (never an exception)."""
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
        res.extras.setdefault("certifying", bool(method.certifying))
        return res
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
                      message=f"{type(exc).__name__}: {exc} (at {os.path.basename(tb.filename)}:{tb.lineno})",
                      time=time.perf_counter() - t0)


def _child_main(conn: Any, problem: Any, method: Any, seed: int, time_limit: float | None,
                options: dict[str, Any]) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run_one(problem, method, seed=seed, time_limit=time_limit, options=options)
        conn.send(res)
    except BaseException as exc:  # noqa: BLE001 - report anything (even pickling failures)
        try:
            conn.send(Result(method=_name(method), status=Status.ERROR,
                             message=f"{type(exc).__name__} in the child process: {exc}"))
        except BaseException:  # noqa: BLE001
            pass
    finally:
        conn.close()


#: modules the fork server imports once, so that each child starts warm
FORKSERVER_PRELOAD = ["kernelforms", "kernelforms.solvers.conic", "kernelforms.formulations.full_sdp",
                      "cvxpy"]


def _mp_context():
    """A "forkserver" context where available, else "spawn".

    Plain "fork" is not safe here: a conic solver that ran in this process leaves thread
    pools behind (Clarabel's), and a forked child that uses them deadlocks.  The fork server
    is a clean single-threaded process started once that imports :data:`FORKSERVER_PRELOAD`;
    children fork from it, so they start in milliseconds with cvxpy already imported.
    """
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
        return ctx
    return mp.get_context("spawn")


class _main_not_reimported:
    """While starting a forkserver / spawn child, hide the path of a ``__main__`` *script*.

    multiprocessing would otherwise re-run the whole script in the child (and fail on a
    script without the ``if __name__ == "__main__"`` guard).  The child only needs
    importable modules: the method and the problem are pickled by reference to theirs.
    """

    def __init__(self, ctx: Any) -> None:
        self.active = ctx.get_start_method() != "fork"
        self.saved: Any = None

    def __enter__(self) -> None:
        main = sys.modules.get("__main__")
        spec_name = getattr(getattr(main, "__spec__", None), "name", None)
        if self.active and main is not None and spec_name is None and hasattr(main, "__file__"):
            self.saved = main.__file__
            del main.__file__

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            sys.modules["__main__"].__file__ = self.saved


_WARM: set[int] = set()


def _noop() -> None:
    pass


def _warm_up(ctx: Any) -> None:
    """Start the fork server and wait for its imports, once per process, so that this
    start-up time is not charged to the first method's time limit."""
    if os.getpid() in _WARM:
        return
    p = ctx.Process(target=_noop)
    with _main_not_reimported(ctx):
        p.start()
    p.join(120)
    _WARM.add(os.getpid())


def can_isolate() -> bool:
    """False inside a daemonic process (which may not start children)."""
    import multiprocessing as mp

    return not mp.current_process().daemon


def run_isolated(problem: Any, method: Any, *, seed: int, time_limit: float,
                 options: dict[str, Any], grace: float = KILL_GRACE,
                 tick: Callable[[float], None] | None = None) -> Result:
    """Run one method in a child process and kill it ``grace`` seconds after ``time_limit``.

    The method is also told ``time_limit`` so that a well-behaved solver stops by itself
    and returns its partial result; the kill is for the others.  The child sends back the
    :class:`Result` (a picklable dataclass).
    """
    import multiprocessing as mp

    in_main = any(type(x).__module__ == "__main__" for x in (problem, method))
    # objects defined in a script's __main__ cannot be unpickled by a fresh child: fork then
    ctx = mp.get_context("fork") if in_main and "fork" in mp.get_all_start_methods() else _mp_context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(send, problem, method, seed, time_limit, options),
                       name=f"kernelforms:{_name(method)}")
    if ctx.get_start_method() == "forkserver":
        _warm_up(ctx)
    t0 = time.perf_counter()
    with _main_not_reimported(ctx):
        proc.start()
    send.close()
    deadline = t0 + float(time_limit) + grace
    res: Result | None = None
    try:
        while True:
            now = time.perf_counter()
            if now >= deadline:
                break
            if recv.poll(min(0.2, deadline - now)):
                try:
                    res = recv.recv()
                except (EOFError, OSError):
                    res = None
                break
            if tick is not None:
                tick(time.perf_counter() - t0)
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


# ---------------------------------------------------------------------- progress
class Progress:
    """One line per method with its elapsed time, on a terminal only (``enabled=None``)."""

    def __init__(self, total: int, enabled: bool | None = None, stream: Any = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = tty if enabled is None else bool(enabled)
        self.live = self.enabled and tty
        self.total = total
        self._label = ""
        self._t0 = 0.0
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self, i: int, name: str, background: bool = False) -> None:
        if not self.enabled:
            return
        self._label = f"[{i}/{self.total}] {name}"
        self._t0 = time.perf_counter()
        self.tick(0.0)
        if background and self.live:  # in-process runs: a ticker thread redraws the line
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        assert self._stop is not None
        while not self._stop.wait(0.5):
            self.tick(time.perf_counter() - self._t0)

    def tick(self, elapsed: float) -> None:
        if self.live:
            self.stream.write(f"\r{self._label}  running {elapsed:6.1f} s\x1b[K")
            self.stream.flush()

    def interrupted(self) -> None:
        if self.enabled:
            self._stop_ticker()
            self.stream.write(("\r" if self.live else "") + f"{self._label}  interrupted\n")
            self.stream.flush()

    def _stop_ticker(self) -> None:
        if self._stop is not None:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            self._stop = self._thread = None

    def done(self, res: Result) -> None:
        if not self.enabled:
            return
        self._stop_ticker()
        elapsed = time.perf_counter() - self._t0
        obj = f"  objective {res.objective:.8g}" if math.isfinite(res.objective) else ""
        line = f"{self._label}  {res.status.value:<10} {elapsed:6.1f} s{obj}"
        self.stream.write(("\r" if self.live else "") + line + ("\x1b[K" if self.live else "") + "\n")
        self.stream.flush()


# ---------------------------------------------------------------------- certificates
def attach_certificate(problem: Any, res: Result) -> None:
    """Add ``certified_gap`` and ``lower_bound`` (``upper_bound`` for MVU) to ``res.extras``
    when a certificate applies."""
    from . import certificate

    if res.factor is None or not res.ok or certificate.applies(problem) is not None:
        return
    t0 = time.perf_counter()
    try:
        cert = certificate.certify(problem, res.kernel)
        lam = res.extras.get("edge_multipliers")
        if lam is not None and hasattr(lam, "shape") and cert.sense == "max":  # MVU: the solver's own, if tighter
            own = certificate.certify(problem, res.kernel, multipliers=lam)
            if own.upper_bound < cert.upper_bound:
                cert = own
    except KernelformsError as exc:
        res.extras["certificate_note"] = str(exc)
        return
    except Exception as exc:  # noqa: BLE001 - a failed certificate must not lose the row
        res.extras["certificate_note"] = f"{type(exc).__name__}: {exc}"
        return
    if cert.sense == "max":
        res.extras["upper_bound"] = cert.upper_bound
        res.extras["certified_gap"] = (cert.upper_bound - res.objective) / max(abs(res.objective), 1e-12)
    else:
        res.extras["lower_bound"] = cert.lower_bound
        res.extras["certified_gap"] = (res.objective - cert.lower_bound) / max(abs(res.objective), 1e-12)
    res.extras["certificate_time"] = time.perf_counter() - t0


# ---------------------------------------------------------------------- compare
def compare(problem: Any, methods: Sequence[Any] | str, *, rtol: float = 1e-4, seed: int = 0,
            time_limit: float | None = None, vtol: float = DEFAULT_VTOL,
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
        Relative objective gap under which two rows agree.
    seed : int
        Passed to every method.
    time_limit : float, optional
        Seconds per method.  With a limit every method runs in a child process that is
        killed ``kill_grace`` seconds after the limit (row status ``timeout``); without
        one, methods run in this process.
    vtol : float
        Largest constraint violation for a row to count as feasible.
    options : dict, optional
        Per-method options, keyed by method string.
    certify : bool, default True
        Add a certified gap (:mod:`kernelforms.certificate`) to rows with a kernel when
        the problem has a certificate.
    json_path : path, optional
        Write the report here after every finished method (atomically), so an interrupted
        comparison leaves its finished rows; the final report overwrites it.
    progress : bool, optional
        One line per method on stderr; default: only when stderr is a terminal.
    recipe : dict, optional
        How the instance was built (stored in the report, used by baselines).

    Returns
    -------
    Report
        ``str(report)`` is a table; ``report.agree()`` the verdict.

    Raises
    ------
    KeyboardInterrupt
        Re-raised after the finished rows were written to ``json_path`` (the partial
        report is attached as ``exc.report``).
    """
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    methods = list(methods)
    options = options or {}
    rows: list[Result] = []
    isolate = time_limit is not None and can_isolate()
    bar = Progress(len(methods), progress)
    if isolate:
        ctx = _mp_context()
        if ctx.get_start_method() == "forkserver":
            _warm_up(ctx)

    def report(complete: bool) -> Report:
        return Report(problem_label=problem.label, problem_params=problem.params(),
                      fingerprint=problem.fingerprint(), sense=problem.sense, rows=list(rows),
                      rtol=rtol, vtol=vtol, seed=seed, complete=complete, recipe=recipe,
                      time_limit=time_limit)

    try:
        for i, spec in enumerate(methods, 1):
            key = spec if isinstance(spec, str) else getattr(spec, "name", "")
            opts = dict(options.get(key, {}))
            res = _prepare(problem, spec)
            bar.start(i, _name(spec) if res is None else res.method, background=not isolate)
            if res is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # statuses are in the rows
                    if isolate:
                        from .methods import get_method

                        res = run_isolated(problem, get_method(spec), seed=seed,
                                           time_limit=float(time_limit), options=opts,
                                           grace=kill_grace, tick=bar.tick)
                    else:
                        res = run_one(problem, spec, seed=seed, time_limit=time_limit, options=opts)
                if res.factor is not None and not res.extras.get("size"):
                    res.extras["size"] = "factor {} x {}".format(*res.factor.shape)
                if certify:
                    attach_certificate(problem, res)
            bar.done(res)
            rows.append(res)
            if json_path is not None and i < len(methods):
                report(False).to_json(json_path)
    except KeyboardInterrupt as exc:
        bar.interrupted()
        partial = report(False)
        if json_path is not None:
            partial.to_json(json_path)
        exc.report = partial  # type: ignore[attr-defined]
        raise
    final = report(True)
    if json_path is not None:
        final.to_json(json_path)
    return final


def _prepare(problem: Any, spec: Any) -> Result | None:
    """A finished row for methods that cannot start (unknown, or not applicable), else None."""
    from .methods import get_method

    try:
        method = get_method(spec)
        reason = method.applies_to(problem)
    except NotApplicable as exc:
        return Result(method=_name(spec), status=Status.SKIPPED, message=str(exc))
    except KernelformsError as exc:
        return Result(method=_name(spec), status=Status.ERROR, message=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001
        return Result(method=_name(spec), status=Status.ERROR, message=f"{type(exc).__name__}: {exc}")
    if reason is not None:
        return Result(method=method.name, status=Status.SKIPPED, message=reason,
                      formulation=method.formulation_name, solver=method.solver_name)
    return None
