"""Benchmarks of the NUTS reference: warm starts, back-ends side by side, paper scale.

Every figure is *measured* end to end by this script (nothing extrapolated); the load
average is recorded beside each, because the 2-core machine may be shared.

* ``warmstart``: the default audit's data (COUPLE, geometric prior a0=10, a=6): leapfrog
  steps (gradients) spent in warm-up from the default start (``fit_nuts``'s own init
  strategy, identity mass matrix) against a warm start from the online posterior (one draw per chain, mass
  matrix seeded from the approximation's variances), same tune/draws/seed.
* ``warmstart-ladder``: the same data and prior, both models and starts, a ladder of warm-up
  lengths (``--tunes``) on several seeds at a fixed ``--draws``: does a *shorter* warm-up
  suffice from the online start? ``shortest_trusted`` reads, per model and start, the
  shortest tune trusted on every seed. Appended to ``reference_warmstart.json``.
* ``medium``: L=100, W=50, 5,000 rankings (COUPLE k ≤ 4 or CrowdBT pairs; one worker type;
  geometric prior), NumPyro and PyMC from the same warm starts and the same prior, one
  sampler configuration per call (tune, draws, dense/diagonal mass, target accept,
  precision): gate, the worst parameters (R-hat, ESS, per-chain means), minimum bulk/tail
  ESS, ESS per second of sampling, wall and CPU seconds, load before and after.
* ``paper``: L=1000, W=500, T=900, k ≤ 4 (450,000 rankings), COUPLE under the paper's
  geometric prior, 4 chains, float32 likelihood work with float64 totals, warm-started from
  OnlineGBMM: where the time goes (simulation, online pass, compile, warm-up, sampling,
  gradients per draw) and whether the gate passes.

Writes ``bench/results/reference_<what>.json``::

    python bench/bench_reference.py warmstart
    python bench/bench_reference.py warmstart-ladder [--tunes 50,100,200,300 --seeds 0,1
        --draws 1000 --stop-when-trusted]
    python bench/bench_reference.py medium [--backends numpyro,pymc] [--model couple]
        [--setting amateur] [--tune 300 --draws 500] [--dense] [--target-accept 0.8]
        [--precision float64] [--append]
    python bench/bench_reference.py paper [--tune 300 --draws 400] [--stop-after MIN]
        [--eta-update gibbs --gibbs-sweeps 2 --gibbs-walk 0]
    python bench/bench_reference.py medium ... --at REV    # the code of commit REV, here

``paper --eta-update gibbs``: NUTS on the scores within the exact Gibbs step of the worker
simplexes (``fit_nuts_experimental(eta_update="gibbs")``, :mod:`crowdrank.inference.nuts.gibbs`); the record adds the
Gibbs step's cost per iteration (``gibbs_ms``, all its sweeps, one chain) and its share.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))

import numpy as np
import rerun
from rerun import cpu_seconds, without
from speed import speed_probe
from stamp import stamp

RESULTS = ROOT / "bench" / "results"


def env() -> dict:
    """The keys this file's records have always carried beside :func:`when`'s."""
    return {"cpu_count": os.cpu_count(), "python": platform.python_version(),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


@functools.cache
def _speed() -> dict:
    """The machine's speed probe, once per process (~6 s)."""
    return speed_probe()


def when(argv: list[str] | None = None) -> dict:
    """``stamp()`` for a record of this script: date, commit (``+dirty``), the command
    (``argv``: the arguments after the script name, this process's by default), load, CPU,
    and the speed probe measured once per process."""
    return stamp(argv, speed=False, script=__file__) | {"speed": _speed()}


