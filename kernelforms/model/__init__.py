"""The vocabulary problems are declared in: each problem is stated once, as a declaration.

A :class:`Declaration` says where the kernel lives (:class:`PSD`, :class:`Basis`,
:class:`Range`), its linear terms and losses on linear maps of K, its constraints and
an optional Bregman :class:`Divergence`.  Formulations, solvers and the certificate
read declarations; the problems of docs/problems.md are declarations with friendly
constructors, and :class:`~kernelforms.DeclaredProblem` turns a declaration of your own
into a problem every method that fits can solve.

>>> import numpy as np, kernelforms as kf
>>> from kernelforms import model as km
>>> n = 4
>>> L = kf.graphs.knn_laplacian(np.random.default_rng(0).normal(size=(n, 2)), k=2)
>>> decl = km.Declaration(
...     km.PSD(n),
...     linear=[km.LinearTerm(km.Inner(L))],
...     losses=[km.LossTerm(km.Entries(n, [[0, 1], [0, 0], [1, 1]]), km.Squared([1, 1, 1]), 0.5)])
>>> decl.sense
'min'
"""

from .declaration import (EQ, GE, LE, PSD, RANGE_RTOL, Basis, Burg, Constraint, Declaration,
                          Divergence, LinearTerm, LossTerm, Range, VonNeumann)
from .losses import MARGIN_LOSSES, Hinge, LinearLoss, Logistic, Loss, Squared, SquaredHinge
from .maps import (DISTANCE, ENTRY, Diagonal, RowKind, Distances, Entries, Inner, LinearMap, PairMap,
                   SymOperator, TotalSum, Trace, sym_sum)
from .reductions import Merged, merge_equal_points
from .chain import Chain, chain
from .canonical import Canonical, Capabilities, canonical
from .oracle import Oracle, oracle

#: every constructor of the vocabulary with declared parameter constraints (its
#: ``parameter_constraints``; kernelforms.model.checks): the bad-input tests are generated
#: from this table
VOCABULARY = {
    "PSD": PSD, "Basis": Basis, "Range.of": Range.of, "PairMap": PairMap, "Entries": Entries,
    "Distances": Distances, "Diagonal": Diagonal, "Inner": Inner, "Trace": Trace,
    "TotalSum": TotalSum, "LinearTerm": LinearTerm, "Constraint": Constraint,
    "Squared": Squared, "Hinge": Hinge, "SquaredHinge": SquaredHinge, "LinearLoss": LinearLoss,
    "Logistic": Logistic,
}

__all__ = [
    "Declaration", "PSD", "Basis", "Range", "Divergence", "Burg", "VonNeumann",
    "Chain", "chain", "Canonical", "Capabilities", "canonical", "RowKind", "Oracle", "oracle",
    "LinearTerm", "LossTerm", "Constraint", "LE", "GE", "EQ", "RANGE_RTOL",
    "LinearMap", "PairMap", "Entries", "Distances", "Diagonal", "Inner", "Trace", "TotalSum",
    "SymOperator", "sym_sum", "DISTANCE", "ENTRY",
    "Merged", "merge_equal_points", "VOCABULARY",
    "Loss", "Squared", "Hinge", "SquaredHinge", "LinearLoss", "Logistic", "MARGIN_LOSSES",
]
