"""``crowdrank fit``'s help, short per method, and an option given to the wrong method.

The parser takes every method's options, but ``crowdrank fit --help`` shows the shared
options and the list of methods, and ``crowdrank fit --method M --help`` the shared options
and M's own, each with M's default. The expected option sets are independent of the help
code: the shared options are spelled out here (what every method takes), a method's own
are its options dataclass's fields. One subprocess runs the installed command as a user
types it; every registered method is checked in process through the same ``main``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import MISSING, fields

import pytest

from crowdrank.inference import methods
from crowdrank.reports.cli import main

#: what every method takes (the CLI's contract, written out independently of the parser)
SHARED = {"-h", "--help", "--model", "--method", "--out", "--seed", "--khat", "--no-progress",
          "--prior-mu", "--prior-sigma", "--worker-prior", "--worker-prior-gold",
          "--worker-prior-file"}
PAIR = {"--covariates", "--category", "--tau", "--bias-sd", "--eta-beta"}
#: 269 lines when every method's group was shown; the short forms stay well below
MAX_LINES = 90


def flag(f) -> str:
    return f.metadata.get("flag", "--" + f.name.replace("_", "-"))


def own_flags(name: str) -> set[str]:
    """The flags of method ``name``'s options; a ``type=bool`` field (on by default, or
    ``None``) is a ``--name``/``--no-name`` pair."""
    out = set()
    for f in fields(methods.get(name).options_class):
        if f.metadata.get("cli", True):
            out.add(flag(f))
            if f.metadata.get("type") is bool:
                out.add("--no-" + flag(f).removeprefix("--"))
    return out


def all_method_flags() -> set[str]:
    return set().union(*(own_flags(n) for n in methods.REGISTRY))


def listed_options(text: str) -> set[str]:
    """The options the help lists: the first column of its entries (two spaces in; help
    continuation lines are indented further)."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"  (-[-\w]+(?:, -[-\w]+)*)(?:\s|$)", line)
        if m:
            out.update(m.group(1).split(", "))
    return out


