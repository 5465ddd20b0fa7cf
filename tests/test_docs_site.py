"""The documentation site (``make docs``), built and opened the way a reader meets it.

The site is built once per session with Sphinx into a temporary folder, with the notebooks
not executed (``CROWDRANK_DOCS_EXECUTE=off``, about a minute) and ``-W --keep-going`` (any
warning fails the build). Then: every internal link and image resolves, every option of
every command's parser is on its command page, citation keys in docstrings link to
``references.md``, and headless Chromium decodes every image of the pages that have one.

The executed tutorials are checked by ``make docs`` itself (``docs/_ext/check_site.py
--tutorials``: executing them takes several minutes, NUTS in two PPLs); the slow test here
re-builds from the notebook cache that ``make docs`` leaves and checks their figures, and
skips with a message when there is no cache.

Needs the ``docs`` extra (part of ``dev``): skipped with a message without Sphinx.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
import check_site

sys.path.remove(str(DOCS / "_ext"))

for _mod in ("sphinx", "myst_nb", "pydata_sphinx_theme", "sphinx_design", "sphinxarg"):
    pytest.importorskip(_mod, reason=f"{_mod} not installed (pip install -e '.[docs]'): the "
                                     "documentation site was not built")


def build(out: Path, execute: str = "off", doctrees: Path | None = None
          ) -> subprocess.CompletedProcess:
    env = dict(os.environ, CROWDRANK_DOCS_EXECUTE=execute)
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going",
         "-d", str(doctrees or out.parent / "doctrees"), str(DOCS), str(out)],
        capture_output=True, text=True, env=env, timeout=900, check=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "html"
    proc = build(out)
    assert proc.returncode == 0, f"sphinx failed or warned:\n{proc.stderr[-4000:]}"
    assert "WARNING" not in proc.stderr, proc.stderr[-4000:]
    return out


def test_site_has_its_pages(site):
    for page in ("index", "gallery", "design", "contracts", "data", "sbc", "replication",
                 "fidelity", "results", "references", "testing", "cli/index", "cli/fit",
                 "api/index", "api/models", "api/inference", "api/validation", "api/io",
                 *(f"tutorials/{t}" for t in check_site.TUTORIALS)):
        assert (site / f"{page}.html").is_file(), page


def test_every_internal_link_resolves(site, tmp_path):
    assert check_site.link_errors(site) == []
    # the check can fail: a copy of the site with one link pointed at a missing anchor and
    # one at a missing page
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(site, copy)
    page = copy / "index.html"
    text = page.read_text(encoding="utf-8")
    text = text.replace('href="design.html"', 'href="design.html#no-such-anchor"', 1)
    text = text.replace('href="gallery.html"', 'href="no-such-page.html"', 1)
    page.write_text(text, encoding="utf-8")
    errors = check_site.link_errors(copy)
    assert any("no-such-anchor" in e for e in errors), errors
    assert any("no-such-page.html" in e for e in errors), errors


def _options(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """Each command's option strings (subcommands' too), from the CLI's own parser."""
    out: dict[str, set[str]] = {}

    def walk(p, command, into):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, command or name, out.setdefault(command or name, set()))
            elif into is not None:
                into.update(s for s in a.option_strings if s.startswith("--") and s != "--help")
    walk(parser, None, None)
    return out


def test_command_pages_list_every_option_of_the_parser(site):
    from crowdrank.reports.cli import build_parser

    options = _options(build_parser())
    assert {"fit", "audit", "sbc", "simulate", "story", "replicate", "data"} <= set(options)
    for command, opts in options.items():
        page = site / "cli" / f"{command}.html"
        assert page.is_file(), f"no page for crowdrank {command}"
        text = re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))
        text = text.replace("\u2011", "-").replace("&#8212;", "--")
        missing = sorted(o for o in opts if o not in text)
        assert not missing, f"cli/{command}.html lacks {missing}"


def test_docstring_citations_link_to_references(site):
    refs = check_site.parse(site / "references.html")
    assert {"ref-pan18", "ref-chen13", "ref-wl11"} <= refs.ids
    api = (site / "api" / "models.html").read_text(encoding="utf-8")
    assert re.search(r'href="\.\./references\.html#ref-pan18"', api), \
        "no [Pan18] link in the model registry's page"


def test_results_are_split_by_study(site):
    index = (site / "results.html").read_text(encoding="utf-8")
    studies = re.findall(r'href="results/([\w-]+)\.html"', index)
    expected = len(re.findall(r"^## ", (DOCS / "results.md").read_text(encoding="utf-8"),
                              flags=re.MULTILINE))
    assert len(set(studies)) == expected
    audit = check_site.parse(site / "results" / "audit.html")
    assert any("audit_default_couple" in s for s in audit.imgs)


def test_gallery_has_a_thumbnail_per_stored_figure(site):
    gallery = check_site.parse(site / "gallery.html")
    stems = {Path(s).stem.split(".")[0] for s in gallery.imgs}
    for fig in (DOCS / "figures").glob("*.png"):
        assert any(s.startswith(fig.stem) for s in stems), f"{fig.name} not in the gallery"


@pytest.mark.parametrize("broken", [False, True])
def test_images_decode_in_headless_chromium(site, tmp_path, broken):
    exe = check_site.chromium()
    if exe is None:
        pytest.skip("chromium not installed (apt-get install -y chromium): the site's images "
                    "were not checked in a browser")
    page = site / "gallery.html"
    n = len(check_site.parse(page).imgs)
    assert n >= 10
    if broken:     # the probe must notice an image that does not decode
        copy = site / "broken-gallery.html"      # beside it: its relative URLs hold
        text = page.read_text(encoding="utf-8")
        copy.write_text(re.sub(r'src="([^"]+\.png)"', 'src="data:image/png;base64,AAAA"', text,
                               count=1), encoding="utf-8")
        page = copy
    try:
        got = check_site.browser_image_counts(page, exe, tmp_path / "profile")
    finally:
        (site / "broken-gallery.html").unlink(missing_ok=True)
    assert got is not None, "the browser probe did not report"
    assert got == (n - broken, n)


@pytest.mark.parametrize("broken", [False, True])
def test_every_image_of_the_site_decodes_in_chromium(site, tmp_path, broken):
    exe = check_site.chromium()
    if exe is None:
        pytest.skip("chromium not installed (apt-get install -y chromium): the site's images "
                    "were not checked in a browser")
    if broken:     # one figure's file is not a PNG: both pages that show it are named
        import shutil
        shutil.copytree(site, tmp_path / "site")
        site = tmp_path / "site"
        (site / "_images" / "story_normalizer.png").write_bytes(b"not a png")
    errors = check_site.image_errors(site, exe)
    if not broken:
        assert errors == []
    else:
        assert sorted(e.split(":")[0] for e in errors) == ["gallery.html",
                                                           "generative-story.html"], errors


@pytest.mark.slow
def test_executed_tutorials_have_their_figures(tmp_path):
    """From the notebook cache ``make docs`` leaves (docs/_build/.jupyter_cache): the four
    tutorials' pages, executed, each hold a figure."""
    cache = DOCS / "_build" / ".jupyter_cache"
    if not cache.is_dir():
        pytest.skip("no notebook cache: run `make docs` once (it executes the tutorials, "
                    "several minutes); this test then re-builds from the cache")
    out = tmp_path / "html"
    proc = build(out, execute="cache")
    assert check_site.tutorial_figure_errors(out) == [], proc.stderr[-4000:]
    assert proc.returncode == 0, proc.stderr[-4000:]
