"""Evaluating a learned kernel: clustering and classification scores.

Every function takes the kernel as its factor ``G`` (``K = G G^T``), so nothing
here forms an ``n x n`` matrix.

* :func:`kernel_kmeans` -- kernel k-means on ``K = G G^T``, which is plain k-means
  on the rows of ``G`` (the feature map of ``K`` restricted to the data).
* :func:`pairwise_accuracy` -- the Rand index (the "pairwise accuracy" of Hu & Kwok 2013,
  Table 2), computed from the contingency table in ``O(n + c1 c2)``.
* :func:`nmi` -- normalised mutual information.
* :func:`knn_accuracy` -- k-nearest-neighbour accuracy in the feature space of ``K``.

The estimator form of :func:`kernel_kmeans` is
:class:`kernelforms.estimator.ConstrainedKernelClustering` (learn the kernel from labels
or pairs, then cluster; ``predict`` for new points).  See docs/estimator.md.
"""

from __future__ import annotations

import numpy as np

from .errors import param_error

__all__ = ["kernel_kmeans", "pairwise_accuracy", "nmi", "knn_accuracy", "contingency"]


def _factor(name: str, factor, owner: str) -> np.ndarray:
    G = getattr(factor, "G", factor)  # accept LowRank
    G = np.asarray(G, dtype=float)
    if G.ndim == 1:
        G = G[:, None]
    if G.ndim != 2 or G.shape[0] == 0:
        raise param_error(owner, name, "a 2-d array (n, r) with n >= 1", getattr(G, "shape", G))
    if not np.all(np.isfinite(G)):
        raise param_error(owner, name, "a finite array", "an array with NaN or inf")
    return G


def _labels(name: str, y, owner: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        raise param_error(owner, name, "a 1-d array of labels", f"shape {y.shape}")
    return y


def kernel_kmeans(factor, n_clusters: int, *, n_init: int = 10, seed: int = 0) -> np.ndarray:
    """Kernel k-means on ``K = G G^T``: k-means on the rows of the factor.

    Parameters
    ----------
    factor : array_like (n, r) or LowRank
        The factor ``G`` of the kernel.
    n_clusters : int
        Number of clusters, ``1 <= n_clusters <= n``.
    n_init : int, default 10
        Number of k-means restarts (the best inertia is kept).
    seed : int, default 0
        Seed of the k-means initialisation.

    Returns
    -------
    labels : ndarray of int, shape (n,)

    Raises
    ------
    ProblemError
        Bad factor or ``n_clusters``.

    Examples
    --------
    >>> import numpy as np
    >>> G = np.array([[0.0, 1.0], [0.1, 1.0], [1.0, 0.0], [1.0, 0.1]])
    >>> labels = kernel_kmeans(G, 2)
    >>> bool(labels[0] == labels[1] and labels[2] == labels[3] and labels[0] != labels[2])
    True
    """
    from sklearn.cluster import KMeans

    G = _factor("factor", factor, "kernel_kmeans")
    n = G.shape[0]
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, (int, np.integer)) or not 1 <= n_clusters <= n:
        raise param_error("kernel_kmeans", "n_clusters", f"an int in [1, n={n}]", n_clusters)
    if isinstance(n_init, bool) or not isinstance(n_init, (int, np.integer)) or n_init < 1:
        raise param_error("kernel_kmeans", "n_init", "an int >= 1", n_init)
    km = KMeans(n_clusters=int(n_clusters), n_init=int(n_init), random_state=int(seed))
    return km.fit_predict(G).astype(int)


def contingency(y_true, y_pred) -> np.ndarray:
    """Contingency table ``N[a, b] = #{i : y_true[i] = a-th class, y_pred[i] = b-th class}``.

    Parameters
    ----------
    y_true, y_pred : array_like (n,)
        Two labelings of the same points (any hashable, sortable labels).

    Returns
    -------
    ndarray of int, shape (classes in y_true, classes in y_pred)
    """
    a = _labels("y_true", y_true, "contingency")
    b = _labels("y_pred", y_pred, "contingency")
    if a.shape != b.shape:
        raise param_error("contingency", "y_pred", f"an array of the same length as y_true ({a.size})", b.size)
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    ia, ib = ia.ravel(), ib.ravel()
    ka = int(ia.max()) + 1 if ia.size else 0
    kb = int(ib.max()) + 1 if ib.size else 0
    return np.bincount(ia * kb + ib, minlength=ka * kb).reshape(ka, kb)


