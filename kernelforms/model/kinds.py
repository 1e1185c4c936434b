"""Constraint kinds shared by declared parameters and options (the model is scikit-learn's
``_parameter_constraints``): ``Interval``, ``StrOptions``, ``Boolean``.

A kind says whether a value ``matches``, ``describe``-s itself for messages ("a float > 0",
"one of 'burg', 'von_neumann'") and gives ``invalid`` examples for generated bad-input
tests.  The problems' parameter schemas (:mod:`kernelforms.problems.schema`) and the
solvers' options (:mod:`kernelforms.solvers.options`, which adds the kinds that need the
problem's size) both declare with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Iterable

import numpy as np

__all__ = ["Interval", "StrOptions", "Boolean"]


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
