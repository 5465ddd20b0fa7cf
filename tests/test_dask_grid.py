"""Experiment grids on Dask ``distributed``: the same results as local processes, the same
cache and resume semantics, a clear error for an unreachable scheduler, and one real
``dask scheduler`` + ``dask worker`` pair on localhost that a killed grid resumes through.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crowdrank.validation.runtime import grid as X

distributed = pytest.importorskip("distributed")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def client():
    # threads, not processes: cheap on a shared 2-core machine; the code path is the same
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_local_cluster_gives_the_local_results_and_caches(tmp_path, client):
    specs = [{"seed": s, "work": 0.0} for s in range(6)]
    local = X.run_grid(specs, X.sleep_job, tmp_path / "local", processes=1, progress=False)
    dask = X.run_grid(specs, X.sleep_job, tmp_path / "dask", scheduler=client, progress=False)
    assert len(dask.computed) == 6 and dask.cached == []
    assert [r["draws"] for r in dask.results] == [r["draws"] for r in local.results]
    # same cache files, same names
    assert sorted(p.name for p in (tmp_path / "dask").glob("*.json")) == \
        sorted(p.name for p in (tmp_path / "local").glob("*.json"))
    again = X.run_grid(specs, X.sleep_job, tmp_path / "dask", scheduler=client, progress=False)
    assert again.computed == [] and len(again.cached) == 6


def test_failures_are_reported_and_only_they_rerun(tmp_path, client):
    specs = [{"seed": s, "fail": s == 2} for s in range(4)]
    with pytest.raises(X.GridError, match="1 experiment"):
        X.run_grid(specs, X.sleep_job, tmp_path, scheduler=client, progress=False)
    assert len(list(tmp_path.glob("*.json"))) == 3
    # the same grid with the failing spec fixed: only it is computed
    fixed = [dict(s, fail=False) if s["seed"] != 2 else s for s in specs]
    fixed[2] = {"seed": 2, "fail": False}
    run = X.run_grid(fixed, X.sleep_job, tmp_path, scheduler=client, progress=False)
    assert len(run.computed) == 1 and len(run.cached) == 3


def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    with socket.socket() as s:            # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    with pytest.raises(X.SchedulerError, match=f"tcp://127.0.0.1:{port}.*dask scheduler"):
        X.dask_client(f"tcp://127.0.0.1:{port}", timeout=2)
    assert time.perf_counter() - t0 < 30


def test_resolve_scheduler(monkeypatch):
    monkeypatch.delenv(X.SCHEDULER_ENV, raising=False)
    assert X.resolve_scheduler(None) is None
    monkeypatch.setenv(X.SCHEDULER_ENV, "tcp://h:8786")
    assert X.resolve_scheduler(None) == "tcp://h:8786"
    assert X.resolve_scheduler("local") == "local"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_real_scheduler_and_worker_resume_a_killed_grid(tmp_path):
    """`dask scheduler` + `dask worker` as subprocesses; a grid driver is killed after a
    few results are cached; a second run computes only the rest, and every result equals
    the local-process run's."""
    bindir = Path(sys.executable).parent
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ)     # PYTHONPATH: this checkout (conftest, bench/tools/checkout.py)
    procs = [subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--no-dashboard"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        procs.append(subprocess.Popen(
            [str(bindir / "dask"), "worker", addr, "--nworkers", "1", "--nthreads", "1",
             "--no-dashboard"], env=env, cwd=str(ROOT),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        client = X.dask_client(addr, timeout=60)[0]
        client.wait_for_workers(1, timeout=60)
        client.close()
        specs = [{"seed": s, "work": 0.4} for s in range(8)]
        cache = tmp_path / "cache"
        driver = tmp_path / "driver.py"
        driver.write_text(
            "import json, sys\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            "from crowdrank.validation.runtime import grid as X\n"
            f"X.run_grid(json.loads({json.dumps(json.dumps(specs))}), X.sleep_job, "
            f"{str(cache)!r}, scheduler={addr!r}, progress=False)\n")
        drv = subprocess.Popen([sys.executable, str(driver)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while len(list(cache.glob("*.json"))) < 3 and time.time() < deadline:
            time.sleep(0.1)
        drv.send_signal(signal.SIGKILL)           # interrupted mid-grid
        drv.wait()
        done = len(list(cache.glob("*.json")))
        assert 3 <= done < len(specs)
        assert not list(cache.glob("*.tmp*"))
        run = X.run_grid(specs, X.sleep_job, cache, scheduler=addr, progress=False)
        assert len(run.cached) == done and len(run.computed) == len(specs) - done
        local = X.run_grid(specs, X.sleep_job, tmp_path / "local", processes=1,
                           progress=False)
        assert [r["draws"] for r in run.results] == [r["draws"] for r in local.results]
        assert {r["pid"] for r in run.results} != {os.getpid()}   # ran in the dask worker
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.mark.slow
def test_sbc_on_a_local_cluster_equals_local(tmp_path, client):
    """SBC's replicates through the same executor: identical ranks (the machinery check,
    ``backend="prior"``, so no sampler runs)."""
    from crowdrank.validation.pipelines.sbc import SbcConfig, run_sbc

    cfg = SbcConfig(model="pl", backend="prior", sims=3, n_items=5, n_workers=2,
                    tasks_per_worker=5, draws=100, n_ranks=20, chains=1, batch=1)
    run_sbc(cfg, tmp_path / "local", processes=1, progress=False)
    run_sbc(cfg, tmp_path / "dask", scheduler=client, progress=False)
    assert (tmp_path / "dask" / "ranks.csv").read_text() == \
        (tmp_path / "local" / "ranks.csv").read_text()
