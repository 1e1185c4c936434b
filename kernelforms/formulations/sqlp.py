"""The SQLP formulation of a convex quadratic SDP (Wu et al. 2009, Section 3, eq. 17-25).

Every problem handled here is, after choosing the vector ``y`` of unknowns, the
convex quadratic SDP (QSDP, Wu et al. 2009 eq. 13-14)::

    min  ||F y - h||^2 + g^T y + c0      over  y = svec(Y),  Y PSD (s x s)

with one row of ``F`` per squared term (a *pair functional*).  Expanding gives
Wu et al. 2009's ``y^T A y + b^T y + c`` with ``A = F^T F``, ``b = g - 2 F^T h``.

``svec`` stacks the upper triangle of a symmetric ``s x s`` matrix row by row and
scales the off-diagonal entries by ``sqrt(2)``, so that ``svec(X) . svec(Y) = tr(X Y)``;
``y`` has ``d = s (s + 1) / 2`` entries.  Wu et al. 2009 uses ``vec(Y)`` (``s^2`` entries); on a
symmetric ``Y`` the two give the same objective, and svec gives ``rank(A) <= d``.

The rank-revealing factorisation (:func:`factor_quadratic`) writes
``A = B^T B`` with ``B`` of ``r = rank(A)`` orthogonal rows (numerically zero
directions dropped), and ``h_B`` with ``||F y - h||^2 = ||B y - h_B||^2 + const``
for every ``y``.  The SQLP is then Wu et al. 2009 eq. 21-25::

    min  u_1 - u_2 + g^T y + c        s.t.  u_1 + u_2 = 1,   B y - u_{3:} = h_B,
                                            u in SOC_{r+2},  Y PSD

(Wu et al. 2009 writes ``z = B y`` and keeps ``-2 F^T h`` in ``b``; keeping the shift ``h_B``
inside the cone is the same program with the same cone sizes, and avoids the
cancellation between a large ``y^T A y`` and a large ``b^T y``.)

Which problems: every declaration (:mod:`kernelforms.model`) whose loss terms are all
squared (at least one), without a divergence, over K PSD (``y = svec(K)``, ``s = n``) or
``K = B Y B^T`` (``y = svec(Y)``): P1, P3, P5, P6 with the square loss, and problems of
your own (:func:`qsdp_applies` recognises them).  Each squared term ``w sum_p (A(K)_p -
t_p)^2`` gives rows ``sqrt(|w|) a_p`` of F, the linear terms give ``g``, and constraint
rows ``A(K) {<=, ==, >=} b`` become linear rows on ``y`` in every formulation.  When every
squared row reads one entry of K (P1, P6-square), F is sparse and its rows are
orthogonal once rows on the same entry are merged: ``B`` is ``F`` itself and no
``d x d`` matrix is formed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..model import PSD, Basis, Capabilities, Range
from ..result import LowRank, psd_factor
from ..util import format_bytes as pretty_bytes  # noqa: F401 - the one byte formatter, old name
from .base import (IPM_BYTES_PER_ENTRY, Compiled, ConicData, Formulation,  # noqa: F401
                   FormulationInverse, ipm_bytes, ipm_order, program_size, svec_dim)

#: eigenvalues of the Gram matrix of F below RANK_RTOL * the largest are numerically zero
RANK_RTOL = 1e-12

#: bytes per double
_B = 8


# ---------------------------------------------------------------------------- svec
def svec_index(i: np.ndarray, j: np.ndarray, s: int) -> np.ndarray:
    """Position of entry ``(i, j)`` (either order) in ``svec`` of an ``s x s`` matrix."""
    a, b = np.minimum(i, j), np.maximum(i, j)
    return a * s - a * (a - 1) // 2 + (b - a)


def svec(X: np.ndarray) -> np.ndarray:
    """``svec`` of a dense symmetric matrix (upper triangle row by row, off-diagonals * sqrt 2)."""
    s = X.shape[0]
    i, j = np.triu_indices(s)
    return X[i, j] * np.where(i == j, 1.0, np.sqrt(2.0))


def smat(y: np.ndarray, s: int) -> np.ndarray:
    """Inverse of :func:`svec`."""
    i, j = np.triu_indices(s)
    v = y / np.where(i == j, 1.0, np.sqrt(2.0))
    X = np.zeros((s, s))
    X[i, j] = v
    X[j, i] = v
    return X


def smat_operator(s: int) -> sp.csr_matrix:
    """Sparse ``(s*s, d)`` matrix ``S`` with ``vec_F(smat(y)) = S @ y`` (column-major vec)."""
    i, j = np.triu_indices(s)
    k = np.arange(len(i))
    coef = np.where(i == j, 1.0, 1.0 / np.sqrt(2.0))
    off = i != j
    rows = np.concatenate([i + j * s, (j + i * s)[off]])
    cols = np.concatenate([k, k[off]])
    vals = np.concatenate([coef, coef[off]])
    return sp.csr_matrix((vals, (rows, cols)), shape=(s * s, len(i)))


def svec_sparse(L: Any) -> np.ndarray:
    """``svec`` of a (sparse) symmetric matrix as a dense vector, without densifying L."""
    C = sp.coo_matrix(L)
    s = C.shape[0]
    keep = C.row <= C.col
    r, c, v = C.row[keep], C.col[keep], C.data[keep]
    out = np.zeros(svec_dim(s))
    np.add.at(out, svec_index(r, c, s), v * np.where(r == c, 1.0, np.sqrt(2.0)))
    return out


def symmetric_functionals(U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Rows ``svec(sym(u_p v_p^T))``: ``row_p . svec(Y) = u_p^T Y v_p`` for symmetric Y."""
    s = U.shape[1]
    i, j = np.triu_indices(s)
    # sym(u v^T)_{ij} = (u_i v_j + u_j v_i) / 2, times sqrt(2) off the diagonal
    vals = U[:, i] * V[:, j] + U[:, j] * V[:, i]
    return vals * np.where(i == j, 0.5, 1.0 / np.sqrt(2.0))


