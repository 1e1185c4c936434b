"""The full SDP: any declaration written directly over its PSD matrix variable.

The reference every other method is checked against, so it compiles every
:class:`~kernelforms.model.Declaration` (the problems of docs/problems.md and a user's own
:class:`~kernelforms.DeclaredProblem`):

* the kernel's form gives the one PSD variable: ``K`` itself (``n x n``) for
  :class:`~kernelforms.model.PSD`; ``Y`` (``k x k``) with ``K = B Y B^T`` for
  :class:`~kernelforms.model.Basis`; ``W`` (``r x r``) on the range of ``K0`` for
  :class:`~kernelforms.model.Range`.  Over ``Y`` / ``W`` every linear map is written as its
  functionals of ``vec(Y)`` (``map.functionals(B)``), over ``K`` as ``map.cvx(K)``;
* linear terms ``<c, A(K)>``; loss terms ``weight * loss.cvx(A(K))`` (squared terms with
  ``sum_squares``, which CVXPY turns into one second-order cone, hinge losses with ``pos``);
  constraints ``A(K) {<=, ==, >=} b`` row by row; ``min`` or ``max``;
* the divergence of the Range form: Burg as ``tr(W) - log_det(W) - r`` with
  ``K = V0 diag(sqrt(lam0)) W diag(sqrt(lam0)) V0^T``, von Neumann with CVXPY's
  ``von_neumann_entr`` on ``K = V0 (s W) V0^T``, ``s = mean(lam0)`` (see :meth:`FullSDP._range`).

Points that equality constraints force equal (hard PCP's must-links) are merged first
(the chain of reductions, :func:`kernelforms.model.chain`): the problem over the merged points is
exact and has a strictly feasible point, which the original does not.  When the merge
proves the constraints contradictory, the compiled program is that contradiction
(``0 == 1``): the solve reports ``infeasible`` at once, with the reason in the notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import EQ, GE, LE, PSD, Basis, Capabilities, Declaration, Merged, Range, VonNeumann, chain
from ..result import LowRank, psd_factor
from .base import (LINEAR_AUTO_ORDER, Compiled, ConicData, Formulation, FormulationInverse, Item,
                   Lift, Math, ProgramDescription, constraint_items, count_rows, program_size,
                   tagged_duals, terms_math)


@dataclass
class FullSDPInverse(FormulationInverse):
    """What :meth:`FullSDP.recover` needs (``Compiled.inverse`` of the full SDP).

    ``decl``: the declaration the program states (over the merged points after a merge).
    K PSD: ``K`` the kernel variable (``K'`` of the merged points, with ``merged`` the merge,
    ``K = P K' P^T``) and ``psd`` the constraint ``K >> 0`` (its multiplier, read by
    :meth:`FullSDP.duals`).  The Basis and Range forms: ``Y`` the PSD block and ``B`` the
    factor with ``K = B Y B^T`` (``W`` of the Range form, with its scaled eigenvectors).
    ``tags``: the constraint rows' ``(index, rows, scaling, sense, constraint)`` (K PSD and
    the Basis form; None for the Range form, whose duals are not mapped).  A contradiction
    proved while compiling sets ``conflict`` and nothing else.
    """

    decl: Declaration
    K: Any = None
    merged: Merged | None = None
    psd: Any = None
    Y: Any = None
    B: np.ndarray | None = None
    tags: list | None = None


def _block_rows(decl: Any) -> int:
    """Scalar rows of the loss terms and constraints (one per term of each map)."""
    return int(decl.n_loss_rows + decl.n_constraint_rows)


def compiled_declaration(decl: Declaration) -> Declaration:
    """The declaration :meth:`FullSDP.compile` writes: the one over the merged points when
    equality constraints force points equal (hard PCP's must-links), else ``decl``.  The size
    model reads it: hard PCP on 150 heart points (seed 3) compiles to a 63 x 63 block, which
    Clarabel solves in 3 s and 346 MB, where the unmerged 150 x 150 block was estimated at
    7.17 GiB and refused."""
    merged = chain(decl).merged
    return decl if merged is None else merged.declaration


class FullSDP(Formulation):
    """``"sdp"``: the declaration over its own PSD variable (see the module docstring)."""

    name = "sdp"
    title = "FullSDP"
    capabilities = Capabilities(forms=(PSD, Basis, Range), senses=("min", "max"), divergence=True)

    def applies_to(self, problem: Any) -> str | None:
        return None  # every declaration has a full SDP

    def describe(self, problem: Any) -> str:
        """What :meth:`compile` would build (for the size guard's message)."""
        decl = compiled_declaration(problem.declaration)
        k = decl.form.block
        merged = "" if decl is problem.declaration else \
            f" (over {k} merged points of {problem.declaration.n})"
        return f"a full SDP with a {k} x {k} PSD block{merged}"

    def kkt_order(self, problem: Any) -> int | None:
        # the svec of the k x k block: an interior-point method's scaling matrix is dense in
        # its k(k+1)/2 entries, and so is the block of the k(k+1)/2 unknowns it couples
        # (~order^3 / 3 flops per iteration); k after merging the points forced equal
        from .base import ipm_order

        k = compiled_declaration(problem.declaration).form.block
        return ipm_order((k,), k * (k + 1) // 2)

    def auto_kkt_order(self, problem: Any) -> int | None:
        # a linear SDP (no losses, no divergence: hard PCP, MVU) goes to Clarabel further
        # (see LINEAR_AUTO_ORDER)
        decl = compiled_declaration(problem.declaration)
        return None if decl.losses or decl.divergence is not None else LINEAR_AUTO_ORDER

    def conic_data(self, problem: Any) -> ConicData | None:
        decl = compiled_declaration(problem.declaration)
        k = decl.form.block
        p = _block_rows(decl)
        d = k * (k + 1) // 2
        if not isinstance(decl.form, PSD):
            # every term is a dense functional of vec(Y) (k^2 entries); a divergence (log det /
            # von Neumann entropy) adds a 2k x 2k block (and cones of size O(k))
            k2 = 2 * k if decl.divergence is not None else k
            return ConicData(nnz=k2 * (k2 + 1) // 2 + p * k * k + 8 * k, rows=k2 * (k2 + 1) // 2 + 2 * p,
                             psd=(k2,))
        # one PSD row per entry of svec(K); each pair / edge term reads a few entries
        return ConicData(nnz=d + 4 * p, rows=d + 3 * p, psd=(k,))

    # ------------------------------------------------------------------ compile
    def compile(self, problem: Any, **options: Any) -> Compiled:
        if options:
            from ..errors import SolverError

            raise SolverError(f"FullSDP takes no compile options; got {sorted(options)}")
        import cvxpy as cp

        decl = problem.declaration
        notes: list[str] = []
        merge = None
        ch = chain(decl)
        merged = ch.merged
        if ch.conflict is not None:
            # proved infeasible before any solve: the program is the contradiction itself
            prog = cp.Problem(cp.Minimize(0), [cp.Constant(0.0) == 1.0])
            why = ch.conflict
            if "infeasible" not in why:
                why += ": the constraints are infeasible"
            return Compiled(prog, FullSDPInverse(decl=decl, conflict=why), program_size(prog),
                            [f"{why} (found while merging points forced equal; the program "
                             "compiled is 0 == 1)"])
        if merged is not None:
            # e.g. hard PCP with must-links: no strictly feasible K (K_ii = K_jj = K_ij = 1
            # forces equal rows), which leaves interior-point solvers "inaccurate".  Over the
            # merged points (exact: K = P K' P^T) K' = I is strictly feasible.
            decl, merge = merged.declaration, merged
            notes.append(merged.note)
        form = decl.form
        if isinstance(form, PSD):
            # K symmetric with the constraint K >> 0 (not a PSD=True variable: the same cone
            # for the solver, but its multiplier Z is readable, see duals())
            K = cp.Variable((form.n, form.n), symmetric=True, name="K" if merge is None else "K'")
            tags: list = []
            obj, cons = self._terms(decl, lambda m: m.cvx(K), dense=False, tags=tags)
            cons = [K >> 0] + cons
            inverse = FullSDPInverse(decl=decl, K=K, merged=merge, tags=tags, psd=cons[0])
        elif isinstance(form, Basis):
            k = form.block
            Y = cp.Variable((k, k), PSD=True, name="Y")
            y = cp.vec(Y, order="F")
            tags = []
            obj, cons = self._terms(decl, lambda m: (m.functionals(form.B), y), dense=True,
                                    tags=tags)
            inverse = FullSDPInverse(decl=decl, Y=Y, B=form.B, tags=tags)
        elif isinstance(form, Range):
            W = cp.Variable((form.r, form.r), PSD=True, name="W")
            obj, cons, B = self._range(decl, form, W)
            inverse = FullSDPInverse(decl=decl, Y=W, B=B)
        else:  # pragma: no cover - Declaration admits only the three forms
            raise TypeError(f"unknown kernel form {type(form).__name__}")
        prog = cp.Problem(cp.Minimize(obj) if decl.sense == "min" else cp.Maximize(obj), cons)
        return Compiled(prog, inverse, program_size(prog), notes)

    def _terms(self, decl: Any, write: Any, *, dense: bool, scale: float = 1.0,
               tags: list | None = None):
        """Objective and constraints of the linear terms, losses and constraints.

        ``write(map)`` is ``map.cvx(K)`` (``dense=False``) or ``(A, y)`` with the dense
        functionals ``A`` of ``vec(Y) = y`` (``dense=True``; constraint rows are then scaled,
        see :meth:`_constraints`).  ``scale`` multiplies every term (the von Neumann form).
        """
        def expr(m):
            w = write(m)
            return w[0] @ w[1] if dense else w

        parts = []
        for t in decl.linear:
            v = expr(t.map)
            c = t.coef
            if c.size == 1:
                parts.append(v[0] if c[0] == 1.0 else c[0] * v[0])
            else:
                parts.append(c @ v)
        for t in decl.losses:
            val = t.loss.cvx(expr(t.map))
            parts.append(val if t.weight == 1.0 else t.weight * val)
        if scale != 1.0:
            parts = [scale * p for p in parts]
        obj = parts[0] if len(parts) == 1 else (sum(parts[1:], parts[0]) if parts else 0.0)
        cons = self._constraints(decl, write, dense)
        if tags is not None:
            tags.extend((*c.kf_rows, c) for c in cons if hasattr(c, "kf_rows"))
        return obj, cons

    @staticmethod
    def _constraints(decl: Any, write: Any, dense: bool) -> list:
        """The constraint rows (each CVXPY constraint carries ``kf_rows``: the declaration's
        constraint, its rows, their scaling and sense, read by :meth:`duals`)."""
        cons = []
        for ci, c in enumerate(decl.constraints):
            if dense:
                A, y = write(c.map)
                # row scaling (positive, so senses keep): P7's bounds are ~ squared distances
                # of the data; unscaled rows made Clarabel stop at "optimal_inaccurate" on log_det
                s = 1.0 / np.maximum(np.abs(c.bound), 1e-3 * np.linalg.norm(A, axis=1) + 1e-300)
                vals, bnd = (A * s[:, None]) @ y, c.bound * s
                every = False  # always index the rows (as the P7 program always did)
            else:
                vals, bnd = write(c.map), c.bound
                s = np.ones(c.map.size)
                every = True
            for sense in (LE, GE, EQ):
                sel = np.flatnonzero(c.sense == sense)
                if sel.size == 0:
                    continue
                if every and sel.size == c.size:
                    v, b = vals, bnd
                else:
                    v, b = vals[sel], bnd[sel]
                cons.append(v <= b if sense == LE else v >= b if sense == GE else v == b)
                cons[-1].kf_rows = (ci, sel, s[sel], sense)
        return cons

    # ------------------------------------------------------------ the Range form (P7)
    def _range(self, decl: Any, form: Range, W: Any):
        """``K = B W B^T`` on range(K0), with the divergence's conic form."""
        import cvxpy as cp

        V0, lam0, r = form.V0, form.lam0, form.r
        div = decl.divergence
        scale = 1.0
        if isinstance(div, VonNeumann):
            # K = V0 (s W) V0^T with s = mean(lam0), so that W = O(1) in the exponential cones
            # (unscaled, Clarabel was 4e-4 off on Pendigits, lam0 up to 1.7e7).  D is
            # 1-homogeneous, D(K, K0) = s D(K/s, K0/s): the program minimises D / s,
            # D / s = tr(W log W) - tr(W log diag(lam0 / s)) - tr(W) + sum(lam0) / s
            # (and the other terms, if any, divided by s too)
            sc = float(np.mean(lam0))
            B = V0 * np.sqrt(sc)
            div_obj = (-cp.von_neumann_entr(W) - cp.sum(cp.multiply(np.log(lam0 / sc), cp.diag(W)))
                       - cp.trace(W) + float(np.sum(lam0)) / sc)
            scale = 1.0 / sc
        else:
            # K = B W B^T with B = V0 diag(sqrt(lam0)): D_Burg = tr(W) - log det W - r
            B = V0 * np.sqrt(lam0)
            div_obj = None if div is None else cp.trace(W) - cp.log_det(W) - r
        w = cp.vec(W, order="F")
        rest, cons = self._terms(decl, lambda m: (m.functionals(B), w), dense=True, scale=scale)
        if div_obj is None:
            obj = rest
        elif decl.linear or decl.losses:
            obj = div_obj + rest
        else:
            obj = div_obj
        return obj, cons, B

    # ------------------------------------------------------------ back to a kernel
    def duals(self, compiled: Compiled) -> dict[str, Any] | None:
        """The constraint rows' dual values (PSD and Basis forms; none after a merge of
        points, whose rows are the merged declaration's, nor for the Range form).  The hinge
        losses are written with ``pos`` and have no readable multipliers."""
        inv: FullSDPInverse = compiled.inverse
        if inv.conflict is not None or inv.merged is not None or inv.tags is None:
            return None
        decl = inv.decl
        out = tagged_duals(decl, inv.tags) or {"constraints": [None] * len(decl.constraints),
                                               "losses": [None] * len(decl.losses)}
        if decl.losses and inv.psd is not None:
            out["losses"] = self._loss_slopes(decl, inv.psd.dual_value, out["constraints"])
        if all(x is None for x in out["constraints"] + out["losses"]):
            return None
        return out

    #: largest n for which :meth:`_loss_slopes` forms the n x n stationarity residual
    SLOPES_MAX_N = 2000

    def _loss_slopes(self, decl: Any, Z: Any, ys: list) -> list:
        """The loss rows' slopes from the multiplier ``Z`` of ``K >> 0``: stationarity
        ``C + sum_k A_k*(w_k u_k) + A*(y) = Z`` solved for ``w_k u_k`` by least squares
        (every loss on pair rows, every constraint's multiplier known; else None each), in the
        sign of the chain's minimisation of ``decl`` (its linear terms and weights negated for
        a maximisation)."""
        from ..model import PairMap
        from .base import pair_operator

        decl = chain(decl).minimisation
        none = [None] * len(decl.losses)
        n = decl.n
        if Z is None or n > self.SLOPES_MAX_N or any(y is None for y in ys) or \
                not all(isinstance(t.map, PairMap) for t in decl.losses):
            return none
        C = decl.cost_matrix() if decl.linear else None
        if decl.linear and C is None:
            return none
        M = np.asarray(Z, dtype=float).copy()
        if C is not None:
            M -= C.toarray()
        eye = np.eye(n)
        for c, y in zip(decl.constraints, ys):
            M -= c.map.adjoint_op(y).matmat(eye)
        M = 0.5 * (M + M.T)
        from scipy.sparse import hstack
        from scipy.sparse.linalg import lsqr

        P = hstack([pair_operator(t.map) for t in decl.losses]).tocsr()
        x = lsqr(P, M.ravel(), atol=1e-15, btol=1e-15, iter_lim=20 * P.shape[1] + 1000)[0]
        out, pos = [], 0
        for t in decl.losses:
            out.append(np.asarray(x[pos:pos + t.map.size], dtype=float) / t.weight)
            pos += t.map.size
        return out

    def recover(self, compiled: Compiled) -> LowRank:
        inv: FullSDPInverse = compiled.inverse
        if inv.conflict is not None:
            raise ValueError("the constraints are infeasible (see the notes)")
        if inv.K is not None:
            K = inv.K.value
            if K is None:
                raise ValueError("the K variable has no value")
            G = psd_factor(K)
            merge = inv.merged
            return LowRank(G if merge is None else merge.lift(G))
        Y = inv.Y.value
        if Y is None:
            raise ValueError("the Y variable has no value")
        return LowRank(inv.B @ psd_factor(Y))

    # ------------------------------------------------------------ explain / lift
    def explain(self, problem: Any, compiled: Compiled) -> ProgramDescription:
        """The full SDP with this instance's numbers: the declaration's own terms over the
        one PSD variable (``K``, ``K'`` after a merge, ``Y`` or ``W``)."""
        inv: FullSDPInverse = compiled.inverse
        decl = inv.decl
        eq, ineq = count_rows(compiled.program)
        nvar = int(sum(v.size for v in compiled.program.variables()))
        if inv.conflict is not None:
            why = inv.conflict
            return ProgramDescription(
                self.name, "Full SDP (the contradiction)", "min", [], [], Math("0", "0"),
                [Item(Math("0 = 1", "0 == 1"), "the constraints were proved contradictory")], [],
                [("equality rows", eq)], Item(Math(r"\text{none}", "none"), "no kernel is feasible"),
                "the problem is infeasible; so is the program", [why])
        form = decl.form
        data: list[Item] = []
        notes: list[str] = []
        scale_note = ""
        if inv.K is not None:
            name = "K" if inv.merged is None else "K'"
            n = form.n
            var = Item(Math(rf"{name} \in \mathbb{{S}}^{{{n}}}", f"{name} in S^{n}"),
                       f"the kernel{' of the merged points' if name != 'K' else ''}, {n} x {n}, PSD")
            kernel = Math(name, name)
            obj, term_notes = terms_math(decl, kernel)
            cons = [Item(Math(rf"{name} \succeq 0", f"{name} PSD"), f"PSD block {n} x {n}")]
            cons += constraint_items(decl, kernel)
            cones = [Item(Math(rf"\mathbb{{S}}_+^{{{n}}}", f"PSD {n} x {n}"), name)]
            if inv.merged is None:
                rec = Item(Math("K", "K"), "K is the PSD variable itself")
            else:
                m = inv.merged
                rec = Item(Math(r"K = P K' P^T", "K = P K' P^T"),
                           f"P the {m.P.shape[0]} x {m.c} 0/1 indicator of the merged points")
                notes.append(m.note + " (points forced equal by the equality constraints)")
            block = n
            rel = "the objective is the problem's own, term by term (no constant dropped)"
        else:
            B = inv.B
            k = B.shape[1]
            sym = "W" if isinstance(form, Range) else "Y"
            var = Item(Math(rf"{sym} \in \mathbb{{S}}^{{{k}}}", f"{sym} in S^{k}"), f"{k} x {k}, PSD")
            cons = [Item(Math(rf"{sym} \succeq 0", f"{sym} PSD"), f"PSD block {k} x {k}")]
            block = k
            rel = "the objective is the problem's own, term by term (no constant dropped)"
            if sym == "Y":
                kernel = Math(r"(Q Y Q^T)", "(Q Y Q^T)")
                obj, term_notes = terms_math(decl, kernel)
                data.append(Item(Math(rf"Q \in \mathbb{{R}}^{{{form.n} \times {k}}}",
                                      f"Q in R^({form.n} x {k})"), "the basis of the declaration's form"))
                rec = Item(Math(r"K = Q Y Q^T", "K = Q Y Q^T"), f"Q the {form.n} x {k} basis")
                notes.append("each term is written as functionals a_p^T vec(Y) of Y "
                             "(map.functionals(Q))")
            else:
                obj, term_notes, rec, rel, scale_note, kernel = self._explain_range(decl, data)
            cons += constraint_items(decl, kernel, scaled=True)
            cones = [Item(Math(rf"\mathbb{{S}}_+^{{{k}}}", f"PSD {k} x {k}"), sym)]
            if scale_note:
                cones.append(Item(Math(r"\mathcal{K}_{\exp}", "exponential cones"), scale_note))
        exp_rows = sum(t.map.size * t.loss.exp_cone for t in decl.losses)
        if exp_rows:
            names = sorted({t.loss.name for t in decl.losses if t.loss.exp_cone})
            cones.append(Item(Math(r"\mathcal{K}_{\exp}", "exponential cones"),
                              f"the {', '.join(names)} loss rows: {exp_rows} cones"))
        sizes = [("PSD block", block), ("loss rows", int(decl.n_loss_rows)),
                 ("equality rows", eq), ("inequality rows", ineq), ("scalar variables", nvar)]
        return ProgramDescription(self.name, "Full SDP (the declaration over its PSD variable)",
                                  decl.sense, [var], data, obj, cons, cones, sizes, rec, rel,
                                  notes + [f"terms: {t}" for t in term_notes])

    @staticmethod
    def _explain_range(decl: Any, data: list):
        """Objective, recovery and notes of the Range form (P7): Burg or von Neumann."""
        form = decl.form
        k, lam0 = form.r, form.lam0
        div = decl.divergence
        plain = None
        if decl.linear or decl.losses:  # the terms other than the divergence
            plain = Declaration(form, decl.linear, decl.losses, decl.constraints, None, decl.sense)
        rel = "the objective is the problem's own, term by term (no constant dropped)"
        cone_note = ""
        data.append(Item(Math(rf"V_0 \in \mathbb{{R}}^{{{form.n} \times {k}}}",
                              f"V0 in R^({form.n} x {k})"),
                         f"eigenvectors of K0 (eigenvalues Lam0 from {lam0.min():.4g} to {lam0.max():.4g})"))
        if isinstance(div, VonNeumann):
            sc = float(np.mean(lam0))
            kernel = Math(r"(s V_0 W V_0^T)", "(s V0 W V0^T)")
            rec = Item(Math(r"K = s \, V_0 W V_0^T", "K = s V0 W V0^T"),
                       f"V0 the {form.n} x {k} eigenvectors of K0, s = mean(Lam0)")
            rest, term_notes = terms_math(plain, kernel) if plain else (None, [])
            dl = (r"\mathrm{tr}(W \log W) - \mathrm{tr}(W \log(\Lambda_0 / s)) - \mathrm{tr}(W) "
                  r"+ \mathrm{tr}(\Lambda_0) / s")
            dt = "tr(W log W) - tr(W log(Lam0 / s)) - tr(W) + tr(Lam0) / s"
            obj = Math(dl + (rf" + \tfrac{{1}}{{s}}\left({rest.latex}\right)" if rest else ""),
                       dt + (f" + (1/s) ({rest.text})" if rest else ""))
            data.append(Item(Math(rf"s = {sc:.6g}", f"s = {sc:.6g}"),
                             "mean eigenvalue of K0, so that W = O(1) in the exponential cones"))
            rel = (f"the objective is the problem's divided by s = {sc:.6g} (D is 1-homogeneous: "
                   "D(K, K0) = s D(K/s, K0/s)); no constant dropped")
            cone_note = "von Neumann entropy through exponential cones (CVXPY von_neumann_entr)"
            return obj, ["von_neumann divergence"] + term_notes, rec, rel, cone_note, kernel
        kernel = Math(r"(V_0 \Lambda_0^{1/2} W \Lambda_0^{1/2} V_0^T)", "(V0 Lam0^(1/2) W Lam0^(1/2) V0^T)")
        rec = Item(Math(r"K = V_0 \Lambda_0^{1/2} W \Lambda_0^{1/2} V_0^T",
                        "K = V0 Lam0^(1/2) W Lam0^(1/2) V0^T"), f"V0, Lam0: the {k} eigenpairs of K0")
        if div is None:
            obj, term_notes = terms_math(decl, kernel)
            return obj, term_notes, rec, rel, cone_note, kernel
        rest, term_notes = terms_math(plain, kernel) if plain else (None, [])
        obj = Math(rf"\mathrm{{tr}}(W) - \log\det W - {k}" + (f" + {rest.latex}" if rest else ""),
                   f"tr(W) - log det W - {k}" + (f" + {rest.text}" if rest else ""))
        cone_note = "log det W through one PSD block of size 2r and r exponential cones (CVXPY log_det)"
        return obj, ["burg divergence"] + term_notes, rec, rel, cone_note, kernel

    def lift(self, compiled: Compiled, K: np.ndarray) -> Lift:
        """The PSD variable at K: K itself, ``K' = P^+ K P^{+T}`` after a merge, ``Y = Q^+ K Q^{+T}``
        for a basis, ``W`` for the Range form (objective scaled by ``1/s`` for von Neumann)."""
        inv: FullSDPInverse = compiled.inverse
        if inv.conflict is not None:
            return Lift({})
        K = np.asarray(K, dtype=float)
        if inv.K is not None:
            m = inv.merged
            if m is not None:
                Pp = np.linalg.pinv(m.P.toarray())
                K = Pp @ K @ Pp.T
            return Lift({inv.K: (K + K.T) / 2})
        Bp = np.linalg.pinv(inv.B)
        Y = Bp @ K @ Bp.T
        decl = inv.decl
        scale = 1.0
        if isinstance(decl.divergence, VonNeumann):
            scale = 1.0 / float(np.mean(decl.form.lam0))
        return Lift({inv.Y: (Y + Y.T) / 2}, objective_scale=scale)
