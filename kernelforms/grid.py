"""``compare_grid``: many instances (sizes, seeds, data sets) compared in parallel.

Every instance is one task for a :class:`concurrent.futures.Executor`: local processes by
default, or any executor with the same interface, for instance a Dask cluster's::

    from dask.distributed import Client
    client = Client("scheduler:8786")
    reports = compare_grid(recipes, ["sdp:scs", "admm"], executor=client.get_executor())

Anything with ``submit(fn, *args) -> future`` and ``future.result()`` works (for Ray, a
ten-line ``Executor`` around ``ray.remote`` is shown in docs/compare.md).  Instances may be
given as :class:`~kernelforms.problems.base.Problem` objects or as *recipes* (dicts of
``kernelforms compare`` options, see :mod:`kernelforms.testing`), which are small to send
to remote workers and are built there.
"""

from __future__ import annotations

import ast
import math
import os
import pickle
import sys
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, ThreadPoolExecutor, wait
from contextlib import nullcontext
from typing import Any, Iterable, Sequence

from .compare import KILL_GRACE, Report, check_compare_args, compare
from .errors import OptionError, ProblemError
from .progress import Progress
from .report import DEFAULT_VTOL
from .util import render_table

#: the keyword arguments of compare() that compare_grid passes on to every instance
GRID_OPTIONS = ("rtol", "seed", "time_limit", "vtol", "options", "certify", "kill_grace")


def _run(instance: Any, methods: Sequence[Any], kwargs: dict[str, Any]) -> Report:
    recipe = None
    if isinstance(instance, dict):
        from .recipes import build_from_recipe, make_recipe

        recipe = make_recipe(**instance)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            instance = build_from_recipe(recipe)
    kwargs = dict(kwargs)
    kwargs["progress"] = False
    return compare(instance, methods, recipe=recipe, **kwargs)


def _has_main_guard(path: str) -> bool:
    """True when the script at ``path`` has a top-level ``if __name__ == "__main__":``."""
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if any(isinstance(x, ast.Name) and x.id == "__name__" for x in names) and any(
                    isinstance(x, ast.Constant) and x.value == "__main__" for x in names):
                return True
    return False


