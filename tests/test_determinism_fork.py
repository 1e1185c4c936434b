"""A time-limited conic solve after the user's own solves and threads: the child process is
started safely (a plain fork only from a single-threaded process), so it returns in the solve's
own time instead of hanging in a forked child until the time limit.

Each case runs in a fresh interpreter (the state under test is the process's threads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = """
import json, time, warnings
import numpy as np
import kernelforms as kf
from kernelforms.processes import fork_is_safe, os_thread_count
warnings.simplefilter("ignore")
X, y = kf.datasets.load("wine", n_points=30, seed=3, scale=True)
p = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, seed=3))
before = fork_is_safe()
"""

USER_SOLVE = """
import cvxpy as cp
K = cp.Variable((30, 30), PSD=True)
cp.Problem(cp.Minimize(cp.trace(p.laplacian.toarray() @ K) + cp.sum_squares(cp.diag(K) - 1))).solve(solver={solver!r})
"""

BLAS_CALL = """
a = np.random.default_rng(0).standard_normal((600, 600))
(a @ a.T).sum(); np.linalg.eigh(a + a.T)
"""

MEASURE = """
threads = os_thread_count()
after = fork_is_safe()
t = time.perf_counter()
r = kf.solve(p, "sdp:clarabel", time_limit=60)
took = time.perf_counter() - t
t = time.perf_counter()
here = kf.solve(p, "sdp:clarabel")
print(json.dumps(dict(before=before, after=after, threads=threads, status=r.status.value, took=took,
                      in_place=time.perf_counter() - t, same=bool(r.objective == here.objective))))
"""

CASES = {
    # the user's Clarabel solve leaves Clarabel's worker threads behind
    "clarabel": (USER_SOLVE.format(solver="CLARABEL"), "1"),
    "scs": (USER_SOLVE.format(solver="SCS"), "1"),
    # a threaded BLAS: OpenBLAS's worker threads
    "blas": (BLAS_CALL, "2"),
}


def _start(case: str) -> subprocess.Popen:
    code, blas_threads = CASES[case]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": blas_threads,
           "KERNELFORMS_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", PRELUDE + code + MEASURE], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # three fresh interpreters importing CVXPY: 15 s of CPU, 20-60 s under load
def test_time_limited_conic_solve_after_users_clarabel_scs_solve_or_blas_call_does_not_hang():
    # the three fresh interpreters run side by side (one test, the time of the slowest)
    procs = {case: _start(case) for case in CASES}
    out = {}
    for case, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{case}: the script did not end within 150 s")
        assert proc.returncode == 0, f"{case}: {stderr[-2000:]}"
        out[case] = json.loads(stdout.strip().splitlines()[-1])
    for case, rec in out.items():
        # a hung forked child would be stopped after the 60 s limit and reported as timeout
        assert rec["status"] == "optimal", (case, rec)
        assert rec["took"] < 60, (case, rec)
        assert rec["same"], (case, rec)  # the child's solve is the in-place solve
    # single-threaded before (OPENBLAS_NUM_THREADS=1), not after the user's Clarabel solve:
    # its worker threads stay, and the solve must not plain-fork
    assert out["clarabel"]["before"] is True and out["clarabel"]["after"] is False
    assert out["clarabel"]["threads"] > 1
    # a threaded BLAS makes the process multi-threaded from the start
    assert out["blas"]["before"] is False and out["blas"]["threads"] > 1


def test_fork_is_safe_counts_native_and_python_threads():
    import threading

    from kernelforms.processes import fork_is_safe, os_thread_count

    n = os_thread_count()
    if n is None:
        assert fork_is_safe() is False  # cannot count: never a plain fork
        return
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert os_thread_count() == n + 1
        assert fork_is_safe() is False
    finally:
        stop.set()
        t.join()


def test_time_limited_conic_solve_does_not_plain_fork_a_multithreaded_process(monkeypatch):
    """The start method of a time-limited conic solve: a plain fork only with one thread;
    with any other thread (here a mocked count of 2, as after a Clarabel solve) the fork
    server's context (mocked too, so that no server starts)."""
    import time

    from kernelforms import processes
    from kernelforms.solvers import conic

    class Spawn:
        def get_start_method(self):
            return "spawn"

    monkeypatch.setattr(conic, "mp_context", lambda: Spawn())
    monkeypatch.setattr(processes, "os_thread_count", lambda: 2)
    assert isinstance(conic._child_context(time.perf_counter() + 5), Spawn)
    monkeypatch.setattr(processes, "os_thread_count", lambda: None)  # cannot count
    assert isinstance(conic._child_context(time.perf_counter() + 5), Spawn)
    monkeypatch.setattr(processes, "os_thread_count", lambda: 1)
    if "fork" in __import__("multiprocessing").get_all_start_methods():
        monkeypatch.setattr(conic, "_SOLVED_IN_PLACE", set())
        assert conic._child_context(time.perf_counter() + 5).get_start_method() == "fork"


GUARDED_SCRIPT = '''
import json, time, warnings
import cvxpy as cp
import kernelforms as kf
from kernelforms.result import Result, Status
from kernelforms.solvers.base import Method, evaluate_into


class Mine(Method):
    name = "mine"
    formulation_name = "mine"
    solver_name = "test"

    def applies_to(self, problem):
        return None

    def run(self, problem, **_):
        ref = kf.solve(problem, "sdp:clarabel")
        return evaluate_into(Result(method=self.name, status=Status.CONVERGED, iterations=1), problem,
                             ref.kernel)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    X, y = kf.datasets.load("wine", n_points=30, seed=3, scale=True)
    p = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, seed=3))
    K = cp.Variable((30, 30), PSD=True)
    cp.Problem(cp.Minimize(cp.trace(p.laplacian.toarray() @ K)
                           + cp.sum_squares(cp.diag(K) - 1))).solve(solver="CLARABEL")
    t = time.perf_counter()
    row = kf.compare(p, [Mine()], time_limit=60, progress=False).rows[0]
    print(json.dumps(dict(status=row.status.value, message=row.message, took=time.perf_counter() - t)))
'''


@pytest.mark.slow  # a fresh interpreter and a fork server: 5 s of CPU, 10-30 s under load
def test_compare_with_a_method_from_a_guarded_main_script_after_users_clarabel_solve_does_not_hang(tmp_path):
    # objects defined in __main__ used to be run in a plain-forked child whatever the threads
    script = tmp_path / "guarded.py"
    script.write_text(GUARDED_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "KERNELFORMS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=150)
    assert out.returncode == 0, out.stderr[-2000:]
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    assert rec["status"] == "converged", rec
    assert rec["took"] < 60, rec
