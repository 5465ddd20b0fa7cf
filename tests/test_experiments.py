"""``validation.pipelines.audit_grid.audit_job`` on a tiny grid: what it returns, and that a cached
re-run of the grid does not refit (NUTS and online fits are counted)."""

from __future__ import annotations

import pytest

from crowdrank.validation.pipelines.audit_grid import audit_job
from crowdrank.validation.runtime import grid as X

TINY = {"n_items": 6, "n_workers": 3, "tasks_per_worker": 8, "kmax": 3,
        "chains": 2, "tune": 40, "draws": 40}


@pytest.mark.slow
def test_audit_job_on_a_tiny_grid_and_cached_rerun(tmp_path, monkeypatch):
    import crowdrank.inference.nuts as nuts_mod
    import crowdrank.inference.online as online_mod
    from crowdrank.models.simulate import simulate
    from crowdrank.validation.compare import pairwise_accuracy

    calls = {"nuts": [], "online": []}
    fit_nuts, fit_online = nuts_mod.fit_nuts, online_mod.fit_online

    def count_nuts(data, model, priors, **kw):
        calls["nuts"].append((model, kw["seed"], kw["chains"], kw["draws"]))
        return fit_nuts(data, model, priors, **kw)

    def count_online(data, model, priors, **kw):
        calls["online"].append((model, dict(kw)))
        return fit_online(data, model, priors, **kw)

    # audit_job imports both at call time from their modules
    monkeypatch.setattr(nuts_mod, "fit_nuts", count_nuts)
    monkeypatch.setattr(online_mod, "fit_online", count_online)

    specs = [dict(TINY, model="couple", setting="amateur", seed=3, variant={"taylor": "full"}),
             dict(TINY, model="crowdbt", setting="amateur", seed=3, variant={})]
    run = X.run_grid(specs, audit_job, tmp_path, processes=1, progress=False)
    assert len(run.computed) == 2 and run.cached == []
    # each job's NUTS fit is handed its model's spec (looked up once, where the job starts)
    assert [(type(c[0]).__name__, c[0].name) for c in calls["nuts"]] == [
        ("ModelSpec", "couple"), ("ModelSpec", "crowdbt")]
    assert all(c[1:] == (3, 2, 40) for c in calls["nuts"])          # spec's seed and sizes
    # the variant's options and the spec's seed (used by shuffled orders) reach the fit
    # (the method registry passes every option, so the defaults come along: the variant's
    # own choice and the seed must be among them, and the default variant keeps "paper")
    first, second = (c[1] for c in calls["online"])
    assert (first["taylor"], first["seed"], first["progress"]) == ("full", 3, False)
    assert (second["taylor"], second["seed"], second["progress"]) == ("paper", 3, False)

    sim = simulate("couple", n_items=6, n_workers=3, tasks_per_worker=8, kmax=3,
                   setting="amateur", seed=3)
    for spec, res in zip(specs, run.results):
        assert res["model"] == spec["model"]
        # 80 draws cannot pass the gate: computed, but marked and explained
        assert res["reference_trusted"] is False and "ESS" in res["reference_note"]
        r = res["ranking"]
        assert -1 <= r["kendall_tau"] <= 1 and 0 <= r["accuracy_online"] <= 1
        assert {"online", "nuts"} <= set(res["timings"])
        assert res["timings"]["nuts"]["total"] > 0
        n_eta = 3 * 3 if spec["model"] == "couple" else 3       # (W, K) or (W,)
        assert res["aggregates"]["lambda"]["n"] == 6 and res["aggregates"]["eta"]["n"] == n_eta
        if spec["model"] == "couple":
            assert res["workers"] is not None and "spearman_truth_nuts" in res["workers"]
        else:
            assert res["workers"] is None or "spearman_truth_nuts" not in res["workers"]
    # audit_job used the data its seed simulates, geometric priors, the variant and the
    # true λ: recompute the online accuracy independently
    from crowdrank.models.priors import Priors

    d = sim.rankings
    on = fit_online(d, "couple", Priors.geometric(d.workers, d.K), progress=False,
                    taylor="full")
    assert run.results[0]["ranking"]["accuracy_online"] == pytest.approx(
        pairwise_accuracy(sim.lam, on.mu))

    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 2
    mtimes = {f: f.stat().st_mtime_ns for f in files}
    n_nuts, n_online = len(calls["nuts"]), len(calls["online"])
    again = X.run_grid(specs, audit_job, tmp_path, processes=1, progress=False)
    assert again.computed == [] and len(again.cached) == 2
    assert len(calls["nuts"]) == n_nuts and len(calls["online"]) == n_online   # no refit
    assert {f: f.stat().st_mtime_ns for f in files} == mtimes
    assert again.results == run.results
