"""Is a NUTS reference right? Checks beyond the convergence gate.

A sampler can pass the gate (no divergence, large ESS, R-hat ≈ 1) and still be wrong, for
example when a simplex transform clips small components. Two checks here see that:

* :func:`simplex_prior_check` — a *prior-only* run against the exact marginals of its
  prior: for ``η ~ Dirichlet(α)``, ``η_t ~ Beta(α_t, Σα − α_t)``, so ``E[η_t] = α_t/Σα``
  and ``P(log η_t < c)`` is a regularised incomplete Beta function; the deviations are
  judged against the draws' own Monte Carlo standard errors (ArviZ).
* :func:`backend_agreement` — two posteriors of the same model on the same data (NumPyro
  and PyMC) must agree for every scalar parameter within a few MCSE: the standardised
  difference ``(m_a − m_b)/√(mcse_a² + mcse_b²)`` is ~N(0, 1) when both are right, so the
  threshold is the Bonferroni-corrected normal quantile over all parameters (a family-wise
  false-alarm rate of ``alpha``), never below 3.

Both return plain dataclasses with ``to_dict`` (JSON-safe) for ``metrics.json`` and the
report. NumPy, SciPy and ArviZ only; nothing here samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats


def _finite(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _mcse_mean(draws: np.ndarray) -> np.ndarray:
    """MCSE of the mean of ``draws`` ``(chain, draw, P)`` per parameter (ArviZ)."""
    import arviz_stats as azs

    return np.asarray(azs.mcse(draws, method="mean", chain_axis=0, draw_axis=1), float)


def _ess(draws: np.ndarray, method: str) -> np.ndarray:
    """ArviZ's ESS (``method`` "bulk" or "mean") of ``draws`` ``(chain, draw, P)``."""
    import arviz_stats as azs

    return np.asarray(azs.ess(draws, method=method, chain_axis=0, draw_axis=1), float)


def _excursions(above: np.ndarray) -> np.ndarray:
    """Number of maximal runs of ``True`` along the draw axis of ``above`` ``(chain, draw,
    P)``, summed over chains: how many separate visits the chains paid to the tail."""
    starts = above[:, 1:] & ~above[:, :-1]
    return (starts.sum(axis=1) + above[:, 0]).sum(axis=0)


def _indicator_ess(ind: np.ndarray, n: int) -> np.ndarray:
    """ESS of indicator draws, in ``[1, n]``; an indicator that never changes has no
    autocorrelation estimate (NaN) and counts as ``n`` (its z is then set by the count)."""
    ess = np.nan_to_num(_ess(ind, "mean"), nan=float(n))
    return np.clip(ess, 1.0, float(n))


# ------------------------------------------------------------------ prior-only check
@dataclass
class PriorCheck:
    """Result of :func:`simplex_prior_check` (one row per simplex entry)."""

    passed: bool
    rows: list[dict] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"passed": self.passed, "rows": self.rows, "reasons": list(self.reasons)}


