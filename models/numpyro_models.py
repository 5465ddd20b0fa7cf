"""The five models as NumPyro programs (docs/design.md, Models; [Pan18], Eq. 1-4).

Every model is a plain function of a :class:`~crowdrank.models.model_inputs.ModelInputs` (padded
arrays), vectorised over rankings; the only Python loops are over the ``<= 5`` ranking
lengths and the ``K <= 6`` stage positions. The likelihood enters as one
``numpyro.factor("loglik")``.

Parametrisation (what the sampler moves; ``docs/design.md``, "Sampling"). The *model* is
always ``λ_r ~ Normal(mu0, sigma0²)`` iid and ``η_w ~ Dirichlet(α_w)`` (COUPLE) or
``Beta(a_w, b_w)`` (CrowdBT); two exact reparametrisations are the defaults:

* ``simplex="gamma"``: ``η_w`` through independent Gammas with the Marsaglia–Tsang boost
  [MT00], ``g_t = u_t · U_t^{1/α_t}``, ``u_t ~ Gamma(α_t + 1)``, ``e_t = −log U_t ~ Exp(1)``,
  so ``log g_t = log u_t − e_t/α_t`` and ``log η = log_softmax(log g)``. Sites ``eta_u``,
  ``eta_e`` (one entry per concentration below :data:`BOOST_BELOW`) and ``eta_g``
  (``g_t ~ Gamma(α_t)`` directly for the others), over the ``(W, K)`` table (``(W, 2)`` for
  CrowdBT, whose ``η = η_1``) in row-major order; ``eta`` is a deterministic site. ``g_t ~ Gamma(α_t)`` independently, so ``g/Σg ~ Dirichlet(α)``
  exactly and ``Σg`` is an auxiliary variable the likelihood never sees; the sampler works
  on ``log u`` and ``log e``, whose scales stay O(1) however small ``α_t`` is, and ``log η``
  enters the likelihood without ever being clamped. ``simplex="dirichlet"`` is NumPyro's
  own Dirichlet/Beta (stick-breaking), kept for comparison: for ``α_t ≪ 1`` its transform
  clips the simplex and inflates ``E[η_t]`` several-fold without a divergence.
  ``simplex="gibbs"`` (COUPLE): one site ``eta_log_g`` = ``log g``, ``g_t ~ Gamma(α_t)``
  (:class:`LogGamma`), that NUTS never moves: the exact Gibbs step of
  :mod:`crowdrank.inference.nuts.gibbs` does (``fit_nuts(eta_update="gibbs")``).
* ``level="centered"``: ``λ = m·1 + λ_c`` with ``m ~ Normal(mu0, sigma0²/L)`` (site
  ``lambda_mean``) and ``λ_c ~ ZeroSumNormal(sigma0)`` (site ``lambda_c``), the same prior
  as iid ``Normal(mu0, sigma0²)``; the likelihood sees only ``λ_c``, so the narrow ridge
  along ``(1, …, 1)`` that slows every ``λ_r`` becomes one prior-only coordinate.
  ``level="iid"`` samples ``lambda`` directly.

Numerics of the COUPLE stage ([Pan18], Eq. 3). With ``m`` candidates ``c = ρ(i..k)``,

    log P_i = log Σ_{t<m} η_t e^{λ_{c_t}} − log Σ_{t<m} e^{λ_{c_t}} − log Σ_{v<m} η_v,

which is ``logsumexp_t(log η̄_t + log softmax(λ_c)_t)`` rearranged: the first term is a
logsumexp of ``log η_t + λ_{c_t}`` (stable, shifted by its own maximum), the second is
computed for all stages at once by the backward recursion
``LSE_i = logaddexp(λ_{ρ(i)}, LSE_{i+1})`` (one ``exp`` per stage instead of ``m``), and the
third is a per-worker table ``log cumsum(η)``. Rankings of one length form one dense block
(:attr:`ModelInputs.blocks`), so no masks or ``-inf`` padding enter the arithmetic.

The ``*_loglik`` functions return one value per *column*; :func:`pointwise_loglik` sums
them to one value per source ranking.

The data enter as one observed site, ``rankings`` (:class:`RankingLikelihood`, a NumPyro
``Distribution`` whose value is the ``(n_obs, K)`` table of observed orders): its
``log_prob`` is the per-ranking log-likelihood, so ``numpyro.infer.log_likelihood`` and
``Predictive`` work on these models, and its ``sample`` is the generative process.

For COUPLE the site's values come from :func:`couple_columns` (per ranking) or, in the
sampler's form ``model(..., pointwise=False)``, their sum from :func:`couple_total`: the
same values, with a hand-written gradient computed in the forward pass
(``jax.custom_vjp``); at the paper's scale on 2 CPU cores the scalar kernel measured 13 ms
per potential+gradient against 52 ms for autodiff of ``column_loglik`` (float32;
``bench/results/nuts_gradient.json``). ``model(..., fast=False)`` gives the autodiff path
back.

Precision. ``model(..., loglik_dtype="float32")`` does the elementwise work of the
likelihood in float32 (half the cost at scale) but sums each block's total in float64 when
JAX runs with 64-bit types: a total of ~10⁶ nats has a float32 spacing of ~0.1 nat, the
size of the energy differences NUTS weighs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.nn import log_sigmoid

from .couple_normalizer import ordering_stage_product
from .model_inputs import ModelInputs
from .registry import get

SIMPLEX = ("gamma", "dirichlet", "gibbs")
LEVEL = ("centered", "iid")


# ---------------------------------------------------------------- row kernels
def _lse_rows(rows):
    """``log Σ_j exp(rows[j])`` for a short list of equal-shape arrays, stably.

    Written row by row so that XLA fuses it into one elementwise loop; the shift is a
    ``stop_gradient`` (the value does not depend on it, and neither does the gradient).
    """
    m = rows[0]
    for r in rows[1:]:
        m = jnp.maximum(m, r)
    m = jax.lax.stop_gradient(m)
    s = jnp.exp(rows[0] - m)
    for r in rows[1:]:
        s = s + jnp.exp(r - m)
    return m + jnp.log(s)


def _suffix_lse(x):
    """``LSE_i = log Σ_{j≥i} exp(x[j])`` for ``i = 0..k-2`` by backward recursion."""
    k = x.shape[0]
    out = [None] * (k - 1)
    acc = x[k - 1]
    for i in range(k - 2, -1, -1):
        acc = jnp.logaddexp(x[i], acc)
        out[i] = acc
    return out


def pl_block(x):
    """Plackett–Luce ([Pan18], Eq. 1) of a dense block: ``x = λ[ρ]`` ``(k, n)`` → ``(n,)``."""
    lse = _suffix_lse(x)
    return sum(x[i] - lse[i] for i in range(x.shape[0] - 1))


def couple_block(x, log_eta_rows, log_cum_rows):
    """COUPLE ([Pan18], Eq. 3-4) of a dense block of rankings of one length ``k``.

    Parameters
    ----------
    x : (k, n)
        ``λ`` of each ranking's items in reported order.
    log_eta_rows : (k, n)
        ``log η_w[t]`` of each ranking's worker.
    log_cum_rows : (k, n)
        ``log Σ_{v≤t} η_w[v]`` of each ranking's worker.
    """
    k = x.shape[0]
    lse = _suffix_lse(x)
    total = 0.0
    for i in range(k - 1):
        m = k - i
        mix = _lse_rows([log_eta_rows[t] + x[i + t] for t in range(m)])
        total = total + mix - lse[i] - log_cum_rows[m - 1]
    return total


def pair_block(x, log_eta_pairs=None):
    """BT (``log_eta_pairs=None``) or CrowdBT [Chen13] per pair ``x = (λ_i, λ_j)``:
    ``log(η σ(d) + (1 − η) σ(−d))``, ``d = λ_i − λ_j``, via logaddexp for stability.

    ``log_eta_pairs`` is ``(2, n)``: ``log η`` and ``log(1 − η)`` of each pair's worker, so
    that an accuracy near 0 or 1 never goes through ``log(1 − η)`` of a rounded ``η``."""
    d = x[0] - x[1]
    if log_eta_pairs is None:
        return log_sigmoid(d)
    return jnp.logaddexp(log_eta_pairs[0] + log_sigmoid(d),
                         log_eta_pairs[1] + log_sigmoid(-d))


def _safe_log(x):
    # A Dirichlet draw can underflow to exactly 0 (float32, tiny α); log(tiny) keeps the
    # stage finite (that entry's weight is ~0 anyway) instead of producing -inf - -inf.
    return jnp.log(jnp.maximum(x, jnp.finfo(x.dtype).tiny))


def log_eta_table(inputs: ModelInputs, eta=None, log_eta=None):
    """The worker table the likelihood reads: ``(W, K)`` ``log η`` (COUPLE) or ``(W, 2)``
    ``[log η, log(1 − η)]`` (CrowdBT), from ``log_eta`` when given (exact), else from
    ``eta`` (a Dirichlet row, or CrowdBT's accuracy ``(W,)``)."""
    if log_eta is not None:
        return jnp.asarray(log_eta)
    # the family's layout: Beta [log η, log(1 − η)]; Dirichlet rows and Gamma (W,) in log
    return get(inputs.model).worker_prior.log_table(jnp.asarray(eta), jnp, _safe_log)


def couple_log_normalizer(lam, log_eta, log_cum, index, worker, group):
    """``log Σ_{k! orderings} Eq. 4`` for the rankings of one length (``docs/design.md``).

    Returns ``(n,)``. Stage ``i`` of ordering ``π`` (``m = k − i`` items left) contributes
    ``Σ_{t<m} η_t p_{π(i+t)} / (S_i · Σ_{v<m} η_v)`` with ``p = exp(λ − max)`` and the
    suffix sum ``S_i = Σ_{j≥i} p_{π(j)}`` ([Pan18], Eq. 4), so the sum over orderings is
    a sum of products of ratios, computed in linear space
    (:func:`crowdrank.models.couple_normalizer.ordering_stage_product`, shared with PyMC):

    * ``λ`` is gathered once per task (``(k, n)``); an ordering is a *static* reordering of
      those ``k`` rows, so no ``k!``-fold gather (and no ``k!``-fold scatter-add in the
      backward pass, which cost most of the gradient);
    * the worker weights ``w^{(m)}_t = exp(log η_t − log Σ_{v<m} η_v)`` (``t < m``) are
      each ``≤ 1`` and their largest is ``≥ 1/m``, so nothing underflows however small
      ``η_t`` is (an underflowed ``w`` is an entry whose weight is ``< 1e-308``);
    * ``p ∈ (0, 1]`` after the per-task shift, which cancels in every ratio.

    Every ratio is a positive ``O(1)`` quantity (for ``λ`` spreads within a task below
    ~50 in float64), so the sum is taken directly and its log returned. Measured 3.3x
    cheaper per gradient than the log-space form over gathered orderings
    (``bench/bench_couple_normalizer.py``), equal to it to ~1e-13.
    """
    k, a, b = group.k, group.start, group.stop
    x = lam[index[:k, a:b]]                                   # (k, n): one gather
    p = jnp.exp(x - jax.lax.stop_gradient(x.max(axis=0)))
    le = log_eta[worker[a:b], :k].T                           # (k, n)
    lc = log_cum[worker[a:b], :k].T
    w = {m: [jnp.exp(le[t] - lc[m - 1]) for t in range(m)] for m in range(2, k + 1)}
    total = 0.0
    for perm in np.asarray(group.perms):                      # static: k! orderings
        total = total + ordering_stage_product([p[j] for j in perm],
                                               lambda m, t: w[m][t], k)
    return jnp.log(total)


def couple_log_normalizer_gathered(lam, log_eta, log_cum, index, worker, group):
    """The same as :func:`couple_log_normalizer`, the direct way: every ordering scored
    with :func:`couple_block` in log space on a ``(k, k!·n)`` gathered layout, combined by
    logsumexp. Kept as the reference the fast form is tested and measured against."""
    k, a, b = group.k, group.start, group.stop
    P, n = group.perms.shape[0], b - a
    cand = index[:k, a:b][group.perms.T].reshape(k, P * n)     # ordering p of task j
    w = jnp.tile(worker[a:b], P)
    ll = couple_block(lam[cand], log_eta[w, :k].T, log_cum[w, :k].T).reshape(P, n)
    return _lse_rows([ll[p] for p in range(P)])


# ---------------------------------------------------------------- whole data
def column_loglik(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """Log-likelihood of every column of the (length-sorted) layout: rankings, or pairs.

    The worker parameters are ``eta`` (``(W, K)`` Dirichlet rows, or CrowdBT's ``(W,)``
    accuracies) or, exactly, ``log_eta`` in the layout of :func:`log_eta_table`.
    """
    # init_to_value hands back the caller's NumPy arrays: make them JAX arrays before
    # they are indexed with traced indices
    lam = jnp.asarray(lam)
    spec = get(inputs.model)
    log_eta = log_eta_table(inputs, eta, log_eta) if spec.has_eta else None
    return spec.fn("numpyro_columns")(inputs, lam, log_eta)


# The models' column functions (models.registry.ModelSpec.numpyro_columns):
# ``f(inputs, lam, log_eta)`` with ``log_eta`` the table of :func:`log_eta_table` (or None).
def ranking_columns(inputs: ModelInputs, lam, log_eta=None):
    """Plackett–Luce ([Pan18], Eq. 1), one value per ranking column."""
    index = inputs.index
    return jnp.concatenate([pl_block(lam[index[:k, a:b]]) for k, a, b in inputs.blocks])


def pair_columns(inputs: ModelInputs, lam, log_eta=None):
    """BT on the rank-broken pairs, or CrowdBT [Chen13] when the worker table is given."""
    if log_eta is None:
        return pair_block(lam[inputs.index])
    return pair_block(lam[inputs.index], log_eta[inputs.worker].T)


def scaled_columns(inputs: ModelInputs, lam, log_eta):
    """PeerGrader [Raman14]: PL on the grader's scaled scores ``η_g·λ`` (one scale per
    column)."""
    index = inputs.index
    scale = jnp.exp(log_eta)[inputs.worker]
    return jnp.concatenate([pl_block(lam[index[:k, a:b]] * scale[a:b])
                            for k, a, b in inputs.blocks])


def couple_columns_ad(inputs: ModelInputs, lam, log_eta):
    """COUPLE ([Pan18], Eq. 3-4) by autodiff; normalised COUPLE subtracts, for each
    length group of ``inputs.groups``, ``log Σ_orderings Eq. 4``."""
    index, worker = inputs.index, inputs.worker
    # log Σ_{v≤t} η_v as a cumulative logsumexp of log η: exact however small η_v is
    log_cum = jax.lax.cumlogsumexp(log_eta, axis=1)
    # One (W, 2K) table gathered once per block: one scatter-add in the backward pass
    # instead of two (measured 63 -> 53 ms per gradient at the paper's scale, 2 cores).
    table = jnp.concatenate([log_eta, log_cum], axis=1)
    K = log_eta.shape[1]
    parts = []
    for k, a, b in inputs.blocks:
        rows = table[worker[a:b]].T
        parts.append(couple_block(lam[index[:k, a:b]], rows[:k], rows[K:K + k]))
    ll = jnp.concatenate(parts)
    for g in inputs.groups:
        z = couple_log_normalizer(lam, log_eta, log_cum, index, worker, g)
        ll = ll.at[g.start:g.stop].add(-z)
    return ll


def pointwise_loglik(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """One log-likelihood value per source ranking, ``(n_obs,)``, in the data's order: the
    columns are put back by ``origin`` and the pairs of BT/CrowdBT summed per ranking."""
    ll = column_loglik(inputs, lam, eta, log_eta=log_eta)
    return jax.ops.segment_sum(ll, jnp.asarray(inputs.origin), num_segments=inputs.n_obs)


# ---------------------------------------------------------------- priors (sampler coordinates)
def item_scores(inputs: ModelInputs, level: str = "centered"):
    """Sample ``λ ~ Normal(mu0, sigma0²)`` iid, as ``lambda`` (``level="iid"``) or as
    ``lambda_mean + lambda_c`` (``"centered"``, the same prior; module docstring)."""
    L = inputs.n_items
    if level == "iid" or L < 2:
        return numpyro.sample("lambda", dist.Normal(inputs.mu0, inputs.sigma0)
                              .expand([L]).to_event(1))
    # mean of L iid N(mu0, s²) is N(mu0, s²/L); the centred part is ZeroSumNormal(s),
    # independent of the mean: together exactly the iid prior
    m = numpyro.sample("lambda_mean", dist.Normal(inputs.mu0, inputs.sigma0 / L ** 0.5))
    c = numpyro.sample("lambda_c", dist.ZeroSumNormal(inputs.sigma0, event_shape=(L,)))
    return numpyro.deterministic("lambda", m + c)


def worker_log_eta(inputs: ModelInputs, simplex: str = "gamma", boost=None, level_sd=None):
    """Sample the worker parameters and return the table of :func:`log_eta_table`: the
    sites are the worker family's (:meth:`crowdrank.models.families.WorkerFamily.numpyro_log_eta`).

    ``simplex="gamma"``: the Marsaglia–Tsang Gamma construction (module docstring),
    ``log g = log u − e/α`` and ``log η = log_softmax(log g)``; ``"dirichlet"``: NumPyro's
    Dirichlet (COUPLE) or Beta (CrowdBT) site ``eta``; ``"gibbs"``: COUPLE's ``eta_log_g``.
    """
    return get(inputs.model).worker_prior.numpyro_log_eta(inputs, simplex, boost, level_sd)


class LogGamma(dist.Distribution):
    """``y = log g`` with ``g ~ Gamma(α, 1)``: density ``exp(α y − e^y) / Γ(α)`` on the real
    line. The worker table of ``simplex="gibbs"``: held in log space because for ``α ≪ 1``
    ``g`` itself underflows (``log g ≈ −Exp(1)/α``; ``α = 0.0077`` gives ``log g`` below
    ``−745`` with probability ~0.3 %); sampled by :func:`jax.random.loggamma`, exact for
    small ``α``."""

    arg_constraints = {"concentration": dist.constraints.positive}
    support = dist.constraints.real
    reparametrized_params = []

    def __init__(self, concentration, validate_args=None):
        self.concentration = jnp.asarray(concentration)
        super().__init__(batch_shape=jnp.shape(self.concentration),
                         validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = tuple(sample_shape) + self.batch_shape
        return jax.random.loggamma(key, jnp.broadcast_to(self.concentration, shape))

    def log_prob(self, value):
        a = self.concentration
        return a * value - jnp.exp(value) - jax.scipy.special.gammaln(a)


def _acc_sum(v):
    """``Σ v``, accumulated in float64 whenever JAX has 64-bit types (see module doc)."""
    return jnp.sum(v.astype(jnp.float64) if jax.config.jax_enable_x64 else v)


def model(inputs: ModelInputs, *, simplex: str = "gamma", level: str = "centered",
          fast: bool = True, loglik_dtype=None, prior_only: bool = False, boost=None,
          predict: bool = False, pointwise: bool = True, level_sd=None):
    """The NumPyro program of ``inputs.model``: priors on λ (and η) and one likelihood
    factor.

    Parameters
    ----------
    simplex : {"gamma", "dirichlet", "gibbs"}
        How ``η_w`` is sampled (module docstring); the model is the same. ``"gibbs"``
        (COUPLE): one site ``eta_log_g`` (:class:`LogGamma`), moved only by the exact
        Gibbs step of :mod:`crowdrank.inference.nuts.gibbs`, never by NUTS.
    level : {"centered", "iid"}
        How ``λ`` is sampled; the model is the same.
    fast : bool
        COUPLE: use :func:`couple_columns` (hand-written gradient) instead of autodiff.
    loglik_dtype : {None, "float32", "float64"}
        Precision of the likelihood's elementwise work (block totals are summed in float64
        when JAX has 64-bit types); ``None`` keeps the parameters' precision.
    prior_only : bool
        Leave the likelihood out (prior checks, and the supports of the sites).
    boost : (W, K) bool array, optional
        Which simplex entries get the boost (:func:`crowdrank.models.model_inputs.boost_mask`);
        default: the prior's small concentrations.
    level_sd : (W,) array, optional
        Per-worker sd of ``log S`` (the auxiliary magnitude's law; default
        :data:`crowdrank.models.model_inputs.LEVEL_SD`): exact for any value; best near the sd of
        the worker's pinned ``log η_t`` (``inference.nuts.fit_nuts(worker_level=...)``).
    predict : bool
        Leave the ``rankings`` site unobserved, so that ``numpyro.infer.Predictive`` draws
        new orders of the same tasks (posterior predictive checks).
    pointwise : bool
        The site's ``log_prob`` is per ranking (what ``numpyro.infer.log_likelihood``
        reads); ``False``: their sum (``RankingLikelihood(reduce=True)``), the sampler's
        faster form of the same density.
    """
    if simplex not in SIMPLEX:
        raise ValueError(f"simplex must be one of {SIMPLEX}, got {simplex!r}")
    if level not in LEVEL:
        raise ValueError(f"level must be one of {LEVEL}, got {level!r}")
    lam = item_scores(inputs, level)
    log_eta = worker_log_eta(inputs, simplex, boost, level_sd) if inputs.has_eta else None
    if prior_only:
        return
    if loglik_dtype is not None:
        lam = lam.astype(loglik_dtype)
        log_eta = None if log_eta is None else log_eta.astype(loglik_dtype)
    # the data enter as an observed site: the PPL's own tools give the pointwise
    # log-likelihood and posterior predictive draws (RankingLikelihood)
    numpyro.sample("rankings", RankingLikelihood(inputs, lam, log_eta, fast=fast,
                                                 reduce=not pointwise),
                   obs=None if predict else inputs.order)


# ---------------------------------------------------------------- fast COUPLE columns
# The sampler needs the total log-likelihood and its gradient, LOO the per-ranking values.
# ``couple_columns`` computes
# the same per-ranking values as ``column_loglik`` for COUPLE, but
#
# * the ``- log Σ_{v≤m} η_v`` terms of a ranking of length ``k`` are one entry of a dense
#   ``(W, K − 1)`` table of their cumulative sums (one gather per column instead of
#   ``k − 1``), whose gradient rides in the same scatter as ``η``'s;
# * the values are put in data order by a gather (COUPLE's columns are a permutation of the
#   rankings) and the cotangents back by another: no scatter-add by ``origin``;
# * each stage is evaluated with a per-stage shift (the suffix maximum of λ), as
#   ``log P_i = log A_i − log S_i`` with ``u_{ij} = exp(λ_j − max_{j'≥i} λ_{j'}) ≤ 1``,
#   ``S_i = Σ_{j≥i} u_{ij} ≥ 1`` and ``A_i = Σ_t η_t u_{i,i+t} ≥ η_{t*} ≥ tiny``: the same
#   value as log η̄ + log-softmax with a logsumexp over the active entries only, and as
#   stable (nothing overflows; the largest ``u`` of a stage is exactly 1);
# * the per-column derivatives are written by hand (``jax.custom_vjp``) and computed *in
#   the forward pass*, in the same elementwise loop that computes the value, and reduced
#   there to items and workers with one ``segment_sum`` per length block; a backward pass
#   whose cotangent is the same for every ranking (a sum: tests/test_gradients.py feeds
#   −1) only scales those reductions, any other cotangent weights the per-column
#   derivatives (``lax.cond`` at run time), so every cotangent is exact. The sampler uses
#   the scalar twin :func:`_couple_sum_core` (see there why).
#   Measured at the paper's scale (``bench/bench_gradient.py``): autodiff materialises many
#   ``(k, n)`` intermediates and recomputes the exponentials once per consumer; this path
#   does not.
class _CouplePlan:
    """NumPy tables of one ``ModelInputs`` for :func:`couple_columns` (built at trace time)."""

    def __init__(self, inputs: ModelInputs):
        import numpy as np

        self.blocks = list(inputs.blocks)
        self.index = [np.ascontiguousarray(inputs.index[:k, a:b]) for k, a, b in self.blocks]
        self.worker = [np.ascontiguousarray(inputs.worker[a:b]) for k, a, b in self.blocks]
        # COUPLE's columns are the rankings: ``origin`` is a permutation, and gathers in
        # both directions put the values in data order (no scatter-add)
        self.origin = np.asarray(inputs.origin)
        self.inverse = np.argsort(self.origin)
        self.counts = {k: np.bincount(w, minlength=inputs.n_workers)
                       for (k, a, b), w in zip(self.blocks, self.worker)}
        # the sum's form: how many stages with m candidates each worker reported
        stages = np.zeros((inputs.n_workers, inputs.K))
        for (k, a, b), w in zip(self.blocks, self.worker):
            for i in range(k - 1):          # stage i has m = k - i candidates
                stages[:, k - i - 1] += self.counts[k]
        self.stages = stages


def _couple_block_fwd(x, e):
    """Value ``(n,)`` and derivatives ``dx (k, n)``, ``de (k, n)`` of each column of one
    dense block.

    ``x = λ[ρ]`` ``(k, n)``, ``e = η_w`` rows ``(k, n)`` (clamped to ``tiny``). Value per
    column: ``Σ_i log A_i − log S_i`` (the ``− log Σ_{v≤m} η_v`` term is added outside).
    """
    k = x.shape[0]
    xs = [x[j] for j in range(k)]
    es = [e[t] for t in range(k)]
    # suffix maxima (no gradient flows through a shift: the value does not depend on it)
    cm = [None] * k
    cm[k - 1] = xs[k - 1]
    for i in range(k - 2, -1, -1):
        cm[i] = jnp.maximum(xs[i], cm[i + 1])
    val = jnp.zeros_like(xs[0])
    dx = [jnp.zeros_like(xs[0])] * k
    de = [jnp.zeros_like(xs[0])] * k
    for i in range(k - 1):
        u = [jnp.exp(xs[j] - cm[i]) for j in range(i, k)]
        S = u[0]
        A = es[0] * u[0]
        for t in range(1, k - i):
            S = S + u[t]
            A = A + es[t] * u[t]
        val = val + (jnp.log(A) - jnp.log(S))
        rA = 1.0 / A
        rS = 1.0 / S
        for t in range(k - i):
            ua = u[t] * rA
            dx[i + t] = dx[i + t] + es[t] * ua - u[t] * rS
            de[t] = de[t] + ua
    return val, jnp.stack(dx), jnp.stack(de)


def _couple_core(plan: _CouplePlan, L: int, W: int, K: int):
    """``core(lam, eta, pay)``: per ranking, in data order, ``Σ_i (log A_i − log S_i)``
    minus ``pay[w, k − 2]`` (the ranking's ``Σ log Σ_{v≤m} η_v``), with a hand-written VJP
    (see the section comment)."""
    idx = [jnp.asarray(ix) for ix in plan.index]
    flat = [jnp.asarray(ix.ravel()) for ix in plan.index]
    wk = [jnp.asarray(w) for w in plan.worker]
    origin, inverse = jnp.asarray(plan.origin), jnp.asarray(plan.inverse)

    def forward(lam, eta, pay, need_grad):
        vals, res = [], []
        dlam = jnp.zeros(L, lam.dtype)
        deta = jnp.zeros((W, K), lam.dtype)
        cnt = jnp.zeros((W, max(K - 1, 1)), lam.dtype)
        for (k, a, b), ix, fl, w in zip(plan.blocks, idx, flat, wk):
            v, dx, de = _couple_block_fwd(lam[ix], eta[w, :k].T)
            if need_grad:
                # computed once and kept: without the barrier XLA fuses the elementwise
                # chain into each consumer (the values, two scatters) and recomputes it
                v, dx, de = jax.lax.optimization_barrier((v, dx, de))
            if k >= 2:
                v = v - pay[w, k - 2].astype(v.dtype)
            vals.append(v)
            if need_grad:
                res.append((dx, de))
                # the derivatives of the *sum*, reduced here in the fused forward loop:
                # what the sampler's uniform cotangent needs (see bwd)
                dlam = dlam + jax.ops.segment_sum(dx.ravel(), fl, num_segments=L)
                deta = deta.at[:, :k].add(jax.ops.segment_sum(de.T, w, num_segments=W))
                if k >= 2:
                    cnt = cnt.at[:, k - 2].add(jnp.asarray(plan.counts[k], lam.dtype))
        return jnp.concatenate(vals)[inverse], (dlam, deta, -cnt, res)

    @jax.custom_vjp
    def core(lam, eta, pay):
        return forward(lam, eta, pay, False)[0]

    def fwd(lam, eta, pay):
        return forward(lam, eta, pay, True)

    def general(g, res):
        dlam = jnp.zeros(L, res[0][0].dtype)
        deta = jnp.zeros((W, K), res[0][0].dtype)
        dpay = jnp.zeros((W, max(K - 1, 1)), res[0][0].dtype)
        for (k, a, b), fl, w, (dx, de) in zip(plan.blocks, flat, wk, res):
            gb = g[a:b].astype(dx.dtype)
            dlam = dlam + jax.ops.segment_sum((dx * gb).ravel(), fl, num_segments=L)
            # one scatter per block for η and the pay table: the weights ride along
            rows = jnp.concatenate([(de * gb).T, gb[:, None]], axis=1)
            dw = jax.ops.segment_sum(rows, w, num_segments=W)
            deta = deta.at[:, :k].add(dw[:, :k])
            if k >= 2:
                dpay = dpay.at[:, k - 2].add(-dw[:, k])
        return dlam, deta, dpay

    def bwd(saved, g):
        dlam1, deta1, dpay1, res = saved
        g = g[origin]                     # back to the layout's column order: a gather
        g0 = g[0].astype(dlam1.dtype)
        # NUTS differentiates the sum (every cotangent the same): scale the forward's
        # reductions; any other cotangent takes the per-ranking path
        return jax.lax.cond(jnp.all(g == g[0]),
                            lambda: (g0 * dlam1, g0 * deta1, g0 * dpay1),
                            lambda: general(g, res))

    core.defvjp(fwd, bwd)
    return core


def couple_columns(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """The per-ranking log-likelihood of COUPLE, ``(n_obs,)`` in data order (the values of
    :func:`pointwise_loglik`), with the hand-written derivatives of the section comment:
    the sampler's fast path.

    The core works on ``η'_w = exp(log η_w − max_t log η_w)`` (largest entry exactly 1), so
    an entry far below the largest is lost only when it is ``< 1e-38`` times smaller (float32)
    and contributes nothing measurable to any stage; the shift cancels between ``log A_i`` and
    ``log Σ_{v≤m} η_v``, which is a cumulative logsumexp of ``log η`` (exact).
    """
    lam = jnp.asarray(lam)
    log_eta = log_eta_table(inputs, eta, log_eta)
    plan = _CouplePlan(inputs)
    core = _couple_core(plan, inputs.n_items, inputs.n_workers, inputs.K)
    shift = jax.lax.stop_gradient(jnp.max(log_eta, axis=1, keepdims=True))
    eta_c = jnp.maximum(jnp.exp(log_eta - shift), jnp.finfo(log_eta.dtype).tiny)
    log_cum = jax.lax.cumlogsumexp(log_eta, axis=1) - shift
    # a ranking of length k pays Σ_{m=2..k} log Σ_{v<m} η_v: column k-2 of this table
    pay = jnp.cumsum(log_cum[:, 1:], axis=1) if inputs.K > 1 else jnp.zeros_like(log_cum)
    return core(lam, eta_c, pay)


def _couple_sum_core(plan: _CouplePlan, L: int, W: int, K: int):
    """``core(lam, eta) = Σ_columns Σ_i (log A_i − log S_i)``: the scalar form of
    :func:`_couple_core`, whose derivatives are reduced in the forward loop and only scaled
    by the (scalar) cotangent. The sampler's path: with a vector output XLA no longer fuses
    the values and the reductions into one loop (measured 1.2–1.6x slower at N = 45,000,
    ``bench/results/observed_gradient.json``)."""
    blocks = [(blk, ix, w) for blk, ix, w in zip(plan.blocks, plan.index, plan.worker)
              if blk[0] >= 2]
    idx = [jnp.asarray(ix) for _, ix, _ in blocks]
    flat = [jnp.asarray(ix.ravel()) for _, ix, _ in blocks]
    wk = [jnp.asarray(w) for _, _, w in blocks]

    def value_and_grads(lam, eta, need_grad):
        val = 0.0
        dlam = jnp.zeros(L, lam.dtype)
        deta = jnp.zeros((W, K), eta.dtype)
        for ((k, a, b), _, _), ix, fl, w in zip(blocks, idx, flat, wk):
            v, dx, de = _couple_block_fwd(lam[ix], eta[w, :k].T)
            val = val + _acc_sum(v)
            if need_grad:
                dlam = dlam + jax.ops.segment_sum(dx.ravel(), fl, num_segments=L)
                deta = deta.at[:, :k].add(jax.ops.segment_sum(de.T, w, num_segments=W))
        return val, dlam, deta

    @jax.custom_vjp
    def core(lam, eta):
        return value_and_grads(lam, eta, False)[0]

    def fwd(lam, eta):
        val, dlam, deta = value_and_grads(lam, eta, True)
        return val, (dlam, deta)

    def bwd(res, g):
        dlam, deta = res
        # the total may be float64 while the work is float32: cotangents keep the primal dtype
        return (g * dlam).astype(dlam.dtype), (g * deta).astype(deta.dtype)

    core.defvjp(fwd, bwd)
    return core


def couple_total(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """``Σ column_loglik`` of COUPLE, the sampler's likelihood term (fused scalar kernel,
    :func:`_couple_sum_core`; the same shift as :func:`couple_columns`)."""
    lam = jnp.asarray(lam)
    log_eta = log_eta_table(inputs, eta, log_eta)
    plan = _CouplePlan(inputs)
    core = _couple_sum_core(plan, inputs.n_items, inputs.n_workers, inputs.K)
    shift = jax.lax.stop_gradient(jnp.max(log_eta, axis=1, keepdims=True))
    eta_c = jnp.maximum(jnp.exp(log_eta - shift), jnp.finfo(log_eta.dtype).tiny)
    log_cum = jax.lax.cumlogsumexp(log_eta, axis=1) - shift
    return core(lam, eta_c) - _acc_sum(jnp.asarray(plan.stages, log_cum.dtype) * log_cum)


def couple_fast(inputs: ModelInputs, lam, log_eta, reduce: bool):
    """COUPLE's ``numpyro_fast`` (models.registry): :func:`couple_total` (``reduce``) or
    :func:`couple_columns`, both with hand-written derivatives."""
    if reduce:
        return couple_total(inputs, lam, log_eta=log_eta)
    return couple_columns(inputs, lam, log_eta=log_eta)


# ---------------------------------------------------------------- the observed site
# The models' draws (models.registry.ModelSpec.numpyro_draw): new orders ``(n, k)`` of the
# item sets ``items`` ``(n, k)`` (one task per row) by the generative process
# (:class:`RankingLikelihood`); ``log_w`` is the rows' worker table (``log η`` ``(n, K)``
# COUPLE, ``[log η, log(1 − η)]`` CrowdBT, ``log η_g`` ``(n,)`` PeerGrader, None). Each splits
# ``key`` the same way (true order, flip, stages).
def _pl_order(key, items, x):
    # the true order: Plackett–Luce by sorting λ + Gumbel noise (best first)
    g = x + jax.random.gumbel(key, x.shape, x.dtype)
    return jnp.take_along_axis(items, jnp.argsort(-g, axis=1), axis=1)


def draw_pl(key, items, log_w, lam):
    """PL (and BT): the PL order."""
    k_true, _, _ = jax.random.split(key, 3)
    return _pl_order(k_true, items, lam[items])


def draw_scaled(key, items, log_w, lam):
    """PeerGrader: PL on ``η_g·λ``."""
    k_true, _, _ = jax.random.split(key, 3)
    return _pl_order(k_true, items, lam[items] * jnp.exp(log_w)[:, None])


def draw_crowdbt(key, items, log_w, lam):
    """CrowdBT: the PL order with probability ``η_w``, else its reverse."""
    k_true, k_flip, _ = jax.random.split(key, 3)
    true = _pl_order(k_true, items, lam[items])
    right = jnp.log(jax.random.uniform(k_flip, (items.shape[0],), lam.dtype)) < log_w[:, 0]
    return jnp.where(right[:, None], true, true[:, ::-1])


def draw_couple(key, items, log_w, lam):
    """COUPLE's story ([Pan18], Sect. 3.2): at a stage with m items left the worker reports
    the item at offset t of the remaining true order with probability η̄_t."""
    k_true, _, k_stage = jax.random.split(key, 3)
    k = items.shape[1]
    remaining, out = _pl_order(k_true, items, lam[items]), []
    for i, sk in zip(range(k - 1), jax.random.split(k_stage, max(k - 1, 1))):
        m = k - i
        t = jax.random.categorical(sk, log_w[:, :m], axis=1)
        out.append(jnp.take_along_axis(remaining, t[:, None], axis=1)[:, 0])
        pos = jnp.arange(m - 1)[None, :]
        remaining = jnp.where(pos < t[:, None], remaining[:, :-1], remaining[:, 1:])
    out.append(remaining[:, 0])
    return jnp.stack(out, axis=1)


def draw_normalized(key, items, log_w, lam):
    """Normalised COUPLE, exactly: one of the k! orderings with probability
    Eq. 4 / Σ_orderings Eq. 4 (for k = 2 the story is already exact)."""
    n, k = items.shape
    if k < 3:
        return draw_couple(key, items, log_w, lam)
    from itertools import permutations

    import numpy as np

    _, _, k_stage = jax.random.split(key, 3)
    perms = np.array(list(permutations(range(k))))
    P = len(perms)
    cand = items[:, perms]                                   # (n, P, k)
    rows = jnp.repeat(log_w[:, :k], P, axis=0).T            # (k, n·P)
    cum = jnp.repeat(jax.lax.cumlogsumexp(log_w, axis=1)[:, :k], P, axis=0).T
    ll = couple_block(lam[cand.reshape(n * P, k)].T, rows, cum).reshape(n, P)
    j = jax.random.categorical(k_stage, ll, axis=1)
    return jnp.take_along_axis(cand, j[:, None, None], axis=1)[:, 0]


class RankingLikelihood(dist.Distribution):
    """The observed rankings of ``inputs`` as one NumPyro site: ``p(order | task; λ, η)``.

    A row of the value is one observation: the order (item indices best first, ``-1``
    padding) of its task's item set, reported by its worker. The item set, its length and
    the worker are the task (fixed, like a regression's covariates); the order is the
    random part. ``batch_shape = (n_obs,)``, ``event_shape = (K,)``.

    ``log_prob(value)`` is one log-likelihood per ranking (BT/CrowdBT: the sum over its
    rank-broken pairs), so ``numpyro.infer.log_likelihood`` gives the pointwise values that
    LOO needs and the model's density is their sum. With ``fast`` (COUPLE) the values come
    from :func:`couple_columns`, whose derivatives are hand-written. ``reduce=True`` (the
    sampler's form, ``model(..., pointwise=False)``) returns their sum instead, shape
    ``()`` — NumPyro sums a site's ``log_prob``, so the density is the same — through the
    fused scalar kernel :func:`couple_total`, as fast as before the observed site existed.
    ``value`` must be
    concrete (the layout of the ranking lengths is built in NumPy); orders other than the
    data's are re-laid out (:func:`crowdrank.models.model_inputs.with_orders`).

    ``sample`` draws new orders of the same tasks by the model's generative process:

    * PL, and PeerGrader on ``η_g·λ``: Plackett–Luce by sorting ``λ + Gumbel`` (exact);
    * normalised COUPLE: one of the ``k!`` orderings with probability
      ``Eq. 4 / Σ_orderings Eq. 4`` (exact);
    * COUPLE: the story of [Pan18], Sect. 3.2 (PL true order, then stagewise offsets drawn
      with probability ``η̄_t``), as :func:`crowdrank.models.simulate.couple_report`. For ``k = 2``
      it is exactly the model; for ``k ≥ 3`` Eq. 4 is not normalised and is *not* this
      story's probability (docs/design.md, "Observed likelihoods");
    * BT: the PL order; CrowdBT: the PL order with probability ``η_w``, else its reverse.
      For ``k = 2`` exactly the model; for ``k ≥ 3`` every pair of the draw has exactly the
      model's pair probability, but the pairs of one ranking are dependent, while the
      rank-broken likelihood multiplies them as if independent (no distribution on
      rankings does: a product of pair probabilities is not normalised over orderings).
    """

    arg_constraints = {}
    pytree_data_fields = ("lam", "log_eta")
    pytree_aux_fields = ("inputs", "fast", "reduce")

    def __init__(self, inputs: ModelInputs, lam, log_eta=None, *, fast: bool = True,
                 reduce: bool = False, validate_args=None):
        if inputs.order is None:
            raise ValueError("these ModelInputs carry no observed orders")
        self.inputs, self.fast, self.reduce = inputs, fast, reduce
        self.lam = jnp.asarray(lam)
        self.log_eta = None if log_eta is None else jnp.asarray(log_eta)
        super().__init__(batch_shape=(inputs.n_obs,), event_shape=(inputs.order.shape[1],),
                         validate_args=validate_args)

    @property
    def support(self):
        return dist.constraints.independent(dist.constraints.integer_greater_than(-2), 1)

    def log_prob(self, value):
        from .model_inputs import with_orders

        if isinstance(value, jax.core.Tracer):
            raise ValueError("RankingLikelihood.log_prob needs concrete orders (the layout "
                             "of the ranking lengths is built in NumPy)")
        inp = with_orders(self.inputs, value)
        fast = get(inp.model).fn("numpyro_fast") if self.fast else None
        if fast is not None and self.reduce:
            return fast(inp, self.lam, self.log_eta, True)
        if fast is not None:
            out = fast(inp, self.lam, self.log_eta, False)                # data order
        else:
            cols = column_loglik(inp, self.lam, log_eta=self.log_eta)
            out = jax.ops.segment_sum(cols, jnp.asarray(inp.origin), num_segments=inp.n_obs)
        # per ranking a few nats: float32 work is fine, but the sum is taken in float64
        out = out.astype(jnp.float64) if jax.config.jax_enable_x64 else out
        return jnp.sum(out) if self.reduce else out

    def sample(self, key, sample_shape=()):
        if sample_shape:
            keys = jax.random.split(key, int(jnp.prod(jnp.asarray(sample_shape))))
            out = jax.vmap(lambda k_: self.sample(k_))(keys)
            return out.reshape(tuple(sample_shape) + out.shape[1:])
        import numpy as np

        inp = self.inputs
        draw = get(inp.model).fn("numpyro_draw")
        lengths = (inp.order >= 0).sum(axis=1)
        out = jnp.full(inp.order.shape, -1, jnp.int32)
        for k, key_k in zip(sorted(set(lengths.tolist())),
                            jax.random.split(key, len(set(lengths.tolist())))):
            sel = np.flatnonzero(lengths == k)
            w = inp.obs_worker[sel]
            log_w = None if self.log_eta is None else self.log_eta[w]
            rep = draw(key_k, jnp.asarray(inp.order[sel, :k]), log_w, self.lam)
            out = out.at[sel, :k].set(rep.astype(jnp.int32))
        return out
