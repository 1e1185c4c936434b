"""Tests of kernelforms.data: data sets, kNN graphs / Laplacians, pairs."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from kernelforms.errors import DataError, KernelformsError, ProblemError
from kernelforms.data import datasets as ds
from kernelforms.data import graphs as gr
from kernelforms.data.pairs import (
    Pairs,
    inconsistent_pairs,
    per_class_pairs,
    sample_pairs,
)

#: the project's data directory beside the checkout (``../shared/data``), or the one named
#: by KERNELFORMS_SHARED_DATA; tests that need it skip with a reason when it is absent
SHARED_DATA = Path(os.environ.get("KERNELFORMS_SHARED_DATA",
                                  Path(__file__).resolve().parents[2] / "shared" / "data"))

# name: (n, d, {label: count})   (SOURCES.md, "Summary")
EXPECTED = {
    "glass": (214, 9, {1: 70, 2: 76, 3: 17, 5: 13, 6: 9, 7: 29}),
    "heart": (270, 13, {1: 150, 2: 120}),
    "iris": (150, 4, {0: 50, 1: 50, 2: 50}),
    "sonar": (208, 60, {0: 111, 1: 97}),
    "soybean": (47, 35, {0: 10, 1: 10, 2: 10, 3: 17}),
    "wine": (178, 13, {1: 59, 2: 71, 3: 48}),
    "a1a": (1605, 123, {-1: 1210, 1: 395}),
    "a2a": (2265, 123, {-1: 1693, 1: 572}),
    "a3a": (3185, 123, {-1: 2412, 1: 773}),
    "a4a": (4781, 123, {-1: 3593, 1: 1188}),
    "pendigits": (10992, 16, {0: 1143, 1: 1143, 2: 1144, 3: 1055, 4: 1144, 5: 1055,
                              6: 1056, 7: 1142, 8: 1055, 9: 1055}),
}
USPS_COUNTS = {0: 1194, 1: 1005, 2: 731, 3: 658, 4: 652, 5: 556, 6: 664, 7: 645,
               8: 542, 9: 644}


@pytest.fixture(autouse=True)
def _no_env_data_dir(monkeypatch):
    monkeypatch.delenv(ds.DATA_DIR_ENV, raising=False)


# ------------------------------------------------------------------------ datasets


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_dataset_shapes_and_counts(name):
    n, d, counts = EXPECTED[name]
    X, y = ds.load(name)
    assert X.shape == (n, d) and X.dtype == np.float64 and X.flags.c_contiguous
    assert y.shape == (n,) and y.dtype == np.int64
    assert np.all(np.isfinite(X))
    labels, cnt = np.unique(y, return_counts=True)
    assert dict(zip(labels.tolist(), cnt.tolist())) == counts
    info = ds.info(name)
    assert (info["n"], info["d"], info["classes"]) == (n, d, len(counts))
    assert info["shipped"] is True
    assert "CC BY 4.0" in info["licence"]


def test_shipped_files_are_byte_identical_to_shared():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the original data files are not beside the checkout ({SHARED_DATA})")
    files = Path(ds.__file__).parent / "files"
    for name in EXPECTED:
        fname = ds.info(name)["file"]
        assert (files / fname).read_bytes() == (SHARED_DATA / fname).read_bytes(), fname
    assert not list(files.glob("usps*"))


def test_sklearn_and_synthetic_sets_load():
    for name in ("iris_sklearn", "wine_sklearn", "digits", "two_gaussians", "chessboard",
                 "double_spiral", "swiss_roll"):
        X, y = ds.load(name)
        info = ds.info(name)
        assert X.shape == (info["n"], info["d"]), name
        assert len(np.unique(y)) == info["classes"], name
        assert X.dtype == np.float64 and y.dtype == np.int64
    Xw, yw = ds.load("wine")
    Xs, ys = ds.load("wine_sklearn")
    np.testing.assert_allclose(Xw, Xs)
    np.testing.assert_array_equal(yw, ys + 1)
    Xi, _ = ds.load("iris")
    Xis, _ = ds.load("iris_sklearn")
    assert np.sum(Xi != Xis) == 3  # the UCI errata in rows 35 and 38


def test_names_table_info_consistent():
    names = ds.names()
    assert len(names) == len(set(names))
    for required in ["iris", "wine", "digits", "glass", "heart", "sonar", "soybean",
                     "pendigits", "a1a", "a2a", "a3a", "a4a", "usps", "two_gaussians",
                     "chessboard", "double_spiral", "swiss_roll", "iris_sklearn",
                     "wine_sklearn"]:
        assert required in names
    rows = ds.table()
    assert [r["name"] for r in rows] == names
    for r in rows:
        assert {"name", "n", "d", "n_classes", "source"} <= set(r)
    assert ds.info("usps")["shipped"] is False


def test_usps_requires_data_dir():
    with pytest.raises(DataError, match="no licence") as exc:
        ds.load("usps")
    assert "data_dir" in str(exc.value) and ds.DATA_DIR_ENV in str(exc.value)


@pytest.mark.skipif(not (SHARED_DATA / "usps.csv.gz").is_file(),
                    reason=f"USPS is not shipped; {SHARED_DATA / 'usps.csv.gz'} is absent")
def test_usps_from_data_dir_and_env(monkeypatch):
    X, y = ds.load("usps", data_dir=SHARED_DATA)
    assert X.shape == (7291, 256)
    labels, cnt = np.unique(y, return_counts=True)
    assert dict(zip(labels.tolist(), cnt.tolist())) == USPS_COUNTS
    assert X.min() >= -1.0 and X.max() <= 1.0
    X2, y2 = ds.load("usps", data_dir=str(SHARED_DATA), n_per_class=200)
    assert X2.shape == (2000, 256) and np.all(np.bincount(y2) == 200)
    # the first 200 of each digit, in file order
    first0 = np.flatnonzero(y == 0)[:200]
    np.testing.assert_array_equal(X2[y2 == 0], X[first0])
    monkeypatch.setenv(ds.DATA_DIR_ENV, str(SHARED_DATA))
    X3, _ = ds.load("usps")
    assert X3.shape == (7291, 256)


def test_unknown_name_suggests():
    with pytest.raises(DataError, match="Did you mean 'iris'") as exc:
        ds.load("irsi")
    assert "soybean" in str(exc.value)
    with pytest.raises(DataError):
        ds.info("nope")
    with pytest.raises(DataError):
        ds.load(3)


def test_data_dir_first_and_corrupt_file(tmp_path):
    # a data_dir file overrides the shipped one
    (tmp_path / "iris.csv").write_text("a,b,c,d,label\n1,2,3,4,0\n5,6,7,8,1\n")
    X, y = ds.load("iris", data_dir=tmp_path)
    assert X.shape == (2, 4) and y.tolist() == [0, 1]
    bad = tmp_path / "glass.csv"
    bad.write_text("a,b,label\n1,x,3\n")
    with pytest.raises(DataError, match="glass.csv") as exc:
        ds.load("glass", data_dir=tmp_path)
    assert exc.value.__cause__ is not None
    bad.write_text("a,b,label\n1,2,3\n")  # wrong number of features
    with pytest.raises(DataError, match="glass.csv"):
        ds.load("glass", data_dir=tmp_path)
    (tmp_path / "heart.csv").write_text("no header here\n")
    with pytest.raises(DataError, match="heart.csv"):
        ds.load("heart", data_dir=tmp_path)
    (tmp_path / "a1a.svm").write_text("+1 3:1 garbage\n")
    with pytest.raises(DataError, match="a1a.svm"):
        ds.load("a1a", data_dir=tmp_path)
    (tmp_path / "sonar.csv.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="sonar.csv.gz"):
        ds.load("sonar", data_dir=tmp_path)
    with pytest.raises(DataError, match="not a directory"):
        ds.load("iris", data_dir=tmp_path / "missing")


def test_load_keyword_errors():
    with pytest.raises(ProblemError):
        ds.load("iris", n=3)
    with pytest.raises(ProblemError):
        ds.load("two_gaussians", bogus=1)
    with pytest.raises(ProblemError, match="'n' parameter of two_gaussians"):
        ds.load("two_gaussians", n=-1)


def test_generators_reproducible_and_shaped():
    X1, y1 = ds.two_gaussians(n=101, d=3, seed=5)
    X2, y2 = ds.load("two_gaussians", n=101, d=3, seed=5)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert X1.shape == (101, 3) and sorted(np.bincount(y1).tolist()) == [50, 51]
    # class means near +1 / -1
    X, y = ds.two_gaussians(n=4000, d=10, seed=0)
    assert np.allclose(X[y == 0].mean(0), 1.0, atol=0.1)
    assert np.allclose(X[y == 1].mean(0), -1.0, atol=0.1)
    assert not np.array_equal(ds.two_gaussians(seed=1)[0], ds.two_gaussians(seed=2)[0])
    X, y = ds.chessboard(n=500, seed=0)
    assert X.shape == (500, 2)
    np.testing.assert_array_equal(y, (np.floor(X[:, 0]) + np.floor(X[:, 1])) % 2)
    X, y = ds.double_spiral(n=100, noise=0.1, seed=0)
    assert X.shape == (100, 3) and set(y.tolist()) == {0, 1}
    assert ds.double_spiral(n=50, dim=2)[0].shape == (50, 2)
    X, y = ds.swiss_roll(n=300, seed=3)
    X2, y2 = ds.swiss_roll(n=300, seed=3)
    np.testing.assert_array_equal(X, X2)
    assert X.shape == (300, 3) and set(y.tolist()) <= {0, 1, 2, 3}


def test_scale():
    X = np.array([[0.0, 5.0, 1.0], [2.0, 5.0, 3.0], [1.0, 5.0, 2.0]])
    S = ds.scale(X)
    np.testing.assert_allclose(S[:, 0], [-1, 1, 0])
    np.testing.assert_allclose(S[:, 1], 0)
    assert S.min() >= -1 and S.max() <= 1
    with pytest.raises(ProblemError):
        ds.scale(X, method="std")
    with pytest.raises(ProblemError):
        ds.scale([[np.nan]])


def test_public_aliases():
    import kernelforms.datasets as kd
    import kernelforms.graphs as kg
    import kernelforms.pairs as kp
    import kernelforms.data as kdata

    assert kd.load is ds.load and kg.knn_laplacian is gr.knn_laplacian
    assert kp.Pairs is Pairs
    for name in ("load", "names", "knn_laplacian", "Pairs", "sample_pairs"):
        assert hasattr(kdata, name)


# -------------------------------------------------------------------------- graphs


def _dense_reference(X, k, delta=0.0):
    n = X.shape[0]
    D2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    Dist = np.sqrt(D2)
    np.fill_diagonal(Dist, np.inf)
    nbr = np.argsort(Dist, axis=1)
    sigma = 0.5 * np.mean(np.take_along_axis(Dist, nbr[:, :10], axis=1))
    A = np.zeros((n, n), dtype=bool)
    A[np.repeat(np.arange(n), k), nbr[:, :k].ravel()] = True
    A = A | A.T
    S = np.where(A, np.exp(-D2 / (2 * sigma**2)), 0.0)
    deg = S.sum(1)
    Dm = np.diag(1 / np.sqrt(deg))
    return (1 + delta) * np.eye(n) - Dm @ S @ Dm, S, sigma, A, np.where(A, np.sqrt(D2), 0)


@pytest.mark.parametrize("k,delta", [(5, 0.0), (3, 0.01), (1, 0.5)])
def test_knn_laplacian_matches_dense(k, delta):
    rng = np.random.default_rng(42)
    X = rng.standard_normal((30, 4))
    Lref, S, sigma, A, Dist = _dense_reference(X, k, delta)
    assert np.isclose(gr.gaussian_sigma(X), sigma)
    L = gr.knn_laplacian(X, k=k, delta=delta)
    assert sp.issparse(L) and L.shape == (30, 30)
    Ld = L.toarray()
    np.testing.assert_allclose(Ld, Lref, atol=1e-12)
    np.testing.assert_array_equal(Ld, Ld.T)
    assert np.linalg.eigvalsh(Ld).min() >= -1e-10
    deg = S.sum(1)
    v = np.sqrt(deg)
    np.testing.assert_allclose(L @ v, delta * v, atol=1e-12)
    # graph / edges
    G = gr.knn_graph(X, k=k)
    np.testing.assert_allclose(G.toarray(), Dist, atol=1e-12)
    edges, dist = gr.knn_edges(X, k=k)
    assert np.all(edges[:, 0] < edges[:, 1])
    assert len(edges) == A.sum() // 2
    np.testing.assert_allclose(dist, Dist[edges[:, 0], edges[:, 1]], atol=1e-12)
    Adj = gr.knn_adjacency(X, k=k)
    np.testing.assert_array_equal(Adj.toarray(), A.astype(float))


def test_knn_laplacian_weight_inputs():
    import networkx as nx

    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 3))
    _, S, sigma, _, _ = _dense_reference(X, 5)
    L1 = gr.knn_laplacian(X, k=5)
    L2 = gr.knn_laplacian(sp.csr_matrix(S))
    L3 = gr.knn_laplacian(S, weights=True)
    L4 = gr.knn_laplacian(nx.from_numpy_array(S))
    L5 = gr.laplacian_from_weights(S)
    for Lx in (L2, L3, L4, L5):
        np.testing.assert_allclose(Lx.toarray(), L1.toarray(), atol=1e-12)
    # unweighted graph: weight default 1
    G = nx.path_graph(4)
    Lg = gr.knn_laplacian(G).toarray()
    assert np.isclose(Lg[0, 1], -1 / np.sqrt(2))
    Lu = gr.unnormalized_laplacian(nx.to_numpy_array(G)).toarray()
    np.testing.assert_allclose(Lu, np.diag([1, 2, 2, 1]) - nx.to_numpy_array(G))
    with pytest.raises(ProblemError, match="sigma"):
        gr.knn_laplacian(sp.csr_matrix(S), sigma=1.0)
    with pytest.raises(ProblemError, match="symmetric"):
        gr.knn_laplacian(sp.csr_matrix(np.triu(S)))
    with pytest.raises(ProblemError, match="non-negative"):
        gr.laplacian_from_weights(-S)
    # isolated node: D^{-1/2} = 0 there
    W = np.zeros((3, 3))
    W[0, 1] = W[1, 0] = 2.0
    L = gr.laplacian_from_weights(W, delta=0.1).toarray()
    np.testing.assert_allclose(L, [[1.1, -1, 0], [-1, 1.1, 0], [0, 0, 1.1]])


def test_knn_validation():
    X = np.random.default_rng(0).standard_normal((10, 2))
    for k in (0, 10, 2.5, True, "3", None):
        with pytest.raises(ProblemError, match="'k' parameter of knn_laplacian"):
            gr.knn_laplacian(X, k=k)
    for delta in (-1, np.nan, "x"):
        with pytest.raises(ProblemError, match="'delta'"):
            gr.knn_laplacian(X, delta=delta)
    with pytest.raises(ProblemError, match="'sigma'"):
        gr.knn_laplacian(X, sigma=0.0)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ProblemError, match="NaN"):
        gr.knn_laplacian(Xn)
    with pytest.raises(ProblemError, match="at least 2"):
        gr.knn_laplacian(X[:1], k=1)
    with pytest.raises(ProblemError):
        gr.knn_laplacian(X[0])
    with pytest.raises(ProblemError, match="'k' parameter of knn_edges"):
        gr.knn_edges(X, k=0)


def test_knn_laplacian_methods(monkeypatch):
    """method="approx" keeps its (1 + eps) guarantee against the exact search; "auto" is
    exact up to AUTO_EXACT_MAX points and approximate above; a bad method is named."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((1200, 10))
    k = 10
    de, ie = gr._neighbours(X, k, "exact")
    da, ia = gr._neighbours(X, k, "approx")
    # every returned neighbour within (1 + eps) of the true k-th distance, and its distance true
    assert np.all(da <= (1 + gr.APPROX_EPS) * de[:, -1:] * (1 + 1e-12))
    np.testing.assert_allclose(da, np.linalg.norm(X[ia] - X[:, None, :], axis=2), rtol=1e-12)
    assert np.all(ia != np.arange(1200)[:, None])
    shared = np.mean([len(np.intersect1d(a, b)) for a, b in zip(ie, ia)]) / k
    assert 0.7 < shared < 1.0  # approximate here, and most of it right
    L_auto = gr.knn_laplacian(X, k=5)
    np.testing.assert_array_equal(L_auto.toarray(), gr.knn_laplacian(X, k=5, method="exact").toarray())
    L_apx = gr.knn_laplacian(X, k=5, method="approx")
    assert abs(L_apx - L_apx.T).max() == 0 and L_apx.shape == (1200, 1200)
    assert (L_apx != L_auto).nnz > 0
    monkeypatch.setattr(gr, "AUTO_EXACT_MAX", 1199)
    np.testing.assert_array_equal(gr.knn_laplacian(X, k=5).toarray(), L_apx.toarray())
    for bad in ("fast", None, 1):
        with pytest.raises(ProblemError, match="'method' parameter of knn_laplacian"):
            gr.knn_laplacian(X, method=bad)


