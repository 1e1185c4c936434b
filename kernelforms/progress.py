"""Progress of long runs (:func:`~kernelforms.compare`, :func:`~kernelforms.compare_grid`).

On a terminal: a live bar redrawn in place (``[######------] 2/5  admm  running 12.3 s``)
above one permanent line per finished item.  Elsewhere (a log file, a pipe, a notebook):
plain lines only, one per finished item, and a "still running" line every
``heartbeat`` seconds for a long item, so that a log shows what is running.

Hand-written rather than ``tqdm`` / ``rich``: the lines carry each method's status and
objective, the non-terminal output must be plain lines (tqdm writes carriage-return
redraws into logs), and the ticker must be driven from a child-process poll loop as well
as from a thread; ~100 lines do that without a dependency.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import Any

#: width of the terminal bar, in characters
BAR_WIDTH = 20


class Progress:
    """Progress over ``total`` items (methods, instances) on ``stream`` (default stderr).

    Parameters
    ----------
    total : int
    enabled : bool, optional
        Default on: a live bar on a terminal, plain lines otherwise.  False: silent.
    stream : file-like, optional
    heartbeat : float
        Seconds between "still running" lines when the stream is not a terminal.
    """

    def __init__(self, total: int, enabled: bool | None = None, stream: Any = None,
                 heartbeat: float = 60.0) -> None:
        self.stream = sys.stderr if stream is None else stream
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = True if enabled is None else bool(enabled)
        self.live = self.enabled and tty
        self.total = total
        self.finished = 0
        self.heartbeat = float(heartbeat)
        self._label = ""
        self._name = ""
        self._t0 = 0.0
        self._last_beat = 0.0
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ writing
    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed stream must not break the run
            self.enabled = self.live = False

    def _bar(self, stage: str, elapsed: float) -> str:
        k = int(BAR_WIDTH * self.finished / max(self.total, 1))
        return (f"\r[{'#' * k}{'-' * (BAR_WIDTH - k)}] {self.finished}/{self.total}  {self._name}  "
                f"{stage} {elapsed:6.1f} s\x1b[K")

    # ------------------------------------------------------------------ items
    def begin(self, name: str) -> None:
        """Show ``name`` in the bar and start the clock, without an item number (for a
        display driven by :meth:`tick` and :meth:`line` only)."""
        self._label = self._name = name
        self._t0 = self._last_beat = time.perf_counter()

    def start(self, i: int, name: str, background: bool = False) -> None:
        """Item ``i`` (1-based) called ``name`` starts; ``background``: a thread keeps the
        display alive (for work done in this thread)."""
        if not self.enabled:
            return
        self._label = f"[{i}/{self.total}] {name}"
        self._name = name
        self._t0 = self._last_beat = time.perf_counter()
        self.tick(0.0)
        if background:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        assert self._stop is not None
        while not self._stop.wait(0.5):
            self.tick(time.perf_counter() - self._t0, self._stage)

    _stage = "running"

    def stage(self, stage: str) -> None:
        """Name what the current item is doing (``running``, ``certifying``)."""
        self._stage = stage
        if self.enabled:
            self.tick(time.perf_counter() - self._t0, stage)

    def tick(self, elapsed: float, stage: str = "running") -> None:
        """Redraw the bar (terminal) or write a heartbeat line when one is due (log)."""
        if not self.enabled:
            return
        with self._lock:
            if self.live:
                self._write(self._bar(stage, elapsed))
            elif elapsed > 0 and time.perf_counter() - self._last_beat >= self.heartbeat:
                self._last_beat = time.perf_counter()
                self._write(f"{self._label}  still {stage} after {elapsed:.0f} s\n")

    def _stop_ticker(self) -> None:
        if self._stop is not None:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            self._stop = self._thread = None
        self._stage = "running"

    def line(self, text: str) -> None:
        """A permanent line (the bar, on a terminal, is redrawn below it)."""
        if not self.enabled:
            return
        with self._lock:
            self._write(("\r" if self.live else "") + text + ("\x1b[K" if self.live else "") + "\n")

    def done(self, res: Any) -> None:
        """The current item finished with ``res`` (a Result: status and objective are shown)."""
        if not self.enabled:
            return
        self._stop_ticker()
        self.finished += 1
        elapsed = time.perf_counter() - self._t0
        obj = getattr(res, "objective", math.nan)
        obj = f"  objective {obj:.8g}" if isinstance(obj, float) and math.isfinite(obj) else ""
        status = getattr(getattr(res, "status", None), "value", str(getattr(res, "status", "")))
        self.line(f"{self._label}  {status:<10} {elapsed:6.1f} s{obj}")

    def interrupted(self) -> None:
        if self.enabled:
            self._stop_ticker()
            self.line(f"{self._label}  interrupted")

    def close(self) -> None:
        """Stop the ticker and clear the bar line (terminal)."""
        self._stop_ticker()
        if self.live:
            with self._lock:
                self._write("\r\x1b[K")
