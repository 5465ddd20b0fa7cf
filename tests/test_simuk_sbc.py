"""simuk's SBC on every exported model (docs/contracts.md, "Models as functions of
arrays"): prior SBC on the NumPyro array models (``crowdrank.models.numpyro.arrays``) and
on the PyMC data models (``crowdrank.models.pymc_arrays.build_data_model``), posterior SBC
on the PyMC ones through the ``update_data`` hook
:func:`crowdrank.models.pymc_arrays.posterior_sbc_update_data`.

The runs are tiny (2 simulations of a few dozen draws on 6 items, 3 workers, 20
rankings): they check that simuk runs on the models as exported and returns ranks of the
right shape and range, not calibration (docs/sbc.md does that). The fast tests pin the two
repairs they rest on: COUPLE's NumPyro draw under tracing (``Predictive`` traces the
design), and the design's ``pm.Data`` stacked with the replicated rankings."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.models.simulate import simulate

jax = pytest.importorskip("jax")
numpyro = pytest.importorskip("numpyro")

from numpyro.infer import NUTS, Predictive

from crowdrank.models.numpyro import arrays as A

# two simulations: the tests check that each model runs through simuk and the ranks' shape
# and range (the PyMC refits compile afresh each time: 4 simulations cost ~9 CPU min)
N_ITEMS, N_WORKERS, N_RANKINGS, N_SIMS = 6, 3, 20, 2


def _design(model, seed=0):
    """6 items, 3 workers, 20 rankings: pairs for BT and CrowdBT (their draws follow
    their density on pairs only; arrays.py), lengths 2-3 mixed otherwise; and a worker
    table of the model's family with entries below the boost threshold (so the
    Dirichlet family has every helper site)."""
    kmax = 2 if model in ("bt", "crowdbt") else 3
    sim = simulate("pl", n_items=N_ITEMS, n_workers=N_WORKERS,
                   tasks_per_worker=N_RANKINGS // N_WORKERS + 1, kmax=kmax,
                   seed=seed).rankings.subset(np.arange(N_RANKINGS))
    order = np.ascontiguousarray(sim.order.T, dtype=np.int32)
    rng = np.random.default_rng(seed + 1)
    alpha = {"crowdbt": rng.uniform(1.0, 4.0, (N_WORKERS, 2)),
             "peergrader": rng.uniform(2.0, 4.0, (N_WORKERS, 2)),
             "couple": rng.uniform(0.3, 3.0, (N_WORKERS, order.shape[1])),
             "couple-normalized": rng.uniform(0.3, 3.0, (N_WORKERS, order.shape[1]))
             }.get(model)
    return order, np.asarray(sim.worker, np.int32), alpha


def _is_task_order(out, items):
    """Each row of ``out`` is an order of its task's items, padding in place."""
    out = np.asarray(out)
    return all(np.array_equal(out[r] >= 0, items[r] >= 0)
               and sorted(out[r][out[r] >= 0]) == sorted(items[r][items[r] >= 0])
               for r in range(items.shape[0]))


def _check_ranks(ranks, var_names, n_sims, n_draws):
    assert sorted(ranks.data_vars) == sorted(var_names)
    for name in var_names:
        r = np.asarray(ranks[name])
        assert r.shape[:2] == (1, n_sims), (name, r.shape)
        assert r.dtype.kind == "i" and np.all((r >= 0) & (r <= n_draws)), name


# ---------------------------------------------------------------- NumPyro: the draw
@pytest.mark.parametrize("model", ["couple", "couple-normalized"])
def test_couple_predictive_draws_under_tracing(model):
    """``Predictive`` (what simuk's prior SBC draws with) traces the model's arguments:
    COUPLE's draw splits the rows by task length from the lengths kept when the site is
    made, not from the traced table (was: TracerArrayConversionError)."""
    items, workers, alpha = _design(model)
    f = A.make_model(model)
    out = Predictive(f, num_samples=3)(jax.random.PRNGKey(0), items, workers, N_ITEMS,
                                       alpha)["rankings"]
    assert out.shape == (3,) + items.shape
    assert all(_is_task_order(o, items) for o in out)


