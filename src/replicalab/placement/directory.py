"""The ownership directory of live migration: record formats and their pure rules.

Two records describe where an object lives, both plain strings kept in the store:

* the **directory entry** ``pldir/<item>/owner`` = ``"<owner region>|<epoch>"``, kept in the
  object's *home* region (its static placement). It is the commit point of a migration and
  only ever changes by a conditional write, each change adding one to the epoch;
* the **ownership mark** ``pl/<item>/meta`` beside the value ``pl/<item>/value`` in every
  region's store that has held the object: ``"<epoch>:own"`` (this region serves it),
  ``"<epoch>:frozen:<to>"`` (a migration to ``<to>`` is copying it: no write is accepted),
  ``"<epoch>:pending"`` (a copy that becomes the owner once the directory says so) or
  ``"<epoch>:gone:<to>"`` (it moved to ``<to>``: a redirect for clients with a stale cache).

The epoch is a fencing token: a region marked ``own`` is always the directory's owner, and a
slow or dead migrator's later conditional writes (which expect the epoch it read) fail once
anyone has moved the object on. The rules below decide, from the two records alone, what a
client or a recovering migrator may do; they do no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

OWN = "own"
FROZEN = "frozen"
PENDING = "pending"
GONE = "gone"
STATES = (OWN, FROZEN, PENDING, GONE)


def value_key(item: str) -> str:
    """Return the store element holding ``item``'s value in a region's store."""
    return f"pl/{item}/value"


def meta_key(item: str) -> str:
    """Return the store element holding ``item``'s ownership mark in a region's store."""
    return f"pl/{item}/meta"


def dir_key(item: str) -> str:
    """Return the store element of ``item``'s directory entry (in its home region)."""
    return f"pldir/{item}/owner"


@dataclass(frozen=True, slots=True)
class Entry:
    """A directory entry: the owner region and the epoch of its ownership."""

    owner: str
    epoch: int

    def encode(self) -> str:
        """Return the stored form ``"<owner>|<epoch>"``."""
        return f"{self.owner}|{self.epoch}"


@dataclass(frozen=True, slots=True)
class Mark:
    """An ownership mark in one region's store: epoch, state and (frozen/gone) target."""

    epoch: int
    state: str
    to: str = ""

    def encode(self) -> str:
        """Return the stored form, e.g. ``"3:own"`` or ``"3:frozen:EU"``."""
        return f"{self.epoch}:{self.state}:{self.to}" if self.to else f"{self.epoch}:{self.state}"


def parse_entry(text: str | None) -> Entry | None:
    """Return the Entry stored as ``text`` (None when absent; ValueError when malformed)."""
    if text is None:
        return None
    owner, sep, epoch = text.rpartition("|")
    if not sep or not owner or not epoch.isdigit():
        raise ValueError(f"malformed directory entry {text!r}: expected '<region>|<epoch>'")
    return Entry(owner, int(epoch))


def parse_mark(text: str | None) -> Mark | None:
    """Return the Mark stored as ``text`` (None when absent; ValueError when malformed)."""
    if text is None:
        return None
    epoch, _, rest = text.partition(":")
    state, _, to = rest.partition(":")
    if not epoch.isdigit() or state not in STATES or (state in (FROZEN, GONE)) != bool(to):
        raise ValueError(f"malformed ownership mark {text!r}: expected '<epoch>:own', "
                         "'<epoch>:pending', '<epoch>:frozen:<region>' or '<epoch>:gone:<region>'")
    return Mark(int(epoch), state, to)


def may_receive_copy(mark: Mark | None, new_epoch: int) -> bool:
    """Return True if a region whose mark is ``mark`` may take a copy for ``new_epoch``.

    Only a region that does not serve the object (no mark, ``gone`` or ``pending``) and whose
    mark is older than the new epoch: a stale migrator's copy never overwrites a newer owner.
    """
    if mark is None:
        return True
    return mark.state in (GONE, PENDING) and mark.epoch < new_epoch


def activation(entry: Entry, mark_at_owner: Mark | None) -> Mark | None:
    """Return the mark the directory's owner must get to serve again, or None if nothing may
    be done (already ``own``, or a state the directory does not account for).

    Two unfinished changes end this way: a committed migration whose copy is still
    ``pending`` at the directory's epoch (roll forward), and a rolled-back migration whose
    old owner is still ``frozen`` one epoch below the directory's (finish the roll-back).
    Either way the value there is the last acknowledged one: nothing was written since.
    """
    if mark_at_owner is None:
        return None
    if mark_at_owner.state == PENDING and mark_at_owner.epoch == entry.epoch:
        return Mark(entry.epoch, OWN)
    if mark_at_owner.state == FROZEN and mark_at_owner.epoch == entry.epoch - 1:
        return Mark(entry.epoch, OWN)
    return None


def retirement(entry: Entry, region: str, mark: Mark | None) -> Mark | None:
    """Return the ``gone`` mark a former owner still ``frozen`` should get once the directory
    has moved on to another region, or None if it needs none."""
    if (mark is None or mark.state != FROZEN or region == entry.owner
            or mark.epoch >= entry.epoch):
        return None
    return Mark(mark.epoch, GONE, mark.to)
