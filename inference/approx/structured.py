"""Structured and coupled variational inference: a Gaussian on the item scores times one
Dirichlet (COUPLE) or Beta (CrowdBT) per worker, fitted by NumPyro's SVI.

The ADVI families of :mod:`crowdrank.inference.approx.vi` are Gaussians in unconstrained
coordinates; a worker whose ``η_w`` piles against a corner of its simplex is then a
Gaussian on a log scale, whose tail misses where the posterior mass is. Here the worker
factor lives on the simplex itself, as in structured stochastic VI ([Hoffman15]: keep the
local factors in their conjugate family, let them depend on the global ones).

The program is the model's own (:func:`crowdrank.models.numpyro_models.model` with
``simplex="dirichlet"``, ``level="iid"``: sites ``lambda`` ``(L,)`` and ``eta``, a
``Dirichlet(α_w)`` row per worker, or CrowdBT's ``Beta(a_w, b_w)``). Two guides:

* ``structured-vi``: ``q(λ, η) = N(λ; m, S) Π_w Dir(η_w; c_w)`` (CrowdBT: ``Beta(c_w1,
  c_w2)``), ``S`` full (``L L^T``, ``L`` lower-triangular) or low-rank plus diagonal
  (``covariance="lowrank"``), ``c_w > 0`` free. A full-rank Gaussian on ``λ`` is the same
  family as one on the centred coordinates (a linear bijection), so the iid sites lose
  nothing.
* ``coupled-vi``: the worker factor depends on the scores the worker saw,

  ``log c_w(λ) = a_w + B_w (s_w(λ) − s_w(m))``,      (C1)

  ``a_w ∈ R^K``, ``B_w ∈ R^{K × d}`` free, ``s_w(λ) ∈ R^d`` (``d = K_data − 1``) the mean
  over ``w``'s rankings of the centred score at each reported position,

  ``s_{w,t}(λ) = mean_{r by w, |r| > t} (λ_{r_t} − mean_j λ_{r_j})``,      (C2)

  linear in ``λ`` (the last position is left out: with full rankings it is minus the sum of
  the others). A worker whose reports agree with a draw of ``λ`` sees a larger ``s_{w,1}``;
  ``B_w`` learns how its ``η_w`` moves with that agreement — the coupling between ``η_w`` and
  the items it ranked that the factorised methods (online, EP, ``structured-vi``) drop.
  ``B = 0`` is ``structured-vi``, where the fit starts. The concentrations are ``exp`` of
  an affine map (not softplus): a corner worker's posterior concentration is in the
  thousands, reached by Adam in a few hundred steps on the log scale.

Both are reparametrised: the Gaussian directly, the Dirichlet and Beta draws through their
Gamma draws with implicit gradients ([Figurnov18]; NumPyro's ``Dirichlet.rsample``). The
ELBO is maximised by :func:`crowdrank.inference.approx.vi.run_svi` (the ADVI schedule and
stopping rule).

**Densities and PSIS.** Draws are scored in the model's own coordinates (``λ``, and the
first ``K − 1`` entries of ``η_w``, where NumPyro's Dirichlet and Beta densities live):
``log q`` the guide's density, ``log p`` the program's log joint (priors and likelihood,
``numpyro.infer.util.log_density``). Their ratio is the importance weight of [Yao18];
``psis=True`` draws ``pool`` draws of ``q`` and returns ``draws`` of their
Pareto-smoothed importance resample (with replacement), k̂ of the pool beside.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors

from .psis import KHAT_RELIABLE, resample_pool
from .result import ApproxFit
from .target import draws_per_batch, x64
from .vi import SviOptions

#: The worker families the guides have a factor for (the family's name in
#: :mod:`crowdrank.models.families`).
FAMILIES = ("dirichlet", "beta")
#: The exponent of (C1) is clipped here: a concentration of e^20 is a point mass already,
#: and the clip keeps a wild early draw of ``λ`` from overflowing the Gamma sampler.
LOG_CONC_MAX = 20.0


@dataclass
class StructuredOptions(SviOptions):
    """Options of ``structured-vi`` and ``coupled-vi`` (module docstring); the SVI loop's
    from :class:`~crowdrank.inference.approx.vi.SviOptions`."""

    covariance: str = "full"    #: the scores' Gaussian: "full" or "lowrank"
    rank: int | None = None     #: lowrank's rank (default ⌈√L⌉)
    coupled: bool = False       #: the coupled guide (C1)
    draws: int = 1000           #: draws returned
    pool: int = 4000            #: draws of q scored before PSIS resampling (psis=True)
    backend: str = "numpyro"


def worker_family(model: str) -> str:
    """The worker family of ``model`` that the guides have a factor for; a ``ValueError``
    names the models they fit otherwise."""
    from crowdrank.models.registry import REGISTRY, get

    spec = get(model)
    fam = spec.worker_prior.name if spec.has_eta else None
    if fam not in FAMILIES:
        fits = [n for n, s in REGISTRY.items()
                if s.has_eta and s.worker_prior.name in FAMILIES]
        raise ValueError(f"structured-vi and coupled-vi need a Dirichlet or Beta worker "
                         f"factor ({', '.join(fits)}); {model!r} has "
                         f"{'none' if fam is None else 'a ' + fam + ' one'}: use "
                         "fullrank-advi or flow-vi")
    return fam


# ---------------------------------------------------------------- guide factors
def score_factor(loc0, scale0: float = 0.1, covariance: str = "full", rank=None,
                 seed: int = 0, name: str = "lambda"):
    """Sample site ``name`` from a Gaussian with ``numpyro.param`` sites ``{name}_loc`` and
    ``{name}_scale_tril`` (full) or ``{name}_cov_factor``/``{name}_cov_diag`` (low rank,
    the factor started at seeded draws of sd 0.01: at exactly 0 its gradient vanishes).
    Returns the draw and the Gaussian's mean."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    L = int(np.size(loc0))
    loc = numpyro.param(f"{name}_loc", jnp.asarray(loc0, float))
    if covariance == "full":
        tril = numpyro.param(f"{name}_scale_tril", scale0 * jnp.eye(L),
                             constraint=constraints.scaled_unit_lower_cholesky)
        q = dist.MultivariateNormal(loc, scale_tril=tril)
    elif covariance == "lowrank":
        r = int(rank) if rank is not None else int(np.ceil(np.sqrt(L)))
        f0 = 0.01 * np.random.default_rng(seed).standard_normal((L, r))
        factor = numpyro.param(f"{name}_cov_factor", jnp.asarray(f0))
        diag = numpyro.param(f"{name}_cov_diag", jnp.full(L, scale0 ** 2),
                             constraint=constraints.positive)
        q = dist.LowRankMultivariateNormal(loc, factor, diag)
    else:
        raise ValueError(f"covariance must be 'full' or 'lowrank', got {covariance!r}")
    return numpyro.sample(name, q), loc


