"""The audit pipeline: fit a model both ways (NUTS and online moment matching) under the
same priors, compare the posteriors, and write the metrics and the fits. It is the one
pipeline behind ``crowdrank audit``, the experiment grid
(:func:`crowdrank.validation.pipelines.audit_grid.audit_job`) and the tests; :mod:`crowdrank.reports.audit` only adds the
HTML page.

Output folder layout (docs/contracts.md, Audit outputs)::

    DIR/report.html              one self-contained page
    DIR/metrics.json             aggregates, gate, ranking/worker agreement, order, timings
    DIR/parameters.csv           one row per parameter × online variant, real ids
    DIR/identified.csv           centred scores, contrasts (with order probabilities) and
                                 the common level, per online variant
    DIR/<model>/nuts/posterior.nc (+ summary.csv)
    DIR/<model>/online/posterior.json            the default (paper's) online variant
    DIR/<model>/online/variants/<label>.json     the other variants compared
    DIR/checks/<model>/posterior.nc              models fitted only for the LOO comparison

With no data the subject is the embedded default (:func:`default_subject`): a seeded
simulation with the paper's ``amateur`` workers ([Pan18], Sect. 5.2) at a scale that lets
NUTS reach the convergence gate within the 3-minute budget on 2 cores.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec, as_spec
from crowdrank.models.registry import names as model_names
from crowdrank.validation.pipelines.audit_config import (  # noqa: F401  (re-exported)
    AUDITABLE,
    DEFAULT_SIMULATION,
    MODELS,
    QUICK_MANY_PARAMS,
    AuditConfig,
    Subject,
    default_subject,
    make_priors,
    n_scalar_params,
    quick_draws,
)
from crowdrank.validation.pipelines.audit_metrics import (  # noqa: F401  (re-exported)
    _approx_diagnostics,
    _gate_dict,
    build_metrics,
    jsonable,
)
from crowdrank.validation.pipelines.variants import (  # noqa: F401  (the audit's names, re-exported)
    BASE_VARIANTS,
    GENERIC_VARIANTS,
    VARIANT_CHOICES,
    fit_variant,
    model_variants,
    parse_variants,
    variant_choices,
    variant_label,
    variant_list,
)


class Log:
    """Progress lines on stderr with the elapsed time.

    Parameters
    ----------
    enabled : bool
        Print, or stay silent.
    stream : file, optional
        Where (default stderr).
    """

    def __init__(self, enabled: bool = True, stream=None):
        self.enabled, self.t0 = enabled, time.perf_counter()
        self.stream = stream or sys.stderr

    def __call__(self, msg: str) -> None:
        if self.enabled:
            print(f"[audit {time.perf_counter() - self.t0:6.1f}s] {msg}", file=self.stream,
                  flush=True)


@dataclass
class ModelAudit:
    """Everything measured for one model.

    Attributes
    ----------
    model : str
        The model's name.
    nuts : NutsResult
        The reference's own result.
    online : Posterior
        The default variant's posterior.
    comparisons : list of Comparison
        One per variant, the default first.
    variant_opts : list of dict
        The variants' options.
    order : dict or None
        The online answer over permutations of the data.
    timings : list of dict
        The fits' timings.
    online_seconds : dict
        Seconds of each variant's fit.
    agreement : Agreement or None
        The two PPLs' agreement, when checked.
    other_nuts : NutsResult or None
        The other PPL's fit, when checked.
    posteriors : list of Posterior
        Every variant's posterior, the default first.
    spec : ModelSpec or None
        The model's spec (``None``: an audit assembled from its parts, read by name).
    """

    model: str
    nuts: object                       # NutsResult (the reference's native result)
    online: object                     # Posterior of the default variant
    comparisons: list                  # validation.compare.Comparison, default first
    variant_opts: list[dict]
    order: dict | None
    timings: list[dict]
    online_seconds: dict
    agreement: object = None           # validation.reference.Agreement, when checked
    other_nuts: object = None          # the other PPL's NutsResult, when checked
    posteriors: list = field(default_factory=list)   # every variant's Posterior, default first
    spec: ModelSpec | None = None

    def variant_posteriors(self) -> list:
        """One Posterior per comparison, in its order; ``None`` each for an audit assembled
        without its posteriors (the field's default)."""
        return self.posteriors or [None] * len(self.comparisons)


def audit_model(subject: Subject, model: str | ModelSpec, priors: Priors, cfg: AuditConfig,
                out: Path | None, log: Callable[[str], None] | None = None, *,
                variants: list[dict] | None = None) -> ModelAudit:
    """Fit ``model`` by NUTS and by every online variant, compare, and write the fits into
    ``out`` (nothing is written when ``out`` is None). ``variants`` (online option sets,
    the first one the default) overrides the ones ``cfg.variants`` asks for.

    Parameters
    ----------
    subject : Subject
        The data audited, with its truth where known.
    model : str or ModelSpec
        A name of the model registry (looked up here), or its spec.
    priors : Priors
        The one prior object every fit reads (:func:`make_priors`).
    cfg : AuditConfig
        The audit's choices.
    out : Path or None
        The folder of the fits.
    log : callable, optional
        Progress lines.
    variants : list of dict, optional
        Online option sets.
    """
    from crowdrank.validation.compare import (
        align,
        compare,
        comparison_components,
        order_sensitivity,
    )

    spec = as_spec(model)
    model = spec.name          # the name where a name is written: logs, tables, files
    log = log or (lambda msg: None)
    data = subject.data
    pri = spec.worker_priors(priors, data)
    if variants is None:
        variants = model_variants(spec, cfg.variants)
    posts, secs = fit_approximations(data, spec, pri, variants, cfg, log)
    if cfg.reference == "gibbs":
        log(f"{model}: the reference by collapsed Gibbs")
    else:
        log(f"{model}: NUTS ({cfg.backend}, {cfg.chains} chains × {cfg.tune} tune + "
            f"{cfg.draws} draws)")
    ref = reference_fit(data, spec, pri, cfg, cfg.backend, cfg.seed,
                        posts[0] if cfg.warm_start else None)
    nuts = ref.native
    log(f"{model}: {cfg.reference_label} done in "
        f"{nuts.timings.get('total', float('nan')):.1f}s — " + ref.gate.verdict())
    agreement = alt = None
    if cfg.check_backends:
        from crowdrank.validation.reference import backend_agreement
        other = "pymc" if cfg.backend == "numpyro" else "numpyro"
        log(f"{model}: NUTS with {other} as well, to compare the two PPLs")
        alt = reference_fit(data, spec, pri, cfg, other, cfg.seed + 1,
                            posts[0] if cfg.warm_start else None, chain_method=False).native
        agreement = backend_agreement(nuts.idata, alt.idata, labels=(cfg.backend, other))
        agreement.other_gate = alt.gate
        log(f"{model}: {agreement.verdict()}")
    items = [str(v) for v in nuts.idata["posterior"]["item"].values]
    truth = None if subject.truth is None else align(subject.truth, data.items, items)
    # accuracy only over pairs the data can order (one component of the comparison graph)
    comp = None if truth is None else align(comparison_components(data), data.items, items)
    eta1 = None
    if subject.truth_eta1 is not None and "worker" in nuts.idata["posterior"].coords:
        wids = [str(v) for v in nuts.idata["posterior"]["worker"].values]
        eta1 = align(subject.truth_eta1, data.workers, wids, "worker(s)")
    log(f"{model}: comparing {len(variants)} online variant(s) with NUTS")
    comps = []
    for opts, post in zip(variants, posts):
        c = compare(ref, post, truth=truth, truth_eta1=eta1, model=model,
                    variant=variant_label(opts), components=comp)
        if c.workers is not None and eta1 is not None:
            c.workers["quality_truth"] = eta1.tolist()
        comps.append(c)
    order = None
    if cfg.permutations >= 2:
        log(f"{model}: order sensitivity over {cfg.permutations} seeded permutations")
        lam = comps[0].parameters[comps[0].parameters.kind == "lambda"]
        perm = np.stack([align(fit_variant(data, spec, pri, variants[0], order="shuffle",
                                           seed=cfg.seed + 1 + p, progress=False).mu,
                               posts[0].items, items)
                         for p in range(cfg.permutations)])
        order = order_sensitivity(perm, lam.approx_mean.to_numpy(), lam.mcmc_mean.to_numpy(),
                                  lam.mcmc_sd.to_numpy(), ids=items)
    tm = [{"label": f"{model} NUTS {k}", "seconds": float(v)} for k, v in nuts.timings.items()
          if k in ("compile", "warmup", "sampling", "total")]
    tm += [{"label": f"{model} online {k} (wall)", "seconds": v["wall"]} for k, v in secs.items()]
    audit = ModelAudit(model, nuts, posts[0], comps, variants, order, tm, secs, agreement,
                       alt, posts, spec)
    if out is not None:
        write_model_fits(audit, out, cfg)
    return audit


def fit_approximations(data, model: str | ModelSpec, pri, variants: list[dict],
                       cfg: AuditConfig, log) -> tuple[list, dict]:
    """Fit every option set (:func:`fit_variant`) with its PSIS k̂: ``(posteriors,
    seconds by label)``.

    Parameters
    ----------
    data : Rankings
        The data.
    model : str or ModelSpec
        A name of the model registry, or its spec.
    pri : Priors
        The priors.
    variants : list of dict
        Option sets, one fit each.
    cfg : AuditConfig
        The audit's choices.
    log : callable
        Progress lines.
    """
    from crowdrank.inference.approx.psis import posterior_khat

    spec = as_spec(model)
    model = spec.name
    posts, secs = [], {}
    for opts in variants:
        label = variant_label(opts)
        log(f"{model}: online pass ({label})")
        t = time.perf_counter()
        post = fit_variant(data, spec, pri, opts, progress=cfg.progress_bars,
                           seed=cfg.seed, resamples=cfg.bootstrap, processes=cfg.processes)
        secs[label] = {"wall": time.perf_counter() - t, "updates": float(post.seconds)}
        # PSIS k̂ of every approximation with a density ("not reliable" above 0.7)
        post.diagnostics.update(posterior_khat(post, data, spec, pri, seed=cfg.seed))
        if "assumed_family" in post.diagnostics:      # an external file's stated family
            log(f"{model}: {label} read as {post.diagnostics['assumed_family']}")
        posts.append(post)
    return posts, secs


def reference_fit(data, model: str | ModelSpec, priors, cfg: AuditConfig, backend: str,
                  seed: int,
                  approx=None, *, chain_method: bool = True):
    """The reference through the method registry: the ``nuts`` entry with the audit's
    sampler settings (``approx``: the warm start), or with ``cfg.reference == "gibbs"`` the
    ``gibbs`` entry (:func:`_gibbs_reference`); a
    :class:`~crowdrank.inference.posterior.Posterior` whose ``native`` is the
    ``NutsResult`` (or ``GibbsResult``).

    Parameters
    ----------
    data : Rankings
        The data.
    model : str or ModelSpec
        A name of the model registry, or its spec (the method is handed the name).
    priors : Priors
        The one prior object every fit reads (:func:`make_priors`).
    cfg : AuditConfig
        The audit's choices.
    backend : str
        ``numpyro`` or ``pymc``.
    seed : int
        Seed of the sampler.
    approx : Posterior, optional
        The warm start.
    chain_method : bool
        Pass the configuration's ``chain_method`` on (NumPyro).
    """
    from crowdrank.inference.methods import get as get_method

    if cfg.reference == "gibbs":
        return _gibbs_reference(data, model, priors, cfg, seed)
    spec = as_spec(model)
    m = get_method("nuts")
    m.check_model(spec)
    options = cfg.nuts_options(backend=backend, init_from=approx,
                               chain_method=cfg.chain_method if chain_method else None)
    return m.fn("fit")(data, spec, priors, options, seed=seed, progress=cfg.progress_bars)


def _gibbs_reference(data, model: str | ModelSpec, priors, cfg: AuditConfig, seed: int):
    """:func:`reference_fit` by the collapsed Gibbs sampler (its own defaults), with the
    pointwise log-likelihood and predictive draws the model checks read (``cfg.checks``)."""
    from crowdrank.inference.methods import get as get_method

    spec = as_spec(model)
    m = get_method("gibbs")
    m.check_model(spec)
    options = m.options(pointwise=cfg.checks, predictive=cfg.checks,
                        processes=min(cfg.processes, 2))
    return m.fn("fit")(data, spec, priors, options, seed=seed, progress=cfg.progress_bars)


def write_model_fits(audit: ModelAudit, out: Path, cfg: AuditConfig) -> None:
    """Write one model's fits into ``out`` (layout in the module docstring): the online
    posterior of every variant, the NUTS fit, and the other PPL's fit when checked.

    Parameters
    ----------
    audit : ModelAudit
        One model's fits.
    out : Path
        The audit's folder.
    cfg : AuditConfig
        The audit's choices.
    """
    from crowdrank.inference.nuts import write_nuts
    from crowdrank.inference.posterior_io import write_posterior_json

    online_dir = out / audit.model / "online"
    for opts, post in zip(audit.variant_opts, audit.posteriors):
        label = variant_label(opts)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in
                       label.replace("=", "-").replace(",", "_"))
        name = "posterior.json" if label == "default" else f"variants/{safe}.json"
        write_posterior_json(post, online_dir / name)
    write_nuts(audit.nuts, out / audit.model / cfg.reference)
    if audit.other_nuts is not None:
        other = "pymc" if cfg.backend == "numpyro" else "numpyro"
        write_nuts(audit.other_nuts, out / audit.model / f"nuts-{other}")


