"""Posterior SBC: its power, its cost, and its verdict beside the trusted references
(docs/sbc.md, "Posterior SBC"; docs/results.md).

Subcommands, each appending records to ``bench/results/posterior_sbc.json``:

``power``
    The planted methods (:mod:`crowdrank.validation.pipelines.posterior_sbc_planted`) on
    tiny PL data sets, one per seed: how often the verdict flags the over-confident fit
    (variances halved) and the prior-only fit, and how often it passes the exact posterior,
    for each augmentation size ``--augments``. The default size
    (``posterior_sbc.DEFAULT_AUGMENT``) is the smallest that flags both planted methods in
    every seed.
``cost``
    ``crowdrank sbc --posterior`` of a method (default the one-pass update) on the audit's
    default data: wall and CPU seconds for ``--sims`` replicates (the goal: 200 in ≤ 60 s).
``validate``
    The verdict for (subject, method) rows of the approximation study with a trusted
    reference, beside the box verdict and k̂ of ``bench/results/approx_study.json``.
``paper``
    ``crowdrank audit`` with its default budget on 450,000 simulated rankings (the paper's
    settings and prior): the approximations' posterior-SBC verdicts and the wall time.
``floor``
    Posterior SBC of an exact sampler where the simulator is not the model: stagewise
    COUPLE's generative story is not its likelihood's distribution for ``k ≥ 3``, so even
    the exact posterior's ranks move. ``--floor-runs`` ``model:method:kmax``, by default
    the collapsed Gibbs sampler on small COUPLE data with ``k = 2..4`` (the mismatch) and
    on the same design with pairs only (``k = 2``: the story is exact, the control); each
    run extends its replicates in chunks until ``--sims`` or ``--budget-s``.

Every record carries date, commit, command and load (``bench/tools/stamp.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))

from rerun import cpu_seconds
from stamp import stamp

RESULTS = ROOT / "bench" / "results" / "posterior_sbc.json"


def append(records: list[dict]) -> None:
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.write_text(json.dumps(old + records, indent=1) + "\n")


def run_power(args, base: dict) -> list[dict]:
    from crowdrank.validation.pipelines import posterior_sbc_planted as P
    from crowdrank.validation.pipelines.posterior_sbc import PosteriorSbcConfig, run_posterior_sbc

    out = Path(args.out)
    prior_draws = P.PRIOR_DRAWS if args.prior_draws is None else int(args.prior_draws)
    # the default leaves the options empty, so earlier runs' caches still match
    opts = {} if args.prior_draws is None else {"prior_draws": prior_draws}
    if args.prior_draws is not None:      # a more exact "exact" method (importance draws)
        out = out / f"is{args.prior_draws}"
    recs = []
    with P.registered():
        for aug in [float(a) for a in args.augments.split(",")]:
            rows = {m: [] for m in P.NAMES}
            t0, c0 = time.perf_counter(), cpu_seconds()
            for seed in range(args.seeds):
                data, pri = P.tiny_pl(seed)
                for m in P.NAMES:
                    cfg = PosteriorSbcConfig(method=m, model="pl", sims=args.sims,
                                             augment=aug, seed=seed, options=opts)
                    s = run_posterior_sbc(data, pri, cfg, out / f"{m}-{aug}-{seed}",
                                          processes=args.processes, progress=False,
                                          setup=P.SETUP)
                    fam = s["ranks"]["families"]["lambda_centred"]
                    tol = s["tolerance"]["groups"]["lambda_centred"]
                    rows[m].append({
                        "seed": seed, "calibrated": s["calibrated"],
                        "strict_calibrated": s["strict_calibrated"],
                        "ranks_calibrated": s["ranks"]["calibrated"],
                        "sd_ratio": tol["sd_ratio"],
                        "sd_ratio_bounds": [tol["sd_ratio_lo"], tol["sd_ratio_hi"]],
                        "abs_z": tol["abs_z"], "abs_z_bounds": [tol["abs_z_lo"], tol["abs_z_hi"]],
                        "ecdf_p": fam["ecdf_p_combined"], "pot_c_p": fam["pot_c_p_combined"],
                        "contraction": s["checks"]["contraction"]["groups"]
                        ["lambda_centred"]["median"],
                        "predictive_p": s["checks"]["predictive"]["p"]})
                    print(aug, seed, m, s["calibrated"], file=sys.stderr)
            recs.append({**base, "kind": "power", "augment": aug, "sims": args.sims,
                         "prior_draws": prior_draws, "processes": args.processes,
                         "seeds": args.seeds,
                         "data": "tiny PL: 5 items, 40 rankings of 3, λ ~ N(0, 1) per seed",
                         "verdict_rule": "tolerance (posterior_sbc_tolerance) and companions",
                         "flagged": {m: sum(not r["calibrated"] for r in v)
                                     for m, v in rows.items()},
                         "flagged_strict": {m: sum(not r["strict_calibrated"] for r in v)
                                            for m, v in rows.items()},
                         "rows": rows, "wall_s": time.perf_counter() - t0,
                         "cpu_s": cpu_seconds() - c0})
    return recs


def run_cost(args, base: dict) -> list[dict]:
    from crowdrank.validation.pipelines.audit_config import (
        AuditConfig,
        default_subject,
        make_priors,
    )
    from crowdrank.validation.pipelines.posterior_sbc import PosteriorSbcConfig, run_posterior_sbc

    recs = []
    s = default_subject()
    pri = make_priors(s.data, AuditConfig(), s.gold)
    for model in args.models.split(","):
        out = Path(args.out) / f"cost-{model}-{args.method}"
        if out.exists():
            import shutil
            shutil.rmtree(out)
        t0, c0 = time.perf_counter(), cpu_seconds()
        cfg = PosteriorSbcConfig(method=args.method, model=model, sims=args.sims,
                                 augment=args.augment)
        summ = run_posterior_sbc(s.data, pri, cfg, out, processes=args.processes,
                                 progress=False)
        recs.append({**base, "kind": "cost", "subject": "default", "model": model,
                     "method": args.method, "sims": args.sims, "augment": cfg.augment,
                     "processes": args.processes, "wall_s": time.perf_counter() - t0,
                     "cpu_s": cpu_seconds() - c0, "verdict": summ["verdict"],
                     "calibrated": summ["calibrated"], **tolerance_fields(summ),
                     "timing": summ["timing"],
                     "families": {f: {k: v[k] for k in ("ecdf_p_combined",
                                                         "pot_c_p_combined", "calibrated")}
                                  for f, v in summ["ranks"]["families"].items()},
                     "checks": {"predictive_p": summ["checks"]["predictive"]["p"],
                                "contraction": {f: v["median"] for f, v in
                                                summ["checks"]["contraction"]["groups"]
                                                .items()}}})
        print(model, recs[-1]["wall_s"], summ["verdict"], file=sys.stderr)
    return recs


def tolerance_fields(summ: dict) -> dict:
    """The tolerance verdict's figures per group and the strict verdict, for a record."""
    keys = ("abs_z", "abs_z_lo", "abs_z_hi", "sd_ratio", "sd_ratio_lo", "sd_ratio_hi",
            "R_eff_median", "outside", "reasons")
    return {"strict_calibrated": summ["strict_calibrated"],
            "verdict_rule": "tolerance (posterior_sbc_tolerance) and companions",
            "tolerance": {g: {k: v[k] for k in keys}
                          for g, v in summ["tolerance"]["groups"].items()}}


