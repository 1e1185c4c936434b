"""The canonical form: one analysis of a declaration that every method reads.

Computed once per declaration (:func:`canonical`), from the declaration the chain of
reductions leaves (:mod:`kernelforms.model.chain`: points forced equal merged, a
maximisation negated, the centring row turned into a flag), so that it is always a
minimisation with loss weights ``> 0``:

* ``cost``: the linear terms as one operator ``<C, K>`` (:attr:`Canonical.C`: sparse, or
  None when a term has a dense adjoint), in the minimisation's sign;
* ``loss_blocks``: the loss rows grouped by (loss class, row kind) into flat arrays: the
  pair indices ``i``, ``j``, the weight per row and the loss's row data (targets or
  labels); a row is an off-diagonal entry, a diagonal entry or a distance
  (:class:`~kernelforms.model.maps.RowKind`), or a row of another map (``GENERAL``: the
  block keeps the terms);
* ``constraint_blocks``: the pair rows of the constraints grouped by sense (``<=``, ``==``,
  ``>=``), with their kinds and bounds; constraints on other maps in ``general``;
* flags: ``centred`` (factors are kept with ``G^T 1 = 0``), ``trace_bounded`` (a row
  bounds ``tr(K)`` from above), ``graph_connected`` (the pairs the rows touch join every
  point);
* the typed divergence (:class:`~kernelforms.model.Burg`, :class:`~kernelforms.model.VonNeumann`).

Methods state what they accept as :class:`Capabilities` (data: the forms, the senses,
whether a divergence, which terms, whether the cost must be sparse, which rows the losses
and constraints may be on, whether a basis must have full column rank, whether a bound on
``tr(K*)`` must follow from the declaration); the reason a method does not apply is
generated from the mismatch (:meth:`Capabilities.why`), so no method words its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from .chain import Chain, chain, derived
from .declaration import EQ, GE, LE, PSD, Declaration
from .losses import Loss
from .maps import PairMap, RowKind, Trace


def row_kinds(m: PairMap) -> np.ndarray:
    """The :class:`RowKind` of each row of a pair map (``DIAGONAL`` for an entry ``K_ii``)."""
    kinds = np.where(m.kind == RowKind.DISTANCE, int(RowKind.DISTANCE),
                     np.where(m.i == m.j, int(RowKind.DIAGONAL), int(RowKind.ENTRY)))
    return kinds.astype(np.int64)


@dataclass(frozen=True, eq=False)
class LossBlock:
    """The loss rows of one (loss class, row kind), in the order of the declaration's terms.

    ``i``, ``j``: the pair of each row (empty for ``GENERAL``); ``weight``: each row's
    term weight (``> 0``, the minimisation's); ``data``: the loss's row data (targets of a
    squared loss, labels of a margin loss); ``terms``: ``(term index, rows of that term)``
    for each term the block takes rows from.
    """

    loss_type: type
    kind: RowKind
    i: np.ndarray
    j: np.ndarray
    weight: np.ndarray
    data: np.ndarray
    terms: tuple = ()

    @property
    def size(self) -> int:
        return int(self.weight.size)

    @property
    def name(self) -> str:
        return self.loss_type.name

    @cached_property
    def loss(self) -> Loss:
        """The loss over the block's rows (its class built from the row data)."""
        if np.isnan(self.data).any():
            raise NotImplementedError(f"{self.loss_type.__name__} names no row data (Loss.row_data): "
                                      "its block cannot rebuild the loss")
        return self.loss_type(self.data)

    @property
    def pairs(self) -> np.ndarray:
        return np.stack([self.i, self.j], axis=1)


@dataclass(frozen=True, eq=False)
class ConstraintBlock:
    """The pair rows of every constraint with one sense (``LE``, ``EQ`` or ``GE``)."""

    sense: int
    kind: np.ndarray
    i: np.ndarray
    j: np.ndarray
    bound: np.ndarray

    @property
    def size(self) -> int:
        return int(self.bound.size)


@dataclass(frozen=True, eq=False)
class Capabilities:
    """What a method accepts, as data: the kernel forms, the senses, and the divergence
    (``False``: none; ``True``: any or none; a divergence class such as
    :class:`~kernelforms.model.Burg`: that one, required), then the terms, the cost and the
    rows (the fields below).  :meth:`reason` words the first mismatch of the form, sense,
    divergence and terms as ``"<head>; this problem ..."``, :meth:`loss_reason` that of the
    cost and the rows as ``"<who> needs ...; this problem has ..."``, :meth:`why` the first
    of the two."""

    forms: tuple = (PSD,)
    senses: tuple = ("min",)
    divergence: Any = False
    #: constraint rows accepted (False: none)
    constraints: bool = True
    #: a boolean property of :class:`~kernelforms.model.Loss` every loss must have (e.g.
    #: ``"is_squared"``, ``"smooth"``) and its word in sentences (``"squared"``), or None
    loss_property: str | None = None
    loss_word: str = ""
    #: the row kinds a loss may be on (None: any) and their words in sentences
    loss_rows: tuple | None = None
    rows_word: str = ""
    #: linear terms / loss terms accepted (False: none)
    linear: bool = True
    losses: bool = True
    #: what a declaration must have: ``"losses"`` (a loss term), ``"constraints"`` (a
    #: constraint row)
    needs: tuple = ()
    #: the linear terms as one sparse ``C`` (:attr:`Canonical.C` not None)
    sparse_cost: bool = False
    #: every constraint row on pairs (entries or distances, :class:`PairMap`); the centring
    #: row the chain turns into a flag is no pair row
    pair_constraints: bool = False
    #: a basis ``B`` of ``K = B Y B^T`` of full column rank (:func:`full_column_rank`; a
    #: basis declared orthonormal is taken as it is)
    full_rank_basis: bool = False
    #: a bound on ``tr(K*)`` follows from the declaration (:func:`trace_rule_holds`: an
    #: upper bound on the diagonal, the trace or the distances, a squared loss on diagonal
    #: entries or distances, a linear term, or the objective ``-tr(K)`` alone)
    trace_rule: bool = False
    #: appended to every sentence of :meth:`reason` and :meth:`loss_reason` (``": use 'sdp'"``)
    advice: str = ""

    def mismatch(self, decl: Any) -> "Mismatch | None":
        """The first thing ``decl`` (a declaration or a problem) has that these capabilities
        do not accept, as data (:class:`Mismatch`), or None: the form, sense, divergence and
        constraints first (what :meth:`reason` words), then the losses (:meth:`loss_reason`).
        A method that words its own sentences reads this; the decision stays the data's."""
        decl = getattr(decl, "declaration", decl)
        return self._structure_mismatch(decl) or self._loss_mismatch(decl)

    def _structure_mismatch(self, decl: Any) -> "Mismatch | None":
        div = decl.divergence
        if isinstance(self.divergence, type):  # a required divergence is checked first
            if div is None:
                return Mismatch("divergence_missing", decl)
            if not isinstance(div, self.divergence):
                return Mismatch("divergence_type", decl)
        if not isinstance(decl.form, self.forms):
            return Mismatch("form", decl)
        if self.full_rank_basis and not full_column_rank(decl.form):
            return Mismatch("basis_rank", decl)
        if decl.sense not in self.senses:
            return Mismatch("sense", decl)
        if div is not None and self.divergence is False:
            return Mismatch("divergence", decl)
        if not self.constraints and decl.constraints:
            return Mismatch("constraints", decl)
        if (not self.linear and decl.linear) or (not self.losses and decl.losses):
            return Mismatch("terms", decl)
        if "losses" in self.needs and not decl.losses:
            return Mismatch("no_losses", decl)
        if "constraints" in self.needs and not decl.n_constraint_rows:
            return Mismatch("no_constraints", decl)
        return None

    def _loss_mismatch(self, decl: Any) -> "Mismatch | None":
        if self.sparse_cost or self.loss_property is not None or self.loss_rows is not None \
                or self.pair_constraints:
            can = canonical(decl)
            if self.sparse_cost and can.decl.linear and can.C is None:
                return Mismatch("sparse_cost", decl)
            for b in can.loss_blocks:
                if self.loss_property is not None and not getattr(b.loss_type, self.loss_property):
                    return Mismatch("loss_property", decl, b)
                if self.loss_rows is not None and b.kind not in self.loss_rows:
                    return Mismatch("loss_rows", decl, b)
            if self.pair_constraints and (can.general or can.centred):
                return Mismatch("pair_constraints", decl)
        if self.trace_rule and not trace_rule_holds(decl):
            return Mismatch("trace_rule", decl)
        return None

    def reason(self, decl: Any, head: str) -> str | None:
        """None when ``decl`` (a declaration or a problem) has an accepted form, sense,
        divergence and terms, else the sentence saying which it has."""
        decl = getattr(decl, "declaration", decl)
        miss = self._structure_mismatch(decl)
        if miss is None:
            return None
        div = decl.divergence
        if miss.what == "divergence_missing":
            return f"{head}; this problem has no divergence term (it has {decl.structure()}){self.advice}"
        if miss.what == "divergence_type":
            return f"{head}; this problem's divergence is {div.label}{self.advice}"
        if miss.what == "form":
            return f"{head}; this problem has {decl.form.describe()}{self.advice}"
        if miss.what == "basis_rank":
            return (f"{head}; this problem's basis B of {decl.form.describe()} does not have full "
                    f"column rank{self.advice}")
        if miss.what == "sense":
            want = "a minimisation" if "min" in self.senses else "a maximisation"
            have = "a maximisation" if decl.sense == "max" else "a minimisation"
            return f"{head} ({want}); this problem is {have}{self.advice}"
        if miss.what == "divergence":
            return f"{head}; this problem has the {div.label} divergence D(K, K0){self.advice}"
        if miss.what == "terms":
            extra = [f"{len(decl.linear)} linear term(s)"] if decl.linear and not self.linear else []
            extra += [t.describe() for t in decl.losses] if not self.losses else []
            return f"{head} and nothing else; this problem also has {'; '.join(extra)}{self.advice}"
        if miss.what == "no_losses":
            only = " (only linear terms)" if decl.linear else ""
            return f"{head}; this problem has no loss term{only}{self.advice}"
        if miss.what == "no_constraints":
            return f"{head}; this problem has no constraint rows{self.advice}"
        return (f"{head} and no constraints; this problem has {decl.n_constraint_rows} constraint "
                f"rows{self.advice}")

    def loss_reason(self, decl: Any, who: str) -> str | None:
        """None when the cost is sparse (if :attr:`sparse_cost`), every loss has
        :attr:`loss_property` and is on :attr:`loss_rows`, and every constraint is on pairs
        (if :attr:`pair_constraints`), else the sentence for the first that fails: ``"<who>
        needs a sparse linear cost <C, K>; ..."``, ``"<who> needs <loss_word> losses; this
        problem has a <name> loss term"``, ``"<who> needs losses on <rows_word>; this problem
        has a <name> loss on <map>"`` (the first block of the canonical form that does not
        fit) or ``"<who> needs every constraint on entries or distances of K (pair rows);
        ..."``."""
        decl = getattr(decl, "declaration", decl)
        miss = self._loss_mismatch(decl)
        if miss is None:
            return None
        b = miss.block
        if miss.what == "sparse_cost":
            dense = [t.map.describe() for t in decl.linear if not t.map.adjoint_op(t.coef).is_sparse]
            return (f"{who} needs a sparse linear cost <C, K>; this problem's linear terms include "
                    f"{', '.join(dense)} (a dense adjoint){self.advice}")
        if miss.what == "pair_constraints":
            c = next(c for c in decl.constraints if not isinstance(c.map, PairMap))
            return (f"{who} needs every constraint on entries or distances of K (pair rows); this "
                    f"problem has the constraint {c.describe()}{self.advice}")
        if miss.what == "loss_property":
            return f"{who} needs {self.loss_word} losses; this problem has a {b.name} loss term{self.advice}"
        if miss.what == "trace_rule":
            return (f"{who} needs a bound on tr(K*) (an upper bound on the diagonal, the trace or "
                    "the distances, a squared loss on diagonal entries or distances, a positive "
                    "definite linear term, or the objective -tr(K) alone); this problem has "
                    f"{decl.structure()}, from which no bound on tr(K*) follows{self.advice}")
        return (f"{who} needs losses on {self.rows_word}; this problem has a {b.name} loss "
                f"on {miss.term.map.describe()}{self.advice}")

    def why(self, decl: Any, head: str, who: str) -> str | None:
        """:meth:`reason` (worded with ``head``), else :meth:`loss_reason` (with ``who``):
        the first mismatch of a declaration, as the sentence a method's ``applies_to`` gives."""
        return self.reason(decl, head) or self.loss_reason(decl, who)


@dataclass(frozen=True, eq=False)
class Mismatch:
    """What a declaration has that a method's :class:`Capabilities` do not accept: ``what``
    is one of ``"divergence_missing"``, ``"divergence_type"``, ``"form"``, ``"basis_rank"``,
    ``"sense"``, ``"divergence"``, ``"constraints"``, ``"terms"``, ``"no_losses"``,
    ``"no_constraints"`` (:meth:`Capabilities.reason` words them) or ``"sparse_cost"``,
    ``"loss_property"``, ``"loss_rows"``, ``"pair_constraints"``, ``"trace_rule"``
    (:meth:`Capabilities.loss_reason`); ``block`` the
    canonical loss block at fault (the loss mismatches)."""

    what: str
    decl: Any
    block: LossBlock | None = None

    @property
    def term(self) -> Any:
        """The first loss term of the declaration with rows in :attr:`block` (or None)."""
        return None if self.block is None else self.decl.losses[self.block.terms[0][0]]


# ----------------------------------------------------------------- rows and rules read as data
def is_trace_map(m: Any) -> bool:
    """``m`` is ``tr(K)`` (one row whose adjoint is ``w I``), whatever map class states it."""
    if m.size != 1 or isinstance(m, PairMap):
        return False
    op = m.adjoint_op(1.0)
    return op.is_sparse and abs(op.sparse - sp.identity(m.n)).sum() == 0


def is_total_sum_map(m: Any) -> bool:
    """``m`` is ``1^T K 1`` up to a positive factor (one row whose adjoint is ``w 1 1^T``)."""
    if m.size != 1 or isinstance(m, PairMap):
        return False
    op = m.adjoint_op(1.0)
    return (not op.is_sparse and op.sparse.nnz == 0 and op.U.shape[1] == 1
            and np.allclose(op.U[:, 0], op.U[0, 0]) and op.U[0, 0] != 0 and op.c[0] > 0)


def is_centring_row(c: Any) -> bool:
    """The constraint ``1^T K 1 == 0`` or ``<= 0``: with ``K`` PSD both say ``K 1 = 0``."""
    return is_total_sum_map(c.map) and float(c.bound[0]) == 0 and int(c.sense[0]) in (EQ, LE)


def minus_trace_coefficient(decl: Any) -> float:
    """``kappa > 0`` when the objective of ``decl`` (a minimisation) is ``-kappa tr(K)`` alone
    (no loss term, every linear term a trace), else 0."""
    if not decl.losses and decl.linear and all(is_trace_map(t.map) for t in decl.linear):
        k = -float(sum(t.coef[0] for t in decl.linear))
        if k > 0:
            return k
    return 0.0


def full_column_rank(form: Any) -> bool:
    """A form's basis ``B`` (of ``K = B Y B^T``) has full column rank: true for a form without
    a basis or one declared orthonormal; otherwise ``|R_kk| > 1e-10 max |R_kk|`` in
    ``B = Q R``."""
    basis = getattr(form, "basis", None)
    if basis is None or getattr(form, "orthonormal", True):
        return True
    R = np.linalg.qr(np.asarray(basis, dtype=float))[1]
    dr = np.abs(np.diag(R))
    return bool(dr.size) and not dr.min() <= 1e-10 * dr.max()


def trace_rule_holds(decl: Any) -> bool:
    """Some rule may bound ``tr(K*)`` for ``decl`` (whether it does for an instance is decided
    on the data): read from the declaration as a minimisation
    (:attr:`~kernelforms.model.Chain.minimisation`), the centring row aside.  The rules: the
    objective ``-kappa tr(K)`` alone; an upper bound (``<=`` or ``==``) on a distance, a
    diagonal entry or the trace; a squared loss on distances or diagonal entries; a linear
    term (bounds the trace when positive definite on the form)."""
    decl = getattr(decl, "declaration", decl)
    return derived(decl, "trace_rule", _trace_rule)


def _trace_rule(decl: Declaration) -> bool:
    low = chain(decl).minimisation
    if minus_trace_coefficient(low) > 0:
        return True
    for c in low.constraints:
        if is_centring_row(c):
            continue
        up = c.sense != GE
        if not np.any(up):
            continue
        m = c.map
        if isinstance(m, PairMap) and (np.any(m.kind[up] == RowKind.DISTANCE) or np.any(m.i[up] == m.j[up])):
            return True
        if is_trace_map(m):
            return True
    for t in low.losses:
        m = t.map
        if t.loss.is_squared and isinstance(m, PairMap) and (np.any(m.kind == RowKind.DISTANCE)
                                                               or np.any(m.i == m.j)):
            return True
    return bool(decl.linear)


#: the capabilities of a solver of ``min`` over ``K`` PSD with no divergence
PSD_MINIMISATION = Capabilities()


@dataclass(frozen=True, eq=False)
class Canonical:
    """The canonical form of one declaration (see the module docstring)."""

    chain: Chain
    loss_blocks: tuple = ()
    constraint_blocks: dict = field(default_factory=dict)
    general: tuple = ()  # constraints on maps other than pair rows (reduced declaration's)

    @property
    def decl(self) -> Declaration:
        """The reduced declaration the form describes (a minimisation)."""
        return self.chain.reduced

    @property
    def n(self) -> int:
        return self.decl.n

    @property
    def form(self) -> Any:
        return self.decl.form

    @property
    def divergence(self) -> Any:
        return self.decl.divergence

    @property
    def sign(self) -> float:
        return self.chain.sign

    @property
    def centred(self) -> bool:
        return self.chain.centred

    @property
    def C(self) -> Any:
        """The linear terms as one sparse ``C`` (``<C, K>``, the minimisation's sign), or
        None when one of them has a dense adjoint.  Built once; the declaration's memory
        guard (:meth:`~kernelforms.model.Declaration.cost_matrix`) is applied on every ask,
        so a method asked within a smaller ``max_memory`` is still refused."""
        from .checks import check_build

        store = self.__dict__
        if "_C" in store:
            check_build(f"the linear cost of n = {self.n} points as a sparse matrix",
                        self.decl.cost_bytes())
        else:
            store["_C"] = self.decl.cost_matrix()
        return store["_C"]

    def rows(self, loss: type, kind: RowKind) -> LossBlock:
        """The block of ``loss`` (a class) on ``kind`` rows, empty when there is none."""
        got = self.block(loss, kind)
        if got is not None:
            return got
        e = np.zeros(0, dtype=np.int64)
        return LossBlock(loss, kind, e, e, np.zeros(0), np.zeros(0))

    def blocks(self, *, loss: Any = None, kind: Any = None) -> list[LossBlock]:
        """The loss blocks of a loss class and / or a row kind."""
        return [b for b in self.loss_blocks
                if (loss is None or issubclass(b.loss_type, loss)) and (kind is None or b.kind == kind)]

    def block(self, loss: type, kind: RowKind) -> LossBlock | None:
        got = [b for b in self.loss_blocks if b.loss_type is loss and b.kind == kind]
        return got[0] if got else None

    @property
    def loss_kinds(self) -> set:
        return {b.kind for b in self.loss_blocks}

    @property
    def n_constraint_rows(self) -> int:
        return self.decl.n_constraint_rows

    @cached_property
    def pair_rows(self) -> "PairRows":
        """Every constraint row on pairs of the reduced declaration, in its order (the
        blocks concatenated; a single block's arrays are not copied): what a method that
        visits the rows one by one reads (the Bregman projections)."""
        return pair_rows([c for c in self.decl.constraints if isinstance(c.map, PairMap)])

    @cached_property
    def trace_bounded(self) -> bool:
        """A constraint bounds ``tr(K)`` from above (``tr(K) <= b`` or ``== b``)."""
        return any(isinstance(c.map, Trace) and bool(np.all(c.sense != GE))
                   for c in self.decl.constraints)

    @cached_property
    def graph_connected(self) -> bool:
        """The pairs of every loss and constraint row join all the points into one
        connected graph (a single point is connected)."""
        n = self.n
        if n <= 1:
            return True
        ii = [b.i for b in self.loss_blocks] + [b.i for b in self.constraint_blocks.values()]
        jj = [b.j for b in self.loss_blocks] + [b.j for b in self.constraint_blocks.values()]
        i, j = (np.concatenate(ii), np.concatenate(jj)) if ii else (np.zeros(0, int), np.zeros(0, int))
        if i.size == 0:
            return False
        import scipy.sparse as sp
        from scipy.sparse.csgraph import connected_components

        A = sp.coo_matrix((np.ones(i.size), (i, j)), shape=(n, n))
        return connected_components(A, directed=False)[0] == 1


@dataclass(frozen=True, eq=False)
class PairRows:
    """Every constraint row on pairs, in the declaration's order: ``i``, ``j``, the map's
    row kind (``DISTANCE`` / ``ENTRY``, a diagonal entry being ``ENTRY`` with ``i == j``),
    the sense (``LE`` / ``EQ`` / ``GE``) and the bound of each."""

    i: np.ndarray
    j: np.ndarray
    kind: np.ndarray
    sense: np.ndarray
    bound: np.ndarray

    def __len__(self) -> int:
        return int(self.bound.size)


def pair_rows(constraints: Any) -> PairRows:
    """The :class:`PairRows` of constraints on :class:`PairMap` rows (a single block is
    returned without copying)."""
    if len(constraints) == 1:
        c = constraints[0]
        return PairRows(c.map.i, c.map.j, c.map.kind, c.sense, c.bound)
    if not constraints:
        e = np.zeros(0, dtype=np.int64)
        return PairRows(e, e, e, e, np.zeros(0))
    cat = lambda f: np.concatenate([f(c) for c in constraints])  # noqa: E731
    return PairRows(cat(lambda c: c.map.i), cat(lambda c: c.map.j), cat(lambda c: c.map.kind),
                    cat(lambda c: c.sense), cat(lambda c: c.bound).astype(float))


def _pair_rows(m: PairMap) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.asarray(m.i, dtype=np.int64), np.asarray(m.j, dtype=np.int64), row_kinds(m)


def _build(decl: Declaration) -> Canonical:
    ch = chain(decl)
    red = ch.reduced
    groups: dict[tuple, list] = {}
    for k, t in enumerate(red.losses):
        try:
            data = np.asarray(t.loss.row_data, dtype=float)
        except NotImplementedError:  # a loss of the user's that names no row data
            data = np.full(t.map.size, np.nan)
        if isinstance(t.map, PairMap):
            i, j, kinds = _pair_rows(t.map)
            for kind in (RowKind.ENTRY, RowKind.DIAGONAL, RowKind.DISTANCE):
                rows = np.flatnonzero(kinds == kind)
                if rows.size:
                    groups.setdefault((type(t.loss), kind), []).append(
                        (k, rows, i[rows], j[rows], np.full(rows.size, t.weight), data[rows]))
        else:
            rows = np.arange(t.map.size)
            empty = np.zeros(0, dtype=np.int64)
            groups.setdefault((type(t.loss), RowKind.GENERAL), []).append(
                (k, rows, empty, empty, np.full(rows.size, t.weight), data))
    blocks = []
    for (lt, kind), parts in groups.items():
        cat = (lambda q, dt: np.concatenate([p[q] for p in parts]).astype(dt))
        blocks.append(LossBlock(lt, kind, cat(2, np.int64), cat(3, np.int64), cat(4, float),
                                cat(5, float), tuple((p[0], p[1]) for p in parts)))
    by_sense: dict[int, list] = {}
    general = []
    for c in red.constraints:
        if not isinstance(c.map, PairMap):
            general.append(c)
            continue
        i, j, kinds = _pair_rows(c.map)
        for s in (LE, EQ, GE):
            rows = np.flatnonzero(c.sense == s)
            if rows.size:
                by_sense.setdefault(s, []).append((kinds[rows], i[rows], j[rows], c.bound[rows]))
    cblocks = {}
    for s, parts in by_sense.items():
        cat = (lambda q, dt: np.concatenate([p[q] for p in parts]).astype(dt))
        cblocks[s] = ConstraintBlock(s, cat(0, np.int64), cat(1, np.int64), cat(2, np.int64), cat(3, float))
    return Canonical(ch, tuple(blocks), cblocks, tuple(general))


def canonical(decl: Any) -> Canonical:
    """The :class:`Canonical` form of a declaration (or a problem's), computed once (a
    canonical form is returned as it is)."""
    if isinstance(decl, Canonical):
        return decl
    return derived(getattr(decl, "declaration", decl), "canonical", _build)


__all__ = ["Canonical", "Capabilities", "ConstraintBlock", "LossBlock", "Mismatch", "PSD_MINIMISATION",
           "RowKind", "canonical", "full_column_rank", "is_centring_row", "is_total_sum_map",
           "is_trace_map", "minus_trace_coefficient", "row_kinds", "trace_rule_holds"]
