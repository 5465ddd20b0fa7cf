"""Pareto-smoothed importance sampling diagnostic of an approximate posterior.

For draws ``θ_s ~ q`` of an approximation with a density, the log importance ratios
``log r_s = log p(θ_s) − log q(θ_s)`` (``p`` the unnormalised posterior, in the *same*
coordinates as ``q``) are Pareto-smoothed and the shape ``k̂`` of the generalised Pareto
fitted to their upper tail is the diagnostic of [Yao18] and [Vehtari24]: ``k̂ ≤ 0.5`` the
approximation is close enough for importance sampling to correct it, ``0.5 < k̂ ≤ 0.7``
usable with care, ``k̂ > 0.7`` "not reliable" (the importance-weighted estimates have no
usable rate of convergence, and ``q`` misses mass that ``p`` has). The fit is ArviZ's
(``arviz_stats`` ``psislw``), not a home-made one.

Two families of densities are diagnosed:

* the Gaussians of variational inference, Laplace and Pathfinder on the sampler's
  unconstrained coordinates (:mod:`crowdrank.inference.approx.target`): ``log p`` is the
  NumPyro potential there;
* the online and EP posteriors, whose density is the factorised
  ``Π_r N(λ_r; μ_r, σ_r²) Π_w Dir(η_w; α_w)`` (COUPLE) or ``Beta(a_w, b_w)`` (CrowdBT), in
  the model's own ``(λ, η)`` coordinates: :func:`online_log_ratios` scores draws of it
  against the exact log joint there (the model's likelihood plus the priors' log densities).
"""

from __future__ import annotations

import numpy as np

#: Above this k̂ the importance ratios have too heavy a tail: "not reliable" ([Vehtari24]).
KHAT_RELIABLE = 0.7
#: Below this k̂ the approximation is good (importance sampling corrects it quickly).
KHAT_GOOD = 0.5


def psis_diagnostic(log_p, log_q) -> tuple[float, np.ndarray]:
    """``(k̂, normalised smoothed log weights)`` of draws from ``q`` (ArviZ's PSIS); ``k̂``
    is ``-inf`` when the ratios are constant (``q`` is ``p``)."""
    from arviz_stats.base import array_stats

    lr = np.asarray(log_p, float) - np.asarray(log_q, float)
    if lr.ndim != 1 or lr.size < 10:
        raise ValueError(f"PSIS needs a vector of at least 10 log ratios, got shape {lr.shape}")
    if np.isnan(lr).any() or np.isposinf(lr).any():
        raise ValueError("PSIS: a log ratio is NaN or +inf (log q of a draw is -inf?)")
    if np.isneginf(lr).any():
        # a draw where p vanishes has weight 0: far below every finite ratio
        lr = np.where(np.isneginf(lr), np.min(lr[np.isfinite(lr)]) - 745.0, lr)
    if np.ptp(lr) <= 1e-12 * max(1.0, np.max(np.abs(lr))):
        # q equals p up to a constant: uniform weights, a tail with no shape at all
        return float("-inf"), np.full(lr.size, -np.log(lr.size))
    # ArviZ's psislw takes log-likelihood values (PSIS-LOO's ratios are 1/p(y_i|θ)) and
    # negates them: hand it the negated log ratios
    lw, khat = array_stats.psislw(-(lr - np.max(lr)))
    lw = np.asarray(lw, float)
    lw = lw - _logsumexp(lw)
    return float(khat), lw


def _logsumexp(x):
    m = np.max(x[np.isfinite(x)])
    return m + np.log(np.sum(np.exp(x - m)))


def resample_pool(log_p, log_q, n: int, seed: int = 0) -> tuple[float, np.ndarray]:
    """``(k̂, indices)``: ``n`` draws, with replacement, of a pool of draws of ``q`` with
    their Pareto-smoothed importance weights ``p/q`` (sampling-importance resampling), and
    the pool's k̂. A draw whose ``log p`` is not finite has weight 0."""
    lp = np.asarray(log_p, float)
    lq = np.asarray(log_q, float)
    ok = np.isfinite(lp) & np.isfinite(lq)
    khat, lw = psis_diagnostic(np.where(ok, lp, -np.inf), np.where(ok, lq, 0.0))
    w = np.exp(lw - lw.max())
    idx = np.random.default_rng(seed).choice(lw.size, size=int(n), replace=True,
                                             p=w / w.sum())
    return khat, idx


