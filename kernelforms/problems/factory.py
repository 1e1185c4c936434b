"""Build a problem of a named kind from data (used by the CLI and the benchmarks)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ProblemError

from .bregman import BregmanLowRank
from .mvu import MVU, RegMVU
from .npkl import NPKL
from .pcp import PCP, RegPCP
from .schema import Param

#: the problem classes the factory builds, in the order their kinds are listed; each
#: states its kinds (``kind_help``) and build parameters (``parameters``) once
CLASSES = (PCP, RegPCP, MVU, RegMVU, NPKL, BregmanLowRank)
#: problem kinds the CLI knows, with a one-line description
KINDS = {kind: text for cls in CLASSES for kind, text in cls.kind_help.items()}
#: other spellings accepted for a kind (the one spelling is the key of :data:`KINDS`)
ALIASES = {"pcp_hard": "pcp-hard"}


def problem_class(kind: str) -> type:
    """The class that builds ``kind`` (one of :data:`KINDS`)."""
    return next(cls for cls in CLASSES if kind in cls.kind_help)


def parameters(kind: str) -> dict[str, Param]:
    """The build parameters of ``kind``: name -> :class:`~kernelforms.problems.schema.Param`."""
    return {p.name: p for p in problem_class(kind).parameters if p.kinds is None or kind in p.kinds}


def all_parameters() -> dict[str, dict[str, Param]]:
    """Every build parameter: name -> {kind: its Param for that kind}, in declaration order."""
    out: dict[str, dict[str, Param]] = {}
    for kind in KINDS:
        for name, p in parameters(kind).items():
            out.setdefault(name, {})[kind] = p
    return out


def unset_values() -> dict[str, Any]:
    """name -> what "not given" is recorded as (the recipe's and the command line's default)."""
    return {name: next(iter(by_kind.values())).unset for name, by_kind in all_parameters().items()}


def canonical_kind(kind: Any) -> str:
    """``kind`` as a key of :data:`KINDS` (aliases resolved), else a ProblemError with close matches."""
    kind = ALIASES.get(kind, kind) if isinstance(kind, str) else kind
    if kind not in KINDS:
        import difflib

        close = difflib.get_close_matches(str(kind), list(KINDS), n=2)
        raise ProblemError(f"unknown problem {kind!r}; known: {', '.join(KINDS)}"
                           + (f". Did you mean {close[0]!r}?" if close else ""))
    return kind


def resolve(kind: str, params: dict[str, Any], owner: str = "build_problem") -> dict[str, Any]:
    """The values of ``kind``'s parameters from ``params`` (a recipe's or keyword arguments):
    an unknown name, a parameter ``kind`` does not use given a value other than "not given",
    a value the schema refuses, or one used without what it requires, is a ProblemError
    naming the parameter and the fix.  None (where accepted) becomes the kind's default."""
    known = all_parameters()
    unknown = sorted(set(params) - set(known))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(known), n=1)
        raise ProblemError(f"{owner}: unknown parameter(s) {', '.join(map(repr, unknown))}; known: "
                           f"{', '.join(known)}" + (f". Did you mean {close[0]!r}?" if close else ""))
    used = parameters(kind)
    for name, value in params.items():
        if name not in used and not next(iter(known[name].values())).is_unset(value):
            raise ProblemError(f"{owner}: the {name!r} parameter is not used by {kind}; it applies "
                               f"to {', '.join(known[name])} only (leave it out)")
    out: dict[str, Any] = {}
    for name, p in used.items():
        value = params.get(name, p.unset)
        p.check(f"{owner}({kind!r})", value)
        out[name] = p.default if value is None and p.default is not None else value
    for name, p in used.items():
        for other, want in p.requires:
            if not p.is_default(params.get(name, p.unset)) and out.get(other) != want:
                raise ProblemError(f"{owner}: the {name!r} parameter is only used by {kind} with "
                                   f"{other}={want!r}; {other} is {out.get(other)!r} (leave "
                                   f"{name} out)")
    return out


def on_graph(kind: str, L: Any, pairs: Any, values: dict[str, Any]) -> Any:
    """A problem of a pair kind (pcp, pcp-hard, regpcp, npkl) on a given Laplacian ``L``:
    its class's constructor with the kind's parameters that are constructor fields, taken
    from ``values`` (resolved values: :func:`resolve`), and what the kind fixes (pcp-hard:
    ``hard=True``)."""
    return problem_class(kind)(L, pairs, **_fields(kind, values))


def _fields(kind: str, values: dict[str, Any]) -> dict[str, Any]:
    """The constructor arguments of ``kind``: its parameters that are fields of its class,
    and what the kind fixes."""
    import dataclasses

    cls = problem_class(kind)
    fields = {f.name for f in dataclasses.fields(cls)}
    return {**{k: values[k] for k in parameters(kind) if k in fields},
            **getattr(cls, "kind_fixed", {}).get(kind, {})}


def build_problem(kind: str, X: np.ndarray, y: np.ndarray | None = None, *, seed: int = 0,
                  **params: Any) -> Any:
    """Build one of the :data:`KINDS` from points ``X`` and labels ``y``.

    ``params`` are the kind's build parameters (its class's ``parameters``; ``kernelforms
    methods`` and ``kernelforms compare --help`` list them): a parameter the kind does not
    use may be given only at its "not given" value (a recipe holds every key).  Pairs are
    drawn with :func:`kernelforms.pairs.sample_pairs` (0.6 n must-links and 0.6 n
    cannot-links by default) or, with ``per_class=True``, the scheme of Wu et al. 2009.
    Graph defaults follow docs/problems.md: k = 5 (4 for MVU), delta = 0 (0.01 for NPKL).
    ``bregman``: ``n_constraints`` and ``epsilon`` of :meth:`BregmanLowRank.from_data`.
    ``mvu``: ``inequality=True`` builds ``MVU(..., equality=False)`` (distance rows ``<=``).
    """
    kind = canonical_kind(kind)
    v = resolve(kind, params)
    X = np.asarray(X, dtype=float)
    # the instance's fingerprint comes from the constructor called here (from_data, as in
    # Python): the points, the graph's parameters, the pairs drawn and the parameters, never
    # the recipe, so the CLI and Python give one fingerprint for one instance
    from ..data.pairs import per_class_pairs, sample_pairs

    def pairs():
        if y is None:
            raise ProblemError(f"problem {kind!r} needs labels y to draw must-/cannot-link pairs")
        if v["per_class"]:
            return per_class_pairs(y, seed=seed)
        return sample_pairs(y, v["n_must"], v["n_cannot"], seed=seed)

    if kind == "mvu":
        return MVU.from_data(X, k=v["k"], **({"equality": False} if v["inequality"] else {}))
    if kind == "regmvu":
        return RegMVU.from_data(X, k=v["k"], m_basis=v["m_basis"], nu=v["nu"])
    if kind == "bregman":
        if y is None:
            raise ProblemError("problem 'bregman' needs labels y to build its distance constraints")
        return BregmanLowRank.from_data(X, y, rank=v["rank"], divergence=v["divergence"], seed=seed,
                                        n_constraints=v["n_constraints"], epsilon=v["epsilon"])
    # the pair kinds: the graph's parameters, then the constructor's (gamma, loss, b, m_basis)
    return problem_class(kind).from_data(X, pairs(), k=v["k"], delta=v["delta"],
                                         graph_method=v["graph_method"], **_fields(kind, v))


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
