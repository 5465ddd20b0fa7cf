"""Posterior state: JSON, atomic save, checkpoint/resume bit for bit, streaming, pass order,
draws as a DataTree, and the ``crowdrank fit --method online`` command."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from crowdrank.inference.online import OnlinePosterior, fit_online, fit_online_stream
from crowdrank.models.data import DataError, Rankings
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

MODELS = ("couple", "crowdbt", "pl", "bt")


@pytest.fixture(scope="module")
def sim():
    return simulate("couple", n_items=20, n_workers=4, tasks_per_worker=30, kmax=4, seed=11)


def _priors(d):
    return Priors.geometric(d.workers, d.K, a0=10, a=6)


def _by_id(post):
    return ({it: (post.mu[i], post.sigma2[i]) for i, it in enumerate(post.items)},
            {w: tuple(post.alpha[i]) for i, w in enumerate(post.workers)}
            if post.alpha is not None else {})


@pytest.mark.parametrize("model", MODELS)
def test_checkpoint_resume_is_bit_for_bit(sim, model, tmp_path):
    d = sim.rankings
    n1 = 47
    full = fit_online(d, model, _priors(d), progress=False)
    first = fit_online(d.subset(np.arange(n1)), model, _priors(d), progress=False)
    first.to_json(tmp_path / "state.json")
    loaded = OnlinePosterior.from_json(tmp_path / "state.json")
    assert np.array_equal(loaded.mu, first.mu) and np.array_equal(loaded.sigma2, first.sigma2)
    rest = fit_online(d.subset(np.arange(n1, d.n_rankings)), model, _priors(d), state=loaded,
                      progress=False)
    assert np.array_equal(rest.mu, full.mu)
    assert np.array_equal(rest.sigma2, full.sigma2)
    if model in ("couple", "crowdbt"):
        assert np.array_equal(rest.alpha, full.alpha)
    assert rest.n_rankings == full.n_rankings == d.n_rankings
    assert not np.array_equal(first.mu, full.mu)


def test_resume_matches_ids_not_indices(sim):
    """The second part comes with its own id order (as a new file would): same numbers."""
    d = sim.rankings
    n1 = 60
    full = fit_online(d, "couple", _priors(d), progress=False)
    first = fit_online(d.subset(np.arange(n1)), "couple", _priors(d), progress=False)
    idx = np.arange(n1, d.n_rankings)
    part = d.subset(idx)
    part2 = Rankings.from_lists(part.as_lists(ids=True), [d.workers[w] for w in part.worker])
    assert part2.items != d.items
    rest = fit_online(part2, "couple", _priors(d), state=first, progress=False)
    assert _by_id(rest) == _by_id(full)


def test_resume_refuses_other_options(sim):
    d = sim.rankings
    first = fit_online(d, "couple", _priors(d), progress=False)
    with pytest.raises(DataError, match="taylor"):
        fit_online(d, "couple", _priors(d), state=first, taylor="full", progress=False)
    with pytest.raises(DataError, match="model"):
        fit_online(d, "pl", _priors(d), state=first, progress=False)


def test_json_layout(sim, tmp_path):
    d = sim.rankings
    for model in MODELS:
        post = fit_online(d, model, _priors(d), progress=False)
        obj = json.loads(post.to_json(tmp_path / f"{model}.json").read_text())
        assert {"model", "method", "algorithm", "options", "n_rankings", "clamped", "items",
                "workers"} <= set(obj)
        assert obj["method"] == "online" and obj["model"] == model
        assert set(obj["items"]) == set(d.items)
        assert set(next(iter(obj["items"].values()))) == {"mu", "sigma2"}
        if model == "couple":
            assert len(obj["workers"][d.workers[0]]["alpha"]) == d.K
        elif model == "crowdbt":
            assert len(obj["workers"][d.workers[0]]["alpha"]) == 2
        else:
            assert obj["workers"] == {}


def test_atomic_save_leaves_old_file_intact(sim, tmp_path, monkeypatch):
    d = sim.rankings
    post = fit_online(d, "pl", _priors(d), progress=False)
    path = tmp_path / "state.json"
    path.write_text("OLD")

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        post.to_json(path)
    assert path.read_text() == "OLD"
    assert os.listdir(tmp_path) == ["state.json"]


def test_bad_state_file_is_a_clear_error(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"model": "couple", "items": {"a": {"mu": 0, "sigma2": -1}}, '
                 '"workers": {}, "n_rankings": 0}')
    with pytest.raises(DataError, match="s.json.*variance"):
        OnlinePosterior.from_json(p)
    p.write_text("{not json")
    with pytest.raises(DataError, match="s.json, line 1"):
        OnlinePosterior.from_json(p)


@pytest.mark.parametrize("model", ["couple", "crowdbt"])
def test_streaming_in_chunks_equals_one_pass(sim, model, tmp_path):
    from crowdrank.models.io import read_rankings, write_rankings
    path = tmp_path / "r.csv"
    write_rankings(sim.rankings, path)
    d = read_rankings(path)
    pri = _priors(d)
    full = fit_online(d, model, pri, progress=False)
    streamed = fit_online_stream(str(path), model, pri, chunk_size=13, K=d.K)
    assert _by_id(streamed) == _by_id(full)
    assert streamed.n_rankings == d.n_rankings


def test_stream_checkpoint_and_resume_after_interruption(sim, tmp_path):
    d = sim.rankings
    pri = _priors(d)
    chunks = [d.subset(np.arange(i, min(i + 10, d.n_rankings)))
              for i in range(0, d.n_rankings, 10)]
    ck = tmp_path / "ck.json"

    def interrupted():
        for i, c in enumerate(chunks):
            if i == 5:
                raise KeyboardInterrupt
            yield c

    with pytest.raises(KeyboardInterrupt):
        fit_online_stream(interrupted(), "couple", pri, checkpoint=str(ck), checkpoint_every=20)
    saved = json.loads(ck.read_text())
    assert saved["options"]["stream"]["consumed"] == 40      # last checkpoint before the stop
    post = fit_online_stream(iter(chunks), "couple", pri, checkpoint=str(ck), resume=True)
    full = fit_online(d, "couple", pri, progress=False)
    assert _by_id(post) == _by_id(full)


def test_shuffle_order_is_seeded_and_keeps_pairs_together(sim):
    d = sim.rankings
    pri = _priors(d)
    a = fit_online(d, "crowdbt", pri, order="shuffle", seed=5, progress=False)
    b = fit_online(d, "crowdbt", pri, order="shuffle", seed=5, progress=False)
    c = fit_online(d, "crowdbt", pri, order="shuffle", seed=6, progress=False)
    assert np.array_equal(a.mu, b.mu) and not np.array_equal(a.mu, c.mu)
    perm = np.random.default_rng(5).permutation(d.n_rankings)
    manual = fit_online(d.subset(perm), "crowdbt", pri, progress=False)
    assert np.array_equal(manual.mu, a.mu)


def test_passes_are_successive_permutations(sim):
    d = sim.rankings
    pri = _priors(d)
    two = fit_online(d, "couple", pri, order="shuffle", seed=3, passes=2, progress=False)
    rng = np.random.default_rng(3)
    p1, p2 = rng.permutation(d.n_rankings), rng.permutation(d.n_rankings)
    s = fit_online(d.subset(p1), "couple", pri, progress=False)
    s = fit_online(d.subset(p2), "couple", pri, state=s, progress=False)
    assert np.array_equal(two.mu, s.mu) and np.array_equal(two.alpha, s.alpha)
    assert two.n_rankings == 2 * d.n_rankings


def test_to_datatree_draws_match_the_approximation(sim):
    d = sim.rankings
    post = fit_online(d, "couple", _priors(d), progress=False)
    dt = post.to_datatree(draws=4000, seed=1, chains=2)
    lam = dt["posterior"]["lambda"]
    assert lam.dims == ("chain", "draw", "item") and list(lam["item"].values) == list(d.items)
    se = np.sqrt(post.sigma2 / 8000)
    assert np.all(np.abs(lam.mean(("chain", "draw")).values - post.mu) < 5 * se)
    eta = dt["posterior"]["eta"]
    assert eta.dims == ("chain", "draw", "worker", "stage")
    assert list(eta["stage"].values) == list(range(1, d.K + 1))
    mean = post.alpha / post.alpha.sum(1, keepdims=True)
    assert np.allclose(eta.mean(("chain", "draw")).values, mean, atol=0.02)
    assert dt.attrs["model"] == "couple"
    cb = fit_online(d, "crowdbt", _priors(d), progress=False).to_datatree(draws=4000, seed=2)
    e = cb["posterior"]["eta"]
    assert e.dims == ("chain", "draw", "worker")
    ab = fit_online(d, "crowdbt", _priors(d), progress=False).alpha
    assert np.allclose(e.mean(("chain", "draw")).values, ab[:, 0] / ab.sum(1), atol=0.02)
    assert "eta" not in fit_online(d, "pl", _priors(d), progress=False).to_datatree(10)[
        "posterior"]


def test_cli_fit_online_writes_posterior_and_items(sim, tmp_path):
    from crowdrank.models.io import write_rankings
    from crowdrank.reports.cli import main
    path = tmp_path / "r.csv"
    write_rankings(sim.rankings, path)
    out = tmp_path / "out"
    rc = main(["fit", str(path), "--model", "couple", "--method", "online", "--taylor", "full",
               "--order", "shuffle", "--seed", "4", "--out", str(out), "--no-progress"])
    assert rc == 0
    obj = json.loads((out / "posterior.json").read_text())
    assert obj["model"] == "couple" and obj["options"]["taylor"] == "full"
    assert obj["n_rankings"] == sim.rankings.n_rankings
    with open(out / "items.csv") as fh:
        rows = list(csv.DictReader(fh))
    mus = [float(r["mu"]) for r in rows]
    assert mus == sorted(mus, reverse=True) and len(rows) == sim.rankings.n_items
    assert {float(r["mu"]) for r in rows} == {v["mu"] for v in obj["items"].values()}
    # resume from the written state on the same file: twice the rankings
    out2 = tmp_path / "out2"
    rc = main(["fit", str(path), "--model", "couple", "--method", "online", "--taylor", "full",
               "--state-in", str(out / "posterior.json"), "--out", str(out2), "--no-progress"])
    assert rc == 0
    assert json.loads((out2 / "posterior.json").read_text())["n_rankings"] == \
        2 * sim.rankings.n_rankings
    # asking other options than the state's is a one-line error, not a traceback
    rc = main(["fit", str(path), "--model", "couple", "--method", "online",
               "--state-in", str(out / "posterior.json"), "--out", str(out2), "--no-progress"])
    assert rc == 2


def test_crowdbt_state_reads_the_priors_beta_not_alpha():
    """Gold priors give CrowdBT its own (a, b) (pair counts); the online state must use them."""
    import numpy as np

    from crowdrank.inference.online.state import OnlinePosterior
    from crowdrank.models.priors import Priors

    p = Priors(("u", "v"), np.array([[4.0, 16.0, 1.0], [2.0, 1.0, 1.0]]), ab=[[30.0, 5.0],
                                                                          [3.0, 2.0]])
    st = OnlinePosterior.from_priors("crowdbt", ["a", "b"], p, workers=["v", "u"])
    np.testing.assert_array_equal(st.alpha, [[3.0, 2.0], [30.0, 5.0]])
    st = OnlinePosterior.from_priors("couple", ["a", "b"], p, workers=["v", "u"], K=3)
    np.testing.assert_array_equal(st.alpha, [[2.0, 1.0, 1.0], [4.0, 16.0, 1.0]])


def test_kernel_arrays_map_data_indices_to_the_state(sim):
    """The kernels read orders and workers in the state's indices: the general gather
    (``-1`` padding kept) and the fresh state's shortcut (identity maps, orders only
    widened) give the same int64 arrays as the formula written out here."""
    from crowdrank.inference.online.api import kernel_arrays

    d = sim.rankings
    rng = np.random.default_rng(0)
    for item_map, worker_map in ((np.arange(d.n_items), np.arange(d.n_workers)),
                                 (rng.permutation(d.n_items) + 3,
                                  rng.permutation(d.n_workers) + 1)):
        ordr, wk, lengths = kernel_arrays(d, item_map, worker_map)
        want = np.array([[item_map[i] if i >= 0 else -1 for i in col] for col in d.order])
        assert (ordr == want).all() and (ordr == -1).sum() == (d.order < 0).sum() > 0
        assert (wk == worker_map[d.worker]).all() and (lengths == d.lengths).all()
        assert ordr.dtype == wk.dtype == lengths.dtype == np.int64
