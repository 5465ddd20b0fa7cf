"""Throughput of the online methods at the paper's scale ([Pan18], Sect. 5.2 and 5.5).

450,000 rankings (L = 1000 items, W = 500 workers, T = 900 tasks each, k <= 4), simulated
by ``models.simulate.simulate_paper_scale``. For every online method: rankings per second
of one pass in file order, both for the kernel alone and end to end through ``fit_online``
(index mapping, rank-breaking, result object). numba compilation is excluded: every
kernel is run once on a small subset first (warm-up), and timings are the best of
``--repeats`` passes, both in wall time and in CPU time of the process
(``time.process_time``; on a shared, loaded machine the CPU-time rate is the fairer one,
and both are reported with the load average). openskill's ``PlackettLuce.rate()`` is timed on the first
``--openskill-n`` rankings (it is pure Python and ~10^4 times slower) and its rate is
scaled to the full set; the ratio is ours / openskill's rankings per second.
COUPLE:OnlinePL is the ratio of kernel times (the paper measured 2.8, Sect. 5.5).

Prints one JSON object per line and writes ``bench/results/online.json``.

    python bench/bench_online.py [--repeats 5] [--openskill-n 20000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))

from stamp import stamp

from crowdrank.inference.online import fit_online
from crowdrank.inference.online.api import _run_kernel, algorithm_options, pairs_sequence
from crowdrank.inference.online.state import OnlinePosterior
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate_paper_scale

GOALS = {"couple_rankings_per_s": 3e6, "pl_vs_openskill": 150.0, "couple_pl_cost_ratio": 2.8}

METHODS = [  # (label, model, fit_online keyword arguments)
    ("couple", "couple", {}),
    ("couple-full", "couple", {"taylor": "full"}),
    ("couple-plugin", "couple", {"taylor": "plugin"}),
    ("crowdbt", "crowdbt", {}),
    ("pl", "pl", {}),
    ("bt", "bt", {}),
    ("bt-pairs", "bt", {"bt_breaking": "pairs"}),
]


def kernel_seconds(data, model, priors, kw, repeats):
    """Best-of-``repeats`` time of the kernel alone over the whole set (file order)."""
    opts = algorithm_options(model, priors=priors, **kw)
    pairwise = model == "crowdbt" or kw.get("bt_breaking") == "pairs"
    src = data.rank_break() if pairwise else data
    order = np.asarray(src.order, np.int64)
    lengths = src.lengths.astype(np.int64)
    wk = src.worker.astype(np.int64)
    seq = (pairs_sequence(data.lengths, np.arange(data.n_rankings)) if pairwise
           else np.arange(data.n_rankings, dtype=np.int64))
    best, best_cpu = np.inf, np.inf
    for _ in range(repeats + 1):       # the first run is the warm-up (compile / cache load)
        p = OnlinePosterior.from_priors(model, data.items,
                                        priors.for_data(data, K=2 if model == "crowdbt"
                                                        else data.K)
                                        if model in ("couple", "crowdbt") else priors,
                                        workers=data.workers, K=data.K)
        counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
        t0, c0 = time.perf_counter(), time.process_time()
        rc = _run_kernel(model, opts, order, lengths, wk, seq, 0, len(seq), p.mu, p.sigma2,
                         p.alpha, False, counts, err)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        assert rc == -1
        if _ > 0:
            best, best_cpu = min(best, dt), min(best_cpu, dc)
    return best, best_cpu, len(seq)


def openskill_rate(data, n):
    from openskill.models import PlackettLuce
    model = PlackettLuce(mu=0.0, sigma=1.0, beta=0.5, kappa=1e-4, tau=0.0)
    ratings = {i: model.rating() for i in range(data.n_items)}
    rk = [data.ranking(j).tolist() for j in range(n)]
    t0, c0 = time.perf_counter(), time.process_time()
    for r in rk:
        out = model.rate([[ratings[i]] for i in r])
        for i, team in zip(r, out):
            ratings[i] = team[0]
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--openskill-n", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true", help="1/10 of the paper's scale")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "online.json"))
    args = ap.parse_args(argv)

    when = stamp()
    t0 = time.perf_counter()
    over = {"tasks_per_worker": 90} if args.quick else {}
    sim = simulate_paper_scale("couple", setting="amateur", seed=0, **over)
    data = sim.rankings
    priors = Priors.geometric(data.workers, data.K, a0=10, a=6)
    setup = {"bench": "online", "what": "setup", "rankings": data.n_rankings,
             "items": data.n_items, "workers": data.n_workers, "K": data.K,
             "k_counts": {int(k): int(v) for k, v in data.k_counts().items()},
             "simulate_s": round(time.perf_counter() - t0, 3),
             "python": platform.python_version(), "cpu_count": os.cpu_count(),
             "compile_time_excluded": True}
    print(json.dumps(setup), flush=True)
    rows = [setup]
    rate, cpu_rate = {}, {}
    for label, model, kw in METHODS:       # warm-up round: compile/load every kernel, touch memory
        kernel_seconds(data, model, priors, kw, 1)
    for label, model, kw in METHODS:
        ks, kc, units = kernel_seconds(data, model, priors, kw, args.repeats)
        t1 = time.perf_counter()
        fit_online(data, model, priors, progress=False, **kw)
        e2e = time.perf_counter() - t1
        rate[label] = data.n_rankings / ks
        cpu_rate[label] = data.n_rankings / kc
        row = {"bench": "online", "what": "method", "method": label, "model": model,
               "options": kw, "rankings": data.n_rankings, "updates": int(units),
               "kernel_s": round(ks, 4), "rankings_per_s": round(rate[label]),
               "kernel_cpu_s": round(kc, 4), "rankings_per_cpu_s": round(data.n_rankings / kc),
               "end_to_end_s": round(e2e, 4),
               "end_to_end_rankings_per_s": round(data.n_rankings / e2e)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    n_os = min(args.openskill_n, data.n_rankings)
    os_rate, os_cpu_rate = openskill_rate(data, n_os)
    summary = {
        "bench": "online", "what": "summary", **when,
        "openskill_pl_rankings_per_s": round(os_rate, 1), "openskill_subsample": n_os,
        "openskill_pl_rankings_per_cpu_s": round(os_cpu_rate, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "pl_vs_openskill": round(rate["pl"] / os_rate, 1),
        "couple_vs_openskill": round(rate["couple"] / os_rate, 1),
        "couple_rankings_per_s": round(rate["couple"]),
        "couple_pl_cost_ratio": round(rate["pl"] / rate["couple"], 3),
        "couple_rankings_per_cpu_s": round(cpu_rate["couple"]),
        "pl_vs_openskill_cpu": round(cpu_rate["pl"] / os_cpu_rate, 1),
        "couple_pl_cost_ratio_cpu": round(cpu_rate["pl"] / cpu_rate["couple"], 3),
        "paper_couple_pl_cost_ratio": 2.8,
        "goals": GOALS,
    }
    summary["goals_met"] = {
        "couple_rankings_per_s": summary["couple_rankings_per_s"] >= GOALS["couple_rankings_per_s"],
        "pl_vs_openskill": summary["pl_vs_openskill"] >= GOALS["pl_vs_openskill"],
        "couple_pl_cost_ratio": summary["couple_pl_cost_ratio"] <= GOALS["couple_pl_cost_ratio"],
    }
    print(json.dumps(summary), flush=True)
    rows.append(summary)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
