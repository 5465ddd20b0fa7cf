"""The ``fit`` functions of :mod:`crowdrank.inference.methods`' entries.

Each is ``f(data, model, priors, options, *, seed=0, progress=False) -> Posterior``, with
``model`` a name or a spec (:meth:`Method.run <crowdrank.inference.methods.Method.run>`
hands the spec): it checks the options a user can get wrong (a :class:`UsageError` naming
the option), calls the method's own module through its public function (the spec to
those that take one; the name, :func:`~crowdrank.models.registry.name_of`, to those whose
modules look it up themselves), and wraps the result with the adapters of
:mod:`crowdrank.inference.posterior`. The method's defaults live in its
options dataclass only; a ``None`` option means "the library's own default" and is not
passed on.
"""

from __future__ import annotations

import os
from pathlib import Path

from crowdrank.models.errors import DataError, UsageError
from crowdrank.models.registry import as_spec, name_of

from .posterior import Posterior, from_batch, from_em, from_nuts, from_online
from .posterior_io import read_posterior


def _given(**kw) -> dict:
    """The keywords whose value is not ``None``."""
    return {k: v for k, v in kw.items() if v is not None}


# ====================================================================== NUTS
def fit_nuts_method(data, model, priors, options, *, seed=0, progress=False,
                    **nuts_kw) -> Posterior:
    """``fit_nuts`` with the entry's options; ``init_from`` (a fit's folder or file, or a
    posterior) warm-starts every chain at its own draw of it (``fit_nuts(approx=...)``).
    Every :class:`~crowdrank.inference.nuts.config.NutsConfig` field of the options goes
    across by name (:meth:`NutsOptions.config`); ``nuts_kw``: further ``fit_nuts`` keywords
    (the audit's ``chain_method``)."""
    from crowdrank.inference import nuts

    approx, init = options.init_from, None
    if isinstance(approx, str | Path):
        approx = read_posterior(approx)
    if approx is not None:
        approx, init = warm_start(approx, data, str(options.init_from), model)
    cfg = options.config(seed)       # every NutsConfig field, by keyword as fit_nuts takes them
    settings = {name: getattr(cfg, name) for name in cfg.fields()}
    result = nuts.fit_nuts(data, model, priors, approx=approx, init=init, progress=progress,
                           **{**settings, **nuts_kw})
    return from_nuts(result, model=model)


def warm_start(post: Posterior, data, source: str, model: str):
    """``(approx, init)`` for ``fit_nuts``: the posterior itself when it has finite item
    variances (each chain starts at its own draw of it), else a point start ``init`` at
    its means (``λ`` = ``mu``, ``η`` = the mean of each worker's factor, by the model's
    worker family). Every item and worker of ``data`` must be in it (a
    :class:`DataError` naming ``source`` otherwise)."""
    import numpy as np

    for what, have, want in (("item", post.items, data.items),
                             ("worker", post.workers if post.alpha is not None else None,
                              data.workers)):
        if have is None:
            continue
        missing = sorted(set(map(str, want)) - set(have))
        if missing:
            raise DataError(f"{len(missing)} {what}(s) of the data are not in the posterior, "
                            f"e.g. {missing[:5]}", source)
    if np.all(np.isfinite(post.sigma2)) and np.all(post.sigma2 > 0):
        return post, None
    init = {"lambda": np.asarray(post.mu, float)[[post.items.index(str(i))
                                                   for i in data.items]]}
    family = as_spec(model).worker_prior
    if post.alpha is not None and family is not None:
        rows = np.asarray(post.alpha, float)[[post.workers.index(str(w)) for w in data.workers]]
        try:
            init["eta"], _ = family.start_from_factor(rows, data.K)
        except ValueError as exc:
            raise DataError(str(exc), source) from None
    return None, init