@pytest.mark.parametrize("model", A.ARRAY_MODELS)
def test_draw_under_jit_equals_eager(model):
    """With the design concrete, the draw under ``jit`` gives the eager draw's values for
    the same key (the tracing repair changes no value)."""
    items, workers, _ = _design("couple")                 # lengths 2-3 for every model
    rng = np.random.default_rng(4)
    lam = rng.normal(size=N_ITEMS)
    log_eta = {"crowdbt": np.log(np.column_stack([np.full(N_WORKERS, .8),
                                                  np.full(N_WORKERS, .2)])),
               "peergrader": np.log(rng.gamma(3.0, 0.4, N_WORKERS)),
               "couple": np.log(rng.dirichlet(np.ones(3), N_WORKERS)),
               "couple-normalized": np.log(rng.dirichlet(np.ones(3), N_WORKERS))
               }.get(model)

    def draw(key, lam_):
        return A.ArrayRankings(model, items, workers, lam_, log_eta).sample(key)

    for s in range(3):
        key = jax.random.PRNGKey(s)
        eager = np.asarray(draw(key, lam))
        assert _is_task_order(eager, items)
        np.testing.assert_array_equal(np.asarray(jax.jit(draw)(key, lam)), eager)


def _ordering_counts(out, items):
    """Counts of each ordering (as a tuple) per distinct task of ``items``."""
    counts = {}
    for r in range(items.shape[0]):
        k = int((items[r] >= 0).sum())
        counts.setdefault(tuple(items[r, :k]), {}).setdefault(tuple(out[r, :k]), 0)
        counts[tuple(items[r, :k])][tuple(out[r, :k])] += 1
    return counts


@pytest.mark.parametrize("model", ["couple", "couple-normalized"])
def test_couple_draw_with_traced_items_has_the_law_of_the_static_draw(model):
    """With the design itself traced (no lengths known), COUPLE's two models draw by the
    masked form over the whole table: each row still an order of its task, with the
    orderings' frequencies of the static (per-length) draw (two-sample chi-square per
    task; lengths 2, 3 and 4 in one table)."""
    from scipy import stats

    tasks = np.array([[0, 1, -1, -1], [2, 0, 1, -1], [3, 1, 0, 2]], np.int32)
    reps = 3000
    items = np.tile(tasks, (reps, 1))
    workers = np.tile(np.array([0, 1, 0], np.int32), reps)
    lam = np.array([0.9, -0.2, 0.3, -0.6])
    log_eta = np.log(np.array([[0.5, 0.3, 0.15, 0.05], [0.2, 0.5, 0.2, 0.1]]))
    key_a, key_b = jax.random.split(jax.random.PRNGKey(11))
    static = np.asarray(A.ArrayRankings(model, items, workers, lam, log_eta).sample(key_a))
    traced = np.asarray(jax.jit(lambda it, k: A.ArrayRankings(
        model, it, workers, lam, log_eta).sample(k))(items, key_b))
    assert _is_task_order(traced, items)
    cs, ct = _ordering_counts(static, items), _ordering_counts(traced, items)
    for task, c in cs.items():
        keys = sorted(set(c) | set(ct[task]))
        table = np.array([[c.get(o, 0) for o in keys], [ct[task].get(o, 0) for o in keys]])
        assert len(keys) > 1
        assert stats.chi2_contingency(table)[1] > 1e-4, (task, table)


# ---------------------------------------------------------------- NumPyro: prior SBC
@pytest.mark.slow   # 4 NUTS fits, each compiled afresh by simuk: 6-16 s per model
@pytest.mark.parametrize("model", A.ARRAY_MODELS)
def test_simuk_prior_sbc_numpyro(model):
    simuk = pytest.importorskip("simuk")
    items, workers, alpha = _design(model)
    args = {"items": items, "workers": workers, "n_items": N_ITEMS, "rankings": items}
    if alpha is not None:
        args["alpha"] = alpha
    sbc = simuk.SBC(NUTS(A.make_model(model)), data_dir=args, num_simulations=N_SIMS,
                    seed=3, sample_kwargs={"num_warmup": 40, "num_samples": 30},
                    progress_bar=False)
    assert sbc.observed_model_vars == ["rankings"]
    sbc.run_simulations()
    _check_ranks(sbc.simulations["prior_sbc"], sbc.var_names, N_SIMS, 30)


