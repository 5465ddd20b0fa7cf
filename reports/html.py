"""One self-contained HTML page: inline CSS, figures embedded as base64 PNG, no scripts,
no external resource of any kind, so the page opens offline and can be mailed as one file.

A page is a title and a list of :class:`Section`; a section holds *blocks*, each already an
HTML string made by :func:`paragraph`, :func:`table`, :func:`figure`, :func:`note` or
:func:`keyvalues`. Every piece of text goes through :func:`html.escape`.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;
 color:#222;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:1em 2em 4em}
h1{font-size:1.6em;border-bottom:2px solid #444;padding-bottom:.2em}
h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #bbb}
h3{font-size:1.05em;margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0;font-size:.85em;background:#fff}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:right}
th{background:#eee}td:first-child,th:first-child{text-align:left}
figure{margin:.8em 0;background:#fff;border:1px solid #ddd;padding:.4em;display:inline-block}
figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:.85em;color:#555;margin-top:.3em;max-width:900px}
.note{background:#fff4d6;border-left:4px solid #e0a800;padding:.5em .8em;margin:.6em 0}
.bad{background:#fde2e1;border-left:4px solid #c0392b;padding:.5em .8em;margin:.6em 0}
.ok{background:#e3f6e8;border-left:4px solid #2e8b57;padding:.5em .8em;margin:.6em 0}
nav a{margin-right:1em;font-size:.9em}
code{background:#eee;padding:0 .2em}
"""


@dataclass
class Section:
    """A titled part of the page; ``blocks`` are HTML strings made by this module."""

    title: str
    blocks: list[str] = field(default_factory=list)
    anchor: str | None = None

    def add(self, *blocks: str) -> Section:
        self.blocks.extend(blocks)
        return self


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def fmt(x, digits: int = 3) -> str:
    """A number for a table: ``None``/NaN as an em dash, floats to ``digits`` significant."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    try:
        f = float(x)
    except (TypeError, ValueError):
        return esc(x)
    if not math.isfinite(f):
        return "—"
    if abs(f) >= 10 ** digits:
        return f"{f:,.0f}"
    return f"{f:.{digits}g}"


def png_data_uri(fig, dpi: int = 80) -> str:
    """Render a matplotlib figure to a ``data:image/png;base64`` URI and close it."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def figure(fig, caption: str = "", dpi: int = 80, alt: str | None = None) -> str:
    """A ``<figure>`` with the figure embedded (no file, no link)."""
    return (f'<figure><img src="{png_data_uri(fig, dpi)}" alt="{esc(alt or caption)}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def paragraph(text: str) -> str:
    return f"<p>{esc(text)}</p>"


def note(text: str, kind: str = "note") -> str:
    """A highlighted box: ``kind`` is ``note``, ``bad`` or ``ok``."""
    return f'<div class="{esc(kind)}">{esc(text)}</div>'


def table(rows: Sequence[Mapping] | object, columns: Sequence[str] | None = None,
          headers: Sequence[str] | None = None, digits: int = 3) -> str:
    """An HTML table from a list of dicts or a pandas DataFrame."""
    if hasattr(rows, "to_dict"):
        rows = rows.to_dict("records")
    rows = list(rows)
    columns = list(columns or (rows[0].keys() if rows else []))
    headers = list(headers or columns)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{fmt(r.get(c), digits)}</td>" for c in columns)
                   + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def keyvalues(pairs: Mapping | Iterable[tuple[str, object]], digits: int = 4) -> str:
    """A two-column table of labels and values."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    body = "".join(f"<tr><td>{esc(k)}</td><td>{fmt(v, digits)}</td></tr>" for k, v in items)
    return f"<table><tbody>{body}</tbody></table>"


def _anchor(s: Section, i: int) -> str:
    return s.anchor or f"s{i}"


def render(title: str, sections: Sequence[Section], subtitle: str = "") -> str:
    """The whole page as one string."""
    nav = "".join(f'<a href="#{_anchor(s, i)}">{esc(s.title)}</a>'
                  for i, s in enumerate(sections))
    parts = [f'<h2 id="{_anchor(s, i)}">{esc(s.title)}</h2>' + "\n".join(s.blocks)
             for i, s in enumerate(sections)]
    sub = f"<p>{esc(subtitle)}</p>" if subtitle else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body><main>"
            f"<h1>{esc(title)}</h1>{sub}<nav>{nav}</nav>" + "\n".join(parts)
            + "</main></body></html>\n")


def write(path: str | Path, title: str, sections: Sequence[Section], subtitle: str = "") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(title, sections, subtitle), encoding="utf-8")
    return path


def heading(text: str) -> str:
    return f"<h3>{esc(text)}</h3>"


def agreement_blocks(ag, prefix: str = "", extra: str = "") -> list[str]:
    """The blocks that show a :class:`crowdrank.validation.reference.Agreement` (two PPLs' posteriors
    compared parameter by parameter): heading, verdict, rule, the worst rows, the figure.
    ``extra`` is appended to the rule's paragraph."""
    from crowdrank.reports import figures as F

    la, lb = ag.labels
    return [heading(f"{prefix}{la} against {lb} (same data, same prior)"),
            note(ag.verdict(), "ok" if ag.agree else "bad"),
            paragraph(f"Standardised difference of the posterior means, "
                      f"(m_{la} − m_{lb}) / √(MCSE_{la}² + MCSE_{lb}²), for every "
                      f"scalar parameter; it is ~N(0, 1) when both samplers are "
                      f"right. Threshold {ag.z_max:.2f}: a 1 % family-wise false "
                      f"alarm rate over {ag.n_params} parameters (Bonferroni)." + extra),
            table(ag.table.reindex(ag.table.z.abs().sort_values(ascending=False)
                                   .index).head(8),
                  ["param", f"mean_{la}", f"mean_{lb}", f"mcse_{la}", f"mcse_{lb}",
                   "diff_in_sd", "z"],
                  ["parameter", f"mean {la}", f"mean {lb}", f"MCSE {la}",
                   f"MCSE {lb}", "difference / sd", "z"]),
            figure(F.backend_agreement(ag),
                   "Every parameter's standardised difference between the two "
                   "PPLs; dashed: the threshold.")]
