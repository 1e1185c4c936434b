"""The applicability table, pinned: every registered method x one instance of every problem
kind and option -> applies, or the reason it does not (its exact text).

The methods come from the registry (``kernelforms.registry.method_names()``), not from a
list here, so a new method fails this test until the table is regenerated; a method that
starts refusing everything (or accepting what it cannot solve) fails it too.  The table is
``tests/data/applicability_golden.json``; after a deliberate change (a method that now
accepts more, a reworded reason) regenerate it and review the diff::

    PYTHONPATH=. python tests/test_applicability_golden.py --regen
    git diff tests/data/applicability_golden.json
"""

from __future__ import annotations

import functools
import json
import pathlib
import sys

import numpy as np

import kernelforms as kf
from kernelforms import model as km
from kernelforms import registry
from kernelforms.problems.npkl import LOSSES as NPKL_LOSSES

GOLDEN = pathlib.Path(__file__).parent / "data" / "applicability_golden.json"


def _points(n, seed, classes=3, dim=4):
    """``n`` points in ``classes`` separated clusters (synthetic: loading a shipped data set
    imports scikit-learn, 3 s)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    return rng.normal(size=(classes, dim))[y] * 3 + rng.normal(size=(n, dim)), y


def _pcp_data(name="iris", n=14, seed=0):
    X, y = _points(n, seed + (name == "wine"))
    return X, kf.pairs.sample_pairs(y, n_must=5, n_cannot=5, seed=seed)


def _roll(n=14):
    t = np.linspace(1.5 * np.pi, 4.5 * np.pi, n)
    return np.stack([t * np.cos(t), np.linspace(0, 5, n) ** 1.3, t * np.sin(t)], axis=1)


def _bregman(divergence, center=False):
    X, y = _points(16, 2, classes=4, dim=6)
    return kf.BregmanLowRank.from_data(X, y, rank=4, n_constraints=6, divergence=divergence,
                                       seed=2, center=center)


def _declared_squared_distances():
    """Squared losses on entries, a Laplacian cost, distance inequalities (a user's PCP)."""
    X, pairs = _pcp_data("iris", 12, 3)
    n = X.shape[0]
    T = [*pairs.must, *pairs.cannot, *[(i, i) for i in range(n)]]
    t = [1.0] * pairs.n_must + [0.0] * pairs.n_cannot + [1.0] * n
    E, d = kf.graphs.knn_edges(X, k=3)
    return km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.Inner(kf.graphs.knn_laplacian(X, k=4)))],
        losses=[km.LossTerm(km.Entries(n, T), km.Squared(t), 0.5)],
        constraints=[km.Constraint(km.Distances(n, E), "<=", d**2)])


def _declared_forced_equal():
    """Squared hinge losses on pairs and two squared distances ``== 0``: points the chain of
    reductions merges (bcd solves the merged problem)."""
    X, pairs = _pcp_data("wine", 12, 4)
    n = X.shape[0]
    P = np.array([*pairs.must, *pairs.cannot])
    labels = np.r_[np.ones(pairs.n_must), -np.ones(pairs.n_cannot)]
    taken = {tuple(sorted(q)) for q in P.tolist()}
    pair = next((a, b) for a in range(n) for b in range(a + 1, n) if (a, b) not in taken)
    return km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.Inner(kf.graphs.knn_laplacian(X, k=4, delta=0.01)))],
        losses=[km.LossTerm(km.Entries(n, P), km.SquaredHinge(labels), 1.0)],
        constraints=[km.Constraint(km.Distances(n, [pair]), "==", np.zeros(1))])


def _declared_mixed():
    """A hinge and a squared loss term together."""
    X, pairs = _pcp_data("wine", 12, 4)
    n = X.shape[0]
    return km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.Inner(kf.graphs.knn_laplacian(X, k=4, delta=0.01)))],
        losses=[km.LossTerm(km.Entries(n, pairs.cannot), km.Hinge(-np.ones(pairs.n_cannot)), 1.0),
                km.LossTerm(km.Entries(n, pairs.must), km.Squared(np.ones(pairs.n_must)), 1.0)])


def _declared_dense_cost():
    """A dense linear term (the total sum) and a trace bound: no sparse cost."""
    n = 8
    return km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.TotalSum(n), 1.0)],
        losses=[km.LossTerm(km.Diagonal(n), km.Squared(np.ones(n)), 1.0)],
        constraints=[km.Constraint(km.Trace(n), "<=", 4.0)])


def _declared_max_logistic():
    """A maximisation with a concave logistic penalty on distances."""
    n = 8
    E = np.array([[i, (i + 1) % n] for i in range(n)])
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    return km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.Trace(n))],
        losses=[km.LossTerm(km.Distances(n, E), km.Logistic(y), -1.0)],
        constraints=[km.Constraint(km.Trace(n), "<=", 3.0)], sense="max")


