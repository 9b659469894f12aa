"""Issue store calls and record each one in the History, invoke then completion."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from replicalab.history import CONDITION_FAILED, History
from replicalab.runtime import Runtime
from replicalab.stores import (
    ABSENT,
    Client,
    ConditionFailed,
    ReadResult,
    StoreError,
    Unavailable,
    Unsupported,
)

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
        done = rt.now_ns()
        if res.sent_ns and not rt.virtual:
            # wire stamps: the read happened between these, whatever the client did around
            h.invoke_ns[i], done = max(res.sent_ns, h.invoke_ns[i]), res.received_ns
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
        done = rt.now_ns()
        if res.sent_ns and not rt.virtual:
            h.invoke_ns[i], done = max(res.sent_ns, h.invoke_ns[i]), res.received_ns
        h.ok(i, done, node=res.node)
        self._ticked()
        return True
