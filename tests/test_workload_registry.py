"""Workloads are objects found by name; a spec round-trips through config.json."""

from __future__ import annotations

import json

import pytest

from replicalab.errors import ParameterError
from replicalab.workloads import registry
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec
from replicalab.workloads.sweep import SweepConfig


def test_every_workload_is_one_object_with_a_valid_default_config():
    for name in registry.names():
        wl = registry.get(name)
        assert wl.name == name
        wl.config().check()  # the defaults make a valid probe


def test_an_unknown_workload_names_the_known_ones():
    with pytest.raises(ValueError, match="use one of staleness, monotonic-writes"):
        registry.get("nope")
    with pytest.raises(ParameterError, match=r"^workload 'nope'"):  # --workload on the CLI
        ProbeSpec(store="sim://simpledb", workload="nope").check()


@pytest.mark.parametrize("name", registry.names())
def test_spec_round_trips_through_json(name):
    cfg = (SweepConfig(clients=(1, 3), items=(7,), variants=("put",)) if name == "sweep"
           else registry.get(name).config())
    spec = ProbeSpec(store="sim://simpledb", workload=name,
                     options=ProbeOptions(duration_s=12, seed=5), config=cfg)
    again = ProbeSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec


def test_a_config_of_another_workload_is_refused():
    with pytest.raises(ValueError, match="takes a LatencyConfig, not a SweepConfig"):
        ProbeSpec(store="sim://simpledb", workload="latency", config=SweepConfig()).check()


def test_a_spec_saved_before_workloads_had_one_config_each_still_loads():
    legacy = {"store": "sim://simpledb", "workload": "sweep",
              "options": {"consistency": "eventual", "duration_s": 300.0,
                          "write_interval_s": 3.0, "read_rate": 50.0, "period_s": 300.0,
                          "seed": 1},
              "staleness": {"placement": "same-client", "readers": 1, "writer_region": None,
                            "reader_region": None, "ranges": "0-450,500-1000",
                            "successive_window_ms": [0.0, 450.0], "hold_ms": 50.0,
                            "extra": {}},
              "variant": "different", "placement": "all", "write_mode": "all",
              "read_mode": "all", "ops": 1000,
              "sweep": {"clients": [1, 2], "total": 10, "items": [1], "variants": ["put"],
                        "writers": 0},
              "cluster": None, "cluster_root": None, "faults": []}
    spec = ProbeSpec.from_json(legacy)
    assert spec.config == SweepConfig(clients=(1, 2), total=10, items=(1,),
                                      variants=("put",), writers=0)
