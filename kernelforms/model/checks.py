"""Declared parameter constraints of the vocabulary (checked when a term is built).

Every constructor of :mod:`kernelforms.model` (:class:`~kernelforms.model.PSD`,
:func:`~kernelforms.model.Entries`, :class:`~kernelforms.model.Inner`,
:meth:`Range.of <kernelforms.model.Range.of>`, the losses, ...) declares its parameters
once, in a ``parameter_constraints`` dict: parameter name -> one kind below.  The
constructor checks every parameter against it before it stores anything, with the
message shape of the solvers' options::

    The 'n' parameter of PSD must be an int in [1, 2**62]. Got 0 instead.

Kinds
-----
``Count()``
    a whole number of points: an int (numpy ints too; bools refused) in ``[1, 2**62]``;
``Indices(columns=2, allow_none=False)``
    point indices: an integer array of shape ``(p, 2)`` (``columns=1``: of shape ``(p,)``)
    with every entry in ``[0, n - 1]``; whole floats are accepted, fractions, NaN, strings,
    complex values and integers beyond 64 bits are not;
``Reals(ndim)``
    a finite real array (``ndim=0``: a number or one per row; ``ndim=2``: a 2-d array with
    at least one row and one column); complex values are refused, never made real;
``SymmetricMatrix()``
    a square finite real matrix (dense or scipy.sparse) with at least one row.

:func:`invalid_examples` gives values that break a declaration; the tests generate their
bad-input cases from it, so a new parameter is tested by declaring it.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ProblemError

__all__ = ["Count", "Indices", "Reals", "SymmetricMatrix", "check", "invalid_examples",
           "MAX_POINTS"]

#: the largest number of points a declaration may state (indices must fit in int64)
MAX_POINTS = 2**62

_ComplexWarning = getattr(getattr(np, "exceptions", np), "ComplexWarning", Warning)


def _shown(value: Any) -> str:
    """The value for a message: arrays by shape and dtype, long text cut."""
    if sp.issparse(value):
        return f"a sparse matrix of shape {value.shape}"
    if isinstance(value, np.ndarray):
        if value.size <= 6:
            return f"array({value.tolist()!r})"
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(owner: str, name: str, expected: str, value: Any, why: str = "") -> ProblemError:
    tail = f" ({why})" if why else ""
    return ProblemError(f"The {name!r} parameter of {owner} must be {expected}. "
                        f"Got {_shown(value)} instead{tail}.")


def _real_array(owner: str, name: str, value: Any, expected: str) -> np.ndarray:
    """``value`` as a float array, refusing strings, complex values, objects and None."""
    if value is None or isinstance(value, (str, bytes)):
        raise _fail(owner, name, expected, value)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", _ComplexWarning)
            raw = np.asarray(value)
            if raw.dtype.kind == "c":
                raise _fail(owner, name, expected, value, "complex values are never made real; "
                            "pass the real part or the modulus")
            if raw.dtype.kind not in "biuf":
                if raw.dtype.kind != "O":
                    raise _fail(owner, name, expected, value, f"dtype {raw.dtype}")
                flat = raw.ravel().tolist()
                if any(isinstance(v, (str, bytes, complex)) or v is None for v in flat):
                    raise _fail(owner, name, expected, value, "non-numeric entries")
            return np.asarray(raw, dtype=float)
    except ProblemError:
        raise
    except (TypeError, ValueError, OverflowError, _ComplexWarning) as exc:
        raise _fail(owner, name, expected, value, str(exc)) from None


@dataclass(frozen=True)
class Count:
    """An int in ``[1, MAX_POINTS]``: a number of points."""

    def describe(self, n: int | None = None) -> str:
        return "an int in [1, 2**62]"

    def check(self, owner: str, name: str, value: Any, n: int | None = None) -> int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)) \
                or not 1 <= int(value) <= MAX_POINTS:
            raise _fail(owner, name, self.describe(), value)
        return int(value)

    def invalid(self, n: int | None = None) -> list[Any]:
        return [0, -3, 2.5, 3.0, "a", True, None, math.nan, 2**70]


@dataclass(frozen=True)
class Indices:
    """Point indices in ``[0, n - 1]``: shape ``(p, 2)`` (pairs) or ``(p,)`` (points)."""

    columns: int = 2
    #: None is accepted (and returned) too
    allow_none: bool = False

    def describe(self, n: int | None = None) -> str:
        shape = "(p, 2) (one row (i, j) per pair)" if self.columns == 2 else "(p,)"
        top = "n - 1" if n is None else f"n - 1 = {n - 1}"
        return (f"an integer array of shape {shape} with entries in [0, {top}]"
                + (" or None" if self.allow_none else ""))

    def check(self, owner: str, name: str, value: Any, n: int | None = None) -> Any:
        expected = self.describe(n)
        if value is None and self.allow_none:
            return None
        if value is None or isinstance(value, (str, bytes, dict, set, frozenset)):
            raise _fail(owner, name, expected, value)
        try:
            a = np.asarray(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise _fail(owner, name, expected, value, str(exc)) from None
        if a.size == 0:
            return np.zeros((0, 2) if self.columns == 2 else 0, dtype=np.int64)
        want_ndim = 2 if self.columns == 2 else 1
        if a.ndim != want_ndim or (self.columns == 2 and a.shape[1] != 2):
            why = f"shape {a.shape}"
            if self.columns == 2 and a.ndim == 1:
                why += "; write one row per pair, e.g. [[0, 1], [2, 5]]"
            raise _fail(owner, name, expected, value, why)
        kind = a.dtype.kind
        if kind == "b":
            raise _fail(owner, name, expected, value, "booleans are not indices")
        if kind == "u" and int(a.max()) > np.iinfo(np.int64).max:
            raise _fail(owner, name, expected, value, "an index beyond 64 bits")
        if kind == "f":
            whole = np.isfinite(a) & (a == np.round(a)) & (np.abs(a) < 2.0**62)
            if not np.all(whole):
                bad = float(a[~whole].ravel()[0])
                raise _fail(owner, name, expected, value, f"the entry {bad!r} is not a whole number")
        elif kind == "O":
            flat = a.ravel().tolist()
            for v in flat:
                if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
                    raise _fail(owner, name, expected, value, f"the entry {v!r} is not an integer")
                if not -2**63 <= int(v) < 2**63:
                    raise _fail(owner, name, expected, value, f"the entry {v!r} is beyond 64 bits")
        elif kind not in "iu":
            raise _fail(owner, name, expected, value, f"dtype {a.dtype}")
        out = a.astype(np.int64)
        if n is not None and (int(out.min()) < 0 or int(out.max()) >= n):
            bad = int(out.min()) if int(out.min()) < 0 else int(out.max())
            raise _fail(owner, name, expected, value, f"the index {bad} is outside [0, {n - 1}]")
        return out

    def invalid(self, n: int | None = None) -> list[Any]:
        top = 3 if n is None else n
        if self.columns == 1:
            out = [[0.5], [math.nan], ["a"], [2**70], [-1], [top], [[0, 1]], [1j], "ab", True]
            return out if self.allow_none else out + [None]
        return [[0, 1, 1], [[0, 1, 1]], np.zeros((2, 3), dtype=int), [[0, math.nan]], [[0, 1.5]],
                [["a", "b"]], [[2**70, 0]], [[-1, 0]], [[0, top]], [[0, 1j]], [[True, False]],
                "ab", None]


@dataclass(frozen=True)
class Reals:
    """A finite real array: ``ndim=0`` a number or one per row, ``ndim=2`` a 2-d array."""

    ndim: int = 0

    def describe(self, n: int | None = None) -> str:
        if self.ndim == 2:
            return "a finite real 2-d array with at least one row and one column"
        return "a finite real number or an array of them (one per row)"

    def check(self, owner: str, name: str, value: Any, n: int | None = None) -> np.ndarray:
        expected = self.describe(n)
        a = _real_array(owner, name, value, expected)
        if self.ndim == 2 and (a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1):
            raise _fail(owner, name, expected, value, f"shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise _fail(owner, name, expected, value, "NaN or inf entries")
        return a

    def invalid(self, n: int | None = None) -> list[Any]:
        if self.ndim == 2:
            return [[[math.nan, 1.0]], [[math.inf]], [["a"]], [[1 + 2j]], np.zeros(3), np.zeros((0, 2)),
                    "G", None]
        return [math.nan, math.inf, -math.inf, "a", [1.0, math.nan], 1 + 2j, [["a"]], None]


@dataclass(frozen=True)
class SymmetricMatrix:
    """A square finite real matrix (dense or scipy.sparse); symmetry is checked by the owner."""

    def describe(self, n: int | None = None) -> str:
        return "a square finite real matrix (dense or scipy.sparse)"

    def check(self, owner: str, name: str, value: Any, n: int | None = None) -> sp.csr_matrix:
        expected = self.describe(n)
        if sp.issparse(value):
            if value.dtype.kind not in "biuf":
                why = ("complex values are never made real; pass the real part"
                       if value.dtype.kind == "c" else f"dtype {value.dtype}")
                raise _fail(owner, name, expected, value, why)
            M = sp.csr_matrix(value, dtype=float)
        else:
            a = _real_array(owner, name, value, expected)
            if a.ndim != 2:
                raise _fail(owner, name, expected, value, f"shape {a.shape}")
            M = sp.csr_matrix(a)
        if M.shape[0] != M.shape[1] or M.shape[0] < 1:
            raise _fail(owner, name, expected, value, f"shape {M.shape}")
        if M.nnz and not np.all(np.isfinite(M.data)):
            raise _fail(owner, name, expected, value, "NaN or inf entries")
        return M

    def invalid(self, n: int | None = None) -> list[Any]:
        return [[[math.nan, 0.0], [0.0, 1.0]], [[math.inf]], [["a"]], [[1j]], np.zeros((2, 3)),
                sp.csr_matrix(np.array([[1j]])), "M", None]


def check(owner: str, constraints: dict, name: str, value: Any, n: int | None = None) -> Any:
    """Check ``value`` against ``constraints[name]`` and return it normalised."""
    return constraints[name].check(owner, name, value, n)


def invalid_examples(kind: Any, n: int | None = None) -> list[Any]:
    """Values that break ``kind`` (for the generated bad-input tests)."""
    return list(kind.invalid(n))


# --------------------------------------------------------------------- memory of the structure
import contextlib  # noqa: E402
import contextvars  # noqa: E402
import os  # noqa: E402

#: the byte limit of the run in progress (a method's ``max_memory``), None outside a run
_MEMORY_LIMIT: contextvars.ContextVar = contextvars.ContextVar("kernelforms_memory_limit", default=None)


@contextlib.contextmanager
def limit_memory(max_memory: Any):
    """Within the block, the declaration's own arrays (e.g. :meth:`Declaration.cost_matrix`)
    are built only when they fit ``max_memory`` bytes (a method's run sets it)."""
    token = _MEMORY_LIMIT.set(None if max_memory is None else float(max_memory))
    try:
        yield
    finally:
        _MEMORY_LIMIT.reset(token)


def physical_memory() -> int | None:
    """Bytes of RAM of this machine (None when the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def bytes_text(b: float) -> str:
    """``3.2 GiB``-style text."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(b) < 1024 or unit == "PiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.3g} {unit}"
        b /= 1024.0
    return f"{b:.3g} PiB"  # pragma: no cover


def check_build(what: str, need: int) -> None:
    """Raise :class:`~kernelforms.errors.NotApplicable` before building ``what`` when its
    ``need`` bytes exceed the run's ``max_memory`` (:func:`limit_memory`) or this machine's
    RAM (outside a run)."""
    from ..errors import NotApplicable

    limit = _MEMORY_LIMIT.get()
    ram = physical_memory()
    if limit is not None and need > limit:
        exc = NotApplicable(f"{what} needs about {bytes_text(need)}, above max_memory = "
                            f"{bytes_text(limit)}; use fewer points or raise the limit with "
                            "max_memory=<bytes>")
    elif ram is not None and need > ram:
        exc = NotApplicable(f"{what} needs about {bytes_text(need)}, more than this machine's "
                            f"{bytes_text(ram)} of RAM; use fewer points")
    else:
        return
    exc.memory = int(need)  # type: ignore[attr-defined] - read by methods.plan
    raise exc
