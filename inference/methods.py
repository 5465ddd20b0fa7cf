"""The inference methods, one entry each: the method registry beside the model registry.

Every way to get a :class:`crowdrank.inference.posterior.Posterior` is one :class:`Method`
in :data:`REGISTRY`, in the spirit of :mod:`crowdrank.models.registry` (and crowd-kit's
one-class-per-aggregator): its ``name`` (what the user types: ``crowdrank fit --method
NAME``, ``crowdrank audit --approx NAME``), a description, the models it fits, its
back-ends, an options dataclass whose field defaults are the method's defaults (stated
nowhere else; each field's ``metadata["help"]`` is its ``--help`` line), and its ``fit``
function::

    fit(data, model, priors, options, *, seed=0, progress=False) -> Posterior

(``model`` the model's :class:`~crowdrank.models.registry.ModelSpec`: the name the user
gave was looked up once, where it entered; ``model.name`` where a name is written) named
as a ``"module:function"`` string and imported on first use (:meth:`Method.fn`),
so that importing this module, which ``crowdrank --help`` does, costs no NumPy, JAX or
PyTensor. Use::

    from crowdrank.inference import methods
    m = methods.get("online")                       # UsageError naming the choices
    post = m.run(data, "couple", priors, m.options(taylor="quadrature"), seed=0)
    methods.names(model="bt")                       # the methods that fit BT
    methods.register(Method(name="toy", ...))       # an extension (tests/test_methods.py)

``crowdrank fit`` builds its ``--method`` choices and one option group per method from
this table (:func:`crowdrank.reports.commands.fit.add_method_options`); the audit fits
its approximations through it (:func:`crowdrank.validation.pipelines.audit.fit_variant`). Adding a
method: docs/design.md, "Adding a method".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, replace

from crowdrank.inference.nuts.config import nuts_field
from crowdrank.models.errors import UsageError


def opt(default, help: str, **meta):
    """A method option: its default and its ``--help`` line (``choices``, ``flag``,
    ``type``, ``metavar``, ``cli=False`` in ``meta``).

    Parameters
    ----------
    default : object
        The option's default value.
    help : str
        Its ``--help`` line.
    **meta
        ``choices``, ``flag``, ``type``, ``metavar``, ``cli=False``: how ``crowdrank fit``
        offers it.
    """
    return field(default=default, metadata={"help": help, **meta})


# ====================================================================== options
@dataclass(frozen=True)
class NutsOptions:
    """The options of ``nuts``, the reference sampler
    (:func:`crowdrank.inference.nuts.fit_nuts`): every field of
    :class:`~crowdrank.inference.nuts.config.NutsConfig` but ``seed`` (the fit's own), with
    NutsConfig's default and help line (:func:`~crowdrank.inference.nuts.config.nuts_field`,
    stated nowhere else), and the warm start ``init_from``."""

    backend: str = nuts_field("backend")
    chains: int = nuts_field("chains")
    tune: int = nuts_field("tune")
    draws: int = nuts_field("draws")
    target_accept: float = nuts_field("target_accept")
    precision: str = nuts_field("precision")
    chain_method: str | None = nuts_field("chain_method", type=str)
    init_jitter: float = nuts_field("init_jitter")
    simplex: str = nuts_field("simplex")
    level: str = nuts_field("level")
    max_tree_depth: int = nuts_field("max_tree_depth")
    dense_mass: bool = nuts_field("dense_mass")
    seed_mass: bool = nuts_field("seed_mass", type=bool)
    pointwise: bool | None = nuts_field("pointwise", type=bool)
    predictive: bool | None = nuts_field("predictive", type=bool)
    prior_only: bool = nuts_field("prior_only")
    max_draws: int | None = nuts_field("max_draws")
    profile: bool = nuts_field("profile")
    init_from: object = opt(None, "a fit's folder or posterior.json: each chain starts at its "
                            "own draw of it, the mass matrix from its variances", type=str,
                            metavar="PATH")

    def config(self, seed: int = 0):
        """The :class:`~crowdrank.inference.nuts.config.NutsConfig` of these options and
        ``seed`` (every shared field, by name).

        Parameters
        ----------
        seed : int
            The sampler's seed.
        """
        from crowdrank.inference.nuts.config import NutsConfig

        return NutsConfig(seed=int(seed), **{f.name: getattr(self, f.name)
                                             for f in fields(self)
                                             if f.name in NutsConfig.fields()})


@dataclass(frozen=True)
class GibbsOptions:
    """The options of ``gibbs``, the collapsed data-augmentation Gibbs sampler
    (:func:`crowdrank.inference.gibbs.fit_gibbs`)."""

    chains: int = opt(2, "chains (one process, or one Dask task, each)")
    warmup: int = opt(500, "adapted warm-up sweeps per chain (discarded)")
    draws: int = opt(1000, "kept draws per chain")
    thin: int = opt(1, "sweeps per kept draw")
    lambda_steps: int = opt(1, "HMC transitions of the scores (offsets summed out) per sweep")
    walk_steps: int = opt(10, "random-walk steps of each worker's simplex, the offsets "
                          "summed out, per sweep (COUPLE, CrowdBT)")
    jumps: int = opt(1, "independence jumps of each worker's entries between their prior "
                     "spike and data mode per sweep (COUPLE, CrowdBT)")
    processes: int | None = opt(None, "chains run at once on this machine (None: the CPUs, "
                                "at most --chains)", type=int)
    scheduler: str | None = opt(None, "a Dask scheduler's address: one task per chain on "
                                "its workers", type=str)
    pointwise: bool = opt(False, "also the pointwise log-likelihood per ranking (LOO)",
                          cli=False)
    predictive: bool = opt(False, "also posterior predictive orders at thinned draws",
                           cli=False)


@dataclass(frozen=True)
class UpdateOptions:
    """The options of the one-pass online update (shared by ``online`` and ``ep``)."""

    taylor: str = opt("paper", "OnlineGBMM approximation of E[softmax] (quadrature: "
                      "Gauss–Hermite moment matching, also for the score step); CrowdBT "
                      "takes paper (Chen et al.'s expansion) or quadrature",
                      choices=("paper", "full", "plugin", "quadrature"))
    score_alpha: str = opt("updated", "which α the OnlineGBMM score step uses",
                           choices=("updated", "prior"))
    order: str = opt("file", "pass order: the file's, or a seeded shuffle (of a streamed "
                     "file: an external shuffle through temporary bucket files)",
                     choices=("file", "shuffle"))
    strict: bool = opt(False, "error instead of a counted clamp on a non-positive α or σ²")
    kappa: float = opt(1e-4, "σ² floor factor of Eq. (12)")
    kappa2: float = opt(1e-4, "floor of R_t (appendix 1.1.2) in OnlineGBMM / CrowdBT")
    bt_breaking: str = opt("game", "OnlineBT per ranking (openskill's full pairing) or per "
                           "rank-broken pair", choices=("game", "pairs"))
    wl_beta: float | None = opt(None, "Weng–Lin β (default prior-sigma/2, openskill's "
                                "convention)", type=float)
    wl_kappa: float | None = opt(None, "Weng–Lin κ (default 1e-4)", type=float)
    wl_tau: float | None = opt(None, "Weng–Lin τ dynamics (default 0)", type=float)
    wl_gamma: str | None = opt(None, "Weng–Lin γ: sigma/c (openskill's default), 1/k, or a "
                               "number", type=str)


@dataclass(frozen=True)
class OnlineOptions(UpdateOptions):
    """The options of ``online``: the update's (:class:`UpdateOptions`) and the passes
    over the data."""

    passes: int = opt(1, "passes over the data")
    state_in: str | None = opt(None, "resume from a saved online state (posterior.json)",
                               type=str)
    chunk_size: int = opt(1 << 17, "rankings read and updated at a time when the file is "
                          "streamed (rankings/pairwise/wide CSV, worker-winner-loser, "
                          "Parquet); memory is bounded by it")
    in_memory: bool = opt(False, "read the whole file first instead of streaming it (same "
                          "numbers)")


@dataclass(frozen=True)
class EpOptions(UpdateOptions):
    """The options of ``ep``: the update's (:class:`UpdateOptions`) and EP's passes,
    damping and tolerance [Minka01]."""

    passes: int = opt(10, "the most passes (stopping once converged)")
    damping: float = opt(0.0, "weight kept on a ranking's previous site, in [0, 1) (0.5 "
                         "from the pass after one that met an improper cavity)")
    ep_tol: float = opt(1e-3, "converged when no mean moves by more than this many sds, and "
                        "no log variance or log concentration by more than this")


@dataclass(frozen=True)
class EpExactOptions(EpOptions):
    """The options of ``ep-exact``: ``ep``'s, and which score part a site update takes
    (:mod:`crowdrank.inference.online.ep_exact`)."""

    scores: str = opt("ep", "a site's score part: EP's stage updates (ep), or the tilted "
                      "Gaussian's moments on the worker integral's grid (exact; COUPLE)",
                      choices=("ep", "exact"))
    workers: str = opt("site", "a worker's η: from each ranking's site (site), or from all "
                       "its rankings at once on a simplex grid, alternated with score "
                       "passes (joint; COUPLE)", choices=("site", "joint"))
    sweeps: int = opt(2, "joint: worker-factor / score-pass alternations after the passes")
    lam: str = opt("gh", "joint: the scores in a worker's factor, integrated on the "
                   "Gauss-Hermite grid (gh) or at their means (plugin)",
                   choices=("gh", "plugin"))
    # BT's pairing and Weng–Lin's constants: not read by COUPLE's or CrowdBT's update, the
    # only models ep-exact fits, so not offered on its command line
    bt_breaking: str = opt("game", "unused by ep-exact", cli=False)
    wl_beta: float | None = opt(None, "unused by ep-exact", cli=False)
    wl_kappa: float | None = opt(None, "unused by ep-exact", cli=False)
    wl_tau: float | None = opt(None, "unused by ep-exact", cli=False)
    wl_gamma: str | None = opt(None, "unused by ep-exact", cli=False)


@dataclass(frozen=True)
class LaplaceOptions:
    """The options of ``laplace``: the batch MAP solver behind Laplace's intervals."""

    solver: str = opt("newton", "Newton (analytic Hessian), MM (Hunter 2004) or gradient "
                      "ascent", choices=("newton", "mm", "gradient"))
    tol: float | None = opt(None, "stop when max |gradient| <= tol (None: the solver's "
                            "default, 1e-9; CrowdBT's EM 1e-6)", type=float)
    max_iter: int | None = opt(None, "iteration cap (None: 100 Newton, 100000 MM/gradient; "
                               "EM 5000)", type=int)


