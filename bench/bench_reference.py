"""Benchmarks of the NUTS reference: warm starts, back-ends side by side, paper scale.

Every figure is *measured* end to end by this script (nothing extrapolated); the load
average is recorded beside each, because the 2-core machine may be shared.

* ``warmstart``: the default audit's data (COUPLE, geometric prior a0=10, a=6): leapfrog
  steps (gradients) spent in warm-up from the default start (``init_to_median``, identity
  mass matrix) against a warm start from the online posterior (one draw per chain, mass
  matrix seeded from the approximation's variances), same tune/draws/seed.
* ``medium``: L=100, W=50, 5,000 rankings (k ≤ 4, amateur workers, geometric prior), NumPyro
  and PyMC from the same warm starts: gate, minimum bulk/tail ESS and ESS per second.
* ``paper``: L=1000, W=500, T=900, k ≤ 4 (450,000 rankings), COUPLE under the paper's
  geometric prior, 4 chains, float32 likelihood work with float64 totals, warm-started from
  OnlineGBMM: where the time goes (simulation, online pass, compile, warm-up, sampling,
  gradients per draw) and whether the gate passes.

Writes ``bench/results/reference_<what>.json``::

    python bench/bench_reference.py warmstart
    python bench/bench_reference.py medium [--backends numpyro,pymc]
    python bench/bench_reference.py paper [--tune 300 --draws 400]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np

RESULTS = ROOT / "bench" / "results"


def env() -> dict:
    return {"cpu_count": os.cpu_count(), "python": platform.python_version(),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def summarise(r, wall: float) -> dict:
    import arviz_stats as azs

    post = r.idata["posterior"]
    bulk = min(float(np.nanmin(np.asarray(azs.ess(post[v], method="bulk")))) for v in post)
    tail = min(float(np.nanmin(np.asarray(azs.ess(post[v], method="tail")))) for v in post)
    ss = r.idata["sample_stats"]
    t = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.timings.items()}
    draws = int(post.sizes["chain"] * post.sizes["draw"])
    return {"trusted": bool(r.gate.trusted), "gate": r.gate.verdict(),
            "ess_bulk_min": round(bulk, 1), "ess_tail_min": round(tail, 1),
            "leapfrog_per_draw": round(float(np.asarray(ss["n_steps"]).mean()), 2),
            "divergences": int(np.asarray(ss["diverging"]).sum()), "draws_total": draws,
            "timings_s": t, "wall_s": round(wall, 2),
            "ess_bulk_per_s": round(bulk / max(t.get("sampling", wall), 1e-9), 2),
            "ess_bulk_per_wall_s": round(bulk / wall, 2), "loadavg_after": env()["loadavg"]}


def fit(data, model, priors, **kw):
    from inference.nuts import fit_nuts

    t = time.perf_counter()
    r = fit_nuts(data, model, priors, progress=False, **kw)
    return r, time.perf_counter() - t


def bench_warmstart(args) -> list:
    from inference.online import fit_online
    from models.priors import Priors
    from validation.audit import default_subject

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


def bench_medium(args) -> list:
    from inference.online import fit_online
    from models.priors import Priors
    from models.simulate import simulate

    d = simulate("couple", setting="amateur", n_items=100, n_workers=50, tasks_per_worker=100,
                 kmax=4, seed=0).rankings
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6)
    on = fit_online(d, "couple", pr, progress=False)
    out = []
    for b in args.backends.split(","):
        r, wall = fit(d, "couple", pr, backend=b, chains=4, tune=args.tune, draws=args.draws,
                      seed=0, approx=on)
        rec = {"what": "medium", "backend": b, "L": d.n_items, "W": d.n_workers,
               "N": d.n_rankings, "tune": args.tune, "draws": args.draws,
               "start": "online (same draws for both back-ends)", **summarise(r, wall),
               **env()}
        print(json.dumps(rec), flush=True)
        out.append(rec)
    return out


def bench_paper(args) -> list:
    from inference.online import fit_online
    from models.priors import Priors
    from models.simulate import simulate_paper_scale

    rec = {"what": "paper", "model": "couple", "prior": "geometric:a0=10,a=6",
           "chains": 4, "tune": args.tune, "draws": args.draws, "precision": "float32",
           **env()}
    t = time.perf_counter()
    d = simulate_paper_scale("couple", setting="amateur", seed=0).rankings
    rec["simulate_s"] = round(time.perf_counter() - t, 2)
    rec.update(L=d.n_items, W=d.n_workers, N=d.n_rankings)
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6)
    t = time.perf_counter()
    on = fit_online(d, "couple", pr, progress=False)
    rec["online_s"] = round(time.perf_counter() - t, 2)
    print(json.dumps(rec), flush=True)
    r, wall = fit(d, "couple", pr, chains=4, tune=args.tune, draws=args.draws, seed=0,
                  approx=on, precision="float32", pointwise=False)
    rec.update(summarise(r, wall))
    tm = r.timings
    rec["gradients_per_draw_warmup"] = round(tm.get("warmup_gradients", 0)
                                             / max(1, 4 * args.tune), 1)
    rec["end_to_end_s"] = round(rec["simulate_s"] + rec["online_s"] + wall, 1)
    rec["goal_s"] = 1200
    print(json.dumps(rec), flush=True)
    return [rec]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("warmstart", "medium", "paper"))
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--backends", default="numpyro,pymc")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    defaults = {"warmstart": (300, 500), "medium": (300, 500), "paper": (300, 400)}
    args.tune = args.tune if args.tune is not None else defaults[args.what][0]
    args.draws = args.draws if args.draws is not None else defaults[args.what][1]
    from inference.nuts import configure_host_devices
    configure_host_devices()
    out = {"warmstart": bench_warmstart, "medium": bench_medium,
           "paper": bench_paper}[args.what](args)
    p = Path(args.out) if args.out else RESULTS / f"reference_{args.what}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
