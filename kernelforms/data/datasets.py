"""Benchmark data sets and synthetic generators.

Every data set is returned as ``(X, y)``: ``X`` a dense ``float64`` array of shape
``(n, d)`` and ``y`` an ``int64`` array of shape ``(n,)``.

Shipped files (package data, see ``kernelforms/data/files/README.md``): glass, heart,
iris, sonar, soybean, wine, pendigits (UCI, CC BY 4.0) and a1a-a4a (LIBSVM's
binarisation of UCI Adult). Labels are kept as in the files: glass 1,2,3,5,6,7; heart
1/2; wine 1..3; a*a -1/+1; iris, sonar, soybean 0..K-1; digits 0..9.

``iris`` and ``wine`` load the shipped UCI CSV files. ``iris_sklearn`` and
``wine_sklearn`` load scikit-learn's bundled copies instead (``iris_sklearn`` has
Fisher's corrected values in rows 35 and 38; ``wine_sklearn`` has the same values as
``wine`` but labels 0..2). ``digits`` is scikit-learn's ``load_digits`` (8x8, 1797 x 64).

``usps`` (the 7291-image training set) is not shipped because its source states no
licence: pass ``data_dir=`` (a directory holding ``usps.csv.gz``) or set the
environment variable ``KERNELFORMS_DATA_DIR``.
"""

from __future__ import annotations

import difflib
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kernelforms.errors import DataError, ProblemError, param_error

__all__ = [
    "names",
    "info",
    "table",
    "load",
    "scale",
    "subsample",
    "two_gaussians",
    "chessboard",
    "double_spiral",
    "swiss_roll",
    "DATA_DIR_ENV",
]

#: Environment variable naming a directory searched for data files.
DATA_DIR_ENV = "KERNELFORMS_DATA_DIR"

_FILES_DIR = Path(__file__).resolve().parent / "files"

_UCI = "CC BY 4.0 (UCI Machine Learning Repository)"
_ADULT = "derived from UCI Adult, CC BY 4.0 (LIBSVM page states no separate licence)"
_SKLEARN = "BSD-3-Clause (bundled with scikit-learn)"
_SYNTH = "generated (no licence needed)"

