"""What the certificate reads from a declaration (:func:`minimisation`): the chain's
minimisation of it on the space of its form (:class:`Minimisation`, computed once per
declaration), and the row helpers (senses, sign bounds, active rows, the constraint
operator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..model import Capabilities, Range
from .space import _Space


#: what the certificate of a divergence (its dual function) covers: D(K, K0) over range(K0)
#: subject to constraint rows, nothing else (the reason it does not is worded from the mismatch)
DIVERGENCE_ONLY = Capabilities(forms=(Range,), divergence=True, linear=False, losses=False)
_DIVERGENCE_HEAD = "the dual bound of a divergence covers D(K, K0) subject to constraints"

#: rows within this distance of a loss's kink (Loss.subdifferential's tol) get fitted slopes; inequality rows
#: with a slack above this (relative to max(1, |b|)) are inactive (multiplier 0)
KINK_TOL = 1e-4


@dataclass(frozen=True, eq=False)
class Minimisation:
    """The problem the certificate bounds, read from the chain of reductions
    (:func:`kernelforms.model.chain`): the declaration as a minimisation
    (:attr:`~kernelforms.model.Chain.minimisation`: linear coefficients and loss weights
    negated for a maximisation), on the space of its form (:class:`_Space`: a basis or range,
    the points the chain's merge found forced equal, the centred subspace).

    ``terms`` are the minimisation's :class:`~kernelforms.model.LossTerm` (weights ``> 0``)
    and ``rows`` its constraints that carry multipliers (the centring row excluded: the
    space keeps it), both read by their properties only; ``C`` the linear terms'
    operator; ``kappa > 0`` when the objective is ``-kappa tr(K)`` alone (the bound then
    holds implicitly).  ``decl`` is the original declaration (the objective and the
    violation are reported in its own sense, ``sign``; a bound goes back through ``chain``'s
    inverse).
    """

    decl: Any
    sign: float
    space: _Space
    C: Any                      # SymOperator: the linear terms in the minimisation's sign
    terms: tuple                # LossTerm of the minimisation
    rows: tuple                 # Constraint of the minimisation that carry multipliers
    kappa: float = 0.0
    divergence: Any = None
    chain: Any = None           # the declaration's Chain

    @property
    def n(self) -> int:
        return self.decl.n

    @property
    def n_rows(self) -> int:
        return sum(b.map.size for b in self.rows)


def _pairmap(m: Any) -> bool:
    from ..model import PairMap

    return isinstance(m, PairMap)


def _is_total_sum(m: Any) -> bool:
    """``1^T K 1`` (its adjoint is ``w 1 1^T``)."""
    if m.size != 1 or _pairmap(m):
        return False
    op = m.adjoint_op(1.0)
    return (not op.is_sparse and op.sparse.nnz == 0 and op.U.shape[1] == 1
            and np.allclose(op.U[:, 0], op.U[0, 0]) and op.U[0, 0] != 0 and op.c[0] > 0)


def _is_trace(m: Any) -> bool:
    """``tr(K)`` (its adjoint is ``w I``)."""
    if m.size != 1 or _pairmap(m):
        return False
    op = m.adjoint_op(1.0)
    return op.is_sparse and abs(op.sparse - sp.identity(m.n)).sum() == 0


def _is_centring(c: Any) -> bool:
    """``1^T K 1 == 0`` or ``<= 0``: with K PSD both say ``K 1 = 0`` (the space keeps it)."""
    return _is_total_sum(c.map) and float(c.bound[0]) == 0 and int(c.sense[0]) in (0, -1)


def _merge_basis(groups: np.ndarray | None) -> sp.csr_matrix | None:
    """Orthonormal indicators of the groups of points forced equal (the chain's
    :attr:`~kernelforms.model.Chain.groups`), or None.

    ``K_ii = K_jj = K_ij = a`` (hard must-links) force ``v_i = v_j`` for every PSD
    ``K = V V^T``.  The feasible set then has no strictly feasible point, but it lives in
    the span of the merged points' indicators, where it has one (Hu & Kwok 2013's
    collapsing).  The certificate stays on the original points (its bound and ``tau`` are
    about the original ``K``) and takes that span as a subspace of its form.
    """
    if groups is None:
        return None
    n, size = groups.size, np.bincount(groups).astype(float)
    return sp.csr_matrix((1.0 / np.sqrt(size[groups]), (np.arange(n), groups)),
                         shape=(n, len(size)))


def minimisation(decl: Any) -> "Minimisation | str":
    """The certificate's :class:`Minimisation` of a declaration (or of a problem's), or the
    reason it has no certificate: read from the chain of reductions
    (:attr:`~kernelforms.model.Chain.minimisation`, :attr:`~kernelforms.model.Chain.groups`)
    and computed once per declaration (kept on it, as the chain is)."""
    from ..model.chain import derived

    return derived(getattr(decl, "declaration", decl), "certificate_minimisation", _minimisation)


def _minimisation(decl: Any) -> "Minimisation | str":
    from ..model import SymOperator, chain, sym_sum

    ch = chain(decl)
    low = ch.minimisation
    n, form = decl.n, decl.form
    if low.divergence is not None:
        why = DIVERGENCE_ONLY.reason(decl, _DIVERGENCE_HEAD)
        if why is not None:
            return why
        return Minimisation(decl, ch.sign, _Space(n, form.V0, None, False), SymOperator.zero(n), (),
                            tuple(low.constraints), divergence=low.divergence, chain=ch)
    basis = None if form.basis is None else np.asarray(form.basis, dtype=float)
    if basis is not None and not getattr(form, "orthonormal", True):  # a Basis B, made orthonormal
        Q, R = np.linalg.qr(basis)
        dr = np.abs(np.diag(R))
        if dr.size == 0 or dr.min() <= 1e-10 * dr.max():
            return "the basis B of K = B Y B^T does not have full column rank"
        basis = Q
    rows = tuple(c for c in low.constraints if not _is_centring(c))
    centred = len(rows) < len(low.constraints)
    merge = _merge_basis(ch.groups) if basis is None else None
    space = _Space(n, basis, merge, centred)
    C = sym_sum(n, [t.gradient() for t in low.linear])
    kappa = 0.0
    if not low.losses and low.linear and all(_is_trace(t.map) for t in low.linear):
        k = -float(sum(t.coef[0] for t in low.linear))
        if k > 0:
            kappa = k
    view = Minimisation(decl, ch.sign, space, C, tuple(low.losses), rows, kappa=kappa, chain=ch)
    why = _trace_rules_missing(view)
    return why if why else view


def _trace_rules_missing(view: Minimisation) -> str:
    """'' when some rule may bound tr(K*) for this declaration (decided on the data by
    :func:`certify`), else why none can."""
    if view.kappa > 0:
        return ""
    for b in view.rows:
        up = b.sense != 1  # <= or ==
        if not np.any(up):
            continue
        if _pairmap(b.map) and (np.any(b.map.kind[up] == 0) or np.any(b.map.i[up] == b.map.j[up])):
            return ""
        if _is_trace(b.map):
            return ""
    for t in view.terms:
        if t.loss.is_squared and _pairmap(t.map) and (np.any(t.map.kind == 0) or np.any(t.map.i == t.map.j)):
            return ""
    if view.decl.linear:
        return ""  # a positive definite linear term bounds the trace (checked on the data)
    return ("no bound on tr(K*) follows from this declaration (it has " + view.decl.structure()
            + "): the certificate needs an upper bound on the diagonal, the trace or the "
            "distances, a squared loss on diagonal entries or distances, a positive definite "
            "linear term, or the objective -tr(K) alone")


def _constraint_op(view: Minimisation, y: np.ndarray) -> Any:
    from ..model import sym_sum

    parts, off = [], 0
    for b in view.rows:
        parts.append(b.map.adjoint_op(y[off:off + b.map.size]))
        off += b.map.size
    return sym_sum(view.n, parts)


def _senses(view: Minimisation) -> np.ndarray:
    """Each constraint row's sense (-1 ``<=``, 0 ``==``, +1 ``>=``), in the rows' order."""
    return np.concatenate([b.sense for b in view.rows]) if view.rows else np.zeros(0, int)


def _bounds_of(sense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``(lo, hi)`` on the multipliers of rows of these senses: ``>= 0`` on ``<=``
    rows, ``<= 0`` on ``>=`` rows, free on ``==``."""
    return np.where(sense == -1, 0.0, -np.inf), np.where(sense == 1, 0.0, np.inf)


def _active(sense: np.ndarray, residual: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Rows whose slack (``residual = A(K) - b``, signed by the sense) is at most
    ``KINK_TOL`` relative to ``max(1, |b|)``: equalities always."""
    slack = np.where(sense == -1, -residual, np.where(sense == 1, residual, 0.0))
    return slack <= KINK_TOL * np.maximum(1.0, np.abs(bound))


def _sign_bounds(view: Minimisation) -> tuple[np.ndarray, np.ndarray]:
    return _bounds_of(_senses(view))


def _clip_sign(view: Minimisation, y: np.ndarray) -> np.ndarray:
    return np.clip(y, *_sign_bounds(view))


def _bounds_vec(view: Minimisation) -> np.ndarray:
    return np.concatenate([b.bound for b in view.rows]) if view.rows else np.zeros(0)