def worker_factor(family: str, conc, name: str = "eta"):
    """Sample site ``name``: one ``Dirichlet(conc_w)`` row per worker (``family
    "dirichlet"``, ``conc`` ``(W, K)``) or ``Beta(conc_w1, conc_w2)`` (``"beta"``, ``(W,
    2)``). ``conc`` is a ``numpyro.param`` (structured) or a function of ``λ`` (coupled)."""
    import numpyro
    import numpyro.distributions as dist

    if family == "dirichlet":
        return numpyro.sample(name, dist.Dirichlet(conc).to_event(1))
    if family == "beta":
        return numpyro.sample(name, dist.Beta(conc[:, 0], conc[:, 1]).to_event(1))
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


def free_concentrations(conc0, name: str = "eta"):
    """A positive ``numpyro.param`` ``{name}_conc`` started at ``conc0`` (NumPyro
    optimises its log)."""
    import jax.numpy as jnp
    import numpyro
    from numpyro.distributions import constraints

    return numpyro.param(f"{name}_conc", jnp.asarray(conc0, float),
                         constraint=constraints.positive)


def position_summary(inputs, n_positions: int | None = None):
    """``λ -> s`` ``(W, d)`` of (C2), and ``d``: the mean centred score at each of the
    first ``d`` reported positions over each worker's rankings (``d = K_data − 1`` by
    default, at least 1); a worker never seen at a position gets 0 there."""
    import jax
    import jax.numpy as jnp

    order = np.asarray(inputs.order)
    valid = order >= 0
    d = max(1, order.shape[1] - 1) if n_positions is None else int(n_positions)
    W = int(inputs.n_workers)
    who = np.asarray(inputs.obs_worker)
    counts = np.zeros((W, d))
    np.add.at(counts, who, valid[:, :d].astype(float))
    inv = 1.0 / np.maximum(counts, 1.0)
    idx = jnp.asarray(np.where(valid, order, 0))
    vmask = jnp.asarray(valid)
    n_valid = jnp.asarray(valid.sum(axis=1, keepdims=True).astype(float))
    who_j, inv_j = jnp.asarray(who), jnp.asarray(inv)

    def summary(lam):
        x = jnp.where(vmask, lam[idx], 0.0)
        centred = jnp.where(vmask, x - x.sum(axis=1, keepdims=True) / n_valid, 0.0)
        return jax.ops.segment_sum(centred[:, :d], who_j, num_segments=W) * inv_j

    return summary, d


# ---------------------------------------------------------------- the guide
def make_guide(inputs, family: str, o: StructuredOptions):
    """The guide of the module docstring for ``inputs``: a function without arguments
    whose ``numpyro.param`` sites are the variational parameters."""
    import jax.numpy as jnp
    import numpyro

    L = int(inputs.n_items)
    loc0 = np.full(L, float(inputs.mu0))
    conc0 = np.asarray(inputs.alpha, float)        # the prior: where q starts
    if not o.coupled:
        def guide():
            score_factor(loc0, covariance=o.covariance, rank=o.rank, seed=o.seed)
            worker_factor(family, free_concentrations(conc0))
        return guide

    summary, d = position_summary(inputs)

    def coupled_guide():
        lam, m = score_factor(loc0, covariance=o.covariance, rank=o.rank, seed=o.seed)
        a = numpyro.param("eta_log_conc", jnp.log(jnp.asarray(conc0)))
        B = numpyro.param("eta_coupling", jnp.zeros(conc0.shape + (d,)))
        ds = summary(lam) - summary(m)                         # (W, d), (C1)
        log_c = jnp.clip(a + jnp.einsum("wkd,wd->wk", B, ds), -LOG_CONC_MAX, LOG_CONC_MAX)
        worker_factor(family, jnp.exp(log_c))
    return coupled_guide