def pool_mode(payload: Any) -> tuple[str, str]:
    """How local workers can run ``payload`` (the tasks' arguments): ``("processes", "")``
    (the main script is hidden from the workers, so a script without a ``__main__`` guard
    is not re-run), ``("processes-main", "")`` (objects defined in a guarded main script:
    the workers import it), or ``("threads", why)``."""
    try:
        data = pickle.dumps(payload)
    except Exception as exc:  # noqa: BLE001 - lambdas, open files, local classes ...
        return "threads", f"the instances, methods or options cannot be sent to worker processes ({exc})"
    if b"__main__" not in data:
        return "processes", ""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if getattr(getattr(main, "__spec__", None), "name", None) is not None:
        return "processes-main", ""  # python -m module: importable by name
    if path and _has_main_guard(path):
        return "processes-main", ""
    why = ("objects defined in the main script (a Method or Problem class) cannot be rebuilt in worker "
           "processes without re-running the script, which has no `if __name__ == \"__main__\":` guard"
           if path else "objects defined interactively (in __main__) cannot be sent to worker processes")
    return "threads", why


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
                 executor: Executor | None = None, max_workers: int | None = None,
                 progress: bool | None = None, **compare_options: Any) -> list[Report]:
    """Run :func:`~kernelforms.compare` on every instance, in parallel.

    Parameters
    ----------
    problems : iterable of Problem or recipe dict
        The instances.  Recipes (``{"problem": "pcp", "dataset": "iris", "n_points": 60,
        "seed": 1}``) are built by the worker.
    methods : sequence of str, or comma-separated str
        As for :func:`~kernelforms.compare` (strings travel best to remote workers).
    executor : concurrent.futures.Executor, optional
        Where the tasks run.  Default: a local :class:`~concurrent.futures.ProcessPoolExecutor`
        with ``max_workers`` processes (default: the number of CPUs), shut down at the end.
        It works from a plain script without an ``if __name__ == "__main__":`` guard (the
        workers do not re-run the script); when the tasks hold objects defined in such a
        script (or interactively), or objects that cannot be pickled, the instances run in
        threads of this process instead, with a ``RuntimeWarning``.  A caller's executor is
        left running.
    progress : bool, optional
        One line per finished instance on stderr (a live bar on a terminal); default on.
    **compare_options
        ``rtol``, ``seed``, ``time_limit``, ``vtol``, ``options``, ``certify``,
        ``kill_grace`` for every instance; checked here, before any worker starts.

    Returns
    -------
    list of Report
        In the order of ``problems``.  An instance that could not be built raises here,
        with its position in the message.
    """
    items = list(problems)
    unknown = sorted(set(compare_options) - set(GRID_OPTIONS))
    if unknown:
        hint = (" (each instance would overwrite the same file: write the reports yourself, e.g. "
                "json.dumps([r.to_dict() for r in reports]))" if "json_path" in unknown else "")
        raise OptionError(f"compare_grid got unknown option(s) {unknown}{hint}; it passes "
                          f"{', '.join(GRID_OPTIONS)} to compare().")
    methods, _ = check_compare_args(
        None, methods, rtol=compare_options.get("rtol", 1e-4), vtol=compare_options.get("vtol", DEFAULT_VTOL),
        seed=compare_options.get("seed", 0), time_limit=compare_options.get("time_limit"),
        options=compare_options.get("options"), kill_grace=compare_options.get("kill_grace", KILL_GRACE),
        owner="compare_grid", need_problem=False)
    _check_items(items)
    bar = Progress(len(items), progress)
    own = executor is None
    hide_main: Any = nullcontext()
    if own:
        from .isolation import main_not_reimported, mp_context, warm_up

        workers = max_workers or min(len(items), os.cpu_count() or 1) or 1
        mode, why = pool_mode((items, methods, compare_options))
        if mode == "threads":
            warnings.warn(f"compare_grid: {why}; running the instances in {workers} thread(s) of this "
                          "process instead of worker processes (pass executor= to choose)",
                          RuntimeWarning, stacklevel=2)
            executor = ThreadPoolExecutor(max_workers=workers)
        else:
            ctx = mp_context()  # not "fork": see kernelforms.isolation.mp_context
            if ctx.get_start_method() == "forkserver":
                warm_up(ctx)
            executor = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
            if mode == "processes":
                hide_main = main_not_reimported(ctx)
    assert executor is not None
    try:
        with hide_main:  # the local pool starts its processes while tasks are submitted
            futures = [executor.submit(_run, it, methods, compare_options) for it in items]
        index = {f: k for k, f in enumerate(futures)}
        out: list[Report | None] = [None] * len(items)
        pending = set(futures)
        t0 = time.perf_counter()
        bar.begin("compare_grid")
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=index.get):
                k = index[fut]
                try:
                    rep = fut.result()
                except Exception as exc:
                    for f in pending:
                        f.cancel()
                    try:
                        err = type(exc)(f"instance {k} of the grid failed: {exc}")
                    except Exception:  # noqa: BLE001 - an exception type with another signature
                        raise exc
                    raise err from exc
                out[k] = rep
                bar.finished += 1
                n = rep.problem_params.get("n")
                bar.line(f"[{bar.finished}/{len(items)}] instance {k}: {rep.problem_label}"
                         + (f" (n = {n})" if n is not None and "n=" not in rep.problem_label else "")
                         + f"  {rep.verdict}  {time.perf_counter() - t0:.1f} s")
            bar.tick(time.perf_counter() - t0)
        return [r for r in out if r is not None]
    finally:
        bar.close()
        if own:
            executor.shutdown(wait=True, cancel_futures=True)


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
