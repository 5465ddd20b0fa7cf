"""The companion checks of posterior SBC: what its ranks cannot see (docs/sbc.md).

A fit ``q`` equal to the prior passes posterior SBC exactly (``θ′`` from the prior, a refit
that ignores ``y′`` is the prior again), whatever the data say. Two checks on the fit to
the data catch it:

- **contraction** [Schad21]: per parameter, ``c = 1 − Var_q(θ) / Var_prior(θ)`` and the
  shift of the mean in prior sds, ``d = |E_q θ − E_prior θ| / sd_prior``; a group whose
  median movement ``max(|c|, d)`` is below :data:`MIN_CONTRACTION` has not moved from the
  prior, so its ranks say nothing about how the data were used. The magnitude, not ``c``
  alone: an exact posterior can be *wider* than its prior where weak data conflict with it
  (``c < 0``: the collapsed Gibbs sampler's η on small stagewise-COUPLE data from amateur
  workers reads ``c ≈ −1`` under the geometric prior, its η split between a good and an
  adversarial worker), and that fit has moved as surely as one that contracted.
- **the fit's own predictive check on the data** [Gelman96]: for draws ``θ_s ~ q``, the
  discrepancy ``T(y, θ) = log p(y | θ)`` of the data against that of data ``y_s^rep`` the
  model generates at ``θ_s`` on the same tasks; ``p = P(T(y^rep, θ) ≤ T(y, θ))``. A fit
  whose draws do not explain the data (the prior, a fit stuck elsewhere) has ``p ≈ 0``;
  flagged below :data:`MIN_PREDICTIVE_P`. The model's own misfit also lowers ``p``: read
  it beside the reference's value where there is one.
"""

from __future__ import annotations

import numpy as np

from crowdrank.models.registry import as_spec

#: A group whose median movement (``|contraction|`` or the mean's shift in prior sds) is
#: below this has not moved from the prior (Monte Carlo error of the variance ratio with
#: :data:`VAR_DRAWS` draws is ~3 %, of the shift ~0.02).
MIN_CONTRACTION = 0.05
#: The predictive check flags a fit whose ``p`` is below this.
MIN_PREDICTIVE_P = 0.01
#: Draws of the fit and of the prior each variance is estimated from.
VAR_DRAWS = 4000


def prior_posterior(model: str, data, priors):
    """The prior as a :class:`~crowdrank.inference.posterior.Posterior` with marginals
    (``λ_r ~ N(μ₀, σ₀²)`` independent, the workers' prior table): what a fit that ignores
    the data returns."""
    from crowdrank.inference.posterior import Posterior

    spec = as_spec(model)
    L = data.n_items
    alpha, workers = None, ()
    if spec.worker_prior is not None:
        pri = priors.for_data(data, K=spec.prior_K(data.K))
        alpha = np.asarray(spec.worker_prior.table(spec.worker_priors(pri, data), data.K),
                           float)
        workers = data.workers
    return Posterior.from_marginals(model, "prior", items=data.items,
                                    mu=np.full(L, float(priors.mu0)),
                                    sigma2=np.full(L, float(priors.sigma0) ** 2),
                                    workers=workers, alpha=alpha)


def moments(model: str, post, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Each flattened parameter's mean and variance under ``post`` (:data:`VAR_DRAWS`
    draws)."""
    from crowdrank.validation.pipelines.posterior_sbc_draws import draws_of
    from crowdrank.validation.pipelines.sbc_ranks import flatten_params

    lam, eta = draws_of(post, VAR_DRAWS, seed)
    flat = flatten_params(model, lam, eta)
    return flat.mean(axis=0), flat.var(axis=0)


def contraction(base, data, priors, model: str, columns, families, seed: int = 0) -> dict:
    """Per group: the median and the range of ``1 − Var_q / Var_prior`` over the flattened
    parameters ``columns`` (their ``families``), the median shift of the mean in prior sds,
    and whether the group moved from the prior (module docstring)."""
    idx = list(columns)
    mq, vq = (a[idx] for a in moments(model, base, seed))
    mp, vp = (a[idx] for a in moments(model, prior_posterior(model, data, priors), seed + 1))
    ok = vp > 0
    c = 1.0 - vq / np.where(ok, vp, np.nan)
    d = np.abs(mq - mp) / np.sqrt(np.where(ok, vp, np.nan))
    out = {}
    for f in dict.fromkeys(families):
        sel = np.array([g == f for g in families])
        fin = np.isfinite(c[sel]) & np.isfinite(d[sel])
        cf, df = c[sel][fin], d[sel][fin]
        med = float(np.median(cf)) if cf.size else float("nan")
        move = float(np.median(np.maximum(np.abs(cf), df))) if cf.size else float("nan")
        out[f] = {"median": med, "min": float(cf.min()) if cf.size else None,
                  "max": float(cf.max()) if cf.size else None,
                  "shift_median": float(np.median(df)) if cf.size else float("nan"),
                  "movement_median": move, "moved": bool(move >= MIN_CONTRACTION)}
    return out


def stacked_loglik(model: str, data, priors, orders: np.ndarray, lam: np.ndarray,
                   eta: np.ndarray | None) -> np.ndarray:
    """``log p(y_s | θ_s)`` for ``S`` data sets on ``data``'s tasks at once: ``orders``
    ``(S, N, K)``, ``lam`` ``(S, L)``, ``eta`` ``(S, W, ...)``. The ``S`` sets are put side
    by side as one set on ``S`` disjoint copies of the items and workers (copy ``s`` reads
    ``θ_s``), so one call of the model's likelihood scores them all."""
    import dataclasses

    from crowdrank.models.data import Rankings
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.numpyro.program import pointwise_loglik

    S, N, K = orders.shape
    L, W = data.n_items, data.n_workers
    shift = (np.arange(S) * L)[:, None, None]
    order = np.where(orders >= 0, orders + shift, -1).reshape(S * N, K)
    worker = (np.asarray(data.worker)[None, :] + (np.arange(S) * W)[:, None]).ravel()
    big = Rankings(items=[f"{r}" for r in range(S * L)],
                   workers=[f"{w}" for w in range(S * W)], order=order.T,
                   lengths=np.tile(np.asarray(data.lengths), S), worker=worker,
                   source="<stacked replicates>")
    spec = as_spec(model)
    pri = priors
    if spec.has_eta:            # the same prior row for every copy of a worker
        pri = priors.for_data(data, K=spec.prior_K(data.K))
        tile = (lambda a: None if a is None else np.tile(a, (S, 1)))
        pri = dataclasses.replace(pri, workers=big.workers, alpha=tile(pri.alpha),
                                  ab=tile(pri.ab), gamma=tile(pri.gamma))
    inputs = model_inputs(model, big, pri)
    e = None if eta is None else np.asarray(eta).reshape((S * W,) + np.shape(eta)[2:])
    ll = np.asarray(pointwise_loglik(inputs, np.asarray(lam, float).ravel(), e), np.float64)
    return ll.reshape(S, N).sum(axis=1)


