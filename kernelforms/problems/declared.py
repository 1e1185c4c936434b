"""A problem of your own: any :class:`~kernelforms.model.Declaration` as a problem.

::

    import kernelforms as kf
    from kernelforms import model as km

    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=5)
    idx, t = ...                      # pairs and targets
    E, d = kf.graphs.knn_edges(X, k=4)
    decl = km.Declaration(
        km.PSD(n),
        linear=[km.LinearTerm(km.Inner(L))],
        losses=[km.LossTerm(km.Entries(n, idx), km.Squared(t), weight=0.5)],
        constraints=[km.Constraint(km.Distances(n, E), "<=", d**2)],
    )
    problem = kf.DeclaredProblem(decl, name="soft PCP with distance bounds")
    kf.compare(problem, ["sdp", "lowrank"])

Every formulation and solver that handles the declaration's terms applies; the others
are skipped with their reason.  docs/problems.md ("Problems of your own") has two worked
examples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ProblemError
from .base import Problem, rank_rule


class DeclaredProblem(Problem):
    """Wrap a :class:`~kernelforms.model.Declaration` as a problem.

    Parameters
    ----------
    declaration : kernelforms.model.Declaration
        The problem stated in the vocabulary of :mod:`kernelforms.model`.
    name : str, default "declared"
        A short name for reports (one line, at most 80 printable characters).
    rank : int, optional
        The default rank of the factored solvers; by default the rank rule of Hu & Kwok
        (the largest r with r (r + 1) / 2 <= m) on m = the number of loss and constraint
        rows.
    """

    kind = "declared"

    def __init__(self, declaration: Any, *, name: str = "declared", rank: int | None = None) -> None:
        from ..model import Declaration

        if not isinstance(declaration, Declaration):
            raise ProblemError(
                f"The 'declaration' parameter of DeclaredProblem must be a "
                f"kernelforms.model.Declaration. Got {type(declaration).__name__} instead.")
        if not isinstance(name, str) or not 1 <= len(name) <= 80 or not name.isprintable():
            raise ProblemError(
                "The 'name' parameter of DeclaredProblem must be a short one-line string (1 to 80 "
                f"printable characters). Got {name!r} instead.")
        n = declaration.n
        if rank is not None:
            from .base import check_int

            rank = check_int("DeclaredProblem", "rank", rank, low=1, high=n)
        self.__dict__["declaration"] = declaration
        self.__dict__["name"] = name
        self.__dict__["_rank"] = rank

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"DeclaredProblem is immutable (cannot set {key!r})")

    def declare(self):
        return self.__dict__["declaration"]

    @property
    def sense(self) -> str:  # type: ignore[override]
        return self.declaration.sense

    @property
    def n(self) -> int:
        return self.declaration.n

    @property
    def n_terms(self) -> int:
        d = self.declaration
        return d.n_loss_rows + d.n_constraint_rows

    def default_rank(self) -> int:
        if self._rank is not None:
            return self._rank
        form = self.declaration.form
        return min(rank_rule(self.n_terms, self.n), getattr(form, "block", self.n))

    def params(self) -> dict[str, Any]:
        d = self.declaration
        return {"kind": "declared", "name": self.name, "n": self.n, "sense": d.sense,
                "terms": d.structure()}

    @property
    def label(self) -> str:
        return f"DeclaredProblem({self.name!r}, n={self.n}, {self.declaration.structure()})"

    def _fingerprint_arrays(self) -> list[Any]:
        return list(_declaration_arrays(self.declaration))

    def __reduce__(self):
        return (_rebuild, (self.declaration, self.name, self._rank))


def _rebuild(declaration: Any, name: str, rank: int | None) -> DeclaredProblem:
    return DeclaredProblem(declaration, name=name, rank=rank)


def _declaration_arrays(decl: Any):
    """Every array that defines a declaration, in a fixed order (for the fingerprint)."""
    from ..model import Basis, Inner, PairMap, Range

    def map_arrays(m):
        yield np.array([type(m).__name__], dtype=str)
        yield np.array([m.n])
        if isinstance(m, PairMap):
            yield from (m.i, m.j, m.kind)
        elif isinstance(m, Inner):
            M = sp.csr_matrix(m.M)
            yield from (M.data, M.indices, M.indptr)

    form = decl.form
    yield np.array([type(form).__name__], dtype=str)
    if isinstance(form, Basis):
        yield form.B
    elif isinstance(form, Range):
        yield form.G0
    for t in decl.linear:
        yield from map_arrays(t.map)
        yield t.coef
    for t in decl.losses:
        yield from map_arrays(t.map)
        yield np.array([t.loss.name], dtype=str)
        yield np.asarray(getattr(t.loss, "targets", getattr(t.loss, "labels", np.zeros(0))))
        yield np.array([t.weight])
    for c in decl.constraints:
        yield from map_arrays(c.map)
        yield c.sense
        yield c.bound
    yield np.array([decl.sense, "" if decl.divergence is None else decl.divergence.kind], dtype=str)