def summarise(r, wall: float) -> dict:
    import arviz_stats as azs

    post = r.idata["posterior"]
    bulk = min(float(np.nanmin(np.asarray(azs.ess(post[v], method="bulk")))) for v in post)
    tail = min(float(np.nanmin(np.asarray(azs.ess(post[v], method="tail")))) for v in post)
    ss = r.idata["sample_stats"]
    t = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.timings.items()}
    draws = int(post.sizes["chain"] * post.sizes["draw"])
    samp = max(t.get("sampling", wall), 1e-9)
    rec = {"trusted": bool(r.gate.trusted), "gate": r.gate.verdict(),
           "ess_bulk_min": round(bulk, 1), "ess_tail_min": round(tail, 1),
           "leapfrog_per_draw": round(float(np.asarray(ss["n_steps"]).mean()), 2),
           "divergences": int(np.asarray(ss["diverging"]).sum()), "draws_total": draws,
           "timings_s": t, "wall_s": round(wall, 2),
           "ess_bulk_per_s": round(bulk / samp, 2),
           "ess_bulk_per_wall_s": round(bulk / wall, 2),
           "ess_tail_per_s": round(tail / samp, 2),
           "ess_tail_per_wall_s": round(tail / wall, 2), "loadavg_after": env()["loadavg"]}
    tune = int(r.idata.attrs.get("tune", 0))
    if t.get("warmup_gradients") is not None and tune:
        rec["gradients_per_warmup_iteration"] = round(
            t["warmup_gradients"] / (tune * post.sizes["chain"]), 2)
    if t.get("sampling_gradients") is not None:
        rec["gradients_per_draw"] = round(t["sampling_gradients"] / draws, 2)
    return rec


def fit(data, model, priors, **kw):
    """One timed fit; the benchmark also times the gradient alone (``profile``) and reaches
    the experimental routes (``adapt``, ``eta_update``, ...), whose defaults are the
    trusted route of ``fit_nuts``."""
    from crowdrank.inference.nuts.experimental import fit_nuts_experimental

    kw.setdefault("profile", True)
    t = time.perf_counter()
    r = fit_nuts_experimental(data, model, priors, progress=False, **kw)
    return r, time.perf_counter() - t


def bench_warmstart(args) -> list:
    from crowdrank.inference.online import fit_online
    from crowdrank.models.priors import Priors
    from crowdrank.validation.pipelines.audit import default_subject

    d = default_subject().data
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6)
    out = []
    for model in ("couple", "crowdbt"):
        p = pr.for_data(d, K=2) if model == "crowdbt" else pr
        on = fit_online(d, model, p, progress=False)
        for start in ("default", "online"):
            r, wall = fit(d, model, p, chains=4, tune=args.tune, draws=args.draws, seed=0,
                          approx=on if start == "online" else None)
            rec = {"what": "warmstart", "model": model, "start": start,
                   "tune": args.tune, "draws": args.draws, **summarise(r, wall), **env()}
            print(json.dumps(rec), flush=True)
            out.append(rec)
    return out


def latest_runs(records: list) -> list:
    """The ``warmstart_ladder`` records of each (model, start)'s latest run: those with the
    commit of its newest record. A ladder re-run on later code supersedes the earlier runs
    of that (model, start) (they stay in the file, with their commits); records without a
    commit or date are never the latest run."""
    newest: dict = {}
    for r in records:
        if r.get("what") != "warmstart_ladder" or not (r.get("commit") and r.get("date")):
            continue
        key = (r["model"], r["start"])
        if key not in newest or r["date"] > newest[key]["date"]:
            newest[key] = r
    return [r for r in records if r.get("what") == "warmstart_ladder"
            and (r["model"], r["start"]) in newest
            and r.get("commit") == newest[(r["model"], r["start"])]["commit"]]


def shortest_trusted(records: list) -> dict:
    """Per (model, start): the shortest tune whose runs are trusted on every seed.

    ``records`` are ``warmstart_ladder`` records (model, start, tune, seed, trusted,
    ``timings_s.warmup_gradients``, leapfrog_per_draw). Returns ``{(model, start): {"tune",
    "seeds", "warmup_gradients" (mean over the seeds), "leapfrog_per_draw" (mean)}}``, or
    ``None`` for a (model, start) with no tune trusted on all of its seeds. A tune counts only
    with every seed that any tune of that (model, start) was run with: a tune run on fewer
    seeds (the ladder stopped, or was stopped) cannot vouch for the others.
    """
    summ = ladder_summary(records)
    seeds: dict = {}
    for (m, s, _), v in summ.items():
        seeds.setdefault((m, s), set()).update(v["seed_set"])
    out: dict = {key: None for key in seeds}
    for (m, s, tune) in sorted(summ, key=lambda k: k[2]):
        v = summ[(m, s, tune)]
        if (out[(m, s)] is None and set(v["seed_set"]) == seeds[(m, s)]
                and v["trusted"] == v["seeds"]):
            out[(m, s)] = {"tune": tune, "seeds": sorted(seeds[(m, s)]),
                           "warmup_gradients": v["warmup_gradients"],
                           "leapfrog_per_draw": v["leapfrog_per_draw"]}
    return out


