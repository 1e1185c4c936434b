"""The ``kernelforms`` command.

Examples
--------
kernelforms compare pcp --dataset soybean --methods sdp:scs,sdp:clarabel
kernelforms compare npkl --dataset iris --n-points 40 --loss hinge --methods sdp,bcd
kernelforms datasets
kernelforms methods pcp --dataset soybean
kernelforms grid pcp --dataset iris --sizes 30,60,120 --methods sdp:scs,admm --plot scaling.png
kernelforms bench admm --help
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

EPILOG = """examples:
  kernelforms compare pcp --dataset soybean --methods sdp:scs,sdp:clarabel
  kernelforms compare npkl --dataset iris --n-points 40 --loss square --methods sdp,admm
  kernelforms compare pcp --dataset two_gaussians --methods sdp,admm --json out.json --plot conv.png
  kernelforms compare pcp --dataset iris --n-points 30 --methods sdp:clarabel --save-baseline base.json
  kernelforms compare pcp --dataset iris --n-points 30 --methods sdp:clarabel,sdp:scs --baseline base.json
  kernelforms compare pcp --dataset pendigits --methods sdp:scs,admm --time-limit 60 --markdown -
  kernelforms grid pcp --dataset iris --sizes 30,60,120 --methods sdp:scs,admm --plot scaling.png
  kernelforms datasets
  kernelforms methods npkl --dataset soybean
  kernelforms bench NAME --help        (benchmarks: see `kernelforms bench --list`)
  kernelforms reproduce wu2009-tables --quick --out results/

