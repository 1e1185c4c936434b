"""``compare_grid``: many instances (sizes, seeds, data sets) compared in parallel.

Every instance is one task for a :class:`concurrent.futures.Executor`: local processes by
default, or any executor with the same interface, for instance a Dask cluster (a
``dask.distributed.Client`` is accepted as it is)::

    from dask.distributed import Client
    client = Client("tcp://scheduler:8786")
    reports = compare_grid(recipes, ["sdp:scs", "admm"], executor=client, json_path="grid.json")

Anything whose ``submit(fn, *args)`` returns a :class:`concurrent.futures.Future` works (for Ray, a
ten-line ``Executor`` around ``ray.remote`` is shown in docs/compare.md).  Instances may be
given as :class:`~kernelforms.problems.base.Problem` objects or as *recipes* (dicts of
``kernelforms compare`` options, see :mod:`kernelforms.testing`), which are small to send
to remote workers and are built there.  With ``json_path`` the reports stream into one JSON
file as instances finish (:class:`GridJSON`); a worker process that dies becomes an
``error`` row for its instance ("worker lost"), not a lost grid (see :func:`compare_grid`).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import sys
import tempfile
import textwrap
import threading
import time
import warnings
from concurrent.futures import (FIRST_COMPLETED, CancelledError, Executor, Future, ProcessPoolExecutor,
                                ThreadPoolExecutor, wait)
from concurrent.futures.process import BrokenProcessPool
from contextlib import nullcontext
from typing import Any, Iterable, Sequence

from .processes import _has_main_guard, pool_mode  # noqa: F401 - re-exported
from .compare import KILL_GRACE, Report, check_compare_args, compare
from .errors import OptionError, ProblemError
from .progress import Progress
from .report import (DEFAULT_VTOL, ReportWriteWarning, atomic_write, check_writable, default_vtol,
                     seed_to_json)
from .result import Result, Status
from .util import render_table

#: the keyword arguments of compare() that compare_grid passes on to every instance
GRID_OPTIONS = ("rtol", "seed", "time_limit", "vtol", "options", "certify", "kill_grace")
#: names of the exception classes (matched along the MRO, so that no executor's package is
#: imported) that mean "the worker process running this task died": a local process pool's
#: ``BrokenProcessPool`` and ``dask.distributed``'s ``KilledWorker``
LOST_WORKER_ERRORS = ("BrokenProcessPool", "KilledWorker")


def _run(instance: Any, methods: Sequence[Any], kwargs: dict[str, Any], recipe: dict[str, Any] | None = None,
         marker: str | None = None) -> Report:
    """One task of the grid, run by a worker: build a recipe instance, then compare.

    ``marker`` (local process pools only) is a file created as the task starts, so that after
    the pool breaks the grid can tell the instances that had started from those still queued.
    """
    if marker is not None:
        try:
            with open(marker, "w"):
                pass
        except OSError:  # the grid gave up on this task (and removed its marker directory)
            pass
    if isinstance(instance, dict):
        from .recipes import build_from_recipe, make_recipe

        recipe = make_recipe(**instance)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            instance = build_from_recipe(recipe)
    kwargs = dict(kwargs)
    kwargs["progress"] = False
    return compare(instance, methods, recipe=recipe, **kwargs)


def worker_lost(exc: BaseException) -> bool:
    """True when ``exc`` says that the worker process running a task died (see
    :data:`LOST_WORKER_ERRORS`)."""
    return any(c.__name__ in LOST_WORKER_ERRORS for c in type(exc).__mro__)


def lost_report(instance: Any, methods: Sequence[Any], kwargs: dict[str, Any], why: str,
                recipe: dict[str, Any] | None = None) -> Report:
    """The report of an instance that did not finish (its worker died, it raised, the executor
    refused or cancelled it): one ``error`` row per method with the message ``why`` (which
    starts with "worker lost" when the worker died), ``complete=False``; its verdict is
    ``unverified`` (exit status 3).  Built in this process; a recipe instance is built here to
    name it (its label, size and fingerprint), falling back on the recipe's name."""
    from .isolation import _name
    from .methods import get_method
    from .recipes import build_from_recipe, make_recipe, recipe_name

    problem = instance
    if isinstance(instance, dict):
        recipe = make_recipe(**instance)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                problem = build_from_recipe(recipe)
        except Exception:  # noqa: BLE001 - the worker died; name the instance by its recipe
            problem = None
    if problem is not None:
        try:
            label, params, fp, sense = problem.label, problem.params(), problem.fingerprint(), problem.sense
        except Exception:  # noqa: BLE001 - the instance itself is what failed
            problem = None
    rows = []
    for spec in methods:
        try:
            name = get_method(spec).name
        except Exception:  # noqa: BLE001 - checked before the grid started; keep the name given
            name = _name(spec)
        rows.append(Result(method=name, status=Status.ERROR, message=why))
    if problem is None:
        if recipe is not None:
            label, fp, sense = recipe_name(recipe), "", "min"
            params = {} if recipe.get("n_points") is None else {"n": recipe["n_points"]}
        else:
            label, fp, sense, params = type(instance).__name__, "", "min", {}
    return Report(problem_label=label, problem_params=params, fingerprint=fp, sense=sense, rows=rows,
                  rtol=float(kwargs.get("rtol", 1e-4)),
                  vtol=(float(kwargs["vtol"]) if kwargs.get("vtol") is not None
                        else _safe_vtol(problem)),
                  seed=seed_to_json(kwargs.get("seed", 0)), complete=False, recipe=recipe,
                  time_limit=kwargs.get("time_limit"))


