"""The diagonal shift: a tighter bound than ``c + lambda_min tau`` when the minorant has
shiftable diagonal rows."""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from .base import Certificate, relative
from .view import Minimisation, _bounds_vec, _constraint_op, _pairmap
from .point import _Point, _below_the_point


#: the diagonal shift is tried when the curvature term ``-lambda_min tau`` is at least this
#: share of the certified gap, with at most this many negative eigenpairs
SHIFT_SHARE = 0.1
SHIFT_PAIRS = 8
#: the rule of the one plain Lanczos run that gives the bound's ``lambda_min`` (to the strict
#: rule) and the shift's pairs (:func:`~kernelforms.certificate.eigen.lanczos_lowest`'s
#: ``tol_rest`` and ``enough``): the pairs after the smallest to ``1e-6 ||H||`` (they are
#: directions; the shifted matrix's own run checks what is built on them), and the run ends
#: once a converged value is ``>= 0`` (the shift lifts the negative ones only)
SHIFT_PAIR_TOL = 1e-6
SHIFT_PAIR_RULE = {"tol_rest": SHIFT_PAIR_TOL, "enough": 0.0}
#: the shifted matrix's run stops once its smallest eigenvalue is clearly above this
#: (:func:`~kernelforms.certificate.eigen.lanczos_min`'s ``floor``): the bound reads
#: ``min(0, lambda_min)``
SHIFT_FLOOR = 0.0


#: with a gap wanted (:func:`wanted_gap`), the share of its slack (what the bound with a PSD
#: shifted matrix, ``c - price``, leaves below the gap) that the shifted matrix's negative
#: curvature may take: its run stops once ``lambda_min`` is clearly above
#: ``-SHIFT_SLACK_SHARE slack / tau`` instead of 0 (the bound still reads the computed
#: ``min(0, lambda_min)``)
SHIFT_SLACK_SHARE = 0.5


def _floor(F: float, top: float, tau: float, wanted: float | None) -> float:
    """The floor of the shifted matrix's run (:func:`~kernelforms.certificate.eigen.lanczos_min`):
    0 without a gap wanted; with one, minus :data:`SHIFT_SLACK_SHARE` of what the bound
    ``top = c - price`` leaves below ``F - wanted |F|`` (a bound there has relative gap at
    most ``wanted``), per unit of ``tau``."""
    if wanted is None or not (math.isfinite(tau) and tau > 0):
        return SHIFT_FLOOR
    slack = top - (F - wanted * abs(F))
    return SHIFT_FLOOR - SHIFT_SLACK_SHARE * slack / tau if slack > 0 else SHIFT_FLOOR


#: with a gap wanted, a shifted matrix's run stops (no bound from it) once its smallest Ritz
#: value shows that the bound would be more than this many times the gap wanted from the
#: objective (:func:`_give_up`): the caller has no use for it.  The rank growth takes a point
#: within 4 times its ``stop_gap`` as a near miss (:data:`kernelforms.solvers.rank.NEAR_MISS`),
#: so such bounds are still computed to the end (a million points: shifted runs whose bounds
#: came out at 5.0e-3 and 1.3e-3 with 1e-5 wanted took 22 s each)
SHIFT_GIVE_UP = 4.0


def _give_up(F: float, top: float, tau: float, wanted: float | None) -> float | None:
    """The ``lambda_min`` below which the bound ``top + lambda_min tau`` has a relative gap
    above :data:`SHIFT_GIVE_UP` times ``wanted`` (None without a gap wanted).  With ``g`` that
    share, a bound below ``F - g |F| / (1 - g)`` is that far whatever the sign of ``F``
    (:func:`~kernelforms.certificate.base.relative` divides by the larger magnitude)."""
    if wanted is None or not (math.isfinite(tau) and tau > 0 and math.isfinite(top)):
        return None
    g = SHIFT_GIVE_UP * wanted
    if not 0 < g < 1:
        return None
    low = F - g * abs(F) / (1.0 - g)
    return (low - top) / tau if low < top else None


