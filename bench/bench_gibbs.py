"""The collapsed Gibbs sampler against NUTS: ESS per CPU second, equality parameter by
parameter, and the paper-scale reference (docs/results.md, "The collapsed Gibbs sampler").

Every figure is measured end to end by this script; CPU seconds include the chain
processes (``rusage`` of this process and its finished children); the load average is
recorded before and after each run (the 2-core machine may be shared).

* ``medium --setting S``: COUPLE at the medium scale (L=100, W=50, 5,000 rankings, k ≤ 4,
  geometric prior a0=10, a=6; ``bench_reference.medium_data``), NUTS in NumPyro as the
  trusted references of ``reference_medium.json`` were run (4 chains, 500 tune, warm start
  from the online posterior; ``--nuts-draws``) and the Gibbs sampler with its defaults
  (``--gibbs-draws`` kept draws per chain): each one's gate, CPU seconds, worst bulk and
  tail ESS per CPU second, and the Gibbs posterior against NUTS's: per parameter
  ``z = Δmean / √(MCSE_g² + MCSE_n²)`` and the sd ratio (centred scores, every η entry).
* ``default``: the embedded default audit's data, COUPLE and CrowdBT under its gold
  priors, the same figures.
* ``real``: BabyFace (COUPLE) and read-level (CrowdBT), geometric prior, the same figures.
* ``paper``: 450,000 rankings (L=1000, W=500, T=900, k ≤ 4, amateur workers, the paper's
  prior a0=10, a=6), 2 chains on 2 cores, end to end: the gate and the wall time
  (goal: a reference that passes the gate in ≤ 20 min).

Writes (appends to) ``bench/results/gibbs.json``::

    python bench/bench_gibbs.py medium --setting amateur [--nuts-draws 2000]
    python bench/bench_gibbs.py default
    python bench/bench_gibbs.py paper [--warmup 300 --gibbs-draws 1000 --walk-steps 5]
    python bench/bench_gibbs.py sbc [--sims 200]
    python bench/bench_gibbs.py audit

* ``sbc``: simulation-based calibration of the Gibbs sampler, CrowdBT and COUPLE on pairs
  (where Eq. 3 is normalised), 200 replicates each (10 items, 4 workers, 25 tasks).
* ``audit``: ``crowdrank audit --reference gibbs`` as typed (goal: trusted in ≤ 30 s).
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

# NumPyro before ArviZ: ArviZ's lazy numpyro placeholder, once in sys.modules, breaks a later
# warm-started NUTS run in this process (numpy.factor finds no numpyro.distributions.
# distribution), and the Gibbs runs import ArviZ before NUTS runs here
import numpy as np
import numpyro  # noqa: F401
from rerun import cpu_seconds
from stamp import stamp

OUT = ROOT / "bench" / "results" / "gibbs.json"
#: NUTS draws per chain of the trusted medium references (reference_medium.json at
#: ce42b57: 4 chains, 500 tune; fewer left the amateur reference untrusted, tail ESS 362)
NUTS_DRAWS = {"expert": 2000, "amateur": 4000, "spammer": 4000, "malicious": 7500}
#: NUTS references kept between runs (not in the repository: ``out/`` is ignored)
CACHE = ROOT / "out" / "gibbs-nuts"


def _diag(post) -> dict:
    """Worst R-hat, bulk and tail ESS per variable (centred scores), with MCSE and sds."""
    import arviz_stats as azs

    out = {}
    for v in post.data_vars:
        da = post[v] - post[v].mean("item") if v == "lambda" else post[v]
        rh = np.asarray(azs.rhat(da, method="rank"))
        b = np.asarray(azs.ess(da, method="bulk"))
        t = np.asarray(azs.ess(da, method="tail"))
        out["lambda_centred" if v == "lambda" else v] = {
            "rhat_max": round(float(np.nanmax(rh)), 4),
            "ess_bulk_min": round(float(np.nanmin(b)), 1),
            "ess_tail_min": round(float(np.nanmin(t)), 1),
            "size": int(rh.size)}
    return out


def _moments(post):
    """Per parameter (centred scores, then η entries): mean, sd, MCSE of the mean."""
    import arviz_stats as azs

    cols = []
    for v in ("lambda", "eta"):
        if v not in post:
            continue
        da = post[v] - post[v].mean("item") if v == "lambda" else post[v]
        x = np.asarray(da.values).reshape(da.shape[0], da.shape[1], -1)
        mean = x.mean(axis=(0, 1))
        sd = x.std(axis=(0, 1))
        mcse = np.asarray(azs.mcse(da, method="mean")).ravel()
        cols.append((mean, sd, mcse))
    return [np.concatenate(c) for c in zip(*cols)]


def agreement(post_g, post_n) -> dict:
    """Gibbs against NUTS, parameter by parameter: max and 99th percentile |z| (z from the
    two MCSEs), the sd ratios' range, and how many |z| exceed 4 (of how many)."""
    mg, sg, eg = _moments(post_g)
    mn, sn, en = _moments(post_n)
    z = (mg - mn) / np.sqrt(eg ** 2 + en ** 2)
    keep = sn > 1e-12
    ratio = sg[keep] / sn[keep]
    return {"z_abs_max": round(float(np.max(np.abs(z))), 3),
            "z_abs_p99": round(float(np.percentile(np.abs(z), 99)), 3),
            "n_z_over_4": int(np.sum(np.abs(z) > 4)), "n_params": int(z.size),
            "sd_ratio_min": round(float(ratio.min()), 3),
            "sd_ratio_max": round(float(ratio.max()), 3),
            "sd_ratio_median": round(float(np.median(ratio)), 3)}