#: The approximation study's rows (bench_approx_study.py): label -> (method, options).
STUDY_METHODS = {"one-pass": ("online", {}),
                 "ep5 damping=0": ("ep", {"passes": 5, "damping": 0.0}),
                 **{m: (m, {}) for m in ("advi", "fullrank-advi", "lowrank-advi",
                                         "pathfinder", "laplace-ppl")}}


def study_rows() -> dict:
    """``{(subject, label): row}`` of the latest approximation study (box verdict, k̂)."""
    study = json.loads((ROOT / "bench" / "results" / "approx_study.json").read_text())
    return {(s["name"], m["label"]): {**m, "model": s["model"], "trusted": s["trusted"],
                                      "study_commit": study["commit"]}
            for s in study["subjects"] for m in s["methods"]}


def run_validate(args, base: dict) -> list[dict]:
    """Posterior SBC of each (subject, method) row beside its box verdict and k̂."""
    from fidelity_core import subjects

    from crowdrank.validation.pipelines.posterior_sbc import PosteriorSbcConfig, run_posterior_sbc

    rows = study_rows()
    subj = subjects()
    recs = []
    for name in args.subjects.split(","):
        load, model, _ = subj[name]
        data, pri = load()
        for label in args.labels.split(","):
            method, opts = STUDY_METHODS[label]
            row = rows.get((name, label))
            if row is None:
                continue
            t0, c0 = time.perf_counter(), cpu_seconds()
            cfg = PosteriorSbcConfig(method=method, model=model, sims=args.sims,
                                     augment=args.augment, options=opts)
            out = Path(args.out) / "validate" / name / label.replace(" ", "_")
            summ = run_posterior_sbc(data, pri, cfg, out, processes=args.processes,
                                     progress=False)
            rec = {**base, "kind": "validate", "subject": name, "model": model,
                   "label": label, "method": method, "options": opts, "sims": args.sims,
                   "augment": cfg.augment, "calibrated": summ["calibrated"],
                   "verdict": summ["verdict"], **tolerance_fields(summ),
                   "ranks_calibrated": summ["ranks"]["calibrated"],
                   "families": {f: {k: v[k] for k in ("ecdf_p_combined", "pot_c_p_combined",
                                                       "calibrated")}
                                for f, v in summ["ranks"]["families"].items()},
                   "predictive_p": summ["checks"]["predictive"]["p"],
                   "size": summ["size"],
                   "contraction": {f: v["median"] for f, v in
                                   summ["checks"]["contraction"]["groups"].items()},
                   "inside_box": row["inside_box"], "box_distance": row.get("box_distance"),
                   "khat": row.get("khat"), "method_cpu_s": row.get("cpu_s"),
                   "reference_cpu_s": row.get("reference_cpu_s"),
                   "study_commit": row["study_commit"], "timing": summ["timing"],
                   "wall_s": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0}
            recs.append(rec)
            append([{**rec, "load_after": [round(x, 2) for x in os.getloadavg()]}])
            print(name, label, rec["calibrated"], row["inside_box"], round(rec["wall_s"]),
                  file=sys.stderr)
    return []