def _raise_scale(a: float, cost_a: float, c: float, F: float, wanted: float | None,
                 price: Any) -> tuple[float, float] | None:
    """With a gap wanted, the scale in ``(a, 1]`` whose price takes
    :data:`SHIFT_SLACK_SHARE` of what ``c - cost_a`` leaves below ``F - wanted |F|``
    (bisection on ``price``, increasing in the scale), and that price; None without a gap
    wanted or slack."""
    if wanted is None:
        return None
    room = c - (F - wanted * abs(F)) - cost_a  # the price the gap still allows
    if not (math.isfinite(room) and room > 0):
        return None
    target = cost_a + SHIFT_SLACK_SHARE * room
    lo, hi = a, 1.0
    full = price(hi)
    if full <= target:
        return 1.0, full  # the full diagonal is within reach: it alone is tried
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if price(mid) <= target else (lo, mid)
    cost = price(lo)
    return (lo, cost) if lo > a and math.isfinite(cost) else None


#: the relative gap a caller needs (:func:`wanted_gap`); None: any improvement counts
_WANTED: contextvars.ContextVar[float | None] = contextvars.ContextVar("wanted_gap", default=None)


@contextlib.contextmanager
def wanted_gap(rel: float | None):
    """Within the block, a certificate is of use only if its relative gap is at most ``rel``
    (the rank growth's ``stop_gap``): :func:`_diagonal_shift` then skips the eigenvalue run
    of a shifted matrix whose bound could not reach ``rel`` even if that matrix were PSD
    (``c - price(d)``, known before the run).  The certificate returned is then the
    unshifted one, valid and looser; nothing is claimed that was not computed.  At a million
    points such a run costs about a minute of CPU time."""
    token = _WANTED.set(None if rel is None else float(rel))
    try:
        yield
    finally:
        _WANTED.reset(token)


def _may_shift(view: Minimisation) -> bool:
    """Whether :func:`_diagonal_shift` can apply to ``view`` at some point: the PSD form of a
    minimisation with a loss or an (equality or ``<=``) constraint row on some ``K_ii``."""
    if not (view.space.basis is None and view.kappa == 0 and view.sign > 0 and view.divergence is None):
        return False
    for t in view.terms:
        m = t.map
        if _pairmap(m) and np.any((m.kind == 1) & (m.i == m.j)):
            return True
    for blk in view.rows:
        m = blk.map
        if _pairmap(m) and np.any((m.kind == 1) & (m.i == m.j) & (blk.sense <= 0)):
            return True
    return False