def ladder_summary(records: list) -> dict:
    """Per (model, start, tune) of ``warmstart_ladder`` records: runs, the seeds run
    (``seed_set``), runs trusted, and the means over runs of warm-up gradients, warm-up
    gradients per iteration and chain, and leapfrogs per draw."""
    by: dict = {}
    for r in records:
        if r.get("what") == "warmstart_ladder":
            by.setdefault((r["model"], r["start"], r["tune"]), []).append(r)
    out = {}
    for (m, s, tune), rs in by.items():
        g = float(np.mean([r["timings_s"]["warmup_gradients"] for r in rs]))
        out[(m, s, tune)] = {"seeds": len(rs), "seed_set": sorted({r["seed"] for r in rs}),
                             "trusted": sum(bool(r["trusted"]) for r in rs),
                             "warmup_gradients": g,
                             "gradients_per_warmup_iteration": g / (
                                 tune * int(np.mean([r["draws_total"] / r["draws"]
                                                     for r in rs]))),
                             "leapfrog_per_draw": float(np.mean(
                                 [r["leapfrog_per_draw"] for r in rs]))}
    return out


def bench_warmstart_ladder(args) -> list:
    """Tune ladder: each (model, start) from the shortest tune up, every seed at each tune.

    With ``--stop-when-trusted`` a (model, start) climbs no further once one tune is trusted
    on every seed (the question is the *shortest* such tune; gradients, not seconds, are the
    figure of merit on a shared machine). Records are written as they finish (``--out``), so
    a stopped ladder keeps what it measured.
    """
    from crowdrank.inference.online import fit_online
    from crowdrank.models.priors import Priors
    from crowdrank.validation.pipelines.audit import default_subject

    d = default_subject().data
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6)
    tunes = sorted(int(t) for t in args.tunes.split(","))
    seeds = [int(s) for s in args.seeds.split(",")]
    out = []
    for model in args.models.split(","):
        p = pr.for_data(d, K=2) if model == "crowdbt" else pr
        on = fit_online(d, model, p, progress=False)
        for start in args.starts.split(","):
            for tune in tunes:
                ok = True
                for seed in seeds:
                    c0 = cpu_seconds()
                    r, wall = fit(d, model, p, chains=4, tune=tune, draws=args.draws,
                                  seed=seed, approx=on if start == "online" else None)
                    rec = {"what": "warmstart_ladder", "model": model, "start": start,
                           "tune": tune, "draws": args.draws, "seed": seed,
                           **summarise(r, wall), "cpu_s": round(cpu_seconds() - c0, 1),
                           **env(), **when()}
                    print(json.dumps(rec), flush=True)
                    out.append(rec)
                    ok = ok and rec["trusted"]
                    # every fit compiles new programs (the model closes over its data), each
                    # keeping ~2,000 memory mappings: a whole ladder in one process passes
                    # the kernel's vm.max_map_count (65,530) after ~50 fits and LLVM fails
                    # ("Cannot allocate memory"), as validation/pipelines/sbc.py says
                    _drop_compiled()
                    if args.partial:
                        Path(args.partial).write_text(json.dumps(out, indent=1,
                                                                 allow_nan=False))
                if ok and args.stop_when_trusted:
                    break
    return out


def _drop_compiled() -> None:
    """Drop JAX's compiled programs (nothing is reused from one fit to the next)."""
    import jax

    jax.clear_caches()


