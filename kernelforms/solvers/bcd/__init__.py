"""BCDKL: block coordinate descent on ``K = G G^T`` for NPKL (P6, Hu & Kwok 2015) and soft PCP (P1).

The method reads the canonical form (:func:`why_not`, :class:`BCDEngine`), never the class: a sparse
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

The package: :func:`why_not` here (what bcd takes, read from the canonical form of
:mod:`kernelforms.model.canonical`), :mod:`.engine` (the canonical form's rows in margin form,
colouring, blocks),
:mod:`.rows` (the row updates), :mod:`.certify` (the duality-gap certificate, escape,
stretch, objective), :mod:`.numerics` (box QPs, SPD solves, the smallest eigenvalue);
the method :class:`BCDKL` is here.
"""

from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Any

import numpy as np

from ...errors import OptionError
from ...model import canonical
from ...model.canonical import PSD_MINIMISATION
from ...result import Status
from .._anderson import Anderson
from ..base import IterativeSolver, SolverOutput
from ..options import Boolean, FactorInit, Interval, Rank, StrOptions
from .certify import (  # noqa: F401 - re-exported
    STRETCH,
    Certify,
)
from .engine import BCDEngine  # noqa: F401 - re-exported
from .numerics import (  # noqa: F401 - re-exported
    DENSE_EIG_MAX,
    FIT_MAX_PAIRS,
    QP_MAX_CD,
    Certificate,
    _rel_gap,
    box_qp,
    huber_hinge,
    lambda_min,
    spd_solve,
)
from .rows import RowUpdates, _Block  # noqa: F401 - re-exported
from .numerics import (  # noqa: F401,E402 - re-exported
    HINGE,
    KIND_NAMES,
    LINEAR,
    SQUARE,
    SQUARED_HINGE,
    _LOSS_NAMES,
    _MARGIN_LOSS,
    _ROW_UPDATES,
)

#: what bcd takes (the rest of its decision reads the canonical form: :func:`why_not`)
HEAD = ("bcd handles a sparse linear cost with C_ii > 0 plus hinge, squared hinge, squared "
        "or linear losses on entries of K, over K PSD")


def why_not(decl: Any) -> str | None:
    """Why BCDKL does not apply to a declaration (None when it does), read from its
    canonical form (:func:`kernelforms.model.canonical`).

    BCDKL (Hu & Kwok 2015) updates one row ``g_i`` of ``K = G G^T`` at a time; it handles
    ``min <C, K> + loss terms`` over K PSD with a sparse cost whose diagonal is > 0
    (the row subproblem divides by ``C_ii``), loss terms on entries of K whose loss names a
    closed-form row update (:attr:`~kernelforms.model.Loss.row_update`: hinge, squared
    hinge, squared or linear; mixed kinds and weights allowed; a squared loss on ``K_ii``
    as in soft PCP), and only the bound ``K_ii <= b^2`` on every point, which the linear
    loss needs.  Points that equality rows force equal are merged by the chain of
    reductions first (the factor is lifted back); the centring row is refused (the row
    updates do not keep a factor centred).
    """
    from ...model import LE, RowKind, canonical

    decl = getattr(decl, "declaration", decl)
    why = BCDKL.capabilities.reason(decl, HEAD)
    if why is not None:
        return why
    can = canonical(decl)
    red = can.decl
    n = can.n
    # the constraint: K_ii <= b^2 on every point, one b
    if red.constraints or can.centred:
        le = can.constraint_blocks.get(LE)
        ok = (le is not None and not can.general and not can.centred
              and set(can.constraint_blocks) == {LE} and np.all(le.kind == RowKind.DIAGONAL))
        if ok:
            ok = (le.i.size == n and np.unique(le.i).size == n and np.all(le.bound == le.bound[0])
                  and le.bound[0] > 0)
        if not ok:
            return (f"bcd handles one constraint, K_ii <= b^2 with the same b > 0 on every point "
                    f"(the linear loss needs it); this problem has "
                    f"{'; '.join(c.describe() for c in decl.constraints)}")
    if not red.losses:
        return f"{HEAD}; this problem has no loss term (only linear terms)"
    pairs, diag = [], None
    for blk in can.loss_blocks:
        if blk.loss_type.row_update not in _ROW_UPDATES:
            return (f"{HEAD}; this problem has a {blk.name} loss term, for which the row "
                    "subproblem has no closed form: use 'lowrank' (smooth losses) or 'sdp'")
        if blk.kind not in (RowKind.ENTRY, RowKind.DIAGONAL):
            return (f"bcd needs losses on entries K_ij (a row of the factor per point); this "
                    f"problem has a {blk.name} loss on {red.losses[blk.terms[0][0]].map.describe()}")
        if blk.kind == RowKind.DIAGONAL:
            if _ROW_UPDATES[blk.loss_type.row_update] != SQUARE:
                return (f"bcd handles a loss on K_ii only when it is squared (the quartic row "
                        f"subproblem of soft PCP); this problem has a {blk.name} loss on K_ii")
            diag = blk
        else:
            pairs.append(blk)
    i = np.concatenate([b.i for b in pairs]) if pairs else np.zeros(0, np.int64)
    j = np.concatenate([b.j for b in pairs]) if pairs else np.zeros(0, np.int64)
    kinds = {_ROW_UPDATES[b.loss_type.row_update] for b in pairs}
    key = np.minimum(i, j) * n + np.maximum(i, j)
    uk, cnt = np.unique(key, return_counts=True)
    if np.any(cnt > 1):
        dup = int(uk[np.argmax(cnt > 1)])
        return (f"bcd needs every pair at most once over the loss terms (one loss per pair in the "
                f"row subproblem); pair ({dup // n}, {dup % n}) appears {int(cnt.max())} times")
    bounded = LE in can.constraint_blocks
    if LINEAR in kinds or bounded:
        if not bounded:
            return ("a linear loss is unbounded below without the bound K_ii <= b^2 on every point "
                    "(Hu & Kwok 2015, eq. 29); bcd needs that constraint in the declaration")
        other = sorted({_LOSS_NAMES[k] for k in kinds if k != LINEAR})
        if diag is not None:
            other.append("squared (on K_ii)")
        if other or LINEAR not in kinds:
            return (f"bcd handles the bound K_ii <= b^2 only with linear losses alone (the row "
                    f"subproblem is then a projection onto ||g|| <= b); this problem has "
                    f"{' and '.join(other) or 'no linear'} loss terms with it")
    C = can.C
    if C is None:
        return (f"{HEAD}; this problem has a linear term with a dense adjoint "
                f"({', '.join(t.map.describe() for t in decl.linear)})")
    d = C.diagonal()
    if np.any(d <= 0):
        k = int(np.argmin(d))
        return (f"every diagonal entry C_ii of the linear cost <C, K> must be > 0 (the per-row "
                f"subproblem divides by it); C[{k},{k}] = {d[k]:.3g} (for tr(L K), build L "
                f"with delta > 0)")
    if diag is not None:
        if diag.size != n or np.unique(diag.i).size != n:
            return (f"bcd handles squared losses on K_ii on every point once or on none (the "
                    f"quartic row subproblem of soft PCP); this problem has {diag.size} such rows "
                    f"on {np.unique(diag.i).size} of {n} points")
        if kinds - {SQUARE}:
            other = sorted({_LOSS_NAMES[k] for k in kinds - {SQUARE}})
            return (f"bcd handles a squared loss on K_ii only with squared losses on the pairs "
                    f"(the quartic row subproblem of soft PCP); this problem also has a "
                    f"{' and a '.join(other)} loss")
    return None


