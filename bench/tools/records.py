"""What a benchmark record says about itself: where it came from (file, date, commit,
machine, typed by hand) and, for mutation records, whether the mutated code has changed since.

Shared by ``headline.py`` (the README's table and docs/results.md's table of every goal),
``render_results.py`` and ``verify.py``; no figure is computed here.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load(d: Path, name: str):
    p = d / name
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None


def latest_by(recs, key) -> dict:
    """``{key(r): r}`` with each key's latest record: the later date wins, and of equal or
    missing dates the later in the list (the files are appended in run order)."""
    out: dict = {}
    for r in recs:
        k = key(r)
        if k not in out or str(r.get("date") or "") >= str(out[k].get("date") or ""):
            out[k] = r
    return out


def by_path(name: str):
    """The module ``name`` loaded from its file: a tool beside this one (``bench/tools/``),
    else a benchmark (``bench/``); neither folder need be a package or on ``sys.path``
    (``verify.py`` loads its benchmarks with this too)."""
    here = Path(__file__).resolve().parent
    path = here / f"{name}.py" if (here / f"{name}.py").exists() else here.parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def yes(ok) -> str:
    return "–" if ok is None else ("yes" if ok else "no")


def record(name: str, recs, short: bool = False) -> str:
    """``file · date(s) · commit(s) · machine(s)`` of the records a row reads, plus how
    many name no commit (when some do), "no command" when none names the command that
    wrote it, and "typed by hand". The machine (its CPU model, where the record has one)
    matters because the same wall-time goal is met on one CPU and missed on another; so
    does its speed on the day, where the record has ``bench/tools/speed.py``'s probe (its
    pure-Python loop's seconds: smaller is faster). ``short`` (the README):
    no machine, a date range as ``2026-12-02 – 03``, several commits as the latest one
    and ``+ N more``."""
    recs = [r for r in (recs if isinstance(recs, list) else [recs]) if isinstance(r, dict)]
    # a record's own date, else the dates one level down (replicate: machine_before/after)
    dates = sorted({str(x["date"])[:10] for r in recs
                    for x in ([r] if r.get("date") else
                              [v for v in r.values() if isinstance(v, dict)])
                    if x.get("date")})
    commits = sorted({str(r["commit"]) for r in recs if r.get("commit")})
    typed = sum(1 for r in recs if r.get("typed_by_hand"))
    if not dates:
        when = "no date"
    elif len(dates) == 1:
        when = dates[0]
    elif short and dates[0][:8] == dates[-1][:8]:
        when = f"{dates[0]} – {dates[-1][8:]}"
    else:
        when = f"{dates[0]} – {dates[-1]}"
    if not commits:
        which = "no commit"
    elif short and len(commits) > 1:
        which = f"{_latest(recs)} + {len(commits) - 1} more"
    else:
        which = ", ".join(commits)
    files = name.split(", ")
    if short and len(files) > 1:       # the README names the first; docs/results.md all
        name = f"{files[0]} + {len(files) - 1} more"
    out = [name, when, which]
    machines = sorted({_short_cpu(r["cpu"]) for r in recs if r.get("cpu")})
    if machines and not short:
        out.append(", ".join(machines))
    # the same CPU model ran 2x faster on one day than another: the speed probe says which
    probes = sorted({r["speed"]["python_s"] for r in recs if isinstance(r.get("speed"), dict)})
    if probes and not short:
        out.append(f"speed probe {', '.join(f'{p:g}' for p in probes)} s")
    missing = sum(1 for r in recs if not r.get("commit"))
    if commits and missing:              # some of the row's records name no commit
        out.append(f"{missing} of {len(recs)} without a commit")
    if recs and not any(r.get("command") for r in recs):
        out.append("no command")
    if typed:
        out.append("typed by hand" if typed == len(recs) else
                   f"{typed} of {len(recs)} typed by hand")
    return " · ".join(out)


def _latest(recs: list[dict]) -> str:
    """The commit of the most recently dated record (ties: the first in the list)."""
    dated = [r for r in recs if r.get("commit")]
    return str(max(dated, key=lambda r: str(r.get("date") or ""))["commit"])


def _short_cpu(model: str) -> str:
    """``"Intel(R) Xeon(R) Processor"`` -> ``"Intel Xeon"``: the CPU model without its
    trademark marks and generic words."""
    words = model.replace("(R)", "").replace("(TM)", "").split()
    return " ".join(w for w in words if w.lower() not in ("processor", "cpu"))


def mutation_freshness(rec: dict, files: list[str]) -> str:
    """``current`` or ``stale (...)``: a mutation record is current only when it names the
    commit it ran on and no commit since has changed the mutated files."""
    commit = rec.get("commit")
    tree = str(rec.get("tree") or "")
    if not commit and (tree.startswith(("commit ", "working tree at "))):
        commit = tree.removeprefix("commit ").removeprefix("working tree at ").split()[0]
    if not commit:
        return "stale (no commit recorded)"
    if rec.get("uncommitted"):
        return f"stale (ran on uncommitted changes to {', '.join(rec['uncommitted'])})"
    got = subprocess.run(["git", "log", "--format=%h", f"{commit}..HEAD", "--", *files],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    if got.returncode != 0:
        return f"unknown (git cannot compare {commit} with HEAD)"
    return f"stale (changed since {commit})" if got.stdout.strip() else "current"


def mutation_modules(mut: dict) -> list[dict]:
    """Per module: score, sample interval, freshness (shared by the README row and
    docs/results.md)."""
    spec = by_path("mutation").MODULES
    out = []
    for name, r in mut.get("modules", {}).items():
        if not isinstance(r, dict) or r.get("score") is None:
            continue
        files = r.get("files") or spec.get(name, {}).get("files", [])
        ci = (r.get("sample") or {}).get("score_95ci")
        out.append({"module": name, "files": files, "score": r["score"], "ci": ci,
                    "sample": r.get("sample"), "freshness": mutation_freshness(r, files),
                    "commit": r.get("commit"), "date": r.get("date"), "rec": r})
    return out