def simplex_prior_check(eta: np.ndarray, alpha: np.ndarray, *, log_threshold: float = -20.0,
                        z_max: float = 5.0, upper_p: float = 0.01) -> PriorCheck:
    """Compare prior-only draws of one Dirichlet simplex with its exact marginals.

    Three statistics per entry ``t``, each a z against its exact value under
    ``η_t ~ Beta(α_t, Σα − α_t)``:

    * ``z_mean``, the mean. Its standard error is the *exact* sd of ``η_t`` over the square
      root of an effective sample size (a score test [Rao48]: the variance is the null's, not
      the draws'). For a small ``α_t`` the mean is carried by rare draws in the upper tail
      (``α_4 = 0.0077``: ~80 % of ``E[η_4]`` from the ~1 % of draws with ``η_4 > 0.1``), and
      a sample sd is carried by the same draws, so a run that visited the tail too rarely
      had both a small mean and a small MCSE: the self-normalised z of ArviZ's MCSE has a
      heavy lower tail (2 × 1,000 NUTS draws: |z| > 5 on 1 % of runs, down to z = −8.7,
      against none in 1,000 runs of the exact-variance z). The effective size is the
      smaller of ArviZ's ESS of ``η_t`` and the ESS of the tail-visit indicator below
      [Vehtari21], since for a tail-carried mean the independent units are the visits.
      ArviZ's own MCSE is kept in the row (``mcse_arviz``) for comparison.
    * ``z_above``, the upper tail: the share of draws above the exact ``1 − upper_p``
      quantile of ``η_t``, against ``upper_p``, with the indicator's own ESS. The row also
      counts the separate visits (``excursions``: maximal runs of consecutive draws above
      the quantile) and their iid expectation: the effective number of tail visits on which
      the mean rests is ``ess_above · upper_p``.
    * ``z_tail``, the lower tail ``P(log η_t < log_threshold)``: with the paper's geometric
      prior most of the mass of the smallest component lies below ``−20``, which a clipping
      transform cannot represent. Its MCSE comes from the indicator's bulk ESS, floored at
      the binomial error of 100 draws.

    What this can see at a given size is limited by the tail's rarity, not by the sampler
    (docs/design.md §5.1): at 2 × 1,000 draws about 20 draws are expected above the 0.99
    quantile, so the mean and ``z_above`` cannot tell a halved tail rate from chance; the
    lower-tail statistic catches a wrong ``α_t`` by far more (a ×2 or ×0.5 error moves
    ``P(log η_4 < −20)`` by ≳ 9 standard errors).

    Parameters
    ----------
    eta : (chain, draw, K)
        Draws of ``η ~ Dirichlet(α)`` (one worker; CrowdBT: ``[η, 1 − η]``).
    alpha : (K,)
    log_threshold : float
        The lower-tail statistic is ``P(log η_t < log_threshold)`` for every ``t``.
    z_max : float
        A deviation larger than ``z_max`` standard errors fails.
    upper_p : float
        The upper-tail statistic counts draws above the exact ``1 − upper_p`` quantile.
    """
    eta = np.asarray(eta, float)
    alpha = np.asarray(alpha, float)
    if eta.ndim != 3 or eta.shape[2] != alpha.size:
        raise ValueError(f"eta must be (chain, draw, {alpha.size}), got {eta.shape}")
    if not 0.0 < upper_p < 0.5:
        raise ValueError(f"upper_p must lie in (0, 0.5), got {upper_p}")
    S = alpha.sum()
    n = eta.shape[0] * eta.shape[1]
    mean_exact = alpha / S
    sd_exact = np.sqrt(alpha * (S - alpha) / (S ** 2 * (S + 1.0)))
    mcse_arviz = _mcse_mean(eta)
    ess_eta = np.clip(np.nan_to_num(_ess(eta, "mean"), nan=1.0), 1.0, float(n))
    # the upper tail: visits above the exact (1 − upper_p) quantile
    q_upper = stats.beta.isf(upper_p, alpha, S - alpha)
    above = eta > q_upper
    ess_above = _indicator_ess(above.astype(float), n)
    exc = _excursions(above)
    exc_iid = n * upper_p * (1 - upper_p) + eta.shape[0] * upper_p
    ess_used = np.minimum(ess_eta, ess_above)
    mcse = sd_exact / np.sqrt(ess_used)
    # the lower tail: mass below exp(log_threshold)
    with np.errstate(divide="ignore"):
        below = (np.log(eta) < log_threshold).astype(float)
    p_exact = stats.beta.cdf(math.exp(log_threshold), alpha, S - alpha)
    # the indicator's MCSE from its own ESS; floor at the binomial error of 100 draws so a
    # run whose indicator never changes (a clipped tail) is not judged infinitely precise
    ess_b = np.nan_to_num(_ess(below, "bulk"), nan=1.0)
    rows, reasons = [], []
    for t in range(alpha.size):
        m = float(eta[..., t].mean())
        z_mean = (m - mean_exact[t]) / max(float(mcse[t]), 1e-300)
        p_up = float(above[..., t].mean())
        z_above = (p_up - upper_p) / math.sqrt(upper_p * (1 - upper_p) / ess_above[t])
        p_hat = float(below[..., t].mean())
        se_p = math.sqrt(max(p_exact[t] * (1 - p_exact[t]), 1.0 / n)
                         / max(min(ess_b[t], n), 1.0))
        z_tail = (p_hat - p_exact[t]) / max(se_p, 1e-12)
        ok = abs(z_mean) <= z_max and abs(z_tail) <= z_max and abs(z_above) <= z_max
        rows.append({"t": t + 1, "alpha": float(alpha[t]), "mean_exact": float(mean_exact[t]),
                     "mean_draws": m, "sd_exact": float(sd_exact[t]), "ess_eta": float(ess_eta[t]),
                     "mcse": float(mcse[t]), "mcse_arviz": float(mcse_arviz[t]),
                     "z_mean": _finite(z_mean),
                     "q_upper": float(q_upper[t]), "p_above_draws": p_up,
                     "excursions": int(exc[t]), "excursions_iid": float(exc_iid),
                     "ess_above": float(ess_above[t]),
                     "tail_visits_effective": float(ess_above[t] * upper_p),
                     "z_above": _finite(z_above),
                     "p_below_exact": float(p_exact[t]), "p_below_draws": p_hat,
                     "z_tail": _finite(z_tail), "passed": bool(ok)})
        if not ok:
            reasons.append(f"η_{t + 1}: E {m:.5f} vs exact {mean_exact[t]:.5f} "
                           f"(z {z_mean:+.1f}); P(η > {q_upper[t]:.3g}) {p_up:.4f} vs "
                           f"exact {upper_p:g} (z {z_above:+.1f}, {int(exc[t])} visits, "
                           f"{exc_iid:.0f} expected iid); P(log η < {log_threshold:g}) "
                           f"{p_hat:.3f} vs exact {p_exact[t]:.3f} (z {z_tail:+.1f})")
    return PriorCheck(passed=not reasons, rows=rows, reasons=reasons)


