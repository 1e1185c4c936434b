"""The chain of reductions every method reads: a declaration made simpler, and the way back.

Each :class:`Reduction` maps a declaration to an equivalent, simpler one and returns the
:class:`Inverse` that carries a solution of the reduced problem back to the original one
(after CVXPY's ``Reduction.apply`` / ``invert``)::

    reduced, inverse = MergeEqualPoints().apply(decl)     # None: nothing to reduce
    G, value = inverse.invert(G_reduced, value_reduced)
    y = inverse.invert_multipliers(y_reduced)             # None: not mapped back

The chain (:func:`chain`) applies, in order,

1. :class:`MergeEqualPoints`: points that equality constraints force to be equal (hard PCP's
   must-links) become one point, ``K = P K' P^T`` (:func:`~kernelforms.model.merge_equal_points`);
   the inverse lifts a factor, ``G = P G'``;
2. :class:`MaxToMin`: a maximisation becomes the minimisation of its negation (linear
   coefficients and loss weights negated, so every loss weight is ``> 0``); the inverse
   negates the value back;
3. :class:`Centre`: the centring row ``sum_ij K_ij = 0`` over ``K`` PSD (MVU's) holds iff
   ``K 1 = 0``, iff a factor has ``G^T 1 = 0``; the row leaves the declaration and becomes
   the flag :attr:`Chain.centred`: a method solving the reduced declaration keeps its factor
   centred, and the inverse centres it (``G - 1 mean(G)``).

Opt-in, not in the default chain: :class:`FaceOfCliques` restricts equality MVU to the face of
its cliques (Krislock & Wolkowicz 2010; :mod:`kernelforms.model.faces`), ``K = U Y U^T`` as the
``Basis(U)`` form with ``U^T 1 = 0`` (the centring row then holds and leaves); the inverse
lifts a factor of ``Y``, ``G = U G'``.  :func:`chain_on_face` applies it first, then the
reductions above.

The chain is computed once per declaration and kept (weakly, by identity: a declaration
does not change), so every method that asks for it gets the same object.  No method merges,
flips or centres by itself.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .declaration import PSD, Declaration, LinearTerm, LossTerm
from .maps import TotalSum
from .reductions import Merged, merge_equal_points


class Inverse(ABC):
    """Carries a solution of a reduced declaration back to the declaration it came from."""

    @abstractmethod
    def invert(self, G: np.ndarray, value: float | None = None) -> tuple[np.ndarray, float | None]:
        """``(G, value)`` of the reduced problem -> ``(G, value)`` of the original: the factor
        (``K = G G^T``) and the objective in the original's own sense (None passes)."""

    def invert_multipliers(self, y: np.ndarray | None) -> np.ndarray | None:
        """Multipliers of the reduced declaration's constraint rows (in their order, the
        centring row excluded, in the minimisation's sign) -> those of the original's rows;
        None when they cannot be mapped back (None passes).  The rows are the same for every
        step but the merge (which overrides this)."""
        return y


class Reduction(ABC):
    """One step of the chain: ``apply(decl)`` is ``(reduced, inverse)``, or None when the
    step has nothing to do on ``decl`` (the declaration is passed on unchanged)."""

    name: str = ""

    @abstractmethod
    def apply(self, decl: Declaration) -> "tuple[Declaration, Inverse] | None":
        ...


# --------------------------------------------------------------------- merge
@dataclass(frozen=True, eq=False)
class LiftMerged(Inverse):
    """``G = P G'`` (the value is unchanged: ``K = P K' P^T`` has the same objective)."""

    merged: Merged

    def invert(self, G, value=None):
        return self.merged.lift(np.asarray(G)), value

    def invert_multipliers(self, y):
        """None: the merge keeps rows that became identical once and turns rows inside a
        group into ``0 = 0``, and which original row a reduced row stands for is not kept,
        so the multipliers are dropped (a certificate then fits its own)."""
        return None


class MergeEqualPoints(Reduction):
    """Points forced equal by equality constraints merged (see
    :func:`kernelforms.model.merge_equal_points`).  A merge that proves the constraints
    infeasible is not applied: the chain records its sentence as :attr:`Chain.conflict`."""

    name = "merge"

    def apply(self, decl):
        merged = merge_equal_points(decl)
        if merged is None or merged.declaration is None:
            return None
        return merged.declaration, LiftMerged(merged)


