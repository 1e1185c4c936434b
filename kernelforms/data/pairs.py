"""Must-link / cannot-link side information.

A :class:`Pairs` holds two sets of **unordered** pairs ``{i, j}``, ``i != j``, stored
with ``i < j`` and sorted lexicographically (docs/problems.md, "Conventions shared by all problems"). It is
immutable and validated on construction.
"""

from __future__ import annotations

import hashlib
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelforms.errors import ProblemError, param_error

__all__ = ["Pairs", "sample_pairs", "per_class_pairs", "inconsistent_pairs"]

_EMPTY = np.zeros((0, 2), dtype=np.int64)
_INT64_MAX = np.iinfo(np.int64).max


def _fmt(p) -> str:
    return f"({int(p[0])}, {int(p[1])})"


def _normalise(arr: Any, what: str, n: int | None) -> np.ndarray:
    """Validate one pair array; return a read-only sorted (k, 2) int64 array."""
    label = f"{what}-link pairs ({what!r})"
    if arr is None:
        return _EMPTY
    if isinstance(arr, (str, bytes, dict, set, frozenset)):
        raise ProblemError(f"{label} must be an array-like of shape (k, 2); got a "
                           f"{type(arr).__name__}. Pass e.g. [[0, 1], [2, 5]].")
    try:
        a = np.asarray(arr)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ProblemError(f"{label} must be an array-like of shape (k, 2) with the same "
                           f"length in every row: {exc}") from exc
    if a.size == 0 and (a.ndim == 1 or (a.ndim == 2 and a.shape[1] in (0, 2))):
        return _EMPTY
    if a.ndim != 2 or a.shape[1] != 2:
        raise ProblemError(f"{label} must have shape (k, 2), one row per pair; got shape "
                           f"{a.shape}. For a single pair write [[i, j]].")
    if a.dtype == bool:
        raise ProblemError(f"{label} must hold integer indices; got booleans. "
                           "Pass point indices, not a mask.")
    if a.dtype.kind in "iu":
        if a.dtype.kind == "u" and a.size and a.max() > _INT64_MAX:
            raise ProblemError(f"{label}: index {int(a.max())} is too large.")
        out = a.astype(np.int64)
    elif a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.round(a)) | (np.abs(a) > 2.0**62)
        if bad.any():
            r = int(np.argwhere(bad)[0][0])
            raise ProblemError(f"{label} must hold integer indices; row {r} is "
                               f"{a[r].tolist()}. Use whole numbers (no NaN, inf or "
                               "fractions).")
        out = a.astype(np.int64)
    elif a.dtype.kind == "O":
        try:
            flat = a.ravel()
            ok = all(isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
                     for v in flat)
        except TypeError:  # pragma: no cover
            ok = False
        if not ok:
            raise ProblemError(f"{label} must hold integer indices; got values of types "
                               f"{sorted({type(v).__name__ for v in a.ravel()})}.")
        if any(v > _INT64_MAX or v < -_INT64_MAX for v in flat):
            raise ProblemError(f"{label}: an index does not fit in 64 bits.")
        out = a.astype(np.int64)
    else:
        raise ProblemError(f"{label} must hold integer indices; got dtype {a.dtype}.")
    neg = out < 0
    if neg.any():
        r = int(np.argwhere(neg)[0][0])
        raise ProblemError(f"{label}: pair {_fmt(out[r])} at row {r} has a negative "
                           "index; indices are 0-based point numbers.")
    if n is not None:
        big = out >= n
        if big.any():
            r = int(np.argwhere(big)[0][0])
            raise ProblemError(f"{label}: pair {_fmt(out[r])} at row {r} has an index "
                               f">= n = {n}; indices must be in 0..{n - 1}.")
    self_pair = out[:, 0] == out[:, 1]
    if self_pair.any():
        r = int(np.argmax(self_pair))
        raise ProblemError(f"{label}: pair {_fmt(out[r])} at row {r} is a self pair "
                           "(i, i); remove it (the diagonal is handled by the problem).")
    out = np.sort(out, axis=1)
    order = np.lexsort((out[:, 1], out[:, 0]))
    out = out[order]
    dup = np.all(out[1:] == out[:-1], axis=1)
    if dup.any():
        p = out[1:][dup][0]
        raise ProblemError(f"{label}: pair {_fmt(p)} is listed more than once ((i, j) "
                           "and (j, i) are the same pair); list each pair once.")
    out = np.ascontiguousarray(out)
    out.flags.writeable = False
    return out


