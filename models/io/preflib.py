"""``preflib``: PrefLib ``.soc/.soi/.toc/.toi`` files (the 2022 format: ``# KEY: value``
metadata, then ``count: a,b,{c,d},e``).

Counts are expanded. Ties (``{..}``, only allowed in ``.toc/.toi``) are split as in
appendix 1.3 of [Pan18]. PrefLib carries no worker ids, so the reader makes them up, by
the option ``workers``: ``"single"`` (default) gives every ranking of the file one
pseudo-worker named after the file (one crowd-wide η for COUPLE/CrowdBT);
``"per-ranking"`` gives every expanded ranking its own worker ``<file>:<j>`` (each worker
then has one ranking and its η is informed by the prior alone). ``item_ids`` is
``"number"`` (default, the alternative's number) or ``"name"``. See ``docs/data.md``.
"""

from __future__ import annotations

from pathlib import Path

from ..data import DataError
from ._base import Builder, text_lines

NAME = "preflib"
EXTENSIONS = (".soc", ".soi", ".toc", ".toi")


def parse_order(text: str, source: str, line: int) -> list[list[str]]:
    """``"1,{2,3},4"`` → ``[["1"], ["2", "3"], ["4"]]``."""
    groups: list[list[str]] = []
    i, s = 0, text.strip()
    while i < len(s):
        if s[i] == "{":
            j = s.find("}", i)
            if j < 0:
                raise DataError("malformed line: '{' without '}'", source, line)
            groups.append([x.strip() for x in s[i + 1:j].split(",")])
            i = j + 1
        else:
            j = s.find(",", i)
            j = len(s) if j < 0 else j
            tok = s[i:j].strip()
            if "{" in tok or "}" in tok:
                raise DataError("malformed line: misplaced brace", source, line)
            groups.append([tok])
            i = j
        rest = s[i:].lstrip()
        if rest:
            if rest[0] != ",":
                raise DataError("malformed line: expected ',' between alternatives",
                                source, line)
            i = len(s) - len(rest) + 1
            if not s[i:].strip():
                raise DataError("malformed line: trailing ','", source, line)
        else:
            break
    return groups


def parse(path: Path, b: Builder, *, workers: str = "single", item_ids: str = "number",
          skip_short: bool = False, item_prefix: str = ""):
    """Feed the rankings of ``path`` to ``b`` (yields 1 per line); notes go to ``b``."""
    if workers not in ("single", "per-ranking"):
        raise ValueError(f"workers must be 'single' or 'per-ranking', got {workers!r}")
    if item_ids not in ("number", "name"):
        raise ValueError(f"item_ids must be 'number' or 'name', got {item_ids!r}")
    src = b.source
    kind = path.suffix.lower()[1:]
    strict, complete = kind in ("soc", "soi"), kind in ("soc", "toc")
    names: dict[str, str] = {}
    n_alt = None
    short = 0
    stem = path.stem
    j = 0
    for line, text in text_lines(path, src):
        t = text.strip()
        if not t:
            b.skip_blank()
            continue
        if t.startswith("#"):
            key, _, val = t[1:].partition(":")
            key = key.strip().upper()
            if key == "NUMBER ALTERNATIVES":
                try:
                    n_alt = int(val)
                except ValueError:
                    raise DataError(f"bad NUMBER ALTERNATIVES {val.strip()!r}",
                                    src, line) from None
            elif key.startswith("ALTERNATIVE NAME"):
                names[key.split()[-1]] = val.strip()
            continue
        cnt, colon, order = t.partition(":")
        if not colon:
            raise DataError("malformed line: expected 'count: a,b,...' (PrefLib 2022 "
                            "format)", src, line)
        try:
            count = int(cnt)
        except ValueError:
            raise DataError(f"malformed line: count {cnt.strip()!r} is not an integer",
                            src, line) from None
        if count < 1:
            raise DataError(f"count must be >= 1, got {count}", src, line)
        groups = parse_order(order, src, line)
        flat = [x for g in groups for x in g]
        if strict and len(flat) != len(groups):
            raise DataError(f"a tie in a strict-order .{kind} file", src, line)
        for x in flat:
            if x and n_alt is not None and not (x.isdigit() and 1 <= int(x) <= n_alt):
                raise DataError(f"unknown alternative {x!r} (file declares {n_alt})",
                                src, line)
        if complete and n_alt is not None and len(set(flat)) != n_alt \
                and len(flat) == len(set(flat)):
            raise DataError(f"a .{kind} line must rank all {n_alt} alternatives, got "
                            f"{len(flat)}", src, line)
        if skip_short and len(groups) < 2:
            short += count
            continue
        if item_ids == "name":
            groups = [[names.get(x, x) for x in g] for g in groups]
        if item_prefix:
            groups = [[item_prefix + x for x in g] for g in groups]
        if workers == "single":
            b.add(line, stem, groups, count=count)
        else:
            for _ in range(count):
                j += 1
                b.add(line, f"{stem}:{j}", groups)
        yield 1
    b.notes.append(f"PrefLib {path.name}: no worker ids; workers={workers!r}")
    if short:
        b.notes.append(f"skipped {short} ranking(s) with fewer than 2 items "
                       "(skip_short=True)")
    if item_ids == "name" and len(set(names.values())) != len(names):
        raise DataError("alternative names are not unique; use item_ids='number'", src)


def metadata(path: Path) -> tuple[str, dict[str, str]]:
    """The file's ``TITLE`` (the file stem when absent) and ``ALTERNATIVE NAME`` map."""
    title, names = None, {}
    for _, t in text_lines(path):
        if not t.startswith("#"):
            continue
        key, _, val = t[1:].partition(":")
        key = key.strip().upper()
        if key == "TITLE" and title is None:
            title = val.strip() or None
        elif key.startswith("ALTERNATIVE NAME"):
            names[key.split()[-1]] = val.strip()
    return title or path.stem, names
