"""Benchmarks of BCDKL (Hu & Kwok 2015): scaling in n, colouring speed-up, out-of-sample accuracy.

Usage::

    python -m kernelforms.bench.bcd scaling  [--n 1000 10000 100000] [--pairs 1000]
                                             [--losses ...] [--adult a1a a2a ...]
                                             [--max-iter 300] [--eps 1e-5]
    python -m kernelforms.bench.bcd losses   [--n 100000] [--pairs 1000] [--losses ...]
                                             [--cache DIR] [--seed 0]
    python -m kernelforms.bench.bcd speedup  [--n 10000] [--sweeps 3]
    python -m kernelforms.bench.bcd accuracy [--cases 8] [--gammas 0.1 1 10] [--kinds ...]
    python -m kernelforms.bench.bcd oos      [--repeats 20]

``scaling``: time per sweep (median over the run) and total solve time for each loss on
the two-Gaussian set (d = 10, k = 5) and the shipped adult sets (k = 50), 1,000 pairs
(500 must, 500 cannot), rank by the paper's rule; then the least-squares slope of
log(time) against log(n) over the two-Gaussian sizes.  Graph building is not timed.

``losses``: ``bcd`` at its defaults (``rank=None``: rank 8, grown when the certificate asks)
on the same two-Gaussian instance for each loss: status, sweeps, rank path, solve time,
seconds per sweep and the certified relative gap of the result
(:func:`kernelforms.isolation.attach_certificate`, the tighter of bcd's duality gap and the
Lagrangian certificate).

``--cache DIR`` (``scaling`` and ``losses``): keep each two-Gaussian instance's points and
kNN Laplacian in ``DIR`` (one ``.npz`` per n and seed) and reuse them; building the graph of
1e5 points takes several minutes on a loaded machine.

``speedup``: seconds per sweep of the coloured order against the paper's sequential
order (Algorithm 1) on the same problem.

``accuracy``: the relative gap of ``bcd`` at its defaults to ``sdp:clarabel`` on unseen
breast-cancer and digits subsets (25-60 points), every loss and soft PCP, gamma 0.1/1/10;
``--kinds u2`` adds the declared problem U2 of docs/problems.md (P6's Laplacian, a hinge
loss on the cannot-links and a squared loss on the must-links, both of weight gamma).

``oos``: Hu & Kwok (2015) Fig. 5 on iris: half the points in-sample, constraints from the
in-sample half only (0.05 n ... 1.5 n of them, n = 150, half must / half cannot), the
kernel learned in-sample and extended to the other half (Section III-E); kernel k-means
(3 clusters) on the out-of-sample rows; Rand index averaged over the repeats.
"""

from __future__ import annotations

import argparse

from . import BenchParser
import time
import warnings

import numpy as np

from ..util import fit_exponent

LOSSES = ["hinge", "squared_hinge", "square", "linear"]
KINDS = LOSSES + ["pcp", "u2"]


def u2_problem(X, pairs, gamma: float):
    """U2 (docs/problems.md): tr(L K) + gamma sum_C hinge(-K_ij) + gamma sum_M (K_ij - 1)^2,
    with P6's graph (``NPKL.from_data``), as a :class:`~kernelforms.DeclaredProblem`."""
    import kernelforms as kf
    from kernelforms import model as km

    base = kf.NPKL.from_data(X, pairs, gamma=gamma).declaration
    n = base.n
    must, cannot = pairs.must, pairs.cannot
    decl = km.Declaration(km.PSD(n), linear=base.linear, losses=[
        km.LossTerm(km.Entries(n, cannot), km.Hinge(-np.ones(len(cannot))), gamma),
        km.LossTerm(km.Entries(n, must), km.Squared(np.ones(len(must))), gamma)])
    return kf.DeclaredProblem(decl, name="U2")


def two_gaussian_instance(n: int, seed: int, cache: str | None = None, k: int = 5):
    """The points ``X, y`` (``kf.datasets.two_gaussians(n, d=10, seed=seed)``) and their kNN
    Laplacian (``k`` neighbours, ``delta = 0.01``), read from / written to ``cache`` when given.

    Returns ``(X, y, L, seconds)``, ``seconds`` the time spent building the graph (0 when
    read from the cache).
    """
    import os

    import scipy.sparse as sp

    import kernelforms as kf
    from kernelforms.bench import cache_directory
    from kernelforms.data.graphs import knn_laplacian

    path = None
    if cache is not None:
        cache_directory(cache)
        path = os.path.join(cache, f"bcd_two_gaussians_n{n}_seed{seed}_k{k}.npz")
        if os.path.exists(path):
            with np.load(path) as z:
                L = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=(n, n))
                return z["X"], z["y"], L, 0.0
    X, y = kf.datasets.two_gaussians(n, d=10, seed=seed)
    t0 = time.perf_counter()
    L = knn_laplacian(X, k=k, delta=0.01).tocsr()
    built = time.perf_counter() - t0
    if path is not None:
        np.savez(path, X=X, y=y, data=L.data, indices=L.indices, indptr=L.indptr)
    return X, y, L, built


