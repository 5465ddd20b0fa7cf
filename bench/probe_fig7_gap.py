"""Why does online CrowdBT beat COUPLE (OnlineGBMM) in our Fig. 7 ([Pan18], Sect. 5.2)?

Probes, on the paper-scale data of ``validation.replicate.synthetic`` (seed 0, one random
order, the order of repeat 0), the candidate causes named in ``docs/replication.md``:

* the prior: CrowdBT under COUPLE's gold *stage* counts ``α[:, :2]`` instead of its own
  rank-broken gold pair counts, and both methods under the geometric profile;
* OnlineGBMM's Taylor step: ``taylor="full"`` against the paper's;
* the data's ranking length: both methods on the k = 2 rankings only (where COUPLE's model
  *is* CrowdBT's) and on the k = 4 rankings only;
* with ``--nuts``: the model against its approximation — COUPLE and CrowdBT by NUTS at the
  reduced scale ``validation.replicate.NUTS_SCALE`` beside their online fits.

Writes ``bench/results/replicate_fig7_probe.json`` (accuracies in %).

    nice python bench/probe_fig7_gap.py [--settings amateur malicious] [--nuts]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from crowdrank.validation.replicate import (  # noqa: E402
    NUTS_SCALE,
    NUTS_SETTINGS,
    accuracy,
    machine,
    nuts_synthetic_job,
    order_seed,
    synthetic,
)


def probe(setting: str, seed: int) -> dict:
    from crowdrank.inference.online import fit_online
    from crowdrank.models.priors import Priors

    sim, pri = synthetic(setting, seed, 1000, 500, 900, 4, 10)
    d = sim.rankings
    s = order_seed(seed, 0)

    def acc(data, model, priors, **kw):
        post = fit_online(data, model, priors, order="shuffle", seed=s, progress=False, **kw)
        return 100 * accuracy(sim.lam, post.mu)

    stage = Priors(pri.workers, pri.alpha, pri.mu0, pri.sigma0, "gold-stage-counts")
    geo = Priors.geometric(d.workers, d.K)
    r = {"couple": acc(d, "couple", pri), "crowdbt": acc(d, "crowdbt", pri),
         "couple_taylor_full": acc(d, "couple", pri, taylor="full"),
         "crowdbt_with_couple_stage_counts": acc(d, "crowdbt", stage),
         "couple_geometric_prior": acc(d, "couple", geo),
         "crowdbt_geometric_prior": acc(d, "crowdbt", geo)}
    for k in (2, 4):
        sub = d.subset(np.flatnonzero(d.lengths == k))
        r[f"couple_k{k}_only"] = acc(sub, "couple", pri)
        r[f"crowdbt_k{k}_only"] = acc(sub, "crowdbt", pri)
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--settings", nargs="+", default=["amateur", "malicious"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nuts", action="store_true")
    args = p.parse_args(argv)
    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    out = {"benchmark": "replicate-fig7-probe", "seed": args.seed, "machine": machine(),
           "settings": {}}
    path = ROOT / "bench" / "results" / "replicate_fig7_probe.json"
    for st in args.settings:
        t = time.perf_counter()
        out["settings"][st] = probe(st, args.seed)
        out["settings"][st]["seconds"] = time.perf_counter() - t
        print(st, json.dumps(out["settings"][st]), file=sys.stderr, flush=True)
        path.write_text(json.dumps(out, indent=1) + "\n")
    if args.nuts:
        out["nuts"] = {"scale": NUTS_SCALE, "sampler": NUTS_SETTINGS, "settings": {}}
        for st in args.settings:
            t = time.perf_counter()
            r = nuts_synthetic_job(dict({"kind": "fig7-nuts", "setting": st,
                                         "seed": args.seed, "scale": NUTS_SCALE, "gold": 10},
                                        **NUTS_SETTINGS))
            r["wall_seconds"] = time.perf_counter() - t
            out["nuts"]["settings"][st] = r
            print(st, "nuts", json.dumps(r), file=sys.stderr, flush=True)
            path.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
