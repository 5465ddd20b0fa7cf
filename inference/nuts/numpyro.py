"""The NumPyro runner of :func:`crowdrank.inference.nuts.fit_nuts`: NUTS (``numpyro.infer.NUTS``,
``MCMC``) on the program of :mod:`crowdrank.models.numpyro_models`, warm-up and sampling
timed apart, then the contract's statistics, NumPyro's own per-ranking log-likelihood and
posterior predictive orders; and what the adapted sampler looked like
(:func:`adaptation_summary`).

The sampling route (:class:`crowdrank.inference.nuts.route.NutsRoute`) says how the kernel is
built and warmed up: plain NUTS with Stan's windowed adaptation by default; the
experimental routes (:mod:`crowdrank.inference.nuts.experimental`) wrap the kernel or stage
the warm-up through the same hooks.
"""

from __future__ import annotations

import contextlib
import time
import warnings

import numpy as np

from crowdrank.models.model_inputs import ModelInputs

from ..gate import Gate, check
from .config import NutsConfig
from .datatree import thinned_draws
from .starts import _latent_sites, _site_bijections, _unconstrain, jittered_starts

#: NumPyro's extra fields kept from every sampling iteration
EXTRA_FIELDS = ("diverging", "energy", "num_steps", "accept_prob", "adapt_state.step_size",
                "potential_energy")


def run_numpyro(inputs, cfg: NutsConfig, route, *, starts, inv_mass, progress, pointwise,
                param, keep=None):
    """Warm up and sample; returns ``(post, stats, ll, timings)`` as plain arrays
    ``(chain, draw, ...)`` (``timings`` also carries the adaptation summary, the kept
    predictive draws and their indices, which :func:`~crowdrank.inference.nuts.fit_nuts`
    takes out)."""
    import jax

    chain_method = cfg.chain_method
    if chain_method is None:
        chain_method = ("parallel" if jax.local_device_count() >= cfg.chains
                        else route.fallback_chain_method)
    timings = {}
    # 64-bit types on for the whole run, set globally rather than by a context manager:
    # the progress bar's host callback runs on another thread, which does not see a
    # thread-local x64 setting and then returns int32 where int64 was traced.
    prev_x64 = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        mcmc, samples, ex, rounds = _sample(inputs, cfg, route, chain_method, starts,
                                            inv_mass, progress, param, timings)
        route.after_sampling(inputs, param, mcmc, samples, cfg.chains, timings)
        if keep is not None and rounds > 1:   # thin the longer run as fit_nuts would
            keep = thinned_draws(cfg.chains, rounds * cfg.draws)
            timings["kept_draws"] = keep
        post = {k: np.asarray(samples[k], float) for k in ("lambda", "eta") if k in samples}
        stats = _stats(ex, timings)
        ll = None
        if pointwise:
            t = time.perf_counter()
            ll = _numpyro_pointwise(inputs, samples, param)
            timings["pointwise"] = time.perf_counter() - t
        if keep is not None:
            t = time.perf_counter()
            timings["predictive_draws"] = _numpyro_predictive(inputs, samples, param, keep,
                                                              cfg.seed)
            timings["predictive"] = time.perf_counter() - t
    finally:
        jax.config.update("jax_enable_x64", prev_x64)
    return post, stats, ll, timings


