"""Where the Gibbs route's slow worker entries come from, on saved draws of the paper-scale
proxy (docs/design.md, Sect. 5.3a).

    python bench/bench_reference.py paper --items 100 --workers 50 --tasks 900 --tune 200 \\
        --draws 200 --eta-update gibbs --gibbs-sweeps 2 --gibbs-walk 20 --save out/proxy.nc
    python bench/diagnose_paper_gibbs.py out/proxy.nc [--entries 3] [--iters 2000]

For the slowest ``η`` entries (largest R-hat):

(a) per chain: the share of draws in the prior spike (``η_t < SPIKE``) and the number of
    spike ↔ data-mode switches;
(b) at a *fixed* ``λ`` (posterior draws: one per chain), only the moves of ``η_w | λ``
    (jump, entry jump, sweeps, walk: the route's setting), ``--iters`` iterations on the
    worker's own stages: the entry's ESS and its spike share ``P(spike | λ)``;
(c) the entry's trace regressed on functions of ``λ``: the global scale ``sd(λ_c)``, the
    worker's own items' scale, the first principal components of ``λ``'s draws;
(d) ``P(spike | λ)`` (from (b)'s conditional chains) along the direction found in (c).

Writes a JSON (``--out``) with machine info, CPU seconds and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

#: An entry below this is "in its prior spike" (the data modes sit at 0.05 or more).
SPIKE = 1e-3


def worker_tables(tables, w: int):
    """The stages of worker ``w`` only, re-indexed as worker 0 of 1."""
    from crowdrank.inference.nuts.gibbs import StageTables

    ms, its, wks = [], [], []
    for m, it, wk in zip(tables.m, tables.items, tables.worker):
        sel = wk == w
        if sel.any():
            ms.append(m)
            its.append(it[sel])
            wks.append(np.zeros(int(sel.sum()), np.int32))
    return StageTables(tuple(ms), tuple(its), tuple(wks), 1, tables.K)


def conditional_runner(tables, alpha, beta, iters: int, sweeps: int, walk: int, fit=None):
    """A compiled ``(key, log_g0, λ) → log η`` trace of ``iters`` iterations of the route's
    moves of ``η | λ`` at a fixed ``λ`` (jump, entry jump, sweeps, walk; with ``fit`` first
    the mode jump, whose acceptance rate is kept in ``.accept``)."""
    import jax
    import jax.numpy as jnp

    from crowdrank.inference.nuts import gibbs as gb

    @jax.jit
    def run(key, log_g0, lam):
        def step(lg, k):
            k0, k1, k2, k3, k4 = jax.random.split(k, 5)
            ok = jnp.zeros(lg.shape[:1], bool)
            if fit is not None:
                lg, ok = gb.mode_jump(k0, lg, lam, tables, alpha, fit)
            lg = gb.jump(k1, lg, lam, tables, alpha, beta)
            lg = gb.entry_jump(k2, lg, lam, tables, alpha, beta)
            lg = gb.sweeps(k3, lg, lam, tables, alpha, sweeps)
            if walk:
                lg = gb.walk(k4, lg, lam, tables, alpha, walk)
            return lg, (gb._log_eta(lg)[0], ok[0])

        return jax.lax.scan(step, log_g0, jax.random.split(key, iters))[1]

    def go(*a):
        tr, ok = run(*a)
        go.accept = float(np.mean(np.asarray(ok)))
        return np.asarray(tr)
    return go


def ess1(x):
    import arviz_stats as azs
    return float(azs.ess(np.asarray(x, float)[None, :], method="bulk"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("draws", help="NetCDF written by bench_reference.py paper --save")
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--workers", type=int, default=50)
    ap.add_argument("--tasks", type=int, default=900)
    ap.add_argument("--entries", type=int, default=3, help="how many slow entries")
    ap.add_argument("--iters", type=int, default=2000, help="(b): conditional iterations")
    ap.add_argument("--sweeps", type=int, default=2)
    ap.add_argument("--walk", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode-jump", action="store_true",
                    help="(b), (d): add the mode jump (fitted at the online scores)")
    ap.add_argument("--out", default="bench/results/diagnose_paper_gibbs.json")
    args = ap.parse_args(argv)

    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    import arviz as az
    import arviz_stats as azs
    import jax
    import jax.numpy as jnp

    from crowdrank.inference.nuts import gibbs as gb
    from crowdrank.inference.nuts.experimental import gibbs_jump_proposal, gibbs_mode_center
    from crowdrank.inference.online import fit_online
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    c0, t0, load0 = time.process_time(), time.perf_counter(), os.getloadavg()
    d = simulate("couple", setting="amateur", seed=0, n_items=args.items,
                 n_workers=args.workers, tasks_per_worker=args.tasks, kmax=4).rankings
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6)
    inputs = model_inputs("couple", d, pr)
    on = fit_online(d, "couple", pr, progress=False)
    beta = gibbs_jump_proposal(inputs, on, d)
    alpha = np.asarray(inputs.alpha, float)
    tables = gb.stage_tables(inputs)

    idata = az.from_netcdf(args.draws)
    post = idata["posterior"].to_dataset()
    eta = np.asarray(post["eta"].values, float)            # (C, D, W, K)
    lam = np.asarray(post["lambda"].values, float)         # (C, D, L)
    C, D = lam.shape[:2]
    r = np.asarray(azs.rhat(post["eta"]), float)
    order = np.argsort(-np.nan_to_num(r.ravel(), nan=9.0))[:args.entries]
    lam_c = lam - lam.mean(axis=-1, keepdims=True)
    flat = lam_c.reshape(C * D, -1)
    scale = flat.std(axis=1)
    _, _, vt = np.linalg.svd(flat - flat.mean(axis=0), full_matrices=False)
    pcs = (flat - flat.mean(axis=0)) @ vt[:5].T
    rec = {"what": "diagnose-paper-gibbs", "draws": args.draws, "chains": C, "per_chain": D,
           "L": d.n_items, "W": d.n_workers, "N": d.n_rankings,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": "python bench/diagnose_paper_gibbs.py " + " ".join(sys.argv[1:]),
           "machine": platform.machine(), "cpu_count": os.cpu_count(),
           "loadavg_before": load0, "entries": []}
    key = jax.random.PRNGKey(args.seed)
    for flat_ix in order:
        w, t = map(int, np.unravel_index(flat_ix, r.shape))
        x = eta[:, :, w, t]
        spike = x < SPIKE
        e = {"param": f"eta[{w},{t}]", "rhat": round(float(r[w, t]), 3),
             "ess_bulk": round(float(azs.ess(x, method="bulk")), 1),
             "alpha": round(float(alpha[w, t]), 4), "beta": round(float(beta[w, t]), 3),
             "chain_means": np.round(x.mean(axis=1), 4).tolist(),
             "(a) spike_share_per_chain": np.round(spike.mean(axis=1), 3).tolist(),
             "(a) switches_per_chain": np.abs(np.diff(spike.astype(int), axis=1))
             .sum(axis=1).tolist(),
             "(a) data_mode_mean_per_chain": [round(float(x[c][~spike[c]].mean()), 4)
                                              if (~spike[c]).any() else None
                                              for c in range(C)]}
        # (c) regressions of the entry (and its spike indicator) on functions of λ
        y = x.reshape(-1)
        own = np.unique(np.concatenate([it[wk == w].ravel() for it, wk in
                                        zip(tables.items, tables.worker)]))
        own_scale = flat[:, own].std(axis=1)
        feats = {"sd(lambda_c)": scale, "sd(lambda_c of own items)": own_scale,
                 **{f"pc{i + 1}": pcs[:, i] for i in range(5)}}
        reg = {}
        for name, f in feats.items():
            reg[name] = {"corr": round(float(np.corrcoef(f, y)[0, 1]), 3),
                         "corr_spike": round(float(np.corrcoef(f, y < SPIKE)[0, 1]), 3)
                         if 0 < (y < SPIKE).mean() < 1 else None,
                         "ess_bulk": round(float(azs.ess(f.reshape(C, D), method="bulk")), 1),
                         "rhat": round(float(azs.rhat(f.reshape(C, D))), 3)}
        e["(c) regressions"] = reg
        # (b) conditional chains at one fixed λ per chain (its last draw)
        wt = worker_tables(tables, w)
        a_w, b_w = jnp.asarray(alpha[w:w + 1]), jnp.asarray(beta[w:w + 1])
        fit = None
        if args.mode_jump:
            y0 = np.log(np.full((1, alpha.shape[1]), alpha[w].sum() / alpha.shape[1]))
            fit = gb.mode_fit(jnp.asarray(gibbs_mode_center(on, d), jnp.float32), wt, a_w,
                              jnp.asarray(y0, jnp.float32))
        chain = conditional_runner(wt, a_w, b_w, args.iters, args.sweeps, args.walk, fit)
        cond = []
        for c in range(C):
            key, k = jax.random.split(key)
            lam_fixed = jnp.asarray(lam[c, -1], jnp.float32)
            lg0 = jnp.asarray(np.log(eta[c, -1, w:w + 1]), jnp.float32)
            tr = chain(k, lg0, lam_fixed)
            xe = np.exp(tr[:, t])
            cond.append({"chain_of_lambda": c, "sd(lambda_c)": round(float(lam_c[c, -1].std()), 4),
                         "ess_bulk": round(ess1(xe), 1), "mean": round(float(xe.mean()), 4),
                         "P(spike)": round(float((xe < SPIKE).mean()), 3),
                         "switches": int(np.abs(np.diff((xe < SPIKE).astype(int))).sum()),
                         "mode_jump_accept": round(chain.accept, 3) if fit is not None
                         else None})
        e["(b) fixed_lambda"] = cond
        # (d) P(spike | λ) along the global scale: λ_c of the first chain's last draw scaled
        base = lam_c[0, -1]
        mean0 = lam[0, -1].mean()
        along = []
        for f in (0.96, 0.98, 1.0, 1.02, 1.04):
            key, k = jax.random.split(key)
            lam_f = jnp.asarray(mean0 + f * base, jnp.float32)
            lg0 = jnp.asarray(np.log(eta[0, -1, w:w + 1]), jnp.float32)
            tr = chain(k, lg0, lam_f)
            xe = np.exp(tr[:, t])
            along.append({"scale_factor": f, "sd(lambda_c)": round(float(f * base.std()), 4),
                          "mean": round(float(xe.mean()), 4),
                          "P(spike)": round(float((xe < SPIKE).mean()), 3),
                          "ess_bulk": round(ess1(xe), 1)})
        e["(d) along_scale"] = along
        rec["entries"].append(e)
        print(json.dumps(e), flush=True)
    rec["posterior_sd(lambda_c)"] = {"mean": round(float(scale.mean()), 4),
                                     "sd": round(float(scale.std()), 5),
                                     "chain_means": np.round(scale.reshape(C, D).mean(axis=1),
                                                             4).tolist()}
    rec["wall_s"] = round(time.perf_counter() - t0, 1)
    rec["cpu_s"] = round(time.process_time() - c0, 1)
    rec["loadavg_after"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rec, indent=1))
    print(json.dumps({k: v for k, v in rec.items() if k != "entries"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