def _problem(X, y, n_pairs: int, loss: str, k: int, seed: int, L=None):
    import kernelforms as kf
    from kernelforms.data.graphs import knn_laplacian

    if L is None:
        L = knn_laplacian(X, k=k, delta=0.01)
    pairs = kf.pairs.sample_pairs(y, n_pairs // 2, n_pairs - n_pairs // 2, seed=seed)
    return kf.NPKL(L, pairs, loss=loss), L


def _run(problem, **opts):
    """Solve; ``extras["cpu"]`` is the process CPU time of the whole solve."""
    import kernelforms as kf

    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(problem, "bcd", **opts)
    res.extras["cpu"] = time.process_time() - c0
    return res


def scaling(args) -> int:
    import kernelforms as kf

    print(f"# BCDKL scaling: {args.pairs} pairs, eps = {args.eps:g}, max_iter = {args.max_iter}, "
          f"order = color; times in seconds (graph construction not timed)")
    print("# s/sweep: median over the sweeps of wall time / CPU time; total: wall / CPU of "
          "the solve without the colouring (BLAS limited to one thread)")
    hdr = (f"{'data':>14} {'n':>7} {'loss':>13} {'r':>3} {'col':>3} {'sweeps':>6} "
           f"{'s/sweep':>9} {'cpu/sweep':>9} {'total':>8} {'cpu tot':>8} {'status':>10} "
           f"{'objective':>12}")
    print(hdr)
    sets = [("two_gaussians", n) for n in args.n] + [(a, None) for a in args.adult]
    per = {loss: ([], [], [], []) for loss in args.losses}
    for name, n in sets:
        if n is not None:
            X, y, L, _ = two_gaussian_instance(n, args.seed, args.cache)
            k = 5
        else:
            X, y = kf.datasets.load(name)
            k = 50
            L = None
        for loss in args.losses:
            p, L = _problem(X, y, args.pairs, loss, k, args.seed, L)
            res = _run(p, eps=args.eps, max_iter=args.max_iter, seed=args.seed, record=False)
            sw = float(np.median(res.history["sweep_time"]))
            swc = float(np.median(res.history["sweep_cpu"]))
            tot = res.time - res.extras["coloring_time"]
            totc = res.extras["cpu"] - res.extras["coloring_cpu"]
            print(f"{name:>14} {p.n:>7} {loss:>13} {res.extras['rank']:>3} "
                  f"{res.extras['n_colors']:>3} {res.iterations:>6} {sw:>9.4f} {swc:>9.4f} "
                  f"{tot:>8.2f} {totc:>8.2f} {res.status.value:>10} {res.objective:>12.5g}",
                  flush=True)
            if n is not None:
                per[loss][0].append(p.n)
                per[loss][1].append(swc)
                per[loss][2].append(totc)
                per[loss][3].append(tot)
        del L
    if len(args.n) >= 2:
        print("\n# fitted exponent b in time ~ n^b (two-Gaussian sizes "
              f"{', '.join(str(n) for n in args.n)})")
        print(f"{'loss':>13} {'CPU per sweep':>14} {'CPU total':>10} {'wall total':>11}")
        for loss in args.losses:
            ns, sw, totc, tot = per[loss]
            print(f"{loss:>13} {fit_exponent(ns, sw):>14.3f} {fit_exponent(ns, totc):>10.3f} "
                  f"{fit_exponent(ns, tot):>11.3f}")
    return 0


def losses(args) -> int:
    """bcd at its defaults on one two-Gaussian instance, every loss: does it converge, in
    how many sweeps, how long, and what gap does the result certify."""
    import kernelforms as kf
    from kernelforms.isolation import attach_certificate

    X, y, L, built = two_gaussian_instance(args.n, args.seed, args.cache)
    print(f"# bcd at its defaults (seed {args.seed}), two-Gaussian n = {args.n} (d = 10, kNN k = 5, "
          f"delta = 0.01), {args.pairs} pairs; graph "
          f"{'read from the cache' if built == 0 else f'built in {built:.0f} s (not timed below)'}")
    print("# time: wall seconds of the solve (colouring included); s/sweep: median wall time of a "
          "sweep; cert. gap: the result's certified relative gap (attach_certificate); BLAS on one "
          "thread")
    print(f"{'loss':>13} {'status':>10} {'sweeps':>6} {'rank':>8} {'time':>8} {'s/sweep':>8} "
          f"{'cert. gap':>10} {'objective':>12}")
    for loss in args.losses:
        p, _ = _problem(X, y, args.pairs, loss, 5, args.seed, L)
        res = _run(p, seed=args.seed)
        attach_certificate(p, res)
        gap = res.certified_gap if res.certified_gap is not None else float("nan")
        ranks = "->".join(str(r) for r in res.rank_path or [res.extras["rank"]])
        print(f"{loss:>13} {res.status.value:>10} {res.iterations:>6} {ranks:>8} {res.time:>8.1f} "
              f"{float(np.median(res.history['sweep_time'])):>8.4f} {gap:>10.2e} "
              f"{res.objective:>12.6g}", flush=True)
    return 0


def speedup(args) -> int:
    import kernelforms as kf

    print(f"# coloured vs sequential order, two-Gaussian n = {args.n}, {args.pairs} pairs; "
          f"seconds per sweep (median of {args.sweeps} sweeps)")
    print(f"{'':>13} {'':>6} {'wall':>31} {'CPU':>31}")
    print(f"{'loss':>13} {'colors':>6} {'sequential':>11} {'color':>9} {'speed-up':>9} "
          f"{'sequential':>11} {'color':>9} {'speed-up':>9}")
    X, y = kf.datasets.two_gaussians(args.n, d=10, seed=args.seed)
    L = None
    for loss in args.losses:
        p, L = _problem(X, y, args.pairs, loss, 5, args.seed, L)
        seq = _run(p, order="sequential", max_iter=args.sweeps, eps=1e-300, record=False,
                   seed=args.seed)
        col = _run(p, order="color", max_iter=max(args.sweeps, 10), eps=1e-300, record=False,
                   seed=args.seed)
        ts = float(np.median(seq.history["sweep_time"]))
        tc = float(np.median(col.history["sweep_time"]))
        tsc = float(np.median(seq.history["sweep_cpu"]))
        tcc = float(np.median(col.history["sweep_cpu"]))
        print(f"{loss:>13} {col.extras['n_colors']:>6} {ts:>11.4f} {tc:>9.4f} {ts / tc:>8.1f}x "
              f"{tsc:>11.4f} {tcc:>9.4f} {tsc / tcc:>8.1f}x", flush=True)
    return 0


def oos(args) -> int:
    import kernelforms as kf
    from kernelforms.estimator import KernelLearner
    from kernelforms.evaluate import kernel_kmeans, pairwise_accuracy

    X, y = kf.datasets.load("iris")
    n = len(y)
    fracs = args.fracs
    print(f"# out-of-sample Rand index on iris (Hu & Kwok 2015, Fig. 5): half in-sample, constraints "
          f"on the in-sample half only, mean +- std over {args.repeats} repeats; "
          f"extension = {args.extension}")
    print(f"{'loss':>13} " + " ".join(f"{f'{f:g}n={int(round(f * n))}':>15}" for f in fracs))
    for loss in args.losses:
        cells = []
        for f in fracs:
            m = int(round(f * n))
            acc = []
            for rep in range(args.repeats):
                rng = np.random.default_rng(1000 + rep)
                perm = rng.permutation(n)
                I, O = np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
                pairs = kf.pairs.sample_pairs(y[I], m // 2, m - m // 2, seed=rep)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    kl = KernelLearner(problem="npkl", loss=loss, method="bcd",
                                       extension=args.extension, random_state=rep,
                                       method_options={"max_iter": args.max_iter}
                                       ).fit(X[I], pairs=pairs)
                Go = kl.transform(X[O])
                acc.append(pairwise_accuracy(y[O], kernel_kmeans(Go, 3, seed=rep)))
            cells.append(f"{100 * np.mean(acc):6.1f} +- {100 * np.std(acc):4.1f}")
        print(f"{loss:>13} " + " ".join(f"{c:>15}" for c in cells), flush=True)
    return 0


#: unseen instances of the accuracy check: (data, n, seed, standardise)
ACCURACY_CASES = [("cancer", 40, 2, False), ("cancer", 40, 11, True), ("digits", 25, 3, True),
                  ("cancer", 60, 5, False), ("digits", 60, 7, False), ("digits", 40, 13, True),
                  ("cancer", 25, 17, True), ("digits", 50, 21, False)]


def subset(name: str, n: int, seed: int, standardise: bool):
    """``n`` random points (seeded) of scikit-learn's breast cancer, digits or wine,
    optionally standardised (constant columns become 0)."""
    from sklearn import datasets

    loaders = {"cancer": datasets.load_breast_cancer, "digits": datasets.load_digits,
               "wine": datasets.load_wine}
    if name not in loaders:
        raise ValueError(f"subset: name must be one of {sorted(loaders)}; got {name!r}")
    load = loaders[name]
    X, y = load(return_X_y=True)
    sel = np.random.default_rng(seed).choice(len(y), n, replace=False)
    X, y = X[sel].astype(float), y[sel]
    if standardise:
        sd = X.std(0)
        X = (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)
    return X, y


def accuracy(args) -> int:
    """Relative gap of ``bcd`` at its defaults against ``sdp:clarabel`` on unseen
    breast-cancer / digits subsets (scikit-learn), every loss and P1, three gammas."""
    import kernelforms as kf

    print("# bcd at its defaults against sdp:clarabel: (f_bcd - f_sdp) / |f_sdp|; cert = the "
          "certified bound on it (duality gap); subsets of scikit-learn's breast cancer / digits, "
          "pairs = kf.pairs.sample_pairs(y, seed=seed)")
    print(f"{'data':>6} {'n':>3} {'seed':>4} {'std':>5} {'gamma':>5} {'kind':>13} {'gap':>9} "
          f"{'cert':>9} {'status':>9} {'sweeps':>6} {'time':>6}")
    worst: dict[str, float] = {}
    for name, n, seed, std in ACCURACY_CASES[: args.cases]:
        X, y = subset(name, n, seed, std)
        pairs = kf.pairs.sample_pairs(y, seed=seed)
        for gamma in args.gammas:
            for kind in args.kinds:
                p = (kf.PCP.from_data(X, pairs, gamma=gamma) if kind == "pcp"
                     else u2_problem(X, pairs, gamma) if kind == "u2"
                     else kf.NPKL.from_data(X, pairs, loss=kind, gamma=gamma))
                ref = kf.solve(p, "sdp:clarabel")
                res = _run(p, seed=0)
                g = (res.objective - ref.objective) / abs(ref.objective)
                worst[kind] = max(worst.get(kind, -np.inf), g)
                print(f"{name:>6} {n:>3} {seed:>4} {std!s:>5} {gamma:>5g} {kind:>13} {g:>+9.2e} "
                      f"{res.extras['rel_gap']:>9.2e} {res.status.value:>9} {res.iterations:>6} "
                      f"{res.time:>6.2f}", flush=True)
    print("# worst gap: " + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = BenchParser(prog="kernelforms bench bcd", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scaling", help="time per sweep and total time versus n")
    s.add_argument("--n", type=int, nargs="*", default=[1000, 10000, 100000])
    s.add_argument("--adult", nargs="*", default=["a1a", "a2a", "a3a", "a4a"])
    s.add_argument("--pairs", type=int, default=1000)
    s.add_argument("--losses", nargs="+", default=LOSSES, choices=LOSSES)
    s.add_argument("--max-iter", type=int, default=300)
    s.add_argument("--eps", type=float, default=1e-5)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--cache", default=None, metavar="DIR",
                   help="directory that keeps the two-Gaussian instances (points and graph)")
    s.set_defaults(func=scaling)
    s = sub.add_parser("losses", help="every loss at the defaults: status, sweeps, time, gap")
    s.add_argument("--n", type=int, default=100000)
    s.add_argument("--pairs", type=int, default=1000)
    s.add_argument("--losses", nargs="+", default=LOSSES, choices=LOSSES)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--cache", default=None, metavar="DIR",
                   help="directory that keeps the two-Gaussian instances (points and graph)")
    s.set_defaults(func=losses)
    s = sub.add_parser("speedup", help="coloured versus sequential order per sweep")
    s.add_argument("--n", type=int, default=10000)
    s.add_argument("--pairs", type=int, default=1000)
    s.add_argument("--sweeps", type=int, default=3)
    s.add_argument("--losses", nargs="+", default=LOSSES, choices=LOSSES)
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=speedup)
    s = sub.add_parser("accuracy", help="gap to sdp:clarabel at the defaults, unseen subsets")
    s.add_argument("--cases", type=int, default=len(ACCURACY_CASES))
    s.add_argument("--gammas", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    s.add_argument("--kinds", nargs="+", default=LOSSES + ["pcp"], choices=KINDS)
    s.set_defaults(func=accuracy)
    s = sub.add_parser("oos", help="out-of-sample accuracy on iris (Fig. 5)")
    s.add_argument("--repeats", type=int, default=20)
    s.add_argument("--fracs", type=float, nargs="+", default=[0.05, 0.1, 0.5, 1.0, 1.5])
    s.add_argument("--losses", nargs="+", default=LOSSES, choices=LOSSES)
    s.add_argument("--extension", choices=["joint", "harmonic", "mean"], default="joint")
    s.add_argument("--max-iter", type=int, default=1000)
    s.set_defaults(func=oos)
    args = ap.parse_args(argv)
    try:  # one BLAS thread: the solver's work is sparse products and tiny batched solves
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return int(args.func(args))
    with threadpool_limits(limits=1):
        return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
