"""Starting points for NUTS from a point or from an approximate posterior.

The samplers of :mod:`crowdrank.models.numpyro_models` and :mod:`crowdrank.models.pymc_models` move the
coordinates of their exact reparametrisations (``docs/design.md``, "Sampling"):
``lambda_mean``, ``lambda_c`` for the scores and ``eta_u``, ``eta_e`` for a worker simplex
(or ``lambda``/``eta`` themselves with ``level="iid"``/``simplex="dirichlet"``). This module
maps values of the model's parameters ``(λ, η)`` to values of those coordinates, so that a
chain can start where an approximation (the online posterior) puts its mass.

The map for ``η`` draws the auxiliary variables from their exact conditionals given ``η``
(so a start drawn this way is a draw of the augmented posterior whenever ``η`` is a draw of
the posterior): with ``g_t = S·η_t`` and ``S = Σ_t g_t`` independent of ``η`` under the
prior (``Gamma(Σα)``, or the samplers' reweighted ``log S ~ Normal(0, LEVEL_SD²)``; the
likelihood sees only ``η``), ``u_t | g_t = g_t + Exp(1)`` (the
density of ``u ~ Gamma(α+1)`` times that of ``g = u·V``, ``V ~ Beta(α, 1)``, is ``∝ e^{−u}``
on ``u > g``) and ``e_t = α_t·log(u_t/g_t)``. Everything is computed in logs, so ``η_t``
far below ``1e-300`` is no problem.

The second half maps a starting point or approximation draws to what each back-end takes:
NumPyro's per-chain unconstrained starts and seeded inverse mass
(:func:`jittered_starts`, :func:`numpyro_starts_from_draws`; NumPyro's own bijections) and
PyMC's constrained initial values (:func:`pymc_initvals`).

Every random choice takes a ``numpy.random.Generator`` (or a seed for one).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.model_inputs import BOOST_BELOW, LEVEL_SD, ModelInputs


def _log_gamma_draws(rng: np.random.Generator, shape_param: np.ndarray, size=None):
    """``log G`` for ``G ~ Gamma(a)``, exact for tiny ``a`` (the Marsaglia–Tsang boost:
    ``log G = log Gamma(a + 1) + log(U)/a``)."""
    a = np.asarray(shape_param, float)
    out_shape = a.shape if size is None else tuple(np.atleast_1d(size)) + a.shape
    g1 = rng.gamma(a + 1.0, size=out_shape)
    return np.log(g1) + np.log(rng.uniform(size=out_shape)) / a


def log_dirichlet_draws(rng: np.random.Generator, alpha: np.ndarray, n: int) -> np.ndarray:
    """``n`` draws of ``log η`` for ``η ~ Dirichlet(α)`` row-wise, ``(n, W, K)``."""
    lg = _log_gamma_draws(rng, alpha, n)
    return lg - logsumexp(lg, axis=-1, keepdims=True)


def augment(rng: np.random.Generator, log_eta: np.ndarray, alpha: np.ndarray,
            boost_below: float = float("inf"), level_sd: float | None = None,
            boost=None) -> dict:
    """Auxiliary variables given ``log η`` (module docstring): ``eta_g`` (``g`` itself) for
    the concentrations ``≥ boost_below`` and ``eta_u``, ``eta_e`` for the others, each
    flattened over the ``(W, K)`` table in row-major order (leading batch dims kept)."""
    alpha = np.asarray(alpha, float)
    if level_sd is None:     # S ~ Gamma(Σα), the law of independent Gammas
        log_s = _log_gamma_draws(rng, np.broadcast_to(alpha.sum(axis=-1), log_eta.shape[:-1]))
    else:                    # the samplers' reweighted law, log S ~ Normal(0, level_sd²)
        log_s = level_sd * rng.standard_normal(log_eta.shape[:-1])
    log_s = log_s[..., None]
    log_g = log_s + log_eta
    # u = g + Exp(1), in logs: log u = logaddexp(log g, log Exp(1))
    log_u = np.logaddexp(log_g, np.log(rng.exponential(size=log_g.shape)))
    e = alpha * (log_u - log_g)
    big = alpha >= boost_below if boost is None else ~np.asarray(boost, bool)
    out = {}
    if big.any():
        out["eta_g"] = np.exp(log_g[..., big])
    if (~big).any():
        out["eta_u"] = np.exp(log_u[..., ~big])
        out["eta_e"] = e[..., ~big]
    return out


def item_values(inputs: ModelInputs, lam, level: str = "centered") -> dict:
    """The item sites' constrained values for scores ``lam`` ``(..., L)``: ``lambda``
    (``level="iid"``, or a single item) or ``lambda_mean`` and ``lambda_c`` (centred)."""
    lam = np.asarray(lam, float)
    if level == "iid" or inputs.n_items < 2:
        return {"lambda": lam}
    m = lam.mean(axis=-1)
    return {"lambda_mean": m, "lambda_c": lam - m[..., None]}


def sampler_values(inputs: ModelInputs, lam: np.ndarray, log_eta: np.ndarray | None,
                   rng: np.random.Generator, *, simplex: str = "gamma",
                   level: str = "centered", boost=None, level_sd=None) -> dict:
    """Constrained values of the sampler's sites for parameters ``(λ, log η)``.

    ``lam`` is ``(..., L)``; ``log_eta`` is ``(..., W, K)`` (COUPLE) or ``(..., W, 2)``
    (CrowdBT: ``[log η, log(1 − η)]``) or ``None`` (PL/BT). Leading batch dimensions are
    kept (one set of values per draw).
    """
    out = item_values(inputs, lam, level)
    family = inputs.spec.worker_prior
    if family is not None:
        # the family's own site ``eta`` (a Gamma reliability whatever ``simplex``; the PPL's
        # Dirichlet/Beta with simplex="dirichlet"), else the Gamma construction's sites
        direct = family.direct_values(log_eta, simplex)
        if direct is not None:
            out.update(direct)
        else:
            out.update(augment(rng, log_eta, inputs.alpha, BOOST_BELOW,
                               LEVEL_SD if level_sd is None else np.asarray(level_sd, float),
                               boost))
    return out


def point_log_eta(inputs: ModelInputs, eta) -> np.ndarray | None:
    """``log η`` table of a point ``eta`` (COUPLE ``(W, K)``, CrowdBT ``(W,)``, PeerGrader
    ``(W,)`` reliabilities), or of the prior mean when ``eta`` is None."""
    if not inputs.has_eta:
        return None
    # the family's table: Gamma log η (prior mean shape/rate), Beta [log η, log(1 − η)]
    return inputs.spec.worker_prior.point_log_eta(np.asarray(inputs.alpha, float), eta)


def approx_draws(inputs: ModelInputs, approx, items, workers, n: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """``n`` draws ``(λ, log η)`` from an approximate posterior, aligned to the data's ids.

    ``approx`` has the attributes of :class:`crowdrank.inference.online.OnlinePosterior` (``items``,
    ``mu``, ``sigma2``; ``workers``, ``alpha``): ``λ_r ~ N(mu_r, sigma2_r)`` and
    ``η_w ~ Dirichlet(alpha_w)`` (COUPLE) or ``Beta(a_w, b_w)`` (CrowdBT), independent.
    """
    ix = _positions(approx.items, items, "item")
    mu = np.asarray(approx.mu, float)[ix]
    sd = np.sqrt(np.asarray(approx.sigma2, float)[ix])
    lam = mu + sd * rng.standard_normal((n, mu.size))
    if not inputs.has_eta:
        return lam, None
    if getattr(approx, "alpha", None) is None:
        raise ValueError("the approximation has no worker parameters for this model")
    alpha = np.maximum(approx_alpha(inputs, approx, workers), 1e-12)
    return lam, log_dirichlet_draws(rng, alpha, n)


def _positions(have, want, what: str) -> np.ndarray:
    """Index of each id of ``want`` in ``have`` (ids compared as strings)."""
    pos = {str(i): k for k, i in enumerate(have)}
    try:
        return np.array([pos[str(i)] for i in want])
    except KeyError as exc:
        raise ValueError(f"the approximation has no {what} {exc.args[0]!r}") from None


def approx_alpha(inputs: ModelInputs, approx, workers) -> np.ndarray:
    """The approximation's worker concentrations aligned to ``workers``, in the layout of
    ``inputs.alpha`` (COUPLE ``(W, K)``; CrowdBT ``(W, 2)`` Beta ``[a, b]``)."""
    a = np.asarray(approx.alpha, float)[_positions(approx.workers, workers, "worker")]
    return a[:, : inputs.spec.prior_K(inputs.K)]       # Beta (a, b); COUPLE's K entries


def refine_worker_alpha(inputs: ModelInputs, lam: np.ndarray, alpha0: np.ndarray,
                        iters: int = 30) -> np.ndarray:
    """COUPLE worker concentrations ``α_w + n_w`` from expected offset counts given scores.

    A proposal, not an inference: with ``λ`` fixed (e.g. the online means), each stage of
    a ranking is a mixture over offsets ``t`` with weights ``η̄_t`` and components
    ``softmax(λ_{ρ(i..k)})[ρ(i+t−1)]`` ([Pan18], Eq. 3); ``iters`` EM passes give each
    worker's expected counts ``n_{w,t}`` of reports at offset ``t`` (the renormalisation
    over active entries is folded into the responsibilities, not into the M-step, so the
    fixed point is close to but not exactly the conditional MAP). ``Dirichlet(α0 + n)`` then
    says which entries the data pin and how wide they are — where the one-pass online
    update can leave small components at their prior (at the paper's scale it left
    ``α_3, α_4`` at ≈ 0.2, 0.01 for every worker while the posterior puts ``η_3`` near 0.1
    with hundreds of informative stages). Used for the sampler's coordinates (boost mask),
    starts and seeded mass; the posterior does not depend on it.
    """
    lam = np.asarray(lam, float)
    a0 = np.asarray(alpha0, float)
    W, K = a0.shape
    # per stage: worker, m, and the log-softmax row over the m candidates in reported order
    stage_w, stage_p = [], []
    for k, a, b in inputs.blocks:
        idx = np.asarray(inputs.index[:k, a:b])
        w = np.asarray(inputs.worker[a:b])
        x = lam[idx]                                      # (k, n)
        for i in range(k - 1):
            xs = x[i:]                                    # m = k - i candidates
            p = np.exp(xs - xs.max(axis=0))
            p = p / p.sum(axis=0)
            pad = np.zeros((K, p.shape[1]))
            pad[: k - i] = p
            stage_w.append(w)
            stage_p.append(pad)
    sw = np.concatenate(stage_w)
    sp = np.concatenate(stage_p, axis=1)                  # (K, n_stages), 0 beyond m
    eta = a0 / a0.sum(axis=1, keepdims=True)
    for _ in range(iters):
        r = eta[sw].T * sp                                # active entries only (sp = 0 else)
        r = r / np.maximum(r.sum(axis=0, keepdims=True), 1e-300)
        n = np.stack([np.bincount(sw, weights=r[t], minlength=W) for t in range(K)], 1)
        eta = (a0 + n) / (a0 + n).sum(axis=1, keepdims=True)
    return a0 + n


def worker_level_sd(alpha: np.ndarray, pinned: np.ndarray, floor: float = 0.02) -> np.ndarray:
    """Per worker, an sd for ``log S`` matched to its pinned entries: the median over
    entries with ``pinned`` of the Dirichlet sd of ``log η_t`` (``√(ψ'(α_t) − ψ'(Σα))``),
    in ``[floor, LEVEL_SD]``; :data:`LEVEL_SD` for a worker with no pinned entry.

    Why: ``log g_t = log S + log η_t``; when the data pin the ratios to an sd ``s`` far
    below the sd of ``log S``, every pinned ``log g_t`` of a worker moves along ``log S``
    together and a diagonal mass cannot follow the narrow contrasts (measured at 900
    tasks per worker: pinned contrasts sd ≈ 0.03–0.05 against ``LEVEL_SD = 0.3``, the
    stiffest directions of the scaled Hessian). With ``sd(log S) ≈ s`` the pinned
    ``log g_t`` are near independent. The law of ``S`` is arbitrary, so this is exact.
    """
    from scipy.special import polygamma

    a = np.asarray(alpha, float)
    v = polygamma(1, a) - polygamma(1, a.sum(axis=1, keepdims=True))
    sd = np.sqrt(np.maximum(v, 0.0))
    out = np.full(a.shape[0], LEVEL_SD)
    pinned = np.asarray(pinned, bool)
    for w in np.nonzero(pinned.any(axis=1))[0]:
        out[w] = np.median(sd[w, pinned[w]])
    return np.clip(out, floor, LEVEL_SD)


# ---------------------------------------------------------------- starts per back-end
def _refined_approx(inputs: ModelInputs, approx, data: Rankings):
    """A shallow copy of ``approx`` whose COUPLE worker concentrations are refined by
    :func:`crowdrank.inference.nuts.starts.refine_worker_alpha` at its item means."""
    import copy

    ix = _positions(approx.items, data.items, "item")
    iw = _positions(approx.workers, data.workers, "worker")
    alpha = np.array(approx.alpha, float)
    alpha[iw, : inputs.K] = refine_worker_alpha(inputs, np.asarray(approx.mu, float)[ix],
                                                inputs.alpha)
    out = copy.copy(approx)
    out.alpha = alpha
    return out


def _check_init(init: dict, inputs: ModelInputs) -> dict:
    """Validate a starting point and move it strictly inside the support."""
    out = {}
    lam = np.asarray(init.get("lambda"), float)
    if lam.shape != (inputs.n_items,) or not np.all(np.isfinite(lam)):
        raise UsageError(f"init['lambda'] must be {inputs.n_items} finite values, "
                         f"got shape {lam.shape}")
    out["lambda"] = lam
    family = inputs.spec.worker_prior
    if family is not None and init.get("eta") is not None:
        # checked and moved inside the support by the family (Beta: an accuracy or (a, b))
        eta = family.check_init(init["eta"], inputs.n_workers, inputs.K)
        if eta is not None:
            out["eta"] = eta
    return out


# ---------------------------------------------------------------- NumPyro
def _latent_sites(inputs: ModelInputs, param: dict) -> dict:
    """``{site: (support, shape)}`` of the NumPyro program's latent sites.

    The model is traced abstractly (:func:`jax.eval_shape`): only the supports and shapes
    are needed, and an eager trace would draw every prior sample, compiling one small XLA
    program per operation (~8 CPU-s in a fresh process for COUPLE, more than the rest of
    the post-processing of a fit). A support holding a traced value (a bound computed in
    the model) cannot leave the abstract trace, so such a model is traced eagerly."""
    import jax
    from numpyro import handlers

    from crowdrank.models import numpyro_models as npm

    def trace():
        with handlers.seed(rng_seed=0):
            tr = handlers.trace(npm.model).get_trace(inputs, prior_only=True, **param)
        return {k: (v["fn"].support, tuple(np.shape(v["value"]))) for k, v in tr.items()
                if v["type"] == "sample" and not v.get("is_observed", False)}

    out = {}
    with jax.enable_x64(True):
        jax.eval_shape(lambda: out.update(trace()))
        if any(_holds_tracer(support) for support, _ in out.values()):
            out = trace()
    return out


def _holds_tracer(obj, depth: int = 0) -> bool:
    """Whether a constraint (or a constraint it wraps) holds a traced JAX value."""
    import jax

    if isinstance(obj, jax.core.Tracer):
        return True
    if depth > 4 or not hasattr(obj, "__dict__"):
        return False
    return any(_holds_tracer(v, depth + 1) for v in vars(obj).values())


def _site_bijections(inputs: ModelInputs, param: dict) -> dict:
    """``{site: bijection from unconstrained to constrained}`` of the NumPyro program."""
    # the programs' package first: it runs numpyro's own before any submodule import
    # (ArviZ puts a lazy placeholder for numpyro in sys.modules; a submodule imported first
    # leaves numpyro.distributions without its `distribution` attribute, and numpyro.factor
    # then fails: tests/test_import_order.py)
    import importlib

    importlib.import_module("crowdrank.models.numpyro")   # before any numpyro submodule
    from numpyro.distributions import biject_to

    return {k: biject_to(support) for k, (support, _) in _latent_sites(inputs, param).items()}


def _unconstrain(inputs: ModelInputs, values: dict, param: dict) -> dict:
    """Constrained site values (any leading batch dims) → unconstrained, float64 NumPy."""
    import jax

    bij = _site_bijections(inputs, param)
    with jax.enable_x64(True):
        return {k: np.asarray(bij[k].inv(jax.numpy.asarray(v, jax.numpy.float64)), float)
                for k, v in values.items()}


def jittered_starts(inputs: ModelInputs, init: dict, chains: int, seed: int,
                    jitter: float = 1.0, *, simplex: str = "gamma",
                    level: str = "centered", boost=None) -> dict:
    """Per-chain NumPyro starting points around ``init``, on the unconstrained scale.

    ``init`` (constrained ``λ``, ``η``, as checked by :func:`_check_init`) is mapped to the
    sampler's coordinates (:func:`crowdrank.inference.nuts.starts.sampler_values`: each chain draws its
    own auxiliary Gamma variables given ``η``) and to the unconstrained scale through
    NumPyro's own bijections; chain ``c`` then starts at that point plus an independent
    ``Uniform(-jitter, jitter)`` offset on every coordinate, PyMC's ``jitter+adapt_diag``
    rule.

    Why: with one common start, every chain follows the same path into the same basin,
    and R-hat, which compares chains, cannot see a second mode or a chain that has not
    left the start's neighbourhood; dispersed starts are what make the between-chain
    comparison informative. Random choices come from ``numpy.random.default_rng`` keyed on
    ``seed``, so the same seed gives the same starts (and the same draws). A missing
    ``eta`` starts at its prior mean. Returns ``{site: (chains, ...)}``, or the
    unbatched point when ``chains == 1``.
    """
    rng = np.random.default_rng([int(seed), 0x5EED])
    lam = np.broadcast_to(np.asarray(init["lambda"], float), (chains, inputs.n_items))
    leta = point_log_eta(inputs, init.get("eta"))
    if leta is not None:
        leta = np.broadcast_to(leta, (chains,) + leta.shape)
    param = {"simplex": simplex, "level": level, "boost": boost}
    vals = sampler_values(inputs, lam, leta, rng, **param)
    z = _unconstrain(inputs, vals, param)
    out = {k: z[k] + jitter * rng.uniform(-1.0, 1.0, size=z[k].shape) for k in sorted(z)}
    return out if chains > 1 else {k: v[0] for k, v in out.items()}


def numpyro_starts_from_draws(inputs: ModelInputs, lam_draws, log_eta_draws, chains: int,
                              rng: np.random.Generator, param: dict, *,
                              seed_mass: bool = True):
    """Chain starts (the first ``chains`` draws) and the initial inverse mass matrix (the
    variance of all draws, per unconstrained coordinate, flattened in NumPyro's order:
    sites sorted by name, each raveled) from draws ``(λ, log η)`` of an approximation."""
    vals = sampler_values(inputs, lam_draws, log_eta_draws, rng, **param)
    z = _unconstrain(inputs, vals, param)
    return _starts_and_mass(z, chains, seed_mass, mass_sites=sorted(z))


def _starts_and_mass(z: dict, chains: int, seed_mass: bool, mass_sites: list):
    """Chain starts (the first ``chains`` draws of every site in ``z``, unconstrained) and,
    from 20 draws on, the initial inverse mass: each draw-variance of ``mass_sites``'
    coordinates, in NumPyro's order (sites sorted by name, each raveled)."""
    starts = {k: z[k][:chains] for k in sorted(z)}
    if chains == 1:
        starts = {k: v[0] for k, v in starts.items()}
    n = next(iter(z.values())).shape[0]
    inv_mass = None
    if seed_mass and n >= 20:
        var = np.concatenate([z[k].reshape(n, -1).var(axis=0) for k in mass_sites])
        # a coordinate the draws barely move (or move wildly) must not freeze or blow up
        # the first adaptation window
        inv_mass = np.clip(var, 1e-4, 1e2)
    return starts, inv_mass


def pymc_initvals(inputs: ModelInputs, draws_z, init_values, chains: int,
                  rng: np.random.Generator, param: dict) -> tuple[list[dict], dict | None]:
    """One dict of constrained starting values per chain for PyMC's free variables, from
    approximation draws ``(λ, log η)`` (the first ``chains`` of them) or from a point
    (auxiliaries drawn per chain); and, from approximation draws, the constrained values of
    all draws (to seed the mass matrix, :func:`_pymc_mass`), else None."""
    if draws_z is not None:
        vals = sampler_values(inputs, draws_z[0], draws_z[1], rng, **param)
        starts = [{k: np.asarray(v[c], float) for k, v in vals.items()} for c in range(chains)]
        return starts, (vals if draws_z[0].shape[0] >= 20 else None)
    lam = np.broadcast_to(init_values["lambda"], (chains, inputs.n_items))
    leta = point_log_eta(inputs, init_values.get("eta"))
    if leta is not None:
        leta = np.broadcast_to(leta, (chains,) + leta.shape)
    vals = sampler_values(inputs, lam, leta, rng, **param)
    return [{k: np.asarray(v[c], float) for k, v in vals.items()} for c in range(chains)], None
