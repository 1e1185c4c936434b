"""The trace rules: ``tau >= tr(K*)`` from the declaration (diagonal or trace bounds, the
objective at a feasible point with squared-loss rows, distance bounds on a connected graph)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..result import LowRank

from .eigen import _dense_lower
from .view import Minimisation, _is_trace, _pairmap
from .point import _Point


def _linear_floor(view: Minimisation, Cl: Any, dense_below: int, near_zero: bool) -> tuple[float, str]:
    """A lower estimate of ``lambda_min`` of the linear terms' matrix ``Cl`` on the form
    (:meth:`~kernelforms.certificate.space._Space.near_zero_lower` with ``near_zero``, else
    ``min_eig``), computed once per declaration: ``Cl`` does not depend on the point (the rank
    growth certifies several points of one problem; at a million points each estimate took
    2.3 s, 200 products of the Laplacian)."""
    from ..model.chain import derived

    key = f"certificate_linear_floor_{'near_zero' if near_zero else 'min'}_{int(dense_below)}"

    def compute(_decl: Any) -> tuple[float, str]:
        if near_zero:
            return view.space.near_zero_lower(Cl, dense_below)
        return view.space.min_eig(Cl, dense_below)

    return derived(view.decl, key, compute)


class _Trace:
    """``tau >= tr(K*)`` from the declaration's rules, computed lazily (once per certify)."""

    def __init__(self, view: Minimisation, pt: _Point, dense_below: int) -> None:
        self.view, self.pt, self.dense_below = view, pt, dense_below
        self.value: float | None = None
        self.note = ""
        self.failures: list[str] = []

    def get(self) -> float:
        if self.value is None:
            best, note = math.inf, ""
            for rule in (self._from_constraints, self._from_objective, self._from_distance_bounds):
                tau, how = rule()
                if tau is not None and tau < best:
                    best, note = tau, how
                if math.isfinite(best):
                    break  # the rules are tried cheapest first
            self.value, self.note = best, note
        return self.value

    def reason(self) -> str:
        return "; ".join(self.failures) if self.failures else "no rule applies"

    # -- rule 1: upper bounds on the diagonal or on tr(K)
    def _from_constraints(self):
        v = self.view
        n = v.n
        cap = np.full(n, np.inf)
        tr_cap = math.inf
        for b in v.rows:
            up = b.sense != 1
            m = b.map
            if _pairmap(m):
                d = up & (m.kind == 1) & (m.i == m.j)
                if np.any(d):
                    np.minimum.at(cap, m.i[d], np.maximum(b.bound[d], 0.0))
            elif _is_trace(m) and up[0]:
                tr_cap = min(tr_cap, max(float(b.bound[0]), 0.0))
        out = min(tr_cap, float(cap.sum()))
        if math.isfinite(out):
            return out, ("tau from the trace bound" if out == tr_cap else
                         "tau = sum of the upper bounds on K_ii")
        return None, ""

    # -- rule 2: F(K*) <= F(a feasible point) and F >= beta tr(K) + quadratics in tr(K)
    def _from_objective(self):
        v, pt = self.view, self.pt
        F_ub, how_ub = _feasible_value(v, pt)
        if F_ub is None:
            self.failures.append("no feasible point is known to bound the objective "
                                 f"({how_ub})")
            return None, ""
        c0 = 0.0
        lin = [v.C]
        quads = []  # (a, mu, T): a (mu x - T)_+^2
        for t in v.terms:
            lb = -t.loss.conjugate(np.zeros(t.map.size))
            m = t.map
            used = np.zeros(m.size, dtype=bool)
            if t.loss.is_squared and _pairmap(m):
                q, used = self._squared_rows(t)
                if q is not None:
                    quads.append(q)
            rest = ~used
            if np.all(np.isfinite(lb[rest])):
                c0 += t.weight * float(np.sum(lb[rest]))
            elif t.loss.curvature == 0 and np.all(rest):
                lin.append(m.adjoint_op(t.weight * t.loss.grad(np.zeros(m.size))))
            else:
                self.failures.append(f"the {t.loss.name} loss term is unbounded below")
                return None, ""
        from ..model import sym_sum

        Cl = sym_sum(v.n, lin)
        if not quads:
            beta, _ = _linear_floor(v, Cl, self.dense_below, near_zero=False)
            if not beta > 0:
                self.failures.append(
                    f"the linear terms' matrix has lambda_min <= 0 on the form (lower estimate "
                    f"{beta:.3g}), so the objective bounds no trace (for a Laplacian: build it "
                    "with delta > 0, e.g. NPKL.from_data(..., delta=0.01))")
                return None, ""
            tau = max(0.0, F_ub - c0) / beta
            return tau, f"tau = (F_ub - lb) / lambda_min(C) ({how_ub})"
        beta, _ = _linear_floor(v, Cl, self.dense_below, near_zero=True)
        tau = _quad_sup(beta, quads, F_ub - c0)
        if tau is None:
            self.failures.append("the quadratic trace inequality has no solution")
            return None, ""
        return tau, f"tau from the squared loss rows and F(K*) <= {F_ub:.6g} ({how_ub})"

    def _squared_rows(self, t: Any):
        """``w sum_P r_p^2 >= (w / |P|)(mu tr(K) - sum_P t_p)_+^2`` for the diagonal rows (mu =
        the smallest count over the points) or the distance rows (mu = lambda_min of the
        graph Laplacian on the form)."""
        v, m = self.view, t.map
        n = v.n
        tg = t.loss.targets
        diag = (m.kind == 1) & (m.i == m.j)
        if np.any(diag):
            cnt = np.bincount(m.i[diag], minlength=n).astype(float)
            if v.space.basis is not None:
                B = v.space.basis
                mu = _dense_lower(B.T @ (cnt[:, None] * B))
            else:
                mu = float(cnt.min())
            if mu > 0:
                P = int(diag.sum())
                return (t.weight / P, mu, float(tg[diag].sum())), diag
        dist = m.kind == 0
        if np.any(dist):
            mu = _laplacian_mu(v, m.take(dist), self.dense_below)
            if mu is not None and mu > 0:
                P = int(dist.sum())
                return (t.weight / P, mu, float(tg[dist].sum())), dist
        return None, np.zeros(m.size, dtype=bool)

    # -- rule 3: sum of distances <= sum of bounds, with the graph's lambda_2
    def _from_distance_bounds(self):
        v = self.view
        best = None
        for b in v.rows:
            m = b.map
            if not _pairmap(m):
                continue
            rows = (b.sense != 1) & (m.kind == 0)
            if not np.any(rows):
                continue
            mu = _laplacian_mu(v, m.take(rows), self.dense_below)
            if mu is None:
                self.failures.append("the distance rows' graph Laplacian is too large for the "
                                     "dense lambda_2 this rule uses")
                continue
            if not mu > 0:
                self.failures.append("the distance rows do not bound tr(K) (their graph is not "
                                     "connected, or K is not centred)")
                continue
            tau = float(np.maximum(b.bound[rows], 0).sum()) / mu
            if best is None or tau < best:
                best = tau
        if best is None:
            return None, ""
        return best, "tau = sum of distance bounds / lambda_2 of their graph"