def pairwise_accuracy(y_true, y_pred) -> float:
    """Rand index: the fraction of point pairs on which two labelings agree.

    A pair ``(i, j)``, ``i < j``, counts as agreeing when both labelings put ``i`` and
    ``j`` in the same cluster, or both put them in different clusters.  This is the
    "pairwise accuracy" of Hu & Kwok (2013), Table 2.  Computed from the contingency table
    ``N`` with row sums ``a`` and column sums ``b``:

    ``agree = C(n,2) + 2 sum C(N_ab, 2) - sum C(a, 2) - sum C(b, 2)``,

    in ``O(n + c1 c2)`` time, never ``O(n^2)``.

    Parameters
    ----------
    y_true, y_pred : array_like (n,)

    Returns
    -------
    float in [0, 1] (1.0 when n < 2).
    """
    N = contingency(y_true, y_pred).astype(np.float64)
    n = N.sum()
    if n < 2:
        return 1.0

    def c2(x):
        return float(np.sum(x * (x - 1.0)) / 2.0)

    total = n * (n - 1.0) / 2.0
    agree = total + 2.0 * c2(N) - c2(N.sum(axis=1)) - c2(N.sum(axis=0))
    return agree / total


def nmi(y_true, y_pred) -> float:
    """Normalised mutual information ``I(A;B) / sqrt(H(A) H(B))``.

    Parameters
    ----------
    y_true, y_pred : array_like (n,)

    Returns
    -------
    float in [0, 1]; 1.0 when both labelings have a single class, 0.0 when only
    one of them does.
    """
    N = contingency(y_true, y_pred).astype(np.float64)
    n = N.sum()
    if n == 0:
        return 1.0
    P = N / n
    pa, pb = P.sum(axis=1), P.sum(axis=0)
    ha = -float(np.sum(pa[pa > 0] * np.log(pa[pa > 0])))
    hb = -float(np.sum(pb[pb > 0] * np.log(pb[pb > 0])))
    if ha == 0.0 and hb == 0.0:
        return 1.0
    if ha == 0.0 or hb == 0.0:
        return 0.0
    nz = P > 0
    mi = float(np.sum(P[nz] * np.log(P[nz] / np.outer(pa, pb)[nz])))
    return float(np.clip(mi / np.sqrt(ha * hb), 0.0, 1.0))


def knn_accuracy(factor_train, y_train, factor_test, y_test, k: int = 1) -> float:
    """Accuracy of the k-nearest-neighbour classifier in the feature space of ``K``.

    The squared kernel distance ``K_ii + K_jj - 2 K_ij`` between two points is the
    squared Euclidean distance between their factor rows, so this is Euclidean kNN on
    the rows of ``G`` (train rows and test rows from the same learned factor).

    Parameters
    ----------
    factor_train : array_like (n_train, r)
    y_train : array_like (n_train,)
    factor_test : array_like (n_test, r)
    y_test : array_like (n_test,)
    k : int, default 1
        Number of neighbours (majority vote), ``1 <= k <= n_train``.

    Returns
    -------
    float in [0, 1]
    """
    from sklearn.neighbors import KNeighborsClassifier

    Gtr = _factor("factor_train", factor_train, "knn_accuracy")
    Gte = _factor("factor_test", factor_test, "knn_accuracy")
    ytr = _labels("y_train", y_train, "knn_accuracy")
    yte = _labels("y_test", y_test, "knn_accuracy")
    if Gtr.shape[1] != Gte.shape[1]:
        raise param_error("knn_accuracy", "factor_test", f"an array with {Gtr.shape[1]} columns", Gte.shape)
    if ytr.size != Gtr.shape[0]:
        raise param_error("knn_accuracy", "y_train", f"{Gtr.shape[0]} labels", ytr.size)
    if yte.size != Gte.shape[0]:
        raise param_error("knn_accuracy", "y_test", f"{Gte.shape[0]} labels", yte.size)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= Gtr.shape[0]:
        raise param_error("knn_accuracy", "k", f"an int in [1, n_train={Gtr.shape[0]}]", k)
    clf = KNeighborsClassifier(n_neighbors=int(k)).fit(Gtr, ytr)
    return float(np.mean(clf.predict(Gte) == yte))
