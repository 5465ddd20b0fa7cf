"""The README's headline table, built from ``bench/results/*.json`` only.

One :class:`Row` per goal: what was measured, **one figure**, the goal, whether it is
**met**, and the record it comes from (file, date, commit). The README shows the headline
rows, one line each (:func:`headline`): the main goal of each study and every goal not met;
``docs/results.md`` opens with the table of every goal, each row with its *detail* (the other
figures and qualifiers behind the one figure) and the record's machine
(:func:`goals_table`). Rules:

- every row's goal comes from one table, :data:`GOALS`: the goal in the issue's wording
  and a test over the row's measured values (:attr:`Row.values`); *met* is ``yes`` only
  when those values meet that goal, ``no`` otherwise — never "it ran", never an
  alternative added after the measurement; :func:`check_goals` tries each test on values
  that miss and values that meet its goal, and every render runs it;
- *met* is ``–`` where the goal has no threshold (a side-by-side comparison) or where the
  figure rests on a NUTS reference that did not pass its gate (a distance to an untrusted
  reference says nothing about the goal), and then the figure itself says "NOT trusted";
- a record without a ``date`` or ``commit`` field says so; dates are not looked up
  elsewhere, so a record cannot look newer than it is;
- a record with a ``typed_by_hand`` field (what was typed and why) is marked "typed by hand";
- mutation scores are *stale* when a mutated file changed (``git log COMMIT..HEAD``) after
  the commit the record ran on, or when the record names no commit (:func:`mutation_freshness`).

Imported by ``render_results.py`` and ``verify.py``, whose scripts and benchmarks it loads by
path (:func:`by_path`: ``bench/`` is not a package).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# bench/tools/ is on the path for every caller (the scripts run from it; the tests' loader
# adds it); the names are re-exported for render_results.py, verify.py and the tests
from records import (  # noqa: F401
    by_path,
    latest_by,
    load,
    mutation_freshness,
    mutation_modules,
    record,
    yes,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"
HEADER = ["what", "measured", "goal", "met", "record"]
GOALS_HEADER = ["what", "measured", "detail", "goal", "met", "record"]


# ------------------------------------------------------------------ goals
@dataclass(frozen=True)
class Goal:
    """One goal as the issue wrote it. ``text`` is its wording, the table's goal cell (a
    ``str.format`` template over the row's values where the goal names a measured
    comparison: choix's time, how many models or settings were measured); ``test`` reads
    the row's values and is true only when they meet the goal, ``None`` where there is no
    verdict (an untrusted reference); no ``test`` at all: a side-by-side figure without a
    threshold. ``misses`` and ``meets``: values that must fail and pass the test
    (:func:`check_goals`)."""

    text: str
    test: Callable[[dict], bool | None] | None
    misses: tuple[dict, ...] = ()
    meets: tuple[dict, ...] = ()

    def verdict(self, values: dict) -> bool | None:
        if self.test is None:
            return None
        ok = self.test(values)
        return None if ok is None else bool(ok)


def _run_within(budget_s: float) -> Goal:
    """A command's wall time against its budget, ending well, on trusted references."""
    return Goal(f"≤ {budget_s:.0f} s, trusted",
                lambda v: v["rc"] == 0 and v["wall_s"] <= budget_s and v["trusted"],
                misses=({"rc": 0, "wall_s": budget_s + 1, "trusted": True},
                        {"rc": 0, "wall_s": budget_s / 2, "trusted": False},
                        {"rc": 1, "wall_s": budget_s / 2, "trusted": True}),
                meets=({"rc": 0, "wall_s": budget_s, "trusted": True},))


def _at_most(text: str, key: str, limit: float) -> Goal:
    return Goal(text, lambda v: v[key] <= limit, misses=({key: limit * 1.01},),
                meets=({key: limit},))


def _at_least(text: str, key: str, limit: float) -> Goal:
    return Goal(text, lambda v: v[key] >= limit, misses=({key: limit * 0.99},),
                meets=({key: limit},))


#: the audits' budgets (bench/bench_audit.py's)
AUDIT_BUDGETS_S = {"default": 180.0, "geometric": 120.0, "babyface": 300.0, "readlevel": 480.0}

