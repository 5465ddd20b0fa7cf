"""The gate's records: ``Gate.to_dict``/``from_dict`` (JSON: the audit's metrics, SBC
replicates) and ``to_attrs``/``from_attrs`` (a posterior's NetCDF attributes, where lists
become "; "-joined strings and booleans integers).

Oracles are the values put in: a round trip gives back every field; a record that lacks
a figure reads it as NaN, a missing or null divergence count as 0, missing reasons as
none, a missing verdict as not trusted; attributes other than ``gate_*`` are ignored.
"""

from __future__ import annotations

import math

from crowdrank.inference.gate import Gate


def _gate(**kw):
    base = {"trusted": False, "reasons": ["R-hat 1.05 >= 1.01", "bulk ESS 12 < 400"],
            "rhat_max": 1.05, "ess_bulk_min": 12.0, "ess_tail_min": 30.5, "divergences": 3,
            "ebfmi_min": 0.41}
    return Gate(**{**base, **kw})


def test_dict_round_trip_keeps_every_field():
    g = _gate()
    back = Gate.from_dict(g.to_dict())
    assert back == g
    assert isinstance(back.divergences, int) and isinstance(back.rhat_max, float)
    ok = _gate(trusted=True, reasons=[])
    assert Gate.from_dict(ok.to_dict()) == ok


def test_missing_or_null_figures_read_as_nan_zero_and_none():
    g = Gate.from_dict({})
    assert g.trusted is False and g.reasons == [] and g.divergences == 0
    assert all(math.isnan(getattr(g, k)) for k in ("rhat_max", "ess_bulk_min",
                                                   "ess_tail_min", "ebfmi_min"))
    g = Gate.from_dict({"trusted": True, "reasons": None, "rhat_max": None,
                        "ess_bulk_min": 0, "ess_tail_min": 0.0, "divergences": None,
                        "ebfmi_min": "0.5"})
    assert g.trusted is True and g.reasons == [] and g.divergences == 0
    assert math.isnan(g.rhat_max)
    assert g.ess_bulk_min == 0.0 and g.ess_tail_min == 0.0 and g.ebfmi_min == 0.5
    assert Gate.from_dict({"divergences": 7.0}).divergences == 7


def test_attrs_round_trip_joins_reasons_and_stores_trusted_as_int():
    g = _gate()
    attrs = g.to_attrs()
    assert attrs["gate_reasons"] == "R-hat 1.05 >= 1.01; bulk ESS 12 < 400"
    assert attrs["gate_trusted"] == 0 and type(attrs["gate_trusted"]) is int
    assert attrs["gate_divergences"] == 3 and attrs["gate_rhat_max"] == 1.05
    assert set(attrs) == {"gate_" + k for k in g.to_dict()}
    assert Gate.from_attrs({**attrs, "draws": 1000, "model": "couple"}) == g
    ok = _gate(trusted=True, reasons=[])
    a = ok.to_attrs()
    assert a["gate_trusted"] == 1 and a["gate_reasons"] == ""
    assert Gate.from_attrs(a) == ok
    # a tree written without reasons: none, and the verdict read back
    assert Gate.from_attrs({"gate_trusted": 1}).trusted is True
    assert Gate.from_attrs({"gate_trusted": 1}).reasons == []
