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
serves every data set of one shape. Normalised COUPLE subtracts ``log Σ Eq. 4`` over the
``k!`` orderings of each task's items: every ordering of the table's width ``K`` is
scored at once and those that move a padding position are masked out
(:func:`masked_log_normalizer`; ``K!`` rows per task, ``K ≤ 6`` as in the program).

Every prior part is a sample site with a proper distribution, so ``Predictive`` draws
the prior of every latent site: ``λ`` as :func:`crowdrank.models.numpyro.program.item_scores`
and the worker family's sites of the exact Gamma construction (docs/design.md §5.1). By
default **without** the magnitude reweighting ``eta_level``: the helper sites ``eta_g ~
Gamma(α)``, ``eta_u ~ Gamma(α + 1)``, ``eta_e ~ Exp(1)`` are then independent and exactly
their own laws, and ``η = g/Σg ~ Dirichlet(α)`` (``Beta(a, b)`` for CrowdBT) exactly as in
the sampler's program, whose reweighting changes the helper sites' joint law but not
``η``'s. With ``make_model(..., level_sd=sd)`` the helpers carry the sampler's
reweighting, the program's joint density exactly, as one site ``eta_aux``
(:class:`LevelGammas`) that ``Predictive`` draws exactly — where the program's
``numpyro.factor`` is a term ``Predictive`` cannot draw.

**BT and CrowdBT are pairwise models.** On rankings of two items their density is a
distribution over orderings and ``Predictive`` draws from it. On longer rankings their
likelihood is the rank-broken product over position pairs (a pseudo-likelihood: summed
over the ``k!`` orderings it is below 1, e.g. 0.79 at ``k = 3`` and 0.43 at ``k = 4`` for
CrowdBT with ``η = 0.95``), while their ``sample`` draws a Plackett–Luce order reversed
whole with probability ``1 − η``: the draws do not follow the density. Simulation-based
calibration of BT or CrowdBT (``simuk``, ``crowdrank sbc``) must use pairs
(docs/sbc.md, "CrowdBT's accuracy and the outside tool").
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

from .. import array_forms
from ..couple_normalizer import padded_orderings
from ..registry import REGISTRY, get
from ..reparam import boost_split, level_log_ratio
from .scores import item_scores

#: A finite stand-in for ``−∞`` at padded positions: it keeps every logsumexp and its
#: gradient finite (``exp(−∞ − (−∞))`` would be NaN), and adds exactly 0 to any real sum.
_PAD = -1e30


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
    row's worker, summed over the row's rank-broken pairs (positions ``a < b``; the form
    both PPLs share, :func:`crowdrank.models.array_forms.crowdbt`)."""
    return array_forms._pairs(JAX_OPS, x, valid, log_w, x.shape[1])


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


def masked_log_normalizer(x, valid, log_w):
    """``log Σ_π Eq. 4`` of each row over the ``k!`` orderings ``π`` of its ``k`` real
    positions (normalised COUPLE; [Pan18], Eq. 4, docs/design.md §2): every ordering of the
    table's ``K`` positions is scored by :func:`masked_couple` in one ``(n·K!, K)`` table
    and those that move a padding position are left out of the logsumexp."""
    n, K = x.shape
    perms, last = padded_orderings(K)
    P = perms.shape[0]
    ll = masked_couple(x[:, perms].reshape(n * P, K), jnp.repeat(valid, P, axis=0),
                       jnp.repeat(log_w, P, axis=0)).reshape(n, P)
    k = jnp.sum(valid, axis=1)
    return jax.nn.logsumexp(jnp.where(last[None, :] < k[:, None], ll, -jnp.inf), axis=1)


#: The JAX array namespace of the models' shared forms (:mod:`crowdrank.models.array_forms`):
#: elementwise operations and this module's masked PL, COUPLE and normaliser.
JAX_OPS = SimpleNamespace(
    where=jnp.where, sum=jnp.sum, exp=jnp.exp, log_sigmoid=log_sigmoid, logaddexp=jnp.logaddexp,
    pl=lambda x, valid, K: masked_pl(x, valid),
    couple=lambda x, valid, log_w, K: masked_couple(x, valid, log_w),
    normalizer=lambda x, valid, log_w, K: masked_log_normalizer(x, valid, log_w))


def array_models() -> tuple[str, ...]:
    """The registered models with an exported NumPyro array form (their spec names
    ``array_loglik`` and ``numpyro_array_draw``), in the registry's order."""
    return tuple(name for name, spec in REGISTRY.items()
                 if spec.array_loglik is not None and spec.numpyro_array_draw is not None)


