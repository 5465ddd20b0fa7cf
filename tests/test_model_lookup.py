"""The model travels as its spec: a model's name is looked up in the registry once, where
the name enters (:func:`crowdrank.validation.pipelines.audit.run_audit`, a public function
handed a name), and the :class:`~crowdrank.models.registry.ModelSpec` goes down from there
— through the method registry (:meth:`Method.run` hands a fit function the spec), the
online update and its state, the posterior conversions, the NUTS inputs and the Dask tasks
(a spec pickles whole).

Counted by replacing the registry's ``get`` in every loaded module that holds it (the
``get_model`` aliases included, and the registry itself, so that later imports and
:func:`~crowdrank.models.registry.as_spec` see the counter), then running a tiny audit.
"""

from __future__ import annotations

import pickle
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from crowdrank.models import registry
from crowdrank.models.registry import ModelSpec, as_spec

ROOT = Path(__file__).resolve().parents[1]

#: The lookups of one audit of one model: run_audit's, where the name enters. Nothing
#: under it looks the name up again — not the method registry, not the online update or
#: its state, not the posterior conversions, not the NUTS inputs or the traced programs,
#: not the model checks' LOO, not posterior SBC's replicates (θ′, y′ simulated, the refit,
#: the moments, the companion checks), and not a Dask task, which is handed the spec.
AUDIT_LOOKUPS = {("crowdbt", "validation/pipelines/audit.py"): 1}


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


@pytest.mark.parametrize("name", registry.MODELS + registry.PAIR_MODELS)
def test_a_spec_pickles_whole_so_a_task_looks_nothing_up(name, monkeypatch):
    """What a Dask task is handed: every registered spec survives a pickle round trip equal
    to the registry's, its worker family the same object (a family is compared by
    identity), and the task's ``as_spec`` of it looks nothing up."""
    spec = (registry.REGISTRY | registry.PAIR_TABLE)[name]
    seen = _count_lookups(monkeypatch)
    copy = pickle.loads(pickle.dumps(spec))
    assert copy == spec and copy.worker_prior is spec.worker_prior
    assert as_spec(copy) is copy and not seen


def test_the_online_update_and_its_conversions_look_a_spec_up_nowhere(monkeypatch, tmp_path):
    """``fit_online`` handed a spec, its resumed run, the state's draws and its
    ``Posterior`` look nothing up; handed a name it looks it up once, where it enters; a
    state read from a file looks its model's name up once, when read."""
    from crowdrank.inference.online import OnlinePosterior, fit_online
    from crowdrank.inference.posterior import from_online
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    data = simulate("crowdbt", n_items=5, n_workers=3, tasks_per_worker=4, seed=2).rankings
    pri = Priors.geometric(data.workers, K=2)
    spec = registry.get("crowdbt")
    seen = _count_lookups(monkeypatch)
    post = fit_online(data, spec, pri, progress=False)
    again = fit_online(data, spec, pri, state=post, progress=False)
    conv = from_online(again)
    post.to_datatree(draws=5)
    conv.datatree(draws=5)
    assert not seen, seen
    assert conv.spec is spec and conv.model == "crowdbt"
    fit_online(data, "crowdbt", pri, progress=False)
    assert seen == {("crowdbt", "inference/online/api.py"): 1}, seen
    read = OnlinePosterior.from_json(post.to_json(tmp_path / "state.json"))
    from_online(fit_online(data, read.spec, pri, state=read, progress=False))
    assert seen == {("crowdbt", "inference/online/api.py"): 1,
                    ("crowdbt", "inference/online/state.py"): 1}, seen


class _Done:
    """A finished task (what ``as_completed`` yields)."""

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value

    def release(self):
        pass


class _PickledClient:
    """A Dask client that runs each task here, on a pickled copy of its arguments (what
    crosses to a worker process), so that the lookups a task makes are counted."""

    scheduler = SimpleNamespace(address="in-process")

    def submit(self, fn, *args, pure=True, key=None):
        return _Done(fn(*pickle.loads(pickle.dumps(args))))


@pytest.mark.slow
@pytest.mark.parametrize("route", ["in-process", "dask"])
def test_the_audit_looks_each_model_name_up_once(route, tmp_path, monkeypatch):
    """A tiny audit with the model checks, two permutations of the online update (a fit
    of each through the method registry) and posterior SBC of the update (three
    replicates), in this process or as Dask tasks handed pickled arguments: the registry
    is consulted once, by ``run_audit`` (:data:`AUDIT_LOOKUPS`)."""
    import crowdrank.models.numpyro.arrays  # noqa: F401  (its import builds every model's program)
    from crowdrank.models.simulate import simulate
    from crowdrank.validation.pipelines.audit import AuditConfig, Subject, run_audit

    sim = simulate("crowdbt", n_items=6, n_workers=3, tasks_per_worker=6, seed=1)
    # the model checks on, over the audited model only (no extra NUTS fit)
    cfg = AuditConfig(models=("crowdbt",), chains=1, tune=30, draws=30, permutations=2,
                      checks=True, loo_models=("crowdbt",), warm_start=False,
                      posterior_sbc=3)
    scheduler = None
    if route == "dask":
        import distributed

        from crowdrank.validation.runtime import grid
        monkeypatch.setattr(grid, "dask_client", lambda s, p: (s, False))
        monkeypatch.setattr(distributed, "as_completed", iter)
        scheduler = _PickledClient()
    seen = _count_lookups(monkeypatch)
    run_audit(Subject(sim.rankings, truth=sim.lam), tmp_path, cfg, log=lambda _: None,
              scheduler=scheduler)
    assert seen == AUDIT_LOOKUPS, seen
    assert not any(isinstance(k[0], ModelSpec) for k in seen)
