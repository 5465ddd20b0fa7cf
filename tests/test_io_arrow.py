"""The Arrow readers: the rankings CSV read by ``pyarrow.csv`` gives what the :mod:`csv`
path gives (the oracle: the reader as it was, forced by an unusual header), chunk by
chunk, error by error; the Parquet format reads back what was written, streams by row
group, and refuses every bad input the CSV reader refuses with the same reason, naming
the row; ``data convert`` and ``simulate --format parquet`` write it."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import crowdrank.models.io as mio
from crowdrank.models.data import DataError
from crowdrank.models.io import _arrow, rankings_csv
from crowdrank.models.simulate import simulate
from crowdrank.reports import cli


def test_python_whitespace_set_is_str_strip():
    assert _arrow.PY_WHITESPACE == "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


def _outcome(fn):
    """Everything a read gives: the chunks, or the error's text."""
    try:
        return "ok", fn()
    except DataError as exc:
        return "error", str(exc)


def _compare(path, monkeypatch, readers, chunk_sizes=(1, 3, 7, 1000), **kw):
    got = {}
    for mode in ("arrow", "python"):
        with monkeypatch.context() as m:
            if mode == "python":
                readers.python_only(m)
            got[mode] = [_outcome(lambda: mio.read_rankings(path, **kw))]
            for cs in chunk_sizes:
                got[mode].append(_outcome(lambda cs=cs: list(
                    mio.iter_rankings_chunks(path, cs, **kw))))
    for (ka, a), (kb, b) in zip(got["arrow"], got["python"], strict=True):
        assert ka == kb, (a, b)
        if ka == "error":
            assert a == b
        elif isinstance(a, list):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                readers.same(x, y)
        else:
            readers.same(a, b)
    return got["arrow"][0]


CLEAN = ["u1,a>b>c,t1", "u2,b>c,t2", "u1,c>a>d,t3", "u3,d>b,t4", "u2,a>d>b>c,t5"]
IRREGULAR = {
    "tie": "u4,a=b>c,t6",
    "spaces": "  u4 , a > b >  c ,t6 ",
    "unicode space": "u4,\u00a0a\u2003>b,t6",
    "non-ascii id": "u4,é>ß>c,t6",
    "blank": "",
    "blank fields": ",,",
    "spaces only": "   ",
    "item twice": "u4,a>b>a,t6",
    "one item": "u4,a,t6",
    "empty item": "u4,a>>b,t6",
    "empty worker": " ,a>b,t6",
    "empty task": "u4,a>b, ",
    "empty ranking": "u4, ,t6",
    "too few fields": "u4,a>b",
    "too many fields": "u4,a>b,t6,x",
    "quoted": 'u4,"a>b",t6',
    "quoted line break": 'u4,"a>\nb",t6',
    "NUL": "u4,a\x00>b,t6",
    "lone CR": "u4,a>b,t6\ru5,b>c,t7",
    "long": "u4," + ">".join(f"x{i}" for i in range(70)) + ",t6",
}


@pytest.mark.parametrize("case", sorted(IRREGULAR))
@pytest.mark.parametrize("where", [0, 2, 5])
@pytest.mark.parametrize("small_blocks", [False, True])
def test_arrow_path_equals_csv_path(tmp_path, monkeypatch, readers, case, where,
                                    small_blocks):
    lines = ["worker,ranking,task"] + CLEAN[:where] + [IRREGULAR[case]] + CLEAN[where:] * 3
    p = tmp_path / "r.csv"
    p.write_bytes(("\n".join(lines) + "\n").encode())
    if small_blocks:       # many byte blocks, cut at line ends
        monkeypatch.setattr(rankings_csv, "BYTES", 40)
    _compare(p, monkeypatch, readers)
    _compare(p, monkeypatch, readers, invalid="skip")
    _compare(p, monkeypatch, readers, items=list("dcbaxyzé"), invalid="skip")
    _compare(p, monkeypatch, readers, worker_ids=["u3", "u2", "u1", "u9"], invalid="skip")


@pytest.mark.parametrize("crlf, bom, final_newline, trailing_blank",
                         list(itertools.product([False, True], repeat=4)))
