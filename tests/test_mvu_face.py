"""Equality MVU on the face of its cliques (Krislock & Wolkowicz 2010): the reduction of the
chain (kernelforms.model.chain.FaceOfCliques, chain_on_face) and its inverse."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.model.chain import FaceOfCliques, chain, chain_on_face
from kernelforms.model.faces import clique_face
from kernelforms.result import LowRank


@functools.lru_cache(maxsize=None)
def _problem(n, seed, equality=True):
    X, _ = kf.datasets.load("swiss_roll", n_points=n, seed=seed)
    return kf.MVU.from_data(X, k=4, equality=equality)


def test_a_clique_of_points_in_3d_fixes_an_affine_dependency():
    # 6 points in 3-D, every distance fixed: any realisation is an affine image of rank 3, so
    # the face has dimension 1 + 3 (with 1), i.e. p = 3 after the centring
    rng = np.random.default_rng(0)
    P = rng.normal(size=(6, 3))
    i, j = np.triu_indices(6, 1)
    sq = np.sum((P[i] - P[j]) ** 2, axis=1)
    F = clique_face(6, i, j, sq)
    assert F.p == 3 and F.reducing == 1 and len(F.cliques) == 1
    Pc = P - P.mean(axis=0)
    assert np.allclose(F.U @ (F.U.T @ Pc), Pc)  # the points' own realisation lies in the face
    assert np.allclose(F.U.T @ F.U, np.eye(3)) and np.allclose(F.U.sum(axis=0), 0.0)
    # 5 points of a 4-simplex (rank 4): no reduction
    P4 = rng.normal(size=(5, 4))
    i, j = np.triu_indices(5, 1)
    assert clique_face(5, i, j, np.sum((P4[i] - P4[j]) ** 2, axis=1)).reducing == 0


def test_the_optimum_lies_in_the_face_and_the_chain_inverts_back():  # clarabel, 1-12 s
    p = _problem(40, 0)
    decl = p.declaration
    ch = chain_on_face(decl)
    assert ch.applied == ("face", "max_to_min") and "Krislock & Wolkowicz 2010" in ch.describe()
    F = FaceOfCliques().face(decl)
    assert F.p == 37 and F.reducing == 2  # two 5-cliques: two dimensions fewer than 1^perp
    # every feasible kernel lies in the face (30 points, seed 0: one 5-clique): the data's
    # own centred Gram matrix, exactly feasible, to round-off
    q = _problem(30, 0)
    Fq = FaceOfCliques().face(q.declaration)
    assert Fq.reducing == 1 and Fq.p == 28
    P = Fq.U @ Fq.U.T
    X = kf.datasets.load("swiss_roll", n_points=30, seed=0)[0]
    Xc = X - X.mean(axis=0)
    K0 = Xc @ Xc.T
    assert q.violation(LowRank(Xc)) <= 1e-12 * float(q.distances.max() ** 2)
    assert np.linalg.norm(K0 - P @ K0 @ P) <= 1e-12 * np.linalg.norm(K0)
    # and so does the optimum: sdp:clarabel's kernel, when it ends optimal (7e-10 off the
    # face then; on some machines it ends optimal_inaccurate here, 2e-8 off it)
    res = kf.solve(q, "sdp:clarabel")
    if res.status.value == "optimal":
        G = np.asarray(res.factor)
        K = G @ G.T
        assert np.linalg.norm(K - P @ K @ P) <= 1e-7 * np.linalg.norm(K)
    # the inverse: a factor of Y (p rows) is lifted by U, a factor of K passes; objectives kept
    Y = np.random.default_rng(1).normal(size=(F.p, 3))
    Gy, value = ch.invert(Y, ch.reduced.objective(LowRank(F.U @ Y)))
    assert Gy.shape == (40, 3) and np.allclose(Gy, F.U @ Y)
    assert abs(decl.objective(LowRank(Gy)) - value) <= 1e-12 * abs(value)
    assert abs(float(np.sum(Gy.sum(axis=0) ** 2))) < 1e-20  # the centring holds
    assert decl.violation(LowRank(Gy)) >= 0.0
    # the reduced declaration states the same rows on K = U Y U^T
    assert abs(ch.reduced.violation(LowRank(F.U @ Y)) - decl.violation(LowRank(Gy))) <= 1e-12 * max(
        1.0, decl.violation(LowRank(Gy)))


def test_the_face_is_opt_in_and_leaves_other_declarations_alone():
    p = _problem(40, 0)
    assert "face" not in chain(p.declaration).applied  # the default chain is unchanged
    assert chain_on_face(_problem(40, 0, equality=False).declaration).applied == ("max_to_min", "centre")
    # RegMVU (a loss, a basis form) is not reduced
    reg = kf.RegMVU.from_data(kf.datasets.load("swiss_roll", n_points=40, seed=0)[0], k=4)
    assert "face" not in chain_on_face(reg.declaration).applied


# ----------------------------------------------------------------- the sparse face and mvu on it
def _rows(p):
    from kernelforms.model import canonical

    (rows,) = canonical(p.declaration).constraint_blocks.values()
    return rows.i, rows.j, rows.bound


def test_the_sparse_rows_span_the_same_face_as_the_dense_basis():
    import scipy.sparse as sp

    from kernelforms.model.faces import clique_rows

    p = _problem(40, 0)
    i, j, b = _rows(p)
    R = clique_rows(40, i, j, b)
    F = clique_face(40, i, j, b)
    assert sp.issparse(R.A) and sp.issparse(R.W) and sp.issparse(R.Z)
    assert R.reducing == F.reducing == 2 and R.q == 2 and R.Z.shape[1] == 38
    W, Z = R.W.toarray(), R.Z.toarray()
    assert np.allclose(W.T @ W, np.eye(2)) and np.allclose(Z.T @ Z, np.eye(38))
    assert np.abs(W.T @ Z).max() < 1e-14 and R.residual(Z) < 1e-14
    # null(A) = span(Z) = span(U) + span(1)
    Zc = Z - Z.mean(axis=0)
    assert np.linalg.norm(Zc - F.U @ (F.U.T @ Zc)) < 1e-12
    x = np.random.default_rng(0).normal(size=(40, 3))
    Px = R.project(x)
    assert np.allclose(Px, F.U @ (F.U.T @ x))


def test_duplicated_cliques_make_a_rank_deficient_a_and_the_face_is_unchanged(monkeypatch):
    from kernelforms.model import faces

    p = _problem(40, 0)
    i, j, b = _rows(p)
    R = faces.clique_rows(40, i, j, b)
    cl = list(faces.maximal_cliques(40, i, j))
    R2 = faces.clique_rows(40, i, j, b, cliques=cl + cl)
    assert R2.A.shape[0] == 2 * R.A.shape[0] and np.linalg.matrix_rank(R2.A.toarray()) == R.q
    assert R2.q == R.q and R2.Z.shape == R.Z.shape
    x = np.random.default_rng(1).normal(size=(40, 2))
    assert np.allclose(R2.project(x), R.project(x))
    # and mvu on that face (its KKT rows are the range basis: the dependent rows dropped)
    monkeypatch.setattr(faces, "maximal_cliques", lambda n, i, j, min_size=4: cl + cl)
    res = kf.solve(p, "mvu", face=True, seed=0)
    ref = kf.solve(_problem(40, 0), "mvu", face=True, seed=0)
    assert res.extras["face"]["rows"] == 4 and res.extras["face"]["codimension"] == 2
    assert res.status.value == ref.status.value == "converged"
    assert abs(res.objective - ref.objective) <= 2 * 2e-4 * ref.objective


@pytest.mark.parametrize("n, seed", [(20, 0), (20, 4), (30, 5),
                                     pytest.param(40, 3, marks=pytest.mark.slow)])
def test_mvu_on_the_face_agrees_with_clarabel_and_its_bound_holds(n, seed):  # clarabel ~1 s
    from kernelforms.model.faces import clique_rows

    p = _problem(n, seed)
    ref = kf.solve(p, "sdp:clarabel")
    if ref.status.value != "optimal":
        pytest.skip(f"Clarabel ended {ref.status.value} on this machine")
    res = kf.solve(p, "mvu", face=True, seed=0)
    assert res.status.value == "converged"
    opt = ref.objective
    # the bound is valid for the original problem: every feasible K lies in the face
    assert res.upper_bound >= opt * (1 - 1e-7)
    # the point: feasible to feas_tol, within its certified gap of the optimum
    assert res.extras["relative_violation"] <= 1e-5
    assert opt - res.objective <= res.certified_gap * res.objective + 1e-9 * opt
    # above the optimum only by what its violation can buy (converged: at most gap_tol)
    assert res.objective <= opt * (1 + 2e-4)
    # and on the face: A K = 0 to rounding (the unreduced solver's K is 1e-6..1e-4 off it)
    G = np.asarray(res.factor)
    R = clique_rows(n, *_rows(p))
    assert R.reducing >= 1
    assert R.residual(G) <= 1e-12 * np.abs(G).max()
    assert abs(float(np.sum(G.sum(axis=0) ** 2))) <= 1e-20 * float(np.sum(G * G))


def test_the_face_restricted_slack_eigenvalue_sparse_path_matches_dense():
    from kernelforms.model.faces import clique_rows
    from kernelforms.solvers.mvu_parts import dual_slack_min_eig

    p = _problem(500, 1)
    i, j, b = _rows(p)
    R = clique_rows(500, i, j, b)
    assert R.q >= 5
    lam = np.random.default_rng(0).uniform(0.5, 2.0, len(i)) * 50.0
    dense, xd, _ = dual_slack_min_eig(500, i, j, lam, dense_below=1000, face=R)
    sparse, xs, how = dual_slack_min_eig(500, i, j, lam, dense_below=0, face=R)
    full, _, _ = dual_slack_min_eig(500, i, j, lam, dense_below=1000)
    assert "inertia" in how and sparse <= dense + 1e-9 * abs(dense)
    assert abs(sparse - dense) <= 1e-6 * max(1.0, abs(dense))
    assert dense >= full - 1e-9 * abs(full)  # a restriction cannot lower the minimum
    for x in (xd, xs):  # the eigenvectors lie in the face, centred
        assert R.residual(x) < 1e-10 and abs(x.sum()) < 1e-10


def test_bad_face_options_are_refused_before_any_work():
    from kernelforms.errors import OptionError

    p = _problem(40, 0)
    with pytest.raises(OptionError, match="face"):
        kf.solve(p, "mvu", face="yes")
    with pytest.raises(OptionError, match="face.*equality|equality.*face"):
        kf.solve(_problem(40, 0, equality=False), "mvu", face=True)


@pytest.mark.parametrize("shift", [1e-3, 1e-9])  # positive definite; indefinite (constants)
def test_the_restricted_newton_system_is_the_dense_reduced_one(shift):
    import scipy.sparse as sp

    from kernelforms.model.faces import clique_rows
    from kernelforms.solvers.mvu_parts import _NewtonPattern

    n, r = 120, 3
    p = _problem(n, 2)
    i, j, b = _rows(p)
    t = b / b.max()
    R = clique_rows(n, i, j, t)
    assert R.q >= 2
    rng = np.random.default_rng(0)
    V = R.project(rng.normal(size=(n, r)))
    U = V[i] - V[j]
    lam = rng.uniform(-1.0, 3.0, len(t)) * 1e3
    sigma = 1e3 * np.abs(lam) / np.maximum(t, np.median(t))
    w = lam + sigma * (np.einsum("ij,ij->i", U, U) - t)
    a = np.arange(r)
    blk = 4.0 * sigma[:, None, None] * U[:, :, None] * U[:, None, :]
    blk[:, a, a] += 2.0 * w[:, None]
    rho = float(np.abs(blk).max()) * shift
    plain, face = _NewtonPattern(i, j, n, r), _NewtonPattern(i, j, n, r, R)
    lu, neg = face.factor(face.assemble(blk.ravel()), rho - 2.0)
    plain.factor(plain.assemble(blk.ravel()), rho - 2.0)
    H = (plain.A + plain.A.T - sp.diags(plain.Adiag)).toarray()  # H + (rho - 2) I, all of it
    Zr = np.kron(R.Z.toarray(), np.eye(r))
    Hr = Zr.T @ H @ Zr
    ev = np.linalg.eigvalsh(Hr)
    assert neg == int(np.sum(ev < 0))  # the inertia on the face, constants included
    g = R.project(rng.normal(size=(n, r))).ravel()
    z = face.solve(lu, -g, 2)
    exact = Zr @ np.linalg.solve(Hr, -Zr.T @ g)
    assert np.linalg.norm(z - exact) <= 1e-8 * np.linalg.norm(exact)
    assert R.residual(z.reshape(n, r)) <= 1e-12 * np.abs(z).max()
