"""The chain of reductions (kernelforms.model.chain) and the canonical form
(kernelforms.model.canonical): each reduction's inverse recovers the original objective, the
blocks are the declaration's rows regrouped, the flags and the capabilities' reasons."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import model as km
from kernelforms.model.chain import Centre, MaxToMin, MergeEqualPoints
from kernelforms.result import LowRank

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from test_applicability_golden import INSTANCES, instance  # noqa: E402


def _check_inverse(decl, G_red, rtol=1e-12):
    """The original objective at the inverted factor is the reduced one in the original's
    sense, and the inverted factor violates no more than the reduced one does."""
    ch = km.chain(decl)
    f_red = ch.reduced.objective(LowRank(G_red))
    G, f_back = ch.invert(G_red, f_red)
    assert G.shape[0] == decl.n
    f = decl.objective(LowRank(G))
    assert abs(f - f_back) <= rtol * max(1.0, abs(f)), (f, f_back)
    assert abs(f - ch.sign * f_red) <= rtol * max(1.0, abs(f))
    v_red = ch.reduced.violation(LowRank(G_red))
    assert decl.violation(LowRank(G)) <= v_red + 1e-9 * max(1.0, np.abs(G).max() ** 2)
    return ch


def test_merge_lifts_the_factor_and_keeps_the_objective():
    decl = instance("pcp_p2_hard").declaration
    ch = km.chain(decl)
    assert ch.applied == ("merge",) and ch.merged is not None and ch.conflict is None
    c = ch.reduced.n
    assert c < decl.n
    G = np.random.default_rng(0).normal(size=(c, 3))
    _check_inverse(decl, G)
    # a feasible point of the reduced problem (K' = I) is feasible for the original one
    G, _ = ch.invert(np.eye(c))
    assert decl.violation(LowRank(G)) < 1e-12


def test_max_to_min_and_centring_on_mvu():
    decl = instance("mvu_p4_eq").declaration
    ch = km.chain(decl)
    assert ch.applied == ("max_to_min", "centre") and ch.centred and ch.sign == -1.0
    assert ch.reduced.sense == "min" and ch.reduced.n_constraint_rows == decl.n_constraint_rows - 1
    G = np.random.default_rng(1).normal(size=(decl.n, 4))
    G -= G.mean(axis=0)  # the reduced problem is solved over centred factors
    _check_inverse(decl, G)
    # the inverse centres any factor: the centring row then holds
    G2, _ = ch.invert(G + 5.0)
    assert abs(float(np.sum(G2.sum(axis=0) ** 2))) < 1e-18 * decl.n ** 2 + 1e-20


def test_the_chain_inverts_a_solution_factor_and_multipliers():
    from kernelforms.result import Solution, Status

    # max -> min and centring keep the rows (the centring row is not a multiplier's row):
    # the multipliers pass unchanged, one per row of the original (the certificate's order)
    decl = instance("mvu_p4_eq").declaration
    ch = km.chain(decl)
    rows = ch.reduced.n_constraint_rows
    assert rows == decl.n_constraint_rows - 1
    y = np.arange(1.0, rows + 1)
    G = np.random.default_rng(2).normal(size=(decl.n, 3))
    back = ch.invert_solution(Solution(G, Status.CONVERGED, multipliers=y, upper_bound=2.0))
    assert np.array_equal(back.multipliers, y) and back.multipliers is not y
    assert np.allclose(back.factor, G - G.mean(axis=0)) and back.upper_bound == 2.0
    # the merge keeps identical rows once and drops rows inside a group: the multipliers of
    # the reduced rows are dropped, the factor lifted
    decl = instance("pcp_p2_hard").declaration
    ch = km.chain(decl)
    c = ch.reduced.n
    sol = Solution(np.ones((c, 2)), Status.CONVERGED, multipliers=np.ones(ch.reduced.n_constraint_rows))
    back = ch.invert_solution(sol)
    assert back.multipliers is None and back.factor.shape == (decl.n, 2)
    assert ch.invert_multipliers(None) is None
    # no step: the multipliers as they are
    plain = km.chain(instance("pcp_p1_soft").declaration)
    assert plain.steps == () and np.array_equal(plain.invert_multipliers([1.0, 2.0]), [1.0, 2.0])


def test_a_declared_maximisation_with_a_concave_loss():
    decl = instance("declared_max_logistic").declaration
    ch = km.chain(decl)
    assert ch.applied == ("max_to_min",)
    assert all(t.weight > 0 for t in ch.reduced.losses)
    _check_inverse(decl, np.random.default_rng(2).normal(size=(decl.n, 3)))


@pytest.mark.parametrize("name", list(INSTANCES))
def test_every_instance_inverts_to_its_objective(name):
    decl = instance(name).declaration
    ch = km.chain(decl)
    G = np.random.default_rng(3).normal(size=(ch.reduced.n, 3))
    if isinstance(decl.form, km.Range):
        G = decl.form.G0 @ (np.eye(decl.form.r) + 0.1 * np.random.default_rng(3).normal(size=(decl.form.r,) * 2))
    if isinstance(decl.form, km.Basis):
        G = decl.form.B @ np.random.default_rng(3).normal(size=(decl.form.block, 2))
    if ch.centred:
        G -= G.mean(axis=0)
    _check_inverse(decl, G)


def test_each_reduction_says_when_it_has_nothing_to_do():
    decl = instance("pcp_p1_soft").declaration
    assert MergeEqualPoints().apply(decl) is None
    assert MaxToMin().apply(decl) is None
    assert Centre().apply(decl) is None
    ch = km.chain(decl)
    assert ch.steps == () and ch.reduced is decl and ch.describe() == "no reduction"


def test_chain_and_canonical_are_computed_once_and_not_pickled():
    p = instance("mvu_p4_ineq")
    assert km.chain(p) is km.chain(p.declaration) and km.canonical(p) is km.canonical(p)
    back = pickle.loads(pickle.dumps(p.declaration))
    assert "_derived" not in back.__dict__
    assert km.chain(back) is not km.chain(p) and km.chain(back).applied == km.chain(p).applied


def test_loss_blocks_regroup_the_rows_by_loss_and_kind():
    p = instance("pcp_p1_soft")
    can = km.canonical(p)
    (t,) = p.declaration.losses
    off = can.block(km.Squared, km.RowKind.ENTRY)
    dia = can.block(km.Squared, km.RowKind.DIAGONAL)
    assert off.size + dia.size == t.map.size and len(can.loss_blocks) == 2
    assert np.all(off.i != off.j) and np.all(dia.i == dia.j)
    assert np.all(off.weight == t.weight) and off.name == "squared"
    # the block's own loss gives the term's value on its rows
    G = np.random.default_rng(4).normal(size=(p.n, 3))
    z = lambda b: np.einsum("ij,ij->i", G[b.i], G[b.j])  # noqa: E731
    total = sum(float(b.weight @ b.loss.value(z(b))) for b in can.loss_blocks)
    assert total == pytest.approx(t.value(LowRank(G)), rel=1e-12)
    # two loss classes on one problem: two blocks, in the order of the terms
    mixed = km.canonical(instance("declared_hinge_and_squared"))
    assert [(b.loss_type, b.kind) for b in mixed.loss_blocks] == [
        (km.Hinge, km.RowKind.ENTRY), (km.Squared, km.RowKind.ENTRY)]


def test_constraint_blocks_flags_and_typed_divergences():
    mvu = km.canonical(instance("mvu_p4_eq"))
    assert set(mvu.constraint_blocks) == {km.EQ} and not mvu.general
    blk = mvu.constraint_blocks[km.EQ]
    assert np.all(blk.kind == km.RowKind.DISTANCE) and blk.size == len(instance("mvu_p4_eq").edges)
    assert mvu.centred and mvu.graph_connected and not mvu.trace_bounded
    assert mvu.C is not None and mvu.C.diagonal().sum() == pytest.approx(-mvu.n)  # -tr(K)
    ineq = km.canonical(instance("mvu_p4_ineq"))
    assert set(ineq.constraint_blocks) == {km.LE}
    dense = km.canonical(instance("declared_dense_cost"))
    assert dense.C is None and dense.trace_bounded and len(dense.general) == 1
    burg = km.canonical(instance("bregman_p7_burg"))
    assert isinstance(burg.divergence, km.Burg) and not isinstance(burg.divergence, km.VonNeumann)
    assert isinstance(km.canonical(instance("bregman_p7_von_neumann")).divergence, km.VonNeumann)
    assert type(km.Divergence("burg")) is km.Burg and km.Divergence("von_neumann").kind == "von_neumann"
    with pytest.raises(kf.ProblemError, match="Divergence\\('von_neumann'\\)"):
        km.Burg("von_neumann")


def test_capabilities_word_the_first_mismatch():
    caps = km.Capabilities()
    head = "x solves min over K PSD"
    assert caps.reason(instance("pcp_p1_soft"), head) is None
    assert caps.reason(instance("mvu_p4_eq"), head) == f"{head} (a minimisation); this problem is a maximisation"
    assert caps.reason(instance("regpcp_p3"), head).startswith(f"{head}; this problem has K = B Y B^T")
    both = km.Capabilities(forms=(km.PSD, km.Range), divergence=True)
    assert both.reason(instance("bregman_p7_burg"), head) is None
    assert caps.reason(instance("bregman_p7_burg"), head).startswith(f"{head}; this problem has range(K)")


def test_capabilities_on_losses_and_constraints():
    caps = km.Capabilities(constraints=False, loss_property="is_squared", loss_word="squared",
                           loss_rows=(km.RowKind.ENTRY, km.RowKind.DIAGONAL), rows_word="entries K_ij")
    assert caps.reason(instance("pcp_p1_soft"), "h") is None
    assert caps.loss_reason(instance("pcp_p1_soft"), "w") is None
    assert caps.reason(instance("declared_squared_distances"), "h") == \
        "h and no constraints; this problem has 11 constraint rows".replace(
            "11", str(instance("declared_squared_distances").declaration.n_constraint_rows))
    assert caps.loss_reason(instance("npkl_p6_logistic"), "w") == \
        "w needs squared losses; this problem has a logistic loss term"
    d = km.Declaration(km.PSD(4), losses=[km.LossTerm(km.Distances(4, [[0, 1]]), km.Squared([1.0]))])
    assert caps.loss_reason(d, "w") == ("w needs losses on entries K_ij; this problem has a squared "
                                        "loss on K_ii + K_jj - 2 K_ij over 1 pairs")


def test_capabilities_on_terms_cost_and_pair_rows():
    """The fields added for the dual, the quadratic formulations and the Bregman projections:
    each refuses what it names, words it from the data, and appends the advice."""
    pair = km.Capabilities(forms=(km.PSD,), senses=("min", "max"), sparse_cost=True,
                           pair_constraints=True, advice=": use 'sdp'")
    assert pair.why(instance("pcp_p2_hard"), "h", "w") is None
    assert pair.why(instance("declared_dense_cost"), "h", "w") == (
        "w needs a sparse linear cost <C, K>; this problem's linear terms include sum_ij K_ij "
        "(a dense adjoint): use 'sdp'")
    # MVU's centring row leaves the reduced declaration as a flag: still no pair row
    assert km.canonical(instance("mvu_p4_eq")).centred
    assert pair.why(instance("mvu_p4_eq"), "h", "w") == (
        "w needs every constraint on entries or distances of K (pair rows); this problem has the "
        "constraint sum_ij K_ij == b (1 rows): use 'sdp'")
    assert pair.mismatch(instance("declared_max_logistic")).what == "pair_constraints"
    quad = km.Capabilities(forms=(km.PSD, km.Basis, km.Range), senses=("min", "max"), needs=("losses",))
    assert quad.reason(instance("pcp_p2_hard"), "h") == "h; this problem has no loss term (only linear terms)"
    assert quad.reason(instance("bregman_p7_burg"), "h") == "h; this problem has the Burg divergence D(K, K0)"
    only = km.Capabilities(forms=(km.Range,), divergence=km.Burg, linear=False, losses=False,
                           needs=("constraints",))
    assert only.reason(instance("bregman_p7_burg"), "h") is None
    p = instance("bregman_p7_burg").declaration
    bare = km.Declaration(p.form, divergence=p.divergence)
    assert only.reason(bare, "h") == "h; this problem has no constraint rows"
    extra = km.Declaration(p.form, losses=[km.LossTerm(km.Diagonal(p.n), km.Squared(np.ones(p.n)))],
                           constraints=p.constraints, divergence=p.divergence)
    assert only.reason(extra, "h").startswith("h and nothing else; this problem also has ")
    # Canonical.pair_rows: the pair rows in the declaration's order, blocks concatenated
    rows = km.canonical(instance("declared_squared_distances")).pair_rows
    c = instance("declared_squared_distances").declaration.constraints[0]
    assert len(rows) == c.size and np.array_equal(rows.i, c.map.i) and np.array_equal(rows.bound, c.bound)


def test_a_loss_of_the_users_without_row_data_is_refused_not_crashed():
    """A Loss subclass that names no row data still gets a canonical form (its data NaN), and
    a method that cannot take it says why instead of raising."""
    from dataclasses import dataclass

    @dataclass(frozen=True, eq=False)
    class Abs(km.Loss):
        m: int
        name = "abs"
        smooth = False

        @property
        def size(self):
            return self.m

        def value(self, z):
            return np.abs(z)

        def grad(self, z):
            return np.sign(z)

        def conjugate(self, u):
            return np.where(np.abs(u) <= 1, 0.0, np.inf)

        def conjugate_domain(self):
            return -np.ones(self.m), np.ones(self.m)

        def cvx_conjugate(self, u):
            return 0 * u[0]

        def cvx(self, z):
            import cvxpy as cp
            return cp.sum(cp.abs(z))

        def latex(self, z):
            return f"|{z}|"

    n = 5
    p = kf.DeclaredProblem(km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(n))],
                                          losses=[km.LossTerm(km.Entries(n, [[0, 1], [2, 3]]), Abs(2))]))
    (b,) = km.canonical(p).loss_blocks
    assert b.size == 2 and np.isnan(b.data).all()
    with pytest.raises(NotImplementedError, match="row data"):
        b.loss
    assert kf.get_method("admm").applies_to(p) == "admm needs squared losses; this problem has a abs loss term"
    assert "abs loss" in kf.get_method("simplenpkl").applies_to(p)
    for name, why in kf.applicable_methods(p).items():  # every method answers, none raises
        assert why is None or isinstance(why, str), name


@pytest.mark.parametrize("name", ["mvu_p4_eq", "regmvu_p5", "declared_max_logistic", "pcp_p2_hard",
                                  "pcp_p1_soft"])
def test_the_minimisation_is_max_to_min_alone_and_the_groups_are_the_merges(name):
    """Chain.minimisation (read by the certificate and the quadratic formulations) negates a
    maximisation and nothing else: same points, same constraints (the centring row too), its
    objective -f; a minimisation is its own.  Chain.groups are the merge's labels;
    invert_value negates back a maximisation's value."""
    from kernelforms.model.reductions import point_groups

    decl = instance(name).declaration
    ch = km.chain(decl)
    low = ch.minimisation
    assert low is ch.minimisation  # computed once
    assert low.sense == "min" and low.n == decl.n and low.constraints == decl.constraints
    if decl.sense == "min":
        assert low is decl
    else:
        assert all(t.weight > 0 for t in low.losses)
        G = np.random.default_rng(0).normal(size=(decl.n, 3))
        f = decl.objective(LowRank(G))
        assert low.objective(LowRank(G)) == pytest.approx(-f, rel=1e-14)
    assert ch.invert_value(2.5) == ch.sign * 2.5
    groups = point_groups(decl)
    assert (ch.groups is None) == (groups is None)
    if groups is not None:
        assert np.array_equal(ch.groups, groups) and np.array_equal(ch.groups, ch.merged.labels)
