"""Where one PyMC SBC replicate of normalised COUPLE spends its time, by route.

One replicate of ``crowdrank sbc --model couple-normalized --backend pymc`` (10 items,
4 workers, 100 rankings, geometric prior, 4 x (300 + 500), chains in sequence in one
process, as ``run_sbc`` runs them) is timed phase by phase, wall and CPU seconds, on two
routes:

* ``per_replicate_build`` (``SbcConfig(pymc_reuse=False)``, the route before): a new PyMC
  model per replicate through ``fit_nuts(backend="pymc")`` and ``pm.sample`` — graph build,
  ``init_nuts`` (which compiles the log density and gradient), step assignment, trace set-up
  (compiles the deterministics), the NUTS loop, conversion to InferenceData, the DataTree
  and the gate;
* ``reused_compile`` (the default): :mod:`crowdrank.inference.nuts.pymc_reuse` — the model compiled once
  per process, then per replicate only the data load, PyMC's NUTS loop, the deterministics
  and the gate.

The NUTS loop is further split into leapfrog steps x the cost of one gradient (the compiled
``logp_dlogp`` function timed alone on this replicate's data) and the rest (PyMC's Python
tree building, potential and step-size adaptation). Each route first runs ``--warm``
replicates in the same process (imports, first compilations of PyTensor's op kernels),
then ``--reps`` measured ones, whose mean is recorded. Load averages are recorded beside
every figure: on a shared machine the CPU seconds, not the wall time, are what an idle core
would need (and even they are inflated by contention).

    nice -n 10 python bench/profile_sbc_pymc.py            # -> bench/results/sbc_pymc_profile.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class _Clock:
    """Wall and CPU seconds accumulated per phase by wrapped functions (outermost only:
    a phase called inside another phase is counted in the outer one)."""

    def __init__(self):
        self.wall = defaultdict(float)
        self.cpu = defaultdict(float)
        self.depth = 0

    def wrap(self, name, fn):
        def inner(*a, **kw):
            if self.depth:
                return fn(*a, **kw)
            self.depth += 1
            t, c = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                self.wall[name] += time.perf_counter() - t
                self.cpu[name] += time.process_time() - c
                self.depth -= 1
        return inner

    def reset(self):
        self.wall.clear()
        self.cpu.clear()


def _gradient_us(model_or_func, x, reps: int = 2000) -> float:
    f = model_or_func
    f.set_extra_values({})
    f._pytensor_function(x)
    c = time.process_time()
    for _ in range(reps):
        f._pytensor_function(x)
    return (time.process_time() - c) / reps * 1e6


def profile_route(route: str, warm: int, reps: int, seed: int) -> dict:
    import numpy as np
    from pymc.sampling import mcmc

    from crowdrank.inference import nuts
    from crowdrank.models import pymc_models as pmm
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.validation import sbc

    clock = _Clock()
    reuse = route == "reused_compile"
    cfg = sbc.SbcConfig(model="couple-normalized", backend="pymc", sims=warm + reps,
                        seed=seed, pymc_reuse=reuse)
    patches = []

    def patch(mod, name, label):
        orig = getattr(mod, name)
        setattr(mod, name, clock.wrap(label, orig))
        patches.append((mod, name, orig))

    if reuse:
        import crowdrank.inference.nuts.pymc_reuse as pr
        patch(pr.ReusedNuts, "__init__", "compile (once per process)")
        patch(pr.ReusedNuts, "_starts", "starts (jitter, finite check)")
        patch(pr.ReusedNuts, "_deterministics", "deterministics (lambda, eta)")
        import crowdrank.inference.gate as gate_mod
        patch(gate_mod, "check", "gate")
    else:
        patch(pmm, "build_model", "graph build")
        patch(mcmc, "init_nuts", "init_nuts (compiles logp+dlogp, jittered starts)")
        patch(mcmc, "assign_step_methods", "assign_step_methods")
        patch(mcmc, "init_traces", "init_traces (compiles deterministics)")
        patch(mcmc, "_sample_many", "nuts_loop")
        patch(mcmc, "_sample_return", "to InferenceData")
        patch(nuts, "to_datatree", "to_datatree")
        patch(nuts, "check", "gate")
    out = {"route": route, "replicates": []}
    try:
        for sim in range(warm + reps):
            clock.reset()
            spec = cfg.spec(sim)
            load = os.getloadavg()
            t, c = time.perf_counter(), time.process_time()
            res = sbc.sbc_job(spec)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            det = res["timings"].get("nuts_detail", {})
            leapfrogs = det.get("warmup_gradients", 0.0) + det.get("sampling_gradients", 0.0)
            phases_wall = dict(clock.wall)
            phases_cpu = dict(clock.cpu)
            if reuse:
                # the loop is a generator: time it from the fit's own clocks
                phases_wall["nuts_loop"] = det.get("warmup", 0.0) + det.get("sampling", 0.0)
                phases_cpu["nuts_loop"] = det.get("loop_cpu", float("nan"))
            phases_wall["online fit (OnlineGBMM)"] = res["timings"].get("online", 0.0)
            # the gradient alone, on this replicate's data
            prep = sbc._prepare(spec)
            inputs = model_inputs("couple-normalized", prep["data"], prep["priors"])
            if reuse:
                from crowdrank.inference.nuts.pymc_reuse import reused_nuts
                s, _ = reused_nuts(inputs)
                s.data.set(inputs)
                f = s.func
                x = np.concatenate([np.ravel(s.initial_point[v.name]) for v in s.vars])
            else:
                m = pmm.build_model(inputs)
                f = m.logp_dlogp_function(ravel_inputs=True)
                ip = m.initial_point()
                x = np.concatenate([np.ravel(ip[v.name]) for v in m.value_vars])
            g_us = _gradient_us(f, x)
            out["replicates"].append({
                "sim": sim, "warm_up_replicate": sim < warm, "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3), "loadavg_before": [round(v, 2) for v in load],
                "loadavg_after": [round(v, 2) for v in os.getloadavg()],
                "phases_wall_s": {k: round(v, 3) for k, v in phases_wall.items()},
                "phases_cpu_s": {k: round(v, 3) for k, v in phases_cpu.items()},
                "leapfrogs": leapfrogs, "gradient_cpu_us": round(g_us, 1),
                "gradients_cpu_s_estimate": round(leapfrogs * g_us * 1e-6, 3),
                "gate_trusted": bool(res["gate"].get("trusted"))})
            print(f"[profile] {route} sim {sim}: wall {wall:.2f} s, cpu {cpu:.2f} s",
                  file=sys.stderr, flush=True)
    finally:
        for mod, name, orig in reversed(patches):
            setattr(mod, name, orig)
    meas = [r for r in out["replicates"] if not r["warm_up_replicate"]]
    mean = lambda xs: round(sum(xs) / len(xs), 3)
    keys = sorted({k for r in meas for k in r["phases_wall_s"]})
    ckeys = sorted({k for r in meas for k in r["phases_cpu_s"]})
    out["measured_mean"] = {
        "wall_s": mean([r["wall_s"] for r in meas]), "cpu_s": mean([r["cpu_s"] for r in meas]),
        "phases_wall_s": {k: mean([r["phases_wall_s"].get(k, 0.0) for r in meas]) for k in keys},
        "phases_cpu_s": {k: mean([r["phases_cpu_s"].get(k, 0.0) for r in meas]) for k in ckeys},
        "leapfrogs": mean([r["leapfrogs"] for r in meas]),
        "gradient_cpu_us": mean([r["gradient_cpu_us"] for r in meas]),
        "gradients_cpu_s_estimate": mean([r["gradients_cpu_s_estimate"] for r in meas])}
    mm = out["measured_mean"]
    # CPU seconds throughout: on a loaded machine the wall time of the loop is mostly waiting
    loop = mm["phases_cpu_s"].get("nuts_loop", 0.0)
    mm["phases_cpu_s"]["unaccounted (sbc_job: simulation, ranks, other)"] = round(
        mm["cpu_s"] - sum(mm["phases_cpu_s"].values()), 3)
    mm["nuts_loop_other_than_gradient_s"] = round(loop - mm["gradients_cpu_s_estimate"], 3)
    mm["pymc_overhead_us_per_leapfrog"] = round(
        (loop - mm["gradients_cpu_s_estimate"]) / max(mm["leapfrogs"], 1) * 1e6, 1)
    first = out["replicates"][0]
    out["first_replicate_in_process"] = {"wall_s": first["wall_s"], "cpu_s": first["cpu_s"],
                                         "phases_cpu_s": first["phases_cpu_s"]}
    return out


def linker_modes(seed: int, reps: int = 2000, rounds: int = 3) -> dict:
    """Compile CPU seconds and gradient CPU microseconds (the best of ``rounds``
    interleaved rounds, so that a load spike hits every variant alike) of one replicate's
    log density and gradient: the re-used graph (rankings in shared variables) under
    PyTensor's numba linker (the default) and its C linker, and the per-replicate graph
    (rankings as constants, :func:`crowdrank.models.pymc_models.build_model`)."""
    import numpy as np
    from pytensor.compile.mode import Mode

    from crowdrank.inference.nuts.pymc_reuse import ReusedNuts
    from crowdrank.models import pymc_models as pmm
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.validation import sbc

    spec = sbc.SbcConfig(model="couple-normalized", backend="pymc", sims=2,
                         seed=seed).spec(0)
    prep = sbc._prepare(spec)
    inputs = model_inputs("couple-normalized", prep["data"], prep["priors"])
    funcs, out = {}, {}
    for name, mode in (("shared graph, numba (default)", None),
                       ("shared graph, C (cvm, fast_run)", Mode(linker="cvm",
                                                                optimizer="fast_run"))):
        c = time.process_time()
        s = ReusedNuts(inputs, mode=mode)
        out[name] = {"compile_cpu_s": round(time.process_time() - c, 2)}
        funcs[name] = (s.func, np.concatenate([np.ravel(s.initial_point[v.name])
                                               for v in s.vars]))
    c = time.process_time()
    m = pmm.build_model(inputs)
    f = m.logp_dlogp_function(ravel_inputs=True)
    name = "constant graph (build_model), numba (default)"
    out[name] = {"compile_cpu_s": round(time.process_time() - c, 2)}
    ip = m.initial_point()
    funcs[name] = (f, np.concatenate([np.ravel(ip[v.name]) for v in m.value_vars]))
    best = {k: float("inf") for k in funcs}
    for _ in range(rounds):
        for k, (f, x) in funcs.items():
            best[k] = min(best[k], _gradient_us(f, x, reps))
    for k in funcs:
        out[k]["gradient_cpu_us"] = round(best[k], 1)
    out["loadavg"] = [round(v, 2) for v in os.getloadavg()]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--routes", nargs="+", default=["per_replicate_build", "reused_compile"],
                    choices=["per_replicate_build", "reused_compile"])
    ap.add_argument("--warm", type=int, default=1, help="replicates run first, not measured")
    ap.add_argument("--reps", type=int, default=3, help="measured replicates per route")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-linkers", dest="linkers", action="store_false",
                    help="skip the numba-vs-C linker comparison of the re-used graph")
    ap.add_argument("--out", default="bench/results/sbc_pymc_profile.json")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    import pytensor

    doc = {"what": "one PyMC SBC replicate of normalised COUPLE (10 items, 4 workers, 100 "
                   "rankings, geometric prior, 4 x (300 + 500), chains in sequence), phase "
                   "by phase, per route; means over the measured replicates, after warm-up "
                   "replicates in the same process",
           "command": "python " + " ".join(sys.argv),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                       "python": platform.python_version(), "nice": os.nice(0),
                       "pytensor_linker": str(pytensor.config.linker),
                       "pytensor_mode": str(pytensor.config.mode)},
           "routes": {}}
    for route in a.routes:
        doc["routes"][route] = profile_route(route, a.warm, a.reps, a.seed)
    if a.linkers:
        doc["linkers"] = linker_modes(a.seed)
    if len(a.routes) == 2:
        old = doc["routes"]["per_replicate_build"]["measured_mean"]["cpu_s"]
        new = doc["routes"]["reused_compile"]["measured_mean"]["cpu_s"]
        doc["cpu_speedup_per_replicate"] = round(old / new, 2)
        doc["cpu_s_for_200_replicates_on_2_cores_estimate_min"] = {
            r: round(200 * doc["routes"][r]["measured_mean"]["cpu_s"] / 2 / 60, 1)
            for r in a.routes}
    path = ROOT / a.out
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "routes"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
