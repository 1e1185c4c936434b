"""SimpleNPKL (Zhuang, Tsang & Hoi, JMLR 2011; described by Hu & Kwok 2013 and 2015): "simplenpkl".

**It solves a different problem.**  SimpleNPKL adds the bound ``tr(K^p) <= B`` (Hu & Kwok 2015, eq. 5)
to P6 (and, for the linear loss, drops P6's ``K_ii <= b^2``, docs/problems.md)::

    min  tr(L K) + gamma sum_p loss(T_p K_p)   s.t.  K PSD,  tr(K^p) <= B

Its ``K`` is therefore evaluated on the *original* P6 objective (``Result.objective``, the
problem's own yardstick) and its objective on the bounded problem is reported in
``extras["bounded_objective"]``; compare() shows the gap to the true P6 optimum.  Its status
is about the problem given: ``converged`` only where the certificate of P6 at its kernel
confirms the gap within ``certify_rtol`` (the bound inactive), else ``optimal_inaccurate``
with the certified gap in the message (its own stopping rule, on the bounded problem, was
met: ``Result.claimed_status``); for the linear loss a kernel that violates P6's
``K_ii <= b_i`` is ``optimal_inaccurate`` (not a point of P6), saying by how much.

Linear loss (Hu & Kwok 2015, eqs. 6-8): the problem is ``min tr(A K)`` with
``A = L - gamma * T_sym / 2`` (docs/problems.md counts each pair once, so each pair's sign goes to
``(i, j)`` and ``(j, i)`` with half weight), whose solution is closed form::

    K = (B / tr(A_-^{p/(p-1)}))^{1/p} A_-^{1/(p-1)},     A_- = psd part of -A

``A_-`` comes from the most negative eigenpairs of the sparse ``A`` (Lanczos,
``scipy.sparse.linalg.eigsh``, more pairs requested until a nonnegative one shows up).

Other losses (square, squared hinge, hinge) by the saddle-point iteration of the paper:
write ``loss(z) = max_alpha alpha (1 - z) - h*(alpha)`` (square: ``h* = alpha^2 / 4``;
squared hinge: the same with ``alpha >= 0``; hinge: ``h* = 0``, ``0 <= alpha <= 1``), so that
for fixed ``alpha`` the problem in ``K`` is the linear case with
``A(alpha) = L - (gamma / 2) sum_p alpha_p T_p (E_ij + E_ji)``.  The dual function
``g(alpha) = gamma sum_p (alpha_p - h*(alpha_p)) + tr(A(alpha) K(alpha))`` is concave with
gradient ``gamma (1 - h*'(alpha_p) - T_p K(alpha)_p)`` (Danskin); projected gradient
ascent with Armijo backtracking, stopped when the duality gap of the bounded problem
``F_B(K(alpha)) - g(alpha)`` is below ``tol`` relative.

What it applies to, read from the canonical form (:func:`why_not`): P6 as docs/problems.md
states it, with ``L`` any sparse linear cost ``C`` and one loss term on entries ``K_ij``
(hinge, squared hinge, squared with targets +1 / -1, or linear with its bound block
``K_ii <= b_i``, which the bound ``tr(K^p) <= B`` replaces; the kernel scaled to meet
``K_ii <= b_i`` is reported in ``extras["scaled_objective"]``).
"""

from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..model import LE
from ..model.canonical import PSD_MINIMISATION
from ..problems import rank_rule
from ..problems.npkl import LOSSES
from ..result import LowRank, Status
from .base import IterativeSolver, SolverOutput
from .options import Interval, Rank

__all__ = ["SimpleNPKL", "TEST_RTOL", "negative_part"]

#: relative gap to a conic solve of the *bounded* problem that the tests require
TEST_RTOL = 1e-4
#: largest violation of the problem's ``K_ii <= b_i`` (relative to ``max(1, max b_i)``, the
#: constraint scale of kernelforms.report) at which the linear loss's closed form is a point
#: of the problem (the default ``vtol`` of compare)
DIAG_VTOL = 1e-5


