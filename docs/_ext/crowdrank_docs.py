"""The site's own Sphinx pieces, generated from the sources so that they cannot drift.

- **Command pages** (``docs/cli/*.md``, written at ``builder-inited``, git-ignored): the
  user guide ``docs/guide.md`` split at its ``##`` sections into one page per command
  (:data:`GUIDE_PAGES` says which section goes where; a section it does not know is a
  build warning, so a new section cannot vanish from the site), each ending with the
  command's options rendered by sphinx-argparse from the CLI's own parser
  (``crowdrank.reports.cli.build_parser``), the same object ``--help`` prints. Links into
  ``guide.md#anchor`` anywhere in the site are pointed at the page that holds the anchor.
- **Results by study** (``docs/results/*.md``, git-ignored): ``docs/results.md`` (rendered
  by ``bench/tools/render_results.py``; never edited by hand) split at its ``##`` sections, one
  page per study with the figures of ``docs/figures/`` that belong to it; the page
  ``results`` becomes their index.
- **Citation keys**: ``docs/references.md``'s ``**[Key]**`` entries become link targets
  ``ref-key`` (role ``crowdrank-refkey``), and ``[Key]`` / ``[Key, Eq. 4]`` in the running
  text of every page and docstring become links to them (``doctree-resolved``).
- **The gallery's rendered reports** (``{crowdrank-report-example}``): in
  ``docs/_ext/report_examples.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import re
from pathlib import Path
from typing import ClassVar

import report_examples
from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from myst_parser.slugs import github_slugify
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)
_DATACLASS_FIELD = dataclasses._FIELD   # a field proper (not a ClassVar or InitVar)

#: guide.md's ``##`` sections → the command page that holds them (in the guide's order);
#: a section whose title starts with ```crowdrank CMD`` goes to CMD's page without a line
#: here.
GUIDE_PAGES: dict[str, list[str]] = {
    "data": ["Data formats", "Real data sets"],
    "simulate": ["Commands: simulate, data summary, story"],
    "story": ["The generative story"],
    "fit": ["Priors: one object, both methods", "PeerGrader [Raman14]"],
    "audit": [],
    "sbc": [],
    "replicate": ["Running grids on a Dask cluster"],
    "export": [],
}
#: one line per command page, for the index's table
PAGE_BLURB = {
    "simulate": "seeded synthetic data from a model's generative story",
    "data": "data formats, the registered real data sets, `data summary`, `list`, `convert`",
    "story": "the generative story on one seeded example; prior predictive checks",
    "fit": "the priors; one model by online moment matching, EP, NUTS, MAP/ML, EM",
    "audit": "online against NUTS under the same priors, with an HTML report",
    "sbc": "simulation-based calibration of NUTS and of the online methods",
    "replicate": "the COUPLE paper's experiments; grids on a Dask cluster",
    "export": "a trusted NUTS reference in posteriordb's layout, for PPL and VI developers",
}

#: the sentence before a command page's options; ``{page}`` the command
OPTIONS_NOTE = {
    None: "Generated from the command's parser: the same text as `crowdrank {page} --help`.",
    "fit": ("Generated from the command's parser: every method's options, one group per "
            "method (a shared option in its first method's group, naming the others). "
            "`crowdrank fit --help` shows the shared options and the list of methods, "
            "`crowdrank fit --method M --help` the shared options and M's."),
}

TUTORIAL_PAGES = ("01-generative-story", "02-prior-predictive", "03-two-ways-to-infer",
                  "04-real-data-babyface")
CITE_KEY = re.compile(r"\*\*\[([A-Za-z][A-Za-z]*\d{2}[a-z]?)\]\*\*")
CITE_IN_TEXT = re.compile(r"\[([A-Z][A-Za-z]*\d{2}[a-z]?(?:,[^\]\n]*)?)\]")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def ref_label(key: str) -> str:
    return f"ref-{key.lower()}"


# ------------------------------------------------------------------ citation keys
def refkey_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{crowdrank-refkey}`Pan18``` → a link target ``ref-pan18`` and **[Pan18]**."""
    label = ref_label(text)
    target = nodes.target("", "", ids=[label], names=[label])
    inliner.document.note_explicit_target(target)    # the std domain makes it a label
    return [target, nodes.strong(f"[{text}]", f"[{text}]")], []


def reference_keys(docs: Path) -> set[str]:
    return set(CITE_KEY.findall((docs / "references.md").read_text(encoding="utf-8")))


