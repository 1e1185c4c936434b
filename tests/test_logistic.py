"""The logistic loss (kernelforms.model.Logistic, NPKL(loss="logistic")): one class in
kernelforms/model/losses.py, read by the full SDP, the dual, lowrank and the certificate
through the loss's properties only.

Measured (30-point subsets, 10 must- and 10 cannot-links, OPENBLAS_NUM_THREADS=1, load ~6 on
2 cores): sdp:clarabel, dual:clarabel and lowrank agree to 9.5e-9 (iris), 4.4e-9 (wine),
1.9e-9 (soybean) relative; lowrank's point is certified to 7.8e-9, 2.7e-7, 8.3e-8.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import certificate
from kernelforms.data.datasets import load
from kernelforms.result import Status

NAMES = ("iris", "wine", "soybean")


def _problem(name: str, loss: str = "logistic") -> kf.NPKL:
    X, y = load(name, seed=0, n_points=30)
    return kf.NPKL.from_data(X, kf.pairs.sample_pairs(y, 10, 10, seed=1), loss=loss)


@pytest.mark.parametrize("name", NAMES)
def test_sdp_dual_and_lowrank_agree_and_are_certified(name):
    p = _problem(name)
    res = {m: kf.solve(p, m) for m in ("sdp:clarabel", "dual:clarabel", "lowrank")}
    for m, r in res.items():
        assert r.status in (Status.OPTIMAL, Status.CONVERGED), (m, r.status, r.message)
    ref = res["lowrank"].objective
    for m, r in res.items():
        assert abs(r.objective - ref) <= 2e-8 * abs(ref), (m, r.objective, ref)
    # the certificate's lower bound sits below every method's value, and is tight at lowrank's
    cert = certificate.certify(p, res["lowrank"].kernel)
    assert cert.relative_gap <= 1e-6, cert
    for r in res.values():
        assert cert.lower_bound <= r.objective + 1e-9 * abs(r.objective)
    # the objective is tr(L K) + gamma sum log(1 + exp(-T_ij K_ij)), written out
    K = res["lowrank"].kernel.dense() if hasattr(res["lowrank"].kernel, "dense") else \
        np.asarray(res["lowrank"].kernel)
    idx, T = p.signed_pairs
    direct = float(np.sum(p.laplacian.toarray() * K)) + p.gamma * float(
        np.sum(np.log1p(np.exp(-T * K[idx[:, 0], idx[:, 1]]))))
    assert p.objective(K) == pytest.approx(direct, rel=1e-12)


def test_the_certificate_bounds_the_optimum_from_poor_points():
    p = _problem("iris")
    opt = kf.solve(p, "lowrank").objective
    rng = np.random.default_rng(3)
    for scale in (0.05, 0.3, 1.0):
        c = certificate.certify(p, kf.LowRank(rng.normal(size=(p.n, 3)) * scale))
        assert c.lower_bound <= opt + 1e-9 * abs(opt), (scale, c)
        assert c.gap > 1e-3  # far from the optimum the gap says so


def test_methods_that_cannot_take_it_say_why():
    why = kf.applicable_methods(_problem("iris"))
    assert {m for m, r in why.items() if r is None} == {"sdp", "dual", "lowrank"}
    assert "no closed form" in why["bcd"] and "logistic" in why["bcd"]
    for m in ("scsdp", "sqlp", "admm"):
        assert "squared" in why[m] and "logistic" in why[m], (m, why[m])
    assert "hinge" in why["smo"] and "logistic" in why["smo"]


def test_the_loss_class_and_its_conjugate():
    loss = kf.model.Logistic([1, -1, 1])
    z = np.array([-800.0, 0.0, 800.0])  # no overflow at large margins
    assert np.all(np.isfinite(loss.value(z))) and np.all(np.isfinite(loss.grad(z)))
    np.testing.assert_allclose(loss.value(np.zeros(3)), np.log(2.0))
    # l*(u) = a log a + (1 - a) log(1 - a) with u = -a y, a in [0, 1]; Fenchel-Young is tight at u = l'(z)
    z = np.array([0.3, -1.2, 2.0])
    u = loss.grad(z)
    np.testing.assert_allclose(loss.value(z) + loss.conjugate(u), u * z, rtol=1e-12, atol=1e-14)
    lo, hi = loss.conjugate_domain()
    np.testing.assert_array_equal(lo, [-1.0, 0.0, -1.0])
    np.testing.assert_array_equal(hi, [0.0, 1.0, 0.0])
    assert np.all(np.isinf(loss.conjugate(np.array([0.1, -0.1, -1.1]))))
    assert loss.smooth and not loss.piecewise_linear and loss.row_update is None and loss.exp_cone


def test_explain_lists_the_exponential_cones():
    p = _problem("iris")
    for m in ("sdp", "dual"):
        text = str(kf.explain(p, m))
        assert "exponential cones" in text and "40 cones" in text, (m, text)
    assert "log(1 + exp(-y_p K_ij))" in str(kf.explain(p, "sdp"))


@pytest.mark.parametrize("method", ["sdp", "dual"])
def test_verify_passes(method):
    v = kf.verify(_problem("iris"), method)
    assert v.passed, v


def test_cli_and_estimator_take_it(capsys):
    from kernelforms.cli import main as cli
    from kernelforms.estimator import KernelLearner

    assert cli(["methods", "npkl", "--dataset", "iris", "--n-points", "30", "--loss", "logistic"]) == 0
    out = capsys.readouterr().out
    assert "lowrank" in out and "no closed form" in out
    X, y = load("iris", seed=0, n_points=40)
    est = KernelLearner(problem="npkl", loss="logistic").fit(X, y)
    assert est.method_ == "lowrank"  # "auto": bcd has no row update for it
    assert np.all(np.isfinite(est.transform(X)))
