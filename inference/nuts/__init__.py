"""NUTS runners: one data set, one model, one back-end → an ArviZ DataTree (docs/design.md, Validation).

:func:`fit_nuts` samples a model of :mod:`crowdrank.models.numpyro_models` or
:mod:`crowdrank.models.pymc_models` with the settings of a :class:`NutsConfig` and returns a
:class:`NutsResult` whose ``idata`` has the layout of ``docs/contracts.md`` (posterior
``lambda`` ``(chain, draw, item)``, ``eta``; ``sample_stats``; ``log_likelihood`` with one
value per *source ranking*; ``observed_data``; ``posterior_predictive``: new orders of the
observed tasks, drawn by the observed site's own generative process), coordinates named
after the real ids, and whose ``gate`` says whether the run is trusted as a reference
(:mod:`crowdrank.inference.gate`).

The package's modules: :mod:`~crowdrank.inference.nuts.config` (:class:`NutsConfig`, every
option once), :mod:`~crowdrank.inference.nuts.fit` (:func:`fit_nuts`, :class:`NutsResult`,
:func:`configure_host_devices`), :mod:`~crowdrank.inference.nuts.route` (the default route's
hooks), :mod:`~crowdrank.inference.nuts.starts` (starting points and seeded mass),
:mod:`~crowdrank.inference.nuts.numpyro` and :mod:`~crowdrank.inference.nuts.pymc` (the
runners), :mod:`~crowdrank.inference.nuts.datatree` (the DataTree and its files);
:mod:`~crowdrank.inference.nuts.experimental` with :mod:`~crowdrank.inference.nuts.gibbs` (routes
that are neither default nor trusted), :mod:`~crowdrank.inference.nuts.batched` (many small
data sets in one program), :mod:`~crowdrank.inference.nuts.pymc_reuse` (one compiled PyMC model
for many data sets) and :mod:`~crowdrank.inference.nuts.pair_nuts` (the pairwise models).
"""

from .config import BACKENDS, POINTWISE_LIMIT, PREDICTIVE_DRAWS, NutsConfig

#: The names imported on first use (PEP 562), so that importing :class:`NutsConfig` (which
#: ``crowdrank fit --help`` does, through the method registry) costs no JAX or PyTensor.
_LAZY = {"read_nuts": "datatree", "to_datatree": "datatree", "write_nuts": "datatree",
         "NutsResult": "fit", "configure_compilation_cache": "fit",
         "configure_host_devices": "fit", "fit_nuts": "fit",
         "adaptation_summary": "numpyro", "coordinate_names": "numpyro",
         "gradient_timing": "numpyro", "NutsRoute": "route", "route_for": "route",
         "jittered_starts": "starts", "numpyro_starts_from_draws": "starts",
         "pymc_initvals": "starts"}


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    try:                      # a submodule not imported yet: nuts.numpyro, nuts.starts, ...
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "BACKENDS",
    "POINTWISE_LIMIT",
    "PREDICTIVE_DRAWS",
    "NutsConfig",
    "NutsResult",
    "NutsRoute",
    "adaptation_summary",
    "configure_compilation_cache",
    "configure_host_devices",
    "coordinate_names",
    "fit_nuts",
    "gradient_timing",
    "jittered_starts",
    "numpyro_starts_from_draws",
    "pymc_initvals",
    "read_nuts",
    "route_for",
    "to_datatree",
    "write_nuts",
]
