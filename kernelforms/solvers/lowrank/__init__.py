"""Burer-Monteiro low-rank solver ("lowrank"): ``K = G G^T``, L-BFGS and an augmented Lagrangian.

The idea of SDPLR (Burer & Monteiro 2003, cited by Hu & Kwok 2013 and 2015): replace the
PSD variable by a factor ``G`` of shape ``(n, r)`` (the papers' ``V^T``), which drops
the PSD constraint and leaves a smooth nonlinear program in ``n r`` unknowns.

The solver reads the problem's declaration only, through its factored oracle
(:func:`kernelforms.model.oracle`: the objective, its gradient and Hessian-vector products
and the constraint rows on a factor, derived once from the canonical form); what it accepts
is data (:data:`~.applies.CAPABILITIES`), and the reason it does not apply is worded from the mismatch:

* the form ``K PSD`` (``G`` is ``n x r``) or ``K = B Y B^T`` (``Y = H H^T``, ``G = B H``;
  P3, P5); not ``range(K) in range(K0)`` with a Bregman divergence (P7: a spectral term,
  infinite off the range and at singular K);
* the linear terms as one fixed operator ``C`` (``tr K`` kept as a coefficient) and any
  number of *smooth* loss terms on any linear map (squared, squared hinge, linear, logistic; a hinge
  term is refused with its reason);
* constraints: equality and inequality rows on any map.  Without constraints (P1, P3, P5,
  P6 square / squared hinge) L-BFGS minimises directly (``scipy.optimize``, L-BFGS-B
  without bounds).  With constraints (P2, P4, P6 linear with ``K_ii <= b^2``, a user's
  ``<=`` / ``>=`` rows) an augmented Lagrangian runs around L-BFGS:
  ``f(G) - lambda^T c(G) + (sigma/2)||c(G)||^2`` for equalities, the usual
  ``max(0, .)`` form for inequalities, multipliers updated by ``lambda <- lambda - sigma c``
  and ``sigma`` multiplied by 10 when the violation does not drop by 4 (Bertsekas 1999,
  the method SDPLR uses).  A problem of linear terms and constraints only is homogeneous
  and is solved in units where the mean nonzero bound is 1 (MVU's squared distances).
* an equality ``sum_ij K_ij = ||G^T 1||^2 = 0`` (MVU's centring) holds iff ``G^T 1 = 0``;
  it is imposed *exactly* by optimising over ``H`` with ``G = (I - 11^T/n) H`` (a linear
  map whose adjoint is itself; the chain's ``Centre`` step, kept by the oracle), so only
  the other rows go into the augmented Lagrangian.
* points forced equal by equality rows (P2's must-links: ``K_ii = K_jj = K_ij = 1`` force
  ``g_i = g_j``) are merged first (the chain's ``MergeEqualPoints``, read through the
  oracle: :func:`kernelforms.model.merge_equal_points`,
  ``G = P H`` with ``P`` the group indicator); the merged problem has the strictly
  feasible point ``K_c = I`` that P2 lacks.  On P2 itself the augmented Lagrangian stopped
  1e-4 to 9e-4 *below* the optimum at a violation of 1e-7 (without an interior point the
  objective moves like ``sqrt(violation)``); merged, it is within 3e-7 of Clarabel
  (docs/other_solvers.md).

Statuses: ``converged`` only when the violation is below ``feas_tol`` and the last inner
solve met ``gtol`` (without constraint rows also when the Lagrangian certificate proves
the point within ``stop_gap`` once the objective has stalled,
:class:`~.certstop.CertStop`); ``infeasible`` when the merge finds two equality rows
asking different values of one entry (hard PCP with a cannot-link inside a must-link
chain; found before solving) and when the stalled residual gives a Farkas certificate on
the declaration's constraints (:func:`~.bounds.farkas`); ``max_iter`` when the violation
stalls without one (the message says what was seen); ``error`` / ``numerical_error`` when
L-BFGS-B fails (an inner failure is never success); ``timeout`` at the time limit.

Every pair row (entries, distances) is a row-wise dot product ``g_i . g_j`` and its
gradient ``2 A*(w) G`` a scatter of rows through sparse incidence matrices built once with
the oracle (the maps' generic ``adjoint_op`` would build a sparse matrix per evaluation); other
maps go through their own ``apply`` / ``adjoint_op``.  One objective/gradient costs
``O(nnz(C) r + m r)``; no ``n x n`` matrix is ever formed.

Rank
----
The problem is nonconvex in ``G``.  For an SDP with ``m`` linear constraints there is an
optimal ``K`` of rank ``r`` with ``r (r + 1) / 2 <= m`` (Barvinok-Pataki), and for
``r (r + 1) / 2 > m`` second-order critical points of the factored problem are global
in practice (Boumal, Voroninski & Bandeira 2016).  The default rank is therefore
``max(problem.default_rank(), rank_rule(m) + 1)``, capped at the PSD block (``n``, or the
basis's ``k`` columns), with ``m`` the declaration's loss and constraint rows.

Optimality evidence
-------------------
Each of these problems is a convex SDP ``min F(K)`` over ``K PSD`` (with linear
constraints ``A(K) = b``).  At the returned ``G`` the solver forms the *dual slack*
``S = grad F(K) - sum_k lambda_k A_k`` (``C`` plus the maps' adjoints) and reports
``extras["dual_slack_min_eig"]`` (Lanczos) and ``extras["complementarity"] = ||S G||_F``;
``S >= 0``, ``S G = 0`` and feasibility together certify a global optimum (KKT).

Modules
-------
``applies`` (the capabilities, the "does not apply" sentences, the oracle, the default rank),
``solver`` (:class:`LowRankBM`: options, the L-BFGS runs, the augmented Lagrangian loop),
``alm`` (the augmented Lagrangian on the oracle), ``precond`` (the preconditioned L-BFGS),
``certstop`` (the certified early stop), ``start`` (the starting factor), ``bounds`` (the
KKT evidence, the trace bound, the Farkas test).  The objective, its derivatives and the
constraint rows on a factor are the declaration's oracle (:mod:`kernelforms.model.oracle`).
"""

from .applies import CAPABILITIES, build_model, default_rank
from .solver import TEST_RTOL, LowRankBM

__all__ = ["CAPABILITIES", "LowRankBM", "TEST_RTOL", "build_model", "default_rank"]
