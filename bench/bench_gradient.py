"""Time the jitted potential+gradient of COUPLE (as NumPyro's sampler calls it).

Compares the autodiff kernel (``model(..., fast=False)``) with the hand-written one
(``fast=True``, :func:`crowdrank.models.numpyro_models.couple_columns`) at medium (L=100, W=50, N=5,000), large (L=300, W=100, N=45,000) and paper scale (L=1000, W=500,
N=450,000), float32 and float64, and checks that both give the same value and gradient.

Usage: python bench/bench_gradient.py [--scales medium,paper] [--reps 10] [--out FILE]
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

from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate, simulate_paper_scale


def build(scale):
    if scale == "medium":
        sim = simulate("couple", n_items=100, n_workers=50, tasks_per_worker=100, kmax=4,
                       setting="amateur", seed=0)
    elif scale == "large":      # a tenth of the paper's rankings: fits a shared 2-core box
        sim = simulate("couple", n_items=300, n_workers=100, tasks_per_worker=450, kmax=4,
                       setting="amateur", seed=0)
    else:
        sim = simulate_paper_scale("couple", setting="amateur", seed=0)
    data = sim.rankings
    pr = Priors.geometric(data.workers, data.K, a0=10, a=6)
    return model_inputs("couple", data, pr)


def timing(inputs, fast, precision, reps, seed=0):
    """The sampler's unit cost: the jitted potential+gradient on the unconstrained scale
    (64-bit parameters, the likelihood's elementwise work in ``precision``, as
    :func:`crowdrank.inference.nuts.fit_nuts` runs it), at a seeded random point."""
    import jax
    from numpyro.infer.util import potential_energy

    from crowdrank.inference.nuts import jittered_starts
    from crowdrank.models import numpyro_models as npm

    kw = {"fast": fast, "loglik_dtype": "float32" if precision == "float32" else None,
          "pointwise": False}
    with jax.enable_x64(True):
        rng = np.random.default_rng(seed)
        z = jittered_starts(inputs, {"lambda": rng.normal(0, 1, inputs.n_items)}, 1, seed,
                            0.5)
        z = {k: jax.numpy.asarray(v) for k, v in z.items()}
        vg = jax.jit(jax.value_and_grad(
            lambda p: potential_energy(npm.model, (inputs,), kw, p)))
        t = time.perf_counter()
        out = jax.block_until_ready(vg(z))
        compile_s = time.perf_counter() - t
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            jax.block_until_ready(vg(z))
            ts.append(time.perf_counter() - t)
        v, g = out
        return ({"compile_s": round(compile_s, 3),
                 "gradient_ms_median": round(1e3 * float(np.median(ts)), 3),
                 "gradient_ms_min": round(1e3 * float(np.min(ts)), 3)},
                float(v), {k: np.asarray(x, float) for k, x in g.items()})


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="medium,paper")
    ap.add_argument("--label", default="", help="free text stored with each record")
    ap.add_argument("--precisions", default="float32,float64")
    ap.add_argument("--kernels", default="autodiff,fast")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import jax
    recs = []
    for scale in a.scales.split(","):
        inp = build(scale)
        for prec in a.precisions.split(","):
            res = {}
            for kern in a.kernels.split(","):
                t, v, g = timing(inp, kern == "fast", prec, a.reps)
                res[kern] = (v, g)
                rec = {"scale": scale, "L": inp.n_items, "W": inp.n_workers, "N": inp.n_obs,
                       "precision": prec, "kernel": kern, **t, "measured": True,
                       "cpus": os.cpu_count(),
                       "affinity": len(os.sched_getaffinity(0)),
                       "load_avg_1m": round(os.getloadavg()[0], 2),
                       "jax": jax.__version__, "label": a.label,
                       "date": time.strftime("%Y-%m-%d")}
                if "autodiff" in res and kern != "autodiff":
                    v0, g0 = res["autodiff"]
                    rec["value_rel_diff_vs_autodiff"] = abs(v - v0) / abs(v0)
                    rec["grad_max_rel_diff_vs_autodiff"] = max(
                        float(np.max(np.abs(g[k] - g0[k])) / np.max(np.abs(g0[k])))
                        for k in g)
                print(json.dumps(rec), flush=True)
                recs.append(rec)
    if a.out:
        Path(a.out).write_text(json.dumps(recs, indent=1))


if __name__ == "__main__":
    main()
