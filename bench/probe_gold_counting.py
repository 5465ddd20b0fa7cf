"""Does the gold-prior counting explain COUPLE's reversal on malicious workers when the
reports follow COUPLE's own (normalised Eq. 4) distribution? ([Pan18], Sect. 5.1-5.2)

``Priors.from_gold`` counts, at each stage of a gold ranking, the offset of the *reported*
item in the remaining *true* order (the η of the stagewise story). Eq. 4 defines
``η_w^t = P(X̃ = ρ^(1) | X = ρ^(t))``: the offset of the *true* winner in the remaining
*reported* order. This probe builds the second counting from the same gold tasks and
refits COUPLE (OnlineGBMM, one random order: the order of repeat 0) under each, on the
data of ``validation.replicate.synthetic`` (seed 0, paper scale unless ``--scale``).

Writes ``bench/results/replicate_gold_counting.json`` (accuracy %, CPU seconds, load).

    nice python bench/probe_gold_counting.py [--settings malicious amateur] \
        [--simulators normalized story] [--scale 1000,500,900,4]
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

import numpy as np  # noqa: E402

from crowdrank.validation.replicate import accuracy, machine, order_seed, synthetic  # noqa: E402


def eq4_counts(gold, true_order, K: int) -> np.ndarray:
    """Per worker, how often the true winner of a stage sat at offset t of the remaining
    *reported* items (Eq. 4's η), over every stage of every gold ranking."""
    counts = np.zeros((gold.n_workers, K))
    for n in range(gold.n_rankings):
        r = [int(x) for x in gold.ranking(n)]
        pos = {int(item): j for j, item in enumerate(true_order[: len(r), n])}
        for i in range(len(r) - 1):
            rem = r[i:]
            winner = min(rem, key=lambda it: pos[it])
            counts[gold.worker[n], rem.index(winner)] += 1
    return counts


def main(argv=None) -> int:
    from crowdrank.inference.online import fit_online
    from crowdrank.models.priors import Priors

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--settings", nargs="+", default=["malicious", "amateur"])
    p.add_argument("--simulators", nargs="+", default=["normalized", "story"])
    p.add_argument("--scale", default="1000,500,900,4")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    L, W, T, K = (int(x) for x in args.scale.split(","))
    out = {"benchmark": "replicate-gold-counting", "seed": args.seed,
           "scale": {"n_items": L, "n_workers": W, "tasks_per_worker": T, "kmax": K},
           "machine": machine(), "loadavg_before": list(os.getloadavg()), "runs": {}}
    path = ROOT / "bench" / "results" / "replicate_gold_counting.json"
    for sim_name in args.simulators:
        for st in args.settings:
            t, c = time.perf_counter(), time.process_time()
            sim, pri = synthetic(st, args.seed, L, W, T, K, 10, sim_name)
            alt = Priors(pri.workers, 1.0 + eq4_counts(sim.gold, sim.gold_true_order,
                                                       pri.alpha.shape[1]),
                         pri.mu0, pri.sigma0, "gold-eq4-counts")
            r = {}
            for label, priors in (("story_counting", pri), ("eq4_counting", alt)):
                post = fit_online(sim.rankings, "couple", priors, order="shuffle",
                                  seed=order_seed(args.seed, 0), progress=False)
                r[label] = 100 * accuracy(sim.lam, post.mu)
            r["mean_alpha_story_counting"] = (pri.alpha / pri.alpha.sum(1, keepdims=True)
                                              ).mean(0).tolist()
            r["mean_alpha_eq4_counting"] = (alt.alpha / alt.alpha.sum(1, keepdims=True)
                                            ).mean(0).tolist()
            r["wall_seconds"] = time.perf_counter() - t
            r["cpu_seconds"] = time.process_time() - c
            r["loadavg"] = list(os.getloadavg())
            out["runs"][f"{sim_name}/{st}"] = r
            print(sim_name, st, json.dumps(r), file=sys.stderr, flush=True)
            path.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
