"""Benchmark: MVU (P4) on Swiss rolls, k = 4, by the MVU solver ``"mvu"`` (or any method).

For each size and seed: the wall time and the process's CPU time (one BLAS thread: on a
busy machine the CPU time is what an idle one would take), the largest distance violation relative to the
largest squared edge distance, the certified relative gap ``(upper bound - tr K) / tr K``
(the solver's own bound from its edge multipliers, see docs/certificate.md), mvu's
objective sensitivity (``||lam||_1 violation / tr K``, how far the objective may move when
the point is made feasible; ``converged`` needs it within ``gap_tol``), the rank and the
iterations.  A seed whose 4-NN graph is disconnected (MVU is then unbounded) is
reported and skipped; ``--connected`` replaces it by the next connected seed.

    kernelforms bench mvu                          # n = 300 and 2,000, seeds 0-4, 60 s each
    kernelforms bench mvu --sizes 300 --seeds 0 --methods mvu,lowrank --time-limit 120
    kernelforms bench mvu --large                  # also n = 20,000 (first connected seed >= 0)
    kernelforms bench mvu --sizes 2000 --seeds 1 --plot docs/img/mvu_2000.png
    kernelforms bench mvu --sizes 2000 --seeds 1 --feas-tol 1e-4 --gap-tol 1e-3  # a 1e-3 gap target
    kernelforms bench mvu --formulations inequality,equality --sizes 2000 --seeds 1 2 3 --connected
    kernelforms bench mvu --formulations equality-reduced --sizes 2000 --seeds 1 --connected

``--formulations inequality,equality`` solves both forms on the same roll and adds, per roll,
the rows slack at the inequality point (shorter than asked by more than :data:`SLACK_TOL` of
the largest ``d_ij^2``) and the ratio of the equality form's certified upper bound to the
inequality point's ``tr K``: below 1, the two optima provably differ; with no slack row the
inequality solution is feasible for the equality form and certifies it too.
``equality-reduced`` (form ``==F``) is the equality form solved on the face of its cliques
(mvu's ``face=True``; other methods do not take it): its rows add the face's codimension
``q`` and ``mult.``, the certifying multipliers' size ``||lam||_1 max d_ij^2 / tr K`` (every
row shows it when the method returns multipliers).

The violation of ``lowrank`` and ``mvu`` is in the problem's units (squared distances);
dividing by the largest ``d_ij^2`` makes it comparable across sizes.
"""

from __future__ import annotations

import argparse

from . import BenchParser
import time
import warnings


#: seeds tried by ``--connected`` for a connected k-NN graph before the row is skipped
CONNECTED_TRIES = 20
#: a distance row is slack when shorter than asked by more than this fraction of the
#: largest squared distance
SLACK_TOL = 1e-6
#: the formulations of ``--formulations`` and their short names in the table
FORMS = {"inequality": "<=", "equality": "==", "equality-reduced": "==F"}


def _connected(X, k: int) -> int:
    """Number of connected components of the symmetrised kNN graph of ``X``."""
    import numpy as np
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    from kernelforms.data.graphs import knn_edges

    E, _ = knn_edges(X, k=k)
    n = X.shape[0]
    A = sp.coo_matrix((np.ones(len(E)), (E[:, 0], E[:, 1])), shape=(n, n))
    return int(connected_components(A, directed=False)[0])


def find_roll(n: int, seed: int, k: int = 4, connected: bool = False) -> tuple:
    """``(X, seed, None)``: the Swiss roll of ``seed`` (with ``connected`` the first seed from
    ``seed`` on whose ``k``-NN graph is connected), or ``(None, last seed, reason)`` when its
    graph is not connected."""
    import kernelforms as kf

    s = seed
    counts = []
    while True:
        X, _ = kf.datasets.load("swiss_roll", n_points=n, seed=s)
        ncomp = _connected(X, k)
        counts.append(ncomp)
        if ncomp == 1 or not connected or len(counts) == CONNECTED_TRIES:
            break
        s += 1
    if ncomp > 1:
        # the k-NN graphs of large rolls are rarely connected at k = 4 (100,000 points,
        # seeds 1-3: 10, 13 and 16 components); the search stops instead of running on
        return None, s, (f"skipped: {ncomp} components" if len(counts) == 1 else
                         f"skipped: no connected {k}-NN graph in seeds {seed}-{s} (components "
                         f"{min(counts)}-{max(counts)}); raise --k")
    return X, s, None


