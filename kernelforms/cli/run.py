"""``kernelforms compare`` and ``kernelforms learn``: run methods on one instance, write the
report, figures, baselines, programs and factors."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any

from .args import (
    EXIT_BAD_INPUT,
    EXIT_DISAGREE,
    EXIT_INTERRUPTED,
    _build_recipe,
    _check_flags,
    _check_outputs,
    _exit_code,
    _method_options,
    _recipe,
    _write_failed,
)


# ------------------------------------------------------------------ building the instance
#: how far the connectivity hint looks: k + 1 .. k + GRAPH_TRIES, seed + 1 .. seed + GRAPH_TRIES
GRAPH_TRIES = 8


def _build_explained(recipe: dict, max_memory: float | None = None):
    """:func:`_build_recipe`; when an MVU / RegMVU instance is refused because its kNN graph
    is disconnected (tr K unbounded), the error names the flags that fix it: the smallest
    ``--k`` above the one used, and the first ``--seed`` after it, whose graph is connected
    (both checked here, before any method runs)."""
    from ..errors import ProblemError

    try:
        return _build_recipe(recipe, max_memory)
    except ProblemError as exc:
        hint = _graph_hint(recipe)
        if hint is None:
            raise
        raise ProblemError(f"{exc} {hint}") from exc


def _components(X: Any, k: int) -> int:
    import numpy as np
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    from ..data.graphs import knn_edges

    E, _ = knn_edges(X, k=k)
    n = X.shape[0]
    A = sp.coo_matrix((np.ones(len(E)), (E[:, 0], E[:, 1])), shape=(n, n))
    return int(connected_components(A, directed=False)[0])


def _graph_hint(recipe: dict) -> str | None:
    """None, or the sentence naming ``--k`` / ``--seed`` values whose kNN graph is connected
    (only for mvu / regmvu whose graph at the recipe's k and seed is disconnected)."""
    from ..data import datasets
    from ..errors import KernelformsError
    from ..recipes import make_recipe

    r = make_recipe(**recipe)
    if r["problem"] not in ("mvu", "regmvu"):
        return None
    k = 4 if r["k"] is None else int(r["k"])
    seed = int(r["seed"] or 0)

    def draw(s):
        return datasets.load(r["dataset"], data_dir=r["data_dir"], seed=s, n_points=r["n_points"],
                             scale=r["scale"])[0]

    try:
        X = draw(seed)
        n = X.shape[0]
        ncomp = _components(X, k)
        if ncomp <= 1:
            return None
        ks = next((kk for kk in range(k + 1, min(k + GRAPH_TRIES, n - 1) + 1)
                   if _components(X, kk) == 1), None)
        seeds = next((s for s in range(seed + 1, seed + GRAPH_TRIES + 1)
                      if _components(draw(s), k) == 1), None)
    except (KernelformsError, MemoryError):
        return None
    fixes = []
    if seeds is not None:
        fixes.append(f"--seed {seeds} (the first seed after {seed} whose {k}-NN graph is connected; "
                     "it draws other points)")
    if ks is not None:
        fixes.append(f"--k {ks} (the smallest k whose graph of these points is connected; a "
                     "different problem)")
    what = (f"With --k {k} and --seed {seed} the {k}-NN graph of {r['dataset']} ({n} points) has "
            f"{ncomp} components.")
    if not fixes:
        return (f"{what} No --seed up to {seed + GRAPH_TRIES} and no --k up to {k + GRAPH_TRIES} "
                "gives a connected graph; use more points (--n-points) or a larger --k.")
    return f"{what} Use " + ", or ".join(fixes) + "."


# ------------------------------------------------------------------ commands
def _cmd_compare(args: argparse.Namespace) -> int:
    from ..compare import compare

    _check_flags(args)
    if args.baseline_name is not None and not (args.baseline or args.save_baseline):
        args._parser.error("argument --baseline-name: only used with --baseline or --save-baseline")
    options = _method_options(args)
    _check_outputs(args)
    if args.save_factor:
        _check_factor_dir(args.save_factor)
    recipe = _recipe(args)
    problem, X, y = _build_explained(recipe, args.max_memory)
    if args.export:
        _export_programs(args, problem)
    try:
        with warnings.catch_warnings():
            try:  # a failed --json write is reported below, once
                from ..compare import ReportWriteWarning

                warnings.simplefilter("ignore", ReportWriteWarning)
            except ImportError:
                pass
            report = compare(problem, args.methods, rtol=args.rtol, seed=recipe["seed"],
                             vtol=args.vtol, time_limit=args.time_limit, certify=not args.no_certify,
                             json_path=args.json, options=options or None,
                             progress=False if args.quiet else None, recipe=recipe)
    except KeyboardInterrupt as exc:
        partial = getattr(exc, "report", None)
        if partial is not None:
            print(partial)
        where = f"; finished rows are in {args.json}" if args.json else ""
        print(f"kernelforms: interrupted{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"data set: {args.dataset} ({X.shape[0]} points)")
    print(report)
    if args.legend:
        print(report.legend())
    code = _exit_code(report)
    failed = False
    if args.json:
        if getattr(report, "write_error", None):
            print(f"kernelforms: error: {report.write_error} (the table above is complete)",
                  file=sys.stderr)
            failed = True
        else:
            print(f"wrote {args.json}")
    if args.markdown:
        md = report.to_markdown()
        if args.markdown == "-":
            print(md)
        else:
            from ..compare import atomic_write

            try:
                atomic_write(args.markdown, md)
                print(f"wrote {args.markdown}")
            except OSError as exc:
                _write_failed("Markdown table", args.markdown, exc)
                failed = True
    if args.plot:
        from .. import plots

        try:
            color, color_label = _colour(args, X, y)
            plots.overview(report, args.plot, color=color, color_label=color_label,
                           title=f"{report.problem_label} on {args.dataset}")
            print(f"wrote {args.plot}")
        except (OSError, ValueError) as exc:
            _write_failed("figure", args.plot, exc)
            failed = True
    if args.save_baseline:
        from ..errors import KernelformsError
        from ..testing import save_baseline

        try:
            name = save_baseline(report, args.save_baseline, name=args.baseline_name, recipe=recipe,
                                 rtol=args.rtol)
            print(f"saved baseline {name!r} to {args.save_baseline}")
        except OSError as exc:
            _write_failed("baseline", args.save_baseline, exc)
            failed = True
        except KernelformsError as exc:  # nothing worth pinning (no feasible reference)
            print(f"kernelforms: error: {exc}", file=sys.stderr)
            failed = True
    if args.save_factor and not _save_factors(args, report, problem, y, recipe, options):
        failed = True
    if args.baseline:
        from ..testing import check_baseline

        drifts = check_baseline(report, args.baseline, args.baseline_name)
        if drifts:
            print("baseline: FAILED\n  " + "\n  ".join(drifts))
            code = EXIT_DISAGREE
        else:
            print(f"baseline: ok ({args.baseline})")
    return EXIT_BAD_INPUT if failed else code


def _check_factor_dir(path: str) -> None:
    """``--save-factor DIR``: an existing, writable directory (checked before any work)."""
    from ..errors import OptionError

    if not os.path.isdir(path):
        what = "is a file" if os.path.exists(path) else "does not exist"
        raise OptionError(f"The '--save-factor' option must be an existing directory. {path!r} {what}; "
                          "create it first (mkdir).")
    if not os.access(path, os.W_OK | os.X_OK):
        raise OptionError(f"The '--save-factor' option must be a writable directory. {path!r} is not "
                          "writable.")


def _save_factors(args: argparse.Namespace, report: Any, problem: Any, y: Any, recipe: dict,
                  options: dict) -> bool:
    """``compare --save-factor DIR``: each row with a kernel (status optimal, converged,
    optimal_inaccurate, max_iter or timeout and a finite objective) to DIR/METHOD.npz.
    Returns False when a file could not be written."""
    from ..errors import KernelformsError
    from ..learn import write_factor

    ok = True
    for row in report.rows:
        if not row.ok or row.factor is None:
            continue
        name = row.method.replace(":", "-").replace("/", "-")
        path = os.path.join(args.save_factor, f"{name}.npz")
        try:
            write_factor(path, row, problem, labels=y,
                         options={"recipe": recipe, "method": row.method,
                                  "method_options": options.get(row.method, {})})
            print(f"wrote {path} ({row.method}, {row.status.value}, objective {row.objective:.10g})")
        except (OSError, KernelformsError) as exc:
            _write_failed(f"factor of {row.method}", path, exc)
            ok = False
    return ok


def _cmd_learn(args: argparse.Namespace) -> int:
    """``kernelforms learn``: build the instance as ``compare`` does, solve it with the
    automatic method (or --method), certify it, write the factor."""
    from ..errors import KernelformsError
    from ..learn import (auto_method, build_from_data, check_factor_path, learn, read_data, read_pairs,
                        write_factor)
    from ..methods import get_method

    p = args._parser
    if args.problem is None:
        p.error("the following arguments are required: problem (e.g. `kernelforms learn pcp "
                "--dataset iris --out G.npz`)")
    if (args.dataset is None) == (args.data is None):
        p.error("give exactly one of --dataset NAME (a bundled data set) and --data FILE (your own)")
    if args.data is not None:
        for d in ("n_points", "data_dir"):
            if getattr(args, d) is not None:
                p.error(f"argument --{d.replace('_', '-')}: only used with --dataset")
    if args.pairs is not None and args.data is None:
        p.error("argument --pairs: only used with --data (a bundled --dataset draws its pairs from "
                "its labels)")
    _check_flags(args)
    check_factor_path(args.out, "--out")
    method = str(args.method).strip()
    if method.lower() != "auto":
        get_method(method)  # an unknown method fails here, before any work
    if args.data is not None:
        X, y = read_data(args.data)
        recipe = {k: v for k, v in _recipe(args).items() if k not in ("dataset", "data_dir", "n_points")}
        recipe["data"] = os.path.abspath(args.data)
        from ..problems.factory import unset_values

        params = {k: recipe[k] for k in ("seed", *unset_values())}
        pairs = None
        if args.pairs is not None:
            pairs = read_pairs(args.pairs, X.shape[0])
            recipe["pairs"] = os.path.abspath(args.pairs)
        problem = build_from_data(args.problem, X, y, pairs, **params)
        where = f"{args.data} ({X.shape[0]} points)"
    else:
        recipe = _recipe(args)
        problem, X, y = _build_explained(recipe)
        where = f"{args.dataset} ({X.shape[0]} points)"
    chosen = auto_method(problem, args.problem) if method.lower() == "auto" else method
    opts: dict[str, Any] = {}
    if args.verbose and hasattr(get_method(chosen), "iteration_log"):
        opts["verbose"] = True
    if args.max_memory is not None:
        opts["max_memory"] = args.max_memory
    print(f"data set: {where}; method: {chosen}" + (" (auto)" if method.lower() == "auto" else ""),
          flush=True)
    res = learn(problem, chosen, seed=int(recipe.get("seed") or 0), time_limit=args.time_limit,
                certify=not args.no_certify, **opts)
    print(res)
    gap = res.certified_gap
    print(f"certified gap: {gap:.3g}" if gap is not None else
          f"certified gap: none ({res.certificate_note or 'no bound applies'})")
    if res.factor is None or not res.ok:
        print(f"kernelforms: error: {chosen} returned no kernel (status {res.status.value}: "
              f"{res.message}); nothing written", file=sys.stderr)
        return EXIT_DISAGREE
    try:
        write_factor(args.out, res, problem, labels=y,
                     options={"recipe": recipe, "method": chosen, "method_options": opts})
    except (OSError, KernelformsError) as exc:
        _write_failed("factor", args.out, exc)
        return EXIT_BAD_INPUT
    print(f"wrote {args.out}: factor {res.factor.shape[0]} x {res.factor.shape[1]}, objective "
          f"{res.objective:.10g}")
    return 0 if res.status.value in ("optimal", "converged") else 3


def _export_programs(args: argparse.Namespace, problem: Any) -> None:
    """``compare --export DIR``: write the conic methods' programs (SDPA and CBF) before
    the comparison runs, one line per file (or per format that cannot hold the program)."""
    from ..exchange import export_all
    from ..registry import FORMULATIONS

    conic = [m for m in args.methods if m.partition(":")[0].strip().lower() in FORMULATIONS]
    try:
        records = export_all(problem, args.export, conic or None)
    except OSError as exc:
        args._parser.error(f"argument --export: cannot write to {args.export!r}: {exc}")
    for rec in records:
        if "path" in rec:
            print(f"exported {rec['method']} ({rec['format']}) to {rec['path']}")
        elif conic:  # skipped formulations that were not asked for are not news
            print(f"not exported: {rec['method']} ({rec['format']}): {rec['skipped']}")


def _colour(args: argparse.Namespace, X: Any, y: Any) -> tuple[Any, str]:
    """What colours an embedding: the position along the Swiss roll, else the labels."""
    import numpy as np

    if args.dataset == "swiss_roll" and not args.scale and X.shape[1] == 3:
        # make_swiss_roll: x = t cos t, z = t sin t, so t = hypot(x, z) (no noise here)
        return np.hypot(X[:, 0], X[:, 2]), "position along the roll"
    return y, "class label"
