"""The ``kernelforms`` command.

Examples
--------
kernelforms compare pcp --dataset soybean --methods sdp:scs,sdp:clarabel
kernelforms compare npkl --dataset iris --n-points 40 --loss hinge --methods sdp,bcd
kernelforms datasets
kernelforms methods pcp --dataset soybean
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
  kernelforms compare pcp --dataset two_gaussians --methods sdp,admm --json out.json
  kernelforms datasets
  kernelforms methods npkl --dataset soybean
  kernelforms bench NAME --help        (benchmarks: see `kernelforms bench --list`)

exit status of `compare`: 0 when the objectives agree, 1 when they do not, 2 on bad input.
"""


def _problem_args(p: argparse.ArgumentParser) -> None:
    from .problems.factory import KINDS

    p.add_argument("problem", choices=list(KINDS), help="; ".join(f"{k}: {v}" for k, v in KINDS.items()))
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


def _build(args: argparse.Namespace):
    from .data import datasets
    from .problems.factory import build_problem, subsample

    X, y = datasets.load(args.dataset, data_dir=args.data_dir, seed=args.seed)
    if args.scale:
        X = datasets.scale(X)
    if args.n_points is not None:
        X, y = subsample(X, y, args.n_points, seed=args.seed)
    return build_problem(args.problem, X, y, seed=args.seed, k=args.k, delta=args.delta,
                         gamma=args.gamma, loss=args.loss, b=args.b, m_basis=args.m_basis,
                         nu=args.nu, n_must=args.n_must, n_cannot=args.n_cannot,
                         per_class=args.per_class, rank=args.rank, divergence=args.divergence)


def _cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare

    problem = _build(args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    report = compare(problem, methods, rtol=args.rtol, seed=args.seed, time_limit=args.time_limit)
    print(f"data set: {args.dataset}" + (f" ({args.n_points} points)" if args.n_points else ""))
    print(report)
    if args.json:
        report.to_json(args.json)
        print(f"wrote {args.json}")
    return 0 if report.agree() else 1


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
    for name in list(FORMULATIONS) + list(SOLVERS):
        m = get_method(name)
        kind = "conic" if name in FORMULATIONS else "hand-written"
        line = f"{name:<12} {kind:<13} {m.formulation_name}"
        if problem is not None:
            reason = m.applies_to(problem)
            line += "   applies" if reason is None else f"   does not apply: {reason}"
        print(line)
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
    pc.add_argument("--json", default=None, help="write the report as JSON to this path")
    pc.set_defaults(func=_cmd_compare)

    pd = sub.add_parser("datasets", help="list the data sets with their sizes")
    pd.set_defaults(func=_cmd_datasets)

    pm = sub.add_parser("methods", help="list the methods (and whether they apply to a problem)")
    from .problems.factory import KINDS

    pm.add_argument("problem", nargs="?", choices=list(KINDS), default=None)
    pm.add_argument("--dataset", default="soybean")
    for a, d in (("--data-dir", None), ("--n-points", None), ("--k", None), ("--delta", None),
                 ("--n-must", None), ("--n-cannot", None)):
        pm.add_argument(a, default=d, type=None if a == "--data-dir" else (float if a == "--delta" else int))
    pm.set_defaults(func=_cmd_methods, scale=False, seed=0, gamma=1.0, loss="hinge", b=1.0,
                    m_basis=10, nu=1.0, per_class=False, rank=16, divergence="burg")

    sub.add_parser("bench", help="run a benchmark: kernelforms bench NAME [options]", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import KernelformsError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        return _cmd_bench(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KernelformsError as exc:
        print(f"kernelforms: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
