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
        p = build_problem(kind, X, y, m_basis=3)
        assert p.params()["kind"] == kind, (kind, p.params()["kind"])
    assert kf.PCP.from_data(X, kf.pairs.sample_pairs(y, 4, 4, seed=0), hard=True).params()["kind"] in KINDS


def test_the_other_spelling_is_an_alias_of_the_same_instance():
    X, y = _points()
    assert set(ALIASES.values()) <= set(KINDS)
    assert build_problem("pcp_hard", X, y).fingerprint() == build_problem("pcp-hard", X, y).fingerprint()
