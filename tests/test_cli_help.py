"""The commands' help (issue 44, item 2): every option has a help line, no help prints
``(default: None)`` or a second default, and ``crowdrank audit --help`` fits in 70 lines
at 80 columns, its method- and model-specific options shown by ``--approx M --help`` and
``--model M --help`` (as ``crowdrank fit --method M --help`` shows M's)."""

from __future__ import annotations

import argparse
import re

import pytest

from crowdrank.inference import methods
from crowdrank.models.registry import PAIR_MODELS
from crowdrank.reports import cli


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")     # argparse wraps at $COLUMNS - 2


def help_of(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main(list(argv) + ["--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def _parsers(parser, path=()):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield path + (name,), sub
                yield from _parsers(sub, path + (name,))


def test_every_option_of_every_command_has_a_help_line():
    missing = [(path, a.option_strings or a.dest)
               for path, p in _parsers(cli.build_parser()) for a in p._actions
               if not isinstance(a, argparse._SubParsersAction)
               and (not a.help or a.help == argparse.SUPPRESS)]
    assert missing == []


def _help_lines():
    yield ()
    for path, _ in _parsers(cli.build_parser()):
        yield path
    for m in methods.REGISTRY:
        yield ("fit", "--method", m)
    for m in methods.approximations():
        yield ("audit", "--approx", m)
    for m in PAIR_MODELS:
        yield ("audit", "--model", m)
        yield ("fit", "--model", m)


def test_no_help_prints_a_none_or_a_second_default(capsys):
    for argv in _help_lines():
        text = help_of(argv, capsys)
        assert "(default: None)" not in text, argv
        flat = " ".join(text.split())
        assert not re.search(r"default: [^()]*\) \(default:", flat), argv


def test_audit_help_is_at_most_70_lines(capsys):
    text = help_of(["audit"], capsys)
    assert len(text.splitlines()) <= 70, text
    # the approximations are not listed one by one: crowdrank fit --help does that
    flat = " ".join(text.split())
    assert "pathfinder" not in text and "crowdrank fit --help lists them" in flat
    # nor the pair-table models' options, until --model names one
    assert "--covariates" not in text and "--model M --help" in flat
    assert "--covariates" in help_of(["audit", "--model", "contextual-bt"], capsys)


def test_audit_approx_help_shows_what_the_audit_runs_it_with(capsys):
    assert "--bootstrap" not in help_of(["audit"], capsys)
    text = help_of(["audit", "--approx", "bootstrap"], capsys)
    assert "--approx bootstrap:" in text and "--bootstrap B" in text
    text = help_of(["audit", "--approx", "ep,online"], capsys)
    assert "--approx ep:" in text and "--approx online:" in text
    assert "ep_passes=" in text and "taylor=paper" in text


def test_fit_nuts_help_offers_the_sampler_settings_without_python(capsys):
    from crowdrank.inference.nuts.config import NutsConfig

    text = help_of(["fit", "--method", "nuts"], capsys)
    section = text.split("--method nuts:", 1)[1]
    for name in NutsConfig.fields():
        if name != "seed":                 # the fit's own --seed
            assert "--" + name.replace("_", "-") in section, name
    assert "Python" not in text and "Posterior" not in text
