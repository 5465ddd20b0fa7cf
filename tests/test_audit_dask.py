"""``crowdrank audit --scheduler``: the audit's NUTS fits as Dask tasks give the results of
the same audit run in this process, and an unreachable scheduler is a clear usage error."""

from __future__ import annotations

import json
import re
import socket

import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

#: Timings and where things ran differ between runs; everything else must not.
VOLATILE = {"timings", "seconds_fits", "seconds_total", "seconds", "wall", "updates"}


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


@pytest.mark.slow
def test_audit_on_a_local_cluster_equals_the_audit_in_process(tmp_path, worker_compilation_cache):
    """One audited model and one checks-only model (two NUTS fits, one task of each kind)
    on a LocalCluster of two worker *processes* (so every argument and result crosses a
    pickle boundary) give the metrics, parameter table and written fits of the in-process
    audit."""
    import arviz as az
    import numpy as np

    from crowdrank.models.simulate import simulate
    from crowdrank.validation.pipelines.audit import AuditConfig, Subject, run_audit

    # BT audited, PL for the checks only: the cheapest models to compile and sample
    # (each of the three processes compiles its own), on the same code paths as COUPLE's
    # posterior SBC with 20 replicates: enough to compare its Dask route with the local one
    sim = simulate("couple", n_items=8, n_workers=3, tasks_per_worker=25, kmax=2,
                   setting="amateur", seed=3)
    subject = Subject(sim.rankings, truth=sim.lam)
    cfg = AuditConfig(models=("bt",), chains=2, tune=100, draws=100, permutations=2,
                      loo_models=("pl",), seed=4, posterior_sbc=20)
    local = run_audit(subject, tmp_path / "local", cfg, log=lambda _: None)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        dask = run_audit(subject, tmp_path / "dask", cfg, log=lambda _: None,
                         scheduler=client)
        pids = set(client.run(lambda: __import__("os").getpid()).values())
    finally:
        client.close()
        cluster.close()
    assert __import__("os").getpid() not in pids
    assert _strip(dask) == _strip(local)
    assert set(dask["checks"]["extra_fits"]) == {"pl"}
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "dask" / "parameters.csv"),
                                  pd.read_csv(tmp_path / "local" / "parameters.csv"))
    for rel in ("bt/nuts/posterior.nc", "checks/pl/posterior.nc"):
        a = az.from_netcdf(tmp_path / "local" / rel)
        b = az.from_netcdf(tmp_path / "dask" / rel)
        np.testing.assert_array_equal(b["posterior"]["lambda"].values,
                                      a["posterior"]["lambda"].values)
    for rel in ("bt/online/posterior.json",):
        assert (_strip(json.loads((tmp_path / "dask" / rel).read_text()))
                == _strip(json.loads((tmp_path / "local" / rel).read_text())))


def test_audit_with_an_unreachable_scheduler_is_a_usage_error(tmp_path, monkeypatch, capsys):
    """``--scheduler`` (or ``$CROWDRANK_SCHEDULER``) naming a port where nothing listens:
    the command stops before any fit with a message naming the address and what to do."""
    import crowdrank.validation.runtime.grid as X
    from crowdrank.reports.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # closed again: nothing listens there
    real = X.dask_client
    monkeypatch.setattr(X, "dask_client",
                        lambda sched, processes=None: real(sched, processes, timeout=2))
    monkeypatch.setenv(X.SCHEDULER_ENV, f"tcp://127.0.0.1:{port}")
    rc = main(["audit", "--out", str(tmp_path / "a"), "--quick", "--quiet", "--no-checks"])
    err = capsys.readouterr().err
    assert rc == 2
    assert re.search(rf"crowdrank audit: error: --scheduler: cannot reach the Dask scheduler "
                     rf"at 'tcp://127\.0\.0\.1:{port}'.*dask scheduler", err), err
    assert not (tmp_path / "a" / "metrics.json").exists()
