"""How the ``crowdrank`` commands print their options: one help formatter, and the NUTS
options generated from :class:`~crowdrank.inference.nuts.config.NutsConfig`.

:class:`HelpFormatter` is argparse's ``ArgumentDefaultsHelpFormatter`` without its two
faults: it prints no ``(default: None)`` (an option left out means what its help line
says) and no second default after a help line that already states one.

:func:`add_nuts_options` adds NUTS options to a command (``crowdrank audit``, ``crowdrank
sbc``) from NutsConfig's fields: the flag, type, choices and help line are NutsConfig's
(``metadata["help"]``), the default the command's own dataclass field (its configuration
class: :class:`~crowdrank.validation.pipelines.audit_config.AuditConfig`,
:class:`~crowdrank.validation.pipelines.sbc.SbcConfig`), so that no default is typed a
second time.
"""

from __future__ import annotations

import argparse
import dataclasses
import re


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``(default: X)`` after an option's help, unless X is ``None``, ``False`` (a flag) or
    suppressed, or the help line already says ``default``."""

    def _get_help_string(self, action):
        help_ = action.help or ""
        if action.default is None or action.default is False \
                or action.default is argparse.SUPPRESS or "default" in help_:
            return help_
        return super()._get_help_string(action)


def add_nuts_options(group, defaults, names, notes: dict | None = None) -> dict:
    """Add ``--name`` for each NutsConfig field of ``names`` to ``group``, with NutsConfig's
    type, choices and help line, a parsed default of ``None`` (the command's configuration
    then applies its own) and the help's default read from ``defaults``.

    Parameters
    ----------
    group : argparse group or parser
        Where the options go.
    defaults : dataclass type or dict
        The command's configuration class (its fields' defaults), or ``{name: default}``.
    names : sequence of str
        NutsConfig fields to offer.
    notes : dict, optional
        ``{name: text}`` put after the default in the help (``"250 with --quick"``).

    Returns
    -------
    dict
        The actions by field name.
    """
    from crowdrank.inference.nuts.config import FIELDS

    if dataclasses.is_dataclass(defaults):
        defaults = {f.name: f.default for f in dataclasses.fields(defaults)}
    notes = notes or {}
    out = {}
    for name in names:
        f = FIELDS[name]
        meta = f.metadata
        default = defaults.get(name, f.default)
        help_ = meta["help"]
        shown = [] if default is None or isinstance(default, bool) else [str(default)]
        if name in notes:
            shown.append(notes[name])
        if shown:          # the command's default replaces one NutsConfig's help states
            help_ = re.sub(r" \(default: [^)]*\)$", "", help_)
            help_ += f" (default: {'; '.join(shown)})"
        kw = {"dest": name, "default": None, "help": help_.replace("%", "%%")}
        if "metavar" in meta:
            kw["metavar"] = meta["metavar"]
        if isinstance(f.default, bool) and not meta.get("type"):
            kw["action"] = "store_true"
        else:
            kw["type"] = meta.get("type", type(f.default))
            if "choices" in meta:
                kw["choices"] = tuple(c for c in meta["choices"] if c is not None)
        out[name] = group.add_argument("--" + name.replace("_", "-"), **kw)
    return out
