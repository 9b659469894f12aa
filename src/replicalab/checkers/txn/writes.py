"""Who wrote what: the write index both transactional models (list-append, rw-register)
start from. Their writes differ only in the micro-op's name, so they share this one pass."""

from __future__ import annotations

from dataclasses import dataclass

from replicalab.checkers.txn.types import FAIL, Txn, TxnInputError


@dataclass(frozen=True)
class WriteOp:
    """How a model spells its write: micro-op ``f``, the verb for messages (present and
    past), the model's name, and the other model's write for the "use the other" hint."""

    f: str
    verb: str
    verb_past: str
    model: str
    other_f: str
    other_model: str


APPEND = WriteOp("append", "appends", "appended", "list-append", "w", "rw-register")
WRITE = WriteOp("w", "writes", "wrote", "rw-register", "append", "list-append")


def index_writes(txns: list[Txn], op: WriteOp
                 ) -> tuple[dict[tuple[str, int], int], dict[tuple[int, str], int],
                            dict[str, list[int]]]:
    """Return who wrote each (key, value) (a transaction's position in ``txns``), each
    transaction's last write per key, and per key the transactions not failed that write it
    (in order, once each); raises TxnInputError for a value written twice to one key or a
    micro-op that is neither ``op.f`` nor a read."""
    writer: dict[tuple[str, int], int] = {}
    last: dict[tuple[int, str], int] = {}
    by_key: dict[str, list[int]] = {}
    for t, txn in enumerate(txns):
        for f, k, v in txn.mops:
            if f == op.f:
                kv = (k, v)
                if kv in writer:
                    other = txns[writer[kv]].index
                    raise TxnInputError(txn.index, f"{op.verb} {v} to key {k}, which T{other} "
                                        f"{op.verb_past} too; {op.model} needs values unique "
                                        "per key")
                writer[kv] = t
                if (t, k) not in last and txn.outcome != FAIL:
                    by_key.setdefault(k, []).append(t)
                last[(t, k)] = v
            elif f != "r":
                raise TxnInputError(txn.index, f"micro-op :{f}; {op.model} takes :{op.f} and "
                                    f":r (for :{op.other_f} use --model {op.other_model})")
    return writer, last, by_key
