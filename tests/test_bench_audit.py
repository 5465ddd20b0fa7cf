"""``bench/bench_audit.py``'s record says how it was measured: the command, date and
commit (``stamp``), and whether the audit compiled every program (an empty compilation
cache, the default) or used the user's. No audit is run: the subprocess is replaced by
one that records what it was given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    return load_script("bench/bench_audit.py", "crowdrank_bench_audit")


def test_each_audit_gets_an_empty_cache_and_the_record_says_so(tmp_path, monkeypatch):
    ba = _bench()
    seen = []
    real_run = subprocess.run

    def fake_run(cmd, **kw):
        if cmd[0] == "git":                         # stamp's commit
            return real_run(cmd, **kw)
        seen.append(kw["env"].get("CROWDRANK_XLA_CACHE"))
        return subprocess.CompletedProcess(cmd, 3, "", "no audit here")

    monkeypatch.setattr(ba.subprocess, "run", fake_run)
    # the machine's speed probe (its own subprocesses) is stamp's; a stand-in here
    monkeypatch.setitem(ba.stamp.__globals__, "speed_probe", lambda: {"python_s": 0.9})
    monkeypatch.setattr(ba, "ROOT", tmp_path)       # the record goes under tmp_path
    monkeypatch.setattr(sys, "argv", ["bench/bench_audit.py"])
    assert ba.main(["--keep", str(tmp_path / "runs")]) == 1
    recs = json.loads((tmp_path / "bench" / "results" / "audit.json").read_text())
    assert [r["name"] for r in recs] == ["default", "geometric"]
    assert seen == [str(tmp_path / "runs" / n / "xla-cache") for n in ("default", "geometric")]
    assert all(r["xla_cache"].startswith("cold") and r["rc"] == 3 for r in recs)
    assert all(r["commit"] and r["date"] and r["command"].startswith("python") for r in recs)
    assert all(r["speed"] == {"python_s": 0.9} for r in recs)
    seen.clear()
    monkeypatch.setenv("CROWDRANK_XLA_CACHE", str(tmp_path / "mine"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "entry").write_text("x")
    ba.main(["--only", "default", "--xla-cache", "user", "--keep", str(tmp_path / "runs")])
    rec = json.loads((tmp_path / "bench" / "results" / "audit.json").read_text())
    assert seen == [str(tmp_path / "mine")]           # the user's, inherited
    assert next(r for r in rec if r["name"] == "default")["xla_cache"] == \
        "the user's (1 files at the start)"
