"""Edges of the truth and gold readers found by mutation testing (``make mutate``).

The header and row-length checks must refuse a file on *both* sides of the expected shape
(one field too few and one too many), each header condition on its own, and the truth
reader's default (an unknown item is a warning, pointing at the caller's line) must hold.
The expected behaviour is the readers' docstrings and docs/design.md, Data.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from crowdrank.models.data import DataError
from crowdrank.models.errors import DataWarning
from crowdrank.models.io import (
    read_gold,
    read_rankings,
    read_truth,
    read_truth_scores,
    read_worker_truth,
)


def write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("header", ["item", "item,score,x", "thing,score", "id,score",
                                    "item,foo", "score,item"])
def test_truth_scores_header_each_condition(tmp_path, header):
    p = write(tmp_path, "t.csv", [header, "a,1.0"])
    with pytest.raises(DataError, match="header must be item,score"):
        read_truth_scores(p)


@pytest.mark.parametrize("row", ["a", "a,1.0,2.0"])
def test_truth_scores_row_length_both_sides(tmp_path, row):
    p = write(tmp_path, "t.csv", ["item,score", "b,2.0", row])
    with pytest.raises(DataError, match="expected 2 fields"):
        read_truth_scores(p)


@pytest.mark.parametrize("header", ["worker,setting,eta_1", "worker,set,eta_1,eta_2",
                                    "setting,worker,eta_1,eta_2", "worker,setting,eta_1,eta_3",
                                    "worker,setting,eta_0,eta_1", "worker,setting,eta_2,eta_1",
                                    "worker,zone,eta_1,eta_2", "zworker,setting,eta_1,eta_2"])
def test_worker_truth_header_each_condition(tmp_path, header):
    p = write(tmp_path, "w.csv", [header, "u,x,0.5,0.5"])
    with pytest.raises(DataError, match="header must be worker,setting"):
        read_worker_truth(p)


def test_worker_truth_three_components_and_row_length(tmp_path):
    p = write(tmp_path, "w.csv", ["worker,setting,eta_1,eta_2,eta_3", "u,x,0.5,0.25,0.25"])
    wt = read_worker_truth(p)
    np.testing.assert_array_equal(wt.eta, [[0.5, 0.25, 0.25]])
    for row in ["v,x,0.5,0.5", "v,x,0.5,0.25,0.25,0.0"]:
        p = write(tmp_path, "w2.csv", ["worker,setting,eta_1,eta_2,eta_3",
                                       "u,x,0.5,0.25,0.25", row])
        with pytest.raises(DataError, match="expected 5 fields"):
            read_worker_truth(p)


@pytest.mark.parametrize("row", ["u2,a>b", "u2,a>b,a>b,extra"])
def test_gold_row_length_both_sides(tmp_path, row):
    p = write(tmp_path, "g.csv", ["worker,ranking,true_order", "u1,a>b,a>b", row])
    with pytest.raises(DataError, match="expected 3 fields"):
        read_gold(p)


@pytest.mark.parametrize("ranking,true_order", [("b>c", "a>b"), ("a>b", "b>c"),
                                                ("a>b", "a>b>c"), ("a>b>c", "a>b")])
def test_gold_true_order_must_hold_the_same_items_either_way(tmp_path, ranking, true_order):
    p = write(tmp_path, "g.csv", ["worker,ranking,true_order", f"u1,{ranking},{true_order}"])
    with pytest.raises(DataError, match="same items"):
        read_gold(p)


def test_gold_ties_are_refused_a_single_item_group_is_not(tmp_path):
    p = write(tmp_path, "g.csv", ["worker,ranking,true_order", "u1,a>b>c,b>a>c"])
    gold, true_order = read_gold(p)
    assert gold.n_rankings == 1 and true_order.shape == (3, 1)
    p = write(tmp_path, "g2.csv", ["worker,ranking,true_order", "u1,a=b>c,a>b>c"])
    with pytest.raises(DataError, match="ties are not allowed"):   # (the path has "ties")
        read_gold(p)


def test_read_truth_default_warns_at_the_callers_line(tmp_path):
    data = read_rankings(write(tmp_path, "r.csv", ["worker,ranking", "u,a>b>c"]))
    p = write(tmp_path, "t.csv", ["item,score", "a,1", "b,2", "c,3", "zz,4"])
    with pytest.warns(DataWarning, match="zz|unknown|not in the data") as rec:
        scores = read_truth(p, data)                       # default: not strict
    np.testing.assert_array_equal(scores, [1.0, 2.0, 3.0])
    assert len(rec) == 1 and rec[0].filename == __file__   # stacklevel 2: the caller
    with pytest.raises(TypeError):                         # strict is keyword-only
        read_truth(p, data, True)
    # every item known: no note, no warning at all
    p = write(tmp_path, "t2.csv", ["item,score", "a,1", "b,2", "c,3"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(read_truth(p, data), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 100])
@pytest.mark.parametrize("trailing", [0, 3])
def test_streamed_chunks_count_every_blank_line_once(tmp_path, chunk_size, trailing):
    """Each chunk notes the blank lines read since the previous one: over all chunks they add
    up to the blank lines of the file (counted here from the text), as a whole-file read
    says, including blank lines after the last ranking (a final chunk with no ranking)."""
    import re

    from crowdrank.models.io import iter_rankings_chunks

    lines = (["worker,ranking", "", "u1,a>b>c", "u2,b>c", "", "", "u1,c>a", "u3,a>b", "",
              "u2,b>a>c", "u1,a>c", "", "", "", "u3,c>b"] + [""] * trailing)
    p = write(tmp_path, "s.csv", lines)
    blank = sum(1 for s in lines[1:] if not s.strip())

    def noted(notes):
        got = [int(m.group(1)) for n in notes for m in [re.search(r"skipped (\d+) blank", n)]
               if m]
        assert len(got) <= 1
        return sum(got)

    chunks = list(iter_rankings_chunks(p, chunk_size=chunk_size))
    assert sum(c.n_rankings for c in chunks) == len(lines) - 1 - blank
    assert sum(noted(c.notes) for c in chunks) == blank
    assert noted(read_rankings(p).notes) == blank


def test_a_field_over_the_csv_limit_names_its_physical_line(tmp_path):
    """The csv module's own refusal (a field longer than its 131,072-character limit) is a
    DataError naming the file and the physical line, blank lines and header counted."""
    p = write(tmp_path, "long.csv", ["worker,ranking", "u1,a>b", "", "u3,c>a",
                                     "u2," + "x" * 140_000, "u4,a>c"])
    with pytest.raises(DataError) as ei:
        read_rankings(p)
    assert ei.value.line == 5 and ei.value.source == str(p)
    assert str(ei.value).startswith(f"{p}, line 5: malformed line: field larger than")