#: every row's goal, in the issue's wording, and the test its measured values must pass
GOALS: dict[str, Goal] = {
    **{f"audit {name}": _run_within(s) for name, s in AUDIT_BUDGETS_S.items()},
    "audit --approx": _run_within(180.0),
    "paper reference": Goal(
        "≤ 20 min, trusted", lambda v: any(t and m <= 20 for m, t in v["routes"]),
        misses=({"routes": [(21.0, True), (10.0, False)]}, {"routes": []}),
        meets=({"routes": [(40.0, False), (20.0, True)]},)),
    # the collapsed Gibbs sampler (bench/tools/headline_gibbs.py)
    "gibbs medium": Goal(
        "all 4 worker types trusted at ≤ 1/5 NUTS CPU, = NUTS within MC error",
        lambda v: v["n"] == 4 and v["ok"] == 4,
        misses=({"n": 4, "ok": 3}, {"n": 3, "ok": 3}), meets=({"n": 4, "ok": 4},)),
    "gibbs real": Goal("beside NUTS's", None),
    "gibbs sbc": Goal(
        "COUPLE and CrowdBT calibrated, 200 replicates each",
        lambda v: v["models"] == 2 and v["calibrated"] == 2 and v["min_reps"] >= 200,
        misses=({"models": 2, "calibrated": 1, "min_reps": 200},
                {"models": 2, "calibrated": 2, "min_reps": 199},
                {"models": 1, "calibrated": 1, "min_reps": 200}),
        meets=({"models": 2, "calibrated": 2, "min_reps": 200},)),
    "gibbs audit": _run_within(30.0),
    "gibbs 45m": Goal("measure a sweep there and say what a trusted run would take on N "
                      "workers", None),
    # posterior SBC (bench/tools/headline_psbc.py)
    "psbc validation": Goal(
        "≥ 90 % agree; ≥ 3 of 4 in-box calibrated",
        lambda v: (v["measured"] == v["rows"] and v["agree"] >= 0.9 * v["rows"]
                   and v["inside_calibrated"] >= 3),
        misses=({"rows": 63, "measured": 18, "agree": 18, "inside": 4,
                 "inside_calibrated": 4},
                {"rows": 63, "measured": 63, "agree": 56, "inside": 4,
                 "inside_calibrated": 4},
                {"rows": 63, "measured": 63, "agree": 63, "inside": 4,
                 "inside_calibrated": 2}),
        meets=({"rows": 63, "measured": 63, "agree": 57, "inside": 4,
                "inside_calibrated": 3},)),
    "psbc power": Goal(
        "flagged in 10 of 10 seeds",
        lambda v: v["seeds"] >= 10 and v["over"] == v["seeds"] and v["prior"] == v["seeds"],
        misses=({"seeds": 10, "over": 9, "prior": 10}, {"seeds": 10, "over": 10, "prior": 9},
                {"seeds": 9, "over": 9, "prior": 9}),
        meets=({"seeds": 10, "over": 10, "prior": 10},)),
    "psbc cost": _at_most("≤ 60 s", "wall_s", 60.0),
    "psbc paper": Goal(
        "≤ 10 min; the audit as a whole ≤ 15 min",
        lambda v: v["rc"] == 0 and v["psbc_s"] <= 600 and v["audit_s"] <= 900,
        misses=({"rc": 0, "psbc_s": 601.0, "audit_s": 700.0},
                {"rc": 0, "psbc_s": 300.0, "audit_s": 901.0},
                {"rc": 1, "psbc_s": 300.0, "audit_s": 700.0}),
        meets=({"rc": 0, "psbc_s": 600.0, "audit_s": 900.0},)),
    "warm start": Goal(
        "{n} of {n}", lambda v: v["n"] > 0 and v["fewer"] == v["n"],
        misses=({"n": 2, "fewer": 1}, {"n": 0, "fewer": 0}), meets=({"n": 2, "fewer": 2},)),
    "nuts medium": Goal("both back-ends, side by side", None),
    "sbc": Goal(
        "all, 200 replicates, ≤ 30 min",
        lambda v: (v["runs"] > 0 and v["calibrated"] == v["full"] == v["timed"] == v["runs"]
                   and v["max_min"] <= 30),
        misses=({"runs": 2, "calibrated": 1, "full": 2, "timed": 2, "max_min": 10.0},
                {"runs": 2, "calibrated": 2, "full": 1, "timed": 1, "max_min": 10.0},
                {"runs": 2, "calibrated": 2, "full": 2, "timed": 2, "max_min": 31.0},
                {"runs": 0, "calibrated": 0, "full": 0, "timed": 0, "max_min": math.inf}),
        meets=({"runs": 2, "calibrated": 2, "full": 2, "timed": 2, "max_min": 30.0},)),
    "online in the box": Goal(
        "{n} of {n}", lambda v: None if v["untrusted"] else v["n"] > 0 and v["inside"] == v["n"],
        misses=({"n": 4, "inside": 3, "untrusted": 0}, {"n": 0, "inside": 0, "untrusted": 0}),
        meets=({"n": 4, "inside": 4, "untrusted": 0},)),
    "babyface ep": Goal(
        "≤ 0.5×", lambda v: v["ratio"] <= 0.5 if v["trusted"] else None,
        misses=({"ratio": 0.51, "trusted": True},), meets=({"ratio": 0.5, "trusted": True},)),
    # issue 44: "one method inside the box per medium worker type at ≤ 1/5 of NUTS's CPU";
    # a setting without one is not met, whatever diagnosis of it was made afterwards
    "ppl in the box": Goal(
        "one method inside the box per medium worker type at ≤ 1/5 of NUTS's CPU",
        lambda v: None if v["open"] else v["n"] > 0 and v["inside"] == v["n"],
        misses=({"n": 4, "inside": 0, "open": 0}, {"n": 4, "inside": 3, "open": 0},
                {"n": 0, "inside": 0, "open": 0}),
        meets=({"n": 4, "inside": 4, "open": 0},)),
    # the simplex-following approximations: one method inside the box at ≤ 1/10 of NUTS's
    # CPU on every named subject, and the new methods no farther than the old best
    "simplex in the box": Goal(
        "one each: medium ×4, BabyFace, default COUPLE",
        lambda v: None if v["open"] else v["inside"] == v["n"],
        misses=({"n": 6, "inside": 5, "open": 0}, {"n": 6, "inside": 0, "open": 0}),
        meets=({"n": 6, "inside": 6, "open": 0},)),
    "simplex distance": Goal(
        "best new method ≤ today's best distance, every subject",
        lambda v: None if v["open"] else v["ok"] == v["n"],
        misses=({"n": 6, "ok": 5, "open": 0},), meets=({"n": 6, "ok": 6, "open": 0},)),
    # a method that ran is not a method that can be trusted: k̂ ≤ 0.7 is
    "ppl paper scale": Goal(
        "a method reliable (k̂ ≤ 0.7) in 20 min",
        lambda v: any(k <= 0.7 for k in v["khats"]),
        misses=({"khats": [2.63, 12.3]}, {"khats": []}), meets=({"khats": [0.7, 21.0]},)),
    "online kernel": _at_least("≥ 3 M/s", "rate", 3e6),
    "online end to end": _at_least("≥ 3 M/s", "rate", 3e6),
    "pl vs openskill": _at_least("≥ 150×", "ratio", 150.0),
    "couple : pl": _at_most("≤ 2.8 (the paper's)", "ratio", 2.8),
    "stream csv": _at_most("≤ 120 s", "wall_s", 120.0),
    "stream parquet": _at_most("≤ 60 s", "wall_s", 60.0),
    "stream memory": _at_most("≤ 1 GB", "peak_mb", 1000.0),
    "stream small": _at_most("≤ 2 s", "wall_s", 2.0),
    "stream identical": Goal(
        "identical", lambda v: v["checked"] > 0 and v["same"],
        misses=({"checked": 2, "same": False}, {"checked": 0, "same": True}),
        meets=({"checked": 1, "same": True},)),
    "map vs choix": Goal(
        "≤ choix's {choix_s:.1f} s", lambda v: v["optimum"] and v["seconds"] <= v["choix_s"],
        misses=({"seconds": 5.0, "choix_s": 4.0, "optimum": True},
                {"seconds": 0.1, "choix_s": 4.0, "optimum": False}),
        meets=({"seconds": 4.0, "choix_s": 4.0, "optimum": True},)),
    "bootstrap": _at_most("≤ 30 s", "seconds", 30.0),
    "crowdc": Goal(
        "≥ 0.95",
        lambda v: v["tau_ratio"] >= 0.95 and v["saving_45_50"] and v["seconds"] <= 600,
        misses=({"tau_ratio": 0.919, "saving_45_50": True, "seconds": 200.0},
                {"tau_ratio": 0.96, "saving_45_50": False, "seconds": 200.0},
                {"tau_ratio": 0.96, "saving_45_50": True, "seconds": 601.0}),
        meets=({"tau_ratio": 0.95, "saving_45_50": True, "seconds": 600.0},)),
    "replicate babyface": Goal(
        "paper's 92.30 % ± 1",
        lambda v: abs(v["accuracy"] - 92.30) <= 1 and v["same_six"] and v["seconds"] <= 180,
        misses=({"accuracy": 93.31, "same_six": True, "seconds": 100.0},
                {"accuracy": 92.3, "same_six": False, "seconds": 100.0},
                {"accuracy": 92.3, "same_six": True, "seconds": 181.0},
                {"accuracy": math.nan, "same_six": True, "seconds": 100.0}),
        meets=({"accuracy": 91.5, "same_six": True, "seconds": 180.0},)),
    "replicate fig7": _at_most("≤ 10 min", "seconds", 600.0),
    "replicate cost": Goal("beside the paper's 2.8", None),
    "dask": Goal(
        "≤ 10 %, same results", lambda v: v["overhead"] <= 0.10 and v["same"],
        misses=({"overhead": 0.11, "same": True}, {"overhead": 0.0, "same": False}),
        meets=({"overhead": 0.10, "same": True},)),
    "mutation": Goal(
        "all, current", lambda v: v["n"] > 0 and v["current"] == v["n"] and not v["low"],
        misses=({"n": 10, "current": 9, "low": 0}, {"n": 10, "current": 10, "low": 1},
                {"n": 0, "current": 0, "low": 0}),
        meets=({"n": 10, "current": 10, "low": 0},)),
    # the minutes pytest printed and its counts, not a "met" written into the record
    "suite": Goal(
        "≤ 15 min, all pass",
        lambda v: (v["minutes"] <= 15 and v["passed"] > 0 and not v["failed"]
                   and not v["errors"]),
        misses=({"minutes": 15.1, "passed": 10, "failed": 0, "errors": 0},
                {"minutes": 10.0, "passed": 10, "failed": 1, "errors": 0},
                {"minutes": 10.0, "passed": 10, "failed": 0, "errors": 1},
                {"minutes": 10.0, "passed": 0, "failed": 0, "errors": 0}),
        meets=({"minutes": 15.0, "passed": 10, "failed": 0, "errors": 0},)),
}


