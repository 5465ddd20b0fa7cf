"""What an audit's NUTS run will cost, and how many draws the gate needs (docs/design.md,
"Sizing the reference run").

Two questions are answered before the audit samples:

* **How many draws?** The gate (:mod:`crowdrank.inference.gate`) takes the *largest*
  rank-normalised split R-hat over every scalar parameter and the *smallest* bulk and tail
  ESS. :func:`draws_for_gate` is the fewest draws per chain with which independent (iid)
  chains pass it with probability :data:`PASS_PROB` for ``P`` parameters, from the
  F distribution of the between/within variance ratio (:func:`rhat_exceed_prob`, checked
  against simulated iid chains in tests/test_budget.py). Real NUTS chains are
  autocorrelated, so this is the floor of the run; the audit extends sampling in rounds
  (``NutsConfig.max_draws``) until the gate passes or the budget ends.
* **How long?** :func:`time_gradient` compiles the model's potential and gradient once and
  times a few calls on the data (:func:`crowdrank.inference.nuts.gradient_timing`);
  :func:`estimate_seconds` multiplies by the leapfrog steps of the run under a stated
  tree depth (:data:`ASSUMED_LEAPFROGS`, calibrated in docs/design.md).
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

from crowdrank.inference.gate import ESS_MIN, RHAT_MAX

#: The probability with which iid chains of :func:`draws_for_gate`'s length pass the gate.
PASS_PROB = 0.95
#: Leapfrog steps (gradients) per NUTS iteration assumed by the estimate: a tree of depth 5
#: (2^5 - 1 = 31 steps). Why a fixed depth rather than a measured warm-up: a warm-up long
#: enough to settle the step size costs a compile of the sampler and minutes on a large
#: data set, which is what the estimate is meant to avoid; the depth the adapted sampler
#: reaches on this suite's models is 4–5 (docs/design.md, "Sizing the reference run",
#: with the calibration run).
ASSUMED_LEAPFROGS = 31
#: Warm-up iterations take more steps than draws (early step sizes are small): measured
#: 1.47× (COUPLE) and 1.41× (BT) the sampling phase's steps per iteration.
WARMUP_STEP_FACTOR = 1.45
#: The sampler's own work per leapfrog step beside the gradient (tree building, the
#: chains' share of the CPUs), in ms: the COUPLE calibration run's sampling phase took
#: 1.03 ms per step per chain against a 0.36 ms gradient (docs/design.md).
STEP_OVERHEAD_MS = 0.7
#: Draws of the iid rule are rounded up to a multiple of this.
DRAWS_STEP = 50
#: Smallest ratio of (tail) ESS to draws among up to 20,000 iid parameters at 400 draws in
#: total (its 0.1 % quantile was 0.48): total draws of at least ESS_MIN / 0.45 keep the
#: minimum ESS of a few parameters above the gate's 400.
ESS_RATIO_FLOOR = 0.45


def rhat_exceed_prob(n_split: int, n_split_chains: int, rhat_max: float = RHAT_MAX) -> float:
    """P(one split R-hat >= ``rhat_max``) for iid normal draws.

    With ``M`` split chains of ``n`` draws, ``R̂² = (n-1)/n + F/n`` where ``F = B/W`` (the
    between- over the within-chain variance, ``B = n·var(chain means)``) is
    ``F(M-1, M(n-1))`` distributed for iid normal draws (the one-way ANOVA ratio under
    equal means; R-hat as in [Vehtari21]). So
    ``R̂ >= r`` exactly when ``F >= n r² - (n-1)``."""
    from scipy import stats

    n, m = int(n_split), int(n_split_chains)
    return float(stats.f.sf(n * rhat_max ** 2 - (n - 1), m - 1, m * (n - 1)))


def gate_pass_prob(draws: int, n_params: int, chains: int = 4,
                   rhat_max: float = RHAT_MAX) -> float:
    """P(max R-hat < ``rhat_max``) over ``n_params`` iid parameters.

    The rank-normalised R-hat of ArviZ is the larger of the bulk R-hat (of the
    rank-normalised draws) and the folded one (of ``|x - median|``); the two are nearly
    independent for a symmetric marginal, so each parameter contributes two statistics,
    each exceeding with :func:`rhat_exceed_prob` (tests/test_budget.py compares the
    per-parameter rate with simulated chains)."""
    p = rhat_exceed_prob(draws // 2, 2 * chains, rhat_max)
    return float((1.0 - p) ** (2 * max(int(n_params), 1)))


def draws_for_gate(n_params: int, chains: int = 4, prob: float = PASS_PROB) -> int:
    """Fewest draws per chain (a multiple of :data:`DRAWS_STEP`) with which iid chains
    pass the gate's R-hat with probability ``prob`` over ``n_params`` parameters, and
    whose total keeps the minimum ESS at the gate (:data:`ESS_RATIO_FLOOR`)."""
    if chains < 2:
        raise ValueError("the gate's split R-hat needs at least 2 chains")
    floor = math.ceil(ESS_MIN / ESS_RATIO_FLOOR / chains)
    d = max(DRAWS_STEP, math.ceil(floor / DRAWS_STEP) * DRAWS_STEP)
    while gate_pass_prob(d, n_params, chains) < prob:
        d += DRAWS_STEP
    return d


# ====================================================================== cost
def time_gradient(data, model: str, priors, reps: int = 5) -> dict:
    """Compile the NumPyro potential and its gradient once on ``data`` and time ``reps``
    calls (``{"compile": s, "gradient_ms": ms}``), at the sampler's default coordinates."""
    from crowdrank.inference.nuts import NutsConfig, gradient_timing, route_for
    from crowdrank.models.model_inputs import model_inputs

    cfg = NutsConfig()
    inputs = model_inputs(model, data, priors)
    return gradient_timing(inputs, reps=reps, param=route_for(cfg).param(cfg))


