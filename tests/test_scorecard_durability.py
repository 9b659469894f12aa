"""Durability under kill -9 and power loss on a real Redis whose data directories sit on the
power-loss file system: with ``appendfsync always`` no acknowledged write is lost;
``appendfsync no`` keeps everything through a kill -9 (the file system still holds it) and
loses it to a power loss. Lost counts come from the history: the key is read back after the
nodes restart."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from replicalab.cluster import base, powerloss
from replicalab.cluster.kinds import DurabilityVariant, resolve
from replicalab.experiments.durability import durability
from replicalab.experiments.plan import QUICK
from servers import server_missing, shared_root

pytestmark = pytest.mark.integration

PLAN = dataclasses.replace(QUICK, durability_s=2.0)
VARIANTS = (
    DurabilityVariant("appendfsync no", (("appendonly", "yes"), ("appendfsync", "no")),
                      "", True, False),
    DurabilityVariant("appendfsync always", (("appendonly", "yes"),
                                             ("appendfsync", "always")), "", True, True),
)


def test_redis_loses_exactly_what_its_setting_documents(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    why = powerloss.unavailable_reason()
    if why:
        server_missing("the power-loss file system", why)
    try:
        base.driver("redis").check_installed()
    except ValueError as err:
        server_missing("a redis cluster", err)
    monkeypatch.setattr("replicalab.experiments.durability.variants", lambda kind, plan: VARIANTS)
    root = shared_root("replicalab-durability-")
    try:
        try:
            res = durability(resolve("redis"), "dc3", PLAN, 1, tmp_path / "runs", tmp_path,
                             lambda what: None, root)
        except ValueError as err:  # a server or Toxiproxy that could not start
            server_missing("a redis cluster on the power-loss file system", err)
        assert not list((root / "clusters").glob("*/cluster.json"))  # all brought down
    finally:
        shutil.rmtree(root, ignore_errors=True)
    got = {v["label"]: v for v in res["variants"]}
    for v in got.values():
        for key in ("kill", "power_loss"):
            assert v[key]["checked"] and v[key]["acknowledged"] > 50, v
    no, always = got["appendfsync no"], got["appendfsync always"]
    assert no["kill"]["lost"] == 0  # the file system, like a kernel, kept the AOF
    assert no["power_loss"]["lost"] > 0  # never synced: gone with the power
    assert always["kill"]["lost"] == 0 and always["power_loss"]["lost"] == 0
