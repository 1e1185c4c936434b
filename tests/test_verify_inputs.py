"""verify's arguments are checked before any work: a bad ``rtol`` (a string, NaN, negative,
infinite or loose), ``n_points`` beyond what fits, ``deep`` not a bool, and a problem without
points are clear errors naming the parameter, never a false verdict or a MemoryError."""

from __future__ import annotations

import time
import types

import numpy as np
import pytest

import kernelforms as kf

pytest.importorskip("cvxpy")

import test_formulations as tf  # noqa: E402

P1 = tf.INSTANCES["P1"]


def test_verify_rtol_abc_is_a_clear_error():
    with pytest.raises(kf.ProblemError, match=r"The 'rtol' parameter of verify must be a float in \(0, 0.001\]"
                                              r".* Got 'abc' instead"):
        kf.verify(P1, "sqlp", rtol="abc")


@pytest.mark.parametrize("rtol", [float("nan"), -1.0, 0.0, True], ids=["nan", "minus-one", "zero", "bool"])
def test_verify_rtol_nan_or_negative_is_refused_not_a_false_failure(rtol):
    assert kf.verify(P1, "sqlp").passed  # the formulation is correct
    with pytest.raises(kf.ProblemError, match="'rtol' parameter of verify"):
        kf.verify(P1, "sqlp", rtol=rtol)


@pytest.mark.parametrize("rtol", [float("inf"), 1.0, 0.5], ids=["inf", "one", "half"])
def test_verify_rtol_inf_is_refused_not_a_pass_of_anything(rtol):
    with pytest.raises(kf.ProblemError, match="'rtol' parameter of verify"):
        kf.verify(P1, "sqlp", rtol=rtol)


def test_verify_rtol_within_range_is_accepted():
    res = kf.verify(P1, "sqlp", rtol=1e-3)
    assert res.passed and all(c.tol in (1e-3, 1e-7, 1e-6, 0.0) for c in res.checks)
    assert kf.verify(P1, "sqlp", rtol=np.float32(1e-6)).passed


def test_verify_n_points_ten_million_is_refused_before_any_work():
    t0 = time.perf_counter()
    with pytest.raises(kf.ProblemError, match=r"'n_points' parameter of verify must be an integer in \[3, 1000\]"):
        kf.verify(P1, "sqlp", n_points=10**7)
    assert time.perf_counter() - t0 < 1.0


def test_verify_n_points_over_the_memory_bound_is_refused_before_any_work():
    # 1,000 points of a 1,200-point problem: 11.5 GB of random kernels
    big = types.SimpleNamespace(declaration=types.SimpleNamespace(n=1200))
    t0 = time.perf_counter()
    with pytest.raises(kf.ProblemError, match=r"'n_points' parameter of verify is too large.*use n_points <= 93"):
        kf.verify(big, "sdp", n_points=1000)
    assert time.perf_counter() - t0 < 1.0


def test_verify_refuses_a_problem_too_large_for_dense_points_before_any_work():
    huge = types.SimpleNamespace(declaration=types.SimpleNamespace(n=2**20))
    t0 = time.perf_counter()
    with pytest.raises(kf.ProblemError, match="too large to verify .* verify the formulation on a smaller"):
        kf.verify(huge, "sdp")
    assert time.perf_counter() - t0 < 1.0


def test_verify_refuses_a_problem_without_points():
    empty = types.SimpleNamespace(declaration=types.SimpleNamespace(n=0))
    with pytest.raises(kf.ProblemError, match="n = 0 points; there is no kernel to check"):
        kf.verify(empty, "sdp")


def test_verify_refuses_an_empty_declared_problem():
    from kernelforms import model as km

    try:  # the vocabulary may refuse PSD(0) itself, which is as clear
        p = kf.DeclaredProblem(km.Declaration(km.PSD(0), linear=[km.LinearTerm(km.Trace(0))]), name="empty")
    except kf.ProblemError:
        return
    with pytest.raises(kf.ProblemError, match="n = 0 points"):
        kf.verify(p, "sdp")


def test_verify_deep_must_be_a_bool():
    with pytest.raises(kf.ProblemError, match="The 'deep' parameter of verify must be True or False. Got 'yes'"):
        kf.verify(P1, "sqlp", deep="yes")
