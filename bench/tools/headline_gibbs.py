"""The collapsed Gibbs sampler's rows of the headline table (``bench/results/gibbs.json``,
written by ``bench/bench_gibbs.py``); their goals are in ``headline.GOALS``: the medium
scale against NUTS (in the README: its ESS per CPU second, the goal's count), SBC and the
audit with ``--reference gibbs`` (docs/results.md only: the README keeps to one screen).
The paper-scale run is a route of ``headline.paper_row``."""

from __future__ import annotations

from pathlib import Path

from headline import Row, _trusted
from records import latest_by, load

#: |z| of a parameter's posterior mean, Gibbs against NUTS (both MCSEs), within which the
#: two agree "within Monte Carlo error": over the ~300 parameters of a medium data set,
#: equal posteriors exceed 4.5 with probability below 0.2 %
Z_AGREE = 4.5
#: the medium goal's CPU share of NUTS's
CPU_SHARE = 0.2


def _medium(d: Path) -> list[dict]:
    recs = [r for r in (load(d, "gibbs.json") or []) if r.get("what") == "medium"]
    return list(latest_by(recs, lambda r: r["setting"]).values())


def medium_rows(d: Path) -> list[Row]:
    """Each worker type's latest pair: trusted (both), the CPU ratio, the agreement."""
    runs = _medium(d)
    if not runs:
        return []
    order = ("expert", "amateur", "spammer", "malicious")
    runs.sort(key=lambda r: order.index(r["setting"]) if r["setting"] in order else 9)

    def ok(r):
        return (r["gibbs"]["trusted"] and r["nuts"]["trusted"]
                and r["cpu_ratio"] <= CPU_SHARE and r["agreement"]["z_abs_max"] <= Z_AGREE)

    parts = [f"{r['setting']} {r['gibbs']['cpu_s']:.0f} / {r['nuts']['cpu_s']:.0f} CPU s "
             f"(×{r['cpu_ratio']:.2f}), max |z| {r['agreement']['z_abs_max']:.1f}"
             + ("" if r["gibbs"]["trusted"] else ", Gibbs NOT trusted")
             + ("" if r["nuts"]["trusted"] else ", NUTS NOT trusted") for r in runs]
    n_ok = sum(ok(r) for r in runs)
    ratio = [r["gibbs"]["ess_bulk_per_cpu_s"] / r["nuts"]["ess_bulk_per_cpu_s"] for r in runs
             if r["gibbs"]["trusted"] and r["nuts"]["trusted"]]
    ess = "; ".join(f"{r['setting']} {r['gibbs']['ess_bulk_per_cpu_s']:.1f} vs "
                    f"{r['nuts']['ess_bulk_per_cpu_s']:.1f}" for r in runs)
    # one row (the README keeps to a screen): the figure is the worst ESS per CPU second
    # against NUTS's, the goal the issue's, read by its count of worker types
    return [Row("collapsed Gibbs, medium: worst bulk ESS / CPU-s",
                f"×{min(ratio):.1f} NUTS's" if ratio else "no trusted pair", "gibbs medium",
                {"n": len(runs), "ok": n_ok}, "gibbs.json", runs,
                f"{n_ok} of {len(runs)} worker types trusted at ≤ 1/5 of NUTS's CPU and equal "
                "within MC error (COUPLE, L=100, W=50, 5,000 rankings, geometric prior; Gibbs "
                "2 chains, NUTS (NumPyro) 4 chains as its trusted references ran): "
                + "; ".join(parts) + "; worst-parameter bulk ESS per CPU-s, Gibbs vs NUTS: "
                + ess)]


def real_rows(d: Path) -> list[Row]:
    """The default audit data and the real sets (BabyFace, read-level): each pair's CPU
    seconds, trusted or not, and the agreement (docs/results.md only)."""
    recs = [r for r in (load(d, "gibbs.json") or []) if r.get("what") in ("default", "real")]
    runs = list(latest_by(recs, lambda r: r["subject"]).values())
    if not runs:
        return []
    parts = [f"{r['subject']}: {r['gibbs']['cpu_s']:.0f} / {r['nuts']['cpu_s']:.0f} CPU s"
             + ("" if r["gibbs"]["trusted"] else ", Gibbs NOT trusted")
             + ("" if r["nuts"]["trusted"] else ", NUTS NOT trusted")
             + f", max |z| {r['agreement']['z_abs_max']:.1f}" for r in runs]
    both = [r for r in runs if r["gibbs"]["trusted"] and r["nuts"]["trusted"]]
    return [Row("collapsed Gibbs against NUTS: default and real data",
                f"{len(both)} of {len(runs)} pairs trusted", "gibbs real", {}, "gibbs.json",
                runs, "Gibbs CPU s / NUTS CPU s (NumPyro, 4 chains, 1000 draws): "
                + "; ".join(parts), headline=False)]


def sbc_rows(d: Path) -> list[Row]:
    recs = [r for r in (load(d, "gibbs.json") or []) if r.get("what") == "sbc"]
    runs = list(latest_by(recs, lambda r: r["model"]).values())
    if not runs:
        return []
    cal = sum(bool(r["calibrated"]) for r in runs)
    return [Row("collapsed Gibbs: SBC calibrated (tail-sensitive test)",
                f"{cal} of {len(runs)}", "gibbs sbc",
                {"models": len(runs), "calibrated": cal,
                 "min_reps": min(r["replicates"] for r in runs)}, "gibbs.json", runs,
                "; ".join(f"{r['model']} (pairs) {r['replicates']} replicates, "
                          f"{r['verdict'].split(' (')[0]}, {r['wall_s'] / 60:.0f} min"
                          for r in runs), headline=False)]


def audit_rows(d: Path) -> list[Row]:
    recs = [r for r in (load(d, "gibbs.json") or []) if r.get("what") == "audit"]
    if not recs:
        return []
    by = latest_by(recs, lambda r: str(r.get("numba_cache", "warm")).split()[0])
    r = by.get("warm") or next(iter(by.values()))
    cold = by.get("cold")
    return [Row("`crowdrank audit --reference gibbs` (embedded default)",
                _trusted(f"{r['wall_s']:.0f} s", r["trusted"]), "gibbs audit",
                {"rc": r["rc"], "wall_s": r["wall_s"], "trusted": r["trusted"]},
                "gibbs.json", [r] + ([cold] if cold else []),
                "COUPLE and CrowdBT references by collapsed Gibbs, model checks included; "
                + ", ".join(f"{m} {'trusted' if g['trusted'] else 'NOT trusted'}"
                            for m, g in r["gates"].items())
                + "; numba's kernels from the checkout's cache"
                + (f" (a first run compiles them: {cold['wall_s']:.0f} s, "
                   + ("trusted)" if cold["trusted"] else "NOT trusted)") if cold else ""),
                headline=False)]


def gibbs_rows(d: Path) -> list[Row]:
    return medium_rows(d) + real_rows(d) + sbc_rows(d) + audit_rows(d)
