"""BCDKL: block coordinate descent on ``K = G G^T`` for NPKL (P6, Hu & Kwok 2015) and soft PCP (P1).

The method reads the problem's declaration (:func:`_match`), never its class: a sparse
linear cost ``<C, K>`` (``C = L`` below) with ``C_ii > 0``, loss terms on entries of K
(hinge, squared hinge, squared, linear; kinds and weights may differ from pair to pair,
e.g. a hinge on the cannot-links and a squared loss on the must-links), squared losses on
``K_ii`` (soft PCP) and the bound ``K_ii <= b^2`` (the linear loss).  One kind with one
weight is P6 and uses the paper's updates below; other mixes solve each row's dual as
one box QP with a bound per partner (:meth:`BCDEngine._update_mixed`).

The paper writes ``K = V^T V`` with columns ``v_i``; our factor ``G`` (``n x r``) is
``V^T``, so the paper's column ``v_i`` is our row ``G[i]``.  One block is one row.

Per-row subproblem (exactly P6 of docs/problems.md, every pair counted once).  With
``c_i = sum_{k != i} L_ik g_k`` and ``a_j = T_ij g_j`` for the partners ``j in T(i)``,
the part of the objective that depends on ``g = g_i`` is::

    L_ii ||g||^2 + 2 g.c_i + gamma * sum_{j in T(i)} loss(a_j . g)

which is twice the paper's eq. 18 with the paper's own ``gamma``.  Hence the paper's
updates hold verbatim for this scaling:

* no pair (set U): ``g = -c_i / L_ii`` (eq. 13); or all of U at once, one Jacobi step
  of eq. 17 (``unlabeled="block"``);
* hinge: box QP eq. 22, ``min 1/2 a'Pa - a'q``, ``0 <= a <= gamma/2``,
  ``P = A A^T``, ``q_j = a_j.c_i + L_ii``; ``g = (A^T alpha - c_i) / L_ii`` (eq. 21);
* squared hinge: QP eq. 25, ``H = P + (L_ii/gamma) I``, ``alpha >= 0``, same recovery;
* square: closed form eq. 28, ``(L_ii I + gamma A^T A) g = gamma A^T 1 - c_i``, solved
  with the Sherman-Morrison-Woodbury identity on the ``|T(i)| x |T(i)|`` matrix
  ``(L_ii/gamma) I + A A^T``;
* linear: eq. 31, ``g~ = (gamma/2 A^T 1 - c_i) / L_ii`` projected onto ``||g|| <= b``
  (P6's ``K_ii <= b^2`` holds for *every* i, so unlabeled rows are projected too).

The small QPs are solved in batches (every labeled row of one colour at once, padded to
the largest ``|T(i)|``) by a primal-dual active-set (semismooth Newton) method with
exact solves of the free block, warm-started from the previous sweep's multipliers,
with projected coordinate descent as a fall-back for rows whose KKT residual is not
yet below ``qp_tol``.  A per-row safeguard keeps the old row whenever the new one
does not decrease the row objective, so every sweep is monotone.

Soft PCP (P1, not in the paper) is supported too: its row subproblem is quartic
(the diagonal term ``(gamma/2)(||g||^2 - 1)^2``) and is solved exactly through a scalar
secular equation in ``mu = gamma (||g||^2 - 1)`` (:meth:`BCDEngine._update_pcp`).

Parallel Gauss-Seidel: rows ``i`` and ``k`` interact only if ``L_ik != 0`` or
``{i, k}`` is a pair.  A greedy colouring (networkx, largest-first) of that graph
gives independent sets; updating one colour at once *is* a sequential Gauss-Seidel
pass over its rows in any order, so the coloured sweep has the same monotone descent
as the sequential one, with a few vectorised numpy calls per colour instead of a
Python loop over rows.  ``order="sequential"`` keeps the paper's Algorithm 1 (random
order over L, then over U) for comparison.

Beyond the paper (defaults; ``accelerate=None, smoothing=None`` gives Algorithm 1):

* Anderson acceleration of the sweep map (depth 5, one fixed random order), each
  extrapolation accepted only if it lowers the objective: Gauss-Seidel alone needs
  hundreds of sweeps when the graph has slow modes (eigenvalues of L near delta).
  When the extrapolation is rejected (near the saddle ``K = 0`` it points back at the
  saddle), longer steps along the sweep's own step (:meth:`BCDEngine.stretch`), except
  on the exact hinge.
* Hinge: BCD on the Huber-smoothed hinge with ``mu = 0.1, 0.01, ...``; a phase ends
  when its progress per sweep is small against the smoothing bias at G.  On the exact
  hinge the row updates can freeze at a point short of the optimum (every row its own
  fixed point: the pairs at the kink pin both ends); after :attr:`BCDKL.FROZEN_SWEEPS`
  unchanged sweeps and a certificate that does not pass, the run ends ``max_iter``
  with a message that says so, instead of sweeping on to ``max_iter``.
* Stopping by a duality-gap certificate (:meth:`BCDEngine.certificate`): P6 and P1 are
  convex in K, and the loss derivatives (or, for the hinge, multipliers fitted to the
  stationarity condition) give a dual point, made feasible (``L - M(s) >= 0``) by a
  certified scaling from the smallest eigenvalue.  ``converged`` means the certified
  relative gap is below ``gap_tol``; a small change of G alone is never convergence.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import OptionError
from ..result import Status
from ._anderson import Anderson
from .base import IterativeSolver, SolverOutput, psd_minimisation_reason
from .options import Boolean, FactorInit, Interval, Rank, StrOptions

#: relative objective tolerance this method reaches against the full SDP (tests)
TEST_RTOL = 1e-3

ORDERS = ("color", "sequential")
#: coordinate-descent passes of the row-QP fall-back per sweep (a row left above qp_tol
#: is still safeguarded: it is kept only if it lowers its row objective)
QP_MAX_CD = 200
UNLABELED = ("gauss_seidel", "block")


# ----------------------------------------------------------------------------- QPs
def box_qp(H: np.ndarray, q: np.ndarray, upper: Any, x0: np.ndarray | None = None, *,
           lower: Any = 0.0, tol: float = 1e-12, max_newton: int = 25,
           max_cd: int = 5000) -> np.ndarray:
    """Solve a batch of small box QPs ``min 1/2 x'Hx - q'x  s.t. lower <= x <= upper``.

    Parameters
    ----------
    H : ndarray (B, t, t)
        Symmetric positive semidefinite matrices.
    q : ndarray (B, t)
    upper : float or ndarray (B, t)
        Upper bound (``np.inf`` for a one-sided bound), one for all or one per entry.
    x0 : ndarray (B, t), optional
        Warm start.
    lower : float or ndarray (B, t)
        Lower bound (default 0; ``-np.inf`` for a free entry, whose ``H_jj`` must be > 0).
    tol : float
        KKT tolerance on the natural residual, relative to ``1 + max |q|`` per row.

    Returns
    -------
    ndarray (B, t)
        The minimisers (exact up to round-off where the active-set step converged).

    Notes
    -----
    Primal-dual active set (semismooth Newton on ``x = clip(x - w / diag H)``,
    ``w = Hx - q``): guess the bound/free split, solve the free block exactly
    (pseudo-inverse, so a singular ``H`` is fine), repeat.  Rows that do not reach
    the KKT tolerance fall back to projected coordinate descent (exact line
    minimisation per coordinate), which converges for any PSD ``H``.
    """
    B, t = q.shape
    if B == 0 or t == 0:
        return np.zeros((B, t))
    per_entry = np.ndim(upper) > 0 or np.ndim(lower) > 0
    if per_entry:
        upper = np.broadcast_to(np.asarray(upper, dtype=float), (B, t))
        lower = np.broadcast_to(np.asarray(lower, dtype=float), (B, t))

    def rows(a, sel):
        return a[sel] if per_entry else a

    hd = np.einsum("bii->bi", H)
    scale = 1.0 + np.max(np.abs(q), axis=1)  # (B,)
    hds = np.maximum(hd, 1e-14 * scale[:, None])
    if x0 is None:
        x = np.zeros((B, t)) if not per_entry else np.clip(np.zeros((B, t)), lower, upper)
    else:
        x = np.clip(x0, lower, upper)
    eye = np.eye(t, dtype=bool)

    def residual_of(Hs, qs, hs, xs, sc, lo, hi):
        w = np.einsum("bij,bj->bi", Hs, xs) - qs
        nat = xs - np.clip(xs - w / hs, lo, hi)
        return np.max(np.abs(nat) * hs, axis=1) / sc

    res = residual_of(H, q, hds, x, scale, lower, upper)
    todo = np.flatnonzero(res > tol)
    prev = None  # active sets used in the previous Newton step, for the rows in todo
    stalled = []
    for _ in range(max_newton):
        if todo.size == 0:
            break
        Hs, qs, xs, hs = H[todo], q[todo], x[todo], hds[todo]
        lo, hi = rows(lower, todo), rows(upper, todo)
        w = np.einsum("bij,bj->bi", Hs, xs) - qs
        z = xs - w / hs
        low = z <= lo
        up = z >= hi
        free = ~(low | up)
        sets = np.where(low, 0, np.where(up, 2, 1))
        if prev is not None:
            same = np.all(sets == prev, axis=1)
            if np.any(same):  # the same split again without reaching KKT: hand over
                stalled.append(todo[same])
                keep = ~same
                todo, Hs, qs, hs = todo[keep], Hs[keep], qs[keep], hs[keep]
                low, up, free, sets = low[keep], up[keep], free[keep], sets[keep]
                lo, hi = rows(lo, keep), rows(hi, keep)
                if todo.size == 0:
                    break
        if per_entry:
            xb = np.where(up, np.where(np.isfinite(hi), hi, 0.0),
                          np.where(low, np.where(np.isfinite(lo), lo, 0.0), 0.0))
        else:
            xb = np.where(up, upper if math.isfinite(upper) else 0.0, 0.0)
        ff = free[:, :, None] & free[:, None, :]
        Hm = np.where(ff, Hs, 0.0) + np.where(eye & ~free[:, :, None], 1.0, 0.0)
        rhs = np.where(free, qs - np.einsum("bij,bj->bi", Hs, xb), xb)
        # exact solve of the free block; a relative ridge of 1e-13 keeps a singular
        # P_FF (hinge with more partners than the rank) solvable
        Hm = Hm + (1e-13 * (1.0 + np.max(hs, axis=1)))[:, None, None] * eye
        xn = np.linalg.solve(Hm, rhs[:, :, None])[:, :, 0]
        x[todo] = np.clip(np.where(free, xn, xb), lo, hi)
        keep = residual_of(Hs, qs, hs, x[todo], scale[todo], lo, hi) > tol
        prev = sets[keep]
        todo = todo[keep]
    todo = np.concatenate([todo] + stalled) if stalled else todo
    # fall-back: projected coordinate descent on the remaining rows
    it = 0
    while todo.size and it < max_cd:
        Hs, qs, hs = H[todo], q[todo], hds[todo]
        lo, hi = rows(lower, todo), rows(upper, todo)
        xs = x[todo]
        for j in range(t):
            wj = np.einsum("bi,bi->b", Hs[:, j, :], xs) - qs[:, j]
            xs[:, j] = np.clip(xs[:, j] - wj / hs[:, j],
                               lo[:, j] if per_entry else lo, hi[:, j] if per_entry else hi)
        x[todo] = xs
        it += 1
        if it % 10 == 0 or it >= max_cd:
            todo = todo[residual_of(Hs, qs, hs, xs, scale[todo], lo, hi) > tol]
    return x


def huber_hinge(z: np.ndarray, mu: float) -> np.ndarray:
    """``max_{0<=beta<=1} beta (1 - z) - mu beta^2 / 2``: the hinge for ``mu = 0``."""
    u = 1.0 - z
    if mu <= 0:
        return np.maximum(0.0, u)
    return np.where(u <= 0, 0.0, np.where(u >= mu, u - 0.5 * mu, u * u / (2.0 * mu)))


def spd_solve(W: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Solve a batch of small symmetric positive definite systems ``W x = y``.

    Gaussian elimination without pivoting, vectorised over the batch (one numpy step
    per pivot); for the ``|T(i)| <= 8`` systems of the square loss this avoids one
    LAPACK call per row.  Larger systems go to ``numpy.linalg.solve``.
    """
    B, t = y.shape
    if t > 8:
        return np.linalg.solve(W, y[:, :, None])[:, :, 0]
    W = W.copy()
    y = y.copy()
    for k in range(t - 1):
        f = W[:, k + 1:, k] / W[:, k, k][:, None]
        W[:, k + 1:, k + 1:] -= f[:, :, None] * W[:, k, None, k + 1:]
        y[:, k + 1:] -= f * y[:, k:k + 1]
    x = np.empty_like(y)
    for k in range(t - 1, -1, -1):
        x[:, k] = (y[:, k] - np.einsum("bj,bj->b", W[:, k, k + 1:], x[:, k + 1:])) / W[:, k, k]
    return x


