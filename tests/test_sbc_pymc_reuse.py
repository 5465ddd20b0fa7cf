"""One compiled PyMC model for many SBC replicates (inference/nuts/pymc_reuse.py,
models.pymc_models.build_shared_model).

The re-used graph must be the *same model* as a fresh :func:`build_model` for whatever data
are loaded into it, and loading new data must really change it (a stale-data bug would
otherwise pass silently: every replicate would be fitted to the first one's rankings).
Oracles: the log density and gradient of a fresh per-data-set build at random points; the
change of log density between two data sets against a plain-Python brute force of the
normalised COUPLE likelihood (Eq. 4 over all orderings); and the draws of a freshly
compiled sampler, which a re-used one must reproduce exactly.
"""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import pytest

from crowdrank.models.model_inputs import model_inputs
from crowdrank.validation.pipelines.sbc import SbcConfig, _prepare


def QUICK_MODE():
    """Python thunks without the full rewrite pass: nothing to compile, for a few calls.
    (C thunks compile every op with gcc on a cold cache, as on CI: 110 CPU s for the
    shared-graph test below with an empty compiledir; inner graphs take C thunks unless
    ``cxx`` is empty too.)"""
    from pytensor.compile.mode import Mode

    return Mode(linker="py", optimizer="fast_compile")


def logp_dlogp(model, mode=None):
    """``x -> (log density, gradient)`` of a PyMC model at a raveled unconstrained point."""
    f = model.logp_dlogp_function(ravel_inputs=True, **({} if mode is None else {"mode": mode}))
    f.set_extra_values({})
    return lambda x: f._pytensor_function(np.asarray(x, float))


def _inputs(model="couple-normalized", sim=0, **kw):
    cfg = {"model": model, "backend": "pymc", "sims": 2, "n_items": 6, "n_workers": 3,
           "tasks_per_worker": 6, "kmax": 3, "chains": 2, "tune": 60, "draws": 60,
           "n_ranks": 20}
    cfg.update(kw)
    prep = _prepare(SbcConfig(**cfg).spec(sim))
    return model_inputs(model, prep["data"], prep["priors"]), prep


def _log_eq4(lam, log_eta, order):
    """log of [Pan18] Eq. 4 for one ordering (plain Python, log space)."""
    k, total = len(order), 0.0
    for i in range(k - 1):
        m = k - i
        lc = np.logaddexp.reduce(log_eta[:m])
        den = math.log(sum(math.exp(lam[r]) for r in order[i:]))
        total += float(np.logaddexp.reduce(
            [log_eta[t] - lc + lam[order[i + t]] - den for t in range(m)]))
    return total


def brute_loglik(prep, lam, log_eta):
    """Normalised COUPLE log-likelihood of every observed ranking, by enumeration."""
    data = prep["data"]
    total = 0.0
    for j in range(data.n_rankings):
        order = [int(r) for r in data.order[:, j] if r >= 0]
        le = log_eta[int(data.worker[j])]
        z = np.logaddexp.reduce([_log_eq4(lam, le, list(o)) for o in permutations(order)])
        total += _log_eq4(lam, le, order) - z
    return total


@pytest.fixture(scope="module")
def couple_sets():
    a, pa = _inputs(sim=0)
    b, pb = _inputs(sim=1)
    return (a, pa), (b, pb)


def test_shared_graph_is_build_model_for_each_loaded_data_set(couple_sets):
    import pytensor

    with pytensor.config.change_flags(cxx=""):      # Python thunks: no gcc (see QUICK_MODE)
        _shared_graph_check(couple_sets)


def _shared_graph_check(couple_sets):
    from crowdrank.models import pymc_models as pmm

    (a, pa), (b, pb) = couple_sets
    assert pmm.layout_key(a) == pmm.layout_key(b)
    assert a.blocks != b.blocks or not np.array_equal(a.index, b.index)  # really other data
    model, data = pmm.build_shared_model(a)
    # the same named coordinates as the model built for the data (items, workers, stages)
    assert model.coords == pmm.build_model(a).coords
    shared = logp_dlogp(model, mode=QUICK_MODE())
    rng = np.random.default_rng(3)
    point = model.initial_point()          # compiles a function: once
    n = sum(np.size(v) for v in point.values())
    xs = rng.normal(0.0, 0.5, (3, n))
    lp = {}
    for name, inp in (("a", a), ("b", b)):
        data.set(inp)
        fresh = logp_dlogp(pmm.build_model(inp), mode=QUICK_MODE())
        for i, x in enumerate(xs):
            got, want = shared(x), fresh(x)
            assert got[0] == pytest.approx(want[0], abs=1e-9)
            np.testing.assert_allclose(got[1], want[1], atol=1e-9)
            lp[name, i] = got[0]
    # what the loaded data contribute: the brute force of the two data sets' likelihoods
    # (the prior terms cancel in the difference)
    det = model.compile_fn(model.replace_rvs_by_values([model["lambda"], model["eta"]]),
                           inputs=model.continuous_value_vars, point_fn=False,
                           on_unused_input="ignore", mode=QUICK_MODE())
    sizes = [int(np.size(point[v.name])) for v in model.continuous_value_vars]
    shapes = [np.shape(point[v.name]) for v in model.continuous_value_vars]
    for i, x in enumerate(xs):
        parts = np.split(x, np.cumsum(sizes)[:-1])
        lam, eta = det(*[p.reshape(s) for p, s in zip(parts, shapes)])
        want = brute_loglik(pa, lam, np.log(eta)) - brute_loglik(pb, lam, np.log(eta))
        assert lp["a", i] - lp["b", i] == pytest.approx(want, abs=1e-8)
        assert abs(want) > 1e-3        # the two data sets are distinguishable