# name -> metadata. n, d and classes are those of the file (for generators: defaults).
_REGISTRY: dict[str, dict[str, Any]] = {
    "glass": dict(n=214, d=9, classes=6, kind="csv", file="glass.csv", licence=_UCI,
                  source="UCI Glass Identification"),
    "heart": dict(n=270, d=13, classes=2, kind="csv", file="heart.csv", licence=_UCI,
                  source="UCI Statlog (Heart)"),
    "iris": dict(n=150, d=4, classes=3, kind="csv", file="iris.csv", licence=_UCI,
                 source="UCI Iris (iris.data, with its rows 35/38 errata)"),
    "sonar": dict(n=208, d=60, classes=2, kind="csv", file="sonar.csv", licence=_UCI,
                  source="UCI Connectionist Bench (Sonar, Mines vs. Rocks)"),
    "soybean": dict(n=47, d=35, classes=4, kind="csv", file="soybean.csv", licence=_UCI,
                    source="UCI Soybean (Small)"),
    "wine": dict(n=178, d=13, classes=3, kind="csv", file="wine.csv", licence=_UCI,
                 source="UCI Wine"),
    "pendigits": dict(n=10992, d=16, classes=10, kind="csv", file="pendigits.csv",
                      licence=_UCI,
                      source="UCI Pen-Based Recognition of Handwritten Digits "
                             "(train rows 1-7494, then test)"),
    "a1a": dict(n=1605, d=123, classes=2, kind="svm", file="a1a.svm", licence=_ADULT,
                source="LIBSVM a1a (Platt's binarisation of UCI Adult)"),
    "a2a": dict(n=2265, d=123, classes=2, kind="svm", file="a2a.svm", licence=_ADULT,
                source="LIBSVM a2a (Platt's binarisation of UCI Adult)"),
    "a3a": dict(n=3185, d=123, classes=2, kind="svm", file="a3a.svm", licence=_ADULT,
                source="LIBSVM a3a (Platt's binarisation of UCI Adult)"),
    "a4a": dict(n=4781, d=123, classes=2, kind="svm", file="a4a.svm", licence=_ADULT,
                source="LIBSVM a4a (Platt's binarisation of UCI Adult)"),
    "usps": dict(n=7291, d=256, classes=10, kind="csv", file="usps.csv.gz",
                 licence="unknown (source states no licence; not shipped)",
                 source="USPS handwritten digits, training set (ESL zip.train)"),
    "iris_sklearn": dict(n=150, d=4, classes=3, kind="sklearn", file=None,
                         licence=_SKLEARN, source="sklearn.datasets.load_iris"),
    "wine_sklearn": dict(n=178, d=13, classes=3, kind="sklearn", file=None,
                         licence=_SKLEARN, source="sklearn.datasets.load_wine"),
    "digits": dict(n=1797, d=64, classes=10, kind="sklearn", file=None,
                   licence=_SKLEARN, source="sklearn.datasets.load_digits"),
    "two_gaussians": dict(n=300, d=10, classes=2, kind="synthetic", file=None,
                          licence=_SYNTH,
                          source="N(+1, I) vs N(-1, I) (Hu & Kwok 2013, Section 4.2)"),
    "chessboard": dict(n=100, d=2, classes=2, kind="synthetic", file=None,
                       licence=_SYNTH, source="uniform points on a 4x4 chessboard"),
    "double_spiral": dict(n=100, d=3, classes=2, kind="synthetic", file=None,
                          licence=_SYNTH, source="two interleaved spirals"),
    "swiss_roll": dict(n=2000, d=3, classes=4, kind="synthetic", file=None,
                       licence=_SYNTH,
                       source="sklearn.datasets.make_swiss_roll, y = roll position bin"),
}


def names() -> list[str]:
    """Return every name :func:`load` accepts.

    Returns
    -------
    list of str
        Shipped files, scikit-learn data sets, ``usps`` (not shipped) and the
        synthetic generators, in a fixed order.
    """
    return list(_REGISTRY)


def _check_name(name: object) -> str:
    if not isinstance(name, str) or name not in _REGISTRY:
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise DataError(
            f"Unknown data set {name!r}.{hint} Known names: {', '.join(_REGISTRY)}."
        )
    return name


def info(name: str) -> dict:
    """Describe one data set without loading it.

    Parameters
    ----------
    name : str
        One of :func:`names`.

    Returns
    -------
    dict
        Keys ``name``, ``n``, ``d``, ``classes`` (the number of classes; also under
        ``n_classes``), ``source``, ``licence``, ``shipped`` (bool: available without
        ``data_dir``), ``file`` (file name or None) and ``kind`` (``"csv"``, ``"svm"``,
        ``"sklearn"`` or ``"synthetic"``). For generators, n and d are the defaults.

    Raises
    ------
    DataError
        If ``name`` is unknown.
    """
    meta = _REGISTRY[_check_name(name)]
    return {
        "name": name,
        "n": meta["n"],
        "d": meta["d"],
        "classes": meta["classes"],
        "n_classes": meta["classes"],
        "source": meta["source"],
        "licence": meta["licence"],
        "shipped": name != "usps",
        "file": meta["file"],
        "kind": meta["kind"],
    }


def table() -> list[dict]:
    """One row per data set, for the ``kernelforms datasets`` command.

    Returns
    -------
    list of dict
        Each with keys ``name``, ``n``, ``d``, ``n_classes``, ``source`` (plus
        ``shipped`` and ``licence``).
    """
    rows = []
    for name in _REGISTRY:
        i = info(name)
        rows.append({k: i[k] for k in ("name", "n", "d", "n_classes", "source",
                                       "shipped", "licence")})
    return rows


# --------------------------------------------------------------------------- files


