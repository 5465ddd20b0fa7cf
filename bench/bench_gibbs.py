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
    python bench/bench_gibbs.py sweep45m [--sizes 450000,4500000,45000000]

* ``sbc``: simulation-based calibration of the Gibbs sampler, CrowdBT and COUPLE on pairs
  (where Eq. 3 is normalised), 200 replicates each (10 items, 4 workers, 25 tasks).
* ``audit``: ``crowdrank audit --reference gibbs`` as typed (goal: trusted in ≤ 30 s).
* ``sweep45m [--sizes 450000,4500000,45000000 --sweeps 5]``: one chain's sweeps on one
  core at each size of the paper's protocol (built in blocks of 4.5 M rankings), the
  layout's bytes and the peak memory, with the sweep of the paper-scale trusted run
  (its step size, walk steps and jumps), and what a trusted run would take there — a
  projection from that run's sweeps per chain, chains as Dask tasks one per machine.
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


#: The paper-scale protocol's blocks (``bench_scale.py``'s: 4.5 M rankings, λ and η drawn
#: once, each block seeded from the run's seed), so that the simulator fits in memory.
SWEEP_BLOCK = 4_500_000
SWEEP_WORKERS = 500


def _mem_available() -> int:
    """Bytes the kernel says a new allocation can have (``MemAvailable``)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _rss() -> int:
    """This process's resident bytes now (``VmRSS``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def paper_stages(n: int, seed: int):
    """The stages of ``n`` rankings of the paper's protocol (L=1000, W=500, k ≤ 4,
    amateur workers, the prior a0=10, a=6), simulated in blocks of :data:`SWEEP_BLOCK`
    rankings with λ and η drawn once; each block's stages (sorted by worker) are copied
    into one table sorted by worker, blocks in order (the layout ``stages`` makes of the
    whole file). Returns the stages, the prior (``alpha``, ``mu0``, ``sigma0``: the same
    for every block) and the build's seconds."""
    from crowdrank.inference.gibbs.layout import Stages, stages
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import PAPER_SCALE, simulate

    t0 = time.perf_counter()
    L, W = PAPER_SCALE["n_items"], SWEEP_WORKERS
    first = simulate("couple", setting="amateur", seed=seed, n_items=L, n_workers=W,
                     tasks_per_worker=1, kmax=4)
    lam, eta = first.lam, first.eta
    blocks, prior, done, b = [], None, 0, 0
    while done < n:
        t = min(SWEEP_BLOCK, n - done) // W
        d = simulate("couple", setting="amateur", seed=[seed, b + 1], n_items=L,
                     n_workers=W, tasks_per_worker=t, kmax=4, lam=lam, eta=eta).rankings
        inputs = model_inputs("couple", d, Priors.geometric(d.workers, d.K, a0=10, a=6))
        st = stages(inputs)
        blocks.append((st.cand, st.m, st.worker, st.w_start, st.origin + done))
        if prior is None:
            prior = {"alpha": np.ascontiguousarray(inputs.alpha, float),
                     "mu0": float(inputs.mu0), "sigma0": float(inputs.sigma0)}
        K = st.K
        done += d.n_rankings
        b += 1
        del d, inputs, st
    counts = np.stack([np.diff(blk[3]) for blk in blocks])          # (blocks, W)
    w_start = np.concatenate([[0], np.cumsum(counts.sum(axis=0))]).astype(np.int64)
    S = int(w_start[-1])
    cand = np.empty((S, K), np.int32)
    m = np.empty(S, np.int32)
    worker = np.empty(S, np.int32)
    origin = np.empty(S, np.int64)
    at = w_start[:-1].copy()
    for i in range(len(blocks)):
        c, mm, ww, ws, oo = blocks[i]
        for w in range(W):
            a, e, k = ws[w], ws[w + 1], at[w]
            cand[k:k + e - a], m[k:k + e - a] = c[a:e], mm[a:e]
            worker[k:k + e - a], origin[k:k + e - a] = ww[a:e], oo[a:e]
        at += counts[i]
        blocks[i] = None                   # the block's copy goes as the table fills
    st = Stages(cand, m, worker, w_start, origin, L, W, K)
    return st, prior, time.perf_counter() - t0


