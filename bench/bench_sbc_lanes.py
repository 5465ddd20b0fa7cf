"""Where a vmapped SBC batch spends its time: the slowest-lane cost of
:func:`crowdrank.inference.nuts.batched.fit_nuts_batched`.

A vmapped NUTS iteration runs its tree-building ``while_loop`` until the *longest*
trajectory among its lanes has finished, so every lane pays for the hardest one. This
script fits the first ``--replicates`` replicates of ``crowdrank sbc --model M`` (the same
truths, data and seeds as ``validation.pipelines.sbc``) in batches of ``--batch`` and records, per
batch: the leapfrog steps the program ran (Σ over iterations of the longest lane), the
steps each lane needed (mean and max over lanes: the max is what per-lane termination
would cost), compile and per-phase seconds, CPU seconds and the load average.

    nice python bench/bench_sbc_lanes.py --model couple-normalized --replicates 16 \
        --batch 8 --lane-groups 1 4 --tune 150 --draws 150
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(model: str, replicates: int, batch: int, tune: int, draws: int, chains: int,
            seed: int, extra: dict) -> dict:
    import numpy as np

    from crowdrank.inference.nuts.batched import fit_nuts_batched, pad_layout
    from crowdrank.validation.pipelines.sbc import SbcConfig, _prepare

    cfg = SbcConfig(model=model, backend="numpyro", sims=max(replicates, 2), seed=seed,
                    chains=chains, tune=tune, draws=draws)
    preps = [_prepare(cfg.spec(i)) for i in range(replicates)]
    # one layout for the whole study, as sbc does per batch (shapes fixed across batches)
    counts = {k: b - a for k, a, b in
              pad_layout([p["data"] for p in preps], model, preps[0]["priors"]).template.blocks}
    out = []
    for i in range(0, replicates, batch):
        grp = preps[i:i + batch]
        c0, l0, t0 = os.times(), os.getloadavg(), time.perf_counter()
        res = fit_nuts_batched([p["data"] for p in grp], model, grp[0]["priors"],
                               seeds=[p["nuts_seed"] for p in grp], chains=chains,
                               tune=tune, draws=draws, counts=counts, **extra)
        wall = time.perf_counter() - t0
        c1 = os.times()
        t = res[0]["timings"]
        lanes = np.asarray(t["lane_steps"])
        out.append({
            "replicates": list(range(i, i + len(grp))), "wall_s": round(wall, 1),
            "cpu_s": round(c1.user - c0.user + c1.system - c0.system, 1),
            "loadavg_before": [round(x, 2) for x in l0],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "timings": {k: (round(v, 3) if isinstance(v, float) else v)
                        for k, v in t.items() if k not in ("lane_steps", "chunks")},
            "chunks": t["chunks"],
            "lane_steps_per_replicate": lanes.reshape(len(grp), chains).sum(1).tolist(),
            "gate_failed": [i + j for j, r in enumerate(res) if not r["gate"].trusted],
        })
        print(json.dumps(out[-1]["timings"]), file=sys.stderr, flush=True)
    return {"model": model, "batch": batch, "tune": tune, "draws": draws, "chains": chains,
            "seed": seed, "extra": extra, "batches": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="couple-normalized")
    ap.add_argument("--replicates", type=int, default=16)
    ap.add_argument("--batch", type=int, nargs="+", default=[16, 8])
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lane-groups", type=int, nargs="+", default=[1],
                    help="fit_nuts_batched's lane_groups (one run per value)")
    ap.add_argument("--warmup-depth", type=int, default=None,
                    help="fit_nuts_batched's warmup_max_tree_depth")
    ap.add_argument("--label", default="default")
    ap.add_argument("--out", default="bench/results/sbc_lanes.json")
    a = ap.parse_args()
    from crowdrank.inference.nuts import configure_host_devices

    configure_host_devices()
    path = ROOT / a.out
    doc = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    for b in a.batch:
        for g in a.lane_groups:
            extra = {"lane_groups": g, "warmup_max_tree_depth": a.warmup_depth}
            rec = measure(a.model, a.replicates, b, a.tune, a.draws, a.chains, a.seed, extra)
            rec["date"] = datetime.now(UTC).isoformat(timespec="seconds")
            rec["machine"] = {"cpu_count": os.cpu_count(), "platform": platform.platform()}
            rec["command"] = " ".join(sys.argv)
            key = f"{a.model}/batch{b}/groups{g}/depth{a.warmup_depth}/{a.label}"
            doc["runs"][key] = rec
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
