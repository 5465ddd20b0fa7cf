"""The approximations an audit compares, as option sets ("variants"): which exist
(:func:`variant_choices`: the OnlineGBMM options and every approximation of the method
registry), how ``--variants``/``--approx`` are read (:func:`parse_variants`), which sets
each model gets (:func:`model_variants`), their labels, and one fit per set through the
method registry (:func:`fit_variant`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from crowdrank.models.data import DataError
from crowdrank.models.registry import ModelSpec, as_spec

#: Online variants that can be compared (OnlineGBMM, docs/design.md, Online); the first value of
#: each is the default. ``method`` names any approximation of the method registry
#: (:mod:`crowdrank.inference.methods`; :func:`variant_choices` lists them, ``online`` first):
#: ``ep`` refines the update by expectation propagation with at most ``ep_passes`` passes,
#: ``laplace``/``bootstrap`` are the batch MAP with Laplace's or the bootstrap's intervals,
#: ``em`` CrowdBT's MAP by EM, ``trueskill`` TrueSkill, and a registered extension itself.
#: ``method`` and ``ep_passes`` apply to every audited model, the others to COUPLE only.
VARIANT_CHOICES = {"taylor": ("paper", "full", "plugin", "quadrature"),
                   "score_alpha": ("updated", "prior"),
                   "ep_passes": ("10", "2", "5", "20")}
#: Options every combination carries (the others only when asked for).
BASE_VARIANTS = ("taylor", "score_alpha")
#: Options that apply to every model, not only COUPLE.
GENERIC_VARIANTS = ("method", "ep_passes")


def variant_choices() -> dict[str, tuple[str, ...]]:
    """:data:`VARIANT_CHOICES` with ``method``: every approximation in the method registry,
    ``online`` (the default) first."""
    from crowdrank.inference.methods import approximations

    names = approximations()
    return {"taylor": VARIANT_CHOICES["taylor"], "score_alpha": VARIANT_CHOICES["score_alpha"],
            "method": ("online",) + tuple(n for n in names if n != "online"),
            "ep_passes": VARIANT_CHOICES["ep_passes"]}


def parse_variants(specs: Sequence[str] | None) -> dict[str, list[str]]:
    """``["taylor=paper,full,plugin", "score_alpha=updated,prior"]`` → option → values.

    Several options may also be joined with ``;`` in one string.
    """
    choices = variant_choices()
    out: dict[str, list[str]] = {}
    for spec in specs or ():
        for part in filter(None, (p.strip() for p in spec.split(";"))):
            key, eq, vals = part.partition("=")
            key = key.strip().replace("-", "_")
            if not eq or key not in choices:
                raise DataError(f"bad variant {part!r}: expected one of "
                                f"{', '.join(k + '=' + ','.join(v) for k, v in choices.items())}",
                                "--variants")
            values = [v.strip() for v in vals.split(",") if v.strip()]
            # method=file:PATH: an approximation computed elsewhere (validation.pipelines.external)
            bad = [v for v in values if v not in choices[key]
                   and not (key == "method" and v.startswith("file:"))]
            if not values or bad:
                raise DataError(f"{key} takes {', '.join(choices[key])}; got {vals!r}",
                                "--variants")
            out.setdefault(key, [])
            out[key] += [v for v in values if v not in out[key]]
    if "ep_passes" in out and "method" not in out:
        out["method"] = ["ep"]          # EP passes mean EP
    return out


def variant_list(variants: dict[str, list[str]], base: Sequence[str] = BASE_VARIANTS
                 ) -> list[dict]:
    """The online option sets to run: the default (paper) first, then every other
    combination of the requested values. Each set holds the ``base`` options and the
    requested ones; ``ep_passes`` only matters with ``method=ep``."""
    default = {k: v[0] for k, v in variant_choices().items() if k in base or k in variants}
    keys = list(variants)
    combos = [dict(default)]
    for vals in itertools.product(*(variants[k] for k in keys)):
        c = dict(default, **dict(zip(keys, vals)))
        if c.get("method", "online") == "online" and "ep_passes" in c:
            c["ep_passes"] = VARIANT_CHOICES["ep_passes"][0]
        if c not in combos:
            combos.append(c)
    return combos


def model_variants(model: str | ModelSpec, variants: dict[str, list[str]]) -> list[dict]:
    """The option sets for ``model`` (a name or its spec): every requested option for
    COUPLE; for CrowdBT :data:`GENERIC_VARIANTS` and the ``taylor`` values its update has
    (``paper``, ``quadrature``); only :data:`GENERIC_VARIANTS` for the others (no Taylor or
    α choice)."""
    from crowdrank.inference.methods import get as get_method
    from crowdrank.inference.methods import resolve

    spec = as_spec(model)
    model = spec.name

    if "method" in variants:        # "laplace" is the PPL's Laplace where the batch one is not
        variants = {**variants, "method": list(dict.fromkeys(
            resolve(m, spec) for m in variants["method"]))}
    bad = [m for m in variants.get("method", ())
           if not m.startswith("file:") and not get_method(m).fits(spec)]
    if bad:
        raise DataError(f"method={bad[0]} fits models "
                        f"{', '.join(get_method(bad[0]).model_names())}, not {model}",
                        "--variants")
    online = spec.online
    if online == "couple":     # OnlineGBMM's Taylor and α options
        return variant_list(variants)
    keep = {k: v for k, v in variants.items() if k in GENERIC_VARIANTS}
    if online == "crowdbt":    # Chen et al.'s expansion or quadrature (inference.online.crowdbt)
        from crowdrank.inference.online.crowdbt import TAYLOR as CROWDBT_TAYLOR
        taylor = [t for t in variants.get("taylor", ()) if t in CROWDBT_TAYLOR]
        if any(t != "paper" for t in taylor):
            keep["taylor"] = taylor
    combos = variant_list(keep, ())
    if get_method("online").fits(spec):
        return combos
    # no online update: the approximations asked for stand in for it (the first one is
    # the default, NUTS's warm start)
    combos = [c for c in combos if c.get("method", "online") != "online"]
    if not combos:
        fit = [m for m in variant_choices()["method"] if get_method(m).fits(spec)]
        raise DataError(f"{model} has no online update to audit: name an approximation "
                        f"that fits it ({', '.join(fit) or 'none registered'})", "--approx")
    return combos


def variant_method(opts: dict, *, order: str | None = None, resamples: int | None = None,
                   processes: int | None = None) -> tuple[str, dict]:
    """The registry entry and the options an option set names: ``opts["method"]``
    (default ``online``); ``ep_passes`` is EP's and ep-exact's ``passes``; the other
    entries of ``opts`` that the method's options dataclass has are kept, the rest dropped
    (a COUPLE-only option for a batch method); ``order`` (a permutation run),
    ``resamples`` and ``processes`` (the bootstrap's) likewise; ``None`` values are left
    to the defaults."""
    from dataclasses import fields

    from crowdrank.inference.methods import get as get_method

    o = dict(opts)
    method = get_method(o.pop("method", "online"))
    passes = o.pop("ep_passes", None)
    # ep_passes is EP's and ep-exact's; an online variant beside EP variants carries it
    # too, unused
    o.update(passes=(int(passes) if passes is not None and method.name in ("ep", "ep-exact")
                     else None),
             order=order, bootstrap=resamples, processes=processes)
    known = {f.name for f in fields(method.options_class)}
    return method.name, {k: v for k, v in o.items() if k in known and v is not None}


def fit_variant(data, model: str | ModelSpec, priors, opts: dict, *, seed: int = 0,
                progress: bool = False, order: str | None = None,
                resamples: int | None = None, processes: int | None = None):
    """Fit one option set through the method registry (:func:`variant_method`; an
    external file ``method="file:PATH"`` is read, not fitted). Returns a
    :class:`~crowdrank.inference.posterior.Posterior`."""
    from crowdrank.inference.methods import get as get_method

    if opts.get("method", "").startswith("file:"):
        from crowdrank.validation.pipelines.external import read_external
        return read_external(opts["method"], data, model)
    name, options = variant_method(opts, order=order, resamples=resamples,
                                   processes=processes)
    method = get_method(name)
    return method.run(data, model, priors, method.options(**options), seed=seed,
                      progress=progress)


def variant_label(opts: dict) -> str:
    default = {k: v[0] for k, v in variant_choices().items()}
    diff = [f"{k}={v}" for k, v in opts.items() if default.get(k) != v]
    return ",".join(diff) if diff else "default"
