"""The pieces of the MVU solver ``"mvu"`` (:mod:`kernelforms.solvers.mvu_alm`) that stand
on their own: what it accepts (:data:`CAPABILITIES`, :func:`reason`), the landmark-Isomap start
(:func:`landmark_isomap`), the certificate's smallest dual-slack eigenvalue
(:func:`dual_slack_min_eig`), the Gauss-Newton projection onto the edge rows
(:func:`project_to_edges`) and the sparse structure of the inner Newton system
(:class:`_NewtonPattern`).  The method and its references are in ``mvu_alm``'s notes."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import qdldl
import scipy.sparse as sp

from ..model import EQ, GE, LE, PSD, Capabilities, RowKind, Trace, canonical

__all__ = ["CAPABILITIES", "reason", "landmark_isomap", "dual_slack_min_eig", "project_to_edges"]

# ----------------------------------------------------------------------------- what applies
#: the sentence every "does not apply" reason of mvu starts with
HEAD = ("mvu solves max c tr(K) (c > 0) over K PSD subject to distance rows "
        "K_ii + K_jj - 2 K_ij = d_ij^2 (all ==, or all <=) and the centring 1^T K 1 = 0 (MVU)")

#: what mvu accepts, as data: K PSD, a maximisation, no divergence, no loss terms.  The rest
#: of MVU's shape (the centring row, a positive multiple of tr K as the only linear term, one
#: block of distance rows of one sense, >= 0, on a connected graph) is read from the
#: canonical form by :func:`reason`
CAPABILITIES = Capabilities(forms=(PSD,), senses=("max",), losses=False)


def reason(decl: Any) -> str | None:
    """Why mvu does not apply to a declaration (or a problem's), None when it does: the
    mismatch of :data:`CAPABILITIES`, then the canonical form (:func:`kernelforms.model.canonical`:
    the chain's reduced declaration, a minimisation with the centring row turned into the flag
    ``centred``)."""
    from scipy.sparse.csgraph import connected_components

    decl = getattr(decl, "declaration", decl)
    miss = CAPABILITIES.mismatch(decl)
    if miss is not None:
        if miss.what == "form":
            return f"{HEAD}; this problem has {decl.form.describe()}"
        if decl.divergence is not None:
            return f"{HEAD}; this problem has the {decl.divergence.kind} divergence"
        if miss.what == "sense":
            return f"{HEAD}; this problem is a minimisation"
        # loss terms (Capabilities(losses=False) words them as the mismatch "terms"): the first
        return f"{HEAD}; this problem has loss terms ({decl.losses[0].describe()})"
    can = canonical(decl)
    if not can.centred:
        return f"{HEAD}; this problem has no centring row 1^T K 1 = 0 (without it tr(K) is unbounded)"
    # centred: nothing was merged (the merge leaves a declaration with 1^T K 1 = 0 alone), so
    # the reduced declaration's terms are the original's, in order, negated
    for k, t in enumerate(can.decl.linear):
        if not isinstance(t.map, Trace):
            return f"{HEAD}; this problem has the linear term {decl.linear[k].describe()}"
    coef = trace_coefficient(can)
    if not coef > 0:
        return f"{HEAD}; the objective's trace coefficient is {coef:g}, not > 0"
    if can.general:
        return f"{HEAD}; this problem has the constraint {can.general[0].describe()}"
    blocks = can.constraint_blocks
    if not blocks:
        return f"{HEAD}; this problem has no distance rows"
    if GE in blocks or len(blocks) > 1:
        return (f"{HEAD}; this problem has distance rows of the senses "
                f"{', '.join(SENSE_WORD[s] for s in sorted(blocks))}")
    (rows,) = blocks.values()
    if np.any(rows.kind != int(RowKind.DISTANCE)):
        return (f"{HEAD}; this problem has {int(np.sum(rows.kind != int(RowKind.DISTANCE)))} "
                "constraint rows on entries K_ij")
    if np.any(rows.bound < 0):
        return f"{HEAD}; a squared distance bound is negative"
    if not can.graph_connected:
        n = can.n
        A = sp.coo_matrix((np.ones(rows.size), (rows.i, rows.j)), shape=(n, n))
        ncomp = int(connected_components(A, directed=False)[0])
        return (f"{HEAD}; the distance rows' graph has {ncomp} connected components, so tr(K) is "
                "unbounded")
    return None


#: the words of the senses in :func:`reason`'s sentences
SENSE_WORD = {LE: "<=", EQ: "==", GE: ">="}


def trace_coefficient(can: Any) -> float:
    """``c`` of the objective ``max c tr(K)``: the canonical form's trace coefficients (a
    minimisation's, so negated) summed."""
    return 0.0 - sum(float(np.asarray(t.coef).ravel()[0]) for t in can.decl.linear)


# ----------------------------------------------------------------------------- the deadline
#: the clock every stage compares the deadline (a ``time.perf_counter()`` value) with
clock = time.perf_counter


def past(deadline: float | None) -> bool:
    """Whether the deadline (a ``time.perf_counter()`` value, or None: none) has passed."""
    return deadline is not None and clock() > deadline


class _TimeUp(Exception):
    """The deadline passed inside a stage (caught in this module; never leaves it)."""


# ----------------------------------------------------------------------------- the start
def landmark_isomap(n: int, i: np.ndarray, j: np.ndarray, length: np.ndarray, dim: int,
                    landmarks: int, rng: np.random.Generator,
                    deadline: float | None = None) -> np.ndarray:
    """Landmark Isomap (de Silva & Tenenbaum 2003) of a weighted graph: an ``(n, dim)``
    centred embedding whose distances approximate the shortest-path distances.

    ``landmarks`` points are chosen by farthest-point sampling from a random first one
    (one Dijkstra per landmark, ``O(landmarks |E| log n)``); their squared path distances
    are embedded by classical MDS and every point is placed by distance-based
    triangulation.  Columns with a non-positive MDS eigenvalue are zero.  Once ``deadline``
    has passed no further landmark is added beyond the ``dim + 1`` the embedding needs.
    """
    from scipy.sparse.csgraph import dijkstra

    W = sp.coo_matrix((length, (i, j)), shape=(n, n)).tocsr()
    W = W.maximum(W.T).tocsr()
    m = int(min(n, max(dim + 1, landmarks)))
    first = int(rng.integers(n))
    D = np.empty((m, n))
    D[0] = dijkstra(W, directed=False, indices=first)
    idx = [first]
    near = D[0].copy()
    for k in range(1, m):
        if k > dim and past(deadline):
            m = k
            D = D[:m]
            break
        nxt = int(np.argmax(near))
        idx.append(nxt)
        D[k] = dijkstra(W, directed=False, indices=nxt)
        np.minimum(near, D[k], out=near)
    D2 = D**2
    Dl = D2[:, idx]
    Dl = (Dl + Dl.T) / 2
    J = np.eye(m) - 1.0 / m
    Bm = -0.5 * J @ Dl @ J
    w, U = np.linalg.eigh((Bm + Bm.T) / 2)
    order = np.argsort(w)[::-1][:dim]
    w, U = w[order], U[:, order]
    keep = w > 1e-12 * max(float(w[0]), 1e-300)
    Y = np.zeros((n, dim))
    if np.any(keep):
        pinv = U[:, keep] / np.sqrt(w[keep])  # (m, k)
        mean = Dl.mean(axis=0)
        Y[:, keep] = -0.5 * (D2 - mean[:, None]).T @ pinv
    return Y - Y.mean(axis=0, keepdims=True)


# ----------------------------------------------------------------------------- eigenvalue
def _lu(A: sp.spmatrix):
    """A sparse LU with symmetric ordering and diagonal pivots (an ``LDL^T`` in disguise)."""
    from scipy.sparse.linalg import splu

    return splu(A.tocsc(), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                options=dict(SymmetricMode=True))


def _negative_pivots(lu: Any) -> int | None:
    """Negative pivots of a symmetric elimination (Sylvester: negative eigenvalues), or None
    when the elimination was not symmetric (a pivot off the diagonal)."""
    if not np.array_equal(lu.perm_r, lu.perm_c):
        return None
    d = lu.U.diagonal()
    if not np.all(np.isfinite(d)) or np.any(d == 0):
        return None
    return int(np.sum(d < 0))


def _laplacian(n: int, i: np.ndarray, j: np.ndarray, w: np.ndarray) -> sp.csr_matrix:
    deg = np.bincount(i, weights=w, minlength=n) + np.bincount(j, weights=w, minlength=n)
    rows = np.concatenate([i, j, np.arange(n)])
    cols = np.concatenate([j, i, np.arange(n)])
    vals = np.concatenate([-w, -w, deg])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


def dual_slack_min_eig(n: int, i: np.ndarray, j: np.ndarray, lam: np.ndarray,
                       guess: float = 0.0, dense_below: int = 400,
                       deadline: float | None = None,
                       face: Any = None) -> tuple[float, np.ndarray, str]:
    """A lower estimate of ``lambda_min(L(lam) - I)`` on ``1^perp`` and its eigenvector.

    With ``face`` (:class:`kernelforms.model.faces.CliqueRows`) the same on ``null(A) ∩
    1^perp``: everything below runs on ``Z^T S Z`` (``Z`` the face's sparse orthonormal basis,
    ``1`` in its span, ``Z^T 1`` an eigenvector of eigenvalue -1 in place of ``1``); the
    eigenvector returned is ``Z y`` (``n`` entries).

    Dense ``eigh`` up to ``dense_below`` points.  Above, shift-invert Lanczos around a shift
    ``tau`` below the expected value (``guess``), after a sparse ``LDL^T`` of ``S - tau I``
    showed by its inertia that no eigenvalue on ``1^perp`` lies below ``tau`` (the constant
    vector is an exact eigenvector of ``S``, eigenvalue -1: one negative pivot for
    ``tau > -1``, none below);
    otherwise ``tau`` is lowered and the test repeated.  The returned value is
    ``max(tau, theta - ||S x - theta x||)`` for the Ritz pair ``(theta, x)`` nearest
    ``tau``: the smallest eigenvalue lies in ``[tau, theta]``, and an eigenvalue lies within
    the residual of ``theta``.

    ``deadline`` (a ``time.perf_counter()`` value) is checked before every factorisation and
    every Lanczos step; once it has passed the value returned is the last shift whose inertia
    was checked (``how`` then says "time limit"), or ``-inf`` when no shift was checked yet:
    never a value that was not proved.
    """
    S = _laplacian(n, i, j, lam) - sp.identity(n, format="csr")
    n_full = n
    u = np.full(n, 1.0 / math.sqrt(n))  # the eigenvector of eigenvalue -1 (S 1 = -1)
    Z = face.Z if face is not None and face.q else None
    if Z is not None:
        S = (Z.T @ S @ Z).tocsr()
        n = S.shape[0]
        u = Z.T @ u
        u /= np.linalg.norm(u)

    def back(y):  # reduced coordinates -> R^n
        if Z is None:
            return y
        x = Z @ y
        return x - x.mean()
    if n <= dense_below:
        M = S.toarray()
        M += (2.0 + 2.0 * float(np.abs(M).sum(axis=1).max())) * np.outer(u, u)  # lift 1
        w, U = np.linalg.eigh(M)
        norm1 = float(np.abs(M).sum(axis=0).max())
        return float(w[0]) - n * np.finfo(float).eps * norm1, back(U[:, 0]), "dense"
    from scipy.sparse.linalg import LinearOperator, eigsh

    scale = max(1.0, float(abs(S).max()))
    # the margins are absolute: the bound divides by 1 + lambda_min, so lambda_min is needed to
    # about 1e-6 whatever the multipliers' size.  They were 1e-6 * scale (the largest entry of
    # S), and with multipliers of 1e6 (2,000 points, model units) the shift sat at -6 below a
    # spectrum from +1.2e-5: Lanczos stalled on the clustered bottom and the returned value was
    # that shift, so no bound came from those iterations (and the next guess was as stale).
    # eps * scale * 1e4 keeps the shift above the elimination's rounding
    floor = max(1e-6, 1e4 * np.finfo(float).eps * scale)
    tau = min(guess, 0.0) - max(1e-3 * abs(guess), floor)
    how = "shift-invert Lanczos + inertia"
    def below(tau):
        """The factorisation of ``S - tau I`` and whether its inertia puts ``tau`` below the
        spectrum on ``1^perp`` (None: no inertia)."""
        if abs(tau + 1.0) < 1e-6:
            tau -= 1e-3  # the constant vector's eigenvalue is -1: keep S - tau I regular
        if past(deadline):
            raise _TimeUp
        try:
            lu = _lu(S - tau * sp.identity(n, format="csr"))
        except RuntimeError:  # exactly singular: tau is an eigenvalue; no inertia
            return tau, None, None
        neg = _negative_pivots(lu)
        # the constant vector (eigenvalue -1 - tau of S - tau I) is negative iff tau > -1
        return tau, lu, (None if neg is None else neg == (1 if tau > -1.0 else 0))

    first = True
    try:
        for _ in range(30):
            tau, lu, ok = below(tau)
            if ok:
                break
            first = False
            if ok is None and lu is not None:  # not a symmetric elimination: no inertia; step down
                how = "shift-invert Lanczos (inertia unavailable)"
            tau = 2.0 * tau - 1e-3 if ok is None else 4.0 * tau - 1e-3
        else:
            return -math.inf, np.zeros(n_full), "no shift below the spectrum found"
    except _TimeUp:
        return -math.inf, np.zeros(n_full), "time limit before a shift was checked: no bound"
    # from here on tau is proved below the spectrum: on a deadline it is the value returned
    timed = how + " (time limit: the inertia bound tau)"
    # a shift far below the spectrum (a stale guess) leaves the bottom eigenvalues clustered
    # for the shift-invert operator and Lanczos stalls (2,000 points: guess -3.6e3, spectrum
    # from +1.9e-3, no convergence in 4.8 s): move it up while the inertia allows
    try:
        if first and tau < -floor:
            up, lu_up, ok = below(-floor)  # straight to the floor: most often right near an optimum
            if ok:
                tau, lu = up, lu_up
        lift = 0
        while first and tau < -floor and lift < 40:
            up, lu_up, ok = below(tau / 4.0)
            if not ok:
                break
            tau, lu, lift = up, lu_up, lift + 1
    except _TimeUp:
        return tau, np.zeros(n_full), timed

    def solve(x):
        if past(deadline):  # between Lanczos steps (one triangular solve each)
            raise _TimeUp
        x = np.asarray(x, dtype=float).reshape(n, -1)
        x = x - np.outer(u, u @ x)
        z = lu.solve(x)
        z = z - np.outer(u, u @ z)
        return z if z.shape[1] > 1 else z.ravel()

    op = LinearOperator((n, n), matvec=solve, matmat=solve, dtype=float)
    v0 = np.random.default_rng(0).standard_normal(n)
    v0 -= u * float(u @ v0)
    from scipy.sparse.linalg import ArpackNoConvergence

    # a few pairs at once: near an optimum the bottom is a cluster (the optimum's rank), where
    # one pair at tol 1e-10 ran 2,000 restarts (minutes at 2,000 points, past the time limit)
    k = min(6, n - 2)
    try:
        mu, X = eigsh(op, k=k, which="LA", v0=v0, tol=1e-8, maxiter=300,
                      ncv=min(n - 1, max(24, 3 * k + 6)))
    except ArpackNoConvergence as exc:
        mu, X = exc.eigenvalues, exc.eigenvectors
        if len(mu) == 0:
            # the inertia test alone still proves lambda_min >= tau; no eigenvector
            return tau, np.zeros(n_full), how + " (Lanczos did not converge: the inertia bound tau)"
        how += " (Lanczos partly converged)"
    except _TimeUp:
        return tau, np.zeros(n_full), timed
    top = int(np.argmax(mu))  # the largest 1 / (theta - tau): the smallest theta
    x = X[:, top] - u * float(u @ X[:, top])
    x /= np.linalg.norm(x)
    theta = tau + 1.0 / float(mu[top])
    resid = float(np.linalg.norm(S @ x - theta * x))
    low = theta - resid
    if low <= tau:
        return tau, back(x), how
    # an eigenvalue lies within the residual of theta; that it is the smallest one is what
    # the inertia of S - low I confirms (no Lanczos run is trusted for that)
    try:
        low, _, ok = below(low)
    except _TimeUp:
        return tau, back(x), timed
    if not ok:
        return tau, back(x), how + " (the Ritz value was not confirmed by the inertia: tau)"
    return low, back(x), how


def onto(X: np.ndarray, face: Any = None) -> np.ndarray:
    """``X`` centred (every column orthogonal to ``1``), and projected onto the face of the
    cliques when ``face`` (:class:`kernelforms.model.faces.CliqueRows`) is given."""
    return X - X.mean(axis=0, keepdims=True) if face is None else face.project(X)


def _row_violation(c: np.ndarray, ineq: bool) -> np.ndarray:
    """Each edge row's violation: ``|c_e|`` for ``==`` rows, ``max(c_e, 0)`` for ``<=`` rows."""
    return np.maximum(c, 0.0) if ineq else np.abs(c)


#: <= rows: the projection aims this fraction of its tolerance inside the bound
INSIDE = 0.5

#: the projection's damping ``mu`` of ``J^T J + mu I``, relative to its largest diagonal entry
PROJECT_DAMPING = 1e-10


def project_to_edges(V: np.ndarray, ei: np.ndarray, ej: np.ndarray, t: np.ndarray,
                     tol: float, max_steps: int = 6, ineq: bool = False,
                     max_shrink: float = 0.0, deadline: float | None = None,
                     pattern: _NewtonPattern | None = None,
                     face: Any = None) -> tuple[np.ndarray, float]:
    """The nearest point to ``V`` (to first order) on the edge-distance manifold, by
    Gauss-Newton: ``V <- V + D``, ``D`` the smallest correction with ``J D = -c(V)``, ``J``
    the Jacobian of the edge rows ``c_e(V) = ||v_i - v_j||^2 - t_e``.  ``D`` solves
    ``(J^T J + mu I) D = -J^T c``, which is ``J^T (J J^T + mu I)^{-1} (-c)`` (the min-norm
    step; ``mu`` a damping of :data:`PROJECT_DAMPING` of the largest diagonal entry): a
    sparse ``n r x n r`` system with one ``r x r`` block per edge, the pattern of the inner
    Newton system (:class:`_NewtonPattern`; ``pattern``, that of ``V``'s rank, is reused
    when given), one ``LDL^T`` per step.  Every correction sums to zero over the points, so
    a centred ``V`` stays centred.  Returns the point and its largest violation.

    With ``ineq`` (rows ``c_e <= 0``) each step moves only the rows that are violated or
    within ``tol`` of their bound onto it (the slack rows are left free), the violation is
    ``max(c_e, 0)``, the rows are aimed at ``c_e = -tol / 2``, and a point still above
    ``tol`` after the steps is shrunk by ``1 /
    sqrt(1 + max_e c_e / t_e)``, which satisfies every row (to round-off), when that ratio
    (the relative objective the shrink costs) is at most ``max_shrink``.  Once ``deadline``
    (a ``time.perf_counter()`` value) has passed no further step is taken: the point of the
    last step (with its own violation) is returned.

    With ``face`` (:class:`kernelforms.model.faces.CliqueRows`) the corrections are
    restricted to the face (the Gauss-Newton system on it, :class:`_NewtonPattern`)."""
    n, r = V.shape
    m = len(t)
    if pattern is None or pattern.N != n * r:
        pattern = None  # built at the first step that needs it
    best = V
    U = V[ei] - V[ej]
    c = np.einsum("ij,ij->i", U, U) - t
    viol = float(np.max(_row_violation(c, ineq)))
    for _ in range(max_steps):
        if viol <= tol or past(deadline):
            break
        # the rows moved (for <= rows those violated or near their bound; the others have a
        # zero weight) and their targets: <= rows aim half of tol inside their bound, so the
        # step's second-order error leaves them feasible (aimed at the bound, about half ended
        # just above it, and a 20,000-point roll polished 3.8e-6 -> 1e-6 over 200+ CPU s of
        # outer iterations)
        on = (c > -tol) if ineq else np.ones(m, dtype=bool)
        rhs_c = np.where(on, c + INSIDE * tol if ineq else c, 0.0)
        # J^T J: the edge e's block 4 u_e u_e^T (u_e = v_i - v_j) at (i, i), (j, j) and
        # negated at (i, j), (j, i); J^T c: 2 u_e c_e at i, -2 u_e c_e at j.  (The m x m
        # system J J^T it replaces was factored by SuperLU: 180 of 226 s at 20,000 points,
        # its fill growing faster than m.)
        if pattern is None:
            pattern = _NewtonPattern(ei, ej, n, r, face)
        Uo = U * on[:, None]
        b = (4.0 * Uo[:, :, None] * Uo[:, None, :]).ravel()
        w = 2.0 * rhs_c[:, None] * U
        g = np.zeros((n, r))
        for k in range(r):  # over the r columns, not the points
            g[:, k] = (np.bincount(ei, weights=w[:, k], minlength=n)
                       - np.bincount(ej, weights=w[:, k], minlength=n))
        base = pattern.assemble(b)
        mu = PROJECT_DAMPING * max(float(np.max(base[pattern.diag_pos])), 1e-300)
        lu, _ = pattern.factor(base, mu)
        if lu is None:
            break
        D = pattern.solve(lu, -g.ravel(), 2).reshape(n, r)
        if not np.all(np.isfinite(D)):
            break
        D = onto(D, face)
        # backtracking on ||c|| (on ||max(c, 0)|| for <= rows): a full step overshoots on
        # the short edges
        nc = float(np.linalg.norm(_row_violation(c, ineq)))
        for _ in range(30):
            W = best + D
            Uw = W[ei] - W[ej]
            cw = np.einsum("ij,ij->i", Uw, Uw) - t
            if float(np.linalg.norm(_row_violation(cw, ineq))) < nc:
                break
            D = 0.5 * D
        else:
            break
        best, U, c = W, Uw, cw
        viol = float(np.max(_row_violation(c, ineq)))
    if ineq and viol > tol:
        # <= rows are homogeneous in K: shrinking the point by the largest ratio of a row's
        # excess to its bound makes every row hold (Gauss-Newton alone went from 1.7e-4 to
        # 2.4e-5 in six steps at 2,000 points); the objective pays that ratio, so only when
        # it is small (at 20,000 points the short edges' excess made it 17%)
        over = c > 0
        ratio = float(np.max(c[over] / t[over])) if np.all(t[over] > 0) else math.inf
        if ratio <= max_shrink:
            best = best / math.sqrt(1.0 + ratio)
            U = best[ei] - best[ej]
            c = np.einsum("ij,ij->i", U, U) - t
            viol = float(np.max(_row_violation(c, ineq)))
    return best, viol


class _NewtonPattern:
    """The sparse structure of the inner Newton system at one rank, built once.

    ``H = 2 (L(w) - I) (x) I_r + J^T diag(sigma) J + rho I`` has one ``r x r`` block per edge
    end and per edge, always in the same places; only the values change between Newton steps.
    The upper triangle is kept in compressed-column form with the map from the blocks' entries
    to its data array, so a new ``H`` is one ``bincount`` (the coordinate-format assembly it
    replaces took as long as the factorisation), and the ``LDL^T`` (QDLDL, Stellato et al.
    2020) reuses its fill-reducing ordering and elimination tree from the first factorisation
    at this rank.  QDLDL does not pivot, like the symmetric-mode LU it replaces, so the signs
    of ``D`` are the inertia (Sylvester).

    With ``face`` (:class:`kernelforms.model.faces.CliqueRows`, ``Z`` its sparse orthonormal
    basis of ``null(A)``, ``n x p``) the system factored is the restriction ``Z_r^T (H + rho
    I) Z_r = Z_r^T H Z_r + rho I``, ``Z_r = Z (x) I_r`` (``p r`` rows): exact, its inertia
    that of ``H + rho I`` on the face.  Its upper triangle's data is one sparse product
    ``T @ data(H)`` with ``T`` built once per rank (each entry of ``H`` times the products of
    ``Z_r``'s entries in its two rows: the free points' rows of ``Z`` have one entry, a
    group of overlapping cliques' points a few), so its pattern, ordering and elimination
    tree are fixed like ``H``'s.  (A KKT system ``[H + rho I, B^T; B, -delta I]`` was tried
    first: QDLDL's ordering eliminated the sparse rows of ``B`` first, the pivots ``-delta``
    filled ``H`` with ``B^T B / delta``, and its inertia missed 3 of 4 negative eigenvalues
    of a 300-point system.)"""

    def __init__(self, ei: np.ndarray, ej: np.ndarray, n: int, r: int, face: Any = None) -> None:
        m = len(ei)
        a = np.arange(r)
        N = n * r
        ri = np.broadcast_to((ei[:, None] * r + a)[:, :, None], (m, r, r)).ravel()
        rj = np.broadcast_to((ej[:, None] * r + a)[:, :, None], (m, r, r)).ravel()
        ci = np.broadcast_to((ei[:, None] * r + a)[:, None, :], (m, r, r)).ravel()
        cj = np.broadcast_to((ej[:, None] * r + a)[:, None, :], (m, r, r)).ravel()
        diag = np.arange(N)
        # the values are [b, b, -b, -b] at these places (b the m r^2 block entries), plus
        # the diagonal shift
        rows = np.concatenate([ri, rj, ri, rj, diag])
        cols = np.concatenate([ci, cj, cj, ci, diag])
        upper = rows <= cols
        key = cols[upper].astype(np.int64) * N + rows[upper]
        uniq, pos = np.unique(key, return_inverse=True)
        self.N = N
        nb = m * r * r
        # the upper entries of the four block copies: which entry of b, with which sign
        upper_b = upper[:4 * nb]
        self.src = np.tile(np.arange(nb), 4)[upper_b]
        self.sign = np.repeat([1.0, 1.0, -1.0, -1.0], nb)[upper_b]
        self.pos_b = pos[:len(self.src)]
        self.nnz = len(uniq)
        self.indices = (uniq % N).astype(np.int32)
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(uniq // N, minlength=N))]).astype(np.int32)
        self.diag_pos = pos[-N:]  # the diagonal entries come last and are all upper
        self.solver: Any = None  # the QDLDL object, refactored in place
        self.A: sp.csc_matrix | None = None  # the last matrix factored (upper triangle)
        self.Adiag = np.zeros(N)
        self.Zr: sp.csr_matrix | None = None
        if face is not None and face.q:
            self._restrict(sp.kron(face.Z, sp.identity(r), format="csr"))

    def _restrict(self, Zr: sp.csr_matrix) -> None:
        """``T``, the reduced pattern and its diagonal (see the class notes)."""
        Zr.sort_indices()
        N, M = Zr.shape
        cols = np.repeat(np.arange(N), np.diff(self.indptr))  # the upper entries (i, j), i <= j
        rows = self.indices.astype(np.int64)
        k = np.arange(self.nnz)
        cnt = np.diff(Zr.indptr)
        # every pair (alpha in row i of Z_r, beta in row j of Z_r) of every entry k
        ni, nj = cnt[rows], cnt[cols]
        reps = ni * nj
        kk = np.repeat(k, reps)
        off = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
        ai = Zr.indptr[rows][kk] + off // nj[kk]
        bj = Zr.indptr[cols][kk] + off % nj[kk]
        al, be = Zr.indices[ai].astype(np.int64), Zr.indices[bj].astype(np.int64)
        v = Zr.data[ai] * Zr.data[bj]
        offdiag = rows[kk] != cols[kk]
        # an entry off H's diagonal stands for (i, j) and (j, i): the pair lands on (al, be)
        # and (be, al), once in the upper triangle (twice on its diagonal); a diagonal entry
        # of H gives each ordered pair once, the upper ones kept
        keep = offdiag | (al <= be)
        v = np.where(offdiag & (al == be), 2.0 * v, v)
        lo, hi = np.minimum(al, be)[keep], np.maximum(al, be)[keep]
        key = hi * M + lo
        uniq, pos = np.unique(key, return_inverse=True)
        self.T = sp.csr_matrix((v[keep], (pos, kk[keep])), shape=(len(uniq), self.nnz))
        self.r_indices = (uniq % M).astype(np.int32)
        self.r_indptr = np.concatenate([[0], np.cumsum(np.bincount(uniq // M, minlength=M))]).astype(np.int32)
        dkey = np.arange(M, dtype=np.int64) * (M + 1)
        self.r_diag_pos = np.searchsorted(uniq, dkey)
        if not np.array_equal(uniq[self.r_diag_pos], dkey):
            raise AssertionError("the reduced Newton pattern lacks a diagonal entry")
        self.Zr, self.M = Zr, M
        self.Adiag = np.zeros(M)

    def solve(self, lu: Any, rhs: np.ndarray, refine: int) -> np.ndarray:
        """``lu.solve(rhs)`` with ``refine`` steps of iterative refinement against the last
        factored matrix (its condition number reaches 1e11 near an optimum: without them the
        Newton steps' errors kept the gradient from falling)."""
        if self.Zr is not None:  # on the face: Z_r^T rhs in, Z_r z out
            rhs = self.Zr.T @ rhs
        z = lu.solve(rhs)
        for _ in range(refine):
            res = rhs - (self.A @ z + self.A.T @ z - self.Adiag * z)
            z = z + lu.solve(res)
        return z if self.Zr is None else self.Zr @ z

    def assemble(self, b: np.ndarray) -> np.ndarray:
        """The upper triangle's data for block values ``b`` (no diagonal shift)."""
        return np.bincount(self.pos_b, weights=self.sign * b[self.src], minlength=self.nnz)

    def factor(self, base: np.ndarray, shift: float) -> tuple[Any, int | None]:
        """``LDL^T`` of the system with ``shift`` added on the diagonal: the factor (with a
        ``solve``) and its number of negative pivots, or ``(None, None)`` on a zero pivot."""
        if self.Zr is not None:  # Z_r^T (H + shift I) Z_r = Z_r^T H Z_r + shift I
            data = self.T @ base
            data[self.r_diag_pos] += shift
            A = sp.csc_matrix((data, self.r_indices, self.r_indptr), shape=(self.M, self.M))
            self.A, self.Adiag = A, data[self.r_diag_pos]
        else:
            data = base.copy()
            data[self.diag_pos] += shift
            A = sp.csc_matrix((data, self.indices, self.indptr), shape=(self.N, self.N))
            self.A, self.Adiag = A, data[self.diag_pos]
        try:
            if self.solver is None:
                self.solver = qdldl.Solver(A, upper=True)
            else:
                self.solver.update(A, upper=True)
            d = self.solver.factors()[1]
        except (ValueError, RuntimeError):
            self.solver = None
            return None, None
        if not np.all(np.isfinite(d)) or np.any(d == 0):
            return None, None
        return self.solver, int(np.sum(d < 0))
