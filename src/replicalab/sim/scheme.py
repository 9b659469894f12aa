"""What every replication scheme offers the sim store adapter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from replicalab.sim.network import Network


class Scheme(Protocol):
    """A replication scheme running on a :class:`Network` in virtual time."""

    name: ClassVar[str]
    features: ClassVar[frozenset[str]]
    eventual_read_served_by: ClassVar[str]
    net: Network

    def describe(self) -> dict[str, Any]:
        """Return the effective parameters (JSON-ready)."""
        ...

    async def read(self, region: str, keys: Sequence[str], consistent: bool
                   ) -> tuple[tuple[str | None, ...], str]:
        """Return (values, serving node name) for one call from a client in ``region``."""
        ...

    async def write(self, region: str, values: Mapping[str, str | None],
                    expect: Mapping[str, Any] | None) -> str:
        """Apply one write call (None value = delete); return the accepting node's name."""
        ...


def domain_of(key: str) -> str:
    """Return the domain part of a ``domain/item/attribute`` key."""
    return key.split("/", 1)[0]


def expectation_holds(state: Mapping[str, Any], expect: Mapping[str, Any], absent: Any) -> bool:
    """Return True if every expected value matches ``state`` (``absent`` = must not exist)."""
    for key, want in expect.items():
        have = state.get(key)
        if want is absent:
            if have is not None:
                return False
        elif have != want:
            return False
    return True


def settle(fut: Any, value: Any) -> None:
    """Complete ``fut`` with ``value`` now unless it is done already (a caller's timeout
    may have cancelled an asyncio future)."""
    if not fut.done():
        fut.set_result(value)