# ====================================================================== the whole audit
def run_audit(subject: Subject, out: str | Path, cfg: AuditConfig | None = None, *,
              log: Callable[[str], None] | None = None, render=None, scheduler=None,
              processes: int | None = None) -> dict:
    """Audit every model of ``cfg`` on ``subject`` and write the outputs to ``out``.

    ``render(path, subject, cfg, priors, audits, metrics)``, when given, writes the page
    (:func:`crowdrank.reports.audit_html.write_audit_report`; this layer never imports ``reports``).
    ``scheduler`` (``"local"``, an address or a ``distributed.Client``; see
    :func:`crowdrank.validation.runtime.grid.dask_client`) runs the fits as Dask tasks, one per
    audited model and one per model fitted for the checks only, all at once
    (:func:`_fits_on_dask`); ``processes`` sizes a ``"local"`` cluster. The results are
    those of a run in this process. Returns the content of ``metrics.json``.

    Parameters
    ----------
    subject : Subject
        The data audited, with its truth where known.
    out : str or Path
        The output folder.
    cfg : AuditConfig, optional
        The audit's choices (default: the defaults).
    log : callable, optional
        Progress lines.
    render : callable, optional
        Writes the page.
    scheduler : str or Client, optional
        Run the fits on Dask.
    processes : int, optional
        Workers of a ``"local"`` cluster.
    """
    cfg = cfg or AuditConfig()
    log = log or Log()
    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = subject.data
    for m in cfg.models:
        if m not in model_names():      # refused by model_variants when nothing fits it
            raise ValueError(f"audit supports the registered models {model_names()} "
                             f"(with no online update: an approximation that fits it), "
                             f"got {m!r}")
    specs = {m: as_spec(m) for m in cfg.models}     # each name looked up once, here
    if cfg.reference not in ("nuts", "gibbs"):
        raise UsageError(f"the reference is sampled by nuts or gibbs, not {cfg.reference!r}")
    if cfg.reference == "gibbs" and cfg.check_backends:
        raise UsageError("--check-backends compares NUTS in the two PPLs: use it with "
                         "--reference nuts")
    priors = make_priors(data, cfg, subject.gold)
    log(f"data: {data!r}; prior {priors.spec}, λ ~ N({priors.mu0:g}, {priors.sigma0:g}²)")
    plans = budget = None
    n_all = data.n_rankings
    if cfg.max_nuts_minutes is not None and cfg.reference == "nuts":
        from crowdrank.validation.pipelines.budget import apply_budget
        plans, subject, budget = apply_budget(
            subject, cfg, priors, log, n_params=n_scalar_params,
            approx_rows=lambda s, m: _approx_rows(s, specs[m], priors, cfg, log, out),
            specs=specs)
        if budget is not None:          # over budget: the approximations' own verdict
            (out / "metrics.json").write_text(json.dumps(jsonable(budget), indent=1))
            return jsonable(budget)
        data = subject.data
    extra_models = [m for m in cfg.loo_models if m not in cfg.models] if cfg.checks else []
    specs.update({m: as_spec(m) for m in extra_models})     # the checks' own, once each
    extra = {}
    if scheduler is None:       # (a Dask task is handed the spec, which pickles whole)
        audits = [audit_model(subject, specs[m], priors, cfg if plans is None else
                              replace(cfg, max_draws=plans[m].max_draws), out, log)
                  for m in cfg.models]
    else:
        from crowdrank.validation.pipelines.budget import shared_max_draws
        dcfg = cfg if plans is None else replace(cfg, max_draws=shared_max_draws(plans))
        audits, extra = _fits_on_dask(subject, priors, dcfg, specs, extra_models, out,
                                      log, scheduler, processes)
    metrics = build_metrics(subject, cfg, priors, audits, time.perf_counter() - t0)
    if cfg.posterior_sbc:
        metrics["posterior_sbc"] = _posterior_sbc(subject.data, priors, audits, cfg, out, log)
    if plans is not None:
        from crowdrank.validation.pipelines.budget import after_sampling
        metrics["budget"] = after_sampling(plans, audits, cfg.draws, log, data.n_rankings
                                           if data.n_rankings < n_all else None)
    if cfg.checks:
        from crowdrank.validation.predictive import model_checks
        fits = {a.model: a.nuts.idata for a in audits}
        fits.update({m: r.idata for m, r in extra.items()})
        checks = model_checks(
            data, priors, fits, cfg.loo_models, out=out, log=log, fit=_checks_fitter(cfg),
            specs={**specs, **{a.model: a.spec for a in audits if a.spec is not None}},
            **_checks_nuts_kw(cfg))
        checks.extra_fits.update({m: f"checks/{m}/posterior.nc" for m in extra})
        metrics["checks"] = checks.to_dict()
    tables = pd.concat([c.parameters for a in audits for c in a.comparisons],
                       ignore_index=True)
    tables.to_csv(out / "parameters.csv", index=False)
    ident = [c.identified_table for a in audits for c in a.comparisons
             if getattr(c, "identified_table", None) is not None]
    if ident:
        pd.concat(ident, ignore_index=True).to_csv(out / "identified.csv", index=False)
    if render is not None:
        log("writing report.html")
        render(out / "report.html", subject, cfg, priors, audits, metrics)
    metrics["seconds_total"] = time.perf_counter() - t0
    (out / "metrics.json").write_text(json.dumps(jsonable(metrics), indent=1))
    log(f"done in {metrics['seconds_total']:.1f}s: {out / 'report.html'}")
    return jsonable(metrics)


