"""PrefLib Dots/Puzzle as pair tables (models.io.pair_datasets) with a difficulty covariate.

Oracles: the rank-based loader of the same files (models.io.datasets, a different code
path: its own item ids, its rank-breaking), the files' published design (info.txt: the
level is read off the alternatives' names), and the ground truth (the true order p1 > p2 >
p3 > p4) for what contextual BT and the domain model say about the real data."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from crowdrank.models.errors import DataError
from crowdrank.models.io import read_pair_table
from crowdrank.models.io.datasets import REGISTRY, load_dataset
from crowdrank.models.io.pair_datasets import PAIR_DATASETS, load_pair_dataset

pytestmark = pytest.mark.skipif(
    any(REGISTRY[n].missing() for n in ("preflib-dots", "preflib-puzzle")),
    reason="the shared PrefLib files are not present")

RANK_SET = {"preflib-dots-pairs": "preflib-dots", "preflib-puzzle-pairs": "preflib-puzzle"}


@pytest.mark.parametrize("name", PAIR_DATASETS)
def test_pairs_are_the_rank_loaders_pairs_by_position(name):
    table, truth = load_pair_dataset(name)
    assert table.items == ("p1", "p2", "p3", "p4") and list(truth) == [-1, -2, -3, -4]
    w, lo = table.winner_loser()
    got = Counter(zip(table.extra["task"].astype(str).tolist(), w.tolist(), lo.tolist()))
    got_by_file = Counter()
    for (task, a, b), n in got.items():
        got_by_file[(task.split(":")[0], a, b)] += n
    want = Counter()
    for part in range(1, 5):
        data, _ = load_dataset(RANK_SET[name], part=part)
        pr = data.rank_break()
        # the rank loader's items are '<title>:<name>'; the position is the name's rank
        names = [it.split(":")[1] for it in data.items]
        pos = {it: sorted(names, key=float).index(nm) for it, nm in zip(data.items, names)}
        stem = f"{'00024' if 'dots' in name else '00025'}-{part:08d}"
        for a, b in zip(pr.order[0], pr.order[1]):
            want[(stem, pos[data.items[a]], pos[data.items[b]])] += 1
    assert got_by_file == want
    assert table.n_pairs == sum(want.values())


def test_levels_follow_the_alternatives_names_not_the_file_order():
    t, _ = load_pair_dataset("preflib-puzzle-pairs")
    task, cat = t.extra["task"].astype(str), t.extra["category"]
    assert set(cat[np.char.startswith(task, "00025-00000001:")]) == {"Puzzle d=11"}
    assert set(cat[np.char.startswith(task, "00025-00000002:")]) == {"Puzzle d=5"}
    d = t.extra["difficulty"].astype(int)
    lv = t.extra["level"].astype(int)
    assert all(set(lv[d == k]) == {v} for k, v in enumerate((5, 7, 9, 11)))
    t, _ = load_pair_dataset("preflib-dots-pairs")
    d, lv = t.extra["difficulty"].astype(int), t.extra["level"].astype(int)
    assert all(set(lv[d == k]) == {v} for k, v in enumerate((9, 7, 5, 3)))


def test_orientation_is_seeded_and_the_outcomes_do_not_depend_on_it():
    a, _ = load_pair_dataset("preflib-dots-pairs", seed=0)
    b, _ = load_pair_dataset("preflib-dots-pairs", seed=0)
    c, _ = load_pair_dataset("preflib-dots-pairs", seed=1)
    assert np.array_equal(a.first, b.first) and not np.array_equal(a.first, c.first)
    for x, y in ((a.winner_loser(), c.winner_loser()),):
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
    assert abs(a.first_won.mean() - 0.5) < 0.02          # a fair coin per pair
    assert a.oriented and "seeded random orientation" in a.source


def test_read_pair_table_takes_the_set_name_and_checks_columns():
    t = read_pair_table("preflib-dots-pairs", ("difficulty", "category"))
    assert t.n_pairs == 6 * 3183
    with pytest.raises(DataError, match="no column 'topic'"):
        read_pair_table("preflib-dots-pairs", ("topic",))
    with pytest.raises(DataError, match="no such file"):
        read_pair_table("preflib-nope-pairs")


@pytest.mark.parametrize("name", PAIR_DATASETS)
def test_contextual_bt_keeps_the_true_order_and_shrinks_differences_with_difficulty(name):
    # real data against the ground truth: at every difficulty the fitted strengths
    # λ + x γ follow the true order, and the gap between the best and the worst item
    # narrows as difficulty rises (the share of pairs in the true order falls in every
    # file: 0.71 -> 0.59 for Dots, 0.71 -> 0.61 for Puzzle), by more than 3 Laplace sds
    from crowdrank.inference.batch.contextual import fit_contextual
    from crowdrank.models.contextual import encode_covariates

    t, truth = load_pair_dataset(name)
    X = encode_covariates(t, [("difficulty", False)]).X
    w, lo = t.winner_loser()
    fit = fit_contextual(w, lo, X, 4)
    for x in range(4):
        s = fit.lam + x * fit.gamma[:, 0]
        assert np.all(np.argsort(-s) == np.argsort(-truth))
    c = np.zeros(8)
    c[[4, 7]] = [1.0, -1.0]                # γ_p1 − γ_p4 (θ = λ (4) | γ (4 × 1))
    slope, sd = c @ np.concatenate([fit.lam, fit.gamma[:, 0]]), np.sqrt(c @ fit.cov @ c)
    assert slope < -3 * sd


@pytest.mark.parametrize("name", PAIR_DATASETS)
def test_domain_model_accuracy_falls_with_difficulty(name):
    from crowdrank.inference.batch.crowdbt_ext import fit_ext_em
    from crowdrank.models.crowdbt_ext import structure

    t, _ = load_pair_dataset(name)
    st = structure(t, "crowdbt-domain", "category")
    fit = fit_ext_em(st, np.array([[5.0, 1.0]]))
    assert fit.converged
    d = {g.split("|")[1]: e for g, e in zip(st.groups, fit.eta)}
    t_d = dict(zip(t.extra["category"], t.extra["difficulty"].astype(int)))
    by_difficulty = [d[c] for c in sorted(d, key=t_d.get)]
    assert np.all(np.diff(by_difficulty) <= 1e-9), by_difficulty
    assert by_difficulty[0] - by_difficulty[-1] > 0.1


def test_fit_command_takes_the_set_name(tmp_path):
    import pandas as pd

    from crowdrank.reports import cli

    out = tmp_path / "ctx"
    assert cli.main(["fit", "preflib-puzzle-pairs", "--model", "contextual-bt", "--method",
                     "map", "--covariates", "difficulty", "--out", str(out)]) == 0
    items = pd.read_csv(out / "items.csv")
    assert list(items["item"]) == ["p1", "p2", "p3", "p4"]        # ranked as the truth
    coef = pd.read_csv(out / "coefficients.csv").set_index("item")
    assert coef.loc["p1", "mean"] < 0 < coef.loc["p4", "mean"]     # the gap narrows
