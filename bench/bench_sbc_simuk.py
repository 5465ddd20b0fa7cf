"""simuk's SBC of the exported NumPyro CrowdBT model (``crowdbt_model`` of
:mod:`crowdrank.models.numpyro.arrays`) on the outside setting of docs/sbc.md
("CrowdBT and the outside tool"): 6 items, 3 workers, 20 tasks, the default worker prior
(geometric ``a0 = 10, a = 6``: ``η_w ~ Beta(10/6, 10/36)``), 1 chain × (300 + 300), ranks as
simuk computes them (chain 0, all 300 draws, no thinning).

``--kmax 4``: the tasks of ``tests/test_ppl_contract._pl_args`` (rankings of length 2..4,
fully rank-broken by the likelihood); ``--kmax 2``: 20 pairs, where the site's sample is
exactly its likelihood's distribution. Beside simuk's ranks of every sample site, the
ranks of the deterministic accuracy ``eta`` by simuk's rule. simuk runs in chunks of
``--chunk`` replicates (seeds ``seed``, ``seed + 1``, ...), each saved as it finishes.

    nice -n 10 python bench/bench_sbc_simuk.py --kmax 4 --sims 100 \\
        --out /tmp/sbc_simuk_k4.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))
from stamp import stamp


def _verdict(rec: dict) -> dict:
    """The suite's verdict (:func:`crowdrank.validation.pipelines.sbc_uniformity.
    uniformity_summary`: ECDF band and ``pot_c``, Cauchy-combined per family) on simuk's
    ranks of ``η`` and of the centred scores ``lambda_c``, with the counts of extreme ranks
    (of ``S + 1 = 301`` values: ``N·7/301`` are expected below 7)."""
    from crowdrank.validation.pipelines.sbc_uniformity import uniformity_summary

    S = rec["n_draws"]
    eta = np.asarray(rec["eta_rank"], float)
    lam_c = np.asarray(rec["ranks"]["lambda_c"], float)
    W, L = eta.shape[1], lam_c.shape[1]
    names = [f"eta[w{w}]" for w in range(W)] + [f"lambda_c[{i}]" for i in range(L)]
    fams = ["eta"] * W + ["lambda_centred"] * L
    values = np.concatenate([eta, lam_c], axis=1)
    summ = uniformity_summary(values, names, fams, S + 1, seed=0)
    out = {"verdict": summ["verdict"],
           "families": {f: {k: summ["families"][f][k] for k in
                            ("ecdf_p_combined", "pot_c_p_combined", "outside_band")}
                        for f in summ["families"]},
           "parameters": {}}
    for j, nm in enumerate(names):
        r = values[:, j]
        v = summ["parameters"][nm]
        out["parameters"][nm] = {"ecdf_p": round(v["ecdf_p"], 4),
                                 "pot_c_p": round(v["pot_c_p"], 4),
                                 "chi2_p": round(v["chi2_p"], 4),
                                 "rank_0": int(np.sum(r == 0)), "rank_S": int(np.sum(r == S)),
                                 "rank_below_7": int(np.sum(r < 7)),
                                 "rank_above_S_minus_7": int(np.sum(r > S - 7)),
                                 "expected_per_7_cells": round(r.size * 7 / (S + 1), 2)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kmax", type=int, required=True, choices=(2, 3, 4))
    ap.add_argument("--sims", type=int, default=100)
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    import simuk
    from numpyro.infer import NUTS

    from crowdrank.models.numpyro import arrays as A
    from crowdrank.models.simulate import simulate

    n_items, n_workers, n = 6, 3, 20
    sim = simulate("pl", n_items=n_items, n_workers=n_workers,
                   tasks_per_worker=n // n_workers + 1, kmax=a.kmax, seed=0).rankings
    sub = sim.subset(np.arange(n))
    order = np.ascontiguousarray(sub.order.T, dtype=np.int32)
    alpha = np.tile([10 / 6, 10 / 36], (n_workers, 1))
    args = {"items": order, "workers": np.asarray(sub.worker, np.int32), "n_items": n_items,
            "alpha": alpha, "rankings": order}
    rec = {"what": "simuk 0.3.0 SBC of crowdbt_model (NumPyro array model)",
           **stamp(speed=False), "nice": os.nice(0),
           "loadavg_before": [round(x, 2) for x in os.getloadavg()],
           "kmax": a.kmax, "seed": a.seed, "chunk": a.chunk,
           "task_lengths_count": np.bincount((order >= 0).sum(axis=1)).tolist(),
           "workers": args["workers"].tolist(), "n_draws": 300, "ranks": {},
           "eta_rank": [], "eta_truth": []}
    t0, c0 = time.perf_counter(), time.process_time()
    for c in range(a.sims // a.chunk):
        sbc = simuk.SBC(NUTS(A.crowdbt_model), data_dir=args, num_simulations=a.chunk,
                        seed=a.seed + c, keep_fits=True, progress_bar=False,
                        sample_kwargs={"num_warmup": 300, "num_samples": 300,
                                       "progress_bar": False})
        sbc.run_simulations()
        for k in sbc.var_names:
            rec["ranks"].setdefault(k, []).extend(
                np.asarray(sbc.simulations["prior_sbc"][k]).reshape(a.chunk, -1).tolist())
        ref = np.asarray(sbc.ref_params["eta"])                      # (chunk, W)
        rec["eta_rank"].extend(
            np.sum(np.asarray(p["eta"].sel(chain=0)) < ref[i], axis=0).tolist()
            for i, p in enumerate(sbc.posteriors))
        rec["eta_truth"].extend(ref.tolist())
        rec["verdict"] = _verdict(rec)
        rec.update(sims=len(rec["eta_rank"]), wall_s=round(time.perf_counter() - t0, 1),
                   cpu_s=round(time.process_time() - c0, 1),
                   loadavg_after=[round(x, 2) for x in os.getloadavg()])
        with open(a.out, "w") as fh:
            json.dump(rec, fh)
        print(f"[bench_sbc_simuk] kmax={a.kmax}: {rec['sims']} replicates, "
              f"{rec['wall_s']:.0f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
