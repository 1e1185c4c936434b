"""A problem stated once: the kernel's form, its terms, its constraints and a divergence.

::

    minimise (or maximise)   sum_k <c_k, A_k(K)>                  linear terms
                           + sum_k w_k sum_p l_kp(A_k(K)_p)       loss terms
                           + D(K, K0)                             a divergence (optional)
    subject to               A_k(K) {<=, ==, >=} b_k              constraints
                             K in the form (K PSD; K = B Y B^T, Y PSD; range(K) in range(K0))

Everything downstream reads a :class:`Declaration`: the conic formulations compile it,
the hand-written solvers read its maps, adjoints and loss gradients, and the
certificate is one Lagrangian bound built from it.  The problems of docs/problems.md
(:class:`~kernelforms.PCP`, ...) are declarations with friendly constructors; a user can
write a new one with :class:`~kernelforms.DeclaredProblem`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Union

import numpy as np

from ..errors import ProblemError
from ..result import LowRank, as_kernel
from .checks import Count, Reals, check_build
from .losses import Loss
from .maps import LinearMap, SymOperator, sym_sum

Sense = Literal["min", "max"]

#: constraint senses, per row
LE, GE, EQ = -1, 1, 0
_SENSES = {"<=": LE, ">=": GE, "==": EQ, "=": EQ, LE: LE, GE: GE, EQ: EQ}
SENSE_TEXT = {LE: "<=", GE: ">=", EQ: "=="}


# --------------------------------------------------------------------- kernel forms
@dataclass(frozen=True, eq=False)
class PSD:
    """``K`` is any ``n x n`` PSD matrix (the variable is K itself)."""

    n: int

    #: the declared parameter constraints (kernelforms.model.checks), checked on construction
    parameter_constraints: ClassVar[dict] = {"n": Count()}

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", self.parameter_constraints["n"].check("PSD", "n", self.n))

    def describe(self) -> str:
        return f"K PSD ({self.n} x {self.n})"

    @property
    def basis(self) -> None:
        """The ``n x block`` matrix ``B`` with ``K = B Y B^T`` (None: K is the variable)."""
        return None

    @property
    def block(self) -> int:
        """Size of the PSD variable a conic formulation declares."""
        return self.n


@dataclass(frozen=True, eq=False)
class Basis:
    """``K = B Y B^T`` with ``Y`` PSD (``k x k``) and a fixed ``n x k`` basis ``B``.

    RegPCP and RegMVU use the smallest Laplacian eigenvectors (``orthonormal=True``).
    """

    B: Any
    orthonormal: bool = True

    parameter_constraints: ClassVar[dict] = {"B": Reals(2)}

    def __post_init__(self) -> None:
        B = self.parameter_constraints["B"].check("Basis", "B", self.B)
        if B.flags.writeable:
            B = B.copy()
            B.flags.writeable = False
        object.__setattr__(self, "B", B)

    @property
    def n(self) -> int:
        return self.B.shape[0]

    @property
    def block(self) -> int:
        return self.B.shape[1]

    @property
    def basis(self) -> np.ndarray:
        return self.B

    def describe(self) -> str:
        return f"K = B Y B^T, Y PSD ({self.block} x {self.block})"


@dataclass(frozen=True, eq=False)
class Range:
    """``range(K) ⊆ range(K0)`` with ``K0 = G0 G0^T`` (``G0`` of full column rank ``r``).

    ``V0`` (orthonormal, ``n x r``) and ``lam0`` are the eigenvectors and eigenvalues of
    ``K0``; a K in the form is ``V0 W V0^T`` with ``W`` PSD (``r x r``).
    """

    G0: np.ndarray
    V0: np.ndarray
    lam0: np.ndarray

    #: the declared parameter constraints of :meth:`of` (kernelforms.model.checks)
    parameter_constraints: ClassVar[dict] = {"G0": Reals(2)}

    def __post_init__(self) -> None:
        G0 = self.parameter_constraints["G0"].check("Range", "G0", self.G0)
        n, r = G0.shape
        V0 = np.asarray(self.V0, dtype=float)
        lam0 = np.asarray(self.lam0, dtype=float)
        if V0.shape != (n, r) or lam0.shape != (r,):
            raise ProblemError(f"Range: V0 must have shape {(n, r)} and lam0 shape {(r,)} (those of "
                               f"G0); got {V0.shape} and {lam0.shape}. Build it with Range.of(G0).")
        # numerical rank as numpy.linalg.matrix_rank has it: a singular value at or below
        # max(n, r) * eps * the largest is zero (LAPACK returns such round-off, not exactly 0)
        if r > n or not np.all(np.isfinite(lam0)) or not float(lam0.min()) > 0 or \
                np.sqrt(float(lam0.min())) <= max(n, r) * np.finfo(float).eps * np.sqrt(float(lam0.max())):
            raise ProblemError(
                f"The 'G0' parameter of Range must have full column rank (r = {r} <= n = {n} and "
                f"every singular value above max(n, r) * eps times the largest). Got singular "
                f"values down to "
                f"{float(np.sqrt(max(lam0.min(), 0.0))) if lam0.size else 0.0:.3g} instead; drop "
                "dependent columns (e.g. keep the leading eigenvectors of K0).")
        object.__setattr__(self, "G0", G0)

    @classmethod
    def of(cls, G0: Any) -> "Range":
        G0 = cls.parameter_constraints["G0"].check("Range.of", "G0", G0)
        if G0.shape[1] > G0.shape[0]:
            raise ProblemError(f"The 'G0' parameter of Range.of must have at most n = {G0.shape[0]} "
                               f"columns (full column rank). Got shape {G0.shape} instead.")
        U, s, _ = np.linalg.svd(G0, full_matrices=False)
        return cls(G0, U, s**2)

    @property
    def n(self) -> int:
        return self.G0.shape[0]

    @property
    def r(self) -> int:
        return self.G0.shape[1]

    @property
    def block(self) -> int:
        return self.r

    @property
    def basis(self) -> np.ndarray:
        """``V0``: K in the form is ``V0 W V0^T``."""
        return self.V0

    def coordinates(self, K: Any) -> tuple[np.ndarray, float]:
        """``W = V0^T K V0`` (r x r) and the relative size of K's part outside range(K0)."""
        U = self.V0
        if isinstance(K, LowRank):
            P = U.T @ K.G
            W = P @ P.T
            out = K.G - U @ P
            num, den = np.linalg.norm(out), max(np.linalg.norm(K.G), 1e-300)
        else:
            W = U.T @ K @ U
            out = K - U @ W @ U.T
            num, den = np.linalg.norm(out), max(np.linalg.norm(K), 1e-300)
        return (W + W.T) / 2, float(num / den)

    def describe(self) -> str:
        return f"range(K) in range(K0), K = V0 W V0^T, W PSD ({self.r} x {self.r})"


