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
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors, build_priors
from crowdrank.models.registry import get as get_model
from crowdrank.models.registry import names as model_names
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

#: The embedded default (see bench/bench_audit.py for its timing on 2 cores).
#: 600 rankings: NUTS cost grows with the number of rankings, and 100 tasks per worker keep
#: each worker's η identified. As in the paper's synthetic experiments (Sect. 5.1), every
#: worker also answers 10 gold tasks whose true order is known, and the worker priors of
#: *both* methods come from them (:meth:`Priors.from_gold`); ``--worker-prior
#: geometric:a0=10,a=6`` audits under the paper's geometric profile instead (tiny last
#: concentrations, which the samplers' Gamma coordinates handle exactly).
DEFAULT_SIMULATION = {"n_items": 40, "n_workers": 6, "tasks_per_worker": 100, "kmax": 4,
                      "setting": "amateur", "seed": 2026, "gold_per_worker": 10}

MODELS = model_names(audited=True)    # the models with a worker-quality parameter
#: Every model the audit accepts: those with an online update (the warm start of NUTS and
#: the default approximation; normalised COUPLE has none of its own) — the default ones,
#: and BT/PL (Weng–Lin's update, and the batch point methods).
AUDITABLE = MODELS + tuple(m for m in model_names() if m not in MODELS
                           and get_model(m).online and not get_model(m).normalized)


# ====================================================================== configuration
#: Above this many scalar parameters a ``--quick`` audit keeps 1000 draws per chain.
QUICK_MANY_PARAMS = 300


def quick_draws(n_params: int | None) -> int:
    """Draws per chain of a quick audit (see :meth:`AuditConfig.quick`).

    Parameters
    ----------
    n_params : int or None
        Scalar parameters of the largest audited model.
    """
    return 1000 if n_params is not None and n_params > QUICK_MANY_PARAMS else 500


def n_scalar_params(data, models: Sequence[str]) -> int:
    """Scalar parameters the gate checks for the largest of ``models`` on ``data``: the
    item scores plus each worker's η (one number, or a row of ``K``).

    Parameters
    ----------
    data : Rankings
        The data.
    models : sequence of str
        Names of the model registry.
    """
    most = 0
    for m in models:
        spec = get_model(m)
        per_worker = 0 if not spec.has_eta else 1 if spec.eta_scalar else spec.prior_K(data.K)
        most = max(most, data.n_items + data.n_workers * per_worker)
    return most