def run_gibbs(d, model, pr, args) -> tuple:
    from crowdrank.inference.gibbs import fit_gibbs

    load0 = list(np.round(os.getloadavg(), 2))
    c0, t0 = cpu_seconds(), time.perf_counter()
    r = fit_gibbs(d, model, pr, chains=2, warmup=args.warmup, draws=args.gibbs_draws,
                  walk_steps=args.walk_steps, lambda_steps=args.lambda_steps,
                  jumps=args.jumps, seed=args.seed)
    cpu, wall = cpu_seconds() - c0, time.perf_counter() - t0
    post = r.idata["posterior"]
    g = r.gate
    rec = {"sampler": "gibbs", "chains": 2, "warmup": args.warmup, "draws": args.gibbs_draws,
           "walk_steps": args.walk_steps, "lambda_steps": args.lambda_steps,
           "jumps": args.jumps,
           "trusted": g.trusted, "gate": g.verdict(), "ess_bulk_min": g.ess_bulk_min,
           "ess_tail_min": g.ess_tail_min, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
           "ess_bulk_per_cpu_s": round(g.ess_bulk_min / cpu, 2),
           "ess_tail_per_cpu_s": round(g.ess_tail_min / cpu, 2),
           "sweep_ms": round(r.timings["sweep_ms"], 2), "diagnosis": _diag(post),
           "chains_detail": [{k: v for k, v in c.items() if k != "adapt_history"}
                             for c in r.chains],
           "load_before": load0, "load_after": list(np.round(os.getloadavg(), 2))}
    return rec, post


def run_nuts(d, model, pr, args) -> tuple:
    from crowdrank.inference.nuts import configure_host_devices, fit_nuts
    from crowdrank.inference.online import fit_online

    configure_host_devices()
    on = fit_online(d, model, pr, progress=False)
    load0 = list(np.round(os.getloadavg(), 2))
    c0, t0 = cpu_seconds(), time.perf_counter()
    r = fit_nuts(d, model, pr, backend=args.nuts_backend, chains=4, tune=500,
                 draws=args.nuts_draws, seed=args.seed, approx=on, progress=False)
    cpu, wall = cpu_seconds() - c0, time.perf_counter() - t0
    g = r.gate
    post = r.idata["posterior"]
    rec = {"sampler": "nuts", "backend": args.nuts_backend, "chains": 4, "tune": 500,
           "draws": args.nuts_draws, "start": "online", "trusted": g.trusted,
           "gate": g.verdict(), "ess_bulk_min": g.ess_bulk_min, "ess_tail_min": g.ess_tail_min,
           "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
           "ess_bulk_per_cpu_s": round(g.ess_bulk_min / cpu, 2),
           "ess_tail_per_cpu_s": round(g.ess_tail_min / cpu, 2), "diagnosis": _diag(post),
           "load_before": load0, "load_after": list(np.round(os.getloadavg(), 2))}
    return rec, post


def cached_nuts(d, model, pr, args, label: str) -> tuple:
    """NUTS's record and draws, from ``CACHE/label`` when a run with the same settings
    is there (``posterior.nc`` + ``record.json``), else run and kept there: the reference
    is sampled once per data set, the Gibbs sampler as often as it changes."""
    import xarray as xr

    folder = CACHE / label
    rec_f = folder / "record.json"
    if rec_f.exists():
        rec = json.loads(rec_f.read_text())
        if (rec.get("draws") == args.nuts_draws and rec.get("seed") == args.seed
                and rec.get("backend", "numpyro") == args.nuts_backend):
            post = xr.open_datatree(folder / "posterior.nc", engine="h5netcdf").load()
            return {**rec, "cached_from": str(folder.relative_to(ROOT))}, post
    rec, post = run_nuts(d, model, pr, args)
    folder.mkdir(parents=True, exist_ok=True)
    xr.DataTree(post.to_dataset()).to_netcdf(folder / "posterior.nc", engine="h5netcdf")
    rec = {**rec, "seed": args.seed, "date": stamp(speed=False)["date"],
           "commit": stamp(speed=False)["commit"]}
    rec_f.write_text(json.dumps(rec, indent=1, default=float))
    return rec, post


