"""The time limit of ``mvu`` is honoured inside its long stages (the inner Newton steps, the
dual slack's eigenvalue, the projection onto the rows, the landmark start), and what a
timeout returns is honest: the point it measured and a bound that was proved."""

from __future__ import annotations

import functools
import math
import time
import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.bench.mvu import find_roll
from kernelforms.solvers import mvu_alm, mvu_parts

#: above the dense eigenvalue path (400 points): the shift-invert Lanczos one is tested
N = 500


@functools.lru_cache(maxsize=None)
def _problem():
    X, _, skipped = find_roll(N, 1, 5, connected=True)
    assert skipped is None
    return kf.MVU.from_data(X, k=5, equality=False)


@functools.lru_cache(maxsize=None)
def _reference():
    """A converged run: its objective is (to feas_tol) a feasible value, so every valid upper
    bound is at least about it."""
    # on the real clock, whichever test asks first (a test that patched the clock, then
    # asked for the reference, made it a timeout: the result depended on the test order)
    patched, mvu_parts.clock = mvu_parts.clock, time.perf_counter
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", kf.errors.ConvergenceWarning)
            res = kf.solve(_problem(), "mvu", time_limit=300)
    finally:
        mvu_parts.clock = patched
    assert res.status.value == "converged"
    return res


def _edges_lam(seed=0):
    p = _problem()
    E = p.edges
    lam = np.random.default_rng(seed).uniform(0.5, 2.0, len(E))
    return p.n, E[:, 0], E[:, 1], lam


def _honest(res):
    """The returned point's own violation and the bound's validity."""
    p = _problem()
    dmax2 = float(np.max(p.distances) ** 2)
    ref = _reference()
    # extras carry the violation of the point returned, not of an earlier or later one
    assert res.extras["relative_violation"] == pytest.approx(res.violation / dmax2, rel=1e-6, abs=1e-12)
    if res.upper_bound is not None and math.isfinite(res.upper_bound):
        # a bound is never better than was checked: at least the optimum (up to the
        # reference's feasibility tolerance)
        assert res.upper_bound >= ref.objective * (1 - 1e-5)
        assert res.certified_gap == pytest.approx(
            (res.upper_bound - res.objective) / res.objective, rel=1e-6, abs=1e-9)


def test_a_tiny_time_limit_returns_timeout_promptly_and_honestly():
    with pytest.warns(kf.errors.ConvergenceWarning):
        t0 = time.perf_counter()
        res = kf.solve(_problem(), "mvu", time_limit=0.05)
        wall = time.perf_counter() - t0
    assert res.status.value == "timeout"
    assert res.factor is not None and res.factor.shape[0] == N
    # generous: the whole run at this size takes seconds; a timeout must not run it out
    assert wall < 0.05 + 30.0
    _honest(res)


def test_the_eigen_stage_checks_the_deadline_with_nothing_proved_no_bound(monkeypatch):
    n, i, j, lam = _edges_lam()
    monkeypatch.setattr(mvu_parts, "clock", lambda: math.inf)  # the deadline is past already
    val, x, how = mvu_parts.dual_slack_min_eig(n, i, j, lam, 0.0, deadline=1.0)
    assert val == -math.inf and "time limit" in how and not np.any(x)


def test_the_eigen_stage_returns_the_last_proved_shift_on_the_deadline(monkeypatch):
    n, i, j, lam = _edges_lam()
    exact = mvu_parts.dual_slack_min_eig(n, i, j, lam, dense_below=10**9)[0]
    calls = []

    def clock():  # time passes the deadline right after the first inertia test began
        calls.append(1)
        return 0.0 if len(calls) <= 1 else math.inf

    monkeypatch.setattr(mvu_parts, "clock", clock)
    val, _, how = mvu_parts.dual_slack_min_eig(n, i, j, lam, exact - 0.05, deadline=1.0)
    assert "time limit" in how
    assert math.isfinite(val) and val <= exact + 1e-9  # proved by the inertia: a lower bound
    assert len(calls) == 2  # one factorisation, then the check that stopped it
    # without a deadline the same call runs to its Ritz value
    monkeypatch.setattr(mvu_parts, "clock", time.perf_counter)
    full, _, how_full = mvu_parts.dual_slack_min_eig(n, i, j, lam, exact - 0.05, deadline=None)
    assert "time limit" not in how_full and full == pytest.approx(exact, abs=1e-6)
    assert full > val


def test_the_deadline_passing_inside_the_eigen_stage_ends_the_solve(monkeypatch):
    """A clock that jumps past the deadline during the second outer iteration's eigenvalue
    computation: the solve stops there with ``timeout``, no further outer iteration."""
    real = time.perf_counter
    state = {"late": False, "eig_calls": 0, "how": []}
    monkeypatch.setattr(mvu_parts, "clock", lambda: math.inf if state["late"] else real())
    original = mvu_alm.dual_slack_min_eig

    def eig(*args, **kw):
        state["eig_calls"] += 1
        if state["eig_calls"] == 2:
            state["late"] = True  # time runs out inside this call
        out = original(*args, **kw)
        state["how"].append(out[2])
        return out

    monkeypatch.setattr(mvu_alm, "dual_slack_min_eig", eig)
    with pytest.warns(kf.errors.ConvergenceWarning):
        res = kf.solve(_problem(), "mvu", time_limit=1000)
    assert res.status.value == "timeout"
    assert "time limit" in state["how"][1]
    # the outer iteration whose eigen stage ran out is the last one (its <= lift included)
    assert len(res.history["objective"]) <= 2
    assert state["eig_calls"] <= 3
    _honest(res)


def test_the_projection_and_the_start_stop_at_the_deadline(monkeypatch):
    p = _problem()
    E, t = p.edges, p.distances**2 / float(np.max(p.distances) ** 2)
    V = np.random.default_rng(1).standard_normal((p.n, 3))
    V -= V.mean(axis=0)
    monkeypatch.setattr(mvu_parts, "clock", lambda: math.inf)
    W, viol = mvu_parts.project_to_edges(V, E[:, 0], E[:, 1], t, 1e-9, ineq=True, deadline=1.0)
    assert W is V  # no step taken
    U = V[E[:, 0]] - V[E[:, 1]]
    assert viol == pytest.approx(float(np.max(np.maximum(np.sum(U * U, 1) - t, 0))))
    # the landmark start keeps the dim + 1 landmarks it needs, no more, once time is up
    Y = mvu_parts.landmark_isomap(p.n, E[:, 0], E[:, 1], np.sqrt(t), 3, 50,
                                  np.random.default_rng(0), deadline=1.0)
    assert Y.shape == (p.n, 3) and np.all(np.isfinite(Y))
