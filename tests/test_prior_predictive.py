"""Prior predictive checks and the predictive-check statistics.

Oracles: the statistics against brute-force loops and SciPy's Kendall τ on random rankings;
the prior predictive against closed forms of the Dirichlet (aggregation property: stage-i
first-choice rate E[η¹ / (η¹ + … + ηᵐ)] = α₁ / (α₁ + … + αₘ)), the Beta–binomial spread of
per-worker accuracy, quadrature over λ for the agreement with the order by λ, and an
independent Monte Carlo of the stagewise story written here from its definition.
"""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import expit

from crowdrank.models.data import PAD, Rankings
from crowdrank.models.priors import Priors
from crowdrank.reports import cli
from crowdrank.validation.predictive_stats import (
    first_choice_by_stage,
    kendall_tau,
    order_by_scores,
    reference_ranks,
    summarise,
    worker_first_choice,
    worker_pair_agreement,
)
from crowdrank.validation.prior_predictive import draw_eta, named_prior, prior_predictive, summary


def _random_data(rng, n=60, L=7, K=4, W=3):
    rankings, workers = [], []
    for i in range(n):
        k = int(rng.integers(2, K + 1))
        rankings.append([f"i{x}" for x in rng.permutation(L)[:k]])
        workers.append(f"w{i % W}")
    return Rankings.from_lists(rankings, workers, items=[f"i{x}" for x in range(L)])


def test_statistics_by_hand_on_tiny_data():
    d = Rankings.from_lists([["a", "b", "c"], ["b", "a", "c"], ["c", "b"], ["a", "c"]],
                            ["u", "u", "v", "v"], items=["a", "b", "c"])
    ref = order_by_scores(d, [3.0, 2.0, 1.0])            # a > b > c
    assert ref[:, 0].tolist() == [0, 1, 2] and ref[:, 2].tolist() == [1, 2, PAD]
    rates, counts = first_choice_by_stage(d, ref)
    # stage 1: a (yes), b (no), c (no), a (yes); stage 2: b of {b,c} yes, a of {a,c} yes
    assert counts.tolist() == [4, 2] and rates.tolist() == [0.5, 1.0]
    np.testing.assert_allclose(worker_first_choice(d, ref), [0.5, 0.5])
    # u: 3 + 2 of 6 pairs; v: 0 + 1 of 2 pairs
    np.testing.assert_allclose(worker_pair_agreement(d, ref), [5 / 6, 1 / 2])
    np.testing.assert_allclose(kendall_tau(d, ref), [1, 1 / 3, -1, 1])
    s = summarise(d, ref)
    assert s["first_choice"] == 0.5 and s["pair_agreement"] == 6 / 8


def test_statistics_against_brute_force_and_scipy():
    rng = np.random.default_rng(3)
    d = _random_data(rng)
    scores = rng.normal(size=d.n_items)
    ref = order_by_scores(d, scores)
    r = reference_ranks(d, ref)
    stage_hits = np.zeros(d.K - 1)
    stage_n = np.zeros(d.K - 1)
    agree = np.zeros(d.n_workers)
    pairs = np.zeros(d.n_workers)
    for n in range(d.n_rankings):
        k = d.lengths[n]
        rep = list(d.order[:k, n])
        best = sorted(rep, key=lambda x: -scores[x])
        assert list(ref[:k, n]) == best
        for i in range(k - 1):
            stage_n[i] += 1
            stage_hits[i] += rep[i] == max(rep[i:], key=lambda x: scores[x])
        tau = stats.kendalltau([scores[x] for x in rep], -np.arange(k)).statistic
        assert kendall_tau(d, ref)[n] == pytest.approx(tau)
        for p, q in combinations(range(k), 2):
            pairs[d.worker[n]] += 1
            agree[d.worker[n]] += scores[rep[p]] > scores[rep[q]]
        assert r[0, n] == best.index(rep[0])
    rates, counts = first_choice_by_stage(d, ref)
    np.testing.assert_allclose(rates, stage_hits / stage_n)
    np.testing.assert_array_equal(counts, stage_n)
    np.testing.assert_allclose(worker_pair_agreement(d, ref), agree / pairs)