Form = Union[PSD, Basis, Range]


# --------------------------------------------------------------------- divergences
#: out-of-range part of K (relative to ||K||) above which a divergence is +inf
RANGE_RTOL = 1e-6


@dataclass(frozen=True, eq=False)
class Divergence:
    """``D(K, K0)``: ``"burg"`` (LogDet) or ``"von_neumann"``, on the range of ``K0``
    (Kulis et al. 2006; the formulas of docs/problems.md, P7).  The declaration's form
    must be :class:`Range` of the same ``K0``."""

    kind: str
    #: the divergence's name in sentences
    label: ClassVar[str] = "Bregman"

    def __new__(cls, kind: str = "burg", *args: Any, **kwargs: Any) -> "Divergence":
        # Divergence("burg") is a Burg, Divergence("von_neumann") a VonNeumann: the type
        # names the divergence (isinstance), ``kind`` stays its string for messages
        if cls is Divergence:
            cls = _DIVERGENCE_TYPES.get(kind, Divergence)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        if self.kind not in ("burg", "von_neumann"):
            raise ProblemError("The 'kind' parameter of Divergence must be one of 'burg', "
                               f"'von_neumann'. Got {self.kind!r} instead.")
        if type(self) is not Divergence and not isinstance(self, _DIVERGENCE_TYPES[self.kind]):
            raise ProblemError(f"{type(self).__name__} is the {type(self).kind!r} divergence; "
                               f"got kind={self.kind!r}: use Divergence({self.kind!r})")

    def of_W(self, W: np.ndarray, lam0: np.ndarray) -> float:
        """``D`` as a function of ``W = V0^T K V0`` (each divergence class has its own)."""
        return _DIVERGENCE_TYPES[self.kind].of_W(self, W, lam0)

    def value(self, K: Any, form: Range) -> float:
        W, out = form.coordinates(K)
        if out > RANGE_RTOL:
            return float("inf")
        return self.of_W(W, form.lam0)

    def describe(self) -> str:
        return f"{_DIVERGENCE_TYPES[self.kind].symbol}(K, K0)"


