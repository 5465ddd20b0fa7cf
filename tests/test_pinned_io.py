"""Readers name the *physical* line of bad input, counting blank lines and comments.

docs/design.md, Data: an error names the file, the line and the reason. The line a user opens in
an editor is the physical line, so blank lines (skipped and counted), PrefLib comment
lines, CRLF endings and a byte-order mark must not shift it. Every file below has its bad
line after some of those; the expected line number is found by searching the text for a
marker, not typed in, so the test data can be edited without recounting.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crowdrank.models.data import DataError
from crowdrank.models.io import (
    iter_rankings_chunks,
    read_gold,
    read_rankings,
    read_truth,
    read_truth_scores,
    read_worker_truth,
)


def write(tmp_path: Path, name: str, lines: list[str], *, crlf=False, bom=False) -> Path:
    p = tmp_path / name
    text = ("\r\n" if crlf else "\n").join(lines) + ("\r\n" if crlf else "\n")
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return p


def line_of(lines: list[str], marker: str) -> int:
    """1-based physical line of the only line containing ``marker``."""
    hits = [i + 1 for i, s in enumerate(lines) if marker in s]
    assert len(hits) == 1, hits
    return hits[0]


def assert_line(exc: DataError, path: Path, line: int, reason: str):
    assert exc.line == line, f"named line {exc.line}, the bad line is {line}: {exc}"
    assert exc.source == str(path)
    assert str(exc).startswith(f"{path}, line {line}: ")
    assert reason in str(exc)


RANKINGS = ["worker,ranking", "u1,a>b>c", "", "u2,b>c", "   ", "", "u1,c>a", "",
            "u3,a>b>a", "u2,a>c"]


@pytest.mark.parametrize("crlf, bom", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("fast", [True, False])
def test_rankings_csv_item_twice_after_blank_lines(tmp_path, crlf, bom, fast):
    p = write(tmp_path, "r.csv", RANKINGS, crlf=crlf, bom=bom)
    with pytest.raises(DataError) as ei:
        read_rankings(p, fast=fast)
    assert_line(ei.value, p, line_of(RANKINGS, "a>b>a"), "appears twice")


def test_rankings_csv_malformed_and_empty_lines(tmp_path):
    lines = ["worker,ranking,task", "", "u1,a>b,t1", "", "", "u2,a>b", "u1,b>c,t3"]
    p = write(tmp_path, "m.csv", lines)
    with pytest.raises(DataError) as ei:
        read_rankings(p)
    assert_line(ei.value, p, line_of(lines, "u2,a>b"), "malformed line")
    lines = ["worker,ranking", "u1,a>b", "", "", "u2,", "u3,a>b"]
    p = write(tmp_path, "e.csv", lines)
    with pytest.raises(DataError) as ei:
        read_rankings(p)
    assert_line(ei.value, p, line_of(lines, "u2,"), "empty ranking")


def test_skipped_rankings_are_listed_by_physical_line(tmp_path):
    p = write(tmp_path, "s.csv", RANKINGS)
    d = read_rankings(p, invalid="skip")
    n = line_of(RANKINGS, "a>b>a")
    assert d.n_rankings == 4
    assert any(f"line {n}: item 'a' appears twice" in note for note in d.notes)
    assert any("skipped 4 blank line(s)" in note for note in d.notes)


def test_pairwise_csv_bad_label_after_blank_lines(tmp_path):
    lines = ["worker,left,right,label", "u1,a,b,a", "", "", "u2,b,c,c", "", "u1,a,c,x"]
    p = write(tmp_path, "p.csv", lines)
    with pytest.raises(DataError) as ei:
        read_rankings(p)
    assert_line(ei.value, p, line_of(lines, ",x"), "neither left")


def test_wide_csv_item_twice_after_blank_lines(tmp_path):
    lines = ["worker,rank1,rank2,rank3", "u1,a,b,c", "", "u2,b,c,", "", "", "u2,c,c,a"]
    p = write(tmp_path, "w.csv", lines)
    with pytest.raises(DataError) as ei:
        read_rankings(p, fmt="wide-csv")
    assert_line(ei.value, p, line_of(lines, "c,c,a"), "appears twice")


def test_worker_winner_loser_after_blank_lines(tmp_path):
    lines = ["17 268 301", "", "17 301 12", "  ", "", "18 12"]
    p = write(tmp_path, "all_pair.txt", lines)
    with pytest.raises(DataError) as ei:
        read_rankings(p, fmt="worker-winner-loser")
    assert_line(ei.value, p, line_of(lines, "18 12"), "malformed line")


def test_preflib_after_comments_and_blank_lines(tmp_path):
    lines = ["# FILE NAME: x.soc", "# NUMBER ALTERNATIVES: 3", "# ALTERNATIVE NAME 1: one",
             "# ALTERNATIVE NAME 2: two", "# ALTERNATIVE NAME 3: three", "", "2: 1,2,3",
             "", "# a comment in the middle", "1: 3,2,1", "1: 3,7,1"]
    p = write(tmp_path, "x.soc", lines)
    with pytest.raises(DataError) as ei:
        read_rankings(p)
    assert_line(ei.value, p, line_of(lines, "3,7,1"), "unknown alternative")


def test_truth_file_line_numbers(tmp_path):
    lines = ["item,score", "a,1.0", "", "b,2.5", "", "", "c,nan"]
    p = write(tmp_path, "truth.csv", lines)
    with pytest.raises(DataError) as ei:
        read_truth_scores(p)
    assert_line(ei.value, p, line_of(lines, "c,nan"), "NaN")
    lines = ["item,score", "a,1.0", "", "b,2.5", "", "zz,3", "c,0"]
    p = write(tmp_path, "truth2.csv", lines)
    data = read_rankings(write(tmp_path, "r.csv", ["worker,ranking", "u,a>b>c"]))
    with pytest.raises(DataError) as ei:
        read_truth(p, data, strict=True)       # by default an unknown item is a warning
    assert_line(ei.value, p, line_of(lines, "zz,3"), "not in the data")


def test_worker_truth_and_gold_line_numbers(tmp_path):
    lines = ["worker,setting,eta_1,eta_2", "u1,expert,0.9,0.1", "", "", "u2,amateur,0.5,0.6"]
    p = write(tmp_path, "workers.csv", lines)
    with pytest.raises(DataError) as ei:
        read_worker_truth(p)
    assert_line(ei.value, p, line_of(lines, "0.5,0.6"), "sum to 1")
    lines = ["worker,ranking,true_order", "u1,a>b,a>b", "", "u1,b>c,b>c", "", "u2,a>b,a>c"]
    p = write(tmp_path, "gold.csv", lines)
    with pytest.raises(DataError) as ei:
        read_gold(p)
    assert_line(ei.value, p, line_of(lines, "a>b,a>c"), "same items")


def test_streaming_names_the_physical_line(tmp_path):
    lines = ["worker,ranking"] + [f"u{i % 3},a>b>c" for i in range(7)] + ["", ""] + \
            [f"u{i % 3},b>c" for i in range(5)] + ["", "u9,a>a"]
    p = write(tmp_path, "big.csv", lines)
    seen = 0
    with pytest.raises(DataError) as ei:
        for chunk in iter_rankings_chunks(p, chunk_size=4):
            seen += chunk.n_rankings
    assert seen == 12
    assert_line(ei.value, p, line_of(lines, "a>a"), "appears twice")
