"""SQLP versus Schur-complement SDP: the scaling study of Wu et al. 2009, Tables 1-2.

For each basis size ``m`` the same QSDP (RegPCP on digits, or RegMVU on a Swiss roll)
is compiled into the SQLP (Wu et al. 2009, eq. 21-25) and into the Schur-complement SDP (Wu et al. 2009,
eq. 15-16) and solved by the same conic solver.  Printed per row, like the paper:
time, iterations, time per iteration and rank(A); then the fitted growth exponent
of each column (least squares of log time on log m over the rows that finished).

Setups (Wu et al. 2009, Section 4):

- ``regpcp`` (Table 2, USPS there; digits here): the first ``n/10`` images of each digit
  of scikit-learn's digits, 20-NN graph with Gaussian weights and sigma = the mean
  distance to the 20th neighbour, 20 must-links per class and 20 cannot-links per pair
  of classes (1,100 pairs), ``Q`` = the m smallest eigenvectors of the normalised Laplacian.
- ``regmvu`` (Table 1): a Swiss roll of ``n`` = 2000 points (the first seed whose 4-NN
  graph is connected), 4-NN graph, nu = 100 (``--nu``).

A program that ends at the per-run time limit is shown as ``>limit`` and larger ``m``
are not tried for that formulation (the paper's dashes); a program refused by the size
guard shows ``refused``.

Run: ``python -m kernelforms.bench.formulations --problem regpcp`` (or
``kernelforms bench formulations ...``).
"""

from __future__ import annotations

import argparse

from . import BenchParser
import math
import time
import warnings
from typing import Any

import numpy as np

from ..util import fit_exponent

DEFAULT_M = "10,15,20,25,30,40,50,60,80,100"
LABELS = {"sqlp": "SQLP", "scsdp": "SCSDP", "scsdp_factor": "SCSDP(B)"}


def build_regpcp(n: int, m_max: int, seed: int):
    """Digits, n points (n/10 per class), Wu et al.'s (2009) graph and constraints; basis for m_max."""
    from scipy.spatial import cKDTree

    from ..data.datasets import load
    from ..data.graphs import knn_laplacian, smallest_eigenvectors
    from ..data.pairs import per_class_pairs

    X, y = load("digits")
    per = n // 10
    idx = np.concatenate([np.flatnonzero(y == c)[:per] for c in range(10)])
    X, y = X[idx], y[idx]
    dist, _ = cKDTree(X).query(X, k=21)
    sigma = float(dist[:, 20].mean())  # Wu et al. 2009: mean distance to the 20th neighbour
    L = knn_laplacian(X, k=20, sigma=sigma)
    pairs = per_class_pairs(y, 20, 20, seed=seed)
    _, Q = smallest_eigenvectors(L, m_max)
    return {"L": L, "pairs": pairs, "Q": Q, "label": f"RegPCP on digits (n = {len(y)}, 20-NN, "
                                                     f"{len(pairs)} pairs)"}


def build_regmvu(n: int, m_max: int, seed: int, nu: float = 100.0):
    import scipy.sparse as sp

    from ..data.datasets import swiss_roll
    from ..data.graphs import knn_edges, smallest_eigenvectors, unnormalized_laplacian

    from scipy.sparse.csgraph import connected_components

    # Wu et al. 2009 checked that its 4-NN graph is connected (else MVU is unbounded): take the
    # first seed from `seed` on whose sample gives a connected graph
    for s in range(seed, seed + 50):
        X, _ = swiss_roll(n=n, seed=s)
        E, d = knn_edges(X, k=4)
        A = sp.coo_matrix((np.ones(len(E)), (E[:, 0], E[:, 1])), shape=(n, n)).tocsr()
        if connected_components(A, directed=False)[0] == 1:
            break
    else:  # pragma: no cover - 50 disconnected samples in a row
        raise RuntimeError("no connected 4-NN graph on 50 Swiss-roll samples")
    _, Q = smallest_eigenvectors(unnormalized_laplacian(A + A.T), m_max, skip=1)
    return {"E": E, "d": d, "n": n, "Q": Q, "nu": nu,
            "label": f"RegMVU on a Swiss roll (n = {n}, seed {s}, 4-NN, {len(E)} edges, nu = {nu:g})"}


def make_problem(kind: str, data: dict, m: int):
    from ..problems import RegMVU, RegPCP

    if kind == "regpcp":
        return RegPCP(data["L"], data["pairs"], m_basis=m, basis=data["Q"][:, :m])
    return RegMVU(data["E"], data["d"], data["n"], m_basis=m, nu=data["nu"], basis=data["Q"][:, :m])


def run_one(problem: Any, method: str, time_limit: float, max_memory: float,
            options: dict | None = None) -> dict:
    from .. import solve
    from ..errors import NotApplicable
    from ..result import Status

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = solve(problem, method, time_limit=time_limit, max_memory=max_memory,
                        **(options or {}))
    except NotApplicable as exc:
        return {"state": "refused", "message": str(exc)}
    t = res.extras.get("solver_time") or res.solve_time
    it = res.iterations or 0
    state = "ok" if res.status in (Status.OPTIMAL, Status.OPTIMAL_INACCURATE) else res.status.value
    if res.status in (Status.TIMEOUT, Status.MAX_ITER) and res.solve_time >= 0.9 * time_limit:
        state = "timeout"
    return {"state": state, "time": t, "iter": it, "per_iter": t / it if it else math.nan,
            "build": res.time - t, "objective": res.objective,
            "rank_A": (res.size_detail or {}).get("rank_A"), "status": res.status.value}