def run_one(n: int, seed: int, method: str, k: int = 4, time_limit: float = 60.0,
            connected: bool = False, options: dict | None = None, equality: bool = True,
            roll: tuple | None = None, face: bool = False) -> dict:
    """One row: build the Swiss roll MVU (``seed``; with ``connected`` the first seed from
    ``seed`` on whose graph is connected; or ``roll``, a :func:`find_roll` result) and solve
    it with ``method`` (and ``options``); ``equality=False``: the inequality form (distance
    rows ``<=``), with the number of rows slack at the point (shorter than asked by more than
    :data:`SLACK_TOL` of the largest); ``face``: mvu on the face of the cliques (form ``==F``)."""
    import numpy as np

    import kernelforms as kf
    from kernelforms.errors import ConvergenceWarning

    X, s, skipped = roll if roll is not None else find_roll(n, seed, k, connected)
    row = {"n": n, "seed": s, "method": method,
           "form": ("==F" if face else "==") if equality else "<="}
    if skipped is not None:
        row.update(status=skipped)
        return row
    problem = kf.MVU.from_data(X, k=k, equality=equality)
    dmax2 = float(np.max(problem.distances) ** 2)
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        opts = dict(options or {}, **({"face": True} if face else {}))
        res = kf.solve(problem, method, seed=0, time_limit=time_limit, **opts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    gap = res.certified_gap
    if gap is None and res.factor is not None and res.multipliers is not None:
        # lowrank: its multipliers through kernelforms.certificate
        from kernelforms import certificate

        try:
            c = certificate.certify(problem, res.kernel, multipliers=res.multipliers)
            gap = (c.upper_bound - res.objective) / max(abs(res.objective), 1e-300)
        except Exception:  # noqa: BLE001 - a missing bound is reported as such
            gap = None
    row.update(status=res.status.value, time=wall, cpu=cpu, objective=res.objective,
               upper_bound=res.upper_bound, violation=res.violation / dmax2, gap=gap,
               sensitivity=res.extras.get("objective_sensitivity"),
               rank=int(res.rank_used if res.rank_used is not None else res.rank), iterations=res.iterations,
               edges=len(problem.edges), factor=res.factor, X=X)
    if res.multipliers is not None and res.objective:
        row["mult"] = float(np.sum(np.abs(res.multipliers))) * dmax2 / abs(res.objective)
    if "face" in res.extras:
        row["face"] = res.extras["face"]
    if not equality and res.factor is not None:
        G = np.asarray(res.factor)
        E = problem.edges
        dK = np.sum((G[E[:, 0]] - G[E[:, 1]]) ** 2, axis=1)
        d2 = problem.distances**2
        row["slack"] = int(np.sum(dK < d2 - SLACK_TOL * dmax2))
        # the point shrunk by 1 / sqrt(1 + shrink) satisfies every <= row: the inequality
        # optimum is at least tr K / (1 + shrink)
        pos = d2 > 0
        row["shrink"] = float(np.max(np.maximum(dK[pos] - d2[pos], 0.0) / d2[pos], initial=0.0))
    return row


def compare(le: dict, eq: dict) -> str:
    """The two forms on one roll, in a sentence: the rows slack at the inequality point and
    the equality form's certified upper bound against what the inequality point proves.

    The inequality optimum is at least the equality optimum (more kernels are feasible), and
    at least ``tr K / (1 + shrink)`` of the inequality point (shrunk by ``1 / sqrt(1 +
    shrink)``, ``shrink`` its largest relative row excess, it satisfies every row).  So the
    ratio ``upper bound(==) (1 + shrink) / tr K(<=)`` below 1 proves the two optima differ by
    at least that much; with no slack row and a converged inequality point, that point is
    feasible for the equality form (to its violation and :data:`SLACK_TOL`) and its own bound
    certifies it there too."""
    if "time" not in le or "time" not in eq:
        return "not compared (a form was skipped)"
    head = f"{le['slack']:,}/{le['edges']:,} rows slack at the <= point"
    if le["slack"] == 0 and le["status"] == "converged":
        return (f"{head}: it is feasible for == too (violation {le['violation']:.1e}, rows within "
                f"{SLACK_TOL:g} of max d^2), so it solves and certifies the equality form "
                f"(certified gap {le['gap']:.1e})")
    ub = eq.get("upper_bound")
    if ub is None:
        return f"{head}; the == run has no certified bound"
    ratio = ub * (1.0 + le.get("shrink", 0.0)) / le["objective"]
    if ratio < 1:
        return (f"{head}; == bound / <= optimum <= {ratio:.4f}: the optima differ, the == one "
                f"at least {1 - ratio:.1%} below")
    return f"{head}; == bound / <= point's tr K = {ratio:.4f}: not separated"


def _fmt(row: dict) -> str:
    if "time" not in row:
        return f"{row['n']:>7d} {row['seed']:>5d} {row['method']:>8s} {row['form']:>4s}  {row['status']}"
    gap = "-" if row["gap"] is None else f"{row['gap']:+.2e}"
    sens = "-" if row.get("sensitivity") is None else f"{row['sensitivity']:.2e}"
    return (f"{row['n']:>7d} {row['seed']:>5d} {row['method']:>8s} {row['form']:>4s} {row['status']:>10s} "
            f"{row['time']:8.1f} {row['cpu']:8.1f} {row['objective']:16.9g} {row['violation']:10.2e} {gap:>10s} {sens:>9s} "
            f"{row['rank']:5d} {row['iterations'] or 0:8d}"
            + (f" {row['mult']:9.2e}" if "mult" in row else f" {'-':>9s}")
            + (f" q={row['face']['codimension']}" if "face" in row else "")
            + (f" {row['slack']:>6d}/{row['edges']}" if "slack" in row else ""))


def main(argv: list[str] | None = None) -> int:
    ap = BenchParser(prog="kernelforms bench mvu", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 2000],
                    help="points on the Swiss roll (default 300 2000)")
    ap.add_argument("--large", action="store_true", help="also n = 20,000 (long)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--methods", default="mvu", help="comma-separated methods (default mvu)")
    ap.add_argument("--k", type=int, default=4, help="neighbours of the kNN graph (default 4)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    ap.add_argument("--connected", action="store_true",
                    help="replace a seed with a disconnected graph by the next connected one")
    ap.add_argument("--feas-tol", type=float, default=None,
                    help="mvu's feas_tol (default: the solver's, 1e-5 for == rows, 1e-6 for <= rows)")
    ap.add_argument("--gap-tol", type=float, default=None,
                    help="mvu's gap_tol (default: the solver's, 2e-4; a 1e-3 gap is the target at scale)")
    ap.add_argument("--inequality", action="store_true",
                    help="distance rows <= d_ij^2 (MVU(equality=False)); adds the slack rows "
                         "(same as --formulations inequality)")
    ap.add_argument("--formulations", default=None,
                    help="comma-separated: inequality, equality (default equality, or inequality "
                         "with --inequality); both: each roll solved in both forms and compared")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--plot", default=None,
                    help="write the embedding of the first solved row to this PNG")
    args = ap.parse_args(argv)
    import os

    if args.formulations is None:
        forms = ["inequality" if args.inequality else "equality"]
    else:
        forms = [f.strip() for f in args.formulations.split(",") if f.strip()]
        bad = [f for f in forms if f not in FORMS]
        if bad or not forms or (args.inequality and any(f.startswith("equality") for f in forms)):
            ap.error(f"--formulations takes inequality, equality, equality-reduced (comma-separated); got "
                     f"{args.formulations!r}" + (" with --inequality" if args.inequality else ""))
    sizes = list(args.sizes) + ([20000] if args.large else [])
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    print(f"MVU on Swiss rolls, k = {args.k}, time limit {args.time_limit:g} s, "
          f"load average {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores); slack: shorter than "
          f"asked by more than {SLACK_TOL:g} of the largest d_ij^2")
    print(f"{'n':>7s} {'seed':>5s} {'method':>8s} {'form':>4s} {'status':>10s} {'time s':>8s} {'cpu s':>8s} "
          f"{'tr(K)':>16s} {'viol/dmax2':>10s} {'cert. gap':>10s} {'sens.':>9s} {'rank':>5s} {'iter':>8s} {'mult.':>9s}"
          + (" slack/edges" if "inequality" in forms else ""))
    plotted = False
    rows = []
    for n in sizes:
        seeds = [0] if n >= 20000 and not args.connected and args.seeds == [0, 1, 2, 3, 4] else args.seeds
        for seed in seeds:
            roll = find_roll(n, seed, args.k, args.connected or n >= 20000)
            for method in methods:
                opts = {}
                if method == "mvu":
                    pairs = (("feas_tol", args.feas_tol), ("gap_tol", args.gap_tol))
                    opts = {key: val for key, val in pairs if val is not None}
                got = {}
                for form in forms:
                    row = run_one(n, seed, method, args.k, args.time_limit, options=opts,
                                  equality=form != "inequality", roll=roll,
                                  face=form == "equality-reduced")
                    got[form] = row
                    rows.append(row)
                    print(_fmt(row), flush=True)
                    if args.plot and not plotted and row.get("factor") is not None:
                        _plot(row, args.plot)
                        plotted = True
                for eq in ("equality", "equality-reduced"):
                    if "inequality" in got and eq in got:
                        got[eq]["compare"] = compare(got["inequality"], got[eq])
                        print(f"{'':>7s} {'':>5s} {method:>8s}  {FORMS[eq]}: {got[eq]['compare']}",
                              flush=True)
    if args.json:
        _write_json(args.json, rows)
    return 0


