"""The SVI fits' settings are stated once: the loop's schedule and stopping rule in
:class:`crowdrank.inference.approx.vi.SviOptions`, which the ADVI, structured and flow
options extend, and the method registry's options (what ``crowdrank fit --method M``
offers) default to the library's values."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest

from crowdrank.inference import methods
from crowdrank.inference.approx.flow import FlowOptions
from crowdrank.inference.approx.structured import StructuredOptions
from crowdrank.inference.approx.vi import SviOptions, VIOptions

LOOP = {f.name for f in fields(SviOptions)}
#: a class's own restatement of a loop field, and why: flow-vi starts with a smaller step
OWN = {FlowOptions: {"learning_rate"}}


@pytest.mark.parametrize("cls", [VIOptions, StructuredOptions, FlowOptions])
def test_the_svi_loop_fields_are_declared_once(cls):
    assert issubclass(cls, SviOptions)
    declared = set(vars(cls).get("__annotations__", {}))
    assert declared & LOOP == OWN.get(cls, set())


@pytest.mark.parametrize("name, cls", [
    ("advi", VIOptions), ("fullrank-advi", VIOptions), ("lowrank-advi", VIOptions),
    ("structured-vi", StructuredOptions), ("coupled-vi", StructuredOptions),
    ("flow-vi", FlowOptions)])
def test_the_methods_options_default_to_the_librarys(name, cls):
    """Every option the method's entry shares with its library class has the library's
    default (a default changed in one place only fails here)."""
    library = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    shared = [f for f in fields(methods.get(name).options_class) if f.name in library]
    assert {f.name for f in shared} >= LOOP - {"decay", "seed", "progress"}
    for f in shared:
        assert f.default == library[f.name], (name, f.name)