def worst_parameters(idata, n: int = 6) -> dict:
    """Per variable: the largest R-hat and smallest bulk/tail ESS, and the ``n`` scalar
    parameters with the largest R-hat (name[index], R-hat, bulk ESS, per-chain means) —
    what tells a slow-mixing coordinate from chains stuck in different modes."""
    import arviz_stats as azs

    post = idata["posterior"].to_dataset()
    per_var, rows = {}, []
    for v in post.data_vars:
        r = np.asarray(azs.rhat(post[v]), float)
        eb = np.asarray(azs.ess(post[v], method="bulk"), float)
        et = np.asarray(azs.ess(post[v], method="tail"), float)
        per_var[v] = {"rhat_max": round(float(np.nanmax(r)), 4),
                      "n_rhat_over_1.01": int((r > 1.01).sum()), "size": int(r.size),
                      "ess_bulk_min": round(float(np.nanmin(eb)), 1),
                      "ess_tail_min": round(float(np.nanmin(et)), 1)}
        x = np.asarray(post[v].values, float)
        for flat in np.argsort(-np.nan_to_num(r.ravel(), nan=9.0))[:n]:
            ix = np.unravel_index(flat, r.shape) if r.ndim else ()
            rows.append({"param": f"{v}{list(map(int, ix))}", "rhat": round(float(r[ix]), 4),
                         "ess_bulk": round(float(eb[ix]), 1),
                         "chain_means": np.round(x[(slice(None), slice(None)) + ix]
                                                 .mean(axis=1), 4).tolist()})
    rows.sort(key=lambda d: -d["rhat"])
    return {"per_variable": per_var, "worst": rows[:n]}


def adaptation_report(r, n: int = 8, workers=()) -> dict | None:
    """NumPyro's adapted step size and inverse mass diagonal against the draws' variance
    per unconstrained coordinate (:func:`crowdrank.inference.nuts.adaptation_summary`): the ratio's
    spread over all coordinates, the ``n`` coordinates where it is furthest below 1
    (adaptation too timid there), and every coordinate of the listed ``workers`` (those of
    the worst R-hat) — with per-chain ratios and posterior sds."""
    a = r.adaptation
    if a is None:
        return None
    ratio = a["inv_mass"] / np.maximum(a["post_var"], 1e-300)     # (chains, D)
    q = np.quantile(ratio, [0.0, 0.05, 0.5, 0.95, 1.0])

    def row(i):
        return {"coordinate": a["names"][i],
                "ratio_per_chain": np.round(ratio[:, i], 3).tolist(),
                "inv_mass_per_chain": np.round(a["inv_mass"][:, i], 4).tolist(),
                "post_sd_per_chain": np.round(np.sqrt(a["post_var"][:, i]), 3).tolist()}
    tags = tuple(f"[{w}," for w in workers)
    return {"step_size": np.round(a["step_size"], 4).tolist(),
            "ratio_quantiles_0_5_50_95_100": np.round(q, 3).tolist(),
            "lowest_ratio": [row(i) for i in np.argsort(np.median(ratio, axis=0))[:n]],
            "worst_workers": [row(i) for i, name in enumerate(a["names"])
                              if tags and name.startswith("eta") and
                              any(t in name for t in tags)]}


def worst_workers(diagnosis: dict, n: int = 2) -> list[int]:
    """Worker indices of the ``eta`` parameters with the largest R-hat."""
    out = []
    for row in diagnosis["worst"]:
        if row["param"].startswith("eta["):
            w = int(row["param"][4:].split(",")[0].rstrip("]"))
            if w not in out:
                out.append(w)
    return out[:n]


def medium_data(model: str, setting: str):
    """The medium scale: L=100, W=50, 100 tasks per worker (5,000 rankings; k ≤ 4 for
    COUPLE, pairs for CrowdBT), geometric prior a0=10, a=6 (CrowdBT: its Beta marginal)."""
    from crowdrank.models.priors import Priors
    from crowdrank.models.registry import get as get_model
    from crowdrank.models.simulate import simulate

    d = simulate(model, setting=setting, n_items=100, n_workers=50, tasks_per_worker=100,
                 kmax=4 if model == "couple" else 2, seed=0).rankings
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6)
    return d, get_model(model).worker_priors(pr, d)


