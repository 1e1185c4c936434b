"""Sizes are checked before anything is allocated: declared problems of 2**40 points, the
hand-written solvers' memory models against measured peaks, and data generation.

Each test is named after the symptom it guards against.
"""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import model as km
from kernelforms.errors import KernelformsError, NotApplicable
from kernelforms.methods import get_method
from kernelforms.testing import build_from_recipe

HUGE = 2**40


def _huge(kind: str):
    n = HUGE
    losses = [km.LossTerm(km.Entries(n, [[0, 1], [0, 0], [1, 1]]), km.Squared([1.0, 1.0, 1.0]), 0.5)]
    if kind == "npkl":
        losses = [km.LossTerm(km.Entries(n, [[0, 1], [2, 3]]), km.Squared([1.0, -1.0]), 1.0)]
    return kf.DeclaredProblem(km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(n))],
                                             losses=losses), name=f"huge {kind}")


@pytest.mark.parametrize("method,kind", [("dual", "pcp"), ("admm", "pcp"), ("bcd", "pcp"),
                                         ("simplenpkl", "npkl"), ("sdp", "pcp"), ("sqlp", "pcp"),
                                         ("lowrank", "pcp")])
def test_declared_problem_of_2_40_points_is_refused_not_a_raw_memoryerror(method, kind):
    p = _huge(kind)
    with pytest.raises(NotApplicable) as exc:
        kf.solve(p, method)
    msg = str(exc.value)
    assert f"method '{method}" in msg and ("max_memory" in msg or "RAM" in msg), msg
    # plan says the same without raising
    from kernelforms.methods import plan

    row = plan(p, [method])[0]
    assert not row.will_run


def test_a_raised_max_memory_is_used_by_the_structure_guard_too():
    n = 2**22
    p = kf.DeclaredProblem(km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(n))], losses=[
        km.LossTerm(km.Entries(n, [[0, 1]]), km.Squared([1.0]), 1.0)]))
    need = p.declaration.cost_bytes()
    with pytest.raises(NotApplicable, match=r"linear cost of n = 4194304 points .* above max_memory"):
        kf.solve(p, "admm", max_memory=need // 2)
    # within the limit the cost is built and the method's own model decides
    with pytest.raises(NotApplicable, match=r"would need about .* of working memory"):
        kf.solve(p, "admm", max_memory=need + 2**20)


def _digits(kind, n):
    return build_from_recipe({"problem": kind, "dataset": "digits", "n_points": n, "seed": 0})


def test_bcd_accepting_2_mb_then_adding_73_mib_is_refused_at_the_start():
    # the dense duality-gap check of 1,797 points (about 77 MiB) is in bcd's model now
    p = _digits("pcp", 1797)
    m = get_method("bcd")
    assert m.estimate_memory(p, m.resolve_options({})) > 77 * 2**20
    with pytest.raises(NotApplicable, match="max_memory"):
        kf.solve(p, "bcd", max_memory="2MB")


def test_admm_accepting_6_mb_then_adding_35_mib_is_refused_at_the_start():
    # the subspace step's Hessian assembly is in admm's model now
    p = _digits("pcp", 1797)
    m = get_method("admm")
    assert m.estimate_memory(p, m.resolve_options({})) > 35 * 2**20
    with pytest.raises(NotApplicable, match="max_memory"):
        kf.solve(p, "admm", max_memory="6MB")


@pytest.mark.slow  # 10-25 s each under tracemalloc on a loaded 2-core machine
@pytest.mark.parametrize("method,kind,n", [("admm", "pcp", 300), ("bcd", "pcp", 200),
                                           ("simplenpkl", "npkl", 150), ("bcd", "npkl", 150)])
def test_measured_peak_of_a_solve_stays_under_its_memory_estimate(method, kind, n):
    """tracemalloc's peak (every numpy array) of a whole solve at the default options, run
    with max_memory set to the method's own estimate."""
    small = _digits(kind, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kf.solve(small, method)  # the modules and caches a first call loads are not the solve's
        p = _digits(kind, n)
        m = get_method(method)
        est = m.estimate_memory(p, m.resolve_options({}))
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            res = kf.solve(p, method, max_memory=est)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    assert res.status.value in ("converged", "max_iter"), res.message
    assert peak <= est, f"{method}: peak {peak / 2**20:.2f} MiB above the estimate {est / 2**20:.2f} MiB"


@pytest.mark.parametrize("cls", [kf.MVU, kf.RegMVU])
def test_mvu_of_2_40_points_is_refused_not_a_raw_memoryerror(cls):
    with pytest.raises(kf.errors.ProblemError, match=r"has 1099511627774 connected components \(1099511627773 of the n = 1099511627776 points are on no edge\)"):
        cls([[0, 1], [1, 2]], [1.0, 1.0], HUGE)


@pytest.mark.parametrize("G0", ["abc", [["a", "b"], ["c", "d"]], np.eye(3)[:, :2] * 1j])
def test_bregman_with_a_string_or_complex_g0_gives_a_clear_error(G0):
    from kernelforms.problems.bregman import LinearConstraints

    with pytest.raises(kf.errors.ProblemError, match=r"The 'G0' parameter of BregmanLowRank must be"):
        kf.BregmanLowRank(G0, LinearConstraints.diagonal(3))


def test_a_billion_generated_points_are_refused_before_drawing():
    import time

    t0 = time.perf_counter()
    with pytest.raises(kf.errors.DataError, match=r"n = 1000000000 points needs about .* above the memory limit"):
        kf.datasets.load("two_gaussians", n_points=10**9)
    assert time.perf_counter() - t0 < 1.0
    # a raised limit (what compare --max-memory sets) lets a larger set through
    from kernelforms.model.checks import limit_memory

    with pytest.raises(kf.errors.DataError, match="above the memory limit of 1 KiB"):
        with limit_memory(1024):
            kf.datasets.load("chessboard", n_points=100)


def test_cli_compare_of_a_billion_points_exits_with_an_error_before_generating(capsys):
    from kernelforms.cli import main

    code = main(["compare", "pcp", "--dataset", "two_gaussians", "--n-points", "1000000000",
                 "--methods", "admm"])
    err = capsys.readouterr().err
    assert code not in (0, None) and "needs about" in err and "Traceback" not in err