@dataclass(frozen=True)
class BootstrapOptions(LaplaceOptions):
    """The options of ``bootstrap``: the MAP solver's and the resampling's."""

    bootstrap: int = opt(1000, "bootstrap resamples", metavar="B")
    interval_prob: float = opt(0.95, "probability of the bootstrap percentile intervals")
    processes: int | None = opt(None, "processes for the bootstrap refits (None: at most 2, "
                                "at most the CPUs)", type=int)


@dataclass(frozen=True)
class PointOptions(BootstrapOptions):
    """The options of ``map`` and ``ml``: the solver's, the bootstrap's and which intervals."""

    intervals: str = opt("laplace", "sd from Laplace (inverse Hessian) or from bootstrap "
                         "refits", choices=("laplace", "bootstrap"))


@dataclass(frozen=True)
class EmOptions:
    """The options of ``em``, CrowdBT's MAP by expectation-maximisation."""

    tol: float | None = opt(None, "stop when max |gradient| <= tol (None: 1e-6)", type=float)
    max_iter: int | None = opt(None, "iteration cap (None: 5000)", type=int)


@dataclass(frozen=True)
class TrueSkillOptions:
    """The options of ``trueskill`` over the rank-broken pairs."""

    ts_beta: float | None = opt(None, "performance sd β (default prior-sigma/2)", type=float)
    ts_tau: float = opt(0.0, "dynamics τ added before a game")
    ts_draw_probability: float = opt(0.0, "sets the draw margin (no draws reach it from a "
                                     "file: ties are split)")


