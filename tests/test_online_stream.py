"""``crowdrank fit --method online`` streams by default: the posterior is the in-memory
fit's, bit for bit (the oracle: the same command with ``--in-memory``, which reads the
whole file first, and ``fit_online`` on the whole data), for every online model, chunk
size, input format, prior, pass count and resumed state; and ``--order shuffle`` on a
stream is a uniformly random order (a chi-square test against the uniform distribution
over all permutations) whose fit is ``fit_online`` on that permutation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import crowdrank.models.io as mio
from crowdrank.inference.online import OnlinePosterior, fit_online, fit_online_stream
from crowdrank.models.data import Rankings
from crowdrank.models.io.shuffle import external_shuffle
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate
from crowdrank.reports import cli


def _numbers(post: OnlinePosterior) -> dict:
    out = {"items": {it: (post.mu[i], post.sigma2[i]) for i, it in enumerate(post.items)},
           "clamped": dict(post.clamped), "n": post.n_rankings}
    if post.alpha is not None:
        out["workers"] = {w: tuple(post.alpha[i]) for i, w in enumerate(post.workers)}
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Pairs first, longer rankings later: the stream meets K = 2 before K = 4 (COUPLE's
    worker vectors must grow on the way), and a worker first seen late."""
    tmp = tmp_path_factory.mktemp("stream")
    a = simulate("couple", n_items=25, n_workers=5, tasks_per_worker=12, kmax=2, seed=1)
    b = simulate("couple", n_items=25, n_workers=6, tasks_per_worker=15, kmax=4, seed=2)
    rows = [f"{a.rankings.workers[w]},{'>'.join(r)},x{j}" for j, (w, r) in
            enumerate(zip(a.rankings.worker, a.rankings.as_lists(ids=True)))]
    rows += [f"{b.rankings.workers[w]},{'>'.join(r)},y{j}" for j, (w, r) in
             enumerate(zip(b.rankings.worker, b.rankings.as_lists(ids=True)))]
    csv_path = tmp / "r.csv"
    csv_path.write_text("worker,ranking,task\n" + "\n".join(rows) + "\n")
    pq_path = mio.write_parquet(mio.read_rankings(csv_path), tmp / "r.parquet", row_group=17)
    gold = simulate("couple", n_items=25, n_workers=6, tasks_per_worker=3, kmax=3, seed=5)
    from crowdrank.models.io import write_gold
    g = gold.rankings
    g = Rankings(items=g.items, workers=g.workers, order=g.order, lengths=g.lengths,
                 worker=g.worker, task=np.array([f"g{j}" for j in range(g.n_rankings)],
                                                dtype=object))
    gold_path = write_gold(g, gold.true_order, tmp / "gold.csv")
    prior_file = tmp / "prior.csv"
    prior_file.write_text("worker,a1,a2,a3,a4,a5\n" + "".join(
        f"w{i},{3 + i},2,1,0.5,0.25\n" for i in range(6)))
    return {"csv": csv_path, "parquet": pq_path, "gold": gold_path, "prior": prior_file}


def _fit(tmp_path, name, data, *extra):
    out = tmp_path / name
    assert cli.main(["fit", str(data), "--method", "online", "--out", str(out),
                     "--no-progress", *extra]) == 0
    return OnlinePosterior.from_json(out / "posterior.json")


@pytest.mark.parametrize("model", ["couple", "crowdbt", "pl", "bt"])
@pytest.mark.parametrize("chunk", [1, 7, 100_000])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_stream_equals_in_memory(tmp_path, files, model, chunk, fmt):
    ref = _fit(tmp_path, "mem", files["csv"], "--model", model, "--in-memory")
    got = _fit(tmp_path, "stream", files[fmt], "--model", model, "--chunk-size", str(chunk))
    assert _numbers(got) == _numbers(ref)
    assert got.options["runs"][-1]["stream"] is True


@pytest.mark.parametrize("prior", [["--worker-prior-gold", "gold"],
                                   ["--worker-prior-file", "prior"],
                                   ["--worker-prior", "geometric:a0=4,a=3"],
                                   ["--passes", "3"],
                                   ["--model", "crowdbt", "--worker-prior-gold", "gold"]])
def test_stream_equals_in_memory_priors_and_passes(tmp_path, files, prior):
    extra = [files.get(x, x) if isinstance(x, str) else x for x in prior]
    extra = [str(x) for x in extra]
    ref = _fit(tmp_path, "mem", files["csv"], "--in-memory", *extra)
    got = _fit(tmp_path, "stream", files["csv"], "--chunk-size", "9", *extra)
    assert _numbers(got) == _numbers(ref)


