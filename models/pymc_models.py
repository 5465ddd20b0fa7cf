"""The five models as PyMC models (docs/design.md, Models; [Pan18], Eq. 1-4).

A line-by-line twin of :mod:`crowdrank.models.numpyro_models` written with PyTensor, reading the
same :class:`~crowdrank.models.model_inputs.ModelInputs`, so both PPLs fit the same data under the
same prior. Model: ``lambda`` (dim ``item``) ``~ Normal(mu0, sigma0)`` iid; ``eta``
(dims ``worker, stage``) ``~ Dirichlet(α_w)`` for COUPLE or (dim ``worker``)
``~ Beta(a_w, b_w)`` for CrowdBT; the data are the observed site ``rankings``
(:func:`observed_rankings`, a ``pm.CustomDist``).
The sampler's coordinates are the twin's exact reparametrisations (``simplex="gamma"``:
``eta_u ~ Gamma(α+1)``, ``eta_e ~ Exponential(1)``, ``log η = log_softmax(log u − e/α)``;
``level="centered"``: ``lambda_mean`` plus ``lambda_c ~ ZeroSumNormal``), with ``lambda``
and ``eta`` as deterministics; ``simplex="dirichlet"``, ``level="iid"`` sample them
directly (see :mod:`crowdrank.models.numpyro_models`).
Vectorised over rankings, one dense block per ranking length (see
:mod:`crowdrank.models.model_inputs`); the only Python loops are over lengths and stage positions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import zero_grad

from .couple_normalizer import ordering_stage_product
from .model_inputs import ModelInputs, PermGroup
from .pymc_ops import safe_log as _safe_log


def _lse_rows(rows):
    """Stable ``log Σ_j exp(rows[j])`` over a short list of vectors (shift: ``zero_grad``)."""
    m = rows[0]
    for r in rows[1:]:
        m = pt.maximum(m, r)
    m = zero_grad(m)
    s = pt.exp(rows[0] - m)
    for r in rows[1:]:
        s = s + pt.exp(r - m)
    return m + pt.log(s)


def _suffix_lse(x, k):
    """``LSE_i = log Σ_{j≥i} exp(x[j])``, ``i = 0..k-2``, by backward recursion."""
    out = [None] * (k - 1)
    acc = x[k - 1]
    for i in range(k - 2, -1, -1):
        acc = pt.logaddexp(x[i], acc)
        out[i] = acc
    return out


def _log_sigmoid(x):
    # log σ(x) = −log(1 + e^−x), the stable softplus form
    return -pt.log1pexp(-x)


def pl_block(x, k):
    """Plackett–Luce ([Pan18], Eq. 1) of a dense block ``x = λ[ρ]`` ``(k, n)``."""
    lse = _suffix_lse(x, k)
    total = x[0] - lse[0]
    for i in range(1, k - 1):
        total = total + x[i] - lse[i]
    return total


def couple_block(x, log_eta_rows, log_cum_rows, k):
    """COUPLE ([Pan18], Eq. 3-4) of a dense block of rankings of one length ``k``:
    ``Σ_i [logsumexp_t(log η_t + λ_{ρ(i+t)}) − LSE_i − log Σ_{v<m} η_v]`` (see the
    NumPyro twin, :func:`crowdrank.models.numpyro_models.couple_block`)."""
    lse = _suffix_lse(x, k)
    total = 0.0
    for i in range(k - 1):
        m = k - i
        mix = _lse_rows([log_eta_rows[t] + x[i + t] for t in range(m)])
        total = total + mix - lse[i] - log_cum_rows[m - 1]
    return total


def pair_block(x, log_eta_pairs=None):
    """BT, or CrowdBT ``log(η σ(d) + (1 − η) σ(−d))`` per pair [Chen13];
    ``log_eta_pairs`` ``(2, n)`` holds ``log η`` and ``log(1 − η)``."""
    d = x[0] - x[1]
    if log_eta_pairs is None:
        return _log_sigmoid(d)
    return pt.logaddexp(log_eta_pairs[0] + _log_sigmoid(d),
                        log_eta_pairs[1] + _log_sigmoid(-d))


def log_eta_table(inputs: ModelInputs, eta=None, log_eta=None):
    """``(W, K)`` ``log η`` (COUPLE) or ``(W, 2)`` ``[log η, log(1 − η)]`` (CrowdBT)."""
    if log_eta is not None:
        return pt.as_tensor_variable(log_eta)
    # the family's layout: Beta [log η, log(1 − η)]; COUPLE rows and PeerGrader's (W,) in log
    return inputs.spec.worker_prior.log_table(pt.as_tensor_variable(eta), pt, _safe_log)


def _cumlogsumexp(x, K):
    """``log Σ_{v≤t} exp(x[:, v])`` column by column (K ≤ 6), stably."""
    cols = [x[:, 0]]
    for t in range(1, K):
        cols.append(pt.logaddexp(cols[-1], x[:, t]))
    return pt.stack(cols, axis=1)


def couple_log_normalizer(lam, log_eta, log_cum, index, worker, group):
    """``log Σ_{k! orderings} Eq. 4`` for the rankings of one length (docs/design.md, Models),
    with the stage ratios shared with the NumPyro twin
    (:func:`crowdrank.models.couple_normalizer.ordering_stage_product`): ``Σ_{t<m} w^{(m)}_t
    p_{π(i+t)} / S_i`` in linear space, ``p = exp(λ − max)``, ``w^{(m)}_t = exp(log η_t − log Σ_{v<m}
    η_v) ≤ 1``. ``λ`` is gathered once per task; the orderings are one constant-index take
    of its ``k`` rows, ``(k, k!, n)``, so the graph has ``O(k²)`` nodes whatever ``k!``
    (PyTensor compiles every replicate's graph anew: unrolling the orderings made that
    compilation the largest part of a small fit)."""
    k, a, b = group.k, group.start, group.stop
    x = lam[index[:k, a:b]]                                   # (k, n): one gather
    p = pt.exp(x - zero_grad(pt.max(x, axis=0)))
    q = p[np.asarray(group.perms).T]                          # (k, P, n): ordering rows
    le = log_eta[worker[a:b], :k].T                           # (k, n)
    lc = log_cum[worker[a:b], :k].T
    prod = ordering_stage_product(q, lambda m, t: pt.exp(le[t] - lc[m - 1])[None, :], k)
    return pt.log(pt.sum(prod, axis=0))


def couple_log_normalizer_gathered(lam, log_eta, log_cum, index, worker, group):
    """The direct form (every ordering gathered and scored in log space), kept as the
    reference the fast form is tested against."""
    k, a, b = group.k, group.start, group.stop
    P, n = group.perms.shape[0], b - a
    cand = index[:k, a:b][group.perms.T].reshape(k, P * n)
    w = np.tile(worker[a:b], P)
    ll = couple_block(lam[cand], log_eta[w, :k].T, log_cum[w, :k].T, k).reshape((P, n))
    return _lse_rows([ll[p] for p in range(P)])


def column_loglik(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """Log-likelihood of each column of the (length-sorted) layout: rankings, or pairs."""
    spec = inputs.spec
    log_eta = log_eta_table(inputs, eta, log_eta) if spec.has_eta else None
    return spec.fn("pymc_columns")(inputs, lam, log_eta)


# The models' column functions (models.registry.ModelSpec.pymc_columns), twins of the
# NumPyro ones: ``f(inputs, lam, log_eta)``.
def ranking_columns(inputs: ModelInputs, lam, log_eta=None):
    """Plackett–Luce, one value per ranking column."""
    index = inputs.index
    return pt.concatenate([pl_block(lam[index[:k, a:b]], k) for k, a, b in inputs.blocks])


def pair_columns(inputs: ModelInputs, lam, log_eta=None):
    """BT on the rank-broken pairs, or CrowdBT when the worker table is given."""
    if log_eta is None:
        return pair_block(lam[inputs.index])
    return pair_block(lam[inputs.index], log_eta[inputs.worker].T)


def scaled_columns(inputs: ModelInputs, lam, log_eta):
    """PeerGrader [Raman14]: PL on the grader's scaled scores ``η_g·λ``."""
    index = inputs.index
    scale = pt.exp(log_eta)[inputs.worker]
    return pt.concatenate([pl_block(lam[index[:k, a:b]] * scale[a:b], k)
                           for k, a, b in inputs.blocks])


