"""Nonparametric kernel learning with a loss on the pairs (docs/problems.md P6, Hu & Kwok 2015, eq. 3)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import numpy as np

from ..errors import ProblemError
from ..result import as_kernel
from .schema import Param, choice, graph_pairs_parameters, positive
from .base import (
    GraphPairsProblem,
    check_choice,
    check_laplacian,
    check_pairs,
    check_positive,
    entries,
)

#: NPKL's losses by ``loss=`` name, as functions of the margin ``z = T_ij K_ij`` (the one list the
#: CLI, the estimator and the checks read; each margin loss is the ``value`` of its class in
#: kernelforms.model.MARGIN_LOSSES at labels +1, "square" is ``Squared`` with targets ``T``)
LOSSES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "hinge": lambda z: np.maximum(0.0, 1.0 - z),
    "squared_hinge": lambda z: np.maximum(0.0, 1.0 - z) ** 2,
    "square": lambda z: (1.0 - z) ** 2,
    "linear": lambda z: -z,
    "logistic": lambda z: np.logaddexp(0.0, -z),
}


@dataclass(frozen=True, eq=False, repr=False)
class NPKL(GraphPairsProblem):
    """NPKL with a loss on the pairs (docs/problems.md P6)::

        min  tr(L K) + gamma * sum_{(i,j) in M ∪ C} loss(T_ij K_ij)   over K PSD

    ``T_ij = +1`` on must-links, ``-1`` on cannot-links; ``loss`` is one of
    ``hinge`` (the c of Hoi et al. 2007 is gamma), ``squared_hinge``, ``square``, ``linear``
    (which adds ``K_ii <= b^2`` for every i) or ``logistic`` (``log(1 + exp(-z))``).  P6 of docs/problems.md builds L with ``delta = 0.01``
    (:meth:`from_data` does).
    """

    laplacian: Any
    pairs: Any
    loss: str = "hinge"
    gamma: float = 1.0
    b: float = 1.0

    kind = "npkl"
    default_delta = 0.01
    kind_help = {"npkl": "P6 NPKL (loss, gamma, b)"}
    parameters = graph_pairs_parameters(0.01) + (
        Param("loss", (choice(tuple(LOSSES)),), "hinge", "the loss on the pairs"),
        positive("gamma", 1.0, "weight of the loss on the pairs"),
        positive("b", 1.0, "bound on ||v_i|| (K_ii <= b^2)", requires=(("loss", "linear"),)),
    )

    def __post_init__(self) -> None:
        owner = "NPKL"
        L = check_laplacian(owner, self.laplacian)
        object.__setattr__(self, "laplacian", L)
        object.__setattr__(self, "pairs", check_pairs(owner, self.pairs, L.shape[0]))
        check_choice(owner, "loss", self.loss, tuple(LOSSES))
        object.__setattr__(self, "gamma", check_positive(owner, "gamma", self.gamma))
        if self.loss == "linear" and (self.b is None or isinstance(self.b, bool)
                                      or not isinstance(self.b, numbers.Real)
                                      or not (math.isfinite(self.b) and self.b > 0)):
            # -gamma * sum T_ij K_ij is unbounded below without K_ii <= b^2 (Hu & Kwok 2015, eq. 29)
            raise ProblemError(
                f"The 'b' parameter of NPKL must be a float > 0 with loss='linear': the linear "
                f"loss is unbounded below without the bound K_ii <= b^2 (P6 in docs/problems.md; Hu & Kwok 2015, eq. 29). "
                f"Got {self.b!r} instead."
            )
        object.__setattr__(self, "b", check_positive(owner, "b", self.b))

    @property
    def n_terms(self) -> int:
        return len(self.pairs)

    @cached_property
    def signed_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(idx, T)``: the (m, 2) pairs (must first) and their signs +1 / -1."""
        return self.pairs.indices, self.pairs.signs

    def margins(self, K: Any) -> np.ndarray:
        """``T_ij K_ij`` over the pairs."""
        K = as_kernel(K, self.n)
        idx, T = self.signed_pairs
        return T * entries(K, idx)

    def declare(self):
        """``tr(L K) + gamma sum loss(T_ij K_ij)`` over K PSD (and ``K_ii <= b^2`` for the
        linear loss); the square loss ``(1 - T_ij K_ij)^2`` is ``(K_ij - T_ij)^2``."""
        from ..model import (MARGIN_LOSSES, PSD, Constraint, Declaration, Diagonal, Entries, Inner,
                             LinearTerm, LossTerm, Squared)

        idx, T = self.signed_pairs
        loss = Squared(T) if self.loss == "square" else MARGIN_LOSSES[self.loss](T)
        cons = ()
        if self.loss == "linear":
            cons = (Constraint(Diagonal(self.n), "<=", self.b**2),)
        return Declaration(PSD(self.n), linear=(LinearTerm(Inner(self.laplacian)),),
                           losses=(LossTerm(Entries(self.n, idx), loss, self.gamma),), constraints=cons)

    def params(self) -> dict[str, Any]:
        p = {
            "kind": "npkl",
            "n": self.n,
            "n_must": self.pairs.n_must,
            "n_cannot": self.pairs.n_cannot,
            "loss": self.loss,
            "gamma": self.gamma,
            "nnz_L": int(self.laplacian.nnz),
        }
        if self.loss == "linear":
            p["b"] = self.b
        return p
