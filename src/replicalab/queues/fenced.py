"""``central``: seed 000's third way with a fencing token, so each message's result is
committed once whatever the consumers' pauses and clocks and the central store's failures.

A claim is one element of the central store, ``claims-<run>/<tag>/owner``, holding
``owner|state|token|receive``:

* **claim** — a conditional write "must not exist" of ``me|busy|1|k``, ``k`` the receive
  count of the delivery in hand;
* **takeover** — only by a delivery with a higher receive count than the claim's: the
  queue handed the message out again, so the queue judged the holder's lease over, on the
  queue's own clock (the server's, for Redis and PostgreSQL; the one of the simulated
  servers for ``sim://sqs``). No consumer's clock is read, so a skewed one changes nothing.
  The takeover is a conditional write on the old value that puts ``token + 1``: the token
  only grows, and two takers cannot both succeed;
* **renewal** — while processing runs, the consumer extends the message's visibility
  (``change_visibility`` with its receipt) every third of the timeout; a refused or failed
  extension means the claim may be lost, and the work is abandoned;
* **commit** — the result is accepted only with the current token: one conditional write
  of the claim's item puts ``me|done|token|k`` (expecting ``me|busy|token|k``) and the
  message's effect list holding this delivery's entry (expecting no list: under the fence
  nobody else writes it), so the effect and the fence are one atomic step
  (``effects.py``), and a consumer that wakes from a pause after a takeover finds its
  token superseded and neither commits nor deletes. A commit whose outcome is unknown
  (a store error or timeout) is retried, the same write, until it lands, is refused, or a
  read shows it landed; the message is deleted only after a commit that certainly happened.

A redelivery of a committed message finds the claim ``done`` and is deleted unprocessed.
Cost per message: the claim and the commit (two conditional writes), plus a read when the
claim write fails, and one queue call per renewal.
"""

from __future__ import annotations

from replicalab.queues.base import Delivery
from replicalab.queues.claims import read_claim, take_over
from replicalab.queues.effects import effects_key
from replicalab.queues.protocols import Consumer
from replicalab.runtime.base import NS_PER_MS, NS_PER_S
from replicalab.stores.base import ABSENT, ConditionFailed, StoreError

RETRY_FIRST_NS = 100 * NS_PER_MS  # wait before re-sending a commit whose outcome is unknown
RETRY_MAX_NS = NS_PER_S  # ... doubling up to this


def parse_claim(value: str) -> tuple[str, str, int, int]:
    """Return (owner, state, token, receive count) of a claim's value."""
    owner, state, token, count = value.rsplit("|", 3)
    return owner, state, int(token), int(count)


class FencedStrategy:
    """Claim with a fencing token, renew through the queue, commit only with the current
    token (see the module docstring)."""

    name = "central"
    detect = False

    def __init__(self, visibility_s: float, commit_retry_s: float) -> None:
        self.renew_every_ns = int(visibility_s * NS_PER_S) // 3
        self.commit_retry_ns = int(commit_retry_s * NS_PER_S)

    async def handle(self, w: Consumer, d: Delivery, tag: str) -> None:
        """Claim (or take over), process while renewing, commit with the token, delete."""
        key = f"{w.claims}/{tag}/owner"
        held = await self._claim(w, d, tag, key, f"c{w.index}.{w.gen}.{d.receipt}")
        if held is None:
            return

        async def renew() -> bool:
            return await w.extend(d, tag)

        if not await w.process(d, tag, renew, self.renew_every_ns):
            return  # the renewal was refused: another delivery may own the message now
        if await self._commit(w, d, tag, key, held):
            await w.delete(d, tag)

    async def _claim(self, w: Consumer, d: Delivery, tag: str, key: str, me: str
                     ) -> str | None:
        """Return our claim's value if we hold the message now, None if we do not (after
        deleting the delivery when the message's result is already committed)."""
        rt, log = w.rt, w.log
        mine = f"{me}|busy|1|{d.receive_count}"
        i = log.invoke("claim", w.index, rt.now_ns(), tag=tag, msg_id=d.id, receipt=d.receipt,
                       count=d.receive_count)
        try:
            await w.store_of(d).write({key: mine}, expect={key: ABSENT})
        except ConditionFailed:
            log.done(i, rt.now_ns(), "fail", note="claim exists")
        except StoreError as err:
            log.done(i, rt.now_ns(), "info", note=str(err))
        else:
            log.done(i, rt.now_ns(), note="token 1")
            return mine
        current = await read_claim(w, d, tag, key)
        if current is None:
            w.skip(d, tag, "claim unreadable or absent; left for redelivery")
            return None
        owner, state, token, count = parse_claim(current)
        if owner == me:
            return current  # our claim whose outcome was unknown did land
        if state == "done":
            w.skip(d, tag, f"committed by {owner} with token {token}")
            await w.delete(d, tag)
            return None
        if count >= d.receive_count:
            w.skip(d, tag, f"claim held by {owner} under receive {count}")
            return None
        # a delivery the queue handed out later: the holder's visibility timeout is over
        return await take_over(w, d, tag, key, current,
                               f"{me}|busy|{token + 1}|{d.receive_count}",
                               f"claim of {owner} made under receive {count}",
                               d.receive_count, f"token {token + 1}")

    async def _commit(self, w: Consumer, d: Delivery, tag: str, key: str, held: str) -> bool:
        """Commit the result with our token; return True once it certainly happened, False
        when the token was superseded (fenced) or the outcome stayed unknown.

        Two kinds of rows: each conditional write is a ``claim_done`` (a central-store
        operation, what the commit costs), and one ``commit`` row spans them all with the
        effect's outcome: ``ok`` happened, ``fail`` refused by the fence, ``info`` unknown.
        """
        rt, log = w.rt, w.log
        owner, _, token, count = parse_claim(held)
        done = f"{owner}|done|{token}|{count}"
        ekey, entry = effects_key(w.claims, tag), f"{w.effect_entry(d)}#t{token}"
        i = log.invoke("commit", w.index, rt.now_ns(), tag=tag, msg_id=d.id, receipt=d.receipt,
                       note=entry)
        deadline = rt.now_ns() + self.commit_retry_ns
        wait_ns, unknown = RETRY_FIRST_NS, ""
        while True:
            j = log.invoke("claim_done", w.index, rt.now_ns(), tag=tag, msg_id=d.id,
                           receipt=d.receipt, note=f"commit with token {token}")
            try:
                await w.store_of(d).write({key: done, ekey: entry},
                                          expect={key: held, ekey: ABSENT})
            except ConditionFailed:
                log.done(j, rt.now_ns(), "fail", note=f"token {token} superseded")
                now = await read_claim(w, d, tag, key) if unknown else None
                if now == done:
                    log.done(i, rt.now_ns(), note=f"token {token}: an earlier try landed")
                    return True
                if not unknown or now is not None:
                    log.done(i, rt.now_ns(), "fail", note=f"fenced: token {token} superseded")
                    return False
                # the read failed too: whether an earlier try landed is still unknown
            except StoreError as err:
                unknown = str(err)
                log.done(j, rt.now_ns(), "info", note=unknown)
            else:
                log.done(j, rt.now_ns())
                log.done(i, rt.now_ns(), note=f"token {token}")
                return True
            if rt.now_ns() + wait_ns > deadline:
                log.done(i, rt.now_ns(), "info", note=f"token {token}: unknown ({unknown})")
                return False
            await rt.sleep_ns(wait_ns)
            wait_ns = min(2 * wait_ns, RETRY_MAX_NS)
