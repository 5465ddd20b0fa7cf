"""Which models the PPL approximations fit: every model of the ranking registry, read when
asked (a module of its own, imported by the package and by its method entries alike, so
neither imports the other for it)."""

from __future__ import annotations

from crowdrank.models.errors import UsageError


def check_model(model: str, error=UsageError) -> None:
    """Refuse a model the PPL approximations cannot fit: they fit every model of the
    ranking registry (:data:`crowdrank.models.registry.REGISTRY`, read now, so that a model
    added there is fitted without naming it here), each on its sampler's program.

    Parameters
    ----------
    model : str or ModelSpec
        The model's name, or its spec.
    error : type
        The exception raised (``UsageError`` at the CLI, ``ValueError`` in Python).
    """
    from crowdrank.models.registry import REGISTRY, name_of

    model = name_of(model)
    if model not in REGISTRY:
        raise error(f"the PPL approximations fit {', '.join(REGISTRY)}, not {model!r}")
