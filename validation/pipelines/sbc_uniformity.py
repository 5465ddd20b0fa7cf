"""Are the SBC ranks uniform? The tests behind ``crowdrank sbc``'s verdict: the ECDF
simultaneous band and its p-value [Säilynoja22], a binned chi-square, the per-parameter
tail-sensitive p-values of arviz-stats (``pot_c``), their Cauchy combination and Holm's
correction, summarised per parameter family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

#: The parameter families ranked, in the order of the reports.
FAMILIES = ("lambda", "lambda_centred", "eta")


@dataclass(frozen=True)
class EcdfTest:
    """The ECDF simultaneous-band test of one sample (Säilynoja et al. 2022).

    ``z`` evaluation points; ``ecdf`` the sample's ECDF there; ``lower``/``upper`` the
    simultaneous ``prob`` band of the ECDF under uniformity; ``p_value`` the simulated
    probability, under uniformity, of a smallest pointwise tail probability as small as the
    sample's; ``gamma`` the pointwise level that makes the band simultaneous.
    """

    z: np.ndarray
    ecdf: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    p_value: float
    gamma: float
    n: int

    @property
    def inside(self) -> bool:
        return bool(np.all((self.ecdf >= self.lower - 1e-12) & (self.ecdf <= self.upper + 1e-12)))


def _eval_points(n_values: int | None, n: int) -> np.ndarray:
    """Discrete ranks on ``0..n_values−1``: ``z_j = j/n_values``, ``j = 1..n_values−1`` (the
    CDF of the discrete uniform at rank ``j − 1``). Continuous PIT: ``K = min(n, 100)``
    equal steps (Säilynoja et al. use ``K = n``; fewer points lose little power and keep
    the simulation cheap)."""
    K = n_values if n_values is not None else max(2, min(n, 100))
    return np.arange(1, K) / K


def _tail_p(counts: np.ndarray, n: int, z: np.ndarray) -> np.ndarray:
    """Two-sided pointwise binomial tail probability of each ECDF count (capped at 1)."""
    from scipy.stats import binom

    lo = binom.cdf(counts, n, z)
    hi = binom.sf(counts - 1, n, z)
    return np.minimum(1.0, 2.0 * np.minimum(lo, hi))


def _counts(values: np.ndarray, n_values: int | None, z: np.ndarray) -> np.ndarray:
    """``N·F̂(z_j)``: ranks ``< j`` (discrete) or PIT values ``<= z_j``."""
    v = np.sort(values, axis=-1)
    if n_values is not None:
        thresholds = np.arange(1, n_values) - 0.5
        return np.stack([np.searchsorted(row, thresholds) for row in v.reshape(-1, v.shape[-1])]
                        ).reshape(v.shape[:-1] + (len(thresholds),))
    return np.stack([np.searchsorted(row, z, side="right") for row in v.reshape(-1, v.shape[-1])]
                    ).reshape(v.shape[:-1] + (len(z),))


@lru_cache(maxsize=64)
def _null_statistic(n: int, n_values: int | None, n_sim: int, seed: int) -> np.ndarray:
    """Sorted simulated null distribution of ``min_j`` pointwise tail probability for
    ``n`` uniform ranks/PITs (Säilynoja et al. 2022, Sect. 2.2, simulation method)."""
    rng = np.random.default_rng([int(seed), n, n_values or 0, 0xECDF])
    z = _eval_points(n_values, n)
    out = np.empty(n_sim)
    chunk = max(1, 200_000 // max(n * len(z), 1))
    for s in range(0, n_sim, chunk):
        m = min(chunk, n_sim - s)
        u = (rng.integers(0, n_values, size=(m, n)) if n_values is not None
             else rng.random((m, n)))
        out[s:s + m] = _tail_p(_counts(u, n_values, z), n, z).min(axis=1)
    return np.sort(out)


def ecdf_test(values, n_values: int | None = None, *, prob: float = 0.95,
              n_sim: int = 2000, seed: int = 0) -> EcdfTest:
    """Säilynoja et al. (2022) ECDF test and simultaneous ``prob`` band.

    Parameters
    ----------
    values : array (N,)
        Ranks in ``0..n_values−1`` (give ``n_values = S + 1``) or, with ``n_values=None``,
        PIT values in ``[0, 1]``.
    prob : float
        Simultaneous coverage of the band under uniformity.
    n_sim : int
        Simulated uniform samples for the null distribution (seeded by ``seed``).
    """
    v = np.asarray(values, float)
    if v.ndim != 1 or v.size < 2:
        raise ValueError("need a 1-D sample of at least 2 values")
    if np.isnan(v).any():
        raise ValueError("NaN in ranks / PIT values")
    if n_values is not None:
        if n_values < 2 or np.any(v < 0) or np.any(v > n_values - 1) or np.any(v != np.round(v)):
            raise ValueError(f"ranks must be integers in 0..{n_values - 1}")
    elif np.any(v < 0) or np.any(v > 1):
        raise ValueError("PIT values must lie in [0, 1]")
    if not 0 < prob < 1:
        raise ValueError("prob must be in (0, 1)")
    n = v.size
    z = _eval_points(n_values, n)
    counts = _counts(v, n_values, z)
    t_obs = float(_tail_p(counts, n, z).min())
    null = _null_statistic(n, n_values, int(n_sim), int(seed))
    p_value = (1.0 + np.searchsorted(null, t_obs * (1 + 1e-12), side="right")) / (1.0 + n_sim)
    gamma = float(np.quantile(null, 1.0 - prob))
    # the band: counts whose pointwise tail probability is at least gamma
    c = np.arange(n + 1)[:, None]
    ok = _tail_p(c, n, z[None, :]) >= gamma
    lower = np.where(ok.any(0), np.argmax(ok, axis=0), 0) / n
    upper = np.where(ok.any(0), n - np.argmax(ok[::-1], axis=0), n) / n
    return EcdfTest(z=z, ecdf=counts / n, lower=lower, upper=upper, p_value=float(p_value),
                    gamma=gamma, n=n)


def chi2_test(values, n_values: int | None = None, n_bins: int | None = None) -> float:
    """Pearson chi-square p-value of binned ranks (Talts Sect. 4.1) with exact expected
    counts: the ``n_values`` rank values are split into ``n_bins`` contiguous groups
    (default: about ``N/10`` bins, at most 20, so expected counts stay >= 5 where possible),
    PIT values into equal-width bins."""
    from scipy.stats import chisquare

    v = np.asarray(values, float)
    n = v.size
    B = n_bins if n_bins is not None else int(min(20, max(2, n // 10)))
    if n_values is not None:
        B = min(B, n_values)
        groups = np.array_split(np.arange(n_values), B)
        expected = np.array([len(g) for g in groups], float) / n_values * n
        edges = np.array([g[0] for g in groups[1:]]) - 0.5
        obs = np.bincount(np.searchsorted(edges, v), minlength=B)
    else:
        expected = np.full(B, n / B)
        obs = np.bincount(np.minimum((v * B).astype(int), B - 1), minlength=B)
    return float(chisquare(obs, expected).pvalue)


def cauchy_combination(pvalues: Sequence[float]) -> float:
    """Cauchy combination test (Liu & Xie 2020): ``T = mean tan((0.5 − p_i)π)``,
    ``p = 1/2 − arctan(T)/π``; valid under arbitrary dependence between the tests."""
    p = np.clip(np.asarray(pvalues, float), 1e-15, 1 - 1e-15)
    if p.size == 0:
        raise ValueError("no p-values to combine")
    t = np.mean(np.tan((0.5 - p) * np.pi))
    return float(0.5 - np.arctan(t) / np.pi)


def pot_c_pvalues(values: np.ndarray, n_values: int | None, seed: int = 0) -> np.ndarray:
    """ArviZ's ``pot_c`` uniformity test (Tesso et al. 2026; ``arviz_stats``
    ``uniformity_test``), per column of ``values`` ``(N, P)``: a second, independent opinion
    beside the ECDF band. It wants continuous PIT values, so ranks ``r`` on ``0..S`` are
    first spread uniformly within their cell, ``u = (r + U)/(S + 1)`` with seeded
    ``U ~ Uniform(0, 1)``, which is exactly uniform when the ranks are."""
    from arviz_stats.base import array_stats

    v = np.asarray(values, float)
    if n_values is not None:
        rng = np.random.default_rng([int(seed), 0x90C])
        v = (v + rng.random(v.shape)) / n_values
    return np.asarray(array_stats.uniformity_test(v.T, axis=-1)[0], float).reshape(-1)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values (family-wise error control)."""
    p = np.asarray(pvalues, float)
    m = p.size
    order = np.argsort(p)
    adj = np.empty(m)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[j]))
        adj[j] = running
    return adj