def array_fn(model: str, role: str):
    """The function ``role`` (``"array_loglik"``, ``"numpyro_array_draw"``) of ``model``'s
    spec; a ``ValueError`` naming what to add when the model has none (an unknown name or
    a spec without its array form: never another model's density)."""
    spec = REGISTRY.get(model)
    f = None if spec is None else spec.fn(role)
    if f is None:
        hint = ("" if spec is None else
                f" (its ModelSpec names no {role}: add the function to the model's entry, "
                f"docs/design.md, \"Adding a model\")")
        raise ValueError(f"no array form of model {model!r}{hint}; expected one of "
                         f"{array_models()}")
    return f


def masked_loglik(model: str, lam, order, workers=None, log_eta=None):
    """One log-likelihood per row of the padded orders ``order`` ``(n, K)`` of ``model``,
    traceable in ``order``; ``log_eta`` is the family's table
    (:func:`crowdrank.models.numpyro.program.log_eta_table`). The model's own form is its
    spec's ``array_loglik`` ``f(ops, x, valid, log_w, K)`` (:mod:`crowdrank.models.array_forms`)
    with ``ops`` :data:`JAX_OPS`, of the gathered scores ``x`` ``(n, K)``, the mask of real
    positions and the rows' worker table."""
    f = array_fn(model, "array_loglik")
    x, valid = _gather(jnp.asarray(lam), jnp.asarray(order))
    log_w = None if log_eta is None else jnp.asarray(log_eta)[jnp.asarray(workers)]
    return f(JAX_OPS, x, valid, log_w, x.shape[1])


# ---------------------------------------------------------------- masked draws
def task_lengths(items):
    """The task lengths ``(n,)`` of a concrete padded ``(n, K)`` table (NumPy), or
    ``None`` when ``items`` is traced (their values are then not known)."""
    if isinstance(items, jax.core.Tracer):
        return None
    return (np.asarray(items) >= 0).sum(axis=1)


def masked_draw(model: str, key, items, lam, log_w=None, lengths=None):
    """New orders of the padded item sets ``items`` ``(n, K)`` by the model's generative
    process (as :class:`crowdrank.models.numpyro.program.RankingLikelihood`), its spec's
    ``numpyro_array_draw`` ``f(key, items, lam, log_w, lengths)``: PL by sorting
    ``λ + Gumbel`` with the padding last (:func:`draw_pl_array`); CrowdBT reverses the
    real part with probability ``1 − η``; COUPLE runs its stagewise story, normalised
    COUPLE draws one of the ``k!`` orderings by its probability, on each length's rows.

    COUPLE's two models split the rows by task length, a static fact of the design:
    ``lengths`` ``(n,)`` (NumPy; :func:`task_lengths`), read from ``items`` when they are
    concrete. So the draw runs under tracing (``Predictive``, ``jit``, ``lax.map``) with
    ``items`` a tracer as long as ``lengths`` is given, and gives the same values as the
    eager draw for the same key. With neither (``items`` traced, no ``lengths``) the two
    models draw by the masked stagewise story over the whole table
    (:func:`_masked_couple_draw`): the same law, another use of the key."""
    return array_fn(model, "numpyro_array_draw")(key, items, lam, log_w, lengths)


def _true_order(k_true, items, x, valid):
    """The items of each row sorted by ``x + Gumbel``, the padding last (a PL draw)."""
    g = jnp.where(valid, x + jax.random.gumbel(k_true, x.shape, x.dtype), -jnp.inf)
    return jnp.take_along_axis(items, jnp.argsort(-g, axis=1, stable=True), axis=1)


def draw_pl_array(key, items, lam, log_w=None, lengths=None):
    """Plackett–Luce's (and BT's) draw: ``λ + Gumbel`` sorted, the padding last."""
    k_true, _, _ = jax.random.split(key, 3)
    x, valid = _gather(lam, items)
    return _true_order(k_true, items, x, valid)


def draw_scaled_array(key, items, lam, log_w, lengths=None):
    """PeerGrader's draw: Plackett–Luce on ``η_g·λ``."""
    k_true, _, _ = jax.random.split(key, 3)
    x, valid = _gather(lam, items)
    x = x * jnp.exp(log_w)[:, None]
    return _true_order(k_true, items, x, valid)