# --------------------------------------------------------------------- max -> min
@dataclass(frozen=True, eq=False)
class Negate(Inverse):
    """The factor is unchanged; the value of the minimisation is negated back."""

    def invert(self, G, value=None):
        return G, (None if value is None else -value)


class MaxToMin(Reduction):
    """``max f`` -> ``min -f``: linear coefficients and loss weights negated."""

    name = "max_to_min"

    def apply(self, decl):
        if decl.sense != "max":
            return None
        return Declaration(
            decl.form,
            linear=tuple(LinearTerm(t.map, -t.coef) for t in decl.linear),
            losses=tuple(LossTerm(t.map, t.loss, -t.weight) for t in decl.losses),
            constraints=decl.constraints, divergence=decl.divergence, sense="min",
            meta=dict(decl.meta)), Negate()


# --------------------------------------------------------------------- centring
@dataclass(frozen=True, eq=False)
class CentreFactor(Inverse):
    """``G - 1 mean(G)``: a factor of the reduced problem put in the centred subspace (a
    no-op on a factor that is already centred; the value is unchanged there)."""

    def invert(self, G, value=None):
        G = np.asarray(G, dtype=float)
        return G - G.mean(axis=0, keepdims=True), value


def centring_row(decl: Declaration) -> int | None:
    """The index of the constraint ``sum_ij K_ij == 0`` (one row) over ``K`` PSD, or None."""
    if not isinstance(decl.form, PSD):
        return None
    for k, c in enumerate(decl.constraints):
        if isinstance(c.map, TotalSum) and c.is_equality and float(c.bound[0]) == 0.0:
            return k
    return None


class Centre(Reduction):
    """The centring row ``1^T K 1 = 0`` over K PSD becomes the flag ``centred`` (see the
    module docstring)."""

    name = "centre"

    def apply(self, decl):
        k = centring_row(decl)
        if k is None:
            return None
        cons = decl.constraints[:k] + decl.constraints[k + 1:]
        meta = dict(decl.meta)
        meta["centred"] = True
        return Declaration(decl.form, linear=decl.linear, losses=decl.losses, constraints=cons,
                           divergence=decl.divergence, sense=decl.sense, meta=meta), CentreFactor()


# --------------------------------------------------------------------- facial reduction
@dataclass(frozen=True, eq=False)
class LiftFace(Inverse):
    """``G = U G'`` for a factor of the face's own variable (``K = U Y U^T``, ``Y = G' G'^T``,
    ``p`` rows); a factor with ``n`` rows is already one of ``K`` (what a method solving the
    ``Basis`` form returns) and passes.  The value is unchanged (``tr K = tr Y``)."""

    U: np.ndarray

    def invert(self, G, value=None):
        G = np.asarray(G, dtype=float)
        if G.shape[0] == self.U.shape[1] and G.shape[0] != self.U.shape[0]:
            return self.U @ G, value
        return G, value


def _face_rows(decl: Declaration):
    """``(k_centre, k_dist, i, j, b)``: the centring row and the ``==`` distance rows of an MVU
    declaration (PSD form, maximising a positive multiple of ``tr K``, no losses, no other
    constraint, no divergence), or None."""
    from .maps import PairMap, Trace

    if not isinstance(decl.form, PSD) or decl.losses or decl.divergence is not None:
        return None
    if not decl.linear or not all(isinstance(t.map, Trace) for t in decl.linear):
        return None
    kc = centring_row(decl)
    if kc is None:
        return None
    dist = [k for k, c in enumerate(decl.constraints) if k != kc]
    if len(dist) != 1:
        return None
    c = decl.constraints[dist[0]]
    if not (isinstance(c.map, PairMap) and c.map.is_distances and c.is_equality):
        return None
    return kc, dist[0], np.asarray(c.map.i), np.asarray(c.map.j), np.asarray(c.bound, dtype=float)