#: relative objective tolerance this method reaches against the full SDP (tests)
TEST_RTOL = 1e-3

ORDERS = ("color", "sequential")
UNLABELED = ("gauss_seidel", "block")


# ------------------------------------------------------------------------- the method
class BCDKL(IterativeSolver):
    """``"bcd"``: block coordinate descent for NPKL (Hu & Kwok 2015, Algorithm 1) and soft PCP (P1).

    Applies to any declaration :func:`why_not` accepts (per-pair losses of mixed kinds and
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
    #: min over K PSD, no divergence (the rest: :func:`why_not`, on the canonical form)
    capabilities = PSD_MINIMISATION
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
        return why_not(problem.declaration)

    def estimate_memory(self, problem: Any, opts: dict[str, Any]) -> int | None:
        """Peak bytes: the factored working set of :meth:`IterativeSolver.estimate_memory`
        (with a quarter's slack), plus the larger of the duality-gap certificate's eigensolve
        (dense up to :data:`DENSE_EIG_MAX` points, Lanczos with 64 vectors above) and, when
        the rank grows, :func:`kernelforms.certificate.escape`'s; plus the hinge multipliers'
        ``m x m`` fit (up to :data:`FIT_MAX_PAIRS` pairs).  Before the certificate was
        counted, 2 MB was accepted and the dense check added 73 MiB."""
        from .. import memory as mm

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
        # the reduced problem (points forced equal merged): its factor is lifted back at the end
        can = canonical(problem)  # applies_to checked that bcd takes it
        n, r = can.n, opts["rank"]
        eng = BCDEngine(can, qp_tol=opts["qp_tol"])
        loss = eng.loss
        if opts["init"] is None:
            G = rng.standard_normal((n, r)) / math.sqrt(r)
        else:
            G = np.array(opts["init"], dtype=float)
            merged = can.chain.merged
            if merged is not None:  # the mean row of each merged group
                G = np.asarray(merged.P.T @ G) / np.asarray(merged.P.sum(axis=0)).reshape(-1, 1)
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
            eng = BCDEngine(can, perm=perm, qp_tol=opts["qp_tol"])
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
            sm = 0.1 if eng.has_hinge else None
        mus = [0.0]
        if sm is not None and eng.has_hinge:
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
                if not accepted and (mu > 0 or not eng.has_hinge):
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
                           f"{'exact-hinge ' if eng.has_hinge else ''}row "
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
        out = SolverOutput(G, status, it, hist, message, extras)
        if cert is not None and math.isfinite(cert.dual):
            out.lower_bound = cert.dual  # the method's own bound: compare keeps the tighter
        if perm is not None:
            out.factor = G[inv]
        return can.chain.invert_solution(out) if can.chain.steps else out


# out-of-sample extension (Hu & Kwok 2015, Section III-E) lives in kernelforms.extend;
# re-exported here for ``from kernelforms.solvers.bcd import extend``
from ...extend import extend  # noqa: E402,F401