def test_approx_search_recall():
    """The approximate search finds at least 95% of the exact 10 nearest neighbours of two
    Gaussians in 10 dimensions (6,000 points: 0.973; the tree's (1 + eps) search alone, before
    the neighbours-of-neighbours round, 0.906), and its graph keeps most exact edges."""
    X, _ = ds.two_gaussians(6000, d=10, seed=0)
    _, ie = gr._neighbours(X, 10, "exact")
    _, ia = gr._neighbours(X, 10, "approx")

    def recall(ind):
        hits = (np.sort(ie, axis=1)[:, :, None] == ind[:, None, :]).any(axis=2)
        return hits.mean()

    assert recall(ia) >= 0.95
    E = gr.knn_laplacian(X, k=5, method="exact")
    A = gr.knn_laplacian(X, k=5, method="approx")
    shared = (E.multiply(A) != 0).nnz / E.nnz
    assert shared >= 0.95


def test_refine_keeps_the_nearest_distinct_candidates():
    """One refinement round returns, per point, the k nearest of its neighbours and their
    neighbours (distinct, never the point itself, ties by index), each no farther than the
    neighbour of the same rank before."""
    rng = np.random.default_rng(5)
    n, k = 300, 4
    X = np.round(rng.standard_normal((n, 3)), 1)  # rounded: tied distances occur
    X[10] = X[11]  # a duplicate point is a neighbour at distance 0
    ind = np.array([rng.choice(np.delete(np.arange(n), i), k, replace=False) for i in range(n)])
    before = np.linalg.norm(X[ind] - X[:, None, :], axis=2)
    before.sort(axis=1)
    dist, out = gr._refine(X, ind)
    for i in range(n):
        cand = np.setdiff1d(np.concatenate([ind[i], ind[ind[i]].ravel()]), [i])
        diff = X[cand] - X[i]
        d2 = np.einsum("ij,ij->i", diff, diff)  # the squares refine compares, bit for bit
        best = cand[np.lexsort((cand, d2))[:k]]
        np.testing.assert_array_equal(out[i], best)
    np.testing.assert_allclose(dist, np.linalg.norm(X[out] - X[:, None, :], axis=2), rtol=1e-12)
    assert np.all(dist <= before * (1 + 1e-12))


