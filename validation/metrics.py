"""Per-parameter formulas comparing an approximate marginal ``q`` with MCMC draws.

docs/design.md, Validation: for every scalar parameter with MCMC mean ``m``, sd ``s`` and Monte Carlo
standard error ``e``, and an approximate marginal ``q`` — Gaussian for an item score
``λ_r`` (the online state ``N(μ_r, σ_r²)``), Beta for a worker component ``η_w^t`` (the
Dirichlet ``Dir(α_w)`` has Beta marginals ``Beta(α_t, S − α_t)``, ``S = Σ α``; CrowdBT's
accuracy is ``Beta(a_w, b_w)``) — we compute

- the standardised mean error ``z = (E_q − m) / s`` and its noise floor ``e / s``;
- the sd ratio ``sd_q / s``;
- ``KL(q ‖ p̂)`` where ``p̂`` is the moment fit to the draws (a Gaussian for ``λ``, a Beta
  by the method of moments for ``η``), in closed form;
- the 1-Wasserstein distance between the draws and ``q`` (``scipy.stats``), in units of ``s``;
- the share of the draws inside ``q``'s central 50 % and 90 % intervals.

Every function here is pure and vectorised over parameters: marginals are given by a
``family`` (``"normal"`` or ``"beta"``) and two parameter arrays ``(p1, p2)`` — ``(mean, sd)``
for ``normal``, ``(a, b)`` for ``beta``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import betaln, digamma

FAMILIES = ("normal", "beta")

#: Central interval probabilities whose coverage is reported.
COVERAGE_PROBS = (0.5, 0.9)

#: The "close enough" box of the aggregates (docs/design.md, Validation): |z| <= 0.1 and sd ratio in [0.9, 1.1].
Z_OK = 0.1
SD_RATIO_OK = (0.9, 1.1)


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"unknown marginal family {family!r}; expected one of {FAMILIES}")


def _dist(family: str, p1, p2):
    """The frozen SciPy distribution of ``q`` (vectorised over parameters)."""
    _check_family(family)
    p1, p2 = np.asarray(p1, float), np.asarray(p2, float)
    if family == "normal":
        if np.any(~np.isfinite(p1)) or np.any(~(p2 > 0)) or np.any(~np.isfinite(p2)):
            raise ValueError("normal marginals need finite means and finite sds > 0")
        return stats.norm(p1, p2)
    if np.any(~(p1 > 0)) or np.any(~(p2 > 0)) or np.any(~np.isfinite(p1 + p2)):
        raise ValueError("beta marginals need finite a > 0 and b > 0")
    return stats.beta(p1, p2)


def q_moments(family: str, p1, p2) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of ``q``: ``(μ, σ)`` for normal; Beta: ``a/(a+b)`` and
    ``sqrt(ab / ((a+b)²(a+b+1)))``."""
    d = _dist(family, p1, p2)
    if family == "normal":
        return np.asarray(d.mean(), float), np.asarray(d.std(), float)
    # ab/((a+b)²(a+b+1)) written as m(1−m)/(a+b+1): no overflow of a·b for huge a, b
    a, b = np.asarray(p1, float), np.asarray(p2, float)
    m = a / (a + b)
    return m, np.sqrt(m * (b / (a + b)) / (a + b + 1.0))


