"""The producers of a queue run: one ``produce()`` for the runner in one process and the
runner with consumer processes alike."""

from __future__ import annotations

from collections.abc import Callable

from replicalab.queues.base import Queue, QueueError
from replicalab.queues.record import PRODUCER, QueueLog
from replicalab.queues.spec import QueueSpec


def tag_of(body: str) -> str:
    """Return the tag a producer wrote at the start of a message body."""
    return body.split("|", 1)[0]


async def produce(queue: Queue, spec: QueueSpec, log: QueueLog, token: str, p: int,
                  on_ack: Callable[[str], None],
                  stopping: Callable[[], bool] = lambda: False) -> None:
    """Send producer ``p``'s share of the run's messages (every ``producers``-th, tagged
    ``<token>.<k>``; FIFO queues: in ``groups`` message groups), recording each send and
    calling ``on_ack(message id)`` once the queue acknowledged it."""
    rt = queue.runtime
    client = await queue.connect()
    try:
        for k in range(p, spec.messages, spec.producers):
            if stopping():
                return
            tag = f"{token}.{k:06d}"
            body = f"{tag}|payload {k}"
            i = log.invoke("send", PRODUCER, rt.now_ns(), tag=tag)
            try:
                if queue.info.fifo:
                    mid = await client.send(  # type: ignore[call-arg]
                        body, group_id=f"g{k % spec.groups}")
                else:
                    mid = await client.send(body)
            except QueueError as err:
                log.done(i, rt.now_ns(), "info", note=str(err))
                continue
            log.done(i, rt.now_ns(), msg_id=mid)
            on_ack(mid)
    finally:
        await client.close()