def _laplacian_mu(v: Minimisation, m: Any, dense_below: int) -> float | None:
    """A lower estimate of ``lambda_min`` of ``A*(1)`` (a graph Laplacian) on the form; ``None``
    when it would need Lanczos on a large Laplacian."""
    from scipy.sparse.csgraph import connected_components

    sp_ = v.space
    op = m.adjoint_op(np.ones(m.size))
    if sp_.basis is None:
        if sp_.u is None and sp_.merge is None:
            return 0.0  # the constant vector is in the kernel of a Laplacian
        A = sp.coo_matrix((np.ones(m.size), (m.i, m.j)), shape=(v.n, v.n))
        if connected_components(A, directed=False)[0] > 1 and sp_.merge is None:
            return 0.0
        if sp_.k > dense_below:
            return None
    lam, _ = sp_.min_eig(op, dense_below)
    return lam


def _quad_sup(beta: float, quads: list, R: float) -> float | None:
    """``sup {x >= 0: beta x + sum_q a_q (mu_q x - T_q)_+^2 <= R}`` (``None`` if empty)."""
    def phi(x):
        return beta * x + sum(a * max(mu * x - T, 0.0) ** 2 for a, mu, T in quads)

    if len(quads) == 1:
        a, mu, T = quads[0]
        Rp = R - beta * T / mu
        if Rp >= 0 and phi(T / mu) <= R:
            b = beta / mu
            y = (-b + math.sqrt(b * b + 4.0 * a * Rp)) / (2.0 * a)
            return (T + y) / mu
    if phi(0.0) > R and beta >= 0:
        return None
    lo = 0.0
    hi = max(1.0, max(max(T, 0.0) / mu for _, mu, T in quads))
    while phi(hi) <= R:
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            return None
    if phi(lo) > R:  # find a point inside the (convex) sublevel set by ternary search
        a_, b_ = lo, hi
        for _ in range(200):
            m1, m2 = a_ + (b_ - a_) / 3, b_ - (b_ - a_) / 3
            if phi(m1) <= phi(m2):
                b_ = m2
            else:
                a_ = m1
        lo = (a_ + b_) / 2
        if phi(lo) > R:
            return None
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if phi(mid) <= R:
            lo = mid
        else:
            hi = mid
    return hi


