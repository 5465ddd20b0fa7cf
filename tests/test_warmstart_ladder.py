"""The warm-start ladder's reading (bench/bench_reference.py ``shortest_trusted``): the
shortest warm-up trusted on *every* seed, per model and start. Hand-built records, the
expected answers worked out by reading them (no sampler run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_reference import ladder_summary, shortest_trusted


def _rec(model, start, tune, seed, trusted, grads, lf, what="warmstart_ladder"):
    # 4 chains of 10 draws
    return {"what": what, "model": model, "start": start, "tune": tune, "seed": seed,
            "draws": 10, "draws_total": 40,
            "trusted": trusted, "timings_s": {"warmup_gradients": grads},
            "leapfrog_per_draw": lf}


def test_shortest_tune_trusted_on_every_seed():
    recs = [
        # default start: tune 50 fails on seed 1, tune 100 passes on both
        _rec("couple", "default", 50, 0, True, 7000, 40),
        _rec("couple", "default", 50, 1, False, 7400, 41),
        _rec("couple", "default", 100, 0, True, 19000, 38),
        _rec("couple", "default", 100, 1, True, 21000, 36),
        _rec("couple", "default", 200, 0, True, 40000, 37),
        _rec("couple", "default", 200, 1, True, 40000, 37),
        # online start: trusted from tune 50 on both seeds, records out of order
        _rec("couple", "online", 100, 1, True, 9000, 30),
        _rec("couple", "online", 50, 1, True, 5000, 32),
        _rec("couple", "online", 50, 0, True, 3000, 30),
    ]
    got = shortest_trusted(recs)
    assert got[("couple", "default")] == {"tune": 100, "seeds": [0, 1],
                                          "warmup_gradients": 20000.0,
                                          "leapfrog_per_draw": 37.0}
    assert got[("couple", "online")] == {"tune": 50, "seeds": [0, 1],
                                         "warmup_gradients": 4000.0,
                                         "leapfrog_per_draw": 31.0}


def test_a_tune_with_a_missing_seed_cannot_vouch_and_none_when_nothing_passes():
    recs = [
        # tune 50 was run on seed 0 only (the ladder was stopped): it does not count
        _rec("crowdbt", "online", 50, 0, True, 3000, 30),
        _rec("crowdbt", "online", 100, 0, True, 6000, 30),
        _rec("crowdbt", "online", 100, 1, True, 8000, 34),
        # never trusted on both seeds
        _rec("crowdbt", "default", 100, 0, True, 9000, 50),
        _rec("crowdbt", "default", 100, 1, False, 9000, 50),
        # single-tune records of the older benchmark are not ladder records
        _rec("crowdbt", "default", 300, 0, True, 50000, 49, what="warmstart"),
    ]
    got = shortest_trusted(recs)
    assert got[("crowdbt", "online")]["tune"] == 100
    assert got[("crowdbt", "online")]["warmup_gradients"] == pytest.approx(7000.0)
    assert got[("crowdbt", "default")] is None
    assert shortest_trusted([]) == {}


def test_ladder_summary_counts_trusted_seeds_and_averages():
    recs = [_rec("couple", "default", 50, 0, True, 7000, 40),
            _rec("couple", "default", 50, 1, False, 9000, 42),
            _rec("couple", "online", 50, 0, True, 3000, 30)]
    got = ladder_summary(recs)
    assert got[("couple", "default", 50)] == {
        "seeds": 2, "seed_set": [0, 1], "trusted": 1, "warmup_gradients": 8000.0,
        # 8000 gradients over 50 iterations of 4 chains
        "gradients_per_warmup_iteration": 40.0, "leapfrog_per_draw": 41.0}
    assert got[("couple", "online", 50)]["trusted"] == 1
    assert len(got) == 2


@pytest.fixture
def no_probe(monkeypatch):
    """The speed probe (~6 s of a fixed workload) replaced by a fixed answer in this
    process: what is tested is that the record carries it."""
    import bench_reference

    monkeypatch.setattr(bench_reference, "_speed", lambda: {"python_s": 1.0})


def test_a_paper_run_stopped_by_its_cap_still_writes_its_record(tmp_path, no_probe):
    """``paper --stop-after``: the benchmark stops its own run and writes the record that
    would otherwise be typed by hand (configuration, commit, command, seconds until
    stopped). A cap of 1.2 s stops the child while it is still starting."""
    import json

    from bench_reference import main

    out = tmp_path / "paper.json"
    args = ["paper", "--items", "20", "--workers", "5", "--tasks", "10", "--tune", "20",
            "--draws", "20", "--stop-after", "0.02", "--out", str(out)]
    assert main(args) == 0
    (rec,) = json.loads(out.read_text())
    assert rec["status"].startswith("NOT COMPLETED: stopped by --stop-after after 0.02 min")
    assert 1.2 <= rec["wall_s_until_stopped"] < 30
    assert rec["what"] == "paper-probe" and (rec["tune"], rec["draws"]) == (20, 20)
    assert rec["commit"] and rec["date"] and "typed_by_hand" not in rec
    assert rec["command"] == "python bench/bench_reference.py " + " ".join(args)
    # where it ran: the same fields as every stamped record, with the machine's speed probe
    assert rec["cpu"] and rec["cpus"] >= 1 and rec["speed"] and len(rec["load_before"]) == 3


def test_an_option_is_dropped_with_its_value():
    from rerun import without

    argv = ["paper", "--stop-after", "3", "--at=abc", "--out", "x.json", "--at", "HEAD"]
    assert without(argv, "--at") == ["paper", "--stop-after", "3", "--out", "x.json"]
    assert without(argv, "--stop-after") == ["paper", "--at=abc", "--out", "x.json",
                                             "--at", "HEAD"]


def test_a_run_at_a_commit_is_recorded_as_that_commits(tmp_path, no_probe):
    """``--at REV``: the command runs with REV's code in a temporary worktree, and its record
    names REV as its commit, the command as typed (with ``--at``) and the commit that ran
    it; the worktree is gone afterwards. (REV is HEAD here: a shallow clone may have no
    other commit.)"""
    import json
    import subprocess

    from bench_reference import ROOT, main

    def git(*a):
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True,
                              check=True).stdout.strip()

    trees = git("worktree", "list")
    out = tmp_path / "paper.json"
    args = ["paper", "--items", "20", "--workers", "5", "--tasks", "10", "--stop-after",
            "0.02", "--at", "HEAD", "--out", str(out)]
    assert main(args) == 0
    (rec,) = json.loads(out.read_text())
    assert rec["status"].startswith("NOT COMPLETED: stopped by --stop-after after 0.02 min")
    assert rec["commit"] == git("rev-parse", "--short", "HEAD")
    assert rec["run_from"].split("+")[0] == rec["commit"]
    assert rec["command"] == "python bench/bench_reference.py " + " ".join(args)
    assert rec["packages"]["numpy"] and rec["cpu"]
    assert git("worktree", "list") == trees
