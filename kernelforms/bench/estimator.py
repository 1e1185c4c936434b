"""Benchmark: the learned kernel on held-out points (KernelLearner) beside raw features.

For each data set: digits (scikit-learn's 1,797 8x8 images, a 70/30 split stratified by
class, seeded) and pendigits (its own split as shipped: the first 7,494 rows are UCI's
training file, the other 3,498 its test file), pairs 0.6 n must-links and 0.6 n
cannot-links drawn from the training labels, new points by KernelLearner's default
extension (``--extension`` to choose another):

* 1-NN accuracy on the test points (the embedding for the learned kernel; the raw
  features, an RBF SVC on the raw features and metric-learn's ITML);
* ARI of k-means (k = the number of classes) on the training points' embedding;
* fit time (wall, and the process's CPU time).

    kernelforms bench estimator                       # digits and pendigits, the defaults and gamma 1
    kernelforms bench estimator --itml-python itml-venv/bin/python
    kernelforms bench estimator --datasets digits --gammas auto,100 --no-itml
    kernelforms bench estimator --n-train 2000        # a stratified subset of the training points
    kernelforms bench estimator --validate --datasets digits,pendigits,wine,a1a \
        --gammas auto,30,1000 --pair-fraction 0.15 --no-itml
    kernelforms bench estimator --grid --datasets digits --gammas 1,10,100,1000

metric-learn is not a dependency: the ITML row (``ITML_Supervised``, its defaults, seeded)
runs in this Python when metric-learn is importable, or in the Python given by
``--itml-python PATH`` (e.g. a venv with ``scikit-learn==1.5.2 metric-learn==0.7.0``:
metric-learn 0.7 needs an older scikit-learn), as a subprocess fed the split through a
temporary ``.npz``; without either the row is skipped with a message.

``--validate`` scores on a 70/30 split of the training points (stratified, seeded), never
on the test points: the figures that choose a default.  Data sets other than digits and
pendigits (any ``kernelforms.datasets`` name, e.g. wine, a1a) ship no test split and get
digits' 70/30 split.  ``--pair-fraction F`` draws ``round(F n)`` must-links and as many
cannot-links (default 0.6).  ``--grid`` times ``GridSearchCV`` over ``--gammas`` (3 folds of
the training points, a 1-NN scorer, the refit included) beside one fit at ``gamma="auto"``
on the same points, with the L-BFGS iterations of every fit and how each started.

Fit times depend on the machine's load: the CPU column is less sensitive to it.
"""

from __future__ import annotations

import argparse
import time


def _split(name: str, seed: int):
    import numpy as np

    import kernelforms as kf

    X, y = kf.datasets.load(name)
    if name == "pendigits":
        return X[:7494], y[:7494], X[7494:], y[7494:]
    X, y = np.asarray(X), np.asarray(y)
    from sklearn.model_selection import train_test_split

    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    return np.asarray(Xa), np.asarray(ya), np.asarray(Xb), np.asarray(yb)


def _subset(X, y, n: int | None, seed: int):
    if n is None or n >= len(y):
        return X, y
    from sklearn.model_selection import train_test_split

    Xa, _, ya, _ = train_test_split(X, y, train_size=n, stratify=y, random_state=seed)
    return Xa, ya