def uniformity_summary(values: np.ndarray, names: Sequence[str], families: Sequence[str],
                       n_values: int | None, *, alpha: float = 0.05, n_bins=None,
                       seed: int = 0, n_sim: int = 2000) -> dict:
    """Per-parameter and per-family tests and the verdict (module doc).

    ``values`` ``(N, P)`` ranks (``n_values = S + 1``) or PIT values (``None``). The verdict
    on ranks weighs the ECDF band and the tail-sensitive ``pot_c`` (each at
    ``alpha/(2F)``); on PIT values the band alone (at ``alpha/F``): a PIT is exactly 0 or
    1 wherever a true value underflows in floating point (a tiny Dirichlet entry), atoms
    that ``pot_c`` reads as a failure (p = 0 on the prior oracle, whose PITs are exact),
    whereas ranks of such values are broken at random and stay uniform.
    """
    values = np.asarray(values, float)
    if values.ndim != 2 or values.shape[1] != len(names):
        raise ValueError("values must be (replicates, parameters)")
    N = values.shape[0]
    if N < 2:
        return {"replicates": N, "verdict": "not enough replicates", "calibrated": None,
                "parameters": {}, "families": {}}
    params = {}
    pot = pot_c_pvalues(values, n_values, seed=seed)
    for j, name in enumerate(names):
        e = ecdf_test(values[:, j], n_values, seed=seed, n_sim=n_sim)
        params[name] = {"family": families[j], "ecdf_p": e.p_value,
                        "inside_band": e.inside,
                        "chi2_p": chi2_test(values[:, j], n_values, n_bins),
                        "pot_c_p": float(pot[j])}
    adj = holm([params[nm]["ecdf_p"] for nm in names])
    for nm, a in zip(names, adj):
        params[nm]["ecdf_p_holm"] = float(a)
    fams = {}
    present = [f for f in FAMILIES if f in set(families)]
    F = len(present)
    # two tests per family, each at alpha / (2F) (Bonferroni over families and tests): the
    # ECDF band, and pot_c, which weighs the tails more (a truth piling up at rank 0 in a
    # few replicates, which the band over the whole ECDF can absorb)
    tail_test = n_values is not None
    thr = alpha / (2 * F) if tail_test else alpha / F
    for f in present:
        ps = [params[nm]["ecdf_p"] for nm in names if params[nm]["family"] == f]
        cs = [params[nm]["chi2_p"] for nm in names if params[nm]["family"] == f]
        ts = [params[nm]["pot_c_p"] for nm in names if params[nm]["family"] == f]
        comb, tail = cauchy_combination(ps), cauchy_combination(ts)
        fams[f] = {"n_params": len(ps), "ecdf_p_combined": comb,
                   "pot_c_p_combined": tail,
                   "chi2_p_combined": cauchy_combination(cs), "ecdf_p_min": float(min(ps)),
                   "outside_band": int(sum(not params[nm]["inside_band"] for nm in names
                                           if params[nm]["family"] == f)),
                   "threshold": thr,
                   "calibrated": bool(comb >= thr and (tail >= thr or not tail_test))}
    ok = all(v["calibrated"] for v in fams.values())
    worst = sorted(names, key=lambda nm: params[nm]["ecdf_p"])[:5]
    return {"replicates": N, "calibrated": ok,
            "verdict": "calibrated (no evidence against uniform ranks)" if ok else
            "NOT calibrated: " + ", ".join(f for f, v in fams.items() if not v["calibrated"]),
            "rule": (f"per family, Cauchy combinations (Liu & Xie 2020) of the per-parameter "
                     f"ECDF-band p-values (Säilynoja et al. 2022) and of the tail-sensitive "
                     f"pot_c p-values (arviz-stats); a family fails when either combined p < "
                     f"alpha/(2F) = {alpha}/{2 * F} (Bonferroni over families and tests)"
                     if tail_test else
                     f"per family, Cauchy combination (Liu & Xie 2020) of the per-parameter "
                     f"ECDF-band p-values (Säilynoja et al. 2022); a family fails when its "
                     f"combined p < alpha/F = {alpha}/{F} (PIT values: no tail test, see "
                     f"uniformity_summary)"),
            "families": fams, "parameters": params, "worst": worst}
