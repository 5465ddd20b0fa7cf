"""Online-vs-NUTS comparison on synthetic DataTrees built in the contract layout.

The "NUTS" draws here are iid draws from known Gaussians / Dirichlets, so the true value of
every metric is known: an online posterior equal to the generating distribution must score
z ≈ 0, sd ratio ≈ 1 and nominal coverage; a shifted or narrowed one must move them by the
shift or the factor.
"""

from __future__ import annotations

from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from crowdrank.inference.gate import Gate
from crowdrank.inference.posterior import as_posterior
from crowdrank.validation import compare as C


def make_idata(mu, sd, alpha=None, *, model="couple", chains=4, draws=1000, seed=0,
               items=None, workers=None, stuck=0.0, divergent=()):
    """A DataTree in the layout of docs/contracts.md with iid draws (chain 0 shifted by
    ``stuck`` to simulate a chain that did not mix)."""
    import arviz_base as ab

    rng = np.random.default_rng(seed)
    L = len(mu)
    items = items or [f"item{r}" for r in range(L)]
    lam = rng.normal(mu, sd, size=(chains, draws, L))
    lam[0] += stuck
    post, dims, coords = {"lambda": lam}, {"lambda": ["item"]}, {"item": items}
    if alpha is not None:
        alpha = np.asarray(alpha, float)
        W = alpha.shape[0]
        workers = workers or [f"w{w}" for w in range(W)]
        coords["worker"] = workers
        if model == "couple":
            eta = np.stack([rng.dirichlet(alpha[w], size=(chains, draws)) for w in range(W)],
                           axis=2)
            dims["eta"] = ["worker", "stage"]
            coords["stage"] = list(range(1, alpha.shape[1] + 1))
        else:
            eta = rng.beta(alpha[:, 0], alpha[:, 1], size=(chains, draws, W))
            dims["eta"] = ["worker"]
        post["eta"] = eta
    div = np.zeros((chains, draws), bool)
    for c, d in divergent:
        div[c, d] = True
    stats_ = {"diverging": div,
              "energy": rng.normal(size=(chains, draws))}
    dt = ab.from_dict({"posterior": post, "sample_stats": stats_}, dims=dims, coords=coords)
    dt.attrs["model"] = model
    return dt


def online_stub(model, items, mu, sd, workers=None, alpha=None):
    return SimpleNamespace(model=model, items=tuple(items), mu=np.asarray(mu, float),
                           sigma2=np.asarray(sd, float) ** 2,
                           workers=None if workers is None else tuple(workers),
                           alpha=None if alpha is None else np.asarray(alpha, float))


MU = np.linspace(-2, 2, 12)
SD = np.linspace(0.2, 0.6, 12)
ALPHA = np.array([[5.0, 4.0, 1.0, 0.1], [8.0, 1.0, 0.5, 0.2], [3.0, 3.0, 3.0, 3.0]])
ITEMS = [f"item{r}" for r in range(12)]
WORKERS = ["w0", "w1", "w2"]


@pytest.fixture(scope="module")
def couple_idata():
    return make_idata(MU, SD, ALPHA)


def test_exact_online_posterior_scores_nominal(couple_idata):
    on = online_stub("couple", ITEMS, MU, SD, WORKERS, ALPHA)
    cmp = C.compare(on, couple_idata)
    t = cmp.parameters
    assert len(t) == 12 + 3 * 4
    assert list(t[t.kind == "lambda"].id) == ITEMS
    assert list(t[t.kind == "eta"].param[:2]) == ["eta[w0,1]", "eta[w0,2]"]
    assert cmp.trusted and cmp.reasons == []
    a = cmp.aggregates["all"]
    # iid draws, n = 4000: the sd of z is 1/sqrt(4000) ≈ 0.016
    assert a["p90_abs_z"] < 0.05
    assert a["median_sd_ratio"] == pytest.approx(1.0, abs=0.03)
    assert a["mean_coverage_50"] == pytest.approx(0.5, abs=0.02)
    assert a["mean_coverage_90"] == pytest.approx(0.9, abs=0.015)
    assert a["share_close"] > 0.9
    # MCSE of iid draws is sd/sqrt(n); ArviZ estimates it from the chains
    np.testing.assert_allclose(t.noise_floor, 1 / np.sqrt(4000), rtol=0.2)
    assert cmp.ranking["kendall_tau"] == pytest.approx(1.0)
    assert cmp.ranking["top10_overlap"] == 1.0
    assert cmp.workers["spearman"] == pytest.approx(1.0)


def test_ids_not_positions_are_matched(couple_idata):
    on = online_stub("couple", ITEMS, MU, SD, WORKERS, ALPHA)
    rev = online_stub("couple", ITEMS[::-1], MU[::-1], SD[::-1], WORKERS[::-1], ALPHA[::-1])
    a = C.compare(on, couple_idata).parameters
    b = C.compare(rev, couple_idata).parameters
    np.testing.assert_allclose(a.z, b.z)
    np.testing.assert_allclose(a.kl, b.kl)
    with pytest.raises(ValueError, match="same data"):
        C.compare(online_stub("couple", ITEMS[:-1], MU[:-1], SD[:-1], WORKERS, ALPHA),
                  couple_idata)