def save_reference(r, rec: dict, out: Path, wall: float) -> None:
    """Keep a run as the fidelity study's reference (``bench/bench_fidelity.py``'s
    cache layout: ``posterior.nc`` + ``reference.json``), so the study does not sample the
    same posterior twice."""
    from crowdrank.inference.nuts import write_nuts

    write_nuts(r, out)
    (out / "reference.json").write_text(json.dumps(
        {"name": out.name, "model": rec["model"], "backend": rec["backend"],
         "tune": rec["tune"], "draws": rec["draws"],
         "dense_mass": rec["dense_mass"], "target_accept": rec["target_accept"],
         "trusted": rec["trusted"], "gate": rec["gate"], "wall_s": round(wall, 1),
         "cpu_s": rec["cpu_s"], "loadavg_before": rec["loadavg_before"],
         "timings": {k: float(v) for k, v in r.timings.items()},
         "machine": platform.machine(), "cpus": os.cpu_count(),
         "python": platform.python_version(), "loadavg": env()["loadavg"],
         "date": rec["date"], "saved_by": "bench/bench_reference.py medium"}, indent=1))


def bench_medium(args) -> list:
    """One configuration per back-end on the medium data, both back-ends from the same
    warm starts (the same seed draws the same approximation draws for each)."""
    from crowdrank.inference.online import fit_online

    d, pr = medium_data(args.model, args.setting)
    on = fit_online(d, args.model, pr, progress=False)
    out = []
    for b in args.backends.split(","):
        cfg = {"backend": b, "model": args.model, "setting": args.setting,
               "chains": args.chains, "tune": args.tune, "draws": args.draws,
               "seed": args.seed, "adapt": args.adapt if b == "numpyro" else "windowed",
               "max_draws": args.max_draws if b == "numpyro" else None,
               "dense_mass": args.dense, "target_accept": args.target_accept,
               "precision": args.precision if b == "numpyro" else "float64"}
        load0 = env()["loadavg"]
        c0 = cpu_seconds()
        r, wall = fit(d, args.model, pr, backend=b, chains=args.chains, tune=args.tune,
                      draws=args.draws, seed=args.seed, approx=on, dense_mass=args.dense,
                      target_accept=args.target_accept,
                      precision=args.precision if b == "numpyro" else "float64",
                      adapt=args.adapt if b == "numpyro" else "windowed",
                      max_draws=args.max_draws if b == "numpyro" else None)
        if int(r.idata.attrs["draws"]) != args.draws:   # sampling extended (--max-draws)
            cfg.update(draws=int(r.idata.attrs["draws"]), draws_per_round=args.draws)
        # the rounds are one longer run of the same chains: ESS is over all its draws and
        # "sampling" (the ESS/s denominator) times all rounds with their gate checks
        cfg["ess_per_s_basis"] = (
            f"ESS over all {int(r.idata.attrs['draws'])} draws per chain "
            f"({int(r.timings.get('sampling_rounds', 1))} round(s) of {args.draws}) "
            "/ the sampling seconds of all rounds; warm-up and compile excluded")
        rec = {"what": "medium", **cfg, "L": d.n_items, "W": d.n_workers,
               "N": d.n_rankings, "start": "online (same draws for both back-ends)",
               "cpu_s": round(cpu_seconds() - c0, 1), "loadavg_before": load0,
               **summarise(r, wall), "diagnosis": (diag := worst_parameters(r.idata)),
               "adaptation": adaptation_report(r, workers=worst_workers(diag)), **env(),
               **when()}
        # ESS per CPU second: the figure that does not depend on how loaded the machine was
        rec["ess_bulk_per_cpu_s"] = round(rec["ess_bulk_min"] / max(rec["cpu_s"], 1e-9), 2)
        rec["ess_tail_per_cpu_s"] = round(rec["ess_tail_min"] / max(rec["cpu_s"], 1e-9), 2)
        if args.save:
            save_reference(r, rec, Path(args.save.replace("{backend}", b)), wall)
        print(json.dumps({k: rec[k] for k in ("backend", "model", "setting", "tune", "draws",
                                               "dense_mass", "target_accept", "gate",
                                               "wall_s", "cpu_s", "ess_bulk_per_s",
                                               "ess_bulk_per_cpu_s")}),
              flush=True)
        out.append(rec)
    return out


