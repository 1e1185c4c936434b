"""The form the certified kernel lives in (``K = B Z B^T``, centred or not) and its eigenvalue
queries: ``lambda_min`` of ``B^T H B`` and its lowest eigenpairs lifted to the points."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._parallel import parallel

from .eigen import (PLAIN_LANCZOS_ABOVE, _arpack_lowest, _collatz_lower, _inertia_lower, _ritz_lower,
                    _start_vector, lanczos_lowest, min_eigenvalue)


class _Space:
    """Where the certified kernel lives: ``K = B Z B^T`` with ``Z`` PSD (``B`` orthonormal:
    the identity for the PSD form, the basis for ``Basis`` / ``Range``, merged-point
    indicators when equality rows force ``v_i = v_j``), on the centred subspace when
    ``1^T K 1 = 0`` is declared."""

    def __init__(self, n: int, basis: np.ndarray | None, merge: sp.csr_matrix | None,
                 centred: bool) -> None:
        self.n = n
        self.basis = basis
        self.merge = merge
        self.centred = centred
        if basis is not None:
            self.k = basis.shape[1]
            u = basis.sum(axis=0)
        elif merge is not None:
            self.k = merge.shape[1]
            u = np.asarray(merge.sum(axis=0)).ravel()
        else:
            self.k = n
            u = np.ones(n)
        nu = float(np.linalg.norm(u))
        # the centring direction in Z's coordinates (None: the form is centred already)
        self.u = u / nu if centred and nu > 1e-12 * math.sqrt(n) else None

    @property
    def plain(self) -> bool:
        return self.basis is None and self.merge is None

    def coords(self, V: np.ndarray) -> np.ndarray:
        """``F`` with ``B F`` the projection of ``V`` onto the form (centred)."""
        if self.basis is not None:
            F = self.basis.T @ V
        elif self.merge is not None:
            F = np.asarray(self.merge.T @ V)
        else:
            F = V
        if self.u is not None:
            if self.plain:
                F = F - F.mean(axis=0, keepdims=True)
            else:
                F = F - np.outer(self.u, self.u @ F)
        return F

    def lift(self, F: np.ndarray) -> np.ndarray:
        if self.basis is not None:
            return self.basis @ F
        if self.merge is not None:
            return np.asarray(self.merge @ F)
        return F

    def restrict_rows(self, M: np.ndarray) -> np.ndarray:
        """``B^T M`` for an ``(n, r)`` array."""
        if self.basis is not None:
            return self.basis.T @ M
        if self.merge is not None:
            return np.asarray(self.merge.T @ M)
        return M

    def restrict_columns(self, A: Any, r: int) -> Any:
        """Each column ``vec(M)`` (row-major ``(n, r)``) of ``A`` to ``vec(B^T M)``."""
        if self.plain:
            return A
        Bt = self.basis.T if self.basis is not None else self.merge.T.tocsr()
        if sp.issparse(Bt):
            return (sp.kron(Bt, sp.identity(r), format="csr") @ A).tocsr() if sp.issparse(A) \
                else sp.kron(Bt, sp.identity(r), format="csr") @ A
        A = A.toarray() if sp.issparse(A) else A
        m = A.shape[1]
        return np.einsum("kn,nrm->krm", Bt, A.reshape(self.n, r, m)).reshape(self.k * r, m)

    def operator(self, H: Any) -> Any:
        """``B^T H B``: a sparse matrix (PSD / merged forms), a dense one (a basis) or a
        SymOperator (a dense part)."""
        from ..model import SymOperator

        if self.basis is not None:
            M = self.basis.T @ H.matmat(self.basis)
            return (M + M.T) / 2
        if self.merge is None:
            return H.sparse if H.is_sparse else H
        B = self.merge
        S = (B.T @ H.sparse @ B).tocsr()
        if H.is_sparse:
            return S
        return SymOperator(self.k, S, np.asarray(B.T @ H.U), H.c)

    def min_eig(self, H: Any, dense_below: int,
                start: np.ndarray | None = None, keep: list | None = None,
                floor: float | None = None, give_up: float | None = None) -> tuple[float, str]:
        """A lower estimate of ``lambda_min(B^T H B)`` on the centred subspace (Lanczos started
        from ``start``, a point-space vector, on the plain form).  ``keep``: a list that
        receives the plain Lanczos run (:class:`~kernelforms.certificate.eigen.Krylov`), which
        :meth:`lowest` can continue (``resume``) for the same ``H``; ``floor``: only whether
        ``lambda_min >= floor`` matters (:func:`~kernelforms.certificate.eigen.lanczos_min`);
        ``give_up``: a ``lambda_min`` below it is of no use (the plain run may stop and return
        ``-inf``, :func:`~kernelforms.certificate.eigen.min_eigenvalue`)."""
        if not self.plain:
            start = None
        from ..model import SymOperator

        M = self.operator(H)
        k = self.k
        if self.u is None:
            if isinstance(M, SymOperator):
                if k <= dense_below:
                    return min_eigenvalue(M.dense(), dense_below)
                return min_eigenvalue(M.linear_operator(), dense_below, start=start, keep=keep,
                                      floor=floor, give_up=give_up)
            return min_eigenvalue(M, dense_below, start=start, keep=keep, floor=floor,
                                  give_up=give_up)
        # the centring direction is outside the feasible set's range: lift it above the
        # spectrum (Gershgorin) and take lambda_min on the rest
        lift = _gershgorin_lift(M)
        u = self.u
        if k <= dense_below:
            D = M.dense() if isinstance(M, SymOperator) else (M.toarray() if sp.issparse(M) else M)
            if self.plain:
                A = D + (lift / k) * np.ones((k, k))
            else:
                A = D + lift * np.outer(u, u)
            return min_eigenvalue(A, dense_below)
        from scipy.sparse.linalg import LinearOperator

        PM = parallel(M)

        def mv(x):
            x = np.asarray(x).reshape(k, -1)
            return PM @ x + lift * np.outer(u, u @ x)

        return min_eigenvalue(LinearOperator((k, k), matvec=mv, matmat=mv, dtype=float), dense_below,
                              start=start, keep=keep, floor=floor, give_up=give_up)

    def lowest(self, H: Any, j: int, dense_below: int, seed: int = 0,
               start: np.ndarray | None = None, resume: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``j`` smallest eigenvalues of ``B^T H B`` on the centred subspace and their unit
        eigenvectors lifted to the points (``B x``, an ``(n, j)`` array): Burer-Monteiro's
        escape directions.  Dense below ``dense_below`` rows, else Lanczos (started from
        ``start``, a point-space vector, when given: the previous step's directions): the
        plain recurrence (:func:`lanczos_lowest`) from :data:`PLAIN_LANCZOS_ABOVE` rows,
        ARPACK below that or when it does not converge.  ``resume``: :meth:`min_eig`'s plain
        Lanczos run for the same ``H`` (its ``keep``), continued instead of a new run."""
        w, Y, _ = self.lowest_with_bound(H, j, dense_below, seed, start, resume)
        return w, Y

    def lowest_with_bound(self, H: Any, j: int, dense_below: int, seed: int = 0,
                          start: np.ndarray | None = None, resume: Any = None,
                          tol_rest: float | None = None, enough: float | None = None
                          ) -> tuple[np.ndarray, np.ndarray, float | None]:
        """:meth:`lowest` and, from the same Lanczos run, the lower estimate of ``lambda_min``
        that :meth:`min_eig` gives (the Ritz value minus its residual norm); None for that
        estimate when the matrix is small enough for :meth:`min_eig`'s dense path or Lanczos
        did not converge (then :meth:`min_eig` decides).  ``tol_rest`` and ``enough``: the
        plain recurrence's rule for the pairs after the smallest and its early stop
        (:func:`lanczos_lowest`), when the pairs are only directions."""
        from ..model import SymOperator

        M = self.operator(H)
        k = self.k
        j = max(1, min(int(j), k - 1 if self.u is not None else k))
        u = self.u
        lift = _gershgorin_lift(M) if u is not None else 0.0
        low = None
        if k <= dense_below:
            D = M.dense() if isinstance(M, SymOperator) else (M.toarray() if sp.issparse(M) else np.asarray(M))
            if u is not None:
                D = D + lift * np.outer(u, u)
            w, X = np.linalg.eigh((D + D.T) / 2)
            w, X = w[:j], X[:, :j]
        else:
            from scipy.sparse.linalg import LinearOperator

            op = M.linear_operator() if isinstance(M, SymOperator) else parallel(M)

            def mv(x):
                x = np.asarray(x).reshape(k, -1)
                y = op @ x
                return y + lift * np.outer(u, u @ x) if u is not None else y

            A = LinearOperator((k, k), matvec=mv, matmat=mv, dtype=float)
            # mostly the previous directions, a little of every other one
            v0 = _start_vector(k, seed, start if self.plain else None)
            # a sparse matrix goes to the recurrence as it is: Krylov renumbers a large one
            # (reverse Cuthill-McKee) so that its products read x nearly in order (a million
            # two-Gaussian points: the escape's 976 products 65 -> 50 CPU s at a load of 4)
            plain = M if sp.issparse(M) and u is None else A
            found = lanczos_lowest(plain, j, v0, resume=resume, tol_rest=tol_rest, enough=enough) \
                if k >= PLAIN_LANCZOS_ABOVE else None
            if found is not None:  # residuals computed: the first one bounds lambda_min
                w, X, r, _ = found
                low = float(w[0] - r[0])
            else:
                w, X, converged = _arpack_lowest(A, j, v0)
                order = np.argsort(w)
                w, X = np.asarray(w)[order], np.asarray(X)[:, order]
                if converged and w.size:
                    low = _ritz_lower(A, float(w[0]), X[:, 0])
        Y = self.lift(X)
        nrm = np.linalg.norm(Y, axis=0)
        nrm[nrm == 0] = 1.0
        return np.asarray(w, dtype=float), Y / nrm, low

    def near_zero_lower(self, H: Any, dense_below: int) -> tuple[float, str]:
        """A lower estimate of ``lambda_min`` that may be loose (down to ``-1e-9 ||H||``) when the
        true value is about 0 or above; cheap at large ``n`` (Gershgorin, then inertia)."""
        M = self.operator(H)
        if self.basis is not None or self.k <= dense_below or not sp.issparse(M):
            return self.min_eig(H, dense_below)
        d = M.diagonal()
        off = np.asarray(abs(M).sum(axis=1)).ravel() - np.abs(d)
        g = float(np.min(d - off))
        # Gershgorin's bound is rigorous; a Laplacian's rows sum to 0 only to round-off, so
        # accept it down to the inertia test's own looseness (an LDL^T of a 10-dimensional
        # kNN Laplacian at 100,000 points did not finish in 20 minutes)
        if g >= -1e-9 * max(1.0, float(np.max(np.abs(d)))):
            return g, "Gershgorin"
        # eps = 1e-6 of the diagonal first; a graph whose conditioning CG cannot reach in 200
        # steps (a million 3-d points: 3,000 steps, 64 s) gets eps = 1e-3, a bound near
        # -5e-4 in 4 s, which loosens the trace bound it feeds by about P |bound| / (w mu^2)
        for rel, steps in ((1e-6, 200), (1e-3, 600)):
            low = _collatz_lower(M, rel, steps)
            if low is not None:
                return low, "Collatz-Wielandt (Z-matrix)"
        low = _inertia_lower(M)
        if low is not None:
            return low, "inertia (LDL^T)"
        return self.min_eig(H, dense_below)


def _gershgorin_lift(M: Any) -> float:
    """A shift above the spectrum of ``M`` (Gershgorin): added along the centring direction,
    it moves that direction out of the way of ``lambda_min``."""
    from ..model import SymOperator

    if isinstance(M, SymOperator):
        row = np.asarray(abs(M.sparse).sum(axis=1)).ravel()
        Uc = np.abs(M.U) * np.abs(M.c)
        row = row + Uc @ np.abs(M.U).sum(axis=0)
    elif sp.issparse(M):
        row = np.asarray(abs(M).sum(axis=1)).ravel()
    else:
        row = np.abs(M).sum(axis=1)
    return 2.0 + 2.0 * float(row.max())
