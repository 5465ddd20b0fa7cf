"""The README's headline table, built from ``bench/results/*.json`` only.

One row per goal: what was measured, one figure, the goal, whether it is **met**, and the
record it comes from (file, date, commit, and "typed by hand" where a record says it was).
The detail behind each row is in ``docs/results.md`` (``bench/tools/render_results.py``). Rules:

- *met* is ``yes`` / ``no`` against the goal as written; ``–`` where the goal has no
  threshold (a side-by-side comparison) or where the figure rests on a NUTS reference that
  did not pass its gate (a distance to an untrusted reference says nothing about the goal);
- a record without a ``date`` or ``commit`` field says so; dates are not looked up
  elsewhere, so a record cannot look newer than it is;
- a record with a ``typed_by_hand`` field (what was typed and why) is marked "typed by hand";
- mutation scores are *stale* when a mutated file changed (``git log COMMIT..HEAD``) after
  the commit the record ran on, or when the record names no commit (:func:`mutation_freshness`).

Imported by ``render_results.py`` and ``verify.py``, whose scripts and benchmarks it loads by
path (:func:`by_path`: ``bench/`` is not a package).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"
HEADER = ["what", "measured", "goal", "met", "record"]


def _load(d: Path, name: str):
    p = d / name
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None


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


def record(name: str, recs) -> str:
    """``file · date(s) · commit(s) · machine(s)`` of the records a row reads, plus "typed
    by hand". The machine (its CPU model, where the record has one) matters because the
    same wall-time goal is met on one CPU and missed on another."""
    recs = [r for r in (recs if isinstance(recs, list) else [recs]) if isinstance(r, dict)]
    # a record's own date, else the dates one level down (replicate: machine_before/after)
    dates = sorted({str(x["date"])[:10] for r in recs
                    for x in ([r] if r.get("date") else
                              [v for v in r.values() if isinstance(v, dict)])
                    if x.get("date")})
    commits = sorted({str(r["commit"]) for r in recs if r.get("commit")})
    typed = sum(1 for r in recs if r.get("typed_by_hand"))
    out = [name, (dates[0] if len(dates) == 1 else f"{dates[0]} – {dates[-1]}")
           if dates else "no date", ", ".join(commits) if commits else "no commit"]
    machines = sorted({_short_cpu(r["cpu"]) for r in recs if r.get("cpu")})
    if machines:
        out.append(", ".join(machines))
    if typed:
        out.append("typed by hand" if typed == len(recs) else
                   f"{typed} of {len(recs)} typed by hand")
    return " · ".join(out)


def _short_cpu(model: str) -> str:
    """``"Intel(R) Xeon(R) Processor"`` -> ``"Intel Xeon"``: the CPU model without its
    trademark marks and generic words."""
    words = model.replace("(R)", "").replace("(TM)", "").split()
    return " ".join(w for w in words if w.lower() not in ("processor", "cpu"))


# ------------------------------------------------------------------ rows
def audit_rows(d: Path) -> list[list]:
    audit = _load(d, "audit.json") or []
    specs = [("default", "`crowdrank audit` (embedded default, gold priors)", False),
             ("geometric", "`crowdrank audit --worker-prior geometric:a0=10,a=6`", True),
             ("babyface", "`crowdrank audit babyface --quick` (geometric)", True),
             ("readlevel", "`crowdrank audit readlevel --quick` (geometric)", True)]
    rows = []
    for name, label, need_trust in specs:
        r = next((x for x in audit if x.get("name") == name), None)
        if r is None:
            continue
        trusted = all(r[m]["trusted"] for m in ("couple", "crowdbt") if m in r)
        goal = f"≤ {r['budget_s']:.0f} s" + (", both trusted" if need_trust else "")
        ok = r.get("rc") == 0 and r["wall_s"] <= r["budget_s"] and (trusted or not need_trust)
        cache = str(r.get("xla_cache") or "")
        label += ("; every program compiled (empty cache)" if cache.startswith("cold") else
                  "; programs from the user's cache" if cache else "")
        rows.append([label, f"{r['wall_s']:.0f} s, "
                     + ("both trusted" if trusted else "NOT both trusted"),
                     goal, yes(ok), record("audit.json", r)])
    return rows


def paper_row(d: Path) -> list[list]:
    paper = [r for r in (_load(d, "reference_paper.json") or []) if r.get("what") == "paper"]
    if not paper:
        return []
    parts, ok = [], False
    for r in paper:
        route = "Gibbs route" if r.get("eta_update") == "gibbs" else "joint NUTS"
        if r.get("status"):
            stop = r.get("wall_s_until_stopped")
            parts.append(f"{route}: not completed" + (f" (stopped after {stop / 60:.0f} min)"
                                                       if stop else ""))
            continue
        mins = r.get("end_to_end_s", float("nan")) / 60
        ok = ok or (bool(r.get("trusted")) and mins <= 20)
        parts.append(f"{route} {mins:.1f} min, "
                     + ("trusted" if r.get("trusted") else "NOT trusted"))
    return [["trusted COUPLE reference, paper scale (450,000 rankings, 4 chains)",
             "; ".join(parts), "≤ 20 min on 2 cores, trusted", yes(ok),
             record("reference_paper.json", paper)]]


def warmstart_row(d: Path) -> list[list]:
    ws = _load(d, "reference_warmstart.json")
    if not ws or not any(r.get("what") == "warmstart_ladder" for r in ws):
        return []
    br = by_path("bench_reference")
    # each (model, start) as its latest ladder run measured it (older runs stay in the file)
    ladder = br.latest_runs(ws) or [r for r in ws if r.get("what") == "warmstart_ladder"]
    st = br.shortest_trusted(ladder)
    models = [m for m in ("couple", "crowdbt") if (m, "default") in st or (m, "online") in st]
    parts, ok = [], True
    for m in models:
        a, b = st.get((m, "default")), st.get((m, "online"))
        fmt = (lambda x: f"{x['warmup_gradients']:,.0f}" if x else "none")
        parts.append(f"{m} {fmt(a)} → {fmt(b)}")
        ok = ok and a is not None and b is not None and \
            b["warmup_gradients"] < a["warmup_gradients"]
    return [[("warm start: warm-up gradients of the shortest tune trusted on every seed, "
             "default → online start"),
             "; ".join(parts), "fewer", yes(ok), record("reference_warmstart.json", ladder)]]


def medium_row(d: Path) -> list[list]:
    med = _load(d, "reference_medium.json")
    if not med:
        return []
    by: dict = {}
    for r in med:
        if r.get("trusted") and r.get("ess_bulk_per_cpu_s"):
            by.setdefault(r["backend"], []).append(r["ess_bulk_per_cpu_s"])
    text = "; ".join(f"{b} {min(v):.1f}–{max(v):.1f}" for b, v in sorted(by.items()))
    return [["NUTS at medium scale (L=100, W=50): min bulk ESS per CPU-s, trusted runs",
             text or "no trusted run", "both back-ends, side by side", "–",
             record("reference_medium.json", med)]]


def sbc_row(d: Path) -> list[list]:
    sbc = _load(d, "sbc.json")
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
    ok = len(cal) == len(full) == len(walls) == len(runs) and max(walls) <= 30
    return [["SBC of NUTS (10 items, 4 workers, 100 rankings; model × back-end)",
             (f"{len(cal)}/{len(runs)} calibrated at 200 replicates, "
             f"{min(walls):.0f}–{max(walls):.0f} min each"), ("≥ 200 replicates, calibrated, "
             "≤ 30 min each"), yes(ok), record("sbc.json", runs)]]


def batch_rows(d: Path) -> list[list]:
    b = _load(d, "batch.json")
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
        rows.append([(f"MAP of BT, read-level ({b['items']} items): Newton ({tol(ours)}) vs "
                     f"choix Newton-CG ({tol(choix)}); both within 1e-6 of the optimum"),
                     (f"{ours['seconds']:.2f} s vs {choix['seconds']:.1f} s"
                      + ("" if both else "; NOT both within 1e-6")), "as fast, as accurate",
                     yes(both and ours["seconds"] <= choix["seconds"]),
                     record("batch.json", src)])
    runs = (b.get("bootstrap") or {}).get("runs") or []
    if runs:
        r = min(runs, key=lambda x: x["seconds"])
        rows.append([f"bootstrap of BT, read-level ({b['bootstrap']['resamples']} resamples)",
                     f"{r['seconds']:.1f} s", "≤ 30 s", yes(r["seconds"] <= 30),
                     record("batch.json", b)])
    return rows


def crowdc_row(d: Path) -> list[list]:
    c = _load(d, "crowdc.json")
    if not c:
        return []
    cl = c.get("claim") or {}
    ok = c["seconds_total"] <= 600 and cl.get("saving_45_50") and cl.get("tau_ratio_ge_95")
    miss = ([] if cl.get("saving_45_50") else ["saving NOT 45–50 %"]) + \
        ([] if c["seconds_total"] <= 600 else [f"{c['seconds_total']:.0f} s"])
    return [[("`replicate crowdc`: lowest τ ratio against BTL (comparisons saved 45–50 % "
              "and time ≤ 10 min checked)"),
             f"{cl.get('min_tau_ratio', float('nan')):.3f}" + "".join(f"; {m}" for m in miss),
             "≥ 0.95", yes(ok), record("crowdc.json", c)]]


def fidelity_rows(d: Path) -> list[list]:
    fid = _load(d, "fidelity.json")
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
        rows.append(["online variants at medium scale: settings with one in the box",
                     f"{len(inside)} of {len(med)} settings (closest |z| {min(zs):.2f})"
                     + (f"; reference NOT trusted for {', '.join(untrusted)}" if untrusted
                        else ""),
                     "|z| ≤ 0.1, sd ratio in [0.9, 1.1], ≤ 10×",
                     yes(len(inside) == len(med)) if not untrusted else "–",
                     record("fidelity.json", [subjects.get(f"medium-{n}") for n, _ in med])])
    bf = goals.get("babyface")
    if bf:
        _, best = min(bf.items(), key=lambda kv: max(kv[1]["centred_z_ratio"],
                                                        kv[1]["order_ratio"]))
        subj = next((s for n, s in subjects.items() if n and n.startswith("babyface")), {})
        gates = subj.get("per_variable_gate") or {}
        greek = {"lambda": "λ", "eta": "η"}
        passing = [greek.get(v, v) for v, g in gates.items() if g.get("passes")]
        trusted = bool(subj.get("trusted"))
        ref = "" if trusted else (f"; reference NOT trusted (only {', '.join(passing) or 'none'}"
                                  " passes)")
        ok = max(best["centred_z_ratio"], best["order_ratio"]) <= 0.5
        rows.append([(f"EP (best of {len(bf)} EP variants) vs the one-pass on BabyFace: "
                      "centred |z|, order sensitivity"),
                     f"{best['centred_z_ratio']:.2f}×, {best['order_ratio']:.2f}×{ref}",
                     "≤ 0.5× both",
                     yes(ok) if trusted else "– (untrusted reference)",
                     record("fidelity.json", subj)])
    return rows


def online_rows(d: Path) -> list[list]:
    online = _load(d, "online.json")
    if not online:
        return []
    s = next((r for r in online if r.get("what") == "summary"), {})
    g = s.get("goals", {})
    couple = next((r for r in online if r.get("what") == "method"
                   and r.get("method") == "couple"), {})
    setup = next((r for r in online if r.get("what") == "setup"), {})
    n = f"{setup.get('rankings', 450_000):,} rankings"
    goal = g.get("couple_rankings_per_s", 3e6)
    rows = []
    for label, v in (("kernel alone, compile excluded, best of the repeats",
                      couple.get("rankings_per_s")),
                     ("end to end `fit_online`", couple.get("end_to_end_rankings_per_s"))):
        if v is not None:
            rows.append([f"OnlineGBMM (COUPLE), {n}: {label}", f"{v / 1e6:.2f} M rankings/s",
                         f"≥ {goal / 1e6:g} M/s", yes(v >= goal), record("online.json", s)])
    if "pl_vs_openskill" in s:
        rows.append(["OnlinePL against openskill's `PlackettLuce.rate()`",
                     f"{s['pl_vs_openskill']:g}× faster", f"≥ {g.get('pl_vs_openskill', 150):g}×",
                     yes(s["pl_vs_openskill"] >= g.get("pl_vs_openskill", 150)),
                     record("online.json", s)])
    if "couple_pl_cost_ratio" in s:
        lim = g.get("couple_pl_cost_ratio", 2.8)
        rows.append(["COUPLE : PL time per ranking (kernels)", f"{s['couple_pl_cost_ratio']:.2f}",
                     f"≤ {lim:g} (the paper's)", yes(s["couple_pl_cost_ratio"] <= lim),
                     record("online.json", s)])
    return rows


def scale_rows(d: Path) -> list[list]:
    sc = _load(d, "scale.json")
    if not sc:
        return []
    runs = {r["rankings"]: r for r in sc.get("runs", [])}
    rows = []
    big = runs.get(max(runs)) if runs else None
    if big:
        c, q = big.get("csv") or {}, big.get("parquet") or {}
        peak = max(c.get("peak_rss_mb", 0), q.get("peak_rss_mb", 0))
        ok = c.get("wall_s", 1e9) <= 120 and q.get("wall_s", 1e9) <= 60 and peak <= 1000
        rows.append([(f"`crowdrank fit --method online`, streamed, {big['rankings'] / 1e6:g} M "
                     "rankings (whole command)"), (f"CSV {c.get('wall_s', float('nan')):.1f} s, "
                     f"Parquet {q.get('wall_s', float('nan')):.1f} s, peak {peak:.0f} MB"),
                     "≤ 120 s CSV, ≤ 60 s Parquet, ≤ 1 GB", yes(ok), record("scale.json", big)])
    small = runs.get(min(runs)) if runs else None
    if small and small is not big:
        w = (small.get("csv") or {}).get("wall_s", float("nan"))
        rows.append([f"the same, {small['rankings'] / 1e6:g} M rankings, CSV", f"{w:.2f} s",
                     "≤ 2 s (2 cores)", yes(w <= 2), record("scale.json", small)])
    checked = [r for r in runs.values() if "identical_to_in_memory" in r]
    if checked:
        sizes = ", ".join(f"{r['rankings'] / 1e6:g} M" for r in checked)
        unchecked = [f"{n / 1e6:g} M" for n in runs if "identical_to_in_memory" not in runs[n]]
        same = all(r["identical_to_in_memory"] for r in checked)
        rows.append(["streamed fit: the same numbers as in memory",
                     f"{yes(same)} at {sizes}"
                     + (f" (not checked at {', '.join(unchecked)})" if unchecked else ""),
                     "identical", yes(same), record("scale.json", checked)])
    return rows


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


def mutation_row(d: Path) -> list[list]:
    mut = _load(d, "mutation.json")
    if not mut:
        return []
    mods = mutation_modules(mut)
    cur = [m for m in mods if m["freshness"] == "current"]
    low = [m for m in mods if m["score"] < 0.9 or (m["ci"] and m["ci"][0] < 0.9)]
    good = [m for m in cur if m not in low]
    text = f"{len(good)} of {len(mods)} modules"
    return [["mutation score of the core modules (fast tests; per module in docs/results.md)",
             text,
             "≥ 90 % each (a sample's lower end), current", yes(len(cur) == len(mods)
                                                                 and not low),
             record("mutation.json", [m["rec"] for m in mods])]]


def suite_row(d: Path) -> list[list]:
    """The test suite's time from a fresh clone (``bench/bench_suite.py``); a run with
    failures does not meet the goal whatever its time."""
    s = _load(d, "suite.json")
    if not s:
        return []
    fig = f"{s['pytest_minutes']:.1f} min ({s['passed']:,} passed"
    fig += (f", {s['failed']} failed" if s["failed"] else "") + ")"
    return [["`make test` from a fresh clone, cold caches (`.ci/run`, 2 cores)", fig,
             f"≤ {s['goal_minutes']:g} min, all passing", yes(s["met"]),
             record("suite.json", s)]]


def replicate_rows(d: Path) -> list[list]:
    rows = []
    bf = _load(d, "replicate_babyface.json")
    if bf:
        e = bf["summary"]["sets"][0]
        mine = [c for c in e["cleaned"] if "couple" in c["detected_by"]]
        acc = mine[0]["accuracy"]["couple"]["mean"] if mine else float("nan")
        ok = abs(acc - 92.30) <= 1 and e.get("same_six") and bf["wall_seconds"] <= 180
        miss = ([] if e.get("same_six") else ["NOT the same six workers"]) + \
            ([] if bf["wall_seconds"] <= 180 else [f"{bf['wall_seconds']:.0f} s"])
        rows.append([(f"`replicate babyface` (R = {bf['repeats']}): cleaned COUPLE accuracy "
                     "(same six noisy workers and ≤ 3 min checked)"),
                     f"{acc:.2f} %" + "".join(f"; {m}" for m in miss),
                     "92.30 % ± 1 point (the paper's)", yes(ok),
                     record("replicate_babyface.json", bf)])
    f7 = _load(d, "replicate_fig7.json")
    if f7:
        s = f7["summary"]
        held = s["claims"]["couple_best_everywhere"] and s["claims"]["couple_stable_from_20pct"]
        rows.append([(f"`replicate fig7` at paper scale (R = {f7['repeats']}): time; the "
                     "paper's claims (accuracies per setting in docs/results.md)"),
                     f"{f7['wall_seconds']:.0f} s; claims hold: {yes(held)}",
                     "≤ 10 min; claims checked", yes(f7["wall_seconds"] <= 600),
                     record("replicate_fig7.json", f7)])
    cost = _load(d, "replicate_cost.json")
    if cost:
        r = cost["summary"]["cost"]["babyface"]["ratio_to_pl"]["couple:pl (cpu, whole pass)"]
        rows.append(["`replicate cost`: COUPLE : OnlinePL time per ranking, BabyFace",
                     f"{r:.2f} (paper 2.8)", "beside the paper's", "–",
                     record("replicate_cost.json", cost)])
    dk = _load(d, "replicate_dask.json")
    if dk:
        same = all(x["identical_results"] for x in dk["runs"])
        rows.append([f"Dask executor against the process pool ({dk['tasks']} tasks)",
                     (f"overhead {100 * dk['overhead_best']:+.1f} %, identical results: "
                     f"{yes(same)}"), "≤ 10 %", yes(dk["overhead_best"] <= 0.10 and same),
                     record("replicate_dask.json", dk)])
    return rows


def approx_study_rows(d: Path) -> list[list]:
    """The PPL approximations at medium scale: a method inside the box (centred and η¹)
    at ≤ 1/5 of the trusted reference's CPU seconds, per worker type; a setting whose
    reference is untrusted or that did not run leaves the goal open."""
    st = _load(d, "approx_study.json")
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
    figure = (f"{len(met)} of {ran} settings measured have one"
              + (f" ({', '.join(met)})" if met else ""))
    if open_:
        figure += f"; not run or untrusted: {', '.join(open_)}"
    # the goal's alternative: where no method is inside, the parameters that keep them out
    # are diagnosed (bench_approx_diagnose.py)
    diag = _load(d, "approx_diagnose.json") or {}
    diagnosed = {s["name"].removeprefix("medium-") for s in diag.get("subjects", [])
                 if s.get("status") == "done"}
    without = [s["name"].removeprefix("medium-") for s in med
               if s["name"].removeprefix("medium-") not in met + open_]
    if without and diag:
        done = [n for n in without if n in diagnosed]
        figure += (f"; the {len(without)} without one diagnosed" if len(done) == len(without)
                   else f"; diagnosed: {len(done)} of the {len(without)} without one")
    ok = None if open_ else all(n in diagnosed for n in without)
    recs = [st] + ([diag] if diag else [])
    return [[("PPL approximations at medium scale: a method in the box at ≤ 1/5 of NUTS's "
             "CPU s"), figure, "every worker type, or its failing parameters diagnosed",
             yes(ok), record("approx_study.json, approx_diagnose.json" if diag
                             else "approx_study.json", recs)]]


def approx_audit_row(d: Path) -> list[list]:
    """``crowdrank audit --approx advi,fullrank-advi,pathfinder,laplace`` on the embedded
    default, end to end: its wall time against the 3-min goal, both references trusted."""
    r = _load(d, "approx.json")
    if not r or "wall_s" not in r:
        return []
    trusted = all(m.get("reference_trusted") for m in (r.get("models") or {}).values())
    ok = r.get("rc") == 0 and r["wall_s"] <= r["budget_s"] and trusted
    return [[f"`{r['command'].replace(' --out DIR', '')}` (embedded default)",
             f"{r['wall_s']:.0f} s, " + ("both trusted" if trusted else "NOT both trusted"),
             f"≤ {r['budget_s']:.0f} s", yes(ok), record("approx.json", r)]]


def approx_paper_row(d: Path) -> list[list]:
    """The approximations at paper scale (450,000 rankings), judged by k̂: how many fit
    in the 20-min budget and got their k̂; the goal is met when every method was run (a
    method that did not fit in the budget or the memory is a measured outcome)."""
    r = _load(d, "approx_paper.json")
    if not r or not r.get("methods"):
        return []
    ms = r["methods"]
    done = [m for m in ms if m.get("status") == "done"]
    ks = [m["khat"] for m in done if m.get("khat") is not None]
    fig = f"lowest k̂ {min(ks):.2f}, " if ks else ""
    fig += f"{len(done)} of {len(ms)} fit"
    ran = all(m.get("status") == "done" or str(m.get("status", "")).startswith(
        ("did not fit", "failed")) for m in ms)
    return [["PPL approximations at paper scale (450,000 rankings): k̂ without NUTS", fig,
             "every method that fits in 20 min on 2 cores, with its k̂", yes(ran),
             record("approx_paper.json", r)]]


#: the rows in README order; each returns zero rows when its record is absent
ROWS = (audit_rows, paper_row, warmstart_row, medium_row, sbc_row, batch_rows, crowdc_row,
        fidelity_rows, approx_study_rows, approx_audit_row, approx_paper_row, online_rows,
        scale_rows, mutation_row, suite_row, replicate_rows)


def headline(results_dir: Path | str = RESULTS) -> str:
    """The README's table of headline figures, built from ``bench/results/*.json`` only."""
    d = Path(results_dir)
    rows = [row for fn in ROWS for row in fn(d)]
    cell = (lambda v: str(v).replace("|", "\\|").replace("\n", " "))
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return f"{BEGIN}\n" + "\n".join(lines) + f"\n{END}"


def readme_with_headline(readme_text: str, results_dir: Path | str = RESULTS) -> str:
    a, b = readme_text.index(BEGIN), readme_text.index(END) + len(END)
    return readme_text[:a] + headline(results_dir) + readme_text[b:]
