"""The scikit-learn estimators' parameter kinds and input checks (:mod:`kernelforms.estimator`):
kinds of constructor parameters beyond the problems' schema (a method name, an options dict, a
random state, a label, an estimator), the check of every constructor parameter before any
work, and scikit-learn's data validation re-raised as kernelforms errors."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from .errors import OptionError, ProblemError
from .solvers.options import StrOptions, describe


class InputError(ProblemError, TypeError):
    """Bad ``X`` or ``y`` (NaN, sparse, wrong shape or number of features...).

    Carries scikit-learn's own validation message; it is a ``ValueError`` and a
    ``TypeError`` so that code catching either (and scikit-learn's checks) works.
    """


class _MethodName:
    """A method name for :func:`kernelforms.solve` ("auto", "sdp", "sdp:scs", "bcd", ...)."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        return isinstance(v, str) and bool(v.strip())

    def describe(self) -> str:
        return "'auto' or a method name such as 'lowrank', 'admm', 'bcd', 'sdp' or 'sdp:scs'"

    def invalid(self) -> list[Any]:
        return ["", 3]


class _Options:
    """A dict of method options (``None``: no options)."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        return isinstance(v, dict) and all(isinstance(k, str) for k in v)

    def describe(self) -> str:
        return "a dict of method options (e.g. {'rank': 5})"

    def invalid(self) -> list[Any]:
        return [[("rank", 5)], "rank=5"]


class _RandomState:
    """An int >= 0, a numpy RandomState / Generator, or None."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        if isinstance(v, (np.random.RandomState, np.random.Generator)):
            return True
        return (not isinstance(v, (bool, np.bool_)) and isinstance(v, numbers.Integral)
                and 0 <= int(v) < 2**32)

    def describe(self) -> str:
        return "an int in [0, 2**32), a numpy RandomState or Generator"

    def invalid(self) -> list[Any]:
        return [-1, 1.5, "0", True]


class _Label:
    """A label value (int, str or finite float) marking unlabelled points in ``y``."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        if isinstance(v, (bool, np.bool_)):
            return False
        if isinstance(v, (str, numbers.Integral)):
            return True
        return isinstance(v, numbers.Real) and bool(np.isfinite(v))

    def describe(self) -> str:
        return "a label value (an int, str or finite float, e.g. -1)"

    def invalid(self) -> list[Any]:
        return [float("nan"), [1], True]


class _Estimator:
    """A :class:`KernelLearner` (or any transformer with fit/transform)."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        return hasattr(v, "fit") and hasattr(v, "transform") and hasattr(v, "get_params")

    def describe(self) -> str:
        return "a KernelLearner (an estimator with fit and transform)"

    def invalid(self) -> list[Any]:
        return ["pcp", 3]


def _validate_parameters(est: BaseEstimator) -> None:
    """Check every constructor parameter against ``_parameter_constraints`` (before any
    work); the message shape is "The 'gamma' parameter of KernelLearner must be a float
    > 0. Got -1 instead.", raised as :class:`OptionError`."""
    name = type(est).__name__
    for key, value in est.get_params(deep=False).items():
        cons = est._parameter_constraints[key]
        if any((value is None) if c is None else c.matches(value) for c in cons):
            continue
        shown = f"an array of shape {value.shape}" if isinstance(value, np.ndarray) else repr(value)
        hint = ""
        if isinstance(value, str):
            opts = [o for c in cons if isinstance(c, StrOptions) for o in c.options]
            import difflib

            close = difflib.get_close_matches(value, opts, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
        raise OptionError(f"The {key!r} parameter of {name} must be {describe(cons)}. "
                          f"Got {shown} instead.{hint}")


def _seed(random_state: Any) -> int:
    """An int seed for kernelforms from a scikit-learn ``random_state``."""
    if random_state is None:
        return int(np.random.default_rng().integers(2**31 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31 - 1))
    return int(random_state)


def _validate_X(est: BaseEstimator, X: Any, *, reset: bool) -> np.ndarray:
    """scikit-learn's ``validate_data`` (dense, finite, 2-D, float64; n >= 2 at fit), its
    errors re-raised as :class:`InputError` with the same message."""
    from sklearn.utils.validation import validate_data

    try:
        return validate_data(est, X, reset=reset, dtype=np.float64,
                             ensure_min_samples=2 if reset else 1, accept_sparse=False)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{type(est).__name__}: {exc}") from exc
