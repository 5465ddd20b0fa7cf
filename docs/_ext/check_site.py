"""Check a built site (``docs/_build/html``) the way a reader meets it.

- every internal link and image (``href``/``src`` that is not an external URL) names a file
  of the site, and its ``#fragment`` an ``id`` on that page;
- in headless Chromium, every ``<img>`` of the pages that have images decodes to a bitmap
  (``naturalWidth > 0`` after ``load``, read back with ``--dump-dom``);
- with ``--tutorials``: each executed tutorial page holds at least one figure.

Used by ``make docs`` (``python docs/_ext/check_site.py docs/_build/html --tutorials``) and
by ``tests/test_docs_site.py``. Exit status 1 on any failure, with one line per problem.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
TUTORIALS = ("01-generative-story", "02-prior-predictive", "03-two-ways-to-infer",
             "04-real-data-babyface")
#: pages of the theme and of Sphinx itself, not of the documentation
SKIP_PAGES = {"genindex.html", "search.html", "py-modindex.html"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str]] = []      # (tag, url)
        self.imgs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href"):
            self.refs.append((tag, a["href"]))
        if tag == "img" and a.get("src"):
            self.refs.append((tag, a["src"]))
            self.imgs.append(a["src"])


def parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html")
                  if p.name not in SKIP_PAGES and not p.relative_to(site).parts[0].startswith("_"))


def link_errors(site: Path) -> list[str]:
    """Internal links or images that do not resolve, as 'page: url (why)'."""
    cache: dict[Path, _Page] = {}

    def get(p: Path) -> _Page:
        if p not in cache:
            cache[p] = parse(p)
        return cache[p]

    errors = []
    for page in pages(site):
        for tag, url in get(page).refs:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:")):
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            rel = page.relative_to(site)
            if not target.exists():
                errors.append(f"{rel}: {url} (no such file)")
            elif target.is_dir():
                errors.append(f"{rel}: {url} (a folder)")
            elif parts.fragment and target.suffix == ".html" \
                    and unquote(parts.fragment) not in get(target).ids:
                errors.append(f"{rel}: {url} (no id {parts.fragment!r})")
    return errors


def tutorial_figure_errors(site: Path) -> list[str]:
    """Tutorial pages without a figure (an executed build embeds each plot as an image)."""
    errors = []
    for name in TUTORIALS:
        page = site / "tutorials" / f"{name}.html"
        if not page.exists():
            errors.append(f"tutorials/{name}.html: missing")
            continue
        imgs = [s for s in parse(page).imgs if "_images/" in s or s.startswith("data:image")]
        if not imgs:
            errors.append(f"tutorials/{name}.html: no figure (was it executed?)")
    return errors


PROBE = ("<script>window.addEventListener('load',function(){var im=[...document.images];"
         "var ok=im.filter(function(i){return i.complete&&i.naturalWidth>0}).length;"
         "var d=document.createElement('div');d.id='crowdrank-probe';d.textContent="
         "'IMAGES '+ok+'/'+im.length;document.body.appendChild(d);});</script>")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_image_counts(page: Path, exe: str, profile: Path) -> tuple[int, int] | None:
    """(decoded, total) images of ``page`` in headless Chromium, or None if the probe did
    not report. The probe goes into a sibling copy of the page, so relative URLs hold."""
    probe = page.with_name(f".probe-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    try:
        out = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                              "--virtual-time-budget=15000", "--dump-dom", probe.as_uri()],
                             capture_output=True, text=True, timeout=120, check=False)
    finally:
        probe.unlink()
    m = re.search(r"IMAGES (\d+)/(\d+)", out.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else None


FAILED_PROBE = ("<script>window.addEventListener('load',function(){var im=[...document.images];"
                "var bad=im.filter(function(i){return !(i.complete&&i.naturalWidth>0)})"
                ".map(function(i){return i.dataset.i});var d=document.createElement('div');"
                "d.id='crowdrank-probe';d.textContent='IMAGES '+(im.length-bad.length)+'/'+"
                "im.length+' FAILED ['+bad.join(',')+']';document.body.appendChild(d);});"
                "</script>")


def image_errors(site: Path, exe: str) -> list[str]:
    """Images of every page that do not decode in Chromium. One browser start for the whole
    site: a probe page holds every page's images by absolute URL (what each page's own
    relative URL resolves to), and reports the ones whose bitmap is empty."""
    found = []                                   # (page, src as written, URL to load)
    for page in pages(site):
        for src in parse(page).imgs:
            parts = urlsplit(src)
            if parts.scheme in ("http", "https"):
                found.append((page, src, None))  # the site must not need the network
            elif parts.scheme == "data":
                found.append((page, src, src))
            else:
                found.append((page, src, (page.parent / unquote(parts.path)).resolve().as_uri()))
    errors = [f"{p.relative_to(site)}: {src} (an external image)" for p, src, u in found
              if u is None]
    body = "".join(f'<img data-i="{i}" src="{html.escape(u)}">'
                   for i, (_, _, u) in enumerate(found) if u is not None)
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.html"
        probe.write_text(f"<html><body>{body}{FAILED_PROBE}</body></html>", encoding="utf-8")
        out = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}",
                              "--virtual-time-budget=30000", "--dump-dom", probe.as_uri()],
                             capture_output=True, text=True, timeout=300, check=False)
    m = re.search(r"IMAGES (\d+)/(\d+) FAILED \[([\d,]*)\]", out.stdout)
    if m is None:
        return errors + [f"the browser probe did not report: {out.stderr[-400:]}"]
    for i in filter(None, m.group(3).split(",")):
        page, src, _ = found[int(i)]
        errors.append(f"{page.relative_to(site)}: {src} does not decode")
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path)
    ap.add_argument("--tutorials", action="store_true",
                    help="require a figure on every tutorial page (an executed build)")
    args = ap.parse_args(argv)
    args.site = args.site.resolve()
    errors = link_errors(args.site)
    if args.tutorials:
        errors += tutorial_figure_errors(args.site)
    exe = chromium()
    if exe is None:
        print("check_site: chromium not installed (apt-get install -y chromium): images were "
              "not checked in a browser", file=sys.stderr)
    else:
        errors += image_errors(args.site, exe)
    for e in errors:
        print(f"check_site: {e}", file=sys.stderr)
    n = len(pages(args.site))
    print(f"check_site: {n} pages, {len(errors)} problem(s)"
          + ("" if exe else "; images not checked in a browser"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
