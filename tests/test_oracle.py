"""The factored oracle (kernelforms.model.oracle): its value is the declaration's objective at
the problem's factor, its gradient and Hessian-vector products are the derivatives of that
value, its constraint rows are the declaration's residuals, and it is built once."""

from __future__ import annotations

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import model as km
from kernelforms.result import LowRank

from test_applicability_golden import INSTANCES, instance

#: every golden instance lowrank's oracle covers (K PSD or K = B Y B^T, no divergence):
#: merged points (hard PCP), a maximisation (MVU, the logistic one), centring (MVU), bases
COVERED = [name for name in INSTANCES if not name.startswith("bregman")]


def _point(orc, seed=0, r=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((orc.rows, r)), rng.standard_normal((orc.rows, r))


@pytest.mark.parametrize("name", COVERED)
def test_value_gradient_hessian_and_rows_are_the_declarations(name):
    p = instance(name)
    decl = p.declaration
    orc = km.oracle(decl)
    assert orc is km.oracle(p)  # computed once, kept on the declaration
    H, P = _point(orc)
    G = orc.to_G(H)
    f, g = orc.smooth(G)
    # the value: the declaration's objective at the problem's factor
    Gp = orc.problem_factor(G)
    assert orc.sign * orc.scale**2 * f == pytest.approx(decl.objective(LowRank(Gp)), rel=1e-10, abs=1e-10)
    # the gradient and the Hessian along P (central differences, in H)
    V = orc.to_G(P)
    eps = 1e-5
    fp, gp = orc.smooth(orc.to_G(H + eps * P))
    fm, gm = orc.smooth(orc.to_G(H - eps * P))
    scale = max(1.0, abs(f))
    assert (fp - fm) / (2 * eps) == pytest.approx(float(np.sum(orc.to_H_grad(g) * P)), abs=1e-6 * scale)
    hv = orc.to_H_grad(orc.hessp(G, V))
    assert np.allclose((orc.to_H_grad(gp) - orc.to_H_grad(gm)) / (2 * eps), hv, atol=1e-5 * scale)
    # the constraint rows: the reduced declaration's residuals, in the oracle's units
    ce, ci = orc.constraints(G)
    assert ce.size == orc.n_eq and ci.size == orc.n_ineq
    # (the declaration's violation at the problem's factor: merged rows are duplicates, a
    # centred factor keeps 1^T K 1 = 0)
    assert orc.violation(ce, ci) * orc.scale**2 == pytest.approx(decl.violation(LowRank(Gp)),
                                                                 rel=1e-9, abs=1e-9)
    if orc.constrained:
        # the scatter is the gradient of w . c
        w_e = np.random.default_rng(1).standard_normal(orc.n_eq)
        lin = float(np.sum(orc.scatter(G, orc.eq, w_e) * V))
        cp, _ = orc.constraints(G + eps * V)
        cm, _ = orc.constraints(G - eps * V)
        assert lin == pytest.approx(float(w_e @ (cp - cm)) / (2 * eps), abs=1e-6 * max(1.0, abs(lin)))


@pytest.mark.parametrize("name", COVERED)
def test_value_and_ray_are_smooths_value(name):
    """value(G) is smooth's f; ray(G, v)(t) is f at the factor [G, sqrt(t) v]."""
    orc = km.oracle(instance(name))
    H, P = _point(orc, 2)
    G, v = orc.to_G(H), orc.to_G(P)[:, 0]
    f = orc.smooth(G)[0]
    assert orc.value(G) == pytest.approx(f, rel=1e-12, abs=1e-12)
    along = orc.ray(G, v)
    assert along(0.0) == pytest.approx(f, rel=1e-12, abs=1e-12)
    for t in (0.25, 3.0):
        want = orc.smooth(np.hstack([G, np.sqrt(t) * v[:, None]]))[0]
        assert along(t) == pytest.approx(want, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("name", ["pcp_p1_soft", "npkl_p6_square"])
def test_subspace_quadratic_is_the_objective_on_the_subspace(name):
    """y^T Q y + q^T y + const = f(B Y B^T) for every symmetric Y (the constant read at Y = 0),
    and a loss that is not quadratic in K_ij is refused."""
    p = instance(name)
    orc = km.oracle(p)
    rng = np.random.default_rng(4)
    B = rng.standard_normal((orc.n, 3))
    Q, q, (a, b) = orc.subspace_quadratic(B)
    const = orc.value(np.zeros((orc.n, 1)))
    for _ in range(3):
        Y = rng.standard_normal((3, 3))
        Y = Y @ Y.T  # PSD: f(B Y B^T) = f at the factor B Y^(1/2)
        w, U = np.linalg.eigh(Y)
        y = Y[a, b]
        want = orc.value(B @ (U * np.sqrt(np.maximum(w, 0.0))))
        assert float(y @ Q @ y + q @ y) + const == pytest.approx(want, rel=1e-10)
    hinge = km.oracle(instance("npkl_p6_hinge"))
    with pytest.raises(ValueError, match="quadratic"):
        hinge.subspace_quadratic(B)


def test_the_dual_slack_is_the_gradient_of_the_lagrangian():
    """<S, D> at lam = 0 is the derivative of f along K -> K + t D (D = V V^T)."""
    orc = km.oracle(instance("declared_max_logistic"))
    G, V = _point(orc, 3)
    S = orc.dual_slack(G, np.zeros(orc.n_eq), np.zeros(orc.n_ineq))
    # f(G G^T + t V V^T) = f of the factor [G, sqrt(t) V]
    t = 1e-6
    f0, _ = orc.smooth(G)
    f1, _ = orc.smooth(np.hstack([G, np.sqrt(t) * V]))
    assert float(np.sum(V * S.matmat(V))) == pytest.approx((f1 - f0) / t, rel=1e-4)


def test_a_divergence_has_no_oracle_and_the_conflict_is_kept():
    with pytest.raises(ValueError, match="needs K PSD or K = B Y B.T and no divergence"):
        km.oracle(instance("bregman_p7_burg"))
    # a cannot-link inside a must-link chain: infeasible, found by the merge
    n = 3
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(n))], constraints=[
        km.Constraint(km.Entries(n, [[0, 0], [1, 1], [2, 2], [0, 1], [1, 2], [0, 2]]), "==",
                      [1, 1, 1, 1, 1, 0])])
    orc = km.oracle(decl)
    assert orc.conflict is not None and (0, 2) in orc.conflict_pairs
    res = kf.solve(kf.DeclaredProblem(decl, name="conflict"), "lowrank")
    assert res.status is kf.Status.INFEASIBLE and "(0, 2)" in res.message
