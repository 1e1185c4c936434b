"""The declaration vocabulary refuses bad values when a term is built.

Every constructor of :mod:`kernelforms.model` declares its parameters
(``parameter_constraints``, :mod:`kernelforms.model.checks`); the bad-input cases here are
generated from those declarations, the way tests/test_options.py generates the solvers'
bad-option cases.  A new constructor or parameter is tested by declaring it (and giving it
one valid example below).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
from kernelforms import model as km
from kernelforms.errors import ProblemError
from kernelforms.model.checks import invalid_examples

N = 4
_M = sp.csr_matrix(np.array([[1.0, -1.0, 0, 0], [-1.0, 1.0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]))

#: one valid call of every constructor of km.VOCABULARY (keyword arguments)
VALID = {
    "PSD": dict(n=N),
    "Basis": dict(B=np.eye(N)[:, :2]),
    "Range.of": dict(G0=np.eye(N)[:, :2]),
    "PairMap": dict(n=N, i=[0, 1], j=[1, 2], kind=km.ENTRY),
    "Entries": dict(n=N, pairs=[[0, 1], [2, 2]]),
    "Distances": dict(n=N, pairs=[[0, 1], [2, 3]]),
    "Diagonal": dict(n=N, indices=[0, 3]),
    "Inner": dict(M=_M),
    "Trace": dict(n=N),
    "TotalSum": dict(n=N),
    "LinearTerm": dict(map=km.Trace(N), coef=2.0),
    "Constraint": dict(map=km.Diagonal(N), sense="<=", bound=1.0),
    "Squared": dict(targets=[1.0, 0.0]),
    "Hinge": dict(labels=[1, -1]),
    "SquaredHinge": dict(labels=[1, -1]),
    "Logistic": dict(labels=[1, -1]),
    "LinearLoss": dict(labels=[1, -1]),
}


def _constraints(name):
    ctor = km.VOCABULARY[name]
    owner = getattr(ctor, "__self__", ctor)  # Range.of: the class holds the declaration
    return owner.parameter_constraints


def _cases():
    for name in km.VOCABULARY:
        for param, kind in _constraints(name).items():
            for k, bad in enumerate(invalid_examples(kind, n=N)):
                yield pytest.param(name, param, bad, id=f"{name}-{param}-{k}")


def test_every_constructor_declares_its_parameters_and_has_a_valid_example():
    assert set(VALID) == set(km.VOCABULARY)
    for name, ctor in km.VOCABULARY.items():
        pc = _constraints(name)
        assert pc, f"{name} declares no parameter constraints"
        assert set(pc) <= set(VALID[name]), f"{name}: no valid example for {set(pc) - set(VALID[name])}"
        ctor(**VALID[name])  # the valid example is accepted


@pytest.mark.parametrize("name,param,bad", list(_cases()))
def test_invalid_vocabulary_values_are_refused_at_construction(name, param, bad):
    ctor = km.VOCABULARY[name]
    with pytest.raises(ProblemError) as exc:
        ctor(**{**VALID[name], param: bad})
    msg = str(exc.value)
    owner = name.split(".")[0]
    assert f"'{param}' parameter of {owner}" in msg and "must be" in msg and "instead" in msg, msg


# ---------------------------------------------------------------- the cases as the issue met them
@pytest.mark.parametrize("bad", [0, -3, 2.5, "a"])
def test_psd_of_zero_negative_fractional_or_text_size_is_refused(bad):
    with pytest.raises(ProblemError, match=r"The 'n' parameter of PSD must be an int"):
        km.PSD(bad)


@pytest.mark.parametrize("pairs", [[0, 1, 2], [[0, math.nan]], [["a", "b"]], [[2**70, 0]]])
def test_entries_with_an_odd_count_nan_strings_or_2_70_are_refused(pairs):
    with pytest.raises(ProblemError, match=r"'pairs' parameter of Entries"):
        km.Entries(N, pairs)


def test_entries_of_a_2x3_array_is_refused_not_read_as_3_other_pairs():
    with pytest.raises(ProblemError, match=r"shape \(2, 3\)"):
        km.Entries(N, np.array([[0, 1, 2], [3, 0, 1]]))


def test_entries_index_1_5_is_refused_not_truncated_to_1():
    with pytest.raises(ProblemError, match=r"1\.5 is not a whole number"):
        km.Entries(N, [[1.5, 0]])
    # whole floats are indices (as in Pairs)
    assert km.Entries(N, [[1.0, 0.0]]).pairs.tolist() == [[1, 0]]


@pytest.mark.parametrize("bad", [math.nan, math.inf, "x"])
def test_inner_with_nan_inf_or_strings_is_refused(bad):
    M = np.eye(3).astype(object)
    M[0, 0] = bad
    with pytest.raises(ProblemError, match=r"'M' parameter of Inner"):
        km.Inner(M)


def test_range_of_nan_is_refused():
    G0 = np.ones((4, 2))
    G0[1, 1] = math.nan
    with pytest.raises(ProblemError, match=r"'G0' parameter of Range.of"):
        km.Range.of(G0)


@pytest.mark.parametrize("build", [
    lambda: km.Squared(np.array([1.0 + 1e-3j, 0.0])),
    lambda: km.Hinge(np.array([1.0 + 0j, -1.0 + 0.5j])),
    lambda: km.Inner(sp.csr_matrix(np.eye(3) * (1 + 1j))),
    lambda: km.Inner(np.eye(3) + 0j),
    lambda: km.Range.of(np.eye(3)[:, :2] + 1j),
    lambda: km.Basis(np.eye(3)[:, :2] * 1j),
    lambda: km.LinearTerm(km.Trace(3), 1 + 1j),
    lambda: km.Constraint(km.Diagonal(3), "<=", np.ones(3) + 0j),
])
def test_complex_data_is_refused_not_silently_made_real(build):
    with pytest.raises(ProblemError, match="complex values are never made real"):
        build()


def test_pairmap_refuses_fractional_indices_and_unknown_kinds():
    with pytest.raises(ProblemError, match=r"'i' parameter of PairMap"):
        km.PairMap(N, [0.5], [1], km.ENTRY)
    with pytest.raises(ProblemError, match=r"'kind' parameter of PairMap"):
        km.PairMap(N, [0], [1], 2)
    with pytest.raises(ProblemError, match=r"'kind' parameter of PairMap"):
        km.PairMap(N, [0], [1], "entry")
    with pytest.raises(ProblemError, match=r"joins point 1 to itself"):
        km.PairMap(N, [0, 1], [1, 1], km.DISTANCE)


def test_range_refuses_a_rank_deficient_g0():
    G0 = np.c_[np.ones(4), np.ones(4)]
    with pytest.raises(ProblemError, match="full column rank"):
        km.Range.of(G0)


def test_the_vocabulary_keeps_valid_uses():
    # numpy integers, empty pair lists, sparse and dense symmetric matrices, per-row
    # coefficients: what the problems and the docs build
    n = np.int64(5)
    assert km.PSD(n).n == 5 and isinstance(km.PSD(n).n, int)
    assert km.Entries(5, np.zeros((0, 2), dtype=np.int64)).size == 0
    assert km.Entries(5, []).size == 0
    assert km.Distances(5, np.array([[0, 4]], dtype=np.uint8)).size == 1
    assert km.Inner(np.eye(5)).n == 5 and km.Inner(sp.eye(5, format="coo")).n == 5
    assert km.LinearTerm(km.Entries(5, [[0, 1], [1, 2]]), [1, 2]).coef.tolist() == [1.0, 2.0]
    X, y = kf.datasets.load("iris")
    p = kf.PCP.from_data(X[::10], kf.pairs.sample_pairs(y[::10], seed=0))
    assert p.declaration.n == 15
