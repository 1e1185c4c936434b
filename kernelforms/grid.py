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

import math
import os
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, Iterable, Sequence

from .compare import Report, compare


def _run(instance: Any, methods: Sequence[Any], kwargs: dict[str, Any]) -> Report:
    import warnings

    recipe = None
    if isinstance(instance, dict):
        from .testing import build_from_recipe, make_recipe

        recipe = make_recipe(**instance)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            instance = build_from_recipe(recipe)
    kwargs = dict(kwargs)
    kwargs.setdefault("progress", False)
    return compare(instance, methods, recipe=recipe, **kwargs)


def compare_grid(problems: Iterable[Any], methods: Sequence[Any] | str, *,
                 executor: Executor | None = None, max_workers: int | None = None,
                 **compare_options: Any) -> list[Report]:
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
        A caller's executor is left running.
    **compare_options
        ``rtol``, ``seed``, ``time_limit``, ``options``, ``certify`` ... for every instance.

    Returns
    -------
    list of Report
        In the order of ``problems``.  An instance that could not be built raises here,
        with its position in the message.
    """
    items = list(problems)
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    methods = list(methods)
    own = executor is None
    if own:
        from .compare import _mp_context, _warm_up

        ctx = _mp_context()  # not "fork": see kernelforms.compare._mp_context
        if ctx.get_start_method() == "forkserver":
            _warm_up(ctx)
        workers = max_workers or min(len(items), os.cpu_count() or 1) or 1
        executor = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
    try:
        futures = [executor.submit(_run, it, methods, compare_options) for it in items]
        out = []
        for k, fut in enumerate(futures):
            try:
                out.append(fut.result())
            except Exception as exc:
                for f in futures[k + 1:]:
                    f.cancel()
                raise type(exc)(f"instance {k} of the grid failed: {exc}") from exc
        return out
    finally:
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

    cells = [[cell(r[h]) for h in head] for r in rows]
    w = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(x) for h, x in zip(head, w))]
    lines += ["  ".join(c.ljust(x) for c, x in zip(cs, w)).rstrip() for cs in cells]
    return "\n".join(lines)