@dataclass
class AuditConfig:
    """Every choice of an audit (recorded in ``metrics.json``).

    Attributes
    ----------
    models : tuple of str
        The models audited.
    backend : str
        NUTS in ``numpyro`` or ``pymc``.
    chains, tune, draws : int
        NUTS chains, warm-up iterations and kept draws per chain.
    target_accept : float
        Target acceptance of the step-size adaptation.
    chain_method : str or None
        How NumPyro runs the chains (default: parallel when there are devices).
    variants : dict
        Online options -> the values to compare.
    permutations : int
        Orders of the data the online update is re-run on.
    seed : int
        Master seed.
    worker_prior, worker_prior_file, worker_prior_gold : str or None
        The workers' prior, as ``crowdrank fit`` reads them (None: the subject's gold
        tasks, else the geometric profile).
    prior_mu, prior_sigma : float
        The items' prior.
    progress_bars : bool
        The samplers' progress bars.
    warm_start : bool
        NUTS chains start from the online posterior.
    check_backends : bool
        Also fit with the other PPL and compare the two.
    checks : bool
        PSIS-LOO and posterior predictive checks.
    loo_models : tuple of str
        Models also fitted by NUTS, for LOO only.
    bootstrap : int
        Resamples of the bootstrap method.
    processes : int
        Processes of the bootstrap refits.
    max_nuts_minutes : float or None
        Estimate NUTS's wall time first and refuse beyond this.
    nuts_subsample : int or None
        Over budget: NUTS on this many rankings.
    max_draws : int or None
        Extend sampling in rounds up to this many draws per chain.
    """

    models: tuple[str, ...] = MODELS
    backend: str = "numpyro"
    chains: int = 4
    tune: int = 500
    draws: int = 1000
    target_accept: float = 0.8
    chain_method: str | None = None
    variants: dict = field(default_factory=dict)   # option -> values to compare
    permutations: int = 5
    seed: int = 0
    worker_prior: str | None = None        # None: the subject's gold, else geometric
    worker_prior_file: str | None = None
    worker_prior_gold: str | None = None
    prior_mu: float = 0.0
    prior_sigma: float = 1.0
    progress_bars: bool = False
    warm_start: bool = True                # NUTS chains start from the online posterior
    check_backends: bool = False           # also fit with the other PPL and compare
    checks: bool = True                    # PSIS-LOO and posterior predictive checks
    loo_models: tuple[str, ...] = ("pl", "bt")   # also fitted by NUTS, for LOO only
    bootstrap: int = 1000                  # resamples of method=bootstrap
    processes: int = 2                     # processes of the bootstrap refits
    max_nuts_minutes: float | None = None  # estimate NUTS's wall time first; refuse beyond
    nuts_subsample: int | None = None      # over budget: NUTS on this many rankings
    max_draws: int | None = None           # extend sampling in rounds up to this (per chain)

    @classmethod
    def quick(cls, n_params: int | None = None, **kw) -> AuditConfig:
        """Fewer draws and permutations, for a first look at a large or real data set.

        ``n_params``: the number of scalar parameters of the largest audited model; above
        :data:`QUICK_MANY_PARAMS` the quick run keeps 1000 draws per chain. The gate takes
        the *largest* R-hat over all parameters, and its noise grows with their number:
        on iid draws (4 chains, rank-normalised split R-hat), 250 effective draws per
        chain put the maximum over 100 parameters at ≥ 1.01 in ~15 % of runs and over
        1,114 parameters (read-level's CrowdBT) in ~90 %; 500 effective draws per chain
        bring both near 0 %. With the ~0.4 ESS per draw these models reach, 500 draws per
        chain leave a large data set's reference failing the gate by chance alone.

        Parameters
        ----------
        n_params : int, optional
            See above.
        **kw
            Fields of :class:`AuditConfig` over the quick defaults.
        """
        base = {"tune": 250, "draws": quick_draws(n_params), "permutations": 3}
        base.update(kw)
        return cls(**base)

    def to_dict(self) -> dict:
        """The fields as a JSON-able dict (tuples as lists)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


# ====================================================================== the subject
@dataclass
class Subject:
    """What is audited: data, and truth where known (aligned with ``data.items`` /
    ``data.workers``).

    Attributes
    ----------
    data : Rankings
        The rankings.
    truth : ndarray or None
        The true item scores.
    truth_eta1 : ndarray or None
        Each worker's true first entry of ``η``.
    description : str
        One line for the report.
    simulation : dict or None
        The simulation's settings, when the data are simulated.
    gold : tuple or None
        ``(gold Rankings, true_order)`` for gold priors.
    """

    data: Rankings
    truth: np.ndarray | None = None
    truth_eta1: np.ndarray | None = None
    description: str = ""
    simulation: dict | None = None
    gold: tuple | None = None          # (gold Rankings, true_order) for gold priors


def default_subject(**overrides) -> Subject:
    """The embedded default: COUPLE-story data from the paper's ``amateur`` workers
    (``α0 = (5, 4, 1, 0.1)``, [Pan18], Sect. 5.2), ``k`` uniform on 2..4.

    Parameters
    ----------
    **overrides
        Settings of the simulation over the default's (``n_items``, ``seed``, ...).
    """
    from crowdrank.models.simulate import simulate

    kw = dict(DEFAULT_SIMULATION, **overrides)
    sim = simulate("couple", **kw)
    desc = (f"simulated (COUPLE story, {kw['setting']} workers, {kw['n_items']} items, "
            f"{kw['n_workers']} workers, {kw['tasks_per_worker']} tasks each, "
            f"k = 2..{kw['kmax']}, seed {kw['seed']})")
    return Subject(sim.rankings, truth=sim.lam, truth_eta1=sim.eta[:, 0], description=desc,
                   simulation=kw,
                   gold=None if sim.gold is None else (sim.gold, sim.gold_true_order))


def make_priors(data: Rankings, cfg: AuditConfig, gold: tuple | None = None) -> Priors:
    """The one prior object both methods read (same options as ``crowdrank fit``).

    An explicit ``--worker-prior`` wins over the subject's own gold tasks (``gold``), which
    win over the default geometric profile.

    Parameters
    ----------
    data : Rankings
        The data.
    cfg : AuditConfig
        The audit's choices.
    gold : tuple, optional
        The subject's gold tasks.
    """
    if cfg.worker_prior is None and cfg.worker_prior_gold is None:
        return build_priors(data, worker_prior_file=cfg.worker_prior_file, gold=gold,
                            mu0=cfg.prior_mu, sigma0=cfg.prior_sigma)
    return build_priors(data, worker_prior=cfg.worker_prior,
                        worker_prior_file=cfg.worker_prior_file, gold=cfg.worker_prior_gold,
                        mu0=cfg.prior_mu, sigma0=cfg.prior_sigma)


# ====================================================================== helpers
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


def jsonable(x):
    """Plain JSON types; non-finite floats become ``None`` (JSON has no NaN).

    Parameters
    ----------
    x : object
        NumPy scalars and arrays, dicts, lists, tuples and plain values.
    """
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(float(x)) else None
    if x is None or isinstance(x, str):
        return x
    return str(x)


def _gate_dict(gate) -> dict | None:
    return None if gate is None else gate.to_dict()


# ====================================================================== one model
@dataclass
class ModelAudit:
    """Everything measured for one model.

    Attributes
    ----------
    model : str
        The model.
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

    def variant_posteriors(self) -> list:
        """One Posterior per comparison, in its order; ``None`` each for an audit assembled
        without its posteriors (the field's default)."""
        return self.posteriors or [None] * len(self.comparisons)


