"""The certificate's refusals about a declaration are data: its Capabilities decide, and the
sentence is the one generator's (Capabilities.why), not the certificate's own."""

from __future__ import annotations

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import certificate
from kernelforms import model as km


def _points(n=12, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.normal(size=(3, 4))[y] * 3 + rng.normal(size=(n, 4))
    return X, kf.pairs.sample_pairs(y, n_must=4, n_cannot=4, seed=seed)


def _hinge(constraints=()):
    X, P = _points()
    n = X.shape[0]
    return kf.DeclaredProblem(km.Declaration(
        km.PSD(n), losses=[km.LossTerm(km.Entries(n, P.indices), km.Hinge(P.signs), 1.0)],
        constraints=list(constraints)), name="hinge")


def _basis(B):
    n = B.shape[0]
    return kf.DeclaredProblem(km.Declaration(
        km.Basis(B, orthonormal=False),
        losses=[km.LossTerm(km.Diagonal(n), km.Squared(np.ones(n)), 1.0)]), name="basis")


def test_no_trace_rule_is_a_capabilities_mismatch_worded_by_the_generator():
    p = _hinge()
    miss = certificate.CAPABILITIES.mismatch(p)
    assert miss is not None and miss.what == "trace_rule"
    why = certificate.applies(p)
    assert why == certificate.CAPABILITIES.why(p, certificate.HEAD, certificate.WHO)
    assert why.startswith("the certificate needs a bound on tr(K*)") and "hinge loss" in why
    with pytest.raises(kf.NotApplicable, match=r"no bound on tr\(K\*\) follows"):
        certificate.certify(p, np.ones((p.declaration.n, 1)))
    # only >= rows on distances bound no trace either; an upper bound on one distance does
    E = [[0, 1], [1, 2]]
    n = p.declaration.n
    ge = _hinge([km.Constraint(km.Distances(n, E), ">=", np.ones(2))])
    assert certificate.CAPABILITIES.mismatch(ge).what == "trace_rule"
    le = _hinge([km.Constraint(km.Distances(n, E), "<=", np.ones(2))])
    assert certificate.CAPABILITIES.mismatch(le) is None and certificate.applies(le) is None


def test_a_rank_deficient_basis_is_a_capabilities_mismatch():
    B = np.random.default_rng(1).normal(size=(10, 3))
    assert certificate.applies(_basis(B)) is None  # not orthonormal, full rank: made orthonormal
    B[:, 2] = B[:, 0] - B[:, 1]
    p = _basis(B)
    assert certificate.CAPABILITIES.mismatch(p).what == "basis_rank"
    why = certificate.applies(p)
    assert why == certificate.CAPABILITIES.why(p, certificate.HEAD, certificate.WHO)
    assert "does not have full column rank" in why


def test_a_divergence_is_worded_from_the_mismatch_by_escape_and_mvu_multipliers():
    X, P = _points(16, 2)
    p = kf.BregmanLowRank.from_data(X, np.arange(16) % 4, rank=4, n_constraints=6, seed=2)
    assert certificate.applies(p) is None
    V = np.linalg.qr(np.random.default_rng(0).normal(size=(16, 2)))[0]
    with pytest.raises(kf.NotApplicable, match="this problem has the Burg divergence D"):
        certificate.escape(p, V)
    with pytest.raises(kf.NotApplicable, match="this problem has the Burg divergence D"):
        certificate.mvu_multipliers(p, V)
    npkl = kf.NPKL.from_data(X, P)
    with pytest.raises(kf.NotApplicable, match="this problem has no constraint rows"):
        certificate.mvu_multipliers(npkl, np.ones((16, 1)))


def test_the_certificate_reads_the_factored_oracle_where_it_states_the_same_problem():
    from kernelforms.model import oracle

    X, P = _points(16, 2)
    npkl = kf.NPKL.from_data(X, P, loss="square")
    view = certificate.minimisation(npkl)
    assert view.oracle is oracle(npkl)  # one object, kept on the declaration
    V = np.random.default_rng(0).normal(size=(16, 3))
    assert view.objective(V) == pytest.approx(npkl.declaration.objective(kf.LowRank(V)), rel=1e-14)
    assert view.value(V) == view.objective(V)  # a minimisation
    z = view.loss_values(V)
    assert len(z) == 1 and np.array_equal(z[0], npkl.declaration.losses[0].map.apply(kf.LowRank(V)))
    # a maximisation: the oracle minimises its negation, the objective keeps the problem's sense
    mvu = kf.MVU.from_data(kf.datasets.load("swiss_roll", n_points=14, seed=0)[0])
    mv = certificate.minimisation(mvu)
    assert mv.oracle is not None
    assert mv.objective(V[:14]) == pytest.approx(mvu.declaration.objective(kf.LowRank(V[:14])), rel=1e-14)
    assert mv.value(V[:14]) == -mv.objective(V[:14])
    # merged points (the oracle's factor has the merged rows) and a divergence: not read
    hard = kf.PCP.from_data(X, P, hard=True)
    assert certificate.minimisation(hard).oracle is None
    assert certificate.minimisation(hard).objective(V) == hard.declaration.objective(kf.LowRank(V))
    burg = kf.BregmanLowRank.from_data(X, np.arange(16) % 4, rank=4, n_constraints=6, seed=2)
    assert certificate.minimisation(burg).oracle is None