def run_paper(args, base: dict) -> list[dict]:
    """``crowdrank audit`` with its default budget on 450,000 simulated rankings (the
    paper's settings and prior, COUPLE): NUTS is over the budget, so the verdict is the
    approximations' posterior SBC; wall time of the whole command."""
    import subprocess

    from crowdrank.models.io import write_rankings
    from crowdrank.models.simulate import simulate_paper_scale

    work = Path(args.out) / "paper"
    work.mkdir(parents=True, exist_ok=True)
    data_file = work / "rankings.csv"
    if not data_file.exists():
        write_rankings(simulate_paper_scale("couple", "amateur", seed=0).rankings, data_file)
    out = work / "audit"
    if out.exists():
        import shutil
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "crowdrank", "audit", str(data_file), "--model", "couple",
           "--worker-prior", "geometric:a0=10,a=6", "--variants", f"method={args.methods}",
           "--quiet", "--out", str(out)]
    t0, c0 = time.perf_counter(), cpu_seconds()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    m = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() \
        else {}
    rows = [v for d in m.get("models", {}).values() for v in d.get("variants", [])]
    return [{**base, "kind": "paper", "command_run": " ".join(cmd[2:]), "rc": proc.returncode,
             "stdout": proc.stdout[-3000:], "stderr": proc.stderr[-2000:], "wall_s": wall,
             "cpu_s": cpu_seconds() - c0, "budget": m.get("budget"),
             "methods": [{"method": r["variant"].get("method", "online"),
                          "khat": r.get("psis_khat"), "posterior_sbc": r.get("posterior_sbc")}
                         for r in rows]}]


#: The floor's data: the prior-SBC studies' size (10 items, 4 workers × 25 tasks), the
#: paper's amateur workers; ``kmax`` per run.
FLOOR_DATA = {"n_items": 10, "n_workers": 4, "tasks_per_worker": 25, "setting": "amateur",
              "seed": 2026}
#: Options of the floor's samplers: chains in this process (a replicate's refit is one
#: fit; spawning its chains would cost more than they run); Gibbs's 2 × 500 kept sweeps
#: (ESS ~400 on such data) give the 100 thinned draws the ranks need at half the default's
#: cost. The sampler's own error shows in the ``k = 2`` control, whose simulator is exact.
#: NUTS (normalised COUPLE, whose simulator is exact) on 2 chains × (300 + 500) without the
#: pointwise log-likelihood or predictive draws, which posterior SBC does not read.
FLOOR_OPTIONS = {"gibbs": {"processes": 1, "warmup": 300, "draws": 500},
                 "nuts": {"chain_method": "sequential", "chains": 2, "tune": 300,
                          "draws": 500, "pointwise": False, "predictive": False}}