#: step multiples tried along a sweep's step when Anderson's extrapolation is rejected
#: (:meth:`BCDEngine.stretch`)
STRETCH = (2.0, 4.0, 8.0, 16.0, 32.0)

#: up to this n the duality-gap certificate uses a dense symmetric eigensolver (exact to
#: round-off); above it, Lanczos (ARPACK) for the smallest eigenvalue
DENSE_EIG_MAX = 2500
#: up to this many pairs the hinge certificate also fits the multipliers (an m x m QP)
FIT_MAX_PAIRS = 1500


def lambda_min(Z: sp.spmatrix) -> tuple[float, np.ndarray] | None:
    """Smallest eigenvalue of the symmetric sparse ``Z`` and a unit eigenvector.

    Dense (LAPACK ``syevr``, one eigenpair) for ``n <= DENSE_EIG_MAX``, else Lanczos;
    ``None`` when Lanczos does not converge (no certificate then).
    """
    n = Z.shape[0]
    if n <= DENSE_EIG_MAX:
        import scipy.linalg as sla

        w, V = sla.eigh(Z.toarray(), subset_by_index=[0, 0], driver="evr")
        return float(w[0]), V[:, 0]
    import scipy.sparse.linalg as spla

    try:
        w, V = spla.eigsh(Z.tocsr(), k=1, which="SA", tol=1e-10, ncv=min(n, 64),
                          maxiter=20 * n)
    except spla.ArpackNoConvergence:
        return None
    # the Lanczos residual bounds the distance of the Ritz value to an eigenvalue
    v = V[:, 0]
    res = float(np.linalg.norm(Z @ v - w[0] * v))
    return float(w[0]) - res, v


@dataclass
class Certificate:
    """A duality-gap certificate of a BCD iterate (see :meth:`BCDEngine.certificate`)."""

    primal: float  # the problem's objective at G (exact hinge for the hinge)
    dual: float  # a lower bound on the optimum (a feasible dual point)
    gap: float  # primal - dual >= primal - optimum
    rel_gap: float  # gap relative to |optimum| (conservative)
    smoothed_rel_gap: float  # rel_gap of the smoothed hinge (mu > 0), else = rel_gap


def _rel_gap(gap: float, primal: float, dual: float) -> float:
    """``gap / |optimum|`` bounded from above: the optimum lies in ``[dual, primal]``."""
    if primal * dual > 0:
        den = min(abs(primal), abs(dual))
    else:  # the optimum may be 0: relative to the larger magnitude (documented)
        den = max(abs(primal), abs(dual))
    return gap / den if den > 0 else (0.0 if gap <= 0 else math.inf)


# ------------------------------------------------------------------------- the view
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
    from ..model import LE

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


# ------------------------------------------------------------------------- the engine
@dataclass
class _Block:
    """Precomputed data of one colour (an independent set of rows)."""

    Lunl: sp.csr_matrix  # -Lbar[unlabeled rows] / L_ii: eq. 13 is G[rows] = Lunl @ G
    Llab: sp.csr_matrix  # Lbar[labeled rows]: C = Llab @ G
    unl_rows: Any  # unlabeled rows (index array, or a slice when contiguous)
    lab_rows: Any  # labeled rows
    n_unl: int
    n_lab: int
    J: np.ndarray  # (nl, tmax) partner indices (0 where padded)
    S: np.ndarray  # (nl, tmax) signs (0 where padded)
    pos: np.ndarray  # (nl, tmax) slot in the pair-CSR (0 where padded)
    mask: np.ndarray  # (nl, tmax) bool


