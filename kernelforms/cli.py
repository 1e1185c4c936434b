"""The ``kernelforms`` command.

Examples
--------
kernelforms compare pcp --dataset soybean --methods sdp:scs,sdp:clarabel
kernelforms compare npkl --dataset iris --n-points 40 --loss hinge --methods sdp,bcd
kernelforms datasets
kernelforms methods pcp --dataset soybean
kernelforms grid pcp --dataset iris --sizes 30,60,120 --methods sdp:scs,admm --plot scaling.png
kernelforms bench admm --help

Every flag is checked before any method runs: a bad value, a flag that the chosen problem
does not use, an unknown method, or an output path that cannot be written ends the
command with a message and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import warnings
from typing import Any, Callable, Sequence

from .util import format_bytes, render_table

EPILOG = """examples:
  kernelforms compare pcp --dataset soybean --methods sdp:scs,sdp:clarabel
  kernelforms compare npkl --dataset iris --n-points 40 --loss square --methods sdp,admm
  kernelforms compare pcp --dataset two_gaussians --n-points 200 --methods sdp,admm --plot conv.png
  kernelforms compare mvu --dataset swiss_roll --n-points 25 --k 6 --methods sdp:clarabel --plot mvu.png
  kernelforms compare pcp --dataset iris --n-points 30 --methods sdp:clarabel --save-baseline base.json
  kernelforms compare pcp --dataset iris --n-points 30 --methods sdp:clarabel,sdp:scs --baseline base.json
  kernelforms compare pcp --dataset pendigits --n-points 500 --methods sdp:scs,admm --time-limit 60 --markdown -
  kernelforms grid pcp --dataset iris --sizes 30,60,120 --methods sdp:scs,admm --plot scaling.png
  kernelforms grid pcp --dataset iris --sizes 30,60 --seeds 0,1 --methods admm --scheduler tcp://10.0.0.5:8786
  kernelforms learn pcp --dataset soybean --out soybean.npz
  kernelforms learn pcp --data points.csv --pairs pairs.csv --gamma 10 --out G.npy
  kernelforms datasets
  kernelforms methods npkl --dataset soybean
  kernelforms explain regpcp --dataset soybean --m-basis 20 --method sqlp [--markdown]
  kernelforms explain regpcp --dataset soybean --m-basis 20 --methods scsdp,sqlp
  kernelforms verify regpcp --dataset soybean --m-basis 20 --method scsdp
  kernelforms bench NAME --help        (benchmarks: see `kernelforms bench --list`)
  kernelforms reproduce wu2009-tables --quick --out results/

--n-points: generated data sets (two_gaussians, chessboard, double_spiral, swiss_roll) are
drawn at that size; data sets read from files get a class-stratified random subset (seeded
by --seed), and asking for more points than the file has is an error.

exit status of `verify`: 0 when every check passes, 1 on a mismatch, 2 on bad input.

exit status of `compare` and `grid`: 0 when the objectives agree with evidence (a row
proved optimal, or two methods that finished agree) and match the --baseline, 1 when they
do not, 2 on bad input (nothing was run) or when a result could not be written, 3 when the
methods that finished agree but some ran out of time or failed, or when nothing was
verified (no method ran, e.g. every one refused by --max-memory; no method finished; a lone
row that nothing certifies), 130 when interrupted (finished rows stay in the --json file).
"""

LEARN_EPILOG = """examples:
  kernelforms learn pcp --dataset soybean --out soybean.npz
  kernelforms learn pcp --dataset pendigits --n-points 2000 --gamma 100 --out pen.npy
  kernelforms learn npkl --dataset iris --loss square --method admm --out iris.npz
  kernelforms learn pcp --data points.csv --out G.npz
  kernelforms learn pcp --data points.npy --pairs pairs.csv --gamma 10 --out G.npz

The instance is the one `kernelforms compare` builds from the same flags, so the factor's
objective is the optimum `compare` reports for the method.  Read the factor back with
numpy.load: G = numpy.load("G.npy"), or z = numpy.load("G.npz"); z["factor"], z["objective"].