# ====================================================================== the entry
@dataclass(frozen=True)
class Method:
    """One inference method (module docstring).

    Attributes
    ----------
    name : str
        What the user types (``--method``, ``--approx``).
    title : str
        One line for ``--help``.
    fit : str or callable
        ``"module:function"`` (or a callable) ``f(data, model, priors, options, *, seed,
        progress) -> Posterior``, handed the model's spec (``model.name``: its name).
    options_class : type
        A frozen dataclass: every field has a default and ``metadata["help"]``.
    models : tuple of str, or ``"online"``
        The models it fits; ``"online"``: every model whose spec names an online update
        (``ModelSpec.online``) and that is not normalised; ``()``: every model.
    backends : tuple of str
        The back-ends it can run on (the ``backend`` option's choices), or ``()``.
    reference : bool
        A sampler whose draws are the audit's reference (NUTS), not an approximation.

    description : str
        A paragraph for the documentation (optional).
    update : str or callable, optional
        ``"module:function"`` ``f(posterior, new_data, model, priors, options, *, seed) ->
        Posterior``: the fit continued with more rankings, as the method does in
        production (an online state resumed: no pass over the old data). ``None``: more
        data means a refit of all of them (posterior SBC's refits).
    """

    name: str
    title: str
    fit: str | Callable
    options_class: type
    models: tuple[str, ...] | str = ()
    backends: tuple[str, ...] = ()
    reference: bool = False
    description: str = ""
    update: str | Callable | None = None

    def fn(self, role: str = "fit") -> Callable:
        """The function named by ``role`` (``"fit"``), imported on first use.

        Parameters
        ----------
        role : str
            The attribute that names the function (``"fit"``).
        """
        ref = getattr(self, role)
        if ref is None or callable(ref):
            return ref
        module, _, name = ref.partition(":")
        return getattr(importlib.import_module(module), name)

    def options(self, **given):
        """The options dataclass with ``given`` over its defaults (``None`` values keep
        the default); an unknown name is a :class:`UsageError`.

        Parameters
        ----------
        **given
            Option values by field name.
        """
        known = {f.name for f in fields(self.options_class)}
        bad = sorted(set(given) - known)
        if bad:
            raise UsageError(f"method {self.name} has no option {bad[0]!r}; it takes "
                             f"{', '.join(sorted(known))}")
        return self.options_class(**{k: v for k, v in given.items() if v is not None})

    def fits(self, model) -> bool:
        """Whether this method fits ``model``.

        Parameters
        ----------
        model : str or ModelSpec
            A name of the model registry (``crowdrank.models.registry``), or its spec.
        """
        from crowdrank.models.registry import as_spec, name_of
        if self.models == "online":
            spec = as_spec(model)
            return spec.online is not None and not spec.normalized
        return not self.models or name_of(model) in self.models

    def check_model(self, model) -> None:
        """Refuse (:class:`UsageError`) a model this method does not fit.

        Parameters
        ----------
        model : str or ModelSpec
            A name of the model registry (``crowdrank.models.registry``), or its spec.
        """
        if not self.fits(model):
            from crowdrank.models.registry import name_of
            raise UsageError(f"method {self.name} fits models "
                             f"{', '.join(self.model_names())}, not {name_of(model)!r}")

    def model_names(self) -> tuple[str, ...]:
        """The registered models it fits (in the entry's own order when it lists them)."""
        from crowdrank.models.registry import names
        known = names()
        if self.models and self.models != "online":
            return tuple(m for m in self.models if m in known)
        return tuple(m for m in known if self.fits(m))

    def run(self, data, model, priors, options=None, *, seed: int = 0,
            progress: bool = False):
        """Check the model, fill the default options, and fit: a ``Posterior``.

        Parameters
        ----------
        data : Rankings
            The data.
        model : str or ModelSpec
            A name of the model registry (``crowdrank.models.registry``, looked up here),
            or its spec; the fit function is handed the spec.
        priors : Priors
            The priors, shared with every other method.
        options : dataclass, optional
            An instance of ``options_class`` (default: its defaults).
        seed : int
            Seed of the fit's random choices.
        progress : bool
            Show progress.
        """
        self.check_model(model)
        options = self.options() if options is None else options
        if not isinstance(options, self.options_class):
            raise UsageError(f"method {self.name} takes {self.options_class.__name__}, got "
                             f"{type(options).__name__}")
        from crowdrank.models.registry import as_spec
        return self.fn("fit")(data, as_spec(model), priors, options, seed=seed,
                              progress=progress)


