"""The models beyond the registers — kv with append, set, fifo-queue, counter, mutex — and
how a model plugs in: known answers (each through EDN and ``replicalab check`` too), 1,000
Hypothesis examples per model against a brute force over every order (verdicts, and
counterexamples 1-minimal by their definition), and the native machines against the
pure-Python search (verdicts, orders, stuck ops, counterexamples, explanations)."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from linbrute import brute_force, counterexample_bad
from replicalab.checkers.linearizability import checker as linearizability
from replicalab.checkers.linearizability.checker import check
from replicalab.checkers.linearizability.ops import INFO, LinOp, Verdict
from replicalab.checkers.linearizability.registry import MODELS, get_model
from replicalab.checkers.linearizability.search import search_part
from replicalab.cli import check as check_cli

SEEDS = st.integers(0, 2**32 - 1)
NEW = ("kv", "set", "fifo-queue", "counter", "mutex")


def op(i, process, f, value, inv, comp=None, outcome="ok", key=None):
    """An op, times in ms (``comp`` None: info)."""
    if comp is None and outcome == "ok":
        outcome = INFO
    return LinOp(i, process, f, key, value, outcome, inv * 10**6,
                 (comp if comp is not None else -1) * 10**6)


def v(ops, model):
    return check(ops, model).verdict


# ------------------------------------------------------------------------- known answers


def test_kv_append_concatenates_and_a_key_never_written_reads_nil_or_empty():
    seq = [op(0, 0, "append", "x 0 0 y", 0, 1, key="k"), op(1, 1, "append", "x 1 0 y", 2, 3,
                                                            key="k"),
           op(2, 2, "read", "x 0 0 yx 1 0 y", 4, 5, key="k"),
           op(3, 3, "read", "", 0, 1, key="other"), op(4, 3, "read", None, 2, 3, key="other")]
    assert v(seq, "kv") == Verdict.LINEARIZABLE
    swapped = [*seq[:2], op(2, 2, "read", "x 1 0 yx 0 0 y", 4, 5, key="k")]
    r = check(swapped, "kv")
    assert r.verdict == Verdict.NOT_LINEARIZABLE
    # the appends ran one after the other: whichever happened, nothing builds that string
    assert r.parts[0].counterexample == [2]
    # concurrent appends may land in either order; a put replaces; an info append may
    # or may not have happened
    both = [op(0, 0, "append", "a", 0, 10), op(1, 1, "append", "b", 0, 10),
            op(2, 2, "read", "ba", 11, 12), op(3, 0, "write", "z", 13, 14),
            op(4, 1, "append", "q", 15, None), op(5, 2, "read", "z", 16, 17),
            op(6, 2, "read", "zq", 18, 19)]
    assert v(both, "kv") == Verdict.LINEARIZABLE
    assert v([*both, op(7, 3, "read", "z", 20, 21)], "kv") == Verdict.NOT_LINEARIZABLE
    with pytest.raises(ValueError, match="an append needs a string"):
        check([op(0, 0, "append", 3, 0, 1)], "kv")


def test_set_reads_the_whole_set():
    h = [op(0, 0, "add", 1, 0, 1), op(1, 1, "add", 2, 0, 5), op(2, 2, "read", frozenset({1}),
                                                               2, 3),
         op(3, 2, "read", (1, 2), 6, 7)]
    assert v(h, "set") == Verdict.LINEARIZABLE
    late = [*h, op(4, 3, "read", frozenset({1}), 8, 9)]  # 2 was added: it cannot go away
    r = check(late, "set")
    assert r.verdict == Verdict.NOT_LINEARIZABLE
    assert set(r.parts[0].counterexample) == {3, 4}  # a set read with 2, then without
    assert "read #{1}" in r.parts[0].explanation
    assert v([op(0, 0, "read", frozenset({7}), 0, 1)], "set") == Verdict.NOT_LINEARIZABLE


def test_fifo_queue_dequeues_the_oldest_and_nil_when_empty():
    h = [op(0, 0, "enqueue", 1, 0, 1), op(1, 0, "enqueue", 2, 2, 3),
         op(2, 1, "dequeue", 1, 4, 5), op(3, 1, "dequeue", 2, 6, 7), op(4, 1, "dequeue", None,
                                                                        8, 9)]
    assert v(h, "fifo-queue") == Verdict.LINEARIZABLE
    out_of_order = [h[0], h[1], op(2, 1, "dequeue", 2, 4, 5)]
    r = check(out_of_order, "fifo-queue")
    # 1 was enqueued before the dequeue began: 2 cannot be the oldest, enqueued or not
    assert r.verdict == Verdict.NOT_LINEARIZABLE and r.parts[0].counterexample == [0, 2]
    empty_too_soon = [h[0], op(1, 1, "dequeue", None, 2, 3)]
    assert v(empty_too_soon, "fifo-queue") == Verdict.NOT_LINEARIZABLE
    twice = [h[0], op(1, 1, "dequeue", 1, 2, 3), op(2, 2, "dequeue", 1, 4, 5)]
    assert v(twice, "fifo-queue") == Verdict.NOT_LINEARIZABLE
    # a dequeue whose outcome is unknown took the oldest value, whatever it was, or nothing
    maybe = [h[0], h[1], op(2, 1, "dequeue", None, 4, None), op(3, 2, "dequeue", 2, 6, 7)]
    assert v(maybe, "fifo-queue") == Verdict.LINEARIZABLE
    with pytest.raises(ValueError, match="enqueue of nil"):
        check([op(0, 0, "enqueue", None, 0, 1)], "fifo-queue")


def test_counter_adds_and_reads():
    h = [op(0, 0, "add", 1, 0, 10), op(1, 1, "add", 2, 0, 10), op(2, 2, "read", 2, 3, 4),
         op(3, 2, "read", 3, 11, 12), op(4, 3, "add", -5, 13, None), op(5, 3, "read", -2, 20,
                                                                       21)]
    assert v(h, "counter") == Verdict.LINEARIZABLE
    assert v([*h[:4], op(4, 2, "read", 1, 13, 14)], "counter") == Verdict.NOT_LINEARIZABLE
    with pytest.raises(ValueError, match="needs an integer"):
        check([op(0, 0, "add", "1", 0, 1)], "counter")


def test_mutex_is_held_by_one_at_a_time():
    ok = [op(0, 0, "acquire", None, 0, 1), op(1, 1, "acquire", None, 0, 5),
          op(2, 0, "release", None, 2, 3)]
    assert v(ok, "mutex") == Verdict.LINEARIZABLE
    both = [op(0, 0, "acquire", None, 0, 1), op(1, 1, "acquire", None, 2, 3)]
    r = check(both, "mutex")
    assert r.verdict == Verdict.NOT_LINEARIZABLE and r.parts[0].counterexample == [0, 1]
    assert v([op(0, 0, "release", None, 0, 1)], "mutex") == Verdict.NOT_LINEARIZABLE


def _app() -> typer.Typer:
    app = typer.Typer()
    app.callback()(lambda: None)
    check_cli.register(app)
    return app


def _edn(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("model", "lines", "valid"), [
    ("kv", ['{:process 0, :type :invoke, :f :append, :key "0", :value "x 0 0 y"}',
            '{:process 0, :type :ok, :f :append, :key "0", :value "x 0 0 y"}',
            '{:process 1, :type :invoke, :f :get, :key "0", :value nil}',
            '{:process 1, :type :ok, :f :get, :key "0", :value "x 0 0 y"}',
            '{:process 1, :type :invoke, :f :put, :key "1", :value "z"}',
            '{:process 1, :type :ok, :f :put, :key "1", :value "z"}',
            '{:process 2, :type :invoke, :f :get, :key "2", :value nil}',
            '{:process 2, :type :ok, :f :get, :key "2", :value ""}'], True),
    ("set", ["{:process 0, :type :invoke, :f :add, :value 1}",
             "{:process 0, :type :ok, :f :add, :value 1}",
             "{:process 1, :type :invoke, :f :read, :value nil}",
             "{:process 1, :type :ok, :f :read, :value #{}}"], False),
    ("fifo-queue", ["{:process 0, :type :invoke, :f :enqueue, :value 1}",
                    "{:process 0, :type :ok, :f :enqueue, :value 1}",
                    "{:process 1, :type :invoke, :f :dequeue, :value nil}",
                    "{:process 1, :type :ok, :f :dequeue, :value 1}",
                    "{:process 1, :type :invoke, :f :dequeue, :value nil}",
                    "{:process 1, :type :info, :f :dequeue, :value nil}"], True),
    ("counter", ["{:process 0, :type :invoke, :f :add, :value 5}",
                 "{:process 0, :type :ok, :f :add, :value 5}",
                 "{:process 1, :type :invoke, :f :read, :value nil}",
                 "{:process 1, :type :ok, :f :read, :value 4}"], False),
    ("mutex", ["{:process 0, :type :invoke, :f :acquire}", "{:process 0, :type :ok, :f :acquire}",
               "{:process 0, :type :invoke, :f :release}", "{:process 0, :type :ok, :f :release}",
               "{:process 1, :type :invoke, :f :acquire}", "{:process 1, :type :ok, :f :acquire}"],
     True),
])
def test_each_model_checks_edn_histories_from_the_command_line(tmp_path, model, lines, valid):
    path = tmp_path / "h.edn"
    path.write_text(_edn(lines))
    r = CliRunner().invoke(_app(), ["check", str(path), "--model", model, "--json"])
    assert r.exit_code == (0 if valid else 1), r.output
    doc = json.loads(r.stdout)["results"][0]
    assert doc["valid"] is valid and doc["model"] == model and doc["timed"] is False
    if not valid:
        # no :time: the explanation names lines
        text = doc["counterexample"][0]["explanation"]
        assert re.search(r"\blines? \d", text) and not re.search(r"\d ms\b", text), text


def test_check_help_lists_every_registered_model():
    r = CliRunner().invoke(_app(), ["check", "--help"], env={"COLUMNS": "200"})
    text = " ".join(r.output.split())
    for name in MODELS:
        assert name in text


# ------------------------------------------------------------- Hypothesis vs brute force


def _value(model: str, f: str, rnd: random.Random, i: int) -> Any:
    pool = [1, 2, 3]
    if model == "kv":
        return (rnd.choice(["", "a", "ab", "b", "ba", None]) if f == "read" else
                rnd.choice(["a", "b"]) if f == "append" else
                (rnd.choice([None, "a", "b"]), rnd.choice(["a", "b"])) if f == "cas" else
                rnd.choice(["a", "b"]))
    if model == "set":
        return (frozenset(rnd.sample(pool, rnd.randint(0, 2))) if f == "read"
                else rnd.choice(pool))
    if model == "fifo-queue":  # values enqueued once, as a queue run's tags are
        return rnd.choice([None, *range(1, i + 1)]) if f == "dequeue" else i + 1
    if model == "counter":
        return rnd.choice([0, 1, 2, 3, -1]) if f == "read" else rnd.choice([1, 2, -1])
    return None


def random_history(model: str, n: int, seed: int) -> list[LinOp]:
    """Ops of ``model`` with random kinds, values from small pools, overlapping intervals
    and ok / info / fail outcomes, on one key (the part a check works on)."""
    rnd = random.Random(seed)
    ops = []
    m = get_model(model)
    for i in range(n):
        f = rnd.choice(m.ops)
        inv = rnd.randint(0, 20)
        outcome = rnd.choice(["ok", "ok", "ok", "info", "fail"])
        ops.append(LinOp(i, i, f, "k", _value(model, f, rnd, i), outcome, inv,
                         inv + rnd.randint(0, 10)))
    return ops


@pytest.mark.parametrize("model", NEW)
@settings(max_examples=1000, deadline=None)
@given(st.integers(1, 7), SEEDS)
def test_small_histories_agree_with_brute_force_and_counterexamples_are_minimal(
        model, n, seed):
    ops = random_history(model, n, seed)
    m = get_model(model)
    expected = brute_force(ops, m)
    r = check(ops, m)
    assert r.verdict.json() is expected
    if expected:
        return
    part = r.parts[0]
    assert part.minimal
    ce = [o for o in ops if o.index in part.counterexample]
    assert counterexample_bad(ce, ops, m)
    for drop in ce:
        assert not counterexample_bad([o for o in ce if o is not drop], ops, m)


# ------------------------------------------------------ native machines vs pure Python


def _summary(r):
    return (r.model, r.verdict, r.ops, [(p.key, p.verdict, p.ops, p.linearization,
                                         p.counterexample, p.explanation, p.minimal)
                                        for p in r.parts])


def _reference(ops, model):
    saved = linearizability.search_core
    linearizability.search_core = search_part
    try:
        assert not linearizability.native_available(model, ops)
        return check(ops, model)
    finally:
        linearizability.search_core = saved


def longer_history(model: str, n: int, seed: int, keys: int) -> list[LinOp]:
    ops = random_history(model, n, seed)
    rnd = random.Random(seed + 1)
    return [LinOp(o.index, o.process, o.f, rnd.randrange(keys) if keys > 1 else "k",
                  o.value, o.outcome, o.invoke_ns * 3, o.complete_ns * 3) for o in ops]


@pytest.mark.parametrize("model", NEW)
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 24), SEEDS, st.integers(1, 3))
def test_the_native_machines_give_the_pure_python_results(model, n, seed, keys):
    pytest.importorskip("replicalab_native")
    ops = longer_history(model, n, seed, keys)
    if model == "kv" and not any(o.f == "append" for o in ops):
        ops.append(LinOp(999, 9, "append", "k", "a", "info", 0, -1))  # the append machine
    assert linearizability.native_available(model, ops)
    assert _summary(check(ops, model)) == _summary(_reference(ops, model))


# ------------------------------------------------------------- a queue run's history


def _queue_run(tmp_path, url: str, *extra: str):
    from replicalab.cli.main import app

    r = CliRunner().invoke(app, ["queue", "run", "--queue", url, "--messages", "120",
                                 "--consumers", "3", "--out", str(tmp_path), "--json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["run_dir"]


def test_a_fifo_sqs_run_is_a_fifo_queue_per_group_and_a_standard_one_is_not(tmp_path):
    """``--model fifo-queue`` on queue runs: sends are enqueues, deliveries dequeues, keyed
    by message group. A FIFO ``sim://sqs`` whose leases outlast the processing hands out
    every group's messages once and in order: linearizable. A standard queue redelivers
    (and reorders): not, with the two deliveries that show it."""
    fifo = _queue_run(tmp_path / "f", "sim://sqs?fifo=1&servers=1&copies=1",
                      "--visibility", "5m")
    r = CliRunner().invoke(_app(), ["check", fifo, "--model", "fifo-queue", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)["results"][0]
    assert doc["valid"] is True and doc["keys"] == 16 and doc["ops"] == 240
    std = _queue_run(tmp_path / "s", "sim://sqs", "--visibility", "1s", "--process", "2s")
    r = CliRunner().invoke(_app(), ["check", std, "--model", "fifo-queue"])
    assert r.exit_code == 1, r.output
    assert "is not a FIFO queue" in r.output
    assert "a FIFO queue hands" in r.output
    r = CliRunner().invoke(_app(), ["check", std])  # the default model: one line, exit 2
    assert r.exit_code == 2 and "--model fifo-queue" in r.stderr
