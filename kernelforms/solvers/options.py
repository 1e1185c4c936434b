"""Declared method options: constraints beside the defaults, checked in one place.

Every hand-written solver declares, next to its ``defaults``, a
``parameter_constraints`` dict (the model is scikit-learn's ``_parameter_constraints``):
option name -> list of accepted kinds, any one of which may match.  The base class
checks every option against it before any work starts, with one message shape::

    The 'rho' option of admm must be a float > 0. Got nan instead.

Kinds
-----
``Interval(Real, 0, None, closed="neither")``
    a finite number in the interval (bools, NaN and infinities never match; an
    ``Integral`` interval accepts only whole numbers of integer type);
``StrOptions({"auto", "color"})``
    one of these strings;
``Boolean()``
    ``True`` / ``False`` (numpy bools too);
``None``
    the value ``None``;
``Rank()``
    an int in ``[1, n]`` (n: the problem's number of points);
``FactorInit()``
    a finite real array of shape ``(n, r)`` (checked against the rank by the solver);
``Seconds()``
    a finite number of seconds > 0.

:func:`invalid_examples` produces values that violate a declaration; the test suite
generates its bad-option tests from it, so a new option is tested by declaring it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import OptionError
from ..model.kinds import Boolean, Interval, StrOptions, _is_bool, _is_real  # noqa: F401 - re-exported

__all__ = [
    "Interval", "StrOptions", "Boolean", "Rank", "FactorInit", "Seconds",
    "validate_options", "describe", "invalid_examples", "check_option",
]


@dataclass(frozen=True)
class Rank:
    """An int in ``[1, n]``: the number of columns of the factor ``G``."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        if _is_bool(v) or not isinstance(v, (int, np.integer)):
            return False
        return 1 <= int(v) <= (int(n) if n is not None else int(v))

    def describe(self, n: int | None = None) -> str:
        return f"an int in [1, n] = [1, {n}]" if n is not None else "an int in [1, n]"

    def invalid(self) -> list[Any]:
        return [0, -1, 2.0, "3", True, 10**9]


@dataclass(frozen=True)
class FactorInit:
    """A finite real array with n rows (the starting factor)."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        try:
            a = np.asarray(v)
        except Exception:  # noqa: BLE001 - anything that is not array-like does not match
            return False
        if a.dtype.kind not in "biuf" or a.ndim != 2 or a.dtype.kind == "b":
            return False
        if n is not None and a.shape[0] != n:
            return False
        return bool(np.all(np.isfinite(a)))

    def describe(self, n: int | None = None) -> str:
        return f"a finite real array of shape ({n if n is not None else 'n'}, rank)"

    def invalid(self) -> list[Any]:
        return ["G", np.full((1, 1), np.nan), np.zeros(3)]


@dataclass(frozen=True)
class Seconds:
    """A finite number of seconds > 0."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        return _is_real(v) and math.isfinite(float(v)) and float(v) > 0

    def describe(self) -> str:
        return "a finite number of seconds > 0"

    def invalid(self) -> list[Any]:
        return [0, -1.0, math.nan, math.inf, "5"]


def _describe_one(c: Any, n: int | None) -> str:
    if c is None:
        return "None"
    if isinstance(c, (Rank, FactorInit)):
        return c.describe(n)
    return c.describe()


def describe(constraints: list, n: int | None = None) -> str:
    """``[Interval(Real, 0, None, closed="neither"), None]`` -> ``'a float > 0 or None'``."""
    parts = [_describe_one(c, n) for c in constraints]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def check_option(owner: str, name: str, value: Any, constraints: list, n: int | None = None) -> None:
    """Raise :class:`OptionError` unless ``value`` matches one of ``constraints``."""
    for c in constraints:
        if c is None:
            if value is None:
                return
        elif c.matches(value, n):
            return
    if isinstance(value, np.ndarray):
        shown: Any = f"an array of shape {value.shape}"
        raise OptionError(f"The {name!r} option of {owner} must be {describe(constraints, n)}. "
                          f"Got {shown} instead.")
    raise OptionError(f"The {name!r} option of {owner} must be {describe(constraints, n)}. "
                      f"Got {value!r} instead.")


def validate_options(owner: str, constraints: dict[str, list], options: dict[str, Any],
                     n: int | None = None) -> None:
    """Check every option that has a declaration (all of them, for a conforming solver)."""
    for name, value in options.items():
        if name in constraints:
            check_option(owner, name, value, constraints[name], n)


def invalid_examples(constraints: list, n: int | None = None) -> list[Any]:
    """Values that match none of ``constraints`` (for generated bad-option tests)."""
    cands: list[Any] = []
    for c in constraints:
        if c is not None:
            cands.extend(c.invalid())
    if None not in constraints:
        cands.append(None)
    out = []
    for v in cands:
        ok = any((v is None) if c is None else c.matches(v, n) for c in constraints)
        if not ok:
            out.append(v)
    return out
