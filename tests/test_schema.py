"""The problems' parameter schemas are the one statement of their build parameters: the
factory, the recipes, the command line's flags and the estimator accept exactly the
schema's parameters, with its defaults and ranges (a parameter retyped in one of them, or
added there and not to a class's ``parameters``, fails here)."""

from __future__ import annotations

import argparse
import inspect
import re

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.problems.factory import (CLASSES, KINDS, all_parameters, build_problem, parameters,
                                          resolve, unset_values)

#: the command line's flags of `_problem_args` that are not problem parameters
DATA_FLAGS = {"help", "problem", "dataset", "data_dir", "n_points", "scale", "seed", "max_memory"}
#: KernelLearner's own parameters (not the problems')
ESTIMATOR_OWN = {"problem", "method", "extension", "method_options", "random_state", "unlabeled",
                 "verbose", "n_jobs"}


def _problem_parser() -> argparse.ArgumentParser:
    from kernelforms.cli.args import _problem_args

    p = argparse.ArgumentParser(exit_on_error=False)
    _problem_args(p)
    return p


def test_each_kind_has_one_class_and_a_name_means_one_thing():
    assert list(KINDS) == ["pcp", "pcp-hard", "regpcp", "mvu", "regmvu", "npkl", "bregman"]
    for name, by_kind in all_parameters().items():
        # one parameter name, one set of accepted values and one help text, whichever class
        assert len({repr(p.accepts) for p in by_kind.values()}) == 1, name
        assert len({p.help for p in by_kind.values()}) == 1, name
        for p in by_kind.values():
            assert p.matches(p.default) and p.matches(p.unset), name
    for cls in CLASSES:
        assert cls.kind in cls.kind_help and all(p.kinds is None or set(p.kinds) <= set(cls.kind_help)
                                                 for p in cls.parameters)


def test_the_cli_flags_are_the_schema():
    parser = _problem_parser()
    flags = {a.dest: a for a in parser._actions}
    assert set(flags) - DATA_FLAGS == set(all_parameters())
    from kernelforms.cli.args import FLAG_PROBLEMS

    assert FLAG_PROBLEMS == {name: tuple(by_kind) for name, by_kind in all_parameters().items()}
    for name, by_kind in all_parameters().items():
        p, action = next(iter(by_kind.values())), flags[name]
        assert action.default is None and action.option_strings == [p.flag]
        if p.is_switch:
            assert isinstance(action, argparse._StoreTrueAction), name
        elif p.choices:
            assert list(action.choices) == list(p.choices), name
        else:  # the schema's range: its default parses, out-of-range values do not
            assert action.type(str(p.default if p.default is not None else 3)) is not None
            for bad in ("nan", "inf", "x", "-1.5"):
                with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"must be {p.describe(False)}")):
                    action.type(bad)


def test_the_recipe_keys_are_the_data_keys_and_the_schema():
    from kernelforms.recipes import DATA_DEFAULTS, RECIPE_DEFAULTS

    assert {k: v for k, v in RECIPE_DEFAULTS.items() if k not in DATA_DEFAULTS} == unset_values()
    assert set(unset_values()) == set(all_parameters())


def test_the_factory_takes_the_schema_and_nothing_else():
    sig = inspect.signature(build_problem).parameters
    # no retyped keyword list: the kind, the data, the seed, then the schema's parameters
    assert list(sig) == ["kind", "X", "y", "seed", "params"]
    assert sig["params"].kind is inspect.Parameter.VAR_KEYWORD
    for kind in KINDS:
        assert set(resolve(kind, {})) == set(parameters(kind)), kind
        with pytest.raises(kf.ProblemError, match="unknown parameter"):
            resolve(kind, {"no_such_parameter": 1})
        for name, p in parameters(kind).items():
            if p.number is not None:  # a value out of the schema's range names the parameter
                with pytest.raises(kf.ProblemError, match=f"'{name}' parameter of build_problem"):
                    resolve(kind, {name: -5})
            elif p.choices:
                with pytest.raises(kf.ProblemError, match=f"'{name}' parameter of build_problem.*one of"):
                    resolve(kind, {name: "no-such-choice"})


def test_the_estimator_takes_the_schema_of_its_problems():
    from kernelforms.estimator import (OWN_DEFAULTS, PROBLEMS, RENAMED, KernelLearner,
                                       problem_parameters)

    sig = inspect.signature(KernelLearner.__init__).parameters
    mine = {RENAMED.get(name, name): next(iter(by_kind.values()))
            for name, by_kind in all_parameters().items() if set(by_kind) & set(PROBLEMS)}
    assert set(sig) - {"self"} == set(mine) | ESTIMATOR_OWN
    for name, p in mine.items():
        assert sig[name].default == OWN_DEFAULTS.get(name, p.unset), name
        cons = KernelLearner._parameter_constraints[name]
        assert cons == problem_parameters()[name] and cons[:len(p.accepts)] == list(p.accepts), name
    assert set(KernelLearner._parameter_constraints) == set(sig) - {"self"}
    assert set(PROBLEMS) <= set(KINDS)


def test_the_estimators_new_schema_parameters_reach_the_problem():
    """per_class and inequality (in the schema, so the estimator takes them): Wu et al.'s 20
    pairs per class and class pair, and MVU's distance rows <=."""
    from kernelforms.estimator import KernelLearner

    X, y = kf.datasets.load("iris")
    pairs = KernelLearner(problem="regpcp", per_class=True)._pairs(y, None, len(y), 0)
    assert (pairs.n_must, pairs.n_cannot) == (60, 60)  # 3 classes, 3 class pairs
    Xr = np.random.default_rng(0).normal(size=(30, 3))
    mvu = KernelLearner(problem="mvu", inequality=True, n_neighbors=None)._build(Xr, None, None)
    assert mvu.equality is False and len(mvu.edges) == len(kf.graphs.knn_edges(Xr, k=4)[0])
