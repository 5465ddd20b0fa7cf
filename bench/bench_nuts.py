"""Benchmark of the NUTS route: log-density+gradient time and NUTS ESS per second.

Prints one JSON object per line and writes ``bench/results/nuts.json``.

* Medium scale (default): COUPLE, L=100, W=50, 5,000 rankings (k <= 4, amateur workers,
  geometric prior a0=10, a=6). For each back-end: the time of one log-density+gradient
  evaluation, and a short NUTS run (``--chains/--tune/--draws``) with its minimum bulk ESS
  per second of sampling and of wall time.
* ``--paper-scale`` (NumPyro only): L=1000, W=500, T=900, k <= 4 (450,000 rankings). Only
  the gradient time is *measured*; the time of a 4-chain reference run is an
  **extrapolation** from it (gradients per draw taken from the medium-scale run or the
  prototype's 31, chains sharing the cores), labelled as such.

Usage::

    python bench/bench_nuts.py [--backends numpyro,pymc] [--paper-scale] [--skip-nuts]
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

import numpy as np

from crowdrank.inference import nuts
from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate, simulate_paper_scale

RESULTS = ROOT / "bench" / "results" / "nuts.json"
nuts.configure_host_devices()


def emit(rec: dict, out: list) -> None:
    out.append(rec)
    print(json.dumps(rec), flush=True)


def numpyro_gradient(inputs, precision: str, reps: int) -> dict:
    import jax

    with jax.enable_x64(precision == "float64"):
        t = nuts.gradient_timing(inputs, reps=reps)
    return {"compile_s": round(t["compile"], 3), "gradient_ms": round(t["gradient_ms"], 4)}


def pymc_gradient(inputs, reps: int) -> dict:
    import pytensor
    import pytensor.tensor as pt

    from crowdrank.models import pymc_models as pmm

    model = pmm.build_model(inputs)
    logp = model.logp()
    grads = pt.grad(logp, model.value_vars)
    t = time.perf_counter()
    fn = pytensor.function(model.value_vars, [logp, *grads])
    ip = model.initial_point()
    args = [ip[v.name] for v in model.value_vars]
    fn(*args)
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    return {"compile_s": round(compile_s, 3),
            "gradient_ms": round(1e3 * (time.perf_counter() - t) / reps, 4)}


def nuts_run(data, priors, backend, chains, tune, draws, precision, init=None) -> dict:
    import arviz_stats as azs

    r = nuts.fit_nuts(data, "couple", priors, backend=backend, chains=chains, tune=tune,
                      draws=draws, seed=0, progress=False, precision=precision,
                      pointwise=False, init=init, profile=True)
    post = r.idata["posterior"].to_dataset()
    ess = min(float(np.nanmin(np.asarray(azs.ess(post[v], method="bulk"))))
              for v in post.data_vars)
    ss = r.idata["sample_stats"]
    steps = float(np.mean(ss["n_steps"].values)) if "n_steps" in ss else float("nan")
    t = r.timings
    sampling = t.get("sampling", float("nan"))
    return {"chains": chains, "tune": tune, "draws": draws, "precision": precision,
            "timings_s": {k: (round(v, 3) if isinstance(v, float) else v)
                          for k, v in t.items()},
            "ess_bulk_min": round(ess, 1),
            "ess_bulk_min_per_s_sampling": round(ess / sampling, 3),
            "ess_bulk_min_per_s_total": round(ess / t["total"], 3),
            "leapfrog_per_draw_mean": round(steps, 1),
            "gate": r.gate.to_dict()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="numpyro,pymc")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--skip-nuts", action="store_true", help="gradient timings only")
    ap.add_argument("--paper-scale", action="store_true",
                    help="also time the NumPyro gradient at the paper's scale (no NUTS run)")
    ap.add_argument("--skip-medium", action="store_true", help="paper scale only")
    ap.add_argument("--paper-nuts", action="store_true",
                    help="also RUN NUTS at the paper scale (long: only on a machine that "
                         "can afford it)")
    ap.add_argument("--paper-init", choices=("default", "online"), default="online",
                    help="start of the paper-scale run: NumPyro's default, or the "
                         "OnlineGBMM posterior means")
    ap.add_argument("--paper-priors", choices=("geometric", "gold"), default="geometric",
                    help="paper-scale worker priors: the paper's geometric a0=10, a=6 (NUTS "
                         "meets a funnel there), or from 10 gold tasks per worker (Sect. 5.1)")
    ap.add_argument("--paper-tune", type=int, default=1000)
    ap.add_argument("--paper-draws", type=int, default=1000)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    out: list = []
    import jax
    env = {"cpus": os.cpu_count(), "jax_devices": jax.local_device_count(),
           "load_avg_1m": os.getloadavg()[0]}

    import jax as _jax
    env["jax_backend"] = _jax.default_backend()
    sim = simulate("couple", n_items=100, n_workers=50, tasks_per_worker=100, kmax=4,
                   setting="amateur", seed=0)
    data = sim.rankings
    pr = Priors.geometric(data.workers, data.K, a0=10, a=6)
    inputs = model_inputs("couple", data, pr)
    medium = {"scale": "medium", "L": data.n_items, "W": data.n_workers,
              "N": data.n_rankings, "model": "couple", **env}
    steps_per_draw = None
    for b in ([] if args.skip_medium else backends):
        if b == "numpyro":
            for prec in ("float32", "float64"):
                emit({**medium, "backend": b, "what": "gradient", "precision": prec,
                      **numpyro_gradient(inputs, prec, args.reps)}, out)
        else:
            emit({**medium, "backend": b, "what": "gradient", "precision": "float64",
                  **pymc_gradient(inputs, args.reps)}, out)
        if not args.skip_nuts:
            prec = "float32" if b == "numpyro" else "float64"
            rec = nuts_run(data, pr, b, args.chains, args.tune, args.draws, prec)
            if b == "numpyro":
                steps_per_draw = rec["leapfrog_per_draw_mean"]
            emit({**medium, "backend": b, "what": "nuts", **rec}, out)

    if args.paper_scale:
        t = time.perf_counter()
        if args.paper_priors == "gold":
            bsim = simulate_paper_scale("couple", setting="amateur", seed=0, gold_per_worker=10)
            big = bsim.rankings
            bpr = Priors.from_gold(bsim.gold, K=big.K, true_order=bsim.gold_true_order)
        else:
            big = simulate_paper_scale("couple", setting="amateur", seed=0).rankings
            bpr = Priors.geometric(big.workers, big.K, a0=10, a=6)
        sim_s = time.perf_counter() - t
        t = time.perf_counter()
        binp = model_inputs("couple", big, bpr)
        prep_s = time.perf_counter() - t
        paper = {"scale": "paper", "L": big.n_items, "W": big.n_workers, "N": big.n_rankings,
                 "model": "couple", "backend": "numpyro", "priors": args.paper_priors, **env,
                 "simulate_s": round(sim_s, 2), "inputs_s": round(prep_s, 2)}
        grads = {}
        for prec in ("float32", "float64"):
            g = numpyro_gradient(binp, prec, max(3, args.reps // 4))
            grads[prec] = g["gradient_ms"]
            emit({**paper, "what": "gradient", "precision": prec, **g}, out)
        # Extrapolation, not a measurement: gradients of a 4-chain run of 1000 + 1000
        # iterations with `steps` leapfrogs each, at the measured float32 gradient time.
        # One gradient barely uses a second core (measured: 61 ms on 1 core, 56 ms on 2),
        # so 4 chains on `cores` cores run ceil(4 / cores) after one another.
        steps = steps_per_draw or 31.0  # else the prototype's figure after adaptation
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        rounds = int(np.ceil(4 / max(1, cores)))
        est = 2000 * steps * grads["float32"] / 1e3 * rounds
        emit({**paper, "what": "EXTRAPOLATION (not measured)",
              "assumes": {"chains": 4, "tune": 1000, "draws": 1000,
                          "leapfrog_per_iteration": steps,
                          "leapfrog_source": "medium-scale run" if steps_per_draw
                          else "prototype (issue 3)",
                          "gradient_ms_float32": grads["float32"], "cores": cores,
                          "chains_after_one_another": rounds},
              "estimated_minutes": round(est / 60, 1),
              "note": "excludes compile and the deeper trees of the first warm-up phase "
                      "from a default start; start from the online means to cut those"}, out)
        if args.paper_nuts:
            init = None
            if args.paper_init == "online":
                t = time.perf_counter()
                try:
                    from crowdrank.inference.online import fit_online
                    op = fit_online(big, "couple", bpr, progress=False)
                    a = np.asarray(op.alpha, float)
                    init = {"lambda": np.asarray(op.mu, float),
                            "eta": a / a.sum(1, keepdims=True)}
                    emit({**paper, "what": "online init",
                          "seconds": round(time.perf_counter() - t, 2)}, out)
                except Exception as exc:  # noqa: BLE001 (the online route is optional here)
                    emit({**paper, "what": "online init FAILED, default start",
                          "error": repr(exc)}, out)
            rec = nuts_run(big, bpr, "numpyro", 4, args.paper_tune, args.paper_draws,
                           "float32", init=init)
            emit({**paper, "what": "nuts (MEASURED)", "init": args.paper_init, **rec}, out)

    p = Path(args.out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
