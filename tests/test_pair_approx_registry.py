"""The pair-table models' approximations are named in the method registry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from crowdrank.inference import methods
from crowdrank.models.errors import UsageError
from crowdrank.models.registry import PAIR_MODELS, PAIR_TABLE
from crowdrank.reports.commands import audit_pairs


def test_every_pair_model_approx_is_a_registered_method():
    assert set(audit_pairs.APPROX) == set(PAIR_MODELS)
    for model, name in audit_pairs.APPROX.items():
        assert name == PAIR_TABLE[model].approx
        assert not methods.get(name).reference


def test_an_unregistered_approx_is_refused(monkeypatch):
    model = PAIR_MODELS[0]
    monkeypatch.setitem(PAIR_TABLE, model, replace(PAIR_TABLE[model], approx="no-such-method"))
    with pytest.raises(UsageError, match="unknown method 'no-such-method'"):
        audit_pairs.pair_approx(model)
