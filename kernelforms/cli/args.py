"""The command line's flags: exit statuses, argument types, the problem and run flags, and
the checks made before any work (flags the problem does not use, output paths, recipes)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any, Callable



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

#: exit statuses
EXIT_AGREE, EXIT_DISAGREE, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

def _flag_problems() -> dict[str, tuple[str, ...]]:
    from ..problems.factory import all_parameters

    return {name: tuple(by_kind) for name, by_kind in all_parameters().items()}


#: problem flag (argparse dest) -> the problems that use it; any other problem refuses it
#: (derived from the problem classes' parameter schemas)
FLAG_PROBLEMS: dict[str, tuple[str, ...]] = _flag_problems()
_PAIRS = FLAG_PROBLEMS["n_must"]
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


def _param_type(p: Any) -> Callable[[str], Any]:
    """The argparse type of a numeric build parameter: its number type and its schema's range."""
    number = p.number

    def parse(text: str) -> Any:
        try:
            v = number(text)
        except ValueError:
            v = None
        if v is None or not p.matches(v):
            raise argparse.ArgumentTypeError(f"must be {p.describe(with_none=False)}; got {text!r}")
        return v

    parse.__name__ = "integer" if number is int else "number"
    return parse


def _param_help(name: str, by_kind: dict) -> str:
    """A build parameter's help: its text, its default per problem and the problems that
    use it (from the schema)."""
    first = next(iter(by_kind.values()))
    groups: dict[str, list[str]] = {}
    for kind, p in by_kind.items():
        groups.setdefault(p.default_text(), []).append(kind)
    if len(groups) == 1:
        default = f"default {next(iter(groups))}"
    else:
        default = "default " + "; ".join(f"{d} for {', '.join(ks)}" for d, ks in groups.items())
    needs = "".join(f" with --{o.replace('_', '-')} {w}" for o, w in first.requires)
    default = "" if first.is_switch else f" ({default})"
    return f"{first.help}{default} [{', '.join(by_kind)}{needs}]"


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
    from ..errors import KernelformsError
    from ..methods import get_method

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
    from ..errors import KernelformsError
    from ..explain import resolve_formulation

    try:
        resolve_formulation(text, "--method")
    except KernelformsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _formulation_command(sub: Any, name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
    """A subcommand on one problem and one formulation (``explain``, ``verify``)."""
    from ..registry import FORMULATIONS

    p = sub.add_parser(name, help=help_text, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _problem_args(p)
    p.add_argument("--method", type=_formulation_type, required=True,
                   help="a formulation: " + ", ".join(FORMULATIONS))
    p.set_defaults(func=func, _parser=p)
    return p


def _dataset_type(text: str) -> str:
    from ..data import datasets
    from ..errors import DataError

    try:
        datasets.info(text)  # the known-name check (DataError with close matches)
        return text
    except DataError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _memory_type(text: str) -> float:
    from ..errors import KernelformsError
    from ..solvers.base import parse_max_memory

    try:
        return parse_max_memory("--max-memory", text)
    except KernelformsError:
        raise argparse.ArgumentTypeError(f"must be a size such as 8GB, 512MiB or a number of bytes; "
                                         f"got {text!r}") from None


# ------------------------------------------------------------------ the parser
def _problem_args(p: argparse.ArgumentParser, optional: bool = False) -> None:
    from ..problems.factory import KINDS

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
    from ..problems.factory import all_parameters

    for name, by_kind in all_parameters().items():  # the problems' build parameters
        first = next(iter(by_kind.values()))
        kw: dict[str, Any] = {"default": None, "help": _param_help(name, by_kind)}
        if first.is_switch:
            kw["action"] = "store_true"
        elif first.choices:
            kw["choices"] = list(first.choices)
        else:
            kw["type"] = _param_type(first)
        p.add_argument(first.flag, **kw)
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



def _formulations_type(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if len(names) < 2 or len({n.lower() for n in names}) < len(names):
        raise argparse.ArgumentTypeError(f"give two or more different formulations separated by "
                                         f"commas, such as scsdp,sqlp; got {text!r}")
    for n in names:
        _formulation_type(n)
    return names



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
    from ..problems.factory import all_parameters

    params = all_parameters()
    for d in given:
        if args.problem not in FLAG_PROBLEMS[d]:
            args._parser.error(f"argument {flag(d)}: not used by {args.problem}; it applies to "
                               f"{', '.join(FLAG_PROBLEMS[d])} only")
        p = params[d][args.problem]
        for other, want in p.requires:
            have = getattr(args, other, None)
            have = params[other][args.problem].default if have is None else have
            if have != want:
                args._parser.error(f"argument {flag(d)}: only used by {args.problem} with {flag(other)} "
                                   f"{want} ({p.help}); {flag(other)} is {have}")


def _recipe(args: argparse.Namespace) -> dict:
    """The instance recipe (see kernelforms.testing) of the parsed problem options."""
    from ..recipes import RECIPE_DEFAULTS

    out = {}
    for k, d in RECIPE_DEFAULTS.items():
        v = getattr(args, k, None)
        out[k] = d if v is None else v
    return out


def _build_recipe(recipe: dict, max_memory: float | None = None):
    """``(problem, X, y)`` of a recipe (raises a KernelformsError on bad input); a generated
    data set is drawn only within ``max_memory`` bytes (default 4 GiB)."""
    from ..model.checks import limit_memory
    from ..recipes import build_with_data

    with limit_memory(max_memory):
        return build_with_data(recipe)


def _check_writable(path: str, what: str) -> None:
    """Refuse an output path that cannot be written (before any method runs)."""
    from ..compare import check_writable

    check_writable(path, what)


def _check_outputs(args: argparse.Namespace) -> None:
    # `is not None`: an empty string given is a bad path, named as given, not "no output"
    if getattr(args, "json", None) is not None:
        _check_writable(args.json, "--json")
    if getattr(args, "markdown", None) is not None and args.markdown != "-":
        _check_writable(args.markdown, "--markdown")
    if getattr(args, "plot", None) is not None:
        from ..plots import check_figure_path

        _check_writable(args.plot, "--plot")
        check_figure_path(args.plot, "--plot")
    if getattr(args, "save_baseline", None) is not None:
        _check_writable(args.save_baseline, "--save-baseline")
    if getattr(args, "baseline", None) is not None:
        from ..errors import DataError
        from ..testing import load_baseline

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
    from ..methods import get_method
    from ..solvers.base import IterativeSolver

    options: dict[str, dict] = {m: {} for m in args.methods}
    if getattr(args, "verbose", False):
        iterative = [m for m in args.methods if isinstance(get_method(m), IterativeSolver)]
        if not iterative:
            from ..methods import SOLVERS

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
