"""The models as functions of arrays, for the ecosystem's tools (docs/design.md §2.1).

``pl_model(items, workers, n_items, alpha=None, mu0=0.0, sigma0=1.0, rankings=None)`` and
its siblings (:func:`make_model`) take every datum as an argument, as NumPyro's own
examples do: ``items`` ``(n, K)`` the item set of each task (``-1`` padding; its lengths
are the rankings' lengths), ``workers`` ``(n,)`` the reporting worker, ``alpha`` the
worker-prior table of the model's family (``(W, K)`` Dirichlet, ``(W, 2)`` Beta ``(a, b)``
or Gamma ``(shape, rate)``), and the observed site ``rankings`` with ``obs=rankings``. So
``Predictive(model)(key, items, workers, n_items, alpha)`` draws data sets, an SBC
library conditions on ``rankings=...`` by keyword, and ``MCMC(NUTS(model))`` fits them;
``MCMC(NUTS(functools.partial(model, n_items=L, alpha=table)), jit_model_args=True)``
refits data sets of one shape without compiling again (``n_items`` and ``alpha`` fix
shapes and the boost split, so they stay Python values).

The likelihood reads the orders as (possibly traced) arrays: one masked form per model
over the padded ``(n, K)`` table — Plackett–Luce stages ([Pan18], Eq. 1) with a reverse
cumulative logsumexp, the ``K(K−1)/2`` position pairs of full rank-breaking ([Pan18],
Lemma 1; [Chen13]) and COUPLE's stages ([Pan18], Eq. 3-4) — so one compiled density
serves every data set of one shape. Normalised COUPLE, which enumerates the ``k!``
orderings of each length, is not offered here (its layout is built in NumPy).

Every prior part is a sample site with a proper distribution, so ``Predictive`` draws
the prior of every latent site: ``λ`` as :func:`crowdrank.models.numpyro.program.item_scores`
and the worker family's sites of the exact Gamma construction (docs/design.md §5.1)
**without** the magnitude reweighting ``eta_level`` (a ``numpyro.factor``, which
``Predictive`` cannot draw): the helper sites ``eta_g ~ Gamma(α)``, ``eta_u ~
Gamma(α + 1)``, ``eta_e ~ Exp(1)`` are then independent and exactly their own laws, and
``η = g/Σg ~ Dirichlet(α)`` (``Beta(a, b)`` for CrowdBT) exactly as in the sampler's
program, whose reweighting changes the helper sites' joint law but not ``η``'s.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.nn import log_sigmoid

from ..registry import get
from .scores import item_scores

#: A finite stand-in for ``−∞`` at padded positions: it keeps every logsumexp and its
#: gradient finite (``exp(−∞ − (−∞))`` would be NaN), and adds exactly 0 to any real sum.
_PAD = -1e30
#: The models offered as functions of arrays.
ARRAY_MODELS = ("pl", "bt", "crowdbt", "couple", "peergrader")


# ---------------------------------------------------------------- masked likelihoods
def _gather(lam, order):
    valid = order >= 0
    return lam[jnp.where(valid, order, 0)], valid


def _stage_lse(x, valid):
    """``log Σ_{j≥i, valid} e^{x_j}`` for every position ``i`` (reverse cumulative)."""
    return jax.lax.cumlogsumexp(jnp.where(valid, x, _PAD), axis=1, reverse=True)


def masked_pl(x, valid):
    """Plackett–Luce ([Pan18], Eq. 1) of each row of the padded ``(n, K)`` table ``x``
    (``λ`` of the reported order); stage ``i`` counts when position ``i + 1`` is real."""
    lse = _stage_lse(x, valid)
    stage = valid[:, 1:]
    return jnp.sum(jnp.where(stage, x[:, :-1] - jnp.where(stage, lse[:, :-1], 0.0), 0.0),
                   axis=1)


def masked_pairs(x, valid, log_w=None):
    """BT, or CrowdBT [Chen13] with ``log_w`` ``(n, 2)`` = ``[log η, log(1 − η)]`` of each
    row's worker, summed over the row's rank-broken pairs (positions ``a < b``)."""
    a, b = np.triu_indices(x.shape[1], 1)
    d = x[:, a] - x[:, b]
    ll = log_sigmoid(d) if log_w is None else jnp.logaddexp(
        log_w[:, :1] + log_sigmoid(d), log_w[:, 1:2] + log_sigmoid(-d))
    return jnp.sum(jnp.where(valid[:, b], ll, 0.0), axis=1)


def masked_couple(x, valid, log_w):
    """COUPLE ([Pan18], Eq. 3-4) with ``log_w`` ``(n, K)`` = ``log η`` of each row's worker:
    at stage ``i`` of a ranking of length ``k`` the ``m = k − i`` candidates are mixed by
    ``η_1..η_m`` and renormalised by ``log Σ_{v≤m} η_v``."""
    K = x.shape[1]
    k = jnp.sum(valid, axis=1)
    lse = _stage_lse(x, valid)
    log_cum = jax.lax.cumlogsumexp(log_w, axis=1)
    total = 0.0
    for i in range(K - 1):
        t = np.arange(K - i)
        mix = jax.nn.logsumexp(jnp.where(valid[:, i + t], log_w[:, t] + x[:, i + t], _PAD),
                               axis=1)
        norm = jnp.take_along_axis(log_cum, jnp.clip(k - i - 1, 0, K - 1)[:, None], 1)[:, 0]
        total = total + jnp.where(valid[:, i + 1], mix - lse[:, i] - norm, 0.0)
    return total


def masked_loglik(model: str, lam, order, workers=None, log_eta=None):
    """One log-likelihood per row of the padded orders ``order`` ``(n, K)`` of ``model``,
    traceable in ``order``; ``log_eta`` is the family's table
    (:func:`crowdrank.models.numpyro.program.log_eta_table`)."""
    x, valid = _gather(jnp.asarray(lam), jnp.asarray(order))
    log_w = None if log_eta is None else jnp.asarray(log_eta)[jnp.asarray(workers)]
    if model == "pl":
        return masked_pl(x, valid)
    if model == "bt":
        return masked_pairs(x, valid)
    if model == "crowdbt":
        return masked_pairs(x, valid, log_w)
    if model == "couple":
        return masked_couple(x, valid, log_w)
    if model == "peergrader":
        return masked_pl(x * jnp.exp(log_w)[:, None], valid)
    raise ValueError(f"no array form of model {model!r}; expected one of {ARRAY_MODELS}")


# ---------------------------------------------------------------- masked draws
def masked_draw(model: str, key, items, lam, log_w=None):
    """New orders of the padded item sets ``items`` ``(n, K)`` by the model's generative
    process (as :class:`crowdrank.models.numpyro.program.RankingLikelihood`): PL by sorting
    ``λ + Gumbel`` with the padding last; CrowdBT reverses the real part with probability
    ``1 − η``; COUPLE runs its stagewise story on each length's rows (needs concrete
    ``items``)."""
    k_true, k_flip, k_stage = jax.random.split(key, 3)
    x, valid = _gather(lam, items)
    if model == "peergrader":
        x = x * jnp.exp(log_w)[:, None]
    g = jnp.where(valid, x + jax.random.gumbel(k_true, x.shape, x.dtype), -jnp.inf)
    true = jnp.take_along_axis(items, jnp.argsort(-g, axis=1, stable=True), axis=1)
    if model == "crowdbt":
        k = jnp.sum(valid, axis=1, keepdims=True)
        j = jnp.arange(items.shape[1])[None, :]
        rev = jnp.take_along_axis(true, jnp.where(j < k, k - 1 - j, j), axis=1)
        right = jnp.log(jax.random.uniform(k_flip, (items.shape[0],), lam.dtype)) < log_w[:, 0]
        return jnp.where(right[:, None], true, rev)
    if model == "couple":
        from .couple import draw_couple

        lengths = np.asarray(valid).sum(axis=1)          # concrete items: one block per k
        out = jnp.full(items.shape, -1, items.dtype)
        for k, kk in zip(sorted(set(lengths.tolist())),
                         jax.random.split(k_stage, len(set(lengths.tolist())))):
            sel = np.flatnonzero(lengths == k)
            rep = draw_couple(kk, jnp.asarray(items)[sel, :k], log_w[sel], lam)
            out = out.at[sel, :k].set(rep.astype(items.dtype))
        return out
    return true


class ArrayRankings(dist.Distribution):
    """The rankings of the tasks ``items`` ``(n, K)`` (``-1`` padding) reported by
    ``workers`` as one NumPyro site; ``log_prob`` is one log-likelihood per ranking
    (:func:`masked_loglik`, traceable in the value), ``sample`` the generative process
    (:func:`masked_draw`). ``batch_shape = (n,)``, ``event_shape = (K,)``."""

    arg_constraints: ClassVar[dict] = {}
    pytree_data_fields = ("lam", "log_eta", "items", "workers")
    pytree_aux_fields = ("model",)

    def __init__(self, model, items, workers, lam, log_eta=None, validate_args=None):
        if model not in ARRAY_MODELS:
            raise ValueError(f"no array form of model {model!r}; expected one of "
                             f"{ARRAY_MODELS}")
        self.model, self.items = model, jnp.asarray(items)
        self.workers = None if workers is None else jnp.asarray(workers)
        self.lam = jnp.asarray(lam)
        self.log_eta = None if log_eta is None else jnp.asarray(log_eta)
        if self.items.ndim != 2:
            raise ValueError(f"items must be (n, K) with -1 padding, got {self.items.shape}")
        super().__init__(batch_shape=self.items.shape[:1], event_shape=self.items.shape[1:],
                         validate_args=validate_args)

    @property
    def support(self):
        return dist.constraints.independent(dist.constraints.integer_greater_than(-2), 1)

    def _log_w(self):
        return None if self.log_eta is None else self.log_eta[self.workers]

    def log_prob(self, value):
        value = jnp.asarray(value)
        if not isinstance(value, jax.core.Tracer) and \
                not isinstance(self.items, jax.core.Tracer) and \
                (value.shape != self.items.shape
                 or not bool(jnp.all((value >= 0) == (self.items >= 0)))):
            raise ValueError(f"rankings {value.shape} must have each task's length "
                             f"(the -1 padding of items {self.items.shape})")
        return masked_loglik(self.model, self.lam, value, self.workers, self.log_eta)

    def sample(self, key, sample_shape=()):
        if sample_shape:
            keys = jax.random.split(key, int(np.prod(sample_shape)))
            out = jnp.stack([self.sample(k_) for k_ in keys])
            return out.reshape(tuple(sample_shape) + out.shape[1:])
        return masked_draw(self.model, key, self.items, self.lam, self._log_w())


# ---------------------------------------------------------------- the model functions
def _worker_sites(model, alpha, level_sd):
    fam = get(model).worker_prior
    inputs = SimpleNamespace(alpha=np.asarray(alpha, float))
    # level_sd=None: no magnitude reweighting, every helper site a proper distribution
    return fam.numpyro_log_eta(inputs, "gamma", None, level_sd, reweight=level_sd is not None)


def make_model(model: str, *, level: str = "centered", level_sd=None):
    """The NumPyro program of ``model`` as a function of arrays (module docstring):
    ``f(items, workers, n_items, alpha=None, mu0=0.0, sigma0=1.0, rankings=None)``.
    ``level_sd`` (a number) adds the sampler's magnitude reweighting ``eta_level``
    (docs/design.md §5.1), a factor that ``Predictive`` does not draw."""
    if model not in ARRAY_MODELS:
        raise ValueError(f"no array form of model {model!r}; expected one of {ARRAY_MODELS}")
    has_eta = get(model).has_eta

    def program(items, workers, n_items, alpha=None, mu0=0.0, sigma0=1.0, rankings=None):
        if has_eta and alpha is None:
            raise ValueError(f"model {model!r} needs its worker-prior table alpha")
        if isinstance(n_items, jax.core.Tracer) or isinstance(alpha, jax.core.Tracer):
            # shapes and the boost split are read in NumPy: they must be concrete
            raise TypeError("n_items and alpha must be concrete: under "
                             "MCMC(jit_model_args=True) bind them with functools.partial")
        lam = item_scores(SimpleNamespace(n_items=int(n_items), mu0=mu0, sigma0=sigma0),
                          level)
        log_eta = _worker_sites(model, alpha, level_sd) if has_eta else None
        return numpyro.sample("rankings", ArrayRankings(model, items, workers, lam, log_eta),
                              obs=rankings)

    program.__name__ = program.__qualname__ = f"{model.replace('-', '_')}_model"
    program.__doc__ = f"The {model!r} model as a function of arrays ({__name__})."
    return program


pl_model = make_model("pl")
bt_model = make_model("bt")
crowdbt_model = make_model("crowdbt")
couple_model = make_model("couple")
peergrader_model = make_model("peergrader")


def model_arrays(inputs) -> dict:
    """The keyword arguments of the array model for a
    :class:`~crowdrank.models.model_inputs.ModelInputs` built from data: ``items`` (the
    observed orders' item sets, in observed order), ``workers``, ``n_items``, ``alpha``,
    ``mu0``, ``sigma0`` and the observed ``rankings``."""
    order = np.asarray(inputs.order)
    return {"items": order, "workers": np.asarray(inputs.obs_worker),
            "n_items": int(inputs.n_items), "alpha": inputs.alpha, "mu0": inputs.mu0,
            "sigma0": inputs.sigma0, "rankings": order}