def _feasible_value(v: Minimisation, pt: _Point) -> tuple[float | None, str]:
    """An upper bound on ``F(K*)`` (the minimisation's sign) from feasible points on the ray
    of the point (projected onto the form): ``theta K`` for the ``theta >= 0`` every
    constraint row allows, ``K = 0`` among them when it is feasible.

    Each row is linear in ``theta``: ``theta a <= b`` / ``>= b`` gives an upper or a lower
    limit by the signs of ``a`` and ``b``, so rows of any mix (entries and distances,
    ``<=`` and ``>=``) leave an interval ``[lo, hi]``.  Tried: ``theta = 1`` clipped to it and
    both ends (pulled inside by 1e-12 relative); a candidate counts only when every row
    holds exactly at the kernel actually evaluated.  An equality row with a non-zero bound
    allows a single ``theta`` that rounding misses, so no point then.
    """
    lo, hi = 0.0, math.inf
    blocked = ""
    for b in v.rows:
        a = b.map.apply(pt.K)
        s, bd = b.sense, b.bound
        le, ge, eq = s == -1, s == 1, s == 0
        if np.any(eq & (bd != 0)):
            blocked = "equality rows with non-zero bounds fix the scale of the point"
            break
        # theta a <= bd on <= rows, theta a >= bd on >= rows (theta a = 0 on == rows)
        up = (le & (a > 0)) | (ge & (a < 0))
        down = (le & (a < 0)) | (ge & (a > 0))
        flat = a == 0
        if np.any(flat & ((le & (bd < 0)) | (ge & (bd > 0)))):
            blocked = "a row the point leaves at 0 is violated at every scale"
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            if np.any(up):
                hi = min(hi, float(np.min(bd[up] / a[up])))
            if np.any(down):
                lo = max(lo, float(np.max(bd[down] / a[down])))
        if np.any(eq & ~flat):
            hi = 0.0
    if not blocked and lo > hi:
        blocked = (f"no scaling of the point satisfies every row (theta would need "
                   f"{lo:.6g} <= theta <= {hi:.6g})")
    cands: list[tuple[float, str]] = []
    if not blocked:
        lo_in = lo * (1.0 + 1e-12) if lo > 0 else 0.0
        hi_in = hi * (1.0 - 1e-12) if math.isfinite(hi) else math.inf
        thetas = {min(max(1.0, lo_in), hi_in), lo_in}
        if math.isfinite(hi_in):
            thetas.add(hi_in)
        for th in sorted(t for t in thetas if lo_in <= t <= hi_in):
            Gt = math.sqrt(th) * pt.Vp if th > 0 else np.zeros((v.n, 1))
            Kt = LowRank(Gt)
            if all(_holds(b, b.map.apply(Kt)) for b in v.rows):
                how = ("K = 0" if th == 0 else "the point" if th == 1.0
                       else f"the point scaled by {th:.12g}")
                cands.append((v.value(Gt), how))
        if not cands:
            blocked = "the scaled points miss some row by rounding"
    if not cands:
        return None, blocked
    val, how = min(cands, key=lambda c: c[0])
    return val, f"F_ub from {how}"


def _holds(b: Any, a: np.ndarray) -> bool:
    """Every row of the constraint ``b`` holds exactly (no tolerance) at the values ``a``."""
    s, bd = b.sense, b.bound
    return bool(np.all(np.where(s == -1, a <= bd, np.where(s == 1, a >= bd, a == bd))))
