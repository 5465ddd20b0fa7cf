"""``bench/tools/verify.py`` (``make verify``): the band logic on hand-built records.

The records are written here in the shapes the benchmarks write (``online.json``,
``batch.json``, ``replicate_babyface.json``); the measurers are replaced by functions that
return chosen figures, so no benchmark runs. A figure planted outside its band must fail
the run; one inside passes; an absent data set is a skip, not a failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def verify():
    return load_script("bench/tools/verify.py", "crowdrank_bench_verify")


@pytest.fixture
def records(tmp_path):
    (tmp_path / "online.json").write_text(json.dumps([
        {"what": "setup", "rankings": 450000},
        {"what": "method", "method": "couple-full", "rankings_per_s": 1.0,
         "end_to_end_rankings_per_s": 1.0},
        {"what": "method", "method": "couple", "rankings_per_s": 4_000_000,
         "end_to_end_rankings_per_s": 2_000_000}]))
    (tmp_path / "batch.json").write_text(json.dumps({"fits": [
        {"method": "crowdrank newton (tol 1e-7)", "seconds": 0.5},
        {"method": "choix opt_pairwise Newton-CG", "seconds": 40.0}]}))
    (tmp_path / "scale.json").write_text(json.dumps({"runs": [
        {"rankings": 4_500_000, "csv": {"wall_s": 9.0}},
        {"rankings": 450_000, "csv": {"wall_s": 1.0}}]}))
    trusted = {"trusted": True, "gate": {}}
    (tmp_path / "audit.json").write_text(json.dumps([
        {"name": "default", "date": "2026-12-01T00:00:00Z", "wall_s": 500.0,
         "crowdbt": dict(trusted, trusted=False), "couple": trusted},
        {"name": "geometric", "date": "2026-12-04T00:00:00Z", "wall_s": 70.0,
         "crowdbt": trusted, "couple": trusted},
        {"name": "default", "date": "2026-12-04T00:00:00Z", "wall_s": 60.0,
         "crowdbt": trusted, "couple": trusted}]))
    (tmp_path / "replicate_babyface.json").write_text(json.dumps({"summary": {"sets": [
        {"cleaned": [{"detected_by": ["crowdbt"], "accuracy": {"couple": {"mean": 50.0}}},
                     {"detected_by": ["couple", "crowdbt"],
                      "accuracy": {"couple": {"mean": 92.8}}}]}]}}))
    return tmp_path


def fake(values):
    return {"online": lambda: {k: values[k] for k in ("online_kernel", "online_end_to_end")},
            "map": lambda: {"map_vs_choix": values["map_vs_choix"]},
            "stream": lambda: {"stream_450k": values["stream_450k"]},
            "audit": lambda: {k: values[k] for k in ("audit_default", "audit_default_trusted")},
            "babyface": lambda: {"babyface_cleaned": values["babyface_cleaned"]}}


GOOD = {"online_kernel": 3_000_000.0, "online_end_to_end": 3_500_000.0,
        "map_vs_choix": 0.02, "stream_450k": 1.5, "audit_default": 100.0,
        "audit_default_trusted": 2.0, "babyface_cleaned": 92.85}


def test_recorded_values_read_the_benchmarks_shapes(verify, records):
    rec = verify.recorded_values(records)
    # the 450,000-ranking CSV run, not another size; the default audit's latest run (its
    # older one had an untrusted reference and took 500 s), not the geometric one
    assert rec == {"online_kernel": 4_000_000.0, "online_end_to_end": 2_000_000.0,
                   "map_vs_choix": 0.5 / 40.0, "stream_450k": 1.0, "audit_default": 60.0,
                   "audit_default_trusted": 2.0, "babyface_cleaned": 92.8}
    # a run whose CrowdBT reference failed the gate counts one trusted model, not two
    run = {"data": {"items": 40}, "crowdbt": {"trusted": False, "gate": {}},
           "couple": {"trusted": True, "gate": {}}}
    assert verify._trusted(run) == 1


def test_the_real_records_hold_every_rows_figure(verify):
    """Every row finds its figure in the committed records (a renamed field or run would
    otherwise turn a row into "no record" on every machine)."""
    rec = verify.recorded_values(verify.RESULTS)
    assert all(isinstance(v, float) for v in rec.values()), rec
    assert rec["audit_default_trusted"] == 2.0


def test_in_band_figures_pass(verify, records):
    results, rc = verify.verify(records, measurers=fake(GOOD))
    assert rc == 0
    assert [r["status"] for r in results] == ["in band"] * len(verify.ROWS)


@pytest.mark.parametrize("name, value", [
    ("online_kernel", 1_900_000.0),       # 0.475 of 4 M: below x0.5
    ("online_end_to_end", 4_100_000.0),   # 2.05 x 2 M: above x2
    ("map_vs_choix", 0.03),               # 2.4 x the recorded 0.0125
    ("stream_450k", 2.05),                # 2.05 x 1 s
    ("audit_default", 29.0),              # 0.48 x 60 s
    ("audit_default_trusted", 1.0),       # one reference fewer passes the gate
    ("babyface_cleaned", 92.95),          # +0.15 point
    ("babyface_cleaned", 92.65),          # -0.15 point
])
def test_a_planted_out_of_band_figure_fails(verify, records, name, value):
    results, rc = verify.verify(records, measurers=fake(dict(GOOD, **{name: value})))
    assert rc == 1
    status = {r["name"]: r["status"] for r in results}
    assert status.pop(name) == "OUT OF BAND"
    assert set(status.values()) == {"in band"}


def test_the_headline_goal_is_reported_beside_the_band_and_fails_nothing(verify, records):
    """An end-to-end rate inside its band (x1.25 the recorded 2 M/s) that misses the 3 M/s
    goal is reported as "no" and does not fail the run; the table shows each row's goal."""
    results, rc = verify.verify(records, measurers=fake(dict(GOOD, online_end_to_end=2.5e6)))
    got = {r["name"]: (r["status"], r["goal"], r["goal_met_here"]) for r in results}
    assert rc == 0
    assert got["online_end_to_end"] == ("in band", "≥ 3 M/s", False)
    assert got["online_kernel"] == ("in band", "≥ 3 M/s", True)
    assert got["audit_default_trusted"] == ("in band", "2 (both trusted)", True)
    assert got["babyface_cleaned"][2] is True                 # 92.85 within 92.30 ± 1
    assert all(r["goal"] for r in results)
    table = verify.format_table(results)
    assert "| in band | ≥ 3 M/s: no |" in table and "| in band | ≥ 3 M/s: yes |" in table