def _check_n(n) -> int | None:
    if n is None:
        return None
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral) or n < 0:
        raise param_error("Pairs", "n", "a non-negative integer or None", n)
    return int(n)


@dataclass(frozen=True, eq=False, init=False)
class Pairs:
    """Validated, immutable must-link and cannot-link pairs.

    Parameters
    ----------
    must, cannot : array-like of shape (k, 2), or None
        Pairs of point indices; ``None`` or an empty list means none. Integer arrays,
        and float arrays holding whole numbers (e.g. read from JSON or CSV), are
        accepted; booleans, fractions, NaN/inf and strings are rejected. Each pair is
        stored as ``(min, max)`` and the rows are sorted lexicographically.
    n : int, optional
        Number of points; when given every index must be < n.

    Raises
    ------
    ProblemError
        Wrong shape, non-integer or negative index, index >= n, self pair ``(i, i)``,
        a pair listed twice (also as ``(i, j)`` and ``(j, i)``), or a pair that is
        both must-link and cannot-link. The message names ``'must'`` or ``'cannot'``
        and the offending pair.

    Notes
    -----
    Equality and hashing compare ``must``, ``cannot`` and ``n``. Pickling
    re-validates.
    """

    must: np.ndarray
    cannot: np.ndarray
    n: int | None = None

    def __init__(self, must=None, cannot=None, n=None):
        n = _check_n(n)
        m = _normalise(must, "must", n)
        c = _normalise(cannot, "cannot", n)
        if len(m) and len(c):
            both = np.isin(_row_view(m), _row_view(c))
            if both.any():
                p = m[int(np.argmax(both))]
                raise ProblemError(f"Pair {_fmt(p)} is both a must-link ('must') and a "
                                   "cannot-link ('cannot') pair; remove it from one.")
        object.__setattr__(self, "must", m)
        object.__setattr__(self, "cannot", c)
        object.__setattr__(self, "n", n)

    # ------------------------------------------------------------------ properties
    @property
    def n_must(self) -> int:
        """Number of must-link pairs."""
        return int(self.must.shape[0])

    @property
    def n_cannot(self) -> int:
        """Number of cannot-link pairs."""
        return int(self.cannot.shape[0])

    def __len__(self) -> int:
        return self.n_must + self.n_cannot

    @property
    def indices(self) -> np.ndarray:
        """All pairs, shape (p, 2): must-links first, then cannot-links (read-only)."""
        out = np.concatenate([self.must, self.cannot], axis=0)
        out.flags.writeable = False
        return out

    @property
    def signs(self) -> np.ndarray:
        """Shape (p,) float64: +1.0 for must-links, -1.0 for cannot-links, as in
        :attr:`indices` (read-only)."""
        out = np.concatenate([np.ones(self.n_must), -np.ones(self.n_cannot)])
        out.flags.writeable = False
        return out

    @property
    def max_index(self) -> int:
        """Largest index in any pair, or -1 when there are no pairs."""
        if len(self) == 0:
            return -1
        return int(max(self.must.max(initial=-1), self.cannot.max(initial=-1)))

    def check_n(self, n: int) -> "Pairs":
        """Check that every index is < n.

        Parameters
        ----------
        n : int
            Number of points.

        Returns
        -------
        Pairs
            ``self``, for chaining.

        Raises
        ------
        ProblemError
            If an index is >= n (the message names n and the pair).
        """
        n = _check_n(n)
        for what, arr in (("must", self.must), ("cannot", self.cannot)):
            big = arr >= n
            if big.any():
                r = int(np.argwhere(big)[0][0])
                raise ProblemError(
                    f"{what}-link pairs ({what!r}): pair {_fmt(arr[r])} has an index "
                    f">= n = {n}; the problem has only {n} points (0..{n - 1})."
                )
        return self

    # --------------------------------------------------------------- serialising
    def to_dict(self) -> dict:
        """JSON-friendly dict ``{"must": [[i, j], ...], "cannot": [...], "n": n}``."""
        return {"must": self.must.tolist(), "cannot": self.cannot.tolist(), "n": self.n}

    @classmethod
    def from_dict(cls, d: dict) -> "Pairs":
        """Inverse of :meth:`to_dict` (missing keys mean no pairs / n unknown).

        Raises
        ------
        ProblemError
            If ``d`` is not a dict, has unknown keys, or its pairs are invalid.
        """
        if not isinstance(d, dict):
            raise ProblemError(f"Pairs.from_dict needs a dict; got {type(d).__name__}.")
        extra = set(d) - {"must", "cannot", "n"}
        if extra:
            raise ProblemError(f"Pairs.from_dict: unknown keys {sorted(map(str, extra))}; "
                               "expected 'must', 'cannot', 'n'.")
        return cls(d.get("must"), d.get("cannot"), d.get("n"))

    def fingerprint(self) -> str:
        """Short (12 hex digits) SHA-1 of the contents (pairs and n)."""
        h = hashlib.sha1()
        h.update(b"must")
        h.update(self.must.astype("<i8").tobytes())
        h.update(b"cannot")
        h.update(self.cannot.astype("<i8").tobytes())
        h.update(f"n={self.n}".encode())
        return h.hexdigest()[:12]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pairs):
            return NotImplemented
        return (self.n == other.n and np.array_equal(self.must, other.must)
                and np.array_equal(self.cannot, other.cannot))

    def __hash__(self) -> int:
        return hash((self.must.tobytes(), self.cannot.tobytes(), self.n_must, self.n))

    def __repr__(self) -> str:
        return f"Pairs(n_must={self.n_must}, n_cannot={self.n_cannot}, n={self.n})"

    def __reduce__(self):
        return (Pairs, (self.must.copy(), self.cannot.copy(), self.n))


