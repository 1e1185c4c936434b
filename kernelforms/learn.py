"""Learn a kernel and write its factor: the logic of ``kernelforms learn``.

``kernelforms learn PROBLEM --dataset NAME --out PATH`` (or ``--data FILE`` for a user's
own points, optionally with ``--pairs FILE``) builds the instance exactly as ``kernelforms
compare`` does, solves it with the automatic method (:func:`auto_method`, the choice of
:class:`~kernelforms.estimator.KernelLearner`'s ``method="auto"``) or ``--method``,
computes the Lagrangian certificate as ``compare`` does, and writes the factor ``G``
(``K = G G^T``) to ``PATH``:

* ``.npy``: the factor alone, ``(n, r)``;
* ``.npz``: ``factor``, ``embedding`` (the same kernel in principal axes, zero directions
  dropped), ``labels`` (when known), ``objective``, ``certified_gap`` (NaN when no bound
  applies), ``status``, ``method``, ``fingerprint`` and ``options`` (a JSON string: the
  instance's recipe and the method's options).

Every file is written to a temporary name in the target directory and renamed, so a
reader never sees half a file.  :func:`write_factor` is also what ``kernelforms compare
--save-factor DIR`` uses for each finished row.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DataError, OptionError, ProblemError

__all__ = ["auto_method", "read_data", "read_pairs", "write_factor", "check_factor_path",
           "build_from_data", "learn", "FACTOR_SUFFIXES", "KIND_AUTO"]

#: what the factor file may be
FACTOR_SUFFIXES = (".npy", ".npz")

#: ``method="auto"`` for each problem kind of :mod:`kernelforms.problems.factory` (the same
#: table as :data:`kernelforms.estimator.AUTO_METHODS`; bregman: its divergence's solver)
KIND_AUTO: dict[str, str] = {
    "pcp": "lowrank", "pcp-hard": "lowrank", "regpcp": "sdp", "npkl": "bcd", "mvu": "mvu",
    "regmvu": "sdp", "bregman": "burg",
}



def _read_csv(p: Path) -> np.ndarray:
    """A comma-separated numeric file as a 2-D array; a first line that is not numbers is a
    header and skipped."""
    with open(p, encoding="utf-8") as fh:
        first = fh.readline()
    try:
        [float(t) for t in first.strip().split(",") if t.strip()]
        skip = 0
    except ValueError:
        skip = 1
    return np.loadtxt(p, delimiter=",", skiprows=skip, ndmin=2, dtype=float)

def auto_method(problem: Any, kind: str | None = None) -> str:
    """The method ``method="auto"`` uses: :data:`KIND_AUTO` for the problem's kind (read
    from the problem's class when ``kind`` is None); a Bregman problem with the von Neumann
    divergence gets ``vonneumann``.  When that method does not apply to the instance (its
    reason is returned by ``applies_to``), the full SDP."""
    from .methods import get_method

    if kind is None:
        name = type(problem).__name__
        kind = {"PCP": "pcp-hard" if getattr(problem, "hard", False) else "pcp",
                "RegPCP": "regpcp", "NPKL": "npkl", "MVU": "mvu", "RegMVU": "regmvu",
                "BregmanLowRank": "bregman"}.get(name, "")
    method = KIND_AUTO.get(kind, "sdp")
    if kind == "bregman" and "neumann" in str(getattr(problem, "divergence", "")).lower():
        method = "vonneumann"
    if get_method(method).applies_to(problem) is not None:
        return "sdp"
    return method


# ------------------------------------------------------------------ reading a user's files
def _suffix(path: str) -> str:
    s = Path(path).suffix.lower()
    return ".svm" if s in (".svm", ".libsvm", ".svmlight") else s


def read_data(path: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``(X, y)`` from a user's file.

    * ``.csv`` / ``.txt``: comma-separated numbers, one point a row, the class label in the
      last column; a first row that is not numeric is a header and skipped;
    * ``.npy``: a 2-D array, the label in the last column;
    * ``.npz``: arrays ``X`` and ``y`` (``y`` optional);
    * ``.svm`` / ``.libsvm`` / ``.svmlight``: LIBSVM format (label first, ``index:value``).

    Raises :class:`~kernelforms.errors.DataError` naming the file and what is wrong.
    """
    p = Path(path)
    if not p.is_file():
        what = "is a directory" if p.is_dir() else "does not exist"
        raise DataError(f"The '--data' file {str(path)!r} {what}; give a CSV, NPY, NPZ or LIBSVM file.")
    s = _suffix(path)
    try:
        if s in (".csv", ".txt"):
            A = _read_csv(p)
            X, y = A[:, :-1], A[:, -1]
        elif s == ".npy":
            A = np.load(p, allow_pickle=False)
            if A.ndim != 2 or A.shape[1] < 2:
                raise DataError(f"The '--data' file {str(path)!r} must hold a 2-D array with the labels "
                                f"in its last column. Got shape {A.shape}.")
            X, y = np.asarray(A[:, :-1], dtype=float), A[:, -1]
        elif s == ".npz":
            with np.load(p, allow_pickle=False) as z:
                if "X" not in z:
                    raise DataError(f"The '--data' file {str(path)!r} must hold an array 'X' (and "
                                    f"labels 'y'). Got arrays {sorted(z.files)}.")
                X = np.asarray(z["X"], dtype=float)
                y = z["y"] if "y" in z else None
        elif s == ".svm":
            from sklearn.datasets import load_svmlight_file

            Xs, y = load_svmlight_file(str(p))
            X = np.asarray(Xs.toarray(), dtype=float)
        else:
            raise DataError(f"The '--data' file {str(path)!r} has an unknown type {p.suffix!r}; "
                            "use .csv, .txt, .npy, .npz or .svm / .libsvm.")
    except DataError:
        raise
    except (ValueError, OSError, KeyError) as exc:
        raise DataError(f"The '--data' file {str(path)!r} could not be read: {exc}") from exc
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise DataError(f"The '--data' file {str(path)!r} must hold at least 2 points with at least "
                        f"one feature. Got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise DataError(f"The '--data' file {str(path)!r} has NaN or infinite feature values.")
    if y is not None:
        y = np.asarray(y).ravel()
        if y.dtype.kind == "f":
            if not np.all(np.isfinite(y)):
                raise DataError(f"The '--data' file {str(path)!r} has NaN or infinite labels.")
            if np.all(y == np.round(y)):
                y = y.astype(np.int64)
    return X, y


def read_pairs(path: str, n: int) -> Any:
    """Must-/cannot-link pairs from a file of rows ``i, j, link`` (``.csv`` / ``.txt``
    comma-separated, or a ``(k, 3)`` ``.npy`` array): ``link`` 1 is a must-link, 0 or -1 a
    cannot-link; ``i``, ``j`` index the points of ``--data`` from 0."""
    from .data.pairs import Pairs

    p = Path(path)
    if not p.is_file():
        raise DataError(f"The '--pairs' file {str(path)!r} does not exist.")
    try:
        if _suffix(path) == ".npy":
            A = np.load(p, allow_pickle=False)
        else:
            A = _read_csv(p)
    except (ValueError, OSError) as exc:
        raise DataError(f"The '--pairs' file {str(path)!r} could not be read: {exc}") from exc
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[1] != 3 or A.shape[0] == 0:
        raise DataError(f"The '--pairs' file {str(path)!r} must hold rows 'i, j, link' (3 columns). "
                        f"Got shape {A.shape}.")
    if not np.all(np.isfinite(A)) or np.any(A[:, :2] != np.round(A[:, :2])):
        raise DataError(f"The '--pairs' file {str(path)!r} must hold integer point indices.")
    if not np.all(np.isin(A[:, 2], (1.0, 0.0, -1.0))):
        raise DataError(f"The '--pairs' file {str(path)!r}: the link column must be 1 (must-link) "
                        "or 0 / -1 (cannot-link).")
    idx = A[:, :2].astype(np.int64)
    if idx.min() < 0 or idx.max() >= n:
        raise DataError(f"The '--pairs' file {str(path)!r} indexes point {int(idx.max() if idx.max() >= n else idx.min())}; "
                        f"the data have n = {n} points (indices 0 .. {n - 1}).")
    must = A[:, 2] == 1.0
    return Pairs(idx[must], idx[~must], n=n)


def build_from_data(kind: str, X: np.ndarray, y: np.ndarray | None, pairs: Any = None, **params: Any) -> Any:
    """The instance of ``kind`` on a user's points: :func:`~kernelforms.problems.factory.build_problem`
    (pairs drawn from ``y`` as ``compare`` does), or with explicit ``pairs`` on the same
    kNN graph (k = 5, delta = 0; NPKL 0.01, unless given)."""
    from .problems.factory import build_problem

    if pairs is None:
        return build_problem(kind, X, y, **params)
    from .problems.factory import canonical_kind, on_graph, parameters, resolve

    kind = canonical_kind(kind)
    if "n_must" not in parameters(kind):
        from .problems.factory import all_parameters

        raise OptionError(f"The '--pairs' option applies to {', '.join(all_parameters()['n_must'])}; "
                          f"the problem is {kind}.")
    from .data.graphs import _check_method, knn_laplacian

    v = resolve(kind, {k: val for k, val in params.items() if k != "seed"})
    k, delta, graph_method = v["k"], float(v["delta"]), v["graph_method"]
    L = knn_laplacian(X, k=k, delta=delta, method=graph_method)
    prob = on_graph(kind, L, pairs, v)
    gamma = float(v.get("gamma", 1.0))  # (pcp-hard has none: its definition records 1, as before)
    extra = {}
    if _check_method("learn --pairs", graph_method, L.shape[0]) != "exact":
        extra["graph_method"] = "approx"  # (the exact search's definition is the one it always had)
    return prob.with_definition("learn --pairs", kind=kind, X=X, must=pairs.must, cannot=pairs.cannot,
                                k=k, delta=delta, gamma=gamma, **extra)


# ------------------------------------------------------------------ writing the factor
def check_factor_path(path: str, what: str = "--out") -> str:
    """Refuse a factor path that cannot be written or whose suffix is not .npy / .npz
    (before any work)."""
    from .compare import check_writable

    s = _suffix(str(path))
    if s not in FACTOR_SUFFIXES:
        raise OptionError(f"The {what!r} option must end in .npy (the factor) or .npz (the factor "
                          f"and its metadata). Got {str(path)!r} instead.")
    check_writable(path, what)
    return str(path)


def _principal(G: np.ndarray) -> np.ndarray:
    from .estimator import _principal_axes

    return _principal_axes(G)


def write_factor(path: str, result: Any, problem: Any, *, labels: Any = None,
                 options: dict[str, Any] | None = None) -> str:
    """Write ``result.factor`` to ``path`` (.npy: the factor; .npz: with its metadata, see the
    module docstring) through a temporary file and a rename.  Returns the path.

    Raises :class:`~kernelforms.compare.ReportWriteError` when the write fails (nothing is
    left at ``path`` but its previous content) and :class:`ProblemError` when the result
    has no factor."""
    from .report import atomic_file

    G = getattr(result, "factor", None)
    if G is None:
        raise ProblemError(f"{getattr(result, 'method', 'the method')} returned no factor "
                           f"(status {getattr(getattr(result, 'status', None), 'value', '?')}); nothing to write")
    G = np.ascontiguousarray(G, dtype=float)
    path = os.fspath(path)

    def write(fh: Any) -> None:
        if _suffix(path) == ".npy":
            np.save(fh, G, allow_pickle=False)
        else:
            gap = getattr(result, "certified_gap", None)
            np.savez(fh, factor=G, embedding=_principal(G),
                     labels=np.asarray([] if labels is None else labels),
                     objective=np.float64(result.objective),
                     certified_gap=np.float64(math.nan if gap is None else gap),
                     status=np.str_(result.status.value), method=np.str_(result.method),
                     fingerprint=np.str_(problem.fingerprint()),
                     options=np.str_(json.dumps(options or {}, sort_keys=True, default=str)))
        fh.flush()
        os.fsync(fh.fileno())  # the factor may have taken minutes: make it durable

    atomic_file(path, write, binary=True)
    return path


# ------------------------------------------------------------------ the whole command
def learn(problem: Any, method: str = "auto", *, kind: str | None = None, seed: int = 0,
          time_limit: float | None = None, certify: bool = True, **options: Any) -> Any:
    """Solve ``problem`` with ``method`` ("auto": :func:`auto_method`) and attach the
    Lagrangian certificate as :func:`kernelforms.compare` does.  Returns the Result."""
    from .isolation import attach_certificate
    from .methods import solve

    m = auto_method(problem, kind) if str(method).strip().lower() == "auto" else method
    res = solve(problem, m, seed=seed, time_limit=time_limit, **options)
    if certify:
        attach_certificate(problem, res)
    return res