def pair(d, model, pr, args, label: str) -> dict:
    """Both samplers on one data set, and their agreement."""
    g, pg = run_gibbs(d, model, pr, args)
    print(f"{label}: gibbs {g['gate']} in {g['cpu_s']} CPU s", flush=True)
    n, pn = cached_nuts(d, model, pr, args, label)
    print(f"{label}: nuts {n['gate']} in {n['cpu_s']} CPU s", flush=True)
    agree = agreement(pg, pn)
    print(f"{label}: agreement {agree}", flush=True)
    return {"subject": label, "model": model, "L": d.n_items, "W": d.n_workers,
            "N": d.n_rankings, "gibbs": g, "nuts": n, "agreement": agree,
            "cpu_ratio": round(g["cpu_s"] / n["cpu_s"], 3)}


def _backend_suffix(args) -> str:
    """The label's suffix naming the NUTS reference's PPL (none for NumPyro, the first
    references' backend): the cache and the record's subject of a PyMC reference never
    collide with a NumPyro one."""
    return "" if args.nuts_backend == "numpyro" else f"-{args.nuts_backend}"


def bench_medium(args) -> list:
    from bench_reference import medium_data

    out = []
    draws = args.nuts_draws
    for setting in (args.settings or args.setting).split(","):
        args.nuts_draws = draws or NUTS_DRAWS[setting]
        d, pr = medium_data("couple", setting)
        out.append({"what": "medium", "setting": setting,
                    **pair(d, "couple", pr, args,
                           f"medium-{setting}{_backend_suffix(args)}")})
    return out


def bench_default(args) -> list:
    from crowdrank.models.registry import get as get_model
    from crowdrank.validation.pipelines.audit import AuditConfig, default_subject, make_priors

    subj = default_subject()
    pri = make_priors(subj.data, AuditConfig(), subj.gold)
    args.nuts_draws = args.nuts_draws or 1000
    out = []
    for model in ("couple", "crowdbt"):
        pr = get_model(model).worker_priors(pri, subj.data)
        label = f"default-{model}{_backend_suffix(args)}"
        out.append({"what": "default", **pair(subj.data, model, pr, args, label)})
    return out


def bench_real(args) -> list:
    """The registered real sets the audit's studies use: BabyFace (COUPLE) and read-level
    (CrowdBT), each under the geometric prior a0=10, a=6 (CrowdBT: its Beta marginal), as
    ``crowdrank audit NAME`` reads them; NUTS as the audit runs it (4 chains, 500 tune,
    1000 draws, warm start), the Gibbs sampler with ``--gibbs-draws``."""
    from crowdrank.models.io import read_data
    from crowdrank.models.priors import Priors
    from crowdrank.models.registry import get as get_model

    out = []
    for name, model in (("babyface", "couple"), ("readlevel", "crowdbt")):
        d, _ = read_data(name)
        pr = get_model(model).worker_priors(Priors.geometric(d.workers, d.K, a0=10, a=6), d)
        args.nuts_draws = args.nuts_draws or 1000
        out.append({"what": "real", **pair(d, model, pr, args,
                                             f"{name}-{model}{_backend_suffix(args)}")})
    return out


def bench_paper(args) -> list:
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate_paper_scale

    t0 = time.perf_counter()
    d = simulate_paper_scale("couple", setting="amateur", seed=0).rankings
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6)
    sim_s = time.perf_counter() - t0
    g, _ = run_gibbs(d, "couple", pr, args)
    print(f"paper: {g['gate']} in {g['wall_s']} s wall", flush=True)
    return [{"what": "paper", "model": "couple", "setting": "amateur", "L": d.n_items,
             "W": d.n_workers, "N": d.n_rankings, "simulate_s": round(sim_s, 1),
             "gibbs": g, "end_to_end_wall_s": round(time.perf_counter() - t0, 1),
             "goal": "passes the gate in <= 20 min wall on 2 cores",
             "met": bool(g["trusted"] and time.perf_counter() - t0 <= 1200)}]


