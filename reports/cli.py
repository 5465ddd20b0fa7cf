"""The ``crowdrank`` command: one sub-command per module in :mod:`crowdrank.reports.commands`.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``func``. A command's module is imported only when that command runs (or for the
top-level ``--help``, which lists every command): ``crowdrank fit ...`` never imports the
modules of ``story`` or ``simulate`` (pandas, SciPy), so a small online fit is not paid
for by the rest of the suite. Adding a command is one step: write
``reports/commands/NAME.py`` with ``register(sub)`` (the parser; heavy imports inside the
function that runs the command) and add ``NAME`` to :data:`COMMANDS`. Errors that a user can fix end as one line on stderr and exit status 2, never a
traceback: the project's own input errors (:class:`crowdrank.models.errors.InputError`, which
includes :class:`~crowdrank.models.errors.DataError` and :class:`~crowdrank.models.errors.UsageError`) and a
file that cannot be opened. Anything else is a program bug and keeps its traceback, so
that it is reported rather than disguised as bad input. ``CROWDRANK_DEBUG=1`` shows the
traceback of user errors too. See ``docs/data.md``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from crowdrank.models.errors import InputError

#: Sub-command modules, in the order ``--help`` lists them.
COMMANDS = ("simulate", "data", "story", "fit", "audit", "sbc", "replicate", "export")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``crowdrank`` parser with every command, or only ``command`` when it names one
    (what :func:`main` asks for: the command on the line is the only one parsed, so the
    other modules are not imported)."""
    parser = argparse.ArgumentParser(
        prog="crowdrank",
        description="Noisy crowdsourced preferences (COUPLE, CrowdBT, PL, BT): NUTS beside "
                    "online moment matching, validated against each other.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in (command,) if command in COMMANDS else COMMANDS:
        try:
            mod = importlib.import_module(f"crowdrank.reports.commands.{name}")
        except ModuleNotFoundError as exc:  # a command whose module is not written yet
            if exc.name != f"crowdrank.reports.commands.{name}":
                raise
            continue
        mod.register(sub)
    return parser


#: Files that cannot be opened: the message names the path; the user can fix it.
FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is bad input that the user can fix (one line), not a program bug."""
    if isinstance(exc, InputError):
        return True
    if isinstance(exc, FILE_ERRORS):
        return True
    online = sys.modules.get("crowdrank.inference.online.state")  # loaded whenever it can be raised
    # a strict-mode guard of the online update, asked for by --strict
    return online is not None and isinstance(exc, online.OnlineError)


def main(argv: list[str] | None = None) -> int:
    # one XLA host device per NUTS chain, and compiled programs kept between runs; both
    # only possible before JAX starts
    from crowdrank.inference.xla_setup import configure_compilation_cache, configure_host_devices
    configure_host_devices()
    configure_compilation_cache()
    argv = sys.argv[1:] if argv is None else list(argv)
    # the first word names the command (the top level has no options but --help);
    # anything else (--help, a typo, nothing) gets the parser with every command
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except Exception as exc:
        if not is_user_error(exc) or os.environ.get("CROWDRANK_DEBUG"):
            raise
        print(f"crowdrank {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"crowdrank {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
