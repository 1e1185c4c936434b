"""Small helpers shared by the report, the command line, the plots and the benchmarks: the
fitted scaling exponent, byte sizes, aligned plain-text tables, seed checking and a
one-entry cache.  Imports
nothing of kernelforms at module level (``as_rng`` imports the errors when it raises), so
every layer may use it."""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np


def loglog_fit(sizes: Sequence[float], values: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of ``log value = a log size + b``; returns ``(a, b)``.

    Points with a size <= 0, or a value that is missing (None), non-finite or <= 0, are left
    out; ``(nan, nan)`` when fewer than two distinct sizes remain.
    """
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(values, dtype=float)
    keep = np.isfinite(n) & (n > 0) & np.isfinite(t) & (t > 0)
    if len(np.unique(n[keep])) < 2:
        return math.nan, math.nan
    a, b = np.polyfit(np.log(n[keep]), np.log(t[keep]), 1)
    return float(a), float(b)


def fit_exponent(sizes: Sequence[float], values: Sequence[float]) -> float:
    """The fitted exponent ``p`` of ``value ~ size^p`` (the slope of :func:`loglog_fit`;
    nan with fewer than two usable sizes)."""
    return loglog_fit(sizes, values)[0]


def format_bytes(b: float) -> str:
    """A byte count for people: ``1536 -> '1.5 KiB'``, ``3e9 -> '2.79 GiB'``; three
    significant digits (no exponent: ``1023 MiB``), "unlimited" for infinity."""
    if not math.isfinite(b):
        return "unlimited"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.3g} {unit}" if b < 1000 * size else f"{b / size:.0f} {unit}"
    return f"{int(b)} B"


def render_table(head: Sequence[str], rows: Sequence[Sequence[Any]], *, rule: bool = False,
                 sep: str = "  ") -> list[str]:
    """Lines of a plain-text table: columns left-aligned to their widest cell, separated by
    ``sep``, trailing blanks removed; with ``rule`` a line of dashes under the header.
    Cells are shown with ``str`` (format numbers before)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[k]) for r in cells if k < len(r)]) for k, h in enumerate(head)]

    def line(cs: Sequence[str]) -> str:
        return sep.join(c.ljust(w) for c, w in zip(cs, widths)).rstrip()

    out = [line([str(h) for h in head])]
    if rule:
        out.append(line(["-" * w for w in widths]))
    return out + [line(r) for r in cells]


def as_rng(owner: str, seed: Any, *, name: str = "seed") -> np.random.Generator:
    """``numpy.random.default_rng(seed)`` for an int >= 0, None or a Generator; anything
    else (a string, a float, a negative int) is the standard ProblemError."""
    from .errors import param_error

    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng()
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise param_error(owner, name, "an int >= 0, None or a numpy.random.Generator", seed)
    return np.random.default_rng(int(seed))


def last_result(store: dict, obj: Any, compute: Any) -> Any:
    """``compute(obj)``, kept in ``store`` for the last ``obj`` seen (by identity, held
    weakly): asking again for the same object costs nothing.  For results derived from an
    object that does not change (a problem's declaration) and asked for several times in a
    row (the size model, then compile)."""
    import weakref

    ref = store.get("ref")
    if ref is not None and ref() is obj:
        return store["value"]
    value = compute(obj)
    try:
        store.update(ref=weakref.ref(obj), value=value)
    except TypeError:  # pragma: no cover - an object without weak references
        store.clear()
    return value
