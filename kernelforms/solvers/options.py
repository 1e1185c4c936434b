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
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Iterable

import numpy as np

from ..errors import OptionError

__all__ = [
    "Interval", "StrOptions", "Boolean", "Rank", "FactorInit", "Seconds",
    "validate_options", "describe", "invalid_examples", "check_option",
]


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return (not _is_bool(v)) and isinstance(v, (int, float, np.integer, np.floating)) \
        and not isinstance(v, complex)


@dataclass(frozen=True)
class Interval:
    """A finite number of type ``kind`` (``Real`` or ``Integral``) between ``left`` and
    ``right`` (``None``: unbounded); ``closed`` in ``"left" | "right" | "both" | "neither"``."""

    kind: type
    left: float | None
    right: float | None
    closed: str = "both"

    def __post_init__(self) -> None:
        if self.kind not in (Real, Integral):
            raise TypeError("Interval kind must be numbers.Real or numbers.Integral")
        if self.closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"bad closed={self.closed!r}")

    def matches(self, v: Any, n: int | None = None) -> bool:
        if self.kind is Integral:
            if _is_bool(v) or not isinstance(v, (int, np.integer)):
                return False
        elif not _is_real(v):
            return False
        x = float(v) if not isinstance(v, (int, np.integer)) else int(v)
        if isinstance(x, float) and not math.isfinite(x):
            return False
        lo_ok = self.left is None or (x >= self.left if self.closed in ("left", "both") else x > self.left)
        hi_ok = self.right is None or (x <= self.right if self.closed in ("right", "both") else x < self.right)
        return lo_ok and hi_ok

    def describe(self) -> str:
        what = "an int" if self.kind is Integral else "a float"
        lo, hi = self.left, self.right
        if lo is not None and hi is None:
            return f"{what} {'>=' if self.closed in ('left', 'both') else '>'} {lo:g}"
        if hi is not None and lo is None:
            return f"{what} {'<=' if self.closed in ('right', 'both') else '<'} {hi:g}"
        if lo is None and hi is None:
            return f"a finite {what[2:] if what.startswith('a ') else what[3:]}"
        lb = "[" if self.closed in ("left", "both") else "("
        rb = "]" if self.closed in ("right", "both") else ")"
        return f"{what} in {lb}{lo:g}, {hi:g}{rb}"

    def invalid(self) -> list[Any]:
        out: list[Any] = [math.nan, math.inf, "1", True]
        if self.left is not None:
            out.append(self.left - 1 if self.kind is Integral else self.left - 1e-3 * max(1.0, abs(self.left)))
            if self.closed in ("right", "neither"):
                out.append(int(self.left) if self.kind is Integral and float(self.left).is_integer() else self.left)
        if self.right is not None:
            out.append(self.right + 1 if self.kind is Integral else self.right + 1e-3 * max(1.0, abs(self.right)))
            if self.closed in ("left", "neither"):
                out.append(int(self.right) if self.kind is Integral and float(self.right).is_integer() else self.right)
        if self.kind is Integral:
            out.append(2.5)
        return out


@dataclass(frozen=True)
class StrOptions:
    """One of a fixed set of strings."""

    options: frozenset = field(default_factory=frozenset)

    def __init__(self, options: Iterable[str]) -> None:
        object.__setattr__(self, "options", frozenset(options))

    def matches(self, v: Any, n: int | None = None) -> bool:
        return isinstance(v, str) and v in self.options

    def describe(self) -> str:
        return "one of " + ", ".join(repr(o) for o in sorted(self.options))

    def invalid(self) -> list[Any]:
        return ["no-such-" + "-".join(sorted(self.options))[:20], 3]


@dataclass(frozen=True)
class Boolean:
    """``True`` or ``False``."""

    def matches(self, v: Any, n: int | None = None) -> bool:
        return _is_bool(v)

    def describe(self) -> str:
        return "a bool"

    def invalid(self) -> list[Any]:
        return ["yes", 2]


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
