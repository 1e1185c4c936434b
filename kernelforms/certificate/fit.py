"""The multiplier fit: slopes at the kinks of kinked losses and constraint multipliers fitted to stationarity
``B^T H B F = 0`` by (bounded) least squares, and a conic solver's own multipliers read on
the certificate's rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from .view import KINK_TOL, Minimisation, _active, _bounds_of, _constraint_op, _is_centring, _pairmap
from .point import _Point


def _columns(view: Minimisation, pt: _Point, items: list[tuple[Any, np.ndarray, np.ndarray]],
             Vp: np.ndarray) -> Any:
    """The stationarity columns ``vec(B^T A_p* V)`` (row-major ``(k, r)``) of the rows
    ``(map, row indices, coefficient)``: sparse, ``4 r`` non-zeros per pair row."""
    n, r = view.n, Vp.shape[1]
    blocks = []
    for m, idx, coef in items:
        k = len(idx)
        if k == 0:
            continue
        if _pairmap(m):
            i, j = m.i[idx], m.j[idx]
            dist = m.kind[idx] == 0
            col = np.arange(k)
            ar = np.arange(r)
            rows_i = (i[:, None] * r + ar).ravel()
            rows_j = (j[:, None] * r + ar).ravel()
            cc = np.repeat(col, r)
            D = Vp[i] - Vp[j]
            half_i = 0.5 * Vp[j]
            half_j = 0.5 * Vp[i]
            # entry rows: E_p V = (e_i v_j^T + e_j v_i^T) / 2; distance rows: (e_i - e_j)(v_i - v_j)^T
            di = np.where(dist[:, None], D, half_i) * coef[:, None]
            dj = np.where(dist[:, None], -D, half_j) * coef[:, None]
            A = sp.csr_matrix((np.concatenate([di.ravel(), dj.ravel()]),
                               (np.concatenate([rows_i, rows_j]), np.concatenate([cc, cc]))),
                              shape=(n * r, k))
        else:
            cols = [coef[q] * m.adjoint_op(np.eye(m.size)[p]).matmat(Vp).ravel()
                    for q, p in enumerate(idx)]
            A = sp.csr_matrix(np.stack(cols, axis=1))
        blocks.append(A)
    if not blocks:
        return sp.csr_matrix((n * r, 0))
    A = blocks[0] if len(blocks) == 1 else sp.hstack(blocks, format="csr")
    return view.space.restrict_columns(A, r)


def _kink_rows(loss: Any, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows within ``KINK_TOL`` of a kink of ``loss`` (its subdifferential an interval),
    and the interval's ends ``e0`` (least magnitude) and ``e1`` on them."""
    if loss.smooth:
        return np.zeros(0, dtype=int), np.zeros(0), np.zeros(0)
    lo, hi = loss.subdifferential(z, KINK_TOL)
    kink = np.flatnonzero(hi > lo)
    lo, hi = lo[kink], hi[kink]
    first = np.abs(lo) <= np.abs(hi)
    return kink, np.where(first, lo, hi), np.where(first, hi, lo)


