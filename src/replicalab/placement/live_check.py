"""Lost acknowledged writes, found from a history alone (a pure function, no I/O).

Every write's value is unique, so a read's value names the write it saw. A write W is
*lost* when some read R began after W was acknowledged and yet saw a value older than W: the
initial value, or the value of a write that was acknowledged before W was even invoked.
Nothing in between can explain R's value — W must have vanished (or R read a stale copy).
Concurrent writes are not flagged: either order is legal. A read of a value no write wrote is
reported as *unknown* (a corrupted or foreign value). Writes with an unknown outcome
(``info``) are never flagged as lost and, since they may take effect at any time, never make
a read stale. Run it on a history that ends with a read of every object after the writers
stopped, so that a lost write cannot hide in the absence of later reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from replicalab.history import History, OpType


@dataclass(frozen=True, slots=True)
class LostWrite:
    """An acknowledged write (``write_index``, ``value``) that read ``read_index`` should
    have seen or overwritten, but which saw ``read_value`` instead."""

    key: str
    value: str
    write_index: int
    read_index: int
    read_value: str | None


@dataclass
class LostWrites:
    """The check's verdict: ``lost`` writes, reads of ``unknown`` values (op indices), and
    how many acknowledged writes and reads were checked."""

    lost: list[LostWrite] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)
    writes: int = 0
    reads: int = 0

    @property
    def ok(self) -> bool:
        """Return True when no write was lost and every read value is known."""
        return not self.lost and not self.unknown


def lost_writes(h: History, initial: str = "init") -> LostWrites:
    """Return every acknowledged write lost in ``h`` (see the module docstring); ``initial``
    is the value each key holds before any write."""
    types = h.types()
    f = h.column("f")
    inv = h.column("invoke_ns")
    done = h.column("complete_ns")
    read_f, write_f = h.f_code("read"), h.f_code("write")
    ok_writes: dict[str, list[int]] = {}
    written: dict[tuple[str, str], int] = {}
    reads: list[int] = []
    for i in np.flatnonzero(f == write_f).tolist():
        if types[i] in (OpType.OK, OpType.INFO):
            key, value = h.keys[i][0], h.values[i][0]
            written[(key, value or "")] = i
            if types[i] == OpType.OK:
                ok_writes.setdefault(key, []).append(i)
    for i in np.flatnonzero((f == read_f) & (types == OpType.OK)).tolist():
        reads.append(i)
    # per key: the acknowledged writes' indices, invoke and completion times as arrays
    per_key = {k: (np.array(w), inv[w], done[w]) for k, w in ok_writes.items()}
    out = LostWrites(writes=sum(len(w) for w in ok_writes.values()), reads=len(reads))
    flagged: set[int] = set()
    for r in reads:
        key, seen = h.keys[r][0], h.values[r][0]
        if seen == initial:
            base_done = -1  # the initial value precedes every write
        elif (key, seen or "") in written:
            b = written[(key, seen or "")]
            if types[b] != OpType.OK:
                continue  # an unknown-outcome write may have landed at any time
            base_done = int(done[b])
        else:
            out.unknown.append(r)
            continue
        if key not in per_key:
            continue
        idx, w_inv, w_done = per_key[key]
        # acknowledged before the read began, invoked after the seen write was acknowledged
        for w in idx[(w_inv > base_done) & (w_done < inv[r])].tolist():
            if w not in flagged and h.values[w][0] != seen:
                flagged.add(w)
                out.lost.append(LostWrite(key, h.values[w][0] or "", w, r, seen))
    return out
