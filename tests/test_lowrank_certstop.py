"""lowrank's certified early stop (option ``stop_gap``) of its unconstrained L-BFGS runs."""

from __future__ import annotations

import pytest

import kernelforms as kf
import kernelforms.solvers.lowrank as lr
from kernelforms.certificate import certify
from kernelforms.errors import OptionError
from kernelforms.problems.factory import build_problem


@pytest.fixture(scope="module")
def pcp():
    X, y = kf.datasets.load("pendigits", n_points=150, seed=0)
    return build_problem("pcp", X, y, seed=0, gamma=100.0)


@pytest.fixture
def eager(monkeypatch):
    """Every chunk's end counts as stalled, so the rule is tried from the first chunks on
    (the run is too short for a real stall)."""
    monkeypatch.setattr(lr.certstop, "CERTSTOP_STALL", 1.0)


@pytest.mark.parametrize("precondition", [True, False])
def test_the_certified_stop_fires_and_the_point_is_certified(pcp, eager, precondition):
    full = kf.solve(pcp, "lowrank", seed=1, rank=12, precondition=precondition, stop_gap=0.0)
    early = kf.solve(pcp, "lowrank", seed=1, rank=12, precondition=precondition, stop_gap=1e-4)
    assert full.status is kf.Status.CONVERGED and "certified gap" not in full.message
    assert "certstop_checks" not in full.extras  # stop_gap = 0: no check at all
    assert early.status is kf.Status.CONVERGED
    assert "certified gap" in early.message and "<= stop_gap 0.0001 at iteration" in early.message and "of this solve" in early.message
    assert early.iterations < full.iterations
    # the stop's claim holds at the returned factor, and it is the same optimum within it
    gap = certify(pcp, early.factor).relative_gap
    assert 0 <= gap <= 1e-4
    assert early.objective - full.objective <= 1e-4 * abs(full.objective)


def test_a_point_not_certified_does_not_stop_early(pcp, eager):
    full = kf.solve(pcp, "lowrank", seed=1, rank=12, precondition=True, stop_gap=0.0)
    # checks run but no point is certified within 1e-14
    tight = kf.solve(pcp, "lowrank", seed=1, rank=12, precondition=True, stop_gap=1e-14)
    checks = tight.extras["certstop_checks"]
    assert len(checks) >= 2 and all(g is None or g > 1e-14 for _, g, _ in checks)
    assert "certified gap" not in tight.message
    assert tight.iterations == full.iterations and tight.objective == full.objective


def test_the_checks_are_spaced_by_doubling_iterations(pcp, eager):
    """Each check waits until twice the iteration of the last one (their number is
    bounded, and it does not depend on the clock: two identical calls agree)."""
    a = kf.solve(pcp, "lowrank", seed=1, rank=12, precondition=False, stop_gap=1e-14)
    its = [k for k, _, _ in a.extras["certstop_checks"]]
    assert len(its) >= 3 and all(b >= 2 * c for c, b in zip(its, its[1:]))
    b = kf.solve(pcp, "lowrank", seed=1, rank=12, precondition=False, stop_gap=1e-14)
    assert [k for k, _, _ in b.extras["certstop_checks"]] == its
    assert (a.iterations, a.objective) == (b.iterations, b.objective)


def test_stop_gap_must_be_a_nonnegative_number(pcp):
    with pytest.raises(OptionError, match="stop_gap"):
        kf.solve(pcp, "lowrank", stop_gap=-1.0)


def test_the_stop_certificate_is_the_results_and_is_computed_once(eager, monkeypatch):
    """The certificate that fired the stop is handed on to the result: neither the rank
    growth (an escape) nor the status check (certify) computes it again at that factor."""
    import kernelforms.certificate as C

    calls = {"certify": 0, "escape": 0}
    for name in calls:
        real = getattr(C, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(C, name, counted)
    from kernelforms import KernelLearner

    X, y = kf.datasets.load("pendigits", n_points=150, seed=0)
    kl = KernelLearner(gamma=100, random_state=0).fit(X, y)  # the rank grows from the labels' start
    res, pcp = kl.result_, kl.problem_
    assert res.status is kf.Status.CONVERGED and "certified gap" in res.message
    fired = res.certstop_fired
    assert calls == {"certify": len(res.extras["certstop_checks"]), "escape": 0}
    assert "certified by the solve's stop" in res.rank_growth
    # the result carries that certificate: a fresh one at the returned factor agrees
    assert res.certified_gap == fired["relative_gap"] <= 1e-4
    fresh = certify(pcp, res.factor)
    assert res.lower_bound == pytest.approx(fresh.lower_bound, rel=1e-12, abs=0)


def test_a_check_that_fails_at_one_point_is_retried(pcp, eager, monkeypatch):
    """A certificate that fails at one point (there: ARPACK found no eigenvalue, so no
    bound) does not end the checks: the next stalled chunk tries again."""
    import kernelforms.certificate as C
    from kernelforms.errors import NotApplicable

    real, calls = C.certify, []

    def flaky(problem, K, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise NotApplicable("no certificate: lambda_min of the minorant is -inf < 0 (test)")
        return real(problem, K, **kw)

    monkeypatch.setattr(C, "certify", flaky)
    res = kf.solve(pcp, "lowrank", seed=1, rank=12, precondition=True, stop_gap=1e-4)
    checks = res.extras["certstop_checks"]
    assert len(checks) >= 2 and checks[0][1] is None and checks[1][1] is not None
    assert res.status is kf.Status.CONVERGED and "certified gap" in res.message
