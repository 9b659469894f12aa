"""Pull the reads and writes of one element out of a History as aligned numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replicalab.history import History, decode_value


@dataclass(frozen=True)
class WriteLog:
    """Successful writes of one element, ordered by invoke time (ns) with their versions."""

    invoke_ns: np.ndarray
    complete_ns: np.ndarray
    version: np.ndarray
    process: np.ndarray
    value: list[str | None]


@dataclass(frozen=True)
class ReadLog:
    """Successful reads of one element: op index, process, times (ns), version seen (-1 none)."""

    index: np.ndarray
    process: np.ndarray
    invoke_ns: np.ndarray
    version: np.ndarray
    value: list[str | None]


def _version_of(values: list[str | None]) -> np.ndarray:
    memo: dict[str | None, int] = {}
    for v in set(values):
        pv = decode_value(v)
        memo[v] = pv.seq if pv is not None else -1
    return np.fromiter((memo[v] for v in values), dtype=np.int64, count=len(values))


def element_ops(h: History, key: str) -> tuple[WriteLog, ReadLog]:
    """Return the ok writes and ok reads touching ``key`` (multi-key ops contribute their part)."""
    types = h.types()
    f = h.column("f")
    ok = np.flatnonzero((types == 1) & (h.column("process") >= 0))  # client ops only
    read_code, write_code = h.f_code("read"), h.f_code("write")
    w_idx, w_val, r_idx, r_val = [], [], [], []
    keys, values = h.keys, h.values
    for i in ok.tolist():
        ks = keys[i]
        if ks[0] == key and len(ks) == 1:
            pos = 0
        elif key in ks:
            pos = ks.index(key)
        else:
            continue
        code = f[i]
        if code == write_code:
            w_idx.append(i)
            w_val.append(values[i][pos])
        elif code == read_code:
            r_idx.append(i)
            r_val.append(values[i][pos])
    inv = h.column("invoke_ns")
    comp = h.column("complete_ns")
    proc = h.column("process")
    wi = np.array(w_idx, dtype=np.int64)
    order = np.argsort(inv[wi], kind="stable")
    wi = wi[order]
    w_val = [w_val[j] for j in order.tolist()]
    ri = np.array(r_idx, dtype=np.int64)
    writes = WriteLog(inv[wi], comp[wi], _version_of(w_val), proc[wi], w_val)
    reads = ReadLog(ri, proc[ri], inv[ri], _version_of(r_val), r_val)
    return writes, reads


def latest_write_before(writes: WriteLog, t_ns: np.ndarray) -> np.ndarray:
    """Return, per time, the index of the last write invoked at or before it (-1 if none)."""
    return np.searchsorted(writes.invoke_ns, t_ns, side="right") - 1