class FaceOfCliques(Reduction):
    """MVU with ``==`` distance rows restricted to the face of its cliques (Krislock &
    Wolkowicz 2010; :mod:`kernelforms.model.faces`): ``K = U Y U^T``, the declaration's
    ``Basis(U)`` form, with the centring row dropped (``U^T 1 = 0`` keeps it).  Not applied
    when no clique reduces (``p = n - 1``: the centring alone, which :class:`Centre` keeps).

    Not in :data:`REDUCTIONS`: :func:`chain_on_face` applies it first, then the others."""

    name = "face"

    def __init__(self, rank_rtol: float | None = None) -> None:
        self.rank_rtol = rank_rtol

    def face(self, decl: Declaration):
        from .faces import RANK_RTOL, clique_face

        rows = _face_rows(decl)
        if rows is None:
            return None
        _, _, i, j, b = rows
        tol = RANK_RTOL if self.rank_rtol is None else self.rank_rtol
        return derived(decl, f"clique_face_{tol:g}", lambda d: clique_face(d.n, i, j, b, tol))

    def apply(self, decl):
        from .declaration import Basis, Constraint

        face = self.face(decl)
        if face is None or face.reducing == 0:
            return None
        kc = _face_rows(decl)[0]
        cons = tuple(c for k, c in enumerate(decl.constraints) if k != kc)
        meta = dict(decl.meta)
        meta["face"] = face.describe()
        return Declaration(Basis(face.U), linear=decl.linear, losses=decl.losses,
                           constraints=tuple(Constraint(c.map, c.sense, c.bound) for c in cons),
                           divergence=decl.divergence, sense=decl.sense, meta=meta), LiftFace(face.U)


#: the reductions, in the order the chain applies them
REDUCTIONS: tuple[Reduction, ...] = (MergeEqualPoints(), MaxToMin(), Centre())


# --------------------------------------------------------------------- the chain
@dataclass(frozen=True, eq=False)
class Chain:
    """The reductions applied to one declaration (see the module docstring).

    ``original`` and ``reduced`` are the declarations before and after; ``steps`` the
    applied reductions with their inverses, in order; ``conflict`` None, or the sentence
    proving the original's constraints infeasible (found by the merge).
    """

    #: the original declaration, weakly: the chain is kept on it (:func:`derived`), and a
    #: strong reference back would make every declaration a reference cycle that outlives
    #: its last user until the cyclic garbage collector runs (large arrays do not prompt it)
    _original: Any
    #: the reduced declaration (weakly when it is the original itself)
    _reduced: Any
    steps: tuple = ()
    conflict: str | None = None
    merged: Merged | None = field(default=None)
    #: a group label per point, points forced equal sharing one (the merge's
    #: :attr:`~kernelforms.model.Merged.labels`, also when it proved the constraints
    #: infeasible and was not applied), or None when the merge found no such points
    groups: np.ndarray | None = field(default=None)

    @property
    def original(self) -> Declaration:
        """The declaration before the reductions."""
        return deref(self._original)

    @property
    def reduced(self) -> Declaration:
        """The declaration after the reductions (the original when none applied)."""
        return deref(self._reduced)

    @property
    def applied(self) -> tuple[str, ...]:
        return tuple(r.name for r, _ in self.steps)

    @property
    def sign(self) -> float:
        """``original objective = sign * reduced objective`` (at the inverted factor)."""
        return self.original.sign

    @property
    def minimisation(self) -> Declaration:
        """The original declaration as a minimisation: :class:`MaxToMin` alone (linear
        coefficients and loss weights negated for a maximisation), no merge and no centring,
        computed once.  For a method that works on the original points and only needs the
        sign settled: the certificate, whose bound is on the original kernel (the merged
        points are a subspace of its form, :attr:`groups`), and the quadratic formulations,
        whose program keeps the declaration's own variable."""
        return derived(self.original, "minimisation", _minimise)

    @property
    def centred(self) -> bool:
        """The reduced problem is solved over centred factors (``G^T 1 = 0``)."""
        return any(r.name == "centre" for r, _ in self.steps)

    def invert(self, G: np.ndarray, value: float | None = None) -> tuple[np.ndarray, float | None]:
        """A factor (and a value) of the reduced problem as one of the original."""
        for _, inv in reversed(self.steps):
            G, value = inv.invert(G, value)
        return G, value

    def invert_factor(self, G: np.ndarray) -> np.ndarray:
        return self.invert(G)[0]

    def invert_multipliers(self, y: np.ndarray | None) -> np.ndarray | None:
        """Constraint multipliers of the reduced declaration (one per row in its order, the
        centring row excluded, the minimisation's sign: a
        :class:`~kernelforms.result.Solution`'s ``multipliers``) as the original's, or None
        when a step cannot map them back (the merge drops them)."""
        if y is not None:
            y = np.array(y, dtype=float)
        for _, inv in reversed(self.steps):
            if y is None:
                return None
            y = inv.invert_multipliers(y)
        return y

    def invert_solution(self, sol: Any) -> Any:
        """A :class:`~kernelforms.result.Solution` of the reduced problem as one of the
        original: its factor (:meth:`invert_factor`) and its multipliers
        (:meth:`invert_multipliers`); bounds are left as they are (a method reports them in the
        original's sense)."""
        import dataclasses

        G = None if sol.factor is None else self.invert_factor(sol.factor)
        return dataclasses.replace(sol, factor=G, multipliers=self.invert_multipliers(sol.multipliers))

    def invert_value(self, value: float | None) -> float | None:
        """A value of the reduced problem (an objective, a bound) as one of the original
        (None passes)."""
        return self.invert(np.zeros((self.reduced.n, 0)), value)[1]

    def describe(self) -> str:
        if not self.steps:
            return "no reduction"
        return "; ".join({"merge": self.merged.note if self.merged is not None else "merged",
                          "max_to_min": "maximisation negated into a minimisation",
                          "centre": "the centring row 1^T K 1 = 0 kept by centred factors",
                          "face": (self.reduced.meta.get("face") or "restricted to a face")}[r.name]
                         for r, _ in self.steps)


