"""What bcd reads from a declaration (:func:`_match` -> :class:`_View`, or the reason it does
not apply): the sparse cost, the pair rows in margin form with their kinds and weights, the
squared losses on ``K_ii`` (soft PCP) and the bound ``K_ii <= b^2`` (the linear loss)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..base import psd_minimisation_reason


#: loss kinds of the pair rows (per pair, so that one problem may mix them)
HINGE, SQUARED_HINGE, SQUARE, LINEAR = 0, 1, 2, 3
KIND_NAMES = ("hinge", "squared_hinge", "square", "linear")  # the uniform modes' names
_LOSS_NAMES = ("hinge", "squared_hinge", "squared", "linear")  # the losses' own names
#: Loss.row_update -> the kind whose closed-form row update applies
_ROW_UPDATES = {name: code for code, name in enumerate(KIND_NAMES)}

#: the losses of the uniform modes as functions of the margin ``z`` (same as P6)
_MARGIN_LOSS = {
    "hinge": lambda z: np.maximum(0.0, 1.0 - z),
    "squared_hinge": lambda z: np.maximum(0.0, 1.0 - z) ** 2,
    "square": lambda z: (1.0 - z) ** 2,
    "linear": lambda z: -z,
}


@dataclass
class _View:
    """What BCDKL needs from a declaration (built by :func:`_match`).

    The pair rows are written in a margin form: pair ``p = {i, j}`` (``i != j``) carries
    ``w_p l_p(z_p)`` with ``z_p = s_p K_ij`` and, by kind, ``l = max(0, 1 - z)`` (hinge),
    ``max(0, 1 - z)^2``, ``(tau_p - z)^2`` (a squared loss ``(K_ij - t)^2``: ``s = t,
    tau = 1`` when ``t = +-1``, else ``s = 1, tau = t``) or ``-z`` (linear).

    ``mode`` names the row update: one kind with one weight (``"hinge"``,
    ``"squared_hinge"``, ``"square"``, ``"linear"``: the closed forms of Hu & Kwok 2015,
    ``gamma`` the weight), ``"pcp"`` (squared losses on the pairs and on every ``K_ii``:
    the quartic row of soft PCP), or ``"mixed"`` (any mix of hinge, squared hinge and
    squared losses and weights: one box QP per row).
    """

    n: int
    C: sp.csr_matrix  # the linear terms as one sparse cost <C, K>, C_ii > 0
    idx: np.ndarray  # (m, 2) pairs i != j, each at most once
    sign: np.ndarray  # (m,) s_p
    tau: np.ndarray  # (m,) tau_p
    w: np.ndarray  # (m,) weights
    kind: np.ndarray  # (m,) HINGE / SQUARED_HINGE / SQUARE / LINEAR
    mode: str
    gamma: float | None = None  # the one weight of a uniform mode (pcp: twice it)
    wd: np.ndarray | None = None  # (n,) weight of the squared loss on K_ii (pcp)
    td: np.ndarray | None = None  # (n,) its target
    b: float | None = None  # K_ii <= b^2 on every point (linear losses)

    @property
    def has_hinge(self) -> bool:
        return bool(np.any(self.kind == HINGE))

    def permuted(self, perm: np.ndarray, inv: np.ndarray) -> "_View":
        """The same problem with the points renumbered (new point ``a`` is old ``perm[a]``)."""
        from dataclasses import replace

        return replace(self, C=self.C[perm][:, perm], idx=inv[self.idx],
                       wd=None if self.wd is None else self.wd[perm],
                       td=None if self.td is None else self.td[perm])


def _match(decl: Any) -> "_View | str":
    """The view of a declaration BCDKL solves, or the reason it does not apply.

    BCDKL (Hu & Kwok 2015) updates one row ``g_i`` of ``K = G G^T`` at a time; it handles
    ``min <C, K> + loss terms`` over K PSD with a sparse cost whose diagonal is > 0
    (the row subproblem divides by ``C_ii``), loss terms on entries of K (hinge,
    squared hinge, squared or linear, mixed kinds and weights allowed; a squared loss
    on ``K_ii`` as in soft PCP), and only the bound ``K_ii <= b^2`` on every point, which
    the linear loss needs.
    """
    from ...model import LE

    head = ("bcd handles a sparse linear cost with C_ii > 0 plus hinge, squared hinge, squared "
            "or linear losses on entries of K, over K PSD")
    why = psd_minimisation_reason(decl, head)
    if why is not None:
        return why
    n = decl.n
    # the constraint: K_ii <= b^2 on every point, one b
    b = None
    if decl.constraints:
        rows = [c for c in decl.constraints
                if getattr(c.map, "is_diagonal", False) and np.all(c.sense == LE)]
        pts = np.concatenate([c.map.i for c in rows]) if rows else np.zeros(0, np.int64)
        bounds = np.concatenate([c.bound for c in rows]) if rows else np.zeros(0)
        if (len(rows) != len(decl.constraints) or pts.size != n or np.unique(pts).size != n
                or not np.all(bounds == bounds[0]) or bounds[0] <= 0):
            return (f"bcd handles one constraint, K_ii <= b^2 with the same b > 0 on every point "
                    f"(the linear loss needs it); this problem has "
                    f"{'; '.join(c.describe() for c in decl.constraints)}")
        b = math.sqrt(float(bounds[0]))
    if not decl.losses:
        return f"{head}; this problem has no loss term (only linear terms)"
    I, J, W, K, S, T = [], [], [], [], [], []
    DI, DW, DT = [], [], []
    for term in decl.losses:
        # the loss names its closed-form row update (Loss.row_update), if it has one
        k = _ROW_UPDATES.get(term.loss.row_update)
        if k is None:
            return (f"{head}; this problem has a {term.loss.name} loss term, for which the row "
                    "subproblem has no closed form: use 'lowrank' (smooth losses) or 'sdp'")
        m = term.map
        if not getattr(m, "is_entries", False):
            return (f"bcd needs losses on entries K_ij (a row of the factor per point); this "
                    f"problem has a {term.loss.name} loss on {m.describe()}")
        diag = m.i == m.j
        if np.any(diag):
            if k != SQUARE:
                return (f"bcd handles a loss on K_ii only when it is squared (the quartic row "
                        f"subproblem of soft PCP); this problem has a {term.loss.name} loss on K_ii")
            DI.append(m.i[diag])
            DW.append(np.full(int(diag.sum()), term.weight))
            DT.append(term.loss.targets[diag])
        o = ~diag
        I.append(m.i[o])
        J.append(m.j[o])
        W.append(np.full(int(o.sum()), term.weight))
        K.append(np.full(int(o.sum()), k, dtype=np.int64))
        # margin losses: s = label; squared: the target (resolved below)
        S.append(term.loss.targets[o] if k == SQUARE else term.loss.labels[o])
        T.append(np.ones(int(o.sum())) if k in (HINGE, SQUARED_HINGE) else
                 np.zeros(int(o.sum())) if k == LINEAR else np.full(int(o.sum()), np.nan))
    i, j = np.concatenate(I).astype(np.int64), np.concatenate(J).astype(np.int64)
    w, kind = np.concatenate(W).astype(float), np.concatenate(K)
    lab, tau = np.concatenate(S).astype(float), np.concatenate(T)
    key = np.minimum(i, j) * n + np.maximum(i, j)
    uk, cnt = np.unique(key, return_counts=True)
    if np.any(cnt > 1):
        dup = int(uk[np.argmax(cnt > 1)])
        return (f"bcd needs every pair at most once over the loss terms (one loss per pair in the "
                f"row subproblem); pair ({dup // n}, {dup % n}) appears {int(cnt.max())} times")
    if np.any(kind == LINEAR) or b is not None:
        if b is None:
            return ("a linear loss is unbounded below without the bound K_ii <= b^2 on every point "
                    "(Hu & Kwok 2015, eq. 29); bcd needs that constraint in the declaration")
        other = sorted({_LOSS_NAMES[k] for k in np.unique(kind) if k != LINEAR})
        if DI:
            other.append("squared (on K_ii)")
        if other or not np.any(kind == LINEAR):
            return (f"bcd handles the bound K_ii <= b^2 only with linear losses alone (the row "
                    f"subproblem is then a projection onto ||g|| <= b); this problem has "
                    f"{' and '.join(other) or 'no linear'} loss terms with it")
    C = decl.cost_matrix()
    if C is None:
        return (f"{head}; this problem has a linear term with a dense adjoint "
                f"({', '.join(t.map.describe() for t in decl.linear)})")
    C = sp.csr_matrix(C)
    d = C.diagonal()
    if np.any(d <= 0):
        k = int(np.argmin(d))
        return (f"every diagonal entry C_ii of the linear cost <C, K> must be > 0 (the per-row "
                f"subproblem divides by it); C[{k},{k}] = {d[k]:.3g} (for tr(L K), build L "
                f"with delta > 0)")
    idx = np.stack([i, j], axis=1)
    sq = kind == SQUARE
    if DI:
        di = np.concatenate(DI)
        if di.size != n or np.unique(di).size != n:
            return (f"bcd handles squared losses on K_ii on every point once or on none (the "
                    f"quartic row subproblem of soft PCP); this problem has {di.size} such rows "
                    f"on {np.unique(di).size} of {n} points")
        if not np.all(sq):
            other = sorted({_LOSS_NAMES[k] for k in np.unique(kind[~sq])})
            return (f"bcd handles a squared loss on K_ii only with squared losses on the pairs "
                    f"(the quartic row subproblem of soft PCP); this problem also has a "
                    f"{' and a '.join(other)} loss")
        wd, td = np.empty(n), np.empty(n)
        wd[di], td[di] = np.concatenate(DW), np.concatenate(DT)
        uniform = bool(np.all(w == wd[0]) and np.all(wd == wd[0]) and np.all(td == 1.0))
        return _View(n, C, idx, np.ones(i.size), lab, w, kind, "pcp",
                     gamma=2.0 * float(wd[0]) if uniform else None, wd=wd, td=td)
    uniform = bool(w.size and np.all(w == w[0]))
    one = np.unique(kind)
    unit = np.abs(lab) == 1.0
    sign = np.where(sq & ~unit, 1.0, lab)
    tau = np.where(sq, np.where(unit, 1.0, lab), tau)
    if one.size == 1 and one[0] == LINEAR:
        return _View(n, C, idx, sign, tau, w, kind, "linear",
                     gamma=float(w[0]) if uniform else None, b=b)
    if uniform and one.size == 1 and (one[0] != SQUARE or np.all(unit)):
        return _View(n, C, idx, sign, tau, w, kind, KIND_NAMES[int(one[0])], gamma=float(w[0]))
    return _View(n, C, idx, sign, tau, w, kind, "mixed")
