"""A/B timing of the COUPLE sampler's unit cost: the kernel of another revision against the
working tree's, interleaved in one process on the same points.

Why interleaved: on a shared machine the load changes from minute to minute, so two
separate runs of ``bench_gradient.py`` can differ by 2x for the same code; calling the two
kernels alternately gives both the same load. The other revision's ``models`` package is
extracted with ``git archive`` into a temporary directory and imported as ``models_old``.
Each kernel builds its own ``ModelInputs`` (the layouts may differ between revisions) and is
timed as NUTS calls it: jitted ``value_and_grad`` of ``potential_energy`` at a seeded
unconstrained point, 64-bit parameters, the likelihood's elementwise work in float32 or
float64. Both values are printed (they must agree).

Usage: python bench/bench_gradient_ab.py --old REV [--scales medium,large] [--reps 30]
       [--out bench/results/observed_gradient.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np

SCALES = {"medium": {"n_items": 100, "n_workers": 50, "tasks_per_worker": 100},
          "large": {"n_items": 300, "n_workers": 100, "tasks_per_worker": 450}}


def old_package(rev: str, where: Path):
    """``models`` of revision ``rev`` as the importable package ``models_old``."""
    tar = where / "old.tar"
    with tar.open("wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "models"], stdout=fh,
                       check=True)
    with tarfile.open(tar) as t:
        t.extractall(where, filter="data")
    (where / "models").rename(where / "models_old")
    sys.path.insert(0, str(where))
    return (importlib.import_module("models_old.numpyro_models"),
            importlib.import_module("models_old.model_inputs"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="git revision of the kernel to compare")
    ap.add_argument("--scales", default="medium,large")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import jax
    from numpyro.infer.util import potential_energy

    from crowdrank.inference.nuts import jittered_starts
    from crowdrank.models import model_inputs as new_mi
    from crowdrank.models import numpyro_models as new
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    recs = []
    with tempfile.TemporaryDirectory() as tmp:
        old, old_mi = old_package(a.old, Path(tmp))
        for scale in a.scales.split(","):
            sim = simulate("couple", kmax=4, setting="amateur", seed=0, **SCALES[scale])
            pr = Priors.geometric(sim.rankings.workers, 4)
            with jax.enable_x64(True):
                z = jittered_starts(new_mi.model_inputs("couple", sim.rankings, pr),
                                    {"lambda": np.random.default_rng(0).normal(
                                        0, 1, sim.rankings.n_items)}, 1, 0, 0.5)
                z = {k: jax.numpy.asarray(v) for k, v in z.items()}
                fns = {}
                for prec in ("float32", "float64"):
                    kw = {"loglik_dtype": "float32" if prec == "float32" else None}
                    for name, mod, mi, extra in (
                            ("old", old, old_mi, {}),
                            ("new", new, new_mi, {"pointwise": False}),
                            ("new_pointwise", new, new_mi, {"pointwise": True})):
                        inp = mi.model_inputs("couple", sim.rankings, pr)
                        f = jax.jit(jax.value_and_grad(
                            lambda p, mod=mod, inp=inp, kw=dict(kw, **extra):
                            potential_energy(mod.model, (inp,), kw, p)))
                        t = time.perf_counter()
                        v, _ = jax.block_until_ready(f(z))
                        fns[(prec, name)] = (f, float(v), time.perf_counter() - t)
                times = {k: [] for k in fns}
                for _ in range(a.reps):
                    for k, (f, _, _) in fns.items():
                        t = time.perf_counter()
                        jax.block_until_ready(f(z))
                        times[k].append(time.perf_counter() - t)
            for prec in ("float32", "float64"):
                rec = {"scale": scale, "N": sim.rankings.n_rankings, "precision": prec,
                       "old_rev": a.old, "reps": a.reps}
                for name in ("old", "new", "new_pointwise"):
                    f, v, c = fns[(prec, name)]
                    ts = np.array(times[(prec, name)]) * 1e3
                    rec.update({f"{name}_value": v, f"{name}_compile_s": round(c, 2),
                                f"{name}_ms_median": round(float(np.median(ts)), 3),
                                f"{name}_ms_min": round(float(ts.min()), 3)})
                rec["median_ratio_new_over_old"] = round(rec["new_ms_median"]
                                                         / rec["old_ms_median"], 3)
                rec["min_ratio_new_over_old"] = round(rec["new_ms_min"] / rec["old_ms_min"], 3)
                rec["median_ratio_pointwise_over_old"] = round(
                    rec["new_pointwise_ms_median"] / rec["old_ms_median"], 3)
                print(json.dumps(rec), flush=True)
                recs.append(rec)
    if a.out:
        out = {"note": "MEASURED: interleaved A/B of the COUPLE potential+gradient "
                       "(bench/bench_gradient_ab.py); old = the kernel of --old, new = the "
                       "working tree's observed site as the sampler runs it (model(..., "
                       "pointwise=False): the site's total through the fused scalar kernel); "
                       "new_pointwise = the per-ranking form (pointwise=True: per-ranking "
                       "values, VJP weighted by each ranking's cotangent), what "
                       "numpyro.infer.log_likelihood evaluates.",
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": {"cpus": os.cpu_count(),
                           "affinity": len(os.sched_getaffinity(0)),
                           "load_avg_1m": round(os.getloadavg()[0], 2),
                           "jax": jax.__version__},
               "records": recs}
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