def run_floor(args, base: dict) -> list[dict]:
    """Posterior SBC of exact samplers on COUPLE data from the generative story: how far
    the model–simulator mismatch alone moves the ranks (module docstring)."""
    from crowdrank.models.simulate import simulate
    from crowdrank.validation.pipelines.audit_config import AuditConfig, make_priors
    from crowdrank.validation.pipelines.posterior_sbc import PosteriorSbcConfig, run_posterior_sbc

    recs = []
    for run in args.floor_runs.split(","):
        model, method, kmax = run.split(":")
        kw = dict(FLOOR_DATA, kmax=int(kmax))
        # the data y: the story's (stagewise COUPLE) for every run, so that normalised
        # COUPLE is checked on the same rankings as stagewise COUPLE
        data = simulate("couple", **kw).rankings
        pri = make_priors(data, AuditConfig())
        opts = FLOOR_OPTIONS.get(method, {})
        out = Path(args.out) / "floor" / run.replace(":", "-")
        t0, c0 = time.perf_counter(), cpu_seconds()
        n, summ = 0, None
        while n < args.sims and (summ is None or time.perf_counter() - t0 < args.budget_s):
            n = min(args.sims, n + args.chunk)
            cfg = PosteriorSbcConfig(method=method, model=model, sims=n, augment=args.augment,
                                     options=opts)
            summ = run_posterior_sbc(data, pri, cfg, out, processes=args.processes,
                                     progress=False)
            print(run, n, round(time.perf_counter() - t0), summ["verdict"], file=sys.stderr)
        rec = {**base, "kind": "floor", "model": model, "method": method, "options": opts,
               "data": {**kw, "rankings": data.n_rankings, "story": "couple (stagewise)"},
               "simulator_exact": model == "couple-normalized" or int(kmax) == 2,
               "sims": summ["replicates"], "sims_asked": args.sims, "budget_s": args.budget_s,
               "augment": args.augment, "calibrated": summ["calibrated"],
               "verdict": summ["verdict"], **tolerance_fields(summ),
               "ranks_calibrated": summ["ranks"]["calibrated"],
               "families": {f: {k: v[k] for k in ("ecdf_p_combined", "pot_c_p_combined",
                                                   "calibrated")}
                            for f, v in summ["ranks"]["families"].items()},
               "size": summ["size"], "predictive_p": summ["checks"]["predictive"]["p"],
               "contraction": {f: v["median"] for f, v in
                               summ["checks"]["contraction"]["groups"].items()},
               "timing": summ["timing"], "wall_s": time.perf_counter() - t0,
               "cpu_s": cpu_seconds() - c0}
        recs.append(rec)
        append([{**rec, "load_after": [round(x, 2) for x in os.getloadavg()]}])
    return []


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("power", "cost", "validate", "paper", "floor"))
    p.add_argument("--subjects", default="default-couple,default-crowdbt,medium-expert,"
                   "medium-amateur,medium-spammer,medium-malicious,babyface-couple,"
                   "readlevel-couple,readlevel-crowdbt")
    p.add_argument("--labels", default="one-pass,ep5 damping=0")
    p.add_argument("--augments", default="0.25,0.5,1,2")
    p.add_argument("--augment", type=float, default=None)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--prior-draws", type=int, default=None,
                   help="power: importance draws of the planted exact posterior (default "
                        "posterior_sbc_planted.PRIOR_DRAWS)")
    p.add_argument("--sims", type=int, default=200)
    p.add_argument("--method", default="online")
    p.add_argument("--methods", default="online,ep", help="paper: the audited methods")
    p.add_argument("--models", default="couple,crowdbt")
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--floor-runs", default="couple:gibbs:4,couple:gibbs:2",
                   help="floor: model:method:kmax runs")
    p.add_argument("--budget-s", type=float, default=450.0,
                   help="floor: wall seconds per run after which no chunk is started")
    p.add_argument("--chunk", type=int, default=25, help="floor: replicates per chunk")
    p.add_argument("--out", default=str(ROOT / "out" / "posterior-sbc-bench"))
    args = p.parse_args(argv)
    if args.augment is None:
        from crowdrank.validation.pipelines.posterior_sbc import DEFAULT_AUGMENT
        args.augment = DEFAULT_AUGMENT
    base = stamp(script=__file__, argv=argv, speed=False)
    recs = {"power": run_power, "cost": run_cost, "validate": run_validate,
            "paper": run_paper, "floor": run_floor}[args.what](args, base)
    for r in recs:
        r["load_after"] = [round(x, 2) for x in os.getloadavg()]
    append(recs)
    print(json.dumps([{k: v for k, v in r.items() if k not in ("rows", "packages")}
                      for r in recs], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
