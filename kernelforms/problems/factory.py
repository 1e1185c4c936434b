"""Build a problem of a named kind from data (used by the CLI and the benchmarks)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ProblemError

#: problem kinds the CLI knows, with a one-line description
KINDS = {
    "pcp": "P1 soft PCP (squared loss, gamma)",
    "pcp-hard": "P2 hard PCP",
    "regpcp": "P3 RegPCP (m_basis)",
    "mvu": "P4 MVU (k = 4)",
    "regmvu": "P5 RegMVU (m_basis, nu)",
    "npkl": "P6 NPKL (loss, gamma, b)",
    "bregman": "P7 Bregman low-rank (divergence, rank)",
}
#: other spellings accepted for a kind (the one spelling is the key of :data:`KINDS`)
ALIASES = {"pcp_hard": "pcp-hard"}


def build_problem(kind: str, X: np.ndarray, y: np.ndarray | None = None, *, seed: int = 0,
                  k: int | None = None, delta: float | None = None, gamma: float = 1.0,
                  loss: str = "hinge", b: float = 1.0, m_basis: int = 10, nu: float = 1.0,
                  n_must: int | None = None, n_cannot: int | None = None,
                  per_class: bool = False, rank: int | None = None, divergence: str = "burg",
                  n_constraints: int | None = None, epsilon: float | None = None,
                  inequality: bool = False) -> Any:
    """Build one of the :data:`KINDS` from points ``X`` and labels ``y``.

    Pairs are drawn with :func:`kernelforms.pairs.sample_pairs` (0.6 n must-links and
    0.6 n cannot-links by default) or, with ``per_class=True``, the scheme of Wu et al. 2009.
    Graph defaults follow docs/problems.md: k = 5 (4 for MVU), delta = 0 (0.01 for NPKL).
    ``bregman``: ``n_constraints`` and ``epsilon`` of :meth:`BregmanLowRank.from_data`
    (None: its defaults, 100 and 0.25; given equal to them, the same instance).
    ``mvu``: ``inequality=True`` builds ``MVU(..., equality=False)`` (distance rows ``<=``).
    """
    kind = ALIASES.get(kind, kind)
    if kind not in KINDS:
        import difflib

        close = difflib.get_close_matches(kind, list(KINDS), n=2)
        raise ProblemError(f"unknown problem {kind!r}; known: {', '.join(KINDS)}"
                           + (f". Did you mean {close[0]!r}?" if close else ""))
    if inequality and kind != "mvu":
        raise ProblemError(f"inequality=True (distance rows <=) applies to mvu only; the problem is {kind}")
    X = np.asarray(X, dtype=float)
    # the defaults given explicitly build (and fingerprint) the default instance
    from .bregman import DEFAULT_EPSILON, DEFAULT_N_CONSTRAINTS

    if n_constraints is not None and not isinstance(n_constraints, bool) and n_constraints == DEFAULT_N_CONSTRAINTS:
        n_constraints = None
    if epsilon is not None and not isinstance(epsilon, bool) and epsilon == DEFAULT_EPSILON:
        epsilon = None
    # the instance's fingerprint comes from the constructor _build calls (from_data, as in
    # Python): the points, the graph's parameters, the pairs drawn and the parameters, never
    # the recipe, so the CLI and Python give one fingerprint for one instance
    return _build(kind, X, y, seed=seed, k=k, delta=delta, gamma=gamma, loss=loss, b=b,
                  m_basis=m_basis, nu=nu, n_must=n_must, n_cannot=n_cannot, per_class=per_class,
                  rank=rank, divergence=divergence, n_constraints=n_constraints, epsilon=epsilon,
                  inequality=inequality)


def _build(kind: str, X: np.ndarray, y: np.ndarray | None, *, seed: int, k: int | None,
           delta: float | None, gamma: float, loss: str, b: float, m_basis: int, nu: float,
           n_must: int | None, n_cannot: int | None, per_class: bool, rank: int | None,
           divergence: str, n_constraints: int | None, epsilon: float | None,
           inequality: bool = False) -> Any:
    from ..data.pairs import per_class_pairs, sample_pairs
    from . import MVU, NPKL, PCP, BregmanLowRank, RegMVU, RegPCP

    def pairs():
        if y is None:
            raise ProblemError(f"problem {kind!r} needs labels y to draw must-/cannot-link pairs")
        if per_class:
            return per_class_pairs(y, seed=seed)
        return sample_pairs(y, n_must, n_cannot, seed=seed)

    if kind in ("mvu", "regmvu"):
        cls = MVU if kind == "mvu" else RegMVU
        extra = {"equality": False} if kind == "mvu" and inequality else {}
        if kind == "regmvu":
            extra = {"m_basis": m_basis, "nu": nu}
        return cls.from_data(X, k=4 if k is None else k, **extra)
    if kind == "bregman":
        if y is None:
            raise ProblemError("problem 'bregman' needs labels y to build its distance constraints")
        if not hasattr(BregmanLowRank, "from_data"):
            raise ProblemError("BregmanLowRank.from_data is not available in this version")
        kw = {"rank": rank, "divergence": divergence, "seed": seed}
        if n_constraints is not None:
            kw["n_constraints"] = n_constraints
        if epsilon is not None:
            kw["epsilon"] = epsilon
        return BregmanLowRank.from_data(X, y, **kw)
    kk = 5 if k is None else k
    if kind == "npkl":
        return NPKL.from_data(X, pairs(), k=kk, delta=delta, loss=loss, gamma=gamma, b=b)
    if kind == "regpcp":
        return RegPCP.from_data(X, pairs(), k=kk, delta=delta, m_basis=m_basis)
    return PCP.from_data(X, pairs(), k=kk, delta=delta, gamma=gamma, hard=(kind == "pcp-hard"))


def subsample(X: np.ndarray, y: np.ndarray | None, n_points: int, seed: int = 0):
    """A class-stratified random subset of ``n_points`` rows (all rows if fewer)."""
    n = X.shape[0]
    if n_points >= n:
        return X, y
    rng = np.random.default_rng(seed)
    if y is None:
        idx = np.sort(rng.choice(n, n_points, replace=False))
        return X[idx], None
    from sklearn.model_selection import train_test_split

    idx, _ = train_test_split(np.arange(n), train_size=n_points, stratify=y,
                              random_state=int(rng.integers(2**31 - 1)))
    idx = np.sort(idx)
    return X[idx], y[idx]
