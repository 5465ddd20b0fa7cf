"""The same code, timed again: how fast is today's machine against an earlier day's?

    python bench/bench_machine_speed.py [--commit a462e42]

Runs ``bench/bench_audit.py --only default`` (the embedded default audit, a fresh process,
an empty XLA cache) on a fixed commit, checked out in a temporary git worktree with the
data sets' ``shared/`` beside it, and ``bench/tools/speed.py``'s probe; appends one record
to ``bench/results/machine_speed.json``: the commit audited, its wall and CPU seconds,
the probe, and the date, commit and machine of this run. With the audit's own record of
that commit on an earlier day (``bench/results/audit.json`` in the history of git), the
ratio of the two wall times is the machines' speed ratio on the project's work, the code
held fixed.

Why: machines with the same CPU model and core count ran this project's work at speeds
2x apart from one day to the next, which moves every wall-time goal (the suite's 15 min,
the audits' budgets) across its line without a change of code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp

OUT = ROOT / "bench" / "results" / "machine_speed.json"
#: the commit whose default audit was timed on 2026-12-03 (audit.json at e507788: 114.87 s)
CONTROL = "a462e42"


def audit_at(commit: str) -> dict:
    """The default audit's record (bench_audit.py's JSON line) run at ``commit``."""
    with tempfile.TemporaryDirectory(prefix="crowdrank-speed-") as tmp:
        wt = Path(tmp) / "crowdrank"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", "-q",
                        str(wt), commit], check=True)
        try:
            shared = ROOT.parent / "shared"
            if shared.is_dir():
                (Path(tmp) / "shared").symlink_to(shared)
            (wt / ".venv").symlink_to(ROOT / ".venv")
            r = subprocess.run([sys.executable, "bench/bench_audit.py", "--only", "default"],
                               cwd=wt, capture_output=True, text=True, check=True,
                               env={**os.environ, "PYTHONPATH": tmp})
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)],
                           check=False)
    line = [x for x in r.stdout.splitlines() if x.startswith("{")][-1]
    return json.loads(line)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commit", default=CONTROL, help="the commit whose default audit is timed")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    rec = stamp()
    audit = audit_at(a.commit)
    rec.update(what="the default audit (bench_audit.py --only default) at a fixed commit",
               audited_commit=audit["commit"], wall_s=audit["wall_s"],
               cpu_s_children=audit.get("cpu_s_children"),
               trusted={m: audit[m]["trusted"] for m in ("couple", "crowdbt") if m in audit})
    runs = json.loads(a.out.read_text()) if a.out.is_file() else []
    a.out.write_text(json.dumps(runs + [rec], indent=1) + "\n")
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
