"""Input gaps met when the tool was tried as a new user would: an empty rankings file, a
file that is not UTF-8, a truth file wider than the data, accuracy on a disconnected
comparison graph. Each is pinned here (docs/data.md states the rules)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from crowdrank.models.data import DataError, Rankings
from crowdrank.models.errors import DataWarning
from crowdrank.models.io import (
    iter_rankings_chunks,
    load_dataset,
    load_truth,
    read_data,
    read_gold,
    read_rankings,
    read_truth,
    read_truth_scores,
)
from crowdrank.reports import cli
from crowdrank.validation.compare import (
    comparison_components,
    pairwise_accuracy,
    pairwise_accuracy_comparable,
)


def put(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def one_line(capsys, argv, *needles):
    rc = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


# ------------------------------------------------------------------ no rows
@pytest.mark.parametrize("name,text,fmt", [
    ("h.csv", "worker,ranking\n", None),
    ("t.csv", "worker,ranking,task\n\n\n", None),
    ("p.csv", "worker,left,right,label\n", None),
    ("w.csv", "worker,rank1,rank2\n", None),
    ("a.txt", "\n", "worker-winner-loser"),
    ("e.soc", "# NUMBER ALTERNATIVES: 3\n", None),
])
def test_a_file_without_rankings_is_an_error_naming_it(tmp_path, name, text, fmt):
    p = put(tmp_path, name, text)
    with pytest.raises(DataError, match="no rankings in the file") as e:
        read_rankings(p, fmt=fmt)
    assert str(p) in str(e.value)
    if not name.endswith(".soc"):  # the line-based formats stream
        with pytest.raises(DataError, match="no rankings"):
            list(iter_rankings_chunks(p, 10, fmt=fmt))


def test_all_rankings_skipped_is_an_error_too(tmp_path):
    p = put(tmp_path, "s.csv", "worker,ranking\nu,a>a\nv,b\n")
    with pytest.raises(DataError, match="all 2 were invalid and skipped"):
        read_rankings(p, invalid="skip")


def test_fit_refuses_a_header_only_file(tmp_path, capsys):
    p = put(tmp_path, "empty.csv", "worker,ranking\n")
    one_line(capsys, ["fit", str(p), "--model", "pl", "--method", "online",
                      "--out", str(tmp_path / "out"), "--no-progress"],
             "empty.csv", "no rankings")
    assert not (tmp_path / "out" / "posterior.json").exists()
    one_line(capsys, ["data", "summary", str(p)], "empty.csv", "no rankings")


def test_empty_gold_file_is_an_error(tmp_path):
    with pytest.raises(DataError, match="no rankings"):
        read_gold(put(tmp_path, "g.csv", "worker,ranking,true_order\n"))


# ------------------------------------------------------------------ not UTF-8
def latin1(tmp_path, name, text):
    p = tmp_path / name
    p.write_bytes(text.encode("latin-1"))
    return p


@pytest.mark.parametrize("name,text,line,fmt", [
    ("r.csv", "worker,ranking\nu,a>b\nv,caf\xe9>b\n", 3, None),
    ("r1.csv", "worker,ranking\nu,\xff>b\n", 2, "rankings-csv"),
    ("p.csv", "worker,left,right,label\nu,a,b,a\nu,\xe9,b,b\n", 3, None),
    ("all_pair.txt", "1 a b\n2 a b\n3 \xe9 b\n", 3, None),
    ("x.soc", "# NUMBER ALTERNATIVES: 2\n# ALTERNATIVE NAME 1: \xe9\n1: 1,2\n", 2, None),
])
def test_non_utf8_names_file_line_and_byte(tmp_path, name, text, line, fmt):
    p = latin1(tmp_path, name, text)
    with pytest.raises(DataError) as e:
        read_rankings(p, fmt=fmt)
    msg = str(e.value)
    assert str(p) in msg and f"line {line}:" in msg and "not UTF-8" in msg, msg
    assert "0xe9" in msg or "0xff" in msg


def test_non_utf8_in_the_header_and_the_cli(tmp_path, capsys):
    p = latin1(tmp_path, "h.csv", "worker,rank\xe9\nu,a>b\n")
    with pytest.raises(DataError, match=r"h\.csv, line 1: not UTF-8 text: byte 0xe9"):
        read_rankings(p)
    p = latin1(tmp_path, "bad.csv", "worker,ranking\n" + "u,a>b\n" * 3000 + "v,\xff>b\n")
    one_line(capsys, ["data", "summary", str(p)], "bad.csv", "line 3002", "0xff",
             "not UTF-8")


def test_non_utf8_truth_file(tmp_path):
    p = latin1(tmp_path, "t.csv", "item,score\na,1\n\xe9,2\n")
    with pytest.raises(DataError, match=r"t\.csv, line 3: not UTF-8"):
        read_truth_scores(p)


def test_utf8_with_bom_and_non_ascii_ids_are_fine(tmp_path):
    p = tmp_path / "r.csv"
    p.write_bytes("\ufeffworker,ranking\nü,café>b\n".encode())
    d = read_rankings(p)
    assert d.items == ("café", "b") and d.workers == ("ü",)


# ------------------------------------------------------------------ truth wider than data
@pytest.fixture
def wide_truth(tmp_path):
    data = put(tmp_path, "r.csv", "worker,ranking\nu,a>b\nv,b>c\n")
    truth = put(tmp_path, "t.csv", "item,score\na,3\nzz,9\nb,2\nc,1\nyy,0\n")
    return data, truth


def test_truth_items_beyond_the_data_are_counted_not_refused(wide_truth):
    data_path, truth_path = wide_truth
    data = read_rankings(data_path)
    t = load_truth(truth_path, data)
    assert t.scores.tolist() == [3.0, 2.0, 1.0] and t.extra == ("zz", "yy")
    assert "2 scored item(s) are not in the data" in t.note
    with pytest.warns(DataWarning, match="2 scored item"):
        assert read_truth(truth_path, data).tolist() == [3.0, 2.0, 1.0]
    with pytest.raises(DataError, match=r"t\.csv, line 3: item 'zz' is not in the data"):
        read_truth(truth_path, data, strict=True)


def test_read_data_reports_extra_truth_items_in_the_notes(wide_truth):
    data_path, truth_path = wide_truth
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read_data reports in the notes, not by warning
        data, truth = read_data(data_path, truth=truth_path)
    assert truth.tolist() == [3.0, 2.0, 1.0]
    assert any("2 scored item(s) are not in the data" in n for n in data.notes)
    with pytest.raises(DataError, match="not in the data"):
        read_data(data_path, truth=truth_path, strict_truth=True)


def test_summary_reports_and_strict_truth_refuses(wide_truth, capsys):
    data_path, truth_path = wide_truth
    assert cli.main(["data", "summary", str(data_path), "--truth", str(truth_path),
                     "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert any("not in the data" in n for n in s["notes"]) and s["truth"]["pairs"] == 2
    one_line(capsys, ["data", "summary", str(data_path), "--truth", str(truth_path),
                      "--strict-truth"], "t.csv", "line 3", "'zz' is not in the data")


def test_items_of_the_data_without_truth_stay_an_error(tmp_path):
    data = read_rankings(put(tmp_path, "r.csv", "worker,ranking\nu,a>b\n"))
    with pytest.raises(DataError, match="no ground-truth score"):
        load_truth(put(tmp_path, "t.csv", "item,score\na,1\nq,2\n"), data)


# ------------------------------------------------------------------ disconnected graphs
def two_islands() -> Rankings:
    # {a, b, c} and {d, e}: no ranking links them; f never ranked
    return Rankings.from_lists([["a", "b"], ["b", "c"], ["e", "d"]], ["u", "u", "v"],
                               items=list("abcdef"))


def test_components_of_the_comparison_graph():
    comp = comparison_components(two_islands())
    assert comp[0] == comp[1] == comp[2] and comp[3] == comp[4]
    assert len({comp[0], comp[3], comp[5]}) == 3


def test_accuracy_counts_only_comparable_pairs():
    data = two_islands()
    truth = np.array([6.0, 5, 4, 3, 2, 1])       # a > b > c > d > e > f
    # within each island the estimates are right; across islands they are backwards
    scores = np.array([1.0, 0.5, 0.0, 9.0, 8.0, 20.0])
    plain = pairwise_accuracy(truth, scores)
    assert plain == pytest.approx(4 / 15)         # cross-island pairs count as wrong
    acc = pairwise_accuracy_comparable(truth, scores, data)
    assert acc == (1.0, 4, 11)                    # 3 + 1 pairs used, 15 - 4 left out
    assert acc.accuracy == pairwise_accuracy(truth, scores,
                                             components=comparison_components(data))
    # on a connected data set nothing is left out and the two agree
    conn = Rankings.from_lists([["a", "b", "c"], ["c", "d"]], ["u", "v"])
    t, s = np.array([4.0, 3, 2, 1]), np.array([1.0, 3, 2, 0])
    r = pairwise_accuracy_comparable(t, s, conn)
    assert r.n_pairs_left_out == 0 and r.n_pairs_used == 6
    assert r.accuracy == pytest.approx(pairwise_accuracy(t, s))


def test_accuracy_with_no_comparable_pair():
    data = Rankings.from_lists([["a", "b"]], ["u"], items=list("abc"))
    r = pairwise_accuracy_comparable([1.0, 1.0, 0.0], [0.0, 1.0, 2.0], data)
    assert r == (None, 0, 2)
    with pytest.raises(ValueError, match="within a component"):
        pairwise_accuracy([1.0, 1.0, 0.0], [0.0, 1.0, 2.0], components=[0, 0, 1])


@pytest.mark.realdata
def test_preflib_dots_accuracy_leaves_out_cross_file_pairs(shared_datasets):
    data, truth = load_dataset("preflib-dots")
    r = pairwise_accuracy_comparable(truth, truth, data)
    # 4 files of 4 alternatives: 6 ordered pairs within each file; across files only the
    # pairs whose dot counts differ are pairs at all
    assert r.accuracy == 1.0 and r.n_pairs_used == 24 and r.n_pairs_left_out > 0