def draw_crowdbt_array(key, items, lam, log_w, lengths=None):
    """CrowdBT's draw: a PL order, its real part reversed with probability ``1 − η``."""
    k_true, k_flip, _ = jax.random.split(key, 3)
    x, valid = _gather(lam, items)
    true = _true_order(k_true, items, x, valid)
    k = jnp.sum(valid, axis=1, keepdims=True)
    j = jnp.arange(items.shape[1])[None, :]
    rev = jnp.take_along_axis(true, jnp.where(j < k, k - 1 - j, j), axis=1)
    right = jnp.log(jax.random.uniform(k_flip, (items.shape[0],), lam.dtype)) < log_w[:, 0]
    return jnp.where(right[:, None], true, rev)


def draw_couple_array(key, items, lam, log_w, lengths=None):
    """Stagewise COUPLE's draw, one block per task length (:func:`masked_draw`)."""
    return _couple_family_draw(key, items, lam, log_w, lengths, normalized=False)


def draw_normalized_array(key, items, lam, log_w, lengths=None):
    """Normalised COUPLE's draw: one of each task's ``k!`` orderings by its probability."""
    return _couple_family_draw(key, items, lam, log_w, lengths, normalized=True)


def _couple_family_draw(key, items, lam, log_w, lengths, normalized: bool):
    k_true, _, k_stage = jax.random.split(key, 3)
    x, valid = _gather(lam, items)
    true = _true_order(k_true, items, x, valid)
    if lengths is None:
        lengths = task_lengths(items)
    if lengths is None:                              # traced items, no design lengths
        return _masked_couple_draw(normalized, k_stage, items, x, valid, true, log_w)
    from .couple import draw_couple, draw_normalized

    draw = draw_normalized if normalized else draw_couple
    lengths = np.asarray(lengths)                    # static: one block per k
    out = jnp.full(items.shape, -1, items.dtype)
    for k, kk in zip(sorted(set(lengths.tolist())),
                     jax.random.split(k_stage, len(set(lengths.tolist())))):
        sel = np.flatnonzero(lengths == k)
        rep = draw(kk, jnp.asarray(items)[sel, :k], log_w[sel], lam)
        out = out.at[sel, :k].set(rep.astype(items.dtype))
    return out


def _masked_couple_draw(normalized, key, items, x, valid, true, log_w):
    """COUPLE's draws over the whole padded table with traced lengths: the stagewise
    story (at a stage with ``m`` real items left, the item at offset ``t`` of the remaining
    true order ``true`` with probability ``η_t / Σ_{v<m} η_v``), or for normalised COUPLE
    one of the orderings that leave the padding in place with probability Eq. 4 / Σ Eq. 4
    ([Pan18], Eq. 3-4)."""
    n, K = items.shape
    k = jnp.sum(valid, axis=1)
    if normalized:
        perms, last = padded_orderings(K)
        P = perms.shape[0]
        ll = masked_couple(x[:, perms].reshape(n * P, K), jnp.repeat(valid, P, axis=0),
                           jnp.repeat(log_w, P, axis=0)).reshape(n, P)
        j = jax.random.categorical(key, jnp.where(last[None, :] < k[:, None], ll, -jnp.inf),
                                   axis=1)
        return jnp.take_along_axis(items, jnp.asarray(perms)[j], axis=1)
    remaining, out = true, []
    for i, sk in zip(range(K), jax.random.split(key, K)):
        m = jnp.maximum(k - i, 1)[:, None]               # real items left (≥ 1: no NaN)
        t = jax.random.categorical(sk, jnp.where(jnp.arange(K - i)[None, :] < m,
                                                 log_w[:, :K - i], -jnp.inf), axis=1)
        out.append(jnp.where(i < k, jnp.take_along_axis(remaining, t[:, None], 1)[:, 0], -1))
        pos = jnp.arange(K - i - 1)[None, :]
        remaining = jnp.where(pos < t[:, None], remaining[:, :-1], remaining[:, 1:])
    return jnp.stack(out, axis=1).astype(items.dtype)


