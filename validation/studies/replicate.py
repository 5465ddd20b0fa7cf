"""The COUPLE paper's experiments ([Pan18], Sect. 5), replicated on this suite's methods.

Each experiment is a grid of JSON specs run by :func:`crowdrank.validation.runtime.grid.run_grid`
(cached under ``<out>/cache``, resumable, on local processes or a Dask cluster) and then
summarised into one JSON-able dict that :mod:`crowdrank.reports.replicate_html` turns into a page.
Every random choice derives from the master ``seed``: the simulated data of a setting from
``(seed, setting)``, the sample order of repeat ``r`` from ``(seed, r)``.

Experiments (:data:`EXPERIMENTS`):

``fig7``
    Fig. 7: the four synthetic settings (all workers expert, amateur, spammer or malicious,
    ``η_w ~ Dir(α0)`` with the ``α0`` of Sect. 5.2), ``L = 1000`` items ``~ N(0, 1)``,
    ``W = 500`` workers, ``T = 900`` tasks each, ``2 ≤ k ≤ 4``; worker priors from 10
    gold tasks per worker (Sect. 5.1, :meth:`Priors.from_gold`). COUPLE (OnlineGBMM),
    CrowdBT online, OnlinePL and OnlineBT each make one pass in a random order; the
    pairwise accuracy is read after 5 %, 10 %, 20 %, …, 100 % of the samples.
``babyface``
    Tables 6–7 (Sect. 5.4): the BabyFace data duplicated 5 times, every online method over
    ``R`` random orders plus PeerGrader (batch MAP, order-free); the six lowest-quality
    workers by COUPLE's ``E[η_w^1]``, CrowdBT's ``E[η_w]`` and PeerGrader's ``η_g``; the
    cleaned re-run without them. Priors of Sect. 5.1 for real data: COUPLE geometric
    ``a0 = 10, a = 6``, CrowdBT ``Beta(5, 1)`` for every worker.
``cost``
    Fig. 8 / Table 2: seconds per ranking of each online method on BabyFace (×5) and at
    the paper's synthetic scale; the COUPLE : OnlinePL ratio beside the paper's 2.8.
``readlevel``, ``preflib``
    The BabyFace protocol on the other shared sets (no published numbers to compare).

The NUTS reference (``nuts=True``) fits COUPLE and CrowdBT by NUTS on the unduplicated
real data, and on each synthetic setting at a reduced scale (:data:`NUTS_SCALE`), so the
page puts the posterior-mean accuracy beside the online methods'.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from crowdrank.models.errors import UsageError
from crowdrank.validation.studies.replicate_pieces import (
    accuracy,
    machine,
    online_curve,
    online_fit,
    order_seed,
    worker_quality,
)

EXPERIMENTS = ("fig7", "babyface", "cost", "readlevel", "preflib")
ONLINE = ("couple", "crowdbt", "pl", "bt")
LABELS = {"couple": "COUPLE (OnlineGBMM)", "crowdbt": "CrowdBT (online)",
          "pl": "OnlinePL (Weng–Lin)", "bt": "OnlineBT (Weng–Lin)",
          "peergrader": "PeerGrader (MAP)", "nuts-couple": "COUPLE by NUTS (posterior mean)",
          "nuts-crowdbt": "CrowdBT by NUTS (posterior mean)"}
SETTINGS = ("expert", "amateur", "spammer", "malicious")
#: Fig. 7's x-axis: the share of the samples seen.
FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: The synthetic scale of the NUTS reference (the page states it).
NUTS_SCALE = {"n_items": 60, "n_workers": 20, "tasks_per_worker": 60, "kmax": 4}
NUTS_SETTINGS = {"chains": 2, "tune": 400, "draws": 400}
#: How a synthetic report is generated ([Pan18], Sect. 5.1-5.2 give no formula):
SIMULATORS = {
    "story": "the COUPLE story: each task's true order drawn from PL(λ), then reported stage "
             "by stage, the item at offset t of the remaining TRUE order chosen with "
             "probability η̄_t (models.simulate.couple_report; exact for k = 2 only)",
    "normalized": "normalised COUPLE: one of the k! orderings drawn with probability "
                  "Eq. 4 / Σ Eq. 4 (the COUPLE model's own distribution, exact)",
    "fixed": "Sect. 5.1 read literally: one ground-truth order of all items ('an object set "
             "Ω with the ground-truth preference'), each task's subset in that order (no PL "
             "draw), corrupted stage by stage as in 'story'",
}
#: λ is multiplied by this in the "fixed" simulator: PL(λ·s) then orders every subset as λ
#: (the closest of 1000 N(0, 1) scores are ~1e-7 apart; Gumbel noise is O(10)).
FIXED_SCALE = 1e12
#: Orders per grid task of the real-data experiments.
CHUNK = 50
#: COUPLE stays within this many accuracy points of its final value: "stable".
STABLE_POINTS = 0.5

#: What [Pan18] publishes that the text of our copy states (tables' cells are not in it).
PAPER = {
    "babyface_cleaned_couple": {"value": 92.30, "unit": "%", "where": "Sect. 5.4 and Table 6 "
                                "(bottom line): 'The accuracy of COUPLE stabilized at around "
                                "92.30 %' on the cleaned BabyFace data"},
    "cost_ratio_couple_pl": {"value": 2.8, "where": "Sect. 5.5, Fig. 8: 'The proportion of the "
                             "time cost between COUPLE and OnlinePL was about 2.8'"},
    "cost_theory_couple_pl_k3": {"value": 17 / 6, "where": "Table 2 for k = 3: 17 : 6"},
    "fig7_couple_best": {"value": True, "where": "Sect. 5.2, Fig. 7, observation (1): 'On all "
                         "settings, COUPLE delivered a performance superior to other "
                         "baselines'"},
    "fig7_couple_stable_from": {"value": 0.2, "where": "Sect. 5.2, observation (4): 'The "
                                "accuracy of COUPLE reached stability at 20 % of the samples "
                                "on all settings'"},
    "babyface_same_six": {"value": True, "where": "Sect. 5.4, Table 7: 'COUPLE, CrowdBT and "
                          "PeerGrader detected the same six noisy workers'"},
    "babyface_cells": {"value": None, "where": "Tables 6 and 7: the cells (accuracies, "
                       "worker ids) are not in the text we have; only the 92.30 % above is"},
}

#: Experiments of [Pan18], Sect. 5 that cannot be run here, and why (every page lists them).
NOT_RUNNABLE = {
    "PeerGrading PO and FR (Sect. 5.3, Tables 3-5)": (
        "the Poster and Final Report peer-grading data of [Raman14] (42 and 44 assignments, "
        "148 and 153 students, TA grades as the truth) are not among the shared data sets, "
        "and they cannot be generated faithfully: the experiments are about those students' "
        "actual grading noise, which no simulator of ours reproduces"),
}

REAL = {
    "babyface": {"datasets": (("babyface", {}),), "duplicate": 5, "cleaned": True},
    "readlevel": {"datasets": (("readlevel", {}),), "duplicate": 1, "cleaned": True},
    "preflib": {"datasets": (("preflib-dots", {}), ("preflib-puzzle", {})), "duplicate": 1,
                "cleaned": False},
}


# ------------------------------------------------------------------ fig7
@functools.lru_cache(maxsize=4)
def synthetic(setting: str, seed: int, n_items: int, n_workers: int, tasks_per_worker: int,
              kmax: int, gold: int = 10, simulator: str = "story"):
    """The simulated data of one setting and its gold-task priors (cached per process).

    ``simulator`` (:data:`SIMULATORS`) chooses how a worker's report is generated; the
    worker types, sizes, subsets and gold tasks are the same for each.
    """
    from dataclasses import replace

    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    if simulator not in SIMULATORS:
        raise UsageError(f"unknown simulator {simulator!r}; expected one of "
                         f"{tuple(SIMULATORS)}")
    ss = np.random.SeedSequence([int(seed), SETTINGS.index(setting), 0x7])
    kw = {"n_items": n_items, "n_workers": n_workers, "tasks_per_worker": tasks_per_worker,
          "kmax": kmax, "setting": setting, "gold_per_worker": gold,
          "seed": int(ss.generate_state(1)[0])}
    if simulator == "story":
        sim = simulate("couple", **kw)
    elif simulator == "normalized":
        sim = simulate("couple-normalized", **kw)
    else:
        # "fixed": one ground-truth order of all items; each task's true order is its
        # restriction (no PL draw). Scores λ ~ N(0, 1) are drawn from their own stream and
        # scaled so far apart that the Gumbel draw of the simulator never reorders them.
        lam = np.random.default_rng(ss.spawn(1)[0]).normal(0.0, 1.0, n_items)
        sim = replace(simulate("couple", lam=lam * FIXED_SCALE, **kw), lam=lam)
    priors = Priors.from_gold(sim.gold, max(sim.rankings.K, 2), true_order=sim.gold_true_order)
    return sim, priors


def fig7_job(spec: dict) -> dict:
    """One setting, one sample order: the accuracy curve of every online method."""
    sc = spec["scale"]
    sim, priors = synthetic(spec["setting"], spec["seed"], sc["n_items"], sc["n_workers"],
                            sc["tasks_per_worker"], sc["kmax"], spec.get("gold", 10),
                            spec.get("simulator", "story"))
    data = sim.rankings
    perm = np.random.default_rng(order_seed(spec["seed"], spec["repeat"])).permutation(
        data.n_rankings)
    out = {"accuracy": {}, "seconds": {}, "n_rankings": int(data.n_rankings)}
    for m in spec["methods"]:
        accs, _, secs = online_curve(data, m, priors, perm, sim.lam, spec["fractions"], None)
        out["accuracy"][m] = accs
        out["seconds"][m] = secs
    return out


def nuts_synthetic_job(spec: dict) -> dict:
    """NUTS and the online methods on one setting at :data:`NUTS_SCALE` (one order)."""
    sc = spec["scale"]
    sim, priors = synthetic(spec["setting"], spec["seed"], sc["n_items"], sc["n_workers"],
                            sc["tasks_per_worker"], sc["kmax"], spec.get("gold", 10),
                            spec.get("simulator", "story"))
    data = sim.rankings
    out = {"accuracy": {}, "gate": {}, "seconds": {}}
    for m in ONLINE:
        post = online_fit(data, m, priors, order_seed(spec["seed"], 0))
        out["accuracy"][m] = accuracy(sim.lam, post.mu)
    for m in ("couple", "crowdbt"):
        lam, gate, secs = _nuts_mean(data, m, priors, spec)
        out["accuracy"][f"nuts-{m}"] = accuracy(sim.lam, lam)
        out["gate"][f"nuts-{m}"] = gate
        out["seconds"][f"nuts-{m}"] = secs
    return out


def _nuts_mean(data, model, priors, spec):
    from crowdrank.inference.nuts import fit_nuts

    t = time.perf_counter()
    res = fit_nuts(data, model, priors, chains=spec["chains"], tune=spec["tune"],
                   draws=spec["draws"], seed=spec["seed"], progress=False, pointwise=False)
    lam = np.asarray(res.idata["posterior"]["lambda"].values).mean(axis=(0, 1))
    g = res.gate
    gate = {"trusted": bool(g.trusted), "verdict": g.verdict(), "rhat_max": _f(g.rhat_max),
            "ess_bulk_min": _f(g.ess_bulk_min), "divergences": int(g.divergences)}
    return lam, gate, time.perf_counter() - t


def _f(x):
    x = float(x)
    return x if np.isfinite(x) else None


def summarise_fig7(specs, results, nuts_results=None) -> dict:
    fr = list(specs[0]["fractions"])
    methods = list(specs[0]["methods"])
    settings = []
    for st in SETTINGS:
        rows = [r for s, r in zip(specs, results) if s["setting"] == st]
        if not rows:
            continue
        curves = {}
        for m in methods:
            a = 100 * np.array([r["accuracy"][m] for r in rows])       # (R, F), percent
            curves[m] = {"mean": a.mean(axis=0).tolist(),
                         "sd": (a.std(axis=0, ddof=1) if len(a) > 1 else 0 * a[0]).tolist(),
                         "seconds_mean": float(np.mean([r["seconds"][m] for r in rows]))}
        cm = np.array(curves["couple"]["mean"]) if "couple" in curves else None
        best = None
        stable = None
        if cm is not None:
            others = [np.array(curves[m]["mean"]) for m in methods if m != "couple"]
            best = {"at_100": bool(all(cm[-1] >= o[-1] for o in others)),
                    "at_every_fraction": bool(all(np.all(cm >= o) for o in others)),
                    "margin_at_100": float(cm[-1] - max(o[-1] for o in others))
                    if others else None,
                    "best_baseline_at_100": max((m for m in methods if m != "couple"),
                                                key=lambda m: curves[m]["mean"][-1])
                    if others else None}
            within = np.abs(cm - cm[-1]) <= STABLE_POINTS
            first = next((fr[i] for i in range(len(fr)) if within[i:].all()), None)
            i20 = fr.index(0.2) if 0.2 in fr else 0
            stable = {"first_fraction_within": first, "points": STABLE_POINTS,
                      "max_dev_from_20pct": float(np.max(np.abs(cm[i20:] - cm[-1])))}
        settings.append({"setting": st, "repeats": len(rows), "curves": curves,
                         "couple_best": best, "couple_stable": stable,
                         "n_rankings": rows[0]["n_rankings"]})
    out = {"fractions": fr, "methods": methods, "settings": settings,
           "scale": specs[0]["scale"], "claims": {
               "couple_best_everywhere": all(s["couple_best"]["at_100"] for s in settings
                                             if s["couple_best"]),
               "couple_stable_from_20pct": all(
                   s["couple_stable"]["first_fraction_within"] is not None
                   and s["couple_stable"]["first_fraction_within"] <= 0.2
                   for s in settings if s["couple_stable"])}}
    if nuts_results:
        out["nuts"] = nuts_results
    return out


# ------------------------------------------------------------------ real data
def real_data(name: str, opts: dict, remove: Sequence[str] = (), duplicate: int = 1):
    """A shared set (:func:`crowdrank.models.io.load_dataset`) without the ``remove`` workers' rankings,
    its rankings repeated ``duplicate`` times ([Pan18], Sect. 5.3-5.4: duplicated "to
    reduce the adverse effects of other random factors"), and its truth."""
    data, truth = _load(name, tuple(sorted(opts.items())))
    if remove:
        drop = {data.workers.index(w) for w in remove if w in data.workers}
        data = data.subset(np.flatnonzero(~np.isin(data.worker, list(drop))))
    if duplicate > 1:
        data = data.subset(np.tile(np.arange(data.n_rankings), int(duplicate)))
    return data, truth


@functools.lru_cache(maxsize=8)
def _load(name, opts):
    from crowdrank.models.io import load_dataset
    return load_dataset(name, **dict(opts))


def real_priors(data):
    """[Pan18], Sect. 5.1 for real data: COUPLE geometric ``a0 = 10, a = 6``; CrowdBT
    ``Beta(5, 1)`` for every worker; PeerGrader's default Gamma (mean 1)."""
    from crowdrank.models.priors import Priors
    return Priors.geometric(data.workers, max(data.K, 2), a0=10.0, a=6.0).with_crowdbt_beta(5, 1)


def real_online_job(spec: dict) -> dict:
    """Orders ``spec["orders"]`` of every online method on one (cleaned, duplicated) set:
    the accuracy per order and the sum over orders of each worker's quality."""
    from crowdrank.validation.compare import comparison_components

    data, truth = real_data(spec["dataset"], spec["opts"], spec["remove"], spec["duplicate"])
    priors = real_priors(data)
    comps = comparison_components(data)
    out = {"accuracy": {}, "worker_sum": {}, "seconds": {}, "workers": list(data.workers),
           "n_rankings": int(data.n_rankings)}
    for m in ONLINE:
        accs, qsum, secs = [], None, 0.0
        for r in range(*spec["orders"]):
            t = time.perf_counter()
            post = online_fit(data, m, priors, order_seed(spec["seed"], r))
            secs += time.perf_counter() - t
            accs.append(accuracy(truth, post.mu, comps))
            q = worker_quality(post)
            if q is not None:
                qsum = q if qsum is None else qsum + q
        out["accuracy"][m] = accs
        out["seconds"][m] = secs
        if qsum is not None:
            out["worker_sum"][m] = qsum.tolist()
    return out


def real_peergrader_job(spec: dict) -> dict:
    """PeerGrader's MAP on the same data (order-free: one fit)."""
    from crowdrank.inference.peergrader import fit_peergrader
    from crowdrank.validation.compare import comparison_components

    data, truth = real_data(spec["dataset"], spec["opts"], spec["remove"], spec["duplicate"])
    fit = fit_peergrader(data, real_priors(data))
    return {"accuracy": accuracy(truth, fit.lam, comparison_components(data)),
            "eta": fit.eta.tolist(), "workers": list(data.workers), "passes": fit.passes,
            "converged": fit.converged, "seconds": fit.seconds}


def real_nuts_job(spec: dict) -> dict:
    """COUPLE and CrowdBT by NUTS on the unduplicated set (its real posterior)."""
    from crowdrank.validation.compare import comparison_components

    data, truth = real_data(spec["dataset"], spec["opts"], spec["remove"], 1)
    priors = real_priors(data)
    comps = comparison_components(data)
    out = {"accuracy": {}, "gate": {}, "seconds": {}}
    for m in ("couple", "crowdbt"):
        lam, gate, secs = _nuts_mean(data, m, priors, spec)
        out["accuracy"][f"nuts-{m}"] = accuracy(truth, lam, comps)
        out["gate"][f"nuts-{m}"] = gate
        out["seconds"][f"nuts-{m}"] = secs
    return out


def real_job(spec: dict) -> dict:
    """Dispatch on ``spec["kind"]`` (one module-level function for the grid)."""
    return {"online": real_online_job, "peergrader": real_peergrader_job,
            "nuts": real_nuts_job, "fig7": fig7_job, "fig7-nuts": nuts_synthetic_job,
            "cost": cost_job}[spec["kind"]](spec)


def lowest_workers(workers, values, k: int = 6) -> list[str]:
    from crowdrank.validation.compare import lowest
    return lowest(values, list(workers), k)


def summarise_real(variant_specs, variant_results, pg, nuts=None) -> dict:
    """Accuracy table (mean ± sd over orders, %) and worker qualities of one variant."""
    rows = {}
    n_orders = 0
    workers = variant_results[0]["workers"]
    qual = {}
    for m in ONLINE:
        accs = np.concatenate([r["accuracy"][m] for r in variant_results]) * 100
        n_orders = len(accs)
        rows[m] = {"mean": float(np.mean(accs)),
                   "sd": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                   "n": len(accs),
                   "seconds_per_order": float(sum(r["seconds"][m] for r in variant_results)
                                              / max(1, len(accs)))}
        if m in variant_results[0]["worker_sum"]:
            s = np.sum([r["worker_sum"][m] for r in variant_results], axis=0)
            qual[m] = (s / len(accs)).tolist()
    if pg is not None:
        rows["peergrader"] = {"mean": 100 * pg["accuracy"], "sd": 0.0, "n": 1,
                              "note": "batch MAP: order-free, one fit",
                              "passes": pg["passes"], "converged": pg["converged"]}
        qual["peergrader"] = pg["eta"]
    if nuts is not None:
        for m, a in nuts["accuracy"].items():
            rows[m] = {"mean": 100 * a, "sd": 0.0, "n": 1, "gate": nuts["gate"][m],
                       "note": "unduplicated data"}
    return {"accuracy": rows, "orders": n_orders, "workers": workers, "quality": qual,
            "n_rankings": variant_results[0]["n_rankings"],
            "lowest": {m: lowest_workers(workers, q) for m, q in qual.items()}}


# ------------------------------------------------------------------ cost
def cost_job(spec: dict) -> dict:
    """Seconds of one pass of every online method over the set (after a warm-up that
    compiles the kernels), and PeerGrader's one pass and full MAP."""
    from crowdrank.inference.peergrader import fit_peergrader, one_pass_seconds

    if spec["data"] == "babyface":
        data, _ = real_data("babyface", {}, (), spec["duplicate"])
        priors = real_priors(data)
    else:
        sc = spec["scale"]
        sim, priors = synthetic(spec["data"], spec["seed"], sc["n_items"], sc["n_workers"],
                                sc["tasks_per_worker"], sc["kmax"])
        data = sim.rankings
    small = data.subset(np.arange(min(200, data.n_rankings)))
    out = {"n_rankings": int(data.n_rankings), "k_counts": {str(k): int(v) for k, v in
                                                              data.k_counts().items()},
           "seconds": {}, "repeats": spec["repeats"]}
    out["wall_seconds"], out["cpu_seconds"] = {}, {}
    for m in ONLINE:
        online_fit(small, m, priors)                              # compile / warm up
        ts, walls, cpus = [], [], []
        for r in range(spec["repeats"]):
            t, c = time.perf_counter(), time.thread_time()
            post = online_fit(data, m, priors, order_seed(spec["seed"], r))
            walls.append(time.perf_counter() - t)
            # CPU time of this thread (the pass is single-threaded): fairer than wall time on
            # a loaded machine, and blind to other threads of the process (a test runner's,
            # a thread pool's), which over a pass of milliseconds can outweigh the pass
            cpus.append(time.thread_time() - c)
            ts.append(post.seconds)      # the update loop alone (no setup, no rank-breaking)
        out["seconds"][m] = ts
        out["wall_seconds"][m] = walls
        out["cpu_seconds"][m] = cpus
    if spec.get("peergrader", True):
        out["peergrader_pass"] = one_pass_seconds(data, priors)
        fit = fit_peergrader(data, priors)
        out["peergrader_map"] = {"seconds": fit.seconds, "passes": fit.passes}
    return out


def summarise_cost(results: dict) -> dict:
    out = {}
    for name, r in results.items():
        n = r["n_rankings"]
        per = {m: {"mean_us_per_ranking": 1e6 * float(np.mean(r["seconds"][m])) / n,
                   "sd_us_per_ranking": 1e6 * float(np.std(r["seconds"][m], ddof=1)
                                                    if len(r["seconds"][m]) > 1 else 0.0) / n,
                   # the best of the repeats: the least disturbed by other load on the box
                   "min_us_per_ranking": 1e6 * float(np.min(r["seconds"][m])) / n,
                   "wall_us_per_ranking": 1e6 * float(np.min(r["wall_seconds"][m])) / n,
                   "cpu_us_per_ranking": 1e6 * float(np.min(r["cpu_seconds"][m])) / n,
                   "seconds_per_pass": float(np.mean(r["seconds"][m]))} for m in ONLINE}
        ratio = {f"{a}:pl": per[a]["min_us_per_ranking"] / per["pl"]["min_us_per_ranking"]
                 for a in ("couple", "crowdbt", "bt")}
        ratio.update({f"{a}:pl (cpu, whole pass)": per[a]["cpu_us_per_ranking"]
                      / per["pl"]["cpu_us_per_ranking"] for a in ("couple", "crowdbt", "bt")})
        out[name] = {"n_rankings": r["n_rankings"], "k_counts": r["k_counts"], "per": per,
                     "ratio_to_pl": ratio, "repeats": r["repeats"]}
        if "peergrader_pass" in r:
            out[name]["peergrader"] = {
                "one_pass_us_per_ranking": 1e6 * r["peergrader_pass"] / r["n_rankings"],
                "map_seconds": r["peergrader_map"]["seconds"],
                "map_passes": r["peergrader_map"]["passes"]}
    return out


# ------------------------------------------------------------------ the driver
def run_experiment(name: str, out: str | Path, *, repeats: int = 5, seed: int = 0,
                   scheduler=None, processes: int | None = None, nuts: bool = False,
                   progress: bool = True, scale: dict | None = None,
                   duplicate: int | None = None, simulator: str = "story",
                   nuts_scale: dict | None = None,
                   nuts_settings: Sequence[str] = SETTINGS) -> dict:
    """Run experiment ``name`` (cached under ``out/cache``) and return its summary.

    ``scale`` overrides the synthetic sizes (default the paper's, ``PAPER_SCALE``);
    ``duplicate`` the real-data duplication (default the paper's 5 for BabyFace, else 1);
    ``simulator`` how fig7's reports are generated (:data:`SIMULATORS`); ``nuts_scale``
    the synthetic sizes of the NUTS reference (default :data:`NUTS_SCALE`) and
    ``nuts_settings`` the settings it is run on (default all four).
    """
    from crowdrank.models.simulate import PAPER_SCALE
    from crowdrank.validation.runtime.grid import run_grid

    if name not in EXPERIMENTS:
        raise UsageError(f"unknown experiment {name!r}; expected one of {EXPERIMENTS}")
    if repeats < 1:
        raise UsageError("--repeats must be >= 1")
    cache = Path(out) / "cache"
    scale = dict(PAPER_SCALE if scale is None else scale)
    t0 = time.perf_counter()

    def grid(specs):
        return run_grid(specs, real_job, cache, processes=processes, progress=progress,
                        scheduler=scheduler).results

    summary = {"experiment": name, "repeats": repeats, "seed": seed, "paper": PAPER,
               "not_runnable": NOT_RUNNABLE,
               "machine": machine(), "scheduler": None if scheduler is None else
               str(scheduler) if isinstance(scheduler, str) else "client"}
    if simulator not in SIMULATORS:
        raise UsageError(f"unknown simulator {simulator!r}; expected one of "
                         f"{tuple(SIMULATORS)}")
    if name == "fig7":
        # the default simulator is left out of the specs: caches of earlier runs stay valid
        sim = {} if simulator == "story" else {"simulator": simulator}
        specs = [{"kind": "fig7", "setting": st, "repeat": r, "seed": seed, "scale": scale,
                  "methods": list(ONLINE), "fractions": list(FRACTIONS), "gold": 10, **sim}
                 for st in SETTINGS for r in range(repeats)]
        res = grid(specs)
        nres = None
        if nuts:
            nsc = dict(NUTS_SCALE if nuts_scale is None else nuts_scale)
            nspecs = [dict({"kind": "fig7-nuts", "setting": st, "seed": seed,
                            "scale": nsc, "gold": 10, **sim}, **NUTS_SETTINGS)
                      for st in SETTINGS if st in nuts_settings]
            nres = {s["setting"]: r for s, r in zip(nspecs, grid(nspecs))}
            nres = {"scale": nsc, "sampler": NUTS_SETTINGS, "settings": nres}
        summary.update(summarise_fig7(specs, res, nres))
        summary["simulator"] = {"name": simulator, "description": SIMULATORS[simulator]}
    elif name == "cost":
        dup = 5 if duplicate is None else duplicate
        # "v": the layout of a cost result (thread CPU times since v3): an older cache is not reused
        specs = [{"kind": "cost", "data": "babyface", "duplicate": dup, "seed": seed,
                  "repeats": repeats, "v": 3},
                 {"kind": "cost", "data": "amateur", "scale": scale, "seed": seed,
                  "repeats": max(1, min(repeats, 5)), "peergrader": True, "v": 3}]
        # timings: one at a time whatever the executor (parallel runs share the cores)
        res = run_grid(specs, real_job, cache, processes=1, progress=progress,
                       scheduler=scheduler)
        summary["cost"] = summarise_cost({"babyface": res.results[0],
                                          "synthetic": res.results[1]})
        summary["scale"] = scale
        summary["duplicate"] = dup
    else:
        summary.update(_run_real(name, grid, repeats, seed, nuts, duplicate))
    summary["seconds_total"] = time.perf_counter() - t0
    return summary


def _real_specs(ds, opts, remove, dup, repeats, seed):
    base = {"dataset": ds, "opts": dict(opts), "remove": sorted(remove), "duplicate": dup,
            "seed": seed}
    online = [dict(base, kind="online", orders=[a, min(a + CHUNK, repeats)])
              for a in range(0, repeats, CHUNK)]
    return online, dict(base, kind="peergrader")


def _run_real(name, grid, repeats, seed, nuts, duplicate) -> dict:
    cfg = REAL[name]
    dup = cfg["duplicate"] if duplicate is None else duplicate
    sets = []
    for ds, opts in cfg["datasets"]:
        online, pg = _real_specs(ds, opts, (), dup, repeats, seed)
        res = grid(online + [pg])
        nres = None
        if nuts:
            nres = grid([dict({"kind": "nuts", "dataset": ds, "opts": dict(opts),
                               "remove": [], "seed": seed}, **NUTS_SETTINGS)])[0]
        full = summarise_real(online, res[:-1], res[-1], nres)
        entry = {"dataset": ds, "duplicate": dup, "full": full, "cleaned": []}
        if cfg["cleaned"]:
            seen = {}
            for det in ("couple", "crowdbt", "peergrader"):
                six = tuple(sorted(full["lowest"][det]))
                seen.setdefault(six, []).append(det)
            for six, dets in seen.items():
                on2, pg2 = _real_specs(ds, opts, six, dup, repeats, seed)
                r2 = grid(on2 + [pg2])
                n2 = None
                if nuts:       # the exact posteriors of the cleaned data as well
                    n2 = grid([dict({"kind": "nuts", "dataset": ds, "opts": dict(opts),
                                     "remove": list(six), "seed": seed}, **NUTS_SETTINGS)])[0]
                entry["cleaned"].append({"detected_by": dets, "removed": list(six),
                                         **summarise_real(on2, r2[:-1], r2[-1], n2)})
            lows = [set(full["lowest"][d]) for d in ("couple", "crowdbt", "peergrader")]
            entry["same_six"] = all(x == lows[0] for x in lows)
            entry["overlap"] = {f"{a}&{b}": len(set(full["lowest"][a]) & set(full["lowest"][b]))
                                for a, b in (("couple", "crowdbt"), ("couple", "peergrader"),
                                             ("crowdbt", "peergrader"))}
        sets.append(entry)
    return {"sets": sets, "priors": "COUPLE geometric a0=10, a=6; CrowdBT Beta(5, 1) for "
            "every worker; PeerGrader Gamma(10, 10) (mean 1) [Pan18, Sect. 5.1]",
            "chunk": CHUNK}