#: Data sets scored per call of :func:`stacked_loglik` (memory: about this many times N
#: rankings at once).
STACK_RANKINGS = 2_000_000


def predictive_check(base, data, priors, model: str, draws: int, seed: int = 0) -> dict:
    """The fit's posterior predictive p-value of the log-likelihood discrepancy (module
    docstring), over ``draws`` draws of ``base``."""
    from crowdrank.models.simulate import redraw_orders
    from crowdrank.validation.pipelines.posterior_sbc_draws import draws_of, log_eta_rows

    rng = np.random.default_rng([seed, 0x9c])
    lam, eta = draws_of(base, draws, int(rng.integers(2**31)))
    tasks = np.asarray(data.order).T
    t_obs, t_rep = np.empty(draws), np.empty(draws)
    step = max(1, STACK_RANKINGS // max(data.n_rankings, 1))
    for a in range(0, draws, step):
        b = min(draws, a + step)
        e = None if eta is None else eta[a:b]
        reps = np.stack([redraw_orders(model, tasks, data.worker, lam[s],
                                       log_eta_rows(model, None if eta is None else eta[s]),
                                       seed=rng) for s in range(a, b)])
        t_obs[a:b] = stacked_loglik(model, data, priors, np.broadcast_to(tasks, reps.shape),
                                    lam[a:b], e)
        t_rep[a:b] = stacked_loglik(model, data, priors, reps, lam[a:b], e)
    p = float(np.mean(t_rep <= t_obs))
    # with few draws the smallest p above 0 is 1/draws: a p of 0 is flagged at any number
    return {"p": p, "draws": int(draws), "T_obs_mean": float(t_obs.mean()),
            "T_rep_mean": float(t_rep.mean()),
            "ok": bool(p >= MIN_PREDICTIVE_P and p > 0.0)}


#: The fewest draws the predictive check uses on large data (one data set of ``N``
#: rankings is simulated and scored per draw).
MIN_PREDICTIVE_DRAWS = 40


def predictive_draws(asked: int, n_rankings: int) -> int:
    """``asked`` draws, fewer on large data: about :data:`STACK_RANKINGS` rankings scored in
    all, but never fewer than :data:`MIN_PREDICTIVE_DRAWS` (a fit whose draws do not explain
    the data has ``p = 0`` at any number)."""
    return int(min(asked, max(MIN_PREDICTIVE_DRAWS, STACK_RANKINGS // max(n_rankings, 1))))


def companion_checks(base, data, priors, cfg, spec=None) -> dict:
    """Both checks, each with its ``flag`` (a sentence, or ``None``); ``spec``: the model's
    :class:`~crowdrank.models.registry.ModelSpec` when the caller has it (else
    ``cfg.model`` is looked up)."""
    from crowdrank.validation.pipelines.posterior_sbc_draws import checked_parameters

    spec = as_spec(cfg.model if spec is None else spec)
    _, fams, cols, _ = checked_parameters(spec, data, base)
    con = contraction(base, data, priors, spec, cols, fams, seed=cfg.seed)
    still = [f for f, v in con.items() if not v["moved"]]
    pred = predictive_check(base, data, priors, spec,
                            predictive_draws(cfg.predictive_draws, data.n_rankings), cfg.seed)
    return {
        "contraction": {"groups": con, "threshold": MIN_CONTRACTION,
                        "flag": (f"no movement from the prior in {', '.join(still)} "
                                 f"(median |contraction| and mean shift < {MIN_CONTRACTION}): "
                                 "posterior SBC cannot see whether the data were used"
                                 if still else None)},
        "predictive": {**pred, "threshold": MIN_PREDICTIVE_P,
                       "flag": None if pred["ok"] else
                       (f"the fit's draws do not reproduce the data (predictive p = "
                        f"{pred['p']:.3g} < {MIN_PREDICTIVE_P}: log p(y | θ) below that of "
                        "data the model generates at θ)")},
    }