def check_goals(goals: dict[str, Goal] | None = None) -> None:
    """Every goal's test fails each of its ``misses`` and passes each of its ``meets``, and
    every goal with a threshold has both: a test loosened to pass anything (or a goal
    whose alternative was added after measuring) fails here, before a table is rendered."""
    goals = GOALS if goals is None else goals
    bad = []
    for key, g in goals.items():
        if g.test is None:
            continue
        if not g.misses or not g.meets:
            bad.append(f"{key}: no values that miss and meet it")
        bad += [f"{key}: {v} passes {g.text!r}" for v in g.misses if g.verdict(v) is not False]
        bad += [f"{key}: {v} fails {g.text!r}" for v in g.meets if g.verdict(v) is not True]
    if bad:
        raise ValueError("the goal table does not hold its goals as written:\n  "
                         + "\n  ".join(bad))


@dataclass(frozen=True)
class Row:
    """One goal. ``figure`` is one figure (plus "NOT trusted" where it rests on an
    untrusted reference); ``key`` names its goal in :data:`GOALS`, whose test reads
    ``values`` (what was measured); ``detail`` the rest, shown in docs/results.md only;
    ``recs`` the records the row reads, from the file ``source``; ``headline``: also in
    the README."""

    what: str
    figure: str
    key: str
    values: dict = field(compare=False)
    source: str = ""
    recs: object = None
    detail: str = ""
    headline: bool = True

    @property
    def goal(self) -> str:
        return GOALS[self.key].text.format(**self.values)

    @property
    def met(self) -> str:
        return yes(GOALS[self.key].verdict(self.values))

    @property
    def record(self) -> str:
        return record(self.source, self.recs)

    @property
    def short_record(self) -> str:
        return record(self.source, self.recs, short=True)


# ------------------------------------------------------------------ rows
def _trusted(figure: str, trusted: bool) -> str:
    return figure if trusted else f"{figure}, NOT trusted"


