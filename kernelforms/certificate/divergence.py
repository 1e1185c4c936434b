"""Divergences (Burg, von Neumann): the bound from the Lagrange dual function in closed form."""

from __future__ import annotations

import math
import time

import numpy as np

from ..result import LowRank

from .base import Certificate, relative
from .view import Minimisation, _active, _bounds_of, _bounds_vec, _clip_sign, _senses, _sign_bounds


#: a divergence's dual function is maximised over the multipliers by L-BFGS-B for at most this
#: many iterations and about this many seconds (near a face of the PSD cone it is
#: ill-conditioned: a von Neumann instance with W's two smallest eigenvalues 2e-15 and 3e-7
#: needed about 1,000 iterations, 0.3 s, to close the gap to 1e-10)
DUAL_MAX_ITER = 5000
DUAL_SECONDS = 5.0
#: at most this many L-BFGS-B runs, each rescaled by the value the last one reached
DUAL_ROUNDS = 5


class _DualFunction:
    """The Lagrange dual function ``g(y) = min_W D(W, L) + <S_y, W> - y.b`` of a divergence
    over ``range(K0)`` (``L = diag(lam0)``, ``S_y = sum_p y_p S_p``), with its gradient
    ``<S_p, W(y)> - b_p`` at the minimiser ``W(y)``: ``(L^-1 + S_y)^-1`` (Burg) or
    ``exp(log L - S_y)`` (von Neumann).  Concave in ``y``; Burg's is ``-inf`` unless
    ``I + L^1/2 S_y L^1/2`` is positive definite.
    """

    def __init__(self, kind: str, lam0: np.ndarray, Phi: np.ndarray, b: np.ndarray) -> None:
        self.kind, self.lam0, self.Phi, self.b = kind, lam0, Phi, b
        self.h = np.sqrt(lam0)
        self.r = len(lam0)

    def _S(self, y: np.ndarray) -> np.ndarray:
        S = (self.Phi.T @ y).reshape(self.r, self.r, order="F")
        return (S + S.T) / 2

    def value(self, y: np.ndarray, grad: bool = False):
        """``(g, s)`` (``s`` = smallest eigenvalue of Burg's matrix, NaN for von Neumann), or
        ``(g, s, gradient)`` with ``grad``.  Far out (an infeasible problem's dual function
        grows without bound) ``exp`` overflows: ``g`` is then ``-inf`` or NaN, which the
        maximisation treats as a wall, so the overflow is not warned about."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self._value(y, grad)

    def _value(self, y: np.ndarray, grad: bool):
        S, h = self._S(y), self.h
        if self.kind == "burg":
            ev, U = np.linalg.eigh(np.eye(self.r) + (S * h[:, None]) * h[None, :])
            s = float(ev.min())
            if not s > 0:
                return (-math.inf, s, None) if grad else (-math.inf, s)
            g = float(np.sum(np.log(ev))) - float(y @ self.b)
            W = ((U / ev) @ U.T) * h[:, None] * h[None, :] if grad else None
        else:
            ev, U = np.linalg.eigh(np.diag(np.log(self.lam0)) - S)
            s = math.nan
            ex = np.exp(ev)
            g = float(np.sum(self.lam0) - np.sum(ex)) - float(y @ self.b)
            W = (U * ex) @ U.T if grad else None
        if not grad:
            return g, s
        return g, s, self.Phi @ W.ravel(order="F") - self.b

    def maximise(self, y0: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 max_iter: int = DUAL_MAX_ITER, seconds: float = DUAL_SECONDS
                 ) -> tuple[np.ndarray, float, float]:
        """L-BFGS-B on ``-g`` from ``y0`` within ``lo <= y <= hi``, at most ``max_iter``
        iterations and about ``seconds`` of wall time in all; returns ``(y, g, s)``, never
        worse than ``y0``.

        ``-g`` is divided by ``max(|g|, 1)`` at the start of a run, so that the gradient
        tolerance is relative; a fit near a face of the PSD cone can start at ``g = -3.5e12``
        where the optimum is 86.5, and a run scaled by that stops (its scaled gradient is
        below the tolerance) at ``g = -2,230`` (scipy 1.17).  So runs are repeated, each
        scaled by the value where the last one stopped, until one gains nothing
        (at most :data:`DUAL_ROUNDS` runs)."""
        from scipy.optimize import Bounds, minimize

        t_end = time.perf_counter() + seconds

        def stop(intermediate_result=None):
            if time.perf_counter() > t_end:
                raise StopIteration

        g0, s0 = self.value(y0)
        if not np.isfinite(g0) or len(y0) == 0:
            return y0, g0, s0
        best = (y0, g0, s0)
        left = int(max_iter)
        for _ in range(DUAL_ROUNDS):
            y_at, g_at = best[0], best[1]
            scale = max(abs(g_at), 1.0)

            def f(y, scale=scale):
                g, _, dg = self.value(y, grad=True)
                if not np.isfinite(g):  # outside Burg's domain: a wall the line search backs off
                    return 1e30, np.zeros_like(y)
                return -g / scale, -dg / scale

            try:
                res = minimize(f, y_at, jac=True, method="L-BFGS-B", bounds=Bounds(lo, hi),
                               callback=stop, options={"maxiter": left, "maxfun": 2 * left,
                                                       "ftol": 1e-15, "gtol": 1e-12})
            except (ValueError, np.linalg.LinAlgError):
                break
            y = np.clip(res.x, lo, hi)
            g, s = self.value(y)
            left -= int(res.nit)
            if not g > g_at:
                break
            best = (y, g, s)
            # a gain below the scale of the next run's tolerance: that run would stop at once
            if g - g_at <= 1e-12 * max(abs(g), 1.0) or left <= 0 or time.perf_counter() > t_end:
                break
        return best


def _certify_divergence(view: Minimisation, V: np.ndarray, y_given: np.ndarray | None) -> Certificate:
    """``D(K*) >= g(y) = min_W D(W) + sum_p y_p (<S_p, W> - b_p)`` over ``W`` PSD, ``S_p =
    V0^T A_p V0``, in closed form:

    * Burg: ``g(y) = logdet(I + L^1/2 S_y L^1/2) - y.b`` (``-inf`` unless positive definite),
    * von Neumann: ``g(y) = tr(L) - tr exp(log L - S_y) - y.b``,

    with ``L = diag(lam0)``; ``y`` fitted to stationarity ``grad D(W) + S_y = 0`` at the
    point (``S_y = W^-1 - L^-1`` resp. ``log L - log W``), of the right sign, zero on
    inactive rows.
    """
    from scipy.optimize import lsq_linear

    decl = view.decl
    form = decl.form
    kind = view.divergence.kind
    K = LowRank(V)
    f = decl.objective(K)
    viol = float(decl.violation(K))
    W, _ = form.coordinates(K)
    lam0 = np.asarray(form.lam0, dtype=float)
    Phi = np.concatenate([b.map.functionals(form.V0) for b in view.rows], axis=0)  # (m, r*r)
    bvec = _bounds_vec(view)
    ev, Q = np.linalg.eigh(W)
    if y_given is not None:
        y = _clip_sign(view, y_given)
        how = "given multipliers"
    elif kind == "burg" and not ev.min() > 1e-12 * max(ev.max(), 1e-300):
        # D = +inf here (W singular): nothing to fit; y = 0 gives g = 0 (D >= 0)
        y = np.zeros(len(bvec))
        how = "y = 0 (W = V0^T K V0 is singular at this point: D is infinite, nothing to fit)"
    else:
        if kind == "burg":
            target = (Q / ev) @ Q.T - np.diag(1.0 / lam0)
        else:
            evc = np.maximum(ev, 1e-300)
            target = np.diag(np.log(lam0)) - (Q * np.log(evc)) @ Q.T
        vals = np.concatenate([b.map.apply(K) - b.bound for b in view.rows])
        sense = _senses(view)
        act = _active(sense, vals, bvec)
        lo, hi = _bounds_of(sense[act])
        y = np.zeros(len(bvec))
        if np.any(act):
            A = Phi[act].T
            sol = lsq_linear(A, target.ravel(order="F"), bounds=(lo, hi), lsmr_tol="auto",
                             max_iter=500)
            y[act] = np.clip(sol.x, lo, hi)
        how = "multipliers fitted to grad D(W) + S_y = 0 (bounded least squares)"
    dual = _DualFunction(kind, lam0, Phi, bvec)
    g, s = dual.value(y)
    if y_given is None:
        # the fit is poor where W has eigenvalues near 0 (log W); g is concave and smooth,
        # so a few bounded quasi-Newton steps from the fit find the multipliers
        y2, g2, s2 = dual.maximise(y, *_sign_bounds(view))
        if g2 > g:
            y, g, s = y2, g2, s2
            how += ", then the dual function maximised over y (L-BFGS-B)"
    name = "Burg dual function logdet(I + L^1/2 S_y L^1/2)" if kind == "burg" else \
        "von Neumann dual function tr(L) - tr exp(log L - S_y)"
    note = f"{name} - y.b; {how}"
    if y_given is None and not g >= 0.0:
        g = 0.0  # y = 0: the dual function is 0 (D >= 0)
        note += "; y = 0 bounds better (g(0) = 0)"
    gap = f - g
    return Certificate(objective=f, lower_bound=g, gap=gap, relative_gap=relative(gap, f, g),
                       min_eig=s, inner=math.nan, trace_bound=math.nan, eig_method="dense",
                       note=note, violation=viol)