def audit_model(subject: Subject, model: str, priors: Priors, cfg: AuditConfig,
                out: Path | None, log: Callable[[str], None] | None = None, *,
                variants: list[dict] | None = None) -> ModelAudit:
    """Fit ``model`` by NUTS and by every online variant, compare, and write the fits into
    ``out`` (nothing is written when ``out`` is None). ``variants`` (online option sets,
    the first one the default) overrides the ones ``cfg.variants`` asks for.

    Parameters
    ----------
    subject : Subject
        The data audited, with its truth where known.
    model : str
        A name of the model registry.
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

    log = log or (lambda msg: None)
    data = subject.data
    pri = get_model(model).worker_priors(priors, data)
    if variants is None:
        variants = model_variants(model, cfg.variants)
    posts, secs = fit_approximations(data, model, pri, variants, cfg, log)
    log(f"{model}: NUTS ({cfg.backend}, {cfg.chains} chains × {cfg.tune} tune + {cfg.draws} "
        "draws)")
    ref = reference_fit(data, model, pri, cfg, cfg.backend, cfg.seed,
                        posts[0] if cfg.warm_start else None)
    nuts = ref.native
    log(f"{model}: NUTS done in {nuts.timings.get('total', float('nan')):.1f}s — "
        + ref.gate.verdict())
    agreement = alt = None
    if cfg.check_backends:
        from crowdrank.validation.reference import backend_agreement
        other = "pymc" if cfg.backend == "numpyro" else "numpyro"
        log(f"{model}: NUTS with {other} as well, to compare the two PPLs")
        alt = reference_fit(data, model, pri, cfg, other, cfg.seed + 1,
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
        perm = np.stack([align(fit_variant(data, model, pri, variants[0], order="shuffle",
                                           seed=cfg.seed + 1 + p, progress=False).mu,
                               posts[0].items, items)
                         for p in range(cfg.permutations)])
        order = order_sensitivity(perm, lam.approx_mean.to_numpy(), lam.mcmc_mean.to_numpy(),
                                  lam.mcmc_sd.to_numpy(), ids=items)
    tm = [{"label": f"{model} NUTS {k}", "seconds": float(v)} for k, v in nuts.timings.items()
          if k in ("compile", "warmup", "sampling", "total")]
    tm += [{"label": f"{model} online {k} (wall)", "seconds": v["wall"]} for k, v in secs.items()]
    audit = ModelAudit(model, nuts, posts[0], comps, variants, order, tm, secs, agreement,
                       alt, posts)
    if out is not None:
        write_model_fits(audit, out, cfg)
    return audit


def fit_approximations(data, model: str, pri, variants: list[dict], cfg: AuditConfig,
                       log) -> tuple[list, dict]:
    """Fit every option set (:func:`fit_variant`) with its PSIS k̂: ``(posteriors,
    seconds by label)``.

    Parameters
    ----------
    data : Rankings
        The data.
    model : str
        A name of the model registry.
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

    posts, secs = [], {}
    for opts in variants:
        label = variant_label(opts)
        log(f"{model}: online pass ({label})")
        t = time.perf_counter()
        post = fit_variant(data, model, pri, opts, progress=cfg.progress_bars,
                           seed=cfg.seed, resamples=cfg.bootstrap, processes=cfg.processes)
        secs[label] = {"wall": time.perf_counter() - t, "updates": float(post.seconds)}
        # PSIS k̂ of every approximation with a density ("not reliable" above 0.7)
        post.diagnostics.update(posterior_khat(post, data, model, pri, seed=cfg.seed))
        if "assumed_family" in post.diagnostics:      # an external file's stated family
            log(f"{model}: {label} read as {post.diagnostics['assumed_family']}")
        posts.append(post)
    return posts, secs


