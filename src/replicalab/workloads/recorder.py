"""Issue store calls and record each one in the History, invoke then completion."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from replicalab.history import CONDITION_FAILED, History
from replicalab.history.txn import encode_txn
from replicalab.runtime import Runtime
from replicalab.stores import (
    ABSENT,
    Client,
    ConditionFailed,
    ReadResult,
    StoreError,
    Unavailable,
    Unsupported,
    WriteResult,
)
from replicalab.stores.base import MicroOp, TxnAborted

_TICK_EVERY = 4096


class Recorder:
    """Wraps store calls: an op row at invoke, closed ok/fail/info at completion."""

    def __init__(self, history: History, runtime: Runtime,
                 tick: Callable[[int], None] | None = None) -> None:
        self.h = history
        self.rt = runtime
        self.tick = tick
        self._count = 0

    def _ticked(self) -> None:
        self._count += 1
        if self.tick is not None and self._count % _TICK_EVERY == 0:
            self.tick(self.rt.now_ns())

    def _close_failed(self, index: int, err: Exception) -> None:
        """Close op ``index``: unknown outcome -> info, refused -> fail (a false condition's
        error starts with CONDITION_FAILED: the store answered); re-raise Unsupported."""
        if isinstance(err, Unavailable | TimeoutError):
            self.h.info(index, self.rt.now_ns(), str(err) or "timeout")
            return
        text = str(err)
        if isinstance(err, ConditionFailed) and not text.startswith(CONDITION_FAILED):
            text = f"{CONDITION_FAILED}: {text}"
        self.h.fail(index, self.rt.now_ns(), text)
        if isinstance(err, Unsupported):
            raise err

    def _done_ns(self, index: int, res: ReadResult | WriteResult) -> int:
        """Return when op ``index`` completed (ns): the reply's arrival where the client
        stamped the wire in real time (and the invoke moves up to the request's leaving:
        the operation happened between these, whatever the client did around), else now."""
        h = self.h
        if res.sent_ns and not self.rt.virtual:
            h.invoke_ns[index] = max(res.sent_ns, h.invoke_ns[index])
            return res.received_ns
        return self.rt.now_ns()

    async def read(self, client: Client, process: int, keys: Sequence[str], consistent: bool
                   ) -> ReadResult | None:
        """Return the read result, or None if the read failed or its outcome is unknown."""
        h, rt = self.h, self.rt
        if type(keys) is not tuple:
            keys = tuple(keys)
        i = h.invoke(process, "read", keys, (None,) * len(keys),
                     "consistent" if consistent else "eventual", rt.now_ns())
        try:
            res = await client.read(keys, consistent=consistent)
        except (StoreError, TimeoutError) as err:
            self._close_failed(i, err)
            return None
        done = self._done_ns(i, res)
        h.ok(i, done, res.values, res.node)
        # _ticked inlined: this runs once per read
        self._count = count = self._count + 1
        if count % _TICK_EVERY == 0 and self.tick is not None:
            self.tick(done)
        return res

    async def write(self, client: Client, process: int, values: Mapping[str, str],
                    expect: Mapping[str, Any] | None = None) -> bool:
        """Return True if the write happened (False if it failed or its outcome is unknown)."""
        h, rt = self.h, self.rt
        # a cas on the keys it writes keeps what each had to hold (a checker needs it);
        # one conditioned on other elements (the sweep's "never" key) keeps none
        expects = (tuple(None if expect[k] is ABSENT else str(expect[k]) for k in values)
                   if expect and expect.keys() == values.keys() else ())
        i = h.invoke(process, "cas" if expect else "write", tuple(values),
                     tuple(values.values()), "none", rt.now_ns(), expects)
        try:
            res = await client.write(values, expect=expect)
        except (StoreError, TimeoutError) as err:
            self._close_failed(i, err)
            return False
        h.ok(i, self._done_ns(i, res), node=res.node)
        self._ticked()
        return True

    async def transact(self, client: Any, process: int, ops: list[MicroOp], gap_ns: int = 0,
                       to_store: Callable[[str], str] | None = None
                       ) -> tuple[str, list[MicroOp] | None]:
        """Run ``ops`` as one transaction on ``client`` (a store declaring transactions),
        recorded as one ``txn`` row: reads None at invoke, filled at ``ok``; ``fail`` when the
        store says it certainly did not commit (TxnAborted), ``info`` on any other error.
        ``to_store`` maps a history key to the element the store keeps it in. Return the
        outcome (ok, fail or info) and, when ok, the ops with their reads filled in."""
        h, rt = self.h, self.rt
        keys, values = encode_txn(ops)
        sent = ops if to_store is None else [(f, to_store(k), v) for f, k, v in ops]
        i = h.invoke(process, "txn", keys, values, "none", rt.now_ns())
        try:
            got = await (client.transact(sent, gap_ns=gap_ns) if gap_ns
                         else client.transact(sent))
        except TxnAborted as err:
            h.fail(i, rt.now_ns(), str(err) or "aborted")
            return "fail", None
        except Unsupported as err:
            h.fail(i, rt.now_ns(), str(err))
            raise
        except (StoreError, TimeoutError, OSError) as err:
            h.info(i, rt.now_ns(), str(err) or type(err).__name__)
            return "info", None
        done = [(f, k, r[2]) for (f, k, _), r in zip(ops, got, strict=True)]
        h.ok(i, rt.now_ns(), encode_txn(done)[1])
        self._ticked()
        return "ok", done
