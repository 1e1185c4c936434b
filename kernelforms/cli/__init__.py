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

The package: :mod:`.args` (flags, argument types, checks before any work), :mod:`.run`
(``compare``, ``learn``), :mod:`.grid` (``grid``, the dask scheduler), :mod:`.info`
(``datasets``, ``methods``, ``explain``, ``verify``, ``bench``); the parser and :func:`main`
are here.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from .args import (  # noqa: F401 - re-exported
    EPILOG,
    EXIT_AGREE,
    EXIT_BAD_INPUT,
    EXIT_DISAGREE,
    EXIT_INTERRUPTED,
    FLAG_PROBLEMS,
    GENERATED,
    _PAIRS,
    _build_recipe,
    _check_flags,
    _check_outputs,
    _check_writable,
    _dataset_type,
    _exit_code,
    _float_type,
    _formulation_command,
    _formulation_type,
    _formulations_type,
    _int_type,
    _list_type,
    _memory_type,
    _method_options,
    _methods_type,
    _problem_args,
    _recipe,
    _run_args,
    _write_failed,
)
from .grid import (  # noqa: F401 - re-exported
    SCHEDULER_TIMEOUT,
    _cmd_grid,
    _connect,
    _probe_scheduler,
)
from .info import (  # noqa: F401 - re-exported
    _cmd_bench,
    _cmd_datasets,
    _cmd_explain,
    _cmd_methods,
    _cmd_verify,
    _plan,
)
from .run import (  # noqa: F401 - re-exported
    _check_factor_dir,
    _cmd_compare,
    _cmd_learn,
    _colour,
    _export_programs,
    _save_factors,
)

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

def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

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



def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns its exit status (argparse's ``--help`` still exits)."""
    from ..errors import KernelformsError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        return _cmd_bench(argv[1:])
    if argv and argv[0] == "reproduce":
        from ..reproduce import main as reproduce_main

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

