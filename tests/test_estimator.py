"""The scikit-learn estimators: KernelLearner and ConstrainedKernelClustering."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import parametrize_with_checks

import kernelforms as kf
from kernelforms.errors import KernelformsError, NotApplicable, OptionError, ProblemError, SolverNotFound
from kernelforms.estimator import (
    ConstrainedKernelClustering,
    InputError,
    KernelLearner,
    expected_failed_checks,
)
from kernelforms.evaluate import kernel_kmeans, pairwise_accuracy
from kernelforms.solvers.options import invalid_examples


def _cancer(n, seed):
    """An unseen instance: a class-stratified subset of breast cancer, standardised."""
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(seed)
    idx = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), n // 2, replace=False)
                                  for c in (0, 1)]))
    X = X[idx]
    return (X - X.mean(0)) / X.std(0), y[idx]


# ------------------------------------------------------------------ scikit-learn's checks
# one test per check (each well under 5 s; both estimators about 12 s in all on the
# loaded 2-core machine)
@parametrize_with_checks([KernelLearner(), ConstrainedKernelClustering()],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_check_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_expected_failed_checks_are_declared_with_reasons():
    assert expected_failed_checks(KernelLearner()) == {}
    xf = expected_failed_checks(ConstrainedKernelClustering())
    assert set(xf) == {"check_clustering"} and "side information" in xf["check_clustering"]


# ------------------------------------------------------------------ fit
def test_fit_with_labels_draws_seeded_pairs_from_y(blobs):
    X, y = blobs
    a = KernelLearner(random_state=3).fit(X, y)
    b = KernelLearner(random_state=3).fit(X, y)
    c = KernelLearner(random_state=4).fit(X, y)
    assert a.pairs_ == b.pairs_ and a.pairs_ != c.pairs_
    np.testing.assert_array_equal(a.embedding_, b.embedding_)
    p = a.pairs_
    assert p.n_must == p.n_cannot == 18  # round(0.6 n)
    assert np.all(y[p.must[:, 0]] == y[p.must[:, 1]])
    assert np.all(y[p.cannot[:, 0]] != y[p.cannot[:, 1]])
    # string labels work the same way
    s = KernelLearner(random_state=3).fit(X, np.array(["a", "b", "c"])[y])
    assert s.pairs_ == a.pairs_
    d = KernelLearner(n_must=5, n_cannot=7, random_state=0).fit(X, y)
    assert (d.pairs_.n_must, d.pairs_.n_cannot) == (5, 7)


def test_fit_solves_the_same_pcp_as_a_conic_solver_on_unseen_data():
    # unseen instances (breast cancer subsets, two seeds): the estimator's problem is
    # PCP on knn_laplacian(X, 5, 0) with its pairs, and its default method reaches
    # the optimum that sdp:clarabel certifies
    for seed in (11, 12):
        X, y = _cancer(30, seed)
        kl = KernelLearner(gamma=2.0, random_state=seed).fit(X, y)
        ref = kf.PCP(kf.graphs.knn_laplacian(X, k=5, delta=0.0), kl.pairs_, gamma=2.0)
        K = kl.embedding_ @ kl.embedding_.T
        assert abs(ref.objective(K) - kl.result_.objective) <= 1e-9 * abs(ref.objective(K))
        opt = kf.solve(ref, "sdp:clarabel")
        assert opt.status.value == "optimal"
        assert (kl.result_.objective - opt.objective) / abs(opt.objective) < 1e-4
        np.testing.assert_allclose(K, kl.result_.K, atol=1e-10)  # principal axes keep K


def test_fit_with_explicit_pairs_ignores_y(blobs):
    X, y = blobs
    pairs = kf.pairs.sample_pairs(y, 6, 4, seed=2)
    kl = KernelLearner(random_state=0).fit(X, pairs=pairs)
    assert kl.pairs_ is pairs
    kl2 = KernelLearner(random_state=0).fit(X, np.zeros(30), pairs=(pairs.must, pairs.cannot))
    assert kl2.pairs_ == pairs
    np.testing.assert_allclose(kl.embedding_ @ kl.embedding_.T, kl2.embedding_ @ kl2.embedding_.T,
                               atol=1e-10)
    G = KernelLearner(random_state=0).fit_transform(X, pairs=pairs)
    np.testing.assert_array_equal(G, kl.embedding_)


@pytest.mark.parametrize("problem, method", [("npkl", "bcd"), ("regpcp", "lowrank"),
                                             ("pcp-hard", "auto"), ("pcp", "admm")])
def test_other_problems_and_methods(blobs, problem, method):
    X, y = blobs
    kl = KernelLearner(problem=problem, method=method, loss="square", m_basis=8,
                       random_state=0).fit(X, y)
    assert kl.problem_.kind == problem.split("-")[0]
    assert kl.result_.ok and kl.transform(X + 0.01).shape == (30, kl.n_components_)


def test_unsupervised_mvu_uses_the_mvu_solver():
    # method="auto" on MVU was "lowrank", which had not finished this 100-point roll after
    # 13 minutes (k = 5); the augmented-Lagrangian "mvu" solver converges in seconds (k = 4)
    X, _ = kf.datasets.load("swiss_roll", n_points=100, seed=3)
    kl = KernelLearner(problem="mvu", n_neighbors=4, random_state=0).fit(X)
    assert kl.method_ == "mvu" and kl.result_.status is kf.Status.CONVERGED
    assert kl.result_.certified_gap <= 2e-4


def test_unsupervised_regmvu_ignores_y():
    X, _ = kf.datasets.load("swiss_roll")
    X = X[np.random.default_rng(0).choice(len(X), 50, replace=False)]
    a = KernelLearner(problem="regmvu", n_neighbors=6, random_state=0).fit(X)
    b = KernelLearner(problem="regmvu", n_neighbors=6, random_state=0).fit(X, np.arange(50) % 2)
    assert a.pairs_ is None and a.method_ == "sdp"
    np.testing.assert_allclose(a.embedding_, b.embedding_)


def test_method_options_reach_the_solver(blobs):
    X, y = blobs
    kl = KernelLearner(method_options={"rank": 2}, random_state=0).fit(X, y)
    assert kl.result_.factor.shape[1] == 2 and kl.n_components_ <= 2


# ------------------------------------------------------------------ transform
def _union_laplacian_row(kl, x):
    """Independent construction: the training graph plus x joined to its k nearest
    training points, the normalised Laplacian L' of it (dense), and the minimiser of
    tr(L' K) over x's row with the training rows fixed."""
    Xf = kl._X_fit
    n, k = Xf.shape[0], kl.n_neighbors
    sig = kf.graphs.gaussian_sigma(Xf)
    S = np.zeros((n + 1, n + 1))
    E, d = kf.graphs.knn_edges(Xf, k)
    S[E[:, 0], E[:, 1]] = S[E[:, 1], E[:, 0]] = np.exp(-d**2 / (2 * sig**2))
    dx = np.linalg.norm(Xf - x, axis=1)
    nb = np.argsort(dx)[:k]
    S[n, nb] = S[nb, n] = np.exp(-dx[nb] ** 2 / (2 * sig**2))
    D = S.sum(1)
    L = (1 + kl.delta_) * np.eye(n + 1) - S / np.sqrt(np.outer(D, D))
    return -(L[n, :n] @ kl.embedding_) / L[n, n]


def test_transform_new_points_is_the_harmonic_extension(blobs):
    X, y = blobs
    rng = np.random.default_rng(5)
    Xn = X[:6] + rng.normal(scale=0.3, size=(6, 2))
    for problem in ("pcp", "npkl"):  # delta 0 and 0.01
        kl = KernelLearner(problem=problem, loss="square", extension="harmonic",
                           random_state=0).fit(X, y)
        Gn = kl.transform(Xn)
        for i in range(6):
            np.testing.assert_allclose(Gn[i], _union_laplacian_row(kl, Xn[i]), rtol=1e-10, atol=1e-12)
        # batch independence and training points
        np.testing.assert_allclose(kl.transform(Xn[2:4]), Gn[2:4], rtol=1e-12)
        np.testing.assert_array_equal(kl.transform(X[::-1]), kl.embedding_[::-1])
    # far from the data the harmonic rows shrink towards 0, the mean rows do not
    far = X[:1] + 50.0
    assert np.linalg.norm(kl.transform(far)) < 1e-6
    km = KernelLearner(extension="mean", random_state=0).fit(X, y)
    assert np.linalg.norm(km.transform(far)) > 0.1


def test_transform_default_is_the_weighted_mean_of_the_neighbours_rows(blobs):
    """The default extension: sum_j s_j g_j / sum_j s_j over the k nearest training points,
    Gaussian weights of width sigma_ (the harmonic rule shrank new rows to about 0.77 of
    the training rows' norm, which cost 1-NN accuracy at gamma = 1)."""
    X, y = blobs
    Xn = X[:4] + np.random.default_rng(6).normal(scale=0.3, size=(4, 2))
    kl = KernelLearner(random_state=0).fit(X, y)
    assert kl.extension == "mean"
    for x, g in zip(Xn, kl.transform(Xn)):
        dx = np.linalg.norm(X - x, axis=1)
        nb = np.argsort(dx)[:kl.n_neighbors]
        s = np.exp(-dx[nb] ** 2 / (2 * kl.sigma_**2))
        np.testing.assert_allclose(g, s @ kl.embedding_[nb] / s.sum(), rtol=1e-10, atol=1e-12)


def test_transform_joint_extension_solves_the_union_system(blobs):
    X, y = blobs
    Xn = X[:5] + 0.2
    kl = KernelLearner(problem="npkl", loss="square", extension="joint", random_state=0).fit(X, y)
    L = kf.graphs.knn_laplacian(np.vstack([X, Xn]), k=5, delta=0.01, sigma=kl.sigma_)
    new, old = np.arange(30, 35), np.arange(30)
    exact = sp.linalg.spsolve(L[new][:, new].tocsc(), -(L[new][:, old] @ kl.embedding_))
    np.testing.assert_allclose(kl.transform(Xn), exact, rtol=1e-6, atol=1e-8)


def test_transform_errors(blobs):
    X, y = blobs
    with pytest.raises(ProblemError, match="before fit"):
        KernelLearner().transform(X)
    kl = KernelLearner(random_state=0).fit(X, y)
    with pytest.raises(InputError, match="features"):
        kl.transform(X[:, :1])
    with pytest.raises(InputError, match="NaN"):
        kl.transform(np.full((2, 2), np.nan))
    K = kl.kernel(X[:3] + 0.1)
    assert K.shape == (3, 30)


# ------------------------------------------------------------------ model selection
def test_gridsearchcv_over_gamma_on_soybean_with_knn():
    X, y = kf.datasets.load("soybean")
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    pipe = make_pipeline(KernelLearner(random_state=0), KNeighborsClassifier(1))
    gs = GridSearchCV(pipe, {"kernellearner__gamma": [0.1, 10]}, cv=cv).fit(X, y)
    # measured (docs/estimator.md): mean accuracy 0.725 at gamma = 0.1, 1.0 at gamma = 10
    assert gs.best_params_ == {"kernellearner__gamma": 10}
    assert gs.best_score_ >= 0.95
    assert gs.cv_results_["mean_test_score"][0] < 0.85
    assert gs.predict(X).shape == y.shape


def test_cross_val_score_with_a_linear_svc_on_the_embedding():
    # SVC(kernel="linear") on the embedding is SVC(kernel="precomputed") on the learned K
    X, y = kf.datasets.load("iris")
    X, y = X[::2], y[::2]
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    s = cross_val_score(make_pipeline(KernelLearner(random_state=0), SVC(kernel="linear")), X, y, cv=cv)
    assert s.mean() >= 0.85
    kl = KernelLearner(random_state=0).fit(X[:50], y[:50])
    a = SVC(kernel="linear").fit(kl.embedding_, y[:50]).decision_function(kl.transform(X[50:]))
    b = SVC(kernel="precomputed").fit(kl.kernel(), y[:50]).decision_function(kl.kernel(X[50:]))
    np.testing.assert_allclose(a, b, atol=1e-6)


# ------------------------------------------------------------------ clustering
def test_clustering_fit_predict_is_kernel_kmeans_on_the_embedding():
    X, y = kf.datasets.load("soybean")
    ckc = ConstrainedKernelClustering(learner=KernelLearner(gamma=10, random_state=0), random_state=1)
    labels = ckc.fit_predict(X, y)
    assert ckc.n_clusters is None and len(np.unique(labels)) == 4
    np.testing.assert_array_equal(labels, kernel_kmeans(ckc.embedding_, 4, seed=1))
    assert pairwise_accuracy(y, labels) > 0.95
    np.testing.assert_array_equal(ckc.predict(X), labels)
    assert ckc.predict(X[:5] + 0.01).shape == (5,)
    # explicit pairs, n_clusters given
    pairs = kf.pairs.sample_pairs(y, 20, 20, seed=0)
    lab2 = ConstrainedKernelClustering(4, random_state=0).fit_predict(X, pairs=pairs)
    assert lab2.shape == y.shape
    with pytest.raises(ProblemError, match="requires y"):
        ConstrainedKernelClustering().fit(X, pairs=pairs)


def test_clustering_gridsearch_reaches_the_learner():
    ckc = ConstrainedKernelClustering(learner=KernelLearner())
    ckc.set_params(learner__gamma=3.0)
    assert ckc.learner.gamma == 3.0


# ------------------------------------------------------------------ bad input
BAD = [(name, v) for name, cons in KernelLearner._parameter_constraints.items()
       for v in invalid_examples(cons)]


@pytest.mark.parametrize("name, value", BAD, ids=[f"{n}={v!r}"[:40] for n, v in BAD])
def test_bad_parameter_raises_option_error_before_any_work(monkeypatch, blobs, name, value):
    X, y = blobs

    def boom(*a, **k):  # pragma: no cover - reached only if validation is late
        raise AssertionError("work started before the parameters were checked")

    monkeypatch.setattr("kernelforms.data.graphs.knn_edges", boom)
    monkeypatch.setattr("kernelforms.methods.solve", boom)
    kl = KernelLearner(**{name: value})  # __init__ stores only
    with pytest.raises(OptionError, match=f"The '{name}' parameter of KernelLearner must be"):
        kl.fit(X, y)


@pytest.mark.parametrize("kwargs, fit_kw, exc, match", [
    ({"n_neighbors": 30}, {}, ProblemError, "n_neighbors.*< the number of training points"),
    ({"method": "sdpp"}, {}, SolverNotFound, "Did you mean 'sdp'"),
    ({"problem": "pcpp"}, {}, OptionError, "Did you mean 'pcp'"),
    ({"problem": "regpcp", "method": "dual", "m_basis": 5}, {}, NotApplicable, "dual"),
    ({"problem": "mvu"}, {}, ProblemError, "connected components"),
    ({"n_must": 10**6}, {}, ProblemError, "lower n_must"),
    ({"m_basis": 40, "problem": "regpcp"}, {}, ProblemError, "m_basis"),
    ({}, {"y": None}, ProblemError, "requires y to be passed"),
    ({}, {"y": np.linspace(0, 1, 30)}, InputError, "continuous"),
    ({}, {"pairs": kf.pairs.Pairs([[0, 1]], n=10)}, ProblemError, "n = 10 points"),
    ({}, {"pairs": [[0, 1]]}, ProblemError, "Pairs or a \\(must, cannot\\) tuple"),
    ({"problem": "mvu"}, {"pairs": ([[0, 1]], [])}, ProblemError, "unsupervised"),
])
def test_bad_input_is_a_kernelforms_error(blobs, kwargs, fit_kw, exc, match):
    X, y = blobs
    fit_kw = {"y": y, **fit_kw}
    with pytest.raises(exc, match=match) as info:
        KernelLearner(**kwargs).fit(X, **fit_kw)
    assert isinstance(info.value, KernelformsError)


def test_bad_x_is_an_input_error_with_sklearn_message(blobs):
    X, y = blobs
    with pytest.raises(InputError, match="[Ss]parse"):
        KernelLearner().fit(sp.csr_matrix(X), y)
    with pytest.raises(InputError, match="1 sample"):
        KernelLearner().fit(X[:1], y[:1])
    with pytest.raises(ValueError):  # also a ValueError / TypeError for sklearn code
        KernelLearner().fit(X[:, 0], y)


def test_estimators_are_exported_lazily():
    import kernelforms.estimator as est

    assert kf.KernelLearner is est.KernelLearner
    assert kf.ConstrainedKernelClustering is est.ConstrainedKernelClustering
    assert {"KernelLearner", "ConstrainedKernelClustering"} <= set(kf.__all__)


def test_solver_status_other_than_converged_warns_and_no_kernel_raises(monkeypatch, blobs):
    from kernelforms.result import Result, Status

    X, y = blobs
    G = np.random.default_rng(0).normal(size=(30, 3))

    def fake(status, factor):
        def solve(problem, method, **kw):
            return Result(method=method, status=status, objective=1.0 if factor is not None else np.nan,
                          factor=factor, message="stub")
        return solve

    monkeypatch.setattr("kernelforms.methods.solve", fake(Status.NUMERICAL_ERROR, G))
    with pytest.warns(kf.ConvergenceWarning, match="numerical_error"):
        kl = KernelLearner(random_state=0).fit(X, y)
    assert kl.result_.status is Status.NUMERICAL_ERROR  # reported as it is
    np.testing.assert_allclose(kl.embedding_ @ kl.embedding_.T, G @ G.T, atol=1e-10)
    monkeypatch.setattr("kernelforms.methods.solve", fake(Status.INFEASIBLE, None))
    with pytest.raises(kf.SolverError, match="no usable kernel"):
        KernelLearner(random_state=0).fit(X, y)


CBAD = [(name, v) for name, cons in ConstrainedKernelClustering._parameter_constraints.items()
        for v in invalid_examples(cons)]


@pytest.mark.parametrize("name, value", CBAD, ids=[f"{n}={v!r}"[:40] for n, v in CBAD])
def test_clustering_bad_parameter_raises_option_error(monkeypatch, blobs, name, value):
    X, y = blobs
    monkeypatch.setattr("kernelforms.data.graphs.knn_edges", None)  # any work would fail
    with pytest.raises(OptionError, match=f"The '{name}' parameter of ConstrainedKernelClustering"):
        ConstrainedKernelClustering(**{name: value}).fit(X, y)


def test_clustering_too_many_clusters_fails_before_any_work(monkeypatch, blobs):
    X, y = blobs
    monkeypatch.setattr("kernelforms.methods.solve", None)
    with pytest.raises(ProblemError, match="n_clusters.*<= the number of points n = 30"):
        ConstrainedKernelClustering(31).fit(X, y)


def test_set_output_pandas_names_the_components(blobs):
    pd = pytest.importorskip("pandas")
    X, y = blobs
    kl = KernelLearner(random_state=0).set_output(transform="pandas").fit(X, y)
    df = kl.transform(X[:4] + 0.1)
    assert isinstance(df, pd.DataFrame) and list(df.columns) == list(kl.get_feature_names_out())
    assert df.columns[0] == "kernellearner0"


def test_unlabeled_points_get_no_pairs_but_rows():
    X, y = kf.datasets.load("soybean")
    rng = np.random.default_rng(0)
    y_part = y.copy()
    y_part[rng.choice(len(y), 32, replace=False)] = -1           # 15 labelled points
    kl = KernelLearner(gamma=10, unlabeled=-1, random_state=0).fit(X, y_part)
    lab = np.flatnonzero(y_part != -1)
    used = np.unique(np.concatenate([kl.pairs_.must.ravel(), kl.pairs_.cannot.ravel()]))
    assert set(used) <= set(lab) and kl.pairs_.n == 47
    assert kl.pairs_.n_must + kl.pairs_.n_cannot == 2 * round(0.6 * 15)
    assert np.all(y[kl.pairs_.must[:, 0]] == y[kl.pairs_.must[:, 1]])
    assert kl.embedding_.shape[0] == 47
    ckc = ConstrainedKernelClustering(learner=KernelLearner(gamma=10, unlabeled=-1, random_state=0),
                                      random_state=0)
    labels = ckc.fit_predict(X, y_part)                          # n_clusters: 4, -1 not a class
    assert len(np.unique(labels)) == 4 and pairwise_accuracy(y, labels) > 0.9
    with pytest.raises(ProblemError, match="labelled point"):
        KernelLearner(unlabeled=-1).fit(X, np.full(47, -1))


# ------------------------------------------------------------------ far points, one class, rank, progress
def test_transform_of_a_point_at_1e300_is_finite():
    """A finite point so far away that its squared distances overflow gets the limit of the
    extension (0 for harmonic and joint, the neighbours' mean for mean), never NaN, and the
    other rows of the batch are unchanged."""
    X, y = kf.datasets.load("iris")
    kl = KernelLearner(gamma=10, random_state=0).fit(X[::2], y[::2])
    Q = np.array([[1e300] * 4, [1e200, 0, 0, 0], [1e154, 1, 1, 1], X[1]])
    for e in ("harmonic", "mean", "joint"):
        kl.set_params(extension=e)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            G = kl.transform(Q)
        assert np.all(np.isfinite(G)), e
        assert np.allclose(G[3], kl.transform(X[1:2])[0]), e
        if e != "mean":
            assert np.all(G[:3] == 0.0), e


def test_one_class_y_is_refused_with_the_reason():
    X, y = kf.datasets.load("iris")
    with pytest.raises(ProblemError, match="one class .*n_cannot=0"):
        KernelLearner().fit(X[:50], y[:50])
    # must-links only, asked for explicitly, still fit
    kl = KernelLearner(n_cannot=0, random_state=0).fit(X[:50], y[:50])
    assert kl.pairs_.n_cannot == 0


def test_embedding_keeps_only_the_ranks_columns():
    """The embedding has the kernel's numerical rank in columns, not the factor's 8 (a random
    start at rank 8) with ~1e-7 ones."""
    X, y = _cancer(60, 0)
    kl = KernelLearner(gamma=10, random_state=0, method_options={"init": None}).fit(X, y)
    assert kl.result_.factor.shape[1] == 8
    assert kl.embedding_.shape == (60, kl.result_.rank) and kl.result_.rank <= 3
    K = kl.result_.factor @ kl.result_.factor.T
    assert np.abs(kl.embedding_ @ kl.embedding_.T - K).max() < 1e-6 * np.abs(K).max()


def test_verbose_prints_the_solvers_log_and_a_final_line(capsys):
    X, y = kf.datasets.load("iris")
    KernelLearner(gamma=10, random_state=0, verbose=1).fit(X[::2], y[::2])
    out = capsys.readouterr().out
    assert " lowrank: n = 75" in out
    assert "KernelLearner: lowrank converged," in out and "certified gap" in out


def test_n_jobs_gives_the_same_graph_and_kernel():
    X, y = kf.datasets.load("iris")
    a = KernelLearner(gamma=10, random_state=0).fit(X[::2], y[::2])
    b = KernelLearner(gamma=10, random_state=0, n_jobs=2).fit(X[::2], y[::2])
    assert a.sigma_ == b.sigma_
    assert (a.problem_.laplacian != b.problem_.laplacian).nnz == 0
    assert a.result_.objective == b.result_.objective


def test_the_graph_is_knn_laplacians():
    """fit builds the Laplacian kernelforms.graphs.knn_laplacian builds (its neighbour
    search, the same weights), bit for bit, with each graph_method; iris has tied distances
    at the 5th neighbour, where a search of its own picked other neighbours (509 vs 510 edges)."""
    from kernelforms.data.graphs import gaussian_sigma, knn_laplacian

    X, y = kf.datasets.load("iris")
    for method in ("auto", "exact", "approx"):
        kl = KernelLearner(gamma=1.0, random_state=0, graph_method=method)
        sigma, deg, L = kl._graph(np.asarray(X, float), 0.0)
        assert (L != knn_laplacian(X, k=5, delta=0.0, method=method)).nnz == 0, method
        if method != "approx":
            assert sigma == gaussian_sigma(X)
    kl = KernelLearner(problem="regpcp", random_state=0).fit(X, y)
    assert (kl.problem_.laplacian != knn_laplacian(X, k=5)).nnz == 0
    with pytest.raises(kf.errors.OptionError, match="'graph_method' parameter of KernelLearner"):
        KernelLearner(graph_method="fast").fit(X, y)


def test_label_start_is_the_same_optimum_as_a_random_start():
    """lowrank's start from the class indicators reaches the optimum of a random start
    (fresh subsets, gamma 1 and 100), with a certified gap."""
    from kernelforms.isolation import attach_certificate

    for seed, gamma in ((1, 1.0), (2, 100.0)):
        X, y = _cancer(80, seed)
        kl = KernelLearner(gamma=gamma, random_state=seed).fit(X, y)
        ref = kf.solve(kl.problem_, "lowrank", seed=seed)
        attach_certificate(kl.problem_, kl.result_)
        assert abs(kl.result_.objective - ref.objective) <= 1e-6 * abs(ref.objective)
        assert kl.result_.certified_gap < 1e-6


def test_a_gamma_grid_warm_starts_along_the_path():
    """A second fit on the same data at a larger gamma starts from the first's solution and
    reaches the same optimum as a fit from the labels."""
    from kernelforms import estimator as est

    est._PATH_CACHE.clear()
    X, y = _cancer(80, 3)
    a = KernelLearner(gamma=100, random_state=0).fit(X, y)
    assert a.start_ == "class indicators"
    est._PATH_CACHE.clear()
    KernelLearner(gamma=10, random_state=0).fit(X, y)
    b = KernelLearner(gamma=100, random_state=0).fit(X, y)
    assert b.start_ == "warm start from gamma = 10"
    assert abs(b.result_.objective - a.result_.objective) <= 1e-7 * abs(a.result_.objective)
    # another data set (a fold) does not reuse it
    c = KernelLearner(gamma=100, random_state=0).fit(X[:60], y[:60])
    assert c.start_ == "class indicators"


@pytest.mark.slow  # 2.3 s: an iteration-count comparison of two full fits
def test_lowrank_row_scaling_reaches_the_same_optimum_in_fewer_iterations():
    """lowrank's precondition option (rows scaled by their Hessian blocks) on PCP at
    gamma = 100: the same certified optimum as plain L-BFGS, in fewer iterations."""
    from kernelforms.isolation import attach_certificate
    from kernelforms.problems.factory import build_problem

    X, y = kf.datasets.load("pendigits", n_points=200, seed=5)
    p = build_problem("pcp", X, y, seed=5, gamma=100.0)
    a = kf.solve(p, "lowrank", seed=1, rank=12, precondition=True)
    b = kf.solve(p, "lowrank", seed=1, rank=12)
    for r in (a, b):
        attach_certificate(p, r)
        assert r.status is kf.Status.CONVERGED and r.certified_gap < 1e-6
    assert abs(a.objective - b.objective) <= 1e-7 * abs(b.objective)
    assert a.iterations < b.iterations


def test_a_gamma_grid_search_warm_starts_every_fold_along_the_path():
    """GridSearchCV over gamma (``kernelforms bench estimator --grid``): each fold's fit at
    the larger gamma starts from that fold's solution at the smaller one (the folds are
    different data, so they cannot share); the refit on all points starts from the labels."""
    from kernelforms.bench.estimator import grid

    lines = grid("iris", [1.0, 10.0], seed=0)
    fits = [s for s in lines if s.startswith("  fit on")]
    assert len(fits) == 2 * 3 + 1
    assert [("start: warm start from gamma = 1" in s) for s in fits] == [False] * 3 + [True] * 3 + [False]
    assert "start: class indicators" in fits[-1] and fits[-1].startswith("  fit on 105 points")


def test_bench_itml_column_is_optional(capsys):
    """metric-learn is not a dependency: ``kernelforms bench estimator`` runs ITML in the
    Python given by --itml-python, and without one (or with one that cannot run it) skips
    the row with a message saying how to get it."""
    import importlib.util

    from kernelforms.bench.estimator import _itml

    X, y = np.random.default_rng(0).normal(size=(12, 2)), np.arange(12) % 2
    assert _itml(X, y, X, 0, "/nonexistent/python") is None
    assert "--itml-python '/nonexistent/python' cannot be run" in capsys.readouterr().err
    if importlib.util.find_spec("metric_learn") is None:
        assert _itml(X, y, X, 0, None) is None
        assert "pass --itml-python PATH" in capsys.readouterr().out