def _paper_run() -> dict:
    """The latest paper-scale record of ``gibbs.json`` (its sweeps and adapted step size)."""
    recs = [r for r in json.loads(OUT.read_text()) if r.get("what") == "paper"]
    return recs[-1] if recs else {}


def _timed(f, *a, keep: list | None = None) -> dict:
    """``f(*a)``'s wall and CPU seconds (this process: the chain's one thread); its value
    appended to ``keep``."""
    t0, c0 = time.perf_counter(), time.process_time()
    value = f(*a)
    if keep is not None:
        keep.append(value)
    return {"wall_s": round(time.perf_counter() - t0, 3),
            "cpu_s": round(time.process_time() - c0, 3)}


def _chain_s(sweeps: int, init_s: float, n_approach: int, s_approach: float,
             s_sweep: float) -> float:
    """A chain's seconds: its start, its approach sweeps, then the other sweeps."""
    return init_s + n_approach * s_approach + (sweeps - n_approach) * s_sweep


def _compile_kernels(args) -> None:
    """Every kernel a sweep calls, compiled (or loaded from numba's cache) on tiny data, so
    that no timed call below includes it."""
    from crowdrank.inference.gibbs import sampler as sp
    from crowdrank.inference.gibbs.layout import stages
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    d = simulate("couple", n_items=10, n_workers=3, tasks_per_worker=20, kmax=4, seed=1)
    inputs = model_inputs("couple", d.rankings,
                          Priors.geometric(d.rankings.workers, 4, a0=10, a=6))
    st = stages(inputs)
    rng = np.random.default_rng(0)
    state = sp.init(st, inputs.alpha, inputs.mu0, inputs.sigma0, rng)
    for approach in (True, False):
        sp.step(st, np.ascontiguousarray(inputs.alpha, float), state, rng, inputs.mu0,
                inputs.sigma0, args.lambda_steps, args.walk_steps, args.jumps, approach)