def bench_sbc(args) -> list:
    """SBC of the Gibbs sampler (``crowdrank sbc --backend gibbs``'s pipeline): CrowdBT and
    COUPLE on pairs, ``--sims`` replicates each, the tail-sensitive uniformity verdict."""
    from crowdrank.validation.pipelines.sbc import SbcConfig, run_sbc

    out = []
    # COUPLE on pairs is CrowdBT with Beta(α1, α2): under one seed the two studies would
    # draw the same replicates, so COUPLE's takes the next seed (independent replicates)
    for model, kmax, seed in (("crowdbt", 2, args.seed), ("couple", 2, args.seed + 1)):
        cfg = SbcConfig(model=model, backend="gibbs", sims=args.sims, kmax=kmax,
                        online=False, seed=seed)
        c0, t0 = cpu_seconds(), time.perf_counter()
        summ = run_sbc(cfg, ROOT / "out" / "gibbs-sbc" / model, processes=2,
                       progress=False)
        wall = time.perf_counter() - t0
        nuts = summ["nuts"]
        rec = {"what": "sbc", "model": model, "kmax": kmax, "sims": args.sims,
               "replicates": summ["replicates"], "calibrated": bool(nuts["calibrated"]),
               "verdict": nuts["verdict"],
               "families": {f: {"ecdf_p": v["ecdf_p_combined"], "pot_c_p": v["pot_c_p_combined"]}
                            for f, v in nuts["families"].items()},
               "seed": seed, "gate_passed": summ["gate"]["passed"],
               "gate_failed": summ["gate"]["failed"],
               "wall_s": round(wall, 1), "cpu_s": round(cpu_seconds() - c0, 1),
               "items": cfg.n_items, "workers": cfg.n_workers, "tasks": cfg.tasks_per_worker}
        print(f"sbc {model}: {rec['verdict']} ({rec['replicates']} replicates, "
              f"{wall / 60:.1f} min)", flush=True)
        out.append(rec)
    return out


def bench_audit(args) -> list:
    """``crowdrank audit --reference gibbs`` on the embedded default, as typed (a fresh
    process; numba's caches as this checkout has them): wall time and the references'
    gates (goal: trusted in ≤ 30 s)."""
    import subprocess
    import tempfile

    if args.cold:
        # every numba cache of the checkout (index and data files in __pycache__): the
        # kernels compile again, as on a fresh clone's first run
        for f in [*ROOT.rglob("__pycache__/*.nbi"), *ROOT.rglob("__pycache__/*.nbc")]:
            if ".venv" not in f.parts:
                f.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, "-m", "crowdrank", "audit", "--reference",
                             "gibbs", "--quiet", "--out", tmp], cwd=ROOT,
                            check=False).returncode
        wall = time.perf_counter() - t0
        m = json.loads((Path(tmp) / "metrics.json").read_text()) if rc == 0 else {}
    gates = {k: v["gate"] for k, v in m.get("models", {}).items()}
    trusted = bool(gates) and all(g["trusted"] for g in gates.values())
    print(f"audit --reference gibbs: rc {rc}, {wall:.1f} s, trusted {trusted}", flush=True)
    return [{"what": "audit", "command": "crowdrank audit --reference gibbs", "rc": rc,
             "wall_s": round(wall, 1), "trusted": trusted, "gates": gates,
             "numba_cache": "cold (deleted first)" if args.cold else "warm (as left here)",
             "seconds_total": m.get("seconds_total")}]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("medium", "default", "real", "paper", "sbc", "audit"))
    p.add_argument("--sims", type=int, default=200)
    p.add_argument("--cold", action="store_true",
                   help="audit: delete the checkout's numba caches first")
    p.add_argument("--setting", default="amateur",
                   choices=("expert", "amateur", "spammer", "malicious"))
    p.add_argument("--settings", default=None, metavar="S1,S2",
                   help="medium: several worker types, one record each")
    p.add_argument("--nuts-draws", type=int, default=None,
                   help="NUTS draws per chain (default: as the trusted references of "
                        "reference_medium.json were run, NUTS_DRAWS; 1000 on the default "
                        "data)")
    p.add_argument("--gibbs-draws", type=int, default=1000)
    p.add_argument("--nuts-backend", default="numpyro", choices=("numpyro", "pymc"),
                   help="the PPL of the NUTS reference (default: NumPyro)")
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--walk-steps", type=int, default=10)
    p.add_argument("--lambda-steps", type=int, default=1)
    p.add_argument("--jumps", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    head = stamp(argv, script=__file__)
    recs = {"medium": bench_medium, "default": bench_default, "real": bench_real,
            "paper": bench_paper,
            "sbc": bench_sbc, "audit": bench_audit}[
        args.what](args)
    out = Path(args.out)
    old = json.loads(out.read_text()) if out.exists() else []
    old += [{**head, **r} for r in recs]
    out.write_text(json.dumps(old, indent=1, default=float) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
