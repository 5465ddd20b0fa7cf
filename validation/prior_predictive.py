"""Prior predictive checks: what rankings do the inference priors imply?

Before any data is seen, a prior over item scores and worker quality already says what a
crowd reports. Each *draw* here takes a fresh ``λ ~ N(mu0, sigma0²)`` and a fresh worker
quality from the prior each worker gets in inference (``η_w ~ Dir(α_w)`` for COUPLE,
``η_w¹ ~ Beta(a_w, b_w)`` for CrowdBT, perfect workers for PL/BT), then generates a data
set with the model's own simulator (:func:`crowdrank.models.simulate.simulate`: PL true orders by the
Gumbel trick, the worker's stagewise slips, or normalised COUPLE's exact sampler), and
summarises it with the statistics of :mod:`crowdrank.validation.predictive_stats` against the true
order of every task and against the order by λ.

The named priors (:func:`named_prior`) are those a user can give ``crowdrank fit``:

- ``geometric``: the paper's profile ``α_w = a0 · (a⁻¹, …, a⁻ᴷ)``, ``a0 = 10, a = 6``
  ([Pan18], Sect. 5.3): tiny concentrations (``α = (1.67, 0.28, 0.046, 0.0077)`` for
  ``K = 4``), so each drawn ``η_w`` sits near a corner of the simplex — most workers are
  nearly perfect, but a few are nearly always wrong in the same way;
- ``flat``: ``Dir(1, …, 1)``, every uncertainty vector equally likely (``E[η¹] = 1/K``:
  the prior expects a random worker);
- ``gold``: ``α_w = 1 + counts`` from gold tasks with a known true order ([Pan18],
  Sect. 5.1, :meth:`crowdrank.models.priors.Priors.from_gold`), here simulated for a crowd of the
  paper's four worker types, so each worker's prior concentrates near what that worker did.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors
from crowdrank.models.registry import get, names
from crowdrank.models.simulate import WORKER_TYPES, simulate
from crowdrank.validation.predictive_stats import order_by_scores, summarise

PRIOR_KINDS = ("geometric", "flat", "gold")


def named_prior(kind: str, model: str, n_workers: int, K: int, *, a0: float = 10.0,
                a: float = 6.0, gold_tasks: int = 20, mu0: float = 0.0, sigma0: float = 1.0,
                seed: int = 0) -> Priors:
    """One of :data:`PRIOR_KINDS` for workers ``w0 … w{W-1}`` and rankings of up to ``K``
    items. ``gold`` simulates ``gold_tasks`` gold tasks per worker with ``model``'s own
    simulator, the workers cycling through the paper's types (expert, amateur, spammer,
    malicious), and counts the stage offsets (``α``) and rank-broken pairs (CrowdBT's
    ``(a, b)``) of their reports against the known true order."""
    workers = [f"w{w}" for w in range(n_workers)]
    if kind == "geometric":
        return Priors.geometric(workers, K, a0=a0, a=a, mu0=mu0, sigma0=sigma0)
    if kind == "flat":
        return Priors(tuple(workers), np.ones((n_workers, K)), mu0, sigma0, "flat:Dir(1,…,1)")
    if kind == "gold":
        if get(model).normalized and K > 6:
            raise UsageError("normalised COUPLE's exact sampler enumerates k! orderings: "
                             "k <= 6")
        if gold_tasks < 1:
            raise UsageError("a gold prior needs at least one gold task per worker")
        types = list(WORKER_TYPES)
        settings = [types[w % len(types)] for w in range(n_workers)]
        # the simulator needs at least one ordinary task; only the gold tasks are used
        sim = simulate(model, n_items=max(2 * K, 10), n_workers=n_workers, tasks_per_worker=1,
                       kmin=K, kmax=K, setting=settings, gold_per_worker=gold_tasks,
                       mu0=mu0, sigma0=sigma0, seed=seed)
        p = Priors.from_gold(sim.gold, K, true_order=sim.gold_true_order, mu0=mu0,
                             sigma0=sigma0)
        return Priors(p.workers, p.alpha, mu0, sigma0,
                      f"gold:{gold_tasks} tasks per worker, types cycling", p.ab)
    raise UsageError(f"unknown prior {kind!r}; expected one of {PRIOR_KINDS}")


def draw_eta(rng: np.random.Generator, model: str, priors: Priors, K: int) -> np.ndarray:
    """One uncertainty vector per worker from its prior, as the simulator's ``eta`` (``(W,
    K)``): ``Dir(α_w)`` for COUPLE; ``(p, 1 − p)`` with ``p ~ Beta(a_w, b_w)`` for CrowdBT;
    ``e₁`` for PL and BT, whose workers are perfect."""
    W = len(priors.workers)
    eta = np.zeros((W, K))
    family = get(model).worker_prior
    if family is None:
        eta[:, 0] = 1.0
        return eta
    # NumPy's own draw of the family (Dirichlet rows, a Beta accuracy) in the simulator's layout
    eta = family.simulator_eta(family.draw_numpy(rng, family.table(priors, K)), K)
    # a Dirichlet draw with tiny concentrations can underflow to exact zeros; the simulator
    # and every likelihood need η > 0 (same guard as the simulator's own draws)
    eta = np.maximum(eta, 1e-300)
    return eta / eta.sum(axis=1, keepdims=True)


def prior_predictive(model: str, priors: Priors, *, n_draws: int = 100, n_items: int = 30,
                     tasks_per_worker: int = 30, k: int | None = None, seed: int = 0,
                     progress: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draw ``n_draws`` data sets from the prior predictive of ``model`` under ``priors``.

    Every draw has ``len(priors.workers)`` workers with ``tasks_per_worker`` tasks of ``k``
    items (default 2 for pairwise models, else ``priors.K``). Returns two tables:

    - per draw and worker: ``eta1`` (the drawn ``η_w¹``), ``first_choice_true`` /
      ``pair_agreement_true`` (against each task's true order) and ``first_choice_lambda``
      / ``pair_agreement_lambda`` (against the order by the drawn λ);
    - per draw: ``first_choice``, ``pair_agreement``, ``tau_mean`` and ``stage{i}`` rates
      against the true order, and ``first_choice_lambda``, ``pair_agreement_lambda``.
    """
    if model not in names():
        raise UsageError(f"unknown model {model!r}; expected one of {names()}")
    pairwise = get(model).pairwise
    k = (2 if pairwise else priors.K) if k is None else int(k)
    if pairwise and k != 2:
        raise UsageError(f"{model} is a pairwise model: k must be 2")
    if not 2 <= k <= priors.K:
        raise UsageError(f"k must be between 2 and the prior's length {priors.K}, got {k}")
    if get(model).normalized and k > 6:
        raise UsageError("normalised COUPLE's exact sampler enumerates k! orderings: k <= 6")
    if k > n_items:
        raise UsageError(f"k = {k} exceeds the number of items {n_items}")
    if n_draws < 1 or tasks_per_worker < 1:
        raise UsageError("need at least one draw and one task per worker")
    W = len(priors.workers)
    rng = np.random.default_rng(seed)
    worker_rows, draw_rows = [], []
    from tqdm.auto import tqdm

    for d in tqdm(range(n_draws), disable=not progress, desc=f"prior predictive {model}"):
        eta = draw_eta(rng, model, priors, k)
        sim = simulate(model, n_items=n_items, n_workers=W, tasks_per_worker=tasks_per_worker,
                       kmin=k, kmax=k, mu0=priors.mu0, sigma0=priors.sigma0, eta=eta,
                       seed=rng)
        data = sim.rankings
        s_true = summarise(data, sim.true_order)
        s_lam = summarise(data, order_by_scores(data, sim.lam))
        for w in range(W):
            worker_rows.append({
                "draw": d, "worker": priors.workers[w], "eta1": float(eta[w, 0]),
                "first_choice_true": s_true["worker_first_choice"][w],
                "pair_agreement_true": s_true["worker_pair_agreement"][w],
                "first_choice_lambda": s_lam["worker_first_choice"][w],
                "pair_agreement_lambda": s_lam["worker_pair_agreement"][w]})
        row = {"draw": d, "first_choice": s_true["first_choice"],
               "pair_agreement": s_true["pair_agreement"], "tau_mean": s_true["tau_mean"],
               "first_choice_lambda": s_lam["first_choice"],
               "pair_agreement_lambda": s_lam["pair_agreement"]}
        row.update({f"stage{i + 1}": v for i, v in enumerate(s_true["stage_rate"])})
        draw_rows.append(row)
    return pd.DataFrame(worker_rows), pd.DataFrame(draw_rows)


