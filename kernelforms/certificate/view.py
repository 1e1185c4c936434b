"""What the certificate accepts, as data (:data:`CAPABILITIES`, :data:`DIVERGENCE_ONLY`:
every "no certificate" sentence about a declaration is generated from their mismatch,
:func:`why_not`), what it reads from a declaration (:func:`minimisation`): the chain's
minimisation of it on the space of its form (:class:`Minimisation`, computed once per
declaration), and the row helpers (senses, sign bounds, active rows, the constraint
operator)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..model import Basis, Capabilities, PSD, Range
from ..model.chain import deref
from ..model.canonical import (  # noqa: F401 (the helpers' old names, kept for the package)
    is_centring_row as _is_centring, is_total_sum_map as _is_total_sum, is_trace_map as _is_trace,
    minus_trace_coefficient)
from .space import _Space


#: what the certificate covers without a divergence (its Lagrangian bound): a minimisation or
#: a maximisation over K PSD, K = B Y B^T (B of full column rank) or range(K0), whose
#: declaration yields a bound on tr(K*) (the trace rules; decided on the data by certify)
CAPABILITIES = Capabilities(forms=(PSD, Basis, Range), senses=("min", "max"), divergence=True,
                            full_rank_basis=True, trace_rule=True)
#: what the certificate of a divergence (its dual function) covers: D(K, K0) over range(K0)
#: subject to constraint rows, nothing else
DIVERGENCE_ONLY = Capabilities(forms=(Range,), divergence=True, linear=False, losses=False)
#: the heads and the subject of the certificate's sentences (Capabilities.why words them)
HEAD = "the certificate bounds problems over K PSD, K = B Y B^T (B of full column rank) or range(K0)"
_DIVERGENCE_HEAD = "the dual bound of a divergence covers D(K, K0) subject to constraints"
WHO = "the certificate"
#: what escape and mvu_multipliers read besides the Lagrangian bound: no divergence (its
#: certificate is a dual function, with no factor rank to grow and no stationarity to fit);
#: mvu_multipliers needs constraint rows too
LAGRANGIAN_ONLY = Capabilities(forms=(PSD, Basis, Range), senses=("min", "max"), full_rank_basis=True,
                               trace_rule=True)
MULTIPLIER_FIT = Capabilities(forms=(PSD, Basis, Range), senses=("min", "max"), full_rank_basis=True,
                              trace_rule=True, needs=("constraints",))


def capabilities(decl: Any) -> Capabilities:
    """What the certificate accepts for ``decl`` (a declaration or a problem):
    :data:`DIVERGENCE_ONLY` when it has a divergence, else :data:`CAPABILITIES`."""
    decl = getattr(decl, "declaration", decl)
    return DIVERGENCE_ONLY if decl.divergence is not None else CAPABILITIES


def why_not(decl: Any) -> str | None:
    """None when the certificate covers ``decl``, else the reason, generated from the mismatch
    of its :func:`capabilities` (:meth:`~kernelforms.model.Capabilities.why`)."""
    decl = getattr(decl, "declaration", decl)
    head = _DIVERGENCE_HEAD if decl.divergence is not None else HEAD
    return capabilities(decl).why(decl, head, WHO)


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

    #: the original declaration, weakly (the view is kept on it: a strong reference back
    #: would be a reference cycle)
    _decl: Any
    sign: float
    space: _Space
    C: Any                      # SymOperator: the linear terms in the minimisation's sign
    terms: tuple                # LossTerm of the minimisation
    rows: tuple                 # Constraint of the minimisation that carry multipliers
    kappa: float = 0.0
    divergence: Any = None
    chain: Any = None           # the declaration's Chain

    @property
    def decl(self) -> Any:
        """The original declaration."""
        return deref(self._decl)

    @property
    def n(self) -> int:
        return self.decl.n

    @property
    def n_rows(self) -> int:
        return sum(b.map.size for b in self.rows)

    @cached_property
    def oracle(self) -> Any:
        """The declaration's factored oracle (:func:`kernelforms.model.oracle`) when it states
        the same minimisation on the same points as this view, else None: ``K PSD`` or ``K =
        B Y B^T``, no divergence, no points merged (the oracle's factor would have the merged
        rows), one penalty per loss term.  Built on the first ask (kept on the declaration,
        where a factored solver may have built it already)."""
        ch = self.chain
        if (self.divergence is not None or ch is None or ch.merged is not None
                or ch.conflict is not None or not isinstance(self.decl.form, (PSD, Basis))):
            return None
        from ..model import oracle

        try:
            orc = oracle(self.decl)
        except ValueError:  # pragma: no cover - a form the oracle does not take
            return None
        return orc if len(orc.penalties) == len(self.terms) else None

    def value(self, V: np.ndarray) -> float:
        """The minimisation's objective at ``K = V V^T`` (``V``: ``n`` rows): the oracle's
        :meth:`~kernelforms.model.Oracle.value`, or the declaration's own objective."""
        orc = self.oracle
        if orc is not None:
            return orc.value(V)
        from ..result import LowRank

        return self.sign * self.decl.objective(LowRank(V))

    def objective(self, V: np.ndarray) -> float:
        """The declaration's objective (its own sense) at ``K = V V^T``."""
        orc = self.oracle
        if orc is not None:
            return self.sign * orc.value(V)
        from ..result import LowRank

        return self.decl.objective(LowRank(V))

    def loss_values(self, V: np.ndarray) -> list:
        """``A_k(V V^T)`` for each loss term: the oracle's compiled row operators on pair rows
        (entries, distances: the maps' own sums, gathered through incidence matrices built
        once), the map's own ``apply`` otherwise (a one-row map's ``<M, V V^T>`` summed in
        another order by the oracle moved the fitted bound by up to 2e-10 relative)."""
        from ..model.oracle import MapOp, Rows
        from ..result import LowRank

        orc = self.oracle
        K = LowRank(V)
        if orc is None:
            return [t.map.apply(K) for t in self.terms]
        return [t.map.apply(K) if isinstance(op, (MapOp, Rows)) else op.values(V)
                for t, (op, _) in zip(self.terms, orc.penalties)]


def _pairmap(m: Any) -> bool:
    from ..model import PairMap

    return isinstance(m, PairMap)


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

    why = why_not(decl)
    if why is not None:
        return why
    ch = chain(decl)
    low = ch.minimisation
    n, form = decl.n, decl.form
    if low.divergence is not None:
        return Minimisation(weakref.ref(decl), ch.sign, _Space(n, form.V0, None, False), SymOperator.zero(n), (),
                            tuple(low.constraints), divergence=low.divergence, chain=ch)
    basis = None if form.basis is None else np.asarray(form.basis, dtype=float)
    if basis is not None and not getattr(form, "orthonormal", True):  # a Basis B, made orthonormal
        basis = np.linalg.qr(basis)[0]  # of full column rank (CAPABILITIES.full_rank_basis)
    rows = tuple(c for c in low.constraints if not _is_centring(c))
    centred = len(rows) < len(low.constraints)
    merge = _merge_basis(ch.groups) if basis is None else None
    space = _Space(n, basis, merge, centred)
    C = sym_sum(n, [t.gradient() for t in low.linear])
    return Minimisation(weakref.ref(decl), ch.sign, space, C, tuple(low.losses), rows,
                        kappa=minus_trace_coefficient(low), chain=ch)


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
