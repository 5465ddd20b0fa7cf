"""The peers' table (validation.studies.peers): crowd-kit's BradleyTerry against our BT ML on the
same pairs (same model, same data: same scores up to a shift, same order), choix's MAP
against ours, crowd-kit's input frame, and the table's rows. Skipped where crowd-kit or
choix is not installed (development dependencies)."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.models.simulate import simulate
from crowdrank.validation.studies import peers


@pytest.fixture(scope="module")
def sim():
    return simulate("bt", n_items=8, n_workers=4, tasks_per_worker=60, seed=21)


@pytest.fixture(scope="module")
def pairs(sim):
    return sim.rankings


def test_crowdkit_bt_equals_our_ml(pairs, monkeypatch):
    """Run for every iteration (``tol=0``), crowd-kit's MM reaches our Newton ML."""
    pytest.importorskip("crowdkit")
    from crowdkit.aggregation import BradleyTerry

    from crowdrank.inference.batch import fit_batch

    ours = fit_batch(pairs, "bt", method="ml", tol=1e-10, laplace_cov=False).mu
    ck = BradleyTerry(n_iter=1500, tol=0.0).fit(peers.pairs_frame(pairs, 3)).scores_
    theirs = np.log(ck.reindex(list(pairs.items)).to_numpy(float))
    np.testing.assert_allclose(theirs - theirs.mean(), ours - ours.mean(), atol=1e-6)
    assert np.argsort(theirs).tolist() == np.argsort(ours).tolist()
    monkeypatch.setattr(peers, "CROWDKIT_BT_ITER", 1500)
    s, _ = peers.method_scores(pairs, "crowdkit-bt-full")
    np.testing.assert_allclose(s - s.mean(), ours - ours.mean(), atol=1e-6)


def test_crowdkit_bt_as_shipped_stops_after_two_mm_updates(pairs):
    """crowd-kit 1.4.2's BradleyTerry with any tol > 0 returns Hunter's MM ([Hunter04],
    Eq. 3) after exactly two updates from the uniform start (its convergence test compares
    the iterate with an alias of itself): a brute-force MM of two steps gives its answer."""
    pytest.importorskip("crowdkit")
    from crowdkit.aggregation import BradleyTerry

    pr = pairs.rank_break()
    L = pairs.n_items
    M = np.zeros((L, L))
    np.add.at(M, (pr.order[0], pr.order[1]), 1)          # M[i, j]: i beat j
    N = M + M.T
    p = np.full(L, 1.0 / L)
    for _ in range(2):
        den = np.array([sum(N[i, j] / (p[i] + p[j]) for j in range(L) if N[i, j])
                        for i in range(L)])
        p = M.sum(1) / den
        p /= p.sum()
    ck = BradleyTerry(n_iter=1000, tol=1e-5).fit(peers.pairs_frame(pairs, 3)).scores_
    np.testing.assert_allclose(ck.reindex(list(pairs.items)).to_numpy(float), p, rtol=1e-10)


def test_choix_map_equals_our_map(pairs):
    """Our BT MAP (Newton) is the maximiser of the penalised log-likelihood
    ``Σ log σ(λ_w − λ_l) − Σ λ²/(2σ0²)``: its gradient, written here, vanishes; choix's
    Newton-CG on the same objective (``alpha = 1/(2σ0²)``) lands on it to 1e-8, and the
    table's choix row (BFGS, tol 1e-8) to 1e-6 (read-level: max |Δ| 2e-13, README)."""
    choix = pytest.importorskip("choix")
    from scipy.special import expit

    from crowdrank.validation.studies.replicate import real_priors

    ours, _ = peers.method_scores(pairs, "map-bt")
    s0 = float(real_priors(pairs).sigma0)
    w, lo = pairs.rank_break().order[:2]
    p = expit(ours[w] - ours[lo])                   # P(the winner wins)
    grad = -ours / s0 ** 2
    np.add.at(grad, w, 1 - p)
    np.add.at(grad, lo, -(1 - p))
    assert np.abs(grad).max() < 1e-8
    newton = choix.opt_pairwise(pairs.n_items, [(int(a), int(b)) for a, b in zip(w, lo)],
                                alpha=1 / (2 * s0 ** 2), method="Newton-CG", tol=1e-12)
    np.testing.assert_allclose(newton, ours, atol=1e-8)
    theirs, _ = peers.method_scores(pairs, "choix-map")
    np.testing.assert_allclose(theirs, ours, atol=1e-6)


def test_pairs_frame_orients_at_random_and_keeps_the_winner(pairs):
    pytest.importorskip("pandas")
    df = peers.pairs_frame(pairs, 0)
    pr = pairs.rank_break()
    assert len(df) == pr.n_rankings
    items = np.asarray(pairs.items, dtype=object)
    assert (df["label"].to_numpy() == items[pr.order[0]]).all()
    assert ((df["label"] == df["left"]) | (df["label"] == df["right"])).all()
    left_wins = float((df["label"] == df["left"]).mean())
    assert 0.4 < left_wins < 0.6                   # not always the winner on the left
    assert df.equals(peers.pairs_frame(pairs, 0))  # seeded


def brute_accuracy(truth, est) -> float:
    """The paper's pairwise accuracy ([Pan18], Sect. 5.1) over every pair of items."""
    pairs = [(i, j) for i in range(len(truth)) for j in range(len(truth)) if truth[i] > truth[j]]
    return sum(est[i] > est[j] for i, j in pairs) / len(pairs)


@pytest.mark.slow
def test_table_rows(sim, pairs):
    """Every row's accuracy and Spearman ρ are those of its method's scores against the
    simulation's true scores, recomputed here (brute-force accuracy, scipy's spearmanr),
    averaged over the seeded orders for the order-dependent methods; the MAP rows (ours
    and choix's) agree, and on 240 pairs of 8 items every maximum a posteriori or
    likelihood row recovers the order well (accuracy > 0.8)."""
    pytest.importorskip("crowdkit")
    pytest.importorskip("choix")
    from scipy.stats import spearmanr

    from crowdrank.validation.studies.replicate import order_seed

    rows = peers.table(pairs, sim.lam, orders=2)
    assert [r["method"] for r in rows] == list(peers.LABELS)
    for r in rows:
        m = r["method"]
        runs = 2 if m in peers.ORDERED else 1
        assert r["runs"] == runs and "error" not in r, r
        scores = [peers.method_scores(pairs, m, seed=order_seed(0, k) if runs > 1 else 0)[0]
                  for k in range(runs)]
        assert r["accuracy"] == pytest.approx(
            np.mean([brute_accuracy(sim.lam, s) for s in scores]), abs=1e-12), m
        assert r["spearman"] == pytest.approx(
            np.mean([spearmanr(sim.lam, s)[0] for s in scores]), abs=1e-12), m
    acc = {r["method"]: r["accuracy"] for r in rows}
    assert acc["map-bt"] == acc["choix-map"]
    assert min(acc[m] for m in ("map-bt", "map-pl", "choix-map", "crowdkit-bt-full")) > 0.8
    with pytest.raises(ValueError, match="unknown method"):
        peers.method_scores(pairs, "nope")
