"""The bridge to the native core (``replicalab_native.txn_check2_*``): transactions to
int64 columns, the lattice as tables, and the core's raw answer to a
:class:`TxnCheckResult` through the same ``check_result`` as the reference."""

from __future__ import annotations

import json
import time
from functools import cache
from pathlib import Path
from typing import Any

from replicalab.checkers.txn import cycles, models
from replicalab.checkers.txn.check import (
    DEFAULT_MAX_STEPS,
    MAX_PER_TYPE,
    check_result,
    order_kind,
)
from replicalab.checkers.txn.types import (
    NEVER,
    Anomaly,
    Options,
    Step,
    Txn,
    TxnCheckResult,
    TxnInputError,
    Unfinished,
)
from replicalab.errors import MODEL

_F = {"append": 0, "r": 1, "w": 2}
_OUTCOME = {"ok": 1, "fail": 2, "info": 3}
_KINDS = ("ww", "wr", "rw", "process", "realtime")


@cache
def tables() -> tuple[Any, ...]:
    """Return what the lattice says, as the native core takes it: the cycle classes in
    Elle's order, each one's implied classes (bit masks), the cycle-exists specs, per spec
    the specs whose model implies its model and the classes its model forbids, and the
    anomalies that rule snapshot isolation out."""
    names = list(cycles.CYCLE_TYPES)
    bit = {t: 1 << i for i, t in enumerate(names)}

    def mask(types: set[str]) -> int:
        return sum(bit[t] for t in types if t in bit)

    implied = [mask(models.implied_anomalies([t])) for t in names]
    specs = [(m, k, e) for m, k, e in cycles.EXISTS_SPECS]
    spec_models = [m for m, _, _ in specs]
    implying = [sum(1 << j for j, mj in enumerate(spec_models)
                    if mj in models.models_implying([m])) for m in spec_models]
    prohibits = [mask(models.prohibited_by([m])) for m in spec_models]
    si_killers = sorted(a for a in models.depths() if "PL-SI" in models.impossible_models([a]))
    return names, implied, specs, implying, prohibits, si_killers


def columns(txns: list[Txn]) -> tuple[list[bytes], list[str]]:
    """Return the int64 columns (as bytes) and key names ``txn_check2_cols`` takes."""
    from array import array

    cols = [array("q") for _ in range(12)]
    (index, process, outcome, invoke, complete, mop_start, mop_len, f, key, val, rlen,
     reads) = cols
    key_id: dict[str, int] = {}
    for t in txns:
        index.append(t.index)
        process.append(t.process)
        outcome.append(_OUTCOME[t.outcome])
        invoke.append(t.invoke)
        complete.append(t.complete)
        mop_start.append(len(f))
        mop_len.append(len(t.mops))
        for fn, k, v in t.mops:
            f.append(_F[fn])
            kid = key_id.get(k)
            if kid is None:
                kid = key_id[k] = len(key_id)
            key.append(kid)
            if fn != "r":
                val.append(v)
                rlen.append(-1)
            elif v is None:
                val.append(0)
                rlen.append(-1)
            elif isinstance(v, tuple | list):
                val.append(len(reads))
                rlen.append(len(v))
                reads.extend(v)
            else:
                val.append(v)
                rlen.append(-2)
    return [c.tobytes() for c in cols], list(key_id)


def _kind(opts: Options) -> int:
    k = order_kind(opts)
    return 0 if k is None else k


def _result(raw: Any, model: str, opts: Options, check_s: float) -> TxnCheckResult:
    n, anomalies, counts, unfinished, info, anomalous, empty, skipped = raw
    ans = []
    for typ, txns, cycle, key, detail in anomalies:
        steps = None if cycle is None else [
            Step(s, d, _KINDS[k], kk, a, b) for s, d, k, kk, a, b in cycle]
        ans.append(Anomaly(typ, list(txns), cycle=steps, key=key,
                           detail=json.loads(detail) if detail else {}))
    unf = [Unfinished(size, list(sample), list(classes), limit)
           for size, sample, classes, limit in unfinished]
    names = {pos: (index, process) for pos, index, process in info}
    result = check_result(names, model, opts, ans, unf, check_s, "native", empty=empty,
                          n_txns=n, anomalous=anomalous,
                          skipped={"non-client": skipped[0], "non-txn": skipped[1]},
                          counts=dict(counts))
    return result


def _input_error(err: ValueError) -> TxnInputError | ValueError:
    text = str(err)
    if text.startswith("txn-input:"):
        _, index, msg = text.split(":", 2)
        # the core names the model that would take the input as {model}, as the Python
        # checkers do
        return TxnInputError(int(index), msg, MODEL if "{model}" in msg else None)
    return err


