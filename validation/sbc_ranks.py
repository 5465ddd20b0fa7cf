"""What SBC ranks: the true parameters flattened as the reports name them (λ, centred λ
and the worker family's η), the rank of each truth among thinned posterior draws
[Talts18], and the PIT of each truth under an approximation's marginals [Cook06].
"""

from __future__ import annotations

import numpy as np

from crowdrank.models.families import BETA, DIRICHLET
from crowdrank.models.registry import get


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


def parameter_names(model: str, n_items: int, n_workers: int, K: int
                    ) -> tuple[list[str], list[str]]:
    """Names and families of every scalar parameter SBC ranks, in a fixed order."""
    names = [f"lambda[i{r}]" for r in range(n_items)]
    fams = ["lambda"] * n_items
    names += [f"lambda_c[i{r}]" for r in range(n_items)]
    fams += ["lambda_centred"] * n_items
    spec = get(model)
    if spec.eta_scalar:
        names += [f"eta[w{w}]" for w in range(n_workers)]
        fams += ["eta"] * n_workers
    elif spec.has_eta:
        names += [f"eta[w{w},{t + 1}]" for w in range(n_workers) for t in range(K)]
        fams += ["eta"] * (n_workers * K)
    return names, fams


def flatten_params(model: str, lam: np.ndarray, eta: np.ndarray | None) -> np.ndarray:
    """``(..., P)``: λ, centred λ (``λ_r − mean λ``, identified by the data alone;
    docs/design.md, Validation) and the η entries in :func:`parameter_names` order. ``lam`` is
    ``(..., L)``; ``eta`` ``(..., W)`` (CrowdBT accuracy) or ``(..., W, K)``. The model's
    ``sbc_flatten`` (models.registry) does the work when it names one; otherwise the
    worker family flattens η (:meth:`crowdrank.models.families.WorkerFamily.flatten`)."""
    spec = get(model)
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


def online_pit(model: str, post, truth: np.ndarray) -> np.ndarray:
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
        a, b = get(model).worker_prior.beta_marginals(np.asarray(post.alpha, float))
        out[2 * L:] = stats.beta.cdf(truth[2 * L:], a, b)
    if not np.all(np.isfinite(out)):
        raise ValueError("non-finite PIT from the online posterior")
    return out