def couple_columns(inputs: ModelInputs, lam, log_eta):
    """COUPLE (Eq. 3-4); normalised COUPLE subtracts ``log Σ_orderings Eq. 4`` per group."""
    index, worker = inputs.index, inputs.worker
    K = inputs.K
    log_cum = _cumlogsumexp(log_eta, K)           # exact however small η_v is
    table = pt.concatenate([log_eta, log_cum], axis=1)  # one gather per block (as NumPyro)
    parts = []
    for k, a, b in inputs.blocks:
        rows = table[worker[a:b]].T
        parts.append(couple_block(lam[index[:k, a:b]], rows[:k], rows[K:K + k], k))
    ll = pt.concatenate(parts)
    for g in inputs.groups:
        z = couple_log_normalizer(lam, log_eta, log_cum, index, worker, g)
        ll = pt.inc_subtensor(ll[g.start:g.stop], -z)
    return ll


def pointwise_loglik(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """One value per source ranking, ``(n_obs,)``, in the data's order (columns put back by
    ``origin``; inc_subtensor accumulates repeated indices, so pairs sum per ranking)."""
    ll = column_loglik(inputs, lam, eta, log_eta=log_eta)
    return pt.inc_subtensor(pt.zeros(inputs.n_obs)[inputs.origin], ll)


def item_scores(inputs: ModelInputs, level: str = "centered"):
    """``λ ~ Normal(mu0, sigma0²)`` iid, sampled directly or as mean + zero-sum part."""
    L = inputs.n_items
    if level == "iid" or L < 2:
        return pm.Normal("lambda", mu=inputs.mu0, sigma=inputs.sigma0, dims="item")
    m = pm.Normal("lambda_mean", mu=inputs.mu0, sigma=inputs.sigma0 / np.sqrt(L))
    c = pm.ZeroSumNormal("lambda_c", sigma=inputs.sigma0, dims="item")
    return pm.Deterministic("lambda", m + c, dims="item")


def worker_log_eta(inputs: ModelInputs, simplex: str = "gamma", boost=None):
    """The worker parameters (Marsaglia–Tsang Gammas, or PyMC's Dirichlet/Beta/Gamma): the
    worker family's sites (:meth:`crowdrank.models.families.WorkerFamily.pymc_log_eta`)."""
    return inputs.spec.worker_prior.pymc_log_eta(inputs, simplex, boost)


def build_model(inputs: ModelInputs, items=None, workers=None, *, simplex: str = "gamma",
                level: str = "centered", prior_only: bool = False, boost=None) -> pm.Model:
    """The PyMC model of ``inputs.model``; ``items``/``workers`` name the coordinates;
    ``simplex`` and ``level`` choose the sampler's coordinates (the model is the same);
    ``prior_only`` leaves the likelihood out."""
    if simplex not in ("gamma", "dirichlet") or level not in ("centered", "iid"):
        raise ValueError(f"bad parametrisation simplex={simplex!r}, level={level!r}")
    coords = {"item": list(items) if items is not None else list(range(inputs.n_items))}
    if inputs.has_eta:
        coords["worker"] = (list(workers) if workers is not None
                            else list(range(inputs.n_workers)))
        coords["stage"] = list(range(1, inputs.K + 1))
    with pm.Model(coords=coords) as model:
        lam = item_scores(inputs, level)
        log_eta = worker_log_eta(inputs, simplex, boost) if inputs.has_eta else None
        if not prior_only:
            observed_rankings(inputs, lam, log_eta)
    return model


def observed_rankings(inputs: ModelInputs, lam, log_eta=None):
    """The observed site ``rankings``: a ``pm.CustomDist`` whose value is the
    ``(n_obs, K)`` table of observed orders (the twin of
    :class:`crowdrank.models.numpyro_models.RankingLikelihood`).

    Its ``logp`` is the per-ranking log-likelihood (:func:`pointwise_loglik`), so
    ``pm.compute_log_likelihood`` gives LOO's pointwise values and the model's density is
    their sum; its ``random`` is :func:`crowdrank.models.simulate.redraw_orders` (NumPy), so
    ``pm.sample_posterior_predictive`` draws new orders of the same tasks. The observed
    orders are also passed as the last parameter: they fix the shape of a draw (each task's
    item set), which PyMC cannot infer from ``λ`` and ``η``.
    """
    from pytensor.tensor.variable import TensorConstant

    from .model_inputs import with_orders
    from .simulate import redraw_orders

    has_eta = log_eta is not None
    params = [lam] + ([log_eta] if has_eta else []) + [inputs.order]
    eta_sig = ("(w,s)," if log_eta.ndim == 2 else "(w),") if has_eta else ""

    def logp(value, *args):
        if not isinstance(value, TensorConstant):
            raise NotImplementedError("the rankings' logp needs the orders as a constant "
                                      "(the layout of the ranking lengths is built in NumPy)")
        inp = with_orders(inputs, np.asarray(value.data))
        return pointwise_loglik(inp, args[0], log_eta=args[1] if has_eta else None)

    def random(*args, rng=None, size=None):
        return redraw_orders(inputs.model, inputs.order, inputs.obs_worker, args[0],
                             args[1] if has_eta else None, rng, size)

    return pm.CustomDist("rankings", *params, logp=logp, random=random,
                         signature=f"(l),{eta_sig}(n,j)->(n,j)", observed=inputs.order,
                         dtype="int64")


# ----------------------------------------------------------------------------- one graph, many data sets
@dataclass(frozen=True, eq=False)
class _SharedInputs(ModelInputs):
    """:class:`ModelInputs` whose ``index``, ``worker`` and block bounds are PyTensor shared
    variables (``K`` kept as a Python int: the column functions slice with it)."""

    static_K: int = 0

    @property
    def K(self) -> int:
        return self.static_K


def layout_key(inputs: ModelInputs) -> tuple:
    """What fixes the *graph* of :func:`build_shared_model`: the model, the sizes, the
    ranking lengths present and the prior. Two data sets with equal keys share one compiled
    model; the number of rankings of each length and the rankings themselves may differ."""
    alpha = None if inputs.alpha is None else np.asarray(inputs.alpha, float)
    return (inputs.model, int(inputs.n_items), int(inputs.n_workers), int(inputs.K),
            tuple(int(k) for k, _, _ in inputs.blocks),
            None if alpha is None else (alpha.shape, alpha.tobytes()),
            float(inputs.mu0), float(inputs.sigma0))


class SharedData:
    """The observed layout of a :func:`build_shared_model` graph: ``set(inputs)`` puts a
    new data set's columns into the shared variables (no recompilation)."""

    def __init__(self, inputs: ModelInputs):
        import pytensor

        self.key = layout_key(inputs)
        K = inputs.K
        self.index = pytensor.shared(np.asarray(inputs.index, np.int32), name="rank_index",
                                     shape=(K, None))
        self.worker = pytensor.shared(np.asarray(inputs.worker, np.int32), name="rank_worker",
                                      shape=(None,))
        # one (start, stop) pair of int64 scalars per ranking length
        self.bounds = [(pytensor.shared(np.int64(a), name=f"start_k{k}"),
                        pytensor.shared(np.int64(b), name=f"stop_k{k}"))
                       for k, a, b in inputs.blocks]
        blocks = tuple((k, s, e) for (k, _, _), (s, e) in zip(inputs.blocks, self.bounds))
        perms = {g.k: g.perms for g in inputs.groups}
        groups = tuple(PermGroup(k, s, e, perms[k]) for k, s, e in blocks if k in perms)
        fields = {f.name: getattr(inputs, f.name) for f in dataclasses.fields(ModelInputs)}
        fields.update(index=self.index, worker=self.worker, blocks=blocks, groups=groups,
                      order=None, obs_worker=None)
        self.symbolic = _SharedInputs(static_K=K, **fields)
        self.set(inputs)

    def set(self, inputs: ModelInputs) -> None:
        """Load ``inputs`` (same :func:`layout_key`, else ``ValueError``)."""
        key = layout_key(inputs)
        if key != self.key:
            raise ValueError(f"data layout {key[:5]} does not match the compiled model's "
                             f"{self.key[:5]} (or the prior differs)")
        self.index.set_value(np.asarray(inputs.index, np.int32))
        self.worker.set_value(np.asarray(inputs.worker, np.int32))
        for (s, e), (_, a, b) in zip(self.bounds, inputs.blocks):
            s.set_value(np.int64(a))
            e.set_value(np.int64(b))


def build_shared_model(inputs: ModelInputs, *, simplex: str = "gamma",
                       level: str = "centered", boost=None) -> tuple[pm.Model, SharedData]:
    """The model of :func:`build_model` with the observed layout in shared variables, so that
    one compiled log density (and its gradient) serves every data set of the same
    :func:`layout_key` (SBC's replicates: :mod:`crowdrank.inference.nuts.pymc_reuse`).

    The free variables, their priors and the likelihood are :func:`build_model`'s; the
    likelihood enters as the ``pm.Potential`` ``rankings`` — the sum of the same column
    log-likelihoods (:func:`column_loglik`) that the observed ``pm.CustomDist`` sums — so
    the log density is the same function of the parameters (tested at random points against
    :func:`build_model`). What it lacks is the observed site itself (no pointwise
    log-likelihood, no posterior predictive): SBC needs neither.
    """
    if simplex not in ("gamma", "dirichlet") or level not in ("centered", "iid"):
        raise ValueError(f"bad parametrisation simplex={simplex!r}, level={level!r}")
    data = SharedData(inputs)
    coords = {"item": list(range(inputs.n_items))}
    if inputs.has_eta:
        coords["worker"] = list(range(inputs.n_workers))
        coords["stage"] = list(range(1, inputs.K + 1))
    with pm.Model(coords=coords) as model:
        lam = item_scores(inputs, level)
        log_eta = worker_log_eta(inputs, simplex, boost) if inputs.has_eta else None
        pm.Potential("rankings", pt.sum(column_loglik(data.symbolic, lam, log_eta=log_eta)))
    return model, data