def test_approx_graph_is_the_same_on_any_thread_count(monkeypatch):
    """The approximate graph does not depend on the threads of the refinement round (nor on
    the tree's: every query is answered on its own)."""
    X, _ = ds.two_gaussians(6000, d=10, seed=1)
    monkeypatch.setattr(gr, "REFINE_BLOCK", 256)
    graphs = []
    for t in ("1", "3"):
        monkeypatch.setenv("KERNELFORMS_NUM_THREADS", t)
        graphs.append(gr.knn_laplacian(X, k=5, method="approx"))
    assert (graphs[0] != graphs[1]).nnz == 0


def test_duplicates():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((15, 2))
    Xd = np.vstack([X, X[:3]])  # points 15, 16, 17 duplicate 0, 1, 2
    edges, dist = gr.knn_edges(Xd, k=2)
    pairs = {tuple(e) for e in edges.tolist()}
    for i in range(3):
        assert (i, 15 + i) in pairs
    assert np.all(dist[edges[:, 1] - edges[:, 0] == 15] == 0)
    G = gr.knn_graph(Xd, k=2)
    assert G.nnz == 2 * len(edges)  # zero distances kept as explicit entries
    A = gr.knn_adjacency(Xd, k=2)
    assert A[0, 15] == 1.0
    L = gr.knn_laplacian(Xd, k=2)
    assert L[0, 15] < 0  # duplicates are linked with weight exp(0) = 1
    with pytest.raises(ProblemError, match="sigma is 0"):
        gr.gaussian_sigma(np.zeros((12, 3)))
    assert gr.gaussian_sigma(np.arange(5.0)[:, None]) > 0  # n - 1 < 10 neighbours


