"""Instance recipes: the parameters that rebuild one problem instance.

A recipe is a dict over :data:`RECIPE_DEFAULTS` (the options of ``kernelforms compare``):
the problem, the data set and its size and seed, and the problem's parameters.  Baseline
files (:mod:`kernelforms.testing`), grids (:mod:`kernelforms.grid`) and reports store recipes
so that an instance can be rebuilt exactly; :func:`build_from_recipe` takes the same path as
the command line.
"""

from __future__ import annotations

from typing import Any

from .errors import ProblemError
from .problems.bregman import DEFAULT_EPSILON, DEFAULT_N_CONSTRAINTS, DEFAULT_RANK

#: every key of a recipe and its default (the options of ``kernelforms compare``)
RECIPE_DEFAULTS: dict[str, Any] = {
    "problem": None, "dataset": None, "data_dir": None, "n_points": None, "scale": False,
    "seed": 0, "k": None, "delta": None, "gamma": 1.0, "loss": "hinge", "b": 1.0,
    "m_basis": 10, "nu": 1.0, "n_must": None, "n_cannot": None, "per_class": False,
    "rank": None, "divergence": "burg", "n_constraints": None, "epsilon": None,
    "inequality": False,
}
#: recipe values that name the same instance as the default (a recipe written before the
#: default rank became ``min(16, n, d)`` says 16; 100 constraints and epsilon 0.25 are
#: :meth:`BregmanLowRank.from_data`'s defaults)
_AS_DEFAULT = {"rank": (DEFAULT_RANK,), "n_constraints": (DEFAULT_N_CONSTRAINTS,), "epsilon": (DEFAULT_EPSILON,)}


def make_recipe(**params: Any) -> dict[str, Any]:
    """A complete recipe: ``params`` over :data:`RECIPE_DEFAULTS` (unknown keys are an error)."""
    unknown = sorted(set(params) - set(RECIPE_DEFAULTS))
    if unknown:
        raise ProblemError(f"unknown recipe key(s) {unknown}; known: {', '.join(RECIPE_DEFAULTS)}")
    rec = {**RECIPE_DEFAULTS, **params}
    if not rec["problem"] or not rec["dataset"]:
        raise ProblemError("a recipe needs 'problem' (e.g. 'pcp') and 'dataset' (e.g. 'iris')")
    return rec


def build_from_recipe(recipe: dict[str, Any]) -> Any:
    """Build the problem a recipe describes (the same path as ``kernelforms compare``)."""
    return build_with_data(recipe)[0]


def build_with_data(recipe: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``(problem, X, y)``: the problem a recipe describes and the points it was built from."""
    from .data import datasets
    from .problems.factory import build_problem

    r = make_recipe(**recipe)
    # the CLI's path: generated sets are drawn at n_points, files are subsampled
    # (stratified, seeded) and a size beyond the file is an error
    X, y = datasets.load(r["dataset"], data_dir=r["data_dir"], seed=r["seed"],
                         n_points=r["n_points"], scale=r["scale"])
    problem = build_problem(r["problem"], X, y, seed=r["seed"], k=r["k"], delta=r["delta"],
                            gamma=r["gamma"], loss=r["loss"], b=r["b"], m_basis=r["m_basis"],
                            nu=r["nu"], n_must=r["n_must"], n_cannot=r["n_cannot"],
                            per_class=r["per_class"], rank=r["rank"], divergence=r["divergence"],
                            n_constraints=r["n_constraints"], epsilon=r["epsilon"],
                            inequality=r["inequality"])
    return problem, X, y


def recipe_name(recipe: dict[str, Any]) -> str:
    """A readable default name: problem, data set, size, seed and non-default parameters."""
    r = make_recipe(**recipe)
    parts = [r["problem"], r["dataset"]]
    if r["n_points"] is not None:
        parts.append(f"n{r['n_points']}")
    if r["seed"]:
        parts.append(f"s{r['seed']}")
    for k in ("k", "delta", "gamma", "loss", "b", "m_basis", "nu", "n_must", "n_cannot",
              "per_class", "rank", "divergence", "n_constraints", "epsilon", "scale", "inequality"):
        if (r[k] != RECIPE_DEFAULTS[k] and r[k] not in _AS_DEFAULT.get(k, ())
                and (k != "loss" or r["problem"] == "npkl")):
            parts.append(f"{k}={r[k]}")
    return "-".join(str(p) for p in parts)
