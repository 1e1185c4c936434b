"""lowrank's preconditioned L-BFGS (option ``precondition``): variables scaled row by row by
the inverse square root of the row's Hessian block (the oracle's ``row_blocks``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ...model.oracle import Oracle
from .. import _lbfgs
from .certstop import CertStop

__all__ = ["precond_lbfgs"]

#: the preconditioned runs' L-BFGS: "numpy" (:mod:`kernelforms.solvers._lbfgs`, no bounds) or
#: "scipy" (L-BFGS-B)
PRECOND_LBFGS = "numpy"


def precond_lbfgs(model: Oracle, fun, x0: np.ndarray, shape: tuple[int, int],
                   opts: dict[str, Any], deadline: float | None, gtol: float, on_iter=None,
                   certstop: CertStop | None = None):
    """L-BFGS on ``Z`` with ``g_i = T_i z_i``, ``T_i = B_i^{-1/2}`` the inverse square root
    of row ``i``'s Hessian block (the oracle's
    :meth:`~kernelforms.model.oracle.Oracle.row_blocks`, eigenvalues floored at 1e-3
    of their median largest): the rows' stiff directions (the loss weight times a rank-one
    term) and soft ones (the Laplacian) get comparable curvature.  The blocks depend on
    ``G``, so L-BFGS runs in chunks (25 iterations, doubling to 400), each from the
    current point with freshly computed blocks; the chunks run the numpy L-BFGS of
    :mod:`kernelforms.solvers._lbfgs` (no bounds, so none of L-BFGS-B's bookkeeping: a
    third of the fit at 7,494 points x 20 columns; :data:`PRECOND_LBFGS`).  Stops when the
    largest entry of the gradient in ``G`` (the unpreconditioned one, as without
    preconditioning) is at most ``gtol``, when a chunk stops for lack of progress (the
    ``ftol`` test of L-BFGS-B), when
    ``certstop`` proves the point at a chunk's end (:class:`~.certstop.CertStop`), or after
    ``maxiter`` iterations in all.  Returns a ``scipy`` ``OptimizeResult`` in ``G``.
    """
    from scipy.optimize import OptimizeResult, minimize

    n, r = shape
    x = np.asarray(x0, dtype=float).copy()
    total, chunk, maxiter = 0, 25, int(opts["maxiter"])
    last: dict[str, Any] = {}
    res = None
    stalls = 0
    if certstop is not None:
        certstop.check(x, float(fun(x)[0]), 0)  # the reference value of the stall test
    while True:
        H = x.reshape(shape)
        w, Q = np.linalg.eigh(model.row_blocks(H))
        floor = max(1e-3 * float(np.median(w[:, -1])), 1e-12)
        w = np.maximum(w, floor)
        T = np.einsum("nab,nb,ncb->nac", Q, w**-0.5, Q)      # B^{-1/2}
        Tinv = np.einsum("nab,nb,ncb->nac", Q, w**0.5, Q)    # B^{1/2}

        def fz(z, T=T):
            h = np.matmul(T, z.reshape(n, r, 1)).ravel()
            f, g = fun(h)
            last["x"], last["g"], last["f"] = h, g, f
            return f, np.matmul(T, g.reshape(n, r, 1)).ravel()

        def cb(intermediate_result):
            if on_iter is not None:
                on_iter(intermediate_result)
            if deadline is not None and time.perf_counter() > deadline:
                raise StopIteration
            if "g" in last and float(np.max(np.abs(last["g"]))) <= gtol:
                raise StopIteration

        z0 = np.einsum("nab,nb->na", Tinv, H).ravel()
        steps = min(chunk, maxiter - total)
        if PRECOND_LBFGS == "numpy":
            res = _lbfgs.minimize(fz, z0, maxiter=steps, maxcor=int(opts["maxcor"]), ftol=1e-16,
                                  maxfun=4 * steps, callback=cb)
        else:
            res = minimize(fz, z0, jac=True, method="L-BFGS-B", callback=cb,
                           options={"maxiter": steps, "gtol": 0.0, "ftol": 1e-16,
                                    "maxcor": int(opts["maxcor"]), "maxfun": 4 * steps})
        total += int(res.nit)
        xz = np.einsum("nab,nb->na", T, res.x.reshape(shape)).ravel()
        f, g = fun(xz)
        if not (np.all(np.isfinite(xz)) and np.isfinite(f)):
            break
        x = xz
        gmax = float(np.max(np.abs(g)))
        timed_out = deadline is not None and time.perf_counter() > deadline
        # ftol: no relative decrease; stop on two such chunks in a row (a fresh chunk
        # restarts the L-BFGS memory, which can stall once where a longer run would not)
        # (an ABNORMAL line search, status 2, at a point near machine precision likewise)
        stop = (int(res.status) == 0 and int(res.nit) < steps) or int(res.status) == 2
        stalled = stop and stalls >= 1
        stalls = stalls + 1 if stop else 0
        if gmax <= gtol or timed_out or total >= maxiter or stalled or int(res.status) not in (0, 1, 2, 99):
            break
        if certstop is not None and certstop.check(x, float(f), total):
            break
        chunk = min(2 * chunk, 400)
    ok = int(res.status) in (0, 99) and (gmax <= gtol or stalled) if res is not None else False
    out = OptimizeResult(x=x if res is None else x, fun=f, jac=g, nit=total,
                         success=bool(ok),
                         status=0 if ok else (1 if total >= maxiter else int(res.status)),
                         message=(f"preconditioned L-BFGS: largest gradient entry {gmax:.2e} "
                                  f"(gtol {gtol:.2e}); last chunk: {res.message}"))
    return out
