"""Low-rank kernel learning with Bregman matrix divergences (docs/problems.md P7, Kulis et al. 2006, Section 3.2)."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from ..errors import ProblemError, param_error
from ..model import DISTANCE, ENTRY, EQ, GE, LE, RANGE_RTOL  # noqa: F401  (re-exported)
from ..result import as_kernel
from ..model.kinds import Interval
from .base import Problem, check_choice, check_constraints_in_range, check_positive, entries, sq_distances
from .schema import Param, choice, count

DIVERGENCES = ("burg", "von_neumann")
#: the rank of K0 in Kulis et al. 2006, Section 6 (16-dimensional Pendigits); ``from_data``
#: uses ``min(DEFAULT_RANK, n, d)`` when no rank is given
DEFAULT_RANK = 16
#: :meth:`BregmanLowRank.from_data`'s number of random distance constraints and their slack
DEFAULT_N_CONSTRAINTS = 100
DEFAULT_EPSILON = 0.25


def _int_array(owner: str, name: str, value: Any) -> np.ndarray:
    """A 1-d int64 array of whole numbers, else the standard ProblemError (strings, None,
    fractions, NaN, complex values and integers beyond 64 bits are refused)."""
    try:
        a = np.atleast_1d(np.asarray(value))
    except (TypeError, ValueError, OverflowError) as exc:
        raise param_error(owner, name, "an integer array", f"{type(value).__name__}: {exc}") from None
    if a.dtype.kind in "iu":
        if a.dtype.kind == "u" and a.size and int(a.max()) > np.iinfo(np.int64).max:
            raise param_error(owner, name, "integers that fit in 64 bits", int(a.max()))
        return a.astype(np.int64).ravel()
    if a.dtype.kind == "b":
        raise param_error(owner, name, "an integer array", "booleans")
    if a.dtype.kind == "f":
        if a.size and not (np.all(np.isfinite(a)) and np.all(a == np.round(a))):
            raise param_error(owner, name, "an integer array", "non-integer values")
        if a.size and float(np.max(np.abs(a))) >= 2.0**63:
            raise param_error(owner, name, "integers that fit in 64 bits", float(np.max(np.abs(a))))
        return a.astype(np.int64).ravel()
    if a.dtype.kind == "O":
        flat = a.ravel().tolist()
        bad = [v for v in flat if isinstance(v, bool) or not isinstance(v, (int, np.integer))]
        if bad:
            raise param_error(owner, name, "an integer array", bad[0])
        big = [v for v in flat if not -2**63 <= int(v) < 2**63]
        if big:
            raise param_error(owner, name, "integers that fit in 64 bits", big[0])
        return np.asarray(flat, dtype=np.int64)
    raise param_error(owner, name, "an integer array", f"values of dtype {a.dtype}")


@dataclass(frozen=True, eq=False)
class LinearConstraints:
    """Linear constraints on K, one row each: ``value(K) <sense> bound``.

    ``kind`` is ``DISTANCE`` (value ``K_ii + K_jj - 2 K_ij``) or ``ENTRY`` (value
    ``K_ij``; ``i == j`` gives a diagonal entry); ``sense`` is ``LE`` (-1), ``GE`` (+1)
    or ``EQ`` (0).  Build with :meth:`distance`, :meth:`similarity`, :meth:`diagonal`
    and combine with ``+``.
    """

    i: Any
    j: Any
    kind: Any
    sense: Any
    bound: Any

    def __post_init__(self) -> None:
        owner = "LinearConstraints"
        arrs = {}
        for name in ("i", "j", "kind", "sense"):
            arrs[name] = _int_array(owner, name, getattr(self, name))
        try:
            raw = np.atleast_1d(np.asarray(self.bound))
            if raw.dtype.kind == "c":
                raise TypeError("complex values")
            bound = raw.astype(float).ravel()
        except (TypeError, ValueError, OverflowError) as exc:
            raise param_error(owner, "bound", "an array of real numbers (one per constraint)",
                              f"{exc}") from None
        c = len(arrs["i"])
        for name, a in list(arrs.items()) + [("bound", bound)]:
            if len(a) != c:
                raise param_error(owner, name, f"an array of length {c} (one per constraint)", len(a))
        if not np.all(np.isfinite(bound)):
            raise param_error(owner, "bound", "finite values", "NaN or inf")
        if np.any(arrs["i"] < 0) or np.any(arrs["j"] < 0):
            raise param_error(owner, "i/j", "indices >= 0", "a negative index")
        if not np.all(np.isin(arrs["kind"], (DISTANCE, ENTRY))):
            raise param_error(owner, "kind", "DISTANCE (0) or ENTRY (1)", np.unique(arrs["kind"]).tolist())
        if not np.all(np.isin(arrs["sense"], (LE, GE, EQ))):
            raise param_error(owner, "sense", "LE (-1), GE (+1) or EQ (0)", np.unique(arrs["sense"]).tolist())
        if np.any((arrs["kind"] == DISTANCE) & (arrs["i"] == arrs["j"])):
            raise ProblemError("LinearConstraints: a distance constraint needs i != j.")
        arrs["bound"] = bound
        for name, a in arrs.items():
            a.flags.writeable = False
            object.__setattr__(self, name, a)

    def __len__(self) -> int:
        return len(self.i)

    def __repr__(self) -> str:
        kinds = {DISTANCE: "distance", ENTRY: "entry"}
        parts = [f"{int(np.sum(self.kind == k))} {name}" for k, name in kinds.items()
                 if np.any(self.kind == k)]
        senses = {LE: "<=", GE: ">=", EQ: "=="}
        how = ", ".join(f"{int(np.sum(self.sense == s))} {op}" for s, op in senses.items()
                        if np.any(self.sense == s))
        return f"LinearConstraints({len(self)} rows: {', '.join(parts) or 'none'}; {how})"

    def __add__(self, other: "LinearConstraints") -> "LinearConstraints":
        return LinearConstraints(*(np.concatenate([getattr(self, f), getattr(other, f)])
                                   for f in ("i", "j", "kind", "sense", "bound")))

    @classmethod
    def distance(cls, similar=None, u=None, dissimilar=None, l=None) -> "LinearConstraints":
        """``d_K(i,j) <= u`` on similar pairs and ``>= l`` on dissimilar pairs (scalars broadcast)."""
        parts_i, parts_j, sense, bound = [], [], [], []
        for pairs, b, s in ((similar, u, LE), (dissimilar, l, GE)):
            if pairs is None:
                continue
            P = np.asarray(pairs).reshape(-1, 2)
            if b is None:
                raise ProblemError("LinearConstraints.distance: give the bound (u or l) with its pairs.")
            parts_i.append(P[:, 0]); parts_j.append(P[:, 1])
            sense.append(np.full(len(P), s)); bound.append(np.broadcast_to(np.asarray(b, float), (len(P),)))
        if not parts_i:
            raise ProblemError("LinearConstraints.distance: no pairs given.")
        i = np.concatenate(parts_i); return cls(i, np.concatenate(parts_j), np.full(len(i), DISTANCE),
                                               np.concatenate(sense), np.concatenate(bound))

    @classmethod
    def similarity(cls, pairs, b, sense: int = LE) -> "LinearConstraints":
        """``K_ij <= b`` (or ``sense``) on the given pairs."""
        P = np.asarray(pairs).reshape(-1, 2)
        return cls(P[:, 0], P[:, 1], np.full(len(P), ENTRY), np.full(len(P), sense),
                   np.broadcast_to(np.asarray(b, float), (len(P),)))

    @classmethod
    def diagonal(cls, n: int, value: float = 1.0, indices=None) -> "LinearConstraints":
        """``K_ii = value`` (the nearest-correlation-matrix constraints)."""
        idx = np.arange(n) if indices is None else np.asarray(indices)
        return cls(idx, idx, np.full(len(idx), ENTRY), np.full(len(idx), EQ),
                   np.full(len(idx), float(value)))

    def values(self, K: Any) -> np.ndarray:
        """The constrained quantity for every row."""
        out = np.empty(len(self))
        d = self.kind == DISTANCE
        idx = np.stack([self.i, self.j], axis=1)
        out[d] = sq_distances(K, idx[d])
        out[~d] = entries(K, idx[~d])
        return out

    def violations(self, K: Any) -> np.ndarray:
        """Nonnegative violation per row."""
        g = self.values(K) - self.bound
        return np.where(self.sense == LE, np.maximum(g, 0),
                        np.where(self.sense == GE, np.maximum(-g, 0), np.abs(g)))


@dataclass(frozen=True, eq=False, repr=False)
class BregmanLowRank(Problem):
    """Bregman low-rank kernel learning (docs/problems.md P7)::

        min  D(K, K0)  s.t. the linear constraints,  range(K) ⊆ range(K0),  K PSD

    with ``K0 = G0 G0^T`` (G0 of full column rank r) and ``D`` the Burg (LogDet) or
    von Neumann divergence, both evaluated on the r-dimensional range of K0 as
    docs/problems.md writes them.  A K with a part outside range(K0) (relative size above
    ``RANGE_RTOL``) has divergence +inf.
    """

    G0: Any
    constraints: LinearConstraints
    divergence: str = "burg"

    kind = "bregman"
    kind_help = {"bregman": "P7 Bregman low-rank (divergence, rank)"}
    parameters = (
        count("rank", None, "rank of K0 (at most min(n, d))", none_means="min(16, n, d)",
              same_as_default=(DEFAULT_RANK,)),
        Param("divergence", (choice(DIVERGENCES),), "burg", "Bregman divergence"),
        count("n_constraints", DEFAULT_N_CONSTRAINTS, "random distance constraints (Kulis et al. "
              "2006 use 100 on 16-dimensional digits; data of lower rank often needs fewer to be "
              "feasible, e.g. 10 on iris)", allow_none=True),
        Param("epsilon", (Interval(Real, 0, 1, closed="left"), None), DEFAULT_EPSILON,
              "slack of the constraints: same class d <= (1 - epsilon) d0, other class "
              "d >= (1 + epsilon) d0"),
    )

    def __post_init__(self) -> None:
        owner = "BregmanLowRank"
        from ..model.checks import Reals

        G0 = Reals(2).check(owner, "G0", self.G0)
        if G0.ndim != 2 or G0.shape[0] < 2:
            raise param_error(owner, "G0", "an (n, r) factor with n >= 2", G0.shape)
        if not np.all(np.isfinite(G0)):
            raise param_error(owner, "G0", "finite values", "NaN or inf")
        check_choice(owner, "divergence", self.divergence, DIVERGENCES)
        if not isinstance(self.constraints, LinearConstraints):
            raise param_error(owner, "constraints", "a LinearConstraints value", type(self.constraints).__name__)
        if len(self.constraints) == 0:
            raise ProblemError(f"{owner}: no constraints given.")
        n, r = G0.shape
        if max(self.constraints.i.max(), self.constraints.j.max()) >= n:
            raise ProblemError(f"{owner}: a constraint index is >= n = {n}.")
        U, s, _ = np.linalg.svd(G0, full_matrices=False)
        if s[-1] <= 1e-10 * s[0] or r > n:
            raise ProblemError(
                f"{owner}: G0 must have full column rank r = {r}; its singular values go down to "
                f"{s[-1]:.3g} (largest {s[0]:.3g}). Drop dependent columns (e.g. keep the "
                "leading eigenvectors of K0)."
            )
        check_constraints_in_range(owner, G0, self.constraints)
        G0.flags.writeable = False
        U.flags.writeable = False
        object.__setattr__(self, "G0", G0)
        object.__setattr__(self, "_U", U)
        object.__setattr__(self, "_lam0", s**2)

    @property
    def n(self) -> int:
        return self.G0.shape[0]

    @property
    def r(self) -> int:
        return self.G0.shape[1]

    @property
    def n_terms(self) -> int:
        return len(self.constraints)

    def default_rank(self) -> int:
        return self.r

    @property
    def eigenbasis(self) -> tuple[np.ndarray, np.ndarray]:
        """``(V0, lambda0)``: orthonormal basis of range(K0) and the eigenvalues of K0."""
        return self._U, self._lam0

    def range_coordinates(self, K: Any) -> tuple[np.ndarray, float]:
        """``W = V0^T K V0`` (r x r) and the relative size of K's part outside range(K0)."""
        return self.declaration.form.coordinates(as_kernel(K, self.n))

    def divergence_of_W(self, W: np.ndarray) -> float:
        """D as a function of ``W = V0^T K V0`` (the formulas of docs/problems.md)."""
        return self.declaration.divergence.of_W(W, self._lam0)

    def declare(self):
        """Minimise ``D(K, K0)`` s.t. the linear constraints, over ``range(K) ⊆ range(K0)``."""
        from ..model import Constraint, Declaration, Divergence, PairMap, Range

        c = self.constraints
        form = Range(self.G0, self._U, self._lam0)
        return Declaration(form, constraints=(Constraint(PairMap(self.n, c.i, c.j, c.kind), c.sense, c.bound),),
                           divergence=Divergence(self.divergence))

    def params(self) -> dict[str, Any]:
        c = self.constraints
        return {"kind": "bregman", "n": self.n, "r": self.r, "divergence": self.divergence,
                "n_constraints": len(c)}

    def _fingerprint_arrays(self):
        c = self.constraints
        return [self.G0, c.i, c.j, c.kind, c.sense, c.bound]

    # ------------------------------------------------------------------ builders (Kulis et al. 2006)
    @classmethod
    def from_data(cls, X: Any, y: Any, *, rank: int | None = None,
                  n_constraints: int = DEFAULT_N_CONSTRAINTS, epsilon: float = DEFAULT_EPSILON,
                  divergence: str = "burg", seed: Any = 0,
                  center: bool = False) -> "BregmanLowRank":
        """Kulis et al. 2006, Section 6: a rank-``rank`` linear kernel and random distance constraints.

        ``K0`` is the best rank-``rank`` approximation of the linear kernel ``X X^T``
        (``G0 = U_r S_r`` from the SVD of X; Kulis et al. 2006 use 16-dimensional Pendigits, whose linear
        kernel has rank 16 exactly).  ``n_constraints`` random pairs ``{i, j}`` (distinct,
        drawn without repetition) get ``d_K(i,j) <= (1 - epsilon) d0`` when ``y_i = y_j`` and
        ``d_K(i,j) >= (1 + epsilon) d0`` otherwise, with ``d0`` the distance under ``K0``.

        Parameters
        ----------
        X : array (n, d)
            Data; ``center=True`` subtracts the column means first.
        y : array (n,)
            Class labels (they only decide the sense of each constraint).
        rank : int, optional
            r, the rank of ``K0`` (and of the learned kernel); at most ``min(n, d)``.
            Default ``min(16, n, d)`` (16 in Kulis et al. 2006).
        n_constraints : int
            c, the number of distance constraints.
        epsilon : float in [0, 1)
            The slack of Kulis et al. 2006, Section 6 (0.25 there).
        divergence : {"burg", "von_neumann"}
        seed : int or numpy Generator
            Draws the pairs.
        """
        from .base import as_rng, check_int

        owner = "BregmanLowRank.from_data"
        from ..data.graphs import reject_complex

        reject_complex(owner, "X", X)
        # the seed as it was before any draw (a Generator's state), for the fingerprint
        if not isinstance(seed, np.random.Generator):
            as_rng(owner, seed)  # a bad seed fails here, before any work
        seed_state = repr(seed.bit_generator.state) if isinstance(seed, np.random.Generator) else seed
        X = np.asarray(X, dtype=float)
        y = np.asarray(y).ravel()
        if X.ndim != 2 or X.shape[0] < 2:
            raise param_error(owner, "X", "an (n, d) array with n >= 2", X.shape)
        if not np.all(np.isfinite(X)):
            raise param_error(owner, "X", "finite values", "NaN or inf")
        if len(y) != X.shape[0]:
            raise param_error(owner, "y", f"an array of length n = {X.shape[0]}", len(y))
        n, d = X.shape
        rank = min(DEFAULT_RANK, n, d) if rank is None else check_int(owner, "rank", rank, low=1,
                                                                     high=min(n, d))
        n_pairs = n * (n - 1) // 2
        n_constraints = check_int(owner, "n_constraints", n_constraints, low=1, high=n_pairs)
        epsilon = check_positive(owner, "epsilon", epsilon, allow_zero=True)
        if epsilon >= 1:
            raise param_error(owner, "epsilon", "a float in [0, 1)", epsilon)
        check_choice(owner, "divergence", divergence, DIVERGENCES)
        if center:
            X = X - X.mean(axis=0)
        U, s, _ = np.linalg.svd(X, full_matrices=False)
        if s[rank - 1] <= 1e-10 * s[0]:
            raise ProblemError(f"{owner}: X has numerical rank below rank = {rank} "
                               f"(singular value {rank} is {s[rank - 1]:.3g}).")
        G0 = U[:, :rank] * s[:rank]
        rng = as_rng(owner, seed)
        idx = _random_pairs(n, n_constraints, rng, G0)
        d0 = np.sum((G0[idx[:, 0]] - G0[idx[:, 1]]) ** 2, axis=1)
        same = y[idx[:, 0]] == y[idx[:, 1]]
        cons = LinearConstraints(idx[:, 0], idx[:, 1], np.full(len(idx), DISTANCE),
                                 np.where(same, LE, GE),
                                 np.where(same, (1 - epsilon) * d0, (1 + epsilon) * d0))
        return cls(G0, cons, divergence).with_definition(
            "BregmanLowRank.from_data", X=X, y=y, rank=rank, n_constraints=n_constraints,
            epsilon=epsilon, divergence=divergence, seed=seed_state, center=bool(center))

    @classmethod
    def nearest_correlation(cls, G0: Any, *, divergence: str = "burg") -> "BregmanLowRank":
        """The (low-rank) nearest correlation matrix to ``K0 = G0 G0^T`` (Kulis et al. 2006, Section 5.3).

        Constraints ``K_ii = 1`` for every i; the learned K keeps the range (and rank) of
        K0, ``K = G0 W G0^T`` with ``W`` r x r PSD, so the n equations ``g_i^T W g_i = 1``
        in ``r (r + 1) / 2`` unknowns are generically infeasible when
        ``n > r (r + 1) / 2`` (a ProblemWarning says so).
        """
        import warnings

        from ..errors import ProblemWarning

        G0 = np.asarray(G0, dtype=float)
        if G0.ndim != 2:
            raise param_error("BregmanLowRank.nearest_correlation", "G0", "an (n, r) factor", G0.shape)
        n, r = G0.shape
        if n > r * (r + 1) // 2:
            warnings.warn(f"BregmanLowRank.nearest_correlation: n = {n} unit-diagonal equations on "
                          f"the range of a rank-{r} K0 ({r * (r + 1) // 2} unknowns) are generically "
                          "infeasible; use r with r (r + 1) / 2 >= n", ProblemWarning, stacklevel=2)
        return cls(G0, LinearConstraints.diagonal(G0.shape[0], 1.0), divergence)

    @classmethod
    def definite_boost(cls, n: int, constraints: "LinearConstraints", *,
                       scale: float = 1.0) -> "BregmanLowRank":
        """DefiniteBoost (Tsuda et al. 2005; Kulis et al. 2006, Section 5.3): von Neumann, full rank,
        starting from the scaled identity ``K0 = scale * I_n``."""
        from .base import check_int

        n = check_int("BregmanLowRank.definite_boost", "n", n, low=2)
        scale = check_positive("BregmanLowRank.definite_boost", "scale", scale)
        return cls(np.sqrt(scale) * np.eye(n), constraints, "von_neumann")


def _random_pairs(n: int, c: int, rng: np.random.Generator, G0: np.ndarray) -> np.ndarray:
    """``c`` distinct unordered pairs ``i < j`` with a nonzero distance under ``G0``."""
    seen: set[tuple[int, int]] = set()
    out = []
    tiny = 1e-12 * float(np.sum(G0 * G0)) / n
    tries = 0
    while len(out) < c:
        tries += 1
        if tries > 50 * c + 1000:
            raise ProblemError(f"could not draw {c} distinct pairs of distinct points")
        m = 2 * (c - len(out)) + 8
        a = rng.integers(0, n, m)
        b = rng.integers(0, n, m)
        for i, j in zip(a.tolist(), b.tolist()):
            if i == j:
                continue
            key = (min(i, j), max(i, j))
            if key in seen or float(np.sum((G0[i] - G0[j]) ** 2)) <= tiny:
                continue
            seen.add(key)
            out.append(key)
            if len(out) == c:
                break
    return np.asarray(out, dtype=np.int64)
