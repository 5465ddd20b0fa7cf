"""The story's Markdown as one self-contained HTML page (``story.html`` beside ``story.md``).

The Markdown is rendered by markdown-it-py (CommonMark plus tables, raw HTML disabled, so
all text is escaped); the page is cut into sections at its ``##`` headings and laid out by
:func:`crowdrank.reports.html.render` (the audit report's CSS and navigation); every image that the
Markdown links from the output folder is embedded as a base64 PNG, so the page is one file
that opens offline, like the audit report.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from markdown_it import MarkdownIt

from crowdrank.reports.html import Section, render

_IMG = re.compile(r'<img src="([^"]+)"')


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def _embed(html_text: str, base: Path) -> str:
    def sub(m: re.Match) -> str:
        src = m.group(1)
        p = (base / src).resolve()
        if src.startswith("data:") or not p.is_file():
            raise FileNotFoundError(f"the story links {src!r}, which is not in {base}")
        data = base64.b64encode(p.read_bytes()).decode("ascii")
        return f'<img src="data:image/png;base64,{data}"'
    return _IMG.sub(sub, html_text)


def markdown_sections(markdown: str) -> tuple[str, str, list[tuple[str, str]]]:
    """Split the Markdown into its ``#`` title, the text before the first ``##`` and the
    ``(heading, body)`` of every ``##`` section."""
    title, intro, sections = "", [], []
    cur: list[str] | None = None
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("# ") and not title:
            title = line[2:].strip()
        elif not in_code and line.startswith("## "):
            sections.append((line[3:].strip(), []))
            cur = sections[-1][1]
        else:
            (intro if cur is None else cur).append(line)
    return title, "\n".join(intro), [(h, "\n".join(b)) for h, b in sections]


def _plain(text: str) -> str:
    """A heading's text without Markdown emphasis and code marks (for the navigation)."""
    return re.sub(r"[`*]", "", text)


def story_page(markdown: str, base: str | Path, path: str | Path) -> Path:
    """Write ``markdown`` (whose images are relative to ``base``) as a self-contained page."""
    base = Path(base)
    md = _md()
    title, intro, parts = markdown_sections(markdown)
    sections = [Section(_plain(h), [_embed(md.render(body), base)],
                        anchor=f"s{i + 1}") for i, (h, body) in enumerate(parts)]
    page = render(_plain(title) or "The generative story", sections)
    # Markdown images are not wrapped in <figure>: keep them inside the page's width too
    page = page.replace("</style>", "main img{max-width:100%;height:auto}</style>", 1)
    if intro.strip():
        page = page.replace("<nav>", _embed(md.render(intro), base) + "<nav>", 1)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