def parallel_chains(chains: int, cpus: int | None = None) -> int:
    """Chains that run at once: one XLA CPU device per chain, at most one per CPU."""
    return max(1, min(int(chains), int(cpus or os.cpu_count() or 1)))


def estimate_seconds(gradient_ms: float, chains: int, tune: int, draws: int, *,
                     leapfrogs: float = ASSUMED_LEAPFROGS, cpus: int | None = None,
                     warmup_factor: float = WARMUP_STEP_FACTOR,
                     overhead_ms: float = STEP_OVERHEAD_MS) -> float:
    """Wall seconds of ``chains × (tune + draws)`` NUTS iterations: ``leapfrogs`` steps
    per draw (``warmup_factor`` times as many per warm-up iteration), each costing the
    gradient plus ``overhead_ms``, the chains in waves of :func:`parallel_chains`."""
    waves = math.ceil(chains / parallel_chains(chains, cpus))
    steps = leapfrogs * (warmup_factor * tune + draws)
    return (gradient_ms + overhead_ms) / 1e3 * steps * waves


@dataclass
class Plan:
    """One model's NUTS run as planned before sampling (``metrics.json``: ``budget``)."""

    model: str
    n_params: int
    gradient_ms: float
    gradient_compile_s: float
    chains: int
    tune: int
    draws: int
    draws_rule: int
    max_draws: int | None
    estimate_minutes: float
    budget_minutes: float | None
    leapfrogs_assumed: float = ASSUMED_LEAPFROGS
    within_budget: bool = True

    def line(self) -> str:
        b = ("" if self.budget_minutes is None else
             f" (budget {self.budget_minutes:g} min: "
             f"{'within' if self.within_budget else 'OVER'})")
        ext = "" if not self.max_draws else f", extended up to {self.max_draws} draws"
        return (f"{self.model}: estimated NUTS wall time {self.estimate_minutes:.1f} min{b}"
                f" — (gradient {self.gradient_ms:.3g} ms + {STEP_OVERHEAD_MS:g} ms) × "
                f"{self.leapfrogs_assumed:g} leapfrogs/draw (assumed; "
                f"{WARMUP_STEP_FACTOR:g}× in warm-up) × {self.chains} chains × "
                f"({self.tune} + {self.draws}) iterations{ext}; {self.n_params} parameters need "
                f"{self.draws_rule} iid draws per chain for the gate")

    def to_dict(self) -> dict:
        return asdict(self)