def test_smallest_eigenvectors(monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 3))
    L = gr.knn_laplacian(X, k=6)
    vals, vecs = gr.smallest_eigenvectors(L, 5)
    ref = np.linalg.eigvalsh(L.toarray())
    np.testing.assert_allclose(vals, ref[:5], atol=1e-10)
    np.testing.assert_allclose(vecs.T @ vecs, np.eye(5), atol=1e-10)
    np.testing.assert_allclose(L @ vecs, vecs * vals, atol=1e-9)
    idx = np.argmax(np.abs(vecs), axis=0)
    assert np.all(vecs[idx, np.arange(5)] > 0)
    Lu = gr.unnormalized_laplacian(gr.knn_adjacency(X, k=4))
    v1, _ = gr.smallest_eigenvectors(Lu, 3, skip=1)
    refu = np.linalg.eigvalsh(Lu.toarray())
    np.testing.assert_allclose(v1, refu[1:4], atol=1e-10)
    # sparse path (eigsh shift-invert) agrees with the dense one
    monkeypatch.setattr(gr, "_DENSE_EIG_MAX", 50)
    vals2, vecs2 = gr.smallest_eigenvectors(L, 5)
    np.testing.assert_allclose(vals2, vals, atol=1e-8)
    np.testing.assert_allclose(np.abs(vecs2.T @ vecs), np.eye(5), atol=1e-6)
    v2, _ = gr.smallest_eigenvectors(Lu, 3, skip=1)
    np.testing.assert_allclose(v2, v1, atol=1e-8)
    with pytest.raises(ProblemError):
        gr.smallest_eigenvectors(L, 0)
    with pytest.raises(ProblemError):
        gr.smallest_eigenvectors(L, 300, skip=1)
    with pytest.raises(ProblemError):
        gr.smallest_eigenvectors(np.ones((2, 3)), 1)


