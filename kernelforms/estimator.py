"""scikit-learn estimators: learn a kernel from labels or pairs, embed, cluster.

:class:`KernelLearner` is a transformer.  ``fit(X, y)`` draws must-link pairs
within classes and cannot-link pairs across classes from the labels ``y``
(or takes explicit ``pairs=``), builds one of the kernel-learning problems of
kernelforms on the kNN graph of ``X`` and solves it with any method;
``transform(X)`` returns the embedding ``G`` of the learned kernel
(``K = G G^T``): the learned rows for training points, the weighted mean of the
rows of their nearest training points for new points.  :class:`ConstrainedKernelClustering` runs kernel
k-means on that embedding.

>>> import kernelforms as kf
>>> from kernelforms.estimator import KernelLearner
>>> X, y = kf.datasets.load("iris")
>>> kl = KernelLearner(gamma=10, random_state=0).fit(X[::2], y[::2])
>>> G_new = kl.transform(X[1::2])          # rows of the 75 held-out points
>>> G_new.shape[0]
75

Both estimators pass :func:`sklearn.utils.estimator_checks.check_estimator`
(with the exemptions listed by :func:`expected_failed_checks`) and work in
``Pipeline``, ``GridSearchCV`` and ``cross_val_score``.  See docs/estimator.md.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.exceptions import NotFittedError

from .errors import ConvergenceWarning, ProblemError, SolverError
from .extend import extend
from ._estimator_params import (InputError, _Estimator, _Label, _MethodName, _Options,  # noqa: F401
                                 _RandomState, _seed, _validate_parameters, _validate_X)
from .solvers.options import Interval, StrOptions
from .problems.factory import all_parameters, parameters

__all__ = ["KernelLearner", "ConstrainedKernelClustering", "expected_failed_checks",
           "NotFittedKernelError", "InputError", "extend", "PROBLEMS", "AUTO_METHODS"]

#: problems :class:`KernelLearner` builds -> (needs side information, one-line description)
PROBLEMS: dict[str, tuple[bool, str]] = {
    "pcp": (True, "soft pairwise constraint propagation (P1; gamma)"),
    "pcp-hard": (True, "hard pairwise constraint propagation (P2)"),
    "regpcp": (True, "Laplacian-regularised PCP (P3; m_basis)"),
    "npkl": (True, "nonparametric kernel learning (P6; loss, gamma, b)"),
    "mvu": (False, "maximum variance unfolding (P4; unsupervised, y ignored)"),
    "regmvu": (False, "Laplacian-regularised MVU (P5; m_basis, nu; unsupervised)"),
}

#: the estimator's names of the problems' build parameters (kernelforms.problems.schema):
#: scikit-learn's name for the kNN graph's k
RENAMED = {"k": "n_neighbors"}
#: the estimator's defaults where they differ from the problems' ("auto": :data:`AUTO_GAMMA`;
#: 5 neighbours for every problem, MVU's too)
OWN_DEFAULTS: dict[str, Any] = {"gamma": "auto", "n_neighbors": 5}
#: values the estimator accepts beyond the problems' schema
EXTRA_VALUES: dict[str, list] = {"gamma": [StrOptions({"auto"})]}


def problem_parameters() -> dict[str, list]:
    """The constraints of the problems' build parameters :class:`KernelLearner` takes
    (those of the :data:`PROBLEMS` kinds), under the estimator's names: derived from the
    problem classes' schemas, never retyped."""
    out: dict[str, list] = {}
    for name, by_kind in all_parameters().items():
        if any(kind in PROBLEMS for kind in by_kind):
            p = next(iter(by_kind.values()))
            out[RENAMED.get(name, name)] = list(p.accepts) + EXTRA_VALUES.get(name, [])
    return out


#: ``method="auto"``: the method used for each problem: the hand-written solver that
#: scales in n (MVU: its own augmented-Lagrangian solver; ``lowrank`` had not finished a
#: 100-point roll after 13 minutes), or the full SDP for the regularised problems, whose
#: variable is the small ``m_basis x m_basis`` matrix Y
AUTO_METHODS: dict[str, str] = {
    "pcp": "lowrank", "pcp-hard": "lowrank", "regpcp": "sdp",
    "npkl": "bcd", "mvu": "mvu", "regmvu": "sdp",
}


#: ``gamma="auto"``: the pair-loss weight per problem (measured by ``kernelforms bench
#: estimator``: at gamma = 100 PCP's 1-NN accuracy on held-out digits / pendigits is 0.985 /
#: 0.977 against the raw features' 0.983 / 0.977, a tie; gamma = 1 ties too with the mean
#: extension, and on validation splits (harmonic extension) was 1-2 points below).  A constant,
#: not a rule from the data: with the normalised Laplacian (tr(L) / n = 1 + delta on every data
#: set) accuracy on a validation split is flat from 30 to 1,000 at the default pairs, and a
#: pair-density rule 120 tr(L) / (|M| + |C|) gained on digits and pendigits with sparse pairs
#: but lost on a1a (docs/estimator.md, "How gamma='auto' is chosen")
AUTO_GAMMA: dict[str, float] = {"pcp": 100.0, "npkl": 1.0}


class NotFittedKernelError(ProblemError, NotFittedError):
    """``transform`` / ``predict`` called before ``fit`` (both a kernelforms
    :class:`~kernelforms.errors.ProblemError` and scikit-learn's ``NotFittedError``)."""


