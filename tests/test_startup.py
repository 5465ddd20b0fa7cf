"""Start-up cost of the ``crowdrank`` command: a command imports only its own module, the
small online fit imports neither pandas nor any PPL, and the pandas-free pieces that make
that possible (Arrow arrays read off their buffers, ``items.csv`` written by :mod:`csv`)
equal what pyarrow and pandas produce."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from crowdrank.models.io import _arrow
from crowdrank.reports import cli

ROOT = cli.__file__.rsplit("/reports/", 1)[0]
PPL = ("jax", "numpyro", "pytensor", "pymc", "arviz", "matplotlib")


def _modules_after(code: str) -> set[str]:
    """Top-level packages imported by ``code`` run in a fresh interpreter."""
    probe = (f"{code}\nimport sys, json\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_one_command_imports_only_its_module():
    loaded = _modules_after(
        "import sys\nfrom crowdrank.reports import cli\ncli.build_parser('fit')\n"
        "print([m for m in sys.modules if m.startswith('crowdrank.reports.commands.')])")
    assert not loaded & {"pandas", "scipy", "numba", "pyarrow", *PPL}, loaded
    out = subprocess.run(
        [sys.executable, "-c",
         ("import sys\nfrom crowdrank.reports import cli\ncli.build_parser('fit')\n"
          "print(sorted(m for m in sys.modules if m.startswith('crowdrank.reports.commands.')))")],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    commands = {m.rsplit(".", 1)[1] for m in json.loads(out.strip().replace("'", '"'))}
    assert commands & set(cli.COMMANDS) == {"fit"}     # fit's helpers may come along


def test_top_level_parser_imports_no_ppl():
    loaded = _modules_after("from crowdrank.reports import cli\ncli.build_parser()")
    assert not loaded & set(PPL), loaded


def _options(parser) -> dict:
    """Every (sub)command's options with their help text, recursively."""
    import argparse

    found = {}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                found[name] = _options(sub)
        else:
            found[tuple(a.option_strings) or a.dest] = (a.help, a.default, a.nargs,
                                                        repr(a.choices), a.metavar)
    return found


@pytest.mark.parametrize("name", cli.COMMANDS)
def test_a_command_alone_has_the_options_of_the_full_parser(name):
    full = _options(cli.build_parser())
    if name not in full:
        pytest.skip(f"crowdrank {name} is not written yet")
    alone = _options(cli.build_parser(name))
    assert list(alone) == [("-h", "--help"), name]   # no other command registered
    assert alone[name] == full[name]
    assert len(full[name]) > 1


def test_main_parses_only_the_first_word_as_the_command(capsys):
    # a typo or no command at all: the full parser's messages, listing every command
    with pytest.raises(SystemExit) as e:
        cli.main(["fitt"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'fitt'" in err and "'simulate'" in err and "'audit'" in err
    with pytest.raises(SystemExit):
        cli.main([])
    assert "COMMAND" in capsys.readouterr().err


def test_small_online_fit_imports_no_pandas_nor_ppl(tmp_path):
    csv_path = tmp_path / "r.csv"
    rng = np.random.default_rng(0)
    rows = ["worker,ranking,task"]
    for i in range(300):
        k = int(rng.integers(2, 5))
        rows.append(f"w{i % 7},{'>'.join(f'i{j}' for j in rng.permutation(9)[:k])},t{i}")
    csv_path.write_text("\n".join(rows) + "\n")
    pq = tmp_path / "r.parquet"
    for data in (csv_path, pq):
        if data == pq:   # the Parquet twin, written by this package's writer
            from crowdrank.models.io import read_rankings, write_parquet
            write_parquet(read_rankings(csv_path), pq)
        out = tmp_path / f"out_{data.suffix[1:]}"
        loaded = _modules_after(
            "from crowdrank.reports import cli\n"
            f"assert cli.main(['fit', {str(data)!r}, '--model', 'couple', '--method', "
            f"'online', '--out', {str(out)!r}, '--no-progress']) == 0")
        assert not loaded & {"pandas", *PPL}, loaded
        assert (out / "items.csv").exists()


# ------------------------------------------------------------------ Arrow to NumPy
@pytest.mark.parametrize("typ", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(),
                                 pa.uint32(), pa.uint64()])
def test_ints_equal_pyarrows_to_numpy(typ):
    rng = np.random.default_rng(1)
    hi = {8: 100, 16: 30000}.get(typ.bit_width, 10**6)
    values = rng.integers(0, hi, 75)
    null = rng.random(75) < 0.2
    arr = pa.array(values, type=typ, mask=null)
    for s, n in ((0, 75), (3, 40), (9, 1), (13, 0), (7, 61)):   # offsets off byte bounds
        part = arr.slice(s, n)
        got = _arrow.ints(part)
        assert got.dtype == np.int64 and len(got) == n
        np.testing.assert_array_equal(
            got, part.fill_null(pa.scalar(0, typ)).to_numpy(zero_copy_only=False))
        got = _arrow.ints(part, fill=-3)     # nulls exactly where Arrow has them
        np.testing.assert_array_equal(
            got, [-3 if x is None else x for x in part.to_pylist()])
        np.testing.assert_array_equal(_arrow.valid(part),
                                      np.asarray(part.is_valid().to_pylist(), bool))
    chunked = pa.chunked_array([arr.slice(0, 10), arr.slice(10, 5)])
    np.testing.assert_array_equal(_arrow.ints(chunked),
                                  chunked.fill_null(0).to_numpy())


def test_bools_equal_pyarrows_to_numpy():
    rng = np.random.default_rng(2)
    values = rng.random(70) < 0.5
    null = rng.random(70) < 0.25
    arr = pa.array(values, mask=null)
    for s, n in ((0, 70), (5, 33), (11, 1), (1, 0)):
        part = arr.slice(s, n)
        for fill in (False, True):
            want = np.asarray([fill if x is None else x for x in part.to_pylist()], bool)
            np.testing.assert_array_equal(_arrow.bools(part, fill=fill), want)


# ------------------------------------------------------------------ items.csv
def test_items_csv_is_what_pandas_writes(tmp_path):
    from crowdrank.inference.online import OnlinePosterior
    from crowdrank.reports.commands.fit_online import write_items_csv

    items = ["a", "b,c", 'say "x"', "d", "e", "f ", "g"]
    mu = np.array([0.5, -1.25, 0.5, 1e-300, -0.0, 0.0, 2.0 / 3.0])   # ties kept in order
    sigma2 = np.array([1.0, 0.1, 1e-17, 3.0, 2.5, 1.0 / 3.0, 7.0])
    post = OnlinePosterior.__new__(OnlinePosterior)
    post.items, post.mu, post.sigma2 = items, mu, sigma2
    write_items_csv(post, tmp_path / "ours.csv")
    post.items_table().to_csv(tmp_path / "pandas.csv", index=False, float_format="%.17g")
    assert (tmp_path / "ours.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()
