"""The dual SDP and recovery of the primal from it (Hoi et al. 2007).

The dual of a declaration (docs/problems.md) over ``K`` PSD with a sparse linear cost
``<C, K>``, loss terms and constraints on pair rows (entries ``K_ij`` or distances
``K_ii + K_jj - 2 K_ij``; :class:`~kernelforms.model.PairMap`), and no divergence::

    primal:  min <C, K> + sum_k w_k sum_p l_p(a_p . K)    s.t.  a_q . K {<=, ==, >=} b_q,  K PSD

With ``a_p . K = tr(A_p K)`` (``A_p = (e_i e_j^T + e_j e_i^T) / 2`` for an entry, ``e_i e_i^T``
on the diagonal, ``(e_i - e_j)(e_i - e_j)^T`` for a distance; every pair counted once) and
``Phi(lam) = sum_p lam_p A_p``, the Lagrange dual is::

    dual:    max  sum_p -w_p l_p*(-lam_p / w_p) + b^T nu   s.t.  M = C - Phi(lam) - Phi(nu) PSD

with ``nu_q <= 0`` on ``<=`` rows, ``nu_q >= 0`` on ``>=`` rows, free on ``==`` rows.  Each
loss term is written from the loss's own conjugate (:mod:`kernelforms.model.losses`): its
variable ``v`` (``lam``, or ``Q`` for a margin loss, with ``lam = s v``, ``s`` the loss's
``dual_scale``: the labels ``y`` for a margin loss), the bounds on ``v`` that keep
``-lam / w`` in ``conjugate_domain``, and the objective term ``-w cvx_conjugate(-lam / w)``:

=====================  ===============================  ==================================
loss                   variable, coefficient in Phi     dual objective term
=====================  ===============================  ==================================
squared ``(z - t)^2``  ``lam`` (free)                   ``t . lam - ||lam||^2 / (4 w)``
hinge                  ``Q``, ``0 <= Q <= w``; ``y Q``  ``sum Q``
squared hinge          ``Q >= 0``; ``y Q``              ``sum Q - ||Q||^2 / (4 w)``
logistic               ``Q``, ``0 <= Q <= w``; ``y Q``  ``w sum H(Q / w) + H(1 - Q / w)``
linear ``-y z``        none; the constant ``w y``       0
=====================  ===============================  ==================================

(``H(a) = -a log a``, the entropy: exponential cones.)  A loss whose conjugate domain is one
point (the linear loss) has no variable: its multiplier is a constant in ``M``.

Hinge NPKL (P6) is Hoi et al. 2007 eq. 3 (``L - Q o T``), soft PCP (P1) has
``max t^T lam - ||lam||^2 / (2 gamma)`` and hard PCP (P2) ``max t^T lam``, all with
``M = L - Phi(.)`` PSD; ``M`` is the multiplier of ``K PSD``.  The dual is written over the
declaration the chain of reductions leaves (:func:`kernelforms.model.chain`): a maximisation
is the minimisation of ``-objective`` (the chain's ``MaxToMin``: linear coefficients and loss
weights negated), and points that equality constraints force equal (P2's must-links) are
merged (``K = P K' P^T``), so that the primal has a strictly feasible point and the dual
optimum is attained; when the merge proves the constraints contradictory the original
points are kept, and the dual's being unbounded is reported as ``infeasible``.  The kernel
and the values go back through the chain's inverse (``G = P G'``, the value negated back).

Recovery (Hoi et al. 2007, "Efficient Dual Algorithm"): complementary slackness ``M K = 0`` puts
``range(K)`` inside the null space of ``M``.  With ``U`` (``n x k``) an orthonormal
basis of that null space, ``K = U B U^T`` and the *reduced primal* over the small PSD
``B`` (``k x k``, Hoi et al. 2007 eq. 6) is solved with the same conic solver.  The reduced
primal's objective equals the dual's to solver accuracy (reported in
``Result.extras``: ``dual_objective``, ``reduced_objective``, ``null_dim``).

The null space is the span of the eigenvectors of ``M`` with eigenvalue
``<= null_rtol * max(1, ||M||)`` (compile option ``null_rtol``, default
:data:`NULL_RTOL`).  Taking a few directions too many is harmless (the reduced
primal is still a restriction of the primal that contains its solution); too few
would cut the solution off, hence the generous default.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..model import EQ, GE, LE, PSD, Canonical, Capabilities, Constraint, Loss, Merged, RowKind, canonical
from ..result import LowRank, psd_factor
from .base import (Compiled, ConicData, Formulation, FormulationInverse, Lift, pair_operator,
                   program_size)
from .base import FIRST_ORDER_SOLVERS, LINEAR_AUTO_ORDER, ipm_bytes, ipm_order, svec_dim
from .full_sdp import compiled_declaration

#: eigenvalues of M below NULL_RTOL * max(1, ||M||_2) span its null space
NULL_RTOL = 1e-5
#: largest equation residual of the reduced primal's kernel (relative to max(1, |b|)) before
#: the restriction counts as inconsistent
EQ_RESIDUAL = 1e-6
#: eigenvalues of the solver's multiplier Z above RANGE_RTOL * max span its range
RANGE_RTOL = 1e-6



class DualTerm(NamedTuple):
    """One loss term of the dual: the term's ``map``, ``loss`` and ``weight`` (> 0, of the
    chain's minimisation), its multiplier variable ``var`` (None when the conjugate is finite
    at one point: a constant in ``M``) and ``coef``, the variable's expression in ``Phi``
    (``lam``, or ``y o Q`` for a margin loss; None with ``var``)."""

    map: Any
    loss: Loss
    weight: float
    var: Any
    coef: Any


class DualRows(NamedTuple):
    """One constraint block of the dual: the declaration's ``constraint`` and its
    multipliers ``nu`` (a CVXPY variable, one per row)."""

    constraint: Constraint
    nu: Any


@dataclass
class DualRecovery:
    """What :meth:`DualSDP.recover` measured (each None until the recovery reaches it):
    ``null_dim`` = dim null(M) at the threshold, ``min_eig_M``, ``rank_Z`` (the solver's
    multiplier of ``M PSD``, when it has one), ``basis_dim`` (the basis used), and the reduced
    primal's ``reduced_objective`` (in the problem's sense; NaN when null(M) is empty),
    ``reduced_status``, ``reduced_iterations`` and ``reduced_time`` (seconds)."""

    null_dim: int | None = None
    rank_Z: int | None = None
    basis_dim: int | None = None
    min_eig_M: float | None = None
    reduced_objective: float | None = None
    reduced_status: str | None = None
    reduced_iterations: int | None = None
    reduced_time: float | None = None


@dataclass
class DualInverse(FormulationInverse):
    """What :meth:`DualSDP.recover` needs (``Compiled.inverse`` of the dual).

    ``canonical``: the canonical form the dual is written over (its declaration merged, a
    minimisation; its chain maps the kernel and the values back); ``merged``: the chain's
    merge of points, or None; ``C0``: the cost ``C`` with the one-point conjugates' constants;
    ``P``: the sparse ``(n*n, multipliers)`` operator with ``vec(Phi(coef)) = P coef``, and
    ``coef`` the multipliers' expression (None, with ``P``, when there are none); ``M`` the
    expression ``C0 - Phi(coef)`` and ``psd`` the constraint ``M >> 0``; ``terms`` and
    ``rows``: the loss terms' and constraint blocks' multipliers (:class:`DualTerm`,
    :class:`DualRows`), in the declaration's order; ``null_rtol``: the null-space threshold;
    ``recovery``: what the last :meth:`DualSDP.recover` measured.
    """

    canonical: Canonical
    merged: Merged | None
    C0: Any
    P: Any
    coef: Any
    M: Any
    psd: Any
    terms: list[DualTerm]
    rows: list[DualRows]
    null_rtol: float
    recovery: DualRecovery = field(default_factory=DualRecovery)


def _dual_bounds(loss: Any, w: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Bounds ``lo <= v <= hi`` on the dual variable ``v`` of a loss term of weight ``w``
    (``lam = s v`` with ``-lam / w`` in the conjugate's domain), or None when the domain is
    one point (no variable: the multiplier is the constant ``-w s u``)."""
    ulo, uhi = loss.conjugate_domain()
    if np.array_equal(ulo, uhi):
        return None
    s = loss.dual_scale
    a, b = -w * s * ulo, -w * s * uhi  # v = -w s u (s = +-1)
    with np.errstate(invalid="ignore"):
        return np.fmin(a, b) + 0.0, np.fmax(a, b) + 0.0