def _timed(fn):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def _validation(Xtr, ytr, seed: int):
    """A 70/30 split of the training points, stratified and seeded (the test points unused)."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    Xa, Xb, ya, yb = train_test_split(Xtr, ytr, test_size=0.3, stratify=ytr, random_state=seed)
    return np.asarray(Xa), np.asarray(ya), np.asarray(Xb), np.asarray(yb)

#: run in the Python given by ``--itml-python`` (numpy and metric-learn, no kernelforms):
#: ITML_Supervised on the training points, both embeddings and the fit's wall / CPU time
_ITML_SCRIPT = """
import sys, time
import numpy as np
from metric_learn import ITML_Supervised
d = np.load(sys.argv[1])
t, c = time.perf_counter(), time.process_time()
m = ITML_Supervised(random_state=int(d["seed"])).fit(d["Xtr"], d["ytr"])
t, c = time.perf_counter() - t, time.process_time() - c
np.savez(sys.argv[2], E=m.transform(d["Xtr"]), Et=m.transform(d["Xte"]), t=t, c=c)
"""


def _itml(Xtr, ytr, Xte, seed: int, python: str | None):
    """metric-learn's ITML (``ITML_Supervised``, its defaults, seeded): (embedding of the
    training points, of the test points, wall s, CPU s); in ``python`` (a path to an
    interpreter with metric-learn, run as a subprocess) or, when None, in this one.  None,
    with a message, when metric-learn is not available."""
    import numpy as np

    if python is None:
        try:
            from metric_learn import ITML_Supervised
        except ImportError:
            print("(metric-learn is not installed here: no ITML row; pass --itml-python PATH to "
                  "a Python that has it, e.g. a venv with scikit-learn==1.5.2 metric-learn==0.7.0)",
                  flush=True)
            return None
        m, t, cpu = _timed(lambda: ITML_Supervised(random_state=seed).fit(Xtr, ytr))
        return m.transform(Xtr), m.transform(Xte), t, cpu
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(src, Xtr=np.asarray(Xtr, dtype=float), ytr=np.asarray(ytr),
                 Xte=np.asarray(Xte, dtype=float), seed=seed)
        try:
            run = subprocess.run([python, "-c", _ITML_SCRIPT, src, dst], capture_output=True,
                                 text=True)
        except OSError as e:
            print(f"(--itml-python {python!r} cannot be run ({e}): no ITML row)", file=sys.stderr,
                  flush=True)
            return None
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"(--itml-python {python!r} failed: {last}; no ITML row. It needs numpy and "
                  "metric-learn)", file=sys.stderr, flush=True)
            return None
        with np.load(dst) as r:
            return r["E"], r["Et"], float(r["t"]), float(r["c"])


def rows(name: str, gammas: list, *, seed: int = 0, n_train: int | None = None,
         itml: bool = True, validate: bool = False, pair_fraction: float = 0.6,
         itml_python: str | None = None, extension: str | None = None) -> list[dict]:
    """The table's rows for one data set (see the module docstring); ``gammas`` holds
    floats or "auto"; ``itml_python`` a Python with metric-learn for the ITML row (None:
    this Python's, when installed)."""
    import numpy as np
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC

    from kernelforms import KernelLearner

    Xtr, ytr, Xte, yte = _split(name, seed)
    Xtr, ytr = _subset(Xtr, ytr, n_train, seed)
    if validate:
        Xtr, ytr, Xte, yte = _validation(Xtr, ytr, seed)
    c = int(np.unique(ytr).size)
    k = int(round(pair_fraction * len(ytr)))

    def ari(E):
        return adjusted_rand_score(ytr, KMeans(c, n_init=10, random_state=seed).fit_predict(E))

    out = []
    (knn, t, cpu) = _timed(lambda: KNeighborsClassifier(1).fit(Xtr, ytr))
    svc, ts, cs = _timed(lambda: SVC(kernel="rbf").fit(Xtr, ytr))
    out.append({"data": name, "method": "raw features 1-NN / RBF SVC",
                "acc": f"{knn.score(Xte, yte):.3f} / {svc.score(Xte, yte):.3f}",
                "ari": f"{ari(Xtr):.2f}", "fit": f"{t + ts:.1f}", "cpu": f"{cpu + cs:.1f}"})
    if itml:
        got = _itml(Xtr, ytr, Xte, seed, itml_python)
        if got is not None:
            E, Et, t, cpu = got
            acc = KNeighborsClassifier(1).fit(E, ytr).score(Et, yte)
            out.append({"data": name, "method": "ITML (metric-learn)", "acc": f"{acc:.3f}",
                        "ari": f"{ari(E):.2f}", "fit": f"{t:.1f}", "cpu": f"{cpu:.1f}"})
    from kernelforms import estimator as est

    for g in gammas:
        est._PATH_CACHE.clear()  # every row a fit from the labels, as a single fit is
        ext = {} if extension is None else {"extension": extension}
        kl, t, cpu = _timed(lambda: KernelLearner(gamma=g, n_must=k, n_cannot=k, random_state=seed,
                                                  **ext).fit(Xtr, ytr))
        E = kl.embedding_
        acc = KNeighborsClassifier(1).fit(E, ytr).score(kl.transform(Xte), yte)
        r = kl.result_
        what = f"defaults (gamma auto = {kl.gamma_value():g})" if g == "auto" else f"gamma = {g:g}"
        out.append({"data": name, "method": f"KernelLearner {what} ({kl.method_}, "
                    f"{r.status.value}, {r.iterations} it.)", "acc": f"{acc:.3f}",
                    "ari": f"{ari(E):.2f}", "fit": f"{t:.1f}", "cpu": f"{cpu:.1f}"})
    return out


class _Counted:
    """The fits of a grid: (training points, gamma, start, iterations, wall s)."""

    log: list = []


def _counting_learner():
    from kernelforms import KernelLearner

    class CountingLearner(KernelLearner):
        def fit(self, X, y=None, pairs=None):
            t = time.perf_counter()
            super().fit(X, y, pairs=pairs)
            _Counted.log.append((self.embedding_.shape[0], self.gamma_value(), self.start_,
                                 self.result_.iterations, time.perf_counter() - t))
            return self

    return CountingLearner


def grid(name: str, gammas: list, *, seed: int = 0, n_train: int | None = None) -> list[str]:
    """GridSearchCV over ``gammas`` (3 stratified folds of the training points, 1-NN scorer,
    refit on all of them) beside one fit at gamma="auto": lines of a report."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    from kernelforms import estimator as est

    Xtr, ytr, _, _ = _split(name, seed)
    Xtr, ytr = _subset(Xtr, ytr, n_train, seed)
    learner = _counting_learner()
    est._PATH_CACHE.clear()
    _Counted.log = []
    _, t1, c1 = _timed(lambda: learner(random_state=seed).fit(Xtr, ytr))
    one = _Counted.log[-1]
    est._PATH_CACHE.clear()
    _Counted.log = []
    pipe = make_pipeline(learner(random_state=seed), KNeighborsClassifier(1))
    cv = StratifiedKFold(3, shuffle=True, random_state=seed)
    gs, tg, cg = _timed(lambda: GridSearchCV(pipe, {"countinglearner__gamma": gammas},
                                             cv=cv).fit(Xtr, ytr))
    est._PATH_CACHE.clear()
    out = [f"{name}: {len(ytr)} training points; one fit at gamma auto = {one[1]:g}: "
           f"{one[3]} iterations, {t1:.1f} s (CPU {c1:.1f} s)",
           f"GridSearchCV over gamma {gammas}, 3 folds + refit: {len(_Counted.log)} fits, "
           f"{sum(r[3] for r in _Counted.log)} iterations, {tg:.1f} s (CPU {cg:.1f} s); "
           f"ratio to the one fit {tg / t1:.1f} (CPU {cg / c1:.1f}, iterations "
           f"{sum(r[3] for r in _Counted.log) / one[3]:.1f})",
           "best: " + str(gs.best_params_) + ", mean 1-NN accuracy per gamma: "
           + ", ".join(f"{s:.3f}" for s in gs.cv_results_["mean_test_score"])]
    out += [f"  fit on {r[0]} points, gamma {r[1]:g}: {r[3]} iterations, {r[4]:.2f} s, "
            f"start: {r[2]}" for r in _Counted.log]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kernelforms bench estimator", description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="digits,pendigits",
                    help="comma-separated: digits, pendigits (default both)")
    ap.add_argument("--gammas", default="auto,1",
                    help="comma-separated gamma values or 'auto' (the default: 100 for pcp; "
                    "default auto,1)")
    ap.add_argument("--seed", type=int, default=0, help="split, pairs and solver seed (default 0)")
    ap.add_argument("--n-train", type=int, default=None,
                    help="a stratified subset of this many training points (default all)")
    ap.add_argument("--no-itml", action="store_true", help="skip metric-learn's ITML")
    ap.add_argument("--itml-python", default=None, metavar="PATH",
                    help="a Python interpreter with metric-learn for the ITML row (metric-learn "
                    "is not a dependency; default: this Python's, skipped with a message when "
                    "missing)")
    ap.add_argument("--extension", default=None, choices=["harmonic", "mean", "joint"],
                    help="KernelLearner's extension for the test points (default: its default)")
    ap.add_argument("--validate", action="store_true",
                    help="score on a 70/30 split of the training points, not on the test points")
    ap.add_argument("--pair-fraction", type=float, default=0.6,
                    help="must-links and cannot-links, each round(F n) (default 0.6)")
    ap.add_argument("--grid", action="store_true",
                    help="time GridSearchCV over --gammas (3 folds, refit) against one fit")
    args = ap.parse_args(argv)
    import kernelforms as kf

    names = [s.strip() for s in args.datasets.split(",") if s.strip()]
    bad = [s for s in names if s not in kf.datasets.names()]
    if bad:
        ap.error(f"--datasets: unknown {bad}; use digits, pendigits or a name of "
                 "kernelforms.datasets.names()")
    if not 0 < args.pair_fraction <= 10:
        ap.error(f"--pair-fraction must be a number in (0, 10]; got {args.pair_fraction}")
    gammas: list = []
    for g in args.gammas.split(","):
        g = g.strip()
        try:
            gammas.append("auto" if g == "auto" else float(g))
        except ValueError:
            ap.error(f"--gammas must be comma-separated numbers > 0 or 'auto'; got {args.gammas!r}")
    if not gammas or any(g != "auto" and not g > 0 for g in gammas):
        ap.error("--gammas must be numbers > 0 or 'auto'")
    from kernelforms.util import render_table

    if args.grid:
        for name in names:
            print("\n".join(grid(name, gammas, seed=args.seed, n_train=args.n_train)), flush=True)
        return 0
    table = []
    for name in names:
        table += rows(name, gammas, seed=args.seed, n_train=args.n_train, itml=not args.no_itml,
                      validate=args.validate, pair_fraction=args.pair_fraction,
                      itml_python=args.itml_python, extension=args.extension)
        print(f"{name}: done", flush=True)
    cols = ["data", "method", "acc", "ari", "fit", "cpu"]
    where = "validation" if args.validate else "test"
    head = ["data set", "method", f"1-NN accuracy ({where})", "ARI (k-means, train)", "fit s",
            "CPU s"]
    print("\n".join(render_table(head, [[r[c] for c in cols] for r in table], rule=True)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
