"""Where normalised COUPLE's gradient goes: the log density + gradient of one SBC-sized
data set (10 items, 4 workers x 25 tasks, kmax 4, geometric prior), jitted, timed with
``block_until_ready``, for

* PL and stagewise COUPLE on the same rankings (no normaliser: the floor),
* normalised COUPLE with the normaliser over gathered orderings (the old form,
  :func:`crowdrank.models.numpyro_models.couple_log_normalizer_gathered`),
* normalised COUPLE with the static-reordering, linear-space normaliser (the current
  :func:`crowdrank.models.numpyro_models.couple_log_normalizer`),

one lane and a vmapped batch of lanes (as :mod:`crowdrank.inference.nuts.batched` runs them). Writes
``bench/results/couple_normalizer.json`` with CPU seconds and the load average.

    nice -n 10 .venv/bin/python bench/bench_couple_normalizer.py
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


def _time(fn, *args, reps: int) -> dict:
    import jax

    jax.block_until_ready(fn(*args))          # compile
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(reps):
        out = fn(*args)
    jax.block_until_ready(out)
    return {"wall_ms": 1e3 * (time.perf_counter() - w0) / reps,
            "cpu_ms": 1e3 * (time.process_time() - c0) / reps}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--lanes", type=int, default=32, help="vmapped lanes (batch x chains)")
    ap.add_argument("--out", default="bench/results/couple_normalizer.json")
    a = ap.parse_args()

    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    from numpyro.infer.util import initialize_model

    from crowdrank.inference.nuts.batched import _program, pad_layout
    from crowdrank.models import numpyro_models as npm
    from crowdrank.validation.pipelines.sbc import SbcConfig, _prepare

    cfg = SbcConfig(model="couple-normalized", backend="numpyro", sims=2)
    prep = _prepare(cfg.spec(0))
    data, priors = prep["data"], prep["priors"]
    load0 = os.getloadavg()
    rows = {}
    variants = [("pl", "pl", None), ("couple (stagewise)", "couple", None),
                ("couple-normalized, gathered orderings", "couple-normalized",
                 npm.couple_log_normalizer_gathered),
                ("couple-normalized, static reordering (current)", "couple-normalized",
                 npm.couple_log_normalizer)]
    current = npm.couple_log_normalizer
    try:
        for name, model, norm in variants:
            npm.couple_log_normalizer = norm or current
            lay = pad_layout([data], model, priors)
            prog = _program(lay.template)
            args = (jnp.asarray(lay.index[0]), jnp.asarray(lay.worker[0]),
                    jnp.asarray(lay.weight[0]))
            info = initialize_model(jax.random.PRNGKey(0), prog, model_args=args,
                                    dynamic_args=True)
            z = info.param_info.z
            pot = info.potential_fn
            vg = jax.jit(lambda z, *a, pot=pot: jax.value_and_grad(pot(*a))(z))
            one = _time(vg, z, *args, reps=a.reps)
            zl = jax.tree.map(lambda v: jnp.broadcast_to(v, (a.lanes,) + v.shape) +
                              0.01 * jnp.arange(a.lanes).reshape((-1,) + (1,) * v.ndim), z)
            al = tuple(jnp.broadcast_to(x, (a.lanes,) + x.shape) for x in args)
            vgl = jax.jit(jax.vmap(lambda z, *a, pot=pot: jax.value_and_grad(pot(*a))(z)))
            many = _time(vgl, zl, *al, reps=max(1, a.reps // 4))
            rows[name] = {"one_lane": one, f"{a.lanes}_lanes": many,
                          "per_lane_cpu_ms_vmapped": many["cpu_ms"] / a.lanes,
                          "value": float(vg(z, *args)[0])}
            print(name, json.dumps(rows[name]), flush=True)
    finally:
        npm.couple_log_normalizer = current
    old = rows["couple-normalized, gathered orderings"]
    new = rows["couple-normalized, static reordering (current)"]
    doc = {"what": "log density + gradient of one SBC data set (10 items, 4 workers x 25 "
                   "tasks, kmax 4, geometric prior), jitted, float64",
           "command": " ".join(["bench/bench_couple_normalizer.py"] + sys.argv[1:]),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                       "python": platform.python_version()},
           "loadavg_before": [round(x, 2) for x in load0],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()],
           "n_rankings": int(data.n_rankings), "reps": a.reps, "lanes": a.lanes,
           "variants": rows,
           "speedup_cpu_one_lane": old["one_lane"]["cpu_ms"] / new["one_lane"]["cpu_ms"],
           "speedup_cpu_vmapped": (old["per_lane_cpu_ms_vmapped"]
                                   / new["per_lane_cpu_ms_vmapped"]),
           "same_value": abs(old["value"] - new["value"])}
    path = ROOT / a.out
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: doc[k] for k in ("speedup_cpu_one_lane", "speedup_cpu_vmapped",
                                          "same_value")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
