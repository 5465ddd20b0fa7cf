"""The shared prior object."""

import numpy as np
import pytest

from crowdrank.models.data import DataError, Rankings
from crowdrank.models.priors import Priors, parse_worker_prior, read_worker_prior_file


def test_geometric_profile_matches_the_paper():
    p = Priors.geometric(["u", "v"], K=4, a0=10, a=6)
    np.testing.assert_allclose(p.alpha[0], 10 * 6.0 ** -np.arange(1, 5))
    # E[eta^1] = 1 / (1 + a^-1 + ... + a^-(K-1))  ([Pan18], Sect. 5.3)
    assert p.alpha[0, 0] / p.alpha[0].sum() == pytest.approx(1 / sum(6.0 ** -np.arange(4)))
    np.testing.assert_allclose(p.beta(), p.alpha[:, :2])
    assert parse_worker_prior("geometric:a0=10,a=6", ["u"], 4).alpha[0] == pytest.approx(
        p.alpha[0])


def test_gold_counts_offsets_in_the_true_order():
    gold = Rankings.from_lists([["a", "b", "c"], ["c", "a", "b"], ["b", "a"]],
                               ["u", "u", "v"])
    scores = np.array([3.0, 2.0, 1.0])  # true order a > b > c
    p = Priors.from_gold(gold, K=3, true_scores=scores)
    # u: (a,b,c) offsets 0,0; (c,a,b) offsets 2 then 0. v: (b,a) offset 1
    np.testing.assert_allclose(p.alpha, [[1 + 3, 1 + 0, 1 + 1], [1 + 0, 1 + 1, 1]])
    # CrowdBT counts rank-broken pairs: u gets (a,b),(a,c),(b,c),(a,b) right and (c,a),(c,b)
    # wrong; v gets (b,a) wrong
    np.testing.assert_allclose(p.beta(), [[1 + 4, 1 + 2], [1 + 0, 1 + 1]])
    # on pairwise gold both counts are the same: COUPLE with k=2 is CrowdBT, same prior
    pg = Rankings.from_lists([["a", "b"], ["b", "a"], ["a", "c"]], ["u", "u", "v"])
    q = Priors.from_gold(pg, K=2, true_scores=np.array([3.0, 2.0, 1.0]))
    np.testing.assert_allclose(q.beta(), q.alpha[:, :2])
    np.testing.assert_allclose(q.for_data(pg, K=2).beta(), [[2, 2], [2, 1]])


def test_for_data_reorders_and_checks():
    p = Priors.explicit({"v": [1, 2, 3], "u": [4, 5, 6]})
    d = Rankings.from_lists([["a", "b", "c"]], ["u"])
    np.testing.assert_allclose(p.for_data(d).alpha, [[4, 5, 6]])
    d2 = Rankings.from_lists([["a", "b"]], ["zz"])
    with pytest.raises(DataError, match="no worker prior"):
        p.for_data(d2)
    with pytest.raises(DataError, match="needs 4"):
        p.for_data(d, K=4)


def test_bad_specs_and_files(tmp_path):
    with pytest.raises(DataError, match="unknown worker prior"):
        parse_worker_prior("flat", ["u"], 2)
    with pytest.raises(DataError, match="not a number"):
        parse_worker_prior("geometric:a0=x", ["u"], 2)
    f = tmp_path / "p.csv"
    f.write_text("worker,a,b\nu,1,2\nv,1,-3\n")
    with pytest.raises(DataError) as e:
        read_worker_prior_file(f)
    assert "line 3" in str(e.value) and "p.csv" in str(e.value)
    f.write_text("worker,a,b\nu,1,2\nv,1,nan\n")
    with pytest.raises(DataError, match="finite"):
        read_worker_prior_file(f)
    f.write_text("worker,a,b\nu,1,2\nv,3,4\n")
    np.testing.assert_allclose(read_worker_prior_file(f).beta(), [[1, 2], [3, 4]])
    with pytest.raises(ValueError):
        Priors(("u",), np.array([[0.0, 1.0]]))


def test_build_priors_precedence_and_gold_csv(tmp_path):
    from crowdrank.models.io import write_gold
    from crowdrank.models.priors import build_priors
    from crowdrank.models.simulate import simulate

    sim = simulate("couple", n_items=12, n_workers=3, tasks_per_worker=5, kmax=3,
                   gold_per_worker=8, setting="expert", seed=5)
    path = write_gold(sim.gold, sim.gold_true_order, tmp_path / "gold.csv")
    from_file = build_priors(sim.rankings, gold=path)
    direct = Priors.from_gold(sim.gold, K=3, true_order=sim.gold_true_order)
    np.testing.assert_allclose(from_file.for_data(sim.rankings).alpha,
                               direct.for_data(sim.rankings).alpha)
    # 8 gold tasks of k-1 stages each: the counts add up to the stages answered
    stages = np.bincount(sim.gold.worker, weights=sim.gold.lengths - 1, minlength=3)
    np.testing.assert_allclose(direct.alpha.sum(1), 3 + stages)
    # expert workers mostly report the true item: offset 0 dominates
    assert np.all(direct.alpha[:, 0] > direct.alpha[:, 1])
    geo = build_priors(sim.rankings)
    assert geo.spec.startswith("geometric")
    f = tmp_path / "p.csv"
    f.write_text("worker,a,b,c\nw0,1,1,1\nw1,2,2,2\nw2,3,3,3\n")
    assert build_priors(sim.rankings, worker_prior_file=f, gold=path).spec.startswith("file:")


def test_fit_cli_with_gold_priors(tmp_path):
    from crowdrank.reports.cli import main

    out = tmp_path / "sim"
    assert main(["simulate", "--model", "couple", "--items", "10", "--workers", "3",
                 "--tasks", "6", "--kmax", "3", "--gold", "5", "--seed", "1",
                 "--out", str(out)]) == 0
    assert main(["fit", str(out / "rankings.csv"), "--model", "couple", "--method", "online",
                 "--worker-prior-gold", str(out / "gold.csv"), "--out",
                 str(tmp_path / "fit")]) == 0
    import json
    post = json.loads((tmp_path / "fit" / "posterior.json").read_text())
    assert post["options"]["prior_spec"] == "gold"
