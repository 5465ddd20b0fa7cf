"""The approximation whose calibration ``crowdrank sbc`` checks beside NUTS, chosen through
the method registry (:mod:`crowdrank.inference.methods`): ``--approx M`` names any
approximation, ``online`` (the model's online update) by default.

Each replicate fits ``M`` on its simulated data under the replicate's priors and records
the PIT ``F_q(θ̃)`` of every true value under the approximation's marginals
(:func:`crowdrank.validation.pipelines.sbc.online_pit`; [Cook06], docs/design.md, Validation
protocol). ``M`` fits the SBC model itself when it can, else the model's online
counterpart (normalised COUPLE's approximations are stagewise COUPLE's, as for the online
update).
"""

from __future__ import annotations

from crowdrank.models.errors import UsageError
from crowdrank.models.registry import get as get_model

DEFAULT = "online"


def target_model(model: str, approx: str) -> str:
    """The model ``approx`` is fitted as: ``model`` itself, else its online counterpart; a
    :class:`UsageError` when it fits neither (or names no approximation)."""
    from crowdrank.inference.methods import get as get_method

    m = get_method(approx)
    if m.reference:
        raise UsageError(f"--approx {approx}: NUTS is the reference SBC always checks; name "
                         "an approximation")
    if m.fits(model):
        return model
    online = get_model(model).online
    if online is not None and m.fits(online):
        return online
    raise UsageError(f"--approx {approx} fits models {', '.join(m.model_names())}, not "
                     f"{model}")


def check(model: str, approx: str, backend: str) -> None:
    """Refuse, before any replicate runs, what cannot be checked."""
    target_model(model, approx)
    if backend == "prior" and approx != DEFAULT:
        raise UsageError("--backend prior checks the machinery with the online update's "
                         f"prior state; --approx {approx} needs data (numpyro or pymc)")


def fit(model: str, approx: str, data, priors, seed: int):
    """``approx`` fitted on ``data``: a :class:`~crowdrank.inference.posterior.Posterior`."""
    from crowdrank.inference.methods import get as get_method

    target = target_model(model, approx)
    pri = priors.for_data(data, K=get_model(target).prior_K(data.K))
    return get_method(approx).run(data, target, pri, seed=int(seed))


def title(model: str, approx: str, online_names: dict) -> str:
    """The summary's name of the method (the online update's display name by default)."""
    from crowdrank.inference.methods import get as get_method

    if approx == DEFAULT:
        return online_names.get(model, str(get_model(model).online))
    return f"{approx} ({get_method(approx).title})"