def _sample(inputs, cfg: NutsConfig, route, chain_method, starts, inv_mass, progress, param,
            timings):
    """Build the kernel, warm up (timed apart, with its gradient count) and sample, with
    the extension rounds of ``cfg.max_draws``. Returns the ``MCMC``, the draws and extra
    fields ``(chain, draw, ...)`` and the number of rounds."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from crowdrank.models import numpyro_models as npm

    chains, draws, pre = cfg.chains, cfg.draws, route.prefix
    loglik_dtype = "float32" if cfg.precision == "float32" else None

    def prog():
        # the sampler's form of the density: the site's total (models.numpyro_models)
        return npm.model(inputs, loglik_dtype=loglik_dtype, prior_only=cfg.prior_only,
                         pointwise=False, **param)

    init_params = None
    if starts is not None:
        init_params = {k: jax.numpy.asarray(v, jax.numpy.float64) for k, v in starts.items()}
    if inv_mass is not None and cfg.dense_mass:
        inv_mass = np.diag(inv_mass)

    def make(mass, adapt_mass):
        # dispersed starts, or the prior median for a mirror-symmetric model
        # (default_start); a warm start's init_params take precedence
        nuts = NUTS(prog, target_accept_prob=cfg.target_accept,
                    init_strategy=default_start(inputs),
                    inverse_mass_matrix=None if mass is None else jax.numpy.asarray(mass),
                    max_tree_depth=cfg.max_tree_depth, dense_mass=cfg.dense_mass,
                    adapt_mass_matrix=adapt_mass)
        return route.kernel(nuts, inputs, cfg.prior_only)

    def make_mcmc(kernel, n_warm):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="There are not enough devices")
            return MCMC(kernel, num_warmup=n_warm, num_samples=draws, num_chains=chains,
                        chain_method=chain_method, progress_bar=progress)

    if cfg.profile:
        z0 = None if starts is None else {k: (v if chains == 1 else v[0])
                                           for k, v in starts.items()}
        timings.update(route.profile(inputs, z0, param, loglik_dtype))
    extra = tuple(pre + f for f in EXTRA_FIELDS)
    key = jax.random.PRNGKey(cfg.seed)
    with _compile_clock(timings) as compiled:
        return _warmup_and_sample(inputs, cfg, route, make, make_mcmc, key, inv_mass,
                                  init_params, param, extra, timings, compiled)


#: JAX's own compile-time events (``jax._src.dispatch``): tracing, lowering, XLA compile
COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                  "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")


@contextlib.contextmanager
def _compile_clock(timings: dict):
    """``timings["compile"]``: the seconds JAX spends tracing, lowering and compiling the
    run's own programs while the block runs, as JAX reports them
    (``jax.monitoring``): the sampler's compile cost at no extra compile. Yields the
    running total (a one-element list)."""
    import jax.monitoring

    total = [0.0]

    def listen(event, duration, **kw):
        if event in COMPILE_EVENTS:
            total[0] += float(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield total
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
        timings["compile"] = total[0]


def mirror_symmetric(inputs) -> bool:
    """Whether the likelihood is unchanged by ``(λ, η) → (−λ, 1 − η)``: a model whose
    worker parameter is a simplex of accuracies, on pairs only (CrowdBT and its
    extensions, COUPLE when every ranking has two items; docs/design.md). Only the prior
    on ``η`` tells the two modes apart. (PeerGrader's ``η`` is a precision, not a simplex:
    no mirror.)"""
    spec = inputs.spec
    return bool(spec.has_eta and spec.worker_prior.simplex_coordinates
                and (spec.pairwise or inputs.K == 2))


def default_start(inputs):
    """NumPyro's initial-point strategy for a run without a warm start.

    Every site starts from ``Uniform(-2, 2)`` on the unconstrained scale (NumPyro's and
    Stan's default): dispersed starts are what R-hat's between-chain comparison assumes.
    A mirror-symmetric model (:func:`mirror_symmetric`) starts instead at the median of 15
    prior draws: scores near their prior centre, in no particular order, and every ``η``
    on the side of 1/2 its prior favours. From a uniform start a chain whose scores begin
    in roughly reversed order settles in the mirror mode (every score reversed, every
    ``η`` replaced by ``1 − η``) and stays: on the default audit's data under the
    geometric prior, 2 of 4 seeds had one chain of four there at every warm-up length from
    25 to 300 (R-hat 1.53), its log density ~14 below the other chains' — a mode with a
    negligible share of the posterior, left only by chance. Starting the worker sites alone
    at the prior median does not help (measured: the scores' start decides). The median
    start is not used for every model because it draws from the prior inside the compiled
    warm-up, and the Gamma samplers of COUPLE's simplexes cost 6-12 s of every cold
    compile (docs/testing.md)."""
    from numpyro.infer import init_to_median, init_to_uniform

    if mirror_symmetric(inputs):
        return init_to_median(num_samples=15)
    return init_to_uniform(radius=2.0)


def _warmup_and_sample(inputs, cfg: NutsConfig, route, make, make_mcmc, key, inv_mass,
                       init_params, param, extra, timings, compiled):
    """The route's warm-up, its last phase run with the draws as one program, then the
    extension rounds of ``cfg.max_draws``."""
    t = time.perf_counter()
    last = route.warmup(inputs, make, make_mcmc, key, cfg.tune, inv_mass, init_params, param,
                        timings)
    earlier = time.perf_counter() - t
    samples, ex = _last_warmup_and_draws(last, extra, route.prefix, timings, compiled)
    timings["warmup"] += earlier
    mcmc, t = last.mcmc, time.perf_counter()
    samples, ex, rounds = extend_sampling(mcmc, samples, ex, extra, cfg.chains, cfg.draws,
                                          cfg.max_draws, route.prefix)
    timings["sampling"] += time.perf_counter() - t
    timings["sampling_rounds"] = float(rounds)
    return mcmc, samples, ex, rounds


def _last_warmup_and_draws(last, extra, pre: str, timings: dict, compiled: list):
    """The last warm-up phase (a :class:`~crowdrank.inference.nuts.route.LastWarmup`) and
    the draws as **one** run of NumPyro's chains, every
    iteration collected; returns the draws and extra fields after warm-up.

    Why one run: NumPyro's ``warmup()`` then ``run()`` compile two XLA programs, each with
    the whole NUTS step, and the second (sampling) costs ~5 s of a fresh process's ~25 s
    for a small COUPLE fit (docs/testing.md). Warm-up and sampling are the same kernel
    step (adaptation stops by the iteration count), so the draws are bit for bit those of
    the two runs (tested). The phases are then not timed apart: the phase's warm-up
    seconds are the compile plus the run's share of gradient evaluations spent warming
    up, ``sampling`` the rest (PyMC's ``warmup`` likewise includes compiling)."""
    import jax

    mcmc, tune = last.mcmc, last.mcmc.num_warmup
    t, c0 = time.perf_counter(), compiled[0]
    n = tune + mcmc.num_samples
    # NumPyro's own collection window (its warmup() sets it the same way): every iteration
    mcmc._set_collection_params(0, n, n, "warmup+sample" if tune else None)
    mcmc.run(last.key, extra_fields=extra, init_params=last.init_params)
    every = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    elapsed, compile_s = time.perf_counter() - t, compiled[0] - c0
    # the extension rounds continue from here, as from a warm-up's end
    mcmc.post_warmup_state = mcmc.last_state
    ex_all = _fields(mcmc, pre)
    steps = np.asarray(ex_all["num_steps"], float)
    warm = float(steps[:, :tune].sum())
    share = warm / max(float(steps.sum()), 1.0)
    run_s = max(elapsed - compile_s, 0.0)
    if tune > 0 or "warmup_gradients" in timings:
        timings["warmup_gradients"] = timings.get("warmup_gradients", 0.0) + warm
    if last.stage is not None:
        timings[f"warmup_gradients_{last.stage}"] = warm
    timings["warmup"] = min(compile_s, elapsed) + share * run_s
    timings["sampling"] = (1.0 - share) * run_s
    return ({k: np.asarray(v)[:, tune:] for k, v in every.items()},
            {k: np.asarray(v)[:, tune:] for k, v in ex_all.items()})


def _stats(ex: dict, timings: dict) -> dict:
    """The contract's sample stats from NumPyro's extra fields; ``timings`` gains the
    sampling gradients."""
    n_steps = np.asarray(ex["num_steps"])
    timings["sampling_gradients"] = float(n_steps.sum())
    return {
        "diverging": np.asarray(ex["diverging"], bool),
        "energy": np.asarray(ex["energy"], float),
        "lp": -np.asarray(ex["potential_energy"], float),
        "n_steps": n_steps.astype(np.int64),
        # Depth of the trajectory tree: a full tree of depth d has 2^d - 1 leapfrogs.
        "tree_depth": np.ceil(np.log2(n_steps + 1.0)).astype(np.int64),
        "acceptance_rate": np.asarray(ex["accept_prob"], float),
        "step_size": np.asarray(ex["adapt_state.step_size"], float),
    }


def _fields(mcmc, pre: str = "") -> dict:
    """The run's extra fields ``(chain, draw)`` by their plain names (``pre`` stripped:
    ``"hmc_state."`` for ``HMCGibbs``)."""
    ex = mcmc.get_extra_fields(group_by_chain=True)
    return {k[len(pre):] if pre and k.startswith(pre) else k: v for k, v in ex.items()}


def extend_sampling(mcmc, samples: dict, ex: dict, extra, chains: int, draws: int,
                     max_draws: int | None, pre: str = ""):
    """More rounds of ``draws`` per chain while the gate fails on R-hat or ESS alone.

    Why: a posterior with a rare transition (at the medium scale, a worker whose ``η_K``
    has both a prior spike at 0 and a data mode near 0.7, ``docs/notes.md``) needs more
    draws than a fixed budget guesses; the gate says so after the fact. Each round
    continues every chain from its last state with the adapted kernel *fixed* (no
    adaptation after warm-up), so the rounds together are one longer run of the same
    Markov chains. Stops at ``max_draws`` per chain, or as soon as the gate passes, or
    when it fails for a reason more draws cannot fix (divergences, low E-BFMI).
    Returns the concatenated samples and extra fields, and the number of rounds."""
    import jax

    rounds = 1
    if not max_draws or chains < 2:
        return samples, ex, rounds
    while (rounds + 1) * draws <= max_draws:
        gate = _gate_of(samples, ex)
        if gate.trusted or any("diverg" in r or "BFMI" in r for r in gate.reasons):
            break
        mcmc.post_warmup_state = mcmc.last_state
        mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=extra)
        more = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        more_ex = _fields(mcmc, pre)
        samples = {k: np.concatenate([np.asarray(samples[k]), np.asarray(more[k])], axis=1)
                   for k in samples}
        ex = {k: np.concatenate([np.asarray(ex[k]), np.asarray(more_ex[k])], axis=1)
              for k in ex}
        rounds += 1
    return samples, ex, rounds


def _gate_of(samples: dict, ex: dict) -> Gate:
    """The gate (:func:`crowdrank.inference.gate.check`) on raw NumPyro draws ``(chain, draw, ...)``:
    the model's parameters ``lambda`` (and ``eta``), divergences and energies."""
    from arviz_base import from_dict

    post = {k: np.asarray(samples[k], float) for k in ("lambda", "eta") if k in samples}
    stats = {"diverging": np.asarray(ex["diverging"], bool),
             "energy": np.asarray(ex["energy"], float)}
    return check(from_dict({"posterior": post, "sample_stats": stats}))


def coordinate_names(inputs: ModelInputs, param: dict) -> list[str]:
    """Names of NumPyro's unconstrained coordinates in its flattening order (sites sorted by
    name, each raveled): ``lambda_mean``, ``lambda_c[i]`` (the zero-sum block's ``L − 1``
    free coordinates), ``eta_g[w,t]``/``eta_u[w,t]``/``eta_e[w,t]`` (worker ``w``'s entry
    ``t``, as :func:`crowdrank.models.model_inputs.boost_split` orders them), ``eta[...]`` otherwise."""
    from numpyro.distributions import biject_to

    from crowdrank.models.model_inputs import boost_split

    sizes = {k: int(np.prod(biject_to(support).inverse_shape(shape)))
             for k, (support, shape) in _latent_sites(inputs, param).items()}
    big, small = (boost_split(inputs.alpha, param.get("boost")) if inputs.has_eta
                  else ((), ()))
    names = []
    for k in sorted(sizes):
        idx = {"eta_g": big, "eta_u": small, "eta_e": small}.get(k)
        if idx is not None and len(idx) == 2 and len(idx[0]) == sizes[k]:
            names += [f"{k}[{w},{t}]" for w, t in zip(*idx)]
        elif sizes[k] == 1:
            names.append(k)
        else:
            names += [f"{k}[{i}]" for i in range(sizes[k])]
    return names


def adaptation_summary(inputs: ModelInputs, param: dict, mcmc, samples: dict,
                       chains: int) -> dict:
    """What NumPyro's warm-up adapted, against what the draws then showed.

    ``step_size`` ``(chains,)``; ``inv_mass`` ``(chains, D)``: the diagonal of the adapted
    inverse mass matrix; ``post_var`` ``(chains, D)``: each chain's variance of its draws
    on the same unconstrained coordinates; ``names``: the ``D`` coordinates
    (:func:`coordinate_names`). A well adapted diagonal has ``inv_mass ≈ post_var``; a
    ratio far below 1 on a coordinate means its steps are too short there (slow drift), far
    above 1 too long (small step size for everyone)."""
    adapt = mcmc.post_warmup_state.adapt_state
    step = np.atleast_1d(np.asarray(adapt.step_size, float))
    imm = adapt.inverse_mass_matrix
    blocks = [imm[k] for k in sorted(imm)] if isinstance(imm, dict) else [imm]
    diag = []
    for b in blocks:
        b = np.asarray(b, float)
        if chains == 1:
            b = b[None]
        diag.append(np.diagonal(b, axis1=-2, axis2=-1) if b.ndim == 3 else b)
    inv_mass = np.concatenate(diag, axis=1)
    sites = sorted(_site_bijections(inputs, param))
    vals = {k: np.asarray(samples[k], float) for k in sites}
    if chains == 1:
        vals = {k: v[None] for k, v in vals.items()}
    z = _unconstrain(inputs, vals, param)
    C, D = next(iter(z.values())).shape[:2]
    post_var = np.concatenate([z[k].reshape(C, D, -1).var(axis=1) for k in sites], axis=1)
    return {"step_size": step, "inv_mass": inv_mass, "post_var": post_var,
            "names": coordinate_names(inputs, param)}


def gradient_timing(inputs: ModelInputs, reps: int = 5, *, z: dict | None = None,
                    param: dict | None = None, loglik_dtype=None) -> dict:
    """Seconds to compile the potential+gradient and ms per call, at a fixed point.

    The potential is built with :func:`numpyro.infer.util.potential_energy` on the
    unconstrained scale and jitted as one program, as NUTS does internally; this is the
    unit cost of a leapfrog step. (Measured separately: NUTS compiles its own copy.) ``z``
    is an unconstrained point (default: λ = 0 and η at its prior mean).
    """
    import jax
    from numpyro.infer.util import potential_energy

    from crowdrank.models import numpyro_models as npm

    param = param or {}
    if z is None:   # the Gibbs route passes its own point (experimental.GibbsRoute.profile)
        z = jittered_starts(inputs, {"lambda": np.zeros(inputs.n_items)}, 1, 0, 0.0, **param)
    kw = dict(param, loglik_dtype=loglik_dtype, pointwise=False)
    with jax.enable_x64(True):
        z = {k: jax.numpy.asarray(v, jax.numpy.float64) for k, v in z.items()}
        vg = jax.jit(jax.value_and_grad(
            lambda p: potential_energy(npm.model, (inputs,), kw, p)))
        t = time.perf_counter()
        jax.block_until_ready(vg(z))
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(reps):
            jax.block_until_ready(vg(z))
    return {"compile": compile_s, "gradient_ms": 1e3 * (time.perf_counter() - t) / reps}



def _flat(samples: dict, keep=None) -> dict:
    """``{site: (chain, draw, ...)}`` → ``{site: (chain·draw, ...)}`` (draws ``keep`` only)."""
    out = {}
    for k, v in samples.items():
        v = np.asarray(v)
        if keep is not None:
            v = v[:, keep]
        out[k] = v.reshape((-1,) + v.shape[2:])
    return out


def _numpyro_pointwise(inputs, samples, param, chunk: int = 256) -> np.ndarray:
    """Per-ranking log-lik of every draw, ``(chain, draw, n_obs)``: NumPyro's own
    ``log_likelihood`` of the observed site ``rankings`` (float64, autodiff-free values),
    over the sampler's sites, jitted once and run in chunks of draws."""
    import jax
    from numpyro.infer import log_likelihood

    from crowdrank.models import numpyro_models as npm

    C, D = np.asarray(samples["lambda"]).shape[:2]
    flat = _flat(samples)
    n = C * D
    chunk = min(chunk, n)

    def prog():
        return npm.model(inputs, **param)

    fn = jax.jit(lambda s: log_likelihood(prog, s)["rankings"])
    out = np.empty((n, inputs.n_obs))
    for a in range(0, n, chunk):
        idx = np.minimum(np.arange(a, a + chunk), n - 1)    # one shape: one compile
        part = np.asarray(fn({k: v[idx] for k, v in flat.items()}))
        out[a:a + chunk] = part[: min(chunk, n - a)]
    return out.reshape(C, D, inputs.n_obs)


def _numpyro_predictive(inputs, samples, param, keep, seed) -> np.ndarray:
    """Posterior predictive orders ``(chain, len(keep), n_obs, K)`` by
    ``numpyro.infer.Predictive`` over the kept draws (the model with ``predict=True``)."""
    import jax
    from numpyro.infer import Predictive

    from crowdrank.models import numpyro_models as npm

    C = np.asarray(samples["lambda"]).shape[0]
    flat = _flat(samples, keep)
    pred = Predictive(lambda: npm.model(inputs, predict=True, **param), flat,
                      return_sites=["rankings"])
    key = jax.random.fold_in(jax.random.PRNGKey(int(seed)), 0x99)
    draws = np.asarray(pred(key)["rankings"])
    return draws.reshape((C, len(keep)) + draws.shape[1:]).astype(np.int32)

