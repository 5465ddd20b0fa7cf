"""The approximations at the COUPLE paper's scale, judged by PSIS k̂ alone (issue "PPL
approximations", goal "paper scale").

There is no trusted NUTS reference at 450,000 rankings (``reference_paper.json``), so the
verdict on each approximation there is its Pareto k̂ ([Yao18]): the importance ratios of
its draws against the model's exact log density. Every method of the study's plan
(:func:`bench_approx_study.method_plan`: the one-pass update, undamped EP, ``advi``,
``fullrank-advi``, ``lowrank-advi``, ``pathfinder``, ``laplace-ppl``, registry defaults)
runs on the same data and priors as the paper-scale NUTS attempt: COUPLE, L=1000, W=500,
T=900, k <= 4 (``simulate_paper_scale``, amateur workers, seed 0), the geometric prior
``a0=10, a=6``.

Each method runs in its own process, one at a time, on both cores, with a wall-clock
budget for the fit (``--budget-s``, default 1,200 s: "fits in 20 min on 2 cores"); a fit
still running then is stopped and recorded as not fitting, with how far it got. A
process that exceeds the memory bound (``--memory-gb``, an address-space limit) records
the allocation error. k̂ is computed after a fit that ended in time, on 1,000 draws, and
timed apart from the fit. Per method: fit CPU and wall seconds, the optimiser's steps and
convergence, the number of coordinates, k̂ and its label, the machine's load::

    python bench/bench_approx_paper.py run [--only advi,...] [--budget-s 1200] [--start-by HH:MM]
    python bench/bench_approx_paper.py render   # the paper-scale section of docs/fidelity.md

Writes ``bench/results/approx_paper.json`` (after every method).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import commit, stamp

RESULTS = ROOT / "bench" / "results" / "approx_paper.json"
PRIOR = {"a0": 10, "a": 6}
#: wall seconds allowed for the child's imports and the data's simulation before its fit
SETUP_S = 180.0
START, END = "<!-- approx-paper:start -->", "<!-- approx-paper:end -->"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: ``--scale tiny``: the same simulator and prior on 10 items, 4 workers, 20 tasks each
#: (the orchestration's test, seconds instead of minutes)
TINY = {"n_items": 10, "n_workers": 4, "tasks_per_worker": 20}


def _data(scale: str = "paper"):
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate_paper_scale

    kw = TINY if scale == "tiny" else {}
    d = simulate_paper_scale("couple", setting="amateur", seed=0, **kw).rankings
    return d, Priors.geometric(d.workers, d.K, **PRIOR)


def options_of(label: str) -> dict:
    """``fit_variant`` options of ``label``: a label of the study's plan, or
    ``"METHOD key=value[,key=value]"`` for a method with options of its own (e.g.
    ``"advi elbo_tol=1e-05"``; numbers are read as numbers)."""
    import bench_approx_study as study

    plan = dict(study.method_plan("couple"))
    if label in plan:
        return plan[label]
    method, _, rest = label.partition(" ")
    opts: dict = {"method": method}
    for kv in filter(None, rest.split(",")):
        k, v = kv.split("=", 1)
        try:
            opts[k] = int(v) if v.lstrip("-").isdigit() else float(v)
        except ValueError:
            opts[k] = v
    return opts


def one(label: str, out: Path, memory_gb: float, scale: str = "paper") -> None:
    """Child process: fit ``label`` and write its row to ``out`` (first without k̂, as
    soon as the fit ends; then with it)."""
    import bench_approx_study as study

    from crowdrank.inference.approx.psis import posterior_khat
    from crowdrank.validation.pipelines.variants import fit_variant

    lim = int(memory_gb * 2 ** 30)
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    t, c = time.perf_counter(), study.cpu_seconds()
    d, pri = _data(scale)
    row = {"label": label, "data_s": round(time.perf_counter() - t, 1),
           "rankings": d.n_rankings, "items": d.n_items, "workers": d.n_workers}
    opts = options_of(label)
    row["options"] = opts
    t, c = time.perf_counter(), study.cpu_seconds()
    post = fit_variant(d, "couple", pri, opts, progress=False)
    diag = post.diagnostics or {}
    row.update(status="fitted", fit_wall_s=round(time.perf_counter() - t, 1),
               fit_cpu_s=round(study.cpu_seconds() - c, 1),
               converged=diag.get("converged"), steps=diag.get("steps"),
               dim=diag.get("dim"), stopping_rule=diag.get("stopping_rule"),
               **study.gradient_evals(post, opts))
    out.write_text(json.dumps(row))
    t, c = time.perf_counter(), study.cpu_seconds()
    k = posterior_khat(post, d, "couple", pri, seed=0)
    row.update(status="done", khat=None if k["psis_khat"] is None
               else round(float(k["psis_khat"]), 3), khat_label=k["psis_label"],
               khat_wall_s=round(time.perf_counter() - t, 1),
               khat_cpu_s=round(study.cpu_seconds() - c, 1))
    out.write_text(json.dumps(row))


def run(labels: list[str], budget: float, khat_budget: float, memory_gb: float,
        path: Path, argv: list[str], scale: str = "paper", setup_s: float = SETUP_S,
        start_by: str | None = None, append: bool = False) -> dict:
    """Each method of ``labels`` in turn (module docstring); none starts after
    ``start_by`` (UTC HH:MM): those are recorded as not run. ``append`` keeps the rows of
    the record at ``path`` (each row has its own date and commit) and adds these."""

    old = json.loads(path.read_text()) if append and path.is_file() else None
    when = stamp(argv, speed=False, script=__file__)
    rec = {"bench": "approx_paper", **{k: when[k] for k in ("date", "commit", "command")},
           "machine": {"cpus": os.cpu_count(), "memory_limit_gb": memory_gb},
           "model": "couple", "data": "simulate_paper_scale('couple', setting='amateur', "
           "seed=0)", "prior": f"geometric:a0={PRIOR['a0']},a={PRIOR['a']}",
           "scale": scale, "budget_s": budget, "methods": []}
    if old is not None:
        for m in old["methods"]:
            m.setdefault("commit", old.get("commit"))
        rec.update(methods=old["methods"], date=old["date"], commit=old["commit"],
                   command=old["command"], appended=old.get("appended", []) + [
                       {"date": _now(), "commit": rec["commit"],
                        "command": rec["command"]}])
    tmp = path.parent / ".approx_paper_row.json"
    for label in labels:
        if start_by and datetime.now(UTC).strftime("%H:%M") >= start_by:
            rec["methods"].append({"label": label, "status": f"not run: it would have "
                                   f"started after {start_by} UTC (--start-by)",
                                   "date": _now()})
            path.write_text(json.dumps(rec, indent=1))
            continue
        tmp.unlink(missing_ok=True)
        load0 = round(os.getloadavg()[0], 2)
        print(f"[{datetime.now(UTC):%H:%M:%S}] {label} (load {load0})", flush=True)
        t = time.perf_counter()
        cmd = [sys.executable, __file__, "one", label, "--row", str(tmp),
               "--memory-gb", str(memory_gb), "--scale", scale]
        logf = path.parent / ".approx_paper_child.log"
        with open(logf, "w") as fh:
            p = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, text=True)
        status = None
        try:
            # the fit's budget, then k̂'s once the fit has written its row
            p.wait(timeout=budget + setup_s)
        except subprocess.TimeoutExpired:
            if not tmp.is_file():
                p.kill()
                status = (f"did not fit: stopped after {budget + setup_s:.0f} s wall (the fit's "
                          "budget) before the fit ended")
            else:
                try:
                    p.wait(timeout=khat_budget)
                except subprocess.TimeoutExpired:
                    p.kill()
                    status = f"k̂ not computed within {khat_budget:.0f} s after the fit"
        wall = time.perf_counter() - t
        p.wait()
        tail = logf.read_text()[-1500:]
        row = json.loads(tmp.read_text()) if tmp.is_file() else {"label": label}
        if status:
            row["status"] = status
        elif row.get("status") != "done":
            last = [ln for ln in tail.splitlines() if ln.strip()][-3:]
            row["status"] = f"failed (exit {p.returncode}): " + " | ".join(last)[-600:]
        if row.get("fit_wall_s", 0) > budget:
            row["status"] = f"did not fit: the fit took {row['fit_wall_s']} s > {budget:.0f} s"
        row.update(process_wall_s=round(wall, 1), load_1min_before=load0,
                   load_1min_after=round(os.getloadavg()[0], 2), date=_now(),
                   commit=commit())
        rec["methods"].append(row)
        print(f"  {json.dumps(row)[:400]}", flush=True)
        path.write_text(json.dumps(rec, indent=1))
    tmp.unlink(missing_ok=True)
    (path.parent / ".approx_paper_child.log").unlink(missing_ok=True)
    rec["finished"] = _now()
    path.write_text(json.dumps(rec, indent=1))
    return rec


def render_section(rec: dict) -> str:
    rows = [("| method | fits in 20 min? | fit wall s | fit CPU s | steps (converged?) | k̂ "
             "| verdict |"), "|---|---|---|---|---|---|---|"]
    def cell(v) -> str:
        return "–" if v is None else str(v)

    for m in rec["methods"]:
        ok = m.get("status") == "done"
        k = m.get("khat")
        # a failure's last lines, without the table's separator
        verdict = (m.get("khat_label", "") if ok else m.get("status", ""))
        verdict = verdict.replace("|", "/")
        verdict = verdict if len(verdict) <= 200 else "…" + verdict[-200:]
        steps = (f"{m['steps']} ({'yes' if m.get('converged') else 'no'})"
                 if m.get("steps") is not None else "–")
        rows.append(f"| {m['label']} | {'yes' if ok else 'no'} | {cell(m.get('fit_wall_s'))} "
                    f"| {cell(m.get('fit_cpu_s'))} | {steps} | {cell(k)} | {verdict} |")
    n = rec["methods"][0] if rec["methods"] else {}
    head = (f"Record `bench/results/approx_paper.json` ({rec['date']}, commit "
            f"{rec['commit']}, `{rec['command']}`): COUPLE on "
            f"{n.get('rankings', 450000):,} rankings (L={n.get('items', 1000)}, "
            f"W={n.get('workers', 500)}), prior {rec['prior']}, each method alone on the 2 "
            f"cores with a {rec['budget_s']:.0f}-s wall budget for its fit; k̂ on 1,000 draws "
            "against the exact log density (k̂ ≤ 0.7: the draws can be trusted as "
            "importance proposals; above, the approximation is not reliable — no NUTS "
            "reference is needed for that verdict).")
    title = ("### The approximations at paper scale, judged by k̂ "
             "(`bench/bench_approx_paper.py`)")
    more = [f"Rows added by `{a['command']}` ({a['date']}, commit {a['commit']})."
            for a in rec.get("appended", [])]
    return "\n".join([START, title, "", head, *([""] + more if more else []), "", *rows, END])


def render(path: Path = RESULTS, out: Path = ROOT / "docs" / "fidelity.md") -> None:
    rec = json.loads(path.read_text())
    text = out.read_text()
    new = render_section(rec)
    a, b = text.index(START), text.index(END) + len(END)
    out.write_text(text[:a] + new + text[b:])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("run", "one", "render"))
    ap.add_argument("label", nargs="?")
    ap.add_argument("--only", default=None, help="comma-separated labels, in this order")
    ap.add_argument("--budget-s", type=float, default=1200.0)
    ap.add_argument("--khat-budget-s", type=float, default=600.0)
    ap.add_argument("--memory-gb", type=float, default=20.0)
    ap.add_argument("--start-by", default=None, help="UTC HH:MM after which no method starts")
    ap.add_argument("--append", action="store_true",
                    help="add the rows to the record instead of replacing it")
    ap.add_argument("--row", default=None)
    ap.add_argument("--scale", choices=("paper", "tiny"), default="paper")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    if a.step == "one":
        one(a.label, Path(a.row), a.memory_gb, a.scale)
        return 0
    if a.step == "render":
        render(Path(a.out))
        return 0
    import bench_approx_study as study

    labels = [lab for lab, _ in study.method_plan("couple")]
    if a.only:
        labels = [x for x in a.only.split(",")]
    run(labels, a.budget_s, a.khat_budget_s, a.memory_gb, Path(a.out), argv, a.scale,
        start_by=a.start_by, append=a.append)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