def _approx_rows(subject: Subject, model: str | ModelSpec, priors: Priors,
                 cfg: AuditConfig, log, out: Path | None = None):
    """Every approximation of ``model`` with its diagnostics and, with
    ``cfg.posterior_sbc``, its posterior-SBC verdict, for a refused audit: ``(rows,
    seconds)``."""
    spec = as_spec(model)
    pri = spec.worker_priors(priors, subject.data)
    variants = model_variants(spec, cfg.variants)
    posts, secs = fit_approximations(subject.data, spec, pri, variants, cfg, log)
    rows = [{"variant": o, **_approx_diagnostics(p)} for o, p in zip(variants, posts)]
    if cfg.posterior_sbc:
        from crowdrank.validation.pipelines.audit_psbc import posterior_sbc_rows
        psbc = posterior_sbc_rows(subject.data, spec, pri, variants, posts, cfg, out, log)
        for r, p in zip(rows, psbc):
            r["posterior_sbc"] = p
    return rows, secs


def _posterior_sbc(data, priors: Priors, audits, cfg: AuditConfig, out: Path, log) -> dict:
    """``metrics.json``'s ``posterior_sbc``: every audited approximation's rows by model."""
    from crowdrank.validation.pipelines.audit_psbc import posterior_sbc_rows

    rows = {}
    for a in audits:
        posts = a.variant_posteriors()
        if all(p is not None for p in posts):
            spec = as_spec(a.spec or a.model)
            rows[a.model] = posterior_sbc_rows(data, spec, spec.worker_priors(priors, data),
                                               a.variant_opts, posts, cfg, out, log)
    return rows