def dirichlet_marginals(alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Beta marginals of ``Dir(α)`` row-wise: ``η_t ~ Beta(α_t, S − α_t)`` with ``S = Σ α``.

    Parameters
    ----------
    alpha : array, shape (W, K)

    Returns
    -------
    a, b : arrays, shape (W, K)
    """
    alpha = np.asarray(alpha, float)
    if alpha.ndim != 2 or np.any(~(alpha > 0)) or np.any(~np.isfinite(alpha)):
        raise ValueError("Dirichlet concentrations must be a (W, K) array of finite values > 0")
    return alpha, alpha.sum(axis=1, keepdims=True) - alpha


def standardized_error(q_mean, m, s) -> np.ndarray:
    """``z = (E_q − m) / s`` (docs/design.md, Validation)."""
    return (np.asarray(q_mean, float) - np.asarray(m, float)) / np.asarray(s, float)


def noise_floor(mcse, s) -> np.ndarray:
    """``e / s``: how large ``|z|`` can be from Monte Carlo error of ``m`` alone."""
    return np.asarray(mcse, float) / np.asarray(s, float)


def sd_ratio(q_sd, s) -> np.ndarray:
    """``sd_q / s``: < 1 means the approximation is over-confident."""
    return np.asarray(q_sd, float) / np.asarray(s, float)


def kl_normal(mu_q, sd_q, mu_p, sd_p) -> np.ndarray:
    """``KL(N(μq, σq²) ‖ N(μp, σp²)) = log(σp/σq) + (σq² + (μq − μp)²) / (2σp²) − ½``."""
    mu_q, sd_q, mu_p, sd_p = (np.asarray(x, float) for x in (mu_q, sd_q, mu_p, sd_p))
    return np.log(sd_p / sd_q) + (sd_q**2 + (mu_q - mu_p) ** 2) / (2 * sd_p**2) - 0.5


def kl_beta(a_q, b_q, a_p, b_p) -> np.ndarray:
    """``KL(Beta(a_q, b_q) ‖ Beta(a_p, b_p))`` in closed form:
    ``ln B(a_p, b_p) − ln B(a_q, b_q) + (a_q − a_p) ψ(a_q) + (b_q − b_p) ψ(b_q)
    + (a_p − a_q + b_p − b_q) ψ(a_q + b_q)``."""
    a_q, b_q, a_p, b_p = (np.asarray(x, float) for x in (a_q, b_q, a_p, b_p))
    return (betaln(a_p, b_p) - betaln(a_q, b_q) + (a_q - a_p) * digamma(a_q)
            + (b_q - b_p) * digamma(b_q) + (a_p - a_q + b_p - b_q) * digamma(a_q + b_q))


def beta_moment_fit(mean, var) -> tuple[np.ndarray, np.ndarray]:
    """Method-of-moments Beta: ``c = m(1−m)/v − 1``, ``a = m c``, ``b = (1−m) c``.

    Needs ``0 < m < 1`` and ``0 < v < m(1−m)``, which holds for any non-constant draws in
    (0, 1) when ``v`` is their population (ddof = 0) variance; anything else is an error,
    never a NaN.
    """
    m, v = np.asarray(mean, float), np.asarray(var, float)
    bad = ~((m > 0) & (m < 1) & (v > 0) & (v < m * (1 - m)))
    if np.any(bad):
        raise ValueError(f"{int(bad.sum())} parameter(s) have draws with no Beta moment fit "
                         "(need 0 < mean < 1 and 0 < var < mean(1 - mean))")
    c = m * (1 - m) / v - 1
    return m * c, (1 - m) * c


def kl_to_moment_fit(family: str, p1, p2, draws: np.ndarray) -> np.ndarray:
    """``KL(q ‖ p̂)`` where ``p̂`` is the moment fit (same family) to ``draws`` ``(S, P)``."""
    draws = np.asarray(draws, float)
    mean, var = draws.mean(axis=0), draws.var(axis=0)
    if family == "normal":
        return kl_normal(p1, p2, mean, np.sqrt(var))
    _check_family(family)
    a, b = beta_moment_fit(mean, var)
    return kl_beta(p1, p2, a, b)


def quantile_grid(n: int) -> np.ndarray:
    """Mid-point probabilities ``(i + ½)/n``: an n-point quantile discretisation of ``q``."""
    return (np.arange(n) + 0.5) / n


def wasserstein_to_draws(family: str, p1, p2, draws: np.ndarray,
                         n_quantiles: int = 1000) -> np.ndarray:
    """1-Wasserstein distance between each column of ``draws`` ``(S, P)`` and ``q``.

    ``q`` is represented by its ``n_quantiles`` mid-point quantiles (deterministic, so no
    seed is needed); the distance is :func:`scipy.stats.wasserstein_distance` between the
    two empirical distributions. Divide by the MCMC sd to get it in units of ``s``.
    """
    draws = np.asarray(draws, float)
    q = _dist(family, p1, p2).ppf(quantile_grid(n_quantiles)[:, None])   # (n, P)
    q = np.broadcast_to(q, (n_quantiles, draws.shape[1]))
    return np.array([stats.wasserstein_distance(draws[:, j], q[:, j])
                     for j in range(draws.shape[1])])


def central_interval(family: str, p1, p2, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """``q``'s central interval of probability ``prob``: quantiles ``(1∓prob)/2``."""
    if not 0 < prob < 1:
        raise ValueError("interval probability must be in (0, 1)")
    d = _dist(family, p1, p2)
    return d.ppf((1 - prob) / 2), d.ppf((1 + prob) / 2)


def coverage(draws: np.ndarray, lo, hi) -> np.ndarray:
    """Share of each column of ``draws`` ``(S, P)`` inside ``[lo, hi]``."""
    draws = np.asarray(draws, float)
    return np.mean((draws >= lo) & (draws <= hi), axis=0)


def parameter_metrics(family: str, p1, p2, draws: np.ndarray, mcse) -> dict[str, np.ndarray]:
    """Every per-parameter metric of docs/design.md, Validation for one family of parameters.

    Parameters
    ----------
    family : {"normal", "beta"}
    p1, p2 : arrays, shape (P,)
        ``q``'s parameters (``(μ, σ)`` or ``(a, b)``).
    draws : array, shape (S, P)
        MCMC draws, chains and draws flattened.
    mcse : array, shape (P,)
        Monte Carlo standard error of each MCMC mean (from the chain structure, ArviZ).

    Returns
    -------
    dict of arrays, shape (P,)
        ``mcmc_mean, mcmc_sd, mcse, approx_mean, approx_sd, z, noise_floor, sd_ratio, kl,
        w1, coverage_50, coverage_90``.
    """
    draws = np.asarray(draws, float)
    if draws.ndim != 2:
        raise ValueError("draws must be (samples, parameters)")
    if not np.all(np.isfinite(draws)):
        raise ValueError("MCMC draws contain non-finite values")
    m, s = draws.mean(axis=0), draws.std(axis=0, ddof=1)
    if np.any(~(s > 0)):
        raise ValueError(f"{int(np.sum(~(s > 0)))} parameter(s) have constant MCMC draws")
    qm, qs = q_moments(family, p1, p2)
    out = {"mcmc_mean": m, "mcmc_sd": s, "mcse": np.asarray(mcse, float),
           "approx_mean": qm, "approx_sd": qs,
           "z": standardized_error(qm, m, s), "noise_floor": noise_floor(mcse, s),
           "sd_ratio": sd_ratio(qs, s), "kl": kl_to_moment_fit(family, p1, p2, draws),
           "w1": wasserstein_to_draws(family, p1, p2, draws) / s}
    for prob in COVERAGE_PROBS:
        lo, hi = central_interval(family, p1, p2, prob)
        out[f"coverage_{round(prob * 100)}"] = coverage(draws, lo, hi)
    return out


def aggregate(z, ratio, cov50, cov90) -> dict[str, float]:
    """Aggregates over parameters (docs/design.md, Validation): median and 90th percentile ``|z|``, median sd
    ratio, the share with ``|z| ≤ 0.1`` *and* sd ratio in ``[0.9, 1.1]``, mean coverages."""
    z, ratio = np.abs(np.asarray(z, float)), np.asarray(ratio, float)
    if z.size == 0:
        return {"n": 0}
    ok = (z <= Z_OK) & (ratio >= SD_RATIO_OK[0]) & (ratio <= SD_RATIO_OK[1])
    return {"n": int(z.size),
            "median_abs_z": float(np.median(z)),
            "p90_abs_z": float(np.percentile(z, 90)),
            "median_sd_ratio": float(np.median(ratio)),
            "share_close": float(np.mean(ok)),
            "mean_coverage_50": float(np.mean(cov50)),
            "mean_coverage_90": float(np.mean(cov90))}


# ------------------------------------------------------------------ identified quantities
# Item scores enter the likelihood only through differences, so the data identify the
# contrasts λ_i − λ_j and the centred scores λ_i − mean(λ); the common level mean(λ) is
# pinned by the prior alone. A mean-field Gaussian can be right about every contrast and
# still look over-confident on raw marginals if it misses the level's variance
# (docs/design.md, Validation). These functions give the approximation's marginal of each
# such quantity in closed form (a linear map of independent Gaussians is Gaussian) and the
# same quantity from MCMC draws, so the per-parameter metrics above apply unchanged.

def centred_normal(mu, sd) -> tuple[np.ndarray, np.ndarray]:
    """Marginals of ``c_i = λ_i − mean(λ)`` under independent ``λ_i ~ N(μ_i, σ_i²)``:
    mean ``μ_i − μ̄``, variance ``σ_i² (1 − 2/L) + Σ_j σ_j² / L²`` (``c = (I − 11ᵀ/L) λ``)."""
    mu, sd = np.asarray(mu, float), np.asarray(sd, float)
    L = mu.size
    if L < 2:
        raise ValueError("centred scores need at least 2 items")
    var = sd**2 * (1.0 - 2.0 / L) + np.sum(sd**2) / L**2
    return mu - mu.mean(), np.sqrt(var)


def level_normal(mu, sd) -> tuple[float, float]:
    """Marginal of the common level ``mean(λ)``: ``N(μ̄, Σ σ_i² / L²)``."""
    mu, sd = np.asarray(mu, float), np.asarray(sd, float)
    return float(mu.mean()), float(np.sqrt(np.sum(sd**2)) / mu.size)


def level_corrected_normal(mu, sd, mu0: float, sigma0: float) -> tuple[np.ndarray, np.ndarray]:
    """Raw marginals of the mean-field Gaussian with its common level replaced by the exact
    one: ``λ = m·1 + c``, ``c`` the centred part of ``q`` (:func:`centred_normal`) and
    ``m ~ N(μ0, σ0²/L)`` independent of it.

    Under an iid ``N(μ0, σ0²)`` prior and a likelihood of score differences only (every
    model here), the posterior of ``mean(λ)`` *is* its prior, independent of the centred
    scores (docs/design.md, 5.2), so this one shared shift component is exact and costs
    nothing: marginal mean ``μ_i − μ̄ + μ0``, variance ``var(c_i) + σ0²/L``.
    """
    cm, cs = centred_normal(mu, sd)
    L = np.asarray(mu).size
    return cm + float(mu0), np.sqrt(cs**2 + float(sigma0) ** 2 / L)


def contrast_normal(mu, sd, i, j) -> tuple[np.ndarray, np.ndarray]:
    """Marginals of ``λ_i − λ_j`` (index arrays ``i``, ``j``): ``N(μ_i − μ_j, σ_i² + σ_j²)``."""
    mu, sd = np.asarray(mu, float), np.asarray(sd, float)
    return mu[i] - mu[j], np.sqrt(sd[i] ** 2 + sd[j] ** 2)


def order_probability_normal(mu, sd, i, j) -> np.ndarray:
    """``P(λ_i > λ_j) = Φ((μ_i − μ_j) / √(σ_i² + σ_j²))`` under independent Gaussians."""
    m, s = contrast_normal(mu, sd, i, j)
    return stats.norm.cdf(m / s)


def order_probability_draws(draws, i, j) -> np.ndarray:
    """``P(λ_i > λ_j)`` from draws ``(S, L)``: the share of draws with ``λ_i > λ_j``, ties
    counted one half."""
    d = np.asarray(draws, float)
    a, b = d[:, i], d[:, j]
    return np.mean(a > b, axis=0) + 0.5 * np.mean(a == b, axis=0)


def centred_draws(draws) -> np.ndarray:
    """``λ − mean(λ)`` per draw; ``draws`` is ``(..., L)``."""
    d = np.asarray(draws, float)
    return d - d.mean(axis=-1, keepdims=True)


def order_probability_summary(p_q, p_mcmc, n_draws: int) -> dict[str, float]:
    """Aggregates of the pairwise order probabilities of ``q`` against MCMC's.

    ``median/p90/max_abs_diff`` of ``|p_q − p̂|``; ``mean_overconfidence`` is the mean of
    ``|p_q − ½| − |p̂ − ½|`` (positive: ``q`` is surer of the orders than MCMC);
    ``share_flipped`` the share of pairs that the two order differently (one above ½, the
    other below); ``median_iid_se`` the median ``√(p̂(1 − p̂)/S)``, the Monte Carlo error of
    ``p̂`` were the ``S`` draws independent (a lower bound for a Markov chain).
    """
    p_q, p_m = np.asarray(p_q, float), np.asarray(p_mcmc, float)
    if p_q.shape != p_m.shape or p_q.ndim != 1:
        raise ValueError("order probabilities must be 1-d arrays of one length")
    if p_q.size == 0:
        return {"n": 0}
    diff = np.abs(p_q - p_m)
    flipped = (p_q - 0.5) * (p_m - 0.5) < 0
    return {"n": int(p_q.size),
            "median_abs_diff": float(np.median(diff)),
            "p90_abs_diff": float(np.percentile(diff, 90)),
            "max_abs_diff": float(np.max(diff)),
            "mean_overconfidence": float(np.mean(np.abs(p_q - 0.5) - np.abs(p_m - 0.5))),
            "share_flipped": float(np.mean(flipped)),
            "median_iid_se": float(np.median(np.sqrt(p_m * (1 - p_m) / n_draws)))}