def bench_sweep45m(args) -> list:
    """Sweeps of one chain on one core (BLAS on one thread, as a chain process runs) at
    ``--sizes`` rankings of the paper's protocol: the layout's bytes per stage, the peak
    memory, ``init`` (the scores' mode by Newton, ≤ 20 passes of the Hessian), the seconds
    of each part of a sweep and of ``--sweeps`` whole sweeps, with the step size the last
    paper-scale trusted run adapted (the leapfrog count a real sweep makes) and that run's
    walk steps, jumps and score steps per sweep. A size whose
    estimated peak memory exceeds ``MemAvailable`` (less a margin) is not built: its
    record says so. Then the projection of a trusted run at that size (the paper-scale
    run's sweeps, as a projection: chains as Dask tasks, one chain per machine)."""
    import math
    import resource

    from threadpoolctl import threadpool_limits

    from crowdrank.inference.gibbs import kernels as kn
    from crowdrank.inference.gibbs import sampler as sp

    paper = _paper_run()
    pg = paper.get("gibbs", {})
    eps_paper = (float(np.mean([c["eps"] for c in pg["chains_detail"]])) if pg
                 else sp.EPS_START)
    warm, kept = int(pg.get("warmup", 300)), int(pg.get("draws", 1600))
    # the sweep of that run: its walk steps, jumps and score steps
    args.walk_steps = int(pg.get("walk_steps", args.walk_steps))
    args.jumps = int(pg.get("jumps", args.jumps))
    args.lambda_steps = int(pg.get("lambda_steps", args.lambda_steps))
    out, bps = [], None
    _compile_kernels(args)
    for n in (int(x) for x in args.sizes.split(",")):
        rec = {"what": "sweep45m", "model": "couple", "setting": "amateur", "N": n,
               "L": 1000, "W": SWEEP_WORKERS, "kmax": 4, "prior": "geometric a0=10, a=6",
               "mem_available_bytes": _mem_available()}
        if bps is not None:
            # the table (blocks and the merged copy at once), a chain's offsets and slacks,
            # and what the smaller size needed beside its stages (the simulator's block)
            est = bps["per_ranking"] * n * (2 * bps["layout"] + bps["state"]) + bps["other"]
            rec["estimated_peak_bytes"] = int(est)
            if est > 0.8 * rec["mem_available_bytes"]:
                rec["fits"] = False
                rec["note"] = (f"not built: an estimated peak of {est / 2 ** 30:.1f} GiB "
                               f"({bps['per_ranking']:.2f} stages per ranking x "
                               f"{bps['layout']:.0f} bytes of "
                               f"layout, twice while blocks merge, + {bps['state']:.0f} "
                               f"bytes of chain state) exceeds 80 % of the "
                               f"{rec['mem_available_bytes'] / 2 ** 30:.1f} GiB available")
                print(f"sweep {n:,}: {rec['note']}", flush=True)
                out.append(rec)
                continue
        load0 = list(np.round(os.getloadavg(), 2))
        rss0 = _rss()
        st, prior, build_s = paper_stages(n, args.seed)
        S = st.n_stages
        layout_b = sum(a.nbytes for a in (st.cand, st.m, st.worker, st.w_start, st.origin))
        _ = st.stage_counts
        alpha, mu0, sigma0 = prior["alpha"], prior["mu0"], prior["sigma0"]
        print(f"sweep {n:,}: {S:,} stages, {layout_b / S:.1f} bytes each, built in "
              f"{build_s:.0f} s", flush=True)
        rng = np.random.default_rng(args.seed)
        kn.seed(args.seed)
        with threadpool_limits(1):
            made: list = []
            init_t = _timed(sp.init, st, alpha, mu0, sigma0, rng, keep=made)
            state = made.pop()
            state_b = state.z.nbytes + state.xi.nbytes
            rows = sp.rows_of(state.log_g, st.n_workers, st.K)
            elam = np.exp(state.lam - state.lam.max())
            lg = state.log_g.copy()
            parts = {
                "gradient_pass": _timed(kn.mixture_gradient, st.cand, st.m, st.worker,
                                        state.lam, rows, True),
                "hessian_pass": _timed(kn.mixture_hessian, st.cand, st.m, st.worker,
                                       state.lam, rows, st.n_items),
                f"walk_{args.walk_steps}_steps": _timed(
                    kn.walk, st.cand, st.m, st.w_start, elam, st.stage_counts, state.log_g,
                    alpha, state.walk_chol, args.walk_steps, state.walk_accepted),
                "entry_jump": _timed(kn.entry_jump, st.cand, st.m, st.w_start, elam,
                                     st.stage_counts, state.log_g, alpha, state.jump_mean,
                                     state.jump_sd, state.jump_accepted),
                "offsets": _timed(kn.offsets, st.cand, st.m, st.worker, elam, state.log_g,
                                  state.z),
                "slacks": _timed(kn.slacks, st.m, st.worker, state.log_g, state.xi),
                "urn": _timed(kn.urn, st.cand, st.m, st.w_start, elam, state.xi, alpha,
                              state.z, state.log_g)}
            # the parts moved log g and the offsets: back to the state init left
            state.log_g[:] = lg
            kn.offsets(st.cand, st.m, st.worker, elam, state.log_g, state.z)
            approach = [_timed(sp.step, st, alpha, state, rng, mu0, sigma0,
                               args.lambda_steps, args.walk_steps, args.jumps, True)
                        for _ in range(args.approach_sweeps)]
            state.eps = eps_paper
            sweeps = [_timed(sp.step, st, alpha, state, rng, mu0, sigma0,
                             args.lambda_steps, args.walk_steps, args.jumps)
                      for _ in range(args.sweeps)]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

        def med(runs, key):
            return float(np.median([r[key] for r in runs]))

        # the projection from CPU seconds: what a core of its own gives a chain (the wall
        # seconds here are as long as the shared machine's load makes them; both recorded)
        s_sweep, s_appr = med(sweeps, "cpu_s"), med(approach or sweeps, "cpu_s")
        init_s = init_t["cpu_s"]
        n_appr = sp.approach_sweeps(warm)

        leapfrogs = math.ceil(sp.TRAJECTORY / eps_paper)
        bps = {"layout": layout_b / S, "state": state_b / S, "per_ranking": S / n,
               "other": max(peak - rss0 - layout_b * 2 - state_b, 0)}
        proj = {"basis": (f"the paper-scale trusted run (gibbs.json, what=paper, "
                          f"{paper.get('date', '?')}, {paper.get('commit', '?')}): 2 chains x "
                          f"({warm} warm-up + {kept} kept) sweeps, trusted there"),
                "assumes": ("the same sweeps per chain reach the gate at this size (ESS per "
                            "sweep as at 450,000 rankings: not measured here); a chain's "
                            "seconds = init + its approach sweeps + its other sweeps, each "
                            "at the CPU seconds measured here (a core of its own); one "
                            "chain per machine (a Dask task each), each holding the whole "
                            "layout; a chain is sequential, so more machines shorten a run "
                            "only by splitting the kept draws over more chains, each with "
                            "its own warm-up"),
                "chain_h": round(_chain_s(warm + kept, init_s, n_appr, s_appr, s_sweep)
                                 / 3600, 2),
                "wall_h": {}}
        for N in (2, 4, 8, 16):
            per = math.ceil(2 * kept / N)
            proj["wall_h"][f"{N} machines, {N} chains x ({warm} + {per}) sweeps"] = round(
                _chain_s(warm + per, init_s, n_appr, s_appr, s_sweep) / 3600, 2)
        rec.update({
            "fits": True, "stages": S, "layout_bytes": int(layout_b),
            "layout_bytes_per_stage": round(layout_b / S, 2),
            "chain_state_bytes": int(state_b), "state_bytes_per_stage": round(state_b / S, 2),
            "rss_before_bytes": int(rss0), "peak_rss_bytes": int(peak),
            "build_s": round(build_s, 1), "init": init_t, "parts": parts,
            "eps": round(eps_paper, 4), "leapfrog_steps_mean": leapfrogs,
            "approach_sweeps": approach, "sweeps": sweeps,
            "sweep_ms": round(1000 * s_sweep, 1),
            "sweep_wall_ms": round(1000 * med(sweeps, "wall_s"), 1),
            "sweep_ns_per_stage": round(1e9 * s_sweep / S, 1),
            "walk_steps": args.walk_steps, "jumps": args.jumps,
            "lambda_steps": args.lambda_steps, "cores": 1,
            "projection": proj,
            "load_before": load0, "load_after": list(np.round(os.getloadavg(), 2))})
        print(f"sweep {n:,}: {1000 * s_sweep:.0f} CPU ms per sweep (median of "
              f"{len(sweeps)}; wall {rec['sweep_wall_ms']:.0f} ms), init {init_s:.1f} CPU s, "
              f"peak RSS {peak / 2 ** 30:.2f} GiB; projected chain {proj['chain_h']:.2f} h",
              flush=True)
        out.append(rec)
        del st, state
    return out


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
    p.add_argument("what", choices=("medium", "default", "real", "paper", "sbc", "audit",
                                    "sweep45m"))
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
    p.add_argument("--sizes", default="450000,4500000,45000000", metavar="N1,N2",
                   help="sweep45m: the rankings of each measured size, smallest first")
    p.add_argument("--sweeps", type=int, default=5,
                   help="sweep45m: whole sweeps timed per size (after init)")
    p.add_argument("--approach-sweeps", type=int, default=1,
                   help="sweep45m: warm-up approach sweeps timed per size")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    head = stamp(argv, script=__file__)
    recs = {"medium": bench_medium, "default": bench_default, "real": bench_real,
            "paper": bench_paper,
            "sbc": bench_sbc, "audit": bench_audit, "sweep45m": bench_sweep45m}[
        args.what](args)
    out = Path(args.out)
    old = json.loads(out.read_text()) if out.exists() else []
    old += [{**head, **r} for r in recs]
    out.write_text(json.dumps(old, indent=1, default=float) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