def label(khat: float | None) -> str:
    """``"good"``, ``"ok"``, ``"not reliable"`` or ``"n/a"``."""
    if khat is None:
        return "n/a"
    if np.isnan(khat) or khat > KHAT_RELIABLE:
        return "not reliable"
    return "good" if khat <= KHAT_GOOD else "ok"


# ------------------------------------------------------------------ online / EP
def online_draws(post, n: int, seed: int = 0, K: int | None = None,
                 beta: bool | None = None, cov=None) -> dict:
    """``n`` draws of an online/EP posterior's factorised density (``mu``, ``sigma2``,
    ``alpha`` of :class:`crowdrank.inference.online.OnlinePosterior`), with their ``log q``.

    Returns ``{"lambda": (n, L), "eta": (n, W[, K]) or None, "log_q": (n,)}`` in the
    posterior's own item/worker order. COUPLE's ``alpha`` rows are Dirichlets (cut to
    ``K``), CrowdBT's ``(a, b)`` Betas; ``η`` is scored on the first ``K − 1`` simplex
    coordinates (the Dirichlet's density), as the prior is in :func:`online_log_ratios`;
    ``K`` cuts COUPLE's rows to the data's longest ranking (the model's simplex).
    ``cov`` ``(L, L)``, when given, is the item scores' joint Gaussian covariance (the
    batch Laplace's), used in place of the independent ``sigma2``.
    """
    from scipy import stats

    rng = np.random.default_rng(seed)
    mu = np.asarray(post.mu, float)
    if cov is not None:
        q = stats.multivariate_normal(mu, np.asarray(cov, float))
        lam = np.atleast_2d(q.rvs(size=n, random_state=rng))
        log_q = np.atleast_1d(q.logpdf(lam))
    else:
        sd = np.sqrt(np.asarray(post.sigma2, float))
        lam = mu + sd * rng.standard_normal((n, mu.size))
        log_q = stats.norm.logpdf(lam, mu, sd).sum(axis=1)
    eta = None
    alpha = getattr(post, "alpha", None)
    if alpha is not None and np.size(alpha):
        alpha = np.asarray(alpha, float)
        if beta is None:
            beta = getattr(post, "model", "") == "crowdbt"
        alpha = alpha if K is None or beta else alpha[:, :K]
        if beta:
            a, b = alpha[:, 0], alpha[:, 1]
            # a draw of exactly 0 or 1 (a Beta with a or b in the thousands, as read-level's
            # accuracies) has no finite log density under p or q: keep it inside (0, 1)
            eta = np.clip(rng.beta(a, b, size=(n, a.size)), np.finfo(float).tiny,
                          np.nextafter(1.0, 0.0))
            log_q = log_q + stats.beta.logpdf(eta, a, b).sum(axis=1)
        else:
            eta = np.stack([rng.dirichlet(row, size=n) for row in alpha], axis=1)
            log_q = log_q + _dirichlet_logpdf(eta, alpha).sum(axis=1)
    return {"lambda": lam, "eta": eta, "log_q": log_q}


def _dirichlet_logpdf(x, alpha):
    """``log Dir(x_w; α_w)`` for ``x`` ``(n, W, K)``, ``alpha`` ``(W, K)``; an entry that
    underflowed to 0 is floored at the smallest positive float (its density is then
    extreme, as it should be)."""
    from scipy.special import gammaln

    lx = np.log(np.maximum(x, np.finfo(float).tiny))
    return (gammaln(alpha.sum(-1)) - gammaln(alpha).sum(-1)
            + ((alpha - 1.0) * lx).sum(-1))


