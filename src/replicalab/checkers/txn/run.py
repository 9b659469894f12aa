"""Choosing the engine and shaping the answer: :func:`check` runs the native core when
it is built (``replicalab_native.txn_check_cols``) and the pure-Python reference
otherwise; :func:`result_json` is Elle's result map."""

from __future__ import annotations

from typing import Any

from replicalab.checkers.txn.check import check_txns
from replicalab.checkers.txn.types import Txn, TxnCheckResult


def native_core() -> Any:
    """Return the native module if it has the transaction core, else None."""
    try:
        import replicalab_native as nat
    except ImportError:
        return None
    return nat if hasattr(nat, "txn_check_edn") else None


def check(txns: list[Txn], model: str, deadline_s: float | None = None,
          engine: str = "auto") -> TxnCheckResult:
    """Return the check of ``txns`` under ``model`` (``list-append``/``rw-register``) by
    ``engine``: "native", "python" or "auto" (native when built)."""
    nat = native_core() if engine in ("auto", "native") else None
    if engine == "native" and nat is None:
        raise RuntimeError("the native core has no txn_check_cols: rebuild native/")
    if nat is None:
        return check_txns(txns, model, deadline_s=deadline_s)
    from replicalab.checkers.txn.native import check_native

    return check_native(nat, txns, model, deadline_s)


def check_history(h: Any, model: str, deadline_s: float | None = None,
                  engine: str = "auto") -> TxnCheckResult:
    """Return the check of a replicalab History's ``txn`` rows (see :func:`check`)."""
    from replicalab.checkers.txn.prepare import from_history

    return check(from_history(h), model, deadline_s, engine)


def result_json(result: TxnCheckResult) -> dict[str, Any]:
    """Return Elle's result map: ``valid`` (true, false or "unknown"), ``anomaly_types``,
    ``not``, ``also_not``, ``anomalies`` (per type: transactions, cycle steps with their
    explanation), plus what we add (``possible``, ``unfinished``, ``txns``, ``check_s``)."""
    name = result.names

    def step(s: Any) -> dict[str, Any]:
        out = {"from": name[s.src], "to": name[s.dst], "type": s.kind}
        if s.key is not None:
            out.update(key=s.key, a=_plain(s.a), b=_plain(s.b))
        return out

    anomalies = {
        typ: [{"txns": [name[t] for t in an.txns],
               **({"key": an.key} if an.key is not None else {}),
               **({"cycle": [step(s) for s in an.cycle]} if an.cycle is not None else {}),
               **({"detail": {k: _plain(v) for k, v in an.detail.items()}}
                  if an.detail else {}),
               "explanation": an.explanation}
              for an in ans]
        for typ, ans in result.anomalies.items()}
    return {
        "schema_version": result.schema_version, "model": result.model,
        "valid": result.valid, "txns": result.txns,
        "anomaly_types": result.anomaly_types, "counts": result.counts,
        "anomalous_txns": result.anomalous_txns,
        "not": result.not_,
        "also_not": result.also_not, "possible": result.possible,
        "anomalies": anomalies,
        "unfinished": [{"variant": u.variant, "size": u.size,
                        "sample": [name.get(t, f"#{t}") for t in u.sample],
                        "might_hold": u.might_hold} for u in result.unfinished],
        "check_s": round(result.check_s, 3), "engine": result.engine,
    }


def _plain(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    return v