def audit_rows(d: Path) -> list[Row]:
    """The audits' wall times against their budgets; every goal includes trusted
    references (the audit's verdict), so an untrusted one fails the row and says so."""
    audit = load(d, "audit.json") or []
    specs = [("default", "`crowdrank audit` (embedded default)", "gold-task priors"),
             ("geometric", "`audit`, geometric worker prior",
              "`--worker-prior geometric:a0=10,a=6`"),
             ("babyface", "`audit babyface --quick`", "geometric prior"),
             ("readlevel", "`audit readlevel --quick`", "geometric prior")]
    rows = []
    for name, label, prior in specs:
        r = next((x for x in audit if x.get("name") == name), None)
        if r is None:
            continue
        trusted = all(r[m]["trusted"] for m in ("couple", "crowdbt") if m in r)
        cache = str(r.get("xla_cache") or "")
        detail = [prior, "COUPLE and CrowdBT references "
                  + ("trusted" if trusted else "NOT both trusted")]
        detail.append("every program compiled (empty cache)" if cache.startswith("cold") else
                      "programs from the user's cache" if cache else "")
        row = Row(label, _trusted(f"{r['wall_s']:.0f} s", trusted), f"audit {name}",
                  {"rc": r.get("rc"), "wall_s": r["wall_s"], "trusted": trusted},
                  "audit.json", r, "; ".join(x for x in detail if x))
        # the geometric prior's run is a variant of the default's: in the README when missed
        rows.append(dataclasses.replace(row, headline=name != "geometric" or row.met != "yes"))
    return rows


def paper_row(d: Path) -> list[Row]:
    """The trusted reference at paper scale: each route (joint NUTS, the Gibbs route) as its
    latest record measured it (the file keeps the older runs); the fastest completed route
    is the figure."""
    def route(r):
        if r.get("sampler") == "collapsed Gibbs":
            return "collapsed Gibbs"
        return "Gibbs route" if r.get("eta_update") == "gibbs" else "joint NUTS"

    latest = latest_by([r for r in (load(d, "reference_paper.json") or [])
                        if r.get("what") == "paper"], route)
    gibbs = [{"sampler": "collapsed Gibbs", "end_to_end_s": r["end_to_end_wall_s"],
              "trusted": r["gibbs"]["trusted"], "date": r.get("date"),
              "commit": r.get("commit"), "command": r.get("command")}
             for r in (load(d, "gibbs.json") or []) if r.get("what") == "paper"]
    latest.update(latest_by(gibbs, route))
    paper = [latest[k] for k in ("joint NUTS", "Gibbs route", "collapsed Gibbs")
             if k in latest]
    if not paper:
        return []
    parts, done = [], []
    for r in paper:
        if r.get("status"):
            stop = r.get("wall_s_until_stopped")
            parts.append(f"{route(r)}: not completed" + (f" (stopped after {stop / 60:.0f} min)"
                                                       if stop else ""))
            continue
        mins = r.get("end_to_end_s", float("nan")) / 60
        done.append((mins, bool(r.get("trusted"))))
        parts.append(f"{route(r)} {mins:.1f} min, "
                     + ("trusted" if r.get("trusted") else "NOT trusted"))
    best = min(done, key=lambda x: (not x[1], x[0])) if done else None
    figure = _trusted(f"{best[0]:.1f} min", best[1]) if best else "not completed"
    return [Row("trusted COUPLE reference, 450,000 rankings", figure,
                "paper reference", {"routes": done},
                "reference_paper.json + gibbs.json" if "collapsed Gibbs" in latest
                else "reference_paper.json", paper,
                "; ".join(parts) + "; NUTS 4 chains, collapsed Gibbs 2, on 2 cores")]


def warmstart_row(d: Path) -> list[Row]:
    """The online posterior as NUTS's warm start: per model, the warm-up gradients of the
    shortest tune trusted on every seed, default start against the online start."""
    ws = load(d, "reference_warmstart.json")
    if not ws or not any(r.get("what") == "warmstart_ladder" for r in ws):
        return []
    br = by_path("bench_reference")
    # each (model, start) as its latest ladder run measured it (older runs stay in the file)
    ladder = br.latest_runs(ws) or [r for r in ws if r.get("what") == "warmstart_ladder"]
    st = br.shortest_trusted(ladder)
    models = [m for m in ("couple", "crowdbt") if (m, "default") in st or (m, "online") in st]
    parts, fewer = [], 0
    for m in models:
        a, b = st.get((m, "default")), st.get((m, "online"))
        fmt = (lambda x: f"{x['warmup_gradients']:,.0f}" if x else "none")
        parts.append(f"{m} {fmt(a)} → {fmt(b)}")
        fewer += bool(a is not None and b is not None
                      and b["warmup_gradients"] < a["warmup_gradients"])
    return [Row("warm start: models needing less warm-up",
                f"{fewer} of {len(models)}", "warm start", {"n": len(models), "fewer": fewer},
                "reference_warmstart.json", ladder,
                ("warm-up gradients of the shortest tune trusted on every seed, default → "
                 "online start: " + "; ".join(parts)))]


def medium_row(d: Path) -> list[Row]:
    """ESS per CPU second of the medium references: each back-end and worker type's latest
    run (the file keeps every run; a dated run supersedes older and undated ones), the
    figure the lowest over those that are trusted, the untrusted ones named."""
    med = load(d, "reference_medium.json")
    if not med:
        return []
    latest = list(latest_by(med, lambda r: (r["backend"], r.get("model", "couple"),
                                            r.get("setting", "amateur"))).values())
    by: dict = {}
    for r in latest:
        if r.get("trusted") and r.get("ess_bulk_per_cpu_s"):
            by.setdefault(r["backend"], []).append(r["ess_bulk_per_cpu_s"])
    low = min((min(v), b) for b, v in by.items()) if by else None
    text = "; ".join(f"{b} {min(v):.1f}–{max(v):.1f}" for b, v in sorted(by.items()))
    bad = [f"{r['backend']} {r.get('model', 'couple')} {r.get('setting', 'amateur')}"
           for r in latest if not r.get("trusted")]
    return [Row("NUTS at medium scale: min bulk ESS per CPU-s",
                f"{low[0]:.1f} ({low[1]})" if low else "no trusted run",
                "nuts medium", {}, "reference_medium.json", latest,
                f"L=100, W=50, each back-end and worker type's latest run: "
                f"{len(latest) - len(bad)} of {len(latest)} trusted ({text})"
                + (f"; NOT trusted: {', '.join(bad)}" if bad else ""), headline=False)]


