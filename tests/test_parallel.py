"""Sparse products on several cores (kernelforms._parallel): the same numbers as scipy's
serial product, and the thread count's environment variable."""

import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import aslinearoperator

from kernelforms import _parallel
from kernelforms._parallel import ENV, ParallelCSR, parallel, threads


def _matrix(n=3000, density=0.01, seed=0):
    A = sp.random(n, n, density=density, random_state=seed, format="csr")
    return (A + A.T).tocsr()


@pytest.fixture
def small_work(monkeypatch):
    """Threads from a few thousand multiply-adds on, and 3 of them (any machine)."""
    monkeypatch.setattr(_parallel, "MIN_WORK", 1000)
    monkeypatch.setenv(ENV, "3")


def test_products_are_bitwise_those_of_scipy(small_work):
    A = _matrix()
    P = parallel(A)
    assert isinstance(P, ParallelCSR) and P.n_threads == 3 and P.shape == A.shape
    rng = np.random.default_rng(1)
    x, X = rng.standard_normal(A.shape[0]), rng.standard_normal((A.shape[0], 5))
    assert np.array_equal(P @ x, A @ x)
    assert np.array_equal(P @ X, A @ X)
    assert np.array_equal(P @ np.asfortranarray(X), A @ X)  # any memory layout
    op = aslinearoperator(P)
    assert np.array_equal(op.matvec(x), A @ x) and np.array_equal(op.matmat(X), A @ X)
    # a second product reuses the pool and gives the same numbers
    assert np.array_equal(P @ x, A @ x)


def test_other_inputs_are_converted_or_left_alone(small_work):
    A = _matrix(seed=2)
    x = np.random.default_rng(3).standard_normal(A.shape[0])
    # CSC (converted), int64 indices, duplicate entries (taken as they are): same product
    B = sp.csr_matrix((A.data, A.indices.astype(np.int64), A.indptr), shape=A.shape)
    dup = sp.coo_matrix((np.r_[A.tocoo().data, 1.0], (np.r_[A.tocoo().row, 0], np.r_[A.tocoo().col, 0])),
                        shape=A.shape).tocsr()
    dup.has_canonical_format = False
    for M in (A.tocsc(), B, dup):
        P = parallel(M)
        assert isinstance(P, ParallelCSR)
        assert np.allclose(P @ x, M @ x, rtol=0, atol=1e-12)
    assert parallel(dup).matrix.nnz == dup.nnz  # no copy summed the duplicates
    # not wrapped: dense arrays, other dtypes, small matrices, a wrapper again
    D = A.toarray()
    assert parallel(D) is D
    F = A.astype(np.float32)
    assert parallel(F) is F
    S = _matrix(n=50)
    assert parallel(S) is S
    P = parallel(A)
    assert parallel(P) is P
    # a complex vector falls back to scipy's product
    z = x + 1j * x
    assert np.array_equal(P @ z, A @ z)


def test_matvec_add_adds_into_the_vector_given_with_the_same_bits(small_work):
    """``out += A x`` with no vector allocated: the same bits on 3 threads and on one, each
    row's sum starting from ``out``; a wrong vector is refused before any work."""
    from kernelforms._parallel import accumulator

    A = _matrix(seed=4)
    rng = np.random.default_rng(5)
    x, y0 = rng.standard_normal(A.shape[0]), rng.standard_normal(A.shape[0])
    P, S = accumulator(A), ParallelCSR(A, 1)
    assert P.n_threads == 3 and len(P._blocks) == 3 and len(S._blocks) == 1
    out = y0.copy()
    assert P.matvec_add(x, out) is out
    serial = S.matvec_add(x, y0.copy())
    assert np.array_equal(out, serial)
    assert np.allclose(out, y0 + A @ x, rtol=0, atol=1e-12)
    # the kernel's own zero start: the product's exact bits
    assert np.array_equal(P.matvec_add(x, np.zeros(A.shape[0])), A @ x)
    with pytest.raises(ValueError, match="contiguous float64"):
        P.matvec_add(x, np.zeros(A.shape[0], dtype=np.float32))
    with pytest.raises(ValueError, match="contiguous float64"):
        P.matvec_add(x[::2], np.zeros(A.shape[0]))
    # nothing to accumulate with: dense, float32, a linear operator
    assert accumulator(A.toarray()) is None and accumulator(A.astype(np.float32)) is None
    assert accumulator(aslinearoperator(A)) is None
    assert accumulator(_matrix(n=50)).n_threads == 1  # small: serial


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV, "1")
    assert threads() == 1
    monkeypatch.setattr(_parallel, "MIN_WORK", 1000)
    A = _matrix()
    assert parallel(A) is A  # one thread: nothing to split
    monkeypatch.setenv(ENV, "6")
    assert threads() == 6
    monkeypatch.delenv(ENV)
    default = threads()
    assert 1 <= default <= _parallel.MAX_THREADS
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv(ENV, bad)
        with pytest.warns(RuntimeWarning, match=ENV):
            assert threads() == default


def test_certificate_is_the_same_with_threads(monkeypatch):
    """The certificate's Lanczos runs (forced at 240 points) give the same bound whether the
    products run on one thread or on three."""
    import kernelforms as kf
    from kernelforms.certificate import certify

    X, y = kf.datasets.load("two_gaussians", n_points=240, seed=5)
    from kernelforms.data.pairs import sample_pairs

    p = kf.PCP.from_data(X, sample_pairs(y, seed=5))
    res = kf.solve(p, "admm", seed=0, polish=False, max_iter=40)
    monkeypatch.setattr(_parallel, "MIN_WORK", 1000)
    out = {}
    for t in ("1", "3"):
        monkeypatch.setenv(ENV, t)
        c = certify(p, res.kernel, dense_below=20)
        out[t] = (c.lower_bound, c.min_eig, c.eig_method)
    assert out["1"][2] != "dense" and np.isfinite(out["1"][0])
    assert out["1"] == out["3"]


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_pool(small_work):
    """A child forked after the pool ran inherits the executor without its threads; its
    products must not wait on them (with one pool for all processes, the child's tasks
    waited forever once all of the parent's threads were idle)."""
    import multiprocessing as mp

    A = _matrix(seed=7)
    x = np.random.default_rng(8).standard_normal(A.shape[0])
    P = parallel(A)
    expect = A @ x
    for _ in range(50):  # every thread of the parent's pool started, then idle
        assert np.array_equal(P @ x, expect)
    time.sleep(0.2)
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        res = pool.apply_async(_child_product, (A, x))
        assert np.array_equal(res.get(timeout=60), expect)


def _child_product(A, x):
    import os

    os.environ[ENV] = "3"
    _parallel.MIN_WORK = 1000
    return parallel(A) @ x


def test_limit_threads_caps_the_pools_and_none_leaves_them():
    from threadpoolctl import threadpool_info

    from kernelforms._parallel import limit_threads, with_threads

    def blas():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    before = blas()
    with limit_threads(1):
        assert all(t == 1 for t in blas())
    assert blas() == before
    with limit_threads(None):
        assert blas() == before
    assert with_threads(1, blas) == [1] * len(before)
    assert with_threads(None, blas) == before
