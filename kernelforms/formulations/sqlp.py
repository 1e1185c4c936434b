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

Which problems: P1 (``y = svec(K)``, ``s = n``), P3 and P5 (``y = svec(Y)`` with
``K = Q Y Q^T``) and P6 with the square loss.  For P1 and P6-square every pair
functional reads a single entry of ``svec(K)`` and every pair is counted once, so the
rows of ``F`` are already orthogonal: ``B`` is ``F`` itself (sparse) and no
``d x d`` matrix is formed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..problems import MVU, NPKL, PCP, BregmanLowRank, RegMVU, RegPCP
from ..result import LowRank, psd_factor
from .base import Compiled, ConicData, Formulation, program_size

#: eigenvalues of the Gram matrix of F below RANK_RTOL * the largest are numerically zero
RANK_RTOL = 1e-12

#: bytes per double
_B = 8


# ---------------------------------------------------------------------------- svec
def svec_dim(s: int) -> int:
    return s * (s + 1) // 2


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
    """A convex QSDP ``sign * (||F y - h||^2 + g^T y + c0)`` over ``y = svec(Y)``, Y PSD.

    ``sign`` is +1 for minimisation problems and -1 for P5 (a maximisation of the
    negated expression); ``basis`` is ``Q`` (``K = Q Y Q^T``) or None (``Y`` is K).
    """

    s: int
    F: Any  # (p, d) dense ndarray or sparse CSR
    h: np.ndarray
    g: np.ndarray
    c0: float
    sign: int
    basis: np.ndarray | None
    variable: str  # "svec(K)" or "svec(Y)"
    orthogonal_rows: bool = False  # F F^T diagonal (P1, P6-square): B = F

    @property
    def d(self) -> int:
        return svec_dim(self.s)

    @property
    def p(self) -> int:
        return self.F.shape[0]


def qsdp_applies(problem: Any) -> str | None:
    """``None`` when the problem is a convex quadratic SDP, else why not."""
    if isinstance(problem, (RegPCP, RegMVU)):
        return None
    if isinstance(problem, PCP):
        if problem.hard:
            return ("hard PCP (P2) is a linear SDP (no quadratic term); use 'sdp' or 'dual'")
        return None
    if isinstance(problem, NPKL):
        if problem.loss == "square":
            return None
        return (f"NPKL with the {problem.loss!r} loss is not a quadratic SDP (only loss='square' "
                "is); use 'sdp' (or 'dual' for the hinge loss)")
    if isinstance(problem, MVU):
        return "MVU (P4) is a linear SDP (no quadratic term); use 'sdp'"
    if isinstance(problem, BregmanLowRank):
        return "the Bregman divergences (P7) are not quadratic; use 'sdp'"
    return f"no quadratic-SDP form for {type(problem).__name__}"


def qsdp_shape(problem: Any) -> tuple[int, int]:
    """``(s, p)``: PSD block size and number of squared terms, without building F."""
    if isinstance(problem, (RegPCP, RegMVU)):
        p = len(problem.target_pairs[0]) if isinstance(problem, RegPCP) else len(problem.edges)
        return problem.m_basis, p
    if isinstance(problem, PCP):
        return problem.n, len(problem.target_pairs[0])
    return problem.n, len(problem.signed_pairs[0])