def entry_selector(idx: np.ndarray, s: int, scale: np.ndarray) -> sp.csr_matrix:
    """Sparse rows with ``row_p . svec(K) = scale_p * K[i_p, j_p]``."""
    i, j = idx[:, 0], idx[:, 1]
    coef = np.where(i == j, 1.0, 1.0 / np.sqrt(2.0)) * scale
    p = len(idx)
    return sp.csr_matrix((coef, (np.arange(p), svec_index(i, j, s))), shape=(p, svec_dim(s)))


# ---------------------------------------------------------------------------- the QSDP
@dataclass
class QuadraticSDP:
    """A convex QSDP ``sign * (||F y - h||^2 + g^T y + c0)`` over ``y = svec(Y)``, Y PSD,
    subject to the linear rows ``con_rows @ y  {<=, ==, >=}  con_bound`` (``con_sense``
    holds :data:`~kernelforms.model.LE` / ``EQ`` / ``GE`` per row).

    ``F``, ``h``, ``g`` are those of the chain's minimisation of the declaration
    (:attr:`kernelforms.model.Chain.minimisation`); ``sign`` is the chain's (+1 for a
    minimisation, -1 for a maximisation: the program states ``-(...)`` maximised, so that its
    value is the declaration's); ``basis`` is ``B`` (``K = B Y B^T``) or None (``Y`` is K).
    """

    s: int
    F: Any  # (p, d) dense ndarray or sparse CSR
    h: np.ndarray
    g: np.ndarray
    c0: float
    sign: int
    basis: np.ndarray | None
    variable: str  # "svec(K)" or "svec(Y)"
    orthogonal_rows: bool = False  # F F^T diagonal (entries of K, each counted once): B = F
    con_rows: Any = None  # (m, d) dense ndarray or sparse CSR, or None
    con_sense: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    con_bound: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def d(self) -> int:
        return svec_dim(self.s)

    @property
    def p(self) -> int:
        return self.F.shape[0]

    @property
    def m(self) -> int:
        """Number of linear constraint rows."""
        return int(self.con_sense.size)


#: what the quadratic formulations (sqlp, scsdp) accept: any form, either sense, no
#: divergence, squared losses (at least one); the constraint rows may use any map
QSDP_CAPABILITIES = Capabilities(forms=(PSD, Basis, Range), senses=("min", "max"), needs=("losses",),
                                 loss_property="is_squared", loss_word="squared", advice="; use 'sdp'")


def qsdp_applies(problem: Any, who: str = "the quadratic formulations") -> str | None:
    """``None`` when a problem's declaration (or a declaration) is a convex quadratic SDP,
    else why not (the mismatch of :data:`QSDP_CAPABILITIES`, worded for ``who``).

    It is one when K is PSD (``K = Y``) or ``K = B Y B^T`` with Y PSD (a :class:`Basis`, or
    the range of K0 without a divergence), there is no divergence, and every loss term is
    a squared loss (at least one); the linear terms and the constraint rows may use any map.
    """
    return QSDP_CAPABILITIES.why(problem, f"{who} needs a quadratic objective (squared losses)", who)


def qsdp_shape(problem: Any) -> tuple[int, int, int]:
    """``(s, p, m)``: the PSD block's size (``n`` when K is the variable, the basis's
    columns for ``K = B Y B^T``), the squared rows and the constraint rows, without building
    F; a :class:`SolverError` for a problem that is no quadratic SDP."""
    why = qsdp_applies(problem)
    if why is not None:
        raise SolverError(f"no quadratic-SDP form: {why}")
    decl = getattr(problem, "declaration", problem)
    return int(decl.form.block), int(decl.n_loss_rows), int(decl.n_constraint_rows)


def entry_rows(problem: Any) -> bool:
    """K is the PSD variable and every squared row reads one entry of K (the canonical
    form's loss blocks are all on entries): the rows of F then select single entries of
    ``svec(K)``."""
    from ..model import RowKind, canonical

    decl = getattr(problem, "declaration", problem)
    return decl.form.basis is None and canonical(decl).loss_kinds <= {RowKind.ENTRY, RowKind.DIAGONAL}