def check_native(nat: Any, txns: list[Txn], model: str, opts: Options,
                 deadline_s: float | None, max_steps: int = DEFAULT_MAX_STEPS
                 ) -> TxnCheckResult:
    """Return the native core's check of ``txns`` (raises TxnInputError)."""
    started = time.monotonic()
    cols, keys = columns(txns)
    try:
        raw = nat.txn_check2_cols(cols, keys, model, _kind(opts), opts.wfr_keys, tables(),
                                  deadline_s, max_steps, MAX_PER_TYPE)
    except ValueError as err:
        raise _input_error(err) from None
    return _result(raw, model, opts, time.monotonic() - started)


def check_edn(path: Path, model: str, opts: Options, deadline_s: float | None,
              max_steps: int = DEFAULT_MAX_STEPS) -> TxnCheckResult:
    """Return the native core's check of the EDN history file ``path`` (parsed natively;
    raises TxnInputError naming the line)."""
    import replicalab_native as nat

    started = time.monotonic()
    try:
        raw = nat.txn_check2_edn(str(path), model, _kind(opts), opts.wfr_keys, tables(),
                                 deadline_s, max_steps, MAX_PER_TYPE)
    except ValueError as err:
        raise _input_error(err) from None
    return _result(raw, model, opts, time.monotonic() - started)


def check_table(table: Any, model: str, opts: Options, deadline_s: float | None,
                max_steps: int = DEFAULT_MAX_STEPS) -> TxnCheckResult:
    """Return the native core's check of the ``txn`` rows of a History table as
    ``history.parquet`` holds it (a pyarrow Table; the columns f, type, process,
    invoke_ns, complete_ns, keys and values are used): the micro-ops are decoded natively
    from the Arrow buffers (raises TxnInputError naming the row)."""
    import numpy as np
    import pyarrow as pa
    import replicalab_native as nat

    from replicalab.history.core import TYPE_NAMES

    started = time.monotonic()

    def codes(name: str, names: tuple[str, ...] | None = None) -> Any:
        col = table[name].combine_chunks()
        if not isinstance(col, pa.DictionaryArray):
            col = col.dictionary_encode()
        words = col.dictionary.to_pylist()
        if names is None:
            return np.asarray(words, dtype=object), col.indices.to_numpy(zero_copy_only=False)
        lut = np.array([names.index(w) for w in words], dtype=np.int64)
        return lut[col.indices.to_numpy(zero_copy_only=False)]

    words, f_idx = codes("f")
    proc = table["process"].combine_chunks().to_numpy(zero_copy_only=False)
    is_txn = (words == "txn")[f_idx] if len(words) else np.zeros(0, bool)
    rows = np.flatnonzero(is_txn & (proc >= 0)) if len(words) else np.zeros(0, np.int64)
    # a run of transactions only (the usual case) is used as it is, not copied
    t = table if len(rows) == table.num_rows else table.take(pa.array(rows, pa.int64()))
    typ = codes("type", TYPE_NAMES)[rows] if len(rows) else np.zeros(0, np.int64)
    outcome = np.where(typ == 0, 3, typ).astype(np.int64)  # in flight: unknown

    def ints(name: str) -> Any:
        return t[name].combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64)

    complete = np.where(typ == 0, NEVER, ints("complete_ns"))

    def lists(name: str) -> tuple[bytes, bytes, bytes]:
        col = t[name].combine_chunks()
        strs = col.values
        if strs.offset:
            strs = pa.concat_arrays([strs])
        bufs = strs.buffers()
        str_off = np.frombuffer(bufs[1], np.int32)[strs.offset:strs.offset + len(strs) + 1]
        list_off = col.offsets.to_numpy(zero_copy_only=False).astype(np.int32)
        data = bufs[2].to_pybytes() if bufs[2] is not None else b""
        return list_off.tobytes(), str_off.tobytes(), data

    cols = [rows.astype(np.int64).tobytes(), ints("process").tobytes(), outcome.tobytes(),
            ints("invoke_ns").tobytes(), complete.astype(np.int64).tobytes()]
    try:
        raw = nat.txn_check2_rows(*cols, *lists("keys"), *lists("values"), model,
                                  _kind(opts), opts.wfr_keys, tables(), deadline_s,
                                  max_steps, MAX_PER_TYPE)
    except ValueError as err:
        raise _input_error(err) from None
    return _result(raw, model, opts, time.monotonic() - started)