def _declared_basis():
    """A squared loss over K = B Y B^T (a user's RegPCP)."""
    n = 10
    B = np.linalg.qr(np.random.default_rng(1).normal(size=(n, 3)))[0]
    return km.Declaration(
        km.Basis(B), losses=[km.LossTerm(km.Entries(n, [[0, 1], [2, 3], [4, 4]]),
                                         km.Squared([1.0, 0.0, 1.0]), 1.0)])


#: one instance of every problem kind and option: name -> builder
INSTANCES = {
    "pcp_p1_soft": lambda: kf.PCP.from_data(*_pcp_data()),
    "pcp_p2_hard": lambda: kf.PCP.from_data(*_pcp_data(), hard=True),
    "regpcp_p3": lambda: kf.RegPCP.from_data(*_pcp_data(), m_basis=4),
    "mvu_p4_eq": lambda: kf.MVU.from_data(_roll()),
    "mvu_p4_ineq": lambda: kf.MVU.from_data(_roll(), equality=False),
    "regmvu_p5": lambda: kf.RegMVU.from_data(_roll(), m_basis=4),
    # every loss NPKL names (a new one fails the test until the table is regenerated)
    **{f"npkl_p6_{loss}": (lambda loss=loss: kf.NPKL.from_data(*_pcp_data("wine"), loss=loss))
       for loss in NPKL_LOSSES},
    "bregman_p7_burg": lambda: _bregman("burg"),
    "bregman_p7_von_neumann": lambda: _bregman("von_neumann"),
    "bregman_p7_burg_centred": lambda: _bregman("burg", center=True),
    "declared_squared_distances": lambda: kf.DeclaredProblem(_declared_squared_distances(), name="d1"),
    "declared_hinge_and_squared": lambda: kf.DeclaredProblem(_declared_mixed(), name="d2"),
    "declared_dense_cost": lambda: kf.DeclaredProblem(_declared_dense_cost(), name="d3"),
    "declared_max_logistic": lambda: kf.DeclaredProblem(_declared_max_logistic(), name="d4"),
    "declared_basis": lambda: kf.DeclaredProblem(_declared_basis(), name="d5"),
    "declared_forced_equal": lambda: kf.DeclaredProblem(_declared_forced_equal(), name="d6"),
}


@functools.lru_cache(maxsize=None)
def instance(name):
    return INSTANCES[name]()


def table() -> dict[str, dict[str, str | None]]:
    """instance -> method -> None (applies) or the reason it does not, for every registered
    method."""
    out = {}
    for name in INSTANCES:
        p = instance(name)
        out[name] = {m: kf.get_method(m).applies_to(p) for m in registry.method_names()}
    return out


def test_the_applicability_table_is_the_pinned_one():
    golden = json.loads(GOLDEN.read_text())
    now = table()
    assert sorted(now) == sorted(golden), "instances changed: regenerate (see the docstring)"
    diffs = []
    for name in now:
        missing = sorted(set(now[name]) - set(golden[name]))
        assert not missing, f"methods {missing} are not in the pinned table: regenerate (see the docstring)"
        for m, reason in now[name].items():
            if reason != golden[name][m]:
                diffs.append(f"{name} x {m}: pinned {golden[name][m]!r}, now {reason!r}")
    assert not diffs, "\n".join(diffs)


def test_every_method_applies_somewhere_and_refuses_somewhere():
    """The pinned table itself is sane: no method refuses every instance (nor does any but
    the full SDP accept every one), and every reason is a sentence."""
    golden = json.loads(GOLDEN.read_text())
    for m in registry.method_names():
        col = [golden[name][m] for name in golden]
        assert any(r is None for r in col), f"{m} applies to no instance"
        if m != "sdp":
            assert any(r is not None for r in col), f"{m} applies to every instance"
        assert all(r is None or (isinstance(r, str) and len(r) > 20) for r in col)


#: methods that do not declare capabilities yet (their modules decide in applies_to alone)
UNDECLARED: set = set()


def test_declared_capabilities_are_necessary():
    """A method's capabilities (forms, senses, divergence: data on its class) are a
    necessary condition: where they refuse an instance, applies_to refuses it too; every
    method the registry lists declares them, except those in UNDECLARED."""
    assert {m for m in registry.method_names() if kf.get_method(m).capabilities is None} == UNDECLARED
    for m in registry.method_names():
        method = kf.get_method(m)
        caps = method.capabilities
        if caps is None:
            continue
        for name in INSTANCES:
            if caps.reason(instance(name), "x") is not None or caps.loss_reason(instance(name), "x"):
                assert method.applies_to(instance(name)) is not None, (m, name)


if __name__ == "__main__":
    if "--regen" not in sys.argv[1:]:
        sys.exit("usage: PYTHONPATH=. python tests/test_applicability_golden.py --regen")
    GOLDEN.write_text(json.dumps(table(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