@dataclass(frozen=True, eq=False)
class Burg(Divergence):
    """The Burg (LogDet) divergence: ``Divergence("burg")`` is one."""

    kind: str = "burg"
    label: ClassVar[str] = "Burg"
    symbol: ClassVar[str] = "D_Burg"
    latex: ClassVar[str] = r"D_{\mathrm{Burg}}"

    def of_W(self, W: np.ndarray, lam0: np.ndarray) -> float:
        """``tr(W~) - log det W~ - r`` with ``W~ = Lam0^{-1/2} W Lam0^{-1/2}`` (+inf unless
        ``W`` is positive definite)."""
        r = len(lam0)
        s = 1.0 / np.sqrt(lam0)
        Wt = (W * s[:, None]) * s[None, :]
        ev = np.linalg.eigvalsh(Wt)
        if ev.min() <= 0:
            return float("inf")
        return float(np.sum(ev) - np.sum(np.log(ev)) - r)


@dataclass(frozen=True, eq=False)
class VonNeumann(Divergence):
    """The von Neumann divergence: ``Divergence("von_neumann")`` is one."""

    kind: str = "von_neumann"
    label: ClassVar[str] = "von Neumann"
    symbol: ClassVar[str] = "D_vN"
    latex: ClassVar[str] = r"D_{\mathrm{vN}}"

    def of_W(self, W: np.ndarray, lam0: np.ndarray) -> float:
        """``tr(W log W) - tr(W log Lam0) - tr(W) + tr(Lam0)``."""
        ev = np.clip(np.linalg.eigvalsh(W), 0.0, None)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = np.where(ev > 0, ev * np.log(ev), 0.0)
        return float(np.sum(ent) - np.diag(W) @ np.log(lam0) - np.trace(W) + np.sum(lam0))


_DIVERGENCE_TYPES = {"burg": Burg, "von_neumann": VonNeumann}


# --------------------------------------------------------------------- terms and constraints
def _coef(owner: str, name: str, value: Any, size: int) -> np.ndarray:
    """A finite real number or ``size`` of them (complex values, strings, NaN refused)."""
    a = Reals(0).check(owner, name, value)
    try:
        c = np.broadcast_to(a, (size,)).copy()
    except ValueError:
        raise ProblemError(f"The {name!r} parameter of {owner} must be a number or an array of "
                           f"length {size} (one per row of the map). Got shape {a.shape} instead.") from None
    c.flags.writeable = False
    return c


