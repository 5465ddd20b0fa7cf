"""The observed site of every model (NumPyro ``RankingLikelihood``, PyMC ``CustomDist``),
PSIS-LOO on comparable units, and the posterior predictive statistics.

Oracles: the NumPy reference log-likelihoods (models.likelihood, one ranking at a time);
brute-force probabilities of every ordering (PL's product of softmaxes, Eq. 4 over its
normaliser, COUPLE's story enumerated over true orders and stage offsets); the closed form
of PSIS-LOO when the log-likelihood does not vary over draws (``elpd_i = ll_i``); and the
predictive statistics counted by hand on two rankings.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
from scipy.special import expit, log_softmax

from crowdrank.models.data import Rankings
from crowdrank.models.families import BETA, DIRICHLET, GAMMA
from crowdrank.models.likelihood import (
    couple_loglik,
    loglik,
    loglik_pointwise,
    pl_loglik,
)
from crowdrank.models.model_inputs import model_inputs, with_orders
from crowdrank.models.priors import Priors
from crowdrank.models.registry import MODELS, get
from crowdrank.models.simulate import redraw_orders, simulate

jax = pytest.importorskip("jax")
numpyro = pytest.importorskip("numpyro")

DIRECT = {"simplex": "dirichlet", "level": "iid"}


@pytest.fixture(scope="module")
def data() -> Rankings:
    # k = 2..4 mixed: every block length, padding, and the k! normaliser
    return simulate("couple", n_items=7, n_workers=3, tasks_per_worker=8, kmax=4,
                    seed=17).rankings


@pytest.fixture(scope="module")
def priors(data) -> Priors:
    rng = np.random.default_rng(8)
    kw = {}
    import inspect
    if "gamma" in inspect.signature(Priors).parameters:     # PeerGrader's Gamma prior
        kw["gamma"] = rng.uniform(1.0, 5.0, size=(data.n_workers, 2))
    return Priors(data.workers, rng.uniform(0.4, 3.0, size=(data.n_workers, data.K)),
                  mu0=0.2, sigma0=1.3, spec="test", **kw)


def _beta_point(eta):
    return eta, np.stack([np.log(eta), np.log1p(-eta)], axis=1)


def _log_point(eta):
    return eta, np.log(eta)


#: The worker parameter at a random point and its PPL ``log η`` table, per worker-prior
#: family (models.families): a model is tested through its family, not its name.
FAMILY_POINT = {
    BETA: lambda rng, data: _beta_point(rng.uniform(0.1, 0.9, size=data.n_workers)),
    DIRICHLET: lambda rng, data: _log_point(rng.dirichlet(np.full(data.K, 1.5),
                                                          size=data.n_workers)),
    GAMMA: lambda rng, data: _log_point(rng.gamma(3.0, 0.4, size=data.n_workers)),
}
#: Fixed worker parameters of the two workers of the draw tests, per family.
FAMILY_FIXED = {
    BETA: (np.array([0.8, 0.3]), np.log(np.array([[0.8, 0.2], [0.3, 0.7]]))),
    DIRICHLET: _log_point(np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3]])),
    GAMMA: _log_point(np.array([2.0, 0.5])),
}


def _family_entry(table, model):
    """``table``'s entry for ``model``'s worker-prior family, or a failure saying what to
    add (a new family needs a test point here; a new model of a known family needs none)."""
    fam = get(model).worker_prior
    if fam not in table:
        pytest.fail(f"model {model!r}: its worker-prior family {fam} has no test point in "
                    "tests/test_observed.py; add one to FAMILY_POINT and FAMILY_FIXED")
    return table[fam]


def point(model, data, seed):
    """Constrained ``λ``, the worker parameter (``eta`` site value) and the PPL's
    ``log η`` table at a random point."""
    rng = np.random.default_rng(seed)
    lam = rng.normal(0, 1.2, size=data.n_items)
    if not get(model).has_eta:
        return lam, None, None
    eta, leta = _family_entry(FAMILY_POINT, model)(rng, data)
    return lam, eta, leta


def reference_pointwise(model, data, lam, eta):
    return loglik_pointwise(model, data, lam, eta)


# ---------------------------------------------------------------- NumPyro log_prob
@pytest.mark.parametrize("model", [pytest.param(m, marks=pytest.mark.slow)
                                   if m.startswith("couple") else m for m in MODELS])
def test_numpyro_pointwise_sums_to_the_density_term(model, data, priors):
    """``numpyro.infer.log_likelihood`` of the observed site, per ranking, equals the
    reference; its sum is the model's log joint minus its log prior."""
    from numpyro.infer import log_likelihood
    from numpyro.infer.util import log_density

    from crowdrank.models import numpyro_models as npm

    inp = model_inputs(model, data, priors)
    lam, eta, _ = point(model, data, 3)
    params = {"lambda": lam} if eta is None else {"lambda": lam, "eta": eta}
    with jax.enable_x64(True):
        pw = np.asarray(log_likelihood(lambda: npm.model(inp, **DIRECT),
                                       {k: v[None] for k, v in params.items()})["rankings"])[0]
        joint = float(log_density(npm.model, (inp,), DIRECT, params)[0])
        prior = float(log_density(npm.model, (inp,), dict(DIRECT, prior_only=True),
                                  params)[0])
    np.testing.assert_allclose(pw, reference_pointwise(model, data, lam, eta),
                               rtol=1e-10, atol=1e-10)
    assert joint - prior == pytest.approx(pw.sum(), rel=1e-10, abs=1e-9)
    assert pw.sum() == pytest.approx(loglik(model, data, lam, eta), rel=1e-10, abs=1e-9)