def help_of(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(["fit", *argv])
    assert e.value.code == 0
    return capsys.readouterr().out


def squeeze(text: str) -> str:
    """``text`` without white space (argparse wraps lines, also at hyphens)."""
    return "".join(text.split())


def test_installed_command_shows_advi_options_only():
    from test_pinned_cli import crowdrank_exe

    proc = subprocess.run([crowdrank_exe(), "fit", "--method", "advi", "--help"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert listed_options(text) == SHARED | own_flags("advi")
    assert {"--max-steps", "--learning-rate", "--elbo-tol", "--psis"} <= listed_options(text)
    assert not {"--chains", "--taylor", "--solver", "--rank", "--paths"} & listed_options(text)
    assert len(text.splitlines()) <= MAX_LINES
    # advi's own default, from its dataclass, not the list of every method's
    steps = next(f.default for f in fields(methods.get("advi").options_class)
                 if f.name == "max_steps")
    assert re.search(rf"--max-steps MAX_STEPS\s+.*?\(default: {steps}\)", text, re.DOTALL)
    assert "2000 for laplace-ppl" not in text


def test_fit_help_lists_the_methods_and_no_method_options(capsys):
    text = help_of(["--help"], capsys)
    assert listed_options(text) - set(methods.REGISTRY) == SHARED
    assert "crowdrank fit --method M --help shows M's options" in text
    for m in methods.REGISTRY.values():
        assert re.search(rf"^  {re.escape(m.name)}\s", text, re.MULTILINE), m.name
        assert squeeze(m.title) in squeeze(text), m.name
    assert len(text.splitlines()) <= MAX_LINES


def test_every_method_help_shows_its_own_options_only(capsys):
    every = all_method_flags()
    for name in methods.REGISTRY:
        text = help_of(["--method", name, "--help"], capsys)
        shown = listed_options(text)
        own = own_flags(name)
        assert shown == SHARED | own, (name, sorted(shown ^ (SHARED | own)))
        assert not (every - own) & shown, name
        assert f"--method {name}: " in text
        assert len(text.splitlines()) <= MAX_LINES, (name, len(text.splitlines()))
        # each option's default is the method's own dataclass default
        for f in fields(methods.get(name).options_class):
            d = f.default if f.default is not MISSING else f.default_factory()
            if f.metadata.get("cli", True) and d is not None and not isinstance(d, bool):
                entry = re.search(rf"^  {re.escape(flag(f))}\b(.*?)(?=^  -|^\S|\Z)", text,
                                  re.MULTILINE | re.DOTALL)
                assert entry and f"(default: {d})" in " ".join(entry.group(1).split()), \
                    (name, f.name)


def test_help_reads_method_and_model_on_either_side_of_help(capsys):
    after = help_of(["--method", "nuts", "--help"], capsys)
    assert help_of(["--help", "--method=nuts"], capsys) == after
    pair = listed_options(help_of(["--help", "--model", "contextual-bt", "--method", "map"],
                                  capsys))
    assert pair == SHARED | own_flags("map") | PAIR


def test_option_of_another_method_is_a_one_line_error(tmp_path, capsys):
    out = str(tmp_path / "o")
    # the check runs before the data are read: a missing file is never reached
    assert main(["fit", "nofile.csv", "--method", "online", "--chains", "2",
                 "--out", out]) == 2
    err = capsys.readouterr().err
    assert "--chains is an option of --method nuts, gibbs, not of --method online" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["fit", "nofile.csv", "--model", "bt", "--method", "map", "--draws", "5",
                 "--out", out]) == 2
    err = capsys.readouterr().err
    assert "--draws is an option of --method nuts, gibbs, advi," in err and "not of --method map" in err


def test_pair_table_option_with_another_model_is_a_one_line_error(tmp_path, capsys):
    """--covariates, --category, --tau, --bias-sd, --eta-beta are read by the pair-table
    models only: given with a rankings model they are an error (even at their default
    value), in fit and in audit, before the data are read."""
    out = str(tmp_path / "o")
    for argv, flags in (
            (["fit", "nofile.csv", "--model", "couple", "--method", "online",
              "--covariates", "x", "--tau", "1.0"], "--covariates, --tau"),
            (["fit", "nofile.csv", "--model", "bt", "--method", "map", "--eta-beta", "5,1"],
             "--eta-beta"),
            (["audit", "nofile.csv", "--model", "crowdbt", "--category", "c",
              "--bias-sd", "2"], "--category, --bias-sd"),
            (["audit", "--model", "all", "--tau", "2"], "--tau")):
        assert main([*argv, "--out", out]) == 2, argv
        err = capsys.readouterr().err
        assert f"{flags}: option(s) of the pair-table models" in err, err
        assert f"not of --model {argv[argv.index('--model') + 1]}" in err
        assert len(err.strip().splitlines()) == 1


def test_pair_table_options_left_out_take_their_defaults():
    from types import SimpleNamespace

    from crowdrank.reports.commands.fit_pairs import DEFAULTS, check_pair_options, resolve

    args = SimpleNamespace(model="crowdbt-bias", covariates=None, category=None, tau=None,
                           bias_sd=3.0, eta_beta=None)
    check_pair_options(args)               # a pair model: every option is its own
    resolve(args)
    assert (args.tau, args.bias_sd, args.eta_beta) == (DEFAULTS["tau"], 3.0, "5,1")
    assert DEFAULTS == {"tau": 1.0, "bias_sd": 1.0, "eta_beta": "5,1"}


def _fit_parser():
    from crowdrank.reports.cli import build_parser

    sub = next(a for a in build_parser("fit")._actions if a.dest == "command")
    return sub.choices["fit"]


def _value(action) -> list[str]:
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(action.choices[-1])]
    return ["3" if action.type in (int, float) else "x"]


def test_own_options_pass_and_left_out_options_keep_the_dataclass_defaults():
    from crowdrank.reports.commands.fit import check_method_options, method_options

    parser = _fit_parser()
    for name, m in methods.REGISTRY.items():
        args = parser.parse_args(["d.csv", "--out", "o", "--method", name])
        assert method_options(m, args) == m.options(), name
        line = ["d.csv", "--out", "o", "--method", name]
        for f in fields(m.options_class):
            if f.metadata.get("cli", True):
                line += [flag(f), *_value(parser.method_actions[f.name])]
        check_method_options(m, parser.parse_args(line))     # no error: all its own


def test_pair_models_nuts_settings_from_the_line_or_the_defaults():
    from crowdrank.reports.commands.fit_pairs import _nuts_kw, _nuts_options

    parser = _fit_parser()
    args = parser.parse_args(["p.csv", "--out", "o", "--model", "contextual-bt",
                              "--method", "nuts", "--chains", "2", "--backend", "pymc"])
    want = methods.get("nuts").options()
    kw = _nuts_kw(args)
    assert (kw["chains"], kw["tune"], kw["draws"]) == (2, want.tune, want.draws)
    assert kw["target_accept"] == want.target_accept
    assert _nuts_options(args).backend == "pymc"
