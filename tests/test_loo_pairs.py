"""The composite pairwise LOO unit (validation.predictive, "Which observations a model can
be compared on") against brute force.

Oracles: the NumPy reference likelihoods of :mod:`crowdrank.models.likelihood` applied to each
rank-broken pair as a two-item ranking, one pair at a time; exact enumeration of the ``k!``
orderings for PL's pair marginal; plain self-normalised importance sampling for the
leave-one-out expectation (with a tight posterior, PSIS's smoothing changes nothing that
matters).
"""

from __future__ import annotations

from itertools import combinations, permutations

import numpy as np
import pytest

from crowdrank.models import likelihood as L
from crowdrank.models.families import BETA, GAMMA
from crowdrank.models.registry import get
from crowdrank.models.simulate import simulate
from crowdrank.validation.predictive import composite_loo, composite_pair_loglik, loo_compare

MODELS = ("pl", "bt", "crowdbt", "couple", "couple-normalized", "peergrader")


@pytest.fixture(scope="module")
def data():
    # k = 2..4 mixed, several workers
    return simulate("couple", n_items=7, n_workers=3, tasks_per_worker=6, kmax=4,
                    seed=3).rankings


def _eta(model, rng, W, K, size=()):
    spec = get(model)
    if not spec.has_eta:
        return None
    if spec.worker_prior is BETA:
        return rng.uniform(0.1, 0.9, size=size + (W,))
    if spec.worker_prior is GAMMA:
        return rng.gamma(3.0, 0.5, size=size + (W,))
    return rng.dirichlet(np.full(K, 1.5), size=size + (W,))


def _brute(model, data, lam, eta):
    """Σ over each ranking's pairs (i before j) of the reference log-likelihood of the
    two-item ranking [i, j], one ranking and one pair at a time."""
    spec = get(model)
    ref = spec.reference_loglik()
    out = np.zeros(data.n_rankings)
    for n in range(data.n_rankings):
        r = data.ranking(n)
        w = data.worker[n]
        for a, b in combinations(range(len(r)), 2):
            pair = np.array([r[a], r[b]])
            if not spec.has_eta:
                out[n] += ref(lam, pair)
            elif spec.eta_scalar:
                out[n] += ref(lam, float(eta[w]), pair)
            else:
                out[n] += ref(lam, eta[w], pair)
    return out


@pytest.mark.parametrize("model", MODELS)
def test_composite_values_match_brute_force(model, data):
    rng = np.random.default_rng(7)
    S = 3
    lam = rng.normal(0, 1.2, size=(S, data.n_items))
    eta = _eta(model, rng, data.n_workers, data.K, (S,))
    got = composite_pair_loglik(model, data, lam, eta)
    assert got.shape == (S, data.n_rankings)
    for s in range(S):
        want = _brute(model, data, lam[s], None if eta is None else eta[s])
        np.testing.assert_allclose(got[s], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("model", ["bt", "crowdbt"])
def test_composite_is_the_pairwise_models_own_likelihood(model, data):
    rng = np.random.default_rng(2)
    lam = rng.normal(size=data.n_items)
    eta = _eta(model, rng, data.n_workers, data.K)
    np.testing.assert_allclose(composite_pair_loglik(model, data, lam, eta),
                               L.loglik_pointwise(model, data, lam, eta), rtol=1e-12)


def test_pl_pair_term_is_the_exact_pair_marginal():
    """Summing PL over the k! orderings with i before j gives σ(λ_i − λ_j): the PL term of
    the composite is the probability of the pair's order within the longer ranking."""
    lam = np.array([0.7, -1.1, 0.2, 1.5])
    items = list(range(4))
    for i, j in combinations(items, 2):
        p = sum(np.exp(L.pl_loglik(lam, np.array(o))) for o in permutations(items)
                if o.index(i) < o.index(j))
        got = np.exp(L.pair_bt(lam, None, np.array([i]), np.array([j]), np.array([0])))[0]
        assert got == pytest.approx(p, rel=1e-12)


def _fit(model, data, seed, sd=0.03, C=2, D=400):
    """A DataTree like fit_nuts writes: a tight posterior around a random point, with the
    model's own per-ranking log-likelihood at every draw."""
    from arviz_base import from_dict

    rng = np.random.default_rng(seed)
    lam0 = rng.normal(size=data.n_items)
    lam = lam0 + sd * rng.normal(size=(C, D, data.n_items))
    post = {"lambda": lam}
    dims = {"lambda": ["item"], "rankings": ["ranking"]}
    eta = None
    if get(model).has_eta:
        e0 = _eta(model, rng, data.n_workers, data.K)
        if e0.ndim == 1:
            eta = np.clip(e0 + 0.01 * rng.normal(size=(C, D) + e0.shape), 0.02, None)
            if get(model).worker_prior is BETA:
                eta = np.minimum(eta, 0.98)
            dims["eta"] = ["worker"]
        else:
            eta = rng.dirichlet(200 * e0[0] + 1, size=(C, D, data.n_workers))
            dims["eta"] = ["worker", "stage"]
        post["eta"] = eta
    ll = np.array([[L.loglik_pointwise(model, data, lam[c, d],
                                       None if eta is None else eta[c, d])
                    for d in range(D)] for c in range(C)])
    return from_dict({"posterior": post, "log_likelihood": {"rankings": ll}}, dims=dims), \
        lam, eta, ll


def _is_composite(ll, comp):
    """Self-normalised importance sampling: weights ∝ 1/p(y_n | θ_s) over all draws."""
    ll = ll.reshape(-1, ll.shape[-1])
    comp = comp.reshape(-1, comp.shape[-1])
    lw = -ll - np.logaddexp.reduce(-ll, axis=0)
    return np.logaddexp.reduce(lw + comp, axis=0)


@pytest.mark.parametrize("model", ["pl", "couple", "crowdbt"])
def test_composite_loo_matches_importance_sampling(model, data):
    dt, lam, eta, ll = _fit(model, data, seed=5)
    res = composite_loo(dt, data, model)
    comp = composite_pair_loglik(model, data, lam, eta)
    want = _is_composite(ll, comp)
    np.testing.assert_allclose(np.asarray(res.elpd_i).ravel(), want, atol=2e-4)
    assert res.elpd == pytest.approx(want.sum(), abs=2e-3)
    assert np.all(np.asarray(res.pareto_k) < 0.7)


def test_composite_loo_of_bt_is_its_ordinary_loo(data):
    import arviz_stats as azs

    dt, *_ = _fit("bt", data, seed=9)
    own = azs.loo(dt, pointwise=True, var_name="rankings")
    assert composite_loo(dt, data, "bt").elpd == pytest.approx(own.elpd, rel=1e-12)


def test_loo_compare_adds_the_pairs_unit(data):
    fits = {m: _fit(m, data, seed=i)[0] for i, m in enumerate(("pl", "bt", "couple"))}
    res = loo_compare(fits, data.lengths, data)
    units = [t.unit for t in res.tables]
    assert units == ["all", "k=2", "pairs"]
    pairs = res.tables[-1]
    assert set(pairs.models) == {"pl", "bt", "couple"} and pairs.n_obs == data.n_rankings
    for m in pairs.models:
        assert pairs.table.loc[m, "elpd"] == pytest.approx(
            composite_loo(fits[m], data, m).elpd, rel=1e-12)
    assert "composite" in pairs.description
    # without the data: the two units of before
    assert [t.unit for t in loo_compare(fits, data.lengths).tables] == ["all", "k=2"]