def test_line_ends_bom_and_trailing_blank_lines(tmp_path, monkeypatch, readers, crlf, bom,
                                                final_newline, trailing_blank):
    nl = "\r\n" if crlf else "\n"
    lines = ["worker,ranking"] + [f"u{i % 4},a>b>c{i % 5}" for i in range(40)] + \
        (["", "  ", ""] if trailing_blank else [])
    text = nl.join(lines) + (nl if final_newline else "")
    p = tmp_path / "r.csv"
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    monkeypatch.setattr(rankings_csv, "BYTES", 64)
    kind, data = _compare(p, monkeypatch, readers)
    assert kind == "ok" and data.n_rankings == 40


def test_simulated_file_in_many_blocks(tmp_path, monkeypatch, readers):
    sim = simulate("couple", n_items=60, n_workers=9, tasks_per_worker=80, seed=3)
    p = mio.write_rankings(sim.rankings, tmp_path / "r.csv")
    monkeypatch.setattr(rankings_csv, "BYTES", 1000)
    kind, data = _compare(p, monkeypatch, readers, chunk_sizes=(1, 50, 333))
    assert kind == "ok"
    assert data.as_lists(ids=True) == sim.rankings.as_lists(ids=True)


def test_bad_utf8_names_the_line_on_the_arrow_path(tmp_path, monkeypatch, readers):
    p = tmp_path / "r.csv"
    p.write_bytes(b"worker,ranking\n" + b"u,a>b\n" * 30 + b"u,a\xff>b\n" + b"u,a>b\n" * 5)
    monkeypatch.setattr(rankings_csv, "BYTES", 64)
    kind, msg = _compare(p, monkeypatch, readers)
    assert kind == "error" and ", line 32: not UTF-8" in msg


# ------------------------------------------------------------------ Parquet
def _write_table(path, cols: dict, row_group=None):
    pq.write_table(pa.table(cols), path, row_group_size=row_group)
    return path


def test_parquet_round_trip_streams_by_row_group(tmp_path, readers):
    sim = simulate("couple", n_items=30, n_workers=6, tasks_per_worker=50, seed=2)
    p = mio.write_parquet(sim.rankings, tmp_path / "r.parquet", row_group=70)
    assert pq.ParquetFile(p).num_row_groups == 5
    assert mio.detect_format(p) == "parquet"
    back = mio.read_rankings(p)
    assert back.as_lists(ids=True) == sim.rankings.as_lists(ids=True)
    assert [back.workers[w] for w in back.worker] == \
        [sim.rankings.workers[w] for w in sim.rankings.worker]
    assert list(back.task) == list(sim.rankings.task)
    chunks = list(mio.iter_rankings_chunks(p, 40))
    assert [c.n_rankings for c in chunks] == [40] * 7 + [20]
    assert [r for c in chunks for r in c.as_lists(ids=True)] == back.as_lists(ids=True)
    assert np.concatenate([c.origin for c in chunks]).tolist() == list(range(300))
    csv_path = mio.write_rankings(sim.rankings, tmp_path / "r.csv")
    readers.same(mio.read_rankings(p), _relabel(mio.read_rankings(csv_path), str(p)))
    assert all(c.task is None for c in mio.iter_rankings_chunks(p, 100, keep_task=False))


def _relabel(d, source):
    from crowdrank.models.io.datasets import with_notes
    return with_notes(d, source=source)


PARQUET_BAD = {   # ranking lists, with the reason the CSV reader gives for the same row
    "item twice": (["a", "b", "a"], "u", "item 'a' appears twice in one ranking"),
    "one item": (["a"], "u", "a ranking needs at least 2 items, got 1"),
    "empty list": ([], "u", "empty ranking"),
    "null list": (None, "u", "empty ranking"),
    "empty item": (["a", "", "b"], "u", "empty item id in a ranking"),
    "null item": (["a", None, "b"], "u", "empty item id in a ranking"),
    "empty worker": (["a", "b"], "", "empty worker id"),
    "null worker": (["a", "b"], None, "empty worker id"),
}


