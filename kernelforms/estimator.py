"""A scikit-learn style front end to NPKL (SPEC.md P6) with out-of-sample extension.

>>> import kernelforms as kf
>>> from kernelforms.estimator import KernelLearner
>>> X, y = kf.datasets.load("iris")
>>> pairs = kf.pairs.sample_pairs(y[:75], 20, 20, seed=0)
>>> kl = KernelLearner(loss="square").fit(X[:75], pairs)      # doctest: +SKIP
>>> G_new = kl.transform(X[75:])                               # doctest: +SKIP

``fit`` learns the factor ``G`` (``K = G G^T``) of the in-sample points with the BCD
solver (method ``"bcd"``, or any method given); ``transform`` returns factor rows for
new points by seed 004's out-of-sample extension (Section III-E,
:func:`kernelforms.solvers.bcd.extend`): the new points are added to the kNN graph as
unlabeled points and their rows minimise ``tr(L K)`` with the in-sample rows fixed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ProblemError, param_error
from .solvers.bcd import extend

__all__ = ["KernelLearner", "extend"]


class KernelLearner:
    """Learn a nonparametric kernel from pairwise constraints; extend it to new points.

    Parameters
    ----------
    loss : {"hinge", "squared_hinge", "square", "linear"}, default "square"
        The loss of P6.
    gamma : float, default 1
        Weight of the loss.
    b : float, default 1
        Bound ``K_ii <= b^2`` (linear loss).
    k : int, default 5
        Neighbours of the kNN graph.
    delta : float, default 0.01
        Diagonal shift of the normalised Laplacian.
    method : str, default "bcd"
        Any method that solves NPKL (``kernelforms.solve`` names).
    extension : {"block", "sequential"}, default "block"
        Eq. 17 (all new rows at once) or eq. 13 (row by row) in :meth:`transform`.
    seed : int, default 0
    **options
        Passed to the method (e.g. ``rank=5``, ``eps=1e-6``).

    Attributes
    ----------
    result_ : Result
        The fit.
    factor_ : ndarray (n, r)
        In-sample factor rows.
    problem_ : NPKL
    """

    def __init__(self, loss: str = "square", gamma: float = 1.0, b: float = 1.0, k: int = 5,
                 delta: float = 0.01, method: str = "bcd", extension: str = "block",
                 seed: int = 0, **options: Any) -> None:
        self.loss, self.gamma, self.b, self.k, self.delta = loss, gamma, b, k, delta
        self.method, self.extension, self.seed, self.options = method, extension, seed, options

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"loss": self.loss, "gamma": self.gamma, "b": self.b, "k": self.k,
                "delta": self.delta, "method": self.method, "extension": self.extension,
                "seed": self.seed, **self.options}

    def fit(self, X, pairs) -> "KernelLearner":
        """Learn the in-sample kernel.

        Parameters
        ----------
        X : array-like (n, d)
        pairs : Pairs or (must, cannot)
            Indices into the rows of X.

        Returns
        -------
        self
        """
        from .methods import solve
        from .problems import NPKL

        if self.extension not in ("block", "sequential"):
            raise param_error("KernelLearner", "extension", "'block' or 'sequential'", self.extension)
        X = np.asarray(X, dtype=float)
        if X.ndim != 2:
            raise param_error("KernelLearner", "X", "a 2-D array (n, d)", f"shape {X.shape}")
        self.problem_ = NPKL.from_data(X, pairs, k=self.k, delta=self.delta, loss=self.loss,
                                       gamma=self.gamma, b=self.b)
        self.result_ = solve(self.problem_, self.method, seed=self.seed, **self.options)
        if self.result_.factor is None:
            raise ProblemError(f"KernelLearner.fit: method {self.method!r} returned no kernel "
                               f"(status {self.result_.status.value}: {self.result_.message})")
        self.X_ = X
        self.factor_ = self.result_.factor
        return self

    def fit_transform(self, X, pairs) -> np.ndarray:
        """:meth:`fit`, then the in-sample factor rows."""
        return self.fit(X, pairs).factor_

    def transform(self, X_new, *, eps: float = 1e-8, max_iter: int = 10000) -> np.ndarray:
        """Factor rows of new points (seed 004 Section III-E).

        The kNN Laplacian is rebuilt on ``[X_fit; X_new]`` (same ``k``, ``delta``); the
        in-sample rows stay fixed and the new rows solve the unlabeled-point problem.

        Parameters
        ----------
        X_new : array-like (n_new, d)

        Returns
        -------
        ndarray (n_new, r)
            ``K(new, new) = G G^T`` and ``K(new, fit) = G factor_^T``.
        """
        from .data.graphs import knn_laplacian

        if not hasattr(self, "factor_"):
            raise ProblemError("KernelLearner.transform called before fit.")
        Xn = np.asarray(X_new, dtype=float)
        if Xn.ndim != 2 or Xn.shape[1] != self.X_.shape[1]:
            raise param_error("KernelLearner.transform", "X_new",
                              f"a 2-D array with {self.X_.shape[1]} columns", f"shape {Xn.shape}")
        n0 = self.X_.shape[0]
        L = knn_laplacian(np.vstack([self.X_, Xn]), k=self.k, delta=self.delta)
        new = np.arange(n0, n0 + Xn.shape[0])
        b = self.b if self.loss == "linear" else None
        return extend(self.factor_, new, L, method=self.extension, eps=eps, max_iter=max_iter, b=b)
