"""The gallery's rendered reports: one example page of each report, with a thumbnail.

Two kinds, both published as ``examples/NAME.html`` beside a thumbnail ``examples/NAME.png``
(the report's first figure, its PNG bytes as embedded):

- **written by the tutorials** (:data:`TUTORIAL_EXAMPLES`): the story page and the audit
  report that the executed notebooks leave in ``docs/tutorials/`` (conf.py runs them there);
- **generated at build time** (:data:`GENERATED`): small seeded runs of ``crowdrank sbc``
  and ``crowdrank replicate``, each the command a user types (``crowdrank.reports.cli.main``
  in a child process), with its scale stated on the gallery card.

A generated example is cached in ``docs/_build/.report_examples/NAME/`` with a manifest:
the key of its inputs (the command line, Python's and the numerical libraries' versions)
and the SHA-256 of every crowdrank source file the run imported. It is re-run only when one
of these changed, like jupyter-cache for the notebooks, so an unchanged site rebuilds
without running anything. The runs start when the build starts and go on in a background
thread while Sphinx reads the pages and executes the notebooks; the build waits for them
once everything is read (``env-updated``), before the gallery is written. A run that fails
is a build warning (``make docs`` turns it into an error).

``CROWDRANK_DOCS_EXAMPLES``: ``all`` (default), ``off``, or a comma-separated list of
example names (the site test builds the two cheapest).

Run by hand: ``python docs/_ext/report_examples.py run NAME FOLDER``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]        # the repository, i.e. the package
CACHE = ROOT / "docs" / "_build" / ".report_examples"
#: the libraries whose versions are part of a generated example's key
LIBRARIES = ("numpy", "scipy", "jax", "numpyro", "pymc", "arviz", "matplotlib", "pandas")


@dataclass(frozen=True)
class Generated:
    """A report produced at build time by one ``crowdrank`` command line.

    Attributes
    ----------
    argv : tuple of str
        The command's words after ``crowdrank``; ``{out}`` stands for the output folder.
    page : str
        The HTML report the command writes into that folder.
    what : str
        The gallery card's text: which report, and at what scale.
    needs_datasets : bool
        True when the command reads the shared real data sets; the example is left out
        (with a note on the card) where they are not installed.
    """
    argv: tuple[str, ...]
    page: str
    what: str
    needs_datasets: bool = False


_QUIET = ("--processes", "1", "--no-progress", "--out", "{out}")
GENERATED: dict[str, Generated] = {
    "sbc": Generated(
        ("sbc", "--model", "pl", "--backend", "numpyro", "--sims", "30", "--items", "5",
         "--workers", "3", "--tasks", "10", "--chains", "4", "--tune", "300", "--draws",
         "400", "--ranks", "49", "--seed", "0", *_QUIET), "sbc.html",
        "`crowdrank sbc`'s page (`sbc.html`) for Plackett-Luce: 30 replicates of 5 items, "
        "3 workers x 10 rankings, NUTS in NumPyro (4 chains x 400 draws) and the online "
        "PIT; the default runs 100 replicates of 10 items"),
    "replicate-fig7": Generated(
        ("replicate", "fig7", "--scale", "60,20,20,4", "--repeats", "2", "--seed", "0",
         *_QUIET), "fig7.html",
        "`crowdrank replicate fig7`'s page: the four synthetic settings of [Pan18]'s Fig. 7 "
        "at 60 items, 20 workers x 20 tasks and 2 orders (the paper: 1000, 500 x 900)"),
    "replicate-babyface": Generated(
        ("replicate", "babyface", "--repeats", "5", "--seed", "0", *_QUIET), "babyface.html",
        "`crowdrank replicate babyface`'s page: Tables 6-7 of [Pan18] on BabyFace x5 over "
        "5 sample orders (the default 100)", needs_datasets=True),
    "replicate-crowdc": Generated(
        ("replicate", "crowdc", "--settings", "50,5,0.8,2,12;100,5,0.8,2,12", "--repeats",
         "3", "--divisions", "5", "--seed", "0", *_QUIET), "crowdc.html",
        "`crowdrank replicate crowdc`'s page: two settings of [Wang23]'s grid, 3 data sets "
        "x 5 group divisions each (the paper's grid: 68 settings, 20 x 20)"),
}

#: reports the executed tutorials write (they run in docs/tutorials/, conf.py):
#: name -> (file under docs/tutorials, what it is)
TUTORIAL_EXAMPLES = {
    "story": ("story-out/story.html", "`crowdrank story`'s page, written by tutorial 1"),
    "audit-report": ("audit-tutorial/report.html",
                     "the audit report (`report.html`) tutorial 3 builds from its fits"),
}
ALL = (*TUTORIAL_EXAMPLES, *GENERATED)

PNG = re.compile(rb'src="data:image/png;base64,([A-Za-z0-9+/=\s]+)"')


def first_figure(page: Path) -> bytes | None:
    """The PNG bytes of the first figure embedded in a self-contained report."""
    m = PNG.search(page.read_bytes())
    return base64.b64decode(m.group(1)) if m else None


# ------------------------------------------------------------------ the cache
def input_key(ex: Generated) -> str:
    """What a generated example depends on besides the code it imports."""
    versions = {}
    for lib in LIBRARIES:
        try:
            versions[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            versions[lib] = None
    blob = json.dumps({"argv": ex.argv, "page": ex.page, "python": sys.version,
                       "libraries": versions}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def is_current(name: str, folder: Path | None = None) -> bool:
    """Whether the cached example ``name`` was made from today's inputs and code."""
    folder = folder or CACHE / name
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if manifest.get("key") != input_key(GENERATED[name]):
        return False
    if not (folder / "page.html").is_file():
        return False
    for rel, digest in manifest.get("files", {}).items():
        f = ROOT / rel
        if not f.is_file() or _sha(f) != digest:
            return False
    return True


