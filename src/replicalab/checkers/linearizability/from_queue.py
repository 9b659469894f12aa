"""A queue run's record as a FIFO queue's history (pure, no I/O).

The queue workload records every operation (``queues/record.py``: kind, process, tag,
..., invoke_ns, complete_ns, outcome). Read as the ``fifo-queue`` model reads a history:

* each ``send`` is an ``enqueue`` of its message's tag (its outcome as recorded; a send
  never completed is ``info``);
* each ``deliver`` (one per message a ``receive`` returned) is an ``ok`` ``dequeue`` of that
  tag, over the receive's interval;
* nothing else: an empty receive is no ``dequeue`` of an empty queue (the queue's other
  messages may be in flight, hidden by their visibility timeout), and deletes,
  visibility changes and processing are the consumer's business, not the queue's order.

A FIFO queue (SQS FIFO, ``sim://sqs?fifo=1``) keeps order per message group: with
``groups`` the ops are keyed by group (the producer puts message ``k`` in group
``k % groups``), so each group is checked as its own queue. What this history is *not*:
a visibility-timeout queue delivers a message again when its lease ends before it is
deleted (a consumer paused, crashed or slow), which a FIFO queue never does; and a
standard queue (``sim://sqs``) neither keeps order nor delivers once. Such runs are, as
they should be, not linearizable as a ``fifo-queue``: the counterexample names the
delivery that broke the order or came twice.
"""

from __future__ import annotations

from typing import Any

from replicalab.checkers.linearizability.ops import LinOp

_OUTCOME = {"ok": "ok", "fail": "fail", "info": "info", "invoke": "info", "stale": "fail"}


def _group(tag: str, groups: int) -> int | None:
    """Return the message group of the producer's tag ``<token>.<k>`` (None for one
    queue)."""
    if groups <= 1:
        return None
    try:
        return int(tag.rsplit(".", 1)[1]) % groups
    except (IndexError, ValueError):
        return None


def queue_ops(cols: dict[str, list[Any]], groups: int = 1) -> list[LinOp]:
    """Return the sends and deliveries of a queue record (its columns) as ``fifo-queue``
    LinOps, ``index`` = the record's row, keyed by message group when ``groups`` > 1."""
    out = []
    kinds, tags = cols["kind"], cols["tag"]
    for row, kind in enumerate(kinds):
        if kind not in ("send", "deliver"):
            continue
        tag = tags[row]
        outcome = _OUTCOME.get(cols["outcome"][row], "info")
        inv, comp = int(cols["invoke_ns"][row]), int(cols["complete_ns"][row])
        if kind == "deliver":
            out.append(LinOp(row, int(cols["process"][row]), "dequeue", _group(tag, groups),
                             tag, "ok", inv, comp))
        else:
            out.append(LinOp(row, int(cols["process"][row]), "enqueue", _group(tag, groups),
                             tag, outcome, inv, comp if comp >= inv else -1))
    return out
