"""The PyMC twins of :mod:`crowdrank.models.numpyro.arrays`: each model with its data in
``pm.Data`` containers (docs/design.md §2.1).

:func:`build_data_model` puts the tasks ``items`` ``(n, K)`` (``-1`` padding), the
``workers`` and the observed orders in ``pm.Data`` (``"items"``, ``"workers"``,
``"rankings_data"``); the observed site ``rankings`` is a ``pm.CustomDist`` whose ``logp``
is the masked form over the padded orders (PL stages by a backward logsumexp recursion,
the ``K(K−1)/2`` position pairs of full rank-breaking, COUPLE's stages, normalised COUPLE's
``log Σ Eq. 4`` over every ordering of the table's width that leaves the padding in
place; [Pan18], Eq. 1-4, Lemma 1; [Chen13]), a symbolic function of the data, so
``pm.set_data`` swaps in another data set of the same shape without rebuilding or
recompiling the model. Its ``random`` is
:func:`crowdrank.models.simulate.redraw_orders`. The priors are the worker family's Gamma
sites without the magnitude reweighting ``eta_level`` (a ``pm.Potential``, which
``pm.sample_prior_predictive`` ignores): every free variable is then drawn from its own
prior, and ``η`` is exactly ``Dirichlet(α)`` / ``Beta(a, b)``. With ``level_sd`` the
helpers carry the reweighting as one ``pm.CustomDist`` ``eta_aux`` whose ``logp`` is the
sampler's joint density (Potential included) and whose ``random`` draws it exactly (the
construction of :class:`crowdrank.models.numpyro.arrays.LevelGammas`).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from .couple_normalizer import padded_orderings
from .registry import REGISTRY, get
from .reparam import boost_split, level_log_ratio

#: A finite stand-in for ``−∞`` at padded positions (as the NumPyro twin).
_PAD = -1e30


def _logaddexp(a, b):
    m = pt.maximum(a, b)
    return m + pt.log(pt.exp(a - m) + pt.exp(b - m))


def _log_sigmoid(x):
    return -pt.softplus(-x)


def pymc_array_models() -> tuple[str, ...]:
    """The registered models with an exported PyMC array form (their spec names
    ``array_loglik`` and a NumPy ``redraw``), in the registry's order."""
    return tuple(name for name, spec in REGISTRY.items()
                 if spec.array_loglik is not None and spec.redraw is not None)


def _rows_fn(model: str):
    """``model``'s ``array_loglik``; a ``ValueError`` naming what to add without it."""
    spec = REGISTRY.get(model)
    f = None if spec is None or spec.redraw is None else spec.fn("array_loglik")
    if f is None:
        hint = ("" if spec is None else
                " (its ModelSpec names no array_loglik or no redraw: add them to the "
                "model's entry, docs/design.md, \"Adding a model\")")
        raise ValueError(f"no array form of model {model!r}{hint}; expected one of "
                         f"{pymc_array_models()}")
    return f


def masked_loglik(model: str, lam, order, workers=None, log_eta=None, K: int | None = None):
    """One log-likelihood per row of the padded orders ``order`` ``(n, K)`` (symbolic);
    ``K`` is the table's static width. The model's own form is its spec's
    ``array_loglik`` ``f(ops, x, valid, log_w, K)`` (:mod:`crowdrank.models.array_forms`)
    with ``ops`` :data:`PYTENSOR_OPS`, of the gathered scores."""
    f = _rows_fn(model)
    valid = pt.ge(order, 0)
    x = lam[pt.switch(valid, order, 0)]
    log_w = None if log_eta is None else log_eta[workers]
    return f(PYTENSOR_OPS, x, valid, log_w, K)


def _log_normalizer(x, valid, log_w, K):
    """``log Σ_π Eq. 4`` over the orderings of each row's real positions: every ordering
    of the ``K`` positions scored at once, those that move a padding position masked out
    (:func:`crowdrank.models.numpyro.arrays.masked_log_normalizer`)."""
    perms, last = padded_orderings(K)
    P = perms.shape[0]
    n = x.shape[0]
    ll = _couple_rows(x[:, perms].reshape((n * P, K)), pt.repeat(valid, P, axis=0),
                      pt.repeat(log_w, P, axis=0), K).reshape((n, P))
    k = pt.sum(valid, axis=1)
    return pt.logsumexp(pt.switch(pt.lt(last[None, :], k[:, None]), ll, -np.inf), axis=1)


def _stage_lse(x, valid, K):
    """``log Σ_{j≥i, valid} e^{x_j}`` for every position ``i``, by a backward recursion."""
    xm = pt.switch(valid, x, _PAD)
    lse = [None] * K
    lse[K - 1] = xm[:, K - 1]
    for i in range(K - 2, -1, -1):
        lse[i] = _logaddexp(xm[:, i], lse[i + 1])
    return lse


def _pl_rows(x, valid, K):
    """Plackett–Luce's stages ([Pan18], Eq. 1) of each row."""
    lse = _stage_lse(x, valid, K)
    total = 0.0
    for i in range(K - 1):
        stage = x[:, i] - lse[i]
        total = total + pt.switch(valid[:, i + 1], stage, 0.0)
    return total