def _package_file(path: Path) -> str | None:
    """``path`` relative to the repository when it is a Python file of the package
    (the virtual environment and this script are not)."""
    path = path.resolve()
    if path.suffix != ".py" or not path.is_relative_to(ROOT):
        return None
    rel = path.relative_to(ROOT)
    return rel.as_posix() if rel.parts[0] in PACKAGE_DIRS or rel.name == str(rel) else None


PACKAGE_DIRS = ("models", "inference", "validation", "reports")


def run(name: str, folder: Path) -> dict:
    """Run the example's command in this process and cache what it wrote in ``folder``
    (``page.html``, ``thumb.png``, ``manifest.json``); returns the manifest."""
    ex = GENERATED[name]
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").unlink(missing_ok=True)
    t0 = time.perf_counter()
    from crowdrank.reports.cli import main

    rc = main([a.replace("{out}", str(out)) for a in ex.argv])
    if rc != 0:
        raise SystemExit(f"crowdrank {' '.join(ex.argv[:2])} exited with status {rc}")
    shutil.copyfile(out / ex.page, folder / "page.html")
    thumb = first_figure(folder / "page.html")
    if thumb is None:
        raise SystemExit(f"{ex.page} has no embedded figure for the thumbnail")
    (folder / "thumb.png").write_bytes(thumb)
    shutil.rmtree(out)
    # the crowdrank files this run imported: a change to any of them re-runs it
    files = {}
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        rel = _package_file(Path(f)) if f else None
        if rel is not None:
            files[rel] = _sha(ROOT / rel)
    usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    manifest = {"name": name, "key": input_key(ex), "argv": list(ex.argv),
                "files": dict(sorted(files.items())),
                "seconds": round(time.perf_counter() - t0, 1),
                "cpu_seconds": round(sum(u.ru_utime + u.ru_stime for u in usage), 1)}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def datasets_present() -> bool:
    from crowdrank.models.io import datasets_root

    return (datasets_root() / "babyface").is_dir()


def wanted(setting: str | None = None) -> list[str]:
    """The generated examples this build publishes (``CROWDRANK_DOCS_EXAMPLES``)."""
    setting = (setting if setting is not None
               else os.environ.get("CROWDRANK_DOCS_EXAMPLES", "all")).strip().lower()
    if setting == "off":
        return []
    names = list(GENERATED) if setting == "all" else [s.strip() for s in setting.split(",")]
    unknown = [n for n in names if n not in GENERATED]
    if unknown:
        raise ValueError(f"CROWDRANK_DOCS_EXAMPLES: unknown example(s) {unknown}; "
                         f"known: {', '.join(GENERATED)}, or all / off")
    return [n for n in names if not GENERATED[n].needs_datasets or datasets_present()]


