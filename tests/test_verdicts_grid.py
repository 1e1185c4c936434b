"""compare_grid keeps what finished: an instance that fails, an executor that refuses or
cancels, a dask cluster that loses its scheduler or its only worker, each become error rows for
the instances concerned (verdict unverified, exit status 3) while the rest finish; bad
arguments are clear errors before any work."""

from __future__ import annotations

import functools
import threading
import time
import warnings
from concurrent.futures import Executor, ThreadPoolExecutor

import pytest

import kernelforms as kf
import kernelforms.grid as grid
from kernelforms.errors import OptionError
from kernelforms.recipes import build_from_recipe
from kernelforms.result import Status
from kernelforms.testing import SlowMethod

FAST = ["sdp:clarabel"]


@functools.lru_cache(maxsize=None)
def _pcp(n: int, seed: int = 0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_from_recipe({"problem": "pcp", "dataset": "iris", "n_points": n, "seed": seed})


def _is_error_report(rep, *words):
    assert [r.status for r in rep.rows] == [Status.ERROR] * len(rep.rows), str(rep)
    assert rep.verdict == "unverified" and rep.exit_code == 3 and not rep.complete
    for w in words:
        assert all(w in r.message for r in rep.rows), [r.message for r in rep.rows]


class _Exploding:
    """A problem whose report cannot be made: MemoryError in the worker, after compare ran."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def fingerprint(self):
        raise MemoryError("simulated: the worker ran out of memory")


# ---------------------------------------------------------------------- argument checks
@pytest.mark.parametrize("problems,word", [(None, "NoneType"), (_pcp(10), "wrap a single"),
                                           ({"problem": "pcp", "dataset": "iris"}, "wrap a single"),
                                           ("pcp", "str")])
def test_compare_grid_of_none_or_a_single_instance_is_a_clear_error(problems, word):
    with pytest.raises(OptionError, match="'problems' argument of compare_grid") as info:
        kf.compare_grid(problems, FAST, progress=False)
    assert word in str(info.value)


@pytest.mark.parametrize("n", [-1, 0, 2.5, True, "2"])
def test_compare_grid_max_workers_below_one_is_a_clear_error(n):
    with pytest.raises(OptionError, match="'max_workers' argument of compare_grid must be an int >= 1"):
        kf.compare_grid([_pcp(10)], FAST, max_workers=n, progress=False)


# ---------------------------------------------------------------------- failing instances
def test_one_failed_instance_is_an_error_row_and_the_rest_finish():
    """One instance raising aborted the grid, and without json_path the finished reports were lost."""
    recipes = [{"problem": "pcp", "dataset": "iris", "n_points": 10},
               {"problem": "pcp", "dataset": "iris", "n_points": 100000},  # more points than iris has
               {"problem": "pcp", "dataset": "iris", "n_points": 12}]
    pool = ThreadPoolExecutor(2)  # a process pool hands the exception back the same way
    try:
        reps = kf.compare_grid(recipes, FAST, executor=pool, progress=False, certify=False)
    finally:
        pool.shutdown()
    assert len(reps) == 3
    _is_error_report(reps[1], "failed: ")
    assert reps[1].problem_label.startswith("pcp-iris-n100000")
    assert [reps[k].verdict for k in (0, 2)] == ["agree", "agree"]
    assert [reps[k].problem_params["n"] for k in (0, 2)] == [10, 12]


def test_memory_error_in_a_worker_is_an_error_row_and_the_grid_returns():
    pool = ThreadPoolExecutor(2)
    try:
        reps = kf.compare_grid([_pcp(10), _Exploding(_pcp(11)), _pcp(12)], FAST, executor=pool,
                               progress=False, certify=False)
    finally:
        pool.shutdown()
    _is_error_report(reps[1], "MemoryError", "simulated")
    assert [reps[k].verdict for k in (0, 2)] == ["agree", "agree"]


class _Refusing(Executor):
    def submit(self, fn, *args, **kwargs):
        raise RuntimeError("no capacity")


def test_an_executor_whose_submit_raises_gives_error_rows():
    reps = kf.compare_grid([_pcp(10), _pcp(12)], FAST, executor=_Refusing(), progress=False)
    for rep in reps:
        _is_error_report(rep, "the executor refused the task", "RuntimeError: no capacity")


class _NoFuture:
    def submit(self, fn, *args, **kwargs):
        return "queued"


def test_an_executor_whose_submit_returns_no_future_gives_error_rows():
    reps = kf.compare_grid([_pcp(10)], FAST, executor=_NoFuture(), progress=False)
    _is_error_report(reps[0], "returned str, not a concurrent.futures.Future")


def test_a_shut_down_executor_gives_error_rows_not_a_traceback():
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    reps = kf.compare_grid([_pcp(10)], FAST, executor=pool, progress=False)
    _is_error_report(reps[0], "the executor refused the task", "shutdown")


# ---------------------------------------------------------------------- dask
@pytest.fixture
def local_dask():
    """An in-process dask cluster (scheduler and one thread worker): quick to start and to break."""
    distributed = pytest.importorskip("distributed")
    import dask

    # a client that lost its scheduler tries to reconnect this long before it closes
    with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                           dashboard_address=None)
        client = distributed.Client(cluster)
        try:
            yield cluster, client
        finally:
            client.close(timeout=5)
            cluster.close(timeout=5)


def _gated(tmp_path):
    gate = tmp_path / "gate"
    return gate, SlowMethod("gated", inner="sdp:clarabel", delay=60, until=gate, n_points=12)


def test_the_only_dask_worker_leaving_gives_error_rows_not_a_hang(local_dask, tmp_path, monkeypatch):
    """The only worker dying made the grid wait forever."""
    cluster, client = local_dask
    monkeypatch.setattr(grid, "DASK_UNHEALTHY_WAIT", 2.0)
    gate, slow = _gated(tmp_path)
    box: dict = {}
    path = tmp_path / "g.json"
    run = threading.Thread(target=lambda: box.update(
        reps=kf.compare_grid([_pcp(10), _pcp(12)], [slow], executor=client, progress=False, certify=False,
                             json_path=path)))
    run.start()
    try:
        end = time.monotonic() + 60
        # the 10-point instance finishes at once (its report reaches the file); the 12-point
        # one waits on the gate
        while time.monotonic() < end and not (path.exists() and '"instance": 0' in path.read_text()):
            time.sleep(0.05)
        cluster.scale(0)  # its only worker goes away
        run.join(60)
        assert not run.is_alive(), "compare_grid still waits for a worker"
    finally:
        gate.touch()
        run.join(10)
    reps = box["reps"]
    assert reps[0].rows[0].status is Status.OPTIMAL
    _is_error_report(reps[1], "no worker")


@pytest.mark.slow  # 3 s: kills a local dask cluster's scheduler; the default run keeps the worker-leaving case
def test_a_dead_dask_scheduler_gives_error_rows_not_cancelled_error(local_dask, tmp_path, monkeypatch):
    """A dask scheduler that died gave a raw CancelledError."""
    cluster, client = local_dask
    monkeypatch.setattr(grid, "DASK_UNHEALTHY_WAIT", 2.0)
    gate, slow = _gated(tmp_path)
    box: dict = {}
    run = threading.Thread(target=lambda: box.update(
        reps=kf.compare_grid([_pcp(12), _pcp(12, 1)], [slow], executor=client, progress=False)))
    run.start()
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not client.processing():
            time.sleep(0.05)
        cluster.sync(cluster.scheduler.close)
        run.join(60)
        assert not run.is_alive(), "compare_grid still waits for the dead scheduler"
    finally:
        gate.touch()
        run.join(10)
    for rep in box["reps"]:
        _is_error_report(rep)


# ---------------------------------------------------------------------- the CLI's --scheduler
@pytest.fixture
def fake_server():
    """A TCP server on localhost that accepts connections and then either says nothing or
    sends bytes that are not dask's protocol (a length header of exbibytes)."""
    import socket

    servers = []

    def start(mode: str) -> str:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        s.settimeout(0.2)
        stop = threading.Event()
        held = []

        def serve():
            while not stop.is_set():
                try:
                    c, _ = s.accept()
                except OSError:
                    continue
                held.append(c)
                if mode == "junk":
                    try:
                        c.sendall(b"\xff" * 64 + b"not dask" * 100)
                    except OSError:
                        pass

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        servers.append((s, stop, t, held))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"

    yield start
    for s, stop, t, held in servers:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        s.close()


def _grid_cli(address, capsys):
    from kernelforms.cli import main as cli

    t0 = time.monotonic()
    code = cli(["grid", "pcp", "--dataset", "iris", "--sizes", "10", "--methods", "sdp:clarabel",
                "--scheduler", address])
    return code, capsys.readouterr().err, time.monotonic() - t0


def test_cli_scheduler_that_accepts_but_never_answers_is_a_clear_error_in_bounded_time(fake_server, capsys,
                                                                                         monkeypatch):
    """It waited past 400 s."""
    pytest.importorskip("distributed")
    import kernelforms.cli.grid as kcli  # the grid command reads its own SCHEDULER_TIMEOUT

    monkeypatch.setattr(kcli, "SCHEDULER_TIMEOUT", 1.0)
    code, err, took = _grid_cli(fake_server("silent"), capsys)
    assert code == 2 and "no answer within 1 s" in err and "--scheduler" in err
    assert took < 30


def test_cli_scheduler_port_that_sends_junk_is_a_clear_error_not_memory_error(fake_server, capsys):
    """A port sending junk gave a raw MemoryError (3 EiB)."""
    pytest.importorskip("distributed")
    code, err, _ = _grid_cli(fake_server("junk"), capsys)
    assert code == 2 and "cannot connect to a dask scheduler" in err and "Traceback" not in err


@pytest.mark.parametrize("scheme,word", [("tls", "TLS needs the client's certificates"),
                                         ("ucx", "distributed-ucxx"), ("foo", "unknown address scheme")])
def test_cli_scheduler_tls_ucx_or_unknown_scheme_is_a_clear_error(fake_server, capsys, scheme, word):
    pytest.importorskip("distributed")
    address = fake_server("silent").replace("tcp://", f"{scheme}://")
    code, err, _ = _grid_cli(address, capsys)
    assert code == 2 and word in err and "Traceback" not in err, err


@pytest.mark.slow  # 3.5 s: starts and freezes a real scheduler process
def test_a_dask_scheduler_that_stops_answering_gives_error_rows_in_bounded_time(tmp_path, monkeypatch):
    """A scheduler that accepts connections but never answers made the grid wait past 400 s.
    Here a real scheduler process is frozen (SIGSTOP) while an instance runs."""
    distributed = pytest.importorskip("distributed")
    import os
    import signal
    import subprocess
    import sys

    monkeypatch.setattr(grid, "DASK_UNHEALTHY_WAIT", 2.0)
    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "5s"}
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                              "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = worker = None
    gate, slow = _gated(tmp_path)
    try:
        end = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < end:
            time.sleep(0.1)
        client = distributed.Client(scheduler_file=str(sched_file), timeout=30)
        async def start_worker():
            return await distributed.Worker(client.scheduler.address, nthreads=1)

        worker = client.sync(start_worker)  # a thread worker of this process, on the client's loop
        box: dict = {}
        run = threading.Thread(target=lambda: box.update(
            reps=kf.compare_grid([_pcp(12)], [slow], executor=client, progress=False)))
        run.start()
        while time.monotonic() < end and not client.processing():
            time.sleep(0.05)
        sched.send_signal(signal.SIGSTOP)
        run.join(45)
        assert not run.is_alive(), "compare_grid still waits for the frozen scheduler"
        _is_error_report(box["reps"][0], "does not answer")
    finally:
        gate.touch()
        sched.send_signal(signal.SIGCONT)
        sched.kill()
        sched.wait(10)
        if worker is not None:
            try:
                client.sync(worker.close, timeout=5)
            except Exception:  # noqa: BLE001 - its scheduler is gone
                pass
        if client is not None:
            client.close(timeout=5)
