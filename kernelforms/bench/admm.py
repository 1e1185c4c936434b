"""Benchmarks of KL_ADMM (Hu & Kwok 2013): scaling in n, the adult-size run, accuracy, agreement.

Run as ``python -m kernelforms.bench.admm COMMAND`` or ``kernelforms bench admm COMMAND``:

``scaling``
    Two-Gaussian data (Hu & Kwok 2013, Section 4.2), 1,000 pairs, n in {1e3, 1e4, 1e5}: time per
    iteration, total time, and the least-squares exponent of time versus n.
``adult``
    The adult-a6a size (two-Gaussian data, n = 11,220, k = 50, r = 275, 100 iterations;
    Hu & Kwok 2013 report 7,661.7 s for a6a).
``accuracy``
    Hu & Kwok 2013, Table 2: kernel k-means on the learned kernel, Rand index, mean +- std over 20
    constraint draws, printed beside the paper's KL_ADMM column.
``agreement``
    Objective of admm against the full SDP (SCS at eps 1e-8) on iris, wine and a
    300-point two-Gaussian set.
``million``
    The whole pipeline at n = 1,000,000 two-Gaussian points: data, kNN graph, pairs (0.6 n
    must-links and 0.6 n cannot-links), admm at its defaults and the certificate, each
    stage's time and peak resident memory (target: certified gap <= 1e-5 within 300 s
    and 8 GiB). ``--graph`` picks the neighbour search (default: approximate above 200,000
    points).
``roofline``
    Seconds per iteration at rank 8 (Algorithm 1's iteration, the objective tracked) against
    the bytes one iteration must move (:func:`iteration_bytes`) at this machine's copy
    bandwidth (numpy, one thread and two): the ratio to the memory-bound limit.
    ``--graph-cache`` reads the graph ``million`` cached.
``sweep``
    admm at its defaults on real data of 1,600-10,000 points (pendigits, digits, a1a-a4a,
    usps subsets when ``usps.csv.gz`` is found), P1 and NPKL-square: per row the status,
    objective, certified gap, iterations and time; every ``converged`` row must be certified
    within admm's tolerance (1e-4), else the command exits 1.
"""

from __future__ import annotations

import argparse

from . import BenchParser
import math
import time
import warnings

import numpy as np

from ..util import fit_exponent as _fit_exponent  # the one fit (tests import this name)

#: Hu & Kwok 2013, Table 2, column KL_ADMM: clustering accuracy (%) mean, std (paper, table, row)
PAPER_TABLE2 = {
    "chessboard": (91.28, 4.17),
    "double_spiral": (99.70, 0.96),  # row "dbl-spiral"
    "glass": (83.56, 2.02),
    "heart": (78.88, 2.79),
    "iris": (98.69, 1.08),
    "sonar": (91.54, 2.49),
    "soybean": (98.73, 3.84),
    "wine": (84.11, 2.29),
    "a1a": (95.85, 1.35),  # row "adult-a1a"
    "a2a": (95.65, 0.58),
    "a3a": (93.16, 0.93),
    "a4a": (93.23, 0.46),
}
PAPER_SOURCE = "Hu & Kwok 2013, Table 2, column KL_ADMM"
#: data sets with k = 50 in Hu & Kwok 2013 (the adult sets); the others use k = 5
ADULT = {"a1a", "a2a", "a3a", "a4a"}
#: data sets generated here (the paper's files are not available): figures are indicative
GENERATED = {"chessboard", "double_spiral"}


def _pcp(X, y, *, k: int, seed: int, n_must=None, n_cannot=None, L=None):
    from ..data.graphs import knn_laplacian
    from ..data.pairs import sample_pairs
    from ..problems.pcp import PCP

    if L is None:
        L = knn_laplacian(X, k=k)
    return PCP(L, sample_pairs(y, n_must=n_must, n_cannot=n_cannot, seed=seed)), L


def _load_note() -> None:
    import os

    try:
        la = os.getloadavg()[0]
        print(f"(load average {la:.1f} on {os.cpu_count()} cores while measuring)")
    except OSError:  # pragma: no cover
        pass