@pytest.mark.slow
def test_fast_couple_pointwise_and_any_cotangent(data, priors):
    """COUPLE's fast path gives the autodiff path's per-ranking values, and its hand-written
    VJP is exact for a non-uniform cotangent (weights per ranking), not only for the sum."""
    from crowdrank.models import numpyro_models as npm

    inp = model_inputs("couple", data, priors)
    lam, _, leta = point("couple", data, 4)
    wts = np.random.default_rng(5).normal(size=data.n_rankings)
    with jax.enable_x64(True):
        fast = npm.RankingLikelihood(inp, lam, leta, fast=True)
        slow = npm.RankingLikelihood(inp, lam, leta, fast=False)
        np.testing.assert_allclose(np.asarray(fast.log_prob(inp.order)),
                                   np.asarray(slow.log_prob(inp.order)), rtol=1e-12,
                                   atol=1e-12)

        def weighted(fast_):
            return lambda l_, e_: jax.numpy.dot(
                npm.RankingLikelihood(inp, l_, e_, fast=fast_).log_prob(inp.order), wts)

        ga = jax.jit(jax.grad(weighted(True), argnums=(0, 1)))(lam, leta)
        gb = jax.jit(jax.grad(weighted(False), argnums=(0, 1)))(lam, leta)
    for a, b in zip(ga, gb):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("model", ["couple", "pl"])
