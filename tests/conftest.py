"""Shared small instances for the test suite, and one BLAS thread for the run.

The suite's problems are small: a threaded BLAS costs more than it gives there, and on a
machine busy with other work its spinning threads slowed the run by half. Unless the
environment names a BLAS thread count, the run (and the solver processes it starts) use one
thread; a count the environment names is kept, so the suite runs under any BLAS setting
(tests/test_inputs_and_fingerprints.py and test_determinism_fork.py set their own counts in
fresh interpreters).
"""

from __future__ import annotations

import os

_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_ONE_THREAD = not any(v in os.environ for v in _BLAS_VARS)
if _ONE_THREAD:
    for _v in _BLAS_VARS:
        os.environ[_v] = "1"  # children started from here (forkserver, subprocesses) inherit it

import numpy as np  # noqa: E402
import pytest

import kernelforms as kf  # noqa: E402

if _ONE_THREAD:  # numpy may have been imported before this file (a plugin): limit it too
    from threadpoolctl import threadpool_limits

    _LIMITS = threadpool_limits(1)


@pytest.fixture(scope="session")
def blobs():
    """30 points in 3 well separated classes (2-D), deterministic."""
    rng = np.random.default_rng(7)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    y = np.repeat(np.arange(3), 10)
    X = centers[y] + rng.normal(scale=0.6, size=(30, 2))
    return X, y


@pytest.fixture(scope="session")
def small_pcp(blobs):
    X, y = blobs
    return kf.PCP.from_data(X, kf.pairs.sample_pairs(y, 12, 12, seed=1))


@pytest.fixture()
def rank2_point(monkeypatch):
    """P1 on 80 two-Gaussian points, admm stopped after 20 iterations at rank 2 (negative
    curvature), certified by the plain Lanczos path."""
    import warnings

    from kernelforms.data.datasets import two_gaussians
    from kernelforms.data.pairs import sample_pairs

    X, y = two_gaussians(80, seed=1)
    p = kf.PCP.from_data(X, sample_pairs(y, seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(p, "admm", rank=2, max_iter=20, polish=False, seed=1)
    import kernelforms.certificate as C

    monkeypatch.setattr(C, "PLAIN_LANCZOS_ABOVE", 50)
    return p, np.asarray(res.kernel.G)


#: Clarabel's optimum of the fixture's problem (sdp:clarabel, status optimal)
RANK2_OPTIMUM = 6.397173626734933


def three_negative_matrix(n: int, seed: int):
    """A sparse symmetric ``n x n`` matrix with three negative eigenvalues: a kNN Laplacian of
    3-D points, perturbed, shifted between its third and fourth eigenvalues."""
    import scipy.sparse as sp

    from kernelforms.data.graphs import knn_laplacian

    rng = np.random.default_rng(seed)
    L = knn_laplacian(rng.standard_normal((n, 3)), k=5)
    E = sp.random(n, n, density=3.0 / n, random_state=seed + 1)
    A = (L + 1e-3 * (E + E.T) - 2e-3 * sp.identity(n)).tocsr()
    w = np.linalg.eigvalsh(A.toarray())
    return (A - 0.5 * (w[2] + w[3]) * sp.identity(n)).tocsr()  # three negative eigenvalues