def _diagonal_shift(view: Minimisation, pt: _Point, us: list, y: np.ndarray, cert: Certificate,
                    dense_below: int, pairs: tuple | None = None,
                    krylov: list | None = None) -> Certificate | None:
    """A tighter bound than ``c + lambda_min tau`` when the minorant has diagonal rows.

    Where the declaration has a loss or an (equality or ``<=``) constraint row on ``K_ii``
    (P1, NPKL's ``K_ii <= b^2``, hard PCP's ``K_ii = 1``; the PSD or merged form, not a basis),
    its slope or multiplier can be raised by ``d_i >= 0``: the minorant's matrix becomes
    ``H + diag(d)`` and its constant drops by the exact price (``w (l*(u + d / w) - l*(u))``
    for a loss, ``d b`` for a constraint row), about ``d_i K_ii`` for a loss.  ``tau`` pays
    for the negative curvature uniformly over the trace; the shift pays for it only where the
    negative eigenvectors live: ``d = sum_j |lambda_j| |x_j| S_j / sqrt(p)``, with
    ``S_j = sum_i |x_ji| sqrt(p_i)`` and ``p_i`` the first-order price (the smallest ``d`` in
    the Cauchy-Schwarz sense with ``diag(d) >= sum_j |lambda_j| x_j x_j^T``).  Then

        F(K*) >= c - price(d) + min(0, lambda_min(H + diag(d))) tau,

    valid for any ``d >= 0`` (the new minimum eigenvalue is computed, not assumed).  That
    ``d`` dominates each eigenpair on its own; ``alpha d`` with the scale of
    :func:`_shift_scale` (what the span of the computed eigenvectors needs) is tried first,
    the full ``d`` only when the scaled one's bound leaves room for it.  Returns None when it
    does not apply or does not improve the bound (or its relative gap).  One eigenvalue run
    for the shifted matrix (two when the scaled one fails), and one for the eigenvectors
    unless ``pairs`` (eigenvalues, unit eigenvectors of this minorant's matrix, from
    :func:`escape`) has them; that run continues ``krylov``'s (the plain Lanczos run that gave
    ``cert.min_eig``, :class:`~kernelforms.certificate.eigen.Krylov`) when there is one."""
    if not (view.space.basis is None and view.kappa == 0 and view.sign > 0 and view.divergence is None):
        return None
    s, tau = cert.min_eig, cert.trace_bound
    if not (math.isfinite(s) and s < 0 and math.isfinite(tau) and math.isfinite(cert.lower_bound)):
        return None
    if -s * tau < SHIFT_SHARE * cert.gap:
        return None
    n = view.n
    # the shiftable diagonal rows, one per point: (kind, term index or row offset, rows, points)
    owner = np.full(n, -1)
    price = np.full(n, np.nan)
    slots: list[tuple[str, int, np.ndarray, np.ndarray]] = []
    for k, (t, u) in enumerate(zip(view.terms, us)):
        m = t.map
        if not _pairmap(m):
            continue
        rows = np.flatnonzero((m.kind == 1) & (m.i == m.j))
        rows = rows[owner[m.i[rows]] < 0]
        if not rows.size:
            continue
        pts = m.i[rows]
        owner[pts] = len(slots)
        price[pts] = np.maximum(pt.z[k][rows], 0.0)  # l*'(u) = z at a smooth loss's gradient
        slots.append(("loss", k, rows, pts))
    off = 0
    for blk in view.rows:
        m = blk.map
        if _pairmap(m):
            rows = np.flatnonzero((m.kind == 1) & (m.i == m.j) & (blk.sense <= 0))
            rows = rows[owner[m.i[rows]] < 0]
            if rows.size:
                pts = m.i[rows]
                owner[pts] = len(slots)
                price[pts] = np.maximum(blk.bound[rows], 0.0)
                slots.append(("row", off, rows, pts))
        off += m.size
    if not slots:
        return None
    H = pt.gradient(us)
    if view.n_rows:
        H = H + _constraint_op(view, y)
    c = cert.lower_bound - s * tau
    if pairs is not None and np.size(pairs[0]) and float(np.min(pairs[0])) < 0:
        vals, X = np.asarray(pairs[0]), np.asarray(pairs[1])
    else:
        resume = krylov.pop() if krylov else None
        vals, X = view.space.lowest(H, SHIFT_PAIRS, dense_below, resume=resume)
        del resume  # its Lanczos vectors
    neg = np.flatnonzero(vals < 0)
    if not neg.size:
        return None
    ok = owner >= 0
    sq = np.sqrt(np.where(ok, np.maximum(price, 1e-12 * max(1.0, float(np.nanmax(price)))), 1.0))
    d_full = np.zeros(n)  # the sum of each negative eigenpair's own Cauchy-Schwarz diagonal
    for q in neg:
        a = np.abs(X[:, q]) * ok
        d_full += abs(float(vals[q])) * a * float(a @ sq) / sq
    bvec = _bounds_vec(view) if view.n_rows else None

    def price_of(d):
        cost = 0.0
        for kind, k, rows, pts in slots:
            dk = d[pts]
            if kind == "loss":
                t, u = view.terms[k], us[k]
                u2 = u.copy()
                u2[rows] += dk / t.weight
                # the conjugate is per row (targets, labels): only the shifted rows change
                cost += t.weight * float(np.sum((t.loss.conjugate(u2) - t.loss.conjugate(u))[rows]))
            else:
                cost += float(dk @ bvec[k + rows])
        return cost

    from ..model import SymOperator

    cost_full = price_of(d_full)
    if not (math.isfinite(cost_full) and cost_full < -s * tau):
        return None  # no better than the curvature term even if the shifted matrix is PSD
    cands = []  # (scale of d_full, price, note, start), by increasing price
    F = view.sign * cert.objective
    wanted = _WANTED.get()
    scaled = _shift_scale(H, X, d_full)
    if scaled is not None:
        a, start = scaled
        cost_a = price_of(a * d_full)
        if math.isfinite(cost_a) and cost_a < cost_full:
            how_a = f"scaled by {a:.3g}"
            raised = _raise_scale(a, cost_a, c, F, wanted, lambda x: price_of(x * d_full))
            if raised is not None:
                # with a gap wanted, part of its slack buys a margin above the span's scale:
                # the span does not see the coupling to the other directions, and one run on
                # a clearly PSD matrix is cheaper than a second one after a near miss (a
                # million points: 0.0623 left lambda_min -4.2e-8, 1,133 products, then
                # 0.063 passed in 793 more)
                a, cost_a = raised
                how_a = f"{how_a}, raised to {a:.4g} within the gap wanted"
            if a < 1.0:
                cands.append((a, cost_a, how_a, start))
    cands.append((1.0, cost_full, "", None))

    def reaches(cost):
        # only a bound within the caller's gap is of use: a diagonal whose price alone leaves
        # the bound above it is not checked (the best bound it could give is c - price,
        # reached when the shifted matrix is PSD)
        return wanted is None or relative(F - (c - cost), F, c - cost) <= wanted

    cands = [cd for cd in cands if reaches(cd[1])]
    HV = np.asarray(H @ pt.Vp)  # the point's own check of each shifted matrix's estimate
    diagK = np.sum(pt.Vp * pt.Vp, axis=1)
    best = None
    rescaled = False
    while cands:
        a, cost, how_d, start = cands.pop(0)
        if best is not None and best[0] >= c - cost:
            break  # this diagonal costs more than the best bound leaves, even if PSD
        d = a * d_full if a != 1.0 else d_full
        Hd = H + SymOperator(n, sp.diags(d, format="csr"), np.zeros((n, 0)), np.zeros(0))
        # the bound reads min(0, lambda_min): a run may stop once it is clearly above the floor
        floor = _floor(F, c - cost, tau, wanted)
        # and may stop, without a bound, once it shows the bound would be of no use
        quit_below = _give_up(F, c - cost, tau, wanted)
        runs: list = []
        s2, how = view.space.min_eig(Hd, dense_below, start=start, floor=floor, keep=runs,
                                     give_up=quit_below)
        extra = float(d @ diagK)  # <diag(d), K>
        if not _below_the_point(s2, pt, HV, extra):
            # again, from a random start
            runs = []
            s2, how = view.space.min_eig(Hd, dense_below, floor=floor, keep=runs,
                                         give_up=quit_below)
            if not _below_the_point(s2, pt, HV, extra):
                continue  # no lower estimate of this shifted matrix: no bound from it
        ritz = runs[-1].ritz if runs and getattr(runs[-1], "ritz", None) is not None else None
        del runs  # the runs' Lanczos vectors
        lb = c - cost + min(0.0, s2) * tau
        if best is None or lb > best[0]:
            best = (lb, s2, how, d, cost, how_d)
        if wanted is not None and relative(F - best[0], F, best[0]) <= wanted:
            break  # the caller's gap is proved: a tighter bound would cost another run
        if s2 < 0 and a < 1.0 and not rescaled and ritz is not None and np.shape(ritz[1]) == (n,):
            # slightly short of PSD (a million points: -4.4e-8, times tau 1.3e6: 14% of the
            # gap): once, a larger scale from the first-order change of the bottom Ritz
            # value, lambda(a') ~ lambda(a) + (a' - a) x^T diag(d_full) x, with a margin
            rescaled = True
            x = ritz[1]
            slope = float(d_full @ (x * x))
            if slope > 0 and math.isfinite(slope):
                a2 = a + SHIFT_RESCALE * (-s2) / slope
                cost2 = price_of(a2 * d_full) if a2 < 1.0 else math.inf
                if a2 > a and math.isfinite(cost2) and c - cost2 > best[0] and reaches(cost2):
                    cands.insert(0, (a2, cost2, f"scaled by {a:.3g}, then {a2:.4g}", x))
    if best is None:
        return None
    lb, s2, how, d, cost, how_d = best
    gap = F - lb
    if not (lb > cert.lower_bound and relative(gap, F, lb) < cert.relative_gap):
        # (far from the optimum a higher negative bound can read as a larger relative gap)
        return None
    note = (f"{cert.note}; diagonal shift on {int(np.count_nonzero(d))} points for "
            f"{neg.size} negative eigenvalue(s) ({how_d + ', ' if how_d else ''}price {cost:.3g}, "
            f"lambda_min {s:.3g} -> {s2:.3g})")
    return Certificate(objective=cert.objective, lower_bound=lb, gap=gap,
                       relative_gap=relative(gap, F, lb), min_eig=s2, inner=cert.inner,
                       trace_bound=tau if s2 < 0 else math.nan, eig_method=how, note=note,
                       violation=cert.violation)