def _safe_vtol(problem: Any) -> float:
    try:
        return default_vtol(problem) if problem is not None else DEFAULT_VTOL
    except Exception:  # noqa: BLE001 - a broken instance: the default
        return DEFAULT_VTOL


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text[:500]}" if text else type(exc).__name__


#: seconds a dask cluster may go without a worker, or its scheduler without answering, while
#: instances wait, before those instances become error rows (a cluster that lost its only
#: worker would otherwise be waited for without end)
DASK_UNHEALTHY_WAIT = 60.0
#: seconds between two checks of a dask cluster's health
DASK_PROBE_EVERY = 1.0


class DaskWatch:
    """Watches the dask cluster behind an executor from a background thread: the last time
    its scheduler answered with at least one worker.  :meth:`trouble` says why the grid should
    stop waiting (None while the cluster is healthy, or was within ``DASK_UNHEALTHY_WAIT``)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.healthy_at = time.monotonic()
        self.last = "no answer from the dask scheduler yet"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="kernelforms-dask-watch", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                status = str(getattr(self.client, "status", "running"))
                if status in ("closed", "closing", "failed"):
                    self.last = f"the dask client is {status}"
                else:
                    # said first: a frozen scheduler never returns from the request
                    self.last = "the dask scheduler does not answer (a request waits without reply)"
                    info = self.client.scheduler_info(n_workers=-1)
                    workers = len(info.get("workers") or {}) if isinstance(info, dict) else 0
                    if workers:
                        self.healthy_at = time.monotonic()
                        self.last = ""
                    else:
                        self.last = "the dask cluster has no worker (its workers died or left)"
            except Exception as exc:  # noqa: BLE001 - a dead scheduler: CommClosedError, OSError ...
                self.last = f"the dask scheduler does not answer ({_describe(exc)})"
            self.stop.wait(DASK_PROBE_EVERY)

    def trouble(self) -> str | None:
        waited = time.monotonic() - self.healthy_at
        if waited <= DASK_UNHEALTHY_WAIT:
            return None
        return (f"{self.last or 'the dask scheduler does not answer'}; gave up after "
                f"{waited:.0f} s without a healthy cluster")

    def close(self) -> None:
        self.stop.set()


def _dask_client(executor: Any) -> Any:
    """The dask.distributed Client behind ``executor`` (a Client, or its ClientExecutor)."""
    if callable(getattr(executor, "get_executor", None)) and callable(getattr(executor, "scheduler_info", None)):
        return executor
    inner = getattr(executor, "_client", None)
    if inner is not None and callable(getattr(inner, "scheduler_info", None)):
        return inner
    return None


class GridJSON:
    """The grid's JSON file: a list of the finished instances' reports in the order of the
    instances, each with its position in the grid as ``"instance"``, rewritten atomically
    (temporary file, then rename) as instances finish.

    The file is created at once (an empty list).  Each report is serialised once; rewrites are
    spaced so that writing takes at most about a tenth of the wall time (a grid of thousands of
    reports with histories does not spend its time rewriting the file): a rewrite that comes
    too soon is made at the next check, within half a second.  A write that fails warns once
    (:class:`~kernelforms.report.ReportWriteWarning`) and the grid goes on.
    """

    #: the largest share of wall time spent rewriting the file
    SHARE = 0.1

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = path
        self.texts: dict[int, str] = {}
        self.dirty = True
        self.next_at = 0.0
        self.error: str | None = None
        self.flush(force=True)

    def add(self, k: int, report: Report) -> None:
        """Record instance ``k``'s report and rewrite the file (unless the last write was too recent)."""
        text = json.dumps({"instance": k, **report.to_dict()}, indent=2)
        self.texts[k] = textwrap.indent(text, "  ")
        self.dirty = True
        self.flush()

    def flush(self, force: bool = False) -> None:
        """Rewrite the file if a report came since the last write (``force``: whatever the spacing)."""
        if not self.dirty or (not force and time.perf_counter() < self.next_at):
            return
        t0 = time.perf_counter()
        body = ",\n".join(self.texts[k] for k in sorted(self.texts))
        try:
            atomic_write(self.path, f"[\n{body}\n]\n" if body else "[]\n")
        except OSError as exc:
            if self.error is None:
                self.error = (f"could not write the grid's reports to {os.fspath(self.path)!r}: {exc}; "
                              "the grid goes on and returns its reports")
                warnings.warn(self.error, ReportWriteWarning, stacklevel=4)
        self.dirty = False
        took = time.perf_counter() - t0
        self.next_at = time.perf_counter() + took * (1.0 / self.SHARE - 1.0)

