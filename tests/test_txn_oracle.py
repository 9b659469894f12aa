"""The graph checker against an independent brute-force oracle (tests/txn_oracle.py) on
random small histories: "serializable / strict serializable / snapshot isolation
possible" must be the oracle's answer, both ways.

list-append: every random history (failed, unknown, overlapping transactions, stale and
corrupted reads). rw-register: every random history, where the checker must search the
version orders the reads leave open (checkers/txn/versions.py), and the family where
they can be known (each write reads its key first, ``wfr_keys`` on, unknown transactions
only read). ``benchmarks/txn_oracle_agreement.py`` runs the same on 20,000 histories per
family."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.txn_oracle import T, random_history, serializable, snapshot_isolation

from replicalab.checkers.txn import Options, Txn, check
from replicalab.checkers.txn.run import native_core
from replicalab.checkers.txn.types import NEVER

ENGINES = ["python"] + (["native"] if native_core() is not None else [])
MODELS = {"serializable": "serializable", "strict": "strong-serializable",
          "si": "snapshot-isolation"}


def to_txns(h: list[T]) -> list[Txn]:
    """The checker's view of a generated history (each transaction its own process)."""
    return [Txn(i, i, t.outcome, t.invoke, NEVER if t.complete is None else t.complete,
                list(t.mops)) for i, t in enumerate(h)]


def oracle(h: list[T], model: str) -> dict[str, bool]:
    return {"serializable": serializable(h, model),
            "strict": serializable(h, model, realtime=True),
            "si": snapshot_isolation(h, model)}


def checker(h: list[T], model: str, engine: str, wfr: bool = False) -> dict[str, bool]:
    r = check(to_txns(h), model, Options(wfr_keys=wfr), engine=engine)
    assert not r.unfinished, r.unfinished
    return {k: m in r.possible for k, m in MODELS.items()}


def agree(seed: int, model: str, engine: str, exact_family: bool = True) -> tuple[Any, ...]:
    """Return (oracle, checker) answers on the history of ``seed``."""
    rng = random.Random(seed)
    if model == "list-append":
        h = random_history(rng, model)
        return oracle(h, model), checker(h, model, engine)
    h = random_history(rng, model, rmw=exact_family, info_writes=not exact_family)
    return oracle(h, model), checker(h, model, engine, wfr=exact_family)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=300, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31))
def test_list_append_possible_models_are_the_oracles(engine: str, seed: int) -> None:
    o, c = agree(seed, "list-append", engine)
    assert c == o


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=200, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31))
def test_rw_register_possible_models_are_the_oracles_where_versions_are_known(
        engine: str, seed: int) -> None:
    o, c = agree(seed, "rw-register", engine)
    assert c == o


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=300, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31))
def test_rw_register_possible_models_are_the_oracles_on_any_history(
        engine: str, seed: int) -> None:
    o, c = agree(seed, "rw-register", engine, exact_family=False)
    assert c == o


# -- the oracle itself, on histories whose answers follow from the definitions --------------

def _h(*txns: tuple[str, int, int | None, list[tuple[str, str, Any]]]) -> list[T]:
    return [T(o, s, e, tuple(m)) for o, s, e, m in txns]


WRITE_SKEW = _h(("ok", 0, 2, [("r", "x", ()), ("append", "y", 1)]),
                ("ok", 1, 3, [("r", "y", ()), ("append", "x", 2)]))
LOST_UPDATE = _h(("ok", 0, 2, [("r", "x", ()), ("append", "x", 1)]),
                 ("ok", 1, 3, [("r", "x", ()), ("append", "x", 2)]),
                 ("ok", 4, 5, [("r", "x", (1, 2))]))
STALE = _h(("ok", 0, 1, [("append", "x", 1)]), ("ok", 2, 3, [("r", "x", ())]))
READ_SKEW = _h(("ok", 0, 3, [("r", "x", ()), ("r", "y", (2,))]),
               ("ok", 1, 2, [("append", "x", 1), ("append", "y", 2)]))
FAILED_READ = _h(("fail", 0, 1, [("append", "x", 1)]), ("ok", 2, 3, [("r", "x", (1,))]))
INFO_READ = _h(("info", 0, None, [("append", "x", 1)]), ("ok", 2, 3, [("r", "x", (1,))]))


@pytest.mark.parametrize(("h", "want"), [
    (WRITE_SKEW, {"serializable": False, "strict": False, "si": True}),
    (LOST_UPDATE, {"serializable": False, "strict": False, "si": False}),
    (STALE, {"serializable": True, "strict": False, "si": True}),
    (READ_SKEW, {"serializable": False, "strict": False, "si": False}),
    (FAILED_READ, {"serializable": False, "strict": False, "si": False}),
    (INFO_READ, {"serializable": True, "strict": True, "si": True}),
], ids=["write-skew", "lost-update", "stale-read", "read-skew", "aborted-read", "info-read"])
def test_oracle_answers_what_the_definitions_say(h: list[T], want: dict[str, bool]) -> None:
    assert oracle(h, "list-append") == want


@pytest.mark.parametrize(("h", "want", "cycle"), [
    # T0 and T1 wrote y, then T2 read T0's y: in real-time order T1's write came between
    (_h(("ok", 0, 1, [("w", "y", 1)]), ("ok", 2, 3, [("w", "y", 2)]),
        ("ok", 4, 5, [("r", "y", 1)])),
     {"serializable": True, "strict": False, "si": True}, "PL-SS-cycle-exists"),
    # y's two writes in either order: T1 and T2 each overwrote what the other read (write
    # skew), or T3 read y=3 after y=1 had replaced it (a read skew)
    (_h(("ok", 0, 3, [("w", "y", 1)]), ("ok", 2, 6, [("r", "y", 1), ("w", "x", 2)]),
        ("ok", 4, 7, [("w", "y", 3), ("r", "x", None)]),
        ("ok", 8, 9, [("r", "x", 2), ("r", "y", 3)])),
     {"serializable": False, "strict": False, "si": True}, "PL-3-cycle-exists"),
], ids=["stale-read", "write-skew-either-way"])
def test_rw_register_rules_out_what_every_version_order_rules_out(
        h: list[T], want: dict[str, bool], cycle: str) -> None:
    """Histories whose reads leave a key's version order open, where each order closes a
    cycle the model forbids: Elle's inference alone finds no cycle; the oracle and the
    version-order search (``<model>-cycle-exists``) rule the model out."""
    assert oracle(h, "rw-register") == want
    for engine in ENGINES:
        r = check(to_txns(h), "rw-register", Options(), engine=engine)
        assert {k: m in r.possible for k, m in MODELS.items()} == want, (engine, r.possible)
        assert r.valid is False and cycle in r.anomaly_types, (engine, r.anomaly_types)
