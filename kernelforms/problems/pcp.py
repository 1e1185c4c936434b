"""Pairwise constraint propagation: soft PCP (P1), hard PCP (P2) and RegPCP (P3)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import ProblemWarning
from ..result import as_kernel
from .schema import count, graph_pairs_parameters, positive
from .base import (
    GraphPairsProblem,
    check_basis,
    check_basis_size,
    check_laplacian,
    check_pairs,
    check_positive,
    diagonal,
    entries,
)


class _TargetSet(GraphPairsProblem):
    """The set ``T = M ∪ C ∪ {(i, i)}`` with targets 1 on M and the diagonal, 0 on C."""

    @property
    def n_terms(self) -> int:
        return len(self.pairs) + self.n

    @cached_property
    def target_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(idx, t)``: the (m, 2) index pairs of T (must, cannot, then diagonal) and targets."""
        n, pairs = self.n, self.pairs
        diag = np.repeat(np.arange(n, dtype=np.int64)[:, None], 2, axis=1)
        idx = np.concatenate([pairs.must, pairs.cannot, diag])
        t = np.concatenate([np.ones(pairs.n_must), np.zeros(pairs.n_cannot), np.ones(n)])
        idx.flags.writeable = False
        t.flags.writeable = False
        return idx, t

    def residuals(self, K: Any) -> np.ndarray:
        """``K_ij - T_ij`` over T (same order as :attr:`target_pairs`)."""
        K = as_kernel(K, self.n)
        idx, t = self.target_pairs
        npairs = len(self.pairs)
        return np.concatenate([entries(K, idx[:npairs]), diagonal(K)]) - t


@dataclass(frozen=True, eq=False, repr=False)
class PCP(_TargetSet):
    """Pairwise constraint propagation (docs/problems.md P1, or P2 with ``hard=True``).

    Soft (P1, Hu & Kwok 2013, eq. 1-2)::

        min  tr(K L) + (gamma / 2) * sum_{(i,j) in T} (K_ij - T_ij)^2   over K PSD

    with ``T = M ∪ C ∪ {(i, i)}``, targets 1 on must-links and the diagonal, 0 on
    cannot-links; every pair counted once.

    Hard (P2, Wu et al. 2009, eq. 5-9)::

        min  tr(L K)  s.t.  K_ii = 1, K_ij = 1 on M, K_ij = 0 on C, K PSD

    Parameters
    ----------
    laplacian : sparse or dense (n, n)
        The graph Laplacian L (``kernelforms.graphs.knn_laplacian``).
    pairs : Pairs or (must, cannot)
        Must-link and cannot-link pairs.
    gamma : float, default 1
        Weight of the squared loss (soft only).
    hard : bool, default False
        Solve P2 instead of P1.
    """

    laplacian: Any
    pairs: Any
    gamma: float = 1.0
    hard: bool = False

    kind = "pcp"
    #: the problem kinds this class builds (``hard=True``: pcp-hard) and their one-line help
    kind_help = {"pcp": "P1 soft PCP (squared loss, gamma)", "pcp-hard": "P2 hard PCP"}
    #: constructor arguments a kind fixes
    kind_fixed = {"pcp-hard": {"hard": True}}
    #: the build parameters (kernelforms.problems.schema)
    parameters = graph_pairs_parameters(0.0) + (
        positive("gamma", 1.0, "weight of the loss on the pairs", kinds=("pcp",)),
    )

    def __post_init__(self) -> None:
        owner = "PCP"
        L = check_laplacian(owner, self.laplacian)
        object.__setattr__(self, "laplacian", L)
        object.__setattr__(self, "pairs", check_pairs(owner, self.pairs, L.shape[0]))
        object.__setattr__(self, "gamma", check_positive(owner, "gamma", self.gamma))
        if not isinstance(self.hard, (bool, np.bool_)):
            from ..errors import param_error

            raise param_error(owner, "hard", "a bool", self.hard)
        object.__setattr__(self, "hard", bool(self.hard))
        if self.hard:
            from ..data.pairs import inconsistent_pairs

            bad = inconsistent_pairs(self.pairs)
            if len(bad):
                warnings.warn(
                    f"PCP(hard=True): {len(bad)} cannot-link pair(s) join points already linked "
                    f"by a chain of must-links (first: {tuple(map(int, bad[0]))}); the hard "
                    "problem is infeasible and solvers will report it.",
                    ProblemWarning,
                    stacklevel=3,
                )

    # ------------------------------------------------------------------ declaration
    def declare(self):
        """``tr(L K)`` plus ``(gamma / 2) sum_T (K_ij - T_ij)^2`` (soft), or plus the
        equalities ``K_ij = T_ij`` on T (hard), over K PSD."""
        from ..model import PSD, Constraint, Declaration, Entries, Inner, LinearTerm, LossTerm, Squared

        idx, t = self.target_pairs
        smooth = LinearTerm(Inner(self.laplacian))
        ent = Entries(self.n, idx)
        if self.hard:
            return Declaration(PSD(self.n), linear=(smooth,), constraints=(Constraint(ent, "==", t),))
        return Declaration(PSD(self.n), linear=(smooth,),
                           losses=(LossTerm(ent, Squared(t), 0.5 * self.gamma),))

    def params(self) -> dict[str, Any]:
        return {
            "kind": "pcp-hard" if self.hard else "pcp",
            "n": self.n,
            "n_must": self.pairs.n_must,
            "n_cannot": self.pairs.n_cannot,
            "gamma": None if self.hard else self.gamma,
            "nnz_L": int(self.laplacian.nnz),
        }


