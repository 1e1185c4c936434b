"""Optimality certificates for factorised results, without an SDP solve.

For a problem ``min f(K) over K PSD`` with ``f`` convex, any linear minorant
``f(K') >= c + <G, K'>`` (valid for every feasible ``K'``) and any bound
``tr(K*) <= tau`` on the optimum give

    f(K*) >= c + min(0, lambda_min(G)) * tau.

At a point ``K = V V^T`` the gradient ``G = grad f(K)`` gives such a minorant with
``c = f(K) - <G, K>`` (for the hinge loss, a multiplier vector does; see
docs/certificate.md).  ``G`` is sparse (the Laplacian plus one entry per pair), so
``lambda_min(G)`` comes from Lanczos (:func:`scipy.sparse.linalg.eigsh`) above
:data:`DENSE_BELOW` points and nothing ``n x n`` is ever dense at large ``n``.

Problems covered: PCP soft (P1), RegPCP (P3, in the basis ``K = Q Y Q^T``), NPKL (P6,
every loss) and MVU (P4, a maximisation: an *upper* bound on ``tr(K*)`` from edge
multipliers fitted to the point, see :func:`_certify_mvu`).  Hard PCP (P2, no strictly
feasible point), RegMVU (P5, no a-priori trace bound) and Bregman (P7) are not certified:
:func:`applies` says why.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from .result import LowRank

#: below this many rows lambda_min is computed densely (exact); above, by Lanczos
DENSE_BELOW = 500
#: when Lanczos does not converge (a clustered spectrum near an optimum), matrices up to this
#: many rows are decomposed densely instead (5,000 rows: 200 MB, about a minute)
DENSE_FALLBACK = 5000
#: ARPACK's tolerance (relative to the Ritz value); the residual is subtracted anyway, and a
#: tighter value cost 2x the time near an optimum, where the spectrum clusters at 0
LANCZOS_TOL = 1e-6
#: margins within this distance of the hinge's kink get fitted multipliers
KINK_TOL = 1e-4


@dataclass
class Certificate:
    """A lower bound on the optimum of a convex problem, from one feasible point.

    Attributes
    ----------
    objective : float
        ``f`` at the certified point (the problem's own objective, in its own sense).
    lower_bound : float
        Minimisation problems: ``f(K*) >= lower_bound`` for the optimum ``K*``.
        Maximisation problems (MVU): ``nan``; the bound is ``upper_bound``.
    gap, relative_gap : float
        How far the point can be from the optimum: ``objective - lower_bound``
        (``upper_bound - objective`` for a maximisation), and the same divided by
        ``max(|objective|, |bound|, 1e-12)`` (:func:`relative`).  Negative only for an infeasible point that beats
        the optimum (see ``violation``).
    violation : float
        The point's largest constraint violation (``problem.violation``); the bound holds
        regardless, but ``objective`` is only attained by a feasible kernel.
    min_eig : float
        Smallest eigenvalue of the minorant's matrix ``G`` (a lower estimate, see ``eig_method``).
    inner : float
        ``<G, K>`` at the point.
    trace_bound : float
        The bound ``tau >= tr(K*)`` used.
    eig_method : str
        ``"dense"`` or ``"lanczos"``.
    note : str
        How the minorant and the trace bound were obtained.
    """

    objective: float
    lower_bound: float
    gap: float
    relative_gap: float
    min_eig: float
    inner: float
    trace_bound: float
    eig_method: str
    note: str = ""
    sense: str = "min"
    upper_bound: float = math.nan
    violation: float = 0.0

    @property
    def bound(self) -> float:
        """The certified bound on the optimum: lower for ``sense == "min"``, upper for ``"max"``."""
        return self.upper_bound if self.sense == "max" else self.lower_bound

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def applies(problem: Any) -> str | None:
    """``None`` when :func:`certify` covers ``problem``, else the reason it does not."""
    from .problems import MVU, NPKL, PCP, RegPCP

    if isinstance(problem, PCP):
        # tried: multipliers of K_p = t_p fitted to complementarity gave a 0.5 relative gap at
        # Clarabel's optimum; a must-link K_ij = 1 = sqrt(K_ii K_jj) leaves no strictly feasible
        # point, so the dual optimum need not be attained (docs/certificate.md)
        return ("hard PCP has equality constraints without a strictly feasible point "
                "(the dual optimum need not be attained); method 'lowrank' reports its own "
                "bound (extras['lower_bound']) on the equivalent problem with the must-link "
                "components collapsed, which has one") if problem.hard else None
    if isinstance(problem, RegPCP):
        return None
    if isinstance(problem, (NPKL, MVU)):
        return None
    name = type(problem).__name__
    if name == "RegMVU":
        return "no a-priori bound on tr(K*) is implemented for RegMVU"
    return f"no certificate for {name}"


def min_eigenvalue(A: Any, dense_below: int = DENSE_BELOW, seed: int = 0) -> tuple[float, str]:
    """A lower estimate of the smallest eigenvalue of the symmetric matrix ``A``.

    Dense ``eigvalsh`` below ``dense_below`` rows; above, Lanczos (``eigsh``, ``which="SA"``)
    and the Ritz value minus its residual norm ``||A x - theta x||`` (an eigenvalue of A lies
    within that distance of theta).
    """
    n = A.shape[0]
    if n <= dense_below:
        M = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=float)
        return _dense_lower(M), "dense"
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    v0 = np.random.default_rng(seed).standard_normal(n)
    try:
        w, X = eigsh(A, k=1, which="SA", tol=LANCZOS_TOL, ncv=min(n, 24), maxiter=20 * n, v0=v0)
    except ArpackNoConvergence as exc:  # use the best Ritz pair found, residual included
        if n <= DENSE_FALLBACK:  # clustered spectrum: a dense solve is still affordable
            M = A @ np.eye(n)
            M = M.toarray() if sp.issparse(M) else np.asarray(M, dtype=float)
            return _dense_lower(M), "dense (Lanczos did not converge)"
        if exc.eigenvalues.size == 0:
            return -math.inf, "lanczos (no convergence)"
        w, X = exc.eigenvalues, exc.eigenvectors
    theta, x = float(w[0]), X[:, 0] / np.linalg.norm(X[:, 0])
    resid = float(np.linalg.norm(A @ x - theta * x))
    return theta - resid, "lanczos"


def _dense_lower(M: np.ndarray) -> float:
    """``eigvalsh``'s smallest eigenvalue minus its round-off bound ``n eps ||M||_1``.

    A backward-stable symmetric eigensolver returns eigenvalues within a few
    ``n eps ||M||`` of the exact ones; without the margin a singular matrix (a
    Laplacian with ``delta = 0``) came out at ``+5e-17`` and passed for positive
    definite, giving a trace bound of 4e17.
    """
    n = M.shape[0]
    lam = float(np.linalg.eigvalsh((M + M.T) / 2)[0])
    norm1 = float(np.max(np.sum(np.abs(M), axis=0))) if n else 0.0
    return lam - n * np.finfo(float).eps * norm1


def relative(gap: float, objective: float, bound: float) -> float:
    """``gap / max(|objective|, |bound|, 1e-12)`` (the finite bound only).

    Dividing by ``|objective|`` alone blows up when the objective is near 0 and is
    meaningless when the objective and the bound have opposite signs.
    """
    den = max(abs(objective), abs(bound) if math.isfinite(bound) else 0.0, 1e-12)
    return gap / den if math.isfinite(gap) else math.inf


def _pair_matrix(n: int, idx: np.ndarray, coef: np.ndarray) -> sp.csr_matrix:
    """``sum_p coef_p E_p`` with ``E_p = (e_i e_j^T + e_j e_i^T) / 2`` (``e_i e_i^T`` when i = j)."""
    i, j = idx[:, 0], idx[:, 1]
    off = i != j
    rows = np.concatenate([i[off], j[off], i[~off]])
    cols = np.concatenate([j[off], i[off], i[~off]])
    vals = np.concatenate([coef[off] / 2, coef[off] / 2, coef[~off]])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


def _inner(G: Any, V: np.ndarray) -> float:
    """``<G, V V^T> = sum(V * (G V))``."""
    return float(np.sum(V * (G @ V)))


def _finish(f: float, c: float, G: Any, V: np.ndarray, tau: float, note: str,
            dense_below: int) -> Certificate:
    lam, how = min_eigenvalue(G, dense_below)
    lb = c + min(0.0, lam) * tau
    gap = f - lb
    return Certificate(objective=f, lower_bound=lb, gap=gap, relative_gap=relative(gap, f, lb),
                       min_eig=lam, inner=_inner(G, V), trace_bound=tau, eig_method=how, note=note)


def _factor(K: Any, n: int) -> np.ndarray:
    if isinstance(K, LowRank):
        return K.G
    A = np.asarray(K, dtype=float)
    if A.ndim == 2 and A.shape == (n, n) and n > 1 and np.allclose(A, A.T):
        from .result import psd_factor

        return psd_factor(A)
    return A.reshape(n, -1)


def certify(problem: Any, K: Any, *, dense_below: int = DENSE_BELOW,
            multipliers: np.ndarray | None = None) -> Certificate:
    """Certify a kernel (factor ``V``, ``K = V V^T``) for a convex problem.

    Parameters
    ----------
    problem : PCP (soft), RegPCP, NPKL or MVU
    K : LowRank, an (n, r) factor, or a dense PSD (n, n) matrix
    dense_below : int
        Problems with at most this many rows use a dense eigenvalue solve.
    multipliers : ndarray of shape (n_edges,), optional
        MVU only: edge multipliers to use instead of the ones fitted to ``K`` (any
        vector gives a valid bound; a solver's own multipliers may give a tighter one).

    Returns
    -------
    Certificate
        ``lower_bound <= f(K*)`` (MVU: ``tr(K*) <= upper_bound``); ``relative_gap`` is how
        far ``K`` can be from optimal.

    Raises
    ------
    NotApplicable
        For the problems :func:`applies` rejects.
    """
    from .errors import NotApplicable
    from .problems import MVU, NPKL, PCP, RegPCP

    reason = applies(problem)
    if reason is not None:
        raise NotApplicable(f"no certificate for {type(problem).__name__}: {reason}")
    n = problem.n
    if multipliers is not None and not isinstance(problem, MVU):
        raise NotApplicable(f"certify: 'multipliers' is for MVU only, not {type(problem).__name__}")
    V = _factor(K, n)
    if isinstance(problem, MVU):
        return _certify_mvu(problem, V, dense_below, multipliers)
    if isinstance(problem, PCP):
        cert = _certify_pcp(problem, V, dense_below)
    elif isinstance(problem, RegPCP):
        cert = _certify_regpcp(problem, V, dense_below)
    else:
        assert isinstance(problem, NPKL)
        cert = _certify_npkl(problem, V, dense_below)
    return replace(cert, violation=float(problem.violation(LowRank(V))))


def _certify_pcp(problem: Any, V: np.ndarray, dense_below: int) -> Certificate:
    """P1: grad f = L + gamma * sum_T r_p E_p; tr(K*) <= n + sqrt(2 n f_ub / gamma)."""
    n, g = problem.n, problem.gamma
    idx, _ = problem.target_pairs
    r = problem.residuals(LowRank(V))
    G = problem.laplacian + _pair_matrix(n, idx, g * r)
    f = problem.objective(LowRank(V))
    f0 = 0.5 * g * (problem.pairs.n_must + n)  # f(0)
    if not f >= -1e-9 * max(1.0, f0):
        # only an indefinite L makes tr(L K) < 0; then tr(K) has no bound from f
        raise _no_cert(f"PCP: the objective {f:.6g} is negative, so the Laplacian is not positive "
                       "semidefinite and f(K) bounds no trace; no certificate")
    f_ub = max(0.0, min(f, f0))
    tau = n + math.sqrt(2.0 * n * f_ub / g)
    c = f - _inner(G, V)
    return _finish(f, c, G, V, tau, "gradient minorant; tau from the diagonal terms", dense_below)


def _certify_regpcp(problem: Any, V: np.ndarray, dense_below: int) -> Certificate:
    """P3 in Y: grad_Y = Q^T (sum_T 2 r_p E_p) Q; tr(Y*) = tr(K*) <= n + sqrt(n f_ub)."""
    n, Q = problem.n, problem.basis
    F = Q.T @ V  # K projected onto range(Q): K' = Q F F^T Q^T
    K = LowRank(Q @ F)
    idx, _ = problem.target_pairs
    r = problem.residuals(K)
    GK = _pair_matrix(n, idx, 2.0 * r)
    GY = Q.T @ (GK @ Q)
    GY = (GY + GY.T) / 2
    f = problem.objective(K)
    f_ub = max(0.0, min(f, float(problem.pairs.n_must + n)))
    tau = n + math.sqrt(n * f_ub)
    c = f - _inner(GY, F)
    return _finish(f, c, GY, F, tau, "gradient minorant in Y = Q^T K Q; tau from the diagonal terms",
                   dense_below)


def _certify_npkl(problem: Any, V: np.ndarray, dense_below: int) -> Certificate:
    """P6: smooth losses by the gradient, hinge by fitted multipliers alpha in [0, 1]."""
    n, g, L = problem.n, problem.gamma, problem.laplacian
    idx, T = problem.signed_pairs
    K = LowRank(V)
    f = problem.objective(K)
    z = problem.margins(K)
    if problem.loss == "linear":
        tau, tnote = n * problem.b**2, "tau = n b^2 from K_ii <= b^2"
    else:
        # a lower estimate (dense: minus the round-off bound), so that tau is an upper bound
        lamL, _ = min_eigenvalue(L, dense_below)
        if not lamL > 0:
            raise _no_cert(f"NPKL with loss {problem.loss!r} needs lambda_min(L) > 0 (delta > 0) to "
                           f"bound tr(K*); its lower estimate is {lamL:.3g} (build L with delta > 0, "
                           "e.g. NPKL.from_data(..., delta=0.01))")
        f_ub = max(0.0, min(f, g * len(T)))  # f(0) = gamma * m * loss(0), loss(0) = 1
        tau, tnote = f_ub / lamL, "tau = f_ub / lambda_min(L)"
    if problem.loss != "hinge":
        deriv = {"squared_hinge": -2.0 * np.maximum(0.0, 1.0 - z),
                 "square": -2.0 * (1.0 - z),
                 "linear": -np.ones_like(z)}[problem.loss]
        G = L + _pair_matrix(n, idx, g * deriv * T)
        c = f - _inner(G, V)
        cert = _finish(f, c, G, V, tau, "gradient minorant; " + tnote, dense_below)
        if problem.loss == "linear":
            # f(K') >= f(K') + sum_i mu_i (K'_ii - b^2) on the feasible set, mu >= 0; mu from
            # complementarity (G + Diag(mu)) V = 0, row by row: mu_i = -<(G V)_i, V_i> / ||V_i||^2
            GV = G @ V
            nv = np.einsum("ij,ij->i", V, V)
            mu = np.maximum(0.0, -np.einsum("ij,ij->i", GV, V) / np.maximum(nv, 1e-300))
            Gmu = G + sp.diags(mu)
            alt = _finish(f, c - problem.b**2 * float(mu.sum()), Gmu, V, tau,
                          "gradient + diagonal-multiplier minorant; " + tnote, dense_below)
            if alt.lower_bound > cert.lower_bound:
                cert = alt
        return cert
    # hinge: max(0, 1 - z) >= alpha (1 - z) for alpha in [0, 1], so
    # f(K') >= gamma * sum(alpha) + <L - gamma * sum_p alpha_p T_p E_p, K'> for every K'.
    best = None
    for alpha in _hinge_multipliers(problem, V, z):
        G = L - _pair_matrix(n, idx, g * alpha * T)
        cert = _finish(f, g * float(alpha.sum()), G, V, tau,
                       "hinge multiplier minorant; " + tnote, dense_below)
        if best is None or cert.lower_bound > best.lower_bound:
            best = cert
    return best


def _mvu_slack(n: int, E: np.ndarray, lam: np.ndarray) -> sp.csr_matrix:
    """``sum_e lam_e A_e - I`` with ``A_e = (e_i - e_j)(e_i - e_j)^T``: a signed Laplacian minus I."""
    i, j = E[:, 0], E[:, 1]
    W = sp.csr_matrix((np.concatenate([-lam, -lam]), (np.concatenate([i, j]), np.concatenate([j, i]))),
                      shape=(n, n))
    deg = -np.asarray(W.sum(axis=1)).ravel()
    return (W + sp.diags(deg - 1.0)).tocsr()


def mvu_multipliers(problem: Any, V: np.ndarray) -> np.ndarray:
    """Edge multipliers fitted to the point by least squares on stationarity ``S V = 0``.

    At an optimum of MVU, ``S = sum_e lam_e A_e - I (+ c 11^T)`` is PSD and ``S K = 0``;
    for a centred factor the ``11^T`` term drops out, so row ``i`` of ``S V = 0`` reads
    ``sum_{e = (i, j)} lam_e (v_i - v_j) = v_i``: ``n r`` linear equations in the edge
    multipliers, solved by LSQR (sparse, ``4 r`` non-zeros per edge).
    """
    from scipy.sparse.linalg import lsqr

    n, r = V.shape
    E = problem.edges
    i, j = E[:, 0], E[:, 1]
    D = V[i] - V[j]
    e = np.arange(len(E))
    rows = np.concatenate([(i[:, None] * r + np.arange(r)).ravel(), (j[:, None] * r + np.arange(r)).ravel()])
    cols = np.concatenate([np.repeat(e, r), np.repeat(e, r)])
    A = sp.csr_matrix((np.concatenate([D.ravel(), -D.ravel()]), (rows, cols)), shape=(n * r, len(E)))
    sol = lsqr(A, V.ravel(), atol=1e-14, btol=1e-14, iter_lim=20 * len(E) + 1000)
    return np.asarray(sol[0], dtype=float)


def _certify_mvu(problem: Any, V: np.ndarray, dense_below: int,
                 multipliers: np.ndarray | None) -> Certificate:
    """P4: ``tr(K*) <= sum_e lam_e d_e^2 / (1 + min(0, s))`` for any edge multipliers ``lam``.

    For feasible ``K'``: ``K' 1 = 0`` and ``<S, K'> = sum_e lam_e d_e^2 - tr(K')`` with
    ``S = sum_e lam_e A_e - I``; on the centred subspace ``<S, K'> >= s tr(K')``,
    ``s = lambda_min(S)`` there, so ``tr(K') (1 + s) <= sum_e lam_e d_e^2``.  Needs ``s > -1``.
    """
    n = problem.n
    E, d = problem.edges, problem.distances
    Vc = V - V.mean(axis=0, keepdims=True)
    if multipliers is None:
        lam = mvu_multipliers(problem, Vc)
        how_lam = "edge multipliers fitted to S V = 0 (LSQR)"
    else:
        lam = np.asarray(multipliers, dtype=float).ravel()
        if lam.shape != (len(E),) or not np.all(np.isfinite(lam)):
            raise _no_cert(f"certify: 'multipliers' must be {len(E)} finite numbers, one per edge "
                           f"of problem.edges; got shape {np.shape(multipliers)}")
        how_lam = "given edge multipliers"
    S = _mvu_slack(n, E, lam)
    # the constant vector is an eigenvector of S (eigenvalue -1) outside the feasible set's
    # range: lift it above the spectrum (Gershgorin) and take lambda_min on the rest
    lift = 2.0 + 2.0 * float(abs(S).sum(axis=1).max())
    if n <= dense_below:
        A = S.toarray() + (lift / n) * np.ones((n, n))
    else:
        from scipy.sparse.linalg import LinearOperator

        one = np.ones(n) / math.sqrt(n)

        def mv(x):
            x = np.asarray(x).reshape(n, -1)
            return S @ x + lift * np.outer(one, one @ x)

        A = LinearOperator((n, n), matvec=mv, matmat=mv, dtype=float)
    s, how = min_eigenvalue(A, dense_below)
    f = problem.objective(LowRank(V))
    inner = float(np.sum(Vc * (S @ Vc)))
    dual = float(lam @ (d**2))
    ub = dual / (1.0 + min(0.0, s)) if s > -1.0 else math.inf
    gap = ub - f
    viol = problem.violation(LowRank(V))
    return Certificate(objective=f, lower_bound=math.nan, gap=gap,
                       relative_gap=relative(gap, f, ub), min_eig=s, inner=inner,
                       trace_bound=ub, eig_method=how,
                       note=f"{how_lam}; tr(K*) <= sum lam d^2 / (1 + min(0, s)), s = lambda_min "
                            "of sum lam A_e - I on the centred subspace"
                            + ("" if s > -1.0 else "; s <= -1: no bound from these multipliers"),
                       sense="max", upper_bound=ub, violation=viol)


def _hinge_multipliers(problem: Any, V: np.ndarray, z: np.ndarray) -> list[np.ndarray]:
    """Candidate multipliers: the subgradient rule, plus alpha on the kinked pairs fitted
    by bounded least squares to the complementarity condition ``G_alpha V = 0``."""
    from scipy.optimize import lsq_linear

    base = (z < 1.0).astype(float)
    kink = np.flatnonzero(np.abs(z - 1.0) <= KINK_TOL)
    out = [base]
    if kink.size == 0:
        return out
    hi = base.copy()
    hi[kink] = 1.0
    lo = base.copy()
    lo[kink] = 0.0
    out += [hi, lo]
    n, r = V.shape
    g, L = problem.gamma, problem.laplacian
    idx, T = problem.signed_pairs
    # G_alpha V = L V - gamma * sum_p alpha_p T_p E_p V, with E_p V = (e_i V_j + e_j V_i) / 2
    fixed = lo.copy()
    R0 = L @ V - _pair_matrix(n, idx, g * fixed * T) @ V
    i, j = idx[kink, 0], idx[kink, 1]
    k = kink.size
    coef = 0.5 * g * T[kink]
    cols = np.arange(k)
    rows_i = (i[:, None] * r + np.arange(r)).ravel()
    rows_j = (j[:, None] * r + np.arange(r)).ravel()
    data_i = (coef[:, None] * V[j]).ravel()
    data_j = (coef[:, None] * V[i]).ravel()
    col = np.repeat(cols, r)
    A = sp.csr_matrix((np.concatenate([data_i, data_j]),
                       (np.concatenate([rows_i, rows_j]), np.concatenate([col, col]))),
                      shape=(n * r, k))
    sol = lsq_linear(A, R0.ravel(), bounds=(0.0, 1.0), lsmr_tol="auto", max_iter=200)
    fit = fixed.copy()
    fit[kink] = np.clip(sol.x, 0.0, 1.0)
    out.append(fit)
    return out


def _no_cert(msg: str):
    from .errors import NotApplicable

    return NotApplicable(msg)
