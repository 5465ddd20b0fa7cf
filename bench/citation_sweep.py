"""Replace the code's old citations by the documentation inside the repository.

Docstrings and comments still cite ``DESIGN.md §n`` (a file outside the repository),
``seed 000`` (the COUPLE paper by its place in a private folder) and ``issue N`` (the
tracker). This script rewrites them as pointers to ``docs/design.md`` sections and as
citation keys of ``docs/references.md`` (``[Pan18]``, ``[Chen13]``, …), with **exact string
substitutions** only: a rule whose text is not found changes nothing (the file may have
moved on), and nothing else in a file is touched.

Strings a *user* sees at run time (the story, the HTML report, CLI help) get readable
author–year text instead of keys, because a report has no reference list; the committed
output of ``crowdrank story`` (``docs/generative-story.md``) gets the same substitutions as
``reports/story.py`` so that it stays identical to what the command prints.

    python bench/citation_sweep.py              # dry run: file:line: old -> new
    python bench/citation_sweep.py --apply      # rewrite the files
    python bench/citation_sweep.py --root DIR   # another checkout (e.g. a copy in /tmp)

After ``--apply``: run ``python -m pytest tests/test_docs.py`` (every key must be defined in
docs/references.md) and the tests of the touched files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: Folders swept (Python files), relative to the root.
SCOPE = ("models", "inference", "validation", "reports", "bench", "tests")
#: Files never touched: this script (it holds the old strings) and the docs test.
EXCLUDE = ("bench/citation_sweep.py", "tests/test_docs.py")
#: Files whose strings are shown to users: readable citations, no keys.
USER_FACING = ("reports/story.py", "reports/html.py", "reports/commands/",
               "docs/generative-story.md")
#: Non-Python files swept as well.
EXTRA_FILES = ("docs/generative-story.md",)

# Rules are applied in order, each as str.replace over the whole file; specific texts come
# before the general ones they contain. (old, new) pairs.
_DESIGN = [
    ("The guards of DESIGN.md §3", "The guards of docs/design.md (Online, Guards)"),
    ("(DESIGN.md §2–3)", "(docs/design.md, Models, Online)"),
    ("exact also for tiny ``α`` (DESIGN.md §2)",
     "exact also for tiny ``α`` (docs/design.md, Sampling)"),
    ("forward simulator are offered (DESIGN.md §2)",
     "forward simulator are offered (docs/design.md, Facts)"),
    ("exact forward simulator (DESIGN.md §2)", "exact forward simulator (docs/design.md, Facts)"),
    ("``k >= 3`` (DESIGN.md §2)", "``k >= 3`` (docs/design.md, Facts)"),
    ("DESIGN.md §4 and issue 5.", "docs/design.md, Validation."),
    ("DESIGN.md §1", "docs/design.md, Data"),
    ("DESIGN.md §2", "docs/design.md, Models"),
    ("DESIGN.md §3", "docs/design.md, Online"),
    ("DESIGN.md §4", "docs/design.md, Validation"),
]
_ISSUES = [
    ("the JSON of issue 4 /\n``docs/contracts.md``", "the JSON of\n``docs/contracts.md``"),
    ("The JSON object of issue 4 (``docs/contracts.md``)",
     "The JSON object of ``docs/contracts.md`` (Online result)"),
    ("(issue 5's sections)", "(the report sections of docs/guide.md)"),
    ("Output folder layout (issue 5)::", "Output folder layout (docs/contracts.md, Audit outputs)::"),
    ("the aggregates (issue 5)", "the aggregates (docs/design.md, Validation)"),
    ("Aggregates over parameters (issue 5)",
     "Aggregates over parameters (docs/design.md, Validation)"),
    ("(the suite's main job; issue 5)", "(the suite's main job)"),
]
_KEYS = [
    ("Equation numbers refer to seed 000 (Stagewise learning for noisy k-ary preferences).",
     "Equation numbers refer to [Pan18] (Stagewise learning for noisy k-ary preferences)."),
    ("as the seed paper's appendix 1.3", "as appendix 1.3 of [Pan18]"),
    ("as in the\nseed paper's appendix 1.3", "as in\nappendix 1.3 of [Pan18]"),
    ("the seed paper's appendix 1.3", "appendix 1.3 of [Pan18]"),
    ("Seed 000, Sect.", "[Pan18], Sect."),
    ("Seed 000, Lemma 1", "[Pan18], Lemma 1"),
    ("(seed 000,\n", "([Pan18],\n"),
    ("seed 000 Sect.", "[Pan18], Sect."),
    ("seed 000 calls", "[Pan18] calls"),
    ("seed 000, ", "[Pan18], "),
    ("(Chen et al. 2013)", "[Chen13]"),
    ("Chen et al. 2013", "[Chen13]"),
    ("(Weng & Lin 2011, JMLR, Algorithms 1 and 4)", "([WL11], Algorithms 1 and 4)"),
    ("Weng & Lin (2011, ", "[WL11] ("),
    ("(Vehtari et al. 2021; Betancourt\n2016)", "[Vehtari21],\n[Betancourt16]"),
    ("(Talts, Betancourt, Simpson, Vehtari & Gelman 2018, arXiv:1804.06788)", "[Talts18]"),
    ("(Talts et al. 2018, Alg. 1)", "([Talts18], Alg. 1)"),
    ("(Cook, Gelman & Rubin 2006)", "[Cook06]"),
    ("Säilynoja, Bürkner & Vehtari (2022, Stat. Comput.\n  32:32)",
     "[Sailynoja22] (Stat. Comput.\n  32:32)"),
    ("(Liu & Xie 2020, JASA 115:393)", "[LiuXie20]"),
]
#: For user-facing files: readable text (a report or a CLI help has no reference list).
_READABLE = [
    ("DESIGN.md §2 (seed 000: COUPLE, Eq. 3–4;",
     "docs/design.md (Pan et al. 2018: COUPLE, Eq. 3–4;"),
    ("Seed 000, Sect.", "Pan et al. 2018, Sect."),
    ("(seed 000,\n", "(Pan et al. 2018,\n"),
    ("seed 000 Sect.", "Pan et al. 2018, Sect."),
    ("seed 000, ", "Pan et al. 2018, "),
    ("OnlineGBMM variants (DESIGN.md §3)", "OnlineGBMM variants (docs/design.md, Online)"),
]
CODE_RULES = _DESIGN + _ISSUES + _KEYS
#: The project's line length (pyproject.toml); longer lines made by a rule are listed.
LINE_LENGTH = 100
NEW_MARKERS = ("docs/design.md", "docs/contracts.md", "docs/guide.md", "Pan et al. 2018",
               "[Pan18]", "[Chen13]", "[WL11]", "[Talts18]", "[Cook06]", "[LiuXie20]",
               "[Sailynoja22]", "[Vehtari21]")
USER_RULES = _READABLE + _DESIGN + _ISSUES


def rules_for(rel: str) -> list[tuple[str, str]]:
    return USER_RULES if rel.startswith(USER_FACING) else CODE_RULES


def targets(root: Path) -> list[Path]:
    files = []
    for folder in SCOPE:
        files += sorted((root / folder).rglob("*.py"))
    files += [root / f for f in EXTRA_FILES if (root / f).exists()]
    return [f for f in files if f.relative_to(root).as_posix() not in EXCLUDE
            and ".venv" not in f.parts and "__pycache__" not in f.parts]


def sweep_text(text: str, rules) -> tuple[str, list[tuple[int, str, str]]]:
    """Apply ``rules`` in order; return the new text and ``(line, old, new)`` per hit (line
    numbers of the text as it was when the rule ran)."""
    hits = []
    for old, new in rules:
        start = 0
        while (i := text.find(old, start)) >= 0:
            hits.append((text.count("\n", 0, i) + 1, old, new))
            start = i + len(old)
        if old in text:
            text = text.replace(old, new)
    return text, hits


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]),
                    help="repository root to sweep (default: this checkout)")
    ap.add_argument("--apply", action="store_true", help="rewrite the files (default: dry run)")
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    changed = 0
    for f in targets(root):
        rel = f.relative_to(root).as_posix()
        text = f.read_text(encoding="utf-8")
        new, hits = sweep_text(text, rules_for(rel))
        for line, old, rep in hits:
            print(f"{rel}:{line}: {old!r} -> {rep!r}")
        if new != text:
            changed += 1
            if args.apply:
                f.write_text(new, encoding="utf-8")
    print(f"{'changed' if args.apply else 'would change'} {changed} file(s)", file=sys.stderr)
    left, long = [], []
    for f in targets(root):
        rel = f.relative_to(root).as_posix()
        before = f.read_text(encoding="utf-8")
        text = before if args.apply else sweep_text(before, rules_for(rel))[0]
        for n, ln in enumerate(text.splitlines(), 1):
            if any(s in ln for s in ("DESIGN.md", "seed 000", "Seed 000", "seed paper",
                                     "issue ")):
                left.append(f"{rel}:{n}: {ln.strip()}")
            if (rel.endswith(".py") and len(ln) > LINE_LENGTH
                    and any(s in ln for s in NEW_MARKERS)):
                long.append(f"{rel}:{n}: {len(ln)} characters")
    if left:
        print("\nleft for a person (no rule matched):", file=sys.stderr)
        for x in left:
            print("  " + x, file=sys.stderr)
    if long:
        print(f"\nlines now longer than {LINE_LENGTH} characters (re-wrap by hand):",
              file=sys.stderr)
        for x in long:
            print("  " + x, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
