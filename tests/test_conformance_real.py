"""The conformance suite (replicalab.testing) passes on every shipped adapter of a real
store, each on the shared test cluster of its kind (dc3: replicas across regions, so an
eventual read really can be stale, and a client placed in a region pays the WAN to the
others), the timeout check through a relay it freezes."""

from __future__ import annotations

import pytest

from replicalab.testing import run_conformance

pytestmark = pytest.mark.integration

EVERY_CHECK = {"describes-itself", "absent-reads-none", "consistent-read", "eventual-read",
               "multi-read", "conditional-write", "atomic-multi-write", "delete",
               "timeout-is-unknown", "txn-own-writes", "txn-atomic", "client-region"}


def conforms(url: str, skipped: frozenset[str] = frozenset()) -> None:
    report = run_conformance(url)
    assert report.ok, report.text()
    assert {r.name for r in report.results if r.status == "passed"} == EVERY_CHECK - skipped, \
        report.text()


def test_redis_adapter_conforms(redis_dc3):
    conforms(redis_dc3[0].url)


def test_postgres_adapter_conforms(postgres_dc3):
    # READ COMMITTED (the default) does not promise a reader all or nothing of a transaction
    conforms(postgres_dc3[0].url, frozenset({"txn-atomic"}))


@pytest.mark.parametrize("level", ["serializable", "repeatable-read"])
def test_postgres_transactions_are_atomic_to_readers(postgres_dc3, level: str):
    report = run_conformance(f"{postgres_dc3[0].url}&isolation={level}",
                             only=["txn-own-writes", "txn-atomic"])
    assert [r.status for r in report.results] == ["passed", "passed"], report.text()


def test_etcd_adapter_conforms(etcd_dc3):
    conforms(etcd_dc3[0].url)


def test_zookeeper_adapter_conforms(zookeeper_dc3):
    conforms(zookeeper_dc3[0].url)