class Runs(threading.Thread):
    """The stale examples, one child process after another (off the build's thread)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(daemon=True)
        self.names, self.failures = names, {}

    def run(self) -> None:
        env = dict(os.environ, MPLBACKEND="Agg")
        for name in self.names:
            proc = subprocess.run([sys.executable, __file__, "run", name, str(CACHE / name)],
                                  capture_output=True, text=True, env=env, cwd=ROOT,
                                  check=False)
            if proc.returncode != 0:
                self.failures[name] = (proc.stderr or proc.stdout)[-2000:]


def start(app) -> None:
    """builder-inited: which examples this build has; start the stale ones."""
    names = wanted()
    app.env.crowdrank_generated = names
    stale = [n for n in names if not is_current(n)]
    app.crowdrank_runs = Runs(stale)
    if stale:
        logger.info("report examples: running %s in the background", ", ".join(stale))
    app.crowdrank_runs.start()


def finish(app, env=None) -> None:
    """env-updated (everything read): wait for the runs; a failure is a warning."""
    runs = getattr(app, "crowdrank_runs", None)
    if runs is None:
        return
    runs.join()
    app.crowdrank_failed = set(runs.failures)
    for name, err in runs.failures.items():
        logger.warning("report example %s failed (python docs/_ext/report_examples.py run "
                       "%s FOLDER):\n%s", name, name, err, type="crowdrank", subtype="example")
    app.crowdrank_runs = None


# ------------------------------------------------------------------ in the pages
def sources(app) -> dict[str, tuple[Path, str]]:
    """The examples present in this build: name -> (report file, what it is)."""
    out = {}
    tut = Path(app.srcdir) / "tutorials"
    for name, (src, what) in TUTORIAL_EXAMPLES.items():
        if (tut / src).is_file():
            out[name] = (tut / src, what)
    for name in getattr(app.env, "crowdrank_generated", []):
        if name not in getattr(app, "crowdrank_failed", ()):
            out[name] = (CACHE / name / "page.html", GENERATED[name].what)
    return out


def state(app) -> tuple[str, ...]:
    """What the gallery's text depends on (a change re-reads it): the names present."""
    tut = Path(app.srcdir) / "tutorials"
    return (tuple(n for n, (src, _) in TUTORIAL_EXAMPLES.items() if (tut / src).is_file())
            + tuple(wanted()))


class report_example(nodes.General, nodes.Element):
    """Placeholder for a report example's card, resolved once every example exists."""


class ReportExample(SphinxDirective):
    """``{crowdrank-report-example} NAME``: the example's thumbnail linking to its page,
    or a note saying how to get it. Resolved at write time: the notebooks execute, and the
    generated examples run, while the sources are read."""
    required_arguments = 1

    def run(self):
        if self.arguments[0] not in ALL:
            raise self.error(f"unknown report example {self.arguments[0]!r} "
                             f"(known: {', '.join(ALL)})")
        return [report_example(key=self.arguments[0])]


def _plain(text: str) -> str:
    return text.replace("`", "")


def resolve(app, doctree: nodes.document, docname: str) -> None:
    present = sources(app)
    up = "../" * docname.count("/")
    for node in list(doctree.findall(report_example)):
        key = node["key"]
        if key in present:
            what = present[key][1]
            link = nodes.reference("", "", internal=True, refuri=f"{up}examples/{key}.html")
            # made after the sources were read, so Sphinx does not copy it ("?": leave
            # the URI alone); publish() writes the file
            link += nodes.image(uri=f"{up}examples/{key}.png", alt=f"{key}: first figure",
                                candidates={"?": f"{up}examples/{key}.png"},
                                classes=["crowdrank-example-thumb"], width="360px")
            para = nodes.paragraph()
            para += nodes.Text("Rendered example: ")
            para += nodes.reference(f"{key}.html", f"examples/{key}.html", internal=True,
                                    refuri=f"{up}examples/{key}.html")
            para += nodes.Text(f" ({_plain(what)}).")
            new = nodes.container("", nodes.paragraph("", "", link), para,
                                  classes=["crowdrank-example"])
        else:
            if key in TUTORIAL_EXAMPLES:
                what = TUTORIAL_EXAMPLES[key][1] + " when the tutorials are executed (make docs)"
            elif GENERATED[key].needs_datasets and not datasets_present():
                what = GENERATED[key].what + " (needs the shared data sets)"
            else:
                what = GENERATED[key].what + " (CROWDRANK_DOCS_EXAMPLES left it out)"
            new = nodes.paragraph(text=f"No rendered example in this build: {_plain(what)}.")
        node.replace_self(new)


def publish(app, exc) -> None:
    """build-finished: each present example and its thumbnail into ``examples/``."""
    if exc is not None or app.builder.format != "html":
        return
    finish(app)
    out = Path(app.outdir) / "examples"
    for name, (page, _) in sources(app).items():
        out.mkdir(exist_ok=True)
        shutil.copyfile(page, out / f"{name}.html")
        thumb = first_figure(page)
        if thumb is None:
            logger.warning("report example %s: %s has no embedded figure", name, page,
                           type="crowdrank", subtype="example")
            continue
        (out / f"{name}.png").write_bytes(thumb)


def setup(app) -> None:
    app.add_node(report_example)
    app.add_directive("crowdrank-report-example", ReportExample)
    app.connect("builder-inited", start)
    app.connect("env-updated", finish)
    app.connect("doctree-resolved", resolve)
    app.connect("build-finished", publish)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "run" or sys.argv[2] not in GENERATED:
        sys.exit(f"usage: {sys.argv[0]} run {{{','.join(GENERATED)}}} FOLDER")
    m = run(sys.argv[2], Path(sys.argv[3]))
    print(f"{m['name']}: {m['seconds']} s, {m['cpu_seconds']} CPU s, "
          f"{len(m['files'])} source files recorded")
