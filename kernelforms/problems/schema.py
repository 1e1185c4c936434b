"""The parameter schema of the problem classes: each build parameter stated once.

A problem class lists the parameters it is built from (by :func:`~kernelforms.problems.factory.build_problem`,
a recipe, the command line and :class:`~kernelforms.estimator.KernelLearner`) in its
``parameters`` tuple of :class:`Param`: name, accepted values (the constraint kinds of
:mod:`kernelforms.model.kinds`, scikit-learn's ``_parameter_constraints`` model), default,
help text, and which of the class's problem kinds use it.  Everything else is derived:

* the factory's keyword checks (an unknown name, a parameter the kind does not use, a value
  out of range, each naming the parameter and the fix);
* the recipe keys and their defaults (:data:`kernelforms.recipes.RECIPE_DEFAULTS`);
* the command line's problem flags: type, range, choices, help, and which problems take each;
* the estimator's parameter constraints.

A new parameter is one :class:`Param` on its class (and its use in the class's builder).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from ..data.graphs import AUTO_EXACT_MAX, GRAPH_METHODS
from ..errors import ProblemError
from ..model.kinds import Boolean, Interval, StrOptions

__all__ = ["Param", "graph_pairs_parameters", "choice", "positive", "count"]


@dataclass(frozen=True)
class Param:
    """One build parameter of a problem class.

    ``accepts`` lists the constraint kinds any one of which a value may match (``None`` in
    it: the value None, which means "the default" or what ``none_means`` says);
    ``default`` is the value used when the parameter is not given; ``kinds`` the problem
    kinds of the class that use it (None: all of them); ``requires`` ``(name, value)``
    pairs of other parameters it is used with only (``b`` with ``loss="linear"``);
    ``same_as_default`` values recipes written before a default changed hold for it.
    """

    name: str
    accepts: tuple
    default: Any
    help: str
    kinds: tuple[str, ...] | None = None
    requires: tuple[tuple[str, Any], ...] = ()
    none_means: str = ""
    same_as_default: tuple = ()

    @property
    def unset(self) -> Any:
        """What a recipe and the command line record when the parameter is not given: None
        when None is accepted (the problem's own default, which may differ between kinds),
        else the default."""
        return None if None in self.accepts else self.default

    @property
    def flag(self) -> str:
        """The command line's flag (``--m-basis``)."""
        return "--" + self.name.replace("_", "-")

    @property
    def is_switch(self) -> bool:
        """A bool (a flag without a value on the command line)."""
        return any(isinstance(c, Boolean) for c in self.accepts)

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The strings accepted, in declaration order, when the parameter is a choice."""
        for c in self.accepts:
            if isinstance(c, StrOptions):
                return tuple(getattr(c, "order", sorted(c.options)))
        return None

    @property
    def number(self) -> type | None:
        """``int`` or ``float`` for a numeric parameter, else None."""
        for c in self.accepts:
            if isinstance(c, Interval):
                return int if c.kind is Integral else float
        return None

    def matches(self, value: Any) -> bool:
        return any((value is None) if c is None else c.matches(value) for c in self.accepts)

    def describe(self, with_none: bool = True) -> str:
        """``'an int >= 1 or None'``: the accepted values for a message."""
        parts = [c.describe() for c in self.accepts if c is not None]
        if with_none and None in self.accepts:
            parts.append("None" + (f" ({self.none_means})" if self.none_means else ""))
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]

    def check(self, owner: str, value: Any) -> Any:
        """``value`` when it is accepted, else the ProblemError that names the parameter."""
        if self.matches(value):
            return value
        hint = ""
        if isinstance(value, str) and self.choices:
            import difflib

            close = difflib.get_close_matches(value, self.choices, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ProblemError(f"The {self.name!r} parameter of {owner} must be {self.describe()}. "
                           f"Got {value!r} instead.{hint}")

    def is_unset(self, value: Any) -> bool:
        """Whether ``value`` is what "not given" is recorded as (or a value recipes written
        before a default changed hold for it)."""
        try:
            return bool((value is None and self.unset is None) or value == self.unset
                        or any(value == v for v in self.same_as_default))
        except (TypeError, ValueError):
            return False

    def is_default(self, value: Any) -> bool:
        """Whether ``value`` names the default instance: not given, or the default given."""
        if value is None:
            return None in self.accepts
        try:
            return self.is_unset(value) or bool(value == self.default)
        except (TypeError, ValueError):
            return False

    def default_text(self) -> str:
        """The default for help text (``none_means`` when the default is None)."""
        if self.default is None:
            return self.none_means or "None"
        return str(self.default)


def _int(low: int) -> Interval:
    return Interval(Integral, low, None, closed="left")


class _Ordered(StrOptions):
    """StrOptions that remember their declaration order (for help text and argparse choices)."""

    def __init__(self, options) -> None:
        super().__init__(options)
        object.__setattr__(self, "order", tuple(options))

    def describe(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.order)


def choice(options) -> StrOptions:
    """A StrOptions kind that keeps ``options`` in the order given."""
    return _Ordered(options)


def graph_pairs_parameters(delta: float) -> tuple[Param, ...]:
    """The kNN graph and the pairs drawn from labels: the parameters PCP, RegPCP and NPKL
    share (``delta``: the class's Laplacian shift, docs/problems.md)."""
    return (
        Param("k", (_int(1), None), 5, "neighbours in the kNN graph (1 <= k < n)"),
        Param("delta", (Interval(Real, 0, None, closed="left"), None), delta,
              "diagonal shift of the normalised Laplacian"),
        Param("graph_method", (choice(GRAPH_METHODS),), "auto",
              "neighbour search of the kNN graph: exact, approx (a (1 + eps)-approximate kd-tree "
              "search and one round of neighbours of neighbours) or auto (exact up to "
              f"{AUTO_EXACT_MAX:,} points)"),
        Param("n_must", (_int(0), None), None, "must-link pairs drawn from the labels",
              none_means="0.6 n"),
        Param("n_cannot", (_int(0), None), None, "cannot-link pairs drawn from the labels",
              none_means="0.6 n"),
        Param("per_class", (Boolean(),), False,
              "20 pairs per class and per class pair (Wu et al. 2009) instead of n_must / n_cannot"),
    )


def positive(name: str, default: float, help: str, **kw: Any) -> Param:
    """A finite float > 0."""
    return Param(name, (Interval(Real, 0, None, closed="neither"),), default, help, **kw)


def count(name: str, default: int | None, help: str, low: int = 1, allow_none: bool = False,
          **kw: Any) -> Param:
    """An int >= ``low`` (None accepted too when ``default`` is None or ``allow_none``)."""
    accepts = (_int(low), None) if default is None or allow_none else (_int(low),)
    return Param(name, accepts, default, help, **kw)
