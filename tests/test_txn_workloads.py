"""The list-append and rw-register workloads on the simulated store (virtual time): the
transactions they generate, how they are recorded, and what the checker finds when the
store runs the micro-operations one by one (no isolation)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from replicalab.cluster.kinds import isolation_promise
from replicalab.history import load_history
from replicalab.history.txn import decode_txn
from replicalab.stores.prefix import PrefixedStore
from replicalab.stores.registry import open_store
from replicalab.stores.txnops import appended_text, decode_stored, play
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.txn import (
    KeySpace,
    TxnConfig,
    config_from_flags,
    make_txn,
    slot_weights,
)


def _txns(run_dir: Path) -> list[tuple[str, int, list]]:
    h, _ = load_history(run_dir)
    out = []
    for i in range(len(h)):
        op = h.op(i)
        assert op.f == "txn"
        out.append((op.type, op.process, decode_txn(op.keys, op.values)))
    return out


def test_generated_transactions_have_the_asked_shape_and_unique_values_per_key():
    cfg = TxnConfig(keys=4, min_length=2, max_length=5, read_fraction=0.3,
                    max_writes_per_key=10)
    space = KeySpace(cfg.keys, cfg.max_writes_per_key)
    rng = np.random.default_rng(7)
    w = slot_weights(cfg)
    seen: Counter[tuple[str, int]] = Counter()
    lengths, reads, writes = Counter(), 0, 0
    for _ in range(2000):
        txn = make_txn(rng, cfg, space, w, "append")
        lengths[len(txn)] += 1
        for f, k, v in txn:
            if f == "r":
                reads += 1
                assert v is None
            else:
                writes += 1
                seen[(k, v)] += 1
    assert set(lengths) == {2, 3, 4, 5}
    assert max(seen.values()) == 1  # every (key, value) appended once
    assert 0.25 < reads / (reads + writes) < 0.35
    per_key = Counter(k for k, _ in seen)
    assert max(per_key.values()) <= cfg.max_writes_per_key  # keys retire
    assert len(per_key) > cfg.keys  # fresh keys took their places
    for k, n in per_key.items():  # values of a key are 1..n
        assert sorted(v for kk, v in seen if kk == k) == list(range(1, n + 1))


def test_exponential_key_distribution_makes_the_first_keys_hot():
    cfg = TxnConfig(keys=8, key_dist="exponential", read_fraction=1.0)
    space = KeySpace(cfg.keys, cfg.max_writes_per_key)
    rng = np.random.default_rng(1)
    hits = Counter(k for _ in range(3000)
                   for _, k, _ in make_txn(rng, cfg, space, slot_weights(cfg), "append"))
    assert hits["0"] > 1.7 * hits["1"] > 1.7 * 1.7 * hits["2"]
    assert hits["0"] / sum(hits.values()) == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize("given, message", [
    # the Python names (the command line says --keys, --min-length ...: test_cli)
    ({"keys": 0}, "^keys"), ({"min_length": 3, "max_length": 2}, "^min_length 3 / max_length 2"),
    ({"read_fraction": 1.5}, "^read_fraction"), ({"key_dist": "zipf"}, "^key_dist"),
    ({"clients": 0}, "^clients"), ({"spacing_s": -1.0}, "^spacing"),
])
def test_bad_options_name_the_flag(given: dict, message: str):
    with pytest.raises(ValueError, match=message):
        TxnConfig(**given).check()


def test_length_sets_both_bounds_and_refuses_to_mix_with_them():
    assert config_from_flags({"length": 3}) == TxnConfig(min_length=3, max_length=3)
    with pytest.raises(ValueError, match=r"^length sets both min_length and max_length"):
        config_from_flags({"length": 3, "max_length": 4})


def test_stored_lists_and_registers_round_trip_and_play_sees_own_writes():
    assert decode_stored(appended_text(appended_text(None, 1), 2)) == [1, 2]
    assert decode_stored("7") == 7 and decode_stored(None) is None
    with pytest.raises(ValueError, match="register"):
        appended_text("7", 1)
    p = play([("r", "a", None), ("append", "a", 3), ("r", "a", None), ("w", "b", 4),
              ("r", "b", None)], {"a": "[1,2]", "b": None})
    assert p.ops == [("r", "a", [1, 2]), ("append", "a", 3), ("r", "a", [1, 2, 3]),
                     ("w", "b", 4), ("r", "b", 4)]
    assert p.writes == {"a": "[1,2,3]", "b": "4"}


def test_a_simulated_run_records_one_txn_row_per_transaction_reproducibly(tmp_path: Path):
    def run(seed: int, name: str):
        spec = ProbeSpec(store="sim://primary", workload="list-append",
                         options=ProbeOptions(duration_s=600, seed=seed),
                         config=TxnConfig(keys=4, txns=400, clients=4))
        return run_probe(spec, tmp_path / name)

    a, b = run(3, "a"), run(3, "b")
    ta, tb = _txns(a.run_dir), _txns(b.run_dir)
    assert len(ta) == 400 and ta == tb  # same seed, same history
    assert a.results["transactions"] == {**a.results["transactions"], "ok": 400}
    for typ, _, ops in ta:  # every read is filled in at ok
        assert typ == "ok" and all(v is not None or f == "r" for f, _, v in ops)


def test_micro_operations_one_by_one_show_anomalies_the_checker_finds(tmp_path: Path):
    """sim:// runs the micro-operations as separate calls: with a few hot keys and
    concurrent clients, lost appends and read skew follow, and the checker says so."""
    spec = ProbeSpec(store="sim://primary", workload="list-append",
                     options=ProbeOptions(duration_s=600, seed=1),
                     config=TxnConfig(keys=3, txns=2000, clients=8, min_length=2,
                                      max_length=4))
    res = run_probe(spec, tmp_path).results
    assert res["txn"]["valid"] is False
    assert res["txn"]["anomaly_types"], res["txn"]
    assert res["transactions"]["anomalous"]["any"] > 0


def test_rw_register_runs_and_is_checked(tmp_path: Path):
    spec = ProbeSpec(store="sim://primary", workload="rw-register",
                     options=ProbeOptions(duration_s=600, seed=2),
                     config=TxnConfig(keys=3, txns=1000, clients=6, min_length=2,
                                      max_length=4))
    run = run_probe(spec, tmp_path)
    fs = {f for _, _, ops in _txns(run.run_dir) for f, _, _ in ops}
    assert fs == {"r", "w"}
    assert run.results["txn"]["valid"] is False


def test_the_prefixed_client_remembers_every_transaction_key_for_clean_up():
    store = PrefixedStore(open_store("sim://primary", 1), "p/")

    async def main():
        c = await store.connect()
        got = await c.transact([("append", "x/k1/v", 1), ("r", "x/k2/v", None)])
        return got

    got = store.runtime.run(main())
    assert got == [("append", "x/k1/v", 1), ("r", "x/k2/v", None)]
    assert store.written == {"p/x/k1/v", "p/x/k2/v"}


@pytest.mark.parametrize("url, model", [
    ("postgresql://h:1/db?isolation=serializable", "serializable"),
    ("postgresql://h:1/db?isolation=repeatable-read", "snapshot-isolation"),
    ("postgresql://h:1/db", "read-committed"),
    ("postgresql://h:1/db?isolation=serializable&txn_reads=standby", "none"),
    ("etcd://h:1", "strict-serializable"), ("zk://h:1", "strict-serializable"),
    ("redis://h:1", "serializable"), ("cassandra://h:1", "none"),
    ("cassandra://h:1?txn=lwt", "strict-serializable"), ("sim://primary", "none"),
])
def test_isolation_promise_names_the_model_and_its_source(url: str, model: str):
    got, source = isolation_promise(url)
    assert got == model and source.startswith(("https://", "docs/"))
