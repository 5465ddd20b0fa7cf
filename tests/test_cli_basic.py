"""The crowdrank CLI basics: --help everywhere, one-line errors, simulate -> data summary."""

from __future__ import annotations

import json

import pytest

from crowdrank.models.io import read_gold, read_rankings, read_truth, read_worker_truth
from crowdrank.models.priors import Priors
from crowdrank.reports import cli


def registered_commands() -> list[str]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return list(sub.choices)


def test_every_registered_command_is_listed_and_the_basics_exist():
    names = registered_commands()
    assert set(names) <= set(cli.COMMANDS)
    assert {"simulate", "data", "story", "fit"} <= set(names)


@pytest.mark.parametrize("name", cli.COMMANDS)
def test_help_on_every_subcommand(name, capsys):
    if name not in registered_commands():
        pytest.skip(f"crowdrank {name} is not written yet")
    with pytest.raises(SystemExit) as e:
        cli.main([name, "--help"])
    assert e.value.code == 0
    assert f"crowdrank {name}" in capsys.readouterr().out


def test_help_on_nested_and_top_level(capsys):
    for argv in (["--help"], ["data", "summary", "--help"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage: crowdrank" in out and "--truth" in out


def one_line_error(argv, capsys, *needles):
    rc = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert rc != 0
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, err
    return err


def test_user_errors_are_one_line(tmp_path, capsys):
    one_line_error(["data", "summary", str(tmp_path / "missing.csv")], capsys, "no such file")
    bad = tmp_path / "bad.csv"
    bad.write_text("worker,ranking\nu,a>b>a\n")
    one_line_error(["data", "summary", str(bad)], capsys, "bad.csv", "line 2",
                   "appears twice")
    good = tmp_path / "good.csv"
    good.write_text("worker,ranking\nu,a>b\n")
    truth = tmp_path / "t.csv"
    truth.write_text("item,score\na,1\nb,nan\n")
    one_line_error(["data", "summary", str(good), "--truth", str(truth)], capsys,
                   "t.csv", "line 3", "NaN")
    one_line_error(["simulate", "--model", "bt", "--kmax", "4", "--out", str(tmp_path / "s")],
                   capsys, "pairwise model")
    one_line_error(["simulate", "--items", "0", "--out", str(tmp_path / "s")], capsys,
                   "--items must be >= 1")
    one_line_error(["story", "--items", "2", "--out", str(tmp_path / "st")], capsys,
                   "n_items")


def test_bad_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["simulate", "--model", "nope", "--out", "x"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_simulate_then_summary(tmp_path, capsys):
    out = tmp_path / "sim"
    rc = cli.main(["simulate", "--model", "couple", "--setting", "expert", "--items", "25",
                   "--workers", "6", "--tasks", "12", "--kmax", "4", "--seed", "3",
                   "--gold", "4", "--out", str(out), "--quiet"])
    assert rc == 0
    capsys.readouterr()
    for f in ("rankings.csv", "truth.csv", "workers.csv", "gold.csv", "simulation.json"):
        assert (out / f).is_file(), f
    data = read_rankings(out / "rankings.csv")
    assert (data.n_rankings, data.n_workers, data.n_items) == (72, 6, 25)
    truth = read_truth(out / "truth.csv", data)
    assert truth.shape == (25,)
    wt = read_worker_truth(out / "workers.csv")
    assert wt.eta.shape == (6, 4) and set(wt.settings) == {"expert"}
    gold, true_order = read_gold(out / "gold.csv")
    assert gold.n_rankings == 24
    pri = Priors.from_gold(gold, 4, true_order=true_order).for_data(data)
    assert pri.alpha.shape == (6, 4)
    meta = json.loads((out / "simulation.json").read_text())
    assert meta["n_rankings"] == 72 and meta["seed"] == 3

    assert cli.main(["data", "summary", str(out / "rankings.csv"), "--truth",
                     str(out / "truth.csv"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["rankings"] == 72 and s["workers"] == 6 and s["items"] == 25
    assert sum(s["k_counts"].values()) == 72 and s["ties_split"] == 0
    assert s["rankings_per_worker"]["min"] == 12 and isinstance(s["connected"], bool)
    assert 0.5 < s["truth"]["first_pair_agreement"] <= 1.0   # experts mostly agree

    assert cli.main(["data", "summary", str(out / "rankings.csv")]) == 0
    text = capsys.readouterr().out
    for word in ("items", "workers", "rankings per worker", "ties split", "connected"):
        assert word in text


def test_simulate_is_seeded(tmp_path):
    for d, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        assert cli.main(["simulate", "--model", "crowdbt", "--setting", "malicious",
                         "--seed", seed, "--out", str(tmp_path / d), "--quiet"]) == 0
    text = {d: (tmp_path / d / "rankings.csv").read_text() for d in "abc"}
    assert text["a"] == text["b"]            # one seed, one data set
    assert text["a"] != text["c"]            # and the seed is used
    assert read_rankings(tmp_path / "a" / "rankings.csv").K == 2


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["babyface", "readlevel", "preflib-dots", "preflib-puzzle"])
def test_summary_of_the_shared_sets_by_name(shared_datasets, name, capsys):
    assert cli.main(["data", "summary", name, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["truth"]["pairwise_agreement"] > 0.5


def test_summary_skip_invalid_counts_what_it_skips(tmp_path, capsys):
    p = tmp_path / "r.csv"
    p.write_text("worker,ranking\nu,a>b\nu,a>b>a\nv,b>c\n")
    assert cli.main(["data", "summary", str(p)]) == 2
    capsys.readouterr()
    assert cli.main(["data", "summary", str(p), "--skip-invalid", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["rankings"] == 2 and any("skipped 1 invalid" in n and "line 3" in n
                                      for n in s["notes"])