def deref(ref: Any) -> Any:
    """What a weak reference kept by something :func:`derived` points at (anything else is
    returned as it is); ``ReferenceError`` when the declaration is gone."""
    if isinstance(ref, weakref.ref):
        out = ref()
        if out is None:
            raise ReferenceError("the declaration no longer exists: keep the declaration (or "
                                 "its problem) while using what was derived from it")
        return out
    return ref


def _new_chain(original: Declaration, reduced: Declaration, *args: Any, **kw: Any) -> Chain:
    return Chain(weakref.ref(original),
                 weakref.ref(reduced) if reduced is original else reduced, *args, **kw)


#: what :func:`derived` keeps when a computation returns the declaration itself (kept as is,
#: it would make the declaration refer to itself: a reference cycle)
_ITSELF = object()


def derived(decl: Declaration, key: str, compute: Any) -> Any:
    """``compute(decl)``, kept on the declaration under ``key`` (a declaration does not
    change, so what is derived from it is computed once; dropped when it is pickled).
    What is kept must not refer back to ``decl`` (a cycle keeps both alive until the cyclic
    garbage collector runs): refer to it weakly."""
    store = decl.__dict__.setdefault("_derived", {})
    if key not in store:
        value = compute(decl)
        store[key] = _ITSELF if value is decl else value
    value = store[key]
    return decl if value is _ITSELF else value


def _minimise(decl: Declaration) -> Declaration:
    out = MaxToMin().apply(decl)
    return decl if out is None else out[0]


def _build(decl: Declaration) -> Chain:
    steps = []
    cur = decl
    merged = None
    conflict = None
    groups = None
    for red in REDUCTIONS:
        if red.name == "merge":
            m = merge_equal_points(cur)
            if m is not None:
                groups = m.labels
                if m.conflict is not None:
                    conflict = m.conflict
        out = red.apply(cur)
        if out is None:
            continue
        cur, inv = out
        steps.append((red, inv))
        if isinstance(inv, LiftMerged):
            merged = inv.merged
    return _new_chain(decl, cur, tuple(steps), conflict, merged, groups)


def chain(decl: Any) -> Chain:
    """The :class:`Chain` of a declaration (or of a problem's declaration), computed once."""
    return derived(getattr(decl, "declaration", decl), "chain", _build)


def chain_on_face(decl: Any) -> Chain:
    """The chain with :class:`FaceOfCliques` first (equality MVU on the face of its cliques),
    then :data:`REDUCTIONS` on the face's declaration; computed once.  ``reduced`` is over
    ``K = U Y U^T`` (``Basis`` form); :meth:`Chain.invert` takes a factor of ``K`` or of
    ``Y``.  On a declaration the face does not reduce it is :func:`chain`."""
    decl = getattr(decl, "declaration", decl)

    def build(d):
        out = FaceOfCliques().apply(d)
        if out is None:
            return chain(d)
        faced, inv = out
        rest = _build(faced)
        return _new_chain(d, rest.reduced, ((FaceOfCliques(), inv),) + rest.steps, rest.conflict,
                     rest.merged, groups=rest.groups)

    return derived(decl, "chain_on_face", build)