def _cell(r: dict | None, time_limit: float) -> list[str]:
    if r is None:
        return ["-", "-", "-"]
    if r["state"] == "refused":
        return ["refused", "-", "-"]
    if r["state"] == "timeout":
        return [f">{time_limit:g}", "-", "-"]
    if r["state"] != "ok":
        return [r["status"], "-", "-"]
    return [f"{r['time']:.3g}", str(r["iter"]), f"{r['per_iter']:.3g}"]


def main(argv: list[str] | None = None) -> int:
    ap = BenchParser(prog="kernelforms bench formulations", description=__doc__.split("\n")[0])
    ap.add_argument("--problem", choices=("regpcp", "regmvu"), default="regpcp")
    ap.add_argument("--n", type=int, default=None, help="points (default 1000 regpcp, 2000 regmvu)")
    ap.add_argument("--m", default=DEFAULT_M, help=f"comma-separated basis sizes (default {DEFAULT_M})")
    ap.add_argument("--methods", default="scsdp,sqlp", help="comma-separated formulations (default scsdp,sqlp)")
    ap.add_argument("--solver", default="clarabel", help="conic solver (default clarabel)")
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds per run (default 600)")
    ap.add_argument("--max-memory", type=float, default=16.0, help="size guard in GiB (default 16)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="solver option passed through (repeatable), e.g. "
                         "chordal_decomposition_enable=False or direct_solve_method='faer'")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads for the factorisations (default 1: on a shared, loaded "
                         "machine OpenBLAS threads slow eigh down tenfold); 0 = no limit")
    ap.add_argument("--nu", type=float, default=100.0,
                    help="RegMVU's nu (Wu et al. 2009 leave it free; default 100: with nu = 1 the optimum "
                         "has tr(Y) ~ 3e8 and Clarabel fails on the SQLP)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import ast
    import os

    options = {}
    for item in args.option:
        key, _, val = item.partition("=")
        try:
            options[key.strip()] = ast.literal_eval(val.strip())
        except (ValueError, SyntaxError):
            options[key.strip()] = val.strip()
    if args.blas_threads > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.blas_threads)

    ms = sorted({int(v) for v in args.m.split(",") if v.strip()})
    methods = [v.strip() for v in args.methods.split(",") if v.strip()]
    n = args.n or (1000 if args.problem == "regpcp" else 2000)
    t0 = time.perf_counter()
    if args.problem == "regpcp":
        data = build_regpcp(n, max(ms), args.seed)
    else:
        data = build_regmvu(n, max(ms), args.seed, args.nu)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# {data['label']}; solver {args.solver} {options or ''}; time limit "
          f"{args.time_limit:g} s per run; data + basis {time.perf_counter() - t0:.1f} s; "
          f"{os.cpu_count()} CPUs, load average {load:.1f}")
    rows: dict[int, dict[str, dict]] = {m: {} for m in ms}
    stopped: set[str] = set()
    head = ["m"]
    for meth in methods:
        lab = LABELS.get(meth, meth)
        head += [f"{lab} time", "#iter", "time/iter"]
    head += ["rank(A)", "build s"]
    print(" | ".join(head))
    for m in ms:
        problem = make_problem(args.problem, data, m)
        line = [str(m)]
        rank_A, build_s = None, []
        for meth in methods:
            r = None
            if meth not in stopped:
                r = run_one(problem, f"{meth}:{args.solver}", args.time_limit,
                            args.max_memory * 2**30, options)
                if r["state"] in ("timeout", "refused"):
                    stopped.add(meth)
                if r.get("rank_A") is not None:
                    rank_A = r["rank_A"]
                if r["state"] == "ok":
                    build_s.append(f"{r['build']:.1f}")
            rows[m][meth] = r
            line += _cell(r, args.time_limit)
        line += [str(rank_A) if rank_A is not None else "-", "/".join(build_s) or "-"]
        print(" | ".join(line), flush=True)
    # agreement of the objectives where both finished, and growth exponents
    print()
    for meth in methods:
        done = [(m, rows[m][meth]) for m in ms if rows[m].get(meth) and rows[m][meth]["state"] == "ok"]
        if not done:
            continue
        mm = [m for m, _ in done]
        print(f"{LABELS.get(meth, meth)}: growth exponent of time {fit_exponent(mm, [r['time'] for _, r in done]):.2f}, "
              f"of time/iter {fit_exponent(mm, [r['per_iter'] for _, r in done]):.2f} "
              f"(m = {mm[0]}..{mm[-1]}, {len(mm)} runs)")
    gaps = []
    for m in ms:
        vals = [rows[m][k]["objective"] for k in methods if rows[m].get(k) and rows[m][k]["state"] == "ok"]
        if len(vals) > 1:
            gaps.append((max(vals) - min(vals)) / max(abs(min(vals)), 1e-12))
    if gaps:
        print(f"largest relative objective difference between formulations: {max(gaps):.2g}")
    refused = [rows[m][k]["message"] for m in ms for k in methods
               if rows[m].get(k) and rows[m][k]["state"] == "refused"]
    if refused:
        print("refused: " + refused[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
