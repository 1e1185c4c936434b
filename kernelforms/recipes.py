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
from .problems.factory import canonical_kind, parameters, unset_values

#: the keys of a recipe that say where the points come from (the rest are the problems'
#: build parameters, kernelforms.problems.schema)
DATA_DEFAULTS: dict[str, Any] = {"problem": None, "dataset": None, "data_dir": None,
                                 "n_points": None, "scale": False, "seed": 0}
#: every key of a recipe and its default (the options of ``kernelforms compare``): the data
#: keys, then every problem's build parameters at their "not given" value
RECIPE_DEFAULTS: dict[str, Any] = {**DATA_DEFAULTS, **unset_values()}


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
    problem = build_problem(r["problem"], X, y, seed=r["seed"],
                            **{k: v for k, v in r.items() if k not in DATA_DEFAULTS})
    return problem, X, y


def recipe_name(recipe: dict[str, Any]) -> str:
    """A readable default name: problem, data set, size, seed and the parameters the problem
    uses at values other than their defaults."""
    r = make_recipe(**recipe)
    parts = [r["problem"], r["dataset"]]
    if r["n_points"] is not None:
        parts.append(f"n{r['n_points']}")
    if r["seed"]:
        parts.append(f"s{r['seed']}")
    try:
        used = parameters(canonical_kind(r["problem"]))
    except ProblemError:
        used = {}
    for k, p in used.items():
        if not p.is_default(r[k]):
            parts.append(f"{k}={r[k]}")
    if r["scale"]:
        parts.append("scale=True")
    return "-".join(str(p) for p in parts)
