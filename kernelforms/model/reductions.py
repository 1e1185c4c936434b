"""Reductions of a declaration to an equivalent, better-posed one.

:func:`merge_equal_points`: equality constraints can force two points to have the same
row of every feasible factor (``K_ii = K_jj = K_ij``, or ``K_ii + K_jj - 2 K_ij = 0``).
Hard PCP (P2, Wu et al. 2009) does this for every must-link: ``K_ii = K_jj = K_ij = 1``.
Such a problem has no strictly feasible ``K`` (interior-point solvers end "inaccurate",
augmented Lagrangians stall), but it is exactly the problem over the merged points:
``K = P K' P^T`` with ``P`` the ``n x c`` indicator of the groups, where ``K' = I`` is
typically strictly feasible.  Conic formulations and the factored solver both use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .declaration import EQ, PSD, Constraint, Declaration, LinearTerm, LossTerm
from .maps import DISTANCE, ENTRY, Inner, PairMap, Trace


@dataclass(frozen=True, eq=False)
class Merged:
    """The result of :func:`merge_equal_points`.

    ``P`` is the sparse ``n x c`` indicator (``P[i, labels[i]] = 1``); a kernel ``K'`` of the
    reduced ``declaration`` is ``K = P K' P^T`` (a factor ``G'`` maps to ``P @ G'``).
    ``conflict`` is None, or a sentence proving the original problem infeasible (two
    equality rows of the merged problem ask different values of the same entry).
    """

    P: sp.csr_matrix
    labels: np.ndarray
    declaration: Declaration | None
    conflict: str | None
    note: str

    @property
    def c(self) -> int:
        return self.P.shape[1]

    def lift(self, G: np.ndarray) -> np.ndarray:
        """A factor of the reduced problem as a factor of the original one."""
        return np.asarray(self.P @ G)


def forced_equal_pairs(decl: Declaration) -> np.ndarray:
    """Pairs ``(i, j)`` whose rows every feasible factor makes equal: an equality
    ``K_ij = a`` together with ``K_ii = a`` and ``K_jj = a``, or a squared distance ``= 0``."""
    diag: dict[int, float] = {}
    cand_i, cand_j, cand_b = [], [], []
    out = []
    for c in decl.constraints:
        m = c.map
        if not isinstance(m, PairMap):
            continue
        eq = c.sense == EQ
        ent = eq & (m.kind == ENTRY)
        on_diag = ent & (m.i == m.j)
        for i, b in zip(m.i[on_diag].tolist(), c.bound[on_diag].tolist()):
            diag.setdefault(i, b)
        off = ent & (m.i != m.j)
        cand_i.append(m.i[off]); cand_j.append(m.j[off]); cand_b.append(c.bound[off])
        zero = eq & (m.kind == DISTANCE) & (c.bound == 0)
        out.append(np.stack([m.i[zero], m.j[zero]], axis=1))
    if cand_i:
        i, j, b = np.concatenate(cand_i), np.concatenate(cand_j), np.concatenate(cand_b)
        if i.size and diag:
            dvals = np.full(decl.n, np.nan)
            keys = np.fromiter(diag.keys(), dtype=np.int64)
            dvals[keys] = np.fromiter(diag.values(), dtype=float)
            same = (dvals[i] == b) & (dvals[j] == b)
            out.append(np.stack([i[same], j[same]], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 2), dtype=np.int64)


def point_groups(decl: Declaration) -> np.ndarray | None:
    """A group label per point, points forced equal (:func:`forced_equal_pairs`, chained)
    sharing one; None when no two points are forced equal."""
    pairs = forced_equal_pairs(decl)
    if len(pairs) == 0:
        return None
    n = decl.n
    from scipy.sparse.csgraph import connected_components

    A = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    c, labels = connected_components(A, directed=False)
    return None if c == n else labels


#: the last declaration merged and its result: planning asks for it several times per
#: problem (the size model's order, data and message, then compile; 0.47 s each for hard PCP
#: on 100,000 points)
_LAST: dict[str, object] = {}


def merge_equal_points(decl: Declaration) -> Merged | None:
    """Merge the points forced equal by equality constraints (see the module docstring).

    Returns None when there is nothing to merge or the declaration is outside what the
    reduction handles (a form other than :class:`PSD`, a divergence, or a map other than
    pair rows, inner products and the trace).  Equality rows that become identical are
    kept once (off-diagonal rows first, sorted, then the diagonal), so that the reduced
    program has independent equations.  The result for the last declaration is kept (a
    declaration does not change), so asking again for the same one costs nothing.
    """
    from ..util import last_result

    return last_result(_LAST, decl, _merge_equal_points)


def _merge_equal_points(decl: Declaration) -> Merged | None:
    """The reduction of :func:`merge_equal_points`, computed."""
    if not isinstance(decl.form, PSD) or decl.divergence is not None:
        return None
    labels = point_groups(decl)
    if labels is None:
        return None
    n, c = decl.n, int(labels.max()) + 1
    P = sp.csr_matrix((np.ones(n), (np.arange(n), labels)), shape=(n, c))
    counts = np.bincount(labels, minlength=c).astype(float)

    def pull(m):
        if isinstance(m, PairMap):
            a, b = labels[m.i], labels[m.j]
            if np.any((m.kind == DISTANCE) & (a == b)):
                return None  # a distance inside a group is the constant 0
            return PairMap(c, a, b, m.kind)
        if isinstance(m, Inner):
            return Inner((P.T @ m.M @ P).tocsr())
        if isinstance(m, Trace):
            return Inner(sp.diags(counts).tocsr())
        return None

    linear, losses, cons = [], [], []
    for t in decl.linear:
        m = pull(t.map)
        if m is None:
            return None
        linear.append(LinearTerm(m, t.coef))
    for t in decl.losses:
        m = pull(t.map)
        if m is None:
            return None
        losses.append(LossTerm(m, t.loss, t.weight))
    conflict = None
    eq_rows: dict[tuple[int, int, int], float] = {}
    for con in decl.constraints:
        eq = con.sense == EQ
        m = con.map
        if isinstance(m, PairMap):
            a, b = labels[m.i], labels[m.j]
            a, b = np.minimum(a, b), np.maximum(a, b)
            inside = (m.kind == DISTANCE) & (a == b)
            # a distance row inside a group is 0 <sense> bound: feasible or a proof of infeasibility
            if np.any(inside & eq & (con.bound != 0)):
                k = int(np.flatnonzero(inside & eq & (con.bound != 0))[0])
                conflict = (f"a distance between points {int(m.i[k])} and {int(m.j[k])} must equal "
                            f"{con.bound[k]:g}, but equality constraints force the two points equal")
            if not np.all(eq):
                keep = ~eq & ~inside
                if np.any(inside & ~eq):
                    g = np.where(con.sense == 1, 0 >= con.bound, 0 <= con.bound)  # GE: 0 >= b
                    if np.any(inside & ~eq & ~g):
                        conflict = conflict or ("an inequality on the distance of two points forced "
                                                "equal cannot hold")
                if np.any(keep):
                    cons.append(Constraint(PairMap(c, a[keep], b[keep], m.kind[keep]),
                                           con.sense[keep], con.bound[keep]))
            for i, j, k, v in zip(a[eq & ~inside].tolist(), b[eq & ~inside].tolist(),
                                  m.kind[eq & ~inside].tolist(), con.bound[eq & ~inside].tolist()):
                key = (i, j, k)
                if key in eq_rows and eq_rows[key] != v and conflict is None:
                    conflict = _conflict(labels, counts, i, j, k, eq_rows[key], v)
                eq_rows.setdefault(key, v)
        else:
            m2 = pull(m)
            if m2 is None:
                return None
            cons.append(Constraint(m2, con.sense, con.bound))
    if eq_rows:
        keys = sorted(eq_rows, key=lambda k: (k[0] == k[1] and k[2] == ENTRY, k[0], k[1]))
        ii = np.array([k[0] for k in keys]); jj = np.array([k[1] for k in keys])
        kk = np.array([k[2] for k in keys]); bb = np.array([eq_rows[k] for k in keys])
        cons.insert(0, Constraint(PairMap(c, ii, jj, kk), "==", bb))
    reduced = None
    if conflict is None:
        reduced = Declaration(PSD(c), linear=tuple(linear), losses=tuple(losses),
                              constraints=tuple(cons), sense=decl.sense, meta=dict(decl.meta))
    note = f"points forced equal merged: K = P K' P^T, K' of size {c}"
    return Merged(P, labels, reduced, conflict, note)


def _conflict(labels: np.ndarray, counts: np.ndarray, a: int, b: int, kind: int, v1: float,
              v2: float) -> str:
    """The sentence proving infeasibility: one merged row asked two values."""
    def pts(g: int) -> str:
        mem = np.flatnonzero(labels == g)[:4].tolist()
        return "{" + ", ".join(map(str, mem)) + (", ..." if counts[g] > 4 else "") + "}"

    what = (f"the entry K_ij with i in {pts(a)} and j in {pts(b)}" if kind == ENTRY
            else f"the distance between {pts(a)} and {pts(b)}")
    groups = pts(a) if a == b else f"{pts(a)} and of {pts(b)}"
    return (f"equality constraints force the points of {groups} to be equal, and then {what} "
            f"must equal both {v1:g} and {v2:g}: the constraints are infeasible")