def _couple_rows(x, valid, log_w, K):
    """COUPLE's stages ([Pan18], Eq. 3-4) with ``log_w`` = ``log η`` of each row's worker."""
    lse = _stage_lse(x, valid, K)
    total = 0.0
    k = pt.sum(valid, axis=1)
    log_cum = pt.stack([pt.logsumexp(log_w[:, :t + 1], axis=1) for t in range(K)], axis=1)
    rows = pt.arange(x.shape[0])
    for i in range(K - 1):
        t = np.arange(K - i)
        mix = pt.logsumexp(pt.switch(valid[:, i + t], log_w[:, t] + x[:, i + t], _PAD),
                           axis=1)
        stage = mix - lse[i] - log_cum[rows, pt.clip(k - i - 1, 0, K - 1)]
        total = total + pt.switch(valid[:, i + 1], stage, 0.0)
    return total


#: The PyTensor array namespace of the models' shared forms
#: (:mod:`crowdrank.models.array_forms`): elementwise operations and this module's masked
#: PL, COUPLE and normaliser.
PYTENSOR_OPS = SimpleNamespace(
    where=pt.switch, sum=pt.sum, exp=pt.exp, log_sigmoid=_log_sigmoid, logaddexp=_logaddexp,
    pl=_pl_rows, couple=_couple_rows, normalizer=_log_normalizer)


class _VectorLog(pm.distributions.transforms.LogTransform):
    """The log transform of a vector-valued variable: one Jacobian term per vector (the
    sum of the log values), as the per-entry log transforms of the program's sites."""

    name = "log"
    ndim_supp = 1

    def log_jac_det(self, value, *inputs):
        return pt.sum(value, axis=-1)


def level_gammas(fam, alpha, level_sd):
    """The worker family's helper values with the sampler's magnitude reweighting as one
    ``pm.CustomDist`` ``eta_aux`` (inside a model context), the PyMC twin of
    :class:`crowdrank.models.numpyro.arrays.LevelGammas`: the value is ``eta_g``,
    ``eta_u``, ``eta_e`` of :meth:`crowdrank.models.families.WorkerFamily.pymc_log_eta`
    concatenated, its ``logp`` their joint density with the ``eta_level`` Potential's term,
    its ``random`` the exact draw; ``eta_g``, ``eta_u``, ``eta_e`` and ``eta`` are
    Deterministics. Returns the ``log η`` table."""
    a = np.asarray(alpha, float)
    big, small = boost_split(a)
    nb, ns = big[0].size, small[0].size
    sd = np.broadcast_to(np.asarray(level_sd, float), a.shape[:1])
    if not np.all(sd > 0):
        raise ValueError(f"level_sd must be positive (one value or one per worker), "
                         f"got {level_sd!r}")

    def log_g_of(value):
        log_g = pt.zeros(a.shape)
        log_g = pt.set_subtensor(log_g[big], pt.log(value[:nb]))
        return pt.set_subtensor(log_g[small], pt.log(value[nb:nb + ns])
                                - value[nb + ns:] / a[small])

    def logp(value, *_):
        lp = (pt.sum(pm.logp(pm.Gamma.dist(alpha=a[big], beta=1.0), value[:nb]))
              + pt.sum(pm.logp(pm.Gamma.dist(alpha=a[small] + 1.0, beta=1.0),
                               value[nb:nb + ns]))
              + pt.sum(pm.logp(pm.Exponential.dist(lam=1.0), value[nb + ns:])))
        log_s = pt.logsumexp(log_g_of(value), axis=1)
        return lp + pt.sum(level_log_ratio(log_s, a.sum(axis=1), pt, sd))

    def random(*_, rng=None, size=None):
        rng = np.random.default_rng(rng)
        shape = (() if size is None else tuple(np.atleast_1d(size))) + a.shape
        lg = np.log(rng.gamma(a + 1.0, size=shape)) - rng.exponential(size=shape) / a
        log_eta = lg - np.logaddexp.reduce(lg, axis=-1, keepdims=True)
        log_g = sd[:, None] * rng.normal(size=shape[:-1])[..., None] + log_eta
        log_u = np.logaddexp(log_g, np.log(rng.exponential(size=shape)))
        e = a * (log_u - log_g)
        return np.concatenate([np.exp(log_g[(..., *big)]), np.exp(log_u[(..., *small)]),
                               e[(..., *small)]], axis=-1)

    # the parameter only carries the value's length (a signature with no input cannot)
    value = pm.CustomDist("eta_aux", np.zeros(nb + 2 * ns), logp=logp, random=random,
                          signature="(p)->(p)", default_transform=_VectorLog())
    for name, part in (("eta_g", value[:nb]), ("eta_u", value[nb:nb + ns]),
                       ("eta_e", value[nb + ns:])):
        if part.type.shape[0] != 0:
            pm.Deterministic(name, part)
    log_g = log_g_of(value)
    log_eta = log_g - pt.logsumexp(log_g, axis=1, keepdims=True)
    pm.Deterministic("eta", fam._det_eta(log_eta, pt), dims=fam.dims)
    return log_eta


