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
whether a divergence); the reason a method does not apply is generated from the mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

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
    :class:`~kernelforms.model.Burg`: that one, required).  :meth:`reason` words the first
    mismatch as ``"<head>; this problem ..."``."""

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
    #: loss terms accepted (False: none, e.g. MVU's solver)
    losses: bool = True

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
        if decl.sense not in self.senses:
            return Mismatch("sense", decl)
        if div is not None and self.divergence is False:
            return Mismatch("divergence", decl)
        if not self.constraints and decl.constraints:
            return Mismatch("constraints", decl)
        return None

    def _loss_mismatch(self, decl: Any) -> "Mismatch | None":
        blocks = canonical(decl).loss_blocks
        if not self.losses and blocks:
            return Mismatch("losses", decl, blocks[0])
        for b in blocks:
            if self.loss_property is not None and not getattr(b.loss_type, self.loss_property):
                return Mismatch("loss_property", decl, b)
            if self.loss_rows is not None and b.kind not in self.loss_rows:
                return Mismatch("loss_rows", decl, b)
        return None

    def reason(self, decl: Any, head: str) -> str | None:
        """None when ``decl`` (a declaration or a problem) has an accepted form, sense and
        divergence, else the sentence saying which it has."""
        decl = getattr(decl, "declaration", decl)
        miss = self._structure_mismatch(decl)
        if miss is None:
            return None
        div = decl.divergence
        if miss.what == "divergence_missing":
            return f"{head}; this problem has no divergence term (it has {decl.structure()})"
        if miss.what == "divergence_type":
            return f"{head}; this problem's divergence is {div.label}"
        if miss.what == "form":
            return f"{head}; this problem has {decl.form.describe()}"
        if miss.what == "sense":
            want = "a minimisation" if "min" in self.senses else "a maximisation"
            have = "a maximisation" if decl.sense == "max" else "a minimisation"
            return f"{head} ({want}); this problem is {have}"
        if miss.what == "divergence":
            return f"{head}; this problem has the {div.kind} divergence"
        return f"{head} and no constraints; this problem has {decl.n_constraint_rows} constraint rows"

    def loss_reason(self, decl: Any, who: str) -> str | None:
        """None when every loss has :attr:`loss_property` and is on :attr:`loss_rows`, else
        ``"<who> needs <loss_word> losses; this problem has a <name> loss term"`` or ``"<who>
        needs losses on <rows_word>; this problem has a <name> loss on <map>"`` for the
        first block (of the canonical form) that does not fit."""
        decl = getattr(decl, "declaration", decl)
        miss = self._loss_mismatch(decl)
        if miss is None:
            return None
        b = miss.block
        if miss.what == "losses":
            return f"{who} takes no loss terms; this problem has a {b.name} loss term"
        if miss.what == "loss_property":
            return f"{who} needs {self.loss_word} losses; this problem has a {b.name} loss term"
        return (f"{who} needs losses on {self.rows_word}; this problem has a {b.name} loss "
                f"on {miss.term.map.describe()}")


@dataclass(frozen=True, eq=False)
class Mismatch:
    """What a declaration has that a method's :class:`Capabilities` do not accept: ``what``
    is one of ``"divergence_missing"``, ``"divergence_type"``, ``"form"``, ``"sense"``,
    ``"divergence"``, ``"constraints"``, ``"losses"`` (loss terms where none are accepted),
    ``"loss_property"``, ``"loss_rows"``; ``block`` the canonical loss block at fault (the loss
    mismatches)."""

    what: str
    decl: Any
    block: LossBlock | None = None

    @property
    def term(self) -> Any:
        """The first loss term of the declaration with rows in :attr:`block` (or None)."""
        return None if self.block is None else self.decl.losses[self.block.terms[0][0]]


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
           "RowKind", "canonical", "row_kinds"]