def sbc_row(d: Path) -> list[Row]:
    sbc = load(d, "sbc.json")
    if not sbc:
        return []
    last: dict = {}
    for r in sbc.get("runs", []):
        key = (r["model"], r["backend"])
        if key not in last or r.get("reached_200_replicates") or not last[key].get(
                "reached_200_replicates"):
            last[key] = r
    runs = list(last.values())
    cal = [r for r in runs if (r.get("nuts") or {}).get("calibrated")]
    full = [r for r in runs if r.get("reached_200_replicates")]
    walls = [r["measured_200_replicates_wall_s"] / 60 for r in full
             if r.get("measured_200_replicates_wall_s") is not None]
    detail = (f"10 items, 4 workers, 100 rankings; {len(full)} of {len(runs)} reached 200 "
              "replicates" + (f", {min(walls):.0f}–{max(walls):.0f} min each" if walls else ""))
    return [Row("SBC of NUTS: model × back-end pairs calibrated", f"{len(cal)} of {len(runs)}",
                "sbc", {"runs": len(runs), "calibrated": len(cal), "full": len(full),
                        "timed": len(walls), "max_min": max(walls, default=math.inf)},
                "sbc.json", runs, detail)]


def batch_rows(d: Path) -> list[Row]:
    b = load(d, "batch.json")
    if not b:
        return []
    rows = []
    fits = {f["method"]: f for f in b.get("fits", [])}
    ours = fits.get("crowdrank newton (tol 1e-7)")
    choix = fits.get("choix opt_pairwise Newton-CG")
    if ours and choix:
        # the fits may come from an earlier run than the file's header (fits_from)
        src = b.get("fits_from") or b
        both = ours["within_1e-6"] and choix["within_1e-6"]
        tol = (lambda f: f["tolerance"].replace("max|grad| <=", "max gradient ≤"))
        rows.append(Row(f"MAP of BT, read-level ({b['items']} items): Newton",
                        f"{ours['seconds']:.2f} s" + ("" if both else ", NOT at the optimum"),
                        "map vs choix", {"seconds": ours["seconds"],
                                         "choix_s": choix["seconds"], "optimum": both},
                        "batch.json", src,
                        (f"Newton ({tol(ours)}) against choix's Newton-CG ({tol(choix)}); "
                         + ("both" if both else "NOT both") + " within 1e-6 of the optimum")))
    runs = (b.get("bootstrap") or {}).get("runs") or []
    if runs:
        r = min(runs, key=lambda x: x["seconds"])
        rows.append(Row(f"bootstrap of BT, read-level ({b['bootstrap']['resamples']} resamples)",
                        f"{r['seconds']:.1f} s", "bootstrap", {"seconds": r["seconds"]},
                        "batch.json", b, "the fastest of the runs", headline=r["seconds"] > 30))
    return rows


def crowdc_row(d: Path) -> list[Row]:
    c = load(d, "crowdc.json")
    if not c:
        return []
    cl = c.get("claim") or {}
    detail = ("comparisons saved 45–50 %: " + yes(cl.get("saving_45_50"))
              + f"; {c['seconds_total']:.0f} s (goal ≤ 10 min)")
    # the other two parts of the claim, in the figure only when they fail
    miss = ([] if cl.get("saving_45_50") else ["saving NOT 45–50 %"]) + \
        ([] if c["seconds_total"] <= 600 else [f"{c['seconds_total']:.0f} s"])
    return [Row("`replicate crowdc`: lowest τ ratio against BTL",
                f"{cl.get('min_tau_ratio', float('nan')):.3f}" + "".join(f", {m}" for m in miss),
                "crowdc", {"tau_ratio": cl.get("min_tau_ratio", math.nan),
                           "saving_45_50": bool(cl.get("saving_45_50")),
                           "seconds": c["seconds_total"]},
                "crowdc.json", c, detail)]


def fidelity_rows(d: Path) -> list[Row]:
    fid = load(d, "fidelity.json")
    if not fid or not fid.get("goals"):
        return []
    goals, rows = fid["goals"], []
    subjects = {s.get("name"): s for s in fid.get("subjects", []) if isinstance(s, dict)}
    med = [(k.removeprefix("medium-"), g) for k, g in goals.items() if k.startswith("medium-")]
    if med:
        inside = [n for n, g in med if g.get("variants_in_goal")]
        zs = [(g.get("closest_within_cost") or {}).get("centred_abs_z") for _, g in med]
        zs = [z for z in zs if z is not None]
        untrusted = [n for n, g in med if not g.get("trusted")]
        figure = f"{len(inside)} of {len(med)} settings" + (
            f", reference NOT trusted for {', '.join(untrusted)}" if untrusted else "")
        rows.append(Row("online variant in the box, medium scale", figure,
                        "online in the box", {"n": len(med), "inside": len(inside),
                                              "untrusted": len(untrusted)},
                        "fidelity.json", [subjects.get(f"medium-{n}") for n, _ in med],
                        ("box: centred |z| ≤ 0.1, sd ratio in [0.9, 1.1], ≤ 10× the one-pass's "
                         "cost" + (f"; closest |z| {min(zs):.2f}" if zs else ""))))
    bf = goals.get("babyface")
    if bf:
        def worse(g):          # the goal holds when both ratios are at most 0.5
            return max(g["centred_z_ratio"], g["order_ratio"])

        best_label, best = min(bf.items(), key=lambda kv: worse(kv[1]))
        # the figure is what `fit --method ep` gives when the study measured it; the best
        # of all variants is then the detail
        label = "ep default" if "ep default" in bf else best_label
        shown = bf[label]
        subj = next((s for n, s in subjects.items() if n and n.startswith("babyface")), {})
        gates = subj.get("per_variable_gate") or {}
        greek = {"lambda": "λ", "eta": "η"}
        passing = [greek.get(v, v) for v, g in gates.items() if g.get("passes")]
        trusted = bool(subj.get("trusted"))
        detail = (f"{'the default EP' if label == 'ep default' else 'the best EP variant'}"
                  f"'s centred |z| {shown['centred_z_ratio']:.2f}×, order sensitivity "
                  f"{shown['order_ratio']:.2f}× the one-pass's")
        if label == "ep default":
            detail += (f"; the best of {len(bf)} EP variants ({best_label}) "
                       f"{worse(best):.2f}×")
        if not trusted:
            detail += f"; reference NOT trusted (only {', '.join(passing) or 'none'} passes)"
        what = "default EP" if label == "ep default" else f"EP (best of {len(bf)} variants)"
        rows.append(Row(f"{what} vs one-pass, BabyFace",
                        _trusted(f"{worse(shown):.2f}×", trusted), "babyface ep",
                        {"ratio": worse(shown), "trusted": trusted}, "fidelity.json", subj,
                        detail))
    return rows