@dataclass(frozen=True, eq=False, repr=False)
class RegPCP(_TargetSet):
    """Graph-Laplacian regularised PCP (docs/problems.md P3, Wu et al. 2009, eq. 12).

    ``Q`` holds the ``m_basis`` eigenvectors of L with the smallest eigenvalues and
    ``K = Q Y Q^T``::

        min  sum_{(i,j) in S} ((Q Y Q^T)_ij - t_ij)^2   over Y PSD

    with ``S = M ∪ C ∪ {(i, i)}`` and targets 1 / 0 / 1.  The objective is defined
    for any K; formulations search over ``K = Q Y Q^T``.
    """

    laplacian: Any
    pairs: Any
    m_basis: int = 10
    basis: np.ndarray | None = field(default=None, repr=False)

    kind = "regpcp"
    kind_help = {"regpcp": "P3 RegPCP (m_basis)"}
    parameters = graph_pairs_parameters(0.0) + (
        count("m_basis", 10, "basis size (1 <= m_basis < n)"),
    )

    def __post_init__(self) -> None:
        owner = "RegPCP"
        L = check_laplacian(owner, self.laplacian)
        n = L.shape[0]
        object.__setattr__(self, "laplacian", L)
        object.__setattr__(self, "pairs", check_pairs(owner, self.pairs, n))
        m = check_basis_size(owner, self.m_basis, n)
        object.__setattr__(self, "m_basis", m)
        if self.basis is None:
            from ..data.graphs import smallest_eigenvectors

            _, Q = smallest_eigenvectors(L, m, skip=0)
        else:
            Q = check_basis(owner, self.basis, n, m)
        Q = np.ascontiguousarray(Q)
        Q.flags.writeable = False
        object.__setattr__(self, "basis", Q)

    def declare(self):
        """``sum_S (K_ij - t_ij)^2`` over ``K = Q Y Q^T``, Y PSD."""
        from ..model import Basis, Declaration, Entries, LossTerm, Squared

        idx, t = self.target_pairs
        return Declaration(Basis(self.basis), losses=(LossTerm(Entries(self.n, idx), Squared(t), 1.0),))

    def params(self) -> dict[str, Any]:
        return {
            "kind": "regpcp",
            "n": self.n,
            "n_must": self.pairs.n_must,
            "n_cannot": self.pairs.n_cannot,
            "m_basis": self.m_basis,
        }
