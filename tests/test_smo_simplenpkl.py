"""Trust at the defaults for "smo" and "simplenpkl": time limits, memory guard, option
declarations, NaN robustness and the verbose table (regressions named after the symptom)."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.errors import NotApplicable, OptionError
from kernelforms.result import Status


def _two_gaussians_npkl(n, loss, seed=0):
    X, y = kf.datasets.two_gaussians(n, d=10, seed=seed)
    return kf.NPKL.from_data(X, kf.pairs.sample_pairs(y, n // 2, n // 2, seed=seed), loss=loss)


def _timed(p, method, **opts):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(p, method, **opts)
    return res, time.perf_counter() - t


@pytest.fixture(scope="module")
def small_square():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = np.repeat([0, 1], 10)
    return kf.NPKL.from_data(X, kf.pairs.sample_pairs(y, 5, 5, seed=0), loss="square")


# ----------------------------------------------------------------------------- simplenpkl
def test_simplenpkl_returns_within_time_limit_on_300_points():
    # square loss at n = 300 needs ~20 s (8 saddle-point iterations of Lanczos runs);
    # it used to overrun the limit by one whole kernel computation (6.8 s measured)
    p = _two_gaussians_npkl(300, "square")
    res, elapsed = _timed(p, "simplenpkl", time_limit=1.0)
    assert res.status is Status.TIMEOUT
    assert elapsed <= 1.0 + 2.0


@pytest.mark.parametrize("opts", [{"step": math.nan}, {"step": math.inf}, {"max_iter": 2.5},
                                  {"max_iter": "5"}, {"tol": math.nan}, {"B": math.inf},
                                  {"p": 2.0}, {"rank": 0}])
def test_simplenpkl_nan_step_and_bad_options_raise_option_error(small_square, opts):
    # step = nan used to loop forever in the line search, ignoring time_limit; the others
    # were raw TypeError / ValueError tracebacks
    name = next(iter(opts))
    with pytest.raises(OptionError, match=f"'{name}' option of simplenpkl"):
        kf.solve(small_square, "simplenpkl", **opts)


def test_simplenpkl_misspelt_options_name_the_right_one(small_square):
    for bad in ("maxiter", "max_outer"):
        with pytest.raises(kf.errors.SolverError, match="did you mean 'max_iter'"):
            kf.solve(small_square, "simplenpkl", **{bad: 3})


def test_simplenpkl_nan_dual_is_numerical_error_not_a_hang(small_square, monkeypatch):
    import kernelforms.solvers.simplenpkl as mod

    real = mod.negative_part
    calls = {"n": 0}

    def poisoned(A, k0, dense_below=200, deadline=None):
        calls["n"] += 1
        w, V = real(A, k0, dense_below, deadline)
        return (w * np.nan, V) if calls["n"] > 2 else (w, V)

    monkeypatch.setattr(mod, "negative_part", poisoned)
    res, elapsed = _timed(small_square, "simplenpkl", time_limit=30)
    assert res.status is Status.NUMERICAL_ERROR
    assert "line search" in res.message
    assert elapsed < 10
    assert res.factor is not None and np.all(np.isfinite(res.factor))  # the last finite iterate


def test_simplenpkl_verbose_prints_the_iteration_table(small_square, capsys):
    _timed(small_square, "simplenpkl", verbose=True, max_iter=5)
    out = capsys.readouterr().out
    assert "simplenpkl: n = 20" in out and "rel. gap" in out
    assert out.count("\n") >= 5 + 4
