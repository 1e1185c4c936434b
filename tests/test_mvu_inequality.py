"""Inequality MVU (Sun, Boyd, Xiao & Diaconis 2006): distance rows ``<= d_ij^2``."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.errors import ProblemError
from kernelforms.model import EQ, LE


@functools.lru_cache(maxsize=None)
def _roll(n, seed):
    X, _ = kf.datasets.load("swiss_roll", n_points=n, seed=seed)
    X.flags.writeable = False
    return X


@functools.lru_cache(maxsize=None)
def _clarabel(n, seed):
    """The inequality optimum of a roll by sdp:clarabel (shared by the tests)."""
    return kf.solve(kf.MVU.from_data(_roll(n, seed), k=4, equality=False), "sdp:clarabel").objective


def test_the_declaration_carries_the_sense_and_the_fingerprint_the_option():
    X = _roll(20, 0)
    pe, pi = kf.MVU.from_data(X, k=4), kf.MVU.from_data(X, k=4, equality=False)
    assert pe.equality is True and pi.equality is False
    assert np.all(pe.declaration.constraints[1].sense == EQ)
    assert np.all(pi.declaration.constraints[1].sense == LE)
    assert pi.fingerprint() != pe.fingerprint()
    assert "equality=False" in repr(pi) and "equality" not in repr(pe)
    assert pi.params()["equality"] is False
    # a point with every edge shorter than asked is feasible for <= only
    K = 0.25 * np.outer(X[:, 0] - X[:, 0].mean(), X[:, 0] - X[:, 0].mean())
    assert pi.violation(np.zeros((20, 20))) == 0.0
    assert pe.violation(np.zeros((20, 20))) > 0.0
    assert pi.violation(K) <= pe.violation(K)


def test_equality_must_be_a_bool():
    X = _roll(20, 0)
    with pytest.raises(ProblemError, match="equality"):
        kf.MVU.from_data(X, k=4, equality="no")


@pytest.mark.parametrize("n, seed", [(12, 0), (20, 1), (20, 3), (30, 2)])
def test_mvu_solver_agrees_with_clarabel_and_certifies(n, seed):
    p = kf.MVU.from_data(_roll(n, seed), k=4, equality=False)
    ref = kf.solve(p, "sdp:clarabel")
    res = kf.solve(p, "mvu", gap_tol=1e-7)
    assert res.status.value == "converged"
    assert abs(res.objective - ref.objective) <= 1e-6 * abs(ref.objective)
    assert p.violation(res.kernel) <= 1e-9 * float(p.distances.max() ** 2)
    # the bound is valid: the certificate module's bound at the solver's multipliers
    assert res.objective <= res.upper_bound * (1 + 1e-12)
    assert ref.objective <= res.upper_bound * (1 + 1e-9)
    lam = res.multipliers
    assert np.all(lam >= 0)
    from kernelforms import certificate

    cert = certificate.certify(p, res.kernel, multipliers=lam)
    assert cert.relative_gap <= 1e-6
    assert ref.objective <= cert.upper_bound * (1 + 1e-9)


@pytest.mark.slow
def test_lowrank_solves_the_inequality_form():  # about 2-6 s
    p = kf.MVU.from_data(_roll(20, 0), k=4, equality=False)
    ref = _clarabel(20, 0)
    res = kf.solve(p, "lowrank")
    assert abs(res.objective - ref) <= 1e-6 * abs(ref)


def test_the_inequality_optimum_is_at_least_the_equality_optimum():
    X = _roll(20, 0)
    ei = kf.solve(kf.MVU.from_data(X, k=4, equality=False), "mvu", gap_tol=1e-7).objective
    ee = kf.solve(kf.MVU.from_data(X, k=4), "sdp:clarabel").objective
    assert ei >= ee


@pytest.mark.slow
def test_the_cli_builds_the_inequality_form_and_mvu_runs_below_12_points(capsys):  # 4-12 s
    from kernelforms.cli import main as cli
    from kernelforms.recipes import build_from_recipe, recipe_name

    rc = cli(["compare", "mvu", "--dataset", "swiss_roll", "--n-points", "10", "--methods", "mvu",
              "--inequality"])
    out = capsys.readouterr().out
    assert rc == 0 and "equality=False" in out and "converged" in out
    rc = cli(["compare", "mvu", "--dataset", "swiss_roll", "--n-points", "8", "--methods", "mvu"])
    out = capsys.readouterr().out
    assert rc == 0 and "converged" in out and "equality" not in out
    rec = {"problem": "mvu", "dataset": "swiss_roll", "n_points": 20, "inequality": True}
    assert build_from_recipe(rec).equality is False
    assert "inequality=True" in recipe_name(rec)
    assert cli(["compare", "pcp", "--dataset", "iris", "--methods", "sdp", "--inequality"]) == 2
    assert "--inequality: not used by pcp" in capsys.readouterr().err


def test_the_certificate_clips_negative_multipliers_of_le_rows():
    """A <= row's multiplier of a maximisation is >= 0: any vector gives a valid bound (the
    negative entries count as 0), the fitted multipliers are >= 0, and the solver's give the
    tight one."""
    from kernelforms import certificate

    p = kf.MVU.from_data(_roll(20, 0), k=4, equality=False)
    ref = _clarabel(20, 0)
    res = kf.solve(p, "mvu", gap_tol=1e-7)
    lam = res.multipliers
    signs = np.where(np.arange(len(lam)) % 2, 1.0, -1.0)
    for m in (lam, -lam, signs * lam, np.ones_like(lam)):
        assert certificate.certify(p, res.kernel, multipliers=m).upper_bound >= ref * (1 - 1e-9)
    assert certificate.certify(p, res.kernel, multipliers=lam).relative_gap <= 1e-6
    y = certificate.mvu_multipliers(p, res.kernel)
    assert np.all(y >= 0)


def test_the_new_column_takes_up_the_slack_rows():
    # the amplitude of a new column of <= rows minimises the augmented Lagrangian along it
    # (its value on a fine grid is not lower), and slack rows let it grow past the amplitude
    # that treats every row as active (the rule it replaces)
    from kernelforms.solvers.mvu_alm import _grow_amplitude_le

    rng = np.random.default_rng(0)
    m, n = 40, 15
    q = rng.uniform(0.0, 1.0, m)
    c = -rng.uniform(0.0, 0.5, m)  # every row slack
    lam = np.where(rng.uniform(size=m) < 0.5, 0.0, rng.uniform(0.1, 1.0, m))
    sigma = rng.uniform(1.0, 10.0, m)
    x = rng.standard_normal(n)
    x -= x.mean()
    xx = float(x @ x)

    def value(th):
        u = th * th
        cc = c + u * q
        psi = (np.maximum(lam + sigma * cc, 0.0) ** 2 - lam * lam) / (2.0 * sigma)
        return -u * xx + float(np.sum(psi))

    th = _grow_amplitude_le(x, q, c, lam, sigma)
    grid = np.linspace(0.0, 3.0 * th, 3001)
    assert value(th) <= min(value(g) for g in grid) + 1e-9 * abs(value(th))
    A2 = -xx + float(np.maximum(lam + sigma * c, 0.0) @ q)
    old = np.sqrt(-A2 / float(np.sum(sigma * q * q)))  # every row's full penalty
    assert th > 1.5 * old


@pytest.mark.slow
def test_the_roll_keeps_its_height_in_the_first_iterations():  # 3-9 s
    # from a starting penalty of 1 the first inner solve stretched the 2,000-point roll
    # (seed 1) 2.6-fold and its height was lost (second component 4e-4 of tr K after one
    # iteration, 0 after three): a rank-1 stationary point 0.6% below the optimum, whose
    # optimum keeps 1.3%; <= rows now start at 100
    p = kf.MVU.from_data(_roll(2000, 1), k=4, equality=False)
    with pytest.warns(Warning):
        res = kf.solve(p, "mvu", max_outer=3)
    s = np.linalg.svd(np.asarray(res.factor) - np.asarray(res.factor).mean(axis=0), compute_uv=False)
    assert s[1] ** 2 / np.sum(s**2) >= 5e-3


@pytest.mark.slow
@pytest.mark.parametrize("sigma0", [None, 1.0])
def test_a_collapsed_point_gets_its_missing_dimension_in_place(sigma0):  # 5-25 s
    # 2,000 points, seed 1, from a starting penalty of 1: the point collapses to rank 1 0.6%
    # below the optimum, where the positive multipliers' graph is disconnected (lambda_min(S)
    # = -1); the lifted multipliers' eigenvector fills the empty column.  Before: six columns
    # added (rank 9), one inner solve of 200 Newton steps, 42-52 s
    p = kf.MVU.from_data(_roll(2000, 1), k=4, equality=False)
    res = kf.solve(p, "mvu", time_limit=120, sigma0=sigma0)
    assert res.status.value == "converged"
    assert res.rank_used <= 4
    assert res.certified_gap <= 2e-4
    assert p.violation(res.kernel) <= 1e-5 * float(p.distances.max() ** 2)


def test_the_bench_stops_looking_for_a_connected_roll(monkeypatch):
    # a 1-NN graph is never connected: the search gives up after CONNECTED_TRIES seeds (it
    # ran for 30 minutes at 100,000 points and k = 4 before)
    from kernelforms.bench import mvu as bench

    monkeypatch.setattr(bench, "CONNECTED_TRIES", 3)
    row = bench.run_one(20, 0, "mvu", k=1, connected=True, equality=False)
    assert row["status"].startswith("skipped: no connected 1-NN graph in seeds 0-2")
    assert "raise --k" in row["status"]


def test_the_bench_solves_both_forms_on_one_roll_and_compares_them(tmp_path, capsys):
    import json

    from kernelforms.bench import mvu as bench

    out = tmp_path / "rows.json"
    assert bench.main(["--formulations", "inequality,equality", "--sizes", "20", "--seeds", "1",
                       "--connected", "--time-limit", "30", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    le, eq = json.loads(out.read_text())
    assert (le["form"], eq["form"]) == ("<=", "==") and le["seed"] == eq["seed"]
    assert "slack" in le and "slack" not in eq and le["shrink"] >= 0
    # the sentence follows from the rows: the == bound against the <= optimum's lower bound
    ratio = eq["upper_bound"] * (1 + le["shrink"]) / le["objective"]
    assert f"{le['slack']:,}/{le['edges']:,} rows slack at the <= point" in text
    assert f"{ratio:.4f}" in text
    assert ("the optima differ" in text) == (ratio < 1)
    with pytest.raises(SystemExit):
        bench.main(["--formulations", "inequality,reduced", "--sizes", "20"])


def test_the_comparison_uses_an_inequality_point_without_slack_for_both_forms():
    from kernelforms.bench.mvu import compare

    le = {"time": 1.0, "status": "converged", "slack": 0, "edges": 50, "violation": 1e-9,
          "gap": 3e-6, "objective": 100.0, "shrink": 0.0}
    eq = {"time": 1.0, "status": "timeout", "upper_bound": 120.0}
    assert "solves and certifies the equality form" in compare(le, eq)
    le.update(slack=10)
    assert "not separated" in compare(le, eq)
    eq.update(upper_bound=90.0)
    assert "the == one at least 10.0% below" in compare(le, eq)
    le.update(shrink=0.5)  # the <= point proves only 100 / 1.5 for the <= optimum
    assert "not separated" in compare(le, eq)
    le.update(status="max_iter", slack=0, shrink=0.0)  # not converged: no claim from it
    assert "solves and certifies" not in compare(le, eq)


def test_the_projection_of_le_rows_ends_feasible():
    # what Gauss-Newton leaves above the tolerance is removed by shrinking the point (the
    # rows are homogeneous in K): every row holds to round-off, the objective pays the
    # largest excess ratio.  Before, the point came back with its violation
    from kernelforms.solvers.mvu_alm import project_to_edges

    rng = np.random.default_rng(3)
    n, r = 30, 3
    i = np.arange(n - 1)
    j = i + 1
    V = rng.standard_normal((n, r))
    V -= V.mean(axis=0)
    d = np.sum((V[i] - V[j]) ** 2, axis=1)
    t = d * rng.uniform(0.9, 1.1, n - 1)  # about half the rows violated by up to 10%
    W, viol = project_to_edges(V, i, j, t, tol=1e-12, max_steps=0, ineq=True, max_shrink=0.2)
    assert viol <= 1e-12
    ratio = np.max((d - t) / t)
    assert np.allclose(W, V / np.sqrt(1.0 + ratio), rtol=1e-14, atol=0)
    assert np.all(np.sum((W[i] - W[j]) ** 2, axis=1) <= t * (1 + 1e-14))
    # not when it would cost more of the objective than max_shrink
    W2, viol2 = project_to_edges(V, i, j, t, tol=1e-12, max_steps=0, ineq=True,
                                 max_shrink=0.5 * ratio)
    assert viol2 > 1e-3 and np.array_equal(W2, V)


def test_the_default_feas_tol_is_1e6_for_le_rows_and_a_converged_point_meets_it():
    # the target for the inequality form: violation <= 1e-6 of the largest squared
    # distance at the defaults (at 1e-5, 20,000-point rolls converged at 2e-6)
    X = _roll(20, 1)
    p = kf.MVU.from_data(X, k=4, equality=False)
    res = kf.solve(p, "mvu")
    assert res.status.value == "converged" and res.extras["feas_tol"] == 1e-6
    assert p.violation(res.kernel) <= 1e-6 * float(p.distances.max() ** 2)
    # == rows keep 1e-5; a given feas_tol is used as given
    assert kf.solve(kf.MVU.from_data(X, k=4), "mvu", max_outer=1).extras["feas_tol"] == 1e-5
    assert kf.solve(p, "mvu", feas_tol=1e-4, max_outer=1).extras["feas_tol"] == 1e-4