def _svec_of_sparse(S: Any, s: int) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, values)`` of the nonzeros of ``svec(S)`` for a sparse symmetric S."""
    C = sp.coo_matrix(S)
    keep = C.row <= C.col
    r, c, v = C.row[keep], C.col[keep], C.data[keep]
    return svec_index(r, c, s), v * np.where(r == c, 1.0, np.sqrt(2.0))


def _pair_rows(m: Any) -> sp.csr_matrix:
    """Sparse rows ``a_p`` with ``a_p . svec(K) = A(K)_p`` for a :class:`PairMap`:
    an entry ``K_ij`` is ``1`` (i = j) or ``1/sqrt 2`` at one position, a distance
    ``K_ii + K_jj - 2 K_ij`` is ``1, 1, -sqrt 2`` at three."""
    from ..model import DISTANCE

    n, i, j = m.n, m.i, m.j
    dist = m.kind == DISTANCE
    ent = ~dist
    p = m.size
    rows = [np.flatnonzero(ent)]
    cols = [svec_index(i[ent], j[ent], n)]
    vals = [np.where(i[ent] == j[ent], 1.0, 1.0 / np.sqrt(2.0))]
    if np.any(dist):
        a, b, k = i[dist], j[dist], np.flatnonzero(dist)
        rows += [k, k, k]
        cols += [svec_index(a, a, n), svec_index(b, b, n), svec_index(a, b, n)]
        vals += [np.ones(k.size), np.ones(k.size), np.full(k.size, -np.sqrt(2.0))]
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(p, svec_dim(n)))


def svec_rows(m: Any, basis: np.ndarray | None) -> Any:
    """The rows of a linear map acting on ``y = svec(Y)``: ``rows @ svec(Y) = A(K)``.

    ``basis`` None (K is the variable): sparse CSR rows, never a dense ``n^2`` functional;
    a :class:`~kernelforms.model.PairMap` gives 1 or 3 nonzeros per row, any other map
    ``svec(A*(e_p))`` row by row (its adjoint's nonzeros).  With a basis ``B``: the map's
    ``functionals(B)`` (rows on ``vec(Y)``) written on ``svec(Y)`` (dense).
    """
    from ..model import PairMap

    if basis is not None:
        k = basis.shape[1]
        iu, ju = np.triu_indices(k)
        Fv = m.functionals(basis)
        return Fv[:, iu + ju * k] * np.where(iu == ju, 1.0, np.sqrt(2.0))
    if isinstance(m, PairMap):
        return _pair_rows(m)
    n, d = m.n, svec_dim(m.n)
    rows, cols, vals = [], [], []
    for q in range(m.size):
        e = np.zeros(m.size)
        e[q] = 1.0
        op = m.adjoint_op(e)
        if op.is_sparse:
            c, v = _svec_of_sparse(op.sparse, n)
        else:
            v = svec(op.dense())
            c = np.flatnonzero(v)
            v = v[c]
        rows.append(np.full(c.size, q))
        cols.append(c)
        vals.append(v)
    R = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(m.size, d))
    R.sum_duplicates()
    return R


def _stack(parts: list[Any], d: int, sparse: bool) -> Any:
    if not parts:
        return sp.csr_matrix((0, d)) if sparse else np.zeros((0, d))
    if sparse:
        return sp.vstack(parts, format="csr")
    return np.vstack(parts)


def _merge_single_entry_rows(F: sp.csr_matrix,
                             h: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, float, bool]:
    """Rows with one nonzero each: rows on the same position merge into one,
    ``sum_k (a_k y_c - h_k)^2 = (a y_c - h')^2 + const`` with ``a = sqrt(sum a_k^2)``,
    ``h' = sum a_k h_k / a``.  Returns ``(F', h', const, orthogonal)``; ``orthogonal`` is
    False (and F, h come back unchanged) when a row has more than one nonzero."""
    F = sp.csr_matrix(F)
    F.eliminate_zeros()
    if F.shape[0] == 0 or not np.all(np.diff(F.indptr) == 1):
        return F, h, 0.0, False
    col = F.indices
    if np.unique(col).size == col.size:
        return F, h, 0.0, True
    a = F.data
    cols, inv = np.unique(col, return_inverse=True)
    a2 = np.bincount(inv, weights=a * a)
    ah = np.bincount(inv, weights=a * h)
    anew = np.sqrt(a2)
    hnew = ah / anew
    const = float(h @ h - hnew @ hnew)
    Fm = sp.csr_matrix((anew, (np.arange(cols.size), cols)), shape=(cols.size, F.shape[1]))
    return Fm, hnew, max(const, 0.0), True


def quadratic_form(problem: Any) -> QuadraticSDP:
    """Write a problem whose declaration is a convex quadratic SDP as a :class:`QuadraticSDP`.

    Read from the chain's minimisation of the declaration (a maximisation's linear
    coefficients and loss weights negated by the chain's ``MaxToMin``, so every weight is
    ``> 0``): every squared loss term ``w sum_p (A(K)_p - t_p)^2`` gives the rows
    ``sqrt(w) a_p`` of F and the targets ``sqrt(w) t_p`` of h (``a_p`` from
    :func:`svec_rows`); the linear terms give ``g = sum_k A_k^T c_k``; each constraint
    block gives its rows, senses and bounds.
    """
    from ..model import chain

    s = qsdp_shape(problem)[0]
    ch = chain(problem)
    B = ch.original.form.basis
    low = ch.minimisation
    sparse = B is None
    d = svec_dim(s)
    F_parts, h_parts = [], []
    for t in low.losses:
        root = math.sqrt(t.weight)
        F_parts.append(svec_rows(t.map, B) * root)
        h_parts.append(root * np.asarray(t.loss.targets, dtype=float))
    F = _stack(F_parts, d, sparse)
    h = np.concatenate(h_parts) if h_parts else np.zeros(0)
    g = np.zeros(d)
    for t in low.linear:
        g = g + np.asarray(svec_rows(t.map, B).T @ t.coef, dtype=float).ravel()
    c0, orthogonal = 0.0, False
    if sparse:
        F, h, c0, orthogonal = _merge_single_entry_rows(F, h)
    con_rows, senses, bounds = [], [], []
    for c in low.constraints:
        con_rows.append(svec_rows(c.map, B))
        senses.append(np.asarray(c.sense, dtype=np.int64))
        bounds.append(np.asarray(c.bound, dtype=float))
    A = _stack(con_rows, d, sparse) if con_rows else None
    return QuadraticSDP(s, F, h, g, c0, int(ch.sign), B, "svec(K)" if B is None else "svec(Y)",
                        orthogonal_rows=orthogonal, con_rows=A,
                        con_sense=np.concatenate(senses) if senses else np.zeros(0, np.int64),
                        con_bound=np.concatenate(bounds) if bounds else np.zeros(0))


def constraint_rows_nnz(problem: Any) -> int:
    """Nonzeros of the constraint rows on ``y`` without building them (an estimate for a
    map other than a :class:`~kernelforms.model.PairMap` on K: its adjoint's nonzeros)."""
    from ..model import DISTANCE, PairMap

    d = svec_dim(qsdp_shape(problem)[0])
    decl = getattr(problem, "declaration", problem)
    total = 0
    for c in decl.constraints:
        m = c.map
        if decl.form.basis is not None:
            total += m.size * d
        elif isinstance(m, PairMap):
            total += int(m.size + 2 * np.count_nonzero(m.kind == DISTANCE))
        else:
            op = m.adjoint_op(np.ones(m.size))
            total += min(d, op.sparse.nnz if op.is_sparse else d) * m.size
    return int(total)


def linear_constraints(q: QuadraticSDP, y: Any, tags: list | None = None) -> list[Any]:
    """The constraint rows of ``q`` as CVXPY constraints on ``y`` (one per sense; ``tags``
    receives ``(sense, rows of q, constraint)`` for :func:`linear_duals`)."""
    from ..model import EQ, GE, LE

    out = []
    if q.con_rows is None or q.m == 0:
        return out
    for sense in (EQ, LE, GE):
        sel = np.flatnonzero(q.con_sense == sense)
        if sel.size == 0:
            continue
        lhs, rhs = q.con_rows[sel] @ y, q.con_bound[sel]
        out.append(lhs == rhs if sense == EQ else (lhs <= rhs if sense == LE else lhs >= rhs))
        if tags is not None:
            tags.append((sense, sel, out[-1]))
    return out


def linear_duals(problem_decl: Any, tags: list) -> dict[str, Any] | None:
    """:meth:`~kernelforms.formulations.base.Formulation.duals` of the rows
    :func:`linear_constraints` stated: ``q``'s rows are the declaration's constraints'
    rows in order (:func:`quadratic_form`), so row ``p`` of ``q`` is row ``p - start`` of
    the constraint whose block holds it."""
    from .base import tagged_duals

    sizes = [c.map.size for c in problem_decl.constraints]
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    per: list = []
    for sense, sel, con in tags:
        block = np.searchsorted(start, sel, side="right") - 1
        for ci in np.unique(block):
            mask = block == ci
            per.append((int(ci), sel[mask] - start[ci], np.ones(int(mask.sum())), sense,
                        _RowsOf(con, np.flatnonzero(mask))))
    return tagged_duals(problem_decl, per)


def qsdp_duals(compiled: Any, grad: np.ndarray | None) -> dict[str, Any] | None:
    """:meth:`~kernelforms.formulations.base.Formulation.duals` of a compiled SQLP / Schur
    SDP: the constraint rows' dual values, and the loss rows' slopes read from ``grad``,
    the solver's slope of ``||F y - h||^2`` on ``y`` (``F^T u_F``; see :func:`loss_slopes`)."""
    inv: QuadraticInverse = compiled.inverse
    decl = inv.decl
    out = linear_duals(decl, inv.tags) or {"constraints": [None] * len(decl.constraints),
                                           "losses": [None] * len(decl.losses)}
    if grad is not None and inv.y.value is not None:
        out["losses"] = loss_slopes(decl, inv.basis, np.asarray(grad, dtype=float).ravel(),
                                    np.asarray(inv.y.value, dtype=float).ravel())
    if all(x is None for x in out["constraints"] + out["losses"]):
        return None
    return out


def loss_slopes(decl: Any, basis: np.ndarray | None, grad: np.ndarray, y: np.ndarray) -> list:
    """The per-row slopes ``u`` of the squared loss terms (``sum_k w_k sum_p u_p a_p = grad``
    over ``y``, ``a_p`` the row's functional from :func:`svec_rows`) whose weighted sum is
    the solver's gradient ``grad`` of the quadratic part: with F's rows ``sqrt(w_k) a_p``
    (before any merge of rows), the solution of ``F^T x = grad`` nearest the gradient
    ``x0 = 2 (F y - h)`` at the solver's point (unique when F has full row rank; with more
    rows than unknowns, a basis form, the rows' split is not in the solver's dual), then
    ``u_p = x_p / sqrt(w_k)``."""
    from scipy.sparse.linalg import lsqr

    from ..model import chain

    losses = chain(decl).minimisation.losses  # weights > 0
    roots = [math.sqrt(t.weight) for t in losses]
    parts = [svec_rows(t.map, basis) * r for t, r in zip(losses, roots)]
    F = _stack(parts, grad.size, basis is None)
    h = np.concatenate([r * np.asarray(t.loss.targets, dtype=float)
                        for t, r in zip(losses, roots)])
    x0 = 2.0 * (np.asarray(F @ y, dtype=float).ravel() - h)
    rhs = grad - np.asarray(F.T @ x0, dtype=float).ravel()
    if sp.issparse(F):
        dx = lsqr(F.T.tocsr(), rhs, atol=1e-15, btol=1e-15, iter_lim=20 * F.shape[0] + 1000)[0]
    else:
        dx = np.linalg.lstsq(np.asarray(F).T, rhs, rcond=None)[0]
    x = x0 + dx
    out, pos = [], 0
    for t, r in zip(losses, roots):
        k = t.map.size
        out.append(np.asarray(x[pos:pos + k], dtype=float) / r)
        pos += k
    return out


class _RowsOf:
    """Some rows of a CVXPY constraint's dual value (read after the solve)."""

    def __init__(self, con: Any, rows: np.ndarray) -> None:
        self.con, self.rows = con, rows

    @property
    def dual_value(self) -> Any:
        d = self.con.dual_value
        return None if d is None else np.asarray(d, dtype=float).ravel()[self.rows]


@dataclass
class QuadraticFactor:
    """``A = B^T B`` with ``B`` of ``rank`` orthogonal rows; ``||Fy-h||^2 = ||By-h_B||^2 + const``.

    ``lam`` holds the squared row norms of ``B`` (the nonzero eigenvalues of ``A``).
    """

    B: Any
    h_B: np.ndarray
    const: float
    lam: np.ndarray
    rank: int
    dropped: int = 0
    notes: list[str] = field(default_factory=list)

    def sqrt_A(self) -> tuple[Any, np.ndarray]:
        """``(A^{1/2}, w)`` with ``||A^{1/2} y - w|| = ||B y - h_B||`` (``d x d``; dense unless sparse B)."""
        scale = 1.0 / np.sqrt(self.lam)
        if sp.issparse(self.B):
            Vr = (self.B.T @ sp.diags(scale)).tocsr()
            return (Vr @ self.B).tocsr(), Vr @ self.h_B
        Vr = self.B.T * scale
        return Vr @ self.B, Vr @ self.h_B


def pop_rank_rtol(title: str, options: dict[str, Any]) -> float:
    """The only compile option of the quadratic formulations: ``rank_rtol``, the relative
    threshold below which a direction of A counts as numerically zero."""
    rtol = float(options.pop("rank_rtol", RANK_RTOL))
    if options:
        raise SolverError(f"{title} compile options are 'rank_rtol'; got {sorted(options)}")
    return rtol


def factor_quadratic(q: QuadraticSDP, rtol: float = RANK_RTOL) -> QuadraticFactor:
    """Rank-revealing factorisation of ``A = F^T F`` (eigen-decomposition of the smaller Gram).

    Squared losses on entries of K, each entry counted once (P1, P6-square): the rows of F
    are orthogonal already; B = F (minus zero rows), sparse.
    Otherwise, with ``p`` rows and ``d`` columns: if ``p <= d`` eigen-decompose
    ``F F^T = U diag(w) U^T`` (formed sparse when F is) and take ``B = U_r^T F``,
    ``h_B = U_r^T h``; else eigen-decompose ``A = F^T F = V diag(w) V^T`` and take
    ``B = diag(sqrt w_r) V_r^T``.  Directions with ``w <= rtol * max(w)`` are dropped.
    """
    F, h = q.F, q.h
    hh = float(h @ h)
    if q.orthogonal_rows:
        F = sp.csr_matrix(F)
        w = np.asarray(F.multiply(F).sum(axis=1)).ravel()
        keep = w > rtol * max(float(w.max(initial=0.0)), 1e-300)
        B, hB, lam = F[keep], h[keep], w[keep]
    elif sp.issparse(F) and F.shape[0] <= F.shape[1]:
        F = sp.csr_matrix(F)
        w, U = np.linalg.eigh((F @ F.T).toarray())
        keep = w > rtol * max(float(w.max(initial=0.0)), 1e-300)
        U, lam = U[:, keep], w[keep]
        B, hB = np.asarray(F.T @ U).T, U.T @ h
    else:
        F = F.toarray() if sp.issparse(F) else np.asarray(F)
        p, d = F.shape
        if p <= d:
            w, U = np.linalg.eigh(F @ F.T)
            keep = w > rtol * max(float(w.max(initial=0.0)), 1e-300)
            U, lam = U[:, keep], w[keep]
            B, hB = U.T @ F, U.T @ h
        else:
            w, V = np.linalg.eigh(F.T @ F)
            keep = w > rtol * max(float(w.max(initial=0.0)), 1e-300)
            V, lam = V[:, keep], w[keep]
            B = np.sqrt(lam)[:, None] * V.T
            hB = (V.T @ (F.T @ h)) / np.sqrt(lam)
    r = int(lam.size)
    dropped = int(min(q.p, q.d) - r)
    return QuadraticFactor(B, hB, max(hh - float(hB @ hB), 0.0), lam, r, dropped)


# ---------------------------------------------------------------------------- shared compile
def psd_variable(s: int, name: str = "y"):
    """``(y, Y)``: the svec variable (``d`` scalars) and the symmetric matrix expression."""
    import cvxpy as cp

    y = cp.Variable(svec_dim(s), name=name)
    Y = cp.reshape(smat_operator(s) @ y, (s, s), order="F")
    return y, Y


@dataclass
class QuadraticInverse(FormulationInverse):
    """What the quadratic formulations (SQLP, Schur-complement SDPs) need to map a solution
    back: ``decl`` the problem's declaration, ``q`` its :class:`QuadraticSDP` (``s``, the
    ``basis`` with ``K = B Y B^T`` or None), ``fac`` the factorisation of ``A``, ``y`` the
    variable ``svec(Y)`` and ``tags`` the constraint rows' ``(sense, rows of q, constraint)``
    (:func:`linear_constraints`)."""

    decl: Any
    q: QuadraticSDP
    fac: QuadraticFactor
    y: Any
    tags: list

    @property
    def s(self) -> int:
        """The PSD block's size."""
        return self.q.s

    @property
    def basis(self) -> np.ndarray | None:
        """``B`` with ``K = B Y B^T``, or None (``Y`` is K)."""
        return self.q.basis


@dataclass
class SQLPInverse(QuadraticInverse):
    """:class:`QuadraticInverse` of the SQLP, with its cone variable ``u`` and the constraint
    ``B y - u_{3:} = h_B`` (``lam_con``, whose multiplier gives the loss rows' slopes)."""

    u: Any
    lam_con: Any


def recover_svec(inverse: QuadraticInverse) -> LowRank:
    y = inverse.y.value
    if y is None:
        raise ValueError("the y variable has no value")
    Y = smat(np.asarray(y, float), inverse.s)
    G = psd_factor(Y)
    B = inverse.basis
    return LowRank(G if B is None else B @ G)


def factor_nnz(problem: Any) -> int:
    """Nonzeros of ``B`` (``rank(A) x d``) without building it: one per squared row when
    K is the variable and every squared row is an entry of K (P1, P6-square: the rows
    select entries of ``svec(K)``), else dense (``min(p, d) d``)."""
    s, p, _ = qsdp_shape(problem)
    if entry_rows(problem):
        return p
    return min(p, svec_dim(s)) * svec_dim(s)


def constraints_phrase(m: int) -> str:
    """``" and 12 linear constraint rows"`` for :meth:`describe` (empty without rows)."""
    return f" and {m} linear constraint rows" if m else ""


# ---------------------------------------------------------------------------- explain / lift
def svec_coordinates(K: np.ndarray, basis: np.ndarray | None) -> np.ndarray:
    """``y = svec(Y)`` for a kernel ``K`` of the form: ``Y = K`` (no basis) or the ``Y`` with
    ``K = Q Y Q^T`` (``Q^+ K Q^{+T}``, exact for K in the form)."""
    K = np.asarray(K, dtype=float)
    if basis is None:
        Y = K
    else:
        Qp = np.linalg.pinv(basis)
        Y = Qp @ K @ Qp.T
    return svec((Y + Y.T) / 2)


def qsdp_parts(q: QuadraticSDP, fac: QuadraticFactor) -> dict[str, Any]:
    """What the SQLP and Schur-complement descriptions share: the variable ``y``, the data
    ``g`` and ``c``, the declaration's constraint rows on ``y``, and the map back to K."""
    from ..model import EQ, GE, LE
    from .base import Item, Math, _fmt

    s, d = q.s, q.d
    Ysym = "K" if q.basis is None else "Y"
    y = Item(Math(rf"y \in \mathbb{{R}}^{{{d}}}", f"y in R^{d}"),
             f"y = svec({Ysym}), {Ysym} symmetric {s} x {s} (d = s(s+1)/2 = {d})")
    gnz = int(np.count_nonzero(q.g))
    c = q.c0 + fac.const
    data = [Item(Math(r"g \in \mathbb{R}^{" + str(d) + "}", f"g in R^{d}"),
                 f"the linear terms on y ({gnz} nonzeros)" if gnz else "zero (no linear term)"),
            Item(Math(rf"c = {_fmt(c)}", f"c = {_fmt(c)}"),
                 "the constant ||h||^2 - ||h_B||^2 of the factorisation"
                 + (" plus the merged rows' constant" if q.c0 else "")
                 + " (so that the program's value is the problem's objective)")]
    cons = []
    for sense, lt, tt, name in ((EQ, "=", "==", "E"), (LE, r"\le", "<=", "L"), (GE, r"\ge", ">=", "G")):
        k = int(np.count_nonzero(q.con_sense == sense))
        if k:
            cons.append(Item(Math(rf"C_{name} \, y {lt} b_{name}", f"C_{name} y {tt} b_{name}"),
                             f"{k} rows: the declaration's constraint rows A(K) {tt} b on y"))
    if q.basis is None:
        rec = Item(Math(r"K = \mathrm{smat}(y)", "K = smat(y)"), "K is the PSD variable itself")
    else:
        n = q.basis.shape[0]
        rec = Item(Math(r"K = Q \, \mathrm{smat}(y) \, Q^T", "K = Q smat(y) Q^T"),
                   f"Q the {n} x {s} basis of the declaration's form")
    psd = Item(Math(r"\mathrm{smat}(y) \succeq 0", "smat(y) PSD"), f"PSD block {s} x {s}")
    return {"y": y, "data": data, "cons": cons, "recovery": rec, "psd": psd, "c": c}


def qsdp_sizes(q: QuadraticSDP, fac: QuadraticFactor, program: Any) -> list[tuple[str, Any]]:
    from .base import count_rows

    eq, ineq = count_rows(program)
    return [("rank(A)", f"{fac.rank} of min(p = {q.p}, d = {q.d})"), ("PSD block (s)", q.s),
            ("equality rows", eq), ("inequality rows", ineq),
            ("scalar variables", int(sum(v.size for v in program.variables())))]


def _sqlp_explain(self: Any, problem: Any, compiled: Compiled):
    from .base import Item, Math, ProgramDescription

    inv: SQLPInverse = compiled.inverse
    q, fac = inv.q, inv.fac
    r = fac.rank
    parts = qsdp_parts(q, fac)
    u = Item(Math(rf"u \in \mathbb{{R}}^{{{r + 2}}}", f"u in R^{r + 2}"),
             "u = ((1 + mu) / 2, (1 - mu) / 2, z) with z = B y - h_B, mu >= z^T z")
    bnnz = int(fac.B.nnz) if sp.issparse(fac.B) else int(np.count_nonzero(fac.B))
    data = [Item(Math(rf"B \in \mathbb{{R}}^{{{r} \times {q.d}}}", f"B in R^({r} x {q.d})"),
                 f"A = F^T F = B^T B, r = rank(A) = {r} orthogonal rows ({bnnz} nonzeros)"),
            Item(Math(rf"h_B \in \mathbb{{R}}^{{{r}}}", f"h_B in R^{r}"),
                 "||F y - h||^2 = ||B y - h_B||^2 + const")] + parts["data"]
    obj = Math(r"u_1 - u_2 + g^T y + c", "u_1 - u_2 + g^T y + c")
    if q.sign < 0:
        obj = Math(rf"-\left({obj.latex}\right)", f"-({obj.text})")
    cons = [parts["psd"],
            Item(Math(r"u_1 + u_2 = 1", "u_1 + u_2 = 1"), "1 row"),
            Item(Math(r"B y - u_{3:} = h_B", "B y - u_{3:} = h_B"), f"{r} rows"),
            Item(Math(r"u_1 \ge \lVert u_{2:} \rVert_2", "u_1 >= ||u_{2:}||_2"),
                 f"second-order cone of size {r + 2}")] + parts["cons"]
    cones = [Item(Math(rf"\mathbb{{S}}_+^{{{q.s}}}", f"PSD {q.s} x {q.s}"), "Y = smat(y)"),
             Item(Math(rf"\mathcal{{Q}}^{{{r + 2}}}", f"SOC {r + 2}"), "(u_1, u_2, z): z^T z <= u_1 - u_2 = mu")]
    sizes = qsdp_sizes(q, fac, compiled.program)
    sizes.insert(2, ("SOC size", r + 2))
    rel = ("at u = ((1 + mu) / 2, (1 - mu) / 2, z) with mu = ||B y - h_B||^2 (the cone tight) the "
           "objective equals the problem's objective exactly: c restores the constant the "
           "factorisation drops" + ("; the declaration is a maximisation, whose negation is "
                                    "minimised as -(...)" if q.sign < 0 else ""))
    return ProgramDescription(self.name, "SQLP (Wu et al. 2009, eq. 21-25)",
                              "max" if q.sign < 0 else "min", [parts["y"], u], data, obj, cons,
                              cones, sizes, parts["recovery"], rel,
                              ["Theorem 3.1 of Wu et al. 2009: u in the cone with u_1 + u_2 = 1 "
                               "iff z^T z <= u_1 - u_2"])


def _sqlp_lift(self: Any, compiled: Compiled, K: np.ndarray):
    from .base import Lift

    inv: SQLPInverse = compiled.inverse
    fac = inv.fac
    yv = svec_coordinates(K, inv.basis)
    z = np.asarray(fac.B @ yv).ravel() - fac.h_B
    mu = float(z @ z)
    return Lift({inv.y: yv, inv.u: np.concatenate([[(1 + mu) / 2, (1 - mu) / 2], z])})


class SQLP(Formulation):
    """``"sqlp"``: Wu et al. 2009's semidefinite-quadratic-linear program (eq. 21-25).

    One PSD block of size ``s`` (``n`` when K is the variable, the basis size for
    ``K = B Y B^T``), one second-order cone of size ``rank(A) + 2`` and ``rank(A) + 1``
    linear constraints, plus the declaration's own constraint rows on ``y``.  Compile
    option ``rank_rtol`` (relative eigenvalue threshold of the rank-revealing
    factorisation, default :data:`RANK_RTOL`).
    """

    name = "sqlp"
    title = "SQLP"
    capabilities = QSDP_CAPABILITIES

    def applies_to(self, problem: Any) -> str | None:
        return qsdp_applies(problem, self.name)

    def describe(self, problem: Any) -> str:
        s, p, m = qsdp_shape(problem)
        r = min(p, svec_dim(s))
        return (f"an SQLP with a {s} x {s} PSD block and one SOC of size <= {r + 2} "
                f"(rank(A) <= {r}){constraints_phrase(m)}")

    def kkt_order(self, problem: Any) -> int | None:
        # the svec of Y (dense scaling block) and y coupled with the SOC through B (and
        # with the constraint rows, one KKT row each)
        s, p, m = qsdp_shape(problem)
        d = svec_dim(s)
        return ipm_order((s,), d + min(p, d) + m)

    def conic_data(self, problem: Any) -> ConicData | None:
        s, p, m = qsdp_shape(problem)
        d = svec_dim(s)
        r = min(p, d)
        con = constraint_rows_nnz(problem) if m else 0
        return ConicData(nnz=d + factor_nnz(problem) + 3 * r + con, rows=d + 2 * r + 3 + m,
                         psd=(s,))

    def compile(self, problem: Any, **options: Any) -> Compiled:
        import cvxpy as cp

        rtol = pop_rank_rtol("SQLP", options)
        q = quadratic_form(problem)
        fac = factor_quadratic(q, rtol)
        y, Y = psd_variable(q.s)
        r = fac.rank
        u = cp.Variable(r + 2, name="u")
        cons = [Y >> 0, u[0] + u[1] == 1, fac.B @ y - u[2:] == fac.h_B, cp.SOC(u[0], u[1:])]
        tags: list = []
        cons += linear_constraints(q, y, tags)
        expr = u[0] - u[1] + q.g @ y + (q.c0 + fac.const)
        obj = cp.Minimize(expr) if q.sign > 0 else cp.Maximize(-expr)
        prog = cp.Problem(obj, cons)
        size = program_size(prog, rank_A=r)
        notes = [f"y = {q.variable}: {q.d} scalars; rank(A) = {r} of min(p={q.p}, d={q.d})"
                 + (f"; {q.m} constraint rows" if q.m else "")]
        return Compiled(prog, SQLPInverse(decl=problem.declaration, q=q, fac=fac, y=y, tags=tags,
                                          u=u, lam_con=cons[2]), size, notes)

    def recover(self, compiled: Compiled) -> LowRank:
        return recover_svec(compiled.inverse)

    def duals(self, compiled: Compiled) -> dict[str, Any] | None:
        """The constraint rows' dual values and the loss rows' slopes: the multiplier ``lam``
        of ``B y - u_{2:} = h_B`` is the slope of ``||B y - h_B||^2`` at the solver's dual
        point (``B^T lam`` its gradient on ``y``)."""
        inv: SQLPInverse = compiled.inverse
        lam = inv.lam_con.dual_value
        grad = None if lam is None else inv.fac.B.T @ np.asarray(lam, dtype=float).ravel()
        return qsdp_duals(compiled, grad)

    def explain(self, problem: Any, compiled: Compiled):
        """The SQLP with this instance's numbers (see :class:`~kernelforms.formulations.base.ProgramDescription`)."""
        return _sqlp_explain(self, problem, compiled)

    def lift(self, compiled: Compiled, K: np.ndarray):
        """``y = svec(Y)`` of K and ``u = ((1 + mu) / 2, (1 - mu) / 2, B y - h_B)`` with
        ``mu = ||B y - h_B||^2`` (the cone tight)."""
        return _sqlp_lift(self, compiled, K)