class ArrayRankings(dist.Distribution):
    """The rankings of the tasks ``items`` ``(n, K)`` (``-1`` padding) reported by
    ``workers`` as one NumPyro site; ``log_prob`` is one log-likelihood per ranking
    (:func:`masked_loglik`, traceable in the value), ``sample`` the generative process
    (:func:`masked_draw`; the task lengths of concrete ``items`` are kept as static data,
    so it draws under tracing too). ``batch_shape = (n,)``, ``event_shape = (K,)``."""

    arg_constraints: ClassVar[dict] = {}
    pytree_data_fields = ("lam", "log_eta", "items", "workers")
    # static: the task lengths of concrete items (bytes, hashable), read when the site is
    # made, so that COUPLE's draw splits its rows by length under tracing too
    pytree_aux_fields = ("model", "lengths_key")

    def __init__(self, model, items, workers, lam, log_eta=None, validate_args=None):
        array_fn(model, "array_loglik")
        array_fn(model, "numpyro_array_draw")
        lengths = task_lengths(items)
        self.lengths_key = None if lengths is None else lengths.astype(np.int64).tobytes()
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
        lengths = None if self.lengths_key is None else np.frombuffer(self.lengths_key,
                                                                        np.int64)
        return masked_draw(self.model, key, self.items, self.lam, self._log_w(), lengths)


# ---------------------------------------------------------------- reweighted worker sites
class LevelGammas(dist.Distribution):
    """The helper values of the exact Gamma construction of ``η_w ~ Dirichlet(α_w)``
    (docs/design.md §5.1) under the sampler's magnitude reweighting, as one site: the value
    is the program's ``eta_g`` (``α ≥ BOOST_BELOW``, row-major), ``eta_u`` and ``eta_e``
    (the boosted entries) concatenated, ``(n_big + 2·n_small,)``.

    ``log_prob`` is the program's joint density of those sites with its ``eta_level``
    factor: ``Σ log Gamma(g; α) + Σ log Gamma(u; α + 1) + Σ log Exp(e; 1)`` plus, per worker,
    :func:`crowdrank.models.reparam.level_log_ratio` of ``S = Σ_t g_t`` (``log g = log u −
    e/α`` for boosted entries). The factor moves ``S`` from ``Gamma(Σα)`` to ``log S ~
    Normal(0, sd²)`` and leaves the law of everything given ``S`` alone, so ``sample`` is
    exact: ``log S ~ Normal(0, sd²)``; ``log η`` of a Dirichlet draw (in log space, by the
    boost itself, so tiny ``α`` do not underflow); ``g = S·η``; and for a boosted entry
    ``u = g + Exp(1)``, ``e = α log(u/g)`` — the law of ``(u, e)`` given ``g = u·e^{−e/α}``
    (the density of ``(g, u)`` is ``g^{α−1} e^{−u}/Γ(α)`` on ``u ≥ g``)."""

    arg_constraints: ClassVar[dict] = {}
    support = dist.constraints.independent(dist.constraints.positive, 1)
    pytree_data_fields = ("alpha",)
    # static: the boost split, and what level_log_ratio reads in NumPy (Σα's lgamma)
    pytree_aux_fields = ("big", "small", "alpha_sum", "sd")

    def __init__(self, alpha, level_sd, validate_args=None):
        a = np.asarray(alpha, float)
        if a.ndim != 2 or not np.all(a > 0):
            raise ValueError(f"alpha must be a positive (W, K) table, got shape {a.shape}")
        if not np.all(np.asarray(level_sd, float) > 0):
            raise ValueError(f"level_sd must be positive (one value or one per worker), "
                             f"got {level_sd!r}")
        big, small = boost_split(a)
        self.big = tuple(tuple(int(i) for i in ix) for ix in big)
        self.small = tuple(tuple(int(i) for i in ix) for ix in small)
        self.alpha = jnp.asarray(a)
        self.alpha_sum = tuple(float(v) for v in a.sum(axis=1))
        self.sd = tuple(float(v) for v in np.broadcast_to(np.asarray(level_sd, float),
                                                          a.shape[:1]))
        size = len(self.big[0]) + 2 * len(self.small[0])
        super().__init__(batch_shape=(), event_shape=(size,), validate_args=validate_args)

    def _log_g(self, value):
        """``(log g (..., W, K), log Gamma(g) + log Gamma(u) + log Exp(e))`` of ``value``."""
        nb, ns = len(self.big[0]), len(self.small[0])
        g, u, e = value[..., :nb], value[..., nb:nb + ns], value[..., nb + ns:]
        a_big, a_small = self.alpha[self.big], self.alpha[self.small]
        lp = (jnp.sum(dist.Gamma(a_big).log_prob(g), -1)
              + jnp.sum(dist.Gamma(a_small + 1.0).log_prob(u), -1)
              + jnp.sum(dist.Exponential(1.0).log_prob(e), -1))
        log_g = jnp.zeros(value.shape[:-1] + self.alpha.shape, value.dtype)
        log_g = log_g.at[(..., *self.big)].set(jnp.log(g))
        return log_g.at[(..., *self.small)].set(jnp.log(u) - e / a_small), lp

    def log_eta(self, value):
        """The worker table ``log η = log g − log Σg`` ``(..., W, K)`` of ``value``."""
        log_g, _ = self._log_g(value)
        return log_g - jax.scipy.special.logsumexp(log_g, axis=-1, keepdims=True)

    def log_prob(self, value):
        log_g, lp = self._log_g(value)
        log_s = jax.scipy.special.logsumexp(log_g, axis=-1)
        return lp + jnp.sum(level_log_ratio(log_s, np.array(self.alpha_sum), jnp,
                                            np.array(self.sd)), -1)

    def sample(self, key, sample_shape=()):
        k_u, k_e, k_s, k_x = jax.random.split(key, 4)
        a = self.alpha
        shape = tuple(sample_shape) + a.shape
        lg = jnp.log(jax.random.gamma(k_u, a + 1.0, shape)) - jax.random.exponential(
            k_e, shape) / a                                   # log Gamma(α) by the boost
        log_eta = lg - jax.scipy.special.logsumexp(lg, axis=-1, keepdims=True)
        log_s = jnp.asarray(self.sd) * jax.random.normal(k_s, shape[:-1])
        log_g = log_s[..., None] + log_eta
        log_u = jnp.logaddexp(log_g, jnp.log(jax.random.exponential(k_x, shape)))
        e = a * (log_u - log_g)
        return jnp.concatenate([jnp.exp(log_g[(..., *self.big)]),
                                jnp.exp(log_u[(..., *self.small)]),
                                e[(..., *self.small)]], axis=-1)


