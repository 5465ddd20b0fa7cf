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


def _ess_bulk(draws: np.ndarray) -> np.ndarray:
    import arviz_stats as azs

    return np.asarray(azs.ess(draws, method="bulk", chain_axis=0, draw_axis=1), float)


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
                        z_max: float = 5.0) -> PriorCheck:
    """Compare prior-only draws of one Dirichlet simplex with its exact marginals.

    Parameters
    ----------
    eta : (chain, draw, K)
        Draws of ``η ~ Dirichlet(α)`` (one worker; CrowdBT: ``[η, 1 − η]``).
    alpha : (K,)
    log_threshold : float
        The tail statistic is ``P(log η_t < log_threshold)`` for every ``t``; with the paper's
        geometric prior most of the mass of the smallest component lies below ``−20``, which
        a clipping transform cannot represent.
    z_max : float
        A deviation larger than ``z_max`` Monte Carlo standard errors fails.
    """
    eta = np.asarray(eta, float)
    alpha = np.asarray(alpha, float)
    if eta.ndim != 3 or eta.shape[2] != alpha.size:
        raise ValueError(f"eta must be (chain, draw, {alpha.size}), got {eta.shape}")
    S = alpha.sum()
    mean_exact = alpha / S
    mcse = _mcse_mean(eta)
    with np.errstate(divide="ignore"):
        below = (np.log(eta) < log_threshold).astype(float)
    p_exact = stats.beta.cdf(math.exp(log_threshold), alpha, S - alpha)
    # the indicator's MCSE from its own ESS; floor at the binomial error of 100 draws so a
    # run whose indicator never changes (a clipped tail) is not judged infinitely precise
    ess_b = np.nan_to_num(_ess_bulk(below), nan=1.0)
    n = eta.shape[0] * eta.shape[1]
    rows, reasons = [], []
    for t in range(alpha.size):
        m = float(eta[..., t].mean())
        z_mean = (m - mean_exact[t]) / max(float(mcse[t]), 1e-12)
        p_hat = float(below[..., t].mean())
        se_p = math.sqrt(max(p_exact[t] * (1 - p_exact[t]), 1.0 / n)
                         / max(min(ess_b[t], n), 1.0))
        z_tail = (p_hat - p_exact[t]) / max(se_p, 1e-12)
        ok = abs(z_mean) <= z_max and abs(z_tail) <= z_max
        rows.append({"t": t + 1, "alpha": float(alpha[t]), "mean_exact": float(mean_exact[t]),
                     "mean_draws": m, "mcse": float(mcse[t]), "z_mean": _finite(z_mean),
                     "p_below_exact": float(p_exact[t]), "p_below_draws": p_hat,
                     "z_tail": _finite(z_tail), "passed": bool(ok)})
        if not ok:
            reasons.append(f"η_{t + 1}: E {m:.5f} vs exact {mean_exact[t]:.5f} "
                           f"(z {z_mean:+.1f}); P(log η < {log_threshold:g}) {p_hat:.3f} vs "
                           f"exact {p_exact[t]:.3f} (z {z_tail:+.1f})")
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