def _search_dirs(data_dir) -> list[Path]:
    dirs = []
    if data_dir is not None:
        p = Path(data_dir).expanduser()
        if not p.is_dir():
            raise DataError(f"data_dir {str(p)!r} is not a directory.")
        dirs.append(p)
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        dirs.append(Path(env).expanduser())
    return dirs


def _find_file(name: str, data_dir) -> Path:
    fname = _REGISTRY[name]["file"]
    base = fname[:-3] if fname.endswith(".gz") else fname
    candidates = [base, base + ".gz"]
    dirs = _search_dirs(data_dir)
    if name != "usps":
        dirs.append(_FILES_DIR)
    for d in dirs:
        for c in candidates:
            p = d / c
            if p.is_file():
                return p
    if name == "usps":
        looked = ", ".join(str(d) for d in dirs) or "nowhere"
        raise DataError(
            "USPS is not shipped with kernelforms because its source states no licence. "
            f"Put usps.csv.gz in a directory and call load('usps', data_dir='/that/dir'), "
            f"or set the environment variable {DATA_DIR_ENV}. (Looked in: {looked}.)"
        )
    raise DataError(
        f"Data file for {name!r} not found: looked for {fname!r} in "
        f"{', '.join(str(d) for d in dirs)}. The installation may be incomplete."
    )


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        import gzip

        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            header = fh.readline().strip().split(",")
            if len(header) < 2 or header[-1].strip() != "label":
                raise ValueError("the header row must end with a 'label' column")
            with warnings.catch_warnings():
                # an empty file is reported as a corrupt file below, not as a NumPy warning
                warnings.simplefilter("ignore", UserWarning)
                data = np.loadtxt(fh, delimiter=",", dtype=np.float64, ndmin=2)
    except DataError:
        raise
    except (OSError, ValueError, EOFError, UnicodeDecodeError) as exc:
        raise DataError(f"Cannot read data file {str(path)!r}: {exc}") from exc
    if data.shape[0] == 0 or data.shape[1] != len(header):
        raise DataError(
            f"Data file {str(path)!r} is corrupt: expected {len(header)} columns and at "
            f"least one row, got shape {data.shape}."
        )
    X = np.ascontiguousarray(data[:, :-1])
    lab = data[:, -1]
    if not np.all(np.isfinite(data)) or np.any(lab != np.round(lab)):
        raise DataError(
            f"Data file {str(path)!r} is corrupt: non-finite values or non-integer labels."
        )
    return X, lab.astype(np.int64)


def _read_svm(path: Path, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_svmlight_file

    try:
        Xs, y = load_svmlight_file(str(path), n_features=n_features)
    except (OSError, ValueError, EOFError, RuntimeError) as exc:
        raise DataError(f"Cannot read data file {str(path)!r}: {exc}") from exc
    if np.any(y != np.round(y)):
        raise DataError(f"Data file {str(path)!r} is corrupt: non-integer labels.")
    return np.asarray(Xs.toarray(), dtype=np.float64), y.astype(np.int64)


def _check_shape(name: str, X: np.ndarray, path: Path) -> None:
    meta = _REGISTRY[name]
    if X.shape[1] != meta["d"]:
        raise DataError(
            f"Data file {str(path)!r} is corrupt: {name} has {meta['d']} features, "
            f"the file has {X.shape[1]}."
        )


# ------------------------------------------------------------------------ generators


def _check_int(owner: str, pname: str, value, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < low:
        raise param_error(owner, pname, f"an integer >= {low}", value)
    return int(value)


def _check_float(owner: str, pname: str, value, low: float = 0.0) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)) or not np.isfinite(value) \
            or value < low:
        raise param_error(owner, pname, f"a finite number >= {low}", value)
    return float(value)


