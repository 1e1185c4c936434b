"""What smo reads from a declaration (:func:`match` -> :class:`HingeView`, or the reason it
does not apply): the sparse cost, the hinge pairs with their labels and weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ...model import Hinge
from ..base import psd_minimisation_reason


@dataclass(frozen=True, eq=False)
class HingeView:
    """What the SMO-like solver reads from a declaration (:func:`match`): the sparse cost
    ``C`` (the linear terms), the pairs ``idx`` (m x 2) of the hinge terms with their labels
    ``T`` (+1 / -1), and ``gamma``, the hinge weight: one number when every hinge term has
    the same weight (P6), else one per pair (the dual box ``0 <= Q_p <= gamma_p``)."""

    n: int
    C: sp.csr_matrix
    idx: np.ndarray
    T: np.ndarray
    gamma: Any

    @property
    def m(self) -> int:
        return len(self.idx)

    @property
    def gamma_max(self) -> float:
        return float(np.max(self.gamma))

    def gamma_text(self) -> str:
        if np.ndim(self.gamma) == 0:
            return f"gamma = {self.gamma:g}"
        g = np.unique(self.gamma)
        return "gamma = " + " / ".join(f"{x:g}" for x in g) + " (per hinge term)"


def match(decl: Any, name: str = "smo") -> "HingeView | str":
    """The :class:`HingeView` of a declaration, or why the SMO-like dual solver does not
    apply (a sentence for ``applies_to``).

    Applies to: minimise ``<C, K> + sum_k gamma_k sum_p max(0, 1 - y_p K_ij)`` over K PSD,
    with ``C`` sparse (the linear terms, e.g. ``tr(L K)``), one or more hinge loss terms on
    off-diagonal entries ``K_ij`` (each pair at most once over all terms; the weights may
    differ) and no constraints: the dual of Hoi et al. (2007) with a box ``[0, gamma_k]``
    per pair.
    """
    what = (f"{name!r} solves min <C, K> + sum of hinge losses on off-diagonal entries K_ij over "
            "K PSD, with no constraints (the dual of Hoi et al. 2007)")
    why = psd_minimisation_reason(decl, what)
    if why is not None:
        return why
    if decl.constraints:
        return f"{what}; this problem has {decl.n_constraint_rows} constraint rows"
    if not decl.losses:
        return f"{what}; this problem has no loss term"
    for t in decl.losses:
        if not isinstance(t.loss, Hinge):
            return f"{what}; this problem has a {t.loss.name} loss term ({t.describe()})"
        if not t.map.is_entries or np.any(t.map.i == t.map.j):
            return (f"{what}; the hinge term '{t.describe()}' is on {t.map.describe()}, not on "
                    "off-diagonal entries K_ij")
    if not decl.linear:
        return f"{what}; this problem has no linear term <C, K> (the dual's M(Q) starts at C)"
    C = decl.cost_matrix()
    if C is None:
        return (f"{what}; a linear term of this problem has a dense matrix "
                f"({', '.join(t.describe() for t in decl.linear)}), not a sparse C")
    terms = decl.losses
    if len(terms) == 1:
        t = terms[0]
        idx = t.map.pairs
        T = np.asarray(t.loss.labels, dtype=float)
        gamma: Any = float(t.weight)
    else:
        idx = np.concatenate([t.map.pairs for t in terms])
        T = np.concatenate([np.asarray(t.loss.labels, dtype=float) for t in terms])
        w = np.concatenate([np.full(t.map.size, float(t.weight)) for t in terms])
        gamma = float(w[0]) if np.all(w == w[0]) else w
    n = decl.n
    key = np.minimum(idx[:, 0], idx[:, 1]) * n + np.maximum(idx[:, 0], idx[:, 1])
    if np.unique(key).size < key.size:
        return (f"{what}; a pair appears twice among the hinge terms (each pair K_ij may carry "
                "one hinge loss)")
    return HingeView(n, sp.csr_matrix(C), idx, T, gamma)


def _view_of(source: Any) -> HingeView:
    """A problem's :class:`HingeView` (or the view itself); NotApplicable when it has none."""
    if isinstance(source, HingeView):
        return source
    got = match(source.declaration)
    if isinstance(got, str):
        from ...errors import NotApplicable

        raise NotApplicable(got)
    return got