def online_rows(d: Path) -> list[Row]:
    online = load(d, "online.json")
    if not online:
        return []
    s = next((r for r in online if r.get("what") == "summary"), {})
    couple = next((r for r in online if r.get("what") == "method"
                   and r.get("method") == "couple"), {})
    setup = next((r for r in online if r.get("what") == "setup"), {})
    n = f"{setup.get('rankings', 450_000):,} rankings"
    rows = []
    for label, v, detail in (
            ("kernel", couple.get("rankings_per_s"),
             f"{n}; the kernel alone, compile excluded, best of the repeats"),
            ("end to end", couple.get("end_to_end_rankings_per_s"),
             f"{n}; `fit_online` end to end")):
        if v is not None:
            # the README shows the kernel; end to end (met) in docs/results.md only
            met = GOALS[f"online {label}"].verdict({"rate": v})
            rows.append(Row(f"OnlineGBMM (COUPLE), {label}", f"{v / 1e6:.2f} M/s",
                            f"online {label}", {"rate": v}, "online.json", s, detail,
                            headline=label == "kernel" or not met))
    if "pl_vs_openskill" in s:
        rows.append(Row("OnlinePL against openskill's `rate()`", f"{s['pl_vs_openskill']:g}×",
                        "pl vs openskill", {"ratio": s["pl_vs_openskill"]}, "online.json", s,
                        "openskill's `PlackettLuce.rate()`, time per ranking"))
    if "couple_pl_cost_ratio" in s:
        ok = GOALS["couple : pl"].verdict({"ratio": s["couple_pl_cost_ratio"]})
        rows.append(Row("COUPLE : PL time per ranking (kernels)",
                        f"{s['couple_pl_cost_ratio']:.2f}", "couple : pl",
                        {"ratio": s["couple_pl_cost_ratio"]}, "online.json", s, "",
                        headline=not ok))
    return rows


def scale_rows(d: Path) -> list[Row]:
    sc = load(d, "scale.json")
    if not sc:
        return []
    # a run's record with the file's command and provenance beneath its own fields
    top = {k: sc[k] for k in ("date", "commit", "command") if k in sc}
    runs = {r["rankings"]: {**top, **r} for r in sc.get("runs", [])}
    rows = []
    big = runs.get(max(runs)) if runs else None
    if big:
        m = f"{big['rankings'] / 1e6:g} M"
        c, q = big.get("csv") or {}, big.get("parquet") or {}
        peak = max(c.get("peak_rss_mb", 0), q.get("peak_rss_mb", 0))
        cw, qw = c.get("wall_s", float("nan")), q.get("wall_s", float("nan"))
        whole = "the whole `crowdrank fit --method online` command, streamed"
        rows.append(Row(f"streamed online fit, {m} rankings, CSV", f"{cw:.1f} s", "stream csv",
                        {"wall_s": cw}, "scale.json", big, whole))
        rows.append(Row("the same from Parquet", f"{qw:.1f} s", "stream parquet",
                        {"wall_s": qw}, "scale.json", big, whole, headline=not qw <= 60))
        rows.append(Row("the same: peak memory", f"{peak:.0f} MB", "stream memory",
                        {"peak_mb": peak}, "scale.json", big, "the larger of CSV and Parquet",
                        headline=peak > 1000))
    small = runs.get(min(runs)) if runs else None
    if small and small is not big:
        w = (small.get("csv") or {}).get("wall_s", float("nan"))
        # docs/results.md only: the README keeps to one screen
        rows.append(Row(f"the same, {small['rankings'] / 1e6:g} M rankings, CSV", f"{w:.2f} s",
                        "stream small", {"wall_s": w}, "scale.json", small, "2 cores",
                        headline=False))
    checked = [r for r in runs.values() if "identical_to_in_memory" in r]
    if checked:
        same = all(r["identical_to_in_memory"] for r in checked)
        top = max(r["rankings"] for r in checked)
        unchecked = [f"{n / 1e6:g} M" for n in runs if "identical_to_in_memory" not in runs[n]]
        rows.append(Row("streamed fit: the same numbers as in memory",
                        f"{yes(same)}, up to {top / 1e6:g} M",
                        "stream identical", {"checked": len(checked), "same": same},
                        "scale.json", checked,
                        "checked at " + ", ".join(f"{r['rankings'] / 1e6:g} M" for r in checked)
                        + (f"; not checked at {', '.join(unchecked)}" if unchecked else ""),
                        headline=not same))
    return rows