class _Expired(Exception):
    """The deadline passed inside a Lanczos run (raised from its matrix-vector product)."""


def negative_part(A: sp.csr_matrix, k0: int, dense_below: int = 200,
                  deadline: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All negative eigenpairs of a sparse symmetric ``A``: ``(values, vectors)``, values < 0.

    Lanczos for the ``k`` smallest algebraic eigenvalues, doubling ``k`` until one of them
    is nonnegative (so none is missed); dense for small ``n``.  With a ``deadline``
    (a ``time.perf_counter()`` value) every product with ``A`` checks it, so a long
    Lanczos run stops within one product of it (:class:`_Expired`).
    """
    import scipy.sparse.linalg as ssla

    n = A.shape[0]
    k = max(1, min(k0, n - 2))
    op: Any = A
    if deadline is not None:
        def mv(x: np.ndarray) -> np.ndarray:
            if time.perf_counter() > deadline:
                raise _Expired
            return A @ x

        op = ssla.LinearOperator(A.shape, matvec=mv, matmat=mv, dtype=float)
    while True:
        if deadline is not None and time.perf_counter() > deadline:
            raise _Expired
        if n <= dense_below or k >= n - 1:
            w, V = np.linalg.eigh(A.toarray())
            break
        w, V = ssla.eigsh(op, k=k, which="SA", tol=1e-12, v0=np.ones(n) / math.sqrt(n))
        if w.max() >= 0:
            break
        k = min(2 * k, n - 1)
    neg = w < 0
    return w[neg], V[:, neg]


#: the losses SimpleNPKL has closed-form steps for: the loss's name -> its NPKL ``loss=`` name
#: (a squared loss with targets +1 / -1 is the square loss ``(1 - T_p K_ij)^2``)
STEP_LOSSES = {"hinge": "hinge", "squared_hinge": "squared_hinge", "linear": "linear",
               "squared": "square"}


def why_not(decl: Any, name: str = "simplenpkl") -> str | None:
    """Why SimpleNPKL does not apply to a declaration (None when it does), read from its
    canonical form (:func:`kernelforms.model.canonical`).

    Applies to P6 as docs/problems.md states it: minimise ``<C, K> + gamma sum_p
    loss(T_p K_ij)`` over K PSD with ``C`` sparse (the linear terms), **one** loss term on
    entries ``K_ij`` (hinge, squared hinge, linear, or squared with targets ``T_p = +1 / -1``,
    which is the square loss ``(1 - T_p K_ij)^2``), and no constraints, except that the
    linear loss needs its bound block ``K_ii <= b_i`` (which SimpleNPKL replaces by
    ``tr(K^p) <= B``; the kernel is then also reported scaled to meet it).
    """
    from ..model import RowKind, canonical

    decl = getattr(decl, "declaration", decl)
    what = (f"{name!r} solves min <C, K> + gamma sum_p loss(T_p K_ij) over K PSD (one loss term "
            "on entries: hinge, squared hinge, linear with K_ii <= b_i, or squared with targets "
            "+1/-1), with the bound tr(K^p) <= B added (Zhuang et al. 2011)")
    why = SimpleNPKL.capabilities.reason(decl, what)
    if why is not None:
        return why
    if len(decl.losses) != 1:
        return f"{what}; this problem has {len(decl.losses)} loss terms"
    t = decl.losses[0]
    can = canonical(decl)
    if not can.loss_kinds <= {RowKind.ENTRY, RowKind.DIAGONAL}:
        return f"{what}; its loss term is on {t.map.describe()}, not on entries K_ij"
    loss = STEP_LOSSES.get(t.loss.name)
    if loss is None:
        return f"{what}; this problem has a {t.loss.name} loss term"
    T = np.asarray(t.loss.row_data, dtype=float)
    if t.loss.is_squared and not np.all(np.abs(T) == 1):
        return (f"{what}; its squared loss has targets other than +1 / -1 (the square loss "
                "(1 - T_p K_ij)^2 needs T_p = +1 / -1)")
    if can.C is None:
        return (f"{what}; a linear term of this problem has a dense matrix "
                f"({', '.join(x.describe() for x in decl.linear)}), not a sparse C")
    if loss != "linear":
        if decl.constraints:
            return f"{what}; this problem has {decl.n_constraint_rows} constraint rows"
        return None
    cons = decl.constraints
    le = can.constraint_blocks.get(LE)
    if (len(cons) != 1 or can.general or set(can.constraint_blocks) != {LE}
            or not np.all(le.kind == RowKind.DIAGONAL) or not np.all(le.bound > 0)):
        return (f"{what}; with the linear loss it needs exactly one constraint block K_ii <= b_i "
                f"(b_i > 0), and this problem has "
                + ("none" if not cons else "; ".join(x.describe() for x in cons)))
    return None


def _pair_rows(problem: Any) -> tuple[Any, np.ndarray, np.ndarray, float, str]:
    """``(can, idx, T, gamma, loss)`` of a problem SimpleNPKL applies to: its canonical form,
    the pairs of its one loss term (the blocks on off-diagonal entries, then on ``K_ii``),
    their signs (labels, or the +1 / -1 targets of a squared loss), the term's weight and
    the step's loss name."""
    from ..model import canonical

    can = canonical(problem)
    blocks = can.loss_blocks  # one term: one block, or its entries and its K_ii rows
    idx = np.concatenate([b.pairs for b in blocks])
    T = np.concatenate([b.data for b in blocks])
    return can, idx, T, float(blocks[0].weight[0]), STEP_LOSSES[blocks[0].name]


def _solves(B: float, p: int, loss: str) -> str:
    """The problem SimpleNPKL solves by design, in words (``Result.solves``)."""
    return (f"the problem plus tr(K^{p}) <= {B:g}"
            + (", without K_ii <= b_i" if loss == "linear" else "") + " (SimpleNPKL)")


class SimpleNPKL(IterativeSolver):
    """``"simplenpkl"``: P6 with the added bound ``tr(K^p) <= B`` (see the module notes).

    Options
    -------
    B : float > 0
        The bound (Hu & Kwok 2015 use 100 on the small sets, 100 n on adult).
    p : int >= 2
        The power (Hu & Kwok 2015 use 2).
    max_iter : int >= 1
        Saddle-point iterations (non-linear losses).
    tol : float > 0
        Relative duality gap of the bounded problem at which to stop.
    step : float > 0
        Initial ascent step (halved by Armijo backtracking, grown by 1.5 on success, at
        most ``1e12``).
    rank : int in [1, n] or None
        Eigenpairs first requested from Lanczos (default: the rank rule + 1).
    threads : int >= 1 or None
        BLAS threads during the solve (``threadpoolctl``; None: no limit).  1 by default
        (threaded BLAS on the loaded 2-core test machine was up to 100x slower).

    With ``time_limit`` every Lanczos product and every backtracking step checks the
    deadline; on expiry the last accepted iterate is returned with status ``timeout``
    (no iterate at all if the first kernel was not finished).  A NaN or infinite dual
    value, gradient or objective stops the run with status ``numerical_error`` and the
    last finite iterate.
    """

    #: its stopping rule is about its own problem (ours plus ``tr(K^p) <= B``), so, as for every
    #: solver, ``converged`` stands only where the certificate of *ours* at its kernel confirms
    #: the gap within this (:func:`~kernelforms.solvers.base.certify_status`): when the bound is
    #: inactive at our optimum.  Otherwise the row is ``optimal_inaccurate``, its message giving
    #: the certified gap of our problem, and ``Result.claimed_status`` the replaced claim
    certify_rtol = 1e-4
    name = "simplenpkl"
    capabilities = PSD_MINIMISATION
    formulation_name = "P6 + tr(K^p) <= B, closed form / saddle point (SimpleNPKL)"
    defaults: ClassVar[dict[str, Any]] = {
        "B": 100.0,
        "p": 2,
        "max_iter": 5000,
        "tol": 1e-7,
        "step": 1.0,
        "rank": None,
        "threads": 1,
    }
    parameter_constraints: ClassVar[dict[str, list]] = {
        "B": [Interval(Real, 0, None, closed="neither")],
        "p": [Interval(Integral, 2, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "step": [Interval(Real, 0, None, closed="neither")],
        "rank": [Rank(), None],
        "threads": [Interval(Integral, 1, None, closed="left"), None],
    }

    def applies_to(self, problem: Any) -> str | None:
        return why_not(problem.declaration, self.name)

    def estimate_memory(self, problem: Any, opts: dict[str, Any]) -> int | None:
        """Peak bytes: ``K``'s factor and the saddle-point iterates (``O(n r + m)``), the sparse
        ``A(alpha)`` (the cost plus two entries per pair) and the negative part's eigensolve
        (:func:`negative_part`: dense up to 200 points; ARPACK above, whose ``k`` doubles
        from the rank until a nonnegative eigenvalue shows up: counted at ``4 r`` vectors,
        ``2 k + 1`` Lanczos vectors each)."""
        from . import memory as mm

        try:
            n = int(problem.n)
            if why_not(problem.declaration, self.name) is not None:
                return None
            can, idx, _, _, _ = _pair_rows(problem)
            m = int(len(idx))
            nnz = int(can.C.nnz) + 4 * m
            r = int(opts.get("rank") or rank_rule(m + n, n))
        except (AttributeError, TypeError, ValueError):
            return None
        k = min(n, 4 * max(r, 1))
        eig = mm.dense_eig_bytes(n) if n <= 200 else mm.F * n * (2 * k + 1) * 2
        return int(1.25 * (mm.F * (6 * n * k + 8 * m) + 3 * 12 * nnz) + eig)

    # ------------------------------------------------------------------ pieces
    @staticmethod
    def _A(C: sp.csr_matrix, idx: np.ndarray, gamma: float, coef: np.ndarray) -> sp.csr_matrix:
        """``C - (gamma / 2) sum_p coef_p (E_ij + E_ji)``."""
        n = C.shape[0]
        h = 0.5 * gamma * coef
        P = sp.csr_matrix((np.concatenate([h, h]), (np.concatenate([idx[:, 0], idx[:, 1]]),
                                                    np.concatenate([idx[:, 1], idx[:, 0]]))), shape=(n, n))
        return (C - P).tocsr()

    @staticmethod
    def _closed_form(w: np.ndarray, V: np.ndarray, B: float, p: int) -> np.ndarray:
        """Factor of ``K = (B / tr(A_-^{p/(p-1)}))^{1/p} A_-^{1/(p-1)}`` from A's negative pairs."""
        if w.size == 0:
            return np.zeros((V.shape[0], 1))
        a = -w  # eigenvalues of A_- (> 0)
        lam = a ** (1.0 / (p - 1))
        c = (B / float(np.sum(a ** (p / (p - 1))))) ** (1.0 / p)
        return V * np.sqrt(c * lam)

    def _solve(self, problem: Any, opts: dict[str, Any], rng: np.random.Generator,
               deadline: float | None) -> SolverOutput:
        from .._parallel import with_threads as blas_threads

        out = blas_threads(opts["threads"], self._saddle, problem, opts, deadline)
        # the report names the problem this kernel optimises (it is not the problem given)
        out.solves = _solves(float(opts["B"]), int(opts["p"]), _pair_rows(problem)[4])
        out.rank_used = None if out.factor is None else int(np.shape(out.factor)[1])
        return out

    def _saddle(self, problem: Any, opts: dict[str, Any], deadline: float | None) -> SolverOutput:
        B, p = float(opts["B"]), int(opts["p"])
        max_iter, tol = int(opts["max_iter"]), float(opts["tol"])
        can, idx, T, gamma, loss = _pair_rows(problem)  # run() checked applies_to
        C = sp.csr_matrix(can.C)
        m = len(idx)
        k0 = opts["rank"] or rank_rule(m, problem.n) + 1
        diag_block = can.constraint_blocks.get(LE)  # the linear loss's K_ii <= b_i
        solves = _solves(B, p, loss)
        history: dict[str, list] = {"dual": [], "bounded_objective": [], "gap": [], "step": []}
        log = self.iteration_log(opts, header=f"n = {problem.n}, {m} pairs, {loss} loss, B = {B:g}, p = {p} "
                                 "(objective: of the bounded problem)",
                                 residual="rel. gap", extra=("step",))

        def kernel(alpha: np.ndarray) -> tuple[np.ndarray, float]:
            A = self._A(C, idx, gamma, alpha * T)
            w, V = negative_part(A, k0, deadline=deadline)
            G = self._closed_form(w, V, B, p)
            return G, float(np.sum(G * (A @ G)))  # tr(A K)

        def bounded_obj(G: np.ndarray) -> float:
            K = LowRank(G)
            z = T * K.entries(idx[:, 0], idx[:, 1])
            return K.trace_with(C) + gamma * float(np.sum(LOSSES[loss](z)))

        def extras_of(G: np.ndarray | None, **more: Any) -> dict[str, Any]:
            ex: dict[str, Any] = {"B": B, "p": p, **more}
            if G is not None:
                ex.update(bounded_objective=bounded_obj(G),
                          trace_Kp=float(np.sum(np.linalg.svd(G, compute_uv=False) ** (2 * p))))
            return ex

        if loss == "linear":
            try:
                G, trAK = kernel(np.ones(m))
            except _Expired:
                return SolverOutput(None, Status.TIMEOUT, 0, history,
                                    "time limit reached before the closed form was computed", extras_of(None))
            fb = bounded_obj(G)
            log.row(1, objective=fb, rank=G.shape[1])
            extras = extras_of(G)
            # the same K scaled to meet K_ii <= b_i of P6 (linear objective: scaling is exact)
            points, bound = diag_block.i, diag_block.bound
            diag = np.einsum("ij,ij->i", G[points], G[points])
            pos = diag > 0
            if np.any(pos):
                s = min(1.0, float(np.min(bound[pos] / diag[pos])))
                extras["scaled_objective"] = problem.objective(LowRank(G * math.sqrt(s)))
            if not (math.isfinite(fb) and np.all(np.isfinite(G))):
                return SolverOutput(None, Status.NUMERICAL_ERROR, 1, history,
                                    f"non-finite closed form (bounded objective {fb})", extras)
            # the closed form drops our K_ii <= b_i: where it violates them the kernel is not a
            # point of our problem, and its stopping rule (exact) says nothing about ours
            over = diag - bound
            worst = float(np.max(over)) if over.size else 0.0
            scale = max(1.0, float(np.max(np.abs(bound))))
            if worst > DIAG_VTOL * scale:
                k = int(np.argmax(over))
                return SolverOutput(G, Status.OPTIMAL_INACCURATE, 1, history,
                                    f"closed form of the problem without K_ii <= b_i (Hu & Kwok 2015, "
                                    f"eq. 8); its kernel violates K_ii <= b_i of this problem by "
                                    f"{worst:.3g} (K[{int(points[k])}, "
                                    f"{int(points[k])}] = {float(diag[k]):.4g}): not a point "
                                    "of this problem", extras, claimed_status=Status.CONVERGED)
            return SolverOutput(G, Status.CONVERGED, 1, history, "closed form (Hu & Kwok 2015, eq. 8)", extras)

        # saddle point: alpha box and h*
        lo, hi = {"square": (-np.inf, np.inf), "squared_hinge": (0.0, np.inf), "hinge": (0.0, 1.0)}[loss]
        quad = loss in ("square", "squared_hinge")

        def dual(alpha: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
            G, trAK = kernel(alpha)
            hs = alpha**2 / 4 if quad else 0.0 * alpha
            g = gamma * float(np.sum(alpha - hs)) + trAK
            Kp = np.einsum("ij,ij->i", G[idx[:, 0]], G[idx[:, 1]])
            grad = gamma * (1.0 - (alpha / 2 if quad else 0.0) - T * Kp)
            return g, grad, G

        def finite(g: float, grad: np.ndarray) -> bool:
            return math.isfinite(g) and bool(np.all(np.isfinite(grad)))

        alpha = np.clip(np.ones(m), lo, hi)
        try:
            g, grad, G = dual(alpha)
        except _Expired:
            return SolverOutput(None, Status.TIMEOUT, 0, history,
                                "time limit reached before the first kernel was computed", extras_of(None))
        if not finite(g, grad):
            return SolverOutput(None, Status.NUMERICAL_ERROR, 0, history,
                                f"non-finite dual value {g} at the start", extras_of(None))
        step = float(opts["step"])
        status, message = Status.MAX_ITER, f"{max_iter} iterations"
        it = 0
        best = (math.inf, G, g)  # the best bounded objective seen, returned when not converged
        zero_kernels = 0  # K-steps that gave K = 0 (A(alpha) PSD: the bound not active)
        for it in range(1, max_iter + 1):
            fb = bounded_obj(G)
            if fb < best[0]:
                best = (fb, G, g)
            zero_kernels += G.shape[1] == 0 or not np.any(G)
            gap = (fb - g) / max(abs(fb), 1e-12)
            history["dual"].append(g)
            history["bounded_objective"].append(fb)
            history["gap"].append(gap)
            history["step"].append(step)
            log.row(it, objective=fb, residual=gap, rank=G.shape[1], step=step)
            if not math.isfinite(fb):
                status, message = Status.NUMERICAL_ERROR, f"non-finite bounded objective {fb} at iteration {it}"
                break
            if gap <= tol:
                status, message = Status.CONVERGED, f"duality gap {gap:.2e} of the bounded problem ({solves})"
                break
            if deadline is not None and time.perf_counter() > deadline:
                status, message = Status.TIMEOUT, "time limit reached"
                break
            accepted = False
            expired = False
            while step >= 1e-12:  # Armijo on the concave dual
                a_new = np.clip(alpha + step * grad, lo, hi)
                try:
                    g_new, grad_new, G_new = dual(a_new)
                except _Expired:
                    expired = True
                    break
                if finite(g_new, grad_new) and g_new >= g + 1e-4 * float(grad @ (a_new - alpha)):
                    accepted = True
                    break
                step *= 0.5
            if expired:
                status, message = Status.TIMEOUT, "time limit reached (in the line search)"
                break
            if not accepted:
                status, message = Status.NUMERICAL_ERROR, (
                    f"line search failed at iteration {it} (no ascent with a step >= 1e-12)")
                if zero_kernels:
                    message += (f"; {zero_kernels} of the {it} kernels were K = 0 (A(alpha) positive "
                                f"semidefinite), the others on the boundary tr(K^{p}) = {B:g}, as when the "
                                "optimum lies inside the bound, where SimpleNPKL's closed-form K-step "
                                "cannot stop (Zhuang et al. 2011 assume the bound active; the problem is "
                                "then the one given): use 'sdp', 'lowrank' or 'bcd', or a smaller B")
                break
            alpha, g, grad, G = a_new, g_new, grad_new, G_new
            step = min(1.5 * step, 1e12)
        if status is not Status.CONVERGED and best[0] < bounded_obj(G):
            _, G, g = best  # the best kernel seen, not the last one
        extras = extras_of(G, dual_value=g)
        return SolverOutput(G, status, it, history, message, extras)