#: a scaled diagonal whose shifted matrix came out slightly indefinite (``lambda_min = s2 < 0``)
#: is tried once more at ``a + SHIFT_RESCALE |s2| / (x^T diag(d) x)`` (``x`` the run's bottom
#: Ritz vector), when that diagonal's bound would be the better one
SHIFT_RESCALE = 2.0
#: the margin on the scale of :func:`_shift_scale` (the small problem sees the matrix only on
#: the span of the computed eigenvectors, not its coupling to the rest)
SHIFT_MARGIN = 1.1


def _shift_scale(H: Any, X: np.ndarray, d: np.ndarray) -> tuple[float, np.ndarray] | None:
    """The smallest ``alpha`` in ``(0, 1]`` that keeps ``X^T (H + alpha diag(d)) X`` PSD on
    the span of the computed eigenvectors ``X`` (bisection on the small matrix), times
    :data:`SHIFT_MARGIN`, and the bottom Ritz vector of ``H + alpha diag(d)`` on that span
    (the start of the eigenvalue run that checks it); None when ``alpha`` is not below 1.

    The Cauchy-Schwarz diagonal ``d`` dominates each negative eigenpair on its own, so with
    several it pays again for what the others' diagonals already lift: on a million
    two-Gaussian points (four negative eigenvalues) ``alpha`` was 0.054 on the span.  Only
    a common scale is taken: per-eigenpair weights from a small SDP on the same span (0 for
    the most negative pair, whose diagonal the others covered there) left the whole matrix
    with ``lambda_min = -2e-5``: the span does not see the coupling to the other
    directions.  The caller computes the shifted matrix's smallest eigenvalue, so nothing
    here is trusted."""
    A0 = X.T @ np.asarray(H @ X)
    B = X.T @ (d[:, None] * X)
    A0, B = (A0 + A0.T) / 2, (B + B.T) / 2
    scale = max(float(np.max(np.abs(np.linalg.eigvalsh(A0)))), 1e-300)
    A0, B = A0 / scale, B / scale

    def psd(a):
        return float(np.linalg.eigvalsh(A0 + a * B)[0]) >= 0

    if not psd(1.0):
        return None
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if psd(mid) else (mid, hi)
    a = min(1.0, SHIFT_MARGIN * hi)
    if a >= 1.0:
        return None
    _, Z = np.linalg.eigh(A0 + a * B)
    return a, X @ Z[:, 0]