# --------------------------------------------------------------------------- pairs


def test_pairs_normalisation_and_api():
    p = Pairs([[3, 1], [0, 2], [1, 0]], [(5, 4)], n=6)
    assert p.must.tolist() == [[0, 1], [0, 2], [1, 3]]
    assert p.cannot.tolist() == [[4, 5]]
    assert p.must.dtype == np.int64 and not p.must.flags.writeable
    with pytest.raises(ValueError):
        p.must[0, 0] = 7
    with pytest.raises(AttributeError):
        p.must = np.zeros((0, 2))
    assert (p.n_must, p.n_cannot, len(p), p.max_index) == (3, 1, 4, 5)
    assert p.indices.tolist() == [[0, 1], [0, 2], [1, 3], [4, 5]]
    assert p.signs.tolist() == [1, 1, 1, -1]
    q = Pairs(np.array([[1, 0], [2, 0], [3, 1]]), np.array([[4.0, 5.0]]), n=6)
    assert p == q and hash(p) == hash(q) and p.fingerprint() == q.fingerprint()
    assert len(p.fingerprint()) == 12
    assert p != Pairs(p.must, p.cannot, n=7)
    assert p != Pairs(p.cannot, p.must, n=6)
    assert len({p, q}) == 1
    d = p.to_dict()
    assert Pairs.from_dict(json.loads(json.dumps(d))) == p
    assert pickle.loads(pickle.dumps(p)) == p
    assert not pickle.loads(pickle.dumps(p)).must.flags.writeable
    e = Pairs([], None)
    assert len(e) == 0 and e.max_index == -1 and e.indices.shape == (0, 2)
    assert e.signs.shape == (0,)
    assert Pairs(np.zeros((0, 2)), []).must.shape == (0, 2)
    assert p.check_n(6) is p
    with pytest.raises(ProblemError, match="n = 5"):
        p.check_n(5)
    with pytest.raises(ProblemError):
        Pairs.from_dict({"must": [], "extra": 1})


