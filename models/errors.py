"""The project's own exceptions: problems a user can fix in their input.

``crowdrank`` (the command) shows exactly these as one line and exits with status 2; any
other exception is a program bug and keeps its traceback (see ``docs/data.md``).

* :class:`InputError` -- the base: bad input of any kind (a file, an option).
* :class:`DataError` -- bad data; the message names the file (or the option), the line and
  the reason.
* :class:`UsageError` -- a bad option value or combination of options.
* :class:`DataWarning` -- something irregular but readable, reported and not fatal (e.g. a
  ground-truth file that also scores items absent from the data).

All three errors subclass :class:`ValueError`, so library code that catches ``ValueError``
keeps working.
"""

from __future__ import annotations

__all__ = ["DataError", "DataWarning", "InputError", "UsageError"]


class InputError(ValueError):
    """Bad input that the user can fix (a file, an option): one line in the CLI."""


class DataError(InputError):
    """Bad input: the message names the source (file), the line and the reason.

    Parameters
    ----------
    reason : str
        What is wrong.
    source : str, optional
        The file (or what stands for it).
    line : int, optional
        The line, 1-based.
    """

    def __init__(self, reason: str, source: str | None = None, line: int | None = None):
        self.reason = reason
        self.source = source
        self.line = line
        where = source or "<data>"
        if line is not None:
            where = f"{where}, line {line}"
        super().__init__(f"{where}: {reason}")


class UsageError(InputError):
    """A bad option value or combination; the message names the option."""


class DataWarning(UserWarning):
    """Readable input with an irregularity that is reported, not fatal."""
