"""One spelling per problem kind: the name a problem reports in params() (hashed into its
fingerprint, written into a report's JSON) is the name the CLI, recipes and the factory take."""

from __future__ import annotations

import numpy as np

import kernelforms as kf
from kernelforms.problems.factory import ALIASES, KINDS, build_problem


def _points():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(2), 8)
    return rng.normal(size=(16, 3)) + 0.5 * y[:, None], y


def test_every_kind_a_problem_reports_is_a_factory_kind():
    X, y = _points()
    for kind in ("pcp", "pcp-hard", "regpcp", "npkl", "mvu", "regmvu"):
        p = build_problem(kind, X, y, **({"m_basis": 3} if kind.startswith("reg") else {}))
        assert p.params()["kind"] == kind, (kind, p.params()["kind"])
    assert kf.PCP.from_data(X, kf.pairs.sample_pairs(y, 4, 4, seed=0), hard=True).params()["kind"] in KINDS


def test_the_other_spelling_is_an_alias_of_the_same_instance():
    X, y = _points()
    assert set(ALIASES.values()) <= set(KINDS)
    assert build_problem("pcp_hard", X, y).fingerprint() == build_problem("pcp-hard", X, y).fingerprint()


def test_a_parameter_the_kind_does_not_use_is_an_error_not_ignored():
    """build_problem refuses a parameter the kind does not use, given at a value other than
    "not given" (was: silently ignored, as the CLI's flags were), and an unknown name."""
    import pytest

    X, y = _points()
    with pytest.raises(kf.ProblemError, match="'m_basis' parameter is not used by pcp; it applies to regpcp, regmvu only"):
        build_problem("pcp", X, y, m_basis=3)
    with pytest.raises(kf.ProblemError, match="unknown parameter.*'gama'.*Did you mean 'gamma'"):
        build_problem("pcp", X, y, gama=3)
    with pytest.raises(kf.ProblemError, match="'b' parameter is only used by npkl with loss='linear'"):
        build_problem("npkl", X, y, b=2.0)
    # the "not given" value of a parameter another kind uses is accepted (a recipe holds every key)
    assert build_problem("pcp", X, y, m_basis=10, rank=None).fingerprint() == build_problem("pcp", X, y).fingerprint()
