"""Planted methods for checking posterior SBC itself (docs/sbc.md, "Posterior SBC").

On a tiny Plackett–Luce data set the exact posterior is cheap: importance sampling from
the prior, ``w_s ∝ p(y | λ_s)`` (the likelihood Eq. 1 of [Pan18] with no worker part,
written here over many draws at once), resampled to :data:`DRAWS` draws. Three registry
entries are made from it:

- ``planted-exact``: that posterior; posterior SBC must call it calibrated.
- ``planted-overconfident``: the same draws pulled towards their mean by ``1/√2`` (every
  variance halved, the centre kept); the verdict must flag it.
- ``planted-prior``: the prior, whatever the data (a method that ignores them); posterior
  SBC passes it exactly, the companion checks must flag it.

They are registered by :func:`registered` (a context manager) for the test and the
benchmark that choose the augmentation's default size; they are not part of the suite's
registry otherwise. Replicates run in other processes call :func:`register` there (the
``setup`` of :func:`~crowdrank.validation.pipelines.posterior_sbc.run_posterior_sbc`):
spawned processes start with the built-in registry only.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from crowdrank.models.errors import UsageError

#: Draws kept after resampling, and prior draws weighed.
DRAWS = 1000
PRIOR_DRAWS = 12_000
NAMES = ("planted-exact", "planted-overconfident", "planted-prior")


@dataclass(frozen=True)
class PlantedOptions:
    """The planted methods' one setting. An option, not a module constant, so that it
    reaches the replicates' processes and keys their cache."""

    prior_draws: int = field(default=PRIOR_DRAWS, metadata={
        "help": "importance draws of the exact posterior (its error shrinks as "
                "1/sqrt(ESS))"})


def pl_loglik_draws(order: np.ndarray, lengths: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``log p(y | λ_s)`` of Plackett–Luce for every draw: ``order`` ``(K, N)`` (``-1``
    padding), ``lam`` ``(S, L)``; returns ``(S,)``. Each stage ``p`` of a ranking of
    length ``k`` adds ``λ_{o_p} − log Σ_{q ≥ p} exp λ_{o_q}`` (``p < k − 1``). Summed over
    the data, that is ``λ · c`` (``c``: how often each item is chosen at a stage) minus
    ``Σ_T n_T log Σ_{i ∈ T} exp λ_i`` over the distinct item sets ``T`` left at a stage
    (``n_T`` times): at most ``2^L`` sets however many rankings, so the importance
    sampler's ``10^5`` draws cost a matrix product, not an ``(S, N, K)`` array."""
    order = np.asarray(order)
    lengths = np.asarray(lengths)
    lam = np.asarray(lam, float)
    L = lam.shape[1]
    chosen = np.zeros(L)
    sets: dict[tuple, int] = {}
    for n in range(order.shape[1]):
        o = order[: int(lengths[n]), n]
        for p in range(len(o) - 1):
            chosen[o[p]] += 1
            key = tuple(sorted(int(i) for i in o[p:]))
            sets[key] = sets.get(key, 0) + 1
    member = np.zeros((L, len(sets)))
    for j, key in enumerate(sets):
        member[list(key), j] = 1.0
    top = lam.max(axis=1, keepdims=True)            # exp without overflow
    log_sums = np.log(np.exp(lam - top) @ member) + top
    return lam @ chosen - log_sums @ np.fromiter(sets.values(), float, len(sets))


def _weights(lw: np.ndarray) -> tuple[np.ndarray, float]:
    w = np.exp(lw - lw.max())
    w /= w.sum()
    return w, float(1.0 / np.sum(w**2))


def exact_draws(data, priors, seed: int, prior_draws: int = PRIOR_DRAWS) -> np.ndarray:
    """``(DRAWS, L)`` draws of the exact PL posterior by importance resampling: a pilot
    from the prior gives the mean and covariance of a Gaussian proposal with the
    covariance doubled (heavier than the posterior), whose weights
    ``prior · likelihood / proposal`` are then resampled."""
    from scipy import stats

    rng = np.random.default_rng([int(seed), 0x15])
    L = data.n_items
    n = int(prior_draws)
    lam = rng.normal(priors.mu0, priors.sigma0, size=(n, L))
    w, _ = _weights(pl_loglik_draws(data.order, data.lengths, lam))
    m = w @ lam
    cov = np.cov(lam.T, aweights=w) + 1e-9 * np.eye(L)
    prop = stats.multivariate_normal(m, 2.0 * cov)
    lam = prop.rvs(size=n, random_state=rng).reshape(n, L)
    lw = (pl_loglik_draws(data.order, data.lengths, lam)
          + stats.norm.logpdf(lam, priors.mu0, priors.sigma0).sum(axis=1) - prop.logpdf(lam))
    w, ess = _weights(lw)
    if ess < 2 * DRAWS:
        raise UsageError(f"importance sampling ESS {ess:.0f} < {2 * DRAWS}: the planted "
                         "exact method is for tiny data only")
    return lam[rng.choice(n, size=DRAWS, p=w)]


def _posterior(data, name: str, lam: np.ndarray):
    from crowdrank.inference.posterior import Posterior

    return Posterior.from_draws("pl", name, draws={"lambda": lam[None]}, items=data.items)


def fit_exact(data, model, priors, options, *, seed=0, progress=False):
    return _posterior(data, "planted-exact",
                      exact_draws(data, priors, seed, options.prior_draws))


def fit_overconfident(data, model, priors, options, *, seed=0, progress=False):
    lam = exact_draws(data, priors, seed, options.prior_draws)
    m = lam.mean(axis=0)
    return _posterior(data, "planted-overconfident", m + (lam - m) / np.sqrt(2.0))


def fit_prior(data, model, priors, options, *, seed=0, progress=False):
    rng = np.random.default_rng([int(seed), 0x16])
    lam = rng.normal(priors.mu0, priors.sigma0, size=(DRAWS, data.n_items))
    return _posterior(data, "planted-prior", lam)


TITLES = {"planted-exact": "the exact PL posterior (importance resampling)",
          "planted-overconfident": "the exact PL posterior, variances halved",
          "planted-prior": "the prior, whatever the data"}


def register() -> tuple[str, ...]:
    """Add the three planted methods to the method registry of this process."""
    from crowdrank.inference import methods

    fits = {"planted-exact": fit_exact, "planted-overconfident": fit_overconfident,
            "planted-prior": fit_prior}
    for n in NAMES:
        methods.register(methods.Method(n, TITLES[n], fits[n], PlantedOptions,
                                        models=("pl",)), replace_existing=True)
    return NAMES


#: What a posterior-SBC run of a planted method names as its ``setup``.
SETUP = f"{__name__}:register"


@contextmanager
def registered():
    """The three planted methods in the method registry for the ``with`` block."""
    from crowdrank.inference import methods

    try:
        yield register()
    finally:
        for n in NAMES:
            methods.unregister(n)


def tiny_pl(seed: int, n_items: int = 5, n_rankings: int = 40, k: int = 3):
    """A tiny PL data set from the prior ``λ ~ N(0, 1)``: ``(Rankings, Priors)``."""
    from crowdrank.models.priors import build_priors
    from crowdrank.models.simulate import simulate

    sim = simulate("pl", n_items=n_items, n_workers=1, tasks_per_worker=n_rankings,
                   kmax=k, kmin=k, seed=seed)
    return sim.rankings, build_priors(sim.rankings, mu0=0.0, sigma0=1.0)
