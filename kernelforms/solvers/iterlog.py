"""The iteration table a hand-written solver prints with ``verbose=True``.

SCS and Clarabel print a table of iterations; our solvers print the same kind of
table, written once here::

    ------------------------------------------------------------------
     admm: n = 300, rank = 24, 3 options changed from the defaults
    ------------------------------------------------------------------
        iter      objective       residual   rank     time
           1   1.234567e+02   3.21e-01        24    0.01s
     ...
    ------------------------------------------------------------------
     admm: converged after 37 iterations, 0.21 s

A solver asks its base class for a log (``log = self.iteration_log(opts, n=..., rank=...)``)
and calls ``log.row(iteration, objective=..., residual=..., rank=...)`` once per
iteration; the log decides which rows to print (every row for the first 10, then every
10th, 100th, ... and at least one every ``interval`` seconds) so that a 20,000-iteration
run prints a readable table and a slow one still shows life.  With ``verbose=False``
every call is a no-op costing one attribute test.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

#: the columns every log has; solvers may add their own (``extra=("rho",)``)
COLUMNS = ("iter", "objective", "residual", "rank", "time")


def _fmt(v: Any, width: int) -> str:
    if v is None:
        return " " * (width - 1) + "-"
    if isinstance(v, (int,)) and not isinstance(v, bool):
        return f"{v:>{width}d}"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return f"{str(v):>{width}.{width}}"
    if not math.isfinite(x):
        return f"{str(x):>{width}}"
    return f"{x:>{width}.3e}"


class IterationLog:
    """Prints an iteration table when enabled; see the module docstring."""

    def __init__(self, method: str, enabled: bool, *, header: str = "",
                 extra: tuple[str, ...] = (), residual: str = "residual",
                 stream: TextIO | None = None, interval: float = 2.0) -> None:
        self.method = method
        self.enabled = bool(enabled)
        self.extra = tuple(extra)
        self.residual_name = residual
        self.stream = stream
        self.interval = float(interval)
        self.t0 = time.perf_counter()
        self._last_print = -math.inf
        self._last_it = -1
        self.rows_printed = 0
        if self.enabled:
            self._line("-" * self._width())
            self._line(f" {method}" + (f": {header}" if header else ""))
            self._line("-" * self._width())
            cols = ["    iter", "     objective", f"{residual:>10.10}", "  rank", "     time"]
            cols += [f"{c:>11.11}" for c in self.extra]
            self._line(" ".join(cols))

    def _width(self) -> int:
        return 48 + 12 * len(self.extra)

    def _line(self, text: str) -> None:
        out = self.stream if self.stream is not None else sys.stdout
        print(text, file=out, flush=True)

    def _due(self, it: int, now: float) -> bool:
        # every row up to 10, then every 10th up to 100, every 100th up to 1000, ...;
        # and at least one row every ``interval`` seconds
        if it <= 10:
            return True
        step = 10 ** int(math.log10(it))
        return it % step == 0 or now - self._last_print >= self.interval

    def row(self, iteration: int, *, objective: Any = None, residual: Any = None,
            rank: Any = None, force: bool = False, **extra: Any) -> None:
        """Record one iteration (printed when due, or always with ``force=True``)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        it = int(iteration)
        if not force and not self._due(it, now):
            return
        self._last_print, self._last_it = now, it
        cells = [f"{it:>8d}", _fmt(objective, 14), _fmt(residual, 10),
                 _fmt(rank, 6) if rank is not None else "     -", f"{now - self.t0:>8.2f}s"]
        cells += [_fmt(extra.get(c), 11) for c in self.extra]
        self._line(" ".join(cells))
        self.rows_printed += 1

    def message(self, text: str) -> None:
        """A free line inside the table (a stage change, a restart)."""
        if self.enabled:
            self._line(f" {self.method}: {text}")

    def close(self, status: Any, iterations: int | None, message: str = "") -> None:
        """The closing lines: the status, the iterations and the time."""
        if not self.enabled:
            return
        st = getattr(status, "value", status)
        self._line("-" * self._width())
        tail = f" ({message})" if message else ""
        self._line(f" {self.method}: {st} after {iterations} iterations, "
                   f"{time.perf_counter() - self.t0:.3g} s{tail}")
        self._line("-" * self._width())
