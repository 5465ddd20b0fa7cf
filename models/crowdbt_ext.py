"""The two CrowdBT extensions of the article in ``seeds/002_*`` ("Extensions"): a
per-annotator **bias** and **domain-specific reliability** [Chen13].

Both are one likelihood. A pair ``s`` shows item ``f_s`` first and ``t_s`` second
(:mod:`crowdrank.models.pair_table`: the ``left`` column of a pairwise CSV is shown first); worker
``w_s`` reports ``y_s = +1`` when the first item wins, ``−1`` otherwise. With
``d_s = λ_f − λ_t``, a reliability group ``g_s`` and a bias ``β_w``:

    P(y_s) = η_g σ(y_s (d_s + β_w)) + (1 − η_g) σ(y_s (β_w − d_s))                (E1)

With probability ``η_g`` the worker judges the true comparison, otherwise its reverse —
CrowdBT's mixture, the form of [Chen13] — and in both cases leans by ``β_w`` (log-odds)
towards the item shown first: a systematic preference, not noise, which a reliability
alone cannot describe. ``β_w > 0`` favours the first (left) item.

- ``crowdbt-bias``: ``g_s = w_s`` and ``β_w ~ N(0, τ_β²)``;
- ``crowdbt-domain``: ``β ≡ 0`` and ``g_s = (w_s, c_s)`` for the category ``c_s`` of the
  pair (a column of the CSV): one accuracy ``η_{w,c} ~ Beta(a_w, b_w)`` per worker and
  category the worker judged, each with its worker's prior.

Priors as CrowdBT's: ``λ_i ~ N(μ0, σ0²)``, ``η ~ Beta(a_w, b_w)``. With ``β ≡ 0`` and one
category both reduce exactly to CrowdBT (:func:`crowdrank.models.likelihood.crowdbt_loglik`).

The bias needs a presentation order: rank-broken k-ary rankings have none
(:func:`crowdrank.models.pair_table.from_rankings`), and :func:`structure` refuses them for
``crowdbt-bias``; the domain model's likelihood does not depend on the orientation.

Here: the NumPy reference log-likelihood (:func:`loglik`), a seeded simulator
(:func:`simulate`), and the NumPyro and PyMC programs (:func:`numpyro_model`,
:func:`pymc_model`) whose observed site ``y`` is a Bernoulli with the exact log-odds of
(E1), so its log density per pair is ``log P(y_s)``. The EM fit is in
:mod:`crowdrank.inference.batch.crowdbt_ext`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit

from .errors import DataError, UsageError
from .pair_table import PairTable

VARIANTS = ("crowdbt-bias", "crowdbt-domain")


@dataclass(frozen=True, eq=False)
class Structure:
    """What the likelihood (E1) needs, as arrays: ``first, second, sign (±1), worker,
    group``; ``groups`` names each reliability group (``worker`` or ``worker|category``);
    ``group_worker`` is the worker of each group (its Beta prior); ``bias``: whether ``β``
    is a parameter."""

    variant: str
    items: tuple
    workers: tuple
    groups: tuple
    first: np.ndarray
    second: np.ndarray
    sign: np.ndarray
    worker: np.ndarray
    group: np.ndarray
    group_worker: np.ndarray
    bias: bool
    source: str = "<pairs>"

    @property
    def n_items(self):
        return len(self.items)

    @property
    def n_workers(self):
        return len(self.workers)

    @property
    def n_groups(self):
        return len(self.groups)

    @property
    def y(self):
        """``1`` where the first item won (the Bernoulli observation)."""
        return (self.sign > 0).astype(np.int64)


def structure(t: PairTable, variant: str, category: str | None = None) -> Structure:
    """The :class:`Structure` of ``variant`` on the pairs ``t`` (``category``: the column
    of ``t.extra`` that holds each pair's category, for ``crowdbt-domain``)."""
    if variant not in VARIANTS:
        raise UsageError(f"unknown CrowdBT extension {variant!r}; expected one of {VARIANTS}")
    sign = np.where(t.first_won == 1, 1, -1).astype(np.int64)
    if variant == "crowdbt-bias":
        if not t.oriented:
            raise DataError("the annotator-bias model needs the order in which each pair "
                            "was shown (a pairwise CSV: left is shown first); rank-broken "
                            "rankings have none", t.source)
        return Structure(variant, t.items, t.workers, t.workers, t.first, t.second, sign,
                         t.worker, t.worker, np.arange(t.n_workers), True, t.source)
    if category is None:
        raise UsageError("crowdbt-domain needs a category column (--category COLUMN)")
    cat = t.column(category, "category")
    keys = [f"{t.workers[w]}|{c}" for w, c in zip(t.worker, cat)]
    index: dict[str, int] = {}
    gw: list[int] = []
    group = np.empty(t.n_pairs, np.int64)
    for s, k in enumerate(keys):
        if k not in index:
            index[k] = len(index)
            gw.append(int(t.worker[s]))
        group[s] = index[k]
    return Structure(variant, t.items, t.workers, tuple(index), t.first, t.second, sign,
                     t.worker, group, np.asarray(gw, np.int64), False, t.source)


def group_beta(st: Structure, worker_ab) -> np.ndarray:
    """``(G, 2)`` Beta parameters of every reliability group: its worker's ``(a, b)``."""
    return np.asarray(worker_ab, float)[st.group_worker]


def log_probs(st: Structure, lam, eta, beta=None) -> tuple[np.ndarray, np.ndarray]:
    """``(log P(first wins), log P(second wins))`` per pair, by (E1) (stable log-sum-exps)."""
    lam, eta = np.asarray(lam, float), np.asarray(eta, float)
    d = lam[st.first] - lam[st.second]
    b = np.zeros_like(d) if beta is None else np.asarray(beta, float)[st.worker]
    le, l1e = np.log(eta[st.group]), np.log1p(-eta[st.group])
    lp1 = np.logaddexp(le + log_expit(d + b), l1e + log_expit(b - d))
    lp0 = np.logaddexp(le + log_expit(-(d + b)), l1e + log_expit(d - b))
    return lp1, lp0


def loglik(st: Structure, lam, eta, beta=None) -> np.ndarray:
    """The reference log-likelihood ``log P(y_s)`` of (E1), one value per pair."""
    lp1, lp0 = log_probs(st, lam, eta, beta)
    return np.where(st.sign > 0, lp1, lp0)


def simulate(n_items: int, n_workers: int, n_pairs: int, variant: str, *,
             n_categories: int = 3, eta_ab=(8.0, 2.0), bias_sd: float = 1.0,
             seed: int = 0):
    """Seeded data from (E1): ``λ ~ N(0, 1)``; ``η ~ Beta(eta_ab)`` per group; for the bias
    model ``β_w ~ N(0, bias_sd²)``; uniformly random pairs in a random presentation order,
    a uniform worker and (domain model) a uniform category ``c0..``; ``y`` drawn from (E1).

    Returns ``(PairTable, truth)`` with ``truth = {"lambda", "eta", "beta", "groups"}`` (the
    table has a ``category`` column for the domain model)."""
    if variant not in VARIANTS:
        raise UsageError(f"unknown CrowdBT extension {variant!r}; expected one of {VARIANTS}")
    rng = np.random.default_rng(seed)
    lam = rng.normal(size=n_items)
    f = rng.integers(0, n_items, n_pairs)
    t = (f + rng.integers(1, n_items, n_pairs)) % n_items
    w = rng.integers(0, n_workers, n_pairs)
    items = tuple(f"i{r}" for r in range(n_items))
    workers = tuple(f"w{k}" for k in range(n_workers))
    if variant == "crowdbt-bias":
        beta = rng.normal(0.0, bias_sd, n_workers)
        eta = rng.beta(*eta_ab, n_workers)
        g = w
        extra = {}
    else:
        beta = np.zeros(n_workers)
        c = rng.integers(0, n_categories, n_pairs)
        eta = rng.beta(*eta_ab, (n_workers, n_categories))
        g = None
        extra = {"category": np.asarray([f"c{k}" for k in c], dtype=object)}
    d = lam[f] - lam[t]
    e = eta[w] if g is not None else eta[w, c]
    truthful = rng.random(n_pairs) < e
    u = np.where(truthful, d, -d) + beta[w]
    won = (rng.random(n_pairs) < expit(u)).astype(np.int64)
    table = PairTable(items, workers, f.astype(np.int64), t.astype(np.int64), won,
                      w.astype(np.int64), extra, None, True, f"<simulated {variant}>")
    truth = {"lambda": lam, "eta": eta, "beta": beta}
    return table, truth


def true_group_eta(st: Structure, truth) -> np.ndarray:
    """The simulated accuracy of each group of ``st`` (``truth`` from :func:`simulate`)."""
    eta = np.asarray(truth["eta"])
    if eta.ndim == 1:
        return eta[st.group_worker]
    cats = [int(g.split("|")[-1][1:]) for g in st.groups]
    return eta[st.group_worker, cats]


# ------------------------------------------------------------------------------- the PPLs
def numpyro_model(st: Structure, worker_ab, mu0: float = 0.0, sigma0: float = 1.0,
                  bias_sd: float = 1.0):
    """The NumPyro program of (E1): sites ``lambda`` (L), ``eta`` (G, Beta), ``beta`` (W;
    bias model) and the observed Bernoulli ``y`` whose logits are
    ``log P(first wins) − log P(second wins)``."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.nn import log_sigmoid

    ab = group_beta(st, worker_ab)
    f, t, wk, g = (jnp.asarray(a) for a in (st.first, st.second, st.worker, st.group))
    y = jnp.asarray(st.y)

    def model():
        lam = numpyro.sample("lambda", dist.Normal(mu0, sigma0).expand([st.n_items])
                             .to_event(1))
        eta = numpyro.sample("eta", dist.Beta(jnp.asarray(ab[:, 0]), jnp.asarray(ab[:, 1]))
                             .to_event(1))
        d = lam[f] - lam[t]
        if st.bias:
            beta = numpyro.sample("beta", dist.Normal(0.0, bias_sd).expand([st.n_workers])
                                  .to_event(1))
            b = beta[wk]
        else:
            b = jnp.zeros_like(d)
        le, l1e = jnp.log(eta[g]), jnp.log1p(-eta[g])
        lp1 = jnp.logaddexp(le + log_sigmoid(d + b), l1e + log_sigmoid(b - d))
        lp0 = jnp.logaddexp(le + log_sigmoid(-(d + b)), l1e + log_sigmoid(d - b))
        numpyro.sample("y", dist.Bernoulli(logits=lp1 - lp0), obs=y)

    return model


def pymc_model(st: Structure, worker_ab, mu0: float = 0.0, sigma0: float = 1.0,
               bias_sd: float = 1.0):
    """The PyMC twin of :func:`numpyro_model` (same sites, coordinates named after ids)."""
    import pymc as pm
    import pytensor.tensor as pt

    ab = group_beta(st, worker_ab)
    coords = {"item": list(st.items), "group": list(st.groups)}
    if st.bias:
        coords["worker"] = list(st.workers)
    with pm.Model(coords=coords) as m:
        lam = pm.Normal("lambda", mu=mu0, sigma=sigma0, dims="item")
        eta = pm.Beta("eta", alpha=ab[:, 0], beta=ab[:, 1], dims="group")
        d = lam[st.first] - lam[st.second]
        if st.bias:
            beta = pm.Normal("beta", mu=0.0, sigma=bias_sd, dims="worker")
            b = beta[st.worker]
        else:
            b = pt.zeros_like(d)
        le, l1e = pt.log(eta[st.group]), pt.log1p(-eta[st.group])
        def ls(x):                        # log σ(x) = −softplus(−x), stable both ways
            return -pt.softplus(-x)

        lp1 = pt.logaddexp(le + ls(d + b), l1e + ls(b - d))
        lp0 = pt.logaddexp(le + ls(-(d + b)), l1e + ls(d - b))
        pm.Bernoulli("y", logit_p=lp1 - lp0, observed=st.y)
    return m
