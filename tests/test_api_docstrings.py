"""Every public function and class on the API pages has a docstring that documents its
parameters (the site's goal, docs/api/*.md).

The objects are found the way autodoc finds them for the directives the pages use
(``autofunction``, ``autoclass``, ``automodule`` and the site's ``crowdrank-automodule``,
with ``members`` on by default, docs/conf.py): a module's ``__all__`` when it has one, else
its public functions and classes defined in it; a class's public methods defined in its
body. autodoc hides a member without a docstring (``undoc-members`` is off), so the walk
does not read the built pages: it would never see what is missing. Its list is checked
against the built site's entries instead (tests/test_docs_site.py).

The docstrings are numpydoc (docs/design.md; napoleon renders them) and are read by
numpydoc's own parser: a parameter of the signature must be named in ``Parameters`` or
``Other Parameters`` (a dataclass's fields may be its ``Attributes``, which the site shows
once, docs/conf.py), and a documented name must be a parameter.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

docscrape = pytest.importorskip("numpydoc.docscrape",
                                reason="numpydoc not installed (pip install -e '.[docs]')")

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from crowdrank_docs import option_parameters  # the site adds these (docs/_ext)

sys.path.remove(str(ROOT / "docs" / "_ext"))

DIRECTIVE = re.compile(r"^\s*(?:\.\. (autofunction|autoclass|automodule)::|"
                       r"```\{(crowdrank-automodule)\})\s+(\S+)\s*$")
OPTION = re.compile(r"^\s+:([\w-]+):\s*(.*)$")


def api_directives(pages: list[Path] | None = None) -> list[tuple[str, str, set[str]]]:
    """``(kind, dotted name, excluded members)`` of every autodoc directive of the pages."""
    out = []
    for page in pages or sorted(API.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = DIRECTIVE.match(line)
            if not m:
                continue
            kind = m.group(1) or "automodule"
            excluded: set[str] = set()
            for opt in lines[i + 1:]:
                o = OPTION.match(opt)
                if not o:
                    break
                if o.group(1) == "exclude-members":
                    excluded |= {s.strip() for s in o.group(2).split(",")}
            out.append((kind, m.group(3), excluded))
    return out


def _resolve(dotted: str):
    """The object of ``package.module.attr`` (the longest importable module prefix)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for p in parts[cut:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(dotted)


def module_members(mod) -> list[str]:
    """What ``automodule`` with ``:members:`` shows: ``__all__``, else the public functions
    and classes whose ``__module__`` is the module."""
    names = getattr(mod, "__all__", None)
    if names is not None:
        return list(names)
    return [n for n, v in vars(mod).items() if not n.startswith("_")
            and (inspect.isfunction(v) or inspect.isclass(v))
            and getattr(v, "__module__", None) == mod.__name__]


def class_members(cls) -> list[str]:
    """Public methods defined in the class body (what ``:members:`` adds; attributes and
    properties take no parameters)."""
    out = []
    for n, v in vars(cls).items():
        if n.startswith("_"):
            continue
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if inspect.isfunction(v):
            out.append(n)
    return out


def documented_objects() -> list[str]:
    """Dotted names of every function, class and method the API pages show."""
    seen: dict[str, None] = {}

    def add_class(name: str, cls) -> None:
        seen[name] = None
        for m in class_members(cls):
            seen[f"{name}.{m}"] = None

    for kind, name, excluded in api_directives():
        obj = _resolve(name)
        if kind == "automodule":
            for member in module_members(obj):
                if member in excluded:
                    continue
                value = getattr(obj, member)
                if inspect.isclass(value):
                    add_class(f"{name}.{member}", value)
                elif callable(value):
                    seen[f"{name}.{member}"] = None
        elif kind == "autoclass":
            add_class(name, obj)
        else:
            seen[name] = None
    return list(seen)


def _names(section) -> set[str]:
    """Names of a numpydoc section's entries (``a, b : int`` names two; ``*args`` kept)."""
    out = set()
    for p in section:
        out |= {n.strip() for n in p.name.split(",") if n.strip()}
    return out


def parameter_problems(obj) -> list[str]:
    """What the docstring of ``obj`` lacks: no docstring, undocumented parameters, or
    documented names that are not parameters. Empty when it is complete."""
    doc = inspect.getdoc(obj)
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj) \
            and (obj.__doc__ or "").startswith(f"{obj.__name__}("):
        doc = None                     # the signature dataclasses write, not a docstring
    if not doc:
        return ["no docstring"]
    doc += "\n" + "\n".join(option_parameters(obj))
    try:
        parsed = docscrape.NumpyDocString(doc)
    except ValueError as exc:          # numpydoc refuses a malformed section
        return [f"unreadable numpydoc: {exc}"]
    documented = _names(parsed["Parameters"]) | _names(parsed["Other Parameters"])
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
        documented |= _names(parsed["Attributes"])
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):    # a builtin without a signature: nothing to name
        return []
    wanted = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls"):
            continue
        star = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        wanted.append((p.name, star))
    problems = [f"parameter {star}{n} not documented" for n, star in wanted
                if n not in documented and f"{star}{n}" not in documented]
    allowed = {n for n, _ in wanted} | {f"{s}{n}" for n, s in wanted}
    problems += [f"documents {n!r}, which is not a parameter"
                 for n in sorted(documented - allowed)]
    return problems


def test_the_walk_finds_the_pages_objects():
    names = documented_objects()
    # one of each kind of directive, and members of an automodule and of an autoclass
    for expected in ("crowdrank.inference.nuts.fit_nuts",             # autofunction
                     "crowdrank.inference.online.OnlinePosterior",    # autoclass
                     "crowdrank.validation.pipelines.audit.audit_model",
                     "crowdrank.inference.methods.Method",            # crowdrank-automodule
                     "crowdrank.models.priors.Priors.geometric"):     # a class's method
        assert expected in names, expected
    assert "crowdrank.models.io.Rankings" not in names               # :exclude-members:


def test_every_documented_object_documents_its_parameters():
    problems = {}
    for name in documented_objects():
        found = parameter_problems(_resolve(name))
        if found:
            problems[name] = found
    assert not problems, "\n".join(f"{n}: {'; '.join(p)}" for n, p in problems.items())


def test_the_check_sees_a_missing_or_unknown_parameter():
    def f(a, b=1, *args, **kwargs):
        """Add.

        Parameters
        ----------
        a, b : int
            the numbers
        *args, **kwargs
            passed on
        """
    assert parameter_problems(f) == []

    def g(a, b):
        """Add.

        Parameters
        ----------
        a : int
            a number
        c : int
            not a parameter
        """
    assert parameter_problems(g) == ["parameter b not documented",
                                     "documents 'c', which is not a parameter"]

    def h(a):
        pass
    assert parameter_problems(h) == ["no docstring"]

    @dataclasses.dataclass
    class D:
        """A record.

        Attributes
        ----------
        x : float
            a field
        """
        x: float
        y: int = 0
    assert parameter_problems(D) == ["parameter y not documented"]