def _write_json(path: str, rows: list) -> None:
    """The rows (without the factor and the data) as JSON, written to a temporary name and
    renamed."""
    import json
    import os

    keep = [{k: v for k, v in r.items() if k not in ("factor", "X")} for r in rows]
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(keep, fh, indent=1, default=float)
    os.replace(tmp, path)


def _plot(row: dict, path: str) -> None:
    """The Swiss roll and the top two coordinates of the learned embedding."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    X, G = row["X"], row["factor"]
    U, s, _ = np.linalg.svd(G - G.mean(axis=0), full_matrices=False)
    Y = U[:, :2] * s[:2]
    colour = np.hypot(X[:, 0], X[:, 2])  # position along the roll
    fig = plt.figure(figsize=(10, 4))
    ax0 = fig.add_subplot(1, 2, 1, projection="3d")
    ax0.scatter(X[:, 0], X[:, 1], X[:, 2], c=colour, s=3, cmap="viridis")
    ax0.set_title(f"Swiss roll, n = {row['n']} (seed {row['seed']})")
    ax1 = fig.add_subplot(1, 2, 2)
    ax1.scatter(Y[:, 0], Y[:, 1], c=colour, s=3, cmap="viridis")
    ax1.set_aspect("equal")
    gap = "-" if row["gap"] is None else f"{row['gap']:.1e}"
    ax1.set_title(f"{row['method']}: {row['status']}, {row['time']:.0f} s, "
                  f"viol {row['violation']:.1e}, gap {gap}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot written to {path}")


if __name__ == "__main__":
    raise SystemExit(main())