@dataclass(frozen=True, eq=False)
class LinearTerm:
    """``<c, A(K)> = sum_p c_p A(K)_p`` (``coef`` a number or one per row)."""

    map: LinearMap
    coef: Any = 1.0

    parameter_constraints: ClassVar[dict] = {"coef": Reals(0)}

    def __post_init__(self) -> None:
        if not isinstance(self.map, LinearMap):
            raise ProblemError(f"LinearTerm: map must be a LinearMap; got {type(self.map).__name__}")
        object.__setattr__(self, "coef", _coef("LinearTerm", "coef", self.coef, self.map.size))

    def value(self, K: Any) -> float:
        return float(self.coef @ self.map.apply(K))

    def gradient(self, K: Any = None) -> SymOperator:
        return self.map.adjoint_op(self.coef)

    def describe(self) -> str:
        c = self.coef
        if c.size == 1:
            s = "" if c[0] == 1 else f"{c[0]:g} * "
            return s + self.map.describe()
        return f"<c, {self.map.describe()}>"


@dataclass(frozen=True, eq=False)
class LossTerm:
    """``weight * sum_p loss_p(A(K)_p)``.

    ``weight`` is a nonzero number; in a minimisation it must be > 0 and in a
    maximisation < 0 (a concave penalty), so that the problem stays convex.
    """

    map: LinearMap
    loss: Loss
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.map, LinearMap):
            raise ProblemError(f"LossTerm: map must be a LinearMap; got {type(self.map).__name__}")
        if not isinstance(self.loss, Loss):
            raise ProblemError(f"LossTerm: loss must be a Loss; got {type(self.loss).__name__}")
        if self.loss.size != self.map.size:
            raise ProblemError(f"LossTerm: the loss has {self.loss.size} rows but the map "
                               f"({self.map.describe()}) has {self.map.size}")
        w = self.weight
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Real) or not np.isfinite(w) or w == 0:
            raise ProblemError(f"The 'weight' parameter of LossTerm must be a finite nonzero real "
                               f"number. Got {w!r} instead.")
        object.__setattr__(self, "weight", float(w))

    def value(self, K: Any) -> float:
        return self.weight * self.loss.total(self.map.apply(K))

    def gradient(self, K: Any) -> SymOperator:
        """A (sub)gradient of the term: ``A*(w l'(A(K)))``."""
        return self.map.adjoint_op(self.weight * self.loss.grad(self.map.apply(K)))

    def describe(self) -> str:
        s = "" if self.weight == 1 else f"{self.weight:g} * "
        return f"{s}sum {self.loss.name} loss of {self.map.describe()}"


@dataclass(frozen=True, eq=False)
class Constraint:
    """``A(K) <sense> bound`` row by row; ``sense`` is ``"<="``, ``"=="`` or ``">="`` (one
    for all rows) or an array of :data:`LE` / :data:`EQ` / :data:`GE` per row."""

    map: LinearMap
    sense: Any
    bound: Any

    parameter_constraints: ClassVar[dict] = {"bound": Reals(0)}

    def __post_init__(self) -> None:
        if not isinstance(self.map, LinearMap):
            raise ProblemError(f"Constraint: map must be a LinearMap; got {type(self.map).__name__}")
        p = self.map.size
        s = self.sense
        if isinstance(s, str) or isinstance(s, numbers.Integral):
            if s not in _SENSES:
                raise ProblemError(f"Constraint: sense must be '<=', '==' or '>='; got {s!r}")
            sense = np.full(p, _SENSES[s], dtype=np.int64)
        else:
            sense = np.asarray(s, dtype=np.int64).ravel()
            if sense.shape != (p,) or not np.all(np.isin(sense, (LE, GE, EQ))):
                raise ProblemError(f"Constraint: sense must be one of '<=', '==', '>=' or an "
                                   f"array of LE/EQ/GE of length {p}")
        sense.flags.writeable = False
        object.__setattr__(self, "sense", sense)
        object.__setattr__(self, "bound", _coef("Constraint", "bound", self.bound, p))

    @property
    def size(self) -> int:
        return self.map.size

    def violations(self, K: Any) -> np.ndarray:
        """Nonnegative violation per row."""
        g = self.map.apply(K) - self.bound
        return np.where(self.sense == LE, np.maximum(g, 0),
                        np.where(self.sense == GE, np.maximum(-g, 0), np.abs(g)))

    @property
    def is_equality(self) -> bool:
        return bool(np.all(self.sense == EQ))

    def describe(self) -> str:
        ops = sorted({SENSE_TEXT[int(s)] for s in np.unique(self.sense)})
        return f"{self.map.describe()} {'/'.join(ops)} b ({self.size} rows)"