def _checks_fitter(cfg: AuditConfig):
    """The sampler of the model checks' extra fits: ``None`` (NUTS) or the collapsed
    Gibbs sampler when it makes the audit's reference."""
    if cfg.reference != "gibbs":
        return None

    def fit(data, model, priors):
        return _gibbs_reference(data, model, priors, replace(cfg, checks=True),
                                cfg.seed).native
    return fit


def _checks_nuts_kw(cfg: AuditConfig) -> dict:
    """The NUTS settings of the fits made for the model checks only."""
    return {"backend": cfg.backend, "chains": cfg.chains, "tune": cfg.tune,
            "draws": cfg.draws, "target_accept": cfg.target_accept, "seed": cfg.seed,
            "progress": cfg.progress_bars}


def audit_model_task(subject: Subject, model: str | ModelSpec, priors: Priors,
                     cfg: AuditConfig) -> ModelAudit:
    """:func:`audit_model` as a Dask task: nothing written (the worker may not share this
    machine's disk; the caller writes the returned fits), and no process pool inside the
    worker (Dask's worker processes are daemons, which cannot start children).

    Parameters
    ----------
    subject : Subject
        The data audited, with its truth where known.
    model : str or ModelSpec
        The model's spec (it pickles whole: the worker looks nothing up), or its name.
    priors : Priors
        The one prior object every fit reads (:func:`make_priors`).
    cfg : AuditConfig
        The audit's choices.
    """
    from dataclasses import replace

    from crowdrank.inference.nuts import configure_host_devices

    configure_host_devices()     # a fresh worker: one XLA device per chain, as locally
    return audit_model(subject, model, priors, replace(cfg, processes=1), None)