def adaptation_blocks(r) -> dict:
    """Per site of the sampler (``lambda_c``, ``eta_u``, ...): the adapted step size and,
    over the site's coordinates, quantiles of adapted inverse mass / posterior variance
    (per chain) — a ratio far from 1 is a coordinate the warm-up mis-scaled."""
    a = getattr(r, "adaptation", None)
    if not a:
        return {}
    ratio = np.asarray(a["inv_mass"], float) / np.maximum(np.asarray(a["post_var"], float),
                                                          1e-300)
    site = np.array([str(n).split("[")[0] for n in a["names"]])
    out = {"step_size": np.round(np.asarray(a["step_size"], float), 5).tolist()}
    for s in dict.fromkeys(site):
        q = np.quantile(ratio[:, site == s], [0.01, 0.5, 0.99])
        out[f"inv_mass/post_var {s} (q01, q50, q99)"] = np.round(q, 3).tolist()
    return out


def paper_header(args, argv: list[str] | None = None) -> dict:
    """What a ``paper`` record says before it samples: the configuration, date, commit and
    command (``argv``: this process's arguments by default)."""
    argv = sys.argv[1:] if argv is None else argv
    return {"what": "paper" if (args.items, args.workers, args.tasks) == (1000, 500, 900)
           else "paper-probe", "model": "couple", "prior": "geometric:a0=10,a=6",
           "chains": args.chains, "tune": args.tune, "draws": args.draws,
           "precision": "float32", "adapt": args.adapt, "worker_level": args.worker_level,
           "refine_eta": args.refine_eta, "eta_update": args.eta_update,
           **({"gibbs_sweeps": args.gibbs_sweeps, "gibbs_walk": args.gibbs_walk,
               "gibbs_mode_jump": args.gibbs_mode_jump}
              if args.eta_update == "gibbs" else {}),
           "start": "online (approx draws, seeded mass)", **when(argv),
           "machine": platform.machine(), **env()}


def run_at(rev: str, argv: list[str]) -> list:
    """The same command with the code of commit ``rev`` (``rerun.at_commit``). A record
    that differs from one written at ``rev`` earlier was changed by the environment, not
    the code. The records get ``rev`` as their commit, this command and this run's stamp
    (packages, CPU, probe; ``run_from``: the commit that ran it)."""
    here = when(argv)
    short, done = rerun.at_commit("bench/bench_reference.py", rev, without(argv, "--at"))
    for r in done:
        r.update({k: v for k, v in here.items() if k not in ("date", "load_before")},
                 commit=short, run_from=here["commit"])
        r.setdefault("date", here["date"])
    return done


def paper_with_cap(args, argv: list[str]) -> list:
    """``paper`` in a child process stopped after ``--stop-after`` minutes: a run that does
    not finish still leaves a record, written here, not by hand (the header the child
    printed before sampling, the wall and CPU seconds until it was stopped)."""
    header = paper_header(args, argv)        # the parent's command, with the cap
    load0 = env()["loadavg"]
    got = rerun.with_cap(Path(__file__), without(argv, "--stop-after"), args.stop_after)
    if got["records"] is not None:
        return [r | {"command": header["command"]} for r in got["records"]]
    # the child's header adds the data's size and the simulation and online-pass times
    head = header | (json.loads(got["lines"][0]) if got["lines"] else {})
    head.update({"status": f"NOT COMPLETED: stopped by --stop-after after "
                           f"{args.stop_after:g} min, before the sampler returned",
                 "wall_s_until_stopped": round(got["wall_s"], 1),
                 "cpu_s_until_stopped": round(got["cpu_s"], 1),
                 "loadavg_before": load0, "loadavg_after": env()["loadavg"],
                 "goal_s": 1200, "command": header["command"]})
    print(json.dumps(head), flush=True)
    return [head]


