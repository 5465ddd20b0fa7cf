"""The approximation study: every online variant against a NUTS reference, on what the data
identify (docs/guide.md, "How close is each approximation").

Subjects: the audit's embedded default (COUPLE and CrowdBT, gold priors), the COUPLE paper's
four worker types at the medium scale (L = 100, W = 50, 5,000 rankings, k ≤ 4, geometric
prior a0 = 10, a = 6), BabyFace (COUPLE, geometric prior) and read-level (COUPLE with K = 2,
and CrowdBT). Variants: the one-pass update with every Taylor option and ``score_alpha``,
Gauss–Hermite moment matching (``taylor=quadrature``), and EP with 2, 5 and 10 passes over
the paper's update and over quadrature with the prior ``α``. Per variant: median |z|, sd ratio
and 90 % coverage on raw and centred scores, contrasts and ``E[η_w^1]`` (the first Dirichlet
component's Beta marginal), order probabilities, order sensitivity (seeded permutations; sd of
the centred means over permutations in MCMC sds), and cost (seconds, and × the one-pass).

Two steps, because the references are the expensive part::

    python bench/bench_fidelity.py reference [--only NAME,...]   # NUTS, cached in --cache
    python bench/bench_fidelity.py study [--only NAME,...]       # bench/results/fidelity.json
    python bench/bench_fidelity.py cost [--only NAME,...]        # CPU seconds per variant
    python bench/bench_fidelity.py gate [--only NAME,...]        # per-variable gate figures
    python bench/bench_fidelity.py merge                         # rebuild fidelity.json
    python bench/bench_fidelity.py diagnose [--only NAME,...]    # where the error is
    python bench/bench_fidelity.py damping [--only NAME,...]     # EP's fixed point vs damping
    python bench/bench_fidelity.py fixedpoints [--only NAME,...] # EP from the prior vs from NUTS
    python bench/bench_fidelity.py render                        # docs/fidelity.md

A reference that fails the convergence gate is still used and marked ``trusted: false``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))

import numpy as np
from fidelity_core import (
    CACHE,
    RESULTS,
    WORKER_TYPES,
    Reference,
    _agg,
    compare_variant,
    env,
    per_variable_gate,
    subjects,
    variants,
)
from fidelity_pages import readme_table, render
from fidelity_probes import damping_study, diagnose, fixed_points

# the names other benchmarks and tests use through this script
__all__ = ["CACHE", "RESULTS", "WORKER_TYPES", "Reference", "_agg", "compare_variant", "env",
           "per_variable_gate", "render", "subjects", "variants"]


# ------------------------------------------------------------------ step 1: references
def reference(names, cache: Path) -> None:
    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    from crowdrank.inference.nuts import fit_nuts, write_nuts
    from crowdrank.inference.online import fit_online
    from crowdrank.models.registry import get as get_model

    for name in names:
        load, model, kw = subjects()[name]
        out = cache / name
        if (out / "posterior.nc").is_file():
            print(f"{name}: cached", flush=True)
            continue
        d, pri = load()
        pri = get_model(model).worker_priors(pri, d)
        on = fit_online(d, model, pri, progress=False)
        load0 = [round(x, 2) for x in os.getloadavg()]
        t, c = time.perf_counter(), time.process_time()
        r = fit_nuts(d, model, pri, chains=4, seed=0, progress=False, approx=on, **kw)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        write_nuts(r, out)
        kept = int(r.idata["posterior"].sizes["draw"])     # more than draws when extended
        (out / "reference.json").write_text(json.dumps(
            {"name": name, "model": model, "backend": "numpyro", **kw, "draws": kept,
             "draws_per_round": kw["draws"], "trusted": bool(r.gate.trusted),
             "gate": r.gate.verdict(), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
             "loadavg_before": load0,
             "timings": {k: float(v) for k, v in r.timings.items()}, **env()}, indent=1))
        print(f"{name}: {r.gate.verdict()} ({wall:.0f} s)", flush=True)


def _chosen(model: str, only: list[str] | None) -> list[tuple[str, dict]]:
    """The variants to measure: all, or the one-pass (every cost's base) and ``only``."""
    vs = variants(model)
    if only is None:
        return vs
    bad = set(only) - {lab for lab, _ in vs}
    if bad:
        raise SystemExit(f"unknown variant(s) {sorted(bad)} for {model}")
    return [(lab, o) for lab, o in vs if lab == "one-pass" or lab in only]


def _merge_rows(old: list[dict], new: list[dict], model: str) -> list[dict]:
    """Rows of ``new`` replace those of ``old`` with the same label; order: variants()."""
    rows = {r["variant"]: r for r in old} | {r["variant"]: r for r in new}
    return [rows[lab] for lab, _ in variants(model) if lab in rows]


def study_one(name: str, cache: Path, permutations: int,
              only: list[str] | None = None) -> dict:
    from crowdrank.inference.gate import check
    from crowdrank.inference.nuts import read_nuts
    from crowdrank.models.registry import get as get_model
    from crowdrank.validation.pipelines.audit import fit_variant

    load, model, _ = subjects()[name]
    d, pri = load()
    pri = get_model(model).worker_priors(pri, d)
    idata = read_nuts(cache / name)
    info = json.loads((cache / name / "reference.json").read_text())
    gate = check(idata)
    ref = Reference(idata)
    rows = []
    base_cost = None
    # load every kernel once on a few rankings, so that no cost below includes it
    head = d.subset(np.arange(min(20, d.n_rankings)))
    for _, opts in _chosen(model, only):
        fit_variant(head, model, pri, opts, progress=False)
    for label, opts in _chosen(model, only):
        t = time.perf_counter()
        post = fit_variant(d, model, pri, opts, progress=False)
        costs = [time.perf_counter() - t]
        res = compare_variant(post, ref)
        # order sensitivity on centred means: sd over seeded permutations, in MCMC sds
        perm = []
        for p in range(permutations):
            t = time.perf_counter()
            q = fit_variant(d, model, pri, opts, order="shuffle", seed=1 + p, progress=False)
            costs.append(time.perf_counter() - t)
            idx = {it: i for i, it in enumerate(q.items)}
            mu = q.mu[[idx[i] for i in ref.items]]
            perm.append(mu - mu.mean())
        spread = np.std(np.stack(perm), axis=0, ddof=1) / ref.c_sd
        cost = min(costs)                 # the least disturbed of the 1 + P runs
        base_cost = base_cost or cost
        rows.append({"variant": label, "options": opts, "cost_s": round(cost, 4),
                     "cost_x_one_pass": round(cost / base_cost, 2), **res,
                     "order_sensitivity_median": float(np.median(spread)),
                     "ep": None if "ep" not in post.options else {
                         k: post.options["ep"][k] for k in ("passes_run", "converged",
                                                             "improper_cavities")}})
        print(f"{name} {label}: centred |z| {res['centred']['median_abs_z']:.3f} sd "
              f"{res['centred']['median_sd_ratio']:.3f}; eta1 "
              f"{res['eta1'].get('median_abs_z', float('nan')):.3f}/"
              f"{res['eta1'].get('median_sd_ratio', float('nan')):.3f}; order "
              f"{rows[-1]['order_sensitivity_median']:.3f}; {cost:.3f} s", flush=True)
    return {"name": name, "model": model, "data": d.summary(),
            "per_variable_gate": per_variable_gate(idata),
            "reference": {k: info[k] for k in ("tune", "draws", "draws_per_round",
                                               "max_draws", "trusted", "gate", "wall_s",
                                               "cpu_s", "dense_mass", "target_accept",
                                               "backend", "commit", "command", "date")
                          if k in info},
            "trusted": bool(gate.trusted), "permutations": permutations, "variants": rows,
            **env()}


def goals(res: list[dict]) -> dict:
    """The issue's goals, checked on the measured numbers."""
    out = {}
    medium = [r for r in res if r["name"].startswith("medium-")]

    def ok(v):
        def box(a):
            return (a.get("median_abs_z", 9) <= 0.1
                    and 0.9 <= a.get("median_sd_ratio", 0) <= 1.1)
        return (box(v["centred"]) and box(v["eta1"])
                and v.get("cpu_x_one_pass", v["cost_x_one_pass"]) <= 10)
    for r in medium:
        best = [v["variant"] for v in r["variants"] if ok(v)]
        cheap = [v for v in r["variants"]
                 if v.get("cpu_x_one_pass", v["cost_x_one_pass"]) <= 10]
        near = min(cheap, key=lambda v: v["centred"]["median_abs_z"])
        out[r["name"]] = {"variants_in_goal": best, "trusted": r["trusted"],
                          "scores_pass_gate": bool((r.get("per_variable_gate") or {})
                                                   .get("lambda", {}).get("passes")),
                          "closest_within_cost": {
                              "variant": near["variant"],
                              "centred_abs_z": near["centred"]["median_abs_z"],
                              "centred_sd_ratio": near["centred"]["median_sd_ratio"],
                              "eta1_abs_z": near["eta1"].get("median_abs_z"),
                              "eta1_sd_ratio": near["eta1"].get("median_sd_ratio"),
                              "cpu_x_one_pass": near.get("cpu_x_one_pass")}}
    bf = [r for r in res if r["name"] == "babyface-couple"]
    if bf:
        v = {x["variant"]: x for x in bf[0]["variants"]}
        one = v["one-pass"]
        out["babyface"] = {
            lab: {"centred_z_ratio": v[lab]["centred"]["median_abs_z"]
                  / one["centred"]["median_abs_z"],
                  "order_ratio": v[lab]["order_sensitivity_median"]
                  / one["order_sensitivity_median"]}
            for lab in v if lab.startswith("ep")}
    return out


def study(names, cache: Path, permutations: int, only: list[str] | None = None) -> None:
    """Study each subject (its result also kept as ``<cache>/<name>/study.json``), then
    rebuild ``bench/results/fidelity.json`` from every subject studied so far, so that
    studies run separately (or at once) all end up in it."""
    for n in names:
        if (cache / n / "posterior.nc").is_file():
            r = study_one(n, cache, permutations, only)
            old = cache / n / "study.json"
            if only is not None and old.is_file():    # add/replace rows of the last study
                r["variants"] = _merge_rows(json.loads(old.read_text())["variants"],
                                            r["variants"], r["model"])
            (cache / n / "study.json").write_text(json.dumps(r, indent=1, allow_nan=False))
    merge(cache)


def cost(names, cache: Path, repeats: int = 3, only: list[str] | None = None) -> None:
    """CPU seconds (``time.process_time``, which a loaded machine does not inflate the way
    it does wall time) of each variant's fit, the least of ``repeats`` runs (one when a run
    takes over 2 s), written into the subject's ``study.json`` as ``cpu_s`` and
    ``cpu_x_one_pass``."""
    from crowdrank.models.registry import get as get_model
    from crowdrank.validation.pipelines.audit import fit_variant

    for name in names:
        path = cache / name / "study.json"
        if not path.is_file():
            continue
        res = json.loads(path.read_text())
        load, model, _ = subjects()[name]
        d, pri = load()
        pri = get_model(model).worker_priors(pri, d)
        head = d.subset(np.arange(min(20, d.n_rankings)))
        base = None
        current = dict(variants(model))
        for row in res["variants"]:
            # the label's options as variants() now spells them (an "epN" row stored before
            # its damping was explicit would otherwise run under today's default)
            row["options"] = current.get(row["variant"], row["options"])
            if only is not None and row["variant"] != "one-pass" and row["variant"] not in only:
                if base is not None and row.get("cpu_s") is not None:
                    row["cpu_x_one_pass"] = round(row["cpu_s"] / base, 1)
                continue
            fit_variant(head, model, pri, row["options"], progress=False)
            runs = []
            for _ in range(repeats):
                t = time.process_time()
                fit_variant(d, model, pri, row["options"], progress=False)
                runs.append(time.process_time() - t)
                if runs[-1] > 2.0:
                    break
            row["cpu_s"] = round(min(runs), 4)
            base = base or row["cpu_s"]
            row["cpu_x_one_pass"] = round(row["cpu_s"] / base, 1)
            print(f"{name} {row['variant']}: {row['cpu_s']:.4f} CPU s "
                  f"({row['cpu_x_one_pass']}x)", flush=True)
        res["cost_run"] = {k: v for k, v in env().items()
                           if k in ("date", "commit", "command", "loadavg")}
        path.write_text(json.dumps(res, indent=1, allow_nan=False))
    merge(cache)


def regate(names, cache: Path) -> None:
    """Add the per-variable gate figures to studies measured before they were recorded."""
    from crowdrank.inference.nuts import read_nuts

    for name in names:
        path = cache / name / "study.json"
        if path.is_file():
            res = json.loads(path.read_text())
            res["per_variable_gate"] = per_variable_gate(read_nuts(cache / name))
            path.write_text(json.dumps(res, indent=1, allow_nan=False))
    merge(cache)


def merge(cache: Path) -> None:
    path = RESULTS / "fidelity.json"
    res = [json.loads((cache / n / "study.json").read_text()) for n in subjects()
           if (cache / n / "study.json").is_file()]
    path.write_text(json.dumps({"bench": "fidelity", "subjects": res, "goals": goals(res)},
                               indent=1, allow_nan=False))
    print(f"wrote {path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("reference", "study", "cost", "gate", "merge", "render",
                                     "diagnose", "damping", "fixedpoints"))
    ap.add_argument("--only", default=None, help="comma-separated subject names")
    ap.add_argument("--cache", default=str(CACHE), help="folder of the NUTS references")
    ap.add_argument("--permutations", type=int, default=3)
    ap.add_argument("--variants", default=None,
                    help="study/cost: only these variant labels (';'-separated, e.g. "
                         "'ep3 damping=0;ep5 damping=0'), merged into the subject's last "
                         "study; the one-pass is always re-measured (the cost base)")
    args = ap.parse_args(argv)
    names = list(subjects()) if args.only is None else args.only.split(",")
    only = None if args.variants is None else [v.strip() for v in args.variants.split(";")
                                                if v.strip()]
    bad = [n for n in names if n not in subjects()]
    if bad:
        ap.error(f"unknown subject(s) {bad}; expected {list(subjects())}")
    if args.step == "render":
        render()
        print(readme_table())
    elif args.step == "merge":
        merge(Path(args.cache))
    elif args.step == "gate":
        regate(names, Path(args.cache))
    elif args.step == "cost":
        cost(names, Path(args.cache), only=only)
    elif args.step == "reference":
        reference(names, Path(args.cache))
    elif args.step == "diagnose":
        diagnose(names, Path(args.cache))
    elif args.step == "damping":
        damping_study(names)
    elif args.step == "fixedpoints":
        fixed_points(names, Path(args.cache))
    else:
        study(names, Path(args.cache), args.permutations, only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
