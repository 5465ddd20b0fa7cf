"""Simulation-based calibration (SBC) of the NUTS fits and of the online approximations.

The check [Talts18]: draw
``θ̃ ~ p(θ)`` from the prior, ``ỹ ~ p(y | θ̃)`` from the model's *exact* generative process,
and draws ``θ_1..θ_S`` from the computed posterior ``p(θ | ỹ)``. If the posterior is right,

    rank(θ̃) = #{s : θ_s < θ̃}  is uniform on {0, …, S}                         (Talts Thm. 1)

for every scalar parameter, because ``(θ̃, θ_1..θ_S)`` are then exchangeable draws from the
joint ``p(θ | ỹ) p(ỹ)``. The ranks need *independent* draws, so the posterior draws are
thinned to ``S`` (default 100) evenly spaced draws from a run whose bulk ESS is several times
``S`` (Talts Sect. 4.2). For the online methods, which return a distribution ``q`` rather
than draws, the analogue is the probability integral transform ``PIT = F_q(θ̃)``, uniform on
``[0, 1]`` if ``q`` is the exact marginal posterior [Cook06].

Only models with an exact forward simulator are offered (docs/design.md, Facts): PL, BT, CrowdBT and
*normalised* COUPLE; the stagewise COUPLE likelihood ([Pan18], Eq. 4) is not normalised,
so no simulator matches it and its SBC would fail for that reason alone.

Uniformity tests
----------------
* The ECDF simultaneous-band test of [Sailynoja22] (Stat. Comput.
  32:32): at evaluation points ``z_j`` the scaled ECDF count ``N·F̂(z_j)`` is
  ``Binomial(N, z_j)`` under uniformity. The statistic is the smallest two-sided pointwise
  binomial tail probability over the ``z_j``; its null distribution is simulated (seeded), the
  ``1 − prob`` quantile ``γ`` gives the *simultaneous* band (pointwise level ``1 − γ``), and
  the p-value is the simulated null probability of a statistic at least as extreme. Ranks on
  ``{0..S}`` are treated as discrete (``z_j = j/(S+1)``); PIT values as continuous.
* Pearson's chi-square on binned ranks (Talts Sect. 4.1), with exact expected counts.
* Per family (``lambda``, ``lambda_centred``, ``eta``), the per-parameter ECDF p-values are
  combined by the Cauchy combination test [LiuXie20], which stays valid
  under arbitrary dependence between the parameters' ranks (the items share a common level,
  so their ranks are strongly correlated within a replicate: pooling the ranks themselves
  and testing them as independent would be wrong).
* Verdict: calibrated iff every family's combined p-value is at least ``alpha / F``
  (Bonferroni over the ``F`` families; ``alpha = 0.05`` by default).

Every replicate is one spec of :func:`crowdrank.validation.runtime.grid.run_grid` (cached, resumable,
run in parallel processes); with NumPyro, batches of replicates (:data:`DEFAULT_BATCH`) are
fitted in one vmapped program (:mod:`crowdrank.inference.nuts.batched`) and the batch is the cached unit;
with PyMC, each worker process compiles the model once and loads every replicate's rankings
into it (:mod:`crowdrank.inference.nuts.pymc_reuse`, ``SbcConfig.pymc_reuse``).
Every random choice derives from ``(seed, sim)``.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import numpy as np

from crowdrank.inference.nuts.config import nuts_default
from crowdrank.models.errors import UsageError
from crowdrank.models.families import BETA, DIRICHLET, draw_dirichlet  # noqa: F401 (re-exported)
from crowdrank.models.registry import REGISTRY, get
from crowdrank.validation.pipelines.sbc_ranks import (  # noqa: F401  (the SBC study's names, re-exported)
    RANKS_COLUMNS,
    _jsonable,
    _lambda_parts,
    _nanstat,
    _with_eta,
    draw_truth,
    flatten_accuracy,
    flatten_lambda,
    flatten_params,
    flatten_simplex,
    make_priors,
    online_pit,
    parameter_names,
    rank_matrix,
    sbc_ranks,
    thin_draws,
    write_ranks_csv,
)
from crowdrank.validation.pipelines.sbc_replicate import (  # noqa: F401  (the SBC study's names, re-exported)
    GIBBS_WARMUP_DRAWS,
    _finish,
    _fit_pymc_reused,
    _posterior_flat,
    _prepare,
    _seeds,
    batch_specs,
    sbc_batch_job,
    sbc_job,
)
from crowdrank.validation.pipelines.sbc_uniformity import (  # noqa: F401  (the SBC study's names, re-exported)
    FAMILIES,
    EcdfTest,
    cauchy_combination,
    chi2_test,
    ecdf_test,
    holm,
    pot_c_pvalues,
    uniformity_summary,
)


def sbc_models() -> tuple[str, ...]:
    """Models with an exact forward simulator (docs/design.md, Facts; registry specs with
    ``exact_simulator`` and a ``simulate_report``); stagewise "couple" has none for
    ``k ≥ 3`` (:data:`PAIRS_EXACT`: on pairs it has one)."""
    return tuple(n for n, s in REGISTRY.items() if s.exact_simulator and s.has_simulator)


#: Stagewise COUPLE on pairs (``kmax = 2``): Eq. 3 of one stage sums to one over the two
#: orders, so its generative story is an exact simulator there ([Pan18]; docs/design.md,
#: Facts), and SBC of a sampler of Eq. 3 is possible on pairs.
PAIRS_EXACT = ("couple",)


SBC_MODELS = sbc_models()
#: The online method run beside NUTS on the same data (the spec's ``online``): Weng–Lin
#: OnlinePL/OnlineBT, CrowdBT online [Chen13] and OnlineGBMM ([Pan18], Algorithm 1).
ONLINE_MODEL = {m: get(m).online for m in SBC_MODELS}
#: Display names of the online methods, by online model name.
ONLINE_TITLE = {"pl": "OnlinePL (Weng-Lin)", "bt": "OnlineBT (Weng-Lin)",
                "crowdbt": "CrowdBT online", "couple": "OnlineGBMM"}
ONLINE_NAME = {m: ONLINE_TITLE.get(o, str(o)) for m, o in ONLINE_MODEL.items()}
#: ``prior`` is the machinery check: the data are ignored and the "posterior" draws come
#: from the prior, which is the exact posterior given no data, so its ranks are uniform.
#: ``gibbs`` is the collapsed Gibbs sampler (:mod:`crowdrank.inference.gibbs`), for the models
#: it fits.
SBC_BACKENDS = ("numpyro", "pymc", "prior", "gibbs")
#: Replicates per vmapped NumPyro program: large enough that the sampler's per-step
#: overhead is shared (measured: 1.5 CPU s per PL replicate in batches of 32 against 16 s
#: one by one). The price is the slowest lane: at 200 lanes a CrowdBT batch evaluated ~3.2x
#: the leapfrog steps its lanes needed (docs/sbc.md); ``lane_groups`` lowers it where the
#: gradient, not the per-step overhead, dominates.
DEFAULT_BATCH = 50
#: NUTS iterations per chain, ``(tune, draws)``, by model (``--tune``/``--draws`` override).
#: SBC needs the ``S`` thinned draws nearly independent (bulk ESS well above ``S = 100``)
#: and the gate wants bulk and tail ESS >= 400 per replicate: 4 x 1000 draws leave a wide
#: margin for PL and CrowdBT, whose gradients are cheap. Normalised COUPLE's gradient sums
#: Eq. 4 over the ``k!`` orderings of every task, so it runs shorter chains: 4 x (300 +
#: 500) gives a median smallest bulk ESS of ~800 (measured: ~640 at 4 x 400, ~2,100 at
#: 4 x 1000), still 8x ``S`` and above the gate's 400 in most replicates (docs/sbc.md).
#: Any other model: SBC's own warm-up of 500 and NutsConfig's draws (docs/sbc.md: the
#: suite's SBC defaults 4 × (500 + 1000)).
NUTS_DEFAULTS = {"couple-normalized": (300, 500)}
DEFAULT_TUNE_DRAWS = (500, nuts_default("draws"))


# ----------------------------------------------------------------------------- config
@dataclass(frozen=True)
class SbcConfig:
    """One SBC study. Everything that changes a replicate's numbers is in :meth:`spec`.

    ``tasks_per_worker`` tasks per worker, of size uniform on ``2..kmax`` (``kmax = 2`` for
    the pairwise models). ``n_ranks`` is ``S``, the number of thinned posterior draws each
    true value is ranked among (ranks ``0..S``). ``shift_sd`` is a test hook: every
    posterior draw of ``λ_r`` is moved by ``shift_sd`` posterior sds before ranking, a
    deliberately wrong posterior that SBC must reject. ``alpha`` is the family-wise level
    of the verdict.
    """

    model: str = "couple-normalized"
    backend: str = "numpyro"
    sims: int = 100
    n_items: int = 10
    n_workers: int = 4
    tasks_per_worker: int = 25
    kmax: int | None = None
    worker_prior: str = "geometric:a0=10,a=6"
    mu0: float = 0.0
    sigma0: float = 1.0
    chains: int = nuts_default("chains")
    tune: int | None = None          # None: the model's default (:data:`NUTS_DEFAULTS`)
    draws: int | None = None
    target_accept: float = nuts_default("target_accept")
    n_ranks: int = 100
    online: bool = True
    approx: str = "online"           # the approximation's PIT: a method of the registry
    seed: int = 0
    shift_sd: float = 0.0
    alpha: float = 0.05
    n_bins: int | None = None
    batch: int | None = None
    lane_groups: int = 1
    warmup_depth: int | None = None
    #: PyMC: compile the model once per worker process and load each replicate's rankings
    #: into it (:mod:`crowdrank.inference.nuts.pymc_reuse`); False builds and compiles a model per
    #: replicate (:func:`crowdrank.inference.nuts.fit_nuts`). Same sampler, same log density.
    pymc_reuse: bool = True
    #: the worker simplex's coordinates of the NUTS fits (``inference.nuts.config.SIMPLEXES``:
    #: the Gamma construction with the boost, or the PPL's own Dirichlet/Beta site)
    simplex: str = nuts_default("simplex")

    def __post_init__(self):
        if self.model in PAIRS_EXACT and self.kmax == 2:
            pass
        elif self.model not in sbc_models():
            hint = REGISTRY[self.model].sbc_hint if self.model in REGISTRY else None
            extra = f" ({hint})" if hint else ""
            raise UsageError(f"SBC model must be one of {sbc_models()}, got {self.model!r}"
                             + extra)
        from crowdrank.inference.nuts.config import SIMPLEXES
        if self.simplex not in SIMPLEXES:
            raise UsageError(f"simplex must be one of {SIMPLEXES}, got {self.simplex!r}")
        if self.backend not in SBC_BACKENDS:
            raise UsageError(f"SBC backend must be one of {SBC_BACKENDS}, got {self.backend!r}")
        if self.online:        # no approximation is fitted otherwise: nothing to refuse
            from crowdrank.validation.pipelines.sbc_approx import check as check_approx
            check_approx(self.model, self.approx, self.backend)
        tune, draws = NUTS_DEFAULTS.get(self.model, DEFAULT_TUNE_DRAWS)
        object.__setattr__(self, "tune", int(tune if self.tune is None else self.tune))
        object.__setattr__(self, "draws", int(draws if self.draws is None else self.draws))
        pairwise = get(self.model).pairwise
        kmax = self.kmax if self.kmax is not None else (2 if pairwise else 4)
        if pairwise and kmax != 2:
            raise UsageError(f"{self.model} is a pairwise model: kmax must be 2")
        if not 2 <= kmax <= min(self.n_items, 6):
            raise UsageError(f"kmax must be in 2..min(items, 6) (normalised COUPLE enumerates "
                             f"k! orderings), got {kmax}")
        object.__setattr__(self, "kmax", int(kmax))
        for name in ("sims", "n_items", "n_workers", "tasks_per_worker", "chains", "draws",
                     "n_ranks"):
            if int(getattr(self, name)) < 1:
                raise UsageError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.n_items < 2:
            raise UsageError("need at least 2 items")
        if self.sims < 2:   # an ECDF (and any test of uniformity) needs several ranks
            raise UsageError(f"SBC needs at least 2 replicates, got sims={self.sims}")
        if self.tune < 0:
            raise UsageError("tune must be >= 0")
        if self.backend != "prior" and self.n_ranks > self.chains * self.draws:
            raise UsageError(f"cannot thin {self.chains}×{self.draws} draws to "
                             f"{self.n_ranks}: lower --ranks or raise --draws")
        if not (math.isfinite(self.shift_sd) and math.isfinite(self.mu0)
                and math.isfinite(self.sigma0) and self.sigma0 > 0):
            raise UsageError("shift_sd and mu0 must be finite, sigma0 finite and > 0")
        if not 0 < self.alpha < 1:
            raise UsageError("alpha must be in (0, 1)")
        if self.n_bins is not None and self.n_bins < 2:
            raise UsageError("n_bins must be >= 2")
        if self.batch is not None and (self.batch < 1 or (
                self.batch > 1 and self.backend != "numpyro")):
            raise UsageError("batch must be >= 1, and > 1 only with the numpyro backend "
                             "(PyMC has no vmapped sampler)")
        if self.lane_groups < 1:
            raise UsageError(f"lane_groups must be >= 1, got {self.lane_groups}")
        if self.warmup_depth is not None and not 1 <= self.warmup_depth <= 10:
            raise UsageError(f"warmup_depth must be in 1..10 (the sampling cap), got "
                             f"{self.warmup_depth}")
        if (self.lane_groups > 1 or self.warmup_depth is not None) and (
                self.backend != "numpyro" or self.batch_size == 1):
            raise UsageError("lane_groups and warmup_depth are options of the vmapped "
                             "NumPyro batches (backend numpyro, batch > 1)")

    @property
    def batch_size(self) -> int:
        """Replicates per vmapped NumPyro program (default :data:`DEFAULT_BATCH`; 1 runs
        :func:`crowdrank.inference.nuts.fit_nuts` per replicate, the only way for PyMC)."""
        if self.batch is not None:
            return int(self.batch)
        return DEFAULT_BATCH if self.backend == "numpyro" else 1

    def spec(self, sim: int) -> dict:
        """The JSON-able grid point of replicate ``sim`` (its cache key)."""
        d = asdict(self)
        # not in a replicate's key: lane groups change the schedule, not the draws
        for k in ("sims", "alpha", "n_bins", "batch", "lane_groups"):
            d.pop(k)
        if d["warmup_depth"] is None:     # keys of studies run before the option existed
            d.pop("warmup_depth")
        if d["approx"] == "online":       # likewise
            d.pop("approx")
        if d["simplex"] == "gamma":       # likewise (the default coordinates)
            d.pop("simplex")
        # the re-used PyMC graph draws other (equally valid) chains: its own key; the
        # per-replicate build keeps the keys of the studies run before the option existed
        if self.backend != "pymc" or not d["pymc_reuse"]:
            d.pop("pymc_reuse")
        if self.backend == "prior":            # the sampler settings do not matter there
            for k in ("chains", "tune", "draws", "target_accept"):
                d.pop(k)
        d["sim"] = int(sim)
        d["kind"] = "sbc"
        return d

# ----------------------------------------------------------------------------- the study
def run_sbc(cfg: SbcConfig, out: str | Path, *, processes: int | None = None,
            progress: bool = True, n_sim: int = 2000, scheduler=None) -> dict:
    """Run (or resume) an SBC study and write ``ranks.csv`` and ``sbc.json`` into ``out``.

    Replicates are cached under ``out/cache`` (:func:`crowdrank.validation.runtime.grid.run_grid`):
    rerunning the same command does only what is missing, and a larger ``--sims`` adds
    replicates. A replicate that raises is listed under ``failed_replicates`` and left out
    of the tests (rerun to retry it). ``scheduler`` sends the replicates to Dask
    ``distributed`` (:func:`crowdrank.validation.runtime.grid.run_grid`: ``"local"``, an address or a
    ``Client``); results and cache are the same. Returns the summary written to
    ``sbc.json``.
    """
    from crowdrank.validation.runtime.grid import GridError, load_cached, run_grid

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    specs = [cfg.spec(i) for i in range(cfg.sims)]
    t0 = time.perf_counter()
    failures: dict[str, str] = {}
    B = cfg.batch_size
    jobs, fn = ((specs, sbc_job) if B == 1 else
                (batch_specs(specs, B), partial(sbc_batch_job, lane_groups=cfg.lane_groups)))
    try:
        grid_run = run_grid(jobs, fn, out / "cache", processes=processes,
                            progress=progress, scheduler=scheduler)
        computed = len(grid_run.computed)
    except GridError as exc:
        failures = exc.failures
        computed = None
    wall = time.perf_counter() - t0
    if B == 1:
        results = [load_cached(out / "cache", s) for s in specs]
    else:
        results = []
        for j in jobs:
            got = load_cached(out / "cache", j)
            results.extend(got["members"] if got is not None else [None] * len(j["members"]))
    done = [r for r in results if r is not None]
    if not done:
        raise RuntimeError("no SBC replicate finished: " + "; ".join(
            list(failures.values())[:3]))
    summary = summarise(cfg, done, n_sim=n_sim)
    summary["failed_replicates"] = [{"key": k, "error": v} for k, v in failures.items()]
    summary["timing"]["wall_s_this_run"] = wall
    summary["timing"]["computed_this_run"] = computed
    summary["timing"]["processes"] = (os.cpu_count() or 1) if processes is None else processes
    summary["timing"]["batch"] = B
    summary["timing"]["lane_groups"] = cfg.lane_groups if B > 1 else 1
    write_ranks_csv(out / "ranks.csv", done)
    with (out / "sbc.json").open("w") as fh:
        json.dump(_jsonable(summary), fh, indent=1)
    return summary


def summarise(cfg: SbcConfig, results: Sequence[dict], *, n_sim: int = 2000) -> dict:
    """The ``sbc.json`` object from the replicates' results (see module doc)."""
    names, fams = results[0]["params"], results[0]["families"]
    S = int(results[0]["n_draws"])
    ranks = rank_matrix(results)
    gates = [r["gate"] for r in results]
    passed = np.array([bool(g.get("trusted")) for g in gates])
    # group the gate's reasons by kind: numbers stripped ("bulk ESS # < #")
    reasons = Counter(re.sub(r"\d[\d.eE+-]*", "#", reason)
                      for g in gates for reason in g.get("reasons", []))
    seed = cfg.seed
    out = {"config": asdict(cfg), "parameters": names, "families": fams,
           "replicates": len(results), "n_draws": S,
           "nuts": uniformity_summary(ranks, names, fams, S + 1, alpha=cfg.alpha,
                                      n_bins=cfg.n_bins, seed=seed, n_sim=n_sim)}
    if cfg.backend != "prior":
        out["nuts_gate_passed_only"] = uniformity_summary(
            ranks[passed], names, fams, S + 1, alpha=cfg.alpha, n_bins=cfg.n_bins,
            seed=seed, n_sim=n_sim)
        out["nuts_gate_passed_only"]["note"] = (
            "conditioning on the gate selects replicates by their data, which can itself "
            "bias the ranks; the verdict above uses every replicate")
    if all("online_pit" in r for r in results):
        pit = rank_matrix(results, "online_pit")
        out["online"] = uniformity_summary(pit, names, fams, None, alpha=cfg.alpha,
                                           n_bins=cfg.n_bins, seed=seed, n_sim=n_sim)
        from crowdrank.validation.pipelines.sbc_approx import title
        out["online"]["method"] = title(cfg.model, cfg.approx, ONLINE_NAME)
        clamps = Counter()
        for r in results:
            clamps.update(r.get("online_clamped", {}))
        out["online"]["clamped"] = dict(clamps)
    divs = np.array([int(g.get("divergences") or 0) for g in gates])
    ess = np.array([g.get("ess_bulk_min") if g.get("ess_bulk_min") is not None else np.nan
                    for g in gates], float)
    out["gate"] = {"passed": int(passed.sum()), "failed": int((~passed).sum()),
                   "failed_sims": [int(r["sim"]) for r, p in zip(results, passed) if not p],
                   "reasons": dict(reasons),
                   "divergences_total": int(divs.sum()),
                   "replicates_with_divergences": int((divs > 0).sum()),
                   "ess_bulk_min_median": _nanstat(np.nanmedian, ess),
                   "ess_bulk_min_min": _nanstat(np.nanmin, ess),
                   "replicates_with_ess_below_n_draws": int(np.sum(ess < S))}
    tt = np.array([r["timings"].get("total", np.nan) for r in results], float)
    tn = np.array([r["timings"].get("nuts", np.nan) for r in results], float)
    to = np.array([r["timings"].get("online", np.nan) for r in results], float)
    tc = np.array([r["timings"].get("cpu", np.nan) for r in results], float)
    out["timing"] = {"replicate_s_mean": _nanstat(np.nanmean, tt),
                     "replicate_cpu_s_mean": _nanstat(np.nanmean, tc),
                     "replicate_s_median": _nanstat(np.nanmedian, tt),
                     "nuts_s_mean": _nanstat(np.nanmean, tn),
                     "online_s_mean": _nanstat(np.nanmean, to),
                     "replicate_s_sum": float(np.nansum(tt))}
    return out