def bench_paper(args) -> list:
    """The paper's scale (or, with ``--items/--workers/--tasks``, a smaller one with the
    same per-item and per-worker information when ``--tasks 900`` is kept: L=100, W=50
    gives each item and each worker as many rankings as at the paper's scale)."""
    from crowdrank.inference.online import fit_online
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    scale = {"n_items": args.items, "n_workers": args.workers,
             "tasks_per_worker": args.tasks, "kmax": 4}
    rec = paper_header(args)
    load0, c0, t00 = env()["loadavg"], cpu_seconds(), time.perf_counter()
    t = time.perf_counter()
    d = simulate("couple", setting="amateur", seed=0, **scale).rankings
    rec["simulate_s"] = round(time.perf_counter() - t, 2)
    rec.update(L=d.n_items, W=d.n_workers, N=d.n_rankings)
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6)
    t = time.perf_counter()
    on = fit_online(d, "couple", pr, progress=False)
    rec["online_s"] = round(time.perf_counter() - t, 2)
    print(json.dumps(rec), flush=True)
    r, wall = fit(d, "couple", pr, chains=args.chains, tune=args.tune, draws=args.draws,
                  seed=args.seed, approx=on, precision="float32", pointwise=False,
                  predictive=False, adapt=args.adapt, worker_level=args.worker_level,
                  refine_eta=args.refine_eta, eta_update=args.eta_update,
                  gibbs_sweeps=args.gibbs_sweeps, gibbs_walk=args.gibbs_walk,
                  gibbs_mode_jump=args.gibbs_mode_jump)
    rec.update(summarise(r, wall))
    tm = r.timings
    if "gibbs_ms" in tm:
        # one call per iteration per chain; the chains share the cores, so this is the
        # serial estimate of the step's CPU share
        its = args.chains * (args.tune + args.draws)
        rec["gibbs_step_s_est"] = round(tm["gibbs_ms"] * its / 1e3, 1)
        rec["gradient_s_est"] = round(tm["gradient_ms"] * (tm.get("warmup_gradients", 0)
                                                           + tm["sampling_gradients"]) / 1e3, 1)
    rec["leapfrog_per_warmup_iteration"] = round(tm.get("warmup_gradients", 0)
                                                 / max(1, args.chains * args.tune), 1)
    for i in (1, 2):
        if f"warmup_gradients_{i}" in tm:
            rec[f"leapfrog_per_warmup_iteration_stage{i}"] = round(
                tm[f"warmup_gradients_{i}"] / max(1, args.chains * tm[f"warmup_iters_{i}"]), 1)
    rec["adaptation"] = adaptation_blocks(r)
    rec["diagnosis"] = worst_parameters(r.idata)
    rec["end_to_end_s"] = round(time.perf_counter() - t00, 1)
    rec["cpu_s"] = round(cpu_seconds() - c0, 1)
    rec["loadavg_before"] = load0
    rec["goal_s"] = 1200
    if args.save:
        # the draws themselves, for diagnosing the slow parameters afterwards
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        r.idata.to_netcdf(args.save)
        rec["saved_draws"] = args.save
    print(json.dumps({k: v for k, v in rec.items() if k not in ("diagnosis",)}), flush=True)
    return [rec]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("warmstart", "warmstart-ladder", "medium", "paper"))
    ap.add_argument("--tunes", default="50,100,200,300",
                    help="warmstart-ladder: the warm-up lengths, shortest first")
    ap.add_argument("--seeds", default="0,1", help="warmstart-ladder: sampler seeds")
    ap.add_argument("--models", default="couple,crowdbt", help="warmstart-ladder: models")
    ap.add_argument("--starts", default="default,online", help="warmstart-ladder: starts")
    ap.add_argument("--stop-when-trusted", action="store_true",
                    help="warmstart-ladder: a (model, start) stops climbing at the first "
                         "tune trusted on every seed")
    ap.add_argument("--partial", default=None,
                    help="warmstart-ladder: rewrite this JSON after every run")
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--backends", default="numpyro,pymc")
    ap.add_argument("--model", default="couple", choices=("couple", "crowdbt"),
                    help="medium: the model (default couple)")
    ap.add_argument("--setting", default="amateur",
                    help="medium: worker type (expert, amateur, spammer, malicious)")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0, help="medium: the sampler's seed")
    ap.add_argument("--max-draws", type=int, default=None,
                    help="medium, NumPyro: continue the chains in rounds of --draws while "
                         "the gate fails on R-hat/ESS, up to this many draws per chain "
                         "(fit_nuts max_draws=; off by default: the ESS/s pair compares "
                         "fixed budgets)")
    ap.add_argument("--dense", action="store_true", help="medium: dense mass matrix")
    ap.add_argument("--target-accept", type=float, default=0.8)
    ap.add_argument("--precision", default="float64", choices=("float64", "float32"))
    ap.add_argument("--save", default=None,
                    help="medium: also keep the run as a fidelity reference in this "
                         "folder (e.g. out/fidelity/medium-amateur); paper: write the "
                         "draws (InferenceData) to this NetCDF file")
    ap.add_argument("--append", action="store_true",
                    help="add the records to the JSON instead of replacing it")
    ap.add_argument("--out", default=None)
    ap.add_argument("--items", type=int, default=1000, help="paper: L (default 1000)")
    ap.add_argument("--workers", type=int, default=500, help="paper: W (default 500)")
    ap.add_argument("--tasks", type=int, default=900,
                    help="paper: tasks per worker (default 900)")
    ap.add_argument("--adapt", default=None, choices=("windowed", "fixed", "pooled"),
                    help="warm-up scheme (fit_nuts_experimental adapt=; default windowed; "
                         "NumPyro only)")
    ap.add_argument("--worker-level", default="fixed", choices=("fixed", "approx"),
                    help="paper: law of the workers' auxiliary magnitude "
                         "(fit_nuts_experimental worker_level=; default fixed)")
    ap.add_argument("--refine-eta", action=argparse.BooleanOptionalAction, default=False,
                    help="paper: refine the online worker concentrations by EM counts "
                         "(fit_nuts_experimental refine_eta=; default off)")
    ap.add_argument("--eta-update", default="nuts", choices=("nuts", "gibbs"),
                    help="paper: how the worker simplexes move (fit_nuts_experimental eta_update=; "
                         "default nuts, jointly with the scores)")
    ap.add_argument("--gibbs-sweeps", type=int, default=1,
                    help="paper, --eta-update gibbs: exact Gibbs sweeps of the worker "
                         "simplexes per iteration (default 1)")
    ap.add_argument("--gibbs-mode-jump", action="store_true",
                    help="paper, --eta-update gibbs: one two-mode independence move of "
                         "each worker's row per iteration (fit_nuts_experimental gibbs_mode_jump=)")
    ap.add_argument("--stop-after", type=float, default=None,
                    help="paper: run in a child process and stop it after this many minutes, "
                         "recording how far it got (wall and CPU seconds)")
    ap.add_argument("--gibbs-walk", type=int, default=0,
                    help="paper, --eta-update gibbs: random-walk Metropolis steps of each "
                         "worker's simplex per iteration after the sweeps (default 0)")
    ap.add_argument("--at", default=None, metavar="REV",
                    help="run this command with the code of commit REV (a temporary "
                         "worktree, this Python and its libraries): a change of code told "
                         "from a change of environment")
    args = ap.parse_args(argv)
    defaults = {"warmstart": (300, 500), "warmstart-ladder": (None, 1000),
                "medium": (300, 500), "paper": (300, 400)}
    args.tune = args.tune if args.tune is not None else defaults[args.what][0]
    args.draws = args.draws if args.draws is not None else defaults[args.what][1]
    # paper: the default route measured fewest leapfrogs per draw on the matched proxy
    # (docs/notes.md, paper scale)
    args.adapt = args.adapt or "windowed"
    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    if args.at:
        out = run_at(args.at, sys.argv[1:] if argv is None else list(argv))
    elif args.what == "paper" and args.stop_after:
        out = paper_with_cap(args, sys.argv[1:] if argv is None else list(argv))
    else:
        out = {"warmstart": bench_warmstart, "warmstart-ladder": bench_warmstart_ladder,
               "medium": bench_medium, "paper": bench_paper}[args.what](args)
    # the ladder's records sit beside the single-tune ones ("what": "warmstart_ladder")
    # (appended, never replacing the older records)
    name = "warmstart" if args.what == "warmstart-ladder" else args.what
    args.append = args.append or args.what == "warmstart-ladder"
    p = Path(args.out) if args.out else RESULTS / f"reference_{name}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    if args.append and p.is_file():
        out = json.loads(p.read_text()) + out
    p.write_text(json.dumps(out, indent=1, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
