"""lowrank's augmented Lagrangian on the factored oracle: its value, gradient and
Hessian-vector products with respect to the variable ``H`` (``G = to_G(H)``)."""

from __future__ import annotations

import numpy as np

from ...model.oracle import Oracle

__all__ = ["augmented", "augmented_hessp"]

def augmented(model: Oracle, H: np.ndarray, lam_e: np.ndarray, lam_i: np.ndarray,
               sigma: float) -> tuple[float, np.ndarray]:
    """Augmented Lagrangian value and gradient with respect to ``H``: ``f(G) - lam_e . c_e +
    (sigma / 2) ||c_e||^2 + (1 / 2 sigma) sum(max(0, lam_i + sigma c_i)^2 - lam_i^2)`` with
    ``f``, ``c`` the oracle's (:class:`~kernelforms.model.oracle.Oracle`)."""
    G = model.to_G(H)
    f, g = model.smooth(G)
    if model.eq or model.ineq:
        ce, ci = model.constraints(G)
        if len(ce):
            f += float(-lam_e @ ce + 0.5 * sigma * ce @ ce)
            g += model.scatter(G, model.eq, -lam_e + sigma * ce)
        if len(ci):
            # (1 / 2 sigma) sum(max(0, lam + sigma c)^2 - lam^2), lam >= 0 for c <= 0
            s = np.maximum(0.0, lam_i + sigma * ci)
            f += float((s @ s - lam_i @ lam_i) / (2.0 * sigma))
            g += model.scatter(G, model.ineq, s)
    return f, model.to_H_grad(g)


def augmented_hessp(model: Oracle, H: np.ndarray, P: np.ndarray, lam_e: np.ndarray,
                     lam_i: np.ndarray, sigma: float) -> np.ndarray:
    """Hessian of :func:`augmented` (with respect to ``H``) times a direction ``P``."""
    G, V = model.to_G(H), model.to_G(P)
    h = model.hessp(G, V)
    if model.eq or model.ineq:
        ce, ci = model.constraints(G)
        k = 0
        for b in model.eq:
            c = ce[k:k + len(b)]
            w = -lam_e[k:k + len(b)] + sigma * c
            h += b.op.grad(V, w) + b.op.grad(G, sigma * b.op.dvalues(G, V))
            k += len(b)
        k = 0
        for b in model.ineq:
            c, li = ci[k:k + len(b)], lam_i[k:k + len(b)]
            s = np.maximum(0.0, li + sigma * c)
            act = (s > 0).astype(float)
            sg = 1.0 if b.sgn is None else b.sgn
            # c = sgn (v - t): dc = sgn dv, and sgn^2 = 1 in the curvature term
            h += b.op.grad(V, sg * s) + b.op.grad(G, sigma * act * b.op.dvalues(G, V))
            k += len(b)
    return model.to_H_grad(h)