def test_band_edges_are_inclusive_and_checked(verify):
    b = verify.Band("ratio", 0.5, 2.0, "why")
    assert b.contains(4.0, 2.0) and b.contains(4.0, 8.0)
    assert not b.contains(4.0, 1.99) and not b.contains(4.0, 8.01)
    d = verify.Band("diff", -0.1, 0.1, "why")
    assert d.contains(92.8, 92.8) and d.contains(92.8, 92.85)
    assert not d.contains(92.8, 93.0) and not d.contains(92.8, 92.6)
    with pytest.raises(ValueError, match="positive record"):
        b.contains(0.0, 1.0)
    with pytest.raises(ValueError, match="kind"):
        verify.Band("percent", 0, 1, "why")
    with pytest.raises(ValueError, match="low"):
        verify.Band("ratio", 2.0, 0.5, "why")


def test_absent_data_skip_and_absent_records_are_reported(verify, records):
    def no_data():
        raise verify.Skip("the shared BabyFace data are not here")
    (records / "batch.json").unlink()
    results, rc = verify.verify(records, measurers=dict(fake(GOOD), babyface=no_data))
    status = {r["name"]: r["status"] for r in results}
    assert rc == 0
    assert status["babyface_cleaned"] == "skipped: the shared BabyFace data are not here"
    assert status["map_vs_choix"] == "no record (batch.json absent)"
    assert status["online_kernel"] == "in band"


def test_only_runs_the_selected_measurers(verify, records):
    called = []
    m = fake(GOOD)
    m["map"] = lambda: called.append("map") or {"map_vs_choix": 0.02}
    results, rc = verify.verify(records, measurers=m, only={"online_kernel"})
    assert rc == 0 and called == [] and [r["name"] for r in results] == ["online_kernel"]


def test_every_row_states_why_its_band(verify):
    for r in verify.ROWS:
        assert len(r.band.why) > 40, r.name
        assert r.measure in verify.MEASURERS, r.name
    assert "| OUT OF BAND |" in verify.format_table([{
        "what": "x", "recorded": 1.0, "measured": 3.0, "unit": "u", "band": "×0.5–×2",
        "status": "OUT OF BAND"}])


def test_speed_line_compares_this_machine_with_the_online_record(verify, records):
    """``make verify`` prints this machine's speed probe beside the online record's, so an
    online rate out of its band on a slower machine is seen as the machine's."""
    assert verify.speed_line({"python_s": 1.0}, records).endswith("the online record has none")
    rec = json.loads((records / "online.json").read_text())
    rec.append({"what": "summary", "speed": {"python_s": 0.5}})
    (records / "online.json").write_text(json.dumps(rec))
    line = verify.speed_line({"python_s": 1.0}, records)
    assert "the online record's: 0.5 s (this machine is 0.50× as fast on it)" in line


def test_the_run_record_is_stamped_like_every_benchmark_record(verify, records, tmp_path,
                                                               monkeypatch):
    """``--out``: the run's record carries ``stamp()``'s fields (date, commit, the command as
    typed, CPU, library versions) beside its rows. The measurements and the speed probe
    are replaced here; the stamp is the real one."""
    import subprocess
    import types

    real = verify.by_path
    monkeypatch.setattr(verify, "by_path", lambda name: types.SimpleNamespace(
        speed_probe=lambda: {"python_s": 1.0}) if name == "speed" else real(name))
    rows = [{"name": "online_kernel", "what": "COUPLE kernel", "recorded": 4e6,
             "measured": 3e6, "unit": "rankings/s", "band": "×0.5–×2", "status": "in band",
             "why": "planted"}]
    monkeypatch.setattr(verify, "verify", lambda path, only=None: (rows, 0))
    out = tmp_path / "verify.json"
    args = ["--only", "online_kernel", "--results", str(records), "--out", str(out)]
    assert verify.main(args) == 0
    rec = json.loads(out.read_text())
    assert rec["command"] == "python bench/tools/verify.py " + " ".join(args)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert rec["commit"].split("+")[0] == head
    assert rec["packages"]["numpy"] and rec["cpu"] and rec["rows"] == rows
    assert rec["speed"] == {"python_s": 1.0}
