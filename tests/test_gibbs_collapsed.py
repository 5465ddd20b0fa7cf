"""The collapsed Gibbs sampler (crowdrank.inference.gibbs) checked as the NUTS reference is.

Oracles, none of them the sampler's own output:

* prior-only runs against the exact marginals: ``λ_r ~ N(μ₀, σ₀²)``, ``η_{w,t} ~
  Beta(α_t, Σα − α_t)`` (the Dirichlet's marginal) under the paper's prior, whose last
  entries have the prior spike (``α_4 = 0.0077``);
* the exact posterior on tiny data by self-normalised importance sampling from the prior
  (seeded, 400,000 draws, its standard error from the weights), with the likelihood
  computed here from [Pan18], Eq. 3 independently of the sampler's stages and checked
  against the package's reference log-likelihood (``models.likelihood``);
* planted errors: one wrong conditional at a time (the urn's weight without the slack
  factor, the slack's rate read from the full normaliser, the scores' target with the
  workers' rows left out: every reported item taken as chosen) must move some moment by more
  than the test's tolerance — each planted sampler is run and must FAIL the same
  comparison.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from scipy import stats

from crowdrank.inference.gibbs import GIBBS_MODELS, fit_gibbs
from crowdrank.inference.gibbs import kernels as kn
from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.likelihood import loglik
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

#: |z| of a moment beyond which the sampler disagrees with the oracle (about 30 moments are
#: compared per run: under agreement P(max |z| > 4.5) is below 1e-4)
Z_MAX = 4.5


def _tiny(model: str, seed: int = 3):
    """4 items, 2 workers, tasks of 2..4 items (pairs for the pairwise models): few
    enough rankings that importance sampling from the prior is efficient."""
    sim = simulate(model, setting="amateur", n_items=4, n_workers=2, tasks_per_worker=5,
                   seed=seed)
    d = sim.rankings
    K = max(d.K, 2)
    alpha = np.array([[3.0, 1.5, 0.8, 0.5][:K], [2.0, 2.0, 1.0, 0.3][:K]])
    pri = Priors(d.workers, alpha, mu0=0.4, sigma0=1.2)
    return d, pri


def _stage_loglik(model, d: Rankings, lam, eta):
    """``Σ log P(ranking)`` for ``n`` parameter draws at once: ``lam`` ``(n, L)``, ``eta``
    ``(n, W, K)`` rows (COUPLE, [Pan18] Eq. 3) or ``(n, W)`` accuracies (CrowdBT, a
    mixture over the pair's two orientations), every ranking rank-broken for the
    pairwise models."""
    out = np.zeros(lam.shape[0])
    for j in range(d.n_rankings):
        r = d.order[:d.lengths[j], j]
        w = d.worker[j]
        if model in ("bt", "crowdbt"):
            for a in range(len(r)):
                for b in range(a + 1, len(r)):
                    p = 1.0 / (1.0 + np.exp(lam[:, r[b]] - lam[:, r[a]]))
                    out += np.log(p if model == "bt" else eta[:, w] * p
                                  + (1 - eta[:, w]) * (1 - p))
            continue
        for i in range(len(r) - 1):
            c = r[i:]
            s = np.exp(lam[:, c] - lam[:, c].max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            if model == "pl":
                out += np.log(s[:, 0])
            else:
                e = eta[:, w, :len(c)]
                out += np.log(np.sum(e / e.sum(axis=1, keepdims=True) * s, axis=1))
    return out


def _moments(model, lam, eta):
    """The compared quantities per draw: each λ_r, λ_r², and each η entry and its square."""
    cols = [lam, lam ** 2]
    if eta is not None:
        e = eta.reshape(eta.shape[0], -1)
        cols += [e, e ** 2]
    return np.concatenate(cols, axis=1)


def _oracle(model, d, pri, n=400_000, seed=0):
    """Posterior means of :func:`_moments` and their standard errors by self-normalised
    importance sampling from the prior."""
    rng = np.random.default_rng(seed)
    lam = rng.normal(pri.mu0, pri.sigma0, (n, d.n_items))
    eta = None
    if model == "couple":
        eta = np.stack([rng.dirichlet(a, n) for a in pri.alpha], axis=1)
    elif model == "crowdbt":
        ab = pri.beta()
        eta = np.stack([rng.beta(a, b, n) for a, b in ab], axis=1)
    lw = _stage_loglik(model, d, lam, eta)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    f = _moments(model, lam, eta)
    mean = w @ f
    se = np.sqrt(np.sum((w[:, None] * (f - mean)) ** 2, axis=0))
    return mean, se, 1.0 / np.sum(w ** 2)


def _sampler_moments(res, model):
    import arviz_stats as azs
    import xarray as xr

    post = res.idata["posterior"]
    lam = post["lambda"].values
    eta = post["eta"].values if "eta" in post else None
    C, S = lam.shape[:2]
    f = _moments(model, lam.reshape(C * S, -1),
                 None if eta is None else eta.reshape((C * S,) + eta.shape[2:]))
    fc = f.reshape(C, S, -1)
    ess = np.asarray(azs.ess(xr.DataArray(fc, dims=["chain", "draw", "p"]), method="mean"))
    return f.mean(axis=0), f.std(axis=0) / np.sqrt(ess)


def _max_z(model, seed=3, **kw):
    d, pri = _tiny(model, seed)
    mean, se, _ = _oracle(model, d, pri)
    opts = {"chains": 2, "warmup": 200, "draws": 6_000, "lambda_steps": 1,
            "walk_steps": 0, "seed": 1, "processes": 1} | kw
    res = fit_gibbs(d, model, pri, **opts)
    m, s = _sampler_moments(res, model)
    return float(np.max(np.abs(m - mean) / np.sqrt(s ** 2 + se ** 2)))


def test_oracle_likelihood_is_the_packages_reference():
    d, pri = _tiny("couple")
    rng = np.random.default_rng(0)
    lam = rng.normal(0, 1, (3, d.n_items))
    eta = np.stack([rng.dirichlet(a, 3) for a in pri.alpha], axis=1)
    mine = _stage_loglik("couple", d, lam, eta)
    ref = [loglik("couple", d, lam[i], eta[i]) for i in range(3)]
    np.testing.assert_allclose(mine, ref, rtol=1e-10)
    dc, _ = _tiny("crowdbt")
    acc = rng.uniform(0.2, 0.9, (3, dc.n_workers))
    np.testing.assert_allclose(_stage_loglik("crowdbt", dc, lam, acc),
                               [loglik("crowdbt", dc, lam[i], acc[i]) for i in range(3)],
                               rtol=1e-10)


@pytest.mark.parametrize("model", GIBBS_MODELS)
def test_posterior_moments_match_the_exact_posterior(model):
    assert _max_z(model) < Z_MAX


def test_walk_and_several_score_steps_keep_the_exact_posterior():
    assert _max_z("couple", lambda_steps=2, walk_steps=3, draws=4_000) < Z_MAX


# ---------------------------------------------------------------- planted errors
@njit
def _urn_without_slack(cand, m, w_start, elam, xi, alpha, z, log_g):
    W, K = alpha.shape
    n = np.zeros(K)
    cum = np.empty(K)
    for w in range(W):
        a, b = w_start[w], w_start[w + 1]
        n[:] = 0.0
        Xi = np.zeros(K)
        for s in range(a, b):
            n[z[s]] += 1.0
            for t in range(m[s]):
                Xi[t] += xi[s]
        for s in range(a, b):
            n[z[s]] -= 1.0
            tot = 0.0
            for t in range(m[s]):
                tot += elam[cand[s, t]] * (alpha[w, t] + n[t])      # planted: no 1/(1+Ξ_t)
                cum[t] = tot
            u = np.random.random() * tot
            t = 0
            while t < m[s] - 1 and cum[t] <= u:
                t += 1
            z[s] = t
            n[t] += 1.0
        for t in range(K):
            log_g[w, t] = kn.log_gamma(alpha[w, t] + n[t]) - np.log1p(Xi[t])


@njit
def _slacks_full_rate(m, worker, log_g, xi):
    for s in range(m.shape[0]):
        G = np.exp(log_g[worker[s]]).sum()                   # planted: G_K, not G_{m_s}
        xi[s] = np.random.exponential(1.0) / G


@njit
def _gradient_reported(cand, m, worker, lam, rows, value=True):
    g = np.zeros(lam.shape[0])
    elam = np.exp(lam - lam.max())
    tot = 0.0
    for s in range(m.shape[0]):
        den = 0.0
        for t in range(m[s]):
            den += elam[cand[s, t]]
        tot += np.log(elam[cand[s, 0]] / den)             # planted: the worker's row ignored
        g[cand[s, 0]] += 1.0
        for t in range(m[s]):
            g[cand[s, t]] -= elam[cand[s, t]] / den
    return tot, g


@pytest.mark.parametrize("name,plant", [("urn", _urn_without_slack),
                                        ("slacks", _slacks_full_rate),
                                        ("mixture_gradient", _gradient_reported)])
def test_a_planted_wrong_conditional_fails_the_comparison(monkeypatch, name, plant):
    monkeypatch.setattr(kn, name, plant)
    assert _max_z("couple") > Z_MAX


# ---------------------------------------------------------------- the prior
def test_prior_only_draws_the_exact_marginals_spike_included():
    d = simulate("couple", n_items=5, n_workers=3, tasks_per_worker=4, seed=0).rankings
    pri = Priors.geometric(d.workers, K=4, a0=10, a=6)
    pri = Priors(pri.workers, pri.alpha, mu0=0.3, sigma0=0.7)
    res = fit_gibbs(d, "couple", pri, chains=2, warmup=50, draws=4000, seed=0,
                    prior_only=True, processes=1)
    post = res.idata["posterior"]
    lam = post["lambda"].values.ravel()
    assert stats.kstest(lam, stats.norm(0.3, 0.7).cdf).pvalue > 1e-3
    eta = post["eta"].values
    a = pri.alpha[0]
    for t in range(4):
        x = eta[..., 0, t].ravel()
        ref = stats.beta(a[t], a.sum() - a[t])
        assert stats.kstest(x, ref.cdf).pvalue > 1e-3, t
    # the spike: the share of draws of η_4 below 1e-6 is the Beta marginal's
    assert abs(np.mean(eta[..., :, 3] < 1e-6) - ref.cdf(1e-6)) < 0.03


def test_refuses_models_it_does_not_fit_and_bad_options():
    d, pri = _tiny("couple")
    with pytest.raises(UsageError, match="fits couple"):
        fit_gibbs(d, "couple-normalized", pri)
    with pytest.raises(UsageError, match="draws"):
        fit_gibbs(d, "couple", pri, draws=0)


def test_chains_as_dask_tasks_give_the_chains_of_local_processes():
    """``scheduler``: one task per chain on a Dask cluster, the same draws as here (each
    chain is seeded by the run's seed and its index, wherever it runs)."""
    from distributed import Client, LocalCluster

    d, pri = _tiny("crowdbt")
    kw = {"chains": 2, "warmup": 30, "draws": 40, "seed": 5}
    here = fit_gibbs(d, "crowdbt", pri, processes=1, **kw)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        there = fit_gibbs(d, "crowdbt", pri, scheduler=cluster.scheduler_address,
                          progress=True, **kw)
    for v in ("lambda", "eta"):
        np.testing.assert_array_equal(here.idata["posterior"][v].values,
                                      there.idata["posterior"][v].values)


@pytest.mark.parametrize("processes", [1, 2])
def test_the_progress_bar_counts_every_sweep_of_every_chain(monkeypatch, processes):
    """``progress=True``: one bar over both chains' sweeps (warm-up and kept, thinned) that
    reaches their total, in this process or from the chain processes' counters; the draws
    are those of a run without it."""
    import tqdm.auto

    bars = []

    class Recorded(tqdm.auto.tqdm):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            bars.append(self)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    d, pri = _tiny("couple")
    kw = {"chains": 2, "warmup": 12, "draws": 9, "thin": 2, "seed": 4,
          "processes": processes}
    shown = fit_gibbs(d, "couple", pri, progress=True, **kw)
    assert [(b.total, b.n, b.unit) for b in bars] == [(2 * (12 + 9 * 2), 60, "sweep")]
    quiet = fit_gibbs(d, "couple", pri, progress=False, **kw)
    assert len(bars) == 1 or all(b.disable for b in bars[1:])
    np.testing.assert_array_equal(shown.idata["posterior"]["lambda"].values,
                                  quiet.idata["posterior"]["lambda"].values)
