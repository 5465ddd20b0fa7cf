"""``bench/bench_replicate.py``: a record says how many of its grid results were read from
the cache of an earlier run, and the cost experiment (a timing) never reads one. The
experiment itself is replaced by a function that writes one new grid result, so nothing
runs."""

from __future__ import annotations

import json
import types

import pytest
from bench_scripts import load_script


@pytest.fixture
def bench(tmp_path, monkeypatch):
    br = load_script("bench/bench_replicate.py", "crowdrank_bench_replicate")
    import crowdrank.reports.replicate_html as html

    def fake_run(name, out, **kw):
        (out / "cache").mkdir(parents=True, exist_ok=True)
        (out / "cache" / "new.json").write_text("{}")
        return {"experiment": name}

    monkeypatch.setattr(br, "run_experiment", fake_run)
    monkeypatch.setattr(html, "write_all", lambda summary, out: None)
    monkeypatch.setattr(br, "RESULTS", tmp_path / "results")
    return br


def _args(tmp_path):
    return types.SimpleNamespace(out=str(tmp_path / "out"), repeats_fig7=1, repeats_cost=1,
                                 repeats_real=1, repeats_other=1, seed=0, processes=1,
                                 nuts=False, tag=None)


@pytest.mark.parametrize("name,from_cache,kept", [("babyface", 1, True), ("cost", 0, False)])
def test_cached_grid_results_are_counted_and_never_timed(bench, tmp_path, name, from_cache,
                                                        kept):
    args = _args(tmp_path)
    old = tmp_path / "out" / name / "cache" / "old.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    bench.run_one(name, args)
    rec = json.loads((tmp_path / "results" / f"replicate_{name}.json").read_text())
    assert rec["grid_tasks"] == {"from_cache": from_cache, "computed": 1}
    assert rec["date"] and rec["commit"] and rec["command"] and rec["packages"]["numpy"]
    assert old.exists() == kept
