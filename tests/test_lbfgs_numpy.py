"""The numpy L-BFGS of lowrank's preconditioned runs (kernelforms.solvers._lbfgs)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize as scipy_minimize

from kernelforms.solvers import _lbfgs


def _quartic(A: np.ndarray, b: np.ndarray):
    def fun(x):
        r = A @ x - b
        f = 0.5 * float(r @ r) + 0.25 * float(np.sum(x**4))
        return f, A.T @ r + x**3
    return fun


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((60, 40)) * np.exp(rng.uniform(-2, 2, 40))  # ill-conditioned
    return _quartic(A, rng.standard_normal(60)), rng.standard_normal(40)


def test_it_reaches_the_minimum_scipy_reaches(problem):
    fun, x0 = problem
    ours = _lbfgs.minimize(fun, x0, maxiter=5000, maxcor=10)
    ref = scipy_minimize(fun, x0, jac=True, method="L-BFGS-B",
                         options={"maxiter": 5000, "maxcor": 10, "gtol": 0.0, "ftol": 1e-16})
    assert ours.status == 0 and "RELATIVE REDUCTION" in ours.message
    assert ours.fun == pytest.approx(ref.fun, rel=1e-10)
    assert np.max(np.abs(ours.jac)) < 1e-6 * max(1.0, np.max(np.abs(fun(x0)[1])))
    assert np.allclose(ours.x, ref.x, atol=1e-5)


def test_the_statuses_are_l_bfgs_b_s(problem):
    fun, x0 = problem
    capped = _lbfgs.minimize(fun, x0, maxiter=7, maxcor=10)
    assert capped.status == 1 and capped.nit == 7 and not capped.success
    seen = []

    def stop(ir):
        seen.append(ir.fun)
        if len(seen) == 3:
            raise StopIteration

    stopped = _lbfgs.minimize(fun, x0, maxiter=100, callback=stop)
    assert stopped.status == 99 and stopped.nit == 3 and stopped.fun == seen[-1]
    assert all(b < a for a, b in zip(seen, seen[1:]))  # every iteration decreases f
    nan = _lbfgs.minimize(lambda x: (float("nan"), np.zeros_like(x)) if x[0] != x0[0] else fun(x),
                          x0, maxiter=10)
    assert nan.status == 2 and nan.nit == 0 and np.array_equal(nan.x, x0)
