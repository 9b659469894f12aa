"""Seed 000's third way with a lease and nothing else: ``central-lease`` and
``central-detect``.

* ``central-lease`` — claim every message in a central store with a conditional write ("must
  not exist"), read the claim back (the seed: "writes to a central store stating that it is
  processing a message, and it then reads back to see who else is also processing"), and
  resolve deterministically: the owner the store holds wins; everyone reads the same value.
  A claim is a lease (half the visibility timeout) whose end is computed on the claiming
  consumer's clock and judged on the reading consumer's; it is renewed by heartbeats while
  processing runs long, taken over by a conditional write only once expired, and marked
  done after the commit, so a redelivery of a finished message is dropped and deleted.
* ``central-detect`` — the same claim, but the read-back and the done mark run only when a
  conflict is possible: the delivery is a redelivery (receive count > 1), the claim was not a
  clean first write, processing ran past half the lease, the delete was refused, or the
  queue's counts show another reader may be working the same queue (messages in flight
  that this reader does not hold).

What the lease does not cover, and ``central`` (``fenced.py``) does: the commit is
unconditional once processing returns, so a consumer that stalls past its lease (a pause, a
clock ahead or behind by more than the lease, a renewal lost to a store error) commits a
result another consumer has committed too.
"""

from __future__ import annotations

from replicalab.queues.base import Delivery
from replicalab.queues.protocols import Consumer
from replicalab.stores.base import ABSENT, ConditionFailed, StoreError


def _parse(value: str) -> tuple[str, str, int]:
    owner, state, expires = value.rsplit("|", 2)
    return owner, state, int(expires)


class LeaseStrategy:
    """Claim each message in the central store before processing it (seed 000, case 3),
    with a lease and no fencing."""

    def __init__(self, detect: bool, lease_ns: int) -> None:
        self.detect = detect
        self.lease_ns = lease_ns
        self.name = "central-detect" if detect else "central-lease"

    async def handle(self, w: Consumer, d: Delivery, tag: str) -> None:
        """Claim, process if the claim is ours, commit, mark done, delete."""
        key = f"{w.claims}/{tag}/owner"
        me = f"c{w.index}.{w.gen}.{d.receipt}"
        # the reader read the queue's counts when this batch arrived (Worker.run)
        conflict = not self.detect or d.receive_count > 1 or w.reader.others
        held = await self._claim(w, d, tag, key, me, conflict)
        if held is None:
            return
        value = [held]
        long_run = [False]

        async def heartbeat() -> bool:
            long_run[0] = True
            renewed = await self._renew(w, d, tag, key, value[0], "heartbeat")
            if renewed is None:
                return False
            value[0] = renewed
            return True

        if not await w.process(d, tag, heartbeat, self.lease_ns // 3):
            return
        if not await w.commit(d, tag):
            return  # outcome unknown: the claim stays busy and the message comes back
        if not self.detect or conflict or long_run[0]:
            await self._renew(w, d, tag, key, value[0], "claim_done")
            await w.delete(d, tag)
        elif not await w.delete(d, tag):
            # the message may come back: leave a done mark so it is dropped, not redone
            await self._renew(w, d, tag, key, value[0], "claim_done")

    async def _claim(self, w: Consumer, d: Delivery, tag: str, key: str, me: str,
                     conflict: bool) -> str | None:
        """Return our claim's value if we own the message now, None if someone else does
        (after deleting the delivery when the message is already done)."""
        rt, log = w.rt, w.log
        mine = f"{me}|busy|{w.now_ns() + self.lease_ns}"
        i = log.invoke("claim", w.index, rt.now_ns(), tag=tag, msg_id=d.id, receipt=d.receipt)
        clean = False
        try:
            await w.store_of(d).write({key: mine}, expect={key: ABSENT})
            log.done(i, rt.now_ns())
            clean = True
        except ConditionFailed:
            log.done(i, rt.now_ns(), "fail", note="claim exists")
        except StoreError as err:
            log.done(i, rt.now_ns(), "info", note=str(err))
        if clean and not conflict:
            return mine
        current = await self._read(w, d, tag, key)
        if current is None:
            w.skip(d, tag, "claim unreadable or absent after the write; left for redelivery")
            return None
        owner, state, expires_ns = _parse(current)
        if owner == me:
            return current
        if state == "done":
            w.skip(d, tag, f"claim done by {owner}")
            await w.delete(d, tag)
            return None
        if expires_ns > w.now_ns():
            w.skip(d, tag, f"claim held by {owner}")
            return None
        return await take_over(w, d, tag, key, current, f"{me}|busy|{w.now_ns() + self.lease_ns}",
                               f"expired claim of {owner}")

    async def _read(self, w: Consumer, d: Delivery, tag: str, key: str) -> str | None:
        return await read_claim(w, d, tag, key)

    async def _renew(self, w: Consumer, d: Delivery, tag: str, key: str, current: str,
                     kind: str) -> str | None:
        """Replace our claim ``current`` by a renewed lease (heartbeat) or the done mark
        (claim_done) with a conditional write; return the new value, None if we lost it."""
        rt, log = w.rt, w.log
        owner = _parse(current)[0]
        new = (f"{owner}|done|0" if kind == "claim_done"
               else f"{owner}|busy|{w.now_ns() + self.lease_ns}")
        i = log.invoke(kind, w.index, rt.now_ns(), tag=tag, msg_id=d.id, receipt=d.receipt)
        try:
            await w.store_of(d).write({key: new}, expect={key: current})
        except ConditionFailed:
            log.done(i, rt.now_ns(), "fail", note="claim lost")
            return None
        except StoreError as err:
            log.done(i, rt.now_ns(), "info", note=str(err))
            # unknown: keep the lease we know of; it may still be ours
            return current if _parse(current)[2] > w.now_ns() else None
        log.done(i, rt.now_ns())
        return new


async def take_over(w: Consumer, d: Delivery, tag: str, key: str, current: str, taken: str,
                    why: str, count: int = 0, done_note: str = "") -> str | None:
    """Replace the claim ``current`` by ``taken`` with a conditional write (recorded as
    ``claim_takeover``, ``note`` = ``why``); return ``taken``, or None when another consumer
    was first or the outcome is unknown (the delivery is then skipped)."""
    rt, log = w.rt, w.log
    i = log.invoke("claim_takeover", w.index, rt.now_ns(), tag=tag, msg_id=d.id,
                   receipt=d.receipt, count=count, note=why)
    try:
        await w.store_of(d).write({key: taken}, expect={key: current})
    except ConditionFailed:
        log.done(i, rt.now_ns(), "fail", note="taken over by another reader first")
        w.skip(d, tag, "expired claim taken over by another reader")
        return None
    except StoreError as err:
        log.done(i, rt.now_ns(), "info", note=str(err))
        w.skip(d, tag, "takeover outcome unknown; left for redelivery")
        return None
    log.done(i, rt.now_ns(), **({"note": done_note} if done_note else {}))
    return taken


async def read_claim(w: Consumer, d: Delivery, tag: str, key: str) -> str | None:
    """Return the claim at ``key`` by a consistent read (recorded as ``claim_read``), None
    when it is absent or the read failed."""
    rt, log = w.rt, w.log
    i = log.invoke("claim_read", w.index, rt.now_ns(), tag=tag, msg_id=d.id,
                   receipt=d.receipt)
    try:
        got = await w.store_of(d).read([key], consistent=True)
    except StoreError as err:
        log.done(i, rt.now_ns(), "info", note=str(err))
        return None
    log.done(i, rt.now_ns())
    return got.values[0]
