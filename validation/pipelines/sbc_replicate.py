"""One SBC replicate, and batches of them: the grid's jobs of
:func:`crowdrank.validation.pipelines.sbc.run_sbc`.

A replicate draws the truth from the prior, simulates data by the model's exact generative
process, fits it (NUTS in either PPL, the collapsed Gibbs sampler, or the prior as the
machinery check) and the approximation beside it, and returns the ranks of the truth among
the thinned posterior draws and the approximation's PITs (the study's method is in
:mod:`crowdrank.validation.pipelines.sbc`). Every random choice derives from
``(seed, sim)``, so a batched replicate (:func:`sbc_batch_job`) is the replicate run alone
(:func:`sbc_job`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from crowdrank.models.registry import get
from crowdrank.validation.pipelines.sbc_ranks import (
    _jsonable,
    draw_truth,
    flatten_params,
    make_priors,
    online_pit,
    parameter_names,
    sbc_ranks,
    thin_draws,
)

#: The Gibbs sampler's sweeps per replicate, ``(warmup, draws)`` per chain (2 chains).
GIBBS_WARMUP_DRAWS = (300, 1000)


def _seeds(seed: int, sim: int) -> tuple[np.random.Generator, int, np.random.Generator]:
    """Independent streams for (truth and data, the sampler, rank tie-breaks) of one
    replicate, all derived from ``(seed, sim)``."""
    ss = np.random.SeedSequence([int(seed), int(sim), 0x5BC])
    a, b, c = ss.spawn(3)
    return (np.random.default_rng(a), int(b.generate_state(1)[0] % (2**31 - 1)),
            np.random.default_rng(c))


# ----------------------------------------------------------------------------- one replicate
def _prepare(spec: dict) -> dict:
    """Truth, data and the random streams of one replicate (everything before the fit)."""
    from crowdrank.models.simulate import simulate

    model = spec["model"]
    rng_data, nuts_seed, rng_ties = _seeds(spec["seed"], spec["sim"])
    priors = make_priors(spec)
    L = int(spec["n_items"])
    mspec = get(model)            # the replicate's name, looked up once
    lam, eta = draw_truth(mspec, priors, L, rng_data)
    K = mspec.prior_K(int(spec["kmax"])) or 2
    names, fams = parameter_names(mspec, L, int(spec["n_workers"]), K)
    eta_true = None if not mspec.has_eta else (eta[:, 0] if mspec.eta_scalar else eta)
    prep = {"spec": spec, "model": model, "mspec": mspec, "priors": priors, "lam": lam,
            "eta": eta, "eta_true": eta_true, "truth": flatten_params(mspec, lam, eta_true),
            "names": names, "families": fams, "nuts_seed": nuts_seed, "rng_ties": rng_ties,
            "data": None}
    if spec["backend"] != "prior":
        sim = simulate(model, n_items=L, n_workers=int(spec["n_workers"]),
                       tasks_per_worker=int(spec["tasks_per_worker"]),
                       kmax=int(spec["kmax"]), lam=lam, eta=eta, seed=rng_data)
        data = sim.rankings
        if mspec.prior_K(data.K) not in (None, K):      # a Dirichlet as long as the data
            raise ValueError(f"replicate {spec['sim']}: no ranking of length kmax={K} was "
                             f"drawn, so the fitted η would have a different prior; use more "
                             f"tasks")
        prep["data"] = data
    return prep


def _posterior_flat(prep: dict, lam_post: np.ndarray, eta_post) -> np.ndarray:
    """``S`` thinned draws (chain, draw, ...) as rows of the flat parameter vector."""
    S = int(prep["spec"]["n_ranks"])
    lam_draws = thin_draws(np.asarray(lam_post, float), S)
    eta_thin = (None if prep["eta_true"] is None or eta_post is None
                else thin_draws(np.asarray(eta_post, float), S))
    return flatten_params(prep["mspec"], lam_draws, eta_thin)


def _finish(prep: dict, flat: np.ndarray, gate: dict, timings: dict) -> dict:
    """Ranks (with the test hook's shift) and the online method's PIT of one replicate."""
    spec, model, truth = prep["spec"], prep["model"], prep["truth"]
    lam, priors, data = prep["lam"], prep["priors"], prep["data"]
    out = {"sim": int(spec["sim"]), "params": prep["names"], "families": prep["families"],
           "truth": truth.tolist(), "timings": timings}
    shift = float(spec.get("shift_sd", 0.0))
    if shift:
        # test hook: a posterior that is wrong by `shift` sds on every raw λ (Talts Fig. 4)
        L = lam.size
        sd = flat[:, :L].std(axis=0)
        flat[:, :L] += shift * sd
    ranks = sbc_ranks(flat, truth, prep["rng_ties"])
    out.update(rank=ranks.tolist(), n_draws=int(flat.shape[0]), gate=_jsonable(gate))

    if spec.get("online", True) and prep["mspec"].online is not None:
        from crowdrank.inference.online.api import algorithm_options
        from crowdrank.inference.online.state import OnlinePosterior
        from crowdrank.validation.pipelines.sbc_approx import fit as fit_approx

        omodel = prep["mspec"].online
        t = time.perf_counter()
        if data is None:   # the oracle: the online state given no data is the prior state
            on = OnlinePosterior.from_priors(
                omodel, [f"i{r}" for r in range(lam.size)], priors,
                workers=list(priors.workers), K=priors.K,
                options=algorithm_options(omodel, priors=priors))
        else:       # the approximation of the method registry (validation.pipelines.sbc_approx)
            on = fit_approx(model, spec.get("approx", "online"), data, priors,
                            prep["nuts_seed"])
        out["timings"]["online"] = time.perf_counter() - t
        out["online_pit"] = online_pit(prep["mspec"], on, truth).tolist()
        clamped = getattr(on, "clamped", None) or on.diagnostics.get("clamped") or {}
        out["online_clamped"] = {k: int(v) for k, v in clamped.items()}
    return out


def sbc_job(spec: dict) -> dict:
    """One SBC replicate: prior draw → exact simulation → NUTS (or the prior oracle) and the
    online fit → ranks and PITs. A module-level function so that :func:`run_grid` can run it
    in worker processes. Returns a JSON-able dict."""
    t0, c0 = time.perf_counter(), time.process_time()
    prep = _prepare(spec)
    model, mspec, priors, data = prep["model"], prep["mspec"], prep["priors"], prep["data"]
    timings: dict = {}
    S = int(spec["n_ranks"])
    if spec["backend"] == "prior":
        # The exact posterior given no data is the prior: draw S times from it.
        draws = []
        for _ in range(S):
            lam_s, eta_s = draw_truth(mspec, priors, prep["lam"].size, prep["rng_ties"])
            draws.append(flatten_params(mspec, lam_s, None if prep["eta_true"] is None else
                                        (eta_s[:, 0] if mspec.eta_scalar else eta_s)))
        flat = np.array(draws)
        gate = {"trusted": True, "reasons": [], "divergences": 0, "ess_bulk_min": math.nan}
    elif spec["backend"] == "gibbs":
        from crowdrank.inference.gibbs import fit_gibbs

        t = time.perf_counter()
        warm, n = GIBBS_WARMUP_DRAWS
        res = fit_gibbs(data, model, priors, chains=2, warmup=warm, draws=n,
                        seed=prep["nuts_seed"], processes=1)
        timings["gibbs"] = time.perf_counter() - t
        post = res.idata["posterior"]
        flat = _posterior_flat(prep, post["lambda"].values,
                               post["eta"].values if "eta" in post else None)
        gate = res.gate.to_dict()
    elif spec.get("pymc_reuse"):
        t = time.perf_counter()
        post, gate, detail = _fit_pymc_reused(prep, spec)
        timings["nuts"] = time.perf_counter() - t
        timings["nuts_detail"] = detail
        flat = _posterior_flat(prep, post["lambda"], post.get("eta"))
    else:
        from crowdrank.inference.nuts import fit_nuts

        t = time.perf_counter()
        # one XLA program for all chains: no thread contention when replicates run in
        # parallel processes, and much less per-step overhead than sequential chains
        # PyMC: chains in this process (replicates are the parallel unit; a pool of chain
        # processes per replicate would only add start-up time)
        kw = {"chain_method": "vectorized" if spec["backend"] == "numpyro" else "sequential"}
        try:
            res = fit_nuts(data, model, priors, backend=spec["backend"],
                           chains=int(spec["chains"]), tune=int(spec["tune"]),
                           draws=int(spec["draws"]),
                           target_accept=float(spec["target_accept"]),
                           seed=prep["nuts_seed"], progress=False, pointwise=False,
                           predictive=False, simplex=spec.get("simplex", "gamma"), **kw)
        finally:
            if spec["backend"] == "numpyro":
                # Every fit compiles new XLA programs (the model closes over its data) and
                # each keeps ~2,000 memory mappings alive; a process that runs replicates
                # one after another hits the kernel's limit (vm.max_map_count = 65,530)
                # after ~30 of them, and LLVM then fails ("Cannot allocate memory") and
                # the process segfaults. Nothing compiled is reused, so drop it all.
                import jax

                jax.clear_caches()
        timings["nuts"] = time.perf_counter() - t
        timings["nuts_detail"] = {k: float(v) for k, v in res.timings.items()
                                  if isinstance(v, (int, float))}
        post = res.idata["posterior"]
        flat = _posterior_flat(prep, post["lambda"].values,
                               post["eta"].values if "eta" in post else None)
        gate = res.gate.to_dict()
    out = _finish(prep, flat, gate, timings)
    out["timings"]["total"] = time.perf_counter() - t0
    # CPU seconds of this process (all threads): on a shared machine this, not the wall
    # time, says what a replicate costs on an idle core
    out["timings"]["cpu"] = time.process_time() - c0
    return out


def _fit_pymc_reused(prep: dict, spec: dict) -> tuple[dict, dict, dict]:
    """PyMC's NUTS on this process's compiled model of the replicate's layout
    (:func:`crowdrank.inference.nuts.pymc_reuse.reused_nuts`; compiled on the first replicate of each layout
    only): the posterior draws, the gate (:func:`crowdrank.inference.gate.check`, as
    :func:`crowdrank.inference.nuts.fit_nuts` applies it) and the timings."""
    from arviz_base import from_dict

    from crowdrank.inference.gate import check
    from crowdrank.inference.nuts.pymc_reuse import reused_nuts
    from crowdrank.models.model_inputs import model_inputs

    t0 = time.perf_counter()
    inputs = model_inputs(prep["mspec"], prep["data"], prep["priors"])
    sampler, cached = reused_nuts(inputs, simplex=spec.get("simplex", "gamma"))
    post, stats, tim = sampler.fit(inputs, chains=int(spec["chains"]), tune=int(spec["tune"]),
                                   draws=int(spec["draws"]),
                                   target_accept=float(spec["target_accept"]),
                                   seed=prep["nuts_seed"])
    t = time.perf_counter()
    gate = check(from_dict({"posterior": post, "sample_stats": {
        "diverging": stats["diverging"], "energy": stats["energy"]}}))
    detail = {k: float(v) for k, v in tim.items()}
    # the compilation is paid by the first replicate of a layout in each process
    detail["compile"] = 0.0 if cached else sampler.compile_s
    detail["gate"] = time.perf_counter() - t
    detail["total"] = time.perf_counter() - t0
    return post, gate.to_dict(), detail


def batch_specs(specs: Sequence[dict], size: int) -> list[dict]:
    """Group replicate specs into batches of ``size`` consecutive replicates (by ``sim``):
    the unit of :func:`sbc_batch_job` and of the cache. Growing ``--sims`` reuses every
    full batch; a partial last batch is recomputed with its new members."""
    specs = sorted(specs, key=lambda s: s["sim"])
    return [{"kind": "sbc-batch", "members": list(specs[i:i + size])}
            for i in range(0, len(specs), size)]


def sbc_batch_job(bspec: dict, lane_groups: int = 1) -> dict:
    """A batch of NumPyro replicates fitted in one vmapped program
    (:func:`crowdrank.inference.nuts.batched.fit_nuts_batched`); each replicate's truth, data, seeds, ranks
    and online PIT are exactly those of :func:`sbc_job`. ``lane_groups`` regroups the
    batch's lanes by difficulty between chunks (the draws do not change, so it is not part
    of the cache key). Returns ``{"members": [...]}``."""
    from crowdrank.inference.nuts.batched import fit_nuts_batched

    t0, c0 = time.perf_counter(), time.process_time()
    members = bspec["members"]
    preps = [_prepare(s) for s in members]
    s0 = members[0]
    res = fit_nuts_batched([p["data"] for p in preps], s0["model"], preps[0]["priors"],
                           seeds=[p["nuts_seed"] for p in preps], chains=int(s0["chains"]),
                           tune=int(s0["tune"]), draws=int(s0["draws"]),
                           target_accept=float(s0["target_accept"]),
                           warmup_max_tree_depth=s0.get("warmup_depth"),
                           lane_groups=int(lane_groups), simplex=s0.get("simplex", "gamma"))
    R = len(preps)
    t_nuts, c_nuts = time.perf_counter() - t0, time.process_time() - c0
    outs = []
    for prep, r in zip(preps, res):
        t = time.perf_counter()
        flat = _posterior_flat(prep, r["posterior"]["lambda"], r["posterior"].get("eta"))
        bt = r["timings"]
        timings = {"nuts": t_nuts / R, "batched": R,
                   "nuts_detail": {"batch_" + k: float(v) for k, v in bt.items()
                                   if isinstance(v, (int, float))}}
        out = _finish(prep, flat, r["gate"].to_dict(), timings)
        # the batch's time and CPU shared equally among its replicates
        out["timings"]["total"] = t_nuts / R + (time.perf_counter() - t)
        out["timings"]["cpu"] = c_nuts / R + (time.perf_counter() - t)
        outs.append(out)
    return {"members": outs}