def _bound_expr(v: np.ndarray) -> Any:
    """A bound vector as a scalar when it is one value (``Q >= 0`` rather than a vector)."""
    return float(v[0]) if v.size and np.all(v == v[0]) else v


#: largest (merged) n for which the size model finds the chordal cliques of M's pattern
#: (beyond it the n x n block is assumed: Clarabel is far out of reach there anyway)
CHORDAL_MAX_N = 3000

_CLIQUES: dict[str, Any] = {}


def dual_cliques(problem: Any) -> tuple[int, ...] | None:
    """Sizes of the maximal cliques of a chordal extension of the dual's ``M`` pattern
    (``C`` plus every entry a pair row touches, over the merged points), from a symbolic
    minimum-degree elimination (SuperLU's MMD ordering); None when the dual does not apply
    or ``n > CHORDAL_MAX_N``.

    Clarabel's chordal decomposition splits ``M PSD`` along such cliques, and its peak
    memory follows ``sum svec(c)^2`` at the IPM_BYTES_PER_ENTRY of the dense model: hard
    PCP 256 merged pendigits points 658 MB (1.68e7 entries), 411 merged two-Gaussian
    points 4.84 GB (1.62e8), soft PCP on 214 glass points 1.43 GB (4.84e7), 27-34 bytes an
    entry; the n x n model said 200 GiB and 14.8 GiB for the last two.
    """
    from ..util import last_result

    if DualSDP.capabilities.why(problem, HEAD, WHO) is not None:
        return None
    return last_result(_CLIQUES, compiled_declaration(problem.declaration), _cliques_of)


