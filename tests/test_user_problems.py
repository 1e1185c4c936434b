"""The two user-composed problems of docs/problems.md ("Problems of your own").

The page's ``python user-problem`` blocks run as written; each problem is then checked
against a CVXPY model written here by hand, and through every registered method that
applies (tests/test_conformance.py holds the per-method tolerances).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import kernelforms as kf

cp = pytest.importorskip("cvxpy")

PAGE = Path(__file__).resolve().parent.parent / "docs" / "problems.md"
_BLOCK = re.compile(r"^```python user-problem\n(.*?)^```[ \t]*$", re.S | re.M)


def _user_problems() -> dict:
    blocks = _BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 2, "docs/problems.md should show two user problems"
    out = {}
    for code in blocks:
        ns: dict = {}
        exec(compile(code, str(PAGE), "exec"), ns)  # noqa: S102 - our own documentation
        out.update({k: v for k, v in ns.items() if isinstance(v, kf.DeclaredProblem)})
    return out


@pytest.fixture(scope="module")
def user_problems():
    return _user_problems()


def _hand_bounded_pcp():
    """Soft PCP + distance bounds, written directly in CVXPY from the raw data."""
    X, y = kf.datasets.load("iris", n_points=30, scale=True, seed=0)
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=5).toarray()
    pairs = kf.pairs.sample_pairs(y, n_must=12, n_cannot=12, seed=0)
    E, d = kf.graphs.knn_edges(X, k=4)
    K = cp.Variable((n, n), PSD=True)
    fit = sum((K[i, j] - 1) ** 2 for i, j in pairs.must) + sum(K[i, j] ** 2 for i, j in pairs.cannot) \
        + cp.sum_squares(cp.diag(K) - 1)
    cons = [K[i, i] + K[j, j] - 2 * K[i, j] <= dij**2 for (i, j), dij in zip(E, d)]
    prog = cp.Problem(cp.Minimize(cp.trace(L @ K) + 0.5 * fit), cons)
    prog.solve(solver="CLARABEL")
    return prog.value


def _hand_mixed_npkl():
    X, y = kf.datasets.load("wine", n_points=30, scale=True, seed=1)
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=5, delta=0.01).toarray()
    pairs = kf.pairs.sample_pairs(y, n_must=12, n_cannot=12, seed=1)
    K = cp.Variable((n, n), PSD=True)
    hinge = sum(cp.pos(1 + K[i, j]) for i, j in pairs.cannot)
    square = sum((1 - K[i, j]) ** 2 for i, j in pairs.must)
    prog = cp.Problem(cp.Minimize(cp.trace(L @ K) + hinge + square))
    prog.solve(solver="CLARABEL")
    return prog.value


HAND = {"bounded_pcp": _hand_bounded_pcp, "mixed_npkl": _hand_mixed_npkl}


@pytest.mark.parametrize("name", list(HAND))
def test_user_problem_full_sdp_matches_a_hand_written_cvxpy_model(user_problems, name):
    p = user_problems[name]
    res = kf.solve(p, "sdp:clarabel")
    assert res.status.certifies_optimality, res.message
    want = HAND[name]()
    assert res.objective == pytest.approx(want, rel=1e-6)
    assert res.violation <= 1e-6


@pytest.mark.parametrize("name", list(HAND))
def test_user_problem_through_every_method_that_fits(user_problems, name):
    p = user_problems[name]
    reasons = kf.applicable_methods(p)
    fits = [m for m, why in reasons.items() if why is None]
    assert "sdp" in fits
    if name == "bounded_pcp":
        assert "lowrank" in fits
    else:
        assert "bcd" in fits and "smo" not in fits
    report = kf.compare(p, [m for m in fits if m != "simplenpkl"], rtol=1e-3)
    assert report.verdict == "agree", report
    # the methods that do not fit say why, in terms of the declaration
    for m in set(reasons) - set(fits):
        assert isinstance(reasons[m], str) and len(reasons[m]) > 10, (m, reasons[m])


@pytest.mark.parametrize("name", list(HAND))
def test_user_problem_is_certified(user_problems, name):
    from kernelforms.certificate import certify

    p = user_problems[name]
    res = kf.solve(p, "sdp:clarabel")
    cert = certify(p, res.kernel)
    assert cert.lower_bound <= res.objective + 1e-7 * abs(res.objective)
    assert cert.relative_gap <= 1e-4


def test_mixed_npkl_with_a_squared_hinge_goes_through_lowrank_too(user_problems):
    """The hinge makes mixed_npkl non-smooth, so lowrank says why it declines; the same
    declaration with a squared hinge on the cannot-links is smooth and goes through sdp,
    lowrank, dual and bcd, matching a CVXPY model written here by hand."""
    from dataclasses import replace

    from kernelforms import model as km

    p = user_problems["mixed_npkl"]
    assert "smooth" in kf.applicable_methods(p)["lowrank"]
    d = p.declaration
    hinge = d.losses[0]
    smooth = kf.DeclaredProblem(
        replace(d, losses=(replace(hinge, loss=km.SquaredHinge(hinge.loss.labels)), *d.losses[1:])),
        name="npkl squared hinge and square")
    fits = [m for m, why in kf.applicable_methods(smooth).items() if why is None]
    assert {"sdp", "lowrank", "dual", "bcd"} <= set(fits)

    X, y = kf.datasets.load("wine", n_points=30, scale=True, seed=1)
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=5, delta=0.01).toarray()
    pairs = kf.pairs.sample_pairs(y, n_must=12, n_cannot=12, seed=1)
    K = cp.Variable((n, n), PSD=True)
    prog = cp.Problem(cp.Minimize(cp.trace(L @ K)
                                  + sum(cp.square(cp.pos(1 + K[i, j])) for i, j in pairs.cannot)
                                  + sum((1 - K[i, j]) ** 2 for i, j in pairs.must)))
    prog.solve(solver="CLARABEL")
    report = kf.compare(smooth, [m for m in fits if m != "simplenpkl"], rtol=1e-3)
    assert report.verdict == "agree", report
    assert report.result("sdp").objective == pytest.approx(prog.value, rel=1e-6)
    assert report.result("lowrank").objective == pytest.approx(prog.value, rel=1e-4)


def test_a_problem_class_of_your_own_is_one_class_and_no_package_change():
    """Adding a problem is one class with ``declare()`` (docs/architecture.md): here a
    "bounded PCP" class written in this test file, with its own validation and parameters,
    goes through plan, compare and the certificate like the built-in problems."""
    from dataclasses import dataclass

    from kernelforms import model as km
    from kernelforms.problems.base import Problem

    @dataclass(frozen=True, eq=False)
    class BoundedPCP(Problem):
        laplacian: object
        must: object
        cannot: object
        edges: object
        bounds: object
        gamma: float = 1.0
        kind = "bounded-pcp"

        def __post_init__(self):
            if not self.gamma > 0:
                raise kf.ProblemError("BoundedPCP: gamma must be > 0")

        @property
        def n(self):
            return self.laplacian.shape[0]

        def params(self):
            return {"kind": self.kind, "n": self.n, "gamma": self.gamma}

        def declare(self):
            n = self.n
            T = [*self.must, *self.cannot, *[(i, i) for i in range(n)]]
            t = [1.0] * len(self.must) + [0.0] * len(self.cannot) + [1.0] * n
            return km.Declaration(
                km.PSD(n), linear=[km.LinearTerm(km.Inner(self.laplacian))],
                losses=[km.LossTerm(km.Entries(n, T), km.Squared(t), self.gamma / 2)],
                constraints=[km.Constraint(km.Distances(n, self.edges), "<=", self.bounds)])

    X, y = kf.datasets.load("wine", n_points=24, scale=True, seed=7)
    pairs = kf.pairs.sample_pairs(y, n_must=8, n_cannot=8, seed=7)
    E, d = kf.graphs.knn_edges(X, k=4)
    p = BoundedPCP(kf.graphs.knn_laplacian(X, k=5), pairs.must, pairs.cannot, E, d**2)
    assert p.objective(np.zeros((p.n, p.n))) == pytest.approx(0.5 * (len(pairs.must) + p.n))
    fits = [m for m, why in kf.applicable_methods(p).items() if why is None]
    assert {"sdp", "sqlp", "lowrank"} <= set(fits)
    report = kf.compare(p, ["sdp", "sqlp", "lowrank"], rtol=1e-4, progress=False)
    assert report.verdict == "agree", report
    low = report.result("lowrank")
    assert low.certified_gap is not None and abs(low.certified_gap) <= 1e-4
    with pytest.raises(kf.ProblemError, match="gamma"):
        BoundedPCP(p.laplacian, pairs.must, pairs.cannot, E, d**2, gamma=0.0)
