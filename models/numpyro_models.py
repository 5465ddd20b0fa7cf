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

For the ecosystem's tools (``Predictive``, SBC libraries, ``MCMC(NUTS(...))`` on a
plain function) every model is also a function of arrays,
``pl_model(items, workers, n_items, alpha=None, mu0=0.0, sigma0=1.0, rankings=None)`` and
its siblings (:mod:`crowdrank.models.numpyro.arrays`): the observed ``rankings`` are a
keyword argument, every prior site is drawable by ``Predictive``, and the orders are
traced arrays, so one compilation serves every data set of one shape.

Precision. ``model(..., loglik_dtype="float32")`` does the elementwise work of the
likelihood in float32 (half the cost at scale) but sums each block's total in float64 when
JAX runs with 64-bit types: a total of ~10⁶ nats has a float32 spacing of ~0.1 nat, the
size of the energy differences NUTS weighs.
"""

from __future__ import annotations

# The programs live in crowdrank.models.numpyro, one module per model family; every
# name stays importable from here (the registry's "module:function" strings, callers).
from .numpyro.arrays import (  # noqa: F401
    ARRAY_MODELS,
    ArrayRankings,
    bt_model,
    couple_model,
    couple_normalized_model,
    crowdbt_model,
    make_model,
    masked_loglik,
    model_arrays,
    peergrader_model,
    pl_model,
)
from .numpyro.blocks import (  # noqa: F401
    _acc_sum,
    _lse_rows,
    _safe_log,
    _suffix_lse,
    couple_block,
    pair_block,
    pl_block,
)
from .numpyro.couple import (  # noqa: F401
    couple_columns_ad,
    couple_log_normalizer,
    couple_log_normalizer_gathered,
    draw_couple,
    draw_normalized,
)
from .numpyro.couple_fast import (  # noqa: F401
    _couple_block_fwd,
    _couple_core,
    _couple_sum_core,
    _CouplePlan,
    couple_columns,
    couple_fast,
    couple_total,
)
from .numpyro.pl import (  # noqa: F401
    _pl_order,
    draw_crowdbt,
    draw_pl,
    draw_scaled,
    pair_columns,
    ranking_columns,
    scaled_columns,
)
from .numpyro.program import (  # noqa: F401
    LEVEL,
    SIMPLEX,
    LogGamma,
    RankingLikelihood,
    column_loglik,
    item_scores,
    log_eta_table,
    model,
    pointwise_loglik,
    worker_log_eta,
)