exit status of `compare`: 0 when the objectives agree (and match the --baseline), 1 when
they do not, 2 on bad input, 130 when interrupted (finished rows stay in the --json file).
"""


def _problem_args(p: argparse.ArgumentParser, optional: bool = False) -> None:
    from .problems.factory import KINDS

    p.add_argument("problem", choices=list(KINDS), help="; ".join(f"{k}: {v}" for k, v in KINDS.items()),
                   **({"nargs": "?", "default": None} if optional else {}))
    if optional:
        p.add_argument("--dataset", default="soybean", help="a name from `kernelforms datasets` "
                       "(default soybean)")
    else:
        p.add_argument("--dataset", required=True, help="a name from `kernelforms datasets`")
    p.add_argument("--data-dir", default=None, help="directory holding data files not shipped (usps)")
    p.add_argument("--n-points", type=int, default=None, help="use a stratified subset of this many points")
    p.add_argument("--scale", action="store_true", help="scale features to [-1, 1] first")
    p.add_argument("--seed", type=int, default=0, help="seed for pairs, subsets and solvers (default 0)")
    p.add_argument("--k", type=int, default=None, help="neighbours in the kNN graph (default 5; 4 for MVU)")
    p.add_argument("--delta", type=float, default=None, help="Laplacian shift (default 0; 0.01 for npkl)")
    p.add_argument("--gamma", type=float, default=1.0, help="loss weight (default 1)")
    p.add_argument("--loss", default="hinge", help="npkl loss: hinge, squared_hinge, square, linear")
    p.add_argument("--b", type=float, default=1.0, help="npkl linear-loss bound on ||v_i|| (default 1)")
    p.add_argument("--m-basis", type=int, default=10, help="basis size for regpcp / regmvu (default 10)")
    p.add_argument("--nu", type=float, default=1.0, help="regmvu penalty (default 1)")
    p.add_argument("--n-must", type=int, default=None, help="must-link pairs (default 0.6 n)")
    p.add_argument("--n-cannot", type=int, default=None, help="cannot-link pairs (default 0.6 n)")
    p.add_argument("--per-class", action="store_true", help="seed 001's pair scheme (20 per class / class pair)")
    p.add_argument("--rank", type=int, default=16, help="rank of K0 for bregman (default 16)")
    p.add_argument("--divergence", default="burg", help="bregman divergence: burg or von_neumann")


def _recipe(args: argparse.Namespace) -> dict:
    """The instance recipe (see kernelforms.testing) of the parsed problem options."""
    from .testing import RECIPE_DEFAULTS

    return {k: getattr(args, k, d) for k, d in RECIPE_DEFAULTS.items()}


def _build(args: argparse.Namespace):
    from .testing import build_from_recipe

    return build_from_recipe(_recipe(args))


def _cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare

    recipe = _recipe(args)
    problem = _build(args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    try:
        report = compare(problem, methods, rtol=args.rtol, seed=args.seed, time_limit=args.time_limit,
                         certify=not args.no_certify, json_path=args.json,
                         progress=False if args.quiet else None, recipe=recipe)
    except KeyboardInterrupt as exc:
        partial = getattr(exc, "report", None)
        if partial is not None:
            print(partial)
        where = f"; finished rows are in {args.json}" if args.json else ""
        print(f"kernelforms: interrupted{where}", file=sys.stderr)
        return 130
    print(f"data set: {args.dataset}" + (f" ({args.n_points} points)" if args.n_points else ""))
    print(report)
    code = 0 if report.agree() else 1
    if args.json:
        print(f"wrote {args.json}")
    if args.markdown:
        md = report.to_markdown()
        if args.markdown == "-":
            print(md)
        else:
            from .compare import atomic_write

            atomic_write(args.markdown, md)
            print(f"wrote {args.markdown}")
    if args.plot:
        from .plots import convergence

        convergence(report, args.plot, title=f"{report.problem_label} on {args.dataset}")
        print(f"wrote {args.plot}")
    if args.save_baseline:
        from .testing import save_baseline

        name = save_baseline(args.save_baseline, report, name=args.baseline_name, recipe=recipe,
                             rtol=args.rtol)
        print(f"saved baseline {name!r} to {args.save_baseline}")
    if args.baseline:
        from .testing import check_baseline

        drifts = check_baseline(report, args.baseline, args.baseline_name)
        if drifts:
            print("baseline: FAILED\n  " + "\n  ".join(drifts))
            code = 1
        else:
            print(f"baseline: ok ({args.baseline})")
    return code


def _cmd_grid(args: argparse.Namespace) -> int:
    from .grid import compare_grid, format_grid

    base = _recipe(args)
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else [None]
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    recipes = [{**base, "n_points": n, "seed": s} for n in sizes for s in seeds]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    reports = compare_grid(recipes, methods, max_workers=args.workers, rtol=args.rtol,
                           time_limit=args.time_limit, certify=not args.no_certify)
    print(format_grid(reports))
    bad = [r for r in reports if not r.agree()]
    print(f"{len(reports) - len(bad)} of {len(reports)} instances agree (rtol {args.rtol:g})")
    if args.json:
        import json

        from .compare import atomic_write

        atomic_write(args.json, json.dumps([r.to_dict() for r in reports], indent=2))
        print(f"wrote {args.json}")
    if args.plot:
        from .plots import scaling

        scaling(reports, args.plot, title=f"{args.problem} on {args.dataset}")
        print(f"wrote {args.plot}")
    return 0 if not bad else 1


def _cmd_datasets(args: argparse.Namespace) -> int:
    from .data import datasets

    rows = datasets.table()
    cols = ["name", "n", "d", "n_classes", "source"]
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(widths[c]) for c in cols))
    return 0


def _cmd_methods(args: argparse.Namespace) -> int:
    from .methods import FORMULATIONS, SOLVERS, get_method

    problem = _build(args) if args.problem else None
    if problem is not None:
        print(problem.label)
    for name in list(FORMULATIONS) + list(SOLVERS):
        kind = "conic" if name in FORMULATIONS else "hand-written"
        try:
            m = get_method(name)
            line = f"{name:<12} {kind:<13} {m.formulation_name}"
            if problem is not None:
                reason = m.applies_to(problem)
                line += "   applies" if reason is None else f"   does not apply: {reason}"
        except Exception as exc:  # noqa: BLE001 - one broken method must not hide the others
            line = f"{name:<12} {kind:<13} unavailable: {type(exc).__name__}: {exc}"
        print(line)
    if problem is not None:
        from .certificate import applies

        why = applies(problem)
        kind = "upper bound from edge multipliers" if problem.sense == "max" else "gradient lower bound"
        print(f"certificate ({kind}): " + ("applies" if why is None else f"no: {why}"))
    return 0


def _cmd_bench(argv: list[str]) -> int:
    import pkgutil

    from . import bench

    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))
    if not argv or argv[0] in ("-h", "--help", "--list"):
        print("usage: kernelforms bench NAME [options]   (NAME --help for its options)")
        print("benchmarks: " + (", ".join(names) or "none installed"))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in names:
        print(f"kernelforms bench: unknown benchmark {name!r}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    return int(importlib.import_module(f"kernelforms.bench.{name}").main(rest) or 0)


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    parser = argparse.ArgumentParser(
        prog="kernelforms", description="Compile kernel-learning problems into SDP / SQLP / "
        "factorised formulations, solve them, and check that the objectives agree.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kernelforms {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    pc = sub.add_parser("compare", help="run several methods on one problem and compare objectives",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _problem_args(pc)
    pc.add_argument("--methods", required=True, help="comma-separated, e.g. sdp:scs,sdp:clarabel,admm")
    pc.add_argument("--rtol", type=float, default=1e-4, help="relative gap for agreement (default 1e-4)")
    pc.add_argument("--time-limit", type=float, default=None, help="seconds per method")
    pc.add_argument("--json", default=None, help="write the report as JSON to this path (updated "
                    "after every method, so an interrupted run keeps its finished rows)")
    pc.add_argument("--markdown", default=None, metavar="PATH",
                    help="write the report as a Markdown table to PATH ('-' for stdout)")
    pc.add_argument("--plot", default=None, metavar="PNG", help="save a convergence figure here")
    pc.add_argument("--baseline", default=None, metavar="FILE",
                    help="fail (exit 1) when a method drifts from the optimum stored in FILE")
    pc.add_argument("--save-baseline", default=None, metavar="FILE",
                    help="store this instance's optimum and per-method tolerances in FILE")
    pc.add_argument("--baseline-name", default=None, help="entry name in the baseline file "
                    "(default: matched by fingerprint; saved under a name built from the options)")
    pc.add_argument("--no-certify", action="store_true", help="skip the gradient certificates")
    pc.add_argument("--quiet", action="store_true", help="no progress lines")
    pc.set_defaults(func=_cmd_compare)

    pg = sub.add_parser("grid", help="compare on many instances (sizes x seeds) in parallel",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _problem_args(pg)
    pg.add_argument("--methods", required=True, help="comma-separated, e.g. sdp:scs,admm")
    pg.add_argument("--sizes", default=None, help="comma-separated numbers of points, e.g. 50,100,200")
    pg.add_argument("--seeds", default=None, help="comma-separated seeds (default: --seed)")
    pg.add_argument("--workers", type=int, default=None, help="local processes (default: CPUs)")
    pg.add_argument("--rtol", type=float, default=1e-4, help="relative gap for agreement")
    pg.add_argument("--time-limit", type=float, default=None, help="seconds per method")
    pg.add_argument("--json", default=None, help="write the list of reports as JSON")
    pg.add_argument("--plot", default=None, metavar="PNG", help="save a time-versus-size figure")
    pg.add_argument("--no-certify", action="store_true", help="skip the gradient certificates")
    pg.set_defaults(func=_cmd_grid)

    pd = sub.add_parser("datasets", help="list the data sets with their sizes")
    pd.set_defaults(func=_cmd_datasets)

    pm = sub.add_parser("methods", help="list the methods (and whether they apply to a problem)",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _problem_args(pm, optional=True)
    pm.set_defaults(func=_cmd_methods)

    sub.add_parser("bench", help="run a benchmark: kernelforms bench NAME [options]", add_help=False)
    sub.add_parser("reproduce", help="reproduce a seed paper's headline experiment: "
                   "kernelforms reproduce EXPERIMENT [--quick] [--out DIR]", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import KernelformsError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        return _cmd_bench(argv[1:])
    if argv and argv[0] == "reproduce":
        from .reproduce import main as reproduce_main

        return reproduce_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # output piped into `head`
        sys.stdout = open(__import__("os").devnull, "w")
        return 0
    except KernelformsError as exc:
        print(f"kernelforms: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