def _few_threads(n: int):
    """One BLAS and OpenMP thread for inputs up to :data:`SMALL_N` points (``limit_threads``
    of :mod:`kernelforms._parallel`, which says why), no cap above."""
    from ._parallel import limit_threads

    return limit_threads(1 if n <= SMALL_N else None, user_api=None)



#: columns of lowrank's start from the labels (KernelLearner._label_start): above the rank
#: of the optima measured (3 on iris, 10 on digits and pendigits, 17 on a4a at gamma = 100)
START_COLUMNS = 20

#: fits remembered for the gamma path (GridSearchCV over gamma: each fold's data and
#: parameters up to gamma); a fit at gamma starts lowrank from the remembered solution at
#: the largest smaller gamma on the same data (digits, 1,797 points: 281 -> 158 L-BFGS
#: iterations at gamma = 100 from the solution at 10, 697 -> 378 at 1,000 from 100)
PATH_CACHE_SIZE = 16
from collections import OrderedDict as _OrderedDict  # noqa: E402

_PATH_CACHE: "_OrderedDict[tuple, dict[float, np.ndarray]]" = _OrderedDict()

#: inputs up to this many points run their neighbour searches and k-means on one thread
SMALL_N = 5000


def _check_fitted(est: BaseEstimator, attr: str, what: str) -> None:
    if not hasattr(est, attr):
        raise NotFittedKernelError(
            f"This {type(est).__name__} instance is not fitted yet: {what} was called before "
            "fit. Call 'fit' with appropriate arguments before using this estimator.")


