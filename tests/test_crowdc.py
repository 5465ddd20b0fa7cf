"""CrowDC (inference.batch.crowdc): the cost formula against counting the compared pairs,
the paper's pivot example, exact recovery on noiseless data, and the conquer step's
interpolation."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy.stats import kendalltau

from crowdrank.inference.batch import crowdc as dc


def test_pivot_orders_paper_example():
    assert (dc.pivot_orders(10, 4) + 1).tolist() == [1, 4, 7, 10]


@pytest.mark.parametrize("n,g,p", [(100, 2, 12), (60, 3, 4), (200, 5, 8)])
def test_cost_counts_the_distinct_pairs_compared(n, g, p):
    rng = np.random.default_rng(0)
    groups = rng.permutation(n).reshape(g, n // g)
    pairs = {frozenset(x) for grp in groups for x in combinations(grp.tolist(), 2)}
    piv = [grp[:p] for grp in groups]                  # any p per group: the count is the same
    pairs |= {frozenset(x) for x in combinations(np.concatenate(piv).tolist(), 2)}
    t = 5
    assert dc.cost(n, g, p, t) == (t * len(pairs), t * n * (n - 1) // 2)


def test_paper_saving_at_the_claimed_setting():
    ours, base = dc.cost(100, 2, 12, 5)
    assert 0.45 <= 1 - ours / base <= 0.50           # the paper's 45-50 %


def test_noiseless_data():
    """Without noise BTL orders every item and CrowDC every item within a group and every
    pivot; across groups non-pivots are only placed by proportion, so overall τ < 1 is
    allowed but it must stay high."""
    rng = np.random.default_rng(1)
    B = dc.simulate_outcomes(40, 3, 1.0, rng)
    assert kendalltau(dc.btl(B, 3), np.arange(40))[0] == pytest.approx(1.0)
    res = dc.crowdc(B, 3, 2, 4, np.random.default_rng(5))
    piv = np.sort(res.pivots)
    assert kendalltau(res.scores[piv], piv)[0] == pytest.approx(1.0)
    groups = np.random.default_rng(5).permutation(40).reshape(2, 20)
    for grp in groups:
        assert kendalltau(res.scores[grp], grp)[0] == pytest.approx(1.0)
    assert kendalltau(res.scores, np.arange(40))[0] > 0.9


def test_bt_scores_match_choix():
    choix = pytest.importorskip("choix")
    rng = np.random.default_rng(2)
    B = dc.simulate_outcomes(8, 4, 0.7, rng)
    data = []
    for a, b in combinations(range(8), 2):
        data += [(b, a)] * int(B[a, b]) + [(a, b)] * int(4 - B[a, b])
    ref = choix.opt_pairwise(8, data, alpha=1 / (2 * dc.SIGMA0**2), method="BFGS", tol=1e-12)
    np.testing.assert_allclose(dc.btl(B, 4), ref, atol=1e-6)


def test_non_pivots_are_interpolated_between_their_pivots():
    rng = np.random.default_rng(3)
    B = dc.simulate_outcomes(30, 5, 0.8, rng)
    res = dc.crowdc(B, 5, 3, 3, np.random.default_rng(4))
    assert len(res.pivots) == 9
    # every final score lies within the range of the out-of-group pivot scores
    assert res.scores.min() >= res.scores[res.pivots].min() - 1e-12
    assert res.scores.max() <= res.scores[res.pivots].max() + 1e-12


# ---------------------------------------------------------------- the batched solver and τ
def test_dense_newton_matches_the_generic_newton_solver():
    """The stacked dense solver against :func:`crowdrank.inference.batch.solvers.solve` on the same
    pairs written as stages (an independent code path: sparse stages, Cholesky)."""
    from crowdrank.inference.batch import luce
    from crowdrank.inference.batch.solvers import Problem, solve

    rng = np.random.default_rng(7)
    stacks = [dc.win_matrix(dc.simulate_outcomes(9, 3, 0.7, rng), 3) for _ in range(3)]
    stacks[1][np.ix_([0, 1], [2, 3])] = 0          # some pairs never compared
    stacks[1][np.ix_([2, 3], [0, 1])] = 0
    got = dc.bt_map_dense(np.stack(stacks), sigma0=2.0)
    for W, lam in zip(stacks, got):
        a, b = np.nonzero(W)
        cand = np.stack([a, b], 1)
        st = luce.Stages(9, cand, np.ones_like(cand, bool), np.arange(len(a)), len(a), "bt")
        ref = solve(Problem(st, luce.Prior(0.0, 2.0), W[a, b]), "newton", tol=1e-11).lam
        np.testing.assert_allclose(lam, ref, atol=1e-7)


def test_kendall_tau_against_scipy_and_brute_force():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(8)
    s = rng.integers(0, 6, size=(4, 25)).astype(float)       # many ties
    for row in s:
        assert dc.kendall_tau(row) == pytest.approx(kendalltau(row, np.arange(25))[0])
        brute = sum(np.sign(row[b] - row[a]) for a, b in combinations(range(25), 2)) / 300
        assert dc.kendall_tau(row, "a") == pytest.approx(brute)
    np.testing.assert_allclose(dc.kendall_tau(s), [kendalltau(r, np.arange(25))[0] for r in s])


def test_batched_divisions_equal_one_at_a_time():
    rng = np.random.default_rng(9)
    B = dc.simulate_outcomes(24, 3, 0.8, rng)
    groups = dc.divisions(24, 3, 4, np.random.default_rng(10))
    many = dc.crowdc_many(dc.win_matrix(B, 3), groups, 4)
    again = np.random.default_rng(10)
    for d in range(4):
        one = dc.crowdc(B, 3, 3, 4, again)
        np.testing.assert_allclose(many["score"][d], one.scores, atol=1e-9)


@pytest.mark.parametrize("n,g,p", [(30, 3, 4), (24, 2, 12), (40, 5, 3)])
def test_cost_formula_counts_the_comparisons_made(n, g, p):
    """The pairs the design actually compared (its mask, built from the groups and the
    pivots picked from data) times ``t`` equal :func:`dc.cost`."""
    t = 2
    B = dc.simulate_outcomes(n, t, 0.7, np.random.default_rng(11))
    res = dc.crowdc_many(dc.win_matrix(B, t), dc.divisions(n, g, 3, np.random.default_rng(1)),
                         p)
    up = np.triu(np.ones((n, n), bool), 1)
    counted = (res["compared"] & up).sum((1, 2)) * t
    assert counted.tolist() == [dc.cost(n, g, p, t)[0]] * 3
    assert dc.cost_unshared(n, g, p, t) - dc.cost(n, g, p, t)[0] == t * g * p * (p - 1) // 2


def test_noise_free_every_decided_pair_is_ordered_right():
    """Noise-free comparisons decide the order of every pair the design links through
    pivots: items of one group, pivots, and items of different groups whose bracketing
    pivots are themselves ordered (upper pivot of one below the lower pivot of the
    other). CrowDC must order every such pair right; with every item a pivot
    (``p = n/g``) it recovers the whole order exactly."""
    n, g, p, t = 36, 3, 4, 2
    B = dc.simulate_outcomes(n, t, 1.0, np.random.default_rng(12))
    W = dc.win_matrix(B, t)
    groups = dc.divisions(n, g, 5, np.random.default_rng(13))
    res = dc.crowdc_many(W, groups, p, dc.PLACEMENTS)
    for d in range(5):
        s = res["score"][d]
        piv = set(res["pivots"][d].tolist())
        bracket = {}
        for grp in groups[d]:
            pv = sorted(x for x in grp.tolist() if x in piv)   # truth order = index order
            for x in grp.tolist():
                lo = max(q for q in pv if q <= x)
                hi = min(q for q in pv if q >= x)
                bracket[x] = (lo, hi)
        gid = {x: k for k, grp in enumerate(groups[d]) for x in grp.tolist()}
        decided = 0
        for a, b in combinations(range(n), 2):             # truth: b better than a
            if gid[a] == gid[b] or bracket[a][1] < bracket[b][0] or (a in piv and b in piv):
                assert s[b] > s[a], (d, a, b)
                decided += 1
        assert decided > n * (n - 1) // 4
    full = dc.crowdc_many(W, groups, n // g)                 # every item a pivot
    assert np.all(dc.kendall_tau(full["score"]) == 1.0)


def test_replicate_crowdc_small_grid(tmp_path):
    """The experiment end to end on a tiny grid (one claim setting): files, one CSV row per
    setting, the claim's verdict from its rows, the page."""
    import csv
    import json

    from crowdrank.reports.replicate_crowdc_html import write_all
    from crowdrank.validation.studies.replicate_crowdc import run_experiment

    settings = [(24, 1, 0.8, 2, 4), (100, 5, 0.8, 2, 12)]
    s = run_experiment(tmp_path, repeats=2, divisions=2, processes=1, progress=False,
                       settings=settings)
    files = write_all(s, tmp_path)
    rows = list(csv.DictReader(files["csv"].open()))
    assert [(int(r["n"]), int(r["p"])) for r in rows] == [(24, 4), (100, 12)]
    js = json.loads(files["json"].read_text())
    assert js["claim"]["settings"] == 1 and js["claim"]["saving_45_50"] is True
    row = js["rows"][1]
    assert row["comparisons_counted"] == row["comparisons_crowdc"]
    assert js["claim"]["min_tau_ratio"] == pytest.approx(row["tau_ratio"])
    assert 0.5 < row["tau_ratio"] < 1.0            # CrowDC below BTL, far above chance
    assert row["tau_ratio_joint_fit"] > row["tau_ratio"]
    assert "Wang23" in files["html"].read_text()
    # a rerun reuses the cache and gives the same numbers
    s2 = run_experiment(tmp_path, repeats=2, divisions=2, processes=1, progress=False,
                        settings=settings)
    assert s2["rows"][1]["tau_crowdc"] == s["rows"][1]["tau_crowdc"]