def quadratic_form(problem: Any) -> QuadraticSDP:
    """Write P1, P3, P5 or P6-square as a :class:`QuadraticSDP`."""
    if isinstance(problem, PCP):
        n, idx, t = problem.n, *problem.target_pairs
        w = np.sqrt(problem.gamma / 2.0)
        F = entry_selector(idx, n, np.full(len(idx), w))
        return QuadraticSDP(n, F, w * t, svec_sparse(problem.laplacian), 0.0, 1, None,
                            "svec(K)", orthogonal_rows=True)
    if isinstance(problem, NPKL):
        n, (idx, T) = problem.n, problem.signed_pairs
        w = np.sqrt(problem.gamma)
        F = entry_selector(idx, n, w * T)
        return QuadraticSDP(n, F, np.full(len(idx), w), svec_sparse(problem.laplacian), 0.0, 1,
                            None, "svec(K)", orthogonal_rows=True)
    if isinstance(problem, RegPCP):
        Q = problem.basis
        idx, t = problem.target_pairs
        F = symmetric_functionals(Q[idx[:, 0]], Q[idx[:, 1]])
        return QuadraticSDP(problem.m_basis, F, np.asarray(t, float), np.zeros(F.shape[1]), 0.0,
                            1, Q, "svec(Y)")
    if isinstance(problem, RegMVU):
        # max tr(Y) - nu ||D y - d^2||^2  =  -( nu ||D y - d^2||^2 - svec(I) . y )
        Q, E = problem.basis, problem.edges
        D = Q[E[:, 0]] - Q[E[:, 1]]
        w = np.sqrt(problem.nu)
        F = w * symmetric_functionals(D, D)
        s = problem.m_basis
        return QuadraticSDP(s, F, w * problem.distances**2, -svec(np.eye(s)), 0.0, -1, Q,
                            "svec(Y)")
    raise SolverError(f"no quadratic-SDP form for {type(problem).__name__}")


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

    P1 / P6-square: the rows of F are orthogonal already; B = F (minus zero rows).
    Otherwise, with ``p`` rows and ``d`` columns: if ``p <= d`` eigen-decompose
    ``F F^T = U diag(w) U^T`` and take ``B = U_r^T F``, ``h_B = U_r^T h``; else
    eigen-decompose ``A = F^T F = V diag(w) V^T`` and take ``B = diag(sqrt w_r) V_r^T``.
    Directions with ``w <= rtol * max(w)`` are dropped.
    """
    F, h = q.F, q.h
    hh = float(h @ h)
    if q.orthogonal_rows:
        F = sp.csr_matrix(F)
        w = np.asarray(F.multiply(F).sum(axis=1)).ravel()
        keep = w > rtol * max(float(w.max(initial=0.0)), 1e-300)
        B, hB, lam = F[keep], h[keep], w[keep]
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


def recover_svec(inverse: dict[str, Any]) -> LowRank:
    y = inverse["y"].value
    if y is None:
        raise ValueError("the y variable has no value")
    Y = smat(np.asarray(y, float), inverse["s"])
    G = psd_factor(Y)
    B = inverse.get("basis")
    return LowRank(G if B is None else B @ G)


#: bytes of Clarabel's peak resident memory per entry of the dense part of its KKT system
#: (order^2), beyond Python and CVXPY; fitted to peaks of full SDPs of P1 (order^2 =
#: 2 svec(n)^2): 41, 182, 558 MB at n = 40, 60, 80 (27-31 bytes per entry; the KKT matrix,
#: its permuted copy and the LDL factor, each sparse with an index per value)
IPM_BYTES_PER_ENTRY = 30


def ipm_order(dense_blocks: tuple[int, ...] = (), coupled: int = 0) -> int:
    """Order ``N`` of the dense part of an interior-point KKT system: ``N^2 = sum_k
    svec(k)^2 + coupled^2``.

    Each PSD block of size ``k`` that the solver cannot split carries a dense scaling
    matrix of order ``k(k+1)/2`` (Clarabel, SDPT3, MOSEK); ``coupled`` scalar unknowns
    tied together through a dense block or a dense data matrix (the entries of the full
    SDP's K, the rows of ``B`` or ``A^{1/2}``) fill a dense factor of that order.  An
    arrow-shaped Schur LMI ``[[I, a], [a^T, nu]]`` is *not* counted as a dense block: its
    sparsity pattern is chordal and Clarabel splits it into 2 x 2 cones by default.
    """
    return int(math.ceil(math.sqrt(sum(svec_dim(k) ** 2 for k in dense_blocks) + coupled**2)))


def ipm_bytes(dense_blocks: tuple[int, ...] = (), coupled: int = 0) -> int:
    """Bytes an interior-point solve needs beyond Python and CVXPY (the size guard's model):
    :data:`IPM_BYTES_PER_ENTRY` ``* N^2`` with ``N`` from :func:`ipm_order`."""
    return int(IPM_BYTES_PER_ENTRY * ipm_order(dense_blocks, coupled) ** 2)


def factor_nnz(problem: Any) -> int:
    """Nonzeros of ``B`` (``rank(A) x d``) without building it: one per squared term for
    P1 / P6-square (the rows select entries of ``svec(K)``), else dense (``min(p, d) d``)."""
    s, p = qsdp_shape(problem)
    if isinstance(problem, (PCP, NPKL)):
        return p
    d = svec_dim(s)
    return min(p, d) * d


def pretty_bytes(x: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if x < 1024 or unit == "PiB":
            return f"{x:.3g} {unit}"
        x /= 1024
    return f"{x:.3g} PiB"  # pragma: no cover


class SQLP(Formulation):
    """``"sqlp"``: Wu et al. 2009's semidefinite-quadratic-linear program (eq. 21-25).

    One PSD block of size ``s`` (``n`` for P1 / P6-square, ``m_basis`` for P3 / P5),
    one second-order cone of size ``rank(A) + 2`` and ``rank(A) + 1`` linear
    constraints.  Compile option ``rank_rtol`` (relative eigenvalue threshold of the
    rank-revealing factorisation, default :data:`RANK_RTOL`).
    """

    name = "sqlp"
    title = "SQLP"

    def applies_to(self, problem: Any) -> str | None:
        return qsdp_applies(problem)

    def describe(self, problem: Any) -> str:
        s, p = qsdp_shape(problem)
        r = min(p, svec_dim(s))
        return f"an SQLP with a {s} x {s} PSD block and one SOC of size <= {r + 2} (rank(A) <= {r})"

    def kkt_order(self, problem: Any) -> int | None:
        # the svec of Y (dense scaling block) and y coupled with the SOC through B
        s, p = qsdp_shape(problem)
        d = svec_dim(s)
        return ipm_order((s,), d + min(p, d))

    def conic_data(self, problem: Any) -> ConicData | None:
        s, p = qsdp_shape(problem)
        d, r = svec_dim(s), min(p, svec_dim(s))
        return ConicData(nnz=d + factor_nnz(problem) + 3 * r, rows=d + 2 * r + 3, psd=(s,))

    def compile(self, problem: Any, **options: Any) -> Compiled:
        import cvxpy as cp

        rtol = pop_rank_rtol("SQLP", options)
        q = quadratic_form(problem)
        fac = factor_quadratic(q, rtol)
        y, Y = psd_variable(q.s)
        r = fac.rank
        u = cp.Variable(r + 2, name="u")
        cons = [Y >> 0, u[0] + u[1] == 1, fac.B @ y - u[2:] == fac.h_B, cp.SOC(u[0], u[1:])]
        expr = u[0] - u[1] + q.g @ y + (q.c0 + fac.const)
        obj = cp.Minimize(expr) if q.sign > 0 else cp.Maximize(-expr)
        prog = cp.Problem(obj, cons)
        size = program_size(prog, rank_A=r)
        notes = [f"y = {q.variable}: {q.d} scalars; rank(A) = {r} of min(p={q.p}, d={q.d})"]
        return Compiled(prog, {"y": y, "s": q.s, "basis": q.basis}, size, notes)

    def recover(self, compiled: Compiled) -> LowRank:
        return recover_svec(compiled.inverse)