def _program(inputs):
    from crowdrank.models import numpyro_models as npm

    def prog():
        npm.model(inputs, simplex="dirichlet", level="iid", pointwise=False)
    return prog


def score_draws(prog, guide, params, key, n: int, batch: int):
    """``n`` draws of the fitted guide: ``(λ (n, L), η, log q (n,), log p (n,))``, in
    blocks of ``batch`` draws (module docstring, "Densities and PSIS")."""
    import jax
    import jax.numpy as jnp
    from numpyro import handlers
    from numpyro.infer.util import log_density

    def one(k):
        tr = handlers.trace(handlers.seed(handlers.substitute(guide, params), k)).get_trace()
        vals = {s: tr[s]["value"] for s in ("lambda", "eta")}
        log_q = sum(jnp.sum(site["fn"].log_prob(site["value"])) for site in tr.values()
                    if site["type"] == "sample")
        log_p, _ = log_density(prog, (), {}, vals)
        return vals["lambda"], vals["eta"], log_q, log_p

    f = jax.jit(jax.vmap(one))
    keys = jax.random.split(key, -(-n // batch) * batch)
    outs = [f(keys[i:i + batch]) for i in range(0, len(keys), batch)]
    lam, eta, lq, lp = (np.concatenate([np.asarray(o[j], float) for o in outs])[:n]
                        for j in range(4))
    return lam, eta, lq, lp


def fit_structured(data: Rankings, model: str, priors: Priors,
                   options: StructuredOptions | None = None, *, psis: bool = False,
                   **kw) -> ApproxFit:
    """Fit ``model`` by the structured guide (``coupled=False``, method ``structured-vi``)
    or the coupled one (``coupled-vi``) of the module docstring; ``kw`` override fields of
    ``options``; ``psis`` returns the PSIS resample of ``pool`` draws."""
    import jax

    from crowdrank.models.model_inputs import model_inputs

    from .vi import run_svi

    o = StructuredOptions(**{**(options.__dict__ if options else {}), **kw})
    method = "coupled-vi" if o.coupled else "structured-vi"
    if o.backend != "numpyro":
        raise ValueError(f"{method} is a NumPyro guide (backend 'numpyro'), got {o.backend!r}")
    family = worker_family(model)
    t0 = time.perf_counter()
    with x64():
        inputs = model_inputs(model, data, priors)
        prog, guide = _program(inputs), make_guide(inputs, family, o)
        params, diag = run_svi(prog, guide, o, method)
        n = max(o.pool, o.draws) if psis else o.draws
        lam, eta, log_q, log_p = score_draws(prog, guide, params,
                                             jax.random.PRNGKey(o.seed + 1), n,
                                             min(n, draws_per_batch(inputs)))
    diag.update(seconds=time.perf_counter() - t0, dim=int(inputs.n_items + np.size(
        inputs.alpha) - (inputs.n_workers if family == "dirichlet" else 0)),
        coordinates="model (λ, η on its simplex)")
    fit = ApproxFit(method=method, model=model, backend="numpyro", lam=lam, eta=eta,
                    items=list(data.items), workers=list(data.workers), z=None,
                    log_q=log_q, log_p=log_p, diagnostics=diag)
    return pooled_psis(fit, o.draws, o.seed + 7) if psis else fit


def fit_coupled(data: Rankings, model: str, priors: Priors,
                options: StructuredOptions | None = None, *, psis: bool = False,
                **kw) -> ApproxFit:
    """:func:`fit_structured` with the coupled guide (C1)."""
    return fit_structured(data, model, priors, options, psis=psis, **{**kw, "coupled": True})


def pooled_psis(fit: ApproxFit, draws: int, seed: int) -> ApproxFit:
    """``fit``'s draws (a pool of ``q``) replaced by ``draws`` of their Pareto-smoothed
    importance resample, with the pool's k̂ (:func:`~.psis.resample_pool`)."""
    khat, idx = resample_pool(fit.log_p, fit.log_q, draws, seed)
    fit.diagnostics.update(khat=khat, psis_reliable=bool(khat <= KHAT_RELIABLE),
                           pool=len(fit.log_p))
    fit.lam = fit.lam[idx]
    fit.eta = None if fit.eta is None else fit.eta[idx]
    fit.z = None if fit.z is None else fit.z[idx]
    fit.log_q, fit.log_p = fit.log_q[idx], fit.log_p[idx]
    fit.psis_resampled = True
    return fit