def mutation_row(d: Path) -> list[Row]:
    mut = load(d, "mutation.json")
    if not mut:
        return []
    mods = mutation_modules(mut)
    cur = [m for m in mods if m["freshness"] == "current"]
    low = [m for m in mods if m["score"] < 0.9 or (m["ci"] and m["ci"][0] < 0.9)]
    good = [m for m in cur if m not in low]
    detail = (f"{len(cur)} current, {len(mods) - len(low)} at ≥ 90 % (a sample's lower end); "
              "the fast tests; per module below")
    return [Row("core modules ≥ 90 % in mutation testing",
                f"{len(good)} of {len(mods)}", "mutation",
                {"n": len(mods), "current": len(cur), "low": len(low)}, "mutation.json",
                [m["rec"] for m in mods], detail)]


def suite_row(d: Path) -> list[Row]:
    """The test suite's time from a fresh clone (``bench/bench_suite.py``); a run with
    failures or errors does not meet the goal whatever its time, and says so in its figure. The
    detail gives the machine's speed probe and the previous run, as machines of one name
    ran the same suite at speeds 2x apart."""
    s = load(d, "suite.json")
    if not s:
        return []
    bad = ", ".join(f"{s[k]} {w}" for k, w in (("failed", "failed"), ("errors", "errors"))
                    if s.get(k))
    fig = f"{s['pytest_minutes']:.1f} min" + (f", {bad}" if bad else "")
    detail = f"`.ci/run` on 2 cores; {s['passed']:,} passed" + (f", {bad}" if bad else "")
    if s.get("speed"):
        detail += (f"; this machine's speed probe (bench/tools/speed.py, smaller is faster): "
                   f"Python {s['speed']['python_s']:g} s, XLA compile "
                   f"{s['speed']['xla_compile_s']:g} s")
    if s.get("history"):
        h = s["history"][0]
        detail += (f"; the run before: {h['pytest_minutes']:.1f} min at {h.get('commit')} "
                   f"({str(h.get('date'))[:10]}"
                   + (")" if not h.get("speed") else
                      f", probe Python {h['speed']['python_s']:g} s)"))
    return [Row("`make test`, fresh clone, cold caches", fig,
                "suite", {"minutes": s["pytest_minutes"], "passed": s.get("passed", 0),
                          "failed": s.get("failed", 0), "errors": s.get("errors", 0)},
                "suite.json", s, detail)]


def replicate_rows(d: Path) -> list[Row]:
    rows = []
    bf = load(d, "replicate_babyface.json")
    if bf:
        e = bf["summary"]["sets"][0]
        mine = [c for c in e["cleaned"] if "couple" in c["detected_by"]]
        acc = mine[0]["accuracy"]["couple"]["mean"] if mine else float("nan")
        miss = ([] if e.get("same_six") else ["NOT the same six workers"]) + \
            ([] if bf["wall_seconds"] <= 180 else [f"{bf['wall_seconds']:.0f} s"])
        rows.append(Row("`replicate babyface`: cleaned COUPLE accuracy",
                        f"{acc:.2f} %" + "".join(f", {m}" for m in miss),
                        "replicate babyface", {"accuracy": acc, "same_six": bool(e.get("same_six")),
                                               "seconds": bf["wall_seconds"]},
                        "replicate_babyface.json", bf,
                        (f"R = {bf['repeats']}; the same six noisy workers: "
                         f"{yes(e.get('same_six'))}; {bf['wall_seconds']:.0f} s (≤ 3 min)")))
    f7 = load(d, "replicate_fig7.json")
    if f7:
        s = f7["summary"]
        held = s["claims"]["couple_best_everywhere"] and s["claims"]["couple_stable_from_20pct"]
        rows.append(Row(f"`replicate fig7`, paper scale (R = {f7['repeats']})",
                        f"{f7['wall_seconds']:.0f} s", "replicate fig7",
                        {"seconds": f7["wall_seconds"]}, "replicate_fig7.json", f7,
                        f"the paper's claims hold: {yes(held)} (per setting below)",
                        headline=f7["wall_seconds"] > 600))
    cost = load(d, "replicate_cost.json")
    if cost:
        r = cost["summary"]["cost"]["babyface"]["ratio_to_pl"]["couple:pl (cpu, whole pass)"]
        rows.append(Row("`replicate cost`: COUPLE : OnlinePL, BabyFace", f"{r:.2f}",
                        "replicate cost", {}, "replicate_cost.json", cost,
                        "CPU time per ranking, whole pass", headline=False))
    dk = load(d, "replicate_dask.json")
    if dk:
        same = all(x["identical_results"] for x in dk["runs"])
        ok = GOALS["dask"].verdict({"overhead": dk["overhead_best"], "same": same})
        rows.append(Row(f"Dask against the process pool ({dk['tasks']} tasks): overhead",
                        f"{100 * dk['overhead_best']:+.1f} %"
                        + ("" if same else ", results NOT identical"),
                        "dask", {"overhead": dk["overhead_best"], "same": same},
                        "replicate_dask.json", dk,
                        f"identical results: {yes(same)}", headline=not ok))
    return rows