def plan_model(data, model: str, priors, *, chains: int, tune: int, draws: int,
               n_params: int, budget_minutes: float | None, max_draws: int | None = None,
               extend: int = 4, cpus: int | None = None, gradient: dict | None = None
               ) -> Plan:
    """Time the gradient (or take ``gradient``) and plan the run: the estimate of
    ``tune + draws`` iterations, and ``max_draws`` (given, else ``extend × draws``) cut to
    what the rest of the budget affords, in whole rounds of ``draws``."""
    g = gradient or time_gradient(data, model, priors)
    est = estimate_seconds(g["gradient_ms"], chains, tune, draws, cpus=cpus)
    per_round = estimate_seconds(g["gradient_ms"], chains, 0, draws, cpus=cpus)
    cap = max_draws if max_draws is not None else extend * draws
    if budget_minutes is not None and per_round > 0:
        rounds = int((budget_minutes * 60 - est) // per_round)
        cap = min(cap, draws * (1 + max(rounds, 0)))
    return Plan(model=model, n_params=int(n_params), gradient_ms=float(g["gradient_ms"]),
                gradient_compile_s=float(g.get("compile", math.nan)), chains=chains,
                tune=tune, draws=draws, draws_rule=draws_for_gate(n_params, chains),
                max_draws=cap if cap > draws else None, estimate_minutes=est / 60,
                budget_minutes=budget_minutes,
                within_budget=budget_minutes is None or est <= budget_minutes * 60)


def stop_reason(gate, kept_draws: int, draws: int, max_draws: int | None) -> str:
    """Why the rounds of sampling ended (``metrics.json``: ``budget.models.M.stopped``)."""
    rounds = max(1, kept_draws // max(draws, 1))
    if gate.trusted:
        return f"gate passed after {rounds} round(s) of {draws} draws"
    if any("diverg" in r or "BFMI" in r for r in gate.reasons):
        return "gate failed for a reason more draws cannot fix: " + "; ".join(gate.reasons)
    if max_draws and kept_draws >= max_draws:
        return (f"budget ended: {kept_draws} draws per chain (max_draws) and the gate "
                "still fails: " + "; ".join(gate.reasons))
    return "gate failed (no extension allowed): " + "; ".join(gate.reasons)


# ====================================================================== the audit's use
# The audit's own helpers come in as arguments (``n_params``, ``approx_rows``): this
# module sits below crowdrank.validation.pipelines.audit, which calls it.
def plan_audit(subject, cfg, priors, log, n_params, specs: dict | None = None) -> dict:
    """Every audited model's :class:`Plan` under ``cfg.max_nuts_minutes`` (each model's
    gradient timed on the subject's data; ``n_params(data, specs)`` counts the gate's
    parameters), logged. ``specs``: the models' specs by name (else looked up here)."""
    from crowdrank.models.registry import as_spec

    plans = {}
    for m in cfg.models:
        spec = specs[m] if specs else as_spec(m)
        pri = spec.worker_priors(priors, subject.data)
        plans[m] = plan_model(subject.data, m, pri, chains=cfg.chains, tune=cfg.tune,
                              draws=cfg.draws, n_params=n_params(subject.data, (spec,)),
                              budget_minutes=cfg.max_nuts_minutes, max_draws=cfg.max_draws)
        log(plans[m].line())
    return plans


def subsample(subject, n: int, seed: int):
    """The subject on ``n`` seeded rankings drawn without replacement (truth kept: the
    item and worker universe is the same); its description says so."""
    from dataclasses import replace

    import numpy as np

    data = subject.data
    if n < 1:
        raise ValueError("--nuts-subsample must be >= 1")
    if n >= data.n_rankings:
        return subject
    idx = np.sort(np.random.default_rng([int(seed), 0xB0D6]).choice(data.n_rankings, n,
                                                                    replace=False))
    return replace(subject, data=data.subset(idx),
                   description=f"{subject.description} — NUTS on a seeded subsample of {n} "
                               f"of {data.n_rankings} rankings (seed {seed})")


def refuse(subject, cfg, plans: dict, log, approx_rows) -> dict:
    """The verdict an over-budget audit can give without NUTS: every approximation fitted
    on the full data with its PSIS k̂ (the approximation's own diagnostic; no comparison
    with NUTS), ``approx_rows(model) -> (rows, seconds)``. The content of
    ``metrics.json``."""
    over = [p for p in plans.values() if not p.within_budget]
    log("NUTS skipped: " + "; ".join(f"{p.model} estimated {p.estimate_minutes:.1f} min > "
                                      f"{p.budget_minutes:g} min" for p in over)
        + " (--max-nuts-minutes; --nuts-subsample N runs NUTS on N rankings)")
    models = {}
    for m in cfg.models:
        rows, secs = approx_rows(m)
        for r in rows:
            log(f"{m}: {r['variant'].get('method', 'online')} PSIS k̂ "
                f"{r.get('psis_khat', float('nan'))} ({r.get('psis_label', 'no density')})")
        models[m] = {"gate": None, "nuts": "skipped (over budget)", "variants": rows,
                     "timings": {"online": secs}}
    return {"subject": subject.description, "data": subject.data.summary(),
            "config": cfg.to_dict(), "models": models,
            "budget": budget_dict(plans, "refused")}


def budget_dict(plans: dict, verdict: str, stopped: dict | None = None,
                subsample_n: int | None = None) -> dict:
    """``metrics.json``'s ``budget`` entry (docs/contracts.md)."""
    return {"verdict": verdict, "nuts_subsample": subsample_n,
            "models": {m: {**p.to_dict(), **({"stopped": stopped[m]}
                                             if stopped and m in stopped else {})}
                       for m, p in plans.items()}}


def apply_budget(subject, cfg, priors, log, *, n_params, approx_rows,
                 specs: dict | None = None):
    """Plan the NUTS runs: ``(plans, subject, refusal)``; over budget, NUTS runs on
    ``cfg.nuts_subsample`` rankings when asked (re-planned on them) and otherwise
    ``refusal`` is the approximations-only ``metrics.json`` (:func:`refuse`;
    ``approx_rows(subject, model)``). ``specs``: the models' specs by name."""
    plans = plan_audit(subject, cfg, priors, log, n_params, specs)
    if all(p.within_budget for p in plans.values()):
        return plans, subject, None
    if cfg.nuts_subsample:
        part = subsample(subject, cfg.nuts_subsample, cfg.seed)
        log(f"over budget: auditing on {part.data.n_rankings} rankings "
            f"(--nuts-subsample, seed {cfg.seed})")
        plans = plan_audit(part, cfg, priors, log, n_params, specs)
        if all(p.within_budget for p in plans.values()):
            return plans, part, None
    # the approximations' verdict on the whole data
    return plans, subject, refuse(subject, cfg, plans, log,
                                  lambda m: approx_rows(subject, m))


def shared_max_draws(plans: dict) -> int | None:
    """One extension cap for every model (the Dask tasks share one config): the smallest
    planned, none when any model's budget affords no round; the plans record it."""
    caps = [p.max_draws for p in plans.values()]
    cap = None if any(c is None for c in caps) else min(caps)
    for p in plans.values():
        p.max_draws = cap
    return cap


def after_sampling(plans: dict, audits, draws: int, log, subsample_n: int | None) -> dict:
    """``metrics.json``'s ``budget`` once NUTS ran: how each model's rounds ended."""
    stopped = {a.model: stop_reason(a.nuts.gate, int(a.nuts.idata.attrs.get("draws", draws)),
                                    draws, plans[a.model].max_draws) for a in audits}
    for m, why in stopped.items():
        log(f"{m}: {why}")
    return budget_dict(plans, "within budget", stopped, subsample_n)
