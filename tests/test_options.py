"""Method options, generated from the declarations.

Every hand-written solver declares its options once (``defaults`` beside
``parameter_constraints``, see :mod:`kernelforms.solvers.options`).  The tests here are
generated from those declarations: every default satisfies its own declaration, and every
value :func:`~kernelforms.solvers.options.invalid_examples` derives from a declaration is
refused with an :class:`~kernelforms.errors.OptionError` naming the option, before the
solver starts any work.  A new option is tested by declaring it.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.errors import OptionError
from kernelforms.methods import SOLVERS, get_method
from kernelforms.solvers.options import check_option, describe, invalid_examples


def _instances():
    rng = np.random.default_rng(3)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    y = np.repeat(np.arange(3), 8)
    X = centers[y] + rng.normal(scale=0.6, size=(24, 2))
    P = kf.pairs.sample_pairs(y, 8, 8, seed=2)
    out = [kf.PCP.from_data(X, P), kf.PCP.from_data(X, P, hard=True)]
    out += [kf.NPKL.from_data(X, P, loss=loss) for loss in ("hinge", "square")]
    t = np.linspace(0, 1, 24)
    out.append(kf.MVU.from_data(np.c_[t, np.sin(3 * t)], k=4))
    Xb = np.c_[X, rng.normal(size=(24, 2))]
    out.append(kf.BregmanLowRank.from_data(Xb, y, rank=3, n_constraints=10, seed=0))
    out.append(kf.BregmanLowRank.from_data(Xb, y, rank=3, n_constraints=10, seed=0,
                                           divergence="von_neumann"))
    return out


INSTANCES = _instances()


def _instance_for(method):
    for p in INSTANCES:
        if method.applies_to(p) is None:
            return p
    pytest.skip(f"no test instance that {method.name!r} applies to")


def _cases():
    for name in SOLVERS:
        cls = type(get_method(name))
        for opt in cls.defaults:
            yield name, opt


@pytest.mark.parametrize("name", list(SOLVERS))
def test_every_option_is_declared_and_its_default_satisfies_it(name):
    m = get_method(name)
    missing = sorted(set(m.defaults) - set(m.parameter_constraints))
    assert not missing, f"{name}: options without a declaration: {missing}"
    extra = sorted(set(m.parameter_constraints) - set(m.defaults))
    assert not extra, f"{name}: declarations without a default: {extra}"
    p = _instance_for(m)
    for opt, default in m.defaults.items():
        check_option(name, opt, default, m.parameter_constraints[opt], n=p.n)


@pytest.mark.parametrize("name,opt", list(_cases()))
def test_invalid_option_values_are_refused_before_any_work(name, opt, monkeypatch):
    m = get_method(name)
    constraints = m.parameter_constraints.get(opt)
    if constraints is None:
        pytest.fail(f"{name}: option {opt!r} has no declaration")
    p = _instance_for(m)

    def no_work(*a, **k):
        raise AssertionError("the solver started work on an invalid option")

    monkeypatch.setattr(type(m), "_solve", no_work)
    bad_values = invalid_examples(constraints, n=p.n)
    assert bad_values, f"{name}.{opt}: the declaration admits everything"
    for bad in bad_values:
        with pytest.raises(OptionError) as exc:
            m.run(p, **{opt: bad})
        msg = str(exc.value)
        assert f"'{opt}'" in msg and name in msg, msg


def test_the_message_shape_names_the_option_and_what_is_expected():
    from numbers import Real

    from kernelforms.solvers.options import Interval

    c = [Interval(Real, 0, None, closed="neither")]
    assert describe(c) == "a float > 0"
    with pytest.raises(OptionError, match=r"The 'rho' option of admm must be a float > 0\. Got nan instead\."):
        check_option("admm", "rho", float("nan"), c)


@pytest.mark.parametrize("bad", ["yes", -1, None, 1.5])
def test_verbose_must_be_a_bool(small_pcp, bad):
    with pytest.raises(OptionError, match="'verbose'"):
        kf.solve(small_pcp, "admm", verbose=bad)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_verbose_prints_an_iteration_table(name, capsys):
    """`solve(P, "admm", verbose=True)` was an error, and a long solve printed nothing."""
    import warnings

    m = get_method(name)
    p = _instance_for(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = m.run(p, verbose=True, time_limit=20)
    out = capsys.readouterr().out
    assert "iter" in out and "objective" in out, out
    assert f" {name}: {res.status.value} after" in out, out
    quiet = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quiet = m.run(p, time_limit=20)
    assert capsys.readouterr().out == "" and quiet.status == res.status
