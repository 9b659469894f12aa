"""Every message of a queue run accounted for: sent, delivered k times, processed k times,
result committed, deleted — and what went wrong.

Pure: it reads the columns of a queue record (``queues/record.py``: kind, process, tag,
msg_id, receipt, count, lease_ns, invoke_ns, complete_ns, outcome, note) and the ids of the
dead-lettered messages, and returns plain data. Messages are identified by their tag (the
producer writes it at the start of the body, so it survives any backend's ids).

* committed results are counted from the **effect store** read back after the run (``effect``
  rows, one per message: how many effects a downstream observer finds), so "committed
  twice" is what an observer sees; the consumers' own ``commit`` rows are kept to
  cross-check (``effects_agree_with_log``: per message, the effects found lie between the
  commits the record saw land and those plus the commits of unknown outcome, and every
  effect names a delivery whose consumer recorded a commit). A record without ``effect``
  rows (a run cut short before the read-back, an older run) is counted from the ``commit``
  rows that landed, and the summary says so (``results_from``); a message whose only
  commits are of unknown outcome then has no result. A message whose effects the read-back
  could not read is counted from the record too, and labelled: ``results_from`` names how
  many, ``results_from_record`` lists them;
* the accounting closes: every acknowledged message is exactly one of *committed once*,
  *committed more than once*, *dead-lettered without a commit*, *lost* (not dead-lettered,
  no commit) or *not reached* (the same, in a run cut short: it stopped before it got to
  them, none counted lost); the five add up to ``messages``;
* unexpected: a delivered tag no send ever carried;
* duplicate deliveries / processing / committed results: for each message, k - 1 where k >= 1
  is how often it was delivered / processed (ok) / committed (ok); summed over messages.
  Duplicate *results* are duplicate effects (what a user of the results sees twice);
  duplicate *processing* is work done twice, of which at most one result may have counted;
* fenced commits: commits refused because their fencing token was superseded (``fail``);
  the fence itself: an effect whose token (``#t<token>``) is lower than a token the
  message's claim was granted (``claim`` / ``claim_takeover`` rows, ``token N``) landed
  after a takeover, a stale commit the fence should have refused (``stale_commits_landed``;
  ``fencing_held`` False, None where no commit carries a token);
  uncertain results: commits whose outcome stayed unknown to their consumer (``info``): the
  effect store says whether they landed (from the record alone, exactly once is then
  never yes);
* processing cut short, by cause (a crash, a SIGKILL, the end of the run, Ctrl-C), from the
  notes of the ``process`` rows never closed; most deliveries of one message (the largest k
  of the deliveries histogram) beside the queue's highest receive count, which a race of
  two servers handing out one message with the same count leaves lower;
* exactly once: every acknowledged message was committed exactly once (a message
  dead-lettered without a commit, lost or committed twice makes it false, in a run cut
  short too; a run cut short with none of these is not decided, None; a message counted
  from the record with a commit of unknown outcome keeps it from being true);
* overlapping leases: two deliveries of one message whose leases certainly overlap in time.
  The server starts a lease somewhere between the receive's invoke and its reply, so the
  part certainly held runs from the reply to the invoke plus the visibility timeout asked
  (an accepted visibility change moves the end to its invoke plus its timeout, an accepted
  delete with the lease's receipt to the delete's invoke); a clock skew of one round trip
  is never counted as an overlap;
* stale receipts: deletes and visibility changes the queue refused for a stale receipt,
  and those it accepted although a later delivery of the message had already been handed
  out before the call (the bug of a delete keyed by message id only);
* cost: central-store, effect-store and queue operations per message, and the latency a
  strategy adds between a delivery and the start of its processing;
* throughput: distinct messages processed per second from the first send to the last commit;
* faults and timeline: the fault rows (``crash``, ``pause``, ``skew``, ``store_fault``) as
  windows, and results, duplicate results and fenced commits per time bin, both in seconds
  from the first row of the record.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SCHEMA_VERSION = 3  # 3: results from the effect store; five categories that add up
STORE_KINDS = ("claim", "claim_read", "claim_takeover", "heartbeat", "claim_done")
EFFECT_KINDS = ("effect_write", "effect_read")
QUEUE_KINDS = ("send", "receive", "delete", "change_visibility", "depth")
FAULT_KINDS = ("crash", "pause", "skew", "store_fault")
MAX_BINS = 200  # the timeline's bins: a result document stays small for any run length
CUT_BY = {"crashed": "a crash", "killed": "a SIGKILL", "run ended": "the end of the run",
          "stopped": "the end of the run", "interrupted": "Ctrl-C"}
"""What closed a ``process`` row that never finished (its note), in words."""


def _dups(counts: Iterable[int]) -> int:
    return sum(k - 1 for k in counts if k > 1)


def _histogram(counts: Iterable[int]) -> dict[str, int]:
    return {str(k): n for k, n in sorted(Counter(counts).items())}


def _overlaps(leases: Sequence[tuple[int, int]]) -> int:
    """Return the number of pairs of leases (start, end) that overlap."""
    pairs = 0
    ordered = sorted(leases)
    for i, (_, end_i) in enumerate(ordered):
        for start_j, _ in ordered[i + 1:]:
            if start_j >= end_i:
                break
            pairs += 1
    return pairs


def _exactly_once(all_done: bool, duplicated: bool, ended_uncommitted: bool,
                  cut_short: bool) -> bool | None:
    """Return whether every message has exactly one committed result: False on a duplicate
    (or unexpected) result or a message that ended without one (lost, or dead-lettered
    without a commit: no consumer will process it again), cut short or not; for a run cut
    short with none of these, None (not decided: it stopped first); else ``all_done``
    (every acknowledged message committed once)."""
    if duplicated or ended_uncommitted:
        return False
    if cut_short:
        return None
    return all_done


_TOKEN = re.compile(r"token (\d+)")


def _token_of(entry: str) -> int | None:
    """Return the fencing token an effect entry carries (``#t<token>``), None without."""
    _, mark, token = entry.partition("#t")
    return int(token) if mark and token.isdigit() else None


def _receipt_of(entry: str) -> str:
    """Return the receipt an effect entry ``c<consumer>.<gen>.<receipt>[#t<token>]`` names."""
    return entry.split("#t", 1)[0].split(".", 2)[-1]


def check_deliveries(cols: Mapping[str, Sequence[Any]], dead_letters: Iterable[str] = (),
                     cut_short: bool = False) -> dict[str, Any]:
    """Return per-message counts and the run's summary (counts; ms; messages/s);
    ``cut_short``: the run was interrupted, so what it did not process is not reached, not
    lost, and every figure is partial."""
    kind, tag, mid, receipt = cols["kind"], cols["tag"], cols["msg_id"], cols["receipt"]
    outcome, inv, comp = cols["outcome"], cols["invoke_ns"], cols["complete_ns"]
    lease, count = cols["lease_ns"], cols["count"]
    n = len(kind)

    acked: set[str] = set()
    maybe_sent: set[str] = set()
    tag_of_id: dict[str, str] = {}
    delivered: Counter[str] = Counter()
    processed: Counter[str] = Counter()
    interrupted: Counter[str] = Counter()
    logged: Counter[str] = Counter()  # commits the consumers recorded as landed
    uncertain: Counter[str] = Counter()
    commit_receipts: dict[str, set[str]] = defaultdict(set)  # tag -> receipts that committed
    stored: dict[str, list[str]] = {}  # tag -> effect entries read back from the store
    unreadable = 0
    unread: set[str] = set()  # tags whose effects the read-back could not read
    granted: Counter[str] = Counter()  # tag -> highest fencing token a claim was granted
    cut_by: Counter[str] = Counter()
    fenced = 0
    commit_times: list[tuple[int, str]] = []  # (time, tag) of every commit that happened
    fenced_times: list[int] = []
    faults: list[dict[str, Any]] = []
    deleted: Counter[str] = Counter()
    lease_of: dict[str, list[int]] = {}  # receipt -> [start, end]
    deliveries_of: dict[str, list[tuple[int, str]]] = defaultdict(list)  # tag -> (t, receipt)
    delivered_at: dict[str, int] = {}  # receipt -> reply time
    added_ns: list[int] = []
    store_ops = queue_ops = 0
    effect_ops = 0
    stale_deletes = stale_changes = stale_accepted = 0
    first_send = last_commit = None
    max_receive = 0

    for i in range(n):
        k, o = kind[i], outcome[i]
        if k in STORE_KINDS:
            store_ops += 1
        elif k in EFFECT_KINDS:
            effect_ops += 1
        elif k in QUEUE_KINDS:
            queue_ops += 1
        if k == "send":
            first_send = inv[i] if first_send is None else min(first_send, inv[i])
            if o == "ok":
                acked.add(tag[i])
                maybe_sent.add(tag[i])
                tag_of_id[mid[i]] = tag[i]
            elif o in ("info", "invoke"):
                maybe_sent.add(tag[i])
        elif k == "deliver" and o == "ok":
            delivered[tag[i]] += 1
            tag_of_id.setdefault(mid[i], tag[i])
            lease_of[receipt[i]] = [comp[i], inv[i] + lease[i]]
            deliveries_of[tag[i]].append((comp[i], receipt[i]))
            delivered_at[receipt[i]] = comp[i]
            max_receive = max(max_receive, count[i])
        elif k == "process":
            if o == "ok":
                processed[tag[i]] += 1
            elif o in ("info", "invoke"):
                interrupted[tag[i]] += 1
                cut_by[CUT_BY.get(cols["note"][i], cols["note"][i] or "unknown")] += 1
            if receipt[i] in delivered_at:
                added_ns.append(inv[i] - delivered_at[receipt[i]])
        elif k == "commit":
            if o == "ok":
                logged[tag[i]] += 1
                commit_receipts[tag[i]].add(receipt[i])
                commit_times.append((comp[i], tag[i]))
                last_commit = comp[i] if last_commit is None else max(last_commit, comp[i])
            elif o == "fail":
                fenced += 1
                fenced_times.append(comp[i])
            else:
                uncertain[tag[i]] += 1
                commit_receipts[tag[i]].add(receipt[i])
        elif k in ("claim", "claim_takeover") and o == "ok":
            m = _TOKEN.search(cols["note"][i] or "")
            if m:
                granted[tag[i]] = max(granted[tag[i]], int(m.group(1)))
        elif k == "effect":
            if o == "ok":
                stored[tag[i]] = [e for e in (cols["note"][i] or "").split(";") if e]
            else:
                unreadable += 1
                unread.add(tag[i])
        elif k in FAULT_KINDS:
            faults.append({"kind": k, "process": cols["process"][i], "start_ns": inv[i],
                           "end_ns": comp[i], "note": cols["note"][i]})

    # second pass: deletes and visibility changes against the leases and later deliveries
    for i in range(n):
        k, o = kind[i], outcome[i]
        if k not in ("delete", "change_visibility"):
            continue
        if o == "stale":
            if k == "delete":
                stale_deletes += 1
            else:
                stale_changes += 1
            continue
        if o != "ok":
            continue
        span = lease_of.get(receipt[i])
        if k == "delete":
            deleted[tag[i]] += 1
            if span is not None:
                span[1] = min(span[1], inv[i])
        elif span is not None:
            span[1] = inv[i] + lease[i]
        before = [(t, r) for t, r in deliveries_of.get(tag[i], ()) if t < inv[i]]
        if before and receipt[i] in delivered_at:
            t_last, r_last = max(before)
            if r_last != receipt[i] and t_last > delivered_at[receipt[i]]:
                stale_accepted += 1

    origin = min(inv) if n else 0
    dead_tags = {tag_of_id[d] for d in dead_letters if d in tag_of_id}
    # results as an observer of the effect store sees them; the record only where unread
    committed: Counter[str] = Counter(logged)
    for t, found in stored.items():
        committed[t] = len(found)
    committed = +committed  # drop the zeros
    # messages counted from the consumers' record: every one when nothing was read back,
    # else those whose effects could not be read (labelled, never passed off as the store's)
    from_record = sorted(acked - set(stored)) if stored else sorted(acked)
    if stored and not from_record:
        results_from = "effect store"
    elif stored:
        results_from = (f"effect store, and the consumer record for {len(from_record)} "
                        "message(s) whose effects could not be read back")
    else:
        results_from = "consumer record"
    disagree = sorted(
        t for t in set(stored) | set(logged) | set(uncertain) if t in stored and (
            not logged[t] <= len(stored[t]) <= logged[t] + uncertain[t]
            or any(_receipt_of(e) not in commit_receipts[t] for e in stored[t])))
    # a commit fenced by a token lands only with the claim's current token: an effect whose
    # token is lower than one granted for its message landed after a takeover (a stale
    # commit the fence should have refused)
    stale_landed = sorted(t for t, found in stored.items() if granted[t] and any(
        _token_of(e) is not None and _token_of(e) < granted[t] for e in found))
    fenced_tokens = any(_token_of(e) is not None for found in stored.values() for e in found)
    once = sorted(t for t in acked if committed[t] == 1)
    more = sorted(t for t in acked if committed[t] > 1)
    dead_uncommitted = sorted(t for t in acked if not committed[t] and t in dead_tags)
    unfinished = sorted(t for t in acked if not committed[t] and t not in dead_tags)
    lost, not_reached = ([], unfinished) if cut_short else (unfinished, [])
    unexpected = sorted(t for t in delivered if t not in maybe_sent)
    overlap_pairs = 0
    overlap_msgs = 0
    for _t, ds in deliveries_of.items():
        if len(ds) > 1:
            p = _overlaps([tuple(lease_of[r]) for _, r in ds])  # type: ignore[misc]
            overlap_pairs += p
            overlap_msgs += p > 0

    messages = len(acked)
    distinct = len(processed)
    span_s = ((last_commit - first_send) / 1e9 if first_send is not None
              and last_commit is not None and last_commit > first_send else None)
    committed_distinct = len(committed)
    expected_results = len(acked - dead_tags)
    summary = {
        "messages": messages,
        "committed_once": len(once),
        "committed_more_than_once": len(more),
        "dead_lettered_without_commit": len(dead_uncommitted),
        "results_from": results_from,
        "results_from_record": len(from_record),
        "effects_read_back": len(stored),
        "effects_unreadable": unreadable,
        "effects_agree_with_log": not disagree if stored else None,
        "effects_log_disagreements": len(disagree),
        "consumer_logged_results": sum(logged.values()),
        "deliveries": sum(delivered.values()),
        "duplicate_deliveries": _dups(delivered.values()),
        "messages_delivered_twice_or_more": sum(1 for k in delivered.values() if k > 1),
        "processing": sum(processed.values()),
        "duplicate_processing": _dups(processed.values()),
        "interrupted_processing": sum(interrupted.values()),
        "interrupted_processing_by": dict(sorted(cut_by.items())),
        "results": sum(committed.values()),
        "duplicate_results": _dups(committed.values()),
        "messages_committed_twice_or_more": sum(1 for k in committed.values() if k > 1),
        "fenced_commits": fenced,
        "stale_commits_landed": len(stale_landed),
        "fencing_held": (not stale_landed) if fenced_tokens else None,
        "uncertain_results": sum(uncertain.values()),
        "filtered_results": committed_distinct,
        "filtered_results_exact": committed_distinct == expected_results
        and set(committed) <= maybe_sent,
        "lost": len(lost),
        "not_reached": len(not_reached),
        "partial": cut_short,
        "unexpected": len(unexpected),
        "dead_lettered": len(dead_tags),
        "deleted": len(deleted),
        "overlapping_leases": overlap_pairs,
        "messages_with_overlapping_leases": overlap_msgs,
        "stale_deletes_refused": stale_deletes,
        "stale_changes_refused": stale_changes,
        "stale_receipts_accepted": stale_accepted,
        "max_receive_count": max_receive,
        "max_deliveries_of_one_message": max(delivered.values(), default=0),
        "store_ops": store_ops,
        "store_ops_per_message": store_ops / messages if messages else 0.0,
        "effect_store_ops": effect_ops,
        "effect_store_ops_per_message": effect_ops / messages if messages else 0.0,
        "queue_ops": queue_ops,
        "queue_ops_per_message": queue_ops / messages if messages else 0.0,
        "added_latency_ms": (sum(added_ns) / len(added_ns) / 1e6) if added_ns else 0.0,
        "span_s": span_s,
        "throughput_per_s": distinct / span_s if span_s else 0.0,
        "exactly_once": _exactly_once(
            len(once) == messages and not any(n for t, n in uncertain.items()
                                              if t not in stored),
            bool(_dups(committed.values())) or not set(committed) <= maybe_sent,
            bool(lost or dead_uncommitted), cut_short),
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "summary": summary,
        "histograms": {"deliveries": _histogram(delivered.values()),
                       "processing": _histogram(processed.values())},
        "lost": lost[:100],
        "not_reached": not_reached[:100],
        "unexpected": unexpected[:100],
        "duplicated": sorted(t for t, k in processed.items() if k > 1)[:100],
        "duplicated_results": sorted(t for t, k in committed.items() if k > 1)[:100],
        "dead_lettered_without_commit": dead_uncommitted[:100],
        "results_from_record": from_record[:100] if stored else [],
        "stale_commits_landed": stale_landed[:100],
        "effects_log_disagreements": disagree[:100],
        "faults": _windows(faults, origin),
        "timeline": _timeline(commit_times, fenced_times, origin),
    }


def _windows(faults: list[dict[str, Any]], origin: int) -> list[dict[str, Any]]:
    """Return the fault rows as windows in seconds from ``origin`` (a window never closed
    ends with the record)."""
    return [{"kind": f["kind"], "process": f["process"], "note": f["note"],
             "start_s": (f["start_ns"] - origin) / 1e9,
             "end_s": None if f["end_ns"] < 0 else (f["end_ns"] - origin) / 1e9}
            for f in faults]


def _timeline(commits: list[tuple[int, str]], fenced: list[int], origin: int
              ) -> dict[str, Any]:
    """Return results, duplicate results (a message's second or later commit) and fenced
    commits per bin of ``bin_s`` seconds from ``origin``."""
    ends = [t for t, _ in commits] + fenced
    if not ends:
        return {"bin_s": 1.0, "results": [], "duplicate_results": [], "fenced_commits": []}
    span_s = (max(ends) - origin) / 1e9
    bin_s = float(max(1, math.ceil(span_s / MAX_BINS)))
    n = int(span_s // bin_s) + 1
    out = {"bin_s": bin_s, "results": [0] * n, "duplicate_results": [0] * n,
           "fenced_commits": [0] * n}
    seen: set[str] = set()
    for t, tag in sorted(commits):
        b = int((t - origin) / 1e9 // bin_s)
        out["results"][b] += 1
        if tag in seen:
            out["duplicate_results"][b] += 1
        seen.add(tag)
    for t in fenced:
        out["fenced_commits"][int((t - origin) / 1e9 // bin_s)] += 1
    return out