def test_reference_must_hold_the_rankings_items():
    d = Rankings.from_lists([["a", "b"], ["b", "c"]], ["u", "u"])
    bad = d.order.copy()
    bad[0, 1] = 0                                        # item a is not in ranking 1
    with pytest.raises(ValueError, match="ranking 1"):
        summarise(d, bad)
    with pytest.raises(ValueError, match="one value per item"):
        order_by_scores(d, [1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        order_by_scores(d, [1.0, np.nan, 0.0])


@pytest.mark.parametrize("kind", ["geometric", "flat"])
def test_prior_predictive_stage_rates_match_the_dirichlet(kind):
    """COUPLE, k = K = 4: the stage-i first-choice rate is E[η¹/(η¹+…+ηᵐ)] = α₁/(α₁+…+αₘ)
    (Dirichlet aggregation), and per-worker accuracy over T tasks has the Beta–binomial
    variance Var(η¹) + E[η¹(1 − η¹)]/T."""
    W, T, D = 20, 30, 150
    pri = named_prior(kind, "couple", W, 4)
    a = pri.alpha[0]
    workers, draws = prior_predictive("couple", pri, n_draws=D, n_items=25,
                                      tasks_per_worker=T, seed=11)
    s = summary(workers, draws, 4)
    n = W * D
    for i, m in enumerate((4, 3, 2)):
        p = a[0] / a[:m].sum()
        # rankings are independent across workers and draws; tasks of one worker are not
        se = np.sqrt(p * (1 - p) / n)
        assert abs(s["stage_rates"][i] - p) < 5 * se + 0.004, (i, s["stage_rates"][i], p)
    a1, a0 = a[0], a.sum()
    var_eta = a1 * (a0 - a1) / (a0 ** 2 * (a0 + 1))
    e_pq = a1 / a0 - (var_eta + (a1 / a0) ** 2)
    sd = np.sqrt(var_eta + e_pq / T)
    assert s["first_choice_sd"] == pytest.approx(sd, rel=0.06)
    assert s["eta1_mean"] == pytest.approx(a1 / a0, abs=5 * np.sqrt(var_eta / n))


def test_prior_predictive_agreement_with_lambda_by_quadrature():
    """CrowdBT pairs under a Beta(a, b) accuracy prior: P(report in λ order) =
    E[η]·E[σ(|Δ|)] + (1 − E[η])·(1 − E[σ(|Δ|)]), Δ = λ_i − λ_j ~ N(0, 2σ0²), η ⊥ Δ."""
    W, T, D = 20, 25, 150
    pri = Priors(tuple(f"w{w}" for w in range(W)), np.tile([4.0, 1.5], (W, 1)), 0.0, 1.3)
    workers, draws = prior_predictive("crowdbt", pri, n_draws=D, n_items=40,
                                      tasks_per_worker=T, seed=5)
    e_sig, _ = integrate.quad(
        lambda x: expit(abs(x)) * stats.norm.pdf(x, scale=np.sqrt(2) * 1.3), -np.inf, np.inf)
    e_eta = 4.0 / 5.5
    p = e_eta * e_sig + (1 - e_eta) * (1 - e_sig)
    got = draws["pair_agreement_lambda"].mean()
    assert got == pytest.approx(p, abs=5 * np.sqrt(p * (1 - p) / (W * T * D)) + 0.003)
    # for pairs the true-order agreement is the accuracy itself
    assert draws["pair_agreement"].mean() == pytest.approx(e_eta, abs=0.01)
    assert (workers["first_choice_true"] == workers["pair_agreement_true"]).all()


def test_prior_predictive_against_an_independent_simulation_of_the_story():
    """k = 3, flat Dir(1, 1, 1): mean Kendall τ(report, true order) from an independent
    Monte Carlo of the stagewise story (offsets drawn from η̄, written here from the
    definition) against the prior predictive's, which runs the package's simulator."""
    rng = np.random.default_rng(1)
    N = 400_000
    eta = rng.dirichlet(np.ones(3), size=N)
    t1 = (rng.random(N)[:, None] > np.cumsum(eta, 1)).sum(1).clip(max=2)
    eb = eta[:, :2] / eta[:, :2].sum(1, keepdims=True)
    t2 = (rng.random(N) > eb[:, 0]).astype(int)
    # true order (0, 1, 2); the report takes offset t1 then offset t2 of what remains
    tau = np.empty(N)
    for a in range(3):
        for b in range(2):
            rem = [0, 1, 2]
            rep = [rem.pop(a)]
            rep.append(rem.pop(b))
            rep += rem
            tau[(t1 == a) & (t2 == b)] = stats.kendalltau(rep, [0, 1, 2]).statistic
    pri = Priors(tuple(f"w{w}" for w in range(20)), np.ones((20, 3)))
    _, draws = prior_predictive("couple", pri, n_draws=200, n_items=20, tasks_per_worker=20,
                                seed=2)
    sd = tau.std() / np.sqrt(20 * 20 * 200)
    assert draws["tau_mean"].mean() == pytest.approx(tau.mean(), abs=6 * sd + 0.005)


def test_draw_eta_and_named_priors():
    rng = np.random.default_rng(0)
    g = named_prior("geometric", "couple", 5, 4)
    np.testing.assert_allclose(g.alpha[0], 10 * 6.0 ** -np.arange(1, 5))
    eta = draw_eta(rng, "couple", g, 4)
    assert eta.shape == (5, 4) and np.all(eta > 0)
    np.testing.assert_allclose(eta.sum(1), 1)
    assert np.all(draw_eta(rng, "pl", g, 4)[:, 0] == 1)
    gold = named_prior("gold", "couple", 16, 4, gold_tasks=30)
    assert gold.alpha.sum(1) == pytest.approx(16 * [4 + 30 * 3])   # Dir(1) base + 3 stages
    # on average experts (rows 0, 4, …) put more mass on η¹ than spammers (rows 2, 6, …)
    share = gold.alpha[:, 0] / gold.alpha.sum(1)
    assert share[0::4].mean() > share[2::4].mean() + 0.1
    with pytest.raises(Exception, match="unknown prior"):
        named_prior("nope", "couple", 2, 4)


def test_story_prior_predictive_command(tmp_path, capsys):
    out = tmp_path / "s"
    assert cli.main(["story", "--prior-predictive", "--prior-draws", "10", "--prior-workers",
                     "6", "--prior-tasks", "10", "--seed", "3", "--out", str(out)]) == 0
    facts = json.loads((out / "prior_predictive.json").read_text())
    assert set(facts["priors"]) == {"geometric", "flat", "gold"}
    csv = (out / "prior_predictive.csv").read_text().splitlines()
    assert len(csv) == 1 + 3 * 10 * 6
    md = (out / "story.md").read_text()
    assert "## 8. Prior predictive checks" in md and "figures/prior_first_choice.png" in md
    for kind, v in facts["priors"].items():
        assert f"| {kind} |" in md and f"{v['first_choice_mean']:.3f}" in md
    assert "--prior-predictive" in md
    assert (out / "story.html").is_file()


@pytest.mark.parametrize("argv, msg", [
    (["--priors", "geometric,nope"], "--priors"),
    (["--prior-draws", "0"], "--prior-draws"),
    (["--prior-k", "1"], "--prior-k"),
    (["--geometric", "a0=x"], "--geometric"),
    (["--geometric", "b=2"], "--geometric"),
    (["--model", "couple-normalized", "--prior-k", "7"], "k <= 6"),
])
def test_story_prior_predictive_bad_options(tmp_path, capsys, argv, msg):
    assert cli.main(["story", "--prior-predictive", *argv, "--out", str(tmp_path)]) == 2
    assert msg in capsys.readouterr().err
