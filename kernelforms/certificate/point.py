"""The point projected onto the form (:class:`_Point`) and the check that an eigenvalue
estimate lies below the point's own Rayleigh quotient."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..result import LowRank

from .view import Minimisation


#: the round-off allowed in ``<H, K>`` by :func:`_below_the_point`, relative to
#: ``||V||_F ||H V||_F`` (the sum's own error is about ``eps`` times that)
POINT_CHECK_RTOL = 1e-12


def _point_direction(pt: "_Point", HV: np.ndarray) -> np.ndarray:
    """The unit vector of least Rayleigh quotient of ``H`` on the range of the point's factor
    (``HV = H V``; the factor whitened by its Gram matrix, directions below ``1e-15`` of its
    largest eigenvalue dropped): a start for an eigenvalue run that must not miss it."""
    V = pt.Vp
    g, U = np.linalg.eigh(V.T @ V)
    keep = g > 1e-15 * max(float(g[-1]), 1e-300)
    T = U[:, keep] / np.sqrt(g[keep])
    M = T.T @ (V.T @ HV) @ T
    _, Z = np.linalg.eigh((M + M.T) / 2)
    x = V @ (T @ Z[:, 0])
    nx = float(np.linalg.norm(x))
    return x / nx if nx > 0 and math.isfinite(nx) else x


def _below_the_point(s: float, pt: "_Point", HV: np.ndarray, extra: float = 0.0) -> bool:
    """Whether ``s`` can be a lower estimate of ``lambda_min`` of the certificate's matrix
    ``H`` over the form, judged by the point itself: ``K = B F F^T B^T`` lies in the form, so
    ``<H, K> >= lambda_min ||F||_F^2``, and an ``s`` above ``<H, K> / ||F||_F^2`` (beyond
    round-off) is not below ``lambda_min``.  A Lanczos run started from earlier directions can
    settle on an eigenvalue above the bottom with a small residual (the residual only says an
    eigenvalue is near): NPKL-square on 60,000 two-Gaussian points, bcd's point, read
    ``1.1e-10`` where ``lambda_min`` is ``-6.0e-8`` and ``<H, K> = -2.2e-5``, and the bound
    came out 2.2e-5 above a feasible point's objective.  ``HV = H V`` at the point's factor
    ``pt.Vp``; ``extra`` is added to ``<H, K>`` (a diagonal shift's ``sum_i d_i K_ii``)."""
    if not math.isfinite(s):
        return True
    inner = float(np.sum(pt.Vp * HV)) + extra
    trace = float(np.sum(pt.F * pt.F))
    slack = POINT_CHECK_RTOL * float(np.linalg.norm(pt.Vp)) * float(np.linalg.norm(HV)) + abs(extra) * 1e-12
    return s * trace <= inner + slack


class _Point:
    """The point projected onto the form, with what every candidate bound needs."""

    def __init__(self, view: Minimisation, V: np.ndarray) -> None:
        self.view = view
        sp_ = view.space
        self.F = sp_.coords(V)
        self.Vp = sp_.lift(self.F)
        self.K = LowRank(self.Vp)
        self.z = view.loss_values(self.Vp)
        self.r = self.Vp.shape[1]

    def dominant(self, rtol: float = 1e-6) -> np.ndarray | None:
        """The point's factor without its directions of eigenvalue below ``rtol`` times the
        largest (None when there are none)."""
        F = self.F
        if F.shape[1] < 2 or F.shape[1] > 200:
            return None
        U, sv, _ = np.linalg.svd(F, full_matrices=False)
        keep = sv**2 >= rtol * sv[0] ** 2 if sv.size and sv[0] > 0 else np.zeros(0, bool)
        if keep.all() or not keep.any():
            return None
        return self.view.space.lift(U[:, keep] * sv[keep])

    def base_u(self) -> list[np.ndarray]:
        return [t.loss.grad(z) for t, z in zip(self.view.terms, self.z)]

    def gradient(self, us: list[np.ndarray]) -> Any:
        from ..model import sym_sum

        v = self.view
        return sym_sum(v.n, [v.C] + [t.map.adjoint_op(t.weight * u) for t, u in zip(v.terms, us)])

    def constant(self, us: list[np.ndarray], exact: list[bool]) -> float:
        """``sum_k w_k sum_p (l(z_p) - u_p z_p)`` (a gradient) or ``-w_k sum_p l*(u_p)``."""
        c = 0.0
        for t, z, u, ex in zip(self.view.terms, self.z, us, exact):
            if ex and t.loss.smooth:
                c += t.weight * float(np.sum(t.loss.value(z) - u * z))
            else:
                c -= t.weight * float(np.sum(t.loss.conjugate(u)))
        return c
