"""The sampler's settings, apart from the run (as NumPyro's ``NUTS(...)`` apart from ``MCMC``).

:class:`NutsConfig` holds every option of :func:`crowdrank.inference.nuts.fit_nuts` except the
data, the model, the priors and the starting information (``init``, ``approx``); each
default is stated once, here, and every value is checked when the object is made, so a bad
option fails before anything is compiled. ``fit_nuts(data, model, priors, chains=2)`` is
``fit_nuts(data, model, priors, NutsConfig(chains=2))``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from crowdrank.models.errors import UsageError

BACKENDS = ("numpyro", "pymc")
PRECISIONS = ("float64", "float32")
CHAIN_METHODS = (None, "parallel", "vectorized", "sequential")
SIMPLEXES = ("gamma", "dirichlet")
LEVELS = ("centered", "iid")
#: Above this many stored log-lik values (chains × draws × rankings) the pointwise
#: log-likelihood is not stored by default (paper scale: 4·1000·450,000 ≈ 1.8e9 ≈ 7 GB).
POINTWISE_LIMIT = 50_000_000
#: Posterior predictive draws kept (all chains together): the draws are thinned to at most
#: this many; a check's Monte Carlo error then stays below ~2.5 % of a rate.
PREDICTIVE_DRAWS = 400


def _f(default, help: str, **meta):
    """A field of :class:`NutsConfig`: its default (stated here only) and its ``--help`` line
    (``metadata["help"]``; ``choices``, ``type`` as ``crowdrank fit`` offers it), which every
    other surface reads (:func:`nuts_field`)."""
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True)
class NutsConfig:
    """How :func:`~crowdrank.inference.nuts.fit_nuts` samples.

    Attributes
    ----------
    backend : {"numpyro", "pymc"}
        PyMC uses its default sampler (nutpie when installed and compatible).
    chains, tune, draws, target_accept, seed
        Sampler settings; ``seed`` fixes every random choice.
    precision : {"float64", "float32"}
        NumPyro only: precision of the likelihood's elementwise work. Parameters, priors
        and the likelihood's block totals stay float64 (a total of ~10⁶ nats has a float32
        spacing of ~0.1 nat); float32 roughly halves the gradient time at large scale
        (``bench/bench_gradient.py``). PyMC always uses float64.
    chain_method : {"parallel", "vectorized", "sequential"}, optional
        NumPyro: default ``"parallel"`` when there are enough host devices, else
        ``"vectorized"``. PyMC: ``"sequential"`` runs the chains one after another in this
        process (``cores=1``: no worker processes, for callers that already run fits in
        parallel processes); anything else, one process per chain up to the core count.
    pointwise : bool, optional
        Store the per-ranking log-likelihood (group ``log_likelihood``), computed by the
        PPL's own tool (``numpyro.infer.log_likelihood``, ``pm.compute_log_likelihood``)
        from the observed site; default: only below :data:`POINTWISE_LIMIT` stored values.
    predictive : bool, optional
        Store posterior predictive draws of the rankings (group ``posterior_predictive``,
        variable ``rankings``: new orders of the observed tasks by the model's generative
        process, ``numpyro.infer.Predictive`` / ``pm.sample_posterior_predictive``), from
        at most :data:`PREDICTIVE_DRAWS` draws evenly thinned; default: as ``pointwise``.
    init_jitter : float
        NumPyro only: half-width of the per-chain uniform jitter around ``init`` on the
        unconstrained scale (default 1, as PyMC's ``jitter+adapt_diag``). ``0`` starts every
        chain at the same point, which makes R-hat unable to see several modes; use it only
        for timing experiments.
    simplex, level : str
        The sampler's coordinates (:mod:`crowdrank.models.numpyro_models`): ``"gamma"``
        (exact for any concentration) or ``"dirichlet"`` (the PPL's own simplex, kept for
        comparison); ``"centered"`` (mean + zero-sum scores) or ``"iid"``. The model is
        the same.
    seed_mass : bool
        With ``approx``: the initial inverse mass matrix is the variance of 400 draws of the
        approximation on the unconstrained scale (both back-ends).
    max_tree_depth : int
        NUTS's tree depth limit (both back-ends).
    prior_only : bool
        Sample the prior alone (the data only give the shapes): the check of a sampler
        against the exact marginals of its prior (:mod:`crowdrank.validation.reference`).
    dense_mass : bool
        Adapt a dense (full) mass matrix instead of a diagonal one (NumPyro
        ``dense_mass=True``; PyMC ``QuadPotentialFullAdapt``), seeded with the diagonal of
        the approximation's variances when ``approx`` is given. Worth it only when the
        posterior has strong linear correlations that a diagonal scaling cannot follow.
    max_draws : int, optional
        NumPyro: while the gate fails on R-hat or ESS alone, continue every chain for
        another ``draws`` (the adapted kernel fixed) up to ``max_draws`` per chain
        (:func:`crowdrank.inference.nuts.numpyro.extend_sampling`); the DataTree's
        ``draws`` attr is the number kept. Default: no extension.
    profile : bool
        NumPyro: also compile the potential and its gradient on their own and time them at
        the first start (``timings`` gains ``compile`` and ``gradient_ms``:
        :func:`crowdrank.inference.nuts.numpyro.gradient_timing`). Off by default: it
        compiles a second program only to report a number.
    """

    backend: str = _f("numpyro", "NUTS in NumPyro or PyMC", choices=BACKENDS,
                      metavar="PPL")
    chains: int = _f(4, "chains (one XLA CPU device each)", metavar="N")
    tune: int = _f(1000, "warm-up iterations per chain", metavar="N")
    draws: int = _f(1000, "kept draws per chain", metavar="N")
    target_accept: float = _f(0.8, "the step size's target acceptance rate",
                             metavar="P")
    seed: int = _f(0, "seed of every random choice")
    precision: str = _f("float64", "float64 or float32 (NumPyro: float32 is ~2x faster per "
                        "gradient)", choices=PRECISIONS, metavar="F")
    chain_method: str | None = _f(None, "parallel, vectorized or sequential (default: NumPyro "
                                  "parallel when there are host devices, else vectorized; "
                                  "PyMC a process per chain)", choices=CHAIN_METHODS[1:],
                                  metavar="HOW")
    pointwise: bool | None = _f(None, "store the per-ranking log-likelihood (default: below "
                                f"{POINTWISE_LIMIT:,} values)")
    predictive: bool | None = _f(None, "store posterior predictive orders (default: as "
                                 "--pointwise)")
    init_jitter: float = _f(1.0, "NumPyro: each chain's uniform jitter around its start, "
                            "unconstrained scale", metavar="J")
    simplex: str = _f("gamma", "gamma or dirichlet: the worker simplex's coordinates",
                      choices=SIMPLEXES, metavar="S")
    level: str = _f("centered", "centered or iid: the item scores' coordinates",
                    choices=LEVELS, metavar="L")
    seed_mass: bool = _f(True, "with a warm start, the initial mass matrix from its "
                         "variances")
    max_tree_depth: int = _f(10, "NUTS's tree depth limit", metavar="D")
    prior_only: bool = _f(False, "sample the prior alone (the data give only the shapes)")
    dense_mass: bool = _f(False, "adapt a dense mass matrix instead of a diagonal one")
    max_draws: int | None = _f(None, "NumPyro: extend chains by --draws up to D while R-hat/ESS "
                               "alone fail the gate (default: no extension)", type=int,
                               metavar="D")
    profile: bool = _f(False, "NumPyro: also compile and time the potential and its "
                       "gradient alone (timings gradient_compile, gradient_ms)")

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise UsageError(f"unknown backend {self.backend!r}; expected one of {BACKENDS}")
        if self.chains < 1 or self.draws < 1 or self.tune < 0:
            raise UsageError("need chains >= 1, draws >= 1 and tune >= 0")
        if not 0 < self.target_accept < 1:
            raise UsageError("target_accept must be in (0, 1)")
        if self.precision not in PRECISIONS:
            raise UsageError("precision must be 'float64' or 'float32'")
        if self.chain_method not in CHAIN_METHODS:
            raise UsageError(f"chain_method must be one of {CHAIN_METHODS}, "
                             f"got {self.chain_method!r}")
        if not (math.isfinite(self.init_jitter) and self.init_jitter >= 0):
            raise UsageError("init_jitter must be a finite number >= 0")
        if self.simplex not in SIMPLEXES or self.level not in LEVELS:
            raise UsageError(f"simplex must be 'gamma' or 'dirichlet' and level 'centered' "
                             f"or 'iid', got {self.simplex!r}, {self.level!r}")
        if self.max_tree_depth < 1:
            raise UsageError("max_tree_depth must be >= 1")
        if self.max_draws is not None and self.max_draws < 1:
            raise UsageError("max_draws must be None or >= 1")

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def build(cls, config: NutsConfig | None = None, options: dict | None = None):
        """``config`` (default: all defaults) with the fields named in ``options`` replaced;
        a name that is not a field raises :class:`TypeError` listing the valid ones."""
        if config is None:
            config = cls()
        elif not isinstance(config, NutsConfig):
            raise TypeError(f"config must be a NutsConfig, got {type(config).__name__}")
        options = dict(options or {})
        unknown = sorted(set(options) - set(type(config).fields()))
        if unknown:
            raise TypeError(f"unknown NUTS option(s) {unknown}; valid: "
                            f"{', '.join(type(config).fields())}")
        return dataclasses.replace(config, **options) if options else config


#: Each field of :class:`NutsConfig` by name (its ``default`` and ``metadata["help"]``).
FIELDS = {f.name: f for f in dataclasses.fields(NutsConfig)}


def nuts_default(name: str):
    """The default of :class:`NutsConfig`'s field ``name``: what every surface that offers
    the option (``crowdrank fit --method nuts``, the audit, SBC, the batched sampler) starts
    from.

    Parameters
    ----------
    name : str
        A field of :class:`NutsConfig`.
    """
    return FIELDS[name].default


def nuts_field(name: str, default=dataclasses.MISSING, **meta):
    """A dataclass field that mirrors :class:`NutsConfig`'s field ``name``: its default and
    help line (an options class of another surface derives its NUTS fields so, instead of
    repeating them). ``default`` is a surface's own deliberate default (the audit's warm-up,
    stated where the surface is defined, with its reason); ``meta`` adds to the metadata.

    Parameters
    ----------
    name : str
        A field of :class:`NutsConfig`.
    default : object, optional
        The surface's own default (default: NutsConfig's).
    **meta
        Extra metadata (``help``, ``choices``, ``type``, ``cli``).
    """
    f = FIELDS[name]
    return field(default=f.default if default is dataclasses.MISSING else default,
                 metadata={**f.metadata, **meta})
