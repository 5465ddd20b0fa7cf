"""Draws of any fit, as posterior SBC and its companion checks read them
(:mod:`.posterior_sbc`, :mod:`.posterior_sbc_checks`)."""

from __future__ import annotations

import numpy as np

from crowdrank.models.registry import ModelSpec, as_spec
from crowdrank.validation.pipelines.sbc_ranks import parameter_names, thin_draws

#: The parameter groups the verdict is given for: the centred scores (the data identify
#: only differences of λ) and the worker parameters. Raw λ is ranked and reported too.
GROUPS = ("lambda_centred", "eta")


def draws_of(post, n: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``n`` draws ``(λ (n, L), η (n, W[, K]) or None)`` of a posterior: evenly thinned
    from its draws (a sampler, the PPL approximations; all of them when it has fewer than
    ``n``), else independent draws from its marginals
    (:meth:`crowdrank.inference.posterior.Posterior.datatree`)."""
    if post.has_draws:
        tree = post.tree["posterior"]
        n = min(n, int(np.prod(tree["lambda"].shape[:2])))
        lam = thin_draws(np.asarray(tree["lambda"]), n)
        eta = thin_draws(np.asarray(tree["eta"]), n) if "eta" in tree else None
        return lam, eta
    # the draws Posterior.datatree would hold (to_datatree's construction: λ Gaussian, the
    # worker family's own draws), without building the tree (the cost of a replicate)
    rng = np.random.default_rng(int(seed))
    lam = post.mu + np.sqrt(post.sigma2) * rng.standard_normal((1, n, len(post.items)))
    family = post.model_spec().worker_prior
    eta = None if family is None else family.posterior_draws(rng, post.alpha, (1, n))[0]
    return lam[0], eta


def one_draw(post, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """One draw ``θ′`` of a posterior: a uniformly chosen draw of a sampler's (or
    approximation's) draws, else an exact draw of its marginals."""
    if post.has_draws:
        tree = post.tree["posterior"]
        lam = np.asarray(tree["lambda"])
        c, d = rng.integers(lam.shape[0]), rng.integers(lam.shape[1])
        eta = np.asarray(tree["eta"])[c, d] if "eta" in tree else None
        return lam[c, d], eta
    lam, eta = draws_of(post, 1, int(rng.integers(2**31)))
    return lam[0], None if eta is None else eta[0]


def log_eta_rows(model: str | ModelSpec, eta: np.ndarray | None) -> np.ndarray | None:
    """The worker table the simulator reads (``log η`` rows; CrowdBT ``[log η, log(1−η)]``),
    by the model's worker family."""
    spec = as_spec(model)
    if eta is None or spec.worker_prior is None:
        return None
    # a Beta accuracy drawn as 1.0 in float64 has log(1 − η) = −inf: a worker who never
    # flips a pair, which the simulator reads exactly (exp(−inf) = 0), so numpy's
    # divide-by-zero warning is silenced rather than the draw moved
    with np.errstate(divide="ignore"):
        return spec.worker_prior.log_table(np.asarray(eta, float), np,
                                           lambda x: np.log(np.clip(x, 1e-300, None)))


def checked_parameters(model: str | ModelSpec, data, base) -> tuple[list[str], list[str], list[int], int]:
    """``(names, families, columns, total)`` of the parameters the verdict checks (the
    groups of :data:`GROUPS`): their names and families, their columns among the ``total``
    flattened parameters (:func:`crowdrank.validation.pipelines.sbc_ranks.flatten_params`)."""
    alpha = base.alpha
    K = alpha.shape[1] if alpha is not None and np.ndim(alpha) == 2 else 0
    names, fams = parameter_names(model, data.n_items, data.n_workers, K)
    cols = [j for j, f in enumerate(fams) if f in GROUPS]
    return [names[j] for j in cols], [fams[j] for j in cols], cols, len(names)


#: Draws of a sampler's (or an approximation's) refit its moments are read from, at most.
MOMENT_DRAWS = 4000


def refit_moments(model: str | ModelSpec, post, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, sd)`` of every flattened parameter
    (:func:`crowdrank.validation.pipelines.sbc_ranks.flatten_params`) under a refit, for the
    standardised error ``z = (θ′ − mean) / sd`` (docs/sbc.md, "The tolerance verdict").

    Exact where the fit is closed-form: Gaussian ``λ`` from ``(μ, σ²)``, the centred scores
    ``λ_r − λ̄`` of independent Gaussians (mean ``μ_r − μ̄``, variance
    ``σ_r²(1 − 2/L) + Σσ²/L²``), and a worker family's Beta marginals (mean ``a/(a+b)``,
    variance ``ab/((a+b)²(a+b+1))``). A fit with draws is read from up to
    :data:`MOMENT_DRAWS` of them (more than the ``draws`` it is ranked among, so the moments'
    own Monte Carlo error is small beside the replicates'); ``draws`` ``(S, P)``, the flattened
    draws the ranks use, serve only a worker family without Beta marginals."""
    from crowdrank.models.errors import UsageError
    from crowdrank.validation.pipelines.sbc_ranks import flatten_params

    spec = as_spec(model)
    if post.has_draws or spec.fn("sbc_flatten") is not None:
        tree = post.tree["posterior"] if post.has_draws else None
        if tree is None:
            flat = np.asarray(draws, float)
        else:
            n = min(MOMENT_DRAWS, int(np.prod(tree["lambda"].shape[:2])))
            lam = thin_draws(np.asarray(tree["lambda"]), n)
            eta = thin_draws(np.asarray(tree["eta"]), n) if "eta" in tree else None
            flat = flatten_params(model, lam, eta)
        return flat.mean(axis=0), flat.std(axis=0, ddof=1)
    mu = np.asarray(post.mu, float)
    s2 = np.asarray(post.sigma2, float)
    L = mu.size
    means = [mu, mu - mu.mean()]
    vars_ = [s2, s2 * (1.0 - 2.0 / L) + s2.sum() / L**2]
    if spec.worker_prior is not None and post.alpha is not None:
        try:
            a, b = spec.worker_prior.beta_marginals(post.alpha)
            a, b = np.asarray(a, float), np.asarray(b, float)
            means.append(a / (a + b))
            vars_.append(a * b / ((a + b) ** 2 * (a + b + 1.0)))
        except UsageError:          # a family without Beta marginals: its draws
            eta = np.asarray(draws, float)[:, 2 * L:]
            means.append(eta.mean(axis=0))
            vars_.append(eta.var(axis=0, ddof=1))
    return np.concatenate(means), np.sqrt(np.concatenate(vars_))
