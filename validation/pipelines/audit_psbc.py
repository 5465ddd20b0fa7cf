"""The audit's verdict without a reference: posterior SBC of every audited approximation
(:mod:`.posterior_sbc`), beside NUTS, and instead of it when NUTS is over the budget.

Each approximation's own fit in the audit is the base (no second fit); a method whose
replicates would take longer than ``AuditConfig.posterior_sbc_minutes`` (estimated from one
timed pilot replicate) is skipped, and the row says so; an external file cannot be
refitted.
"""

from __future__ import annotations

from pathlib import Path

from crowdrank.validation.pipelines.variants import variant_label, variant_method


def pilot_seconds(data, priors, pcfg, folder: Path, base, spec=None) -> float:
    """Wall seconds of one replicate (θ′, y′, the refit, the ranks), timed once: replicate
    0, run and cached as the full run would, which then reuses it."""
    from crowdrank.validation.pipelines.posterior_sbc import (
        prepare,
        replicate_job,
        replicate_specs,
    )
    from crowdrank.validation.runtime.grid import run_grid

    path, ctx = prepare(data, priors, pcfg, folder, base=base, spec=spec)
    first = run_grid(replicate_specs(path, ctx, 1), replicate_job, folder / "cache",
                     processes=1, progress=False).results[0]
    return float(first["seconds"])


def row(model: str, opts: dict, summary: dict | None, *, skipped: str | None = None,
        folder: str | None = None) -> dict:
    """One approximation's entry of ``metrics.json``'s ``posterior_sbc``."""
    out = {"model": model, "variant": variant_label(opts), "method": opts.get("method",
                                                                               "online")}
    if skipped:
        return {**out, "skipped": skipped}
    fams = summary["ranks"]["families"]
    tol = summary["tolerance"]["groups"]
    return {**out, "calibrated": summary["calibrated"], "verdict": summary["verdict"],
            "strict_calibrated": summary["strict_calibrated"],
            "groups": {f: {"calibrated": not tol[f]["outside"],
                           "sd_ratio": tol[f]["sd_ratio"],
                           "sd_ratio_bounds": [tol[f]["sd_ratio_lo"], tol[f]["sd_ratio_hi"]],
                           "abs_z": tol[f]["abs_z"],
                           "abs_z_bounds": [tol[f]["abs_z_lo"], tol[f]["abs_z_hi"]],
                           "strict_calibrated": v["calibrated"],
                           "ecdf_p": v["ecdf_p_combined"],
                           "pot_c_p": v["pot_c_p_combined"]} for f, v in fams.items()},
            "contraction": {f: v["median"] for f, v in
                            summary["checks"]["contraction"]["groups"].items()},
            "predictive_p": summary["checks"]["predictive"]["p"],
            "replicates": summary["replicates"],
            "rankings_added": summary["timing"]["rankings_added"],
            "seconds": summary["timing"]["wall_s_this_run"], "folder": folder}


def posterior_sbc_rows(data, model, priors, variants: list[dict], posts: list, cfg,
                       out: Path | None, log) -> list[dict]:
    """Posterior SBC of each audited approximation (``variants`` and their fits ``posts``),
    written under ``out/posterior_sbc/MODEL/LABEL``. ``model``: a name or the audit's
    :class:`~crowdrank.models.registry.ModelSpec`, handed down to every run."""
    import tempfile

    from crowdrank.models.registry import as_spec
    from crowdrank.validation.pipelines.posterior_sbc import (
        PosteriorSbcConfig,
        run_posterior_sbc,
    )

    spec = as_spec(model)
    model = spec.name
    rows = []
    root = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="psbc-"))
    for opts, post in zip(variants, posts):
        label = variant_label(opts)
        if str(opts.get("method", "")).startswith("file:"):
            rows.append(row(model, opts, None, skipped="an external file: nothing to refit"))
            continue
        method, options = variant_method(opts)
        folder = Path("posterior_sbc") / model / label.replace(" ", "_").replace("/", "_")
        pcfg = PosteriorSbcConfig(method=method, model=model, sims=cfg.posterior_sbc,
                                  seed=cfg.seed, options=options)
        est = cfg.posterior_sbc * pilot_seconds(data, priors, pcfg, root / folder, post,
                                                spec)
        if est > 60.0 * cfg.posterior_sbc_minutes:
            rows.append(row(model, opts, None, skipped=(
                f"estimated {est / 60:.1f} min (one replicate timed) > "
                f"--posterior-sbc-minutes {cfg.posterior_sbc_minutes:g}")))
            log(f"{model}: posterior SBC of {label} skipped ({rows[-1]['skipped']})")
            continue
        log(f"{model}: posterior SBC of {label} ({cfg.posterior_sbc} replicates)")
        summary = run_posterior_sbc(data, priors, pcfg, root / folder, processes=1,
                                    progress=False, base=post, spec=spec)
        rows.append(row(model, opts, summary, folder=str(folder)))
        log(f"{model}: {label}: {summary['verdict']}")
    return rows
