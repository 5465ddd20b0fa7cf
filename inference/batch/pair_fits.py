"""The pair-table models' point fits, registered here on the inference side by the model's
name (the models' entries, :data:`crowdrank.models.registry.PAIR_TABLE`, name only the
method, ``ModelSpec.approx``: models/ imports nothing from inference/).

A new pair-table model adds one line to :data:`FITS`; :func:`pair_fit` refuses a model
with none, naming what to add.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from crowdrank.models.errors import UsageError

#: model name -> ``"module:function"`` of its point fit (imported on first use).
FITS: dict[str, str] = {
    "crowdbt-bias": "crowdrank.inference.batch.crowdbt_ext:fit_ext_em",
    "crowdbt-domain": "crowdrank.inference.batch.crowdbt_ext:fit_ext_em",
    "contextual-bt": "crowdrank.inference.batch.contextual:fit_contextual",
}


def pair_fit(model: str) -> Callable:
    """The point fit of the pair-table model ``model``.

    Parameters
    ----------
    model : str
        A name of :data:`crowdrank.models.registry.PAIR_TABLE`.
    """
    if model not in FITS:
        raise UsageError(f"no point fit registered for pair-table model {model!r} "
                         f"(crowdrank.inference.batch.pair_fits.FITS has {', '.join(FITS)})")
    module, _, name = FITS[model].partition(":")
    return getattr(importlib.import_module(module), name)
