"""Bad numbers and fresh machines: problem inputs and instance fingerprints.

Each test is named after the symptom a user met (see docs/errors.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.data import graphs as gr
from kernelforms.problems.bregman import LinearConstraints

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def iris30():
    X, y = kf.datasets.load("iris")
    return X[::5], y[::5]


# ---------------------------------------------------------------------- fingerprints
_FINGERPRINT_SCRIPT = r"""
import json, sys
import numpy as np
import kernelforms as kf
from kernelforms.testing import build_from_recipe
out = {}
for kind in ("pcp", "regmvu", "bregman"):
    recipe = {"problem": kind, "dataset": "iris" if kind != "bregman" else "pendigits",
              "n_points": 30 if kind != "bregman" else 60, "seed": 0}
    if kind == "regmvu":
        recipe["k"] = 8
    p = build_from_recipe(recipe)
    out[kind] = p.fingerprint()
    if kind == "regmvu":
        out["regmvu_basis_projector"] = float(np.round(np.sum((p.basis @ p.basis.T)[:5, :5]), 8))
# the same P1 built in Python: one instance, one fingerprint
X, y = kf.datasets.load("iris", n_points=30, seed=0)
out["pcp_python"] = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, seed=0)).fingerprint()
print(json.dumps(out))
"""


def _fingerprints(threads):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    if threads is not None:
        env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", _FINGERPRINT_SCRIPT], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fingerprints_here_on_one_thread():
    """The same script in this process with every BLAS / OpenMP pool limited to one thread
    (one interpreter start less than a second child with OPENBLAS_NUM_THREADS=1)."""
    from threadpoolctl import threadpool_limits

    namespace: dict = {}
    with threadpool_limits(limits=1), contextlib.redirect_stdout(io.StringIO()):
        exec(_FINGERPRINT_SCRIPT, namespace)
    return json.loads(json.dumps(namespace["out"]))


def test_fingerprints_and_bases_do_not_depend_on_the_blas_thread_count():
    # one thread here, the default thread count in a fresh interpreter
    one, default = _fingerprints_here_on_one_thread(), _fingerprints(None)
    assert one == default
    assert one["pcp"] == one["pcp_python"]  # the recipe's build and Python's: one instance


def test_cli_built_and_python_built_soybean_p1_share_the_fingerprint(tmp_path):
    from kernelforms.cli import main

    out = tmp_path / "report.json"
    code = main(["compare", "pcp", "--dataset", "soybean", "--methods", "sdp:clarabel",
                 "--json", str(out), "--quiet"])
    assert code == 0
    report = json.loads(out.read_text())
    X, y = kf.datasets.load("soybean")
    p = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, seed=0))
    assert report["fingerprint"] == p.fingerprint()
    # the same instance: the CLI's optimum is the Python problem's objective at its kernel
    row = next(r for r in report["rows"] if r["method"] == "sdp:clarabel")
    res = kf.solve(p, "sdp:clarabel")
    assert abs(res.objective - row["objective"]) <= 1e-6 * abs(res.objective)


def test_one_instance_has_one_fingerprint_however_it_is_built(iris30):
    from kernelforms.problems.factory import build_problem

    X, y = iris30
    P = kf.pairs.sample_pairs(y, seed=0)
    a = kf.PCP.from_data(X, P)
    same = [
        build_problem("pcp", X, y, seed=0),                       # the CLI's and recipes' path
        kf.PCP.from_data(X.tolist(), P, k=5, delta=0, gamma=1),   # defaults given, other types
        kf.PCP.from_data(np.asfortranarray(X), P),                # another memory layout
        kf.PCP.from_data(X, (P.must[::-1, ::-1], P.cannot)),      # pairs in another order
    ]
    assert all(b.fingerprint() == a.fingerprint() for b in same)
    for kind in ("npkl", "regpcp", "pcp-hard", "mvu", "regmvu"):
        cls = {"npkl": kf.NPKL, "regpcp": kf.RegPCP, "pcp-hard": kf.PCP, "mvu": kf.MVU,
               "regmvu": kf.RegMVU}[kind]
        extra = {"hard": True} if kind == "pcp-hard" else {}
        if kind in ("mvu", "regmvu"):  # iris30: 10 neighbours connect the graph
            py, cli = cls.from_data(X, k=10), build_problem(kind, X, y, seed=0, k=10)
        else:
            py, cli = cls.from_data(X, P, **extra), build_problem(kind, X, y, seed=0)
        assert cli.fingerprint() == py.fingerprint(), kind
    b = kf.BregmanLowRank.from_data(X, y, rank=3, n_constraints=20, seed=1)
    assert build_problem("bregman", X, y, seed=1, rank=3, n_constraints=20).fingerprint() == b.fingerprint()


def test_different_instances_have_different_fingerprints(iris30):
    X, y = iris30
    P = kf.pairs.sample_pairs(y, seed=0)
    a = kf.PCP.from_data(X, P)
    X2 = X.copy()
    X2[3, 1] += 1e-12
    others = [
        kf.PCP.from_data(X, P, gamma=1.5), kf.PCP.from_data(X, P, hard=True),
        kf.PCP.from_data(X, P, k=6), kf.PCP.from_data(X, P, delta=0.01), kf.PCP.from_data(X2, P),
        kf.PCP.from_data(X, (P.must[1:], P.cannot)), kf.PCP.from_data(X, kf.pairs.sample_pairs(y, seed=1)),
        kf.NPKL.from_data(X, P, delta=0.0, loss="square"), kf.RegPCP.from_data(X, P),
        kf.PCP(a.laplacian, P),  # given its matrix: defined by the matrix
    ]
    prints = [a.fingerprint()] + [o.fingerprint() for o in others]
    assert len(set(prints)) == len(prints)


def test_fingerprint_hashes_the_definition_not_derived_floats(iris30):
    X, y = iris30
    P = kf.pairs.sample_pairs(y, seed=0)
    a = kf.PCP.from_data(X, P)
    # the same data built twice: same fingerprint; a parameter or a point changed: different
    assert a.fingerprint() == kf.PCP.from_data(X.copy(), P).fingerprint()
    assert a.fingerprint() != kf.PCP.from_data(X, P, gamma=2.0).fingerprint()
    X2 = X.copy()
    X2[0, 0] += 1e-9
    assert a.fingerprint() != kf.PCP.from_data(X2, P).fingerprint()
    # a Laplacian whose last bits differ (as with another BLAS) does not change a
    # from_data fingerprint, because the fingerprint never reads L
    L = a.laplacian.copy()
    L.data = L.data * (1 + 1e-15)
    object.__setattr__(a, "laplacian", L)
    assert a.fingerprint() == kf.PCP.from_data(X, P).fingerprint()
    # Bregman: G0 comes out of an SVD; the fingerprint hashes X, y and the recipe
    b1 = kf.BregmanLowRank.from_data(X, y, rank=3, n_constraints=20, seed=1)
    b2 = kf.BregmanLowRank.from_data(X, y, rank=3, n_constraints=20, seed=1)
    assert b1.fingerprint() == b2.fingerprint()
    assert b1.fingerprint() != kf.BregmanLowRank.from_data(X, y, rank=3, n_constraints=20,
                                                           seed=2).fingerprint()


def test_a_repeated_eigenvalue_at_the_basis_cut_gives_a_canonical_basis():
    # a cycle graph: every nonzero eigenvalue of its Laplacian has multiplicity 2, so a
    # basis of 2 eigenvectors after the constant one cuts a pair in half
    n = 12
    i = np.arange(n)
    A = np.zeros((n, n))
    A[i, (i + 1) % n] = A[(i + 1) % n, i] = 1
    L = np.diag(A.sum(1)) - A
    vals, Q = gr.smallest_eigenvectors(L, 3, skip=1)  # a pair, then half of the next pair
    np.testing.assert_allclose(L @ Q, Q * vals, atol=1e-10)  # still eigenvectors
    np.testing.assert_allclose(Q.T @ Q, np.eye(3), atol=1e-12)
    # another LAPACK may return any rotation within each repeated eigenvalue: the
    # result must not change
    true_eigh = gr._bottom_eigenpairs

    def rotated(M, count):
        w, V = true_eigh(M, count)
        V = V.copy()
        c, s = np.cos(0.7), np.sin(0.7)
        for a in range(1, count - 1, 2):  # pairs (1, 2), (3, 4), ... share an eigenvalue
            V[:, [a, a + 1]] = V[:, [a, a + 1]] @ np.array([[c, -s], [s, c]])
        return w, V

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gr, "_bottom_eigenpairs", rotated)
        _, Q2 = gr.smallest_eigenvectors(L, 3, skip=1)
    np.testing.assert_allclose(Q2 @ Q2.T, Q @ Q.T, atol=1e-10)
    # the rotation matters: taken as they come, the two LAPACK answers span different spaces
    _, Vt = true_eigh(L, 6)
    _, Vr = rotated(L, 6)
    assert np.abs(Vt[:, 1:4] @ Vt[:, 1:4].T - Vr[:, 1:4] @ Vr[:, 1:4].T).max() > 1e-2


# ---------------------------------------------------------------------- bad numbers
def test_x_scaled_by_1e154_gives_the_same_pcp_not_cannot_reshape(iris30):
    X, y = iris30
    P = kf.pairs.sample_pairs(y, seed=0)
    ref = kf.PCP.from_data(X, P).laplacian.toarray()
    for s in (1e154, 1e200, 1e-200):
        np.testing.assert_allclose(kf.PCP.from_data(X * s, P).laplacian.toarray(), ref,
                                   atol=1e-12)


def test_mvu_distances_of_1e200_are_refused_not_unbounded():
    E = np.array([[0, 1], [1, 2]])
    with pytest.raises(kf.ProblemError, match="overflow"):
        kf.MVU(E, np.array([1e200, 1.0]), 3)
    t = np.linspace(0, 1, 20)
    with pytest.raises(kf.ProblemError, match="Rescale"):
        kf.MVU.from_data(np.c_[t, t**2] * 1e200, k=3)


@pytest.mark.parametrize("build", [
    lambda X, y, P: kf.PCP.from_data(X + 1j, P),
    lambda X, y, P: kf.MVU.from_data(X + 0j, k=8),
    lambda X, y, P: kf.BregmanLowRank.from_data(X + 1j, y, rank=3),
    lambda X, y, P: kf.MVU(np.array([[0, 1]]), np.array([1 + 1j]), 2),
])
def test_complex_input_is_refused_not_silently_made_real(iris30, build):
    X, y = iris30
    with pytest.raises(kf.ProblemError, match="complex"):
        build(X, y, kf.pairs.sample_pairs(y, seed=0))


def test_complex_kernel_is_refused_by_the_objective(iris30):
    X, y = iris30
    p = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, seed=0))
    with pytest.raises(kf.ProblemError, match="complex"):
        p.objective(np.eye(p.n) + 0j)


@pytest.mark.parametrize("bad", [2**70, "a", None, 1.5, float("nan")])
def test_linear_constraints_with_index_2_70_a_or_none_give_a_kernelforms_error(bad):
    with pytest.raises(kf.ProblemError, match="'i' parameter of LinearConstraints"):
        LinearConstraints([bad, 1], [1, 2], [0, 0], [0, 0], [1.0, 1.0])
    with pytest.raises(kf.ProblemError, match="'bound'"):
        LinearConstraints([0, 1], [1, 2], [0, 0], [0, 0], ["x", 1.0])


@pytest.mark.parametrize("seed", ["abc", -1, 1.5, True])
def test_from_data_seed_abc_gives_a_kernelforms_error(iris30, seed):
    X, y = iris30
    with pytest.raises(kf.ProblemError, match="'seed' parameter"):
        kf.BregmanLowRank.from_data(X, y, rank=3, seed=seed)
    with pytest.raises(kf.ProblemError, match="'seed' parameter"):
        kf.pairs.sample_pairs(y, seed=seed)


def test_print_problem_is_one_line(iris30):
    X, y = iris30
    P = kf.pairs.sample_pairs(y, seed=0)
    t = np.linspace(0, 1, 20)
    for p in (kf.PCP.from_data(X, P), kf.NPKL.from_data(X, P), kf.RegPCP.from_data(X, P),
              kf.MVU.from_data(np.c_[t, t**2], k=3),
              kf.BregmanLowRank.from_data(X, y, rank=3)):
        text = repr(p)
        assert "\n" not in text and len(text) < 160 and p.fingerprint() in text, text
        assert text.startswith(f"<{type(p).__name__}(n=")


def test_the_graph_search_is_part_of_a_from_data_fingerprint():
    """Two graphs built by different neighbour searches are two instances: the approximate
    search's fingerprint differs from the exact one's; "auto" (exact at this size) and
    "exact" keep the fingerprint instances had before the option (pinned below)."""
    X, y = kf.datasets.load("iris")
    P = kf.pairs.sample_pairs(y, seed=0)
    pinned = {kf.PCP: "67409a93043536f4", kf.NPKL: "5aa215a81c39f5eb", kf.RegPCP: "806400a9752dbba0"}
    for cls, before in pinned.items():
        auto, exact = cls.from_data(X, P), cls.from_data(X, P, graph_method="exact")
        approx = cls.from_data(X, P, graph_method="approx")
        assert auto.fingerprint() == exact.fingerprint() == before, cls.__name__
        assert approx.fingerprint() != exact.fingerprint(), cls.__name__
    with pytest.raises(kf.errors.ProblemError, match="'graph_method' parameter of PCP.from_data must be one of 'exact', 'approx', 'auto'"):
        kf.PCP.from_data(X, P, graph_method="fast")