class KernelLearner(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Learn a kernel from class labels or pairwise constraints; embed new points.

    ``fit(X, y)`` draws ``n_must`` must-link pairs (same class) and ``n_cannot``
    cannot-link pairs (different classes) from ``y`` (seeded by ``random_state``), or
    uses ``pairs=`` given to :meth:`fit`; builds ``problem`` on the kNN graph of ``X``
    (``n_neighbors``, Gaussian weights, normalised Laplacian shifted by ``delta``) and
    solves it with ``method``.  The learned kernel is ``K = G G^T``; ``G`` (the
    ``embedding_``) is stored in principal axes (columns in decreasing variance,
    numerically zero directions dropped), so ``SVC(kernel="linear")`` or
    ``KNeighborsClassifier`` on ``transform(X)`` uses the learned kernel.

    Parameters
    ----------
    problem : {"pcp", "pcp-hard", "regpcp", "npkl", "mvu", "regmvu"}, default "pcp"
        The problem (docs/problems.md): soft PCP (Hu & Kwok 2013), hard PCP and
        RegPCP (Wu et al. 2009), NPKL (Hoi et al. 2007), MVU and RegMVU (unsupervised:
        ``y`` is ignored).
    method : str, default "auto"
        Any name :func:`kernelforms.solve` knows ("lowrank", "admm", "bcd", "sdp",
        "sdp:scs", ...).  "auto" picks :data:`AUTO_METHODS`: "lowrank" (pcp,
        pcp-hard), "mvu" (mvu), "bcd" (npkl; "lowrank" with the logistic loss, which bcd
        does not take), "sdp" (regpcp, regmvu: an m_basis x m_basis SDP).
    gamma : float > 0 or "auto", default "auto"
        Weight of the pair loss (pcp, npkl).  "auto": :data:`AUTO_GAMMA` (100 for pcp: Hu &
        Kwok (2013)'s regime, where the learned kernel's 1-NN accuracy on held-out digits
        and pendigits ties the raw features' and its k-means ARI is 0.99-1.00; on
        validation splits gamma = 1 was 1-2 points below gamma = 30-1,000; 1 for npkl).
    n_neighbors : int >= 1 or None, default 5
        k of the kNN graph (must be < the number of training points); None: the
        problem's default (5; 4 for mvu and regmvu).
    delta : float >= 0 or None, default None
        Diagonal shift of the Laplacian; None: 0.01 for npkl, 0 otherwise.
    loss : {"hinge", "squared_hinge", "square", "linear", "logistic"}, default "hinge"
        NPKL's loss (``kernelforms.problems.LOSSES``).
    b : float > 0, default 1.0
        NPKL's bound ``K_ii <= b^2`` (linear loss).
    m_basis : int >= 1, default 10
        Basis size of regpcp / regmvu (must be < the number of training points).
    nu : float > 0, default 1.0
        RegMVU's weight.
    n_must, n_cannot : int >= 0 or None, default None
        Pairs drawn from ``y``; None: ``round(0.6 n)`` each, capped at the number of
        same-class (different-class) pairs ``y`` has.  An explicit count above that is
        an error.
    per_class : bool, default False
        Draw 20 must-links in each class and 20 cannot-links between every two classes
        (Wu et al. 2009, :func:`kernelforms.pairs.per_class_pairs`) instead of ``n_must`` /
        ``n_cannot``.
    inequality : bool, default False
        MVU's distance rows ``<= d_ij^2`` instead of ``==`` (Sun, Boyd, Xiao & Diaconis
        2006; ``MVU(..., equality=False)``).
    extension : {"mean", "harmonic", "joint"}, default "mean"
        How :meth:`transform` embeds a point that is not a training point.
        "mean": the weighted mean ``sum_j s_j g_j / d`` of the rows of its
        ``n_neighbors`` nearest training points (Gaussian weights ``s_j``, same width
        ``sigma_``, ``d = sum_j s_j``): new rows on the training rows' scale.
        "harmonic": the point is joined to its ``n_neighbors`` nearest training points
        (Gaussian weights, same width ``sigma_``) and gets the row minimising
        ``tr(L K)`` with the training rows fixed, ``L`` the normalised Laplacian of that
        graph: ``g = sum_j s_j / sqrt(d d_j') g_j / (1 + delta)`` (``d = sum_j s_j``,
        ``d_j'`` the training degree plus ``s_j``); far from the data rows shrink
        towards 0, and inside the data they are about 0.77 times the training rows' norm,
        which costs 1-NN accuracy where the training rows' norms vary (gamma = 1: 2 points
        on pendigits; docs/estimator.md).  At gamma = 100 the training rows have norm
        about 1, where a row's scale does not change its nearest training row, and the
        two rules' 1-NN accuracies are within 0.5 points.
        Both treat every point on its own, so a point's row does not depend on the
        batch.  "joint": Hu & Kwok (2015), Section III-E: all new points of the call
        join the graph together and their rows solve ``L_OO G_O = -L_OI G_I``
        (:func:`kernelforms.extend.extend`); rows then depend on the batch.
    method_options : dict or None, default None
        Passed to the method (e.g. ``{"rank": 5, "max_iter": 500}``).
    random_state : int, RandomState, Generator or None, default None
        Seeds the pair sampling and the solver (an int is used as the seed of both).
    unlabeled : label value or None, default None
        Points whose ``y`` equals it are unlabelled: no pairs are drawn for them (they
        still shape the graph and get learned rows), e.g. ``unlabeled=-1`` as in
        scikit-learn's semi-supervised estimators.  None: every value of ``y`` is a class.
    verbose : int >= 0, default 0
        1 or more: the method prints its iteration table (hand-written solvers) and the
        fit ends with one line: method, status, iterations, objective, certified gap
        (the Lagrangian certificate of :mod:`kernelforms.certificate`) and time.
    n_jobs : int or None, default None
        Threads of :meth:`transform`'s neighbour index; -1 all cores.  None: one thread up
        to 5,000 points, all cores above.  The graph's search at :meth:`fit` is
        :func:`kernelforms.graphs.knn_laplacian`'s, with its own rule (one thread up to
        5,000 points, all cores above).
    graph_method : {"auto", "exact", "approx"}, default "auto"
        The neighbour search of the kNN graph (``knn_laplacian``'s ``method``): "exact",
        "approx" (a (1 + eps)-approximate kd-tree search and one round of neighbours of
        neighbours) or "auto" (exact up to 200,000 points, approximate above).

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
        The learned factor ``G`` of the training points (``K = G G^T``).
    n_components_ : int
    result_ : Result
        The solve (status, objective, time, ...).
    problem_ : Problem
    pairs_ : Pairs or None
        The pairs used (None for mvu / regmvu).
    method_ : str
        The method used ("auto" resolved).
    start_ : str
        lowrank's start: "class indicators" of ``y``, "warm start from gamma = g" (the
        solution of an earlier fit on the same data and parameters at the largest smaller
        gamma: a grid over gamma solves along the path), or "method default".
    sigma_ : float
        Gaussian width of the graph weights.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string column names.

    Notes
    -----
    ``pairs=`` index the rows of the ``X`` given to :meth:`fit`.  Cross-validation
    (``GridSearchCV``, ``cross_val_score``) fits on row subsets, so there pass labels
    ``y`` (pairs are drawn from each training fold), not ``pairs``.
    """

    _parameter_constraints: dict = {
        "problem": [StrOptions(PROBLEMS)],
        "method": [_MethodName()],
        # the problems' build parameters (k, delta, graph_method, gamma, loss, ...): from
        # their schemas
        **problem_parameters(),
        "extension": [StrOptions({"harmonic", "mean", "joint"})],
        "method_options": [_Options(), None],
        "random_state": [_RandomState(), None],
        "unlabeled": [_Label(), None],
        "verbose": [Interval(numbers.Integral, 0, None, closed="left")],
        "n_jobs": [Interval(numbers.Integral, 1, None, closed="left"),
                   Interval(numbers.Integral, -1, -1, closed="both"), None],
    }

    def __init__(self, problem: str = "pcp", method: str = "auto", *, gamma: Any = "auto",
                 n_neighbors: int = 5, delta: float | None = None, loss: str = "hinge",
                 b: float = 1.0, m_basis: int = 10, nu: float = 1.0, n_must: int | None = None,
                 n_cannot: int | None = None, per_class: bool = False, inequality: bool = False,
                 extension: str = "mean",
                 method_options: dict | None = None, random_state: Any = None,
                 unlabeled: Any = None, verbose: int = 0, n_jobs: int | None = None,
                 graph_method: str = "auto") -> None:
        self.problem = problem
        self.method = method
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.delta = delta
        self.loss = loss
        self.b = b
        self.m_basis = m_basis
        self.nu = nu
        self.n_must = n_must
        self.n_cannot = n_cannot
        self.per_class = per_class
        self.inequality = inequality
        self.extension = extension
        self.method_options = method_options
        self.random_state = random_state
        self.unlabeled = unlabeled
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.graph_method = graph_method

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        supervised = PROBLEMS.get(self.problem, (True, ""))[0] if isinstance(self.problem, str) else True
        tags.target_tags.required = supervised
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        # "joint" rows depend on the batch passed to transform
        tags.non_deterministic = self.extension == "joint"
        return tags

    # ------------------------------------------------------------------ fit
    def _method_name(self) -> str:
        m = self.method.strip().lower()
        if m != "auto":
            return m
        if self.problem == "npkl" and self.loss == "logistic":
            return "lowrank"  # bcd's row update has no closed form for it (a smooth loss)
        return AUTO_METHODS[self.problem]

    def _k(self) -> int:
        """The kNN graph's k: ``n_neighbors``, or the problem's default for None."""
        if self.n_neighbors is None:
            return int(parameters(self.problem)["k"].default)
        return int(self.n_neighbors)

    def _pairs(self, y: Any, pairs: Any, n: int, seed: int):
        """The Pairs of the fit: explicit ``pairs`` or drawn from ``y``."""
        from .data.pairs import Pairs, sample_pairs

        name = type(self).__name__
        if pairs is not None:
            if isinstance(pairs, Pairs):
                p = pairs
            elif isinstance(pairs, tuple) and len(pairs) == 2:
                p = Pairs(pairs[0], pairs[1], n=n)
            else:
                raise ProblemError(f"The 'pairs' argument of {name}.fit must be a "
                                   f"kernelforms Pairs or a (must, cannot) tuple of (k, 2) "
                                   f"index arrays. Got {type(pairs).__name__} instead.")
            if p.n is not None and p.n != n:
                raise ProblemError(f"The 'pairs' argument of {name}.fit was built for "
                                   f"n = {p.n} points but X has {n} rows; pairs index the rows "
                                   "of the X given to fit.")
            p.check_n(n)
            if len(p) == 0:
                raise ProblemError(f"The 'pairs' argument of {name}.fit is empty; give at "
                                   "least one must-link or cannot-link pair.")
            return p
        if y is None:
            raise ProblemError(
                f"{name}(problem={self.problem!r}) requires y to be passed, but the target y "
                "is None. Pass class labels y (pairs are drawn from them), explicit "
                "pairs=(must, cannot), or use an unsupervised problem ('mvu', 'regmvu').")
        from sklearn.utils.multiclass import type_of_target
        from sklearn.utils.validation import check_consistent_length, column_or_1d

        try:
            yy = column_or_1d(y, warn=False)
            check_consistent_length(np.zeros((n, 1)), yy)
        except (ValueError, TypeError) as exc:
            raise InputError(f"{name}: y must be a 1-d array of n = {n} class labels: {exc}") from exc
        labelled = np.arange(n)
        if self.unlabeled is not None:
            mark = np.broadcast_to(np.asarray(yy == self.unlabeled, dtype=bool), yy.shape)
            labelled = np.flatnonzero(~mark)
            if labelled.size < 2:
                raise ProblemError(f"{name}: y has {labelled.size} labelled point(s) (labels other "
                                   f"than unlabeled={self.unlabeled!r}); pairs need at least 2.")
            yy = yy[labelled]
        try:
            kind = type_of_target(yy)
        except (ValueError, TypeError) as exc:
            raise InputError(f"{name}: y must be a 1-d array of n = {n} class labels: {exc}") from exc
        if kind not in ("binary", "multiclass"):
            what = "Unknown label type" if kind == "unknown" else f"a {kind!r} target"
            raise InputError(f"{name}: y must hold class labels (pairs are drawn from them); "
                             f"got {what}. Bin a continuous target first, or "
                             "pass pairs=(must, cannot).")
        classes, inv = np.unique(yy, return_inverse=True)
        if classes.size < 2 and self.n_cannot != 0 and pairs is None:
            raise ProblemError(
                f"{name}: y has one class ({str(classes[0])!r}{' among the labelled points' if self.unlabeled is not None else ''}), "
                "so no cannot-link pair can be drawn and every must-link pair asks K_ij = 1: the "
                "learned kernel would put all points together. Pass labels of at least two "
                "classes, explicit pairs=(must, cannot), or n_cannot=0 to learn from must-links "
                "only.")
        counts = np.bincount(inv.ravel())
        m = yy.shape[0]
        same = int(np.sum(counts * (counts - 1) // 2))
        diff = m * (m - 1) // 2 - same
        default = int(round(0.6 * m))
        n_must = min(default, same) if self.n_must is None else int(self.n_must)
        n_cannot = min(default, diff) if self.n_cannot is None else int(self.n_cannot)
        if n_must + n_cannot == 0:
            raise ProblemError(f"{name}: no pairs to learn from (n_must = n_cannot = 0); "
                               "set n_must or n_cannot > 0.")
        if self.per_class:
            from .data.pairs import per_class_pairs

            p = per_class_pairs(inv.ravel(), seed=seed)  # (Wu et al. 2009: 20 per class and class pair)
        else:
            p = sample_pairs(inv.ravel(), n_must, n_cannot, seed=seed)
        if m == n:
            return p
        return Pairs(labelled[p.must], labelled[p.cannot], n=n)  # indices into X

    def _graph(self, X: np.ndarray, delta: float):
        """Gaussian kNN weights S, their degrees and the Laplacian: the graph
        :func:`kernelforms.graphs.knn_laplacian` builds (its neighbour search with
        ``graph_method``, one search for the graph and the Gaussian width, the same weights),
        with the width and the degrees kept for :meth:`transform`."""
        from .data.graphs import (SIGMA_NEIGHBORS, _check_method, _edges_from, _neighbours,
                                  _sigma_from, _symmetric_csr, laplacian_from_weights)

        n, k = X.shape[0], self._k()
        method = _check_method(type(self).__name__, self.graph_method, n)
        ks = min(SIGMA_NEIGHBORS, n - 1)
        _, ind = _neighbours(X, max(k, ks), method)
        sigma = _sigma_from(X, ind[:, :ks])
        edges, dist = _edges_from(X, ind[:, :k])
        s = np.exp(-0.5 * (dist / float(sigma)) ** 2)
        S = _symmetric_csr(n, edges[:, 0], edges[:, 1], s)
        deg = np.asarray(S.sum(axis=1)).ravel()
        return sigma, deg, laplacian_from_weights(S, delta=delta, normalized=True)

    def _path_key(self, X: np.ndarray, y: Any, seed: int) -> tuple:
        """What fixes the instance up to gamma: the data, labels, seed and every other
        parameter (the key of the gamma path's warm starts)."""
        import hashlib

        h = hashlib.sha1(np.ascontiguousarray(X).tobytes())
        h.update(np.asarray(y).astype(str).tobytes())
        params = {k: v for k, v in self.get_params(deep=False).items()
                  if k not in ("gamma", "verbose", "n_jobs", "random_state", "extension")}
        return (h.hexdigest(), seed, repr(sorted(params.items())))

    def gamma_value(self) -> float:
        """The pair-loss weight used: ``gamma``, or :data:`AUTO_GAMMA` for "auto"."""
        if isinstance(self.gamma, str):
            return float(AUTO_GAMMA.get(self.problem, 1.0))
        return float(self.gamma)

    def _label_start(self, y: Any, n: int, seed: int) -> np.ndarray:
        """lowrank's start: the class indicators of ``y`` (the ideal kernel ``K_ij = 1`` within
        a class, 0 across, which the pair loss pulls towards) padded with small random
        columns to :data:`START_COLUMNS` (or ``c + 2`` for ``c`` classes, if more);
        unlabelled points start near 0.

        From a random start at rank 8 lowrank first converges at that rank, then grows it
        4 columns at a time to the optimum's, most iterations spent at ranks that are too
        small: at gamma = 100, 2,000 pendigits points took 4,814 L-BFGS iterations (299 from
        the indicators), a4a (4,781 points, optimum of rank 17) 7,081 at ranks 4, 8, 12, 16,
        18 from 4 columns and 1,334 from 20."""
        from sklearn.utils.validation import column_or_1d

        yy = column_or_1d(y, warn=False)
        lab = np.ones(n, dtype=bool)
        if self.unlabeled is not None:
            lab = ~np.broadcast_to(np.asarray(yy == self.unlabeled, dtype=bool), yy.shape)
        classes, inv = np.unique(yy[lab], return_inverse=True)
        c = classes.size
        rng = np.random.default_rng(seed)
        G0 = 1e-2 * rng.standard_normal((n, max(c + 2, START_COLUMNS)))
        G0[np.flatnonzero(lab), inv.ravel()] += 1.0
        return G0[:, :min(G0.shape[1], n)]

    def _build(self, X: np.ndarray, pairs: Any, L: Any):
        from .problems import MVU, RegMVU
        from .problems.factory import on_graph

        kind = self.problem
        if kind not in ("mvu", "regmvu"):  # the pair kinds, on the graph built by fit
            values = {name: getattr(self, RENAMED.get(name, name)) for name in parameters(kind)}
            return on_graph(kind, L, pairs, {**values, "gamma": self.gamma_value()})
        if kind == "mvu":
            return MVU.from_data(X, k=self._k(), **({"equality": False} if self.inequality else {}))
        return RegMVU.from_data(X, k=self._k(), m_basis=self.m_basis, nu=self.nu)

    def fit(self, X: Any, y: Any = None, pairs: Any = None) -> "KernelLearner":
        """Learn the kernel of the training points.

        Parameters
        ----------
        X : array-like (n_samples, n_features)
        y : array-like (n_samples,) of class labels, optional
            Pairs are drawn from it (ignored by mvu / regmvu, and when ``pairs`` is given).
        pairs : Pairs or (must, cannot), optional
            Explicit must-/cannot-link pairs, indices into the rows of ``X``.

        Returns
        -------
        self

        Raises
        ------
        OptionError
            A bad constructor parameter (before any work).
        InputError
            Bad ``X`` or ``y``.
        ProblemError, NotApplicable, SolverNotFound
            The problem cannot be built, or the method cannot solve it.
        SolverError
            The method returned no finite kernel (e.g. infeasible).  A kernel with a
            status other than optimal / converged (max_iter, timeout, numerical_error,
            optimal_inaccurate) is kept with a :class:`ConvergenceWarning`;
            ``result_.status`` says which.
        """
        from .methods import get_method, solve

        _validate_parameters(self)
        name = type(self).__name__
        method = self._method_name()
        get_method(method)  # an unknown method fails here, before any work
        Xv = _validate_X(self, X, reset=True)
        n = Xv.shape[0]
        if self._k() >= n:
            raise ProblemError(f"The 'n_neighbors' parameter of {name} must be < the number of "
                               f"training points n = {n}. Got {self._k()} instead.")
        if self.problem in ("regpcp", "regmvu") and self.m_basis >= n:
            raise ProblemError(f"The 'm_basis' parameter of {name} must be < the number of "
                               f"training points n = {n}. Got {self.m_basis} instead.")
        supervised = PROBLEMS[self.problem][0]
        if not supervised and pairs is not None:
            raise ProblemError(f"{name}(problem={self.problem!r}) is unsupervised and takes no "
                               "pairs; use problem='pcp' or 'npkl' to learn from pairs.")
        seed = _seed(self.random_state)
        P = self._pairs(y, pairs, n, seed) if supervised else None
        delta = (0.01 if self.problem == "npkl" else 0.0) if self.delta is None else float(self.delta)
        with _few_threads(n):
            sigma, deg, L = self._graph(Xv, delta)
        problem = self._build(Xv, P, L)
        mopts = dict(self.method_options or {})
        self.start_ = "method default"
        key = None
        if (method == "lowrank" and self.problem in ("pcp", "npkl") and "init" not in mopts
                and "rank" not in mopts and pairs is None and y is not None):
            key = self._path_key(Xv, y, seed)
            prev = _PATH_CACHE.get(key)
            g = self.gamma_value()
            below = [] if prev is None else [h for h in prev if h < g]
            if below:  # the gamma path: start from the solution at the next smaller gamma
                h = max(below)
                mopts["init"], self.start_ = prev[h], f"warm start from gamma = {h:g}"
            else:
                mopts["init"], self.start_ = self._label_start(y, n, seed), "class indicators"
        if method == "lowrank" and self.problem == "pcp" and "precondition" not in mopts:
            # rows scaled by their Hessian blocks (lowrank's precondition option): fewer
            # iterations at large gamma; not yet the solver's default (on NPKL-square at
            # rank 15 a scaled run ended numerical_error where plain L-BFGS converged)
            mopts["precondition"] = True
        if method == "lowrank" and "stop_gap" not in mopts:
            # stop when the Lagrangian certificate proves the point within lowrank's converged
            # promise (1e-4) once the objective has stalled: the gradient rule waited for a
            # nearly flat direction of the factor (pendigits 7,494 at gamma = 100: up to 4,780
            # iterations where the objective had stalled after ~400)
            mopts["stop_gap"] = 1e-4
        if method == "lowrank" and "certificate" not in mopts:
            # lowrank's own dual-slack diagnostic (an ARPACK run on the n x n slack) is not
            # what the estimator reports; verbose computes the Lagrangian certificate instead
            # (ARPACK took 291 s of a 310 s fit on 2,000 pendigits points at gamma = 100)
            mopts["certificate"] = False
        from .solvers.base import IterativeSolver

        if self.verbose and "verbose" not in mopts and isinstance(get_method(method), IterativeSolver):
            mopts["verbose"] = True
        import time as _time

        t0 = _time.perf_counter()
        result = solve(problem, method, seed=seed, **mopts)
        status = result.status.value
        usable = (result.factor is not None and np.all(np.isfinite(result.factor))
                  and np.isfinite(result.objective)
                  and (result.status.has_solution or status == "numerical_error"))
        if not usable:
            raise SolverError(f"{name}.fit: method {method!r} returned no usable kernel (status "
                              f"{status}: {result.message}). Try another method "
                              "(method='sdp' for small n) or method_options.")
        if status not in ("optimal", "converged"):
            # the statuses stay as reported (result_.status); the embedding is the last
            # iterate, which is what a downstream classifier can still use
            warnings.warn(f"{name}.fit: method {method!r} ended with status {status} "
                          f"({result.message}); the embedding is its last iterate.",
                          ConvergenceWarning, stacklevel=2)
        if self.verbose:
            from .isolation import attach_certificate

            if result.certified_gap is None:  # (the run's own, e.g. lowrank's certified stop, stands)
                attach_certificate(problem, result)
            gap = result.certified_gap
            print(f"{name}: {method} {status}, {result.iterations} iterations, objective "
                  f"{result.objective:.10g}, certified gap "
                  + (f"{gap:.2g}" if gap is not None else f"none ({result.certificate_note or 'no bound'})")
                  + f", {_time.perf_counter() - t0:.1f} s", flush=True)
        if key is not None and status in ("optimal", "converged"):
            _PATH_CACHE.setdefault(key, {})[self.gamma_value()] = result.factor
            _PATH_CACHE.move_to_end(key)
            while len(_PATH_CACHE) > PATH_CACHE_SIZE:
                _PATH_CACHE.popitem(last=False)
        self.embedding_ = _principal_axes(result.factor)
        self.n_components_ = self._n_features_out = self.embedding_.shape[1]
        self.result_, self.problem_, self.pairs_, self.method_ = result, problem, P, method
        self.sigma_, self.delta_, self._degrees = float(sigma), delta, deg
        self._X_fit = Xv.copy()
        from sklearn.neighbors import NearestNeighbors

        with _few_threads(n):  # the neighbour index of transform
            self._nn = NearestNeighbors(n_neighbors=self._k(), n_jobs=self.n_jobs).fit(self._X_fit)
        return self

    def fit_transform(self, X: Any, y: Any = None, pairs: Any = None) -> np.ndarray:
        """:meth:`fit`, then the learned rows of the training points (``embedding_``)."""
        return self.fit(X, y, pairs=pairs).embedding_.copy()

    # ------------------------------------------------------------------ transform
    def transform(self, X: Any) -> np.ndarray:
        """The embedding of ``X``: rows ``g`` with ``K(x, x') = g . g'``.

        A row of ``X`` equal to a training point gets its learned row; any other row the
        out-of-sample extension chosen by ``extension`` (see the class docstring).

        Parameters
        ----------
        X : array-like (m, n_features)

        Returns
        -------
        ndarray (m, n_components_)
        """
        _check_fitted(self, "embedding_", "transform")
        Xq = _validate_X(self, X, reset=False)
        G, Xf = self.embedding_, self._X_fit
        with _few_threads(Xf.shape[0] + Xq.shape[0]):
            dist, ind = self._nn.kneighbors(Xq)
        same = np.all(Xq[:, None, :] == Xf[ind], axis=2)  # exact training points
        hit = same.any(axis=1)
        out = np.empty((Xq.shape[0], G.shape[1]))
        out[hit] = G[ind[hit, np.argmax(same[hit], axis=1)]]
        new = ~hit
        if np.any(new):
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                if self.extension == "joint":
                    # a point whose every graph weight underflows to 0 (a = d^2 / (2 sigma^2)
                    # above 745) is not joined to the graph: its row is the limit 0
                    a = (np.min(dist[new], axis=1) / self.sigma_)**2 / 2.0
                    alone = ~(a <= 745.0)
                    rows = np.zeros((int(new.sum()), G.shape[1]))
                    if np.any(~alone):
                        rows[~alone] = self._joint(Xq[new][~alone])
                    out[new] = rows
                else:
                    out[new] = self._harmonic(dist[new], ind[new])
        return out

    def _project(self, g: np.ndarray) -> np.ndarray:
        if self.problem != "npkl" or self.loss != "linear":
            return g
        nr = np.sqrt(np.einsum("ij,ij->i", g, g))
        return g * np.minimum(1.0, self.b / np.maximum(nr, 1e-300))[:, None]

    def _harmonic(self, dist: np.ndarray, ind: np.ndarray) -> np.ndarray:
        """Per-point extension over the point's kNN among the training points.

        A point so far away that its distances overflow (``inf``; e.g. coordinates near
        1e300) gets the limit of the rule: the zero row ("harmonic": rows shrink like
        ``exp(-D^2 / (4 sigma^2))``) or the plain mean of its neighbours' rows ("mean")."""
        dist = np.asarray(dist, dtype=float)
        far = ~np.all(np.isfinite(dist), axis=1)
        if np.any(far):
            out = np.empty((dist.shape[0], self.embedding_.shape[1]))
            if np.any(~far):
                out[~far] = self._harmonic(dist[~far], ind[~far])
            out[far] = (0.0 if self.extension != "mean"
                        else self._project(self.embedding_[ind[far]].mean(axis=1)))
            return out
        # distances are finite, squares may still overflow: those rows' weights relative to
        # the nearest, exp(-(d_j - d_0)(d_j + d_0) / (2 sigma^2)), and the overall factor
        # exp(-a_0 / 2) of the harmonic rule underflows to 0
        huge = ~np.all(np.isfinite(dist**2 / (2.0 * self.sigma_**2)), axis=1)
        if np.any(huge):
            out = np.zeros((dist.shape[0], self.embedding_.shape[1]))
            if np.any(~huge):
                out[~huge] = self._harmonic(dist[~huge], ind[~huge])
            if self.extension == "mean":
                d, d0 = dist[huge], dist[huge].min(axis=1, keepdims=True)
                w = np.exp(-(d - d0) * ((d + d0) / (2.0 * self.sigma_**2)))
                w[~np.isfinite(w)] = 0.0
                out[huge] = self._project(np.einsum("mk,mkr->mr", w / w.sum(axis=1, keepdims=True),
                                                    self.embedding_[ind[huge]]))
            return out
        a = dist**2 / (2.0 * self.sigma_**2)
        a0 = a.min(axis=1, keepdims=True)
        w = np.exp(-(a - a0))  # s_j / exp(-a0), in (0, 1], the nearest is 1
        G = self.embedding_
        if self.extension == "mean":
            coef = w / w.sum(axis=1, keepdims=True)
        else:
            # s_j / sqrt(d * d_j') with s = w e^{-a0}, d = e^{-a0} sum(w): no underflow
            scale = np.exp(-0.5 * a0)
            dj = self._degrees[ind] + w * np.exp(-a0)
            coef = w * scale / np.sqrt(w.sum(axis=1, keepdims=True) * dj) / (1.0 + self.delta_)
        return self._project(np.einsum("mk,mkr->mr", coef, G[ind]))

    def _joint(self, Xn: np.ndarray) -> np.ndarray:
        from .data.graphs import knn_laplacian

        n0 = self._X_fit.shape[0]
        L = knn_laplacian(np.vstack([self._X_fit, Xn]), k=self._k(), delta=self.delta_,
                          sigma=self.sigma_)
        b = self.b if (self.problem == "npkl" and self.loss == "linear") else None
        return extend(self.embedding_, np.arange(n0, n0 + Xn.shape[0]), L, method="block", b=b)

    def kernel(self, X: Any = None, Y: Any = None) -> np.ndarray:
        """The learned kernel ``K(X, Y) = transform(X) transform(Y)^T`` (training points
        when X is None; ``Y`` defaults to the training points), e.g. for
        ``SVC(kernel="precomputed")``."""
        _check_fitted(self, "embedding_", "kernel")
        A = self.embedding_ if X is None else self.transform(X)
        B = self.embedding_ if Y is None else self.transform(Y)
        return A @ B.T


#: directions of the factor whose singular value is below this fraction of the largest are
#: dropped from ``embedding_`` (their share of the kernel, ``s_i^2 / s_1^2``, below 1e-10)
DROP_RTOL = 1e-5


def _principal_axes(G: np.ndarray, rank: Any = None) -> np.ndarray:
    """``U S`` of the thin SVD of G (same kernel G G^T), numerically zero directions
    dropped (singular values below :data:`DROP_RTOL` of the largest, and beyond the
    result's numerical ``rank`` when given), each column's largest entry made positive: a
    canonical embedding."""
    G = np.asarray(G, dtype=float)
    U, s, _ = np.linalg.svd(G, full_matrices=False)
    keep = s > DROP_RTOL * max(float(s[0]) if s.size else 0.0, 1e-300)
    if isinstance(rank, (int, np.integer)) and not isinstance(rank, bool) and rank >= 1:
        keep[int(rank):] = False
    if not np.any(keep):
        keep[:1] = True
    E = U[:, keep] * s[keep]
    idx = np.argmax(np.abs(E), axis=0)
    sgn = np.sign(E[idx, np.arange(E.shape[1])])
    sgn[sgn == 0] = 1.0
    return E * sgn


class ConstrainedKernelClustering(ClusterMixin, BaseEstimator):
    """Constrained clustering: learn a kernel from labels or pairs, then kernel k-means.

    Kernel k-means on ``K = G G^T`` is k-means on the rows of the factor ``G``
    (:func:`kernelforms.evaluate.kernel_kmeans`); here ``G`` is the embedding a
    :class:`KernelLearner` learns from the side information.

    Parameters
    ----------
    n_clusters : int >= 1 or None, default None
        None: the number of classes in ``y`` (an error without ``y``).
    learner : KernelLearner or None, default None
        The kernel learner (cloned at fit); None: ``KernelLearner()``.  Its parameters
        are reachable as ``learner__gamma`` etc. in ``GridSearchCV``.
    n_init : int >= 1, default 10
        k-means restarts (the best inertia is kept).
    random_state : int, RandomState, Generator or None, default None
        Seeds k-means (and the learner, when its own ``random_state`` is None).

    Attributes
    ----------
    labels_ : ndarray (n_samples,)
    learner_ : KernelLearner
        The fitted learner.
    embedding_ : ndarray (n_samples, n_components)
    cluster_centers_ : ndarray (n_clusters, n_components)
        Centres in the embedding.
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "learner": [_Estimator(), None],
        "n_init": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": [_RandomState(), None],
    }

    def __init__(self, n_clusters: int | None = None, *, learner: Any = None, n_init: int = 10,
                 random_state: Any = None) -> None:
        self.n_clusters = n_clusters
        self.learner = learner
        self.n_init = n_init
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        learner = self.learner if self.learner is not None else KernelLearner()
        try:
            inner = learner.__sklearn_tags__()
            tags.target_tags.required = inner.target_tags.required
        except Exception:  # noqa: BLE001 - a foreign learner: keep the defaults
            pass
        tags.input_tags.sparse = False
        return tags

    def fit(self, X: Any, y: Any = None, pairs: Any = None) -> "ConstrainedKernelClustering":
        """Learn the kernel from ``y`` or ``pairs`` and cluster the training points.

        Parameters
        ----------
        X : array-like (n_samples, n_features)
        y : array-like (n_samples,) of class labels, optional
        pairs : Pairs or (must, cannot), optional

        Returns
        -------
        self
        """
        from sklearn.base import clone
        from sklearn.cluster import KMeans

        _validate_parameters(self)
        learner = clone(self.learner if self.learner is not None else KernelLearner())
        seed = _seed(self.random_state)
        if "random_state" in learner.get_params() and learner.get_params()["random_state"] is None:
            learner.set_params(random_state=seed)
        n_clusters = self.n_clusters
        if n_clusters is None:
            if y is None:
                raise ProblemError(
                    f"{type(self).__name__}(n_clusters=None) takes the number of clusters from "
                    "the classes of y, so it requires y to be passed, but the target y is None; "
                    "pass y, or n_clusters and pairs.")
            classes = np.unique(np.asarray(y).ravel())
            mark = getattr(learner, "unlabeled", None)
            if mark is not None:
                classes = classes[~np.broadcast_to(np.asarray(classes == mark, dtype=bool), classes.shape)]
            n_clusters = int(classes.size)
        from sklearn.utils.validation import _num_samples

        try:
            n = _num_samples(X)
        except TypeError:
            n = None  # not array-like: the learner's validation says why
        if n is not None and n_clusters > n:
            raise ProblemError(f"The 'n_clusters' parameter of {type(self).__name__} must be <= "
                               f"the number of points n = {n}. Got {n_clusters} instead.")
        kw = {} if pairs is None else {"pairs": pairs}
        G = learner.fit(X, y, **kw).embedding_
        self.n_features_in_ = learner.n_features_in_
        if hasattr(learner, "feature_names_in_"):
            self.feature_names_in_ = learner.feature_names_in_
        km = KMeans(n_clusters=n_clusters, n_init=self.n_init, random_state=seed % (2**32))
        # small embeddings: thread start-up costs more than the k-means itself (8x measured
        # at n = 30, n_init = 10 on the loaded machine)
        with _few_threads(G.shape[0]):
            self.labels_ = km.fit_predict(G)
        self.learner_, self.embedding_, self.kmeans_ = learner, G, km
        self.cluster_centers_ = km.cluster_centers_
        return self

    def fit_predict(self, X: Any, y: Any = None, pairs: Any = None) -> np.ndarray:
        """:meth:`fit`, then ``labels_``."""
        return self.fit(X, y, pairs=pairs).labels_

    def predict(self, X: Any) -> np.ndarray:
        """Cluster of each row of ``X``: the nearest centre to its embedding
        (``learner_.transform``, the out-of-sample extension for new points)."""
        _check_fitted(self, "labels_", "predict")
        return self.kmeans_.predict(self.learner_.transform(X))


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """The scikit-learn checks an estimator of this module is expected to fail, with the
    reason, for ``check_estimator(est, expected_failed_checks=...)`` and
    ``parametrize_with_checks(..., expected_failed_checks=expected_failed_checks)``."""
    out: dict[str, str] = {}
    if isinstance(estimator, ConstrainedKernelClustering):
        reason = ("needs side information: the check fits without y or pairs, and "
                  "n_clusters=None takes the number of clusters from y")
        out["check_clustering"] = reason
    return out

