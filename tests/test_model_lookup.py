"""The model travels as its spec: the audit looks each model name up once, where the name
enters (:func:`crowdrank.validation.pipelines.audit.run_audit`), and hands the
:class:`~crowdrank.models.registry.ModelSpec` down.

Counted by replacing the registry's ``get`` in every loaded module that holds it (the
``get_model`` aliases included, and the registry itself, so that later imports and
:func:`~crowdrank.models.registry.as_spec` see the counter), then running a tiny audit.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from crowdrank.models import registry
from crowdrank.models.registry import ModelSpec, as_spec

ROOT = Path(__file__).resolve().parents[1]


def _count_lookups(monkeypatch) -> Counter:
    """Patch every reference to ``registry.get``; the counter is keyed by
    ``(name, the caller's file relative to the package)``."""
    real = registry.get
    seen: Counter = Counter()

    def counting(name):
        frame = sys._getframe(1)
        while frame.f_code.co_filename == registry.__file__:    # as_spec: its caller's
            frame = frame.f_back
        caller = Path(frame.f_code.co_filename).resolve()
        try:
            where = caller.relative_to(ROOT).as_posix()
        except ValueError:
            where = str(caller)
        seen[(name, where)] += 1
        return real(name)

    for mod in list(sys.modules.values()):
        if not getattr(mod, "__name__", "").startswith("crowdrank"):
            continue
        for attr, value in list(vars(mod).items()):
            if value is real:
                monkeypatch.setattr(mod, attr, counting)
    return seen


def test_as_spec_takes_a_spec_as_it_is_and_looks_a_name_up(monkeypatch):
    spec = registry.get("crowdbt")
    seen = _count_lookups(monkeypatch)
    assert as_spec(spec) is spec and not seen
    assert as_spec("crowdbt") is spec and sum(seen.values()) == 1


@pytest.mark.slow
def test_the_audit_looks_each_model_name_up_once(tmp_path, monkeypatch):
    """The audit's own layers (validation, the method registry's checks) resolve each
    name once; the rest of the path (the NUTS inputs, the online update's state) takes a
    spec or looks up only inside the method implementations, whose API is the name."""
    import crowdrank.models.numpyro.arrays  # noqa: F401  (its import builds every model's program)
    from crowdrank.models.simulate import simulate
    from crowdrank.validation.pipelines.audit import AuditConfig, Subject, run_audit

    sim = simulate("crowdbt", n_items=6, n_workers=3, tasks_per_worker=6, seed=1)
    # the model checks on, over the audited model only (no extra NUTS fit)
    cfg = AuditConfig(models=("crowdbt",), chains=1, tune=30, draws=30, permutations=0,
                      checks=True, loo_models=("crowdbt",), warm_start=False,
                      posterior_sbc=False)
    seen = _count_lookups(monkeypatch)
    run_audit(Subject(sim.rankings, truth=sim.lam), tmp_path, cfg, log=lambda _: None)
    ours = Counter()
    for (name, where), n in seen.items():
        if where.startswith(("validation/", "reports/")) or where == "inference/methods.py":
            ours[name] += n
    assert ours == {"crowdbt": 1}, seen
    # the models layer reads the spec its inputs carry: no lookup while a program traces
    assert not [w for _, w in seen if w.startswith("models/numpyro/")], seen
    # every lookup left is a method implementation's own (its API takes the name)
    assert sum(seen.values()) <= 6, seen
    assert all(isinstance(k[0], str) for k in seen)
    assert not any(isinstance(k[0], ModelSpec) for k in seen)