# ------------------------------------------------------------------ backend agreement
@dataclass
class Agreement:
    """Result of :func:`backend_agreement`."""

    agree: bool
    z_max: float
    n_params: int
    n_disagree: int
    worst: list[dict] = field(default_factory=list)
    labels: tuple[str, str] = ("numpyro", "pymc")
    table: object = None                       # pandas.DataFrame, one row per parameter

    def to_dict(self) -> dict:
        return {"agree": self.agree, "z_max": self.z_max, "n_params": self.n_params,
                "n_disagree": self.n_disagree, "labels": list(self.labels),
                "worst": self.worst}

    def verdict(self) -> str:
        a, b = self.labels
        if self.agree:
            return (f"{a} and {b} agree on all {self.n_params} parameters "
                    f"(|z| ≤ {self.z_max:.2f})")
        return (f"{a} and {b} DISAGREE on {self.n_disagree} of {self.n_params} parameters "
                f"(|z| > {self.z_max:.2f}); worst: {self.worst[0]['param']} "
                f"z = {self.worst[0]['z']:+.1f}")


def _scalar_draws(idata, var: str):
    da = idata["posterior"][var]
    other = [d for d in da.dims if d not in ("chain", "draw")]
    da = da.transpose("chain", "draw", *other)
    x = np.asarray(da.values, float)
    names = []
    if other:
        grids = np.meshgrid(*[np.asarray(da[d].values) for d in other], indexing="ij")
        for idx in zip(*[g.ravel() for g in grids]):
            names.append(f"{var}[{','.join(str(i) for i in idx)}]")
    else:
        names = [var]
    return x.reshape(x.shape[0], x.shape[1], -1), names