# ====================================================================== Gibbs
def fit_gibbs_method(data, model, priors, options, *, seed=0, progress=False) -> Posterior:
    """The collapsed Gibbs sampler with the entry's options; the draws in the NUTS layout
    and its gate (R-hat and ESS) under ``diagnostics["gate"]``."""
    from crowdrank.inference.gibbs import fit_gibbs

    res = fit_gibbs(data, name_of(model), priors, chains=int(options.chains),
                    warmup=int(options.warmup), draws=int(options.draws),
                    thin=int(options.thin), lambda_steps=int(options.lambda_steps),
                    walk_steps=int(options.walk_steps), jumps=int(options.jumps),
                    seed=int(seed),
                    processes=options.processes, scheduler=options.scheduler,
                    progress=progress, pointwise=bool(options.pointwise),
                    predictive=bool(options.predictive))
    post = Posterior.from_tree(res.idata, model=model, method="gibbs", gate=res.gate,
                               seconds=res.timings["total"], native=res)
    post.diagnostics.update({"timings": res.timings, "chains": res.chains})
    return post


# ====================================================================== online, EP
def update_options(options) -> dict:
    """The one-pass update's keywords, as ``fit_online`` and ``fit_ep`` take them."""
    wl = _given(beta=options.wl_beta, kappa=options.wl_kappa, tau=options.wl_tau,
                gamma=options.wl_gamma)
    return {"taylor": options.taylor, "score_alpha": options.score_alpha,
            "strict": bool(options.strict), "kappa": float(options.kappa),
            "kappa2": float(options.kappa2), "bt_breaking": options.bt_breaking,
            "wl_params": wl or None}


def online_state(options):
    """The state ``options.state_in`` names (an online ``posterior.json``), or ``None``."""
    if not options.state_in:
        return None
    from crowdrank.inference.online import OnlinePosterior
    return OnlinePosterior.from_json(options.state_in)


def fit_online_method(data, model, priors, options, *, seed=0, progress=False,
                      order=None) -> Posterior:
    """One or more passes of the online update, in memory (``order`` overrides
    ``options.order``: the audit's permutations)."""
    from crowdrank.inference.online import fit_online

    if int(options.passes) < 1:
        raise UsageError("passes must be >= 1")
    post = fit_online(data, model, priors, order=order or options.order, seed=int(seed),
                      passes=int(options.passes), state=online_state(options),
                      progress=progress, **update_options(options))
    return from_online(post, "online")


def update_online_method(post: Posterior, data, model, priors, options, *,
                         seed=0) -> Posterior:
    """``post`` (a fit of ``online``) continued with ``data``: its saved state resumed,
    one pass over ``data`` only, as the update runs in production."""
    from crowdrank.inference.online import fit_online

    if not hasattr(post.native, "extend"):
        raise UsageError(f"{post.method} fit holds no online state to continue")
    new = fit_online(data, model, priors, order=options.order, seed=int(seed),
                     passes=int(options.passes), state=post.native, progress=False,
                     **update_options(options))
    return from_online(new, "online")


def fit_ep_method(data, model, priors, options, *, seed=0, progress=False, order=None,
                  callback=None) -> Posterior:
    """EP over the one-pass update (``callback(entry)`` after every pass)."""
    from crowdrank.inference.online.ep import fit_ep

    post = fit_ep(data, model, priors, passes=int(options.passes),
                  damping=float(options.damping), tol=float(options.ep_tol),
                  order=order or options.order, seed=int(seed), progress=progress,
                  callback=callback, **update_options(options))
    return from_online(post, "ep")


def fit_ep_exact_method(data, model, priors, options, *, seed=0, progress=False,
                        order=None, callback=None) -> Posterior:
    """EP with exact worker moments (:mod:`crowdrank.inference.online.ep_exact`)."""
    from crowdrank.inference.online.ep_exact import fit_ep_exact

    post = fit_ep_exact(data, name_of(model), priors, passes=int(options.passes),
                        damping=float(options.damping), tol=float(options.ep_tol),
                        order=order or options.order, seed=int(seed),
                        scores=options.scores, workers=options.workers,
                        sweeps=int(options.sweeps), lam=options.lam, callback=callback,
                        **update_options(options))
    return from_online(post, "ep-exact")


