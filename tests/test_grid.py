"""compare_grid on a real engine: a dask.distributed LocalCluster (the same reports as the local
process pool, the CLI's --scheduler), reports streamed into the JSON file as instances finish,
and a worker that dies mid-task (an error row for its instance, not a lost grid)."""

from __future__ import annotations

import functools
import json
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

import kernelforms as kf
from kernelforms.recipes import build_from_recipe
from kernelforms.report import Report
from kernelforms.testing import ExitingMethod, SlowMethod

METHODS = ["sdp:clarabel", "lowrank"]  # about 0.1 s per instance of 10 to 18 points


@functools.lru_cache(maxsize=None)  # built once per module (compare does not change a problem)
def _pcp(n: int, seed: int = 0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_from_recipe({"problem": "pcp", "dataset": "iris", "n_points": n, "seed": seed})


@pytest.fixture(scope="module")
def dask_client():
    """A LocalCluster of 2 worker processes with 1 thread each, no dashboard; torn down (and
    checked for leftover processes) after the module."""
    distributed = pytest.importorskip("distributed")
    import dask
    import psutil

    def started_here() -> set:
        """Child processes, without multiprocessing's long-lived helpers (the fork server
        and the resource tracker the local pool starts, which stay by design)."""
        out = set()
        for p in psutil.Process().children(recursive=True):
            try:
                cmd = " ".join(p.cmdline())
            except psutil.Error:
                continue
            if "forkserver" not in cmd and "resource_tracker" not in cmd:
                out.add(p)
        return out

    before = started_here()
    # a task whose worker died is reported at once (compare_grid then retries it alone)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
        left = list(started_here() - before)
        gone, alive = psutil.wait_procs(left, timeout=10)
        assert not alive, f"the LocalCluster left processes behind: {alive}"


def _assert_same_reports(got: list[Report], want: list[Report], rel: float = 1e-7) -> None:
    assert [r.fingerprint for r in got] == [r.fingerprint for r in want]
    assert [r.verdict for r in got] == [r.verdict for r in want]
    for a, b in zip(got, want):
        assert [(x.method, x.status) for x in a.rows] == [(x.method, x.status) for x in b.rows]
        assert [x.objective for x in a.rows] == pytest.approx([x.objective for x in b.rows], rel=rel)
        assert a.reference == b.reference
        assert a.reference_objective == pytest.approx(b.reference_objective, rel=rel)


# ---------------------------------------------------------------------- dask.distributed
@pytest.mark.slow  # 3-4 s: the default run keeps test_cli_grid_runs_on_a_dask_scheduler and the failure cases
def test_grid_of_8_on_a_dask_cluster_gives_the_process_pool_report(dask_client, tmp_path):
    problems = [_pcp(n, s) for n in (10, 14) for s in range(4)]
    recipes = [{"problem": "pcp", "dataset": "iris", "n_points": n, "seed": s}
               for n in (10, 14) for s in range(4)]
    path = tmp_path / "dask.json"
    # Problems built here: a worker building recipes imports scikit-learn's data loaders, a
    # few seconds more; the recipe path is the same code on every executor (tests/test_compare.py)
    on_dask = kf.compare_grid(problems, METHODS, executor=dask_client, progress=False, json_path=path,
                              recipes=recipes)
    local = kf.compare_grid(problems, METHODS, max_workers=2, progress=False)
    assert len({r.fingerprint for r in on_dask}) == 8
    assert [r.verdict for r in on_dask] == ["agree"] * 8
    _assert_same_reports(on_dask, local)
    # against one instance compared in this process
    here = kf.compare(_pcp(14, 3), METHODS, progress=False)
    _assert_same_reports([on_dask[7]], [here])
    assert on_dask[7].recipe["n_points"] == 14 and on_dask[7].recipe["seed"] == 3
    # the streamed file holds the 8 reports in order, each readable back
    data = json.loads(path.read_text())
    assert [d["instance"] for d in data] == list(range(8))
    _assert_same_reports([Report.from_dict(d) for d in data], on_dask, rel=1e-12)


@pytest.mark.parametrize("engine", ["threads", "dask"])
def test_reports_stream_into_the_json_file_as_instances_finish(engine, request, tmp_path):
    """The slow instance waits for a gate file that the test creates only after reading the
    two fast instances' reports from the JSON file."""
    gate, path = tmp_path / "gate", tmp_path / "grid.json"
    slow = SlowMethod("gated", inner="sdp:clarabel", delay=120, until=gate, n_points=14)
    problems = [_pcp(10), _pcp(14), _pcp(12)]
    executor = request.getfixturevalue("dask_client") if engine == "dask" else ThreadPoolExecutor(3)
    box: dict = {}
    run = threading.Thread(target=lambda: box.update(
        reps=kf.compare_grid(problems, [slow], executor=executor, progress=False, json_path=path)))
    run.start()
    try:
        seen, end = [], time.monotonic() + 120
        while time.monotonic() < end and seen != [0, 2]:
            time.sleep(0.05)
            seen = [d["instance"] for d in json.loads(path.read_text())] if path.exists() else []
        assert seen == [0, 2], "the fast instances' reports did not reach the file while the slow one ran"
        assert run.is_alive()
    finally:
        gate.touch()
        run.join(120)
        if engine == "threads":
            executor.shutdown()
    data = json.loads(path.read_text())
    assert [d["instance"] for d in data] == [0, 1, 2]
    assert [d["params"]["n"] for d in data] == [10, 14, 12]
    assert [Report.from_dict(d).rows[0].objective for d in data] == [r.rows[0].objective for r in box["reps"]]


def test_cli_grid_runs_on_a_dask_scheduler(dask_client, tmp_path, capsys):
    from kernelforms.cli import main as cli

    out_json = tmp_path / "g.json"
    address = dask_client.scheduler.address
    code = cli(["grid", "pcp", "--dataset", "iris", "--sizes", "10,12", "--seeds", "0,1", "--methods",
                "sdp:clarabel", "--scheduler", address, "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "4 of 4 instances agree" in out
    data = json.loads(out_json.read_text())
    assert [(d["recipe"]["n_points"], d["recipe"]["seed"]) for d in data] == [(10, 0), (10, 1), (12, 0), (12, 1)]
    here = kf.compare(_pcp(12, 1), ["sdp:clarabel"], progress=False)
    assert data[3]["fingerprint"] == here.fingerprint
    assert data[3]["rows"][0]["objective"] == pytest.approx(here.rows[0].objective, rel=1e-7)
    # refused before any work: --workers with --scheduler, and a scheduler that is not there
    assert cli(["grid", "pcp", "--dataset", "iris", "--sizes", "10", "--methods", "sdp", "--workers", "2",
                "--scheduler", address]) == 2
    assert "--workers" in capsys.readouterr().err
    assert cli(["grid", "pcp", "--dataset", "iris", "--sizes", "10", "--methods", "sdp",
                "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "cannot connect to a dask scheduler there" in capsys.readouterr().err


# ---------------------------------------------------------------------- a worker dies mid-task
def _check_lost(reps: list[Report], lost: int, path) -> None:
    """Instance ``lost`` is an error row per method ("worker lost"); the others agree and
    have their own objectives; the streamed file says the same."""
    assert len(reps) == 3
    bad = reps[lost]
    assert bad.problem_params["n"] == 12 and bad.fingerprint == _pcp(12).fingerprint()
    assert [r.status.value for r in bad.rows] == ["error", "error"]
    assert all(r.message.startswith("worker lost") for r in bad.rows)
    assert bad.verdict == "unverified" and bad.exit_code == 3 and not bad.complete
    for k in set(range(3)) - {lost}:
        here = kf.compare(_pcp(reps[k].problem_params["n"]), ["sdp:clarabel"], progress=False, certify=False)
        assert reps[k].verdict == "agree"
        assert reps[k].rows[0].objective == pytest.approx(here.rows[0].objective, rel=1e-7)
    data = json.loads(path.read_text())
    assert [d["instance"] for d in data] == [0, 1, 2]
    assert data[lost]["rows"][1]["status"] == "error" and data[lost]["rows"][1]["message"].startswith("worker lost")


def test_a_dead_pool_worker_is_an_error_row_and_the_grid_returns(tmp_path):
    """The method ends its worker process on the 12-point instance: the pool breaks; the
    instance that shared the pool is retried and agrees, the culprit is retried alone, dies
    again and becomes a 'worker lost' row."""
    path = tmp_path / "grid.json"
    reps = kf.compare_grid([_pcp(10), _pcp(12), _pcp(16)], ["sdp:clarabel", ExitingMethod(n_points=12)],
                           max_workers=2, progress=False, certify=False, json_path=path)
    _check_lost(reps, 1, path)


def test_exiting_method_never_ends_the_process_that_made_it():
    rep = kf.compare(_pcp(12), [ExitingMethod(n_points=12)], progress=False)
    assert rep.rows[0].status.value == "error" and "would end the process" in rep.rows[0].message


def test_a_dead_dask_worker_is_an_error_row_and_the_grid_returns(dask_client, tmp_path):
    """The last test on the cluster: its two killed workers restart in the background."""
    path = tmp_path / "grid.json"
    reps = kf.compare_grid([_pcp(16), _pcp(10), _pcp(12)], ["sdp:clarabel", ExitingMethod(n_points=12)],
                           executor=dask_client, progress=False, certify=False, json_path=path)
    _check_lost(reps, 2, path)


def test_a_pool_whose_workers_cannot_start_raises_instead_of_resubmitting_forever():
    """A pool broken before any instance started (here every submission fails at once, as
    when each worker dies while starting) raises; it is not replaced, since a fresh pool
    would break the same way."""
    from concurrent.futures import Future

    class DeadPool(ProcessPoolExecutor):
        submitted = 0

        def submit(self, fn, *args, **kwargs):
            self.submitted += 1
            fut = Future()
            fut.set_exception(BrokenProcessPool("A process in the process pool was terminated abruptly"))
            return fut

    pool = DeadPool(1)  # starts no process until a real submission
    with pytest.raises(BrokenProcessPool, match="died before any instance started"):
        kf.compare_grid([_pcp(10), _pcp(12)], ["sdp:clarabel"], executor=pool, progress=False)
    assert pool.submitted == 2
    pool.shutdown()


def test_grid_json_write_that_fails_later_warns_once_and_the_grid_goes_on(tmp_path):
    from kernelforms.grid import GridJSON
    from kernelforms.report import ReportWriteWarning

    rep = kf.compare(_pcp(10), ["sdp:clarabel"], progress=False, certify=False)
    sub = tmp_path / "out"
    sub.mkdir()
    writer = GridJSON(sub / "g.json")
    assert json.loads((sub / "g.json").read_text()) == []
    writer.add(1, rep)
    writer.flush(force=True)  # (a rewrite right after another may wait for the next check)
    assert [d["instance"] for d in json.loads((sub / "g.json").read_text())] == [1]
    (sub / "g.json").unlink()
    sub.rmdir()
    with pytest.warns(ReportWriteWarning, match="could not write the grid's reports"):
        writer.add(0, rep)
        writer.flush(force=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once is enough
        writer.add(2, rep)
        writer.flush(force=True)
    assert "could not write" in writer.error


def test_cli_scheduler_without_dask_says_what_to_install(monkeypatch, capsys):
    import sys

    from kernelforms.cli import main as cli

    monkeypatch.setitem(sys.modules, "distributed", None)
    assert cli(["grid", "pcp", "--dataset", "iris", "--sizes", "10", "--methods", "sdp",
                "--scheduler", "tcp://127.0.0.1:8786"]) == 2
    assert "pip install 'kernelforms[dask]'" in capsys.readouterr().err
