"""The method registry (crowdrank.inference.methods): its contract, and a toy method
registered by a fixture and run through ``crowdrank fit``, the audit and ``compare``
without touching any other file (as tests/test_registry.py does for a toy model)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

import pytest

from crowdrank.inference import methods
from crowdrank.models.errors import UsageError


# ====================================================================== the contract
@pytest.mark.parametrize("name", list(methods.REGISTRY))
def test_every_entry_has_defaults_help_and_a_loadable_fit(name):
    m = methods.get(name)
    methods.check_options_class(m.options_class)     # raises on a field without either
    opts = m.options()                               # every default fills the dataclass
    assert {f.name for f in fields(opts)} == {f.name for f in fields(m.options_class)}
    assert callable(m.fn("fit")) and m.title
    assert m.model_names(), f"{name} fits no registered model"
    if m.backends:
        assert m.options().backend in m.backends


def test_check_options_class_refuses_a_field_without_help_or_default():
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class NoHelp:
        x: int = 1

    @dataclass(frozen=True)
    class NoDefault:
        x: int = field(metadata={"help": "x"})

    for cls in (NoHelp, NoDefault):
        with pytest.raises(UsageError):
            methods.check_options_class(cls)


def test_get_and_options_errors_name_the_choices():
    with pytest.raises(UsageError, match="choose one of nuts, online"):
        methods.get("nope")
    with pytest.raises(UsageError, match="has no option 'tayler'"):
        methods.get("online").options(tayler="paper")
    with pytest.raises(UsageError, match="fits models crowdbt, not 'bt'"):
        methods.get("em").check_model("bt")


def test_which_methods_fit_which_models():
    assert set(methods.names(model="bt")) >= {"nuts", "online", "ep", "map", "ml",
                                              "laplace", "bootstrap", "trueskill"}
    assert "online" not in methods.names(model="couple-normalized")
    assert methods.names(model="crowdbt", reference=False) == ("online", "ep", "map", "em")
    assert methods.names(reference=True) == ("nuts",)


def test_importing_the_registry_is_cheap():
    """``crowdrank --help`` imports the registry: no NumPy, JAX, PyTensor or pandas."""
    code = ("import sys; import crowdrank.inference.methods; "
            "print(sorted(m for m in ('numpy', 'jax', 'pytensor', 'pandas') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