def two_gaussians(n: int = 300, d: int = 10, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """Two Gaussian classes, N(+1, I) and N(-1, I), as in Hu & Kwok (2013), Section 4.2.

    Parameters
    ----------
    n : int, default 300
        Number of points (>= 2); class 0 gets ``n - n // 2``, class 1 ``n // 2``.
    d : int, default 10
        Dimension.
    seed : int or numpy.random.Generator, default 0
        Passed to :func:`numpy.random.default_rng`.

    Returns
    -------
    X : ndarray of shape (n, d)
        Class 0 drawn from N(+1 vector, I), class 1 from N(-1 vector, I); rows are in
        random order.
    y : ndarray of shape (n,)
        Labels 0/1.
    """
    n = _check_int("two_gaussians", "n", n, 2)
    d = _check_int("two_gaussians", "d", d, 1)
    rng = np.random.default_rng(seed)
    y = np.zeros(n, dtype=np.int64)
    y[n - n // 2:] = 1
    y = y[rng.permutation(n)]
    X = rng.standard_normal((n, d)) + np.where(y == 0, 1.0, -1.0)[:, None]
    return X, y


def chessboard(n: int = 100, cells: int = 4, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """Points uniform on a ``cells x cells`` chessboard, labelled by square colour.

    Parameters
    ----------
    n : int, default 100
        Number of points (the paper's chessboard set has 100 points, 2 features).
    cells : int, default 4
        Squares per side; the board is ``[0, cells)^2``.
    seed : int or numpy.random.Generator, default 0

    Returns
    -------
    X : ndarray of shape (n, 2)
    y : ndarray of shape (n,)
        ``(floor(x1) + floor(x2)) % 2`` (classes are not exactly balanced).
    """
    n = _check_int("chessboard", "n", n, 2)
    cells = _check_int("chessboard", "cells", cells, 1)
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, cells, size=(n, 2))
    y = (np.floor(X).astype(np.int64).sum(axis=1) % 2).astype(np.int64)
    return X, y


def double_spiral(n: int = 100, noise: float = 0.0, turns: float = 1.5, dim: int = 3,
                  seed=0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals (class 1 is class 0 rotated by pi).

    A point of class c at parameter ``t`` uniform in [0, 1] is
    ``r (cos a, sin a)`` with ``r = 0.5 + 4 t``, ``a = 2 pi turns t + pi c``, plus
    N(0, noise^2) on each coordinate. With ``dim=3`` (the default, matching the 3
    features of the paper's dbl-spiral set) a third coordinate ``2 t`` is appended; it
    is the same for both arms, so it does not separate the classes.

    Parameters
    ----------
    n : int, default 100
        Number of points; class 0 gets ``n - n // 2``.
    noise : float, default 0.0
        Standard deviation of the Gaussian noise.
    turns : float, default 1.5
        Number of turns of each arm.
    dim : {2, 3}, default 3
    seed : int or numpy.random.Generator, default 0

    Returns
    -------
    X : ndarray of shape (n, dim)
    y : ndarray of shape (n,)
        Labels 0/1, rows in random order.
    """
    n = _check_int("double_spiral", "n", n, 2)
    noise = _check_float("double_spiral", "noise", noise)
    turns = _check_float("double_spiral", "turns", turns)
    if dim not in (2, 3) or isinstance(dim, bool):
        raise param_error("double_spiral", "dim", "2 or 3", dim)
    rng = np.random.default_rng(seed)
    y = np.zeros(n, dtype=np.int64)
    y[n - n // 2:] = 1
    y = y[rng.permutation(n)]
    t = rng.uniform(0.0, 1.0, size=n)
    r = 0.5 + 4.0 * t
    a = 2.0 * np.pi * turns * t + np.pi * y
    cols = [r * np.cos(a), r * np.sin(a)]
    if dim == 3:
        cols.append(2.0 * t)
    X = np.column_stack(cols)
    if noise > 0:
        X = X + noise * rng.standard_normal(X.shape)
    return X, y


def swiss_roll(n: int = 2000, noise: float = 0.0, n_classes: int = 4,
               seed=0) -> tuple[np.ndarray, np.ndarray]:
    """The Swiss roll of :func:`sklearn.datasets.make_swiss_roll`.

    ``make_swiss_roll`` is given an integer seed drawn from
    ``numpy.random.default_rng(seed)``, so the result depends only on ``seed``.

    Parameters
    ----------
    n : int, default 2000
        Number of points (Wu et al. 2009 use 2000).
    noise : float, default 0.0
    n_classes : int, default 4
        The roll position ``t`` (in [1.5 pi, 4.5 pi]) is cut into ``n_classes``
        equal-width bins; ``y`` is the bin index. The labels are only a convenience
        (the Swiss roll is a manifold-learning set, Wu et al. 2009 use it without labels).
    seed : int or numpy.random.Generator, default 0

    Returns
    -------
    X : ndarray of shape (n, 3)
    y : ndarray of shape (n,)
        Labels 0..n_classes-1.
    """
    from sklearn.datasets import make_swiss_roll

    n = _check_int("swiss_roll", "n", n, 2)
    noise = _check_float("swiss_roll", "noise", noise)
    n_classes = _check_int("swiss_roll", "n_classes", n_classes, 1)
    rng = np.random.default_rng(seed)
    X, t = make_swiss_roll(n_samples=n, noise=noise,
                           random_state=int(rng.integers(0, 2**31 - 1)))
    lo, hi = 1.5 * np.pi, 4.5 * np.pi
    y = np.clip(np.floor((t - lo) / (hi - lo) * n_classes), 0, n_classes - 1)
    return np.asarray(X, dtype=np.float64), y.astype(np.int64)


_GENERATORS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "two_gaussians": two_gaussians,
    "chessboard": chessboard,
    "double_spiral": double_spiral,
    "swiss_roll": swiss_roll,
}


# ------------------------------------------------------------------------------ load
#: bytes per point and feature a generator holds at its peak (the draws, their transform
#: and the result), plus 24 per point (labels).  tracemalloc peaks at 200,000 points:
#: two_gaussians 176 B/point (d = 10), chessboard 48, double_spiral 80, swiss_roll 398
#: (scikit-learn's generator and the class bins)
GENERATOR_BYTES_PER_ENTRY = {"two_gaussians": 32, "chessboard": 32, "double_spiral": 32,
                             "swiss_roll": 160}


def generation_bytes(name: str, n: int, d: int | None = None) -> int:
    """Bytes a generator needs to draw ``n`` points (see :data:`GENERATOR_BYTES_PER_ENTRY`)."""
    d = int(_REGISTRY[name]["d"] if d is None else d)
    return int(n) * (GENERATOR_BYTES_PER_ENTRY.get(name, 160) * max(d, 1) + 24)


def _check_generation_size(name: str, kwargs: dict) -> None:
    """Refuse, before drawing anything, a generated set above the memory limit: the running
    method's ``max_memory`` (see :func:`kernelforms.model.checks.limit_memory`), else the
    solvers' default of 4 GiB (a billion two-Gaussian points ran 195 s to a MemoryError)."""
    from ..model.checks import _MEMORY_LIMIT, bytes_text

    n = kwargs.get("n")
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        return  # the generator's own check names the bad value
    d = kwargs.get("d", kwargs.get("dim"))
    d = d if isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and d > 0 else None
    need = generation_bytes(name, int(n), d)
    limit = _MEMORY_LIMIT.get()
    limit = float(4 * 2**30) if limit is None else limit
    if need > limit:
        raise DataError(
            f"load({name!r}): drawing n = {int(n)} points needs about {bytes_text(need)} (and a "
            f"problem over them far more), above the memory limit of {bytes_text(limit)}. Use "
            "fewer points (n_points=...), or raise the limit with --max-memory / "
            "kernelforms.model.checks.limit_memory(bytes).")




def load(name: str, *, data_dir=None, seed=0, n_points: int | None = None, scale: bool = False,
         **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """Load a data set by name, optionally at a given size.

    Parameters
    ----------
    name : str
        One of :func:`names`.
    data_dir : str or path-like, optional
        A directory searched first for the data file (``<file>`` or ``<file>.gz``).
        Then the directory in the environment variable ``KERNELFORMS_DATA_DIR``, then
        the files shipped with the package. ``usps`` is only ever read from these two
        user directories. A file found there may have any number of rows but must
        have the data set's number of features.
    seed : int or numpy.random.Generator, default 0
        Seeds the synthetic generators and the subset drawn for ``n_points``.
    n_points : int, optional
        The number of points. Generators draw exactly this many (the same as ``n=``).
        Data sets read from a file (or from scikit-learn) are cut to a class-stratified,
        seeded random subset of ``n_points`` rows (see :func:`subsample`); asking for
        more points than the file has is an error, never a silent cap.
    scale : bool, default False
        Apply :func:`scale` (features to [-1, 1]) to the whole data set *before* the
        subset is drawn, so that a subset's values do not depend on its size.
    **kwargs
        Passed to the generator (e.g. ``load("two_gaussians", n=1000)``). For
        ``usps``, ``n_per_class=k`` keeps the first k images of each digit in file
        order (Wu et al. 2009 use k = 200). Other data sets accept no keywords.

    Returns
    -------
    X : ndarray of shape (n, d), float64
    y : ndarray of shape (n,), int64

    Raises
    ------
    DataError
        Unknown name (the message lists the known names and close matches), missing
        or corrupt file (the message names the path), USPS without a data directory,
        ``n_points`` larger than the file.
    ProblemError
        Bad keyword arguments, ``n_points`` not an integer >= 2 or fewer than the
        number of classes.
    """
    name = _check_name(name)
    if n_points is not None:
        n_points = _check_int(f"load({name!r})", "n_points", n_points, 2)
    if not isinstance(scale, (bool, np.bool_)):
        raise param_error(f"load({name!r})", "scale", "a bool", scale)
    kind = _REGISTRY[name]["kind"]
    if kind == "synthetic":
        gen = _GENERATORS[name]
        if n_points is not None:
            if "n" in kwargs and kwargs["n"] != n_points:
                raise ProblemError(f"load({name!r}): n={kwargs['n']!r} and n_points={n_points} "
                                   "disagree; pass only one of them.")
            kwargs["n"] = n_points
        _check_generation_size(name, kwargs)
        try:
            X, y = gen(seed=seed, **kwargs)
        except TypeError as exc:
            raise ProblemError(f"Bad keyword arguments for {name!r}: {exc}") from exc
        return (_scale_features(X) if scale else X), y
    X, y = _load_whole(name, data_dir, kwargs)
    if scale:
        X = _scale_features(X)
    if n_points is not None:
        X, y = subsample(X, y, n_points, seed=seed, name=name)
    return X, y


def _scale_features(X: np.ndarray) -> np.ndarray:
    return scale(X)  # the module function (load's ``scale`` argument hides it there)


def _load_whole(name: str, data_dir, kwargs: dict) -> tuple[np.ndarray, np.ndarray]:
    kind = _REGISTRY[name]["kind"]
    n_per_class = kwargs.pop("n_per_class", None) if name == "usps" else None
    if kwargs:
        raise ProblemError(
            f"Data set {name!r} accepts no keyword arguments; got {sorted(kwargs)}."
        )
    if kind == "sklearn":
        import sklearn.datasets as skd

        loader = {"iris_sklearn": skd.load_iris, "wine_sklearn": skd.load_wine,
                  "digits": skd.load_digits}[name]
        bunch = loader()
        return (np.ascontiguousarray(bunch.data, dtype=np.float64),
                np.asarray(bunch.target, dtype=np.int64))
    path = _find_file(name, data_dir)
    if kind == "svm":
        X, y = _read_svm(path, _REGISTRY[name]["d"])
    else:
        X, y = _read_csv(path)
    _check_shape(name, X, path)
    if n_per_class is not None:
        k = _check_int("load('usps')", "n_per_class", n_per_class, 1)
        order = np.argsort(y, kind="stable")
        ys = y[order]
        starts = np.searchsorted(ys, ys, side="left")
        rank = np.arange(len(ys)) - starts
        keep = np.sort(order[rank < k])
        X, y = X[keep], y[keep]
    return X, y


def subsample(X, y, n_points: int, seed=0, *, name: str = "the data set"
              ) -> tuple[np.ndarray, np.ndarray]:
    """A class-stratified, seeded random subset of ``n_points`` rows, in file order.

    The subset is the one ``kernelforms compare --n-points`` has always drawn (same
    random stream), so instances and their fingerprints are unchanged.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,) or None
        Labels; each class keeps (about) its share of the rows. Without labels the
        subset is uniform.
    n_points : int
        2 <= n_points <= n; ``n_points == n`` returns every row, in order.
    seed : int or numpy.random.Generator, default 0
    name : str
        Used in the error messages.

    Raises
    ------
    DataError
        ``n_points`` is larger than the number of rows.
    ProblemError
        ``n_points`` is not an integer >= 2, or is smaller than the number of classes
        (a stratified subset needs a point of every class).
    """
    n_points = _check_int("subsample", "n_points", n_points, 2)
    n = X.shape[0]
    if n_points > n:
        raise DataError(
            f"n_points = {n_points} is more than {name} has: it has {n} points. Use "
            f"n_points <= {n}, or a generator (two_gaussians, chessboard, double_spiral, "
            "swiss_roll), which draws any number of points."
        )
    if n_points == n:
        return X, y
    rng = np.random.default_rng(seed)
    if y is None:
        idx = np.sort(rng.choice(n, n_points, replace=False))
        return X[idx], None
    classes, counts = np.unique(y, return_counts=True)
    if n_points < len(classes):
        raise ProblemError(
            f"n_points = {n_points} is fewer than the {len(classes)} classes of {name}: a "
            f"stratified subset needs a point of every class. Use n_points >= {len(classes)}."
        )
    if counts.min() < 2:
        raise ProblemError(
            f"{name} has a class with a single point, so it cannot be subsampled with "
            "stratification; use all of its points."
        )
    if n - n_points < len(classes):
        # fewer points left out than classes (soybean, 45 of 47 points): a stratified split
        # cannot put every class on the left-out side, so one point is left out of each of
        # n - n_points classes drawn at random (every class has two points or more: each
        # keeps one, and each share moves by one point at most)
        drop = [rng.choice(np.flatnonzero(y == c))
                for c in rng.choice(classes, n - n_points, replace=False)]
        keep = np.setdiff1d(np.arange(n), drop)
        return X[keep], y[keep]
    from sklearn.model_selection import train_test_split

    idx, _ = train_test_split(np.arange(n), train_size=n_points, stratify=y,
                              random_state=int(rng.integers(2**31 - 1)))
    idx = np.sort(idx)
    return X[idx], y[idx]


def scale(X, method: str = "minmax") -> np.ndarray:
    """Scale each feature to [-1, 1], as on the LIBSVM data pages.

    Parameters
    ----------
    X : array-like of shape (n, d)
    method : {"minmax"}, default "minmax"
        ``x -> 2 (x - min) / (max - min) - 1`` per column; constant columns become 0.

    Returns
    -------
    ndarray of shape (n, d), float64
        A new array.
    """
    if method != "minmax":
        raise param_error("scale", "method", "'minmax'", method)
    try:
        A = np.array(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ProblemError(f"scale: X must be a numeric array: {exc}") from exc
    if A.ndim != 2 or A.shape[0] == 0:
        raise ProblemError(f"scale: X must be a non-empty 2-d array; got shape {A.shape}.")
    if not np.all(np.isfinite(A)):
        raise ProblemError("scale: X contains NaN or infinite values.")
    lo = A.min(axis=0)
    span = A.max(axis=0) - lo
    const = span == 0
    out = 2.0 * (A - lo) / np.where(const, 1.0, span) - 1.0
    out[:, const] = 0.0
    return out