def reference_fit(data, model: str, priors, cfg: AuditConfig, backend: str, seed: int,
                  approx=None, *, chain_method: bool = True):
    """The NUTS reference through the ``nuts`` entry of the method registry, with the
    audit's sampler settings (``approx``: the warm start); a
    :class:`~crowdrank.inference.posterior.Posterior` whose ``native`` is the
    ``NutsResult``.

    Parameters
    ----------
    data : Rankings
        The data.
    model : str
        A name of the model registry.
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

    m = get_method("nuts")
    m.check_model(model)
    options = m.options(backend=backend, chains=cfg.chains, tune=cfg.tune, draws=cfg.draws,
                        target_accept=cfg.target_accept, init_from=approx,
                        max_draws=cfg.max_draws)
    kw = {"chain_method": cfg.chain_method} if chain_method and cfg.chain_method else {}
    return m.fn("fit")(data, model, priors, options, seed=seed,
                       progress=cfg.progress_bars, **kw)


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
    from crowdrank.inference.posterior import write_posterior_json

    online_dir = out / audit.model / "online"
    for opts, post in zip(audit.variant_opts, audit.posteriors):
        label = variant_label(opts)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in
                       label.replace("=", "-").replace(",", "_"))
        name = "posterior.json" if label == "default" else f"variants/{safe}.json"
        write_posterior_json(post, online_dir / name)
    write_nuts(audit.nuts, out / audit.model / "nuts")
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
        if m not in AUDITABLE:
            raise ValueError(f"audit supports models {AUDITABLE}, got {m!r}")
    priors = make_priors(data, cfg, subject.gold)
    log(f"data: {data!r}; prior {priors.spec}, λ ~ N({priors.mu0:g}, {priors.sigma0:g}²)")
    plans = budget = None
    n_all = data.n_rankings
    if cfg.max_nuts_minutes is not None:
        from crowdrank.validation.pipelines.budget import apply_budget
        plans, subject, budget = apply_budget(
            subject, cfg, priors, log, n_params=n_scalar_params,
            approx_rows=lambda s, m: _approx_rows(s, m, priors, cfg, log))
        if budget is not None:          # over budget: the approximations' own verdict
            (out / "metrics.json").write_text(json.dumps(jsonable(budget), indent=1))
            return jsonable(budget)
        data = subject.data
    extra_models = [m for m in cfg.loo_models if m not in cfg.models] if cfg.checks else []
    extra = {}
    if scheduler is None:
        audits = [audit_model(subject, m, priors, cfg if plans is None else
                              replace(cfg, max_draws=plans[m].max_draws), out, log)
                  for m in cfg.models]
    else:
        from crowdrank.validation.pipelines.budget import shared_max_draws
        dcfg = cfg if plans is None else replace(cfg, max_draws=shared_max_draws(plans))
        audits, extra = _fits_on_dask(subject, priors, dcfg, extra_models, out, log,
                                      scheduler, processes)
    metrics = build_metrics(subject, cfg, priors, audits, time.perf_counter() - t0)
    if plans is not None:
        from crowdrank.validation.pipelines.budget import after_sampling
        metrics["budget"] = after_sampling(plans, audits, cfg.draws, log, data.n_rankings
                                           if data.n_rankings < n_all else None)
    if cfg.checks:
        from crowdrank.validation.predictive import model_checks
        fits = {a.model: a.nuts.idata for a in audits}
        fits.update({m: r.idata for m, r in extra.items()})
        checks = model_checks(
            data, priors, fits, cfg.loo_models, out=out,
            log=log, **_checks_nuts_kw(cfg))
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


def _approx_rows(subject: Subject, model: str, priors: Priors, cfg: AuditConfig, log):
    """Every approximation of ``model`` with its diagnostics, for a refused audit:
    ``(rows, seconds)``."""
    pri = get_model(model).worker_priors(priors, subject.data)
    variants = model_variants(model, cfg.variants)
    posts, secs = fit_approximations(subject.data, model, pri, variants, cfg, log)
    return [{"variant": o, **_approx_diagnostics(p)} for o, p in zip(variants, posts)], secs


def _checks_nuts_kw(cfg: AuditConfig) -> dict:
    """The NUTS settings of the fits made for the model checks only."""
    return {"backend": cfg.backend, "chains": cfg.chains, "tune": cfg.tune,
            "draws": cfg.draws, "target_accept": cfg.target_accept, "seed": cfg.seed,
            "progress": cfg.progress_bars}


def audit_model_task(subject: Subject, model: str, priors: Priors,
                     cfg: AuditConfig) -> ModelAudit:
    """:func:`audit_model` as a Dask task: nothing written (the worker may not share this
    machine's disk; the caller writes the returned fits), and no process pool inside the
    worker (Dask's worker processes are daemons, which cannot start children).

    Parameters
    ----------
    subject : Subject
        The data audited, with its truth where known.
    model : str
        A name of the model registry.
    priors : Priors
        The one prior object every fit reads (:func:`make_priors`).
    cfg : AuditConfig
        The audit's choices.
    """
    from dataclasses import replace

    from crowdrank.inference.nuts import configure_host_devices

    configure_host_devices()     # a fresh worker: one XLA device per chain, as locally
    return audit_model(subject, model, priors, replace(cfg, processes=1), None)


def checks_fit_task(data: Rankings, model: str, priors: Priors, cfg: AuditConfig):
    """The NUTS fit :func:`crowdrank.validation.predictive.model_checks` makes for a model fitted for
    the checks only, as a Dask task (same arguments, so the same draws).

    Parameters
    ----------
    data : Rankings
        The data.
    model : str
        A name of the model registry.
    priors : Priors
        The one prior object every fit reads (:func:`make_priors`).
    cfg : AuditConfig
        The audit's choices.
    """
    from crowdrank.inference.nuts import configure_host_devices, fit_nuts

    configure_host_devices()
    return fit_nuts(data, model, get_model(model).worker_priors(priors, data),
                    pointwise=True, predictive=True, **_checks_nuts_kw(cfg))


def _fits_on_dask(subject: Subject, priors: Priors, cfg: AuditConfig, extra_models,
                  out: Path, log, scheduler, processes):
    """Every NUTS fit of the audit at once on a Dask cluster: ``(audits, extra)``, the
    :class:`ModelAudit` of each audited model (fits written to ``out`` here) and the
    ``NutsResult`` of each checks-only model (written to ``out/checks/<model>``)."""
    from distributed import as_completed
    from tqdm.auto import tqdm

    from crowdrank.inference.nuts import write_nuts
    from crowdrank.validation.runtime.grid import dask_client, release_client

    client, owned = dask_client(scheduler, processes)
    try:
        futs = {client.submit(audit_model_task, subject, m, priors, cfg, pure=False,
                              key=f"crowdrank-audit-{m}"): ("audit", m) for m in cfg.models}
        futs.update({client.submit(checks_fit_task, subject.data, m, priors, cfg,
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


def _approx_diagnostics(post) -> dict:
    """An approximation's PSIS k̂ and its verdict, and an optimiser's convergence."""
    from crowdrank.inference.posterior import as_posterior

    if post is None:          # a ModelAudit made without its posteriors (tests, reports)
        return {}
    d = as_posterior(post).diagnostics
    keep = ("psis_khat", "psis_label", "converged", "steps", "final_elbo", "backend",
            "assumed_family", "source")
    return {k: jsonable(d[k]) for k in keep if k in d}


def build_metrics(subject: Subject, cfg: AuditConfig, priors: Priors,
                  audits: Sequence[ModelAudit], seconds: float) -> dict:
    """The content of ``metrics.json`` (everything but per-parameter rows).

    Parameters
    ----------
    subject : Subject
        The data audited, with its truth where known.
    cfg : AuditConfig
        The audit's choices.
    priors : Priors
        The one prior object every fit reads (:func:`make_priors`).
    audits : sequence of ModelAudit
        One per model.
    seconds : float
        The audit's wall time.
    """
    from crowdrank.inference.posterior import as_posterior
    from crowdrank.validation.reference import tail_visits_of

    models = {}
    for a in audits:
        main = a.comparisons[0].to_dict()
        w = dict(main["workers"] or {})
        for k in ("quality_online", "quality_nuts", "quality_truth", "ids"):
            w.pop(k, None)
        order = None if a.order is None else {k: v for k, v in a.order.items()
                                              if k != "per_item"}
        models[a.model] = {
            "gate": _gate_dict(a.nuts.gate),
            "reference_trusted": main["reference_trusted"],
            "reference_note": main["reference_note"],
            "aggregates": main["aggregates"],
            "ranking": main["ranking"],
            "workers": w or None,
            "order_sensitivity": order,
            "identified": main.get("identified"),
            "variants": [{"variant": c.variant, "options": o, "aggregates": c.aggregates,
                          "ranking": c.ranking,
                          "identified": getattr(c, "identified", None),
                          **_approx_diagnostics(p)}
                         for c, o, p in zip(a.comparisons, a.variant_opts,
                                            a.variant_posteriors())],
            "timings": {"nuts": dict(a.nuts.timings), "online": a.online_seconds},
            "online_clamped": dict(as_posterior(a.online).diagnostics.get("clamped") or {}),
            # informational, not a gate criterion: how many independent upper-tail visits
            # the means of prior-dominated simplex entries rest on (docs/design.md §5.1)
            "tail_visits": tail_visits_of(a.nuts.idata, a.model, priors),
            "backend_agreement": None if a.agreement is None else {
                **a.agreement.to_dict(),
                "other_gate": _gate_dict(getattr(a.agreement, "other_gate", None))},
            "files": {"nuts": f"{a.model}/nuts/posterior.nc",
                      "online": f"{a.model}/online/posterior.json"},
        }
    return {"subject": subject.description, "simulation": subject.simulation,
            "data": subject.data.summary(), "truth_known": subject.truth is not None,
            "priors": {"spec": priors.spec, "mu0": priors.mu0, "sigma0": priors.sigma0},
            "config": cfg.to_dict(), "models": models, "seconds_fits": seconds}