class BCDEngine:
    """The BCD updates on a factor ``G`` (rows are the blocks).

    Parameters
    ----------
    view : _View
        The problem as :func:`_match` reads it from the declaration: the cost ``C``
        (symmetric, positive diagonal; ``L`` below), the pairs with their kinds, signs,
        targets and weights, the diagonal terms and the bound.
    """

    def __init__(self, view: _View, *, qp_tol: float = 1e-12):
        L = sp.csr_matrix(view.C, dtype=float)
        self.n = L.shape[0]
        self.d = L.diagonal().copy()
        Lbar = (L - sp.diags(self.d)).tocsr()
        Lbar.eliminate_zeros()
        Lbar.sort_indices()
        self.L = L
        self.Lbar = Lbar
        self.view = view
        # loss = the row update (view.mode); gamma = the one weight of a uniform mode
        self.loss, self.gamma, self.b = view.mode, view.gamma, view.b
        self.qp_tol = qp_tol
        idx = np.asarray(view.idx, dtype=np.int64).reshape(-1, 2)
        T = np.asarray(view.sign, dtype=float)
        self.idx, self.T = idx, T
        self.tau, self.w, self.kind = view.tau, view.w, view.kind
        self.wd, self.td = view.wd, view.td
        n = self.n
        rows = np.concatenate([idx[:, 0], idx[:, 1]])
        cols = np.concatenate([idx[:, 1], idx[:, 0]])
        # the (row, partner) slots of the pairs: slot -> pair, then the sign matrix P
        Pk = sp.csr_matrix((np.concatenate([np.arange(1, idx.shape[0] + 1)] * 2), (rows, cols)),
                           shape=(n, n))
        Pk.sort_indices()
        pair = Pk.data - 1
        P = sp.csr_matrix((T[pair], Pk.indices, Pk.indptr), shape=(n, n))
        self.P = P
        self.deg = np.diff(P.indptr)
        # per slot: the pair's target, weight and kind (the mixed and weighted updates)
        self.tau_slot, self.w_slot, self.kind_slot = self.tau[pair], self.w[pair], self.kind[pair]
        # loss "pcp" = soft PCP: squared losses on the pairs and on every K_ii; every row
        # carries its diagonal term, so every row is "labeled"
        self.labeled = self.deg > 0 if self.loss != "pcp" else np.ones(n, dtype=bool)
        self.alpha = np.zeros(P.nnz)  # dual warm starts, one per (row, partner) slot
        # the two (row, partner) slots of every pair, to read the pair multipliers back
        # (every pair owns exactly two slots: i != j, no duplicates)
        self.pair_slots = np.argsort(Pk.data, kind="stable").reshape(-1, 2)
        self._l0: float | None = None  # smallest eigenvalue of L (for the dual bound)
        self.n_safeguard = 0
        self.mu = 0.0  # Huber smoothing of the hinge (0 = the exact hinge of P6)

    # ---------------------------------------------------------------- colouring
    def coloring(self, rows: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """Greedy (largest-first) colouring of the interaction graph on ``rows``.

        Returns ``(colour, seconds)``; ``colour[i] = -1`` for rows not coloured.
        """
        import networkx as nx

        t0 = time.perf_counter()
        A = (abs(self.Lbar) + abs(self.P)).tocsr()
        colour = -np.ones(self.n, dtype=np.int64)
        if rows is None:
            rows = np.arange(self.n)
        sel = np.zeros(self.n, dtype=bool)
        sel[rows] = True
        C = sp.triu(A, k=1).tocoo()
        keep = sel[C.row] & sel[C.col]
        g = nx.Graph()
        g.add_nodes_from(rows.tolist())
        g.add_edges_from(zip(C.row[keep].tolist(), C.col[keep].tolist()))
        col = nx.greedy_color(g, strategy="largest_first")
        nodes = np.fromiter(col.keys(), dtype=np.int64, count=len(col))
        vals = np.fromiter(col.values(), dtype=np.int64, count=len(col))
        colour[nodes] = vals
        return colour, time.perf_counter() - t0

    def make_block(self, rows: np.ndarray) -> _Block:
        rows = np.asarray(rows, dtype=np.int64)
        lab = np.flatnonzero(self.labeled[rows])
        unl = np.flatnonzero(~self.labeled[rows])
        lr = rows[lab]
        deg = self.deg[lr]
        tmax = int(deg.max()) if deg.size else 0
        ar = np.arange(tmax)
        mask = ar[None, :] < deg[:, None]
        pos = np.where(mask, self.P.indptr[lr][:, None] + ar[None, :], 0)
        J = np.where(mask, self.P.indices[pos] if self.P.nnz else 0, 0)
        S = np.where(mask, self.P.data[pos] if self.P.nnz else 0.0, 0.0)
        ur, lr_ = rows[unl], rows[lab]
        Lunl = (sp.diags(-1.0 / self.d[ur]) @ self.Lbar[ur]).tocsr()
        Llab = self.Lbar[lr_]
        if rows.size and np.all(np.diff(rows) == 1) and np.all(np.diff(lab) == 1) \
                and (lab.size == 0 or unl.size == 0 or unl[-1] < lab[0]):
            # contiguous colour (rows reordered by colour, unlabeled first): slices
            a, u, b = int(rows[0]), int(rows[0]) + unl.size, int(rows[-1]) + 1
            return _Block(Lunl, Llab, slice(a, u), slice(u, b), unl.size, lab.size,
                          J, S, pos, mask)
        return _Block(Lunl, Llab, ur, lr_, unl.size, lab.size, J, S, pos, mask)

    # ---------------------------------------------------------------- updates
    def _project(self, g: np.ndarray) -> np.ndarray:
        nrm = np.sqrt(np.einsum("ij,ij->i", g, g))
        over = nrm > self.b
        if np.any(over):
            g = g.copy()
            g[over] *= (self.b / nrm[over])[:, None]
        return g

    def _row_value(self, g, c, d, GJ, S, mask, pos=None) -> np.ndarray:
        """The row objective ``d||g||^2 + 2 g.c + gamma sum loss(a_j . g)`` (batched);
        ``a_j = S_j g_j`` with the partner rows ``GJ`` and signs ``S`` (0 where padded).
        Mixed kinds and weights (``pos``: the slots): ``sum_j w_j l_j(a_j . g)``."""
        z = S * np.einsum("btr,br->bt", GJ, g)
        if self.loss == "mixed":
            k = self.kind_slot[pos]
            tau = self.tau_slot[pos]
            lz = np.where(k == HINGE, huber_hinge(z, self.mu),
                          np.where(k == SQUARED_HINGE, np.maximum(0.0, 1.0 - z) ** 2,
                                   (tau - z) ** 2))
            return (d * np.einsum("br,br->b", g, g) + 2.0 * np.einsum("br,br->b", g, c)
                    + np.sum(np.where(mask, self.w_slot[pos] * lz, 0.0), axis=1))
        if self.loss == "hinge":
            lz = huber_hinge(z, self.mu)
        elif self.loss == "squared_hinge":
            lz = np.maximum(0.0, 1.0 - z) ** 2
        elif self.loss == "square":
            lz = (1.0 - z) ** 2
        else:
            lz = -z
        return (d * np.einsum("br,br->b", g, g) + 2.0 * np.einsum("br,br->b", g, c)
                + self.gamma * np.sum(np.where(mask, lz, 0.0), axis=1))

    def update_labeled(self, G: np.ndarray, rows: np.ndarray, C: np.ndarray, J, S, pos,
                       mask) -> np.ndarray:
        """New rows for labeled rows (batched); ``C`` = ``Lbar[rows] @ G``.

        ``A`` (rows ``a_j = T_ij g_j``) is never formed: with the partner rows ``GJ`` and
        the signs ``S`` (0 on padding), ``A A^T = S S^T * GJ GJ^T``, ``A x = S * GJ x``,
        ``A^T y = GJ^T (S y)``.
        """
        d = self.d[rows]
        if self.loss == "pcp":
            wts = None if self.gamma is not None else (
                np.where(mask, self.w_slot[pos], 0.0), self.wd[rows], self.td[rows])
            return self._update_pcp(G, rows, C, d, G[J] * mask[:, :, None],
                                    np.where(mask, self.tau_slot[pos], 0.0), mask, wts)
        GJ = G[J]  # (B, t, r); padded entries carry S = 0
        gam = self.gamma
        loss = self.loss
        t = S.shape[1]
        ii = np.arange(t)
        if loss == "mixed":
            return self._update_mixed(G, rows, C, d, GJ, S, pos, mask)
        if loss in ("hinge", "squared_hinge"):
            P = np.einsum("btr,bsr->bts", GJ, GJ) * (S[:, :, None] * S[:, None, :])
            q = S * np.einsum("btr,br->bt", GJ, C) + d[:, None]
            P[:, ii, ii] += np.where(mask, 0.0, 1.0)
            q = np.where(mask, q, 0.0)
            if loss == "squared_hinge":
                P[:, ii, ii] += (d / gam)[:, None]
                upper = np.inf
            else:
                upper = gam / 2.0
                if self.mu > 0:
                    P[:, ii, ii] += (2.0 * self.mu / gam) * d[:, None]
            a0 = np.where(mask, self.alpha[pos], 0.0)
            alpha = box_qp(P, q, upper, a0, tol=self.qp_tol, max_cd=QP_MAX_CD)
            alpha = np.where(mask, alpha, 0.0)
            self.alpha[pos[mask]] = alpha[mask]
            g = (np.einsum("bt,btr->br", alpha * S, GJ) - C) / d[:, None]
        elif loss == "square":
            # (d I + gam A^T A) g = x,  x = gam A^T 1 - C;  SMW on (d/gam I + A A^T)
            x = gam * np.einsum("bt,btr->br", S, GJ) - C
            W = np.einsum("btr,bsr->bts", GJ, GJ) * (S[:, :, None] * S[:, None, :])
            W[:, ii, ii] += (d / gam)[:, None]
            y = spd_solve(W, S * np.einsum("btr,br->bt", GJ, x))  # (B, t)
            g = (x - np.einsum("bt,btr->br", y * S, GJ)) / d[:, None]
        elif gam is not None:  # linear
            g = self._project((0.5 * gam * np.einsum("bt,btr->br", S, GJ) - C) / d[:, None])
        else:  # linear, weights per pair
            Sw = 0.5 * S * np.where(mask, self.w_slot[pos], 0.0)
            g = self._project((np.einsum("bt,btr->br", Sw, GJ) - C) / d[:, None])
        if loss in ("square", "linear"):
            return g  # closed forms: the exact row minimiser
        # QP losses: never accept a row that increases its own objective (guards against
        # a QP solved to qp_tol only)
        old = G[rows]
        vn = self._row_value(g, C, d, GJ, S, mask)
        vo = self._row_value(old, C, d, GJ, S, mask)
        worse = vn > vo + 1e-13 * (np.abs(vo) + 1.0)
        if np.any(worse):
            self.n_safeguard += int(worse.sum())
            g[worse] = old[worse]
        return g

    def _update_mixed(self, G, rows, C, d, GJ, S, pos, mask) -> np.ndarray:
        """Rows whose pairs mix hinge, squared hinge and squared losses, weights per pair.

        Each loss is ``w l(z) = w max_beta beta (tau - z) - w phi(beta)`` (hinge:
        ``0 <= beta <= 1``, ``phi = 0`` (Huber: ``mu beta^2 / 2``); squared hinge:
        ``beta >= 0``, ``phi = beta^2 / 4``; squared: ``beta`` free, ``phi = beta^2 / 4``).
        With ``alpha_j = w_j beta_j / 2`` the row's dual is the box QP of eq. 22 / 25 with a
        bound per entry: ``min 1/2 a'(P + D)a - a'q``, ``P = A A^T``, ``q_j = a_j.c_i +
        C_ii tau_j``, ``D_jj = C_ii / w_j`` for the quadratic ``phi`` (``2 mu C_ii / w_j`` for
        the smoothed hinge), ``0 <= a_j <= w_j / 2`` (hinge), ``a_j >= 0`` (squared hinge),
        ``a_j`` free (squared); ``g = (A^T a - c_i) / C_ii`` (eq. 21).
        """
        t = S.shape[1]
        ii = np.arange(t)
        k = np.where(mask, self.kind_slot[pos], -1)
        w = np.where(mask, self.w_slot[pos], 1.0)
        tau = np.where(mask, self.tau_slot[pos], 0.0)
        P = np.einsum("btr,bsr->bts", GJ, GJ) * (S[:, :, None] * S[:, None, :])
        q = np.where(mask, S * np.einsum("btr,br->bt", GJ, C) + d[:, None] * tau, 0.0)
        quad = (k == SQUARED_HINGE) | (k == SQUARE)
        add = np.where(quad, d[:, None] / w, 0.0) + np.where(mask, 0.0, 1.0)
        if self.mu > 0:
            add = add + np.where(k == HINGE, (2.0 * self.mu) * d[:, None] / w, 0.0)
        P[:, ii, ii] += add
        lower = np.where(k == SQUARE, -np.inf, 0.0)
        upper = np.where(k == HINGE, 0.5 * w, np.where(mask, np.inf, 0.0))
        a0 = np.where(mask, self.alpha[pos], 0.0)
        alpha = box_qp(P, q, upper, a0, lower=lower, tol=self.qp_tol, max_cd=QP_MAX_CD)
        alpha = np.where(mask, alpha, 0.0)
        self.alpha[pos[mask]] = alpha[mask]
        g = (np.einsum("bt,btr->br", alpha * S, GJ) - C) / d[:, None]
        old = G[rows]
        vn = self._row_value(g, C, d, GJ, S, mask, pos)
        vo = self._row_value(old, C, d, GJ, S, mask, pos)
        worse = ~(vn <= vo + 1e-13 * (np.abs(vo) + 1.0))
        if np.any(worse):
            self.n_safeguard += int(worse.sum())
            g[worse] = old[worse]
        return g

    # ---------------------------------------------------------------- P1 rows
    def _pcp_value(self, g, c, d, Bt, mask, wts=None) -> np.ndarray:
        """P1 row objective ``d s + 2 g.c + gamma/2 (s-1)^2 + gamma/2 sum (g.g_j - t_j)^2``.

        ``Bt`` is the pair ``(B, tgt)`` of partner rows and targets.  With weights
        ``wts = (w_j, w_d, t_d)``: ``d s + 2 g.c + w_d (s - t_d)^2 + sum w_j (g.g_j - t_j)^2``.
        """
        B, tgt = Bt
        sq = np.einsum("br,br->b", g, g)
        z = (B @ g[:, :, None])[:, :, 0]
        if wts is not None:
            wq, wd, td = wts
            return (d * sq + 2.0 * np.einsum("br,br->b", g, c) + wd * (sq - td) ** 2
                    + np.sum(np.where(mask, wq * (z - tgt) ** 2, 0.0), axis=1))
        return (d * sq + 2.0 * np.einsum("br,br->b", g, c)
                + 0.5 * self.gamma * ((sq - 1.0) ** 2
                                      + np.sum(np.where(mask, (z - tgt) ** 2, 0.0), axis=1)))

    def _update_pcp(self, G, rows, C, d, B, tgt, mask, wts=None) -> np.ndarray:
        """Exact global minimiser of the quartic P1 row subproblem (batched).

        With ``H = d I + (gamma/2) B^T B``, ``h = -c + (gamma/2) B^T t`` the row objective
        is ``g'Hg - 2h'g + (gamma/2)(||g||^2 - 1)^2`` + const.  Because the last term is a
        convex function of ``s = ||g||^2``, ``g`` is a global minimiser iff
        ``(H + mu I) g = h``, ``mu = gamma (s - 1)`` and ``H + mu I >= 0``.  On the span of
        the partners and ``h`` (``H = d I`` on its complement, where ``h`` vanishes),
        eigen-decompose ``H`` and solve the secular equation
        ``sum_k ht_k^2 / (lam_k + mu)^2 = 1 + mu / gamma`` for ``mu > -lam_min``
        (safeguarded Newton in a bracket); in the "hard case" (``ht`` has no weight on
        the smallest eigenvalue and the equation has no root there) ``mu = -lam_min`` and
        the missing norm goes along that eigenvector.

        Weights of their own (``wts = (w_j, w_d, t_d)``, per slot and per row): ``H = d I +
        B' diag(w) B``, ``h = -c_i + B' (w t)``, ``mu = 2 w_d (s - t_d)`` and the secular
        equation's right-hand side ``t_d + mu / (2 w_d)``.
        """
        nb, t = mask.shape
        r = G.shape[1]
        if wts is None:  # one weight: gamma / 2 on every term, t_d = 1
            gam = two_wd = self.gamma
            td = 1.0
            h = -C + 0.5 * gam * (tgt[:, None, :] @ B)[:, 0, :]
        else:
            wq, wd, td = wts
            two_wd = 2.0 * wd
            h = -C + ((wq * tgt)[:, None, :] @ B)[:, 0, :]

        def sub(a, sel):
            return a[sel] if np.ndim(a) else a

        M = np.concatenate([B.transpose(0, 2, 1), h[:, :, None]], axis=2)  # (nb, r, t+1)
        if t + 1 < r:
            Q, _ = np.linalg.qr(M)  # (nb, r, t+1): spans the partners and h
        else:
            Q = np.broadcast_to(np.eye(r), (nb, r, r))
        BQ = B @ Q
        k = Q.shape[2]
        if wts is None:
            Hq = 0.5 * gam * (BQ.transpose(0, 2, 1) @ BQ) + d[:, None, None] * np.eye(k)
        else:
            Hq = BQ.transpose(0, 2, 1) @ (wq[:, :, None] * BQ) + d[:, None, None] * np.eye(k)
        lam, W = np.linalg.eigh(Hq)  # ascending
        ht = (W.transpose(0, 2, 1) @ (Q.transpose(0, 2, 1) @ h[:, :, None]))[:, :, 0]
        if k < r:  # the complement of span(Q) has eigenvalue d <= lam (H >= d I)
            lam1 = np.minimum(lam[:, 0], d)
        else:
            lam1 = lam[:, 0]
        hn = np.sqrt(np.einsum("bk,bk->b", ht, ht))
        scale = hn + np.abs(lam1) + 1.0
        tiny = 1e-12 * scale
        bottom = (lam - lam1[:, None]) <= 1e-12 * scale[:, None]  # eigenvalues at lam_min
        weight_bottom = np.sqrt(np.sum(np.where(bottom, ht * ht, 0.0), axis=1))
        rest = ~bottom
        with np.errstate(divide="ignore", invalid="ignore"):
            s_rest = np.sum(np.where(rest, ht * ht / np.where(rest, lam - lam1[:, None], 1.0) ** 2,
                                     0.0), axis=1)
        hard = (weight_bottom <= tiny) & (s_rest <= td - lam1 / two_wd)
        mu = np.empty(nb)
        # regular case: root of f(mu) = sum ht^2/(lam+mu)^2 - 1 - mu/gam on (-lam1, inf)
        reg = ~hard
        if np.any(reg):
            lr, hr, l1 = lam[reg], ht[reg], lam1[reg]
            tdr, twr = sub(td, reg), sub(two_wd, reg)
            lo = -l1
            hi = np.maximum(-l1 + hn[reg], 0.0) + tiny[reg]
            m = hi.copy()
            for _ in range(200):
                den = lr + m[:, None]
                f = np.sum(hr * hr / den**2, axis=1) - tdr - m / twr
                fp = -2.0 * np.sum(hr * hr / den**3, axis=1) - 1.0 / twr
                lo = np.where(f > 0, m, lo)
                hi = np.where(f <= 0, m, hi)
                step = m - f / fp
                bad = ~((step > lo) & (step < hi))
                new = np.where(bad, 0.5 * (lo + hi), step)
                if np.all(np.abs(new - m) <= 1e-15 * (np.abs(m) + 1.0)):
                    m = new
                    break
                m = new
            mu[reg] = m
        mu[hard] = -lam1[hard]
        den = lam + mu[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            gt = np.where(np.abs(den) > 0, ht / den, 0.0)
        if np.any(hard):
            hb = np.flatnonzero(hard)
            gt[hb] = np.where(bottom[hb], 0.0, gt[hb])
            extra = np.sqrt(np.maximum(0.0, sub(td, hb) - lam1[hb] / sub(two_wd, hb) - s_rest[hb]))
            gh = (Q[hb] @ (W[hb] @ gt[hb][:, :, None]))[:, :, 0]
            # the missing norm along an eigenvector of lam_min: inside span(Q) if lam[0]
            # is the minimum, else any unit vector orthogonal to span(Q)
            in_span = bottom[hb, 0] & (lam[hb, 0] <= lam1[hb] + tiny[hb])
            v = (Q[hb] @ W[hb][:, :, 0:1])[:, :, 0]
            if np.any(~in_span):
                for jj in np.flatnonzero(~in_span):
                    e = np.random.default_rng(0).standard_normal(r)
                    Qi = Q[hb[jj]]
                    e -= Qi @ (Qi.T @ e)
                    v[jj] = e / np.linalg.norm(e)
            g = np.empty((nb, r))
            g[hb] = gh + extra[:, None] * v
            rg = np.flatnonzero(~hard)
            g[rg] = (Q[rg] @ (W[rg] @ gt[rg][:, :, None]))[:, :, 0]
        else:
            g = (Q @ (W @ gt[:, :, None]))[:, :, 0]
        old = G[rows]
        vn = self._pcp_value(g, C, d, (B, tgt), mask, wts)
        vo = self._pcp_value(old, C, d, (B, tgt), mask, wts)
        worse = ~(vn <= vo + 1e-13 * (np.abs(vo) + 1.0))
        if np.any(worse):
            self.n_safeguard += int(worse.sum())
            g[worse] = old[worse]
        return g

    def update_unlabeled(self, C: np.ndarray, rows: np.ndarray) -> np.ndarray:
        g = -C / self.d[rows][:, None]
        return self._project(g) if self.b is not None else g

    def sweep_block(self, G: np.ndarray, blk: _Block) -> None:
        """Update every row of one independent set at once (in place)."""
        if blk.n_unl:  # eq. 13 for all of them at once (independent rows)
            g = blk.Lunl @ G
            G[blk.unl_rows] = self._project(g) if self.b is not None else g
        if blk.n_lab:
            C = blk.Llab @ G
            G[blk.lab_rows] = self.update_labeled(G, blk.lab_rows, C, blk.J, blk.S,
                                                  blk.pos, blk.mask)

    def sweep_row(self, G: np.ndarray, i: int) -> None:
        """Sequential update of one row (the paper's inner loop)."""
        Lb = self.Lbar
        a, e = Lb.indptr[i], Lb.indptr[i + 1]
        c = Lb.data[a:e] @ G[Lb.indices[a:e]]
        if not self.labeled[i]:
            g = -c / self.d[i]
            if self.b is not None:
                nr = math.sqrt(float(g @ g))
                if nr > self.b:
                    g *= self.b / nr
            G[i] = g
            return
        pa, pe = self.P.indptr[i], self.P.indptr[i + 1]
        J = self.P.indices[pa:pe][None, :]
        S = self.P.data[pa:pe][None, :]
        pos = np.arange(pa, pe)[None, :]
        mask = np.ones_like(S, dtype=bool)
        G[i] = self.update_labeled(G, np.array([i]), c[None, :], J, S, pos, mask)[0]

    def jacobi_unlabeled(self, G: np.ndarray, U: np.ndarray, LU: sp.csr_matrix) -> None:
        """One step of eq. 17 on all unlabeled rows U at once (LU = Lbar[U])."""
        G[U] = self.update_unlabeled(LU @ G, U)

    # ---------------------------------------------------------------- certificate
    def _offdiag(self, w: np.ndarray) -> sp.csr_matrix:
        """``sum_p w_p (e_i e_j' + e_j e_i')`` over the pairs ``p = {i, j}``."""
        i, j = self.idx[:, 0], self.idx[:, 1]
        return sp.csr_matrix((np.concatenate([w, w]), (np.concatenate([i, j]),
                                                        np.concatenate([j, i]))),
                             shape=(self.n, self.n))

    def _scale_to_psd(self, M: sp.spmatrix) -> float | None:
        """The largest certified ``t`` in ``[0, 1]`` with ``L - t M`` PSD (``None``: no
        eigenvalue).  ``h(t) = lambda_min(L - t M)`` is concave, ``h(0) = lambda_min(L)``:
        one Newton step from ``t = 1``, then the chord from 0 certifies a root bracket."""
        if self._l0 is None:
            e0 = lambda_min(self.L)
            if e0 is None:
                return None
            self._l0 = e0[0]
        l0 = self._l0
        if l0 <= 0:
            return None
        e1 = lambda_min(self.L - M)
        if e1 is None:
            return None
        h1, v = e1
        if h1 >= 0:
            return 1.0
        vMv = float(v @ (M @ v))
        tn = 1.0 + h1 / vMv if vMv > 0 else 0.0  # the tangent's root (h1 < 0)
        tn = min(max(tn, 0.0), 1.0)
        if tn > 0:
            e2 = lambda_min(self.L - tn * M)
            if e2 is None:
                return None
            h2 = e2[0]
            if h2 >= 0:
                return tn
            return tn * l0 / (l0 - h2)
        return l0 / (l0 - h1)

    def _betas(self, G: np.ndarray, z: np.ndarray, mu: float) -> np.ndarray:
        """The dual variable ``beta_p`` of every pair's loss at ``G`` (margins ``z``).

        Each loss is ``max_beta beta (tau - z) - phi(beta)``: ``beta = -l'(z)`` for the
        squared (``2 (tau - z)``) and squared hinge (``2 max(0, 1 - z)``) losses and the
        smoothed hinge (``clip((1 - z) / mu, 0, 1)``); for the exact hinge, the row QPs'
        multipliers ``alpha = w beta / 2`` of the pair's two slots, averaged.
        """
        k = self.kind
        beta = np.where(k == SQUARE, 2.0 * (self.tau - z), 2.0 * np.maximum(0.0, 1.0 - z))
        h = k == HINGE
        if np.any(h):
            if mu > 0:
                bh = np.clip((1.0 - z) / mu, 0.0, 1.0)
            else:  # the row QPs' multipliers alpha = w s / 2, both slots averaged
                bh = np.clip(self.alpha[self.pair_slots].sum(axis=1) / self.w, 0.0, 1.0)
            beta = np.where(h, bh, beta)
        return beta

    def fitted_multipliers(self, G: np.ndarray, s0: np.ndarray) -> np.ndarray | None:
        """Hinge multipliers ``0 <= s <= 1`` that best satisfy stationarity ``Z(s) G = 0``.

        ``(L G)_i = sum_{j in T(i)} (w_ij / 2) s_ij T_ij g_j`` for the labeled rows (the
        unlabeled ones hold no ``s``): a bounded linear least-squares problem with one
        column per hinge pair (``2 r`` nonzeros), solved through its normal equations by
        :func:`box_qp`.  The other pairs (a problem mixing losses) keep their ``s0`` and
        move to the right-hand side.  Returns every pair's multiplier (``s0`` off the
        hinge pairs); ``None`` when there are more than ``FIT_MAX_PAIRS`` hinge pairs.
        """
        hp = np.flatnonzero(self.kind == HINGE)
        m = hp.size
        if m == 0 or m > FIT_MAX_PAIRS:
            return None
        r = G.shape[1]
        lab = np.flatnonzero(self.labeled)
        where = -np.ones(self.n, dtype=np.int64)
        where[lab] = np.arange(lab.size)
        i, j = self.idx[hp, 0], self.idx[hp, 1]
        ar = np.arange(r)
        rows = np.concatenate([(where[i][:, None] * r + ar).ravel(),
                               (where[j][:, None] * r + ar).ravel()])
        cols = np.tile(np.repeat(np.arange(m), r), 2)
        wT = (0.5 * self.w[hp] * self.T[hp])[:, None]
        vals = np.concatenate([(wT * G[j]).ravel(), (wT * G[i]).ravel()])
        A = sp.csr_matrix((vals, (rows, cols)), shape=(lab.size * r, m))
        R = self.L @ G
        if m < self.idx.shape[0]:  # the other pairs' part of Z(s) G, fixed
            o = self.kind != HINGE
            R = R - self._offdiag(np.where(o, 0.5 * self.w * self.T * s0, 0.0)) @ G
        b = R[lab].ravel()
        # the normal equations, a box QP solved by the same active-set method as the rows
        H = (A.T @ A).toarray()
        q = A.T @ b
        x = box_qp(H[None], q[None], 1.0, np.clip(s0[hp], 0.0, 1.0)[None], tol=1e-10,
                   max_cd=50)[0]
        x = np.clip(x, 0.0, 1.0)
        if not np.all(np.isfinite(x)):
            return None
        out = np.array(s0, dtype=float)
        out[hp] = x
        return out

    def _margin_certificate(self, z, trLK, beta, mu) -> Certificate | None:
        """The dual bound of the pair losses from the multipliers ``beta`` (any mix of
        hinge, squared hinge and squared losses; see :meth:`certificate`)."""
        w, k = self.w, self.kind
        t = self._scale_to_psd(self._offdiag(0.5 * w * self.T * beta))
        if t is None:
            return None
        h = k == HINGE
        lz = np.where(h, np.maximum(0.0, 1.0 - z),
                      np.where(k == SQUARED_HINGE, np.maximum(0.0, 1.0 - z) ** 2, (self.tau - z) ** 2))
        primal = trLK + float(np.sum(w * lz))
        # D(t') = sum w (t' beta tau - phi(t' beta)), phi = beta^2 / 4 off the hinge: concave
        # in the multiple t'; its best value up to the certified t
        a = float(np.sum(w * beta * self.tau))
        bq = float(np.sum(np.where(h, 0.0, w * beta * beta)))
        tt = min(t, 2.0 * a / bq) if bq > 0 else t
        tt = max(tt, 0.0)
        dual = tt * a - 0.25 * tt * tt * bq
        gap = primal - dual
        sm = gap
        if mu > 0 and np.any(h):  # the smoothed problem: Huber loss, phi(s) = mu s^2 / 2
            psm = trLK + float(np.sum(w * np.where(h, huber_hinge(z, mu), lz)))
            tb = tt * beta
            sm = psm - (dual - 0.5 * mu * float(np.sum(np.where(h, w * tb * tb, 0.0))))
        return Certificate(primal, dual, gap, _rel_gap(gap, primal, dual),
                           _rel_gap(sm, primal, dual))

    def certificate(self, G: np.ndarray, mu: float = 0.0) -> Certificate | None:
        """A feasible point of the dual of the convex problem in ``K`` built from ``G``.

        With ``w l(z) = w max_s s (tau - z) - w phi(s)`` per pair (hinge: ``0 <= s <= 1``,
        ``phi = 0``; squared hinge: ``s >= 0``, ``phi = s^2/4``; squared: ``phi = s^2/4``,
        the conjugates of the losses), the dual is ``max sum_p w_p (s_p tau_p - phi(s_p))``
        s.t. ``L - sum_p (w_p/2) s_p T_p (e_i e_j' + e_j e_i') >= 0``.  ``s`` comes from the
        iterate (the loss derivative, or the QP multipliers of the exact hinge) and is
        scaled by the largest certified ``t`` that makes the matrix PSD.  Linear loss:
        ``K_ii <= b^2`` gets multipliers ``nu`` from the row KKT conditions, shifted by
        ``-lambda_min``.  Soft PCP: ``s = 2 w (K_p - t_p)`` with a diagonal shift.
        ``primal - dual`` bounds ``primal - optimum``.  ``None`` when an eigenvalue could
        not be computed.
        """
        n = self.n
        i, j = self.idx[:, 0], self.idx[:, 1]
        Kp = np.einsum("ij,ij->i", G[i], G[j])
        trLK = float(np.sum(G * (self.L @ G)))
        if self.loss == "pcp":
            w, wd, td, tp = self.w, self.wd, self.td, self.tau
            s = 2.0 * w * (Kp - tp)
            sd = 2.0 * wd * (np.einsum("ij,ij->i", G, G) - td)
            primal = trLK + float(np.sum(s * s / (4.0 * w))) + float(np.sum(sd * sd / (4.0 * wd)))
            e = lambda_min(self.L + sp.diags(sd) + self._offdiag(0.5 * s))
            if e is None:
                return None
            sd = sd + max(0.0, -e[0])
            dual = (-float(s @ tp) - float(sd @ td) - float(np.sum(s * s / (4.0 * w)))
                    - float(np.sum(sd * sd / (4.0 * wd))))
            gap = primal - dual
            rel = _rel_gap(gap, primal, dual)
            return Certificate(primal, dual, gap, rel, rel)
        z = self.T * Kp
        if self.loss == "linear":
            primal = trLK - float(np.sum(self.w * z))
            Z0 = self.L - self._offdiag(0.5 * self.w * self.T)
            ZG = Z0 @ G
            nrm = np.einsum("ij,ij->i", G, G)
            nu = np.maximum(0.0, -np.einsum("ij,ij->i", ZG, G) / np.maximum(nrm, 1e-300))
            e = lambda_min(Z0 + sp.diags(nu))
            if e is None:
                return None
            dual = -self.b ** 2 * (float(nu.sum()) + n * max(0.0, -e[0]))
            gap = primal - dual
            rel = _rel_gap(gap, primal, dual)
            return Certificate(primal, dual, gap, rel, rel)
        s = self._betas(G, z, mu)
        s_fit = self.fitted_multipliers(G, s) if np.any(self.kind == HINGE) else None
        if s_fit is not None:
            c_fit = self._margin_certificate(z, trLK, s_fit, mu)
            c_own = self._margin_certificate(z, trLK, s, mu)
            if c_fit is None or c_own is None:
                return c_fit or c_own
            if mu > 0:  # keep the smoothed gap of the loss derivative (phase switch)
                c_fit.smoothed_rel_gap = c_own.smoothed_rel_gap
            return c_fit if c_fit.gap <= c_own.gap else c_own
        return self._margin_certificate(z, trLK, s, mu)

    def escape(self, G: np.ndarray, mu: float) -> tuple[np.ndarray, float] | None:
        """A descent step out of a non-optimal stationary point of the factored problem.

        BCD on ``G`` can stop at a point that is stationary in ``G`` but not optimal in
        ``K`` (the factorisation is non-convex).  There the dual matrix ``Z(s)`` built from
        the loss derivative ``s`` has a negative eigenvalue; its eigenvector ``v`` is a
        descent direction ``K + t v v'``.  In the factor: ``G + beta v w'``, ``w`` the
        right singular vector of ``G``'s smallest singular value, ``beta`` the best of a
        few halvings.  Returns ``(G_new, f_new)`` or ``None`` (no descent found).
        Smooth losses and the smoothed hinge (``mu > 0``) only.
        """
        i, j = self.idx[:, 0], self.idx[:, 1]
        Kp = np.einsum("ij,ij->i", G[i], G[j])
        if self.loss == "pcp":
            Z = (self.L + sp.diags((2.0 * self.wd) * (np.einsum("ij,ij->i", G, G) - self.td))
                 + self._offdiag(self.w * (Kp - self.tau)))
        elif self.loss == "linear":
            return None  # the ball constraint: BCD's projection handles the boundary
        else:
            if mu <= 0 and np.any(self.kind == HINGE):
                return None
            s = self._betas(G, self.T * Kp, mu)
            Z = self.L - self._offdiag(0.5 * self.w * self.T * s)
        e = lambda_min(Z)
        if e is None or e[0] >= 0:
            return None
        v = e[1] / np.linalg.norm(e[1])
        _, _, Wt = np.linalg.svd(G, full_matrices=False)
        w = Wt[-1]
        f0 = self.objective(G, mu)
        beta0 = float(np.sqrt(np.max(np.einsum("ij,ij->i", G, G))))
        best = None
        for k in range(16):
            for sgn in (1.0, -1.0):
                Gt = G + (sgn * beta0 * 0.5 ** k) * np.outer(v, w)
                if self.b is not None:
                    Gt = self._project(Gt)
                ft = self.objective(Gt, mu)
                if ft < f0 and (best is None or ft < best[1]):
                    best = (Gt, ft)
            if best is not None:
                break
        return best

    def stretch(self, G: np.ndarray, G_new: np.ndarray, f_new: float, mu: float = 0.0,
                factors: tuple[float, ...] = STRETCH) -> tuple[np.ndarray, float, float]:
        """The best of ``G + beta (G_new - G)`` over ``beta`` in ``(1,) + factors`` (increasing;
        stops at the first that does not lower the objective), projected onto the ball for
        the linear loss.  Returns ``(G', f(G'), beta)``.

        Near the saddle ``K = 0`` of the factored problem the sweep is close to a linear
        map ``G -> M G`` whose dominant eigenvalue is barely above 1 on a large graph (the
        smooth modes of L): the amplitude grows a few percent per sweep for hundreds of
        sweeps, and Anderson acceleration, which extrapolates to the fixed point, points
        back at the saddle.  ``beta M - (beta - 1) I`` has the same eigenvectors with the
        growth multiplied by ``beta``; the objective decides.
        """
        D = G_new - G
        if self.b is not None:  # the ball: project every candidate, evaluate it afresh
            best, fb, bb = G_new, f_new, 1.0
            for beta in factors:
                cand = self._project(G + beta * D)
                fc = self.objective(cand, mu)
                if not fc < fb:
                    break
                best, fb, bb = cand, fc, beta
            return best, fb, bb
        # K(beta) is quadratic in beta: two products with L serve every beta
        i, j = self.idx[:, 0], self.idx[:, 1]
        LG, LD = self.L @ G, self.L @ D
        a0, a1, a2 = float(np.sum(G * LG)), float(np.sum(D * LG)), float(np.sum(D * LD))
        Gi, Gj, Di, Dj = G[i], G[j], D[i], D[j]
        p0 = np.einsum("ij,ij->i", Gi, Gj)
        p1 = np.einsum("ij,ij->i", Gi, Dj) + np.einsum("ij,ij->i", Di, Gj)
        p2 = np.einsum("ij,ij->i", Di, Dj)
        pcp = self.loss == "pcp"
        if pcp:
            d0, d1, d2 = (np.einsum("ij,ij->i", G, G), 2.0 * np.einsum("ij,ij->i", G, D),
                          np.einsum("ij,ij->i", D, D))
        fb, bb = f_new, 1.0
        for beta in factors:
            fc = self._value(p0 + beta * (p1 + beta * p2), a0 + beta * (2.0 * a1 + beta * a2),
                             d0 + beta * (d1 + beta * d2) if pcp else None, mu)
            if not fc < fb:
                break
            fb, bb = fc, beta
        return (G_new, f_new, 1.0) if bb == 1.0 else (G + bb * D, fb, bb)

    def objective(self, G: np.ndarray, mu: float = 0.0) -> float:
        """The problem's objective at ``K = G G^T`` (with the Huber-smoothed hinge when
        ``mu > 0``)."""
        Kp = np.einsum("ij,ij->i", G[self.idx[:, 0]], G[self.idx[:, 1]])
        trLK = float(np.sum(G * (self.L @ G)))
        dg = np.einsum("ij,ij->i", G, G) if self.loss == "pcp" else None
        return self._value(Kp, trLK, dg, mu)

    def _value(self, Kp: np.ndarray, trLK: float, dg: np.ndarray | None, mu: float) -> float:
        """The objective from the pair entries ``K_p``, ``tr(L K)`` and (soft PCP) ``K_ii``."""
        if self.loss == "pcp":
            res = Kp - self.tau
            if self.gamma is not None:
                dd = dg - 1.0
                return trLK + 0.5 * self.gamma * float(res @ res + dd @ dd)
            dd = dg - self.td
            return trLK + float(np.sum(self.w * res * res)) + float(np.sum(self.wd * dd * dd))
        z = self.T * Kp
        if self.gamma is None:
            k = self.kind
            hinge = huber_hinge(z, mu) if mu > 0 else np.maximum(0.0, 1.0 - z)
            lz = np.where(k == HINGE, hinge,
                          np.where(k == SQUARED_HINGE, np.maximum(0.0, 1.0 - z) ** 2,
                                   np.where(k == SQUARE, (self.tau - z) ** 2, -z)))
            return trLK + float(np.sum(self.w * lz))
        lz = huber_hinge(z, mu) if (self.loss == "hinge" and mu > 0) else _MARGIN_LOSS[self.loss](z)
        return trLK + self.gamma * float(np.sum(lz))


# ------------------------------------------------------------------------- the method
class BCDKL(IterativeSolver):
    """``"bcd"``: block coordinate descent for NPKL (Hu & Kwok 2015, Algorithm 1) and soft PCP (P1).

    Applies to any declaration :func:`_match` reads (per-pair losses of mixed kinds and
    weights, squared losses on ``K_ii``, the bound ``K_ii <= b^2``); the others get its reason.

    Options
    -------
    rank : int, optional
        Rank r of ``K = G G^T``; default the paper's rule ``r(r+1)/2 <= m``.
    order : {"color", "sequential"}
        ``"color"`` (default): greedy colouring of the graph of L's nonzeros and the
        pairs; all rows of one colour are updated at once.  ``"sequential"``:
        Algorithm 1's loop (random order over L, then U), one row at a time.
    unlabeled : {"gauss_seidel", "block"}
        Rows without pairs updated one by one by eq. 13 (default) or all at once by
        one Jacobi step of eq. 17 per sweep.
    gap_tol : float
        Stop with status ``converged`` when the duality gap certifies
        ``(f(G) - f*) / |f*| <= gap_tol`` (:meth:`BCDEngine.certificate`).
    eps : float
        Relative change ``||G_t - G_{t-1}||_F / ||G_t||_F`` below which the gap is
        checked at once (besides its fixed schedule) and, in the last phase, an escape
        from a non-optimal stationary point is tried.  A small change alone never means
        ``converged``.
    max_iter : int
        Sweeps cap (``itermax``).
    init : ndarray (n, r), optional
        Starting factor; default Gaussian ``N(0, 1/r)`` (projected onto the ball for
        the linear loss).
    record : bool
        Record P6 after every sweep in ``history["objective"]`` (one ``L @ G``).
    qp_tol : float
        KKT tolerance of the small QPs.
    smoothing : "auto", None or float
        Hinge loss only.  Plain BCD (``None``, the paper's algorithm) stalls at
        coordinate-wise minima of the non-smooth hinge; ``"auto"`` (= 0.1) runs BCD on the
        Huber-smoothed hinge with ``mu = smoothing, smoothing/10, ... >= mu_min``, then on
        the exact hinge.  A phase ends when the smoothed objective's decrease per sweep
        (over 5 sweeps) is below ``PHASE_STALL`` x the smoothing bias at G, or its
        certified gap is below ``PHASE_CERT`` x the hinge's.
    mu_min : float
        Smallest smoothing before the exact phase.
    accelerate : "anderson" or None
        Anderson acceleration of the sweep (default; colours, or rows, in one fixed
        random order), safeguarded by the objective; a rejected extrapolation is replaced
        by the best of ``G + beta (G_new - G)``, ``beta`` in :data:`STRETCH`, when it lowers
        the objective (smooth losses and the smoothed hinge).  ``None``: the paper's plain
        sweeps with a fresh random order each sweep.
    anderson_depth : int
        Number of past sweeps the acceleration combines.
    """

    name = "bcd"
    formulation_name = "factored K = G G^T (BCD)"
    grows_rank = True
    defaults = {
        "rank": None,
        "order": "color",
        "unlabeled": "gauss_seidel",
        "gap_tol": 1e-3,
        "eps": 1e-5,
        "max_iter": 1000,
        "init": None,
        "record": True,
        "qp_tol": 1e-12,
        "smoothing": "auto",
        "mu_min": 1e-6,
        "accelerate": "anderson",
        "anderson_depth": 5,
    }
    parameter_constraints = {
        "rank": [Rank(), None],
        "order": [StrOptions(ORDERS)],
        "unlabeled": [StrOptions(UNLABELED)],
        "gap_tol": [Interval(Real, 0, None, closed="neither")],
        "eps": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "init": [FactorInit(), None],
        "record": [Boolean()],
        "qp_tol": [Interval(Real, 0, None, closed="neither")],
        "smoothing": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither"), None],
        "mu_min": [Interval(Real, 0, None, closed="neither")],
        "accelerate": [StrOptions({"anderson"}), None],
        "anderson_depth": [Interval(Integral, 1, 50, closed="both")],
    }
    #: smoothing continuation: mu shrinks by MU_FACTOR when the average decrease of the
    #: smoothed objective over 5 sweeps is below PHASE_STALL x the smoothing bias at G,
    #: or the certified smoothed gap is below PHASE_CERT x the hinge's
    MU_FACTOR = 10.0
    PHASE_STALL = 0.001
    PHASE_CERT = 0.1
    PHASE_CHANGE = False  # also end a phase when the change is below eps (off)
    #: step out of non-optimal stationary points of the factored problem when stalled
    ESCAPE = True
    #: the exact hinge (mu = 0): stop when this many sweeps in a row left the factor
    #: unchanged (to FROZEN_CHANGE) and a certificate computed since then did not pass --
    #: every row's update is then its own fixed point, whatever the order, and nothing else moves it
    #: (there is no escape on the exact hinge); the status stays ``max_iter``
    FROZEN_SWEEPS = 10
    #: a sweep whose relative change of the factor is at most this counts as unchanged (the
    #: round-off of the row QPs: a 500-point digits hinge instance crawled at 1e-13 to 3e-13
    #: per sweep from sweep 500 to max_iter = 1000, its objective fixed to 10 digits)
    FROZEN_CHANGE = 1e-11
    #: eigenvalue problems assumed in one duality-gap certificate before the first has been
    #: timed (the dual scaling's two or three and, on the hinge, the fitted multipliers')
    CERT_EIGS = 5
    #: a run whose mean K_ii passes this is stopped (numerical_error) and tested for a
    #: direction of unbounded descent (base.diverging): far above base.DIVERGED_SCALE,
    #: because the row updates need some sweeps at that scale before the factor's direction
    #: settles (a 10-point problem passed 1e10 at sweep 2, still off the recession cone)
    DIVERGED_STOP = 1e60

    def applies_to(self, problem: Any) -> str | None:
        view = _match(problem.declaration)
        return view if isinstance(view, str) else None

    def estimate_memory(self, problem: Any, opts: dict[str, Any]) -> int | None:
        """Peak bytes: the factored working set of :meth:`IterativeSolver.estimate_memory`
        (with a quarter's slack), plus the larger of the duality-gap certificate's eigensolve
        (dense up to :data:`DENSE_EIG_MAX` points, Lanczos with 64 vectors above) and, when
        the rank grows, :func:`kernelforms.certificate.escape`'s; plus the hinge multipliers'
        ``m x m`` fit (up to :data:`FIT_MAX_PAIRS` pairs).  Before the certificate was
        counted, 2 MB was accepted and the dense check added 73 MiB."""
        from . import memory as mm

        base = super().estimate_memory(problem, opts)
        if base is None:
            return None
        try:
            n = int(problem.n)
            decl = problem.declaration
            rows = int(decl.n_loss_rows + decl.n_constraint_rows)
            hinge = sum(t.map.size for t in decl.losses if not t.loss.smooth)
        except (AttributeError, TypeError, ValueError):
            return None
        cert = mm.dense_eig_bytes(n) if n <= DENSE_EIG_MAX else mm.lanczos_bytes(n, 2 * 64)
        if opts.get("rank") is None:
            cert = max(cert, mm.certificate_bytes(n, rows))
        fit = 5 * mm.F * hinge * hinge if 0 < hinge <= FIT_MAX_PAIRS else 0
        return int(1.25 * base) + cert + fit

    def _check(self, problem: Any, opts: dict) -> dict:
        """The checks that need the problem or two options (the rest is declared)."""
        n = problem.n
        opts["rank"] = int(problem.default_rank() if opts["rank"] is None else opts["rank"])
        if opts["init"] is not None:
            G0 = np.asarray(opts["init"], dtype=float)
            if G0.shape != (n, opts["rank"]):
                raise OptionError(f"The 'init' option of bcd must be a finite array of shape "
                                  f"(n, rank) = ({n}, {opts['rank']}). Got shape {G0.shape} "
                                  f"instead (pass rank={G0.shape[1]} or a matching init).")
        return opts

    def _solve(self, problem: Any, opts: dict, rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        opts = self._check(problem, opts)
        n, r = problem.n, opts["rank"]
        view = _match(problem.declaration)  # applies_to checked it: a view
        loss = view.mode
        eng = BCDEngine(view, qp_tol=opts["qp_tol"])
        if opts["init"] is None:
            G = rng.standard_normal((n, r)) / math.sqrt(r)
        else:
            G = np.array(opts["init"], dtype=float)
        if eng.b is not None:
            G = eng._project(G)
        block = opts["unlabeled"] == "block"
        U = np.flatnonzero(~eng.labeled)
        Lab = np.flatnonzero(eng.labeled)
        color_time = color_cpu = 0.0
        blocks: list[_Block] = []
        perm = None
        if opts["order"] == "color":
            # colour, then renumber the rows so that every colour is a contiguous slice
            # (unlabeled rows first): the updates become slice writes, the row blocks of
            # L contiguous CSR slices (the reordering of Hu & Kwok 2015's conclusion)
            cc0 = time.process_time()
            colour, color_time = eng.coloring(Lab if block else None)
            color_cpu = time.process_time() - cc0
            ncol = int(colour.max()) + 1 if colour.size and colour.max() >= 0 else 0
            colour = np.where(colour < 0, ncol, colour)
            perm = np.lexsort((eng.labeled, colour))
            inv = np.empty(n, dtype=np.int64)
            inv[perm] = np.arange(n)
            eng = BCDEngine(view.permuted(perm, inv), qp_tol=opts["qp_tol"])
            G = np.ascontiguousarray(G[perm])
            cs = colour[perm]
            starts = np.searchsorted(cs, np.arange(ncol + 2))
            blocks = [eng.make_block(np.arange(starts[c], starts[c + 1])) for c in range(ncol)]
            U = np.arange(starts[ncol], n)
            Lab = np.arange(0, starts[ncol])
        LU = eng.Lbar[U] if block else None
        accel = opts["accelerate"] == "anderson"
        aa = Anderson(int(opts["anderson_depth"]), incremental=False) if accel else None
        # a fixed map for the acceleration: one random order drawn once
        fixed = (rng.permutation(len(blocks)), rng.permutation(Lab), rng.permutation(U)) \
            if accel else None

        def sweep(G: np.ndarray) -> None:
            if opts["order"] == "color":
                for c in (fixed[0] if accel else rng.permutation(len(blocks))):
                    eng.sweep_block(G, blocks[c])
            else:
                for i in (fixed[1] if accel else rng.permutation(Lab)):
                    eng.sweep_row(G, int(i))
                if not block:
                    for i in (fixed[2] if accel else rng.permutation(U)):
                        eng.sweep_row(G, int(i))
            if block and U.size:
                eng.jacobi_unlabeled(G, U, LU)

        # smoothing schedule (hinge only): mu0, mu0/10, ... >= mu_min, then the exact hinge
        sm = opts["smoothing"]
        if sm == "auto":
            sm = 0.1 if view.has_hinge else None
        mus = [0.0]
        if sm is not None and view.has_hinge:
            mus = [float(sm)]
            while mus[-1] / self.MU_FACTOR >= opts["mu_min"] * (1 - 1e-12):
                mus.append(mus[-1] / self.MU_FACTOR)
            mus.append(0.0)
        phase = 0
        eng.mu = mus[0]
        log = self.iteration_log(
            opts, header=f"n = {n}, rank = {r}, loss = {'/'.join(problem.declaration.loss_names())}"
                         f" ({loss} rows), {len(blocks)} colours, "
                         f"gap_tol = {opts['gap_tol']:g}", extra=("mu", "rel. gap"),
            residual="change")
        hist: dict[str, list] = {"objective": [], "surrogate": [], "mu": [], "time": [],
                                 "sweep_time": [], "sweep_cpu": [], "change": [],
                                 "gap": [], "accelerated": []}
        t_start = time.perf_counter()
        status, message, it = Status.MAX_ITER, "", 0
        max_iter = int(opts["max_iter"])
        gap_tol, eps = float(opts["gap_tol"]), float(opts["eps"])
        change = math.inf
        cert: Certificate | None = None
        cert_time, cert_spent, n_cert, no_cert, last_cert = 0.0, 0.0, 0, False, 0
        # an eigenvalue problem of size n costs ~(n / 250)^2 sweeps' work (dense, measured
        # at n = 40 .. 2500; Lanczos above): keep it to a few percent of the run
        cert_every = int(min(50, max(1, (n // 250) ** 2)))
        n_escape = n_fail = n_stretched = 0
        f_cur = eng.objective(G, eng.mu) if accel else math.nan
        f_phase: list[float] = []  # the smoothed objective over the current phase
        frozen = 0  # sweeps in a row that left G unchanged (to FROZEN_CHANGE) on the exact hinge
        while it < max_iter:
            it += 1
            mu = eng.mu
            ts = time.perf_counter()
            cs0 = time.process_time()
            G_new = G.copy()
            sweep(G_new)
            accepted = False
            if accel:
                f_new = eng.objective(G_new, mu)
                cand = aa.candidate(G, G_new)
                if cand is not None:
                    if eng.b is not None:
                        cand = eng._project(cand)
                    f_c = eng.objective(cand, mu)
                    if f_c < f_new:
                        G_new, f_new, accepted = cand, f_c, True
                    else:  # a rejected extrapolation: restart the memory from here
                        aa.reset()
                if not accepted and (mu > 0 or not view.has_hinge):
                    # near a saddle (K ~ 0) the sweep is a slow power iteration that
                    # Anderson extrapolates back towards the saddle: try longer steps along
                    # the sweep's own step instead (not on the exact hinge, whose kinks a
                    # long step can land on, where the row updates cannot move)
                    G_new, f_new, beta = eng.stretch(G, G_new, f_new, mu)
                    if beta > 1.0:
                        accepted = True
                        n_stretched += 1
                f_cur = f_new
            sweep_wall = time.perf_counter() - ts
            sweep_cpu = time.process_time() - cs0
            # norms without BLAS (a threaded BLAS on a loaded machine costs more
            # than the sweep itself)
            D = G_new - G
            change = math.sqrt(float(np.einsum("ij,ij->", D, D)) /
                               max(float(np.einsum("ij,ij->", G_new, G_new)), 1e-300))
            G = G_new
            frozen = frozen + 1 if (change <= self.FROZEN_CHANGE and mu == 0.0
                                    and phase == len(mus) - 1) else 0
            hist["sweep_time"].append(sweep_wall)
            hist["sweep_cpu"].append(sweep_cpu)
            hist["change"].append(change)
            hist["mu"].append(mu)
            hist["accelerated"].append(accepted)
            f_exact = math.nan
            if opts["record"]:
                f_exact = eng.objective(G)
                hist["objective"].append(f_exact)
                hist["surrogate"].append((f_cur if accel else eng.objective(G, mu))
                                         if mu > 0 else f_exact)
            hist["time"].append(time.perf_counter() - t_start)
            if not np.all(np.isfinite(G)):
                hist["gap"].append(math.nan)
                status, message = Status.NUMERICAL_ERROR, f"non-finite factor at sweep {it}"
                break
            if float(np.einsum("ij,ij->", G, G)) > self.DIVERGED_STOP * n:
                # the factor leaves every bounded scale: stop while it is finite, so that the
                # run's recession test (base.diverging) can name the direction
                hist["gap"].append(math.nan)
                status, message = (Status.NUMERICAL_ERROR, f"the factor is diverging (mean K_ii "
                                   f"above {self.DIVERGED_STOP:g}) at sweep {it}")
                break
            # the certificate: every cert_every sweeps (a fixed schedule, so that a seed
            # reproduces the run), and when the change is below eps (at most every 10)
            now = time.perf_counter()
            # (spaced out further after every 10 certificates that did not pass)
            every = min(50, cert_every * (1 + n_fail // 10))
            # its cost: the last one's, or before the first, CERT_EIGS eigenvalue problems of
            # ~(n / 250)^2 sweeps each (a certificate started near the deadline overran a
            # 2 s limit by 9-39 s at 2,000 points)
            cert_cost = cert_time if n_cert else \
                self.CERT_EIGS * max(1.0, (n / 250.0) ** 2) * (now - t_start) / it
            due = (it - last_cert >= every or (change < eps and it - last_cert >= 10)) \
                and not (deadline is not None and now + cert_cost > deadline)
            rel_gap = math.nan
            if due:
                c0 = time.perf_counter()
                cert = eng.certificate(G, mu)
                last_cert = it
                cert_time = time.perf_counter() - c0
                cert_spent += cert_time
                n_cert += 1
                if cert is None:
                    no_cert = True
                else:
                    rel_gap = cert.rel_gap
                    n_fail += cert.rel_gap > gap_tol
                    if cert.rel_gap <= gap_tol:
                        hist["gap"].append(rel_gap)
                        log.row(it, objective=cert.primal, residual=change, rank=r, mu=mu,
                                **{"rel. gap": rel_gap}, force=True)
                        status = Status.CONVERGED
                        message = (f"duality gap certifies (f - f*)/|f*| <= {rel_gap:.2e} "
                                   f"<= gap_tol = {gap_tol:g} after {it} sweeps")
                        break
            hist["gap"].append(rel_gap)
            log.row(it, objective=f_exact if opts["record"] else f_cur, residual=change,
                    rank=r, mu=mu, **{"rel. gap": rel_gap})
            # next smoothing phase: the smoothed problem is solved well compared with
            # the smoothing error (by the certificate, or by a per-sweep decrease below
            # PHASE_STALL x the smoothing bias at G).  A small change alone is no sign:
            # at small mu the iterates crawl long before the phase is solved
            stalled = False
            if mu > 0:
                f_phase.append(f_cur if accel else eng.objective(G, mu))
                if len(f_phase) > 5:
                    # the smoothing bias at G: hinge minus Huber
                    bias = (eng.objective(G) if not opts["record"] else f_exact) - f_phase[-1]
                    stalled = ((f_phase[-6] - f_phase[-1]) / 5.0 <= self.PHASE_STALL * bias
                               # a bias far below gap_tol: nothing left to smooth
                               or bias <= 0.01 * gap_tol * abs(f_phase[-1]))
            # a stall (or, in the last phase, a small change without a certificate) may be
            # a non-optimal stationary point of the factored problem: step out of it
            late = deadline is not None and time.perf_counter() + cert_cost > deadline
            if self.ESCAPE and not late and (stalled or (phase == len(mus) - 1 and change < eps
                                                         and due and not math.isnan(rel_gap))):
                esc = eng.escape(G, mu)
                if esc is not None:
                    G, f_cur = esc
                    n_escape += 1
                    f_phase = []
                    stalled = False
                    if accel:
                        aa.reset()
                    log.message(f"sweep {it}: left a non-optimal stationary point "
                                f"(negative eigenvalue of the dual matrix)")
            if phase < len(mus) - 1 and (
                    stalled or (self.PHASE_CHANGE and change < eps)
                    or (not math.isnan(rel_gap) and cert is not None
                                and cert.smoothed_rel_gap <= self.PHASE_CERT * cert.rel_gap)):
                f_phase = []
                phase += 1
                eng.mu = mus[phase]
                if accel:
                    aa.reset()
                    f_cur = eng.objective(G, eng.mu)
                log.message(f"sweep {it}: smoothing mu = {eng.mu:g}"
                            + ("" if math.isnan(rel_gap) else f" (hinge gap {rel_gap:.2e})"))
            if deadline is not None and time.perf_counter() > deadline:
                status = Status.TIMEOUT
                message = f"time limit reached after {it} sweeps"
                break
            if frozen >= self.FROZEN_SWEEPS and cert is not None and last_cert > it - frozen:
                message = (f"stopped at sweep {it} of max_iter = {max_iter}: the "
                           f"{'exact-hinge ' if view.has_hinge else ''}row "
                           f"updates left the factor unchanged for {frozen} sweeps, and the duality "
                           f"gap certifies only {cert.rel_gap:.2e} > gap_tol = {gap_tol:g} (row-wise "
                           f"updates cannot leave this point at rank {r})")
                break
        if status is Status.MAX_ITER and not message:
            last = ("no certificate (the smallest-eigenvalue solve failed)" if no_cert and cert is None
                    else f"last certified relative gap {cert.rel_gap:.2e}" if cert is not None
                    else "no certificate computed")
            message = (f"max_iter = {max_iter} sweeps reached before the duality gap reached "
                       f"gap_tol = {gap_tol:g} ({last}; last change {change:.2e})")
        if len(mus) > 1:
            message += f"; hinge smoothing mu = {mus[0]:g} .. {eng.mu:g}"
        extras = {"rank": r, "order": opts["order"], "unlabeled": opts["unlabeled"],
                  "n_colors": len(blocks), "coloring_time": color_time,
                  "coloring_cpu": color_cpu, "n_labeled": int(eng.labeled.sum()),
                  "safeguard_rejections": eng.n_safeguard,
                  "rel_gap": cert.rel_gap if cert is not None else math.nan,
                  "dual_bound": cert.dual if cert is not None else math.nan,
                  "certificates": n_cert, "gap_check_time": cert_spent,
                  "escapes": n_escape,
                  "accelerated_sweeps": int(sum(hist["accelerated"])),
                  "stretched_sweeps": n_stretched}
        if cert is not None and math.isfinite(cert.dual):
            extras["lower_bound"] = cert.dual  # the typed Result.lower_bound: compare keeps the tighter
        if perm is not None:
            G = G[inv]
        return SolverOutput(G, status, it, hist, message, extras)


# out-of-sample extension (Hu & Kwok 2015, Section III-E) lives in kernelforms.extend;
# re-exported here for ``from kernelforms.solvers.bcd import extend``
from ..extend import extend  # noqa: E402,F401