# ----------------------------------------------------------------------------- scaling
def cmd_scaling(a) -> int:
    from ..data.datasets import two_gaussians
    from ..methods import solve
    from ..problems.base import rank_rule

    rank = a.rank if a.rank is not None else rank_rule(a.pairs, 10**9)
    print(f"KL_ADMM scaling: two Gaussians (d = 10), {a.pairs} pairs "
          f"({a.pairs // 2} must, {a.pairs - a.pairs // 2} cannot), k = {a.k}, r = {rank}, "
          f"{a.iters} iterations (tol = 0: no early stop)")
    print(f"{'n':>8} {'nnz(L)':>9} {'graph s':>8} {'setup s':>8} {'ms/iter':>9} {'cpu ms/it':>9} "
          f"{'total s':>8} {'objective':>14}")
    rows = []
    for n in a.sizes:
        X, y = two_gaussians(n, seed=a.seed)
        t = time.perf_counter()
        P, L = _pcp(X, y, k=a.k, seed=a.seed, n_must=a.pairs // 2, n_cannot=a.pairs - a.pairs // 2)
        tg = time.perf_counter() - t
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Algorithm 1's iteration, timed as in Hu & Kwok 2013, Figure 3 (no acceleration)
            res = solve(P, "admm", seed=a.seed, rank=rank, max_iter=a.iters, tol=1e-300,
                        track_objective=False, threads=a.threads, accelerate=None)
        per = (res.history["time"][-1] - res.extras["setup_time"]) / res.iterations
        cpu = res.extras["cpu_time_iterations"] / res.iterations
        rows.append((n, per, res.time, cpu))
        print(f"{n:>8} {L.nnz:>9} {tg:>8.2f} {res.extras['setup_time']:>8.3f} {1e3 * per:>9.2f} "
              f"{1e3 * cpu:>9.2f} {res.time:>8.2f} {res.objective:>14.6f}", flush=True)
    if len(rows) >= 2:
        ns = [r[0] for r in rows]
        print(f"fitted exponent (time per iteration ~ n^p): p = {_fit_exponent(ns, [r[1] for r in rows]):.3f}"
              f"   (target: p <= 1.1)")
        print(f"fitted exponent (CPU time per iteration ~ n^p): p = {_fit_exponent(ns, [r[3] for r in rows]):.3f}")
        print(f"fitted exponent (total time incl. setup ~ n^p): p = {_fit_exponent(ns, [r[2] for r in rows]):.3f}")
    _load_note()
    return 0


# ----------------------------------------------------------------------------- adult size
def cmd_adult(a) -> int:
    from ..data.datasets import two_gaussians
    from ..methods import solve

    X, y = two_gaussians(a.n, seed=a.seed)
    t = time.perf_counter()
    P, L = _pcp(X, y, k=a.k, seed=a.seed)
    tg = time.perf_counter() - t
    print(f"KL_ADMM adult-a6a size: two Gaussians n = {a.n}, k = {a.k}, nnz(L) = {L.nnz}, "
          f"|M| = {P.pairs.n_must}, |C| = {P.pairs.n_cannot}, r = {a.rank}, {a.iters} iterations "
          f"(graph built in {tg:.1f} s, not counted)")
    for dtype in a.dtype:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = solve(P, "admm", seed=a.seed, rank=a.rank, max_iter=a.iters, tol=1e-300,
                        track_objective=False, threads=a.threads, dtype=dtype, accelerate=None)
        per = (res.history["time"][-1] - res.extras["setup_time"]) / res.iterations
        cpu = res.extras["cpu_time_iterations"] / res.iterations
        print(f"{dtype}: threads {res.extras['threads']}, setup {res.extras['setup_time']:.2f} s, "
              f"{1e3 * per:.1f} ms/iteration (CPU {1e3 * cpu:.1f} ms/iteration), total {res.time:.2f} s "
              f"(CPU {res.extras['cpu_time_iterations']:.2f} s), objective {res.objective:.6f}", flush=True)
    print("target < 20 s; Hu & Kwok 2013 report 7661.7 s for adult-a6a")
    _load_note()
    return 0


# ----------------------------------------------------------------------------- million
class _PeakRSS:
    """Peak resident memory of this process during a ``with`` block (sampled every 50 ms from
    /proc/self/statm, and the kernel's high-water mark where it is finer)."""

    def __enter__(self):
        import threading

        self.peak = self._rss()
        self._stop = threading.Event()

        def sample():
            while not self._stop.wait(0.05):
                self.peak = max(self.peak, self._rss())

        self._t = threading.Thread(target=sample, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._rss())

    @staticmethod
    def _rss() -> int:
        import os

        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
            import resource

            return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def cmd_million(a) -> int:
    import os

    import numpy as np
    import scipy.sparse as sp

    from ..data.datasets import two_gaussians
    from ..data.graphs import knn_laplacian
    from ..data.pairs import sample_pairs
    from ..methods import solve
    from ..problems.pcp import PCP
    from ..solvers.base import attach_certificate
    from ..util import format_bytes
    from . import cache_directory

    rows = []
    t_all = time.perf_counter()

    def stage(name, fn):
        t, c = time.perf_counter(), time.process_time()
        with _PeakRSS() as mem:
            out = fn()
        dt, dc = time.perf_counter() - t, time.process_time() - c
        rows.append((name, dt, mem.peak))
        # CPU seconds (all threads) beside the wall time: on a shared machine the wall time
        # is the load's as much as the stage's
        print(f"{name:<12} {dt:8.1f} s   CPU {dc:8.1f} s   peak RSS {format_bytes(mem.peak)}",
              flush=True)
        return out

    opts: dict = {}
    if a.rank is not None:
        opts["rank"] = a.rank
    if a.no_polish:
        opts["polish"] = False
    told = ", ".join(f"{k}={v}" for k, v in opts.items()) or "its defaults"
    from ..data.graphs import _check_method

    search = _check_method("knn_laplacian", a.graph, a.n)
    print(f"two Gaussians, n = {a.n:,}, d = {a.dim}, k = {a.k} ({search} neighbour search), "
          f"seed {a.seed}; admm at {told}")
    cached = None
    if a.graph_cache is not None:
        stem = os.path.join(cache_directory(a.graph_cache, "--graph-cache"),
                            f"two_gaussians_n{a.n}_d{a.dim}_k{a.k}_seed{a.seed}_{search}")
        if os.path.exists(stem + "_L.npz") and os.path.exists(stem + "_y.npy"):
            cached = stem
            L, y = stage("graph", lambda: (sp.load_npz(stem + "_L.npz"), np.load(stem + "_y.npy")))
            print(f"             (read from {stem}_L.npz: the data and graph stages are not timed, "
                  "and the targets are not judged)", flush=True)
    if cached is None:
        X, y = stage("data", lambda: two_gaussians(a.n, d=a.dim, seed=a.seed))
        L = stage("graph", lambda: knn_laplacian(X, k=a.k, method=a.graph))
        del X
        if a.graph_cache is not None:  # written under temporary names, then renamed
            sp.save_npz(stem + "_L.tmp.npz", sp.csr_matrix(L))
            os.replace(stem + "_L.tmp.npz", stem + "_L.npz")
            np.save(stem + "_y.tmp.npy", y)
            os.replace(stem + "_y.tmp.npy", stem + "_y.npy")
    P = stage("pairs", lambda: PCP(L, sample_pairs(y, seed=a.seed)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the target's memory (8 GiB) is the limit, not solve's default guard (4 GiB)
        res = stage("admm", lambda: solve(P, "admm", seed=a.seed, max_memory=8 * 2**30, **opts))
    # the row's certificate as compare attaches it: admm's own when its rank growth stopped on
    # it (stop_gap) at the returned factor, else computed here
    own = res.certified_gap is not None
    if own and res.certificate_time is not None:
        # the certificate admm stopped on is part of its stage: its own wall time
        print(f"             (of which the certificate admm stopped on {res.certificate_time:.1f} s: "
              "its escape and shifted runs)", flush=True)
    stage("certificate", lambda: attach_certificate(P, res))
    total = time.perf_counter() - t_all
    peak = max(r[2] for r in rows)
    print(f"admm: {res.status.value} after {res.iterations} iterations, rank path "
          f"{res.rank_path}, objective {res.objective:.10g}")
    print(f"rank growth: {res.rank_growth}")
    gap = res.certified_gap if res.certified_gap is not None else math.inf
    lb = "none" if res.lower_bound is None else f"{res.lower_bound:.10g}"
    print(f"certificate{' (computed by admm at its stop)' if own else ''}: lower bound "
          f"{lb}; {res.certificate_note}")
    print(f"certified gap {gap:.3g} (target <= 1e-5); total {total:.1f} s "
          f"(target <= 300 s); peak RSS {format_bytes(peak)} (target < 8 GiB)")
    _load_note()
    ok = res.status.value == "converged" and gap <= 1e-5 and total <= 300 and \
        peak < 8 * 2**30 and cached is None
    return 0 if ok else 1


# ----------------------------------------------------------------------------- roofline
def copy_bandwidth(threads: int = 1, mib: int = 256, repeats: int = 5) -> float:
    """Bytes per second of a STREAM-like copy ``b[:] = a`` of ``mib`` MiB (counted as read plus
    write, ``2 * size``), best of ``repeats``; with ``threads`` > 1 each thread copies its
    share (numpy drops the GIL for the copy)."""
    from concurrent.futures import ThreadPoolExecutor

    m = mib * 2**20 // 8
    a = np.ones(m)
    b = np.zeros(m)
    cuts = np.linspace(0, m, threads + 1).astype(int)
    parts = [(b[lo:hi], a[lo:hi]) for lo, hi in zip(cuts[:-1], cuts[1:])]
    best = math.inf
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            t = time.perf_counter()
            list(pool.map(lambda ba: np.copyto(*ba), parts))
            best = min(best, time.perf_counter() - t)
    return 2.0 * 8 * m / best


def random_reads(S, r: int, repeats: int = 3) -> float:
    """CPU seconds of one pass that reads, at rank ``r`` (float64, rows on cache lines), every
    row of the other factor that a half-step reads at random (the columns of ``M``, the terms'
    partners) with the half-steps' vector row product and prefetch, and nothing else
    (:mod:`kernelforms.bench._random_reads`): what a half-step's random reads cost here at the
    least.  Best of ``repeats`` after a first (compiling) pass."""
    from .._pages import aligned
    from ..solvers._admm_kernels import AHEAD_M, AHEAD_T
    from ._random_reads import random_reads_pass

    other, out = aligned((S.n, r)), np.empty((2, S.n, r))
    other[...] = np.random.default_rng(0).standard_normal((S.n, r))
    args = (S.M.indptr, S.M.indices, S.M.data, S.tptr, S.tnbr, S.tsw, other, out, AHEAD_M,
            AHEAD_T)
    random_reads_pass(*args)
    best = math.inf
    for _ in range(repeats):
        c = time.process_time()
        random_reads_pass(*args)
        best = min(best, time.process_time() - c)
    return best


def iteration_bytes(S, r: int, *, track: bool = True, itemsize: int = 8) -> dict[str, int]:
    """The bytes one ADMM iteration must move (a memory-bound limit), by part, from the
    solver's structure ``S`` (:func:`kernelforms.solvers.admm.admm_structure`) at rank ``r``:

    * ``M``: the sparse matrix ``W_T - L``, once per half-step (values and column indices,
      row pointers);
    * ``gathers``: the other factor's rows once per half-step for the product with M (``n r``)
      and, for the pair systems, the row of every neighbour that is another point (``r``
      values), and every term's neighbour index and weight and every row's term pointer; a
      point's own diagonal term ``(i, i)`` needs no gather (its row is the point's own, read
      with the iterates);
    * ``state``: the iterates, each read or written once: V-step reads U and Lambda and
      writes V; U-step reads V, U and Lambda and writes U and Lambda; the residuals read the
      previous V (``9 n r``); the relaxed V is formed row by row, not stored.

    The objective (``track``) needs nothing more: ``K_ij`` of every term comes from the rows
    the U-step gathers and the point's own row, which it reads anyway.
    """
    n = S.n
    nnz = int(S.M.nnz)
    terms = int(S.tnbr.size)
    far = terms - S.own_terms
    idx = S.M.indices.dtype.itemsize
    nidx = S.tnbr.dtype.itemsize
    ptr = S.M.indptr.dtype.itemsize
    out = {"M": 2 * (nnz * (itemsize + idx) + (n + 1) * ptr),
           "gathers": 2 * (n * r * itemsize + far * r * itemsize + terms * (nidx + itemsize)
                           + (n + 1) * S.tptr.dtype.itemsize),
           "state": 9 * n * r * itemsize}
    out["total"] = sum(out.values())
    return out


def cmd_roofline(a) -> int:
    """Seconds per ADMM iteration against the bytes it must move and this machine's copy
    bandwidth (the memory-bound limit)."""
    import os

    import scipy.sparse as sp

    from ..data.datasets import two_gaussians
    from ..data.graphs import _check_method, knn_laplacian
    from ..data.pairs import sample_pairs
    from ..methods import solve
    from ..problems.pcp import PCP
    from ..solvers.admm import admm_structure
    from . import cache_directory

    search = _check_method("knn_laplacian", "auto", a.n)
    L = None
    if a.graph_cache is not None:
        stem = os.path.join(cache_directory(a.graph_cache, "--graph-cache"),
                            f"two_gaussians_n{a.n}_d{a.dim}_k{a.k}_seed{a.seed}_{search}")
        if os.path.exists(stem + "_L.npz") and os.path.exists(stem + "_y.npy"):
            L, y = sp.load_npz(stem + "_L.npz"), np.load(stem + "_y.npy")
    if L is None:
        X, y = two_gaussians(a.n, d=a.dim, seed=a.seed)
        L = knn_laplacian(X, k=a.k)
        del X
    P = PCP(L, sample_pairs(y, seed=a.seed))
    S = admm_structure(P)
    model = iteration_bytes(S, a.rank)
    terms = int(S.tnbr.size)
    print(f"two Gaussians n = {a.n:,}, d = {a.dim}, k = {a.k}: nnz(L) = {L.nnz:,}, nnz(M) = "
          f"{S.M.nnz:,}, pairs = {S.pi.size:,}, sum |T_i| = {terms:,}, rank {a.rank}")
    print("bytes one iteration must move: " + ", ".join(
        f"{k} {v / 1e6:,.0f} MB" for k, v in model.items()))
    bw = {t: copy_bandwidth(t) for t in (1, 2)}
    print("copy bandwidth (numpy, 256 MiB, read + write): " + ", ".join(
        f"{t} thread(s) {v / 1e9:.2f} GB/s" for t, v in bw.items()), flush=True)
    floor = random_reads(S, a.rank)
    del S
    print(f"random row reads alone (one thread, the half-steps' prefetch): {2 * floor:.3f} s per "
          f"iteration = {2 * floor * bw[1] / model['total']:.2f} x one thread's limit", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Algorithm 1's iteration with the objective tracked (the defaults' per-iteration
        # work before the acceleration starts), fixed rank, no early stop
        res = solve(P, "admm", seed=a.seed, rank=a.rank, max_iter=a.iters, tol=1e-300,
                    polish=False, accelerate=None, threads=a.threads)
    th = int(res.extras["threads"])
    per = (res.history["time"][-1] - res.extras["setup_time"]) / res.iterations
    cpu = res.extras["cpu_time_iterations"] / res.iterations
    bound = model["total"] / bw[min(th, 2)]
    one = model["total"] / bw[1]
    print(f"admm: {res.iterations} iterations at rank {a.rank}, {th} thread(s): {per:.3f} s per "
          f"iteration (CPU {cpu:.3f} s), setup {res.extras['setup_time']:.1f} s")
    # on a loaded machine the wall time is the load's: the CPU seconds against one thread's
    # limit say how far the work is from the bytes it must move
    print(f"memory-bound limit {bound:.3f} s per iteration ({model['total'] / 1e9:.2f} GB at "
          f"{bw[min(th, 2)] / 1e9:.2f} GB/s): ratio {per / bound:.2f} (wall); CPU seconds "
          f"against one thread's limit ({one:.3f} s): ratio {cpu / one:.2f}; target <= 3")
    _load_note()
    return 0


# ----------------------------------------------------------------------------- graph
def cmd_graph(a) -> int:
    """The kNN graph of two Gaussians alone: the neighbour search and the rest of
    knn_laplacian, timed, and the search's recall on sampled points against brute force."""
    import numpy as np

    from ..data.datasets import two_gaussians
    from ..data.graphs import (SIGMA_NEIGHBORS, _check_k, _check_method, _edges_from,
                               _neighbours, _sigma_from, _symmetric_csr, laplacian_from_weights)

    X, _ = two_gaussians(a.n, d=a.dim, seed=a.seed)
    n = X.shape[0]
    k = _check_k("bench graph", a.k, n)
    search = _check_method("bench graph", a.method, n)
    ks = min(SIGMA_NEIGHBORS, n - 1)
    kk = max(k, ks)
    print(f"two Gaussians, n = {n:,}, d = {a.dim}, seed {a.seed}: {kk} nearest neighbours "
          f"({search} search), graph k = {k}")
    t, c = time.perf_counter(), time.process_time()
    _, ind = _neighbours(X, kk, search)
    print(f"search       {time.perf_counter() - t:8.1f} s   CPU {time.process_time() - c:8.1f} s",
          flush=True)
    t, c = time.perf_counter(), time.process_time()
    sigma = _sigma_from(X, ind[:, :ks])
    edges, dist = _edges_from(X, ind[:, :k])
    S = _symmetric_csr(n, edges[:, 0], edges[:, 1], np.exp(-0.5 * (dist / sigma) ** 2))
    L = laplacian_from_weights(S, delta=0.0, normalized=True)
    print(f"the rest     {time.perf_counter() - t:8.1f} s   CPU {time.process_time() - c:8.1f} s"
          f"   (sigma {sigma:.6g}, {len(edges):,} edges, nnz(L) {L.nnz:,})", flush=True)
    # recall on sampled points: exact neighbours by brute force, blocks of 32 rows of n distances
    m = min(a.sample, n)
    rows = np.sort(np.random.default_rng(a.seed + 1).choice(n, m, replace=False))
    sq = np.einsum("ij,ij->i", X, X)
    hits = {k: 0, kk: 0}
    for b in range(0, m, 32):
        r = rows[b:b + 32]
        D = sq[r][:, None] - 2.0 * (X[r] @ X.T) + sq[None, :]
        D[np.arange(len(r)), r] = np.inf
        cand = np.argpartition(D, min(kk + 8, n - 1) - 1, axis=1)[:, :min(kk + 8, n - 1)]
        diff = X[cand] - X[r][:, None, :]  # exact distances of a margin of candidates
        d = np.einsum("ijk,ijk->ij", diff, diff)
        d[cand == r[:, None]] = np.inf
        true = np.take_along_axis(cand, np.argsort(d, axis=1, kind="stable")[:, :kk], 1)
        for j in hits:
            hits[j] += int((true[:, :j, None] == ind[r][:, None, :j]).any(axis=2).sum())
    print("recall (share of the exact nearest neighbours found, " + f"{m:,} points): "
          + ", ".join(f"{hits[j] / (m * j):.4f} of the {j} nearest" for j in sorted(hits)))
    _load_note()
    return 0


# ----------------------------------------------------------------------------- accuracy
def cmd_accuracy(a) -> int:
    from ..data.datasets import info, load
    from ..evaluate import kernel_kmeans, pairwise_accuracy
    from ..methods import solve

    opts = {} if a.max_iter is None else {"max_iter": a.max_iter}
    print(f"Clustering accuracy (Rand index, %) of kernel k-means on the KL_ADMM kernel, "
          f"mean +- std over {a.draws} constraint draws (0.6n must, 0.6n cannot; k = 5, 50 on adult); "
          f"features: {a.scale}")
    print(f"paper: {PAPER_SOURCE}")
    print(f"{'data set':<14} {'n':>6} {'r':>4} {'ours':>15} {'paper':>15} {'s/run':>7}  note")
    for name in a.datasets:
        X, y = load(name, seed=a.seed)
        if a.scale == "minmax":
            from ..data.datasets import scale

            X = scale(X)
        elif a.scale == "zscore":
            sd = X.std(axis=0)
            X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        k = 50 if name in ADULT else 5
        n_cls = int(info(name)["n_classes"])
        from ..data.graphs import knn_laplacian

        L = knn_laplacian(X, k=k)
        accs, times, r = [], [], 0
        for d in range(a.draws):
            P, _ = _pcp(X, y, k=k, seed=a.seed + d, L=L)
            o = dict(opts)
            if name in ADULT and a.max_iter is None:
                o["max_iter"] = 100  # Hu & Kwok 2013, footnote 2
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = solve(P, "admm", seed=a.seed + d, **o)
            r = res.factor.shape[1]
            labels = kernel_kmeans(res.factor, n_cls, seed=a.seed + d)
            accs.append(100.0 * pairwise_accuracy(y, labels))
            times.append(res.time)
        p = PAPER_TABLE2.get(name)
        paper = f"{p[0]:6.2f} +- {p[1]:4.2f}" if p else "-"
        note = "generated data, not the paper's file" if name in GENERATED else ""
        print(f"{name:<14} {len(y):>6} {r:>4} {np.mean(accs):6.2f} +- {np.std(accs):4.2f} {paper:>15} "
              f"{np.mean(times):>7.2f}  {note}", flush=True)
    return 0


# ----------------------------------------------------------------------------- agreement
def cmd_agreement(a) -> int:
    from ..compare import compare
    from ..data.datasets import load, two_gaussians
    from ..methods import FORMULATIONS

    methods = [a.sdp, "admm"] + (["sqlp"] if a.sqlp and "sqlp" in FORMULATIONS else [])
    for name in a.datasets:
        X, y = two_gaussians(300, seed=a.seed) if name == "two_gaussians_300" else load(name)
        P, _ = _pcp(X, y, k=5, seed=a.seed)
        opts = {a.sdp: {"max_memory": 2e10}} if a.sdp.startswith("sdp") else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = compare(P, methods, rtol=a.rtol, seed=a.seed, options=opts, certify=False)
        print(f"== {name} (n = {P.n}, m = {P.n_terms}, r = {P.default_rank()})")
        for row in rep.rows:
            if row.status.value == "skipped":
                print(f"   {row.method:<12} skipped: {row.message}")
                continue
            gap = rep.gaps.get(row.method, math.nan)
            print(f"   {row.method:<12} {row.status.value:<10} objective {row.objective:.10f}  "
                  f"gap {gap:+.2e}  time {row.time:7.2f} s  iterations {row.iterations}")
        print(f"   agree (rtol {a.rtol:g}): {'yes' if rep.agree() else 'NO: ' + '; '.join(rep.disagreements())}",
              flush=True)
    return 0


# ----------------------------------------------------------------------------- sweep
#: the sweep's rows: (data set, number of points or None for the whole file, problem)
SWEEP = (
    ("pendigits", 3000, "P1"), ("pendigits", 3000, "NPKL-square"),
    ("pendigits", 5000, "P1"), ("pendigits", 5000, "NPKL-square"),
    ("pendigits", 10000, "P1"),
    ("digits", None, "P1"), ("digits", None, "NPKL-square"),
    ("a1a", None, "P1"), ("a2a", None, "P1"), ("a3a", None, "P1"), ("a4a", None, "P1"),
    ("a4a", None, "NPKL-square"),
    ("usps", 5000, "P1"), ("usps", 5000, "NPKL-square"),
)


def _sweep_problem(name: str, n, kind: str, seed: int, data_dir):
    from ..data.datasets import load
    from ..data.pairs import sample_pairs
    from ..problems import NPKL, PCP

    kw = {"data_dir": data_dir} if name == "usps" else {}
    X, y = load(name, n_points=n, seed=seed, scale=True, **kw)
    k = 50 if name in ADULT else 5
    pairs = sample_pairs(y, seed=seed)
    if kind == "P1":
        return PCP.from_data(X, pairs, k=k)
    return NPKL.from_data(X, pairs, k=k, loss="square")


def cmd_sweep(a) -> int:
    from ..certificate import certify
    from ..errors import DataError
    from ..methods import get_method, solve

    CERTIFY_RTOL = get_method("admm").certify_rtol  # what admm's converged promises
    rows = [r for r in SWEEP if (not a.datasets or r[0] in a.datasets)
            and (not a.problems or r[2] in a.problems)]
    print(f"admm at its defaults, data subsets and pairs drawn with seed {a.data_seed} "
          f"(features scaled to [-1, 1]; k = 50 on a1a-a4a, else 5; 0.6 n must- and "
          f"cannot-links); converged must be certified within {CERTIFY_RTOL:g}")
    _load_note()
    print(f"{'data':<10} {'n':>6} {'problem':<12} {'status':<19} {'objective':>16} "
          f"{'certified':>9} {'iters':>6} {'time s':>8}", flush=True)
    bad = 0
    for name, n, kind in rows:
        try:
            P = _sweep_problem(name, n, kind, a.data_seed, a.data_dir)
        except DataError as exc:
            print(f"{name:<10} {n or '':>6} {kind:<12} skipped: {str(exc).split('. ')[0]}", flush=True)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = solve(P, "admm", seed=a.seed)
        gap = res.certified_gap
        if gap is None and res.ok and res.factor is not None:
            gap = certify(P, res.kernel).relative_gap
        st = res.status.value
        flag = ""
        if st == "converged" and not (gap is not None and gap <= CERTIFY_RTOL):
            bad += 1
            flag = "  NOT CERTIFIED"
        g = "-" if gap is None else f"{gap:.2g}"
        print(f"{name:<10} {P.n:>6} {kind:<12} {st:<19} {res.objective:>16.10g} {g:>9} "
              f"{res.iterations:>6} {res.time:>8.1f}{flag}", flush=True)
    _load_note()
    if bad:
        print(f"{bad} converged row(s) not certified within {CERTIFY_RTOL:g}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m kernelforms.bench.admm {scaling,adult,accuracy,agreement,million,sweep}``."""
    ap = BenchParser(prog="kernelforms bench admm", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scaling", help="time per iteration versus n (Hu & Kwok 2013, Section 4.2)")
    s.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    s.add_argument("--pairs", type=int, default=1000)
    s.add_argument("--rank", type=int, default=None,
                   help="default: the rank rule on the number of pairs (r = 44 for 1,000)")
    s.add_argument("--iters", type=int, default=100)
    s.add_argument("--k", type=int, default=5)
    s.add_argument("--threads", type=int, default=0, help="0: automatic")
    s = sub.add_parser("adult", help="adult-a6a-size run (n = 11,220, k = 50, r = 275)")
    s.add_argument("--n", type=int, default=11220)
    s.add_argument("--k", type=int, default=50)
    s.add_argument("--rank", type=int, default=275)
    s.add_argument("--iters", type=int, default=100)
    s.add_argument("--threads", type=int, default=0, help="0: automatic")
    s.add_argument("--dtype", nargs="+", choices=["float64", "float32"], default=["float64", "float32"])
    s = sub.add_parser("accuracy", help="Hu & Kwok 2013, Table 2: Rand index over constraint draws")
    s.add_argument("--datasets", nargs="+",
                   default=["iris", "wine", "glass", "heart", "sonar", "soybean", "chessboard",
                            "double_spiral", "a1a"])
    s.add_argument("--draws", type=int, default=20)
    s.add_argument("--scale", choices=["none", "minmax", "zscore"], default="none",
                   help="feature scaling before the kNN graph (Hu & Kwok 2013 do not say; default none)")
    s.add_argument("--max-iter", type=int, default=None,
                   help="default: the solver's (500), 100 on the adult sets (Hu & Kwok 2013, footnote 2)")
    s = sub.add_parser("agreement", help="admm versus the full SDP (SCS, eps 1e-8)")
    s.add_argument("--datasets", nargs="+", default=["iris", "wine", "two_gaussians_300"])
    s.add_argument("--sdp", default="sdp:scs")
    s.add_argument("--sqlp", action="store_true",
                   help="add the sqlp formulation (if registered) for the three-way comparison")
    s.add_argument("--rtol", type=float, default=1e-4)
    s = sub.add_parser("million", help="n = 1e6: graph, pairs, admm and certificate, time and peak memory")
    s.add_argument("--n", type=int, default=1_000_000)
    s.add_argument("--dim", type=int, default=10,
                   help="dimension of the Gaussians (default 10, as in Hu & Kwok 2013, Section 4.2; "
                        "the exact kNN graph of a million 10-dimensional points takes about 6 "
                        "minutes on 2 cores, the approximate one about 1)")
    s.add_argument("--graph", choices=["auto", "exact", "approx"], default="auto",
                   help="knn_laplacian's neighbour search (default auto: approximate above "
                        "200,000 points)")
    s.add_argument("--k", type=int, default=5)
    s.add_argument("--rank", type=int, default=None,
                   help="admm's rank option (default: its own, start at 8 and grow from the "
                        "certificate)")
    s.add_argument("--no-polish", action="store_true",
                   help="admm with polish=False (Algorithm 1 and the rank growth, no Ritz steps)")
    s.add_argument("--graph-cache", default=None, metavar="DIR",
                   help="keep the graph and labels in DIR and read them from there on the next "
                        "run (skips the ~6-minute graph; the targets are then not judged)")
    s = sub.add_parser("roofline", help="seconds per iteration against the bytes it must move "
                                        "and the copy bandwidth")
    s.add_argument("--n", type=int, default=100_000)
    s.add_argument("--dim", type=int, default=10)
    s.add_argument("--k", type=int, default=5)
    s.add_argument("--rank", type=int, default=8)
    s.add_argument("--iters", type=int, default=10)
    s.add_argument("--threads", type=int, default=0, help="0: automatic")
    s.add_argument("--graph-cache", default=None, metavar="DIR",
                   help="read the graph and labels from DIR when there (as 'million' writes them)")
    s = sub.add_parser("graph", help="the kNN graph of two Gaussians alone: time of the search and "
                                     "the rest, recall against brute force on sampled points")
    s.add_argument("--n", type=int, default=100_000)
    s.add_argument("--dim", type=int, default=10)
    s.add_argument("--k", type=int, default=5)
    s.add_argument("--method", choices=["auto", "exact", "approx"], default="auto")
    s.add_argument("--sample", type=int, default=2000,
                   help="points whose neighbours are checked against brute force (default 2,000)")
    s.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("sweep", help="admm at its defaults on real data of 1,600-10,000 points, "
                                     "P1 and NPKL-square")
    s.add_argument("--datasets", nargs="+", default=None,
                   choices=sorted({r[0] for r in SWEEP}), help="only these data sets (default all)")
    s.add_argument("--problems", nargs="+", default=None, choices=["P1", "NPKL-square"],
                   help="only these problems (default both)")
    s.add_argument("--data-seed", type=int, default=419,
                   help="seed of the subsets and pairs (default 419)")
    s.add_argument("--data-dir", default=None,
                   help="directory holding usps.csv.gz (else KERNELFORMS_DATA_DIR; usps rows are "
                        "skipped when it is not found)")
    a = ap.parse_args(argv)
    return {"scaling": cmd_scaling, "adult": cmd_adult, "accuracy": cmd_accuracy,
            "agreement": cmd_agreement, "million": cmd_million, "graph": cmd_graph,
            "sweep": cmd_sweep, "roofline": cmd_roofline}[a.cmd](a)


if __name__ == "__main__":
    raise SystemExit(main())