_FITS = "crowdrank.inference.method_fits"
REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("nuts", "the reference: NUTS in NumPyro or PyMC, behind the convergence gate",
           f"{_FITS}:fit_nuts_method", NutsOptions, backends=("numpyro", "pymc"),
           reference=True),
    Method("gibbs", "a reference: collapsed data-augmentation Gibbs (Pólya-urn offsets, "
           "slacks, Laplace-preconditioned scores), behind the R-hat/ESS gate",
           f"{_FITS}:fit_gibbs_method", GibbsOptions,
           models=("couple", "crowdbt", "pl", "bt"), reference=True),
    Method("online", "one pass of online moment matching (OnlineGBMM, CrowdBT online, "
           "Weng–Lin)", f"{_FITS}:fit_online_method", OnlineOptions, models="online",
           update=f"{_FITS}:update_online_method"),
    Method("ep", "expectation propagation over the online update: passes that revisit every "
           "ranking's contribution", f"{_FITS}:fit_ep_method", EpOptions, models="online"),
    Method("ep-exact", "EP whose site updates integrate the worker's η exactly (COUPLE: "
           "over the simplex, rankings of at most 4 items; CrowdBT: over the Beta)",
           f"{_FITS}:fit_ep_exact_method", EpExactOptions, models=("couple", "crowdbt")),
    Method("map", "batch MAP (the prior as a ridge) with --intervals laplace or bootstrap; "
           "CrowdBT's MAP by EM", f"{_FITS}:fit_map", PointOptions,
           models=("bt", "pl", "crowdbt")),
    Method("ml", "batch maximum likelihood (sum-to-zero) with --intervals laplace or "
           "bootstrap", f"{_FITS}:fit_ml", PointOptions, models=("bt", "pl")),
    Method("laplace", "batch MAP with Laplace's intervals (inverse Hessian)",
           f"{_FITS}:fit_laplace", LaplaceOptions, models=("bt", "pl")),
    Method("bootstrap", "batch MAP with bootstrap intervals (refits of resampled data)",
           f"{_FITS}:fit_bootstrap", BootstrapOptions, models=("bt", "pl")),
    Method("em", "CrowdBT's MAP by EM, Beta worker accuracies", f"{_FITS}:fit_em",
           EmOptions, models=("crowdbt",)),
    Method("trueskill", "TrueSkill over the rank-broken pairs", f"{_FITS}:fit_trueskill",
           TrueSkillOptions, models=("bt",)),
)}