def online_log_ratios(post, data, model: str, priors, n: int = 1000, seed: int = 0,
                      cov=None) -> dict:
    """``log p − log q`` of ``n`` draws of an online/EP posterior ``post``, with ``p`` the
    exact log joint in ``(λ, η)``: the likelihood (:func:`crowdrank.models.numpyro_models.
    column_loglik`, the JAX twin of :mod:`crowdrank.models.likelihood`, vectorised over
    draws) plus ``log N(λ_r; μ0, σ0²)`` and the worker prior's log density (Dirichlet or
    Beta; the same coordinates as ``q``). Returns the draws, ``log_p``, ``log_q``, ``khat``.
    Any posterior with these closed-form marginals is scored the same way (the batch
    Laplace with its joint ``cov`` in ``post.items`` order, an external CSV's Gaussian
    marginals).
    """
    import jax
    from scipy import stats

    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.model_inputs import model_inputs

    from .target import _chunks, draws_per_batch, x64

    spec_items = list(post.items)
    item_pos = {str(i): k for k, i in enumerate(spec_items)}
    order = np.array([item_pos[str(i)] for i in data.items])
    inputs = model_inputs(model, data, priors)
    beta = inputs.spec.eta_scalar        # a Beta accuracy per worker, not Dirichlet rows
    d = online_draws(post, n, seed, K=inputs.K, beta=beta, cov=cov)
    lam = d["lambda"][:, order]
    log_p = stats.norm.logpdf(lam, inputs.mu0, inputs.sigma0).sum(axis=1)
    eta = None
    if d["eta"] is not None:
        wpos = {str(w): k for k, w in enumerate(post.workers)}
        worder = np.array([wpos[str(w)] for w in data.workers])
        eta = d["eta"][:, worder]
        alpha = np.asarray(inputs.alpha, float)
        if eta.ndim == 2:
            log_p = log_p + stats.beta.logpdf(eta, alpha[:, 0], alpha[:, 1]).sum(axis=1)
        else:
            log_p = log_p + _dirichlet_logpdf(eta, alpha).sum(axis=1)
    with x64():
        def ll(la, et):
            if et is None:
                return npm.column_loglik(inputs, la).sum()
            if et.ndim == 1:
                log_eta = jax.numpy.stack([jax.numpy.log(et), jax.numpy.log1p(-et)], axis=1)
            else:
                log_eta = jax.numpy.log(jax.numpy.maximum(et, np.finfo(float).tiny))
            return npm.column_loglik(inputs, la, log_eta=log_eta).sum()

        f = jax.jit(jax.vmap(ll) if eta is not None else jax.vmap(lambda la: ll(la, None)))
        # in blocks whose memory does not grow with the data (draws_per_batch), padded to
        # one shape so that the function compiles once (the target's own blocking)
        b, n_draws = draws_per_batch(inputs), lam.shape[0]
        if eta is None:
            parts = [np.asarray(f(la), float) for la in _chunks(lam, b)]
        else:
            parts = [np.asarray(f(la, et), float)
                     for la, et in zip(_chunks(lam, b), _chunks(eta, b))]
        log_p = log_p + np.concatenate(parts)[:n_draws]
    khat, lw = psis_diagnostic(log_p, d["log_q"])
    return {"lambda": lam, "eta": eta, "log_p": log_p, "log_q": d["log_q"], "khat": khat,
            "log_weights": lw}


def posterior_khat(post, data, model: str, priors, n: int = 1000, seed: int = 0) -> dict:
    """``{"psis_khat", "psis_label"}`` of any fitted posterior (a
    :class:`~crowdrank.inference.posterior.Posterior`): the value its method computed
    (the PPL approximations); else, for a posterior whose closed-form marginals are its
    density — the online and EP updates, the batch Laplace (the joint Gaussian at the MAP,
    its full covariance), an external CSV's Gaussian marginals, any other method that
    reports marginals and no draws — :func:`online_log_ratios`; ``None`` (label ``"n/a"``)
    for a method without a density of its draws (the bootstrap, moment-matched marginals)
    and, with the reason, for marginals with a zero sd (a point mass has no density)."""
    d = getattr(post, "diagnostics", {}) or {}
    if d.get("psis_khat") is not None:
        return {"psis_khat": float(d["psis_khat"]), "psis_label": label(d["psis_khat"])}
    marg = getattr(post, "marginals", None)
    if marg is None or marg.moment_matched or getattr(post, "tree", None) is not None:
        return {"psis_khat": None, "psis_label": "n/a"}
    sigma2 = np.asarray(marg.sigma2, float)
    if not np.all(sigma2 > 0):
        bad = int(np.sum(~(sigma2 > 0)))
        return {"psis_khat": None, "psis_label": f"n/a ({bad} item sd(s) not > 0: no "
                "density)"}
    cov = _joint_cov(post)
    try:
        k = online_log_ratios(post, data, model, priors, n=n, seed=seed, cov=cov)["khat"]
    except ValueError as exc:      # no usable ratios: said, not hidden as a number
        return {"psis_khat": None, "psis_label": f"n/a ({exc})"}
    return {"psis_khat": float(k), "psis_label": label(k)}


def _joint_cov(post):
    """The item scores' joint covariance of a Gaussian approximation that has one (the
    batch Laplace: ``native.cov``) when it is positive definite, else ``None`` (the
    independent marginals are the density)."""
    cov = getattr(getattr(post, "native", None), "cov", None)
    if cov is None:
        return None
    cov = np.asarray(cov, float)
    if cov.shape != (len(post.items),) * 2:
        return None
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:       # ML's sum-to-zero covariance is singular
        return None
    return cov
