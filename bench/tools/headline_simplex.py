"""The rows of the approximations that follow the worker simplex (``ep-exact``, the
structured and flow guides), read from the approximation study
(``bench/results/approx_study.json``, written by ``bench/bench_approx_study.py``); their goals
are in ``headline.GOALS``:

- on each of the four medium worker types, BabyFace and the default COUPLE data, one method
  inside the fidelity box at ≤ 1/10 of the trusted NUTS reference's CPU seconds (any method
  of the study: the goal asks for one, whichever it is);
- the best new method's distance to the box no larger than the best distance of the
  methods the study had before them, on each of those subjects."""

from __future__ import annotations

from pathlib import Path

from headline import Row
from records import load

#: the goal's subjects, in the issue's order
SUBJECTS = ("medium-expert", "medium-amateur", "medium-spammer", "medium-malicious",
            "babyface-couple", "default-couple")
#: the registry methods that follow the simplex; a study row is theirs when its label's
#: first word is one of them (``ep-exact scores=exact`` is ``ep-exact``)
NEW_METHODS = ("ep-exact", "ep-joint", "structured-vi", "coupled-vi", "flow-vi")
#: the goal's share of the reference's CPU seconds
CPU_SHARE = 0.1


def _is_new(label: str) -> bool:
    return label.split()[0] in NEW_METHODS


def _subjects(d: Path) -> list[dict]:
    st = load(d, "approx_study.json")
    if not st:
        return []
    by = {s["name"]: s for s in st.get("subjects", [])}
    return [by[n] for n in SUBJECTS if n in by]


def _runs(d: Path) -> list[dict]:
    """The runs that wrote the rows read (each with its date, commit and command): the
    study's first run and every later run of some methods merged into it."""
    st = load(d, "approx_study.json") or {}
    head = {k: st[k] for k in ("date", "commit", "command", "load_before") if k in st}
    return [head] + [r for r in st.get("merged_runs", [])
                     if set(r.get("subjects", [])) & set(SUBJECTS)]


def _done(s: dict) -> list[dict]:
    return [m for m in s.get("methods", []) if m.get("status") == "done"]


def _short(name: str) -> str:
    return name.removeprefix("medium-").removesuffix("-couple")


def box_row(d: Path) -> list[Row]:
    """One method inside the box at ≤ 1/10 of NUTS's CPU, per subject."""
    subs = _subjects(d)
    if not subs:
        return []
    met, parts, open_ = [], [], []
    for s in subs:
        ref = (s.get("reference") or {}).get("cpu_s")
        done = _done(s)
        if not ref or not s.get("trusted") or not done:
            open_.append(_short(s["name"]))
            continue
        ok = [m for m in done if m.get("inside_box") and m["cpu_s"] <= CPU_SHARE * ref]
        best = min(done, key=lambda m: (m["box_distance"], m["cpu_s"]))
        if ok:
            met.append(_short(s["name"]))
            m = min(ok, key=lambda m: m["cpu_s"])
            parts.append(f"{_short(s['name'])}: {m['label']} inside at {m['cpu_s']:.2f} of "
                         f"NUTS's {ref:.0f} CPU s")
        else:
            parts.append(f"{_short(s['name'])}: none; closest {best['label']} at distance "
                         f"{best['box_distance']:.3f}, {best['cpu_s']:.2f} of NUTS's {ref:.0f} "
                         "CPU s")
    figure = f"{len(met)} of {len(SUBJECTS)}" + (f", {len(open_)} open" if open_ else "")
    return [Row("inside the box at ≤ 1/10 NUTS CPU", figure,
                "simplex in the box",
                {"n": len(SUBJECTS), "inside": len(met), "open": len(open_)},
                "approx_study.json", _runs(d),
                "; ".join(parts) + (f"; not run or untrusted: {', '.join(open_)}"
                                    if open_ else ""))]


def distance_row(d: Path) -> list[Row]:
    """The best new method's distance against the best of the methods before them."""
    subs = _subjects(d)
    if not subs:
        return []
    no_farther, parts, open_ = 0, [], []
    for s in subs:
        done = _done(s)
        new = [m for m in done if _is_new(m["label"])]
        old = [m for m in done if not _is_new(m["label"])]
        if not new or not old or not s.get("trusted"):
            open_.append(_short(s["name"]))
            continue
        bn = min(new, key=lambda m: m["box_distance"])
        bo = min(old, key=lambda m: m["box_distance"])
        no_farther += bn["box_distance"] <= bo["box_distance"]
        parts.append(f"{_short(s['name'])}: {bn['label']} {bn['box_distance']:.3f} vs "
                     f"{bo['label']} {bo['box_distance']:.3f}")
    figure = f"{no_farther} of {len(SUBJECTS)}" + (f", {len(open_)} open" if open_ else "")
    return [Row("simplex vs old best distance", figure, "simplex distance",
                {"n": len(SUBJECTS), "ok": no_farther, "open": len(open_)},
                "approx_study.json", _runs(d),
                "the best new method's distance to the box against the best of the methods "
                "before them: " + "; ".join(parts)
                + (f"; not run: {', '.join(open_)}" if open_ else ""))]


def simplex_rows(d: Path) -> list[Row]:
    return box_row(d) + distance_row(d)
