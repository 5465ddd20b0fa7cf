"""The PPLs' own approximations of the posterior: ADVI (mean-field, full-rank, low-rank),
Laplace at the mode, multi-path Pathfinder, and the non-Gaussian guides (structured and
coupled VI on the worker simplex, normalising flows), each fitted on the model's NumPyro
(or PyMC) program, with PSIS k̂ for every approximation that has a density (``docs/fidelity.md``,
"The PPLs' approximations").

One module per family, one result type (:class:`ApproxFit`: draws written as NUTS writes
them); :func:`fit_approx` dispatches by method name.
"""

from __future__ import annotations

import importlib

#: Public names and their modules, imported on first use: the method registry imports
#: :mod:`.entries` for ``crowdrank --help``, which must not pull in NumPy or JAX.
_LAZY = {"KHAT_RELIABLE": "psis", "label": "psis", "online_log_ratios": "psis",
         "psis_diagnostic": "psis", "ApproxFit": "result"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: method name -> (module, fit function, options class, description)
METHODS = {
    "advi": ("vi", "fit_vi", "VIOptions",
             "mean-field Gaussian ADVI (NumPyro AutoNormal; PyMC pm.fit advi)"),
    "fullrank-advi": ("vi", "fit_vi", "VIOptions",
                      ("full-rank Gaussian ADVI (NumPyro AutoMultivariateNormal; PyMC "
                      "fullrank_advi)")),
    "lowrank-advi": ("vi", "fit_vi", "VIOptions",
                     ("low-rank-plus-diagonal Gaussian ADVI (NumPyro "
                     "AutoLowRankMultivariateNormal)")),
    "laplace-ppl": ("laplace", "fit_laplace", "LaplaceOptions",
                ("Gaussian at the mode with the inverse Hessian (NumPyro potential, "
                "jax.hessian)")),
    "pathfinder": ("pathfinder", "fit_pathfinder", "PathfinderOptions",
                   ("multi-path Pathfinder with PSIS resampling (blackjax on the NumPyro "
                   "density)")),
    "structured-vi": ("structured", "fit_structured", "StructuredOptions",
                      ("a full-rank Gaussian on the scores times a Dirichlet/Beta per "
                       "worker (NumPyro guide)")),
    "coupled-vi": ("structured", "fit_coupled", "StructuredOptions",
                   ("structured-vi with each worker's concentrations an affine function "
                    "of the scores it ranked")),
    "flow-vi": ("flow", "fit_flow", "FlowOptions",
                "a normalising flow (NumPyro AutoIAFNormal / AutoBNAFNormal)"),
}
#: the modules whose fits take ``psis`` themselves (they resample a larger pool of q)
_POOLED = ("structured", "flow")


def options_class(method: str):
    """The options dataclass of ``method``."""
    mod, _, cls, _ = _entry(method)
    return getattr(importlib.import_module(f"{__name__}.{mod}"), cls)


def _entry(method: str):
    if method not in METHODS:
        raise ValueError(f"unknown approximation {method!r}; expected one of {tuple(METHODS)}")
    return METHODS[method]


def fit_approx(data, model, priors, method: str, *, psis: bool = False,
               **options):
    """Fit ``model`` (a name or its spec) by ``method`` with ``options`` (fields of its
    options class), attach PSIS k̂; ``psis=True`` returns the importance-resampled draws
    instead of q's own. The families take the name: each looks it up where it builds its
    program (:func:`.target.build_target`)."""
    from crowdrank.models.registry import name_of

    from .scope import check_model

    model = name_of(model)
    check_model(model, ValueError)    # every model of the ranking registry
    mod, fn, _, _ = _entry(method)
    f = getattr(importlib.import_module(f"{__name__}.{mod}"), fn)
    seed = options.get("seed", 0)
    if mod == "vi":
        fit = f(data, model, priors, method, **options)
    elif mod in _POOLED:
        fit = f(data, model, priors, psis=psis, **options)
    else:
        fit = f(data, model, priors, **options)
    return fit.with_psis(resample=psis, seed=seed + 7)


__all__ = [
    "KHAT_RELIABLE",
    "METHODS",
    "ApproxFit",
    "fit_approx",
    "label",
    "online_log_ratios",
    "options_class",
    "psis_diagnostic",
]