# ---------------------------------------------------------------- the model functions
def _worker_sites(model, alpha, level_sd):
    fam = get(model).worker_prior
    inputs = SimpleNamespace(alpha=np.asarray(alpha, float))
    if level_sd is None or not fam.simplex_coordinates:
        # no magnitude reweighting: every helper site its own proper distribution
        return fam.numpyro_log_eta(inputs, "gamma", None, None, reweight=False)
    site = LevelGammas(alpha, level_sd)
    value = numpyro.sample("eta_aux", site)
    nb, ns = len(site.big[0]), len(site.small[0])
    # the program's site names, as deterministic slices of the joint value
    for name, part in (("eta_g", value[:nb]), ("eta_u", value[nb:nb + ns]),
                       ("eta_e", value[nb + ns:])):
        if part.shape[0]:
            numpyro.deterministic(name, part)
    log_eta = site.log_eta(value)
    numpyro.deterministic("eta", fam._det_eta(log_eta, jnp))
    return log_eta


def make_model(model: str, *, level: str = "centered", level_sd=None):
    """The NumPyro program of ``model`` as a function of arrays (module docstring):
    ``f(items, workers, n_items, alpha=None, mu0=0.0, sigma0=1.0, rankings=None)``.
    ``level_sd`` (a number, or one per worker; the program's is
    :data:`crowdrank.models.reparam.LEVEL_SD`) gives the Dirichlet and Beta families'
    helper values the sampler's magnitude reweighting ``eta_level`` (docs/design.md §5.1)
    as the one site ``eta_aux`` (:class:`LevelGammas`), drawn exactly by ``Predictive``;
    ``eta_g``, ``eta_u``, ``eta_e`` are then its deterministic slices."""
    array_fn(model, "array_loglik")
    array_fn(model, "numpyro_array_draw")
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
couple_normalized_model = make_model("couple-normalized")
peergrader_model = make_model("peergrader")


#: The registered models offered as functions of arrays when this module was imported
#: (:func:`array_models` reads the registry now).
ARRAY_MODELS = array_models()


def model_arrays(inputs) -> dict:
    """The keyword arguments of the array model for a
    :class:`~crowdrank.models.model_inputs.ModelInputs` built from data: ``items`` (the
    observed orders' item sets, in observed order), ``workers``, ``n_items``, ``alpha``,
    ``mu0``, ``sigma0`` and the observed ``rankings``."""
    order = np.asarray(inputs.order)
    return {"items": order, "workers": np.asarray(inputs.obs_worker),
            "n_items": int(inputs.n_items), "alpha": inputs.alpha, "mu0": inputs.mu0,
            "sigma0": inputs.sigma0, "rankings": order}