def build_data_model(model: str, items, workers, n_items: int, alpha=None, mu0: float = 0.0,
                     sigma0: float = 1.0, rankings=None, *, level: str = "centered",
                     level_sd=None):
    """The PyMC model of ``model`` with its data in ``pm.Data`` (module docstring); the
    arguments are those of :func:`crowdrank.models.numpyro.arrays.make_model`'s function.
    ``rankings=None`` observes ``items`` (any order of the tasks' items: a placeholder of
    the right shape for prior predictive draws). ``level_sd`` (the samplers' is
    :data:`crowdrank.models.reparam.LEVEL_SD`): the Dirichlet and Beta families' helpers
    with the magnitude reweighting, drawable (:func:`level_gammas`)."""
    from .pymc_models import item_scores
    from .simulate import redraw_orders

    _rows_fn(model)
    items = np.asarray(items, np.int64)
    workers = np.asarray(workers, np.int64)
    if items.ndim != 2 or workers.shape != items.shape[:1]:
        raise ValueError(f"items must be (n, K) and workers (n,), got {items.shape}, "
                         f"{workers.shape}")
    obs = items if rankings is None else np.asarray(rankings, np.int64)
    if obs.shape != items.shape or not np.array_equal(obs >= 0, items >= 0):
        raise ValueError("rankings must have each task's length (the -1 padding of items)")
    K = items.shape[1]
    fam = get(model).worker_prior
    coords = {"item": list(range(int(n_items)))}
    if fam is not None:
        coords["worker"] = list(range(len(np.asarray(alpha))))
        coords["stage"] = list(range(1, np.asarray(alpha).shape[1] + 1))
    with pm.Model(coords=coords) as m:
        items_d = pm.Data("items", items)
        workers_d = pm.Data("workers", workers)
        data = pm.Data("rankings_data", obs)
        lam = item_scores(SimpleNamespace(n_items=int(n_items), mu0=mu0, sigma0=sigma0), level)
        log_eta = None
        if fam is not None:
            if alpha is None:
                raise ValueError(f"model {model!r} needs its worker-prior table alpha")
            if level_sd is not None and fam.simplex_coordinates:
                log_eta = level_gammas(fam, alpha, level_sd)
            else:
                log_eta = fam.pymc_log_eta(SimpleNamespace(alpha=np.asarray(alpha, float)),
                                           "gamma", None, reweight=False)
        params = [lam, items_d, workers_d] + ([log_eta] if log_eta is not None else [])

        def logp(value, lam_, items_, workers_, *rest):
            return masked_loglik(model, lam_, value, workers_, rest[0] if rest else None, K)

        def random(lam_, items_, workers_, *rest, rng=None, size=None):
            return redraw_orders(model, items_, workers_, lam_, rest[0] if rest else None,
                                 rng, size)

        eta_sig = "" if log_eta is None else (",(w,s)" if log_eta.ndim == 2 else ",(w)")
        pm.CustomDist("rankings", *params, logp=logp, random=random, observed=data,
                      signature=f"(l),(n,j),(n){eta_sig}->(n,j)", dtype="int64")
    return m


#: The registered models offered as PyMC data models when this module was imported
#: (:func:`pymc_array_models` reads the registry now).
PYMC_ARRAY_MODELS = pymc_array_models()


def posterior_sbc_update_data(model, augmented_data, simulation_idx=None):
    """simuk's ``update_data`` hook for posterior SBC of a :func:`build_data_model` model
    (``simuk.SBC(model, method="posterior", trace=..., update_data=
    posterior_sbc_update_data)``): posterior SBC refits the model on the observed
    rankings with a replicated data set appended below them (simuk's default
    ``augment_observed``, a concatenation along the first axis), so the design's
    ``pm.Data`` ``items`` and ``workers`` are stacked likewise, one copy of the design per
    block of ``n`` rankings (the replicated rankings are drawn on the same tasks by the
    same workers). simuk calls it inside the model's context before it sets
    ``rankings_data`` and conditions; it resets every ``pm.Data`` afterwards. A row count
    that is not a multiple of ``n``, or rankings whose padding is not the design's:
    ``ValueError``. ``simulation_idx`` is simuk's iteration number (unused)."""
    items = np.asarray(model["items"].get_value())
    workers = np.asarray(model["workers"].get_value())
    ranks = np.asarray(augmented_data["rankings"])
    n = items.shape[0]
    if ranks.ndim != 2 or ranks.shape[1] != items.shape[1] or ranks.shape[0] % n:
        raise ValueError(f"augmented rankings {ranks.shape} are not whole copies of the "
                         f"design's {items.shape} tasks")
    reps = ranks.shape[0] // n
    items_aug, workers_aug = np.tile(items, (reps, 1)), np.tile(workers, reps)
    if not np.array_equal(ranks >= 0, items_aug >= 0):
        raise ValueError("augmented rankings must have each task's length (the -1 padding "
                         "of the design's items, repeated)")
    with model:
        pm.set_data({"items": items_aug, "workers": workers_aug})
