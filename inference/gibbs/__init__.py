"""The collapsed data-augmentation Gibbs sampler: a reference sampler built for these
models (docs/design.md, "The collapsed Gibbs sampler").

COUPLE [Pan18, Eq. 3], CrowdBT [Chen13] (its pair is COUPLE's two-candidate stage with
``η̄ = (η, 1 − η)``), PL and BT (the offsets fixed at 0) share one engine:
:mod:`~crowdrank.inference.gibbs.layout` lays the stages out by worker,
:mod:`~crowdrank.inference.gibbs.kernels` draws each conditional,
:mod:`~crowdrank.inference.gibbs.sampler` runs one chain as ``init``/``step``. This module
runs the chains (local processes, one per chain, or one Dask task per chain with
``scheduler``) and returns the draws in the NUTS layout behind the same gate as NUTS —
R-hat and ESS; a Gibbs sampler has no divergences or energy::

    from crowdrank.inference.gibbs import fit_gibbs
    res = fit_gibbs(data, "couple", priors, chains=2, warmup=500, draws=1000, seed=0)
    res.gate.verdict(), res.idata["posterior"]["eta"]
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from crowdrank.models.errors import UsageError
from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.registry import get as get_model

from ..gate import Gate, check
from .layout import Stages, empty_like, stages

#: The models the engine fits: their likelihood is COUPLE's stagewise mixture or one of its
#: special cases (a worker prior that is a Dirichlet or a Beta, or none).
GIBBS_MODELS = ("couple", "crowdbt", "pl", "bt")


@dataclass
class GibbsResult:
    """``idata``: a DataTree (``posterior`` with ``lambda`` and ``eta`` as NUTS writes
    them); ``gate``: R-hat and ESS; ``timings`` (seconds); ``chains``: each chain's
    acceptance rates, ``ρ`` and seconds per sweep."""

    idata: object
    gate: Gate
    timings: dict = field(default_factory=dict)
    chains: list = field(default_factory=list)


def _family(model: str) -> str | None:
    fam = get_model(model).worker_prior
    return None if fam is None else str(getattr(fam, "name", fam))


#: Each local chain process's sweep counter (a slot of a shared array, set by the pool's
#: initializer): the parent's bar reads their sum. ``None`` without a bar.
_SWEEPS = None
#: How often the parent redraws the bar from the counters (seconds).
_POLL_S = 0.2


def _init_counter(counter) -> None:
    global _SWEEPS
    _SWEEPS = counter


def _chain_job(job: dict, progress=None) -> dict:
    """One chain in a worker process (BLAS on one thread: a chain is one core's work).
    ``progress(n)`` is told each sweep done; in a pool process with a shared counter
    (:func:`_init_counter`) the chain's slot ``job["slot"]`` counts them instead."""
    from threadpoolctl import threadpool_limits

    from .sampler import run_chain

    if progress is None and _SWEEPS is not None and "slot" in job:
        counter, slot = _SWEEPS, int(job["slot"])

        def progress(n: int) -> None:
            counter[slot] += n

    with threadpool_limits(1):
        return run_chain(job["stages"], job["alpha"], job["mu0"], job["sigma0"],
                         warmup=job["warmup"], draws=job["draws"], thin=job["thin"],
                         seed=job["seed"], family=job["family"],
                         lambda_steps=job["lambda_steps"], walk_steps=job["walk_steps"],
                         jumps=job["jumps"], progress=progress)


def _sweeps(job: dict) -> int:
    return int(job["warmup"]) + int(job["draws"]) * int(job["thin"])


def _sweep_bar(jobs: list, progress: bool):
    """The bar over every chain's sweeps (warm-up and kept), as the NUTS bars count
    iterations."""
    from tqdm.auto import tqdm

    return tqdm(total=sum(_sweeps(j) for j in jobs), desc=f"gibbs x {len(jobs)} chains",
                unit="sweep", disable=not progress)


def _run_jobs(jobs: list, processes: int, scheduler: str | None, progress: bool) -> list:
    """The chains' results in order. Locally the bar moves per sweep (a shared counter per
    chain process, read every :data:`_POLL_S` s); on a Dask cluster per chain."""
    if scheduler:
        from distributed import Client, as_completed
        from tqdm.auto import tqdm

        with Client(scheduler) as client:
            futures = client.map(_chain_job, jobs, pure=False)
            for _ in tqdm(as_completed(futures), total=len(futures), desc="gibbs chains",
                          unit="chain", disable=not progress):
                pass
            return client.gather(futures)
    if processes <= 1 or len(jobs) == 1:
        with _sweep_bar(jobs, progress) as bar:
            return [_chain_job(j, bar.update if progress else None) for j in jobs]
    import sys
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
    from multiprocessing import get_context

    # fork is safe while no XLA runtime (threads of its own) lives in this process, and
    # spares a script the `if __name__ == "__main__"` guard that spawn needs
    ctx = get_context("spawn" if "jax" in sys.modules else "fork")
    # one int64 slot per chain, each written by its own chain only (no lock needed); passed
    # through the initializer, as shared memory must be, at the processes' start
    counter = ctx.Array("q", len(jobs), lock=False) if progress else None
    pool = {"initializer": _init_counter, "initargs": (counter,)} if progress else {}
    with ProcessPoolExecutor(min(processes, len(jobs)), mp_context=ctx, **pool) as ex:
        futures = [ex.submit(_chain_job, {**j, "slot": c}) for c, j in enumerate(jobs)]
        if progress:
            with _sweep_bar(jobs, progress) as bar:
                pending = futures
                while pending:
                    _, pending = wait(pending, timeout=_POLL_S,
                                      return_when=FIRST_EXCEPTION)
                    if any(f.done() and f.exception() is not None for f in futures):
                        break
                    bar.update(int(sum(counter)) - bar.n)
                bar.update(int(sum(counter)) - bar.n)
        return [f.result() for f in futures]


def fit_gibbs(data, model: str, priors, *, chains: int = 2, warmup: int = 500,
              draws: int = 1000, thin: int = 1, lambda_steps: int = 1,
              walk_steps: int = 10, jumps: int = 1, seed: int = 0,
              prior_only: bool = False,
              processes: int | None = None, scheduler: str | None = None,
              progress: bool = False, pointwise: bool = False,
              predictive: bool = False) -> GibbsResult:
    """Sample ``model`` on ``data`` under ``priors`` by collapsed Gibbs (module docstring).

    Parameters
    ----------
    data : Rankings
    model : {"couple", "crowdbt", "pl", "bt"}
    priors : Priors
        The priors every other method reads (``λ ~ N(mu0, sigma0²)``; COUPLE ``η_w ~
        Dir(α_w)``; CrowdBT ``η_w ~ Beta(a_w, b_w)``).
    chains, warmup, draws, thin : int
        Chains; adapted warm-up sweeps; kept draws per chain, one every ``thin`` sweeps.
    lambda_steps, walk_steps, jumps : int
        Scores' steps, worker walk steps and entry jumps per sweep
        (:mod:`~crowdrank.inference.gibbs.sampler`).
    seed : int
        Chain ``c`` is seeded by ``seed`` and ``c``.
    prior_only : bool
        Leave the data out (the sampler's draws of the prior: the exact-marginal check).
    processes : int, optional
        Chains run at once in local processes (default: the CPUs, at most ``chains``).
    scheduler : str, optional
        A Dask scheduler's address: one task per chain on its workers.
    progress : bool
        A progress bar over every chain's sweeps (warm-up included), moving per sweep;
        on a Dask cluster, per chain.
    pointwise, predictive : bool
        Add the groups ``log_likelihood`` (per ranking) and ``posterior_predictive`` (new
        orders of the same tasks at thinned draws), as ``fit_nuts`` does: the audit's
        PSIS-LOO and predictive checks read them.
    """
    if model not in GIBBS_MODELS:
        raise UsageError(f"the Gibbs sampler fits {', '.join(GIBBS_MODELS)}, not {model!r}")
    for name, v, lo in (("chains", chains, 1), ("warmup", warmup, 0), ("draws", draws, 1),
                        ("thin", thin, 1), ("lambda_steps", lambda_steps, 1),
                        ("walk_steps", walk_steps, 0), ("jumps", jumps, 0)):
        if int(v) < lo:
            raise UsageError(f"{name} must be >= {lo}, got {v}")
    t0 = time.perf_counter()
    inputs = model_inputs(model, data, priors)
    st: Stages = stages(inputs)
    if prior_only:
        st = empty_like(st)
    family = _family(model)
    base = np.random.SeedSequence(int(seed))
    child = [int(s.generate_state(1)[0]) for s in base.spawn(int(chains))]
    jobs = [{"stages": st, "alpha": inputs.alpha, "mu0": inputs.mu0,
             "sigma0": inputs.sigma0, "warmup": int(warmup), "draws": int(draws),
             "thin": int(thin), "seed": child[c], "family": family,
             "lambda_steps": int(lambda_steps), "walk_steps": int(walk_steps),
             "jumps": int(jumps)}
            for c in range(int(chains))]
    procs = processes if processes is not None else min(int(chains), os.cpu_count() or 1)
    t1 = time.perf_counter()
    outs = _run_jobs(jobs, int(procs), scheduler, progress)
    t2 = time.perf_counter()
    attrs = {"sampler": "gibbs", "method": "gibbs", "chains": int(chains),
             "warmup": int(warmup), "draws": int(draws), "thin": int(thin),
             "lambda_steps": int(lambda_steps), "walk_steps": int(walk_steps),
             "jumps": int(jumps), "seed": int(seed)}
    tree = full_tree(model, inputs, st, data, priors, outs, attrs, pointwise=pointwise,
                     predictive=predictive, seed=int(seed))
    gate = check(tree, hmc=False)
    tree.attrs.update(gate.to_attrs())
    chain_stats = [{k: (v if not isinstance(v, np.ndarray) else
                        [float(np.min(v)), float(np.median(v)), float(np.max(v))])
                    for k, v in o.items() if k not in ("lambda", "eta")} for o in outs]
    timings = {"setup": t1 - t0, "sampling": t2 - t1, "total": time.perf_counter() - t0,
               "sweep_ms": 1000 * float(np.mean([o["sweep_seconds"] for o in outs]))}
    return GibbsResult(tree, gate, timings, chain_stats)


def stage_rows(eta: np.ndarray | None, n_workers: int, K: int) -> np.ndarray:
    """Each worker's offset weights ``(W, K)`` for one draw: COUPLE's ``η`` rows, CrowdBT's
    ``(η, 1 − η)``, or ``(1, 0, …)`` (PL, BT: the reported item is the chosen one)."""
    if eta is None:
        rows = np.zeros((n_workers, K))
        rows[:, 0] = 1.0
        return rows
    if eta.ndim == 1:
        return np.stack([eta, 1.0 - eta], axis=1)
    return eta


def full_tree(model: str, inputs, st: Stages, data, priors, outs: list, attrs: dict, *,
              pointwise: bool, predictive: bool, seed: int):
    """The chains' draws as the DataTree ``fit_nuts`` writes (``posterior``,
    ``observed_data``; ``log_likelihood`` and ``posterior_predictive`` on request), with
    an empty ``sample_stats`` (a Gibbs sampler has no trajectories)."""
    from crowdrank.models.simulate import redraw_orders

    from ..nuts.datatree import thinned_draws, to_datatree
    from . import kernels as kn

    lam = np.stack([o["lambda"] for o in outs])
    post = {"lambda": lam}
    eta = None if outs[0]["eta"] is None else np.stack([o["eta"] for o in outs])
    if eta is not None:
        post["eta"] = eta
    C, D = lam.shape[:2]
    ll = pp = keep = None
    if pointwise:
        ll = np.empty((C, D, inputs.n_obs))
        for c in range(C):
            for d in range(D):
                rows = stage_rows(None if eta is None else eta[c, d], st.n_workers, st.K)
                ll[c, d] = kn.ranking_loglik(st.cand, st.m, st.worker, st.origin, lam[c, d],
                                             np.ascontiguousarray(rows, float), inputs.n_obs)
    if predictive:
        keep = thinned_draws(C, D)
        rng = np.random.default_rng([seed, 0x99])
        tasks = np.asarray(data.order.T)
        pp = np.stack([np.stack([
            redraw_orders(model, tasks, data.worker, lam[c, d],
                          None if eta is None else np.log(np.clip(
                              stage_rows(eta[c, d], st.n_workers, st.K), 1e-300, None)),
                          seed=rng) for d in keep]) for c in range(C)])
    stats = {"lp": np.zeros((C, D))}      # no trajectories: a placeholder group
    return to_datatree(inputs, data, priors, post, stats, ll, backend="gibbs",
                       extra_attrs=attrs, pp=pp, pp_draws=keep)