def _add_approx_entries() -> None:
    # the PPLs' own approximations: advi, fullrank-advi, lowrank-advi, laplace-ppl,
    # pathfinder (their options and fits live in crowdrank.inference.approx.entries)
    from crowdrank.inference.approx.entries import method_entries
    REGISTRY.update({e["name"]: Method(**e) for e in method_entries()})


_add_approx_entries()


#: a name that reaches another entry on the models its own entry does not fit: the batch
#: Laplace fits BT and PL; on any other model "laplace" is the PPL's Laplace at the mode
#: (the same Gaussian at the MAP with the full Hessian; on BT/PL the two agree)
FALLBACKS = {"laplace": "laplace-ppl"}


def resolve(name: str, model: str) -> str:
    """The entry ``name`` stands for with ``model``: ``name`` itself when its entry fits
    the model, else its :data:`FALLBACKS` entry when that one does (else ``name``, which
    :meth:`Method.check_model` then refuses).

    Parameters
    ----------
    name : str
        A method name as the user typed it.
    model : str or ModelSpec
        A name of the model registry (``crowdrank.models.registry``), or its spec.
    """
    alt = FALLBACKS.get(name)
    if name in REGISTRY and not REGISTRY[name].fits(model) and alt in REGISTRY \
            and REGISTRY[alt].fits(model):
        return alt
    return name


def register(method: Method, *, replace_existing: bool = False) -> Method:
    """Add ``method`` to :data:`REGISTRY` (an extension; a name in use is refused unless
    ``replace_existing``). Its options dataclass must give every field a default and a
    help line.

    Parameters
    ----------
    method : Method
        The entry.
    replace_existing : bool
        Replace an entry of the same name instead of refusing it.
    """
    if method.name in REGISTRY and not replace_existing:
        raise UsageError(f"a method named {method.name!r} is already registered")
    check_options_class(method.options_class)
    REGISTRY[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove ``name`` (tests' fixtures).

    Parameters
    ----------
    name : str
        The method's name.
    """
    REGISTRY.pop(name, None)


def check_options_class(cls) -> None:
    """Every field has a default and a non-empty ``metadata["help"]``."""
    for f in fields(cls):
        if f.default is MISSING and f.default_factory is MISSING:
            raise UsageError(f"{cls.__name__}.{f.name} has no default")
        if not f.metadata.get("help"):
            raise UsageError(f"{cls.__name__}.{f.name} has no help")


def get(name: str) -> Method:
    """The method called ``name``; a :class:`UsageError` naming the choices otherwise.

    Parameters
    ----------
    name : str
        The method's name (``--method``).
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown method {name!r}; choose one of "
                         f"{', '.join(REGISTRY)}") from None


def names(*, model: str | None = None, reference: bool | None = None) -> tuple[str, ...]:
    """Registered method names, optionally only those fitting ``model`` or of one kind.

    Parameters
    ----------
    model : str, optional
        Only the methods that fit this model.
    reference : bool, optional
        Only references (True) or only approximations (False).
    """
    return tuple(n for n, m in REGISTRY.items()
                 if (model is None or m.fits(model))
                 and (reference is None or m.reference == reference))


def approximations() -> tuple[str, ...]:
    """The methods the audit can compare with NUTS (every entry that is not a reference)."""
    return names(reference=False)


def with_options(options, **given):
    """``options`` with the non-``None`` entries of ``given`` replaced.

    Parameters
    ----------
    options : dataclass
        A method's options.
    **given
        New values by field name (``None`` keeps the old one).
    """
    return replace(options, **{k: v for k, v in given.items() if v is not None})
