"""The ``crowdrank`` command: one sub-command per module in :mod:`reports.commands`.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``func``. Errors that a user can fix (bad data, bad options) end as one line on stderr and
a non-zero exit, never a traceback; ``CROWDRANK_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from models.data import DataError

#: Sub-command modules, in the order ``--help`` lists them.
COMMANDS = ("simulate", "data", "story", "fit", "audit", "sbc")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crowdrank",
        description="Noisy crowdsourced preferences (COUPLE, CrowdBT, PL, BT): NUTS beside "
                    "online moment matching, validated against each other.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"reports.commands.{name}")
        except ModuleNotFoundError as exc:  # a command whose module is not written yet
            if exc.name != f"reports.commands.{name}":
                raise
            continue
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except (DataError, ValueError, FileNotFoundError, IsADirectoryError, KeyError) as exc:
        if os.environ.get("CROWDRANK_DEBUG"):
            raise
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"crowdrank {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"crowdrank {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
