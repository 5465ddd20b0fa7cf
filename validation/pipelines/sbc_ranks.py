"""What SBC ranks: the truth drawn from the fit's prior, the true parameters flattened as the reports name them (λ, centred λ
and the worker family's η), the rank of each truth among thinned posterior draws
[Talts18], and the PIT of each truth under an approximation's marginals [Cook06].
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from crowdrank.models.families import BETA, DIRICHLET
from crowdrank.models.registry import ModelSpec, as_spec, get


def sbc_ranks(draws: np.ndarray, truth: np.ndarray, rng: np.random.Generator | None = None
              ) -> np.ndarray:
    """Rank of each true value among posterior draws ([Talts18], Alg. 1).

    ``draws`` ``(S, P)``, ``truth`` ``(P,)``; returns ints in ``0..S``:
    ``#{s : draws[s] < truth}`` plus, for draws *equal* to the truth, a uniformly random
    share of them (ties would otherwise pile ranks up at one end; they happen when a
    component underflows to 0 in both the truth and the draws). NaN is an error.
    """
    draws = np.asarray(draws, float)
    truth = np.asarray(truth, float)
    if draws.ndim != 2 or truth.shape != (draws.shape[1],):
        raise ValueError(f"draws must be (S, P) and truth (P,); got {draws.shape} and "
                         f"{truth.shape}")
    if np.isnan(draws).any() or np.isnan(truth).any():
        raise ValueError("NaN in posterior draws or true values: cannot rank")
    less = (draws < truth).sum(axis=0)
    eq = (draws == truth).sum(axis=0)
    if np.any(eq):
        rng = np.random.default_rng(0) if rng is None else rng
        less = less + rng.integers(0, eq + 1)
    return less.astype(np.int64)


def thin_draws(x: np.ndarray, n: int) -> np.ndarray:
    """``n`` evenly spaced draws of ``x`` ``(chain, draw, ...)``, chains concatenated:
    spacing ``chains·draws/n``, so with bulk ESS well above ``n`` the kept draws are
    nearly independent (Talts Sect. 4.2)."""
    flat = np.asarray(x, float).reshape((-1,) + np.shape(x)[2:])
    if n > flat.shape[0]:
        raise ValueError(f"cannot thin {flat.shape[0]} draws to {n}")
    idx = np.linspace(0, flat.shape[0] - 1, n).round().astype(int)
    return flat[idx]


def parameter_names(model: str | ModelSpec, n_items: int, n_workers: int, K: int
                    ) -> tuple[list[str], list[str]]:
    """Names and families of every scalar parameter SBC ranks, in a fixed order."""
    names = [f"lambda[i{r}]" for r in range(n_items)]
    fams = ["lambda"] * n_items
    names += [f"lambda_c[i{r}]" for r in range(n_items)]
    fams += ["lambda_centred"] * n_items
    spec = as_spec(model)
    if spec.eta_scalar:
        names += [f"eta[w{w}]" for w in range(n_workers)]
        fams += ["eta"] * n_workers
    elif spec.has_eta:
        names += [f"eta[w{w},{t + 1}]" for w in range(n_workers) for t in range(K)]
        fams += ["eta"] * (n_workers * K)
    return names, fams


def flatten_params(model: str | ModelSpec, lam: np.ndarray, eta: np.ndarray | None) -> np.ndarray:
    """``(..., P)``: λ, centred λ (``λ_r − mean λ``, identified by the data alone;
    docs/design.md, Validation) and the η entries in :func:`parameter_names` order. ``lam`` is
    ``(..., L)``; ``eta`` ``(..., W)`` (CrowdBT accuracy) or ``(..., W, K)``. The model's
    ``sbc_flatten`` (models.registry) does the work when it names one; otherwise the
    worker family flattens η (:meth:`crowdrank.models.families.WorkerFamily.flatten`)."""
    spec = as_spec(model)
    fn = spec.fn("sbc_flatten")
    if fn is not None:
        return fn(lam, eta)
    if spec.worker_prior is None:
        return flatten_lambda(lam)
    return _with_eta(lam, spec.worker_prior.flatten(eta))


# SBC flattenings ``f(lam, eta)`` (models.registry.ModelSpec.sbc_flatten names one of these
# or a model's own); the η part is the worker family's.
def _lambda_parts(lam):
    lam = np.asarray(lam, float)
    return [lam, lam - lam.mean(axis=-1, keepdims=True)]


def _with_eta(lam, flat_eta) -> np.ndarray:
    return np.concatenate(_lambda_parts(lam) + [flat_eta], axis=-1)


def flatten_lambda(lam, eta=None) -> np.ndarray:
    """λ and centred λ (no worker parameter)."""
    return np.concatenate(_lambda_parts(lam), axis=-1)


def flatten_accuracy(lam, eta) -> np.ndarray:
    """λ, centred λ and one accuracy per worker ``(..., W)``."""
    return _with_eta(lam, BETA.flatten(eta))


def flatten_simplex(lam, eta) -> np.ndarray:
    """λ, centred λ and every worker's simplex ``(..., W, K)`` row by row."""
    return _with_eta(lam, DIRICHLET.flatten(eta))