def _adjoint_entries(m: Any) -> int:
    """Stored entries of a map's adjoint (a dense part counted as n per column)."""
    from .maps import Inner, PairMap, Trace

    if isinstance(m, PairMap):
        return 4 * m.size
    if isinstance(m, Inner):
        return int(m.M.nnz)
    if isinstance(m, Trace):
        return int(m.n)
    return int(m.n) * max(1, int(m.size))


# --------------------------------------------------------------------- the declaration
@dataclass(frozen=True, eq=False)
class Declaration:
    """A kernel-learning problem stated once (see the module docstring).

    Parameters
    ----------
    form : PSD, Basis or Range
        Where K lives.
    linear : sequence of LinearTerm
    losses : sequence of LossTerm
    constraints : sequence of Constraint
    divergence : Divergence, optional
        Needs ``form`` to be a :class:`Range`.
    sense : "min" or "max"
    """

    form: Any
    linear: tuple = ()
    losses: tuple = ()
    constraints: tuple = ()
    divergence: Divergence | None = None
    sense: Sense = "min"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.form, (PSD, Basis, Range)):
            raise ProblemError(f"Declaration: form must be PSD, Basis or Range; got {type(self.form).__name__}")
        if self.sense not in ("min", "max"):
            raise ProblemError(f"Declaration: sense must be 'min' or 'max'; got {self.sense!r}")
        n = self.form.n
        for name, kind in (("linear", LinearTerm), ("losses", LossTerm), ("constraints", Constraint)):
            items = tuple(getattr(self, name))
            for it in items:
                if not isinstance(it, kind):
                    raise ProblemError(f"Declaration: every entry of {name!r} must be a "
                                       f"{kind.__name__}; got {type(it).__name__}")
                if it.map.n != n:
                    raise ProblemError(f"Declaration: {it.describe()} is over n = {it.map.n} points "
                                       f"but the form has n = {n}")
            object.__setattr__(self, name, items)
        sign = 1.0 if self.sense == "min" else -1.0
        for t in self.losses:
            if sign * t.weight <= 0:
                raise ProblemError(
                    f"Declaration: the loss term '{t.describe()}' has weight {t.weight:g}; a "
                    f"{'minimisation' if sign > 0 else 'maximisation'} needs weights "
                    f"{'> 0' if sign > 0 else '< 0'} to stay convex")
        if self.divergence is not None:
            if not isinstance(self.divergence, Divergence):
                raise ProblemError("Declaration: divergence must be a Divergence")
            if not isinstance(self.form, Range):
                raise ProblemError("Declaration: a divergence needs the Range form (K0)")
            if self.sense != "min":
                raise ProblemError("Declaration: a divergence is minimised (sense='min')")
        if not (self.linear or self.losses or self.divergence is not None):
            raise ProblemError("Declaration: no objective (give linear terms, losses or a divergence)")

    def __getstate__(self) -> dict:
        # what was derived from the declaration (its chain, its canonical form) is not
        # pickled: it is computed again, once, where it is asked for
        state = dict(self.__dict__)
        state.pop("_derived", None)
        return state

    # ------------------------------------------------------------------ sizes
    @property
    def n(self) -> int:
        return self.form.n

    @property
    def sign(self) -> float:
        """+1 for a minimisation, -1 for a maximisation: ``sign * objective`` is minimised."""
        return 1.0 if self.sense == "min" else -1.0

    @property
    def n_loss_rows(self) -> int:
        return sum(t.map.size for t in self.losses)

    @property
    def n_constraint_rows(self) -> int:
        return sum(c.size for c in self.constraints)

    # ------------------------------------------------------------------ yardstick
    def objective(self, K: Any) -> float:
        """The objective at K (dense or a :class:`LowRank` factor)."""
        K = as_kernel(K, self.n)
        val = 0.0
        for t in self.linear:
            val += t.value(K)
        for t in self.losses:
            val += t.value(K)
        if self.divergence is not None:
            val += self.divergence.value(K, self.form)
        return float(val)

    def violation(self, K: Any) -> float:
        """Largest violation over every constraint row (0 without constraints)."""
        if not self.constraints:
            return 0.0
        K = as_kernel(K, self.n)
        return float(max(c.violations(K).max(initial=0.0) for c in self.constraints))

    def gradient(self, K: Any) -> SymOperator:
        """A (sub)gradient of the linear and loss terms at K (the divergence excluded),
        in the problem's own sense (a maximisation's gradient is of the objective itself)."""
        K = as_kernel(K, self.n)
        return sym_sum(self.n, [t.gradient(K) for t in self.linear]
                       + [t.gradient(K) for t in self.losses])

    # ------------------------------------------------------------------ structure queries
    @property
    def smooth(self) -> bool:
        return all(t.loss.smooth for t in self.losses)

    def loss_names(self) -> list[str]:
        return sorted({t.loss.name for t in self.losses})

    def cost_bytes(self) -> int:
        """Bytes :meth:`cost_matrix` holds at its peak, from the sizes alone (nothing built):
        the terms' adjoints, their running sum and the result, each a CSR matrix of
        ``8 (n + 1)`` bytes of row pointers and 16 bytes per stored entry (a dense adjoint:
        ``8 n`` per column)."""
        n = self.n
        nnz = 0
        for t in self.linear:
            nnz += _adjoint_entries(t.map)
        return int(3 * (8 * (n + 1) + 16 * nnz))

    def cost_matrix(self):
        """The linear terms as one sparse symmetric ``C`` (``sum_k <c_k, A_k(K)> = <C, K>``),
        or None when one of them has a dense adjoint.

        Refused (:class:`~kernelforms.errors.NotApplicable`) before anything is built when
        :meth:`cost_bytes` exceeds the running method's ``max_memory`` or the machine's RAM:
        a method reads it to decide whether it applies."""
        check_build(f"the linear cost of n = {self.n} points as a sparse matrix", self.cost_bytes())
        op = sym_sum(self.n, [t.gradient() for t in self.linear])
        return op.sparse if op.is_sparse else None

    def describe(self) -> str:
        """The declaration in a few lines of text."""
        head = "minimise" if self.sense == "min" else "maximise"
        parts = [t.describe() for t in self.linear] + [t.describe() for t in self.losses]
        if self.divergence is not None:
            parts.append(self.divergence.describe())
        lines = [f"{head}  " + " + ".join(parts)]
        for c in self.constraints:
            lines.append(f"  s.t. {c.describe()}")
        lines.append(f"  over {self.form.describe()}")
        return "\n".join(lines)

    def structure(self) -> str:
        """One phrase naming the terms, for 'does not apply' reasons: e.g. ``"a hinge loss
        term and 1 constraint block"``."""
        bits = []
        if self.losses:
            bits.append(" and ".join(f"a {n} loss" for n in self.loss_names()))
        if self.divergence is not None:
            bits.append(f"the {self.divergence.kind} divergence")
        if self.constraints:
            bits.append(f"{self.n_constraint_rows} constraint rows")
        if not bits:
            bits.append("only linear terms")
        return ", ".join(bits)
