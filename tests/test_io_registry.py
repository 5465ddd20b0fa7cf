"""crowdrank.models.io as a package: the public names, the format registry, the one rankings-CSV
reader (its block path equals its row path), and the registry of shared data sets."""

from __future__ import annotations

import json

import pytest

import crowdrank.models.io as mio
from crowdrank.models.data import DataError
from crowdrank.models.io import formats, rankings_csv
from crowdrank.models.simulate import simulate
from crowdrank.reports import cli

# every public name the single-module models.io offered (functions, classes, constants and
# the names it imported); other code and tests import them from models.io
OLD_PUBLIC_NAMES = [
    "DATASETS", "DataError", "FORMATS", "Iterable", "Iterator", "LINE_FORMATS", "PAD",
    "PREFLIB_EXTS", "Path", "Rankings", "Sequence", "TRUTH_SCORE_COLUMNS", "WorkerTruth",
    "align_scores", "dataclass", "datasets_root", "detect_format", "iter_rankings_chunks",
    "load_dataset", "read_data", "read_gold", "read_rankings", "read_truth",
    "read_truth_scores", "read_worker_truth", "split_ties", "write_gold", "write_pairwise",
    "write_rankings", "write_truth", "write_worker_truth",
]


def test_every_old_public_name_is_still_importable():
    missing = [n for n in OLD_PUBLIC_NAMES if not hasattr(mio, n)]
    assert missing == []
    assert all(hasattr(mio, n) for n in mio.__all__)


def test_format_registry_names_and_detection(tmp_path):
    assert mio.FORMATS == ("rankings-csv", "pairwise-csv", "wide-csv", "worker-winner-loser",
                           "preflib", "mat", "parquet")
    assert mio.LINE_FORMATS == mio.FORMATS[:4]
    assert mio.STREAM_FORMATS == mio.FORMATS[:4] + ("parquet",)
    for f in mio.FORMAT_REGISTRY.values():
        assert f.description and callable(f.parse)
    cases = {"rankings-csv": ("r.csv", "task,ranking,worker\nt,a>b,u\n"),
             "pairwise-csv": ("p.csv", "worker,left,right,label\nu,a,b,a\n"),
             "wide-csv": ("w.csv", "worker,rank1,rank2\nu,a,b\n"),
             "worker-winner-loser": ("all_pair.txt", "1 a b\n"),
             "preflib": ("x.toi", "1: 1,2\n")}
    for name, (fname, text) in cases.items():
        p = tmp_path / fname
        p.write_text(text)
        assert mio.detect_format(p) == name
        assert mio.read_rankings(p).n_rankings == 1


MIXED = ("worker,ranking,task\nu, a > b >c ,t1\nv,c=d>a,t2\n\nu,b>d>a>c,t3\nw,a>a,t4\n"
         "v,e,t5\nx,f>g,t6\n")


@pytest.mark.parametrize("kw", [{"invalid": "skip"}, {"invalid": "skip", "items": list("gfedcba")},
                                {"invalid": "skip", "worker_ids": ["x", "w", "v", "u"]}])
def test_block_path_equals_row_path(tmp_path, monkeypatch, readers, kw):
    p = tmp_path / "r.csv"
    p.write_text(MIXED)
    fast = mio.read_rankings(p, **kw)
    assert fast.ties_split == 1 and any("skipped 2 invalid" in n for n in fast.notes)
    chunks = list(mio.iter_rankings_chunks(p, 2, **kw))
    readers.all_rows_irregular(monkeypatch)
    readers.same(fast, mio.read_rankings(p, **kw))
    for a, b in zip(chunks, mio.iter_rankings_chunks(p, 2, **kw), strict=True):
        readers.same(a, b)


def test_block_path_equals_row_path_on_simulated_data(tmp_path, monkeypatch, readers):
    sim = simulate("couple", n_items=40, n_workers=7, tasks_per_worker=30, seed=9)
    p = mio.write_rankings(sim.rankings, tmp_path / "r.csv")
    a = mio.read_rankings(p)
    small = [r for c in mio.iter_rankings_chunks(p, chunk_size=7) for r in c.as_lists(ids=True)]
    readers.all_rows_irregular(monkeypatch)
    b = mio.read_rankings(p)
    readers.same(a, b)
    assert small == b.as_lists(ids=True) == sim.rankings.as_lists(ids=True)


def test_errors_are_the_row_paths_in_a_large_block(tmp_path):
    rows = [f"w{i % 7},i{i % 50}>i{(i + 1) % 50}>i{(i + 2) % 50}" for i in range(5000)]
    rows[3210] = "w1,i1>i2>i1"
    p = tmp_path / "big.csv"
    p.write_text("worker,ranking\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"big\.csv, line 3212: item 'i1' appears twice"):
        mio.read_rankings(p)
    d = mio.read_rankings(p, invalid="skip")
    assert d.n_rankings == 4999 and "line 3212" in d.notes[-1]


def test_long_rankings_take_the_row_path(tmp_path):
    ids = [f"x{i}" for i in range(rankings_csv.LONG + 10)]
    p = tmp_path / "long.csv"
    p.write_text("worker,ranking\nu," + ">".join(ids) + "\nv,x1>x0\n")
    d = mio.read_rankings(p)
    assert d.K == len(ids) and d.as_lists(ids=True) == [ids, ["x1", "x0"]]
    p.write_text("worker,ranking\nu," + ">".join(ids + ["x3"]) + "\n")
    with pytest.raises(DataError, match="line 2: item 'x3' appears twice"):
        mio.read_rankings(p)


def test_fast_keyword_is_kept_and_harmless(tmp_path, readers):
    p = tmp_path / "r.csv"
    p.write_text("worker,ranking\nu,a>b\n")
    readers.same(mio.read_rankings(p, fast=True), mio.read_rankings(p, fast=False))
    assert formats.REGISTRY["rankings-csv"].line_based


# ------------------------------------------------------------------ data-set registry
def test_dataset_registry_describes_every_set(tmp_path):
    assert mio.DATASETS == ("babyface", "readlevel", "preflib-dots", "preflib-puzzle")
    listed = mio.list_datasets(root=tmp_path)
    assert [d["name"] for d in listed] == list(mio.DATASETS)
    for d in listed:
        assert d["description"] and d["truth"] and d["origin"] and d["as_loaded"]
        assert d["present"] is False and d["missing"]
    with pytest.raises(TypeError, match="unknown options"):
        mio.load_dataset("readlevel", root=tmp_path, part=1)


def test_data_list_command_text_and_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CROWDRANK_DATASETS", str(tmp_path))
    assert cli.main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in mio.DATASETS:
        assert name in out
    assert "MISSING" in out and "description" in out
    assert cli.main(["data", "list", "--json"]) == 0
    sets = json.loads(capsys.readouterr().out)
    from crowdrank.models.io.pair_datasets import PAIR_DATASETS
    assert {d["name"] for d in sets} == set(mio.DATASETS) | set(PAIR_DATASETS)
    assert {d["name"] for d in sets if d["kind"] == "pairs"} == set(PAIR_DATASETS)
    assert not any(d["present"] for d in sets)


@pytest.mark.realdata
def test_data_list_sees_the_shared_sets(shared_datasets, capsys, monkeypatch):
    monkeypatch.setenv("CROWDRANK_DATASETS", str(shared_datasets))
    assert cli.main(["data", "list", "--json"]) == 0
    sets = json.loads(capsys.readouterr().out)
    assert all(d["present"] for d in sets), [d["missing"] for d in sets]