def test_samplers_form_is_the_same_density(model, data, priors):
    """``model(pointwise=False)`` (the site's total, COUPLE's fused scalar kernel: what NUTS
    runs) has the value and the potential-energy gradient of the per-ranking form, whose
    gradient tests/test_gradients.py checks against finite differences."""
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer.util import potential_energy

    from crowdrank.models import numpyro_models as npm

    inp = model_inputs(model, data, priors)
    with jax.enable_x64(True):
        tr = handlers.trace(handlers.seed(npm.model, 1)).get_trace(inp)
        z = {n: biject_to(st["fn"].support).inv(st["value"]) + 0.3
             for n, st in tr.items() if st["type"] == "sample" and not st["is_observed"]}
        out = {}
        for pw in (True, False):
            f = jax.jit(jax.value_and_grad(
                lambda p, pw=pw: potential_energy(npm.model, (inp,), {"pointwise": pw}, p)))
            out[pw] = f(z)
    assert float(out[True][0]) == pytest.approx(float(out[False][0]), rel=1e-12)
    for k in z:
        np.testing.assert_allclose(np.asarray(out[True][1][k]), np.asarray(out[False][1][k]),
                                   rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("model", ["pl", "crowdbt", "couple-normalized"])
def test_log_prob_scores_the_orders_it_is_given(model, data, priors):
    """Other orders of the same tasks are re-laid out and scored (against the reference on
    a Rankings holding those orders); orders of other tasks are refused."""
    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.data import DataError

    inp = model_inputs(model, data, priors)
    lam, eta, leta = point(model, data, 6)
    new = redraw_orders("pl", inp.order, inp.obs_worker, lam, seed=1)
    other = Rankings(data.items, data.workers, new.T, data.lengths, data.worker)
    with jax.enable_x64(True):
        got = np.asarray(npm.RankingLikelihood(inp, lam, leta).log_prob(new))
    np.testing.assert_allclose(got, reference_pointwise(model, other, lam, eta), rtol=1e-10,
                               atol=1e-10)
    with pytest.raises(DataError):
        with_orders(inp, new[:, :2])


# ---------------------------------------------------------------- NumPyro vs PyMC
@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_pymc_and_numpyro_pointwise_agree(model, data, priors):
    """``pm.compute_log_likelihood`` and ``numpyro.infer.log_likelihood`` give the same
    per-ranking values at the same parameters (two draws), equal to the reference."""
    pm = pytest.importorskip("pymc")
    from arviz_base import from_dict
    from numpyro.infer import log_likelihood

    from crowdrank.models import numpyro_models as npm
    from crowdrank.models import pymc_models as pmm

    inp = model_inputs(model, data, priors)
    pts = [point(model, data, s) for s in (11, 12)]
    lam = np.stack([p[0] for p in pts])
    post = {"lambda": lam[None]}
    if pts[0][1] is not None:
        post["eta"] = np.stack([p[1] for p in pts])[None]
    with jax.enable_x64(True):
        a = np.asarray(log_likelihood(lambda: npm.model(inp, **DIRECT),
                                      {k: v[0] for k, v in post.items()})["rankings"])
    m = pmm.build_model(inp, data.items, data.workers, **DIRECT)
    dims = {"lambda": ["item"],
            "eta": list(get(model).worker_prior.dims) if get(model).has_eta else []}
    idata = from_dict({"posterior": post}, coords={"item": list(data.items),
                                                   "worker": list(data.workers),
                                                   "stage": list(range(1, data.K + 1))},
                      dims=dims)
    with m:
        b = pm.compute_log_likelihood(idata, var_names=["rankings"],
                                      extend_inferencedata=False, progressbar=False)
    b = np.asarray(b["rankings"].values)[0]
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
    for d in range(2):
        np.testing.assert_allclose(
            a[d], reference_pointwise(model, data, lam[d], None if pts[d][1] is None
                                      else pts[d][1]), rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- sample: the model's law
LAM = np.array([0.9, 0.1, -0.4, 0.5])
TASKS = np.array([[0, 1, 2], [1, 3, -1]])          # a task of 3 items and a pair
WORKER = np.array([0, 1])
S = 20_000


def _pl_prob(lam, o):
    return float(np.exp(pl_loglik(lam, np.array(o))))


def _story_prob(lam, eta, o):
    """COUPLE's story enumerated: Σ over true orders π of PL(π) × Π_stages η̄_{offset}."""
    total = 0.0
    for pi in permutations(o):
        p = _pl_prob(lam, pi)
        remaining = list(pi)
        for item in o[:-1]:
            m = len(remaining)
            t = remaining.index(item)
            p *= eta[t] / np.sum(eta[:m])
            remaining.remove(item)
        total += p
    return total


def exact_probs(model, lam, eta, items, w):
    """``{ordering: probability}`` of a task under the process ``sample`` implements: the
    model entry's law of one draw (``ModelSpec.draw_prob``: its ``order_prob``, or the
    likelihood where that is the law)."""
    prob = get(model).draw_prob()
    out = {}
    for o in permutations(items):
        o_ = np.array(o)
        out[o] = prob(lam, o_) if eta is None else prob(lam, eta[w], o_)
    return out


def _eta_for(model):
    if not get(model).has_eta:
        return None, None
    return _family_entry(FAMILY_FIXED, model)


def _check_frequencies(model, draws, eta):
    for n, (items, w) in enumerate(zip(TASKS, WORKER)):
        items = [int(i) for i in items if i >= 0]
        probs = exact_probs(model, LAM, eta, items, w)
        assert sum(probs.values()) == pytest.approx(1.0, abs=1e-12)
        k = len(items)
        got = draws[:, n, :k]
        assert np.all(draws[:, n, k:] == -1)
        for o, p in probs.items():
            f = np.mean(np.all(got == np.array(o), axis=1))
            assert abs(f - p) < 5 * np.sqrt(p * (1 - p) / S) + 1e-9, (model, o, f, p)
    if get(model).pairwise:
        # every pair of a drawn ranking has the model's pair probability (its entry's
        # pair likelihood, worker 0)
        o = draws[:, 0, :3]
        pair = get(model).fn("pair_loglik")
        for i, j in ((0, 1), (0, 2), (1, 2)):
            before = np.mean(np.argmax(o == i, axis=1) < np.argmax(o == j, axis=1))
            p = float(np.exp(pair(LAM, eta, np.array([i]), np.array([j]), np.array([0]))[0]))
            assert abs(before - p) < 5 * np.sqrt(p * (1 - p) / S)


def _inputs(model):
    data = Rankings([f"i{r}" for r in range(4)], ["a", "b"], TASKS.T,
                    (TASKS >= 0).sum(axis=1), WORKER)
    pr = Priors(data.workers, np.ones((2, 3)), spec="test",
                **({"gamma": np.ones((2, 2))} if get(model).worker_prior is GAMMA else {}))
    return model_inputs(model, data, pr)


@pytest.mark.parametrize("model", MODELS)
def test_numpyro_sample_has_the_models_distribution(model):
    """Frequencies of 20,000 draws of every ordering against brute-force probabilities
    (exact for PL, PeerGrader, normalised COUPLE and every pair; COUPLE's story and the
    pairwise models' k = 3 process as documented in RankingLikelihood)."""
    from crowdrank.models import numpyro_models as npm

    eta, leta = _eta_for(model)
    inp = _inputs(model)
    d = npm.RankingLikelihood(inp, LAM, leta)
    draws = np.asarray(d.sample(jax.random.PRNGKey(3), (S,)))
    assert draws.shape == (S, 2, 3)
    _check_frequencies(model, draws, eta)


@pytest.mark.parametrize("model", MODELS)
def test_numpy_redraw_orders_has_the_models_distribution(model):
    """The PyMC ``random`` (models.simulate.redraw_orders): the same law."""
    eta, leta = _eta_for(model)
    # S independent copies of the two tasks in one call (vectorised), and ``size``
    draws = redraw_orders(model, np.tile(TASKS, (S, 1)), np.tile(WORKER, S), LAM, leta,
                          seed=5).reshape(S, 2, 3)
    _check_frequencies(model, draws, eta)
    assert redraw_orders(model, TASKS, WORKER, LAM, leta, seed=5, size=(4, 2)).shape == \
        (4, 2, 2, 3)


def test_couple_sample_is_eq4_for_pairs_only():
    """For k = 2 the story is the model (normalised Eq. 4); for k = 3 Eq. 4 sums to ≠ 1,
    so no sampler can have its probabilities (what the docs say)."""
    eta = np.array([0.6, 0.3, 0.1])
    z = sum(np.exp(couple_loglik(LAM, eta, np.array(o))) for o in permutations([0, 1, 2]))
    assert abs(z - 1.0) > 1e-3
    for o in permutations([1, 3]):
        assert _story_prob(LAM, eta, list(o)) == pytest.approx(
            np.exp(couple_loglik(LAM, eta, np.array(o))), rel=1e-12)
    # the entry's law of a draw (models.likelihood.couple_order_prob) is this story
    for o in permutations([0, 1, 2]):
        assert get("couple").draw_prob()(LAM, eta, np.array(o)) == pytest.approx(
            _story_prob(LAM, eta, list(o)), rel=1e-12)


def test_log_prob_of_traced_orders_is_the_concrete_value_or_a_clear_error(data, priors):
    """Traced orders (one compilation per shape) are scored by the masked form, with the
    concrete path's value: PL, and normalised COUPLE (its masked ``log Σ_orderings``)."""
    from crowdrank.models import numpyro_models as npm

    inp = model_inputs("pl", data, priors)
    lam = np.linspace(-1.0, 1.0, data.n_items)
    d = npm.RankingLikelihood(inp, lam)
    np.testing.assert_allclose(np.asarray(jax.jit(d.log_prob)(inp.order)),
                               np.asarray(d.log_prob(inp.order)), rtol=1e-5)  # float32
    inp = model_inputs("couple-normalized", data, priors)
    d = npm.RankingLikelihood(inp, lam, jax.numpy.log(jax.numpy.full((data.n_workers, inp.K),
                                                                      1.0 / inp.K)))
    np.testing.assert_allclose(np.asarray(jax.jit(d.log_prob)(inp.order)),
                               np.asarray(d.log_prob(inp.order)), rtol=1e-5)


# ---------------------------------------------------------------- LOO
def _fake_fit(ll: np.ndarray, seed: int = 0):
    """A DataTree whose log-likelihood varies little over draws (sd 0.01): PSIS's
    smoothing then barely touches the importance ratios, and ``elpd_loo_i`` is the plain
    importance-sampling estimate ``−log mean_d exp(−ll_id)`` (:func:`_is_loo`)."""
    from arviz_base import from_dict

    C, D = 2, 500
    rng = np.random.default_rng(seed)
    draws = ll + 0.01 * rng.normal(size=(C, D, ll.size))
    return from_dict({"posterior": {"lambda": rng.normal(size=(C, D, 3))},
                      "log_likelihood": {"rankings": draws}},
                     dims={"lambda": ["item"], "rankings": ["ranking"]}), draws


def _is_loo(draws, sel):
    flat = draws.reshape(-1, draws.shape[-1])[:, sel]
    return float(np.sum(-np.log(np.mean(np.exp(-flat), axis=0))))


def test_loo_compares_only_comparable_units():
    from crowdrank.validation.predictive import loo_compare, normalised_for

    lengths = np.array([2, 3, 2, 4, 2])
    rng = np.random.default_rng(1)
    ll = {m: -rng.uniform(0.1, 2.0, size=5) for m in ("pl", "bt", "crowdbt", "couple",
                                                      "couple-normalized")}
    fake = {m: _fake_fit(v, i) for i, (m, v) in enumerate(ll.items())}
    res = loo_compare({m: f[0] for m, f in fake.items()}, lengths)
    all_, pairs = res.tables
    assert all_.unit == "all" and pairs.unit == "k=2"
    assert set(all_.models) == {"pl", "couple-normalized"}
    assert set(all_.refused) == {"bt", "crowdbt", "couple"}
    assert "rank-broken" in all_.refused["bt"] and "Eq. 4" in all_.refused["couple"]
    assert set(pairs.models) == set(ll) and not pairs.refused and pairs.n_obs == 3
    sel = lengths == 2
    for m in ll:
        assert pairs.table.loc[m, "elpd"] == pytest.approx(_is_loo(fake[m][1], sel),
                                                           abs=1e-4)
        assert abs(pairs.table.loc[m, "elpd"] - ll[m][sel].sum()) < 0.01
        assert pairs.pareto[m]["n"] == 3
    for m in ("pl", "couple-normalized"):
        assert all_.table.loc[m, "elpd"] == pytest.approx(
            _is_loo(fake[m][1], np.ones(5, bool)), abs=1e-4)
    assert normalised_for("couple", 2) and not normalised_for("couple", 3)
    assert normalised_for("pl", 5) and not normalised_for("crowdbt", 3)


def test_loo_without_pairs_says_so():
    from crowdrank.validation.predictive import loo_compare

    lengths = np.array([3, 3, 4])
    ll = -np.ones(3)
    res = loo_compare({"pl": _fake_fit(ll)[0], "couple": _fake_fit(ll, 1)[0]}, lengths)
    all_, pairs = res.tables
    assert all_.table is None and "fewer than two" in all_.note
    assert pairs.n_obs == 0 and pairs.table is None and "no such rankings" in pairs.note
    d = res.to_dict()
    assert d["tables"][1]["note"]


@pytest.mark.slow
def test_loo_and_ppc_on_a_tiny_fit():
    """fit_nuts stores the pointwise log-likelihood and posterior predictive draws from the
    observed site; LOO and the checks run on them."""
    from crowdrank.inference.nuts import fit_nuts
    from crowdrank.validation.predictive import loo_compare, ppc_from_idata

    # the data and NUTS settings of test_audit_reports_model_checks below, whose LOO-only
    # PL fit then loads this PL program from the run's compilation cache
    d = simulate("couple", n_items=6, n_workers=2, tasks_per_worker=6, kmax=3,
                 seed=4).rankings
    pr = Priors.geometric(d.workers, d.K)
    fits = {m: fit_nuts(d, m, pr, chains=2, tune=60, draws=60, progress=False,
                        seed=1).idata for m in ("pl", "couple")}
    for m, dt in fits.items():
        ll = dt["log_likelihood"]["rankings"].values
        lam = dt["posterior"]["lambda"].values
        eta = dt["posterior"]["eta"].values if "eta" in dt["posterior"] else None
        np.testing.assert_allclose(ll[1, 9], loglik_pointwise(
            m, d, lam[1, 9], None if eta is None else eta[1, 9]), rtol=1e-9, atol=1e-9)
        pp = dt["posterior_predictive"]["rankings"].values
        assert pp.shape[:2] == (2, 60) and pp.shape[2:] == (d.n_rankings, d.K)
        # every replicated row is an ordering of its task's items
        for n in range(d.n_rankings):
            k = d.lengths[n]
            assert np.all(np.sort(pp[:, :, n, :k], axis=-1)
                          == np.sort(d.order[:k, n]))
    res = loo_compare(fits, d.lengths)
    assert res.tables[1].table is not None           # the pairs: both models
    assert res.tables[0].models == ["pl"]            # COUPLE refused on k = 3
    chk = ppc_from_idata(d, fits["couple"])
    assert chk.draws == 120 and set(chk.rows.statistic) == {"first_choice_stage",
                                                             "worker_pair_agreement"}


# ---------------------------------------------------------------- predictive statistics
def test_ppc_statistics_by_hand():
    """Two rankings, two draws, replicated orders written out: every number counted by
    hand (module docstring of validation.predictive)."""
    from crowdrank.validation.predictive import ppc

    data = Rankings(["x0", "x1", "x2"], ["a", "b"], np.array([[0, 1], [1, 0], [2, -1]]),
                    np.array([3, 2]), np.array([0, 1]))
    lam = np.array([[2.0, 1.0, 0.0],        # draw 0: x0 > x1 > x2
                    [0.0, 1.0, 2.0]])       # draw 1: x2 > x1 > x0
    rep = np.array([[[2, 1, 0], [0, 1, -1]],          # draw 0's replicated data
                    [[0, 1, 2], [1, 0, -1]]])         # draw 1's: the data themselves
    rows = ppc(data, lam, rep, "test").rows.set_index(["statistic", "group"])
    # stage 1: observed 1/2 under both references; replicated 1/2 and 1/2: ties, ppp 1/2
    r = rows.loc[("first_choice_stage", "1")]
    assert (r.n, r.observed, r.replicated, r.ppp) == (2, 0.5, 0.5, 0.5)
    # stage 2 (ranking 0 only): observed 1 (draw 0), 0 (draw 1); replicated 0, 0
    r = rows.loc[("first_choice_stage", "2")]
    assert (r.n, r.observed, r.replicated, r.ppp) == (1, 0.5, 0.0, 0.25)
    # worker a (ranking 0, 3 pairs): observed 1, 0; replicated 0, 0
    r = rows.loc[("worker_pair_agreement", "a")]
    assert (r.observed, r.replicated, r.ppp) == (0.5, 0.0, 0.25)
    # worker b (ranking 1, 1 pair): observed 0, 1; replicated 1, 1
    r = rows.loc[("worker_pair_agreement", "b")]
    assert (r.observed, r.replicated, r.ppp) == (0.5, 1.0, 0.75)
    assert r.replicated_lo == 1.0 and r.replicated_hi == 1.0


def test_ppc_rejects_mismatched_draws():
    from crowdrank.validation.predictive import ppc

    data = Rankings(["x0", "x1"], ["a"], np.array([[0], [1]]), np.array([2]), np.array([0]))
    with pytest.raises(ValueError, match="do not match"):
        ppc(data, np.zeros((2, 2)), np.zeros((3, 1, 2), int))


def test_story_prob_is_a_distribution():
    eta = np.array([0.5, 0.3, 0.2])
    assert sum(_story_prob(LAM, eta, list(o)) for o in permutations([0, 1, 2])) == \
        pytest.approx(1.0, abs=1e-12)
    # a perfect worker reports the true order: the story is PL
    e1 = np.array([1.0, 1e-300, 1e-300])
    for o in permutations([0, 1, 2]):
        assert _story_prob(LAM, e1, list(o)) == pytest.approx(_pl_prob(LAM, o), rel=1e-9)
    assert np.exp(log_softmax(LAM[[0, 1]]))[0] == pytest.approx(expit(LAM[0] - LAM[1]))


# ---------------------------------------------------------------- the audit
def test_audit_options_for_the_checks():
    """--no-checks and --loo-models reach the configuration; an unknown model is a one-line
    usage error naming the option."""
    import argparse

    from crowdrank.models.errors import UsageError
    from crowdrank.reports.commands import audit as cmd

    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    cmd.register(sub)
    args = p.parse_args(["audit", "--out", "x", "--no-checks", "--loo-models", "pl"])
    cfg = cmd.config_from_args(args)
    assert cfg.checks is False and cfg.loo_models == ("pl",)
    cfg = cmd.config_from_args(p.parse_args(["audit", "--out", "x", "--loo-models", ""]))
    assert cfg.checks is True and cfg.loo_models == ()
    with pytest.raises(UsageError, match="--loo-models"):
        cmd.config_from_args(p.parse_args(["audit", "--out", "x", "--loo-models", "pl,nope"]))


@pytest.mark.slow
def test_audit_reports_model_checks(tmp_path):
    """The audit fits the LOO-only models, compares on the right units and renders both
    sections; metrics.json holds what the page shows."""
    import json

    from crowdrank.reports.audit import AuditConfig, Subject, run_audit

    sim = simulate("couple", n_items=6, n_workers=2, tasks_per_worker=6, kmax=3, seed=4)
    cfg = AuditConfig(models=("couple",), chains=2, tune=60, draws=60, permutations=0,
                      loo_models=("pl",), posterior_sbc=0)
    run_audit(Subject(sim.rankings, truth=sim.lam), tmp_path, cfg, log=lambda m: None)
    m = json.loads((tmp_path / "metrics.json").read_text())["checks"]
    all_, pairs, composite = m["loo"]["tables"]
    assert all_["models"] == ["pl"] and "couple" in all_["refused"]
    assert {r["model"] for r in pairs["table"]} == {"pl", "couple"}
    # the composite pairwise unit: every ranking, both models
    assert composite["unit"] == "pairs" and composite["n_obs"] == sim.rankings.n_rankings
    assert {r["model"] for r in composite["table"]} == {"pl", "couple"}
    assert set(m["ppc"]) == {"couple", "pl"} and m["extra_fits"] == {
        "pl": "checks/pl/posterior.nc"}
    assert (tmp_path / "checks" / "pl" / "posterior.nc").is_file()
    html = (tmp_path / "report.html").read_text()
    assert "Model comparison (PSIS-LOO)" in html and "Posterior predictive checks" in html
