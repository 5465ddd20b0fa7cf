"""The Rankings container: validation, layout, rank-breaking, connectivity."""

import numpy as np
import pytest

from crowdrank.models.data import PAD, DataError, Rankings, align_scores, split_ties


def small():
    return Rankings.from_lists(
        [["a", "b", "c"], ["c", "a"], ["b", "d", "a", "c"]], ["u", "v", "u"], source="x.csv",
        lines=[2, 3, 4])


def test_layout_is_per_position_with_padding():
    d = small()
    assert d.items == ("a", "b", "c", "d") and d.workers == ("u", "v")
    assert d.order.shape == (4, 3)  # (K, N)
    np.testing.assert_array_equal(d.order[:, 1], [2, 0, PAD, PAD])
    idx, mask = d.positions()
    assert idx.min() >= 0 and mask.sum() == 3 + 2 + 4
    assert d.k_counts() == {2: 1, 3: 1, 4: 1}
    assert d.as_lists(ids=True)[2] == ["b", "d", "a", "c"]


@pytest.mark.parametrize("ranking,reason", [
    (["a", "a"], "appears twice"),
    (["a"], "at least 2"),
    (["a", " "], "empty item id"),
])
def test_bad_rankings_name_source_line_and_reason(ranking, reason):
    with pytest.raises(DataError) as e:
        Rankings.from_lists([["a", "b"], ranking], ["u", "u"], source="f.csv", lines=[2, 7])
    assert "f.csv" in str(e.value) and "line 7" in str(e.value) and reason in str(e.value)


def test_empty_worker_and_unknown_ids_are_errors():
    with pytest.raises(DataError, match="empty worker"):
        Rankings.from_lists([["a", "b"]], [""])
    with pytest.raises(DataError, match="unknown item"):
        Rankings.from_lists([["a", "z"]], ["u"], items=["a", "b"])


def test_rank_break_gives_all_pairs_in_file_order():
    d = small()
    pairs = d.rank_break()
    assert pairs.n_rankings == d.n_pairs() == 3 + 1 + 6
    assert pairs.K == 2
    got = [tuple(pairs.items[i] for i in r) for r in pairs.as_lists()]
    assert got[:4] == [("a", "b"), ("a", "c"), ("b", "c"), ("c", "a")]
    assert set(got[4:]) == {("b", "d"), ("b", "a"), ("b", "c"), ("d", "a"), ("d", "c"),
                            ("a", "c")}
    np.testing.assert_array_equal(pairs.origin, [0, 0, 0, 1, 2, 2, 2, 2, 2, 2])
    np.testing.assert_array_equal(pairs.worker, [0, 0, 0, 1, 0, 0, 0, 0, 0, 0])


def test_subset_and_seeded_permutation():
    d = small()
    s = d.subset([2, 0])
    assert s.as_lists() == [d.as_lists()[2], d.as_lists()[0]]
    assert d.permuted(3).as_lists() == d.permuted(3).as_lists()
    assert sorted(map(tuple, d.permuted(3).as_lists())) == sorted(map(tuple, d.as_lists()))


def test_connectivity():
    assert small().is_connected()
    d = Rankings.from_lists([["a", "b"], ["c", "d"]], ["u", "u"])
    assert not d.is_connected()
    assert d.summary()["connected"] is False


def test_split_ties_follows_appendix_1_3():
    # a > {b = c} > d  becomes  a > b > d  and  a > c > d
    assert split_ties([["a"], ["b", "c"], ["d"]]) == [["a", "b", "d"], ["a", "c", "d"]]
    assert split_ties([["a"], ["b"]]) == [["a", "b"]]


def test_align_scores_refuses_missing_truth():
    d = small()
    with pytest.raises(DataError, match="no ground-truth"):
        align_scores(d, {"a": 1.0})
    np.testing.assert_array_equal(align_scores(d, {"a": 1, "b": 2, "c": 3, "d": 4}),
                                  [1, 2, 3, 4])


def test_arrays_are_read_only():
    d = small()
    with pytest.raises(ValueError):
        d.order[0, 0] = 3
