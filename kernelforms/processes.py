"""Starting child processes: the start method, the fork server and its preloaded modules,
and the hiding of a ``__main__`` script while a child starts.

Shared by :mod:`kernelforms.isolation` (one method of ``compare`` per child),
:mod:`kernelforms.grid` (process pools) and :mod:`kernelforms.solvers.conic` (time-limited
conic solves): one fork server, one preload list.  This module imports nothing of
kernelforms, so every layer may use it.
"""

from __future__ import annotations

import ast
import os
import pickle
import sys
import threading
from typing import Any

#: modules the fork server imports once, so that each child starts warm
FORKSERVER_PRELOAD = ["kernelforms", "kernelforms.solvers.conic", "kernelforms.formulations.full_sdp",
                      "kernelforms.formulations.sqlp", "kernelforms.formulations.schur_sdp",
                      "kernelforms.formulations.dual_sdp", "cvxpy"]


def os_thread_count() -> int | None:
    """The number of threads the operating system counts in this process (Python's and native
    ones: a BLAS pool, a conic solver's worker pool, a user's), or None where it cannot tell."""
    try:
        return len(os.listdir(f"/proc/{os.getpid()}/task"))
    except OSError:
        return None


def fork_is_safe() -> bool:
    """True when a plain fork of this process cannot deadlock: "fork" exists and the operating
    system counts exactly one thread here.

    A forked child inherits only the forking thread; a lock held by any other thread, or a
    worker pool the child's libraries believe they still have, stays held or empty for ever,
    and the child hangs in its first wait (Clarabel's worker pool after a solve in this
    process, an OpenMP team after a threaded BLAS call, a user's own threads).  Which threads
    a library can survive a fork with cannot be told from outside, so any thread besides this
    one, and any system where threads cannot be counted, means "not safe".
    """
    import multiprocessing as mp

    return "fork" in mp.get_all_start_methods() and os_thread_count() == 1


def mp_context():
    """A "forkserver" context where available, else "spawn".

    Plain "fork" is not safe here: a conic solver that ran in this process leaves thread
    pools behind (Clarabel's), and a forked child that uses them deadlocks.  The fork server
    is a clean single-threaded process started once that imports :data:`FORKSERVER_PRELOAD`;
    children fork from it, so they start in milliseconds with cvxpy already imported.
    """
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
        return ctx
    return mp.get_context("spawn")


class main_not_reimported:
    """While starting a forkserver / spawn child, hide the path of a ``__main__`` *script*.

    multiprocessing would otherwise re-run the whole script in the child (and fail on a
    script without the ``if __name__ == "__main__"`` guard).  The child only needs
    importable modules: the method and the problem are pickled by reference to theirs.
    Nested and concurrent uses (threads) share one hiding: the path comes back when the
    last one exits.
    """

    _lock = threading.Lock()
    _depth = 0
    _saved: Any = None

    def __init__(self, ctx: Any) -> None:
        self.active = ctx.get_start_method() != "fork"

    def __enter__(self) -> "main_not_reimported":
        if not self.active:
            return self
        cls = type(self)
        with cls._lock:
            if cls._depth == 0:
                main = sys.modules.get("__main__")
                spec_name = getattr(getattr(main, "__spec__", None), "name", None)
                if main is not None and spec_name is None and hasattr(main, "__file__"):
                    cls._saved = (main, main.__file__)
                    del main.__file__
            cls._depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.active:
            return
        cls = type(self)
        with cls._lock:
            cls._depth -= 1
            if cls._depth == 0 and cls._saved is not None:
                main, path = cls._saved
                main.__file__ = path
                cls._saved = None


_WARM: set[int] = set()


def _noop() -> None:
    pass


def warm_up(ctx: Any) -> None:
    """Start the fork server and wait for its imports, once per process, so that this
    start-up time is not charged to the first method's time limit."""
    if os.getpid() in _WARM:
        return
    p = ctx.Process(target=_noop)
    with main_not_reimported(ctx):
        p.start()
    p.join(120)
    _WARM.add(os.getpid())


def _has_main_guard(path: str) -> bool:
    """True when the script at ``path`` has a top-level ``if __name__ == "__main__":``."""
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if any(isinstance(x, ast.Name) and x.id == "__name__" for x in names) and any(
                    isinstance(x, ast.Constant) and x.value == "__main__" for x in names):
                return True
    return False


def pool_mode(payload: Any) -> tuple[str, str]:
    """How local workers can run ``payload`` (the tasks' arguments): ``("processes", "")``
    (the main script is hidden from the workers, so a script without a ``__main__`` guard
    is not re-run), ``("processes-main", "")`` (objects defined in a guarded main script:
    the workers import it), or ``("threads", why)``."""
    try:
        data = pickle.dumps(payload)
    except Exception as exc:  # noqa: BLE001 - lambdas, open files, local classes ...
        return "threads", f"the instances, methods or options cannot be sent to worker processes ({exc})"
    if b"__main__" not in data:
        return "processes", ""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if getattr(getattr(main, "__spec__", None), "name", None) is not None:
        return "processes-main", ""  # python -m module: importable by name
    if path and _has_main_guard(path):
        return "processes-main", ""
    why = ("objects defined in the main script (a Method or Problem class) cannot be rebuilt in worker "
           "processes without re-running the script, which has no `if __name__ == \"__main__\":` guard"
           if path else "objects defined interactively (in __main__) cannot be sent to worker processes")
    return "threads", why
