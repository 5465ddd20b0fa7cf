"""Readers and writers (models.io): every format, every bad input, round trips, real sets."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from crowdrank.models.data import PAD, DataError, Rankings
from crowdrank.models.io import (
    detect_format,
    iter_rankings_chunks,
    load_dataset,
    read_gold,
    read_rankings,
    read_truth,
    read_truth_scores,
    read_worker_truth,
    write_gold,
    write_pairwise,
    write_rankings,
    write_truth,
    write_worker_truth,
)
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate


def put(tmp_path, name: str, text: str):
    p = tmp_path / name
    p.write_text(text)
    return p


def bad(path, reason: str, line: int | None, **kw):
    """Reading ``path`` must fail naming the file, the line and the reason."""
    with pytest.raises(DataError) as e:
        read_rankings(path, **kw)
    msg = str(e.value)
    assert str(path) in msg, msg
    if line is not None:
        assert f"line {line}:" in msg, msg
    assert reason in msg, msg
    return e.value


# ------------------------------------------------------------------ rankings CSV
def test_rankings_csv_basic_with_task_and_whitespace(tmp_path):
    p = put(tmp_path, "r.csv", "worker,ranking,task\nu, a > b >c ,t1\nv,c>a,t2\nu,b>d>a>c,t3\n")
    d = read_rankings(p)
    assert d.items == ("a", "b", "c", "d") and d.workers == ("u", "v")
    assert d.as_lists(ids=True) == [["a", "b", "c"], ["c", "a"], ["b", "d", "a", "c"]]
    assert list(d.task) == ["t1", "t2", "t3"] and d.ties_split == 0 and d.notes == ()
    assert detect_format(p) == "rankings-csv"


def test_rankings_csv_column_order_free_and_no_task(tmp_path):
    d = read_rankings(put(tmp_path, "r.csv", "ranking,worker\nx>y,w\n"))
    assert d.task is None and d.as_lists(ids=True) == [["x", "y"]] and d.workers == ("w",)


def test_ties_are_split_counted_and_mapped_to_their_source(tmp_path):
    p = put(tmp_path, "t.csv", "worker,ranking\nu,a>b=c>d\nu,a>b\nv,x=y>z=w\n")
    d = read_rankings(p)
    assert d.as_lists(ids=True) == [["a", "b", "d"], ["a", "c", "d"], ["a", "b"],
                                    ["x", "z"], ["x", "w"], ["y", "z"], ["y", "w"]]
    assert d.ties_split == 2
    assert d.origin.tolist() == [0, 0, 1, 2, 2, 2, 2]
    assert any("split 2 tied" in n for n in d.notes)


def test_blank_lines_are_skipped_and_counted(tmp_path):
    d = read_rankings(put(tmp_path, "b.csv", "worker,ranking\nu,a>b\n\n,\nv,b>a\n"))
    assert d.n_rankings == 2 and any("skipped 2 blank" in n for n in d.notes)


@pytest.mark.parametrize("body,line,reason", [
    ("u,a>b\nu,a>b>a\n", 3, "item 'a' appears twice"),
    ("u,a\n", 2, "at least 2 items"),
    ("u,a=b\n", 2, "at least 2 items (after splitting ties)"),
    ("u,a>>b\n", 2, "empty item id"),
    ("u,a>b>\n", 2, "empty item id"),
    ("u,a>b=\n", 2, "empty item id"),
    (",a>b\n", 2, "empty worker id"),
    ("u,\n", 2, "empty ranking"),
    ("u,a>b,extra\n", 2, "malformed line: expected 2 fields"),
    ("u\n", 2, "malformed line"),
    ("u,a>b=a\n", 2, "appears twice"),
])
def test_rankings_csv_bad_input(tmp_path, body, line, reason):
    bad(put(tmp_path, "bad.csv", "worker,ranking\n" + body), reason, line)


@pytest.mark.parametrize("header,reason", [
    ("worker,ranking,score", "unexpected column 'score'"),
    ("worker,ranking,ranking", "appears twice"),
])
def test_rankings_csv_wrong_header(tmp_path, header, reason):
    bad(put(tmp_path, "h.csv", header + "\nu,a>b\n"), reason, 1, fmt="rankings-csv")


def test_unrecognised_header_and_empty_file(tmp_path):
    bad(put(tmp_path, "h.csv", "who,what\nu,a>b\n"), "cannot tell the format", 1)
    bad(put(tmp_path, "e.csv", ""), "empty file", 1, fmt="rankings-csv")
    bad(put(tmp_path, "h2.csv", "worker,task\nu,t\n"), "lacks column", 1,
        fmt="rankings-csv")


def test_empty_task_id_is_an_error(tmp_path):
    bad(put(tmp_path, "t.csv", "worker,ranking,task\nu,a>b,\n"), "empty task id", 2)
    bad(put(tmp_path, "u.csv", "worker,ranking,task\nv,b>a,t\nu,a>b\n"),
        "malformed line: expected 3 fields", 3)


def test_fixed_universe(tmp_path):
    p = put(tmp_path, "r.csv", "worker,ranking\nu,a>b\n")
    d = read_rankings(p, items=["z", "a", "b"])
    assert d.items == ("z", "a", "b") and d.summary()["items_never_ranked"] == 1
    bad(p, "unknown item id 'a'", 2, items=["b", "c"])
    bad(p, "unknown worker id 'u'", 2, worker_ids=["v"])


def test_invalid_skip_counts_and_lists(tmp_path):
    p = put(tmp_path, "s.csv", "worker,ranking\nu,a>b\nu,a>a\nu,c\nv,b>c\n")
    d = read_rankings(p, invalid="skip")
    assert d.n_rankings == 2
    note = next(n for n in d.notes if "invalid" in n)
    assert "skipped 2 invalid" in note and "line 3" in note and "line 4" in note
    with pytest.raises(ValueError):
        read_rankings(p, invalid="ignore")


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_rankings(tmp_path / "nope.csv")
    with pytest.raises(IsADirectoryError):
        read_rankings(tmp_path)


# ------------------------------------------------------------------ pairwise CSV
def test_pairwise_csv_crowdkit_convention(tmp_path):
    p = put(tmp_path, "p.csv", "worker,left,right,label\nu,a,b,a\nu,a,b,b\nv,c,a,a\n")
    assert detect_format(p) == "pairwise-csv"
    d = read_rankings(p)
    assert d.as_lists(ids=True) == [["a", "b"], ["b", "a"], ["a", "c"]] and d.K == 2


@pytest.mark.parametrize("body,reason", [
    ("u,a,b,c\n", "label 'c' is neither left"),
    ("u,a,a,a\n", "appears twice"),
    ("u,,b,b\n", "empty item id"),
    (",a,b,a\n", "empty worker id"),
    ("u,a,b\n", "malformed line"),
])
def test_pairwise_csv_bad_input(tmp_path, body, reason):
    bad(put(tmp_path, "p.csv", "worker,left,right,label\n" + body), reason, 2)


def test_pairwise_round_trip(tmp_path):
    d = read_rankings(put(tmp_path, "r.csv", "worker,ranking\nu,a>b>c\nv,c>a\n")).rank_break()
    back = read_rankings(write_pairwise(d, tmp_path / "p.csv"))
    assert back.as_lists(ids=True) == d.as_lists(ids=True)
    with pytest.raises(DataError, match="rank_break"):
        write_pairwise(read_rankings(tmp_path / "r.csv"), tmp_path / "x.csv")


# ------------------------------------------------------------------ wide CSV, worker-winner-loser
def test_wide_csv_with_short_rows(tmp_path):
    p = put(tmp_path, "w.csv", "worker,rank1,rank2,rank3\n1,3,1,2\n2,4,5,\n")
    assert detect_format(p) == "wide-csv"
    assert read_rankings(p).as_lists(ids=True) == [["3", "1", "2"], ["4", "5"]]
    bad(put(tmp_path, "w2.csv", "worker,rank1,rank2,rank3\n1,3,,2\n"), "empty item id", 2)
    bad(put(tmp_path, "w3.csv", "worker,rank1,rank3\n1,3,2\n"), "rank1, rank2", 1,
        fmt="wide-csv")
    bad(put(tmp_path, "w4.csv", "worker,rank1,rank2,x\n1,3,2,1\n"), "wide-csv header", 1,
        fmt="wide-csv")


def test_worker_winner_loser(tmp_path):
    p = put(tmp_path, "all_pair.txt", "1 10 20\r\n2 20 10\r\n\r\n3 5 6\r\n")
    assert detect_format(p) == "worker-winner-loser"
    d = read_rankings(p)
    assert d.as_lists(ids=True) == [["10", "20"], ["20", "10"], ["5", "6"]]
    assert any("skipped 1 blank" in n for n in d.notes)
    bad(put(tmp_path, "x.txt", "1 10 20\n2 20\n"), "malformed line", 2,
        fmt="worker-winner-loser")
    bad(put(tmp_path, "y.txt", "1 10 20\n2 20 20\n"), "appears twice", 2)


def test_undetectable_format(tmp_path):
    bad(put(tmp_path, "x.txt", "hello world\n"), "cannot tell the format", 1)
    with pytest.raises(ValueError, match="unknown format"):
        read_rankings(put(tmp_path, "y.csv", "worker,ranking\nu,a>b\n"), fmt="xml")


# ------------------------------------------------------------------ PrefLib
SOC = """# FILE NAME: t.soc
# DATA TYPE: soc
# NUMBER ALTERNATIVES: 3
# ALTERNATIVE NAME 1: apple
# ALTERNATIVE NAME 2: pear
# ALTERNATIVE NAME 3: fig
3: 1,2,3
1: 3,1,2
"""


def test_preflib_soc_counts_expanded_single_worker(tmp_path):
    p = put(tmp_path, "t.soc", SOC)
    d = read_rankings(p)
    assert d.n_rankings == 4 and d.workers == ("t",) and d.K == 3
    assert d.as_lists(ids=True)[3] == ["3", "1", "2"]
    assert any("no worker ids" in n for n in d.notes)


def test_preflib_options(tmp_path):
    p = put(tmp_path, "t.soc", SOC)
    d = read_rankings(p, workers="per-ranking", item_ids="name")
    assert d.n_workers == 4 and d.workers[0] == "t:1"
    assert d.as_lists(ids=True)[0] == ["apple", "pear", "fig"]
    with pytest.raises(ValueError):
        read_rankings(p, workers="many")


def test_preflib_toc_toi_ties_split(tmp_path):
    toc = "# DATA TYPE: toc\n# NUMBER ALTERNATIVES: 4\n2: 1,{2,3},4\n1: {1,2,3,4}\n"
    # a single tie group of everything has no order: an error (k < 2 after splitting)
    bad(put(tmp_path, "t.toc", toc), "after splitting ties", 4)
    d = read_rankings(put(tmp_path, "u.toc", toc.replace("1: {1,2,3,4}\n", "")))
    assert d.n_rankings == 4 and d.ties_split == 2
    assert d.as_lists(ids=True)[:2] == [["1", "2", "4"], ["1", "3", "4"]]
    toi = "# NUMBER ALTERNATIVES: 5\n1: 5,{1,2}\n1: 2,4\n1: 3\n"
    bad(put(tmp_path, "v.toi", toi), "at least 2 items", 4)
    d = read_rankings(put(tmp_path, "w.toi", toi), skip_short=True)
    assert d.n_rankings == 3 and any("fewer than 2" in n for n in d.notes)


@pytest.mark.parametrize("line,reason", [
    ("1 2 3", "expected 'count: a,b,...'"),
    ("x: 1,2,3", "count 'x' is not an integer"),
    ("0: 1,2,3", "count must be >= 1"),
    ("1: 1,2,{3", "'{' without '}'"),
    ("1: 1,2,", "trailing ','"),
    ("1: 1,7,2", "unknown alternative '7'"),
    ("1: 1,2", "must rank all 3"),
    ("1: 1,{2,3}", "a tie in a strict-order"),
    ("1: 1,2,2", "appears twice"),
])
def test_preflib_bad_lines(tmp_path, line, reason):
    bad(put(tmp_path, "b.soc", SOC + line + "\n"), reason, 9)


# ------------------------------------------------------------------ .mat
def test_mat_reader(tmp_path):
    from scipy.io import savemat

    p = tmp_path / "m.mat"
    savemat(p, {"data": np.array([[1, 3, 1, 2], [2, 2, 1, 0]])})
    assert read_rankings(p).as_lists(ids=True) == [["3", "1", "2"], ["2", "1"]]
    bad(p, "no variable 'x'", None, var="x")
    savemat(p, {"data": np.array([[1, 3, 3, 2]])})
    bad(p, "appears twice", 1)


# ------------------------------------------------------------------ round trips
def test_rankings_round_trip_simulated(tmp_path):
    sim = simulate("couple", n_items=20, n_workers=4, tasks_per_worker=15, seed=3)
    p = write_rankings(sim.rankings, tmp_path / "r.csv")
    back = read_rankings(p)
    d = sim.rankings
    assert back.as_lists(ids=True) == d.as_lists(ids=True)
    assert [back.workers[w] for w in back.worker] == [d.workers[w] for w in d.worker]
    assert list(back.task) == list(d.task)


def test_writer_refuses_ids_that_would_not_round_trip(tmp_path):
    d = Rankings.from_lists([["a>b", "c"]], ["u"])
    with pytest.raises(DataError, match="separator"):
        write_rankings(d, tmp_path / "x.csv")
    d = Rankings.from_lists([[" a", "c"]], ["u"])
    with pytest.raises(DataError, match="white space"):
        write_rankings(d, tmp_path / "x.csv")


def test_ties_round_trip_as_split_rankings(tmp_path):
    d = read_rankings(put(tmp_path, "t.csv", "worker,ranking\nu,a>b=c\n"))
    back = read_rankings(write_rankings(d, tmp_path / "o.csv"))
    assert back.as_lists(ids=True) == d.as_lists(ids=True) and back.ties_split == 0


# ------------------------------------------------------------------ truth
def test_truth_round_trip_exact(tmp_path):
    d = read_rankings(put(tmp_path, "r.csv", "worker,ranking\nu,a>b>c\n"))
    s = np.array([0.1, -1 / 3, 2e-17])
    write_truth(d.items, s, tmp_path / "t.csv")
    np.testing.assert_array_equal(read_truth(tmp_path / "t.csv", d), s)


def test_truth_aligned_with_items(tmp_path):
    d = read_rankings(put(tmp_path, "r.csv", "worker,ranking\nu,a>b\n"))
    t = read_truth(put(tmp_path, "t.csv", "item,score\nb,1\na,2\n"), d)
    assert t.tolist() == [2.0, 1.0]


@pytest.mark.parametrize("body,line,reason", [
    ("a,1\nzz,2\nb,1\n", 3, "item 'zz' is not in the data"),
    ("a,nan\nb,1\n", 2, "NaN or infinite"),
    ("a,inf\nb,1\n", 2, "NaN or infinite"),
    ("a,1\nb,x\n", 3, "'x' is not a number"),
    ("a,1\na,2\nb,1\n", 3, "given twice"),
    (",1\n", 2, "empty item id"),
    ("a,1,2\n", 2, "malformed line"),
])
def test_truth_bad_input(tmp_path, body, line, reason):
    d = read_rankings(put(tmp_path, "r.csv", "worker,ranking\nu,a>b\n"))
    p = put(tmp_path, "t.csv", "item,score\n" + body)
    with pytest.raises(DataError) as e:
        read_truth(p, d, strict=True)  # strict: items beyond the data are refused too
    assert str(p) in str(e.value) and f"line {line}:" in str(e.value)
    assert reason in str(e.value)


def test_truth_wrong_header_and_missing_items(tmp_path):
    d = read_rankings(put(tmp_path, "r.csv", "worker,ranking\nu,a>b\n"))
    with pytest.raises(DataError, match="line 1: header must be item,score"):
        read_truth(put(tmp_path, "t.csv", "id,value\na,1\n"), d)
    with pytest.raises(DataError, match="no ground-truth score"):
        read_truth(put(tmp_path, "t2.csv", "item,score\na,1\n"), d)
    assert read_truth_scores(put(tmp_path, "t3.csv", "item,ground_truth_score\na,3\n")) == \
        {"a": 3.0}


# ------------------------------------------------------------------ worker truth and gold
def test_worker_truth_round_trip_and_errors(tmp_path):
    sim = simulate("couple", n_items=10, n_workers=3, tasks_per_worker=2, seed=1,
                   setting=["expert", "amateur", "spammer"])
    p = write_worker_truth(sim.rankings.workers, sim.settings, sim.eta, tmp_path / "w.csv")
    wt = read_worker_truth(p)
    assert wt.settings == ("expert", "amateur", "spammer")
    np.testing.assert_array_equal(wt.eta, sim.eta)
    np.testing.assert_array_equal(wt.for_data(sim.rankings), sim.eta)
    for body, reason in [("w,x,0.5,0.6\n", "sum to 1"), ("w,x,a,1\n", "not a number"),
                         ("w,x,1.5,-0.5\n", ">= 0"), (",x,1,0\n", "empty worker"),
                         ("w,x,1,0\nw,x,1,0\n", "given twice")]:
        q = put(tmp_path, "bad.csv", "worker,setting,eta_1,eta_2\n" + body)
        with pytest.raises(DataError, match=reason):
            read_worker_truth(q)
    with pytest.raises(DataError, match="line 1"):
        read_worker_truth(put(tmp_path, "h.csv", "worker,eta_1,eta_2\nw,1,0\n"))


def test_gold_round_trip_feeds_priors(tmp_path):
    sim = simulate("couple", n_items=15, n_workers=3, tasks_per_worker=5, gold_per_worker=6,
                   seed=2)
    p = write_gold(sim.gold, sim.gold_true_order, tmp_path / "gold.csv")
    gold, true_order = read_gold(p)
    assert gold.as_lists(ids=True) == sim.gold.as_lists(ids=True)
    ref = Priors.from_gold(sim.gold, 4, true_order=sim.gold_true_order)
    got = Priors.from_gold(gold, 4, true_order=true_order)
    assert got.workers == ref.workers
    np.testing.assert_array_equal(got.alpha, ref.alpha)
    assert (true_order == PAD).sum() == (gold.order == PAD).sum()
    q = put(tmp_path, "g.csv", "worker,ranking,true_order\nu,a>b,a>c\n")
    with pytest.raises(DataError, match="line 2: true_order must hold the same items"):
        read_gold(q)


# ------------------------------------------------------------------ streaming
def test_chunks_have_stable_indices_and_match_the_whole(tmp_path):
    sim = simulate("couple", n_items=30, n_workers=5, tasks_per_worker=21, seed=4)
    p = write_rankings(sim.rankings, tmp_path / "r.csv")
    whole = read_rankings(p)
    chunks = list(iter_rankings_chunks(p, chunk_size=25))
    assert [len(c) for c in chunks] == [25] * 4 + [5]
    for a, b in itertools.pairwise(chunks):
        assert b.items[: len(a.items)] == a.items and b.workers[: len(a.workers)] == a.workers
    last = chunks[-1]
    assert last.items == whole.items and last.workers == whole.workers
    got = [r for c in chunks for r in c.as_lists(ids=True)]
    assert got == whole.as_lists(ids=True)
    assert np.concatenate([c.origin for c in chunks]).tolist() == list(range(len(whole)))


def test_chunks_pairwise_and_errors(tmp_path):
    p = put(tmp_path, "p.csv", "worker,left,right,label\nu,a,b,a\nu,b,c,c\nu,a,c,x\n")
    it = iter_rankings_chunks(p, chunk_size=1)
    assert next(it).as_lists(ids=True) == [["a", "b"]]
    assert next(it).as_lists(ids=True) == [["c", "b"]]
    with pytest.raises(DataError, match="line 4"):
        next(it)
    with pytest.raises(ValueError, match="streaming"):
        list(iter_rankings_chunks(put(tmp_path, "t.soc", SOC), 10))


# ------------------------------------------------------------------ the shared real sets
@pytest.mark.realdata
def test_readlevel(shared_datasets):
    d, truth = load_dataset("readlevel")
    # README: 12,728 pairs / 624 workers / 490 passages; two self-comparisons are skipped
    assert (d.n_rankings, d.n_workers, d.n_items, d.K) == (12_726, 624, 490, 2)
    assert any("skipped 2 invalid" in n for n in d.notes)
    assert truth.shape == (490,) and truth.min() == 1 and truth.max() == 12
    # direction: the winner (judged harder) tends to have the higher level
    dlev = truth[d.order[0]] - truth[d.order[1]]
    assert np.mean(dlev[dlev != 0] > 0) > 0.6


@pytest.mark.realdata
@pytest.mark.parametrize("source", ["mat", "csv"])
def test_babyface(shared_datasets, source):
    d, truth = load_dataset("babyface", source=source)
    # README: 3,074 three-item rankings by 21 workers over 18 items; 6 name an item twice
    assert (d.n_rankings, d.n_workers, d.n_items, d.K) == (3_068, 21, 18, 3)
    assert any("skipped 6 invalid" in n for n in d.notes)
    agree = np.mean(truth[d.order[0]] > truth[d.order[1]])
    assert agree == pytest.approx(0.77, abs=0.01)
    with pytest.raises(DataError, match="appears twice"):
        load_dataset("babyface", source=source, invalid="error")


@pytest.mark.realdata
def test_babyface_mat_and_csv_agree(shared_datasets):
    a, ta = load_dataset("babyface", source="mat")
    b, tb = load_dataset("babyface", source="csv")
    assert a.as_lists(ids=True) == b.as_lists(ids=True)
    assert dict(zip(a.items, ta)) == dict(zip(b.items, tb))


@pytest.mark.realdata
@pytest.mark.parametrize("name,n", [("preflib-dots", 3_183), ("preflib-puzzle", 3_180)])
def test_preflib_mturk(shared_datasets, name, n):
    d, _truth = load_dataset(name)
    assert d.n_rankings == n and d.n_items == 16 and d.K == 4 and d.n_workers == 4
    assert not d.is_connected()  # four separate elections
    # truth: the order by name is the true order, best (fewest) first
    one, t1 = load_dataset(name, part=1)
    assert one.n_items == 4 and list(np.argsort(-t1)) == [0, 1, 2, 3]
    # most voters put alternative 1 first
    first = np.bincount(one.order[0], minlength=4)
    assert first.argmax() == 0
    per, _ = load_dataset(name, part=1, workers="per-ranking")
    assert per.n_workers == per.n_rankings == one.n_rankings


def test_unknown_dataset_and_missing_root(tmp_path):
    with pytest.raises(ValueError, match="unknown data set"):
        load_dataset("sushi")
    with pytest.raises(FileNotFoundError, match="CROWDRANK_DATASETS"):
        load_dataset("readlevel", root=tmp_path)


@pytest.mark.parametrize("text", [
    "worker,ranking,task\nu, a > b >c ,t1\nv,c>a,t2\nu,b>d>a>c,t3\n",
    "ranking,worker\nx>y,w\ny>z>x,v\n",
])
def test_fast_and_careful_readers_agree(tmp_path, text):
    p = put(tmp_path, "r.csv", text)
    a, b = read_rankings(p), read_rankings(p, fast=False)
    assert a.items == b.items and a.workers == b.workers and a.notes == b.notes
    for f in ("order", "lengths", "worker", "origin"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert (a.task is None) == (b.task is None)
    if a.task is not None:
        assert list(a.task) == list(b.task)


def test_fast_reader_agrees_on_simulated_data_and_fixed_universe(tmp_path):
    sim = simulate("couple", n_items=40, n_workers=7, tasks_per_worker=30, seed=9)
    p = write_rankings(sim.rankings, tmp_path / "r.csv")
    universe = list(reversed(sim.rankings.items))
    for kw in ({}, {"items": universe}):
        a, b = read_rankings(p, **kw), read_rankings(p, fast=False, **kw)
        assert a.items == b.items and a.workers == b.workers
        np.testing.assert_array_equal(a.order, b.order)
        np.testing.assert_array_equal(a.worker, b.worker)
        assert list(a.task) == list(b.task)
