"""The NumPyro program of every model: item scores, the worker family's sites, the
observed site ``rankings`` (:class:`RankingLikelihood`) and the column dispatch through the
registry (docs/design.md §2.1, §5; :mod:`crowdrank.models.numpyro_models`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from ..model_inputs import ModelInputs
from .blocks import _safe_log
from .dists import LogGamma  # noqa: F401  (the program's names, re-exported)
from .scores import item_scores

SIMPLEX = ("gamma", "dirichlet", "gibbs")
LEVEL = ("centered", "iid")


def log_eta_table(inputs: ModelInputs, eta=None, log_eta=None):
    """The worker table the likelihood reads: ``(W, K)`` ``log η`` (COUPLE) or ``(W, 2)``
    ``[log η, log(1 − η)]`` (CrowdBT), from ``log_eta`` when given (exact), else from
    ``eta`` (a Dirichlet row, or CrowdBT's accuracy ``(W,)``)."""
    if log_eta is not None:
        return jnp.asarray(log_eta)
    # the family's layout: Beta [log η, log(1 − η)]; Dirichlet rows and Gamma (W,) in log
    return inputs.spec.worker_prior.log_table(jnp.asarray(eta), jnp, _safe_log)

# ---------------------------------------------------------------- whole data
def column_loglik(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """Log-likelihood of every column of the (length-sorted) layout: rankings, or pairs.

    The worker parameters are ``eta`` (``(W, K)`` Dirichlet rows, or CrowdBT's ``(W,)``
    accuracies) or, exactly, ``log_eta`` in the layout of :func:`log_eta_table`.
    """
    # init_to_value hands back the caller's NumPy arrays: make them JAX arrays before
    # they are indexed with traced indices
    lam = jnp.asarray(lam)
    spec = inputs.spec
    log_eta = log_eta_table(inputs, eta, log_eta) if spec.has_eta else None
    return spec.fn("numpyro_columns")(inputs, lam, log_eta)

def pointwise_loglik(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """One log-likelihood value per source ranking, ``(n_obs,)``, in the data's order: the
    columns are put back by ``origin`` and the pairs of BT/CrowdBT summed per ranking."""
    ll = column_loglik(inputs, lam, eta, log_eta=log_eta)
    return jax.ops.segment_sum(ll, jnp.asarray(inputs.origin), num_segments=inputs.n_obs)

# ---------------------------------------------------------------- priors (sampler coordinates)
def worker_log_eta(inputs: ModelInputs, simplex: str = "gamma", boost=None, level_sd=None):
    """Sample the worker parameters and return the table of :func:`log_eta_table`: the
    sites are the worker family's (:meth:`crowdrank.models.families.WorkerFamily.numpyro_log_eta`).

    ``simplex="gamma"``: the Marsaglia–Tsang Gamma construction (module docstring),
    ``log g = log u − e/α`` and ``log η = log_softmax(log g)``; ``"dirichlet"``: NumPyro's
    Dirichlet (COUPLE) or Beta (CrowdBT) site ``eta``; ``"gibbs"``: COUPLE's ``eta_log_g``.
    """
    return inputs.spec.worker_prior.numpyro_log_eta(inputs, simplex, boost, level_sd)


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
    Concrete orders other than the data's are re-laid out
    (:func:`crowdrank.models.model_inputs.with_orders`); traced orders go through the
    masked form :func:`crowdrank.models.numpyro.arrays.masked_loglik`, so one compilation
    serves every data set of one shape.

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

    arg_constraints = {}  # noqa: RUF012 (NumPyro's declaration, read from the class)
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
        from ..model_inputs import with_orders

        if isinstance(value, jax.core.Tracer):
            # traced orders (one compilation for every data set of this shape): the masked
            # form over the padded table, the same values (tests/test_ppl_contract.py)
            from .arrays import masked_loglik

            if self.inputs.spec.array_loglik is None:
                raise ValueError(f"RankingLikelihood.log_prob of {self.inputs.model!r} "
                                 "needs concrete orders (its layout is built in NumPy; "
                                 "its ModelSpec names no array_loglik)")
            out = masked_loglik(self.inputs.model, self.lam, value, self.inputs.obs_worker,
                                self.log_eta)
            out = out.astype(jnp.float64) if jax.config.jax_enable_x64 else out
            return jnp.sum(out) if self.reduce else out
        inp = with_orders(self.inputs, value)
        fast = inp.spec.fn("numpyro_fast") if self.fast else None
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
        draw = inp.spec.fn("numpyro_draw")
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
