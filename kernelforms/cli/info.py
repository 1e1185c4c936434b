"""The commands that list and inspect: ``datasets``, ``methods``, ``explain``, ``verify``,
``bench``."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from ..util import format_bytes, render_table
from .args import EXIT_BAD_INPUT, EXIT_DISAGREE, GENERATED, _build_recipe, _check_flags, _recipe


def _cmd_datasets(args: argparse.Namespace) -> int:
    from ..data import datasets

    rows = datasets.table()
    for r in rows:
        if r["name"] in GENERATED:
            r["n"] = f"{r['n']}*"
    cols = ["name", "n", "d", "n_classes", "source"]
    print("\n".join(render_table(cols, [[r.get(c, "") for c in cols] for r in rows])))
    print("* generated: the default size; --n-points draws any number of points")
    return 0


def _plan(problem: Any, max_memory: float | None) -> list:
    """What compare would do with every method (see kernelforms.methods.plan)."""
    from ..methods import plan

    return plan(problem, methods=None, max_memory=max_memory)


def _cmd_methods(args: argparse.Namespace) -> int:
    from ..methods import FORMULATIONS, SOLVERS, get_method

    _check_flags(args)
    if args.dataset is None:
        args.dataset = "soybean"
    problem = _build_recipe(_recipe(args))[0] if args.problem else None
    plans = {}
    if problem is not None:
        print(problem.label)
        plans = {p.name: p for p in _plan(problem, args.max_memory)}
        print("what `kernelforms compare` would do with each method on this problem:")
    lines = []
    for name in list(FORMULATIONS) + list(SOLVERS):
        kind = "conic" if name in FORMULATIONS else "hand-written"
        try:
            lines.append((name, kind, get_method(name).formulation_name, None))
        except Exception as exc:  # noqa: BLE001 - one broken method must not hide the others
            lines.append((name, kind, "", f"unavailable: {type(exc).__name__}: {exc}"))
    width = max(len(f) for _, _, f, _ in lines)
    for name, kind, formulation, broken in lines:
        if broken:
            print(f"{name:<12} {kind:<13} {broken}")
            continue
        line = f"{name:<12} {kind:<13} {formulation:<{width}}"
        p = plans.get(name)
        if p is not None:
            mem = f", needs about {format_bytes(p.memory)}" if p.memory is not None else ""
            solver = getattr(p, "solver", "")
            if p.will_run:
                line += "   will run" + (f" with {solver}" if solver and kind == "conic" else "") + mem
            elif p.applies:
                line += f"   skipped (size guard{mem}): {p.reason}"
            else:
                line += f"   does not apply: {p.reason}"
        print(line.rstrip())
    if problem is not None:
        from ..certificate import applies

        why = applies(problem)
        kind = "Lagrangian upper bound" if problem.sense == "max" else "Lagrangian lower bound"
        print(f"certificate ({kind}): " + ("applies" if why is None else f"no: {why}"))
    return 0



def _cmd_explain(args: argparse.Namespace) -> int:
    from ..explain import compare_programs, explain

    if (args.method is None) == (args.methods is None):
        args._parser.error("give --method NAME (one program) or --methods A,B (side by side)")
    if args.methods is not None and args.markdown:
        args._parser.error("argument --markdown: not used with --methods (text side by side)")
    _check_flags(args)
    problem = _build_recipe(_recipe(args))[0]
    if args.methods is not None:
        print(compare_programs(problem, args.methods, measure=not args.no_measure,
                               time_limit=args.time_limit))
        return 0
    print(explain(problem, args.method, format="markdown" if args.markdown else "text"))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from ..verify import verify

    _check_flags(args)
    recipe = _recipe(args)
    problem = _build_recipe(recipe)[0]
    result = verify(problem, args.method, n_points=args.points, seed=recipe["seed"])
    print(result)
    return 0 if result.passed else EXIT_DISAGREE


def _cmd_bench(argv: list[str]) -> int:
    import pkgutil

    from .. import bench

    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))
    if not argv or argv[0] in ("-h", "--help", "--list"):
        print("usage: kernelforms bench NAME [options]   (NAME --help for its options)")
        print("benchmarks: " + (", ".join(names) or "none installed"))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in names:
        print(f"kernelforms bench: unknown benchmark {name!r}; known: {', '.join(names)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return int(importlib.import_module(f"kernelforms.bench.{name}").main(rest) or 0)
