"""Anomalies in words: each step of a cycle, and the anomalies without one."""

from __future__ import annotations

from typing import Any

from replicalab.checkers.txn.types import Anomaly, Step


def _v(v: Any) -> str:
    return "nil" if v is None else str(v)


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
        seen = "an empty list" if s.a is None else f"up to {s.a}"
        return head + f"{a} read key {k} ({seen}) without {b}'s append of {s.b} (rw)"
    if s.kind == "ww":
        return head + f"{b} wrote {s.b} to key {k} after {a}'s write of {s.a} (ww)"
    if s.kind == "wr":
        return head + f"{b} read {a}'s write of {s.a} to key {k} (wr)"
    return head + f"{a} read key {k} = {_v(s.a)}, before {b}'s write of {s.b} (rw)"


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
        want = d.get("expected", d.get("expected_suffix"))
        how = "ending in" if "expected_suffix" in d else "="
        return [f"{ts[0]} read key {k} = {_v(d['read'])}, but its own earlier operations "
                f"imply {how} {_v(want)} (internal inconsistency)"]
    if an.type == "duplicate-elements":
        return [f"{ts[0]} read key {k} = {d['read']}, which holds {d['element']} twice"]
    if an.type == "incompatible-order":
        r = d["reads"]
        return [f"{ts[0]} read key {k} = {r[0]} and {ts[1]} read {r[1]}: neither is a prefix "
                "of the other, so no single order of appends explains both"]
    if an.type == "lost-update":
        if "read_length" in d:  # appends: none is lost, but each ignored the others
            return [f"{', '.join(ts)} all read key {k} (the same {d['read_length']} "
                    "element(s)) and then appended to it, and all committed: each appended "
                    "without seeing the others' appends, which no serial order allows"]
        return [f"{', '.join(ts)} all read key {k} (the same value {_v(d['value'])}) and "
                "then wrote it: all committed, so all but one write was lost"]
    return [f"{an.type}: {', '.join(ts)}"]
