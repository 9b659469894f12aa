"""Anomalies in words: each step of a cycle, and the anomalies without one."""

from __future__ import annotations

from typing import Any

from replicalab.checkers.txn.types import Anomaly, Step


def _v(v: Any) -> str:
    if v is None:
        return "nil"
    if isinstance(v, list | tuple):
        return "[" + " ".join(str(x) for x in v) + "]"
    return str(v)


def step_text(s: Step, name: dict[int, str], model: str, process: dict[int, int]) -> str:
    """Return one cycle step as a sentence: why ``src`` precedes ``dst``."""
    a, b = name[s.src], name[s.dst]
    head = f"{a} < {b}: "
    if s.kind == "process":
        return head + f"process {process.get(s.src, '?')} ran {a} before {b} (process)"
    if s.kind == "realtime":
        return head + f"{a} completed before {b} began (realtime)"
    k = s.key
    if model == "list-append":
        if s.kind == "ww":
            return head + f"{b} appended {s.b} to key {k} after {a}'s append of {s.a} (ww)"
        if s.kind == "wr":
            return head + f"{b} read {a}'s append of {s.a} to key {k} (wr)"
        seen = "the empty list" if s.a is None else f"the list up to {s.a}"
        return head + f"{a} read key {k} as {seen}, without {b}'s append of {s.b} (rw)"
    if s.kind == "ww":
        return head + (f"{a} wrote key {k} = {_v(s.a)} and {b} wrote {s.b}, later in the "
                       "version order (ww)")
    if s.kind == "wr":
        return head + f"{b} read {a}'s write of {s.a} to key {k} (wr)"
    return head + (f"{a} read key {k} = {_v(s.a)}, and {b} wrote {s.b}, later in the "
                   "version order (rw)")


def anomaly_text(an: Anomaly, name: dict[int, str], model: str) -> list[str]:
    """Return the sentences that explain a non-cycle anomaly."""
    d, k = an.detail, an.key
    ts = [name[t] for t in an.txns]
    if an.type == "G1a":
        return [f"{ts[1]} read {d['value']} from key {k}, written by {ts[0]}, which failed "
                "(aborted read)"]
    if an.type == "G1b":
        return [f"{ts[1]} read {d['value']} from key {k}, an intermediate write of {ts[0]} "
                f"(its final value there is {d['final']})"]
    if an.type == "internal":
        want = d["expected"]
        if isinstance(want, list) and want[:1] == ["..."]:
            how = f"a list ending in {_v(want[1:])}"
        else:
            how = _v(want)
        return [f"{ts[0]} read key {k} = {_v(d['read'])}, but its own earlier operations "
                f"imply {how} (internal inconsistency)"]
    if an.type == "future-read":
        return [f"{ts[0]} read key {k} = {_v(d['read'])}, holding {d['element']}, which it "
                "appends only later (future read)"]
    if an.type == "garbage-read":
        return [f"{ts[0]} read key {k} = {_v(d['read'])}, holding {d['element']}, which no "
                "transaction of the history appended (a value from outside the history, "
                "or corruption)"]
    if an.type == "duplicate-elements":
        return [f"{ts[0]} read key {k} = {_v(d['read'])}, which holds "
                f"{', '.join(str(e) for e in d['duplicates'])} more than once"]
    if an.type == "incompatible-order":
        a, b = d["values"]
        return [f"{ts[0]} read key {k} = {_v(a)} and {ts[1]} read {_v(b)}: neither is a "
                "prefix of the other, so no single order of appends explains both"]
    if an.type == "dirty-update":
        return [f"key {k} holds {_v(d['values'])}: {ts[0]}, which failed, appended before "
                f"{ts[1]}, which committed, appended on top of it (dirty update)"]
    if an.type == "lost-update":
        return [f"{', '.join(ts)} all read key {k} = {_v(d['value'])} and then wrote it, and "
                "all committed: each ignored the others' writes (lost update)"]
    if an.type == "cyclic-versions":
        return [f"key {k}: versions {_v(d['scc'])} follow each other in a cycle when "
                f"{' + '.join(d['sources'])} are combined; that last source is left out"]
    if an.type == "empty-transaction-graph":
        return ["no transaction depends on another: nothing to check, which usually means "
                "the history is not what was meant"]
    if an.type == "cycle-search-timeout":
        return [f"the search for {', '.join(d['classes'])} stopped before it finished"]
    if an.type == "PL-SI-cycle-exists" and "keys" in d:
        return [f"{', '.join(ts)} appended to key(s) {', '.join(d['keys'])} and no read "
                "shows in which order: in every order a cycle snapshot isolation forbids "
                "exists (two of them wrote the same key while one missed the other's "
                "effects)"]
    if an.type.endswith("-cycle-exists"):
        model_name = an.type.removesuffix("-cycle-exists")
        return [f"a cycle {model_name} forbids exists among {d['size']} transactions "
                f"({', '.join(ts)}...), though the search stopped before showing one"]
    return [f"{an.type}: {', '.join(ts)}"]