def _fit(view: Minimisation, pt: _Point, us: list[np.ndarray], *, kinks: bool = True,
         y_fixed: np.ndarray | None = None, active_only: bool = True,
         Vfit: np.ndarray | None = None):
    """Fit the slopes at kinks (rows where a loss's ``subdifferential`` is an interval) and
    the constraint multipliers (active rows, right sign) to stationarity ``B^T H B F = 0``
    by (bounded) least squares.

    Returns the slopes, the multipliers (one per constraint row) and a note.
    """
    from scipy.optimize import lsq_linear
    from scipy.sparse.linalg import lsqr

    us = [u.copy() for u in us]
    items, lo, hi, where = [], [], [], []
    # rows at a kink (the loss's subdifferential an interval [e0, e1]): u = e0 + alpha (e1 - e0),
    # alpha in [0, 1], from e0 the end of least magnitude (the hinge's: u = -alpha y from 0)
    if kinks:
        for k, (t, z) in enumerate(zip(view.terms, pt.z)):
            kink, e0, e1 = _kink_rows(t.loss, z)
            if kink.size:
                us[k][kink] = e0
                items.append((t.map, kink, t.weight * (e1 - e0)))
                lo.append(np.zeros(kink.size)), hi.append(np.ones(kink.size))
                where.append(("u", k, kink, e0, e1))
    # constraint rows: active ones only
    off = 0
    n_rows = view.n_rows
    if y_fixed is None:
        for b in view.rows:
            act = np.flatnonzero(_active(b.sense, b.map.apply(pt.K) - b.bound, b.bound)) \
                if active_only else np.arange(b.map.size)
            if act.size:
                items.append((b.map, act, np.ones(act.size)))
                blo, bhi = _bounds_of(b.sense[act])
                lo.append(blo), hi.append(bhi)
                where.append(("y", off, act, None, None))
            off += b.map.size
    G = pt.gradient(us)
    if y_fixed is not None:
        G = G + _constraint_op(view, y_fixed)
    y = np.zeros(n_rows) if y_fixed is None else y_fixed.copy()
    if not items:
        return us, y, ""
    Vf = pt.Vp if Vfit is None else Vfit
    A = _columns(view, pt, items, Vf)
    rhs = -view.space.restrict_rows(G.matmat(Vf))
    extra = 0
    sp_ = view.space
    if sp_.u is not None:
        # K 1 = 0: stationarity holds up to u w^T (the centring row's multiplier); needed
        # unless every column and the gradient are centred already (MVU: distance rows)
        all_dist = all(_pairmap(m) and np.all(m.kind[idx] == 0) for m, idx, _ in items)
        resid_u = sp_.u @ rhs
        if not (all_dist and np.linalg.norm(resid_u) <= 1e-12 * max(1.0, np.linalg.norm(rhs))):
            r = Vf.shape[1]
            U = sp.csr_matrix(np.kron(sp_.u[:, None], np.eye(r)))
            A = sp.hstack([A, U], format="csr")
            lo.append(np.full(r, -np.inf)), hi.append(np.full(r, np.inf))
            extra = r
    lo_, hi_ = np.concatenate(lo), np.concatenate(hi)
    b = rhs.ravel()
    m = A.shape[1]
    if np.all(np.isinf(lo_)) and np.all(np.isinf(hi_)):
        sol = lsqr(A, b, atol=1e-14, btol=1e-14, iter_lim=20 * m + 1000)
        x = np.asarray(sol[0], dtype=float)
        how = "LSQR"
    elif _diagonal_only(items, pt) and extra == 0:
        x = _diagonal_fit(items, Vf, rhs, lo_, hi_)
        how = "row by row"
    else:
        sol = lsq_linear(A, b, bounds=(lo_, hi_), lsmr_tol="auto", max_iter=200)
        x = np.clip(sol.x, lo_, hi_)
        how = "bounded least squares"
    pos = 0
    for (kind, k, idx, e0, e1) in where:
        val = x[pos:pos + idx.size]
        pos += idx.size
        if kind == "u":
            us[k][idx] = e0 + val * (e1 - e0)
        else:
            y[k + idx] = val
    return us, y, how


def _diagonal_only(items, pt) -> bool:
    """Every unknown is a diagonal entry row, on distinct points, of the plain PSD form."""
    if not pt.view.space.plain:
        return False
    pts = []
    for m, idx, _ in items:
        if not (_pairmap(m) and np.all((m.kind[idx] == 1) & (m.i[idx] == m.j[idx]))):
            return False
        pts.append(m.i[idx])
    p = np.concatenate(pts)
    return len(np.unique(p)) == len(p)


def _diagonal_fit(items, V, rhs, lo, hi) -> np.ndarray:
    """Diagonal rows touch one row of ``H V`` each: the least squares decouple,
    ``y_i = <R_i, v_i> / ||v_i||^2`` clipped to its sign (NPKL's ``K_ii <= b^2``)."""
    i = np.concatenate([m.i[idx] for m, idx, _ in items])
    coef = np.concatenate([c for _, _, c in items])
    nv = np.einsum("ij,ij->i", V[i], V[i])
    x = np.einsum("ij,ij->i", rhs[i], V[i]) / np.maximum(nv, 1e-300) / coef
    return np.clip(x, lo, hi)


def _from_duals(view: Minimisation, duals: dict) -> "tuple[list, np.ndarray, bool] | None":
    """A solver's multipliers on the certificate's rows: per-term slopes (None where the
    solver gave none), the constraint multipliers (0 where it gave none) and whether they
    cover every constraint row and every term of a loss whose slope is not fixed (None when
    they cover nothing)."""
    decl = view.decl
    cons = list(duals.get("constraints") or [])
    losses = list(duals.get("losses") or [])
    if len(cons) != len(decl.constraints) or len(losses) != len(decl.losses):
        return None
    ys, complete, used = [], True, False
    for c, d in zip(decl.constraints, cons):
        if _is_centring(c):
            continue  # the centring row: the certificate works on the centred subspace
        if d is None or np.shape(d) != (c.map.size,) or not np.all(np.isfinite(d)):
            ys.append(np.zeros(c.map.size))
            complete = False
        else:
            ys.append(np.asarray(d, dtype=float))
            used = True
    y = np.concatenate(ys) if ys else np.zeros(0)
    us: list = []
    for t, d in zip(view.terms, losses):
        ok = d is not None and np.shape(d) == (t.map.size,) and np.all(np.isfinite(d))
        lo, hi = t.loss.conjugate_domain()
        if np.all(lo == hi):
            us.append(None)  # a loss whose slope is fixed (linear): its gradient
            continue
        if not ok:
            complete = False
            us.append(None)  # its gradient at the point (the exact tangent)
            continue
        # into the conjugate's domain (the hinge's: u = -alpha y, alpha in [0, 1]), where it is finite
        us.append(np.clip(np.asarray(d, dtype=float), lo, hi))
        used = True
    if not used:
        return None
    return us, y, complete