def _cliques_of(decl: Any) -> tuple[int, ...] | None:
    """The computation of :func:`dual_cliques` for the (compiled) declaration of a problem
    the dual applies to (its losses and constraints on pair rows)."""
    import scipy.sparse.linalg as sla

    if decl.n > CHORDAL_MAX_N:
        return None
    n = decl.n
    # M's pattern: C and every entry a row's A_p touches (pair_operator writes vec(A_p))
    P = [pair_operator(m) for m in [t.map for t in decl.losses] + [c.map for c in decl.constraints]]
    idx = np.concatenate([Pm.nonzero()[0] for Pm in P]) if P else np.zeros(0, int)
    C = decl.cost_matrix().tocoo()
    r, c = np.concatenate([C.row, idx // n]), np.concatenate([C.col, idx % n])
    A = sp.csr_matrix((np.ones(len(r)), (r, c)), shape=(n, n))
    A = ((A + A.T) != 0).astype(float)
    # diagonally dominant: the elimination follows the ordering, no pivoting
    S = sp.csc_matrix(A + sp.diags(np.asarray(A.sum(axis=1)).ravel() + 1.0))
    lu = sla.splu(S, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                  options={"SymmetricMode": True})
    L = lu.L.tocsc()
    L.sort_indices()
    counts = np.diff(L.indptr)  # column j's clique: j and the rows below it
    maximal = np.ones(n, bool)
    for col in range(n):  # clique(parent) is inside clique(col) when it is one smaller
        below = L.indices[L.indptr[col]:L.indptr[col + 1]]
        below = below[below > col]
        if below.size and counts[below[0]] == counts[col] - 1:
            maximal[below[0]] = False
    return tuple(int(x) for x in sorted(counts[maximal], reverse=True))


#: bytes the dual's memory model adds to the solver's own (see :meth:`DualSDP.estimate_memory`)
DUAL_MEMORY_SHARE = 0.6
DUAL_MEMORY_FIXED = 48 * 2**20


#: the dual's "does not apply" sentences (worded by :meth:`Capabilities.why` from the mismatch)
HEAD = "the dual (Hoi et al. 2007) is written over K PSD (n x n) with no divergence"
WHO = "the dual (Hoi et al. 2007)"


def _note(ch: Any) -> str:
    """What the chain of reductions did that the compiled program's notes say: the merge
    of points forced equal, or the contradiction it proved (the dual is then unbounded)."""
    if ch.conflict is not None:
        return (f"{ch.conflict} (the problem is infeasible and the dual unbounded)"
                if "infeasible" not in ch.conflict else ch.conflict)
    return ch.merged.note if ch.merged is not None else ""


class DualSDP(Formulation):
    """``"dual"``: the Lagrange dual (Hoi et al. 2007) and the primal recovered from it.

    One PSD block ``n x n`` (the constraint ``M PSD``), one scalar variable per loss row and
    constraint row (none for a linear loss), bounds ``0 <= Q <= w`` for the hinge loss.
    """

    name = "dual"
    title = "DualSDP"
    #: K PSD, either sense, no divergence, a sparse cost, losses and constraints on pair rows
    #: (the centring row is not one)
    capabilities = Capabilities(forms=(PSD,), senses=("min", "max"), sparse_cost=True,
                                loss_rows=(RowKind.ENTRY, RowKind.DIAGONAL, RowKind.DISTANCE),
                                rows_word="entries or distances of K (pair rows)",
                                pair_constraints=True, advice=": use 'sdp'")

    def auto_kkt_order(self, problem: Any) -> int | None:
        # without loss terms (hard PCP) LINEAR_AUTO_ORDER: Clarabel solved the dual of 97 /
        # 256 merged points in 0.3 / 12 s, SCS took 149 s / timed out at 300 s.  With
        # losses the common limit: SCS solved soft PCP on 208 sonar points in 4.6 s
        # (Clarabel 87 s) but timed out at 300 s on 214 glass points (Clarabel 50 s)
        return None if compiled_declaration(problem.declaration).losses else LINEAR_AUTO_ORDER

    def applies_to(self, problem: Any) -> str | None:
        return self.capabilities.why(problem, HEAD, WHO)

    def describe(self, problem: Any) -> str:
        n = compiled_declaration(problem.declaration).n
        merged = "" if n == problem.declaration.n else f" (over {n} merged points of {problem.declaration.n})"
        return (f"a dual SDP with an {n} x {n} PSD block{merged} (plus a reduced primal over the "
                "null space)")

    def kkt_order(self, problem: Any) -> int | None:
        # Clarabel (the automatic choice's interior-point solver) splits M PSD along a
        # chordal extension of M's sparsity pattern (its chordal decomposition, on by
        # default), so its dense blocks are the cliques of that extension, not the n x n
        # block (over the merged points when the chain merges some)
        cliques = dual_cliques(problem)
        return ipm_order(cliques if cliques is not None else (compiled_declaration(problem.declaration).n,))

    def estimate_memory(self, problem: Any, solver: str = "CLARABEL") -> int | None:
        """As :meth:`Formulation.estimate_memory`, with Clarabel's chordal decomposition of
        ``M PSD`` (:func:`dual_cliques`); another interior-point solver gets the n x n block.
        Plus :data:`DUAL_MEMORY_SHARE` of it (at most :data:`DUAL_MEMORY_FIXED`) and 2 MiB:
        the solver's model alone stayed below the peak resident memory of a whole solve
        (the CVXPY program and the primal's recovery too) by up to 55% and 37 MiB (digits P1,
        60-150 points: 209 MiB measured at 150 points; 1.43 GB at 214 glass points)."""
        name = str(solver).upper()
        if name == "CLARABEL" or name in FIRST_ORDER_SOLVERS:
            base = super().estimate_memory(problem, solver)
        else:
            base = ipm_bytes((compiled_declaration(problem.declaration).n,))
        return None if base is None else int(base + min(DUAL_MEMORY_SHARE * base, DUAL_MEMORY_FIXED) + 2**21)

    def conic_data(self, problem: Any) -> ConicData | None:
        decl = compiled_declaration(problem.declaration)
        n, p = decl.n, int(decl.n_loss_rows + decl.n_constraint_rows)
        d = svec_dim(n)
        # M = C - Phi(lam): one PSD row per entry of svec(M), each multiplier in one entry;
        # the hinge bounds add 2p rows
        return ConicData(nnz=d + 4 * p, rows=d + 3 * p, psd=(n,))

    # ------------------------------------------------------------------ compile
    @staticmethod
    def _loss_terms(can: Any) -> list:
        """``(map, loss, weight > 0)`` of each loss term the dual is written over: the
        canonical form's declaration's (merged, a minimisation), in its order."""
        return [(t.map, t.loss, t.weight) for t in can.decl.losses]

    def compile(self, problem: Any, **options: Any) -> Compiled:
        import cvxpy as cp

        null_rtol = float(options.pop("null_rtol", NULL_RTOL))
        if options:
            raise SolverError(f"DualSDP compile options are 'null_rtol'; got {sorted(options)}")
        from ..errors import NotApplicable

        why = self.applies_to(problem)
        if why is not None:
            raise NotApplicable(f"method 'dual' does not apply: {why}")
        can = canonical(problem.declaration)  # over the chain's declaration: merged, a minimisation
        red = can.decl
        n = red.n
        C0 = can.C
        coefs, ops, objs, cons = [], [], [], []
        n_mult = 0
        terms: list[DualTerm] = []
        rows: list[DualRows] = []
        for m, loss, w in self._loss_terms(can):
            bounds = _dual_bounds(loss, w)
            if bounds is None:  # l* is finite at one point: a constant in M
                u0 = loss.conjugate_domain()[0]
                C0 = (C0 + m.adjoint(w * u0)).tocsr()
                terms.append(DualTerm(m, loss, w, None, None))
                const = -w * float(np.sum(loss.conjugate(u0)))
                if const != 0.0:
                    objs.append(cp.Constant(const))
                continue
            ops.append(pair_operator(m))
            n_mult += m.size
            var = cp.Variable(m.size, name=loss.dual_name)
            scale = loss.dual_scale
            lam = var if np.all(scale == 1.0) else cp.multiply(scale, var)
            coefs.append(lam)
            terms.append(DualTerm(m, loss, w, var, lam))
            lo, hi = bounds
            for side, b in (("lo", lo), ("hi", hi)):
                fin = np.flatnonzero(np.isfinite(b))
                if fin.size:
                    v = var if fin.size == m.size else var[fin]
                    cons.append(v >= _bound_expr(b[fin]) if side == "lo" else v <= _bound_expr(b[fin]))
            objs.append(-w * loss.cvx_conjugate(-lam / w))
        for c in red.constraints:
            nu = cp.Variable(c.size, name="nu" if red.losses else "lam")
            ops.append(pair_operator(c.map))
            n_mult += c.size
            coefs.append(nu)
            rows.append(DualRows(c, nu))
            objs.append(c.bound @ nu)
            for sense, op in ((LE, "le"), (GE, "ge")):
                sel = np.flatnonzero(c.sense == sense)
                if sel.size:
                    v = nu if sel.size == c.size else nu[sel]
                    cons.append(v <= 0 if op == "le" else v >= 0)
        if coefs:
            coef = coefs[0] if len(coefs) == 1 else cp.hstack(coefs)
            Pmat = ops[0] if len(ops) == 1 else sp.hstack(ops).tocsr()
            M = C0 - cp.reshape(Pmat @ coef, (n, n), order="F")
        else:
            coef, Pmat, M = None, None, cp.Constant(C0.toarray())
        cons.append(M >> 0)
        obj = objs[0] if len(objs) == 1 else (cp.sum(cp.hstack(objs)) if objs else cp.Constant(0.0))
        prog = cp.Problem(cp.Maximize(obj), cons)
        data = DualInverse(canonical=can, merged=can.chain.merged, C0=C0, P=Pmat, coef=coef, M=M,
                           psd=cons[-1], terms=terms, rows=rows, null_rtol=null_rtol)
        notes = [f"dual over {n_mult} multipliers; primal recovered on the null space of M"]
        if _note(can.chain):
            notes.append(_note(can.chain))
        return Compiled(prog, data, program_size(prog), notes)

    # ------------------------------------------------------------------ recovery
    def duals(self, compiled: Compiled) -> dict[str, Any] | None:
        """The dual program's variables are the primal's multipliers: ``M = C - Phi(coef)``
        with ``Phi(coef) = -(sum_k A_k*(w_k u_k) + A*(y))``, so a loss row's slope is
        ``u = -lam / w`` (squared), ``-t Q / w`` (hinge and squared hinge: ``Q`` in ``[0, w]``)
        and a constraint row's multiplier ``y = -nu``.  None after a merge of points (its
        rows are the merged declaration's)."""
        inv: DualInverse = compiled.inverse
        if inv.merged is not None:
            return None
        decl = inv.canonical.decl
        if len(inv.terms) != len(decl.losses) or len(inv.rows) != len(decl.constraints):
            return None
        losses: list = []
        for m, loss, w, var, _ in inv.terms:
            v = None if var is None else var.value
            if v is None:
                losses.append(None)
                continue
            v = np.asarray(v, dtype=float).ravel()
            losses.append(-loss.dual_scale * v / w)  # lam = dual_scale * v, slope u = -lam / w
        cons: list = []
        for c, nu in inv.rows:
            v = nu.value
            cons.append(None if v is None else -np.asarray(v, dtype=float).ravel())
        if all(x is None for x in losses + cons):
            return None
        return {"constraints": cons, "losses": losses}

    def _multiplier(self, compiled: Compiled) -> np.ndarray:
        """``M = C - Phi(lam)`` (``Q o T`` for the hinge loss) at the solver's dual point."""
        inv: DualInverse = compiled.inverse
        C0 = inv.C0
        n = C0.shape[0]
        Cd = C0.toarray() if sp.issparse(C0) else np.asarray(C0)
        if inv.coef is None:
            return Cd
        coef = inv.coef.value
        if coef is None:
            raise ValueError("the dual variable has no value")
        Phi = (inv.P @ np.asarray(coef, float)).reshape(n, n)
        return Cd - Phi

    def null_basis(self, compiled: Compiled) -> np.ndarray:
        """Orthonormal ``U`` spanning null(M) (and the range of the solver's multiplier of M PSD)."""
        inv: DualInverse = compiled.inverse
        rec = inv.recovery
        M = self._multiplier(compiled)
        w, V = np.linalg.eigh((M + M.T) / 2)
        tol = inv.null_rtol * max(1.0, float(np.abs(w).max()))
        U = V[:, w <= tol]
        rec.null_dim = U.shape[1]
        rec.min_eig_M = float(w[0])
        # Which basis of that null space: the eigenvectors of M computed at interior-point
        # accuracy are off by ~ accuracy / (smallest nonzero eigenvalue of M), which
        # measured 2e-5 on a 40-point hinge instance (docs/formulations.md), enough to move
        # the reduced primal's objective by 5e-6 relative.  The solver's multiplier Z of
        # "M PSD" satisfies M Z = 0 too (so range(Z) = null(M) in exact arithmetic) and
        # its leading eigenvectors are far better conditioned (gap = smallest nonzero
        # eigenvalue of K).  So: k = dim null(M) as counted above (or rank Z if larger),
        # and U = the k leading eigenvectors of Z.
        Z = inv.psd.dual_value
        if Z is not None:
            Z = np.asarray(Z, float)
            wz, Vz = np.linalg.eigh((Z + Z.T) / 2)
            rank_z = int(np.sum(wz > RANGE_RTOL * max(float(wz.max(initial=0.0)), 1e-300)))
            k = max(U.shape[1], rank_z)
            rec.rank_Z = rank_z
            U = Vz[:, ::-1][:, :k]
        rec.basis_dim = U.shape[1]
        return U

    def recover(self, compiled: Compiled) -> LowRank:
        import cvxpy as cp

        inv: DualInverse = compiled.inverse
        inv.recovery, inv.recovery_note = DualRecovery(), None  # this recovery's, not a former one's
        rec = inv.recovery
        ch = inv.canonical.chain
        decl = ch.reduced  # the chain's declaration: a minimisation, merged
        U = self.null_basis(compiled)
        k = U.shape[1]
        if k == 0:
            rec.reduced_objective = float("nan")  # M is positive definite: K = 0
            return LowRank(ch.invert_factor(np.zeros((decl.n, 1))))
        B = cp.Variable((k, k), PSD=True, name="B")
        b = cp.vec(B, order="F")
        parts = []
        C = decl.cost_matrix()
        if decl.linear:
            parts.append(cp.trace((U.T @ (C @ U)) @ B))
        for t in decl.losses:
            val = t.loss.cvx(t.map.functionals(U) @ b)
            parts.append(val if t.weight == 1.0 else t.weight * val)
        obj = parts[0] if len(parts) == 1 else sum(parts[1:], parts[0])
        cons = []
        eq_A, eq_b = [], []
        for c in decl.constraints:
            A = c.map.functionals(U)
            eq = c.sense == EQ
            if np.any(eq):
                eq_A.append(A[eq]); eq_b.append(c.bound[eq])
            for sense in (LE, GE):
                sel = c.sense == sense
                if np.any(sel):
                    v = A[sel] @ b
                    cons.append(v <= c.bound[sel] if sense == LE else v >= c.bound[sel])
        Amat = rhs = None
        if eq_A:
            # p equations in k(k+1)/2 unknowns: dependent, and (at solver accuracy) very
            # slightly inconsistent.  Keep the independent combinations (SVD), whose
            # least-squares right-hand side is consistent.
            Amat, rhs = np.concatenate(eq_A), np.concatenate(eq_b)
            W, sv, _ = np.linalg.svd(Amat, full_matrices=False)
            W = W[:, sv > 1e-9 * max(float(sv.max(initial=0.0)), 1e-300)]
            cons.insert(0, (W.T @ Amat) @ b == W.T @ rhs)
        red = cp.Problem(cp.Minimize(obj), cons)
        stats = compiled.program.solver_stats
        solver = stats.solver_name if stats is not None else None
        t0 = time.perf_counter()
        try:
            red.solve(solver=solver, verbose=False)
        except cp.error.SolverError as exc:
            raise ValueError(f"the reduced primal failed: {exc}") from exc
        rec.reduced_time = time.perf_counter() - t0
        rec.reduced_status = red.status
        rec.reduced_iterations = red.solver_stats.num_iters if red.solver_stats else None
        rec.reduced_objective = ch.invert_value(red.value)  # the original's sense
        why = None if B.value is not None and red.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) \
            else f"ended {red.status}"
        if why is None and Amat is not None:
            # the combinations kept are consistent by construction, so an inconsistent
            # restriction would pass as "optimal": check the equations themselves
            resid = float(np.max(np.abs(Amat @ np.asarray(B.value).reshape(-1, order="F") - rhs)))
            if resid > EQ_RESIDUAL * max(1.0, float(np.max(np.abs(rhs)))):
                why = f"missed its equations by {resid:.2g}"
        if why is not None:
            # The null space is computed at interior-point accuracy: K* may need directions
            # whose eigenvalues of M lie just above the threshold, and the restriction is
            # then infeasible (hard PCP on 142 glass points: M's eigenvalues 4.3e-5, 9.6e-4,
            # K*'s tail 1.8e-3, 1.1e-4; wider bases of 10-16 columns were still
            # infeasible_inaccurate for Clarabel).  The solver's multiplier Z of "M PSD" is
            # the primal kernel of the same conic solve (there: objective 7e-8 from the full
            # SDP's, violation 2e-10), so it is returned instead, and the extras say so.
            Z = inv.psd.dual_value
            if Z is None:
                raise ValueError(f"the reduced primal over the null space {why}")
            inv.recovery_note = (f"kernel from the solver's multiplier of M PSD (the reduced "
                                    f"primal over the {k}-column null space {why})")
            G = psd_factor((np.asarray(Z, float) + np.asarray(Z, float).T) / 2)
        else:
            G = U @ psd_factor(B.value)
        return LowRank(ch.invert_factor(G))

    def recovered_extras(self, compiled: Compiled) -> dict[str, Any]:
        inv: DualInverse = compiled.inverse
        rec = inv.recovery
        value = compiled.program.value  # the dual of the chain's minimisation
        solved = rec.reduced_status is not None  # the reduced primal ran
        out = {"null_dim": rec.null_dim, "rank_Z": rec.rank_Z, "basis_dim": rec.basis_dim,
               "recovery_note": inv.recovery_note, "min_eig_M": rec.min_eig_M}
        out = {key: v for key, v in out.items() if v is not None}
        if solved or rec.reduced_objective is not None:
            out["reduced_objective"] = rec.reduced_objective
        if solved:
            out |= {"reduced_status": rec.reduced_status, "reduced_iterations": rec.reduced_iterations,
                    "reduced_time": rec.reduced_time}
        return out | {"dual_objective": inv.canonical.chain.invert_value(value)}

    def primal_status(self, status: Any) -> Any:
        """The dual's verdict read for the primal: dual unbounded = primal infeasible."""
        from ..result import Status

        if status is Status.UNBOUNDED:
            return Status.INFEASIBLE
        if status is Status.INFEASIBLE:
            return Status.UNBOUNDED
        return status

    # ------------------------------------------------------------------ explain / verify
    def explain(self, problem: Any, compiled: Compiled):
        """The dual SDP with this instance's numbers (one multiplier block per loss term and
        constraint block, the PSD constraint on ``M``, and the recovery on null(M))."""
        from .base import Item, Math, ProgramDescription, _fmt, count_rows, map_math

        inv: DualInverse = compiled.inverse
        can = inv.canonical
        n = can.n
        K = Math("K", "K") if inv.merged is None else Math("K'", "K'")
        variables, obj_l, obj_t, phi_l, phi_t, cons, data = [], [], [], [], [], [], []
        for idx, (m, loss, w, var, _) in enumerate(inv.terms, start=1):
            row, note = map_math(m, K)
            wl = _fmt(w)
            if var is None:
                data.append(Item(Math(rf"C_0 = C - {wl} \, \Phi(y^{{({idx})}})",
                                      f"C0 = C - {wl} Phi(y^({idx}))"),
                                 f"the {loss.name} loss on {row.text} ({note}): its conjugate is finite at "
                                 "one point, a constant in M"))
                continue
            v = f"{var.name()}^{{({idx})}}"
            vt = f"{var.name()}^({idx})"
            lo, hi = _dual_bounds(loss, w)
            lo_s, hi_s = _bound_expr(lo), _bound_expr(hi)
            free = not np.any(np.isfinite(lo)) and not np.any(np.isfinite(hi))
            variables.append(Item(Math(rf"{v} \in \mathbb{{R}}^{{{m.size}}}", f"{vt} in R^{m.size}"),
                                  ("free; " if free else "") + f"{loss.name} loss on {row.text} ({note})"))
            if not free:
                if isinstance(lo_s, float) and isinstance(hi_s, float) and np.isfinite(lo_s) and np.isfinite(hi_s):
                    bound = Math(rf"{_fmt(lo_s)} \le {v} \le {_fmt(hi_s)}", f"{_fmt(lo_s)} <= {vt} <= {_fmt(hi_s)}")
                elif isinstance(lo_s, float) and np.isfinite(lo_s) and not np.any(np.isfinite(hi)):
                    bound = Math(rf"{v} \ge {_fmt(lo_s)}", f"{vt} >= {_fmt(lo_s)}")
                elif isinstance(hi_s, float) and np.isfinite(hi_s) and not np.any(np.isfinite(lo)):
                    bound = Math(rf"{v} \le {_fmt(hi_s)}", f"{vt} <= {_fmt(hi_s)}")
                else:
                    bound = Math(rf"-{v} / {wl} \in \mathrm{{dom}}\, \ell^*", f"-{vt} / {wl} in dom l*")
                k = int(np.count_nonzero(np.isfinite(lo)) + np.count_nonzero(np.isfinite(hi)))
                cons.append(Item(bound, f"{k} rows"))
            lat, txt = loss.dual_math(v, vt, wl)
            obj_l.append(lat); obj_t.append(txt)
            if np.all(loss.dual_scale == 1.0):
                phi_l.append(rf"\Phi({v})"); phi_t.append(f"Phi({vt})")
            else:
                phi_l.append(rf"\Phi(y \circ {v})"); phi_t.append(f"Phi(y o {vt})")
        for c, nu in inv.rows:
            row, note = map_math(c.map, K)
            v, vt = nu.name(), nu.name()
            variables.append(Item(Math(rf"{v} \in \mathbb{{R}}^{{{c.size}}}", f"{vt} in R^{c.size}"),
                                  f"multipliers of {row.text} (b) ({note})"))
            obj_l.append(rf"b^T {v}"); obj_t.append(f"b^T {vt}")
            phi_l.append(rf"\Phi({v})"); phi_t.append(f"Phi({vt})")
            for sense, txt in ((LE, "<= 0 on its <= rows"), (GE, ">= 0 on its >= rows")):
                k = int(np.count_nonzero(c.sense == sense))
                if k:
                    op = (r"\le", "<=") if sense == LE else (r"\ge", ">=")
                    cons.append(Item(Math(rf"{v} {op[0]} 0", f"{vt} {op[1]} 0"), f"{k} rows ({txt})"))
        C = "C_0" if any(t.var is None for t in inv.terms) else "C"
        Mlat = rf"M = {C} - " + " - ".join(phi_l) if phi_l else f"M = {C}"
        Mtxt = f"M = {C.replace('_', '')} - " + " - ".join(phi_t) if phi_t else f"M = {C}"
        cons.insert(0, Item(Math(Mlat + r" \succeq 0", Mtxt + " PSD"), f"PSD block {n} x {n}"))
        Cn = can.C.nnz
        data.insert(0, Item(Math(rf"C \in \mathbb{{S}}^{{{n}}}", f"C in S^{n}"),
                            f"the linear cost <C, K> ({Cn} nonzeros)" + (
                                ", negated: the declaration is a maximisation" if can.sign < 0 else "")))
        data.append(Item(Math(r"\Phi(\lambda) = \sum_p \lambda_p A_p", "Phi(lam) = sum_p lam_p A_p"),
                         "A_p = (e_i e_j^T + e_j e_i^T) / 2 for an entry, (e_i - e_j)(e_i - e_j)^T "
                         "for a distance: <A_p, K> is the row's value"))
        obj = Math(" + ".join(obj_l) if obj_l else "0", " + ".join(obj_t) if obj_t else "0")
        eq, ineq = count_rows(compiled.program)
        nvar = int(sum(v.size for v in compiled.program.variables()))
        sizes = [("PSD block (M)", n), ("multipliers", nvar), ("equality rows", eq),
                 ("inequality rows", ineq)]
        rec = Item(Math(r"K = U B U^T", "K = U B U^T"),
                   "U an orthonormal basis of null(M) (the leading eigenvectors of the multiplier "
                   "of M PSD), B from the reduced primal over B PSD (a second, small conic solve)"
                   + ("; then K = P K' P^T over the merged points" if inv.merged is not None else ""))
        rel = ("the dual's value is a lower bound on the problem's objective (weak duality); for any "
               "multipliers in their domains and any K, f(K) - D = <M, K> + the Fenchel-Young gaps of "
               "the losses + sum_q nu_q (a_q.K - b_q), the identity verify checks")
        notes = list(compiled.notes)
        cones = [Item(Math(rf"\mathbb{{S}}_+^{{{n}}}", f"PSD {n} x {n}"), "M")]
        exp_rows = sum(t.map.size * t.loss.exp_cone for t in inv.terms if t.var is not None)
        if exp_rows:
            names = sorted({t.loss.name for t in inv.terms if t.var is not None and t.loss.exp_cone})
            cones.append(Item(Math(r"\mathcal{K}_{\exp}", "exponential cones"),
                              f"the conjugates of the {', '.join(names)} loss rows: {exp_rows} cones"))
        return ProgramDescription(self.name, "Dual SDP (Hoi et al. 2007)", "max", variables, data,
                                  obj, cons, cones,
                                  sizes, rec, rel, notes)

    def lift(self, compiled: Compiled, K: np.ndarray) -> Lift:
        """Not defined: the dual's variables are multipliers, not a function of K
        (:func:`kernelforms.verify` draws them with :meth:`draw_multipliers`)."""
        raise NotImplementedError("the dual's variables are multipliers, not a function of K; "
                                  "draw them with draw_multipliers()")

    def primal_coordinates(self, compiled: Compiled, K: np.ndarray) -> np.ndarray:
        """The kernel the dual is written over: K, or ``K' = P^+ K P^{+T}`` after a merge."""
        m = compiled.inverse.merged
        K = np.asarray(K, dtype=float)
        if m is None:
            return K
        Pp = np.linalg.pinv(m.P.toarray())
        return Pp @ K @ Pp.T

    def draw_multipliers(self, compiled: Compiled, rng: np.random.Generator) -> Lift:
        """Random multipliers in their domains (the bounds :func:`_dual_bounds` reads from each
        loss's ``conjugate_domain``: free for a squared loss, ``[0, w]`` for the hinge and the
        logistic loss, ``>= 0`` for the squared hinge; the sign of each constraint row's sense)."""
        values = {}
        for m, loss, w, var, _ in compiled.inverse.terms:
            if var is None:
                continue
            lo, hi = _dual_bounds(loss, w)
            x = rng.normal(size=m.size)
            fl, fh = np.isfinite(lo), np.isfinite(hi)
            # uniform on a finite interval, |normal| from a finite end, normal when free
            values[var] = np.where(fl & fh, lo + rng.uniform(size=m.size) * (hi - lo),
                                   np.where(fl, np.nan_to_num(lo) + np.abs(x),
                                            np.where(fh, np.nan_to_num(hi) - np.abs(x), x)))
        for c, nu in compiled.inverse.rows:
            x = rng.normal(size=c.size)
            values[nu] = np.where(c.sense == LE, -np.abs(x), np.where(c.sense == GE, np.abs(x), x))
        return Lift(values)
