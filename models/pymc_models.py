"""The five models as PyMC models (DESIGN.md §2; seed 000, Eq. 1-4).

A line-by-line twin of :mod:`models.numpyro_models` written with PyTensor, reading the
same :class:`~models.model_inputs.ModelInputs`, so both PPLs fit the same data under the
same prior. Variables: ``lambda`` (dim ``item``) ``~ Normal(mu0, sigma0)``; ``eta``
(dims ``worker, stage``) ``~ Dirichlet(α_w)`` for COUPLE or (dim ``worker``)
``~ Beta(a_w, b_w)`` for CrowdBT; the likelihood is one ``pm.Potential("loglik")``.
Vectorised over rankings; the only Python loop is over the ``K <= 6`` stage positions.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from .model_inputs import ModelInputs

_NEG_INF = -np.inf


def _lse(x, axis=0):
    return pt.logsumexp(x, axis=axis)


def _log_sigmoid(x):
    # log σ(x) = −log(1 + e^−x), the stable softplus form
    return -pt.log1pexp(-x)


def pl_loglik(lam, index, mask):
    """Plackett–Luce per ranking (seed 000, Eq. 1); ``index, mask`` ``(K, N)`` → ``(N,)``."""
    x = lam[index]
    K = index.shape[0]
    total = pt.zeros(index.shape[1])
    for i in range(K - 1):
        on = mask[i + 1]           # stage i exists iff k >= i + 2
        act = mask[i:] | ~on[None, :]  # dead stages fully active: no -inf - -inf
        stage = x[i] - _lse(pt.switch(act, x[i:], _NEG_INF))
        total = total + pt.switch(on, stage, 0.0)
    return total


def couple_loglik(lam, log_eta_rows, index, mask):
    """COUPLE per ranking (seed 000, Eq. 3-4) with the stable stage mixture
    ``logsumexp_t [log η̄_t + log softmax(λ_c)_t]`` over the active ``t < m``.

    ``log_eta_rows`` ``(K, N)`` is ``log η`` of each ranking's worker; ``index`` is NumPy.
    """
    x = lam[index]
    K = index.shape[0]
    total = pt.zeros(index.shape[1])
    for i in range(K - 1):
        on = mask[i + 1]
        act = mask[i:] | ~on[None, :]
        xs = pt.switch(act, x[i:], _NEG_INF)
        log_soft = xs - _lse(xs)[None, :]
        le = pt.switch(act, log_eta_rows[: K - i], _NEG_INF)
        log_etabar = le - _lse(le)[None, :]
        stage = _lse(log_etabar + log_soft)
        total = total + pt.switch(on, stage, 0.0)
    return total


def couple_log_normalizer(lam, log_eta, group):
    """``log Σ_{k! orderings} Eq. 4`` for the rankings of one length (DESIGN.md §2)."""
    k, P, n = group.k, group.perms.shape[0], group.items.shape[1]
    cand = group.items[group.perms.T].reshape(k, P * n)
    le = log_eta[group.worker, :k].T                              # (k, n)
    le = pt.tile(le[:, None, :], (1, P, 1)).reshape((k, P * n))
    ll = couple_loglik(lam, le, cand, np.ones((k, P * n), bool)).reshape((P, n))
    return _lse(ll, axis=0)


def pair_loglik(lam, index, eta_pairs=None):
    """BT, or CrowdBT ``log(η σ(d) + (1 − η) σ(−d))`` per pair (Chen et al. 2013)."""
    d = lam[index[0]] - lam[index[1]]
    if eta_pairs is None:
        return _log_sigmoid(d)
    return pt.logaddexp(pt.log(eta_pairs) + _log_sigmoid(d),
                        pt.log1p(-eta_pairs) + _log_sigmoid(-d))


def _safe_log(x):
    # same guard as the NumPyro twin: an η entry that underflows to 0 stays finite in log
    return pt.log(pt.maximum(x, np.finfo(np.float64).tiny))


def column_loglik(inputs: ModelInputs, lam, eta=None):
    """Log-likelihood of each column of the padded layout (rankings, or pairs)."""
    m = inputs.model
    if m == "pl":
        return pl_loglik(lam, inputs.index, inputs.mask)
    if m == "bt":
        return pair_loglik(lam, inputs.index)
    if m == "crowdbt":
        return pair_loglik(lam, inputs.index, eta[inputs.worker])
    log_eta = _safe_log(eta)
    ll = couple_loglik(lam, log_eta[inputs.worker].T, inputs.index, inputs.mask)
    if m == "couple-normalized":
        for g in inputs.groups:
            ll = pt.inc_subtensor(ll[g.rows], -couple_log_normalizer(lam, log_eta, g))
    return ll


def pointwise_loglik(inputs: ModelInputs, lam, eta=None):
    """One value per source ranking (pairs summed back by ``origin``), ``(n_obs,)``."""
    ll = column_loglik(inputs, lam, eta)
    if inputs.model in ("bt", "crowdbt"):
        # inc_subtensor accumulates repeated indices (like np.add.at): a segment sum
        return pt.inc_subtensor(pt.zeros(inputs.n_obs)[inputs.origin], ll)
    return ll


def build_model(inputs: ModelInputs, items=None, workers=None) -> pm.Model:
    """The PyMC model of ``inputs.model``; ``items``/``workers`` name the coordinates."""
    coords = {"item": list(items) if items is not None else list(range(inputs.n_items))}
    if inputs.has_eta:
        coords["worker"] = (list(workers) if workers is not None
                            else list(range(inputs.n_workers)))
        coords["stage"] = list(range(1, inputs.K + 1))
    with pm.Model(coords=coords) as model:
        lam = pm.Normal("lambda", mu=inputs.mu0, sigma=inputs.sigma0, dims="item")
        eta = None
        if inputs.model == "crowdbt":
            eta = pm.Beta("eta", alpha=inputs.alpha[:, 0], beta=inputs.alpha[:, 1],
                          dims="worker")
        elif inputs.has_eta:
            eta = pm.Dirichlet("eta", a=inputs.alpha, dims=("worker", "stage"))
        pm.Potential("loglik", pt.sum(column_loglik(inputs, lam, eta)))
    return model