# ---------------------------------------------------------------- PyMC
pm = pytest.importorskip("pymc")
from crowdrank.models import pymc_arrays as PA


def _pymc_model(model, seed=0):
    items, workers, alpha = _design(model, seed)
    return PA.build_data_model(model, items, workers, N_ITEMS, alpha, rankings=items), items


def test_update_data_hook_stacks_the_design():
    """The hook stacks ``items`` and ``workers`` once per block of ``n`` rankings, so the
    model's density evaluates on the augmented rankings (without it: PyTensor's
    "incompatible shape" error); a non-multiple or mispadded block: ``ValueError``."""
    m, items = _pymc_model("couple")
    aug = np.concatenate([items, items])
    PA.posterior_sbc_update_data(m, {"rankings": aug}, 0)
    np.testing.assert_array_equal(m["items"].get_value(), np.tile(items, (2, 1)))
    assert m["workers"].get_value().shape == (2 * N_RANKINGS,)
    obs = pm.observe(m, {"rankings": aug})
    lp = obs.compile_logp()(obs.initial_point())
    assert np.isfinite(lp)
    with m:                                                # as simuk resets it
        pm.set_data({"items": items, "workers": items[:, 0] * 0})
    with pytest.raises(ValueError):
        PA.posterior_sbc_update_data(m, {"rankings": aug[:-1]}, 0)
    bad = aug.copy()
    r = N_RANKINGS + int(np.flatnonzero(items[:, -1] < 0)[0])   # a padded row, copy 2
    bad[r] = np.roll(bad[r], 1)                                # padding moved first
    with pytest.raises(ValueError):
        PA.posterior_sbc_update_data(m, {"rankings": bad}, 0)


@pytest.mark.slow   # 4 PyMC fits, each compiled afresh: 11-96 s per model (2 busy cores)
@pytest.mark.parametrize("model", PA.PYMC_ARRAY_MODELS)
def test_simuk_prior_sbc_pymc(model):
    simuk = pytest.importorskip("simuk")
    m, _ = _pymc_model(model)
    sbc = simuk.SBC(m, num_simulations=N_SIMS, seed=3, progress_bar=False,
                    sample_kwargs={"draws": 30, "tune": 40, "chains": 1})
    sbc.run_simulations()
    _check_ranks(sbc.simulations["prior_sbc"], sbc.var_names, N_SIMS, 30)


@pytest.mark.slow   # a fit on the data, then 4 refits on doubled data: 15-140 s (2 busy cores)
@pytest.mark.parametrize("model", PA.PYMC_ARRAY_MODELS)
def test_simuk_posterior_sbc_pymc(model):
    simuk = pytest.importorskip("simuk")
    m, items = _pymc_model(model)
    with m:
        trace = pm.sample(draws=20, tune=40, chains=1, random_seed=1, progressbar=False,
                          compute_convergence_checks=False)
    seen = []

    def hook(model_, augmented, idx):
        PA.posterior_sbc_update_data(model_, augmented, idx)
        seen.append((model_["items"].get_value().shape[0],
                     model_["workers"].get_value().shape[0], augmented["rankings"].shape[0]))

    sbc = simuk.SBC(m, method="posterior", trace=trace, num_simulations=N_SIMS, seed=3,
                    update_data=hook, progress_bar=False,
                    sample_kwargs={"draws": 20, "tune": 40, "chains": 1})
    sbc.run_simulations()
    _check_ranks(sbc.simulations["posterior_sbc"], sbc.var_names, N_SIMS, 20)
    # every refit saw a design as long as its rankings (PL's and BT's densities read the
    # rankings alone, so without the hook they would refit regardless: this is the check)
    assert seen == [(2 * N_RANKINGS,) * 3] * N_SIMS
    # simuk reset the design after each refit
    np.testing.assert_array_equal(m["items"].get_value(), items)