def backend_agreement(idata_a, idata_b, *, alpha: float = 0.01, labels=("numpyro", "pymc"),
                      variables=("lambda", "eta"), n_worst: int = 10) -> Agreement:
    """Do two posteriors of the same model and data agree, parameter by parameter?

    Parameters are matched by name and coordinate labels (real ids), never by position.
    ``alpha`` is the family-wise false-alarm rate of the Bonferroni threshold.
    """
    import pandas as pd

    rows = []
    for var in variables:
        if var not in idata_a["posterior"] or var not in idata_b["posterior"]:
            continue
        xa, na = _scalar_draws(idata_a, var)
        xb, nb = _scalar_draws(idata_b, var)
        pos = {n: i for i, n in enumerate(nb)}
        missing = [n for n in na if n not in pos]
        if missing:
            raise ValueError(f"{labels[1]} posterior lacks {missing[:3]} (and "
                             f"{max(0, len(missing) - 3)} more)")
        ib = np.array([pos[n] for n in na])
        xb = xb[..., ib]
        ma, mb = xa.mean(axis=(0, 1)), xb.mean(axis=(0, 1))
        ea, eb = _mcse_mean(xa), _mcse_mean(xb)
        sd = np.sqrt(0.5 * (xa.var(axis=(0, 1)) + xb.var(axis=(0, 1))))
        se = np.sqrt(ea ** 2 + eb ** 2)
        z = (ma - mb) / np.maximum(se, 1e-300)
        for k, n in enumerate(na):
            rows.append({"param": n, "kind": var, f"mean_{labels[0]}": ma[k],
                         f"mean_{labels[1]}": mb[k], f"mcse_{labels[0]}": ea[k],
                         f"mcse_{labels[1]}": eb[k], "sd": sd[k],
                         "diff_in_sd": (ma[k] - mb[k]) / sd[k] if sd[k] > 0 else np.nan,
                         "z": z[k]})
    table = pd.DataFrame(rows)
    P = len(table)
    if P == 0:
        raise ValueError("no common parameters to compare")
    z_max = max(3.0, float(stats.norm.isf(alpha / (2 * P))))
    bad = ~(np.abs(table.z.to_numpy()) <= z_max)
    table["agree"] = ~bad
    order = np.argsort(-np.nan_to_num(np.abs(table.z.to_numpy()), nan=np.inf))
    worst = [{"param": str(table.param.iloc[i]), "z": _finite(table.z.iloc[i]),
              "diff_in_sd": _finite(table.diff_in_sd.iloc[i])} for i in order[:n_worst]]
    return Agreement(agree=not bad.any(), z_max=z_max, n_params=P,
                     n_disagree=int(bad.sum()), worst=worst, labels=tuple(labels),
                     table=table)


