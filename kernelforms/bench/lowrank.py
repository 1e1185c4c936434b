"""Benchmark: MVU (P4) on a Swiss roll with the Burer-Monteiro solver ``"lowrank"``.

The full SDP of a 2,000-point MVU has a 2,000 x 2,000 PSD block (Clarabel's KKT system
alone would need ~8 (n^2/2)^2 bytes = 32 TB), so it is out of reach; ``"lowrank"``
solves it with an ``n x r`` factor.  Prints the objective, the largest constraint
violation, the run time, the spectrum of the learned kernel, the dual-slack
certificate of the solver, and (optionally) plots the first two coordinates of the
embedding.

    python -m kernelforms.bench.lowrank --n 2000 --k 4 --seed 1 --rank 10 --init regmvu \
        --time-limit 1200 --plot docs/img/mvu_swiss_roll.png

``--init regmvu`` starts from the graph-Laplacian-regularised solution (P5, Wu et al.'s (2009) own
way to make MVU tractable: ``K = Q Y Q^T`` with 10 Laplacian eigenvectors, nu = 100, solved
by ``lowrank`` in a fraction of a second), i.e. from an already unrolled embedding.

Two bounds bracket the MVU optimum without any SDP solve: the input points are feasible
(every distance is preserved), so ``tr(K*) >= ||X - mean||_F^2``; the certificate of
:mod:`kernelforms.certificate` (the solver's edge multipliers or ones fitted to the point,
whichever is tighter) gives ``tr(K*) <= upper bound``.
"""

from __future__ import annotations

import argparse

from . import BenchParser
import time
import warnings