@pytest.mark.parametrize("must,cannot,n,fragment", [
    ([[0, 1, 2]], None, None, "shape (k, 2)"),
    ([0, 1], None, None, "[[i, j]]"),
    ([[0, 1.5]], None, None, "integer indices"),
    ([[0, np.nan]], None, None, "integer indices"),
    ([[True, False]], None, None, "booleans"),
    ([["a", "b"]], None, None, "integer indices"),
    ([[-1, 2]], None, None, "negative"),
    ([[0, 5]], None, 5, "n = 5"),
    ([[2, 2]], None, None, "self pair"),
    ([[1, 2], [2, 1]], None, None, "more than once"),
    ([[1, 2], [1, 2]], None, None, "more than once"),
    ([[1, 2]], [[2, 1]], None, "both"),
    (None, [[3, 3]], None, "self pair"),
    (None, [[0, 1], [0, 1]], None, "more than once"),
    ([[0, 1], [2]], None, None, "same length"),
    ("01", None, None, "array-like"),
])
def test_pairs_errors(must, cannot, n, fragment):
    with pytest.raises(ProblemError) as exc:
        Pairs(must, cannot, n=n)
    msg = str(exc.value)
    assert fragment in msg
    assert ("'must'" in msg) or ("'cannot'" in msg)


def test_pairs_bad_n():
    for n in (-1, 2.5, True, "3"):
        with pytest.raises(ProblemError, match="'n' parameter of Pairs"):
            Pairs([[0, 1]], None, n=n)


def test_pairs_fuzz():
    rng = np.random.default_rng(2024)
    makers = [
        lambda: rng.integers(-3, 8, size=(rng.integers(0, 6), rng.integers(0, 4))),
        lambda: rng.normal(2, 3, size=(rng.integers(0, 5), 2)),
        lambda: np.where(rng.random((3, 2)) < 0.2, np.nan, rng.integers(0, 5, (3, 2))),
        lambda: rng.integers(0, 6, size=(rng.integers(1, 6), 2)).tolist(),
        lambda: [[int(rng.integers(0, 5)), "x"]],
        lambda: [[1, 2], [3]],
        lambda: rng.integers(0, 2, size=(3, 2)).astype(bool),
        lambda: rng.integers(0, 5, size=(2, 2, 2)),
        lambda: np.array([[2**63 - 1, 0]], dtype=np.uint64) + np.uint64(5),
        lambda: [[1e300, 1]],
        lambda: [[np.inf, 1]],
        lambda: rng.integers(0, 5, size=(4, 2)).astype(np.complex128),
        lambda: [[None, 1]],
        lambda: {"a": 1},
        lambda: 7,
        lambda: [[2**70, 1]],
        lambda: rng.integers(0, 5, size=4),
    ]
    outcomes = {"ok": 0, "error": 0}
    for _ in range(220):
        must = makers[rng.integers(len(makers))]()
        cannot = makers[rng.integers(len(makers))]() if rng.random() < 0.5 else None
        n = None if rng.random() < 0.5 else int(rng.integers(0, 8))
        try:
            p = Pairs(must, cannot, n=n)
        except KernelformsError:
            outcomes["error"] += 1
            continue
        outcomes["ok"] += 1
        for arr in (p.must, p.cannot):
            assert arr.ndim == 2 and arr.shape[1] == 2 and arr.dtype == np.int64
            assert np.all(arr[:, 0] < arr[:, 1]) and np.all(arr >= 0)
    assert outcomes["ok"] > 10 and outcomes["error"] > 50