@pytest.mark.parametrize("case", sorted(PARQUET_BAD))
@pytest.mark.parametrize("row_group", [None, 2])
def test_parquet_bad_rows_name_the_row(tmp_path, case, row_group):
    ranking, worker, reason = PARQUET_BAD[case]
    rankings = [["a", "b"], ["b", "c", "a"], ["c", "a"], ranking, ["a", "c"]]
    workers = ["u", "v", "u", worker, "v"]
    p = _write_table(tmp_path / "r.parquet", {
        "worker": pa.array(workers, pa.string()),
        "ranking": pa.array(rankings, pa.list_(pa.string()))}, row_group)
    with pytest.raises(DataError) as ei:
        mio.read_rankings(p)
    assert str(ei.value) == f"{p}, line 4: {reason}"
    with pytest.raises(DataError, match="line 4"):
        list(mio.iter_rankings_chunks(p, 1))
    skipped = case.startswith(("empty item", "null item")) or case in ("item twice",
                                                                       "one item")
    if skipped:     # content errors: skipped and counted, as in the CSV reader
        d = mio.read_rankings(p, invalid="skip")
        assert d.n_rankings == 4 and any("line 4" in n for n in d.notes)


def test_parquet_fixed_universe_and_task(tmp_path):
    p = _write_table(tmp_path / "r.parquet", {
        "worker": ["u", "v", "w"], "ranking": [["a", "b"], ["b", "c"], ["c", "a"]],
        "task": ["t1", "t2", ""]})
    with pytest.raises(DataError, match="line 3: empty task id"):
        mio.read_rankings(p)
    q = _write_table(tmp_path / "q.parquet", {
        "worker": ["u", "v", "w"], "ranking": [["a", "b"], ["b", "z"], ["c", "a"]]})
    with pytest.raises(DataError, match="line 2: unknown item id 'z'"):
        mio.read_rankings(q, items=["a", "b", "c"])
    with pytest.raises(DataError, match="line 3: unknown worker id 'w'"):
        mio.read_rankings(q, worker_ids=["u", "v"])
    d = mio.read_rankings(q, items=["c", "b", "a", "z", "never"])
    assert d.items == ("c", "b", "a", "z", "never")


@pytest.mark.parametrize("cols, reason", [
    ({"worker": ["u"], "ranking": [["a", "b"]], "extra": [1]}, "unexpected column 'extra'"),
    ({"worker": ["u"]}, "lacks column(s) ['ranking']"),
    ({"worker": ["u"], "ranking": ["a>b"]}, "must be a list of item ids"),
    ({"worker": [1], "ranking": [["a", "b"]]}, "'worker' must hold strings"),
])
def test_parquet_bad_columns(tmp_path, cols, reason):
    p = _write_table(tmp_path / "r.parquet", cols)
    with pytest.raises(DataError, match=reason.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        mio.read_rankings(p)


def test_not_a_parquet_file(tmp_path):
    p = tmp_path / "r.parquet"
    p.write_text("worker,ranking\nu,a>b\n")
    with pytest.raises(DataError, match="not a Parquet file"):
        mio.read_rankings(p)


def test_data_convert_and_simulate_parquet(tmp_path, capsys):
    p = tmp_path / "r.csv"
    p.write_text("worker,ranking,task\nu,a>b=c>d,t1\n\nv,b>a,t2\nw,c>d>a,t3\n")
    assert cli.main(["data", "convert", str(p), "--out", str(tmp_path / "r.parquet"),
                     "--row-group", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "split 1 tied ranking" in out and "4 rankings ->" in out
    a = mio.read_rankings(p)
    b = mio.read_rankings(tmp_path / "r.parquet")
    assert a.as_lists(ids=True) == b.as_lists(ids=True) and list(a.task) == list(b.task)
    meta = pq.ParquetFile(tmp_path / "r.parquet").metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(sizes) == 4 and max(sizes) <= 2
    assert cli.main(["data", "convert", str(p), "--out", str(tmp_path / "r.csv2")]) == 2
    assert cli.main(["simulate", "--format", "parquet", "--out", str(tmp_path / "s"),
                     "--quiet", "--seed", "4"]) == 0
    assert cli.main(["simulate", "--out", str(tmp_path / "c"), "--quiet", "--seed", "4"]) == 0
    s = mio.read_rankings(tmp_path / "s" / "rankings.parquet")
    c = mio.read_rankings(tmp_path / "c" / "rankings.csv")
    assert s.as_lists(ids=True) == c.as_lists(ids=True) and s.workers == c.workers
    assert cli.main(["data", "summary", str(tmp_path / "s" / "rankings.parquet")]) == 0