# ------------------------------------------------------------------ tail visits (informational)
def tail_visits(eta: np.ndarray, alpha: np.ndarray, *, prior_below: float = 0.5,
                upper_p: float = 0.01, n_worst: int = 5) -> dict | None:
    """On how many independent tail visits do the means of prior-dominated simplex entries
    rest? An informational diagnostic of a NUTS run, not a gate criterion.

    For an entry with a small concentration ``α_t`` (``< prior_below``, the entries the
    sampler boosts) the posterior is close to its prior, whose mean is carried by rare draws
    in the upper tail (``Beta(0.0077, 1.99)``: ~80 % of the mean from ~1 % of the draws), so
    its estimate is as good as the number of separate visits to that tail
    (docs/design.md §5.1). Per entry: the draws above their own pooled ``1 − upper_p``
    quantile, the number of separate visits (maximal runs of consecutive draws, summed over
    chains) and the effective number, ``upper_p`` times the ESS of the indicator
    [Vehtari21] (iid draws: ``n·upper_p``).

    Parameters
    ----------
    eta : (chain, draw, W, K)
    alpha : (W, K)
        The prior concentrations of each row.

    Returns ``None`` when no entry is prior-dominated, else a JSON-safe dict with the number
    of entries, the smallest and the median effective number, the iid expectation and the
    ``n_worst`` entries with the fewest effective visits.
    """
    eta = np.asarray(eta, float)
    alpha = np.asarray(alpha, float)
    if eta.ndim != 4 or eta.shape[2:] != alpha.shape:
        raise ValueError(f"eta must be (chain, draw, {alpha.shape[0]}, {alpha.shape[1]}), "
                         f"got {eta.shape}")
    w_idx, t_idx = np.nonzero(alpha < prior_below)
    if w_idx.size == 0:
        return None
    x = eta[:, :, w_idx, t_idx]                                   # (chain, draw, P)
    n = x.shape[0] * x.shape[1]
    q = np.quantile(x, 1.0 - upper_p, axis=(0, 1))
    above = x > q
    visits = _excursions(above)
    eff = _indicator_ess(above.astype(float), n) * above.mean(axis=(0, 1))
    order = np.argsort(eff)
    return {"upper_p": upper_p, "prior_below": prior_below, "entries": int(w_idx.size),
            "draws": int(n), "effective_iid": float(n * upper_p),
            "effective_min": float(eff.min()), "effective_median": float(np.median(eff)),
            "worst": [{"entry": f"eta[{w_idx[i]},{t_idx[i]}]", "alpha": float(alpha[w_idx[i],
                                                                                 t_idx[i]]),
                       "visits": int(visits[i]), "effective": float(eff[i])}
                      for i in order[:n_worst]]}


def tail_visits_of(idata, model, priors) -> dict | None:
    """:func:`tail_visits` of a fit's worker simplexes: COUPLE's ``η_w ~ Dirichlet(α_w)``,
    CrowdBT's ``η_w ~ Beta(a_w, b_w)`` as the two-entry simplex ``[η, 1 − η]``; ``None``
    for models without one (or a posterior without ``eta``). ``model``: a name or its
    spec."""
    from crowdrank.models.errors import UsageError
    from crowdrank.models.registry import as_spec

    try:
        family = as_spec(model).worker_prior
    except UsageError:                  # a model outside the registry (the pair extensions)
        return None
    if (family is None or idata is None or "posterior" not in idata
            or "eta" not in idata["posterior"]):
        return None
    da = idata["posterior"]["eta"]
    eta = np.asarray(da.transpose("chain", "draw", *[d for d in da.dims
                                                     if d not in ("chain", "draw")]).values,
                     float)
    # the family's simplex (CrowdBT [η, 1 − η] ~ Dir(a, b)); None: the family has none
    simplex = family.as_simplex(eta)
    if simplex is None:
        return None
    return tail_visits(simplex, family.table(priors, simplex.shape[-1]))


def tail_visits_sentence(tv: dict, model: str) -> str:
    """One informational line on :func:`tail_visits`'s result ``tv`` (not ``None``), the same
    in the audit's HTML report and in ``crowdrank fit --method nuts``'s summary: not a gate
    criterion, a reminder of how few draws a prior-dominated mean rests on."""
    worst = tv["worst"][0]
    return (f"{model}: E[η] of the {tv['entries']} prior-dominated simplex entries "
            f"(α < {tv['prior_below']:g}) rests on {tv['effective_min']:.0f} to "
            f"{tv['effective_median']:.0f} (fewest, median) effective visits to their "
            f"upper {100 * tv['upper_p']:g} % tail ({tv['effective_iid']:.0f} for iid "
            f"draws; fewest: {worst['entry']}, {worst['visits']} separate visits). "
            "Informational, not part of the gate: such a mean is carried by those rare "
            "draws, so its error is that of a count of this size.")