def checks_fit_task(data: Rankings, model: str | ModelSpec, priors: Priors, cfg: AuditConfig):
    """The NUTS fit :func:`crowdrank.validation.predictive.model_checks` makes for a model fitted for
    the checks only, as a Dask task (same arguments, so the same draws).

    Parameters
    ----------
    data : Rankings
        The data.
    model : str or ModelSpec
        The model's spec (as :func:`audit_model_task`'s), or its name.
    priors : Priors
        The one prior object every fit reads (:func:`make_priors`).
    cfg : AuditConfig
        The audit's choices.
    """
    from crowdrank.inference.nuts import configure_host_devices, fit_nuts

    configure_host_devices()
    spec = as_spec(model)
    return fit_nuts(data, spec, spec.worker_priors(priors, data),
                    pointwise=True, predictive=True, **_checks_nuts_kw(cfg))


def _fits_on_dask(subject: Subject, priors: Priors, cfg: AuditConfig, specs: dict,
                  extra_models, out: Path, log, scheduler, processes):
    """Every NUTS fit of the audit at once on a Dask cluster: ``(audits, extra)``, the
    :class:`ModelAudit` of each audited model (fits written to ``out`` here) and the
    ``NutsResult`` of each checks-only model (``out/checks/<model>``); a task is handed
    its model's spec (``specs``, by name)."""
    from distributed import as_completed
    from tqdm.auto import tqdm

    from crowdrank.inference.nuts import write_nuts
    from crowdrank.validation.runtime.grid import dask_client, release_client

    client, owned = dask_client(scheduler, processes)
    try:
        futs = {client.submit(audit_model_task, subject, specs[m], priors, cfg, pure=False,
                              key=f"crowdrank-audit-{m}"): ("audit", m) for m in cfg.models}
        futs.update({client.submit(checks_fit_task, subject.data, specs[m], priors, cfg,
                                   pure=False, key=f"crowdrank-checks-{m}"): ("checks", m)
                     for m in extra_models})
        log(f"dask: {len(futs)} fit(s) submitted to {client.scheduler.address} "
            f"({', '.join(f'{k} {m}' for k, m in futs.values())})")
        audits, extra = {}, {}
        with tqdm(total=len(futs), desc="audit (dask)", unit="fit", leave=False,
                  disable=not getattr(log, "enabled", True)) as bar:
            for f in as_completed(futs):
                kind, m = futs[f]
                res = f.result()               # a task's exception is raised here
                if kind == "audit":
                    write_model_fits(res, out, cfg)
                    audits[m] = res
                    log(f"{m}: audited on the cluster — NUTS " + res.nuts.gate.verdict())
                else:
                    write_nuts(res, out / "checks" / m)
                    extra[m] = res
                    log(f"checks: NUTS for {m} done on the cluster")
                bar.update(1)
                f.release()
    finally:
        release_client(client, owned)
    return [audits[m] for m in cfg.models], {m: extra[m] for m in extra_models}