def online_pit(model: str | ModelSpec, post, truth: np.ndarray) -> np.ndarray:
    """PIT ``F_q(θ̃)`` of every parameter under the online marginals (docs/design.md, Validation):
    ``N(μ_r, σ_r²)`` for λ; for centred λ the mean-field Gaussian of ``λ_r − mean λ``
    (mean ``μ_r − μ̄``, variance ``σ_r²(1 − 2/L) + Σσ²/L²``); Beta marginals of the
    Dirichlet for η (:meth:`crowdrank.models.families.WorkerFamily.beta_marginals`), CrowdBT
    ``Beta(a_w, b_w)``."""
    from scipy import stats

    mu, s2 = np.asarray(post.mu, float), np.asarray(post.sigma2, float)
    L = mu.size
    var_c = s2 * (1.0 - 2.0 / L) + s2.sum() / L**2
    loc = np.concatenate([mu, mu - mu.mean()])
    scale = np.sqrt(np.concatenate([s2, var_c]))
    P = truth.size
    out = np.empty(P)
    out[: 2 * L] = stats.norm.cdf(truth[: 2 * L], loc, scale)
    if P > 2 * L:
        # the family's exact Beta marginal of each flattened entry
        a, b = as_spec(model).worker_prior.beta_marginals(np.asarray(post.alpha, float))
        out[2 * L:] = stats.beta.cdf(truth[2 * L:], a, b)
    if not np.all(np.isfinite(out)):
        raise ValueError("non-finite PIT from the online posterior")
    return out


def draw_truth(model: str | ModelSpec, priors, n_items: int, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(λ, η)`` from the prior the fit uses: ``λ_r ~ N(mu0, sigma0²)``; CrowdBT
    ``η_w ~ Beta(a_w, b_w)`` (stored as ``(η, 1 − η)``, the simulator's layout); normalised
    COUPLE ``η_w ~ Dir(α_w)``; PL/BT perfect workers ``e_1``."""
    lam = rng.normal(priors.mu0, priors.sigma0, size=int(n_items))
    W, K = priors.alpha.shape
    family = as_spec(model).worker_prior
    if family is None:
        eta = np.zeros((W, K))
        eta[:, 0] = 1.0
        return lam, eta
    # the family's exact draw (tiny concentrations included), in the simulator's layout
    K = family.prior_K(K)
    return lam, family.simulator_eta(family.draw(rng, family.table(priors, K)), K)


def make_priors(cfg: Mapping):
    """The :class:`~crowdrank.models.priors.Priors` of a spec: the ``worker_prior`` profile (same
    syntax as ``crowdrank fit --worker-prior``) for workers ``w0..``, length ``kmax``
    (CrowdBT reads its first two entries as ``(a, b)``)."""
    from crowdrank.models.priors import parse_worker_prior

    workers = [f"w{w}" for w in range(int(cfg["n_workers"]))]
    K = get(cfg["model"]).prior_K(max(int(cfg["kmax"]), 2)) or max(int(cfg["kmax"]), 2)
    return parse_worker_prior(cfg["worker_prior"], workers, K, float(cfg["mu0"]),
                              float(cfg["sigma0"]))


RANKS_COLUMNS = ("sim", "param", "family", "rank", "n_draws", "gate_passed", "truth",
                 "online_pit")


def write_ranks_csv(path: str | Path, results: Sequence[dict]) -> None:
    """One row per replicate × parameter (:data:`RANKS_COLUMNS`)."""
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(RANKS_COLUMNS)
        for r in results:
            pits = r.get("online_pit")
            gp = bool(r["gate"].get("trusted"))
            for j, name in enumerate(r["params"]):
                w.writerow([r["sim"], name, r["families"][j], r["rank"][j], r["n_draws"],
                            int(gp), repr(float(r["truth"][j])),
                            "" if pits is None else repr(float(pits[j]))])


def _jsonable(d):
    if isinstance(d, dict):
        return {k: _jsonable(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [_jsonable(v) for v in d]
    if isinstance(d, (float, np.floating)):
        return None if not math.isfinite(float(d)) else float(d)
    if isinstance(d, np.integer):
        return int(d)
    return d


def _nanstat(fn, x) -> float | None:
    x = np.asarray(x, float)
    return float(fn(x)) if np.isfinite(x).any() else None


def rank_matrix(results: Sequence[dict], key: str = "rank") -> np.ndarray:
    return np.array([r[key] for r in results], float)