def summary(workers: pd.DataFrame, draws: pd.DataFrame, k: int) -> dict:
    """The numbers a reader compares across priors: means over draws and workers, the
    spread of per-worker first-choice accuracy, and the share of workers who are *worse
    than random* at the first choice (accuracy below ``1/k``), which is where the paper's
    tiny concentrations show."""
    fc = workers["first_choice_true"].to_numpy()
    q = np.quantile(fc, [0.05, 0.25, 0.5, 0.75, 0.95])
    out = {
        "k": int(k), "draws": len(draws),
        "workers_per_draw": len(workers) // max(len(draws), 1),
        "eta1_mean": float(workers["eta1"].mean()),
        "first_choice_mean": float(fc.mean()), "first_choice_sd": float(fc.std()),
        "first_choice_quantiles": {f"{p:g}": float(v) for p, v in
                                   zip((0.05, 0.25, 0.5, 0.75, 0.95), q)},
        "worse_than_random": float(np.mean(fc < 1.0 / k)),
        "pair_agreement_mean": float(draws["pair_agreement"].mean()),
        "first_choice_lambda_mean": float(draws["first_choice_lambda"].mean()),
        "pair_agreement_lambda_mean": float(draws["pair_agreement_lambda"].mean()),
        "tau_mean": float(draws["tau_mean"].mean()),
        "stage_rates": [float(draws[c].mean()) for c in draws.columns if c.startswith("stage")],
    }
    return out
