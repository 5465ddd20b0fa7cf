"""The collapsed Gibbs sampler's rows of the headline table (``bench/results/gibbs.json``,
written by ``bench/bench_gibbs.py``); their goals are in ``headline.GOALS``: the medium
scale against NUTS (in the README: its ESS per CPU second, the goal's count), SBC and the
audit with ``--reference gibbs``, the pairs against NUTS in PyMC and the sweep at 45 M
rankings (docs/results.md only: the README keeps to one screen).
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


def _backend(r: dict) -> str:
    """The PPL of a pair's NUTS reference (the first records, before ``--nuts-backend``,
    are NumPyro's)."""
    return r["nuts"].get("backend", "numpyro")


def _medium(d: Path, backend: str = "numpyro") -> list[dict]:
    """Each worker type's latest pair against NUTS in ``backend``, in the issue's order."""
    recs = [r for r in (load(d, "gibbs.json") or [])
            if r.get("what") == "medium" and _backend(r) == backend]
    runs = list(latest_by(recs, lambda r: r["setting"]).values())
    order = ("expert", "amateur", "spammer", "malicious")
    runs.sort(key=lambda r: order.index(r["setting"]) if r["setting"] in order else 9)
    return runs


def medium_rows(d: Path) -> list[Row]:
    """Each worker type's latest pair: trusted (both), the CPU ratio, the agreement."""
    runs = _medium(d)
    if not runs:
        return []

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


def medium_pymc_rows(d: Path) -> list[Row]:
    """The same pairs against NUTS in PyMC (the issue's "equality with trusted NUTS in both
    PPLs"): trusted by both, the agreement and the CPU seconds (docs/results.md only)."""
    runs = _medium(d, "pymc")
    if not runs:
        return []
    both = [r for r in runs if r["gibbs"]["trusted"] and r["nuts"]["trusted"]]
    agree = [r for r in both if r["agreement"]["z_abs_max"] <= Z_AGREE]
    parts = [f"{r['setting']} {r['gibbs']['cpu_s']:.0f} / {r['nuts']['cpu_s']:.0f} CPU s, "
             f"max |z| {r['agreement']['z_abs_max']:.2f} ({r['agreement']['n_z_over_4']} of "
             f"{r['agreement']['n_params']} above 4)"
             + ("" if r["gibbs"]["trusted"] else ", Gibbs NOT trusted")
             + ("" if r["nuts"]["trusted"] else ", NUTS NOT trusted") for r in runs]
    return [Row("collapsed Gibbs against NUTS in PyMC, medium",
                f"{len(agree)} of {len(runs)} equal within MC error", "gibbs real", {},
                "gibbs.json", runs,
                f"{len(both)} of {len(runs)} worker types trusted by both samplers; equal: "
                f"every posterior mean within |z| {Z_AGREE} (COUPLE, L=100, W=50, 5,000 "
                "rankings, geometric prior; Gibbs 2 chains, NUTS (PyMC) 4 chains with the "
                "draws of the NumPyro references); Gibbs CPU s / NUTS CPU s: "
                + "; ".join(parts), headline=False)]


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
                runs, "Gibbs CPU s / NUTS CPU s (4 chains, 1000 draws; NumPyro, PyMC where "
                "the subject ends -pymc): "
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


def sweep_rows(d: Path) -> list[Row]:
    """The largest size ``bench_gibbs.py sweep45m`` measured: one chain's sweep on one core
    and the projection of a trusted run there; a size that did not fit says so
    (docs/results.md only)."""
    recs = [r for r in (load(d, "gibbs.json") or []) if r.get("what") == "sweep45m"]
    by = latest_by(recs, lambda r: r["N"])
    fit = sorted((r for r in by.values() if r.get("fits")), key=lambda r: r["N"])
    if not fit:
        return []
    big = fit[-1]
    skipped = [r for r in by.values() if not r.get("fits") and r["N"] > big["N"]]
    proj = big["projection"]
    walls = "; ".join(f"{k}: {v:.1f} h" for k, v in proj["wall_h"].items())
    sizes = ", ".join(f"{r['N'] / 1e6:g} M {r['sweep_ms'] / 1000:.2f} s" for r in fit)
    return [Row(f"collapsed Gibbs: a sweep at {big['N'] / 1e6:g} M rankings",
                f"{big['sweep_ms'] / 1000:.1f} CPU s", "gibbs 45m", {}, "gibbs.json",
                [big, *skipped],
                f"one chain on one core, the paper-scale run's sweep (step size "
                f"{big['eps']}, {big['walk_steps']} walk steps, {big['jumps']} jump); "
                f"{big['stages']:,} stages, {big['layout_bytes_per_stage']:g} + "
                f"{big['state_bytes_per_stage']:g} bytes each (layout + chain state), peak "
                f"RSS {big['peak_rss_bytes'] / 2 ** 30:.1f} GiB; CPU s per sweep: {sizes} "
                f"(wall {big['sweep_wall_ms'] / 1000:.0f} s at {big['N'] / 1e6:g} M on the "
                f"shared machine); "
                + "".join(f"{r['N'] / 1e6:g} M not built ({r['note']}); " for r in skipped)
                + f"projected, not measured (a trusted run if the same sweeps per chain "
                f"reach the gate as in {proj['basis']}; each chain a Dask task on a machine "
                f"of its own, more chains splitting the kept draws): {walls}",
                headline=False)]


def gibbs_rows(d: Path) -> list[Row]:
    return (medium_rows(d) + medium_pymc_rows(d) + real_rows(d) + sbc_rows(d)
            + audit_rows(d) + sweep_rows(d))
