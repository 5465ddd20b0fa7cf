"""NUTS on many data sets in one vmapped program (``inference/nuts/batched.py``).

Oracles: the padded layout's weighted log-likelihood against the NumPy reference
likelihood of each data set (``models.likelihood.loglik``, written from the formulas); the
batched sampler's posterior against 1-D quadrature (BT with two items); a data set's draws
alone against the same data set batched with others (lanes are independent).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crowdrank.models.data import Rankings
from crowdrank.models.likelihood import loglik
from crowdrank.models.simulate import simulate


def _sets(model, n, seed, kmax):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(simulate(model, n_items=6, n_workers=3, tasks_per_worker=int(4 + 3 * i),
                            kmax=kmax, seed=rng).rankings)
    return out


def _priors(model, data):
    from crowdrank.models.priors import parse_worker_prior

    K = 2 if model in ("crowdbt", "bt") else 4
    return parse_worker_prior("geometric:a0=10,a=6", list(data.workers), K)


@pytest.mark.parametrize("model,kmax", [("pl", 4), ("bt", 2), ("crowdbt", 2),
                                        ("couple-normalized", 4)])
def test_padded_total_equals_reference_likelihood(model, kmax):
    import jax
    import jax.numpy as jnp

    from crowdrank.inference.nuts.batched import pad_layout
    from crowdrank.models import numpyro_models as npm

    sets = _sets(model, 3, 1, kmax)
    pri = _priors(model, sets[0])
    lay = pad_layout(sets, model, pri)
    # every data set's real columns are there once, the rest is padding
    assert lay.weight.sum(axis=1).tolist() == lay.n_real.tolist()
    assert len({d.n_rankings for d in sets}) == 3          # the shapes really differ
    rng = np.random.default_rng(7)
    with jax.enable_x64(True):
        for r, data in enumerate(sets):
            lam = rng.normal(size=data.n_items)
            eta = None
            if model == "crowdbt":
                eta = rng.uniform(0.05, 0.95, size=data.n_workers)
                log_eta = np.stack([np.log(eta), np.log1p(-eta)], 1)
            elif model == "couple-normalized":
                eta = rng.dirichlet(np.ones(data.K), size=data.n_workers)
                log_eta = np.log(eta)
            inputs = dataclasses.replace(lay.template, index=jnp.asarray(lay.index[r]),
                                         worker=jnp.asarray(lay.worker[r]))
            ll = npm.column_loglik(inputs, jnp.asarray(lam),
                                   log_eta=None if eta is None else jnp.asarray(log_eta))
            got = float(jnp.sum(jnp.asarray(lay.weight[r]) * ll))
            want = loglik(model, data, lam, eta)
            assert got == pytest.approx(want, rel=1e-10, abs=1e-10)


def test_pad_layout_refuses_counts_below_the_data():
    from crowdrank.inference.nuts.batched import pad_layout

    sets = _sets("pl", 2, 3, 3)
    with pytest.raises(ValueError, match="smaller"):
        pad_layout(sets, "pl", _priors('pl', sets[0]), counts={3: 1, 2: 1})


def _quadrature_bt(n12, n21, sigma0=1.0):
    """Posterior mean and sd of d = λ1 − λ2 for BT with two items: prior d ~ N(0, 2σ0²)."""
    d = np.linspace(-12, 12, 200_001)
    logp = (-d**2 / (4 * sigma0**2) - n12 * np.logaddexp(0, -d) - n21 * np.logaddexp(0, d))
    w = np.exp(logp - logp.max())
    w /= w.sum()
    m = float((w * d).sum())
    return m, float(np.sqrt((w * (d - m) ** 2).sum()))


@pytest.mark.slow
def test_batched_posterior_matches_quadrature_and_lanes_are_independent():
    from crowdrank.inference.nuts.batched import fit_nuts_batched

    def data(n12, n21):
        return Rankings.from_lists([["a", "b"]] * n12 + [["b", "a"]] * n21,
                                   workers=["w"] * (n12 + n21))

    sets = [data(3, 1), data(1, 4)]
    pri = _priors('bt', sets[0])
    res = fit_nuts_batched(sets, "bt", pri, seeds=[11, 12], chains=4, tune=200,
                           draws=1000)
    for (n12, n21), r in zip([(3, 1), (1, 4)], res):
        assert r["gate"].trusted, r["gate"].reasons
        lam = r["posterior"]["lambda"].reshape(-1, 2)
        d = lam[:, 0] - lam[:, 1]
        m, sd = _quadrature_bt(n12, n21)
        mcse = sd / np.sqrt(1000.0)          # ESS ≥ draws of one chain (conservative)
        assert abs(d.mean() - m) < 4 * mcse, (d.mean(), m)
        assert d.std() == pytest.approx(sd, rel=0.06)
        # the common level is the prior's: N(0, σ0²/2), untouched by the data
        assert lam.mean(axis=1).std() == pytest.approx(np.sqrt(0.5), rel=0.06)
    # the second data set alone, with the same block sizes: the same draws. Up to rounding:
    # XLA compiles a batch of one and of two lanes into different vector kernels, whose
    # sums may round differently in the last bits, and 1,200 NUTS iterations carry those
    # bits along (2e-7 seen on one CPU). A lane that read the other lane's data or key
    # would differ by the posterior's own spread (~0.5).
    alone = fit_nuts_batched([sets[1]], "bt", pri, seeds=[12], chains=4, tune=200,
                             draws=1000, counts={2: 5})
    np.testing.assert_allclose(alone[0]["posterior"]["lambda"],
                               res[1]["posterior"]["lambda"], rtol=0, atol=1e-5)



@pytest.mark.slow
def test_lane_groups_give_the_same_draws_and_count_the_steps():
    """Regrouping lanes by difficulty between chunks (``lane_groups``) moves each lane's
    state, key and data together: the draws are those of one vmapped program, with a group
    count that does not divide the lanes (the last group padded) and chunks short enough
    that the lanes are regrouped several times. The steps the groups ran in sequence can
    only exceed the single program's (more calls), and the lane-steps evaluated can only
    be fewer (each group waits only for its own longest lane) — with padding counted.

    Both runs cap the warm-up trees at depth 2 (``warmup_max_tree_depth``): NumPyro's
    depth-``d`` tree has at most ``2^d − 1`` leapfrog steps, so no warm-up iteration takes
    more than 3, while sampling, with the usual cap, has longer trees."""
    from crowdrank.inference.nuts.batched import fit_nuts_batched

    sets = _sets("crowdbt", 3, 5, 2)
    pri = _priors("crowdbt", sets[0])
    kw = {"seeds": [1, 2, 3], "chains": 2, "tune": 60, "draws": 60, "chunk": 20,
          "warmup_max_tree_depth": 2}
    one = fit_nuts_batched(sets, "crowdbt", pri, **kw)
    grp = fit_nuts_batched(sets, "crowdbt", pri, lane_groups=4, **kw)    # 6 lanes, 4 groups
    for a, b in zip(one, grp):
        np.testing.assert_allclose(a["posterior"]["lambda"], b["posterior"]["lambda"],
                                   rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(a["posterior"]["eta"], b["posterior"]["eta"],
                                   rtol=1e-6, atol=1e-8)
        assert a["stats"] == b["stats"]
    t1, t4 = one[0]["timings"], grp[0]["timings"]
    assert t4["lane_groups"] == 4 and t1["lane_groups"] == 1
    assert t4["lane_steps"] == t1["lane_steps"]
    assert t4["batch_steps"] >= t1["batch_steps"]
    # per iteration, each group's longest lane is at most the batch's: 8 slots × max
    assert 1.0 <= t4["vmap_step_overhead"]
    assert t4["vmap_step_overhead"] * 6 / 8 <= t1["vmap_step_overhead"] + 1e-9
    for t, g in ((t1, 1), (t4, 4)):
        warm = [c for c in t["chunks"] if c[0] == "warmup"]
        # per group, Σ_iter max steps ≤ 3 n
        assert all(c[3] <= 3 * c[1] * g for c in warm), warm
        samp = [c for c in t["chunks"] if c[0] == "sampling"]
        assert sum(c[3] for c in samp) > 3 * sum(c[1] for c in samp)


def test_chunks_share_one_length_that_divides_both_phases():
    """Warm-up and sampling chunks of one length are one compiled program; the length
    divides both phases (no chunk straddles the end of warm-up) and is at most ``chunk``;
    a length under a fifth of ``chunk`` would cut the run into too many calls."""
    from crowdrank.inference.nuts.batched import chunk_length

    assert chunk_length(30, 50, 50) == 10
    assert chunk_length(60, 60, 20) == 20
    assert chunk_length(500, 1000, 50) == 50
    assert chunk_length(0, 50, 50) == 50
    assert chunk_length(33, 50, 50) is None and chunk_length(0, 7, 50) is None
    for tune, draws, chunk in ((30, 50, 50), (120, 80, 50), (0, 40, 50), (64, 96, 40)):
        n = chunk_length(tune, draws, chunk)
        assert n <= chunk and tune % n == 0 and draws % n == 0