def approx_study_rows(d: Path) -> list[Row]:
    """The approximations at medium scale (any method of the study): one inside the box
    (centred and η¹) at ≤ 1/5 of the trusted reference's CPU seconds, per worker type; a setting whose
    reference is untrusted or that did not run leaves the goal open."""
    st = load(d, "approx_study.json")
    if not st:
        return []
    med = [s for s in st.get("subjects", []) if s.get("name", "").startswith("medium-")]
    if not med:
        return []
    met, open_ = [], []
    for s in med:
        ref = (s.get("reference") or {}).get("cpu_s")
        done = [m for m in s.get("methods", []) if m.get("status") == "done"]
        if not ref or not s.get("trusted") or not done:
            open_.append(s["name"].removeprefix("medium-"))
        elif any(m.get("inside_box") and m["cpu_s"] * 5 <= ref for m in done):
            met.append(s["name"].removeprefix("medium-"))
    ran = len(med) - len(open_)
    detail = f"{len(met)} of {ran} settings measured have one" + (
        f" ({', '.join(met)})" if met else "")
    if open_:
        detail += f"; not run or untrusted: {', '.join(open_)}"
    # one figure (the settings with a method inside), and how many are still open
    figure = f"{len(met)} of {len(med)}" + (f", {len(open_)} open" if open_ else "")
    # what keeps the methods out of the box was diagnosed afterwards (approx_diagnose.json,
    # its own section of docs/results.md): that is no method inside, and not read here
    return [Row("medium: in the box", figure, "ppl in the box",
                {"n": len(med), "inside": len(met), "open": len(open_)}, "approx_study.json",
                # the study's first run and the runs of some methods merged into it since
                [{k: st[k] for k in ("date", "commit", "command") if k in st},
                 *st.get("merged_runs", [])],
                "one setting per worker type; " + detail)]


def approx_audit_row(d: Path) -> list[Row]:
    """``crowdrank audit --approx advi,fullrank-advi,pathfinder,laplace`` on the embedded
    default, end to end: its wall time against the 3-min goal, both references trusted."""
    r = load(d, "approx.json")
    if not r or "wall_s" not in r:
        return []
    trusted = all(m.get("reference_trusted") for m in (r.get("models") or {}).values())
    return [Row("`audit --approx` (4 PPL methods)",
                _trusted(f"{r['wall_s']:.0f} s", trusted), "audit --approx",
                {"rc": r.get("rc"), "wall_s": r["wall_s"], "trusted": trusted}, "approx.json", r,
                f"`{r['command'].replace(' --out DIR', '')}`")]


def approx_paper_row(d: Path) -> list[Row]:
    """The approximations at paper scale (450,000 rankings), judged by k̂ (no NUTS
    reference exists there): the goal is a method whose draws are reliable (k̂ ≤ 0.7)
    among those that fit in the 20-min budget; that every method ran, or how low the best
    k̂ came, is the detail, not the verdict."""
    r = load(d, "approx_paper.json")
    if not r or not r.get("methods"):
        return []
    ms = r["methods"]
    done = [m for m in ms if m.get("status") == "done"]
    ks = [(m["khat"], m.get("label", "?")) for m in done if m.get("khat") is not None]
    reliable = [k for k, _ in ks if k <= 0.7]
    figure = (f"{len(reliable)} of {len(ms)} reliable" if reliable else
              "none reliable" if ks else "none fit")
    detail = f"{len(done)} of {len(ms)} methods fit in 20 min on 2 cores"
    if ks:
        best = min(ks)
        detail += f"; best k̂ {best[0]:.2f} ({best[1]})"
    return [Row("PPL approximations, 450,000 rankings", figure, "ppl paper scale",
                {"khats": [k for k, _ in ks]}, "approx_paper.json", r,
                detail + "; k̂ ≤ 0.7 is reliable")]


#: the rows in README order; each returns zero rows when its record is absent
def psbc_rows(d: Path) -> list[Row]:
    """Posterior SBC's rows (``bench/tools/headline_psbc.py``)."""
    from headline_psbc import psbc_rows as rows_of

    return rows_of(d)


def simplex_rows(d: Path) -> list[Row]:
    """The simplex-following approximations' rows (``bench/tools/headline_simplex.py``)."""
    from headline_simplex import simplex_rows as rows_of

    return rows_of(d)


def gibbs_rows(d: Path) -> list[Row]:
    """The collapsed Gibbs sampler's rows (``bench/tools/headline_gibbs.py``)."""
    from headline_gibbs import gibbs_rows as rows_of

    return rows_of(d)


ROWS = (audit_rows, approx_audit_row, paper_row, gibbs_rows, warmstart_row, medium_row,
        sbc_row, psbc_rows,
        fidelity_rows, approx_study_rows, simplex_rows, approx_paper_row, online_rows, scale_rows,
        batch_rows, crowdc_row, replicate_rows, mutation_row, suite_row)


def rows(results_dir: Path | str = RESULTS) -> list[Row]:
    """Every row, built once per state of the records: the README's table and the results
    page are rendered from the same rows in one run, and the mutation row asks git about
    each module (a dozen calls), so a second build is served from memory until a record
    changes."""
    check_goals()
    d = Path(results_dir).resolve()
    state = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                  for p in sorted(d.glob("*.json")))
    return list(_rows(d, state))


@functools.lru_cache(maxsize=8)
def _rows(d: Path, state: tuple) -> tuple[Row, ...]:
    return tuple(row for fn in ROWS for row in fn(d))


def _table(header: list[str], lines: list[list[str]]) -> list[str]:
    cell = (lambda v: str(v).replace("|", "\\|").replace("\n", " "))
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(cell(c) for c in r) + " |" for r in lines])


def headline(results_dir: Path | str = RESULTS) -> str:
    """The README's table: the headline rows, one figure each, the short record."""
    lines = [[r.what, r.figure, r.goal, r.met, r.short_record]
             for r in rows(results_dir) if r.headline]
    return f"{BEGIN}\n" + "\n".join(_table(HEADER, lines)) + f"\n{END}"


def goals_table(results_dir: Path | str = RESULTS) -> str:
    """docs/results.md's table of every goal, with each row's detail and full record."""
    lines = [[r.what, r.figure, r.detail or "–", r.goal, r.met, r.record]
             for r in rows(results_dir)]
    return "\n".join(_table(GOALS_HEADER, lines))


def readme_with_headline(readme_text: str, results_dir: Path | str = RESULTS) -> str:
    a, b = readme_text.index(BEGIN), readme_text.index(END) + len(END)
    return readme_text[:a] + headline(results_dir) + readme_text[b:]