def _row_view(a: np.ndarray) -> np.ndarray:
    """Each (i, j) row as one opaque item, for set operations on rows."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    return a.view(np.dtype((np.void, 16))).ravel()


# ------------------------------------------------------------------------ sampling


def _labels(y) -> tuple[np.ndarray, np.ndarray]:
    try:
        arr = np.asarray(y)
    except (ValueError, TypeError) as exc:
        raise ProblemError(f"y must be a 1-d array of class labels: {exc}") from exc
    if arr.ndim != 1 or arr.shape[0] < 2:
        raise ProblemError(f"y must be a 1-d array of at least 2 labels; got shape "
                           f"{arr.shape}.")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ProblemError("y contains NaN or infinite labels.")
    try:
        classes, inv = np.unique(arr, return_inverse=True)
    except TypeError as exc:
        raise ProblemError(f"y labels must be comparable: {exc}") from exc
    return classes, inv.ravel().astype(np.int64)


def _count(owner: str, name: str, value, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) \
            or value < 0:
        raise param_error(owner, name, "a non-negative integer or None", value)
    return int(value)


def _tri_decode(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear index p over pairs (a < b), ordered by b then a: p = b(b-1)/2 + a."""
    b = np.floor((1.0 + np.sqrt(1.0 + 8.0 * p.astype(np.float64))) / 2.0).astype(np.int64)
    b -= (b * (b - 1) // 2 > p)
    b += ((b + 1) * b // 2 <= p)
    a = p - b * (b - 1) // 2
    return a, b


def _choice(rng: np.random.Generator, total: int, size: int) -> np.ndarray:
    """``size`` distinct integers from range(total), uniformly, int64."""
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(rng.choice(total, size=size, replace=False), dtype=np.int64)


def _within_groups(members: list[np.ndarray], counts: np.ndarray, size: int,
                   rng) -> np.ndarray:
    """``size`` distinct pairs drawn uniformly from the union of within-group pairs."""
    sizes = counts * (counts - 1) // 2
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    p = _choice(rng, int(offsets[-1]), size)
    g = np.searchsorted(offsets, p, side="right") - 1
    a, b = _tri_decode(p - offsets[g])
    out = np.empty((size, 2), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    flat = np.concatenate(members) if members else np.zeros(0, dtype=np.int64)
    out[:, 0] = flat[starts[g] + a]
    out[:, 1] = flat[starts[g] + b]
    return out


def _between_groups(inv: np.ndarray, n_classes: int, size: int, available: int,
                    rng) -> np.ndarray:
    """``size`` distinct different-class pairs, uniformly at random.

    Draws i with probability proportional to its number of different-class partners,
    then j uniformly among the points of other classes: every unordered
    different-class pair is equally likely. Duplicates are dropped in vectorised
    batches until ``size`` distinct pairs are found (the first ``size`` distinct draws
    form a uniform random subset).
    """
    n = inv.shape[0]
    if size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    order = np.argsort(inv, kind="stable")
    counts = np.bincount(inv, minlength=n_classes).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    if 2 * size > available:
        # dense request: enumerate all (at most 2 * size) different-class pairs
        blocks = []
        for c in range(n_classes):
            a = order[starts[c]:starts[c + 1]]
            b = order[starts[c + 1]:]
            if a.size and b.size:
                blocks.append(np.column_stack([np.repeat(a, b.size), np.tile(b, a.size)]))
        allp = np.concatenate(blocks)
        return allp[_choice(rng, allp.shape[0], size)]
    w = (n - counts[inv]).astype(np.float64)
    w /= w.sum()
    got = np.zeros(0, dtype=np.int64)
    while got.size < size:
        batch = int((size - got.size) * 1.3) + 64
        i = rng.choice(n, size=batch, p=w)
        ci = inv[i]
        r = (rng.random(batch) * (n - counts[ci])).astype(np.int64)
        r = np.minimum(r, n - counts[ci] - 1)
        pos = np.where(r < starts[ci], r, r + counts[ci])
        j = order[pos]
        keys = np.minimum(i, j) * n + np.maximum(i, j)
        allk = np.concatenate([got, keys])
        _, first = np.unique(allk, return_index=True)
        got = allk[np.sort(first)]
    got = got[:size]
    return np.column_stack([got // n, got % n])


def sample_pairs(y, n_must: int | None = None, n_cannot: int | None = None,
                 seed=0) -> Pairs:
    """Random must-link pairs within classes and cannot-link pairs across classes.

    Each set is a uniformly random set of distinct pairs (no self pairs, no
    duplicates), as in Hu & Kwok 2013, Section 4.1 and Hu & Kwok 2015, Section IV.

    Parameters
    ----------
    y : array-like of shape (n,)
        Class labels.
    n_must, n_cannot : int, optional
        Number of pairs; default ``round(0.6 n)`` each.
    seed : int or numpy.random.Generator, default 0
        Passed to :func:`numpy.random.default_rng`.

    Returns
    -------
    Pairs
        With ``n = len(y)``.

    Raises
    ------
    ProblemError
        If more pairs are requested than exist (the message gives the maximum).
    """
    classes, inv = _labels(y)
    n = inv.shape[0]
    default = int(round(0.6 * n))
    n_must = _count("sample_pairs", "n_must", n_must, default)
    n_cannot = _count("sample_pairs", "n_cannot", n_cannot, default)
    counts = np.bincount(inv, minlength=len(classes)).astype(np.int64)
    same = int(np.sum(counts * (counts - 1) // 2))
    diff = n * (n - 1) // 2 - same
    if n_must > same:
        raise ProblemError(f"sample_pairs: {n_must} must-link pairs requested but y has "
                           f"only {same} same-class pairs; lower n_must.")
    if n_cannot > diff:
        raise ProblemError(f"sample_pairs: {n_cannot} cannot-link pairs requested but y "
                           f"has only {diff} different-class pairs; lower n_cannot.")
    from ..util import as_rng

    rng = as_rng("sample_pairs", seed)
    order = np.argsort(inv, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    members = [order[starts[c]:starts[c + 1]] for c in range(len(classes))]
    must = _within_groups(members, counts, n_must, rng)
    cannot = _between_groups(inv, len(classes), n_cannot, diff, rng)
    return Pairs(must, cannot, n=n)


def per_class_pairs(y, must_per_class: int = 20, cannot_per_class_pair: int = 20,
                    seed=0) -> Pairs:
    """A fixed number of must-links in each class and cannot-links per class pair.

    The scheme of Wu et al. 2009, Section 4: 20 similarity constraints for each class and 20
    dissimilarity constraints for every two classes (1100 pairs for 10 classes).

    Parameters
    ----------
    y : array-like of shape (n,)
    must_per_class : int, default 20
        Distinct same-class pairs drawn uniformly in each class.
    cannot_per_class_pair : int, default 20
        Distinct pairs drawn uniformly between each unordered pair of classes.
    seed : int or numpy.random.Generator, default 0

    Returns
    -------
    Pairs
        With ``n = len(y)``.

    Raises
    ------
    ProblemError
        If a class (or class pair) has fewer pairs than requested.
    """
    classes, inv = _labels(y)
    n = inv.shape[0]
    km = _count("per_class_pairs", "must_per_class", must_per_class, 20)
    kc = _count("per_class_pairs", "cannot_per_class_pair", cannot_per_class_pair, 20)
    from ..util import as_rng

    rng = as_rng("per_class_pairs", seed)
    order = np.argsort(inv, kind="stable")
    counts = np.bincount(inv, minlength=len(classes)).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    members = [order[starts[c]:starts[c + 1]] for c in range(len(classes))]
    must_blocks, cannot_blocks = [], []
    for c, mem in enumerate(members):
        avail = mem.size * (mem.size - 1) // 2
        if km > avail:
            raise ProblemError(f"per_class_pairs: class {classes[c]!r} has {mem.size} "
                               f"points, so only {avail} must-link pairs, fewer than "
                               f"must_per_class = {km}; lower must_per_class.")
        a, b = _tri_decode(_choice(rng, avail, km))
        must_blocks.append(np.column_stack([mem[a], mem[b]]))
    for c in range(len(classes)):
        for e in range(c + 1, len(classes)):
            ma, mb = members[c], members[e]
            p = _choice(rng, ma.size * mb.size, min(kc, ma.size * mb.size))
            if p.size < kc:
                raise ProblemError(f"per_class_pairs: classes {classes[c]!r} and "
                                   f"{classes[e]!r} have only {ma.size * mb.size} pairs, "
                                   f"fewer than cannot_per_class_pair = {kc}.")
            cannot_blocks.append(np.column_stack([ma[p // mb.size], mb[p % mb.size]]))
    must = np.concatenate(must_blocks) if must_blocks else None
    cannot = np.concatenate(cannot_blocks) if cannot_blocks else None
    return Pairs(must, cannot, n=n)


def inconsistent_pairs(pairs: Pairs) -> list[tuple[int, int]]:
    """Cannot-link pairs whose ends are joined by a chain of must-links.

    Such a pair makes the hard problem (P2) infeasible.

    Parameters
    ----------
    pairs : Pairs

    Returns
    -------
    list of (int, int)
        The offending cannot-link pairs ``(i, j)``, ``i < j``, in sorted order.
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    if not isinstance(pairs, Pairs):
        raise ProblemError(f"inconsistent_pairs needs a Pairs; got {type(pairs).__name__}.")
    if pairs.n_must == 0 or pairs.n_cannot == 0:
        return []
    size = pairs.max_index + 1
    m = pairs.must
    G = sp.coo_matrix((np.ones(len(m)), (m[:, 0], m[:, 1])), shape=(size, size))
    _, comp = connected_components(G, directed=False)
    c = pairs.cannot
    bad = comp[c[:, 0]] == comp[c[:, 1]]
    return [(int(i), int(j)) for i, j in c[bad]]