def test_replicate_crowdc_cli_errors(tmp_path):
    from crowdrank.models.errors import UsageError
    from crowdrank.validation.studies.replicate_crowdc import parse_settings, run_experiment

    with pytest.raises(UsageError, match="n,t,r,g,p"):
        parse_settings("100,5,0.8")
    with pytest.raises(UsageError, match="divide"):
        run_experiment(tmp_path, repeats=1, divisions=1, processes=1, progress=False,
                       settings=[(25, 5, 0.8, 2, 4)])
    assert len(parse_settings("claim")) == 2


def test_replicate_crowdc_command_line(tmp_path, capsys):
    from crowdrank.reports.cli import main

    out = tmp_path / "rep"
    assert main(["replicate", "crowdc", "--settings", "24,2,0.8,2,4", "--repeats", "1",
                 "--divisions", "2", "--processes", "1", "--out", str(out),
                 "--no-progress"]) == 0
    assert (out / "crowdc.html").exists() and (out / "results.csv").exists()
    assert main(["replicate", "crowdc", "--settings", "24,2", "--out", str(out)]) == 2
    assert main(["replicate", "babyface", "--settings", "claim", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "n,t,r,g,p" in err and "crowdc only" in err


def test_findings_count_the_papers_two_statements():
    from crowdrank.validation.studies.replicate_crowdc import findings

    def row(g, p, v):
        return {"n": 100, "t": 5, "r": 0.8, "g": g, "p": p, "tau_ratio": v}

    rows = [row(2, 4, 0.80), row(2, 8, 0.85), row(2, 12, 0.84),
            row(5, 4, 0.70), row(5, 8, 0.90), row(5, 12, 0.95)]
    f = findings(rows)
    # g = 2 above g = 5 at p = 4 only; p helps monotonically for g = 5 only
    assert f == {"fewer_groups_higher": 1, "g_pairs": 3, "more_pivots_higher": 1,
                 "p_lines": 2}
