"""lowrank's starting factor: Gaussian, a factor given by the caller, or (distance
equality rows over K PSD, e.g. MVU) Laplacian eigenmaps of their graph."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from ...errors import OptionError
from ...model.oracle import Oracle

__all__ = ["spectral_init", "start"]


def spectral_init(model: Oracle, r: int, rng: np.random.Generator) -> np.ndarray:
    """MVU-style start (model units): Laplacian eigenmaps of the graph of the distance
    equality rows, scaled to fit the distances.

    Columns = eigenvectors 2 .. k+1 of the unnormalised graph Laplacian (k = min(r, 3)),
    times the least-squares factor that best matches ``||g_i - g_j||^2`` to ``d_ij^2``,
    padded with small random columns up to ``r``.  Centred by construction.
    """
    from ...data.graphs import smallest_eigenvectors, unnormalized_laplacian

    n = model.rows
    E, b = model.graph
    A = sp.coo_matrix((np.ones(len(E)), (E[:, 0], E[:, 1])), shape=(n, n)).tocsr()
    k = max(1, min(r, 3, n - 2))
    _, V = smallest_eigenvectors(unnormalized_laplacian(A + A.T), k, skip=1)
    c = np.einsum("ij,ij->i", V[E[:, 0]] - V[E[:, 1]], V[E[:, 0]] - V[E[:, 1]])
    s2 = float(c @ b) / max(float(c @ c), 1e-300)
    H = V * math.sqrt(max(s2, 1e-12))
    if r > k:
        pad = rng.standard_normal((n, r - k))
        pad *= 1e-2 * float(np.abs(H).max()) / max(float(np.abs(pad).max()), 1e-300)
        H = np.hstack([H, pad])
    return H - H.mean(axis=0, keepdims=True)


def start(problem: Any, model: Oracle, r: int, opts: dict[str, Any],
          rng: np.random.Generator) -> np.ndarray:
    """The starting ``H`` (model rows, ``r`` columns) of the option ``init``: ``None`` /
    ``"random"`` Gaussian, ``"spectral"`` :func:`spectral_init`, or a factor of the problem
    (projected, averaged over merged points, padded or cut to ``r`` columns)."""
    init = opts["init"]
    if isinstance(init, str):
        if init == "spectral" and (model.graph is None or model.basis is not None):
            raise OptionError(
                "The 'init' option of lowrank may be 'spectral' only for a problem with distance "
                "equality constraints over K PSD, such as MVU (Laplacian eigenmaps of their graph); "
                f"this problem has {problem.declaration.structure()}. Use 'random', None or an "
                "(n, rank) array.")
        if init == "spectral":
            return spectral_init(model, r, rng)
        init = None
    if init is None:
        H0 = rng.standard_normal((model.rows, r)) / math.sqrt(r)
        if model.entry_losses:
            # K = B Y B^T with orthonormal B: rows of G = B H are sqrt(k / n) smaller
            H0 *= math.sqrt(model.n / max(model.rows, 1))
        return H0
    # an (n, k) factor of the problem (shape checked by the declaration)
    H0 = model.from_G(np.asarray(init, dtype=float)) / model.scale
    if H0.shape[1] < r:
        H0 = np.hstack([H0, 1e-3 * rng.standard_normal((model.rows, r - H0.shape[1]))])
    return H0[:, :r].copy()