def _check_items(items: list[Any]) -> None:
    from .recipes import make_recipe

    if not items:
        raise OptionError("compare_grid needs at least one instance (a Problem or a recipe dict).")
    for k, it in enumerate(items):
        if isinstance(it, dict):
            try:
                make_recipe(**it)
            except ProblemError as exc:
                raise ProblemError(f"instance {k} of the grid: {exc}") from None
        elif not all(hasattr(it, a) for a in ("label", "params", "fingerprint", "sense")):
            raise ProblemError(f"instance {k} of the grid must be a kernelforms problem or a recipe dict "
                               f"such as {{'problem': 'pcp', 'dataset': 'iris', 'n_points': 60}}; got "
                               f"{type(it).__name__}.")


def compare_grid(problems: Iterable[Any], methods: Sequence[Any] | str, *,
                 executor: Any = None, max_workers: int | None = None,
                 progress: bool | None = None, json_path: str | os.PathLike | None = None,
                 recipes: Sequence[dict[str, Any] | None] | None = None,
                 **compare_options: Any) -> list[Report]:
    """Run :func:`~kernelforms.compare` on every instance, in parallel.

    Parameters
    ----------
    problems : iterable of Problem or recipe dict
        The instances.  Recipes (``{"problem": "pcp", "dataset": "iris", "n_points": 60,
        "seed": 1}``) are built by the worker.
    methods : sequence of str, or comma-separated str
        As for :func:`~kernelforms.compare` (strings travel best to remote workers).
    executor : concurrent.futures.Executor or dask.distributed.Client, optional
        Where the tasks run.  Default: a local :class:`~concurrent.futures.ProcessPoolExecutor`
        with ``max_workers`` processes (default: the number of CPUs), shut down at the end.
        It works from a plain script without an ``if __name__ == "__main__":`` guard (the
        workers do not re-run the script); when the tasks hold objects defined in such a
        script (or interactively), or objects that cannot be pickled, the instances run in
        threads of this process instead, with a ``RuntimeWarning``.  A ``dask.distributed``
        ``Client`` runs them on its cluster (``client.get_executor(pure=False)``).  A
        caller's executor is left running.
    progress : bool, optional
        One line per finished instance on stderr (a live bar on a terminal); default on.
    json_path : path, optional
        Stream the reports here: a JSON list of the finished instances' reports (in the
        order of ``problems``, each with its position as ``"instance"``), rewritten
        atomically as instances finish (see :class:`GridJSON`), so that an interrupted or
        failed grid leaves the finished instances.  Refused before any work when it cannot
        be written.
    recipes : sequence of dict or None, optional
        One per instance: how each ``Problem`` instance was built, stored as its report's
        ``recipe`` (the CLI passes the recipes it built from).  Recipe instances store their own.
    **compare_options
        ``rtol``, ``seed``, ``time_limit``, ``vtol``, ``options``, ``certify``,
        ``kill_grace`` for every instance; checked here, before any worker starts.

    Returns
    -------
    list of Report
        In the order of ``problems``, one per instance, also when instances fail: an instance
        that raises in its worker (any exception, a ``MemoryError`` included, or a recipe that
        cannot be built there), that the executor refuses (``submit`` raises: an executor
        that was shut down, a closed client) or cancels (a dask scheduler that stopped), or
        whose dask cluster has had no worker, or no answering scheduler, for
        :data:`DASK_UNHEALTHY_WAIT` seconds, gets a report of ``error`` rows saying why
        (``complete=False``, verdict ``unverified``, exit status 3); the other instances
        finish.  Nothing finished is lost, with or without ``json_path``.

    Raises
    ------
    OptionError, ProblemError
        Before any work: ``problems`` not a list (None, a single problem or recipe), an
        invalid recipe, ``max_workers`` not an int >= 1, an ``executor`` without ``submit``,
        bad ``compare`` options, an unwritable ``json_path``.

    Notes
    -----
    **A lost worker is an error row, not a lost grid.**  When the worker process running an
    instance dies (a segfault, ``os._exit``, the out-of-memory killer; the executor reports
    :data:`LOST_WORKER_ERRORS`), the other instances go on.  The instance is retried once,
    *alone*, after the others have finished: a task that only shared a dying worker (or a
    broken process pool) with the culprit finishes normally, while an instance whose worker
    dies again gets a report whose rows are all ``error`` with the message ``worker lost
    ...`` (``complete=False``, verdict ``disagree``).  A local process pool that breaks
    (``BrokenProcessPool`` fails every queued task) is replaced by a fresh pool: the
    instances that had not started are resubmitted there, those that had started are
    retried alone (a caller's broken pool is left as it is; the fresh pool is
    kernelforms' own, with as many workers, shut down at the end).  On dask, a task is
    reported lost (``KilledWorker``) after its workers died
    ``distributed.scheduler.allowed-failures`` + 1 times (default 4); dask retries it
    before that.
    """
    if problems is None or isinstance(problems, (str, bytes, dict)) or not hasattr(problems, "__iter__"):
        single = isinstance(problems, dict) or hasattr(problems, "fingerprint")
        raise OptionError("The 'problems' argument of compare_grid must be a list of problems or recipe "
                          "dicts, e.g. [kf.PCP.from_data(X, pairs)] or [{'problem': 'pcp', 'dataset': "
                          "'iris', 'n_points': 60}]" + ("; wrap a single instance in a list" if single else "")
                          + f". Got {type(problems).__name__} instead.")
    items = list(problems)
    if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int)
                                    or max_workers < 1):
        raise OptionError(f"The 'max_workers' argument of compare_grid must be an int >= 1 (or None: "
                          f"one per CPU). Got {max_workers!r} instead.")
    unknown = sorted(set(compare_options) - set(GRID_OPTIONS))
    if unknown:
        raise OptionError(f"compare_grid got unknown option(s) {unknown}; it passes "
                          f"{', '.join(GRID_OPTIONS)} to compare() (and takes executor, max_workers, "
                          "progress, json_path and recipes itself).")
    methods, _ = check_compare_args(
        None, methods, rtol=compare_options.get("rtol", 1e-4), vtol=compare_options.get("vtol"),
        seed=compare_options.get("seed", 0), time_limit=compare_options.get("time_limit"),
        options=compare_options.get("options"), kill_grace=compare_options.get("kill_grace", KILL_GRACE),
        owner="compare_grid", need_problem=False)
    _check_items(items)
    if recipes is None:
        recipes = [None] * len(items)
    else:
        recipes = list(recipes)
        if len(recipes) != len(items) or not all(r is None or isinstance(r, dict) for r in recipes):
            raise OptionError(f"compare_grid's 'recipes' must hold one dict (or None) per instance: "
                              f"{len(items)} instance(s), got {len(recipes)} recipe(s).")
    client = _dask_client(executor) if executor is not None else None
    if executor is not None and not isinstance(executor, Executor):
        if callable(getattr(executor, "get_executor", None)):  # a dask.distributed Client
            try:
                executor = executor.get_executor(pure=False)
            except Exception as exc:  # noqa: BLE001 - a closed client
                raise OptionError(f"compare_grid's 'executor' (a dask Client) cannot run tasks: "
                                  f"{_describe(exc)}") from None
        elif not callable(getattr(executor, "submit", None)):
            raise OptionError(f"compare_grid's 'executor' must be a concurrent.futures.Executor (or a "
                              f"dask.distributed Client); got {type(executor).__name__}.")
    if json_path is not None:
        check_writable(json_path, "json_path")
    payload = (items, methods, compare_options)
    workers = max_workers or min(len(items), os.cpu_count() or 1) or 1
    owned: list[Any] = []

    mode = ""

    def local_pool(n: int) -> tuple[ProcessPoolExecutor, Any]:
        """A process pool of our own (also the fresh pool after a local pool broke)."""
        from .isolation import main_not_reimported, mp_context, warm_up

        nonlocal mode
        mode = mode or pool_mode(payload)[0]
        ctx = mp_context()  # not "fork": see kernelforms.isolation.mp_context
        if ctx.get_start_method() == "forkserver":
            warm_up(ctx)
        pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx)
        owned.append(pool)
        hide = (lambda: main_not_reimported(ctx)) if mode == "processes" else nullcontext
        return pool, hide

    hide: Any = nullcontext  # the local pool starts its processes while tasks are submitted
    if executor is None:
        mode, why = pool_mode(payload)
        if mode == "threads":
            warnings.warn(f"compare_grid: {why}; running the instances in {workers} thread(s) of this "
                          "process instead of worker processes (pass executor= to choose)",
                          RuntimeWarning, stacklevel=2)
            executor = ThreadPoolExecutor(max_workers=workers)
            owned.append(executor)
        else:
            executor, hide = local_pool(workers)
    assert executor is not None
    markers = tempfile.mkdtemp(prefix="kernelforms-grid-") if isinstance(executor, ProcessPoolExecutor) else None
    writer = GridJSON(json_path) if json_path is not None else None
    bar = Progress(len(items), progress)
    out: list[Report | None] = [None] * len(items)
    futures: dict[Any, tuple[int, int, str | None]] = {}  # future -> (instance, pool generation, marker)
    gen_markers: dict[int, list[str]] = {0: []}
    counter = itertools.count()
    gen = 0

    def replace_pool(exc: BaseException) -> None:
        """The current local pool broke: a fresh one, unless no instance ever started in it
        (its workers cannot start: nothing would run on a fresh pool either)."""
        nonlocal executor, hide, gen
        if not any(os.path.exists(m) for m in gen_markers[gen]):
            raise BrokenProcessPool(f"the worker processes died before any instance started: {exc}") from exc
        executor, hide = local_pool(getattr(executor, "_max_workers", None) or workers)
        gen += 1
        gen_markers[gen] = []

    def submit(k: int) -> None:
        marker = os.path.join(markers, f"{k}.{next(counter)}") if markers else None
        try:
            try:
                with hide():
                    fut = executor.submit(_run, items[k], methods, compare_options, recipes[k], marker)
            except BrokenProcessPool as exc:  # broken before this submission: once more on a fresh pool
                if not isinstance(executor, ProcessPoolExecutor):
                    raise
                replace_pool(exc)
                with hide():
                    fut = executor.submit(_run, items[k], methods, compare_options, recipes[k], marker)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - a shut-down executor, a closed client ...
            failed(k, f"the executor refused the task ({_describe(exc)})")
            return
        if not isinstance(fut, Future):
            failed(k, f"the executor's submit returned {type(fut).__name__}, not a "
                      "concurrent.futures.Future")
            return
        futures[fut] = (k, gen, marker)
        if marker:
            gen_markers[gen].append(marker)

    t0 = time.perf_counter()

    def finish(k: int, rep: Report, note: str = "") -> None:
        out[k] = rep
        if writer is not None:
            writer.add(k, rep)
        bar.finished += 1
        n = rep.problem_params.get("n")
        bar.line(f"[{bar.finished}/{len(items)}] instance {k}: {rep.problem_label}"
                 + (f" (n = {n})" if n is not None and "n=" not in rep.problem_label else "")
                 + f"  {note or rep.verdict}  {time.perf_counter() - t0:.1f} s")

    def failed(k: int, why: str) -> None:
        """Instance ``k`` did not finish: an error row per method, the grid goes on."""
        finish(k, lost_report(items[k], methods, compare_options, why, recipes[k]), "error")

    watch = DaskWatch(client) if client is not None else None
    suspects: list[int] = []  # lost a worker once: retried alone when the others are done
    alone: set[int] = set()
    try:
        for k in range(len(items)):
            submit(k)
        bar.begin("compare_grid")
        while futures or suspects:
            if not futures:
                k = suspects.pop(0)
                alone.add(k)
                submit(k)
            finished, _ = wait(list(futures), timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=lambda f: futures[f][0]):
                k, g, marker = futures.pop(fut)
                if fut.cancelled():
                    failed(k, "cancelled by the executor before it finished (a dask scheduler that "
                              "stops cancels the tasks it held)")
                    continue
                try:
                    exc = fut.exception()
                except CancelledError:
                    failed(k, "cancelled by the executor before it finished")
                    continue
                if exc is None:
                    try:
                        rep = fut.result()
                    except BaseException as got:  # noqa: BLE001 - a result that cannot be read back
                        failed(k, f"its result could not be read back ({_describe(got)})")
                        continue
                    if isinstance(rep, Report):
                        finish(k, rep)
                    else:
                        failed(k, f"the executor returned {type(rep).__name__}, not a report")
                    continue
                if not worker_lost(exc):
                    failed(k, f"failed: {_describe(exc)}")
                    continue
                if isinstance(exc, BrokenProcessPool) and isinstance(executor, ProcessPoolExecutor) and g == gen:
                    replace_pool(exc)
                if marker is not None and not os.path.exists(marker):
                    submit(k)  # queued in the broken pool, never started
                elif k in alone:
                    finish(k, lost_report(items[k], methods, compare_options,
                                          f"worker lost: the worker process died while running this instance, "
                                          f"twice, the second time alone ({type(exc).__name__}: {exc})",
                                          recipes[k]), "worker lost")
                else:
                    suspects.append(k)
                    bar.line(f"instance {k}: its worker died ({type(exc).__name__}); it is retried alone "
                             "after the other instances")
            why = watch.trouble() if watch is not None and futures else None
            if why is not None:
                for fut, (k, _, _) in sorted(futures.items(), key=lambda kv: kv[1][0]):
                    fut.cancel()
                    failed(k, f"not run: {why}")
                futures.clear()
                for k in suspects:
                    failed(k, f"not retried: {why}")
                suspects.clear()
            if writer is not None:
                writer.flush()
            bar.tick(time.perf_counter() - t0)
        return [r for r in out if r is not None]
    finally:
        if watch is not None:
            watch.close()
        for f in futures:
            f.cancel()
        bar.close()
        if writer is not None:
            writer.flush(force=True)
        for pool in owned:
            pool.shutdown(wait=True, cancel_futures=True)
        if markers is not None:
            shutil.rmtree(markers, ignore_errors=True)

def grid_table(reports: Sequence[Report]) -> list[dict[str, Any]]:
    """One row per (instance, method): n, method, status, objective, gap, times."""
    rows = []
    for rep in reports:
        n = rep.problem_params.get("n")
        for t in rep.table():
            rows.append({"problem": rep.problem_label, "fingerprint": rep.fingerprint, "n": n,
                         "seed": (rep.recipe or {}).get("seed", rep.seed),
                         **{k: t[k] for k in ("method", "status", "objective", "gap", "cert_gap",
                                              "time_s", "solve_s", "iterations")}})
    return rows


def format_grid(reports: Sequence[Report]) -> str:
    """A plain-text table of :func:`grid_table`."""
    rows = grid_table(reports)
    head = ["n", "seed", "method", "status", "objective", "gap", "cert_gap", "time_s", "iterations"]

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    return "\n".join(render_table(head, [[cell(r[h]) for h in head] for r in rows]))
