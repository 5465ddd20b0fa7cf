"""``worker-winner-loser``: white-space separated ``worker winner loser`` per line, no
header (the CrowdBT paper's ``all_pair.txt``). See ``docs/data.md``."""

from __future__ import annotations

from pathlib import Path

from ..data import DataError
from ._base import Builder, text_lines

NAME = "worker-winner-loser"


def recognises_line(first: str) -> bool:
    """A first line of three fields and no comma."""
    return "," not in first and len(first.split()) == 3


def parse(path: Path, b: Builder, block: int = 1):
    """Feed the pairs of ``path`` to ``b``; yields 1 per line."""
    for line, text in text_lines(path, b.source):
        parts = text.split()
        if not parts:
            b.skip_blank()
            continue
        if len(parts) != 3:
            raise DataError(f"malformed line: expected 'worker winner loser', got "
                            f"{len(parts)} field(s)", b.source, line)
        b.add(line, parts[0], [[parts[1]], [parts[2]]])
        yield 1