def test_stream_resumes_a_state_like_memory(tmp_path, files):
    first = _fit(tmp_path, "first", files["parquet"], "--chunk-size", "5")
    state = tmp_path / "first" / "posterior.json"
    ref = _fit(tmp_path, "mem", files["csv"], "--in-memory", "--state-in", str(state))
    got = _fit(tmp_path, "stream", files["csv"], "--chunk-size", "5", "--state-in", str(state))
    assert _numbers(got) == _numbers(ref)
    assert got.n_rankings == 2 * first.n_rankings


def test_stream_equals_the_api(files):
    d = mio.read_rankings(files["csv"])
    pri = Priors.geometric(d.workers, d.K)
    full = fit_online(d, "couple", pri, progress=False)
    streamed = fit_online_stream(str(files["csv"]), "couple", pri, chunk_size=4)
    assert _numbers(streamed) == _numbers(full)


# ------------------------------------------------------------------ external shuffle
def _stream(d: Rankings, size: int):
    for s in range(0, d.n_rankings, size):
        yield d.subset(np.arange(s, min(s + size, d.n_rankings)))


def test_external_shuffle_is_a_seeded_permutation(files):
    d = mio.read_rankings(files["csv"])
    out = list(external_shuffle(_stream(d, 13), seed=4, buckets=5))
    origin = np.concatenate([c.origin for c in out])
    assert sorted(origin.tolist()) == list(range(d.n_rankings))
    assert origin.tolist() != list(range(d.n_rankings))
    again = np.concatenate([c.origin for c in external_shuffle(_stream(d, 13), 4, 5)])
    other = np.concatenate([c.origin for c in external_shuffle(_stream(d, 13), 5, 5)])
    assert np.array_equal(origin, again) and not np.array_equal(origin, other)
    merged = [r for c in out for r in c.as_lists(ids=True)]
    whole = d.as_lists(ids=True)
    assert merged == [whole[i] for i in origin]
    assert [c.workers[w] for c in out for w in c.worker] == \
        [d.workers[d.worker[i]] for i in origin]


@pytest.mark.slow
def test_external_shuffle_is_uniform_over_permutations():
    """n = 4 rankings, 3 buckets, 2,400 seeds: every one of the 24 orders ~100 times."""
    d = simulate("couple", n_items=6, n_workers=1, tasks_per_worker=4, seed=0).rankings
    counts = {}
    for seed in range(2400):
        perm = tuple(np.concatenate([c.origin for c in
                                     external_shuffle(_stream(d, 3), seed, 3)]).tolist())
        counts[perm] = counts.get(perm, 0) + 1
    assert set(counts) == set(itertools.permutations(range(4)))
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4
    assert math.isclose(sum(counts.values()), 2400)


def test_shuffled_stream_fit_is_the_fit_of_its_permutation(tmp_path, files):
    d = mio.read_rankings(files["csv"])
    pri = Priors.geometric(d.workers, d.K)
    rng = np.random.default_rng(8)
    chunks = list(external_shuffle(mio.iter_rankings_chunks(files["csv"], 6), rng, 4))
    perm = np.concatenate([c.origin for c in chunks])
    got = fit_online_stream(iter(chunks), "couple", pri)
    ref = fit_online(d.subset(perm), "couple", pri, progress=False)
    assert _numbers(got) == _numbers(ref)
    # the command: seeded, and a new order for each pass
    a = _fit(tmp_path, "a", files["csv"], "--order", "shuffle", "--seed", "3", "--passes", "2")
    b = _fit(tmp_path, "b", files["parquet"], "--order", "shuffle", "--seed", "3",
             "--passes", "2", "--chunk-size", "11")
    c = _fit(tmp_path, "c", files["csv"], "--order", "shuffle", "--seed", "4", "--passes", "2")
    assert _numbers(a)["items"] == _numbers(b)["items"] != _numbers(c)["items"]
    assert [r["order"] for r in a.options["runs"]] == ["shuffle", "shuffle"]


@pytest.mark.parametrize("passes", ["1", "2"])
def test_one_bucket_shuffle_is_the_in_memory_shuffle(tmp_path, files, passes):
    """A small file is shuffled in one bucket: rng.permutation(N), the
    very permutation fit_online draws in memory for the seed (pass after pass)."""
    ref = _fit(tmp_path, "mem", files["csv"], "--in-memory", "--order", "shuffle", "--seed",
               "7", "--passes", passes)
    got = _fit(tmp_path, "stream", files["parquet"], "--order", "shuffle", "--seed", "7",
               "--passes", passes, "--chunk-size", "10")
    assert _numbers(got) == _numbers(ref)
    assert got.options["runs"][-1]["buckets"] == 1


def test_progress_bar_shows_rankings_per_second(files, capsys):
    d = mio.read_rankings(files["csv"])
    fit_online_stream(str(files["csv"]), "couple", Priors.geometric(d.workers, d.K),
                      chunk_size=50, progress=True, total=d.n_rankings)
    err = capsys.readouterr().err
    assert "rankings:" in err and "rk/s" in err and f"/{d.n_rankings} [" in err
