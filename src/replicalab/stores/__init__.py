"""Store adapters behind one protocol, opened from a URL."""

from replicalab.stores.base import (
    ABSENT,
    Client,
    ConditionFailed,
    Element,
    Feature,
    Overloaded,
    ReadResult,
    Store,
    StoreError,
    StoreInfo,
    Unavailable,
    Unsupported,
    WriteResult,
    parse_element,
)
from replicalab.stores.registry import open_store, schemes

__all__ = [
    "ABSENT",
    "Client",
    "ConditionFailed",
    "Element",
    "Feature",
    "Overloaded",
    "ReadResult",
    "Store",
    "StoreError",
    "StoreInfo",
    "Unavailable",
    "Unsupported",
    "WriteResult",
    "open_store",
    "parse_element",
    "schemes",
]
