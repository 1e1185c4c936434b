"""Equality MVU on the face of its cliques (Krislock & Wolkowicz 2010): the reduction of the
chain (kernelforms.model.chain.FaceOfCliques, chain_on_face) and its inverse."""

from __future__ import annotations

import functools

import numpy as np

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