def main(argv: list[str] | None = None) -> int:
    ap = BenchParser(prog="kernelforms bench lowrank", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="points on the Swiss roll (default 2000)")
    ap.add_argument("--k", type=int, default=4, help="neighbours of the kNN graph (default 4, docs/problems.md)")
    ap.add_argument("--rank", type=int, default=None, help="columns of G (default: the solver's rule)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=1800.0)
    ap.add_argument("--maxiter", type=int, default=20000)
    ap.add_argument("--feas-tol", type=float, default=1e-6)
    ap.add_argument("--plot", default=None, help="write the embedding plot to this PNG")
    ap.add_argument("--sdp", action="store_true", help="also run sdp:clarabel (small n only)")
    ap.add_argument("--save", default=None, help="save the factor G to this .npy file")
    ap.add_argument("--init", default=None,
                    help="'regmvu' (start from the RegMVU solution) or a .npy file with a factor")
    ap.add_argument("--compare", action="store_true",
                    help="instead: the small-instance table of lowrank / smo / simplenpkl against sdp:clarabel")
    args = ap.parse_args(argv)
    if args.compare:
        return small_table()

    import numpy as np

    import kernelforms as kf
    from kernelforms.errors import ConvergenceWarning

    X, y = kf.datasets.swiss_roll(args.n, seed=args.seed)
    problem = kf.MVU.from_data(X, k=args.k)
    print(f"MVU on a Swiss roll: n = {problem.n}, k = {args.k}, edges = {len(problem.edges)}")
    opts = {"maxiter": args.maxiter, "feas_tol": args.feas_tol}
    if args.rank is not None:
        opts["rank"] = args.rank
    if args.init == "regmvu":
        t0 = time.perf_counter()
        reg = kf.RegMVU(problem.edges, problem.distances, problem.n, m_basis=10, nu=100.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            r0 = kf.solve(reg, "lowrank", seed=args.seed)
        opts["init"] = r0.factor
        print(f"start: RegMVU (m = 10, nu = 100) by lowrank in {time.perf_counter() - t0:.2f} s: "
              f"tr(K) = {problem.objective(r0.kernel):.6g}, MVU violation {problem.violation(r0.kernel):.3g}")
    elif args.init:
        opts["init"] = np.load(args.init)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = kf.solve(problem, "lowrank", seed=args.seed, time_limit=args.time_limit, **opts)
    wall = time.perf_counter() - t0
    ev = res.kernel.eigenvalues()[:6] if res.factor is not None else []
    print(f"{'method':10s} {'status':10s} {'objective tr(K)':>18s} {'violation':>10s} {'time s':>8s} "
          f"{'iter':>7s} {'rank':>5s}")
    print(f"{'lowrank':10s} {res.status.value:10s} {res.objective:18.10g} {res.violation:10.2e} "
          f"{wall:8.1f} {res.iterations:7d} {res.rank_used or 0:5d}")
    print("top eigenvalues of K:", " ".join(f"{v:.4g}" for v in ev))
    if ev is not None and len(ev) >= 3:
        print(f"share of tr(K) in the top 2: {float(np.sum(ev[:2]) / max(res.objective, 1e-300)):.4f}")
    for key, value in [(k, res.extras.get(k)) for k in ("dual_slack_min_eig", "complementarity")] + [
            ("upper_bound", res.upper_bound), ("certified_gap", res.certified_gap),
            ("outer_iterations", res.extras.get("outer_iterations"))]:
        if value is not None:
            print(f"{key}: {value}")
    if res.factor is not None:
        from kernelforms import certificate

        lb = float(np.sum((X - X.mean(axis=0)) ** 2))
        print(f"lower bound (the input points are feasible): tr(K*) >= {lb:.10g}")
        t1 = time.perf_counter()
        certs = [("fitted multipliers", certificate.certify(problem, res.kernel, dense_below=5000))]
        if res.multipliers is not None:
            certs.append(("solver's multipliers", certificate.certify(
                problem, res.kernel, dense_below=5000, multipliers=res.multipliers)))
        for how, c in certs:
            print(f"certificate ({how}): tr(K*) <= {c.upper_bound:.10g}  (s = {c.min_eig:.3g}, "
                  f"{c.eig_method}); point: tr(K) = {c.objective:.10g}, violation {c.violation:.3g}")
        best = min(c.upper_bound for _, c in certs)
        print(f"certificate time {time.perf_counter() - t1:.1f} s; the optimum lies in "
              f"[{lb:.8g}, {best:.8g}]")
    if args.save and res.factor is not None:
        np.save(args.save, res.factor)
        print(f"factor saved to {args.save}")
    if args.sdp:
        ref = kf.solve(problem, "sdp:clarabel")
        print(f"sdp:clarabel {ref.status.value} {ref.objective:.10g} time {ref.time:.1f}s  "
              f"rel. gap {(ref.objective - res.objective) / abs(ref.objective):+.2e}")
    if args.plot and res.factor is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        G = res.factor
        U, s, _ = np.linalg.svd(G, full_matrices=False)
        Y = U[:, :2] * s[:2]
        t_roll = np.arctan2(X[:, 2], X[:, 0])  # colour by position along the roll
        t_roll = np.hypot(X[:, 0], X[:, 2])
        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        ax0 = fig.add_subplot(1, 2, 1, projection="3d")
        ax[0].remove()
        ax0.scatter(X[:, 0], X[:, 1], X[:, 2], c=t_roll, s=3, cmap="viridis")
        ax0.set_title(f"Swiss roll, n = {problem.n}")
        ax[1].scatter(Y[:, 0], Y[:, 1], c=t_roll, s=3, cmap="viridis")
        ax[1].set_aspect("equal")
        ax[1].set_title(f"MVU by lowrank (r = {G.shape[1]}): top-2 coordinates")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"plot written to {args.plot}")
    return 0


def small_table() -> int:
    """compare() on the small instances of docs/other_solvers.md (30-point blobs, 25-point roll)."""
    import numpy as np

    import kernelforms as kf

    rng = np.random.default_rng(7)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    y = np.repeat(np.arange(3), 10)
    X = centers[y] + rng.normal(scale=0.6, size=(30, 2))
    pairs = kf.pairs.sample_pairs(y, 12, 12, seed=1)
    roll = kf.datasets.swiss_roll(25, seed=0)[0]
    cases = [
        ("P1 soft PCP (blobs n=30)", kf.PCP.from_data(X, pairs), "sdp:clarabel,lowrank"),
        ("P2 hard PCP (blobs n=30)", kf.PCP.from_data(X, pairs, hard=True), "sdp:clarabel,lowrank"),
        ("P4 MVU (Swiss roll n=25, k=8)", kf.MVU.from_data(roll, k=8), "sdp:clarabel,lowrank"),
        ("P6 hinge (blobs n=30)", kf.NPKL.from_data(X, pairs, loss="hinge"),
         "sdp:clarabel,dual:clarabel,bcd,smo,simplenpkl"),
        ("P6 square (blobs n=30)", kf.NPKL.from_data(X, pairs, loss="square"),
         "sdp:clarabel,lowrank,bcd,simplenpkl"),
        ("P6 linear (blobs n=30)", kf.NPKL.from_data(X, pairs, loss="linear"),
         "sdp:clarabel,lowrank,simplenpkl"),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, problem, methods in cases:
            rep = kf.compare(problem, methods, certify=False, progress=False)
            print(f"## {name}")
            print(f"  {'method':14s} {'status':10s} {'objective':>16s} {'rel.gap':>9s} {'viol':>8s} "
                  f"{'solve s':>8s} {'iter':>6s}")
            for t in rep.table():
                print(f"  {t['method']:14s} {t['status']:10s} {t['objective']:16.10g} {t['gap']:+9.2e} "
                      f"{t['violation']:8.1e} {t['solve_s']:8.2f} {t['iterations'] or 0:6d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