def test_sample_pairs_counts_classes_reproducible():
    y = np.repeat([3, 7, 9], [40, 60, 20])
    p = sample_pairs(y, seed=1)
    assert p.n_must == p.n_cannot == round(0.6 * len(y)) and p.n == len(y)
    assert np.all(y[p.must[:, 0]] == y[p.must[:, 1]])
    assert np.all(y[p.cannot[:, 0]] != y[p.cannot[:, 1]])
    assert sample_pairs(y, seed=1) == p
    assert sample_pairs(y, seed=2) != p
    q = sample_pairs(y, n_must=10, n_cannot=0, seed=0)
    assert (q.n_must, q.n_cannot) == (10, 0)
    # every same-class pair when asked for all of them (no duplicates possible)
    y2 = np.array([0, 0, 0, 1, 1])
    r = sample_pairs(y2, n_must=4, n_cannot=6)
    assert r.must.tolist() == [[0, 1], [0, 2], [1, 2], [3, 4]]
    assert len(r.cannot) == 6
    with pytest.raises(ProblemError, match="only 4 same-class"):
        sample_pairs(y2, n_must=5)
    with pytest.raises(ProblemError, match="only 6 different-class"):
        sample_pairs(y2, n_must=0, n_cannot=7)
    with pytest.raises(ProblemError):
        sample_pairs(y2, n_must=-1)
    with pytest.raises(ProblemError):
        sample_pairs([1])
    with pytest.raises(ProblemError):
        sample_pairs(np.zeros((3, 2)))


def test_sample_pairs_uniform_over_pairs():
    # 4 + 1 points: cannot pairs are (i, 4); must pairs among 0..3 (6 of them)
    y = np.array([0, 0, 0, 0, 1])
    seen = np.zeros(6)
    mp = {(0, 1): 0, (0, 2): 1, (0, 3): 2, (1, 2): 3, (1, 3): 4, (2, 3): 5}
    for s in range(600):
        p = sample_pairs(y, n_must=1, n_cannot=1, seed=s)
        seen[mp[tuple(p.must[0])]] += 1
    assert seen.min() > 60  # about 100 each


def test_sample_pairs_large_is_fast():
    import time

    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, size=100_000)
    y[:5] = 99  # a tiny class
    t = time.perf_counter()
    p = sample_pairs(y, seed=0)
    assert time.perf_counter() - t < 5.0
    assert p.n_must == p.n_cannot == 60_000
    assert np.all(y[p.must[:, 0]] == y[p.must[:, 1]])
    assert np.all(y[p.cannot[:, 0]] != y[p.cannot[:, 1]])
    # imbalanced: cannot-links are rare
    y2 = np.zeros(50_000, dtype=int)
    y2[:3] = 1
    q = sample_pairs(y2, n_must=1000, n_cannot=1000, seed=0)
    assert np.all(y2[q.cannot[:, 0]] != y2[q.cannot[:, 1]])


def test_per_class_pairs():
    y = np.repeat(np.arange(10), 30)
    p = per_class_pairs(y, seed=0)
    assert p.n_must == 200 and p.n_cannot == 45 * 20 and len(p) == 1100
    mc = np.bincount(y[p.must[:, 0]], minlength=10)
    assert np.all(mc == 20) and np.all(y[p.must[:, 0]] == y[p.must[:, 1]])
    a, b = y[p.cannot[:, 0]], y[p.cannot[:, 1]]
    assert np.all(a != b)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    assert np.all(np.bincount(lo * 10 + hi, minlength=100)[
        [i * 10 + j for i in range(10) for j in range(i + 1, 10)]] == 20)
    assert per_class_pairs(y, seed=0) == p
    with pytest.raises(ProblemError, match="must_per_class"):
        per_class_pairs(np.array([0, 0, 0, 1, 1]), must_per_class=3)
    with pytest.raises(ProblemError, match="cannot_per_class_pair"):
        per_class_pairs(np.array([0, 0, 1, 1]), must_per_class=1,
                        cannot_per_class_pair=5)