# ====================================================================== batch
def _processes(options) -> int:
    p = options.processes if options.processes is not None else min(2, os.cpu_count() or 1)
    if p < 1:
        raise UsageError("--processes must be >= 1")
    return int(p)


def _point(data, model, priors, options, estimate, intervals, seed, progress) -> Posterior:
    from crowdrank.inference.batch.api import fit_with_intervals

    if options.tol is not None and options.tol <= 0:
        raise UsageError("--tol must be > 0")
    kw = {}
    if intervals == "bootstrap":
        if options.bootstrap < 2:
            raise UsageError(f"--bootstrap needs at least 2 resamples, got "
                             f"{options.bootstrap}")
        if not 0 < options.interval_prob < 1:
            raise UsageError(f"--interval-prob must be in (0, 1), got "
                             f"{options.interval_prob}")
        kw = {"resamples": int(options.bootstrap), "prob": float(options.interval_prob),
              "processes": _processes(options)}
    fit = fit_with_intervals(data, name_of(model), priors, intervals=intervals,
                             method=estimate, solver=options.solver, seed=int(seed),
                             progress=progress, max_iter=options.max_iter, **kw,
                             **_given(tol=options.tol))
    return from_batch(fit)


def fit_map(data, model, priors, options, *, seed=0, progress=False) -> Posterior:
    """MAP of BT/PL with ``options.intervals``; CrowdBT's MAP by EM (Laplace only): the
    models the ``em`` entry fits are fitted by it."""
    from crowdrank.inference.methods import get as get_method

    if get_method("em").fits(model):
        if options.intervals != "laplace":
            raise UsageError("CrowdBT by EM reports Laplace intervals only (no bootstrap "
                             "yet)")
        return _em(data, priors, options)
    return _point(data, model, priors, options, "map", options.intervals, seed, progress)


def fit_ml(data, model, priors, options, *, seed=0, progress=False) -> Posterior:
    """Maximum likelihood (``Σ λ = 0``) of BT/PL with ``options.intervals``."""
    return _point(data, model, priors, options, "ml", options.intervals, seed, progress)


def fit_laplace(data, model, priors, options, *, seed=0, progress=False) -> Posterior:
    """MAP of BT/PL with Laplace's intervals."""
    return _point(data, model, priors, options, "map", "laplace", seed, progress)


def fit_bootstrap(data, model, priors, options, *, seed=0, progress=False) -> Posterior:
    """MAP of BT/PL with the bootstrap's intervals (its refits kept as draws)."""
    return _point(data, model, priors, options, "map", "bootstrap", seed, progress)


def _em(data, priors, options) -> Posterior:
    from crowdrank.inference.batch.crowdbt_em import fit_crowdbt_em

    if options.tol is not None and options.tol <= 0:
        raise UsageError("--tol must be > 0")
    return from_em(fit_crowdbt_em(data, priors, **_given(tol=options.tol,
                                                         max_iter=options.max_iter)))


def fit_em(data, model, priors, options, *, seed=0, progress=False) -> Posterior:
    """CrowdBT's MAP by EM (deterministic: ``seed`` is unused)."""
    return _em(data, priors, options)


def fit_trueskill(data, model, priors, options, *, seed=0, progress=False) -> Posterior:
    """TrueSkill over the rank-broken pairs, in file order (deterministic)."""
    from crowdrank.inference.online.trueskill import fit_trueskill as ts

    o = options
    if not 0 <= o.ts_draw_probability < 1 or o.ts_tau < 0 or (
            o.ts_beta is not None and not o.ts_beta > 0):
        raise UsageError("need --ts-beta > 0, --ts-tau >= 0 and 0 <= --ts-draw-probability "
                         "< 1")
    post = ts(data, priors, beta=o.ts_beta, tau=o.ts_tau,
              draw_probability=o.ts_draw_probability, progress=progress)
    return from_online(post, "trueskill")
