"""NUTS's defaults live in :class:`NutsConfig` only (issue 44, item 2): every surface that
offers a NUTS option (the ``nuts`` method's options, the audit's configuration and its
command line, ``crowdrank fit --method nuts``, ``crowdrank sbc``, the pair-table audit,
the batched sampler) starts from NutsConfig's value, except the per-command defaults that
are stated once, on purpose, with their reason: :data:`OWN`.

Oracle: ``dataclasses.fields(NutsConfig)``. :func:`surfaces` reads each surface the way
its users meet it (a parsed command line, a signature, a dataclass), and
:func:`mismatches` compares; a planted change on a surface is seen (the last tests).
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from crowdrank.inference import methods
from crowdrank.inference.nuts.config import NutsConfig
from crowdrank.reports import cli
from crowdrank.validation.pipelines import audit_config, sbc

NUTS = {f.name: f.default for f in dataclasses.fields(NutsConfig)}
#: the deliberate per-command defaults, each stated once where the command is defined
OWN = {"audit": {"tune": audit_config.AUDIT_TUNE},
       "audit cli": {"tune": audit_config.AUDIT_TUNE},
       "export cli": {"tune": audit_config.AUDIT_TUNE},
       "sbc cli": {"tune": sbc.DEFAULT_TUNE_DRAWS[0]}}


def _dataclass_defaults(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.name in NUTS}


def _parse(*argv):
    return cli.build_parser(argv[0]).parse_args(list(argv))


def surfaces(nuts_options=None, audit_cls=None) -> dict[str, dict]:
    """``{surface: {NutsConfig field: its default there}}``."""
    from crowdrank.inference.nuts.batched import fit_nuts_batched
    from crowdrank.reports.commands import audit as audit_cmd
    from crowdrank.reports.commands import audit_pairs, export, fit
    from crowdrank.reports.commands import sbc as sbc_cmd

    nuts_options = nuts_options or methods.NutsOptions
    audit_cls = audit_cls or audit_config.AuditConfig
    args = _parse("fit", "data.csv", "--out", "o", "--method", "nuts")
    fitted = fit.method_options(methods.get("nuts"), args).config(seed=0)
    audit = audit_cmd.config_from_args(_parse("audit", "--out", "o"))
    # --model and --sims named: only the NUTS options are left to their defaults
    sbc_cfg = sbc_cmd.config_from_args(_parse("sbc", "--out", "o", "--model", "pl",
                                              "--sims", "100"))
    pairs = audit_pairs.nuts_settings(_parse("audit", "p.csv", "--out", "o",
                                             "--model", "crowdbt-bias"))
    exp = export.nuts_settings(_parse("export", "--out", "o"))
    batched = {k: p.default for k, p in inspect.signature(fit_nuts_batched).parameters.items()
               if k in NUTS}
    return {
        "NutsOptions": _dataclass_defaults(nuts_options),
        "nuts entry (.config())": _dataclass_defaults(nuts_options),
        "fit --method nuts": {k: getattr(fitted, k) for k in NUTS},
        "audit": _dataclass_defaults(audit_cls),
        "audit nuts_options()": {k: v for k, v in dataclasses.asdict(
            audit_cls().nuts_options()).items() if k in NUTS and k != "tune"},
        "audit cli": {k: getattr(audit, k) for k in audit_config.NUTS_FIELDS},
        "sbc": _dataclass_defaults(sbc.SbcConfig),
        "sbc cli": {k: getattr(sbc_cfg, k) for k in ("chains", "tune", "draws",
                                                      "target_accept", "simplex")},
        "audit pair-table cli": pairs,
        "export cli": exp,
        "batched": batched,
    }


def mismatches(found: dict[str, dict]) -> list[str]:
    bad = []
    for surface, defaults in found.items():
        for name, value in defaults.items():
            want = OWN.get(surface, {}).get(name, NUTS[name])
            if surface.startswith("sbc") and name in ("tune", "draws") and value is None:
                continue      # SbcConfig: None = the model's (sbc.NUTS_DEFAULTS)
            if value != want:
                bad.append(f"{surface}: {name} = {value!r}, NutsConfig says {NUTS[name]!r}")
    return bad


def test_every_surface_starts_from_nutsconfig():
    found = surfaces()
    assert mismatches(found) == []
    # the nuts entry offers every NutsConfig field but the fit's own seed
    assert set(found["NutsOptions"]) == set(NUTS) - {"seed"}
    assert set(found["audit cli"]) == set(audit_config.NUTS_FIELDS)


def test_the_deliberate_defaults_are_stated_once():
    assert audit_config.AuditConfig().tune == audit_config.AUDIT_TUNE != NUTS["tune"]
    assert sbc.SbcConfig(model="pl").draws == NUTS["draws"]
    assert sbc.SbcConfig(model="couple-normalized").tune == sbc.NUTS_DEFAULTS[
        "couple-normalized"][0]


def test_the_help_states_the_defaults_the_parser_applies():
    from crowdrank.reports.commands.fit import FitParser

    fit_p = cli.build_parser("fit")._subparsers._group_actions[0].choices["fit"]
    assert isinstance(fit_p, FitParser)
    nuts_help = {a.dest: a.help for a in fit_p.method_help(methods.get("nuts"))}
    for name in ("chains", "tune", "draws", "target_accept", "max_tree_depth"):
        assert f"(default: {NUTS[name]})" in nuts_help[name], name
    audit_p = cli.build_parser("audit")._subparsers._group_actions[0].choices["audit"]
    audit_help = {a.dest: a.help for a in audit_p._actions}
    assert f"(default: {NUTS['chains']})" in audit_help["chains"]
    assert f"(default: {audit_config.AUDIT_TUNE};" in audit_help["tune"]


# ---------------------------------------------------------------- a planted default is seen
def _planted(cls, name, value):
    """``cls`` with the default of field ``name`` changed (metadata kept)."""
    spec = []
    for f in dataclasses.fields(cls):
        default = value if f.name == name else f.default
        if default is dataclasses.MISSING:
            spec.append((f.name, f.type, dataclasses.field(
                default_factory=f.default_factory, metadata=f.metadata)))
        else:
            spec.append((f.name, f.type, dataclasses.field(default=default,
                                                           metadata=f.metadata)))
    planted = dataclasses.make_dataclass(cls.__name__, spec, frozen=cls.__dataclass_params__.frozen)
    for attr in ("config", "nuts_options", "quick", "to_dict"):
        if hasattr(cls, attr):
            setattr(planted, attr, getattr(cls, attr))
    return planted


@pytest.mark.parametrize("name, value", [("chains", 2), ("target_accept", 0.9),
                                         ("tune", 500), ("simplex", "dirichlet")])
def test_a_planted_nutsoptions_default_fails(name, value):
    bad = mismatches(surfaces(nuts_options=_planted(methods.NutsOptions, name, value)))
    assert any(b.startswith("NutsOptions: " + name) for b in bad), bad


def test_a_planted_audit_default_fails():
    bad = mismatches(surfaces(audit_cls=_planted(audit_config.AuditConfig, "draws", 500)))
    assert any(b.startswith("audit: draws") for b in bad), bad


def test_a_planted_cli_default_fails(monkeypatch):
    from crowdrank.reports.commands import audit_pairs

    monkeypatch.setattr(audit_pairs, "nuts_settings", lambda args: {"chains": 3})
    bad = mismatches(surfaces())
    assert bad == ["audit pair-table cli: chains = 3, NutsConfig says 4"]
