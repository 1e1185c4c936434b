"""Schur-complement SDPs of a convex quadratic SDP (Wu et al. 2009, Section 2.4, eq. 15-16).

For the QSDP ``min y^T A y + b^T y + c, Y PSD`` (see :mod:`kernelforms.formulations.sqlp`
for how each problem is written in that form) the Schur complement lemma gives

    ||R y - w||^2 <= nu   <=>   [[ I,  R y - w ], [ (R y - w)^T, nu ]]  PSD

so the QSDP becomes the linear SDP ``min nu + g^T y + c'`` with two PSD blocks:
``Y`` (``s x s``) and the LMI above.  Two choices of ``R``:

- :class:`SchurComplementSDP` (``"scsdp"``): ``R = A^{1/2}``, the ``d x d`` symmetric
  square root, as Wu et al. 2009 eq. 16 does; the LMI has size ``dim(y) + 1 = d + 1``.
- :class:`FactoredSchurComplementSDP` (``"scsdp_factor"``): ``R = B``, the ``rank(A) x d``
  factor of the rank-revealing factorisation ``A = B^T B`` used by the SQLP; the LMI
  has size ``rank(A) + 1``.

Wu et al. 2009 keeps ``-2 F^T h`` inside ``b``; we keep the shift ``w`` inside the LMI (same
cone sizes, better scaled), see the SQLP module.  The declaration's constraint rows
``A(K) {<=, ==, >=} b`` become linear rows on ``y``, as in the SQLP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..result import LowRank
from .base import (FIRST_ORDER_SOLVERS, Compiled, ConicData, Formulation, Item, Lift, Math,
                   ProgramDescription, program_size)
from .sqlp import (
    QSDP_CAPABILITIES,
    QuadraticInverse,
    constraints_phrase,
    constraint_rows_nnz,
    entry_rows,
    factor_nnz,
    factor_quadratic,
    ipm_bytes,
    ipm_order,
    linear_constraints,
    pop_rank_rtol,
    psd_variable,
    qsdp_applies,
    qsdp_duals,
    qsdp_parts,
    qsdp_shape,
    qsdp_sizes,
    quadratic_form,
    recover_svec,
    svec_coordinates,
    svec_dim,
)


#: measured peak memory of Clarabel (through CVXPY) on the Schur-complement SDP, LMI of size
#: k coupling rank(A) = r unknowns densely: RegMVU (2,000-point Swiss roll) k = 211, r = 195:
#: 0.40 GB; k = 466, r = 378: 2.6 GB; k = 821, r = 582: <= 13.3 GB (whole run); k = 1,276,
#: r = 803: killed at 24 GB; P1 (wine, 36 points) k = 667, r = 56: 0.24 GB (0.17 GB of it
#: Python).  The split-LMI model (``ipm_bytes``) had said 65 MB at k = 1,276.  Fitted,
#: conservatively: bytes = 50 k r^2.
_SCHUR_BYTES_PER_K_R2 = 50.0


@dataclass
class SchurInverse(QuadraticInverse):
    """:class:`~kernelforms.formulations.sqlp.QuadraticInverse` of the Schur-complement SDPs,
    with the epigraph variable ``nu``, the LMI's ``R`` (``A^{1/2}`` or ``B``) and shift ``w``
    (``||R y - w||^2 <= nu``), and the LMI constraint itself (``lmi``, whose multiplier gives
    the loss rows' slopes)."""

    nu: Any
    R: Any
    w: np.ndarray
    lmi: Any


def schur_lmi_bytes(k: int, rank: int) -> int:
    """Empirical peak bytes of a Schur LMI of size ``k`` coupling ``rank`` unknowns densely."""
    return int(_SCHUR_BYTES_PER_K_R2 * k * rank**2)


class SchurComplementSDP(Formulation):
    """``"scsdp"``: Wu et al. 2009 eq. 15-16 with ``A^{1/2}``; LMI of size ``dim(y) + 1``.

    Compile option ``rank_rtol`` as for :class:`~kernelforms.formulations.sqlp.SQLP`
    (directions of ``A`` below it are dropped from ``A^{1/2}``; the LMI keeps size ``d + 1``).
    """

    name = "scsdp"
    capabilities = QSDP_CAPABILITIES
    title = "SchurComplementSDP"
    #: use R = A^{1/2} (d rows) or R = B (rank(A) rows)
    factored = False

    def applies_to(self, problem: Any) -> str | None:
        return qsdp_applies(problem, self.name)

    def _lmi_size(self, problem: Any) -> int:
        s, p, _ = qsdp_shape(problem)
        d = svec_dim(s)
        return (min(p, d) if self.factored else d) + 1

    def describe(self, problem: Any) -> str:
        s, _, m = qsdp_shape(problem)
        k = self._lmi_size(problem)
        return (f"a Schur-complement SDP with PSD blocks {s} x {s} and {k} x {k}"
                f"{constraints_phrase(m)}")

    def kkt_order(self, problem: Any) -> int | None:
        # the svec of Y, and y (d unknowns) coupled densely through the LMI's R y
        # (R = A^{1/2} or B); the arrow LMI itself is split by Clarabel (chordal), not dense;
        # one KKT row per constraint row
        s, _, m = qsdp_shape(problem)
        return ipm_order((s,), svec_dim(s) + self._lmi_size(problem) + m)

    def ipm_memory(self, problem: Any) -> int | None:
        # rank(A) <= min(p, d) without factorising A
        s, p, _ = qsdp_shape(problem)
        model = super().ipm_memory(problem) or 0
        return max(model, schur_lmi_bytes(self._lmi_size(problem), min(p, svec_dim(s))))

    def conic_data(self, problem: Any) -> ConicData | None:
        s, p, m = qsdp_shape(problem)
        d, k = svec_dim(s), self._lmi_size(problem)
        if self.factored:
            r_nnz = factor_nnz(problem)
        else:  # A^{1/2} = B^T diag(lam^-1/2) B: as sparse as B for squared entries of K
            r_nnz = p if entry_rows(problem) else d * d
        con = constraint_rows_nnz(problem) if m else 0
        return ConicData(nnz=d + r_nnz + 2 * k + con, rows=d + svec_dim(k) + m, psd=(s, k))

    def precise_memory(self, problem: Any, solver: str = "CLARABEL") -> int | None:
        """For an interior-point solver: :meth:`ipm_memory` with the numerical rank of
        ``A`` (one factorisation); the cheap estimate otherwise."""
        if str(solver).upper() in FIRST_ORDER_SOLVERS:
            return self.estimate_memory(problem, solver)
        s, _, m = qsdp_shape(problem)
        r = factor_quadratic(quadratic_form(problem)).rank
        k = (r if self.factored else svec_dim(s)) + 1
        return max(ipm_bytes((s,), svec_dim(s) + k + m), schur_lmi_bytes(k, r))

    def compile(self, problem: Any, **options: Any) -> Compiled:
        import cvxpy as cp

        rtol = pop_rank_rtol(self.title, options)
        q = quadratic_form(problem)
        fac = factor_quadratic(q, rtol)
        if self.factored:
            R, w = fac.B, fac.h_B
        else:
            R, w = fac.sqrt_A()
        y, Y = psd_variable(q.s)
        nu = cp.Variable(name="nu")
        k = R.shape[0]
        a = cp.reshape(R @ y - w, (k, 1), order="F")
        eye = sp.eye(k, format="csr") if sp.issparse(R) else np.eye(k)
        lmi = cp.bmat([[eye, a], [a.T, cp.reshape(nu, (1, 1), order="F")]])
        tags: list = []
        cons = [Y >> 0, lmi >> 0] + linear_constraints(q, y, tags)
        expr = nu + q.g @ y + (q.c0 + fac.const)
        obj = cp.Minimize(expr) if q.sign > 0 else cp.Maximize(-expr)
        prog = cp.Problem(obj, cons)
        size = program_size(prog, rank_A=fac.rank)
        what = "B (rank-r factor)" if self.factored else "A^{1/2}"
        notes = [f"y = {q.variable}: {q.d} scalars; LMI with {what}: size {k + 1}; "
                 f"rank(A) = {fac.rank}" + (f"; {q.m} constraint rows" if q.m else "")]
        return Compiled(prog, SchurInverse(decl=problem.declaration, q=q, fac=fac, y=y, tags=tags,
                                           nu=nu, R=R, w=w, lmi=cons[1]), size, notes)

    def recover(self, compiled: Compiled) -> LowRank:
        return recover_svec(compiled.inverse)

    def duals(self, compiled: Compiled) -> dict[str, Any] | None:
        """The constraint rows' dual values and the loss rows' slopes: the LMI's multiplier
        ``[[P, q], [q^T, 1]]`` gives the slope ``-2 q`` of ``||R y - w||^2`` in ``a = R y - w``
        (``-2 R^T q`` its gradient on ``y``)."""
        inv: SchurInverse = compiled.inverse
        Lam = inv.lmi.dual_value
        grad = None
        if Lam is not None:
            Lam = np.asarray(Lam, dtype=float)
            k = Lam.shape[0] - 1
            q = 0.5 * (Lam[:k, k] + Lam[k, :k])
            grad = np.asarray(inv.R.T @ (-2.0 * q), dtype=float).ravel()
        return qsdp_duals(compiled, grad)

    def explain(self, problem: Any, compiled: Compiled) -> ProgramDescription:
        """The Schur-complement SDP with this instance's numbers."""
        inv: SchurInverse = compiled.inverse
        q, fac, R = inv.q, inv.fac, inv.R
        k = R.shape[0]
        parts = qsdp_parts(q, fac)
        nu = Item(Math(r"\nu \in \mathbb{R}", "nu in R"), "epigraph of the squared losses")
        if self.factored:
            rdesc = Item(Math(rf"B \in \mathbb{{R}}^{{{k} \times {q.d}}}", f"B in R^({k} x {q.d})"),
                         f"the rank-revealing factor, A = F^T F = B^T B, r = rank(A) = {fac.rank}")
            rname, wname = "B", "h_B"
        else:
            rdesc = Item(Math(rf"A^{{1/2}} \in \mathbb{{R}}^{{{k} \times {k}}}",
                              f"A^(1/2) in R^({k} x {k})"),
                         f"the symmetric square root of A = F^T F (rank {fac.rank}), "
                         "formed as B^T diag(lam^(-1/2)) B")
            rname, wname = "A^{1/2}", "w"
        rt = rname.replace("{1/2}", "(1/2)")
        data = [rdesc, Item(Math(rf"{wname} \in \mathbb{{R}}^{{{k}}}", f"{wname} in R^{k}"),
                            f"||{rt} y - {wname}||^2 = ||F y - h||^2 - const")] + parts["data"]
        obj = Math(r"\nu + g^T y + c", "nu + g^T y + c")
        if q.sign < 0:
            obj = Math(rf"-\left({obj.latex}\right)", f"-({obj.text})")
        lmi = Math(rf"\begin{{bmatrix}} I_{{{k}}} & {rname} y - {wname} \\ ({rname} y - {wname})^T & \nu "
                   r"\end{bmatrix} \succeq 0",
                   f"[[I_{k}, {rt} y - {wname}], [({rt} y - {wname})^T, nu]] PSD")
        cons = [parts["psd"], Item(lmi, f"LMI of size {k + 1} (Schur complement: "
                                         f"||{rt} y - {wname}||^2 <= nu)")] + parts["cons"]
        cones = [Item(Math(rf"\mathbb{{S}}_+^{{{q.s}}}", f"PSD {q.s} x {q.s}"), "Y = smat(y)"),
                 Item(Math(rf"\mathbb{{S}}_+^{{{k + 1}}}", f"PSD {k + 1} x {k + 1}"),
                      "the Schur LMI (arrow pattern: Clarabel splits it into 2 x 2 cones)")]
        sizes = qsdp_sizes(q, fac, compiled.program)
        sizes.insert(2, ("LMI size", k + 1))
        rel = (f"at nu = ||{rt} y - {wname}||^2 (the LMI tight) the objective equals the problem's "
               "objective exactly: c restores the constant the factorisation drops"
               + ("; the declaration is a maximisation, whose negation is minimised as -(...)"
                  if q.sign < 0 else ""))
        title = ("Schur-complement SDP with the rank-r factor B" if self.factored
                 else "Schur-complement SDP with A^(1/2) (Wu et al. 2009, eq. 15-16)")
        return ProgramDescription(self.name, title, "max" if q.sign < 0 else "min",
                                  [parts["y"], nu], data, obj, cons, cones, sizes,
                                  parts["recovery"], rel)

    def lift(self, compiled: Compiled, K: np.ndarray) -> Lift:
        """``y = svec(Y)`` of K and ``nu = ||R y - w||^2`` (the LMI tight)."""
        inv: SchurInverse = compiled.inverse
        yv = svec_coordinates(K, inv.basis)
        a = np.asarray(inv.R @ yv).ravel() - inv.w
        return Lift({inv.y: yv, inv.nu: float(a @ a)})


class FactoredSchurComplementSDP(SchurComplementSDP):
    """``"scsdp_factor"``: the Schur-complement SDP with the rank-r factor B; LMI of size ``rank(A) + 1``."""

    name = "scsdp_factor"
    title = "SchurComplementSDP(B)"
    factored = True