def test_shift_and_narrowing_are_measured(couple_idata):
    shifted = C.compare(online_stub("couple", ITEMS, MU + 0.3 * SD, SD, WORKERS, ALPHA),
                        couple_idata).aggregates["lambda"]
    narrow = C.compare(online_stub("couple", ITEMS, MU, 0.5 * SD, WORKERS, ALPHA),
                       couple_idata).aggregates["lambda"]
    assert shifted["median_abs_z"] == pytest.approx(0.3, abs=0.03)
    assert shifted["share_close"] == 0.0
    assert narrow["median_sd_ratio"] == pytest.approx(0.5, abs=0.02)
    # the share of N(0,1) draws within ±0.5·1.645
    assert narrow["mean_coverage_90"] == pytest.approx(2 * stats.norm.cdf(0.8224) - 1, abs=0.02)


def test_crowdbt_layout_beta_workers():
    ab_ = np.array([[8.0, 2.0], [3.0, 3.0], [1.6667, 0.2778], [20.0, 5.0]])
    dt = make_idata(MU, SD, ab_, model="crowdbt", seed=5)
    on = online_stub("crowdbt", ITEMS, MU, SD, [f"w{i}" for i in range(4)], ab_)
    cmp = C.compare(on, dt)
    eta = cmp.parameters[cmp.parameters.kind == "eta"]
    assert list(eta.param) == ["eta[w0]", "eta[w1]", "eta[w2]", "eta[w3]"]
    np.testing.assert_allclose(eta.approx_mean, ab_[:, 0] / ab_.sum(1))
    assert np.all(np.abs(eta.z) < 0.08)
    assert cmp.workers["lowest_online"][0] == "w1"       # E[η] = 0.5, the lowest


def test_unconverged_reference_is_marked_not_trusted():
    dt = make_idata(MU, SD, ALPHA, stuck=3.0, seed=2)
    cmp = C.compare(online_stub("couple", ITEMS, MU, SD, WORKERS, ALPHA), dt)
    assert not cmp.trusted
    assert any("R-hat" in r for r in cmp.reasons)
    d = cmp.to_dict()
    assert d["reference_note"].startswith("reference not trusted")
    assert not cmp.parameters.reference_trusted.any()
    # a gate handed over by the NUTS runner wins over recomputation
    gate = Gate(trusted=False, reasons=["3 divergent transition(s)"])
    good = make_idata(MU, SD, ALPHA, seed=3)
    cmp2 = C.compare(online_stub("couple", ITEMS, MU, SD, WORKERS, ALPHA), good, gate=gate)
    assert not cmp2.trusted and cmp2.reasons == ["3 divergent transition(s)"]


def test_divergences_fail_the_gate():
    dt = make_idata(MU, SD, seed=4, divergent=[(1, 10)])
    g = C.reference_gate(as_posterior(dt))      # no gate handed over: from the draws
    assert not g.trusted and len(g.reasons) == 1
    assert g.reasons[0].startswith("1 divergent transition(s)")


# ------------------------------------------------------------------ ranking level
def test_pairwise_accuracy_by_hand_and_brute_force():
    # truth 3 > 2 > 1 over items 0, 1, 2; estimates order 0 > 2 > 1: pairs (0,1), (0,2)
    # right, (1,2) wrong
    assert C.pairwise_accuracy([3, 2, 1], [3, 1, 2]) == pytest.approx(2 / 3)
    rng = np.random.default_rng(0)
    t = rng.integers(0, 5, size=40).astype(float)      # ties in truth are not pairs
    s = rng.normal(size=40)
    num = sum((t[i] > t[j]) and (s[i] > s[j]) for i in range(40) for j in range(40))
    den = sum(t[i] > t[j] for i in range(40) for j in range(40))
    assert C.pairwise_accuracy(t, s, block=7) == pytest.approx(num / den)
    # without ties the accuracy is (1 + Kendall τ) / 2
    t, s = rng.normal(size=50), rng.normal(size=50)
    assert C.pairwise_accuracy(t, s) == pytest.approx((1 + stats.kendalltau(t, s)[0]) / 2)
    with pytest.raises(ValueError, match="no pair"):
        C.pairwise_accuracy([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        C.pairwise_accuracy([1, 2, np.nan], [1, 2, 3])


def test_top_overlap_and_lowest_workers():
    a = np.arange(20.0)
    b = a.copy()
    b[[19, 0]] = b[[0, 19]]        # swap the best and the worst
    assert C.top_overlap(a, b, 10) == pytest.approx(0.9)
    ids = [f"w{i}" for i in range(8)]
    q1 = np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6, 0.4])
    q2 = q1.copy()
    q2[[1, 0]] = q2[[0, 1]]
    assert C.lowest(q1, ids, 6) == ["w1", "w3", "w5", "w7", "w6", "w4"]
    w = C.worker_agreement(q1, q2, ids, truth_q=q1)
    # 8 workers: at most half of them, 4, count as "lowest" (w1 w3 w5 w7 vs w0 w3 w5 w7)
    assert w["lowest_k"] == 4
    assert w["lowest_overlap"] == 3 and w["lowest_overlap_truth_online"] == 4
    big = C.worker_agreement(np.arange(14.0), np.arange(14.0)[::-1], [f"w{i}" for i in range(14)])
    assert big["lowest_k"] == 6 and big["lowest_overlap"] == 0
    assert w["spearman"] == pytest.approx(stats.spearmanr(q1, q2)[0])


