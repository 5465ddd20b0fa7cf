"""What an audit audits and how (:mod:`crowdrank.validation.pipelines.audit`): the embedded
default subject, the audit's choices (:class:`AuditConfig`), the data with its truth
(:class:`Subject`), the one prior every fit reads (:func:`make_priors`) and the quick
audit's draws sized to the parameter count (:func:`quick_draws`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from crowdrank.inference.nuts.config import nuts_default, nuts_field
from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors, build_priors
from crowdrank.models.registry import as_spec
from crowdrank.models.registry import get as get_model
from crowdrank.models.registry import names as model_names

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
#: The models the audit takes with no approximation named: those with an online update (the
#: warm start of NUTS and the default approximation; normalised COUPLE has none of its own)
#: — the default ones, and BT/PL (Weng–Lin's update, and the batch point methods). Any other
#: registered model is audited against the approximations named for it that fit it
#: (:func:`~crowdrank.validation.pipelines.variants.model_variants` refuses it otherwise).
AUDITABLE = MODELS + tuple(m for m in model_names() if m not in MODELS
                           and get_model(m).online and not get_model(m).normalized)


# ====================================================================== configuration
#: The audit's NUTS warm-up per chain, its one NUTS default of its own (every other is
#: :class:`~crowdrank.inference.nuts.config.NutsConfig`'s): the chains start from draws of
#: the online posterior (``warm_start``), so half of NutsConfig's 1000 adapts them
#: (docs/guide.md, the default audit: 4 × (500 + 1000)).
AUDIT_TUNE = 500
#: A ``--quick`` audit's warm-up and draws per chain (the ranking and the pair-table
#: audits); above :data:`QUICK_MANY_PARAMS` scalar parameters it keeps NutsConfig's draws.
QUICK_TUNE, QUICK_DRAWS = 250, 500
QUICK_MANY_PARAMS = 300
#: The fields of :class:`AuditConfig` that are NUTS options (NutsConfig's names).
NUTS_FIELDS = ("backend", "chains", "tune", "draws", "target_accept", "chain_method",
               "max_draws")


def quick_draws(n_params: int | None) -> int:
    """Draws per chain of a quick audit (see :meth:`AuditConfig.quick`).

    Parameters
    ----------
    n_params : int or None
        Scalar parameters of the largest audited model.
    """
    many = n_params is not None and n_params > QUICK_MANY_PARAMS
    return nuts_default("draws") if many else QUICK_DRAWS


def n_scalar_params(data, models: Sequence[str]) -> int:
    """Scalar parameters the gate checks for the largest of ``models`` on ``data``: the
    item scores plus each worker's η (one number, or a row of ``K``).

    Parameters
    ----------
    data : Rankings
        The data.
    models : sequence of str or ModelSpec
        Names of the model registry, or their specs.
    """
    most = 0
    for m in models:
        spec = as_spec(m)
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
    reference : str
        The sampler of the reference: ``nuts`` (the PPL's NUTS, ``backend``, ``chains``,
        ``tune``, ``draws``) or ``gibbs`` (the collapsed Gibbs sampler with its own
        defaults, :class:`crowdrank.inference.methods.GibbsOptions`); the model checks'
        extra fits use the same sampler.
    posterior_sbc : int
        Replicates of posterior SBC of every audited approximation (0: none); the verdict
        without a reference (:mod:`crowdrank.validation.pipelines.audit_psbc`).
    posterior_sbc_minutes : float
        Skip (and say so) an approximation whose posterior SBC is estimated to take longer.
    """

    models: tuple[str, ...] = MODELS
    # NUTS: NutsConfig's defaults and help lines (nuts_field), but the audit's own warm-up
    backend: str = nuts_field("backend")
    chains: int = nuts_field("chains")
    tune: int = nuts_field("tune", AUDIT_TUNE)
    draws: int = nuts_field("draws")
    target_accept: float = nuts_field("target_accept")
    chain_method: str | None = nuts_field("chain_method")
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
    max_draws: int | None = nuts_field("max_draws")   # extend sampling in rounds (per chain)
    reference: str = "nuts"                # the reference's sampler: nuts or gibbs
    posterior_sbc: int = 200               # posterior-SBC replicates per approximation
    posterior_sbc_minutes: float = 5.0     # skip a method estimated to take longer

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
        base = {"tune": QUICK_TUNE, "draws": quick_draws(n_params), "permutations": 3}
        base.update(kw)
        return cls(**base)

    def nuts_options(self, **over):
        """The options of the ``nuts`` entry (:class:`~crowdrank.inference.methods.NutsOptions`)
        from this configuration's NUTS fields (:data:`NUTS_FIELDS`), with ``over`` on top
        (the backend of a cross-check, the warm start ``init_from``; ``None`` keeps the
        configuration's value, else NutsConfig's default).

        Parameters
        ----------
        **over
            Fields of ``NutsOptions``.
        """
        from crowdrank.inference.methods import get as get_method

        given = {name: getattr(self, name) for name in NUTS_FIELDS}
        given.update({k: v for k, v in over.items() if v is not None})
        return get_method("nuts").options(**given)

    @property
    def reference_label(self) -> str:
        """How the report names the reference's sampler."""
        if self.reference == "gibbs":
            return "collapsed Gibbs"
        return f"NUTS ({self.backend})"

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
