"""The factored oracle: a declaration's objective and constraints on a factor ``K = G G^T``.

Built once per declaration (:func:`oracle`, kept on it like the canonical form) from the
canonical form (:mod:`kernelforms.model.canonical`), so from the declaration the chain of
reductions leaves (:mod:`kernelforms.model.chain`): points forced equal merged
(``G = P H``), a maximisation negated (the oracle always minimises), the centring row
``1^T K 1 = 0`` kept by centred factors (``G = (I - 11^T/n) H``).  A method that works on a
factor reads this one object instead of parsing the declaration itself:

* the variable: ``H`` has :attr:`Oracle.rows` rows (the merged points, the basis's ``k``
  columns of ``K = B Y B^T``, or ``n``); :meth:`Oracle.to_G` maps it to the model factor
  ``G`` and :meth:`Oracle.to_H_grad` a gradient in ``G`` back (the map is linear, its
  adjoint is the transpose); :meth:`Oracle.problem_factor` gives the problem's factor
  (``n`` rows, problem units) and :meth:`Oracle.from_G` a start ``H`` from one;
* ``f(G) = <C, G G^T> + t ||G||^2 + sum_k w_k sum_rows l_k(A_k(G G^T))`` with its gradient
  (:meth:`Oracle.smooth`), Hessian-vector products (:meth:`Oracle.hessp`), and the
  ``r x r`` diagonal blocks of the Hessian, one per row of ``G`` (:meth:`Oracle.row_blocks`);
  a loss is read only through its properties (``value``, ``grad``, ``hess``), so any smooth
  loss of :mod:`kernelforms.model.losses` (or of the user's) works here without an edit;
* the constraint rows as :class:`Block` s, ``eq`` (``c(G) = A(G G^T) - b = 0``) and
  ``ineq`` (``sgn (A(G G^T) - b) <= 0``), their values (:meth:`Oracle.constraints`), the
  scatter of a weighted sum of their gradients (:meth:`Oracle.scatter`) and the dual slack
  ``S = grad F(K) - sum_k lambda_k A_k`` as an operator (:meth:`Oracle.dual_slack`);
* the row operators, compiled once (:func:`compile_map`): entries and diagonal entries
  ``g_i . g_j`` (:class:`PairOp`), squared distances ``||g_i - g_j||^2`` (:class:`DistOp`),
  both (:class:`MixedOp`), any other map through its own ``apply`` / ``adjoint_op``
  (:class:`MapOp`), and some rows of one (:class:`Rows`).  Each has ``values(G)``,
  ``dvalues(G, V)`` (the directional derivative), ``grad(G, w) = d(w . values)/dG = 2 A*(w) G``
  and ``adjoint(w) = A*(w)``.

A problem of linear terms and constraints only is homogeneous (``K -> s^2 K`` scales the
objective and every bound alike): the oracle works in units where the mean nonzero
``|bound|`` is 1 (:attr:`Oracle.scale`; MVU's squared distances are in the data's units),
and :meth:`Oracle.problem_factor` multiplies back.

The oracle covers ``K PSD`` and ``K = B Y B^T`` without a divergence (:func:`oracle` raises
``ValueError`` otherwise); whether a method can use it on a given loss (L-BFGS needs
``Loss.smooth``) is the method's capability, not the oracle's.  One evaluation costs
``O(nnz(C) r + m r)`` for ``m`` pair rows; no ``n x n`` matrix is formed.

The certificate (:mod:`kernelforms.certificate`) reads :meth:`Oracle.value` (the objective
at its point and at the feasible points of its trace rule) and the pair-row operators (the
loss rows' values) where the oracle states its problem on the same points (no points
merged, no divergence).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..result import LowRank
from .canonical import canonical
from .chain import derived
from .declaration import EQ, GE, PSD, Basis, Declaration
from .maps import DISTANCE, LinearMap, PairMap, SymOperator, Trace, sym_sum
from .reductions import merge_equal_points

__all__ = ["Block", "DistOp", "MapOp", "MixedOp", "Oracle", "PairOp", "Rows", "compile_map",
           "loss_phi", "oracle"]


# ----------------------------------------------------------------------------- row operators
class PairOp:
    """Entries ``z_p = g_i . g_j`` of a :class:`PairMap` (diagonal entries ``i == j``
    included) and the scatter of ``sum_p w_p dz_p/dG`` through incidence matrices built once
    (the map's generic adjoint builds a sparse matrix per call; these reuse the pattern)."""

    def __init__(self, m: PairMap) -> None:
        self.map = m
        self.i, self.j = np.asarray(m.i).copy(), np.asarray(m.j).copy()
        p, n = len(self.i), m.n
        cols = np.arange(p)
        self.Pi = sp.csr_matrix((np.ones(p), (self.i, cols)), shape=(n, p))
        self.Pj = sp.csr_matrix((np.ones(p), (self.j, cols)), shape=(n, p))

    def values(self, G: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", G[self.i], G[self.j])

    def dvalues(self, G: np.ndarray, V: np.ndarray) -> np.ndarray:
        """Directional derivative of the values at G along V."""
        return np.einsum("ij,ij->i", G[self.i], V[self.j]) + np.einsum("ij,ij->i", V[self.i], G[self.j])

    def grad(self, G: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``sum_p w_p d(g_i . g_j)/dG = 2 A*(w) G`` with ``A_p = (E_ij + E_ji) / 2``."""
        return self.Pi @ (w[:, None] * G[self.j]) + self.Pj @ (w[:, None] * G[self.i])

    def adjoint(self, w: np.ndarray) -> SymOperator:
        return self.map.adjoint_op(w)


class DistOp:
    """Squared distances ``c_e = ||g_i - g_j||^2`` of a :class:`PairMap` and their gradient
    scatter (an incidence matrix built once)."""

    def __init__(self, m: PairMap) -> None:
        self.map = m
        e, n = m.size, m.n
        cols = np.arange(e)
        self.B = sp.csr_matrix((np.concatenate([np.ones(e), -np.ones(e)]),
                                (np.concatenate([m.i, m.j]), np.concatenate([cols, cols]))),
                               shape=(n, e))
        self.BT = self.B.T.tocsr()

    def values(self, G: np.ndarray) -> np.ndarray:
        D = self.BT @ G
        return np.einsum("ij,ij->i", D, D)

    def dvalues(self, G: np.ndarray, V: np.ndarray) -> np.ndarray:
        return 2.0 * np.einsum("ij,ij->i", self.BT @ G, self.BT @ V)

    def grad(self, G: np.ndarray, w: np.ndarray) -> np.ndarray:
        return 2.0 * (self.B @ (w[:, None] * (self.BT @ G)))

    def adjoint(self, w: np.ndarray) -> SymOperator:
        return self.map.adjoint_op(w)


class MixedOp:
    """A :class:`PairMap` with entry and distance rows: one of each operator on its rows."""

    def __init__(self, m: PairMap) -> None:
        self.map = m
        self.dist = m.kind == DISTANCE
        self.ent = ~self.dist
        self.pe, self.pd = PairOp(m.take(self.ent)), DistOp(m.take(self.dist))

    def values(self, G: np.ndarray) -> np.ndarray:
        out = np.empty(self.map.size)
        out[self.ent] = self.pe.values(G)
        out[self.dist] = self.pd.values(G)
        return out

    def dvalues(self, G: np.ndarray, V: np.ndarray) -> np.ndarray:
        out = np.empty(self.map.size)
        out[self.ent] = self.pe.dvalues(G, V)
        out[self.dist] = self.pd.dvalues(G, V)
        return out

    def grad(self, G: np.ndarray, w: np.ndarray) -> np.ndarray:
        return self.pe.grad(G, w[self.ent]) + self.pd.grad(G, w[self.dist])

    def adjoint(self, w: np.ndarray) -> SymOperator:
        return self.map.adjoint_op(w)


class MapOp:
    """Any other linear map, through its own ``apply`` and ``adjoint_op``: ``A(G G^T)`` and
    ``2 A*(w) G``.  A one-row map (``<M, K>``, ``tr K``, ``1^T K 1``) keeps ``A*(1)``, so an
    evaluation is one product with a fixed operator."""

    def __init__(self, m: LinearMap) -> None:
        self.map = m
        self.one = m.adjoint_op(1.0) if m.size == 1 else None

    def values(self, G: np.ndarray) -> np.ndarray:
        if self.one is not None:
            return np.array([float(np.sum(G * self.one.matmat(G)))])
        return np.asarray(self.map.apply(LowRank(G)), dtype=float)

    def dvalues(self, G: np.ndarray, V: np.ndarray) -> np.ndarray:
        if self.one is not None:
            return np.array([2.0 * float(np.sum(V * self.one.matmat(G)))])
        # A(G V^T + V G^T) by polarisation
        ap = self.map.apply
        return ap(LowRank(G + V)) - ap(LowRank(G)) - ap(LowRank(V))

    def grad(self, G: np.ndarray, w: np.ndarray) -> np.ndarray:
        if self.one is not None:
            return (2.0 * float(w[0])) * self.one.matmat(G)
        return 2.0 * self.map.adjoint_op(w).matmat(G)

    def adjoint(self, w: np.ndarray) -> SymOperator:
        return self.map.adjoint_op(w)


class Rows:
    """Some rows of a compiled map (a constraint block with mixed senses on a map that
    cannot be cut, i.e. not a :class:`PairMap`)."""

    def __init__(self, op: Any, rows: np.ndarray) -> None:
        self.op, self.rows = op, np.flatnonzero(rows)
        self.size = op.map.size

    def _full(self, w: np.ndarray) -> np.ndarray:
        out = np.zeros(self.size)
        out[self.rows] = w
        return out

    def values(self, G: np.ndarray) -> np.ndarray:
        return self.op.values(G)[self.rows]

    def dvalues(self, G: np.ndarray, V: np.ndarray) -> np.ndarray:
        return self.op.dvalues(G, V)[self.rows]

    def grad(self, G: np.ndarray, w: np.ndarray) -> np.ndarray:
        return self.op.grad(G, self._full(w))

    def adjoint(self, w: np.ndarray) -> SymOperator:
        return self.op.adjoint(self._full(w))


def compile_map(m: LinearMap, rows: np.ndarray | None = None) -> Any:
    """The row operator of a map (or of some of its rows, a boolean mask) on a factor."""
    if rows is not None and bool(np.all(rows)):
        rows = None
    if isinstance(m, PairMap):
        if rows is not None:
            m = m.take(rows)
        if m.is_entries:
            return PairOp(m)
        if m.is_distances:
            return DistOp(m)
        return MixedOp(m)
    op = MapOp(m)
    return op if rows is None else Rows(op, rows)


def loss_phi(loss: Any, w: float) -> Callable:
    """``phi(z) -> (w l(z), w l'(z))`` (and ``w l''(z)`` with ``second=True``), from the
    loss's own ``value``, ``grad`` and ``hess``."""

    def phi(z, second=False):
        if second:
            return w * loss.value(z), w * loss.grad(z), w * loss.hess(z)
        return w * loss.value(z), w * loss.grad(z)
    return phi


# ----------------------------------------------------------------------------- the oracle
@dataclass(frozen=True, eq=False)
class Block:
    """Constraint rows on one row operator: ``c = values - t`` (equalities) or
    ``c = sgn (values - t) <= 0`` (inequalities; ``sgn`` +1 for ``<=``, -1 for ``>=``;
    None when every row is ``<=``).  ``t`` is in the oracle's units (:attr:`Oracle.scale`)."""

    op: Any
    t: np.ndarray
    sgn: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.t)

    def c(self, G: np.ndarray) -> np.ndarray:
        d = self.op.values(G) - self.t
        return d if self.sgn is None else self.sgn * d


@dataclass(eq=False)
class Oracle:
    """The factored view of a declaration: minimise ``f(G)`` with ``G = to_G(H)`` subject to
    the constraint blocks (see the module docstring).

    ``f(G) = tr(G^T C G) + trace_coef ||G||^2 + sum_k phi_k(A_k(G G^T))`` (the reduced
    declaration's linear terms and losses, a minimisation): ``penalties`` holds ``(op,
    phi)`` per loss term, in the declaration's order; ``eq`` / ``ineq`` the constraint
    :class:`Block` s.  The problem's objective at ``problem_factor(G)`` is ``sign * scale**2
    * f(G)``.
    """

    n: int
    rows: int  # rows of H
    sign: float = 1.0  # the declaration's: problem objective = sign * scale**2 * f
    C: SymOperator | None = None
    trace_coef: float = 0.0
    #: (op, phi) with phi(z) -> (value, derivative)
    penalties: list[tuple[Any, Callable]] = field(default_factory=list)
    eq: list[Block] = field(default_factory=list)
    ineq: list[Block] = field(default_factory=list)
    basis: np.ndarray | None = None  # G = B H
    orthonormal: bool = True
    #: points forced equal merged (hard PCP's must-links): the problem's factor is ``expand @ G``
    expand: sp.csr_matrix | None = None
    merge_note: str = ""
    conflict: str | None = None  # a proof of infeasibility found by the merge
    conflict_pairs: list = field(default_factory=list)
    center: bool = False  # G = (I - 11^T/n) H
    scale: float = 1.0  # G_problem = scale * G_model (homogeneous problems are normalised)
    #: losses on entries in the Basis form (a random start is scaled to K_ii ~ 1)
    entry_losses: bool = False
    #: the distance equality rows (edges, model-unit bounds), or None
    graph: tuple[np.ndarray, np.ndarray] | None = None
    #: the index in ``eq`` of the block holding the distance equalities, if exactly one
    dist_block: int | None = None

    # ------------------------------------------------------------------ the variable
    def to_G(self, H: np.ndarray) -> np.ndarray:
        if self.basis is not None:
            return self.basis @ H
        if self.center:
            return H - H.mean(axis=0, keepdims=True)
        return H

    def from_G(self, G: np.ndarray) -> np.ndarray:
        """A start ``H`` (model rows) from a factor of the problem (``n`` rows)."""
        if self.expand is not None:
            counts = np.asarray(self.expand.sum(axis=0)).ravel()
            return (self.expand.T @ G) / counts[:, None]
        if self.basis is not None:
            if self.orthonormal:
                return self.basis.T @ G
            return np.linalg.lstsq(self.basis, G, rcond=None)[0]
        return G

    def problem_factor(self, G: np.ndarray) -> np.ndarray:
        """The problem's factor (``n`` rows, problem units) of the model factor ``G``."""
        if self.expand is not None:
            G = self.expand @ G
        return G * self.scale

    def to_H_grad(self, gG: np.ndarray) -> np.ndarray:
        """A gradient with respect to ``G`` as one with respect to ``H``."""
        if self.basis is not None:
            return self.basis.T @ gG
        if self.center:
            return gG - gG.mean(axis=0, keepdims=True)
        return gG

    @property
    def n_eq(self) -> int:
        return sum(len(b) for b in self.eq)

    @property
    def n_ineq(self) -> int:
        return sum(len(b) for b in self.ineq)

    @property
    def constrained(self) -> bool:
        return bool(self.eq or self.ineq)

    # ------------------------------------------------------------------ the objective
    def smooth(self, G: np.ndarray) -> tuple[float, np.ndarray]:
        """``f(G)`` and its gradient with respect to ``G``."""
        f = 0.0
        if self.C is not None:
            CG = self.C.matmat(G)
            f += float(np.sum(G * CG))
            g = 2.0 * CG
        else:
            g = np.zeros_like(G)
        if self.trace_coef:
            f += self.trace_coef * float(np.sum(G * G))
            g += 2.0 * self.trace_coef * G
        for op, phi in self.penalties:
            val, der = phi(op.values(G))
            f += float(np.sum(val))
            g += op.grad(G, der)
        return f, g

    def value(self, G: np.ndarray) -> float:
        """``f(G)`` alone (:meth:`smooth` without the gradient's scatter)."""
        f = 0.0
        if self.C is not None:
            f += float(np.sum(G * self.C.matmat(G)))
        if self.trace_coef:
            f += self.trace_coef * float(np.sum(G * G))
        for op, phi in self.penalties:
            f += float(np.sum(phi(op.values(G))[0]))
        return f

    def ray(self, G: np.ndarray, v: np.ndarray) -> Callable[[float], float]:
        """``t -> f([G, sqrt(t) v])``, i.e. ``f(K + t v v^T)``: the rows' values at ``G`` and
        at ``v`` are computed once, so each ``t`` costs one pass over the loss rows (no
        gather of the factor).  The rank growth's step along an escape direction reads it."""
        v = np.asarray(v, dtype=float).reshape(-1, 1)
        base, lin = 0.0, 0.0
        if self.C is not None:
            base += float(np.sum(G * self.C.matmat(G)))
            lin += float(np.sum(v * self.C.matmat(v)))
        if self.trace_coef:
            base += self.trace_coef * float(np.sum(G * G))
            lin += self.trace_coef * float(np.sum(v * v))
        rows = [(phi, op.values(G), op.values(v)) for op, phi in self.penalties]

        def f(t: float) -> float:
            out = base + t * lin
            for phi, z, a in rows:
                out += float(np.sum(phi(z + t * a)[0]))
            return out
        return f

    def subspace_quadratic(self, B: np.ndarray, chunk: int = 16384
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``f(B Y B^T) = y^T Q y + q^T y + const`` over ``y``, the upper triangle of the
        symmetric ``s x s`` matrix ``Y`` (row-major; ``idx`` its ``(a, b)`` indices): the
        objective restricted to the kernels whose range lies in ``span B``, for losses
        quadratic in entries ``K_ij`` (squared losses: ``phi''`` constant).  Returns ``(Q,
        q, idx)``; the constant is not formed.  The loss rows are read in chunks of
        ``chunk``: the memory is ``chunk m + m^2`` values and the cost ``O(rows m^2)`` with
        ``m = s (s + 1) / 2``.  ``ValueError`` for another loss or map
        (a row that is not an entry ``g_i . g_j``), a basis, centring or merged points."""
        if self.basis is not None or self.center or self.expand is not None:
            raise ValueError("subspace_quadratic needs K PSD without a basis, centring or merged points")
        s = B.shape[1]
        a, b = np.triu_indices(s)
        m = a.size
        mult = np.where(a == b, 1.0, 2.0)  # <M, Y> = sum_{a<=b} mult M_ab Y_ab for symmetric M
        Q = np.zeros((m, m))
        q = np.zeros(m)
        for op, phi in self.penalties:
            if not isinstance(op, PairOp):
                raise ValueError(f"subspace_quadratic needs losses on entries K_ij; this one is on "
                                 f"{op.map.describe()}")
            p = op.i.size
            f0, d1, d2 = phi(np.zeros(p), True)  # phi(z) = phi(0) + d1 z + d2 z^2 / 2
            for z in (2.0, -2.0):  # a quadratic is its second-order model everywhere
                model = f0 + d1 * z + 0.5 * d2 * z * z
                got = phi(np.full(p, z))[0]
                tiny = 1e-12 * float(np.max(np.abs(got), initial=1.0))
                if not np.allclose(got, model, rtol=1e-9, atol=tiny):
                    raise ValueError("subspace_quadratic needs losses quadratic in K_ij (squared losses)")
            half = np.sqrt(0.5 * np.maximum(d2, 0.0))
            for lo in range(0, p, chunk):
                sl = slice(lo, lo + chunk)
                Bi, Bj = B[op.i[sl]], B[op.j[sl]]
                # K_p = sum_{a<=b} Y_ab (Bi_a Bj_b + Bi_b Bj_a) (halved on a == b)
                Phi = Bi[:, a] * Bj[:, b] + Bi[:, b] * Bj[:, a]
                Phi[:, a == b] *= 0.5
                q += Phi.T @ d1[sl]
                Phi *= half[sl, None]
                Q += Phi.T @ Phi
        if self.C is not None or self.trace_coef:
            A = np.zeros((s, s))
            if self.C is not None:
                A += B.T @ self.C.matmat(B)
            if self.trace_coef:
                A += self.trace_coef * (B.T @ B)
            A = 0.5 * (A + A.T)
            q += mult * A[a, b]
        return 0.5 * (Q + Q.T), q, np.stack([a, b])

    def hessp(self, G: np.ndarray, V: np.ndarray) -> np.ndarray:
        """The Hessian of ``f`` at ``G`` times a direction ``V`` (both in ``G``)."""
        h = np.zeros_like(G)
        if self.C is not None:
            h += 2.0 * self.C.matmat(V)
        if self.trace_coef:
            h += 2.0 * self.trace_coef * V
        for op, phi in self.penalties:
            z = op.values(G)
            _, der, der2 = phi(z, True)
            h += op.grad(V, der) + op.grad(G, der2 * op.dvalues(G, V))
        return h

    def has_row_blocks(self) -> bool:
        """:meth:`row_blocks` applies: ``K PSD`` without a basis, centring or merged points,
        no constraint rows, and every loss on entries ``K_ij`` (P1, P6 square)."""
        return (self.basis is None and not self.center and self.expand is None
                and not self.eq and not self.ineq and bool(self.penalties)
                and all(isinstance(op, PairOp) for op, _ in self.penalties))

    def row_blocks(self, G: np.ndarray) -> np.ndarray:
        """The ``(n, r, r)`` diagonal blocks of the Hessian of :meth:`smooth` at ``G`` (one
        block per row ``g_i``; where :meth:`has_row_blocks`): ``2 C_ii I + 2 t I`` from the
        linear terms, and for each loss row ``phi(g_i . g_j)``: ``phi'' g_j g_j^T``
        (``i != j``) or ``4 phi'' g_i g_i^T + 2 phi' I`` (``i = j``).  The loss weight
        ``gamma`` enters only these rank-one terms, so a large ``gamma`` makes each row stiff
        along a few directions (its own and its cannot-link partners') and soft along the
        rest."""
        n, r = G.shape
        lin = np.full(n, 2.0 * self.trace_coef)
        if self.C is not None:
            lin += 2.0 * self.C.sparse.diagonal()
            if self.C.c.size:
                lin += 2.0 * np.einsum("ik,k,ik->i", self.C.U, self.C.c, self.C.U)
        B = np.zeros((n, r * r))

        def outer(rows: np.ndarray, w: np.ndarray, at: np.ndarray) -> np.ndarray:
            # sum over loss rows p of w_p g_{rows_p} g_{rows_p}^T, scattered to row at_p
            O = (G[rows][:, :, None] * G[rows][:, None, :]).reshape(len(rows), r * r)
            S = sp.csr_matrix((w, (at, np.arange(len(at)))), shape=(n, len(at)))
            return S @ O

        for op, phi in self.penalties:
            _, d1, d2 = phi(op.values(G), True)
            d = op.i == op.j
            i, j = op.i[~d], op.j[~d]
            w = d2[~d]
            # phi'' g_j g_j^T on row i and phi'' g_i g_i^T on row j
            B += outer(j, w, i) + outer(i, w, j)
            k = op.i[d]
            B += outer(k, 4.0 * d2[d], k)
            lin += np.bincount(k, weights=2.0 * d1[d], minlength=n)
        B = B.reshape(n, r, r)
        B[:, np.arange(r), np.arange(r)] += lin[:, None]
        return B

    # ------------------------------------------------------------------ the constraints
    def constraints(self, G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The residuals ``(c_eq, c_ineq)`` at ``G`` (``c_ineq <= 0`` is feasible)."""
        ce = [b.c(G) for b in self.eq]
        ci = [b.c(G) for b in self.ineq]
        return (np.concatenate(ce) if ce else np.zeros(0), np.concatenate(ci) if ci else np.zeros(0))

    @staticmethod
    def violation(ce: np.ndarray, ci: np.ndarray) -> float:
        """The largest violation of the residuals :meth:`constraints` returned."""
        v = float(np.max(np.abs(ce), initial=0.0))
        return max(v, float(np.max(ci, initial=0.0)))

    @staticmethod
    def scatter(G: np.ndarray, blocks: list[Block], w: np.ndarray) -> np.ndarray:
        """``sum_blocks grad(sum_p w_p c_p)`` (``c`` of each block, its sign included)."""
        g = None
        k = 0
        for b in blocks:
            wb = w[k:k + len(b)]
            if b.sgn is not None:
                wb = b.sgn * wb
            gi = b.op.grad(G, wb)
            g = gi if g is None else g + gi
            k += len(b)
        return np.zeros_like(G) if g is None else g

    def dual_slack(self, G: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray) -> SymOperator:
        """``S = grad F(K) - sum lam_k A_k`` (+ ``lam_i sgn_i A_i`` for inequalities)."""
        parts = []
        if self.C is not None:
            parts.append(self.C)
        if self.trace_coef:
            parts.append(SymOperator(self.n, self.trace_coef * sp.identity(self.n, format="csr"),
                                     np.zeros((self.n, 0)), np.zeros(0)))
        for op, phi in self.penalties:
            _, der = phi(op.values(G))
            parts.append(op.adjoint(der))
        k = 0
        for b in self.eq:
            parts.append(b.op.adjoint(-lam_e[k:k + len(b)]))
            k += len(b)
        k = 0
        for b in self.ineq:
            li = lam_i[k:k + len(b)]
            parts.append(b.op.adjoint(li if b.sgn is None else b.sgn * li))
            k += len(b)
        return sym_sum(self.n, parts)


# ----------------------------------------------------------------------------- building it
def conflicting_pairs(decl: Declaration, labels: np.ndarray) -> list[tuple[int, int]]:
    """Equality rows ``K_ij = a`` (``i != j``) between points forced equal whose ``a`` differs
    from the equality bound on ``K_ii`` (e.g. a cannot-link inside a chain of must-links)."""
    diag = np.full(decl.n, np.nan)
    rows = []
    for con in decl.constraints:
        m = con.map
        if not isinstance(m, PairMap):
            continue
        ent = (con.sense == EQ) & (m.kind != DISTANCE)
        d = ent & (m.i == m.j)
        diag[m.i[d]] = con.bound[d]
        rows.append((m.i[ent & ~d], m.j[ent & ~d], con.bound[ent & ~d]))
    out: list[tuple[int, int]] = []
    for i, j, b in rows:
        bad = (labels[i] == labels[j]) & ~np.isnan(diag[i]) & (b != diag[i])
        out += [(int(a), int(c)) for a, c in zip(i[bad], j[bad])]
    return out


def _conflict(decl: Declaration, sentence: str) -> Oracle:
    """The oracle of a declaration the merge proved infeasible (nothing to evaluate)."""
    merged = merge_equal_points(decl)
    bad = conflicting_pairs(decl, merged.labels)
    if bad:
        shown = ", ".join(f"({i}, {j})" for i, j in bad[:5])
        sentence += (f"; the equality row(s) {shown}{', ...' if len(bad) > 5 else ''} ask a "
                     f"value other than the diagonal's for points forced equal "
                     f"({len(bad)} such row(s))")
    return Oracle(decl.n, merged.c, sign=decl.sign, expand=merged.P, merge_note=merged.note,
                  conflict=sentence, conflict_pairs=bad)


def _build(decl: Declaration) -> Oracle:
    if decl.divergence is not None or not isinstance(decl.form, (PSD, Basis)):
        raise ValueError("the factored oracle needs K PSD or K = B Y B^T and no divergence; this "
                         f"declaration has {decl.form.describe()}"
                         + (f" and the {decl.divergence.kind} divergence" if decl.divergence else ""))
    can = canonical(decl)
    ch = can.chain
    if ch.conflict is not None:
        return _conflict(decl, ch.conflict)
    red = can.decl  # merged, a minimisation, the centring row dropped (ch.centred)
    expand = ch.merged.P if ch.merged is not None else None
    note = ch.merged.note if ch.merged is not None else ""
    form = red.form
    n = red.n
    basis = form.B if isinstance(form, Basis) else None
    # linear terms (the reduced declaration's are a minimisation's)
    trace_coef, parts = 0.0, []
    for t in red.linear:
        if isinstance(t.map, Trace):
            trace_coef += float(t.coef[0])
        else:
            parts.append(t.map.adjoint_op(t.coef))
    C = None if not parts else (parts[0] if len(parts) == 1 else sym_sum(n, parts))
    if C is not None and C.sparse.nnz:
        # exactly symmetric (a merged cost P^T L P can differ from its transpose in the last bit)
        C = SymOperator(n, ((C.sparse + C.sparse.T) * 0.5).tocsr(), C.U, C.c)
    penalties = [(compile_map(t.map), loss_phi(t.loss, t.weight)) for t in red.losses]
    # constraints: (op, bounds, sgn) per block, scaled below
    eq: list[tuple] = []
    ineq: list[tuple] = []
    graph_i, graph_j, graph_b = [], [], []
    dist_blocks = []
    for con in red.constraints:
        m, sense, b = con.map, con.sense, con.bound
        e = sense == EQ
        if np.any(e):
            if isinstance(m, PairMap) and m.is_distances and bool(np.all(e)):
                dist_blocks.append(len(eq))
            if isinstance(m, PairMap):
                d = e & (m.kind == DISTANCE)
                graph_i.append(m.i[d]), graph_j.append(m.j[d]), graph_b.append(b[d])
            eq.append((compile_map(m, e), np.array(b[e], dtype=float), None))
        if np.any(~e):
            s = np.where(sense[~e] == GE, -1.0, 1.0)
            ineq.append((compile_map(m, ~e), np.array(b[~e], dtype=float),
                         None if bool(np.all(s == 1.0)) else s))
    # a problem of linear terms and constraints only is homogeneous: K -> s^2 K scales the
    # objective and every bound alike, so the oracle works in units where the mean nonzero
    # |bound| is 1 (MVU's squared distances are in the data's units; hard PCP's are 1)
    scale = 1.0
    if not red.losses and (eq or ineq):
        allb = np.concatenate([blk[1] for blk in eq + ineq])
        nz = np.abs(allb[allb != 0])
        if nz.size:
            scale = float(np.sqrt(np.mean(nz)))
            eq = [(op, t / scale**2, s) for op, t, s in eq]
            ineq = [(op, t / scale**2, s) for op, t, s in ineq]
            graph_b = [gb / scale**2 for gb in graph_b]
    graph = None
    if graph_i and sum(len(a) for a in graph_i):
        graph = (np.stack([np.concatenate(graph_i), np.concatenate(graph_j)], axis=1),
                 np.concatenate(graph_b))
    entry_losses = basis is not None and any(t.map.is_entries for t in red.losses)
    return Oracle(n, basis.shape[1] if basis is not None else n, sign=ch.sign, C=C,
                  trace_coef=trace_coef, penalties=penalties, eq=[Block(*b) for b in eq],
                  ineq=[Block(*b) for b in ineq], basis=basis,
                  orthonormal=bool(getattr(form, "orthonormal", True)), expand=expand,
                  merge_note=note, center=ch.centred, scale=scale, entry_losses=entry_losses,
                  graph=graph, dist_block=dist_blocks[0] if len(dist_blocks) == 1 else None)


def oracle(decl: Any) -> Oracle:
    """The :class:`Oracle` of a declaration (or of a problem's declaration), computed once and
    kept on the declaration.  ``ValueError`` for a form other than ``K PSD`` / ``K = B Y B^T``
    or a divergence."""
    return derived(getattr(decl, "declaration", decl), "oracle", _build)