def test_order_sensitivity_units():
    rng = np.random.default_rng(1)
    nuts_m, nuts_s = np.zeros(30), np.full(30, 2.0)
    perm = rng.normal(0.0, 0.2, size=(200, 30))     # spread 0.2 = 0.1 MCMC sd
    online = np.full(30, 1.0)                       # gap 1.0 = 0.5 MCMC sd
    r = C.order_sensitivity(perm, online, nuts_m, nuts_s, ids=list(range(30)))
    assert r["median_spread"] == pytest.approx(0.1, abs=0.01)
    assert r["median_gap"] == pytest.approx(0.5)
    assert r["share_gap_above_2_spread"] == 1.0
    assert len(r["per_item"]["spread"]) == 30
    with pytest.raises(ValueError, match="at least 2"):
        C.order_sensitivity(perm[:1], online, nuts_m, nuts_s)


def test_brute_force_kendall_agrees():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=15), rng.normal(size=15)
    conc = sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i, j in combinations(range(15), 2))
    r = C.ranking_agreement(a, b)
    assert r["kendall_tau"] == pytest.approx(conc / (15 * 14 / 2))


def test_ranking_agreement_counts_only_comparable_pairs():
    """Two components {a, b} and {c, d}: the truth orders 6 pairs, the data only 2 of them;
    the cross-component pairs (whose order no ranking can tell) are left out and counted."""
    from crowdrank.validation.compare import ranking_agreement

    truth = np.array([4.0, 3.0, 2.0, 1.0])
    est = np.array([1.0, 0.0, 5.0, 4.0])        # right within components, wrong across
    comp = np.array([0, 0, 1, 1])
    plain = ranking_agreement(est, est, truth)
    assert plain["accuracy_online"] == pytest.approx(2 / 6)
    out = ranking_agreement(est, est, truth, components=comp)
    assert out["accuracy_online"] == 1.0 and out["accuracy_nuts"] == 1.0
    assert out["accuracy_pairs_used"] == 2 and out["accuracy_pairs_left_out"] == 4


def test_reference_diagnostics_are_memoised_exactly():
    """The reference's MCSE, ESS and R-hat are computed once per draws (an audit compares
    several approximations with one reference): a second call returns what ArviZ returns,
    a caller writing into the result does not change the next one, and other draws of
    the same shape are not served the first draws' values."""
    import arviz_stats as azs
    import xarray as xr

    from crowdrank.validation import compare as C
    from crowdrank.validation import tables as T

    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 50, 4)).cumsum(axis=1)
    da = xr.DataArray(x, dims=("chain", "draw", "p"))
    want_mcse = np.asarray(azs.mcse(da, method="mean").values, float)
    want_ess = np.asarray(azs.ess(da, method="bulk").values, float)
    for _ in range(2):
        mcse, ess = C._ref_stats(x)
        np.testing.assert_array_equal(mcse, want_mcse)
        np.testing.assert_array_equal(ess, want_ess)
        mcse[:] = -1.0
    y = rng.normal(size=x.shape).cumsum(axis=1)
    assert not np.array_equal(C._ref_stats(y)[1], want_ess)
    idata = xr.DataTree.from_dict(
        {"posterior": xr.Dataset({"lambda": (("chain", "draw", "item"), x)})})
    tree = idata
    first = T._diag(tree, "lambda")
    first["rhat"][:] = 0.0
    again = T._diag(tree, "lambda")
    np.testing.assert_array_equal(again["rhat"], np.asarray(
        azs.rhat(idata, var_names=["lambda"])["lambda"].values, float))
    tree2 = xr.DataTree.from_dict(
        {"posterior": xr.Dataset({"lambda": (("chain", "draw", "item"), y)})})
    assert not np.array_equal(T._diag(tree2, "lambda")["ess_bulk"], again["ess_bulk"])


def test_draws_memo_computes_once_per_draws_and_keeps_a_few():
    """One computation per (draws, key parts), byte for byte: the same values again are
    served, one changed draw, another dtype or another key part is computed afresh, and
    beyond ``keep`` entries the oldest is computed again."""
    from crowdrank.validation.tables import DrawsMemo

    calls = []
    memo = DrawsMemo(keep=2)

    def get(a, *parts):
        return memo.get(a, lambda: calls.append(1) or len(calls), *parts)

    x = np.arange(6.0).reshape(2, 3)
    assert get(x) == 1 and get(x.copy()) == 1
    y = x.copy()
    y[1, 2] += 1e-12
    assert get(y) == 2
    assert get(x.astype(np.float32)) == 3            # the oldest (x) is dropped now
    assert get(x, "lambda") == 4
    assert get(x) == 5
