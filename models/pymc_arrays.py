"""The PyMC twins of :mod:`crowdrank.models.numpyro.arrays`: each model with its data in
``pm.Data`` containers (docs/design.md §2.1).

:func:`build_data_model` puts the tasks ``items`` ``(n, K)`` (``-1`` padding), the
``workers`` and the observed orders in ``pm.Data`` (``"items"``, ``"workers"``,
``"rankings_data"``); the observed site ``rankings`` is a ``pm.CustomDist`` whose ``logp``
is the masked form over the padded orders (PL stages by a backward logsumexp recursion,
the ``K(K−1)/2`` position pairs of full rank-breaking, COUPLE's stages; [Pan18], Eq. 1-4,
Lemma 1; [Chen13]), a symbolic function of the data, so ``pm.set_data`` swaps in another
data set of the same shape without rebuilding or recompiling the model. Its ``random`` is
:func:`crowdrank.models.simulate.redraw_orders`. The priors are the worker family's Gamma
sites without the magnitude reweighting ``eta_level`` (a ``pm.Potential``, which
``pm.sample_prior_predictive`` ignores): every free variable is then drawn from its own
prior, and ``η`` is exactly ``Dirichlet(α)`` / ``Beta(a, b)``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from .registry import get

#: A finite stand-in for ``−∞`` at padded positions (as the NumPyro twin).
_PAD = -1e30
PYMC_ARRAY_MODELS = ("pl", "bt", "crowdbt", "couple", "peergrader")


def _logaddexp(a, b):
    m = pt.maximum(a, b)
    return m + pt.log(pt.exp(a - m) + pt.exp(b - m))


def _log_sigmoid(x):
    return -pt.softplus(-x)


def masked_loglik(model: str, lam, order, workers=None, log_eta=None, K: int | None = None):
    """One log-likelihood per row of the padded orders ``order`` ``(n, K)`` (symbolic);
    ``K`` is the table's static width."""
    valid = pt.ge(order, 0)
    x = lam[pt.switch(valid, order, 0)]
    log_w = None if log_eta is None else log_eta[workers]
    if model == "peergrader":
        x = x * pt.exp(log_w)[:, None]
    if model in ("bt", "crowdbt"):
        a, b = np.triu_indices(K, 1)
        d = x[:, a] - x[:, b]
        ll = _log_sigmoid(d) if model == "bt" else _logaddexp(
            log_w[:, :1] + _log_sigmoid(d), log_w[:, 1:2] + _log_sigmoid(-d))
        return pt.sum(pt.switch(valid[:, b], ll, 0.0), axis=1)
    xm = pt.switch(valid, x, _PAD)
    lse = [None] * K                        # log Σ_{j≥i, valid} e^{x_j}, backward
    lse[K - 1] = xm[:, K - 1]
    for i in range(K - 2, -1, -1):
        lse[i] = _logaddexp(xm[:, i], lse[i + 1])
    total = 0.0
    if model == "couple":
        k = pt.sum(valid, axis=1)
        log_cum = pt.stack([pt.logsumexp(log_w[:, :t + 1], axis=1) for t in range(K)], axis=1)
        rows = pt.arange(order.shape[0])
    for i in range(K - 1):
        if model == "couple":
            t = np.arange(K - i)
            mix = pt.logsumexp(pt.switch(valid[:, i + t], log_w[:, t] + x[:, i + t], _PAD),
                               axis=1)
            stage = mix - lse[i] - log_cum[rows, pt.clip(k - i - 1, 0, K - 1)]
        else:
            stage = x[:, i] - lse[i]
        total = total + pt.switch(valid[:, i + 1], stage, 0.0)
    return total


def build_data_model(model: str, items, workers, n_items: int, alpha=None, mu0: float = 0.0,
                     sigma0: float = 1.0, rankings=None, *, level: str = "centered"):
    """The PyMC model of ``model`` with its data in ``pm.Data`` (module docstring); the
    arguments are those of :func:`crowdrank.models.numpyro.arrays.make_model`'s function.
    ``rankings=None`` observes ``items`` (any order of the tasks' items: a placeholder of
    the right shape for prior predictive draws)."""
    from .pymc_models import item_scores
    from .simulate import redraw_orders

    if model not in PYMC_ARRAY_MODELS:
        raise ValueError(f"no array form of model {model!r}; expected one of "
                         f"{PYMC_ARRAY_MODELS}")
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