def test_inconsistent_pairs():
    p = Pairs([[0, 1], [1, 2], [5, 6]], [[0, 2], [3, 4], [2, 6], [5, 6 + 1]])
    assert inconsistent_pairs(p) == [(0, 2)]
    p2 = Pairs([[0, 1], [1, 2], [2, 3]], [[0, 3], [1, 3], [4, 5]])
    assert inconsistent_pairs(p2) == [(0, 3), (1, 3)]
    assert inconsistent_pairs(Pairs([[0, 1]], None)) == []
    with pytest.raises(ProblemError):
        inconsistent_pairs([[0, 1]])


def test_env_data_dir_is_searched(tmp_path, monkeypatch):
    (tmp_path / "soybean.csv").write_text(",".join(f"f{i}" for i in range(35))
                                          + ",label\n" + ",".join(["1"] * 35) + ",2\n")
    monkeypatch.setenv(ds.DATA_DIR_ENV, str(tmp_path))
    X, y = ds.load("soybean")
    assert X.shape == (1, 35) and y.tolist() == [2]
    assert os.environ[ds.DATA_DIR_ENV] == str(tmp_path)


# ---------------------------------------------------------------------- n_points
def test_load_n_points_generators_draw_that_many():
    # was: `--n-points 1000` on two_gaussians gave its default 300 points
    for name in ("two_gaussians", "chessboard", "double_spiral", "swiss_roll"):
        X, y = ds.load(name, n_points=37, seed=2)
        assert X.shape[0] == len(y) == 37
    X, _ = ds.load("two_gaussians", n_points=1000)
    assert X.shape == (1000, 10)
    np.testing.assert_array_equal(ds.load("chessboard", n_points=50, seed=4)[0],
                                  ds.chessboard(n=50, seed=4)[0])
    with pytest.raises(ProblemError, match="disagree"):
        ds.load("two_gaussians", n=20, n_points=30)


def test_load_n_points_file_sets_are_stratified_subsets_or_refused():
    # was: `--n-points 500` on iris gave its 150 points silently
    X, y = ds.load("iris", n_points=30, seed=5)
    assert X.shape == (30, 4) and sorted(np.bincount(y)) == [10, 10, 10]
    full, _ = ds.load("iris")
    assert all(any(np.array_equal(r, f) for f in full) for r in X)  # rows of the file
    assert np.array_equal(ds.load("iris", n_points=30, seed=5)[0], X)  # seeded
    assert not np.array_equal(ds.load("iris", n_points=30, seed=6)[0], X)
    assert ds.load("iris", n_points=150)[0].shape == (150, 4)
    with pytest.raises(DataError, match="n_points = 500 is more than iris has: it has 150 points"):
        ds.load("iris", n_points=500)
    with pytest.raises(ProblemError, match="fewer than the 3 classes"):
        ds.load("iris", n_points=2)
    for bad in (0, -5, 1, 2.5, True, "30"):
        with pytest.raises(ProblemError, match="'n_points' parameter"):
            ds.load("iris", n_points=bad)


def test_load_n_points_leaving_out_fewer_points_than_classes_keeps_every_class():
    # was: sklearn's "test_size = 2 should be greater or equal to the number of classes = 4"
    full, yf = ds.load("soybean")
    for n_points in (44, 45, 46):
        X, y = ds.load("soybean", n_points=n_points, seed=3)
        assert X.shape == (n_points, full.shape[1]) and set(y) == set(yf)
        left = np.bincount(yf) - np.bincount(y, minlength=yf.max() + 1)
        assert left.sum() == len(yf) - n_points and left.max() == 1  # one point of a class at most
        assert all(any(np.array_equal(r, f) for f in full) for r in X)  # rows of the file
        assert np.array_equal(ds.load("soybean", n_points=n_points, seed=3)[0], X)  # seeded
    seen = {ds.load("soybean", n_points=46, seed=s)[0].tobytes() for s in range(6)}
    assert len(seen) > 1


def test_load_n_points_scale_applies_to_the_whole_file_first():
    X, _ = ds.load("wine", n_points=20, scale=True, seed=1)
    whole = ds.scale(ds.load("wine")[0])
    assert all(any(np.allclose(r, w) for w in whole) for r in X)
    assert X.shape == (20, 13)


def test_subsample_is_the_subset_the_problem_factory_draws():
    # instances (and the fingerprints of stored baselines) do not change
    from kernelforms.problems.factory import subsample as factory_subsample

    X, y = ds.load("glass")
    for n, seed in ((30, 0), (61, 3)):
        a = factory_subsample(X, y, n, seed=seed)
        b = ds.subsample(X, y, n, seed=seed, name="glass")
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
