"""The CLI shows the project's own input errors as one line (exit 2) and lets program bugs
keep their traceback (reports/cli.py, docs/data.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from crowdrank.models.errors import DataError, InputError, UsageError
from crowdrank.reports import cli


def with_command_raising(monkeypatch, exc):
    """``crowdrank data summary`` whose implementation raises ``exc``."""
    import crowdrank.reports.commands.data as data_cmd

    def boom(args):
        raise exc

    monkeypatch.setattr(data_cmd, "run_summary", boom)


@pytest.mark.parametrize("exc", [DataError("bad line", "f.csv", 3), UsageError("--x bad"),
                                 InputError("bad input"), FileNotFoundError("g.csv: no such file")])
def test_user_errors_are_one_line_exit_2(monkeypatch, capsys, exc):
    with_command_raising(monkeypatch, exc)
    assert cli.main(["data", "summary", "whatever.csv"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("crowdrank data: error: ")
    assert str(exc) in err


@pytest.mark.parametrize("exc", [KeyError("item"), ValueError("shapes disagree"),
                                 TypeError("bug"), IndexError("bug")])
def test_program_bugs_are_not_disguised(monkeypatch, capsys, exc):
    with_command_raising(monkeypatch, exc)
    with pytest.raises(type(exc)):
        cli.main(["data", "summary", "whatever.csv"])
    assert "error:" not in capsys.readouterr().err


def _raised_in(module: str, source: str) -> BaseException:
    """The exception that ``run()`` raises when defined as ``source`` in ``module``."""
    import linecache

    filename = f"<test {module}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {"__name__": module}
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 - a stand-in module
    try:
        scope["run"]()
    except Exception as exc:  # noqa: BLE001 - the exception is the result
        return exc
    raise AssertionError("run() did not raise")


def test_only_the_projects_input_errors_are_one_line():
    # option checks raise UsageError (an InputError): one line
    from crowdrank.models.errors import UsageError
    assert cli.is_user_error(UsageError("--items must be >= 1"))
    # any plain ValueError, wherever it is raised, is a bug and keeps its traceback
    assert not cli.is_user_error(_raised_in(
        "crowdrank.reports.commands.simulate", "def run():\n    raise ValueError('--items bad')\n"))
    assert not cli.is_user_error(_raised_in(
        "crowdrank.reports.commands.simulate", "def run():\n    return int('x')\n"))
    assert not cli.is_user_error(KeyError("item"))


def test_debug_shows_the_traceback_of_user_errors(monkeypatch):
    with_command_raising(monkeypatch, DataError("bad", "f.csv", 1))
    monkeypatch.setenv("CROWDRANK_DEBUG", "1")
    with pytest.raises(DataError):
        cli.main(["data", "summary", "whatever.csv"])


def test_real_user_errors_stay_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("worker,ranking\nu,a>b\nv,a\n")
    for argv, needle in [(["data", "summary", str(bad)], "line 3"),
                         (["data", "summary", str(tmp_path / "nope.csv")], "no such file"),
                         (["simulate", "--items", "0", "--out", str(tmp_path / "s")],
                          "--items must be >= 1")]:
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


def test_the_installed_command_exits_2_on_bad_input_and_1_on_a_bug(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("worker,ranking\nu,a>a\n")
    r = subprocess.run([sys.executable, "-m", "crowdrank.reports.cli", "data", "summary", str(bad)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().endswith("item 'a' appears twice in one ranking")
    code = ("import sys, crowdrank.reports.commands.data as d, crowdrank.reports.cli as c\n"
            "def boom(a): raise KeyError('oops')\n"
            "d.run_summary = boom\n"
            "sys.exit(c.main(['data', 'summary', 'x.csv']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 1 and "Traceback" in r.stderr and "KeyError: 'oops'" in r.stderr


def test_an_audit_with_one_chain_is_refused_in_one_line(capsys):
    # the reference's gate compares chains (split R-hat): one chain has nothing to compare,
    # and the refusal comes before any data are read or any model is compiled
    assert cli.main(["audit", "--chains", "1", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("crowdrank audit: error: --chains 1")