#: citations are not linked inside these (code shows what is typed; a title feeds the toc)
NO_LINK = (nodes.literal, nodes.literal_block, nodes.reference, nodes.raw, nodes.title,
           nodes.FixedTextElement, addnodes.desc_signature, addnodes.toctree)


def link_citations(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """``[Pan18]``, ``[Pan18, Eq. 4]``, ``[Plackett75, Luce59]`` in running text (pages and
    docstrings alike) → each known key a link to its entry in references.md."""
    keys = app.env.crowdrank_keys
    uri = app.builder.get_relative_uri(docname, "references")
    for text in list(doctree.findall(nodes.Text)):
        if "[" not in text or any(isinstance(a, NO_LINK) for a in _ancestors(text)):
            continue
        raw, out, pos = str(text), [], 0
        for m in CITE_IN_TEXT.finditer(raw):
            parts = m.group(1).split(", ")
            if parts[0] not in keys:
                continue
            out.append(nodes.Text(raw[pos:m.start()] + "["))
            for i, part in enumerate(parts):
                if i:
                    out.append(nodes.Text(", "))
                if part in keys:
                    out.append(nodes.reference(part, part, internal=True,
                                               refuri=f"{uri}#{ref_label(part)}"))
                else:
                    out.append(nodes.Text(part))
            out.append(nodes.Text("]"))
            pos = m.end()
        if out:
            out.append(nodes.Text(raw[pos:]))
            text.parent.replace(text, out)


def note_attributes(app, what, name, obj, options, lines) -> None:
    """A class documented with a numpydoc "Attributes" section: remember its dataclass
    fields (autodoc processes a class's docstring before it filters its members)."""
    if what == "class":
        fields = getattr(obj, "__dataclass_fields__", {})
        # napoleon (run first) has turned the section into attribute directives
        documented = any(line.strip() in ("Attributes", ".. attribute::") or
                         line.startswith(".. attribute:: ") for line in lines)
        app.env.crowdrank_attr_fields = set(fields) if documented else set()


def option_parameters(obj) -> list[str]:
    """numpydoc ``Parameters`` lines for a dataclass whose every field carries its
    ``--help`` line (``metadata["help"]``: the method registry's options classes), so the
    page's parameters are the text ``crowdrank fit --help`` prints, written once; ``[]``
    for any other object or a docstring that has its own ``Parameters``."""
    fields = getattr(obj, "__dataclass_fields__", None) if isinstance(obj, type) else None
    init = [f for f in (fields or {}).values() if f.init and f._field_type is _DATACLASS_FIELD]
    if not init or not all(f.metadata.get("help") for f in init):
        return []
    if re.search(r"^\s*Parameters\s*\n\s*-+\s*$", obj.__doc__ or "", re.MULTILINE):
        return []
    lines = ["", "Parameters", "----------"]
    for f in init:
        typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        # the help is plain text (``max |gradient|`` would be an rST substitution)
        lines += [f"{f.name} : {typ}, default {f.default!r}",
                  f"    {_escape(f.metadata['help'])}."]
    return lines


def add_option_parameters(app, what, name, obj, options, lines) -> None:
    """Before napoleon reads a class's docstring: its options' parameters
    (:func:`option_parameters`)."""
    if what == "class":
        lines.extend(option_parameters(obj))


def skip_described_fields(app, what, name, obj, skip, options):
    """A field its class's Attributes section describes is not a second member entry
    (two descriptions of one attribute are a duplicate-object warning)."""
    if what == "class" and name in getattr(app.env, "crowdrank_attr_fields", ()):
        return True
    return None


def _ancestors(node: nodes.Node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


# ------------------------------------------------------------------ splitting pages
def split_sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Markdown at its ``##`` headings (outside fenced code): (preamble, [(title, body)])."""
    pre, sections, cur, fence = [], [], None, None
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            mark = stripped[:3]
            fence = None if fence == mark else (fence or mark)
        if fence is None and line.startswith("## "):
            cur = [line[3:].strip(), []]
            sections.append(cur)
            continue
        (cur[1] if cur else pre).append(line)
    return "".join(pre), [(t, "".join(b)) for t, b in sections]


def anchors(title: str, body: str) -> list[str]:
    """The GitHub-style anchors of a section's headings (outside fenced code)."""
    out, fence = [github_slugify(title)], None
    for line in body.splitlines():
        s = line.lstrip()
        if s.startswith(("```", "~~~")):
            fence = None if fence == s[:3] else (fence or s[:3])
        m = re.match(r"#{2,6} (.*)", line) if fence is None else None
        if m:
            out.append(github_slugify(m.group(1).strip()))
    return out


def rebase_links(body: str, depth: int, here: dict[str, str] | None = None,
                 page: str | None = None) -> str:
    """Relative links of a page moved ``depth`` folders below ``docs/``; ``#anchor`` links
    whose anchor went to another page (``here``: anchor → page) point there."""
    up = "../" * depth

    def one(m: re.Match) -> str:
        url = m.group(1)
        if url.startswith("#"):
            target = (here or {}).get(url[1:], page)
            return m.group(0) if target == page else f"]({target}.md{url})"
        if re.match(r"[a-z]+:", url) or url.startswith("/"):
            return m.group(0)
        return f"]({up}{url})"
    return LINK.sub(one, body)


def write_if_changed(path: Path, text: str) -> None:
    """Sphinx re-reads a source whose mtime changed: leave unchanged pages alone."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def page_of(title: str) -> str | None:
    """The command page of a guide section: :data:`GUIDE_PAGES`, else the command its
    title starts with (a backquoted ``crowdrank fit --method ep`` → ``fit``), else None."""
    for page, titles in GUIDE_PAGES.items():
        if title in titles:
            return page
    m = re.match(r"`crowdrank (\w+)", title)
    return m.group(1) if m and m.group(1) in GUIDE_PAGES else None


def guide_pages(docs: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The command pages' Markdown, and guide.md's anchors → the page holding them."""
    preamble, sections = split_sections((docs / "guide.md").read_text(encoding="utf-8"))
    where = {t: page_of(t) for t, _ in sections}
    for title, page in where.items():
        if page is None:
            logger.warning("docs/guide.md: section %r is on no command page; add it to "
                           "GUIDE_PAGES in docs/_ext/crowdrank_docs.py", title,
                           type="crowdrank", subtype="guide")
    for page, titles in GUIDE_PAGES.items():
        for title in titles:
            if title not in where:
                logger.warning("docs/guide.md has no section %r (GUIDE_PAGES, page %s)",
                               title, page, type="crowdrank", subtype="guide")
    anchor_page = {a: where[t] for t, b in sections if where[t] for a in anchors(t, b)}
    pages = {}
    for page in GUIDE_PAGES:
        parts = [f"# `crowdrank {page}`\n\n"]
        for title, body in sections:         # in the guide's order
            if where[title] == page:
                parts.append(f"## {title}\n" + rebase_links(body, 1, anchor_page, page))
        note = OPTIONS_NOTE.get(page, OPTIONS_NOTE[None]).format(page=page)
        parts.append(f"\n## Options\n\n{note}\n\n"
                     f"```{{argparse}}\n:module: crowdrank_docs\n:func: cli_parser\n"
                     f":prog: crowdrank\n:path: {page}\n```\n")
        pages[page] = "".join(parts)
    intro = preamble.split("\n", 1)[1].strip() if preamble.startswith("# ") else preamble
    rows = "\n".join(f"| [`crowdrank {p}`]({p}.md) | {PAGE_BLURB[p]} |" for p in GUIDE_PAGES)
    toc = "\n".join(GUIDE_PAGES)
    pages["index"] = (f"# Commands\n\n{rebase_links(intro, 1)}\n\n| command | what |\n|---|---|\n"
                      f"{rows}\n\n```{{toctree}}\n:hidden:\n\n{toc}\n```\n")
    return pages, anchor_page


RST_MARKUP = re.compile(r"([\\*`|_])")


def _escape(text: str | None) -> str | None:
    return None if text is None else RST_MARKUP.sub(r"\\\1", text)


def cli_parser():
    """``crowdrank.reports.cli.build_parser()`` with its help text escaped for rST, which
    sphinx-argparse parses it as (``max |gradient|`` would be a substitution)."""
    import argparse

    from crowdrank.reports.cli import build_parser

    def walk(p: argparse.ArgumentParser) -> None:
        p.description, p.epilog = _escape(p.description), _escape(p.epilog)
        for a in p._actions:
            if a.help not in (None, argparse.SUPPRESS):
                a.help = _escape(a.help)
            if isinstance(a, argparse._SubParsersAction):
                for sub in a._choices_actions:
                    sub.help = _escape(sub.help)
                for sub in a.choices.values():
                    walk(sub)
    parser = build_parser()
    walk(parser)
    return parser


RESULT_SOURCE = re.compile(r"\(\.\./bench/results/([\w.-]+)\.json\)")


def results_pages(docs: Path) -> tuple[str, dict[str, str]]:
    """docs/results.md by study: the index page's Markdown and {slug: page}."""
    preamble, sections = split_sections((docs / "results.md").read_text(encoding="utf-8"))
    figures = sorted(p.name for p in (docs / "figures").glob("*.png"))
    pages, rows, seen = {}, [], set()
    for title, body in sections:
        src = RESULT_SOURCE.search(body)
        stem = src.group(1) if src else None
        slug = (stem or github_slugify(title.replace("`", "")) or "section").replace("_", "-")
        while slug in seen:
            slug += "-2"
        seen.add(slug)
        figs = [f for f in figures if stem and (f == f"{stem}.png" or f.startswith(f"{stem}_"))]
        text = re.sub(r"^(#{3,6}) ", lambda m: m.group(1)[1:] + " ", body, flags=re.MULTILINE)
        text = f"# {title}\n" + rebase_links(text, 1)
        if figs:
            text += "\n## Figures\n\n" + "\n".join(
                f"![{f[:-4].replace('_', ' ')}](../figures/{f})\n" for f in figs)
        pages[slug] = text
        rows.append(f"| [{title}]({'results/' + slug}.md) | {len(figs) or ''} |")
    head = preamble.strip().split("\n", 1)
    index = (f"{head[0]}\n\n{head[1] if len(head) > 1 else ''}\n\nOne page per study "
             f"(the `##` sections of the generated page):\n\n| study | figures |\n|---|---|\n"
             + "\n".join(rows) + "\n\n```{toctree}\n:hidden:\n\n"
             + "\n".join(f"results/{s}" for s in pages) + "\n```\n")
    return index, pages


def generate(app: Sphinx) -> None:
    docs = Path(app.srcdir)
    env = app.env
    # what the last build derived, to re-read pages whose derived text changed
    env.crowdrank_before = (getattr(env, "crowdrank_results_index", None),
                            getattr(env, "crowdrank_guide_anchors", None),
                            getattr(env, "crowdrank_examples", None))
    env.crowdrank_examples = (report_examples.state(app),
                              sorted(p.name for p in (docs / "figures").glob("*.png")))
    env.crowdrank_code_before = getattr(env, "crowdrank_code", None)
    env.crowdrank_code = code_fingerprint(docs.parent)
    env.crowdrank_keys = reference_keys(docs)
    pages, env.crowdrank_guide_anchors = guide_pages(docs)
    for name, text in pages.items():
        write_if_changed(docs / "cli" / f"{name}.md", text)
    app.env.crowdrank_results_index, result_pages = results_pages(docs)
    for name, text in result_pages.items():
        write_if_changed(docs / "results" / f"{name}.md", text)
    for old in (docs / "results").glob("*.md"):      # a study that left results.md
        if old.stem not in result_pages:
            old.unlink()


CODE_DIRS = ("models", "inference", "validation", "reports")


def code_fingerprint(root: Path) -> str:
    """The package's Python files and their mtimes: Sphinx tracks the pages' sources, not
    the code that autodoc and the parser pages read."""
    h = hashlib.sha256()
    for d in CODE_DIRS:
        for f in sorted((root / d).rglob("*.py")):
            h.update(f"{f}:{f.stat().st_mtime_ns}\n".encode())
    return h.hexdigest()


def outdated(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Pages whose text is derived from other files: the API and command pages (the code),
    the results index (results.md's split), the gallery (the examples the tutorials
    wrote) and every page that links into guide.md (the anchors' pages)."""
    index_before, anchors_before, examples_before = env.crowdrank_before
    out = []
    if env.crowdrank_code_before != env.crowdrank_code:      # docstrings, options
        out += [d for d in env.found_docs if d.startswith(("api/", "cli/"))]
    if examples_before != env.crowdrank_examples:
        out += [d for d in env.found_docs if d == "gallery"]
    if index_before != env.crowdrank_results_index and "results" in env.found_docs:
        out.append("results")
    if anchors_before != env.crowdrank_guide_anchors:
        for doc in env.found_docs:
            path = env.doc2path(doc)
            if path.suffix == ".md" and "guide.md" in path.read_text(encoding="utf-8"):
                out.append(doc)
    return out


GUIDE_LINK = re.compile(r"\]\(((?:\.\./)*)guide\.md(#[\w-]+)?\)")


def source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname == "results":
        source[0] = app.env.crowdrank_results_index
        return
    if docname == "tutorials/README":
        # the notebooks under the tutorials' page in the site's navigation; the README
        # itself stays plain Markdown (GitHub shows it as the folder's page)
        source[0] += ("\n```{toctree}\n:hidden:\n\n" + "\n".join(TUTORIAL_PAGES)
                      + "\n../generative-story\n```\n")
        return
    if docname == "references":
        source[0] = CITE_KEY.sub(lambda m: "{crowdrank-refkey}`" + m.group(1) + "`", source[0])
    if app.env.doc2path(docname).suffix != ".md":
        return
    anchors_ = app.env.crowdrank_guide_anchors

    def one(m: re.Match) -> str:
        up, frag = m.group(1), m.group(2) or ""
        if docname.startswith("cli/"):
            up = ""
        page = anchors_.get(frag[1:], "index") if frag else "index"
        prefix = up if docname.startswith("cli/") else up + "cli/"
        return f"]({prefix}{page}.md{frag})"
    source[0] = GUIDE_LINK.sub(one, source[0])


class OptionalAutomodule(SphinxDirective):
    """``{crowdrank-automodule} crowdrank.x.y``: the module's members when it can be
    imported, else a note (modules that other work adds to the package)."""
    required_arguments = 1

    def run(self):
        name = self.arguments[0]
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return [nodes.note("", nodes.paragraph(
                text=f"{name} is not in the package this site was built from."))]
        # autodoc writes reStructuredText, which MyST reads only inside eval-rst
        text = StringList(["```{eval-rst}", f".. automodule:: {name}", "   :members:", "```"],
                          self.get_source_info()[0])
        container = nodes.container()
        self.state.nested_parse(text, self.content_offset, container)
        return container.children


GALLERY = re.compile(r"^```\{crowdrank-gallery\} (\S+)", re.MULTILINE)


class Gallery(SphinxDirective):
    """``{crowdrank-gallery} PREFIX`` with ``:link: DOCNAME``: a card per
    ``docs/figures/PREFIX*.png``, its thumbnail linking to the page that shows it.

    ``{crowdrank-gallery} others``: the figures no other prefix of the page shows (a
    study's new figure is in the gallery without an edit), each linking to its study's
    results page when there is one (``results/PREFIX`` for ``PREFIX_*.png``), else to the
    results."""
    required_arguments = 1
    option_spec: ClassVar[dict] = {"link": directives.unchanged}

    def run(self):
        figdir = Path(self.env.srcdir) / "figures"
        if self.arguments[0] == "others":
            source = self.env.doc2path(self.env.docname).read_text(encoding="utf-8")
            taken = tuple(p for p in GALLERY.findall(source) if p != "others")
            figs = [f for f in sorted(figdir.glob("*.png")) if not f.name.startswith(taken)]
            if not figs:
                return [nodes.paragraph(text="None: every stored figure is shown above.")]
        else:
            figs = sorted(figdir.glob(f"{self.arguments[0]}*.png"))
        if not figs:
            logger.warning("gallery: no docs/figures/%s*.png", self.arguments[0],
                           location=self.get_location())
            return []
        up = "../" * self.env.docname.count("/")
        lines = ["````{grid} 1 2 3 3", ":gutter: 2", ":class-container: crowdrank-gallery", ""]
        for f in figs:
            self.env.note_dependency(str(f))
            link = self.options.get("link") or self._study(f)
            lines += ["```{grid-item-card}", f":img-top: {up}figures/{f.name}",
                      f":link: {link}", ":link-type: doc", "",
                      f.stem.replace("_", " "), "```", ""]
        lines.append("````")
        container = nodes.container()
        self.state.nested_parse(StringList(lines, self.get_source_info()[0]),
                                self.content_offset, container)
        return container.children

    def _study(self, fig: Path) -> str:
        slug = fig.stem.split("_")[0].replace("_", "-")
        page = Path(self.env.srcdir) / "results" / f"{slug}.md"
        return f"results/{slug}" if page.is_file() else "results"


def setup(app: Sphinx) -> dict:
    report_examples.setup(app)
    app.add_directive("crowdrank-gallery", Gallery)
    app.add_role("crowdrank-refkey", refkey_role)
    app.add_directive("crowdrank-automodule", OptionalAutomodule)
    app.connect("builder-inited", generate)
    app.connect("source-read", source_read)
    app.connect("env-get-outdated", outdated)
    app.connect("doctree-resolved", link_citations)
    # before napoleon (priority 500), which turns the numpydoc sections into rST
    app.connect("autodoc-process-docstring", add_option_parameters, priority=400)
    app.connect("autodoc-process-docstring", note_attributes)
    app.connect("autodoc-skip-member", skip_described_fields)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