def test_layout_mismatch_is_refused(couple_sets):
    from crowdrank.models import pymc_models as pmm

    (a, _), _ = couple_sets
    other, _ = _inputs(n_items=7)
    _, data = pmm.build_shared_model(a)
    with pytest.raises(ValueError, match="does not match"):
        data.set(other)


@pytest.mark.slow     # two compilations of the production graph: ~15 s at load 4
def test_reused_sampler_reproduces_a_fresh_one_exactly(couple_sets):
    """Fit A then B on one compiled model; a newly compiled model fitting B with the same
    seed gives the very same draws (nothing of A's data or adaptation survives), and
    fitting A again reproduces the first fit of A."""
    from crowdrank.inference.nuts.pymc_reuse import ReusedNuts, clear_cache, reused_nuts

    (a, _), (b, _) = couple_sets
    clear_cache()
    kw = {"chains": 2, "tune": 60, "draws": 40, "seed": 11}
    s1, cached = reused_nuts(a)
    assert not cached
    post_a, _, _ = s1.fit(a, **kw)
    s1b, cached = reused_nuts(b)
    assert cached and s1b is s1
    post_b, stats_b, tim = s1.fit(b, **kw)
    assert tim["reused_compile"] == 1
    fresh = ReusedNuts(b)
    post_b2, stats_b2, _ = fresh.fit(b, **kw)
    np.testing.assert_array_equal(post_b["lambda"], post_b2["lambda"])
    np.testing.assert_array_equal(post_b["eta"], post_b2["eta"])
    np.testing.assert_array_equal(stats_b["n_steps"], stats_b2["n_steps"])
    post_a2, _, _ = s1.fit(a, **kw)
    np.testing.assert_array_equal(post_a["lambda"], post_a2["lambda"])
    # and A's posterior is not B's: the same seed on other data moves the chains
    assert not np.allclose(post_a["lambda"].mean((0, 1)), post_b["lambda"].mean((0, 1)))
    assert post_b["lambda"].shape == (2, 40, a.n_items)
    assert post_b["eta"].shape == (2, 40, a.n_workers, a.K)
    clear_cache()


@pytest.mark.parametrize("model", ["pl", "crowdbt"])
def test_other_sbc_models_share_the_graph_too(model, pytensor_without_c):
    from crowdrank.models import pymc_models as pmm

    a, _ = _inputs(model, sim=0, kmax=None)
    b, _ = _inputs(model, sim=1, kmax=None)
    mdl, data = pmm.build_shared_model(a)
    shared = logp_dlogp(mdl, mode=QUICK_MODE())
    x = np.random.default_rng(5).normal(0.0, 0.5, sum(
        np.size(v) for v in mdl.initial_point().values()))
    got = []
    for inp in (a, b):
        data.set(inp)
        want = logp_dlogp(pmm.build_model(inp), mode=QUICK_MODE())(x)
        g = shared(x)
        assert g[0] == pytest.approx(want[0], abs=1e-9)
        np.testing.assert_allclose(g[1], want[1], atol=1e-9)
        got.append(g[0])
    assert got[0] != got[1]


def test_sbc_spec_keys_the_route():
    """The re-used route has its own cache key; the per-replicate build keeps the old one
    (studies cached before the option existed resume), and other back-ends are unchanged."""
    new = SbcConfig(backend="pymc").spec(0)
    old = SbcConfig(backend="pymc", pymc_reuse=False).spec(0)
    assert new["pymc_reuse"] is True and "pymc_reuse" not in old
    assert "pymc_reuse" not in SbcConfig(backend="numpyro").spec(0)


@pytest.mark.slow
def test_reused_route_agrees_with_fit_nuts_within_mcse():
    """The re-used route and fit_nuts(backend="pymc") sample the same posterior: the
    means of every λ and η agree within a few Monte Carlo standard errors."""
    import arviz_stats as azs

    from crowdrank.inference.nuts import fit_nuts
    from crowdrank.inference.nuts.pymc_reuse import ReusedNuts

    a, pa = _inputs(sim=3)
    post, _, _ = ReusedNuts(a).fit(a, chains=4, tune=200, draws=300, seed=1)
    ref = fit_nuts(pa["data"], "couple-normalized", pa["priors"], backend="pymc", chains=4,
                   tune=200, draws=300, seed=2, progress=False, chain_method="sequential",
                   pointwise=False, predictive=False)
    for name in ("lambda", "eta"):
        x = post[name]
        y = np.asarray(ref.idata["posterior"][name].values)
        flat = lambda v: v.reshape(v.shape[0], v.shape[1], -1)
        mx, my = flat(x).mean((0, 1)), flat(y).mean((0, 1))
        se = np.hypot(np.asarray(azs.mcse(flat(x), method="mean", chain_axis=0, draw_axis=1)),
                      np.asarray(azs.mcse(flat(y), method="mean", chain_axis=0, draw_axis=1)))
        z = np.abs(mx - my) / np.maximum(se, 1e-12)
        assert z.max() < 4.5, (name, z.round(2))