exit status: 0 when the method converged (or is optimal), 3 when it stopped without that
(max_iter, timeout: the factor is still written, its status is in the .npz), 1 when it
returned no kernel, 2 on bad input or when the file could not be written.
"""

#: exit statuses
EXIT_AGREE, EXIT_DISAGREE, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

_PAIRS = ("pcp", "pcp-hard", "regpcp", "npkl")
#: problem flag (argparse dest) -> the problems that use it; any other problem refuses it
FLAG_PROBLEMS: dict[str, tuple[str, ...]] = {
    "k": _PAIRS + ("mvu", "regmvu"),
    "delta": _PAIRS,
    "gamma": ("pcp", "npkl"),
    "loss": ("npkl",),
    "b": ("npkl",),
    "m_basis": ("regpcp", "regmvu"),
    "nu": ("regmvu",),
    "n_must": _PAIRS,
    "n_cannot": _PAIRS,
    "per_class": _PAIRS,
    "rank": ("bregman",),
    "divergence": ("bregman",),
    "n_constraints": ("bregman",),
    "epsilon": ("bregman",),
    "inequality": ("mvu",),
}
#: data sets drawn by a generator (any number of points)
GENERATED = ("two_gaussians", "chessboard", "double_spiral", "swiss_roll")


# ------------------------------------------------------------------ argument types
def _int_type(low: int, why: str = "") -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}{why}; got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}{why}; got {text!r}")
        return v

    parse.__name__ = "integer"
    return parse


def _float_type(low: float, strict: bool, why: str = "") -> Callable[[str], float]:
    op = ">" if strict else ">="

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not math.isfinite(v) or v < low or (strict and v == low):
            raise argparse.ArgumentTypeError(f"must be a finite number {op} {low:g}{why}; got {text!r}")
        return v

    parse.__name__ = "number"
    return parse


def _list_type(item: Callable[[str], Any], what: str) -> Callable[[str], list]:
    def parse(text: str) -> list:
        parts = [p.strip() for p in text.split(",")]
        if not parts or any(not p for p in parts):
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {what} "
                                             f"(e.g. 30,60,120); got {text!r}")
        out = []
        for p in parts:
            try:
                out.append(item(p))
            except argparse.ArgumentTypeError as exc:
                raise argparse.ArgumentTypeError(f"{p!r} in {text!r}: {exc}") from None
        if len(set(out)) != len(out):
            raise argparse.ArgumentTypeError(f"lists a value twice: {text!r}")
        return out

    parse.__name__ = "list"
    return parse


def _methods_type(text: str) -> list[str]:
    from .errors import KernelformsError
    from .methods import get_method

    specs = [m.strip() for m in text.split(",")]
    if not specs or any(not m for m in specs):
        raise argparse.ArgumentTypeError(f"must be a comma-separated list of methods such as "
                                         f"sdp:scs,admm; got {text!r}")
    seen = set()
    for m in specs:
        try:
            name = get_method(m).name
        except KernelformsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if name in seen:
            raise argparse.ArgumentTypeError(f"{m!r} is listed twice in {text!r}")
        seen.add(name)
    return specs


def _formulation_type(text: str) -> str:
    from .errors import KernelformsError
    from .explain import resolve_formulation

    try:
        resolve_formulation(text, "--method")
    except KernelformsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _formulation_command(sub: Any, name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
    """A subcommand on one problem and one formulation (``explain``, ``verify``)."""
    from .registry import FORMULATIONS

    p = sub.add_parser(name, help=help_text, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _problem_args(p)
    p.add_argument("--method", type=_formulation_type, required=True,
                   help="a formulation: " + ", ".join(FORMULATIONS))
    p.set_defaults(func=func, _parser=p)
    return p


def _dataset_type(text: str) -> str:
    from .data import datasets
    from .errors import DataError

    try:
        datasets.info(text)  # the known-name check (DataError with close matches)
        return text
    except DataError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _memory_type(text: str) -> float:
    from .errors import KernelformsError
    from .solvers.base import parse_max_memory

    try:
        return parse_max_memory("--max-memory", text)
    except KernelformsError:
        raise argparse.ArgumentTypeError(f"must be a size such as 8GB, 512MiB or a number of bytes; "
                                         f"got {text!r}") from None


# ------------------------------------------------------------------ the parser
def _problem_args(p: argparse.ArgumentParser, optional: bool = False) -> None:
    from .problems.factory import KINDS
    from .problems.npkl import LOSSES

    p.add_argument("problem", choices=list(KINDS), help="; ".join(f"{k}: {v}" for k, v in KINDS.items()),
                   **({"nargs": "?", "default": None} if optional else {}))
    if optional:
        p.add_argument("--dataset", type=_dataset_type, default=None,
                       help="a name from `kernelforms datasets` (default soybean)")
    else:
        p.add_argument("--dataset", type=_dataset_type, required=True,
                       help="a name from `kernelforms datasets`")
    p.add_argument("--data-dir", default=None, help="directory holding data files not shipped (usps)")
    p.add_argument("--n-points", type=_int_type(2), default=None,
                   help="number of points: generated sets are drawn at this size, sets read from a "
                   "file get a class-stratified subset (at most the file's size)")
    p.add_argument("--scale", action="store_true", help="scale features to [-1, 1] first")
    p.add_argument("--seed", type=_int_type(0), default=None,
                   help="seed for data, pairs, subsets and solvers (default 0)")
    p.add_argument("--k", type=_int_type(1), default=None,
                   help="neighbours in the kNN graph (default 5; 4 for MVU) [not bregman]")
    p.add_argument("--delta", type=_float_type(0.0, False), default=None,
                   help="Laplacian shift (default 0; 0.01 for npkl) [pcp, pcp-hard, regpcp, npkl]")
    p.add_argument("--gamma", type=_float_type(0.0, True), default=None,
                   help="loss weight (default 1) [pcp, npkl]")
    p.add_argument("--loss", choices=list(LOSSES), default=None, help="npkl loss (default hinge) [npkl]")
    p.add_argument("--b", type=_float_type(0.0, True), default=None,
                   help="bound on ||v_i|| (default 1) [npkl with --loss linear]")
    p.add_argument("--m-basis", type=_int_type(1), default=None,
                   help="basis size (default 10) [regpcp, regmvu]")
    p.add_argument("--nu", type=_float_type(0.0, True), default=None, help="penalty (default 1) [regmvu]")
    p.add_argument("--n-must", type=_int_type(0), default=None,
                   help="must-link pairs (default 0.6 n) [pcp, pcp-hard, regpcp, npkl]")
    p.add_argument("--n-cannot", type=_int_type(0), default=None,
                   help="cannot-link pairs (default 0.6 n) [pcp, pcp-hard, regpcp, npkl]")
    p.add_argument("--per-class", action="store_true", default=None,
                   help="20 pairs per class / class pair (Wu et al. 2009) [pcp, pcp-hard, regpcp, npkl]")
    p.add_argument("--rank", type=_int_type(1), default=None, help="rank of K0 (default min(16, n, d)) [bregman]")
    p.add_argument("--divergence", choices=["burg", "von_neumann"], default=None,
                   help="Bregman divergence (default burg) [bregman]")
    p.add_argument("--n-constraints", type=_int_type(1), default=None,
                   help="random distance constraints (default 100, as Kulis et al. 2006 on "
                   "16-dimensional digits; data of lower rank often needs fewer to be feasible, "
                   "e.g. 10 on iris) [bregman]")
    p.add_argument("--epsilon", type=_float_type(0.0, False), default=None,
                   help="slack of the constraints: same class d <= (1 - epsilon) d0, other class "
                   "d >= (1 + epsilon) d0 (default 0.25; in [0, 1)) [bregman]")
    p.add_argument("--inequality", action="store_true", default=None,
                   help="distance rows <= d_ij^2 instead of == (Sun, Boyd, Xiao & Diaconis 2006; "
                   "strictly feasible, so certifiable) [mvu]")
    p.add_argument("--max-memory", type=_memory_type, default=None, metavar="SIZE",
                   help="size guard: a method estimated to need more memory is skipped with "
                   "its estimate, e.g. 16GB (default 4GiB; `kernelforms methods` shows the estimates)")


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--methods", type=_methods_type, required=True,
                   help="comma-separated, e.g. sdp:scs,sdp:clarabel,admm")
    p.add_argument("--rtol", type=_float_type(0.0, True), default=1e-4,
                   help="relative gap for agreement (default 1e-4)")
    p.add_argument("--vtol", type=_float_type(0.0, False), default=None,
                   help="largest constraint violation of a feasible row, absolute (default 1e-5 x "
                   "max(1, largest |b_k|) of the problem's constraint rows: 1e-5 of the largest "
                   "squared distance for MVU)")
    p.add_argument("--time-limit", type=_float_type(0.0, True), default=None, help="seconds per method")
    p.add_argument("--no-certify", action="store_true", help="skip the gradient certificates")


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
    _run_args(pc)
    pc.add_argument("--json", default=None, metavar="PATH", help="write the report as JSON to PATH "
                    "(updated after every method, so an interrupted run keeps its finished rows)")
    pc.add_argument("--markdown", default=None, metavar="PATH",
                    help="write the report as a Markdown table to PATH ('-' for stdout)")
    pc.add_argument("--plot", default=None, metavar="PNG", help="save a figure here: convergence of "
                    "every iterative method and the embedding of the best kernel")
    pc.add_argument("--baseline", default=None, metavar="FILE",
                    help="fail (exit 1) when a method drifts from the optimum stored in FILE")
    pc.add_argument("--save-baseline", default=None, metavar="FILE",
                    help="store this instance's optimum and per-method tolerances in FILE")
    pc.add_argument("--baseline-name", default=None, help="entry name in the baseline file "
                    "(default: matched by fingerprint; saved under a name built from the options)")
    pc.add_argument("--verbose", action="store_true",
                    help="hand-written solvers print their iteration table")
    pc.add_argument("--legend", action="store_true", help="explain the columns of the table")
    pc.add_argument("--quiet", action="store_true", help="no progress lines")
    pc.add_argument("--export", default=None, metavar="DIR",
                    help="also write the program of each conic method in --methods (every conic "
                    "formulation that applies, if none is) to DIR as SDPA (.dat-s) and CBF (.cbf), "
                    "for CSDP, SDPA, MOSEK, ... (see docs/export.md)")
    pc.add_argument("--save-factor", default=None, metavar="DIR",
                    help="write each finished row's factor G (K = G G^T) with its objective, "
                    "certified gap and fingerprint to DIR/METHOD.npz (see `kernelforms learn`)")
    pc.set_defaults(func=_cmd_compare, _parser=pc)

    pl = sub.add_parser("learn", help="learn a kernel at the defaults and write its factor G "
                        "(K = G G^T) to a .npy or .npz file",
                        epilog=LEARN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _problem_args(pl, optional=True)
    pl.add_argument("--data", default=None, metavar="FILE",
                    help="a file of your own points with labels instead of --dataset: CSV (label in "
                    "the last column, optional header), NPY (2-D, label last), NPZ (arrays X, y) or "
                    "LIBSVM (.svm)")
    pl.add_argument("--pairs", default=None, metavar="FILE",
                    help="must-/cannot-link pairs instead of drawing them from the labels: rows "
                    "'i, j, link' (link 1 must-link, 0 or -1 cannot-link; CSV or a (k, 3) NPY) "
                    "[pcp, pcp-hard, regpcp, npkl with --data]")
    pl.add_argument("--method", default="auto",
                    help="a method of `kernelforms methods` (default auto: lowrank for pcp / pcp-hard, "
                    "bcd for npkl, mvu for mvu, sdp for regpcp / regmvu, burg / vonneumann for bregman)")
    pl.add_argument("--out", required=True, metavar="PATH",
                    help="where to write the factor: .npy (G alone) or .npz (G, the embedding, labels, "
                    "objective, certified gap, fingerprint and the options used); written to a "
                    "temporary file and renamed")
    pl.add_argument("--time-limit", type=_float_type(0.0, True), default=None, help="seconds")
    pl.add_argument("--no-certify", action="store_true", help="skip the gradient certificate")
    pl.add_argument("--verbose", action="store_true",
                    help="hand-written solvers print their iteration table")
    pl.set_defaults(func=_cmd_learn, _parser=pl)

    pg = sub.add_parser("grid", help="compare on many instances (sizes x seeds) in parallel",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _problem_args(pg)
    _run_args(pg)
    pg.add_argument("--sizes", type=_list_type(_int_type(2), "numbers of points >= 2"), default=None,
                    help="comma-separated numbers of points, e.g. 50,100,200")
    pg.add_argument("--seeds", type=_list_type(_int_type(0), "seeds >= 0"), default=None,
                    help="comma-separated seeds (default: --seed)")
    pg.add_argument("--workers", type=_int_type(1), default=None, help="local processes (default: CPUs)")
    pg.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="run the instances on a running dask.distributed cluster, e.g. "
                    "tcp://10.0.0.5:8786 (pip install 'kernelforms[dask]'; its workers need kernelforms)")
    pg.add_argument("--json", default=None, metavar="PATH", help="write the list of reports as JSON "
                    "(rewritten as instances finish, so an interrupted grid keeps the finished ones)")
    pg.add_argument("--plot", default=None, metavar="PNG", help="save a time-versus-size figure")
    pg.set_defaults(func=_cmd_grid, _parser=pg)

    pd = sub.add_parser("datasets", help="list the data sets with their sizes")
    pd.set_defaults(func=_cmd_datasets, _parser=pd)

    pm = sub.add_parser("methods", help="list the methods and what `compare` would do with each "
                        "on a problem (runs, skips it and why, the memory it needs)",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _problem_args(pm, optional=True)
    pm.set_defaults(func=_cmd_methods, _parser=pm)

    pe = _formulation_command(sub, "explain", "print the program a formulation compiles the problem "
                              "into, in mathematical form (no solve)", _cmd_explain)
    pe.add_argument("--markdown", action="store_true", help="Markdown with $...$ LaTeX instead of text")
    for action in pe._actions:  # explain takes --method or --methods
        if action.dest == "method":
            action.required = False
    pe.add_argument("--methods", type=_formulations_type, default=None, metavar="A,B",
                    help="two or more formulations side by side: variables, cones, rank(A), the sizes "
                         "that drive the cost, the predicted work per iteration and the measured time "
                         "(e.g. scsdp,sqlp)")
    pe.add_argument("--no-measure", action="store_true",
                    help="with --methods: do not solve (no measured times)")
    pe.add_argument("--time-limit", type=_float_type(0.0, True), default=120.0, metavar="SECONDS",
                    help="with --methods: seconds per solve (default 120)")
    pv = _formulation_command(sub, "verify", "check on random points, without a solver, that a "
                              "formulation is a correct reformulation (exit 1 on a mismatch)", _cmd_verify)
    pv.add_argument("--points", type=_int_type(3), default=4, metavar="N",
                    help="random points to check (default 4, at least 3)")

    sub.add_parser("bench", help="run a benchmark: kernelforms bench NAME [options]", add_help=False)
    sub.add_parser("reproduce", help="reproduce a paper's headline experiment: "
                   "kernelforms reproduce EXPERIMENT [--quick] [--out DIR]", add_help=False)
    return parser


# ------------------------------------------------------------------ checks before any work
def _check_flags(args: argparse.Namespace) -> None:
    """A problem flag the chosen problem does not use is an error (it would be ignored)."""
    given = [d for d in FLAG_PROBLEMS if getattr(args, d, None) is not None]
    flag = lambda d: "--" + d.replace("_", "-")  # noqa: E731
    if args.problem is None:
        given += [d for d in ("dataset", "data_dir", "n_points", "seed", "max_memory")
                  if getattr(args, d, None) is not None] + (["scale"] if args.scale else [])
        if given:
            args._parser.error(f"{', '.join(map(flag, given))}: give a problem first, e.g. "
                               f"`kernelforms {args.command} pcp {flag(given[0])} ...`")
        return
    for d in given:
        if args.problem not in FLAG_PROBLEMS[d]:
            args._parser.error(f"argument {flag(d)}: not used by {args.problem}; it applies to "
                               f"{', '.join(FLAG_PROBLEMS[d])} only")
    if args.b is not None and (args.loss or "hinge") != "linear":
        args._parser.error("argument --b: only used by npkl with --loss linear (the bound on ||v_i|| "
                           f"of the linear loss); the loss is {args.loss or 'hinge'}")


def _recipe(args: argparse.Namespace) -> dict:
    """The instance recipe (see kernelforms.testing) of the parsed problem options."""
    from .recipes import RECIPE_DEFAULTS

    out = {}
    for k, d in RECIPE_DEFAULTS.items():
        v = getattr(args, k, None)
        out[k] = d if v is None else v
    return out


def _build_recipe(recipe: dict, max_memory: float | None = None):
    """``(problem, X, y)`` of a recipe (raises a KernelformsError on bad input); a generated
    data set is drawn only within ``max_memory`` bytes (default 4 GiB)."""
    from .model.checks import limit_memory
    from .recipes import build_with_data

    with limit_memory(max_memory):
        return build_with_data(recipe)


def _check_writable(path: str, what: str) -> None:
    """Refuse an output path that cannot be written (before any method runs)."""
    from .compare import check_writable

    check_writable(path, what)


def _check_outputs(args: argparse.Namespace) -> None:
    # `is not None`: an empty string given is a bad path, named as given, not "no output"
    if getattr(args, "json", None) is not None:
        _check_writable(args.json, "--json")
    if getattr(args, "markdown", None) is not None and args.markdown != "-":
        _check_writable(args.markdown, "--markdown")
    if getattr(args, "plot", None) is not None:
        from .plots import check_figure_path

        _check_writable(args.plot, "--plot")
        check_figure_path(args.plot, "--plot")
    if getattr(args, "save_baseline", None) is not None:
        _check_writable(args.save_baseline, "--save-baseline")
    if getattr(args, "baseline", None) is not None:
        from .errors import DataError
        from .testing import load_baseline

        path = args.baseline
        if not path.strip():
            raise DataError("--baseline '': not a file path; give the baseline file written by "
                            "--save-baseline")
        if os.path.isdir(path):
            raise DataError(f"--baseline {path!r} is a directory; give the baseline file (a JSON "
                            "file written by --save-baseline)")
        if not os.path.exists(path):
            raise DataError(f"--baseline {path!r}: no such file (create one with --save-baseline)")
        if not os.path.isfile(path):
            raise DataError(f"--baseline {path!r} is not a regular file; give the baseline file "
                            "written by --save-baseline")
        load_baseline(path)


def _method_options(args: argparse.Namespace) -> dict[str, dict]:
    """Per-method options: verbose for the hand-written solvers, the size guard for all."""
    from .methods import get_method
    from .solvers.base import IterativeSolver

    options: dict[str, dict] = {m: {} for m in args.methods}
    if getattr(args, "verbose", False):
        iterative = [m for m in args.methods if isinstance(get_method(m), IterativeSolver)]
        if not iterative:
            from .methods import SOLVERS

            args._parser.error(f"argument --verbose: applies to the hand-written solvers "
                               f"({', '.join(SOLVERS)}); --methods has none")
        for m in iterative:
            options[m]["verbose"] = True
    if args.max_memory is not None:
        for m in args.methods:
            options[m]["max_memory"] = args.max_memory
    return {m: o for m, o in options.items() if o}


def _exit_code(report: Any) -> int:
    """0 agree, 1 disagree, 3 agree among the rows that finished or unverified (see
    Report.exit_code)."""
    return int(report.exit_code)


def _write_failed(what: str, path: str, exc: BaseException) -> None:
    msg = getattr(exc, "strerror", None) or str(exc)
    print(f"kernelforms: error: could not write the {what} to {path!r}: {msg}; the report above "
          "is complete", file=sys.stderr)


# ------------------------------------------------------------------ commands
def _cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare

    _check_flags(args)
    if args.baseline_name is not None and not (args.baseline or args.save_baseline):
        args._parser.error("argument --baseline-name: only used with --baseline or --save-baseline")
    options = _method_options(args)
    _check_outputs(args)
    if args.save_factor:
        _check_factor_dir(args.save_factor)
    recipe = _recipe(args)
    problem, X, y = _build_recipe(recipe, args.max_memory)
    if args.export:
        _export_programs(args, problem)
    try:
        with warnings.catch_warnings():
            try:  # a failed --json write is reported below, once
                from .compare import ReportWriteWarning

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
            from .compare import atomic_write

            try:
                atomic_write(args.markdown, md)
                print(f"wrote {args.markdown}")
            except OSError as exc:
                _write_failed("Markdown table", args.markdown, exc)
                failed = True
    if args.plot:
        from . import plots

        try:
            color, color_label = _colour(args, X, y)
            plots.overview(report, args.plot, color=color, color_label=color_label,
                           title=f"{report.problem_label} on {args.dataset}")
            print(f"wrote {args.plot}")
        except (OSError, ValueError) as exc:
            _write_failed("figure", args.plot, exc)
            failed = True
    if args.save_baseline:
        from .errors import KernelformsError
        from .testing import save_baseline

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
        from .testing import check_baseline

        drifts = check_baseline(report, args.baseline, args.baseline_name)
        if drifts:
            print("baseline: FAILED\n  " + "\n  ".join(drifts))
            code = EXIT_DISAGREE
        else:
            print(f"baseline: ok ({args.baseline})")
    return EXIT_BAD_INPUT if failed else code


def _check_factor_dir(path: str) -> None:
    """``--save-factor DIR``: an existing, writable directory (checked before any work)."""
    from .errors import OptionError

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
    from .errors import KernelformsError
    from .learn import write_factor

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
    from .errors import KernelformsError
    from .learn import (auto_method, build_from_data, check_factor_path, learn, read_data, read_pairs,
                        write_factor)
    from .methods import get_method

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
        params = {k: recipe[k] for k in ("seed", "k", "delta", "gamma", "loss", "b", "m_basis", "nu",
                                         "n_must", "n_cannot", "per_class", "rank", "divergence",
                                         "n_constraints", "epsilon", "inequality")}
        pairs = None
        if args.pairs is not None:
            pairs = read_pairs(args.pairs, X.shape[0])
            recipe["pairs"] = os.path.abspath(args.pairs)
        problem = build_from_data(args.problem, X, y, pairs, **params)
        where = f"{args.data} ({X.shape[0]} points)"
    else:
        recipe = _recipe(args)
        problem, X, y = _build_recipe(recipe)
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
    from .exchange import export_all
    from .registry import FORMULATIONS

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


#: seconds the CLI waits for a dask scheduler to answer its first request
SCHEDULER_TIMEOUT = 15.0


def _probe_scheduler(address: str, timeout: float) -> None:
    """Ask the scheduler at ``address`` for its identity, the whole exchange bounded by
    ``timeout`` seconds: a server that accepts the connection but never answers, or answers
    with bytes that are not dask's protocol (a length header of exbibytes), fails here, in
    bounded time and memory, before a Client would wait for it without end."""
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    async def ask() -> Any:
        comm = await connect(address, timeout=timeout,
                             **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    async def bounded() -> Any:
        return await asyncio.wait_for(ask(), timeout)

    try:
        reply = asyncio.run(bounded())
    except (asyncio.TimeoutError, TimeoutError):
        raise TimeoutError(f"no answer within {timeout:g} s (the address accepts connections, but "
                           "nothing there speaks dask's protocol)") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise ValueError(f"the server there is not a dask scheduler (it answered {str(reply)[:80]!r})")


def _connect(address: str, timeout: float | None = None) -> Any:
    """A dask.distributed Client of the scheduler at ``address`` (a usage error when dask is
    missing, the address is not one, or the scheduler does not answer in ``timeout`` s)."""
    from .errors import OptionError

    timeout = SCHEDULER_TIMEOUT if timeout is None else timeout
    try:
        from distributed import Client
    except ImportError:
        raise OptionError("--scheduler needs dask.distributed: pip install 'kernelforms[dask]' "
                          "(or 'dask[distributed]')") from None

    def refuse(exc: BaseException, hint: str = "") -> OptionError:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return OptionError(f"--scheduler {address!r}: cannot connect to a dask scheduler there "
                           f"({type(exc).__name__}{': ' + why[:300] if why else ''}); "
                           + (hint or "give the address the scheduler prints, e.g. tcp://10.0.0.5:8786"))

    # the address and, for tcp, the port are checked first: a Client that fails to start
    # leaves threads behind that delay the exit of the command by many seconds
    hints = {"tls": "TLS needs the client's certificates: set them in dask's configuration "
                    "(distributed.comm.tls.ca-file, .client.cert, .client.key), or connect in Python "
                    "with Client(address, security=...) and pass it as compare_grid(executor=client)",
             "ucx": "the ucx protocol needs the distributed-ucxx package and a UCX-capable network; "
                    "the scheduler's tcp:// address works everywhere"}
    hint = hints.get(address.partition("://")[0].strip().lower(), "") if "://" in address else ""
    try:
        from distributed.comm import parse_address, parse_host_port, resolve_address

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # e.g. "the 'ucx' protocol was removed"
            resolved = resolve_address(address)
        scheme, loc = parse_address(resolved)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - an unknown scheme, a malformed address, a backend missing
        raise refuse(exc, hint) from None
    try:
        if scheme == "tcp":
            import socket

            socket.create_connection(parse_host_port(loc), timeout=10).close()
        _probe_scheduler(resolved, timeout)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - MemoryError from junk, TypeError from TLS, ...
        raise refuse(exc, hint) from None
    try:
        return Client(resolved, timeout=30)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001
        raise refuse(exc, hint) from None


def _cmd_grid(args: argparse.Namespace) -> int:
    from .grid import compare_grid, format_grid
    from .report import ReportWriteWarning

    _check_flags(args)
    for one, many in (("n_points", "sizes"), ("seed", "seeds")):
        if getattr(args, one) is not None and getattr(args, many) is not None:
            args._parser.error(f"argument --{many}: give --{many} or --{one.replace('_', '-')}, "
                               "not both")
    if args.scheduler is not None and args.workers is not None:
        args._parser.error("argument --workers: not used with --scheduler (the cluster's workers "
                           "run the instances)")
    options = _method_options(args)
    _check_outputs(args)
    base = _recipe(args)
    sizes = args.sizes or [base["n_points"]]
    seeds = args.seeds or [base["seed"]]
    recipes = [{**base, "n_points": n, "seed": s} for n in sizes for s in seeds]
    # built here, so that every bad instance is reported before anything runs, and so that
    # generated data sets are drawn at each size
    problems = [_build_recipe(r)[0] for r in recipes]
    client = _connect(args.scheduler) if args.scheduler is not None else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ReportWriteWarning)
            reports = compare_grid(problems, args.methods, executor=client, max_workers=args.workers,
                                   rtol=args.rtol, vtol=args.vtol, time_limit=args.time_limit,
                                   certify=not args.no_certify,
                                   options=options or None, json_path=args.json, recipes=recipes)
    except KeyboardInterrupt:
        where = f"; finished instances are in {args.json}" if args.json else ""
        print(f"kernelforms: interrupted{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if client is not None:
            client.close()
    write_errors = [w for w in caught if issubclass(w.category, ReportWriteWarning)]
    for w in caught:
        if w not in write_errors:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    print(format_grid(reports))
    codes = [_exit_code(r) for r in reports]
    verdicts = [r.verdict for r in reports]
    counts = {v: verdicts.count(v) for v in ("agree_partial", "unverified", "disagree") if v in verdicts}
    print(f"{verdicts.count('agree')} of {len(reports)} instances agree (rtol {args.rtol:g})"
          + "".join(f"; {n} {v.replace('_', ' ')}" for v, n in counts.items()))
    lost = [k for k, r in enumerate(reports) if any(x.message.startswith("worker lost") for x in r.rows)]
    if lost:
        print(f"worker lost (error rows): instance(s) {', '.join(map(str, lost))}")
    broken = [k for k, r in enumerate(reports) if k not in lost and not r.complete and r.rows
              and all(x.status.value == "error" for x in r.rows)]
    for k in broken:
        print(f"instance {k} did not run (error rows): {reports[k].rows[0].message}")
    failed = False
    if args.json:
        if write_errors:
            print(f"kernelforms: error: {write_errors[0].message} (the table above is complete)",
                  file=sys.stderr)
            failed = True
        else:
            print(f"wrote {args.json}")
    if args.plot:
        from .plots import scaling

        try:
            scaling(reports, args.plot, title=f"{args.problem} on {args.dataset}")
            print(f"wrote {args.plot}")
        except (OSError, ValueError) as exc:
            _write_failed("figure", args.plot, exc)
            failed = True
    if failed:
        return EXIT_BAD_INPUT
    return max(codes, key=lambda c: (c == EXIT_DISAGREE, c)) if codes else EXIT_AGREE


def _cmd_datasets(args: argparse.Namespace) -> int:
    from .data import datasets

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
    from .methods import plan

    return plan(problem, methods=None, max_memory=max_memory)


def _cmd_methods(args: argparse.Namespace) -> int:
    from .methods import FORMULATIONS, SOLVERS, get_method

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
        from .certificate import applies

        why = applies(problem)
        kind = "Lagrangian upper bound" if problem.sense == "max" else "Lagrangian lower bound"
        print(f"certificate ({kind}): " + ("applies" if why is None else f"no: {why}"))
    return 0


def _formulations_type(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if len(names) < 2 or len({n.lower() for n in names}) < len(names):
        raise argparse.ArgumentTypeError(f"give two or more different formulations separated by "
                                         f"commas, such as scsdp,sqlp; got {text!r}")
    for n in names:
        _formulation_type(n)
    return names


def _cmd_explain(args: argparse.Namespace) -> int:
    from .explain import compare_programs, explain

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
    from .verify import verify

    _check_flags(args)
    recipe = _recipe(args)
    problem = _build_recipe(recipe)[0]
    result = verify(problem, args.method, n_points=args.points, seed=recipe["seed"])
    print(result)
    return 0 if result.passed else EXIT_DISAGREE


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
        return EXIT_BAD_INPUT
    return int(importlib.import_module(f"kernelforms.bench.{name}").main(rest) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns its exit status (argparse's ``--help`` still exits)."""
    from .errors import KernelformsError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        return _cmd_bench(argv[1:])
    if argv and argv[0] == "reproduce":
        from .reproduce import main as reproduce_main

        return reproduce_main(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.func(args))
    except SystemExit as exc:  # argparse: usage errors exit 2 (returned), --help/--version 0
        if exc.code in (0, None):
            raise
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into `head`
        sys.stdout = open(os.devnull, "w")
        return 0
    except KernelformsError as exc:
        print(f"kernelforms: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
